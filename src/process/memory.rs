//! How much memory a new agent could get: the headroom of the cgroup v2
//! limits ralph runs under (its own cgroup's and its ancestors'), and the
//! machine's `MemAvailable`, whichever is smaller. Read at the edge, once
//! per event of the run; the decision it feeds is `schedule::jobs_now`.

use std::fs;
use std::path::Path;

/// Memory available to a new child, in MB; `None` when nothing can be read
/// (not Linux, no /proc): the run then does not limit itself.
pub(crate) fn available_mb() -> Option<u64> {
    let machine = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| mem_available_mb(&t));
    let cgroup = super::cgroup::base().and_then(cgroup_headroom_mb);
    match (machine, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `MemAvailable` of `/proc/meminfo`, in MB.
fn mem_available_mb(meminfo: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let mut parts = line.split_whitespace();
    let n: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") | None => Some(n / 1024),
        Some(_) => None,
    }
}

/// The least headroom (`memory.max` − `memory.current`) of `dir` and the
/// cgroups above it that have a limit; `None` when none has one.
fn cgroup_headroom_mb(dir: &Path) -> Option<u64> {
    let mut least: Option<u64> = None;
    let mut at = Some(dir);
    while let Some(d) = at.filter(|d| d.join("cgroup.controllers").exists()) {
        let read = |f: &str| fs::read_to_string(d.join(f)).ok();
        if let (Some(max), Some(current)) = (read("memory.max"), read("memory.current")) {
            if let Some(h) = headroom_mb(&max, &current) {
                least = Some(least.map_or(h, |l| l.min(h)));
            }
        }
        at = d.parent();
    }
    least
}

/// `max` − `current` in MB; `None` for no limit (`max`) or unreadable text.
fn headroom_mb(max: &str, current: &str) -> Option<u64> {
    let max: u64 = max.trim().parse().ok()?;
    let current: u64 = current.trim().parse().ok()?;
    Some(max.saturating_sub(current) / (1024 * 1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_available() {
        let text = "MemTotal:       24683700 kB\nMemFree:        12332040 kB\nMemAvailable:   23452160 kB\n";
        assert_eq!(mem_available_mb(text), Some(22902));
        assert_eq!(mem_available_mb("MemTotal: 1 kB\n"), None);
        assert_eq!(mem_available_mb("MemAvailable: many kB\n"), None);
    }

    #[test]
    fn cgroup_headroom() {
        assert_eq!(headroom_mb("max\n", "123\n"), None);
        assert_eq!(headroom_mb("4294967296\n", "1073741824\n"), Some(3072));
        // Over the limit (reclaim pending): nothing left, not a wrap-around.
        assert_eq!(headroom_mb("1048576", "2097152"), Some(0));
    }

    #[test]
    fn the_tightest_limit_up_the_tree_counts() {
        let tmp = tempfile::tempdir().unwrap();
        let outer = tmp.path().join("outer");
        let inner = outer.join("inner");
        fs::create_dir_all(&inner).unwrap();
        let mb = |n: u64| (n * 1024 * 1024).to_string();
        for (dir, max, current) in [
            (&outer, mb(3000), mb(2000)),
            (&inner, "max".to_string(), mb(500)),
        ] {
            fs::write(dir.join("cgroup.controllers"), "memory\n").unwrap();
            fs::write(dir.join("memory.max"), max).unwrap();
            fs::write(dir.join("memory.current"), current).unwrap();
        }
        assert_eq!(cgroup_headroom_mb(&inner), Some(1000));
        fs::write(outer.join("memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_headroom_mb(&inner), None);
    }
}
