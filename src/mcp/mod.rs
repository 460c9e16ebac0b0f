//! `ralph mcp`: a Model Context Protocol server on stdio for one project
//! (issue 37), so an agent or an editor (Claude Code, Claude Desktop, VS
//! Code) can read a run and steer it. Each tool call runs the matching
//! `ralph` command as a child: the same words, hints and exit codes as the
//! CLI, the same control socket for a running run, and a session opened
//! before a run starts sees it once it does. The protocol is small enough
//! (four methods, line-delimited JSON) that serde_json serves it; an MCP
//! crate would add a macro and schema stack to the build for no behaviour.

mod protocol;

use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

pub(crate) use protocol::CliOutcome;

/// How long one tool call may take: every command it runs reads files or
/// asks the run's control socket, which answers within seconds.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Serves requests from stdin until it closes; exit code 0.
pub(crate) fn serve(root: &Path) -> Result<i32> {
    let exe = std::env::current_exe().context("cannot find ralph's own executable")?;
    let exe = exe.to_string_lossy().into_owned();
    let root = root.to_string_lossy().into_owned();
    let mut cli = |args: &[String]| run_ralph(&exe, &root, args);
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lines() {
        let line = line.context("reading the client's requests on stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        if let Some(reply) = protocol::handle(&line, &mut cli) {
            writeln!(stdout, "{reply}").context("writing to the client on stdout")?;
            stdout.flush().context("writing to the client on stdout")?;
        }
    }
    Ok(crate::error::EXIT_OK)
}

/// `ralph -C ROOT args…`, run to its end.
fn run_ralph(exe: &str, root: &str, args: &[String]) -> CliOutcome {
    let mut line = vec!["-C".to_string(), root.to_string()];
    line.extend_from_slice(args);
    match crate::process::run_captured(exe, &line, b"", CALL_TIMEOUT) {
        Ok(c) if c.timed_out => CliOutcome {
            code: crate::error::EXIT_INTERNAL,
            stdout: String::new(),
            stderr: format!(
                "error: `ralph {}` took over {} s and was stopped",
                args.join(" "),
                CALL_TIMEOUT.as_secs()
            ),
        },
        Ok(c) => CliOutcome {
            code: c.code.unwrap_or(crate::error::EXIT_INTERNAL),
            stdout: String::from_utf8_lossy(&c.stdout).into_owned(),
            stderr: c.stderr,
        },
        Err(e) => CliOutcome {
            code: crate::error::EXIT_INTERNAL,
            stdout: String::new(),
            stderr: format!("error: cannot start {exe}: {e}"),
        },
    }
}
