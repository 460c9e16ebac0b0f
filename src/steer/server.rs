//! The run's end of the steering socket: made under the run lock (so any
//! socket file already there is a killed run's, removed like a stale
//! lock), mode 0600, removed when the run ends. The dispatcher accepts on
//! it (`run/dispatcher.rs`); the decisions are the transition's.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The bound socket; its file goes when this is dropped.
pub(crate) struct SteerSocket {
    pub(crate) listener: UnixListener,
    path: PathBuf,
}

impl SteerSocket {
    /// Binds `.ralph/run.sock` for the run at `root`. Call only while
    /// holding the run lock: a socket file there belongs to no live run.
    pub(crate) fn bind(root: &Path) -> Result<SteerSocket> {
        let path = crate::paths::steer_socket(root);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
        }
        let listener =
            UnixListener::bind(&path).with_context(|| format!("binding {}", path.display()))?;
        // Only the run's user may steer it (connect needs write permission).
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("setting the mode of {}", path.display()))?;
        Ok(SteerSocket { listener, path })
    }
}

impl Drop for SteerSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_private_replaces_a_stale_one_and_goes_with_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(crate::paths::ralph_dir(root)).unwrap();
        let path = crate::paths::steer_socket(root);
        // A killed run's socket: a file nobody listens on.
        drop(UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let sock = SteerSocket::bind(root).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(std::os::unix::net::UnixStream::connect(&path).is_ok());
        drop(sock);
        assert!(!path.exists());
    }
}
