//! One cgroup v2 per child, where ralph may make one.
//!
//! The token in a child's environment finds every process it started unless
//! one of them clears its environment (`env -i`, some daemons) and leaves the
//! process group: then nothing on the process itself says it is ours. A
//! cgroup does: membership is inherited by every descendant, no process can
//! leave without privileges, and `cgroup.kill` ends them all at once. Where
//! no cgroup can be made (a desktop session without delegation, cgroup v1
//! only, no permission), everything still works through the token alone.
//!
//! `Limiter`: an attempt's `sandbox.limits` (issue 31), in the v2 cgroup
//! where its controllers are enabled, else in cgroups of the v1 `pids` and
//! `memory` controllers made for the attempt, else as rlimits.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// How long a kill may take to empty the cgroup before we give up on
/// removing it now (a later sweep with the same prefix tries again).
const EMPTY_ROUNDS: u32 = 400;
const EMPTY_PAUSE: Duration = Duration::from_millis(5);

/// Set once a cgroup could not be made, so a run does not retry per child.
static UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// The directory of ralph's own cgroup in the cgroup v2 hierarchy, if any.
pub(super) fn base() -> Option<&'static Path> {
    static BASE: OnceLock<Option<PathBuf>> = OnceLock::new();
    BASE.get_or_init(|| {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
        let own = fs::read_to_string("/proc/self/cgroup").ok()?;
        let dir = own_cgroup_dir(&mountinfo, &own)?;
        dir.join("cgroup.procs").exists().then_some(dir)
    })
    .as_deref()
}

/// Where ralph's own cgroup lives: the cgroup2 mount from `mountinfo`, plus
/// the `0::<path>` line of `/proc/self/cgroup` taken relative to the mount's
/// root (a cgroup namespace or a bind mount may show only part of the tree).
fn own_cgroup_dir(mountinfo: &str, cgroup: &str) -> Option<PathBuf> {
    let path = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    for line in mountinfo.lines() {
        // Fields: id parent major:minor root mountpoint options [optional…] - fstype …
        let Some((head, tail)) = line.split_once(" - ") else {
            continue;
        };
        if tail.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        let fields: Vec<&str> = head.split_whitespace().collect();
        let (root, mountpoint) = (*fields.get(3)?, *fields.get(4)?);
        let Some(rel) = path.strip_prefix(root) else {
            continue;
        };
        let mut dir = PathBuf::from(mountpoint);
        for part in rel.split('/').filter(|p| !p.is_empty()) {
            dir.push(part);
        }
        return Some(dir);
    }
    None
}

/// A cgroup made for one child; `name` is the child's token.
#[derive(Debug)]
pub(super) struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    /// Makes `<own cgroup>/<name>`, or `None` where that is not possible.
    pub(super) fn create(name: &str) -> Option<Cgroup> {
        if UNAVAILABLE.load(Ordering::Relaxed) || name.is_empty() || name.contains('/') {
            return None;
        }
        let dir = base()?.join(name);
        match fs::create_dir(&dir) {
            Ok(()) => Some(Cgroup { dir }),
            Err(_) => {
                UNAVAILABLE.store(true, Ordering::Relaxed);
                None
            }
        }
    }

    /// `cgroup.procs`, opened for the child to write "0" into between fork
    /// and exec (so it is inside before it can start anything). Close-on-exec.
    pub(super) fn procs_file(&self) -> Option<File> {
        OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(self.dir.join("cgroup.procs"))
            .ok()
    }

    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Kills every member, waits until they are gone and removes the cgroup;
    /// returns the PIDs that were members.
    pub(super) fn kill_and_remove(self) -> Vec<i32> {
        kill_members(&self.dir)
    }
}

/// Removing is the one thing every path ends with: an empty cgroup (spawn
/// failed, or its members were killed) goes; a populated one refuses (EBUSY)
/// and is left to a later prefix sweep.
impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.dir);
    }
}

/// The processes in the cgroup at `dir` now.
pub(super) fn pids_in(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// True when `pid` is (still) in the cgroup at `dir`: guards a signal
/// against a PID that was reused after the member list was read.
pub(super) fn holds(dir: &Path, pid: i32) -> bool {
    let Some(base) = base() else {
        return false;
    };
    let Ok(rel) = dir.strip_prefix(base) else {
        return false;
    };
    let Some(name) = rel.to_str() else {
        return false;
    };
    fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| {
        c.lines()
            .filter_map(|l| l.strip_prefix("0::"))
            .any(|p| p.trim_end().ends_with(&format!("/{name}")))
    })
}

fn kill_members(dir: &Path) -> Vec<i32> {
    // Read before the kill: a dying process drops out of cgroup.procs as
    // soon as it starts exiting, long before it is gone.
    let mut members: std::collections::BTreeSet<i32> = pids_in(dir).into_iter().collect();
    let by_kill_file = OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.kill"))
        .and_then(|mut f| f.write_all(b"1"))
        .is_ok();
    for _ in 0..EMPTY_ROUNDS {
        let now = pids_in(dir);
        if now.is_empty() {
            break;
        }
        for &pid in &now {
            // Without cgroup.kill (kernels before 5.14), one by one; a
            // process forking meanwhile is caught in the next round.
            if !by_kill_file && holds(dir, pid) {
                // SAFETY: kill(2) on a PID just seen in our cgroup.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            members.insert(pid);
        }
        std::thread::sleep(EMPTY_PAUSE);
    }
    members.into_iter().collect()
}

/// Kills and removes every cgroup of ours whose name starts with `prefix`
/// (those a killed run left behind); returns the PIDs that were in them.
pub(super) fn kill_by_prefix(prefix: &str) -> Vec<i32> {
    let ours = |dir: &Path| -> Vec<PathBuf> {
        fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| {
                        e.file_name()
                            .to_str()
                            .is_some_and(|n| n.starts_with(prefix))
                            && e.path().is_dir()
                    })
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut pids = Vec::new();
    if let Some(base) = base() {
        for dir in ours(base) {
            pids.extend(Cgroup { dir }.kill_and_remove());
        }
    }
    // The v1 cgroups `Limiter` made for the attempts of a killed run.
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    for ctl in [Ctl::Pids, Ctl::Memory] {
        if let Some(dir) = own_v1_dir(&mountinfo, &own, ctl.name()) {
            let v1 = ours(&dir).into_iter().map(|d| (ctl, d)).collect();
            pids.extend(
                Limiter {
                    v1,
                    ..Limiter::default()
                }
                .kill_and_remove(),
            );
        }
    }
    pids
}

/// A controller of the cgroup v1 hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctl {
    Pids,
    Memory,
}

impl Ctl {
    fn name(self) -> &'static str {
        match self {
            Ctl::Pids => "pids",
            Ctl::Memory => "memory",
        }
    }
}

/// Where ralph's own cgroup of the v1 controller `ctl` lives: the mount
/// of a `cgroup` filesystem with that controller among its options, plus
/// the path of the `N:...ctl...:/path` line of `/proc/self/cgroup`.
fn own_v1_dir(mountinfo: &str, cgroup: &str, ctl: &str) -> Option<PathBuf> {
    let path = cgroup.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, ctls, path) = (parts.next()?, parts.next()?, parts.next()?);
        ctls.split(',').any(|c| c == ctl).then(|| path.trim())
    })?;
    for line in mountinfo.lines() {
        let Some((head, tail)) = line.split_once(" - ") else {
            continue;
        };
        let mut t = tail.split_whitespace();
        if t.next() != Some("cgroup") {
            continue;
        }
        let opts = t.nth(1).unwrap_or_default();
        if !opts.split(',').any(|o| o == ctl) {
            continue;
        }
        let fields: Vec<&str> = head.split_whitespace().collect();
        let (root, mountpoint) = (*fields.get(3)?, *fields.get(4)?);
        let rel = path.strip_prefix(root)?;
        let mut dir = PathBuf::from(mountpoint);
        for part in rel.split('/').filter(|p| !p.is_empty()) {
            dir.push(part);
        }
        return Some(dir);
    }
    None
}

/// An attempt's `sandbox.limits` made real, for it and everything it
/// starts: in its cgroup v2 where that has the controller, else in a
/// cgroup v1 of the controller made for it, else (the last resort) as
/// rlimits of its first process, which hold less (docs/security.md).
#[derive(Debug, Default)]
pub(super) struct Limiter {
    limits: crate::sandbox::Limits,
    /// The v2 cgroup's directory, when it holds a limit.
    v2: Option<PathBuf>,
    /// v1 cgroups made for the attempt, by controller.
    v1: Vec<(Ctl, PathBuf)>,
    rlimits: Vec<(libc::__rlimit_resource_t, libc::rlim_t)>,
}

impl Limiter {
    pub(super) fn create(
        name: &str,
        limits: crate::sandbox::Limits,
        v2: Option<&Cgroup>,
    ) -> Limiter {
        let mut out = Limiter {
            limits,
            ..Limiter::default()
        };
        if limits.is_none() || name.is_empty() || name.contains('/') {
            return out;
        }
        let wanted = [
            (Ctl::Pids, limits.pids, "pids.max", limits.pids.to_string()),
            (
                Ctl::Memory,
                limits.memory_mb,
                "memory.max",
                (limits.memory_mb * 1024 * 1024).to_string(),
            ),
        ];
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        for (ctl, n, v2_file, value) in wanted {
            if n == 0 {
                continue;
            }
            if let Some(cg) = v2 {
                if fs::write(cg.dir().join(v2_file), &value).is_ok() {
                    out.v2 = Some(cg.dir().to_path_buf());
                    continue;
                }
            }
            let v1_file = match ctl {
                Ctl::Pids => "pids.max",
                Ctl::Memory => "memory.limit_in_bytes",
            };
            let made = own_v1_dir(&mountinfo, &own, ctl.name())
                .map(|d| d.join(name))
                .filter(|d| fs::create_dir(d).is_ok());
            if let Some(dir) = made {
                if fs::write(dir.join(v1_file), &value).is_ok() {
                    out.v1.push((ctl, dir));
                    continue;
                }
                let _ = fs::remove_dir(&dir);
            }
            out.rlimits.push(match ctl {
                // Per user, not per attempt: what the user runs already
                // plus the cap (and nothing at all for root).
                Ctl::Pids => (libc::RLIMIT_NPROC, (user_processes() + n) as libc::rlim_t),
                // Per process: no cap on the attempt as a whole.
                Ctl::Memory => (libc::RLIMIT_DATA, (n * 1024 * 1024) as libc::rlim_t),
            });
        }
        out
    }

    /// The v1 cgroups' `cgroup.procs`, for the child to join (as
    /// `Cgroup::procs_file`).
    pub(super) fn procs_files(&self) -> Vec<File> {
        self.v1
            .iter()
            .filter_map(|(_, dir)| {
                OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_CLOEXEC)
                    .open(dir.join("cgroup.procs"))
                    .ok()
            })
            .collect()
    }

    /// The rlimits the child sets on itself, where no cgroup holds a cap.
    pub(super) fn rlimits(&self) -> Vec<(libc::__rlimit_resource_t, libc::rlim_t)> {
        self.rlimits.clone()
    }

    /// The cap the attempt ran into, if one: a fork refused at `pids.max`,
    /// a process killed for memory (read from the cgroups' event counts).
    pub(super) fn hit(&self) -> Option<crate::sandbox::LimitHit> {
        use crate::sandbox::LimitHit;
        let count = |file: PathBuf, key: &str| -> u64 {
            fs::read_to_string(file)
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
                .unwrap_or(0)
        };
        let dirs = self
            .v2
            .iter()
            .map(|d| (None, d))
            .chain(self.v1.iter().map(|(c, d)| (Some(*c), d)));
        for (ctl, dir) in dirs {
            if ctl != Some(Ctl::Memory) && count(dir.join("pids.events"), "max ") > 0 {
                return Some(LimitHit::Pids(self.limits.pids));
            }
            let oom = match ctl {
                None => count(dir.join("memory.events"), "oom_kill "),
                Some(Ctl::Memory) => count(dir.join("memory.oom_control"), "oom_kill "),
                Some(Ctl::Pids) => 0,
            };
            if oom > 0 {
                return Some(LimitHit::Memory(self.limits.memory_mb));
            }
        }
        None
    }

    /// Kills whatever is still in the v1 cgroups (they find a process
    /// that left the group and cleared its environment, as the v2 one
    /// does) and removes them; returns the PIDs that were members.
    pub(super) fn kill_and_remove(self) -> Vec<i32> {
        let mut members = std::collections::BTreeSet::new();
        for (_, dir) in &self.v1 {
            for _ in 0..EMPTY_ROUNDS {
                let now = pids_in(dir);
                if now.is_empty() && fs::remove_dir(dir).is_ok() {
                    break;
                }
                for pid in now {
                    // SAFETY: kill(2) on a PID just listed in our cgroup.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                    members.insert(pid);
                }
                std::thread::sleep(EMPTY_PAUSE);
            }
        }
        members.into_iter().collect()
    }
}

/// How many tasks (threads included, as `RLIMIT_NPROC` counts them) the
/// user runs now: the rlimit is per user, so the cap goes on top of them.
fn user_processes() -> u64 {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getuid(2) cannot fail.
    let uid = unsafe { libc::getuid() };
    let Ok(rd) = fs::read_dir("/proc") else {
        return 0;
    };
    rd.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .map(|e| fs::read_dir(e.path().join("task")).map_or(1, |t| t.count() as u64))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_cgroup_dir_joins_mount_and_path() {
        let mountinfo = "\
24 1 0:22 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 24 0:30 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
";
        assert_eq!(
            own_cgroup_dir(mountinfo, "1:cpu:/\n0::/user.slice/run-1.scope\n"),
            Some(PathBuf::from(
                "/sys/fs/cgroup/unified/user.slice/run-1.scope"
            ))
        );
        assert_eq!(
            own_cgroup_dir(mountinfo, "0::/\n"),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
    }

    #[test]
    fn own_cgroup_dir_needs_cgroup2_and_a_v2_line() {
        let v1_only = "24 1 0:22 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
        assert_eq!(own_cgroup_dir(v1_only, "0::/\n"), None);
        let v2 = "35 24 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(own_cgroup_dir(v2, "1:cpu:/\n"), None);
    }

    #[test]
    fn a_namespaced_mount_root_is_taken_off_the_path() {
        let mountinfo = "35 24 0:30 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            own_cgroup_dir(mountinfo, "0::/docker/abc/app\n"),
            Some(PathBuf::from("/sys/fs/cgroup/app"))
        );
    }

    #[test]
    fn own_v1_dir_finds_the_controller_mount_and_path() {
        let mountinfo = "\
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:40 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
";
        let own = "8:pids:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/x\n0::/\n";
        assert_eq!(
            own_v1_dir(mountinfo, own, "pids"),
            Some(PathBuf::from("/sys/fs/cgroup/pids"))
        );
        assert_eq!(
            own_v1_dir(mountinfo, own, "memory"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/process_api/abc"))
        );
        assert_eq!(
            own_v1_dir(mountinfo, own, "cpuacct"),
            Some(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/x"))
        );
        assert_eq!(own_v1_dir(mountinfo, "0::/\n", "pids"), None);
    }
}
