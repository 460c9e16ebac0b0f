//! What attempts and landings share, read-only, for one run.

use std::path::PathBuf;
use std::time::Duration;

use crate::config::{Config, ValidationCommand};
use crate::gitops::Git;
use crate::store::TechLog;

#[derive(Debug)]
pub(crate) struct RunContext {
    pub(crate) root: PathBuf,
    pub(crate) config: Config,
    pub(crate) git: Git,
    pub(crate) target: String,
    /// Wall-clock limit of one agent attempt (and of a validation command).
    pub(crate) timeout: Duration,
    /// The project tag every attempt token starts with.
    pub(crate) tag: String,
    pub(crate) required_validation: Vec<ValidationCommand>,
    pub(crate) log: TechLog,
    /// The agent executable, resolved once at start.
    pub(crate) agent_program: String,
    /// The backlog is a prd.json (whose `passes` a landing sets).
    pub(crate) prd: bool,
}

/// Serialises every worktree preparation of this process: libgit2 does not
/// guard concurrent worktree creation in one repository (the admin dir and
/// the checked-out check race), and releasing a branch from another slot
/// must not race that slot.
pub(crate) static WORKTREE_PREP: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `(key, value)` pairs for a child's environment.
pub(crate) fn env_pairs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
