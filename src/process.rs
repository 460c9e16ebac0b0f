//! The only module that starts child processes: agent attempts, hooks and
//! validation commands. Each child runs in its own process group, carries a
//! unique token in its environment, and, where one can be made, runs in a
//! cgroup of its own; when it ends, everything it started is swept, even
//! processes in new sessions.

mod captured;
mod cgroup;
mod command;
mod gitprocs;
pub(crate) mod memory;
mod startable;
mod sweep;

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::redact::{Secrets, Stream};
pub(crate) use captured::run_captured;
pub(crate) use startable::{can_start, CannotStart};

use command::{command_for, join_at_exec};
pub(crate) use gitprocs::{ticks_now, Checkout as GitCheckout};
use sweep::*;
pub(crate) use sweep::{
    become_subreaper, kill_by_token_prefix, lock_may_be_held, pid_is_alive, probe_cgroups,
};

/// Environment variable that marks every process an attempt started.
pub(crate) const TOKEN_VAR: &str = "RALPH_ATTEMPT_TOKEN";

/// What to run for one agent attempt.
#[derive(Debug, Clone)]
pub(crate) struct AttemptSpec {
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
    pub(crate) cwd: PathBuf,
    /// Added to the inherited environment.
    pub(crate) env: Vec<(String, String)>,
    /// Removed from the inherited environment (e.g. `CLAUDECODE`).
    pub(crate) env_remove: Vec<String>,
    /// Written to stdin, which is then closed.
    pub(crate) stdin: Vec<u8>,
    /// stdout and stderr are appended here as they arrive.
    pub(crate) log_path: PathBuf,
    pub(crate) timeout: Duration,
    /// Longest stretch without a line of output before the attempt is
    /// stopped like a timeout (a CLI hung after a usage limit, say).
    pub(crate) idle: Option<Duration>,
    pub(crate) grace: Duration,
    /// Unique token, exported as `TOKEN_VAR`.
    pub(crate) token: String,
    /// How the child is sealed (`None`: today's inherited environment).
    pub(crate) seal: Option<Seal>,
    /// Values replaced by `***` in its output before anything reads it.
    pub(crate) redact: Arc<Secrets>,
}

/// A sealed child (SPEC 9): the environment it gets instead of ralph's,
/// and bubblewrap's executable and arguments (up to `--`) when it runs
/// confined.
#[derive(Debug, Clone, Default)]
pub(crate) struct Seal {
    pub(crate) env: Vec<(String, String)>,
    pub(crate) bwrap: Option<(PathBuf, Vec<String>)>,
    /// What the child and everything it starts may use together (an
    /// agent attempt's `sandbox.limits`).
    pub(crate) limits: crate::sandbox::Limits,
}

/// Why the attempt was stopped by ralph, if it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    Timeout,
    /// No output for the idle limit.
    Idle,
    Interrupted,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AttemptExit {
    /// Exit code, or `None` when killed by a signal.
    pub(crate) code: Option<i32>,
    /// The signal that ended it, if any.
    pub(crate) signal: Option<i32>,
    /// Set whenever ralph signalled the attempt, whatever it exited with.
    pub(crate) stopped: Option<StopReason>,
    pub(crate) duration: Duration,
    /// Processes killed by the final sweep.
    pub(crate) swept: usize,
    /// A `sandbox.limits` cap the attempt ran into.
    pub(crate) limit: Option<crate::sandbox::LimitHit>,
}

pub(crate) use crate::control::Control;

/// Longest line handed to `on_line`; longer ones are split, so a child that
/// prints without newlines cannot make us buffer its whole output.
pub(crate) const MAX_LINE: usize = 1024 * 1024;

/// How long output is still read after the child exited and was swept: long
/// enough for what is already in the pipes, short enough that a process we
/// could not find (one that dropped its token) cannot hold the attempt open.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

const SHELL_GRACE: Duration = Duration::from_secs(2);
const SHELL_TAIL: usize = 4096;

/// Bound on sweep rounds: a process may fork between our scan and our kill,
/// or take a moment to die; neither may keep us looping forever.
const SWEEP_ROUNDS: u32 = 100;
const SWEEP_PAUSE: Duration = Duration::from_millis(5);

/// Pipe read size and the number of batches in flight per attempt; together
/// with `MAX_LINE` they bound the memory an attempt's output can take.
const READ_CHUNK: usize = 64 * 1024;
const BATCHES_IN_FLIGHT: usize = 16;

static SUBREAPER: AtomicBool = AtomicBool::new(false);
static TOKEN_COUNTER: AtomicU64 = AtomicU64::new(0);

/// PIDs of the children tokio is waiting for. The orphan reaper must never
/// take one of their exit statuses, so spawning and reaping share this lock.
static CHILDREN: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

fn children() -> MutexGuard<'static, BTreeSet<i32>> {
    CHILDREN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Prefix of hook and validation tokens: the project's tag, so that a
/// hook orphaned by a killed run is found like an orphaned agent.
static SHELL_TOKEN_PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets the token prefix of `run_shell` children (once per process).
pub(crate) fn set_shell_token_prefix(prefix: &str) {
    let _ = SHELL_TOKEN_PREFIX.set(prefix.to_string());
}

/// A token no other attempt of any ralph process on this machine carries:
/// `<prefix>-<pid>-<counter>-<nanos>`.
pub(crate) fn unique_token(prefix: &str) -> String {
    let n = TOKEN_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{n}-{nanos}", std::process::id())
}

/// Runs one attempt to completion. Each output line (stdout and stderr) is
/// appended to the log and passed to `on_line` as it arrives; nothing is kept
/// in memory. Ends at the process's exit (not pipe EOF), then sweeps every
/// process carrying the token. `control` lets the caller stop it, and so
/// does `on_line` returning true (what the agent said shows that going on
/// is pointless): a graceful stop, as `Control::Stop`.
pub(crate) async fn run_attempt(
    spec: AttemptSpec,
    mut on_line: impl FnMut(&str) -> bool + Send,
    control: watch::Receiver<Control>,
) -> std::io::Result<AttemptExit> {
    let log = open_private_log(&spec.log_path)?;
    supervise(spec, Some(BufWriter::new(log)), &mut on_line, control).await
}

/// Opens `path` for appending, readable by the user only (it holds agent
/// output), making its missing directories likewise (0700).
pub(crate) fn open_private_log(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = path.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// Whether bubblewrap works here: found along `path` and able to start a
/// trial sandbox with the namespaces ralph's use. Returns its executable.
pub(crate) fn probe_bwrap(path: &str) -> (crate::sandbox::Probe, Option<PathBuf>) {
    use crate::sandbox::Probe;
    let Some(bwrap) = crate::sandbox::which("bwrap", path, Path::new("/")) else {
        return (Probe::Missing, None);
    };
    let trial = std::process::Command::new(&bwrap)
        .args([
            "--unshare-all",
            "--share-net",
            "--die-with-parent",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--",
            "true",
        ])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match trial {
        Ok(out) if out.status.success() => (Probe::Works, Some(bwrap)),
        Ok(out) => {
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            let err = if err.is_empty() {
                format!("a trial sandbox exited {:?}", out.status.code())
            } else {
                err
            };
            (Probe::Broken(err), None)
        }
        Err(e) => (Probe::Broken(e.to_string()), None),
    }
}

/// Result of a shell command (hook or validation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShellResult {
    pub(crate) success: bool,
    pub(crate) code: Option<i32>,
    pub(crate) timed_out: bool,
    /// Stopped through the caller's control channel.
    pub(crate) interrupted: bool,
    /// Last ~4 KiB of combined output.
    pub(crate) tail: String,
}

/// Runs `bash -c cmd` in `cwd` with `env`, in its own group, with a timeout;
/// the group and everything carrying its token is killed afterwards.
pub(crate) async fn run_shell(
    cmd: &str,
    cwd: PathBuf,
    env: Vec<(String, String)>,
    timeout: Duration,
) -> std::io::Result<ShellResult> {
    // Nothing but its timeout stops a hook.
    let (_control_tx, control) = watch::channel(Control::Run);
    run_shell_controlled(cmd, cwd, env, timeout, control, None).await
}

/// `run_shell` that the caller can also stop (Ctrl-C during a long
/// validation command); `ShellResult::interrupted` tells it happened. With
/// `log`, the whole output is also appended there.
pub(crate) async fn run_shell_controlled(
    cmd: &str,
    cwd: PathBuf,
    env: Vec<(String, String)>,
    timeout: Duration,
    control: watch::Receiver<Control>,
    log: Option<&Path>,
) -> std::io::Result<ShellResult> {
    run_shell_sealed(
        cmd,
        cwd,
        env,
        timeout,
        control,
        log,
        None,
        Arc::default(),
        Vec::new(),
    )
    .await
}

/// `run_shell_controlled` for a command that runs code an agent wrote (a
/// validation command, a hook in its worktree): with `seal`'s environment
/// (and inside bubblewrap when it says so), its output redacted. Without
/// a seal it inherits ralph's environment less `unsealed_remove` (a
/// tracker's token).
#[expect(
    clippy::too_many_arguments,
    reason = "the shell runner's knobs, passed through"
)]
pub(crate) async fn run_shell_sealed(
    cmd: &str,
    cwd: PathBuf,
    env: Vec<(String, String)>,
    timeout: Duration,
    control: watch::Receiver<Control>,
    log: Option<&Path>,
    seal: Option<Seal>,
    redact: Arc<Secrets>,
    unsealed_remove: Vec<String>,
) -> std::io::Result<ShellResult> {
    let env_remove = if seal.is_none() {
        unsealed_remove
    } else {
        Vec::new()
    };
    let log = match log {
        Some(path) => Some(BufWriter::new(open_private_log(path)?)),
        None => None,
    };
    let spec = AttemptSpec {
        program: "bash".into(),
        args: vec!["-c".into(), cmd.into()],
        cwd,
        env,
        env_remove,
        stdin: Vec::new(),
        log_path: PathBuf::new(),
        timeout,
        idle: None,
        grace: SHELL_GRACE,
        token: unique_token(&format!(
            "{}shell",
            SHELL_TOKEN_PREFIX
                .get()
                .map(String::as_str)
                .unwrap_or("ralph-")
        )),
        seal,
        redact,
    };
    let mut tail = String::new();
    let mut on_line = |line: &str| {
        tail.push_str(line);
        tail.push('\n');
        if tail.len() > 2 * SHELL_TAIL {
            let cut = floor_char_boundary(&tail, tail.len() - SHELL_TAIL);
            tail.drain(..cut);
        }
        false
    };
    let exit = supervise(spec, log, &mut on_line, control).await?;
    if tail.len() > SHELL_TAIL {
        let cut = floor_char_boundary(&tail, tail.len() - SHELL_TAIL);
        tail.drain(..cut);
    }
    let timed_out = exit.stopped == Some(StopReason::Timeout);
    let interrupted = exit.stopped == Some(StopReason::Interrupted);
    Ok(ShellResult {
        success: exit.code == Some(0) && exit.stopped.is_none(),
        code: exit.code,
        timed_out,
        interrupted,
        tail,
    })
}

fn floor_char_boundary(s: &str, mut idx: usize) -> usize {
    while idx > 0 && !s.is_char_boundary(idx) {
        idx -= 1;
    }
    idx
}

/// Kills what is left of an attempt if its future is dropped before the end
/// (tokio's `kill_on_drop` would only kill the leader). The sweep blocks for
/// a moment, which is acceptable on this abnormal path only.
struct Leftovers {
    pid: i32,
    token: String,
    cgroup: Option<cgroup::Cgroup>,
    limiter: Option<cgroup::Limiter>,
    tasks: Vec<JoinHandle<()>>,
    armed: bool,
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        if self.armed {
            signal_group(self.pid, libc::SIGKILL);
            if let Some(cg) = self.cgroup.take() {
                cg.kill_and_remove();
            }
            if let Some(l) = self.limiter.take() {
                l.kill_and_remove();
            }
            sweep_token(&self.token);
            children().remove(&self.pid);
        }
    }
}

/// Progress of ralph's own stop request.
struct Stopper {
    pgid: i32,
    token: String,
    /// The attempt's cgroup directory (owned by `Leftovers`).
    cgroup_dir: Option<PathBuf>,
    grace: Duration,
    stopped: Option<StopReason>,
    killed: bool,
}

impl Stopper {
    /// SIGTERM now; the returned deadline is when SIGKILL follows.
    async fn terminate(&mut self, why: StopReason) -> Option<tokio::time::Instant> {
        if self.stopped.is_some() {
            return None;
        }
        self.stopped = Some(why);
        if self.grace.is_zero() {
            self.kill(why).await;
            return None;
        }
        self.signal_all(libc::SIGTERM).await;
        tokio::time::Instant::now()
            .checked_add(self.grace)
            .or_else(|| Some(far_future()))
    }

    async fn kill(&mut self, why: StopReason) {
        self.stopped.get_or_insert(why);
        if !self.killed {
            self.killed = true;
            self.signal_all(libc::SIGKILL).await;
        }
    }

    /// The group gets it, and so does every process that left the group but
    /// kept the token (tool commands run in sessions of their own).
    async fn signal_all(&self, sig: i32) {
        signal_group(self.pgid, sig);
        let token = self.token.clone();
        let pgid = self.pgid;
        let cgroup_dir = self.cgroup_dir.clone();
        let _ = tokio::task::spawn_blocking(move || {
            // Group members got it already; a second SIGTERM can read as
            // "exit now" to a program that handles the first one.
            let in_group = |pid| proc_stat(pid).is_some_and(|st| st.pgrp == pgid);
            let needle = token_entry(&token);
            let mut done = BTreeSet::new();
            for pid in scan_proc(|entry| entry == needle.as_bytes()) {
                if !in_group(pid) {
                    signal_if(pid, sig, |p| has_entry(p, |e| e == needle.as_bytes()));
                }
                done.insert(pid);
            }
            if let Some(dir) = cgroup_dir {
                for pid in cgroup::pids_in(&dir) {
                    if !in_group(pid) && !done.contains(&pid) {
                        signal_if(pid, sig, |p| cgroup::holds(&dir, p));
                    }
                }
            }
        })
        .await;
    }
}

fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(100 * 365 * 86_400)
}

async fn supervise(
    mut spec: AttemptSpec,
    mut log: Option<BufWriter<File>>,
    on_line: &mut (dyn FnMut(&str) -> bool + Send),
    mut control: watch::Receiver<Control>,
) -> io::Result<AttemptExit> {
    if spec.token.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "attempt token is empty",
        ));
    }
    let start = Instant::now();
    let stdin_data = std::mem::take(&mut spec.stdin);

    let mut cmd = command_for(&spec)?;
    let cgroup = cgroup::Cgroup::create(&spec.token);
    let limits = spec.seal.as_ref().map(|s| s.limits).unwrap_or_default();
    let limiter = cgroup::Limiter::create(&spec.token, limits, cgroup.as_ref());
    let mut join: Vec<File> = cgroup
        .iter()
        .filter_map(cgroup::Cgroup::procs_file)
        .collect();
    join.extend(limiter.procs_files());
    join_at_exec(&mut cmd, &join, limiter.rlimits());
    cmd.stdin(if stdin_data.is_empty() {
        Stdio::null()
    } else {
        Stdio::piped()
    });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.kill_on_drop(true);

    let mut child = {
        let mut registry = children();
        let child = cmd.spawn()?;
        if let Some(pid) = child.id() {
            registry.insert(pid as i32);
        }
        child
    };
    drop(join);
    let Some(pid) = child.id().map(|p| p as i32) else {
        return Err(io::Error::other("child exited before its pid was known"));
    };
    let cgroup_dir = cgroup.as_ref().map(|c| c.dir().to_path_buf());
    let mut leftovers = Leftovers {
        pid,
        token: spec.token.clone(),
        cgroup,
        limiter: Some(limiter),
        tasks: Vec::new(),
        armed: true,
    };

    let mut rx = spawn_io(&mut child, &spec.redact, stdin_data, &mut leftovers.tasks);

    let mut stopper = Stopper {
        pgid: pid,
        token: spec.token.clone(),
        cgroup_dir,
        grace: spec.grace,
        stopped: None,
        killed: false,
    };
    let timeout_at = tokio::time::Instant::now().checked_add(spec.timeout);
    let mut timeout = pin!(tokio::time::sleep_until(
        timeout_at.unwrap_or_else(far_future)
    ));
    let idle_at = |now: tokio::time::Instant| spec.idle.and_then(|d| now.checked_add(d));
    let mut idle = pin!(tokio::time::sleep_until(
        idle_at(tokio::time::Instant::now()).unwrap_or_else(far_future)
    ));
    let mut grace = pin!(tokio::time::sleep_until(far_future()));
    let mut grace_armed = false;
    let mut control_open = true;
    let mut output_open = true;

    // A request made before we started counts too.
    let early = *control.borrow_and_update();
    apply_control(early, &mut stopper, &mut grace, &mut grace_armed).await;

    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            batch = rx.recv(), if output_open => match batch {
                Some(batch) => {
                    if deliver(&batch, &mut log, on_line, rx.is_empty()) {
                        apply_control(Control::Stop, &mut stopper, &mut grace, &mut grace_armed)
                            .await;
                    }
                    if let Some(at) = idle_at(tokio::time::Instant::now()) {
                        idle.as_mut().reset(at);
                    }
                }
                None => output_open = false,
            },
            () = &mut idle, if stopper.stopped.is_none() && spec.idle.is_some() => {
                if let Some(at) = stopper.terminate(StopReason::Idle).await {
                    grace.as_mut().reset(at);
                    grace_armed = true;
                }
            }
            () = &mut timeout, if stopper.stopped.is_none() && timeout_at.is_some() => {
                if let Some(at) = stopper.terminate(StopReason::Timeout).await {
                    grace.as_mut().reset(at);
                    grace_armed = true;
                }
            }
            () = &mut grace, if grace_armed => {
                grace_armed = false;
                stopper.kill(StopReason::Timeout).await;
            }
            changed = control.changed(), if control_open => match changed {
                Ok(()) => {
                    let request = *control.borrow_and_update();
                    apply_control(request, &mut stopper, &mut grace, &mut grace_armed).await;
                }
                Err(_) => control_open = false,
            },
        }
    };
    children().remove(&pid);

    let (swept, limit) = sweep_after(&mut leftovers, &spec.token, pid).await;
    leftovers.armed = false;

    drain(&mut rx, &mut log, on_line, output_open).await;
    drop(leftovers);
    if let Some(w) = log.as_mut() {
        let _ = w.flush();
    }

    Ok(AttemptExit {
        code: status.code(),
        signal: status.signal(),
        stopped: stopper.stopped,
        duration: start.elapsed(),
        swept,
        limit,
    })
}

/// The child's output, read by tasks of their own into the channel
/// returned, and its stdin written by another (kept in `tasks`).
fn spawn_io(
    child: &mut tokio::process::Child,
    redact: &Arc<Secrets>,
    stdin_data: Vec<u8>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel::<Vec<u8>>(BATCHES_IN_FLIGHT);
    if let Some(out) = child.stdout.take() {
        let redact = Stream::new(redact.clone());
        tasks.push(spawn_reader(out, tx.clone(), redact));
    }
    if let Some(err) = child.stderr.take() {
        let redact = Stream::new(redact.clone());
        tasks.push(spawn_reader(err, tx.clone(), redact));
    }
    drop(tx);
    if let Some(mut stdin) = child.stdin.take() {
        // Its own task: a child that never reads stdin must not block us.
        // EPIPE (the child exited or closed stdin) is not our concern.
        tasks.push(tokio::spawn(async move {
            let _ = stdin.write_all(&stdin_data).await;
            let _ = stdin.shutdown().await;
        }));
    }
    rx
}

/// After the leader exited: the group may outlive it, then everything in
/// its cgroup, and whatever still carries the token. The processes swept,
/// and the limit the attempt ran into, if any.
async fn sweep_after(
    leftovers: &mut Leftovers,
    token: &str,
    pid: i32,
) -> (usize, Option<crate::sandbox::LimitHit>) {
    let token = token.to_string();
    let cgroup = leftovers.cgroup.take();
    let limiter = leftovers.limiter.take();
    let (swept, limit) = tokio::task::spawn_blocking(move || {
        // Read before the kill: what the attempt itself ran into.
        let limit = limiter.as_ref().and_then(cgroup::Limiter::hit);
        let mut in_cgroup = cgroup.map(|c| c.kill_and_remove()).unwrap_or_default();
        in_cgroup.extend(
            limiter
                .map(cgroup::Limiter::kill_and_remove)
                .unwrap_or_default(),
        );
        (
            sweep_token_after(&token, in_cgroup.into_iter().collect()),
            limit,
        )
    })
    .await
    .unwrap_or((0, None));
    signal_group(pid, libc::SIGKILL);
    (swept, limit)
}

/// What the readers still send, for at most `DRAIN_TIMEOUT`.
async fn drain(
    rx: &mut mpsc::Receiver<Vec<u8>>,
    log: &mut Option<BufWriter<File>>,
    on_line: &mut (dyn FnMut(&str) -> bool + Send),
    mut output_open: bool,
) {
    let drain_until = tokio::time::Instant::now() + DRAIN_TIMEOUT;
    while output_open {
        tokio::select! {
            batch = rx.recv() => match batch {
                Some(batch) => {
                    deliver(&batch, log, on_line, rx.is_empty());
                }
                None => output_open = false,
            },
            () = tokio::time::sleep_until(drain_until) => break,
        }
    }
}

async fn apply_control(
    request: Control,
    stopper: &mut Stopper,
    grace: &mut std::pin::Pin<&mut tokio::time::Sleep>,
    grace_armed: &mut bool,
) {
    match request {
        Control::Run => {}
        Control::Stop => {
            if let Some(at) = stopper.terminate(StopReason::Interrupted).await {
                grace.as_mut().reset(at);
                *grace_armed = true;
            }
        }
        Control::Kill => {
            *grace_armed = false;
            stopper.kill(StopReason::Interrupted).await;
        }
    }
}

/// Writes a batch of complete lines to the log and hands each to `on_line`;
/// true when one of them asked to stop the attempt.
fn deliver(
    batch: &[u8],
    log: &mut Option<BufWriter<File>>,
    on_line: &mut (dyn FnMut(&str) -> bool + Send),
    idle: bool,
) -> bool {
    if let Some(w) = log.as_mut() {
        // A log we cannot write must not end the attempt; stop logging instead.
        if w.write_all(batch).is_err() || (idle && w.flush().is_err()) {
            *log = None;
        }
    }
    let lines = batch.strip_suffix(b"\n").unwrap_or(batch);
    let mut stop = false;
    for line in lines.split(|&b| b == b'\n') {
        stop |= on_line(&String::from_utf8_lossy(line));
    }
    stop
}

/// Reads a pipe into batches of complete, newline-terminated lines of at
/// most `MAX_LINE` bytes each.
/// Secrets are redacted from the raw bytes, before lines are cut, so a
/// value split across two reads (or two lines cut at `MAX_LINE`) is caught.
fn spawn_reader<R>(pipe: R, tx: mpsc::Sender<Vec<u8>>, mut redact: Stream) -> JoinHandle<()>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut reader = BufReader::with_capacity(READ_CHUNK, pipe);
        let mut partial: Vec<u8> = Vec::new();
        loop {
            let raw = match reader.fill_buf().await {
                Ok([]) => break,
                Ok(chunk) => chunk,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            let consumed = raw.len();
            let clean = redact.push(raw);
            reader.consume(consumed);
            let chunk = clean.as_slice();
            let mut batch = Vec::new();
            let mut rest = chunk;
            while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
                if partial.is_empty() {
                    batch.extend_from_slice(&rest[..=nl]);
                } else {
                    partial.extend_from_slice(&rest[..nl]);
                    push_line(&mut batch, &partial);
                    partial.clear();
                }
                rest = &rest[nl + 1..];
            }
            partial.extend_from_slice(rest);
            if partial.len() > MAX_LINE {
                let keep = utf8_cut(&partial, partial.len() - partial.len() % MAX_LINE);
                push_line(&mut batch, &partial[..keep]);
                partial.drain(..keep);
            }
            if !batch.is_empty() && tx.send(batch).await.is_err() {
                return;
            }
        }
        partial.extend(redact.finish());
        if !partial.is_empty() {
            let mut batch = Vec::new();
            push_line(&mut batch, &partial);
            let _ = tx.send(batch).await;
        }
    })
}

/// Appends `line` as one or more lines of at most `MAX_LINE` bytes, cut on
/// UTF-8 boundaries where possible.
fn push_line(batch: &mut Vec<u8>, mut line: &[u8]) {
    while line.len() > MAX_LINE {
        let cut = utf8_cut(line, MAX_LINE);
        batch.extend_from_slice(&line[..cut]);
        batch.push(b'\n');
        line = &line[cut..];
    }
    batch.extend_from_slice(line);
    batch.push(b'\n');
}

/// The largest index `<= max` that does not split a UTF-8 sequence (or `max`
/// itself when the bytes are not UTF-8 there anyway).
fn utf8_cut(bytes: &[u8], max: usize) -> usize {
    if max >= bytes.len() {
        return bytes.len();
    }
    let mut cut = max;
    while cut > max.saturating_sub(3) && cut > 0 && bytes[cut] & 0xC0 == 0x80 {
        cut -= 1;
    }
    if cut == 0 || bytes[cut] & 0xC0 == 0x80 {
        max
    } else {
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::sync::Mutex as StdMutex;

    /// Each run gets a hard limit so a regression fails instead of hanging.
    const TEST_LIMIT: Duration = Duration::from_secs(60);

    struct Agent {
        dir: tempfile::TempDir,
        spec: AttemptSpec,
    }

    fn agent(script: &str, timeout: Duration, grace: Duration) -> Agent {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.sh");
        fs::write(&path, script).unwrap();
        let spec = AttemptSpec {
            program: "bash".into(),
            args: vec![path.to_string_lossy().into_owned()],
            cwd: dir.path().to_path_buf(),
            env: vec![("DIR".into(), dir.path().to_string_lossy().into_owned())],
            env_remove: vec!["CLAUDECODE".into()],
            stdin: Vec::new(),
            log_path: dir.path().join("logs/deep/attempt.log"),
            timeout,
            idle: None,
            grace,
            token: unique_token("ralph-test"),
            seal: None,
            redact: Arc::default(),
        };
        Agent { dir, spec }
    }

    /// `run_attempt` under the test limit, so a regression fails instead of hanging.
    async fn bounded(
        spec: AttemptSpec,
        mut on_line: impl FnMut(&str) + Send,
        control: watch::Receiver<Control>,
    ) -> AttemptExit {
        let on_line = move |l: &str| {
            on_line(l);
            false
        };
        tokio::time::timeout(TEST_LIMIT, run_attempt(spec, on_line, control))
            .await
            .expect("attempt ran past the test limit")
            .expect("attempt ran")
    }

    async fn run(spec: AttemptSpec) -> (AttemptExit, Vec<String>) {
        let mut lines = Vec::new();
        let (_tx, rx) = watch::channel(Control::Run);
        let exit = bounded(spec, |l| lines.push(l.to_string()), rx).await;
        (exit, lines)
    }

    fn read_pid(dir: &Path, name: &str) -> i32 {
        let text = fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        text.trim().parse().unwrap()
    }

    /// Gone or a zombie: a reaped-or-not dead process.
    fn gone(pid: i32) -> bool {
        is_dead(pid)
    }

    #[tokio::test]
    async fn hanging_agent_times_out_and_every_grandchild_dies() {
        let a = agent(
            "sleep 1000 &\necho $! > \"$DIR/group.pid\"\n\
             setsid sleep 1000 &\necho $! > \"$DIR/session.pid\"\n\
             echo started\nsleep 1000\n",
            Duration::from_secs(2),
            Duration::from_secs(2),
        );
        let (exit, lines) = run(a.spec.clone()).await;
        assert_eq!(exit.stopped, Some(StopReason::Timeout));
        assert_eq!(exit.code, None);
        assert_eq!(exit.signal, Some(libc::SIGTERM));
        assert_eq!(lines, vec!["started"]);
        for name in ["group.pid", "session.pid"] {
            let pid = read_pid(a.dir.path(), name);
            assert!(gone(pid), "{name} ({pid}) survived");
        }
        assert!(find_by_token_prefix(&a.spec.token).is_empty());
    }

    #[tokio::test]
    async fn clean_exit_still_sweeps_background_sessions() {
        let a = agent(
            "setsid sleep 1000 &\necho $! > \"$DIR/session.pid\"\necho bye\nexit 0\n",
            TEST_LIMIT,
            Duration::from_secs(2),
        );
        let (exit, lines) = run(a.spec.clone()).await;
        assert_eq!(
            (exit.code, exit.signal, exit.stopped),
            (Some(0), None, None)
        );
        assert!(exit.swept >= 1, "swept {}", exit.swept);
        assert_eq!(lines, vec!["bye"]);
        assert!(gone(read_pid(a.dir.path(), "session.pid")));
    }

    /// A grandchild that clears its environment and leaves the group carries
    /// nothing the token sweep can see; its cgroup still holds it.
    #[tokio::test]
    async fn a_grandchild_without_environment_is_swept_through_the_cgroup() {
        if probe_cgroups("ralph-cgtest").is_none() {
            crate::testenv::skip("no writable cgroup v2 on this machine");
            return;
        }
        let a = agent(
            "env -i /usr/bin/setsid /usr/bin/sleep 1000 &\necho $! > \"$DIR/escapee.pid\"\n\
             echo $$ > \"$DIR/agent.pid\"\nexit 0\n",
            TEST_LIMIT,
            Duration::from_secs(2),
        );
        let (exit, _) = run(a.spec.clone()).await;
        assert_eq!(exit.code, Some(0));
        let escapee = read_pid(a.dir.path(), "escapee.pid");
        assert!(
            gone(escapee),
            "{escapee} cleared its environment and survived"
        );
        assert!(exit.swept >= 1, "swept {}", exit.swept);
        let dir = probe_cgroups("ralph-cgtest").unwrap().join(&a.spec.token);
        assert!(!dir.exists(), "{} was left behind", dir.display());
    }

    #[tokio::test]
    async fn term_answered_with_done_is_still_a_timeout() {
        let a = agent(
            "trap 'echo \"<ralph>DONE 1.1</ralph>\"; exit 0' TERM\n\
             echo working\nsleep 1000 &\nwait\n",
            Duration::from_secs(2),
            Duration::from_secs(30),
        );
        let (exit, lines) = run(a.spec).await;
        assert_eq!(exit.stopped, Some(StopReason::Timeout));
        assert_eq!(exit.code, Some(0));
        assert!(
            lines.iter().any(|l| l == "<ralph>DONE 1.1</ralph>"),
            "{lines:?}"
        );
    }

    #[tokio::test]
    async fn exit_ends_the_attempt_even_with_stdout_held_open() {
        let a = agent(
            "(sleep 1000; echo never) &\necho $! > \"$DIR/sub.pid\"\n\
             setsid sleep 1000 &\necho $! > \"$DIR/session.pid\"\necho leaving\n",
            TEST_LIMIT,
            Duration::from_secs(2),
        );
        let (exit, lines) = run(a.spec).await;
        assert_eq!((exit.code, exit.stopped), (Some(0), None));
        assert_eq!(lines, vec!["leaving"]);
        assert!(gone(read_pid(a.dir.path(), "sub.pid")));
        assert!(gone(read_pid(a.dir.path(), "session.pid")));
    }

    #[tokio::test]
    async fn exit_ends_the_attempt_when_an_untraceable_process_holds_stdout() {
        // It dropped the token and left the group: the sweep cannot find it,
        // so only the bounded drain lets the attempt end.
        let a = agent(
            "env -u RALPH_ATTEMPT_TOKEN setsid sleep 1000 &\necho $! > \"$DIR/stray.pid\"\necho leaving\n",
            TEST_LIMIT,
            Duration::from_secs(2),
        );
        let (exit, lines) = run(a.spec).await;
        let stray = read_pid(a.dir.path(), "stray.pid");
        // SAFETY: the test's own stray process.
        unsafe { libc::kill(stray, libc::SIGKILL) };
        assert_eq!((exit.code, exit.stopped), (Some(0), None));
        assert_eq!(lines, vec!["leaving"]);
    }

    #[tokio::test]
    async fn stdin_arrives_intact_and_closed() {
        let mut a = agent(
            "cat > \"$DIR/got\"\necho read-all\n",
            TEST_LIMIT,
            Duration::from_secs(2),
        );
        let mut payload = Vec::new();
        while payload.len() < 300_000 {
            payload.extend_from_slice("a & b $HOME \\1 {{LEARNINGS}} `x` 'q' \"d\" é\n".as_bytes());
        }
        a.spec.stdin = payload.clone();
        let (exit, lines) = run(a.spec.clone()).await;
        assert_eq!(exit.code, Some(0));
        assert_eq!(lines, vec!["read-all"]);
        assert_eq!(fs::read(a.dir.path().join("got")).unwrap(), payload);
    }

    #[tokio::test]
    async fn agent_that_never_reads_stdin_does_not_block_us() {
        let mut a = agent("echo ignoring\n", TEST_LIMIT, Duration::from_secs(2));
        a.spec.stdin = vec![b'x'; 1 << 20];
        let (exit, lines) = run(a.spec).await;
        assert_eq!(exit.code, Some(0));
        assert_eq!(lines, vec!["ignoring"]);
    }

    #[tokio::test]
    async fn output_lines_reach_the_log_and_the_callback() {
        let a = agent(
            "echo out-1\necho err-1 >&2\nprintf 'no newline at end'\n",
            TEST_LIMIT,
            Duration::from_secs(2),
        );
        let log_path = a.spec.log_path.clone();
        let (exit, mut lines) = run(a.spec).await;
        assert_eq!(exit.code, Some(0));
        lines.sort();
        assert_eq!(lines, vec!["err-1", "no newline at end", "out-1"]);
        let log = fs::read_to_string(&log_path).unwrap();
        let mut logged: Vec<_> = log.lines().collect();
        logged.sort();
        assert_eq!(logged, vec!["err-1", "no newline at end", "out-1"]);
    }

    #[tokio::test]
    async fn log_is_written_while_the_agent_runs() {
        let a = agent(
            "echo first\nsleep 1000\n",
            TEST_LIMIT,
            Duration::from_secs(2),
        );
        let log_path = a.spec.log_path.clone();
        let (tx, rx) = watch::channel(Control::Run);
        let mut seen_in_log = None;
        let on_line = |line: &str| {
            if line == "first" {
                // The log is flushed before `on_line` is called for a batch
                // that emptied the queue, so the line is already on disk.
                seen_in_log = Some(fs::read_to_string(&log_path).unwrap_or_default());
                let _ = tx.send(Control::Kill);
            }
        };
        let exit = bounded(a.spec.clone(), on_line, rx).await;
        assert_eq!(exit.stopped, Some(StopReason::Interrupted));
        assert_eq!(seen_in_log.as_deref(), Some("first\n"));
    }

    #[tokio::test]
    async fn a_sealed_child_gets_its_environment_only_and_its_secrets_are_redacted() {
        let mut a = agent(
            "env\nprintf 'key=%s\\n' \"$API_KEY\"\n",
            TEST_LIMIT,
            Duration::from_secs(2),
        );
        let path = std::env::var("PATH").unwrap_or_default();
        a.spec.seal = Some(Seal {
            env: vec![
                ("PATH".into(), path),
                ("API_KEY".into(), "sk-test-0123456789".into()),
            ],
            ..Seal::default()
        });
        a.spec.redact = Arc::new(Secrets::new(["sk-test-0123456789"]));
        let log = a.spec.log_path.clone();
        let (exit, lines) = run(a.spec).await;
        assert_eq!(exit.code, Some(0));
        let names: Vec<&str> = lines
            .iter()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k))
            .filter(|k| k.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
            .collect();
        // bash adds PWD, SHLVL and `_` of its own; nothing of ours leaks.
        for k in &names {
            assert!(
                ["PATH", "API_KEY", "DIR", TOKEN_VAR, "PWD", "SHLVL", "OLDPWD", "_"].contains(k),
                "{k} leaked into a sealed child"
            );
        }
        assert!(lines.contains(&"key=***".to_string()), "{lines:?}");
        assert!(lines.contains(&"API_KEY=***".to_string()), "{lines:?}");
        let logged = fs::read_to_string(log).unwrap();
        assert!(!logged.contains("sk-test-0123456789"), "{logged}");
        assert!(logged.contains("key=***"));
    }

    #[tokio::test]
    async fn environment_is_prepared() {
        let mut a = agent("env\n", TEST_LIMIT, Duration::from_secs(2));
        // Some variable we inherit, to prove removal works on inherited ones.
        let inherited = std::env::vars()
            .map(|(k, _)| k)
            .find(|k| k != "PATH" && !k.starts_with("RALPH") && k != "DIR");
        if let Some(k) = &inherited {
            a.spec.env_remove.push(k.clone());
        }
        a.spec.env.push(("RALPH_STORY".into(), "1.1".into()));
        a.spec.env.push(("RALPH_ODD".into(), "a b=c $x".into()));
        let token = a.spec.token.clone();
        let (exit, lines) = run(a.spec).await;
        assert_eq!(exit.code, Some(0));
        assert!(lines.contains(&"RALPH_STORY=1.1".to_string()));
        assert!(lines.contains(&"RALPH_ODD=a b=c $x".to_string()));
        assert!(lines.contains(&format!("{TOKEN_VAR}={token}")));
        assert!(!lines.iter().any(|l| l.starts_with("CLAUDECODE=")));
        if let Some(k) = inherited {
            assert!(
                !lines.iter().any(|l| l.starts_with(&format!("{k}="))),
                "{k} inherited"
            );
        }
    }

    /// What the agent says can end its attempt: `on_line` returning true
    /// is a graceful stop, like the caller's `Control::Stop`.
    #[tokio::test]
    async fn a_line_can_ask_to_stop_the_attempt() {
        let a = agent(
            "echo working\necho give-up\nsleep 1000\n",
            TEST_LIMIT,
            Duration::from_secs(30),
        );
        let (_tx, rx) = watch::channel(Control::Run);
        let mut seen = Vec::new();
        let on_line = |line: &str| {
            seen.push(line.to_string());
            line == "give-up"
        };
        let exit = tokio::time::timeout(TEST_LIMIT, run_attempt(a.spec, on_line, rx))
            .await
            .expect("the attempt ends")
            .unwrap();
        assert_eq!(exit.stopped, Some(StopReason::Interrupted));
        assert_eq!(exit.signal, Some(libc::SIGTERM));
        assert_eq!(seen, ["working", "give-up"]);
    }

    #[tokio::test]
    async fn stop_request_interrupts() {
        let a = agent(
            "echo ready\nsleep 1000\n",
            TEST_LIMIT,
            Duration::from_secs(30),
        );
        let (tx, rx) = watch::channel(Control::Run);
        let on_line = |line: &str| {
            if line == "ready" {
                let _ = tx.send(Control::Stop);
            }
        };
        let exit = bounded(a.spec, on_line, rx).await;
        assert_eq!(exit.stopped, Some(StopReason::Interrupted));
        assert_eq!(exit.signal, Some(libc::SIGTERM));
    }

    #[tokio::test]
    async fn kill_during_grace_escalates_at_once() {
        // The agent survives SIGTERM; only the Kill request can end it before
        // the (huge) grace period, which the test limit would catch.
        let a = agent(
            "trap 'echo got-term' TERM\necho ready\nwhile true; do sleep 1000 & wait; done\n",
            TEST_LIMIT,
            Duration::from_secs(3600),
        );
        let (tx, rx) = watch::channel(Control::Run);
        let on_line = |line: &str| match line {
            "ready" => {
                let _ = tx.send(Control::Stop);
            }
            "got-term" => {
                let _ = tx.send(Control::Kill);
            }
            _ => {}
        };
        let exit = bounded(a.spec, on_line, rx).await;
        assert_eq!(exit.stopped, Some(StopReason::Interrupted));
        assert_eq!(exit.signal, Some(libc::SIGKILL));
    }

    #[tokio::test]
    async fn stop_before_start_is_honoured() {
        let a = agent("sleep 1000\n", TEST_LIMIT, Duration::from_secs(30));
        let (_tx, rx) = watch::channel(Control::Kill);
        let exit = bounded(a.spec, |_| {}, rx).await;
        assert_eq!(exit.stopped, Some(StopReason::Interrupted));
        assert_eq!(exit.signal, Some(libc::SIGKILL));
    }

    #[tokio::test]
    async fn huge_output_streams_through() {
        const TOTAL: usize = 50_000_000;
        // 83 bytes with its newline, so the last line is cut short.
        let line =
            "the quick brown fox jumps over the lazy dog, again and again and again, forever...";
        let a = agent(
            &format!("yes '{line}' | head -c {TOTAL}\n"),
            TEST_LIMIT,
            Duration::from_secs(2),
        );
        let log_path = a.spec.log_path.clone();
        let mut count = 0usize;
        let (_tx, rx) = watch::channel(Control::Run);
        let exit = bounded(a.spec, |_| count += 1, rx).await;
        assert_eq!(exit.code, Some(0));
        let per_line = line.len() + 1;
        assert_ne!(TOTAL % per_line, 0);
        // The unterminated last line is logged with a newline.
        assert_eq!(fs::metadata(&log_path).unwrap().len() as usize, TOTAL + 1);
        assert_eq!(count, TOTAL.div_ceil(per_line));
    }

    #[tokio::test]
    async fn endless_line_is_split() {
        let a = agent(
            "head -c 3000000 /dev/zero | tr '\\0' x\n",
            TEST_LIMIT,
            Duration::from_secs(2),
        );
        let mut lens = Vec::new();
        let (_tx, rx) = watch::channel(Control::Run);
        let exit = bounded(a.spec, |l| lens.push(l.len()), rx).await;
        assert_eq!(exit.code, Some(0));
        assert!(lens.iter().all(|&n| n <= MAX_LINE), "{lens:?}");
        assert_eq!(lens.iter().sum::<usize>(), 3_000_000);
    }

    #[test]
    fn split_respects_utf8() {
        let mut line = vec![b'a'; MAX_LINE - 1];
        line.extend_from_slice("é".repeat(10).as_bytes());
        let mut batch = Vec::new();
        push_line(&mut batch, &line);
        let text = std::str::from_utf8(&batch).expect("cut inside a character");
        let pieces: Vec<_> = text.strip_suffix('\n').unwrap().split('\n').collect();
        assert_eq!(pieces.len(), 2);
        assert_eq!(pieces[0].len(), MAX_LINE - 1);
    }

    #[tokio::test]
    async fn missing_program_is_an_error() {
        let mut a = agent("", TEST_LIMIT, Duration::from_secs(2));
        a.spec.program = "/nonexistent/ralph-agent".into();
        let (_tx, rx) = watch::channel(Control::Run);
        assert!(run_attempt(a.spec, |_| false, rx).await.is_err());
    }

    #[tokio::test]
    async fn shell_success_failure_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().to_path_buf();
        let env = vec![("RALPH_STORY".to_string(), "2.1".to_string())];

        let ok = run_shell(
            "echo \"story $RALPH_STORY in $(pwd)\"",
            cwd.clone(),
            env.clone(),
            TEST_LIMIT,
        )
        .await
        .unwrap();
        assert!(ok.success && !ok.timed_out);
        assert_eq!(ok.code, Some(0));
        assert_eq!(ok.tail, format!("story 2.1 in {}\n", cwd.display()));

        let bad = run_shell(
            "echo oops >&2; exit 3",
            cwd.clone(),
            env.clone(),
            TEST_LIMIT,
        )
        .await
        .unwrap();
        assert!(!bad.success && !bad.timed_out);
        assert_eq!(bad.code, Some(3));
        assert_eq!(bad.tail, "oops\n");

        let pid_file = dir.path().join("bg.pid");
        let cmd = format!(
            "setsid sleep 1000 & echo $! > {}; sleep 1000",
            pid_file.display()
        );
        let slow = run_shell(&cmd, cwd.clone(), env.clone(), Duration::from_secs(1))
            .await
            .unwrap();
        assert!(!slow.success && slow.timed_out);
        assert!(gone(read_pid(dir.path(), "bg.pid")));

        let loud = run_shell("seq 1 5000", cwd, env, TEST_LIMIT).await.unwrap();
        assert!(loud.success);
        assert!(loud.tail.len() <= SHELL_TAIL);
        assert!(loud.tail.ends_with("4999\n5000\n"));
    }

    /// spawn() returns as soon as the child is past the point of no return
    /// in execve(2), which can be before its new arguments and environment
    /// are readable; tests that look at those wait for them.
    fn wait_for_exec(pid: i32) {
        for _ in 0..10_000 {
            if fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|a| !a.is_empty()) {
                return;
            }
            std::thread::yield_now();
        }
        panic!("{pid} never finished its exec");
    }

    /// The window the sweep must not miss: a token holder swept the moment
    /// spawn() returns is often still inside execve(2).
    #[test]
    fn a_token_holder_swept_straight_after_spawn_is_killed() {
        for _ in 0..50 {
            let token = unique_token("ralph-fresh");
            let mut child = std::process::Command::new("/bin/sleep")
                .arg("1000")
                .env(TOKEN_VAR, &token)
                .spawn()
                .unwrap();
            let swept = sweep_token(&token);
            let _ = child.kill();
            let status = child.wait().unwrap();
            assert_eq!(swept, 1, "the sweep missed a process that was mid-exec");
            assert_eq!(status.signal(), Some(libc::SIGKILL));
        }
    }

    /// Mid-exec, a process shows neither arguments nor environment (CI once
    /// caught a `setsid sleep` that way and the sweep missed it); such a
    /// process is looked at again. One that merely has an empty environment
    /// is settled: not ours, and no reason to wait.
    #[test]
    fn empty_environment_alone_is_settled_and_foreign() {
        let mut child = std::process::Command::new("/bin/sleep")
            .arg("1000")
            .env_clear()
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert!(is_live_user_process(pid));
        wait_for_exec(pid);
        let (ours, unsettled) = scan_proc_unsettled(|_| true);
        assert!(!ours.contains(&pid) && !unsettled.contains(&pid));
        assert_eq!(sweep_token(&unique_token("ralph-emptyenv")), 0);
        assert!(!is_dead(pid), "a process without our token was killed");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!is_live_user_process(pid));
    }

    #[test]
    fn sweep_and_find_by_token() {
        let prefix = unique_token("ralph-sweeptest");
        let token = format!("{prefix}-a");
        let mut child = std::process::Command::new("sleep")
            .arg("1000")
            .env(TOKEN_VAR, &token)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        wait_for_exec(pid);
        assert_eq!(find_by_token_prefix(&prefix), vec![pid]);
        assert!(find_by_token_prefix(&format!("{prefix}-b")).is_empty());
        assert_eq!(
            sweep_token(&format!("{prefix}-")),
            0,
            "only exact tokens are swept"
        );
        assert_eq!(sweep_token(&token), 1);
        assert!(child.wait().unwrap().signal() == Some(libc::SIGKILL));
        assert_eq!(sweep_token(&token), 0);
        assert_eq!(sweep_token(""), 0);
    }

    #[test]
    fn tokens_are_unique() {
        let seen = StdMutex::new(BTreeSet::new());
        for _ in 0..1000 {
            assert!(seen.lock().unwrap().insert(unique_token("t")));
        }
    }
}
