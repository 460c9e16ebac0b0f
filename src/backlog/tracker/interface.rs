//! What a tracker is to ralph, whichever it is: the `Tracker` trait, the
//! `Read` it gives and the `Update`s it is told. Below both the choice of
//! tracker (`tracker/mod.rs`) and each implementation (`github/source.rs`),
//! so neither imports the other's side.

use serde::{Deserialize, Serialize};

use crate::backlog::Backlog;
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

impl Read {
    /// No backlog at all: `why` (naming the tracker and what to do) is the
    /// one problem, said against the config.
    pub(crate) fn none(why: String) -> Read {
        Read {
            backlog: None,
            problems: vec![Problem::new(crate::paths::CONFIG, None, why)],
            stale: None,
        }
    }
}

pub(crate) trait Tracker: Send {
    /// `GitHub owner/name`, for messages.
    fn describe(&self) -> String;
    /// The backlog now; when the tracker cannot be reached, the last
    /// snapshot (`stale` says why). Never fails a run by itself.
    fn read(&mut self, now: i64) -> Read;
    /// The backlog as the last snapshot has it; asks nothing.
    fn snapshot(&self) -> Read;
    /// Queues `update` of story `id`, persisted before this returns (`Err`:
    /// the queue could not be written, the update is not durably queued).
    fn tell(&mut self, id: &str, update: Update) -> Result<(), String>;
    /// Whether `update` of story `id` needs no telling: made already, as
    /// the last read has it, or queued. Asks nothing.
    fn has(&self, id: &str, update: &Update) -> bool;
    /// Makes the queued writes that can be made now; returns lines for the
    /// log (a write dropped, why the rest waits). `last`: the run ends, so
    /// an unreachable tracker is asked once more (a rate limit still holds).
    fn flush(&mut self, now: i64, last: bool) -> Vec<String>;
    /// The writes still queued, one line each.
    fn pending(&self) -> Vec<String>;
}
