//! The only module that starts child processes: agent attempts, hooks and
//! validation commands. Each child runs in its own process group, carries a
//! unique token in its environment, and is swept (with everything it started,
//! even in new sessions) when it ends.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::watch;

/// Environment variable that marks every process an attempt started.
pub const TOKEN_VAR: &str = "RALPH_ATTEMPT_TOKEN";

/// What to run for one agent attempt.
#[derive(Debug, Clone)]
pub struct AttemptSpec {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// Added to the inherited environment.
    pub env: Vec<(String, String)>,
    /// Removed from the inherited environment (e.g. `CLAUDECODE`).
    pub env_remove: Vec<String>,
    /// Written to stdin, which is then closed.
    pub stdin: Vec<u8>,
    /// stdout and stderr are appended here as they arrive.
    pub log_path: PathBuf,
    pub timeout: Duration,
    pub grace: Duration,
    /// Unique token, exported as `TOKEN_VAR`.
    pub token: String,
}

/// Why the attempt was stopped by ralph, if it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Timeout,
    Interrupted,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptExit {
    /// Exit code, or `None` when killed by a signal.
    pub code: Option<i32>,
    /// The signal that ended it, if any.
    pub signal: Option<i32>,
    /// Set whenever ralph signalled the attempt, whatever it exited with.
    pub stopped: Option<StopReason>,
    pub duration: Duration,
    /// Processes killed by the final sweep.
    pub swept: usize,
}

/// Requests sent to a running attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Run,
    /// Graceful stop: SIGTERM, grace, SIGKILL.
    Stop,
    /// SIGKILL at once.
    Kill,
}

/// Runs one attempt to completion. Each output line (stdout and stderr) is
/// appended to the log and passed to `on_line` as it arrives; nothing is kept
/// in memory. Ends at the process's exit (not pipe EOF), then sweeps every
/// process carrying the token. `control` lets the caller stop it.
pub async fn run_attempt(
    spec: AttemptSpec,
    on_line: impl FnMut(&str) + Send,
    control: watch::Receiver<Control>,
) -> std::io::Result<AttemptExit> {
    let _ = (spec, on_line, control);
    todo!()
}

/// Result of a shell command (hook or validation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellResult {
    pub success: bool,
    pub code: Option<i32>,
    pub timed_out: bool,
    /// Last ~4 KiB of combined output.
    pub tail: String,
}

/// Runs `bash -c cmd` in `cwd` with `env`, in its own group, with a timeout;
/// the group and everything carrying its token is killed afterwards.
pub async fn run_shell(
    cmd: &str,
    cwd: PathBuf,
    env: Vec<(String, String)>,
    timeout: Duration,
) -> std::io::Result<ShellResult> {
    let _ = (cmd, cwd, env, timeout);
    todo!()
}

/// Kills (SIGKILL) every process whose environment has `TOKEN_VAR=token`;
/// returns how many. Never touches processes without our token.
pub fn sweep_token(token: &str) -> usize {
    let _ = token;
    todo!()
}

/// PIDs of live processes whose `TOKEN_VAR` starts with `prefix` (e.g. a
/// project's prefix, to find agents orphaned by a killed run).
pub fn find_by_token_prefix(prefix: &str) -> Vec<i32> {
    let _ = prefix;
    todo!()
}

/// Makes this process a child subreaper, so orphaned grandchildren are
/// re-parented to ralph and can be reaped (Linux; no-op elsewhere).
pub fn become_subreaper() {
    todo!()
}
