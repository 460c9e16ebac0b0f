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

/// Where `ralph serve` is in the files it follows.
pub(super) struct Follower {
    live: Arc<Live>,
    project: Project,
    run: Option<String>,
    offset: u64,
    partial: String,
    pid: Option<u32>,
    ended: bool,
    state_seen: Option<SystemTime>,
}

impl Follower {
    /// The stories and their graph as the files say now, and the latest
    /// run's records so far: made before the URL is printed, so the first
    /// request already gets the whole picture.
    pub(super) fn new(live: Arc<Live>, project: Project) -> Follower {
        let now = statuses(&project, &live.root);
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
        live.set_graph(stories, project.dag.edges());
        let mut f = Follower {
            live,
            project,
            run: None,
            offset: 0,
            partial: String::new(),
            pid: None,
            ended: false,
            state_seen: None,
        };
        f.step();
        f
    }

    /// One look at the files: new records, whether the run still lives,
    /// the statuses if the state changed.
    fn step(&mut self) {
        let root = self.live.root.clone();
        let latest = runlog::list_runs(&root).pop();
        if latest != self.run {
            self.live.new_run();
            (self.run, self.offset, self.pid, self.ended) = (latest, 0, None, false);
            self.partial.clear();
        }
        if let Some(id) = &self.run {
            let new = read_from(&runlog::run_path(&root, id), self.offset);
            self.offset += new.len() as u64;
            self.partial.push_str(&String::from_utf8_lossy(&new));
            if let Some(cut) = self.partial.rfind('\n') {
                let whole: String = self.partial.drain(..=cut).collect();
                for rec in whole.lines().filter_map(runlog::parse_line) {
                    match &rec.ev {
                        Ev::RunStart { pid: p, .. } => self.pid = Some(*p),
                        ev if ev.ends_run() => self.ended = true,
                        _ => {}
                    }
                    self.live.record(&rec);
                }
            }
        }
        let running = !self.ended && self.pid.is_some_and(alive);
        if !running && self.live.snapshot_live() {
            // Killed: its file never got its end.
            self.live.not_live();
        }
        self.live.set_controls(running);
        let modified = std::fs::metadata(crate::paths::state(&root))
            .and_then(|m| m.modified())
            .ok();
        if modified != self.state_seen {
            self.state_seen = modified;
            let now = statuses(&self.project, &root);
            let n = self.project.backlog.stories.len();
            self.live.set_statuses(n, |i| now[i]);
        }
    }

    /// Follows the files until the process ends.
    pub(super) async fn follow(mut self) {
        loop {
            tokio::time::sleep(POLL).await;
            self.step();
        }
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
