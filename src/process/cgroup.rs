//! One cgroup v2 per child, where ralph may make one.
//!
//! The token in a child's environment finds every process it started unless
//! one of them clears its environment (`env -i`, some daemons) and leaves the
//! process group: then nothing on the process itself says it is ours. A
//! cgroup does: membership is inherited by every descendant, no process can
//! leave without privileges, and `cgroup.kill` ends them all at once. Where
//! no cgroup can be made (a desktop session without delegation, cgroup v1
//! only, no permission), everything still works through the token alone.

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
    let Some(base) = base() else {
        return Vec::new();
    };
    let Ok(rd) = fs::read_dir(base) else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name();
        if name.to_str().is_some_and(|n| n.starts_with(prefix)) && e.path().is_dir() {
            pids.extend(Cgroup { dir: e.path() }.kill_and_remove());
        }
    }
    pids
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
}
