//! The steering client: one request to the run that owns the project's
//! socket, one reply back. Used by `ralph pause`, `hold`, ... and by
//! `ralph land` while a run holds the lock.

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Command, Reply};
use crate::error::RalphError;

/// How long the run has to answer: a reply is the transition's decision,
/// made between two events, so a second is plenty; this only bounds a
/// run that hangs.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// Sends `cmd` to the run of the project at `root`; `None` when no run
/// listens there (no socket, or one a killed run left behind).
pub(crate) fn try_send(root: &Path, cmd: &Command) -> Result<Option<Reply>> {
    let path = crate::paths::steer_socket(root);
    let mut stream = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused) => {
            return Ok(None)
        }
        Err(e) => return Err(e).with_context(|| format!("connecting to {}", path.display())),
    };
    stream.set_read_timeout(Some(ANSWER_WITHIN))?;
    stream.set_write_timeout(Some(ANSWER_WITHIN))?;
    let mut line = cmd.to_line();
    line.push('\n');
    stream
        .write_all(line.as_bytes())
        .with_context(|| format!("writing to {}", path.display()))?;
    let mut answer = String::new();
    BufReader::new(&stream)
        .read_line(&mut answer)
        .with_context(|| format!("reading the run's answer on {}", path.display()))?;
    if answer.trim().is_empty() {
        // The run ended between our connect and its answer.
        return Ok(None);
    }
    let reply: Reply = serde_json::from_str(answer.trim())
        .with_context(|| format!("the run's answer on {} is not a reply", path.display()))?;
    Ok(Some(reply))
}

/// Sends `cmd` to the running run; no run is a usage error (exit 2) that
/// says so. (The web view's controls call it: issue 24, item 2.)
pub(crate) fn send(root: &Path, cmd: &Command) -> Result<Reply> {
    try_send(root, cmd)?.ok_or_else(|| no_run(cmd).into())
}

/// The error of a command that needs a run when none is running.
pub(crate) fn no_run(cmd: &Command) -> RalphError {
    RalphError::usage(format!(
        "no ralph run is running in this project: `ralph {}` steers a running run",
        cmd.name()
    ))
    .with_hint("start one with `ralph run` (in another terminal), then steer it")
}
