//! The GitHub `Tracker`: the snapshot and the write queue on disk
//! (`.ralph/tracker/`), the client, and the back-off after a failure.

use std::path::{Path, PathBuf};

use super::client::{self, Client};
use super::poll::{self, Fail, Http};
use super::{ops_for, to_backlog, Op, Snapshot};
use crate::backlog::tracker::interface::{Read, Tracker, Update};
use crate::config::GitHubSettings;
use crate::paths;

pub(crate) struct GitHub {
    snapshot_path: PathBuf,
    pending_path: PathBuf,
    settings: GitHubSettings,
    http: Box<dyn Http + Send>,
    snapshot: Snapshot,
    /// Read from the snapshot file (false: never read yet, no fallback).
    have_snapshot: bool,
    pending: Vec<Op>,
    /// Writes made since the snapshot was read (`made.json`): the snapshot
    /// does not show them, and a start that cannot read the tracker would
    /// otherwise take a landing whose close was made for one never told,
    /// and comment on it again.
    made: Vec<Op>,
    made_path: PathBuf,
    /// Landing through pull requests: their body closes the issue.
    pr: bool,
    /// Rate limited: nothing is asked before this (Unix seconds).
    limited_until: i64,
    /// Unreachable: not asked again before this, but for a last flush.
    retry_at: i64,
}

impl GitHub {
    pub(crate) fn open(root: &Path, settings: GitHubSettings, pr: bool) -> GitHub {
        let http = Box::new(Client::new(client::token()));
        GitHub::with_http(root, settings, pr, http)
    }

    /// The tracker as the snapshot on disk has it, for reads that must not
    /// touch the network (`status`, `graph`, the web view, a worker):
    /// nothing is asked, not even the token.
    pub(crate) fn offline(root: &Path, settings: GitHubSettings, pr: bool) -> GitHub {
        GitHub::with_http(root, settings, pr, Box::new(Offline))
    }

    pub(crate) fn with_http(
        root: &Path,
        settings: GitHubSettings,
        pr: bool,
        http: Box<dyn Http + Send>,
    ) -> GitHub {
        let snapshot_path = paths::tracker_snapshot(root);
        let pending_path = paths::tracker_pending(root);
        let read: Option<Snapshot> = std::fs::read_to_string(&snapshot_path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            // A snapshot of another repository or label is no fallback.
            .filter(|s: &Snapshot| s.repo == settings.repo && s.label == settings.label);
        let have_snapshot = read.is_some();
        let snapshot = read.unwrap_or_else(|| Snapshot {
            repo: settings.repo.clone(),
            label: settings.label.clone(),
            ..Snapshot::default()
        });
        let pending = std::fs::read_to_string(&pending_path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let made_path = paths::tracker_made(root);
        let made = std::fs::read_to_string(&made_path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        GitHub {
            snapshot_path,
            pending_path,
            made,
            made_path,
            limited_until: snapshot.not_before.unwrap_or(0),
            retry_at: 0,
            settings,
            http,
            snapshot,
            have_snapshot,
            pending,
            pr,
        }
    }

    fn save_pending(&self) -> std::io::Result<()> {
        save_queue(&self.pending_path, &self.pending)
    }

    fn save_snapshot(&self) {
        if let Ok(text) = serde_json::to_string(&self.snapshot) {
            let _ = crate::atomic::write_atomic(&self.snapshot_path, text.as_bytes());
        }
    }

    /// A failure's back-off: a rate limit until its reset, anything else a
    /// short while (a poll or a flush later tries again).
    fn failed(&mut self, fail: &Fail, now: i64) {
        match fail {
            Fail::Limited { until } => {
                self.limited_until = *until;
                self.snapshot.not_before = Some(*until);
                self.save_snapshot();
            }
            Fail::Unreachable(_) | Fail::Refused(..) => self.retry_at = now + 5,
        }
    }
}

pub(crate) use crate::backlog::tracker::story::NewIssue;

impl GitHub {
    /// `ralph plan` on this source: one issue per planned story, in an
    /// order where each one's dependencies exist first (`Depends on #N`
    /// lines name them; `batch:N` labels the batch). The planned IDs and
    /// the issue numbers they became; an error stops at the first failure
    /// (the issues made before it stay, listed by the next read).
    pub(crate) fn create_issues(
        &mut self,
        planned: &[NewIssue],
        known: &std::collections::HashSet<String>,
        label: &str,
    ) -> Result<Vec<(String, u64)>, String> {
        let mut made: Vec<(String, u64)> = Vec::new();
        let mut left: Vec<&NewIssue> = planned.iter().collect();
        while !left.is_empty() {
            let at = left
                .iter()
                .position(|p| {
                    p.depends_on
                        .iter()
                        .all(|d| known.contains(d) || made.iter().any(|(id, _)| id == d))
                })
                .ok_or("the plan's dependencies form a cycle")?;
            let p = left.remove(at);
            let deps: Vec<String> = p
                .depends_on
                .iter()
                .map(|d| {
                    let n = made
                        .iter()
                        .find(|(id, _)| id == d)
                        .map_or(d.clone(), |(_, n)| n.to_string());
                    format!("Depends on #{n}")
                })
                .collect();
            let body = p.body.trim().to_string();
            let body = if deps.is_empty() {
                body
            } else {
                format!("{body}\n\n{}\n", deps.join("\n"))
            };
            let mut labels = vec![label.to_string()];
            labels.extend(p.batch.as_ref().map(|b| format!("batch:{b}")));
            let n = poll::create_issue(
                self.http.as_mut(),
                &self.settings.api_url,
                &self.settings.repo,
                &p.title,
                &body,
                &labels,
                crate::timefmt::now_secs(),
            )
            .map_err(|f| f.describe())?;
            made.push((p.id.clone(), n));
        }
        Ok(made)
    }
}

impl Tracker for GitHub {
    fn describe(&self) -> String {
        format!("GitHub {}", self.settings.repo)
    }

    fn read(&mut self, now: i64) -> Read {
        let wait = self.limited_until.max(self.retry_at);
        let stale = if now < wait {
            Some(format!(
                "{} is not asked before {wait} (Unix time): rate limited or unreachable",
                self.describe(),
            ))
        } else {
            match poll::poll(
                self.http.as_mut(),
                &self.settings.api_url,
                &self.snapshot,
                now,
            ) {
                Ok(snap) => {
                    self.snapshot = snap;
                    self.have_snapshot = true;
                    // The read shows every write this tracker made before it.
                    if !self.made.is_empty() {
                        self.made.clear();
                        let _ = std::fs::remove_file(&self.made_path);
                    }
                    self.limited_until = 0;
                    self.retry_at = 0;
                    self.save_snapshot();
                    None
                }
                Err(fail) => {
                    self.failed(&fail, now);
                    Some(format!("{}: {}", self.describe(), fail.describe()))
                }
            }
        };
        if !self.have_snapshot {
            let why = stale.unwrap_or_default();
            return Read::none(format!(
                        "the backlog is on {} and could not be read, with no snapshot to fall back on: {why}; \
                         check backlog.github.repo and .api_url, and the token (GITHUB_TOKEN or `gh auth login`)",
                        self.describe()
                    ));
        }
        Read {
            stale,
            ..self.snapshot()
        }
    }

    fn snapshot(&self) -> Read {
        if !self.have_snapshot {
            return Read::none(format!(
                "the backlog is on {} and no snapshot of it was taken yet; \
                         `ralph validate --online` (or `ralph run`) reads it",
                self.describe()
            ));
        }
        let (backlog, problems) = to_backlog(&self.snapshot);
        Read {
            backlog: Some(backlog),
            problems,
            stale: None,
        }
    }

    fn tell(&mut self, id: &str, update: Update) -> Result<(), String> {
        let Ok(issue) = id.parse::<u64>() else {
            return Ok(());
        };
        super::enqueue(&mut self.pending, ops_for(issue, &update, self.pr));
        // The queue is on disk before anything is asked: a write cut short
        // by a crash is made by the next run.
        self.save_pending()
            .map_err(|e| format!("cannot write {}: {e}", self.pending_path.display()))
    }

    fn has(&self, id: &str, update: &Update) -> bool {
        // Not an issue number: nothing this tracker would ever write.
        let Ok(number) = id.parse::<u64>() else {
            return true;
        };
        let mut issue = self.snapshot.issues().find(|i| i.number == number).cloned();
        if let Some(i) = issue.as_mut() {
            for op in self.made.iter().filter(|o| o.issue() == number) {
                super::apply(i, op);
            }
        }
        super::settled(
            &ops_for(number, update, self.pr),
            &self.pending,
            issue.as_ref(),
        )
    }

    fn flush(&mut self, now: i64, last: bool) -> Vec<String> {
        if self.pending.is_empty() || now < self.limited_until || (now < self.retry_at && !last) {
            return Vec::new();
        }
        let ops = std::mem::take(&mut self.pending);
        let (path, made_path) = (&self.pending_path, &self.made_path);
        let before = self.made.len();
        let made_list = &mut self.made;
        let mut unsaved = None;
        let (done, dropped, fail) = poll::flush(
            self.http.as_mut(),
            &self.settings.api_url,
            &self.settings.repo,
            &ops,
            now,
            &mut |made| {
                // What was made is kept before it leaves the queue: a kill
                // in between makes it again rather than forget it was made.
                made_list.truncate(before);
                made_list.extend_from_slice(&ops[..made]);
                let saved =
                    save_queue(made_path, made_list).and_then(|()| save_queue(path, &ops[made..]));
                if let Err(e) = saved {
                    unsaved.get_or_insert(format!("cannot write {}: {e}", path.display()));
                }
            },
        );
        self.pending = ops;
        self.pending.drain(..done);
        let mut lines: Vec<String> = dropped
            .into_iter()
            .map(|d| format!("{}: a write was refused and dropped: {d}", self.describe()))
            .collect();
        if let Some(fail) = fail {
            lines.push(format!(
                "{}: {} writes wait ({})",
                self.describe(),
                self.pending.len(),
                fail.describe()
            ));
            self.failed(&fail, now);
        }
        lines.extend(unsaved);
        lines
    }

    fn pending(&self) -> Vec<String> {
        self.pending.iter().map(Op::describe).collect()
    }
}

/// The client of `GitHub::offline`: asks nothing.
struct Offline;

impl Http for Offline {
    fn request(&mut self, _req: super::poll::Req<'_>) -> Result<super::poll::Resp, String> {
        Err("not asked: this command reads the snapshot only".into())
    }
}

/// The write queue on disk, through the run's atomic writer: a queue cut
/// short by a crash is the old one or the new one, never half of one.
fn save_queue(path: &Path, ops: &[Op]) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(ops).unwrap_or_default();
    crate::atomic::write_atomic(path, text.as_bytes())
}
