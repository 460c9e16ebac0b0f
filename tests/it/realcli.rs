//! The real Claude Code and Codex CLIs (npm, pinned, `clis.rs`) driven by
//! ralph against scripted model APIs on 127.0.0.1 (`fakeapi.rs`): the
//! command lines, output formats, retries and limit answers are the CLIs'
//! own; only the model is a script. Without the CLIs (no npm, no registry)
//! these tests say so and pass, except under `CI=true`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::clis::{self, CLAUDE, CODEX};
use crate::fakeapi::{anthropic, openai, FakeApi, Request, Tokens};
use crate::harness::*;

const THREE: &str = "1.1 | First\n1.2 | Second\n1.3 | Third\n";
const CONFIG: &str =
    r#"{ "loop": { "max_retries": 2, "grace_seconds": 1, "timeout_seconds": 300 } }"#;

/// How the scripted API is reached and paid for.
#[derive(Clone, Copy)]
enum Auth {
    /// `ANTHROPIC_API_KEY`: a limit is a plain 429, retried by the CLI.
    ApiKey,
    /// `CLAUDE_CODE_OAUTH_TOKEN`: a limit is a `rate_limit_event`.
    Subscription,
}

/// ralph with only the environment a test gives it: nothing of the
/// machine's own agent settings or keys reaches the CLI.
fn ralph_cmd(p: &Project, args: &[&str], env: &[(&str, String)]) -> Command {
    let mut c = p.command(args);
    c.env_clear()
        .env(
            "PATH",
            format!(
                "{}:{}",
                p.bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("HOME", &p.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("CI", "1")
        .env("SCRATCH", &p.scratch);
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// A project with `backlog` and `config` committed and the CLI at `bin`
/// installed as `name` first on its PATH, so ralph runs it with its
/// default command line.
fn project_with_cli(backlog: &str, config: &str, bin: &Path, name: &str) -> Project {
    let p = Project::with_backlog(backlog, config);
    p.commit_all("backlog");
    std::os::unix::fs::symlink(bin, p.bin.join(name)).unwrap();
    p
}

/// `ralph args` run to its end with only the environment `env`.
fn run(p: &Project, args: &[&str], env: &[(&str, String)]) -> RunResult {
    p.run_to_end(ralph_cmd(p, args, env), args)
}

/// The environment that points Claude Code at `api`.
fn claude_env(api: &FakeApi, auth: Auth) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("ANTHROPIC_BASE_URL", api.url()),
        // Claude Code refuses to skip permissions as root without it.
        ("IS_SANDBOX", "1".to_string()),
        // Nothing but the scripted API: no update checks, telemetry or
        // error reports to hosts that are not there.
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
        ("DISABLE_AUTOUPDATER", "1".to_string()),
        ("DISABLE_TELEMETRY", "1".to_string()),
        ("DISABLE_ERROR_REPORTING", "1".to_string()),
    ];
    env.push(match auth {
        Auth::ApiKey => ("ANTHROPIC_API_KEY", "sk-ant-fake-000".to_string()),
        Auth::Subscription => ("CLAUDE_CODE_OAUTH_TOKEN", "fake-oauth-token".to_string()),
    });
    env
}

fn tokens_of(v: &Value) -> Tokens {
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    Tokens {
        input: n("input_tokens"),
        output: n("output_tokens"),
        cache_write: n("cache_creation_input_tokens"),
        cache_read: n("cache_read_input_tokens"),
    }
}

/// The JSON lines of attempt `n` of `id`, as the CLI wrote them.
fn logged(p: &Project, id: &str, n: u32) -> Vec<Value> {
    p.read(&format!(".ralph/logs/{id}/attempt-{n}.log"))
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Asserts the three stories landed: their merges on `main`, their files.
fn assert_three_landed(p: &Project, r: &RunResult) {
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), ["1.1", "1.2", "1.3"], "{r:?}");
    for id in ["1.1", "1.2", "1.3"] {
        assert_eq!(p.merges_of(id), 1, "{id}: {:?}", p.main_subjects());
        assert_eq!(
            p.file_on_main(&format!("story-{id}.txt")).as_deref(),
            Some(format!("story {id}\n").as_str()),
            "{id}"
        );
    }
}

#[test]
fn claude_code_lands_three_stories_with_tokens_and_cost() {
    let Some(cli) = clis::installed(&CLAUDE) else {
        return;
    };
    let api = FakeApi::start(|req: &Request| anthropic::work(req));
    let p = project_with_cli(THREE, CONFIG, &cli, "claude");
    let r = run(&p, &["run"], &claude_env(&api, Auth::ApiKey));
    assert_three_landed(&p, &r);
    for id in ["1.1", "1.2", "1.3"] {
        let story = p.story(id);
        let history = story["history"].as_array().unwrap();
        assert_eq!(history.len(), 1, "{id}: {story:#}");
        let attempt = &history[0];
        assert_eq!(attempt["outcome"], "done", "{id}");
        assert_eq!(tokens_of(&attempt["usage"]), api.tokens_for(id), "{id}");
        // Claude Code prices the calls itself; ralph keeps its figure.
        let cost = attempt["cost_usd"].as_f64().unwrap();
        let result = logged(&p, id, 1)
            .into_iter()
            .find(|e| e["type"] == "result")
            .expect("a result line in the attempt's log");
        assert!(cost > 0.0, "{id}: {attempt:#}");
        assert_eq!(Some(cost), result["total_cost_usd"].as_f64(), "{id}");
    }
}

/// Under an API key a limit is a plain 429, which Claude Code retries
/// itself (`api_retry`, `error_status: 429`): an attempt that only waited
/// on the API and then did its work is one attempt, not a failure, and the
/// live display says it is waiting.
#[test]
fn claude_code_api_key_429_the_cli_retries_is_not_a_failure() {
    let Some(cli) = clis::installed(&CLAUDE) else {
        return;
    };
    let mut turns = 0;
    let api = FakeApi::start(move |req: &Request| {
        if anthropic::is_turn(req) {
            turns += 1;
            if turns <= 2 {
                return anthropic::too_many_requests(0);
            }
        }
        anthropic::work(req)
    });
    let p = project_with_cli("1.1 | First\n", CONFIG, &cli, "claude");
    let r = run(&p, &["run", "-v"], &claude_env(&api, Auth::ApiKey));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(api.count("1.1", 429), 2);
    let retries: Vec<Value> = logged(&p, "1.1", 1)
        .into_iter()
        .filter(|e| e["subtype"] == "api_retry")
        .collect();
    assert_eq!(retries.len(), 2, "the CLI retried each 429 itself");
    assert!(retries.iter().all(|e| e["error_status"] == 429));
    let story = p.story("1.1");
    assert_eq!(story["status"], "done");
    assert_eq!(story["attempts"], 0, "no failure counted: {story:#}");
    assert_eq!(story["attempts_started"], 1, "{story:#}");
    assert_eq!(story["history"][0]["outcome"], "done");
    // Shown live (`-v` prints the activity lines the display shows).
    assert!(
        r.stderr
            .contains("[1.1] API retry 1: rate_limit (429), waiting"),
        "{r:?}"
    );
}

/// A 429 the CLI gives up on (here after one retry) is a limit: the agent
/// pauses, recorded in `state.paused_until` so a restart honours it, and the
/// story is not charged an attempt.
#[test]
fn claude_code_api_key_429_the_cli_gives_up_on_pauses_the_agent() {
    let Some(cli) = clis::installed(&CLAUDE) else {
        return;
    };
    let api = FakeApi::start(|req: &Request| {
        if anthropic::is_turn(req) {
            return anthropic::too_many_requests(0);
        }
        anthropic::work(req)
    });
    let p = project_with_cli("1.1 | First\n", CONFIG, &cli, "claude");
    let mut env = claude_env(&api, Auth::ApiKey);
    env.push(("CLAUDE_CODE_MAX_RETRIES", "1".to_string()));
    // Ctrl-C during the pause: the run stops, the pause stays recorded.
    let (status, stderr) = run_until_paused(&p, &env);
    assert_eq!(status, Some(130), "{stderr}");
    assert!(api.count("1.1", 429) >= 2, "{:?}", api.served());
    let story = p.story("1.1");
    assert_eq!(story["status"], "pending", "{story:#}");
    assert_eq!(story["attempts"], 0, "a limit is not a failure: {story:#}");
    assert_eq!(story["history"][0]["outcome"], "rate_limited", "{story:#}");
    let result = logged(&p, "1.1", 1)
        .into_iter()
        .find(|e| e["type"] == "result")
        .expect("a result line");
    assert_eq!(result["api_error_status"], 429, "{result}");
    assert!(stderr.contains("usage/rate limit"), "{stderr}");
}

/// A subscription's usage limit comes as a `rate_limit_event` `rejected`
/// with `resetsAt`, and no retries: the agent pauses until then, and the
/// run resumes and lands the story.
#[test]
fn claude_code_usage_limit_pauses_until_its_reset_then_lands() {
    let Some(cli) = clis::installed(&CLAUDE) else {
        return;
    };
    let mut limited = false;
    let api = FakeApi::start(move |req: &Request| {
        if anthropic::is_turn(req) && !limited {
            limited = true;
            return anthropic::usage_limit(now() as u64 + 1);
        }
        anthropic::work(req)
    });
    let p = project_with_cli("1.1 | First\n", CONFIG, &cli, "claude");
    let r = run(&p, &["run"], &claude_env(&api, Auth::Subscription));
    assert_eq!(r.code, 0, "{r:?}");
    let events = logged(&p, "1.1", 1);
    let limit = events
        .iter()
        .find(|e| e["type"] == "rate_limit_event")
        .expect("the CLI reported the limit");
    assert_eq!(limit["rate_limit_info"]["status"], "rejected");
    assert!(
        !events.iter().any(|e| e["subtype"] == "api_retry"),
        "a usage limit is not retried by the CLI"
    );
    let story = p.story("1.1");
    assert_eq!(story["status"], "done", "{story:#}");
    assert_eq!(story["attempts"], 0, "{story:#}");
    let outcomes: Vec<&str> = story["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["rate_limited", "done"]);
    assert!(
        p.state()["paused_until"]
            .as_object()
            .is_none_or(|m| m.is_empty()),
        "the pause ended: {:#}",
        p.state()
    );
    assert!(r.stderr.contains("usage/rate limit"), "{r:?}");
}

/// ralph's own time limit can fall while Claude Code sleeps between its
/// retries of a 429 (minutes, under an API key): that attempt only waited on
/// the API, so it pauses the agent like the limit it is instead of counting
/// as a timed-out attempt.
#[test]
fn claude_code_stopped_while_retrying_a_429_is_not_a_failure() {
    let Some(cli) = clis::installed(&CLAUDE) else {
        return;
    };
    let api = FakeApi::start(|req: &Request| {
        if anthropic::is_turn(req) {
            return anthropic::too_many_requests(30);
        }
        anthropic::work(req)
    });
    let p = project_with_cli(
        "1.1 | First\n",
        r#"{ "loop": { "max_retries": 2, "grace_seconds": 1, "timeout_seconds": 25 } }"#,
        &cli,
        "claude",
    );
    let (status, stderr) = run_until_paused(&p, &claude_env(&api, Auth::ApiKey));
    assert_eq!(status, Some(130), "{stderr}");
    let story = p.story("1.1");
    assert_eq!(story["attempts"], 0, "not a failure: {story:#}");
    assert_eq!(story["history"][0]["outcome"], "rate_limited", "{story:#}");
    let retry = logged(&p, "1.1", 1)
        .into_iter()
        .find(|e| e["subtype"] == "api_retry")
        .unwrap_or_else(|| panic!("{:?}", p.read(".ralph/logs/1.1/attempt-1.log")));
    assert_eq!(retry["error_status"], 429);
}

/// An overloaded API (529) that the CLI gives up on is a passing fault of
/// the API: ralph waits a little and tries again, and the story is not
/// charged the attempt.
#[test]
fn claude_code_overloaded_api_is_a_fault_not_a_failure() {
    let Some(cli) = clis::installed(&CLAUDE) else {
        return;
    };
    let mut overloaded = false;
    let api = FakeApi::start(move |req: &Request| {
        if anthropic::is_turn(req) && !overloaded {
            overloaded = true;
            return anthropic::overloaded();
        }
        anthropic::work(req)
    });
    let p = project_with_cli("1.1 | First\n", CONFIG, &cli, "claude");
    let mut env = claude_env(&api, Auth::ApiKey);
    env.push(("CLAUDE_CODE_MAX_RETRIES", "0".to_string()));
    let r = run(&p, &["run"], &env);
    assert_eq!(r.code, 0, "{r:?}");
    let story = p.story("1.1");
    assert_eq!(story["status"], "done", "{story:#}");
    assert_eq!(story["attempts"], 0, "{story:#}");
    let outcomes: Vec<&str> = story["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["fault", "done"], "{story:#}");
    assert!(r.stderr.contains("the model API failed"), "{r:?}");
}

/// Runs ralph until `state.json` records a pause of the claude agent, then
/// stops it with Ctrl-C: (exit code, stderr).
fn run_until_paused(p: &Project, env: &[(&str, String)]) -> (Option<i32>, String) {
    /// A failed wait must not leave the run behind.
    struct Run(std::process::Child);
    impl Drop for Run {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let err = p.scratch.join("stderr");
    let mut run = Run(ralph_cmd(p, &["run"], env)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap());
    wait_until("the claude agent's pause", Duration::from_secs(120), || {
        paused_until(p).is_some() || run.0.try_wait().unwrap().is_some()
    });
    unsafe { libc::kill(run.0.id() as i32, libc::SIGINT) };
    let status = run.0.wait().unwrap();
    let stderr = std::fs::read_to_string(&err).unwrap();
    let until = paused_until(p).expect("paused_until.claude in state.json");
    assert!(until > now(), "{until}");
    (status.code(), stderr)
}

fn paused_until(p: &Project) -> Option<i64> {
    serde_json::from_str::<Value>(&p.read(".ralph/state.json"))
        .ok()
        .and_then(|s| s["paused_until"]["claude"].as_i64())
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Points Codex at `api` through its own config file (ralph's default
/// `codex exec` command line stays as users run it) and returns the
/// environment it needs.
fn codex_env(p: &Project, api: &FakeApi) -> Vec<(&'static str, String)> {
    p.write_outside(
        &p.home.join(".codex/config.toml"),
        &format!(
            r#"model = "gpt-5-codex"
model_provider = "scripted"
check_for_update_on_startup = false

# Nothing but the scripted API: no analytics, no plugin marketplace sync.
[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false
plugin_sharing = false

[model_providers.scripted]
name = "scripted"
base_url = "{}/v1"
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"
request_max_retries = 2
stream_max_retries = 2
"#,
            api.url()
        ),
    );
    vec![("SCRIPTED_API_KEY", "sk-fake-000".to_string())]
}

/// Codex reports tokens and no cost: the run lands with its tokens
/// recorded. Story 1.2's first request is a 429, which Codex retries
/// itself ("Reconnecting..."): still one attempt.
#[test]
fn codex_lands_three_stories_with_tokens() {
    let Some(cli) = clis::installed(&CODEX) else {
        return;
    };
    let mut limited = false;
    let api = FakeApi::start(move |req: &Request| {
        if req.story().as_deref() == Some("1.2") && !limited {
            limited = true;
            return openai::too_many_requests();
        }
        openai::work(req)
    });
    let p = project_with_cli(THREE, CONFIG, &cli, "codex");
    let args = ["run", "--agent", "codex", "-v"];
    let r = run(&p, &args, &codex_env(&p, &api));
    assert_three_landed(&p, &r);
    for id in ["1.1", "1.2", "1.3"] {
        let story = p.story(id);
        assert_eq!(story["attempts_started"], 1, "{id}: {story:#}");
        let attempt = &story["history"][0];
        assert_eq!(attempt["outcome"], "done", "{id}");
        assert_eq!(attempt["agent"], "codex", "{id}");
        assert_eq!(tokens_of(&attempt["usage"]), api.tokens_for(id), "{id}");
        assert!(api.tokens_for(id).output > 0);
    }
    assert_eq!(api.count("1.2", 429), 1);
    assert!(
        r.stderr
            .contains("[1.2] API retry 1: exceeded retry limit, last status: 429"),
        "{r:?}"
    );
}

/// Without a cost, `budget.max_tokens` is what bounds a Codex run: once the
/// first story's tokens pass it, nothing new starts.
#[test]
fn codex_token_budget_stops_new_work() {
    let Some(cli) = clis::installed(&CODEX) else {
        return;
    };
    let api = FakeApi::start(|req: &Request| openai::work(req));
    let p = project_with_cli(
        "1.1 | First\n1.2 | Second\n",
        r#"{ "loop": { "grace_seconds": 1 }, "budget": { "max_tokens": 1000 } }"#,
        &cli,
        "codex",
    );
    let args = ["run", "--agent", "codex"];
    let r = run(&p, &args, &codex_env(&p, &api));
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(p.completed(), ["1.1"], "{r:?}");
    assert_eq!(p.story("1.2")["attempts_started"], Value::Null, "{r:?}");
    assert!(r.all().contains("budget.max_tokens"), "{r:?}");
}

/// Codex's plan usage limit (`usage_limit_reached`, no retries) pauses the
/// agent until the reset it names ("try again at 2:28 PM"), and the run
/// resumes and lands the story without charging it an attempt.
#[test]
fn codex_usage_limit_pauses_until_its_reset_then_lands() {
    let Some(cli) = clis::installed(&CODEX) else {
        return;
    };
    let mut limited = false;
    let api = FakeApi::start(move |req: &Request| {
        if req.story().is_some() && !limited {
            limited = true;
            let now = now() as u64;
            return openai::usage_limit(now + 1, now);
        }
        openai::work(req)
    });
    let p = project_with_cli("1.1 | First\n", CONFIG, &cli, "codex");
    let args = ["run", "--agent", "codex"];
    let r = run(&p, &args, &codex_env(&p, &api));
    assert_eq!(r.code, 0, "{r:?}");
    let failed = logged(&p, "1.1", 1)
        .into_iter()
        .find(|e| e["type"] == "turn.failed")
        .expect("the CLI failed the turn");
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("usage limit"),
        "{failed}"
    );
    let story = p.story("1.1");
    assert_eq!(story["status"], "done", "{story:#}");
    assert_eq!(story["attempts"], 0, "{story:#}");
    let outcomes: Vec<&str> = story["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["rate_limited", "done"]);
    assert!(r.stderr.contains("usage/rate limit"), "{r:?}");
}

/// `sandbox.mode: bwrap` for the real CLIs (issue 22); `pass` adds names to
/// the allowlist.
fn sandboxed(pass: &[&str]) -> String {
    let pass: Vec<String> = pass.iter().map(|n| format!("\"{n}\"")).collect();
    format!(
        r#"{{ "loop": {{ "max_retries": 2, "grace_seconds": 1, "timeout_seconds": 300 }},
  "sandbox": {{ "mode": "bwrap", "env": {{ "pass": [{}] }} }} }}"#,
        pass.join(", ")
    )
}

/// Real Claude Code inside ralph's bubblewrap sandbox lands its stories:
/// its variables pass the allowlist, it finds its own executable tree, and
/// it is told it is sandboxed (`IS_SANDBOX=1`, set by ralph here).
#[test]
fn claude_code_lands_inside_the_sandbox() {
    if !crate::sandbox::bwrap_works() {
        return;
    }
    let Some(cli) = clis::installed(&CLAUDE) else {
        return;
    };
    let api = FakeApi::start(|req: &Request| anthropic::work(req));
    let p = project_with_cli(THREE, &sandboxed(&[]), &cli, "claude");
    let env: Vec<(&str, String)> = claude_env(&api, Auth::ApiKey)
        .into_iter()
        .filter(|(k, _)| *k != "IS_SANDBOX")
        .collect();
    let r = run(&p, &["run"], &env);
    assert_three_landed(&p, &r);
    assert!(!p
        .read(".ralph/logs/1.1/attempt-1.log")
        .contains("sk-ant-fake-000"));
}

/// Real Codex inside the sandbox: its scripted provider's key is passed by
/// `sandbox.env.pass` (a provider's `env_key` is the user's own name).
#[test]
fn codex_lands_inside_the_sandbox() {
    if !crate::sandbox::bwrap_works() {
        return;
    }
    let Some(cli) = clis::installed(&CODEX) else {
        return;
    };
    let api = FakeApi::start(|req: &Request| openai::work(req));
    let p = project_with_cli(THREE, &sandboxed(&["SCRIPTED_API_KEY"]), &cli, "codex");
    let r = run(&p, &["run", "--agent", "codex"], &codex_env(&p, &api));
    assert_three_landed(&p, &r);
}

/// Issue 25: the model ralph chose reaches the scripted API in the
/// request, each attempt on its rung, and the cost Claude Code reports is
/// summed per model. The small rung's answer is a FAIL; the top rung does
/// the work.
#[test]
fn claude_code_gets_each_rungs_model_and_its_cost_is_summed_per_model() {
    let Some(cli) = clis::installed(&CLAUDE) else {
        return;
    };
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen2 = seen.clone();
    let api = FakeApi::start(move |req: &Request| {
        let model = req.body["model"].as_str().unwrap_or("").to_string();
        if anthropic::is_turn(req) && req.story().is_some() {
            seen2.lock().unwrap().push(model.clone());
            if model == "claude-haiku-4-5" {
                return anthropic::text(req, "Too hard. <ralph>FAIL 1.1: too hard</ralph>");
            }
        }
        anthropic::work(req)
    });
    let config = r#"{ "loop": { "max_retries": 3, "grace_seconds": 1, "timeout_seconds": 300 },
      "agent": { "escalation": ["claude-haiku-4-5", "claude-opus-4-5"] } }"#;
    let p = project_with_cli("1.1 | First\n", config, &cli, "claude");
    let r = run(&p, &["run"], &claude_env(&api, Auth::ApiKey));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.merges_of("1.1"), 1, "{r:?}");
    let turns = seen.lock().unwrap().clone();
    assert_eq!(
        turns.first().map(String::as_str),
        Some("claude-haiku-4-5"),
        "{turns:?}"
    );
    assert_eq!(
        turns.last().map(String::as_str),
        Some("claude-opus-4-5"),
        "{turns:?}"
    );
    let history = p.story("1.1")["history"].as_array().unwrap().clone();
    let models: Vec<&str> = history
        .iter()
        .map(|h| h["model"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["claude-haiku-4-5", "claude-opus-4-5"]);
    let status = run(&p, &["status", "--json"], &[]);
    let v: Value = serde_json::from_str(&status.stdout).unwrap();
    for h in &history {
        let m = h["model"].as_str().unwrap();
        let by = &v["latest_run"]["by_model"][m];
        assert_eq!(by["attempts"], 1, "{m}: {v:#}");
        assert_eq!(
            by["cost_usd"].as_f64(),
            h["cost_usd"].as_f64(),
            "{m}: {v:#}"
        );
    }
    assert_eq!(v["latest_run"]["by_model"]["claude-opus-4-5"]["landed"], 1);
}

/// Codex gets `-m` after `exec` (the scripted API sees the model in the
/// request) and, reporting tokens but no cost, has them priced from the
/// table: never "$0.00".
#[test]
fn codex_gets_the_model_and_its_tokens_are_priced() {
    let Some(cli) = clis::installed(&CODEX) else {
        return;
    };
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen2 = seen.clone();
    let api = FakeApi::start(move |req: &Request| {
        if req.story().is_some() {
            if let Some(m) = req.body["model"].as_str() {
                seen2.lock().unwrap().push(m.to_string());
            }
        }
        openai::work(req)
    });
    let config = r#"{ "loop": { "max_retries": 2, "grace_seconds": 1, "timeout_seconds": 300 },
      "agent": { "name": "codex", "model": "gpt-5-mini" } }"#;
    let p = project_with_cli("1.1 | First\n", config, &cli, "codex");
    let r = run(&p, &["run"], &codex_env(&p, &api));
    assert_eq!(r.code, 0, "{r:?}");
    let turns = seen.lock().unwrap().clone();
    assert!(
        !turns.is_empty() && turns.iter().all(|m| m == "gpt-5-mini"),
        "{turns:?}"
    );
    let attempt = p.story("1.1")["history"][0].clone();
    assert_eq!(attempt["model"], "gpt-5-mini");
    assert!(attempt.get("cost_unknown").is_none(), "{attempt:#}");
    // gpt-5-mini: $0.25 input, $2 output, $0.025 cache read per million.
    let t = tokens_of(&attempt["usage"]);
    let want = (t.input as f64 * 0.25
        + t.output as f64 * 2.0
        + t.cache_read as f64 * 0.025
        + t.cache_write as f64 * 0.25)
        / 1e6;
    let cost = attempt["cost_usd"].as_f64().unwrap();
    assert!(
        cost > 0.0 && (cost - want).abs() < 1e-12,
        "{cost} vs {want}: {attempt:#}"
    );
}
