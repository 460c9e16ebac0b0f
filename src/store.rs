//! Files under `.ralph/` that ralph owns: the state file (atomic writes), the
//! run lock, `progress.txt` and the technical log.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::error::Problem;
use crate::state::{State, StateError};

use crate::paths::{self, lock as lock_path, ralph_dir, state as state_path};

pub(crate) use crate::atomic::{remove_stale_temp_files, write_atomic};

/// Loads the state: the file (upgraded), else a bootstrap from `progress.txt`,
/// else empty. A file that is not a state file is a problem for the user.
pub(crate) fn load_state(root: &Path) -> Result<State, Problem> {
    match read_state(root)? {
        StateFile::Read(state) => Ok(*state),
        StateFile::Broken(broken) => Err(broken.problem()),
    }
}

/// What `.ralph/state.json` turned out to hold.
#[derive(Debug)]
pub(crate) enum StateFile {
    /// The state: the file (upgraded), a bootstrap, or empty.
    Read(Box<State>),
    /// A file that is no state file at all, which only `ralph reset --yes`
    /// may set aside: every other command refuses it.
    Broken(BrokenState),
}

/// Why the state file could not be read as one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BrokenState {
    pub(crate) line: Option<usize>,
    pub(crate) why: String,
}

impl BrokenState {
    /// What every command that needs the state says of it.
    pub(crate) fn problem(&self) -> Problem {
        Problem::new(
            paths::STATE,
            self.line,
            format!(
                "not a valid state file ({}): fix it, or run `ralph reset --yes` to set it \
                 aside and start again with no state",
                self.why
            ),
        )
    }
}

/// The state file as `load_state` reads it, a broken one told apart from
/// the problems no reset should paper over (a newer ralph's file, a file
/// that cannot be read at all).
pub(crate) fn read_state(root: &Path) -> Result<StateFile, Problem> {
    let path = state_path(root);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(StateFile::Read(Box::new(
                match fs::read_to_string(paths::progress(root)) {
                    Ok(p) => State::bootstrap_from_progress(&p),
                    Err(_) => State::default(),
                },
            )));
        }
        Err(e) => {
            return Err(Problem::new(
                paths::STATE,
                None,
                format!("cannot read: {e}"),
            ))
        }
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return Ok(StateFile::Broken(BrokenState {
            line: None,
            why: "not UTF-8 text".into(),
        }));
    };
    if text.trim().is_empty() {
        return Ok(StateFile::Read(Box::default()));
    }
    match State::from_json(&text) {
        Ok(state) => Ok(StateFile::Read(Box::new(state))),
        Err(StateError::Json(e)) => Ok(StateFile::Broken(BrokenState {
            line: Some(e.line()),
            why: e.to_string(),
        })),
        Err(StateError::Newer(n)) => Err(Problem::new(
            paths::STATE,
            None,
            format!(
                "written by a newer ralph (format_version {n}; this one reads up to {}): \
                 upgrade ralph; the file is left as it is",
                crate::state::FORMAT_VERSION
            ),
        )),
    }
}

/// Moves a broken state file aside, to `.ralph/state.json.broken-<time>`
/// (`-2`, `-3`, ... when that name is taken), and returns where it went:
/// it may hold what a person wants back, so it is never deleted. The
/// caller holds the run lock.
pub(crate) fn set_aside_state(root: &Path) -> Result<PathBuf> {
    let stamp = crate::timefmt::file_stamp(crate::timefmt::now_secs());
    let to = (1..)
        .map(|n| match n {
            1 => paths::broken_state(root, &stamp),
            n => paths::broken_state(root, &format!("{stamp}-{n}")),
        })
        .find(|p| !p.exists())
        .expect("some name is free");
    let from = state_path(root);
    fs::rename(&from, &to)
        .with_context(|| format!("moving {} to {}", from.display(), to.display()))?;
    Ok(to)
}

pub(crate) fn save_state(root: &Path, state: &State) -> Result<()> {
    write_atomic(&state_path(root), state.to_json().as_bytes())
        .with_context(|| format!("writing {}", state_path(root).display()))
}

/// The run lock: an OS lock on `.ralph/.lock` held for the whole run. The
/// file holds our PID for people to read; the OS lock is what counts, so a
/// holder that died (even by SIGKILL) leaves a lock that is simply free.
#[derive(Debug)]
pub(crate) struct RunLock {
    file: File,
    path: PathBuf,
}

/// Why the lock could not be taken.
#[derive(Debug)]
pub(crate) enum LockError {
    Held { pid: Option<u32> },
    Io(io::Error),
}

impl RunLock {
    pub(crate) fn acquire(root: &Path) -> Result<RunLock, LockError> {
        let path = lock_path(root);
        fs::create_dir_all(ralph_dir(root)).map_err(LockError::Io)?;
        // A previous holder unlinks the file when it releases; if we locked a
        // file that was unlinked meanwhile, our lock protects nothing: retry.
        for _ in 0..10 {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(LockError::Io)?;
            if file.try_lock().is_err() {
                let pid = fs::read_to_string(&path)
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
                return Err(LockError::Held { pid });
            }
            let same = match (file.metadata(), fs::metadata(&path)) {
                (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
                _ => false,
            };
            if !same {
                continue;
            }
            file.set_len(0).map_err(LockError::Io)?;
            (&file)
                .write_all(format!("{}\n", std::process::id()).as_bytes())
                .map_err(LockError::Io)?;
            return Ok(RunLock { file, path });
        }
        Err(LockError::Io(io::Error::other("lock file keeps changing")))
    }

    /// True when some live process holds the lock (read-only commands use it).
    pub(crate) fn is_held(root: &Path) -> bool {
        let Ok(file) = File::open(lock_path(root)) else {
            return false;
        };
        match file.try_lock_shared() {
            Ok(()) => {
                let _ = file.unlock();
                false
            }
            Err(_) => true,
        }
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

/// Appends lines to `progress.txt` (the human log, SPEC 3.9).
pub(crate) fn append_progress(root: &Path, line: &str) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(paths::progress(root))?;
    writeln!(f, "{line}")
}

/// What the log at `path` holds from byte `from` on, but no more than its
/// last `max_bytes` (lossy UTF-8): an agent or a command can print
/// gigabytes, and a prompt shows only the end. The flag says the start was
/// cut, so the first line may be partial.
pub(crate) fn read_log_end(path: &Path, from: u64, max_bytes: u64) -> io::Result<(String, bool)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    let start = from.max(len.saturating_sub(max_bytes));
    f.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok((String::from_utf8_lossy(&bytes).into_owned(), start > from))
}

/// The technical log (`ralph.log` or `-l FILE`).
#[derive(Debug, Clone)]
pub(crate) struct TechLog {
    path: Option<PathBuf>,
}

impl TechLog {
    pub(crate) fn new(path: Option<PathBuf>) -> TechLog {
        // `-l logs/run.log` should work in a fresh checkout too.
        if let Some(dir) = path.as_deref().and_then(Path::parent) {
            let _ = fs::create_dir_all(dir);
        }
        TechLog { path }
    }

    pub(crate) fn line(&self, msg: &str) {
        let Some(path) = &self.path else { return };
        // One write(2) per line: the run's threads (the dispatcher, the
        // merge queue's tasks) log at once, and `writeln!` on a file writes
        // a line in pieces another thread's can come between.
        let line = format!("[{}] {msg}\n", crate::timefmt::iso_now_millis());
        if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(path) {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// The attempt numbers that have a log in a story's log directory
/// (`paths::story_logs`), in order; none when it cannot be read. For
/// `ralph log` and the web view alike.
pub(crate) fn logged_attempts(dir: &Path) -> Vec<u32> {
    let mut out: Vec<u32> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| paths::attempt_log_number(&e.file_name().to_string_lossy()))
        .collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a file that is no state file is one `reset --yes` may set
    /// aside: a newer ralph's file, or one that cannot be read, stays a
    /// problem for every command.
    #[test]
    fn a_broken_state_file_is_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(paths::ralph_dir(root)).unwrap();
        let read = |bytes: &[u8]| {
            fs::write(state_path(root), bytes).unwrap();
            read_state(root)
        };
        for (bytes, line) in [
            (&b"{\"completed_stories\": [\n  oops"[..], Some(2)),
            (b"[]", Some(1)),
            (b"{\"completed_stories\": 5}", Some(1)),
            (b"\xff\xfe{}", None),
        ] {
            match read(bytes) {
                Ok(StateFile::Broken(b)) => {
                    assert_eq!(b.line, line, "{bytes:?}");
                    let shown = b.problem().to_string();
                    assert!(shown.starts_with(paths::STATE), "{shown}");
                    assert!(shown.contains("`ralph reset --yes`"), "{shown}");
                }
                other => panic!("{bytes:?}: {other:?}"),
            }
        }
        assert!(matches!(read(b"  \n"), Ok(StateFile::Read(s)) if *s == State::default()));
        assert!(read(b"{\"format_version\": 99}").is_err());
        fs::remove_file(state_path(root)).unwrap();
        assert!(matches!(read_state(root), Ok(StateFile::Read(_))));
    }

    /// Setting aside never overwrites what an earlier reset set aside.
    #[test]
    fn a_broken_state_file_set_aside_twice_keeps_both() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(paths::ralph_dir(root)).unwrap();
        fs::write(state_path(root), "first").unwrap();
        let one = set_aside_state(root).unwrap();
        fs::write(state_path(root), "second").unwrap();
        let two = set_aside_state(root).unwrap();
        assert_ne!(one, two);
        assert!(!state_path(root).exists());
        assert_eq!(fs::read_to_string(one).unwrap(), "first");
        assert_eq!(fs::read_to_string(two).unwrap(), "second");
    }

    /// Threads logging at once each get whole lines: a line written in
    /// pieces lost a landing's line to the 1,000-story figure's count.
    #[test]
    fn lines_logged_by_threads_at_once_are_never_cut() {
        let dir = tempfile::tempdir().unwrap();
        let log = TechLog::new(Some(dir.path().join("ralph.log")));
        std::thread::scope(|s| {
            for t in 0..8 {
                let log = &log;
                s.spawn(move || {
                    for i in 0..400 {
                        log.line(&format!("thread {t} line {i} {}", "x".repeat(40)));
                    }
                });
            }
        });
        let text = fs::read_to_string(dir.path().join("ralph.log")).unwrap();
        let whole = regex::Regex::new(r"^\[[^\]]+\] thread \d line \d+ x{40}$").unwrap();
        let cut: Vec<&str> = text.lines().filter(|l| !whole.is_match(l)).collect();
        assert!(
            cut.is_empty(),
            "{} cut lines, e.g. {:?}",
            cut.len(),
            cut.first()
        );
        assert_eq!(text.lines().count(), 8 * 400);
    }

    #[test]
    fn atomic_write_replaces_content() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/state.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        let leftovers: Vec<_> = fs::read_dir(dir.path().join("a")).unwrap().collect();
        assert_eq!(leftovers.len(), 1);
    }

    #[test]
    fn lock_is_exclusive_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let a = RunLock::acquire(dir.path()).unwrap();
        assert!(matches!(
            RunLock::acquire(dir.path()),
            Err(LockError::Held { pid: Some(_) })
        ));
        assert!(RunLock::is_held(dir.path()));
        drop(a);
        assert!(!lock_path(dir.path()).exists());
        assert!(!RunLock::is_held(dir.path()));
        let _b = RunLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn bad_state_file_is_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join(".ralph")).unwrap();
        fs::write(state_path(dir.path()), "{ nope").unwrap();
        let p = load_state(dir.path()).unwrap_err();
        assert!(p.to_string().contains(".ralph/state.json:1"));
    }

    #[test]
    fn a_log_end_is_read_from_its_start_or_its_last_bytes_lossily() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("attempt-1.log");
        fs::write(&p, b"one\ntwo \xff\nthree\n").unwrap();
        let end = |from, max| read_log_end(&p, from, max).unwrap();
        assert_eq!(end(0, 100), ("one\ntwo \u{fffd}\nthree\n".into(), false));
        assert_eq!(end(4, 100), ("two \u{fffd}\nthree\n".into(), false));
        assert_eq!(end(0, 8), ("\u{fffd}\nthree\n".into(), true));
        assert_eq!(end(17, 100), (String::new(), false));
        assert!(read_log_end(&dir.path().join("none.log"), 0, 8).is_err());
    }
}
