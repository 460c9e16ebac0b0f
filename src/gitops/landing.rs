//! The main checkout's side of a landing, done the way git itself updates a
//! checkout so that the user's own git commands never interleave with it:
//!
//! 1. `index.lock` is created with `O_EXCL`, exactly as git does, then the
//!    target branch's own lock (`refs/heads/<branch>.lock`), and both are
//!    held until the ref has moved. Every git command that writes the index
//!    takes the first; `git commit` lets go of it before it moves the branch,
//!    which takes the second. So a user's command runs wholly before the
//!    landing (which then sees the new commit and reports the target as
//!    moved), wholly after it (and sees the landed state), or fails as git
//!    fails when another git process is running. A live lock of someone
//!    else's is waited for, briefly, then reported as busy: nobody's failure.
//! 2. Under the locks: the target's tip and HEAD are read again, the index is
//!    read from disk (never a copy read before the lock), the files the merge
//!    changes are written by a safe checkout judged against that index, and
//!    the new index is written beside it and renamed over `index` while
//!    `index.lock` is still held, before the ref moves. A kill between the
//!    two leaves the old tip with the merge's files and index, which start-up
//!    recovery already rolls back (`.ralph/landing.json`); a kill after the
//!    ref move leaves only stale lock files, which start-up removes.
//! 3. The ref moves (compare-and-swap), then the locks go. A landing that
//!    cannot move the ref puts its files and the index (same bytes, same
//!    mtime) back before it lets go of `index.lock`: the checkout is as the
//!    user had it.
//!
//! Index entries ralph writes never carry stat data it did not verify: the
//! entries the merge changes are written "smudged" (no stat data, as `git
//! read-tree` writes them), so git and libgit2 hash those files before they
//! trust them, and entries that were racily clean against the old index's
//! mtime are smudged too, because the new index file is newer and would
//! otherwise vouch for them. An edit the user makes at any moment of a
//! landing therefore stays visible to `git status`.

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
