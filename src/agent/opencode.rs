//! opencode: how ralph reads `opencode run --format json`'s JSON event stream (see
//! the workspace notes `agents.md` §5, §6.3, §8). Pure: one JSON event in, our events out.
//!
//! `opencode run` prints only its main session's parts (sub-agents run in
//! sessions of their own), each once it is complete: `step_start`, `text`,
//! `tool_use` (call and result together), `step_finish` (that step's tokens
//! and cost), `reasoning` (with `--thinking`), and `error`. There is no
//! final summary event.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::event::{AgentEvent, Usage};
use super::parser::{one_line, str_of};

/// opencode's limit wordings that the shared limit regex does not know
/// (notes §8: "Free usage exceeded", "Subscription quota exceeded").
/// "Monthly usage limit reached" is the shared regex's already.
static LIMIT_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)usage exceeded|quota exceeded").unwrap());

/// State kept across the events of one attempt.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    /// Reported once; every event repeats it.
    session: Option<String>,
    /// The answer, for the result a finished run is given.
    last_text: String,
}

impl Decoder {
    /// What one JSON event of the stream means; never panics.
    pub(crate) fn event(&mut self, ev: &Value) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        if let Some(id) = ev.get("sessionID").and_then(Value::as_str) {
            if !id.is_empty() && self.session.as_deref() != Some(id) {
                self.session = Some(id.to_string());
                out.push(AgentEvent::SessionId(id.to_string()));
            }
        }
        let part = ev.get("part").unwrap_or(&Value::Null);
        match str_of(ev, "type") {
            "text" => {
                let text = str_of(part, "text");
                if !text.trim().is_empty() {
                    self.last_text = text.to_string();
                    out.push(AgentEvent::Text(text.to_string()));
                }
            }
            "tool_use" => {
                let state = part.get("state").unwrap_or(&Value::Null);
                out.push(AgentEvent::ToolUse {
                    name: str_of(part, "tool").to_string(),
                    summary: tool_summary(state),
                });
            }
            "step_finish" => {
                let tokens = part.get("tokens").unwrap_or(&Value::Null);
                out.push(AgentEvent::Usage {
                    usage: Usage {
                        input_tokens: count(tokens, "/input"),
                        output_tokens: count(tokens, "/output"),
                        cache_creation_input_tokens: count(tokens, "/cache/write"),
                        cache_read_input_tokens: count(tokens, "/cache/read"),
                    },
                    cost_usd: part.get("cost").and_then(Value::as_f64),
                });
                // A step that ends in "stop" asked for no tool: the run loop
                // is over and the process exits next. Tokens and cost went in
                // the `Usage` above; the result only closes the run.
                if str_of(part, "reason") == "stop" {
                    out.push(AgentEvent::Result {
                        is_error: false,
                        text: self.last_text.clone(),
                        usage: Usage::default(),
                        cost_usd: None,
                        num_turns: None,
                        api_error_status: None,
                    });
                }
            }
            "error" => out.extend(self.error(ev)),
            _ => {}
        }
        out
    }

    fn error(&mut self, ev: &Value) -> Vec<AgentEvent> {
        let error = ev.get("error").unwrap_or(&Value::Null);
        let data = error.get("data").unwrap_or(&Value::Null);
        let text = [data.get("message"), error.get("message"), error.get("name")]
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find(|t| !t.trim().is_empty())
            .unwrap_or("opencode reported an error")
            .to_string();
        let status = data.get("statusCode").and_then(Value::as_u64);
        let mut out = Vec::with_capacity(2);
        let resets_at = if status == Some(429) {
            retry_at(ev, data.get("responseHeaders"))
        } else {
            None
        };
        // The shared step marks a 429 itself but knows no reset time, and
        // not these words.
        if resets_at.is_some() || LIMIT_RE.is_match(&text) {
            out.push(AgentEvent::RateLimited {
                resets_at,
                message: text.trim().to_string(),
            });
        }
        out.push(AgentEvent::Result {
            is_error: true,
            text,
            usage: Usage::default(),
            cost_usd: None,
            num_turns: None,
            api_error_status: status,
        });
        out
    }
}

fn count(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// When the limit a 429 reported lifts, in Unix seconds: the provider's
/// reset header, or its `retry-after` counted from the event's own
/// timestamp (the decoder has no clock, and needs none).
fn retry_at(ev: &Value, headers: Option<&Value>) -> Option<u64> {
    let headers = headers?.as_object()?;
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.as_str())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    if let Some(epoch) = header("anthropic-ratelimit-unified-reset") {
        return Some(epoch as u64);
    }
    let now_ms = ev.get("timestamp").and_then(Value::as_u64)?;
    let wait_ms = header("retry-after-ms").or_else(|| header("retry-after").map(|s| s * 1000.0))?;
    // In f64, whose `as u64` saturates: a header of 1e300 must not overflow.
    Some(((now_ms as f64 + wait_ms) / 1000.0).ceil() as u64)
}

/// The command, file or query a tool acted on (opencode's tool inputs use
/// camelCase: `filePath`), else the title opencode gave the call.
fn tool_summary(state: &Value) -> String {
    const KEYS: [&str; 8] = [
        "command",
        "filePath",
        "path",
        "pattern",
        "url",
        "query",
        "description",
        "prompt",
    ];
    let input = state.get("input").unwrap_or(&Value::Null);
    let text = KEYS
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .unwrap_or_else(|| str_of(state, "title"));
    one_line(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::parser::{OutputParser, Summary};
    use crate::agent::testkit;
    use crate::agent::Backend;
    use serde_json::json;

    const SES: &str = "ses_1";

    fn decode(lines: &[Value]) -> Vec<AgentEvent> {
        testkit::decode(Backend::Opencode, lines)
    }

    fn parse(lines: &[Value]) -> Summary {
        testkit::parse(Backend::Opencode, lines.iter().map(Value::to_string))
    }

    fn text(t: &str) -> Value {
        json!({"type": "text", "sessionID": SES, "part": {"type": "text", "text": t}})
    }

    fn step_finish(reason: &str, input: u64, cost: f64) -> Value {
        json!({"type": "step_finish", "sessionID": SES, "part": {"type": "step-finish", "reason": reason,
            "tokens": {"total": 0, "input": input, "output": 10, "reasoning": 3, "cache": {"write": 20, "read": 500}},
            "cost": cost}})
    }

    fn ok(text: &str) -> AgentEvent {
        AgentEvent::Result {
            is_error: false,
            text: text.into(),
            usage: Usage::default(),
            cost_usd: None,
            num_turns: None,
            api_error_status: None,
        }
    }

    #[test]
    fn session_is_reported_once() {
        let ev = decode(&[
            json!({"type": "step_start", "sessionID": SES, "part": {}}),
            json!({"type": "step_start", "sessionID": SES, "part": {}}),
            json!({"type": "step_start", "sessionID": "", "part": {}}),
        ]);
        assert_eq!(ev, vec![AgentEvent::SessionId(SES.into())]);
    }

    #[test]
    fn text_is_agent_text_and_the_stop_step_closes_the_run() {
        let ev = decode(&[
            text("Working."),
            text("  "),
            step_finish("tool-calls", 100, 0.5),
            text("<ralph>DONE 1.1</ralph>"),
            step_finish("stop", 200, 0.25),
        ]);
        let usage = |input| AgentEvent::Usage {
            usage: Usage {
                input_tokens: input,
                output_tokens: 10,
                cache_creation_input_tokens: 20,
                cache_read_input_tokens: 500,
            },
            cost_usd: Some(if input == 100 { 0.5 } else { 0.25 }),
        };
        assert_eq!(
            ev,
            vec![
                AgentEvent::SessionId(SES.into()),
                AgentEvent::Text("Working.".into()),
                usage(100),
                AgentEvent::Text("<ralph>DONE 1.1</ralph>".into()),
                usage(200),
                ok("<ralph>DONE 1.1</ralph>"),
            ]
        );
        let s = parse(&[
            text("<ralph>DONE 1.1</ralph>"),
            step_finish("stop", 200, 0.25),
        ]);
        assert_eq!(s.signals.done.as_deref(), Some("1.1"));
        assert!(s.result_seen && !s.is_error);
        assert_eq!(s.result_text, "<ralph>DONE 1.1</ralph>");
    }

    #[test]
    fn a_step_cut_short_is_no_result() {
        for reason in ["tool-calls", "length", "error", ""] {
            let s = parse(&[text("partial"), step_finish(reason, 1, 0.0)]);
            assert!(!s.result_seen, "{reason}");
        }
    }

    #[test]
    fn tool_use_is_one_line_never_text() {
        let long = "y ".repeat(60);
        let ev = decode(&[
            json!({"type": "tool_use", "part": {"type": "tool", "tool": "bash", "state": {"status": "completed",
                "input": {"command": "echo '<ralph>DONE 1.1</ralph>'\ncat x", "description": "say"},
                "output": "<ralph>DONE 1.1</ralph>\n"}}}),
            json!({"type": "tool_use", "part": {"tool": "edit", "state": {"status": "error",
                "input": {"filePath": "/w/src/lib.rs", "oldString": "a"}, "error": "no match"}}}),
            json!({"type": "tool_use", "part": {"tool": "todowrite", "state": {"input": {"todos": []}, "title": "2 todos"}}}),
            json!({"type": "tool_use", "part": {"tool": "grep", "state": {"input": {"pattern": long}}}}),
        ]);
        let shown: Vec<(String, String)> = ev
            .into_iter()
            .map(|e| match e {
                AgentEvent::ToolUse { name, summary } => (name, summary),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            shown[0],
            ("bash".into(), "echo '<ralph>DONE 1.1</ralph>' cat x".into())
        );
        assert_eq!(shown[1], ("edit".into(), "/w/src/lib.rs".into()));
        assert_eq!(shown[2], ("todowrite".into(), "2 todos".into()));
        assert_eq!(
            shown[3].1.chars().count(),
            crate::agent::parser::TOOL_SUMMARY_CAP
        );
        let s = parse(&[
            json!({"type": "tool_use", "part": {"tool": "bash", "state": {
            "input": {"command": "echo '<ralph>DONE 1.1</ralph>'"}, "output": "<ralph>DONE 1.1</ralph>"}}}),
        ]);
        assert_eq!(s.signals.done, None);
    }

    #[test]
    fn reasoning_is_not_the_answer() {
        let s = parse(&[
            json!({"type": "reasoning", "sessionID": SES, "part": {"type": "reasoning", "text": "<ralph>DONE 1.1</ralph>"}}),
            step_finish("stop", 1, 0.0),
        ]);
        assert_eq!(s.signals.done, None);
        assert_eq!(s.result_text, "");
    }

    #[test]
    fn errors_are_error_results_with_their_status() {
        let ev = decode(&[json!({"type": "error", "error": {"name": "APIError",
            "data": {"message": "Overloaded", "statusCode": 529, "isRetryable": true}}})]);
        assert_eq!(
            ev,
            vec![AgentEvent::Result {
                is_error: true,
                text: "Overloaded".into(),
                usage: Usage::default(),
                cost_usd: None,
                num_turns: None,
                api_error_status: Some(529),
            }]
        );
        let s = parse(&[json!({"type": "error", "error": {"name": "UnknownError"}})]);
        assert!(s.is_error && s.result_seen);
        assert_eq!(s.result_text, "UnknownError");
        assert_eq!(s.rate_limited, None);
        // An error after a finished step is what counts.
        let s = parse(&[
            text("done"),
            step_finish("stop", 1, 0.0),
            json!({"type": "error", "error": {"data": {"message": "boom"}}}),
        ]);
        assert!(s.is_error);
        assert_eq!(s.result_text, "boom");
    }

    #[test]
    fn limits_and_their_reset() {
        // retry-after counts from the event's timestamp.
        let ev = decode(&[
            json!({"type": "error", "timestamp": 1795351998276u64, "error": {"data": {
            "message": "rate limited", "statusCode": 429, "responseHeaders": {"Retry-After": "30"}}}}),
        ]);
        assert_eq!(
            ev[0],
            AgentEvent::RateLimited {
                resets_at: Some(1795352029),
                message: "rate limited".into()
            }
        );
        let at = |headers: Value| retry_at(&json!({"timestamp": 1_000_500u64}), Some(&headers));
        assert_eq!(
            at(json!({"retry-after-ms": "1500", "retry-after": "9"})),
            Some(1002)
        );
        assert_eq!(
            at(json!({"anthropic-ratelimit-unified-reset": "1795356277", "retry-after": "9"})),
            Some(1795356277)
        );
        assert_eq!(
            at(json!({"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"})),
            None
        );
        assert_eq!(at(json!({"retry-after": "-3"})), None);
        assert_eq!(
            retry_at(&json!({}), Some(&json!({"retry-after": "1"}))),
            None
        );

        // A 429 without headers is still a limit (the shared step sees the status).
        let s = parse(&[
            json!({"type": "error", "error": {"data": {"message": "slow down", "statusCode": 429}}}),
        ]);
        assert_eq!(s.rate_limited, Some(None));
        for msg in [
            "Free usage exceeded",
            "Subscription quota exceeded",
            "Monthly usage limit reached",
        ] {
            let s = parse(&[
                json!({"type": "error", "error": {"name": "UnknownError", "data": {"message": msg}}}),
            ]);
            assert_eq!(s.rate_limited, Some(None), "{msg}");
        }
        let s = parse(&[
            json!({"type": "error", "error": {"data": {"message": "Cannot connect to API"}}}),
        ]);
        assert_eq!(s.rate_limited, None);
    }

    #[test]
    fn bad_events_never_panic() {
        let mut p = OutputParser::for_backend(Backend::Opencode);
        for line in [
            "{}",
            r#"{"type":null,"sessionID":5}"#,
            r#"{"type":"text"}"#,
            r#"{"type":"text","part":{"text":7}}"#,
            r#"{"type":"tool_use","part":"x"}"#,
            r#"{"type":"step_finish","part":{"tokens":{"input":-1,"cache":"none"},"cost":"free","reason":"stop"}}"#,
            r#"{"type":"error","error":"flat"}"#,
            r#"{"type":"error","timestamp":18446744073709551615,"error":{"data":{"statusCode":429,"responseHeaders":{"retry-after":"1e300"}}}}"#,
        ] {
            p.feed_line(line);
        }
        let s = p.finish();
        assert!(s.result_seen && s.is_error);
        assert_eq!(s.usage, Usage::default());
    }

    // Golden tests on the recorded output of the real CLI.

    fn parse_text(text: &str) -> (Vec<AgentEvent>, Summary) {
        testkit::events(Backend::Opencode, text)
    }

    /// What each recording must give; every field is checked.
    struct Want {
        text: &'static str,
        usage: Usage,
        cost: Option<f64>,
        session: &'static str,
        limited: Option<Option<u64>>,
        is_error: bool,
        status: Option<u64>,
        tools: usize,
    }

    const STEP: Usage = Usage {
        input_tokens: 900,
        output_tokens: 30,
        cache_creation_input_tokens: 200,
        cache_read_input_tokens: 4000,
    };
    const TWO_STEPS: Usage = Usage {
        input_tokens: 1800,
        output_tokens: 85,
        cache_creation_input_tokens: 400,
        cache_read_input_tokens: 8000,
    };

    fn want(name: &str) -> Option<Want> {
        let err = |text, session, limited, status| Want {
            text,
            usage: Usage::default(),
            cost: None,
            session,
            limited,
            is_error: true,
            status,
            tools: 0,
        };
        let ok = |usage, cost, session, tools| Want {
            text: testkit::ANSWER,
            usage,
            cost: Some(cost),
            session,
            limited: None,
            is_error: false,
            status: None,
            tools,
        };
        Some(match name {
            // retry-after: 5 at 1795769280.250 s (2026-11-27 08:48:00.250).
            "err-429" => err(
                "Too many requests in this minute for the recording's key",
                "ses_4a1b2c3d4e5fRecLimit004",
                Some(Some(1_795_769_286)),
                Some(429),
            ),
            "err-529" => err("Overloaded", "ses_4a1b2c3d4e5fRecBusy0005", None, Some(529)),
            "nocreds-json" => err(
                "Cannot connect to API: Unable to connect. Is the computer able to access the url?",
                "ses_4a1b2c3d4e5fRecNone0006",
                None,
                None,
            ),
            "text-json" => ok(STEP, 0.00521, "ses_4a1b2c3d4e5fRecText0001", 0),
            "tool-json" => ok(TWO_STEPS, 0.01131, "ses_4a1b2c3d4e5fRecTool0002", 1),
            "tool-json-auto" => ok(TWO_STEPS, 0.01131, "ses_4a1b2c3d4e5fRecAuto0003", 1),
            _ => return None,
        })
    }

    #[test]
    fn every_recording_gives_what_it_shows() {
        let recs = testkit::recordings("opencode");
        assert!(
            recs.len() >= 6,
            "expected every recording, saw {}",
            recs.len()
        );
        for (name, text) in &recs {
            let w = want(name).unwrap_or_else(|| panic!("no expectation for recording {name}"));
            let (events, s) = parse_text(text);
            let results: Vec<&AgentEvent> = events
                .iter()
                .filter(|e| matches!(e, AgentEvent::Result { .. }))
                .collect();
            assert_eq!(results.len(), 1, "{name}: one result");
            assert!(s.result_seen, "{name}: result_seen");
            assert_eq!(s.is_error, w.is_error, "{name}: is_error");
            assert_eq!(s.result_text, w.text, "{name}: result text");
            assert_eq!(s.last_line, w.text, "{name}: last line");
            assert_eq!(s.usage, w.usage, "{name}: usage");
            match (s.cost_usd, w.cost) {
                (Some(got), Some(want)) => assert!((got - want).abs() < 1e-9, "{name}: cost {got}"),
                (got, want) => assert_eq!(got, want, "{name}: cost"),
            }
            assert_eq!(s.session_id.as_deref(), Some(w.session), "{name}: session");
            let sessions = events
                .iter()
                .filter(|e| matches!(e, AgentEvent::SessionId(_)))
                .count();
            assert_eq!(sessions, 1, "{name}: session reported once");
            assert_eq!(s.rate_limited, w.limited, "{name}: limit");
            assert!(
                matches!(results[0], AgentEvent::Result { api_error_status, .. } if *api_error_status == w.status),
                "{name}: status"
            );
            let tools = events
                .iter()
                .filter(|e| matches!(e, AgentEvent::ToolUse { .. }))
                .count();
            assert_eq!(tools, w.tools, "{name}: tools");
            // No recording carries a tag: they answer `testkit::ANSWER`.
            assert_eq!(s.signals, Default::default(), "{name}: signals");
        }
    }

    #[test]
    fn recorded_tool_call() {
        let recs = testkit::recordings("opencode");
        let (events, _) = parse_text(&recs.iter().find(|(n, _)| n == "tool-json").unwrap().1);
        let tool = events
            .into_iter()
            .find(|e| matches!(e, AgentEvent::ToolUse { .. }));
        assert_eq!(
            tool,
            Some(AgentEvent::ToolUse {
                name: "bash".into(),
                summary: testkit::TOOL.into()
            })
        );
    }

    /// The recordings answer `testkit::ANSWER`; with the answer a prompt
    /// asks for, the same streams must give the tag.
    #[test]
    fn recorded_success_with_a_tag_is_done() {
        let recs = testkit::recordings("opencode");
        let mut n = 0;
        for (name, text) in recs.iter().filter(|(_, t)| t.contains(testkit::ANSWER)) {
            testkit::assert_tagged_answer_is_done(Backend::Opencode, name, text);
            n += 1;
        }
        assert_eq!(n, 3);
    }

    /// Parse speed of this decoder through the shared parser, on ~50 MB of
    /// recorded lines: `cargo test --release --lib agent::opencode -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn throughput() {
        let recs = testkit::recordings("opencode");
        let lines: Vec<&str> = recs.iter().flat_map(|(_, t)| t.lines()).collect();
        let s = testkit::throughput(Backend::Opencode, &lines);
        assert!(s.result_seen);
    }
}
