//! libgit2 errors that lost their reason. A failed write on a full disk
//! came out as "git: no error: no error" (the soak, issue 35): some libgit2
//! paths fail without setting an error, and libgit2 then reports its
//! canned "no error" (git2 says "an unknown git error occurred" when
//! there is none at all). Such an error gets a message that says what the
//! usual causes are, and the system's last error when it names one of them.

use std::io;

/// The messages libgit2 and git2 give when no reason was recorded.
const NO_REASON: [&str; 2] = ["no error", "an unknown git error occurred"];

/// Whether `message` (a libgit2 error's) says nothing of why it failed.
pub(super) fn lost(message: &str) -> bool {
    let m = message.trim();
    m.is_empty() || NO_REASON.iter().any(|r| m.eq_ignore_ascii_case(r))
}

/// The message for an error that lost its reason. `os`: the system's last
/// error at the failure, named only when it is one a failed write or open
/// comes from (a stale "no such file" from one of libgit2's probes would
/// mislead). Pure.
pub(super) fn explained(os: Option<&io::Error>) -> String {
    let cause = os
        .filter(|e| {
            matches!(
                e.raw_os_error(),
                Some(
                    libc::ENOSPC
                        | libc::EDQUOT
                        | libc::EROFS
                        | libc::EACCES
                        | libc::EPERM
                        | libc::EIO
                        | libc::EMFILE
                        | libc::ENFILE
                )
            )
        })
        .map(|e| format!(" (the system's last error: {e})"))
        .unwrap_or_default();
    format!(
        "a git operation failed and libgit2 gave no reason{cause}; the usual causes are a \
         full disk or a file under .git that cannot be written: check the free space \
         (`df -h .`) and the permissions of the repository"
    )
}

/// `e` as it is, or with a message saying what the reason may be when
/// libgit2 lost it (its code and class kept, so callers' matches hold).
/// Called right after the failing call, so the system's last error is
/// still the failure's when it is one `explained` names.
pub(super) fn with_reason(e: git2::Error) -> git2::Error {
    if !lost(e.message()) {
        return e;
    }
    let os = io::Error::last_os_error();
    git2::Error::new(e.code(), e.class(), explained(Some(&os)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_without_a_reason_says_what_it_may_be() {
        assert!(lost("no error"));
        assert!(lost(" "));
        assert!(lost("an unknown git error occurred"));
        assert!(!lost("failed to write 'x': No space left on device"));
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        let text = explained(Some(&full));
        assert!(text.contains("No space left on device"), "{text}");
        assert!(
            text.contains("full disk") && text.contains("df -h"),
            "{text}"
        );
        // A probe's "no such file" is no reason for a failed write.
        let probe = io::Error::from_raw_os_error(libc::ENOENT);
        assert!(!explained(Some(&probe)).contains("system's last error"));
        assert_eq!(explained(Some(&probe)), explained(None));
    }

    #[test]
    fn git_no_error_no_error_is_no_more() {
        // libgit2's canned error, as a failed write on a full disk gave it.
        let canned = git2::Error::new(
            git2::ErrorCode::GenericError,
            git2::ErrorClass::None,
            "no error",
        );
        let shown = format!(
            "{:#}",
            anyhow::Error::from(super::super::GitError::from(canned))
        );
        assert!(!shown.contains("no error"), "{shown}");
        assert!(
            shown.starts_with("git: a git operation failed and libgit2 gave no reason"),
            "{shown}"
        );
        // A reason libgit2 gave is shown once, as it was.
        let real = git2::Error::from_str("failed to write 'x': No space left on device");
        let shown = format!(
            "{:#}",
            anyhow::Error::from(super::super::GitError::from(real))
        );
        assert_eq!(shown, "git: failed to write 'x': No space left on device");
    }

    /// A tmpfs of 2 MB, unmounted (and its directory removed) when dropped.
    struct SmallDisk(std::path::PathBuf);

    impl SmallDisk {
        fn mount() -> Option<SmallDisk> {
            let dir = std::env::temp_dir().join(format!("ralph-full-disk-{}", std::process::id()));
            std::fs::create_dir_all(&dir).ok()?;
            let mounted = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
                .arg(&dir)
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !mounted {
                let _ = std::fs::remove_dir(&dir);
                return None;
            }
            Some(SmallDisk(dir))
        }
    }

    impl Drop for SmallDisk {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
            let _ = std::fs::remove_dir(&self.0);
        }
    }

    /// The soak's case on a real full disk: libgit2 fails to write a loose
    /// object and records no reason, so a thread with no earlier error got
    /// "no error" (one with an earlier, unrelated error got that one).
    #[test]
    fn a_blob_written_to_a_full_disk_says_the_disk_may_be_full() {
        let Some(disk) = SmallDisk::mount() else {
            crate::testenv::skip("cannot mount a tmpfs here (needs root)");
            return;
        };
        let repo = git2::Repository::init(&disk.0).unwrap();
        let filler = vec![7u8; 4096];
        let mut f = std::fs::File::create(disk.0.join("filler")).unwrap();
        while std::io::Write::write_all(&mut f, &filler).is_ok() {}
        drop(f);
        // Data that does not compress: more than the disk has left.
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7919 % 251) as u8).collect();
        let path = disk.0.clone();
        let written = std::thread::spawn(move || -> super::super::Result<()> {
            git2::Repository::open(&path)?.blob(&data)?;
            Ok(())
        })
        .join()
        .unwrap();
        drop(repo);
        let shown = format!("{:#}", anyhow::Error::from(written.unwrap_err()));
        assert!(!shown.contains("no error"), "{shown}");
        assert!(
            shown.contains("full disk") && shown.contains("df -h"),
            "{shown}"
        );
    }
}
