//! The user's live `git` processes working on the main checkout, with the
//! moment each started: a landing keeps `index.lock` until every git
//! process that may have read the index before ralph replaced it is gone
//! (`gitops::landing`). Reads `/proc`.

use std::fs;
use std::path::{Path, PathBuf};

/// A live `git` process (comm `git`) and what it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GitProcess {
    pub(crate) pid: i32,
    /// Start time in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub(crate) started: u64,
    /// Its arguments; empty while it is inside execve(2) or unreadable.
    pub(crate) argv: Vec<String>,
}

/// Now, in the clock and unit of `GitProcess::started`: clock ticks of
/// `CLOCK_BOOTTIME`, rounded down (a process started in this tick compares
/// equal, never later). The kernel counts start times from boot time (or,
/// on older kernels, from the monotonic clock, which never runs ahead of
/// it): a process that started before this call never compares later.
pub(crate) fn ticks_now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    if rc != 0 {
        return u64::MAX;
    }
    let hz = clock_ticks();
    (ts.tv_sec as u64) * hz + (ts.tv_nsec as u64) * hz / 1_000_000_000
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf with a constant name.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// Where the git processes a landing must wait for work: the main working
/// directory, its git dir, and ralph's own worktrees (excluded: nothing
/// there touches the main index).
#[derive(Debug, Clone)]
pub(crate) struct Checkout {
    pub(crate) workdir: PathBuf,
    pub(crate) git_dir: PathBuf,
    pub(crate) except_under: PathBuf,
}

impl Checkout {
    pub(crate) fn new(workdir: &Path, git_dir: &Path, except_under: &Path) -> Checkout {
        let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        Checkout {
            workdir: canon(workdir),
            git_dir: canon(git_dir),
            except_under: canon(except_under),
        }
    }

    /// Live git processes (other than ours) working on this checkout: their
    /// working directory is inside it (outside ralph's worktrees), or their
    /// environment names its git dir or work tree.
    pub(crate) fn git_processes(&self) -> Vec<GitProcess> {
        let me = std::process::id() as i32;
        let Ok(dir) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for pid in dir
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| pid != me)
        {
            let base = PathBuf::from(format!("/proc/{pid}"));
            if !fs::read_to_string(base.join("comm")).is_ok_and(|c| c.trim_end() == "git") {
                continue;
            }
            let Some((state, started)) = stat_fields(pid) else {
                continue;
            };
            if matches!(state, b'Z' | b'X' | b'x') {
                continue;
            }
            let cwd = fs::read_link(base.join("cwd")).ok();
            let environ = fs::read(base.join("environ")).unwrap_or_default();
            if !self.concerns(cwd.as_deref(), &environ) {
                continue;
            }
            let argv = fs::read(base.join("cmdline"))
                .unwrap_or_default()
                .split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            out.push(GitProcess { pid, started, argv });
        }
        out
    }

    /// Does a git process with this working directory and environment act
    /// on this checkout?
    fn concerns(&self, cwd: Option<&Path>, environ: &[u8]) -> bool {
        if let Some(cwd) = cwd {
            if cwd.starts_with(&self.workdir) && !cwd.starts_with(&self.except_under) {
                return true;
            }
        }
        environ.split(|&b| b == 0).any(|entry| {
            let named = |var: &str, dir: &Path| {
                entry
                    .strip_prefix(var.as_bytes())
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .is_some_and(|v| {
                        let p = Path::new(v);
                        p.canonicalize().unwrap_or_else(|_| p.to_path_buf()) == dir
                    })
            };
            named("GIT_DIR=", &self.git_dir) || named("GIT_WORK_TREE=", &self.workdir)
        })
    }
}

/// State and start time (ticks since boot) of `pid`; `None` when gone.
fn stat_fields(pid: i32) -> Option<(u8, u64)> {
    let stat = fs::read(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; fields follow the last ')'.
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    // Field 3 is the state; the start time is field 22.
    let state = fields.next()?.bytes().next()?;
    let started = fields.nth(18)?.parse().ok()?;
    Some((state, started))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_child_in_the_checkout_is_found_with_a_start_time_not_after_now() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("w");
        fs::create_dir_all(work.join(".ralph/worktrees/slot-1")).unwrap();
        let before = ticks_now();
        // `git hash-object --stdin` waits on its stdin: a live git process.
        let mut child = std::process::Command::new("git")
            .args(["hash-object", "--stdin"])
            .current_dir(&work)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let co = Checkout::new(&work, &work.join(".git"), &work.join(".ralph/worktrees"));
        let mut found = None;
        for _ in 0..500 {
            found = co.git_processes().into_iter().find(|g| g.pid == pid);
            if found.as_ref().is_some_and(|g| !g.argv.is_empty()) {
                break;
            }
            std::thread::yield_now();
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let found = found.expect("the git child is found");
        let after = ticks_now();
        assert!(
            found.started + 1 >= before && found.started <= after,
            "{found:?}"
        );
        assert_eq!(found.argv, ["git", "hash-object", "--stdin"]);

        // The same process seen from a ralph worktree or another directory is not ours.
        let elsewhere = Checkout::new(
            &tmp.path().join("other"),
            &tmp.path().join("other/.git"),
            &tmp.path().join("other/.ralph/worktrees"),
        );
        assert!(elsewhere.git_processes().iter().all(|g| g.pid != pid));
        let inside_ralph = Checkout::new(&work, &work.join(".git"), &work);
        assert!(inside_ralph.git_processes().iter().all(|g| g.pid != pid));
        drop(child.stdin.take());
        child.wait().unwrap();
    }

    #[test]
    fn the_environment_can_name_the_checkout() {
        let co = Checkout {
            workdir: PathBuf::from("/nonexistent/w"),
            git_dir: PathBuf::from("/nonexistent/w/.git"),
            except_under: PathBuf::from("/nonexistent/w/.ralph/worktrees"),
        };
        assert!(co.concerns(Some(Path::new("/nonexistent/w/src")), b""));
        assert!(!co.concerns(
            Some(Path::new("/nonexistent/w/.ralph/worktrees/slot-1")),
            b""
        ));
        assert!(!co.concerns(Some(Path::new("/elsewhere")), b"HOME=/h\0"));
        assert!(co.concerns(
            Some(Path::new("/elsewhere")),
            b"HOME=/h\0GIT_DIR=/nonexistent/w/.git\0"
        ));
        assert!(co.concerns(None, b"GIT_WORK_TREE=/nonexistent/w\0"));
        assert!(!co.concerns(None, b"GIT_DIR=/nonexistent/w/.git/worktrees/x\0"));
    }
}
