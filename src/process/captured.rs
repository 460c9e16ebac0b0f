//! A short helper program run to completion from a blocking thread, its
//! output kept: git's signing program (`gpg`, `ssh-keygen`, `gpgsm`). Unlike
//! an agent it carries no attempt token and nothing it leaves is swept:
//! `gpg` starts a `gpg-agent` that must outlive it (it holds the user's
//! unlocked keys), as it does when git itself signs.

use std::io::{self, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::children;
use super::sweep::signal_group;

/// How long output is still read after the program exited: a daemon it
/// started may keep the pipes open.
const DRAIN: Duration = Duration::from_secs(2);

/// What a helper program did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Captured {
    /// Exit code, `None` when a signal ended it.
    pub(crate) code: Option<i32>,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: String,
    /// Killed by ralph after `timeout`.
    pub(crate) timed_out: bool,
}

impl Captured {
    pub(crate) fn success(&self) -> bool {
        self.code == Some(0) && !self.timed_out
    }
}

/// Runs `program args` with `stdin` written to it, in its own process
/// group, killed after `timeout` (a signing program asking a person for a
/// passphrase that no one will type). Blocks: call it off the runtime.
pub(crate) fn run_captured(
    program: &str,
    args: &[String],
    stdin: &[u8],
    timeout: Duration,
) -> io::Result<Captured> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // Registered while spawning, so the orphan reaper never takes its status.
    let mut child = {
        let mut registry = children();
        let child = cmd.spawn()?;
        registry.insert(child.id() as i32);
        child
    };
    let pid = child.id() as i32;
    let reader = |mut pipe: Box<dyn Read + Send>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            let _ = tx.send(buf);
        });
        rx
    };
    let out = child.stdout.take().map(|p| reader(Box::new(p)));
    let err = child.stderr.take().map(|p| reader(Box::new(p)));
    if let Some(mut pipe) = child.stdin.take() {
        let data = stdin.to_vec();
        // A program that exits without reading (a bad key) closes the pipe:
        // EPIPE is its answer, not ours to report.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&data);
        });
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let (status, timed_out) = match rx.recv_timeout(timeout) {
        Ok(status) => (status, false),
        Err(_) => {
            signal_group(pid, libc::SIGKILL);
            let status = rx
                .recv()
                .unwrap_or_else(|_| Err(io::Error::other("lost the helper's exit status")));
            (status, true)
        }
    };
    children().remove(&pid);
    let status: ExitStatus = status?;
    let take = |rx: Option<mpsc::Receiver<Vec<u8>>>| {
        rx.and_then(|rx| rx.recv_timeout(DRAIN).ok())
            .unwrap_or_default()
    };
    let stdout = take(out);
    let stderr = String::from_utf8_lossy(&take(err)).into_owned();
    Ok(Captured {
        code: status.code(),
        stdout,
        stderr,
        timed_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn output_exit_code_and_stdin_are_carried() {
        let r = run_captured(
            "bash",
            &strs(&["-c", "tr a-z A-Z; echo oops >&2; exit 3"]),
            b"signed\n",
            Duration::from_secs(30),
        )
        .unwrap();
        assert_eq!(r.stdout, b"SIGNED\n");
        assert_eq!(r.stderr, "oops\n");
        assert_eq!(r.code, Some(3));
        assert!(!r.success() && !r.timed_out);
    }

    #[test]
    fn a_program_that_never_ends_is_killed_at_its_timeout() {
        let r = run_captured(
            "bash",
            &strs(&["-c", "exec sleep 600"]),
            b"",
            Duration::from_millis(200),
        )
        .unwrap();
        assert!(r.timed_out);
        assert_eq!(r.code, None);
    }

    #[test]
    fn a_missing_program_is_an_error() {
        assert!(run_captured("/nonexistent/gpg", &[], b"", Duration::from_secs(5)).is_err());
    }
}
