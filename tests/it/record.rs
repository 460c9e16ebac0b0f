//! Re-records `tests/fixtures/agents/claude/` and `.../codex/`: the real
//! CLIs (npm, pinned, `clis.rs`) run once per scenario against the scripted
//! model APIs (`fakeapi.rs`), and their stdout, stderr and exit code are
//! written as the decoders' tests read them. Not part of the suite (it
//! rewrites files the suite reads): `tests/record-agents.sh` runs it.
//!
//! Every prompt, answer and command below is the project's own; the
//! temporary directories the CLIs ran in are replaced by `PROJECT_DIR` and
//! `HOME_DIR`, the API's port by 8080, so a re-recording differs in IDs and
//! timings, and where the CLI (or this machine's sandbox: Codex's
//! workspace-write runs its commands through bubblewrap) behaves otherwise.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::clis::{self, CLAUDE, CODEX};
use crate::fakeapi::{anthropic, openai, FakeApi, Reply, Request};

/// What every scripted model says when it is finished (the decoders' tests
/// swap it for a tagged answer).
const ANSWER: &str = "Finished: every check passes.";
/// The command the scripted model asks the CLI's shell tool to run.
const TOOL: &str = "echo marker-from-tool && touch agent-was-here.txt";
/// A usage limit's end in the recordings: 2026-11-28 09:00:00 UTC.
const RESETS_AT: u64 = 1_795_856_400;
/// The seconds `RESETS_AT` is away in Codex's answer.
const RESETS_IN: u64 = 7_200;

fn out_dir(cli: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agents")
        .join(cli);
    fs::create_dir_all(&d).unwrap();
    d
}

/// One run of `bin args` in a fresh git repository with only `env`, its
/// output written as `<dir>/<name>.{stdout,stderr,meta}`. A CLI that would
/// retry for ever is stopped after `limit` (the meta says so).
fn record(
    dir: &Path,
    name: &str,
    bin: &Path,
    args: &[&str],
    env: &[(&str, String)],
    limit: Duration,
) {
    let project = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    git(project.path(), &["init", "-q"]);
    git(
        project.path(),
        &["commit", "-q", "--allow-empty", "-m", "start"],
    );
    let mut c = Command::new(bin);
    c.args(args)
        .current_dir(project.path())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home.path())
        .stdin(Stdio::null())
        .stdout(fs::File::create(dir.join(format!("{name}.stdout"))).unwrap())
        .stderr(fs::File::create(dir.join(format!("{name}.stderr"))).unwrap());
    for (k, v) in env {
        c.env(k, v);
    }
    // A group of its own: stopping it stops the native binary the npm shim
    // started too (else it writes on into the recording).
    std::os::unix::process::CommandExt::process_group(&mut c, 0);
    let mut child = c.spawn().unwrap();
    let end = Instant::now() + limit;
    let rc = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code().map_or("signal".to_string(), |c| c.to_string());
        }
        if Instant::now() > end {
            // SAFETY: kill(2) on the group of a child this function started.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            break format!("killed after {}s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Whatever it left running would write on into the files.
    // SAFETY: as above.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let shown: Vec<String> = args
        .iter()
        .map(|a| {
            if a.contains("base_url") {
                "<provider>".into()
            } else {
                a.to_string()
            }
        })
        .collect();
    fs::write(
        dir.join(format!("{name}.meta")),
        format!("rc={rc}\nargs: {}\n", shown.join(" ")),
    )
    .unwrap();
    for ext in ["stdout", "stderr"] {
        let path = dir.join(format!("{name}.{ext}"));
        let text = fs::read_to_string(&path).unwrap_or_default();
        let text = scrub(&text, project.path(), "/tmp/PROJECT_DIR");
        let text = scrub(&text, home.path(), "/tmp/HOME_DIR");
        let text = fixed_port(&text);
        if text.is_empty() {
            fs::remove_file(&path).unwrap();
        } else {
            fs::write(&path, text).unwrap();
        }
    }
    eprintln!("recorded {}/{name}: rc={rc}", dir.display());
}

fn scrub(text: &str, path: &Path, with: &str) -> String {
    let canonical = path.canonicalize().unwrap();
    text.replace(&canonical.display().to_string(), with)
        .replace(&path.display().to_string(), with)
}

/// The scripted API's ephemeral port as one fixed number, so a
/// re-recording does not differ in it.
fn fixed_port(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("127.0.0.1:") {
        let (head, tail) = rest.split_at(at + "127.0.0.1:".len());
        out.push_str(head);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        out.push_str(if digits > 0 { "8080" } else { "" });
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "rec")
        .env("GIT_AUTHOR_EMAIL", "rec@example.invalid")
        .env("GIT_COMMITTER_NAME", "rec")
        .env("GIT_COMMITTER_EMAIL", "rec@example.invalid")
        .status()
        .unwrap();
    assert!(st.success());
}

/// The Anthropic side of a scenario: tool first, then the answer.
fn claude_works(req: &Request) -> Reply {
    if req.method != "POST" {
        return Reply::json(
            404,
            json!({"type": "error", "error": {"type": "not_found_error", "message": "not here"}}),
        );
    }
    if req.path.contains("count_tokens") {
        return Reply::json(200, json!({"input_tokens": 100}));
    }
    if req.body["stream"] != true {
        return Reply::json(
            200,
            json!({"id": "msg_rec", "type": "message", "role": "assistant",
            "model": req.body["model"], "content": [{"type": "text", "text": "Recorded session"}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 3}}),
        );
    }
    if !anthropic::is_turn(req) || anthropic::after_tool(req) {
        anthropic::text(req, ANSWER)
    } else {
        anthropic::bash(req, TOOL)
    }
}

fn claude_env(api: &FakeApi, oauth: bool) -> Vec<(&'static str, String)> {
    vec![
        ("ANTHROPIC_BASE_URL", api.url()),
        ("IS_SANDBOX", "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("DISABLE_TELEMETRY", "1".into()),
        ("DISABLE_ERROR_REPORTING", "1".into()),
        ("CLAUDE_CODE_MAX_RETRIES", "2".into()),
        if oauth {
            ("CLAUDE_CODE_OAUTH_TOKEN", "recording-oauth-token".into())
        } else {
            ("ANTHROPIC_API_KEY", "sk-ant-recording-000".into())
        },
    ]
}

#[test]
#[ignore = "rewrites tests/fixtures/agents/claude: run tests/record-agents.sh"]
fn record_claude_code() {
    let bin = clis::installed(&CLAUDE).expect("Claude Code installed");
    let dir = out_dir("claude");
    let stream = ["--output-format", "stream-json", "--verbose"];
    let minute = Duration::from_secs(60);
    let run = |name: &str, extra: &[&str], oauth: bool, script: fn(&Request) -> Reply| {
        let api = FakeApi::start(script);
        let mut args = vec!["-p", "Check the tree and say when you are finished."];
        args.extend_from_slice(extra);
        record(&dir, name, &bin, &args, &claude_env(&api, oauth), minute);
    };
    let skip = "--dangerously-skip-permissions";
    run("text-stream", &stream, false, |r| {
        anthropic::text(r, ANSWER)
    });
    run(
        "tool-skipperms",
        &[&stream[..], &[skip]].concat(),
        false,
        claude_works,
    );
    run(
        "allowed-bash",
        &[&stream[..], &["--allowedTools", "Bash"]].concat(),
        false,
        claude_works,
    );
    run("tool-default", &stream, false, claude_works);
    run(
        "maxturns",
        &[&stream[..], &[skip, "--max-turns", "1"]].concat(),
        false,
        claude_works,
    );
    run("json-success", &["--output-format", "json"], false, |r| {
        anthropic::text(r, ANSWER)
    });
    run("text-success", &[], false, |r| anthropic::text(r, ANSWER));
    run("overloaded-529", &stream, false, |r| {
        if anthropic::is_turn(r) {
            anthropic::overloaded()
        } else {
            claude_works(r)
        }
    });
    run("ratelimit-429", &stream, false, |r| {
        if anthropic::is_turn(r) {
            anthropic::too_many_requests(0)
        } else {
            claude_works(r)
        }
    });
    run("bad-400", &stream, false, |r| {
        if anthropic::is_turn(r) {
            Reply::json(
                400,
                json!({"type": "error", "error": {"type": "invalid_request_error",
                "message": "messages.0.content: the recording's request is not valid"}}),
            )
        } else {
            claude_works(r)
        }
    });
    run("unified-oauth", &stream, true, |r| {
        if anthropic::is_turn(r) {
            anthropic::usage_limit(RESETS_AT)
        } else {
            claude_works(r)
        }
    });
    run("unified-apikey", &stream, false, |r| {
        if anthropic::is_turn(r) {
            anthropic::usage_limit(RESETS_AT)
        } else {
            claude_works(r)
        }
    });
}

/// Codex's config: the scripted provider at `url`, one retry of each kind.
fn codex_args(url: &str) -> Vec<String> {
    vec![
        "exec".into(),
        "-c".into(),
        "model_provider=scripted".into(),
        "-c".into(),
        format!(
            "model_providers.scripted={{name=\"scripted\",base_url=\"{url}/v1\",wire_api=\"responses\",env_key=\"SCRIPTED_API_KEY\",request_max_retries=1,stream_max_retries=1}}"
        ),
        "-c".into(),
        "check_for_update_on_startup=false".into(),
        "-m".into(),
        "gpt-5-codex".into(),
    ]
}

fn codex_works(req: &Request) -> Reply {
    if req.method == "GET" && req.path.ends_with("/models") {
        return Reply::json(200, json!({"object": "list", "data": []}));
    }
    if openai::after_tool(req) {
        openai::text(ANSWER)
    } else {
        openai::shell(req, TOOL)
    }
}

fn codex_fails(
    status: u16,
    body: serde_json::Value,
) -> impl FnMut(&Request) -> Reply + Send + 'static {
    move |req: &Request| {
        if req.method == "POST" && req.path.ends_with("/responses") {
            Reply::json(status, body.clone())
        } else {
            codex_works(req)
        }
    }
}

#[test]
#[ignore = "rewrites tests/fixtures/agents/codex: run tests/record-agents.sh"]
fn record_codex() {
    let bin = clis::installed(&CODEX).expect("Codex installed");
    let dir = out_dir("codex");
    let minute = Duration::from_secs(60);
    let prompt = "Check the tree and say when you are finished.";
    let key = [("SCRIPTED_API_KEY", "sk-recording-000".to_string())];
    let run = |name: &str, extra: &[&str], api: FakeApi, limit: Duration| {
        let mut args = codex_args(&api.url());
        args.extend(extra.iter().map(|s| s.to_string()));
        args.push(prompt.into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        record(&dir, name, &bin, &args, &key, limit);
    };
    run(
        "text-json",
        &["--json"],
        FakeApi::start(|_: &Request| openai::text(ANSWER)),
        minute,
    );
    run(
        "tool-bypass",
        &["--json", "--dangerously-bypass-approvals-and-sandbox"],
        FakeApi::start(codex_works),
        minute,
    );
    run(
        "tool-ww",
        &["--json", "-s", "workspace-write"],
        FakeApi::start(codex_works),
        minute,
    );
    run(
        "tool-default",
        &["--json"],
        FakeApi::start(codex_works),
        minute,
    );
    run(
        "human-tool",
        &["-s", "workspace-write"],
        FakeApi::start(codex_works),
        minute,
    );
    run(
        "err-401",
        &["--json"],
        FakeApi::start(codex_fails(
            401,
            json!({"error": {"type": "invalid_request_error", "code": "invalid_api_key",
            "message": "The recording's API key is not valid."}}),
        )),
        minute,
    );
    run(
        "err-429",
        &["--json"],
        FakeApi::start(codex_fails(
            429,
            json!({"error": {"type": "rate_limit_exceeded",
        "code": "rate_limit_exceeded", "message": "Too many requests in this minute."}}),
        )),
        minute,
    );
    run(
        "err-500",
        &["--json"],
        FakeApi::start(codex_fails(
            500,
            json!({"error": {"type": "server_error",
        "message": "The scripted server failed."}}),
        )),
        minute,
    );
    run(
        "err-quota",
        &["--json"],
        FakeApi::start(codex_fails(
            429,
            json!({"error": {"type": "insufficient_quota",
        "code": "insufficient_quota", "message": "The recording's quota is spent."}}),
        )),
        minute,
    );
    let now = RESETS_AT - RESETS_IN;
    run(
        "err-usage_limit",
        &["--json"],
        FakeApi::start(move |req: &Request| {
            if req.method == "POST" && req.path.ends_with("/responses") {
                openai::usage_limit(RESETS_AT, now)
            } else {
                codex_works(req)
            }
        }),
        minute,
    );
    run(
        "human-usage",
        &[],
        FakeApi::start(move |req: &Request| {
            if req.method == "POST" && req.path.ends_with("/responses") {
                openai::usage_limit(RESETS_AT, now)
            } else {
                codex_works(req)
            }
        }),
        minute,
    );
    // Nothing listens: Codex reconnects until it is stopped.
    let closed = FakeApi::start(|_: &Request| openai::text(ANSWER));
    let url = closed.url();
    drop(closed);
    let mut args = codex_args(&url);
    args.extend(["--json".to_string(), prompt.to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    record(
        &dir,
        "noserver-json",
        &bin,
        &args,
        &key,
        Duration::from_secs(20),
    );
}
