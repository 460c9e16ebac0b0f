//! Antigravity: how ralph reads `agy`'s JSON event stream (see
//! the workspace notes `agents.md` §8). Pure: one JSON event in, our events out.
//!
//! No recording exists here. The shapes come from the 1.1.8 release notes
//! and stream-json captures of agy 1.1.x published with other projects:
//! `{"event": "init", "conversation_id", "init": {..}}`, then
//! `{"event": "step_update", "step_update": {step_index, state
//! (ACTIVE|DONE|ERROR), step_type (user_input|system_message|agent_response|
//! tool|checkpoint|..), text_delta, tool_name, tool_info{name, parameters},
//! usage, error}}`, and one `{"event": "result", "result": {status
//! (SUCCESS, OK before 1.1.22; ERROR|FAILURE|CANCELLED|TIMEOUT), response,
//! error, num_turns, usage{input_tokens, output_tokens, thinking_tokens,
//! cache_read_tokens, total_tokens}}}`.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::event::{AgentEvent, Usage};
use super::gemini::{tool_summary, TextJoin};
use super::parser::str_of;

/// State kept across the events of one attempt.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    text: TextJoin,
    /// The `agent_response` step whose deltas `text` holds.
    text_step: Option<u64>,
    /// Tool steps already shown: a tool step is reported ACTIVE, then again
    /// DONE or ERROR, and sometimes only DONE.
    tools_seen: HashSet<u64>,
}

/// Usage-limit texts (notes §8). Only applied to error texts. A 503
/// `MODEL_CAPACITY_EXHAUSTED` is transient and deliberately not matched.
static LIMIT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)quota limit exceeded|refreshes in \d|quota exceeded|exhausted your (?:capacity|quota)|resource[_ ]exhausted|rate limit exceeded|\b429\b",
    )
    .unwrap()
});

impl Decoder {
    /// The end of the output: text still held (an agent killed mid-message)
    /// is let out, so its tags count.
    pub(crate) fn finish(&mut self) -> Vec<AgentEvent> {
        self.text.rest()
    }

    /// What one JSON event of the stream means; never panics.
    pub(crate) fn event(&mut self, ev: &Value) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        let kind = ev
            .get("event")
            .or_else(|| ev.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let step = ev.get("step_update").filter(|_| kind == "step_update");
        let step_type = step.map_or("", |s| str_of(s, "step_type"));
        let step_index = step
            .and_then(|s| s.get("step_index"))
            .and_then(Value::as_u64);
        // The deltas of one response end with any other step or event.
        if step_type != "agent_response" || step_index != self.text_step {
            out.extend(self.text.flush().map(AgentEvent::Text));
        }
        match (kind, step) {
            ("init", _) => {
                let id = [
                    str_of(ev, "conversation_id"),
                    str_of(&ev["init"], "conversation_id"),
                ]
                .into_iter()
                .find(|s| !s.is_empty());
                if let Some(id) = id {
                    out.push(AgentEvent::SessionId(id.to_string()));
                }
            }
            ("step_update", Some(s)) => self.step(s, step_type, step_index, &mut out),
            ("result", _) => result(&ev["result"], &mut out),
            ("error", _) => {
                let message = error_text(ev);
                if LIMIT_RE.is_match(&message) {
                    out.push(limited(&message));
                }
            }
            _ => {}
        }
        out
    }

    fn step(&mut self, s: &Value, step_type: &str, index: Option<u64>, out: &mut Vec<AgentEvent>) {
        let state = str_of(s, "state");
        match step_type {
            "agent_response" => {
                self.text_step = index;
                out.extend(
                    self.text
                        .push(str_of(s, "text_delta"))
                        .map(AgentEvent::Text),
                );
                if state != "ACTIVE" {
                    out.extend(self.text.flush().map(AgentEvent::Text));
                }
                let error = error_text(s);
                if LIMIT_RE.is_match(&error) {
                    out.push(limited(&error));
                }
            }
            "tool" if index.is_none_or(|i| self.tools_seen.insert(i)) => {
                let info = &s["tool_info"];
                let name = [str_of(info, "name"), str_of(s, "tool_name")]
                    .into_iter()
                    .find(|n| !n.is_empty())
                    .unwrap_or("tool")
                    .to_string();
                let summary = tool_summary(info.get("parameters"));
                out.push(AgentEvent::ToolUse { name, summary });
            }
            // `user_input` echoes the prompt, whose tag examples must not
            // count; system messages and checkpoints are not the agent's words.
            _ => {}
        }
    }
}

fn result(r: &Value, out: &mut Vec<AgentEvent>) {
    let id = str_of(r, "conversation_id");
    if !id.is_empty() {
        out.push(AgentEvent::SessionId(id.to_string()));
    }
    let status = str_of(r, "status");
    let is_error = !(status.eq_ignore_ascii_case("success") || status.eq_ignore_ascii_case("ok"));
    let mut text = str_of(r, "response").to_string();
    if is_error {
        let error = error_text(r);
        if !error.is_empty() {
            text = error;
        }
        if LIMIT_RE.is_match(&text) {
            out.push(limited(&text));
        }
    }
    out.push(AgentEvent::Result {
        is_error,
        text,
        usage: usage(&r["usage"]),
        cost_usd: None,
        num_turns: r.get("num_turns").and_then(Value::as_u64),
        api_error_status: None,
    });
}

/// The reset is only ever relative ("Refreshes in 6 days and 18 hours")
/// and agy's events carry no timestamp to anchor it: the caller, which has
/// a clock, must read it from the message.
fn limited(message: &str) -> AgentEvent {
    AgentEvent::RateLimited {
        resets_at: None,
        message: message.trim().to_string(),
    }
}

/// `error` is a string in `result` and `{type, message}` in steps.
fn error_text(v: &Value) -> String {
    match v.get("error") {
        Some(Value::String(s)) => s.clone(),
        Some(e) => str_of(e, "message").to_string(),
        None => String::new(),
    }
}

/// Gemini's accounting, as the Gemini CLI reports it too: `input_tokens`
/// includes the cached part, and thinking is counted apart from the output
/// (`total_tokens` = input + output). Thinking is billed as output, and
/// Claude's `output_tokens` include it, so it is added there.
fn usage(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let cached = n("cache_read_tokens");
    Usage {
        input_tokens: n("input_tokens").saturating_sub(cached),
        output_tokens: n("output_tokens") + n("thinking_tokens"),
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: cached,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::parser::Summary;
    use crate::agent::testkit;
    use crate::agent::Backend;
    use serde_json::json;

    const CID: &str = "4df4b685-e326-4498-b423-4732961ac2e4";

    fn decode(events: &[Value]) -> Vec<AgentEvent> {
        testkit::decode(Backend::Agy, events)
    }

    fn parse(events: &[Value]) -> Summary {
        testkit::parse(Backend::Agy, events.iter().map(Value::to_string))
    }

    fn init() -> Value {
        json!({"event": "init", "conversation_id": CID,
               "init": {"cwd": "/w", "tools": ["run_command", "view_file"], "permission_mode": "auto"}})
    }

    fn step(index: u64, state: &str, step_type: &str, extra: Value) -> Value {
        let mut s = json!({"conversation_id": CID, "step_index": index, "state": state,
                           "step_type": step_type});
        for (k, v) in extra.as_object().unwrap() {
            s[k] = v.clone();
        }
        json!({"event": "step_update", "step_update": s})
    }

    fn text(index: u64, state: &str, delta: &str) -> Value {
        step(index, state, "agent_response", json!({"text_delta": delta}))
    }

    fn tool(index: u64, state: &str, name: &str, params: Value) -> Value {
        step(
            index,
            state,
            "tool",
            json!({"tool_name": name, "tool_info": {"name": name, "parameters": params}}),
        )
    }

    fn result(status: &str, response: &str, error: Option<&str>) -> Value {
        let mut r = json!({"conversation_id": CID, "status": status, "response": response,
            "duration_seconds": 8.01, "num_turns": 2,
            "usage": {"input_tokens": 44909, "output_tokens": 610, "thinking_tokens": 395,
                      "cache_read_tokens": 20000, "total_tokens": 45519}});
        if let Some(e) = error {
            r["error"] = json!(e);
        }
        json!({"event": "result", "result": r})
    }

    fn texts(events: &[AgentEvent]) -> Vec<&str> {
        events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn init_gives_the_session_id() {
        assert_eq!(decode(&[init()]), vec![AgentEvent::SessionId(CID.into())]);
        let nested = json!({"event": "init", "init": {"conversation_id": "c2"}});
        assert_eq!(decode(&[nested]), vec![AgentEvent::SessionId("c2".into())]);
        assert!(decode(&[json!({"event": "init", "init": {}})]).is_empty());
    }

    #[test]
    fn a_run_with_text_tools_and_result() {
        let run = [
            init(),
            step(
                0,
                "DONE",
                "user_input",
                json!({"text_delta": "Say <ralph>DONE <id></ralph>"}),
            ),
            step(
                1,
                "DONE",
                "system_message",
                json!({"text_delta": "<ralph>DONE 0.0</ralph>"}),
            ),
            text(2, "ACTIVE", "Reading the "),
            text(2, "DONE", "notes.\n"),
            tool(
                3,
                "ACTIVE",
                "view_file",
                json!({"AbsolutePath": "/w/notes.md"}),
            ),
            step(
                3,
                "DONE",
                "tool",
                json!({"tool_name": "view_file", "output": "<ralph>DONE 6.6</ralph>"}),
            ),
            tool(
                4,
                "DONE",
                "run_command",
                json!({"CommandLine": "cargo test"}),
            ),
            text(5, "ACTIVE", "All green.\n<ralph>DO"),
            text(5, "ACTIVE", "NE 1.1</ralph>"),
            text(6, "ACTIVE", "Bye."),
            result("SUCCESS", "All green.\n<ralph>DONE 1.1</ralph>", None),
        ];
        let out = decode(&run);
        assert_eq!(
            texts(&out),
            [
                "Reading the notes.\n",
                "All green.\n",
                "<ralph>DONE 1.1</ralph>",
                "Bye."
            ]
        );
        let tools: Vec<_> = out
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ToolUse { name, summary } => Some((name.as_str(), summary.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(
            tools,
            [("view_file", "/w/notes.md"), ("run_command", "cargo test")]
        );
        let s = parse(&run);
        assert_eq!(s.signals.done.as_deref(), Some("1.1"));
        assert_eq!(s.session_id.as_deref(), Some(CID));
        assert!(s.result_seen && !s.is_error);
        assert_eq!(s.num_turns, Some(2));
        assert_eq!(
            s.usage,
            Usage {
                input_tokens: 24909,
                output_tokens: 1005,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 20000,
            }
        );
        assert_eq!(s.cost_usd, None);
    }

    #[test]
    fn prompt_echo_and_tool_output_are_not_text() {
        let s = parse(&[
            init(),
            step(
                0,
                "DONE",
                "user_input",
                json!({"text_delta": "<ralph>DONE 1.1</ralph>"}),
            ),
            step(
                1,
                "DONE",
                "tool",
                json!({"output": "<ralph>DONE 1.1</ralph>"}),
            ),
        ]);
        assert_eq!(s.signals.done, None);
    }

    #[test]
    fn error_results() {
        let out = decode(&[result(
            "ERROR",
            "",
            Some("permission check failed for command \"echo hi\": user denied permission"),
        )]);
        assert!(matches!(
            &out[..],
            [AgentEvent::SessionId(_), AgentEvent::Result { is_error: true, text, .. }]
                if text.starts_with("permission check failed")
        ));
        for status in ["FAILURE", "CANCELLED", "TIMEOUT", "WAT", ""] {
            let s = parse(&[result(status, "partial answer", None)]);
            assert!(s.is_error, "{status}");
            assert_eq!(s.result_text, "partial answer");
        }
        assert!(!parse(&[result("OK", "hi", None)]).is_error);
    }

    #[test]
    fn quota_texts_are_limits() {
        let s = parse(&[result(
            "ERROR",
            "",
            Some("Model quota limit exceeded. Refreshes in 6 days and 18 hours."),
        )]);
        assert_eq!(s.rate_limited, Some(None));
        assert!(s.is_error);
        let s = parse(&[step(
            2,
            "ERROR",
            "agent_response",
            json!({"error": {"type": "API_ERROR", "message": "429 RESOURCE_EXHAUSTED"}}),
        )]);
        assert_eq!(s.rate_limited, Some(None));
        // Capacity is transient, and a tool's error is the tool's.
        let s = parse(&[result(
            "ERROR",
            "",
            Some("503 MODEL_CAPACITY_EXHAUSTED: no capacity available for model"),
        )]);
        assert_eq!(s.rate_limited, None);
        let s = parse(&[step(
            7,
            "ERROR",
            "tool",
            json!({"tool_name": "run_command", "error": {"message": "quota exceeded"}}),
        )]);
        assert_eq!(s.rate_limited, None);
        // A successful answer about quotas is an answer.
        let s = parse(&[result(
            "SUCCESS",
            "Added handling for: quota exceeded",
            None,
        )]);
        assert_eq!(s.rate_limited, None);
    }

    #[test]
    fn bad_events_never_panic() {
        let mut d = Decoder::default();
        for ev in [
            json!(null),
            json!({"event": 1}),
            json!({"event": "step_update"}),
            json!({"event": "step_update", "step_update": "x"}),
            json!({"event": "step_update", "step_update": {"step_type": "tool", "tool_info": 5}}),
            json!({"event": "step_update", "step_update": {"step_type": "agent_response", "text_delta": 5, "error": 3}}),
            json!({"event": "result"}),
            json!({"event": "result", "result": {"usage": {"input_tokens": 1, "cache_read_tokens": 9}}}),
            json!({"event": "init", "init": "x"}),
        ] {
            d.event(&ev);
        }
    }

    /// Parse speed on ~50 MB of the documented event shapes (no recording
    /// exists): `cargo test --release --lib agent::agy -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn throughput() {
        let prose =
            "the parser keeps every line short and the merge queue lands one story ".repeat(40);
        let lines: Vec<String> = [
            init(),
            text(1, "ACTIVE", &prose),
            text(1, "DONE", &prose),
            tool(
                2,
                "ACTIVE",
                "run_command",
                json!({"CommandLine": "cargo test"}),
            ),
            step(
                2,
                "DONE",
                "tool",
                json!({"tool_name": "run_command", "output": prose}),
            ),
            result("SUCCESS", "done <ralph>DONE 1.1</ralph>", None),
        ]
        .iter()
        .map(Value::to_string)
        .collect();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let s = testkit::throughput(Backend::Agy, &lines);
        assert!(s.result_seen);
    }
}
