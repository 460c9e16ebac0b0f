//! The main checkout's side of a landing, done the way git itself updates a
//! checkout so that the user's own git commands never interleave with it:
//!
//! 1. `index.lock` is created with `O_EXCL`, exactly as git does, then the
//!    target branch's own lock (`refs/heads/<branch>.lock`), and both are
//!    held until the ref has moved. Every git command that writes the index
//!    takes the first; `git commit` lets go of it before it moves the branch,
//!    which takes the second. A live lock of someone else's is waited for,
//!    briefly, then reported as busy: nobody's failure.
//! 2. Holding a lock is not enough: `git commit` *reads* the index before it
//!    takes `index.lock` (builtin/commit.c, `prepare_index`), then writes
//!    back what it read, then fails on HEAD if the branch moved. A landing
//!    that falls between its read and its lock is undone by that write, and
//!    the user's next commit records the stale index on top of the merge,
//!    reverting the story. (`git status` and `git diff` check the index on
//!    disk is the one they read before writing; `git add -p` does not.) So
//!    ralph keeps `index.lock` until no git process that may hold an older
//!    copy lives: under the locks, before changing anything, it outlasts the
//!    user's git processes already running (`outlast`; one still running
//!    after `LOCK_WAIT` makes the landing busy, naming it), and after the
//!    ref move it outlasts those that started before the final index was in
//!    place (start times in clock ticks since boot; the same tick counts as
//!    before). Meanwhile each one that tries the lock fails as git fails,
//!    writing nothing; processes started later read the new index. Commands
//!    that never write back an older index (`INDEX_SAFE`) are not waited
//!    for. The scan of `/proc` is `process`'s, passed in as a
//!    `CheckoutWatch`.
//! 3. Under the locks: the target's tip and HEAD are read again, the index is
//!    read from disk (never a copy read before the lock); an index that is a
//!    stale copy against an earlier landing of the run (`stale_against`: a
//!    process outlived the wait) gets that landing's entries back; the files
//!    the merge changes are written by a safe checkout judged against that
//!    index, and the new index is written beside it and renamed over
//!    `index` while `index.lock` is still held, before the ref moves. A kill
//!    between the two leaves the old tip with the merge's files and index,
//!    which start-up recovery already rolls back (`.ralph/landing.json`); a
//!    kill after the ref move leaves only stale lock files, which start-up
//!    removes.
//! 4. The ref moves (compare-and-swap), then the locks go. A landing that
//!    cannot move the ref puts its files and the index (same bytes, same
//!    mtime) back before it lets go of `index.lock`: the checkout is as the
//!    user had it.
//!
//! Index entries ralph writes never carry stat data it did not verify: the
//! entries the merge changes are written "smudged" (no stat data, as `git
//! read-tree` writes them), so git and libgit2 hash those files before they
//! trust them, and entries that were racily clean against the old index's
//! mtime are smudged too, by git's rule (whole seconds: git is built without
//! `USE_NSEC` by default), because the new index file is newer and would
//! otherwise vouch for them. An edit the user makes at any moment of a
//! landing therefore stays visible to `git status`.
//!
//! Work a later commit undoes is not hidden either: `reverted_paths` finds
//! a landed story's paths that a later commit set back to their content
//! from before its merge, and the run warns, naming the commit.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::GitError;

/// How long a landing waits for someone else's `index.lock` before it
/// reports the checkout as busy (the caller retries later).
pub(super) const LOCK_WAIT: Duration = Duration::from_secs(5);

/// The new index is built here (beside `index`, so the rename is atomic) and
/// renamed over `index` while `index.lock` is held. libgit2 writes it
/// through `<name>.lock`, which start-up removes when stale like any lock.
const NEW_INDEX: &str = "ralph-landing.index";

/// A git lock file (`index.lock`, `refs/heads/<branch>.lock`) created by
/// us: removed on drop, so every early return and every error path
/// releases it.
pub(super) struct LockFile {
    path: PathBuf,
    _file: File,
}

impl LockFile {
    /// Takes `lock`, waiting up to `wait` while another process holds it;
    /// `None` when it is still held then.
    pub(super) fn acquire(lock: &Path, wait: Duration) -> io::Result<Option<LockFile>> {
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(1);
        loop {
            let created = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .open(lock);
            match created {
                Ok(file) => {
                    return Ok(Some(LockFile {
                        path: lock.to_path_buf(),
                        _file: file,
                    }))
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            // Short at first: a user's `git add` holds a lock for a few ms.
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

impl Drop for LockFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// The index file as it was when the lock was taken: enough to put it back
/// byte for byte, with its mtime, which git's racy-timestamp rule reads.
pub(super) struct IndexSnapshot {
    bytes: Option<Vec<u8>>,
    mtime: Option<SystemTime>,
}

impl IndexSnapshot {
    pub(super) fn read(index: &Path) -> io::Result<IndexSnapshot> {
        match fs::read(index) {
            Ok(bytes) => {
                let mtime = fs::metadata(index)?.modified().ok();
                Ok(IndexSnapshot {
                    bytes: Some(bytes),
                    mtime,
                })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(IndexSnapshot {
                bytes: None,
                mtime: None,
            }),
            Err(e) => Err(e),
        }
    }

    /// The old index's mtime as git stores index timestamps.
    pub(super) fn stamp(&self) -> Option<(i64, u32)> {
        self.mtime.map(split_time)
    }

    /// Writes the snapshot to `path` with its original mtime (libgit2 takes
    /// its racy-entry baseline from the file it reads).
    pub(super) fn write_to(&self, path: &Path) -> io::Result<()> {
        let Some(bytes) = &self.bytes else {
            return match fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        };
        let mut f = File::create(path)?;
        f.write_all(bytes)?;
        if let Some(t) = self.mtime {
            f.set_modified(t)?;
        }
        Ok(())
    }

    /// Puts the old index back (atomically: written beside it, renamed).
    pub(super) fn restore(&self, git_dir: &Path) -> io::Result<()> {
        let index = git_dir.join("index");
        if self.bytes.is_none() {
            return match fs::remove_file(&index) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        }
        let tmp = new_index_path(git_dir);
        self.write_to(&tmp)?;
        fs::rename(&tmp, &index)
    }
}

pub(super) fn new_index_path(git_dir: &Path) -> PathBuf {
    git_dir.join(NEW_INDEX)
}

/// Removes what a landing killed mid-write left of its new index. Only
/// called with `index.lock` held: nobody else uses these names.
pub(super) fn clear_new_index(git_dir: &Path) -> io::Result<()> {
    for p in [
        new_index_path(git_dir),
        git_dir.join(format!("{NEW_INDEX}.lock")),
    ] {
        match fs::remove_file(&p) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

fn split_time(t: SystemTime) -> (i64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(_) => (0, 0),
    }
}

/// git's racy-timestamp rule: an entry whose file was modified at or after
/// the moment the index was written may have changed again within the same
/// timestamp tick, so its stat data proves nothing. The tick is git's: a
/// git built without `USE_NSEC` (the default) compares whole seconds, so an
/// entry modified in the same second as the index is racy even when its
/// nanoseconds are earlier; that rule is also the more careful of the two.
/// An index that was never read (`None`) vouches for nothing either.
pub(super) fn is_racy(entry_mtime: (i64, u32), index_stamp: Option<(i64, u32)>) -> bool {
    match index_stamp {
        None => true,
        Some((secs, _)) => entry_mtime.0 >= secs,
    }
}

/// A live git process of the user's working on the main checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UserGit {
    pub(crate) pid: i32,
    /// When it started, in the unit and clock of `CheckoutWatch::now`.
    pub(crate) started: u64,
    /// Its command line; empty when it could not be read.
    pub(crate) argv: Vec<String>,
}

/// What a landing sees of the user's git processes (`process` reads
/// `/proc`; `run/land.rs` passes it in), and where it says that it waits.
pub(crate) trait CheckoutWatch {
    /// Now, comparable with `UserGit::started`: a process that started
    /// before this call never compares later.
    fn now(&self) -> u64;
    /// The live git processes working on the main checkout.
    fn git_processes(&self) -> Vec<UserGit>;
    /// A line for ralph.log.
    fn log(&self, line: &str);
    /// May the landing go on as `merge` on `base` instead of what it was
    /// asked (its merge made again on commits the user added meanwhile)?
    /// A landing that may records it first, where a crash's recovery reads
    /// it; one that may not (the default) reports the target moved.
    fn relanding(&self, _base: &str, _merge: &str) -> bool {
        false
    }
}

/// Do two sets of changed paths meet: the same path, or one inside the
/// other (a file on one side where the other has a directory)?
pub(super) fn paths_meet(a: &[String], b: &[String]) -> bool {
    let inside = |p: &str, dir: &str| {
        p.len() > dir.len() && p.starts_with(dir) && p.as_bytes()[dir.len()] == b'/'
    };
    a.iter()
        .any(|p| b.iter().any(|q| p == q || inside(p, q) || inside(q, p)))
}

/// No watch: landings that no user's git can race (tests).
#[cfg(test)]
pub(crate) struct NoWatch;

#[cfg(test)]
impl CheckoutWatch for NoWatch {
    fn now(&self) -> u64 {
        0
    }
    fn git_processes(&self) -> Vec<UserGit> {
        Vec::new()
    }
    fn log(&self, _: &str) {}
}

/// Subcommands that never write the index from a copy they read earlier:
/// they do not write it at all, or (`status`, `diff`) only after checking
/// that the index on disk is still the one they read. A process running any
/// other (or one whose command line cannot be read) may: `git commit` reads
/// the index before it takes `index.lock`, `git add -p` holds its copy while
/// the user picks hunks.
const INDEX_SAFE: &[&str] = &[
    "annotate",
    "archive",
    "blame",
    "cat-file",
    "check-attr",
    "check-ignore",
    "commit-graph",
    "config",
    "count-objects",
    "describe",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "fetch",
    "for-each-ref",
    "format-patch",
    "fsck",
    "gc",
    "grep",
    "hash-object",
    "help",
    "index-pack",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "maintenance",
    "merge-base",
    "multi-pack-index",
    "name-rev",
    "pack-objects",
    "pack-refs",
    "prune",
    "range-diff",
    "reflog",
    "repack",
    "rev-list",
    "rev-parse",
    "shortlog",
    "show",
    "show-ref",
    "status",
    "symbolic-ref",
    "var",
    "version",
    "whatchanged",
];

/// The git subcommand of a command line (after git's own options).
pub(super) fn subcommand(argv: &[String]) -> Option<&str> {
    let mut args = argv.iter().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            // Options of git itself that take the next word as their value.
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env" => {
                args.next();
            }
            s if s.starts_with('-') => {}
            s => return Some(s),
        }
    }
    None
}

/// May this git process write back a copy of the index it read earlier?
pub(super) fn may_write_a_stale_index(argv: &[String]) -> bool {
    subcommand(argv).is_none_or(|s| !INDEX_SAFE.contains(&s))
}

/// The processes a landing must outlast: those that started at or before
/// `mark` (the same clock tick counts as before) and may write back a copy
/// of the index read then.
pub(super) fn to_outlast(procs: Vec<UserGit>, mark: u64) -> Vec<UserGit> {
    procs
        .into_iter()
        .filter(|g| g.started <= mark && may_write_a_stale_index(&g.argv))
        .collect()
}

/// Waits, up to `wait`, until every git process `to_outlast` names for
/// `mark` has ended; returns those still alive then. Each one waited for
/// gets a ralph.log line naming it. While `index.lock` is held, each of
/// them that tries to take it fails as git fails, writing nothing.
pub(super) fn outlast(
    watch: &dyn CheckoutWatch,
    mark: u64,
    wait: Duration,
    why: &str,
) -> Vec<UserGit> {
    let deadline = Instant::now() + wait;
    let mut named = std::collections::BTreeSet::new();
    let mut pause = Duration::from_millis(1);
    loop {
        let left = to_outlast(watch.git_processes(), mark);
        if left.is_empty() {
            return left;
        }
        for g in &left {
            if named.insert(g.pid) {
                watch.log(&format!(
                    "landing: waiting for git process {} ({}): {why}",
                    g.pid,
                    describe(g)
                ));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return left;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// A process as a person recognises it: its command line.
pub(crate) fn describe(g: &UserGit) -> String {
    if g.argv.is_empty() {
        "command line unreadable".to_string()
    } else {
        g.argv.join(" ")
    }
}

/// One path a landing changed: its blob before and after (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathChange {
    pub(crate) path: String,
    pub(crate) before: Option<git2::Oid>,
    pub(crate) after: Option<git2::Oid>,
    /// The mode of `after`.
    pub(crate) mode: u32,
}

/// Is the index a copy read before this landing and written back after it
/// (by a git process whose read straddled the landing)? Every path the
/// landing changed holds its old blob in the index while the tip still
/// holds the landing's. A person staging a revert of a story reverts some
/// of its paths, or commits it; a stale copy lacks all of them.
pub(super) fn stale_against(
    changes: &[PathChange],
    index: impl Fn(&str) -> Option<git2::Oid>,
    tip: impl Fn(&str) -> Option<git2::Oid>,
) -> bool {
    !changes.is_empty()
        && changes
            .iter()
            .all(|c| c.before != c.after && index(&c.path) == c.before && tip(&c.path) == c.after)
}

/// The paths of a landing whose content on the tip is back to what it was
/// before the landing: its work there is undone.
pub(crate) fn reverted_paths(
    changes: &[PathChange],
    tip: impl Fn(&str) -> Option<git2::Oid>,
) -> Vec<String> {
    changes
        .iter()
        .filter(|c| c.before != c.after && tip(&c.path) == c.before)
        .map(|c| c.path.clone())
        .collect()
}

/// An index entry for `path` with no stat data: whoever reads it next must
/// hash the file to know whether it is clean.
pub(super) fn smudged_entry(path: &str, id: git2::Oid, mode: u32) -> git2::IndexEntry {
    git2::IndexEntry {
        ctime: git2::IndexTime::new(0, 0),
        mtime: git2::IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode,
        uid: 0,
        gid: 0,
        file_size: 0,
        id,
        flags: path.len().min(0xfff) as u16,
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }
}

/// Which stage-0 entries of an index must lose their stat data before it is
/// written anew: the ones racily clean against the old index's timestamp.
/// Entries with no stat data are left as they are.
pub(super) fn racy_entries(
    entries: impl Iterator<Item = git2::IndexEntry>,
    stamp: Option<(i64, u32)>,
) -> Vec<git2::IndexEntry> {
    entries
        .filter(|e| (e.flags >> 12) & 0x3 == 0)
        .filter(|e| e.file_size != 0 || e.mtime.seconds() != 0)
        .filter(|e| is_racy((i64::from(e.mtime.seconds()), e.mtime.nanoseconds()), stamp))
        .collect()
}

/// Whether a smudged entry (ralph's own: no stat data at all) may take the
/// stat data of its file again once the file's content was checked to be
/// the entry's blob. Only a file last modified in a second before the old
/// index was written: a later edit then always shows in its mtime, which
/// git and libgit2 compare, and the new index does not vouch for a racy
/// one. Without it every file a run landed is hashed again by every later
/// landing's checkout (quadratic over a long run).
pub(super) fn may_refresh(
    entry: &git2::IndexEntry,
    file_mtime: (i64, u32),
    stamp: Option<(i64, u32)>,
) -> bool {
    smudged_by_ralph(entry) && !is_racy(file_mtime, stamp)
}

/// A stage-0 file entry with no stat data at all, as ralph writes them
/// (`smudged_entry`); git's own smudging keeps the mtime.
fn smudged_by_ralph(entry: &git2::IndexEntry) -> bool {
    (entry.flags >> 12) & 0x3 == 0
        && entry.file_size == 0
        && entry.mtime.seconds() == 0
        && entry.ino == 0
        && matches!(entry.mode, 0o100644 | 0o100755)
}

/// Gives back their stat data to the smudged entries of `index` whose files
/// under `workdir` hold exactly their blob (hashed as stored: a file that
/// a filter would change stays smudged) and are old enough
/// (`may_refresh`); what git's own index refresh does for them. Returns how
/// many.
pub(super) fn refresh_settled(
    index: &mut git2::Index,
    workdir: &Path,
    stamp: Option<(i64, u32)>,
) -> Result<usize, git2::Error> {
    use std::os::unix::fs::MetadataExt;
    let mut refreshed = Vec::new();
    for e in index.iter() {
        // Only ralph's own smudged entries are worth a stat.
        if !smudged_by_ralph(&e) {
            continue;
        }
        let path = workdir.join(String::from_utf8_lossy(&e.path).as_ref());
        // The stat is taken before the hash: an edit after it moves the mtime.
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_file() || !may_refresh(&e, (meta.mtime(), meta.mtime_nsec() as u32), stamp) {
            continue;
        }
        let exec = meta.mode() & 0o111 != 0;
        if exec != (e.mode == 0o100755) {
            continue;
        }
        match git2::Oid::hash_file(git2::ObjectType::Blob, &path) {
            Ok(id) if id == e.id => {}
            _ => continue,
        }
        let mut e = e;
        // git keeps these fields as 32 bits; it truncates them the same way.
        e.ctime = git2::IndexTime::new(meta.ctime() as i32, meta.ctime_nsec() as u32);
        e.mtime = git2::IndexTime::new(meta.mtime() as i32, meta.mtime_nsec() as u32);
        e.dev = meta.dev() as u32;
        e.ino = meta.ino() as u32;
        e.uid = meta.uid();
        e.gid = meta.gid();
        e.file_size = meta.size() as u32;
        refreshed.push(e);
    }
    let n = refreshed.len();
    for e in refreshed {
        index.add(&e)?;
    }
    Ok(n)
}

/// Which worktree, other than the one at `me` and those under `except_under`
/// (ralph's own), has `refname` checked out: `candidates` are (working
/// directory, the ref its HEAD names or the branch a rebase there is on).
pub(super) fn holder_of<'a>(
    refname: &str,
    me: &Path,
    except_under: Option<&Path>,
    candidates: &'a [(PathBuf, Vec<String>)],
) -> Option<&'a Path> {
    candidates
        .iter()
        .filter(|(path, _)| !super::same_path(path, me))
        .filter(|(path, _)| except_under.is_none_or(|dir| !path.starts_with(dir)))
        .find(|(_, refs)| refs.iter().any(|r| r == refname))
        .map(|(path, _)| path.as_path())
}

/// The refs a worktree admin dir (or the common dir, for the main worktree)
/// has checked out: HEAD's symbolic target and the branch of a rebase in
/// progress (whose HEAD is detached), as git's own "already checked out"
/// check counts them.
pub(super) fn checked_out_refs(admin: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(r) = super::head_file_ref(admin) {
        out.push(r);
    }
    for dir in ["rebase-merge", "rebase-apply"] {
        if let Ok(name) = fs::read_to_string(admin.join(dir).join("head-name")) {
            let name = name.trim();
            if name.starts_with("refs/heads/") {
                out.push(name.to_string());
            }
        }
    }
    out
}

pub(super) fn io_error(what: &str, path: &Path, e: io::Error) -> GitError {
    GitError::Other(format!("{what} {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_paths_meet_when_equal_or_one_holds_the_other() {
        let v = |s: &[&str]| s.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert!(paths_meet(&v(&["a.txt", "src/x.rs"]), &v(&["src/x.rs"])));
        assert!(paths_meet(&v(&["src"]), &v(&["src/x.rs"])));
        assert!(paths_meet(&v(&["src/x.rs"]), &v(&["src"])));
        assert!(!paths_meet(
            &v(&["src/x.rs"]),
            &v(&["src/x.rs2", "sr", "src/x"])
        ));
        assert!(!paths_meet(&v(&["srcx/a"]), &v(&["src"])));
        assert!(!paths_meet(&v(&[]), &v(&["a"])));
    }

    #[test]
    fn racy_means_modified_in_or_after_the_second_the_index_was_written() {
        let stamp = Some((100, 500));
        assert!(!is_racy((99, 999_999_999), stamp));
        // git without USE_NSEC sees one second here: racy.
        assert!(is_racy((100, 0), stamp));
        assert!(is_racy((100, 499), stamp));
        assert!(is_racy((100, 500), stamp));
        assert!(is_racy((100, 501), stamp));
        assert!(is_racy((101, 0), stamp));
        assert!(is_racy((1, 0), None), "no index read: nothing vouched for");
    }

    #[test]
    fn only_ralphs_smudged_entries_of_files_settled_before_the_index_are_refreshed() {
        let stamp = Some((100, 500));
        let e = |mode: u32, size: u32, mtime: i32| git2::IndexEntry {
            file_size: size,
            mtime: git2::IndexTime::new(mtime, 0),
            mode,
            ..smudged_entry("a.txt", git2::Oid::ZERO_SHA1, 0o100644)
        };
        assert!(may_refresh(&e(0o100644, 0, 0), (99, 0), stamp));
        assert!(may_refresh(&e(0o100755, 0, 0), (50, 0), stamp));
        // Modified in the index's second or later: racy, not vouched for.
        assert!(!may_refresh(&e(0o100644, 0, 0), (100, 0), stamp));
        assert!(!may_refresh(&e(0o100644, 0, 0), (99, 0), None));
        // Stat data of its own (the user's git wrote it): left alone.
        assert!(!may_refresh(&e(0o100644, 3, 0), (99, 0), stamp));
        assert!(!may_refresh(&e(0o100644, 0, 7), (99, 0), stamp));
        // Links and submodules are not files to hash.
        assert!(!may_refresh(&e(0o120000, 0, 0), (99, 0), stamp));
        assert!(!may_refresh(&e(0o160000, 0, 0), (99, 0), stamp));
    }

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn the_subcommand_comes_after_gits_own_options() {
        assert_eq!(subcommand(&argv("git commit -m x")), Some("commit"));
        assert_eq!(
            subcommand(&argv(
                "/usr/bin/git -C /p -c core.fsmonitor=x --no-pager log -p"
            )),
            Some("log")
        );
        assert_eq!(
            subcommand(&argv("git --git-dir /p/.git --work-tree /p add -p")),
            Some("add")
        );
        assert_eq!(subcommand(&argv("git --version")), None);
        assert_eq!(subcommand(&[]), None);
    }

    #[test]
    fn only_commands_that_never_write_back_an_old_index_are_not_waited_for() {
        for safe in [
            "git log",
            "git -c a=b status --porcelain",
            "git diff",
            "git maintenance run --auto --detach",
        ] {
            assert!(!may_write_a_stale_index(&argv(safe)), "{safe}");
        }
        for risky in [
            "git commit -m x",
            "git add -p",
            "git stash",
            "git my-alias",
            "git",
        ] {
            assert!(may_write_a_stale_index(&argv(risky)), "{risky}");
        }
        assert!(may_write_a_stale_index(&[]), "an unreadable command line");
    }

    fn user_git(pid: i32, started: u64, cmd: &str) -> UserGit {
        UserGit {
            pid,
            started,
            argv: argv(cmd),
        }
    }

    #[test]
    fn a_landing_outlasts_risky_git_started_up_to_its_mark_same_tick_included() {
        let procs = vec![
            user_git(1, 99, "git commit -m a"),
            user_git(2, 100, "git commit -m b"),
            user_git(3, 101, "git commit -m c"),
            user_git(4, 50, "git log"),
        ];
        let pids: Vec<i32> = to_outlast(procs, 100).iter().map(|g| g.pid).collect();
        assert_eq!(pids, [1, 2]);
    }

    /// Processes that end one by one as the landing looks again.
    struct Fake {
        calls: std::cell::Cell<usize>,
        procs: Vec<(usize, UserGit)>,
        lines: std::cell::RefCell<Vec<String>>,
    }

    impl CheckoutWatch for Fake {
        fn now(&self) -> u64 {
            100
        }
        fn git_processes(&self) -> Vec<UserGit> {
            let n = self.calls.get();
            self.calls.set(n + 1);
            self.procs
                .iter()
                .filter(|(ends_at, _)| n < *ends_at)
                .map(|(_, g)| g.clone())
                .collect()
        }
        fn log(&self, line: &str) {
            self.lines.borrow_mut().push(line.to_string());
        }
    }

    #[test]
    fn outlasting_waits_for_each_process_naming_it_once_and_stops_at_the_bound() {
        let fake = Fake {
            calls: Default::default(),
            procs: vec![
                (3, user_git(7, 90, "git commit -m x")),
                (5, user_git(8, 100, "git add -p")),
                (usize::MAX, user_git(9, 200, "git commit -m later")),
            ],
            lines: Default::default(),
        };
        let left = outlast(&fake, 100, Duration::from_secs(30), "why");
        assert!(left.is_empty());
        assert_eq!(fake.calls.get(), 6, "looked until both had ended");
        assert_eq!(
            *fake.lines.borrow(),
            [
                "landing: waiting for git process 7 (git commit -m x): why",
                "landing: waiting for git process 8 (git add -p): why"
            ]
        );
        let stuck = Fake {
            calls: Default::default(),
            procs: vec![(usize::MAX, user_git(7, 90, "git commit"))],
            lines: Default::default(),
        };
        let left = outlast(&stuck, 100, Duration::from_millis(30), "why");
        assert_eq!(left.iter().map(|g| g.pid).collect::<Vec<_>>(), [7]);
        assert_eq!(stuck.lines.borrow().len(), 1);
    }

    fn oid(n: u8) -> Option<git2::Oid> {
        Some(git2::Oid::from_bytes(&[n; 20]).unwrap())
    }

    fn change(path: &str, before: Option<git2::Oid>, after: Option<git2::Oid>) -> PathChange {
        PathChange {
            path: path.to_string(),
            before,
            after,
            mode: 0o100644,
        }
    }

    #[test]
    fn an_index_is_stale_against_a_landing_only_when_it_lacks_all_of_it() {
        let changes = vec![
            change("new.txt", None, oid(1)),
            change("spec.md", oid(2), oid(3)),
        ];
        let tip = |p: &str| if p == "new.txt" { oid(1) } else { oid(3) };
        // A copy from before the landing: neither path has the landing's blob.
        let old = |p: &str| if p == "new.txt" { None } else { oid(2) };
        assert!(stale_against(&changes, old, tip));
        // The landed index, or one path reverted on purpose: not stale.
        assert!(!stale_against(&changes, tip, tip));
        let one = |p: &str| if p == "new.txt" { None } else { oid(3) };
        assert!(!stale_against(&changes, one, tip));
        // The tip changed a path since: the user's commit, not a stale copy.
        let moved = |p: &str| if p == "new.txt" { oid(1) } else { oid(4) };
        assert!(!stale_against(&changes, old, moved));
        assert!(!stale_against(&[], old, tip));
    }

    #[test]
    fn reverted_paths_hold_their_content_from_before_the_landing() {
        let changes = vec![
            change("new.txt", None, oid(1)),
            change("spec.md", oid(2), oid(3)),
            change("gone.txt", oid(5), None),
        ];
        let tip = |p: &str| match p {
            "new.txt" => None,
            "spec.md" => oid(4),
            _ => oid(5),
        };
        assert_eq!(reverted_paths(&changes, tip), ["new.txt", "gone.txt"]);
    }

    fn entry(path: &str, secs: i32, nanos: u32, size: u32, stage: u16) -> git2::IndexEntry {
        let mut e = smudged_entry(path, git2::Oid::ZERO_SHA1, 0o100644);
        e.mtime = git2::IndexTime::new(secs, nanos);
        e.file_size = size;
        e.flags |= stage << 12;
        e
    }

    #[test]
    fn only_racily_clean_stage_zero_entries_with_stat_data_are_smudged() {
        let entries = vec![
            entry("old", 90, 0, 4, 0),
            entry("same-second-earlier-nanos", 100, 100, 4, 0),
            entry("same-tick", 100, 500, 4, 0),
            entry("newer", 101, 0, 4, 0),
            entry("conflict", 101, 0, 4, 2),
            entry("already-smudged", 0, 0, 0, 0),
        ];
        let racy: Vec<String> = racy_entries(entries.into_iter(), Some((100, 500)))
            .into_iter()
            .map(|e| String::from_utf8(e.path).unwrap())
            .collect();
        assert_eq!(racy, ["same-second-earlier-nanos", "same-tick", "newer"]);
    }

    #[test]
    fn a_smudged_entry_has_no_stat_data_and_a_correct_name_length() {
        let e = smudged_entry("src/a.rs", git2::Oid::ZERO_SHA1, 0o100755);
        assert_eq!((e.file_size, e.mtime.seconds(), e.ino), (0, 0, 0));
        assert_eq!(e.flags, 8);
        assert_eq!(e.mode, 0o100755);
        let long = "x".repeat(5000);
        assert_eq!(
            smudged_entry(&long, git2::Oid::ZERO_SHA1, 0o100644).flags,
            0xfff
        );
    }

    #[test]
    fn the_holder_is_another_worktree_outside_ralphs_own() {
        let me = PathBuf::from("/p");
        let c = vec![
            (PathBuf::from("/p"), vec!["refs/heads/main".to_string()]),
            (
                PathBuf::from("/p/.ralph/worktrees/slot-1"),
                vec!["refs/heads/main".to_string()],
            ),
            (
                PathBuf::from("/other"),
                vec!["refs/heads/feature".to_string()],
            ),
            (
                PathBuf::from("/rebasing"),
                vec!["refs/heads/topic".to_string()],
            ),
        ];
        let ralph = Path::new("/p/.ralph/worktrees");
        assert_eq!(holder_of("refs/heads/main", &me, Some(ralph), &c), None);
        assert_eq!(
            holder_of("refs/heads/main", &me, None, &c),
            Some(Path::new("/p/.ralph/worktrees/slot-1"))
        );
        assert_eq!(
            holder_of("refs/heads/feature", &me, Some(ralph), &c),
            Some(Path::new("/other"))
        );
        assert_eq!(
            holder_of("refs/heads/topic", &me, Some(ralph), &c),
            Some(Path::new("/rebasing"))
        );
        assert_eq!(holder_of("refs/heads/none", &me, None, &c), None);
    }

    #[test]
    fn the_index_lock_is_exclusive_and_released_on_drop() {
        let tmp = tempfile::tempdir().unwrap();
        let lock = tmp.path().join("index.lock");
        let held = LockFile::acquire(&lock, Duration::ZERO).unwrap().unwrap();
        assert!(lock.exists());
        assert!(LockFile::acquire(&lock, Duration::from_millis(30))
            .unwrap()
            .is_none());
        drop(held);
        assert!(!lock.exists());
        // Someone else's lock is never removed by a failed attempt.
        fs::write(&lock, "").unwrap();
        assert!(LockFile::acquire(&lock, Duration::ZERO).unwrap().is_none());
        assert!(lock.exists());
    }

    #[test]
    fn a_restored_index_has_its_bytes_and_mtime_back() {
        let tmp = tempfile::tempdir().unwrap();
        let index = tmp.path().join("index");
        fs::write(&index, b"DIRC old").unwrap();
        let old = SystemTime::UNIX_EPOCH + Duration::new(1_000_000, 123_456_789);
        File::options()
            .write(true)
            .open(&index)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let snap = IndexSnapshot::read(&index).unwrap();
        assert_eq!(snap.stamp(), Some((1_000_000, 123_456_789)));
        fs::write(&index, b"DIRC new, longer").unwrap();
        snap.restore(tmp.path()).unwrap();
        assert_eq!(fs::read(&index).unwrap(), b"DIRC old");
        assert_eq!(fs::metadata(&index).unwrap().modified().unwrap(), old);
        assert!(!new_index_path(tmp.path()).exists());
    }
}
