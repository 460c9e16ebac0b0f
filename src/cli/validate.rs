//! `ralph validate`: every problem of the config and backlog; changes nothing.

use std::path::Path;

use super::warn_if_empty;
use crate::error::{RalphError, EXIT_OK};
use crate::executor::ExecutorChoice;
use crate::project;
use crate::ui;

pub(super) fn cmd_validate(root: &Path, online: bool) -> anyhow::Result<i32> {
    // An issue tracker is asked only when told to, or when there is no
    // snapshot of it to check yet.
    let tracked =
        crate::config::load(root).is_ok_and(|c| c.backlog != crate::config::BacklogSource::Files);
    if tracked && (online || !crate::paths::tracker_snapshot(root).exists()) {
        if let Some(why) = project::refresh_tracker(root).map_err(RalphError::BadInput)? {
            eprintln!("warning: checked the tracker's last snapshot: {why}");
        }
    }
    let loaded = project::load(root);
    // The config's unknown keys are said with the errors, not after them.
    let warnings = match &loaded {
        Ok(p) => p.config.warning_lines(),
        Err(_) => crate::config::key_warning_lines(root),
    };
    let on = ui::stderr_colors();
    for w in warnings {
        if !ui::get().quiet {
            eprintln!("{}", ui::paint_tag(&w, on));
        }
    }
    let project = loaded.map_err(RalphError::BadInput)?;
    if let Some(note) = crate::agent::claude_flags_note(&project.config.agent) {
        if !ui::get().quiet {
            eprintln!("{note}");
        }
    }
    // Every agent CLI the backlog would run must be installed (here, or
    // on the cluster's nodes, which must answer).
    let executor_lines = crate::exec::validate(&project)?;
    let agents = crate::exec::ByConfig.agents(&project, project.config.agent.name)?;
    let sandbox = crate::exec::sandbox_line(&project, &agents)?;
    let edges = project.dag.graph.edge_count();
    println!(
        "ok: {}, {}, no problems",
        crate::report::counted(project.backlog.stories.len(), "story", "stories"),
        crate::report::counted(edges, "dependency edge", "dependency edges")
    );
    for l in executor_lines {
        println!("{l}");
    }
    println!("sandbox: {sandbox}");
    warn_if_empty(&project);
    Ok(EXIT_OK)
}
