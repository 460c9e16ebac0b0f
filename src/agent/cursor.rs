//! Cursor: how ralph reads `cursor-agent -p --output-format stream-json`'s JSON event stream (see
//! the workspace notes `agents.md` §8). Pure: one JSON event in, our events out.
//!
//! No recording exists: the shapes come from the notes, Cursor's output-format
//! page and forum thread 156289 ("assistant events have multiple undocumented
//! forms"). With `--stream-partial-output` the same words arrive up to three
//! times: as deltas (`timestamp_ms`, no `model_call_id`), as the whole message
//! again (`model_call_id` and `timestamp_ms`), and as the whole response once
//! more at the end (no `timestamp_ms`). Without it, only the last two.

use serde_json::Value;

use super::event::{AgentEvent, Usage};
use super::gemini::{tool_summary, TextJoin};
use super::parser::str_of;

/// State kept across the events of one attempt.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    text: TextJoin,
    /// Deltas were seen: the whole-message repeats are then skipped.
    partial: bool,
}

impl Decoder {
    /// The end of the output: text still held (an agent killed mid-message)
    /// is let out, so its tags count.
    pub(crate) fn finish(&mut self) -> Vec<AgentEvent> {
        self.text.rest()
    }

    /// What one JSON event of the stream means; never panics.
    pub(crate) fn event(&mut self, ev: &Value) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        let kind = str_of(ev, "type");
        // Thinking deltas may interleave with text deltas; anything else
        // ends the message.
        if kind != "assistant" && kind != "thinking" {
            out.extend(self.text.flush().map(AgentEvent::Text));
        }
        match kind {
            "system" if str_of(ev, "subtype") == "init" => session(ev, &mut out),
            "assistant" => self.assistant(ev, &mut out),
            "tool_call" if str_of(ev, "subtype") == "started" => {
                if let Some(call) = ev.get("tool_call").and_then(tool_use) {
                    out.push(call);
                }
            }
            "result" => {
                session(ev, &mut out);
                out.push(AgentEvent::Result {
                    is_error: ev.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                    text: str_of(ev, "result").to_string(),
                    usage: ev.get("usage").map(usage).unwrap_or_default(),
                    cost_usd: None,
                    num_turns: None,
                    api_error_status: None,
                });
            }
            // `user` echoes the prompt (its tag examples must not count);
            // `tool_call` completed carries tool output; `thinking` is not
            // an answer.
            _ => {}
        }
        out
    }

    fn assistant(&mut self, ev: &Value, out: &mut Vec<AgentEvent>) {
        let text = message_text(ev);
        let delta = ev.get("timestamp_ms").is_some_and(|t| !t.is_null());
        let whole_message = ev.get("model_call_id").is_some_and(|m| !m.is_null());
        if !delta {
            // The closing echo of the whole response. Without deltas its
            // last message may be new, but `result.result` repeats all of
            // the text and is scanned too.
            out.extend(self.text.flush().map(AgentEvent::Text));
        } else if whole_message {
            out.extend(self.text.flush().map(AgentEvent::Text));
            if !self.partial {
                out.extend(self.text.push(&text).map(AgentEvent::Text));
                out.extend(self.text.flush().map(AgentEvent::Text));
            }
        } else {
            self.partial = true;
            out.extend(self.text.push(&text).map(AgentEvent::Text));
        }
    }
}

fn session(ev: &Value, out: &mut Vec<AgentEvent>) {
    let id = str_of(ev, "session_id");
    if !id.is_empty() {
        out.push(AgentEvent::SessionId(id.to_string()));
    }
}

/// The text blocks of an `assistant` event, in order.
fn message_text(ev: &Value) -> String {
    let blocks = ev.pointer("/message/content").and_then(Value::as_array);
    blocks
        .into_iter()
        .flatten()
        .filter(|b| str_of(b, "type") == "text")
        .map(|b| str_of(b, "text"))
        .collect()
}

/// `{"shellToolCall": {"args": {"command": ...}}}`: the tool is the one key,
/// its name without the `ToolCall` suffix.
fn tool_use(call: &Value) -> Option<AgentEvent> {
    let (key, body) = call.as_object()?.iter().next()?;
    let (name, args) = match key.as_str() {
        // MCP and other generic tools.
        "function" => (str_of(body, "name").to_string(), body.get("arguments")),
        k => (
            k.strip_suffix("ToolCall").unwrap_or(k).to_string(),
            body.get("args"),
        ),
    };
    let summary = match args {
        // A generic tool's arguments are a JSON string.
        Some(Value::String(s)) => tool_summary(serde_json::from_str::<Value>(s).ok().as_ref()),
        a => tool_summary(a),
    };
    Some(AgentEvent::ToolUse { name, summary })
}

fn usage(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: n("inputTokens"),
        output_tokens: n("outputTokens"),
        cache_creation_input_tokens: n("cacheWriteTokens"),
        cache_read_input_tokens: n("cacheReadTokens"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::parser::Summary;
    use crate::agent::testkit;
    use crate::agent::Backend;
    use serde_json::json;

    const SID: &str = "c6b62c6f-7ead-4fd6-9922-e952131177ff";

    fn decode(events: &[Value]) -> Vec<AgentEvent> {
        testkit::decode(Backend::Cursor, events)
    }

    fn parse(events: &[Value]) -> Summary {
        testkit::parse(Backend::Cursor, events.iter().map(Value::to_string))
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

    fn init() -> Value {
        json!({"type": "system", "subtype": "init", "apiKeySource": "login", "cwd": "/w",
               "session_id": SID, "model": "Auto", "permissionMode": "default"})
    }

    fn user(text: &str) -> Value {
        json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]},
               "session_id": SID})
    }

    fn assistant(text: &str, ts: Option<u64>, model_call: Option<&str>) -> Value {
        let mut ev = json!({"type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            "session_id": SID});
        if let Some(t) = ts {
            ev["timestamp_ms"] = json!(t);
        }
        if let Some(m) = model_call {
            ev["model_call_id"] = json!(m);
        }
        ev
    }

    fn delta(text: &str) -> Value {
        assistant(text, Some(1_770_823_434_041), None)
    }

    fn shell_started(command: &str) -> Value {
        json!({"type": "tool_call", "subtype": "started", "call_id": "call_1\nfc_2",
               "tool_call": {"shellToolCall": {"args": {"command": command, "workingDirectory": "/w",
                                                         "timeout": 120000}}},
               "model_call_id": "m1", "session_id": SID, "timestamp_ms": 1_770_823_449_274u64})
    }

    fn shell_completed(stdout: &str) -> Value {
        json!({"type": "tool_call", "subtype": "completed", "call_id": "call_1\nfc_2",
               "tool_call": {"shellToolCall": {"args": {"command": "x"},
                   "result": {"success": {"exitCode": 0, "stdout": stdout, "stderr": ""}}}},
               "model_call_id": "m1", "session_id": SID, "timestamp_ms": 1_770_823_449_565u64})
    }

    fn result(text: &str, is_error: bool) -> Value {
        json!({"type": "result", "subtype": if is_error { "error" } else { "success" },
               "duration_ms": 4986, "duration_api_ms": 4986, "is_error": is_error,
               "result": text, "session_id": SID, "request_id": "r1",
               "usage": {"inputTokens": 1200, "outputTokens": 80, "cacheReadTokens": 9000,
                         "cacheWriteTokens": 300}})
    }

    /// A `--stream-partial-output` run in the four assistant forms of the forum
    /// thread: the text must come out exactly once.
    fn partial_run() -> Vec<Value> {
        vec![
            init(),
            user("Reply <ralph>DONE <id></ralph> when done"),
            json!({"type": "thinking", "subtype": "delta", "text": "hmm <ralph>DONE 9.9</ralph>",
                   "session_id": SID, "timestamp_ms": 1}),
            delta("Running the te"),
            json!({"type": "thinking", "subtype": "completed", "session_id": SID, "timestamp_ms": 2}),
            delta("sts.\n"),
            assistant("Running the tests.\n", Some(3), Some("m1")),
            shell_started("cargo test"),
            shell_completed("<ralph>DONE 7.7</ralph>"),
            delta("All green.\n<ralph>DO"),
            delta("NE 1.1</ralph>"),
            assistant("All green.\n<ralph>DONE 1.1</ralph>", Some(4), Some("m2")),
            assistant(
                "Running the tests.\nAll green.\n<ralph>DONE 1.1</ralph>",
                None,
                None,
            ),
            result(
                "Running the tests.\nAll green.\n<ralph>DONE 1.1</ralph>",
                false,
            ),
        ]
    }

    #[test]
    fn partial_output_text_comes_out_once() {
        let out = decode(&partial_run());
        assert_eq!(
            texts(&out),
            [
                "Running the tests.\n",
                "All green.\n",
                "<ralph>DONE 1.1</ralph>"
            ]
        );
        assert_eq!(
            out.iter()
                .filter(|e| matches!(e, AgentEvent::ToolUse { .. }))
                .collect::<Vec<_>>(),
            [&AgentEvent::ToolUse {
                name: "shell".into(),
                summary: "cargo test".into()
            }]
        );
        let s = parse(&partial_run());
        assert_eq!(s.signals.done.as_deref(), Some("1.1"));
        assert_eq!(s.session_id.as_deref(), Some(SID));
        assert!(s.result_seen && !s.is_error);
    }

    #[test]
    fn a_tag_split_across_deltas_is_found_without_the_result() {
        let mut run = partial_run();
        // Killed after the message: no closing echo, no result.
        run.truncate(12);
        let s = parse(&run);
        assert_eq!(s.signals.done.as_deref(), Some("1.1"));
        assert!(!s.result_seen);
    }

    #[test]
    fn prompt_tool_output_and_thinking_are_not_text() {
        let s = parse(&[
            init(),
            user("<ralph>DONE 1.1</ralph>"),
            json!({"type": "thinking", "subtype": "delta", "text": "<ralph>DONE 1.1</ralph>", "timestamp_ms": 1}),
            shell_started("echo '<ralph>DONE 1.1</ralph>'"),
            shell_completed("<ralph>DONE 1.1</ralph>"),
        ]);
        assert_eq!(s.signals.done, None);
    }

    #[test]
    fn without_partial_output_whole_messages_are_text() {
        let run = [
            init(),
            assistant("Let me check.", Some(3), Some("m1")),
            shell_started("ls"),
            assistant("Checked.\n<ralph>DONE 2.1</ralph>", None, None),
            result("Let me check.Checked.\n<ralph>DONE 2.1</ralph>", false),
        ];
        let out = decode(&run);
        // The closing message is skipped; the result text still carries it.
        assert_eq!(texts(&out), ["Let me check."]);
        assert_eq!(parse(&run).signals.done.as_deref(), Some("2.1"));
    }

    #[test]
    fn result_gives_usage_and_session_without_cost() {
        let out = decode(&[result("ok", false)]);
        assert_eq!(
            out,
            vec![
                AgentEvent::SessionId(SID.into()),
                AgentEvent::Result {
                    is_error: false,
                    text: "ok".into(),
                    usage: Usage {
                        input_tokens: 1200,
                        output_tokens: 80,
                        cache_creation_input_tokens: 300,
                        cache_read_input_tokens: 9000,
                    },
                    cost_usd: None,
                    num_turns: None,
                    api_error_status: None,
                }
            ]
        );
        let s = parse(&[result("You've hit your usage limit", true)]);
        assert!(s.is_error);
        // The shared rule for error results applies.
        assert_eq!(s.rate_limited, Some(None));
    }

    #[test]
    fn init_gives_the_session_id() {
        assert_eq!(decode(&[init()]), vec![AgentEvent::SessionId(SID.into())]);
        assert!(decode(&[json!({"type": "system", "subtype": "init"})]).is_empty());
    }

    #[test]
    fn tool_names_and_summaries() {
        let started =
            |call: Value| json!({"type": "tool_call", "subtype": "started", "tool_call": call});
        let out = decode(&[
            started(json!({"readToolCall": {"args": {"path": "/w/src/main.rs"}}})),
            started(json!({"grepToolCall": {"args": {"pattern": "fn main", "path": "/w"}}})),
            started(
                json!({"function": {"name": "mcp_fetch", "arguments": "{\"url\":\"https://x.y\"}"}}),
            ),
            started(json!({"lsToolCall": {}})),
            started(json!({})),
            started(json!("x")),
        ]);
        let got: Vec<(String, String)> = out
            .into_iter()
            .map(|e| match e {
                AgentEvent::ToolUse { name, summary } => (name, summary),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        let want = [
            ("read", "/w/src/main.rs"),
            ("grep", "fn main"),
            ("mcp_fetch", "https://x.y"),
            ("ls", ""),
        ];
        assert_eq!(
            got,
            want.map(|(n, s)| (n.to_string(), s.to_string())).to_vec()
        );
    }

    #[test]
    fn bad_events_never_panic() {
        let mut d = Decoder::default();
        for ev in [
            json!(null),
            json!({"type": "assistant"}),
            json!({"type": "assistant", "message": {"content": "x"}, "timestamp_ms": "x"}),
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": 5}]}, "timestamp_ms": 1}),
            json!({"type": "result", "usage": "x", "is_error": "yes"}),
            json!({"type": "result", "usage": {"inputTokens": -3}}),
            json!({"type": "tool_call", "subtype": "started", "tool_call": {"function": {"arguments": "{"}}}),
        ] {
            d.event(&ev);
        }
    }

    /// Parse speed on ~50 MB of the documented event shapes (no recording
    /// exists): `cargo test --release --lib agent::cursor -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn throughput() {
        let prose =
            "the parser keeps every line short and the merge queue lands one story ".repeat(40);
        let lines: Vec<String> = [
            init(),
            delta(&prose),
            assistant(&prose, None, Some("m1")),
            shell_started("cargo test"),
            shell_completed(&prose),
            result("done <ralph>DONE 1.1</ralph>", false),
        ]
        .iter()
        .map(Value::to_string)
        .collect();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let s = testkit::throughput(Backend::Cursor, &lines);
        assert!(s.result_seen);
    }
}
