//! `ralph mcp` driven by a real MCP client: the official Python SDK
//! (`mcp` from PyPI, installed by `.ci/run` into `target/mcp-venv/`), run by
//! `tests/mcp/client.py`, which this test feeds one tool call a line. The
//! run it steers has the steering tests' fake agents, which wait on files.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

use crate::crash::{spawn, wait_exit};
use crate::harness::*;
use crate::steer::{attempt_starts, go, project, started, stderr_of, wait_started, LIMIT};

/// The SDK's Python, where `.ci/run` installed it; `None` (said in the
/// skip list) where it is not, which CI never accepts.
fn sdk_python() -> Option<PathBuf> {
    let venv = std::env::var_os("RALPH_MCP_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/mcp-venv"));
    let python = venv.join("bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    let why = format!(
        "the MCP client test needs the MCP Python SDK in {} (`bash .ci/run` installs it)",
        venv.display()
    );
    assert!(std::env::var("CI").map_or(true, |v| v != "true"), "{why}");
    crate::testenv::skip(&why);
    None
}

struct Client {
    child: Child,
    to: Option<ChildStdin>,
    from: BufReader<ChildStdout>,
}

impl Client {
    /// A session with `ralph -C <project> mcp`; the SDK's first line (the
    /// server and its tools).
    fn open(python: &PathBuf, p: &Project) -> (Client, Value) {
        let mut cmd = Command::new(python);
        // ralph's own environment in the tests (the fake agent first on
        // PATH, HOME, SCRATCH), which the SDK hands to the server.
        for (k, v) in p.command(&[]).get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let mut child = cmd
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/client.py"))
            .arg(RALPH)
            .arg(&p.root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(p.scratch.join("client.err")).unwrap())
            .spawn()
            .expect("python starts");
        let to = child.stdin.take();
        let from = BufReader::new(child.stdout.take().unwrap());
        let mut c = Client { child, to, from };
        let first = c.line();
        (c, first)
    }

    fn line(&mut self) -> Value {
        let mut line = String::new();
        self.from.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("the client said {line:?} ({e})"))
    }

    /// Calls `tool`; (is it an error, its text).
    fn call(&mut self, tool: &str, args: Value) -> (bool, String) {
        let to = self.to.as_mut().unwrap();
        writeln!(to, "{}", json!({"tool": tool, "args": args})).unwrap();
        to.flush().unwrap();
        let r = self.line();
        assert!(r.get("error").is_none(), "{tool}: {r}");
        (
            r["isError"].as_bool().unwrap(),
            r["text"].as_str().unwrap().to_string(),
        )
    }

    /// Closes the session (the server sees its stdin close); the client's
    /// exit status.
    fn close(mut self) -> std::process::ExitStatus {
        drop(self.to.take());
        wait_for_exit(&mut self.child, "the MCP client to end", LIMIT)
    }
}

#[test]
fn a_real_mcp_client_lists_the_tools_reads_a_run_and_steers_it() {
    let Some(python) = sdk_python() else { return };
    let p = project(
        &[("1.1", &[]), ("1.2", &["1.1"]), ("1.3", &["1.2"])],
        FAST_CONFIG,
    );
    // Opened before the run starts.
    let (mut client, first) = Client::open(&python, &p);
    assert_eq!(first["server"], "ralph", "{first}");
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "status", "stories", "graph", "log", "validate", "pause", "resume", "drain", "stop",
            "hold", "release", "note", "jobs"
        ]
    );
    assert_eq!(first["schemas"]["note"]["required"], json!(["id", "text"]));

    // No run yet: a run-only control is an error result carrying the
    // CLI's own words and hint.
    let (err, text) = client.call("pause", json!({}));
    let cli = p.ralph(&["pause"]);
    assert!(err, "{text}");
    assert_eq!(text, cli.stderr.trim_end(), "the CLI's words");
    assert!(text.contains("hint: "), "{text}");
    let (err, text) = client.call("validate", json!({}));
    assert!(!err, "{text}");

    let mut run = spawn(&p, &["run", "-j", "2"]);
    wait_started(&p, "1.1", 1);
    // The session sees the run that started after it.
    let (err, text) = client.call("status", json!({"json": true}));
    assert!(!err, "{text}");
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(status["running"], json!(["1.1"]), "{status}");
    assert_eq!(status["run_in_progress"], true);
    let (err, text) = client.call("pause", json!({}));
    assert!(
        !err && text.starts_with("paused: no new attempt starts"),
        "{text}"
    );
    let (err, text) = client.call(
        "note",
        json!({"id": "1.2", "text": "use the v2 API (from MCP)"}),
    );
    assert!(!err, "{text}");
    go(&p, "1.1");
    wait_until("1.1 landed", LIMIT, || {
        p.completed().contains(&"1.1".into())
    });
    // Answered after the run handled 1.1's landing: had the pause not
    // held, 1.2 would have started in that step.
    let (_, text) = client.call("pause", json!({}));
    assert_eq!(text, "already paused");
    assert_eq!(attempt_starts(&p), ["1.1"]);
    assert_eq!(started(&p, "1.2"), 0);

    let (err, text) = client.call("resume", json!({}));
    assert!(!err && text.starts_with("resumed"), "{text}");
    wait_started(&p, "1.2", 1);
    assert!(
        p.scratch_text("prompt-1.2-1")
            .contains("use the v2 API (from MCP)"),
        "the note reached the next prompt"
    );
    let (err, text) = client.call("drain", json!({}));
    assert!(!err, "{text}");
    go(&p, "1.2");
    let code = wait_exit(&mut run, "the drained run ends").code();
    assert_eq!(code, Some(0), "{}", stderr_of(&p));
    assert_eq!(p.completed(), ["1.1", "1.2"]);
    assert_eq!(started(&p, "1.3"), 0);

    // The session outlives the run and notices its end.
    let (err, text) = client.call("stories", json!({}));
    assert!(!err && text.contains("[done] 1.2"), "{text}");
    let (err, text) = client.call("jobs", json!({"n": 3}));
    assert!(err && text.contains("hint: "), "{text}");
    let (err, text) = client.call("log", json!({"id": "1.1", "tail": 3}));
    assert!(!err && text.lines().count() <= 3, "{text}");
    assert!(client.close().success(), "{}", p.scratch_text("client.err"));
}
