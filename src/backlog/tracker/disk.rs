//! Reading the tracker's files under `.ralph/tracker/` (written through
//! `atomic::write_atomic`, so a crash leaves the old copy or the new one).

use std::path::Path;

/// A JSON file of `.ralph/tracker/`, or `None` when absent or unreadable.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
}
