//! What the run records say: `ralph stats` and `ralph report`.

use std::path::{Path, PathBuf};

use crate::error::{RalphError, EXIT_OK};
use crate::report_html;
use crate::stats;

pub(super) fn cmd_stats(
    root: &Path,
    json: bool,
    run: Option<String>,
    all: bool,
) -> anyhow::Result<i32> {
    let runs = crate::runlog::read_all(root);
    let which = match (run, all) {
        (Some(id), _) if !runs.iter().any(|r| r.id == id) => {
            return Err(
                RalphError::usage(format!("no run {id} in {}/", crate::paths::RUNS))
                    .with_hint("`ralph stats --all` lists the recorded runs")
                    .into(),
            )
        }
        (Some(id), _) => stats::Which::Run(id),
        (None, true) => stats::Which::All,
        (None, false) => stats::Which::Latest,
    };
    let s = stats::stats(&runs, &which);
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else if runs.is_empty() {
        println!(
            "No runs recorded yet: `ralph run` records each run in {}/.",
            crate::paths::RUNS
        );
    } else {
        let offset = crate::timefmt::local_offset_secs(crate::timefmt::now_secs());
        print!("{}", stats::render(&s, offset));
    }
    Ok(EXIT_OK)
}

pub(super) fn cmd_report(
    root: &Path,
    run: Option<String>,
    out: Option<PathBuf>,
) -> anyhow::Result<i32> {
    let out = out.unwrap_or_else(|| report_html::default_path(root));
    let bytes = report_html::write(root, run.as_deref(), &out)?;
    println!("report: {} ({} KB)", out.display(), bytes.div_ceil(1024));
    Ok(EXIT_OK)
}
