//! `ralph serve`'s side of a run it does not own: the latest run's
//! records file read as it grows (each new line through the same fold as
//! a live run's records) and the state file read again when it changes,
//! for each story's status. The run owns both files; this only reads.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::live::Live;
use super::model::StoryView;
use crate::project::Project;
use crate::runlog::{self, Ev};

/// How often the files are looked at.
const POLL: Duration = Duration::from_millis(200);

/// The status of each story from the state on disk.
fn statuses(project: &Project, root: &std::path::Path) -> Vec<&'static str> {
    let state = crate::store::load_state(root).unwrap_or_default();
    crate::status::view(project, &state)
        .nodes
        .iter()
        .map(|n| n.word())
        .collect()
}

fn alive(pid: u32) -> bool {
    std::fs::metadata(format!("/proc/{pid}")).is_ok()
}

pub(super) async fn follow(live: Arc<Live>, project: Project) {
    let root = live.root.clone();
    let now = statuses(&project, &root);
    let stories = project
        .backlog
        .stories
        .iter()
        .zip(&now)
        .map(|(s, &status)| StoryView {
            id: s.id.clone(),
            title: s.title.clone(),
            status,
        })
        .collect();
    let edges = project.dag.edges();
    live.set_graph(stories, edges);
    let n = project.backlog.stories.len();
    let mut run: Option<String> = None;
    let mut offset = 0u64;
    let mut partial = String::new();
    let mut pid: Option<u32> = None;
    let mut ended = false;
    let mut state_seen: Option<SystemTime> = None;
    loop {
        let latest = runlog::list_runs(&root).pop();
        if latest != run {
            live.new_run();
            (run, offset, pid, ended) = (latest, 0, None, false);
            partial.clear();
        }
        if let Some(id) = &run {
            let new = read_from(&runlog::run_path(&root, id), offset);
            offset += new.len() as u64;
            partial.push_str(&String::from_utf8_lossy(&new));
            if let Some(cut) = partial.rfind('\n') {
                let whole: String = partial.drain(..=cut).collect();
                for rec in whole.lines().filter_map(runlog::parse_line) {
                    match &rec.ev {
                        Ev::RunStart { pid: p, .. } => pid = Some(*p),
                        ev if ev.ends_run() => ended = true,
                        _ => {}
                    }
                    live.record(&rec);
                }
            }
        }
        let running = !ended && pid.is_some_and(alive);
        if !running && live.snapshot_live() {
            // Killed: its file never got its end.
            live.not_live();
        }
        live.set_controls(running);
        let modified = std::fs::metadata(crate::paths::state(&root))
            .and_then(|m| m.modified())
            .ok();
        if modified != state_seen {
            state_seen = modified;
            let now = statuses(&project, &root);
            live.set_statuses(n, |i| now[i]);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// What `path` holds from `offset` on (empty when nothing new).
fn read_from(path: &std::path::Path, offset: u64) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut out = Vec::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        if f.seek(SeekFrom::Start(offset)).is_ok() {
            let _ = f.take(16 << 20).read_to_end(&mut out);
        }
    }
    out
}
