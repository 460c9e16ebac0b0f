//! Codex: how ralph reads `codex exec --json`'s JSON event stream (see
//! the workspace notes `agents.md` §2.2, §2.3, §6.3, §8). Pure: one JSON event
//! in, our events out.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::event::{AgentEvent, Usage};
use super::parser::{one_line, str_of, u64_of};

/// Codex's own terminal UI warns at these percentages of a limit window; we
/// say so at the same points rather than after every model call.
const WARN_AT: [f64; 3] = [75.0, 90.0, 95.0];

/// The HTTP status Codex quotes in its error texts ("last status: 429 Too
/// Many Requests", "unexpected status 401 Unauthorized"): Codex has no
/// status field, and 429 is what makes the shared step see a limit.
static STATUS_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bstatus:?\s+([1-5]\d\d)\b").unwrap());

/// Codex's limit wordings that the shared limit regex does not know
/// ("Quota exceeded. Check your plan and billing details." is the 429
/// `insufficient_quota`; "hit your spend cap" is from notes §8). Its
/// usage-limit and out-of-credits texts are the shared regex's already.
static LIMIT_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)quota exceeded|insufficient_quota|spend cap").unwrap());

/// State kept across the events of one attempt.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    /// `turn.completed` carries no text: the result is the turn's last
    /// agent message.
    last_message: String,
    /// Items already shown when they started, so their completion is not
    /// shown again; an item seen only completed is shown then.
    shown: HashSet<String>,
    /// The error already reported as the result: Codex repeats it in
    /// `turn.failed`, and a second result would report the limit twice.
    failed_with: Option<String>,
    /// Retries without a count in their text ("waiting for network").
    retries: u64,
    /// Highest warning threshold already reported.
    warned_at: f64,
}

impl Decoder {
    /// What one JSON event of the stream means; never panics.
    pub(crate) fn event(&mut self, ev: &Value) -> Vec<AgentEvent> {
        match str_of(ev, "type") {
            "thread.started" => match ev.get("thread_id").and_then(Value::as_str) {
                Some(id) if !id.is_empty() => vec![AgentEvent::SessionId(id.to_string())],
                _ => Vec::new(),
            },
            "turn.started" => {
                self.last_message.clear();
                self.failed_with = None;
                Vec::new()
            }
            "item.started" => self.item(ev.get("item"), false),
            "item.completed" => self.item(ev.get("item"), true),
            "turn.completed" => vec![AgentEvent::Result {
                is_error: false,
                text: self.last_message.clone(),
                usage: ev.get("usage").map(usage_of).unwrap_or_default(),
                cost_usd: None,
                num_turns: None,
                api_error_status: None,
            }],
            "turn.failed" => {
                let message = ev
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("turn failed");
                self.failure(message)
            }
            "error" => {
                let message = str_of(ev, "message");
                match message
                    .strip_prefix("Reconnecting...")
                    .or_else(|| message.strip_prefix("Reconnecting…"))
                {
                    Some(rest) => vec![self.retry(rest)],
                    None => self.failure(message),
                }
            }
            _ => self.token_count(ev),
        }
    }

    fn item(&mut self, item: Option<&Value>, completed: bool) -> Vec<AgentEvent> {
        let Some(item) = item else {
            return Vec::new();
        };
        let (name, summary) = match str_of(item, "type") {
            "agent_message" if completed => {
                let text = str_of(item, "text").to_string();
                self.last_message.clone_from(&text);
                return vec![AgentEvent::Text(text)];
            }
            "command_execution" => ("shell", unwrap_shell(str_of(item, "command")).to_string()),
            "file_change" => {
                let paths: Vec<&str> = item
                    .get("changes")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|c| str_of(c, "path"))
                    .collect();
                ("edit", paths.join(" "))
            }
            "mcp_tool_call" => {
                let name = format!("{}.{}", str_of(item, "server"), str_of(item, "tool"));
                let args = item.get("arguments").map(Value::to_string);
                return self.tool_once(item, completed, name, args.unwrap_or_default());
            }
            "web_search" => ("web_search", str_of(item, "query").to_string()),
            "collab_tool_call" => ("agent", str_of(item, "prompt").to_string()),
            "todo_list" => {
                let n = item
                    .get("items")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                ("todo", format!("{n} todos"))
            }
            // Reasoning is not the answer; error items are Codex's own
            // non-fatal notices (model metadata, transport fallback).
            _ => return Vec::new(),
        };
        self.tool_once(item, completed, name.to_string(), summary)
    }

    fn tool_once(
        &mut self,
        item: &Value,
        completed: bool,
        name: String,
        summary: String,
    ) -> Vec<AgentEvent> {
        let id = str_of(item, "id");
        if completed {
            if !id.is_empty() && self.shown.remove(id) {
                return Vec::new();
            }
        } else if !id.is_empty() {
            self.shown.insert(id.to_string());
        }
        vec![AgentEvent::ToolUse {
            name,
            summary: one_line(&summary),
        }]
    }

    fn failure(&mut self, message: &str) -> Vec<AgentEvent> {
        if self.failed_with.as_deref() == Some(message) {
            return Vec::new();
        }
        self.failed_with = Some(message.to_string());
        let mut out = Vec::with_capacity(2);
        if LIMIT_RE.is_match(message) {
            out.push(AgentEvent::RateLimited {
                resets_at: None,
                message: message.trim().to_string(),
            });
        }
        out.push(AgentEvent::Result {
            is_error: true,
            text: message.to_string(),
            usage: Usage::default(),
            cost_usd: None,
            num_turns: None,
            api_error_status: STATUS_RE.captures(message).and_then(|c| c[1].parse().ok()),
        });
        out
    }

    /// `rest` follows "Reconnecting...": "2/5 (why)" or "waiting for network (why)".
    fn retry(&mut self, rest: &str) -> AgentEvent {
        let rest = rest.trim();
        let counted = rest.split_once(' ').and_then(|(count, why)| {
            let (n, _of) = count.split_once('/')?;
            Some((n.parse::<u64>().ok()?, why.trim()))
        });
        let (attempt, why) = match counted {
            Some((n, why)) => (n, why),
            None => (self.retries + 1, rest),
        };
        self.retries = self.retries.max(attempt);
        let why = why
            .strip_prefix('(')
            .and_then(|w| w.strip_suffix(')'))
            .unwrap_or(why);
        AgentEvent::ApiRetry {
            attempt,
            error: why.to_string(),
            status: None,
        }
    }

    /// `token_count` comes bare, under `msg` (older `exec --json`) or under
    /// `payload` (session rollouts); its `rate_limits` say how full each
    /// limit window is.
    fn token_count(&mut self, ev: &Value) -> Vec<AgentEvent> {
        let Some(tc) = [Some(ev), ev.get("msg"), ev.get("payload")]
            .into_iter()
            .flatten()
            .find(|v| str_of(v, "type") == "token_count")
        else {
            return Vec::new();
        };
        let Some(limits) = tc.get("rate_limits") else {
            return Vec::new();
        };
        let fullest = ["primary", "secondary"]
            .into_iter()
            .filter_map(|w| limits.get(w))
            .filter_map(|w| Some((w.get("used_percent")?.as_f64()?, w)))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let Some((used, window)) = fullest else {
            return Vec::new();
        };
        let resets_at = window.get("resets_at").and_then(Value::as_u64);
        if used >= 100.0 {
            if self.warned_at >= 100.0 {
                return Vec::new();
            }
            self.warned_at = 100.0;
            let minutes = window.get("window_minutes").and_then(Value::as_u64);
            let message = match minutes {
                Some(m) => format!("Codex usage limit reached ({m}-minute window)"),
                None => "Codex usage limit reached".to_string(),
            };
            return vec![AgentEvent::RateLimited { resets_at, message }];
        }
        let Some(threshold) = WARN_AT.into_iter().rev().find(|t| used >= *t) else {
            return Vec::new();
        };
        if threshold <= self.warned_at {
            return Vec::new();
        }
        self.warned_at = threshold;
        vec![AgentEvent::LimitWarning {
            resets_at,
            used_percent: Some(used),
        }]
    }
}

/// Codex's `input_tokens` is the whole prompt, cache reads and writes
/// included; ours counts the three apart.
fn usage_of(u: &Value) -> Usage {
    let cached = u64_of(u, "cached_input_tokens");
    let written = u64_of(u, "cache_write_input_tokens");
    Usage {
        input_tokens: u64_of(u, "input_tokens")
            .saturating_sub(cached)
            .saturating_sub(written),
        output_tokens: u64_of(u, "output_tokens"),
        cache_creation_input_tokens: written,
        cache_read_input_tokens: cached,
    }
}

/// Codex runs every command as `/bin/bash -lc '<command>'`; the display
/// wants the command.
fn unwrap_shell(cmd: &str) -> &str {
    for flag in [" -lc ", " -c "] {
        let Some((shell, rest)) = cmd.split_once(flag) else {
            continue;
        };
        if !shell.ends_with("sh") || shell.contains(' ') {
            continue;
        }
        let inner = rest
            .strip_prefix('\'')
            .and_then(|r| r.strip_suffix('\''))
            .filter(|r| !r.contains('\''));
        return inner.unwrap_or(rest);
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::parser::{OutputParser, Summary};
    use crate::agent::testkit;
    use crate::agent::Backend;
    use serde_json::json;

    fn decode(lines: &[Value]) -> Vec<AgentEvent> {
        testkit::decode(Backend::Codex, lines)
    }

    fn parse(lines: &[String]) -> Summary {
        testkit::parse(Backend::Codex, lines)
    }

    fn result(is_error: bool, text: &str, usage: Usage, status: Option<u64>) -> AgentEvent {
        AgentEvent::Result {
            is_error,
            text: text.into(),
            usage,
            cost_usd: None,
            num_turns: None,
            api_error_status: status,
        }
    }

    #[test]
    fn thread_started_is_the_session() {
        assert_eq!(
            decode(&[json!({"type": "thread.started", "thread_id": "t-1"})]),
            vec![AgentEvent::SessionId("t-1".into())]
        );
        assert!(decode(&[json!({"type": "thread.started"})]).is_empty());
    }

    #[test]
    fn agent_message_is_text_and_the_result() {
        let ev = decode(&[
            json!({"type": "turn.started"}),
            json!({"type": "item.completed", "item": {"id": "item_1", "type": "reasoning", "text": "<ralph>DONE 9</ralph>"}}),
            json!({"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": "first"}}),
            json!({"type": "item.completed", "item": {"id": "item_3", "type": "agent_message", "text": "<ralph>DONE 1.1</ralph>"}}),
            json!({"type": "turn.completed", "usage": {"input_tokens": 4000, "cached_input_tokens": 3000,
                "cache_write_input_tokens": 200, "output_tokens": 120, "reasoning_output_tokens": 40}}),
        ]);
        let usage = Usage {
            input_tokens: 800,
            output_tokens: 120,
            cache_creation_input_tokens: 200,
            cache_read_input_tokens: 3000,
        };
        assert_eq!(
            ev,
            vec![
                AgentEvent::Text("first".into()),
                AgentEvent::Text("<ralph>DONE 1.1</ralph>".into()),
                result(false, "<ralph>DONE 1.1</ralph>", usage, None),
            ]
        );
    }

    #[test]
    fn a_command_is_one_tool_use() {
        let cmd = "/bin/bash -lc 'echo hi && touch x'";
        let ev = decode(&[
            json!({"type": "item.started", "item": {"id": "item_1", "type": "command_execution", "command": cmd, "status": "in_progress"}}),
            json!({"type": "item.completed", "item": {"id": "item_1", "type": "command_execution", "command": cmd,
                "aggregated_output": "<ralph>DONE 1.1</ralph>\n", "exit_code": 0, "status": "completed"}}),
            // Seen only completed (a command the sandbox refused, say): shown once.
            json!({"type": "item.completed", "item": {"id": "item_2", "type": "command_execution", "command": "ls", "exit_code": 1}}),
        ]);
        assert_eq!(
            ev,
            vec![
                AgentEvent::ToolUse {
                    name: "shell".into(),
                    summary: "echo hi && touch x".into()
                },
                AgentEvent::ToolUse {
                    name: "shell".into(),
                    summary: "ls".into()
                },
            ]
        );
    }

    #[test]
    fn tool_output_is_never_agent_text() {
        let s = parse(&[
            json!({"type": "item.completed", "item": {"id": "i", "type": "command_execution",
                "command": "echo '<ralph>DONE 1.1</ralph>'", "aggregated_output": "<ralph>DONE 1.1</ralph>\n"}})
            .to_string(),
            json!({"type": "item.completed", "item": {"id": "j", "type": "error", "message": "<ralph>DONE 1.1</ralph>"}})
                .to_string(),
            json!({"type": "turn.completed", "usage": {}}).to_string(),
        ]);
        assert_eq!(s.signals.done, None);
        assert!(s.result_seen && !s.is_error);
    }

    #[test]
    fn other_tools_are_summarised() {
        let long = "x ".repeat(100);
        let ev = decode(&[
            json!({"type": "item.completed", "item": {"id": "1", "type": "file_change",
                "changes": [{"path": "src/a.rs", "kind": "update"}, {"path": "b.rs", "kind": "add"}], "status": "completed"}}),
            json!({"type": "item.started", "item": {"id": "2", "type": "mcp_tool_call", "server": "gh", "tool": "search",
                "arguments": {"q": "x"}, "status": "in_progress"}}),
            json!({"type": "item.completed", "item": {"id": "2", "type": "mcp_tool_call", "server": "gh", "tool": "search"}}),
            json!({"type": "item.started", "item": {"id": "3", "type": "web_search", "query": long}}),
            json!({"type": "item.started", "item": {"id": "4", "type": "todo_list", "items": [{"text": "a"}, {"text": "b"}]}}),
            json!({"type": "item.updated", "item": {"id": "4", "type": "todo_list", "items": []}}),
            json!({"type": "item.completed", "item": {"id": "4", "type": "todo_list", "items": []}}),
        ]);
        let shown: Vec<(String, String)> = ev
            .into_iter()
            .map(|e| match e {
                AgentEvent::ToolUse { name, summary } => (name, summary),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(shown.len(), 4);
        assert_eq!(shown[0], ("edit".into(), "src/a.rs b.rs".into()));
        assert_eq!(shown[1], ("gh.search".into(), r#"{"q":"x"}"#.into()));
        assert_eq!(
            shown[2].1.chars().count(),
            crate::agent::parser::TOOL_SUMMARY_CAP
        );
        assert!(shown[2].1.ends_with('…'));
        assert_eq!(shown[3], ("todo".into(), "2 todos".into()));
    }

    #[test]
    fn shell_wrapper_is_removed_only_when_it_is_one() {
        assert_eq!(unwrap_shell("/bin/bash -lc 'cargo test'"), "cargo test");
        assert_eq!(unwrap_shell("bash -c make"), "make");
        assert_eq!(
            unwrap_shell("/bin/zsh -lc 'echo '\\''x'\\'''"),
            "'echo '\\''x'\\'''"
        );
        assert_eq!(unwrap_shell("grep -c foo file"), "grep -c foo file");
        assert_eq!(unwrap_shell("ls"), "ls");
    }

    #[test]
    fn error_then_turn_failed_is_one_result() {
        let msg = "unexpected status 401 Unauthorized: Incorrect API key provided";
        let ev = decode(&[
            json!({"type": "turn.started"}),
            json!({"type": "error", "message": msg}),
            json!({"type": "turn.failed", "error": {"message": msg}}),
        ]);
        assert_eq!(ev, vec![result(true, msg, Usage::default(), Some(401))]);
        // A different final message is a result of its own; the last one wins.
        let ev = decode(&[
            json!({"type": "error", "message": "first"}),
            json!({"type": "turn.failed", "error": {"message": "second"}}),
            json!({"type": "turn.failed"}),
        ]);
        assert_eq!(
            ev,
            vec![
                result(true, "first", Usage::default(), None),
                result(true, "second", Usage::default(), None),
                result(true, "turn failed", Usage::default(), None),
            ]
        );
    }

    #[test]
    fn reconnecting_is_a_retry() {
        let ev = decode(&[
            json!({"type": "error", "message": "Reconnecting... 2/5 (stream disconnected before completion: Name does not resolve)"}),
            json!({"type": "error", "message": "Reconnecting... waiting for network (Connection failed: error sending request)"}),
            json!({"type": "error", "message": "Reconnecting... waiting for network (Connection failed)"}),
        ]);
        assert_eq!(
            ev,
            vec![
                AgentEvent::ApiRetry {
                    attempt: 2,
                    error: "stream disconnected before completion: Name does not resolve".into(),
                    status: None,
                },
                AgentEvent::ApiRetry {
                    attempt: 3,
                    error: "waiting for network (Connection failed: error sending request)".into(),
                    status: None,
                },
                AgentEvent::ApiRetry {
                    attempt: 4,
                    error: "waiting for network (Connection failed)".into(),
                    status: None,
                },
            ]
        );
        let s = parse(&[
            json!({"type": "error", "message": "Reconnecting... 1/1 (exceeded retry limit, last status: 429 Too Many Requests)"})
                .to_string(),
        ]);
        assert!(!s.result_seen);
        assert_eq!(s.rate_limited, None, "a retry is not the limit");
    }

    #[test]
    fn limits_the_shared_regex_misses_are_reported_here() {
        for msg in [
            "Quota exceeded. Check your plan and billing details.",
            "You've hit your spend cap for this workspace.",
        ] {
            let ev = decode(&[json!({"type": "turn.failed", "error": {"message": msg}})]);
            assert_eq!(
                ev[0],
                AgentEvent::RateLimited {
                    resets_at: None,
                    message: msg.into()
                }
            );
            assert!(matches!(ev[1], AgentEvent::Result { is_error: true, .. }));
            let s = parse(&[json!({"type": "turn.failed", "error": {"message": msg}}).to_string()]);
            assert_eq!(s.rate_limited, Some(None), "{msg}");
        }
        // A 429 in the text reaches the shared step as the status.
        let s = parse(&[json!({"type": "turn.failed", "error": {"message":
            "exceeded retry limit, last status: 429 Too Many Requests"}})
        .to_string()]);
        assert_eq!(s.rate_limited, Some(None));
        // An error that is no limit is not one.
        let s = parse(&[json!({"type": "turn.failed", "error": {"message":
            "We’re currently experiencing high demand, which may cause temporary errors."}})
        .to_string()]);
        assert!(s.is_error);
        assert_eq!(s.rate_limited, None);
    }

    #[test]
    fn token_count_warns_at_thresholds_and_limits_at_full() {
        let tc = |p: f64, s: f64| {
            json!({"id": "0", "msg": {"type": "token_count", "info": null, "rate_limits": {
                "primary": {"used_percent": p, "window_minutes": 300, "resets_at": 1795360000u64},
                "secondary": {"used_percent": s, "window_minutes": 10080, "resets_at": 1795900000u64}}}})
        };
        let ev = decode(&[
            tc(10.0, 20.0),
            tc(76.0, 20.0),
            tc(80.0, 20.0),
            json!({"type": "event_msg", "payload": {"type": "token_count", "rate_limits": {
                "primary": {"used_percent": 50.0}, "secondary": {"used_percent": 91.5, "resets_at": 1795900000u64}}}}),
            json!({"type": "token_count", "rate_limits": {"primary": {"used_percent": 100.0, "window_minutes": 300, "resets_at": 1795360000u64}}}),
            tc(100.0, 20.0),
        ]);
        assert_eq!(
            ev,
            vec![
                AgentEvent::LimitWarning {
                    resets_at: Some(1795360000),
                    used_percent: Some(76.0)
                },
                AgentEvent::LimitWarning {
                    resets_at: Some(1795900000),
                    used_percent: Some(91.5)
                },
                AgentEvent::RateLimited {
                    resets_at: Some(1795360000),
                    message: "Codex usage limit reached (300-minute window)".into()
                },
            ]
        );
        assert!(decode(&[json!({"type": "token_count", "rate_limits": null})]).is_empty());
    }

    #[test]
    fn bad_events_never_panic() {
        let mut p = OutputParser::for_backend(Backend::Codex);
        for line in [
            "{}",
            r#"{"type":7}"#,
            r#"{"type":"item.completed"}"#,
            r#"{"type":"item.completed","item":{"type":"agent_message"}}"#,
            r#"{"type":"item.started","item":{"type":"file_change","changes":[1,{"path":2}]}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":-5,"cached_input_tokens":9,"output_tokens":"x"}}"#,
            r#"{"type":"turn.failed","error":"flat"}"#,
            r#"{"type":"error","message":"Reconnecting... "}"#,
            r#"{"type":"error","message":"Reconnecting... x/y"}"#,
            r#"{"type":"token_count","rate_limits":{"primary":{"used_percent":"high"}}}"#,
            r#"{"type":"error","message":"status 999"}"#,
        ] {
            p.feed_line(line);
        }
        let s = p.finish();
        assert!(s.result_seen && s.is_error);
        // Negative and non-numeric counts are 0; the valid one stays.
        assert_eq!(
            s.usage,
            Usage {
                cache_read_input_tokens: 9,
                ..Usage::default()
            }
        );
    }

    // Golden tests on the recorded output of the real CLI.

    fn parse_text(text: &str) -> Summary {
        testkit::events(Backend::Codex, text).1
    }

    /// What each recording must give. `None` for a field means "must be
    /// absent", not "not checked".
    struct Want {
        text: &'static str,
        usage: Usage,
        /// Whether the stream names its thread (then the session is the
        /// `thread.started` line's ID, read here without the decoder).
        session: bool,
        limited: bool,
        is_error: bool,
        result_seen: bool,
        /// The status the decoder read from the text, seen in the events.
        status: Option<u64>,
    }

    const NO_USAGE: Usage = Usage {
        input_tokens: 0,
        output_tokens: 0,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
    };
    /// Two answers of the scripted API (`tests/it/fakeapi.rs`: 2,000 input
    /// of which 1,500 cached, 60 output, each).
    const TOOL_USAGE: Usage = Usage {
        input_tokens: 1000,
        output_tokens: 120,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 3000,
    };

    fn want(name: &str) -> Option<Want> {
        let err = |text, limited, status| Want {
            text,
            usage: NO_USAGE,
            session: true,
            limited,
            is_error: true,
            result_seen: true,
            status,
        };
        let ok = |usage| Want {
            text: testkit::ANSWER,
            usage,
            session: true,
            limited: false,
            is_error: false,
            result_seen: true,
            status: None,
        };
        Some(match name {
            "err-401" => err(
                "unexpected status 401 Unauthorized: The recording's API key is not valid., url: http://127.0.0.1:8080/v1/responses",
                false,
                Some(401),
            ),
            "err-429" => err(
                "exceeded retry limit, last status: 429 Too Many Requests",
                true,
                Some(429),
            ),
            "err-500" => err(
                "We’re currently experiencing high demand, which may cause temporary errors.",
                false,
                None,
            ),
            "err-quota" => err(
                "Quota exceeded. Check your plan and billing details.",
                true,
                None,
            ),
            "err-usage_limit" => err(
                "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 9:00 AM.",
                true,
                None,
            ),
            // Human mode: one plain line, no JSON, no session.
            "human-tool" => Want {
                text: testkit::ANSWER,
                usage: NO_USAGE,
                session: false,
                limited: false,
                is_error: false,
                result_seen: false,
                status: None,
            },
            // Stopped while Codex waited for a server: no result at all.
            "noserver-json" => Want {
                text: "",
                usage: NO_USAGE,
                session: true,
                limited: false,
                is_error: false,
                result_seen: false,
                status: None,
            },
            "text-json" => ok(Usage {
                input_tokens: 500,
                output_tokens: 60,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 1500,
            }),
            "tool-bypass" | "tool-default" | "tool-ww" => ok(TOOL_USAGE),
            _ => return None,
        })
    }

    /// The `thread_id` of the stream's `thread.started` line.
    fn thread_of(text: &str) -> Option<String> {
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["type"] == "thread.started")
            .and_then(|v| v["thread_id"].as_str().map(str::to_string))
    }

    #[test]
    fn every_recording_gives_what_it_shows() {
        let recs = testkit::recordings("codex");
        assert!(
            recs.len() >= 11,
            "expected every recording, saw {}",
            recs.len()
        );
        for (name, text) in &recs {
            let w = want(name).unwrap_or_else(|| panic!("no expectation for recording {name}"));
            let (events, s) = testkit::events(Backend::Codex, text);
            let results = events
                .iter()
                .filter(|e| matches!(e, AgentEvent::Result { .. }))
                .count();
            assert_eq!(results, usize::from(w.result_seen), "{name}: one result");
            assert_eq!(s.result_seen, w.result_seen, "{name}: result_seen");
            assert_eq!(s.is_error, w.is_error, "{name}: is_error");
            if w.result_seen {
                assert_eq!(s.result_text, w.text, "{name}: result text");
            }
            assert_eq!(s.last_line, w.text, "{name}: last line");
            assert_eq!(s.usage, w.usage, "{name}: usage");
            assert_eq!(s.cost_usd, None, "{name}: Codex reports no cost");
            let session = thread_of(text);
            assert_eq!(session.is_some(), w.session, "{name}: names its thread");
            assert_eq!(s.session_id, session, "{name}: session");
            // Codex's limit texts carry a local clock time at most, never an epoch.
            assert_eq!(s.rate_limited, w.limited.then_some(None), "{name}: limit");
            let limits = events
                .iter()
                .filter(|e| matches!(e, AgentEvent::RateLimited { .. }))
                .count();
            assert_eq!(
                limits,
                usize::from(w.limited),
                "{name}: limit reported once"
            );
            let status = events.iter().find_map(|e| match e {
                AgentEvent::Result {
                    api_error_status, ..
                } => *api_error_status,
                _ => None,
            });
            assert_eq!(status, w.status, "{name}: status");
            // No recording carries a tag: they answer `testkit::ANSWER`.
            assert_eq!(s.signals, Default::default(), "{name}: signals");
        }
    }

    #[test]
    fn recorded_tools_and_retries() {
        let recs = testkit::recordings("codex");
        let events = |name: &str| -> Vec<AgentEvent> {
            let text = &recs.iter().find(|(n, _)| n == name).unwrap().1;
            testkit::events(Backend::Codex, text).0
        };
        let tools = |evs: &[AgentEvent]| -> Vec<AgentEvent> {
            evs.iter()
                .filter(|e| matches!(e, AgentEvent::ToolUse { .. }))
                .cloned()
                .collect()
        };
        let echo = AgentEvent::ToolUse {
            name: "shell".into(),
            summary: testkit::TOOL.into(),
        };
        assert_eq!(tools(&events("tool-ww")), vec![echo.clone()]);
        assert_eq!(tools(&events("tool-bypass")), vec![echo]);
        // The read-only sandbox's refused command leaves no item (notes §2.2).
        assert!(tools(&events("tool-default")).is_empty());

        // Each "Reconnecting..." line is one retry, numbered on where the
        // text gives no count ("waiting for network").
        let text = &recs.iter().find(|(n, _)| n == "noserver-json").unwrap().1;
        let reconnects = text.matches("Reconnecting...").count() as u64;
        assert!(reconnects >= 3, "{text}");
        let retries: Vec<u64> = events("noserver-json")
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ApiRetry { attempt, .. } => Some(*attempt),
                _ => None,
            })
            .collect();
        assert_eq!(retries, (1..=reconnects).collect::<Vec<u64>>());
        let retry_500 = events("err-500").into_iter().find_map(|e| match e {
            AgentEvent::ApiRetry { attempt, error, .. } => Some((attempt, error)),
            _ => None,
        });
        assert_eq!(
            retry_500,
            Some((
                1,
                "We’re currently experiencing high demand, which may cause temporary errors."
                    .into()
            ))
        );
    }

    /// The recordings answer `testkit::ANSWER`; with the answer a prompt
    /// asks for, the same streams must give the tag.
    #[test]
    fn recorded_success_with_a_tag_is_done() {
        let recs = testkit::recordings("codex");
        let mut n = 0;
        for (name, text) in recs
            .iter()
            .filter(|(n, _)| n.ends_with("-json") || n.starts_with("tool-"))
        {
            if name == "noserver-json" {
                continue;
            }
            testkit::assert_tagged_answer_is_done(Backend::Codex, name, text);
            n += 1;
        }
        assert_eq!(n, 4);
    }

    /// stderr reaches the same parser, interleaved; it must not change the
    /// outcome the stream gave.
    #[test]
    fn recorded_stderr_changes_no_outcome() {
        let recs = testkit::recordings("codex");
        let dir = testkit::recording_dir("codex");
        for (name, text) in &recs {
            let Ok(err) = std::fs::read_to_string(dir.join(format!("{name}.stderr"))) else {
                continue;
            };
            let alone = parse_text(text);
            let both = parse_text(&format!("{err}\n{text}"));
            assert_eq!(both.rate_limited, alone.rate_limited, "{name}");
            assert_eq!(both.is_error, alone.is_error, "{name}");
            assert_eq!(both.signals, alone.signals, "{name}");
            assert_eq!(both.usage, alone.usage, "{name}");
        }
    }

    /// Parse speed of this decoder through the shared parser, on ~50 MB of
    /// recorded lines: `cargo test --release --lib agent::codex -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn throughput() {
        let recs = testkit::recordings("codex");
        let lines: Vec<&str> = recs
            .iter()
            .filter(|(n, _)| !n.starts_with("human"))
            .flat_map(|(_, t)| t.lines())
            .collect();
        let s = testkit::throughput(Backend::Codex, &lines);
        assert!(s.result_seen);
    }
}
