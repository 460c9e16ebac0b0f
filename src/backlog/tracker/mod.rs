//! A backlog kept in an issue tracker, behind one interface (issue 27):
//! GitHub Issues (`github/`) and Linear (`linear/`); another tracker is
//! one more implementation of `Tracker` and one more arm in `open`.
//!
//! The files backlog (`stories.txt` and specs, or `prd.json`) needs none of
//! this: it is read by `load` and marked done by `mark_done`, in the
//! repository. A tracker is read over the network (with a snapshot to fall
//! back on) and told of each story's status as the run goes.
//!
//! This file picks the tracker the config names (`open`, `snapshot`,
//! `refresh`); `interface.rs` is what every tracker is, which each one
//! implements without importing this choice of them.

use std::path::Path;
use std::time::Duration;

use crate::config::{BacklogSource, Config};

pub(crate) mod disk;
pub(crate) mod edge;
pub(crate) mod interface;
pub(crate) mod kept;
pub(crate) mod story;

pub(crate) use interface::{Read, Tracker, Update};

/// The backlog from the tracker's snapshot on disk, if the backlog is in
/// one: every read but the run's and `validate --online`, which must never
/// wait on the network (issue 33: `status` took 20.9 s with a tracker that
/// hung).
pub(crate) fn snapshot(root: &Path, config: &Config) -> Option<Read> {
    offline(root, config).map(|t| t.snapshot())
}

/// The tracker as its snapshot on disk has it, asking nothing (not even
/// for the token).
fn offline(root: &Path, config: &Config) -> Option<Box<dyn Tracker>> {
    make(root, config, false)
}

fn make(root: &Path, config: &Config, online: bool) -> Option<Box<dyn Tracker>> {
    use super::github::source::GitHub;
    match &config.backlog {
        BacklogSource::Files => None,
        BacklogSource::GitHub(settings) => {
            let (settings, pr) = (settings.clone(), config.landing.pr_remote.is_some());
            Some(Box::new(if online {
                GitHub::open(root, settings, pr)
            } else {
                GitHub::offline(root, settings, pr)
            }))
        }
        BacklogSource::Linear(settings) => {
            use super::linear::source::Linear;
            Some(Box::new(if online {
                Linear::open(root, settings.clone())
            } else {
                Linear::offline(root, settings.clone())
            }))
        }
        BacklogSource::Jira(settings) => {
            use super::jira::source::Jira;
            Some(Box::new(if online {
                Jira::open(root, settings.clone())
            } else {
                Jira::offline(root, settings.clone())
            }))
        }
    }
}

/// How long the run's start waits for the tracker when a snapshot can
/// stand in for it (issue 35, item 3: a tracker that took connections and
/// never answered held every run's start for the client's 20 s).
pub(crate) const START_WAIT: Duration = Duration::from_secs(2);

/// What the run's start got of the tracker (`refresh_within`).
pub(crate) struct StartRead {
    pub(crate) read: Read,
    /// Not answered in time: the read goes on in the background (it keeps
    /// the snapshot when it comes back) and the run starts from the last
    /// snapshot, to poll the tracker at once from its own thread.
    pub(crate) reading_on: bool,
}

/// `refresh`, waiting at most `wait` when there is a snapshot to go on
/// from; without one the backlog must be read first, however long that
/// takes (the client's own limits bound it). `None` without a tracker.
pub(crate) fn refresh_within(root: &Path, config: &Config, wait: Duration) -> Option<StartRead> {
    let last = offline(root, config)?;
    let now = |read| StartRead {
        read,
        reading_on: false,
    };
    let before = last.snapshot();
    if before.backlog.is_none() {
        return refresh(root, config).map(now);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let (at, with) = (root.to_path_buf(), config.clone());
    let spawned = std::thread::Builder::new()
        .name("ralph-tracker-start".into())
        .spawn(move || {
            let _ = tx.send(refresh(&at, &with));
        });
    if spawned.is_err() {
        return refresh(root, config).map(now);
    }
    match rx.recv_timeout(wait) {
        Ok(read) => read.map(now),
        Err(_) => Some(StartRead {
            read: Read {
                stale: Some(format!(
                    "{} did not answer within {} s (the read goes on in the background)",
                    last.describe(),
                    wait.as_secs()
                )),
                ..before
            },
            reading_on: true,
        }),
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
    make(root, config, true)
}
