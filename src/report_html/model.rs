//! What the page shows, as plain data: `render` reads nothing else, so
//! a caller (a test, a run) can build one by hand.

use std::path::Path;

use crate::error::RalphError;
use crate::paths;
use crate::runlog::{self, RunData};
use crate::stats::{self, Stats, Which};
use crate::status::{story_rows, StoryRow};

/// Everything the page shows.
#[derive(Debug, Clone, Default)]
pub(crate) struct PageInput {
    pub(crate) project: String,
    /// Unix time the page was made, and the local UTC offset (seconds).
    pub(crate) generated: i64,
    pub(crate) offset: i32,
    /// The run drawn on the timeline (none before the first run).
    pub(crate) run: Option<RunData>,
    /// That run's figures and the lifetime ones.
    pub(crate) stats: Stats,
    pub(crate) stories: Vec<StoryRow>,
    /// `(a, b)`: b waits for a (indices into `stories`).
    pub(crate) edges: Vec<(usize, usize)>,
}

/// The page's input from the project at `root`: the run `run` (default:
/// the latest), its and the lifetime figures, every story's record.
pub(crate) fn load(root: &Path, run: Option<&str>) -> anyhow::Result<PageInput> {
    let project = crate::project::load(root).map_err(RalphError::BadInput)?;
    let state = crate::store::load_state(root).map_err(|p| RalphError::BadInput(vec![p]))?;
    let runs = runlog::read_all(root);
    let which = match run {
        Some(id) => {
            if !runs.iter().any(|r| r.id == id) {
                return Err(
                    RalphError::usage(format!("no run {id} in {}/", paths::RUNS))
                        .with_hint("`ralph stats --all` lists the recorded runs")
                        .into(),
                );
            }
            Which::Run(id.to_string())
        }
        None => Which::Latest,
    };
    let stats = stats::stats(&runs, &which);
    let shown = stats
        .runs
        .first()
        .and_then(|r| runs.iter().find(|x| x.id == r.id).cloned());
    let stories = story_rows(&project, &state, Some(&stats.lifetime));
    let edges = project.dag.edges();
    let now = crate::timefmt::now_secs();
    Ok(PageInput {
        project: root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| root.display().to_string()),
        generated: now,
        offset: crate::timefmt::local_offset_secs(now),
        run: shown,
        stats,
        stories,
        edges,
    })
}
