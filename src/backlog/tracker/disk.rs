//! The tracker's files under `.ralph/tracker/`, written so a crash leaves
//! the old copy or the new one, never half of one.

use std::path::Path;

/// Temp file, fsync, rename. (`store` has the same, but `backlog/` sits
/// below it in the module graph.)
pub(crate) fn write_durably(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".tracker.tmp-{}", std::process::id()));
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(data).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        // A full disk: the half-written copy would stay for good.
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A JSON file of `.ralph/tracker/`, or `None` when absent or unreadable.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
}
