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

use crate::config::{BacklogSource, Config};

pub(crate) mod disk;
pub(crate) mod interface;
pub(crate) mod story;

pub(crate) use interface::{Read, Tracker, Update};

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
        BacklogSource::Linear(settings) => {
            Some(super::linear::source::Linear::offline(root, settings.clone()).snapshot())
        }
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
        BacklogSource::Linear(settings) => Some(Box::new(super::linear::source::Linear::open(
            root,
            settings.clone(),
        ))),
    }
}
