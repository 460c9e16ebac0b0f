//! Atomic file writes and the temp files a kill leaves of them: below
//! every module that keeps a file (`store`, the tracker's queue in
//! `backlog/`), so each writes through the one writer.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// Marks `write_atomic`'s temp files: `.<name>.tmp-<pid>-<n>`.
const TMP_MARK: &str = ".tmp-";

/// Removes the temp files of atomic writes in `dir` that a kill interrupted.
pub(crate) fn remove_stale_temp_files(dir: &Path) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with('.') && n.contains(TMP_MARK) {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Writes `data` to `path` so that a crash leaves either the old or the new
/// content: temp file in the same directory, fsync, rename, fsync of the dir.
pub(crate) fn write_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // One temp file per write, not per process: two threads may write the
    // same file at once (the tracker's snapshot: the start's read going on
    // in the background and the run's poll).
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}{TMP_MARK}{}-{n}", std::process::id()));
    let written = File::create(&tmp)
        .and_then(|mut f| f.write_all(data).and_then(|()| f.sync_all()))
        .and_then(|()| fs::rename(&tmp, path));
    if written.is_err() {
        // A full disk: the half-written copy would stay for good.
        let _ = fs::remove_file(&tmp);
    }
    written?;
    File::open(dir)?.sync_all()?;
    Ok(())
}
