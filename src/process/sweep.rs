//! Finding and stopping processes by what they carry: the attempt token in
//! their environment, their group, their cgroup; reaping orphans; telling
//! whether a git lock file may still be in use. Reads `/proc`.

use super::*;

pub(super) fn signal_group(pgid: i32, sig: i32) {
    if pgid > 1 {
        // SAFETY: kill(2) with a negative pid only signals that group.
        unsafe {
            libc::kill(-pgid, sig);
        }
    }
}

pub(super) fn token_entry(token: &str) -> String {
    format!("{TOKEN_VAR}={token}")
}

/// PIDs (other than ours) with an environment entry `is_match` accepts.
/// Processes we may not read, and zombies (whose environment is empty), are skipped.
pub(super) fn scan_proc(is_match: impl Fn(&[u8]) -> bool) -> Vec<i32> {
    scan_proc_unsettled(is_match).0
}

/// The matching PIDs, and the live user processes caught in the middle of
/// execve(2): until the kernel has laid out the new stack, such a process
/// shows neither arguments nor environment, so a scan at that moment cannot
/// tell whether it is ours; it is looked at again.
pub(super) fn scan_proc_unsettled(is_match: impl Fn(&[u8]) -> bool) -> (Vec<i32>, Vec<i32>) {
    let me = std::process::id() as i32;
    let (mut ours, mut unsettled) = (Vec::new(), Vec::new());
    let Ok(dir) = fs::read_dir("/proc") else {
        return (ours, unsettled);
    };
    for pid in dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
    {
        match environ_match(pid, &is_match) {
            EnvMatch::Yes => ours.push(pid),
            EnvMatch::Empty => match fs::read(format!("/proc/{pid}/cmdline")) {
                Ok(args) if args.is_empty() => {
                    if is_live_user_process(pid) {
                        unsettled.push(pid);
                    }
                }
                // Arguments but no environment: either an exec finished
                // between the two reads, or a process really started with
                // an empty environment. A second read tells which.
                Ok(_) => {
                    if has_entry(pid, &is_match) {
                        ours.push(pid);
                    }
                }
                Err(_) => {}
            },
            EnvMatch::No => {}
        }
    }
    (ours, unsettled)
}

pub(super) enum EnvMatch {
    Yes,
    No,
    Empty,
}

pub(super) fn environ_match(pid: i32, is_match: impl Fn(&[u8]) -> bool) -> EnvMatch {
    match fs::read(format!("/proc/{pid}/environ")) {
        Ok(env) if env.is_empty() => EnvMatch::Empty,
        Ok(env) if env.split(|&b| b == 0).any(is_match) => EnvMatch::Yes,
        Ok(_) | Err(_) => EnvMatch::No,
    }
}

pub(super) fn has_entry(pid: i32, is_match: impl Fn(&[u8]) -> bool) -> bool {
    matches!(environ_match(pid, is_match), EnvMatch::Yes)
}

/// Not a kernel thread, not exiting, not a zombie: kernel threads and dying
/// processes also show an empty environment, and never gain one.
pub(super) fn is_live_user_process(pid: i32) -> bool {
    const PF_EXITING: u64 = 0x4;
    const PF_KTHREAD: u64 = 0x0020_0000;
    proc_stat(pid).is_some_and(|st| !st.is_dead() && st.flags & (PF_EXITING | PF_KTHREAD) == 0)
}

/// Sends `sig` to `pid` only if it is still the process `still_ours`
/// approves: a pidfd pins the process, so a PID reused between our scan and
/// the signal is never hit.
pub(super) fn signal_if(pid: i32, sig: i32, still_ours: impl Fn(i32) -> bool) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain syscalls on integers; the fd is closed below.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
        if fd >= 0 {
            if still_ours(pid) {
                // SAFETY: a null siginfo means "as kill(2) would".
                unsafe {
                    libc::syscall(
                        libc::SYS_pidfd_send_signal,
                        fd,
                        sig,
                        std::ptr::null::<libc::siginfo_t>(),
                        0,
                    );
                }
            }
            // SAFETY: fd is ours and open.
            unsafe { libc::close(fd) };
            return;
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS) {
            return; // gone already
        }
    }
    if still_ours(pid) {
        // SAFETY: kill(2) on one pid.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// What this module reads from `/proc/<pid>/stat`.
pub(super) struct ProcStat {
    pub(super) state: u8,
    pub(super) ppid: i32,
    pub(super) pgrp: i32,
    pub(super) flags: u64,
}

impl ProcStat {
    fn is_dead(&self) -> bool {
        matches!(self.state, b'Z' | b'X' | b'x')
    }
}

/// `None` when the process is gone.
pub(super) fn proc_stat(pid: i32) -> Option<ProcStat> {
    let stat = fs::read(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; fields follow the last ')'.
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.bytes().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    // Then session, tty_nr and tpgid before the flags.
    let flags = fields.nth(3)?.parse().ok()?;
    Some(ProcStat {
        state,
        ppid,
        pgrp,
        flags,
    })
}

/// True while `pid` runs (a zombie counts as gone).
pub(crate) fn pid_is_alive(pid: i32) -> bool {
    pid > 0 && !is_dead(pid)
}

pub(super) fn is_dead(pid: i32) -> bool {
    proc_stat(pid).is_none_or(|st| st.is_dead())
}

/// Kills (SIGKILL) every process whose environment has `TOKEN_VAR=token`;
/// returns how many. Never touches processes without our token.
pub(crate) fn sweep_token(token: &str) -> usize {
    sweep_token_after(token, BTreeSet::new())
}

/// `sweep_token` after a cgroup kill of `already`: those are counted once
/// (a dying process leaves `cgroup.procs` while its environment is still
/// readable, so the scan can meet it again).
pub(super) fn sweep_token_after(token: &str, already: BTreeSet<i32>) -> usize {
    if token.is_empty() {
        return already.len();
    }
    let needle = token_entry(token);
    kill_all_matching(|entry: &[u8]| entry == needle.as_bytes(), already)
}

/// SIGKILLs every process with a matching environment entry until a scan
/// finds none and everything killed is dead: a holder may fork between scan
/// and kill, and SIGKILL takes a moment to land (a zombie counts as dead:
/// reaping is hygiene, not what the loop waits for). Returns the distinct
/// PIDs, `killed` (those already killed another way) included.
///
/// Each walk of `/proc` reads a file of every process on the machine (tens
/// of milliseconds on a loaded one), and this runs after every attempt,
/// before its landing: the usual case, nothing left, is one scan and one
/// reaping walk (it was four).
pub(super) fn kill_all_matching(
    is_ours: impl Fn(&[u8]) -> bool + Copy,
    mut killed: BTreeSet<i32>,
) -> usize {
    for _ in 0..SWEEP_ROUNDS {
        let (found, unsettled) = scan_proc_unsettled(is_ours);
        for &pid in &found {
            signal_if(pid, libc::SIGKILL, |p| has_entry(p, is_ours));
            killed.insert(pid);
        }
        // An exec can be held up for a while on a loaded machine; the
        // bound on rounds is what stops a process stuck there forever.
        if found.is_empty() && unsettled.is_empty() && killed.iter().all(|&p| is_dead(p)) {
            break;
        }
        reap(&killed);
        std::thread::sleep(SWEEP_PAUSE);
    }
    reap(&killed);
    killed.len()
}

/// As a subreaper, orphans are re-parented to us and stay zombies until we
/// wait for them. Only PIDs tokio is not waiting for are reaped: the swept
/// ones, and any other zombie child of ours.
pub(super) fn reap(swept: &BTreeSet<i32>) {
    if !SUBREAPER.load(Ordering::Relaxed) {
        return;
    }
    let registry = children();
    let me = std::process::id() as i32;
    let zombies = fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| proc_stat(pid).is_some_and(|st| st.state == b'Z' && st.ppid == me));
    let candidates: BTreeSet<i32> = swept.iter().copied().chain(zombies).collect();
    for pid in candidates {
        if registry.contains(&pid) {
            continue;
        }
        let mut status = 0;
        // SAFETY: WNOHANG on one specific pid; ECHILD when it is not ours.
        unsafe {
            libc::waitpid(pid, &mut status, libc::WNOHANG);
        }
    }
}

#[cfg(test)]
/// PIDs of live processes whose `TOKEN_VAR` starts with `prefix` (e.g. a
/// project's prefix, to find agents orphaned by a killed run).
pub(crate) fn find_by_token_prefix(prefix: &str) -> Vec<i32> {
    let entry = token_entry(prefix);
    scan_proc(|e| e.starts_with(entry.as_bytes()))
}

/// Kills every process whose token starts with `prefix` (agents a killed run
/// left behind), waiting until they are gone; returns how many there were.
pub(crate) fn kill_by_token_prefix(prefix: &str) -> usize {
    if prefix.is_empty() {
        return 0;
    }
    let in_cgroups = cgroup::kill_by_prefix(prefix).into_iter().collect();
    let entry = token_entry(prefix);
    kill_all_matching(|e: &[u8]| e.starts_with(entry.as_bytes()), in_cgroups)
}

/// Where children get cgroups of their own, found by making (and removing)
/// one; `None` when that is not possible here.
pub(crate) fn probe_cgroups(prefix: &str) -> Option<PathBuf> {
    // Nothing joins the probe; dropping it removes it.
    let probe = cgroup::Cgroup::create(&unique_token(&format!("{prefix}probe")))?;
    probe.dir().parent().map(Path::to_path_buf)
}

/// True when some live process has `path` open, or is a `git` process whose
/// working directory is inside `repo_dir` but not under `apart` (ralph's
/// own worktrees, whose gits use indexes of their own): a lock file is only
/// stale when neither holds (git writes no owner into its lock files).
pub(crate) fn lock_may_be_held(path: &Path, repo_dir: &Path, apart: Option<&Path>) -> bool {
    let me = std::process::id().to_string();
    let Ok(rd) = fs::read_dir("/proc") else {
        return true;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let base = e.path();
        if let Ok(fds) = fs::read_dir(base.join("fd")) {
            for fd in fds.flatten() {
                if fs::read_link(fd.path()).is_ok_and(|t| t == path) {
                    return true;
                }
            }
        }
        let is_git = fs::read_to_string(base.join("comm")).is_ok_and(|c| c.trim() == "git");
        let near =
            |cwd: PathBuf| cwd.starts_with(repo_dir) && !apart.is_some_and(|a| cwd.starts_with(a));
        if is_git && fs::read_link(base.join("cwd")).is_ok_and(near) {
            return true;
        }
    }
    false
}

/// Makes this process a child subreaper, so orphaned grandchildren are
/// re-parented to ralph and can be reaped (Linux; no-op elsewhere).
///
/// From then on every sweep also reaps zombie children of ours that this
/// module did not spawn: nothing else in the process may start children
/// and wait for them.
pub(crate) fn become_subreaper() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        if rc == 0 {
            SUBREAPER.store(true, Ordering::Relaxed);
        }
    }
}
