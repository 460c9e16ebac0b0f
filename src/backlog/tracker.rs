//! A backlog kept in an issue tracker, behind one interface (issue 27):
//! GitHub Issues today (`github/`); Linear or Jira would be one more
//! implementation of `Tracker` and one more arm in `open`.
//!
//! The files backlog (`stories.txt` and specs, or `prd.json`) needs none of
//! this: it is read by `load` and marked done by `mark_done`, in the
//! repository. A tracker is read over the network (with a snapshot to fall
//! back on) and told of each story's status as the run goes.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Backlog;
use crate::config::{BacklogSource, Config};
use crate::error::Problem;

/// What ralph tells a tracker of a story, in the tracker's own terms
/// once it maps them (GitHub: labels, a comment, the issue closed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Update {
    Running,
    Failed,
    Review,
    /// Landed as `commit` on `target`.
    Landed {
        commit: String,
        target: String,
    },
    /// Back to waiting (a retry after a failure, a reset).
    Pending,
}

/// The backlog as a tracker gave it.
pub(crate) struct Read {
    pub(crate) backlog: Option<Backlog>,
    pub(crate) problems: Vec<Problem>,
    /// Why this is the last snapshot rather than the tracker now.
    pub(crate) stale: Option<String>,
}

pub(crate) trait Tracker: Send {
    /// `GitHub owner/name`, for messages.
    fn describe(&self) -> String;
    /// The backlog now; when the tracker cannot be reached, the last
    /// snapshot (`stale` says why). Never fails a run by itself.
    fn read(&mut self, now: i64) -> Read;
    /// The backlog as the last snapshot has it; asks nothing.
    fn snapshot(&self) -> Read;
    /// Queues `update` of story `id` (persisted before this returns).
    fn tell(&mut self, id: &str, update: Update);
    /// Makes the queued writes that can be made now; returns lines for the
    /// log (a write dropped, why the rest waits). `last`: the run ends, so
    /// an unreachable tracker is asked once more (a rate limit still holds).
    fn flush(&mut self, now: i64, last: bool) -> Vec<String>;
    /// The writes still queued, one line each.
    fn pending(&self) -> Vec<String>;
}

/// The backlog from the tracker's snapshot on disk, if the backlog is in
/// one: every read but the run's and `validate --online`, which must never
/// wait on the network (issue 33: `status` took 20.9 s with a tracker that
/// hung).
pub(crate) fn snapshot(root: &Path, config: &Config) -> Option<Read> {
    match &config.backlog {
        BacklogSource::Files => None,
        BacklogSource::GitHub(settings) => Some(
            super::github::source::GitHub::offline(
                root,
                settings.clone(),
                config.landing.pr_remote.is_some(),
            )
            .snapshot(),
        ),
    }
}

/// Reads the tracker now (the network, bounded by the client's time
/// limits) and keeps what it gave as the snapshot the reads use. `None`
/// without a tracker.
pub(crate) fn refresh(root: &Path, config: &Config) -> Option<Read> {
    let mut t = open(root, config)?;
    Some(t.read(crate::timefmt::now_secs()))
}

/// The tracker the config names, if the backlog is in one.
pub(crate) fn open(root: &Path, config: &Config) -> Option<Box<dyn Tracker>> {
    match &config.backlog {
        BacklogSource::Files => None,
        BacklogSource::GitHub(settings) => Some(Box::new(super::github::source::GitHub::open(
            root,
            settings.clone(),
            config.landing.pr_remote.is_some(),
        ))),
    }
}
