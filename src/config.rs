//! `.ralph/config.json`: deep-merged over the built-in defaults (SPEC 3.1).
//!
//! Pure apart from `load`, which reads the one file.

use std::path::Path;

use serde_json::Value;

use crate::error::Problem;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationCommand {
    pub name: String,
    pub cmd: String,
    pub required: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hooks {
    pub pre_iteration: String,
    pub pre_story: String,
    pub post_story: String,
    pub post_iteration: String,
    pub pre_worktree: String,
}

/// The effective configuration after merging.
#[derive(Debug, Clone)]
pub struct Config {
    /// The merged JSON (unknown keys kept).
    pub raw: Value,
    pub specs_pattern: String,
    pub status_field: String,
    pub max_iterations: u64,
    pub timeout_secs: u64,
    pub max_retries: u32,
    pub validation: Vec<ValidationCommand>,
    pub blocked_commands: Vec<String>,
    /// `claude.command` (default `claude`): the agent executable.
    pub agent_command: String,
    /// `claude.flags`; `None` means the default flags of SPEC 4.2.
    pub agent_flags: Option<Vec<String>>,
    pub commit_format: String,
    pub stage_paths: Vec<String>,
    pub learnings_enabled: bool,
    pub learnings_max: usize,
    pub parallel_enabled: bool,
    pub max_concurrent: usize,
    pub hooks: Hooks,
    /// `loop.grace_seconds` (default 10): SIGTERM → SIGKILL grace period.
    pub grace_secs: u64,
}

pub const DEFAULT_AGENT_FLAGS: &[&str] = &[
    "--print",
    "--dangerously-skip-permissions",
    "--output-format",
    "stream-json",
    "--verbose",
];

/// The built-in defaults as JSON (SPEC 3.1).
pub fn defaults() -> Value {
    todo!()
}

/// Deep merge: objects merge key by key, arrays and scalars replace.
pub fn deep_merge(base: &mut Value, over: Value) {
    let _ = (base, over);
    todo!()
}

/// Builds a `Config` from merged JSON; every problem is reported against `file`.
pub fn from_value(raw: Value, file: &Path) -> Result<Config, Vec<Problem>> {
    let _ = (raw, file);
    todo!()
}

/// Reads `<root>/.ralph/config.json` (optional) and merges it over the defaults.
pub fn load(root: &Path) -> Result<Config, Vec<Problem>> {
    let _ = root;
    todo!()
}
