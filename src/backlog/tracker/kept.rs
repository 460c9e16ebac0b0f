//! What the Linear and Jira trackers keep alike: the snapshot and the
//! queue of writes under `.ralph/tracker/` (one backlog a project, so the
//! same files whichever tracker), and the back-off after a failure.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::disk::read_json;
use super::interface::Read;
use crate::atomic::write_atomic;
use crate::backlog::github::poll::Fail;
use crate::paths;

/// A tracker's snapshot: it carries the rate limit's end across runs.
pub(crate) trait Snap: Serialize + DeserializeOwned {
    fn not_before(&mut self) -> &mut Option<i64>;
}

pub(crate) struct Kept<S, O> {
    snapshot_path: PathBuf,
    pending_path: PathBuf,
    pub(crate) snapshot: S,
    /// Read from the snapshot file or the API (false: no fallback yet).
    pub(crate) have_snapshot: bool,
    pub(crate) pending: Vec<O>,
    /// Rate limited: nothing is asked before this (Unix seconds).
    pub(crate) limited_until: i64,
    /// Unreachable: not asked again before this, but for a last flush.
    pub(crate) retry_at: i64,
}

impl<S: Snap, O: Serialize + DeserializeOwned> Kept<S, O> {
    /// What is on disk of the project's tracker; a snapshot `fits` refuses
    /// (another team, project, label or tracker) is no fallback, and
    /// `fresh` stands in for it.
    pub(crate) fn load(root: &Path, fits: impl Fn(&S) -> bool, fresh: S) -> Kept<S, O> {
        let snapshot_path = paths::tracker_snapshot(root);
        let pending_path = paths::tracker_pending(root);
        let read = read_json::<S>(&snapshot_path).filter(|s| fits(s));
        let have_snapshot = read.is_some();
        let mut snapshot = read.unwrap_or(fresh);
        Kept {
            snapshot_path,
            limited_until: snapshot.not_before().unwrap_or(0),
            pending: read_json(&pending_path).unwrap_or_default(),
            pending_path,
            retry_at: 0,
            snapshot,
            have_snapshot,
        }
    }

    pub(crate) fn save_pending(&self) -> Result<(), String> {
        let text = serde_json::to_string_pretty(&self.pending).unwrap_or_default();
        write_atomic(&self.pending_path, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", self.pending_path.display()))
    }

    pub(crate) fn save_snapshot(&self) {
        if let Ok(text) = serde_json::to_string(&self.snapshot) {
            let _ = write_atomic(&self.snapshot_path, text.as_bytes());
        }
    }

    /// A read came back: it is the snapshot now, and the back-off ends.
    pub(crate) fn read_ok(&mut self, snapshot: S) {
        self.snapshot = snapshot;
        self.have_snapshot = true;
        self.limited_until = 0;
        self.retry_at = 0;
        self.save_snapshot();
    }

    /// A failure's back-off: a rate limit until its reset, anything else a
    /// short while.
    pub(crate) fn failed(&mut self, fail: &Fail, now: i64) {
        match fail {
            Fail::Limited { until } => {
                self.limited_until = *until;
                *self.snapshot.not_before() = Some(*until);
                self.save_snapshot();
            }
            Fail::Unreachable(_) | Fail::Refused(..) => self.retry_at = now + 5,
        }
    }

    /// Why the tracker is not asked now (`None`: it may be).
    pub(crate) fn waits(&self, now: i64, describe: &str) -> Option<String> {
        let wait = self.limited_until.max(self.retry_at);
        (now < wait).then(|| {
            format!(
                "{describe} is not asked before {wait} (Unix time): rate limited or unreachable"
            )
        })
    }

    /// Whether a flush may ask the tracker now.
    pub(crate) fn may_flush(&self, now: i64, last: bool) -> bool {
        !self.pending.is_empty() && now >= self.limited_until && (now >= self.retry_at || last)
    }

    /// Queues those of `ops` not `done` (from the mapping's `settled`),
    /// on disk before anything is asked: a write cut short by a crash is
    /// made by the next run.
    pub(crate) fn queue(&mut self, ops: Vec<O>, done: Vec<bool>) -> Result<(), String> {
        self.pending.extend(
            ops.into_iter()
                .zip(done)
                .filter(|(_, done)| !done)
                .map(|(op, _)| op),
        );
        self.save_pending()
    }

    /// After a flush: `made` writes leave the queue; the lines for the log.
    pub(crate) fn flushed(
        &mut self,
        made: usize,
        dropped: Vec<String>,
        fail: Option<Fail>,
        now: i64,
        describe: &str,
    ) -> Vec<String> {
        self.save_snapshot();
        self.pending.drain(..made);
        let mut lines: Vec<String> = dropped
            .into_iter()
            .map(|d| format!("{describe}: a write was refused and dropped: {d}"))
            .collect();
        if let Some(fail) = fail {
            lines.push(format!(
                "{describe}: {} writes wait ({})",
                self.pending.len(),
                fail.describe()
            ));
            self.failed(&fail, now);
        }
        if let Err(e) = self.save_pending() {
            lines.push(e);
        }
        lines
    }
}

/// The read of a tracker with no snapshot: `why` it could not be read
/// now (`None`: only the snapshot was asked for); `check` names the
/// settings and credentials a person looks at, `creds` the variables.
pub(crate) fn unread(describe: &str, why: Option<String>, check: &str, creds: &str) -> Read {
    let message = match why {
        Some(why) => format!(
            "the backlog is on {describe} and could not be read, with no snapshot to fall back \
             on: {why}; check {check}"
        ),
        None => format!(
            "the backlog is on {describe} and no snapshot of it was taken yet; \
             `ralph validate --online` (or `ralph run`) reads it, with {creds} set"
        ),
    };
    Read::none(message)
}
