//! One agent attempt as data: the command line, the environment and the
//! verdict (SPEC 4.2–4.4). Pure; `process` runs it and `engine` acts on it.

mod agy;
mod backend;
mod claude;
mod codex;
mod cursor;
pub(crate) mod event;
mod gemini;
mod opencode;
pub(crate) mod parser;
pub(crate) mod reset;
#[cfg(test)]
mod testkit;

pub(crate) use backend::{Backend, Decoder};

use crate::agent::parser::Summary;
use crate::process::{AttemptExit, StopReason};

/// The agent's part of the configuration, as plain data (`config` builds
/// it; `agent/` reads no configuration of its own, so it stays a leaf).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    /// `agent.name`: the backend stories run with (default `claude`).
    pub(crate) name: Backend,
    /// `agent.command`: overrides the executable of `name`.
    pub(crate) command: Option<String>,
    /// `agent.flags`: override the arguments of `name`.
    pub(crate) flags: Option<Vec<String>>,
    /// `agent.fallback`: the backends new attempts go to, in order, while
    /// the ones before them are at their usage limit.
    pub(crate) fallback: Vec<Backend>,
    /// `claude.command` (default `claude`): Claude Code's executable.
    pub(crate) claude_command: String,
    /// `claude.flags`; `None` means the default flags of SPEC 4.2.
    pub(crate) claude_flags: Option<Vec<String>>,
    /// `agent.model` (or `--model`): the model attempts run on when no
    /// ladder or story says otherwise; `None` leaves it to the CLI.
    pub(crate) model: Option<String>,
    /// `agent.escalation`: the rungs retries climb, cheapest first.
    pub(crate) escalation: Vec<Rung>,
}

/// One rung of the escalation ladder: a model, and the backend that runs
/// it when it is not the story's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rung {
    pub(crate) agent: Option<Backend>,
    pub(crate) model: String,
}

/// The executable and arguments `backend` runs with: `agent.command` and
/// `agent.flags` override those of the configured `agent.name`; Claude Code
/// also keeps its `claude.command` and `claude.flags`; otherwise the
/// backend's defaults. The prompt goes to stdin, never argv.
pub(crate) fn invocation(settings: &Settings, backend: Backend) -> (String, Vec<String>) {
    let chosen = backend == settings.name;
    let command = match (&settings.command, backend) {
        (Some(c), _) if chosen => c.clone(),
        (_, Backend::Claude) => settings.claude_command.clone(),
        _ => backend.default_command().to_string(),
    };
    let args = match (&settings.flags, backend) {
        (Some(f), _) if chosen => f.clone(),
        (_, Backend::Claude) => match &settings.claude_flags {
            Some(f) => complete_claude_flags(f),
            None => backend
                .default_args()
                .iter()
                .map(|s| s.to_string())
                .collect(),
        },
        _ => backend
            .default_args()
            .iter()
            .map(|s| s.to_string())
            .collect(),
    };
    (command, args)
}

/// `claude.flags` as Claude Code must get them headless: `--print` if
/// absent (without it the CLI waits for a person), and when no output
/// format is named, stream-json (which needs `--verbose`) so tokens and
/// cost are read. Ralph v2 appended `--output-format json` instead; a
/// format the user names is kept.
pub(crate) fn complete_claude_flags(flags: &[String]) -> Vec<String> {
    let has = |names: &[&str]| {
        flags.iter().any(|f| {
            names
                .iter()
                .any(|n| f == n || f.strip_prefix(n).is_some_and(|r| r.starts_with('=')))
        })
    };
    let mut out = flags.to_vec();
    if !has(&["--print", "-p"]) {
        out.push("--print".into());
    }
    if !has(&["--output-format"]) {
        out.extend(["--output-format".into(), "stream-json".into()]);
        if !has(&["--verbose"]) {
            out.push("--verbose".into());
        }
    }
    out
}

/// What `validate` says when `claude.flags` leave the output format to
/// ralph.
pub(crate) fn claude_flags_note(settings: &Settings) -> Option<String> {
    let flags = settings.claude_flags.as_ref()?;
    let completed = complete_claude_flags(flags);
    (completed.len() > flags.len()).then(|| {
        format!(
            "note: claude.flags lack {}; ralph adds them, so Claude Code runs headless and its \
             tokens and cost are recorded",
            completed[flags.len()..].join(" ")
        )
    })
}

/// True when `backend`'s CLI can continue an earlier session with a new
/// prompt (a fix-up then needs only the short prompt).
pub(crate) fn resumes(backend: Backend) -> bool {
    matches!(backend, Backend::Claude | Backend::Codex)
}

/// The arguments of a run that continues session `session` of `backend`,
/// the prompt still on stdin: Claude Code's `--resume <id>` goes first (a
/// list-taking flag such as `--allowedTools` would swallow it at the end);
/// Codex's `resume <id> -` is a subcommand of `exec`, after exec's options.
/// `None` when the configured arguments leave no place for it, or the ID
/// could be read as an option.
pub(crate) fn resume_args(backend: Backend, args: &[String], session: &str) -> Option<Vec<String>> {
    let plain = !session.is_empty()
        && !session.starts_with('-')
        && session
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c));
    if !plain {
        return None;
    }
    match backend {
        Backend::Claude => {
            let mut out = vec!["--resume".to_string(), session.to_string()];
            out.extend(args.iter().cloned());
            Some(out)
        }
        Backend::Codex => {
            args.iter().position(|a| a == "exec")?;
            let mut out = args.to_vec();
            if out.last().is_some_and(|a| a == "-") {
                out.pop();
            }
            out.extend(["resume".to_string(), session.to_string(), "-".to_string()]);
            Some(out)
        }
        _ => None,
    }
}

/// The arguments of `backend` told to run `model`, in the place its CLI
/// reads the flag: before everything for Claude Code, Cursor and Gemini
/// (a list-taking flag at the end would swallow it), after the `exec` or
/// `run` subcommand for Codex and opencode (`provider/model`). A model the
/// configured arguments already name is replaced, not given twice. `None`
/// when the CLI has no model flag or its arguments no place for one.
pub(crate) fn with_model(backend: Backend, args: &[String], model: &str) -> Option<Vec<String>> {
    let flag = backend.model_flag()?;
    if model.is_empty() || model.starts_with('-') {
        return None;
    }
    let long = (flag == "-m").then_some("--model");
    let is_flag = |a: &str| a == flag || Some(a) == long;
    let is_joined = |a: &str| {
        [Some(flag), long]
            .into_iter()
            .flatten()
            .any(|f| a.strip_prefix(f).is_some_and(|r| r.starts_with('=')))
    };
    let mut rest = Vec::with_capacity(args.len());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if is_flag(a) {
            it.next();
        } else if !is_joined(a) {
            rest.push(a.clone());
        }
    }
    let at = match backend {
        Backend::Codex => rest.iter().position(|a| a == "exec")? + 1,
        Backend::Opencode => rest.iter().position(|a| a == "run")? + 1,
        _ => 0,
    };
    rest.splice(at..at, [flag.to_string(), model.to_string()]);
    Some(rest)
}

/// `post_story`'s `RALPH_RESULT` values (also their names in a worker's
/// report, `exec::worker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ResultKind {
    Done,
    Fail,
    Timeout,
    Error,
    NoSignal,
}

impl ResultKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ResultKind::Done => "done",
            ResultKind::Fail => "fail",
            ResultKind::Timeout => "timeout",
            ResultKind::Error => "error",
            ResultKind::NoSignal => "no_signal",
        }
    }
}

/// What the engine does with a finished attempt. A worker's report carries
/// it as `{"verdict": "failed", "reason": .., "kind": "timeout"}`: a name
/// this ralph does not know is an error naming it, never a guess.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub(crate) enum Verdict {
    /// DONE for this story: land it.
    Done,
    /// No DONE but commits: land it only through required validation.
    Tentative,
    /// A failed attempt, counted against the retry budget.
    Failed { reason: String, kind: ResultKind },
    /// Usage or rate limit: not the story's fault; pause and redo.
    RateLimited { resets_at: Option<u64> },
    /// Stopped by Ctrl-C: not counted.
    Interrupted,
    /// Claude Code refused to run as root without IS_SANDBOX=1: retrying is futile.
    RootRefusal,
    /// Something outside the story went wrong (the machine, the project, the
    /// agent's installation): not an attempt, never counted.
    Fault { reason: String, kind: FaultKind },
}

/// What a fault outside the story needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FaultKind {
    /// Likely to pass: wait a little and try again.
    Transient,
    /// The agent's model API failed (5xx, overloaded, unreachable): its
    /// CLI gave up. Waited on like a usage limit, per agent and no longer
    /// than `limits.max_wait_hours`; then `agent.fallback`, or a stop.
    Api,
    /// Only a person can fix it: nothing new starts, the run says what to
    /// do; agents already running finish (their work is still good).
    NeedsPerson,
    /// As `NeedsPerson`, and the running agents are stopped too: their work
    /// would be lost or harmful (rejected credentials, a moved target).
    StopNow,
}

impl Verdict {
    pub(crate) fn kind(&self) -> ResultKind {
        match self {
            Verdict::Done | Verdict::Tentative => ResultKind::Done,
            Verdict::Failed { kind, .. } => *kind,
            Verdict::RateLimited { .. } | Verdict::RootRefusal | Verdict::Fault { .. } => {
                ResultKind::Error
            }
            Verdict::Interrupted => ResultKind::Timeout,
        }
    }
}

/// Applies the outcome rules of SPEC 4.4, in order.
pub(crate) fn classify(
    id: &str,
    exit: &AttemptExit,
    summary: &Summary,
    commits: usize,
    timeout_secs: u64,
    idle_secs: u64,
    has_required_validation: bool,
) -> Verdict {
    match exit.stopped {
        Some(StopReason::Interrupted) => return Verdict::Interrupted,
        // The CLI was only waiting to try the API again (an API key's 429 is
        // retried for minutes): the API, not the story, used up the time.
        Some(StopReason::Timeout | StopReason::Idle) if summary.waiting_on_api.is_some() => {
            return waiting_on_api(summary.waiting_on_api.flatten())
        }
        Some(StopReason::Timeout) => {
            return Verdict::Failed {
                reason: format!("Timeout after {timeout_secs}s"),
                kind: ResultKind::Timeout,
            }
        }
        Some(StopReason::Idle) => {
            return Verdict::Failed {
                reason: format!(
                    "No output for {} (loop.idle_timeout_seconds): stopped as hung",
                    crate::timefmt::human_duration(idle_secs as f64)
                ),
                kind: ResultKind::Timeout,
            }
        }
        None => {}
    }
    // A cap of `sandbox.limits` is the attempt's failure, whatever the
    // agent said after it: its work ran short of what it needed.
    if let Some(hit) = exit.limit {
        return Verdict::Failed {
            reason: hit.to_string(),
            kind: ResultKind::Error,
        };
    }
    if summary.root_refusal {
        return Verdict::RootRefusal;
    }
    let done_here = summary.signals.done.as_deref() == Some(id);
    if let Some(resets_at) = summary.rate_limited {
        if !done_here || exit.code != Some(0) {
            return Verdict::RateLimited { resets_at };
        }
    }
    // The CLI gave up on an overloaded, failing or unreachable API after
    // its own retries: nothing the story did.
    if (exit.code != Some(0) || summary.is_error) && !done_here && gave_up_on_api(summary) {
        return Verdict::Fault {
            reason: with_detail("the model API failed".to_string(), summary),
            kind: FaultKind::Api,
        };
    }
    if exit.code != Some(0) {
        let reason = match (exit.code, exit.signal) {
            (_, Some(sig)) => format!("Killed by signal {sig}"),
            (Some(c), _) => format!("Exit code {c}"),
            (None, None) => "Exit status unknown".to_string(),
        };
        return Verdict::Failed {
            reason: with_detail(reason, summary),
            kind: ResultKind::Error,
        };
    }
    if summary.is_error {
        return Verdict::Failed {
            reason: with_detail("Agent reported an error".to_string(), summary),
            kind: ResultKind::Error,
        };
    }
    if done_here {
        return Verdict::Done;
    }
    if let Some(other) = &summary.signals.done {
        return Verdict::Failed {
            reason: format!("Mismatched DONE signal: DONE {other}, expected {id}"),
            kind: ResultKind::Fail,
        };
    }
    if let Some((_, reason)) = &summary.signals.fail {
        return Verdict::Failed {
            reason: reason.clone(),
            kind: ResultKind::Fail,
        };
    }
    if commits > 0 && has_required_validation {
        return Verdict::Tentative;
    }
    Verdict::Failed {
        reason: "No completion signal in output".to_string(),
        kind: ResultKind::NoSignal,
    }
}

/// The CLI's last word was about the model API, not the story: an HTTP
/// 5xx, Claude Code's own `server_error` / `overloaded` (its stream-json
/// result then carries no status: "Repeated 529 Overloaded errors"), or an
/// `unknown` error after it had retried the API (no connection, a dead
/// proxy in `ANTHROPIC_BASE_URL`, requests timing out).
fn gave_up_on_api(summary: &Summary) -> bool {
    summary
        .api_error_status
        .is_some_and(|s| (500..600).contains(&s))
        || matches!(
            summary.api_error.as_deref(),
            Some("server_error" | "overloaded")
        )
        || (summary.api_error.as_deref() == Some("unknown") && summary.api_retried)
}

/// An attempt stopped while its CLI waited to retry the API, which last
/// answered `status`: a rate limit pauses the agent, anything else (529,
/// 5xx, no connection) is a passing fault. Neither is the story's failure.
fn waiting_on_api(status: Option<u64>) -> Verdict {
    if status == Some(429) {
        return Verdict::RateLimited { resets_at: None };
    }
    let why = match status {
        Some(s) => format!("answering {s}"),
        None => "unreachable".to_string(),
    };
    Verdict::Fault {
        reason: format!(
            "stopped while the agent's CLI was waiting to retry the model API ({why}); \
             not the story's failure"
        ),
        kind: FaultKind::Api,
    }
}

fn with_detail(reason: String, summary: &Summary) -> String {
    let detail = if !summary.result_text.trim().is_empty() {
        summary.result_text.trim()
    } else {
        summary.last_line.trim()
    };
    if detail.is_empty() {
        reason
    } else {
        let short: String = detail.chars().take(200).collect();
        format!("{reason}: {short}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::parser::Signals;
    use std::time::Duration;

    #[test]
    fn a_resumed_session_keeps_the_configured_arguments() {
        let strs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let claude = strs(Backend::Claude.default_args());
        let r = resume_args(Backend::Claude, &claude, "4536f138-aa").unwrap();
        assert_eq!(&r[..2], ["--resume", "4536f138-aa"]);
        assert_eq!(&r[2..], claude.as_slice());
        let codex = strs(Backend::Codex.default_args());
        let r = resume_args(Backend::Codex, &codex, "t-1").unwrap();
        assert_eq!(
            r,
            strs(&[
                "exec",
                "--json",
                "--dangerously-bypass-approvals-and-sandbox",
                "--skip-git-repo-check",
                "resume",
                "t-1",
                "-"
            ])
        );
        // No place for it, an ID that reads as an option, a CLI without resume.
        assert_eq!(resume_args(Backend::Codex, &strs(&["e", "-"]), "t-1"), None);
        assert_eq!(resume_args(Backend::Claude, &claude, "--evil"), None);
        assert_eq!(resume_args(Backend::Claude, &claude, "a b"), None);
        assert_eq!(resume_args(Backend::Gemini, &[], "s"), None);
        assert!(resumes(Backend::Claude) && resumes(Backend::Codex) && !resumes(Backend::Custom));
    }

    #[test]
    fn each_cli_gets_the_model_in_its_own_flag() {
        let strs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let on = |b: Backend, m: &str| with_model(b, &strs(b.default_args()), m);
        assert_eq!(
            &on(Backend::Claude, "haiku").unwrap()[..2],
            ["--model", "haiku"]
        );
        assert_eq!(
            &on(Backend::Codex, "gpt-5").unwrap()[..3],
            ["exec", "-m", "gpt-5"]
        );
        assert_eq!(
            &on(Backend::Gemini, "gemini-2.5-pro").unwrap()[..2],
            ["-m", "gemini-2.5-pro"]
        );
        assert_eq!(
            &on(Backend::Opencode, "anthropic/claude-sonnet-4-5").unwrap()[..3],
            ["run", "-m", "anthropic/claude-sonnet-4-5"]
        );
        assert_eq!(
            &on(Backend::Cursor, "gpt-5").unwrap()[..2],
            ["--model", "gpt-5"]
        );
        for b in [Backend::Amp, Backend::Agy, Backend::Custom] {
            assert_eq!(on(b, "x"), None, "{b:?}");
        }
        // A model the flags already name is replaced, in either spelling.
        let mine = strs(&["--model=opus", "-p", "--model", "sonnet", "--verbose"]);
        assert_eq!(
            with_model(Backend::Claude, &mine, "haiku").unwrap(),
            strs(&["--model", "haiku", "-p", "--verbose"])
        );
        let codex = strs(&["exec", "--model", "o3", "--json", "-"]);
        assert_eq!(
            with_model(Backend::Codex, &codex, "gpt-5").unwrap(),
            strs(&["exec", "-m", "gpt-5", "--json", "-"])
        );
        // No subcommand to follow, or a model that reads as an option.
        assert_eq!(
            with_model(Backend::Codex, &strs(&["--json"]), "gpt-5"),
            None
        );
        assert_eq!(on(Backend::Claude, "--evil"), None);
    }

    fn exit(code: i32) -> AttemptExit {
        AttemptExit {
            code: Some(code),
            signal: None,
            stopped: None,
            duration: Duration::ZERO,
            swept: 0,
            limit: None,
        }
    }

    fn summary(done: Option<&str>, fail: Option<(&str, &str)>) -> Summary {
        Summary {
            signals: Signals {
                done: done.map(str::to_string),
                fail: fail.map(|(a, b)| (a.to_string(), b.to_string())),
                learnings: vec![],
                ..Signals::default()
            },
            ..Summary::default()
        }
    }

    #[test]
    fn claude_flags_are_completed_for_headless_stream_json() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            complete_claude_flags(&v(&["--dangerously-skip-permissions"])),
            v(&[
                "--dangerously-skip-permissions",
                "--print",
                "--output-format",
                "stream-json",
                "--verbose"
            ])
        );
        // Ralph v2's default names json: kept, as any format the user names.
        let v2 = v(&[
            "--print",
            "--dangerously-skip-permissions",
            "--output-format",
            "json",
        ]);
        assert_eq!(complete_claude_flags(&v2), v2);
        let eq = v(&["-p", "--output-format=stream-json", "--verbose"]);
        assert_eq!(complete_claude_flags(&eq), eq);
    }

    #[test]
    fn outcome_table() {
        let ok = exit(0);
        assert_eq!(
            classify("1.1", &ok, &summary(Some("1.1"), None), 0, 9, 600, false),
            Verdict::Done
        );
        assert!(matches!(
            classify("1.1", &ok, &summary(Some("1.2"), None), 1, 9, 600, true),
            Verdict::Failed {
                kind: ResultKind::Fail,
                ..
            }
        ));
        assert_eq!(
            classify("1.1", &ok, &summary(None, None), 1, 9, 600, true),
            Verdict::Tentative
        );
        assert!(matches!(
            classify("1.1", &ok, &summary(None, None), 1, 9, 600, false),
            Verdict::Failed {
                kind: ResultKind::NoSignal,
                ..
            }
        ));
        assert!(matches!(
            classify(
                "1.1",
                &exit(1),
                &summary(Some("1.1"), None),
                1,
                9,
                600,
                false
            ),
            Verdict::Failed {
                kind: ResultKind::Error,
                ..
            }
        ));
        let mut err = summary(Some("1.1"), None);
        err.is_error = true;
        assert!(matches!(
            classify("1.1", &ok, &err, 0, 9, 600, false),
            Verdict::Failed { .. }
        ));
        assert_eq!(
            classify(
                "1.1",
                &ok,
                &summary(None, Some(("1.1", "tests red"))),
                0,
                9,
                600,
                false
            ),
            Verdict::Failed {
                reason: "tests red".into(),
                kind: ResultKind::Fail
            }
        );
    }

    /// Claude Code retries an API key's 429 for minutes: a timeout that
    /// lands in that wait is the API's, not a failed attempt.
    #[test]
    fn stopped_while_the_cli_waits_on_the_api_is_not_a_failure() {
        for stop in [StopReason::Timeout, StopReason::Idle] {
            let mut e = exit(0);
            e.stopped = Some(stop);
            let mut s = summary(None, None);
            s.waiting_on_api = Some(Some(429));
            assert_eq!(
                classify("1.1", &e, &s, 0, 7, 600, false),
                Verdict::RateLimited { resets_at: None }
            );
            for status in [Some(529), None] {
                s.waiting_on_api = Some(status);
                assert!(matches!(
                    classify("1.1", &e, &s, 0, 7, 600, false),
                    Verdict::Fault {
                        kind: FaultKind::Api,
                        ..
                    }
                ));
            }
            // Working when stopped: a timeout like any other.
            s.waiting_on_api = None;
            assert!(matches!(
                classify("1.1", &e, &s, 0, 7, 600, false),
                Verdict::Failed {
                    kind: ResultKind::Timeout,
                    ..
                }
            ));
        }
    }

    #[test]
    fn an_api_that_kept_failing_is_a_fault_not_the_storys() {
        let mut s = summary(None, None);
        s.is_error = true;
        s.result_text = "API Error: Repeated 529 Overloaded errors".into();
        s.api_error_status = Some(529);
        assert!(matches!(
            classify("1.1", &exit(1), &s, 0, 9, 600, false),
            Verdict::Fault { kind: FaultKind::Api, ref reason }
                if reason.contains("Repeated 529")
        ));
        // A request the API refused as bad is the attempt's own failure.
        s.api_error_status = Some(400);
        assert!(matches!(
            classify("1.1", &exit(1), &s, 0, 9, 600, false),
            Verdict::Failed {
                kind: ResultKind::Error,
                ..
            }
        ));
    }

    /// Claude Code's stream-json after it retried 529s and gave up, as
    /// recorded: `api_retry` lines, a made-up assistant line, then an
    /// error result. Before issue 21 this was a failed attempt ("Exit
    /// code 1"), charged like the story's own failure.
    #[test]
    fn claude_codes_recorded_overload_is_an_api_fault() {
        let dir = testkit::recording_dir("claude");
        let text = std::fs::read_to_string(dir.join("overloaded-529.stdout")).unwrap();
        let s = testkit::parse(Backend::Claude, text.lines());
        assert_eq!(s.api_error_status, Some(529), "{text}");
        assert!(matches!(
            classify("1.1", &exit(1), &s, 0, 9, 600, false),
            Verdict::Fault { kind: FaultKind::Api, ref reason }
                if reason.contains("529 Overloaded")
        ));
        // A dead proxy: connection retries, then Claude Code's `unknown`.
        let lines = [
            r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":5,"error_status":null,"error":"unknown"}"#,
            r#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: Unable to connect to API (ConnectionRefused)"}]},"error":"unknown"}"#,
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":null,"result":"API Error: Unable to connect to API (ConnectionRefused)"}"#,
        ];
        let s = testkit::parse(Backend::Claude, lines);
        assert!(matches!(
            classify("1.1", &exit(1), &s, 0, 9, 600, false),
            Verdict::Fault { kind: FaultKind::Api, ref reason } if reason.contains("ConnectionRefused")
        ));
        // `unknown` without any retry of the API is the attempt's own error.
        let s = testkit::parse(Backend::Claude, &lines[1..]);
        assert!(matches!(
            classify("1.1", &exit(1), &s, 0, 9, 600, false),
            Verdict::Failed { .. }
        ));
    }

    #[test]
    fn a_signalled_attempt_is_a_timeout_whatever_it_printed() {
        let mut e = exit(0);
        e.stopped = Some(StopReason::Timeout);
        assert!(matches!(
            classify("1.1", &e, &summary(Some("1.1"), None), 3, 7, 600, true),
            Verdict::Failed { kind: ResultKind::Timeout, ref reason } if reason == "Timeout after 7s"
        ));
    }
}
