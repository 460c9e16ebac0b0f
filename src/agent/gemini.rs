//! Gemini CLI: how ralph reads `gemini -o stream-json`'s JSON event stream (see
//! the workspace notes `agents.md` §4, §6.3). Pure: one JSON event in, our events out.
//!
//! Also home of the small helpers the other delta-streaming decoders
//! (`cursor.rs`, `agy.rs`) share: `TextJoin` and `tool_summary`.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::event::{AgentEvent, Usage};
use super::parser::{one_line, str_of, u64_of};

/// State kept across the events of one attempt.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    text: TextJoin,
    /// Unix time of the latest event's `timestamp`: a limit says "reset
    /// after 2h13m5s", relative to when it was written, and a decoder has
    /// no clock of its own.
    clock: Option<u64>,
}

/// An error text that means a quota or rate limit, not some other failure.
/// Only applied to error results, `error` events and retry lines on stderr,
/// which are error messages by construction.
static LIMIT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)quota will reset|exhausted your (?:capacity|daily quota|quota)|quota exceeded|exceeded your current quota|resource[_ ]exhausted|rate limit exceeded|too many requests|\b429\b",
    )
    .unwrap()
});

/// "Your quota will reset after 2h13m5s." / "Suggested retry after 1s." /
/// "Please retry in 12.5s": a delay, in Go's duration syntax.
static DELAY_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:reset|retry) (?:after|in) ((?:\d+(?:\.\d+)?(?:ms|h|m|s))+)").unwrap()
});

static DELAY_PART_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(\d+(?:\.\d+)?)(ms|h|m|s)").unwrap());

/// Gemini's own retry loop on stderr: `Attempt 3 failed: <error>` or
/// `Attempt 2 failed. Retrying with backoff... Error: <error>`.
static ATTEMPT_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*Attempt (\d+) failed[:.]\s*(.*)$").unwrap());

impl Decoder {
    /// The end of the output: text still held (an agent killed mid-message)
    /// is let out, so its tags count.
    pub(crate) fn finish(&mut self) -> Vec<AgentEvent> {
        self.text.rest()
    }

    /// What one JSON event of the stream means; never panics.
    pub(crate) fn event(&mut self, ev: &Value) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        if let Some(t) = ev
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(iso_secs)
        {
            self.clock = Some(t);
        }
        let kind = str_of(ev, "type");
        let assistant = kind == "message" && str_of(ev, "role") == "assistant";
        // The deltas of one message end when anything else arrives.
        if !assistant {
            out.extend(self.text.flush().map(AgentEvent::Text));
        }
        match kind {
            "init" => {
                let id = str_of(ev, "session_id");
                if !id.is_empty() {
                    out.push(AgentEvent::SessionId(id.to_string()));
                }
            }
            // Only the assistant's words: the user message echoes the prompt,
            // whose examples of the tags must not count.
            "message" if assistant => {
                let piece = str_of(ev, "content");
                out.extend(self.text.push(piece).map(AgentEvent::Text));
                if ev.get("delta").and_then(Value::as_bool) != Some(true) {
                    out.extend(self.text.flush().map(AgentEvent::Text));
                }
            }
            "tool_use" => {
                let name = str_of(ev, "tool_name").to_string();
                let summary = tool_summary(ev.get("parameters"));
                out.push(AgentEvent::ToolUse { name, summary });
            }
            "error" => {
                let message = str_of(ev, "message");
                if LIMIT_RE.is_match(message) {
                    out.push(self.limited(message));
                }
            }
            "result" => self.result(ev, &mut out),
            // `tool_result` is tool output: never agent text.
            _ => {}
        }
        out
    }

    fn result(&mut self, ev: &Value, out: &mut Vec<AgentEvent>) {
        let is_error = str_of(ev, "status") != "success";
        let error = ev.get("error");
        let text = error
            .map(|e| str_of(e, "message"))
            .unwrap_or("")
            .to_string();
        // `code` is an HTTP status for API errors, an exit code for others.
        let api_error_status = error
            .and_then(|e| e.get("code"))
            .and_then(Value::as_u64)
            .filter(|c| (400..600).contains(c));
        if is_error && (api_error_status == Some(429) || LIMIT_RE.is_match(&text)) {
            out.push(self.limited(&text));
        }
        out.push(AgentEvent::Result {
            is_error,
            text,
            usage: ev.get("stats").map(stats_usage).unwrap_or_default(),
            cost_usd: None,
            num_turns: None,
            api_error_status,
        });
    }

    fn limited(&self, message: &str) -> AgentEvent {
        AgentEvent::RateLimited {
            resets_at: self.reset_from(message),
            message: message.trim().to_string(),
        }
    }

    fn reset_from(&self, text: &str) -> Option<u64> {
        Some(self.clock? + delay_secs(text)?)
    }

    /// What one non-JSON line (stderr) means (`OutputParser::feed_line`
    /// hands every such line here). When Gemini's quota is exhausted it
    /// sleeps until the reset and says so only here, so this is the only
    /// way to see it.
    pub(crate) fn plain_line(&mut self, line: &str) -> Vec<AgentEvent> {
        let Some(c) = ATTEMPT_RE.captures(line) else {
            return Vec::new();
        };
        let error = c[2].trim();
        // A per-minute quota is retried within seconds: that is a retry.
        // "Your quota will reset after 2h13m5s" makes Gemini sleep for hours.
        if error.contains("quota will reset") || error.contains("exhausted your") {
            return vec![self.limited(error)];
        }
        vec![AgentEvent::ApiRetry {
            attempt: c[1].parse().unwrap_or(0),
            error: error.to_string(),
            status: None,
        }]
    }
}

/// Tokens of `result.stats`: `input_tokens` counts the cached part too,
/// `input` is the rest (notes §4).
fn stats_usage(stats: &Value) -> Usage {
    let cached = u64_of(stats, "cached");
    let input = match stats.get("input").and_then(Value::as_u64) {
        Some(n) => n,
        None => u64_of(stats, "input_tokens").saturating_sub(cached),
    };
    Usage {
        input_tokens: input,
        output_tokens: u64_of(stats, "output_tokens"),
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: cached,
    }
}

/// Seconds of the first "reset after"/"retry after|in" delay in `text`,
/// rounded up: waking a little late is harmless, early is not.
fn delay_secs(text: &str) -> Option<u64> {
    let spec = DELAY_RE.captures(text)?.get(1)?.as_str();
    let mut secs = 0.0;
    for p in DELAY_PART_RE.captures_iter(spec) {
        let n: f64 = p[1].parse().ok()?;
        secs += n * match &p[2] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            _ => 0.001,
        };
    }
    Some(secs.ceil() as u64)
}

/// `2026-11-22T12:48:14.183Z` (JavaScript's `toISOString`) as Unix seconds.
fn iso_secs(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || !s.ends_with('Z') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<u64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    // Days from 1970-01-01 to y-mo-d (Howard Hinnant's days_from_civil).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(days * 86_400 + h * 3600 + mi * 60 + sec)
}

/// Longest unclosed `<ralph>` tag held back; past it the text goes out as
/// it is (the same bound as the plain-text path's carry).
const HOLD_CAP: usize = 64 * 1024;

/// Joins the text deltas of one assistant message. The shared tag scanner
/// looks at one `Text` at a time, so a `<ralph>DONE 1.1</ralph>` streamed
/// as `<ralph>DO` + `NE 1.1</ralph>` would be missed if each delta were a
/// `Text`. Complete lines go out as soon as they are complete (the live
/// display keeps moving, and a killed agent loses at most its last line);
/// from an unclosed `<ralph>` on, text waits for the closing tag, so a
/// multi-line LEARN is scanned whole.
#[derive(Debug, Default)]
pub(super) struct TextJoin {
    buf: String,
}

impl TextJoin {
    /// Adds one delta; returns the text it completed, if any.
    pub(super) fn push(&mut self, piece: &str) -> Option<String> {
        self.buf.push_str(piece);
        let mut cut = self.buf.rfind('\n').map_or(0, |i| i + 1);
        if let Some(open) = self.buf[..cut].rfind("<ralph>") {
            // Closed only after the cut, it would be cut in two.
            if !self.buf[open..cut].contains("</ralph>") {
                cut = open;
            }
        }
        if cut == 0 && self.buf.len() > HOLD_CAP {
            cut = self.buf.len();
        }
        let done: String = self.buf.drain(..cut).collect();
        nonblank(done)
    }

    /// Ends the message: whatever is held goes out.
    /// What is still held, as the last text event (the output ended).
    pub(super) fn rest(&mut self) -> Vec<AgentEvent> {
        self.flush().map(AgentEvent::Text).into_iter().collect()
    }

    pub(super) fn flush(&mut self) -> Option<String> {
        nonblank(std::mem::take(&mut self.buf))
    }
}

fn nonblank(s: String) -> Option<String> {
    (!s.trim().is_empty()).then_some(s)
}

/// One line describing a tool call from its arguments: the command, path or
/// query it acts on. Keys cover Gemini (snake_case), Cursor (camelCase) and
/// Antigravity (PascalCase).
pub(super) fn tool_summary(args: Option<&Value>) -> String {
    const KEYS: [&str; 16] = [
        "command",
        "CommandLine",
        "pattern",
        "globPattern",
        "Pattern",
        "query",
        "Query",
        "file_path",
        "absolute_path",
        "AbsolutePath",
        "path",
        "Path",
        "url",
        "Url",
        "description",
        "prompt",
    ];
    let Some(args) = args.filter(|a| a.as_object().is_some_and(|o| !o.is_empty())) else {
        return String::new();
    };
    let text = KEYS
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
        .map(str::to_string)
        .unwrap_or_else(|| args.to_string());
    one_line(&text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::parser::{OutputParser, Summary};
    use crate::agent::testkit;
    use crate::agent::Backend;
    use serde_json::json;
    use std::path::PathBuf;

    fn decode(events: &[Value]) -> Vec<AgentEvent> {
        testkit::decode(Backend::Gemini, events)
    }

    fn parse(lines: &[String]) -> Summary {
        testkit::parse(Backend::Gemini, lines)
    }

    fn delta(text: &str) -> Value {
        json!({"type": "message", "timestamp": "2026-11-22T12:48:07.788Z",
               "role": "assistant", "content": text, "delta": true})
    }

    fn result_ok() -> Value {
        json!({"type": "result", "timestamp": "2026-11-22T12:48:07.822Z", "status": "success",
               "stats": {"total_tokens": 930, "input_tokens": 900, "output_tokens": 30,
                         "cached": 100, "input": 800, "duration_ms": 81, "tool_calls": 0}})
    }

    fn error_result(message: &str) -> Value {
        json!({"type": "result", "timestamp": "2026-11-22T12:55:34.000Z", "status": "error",
               "error": {"type": "unknown", "message": message},
               "stats": {"total_tokens": 0, "input_tokens": 0, "output_tokens": 0, "cached": 0, "input": 0}})
    }

    #[test]
    fn init_gives_the_session_id() {
        let ev = json!({"type": "init", "timestamp": "2026-11-22T12:48:14.183Z",
                        "session_id": "b541b7fe", "model": "gemini-2.5-flash"});
        assert_eq!(
            decode(&[ev]),
            vec![AgentEvent::SessionId("b541b7fe".into())]
        );
        assert!(decode(&[json!({"type": "init", "session_id": ""})]).is_empty());
    }

    #[test]
    fn user_message_and_tool_result_are_not_text() {
        let evs = [
            json!({"type": "message", "role": "user", "content": "<ralph>DONE 1.1</ralph>"}),
            json!({"type": "tool_result", "tool_id": "t", "status": "success",
                   "output": "<ralph>DONE 1.1</ralph>"}),
        ];
        assert!(decode(&evs).is_empty());
        let lines: Vec<String> = evs.iter().map(Value::to_string).collect();
        assert_eq!(parse(&lines).signals.done, None);
    }

    #[test]
    fn deltas_are_joined_until_the_message_ends() {
        let evs = [
            delta("Working on "),
            delta("it.\nAll tests "),
            delta("pass."),
            result_ok(),
        ];
        let out = decode(&evs);
        assert_eq!(out[0], AgentEvent::Text("Working on it.\n".into()));
        assert_eq!(out[1], AgentEvent::Text("All tests pass.".into()));
        assert!(matches!(
            out[2],
            AgentEvent::Result {
                is_error: false,
                ..
            }
        ));
        assert_eq!(out.len(), 3);
    }

    /// The shared scanner sees one `Text` at a time: a tag split over two
    /// of them is lost. This is why `TextJoin` exists.
    #[test]
    fn the_shared_scanner_misses_a_tag_split_over_texts() {
        let mut p = OutputParser::new();
        let text = |t: &str| {
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": t}]}})
                .to_string()
        };
        p.feed_line(&text("<ralph>DO"));
        p.feed_line(&text("NE 1.1</ralph>"));
        assert_eq!(p.finish().signals.done, None);
    }

    #[test]
    fn a_tag_split_anywhere_across_deltas_is_found() {
        let msg = "Done.\n<ralph>LEARN: use the\nbuilder</ralph>\n<ralph>DONE 1.1</ralph>\nBye.";
        for i in 1..msg.len() {
            for j in i + 1..=msg.len() {
                let lines = [
                    delta(&msg[..i]).to_string(),
                    delta(&msg[i..j]).to_string(),
                    delta(&msg[j..]).to_string(),
                    result_ok().to_string(),
                ];
                let s = parse(&lines);
                assert_eq!(s.signals.done.as_deref(), Some("1.1"), "split at {i},{j}");
                assert_eq!(
                    s.signals.learnings,
                    vec!["use the\nbuilder"],
                    "split at {i},{j}"
                );
            }
        }
    }

    #[test]
    fn text_is_emitted_by_line_and_an_open_tag_is_held() {
        let mut j = TextJoin::default();
        assert_eq!(j.push("a\nb"), Some("a\n".into()));
        assert_eq!(j.push("\n<ralph>LEARN: x\n"), Some("b\n".into()));
        assert_eq!(
            j.push("y</ralph> z\n"),
            Some("<ralph>LEARN: x\ny</ralph> z\n".into())
        );
        assert_eq!(j.push("\n\n"), None);
        assert_eq!(j.flush(), None);
        // An open tag that never closes is let go past the cap.
        let mut j = TextJoin::default();
        assert_eq!(j.push("<ralph>LEARN: "), None);
        let mut out = 0;
        for _ in 0..2000 {
            out += j.push(&"z".repeat(100)).map_or(0, |s| s.len());
        }
        assert!(out > 0 && j.buf.len() <= HOLD_CAP, "held {}", j.buf.len());
    }

    #[test]
    fn a_message_without_delta_is_whole() {
        let ev =
            json!({"type": "message", "role": "assistant", "content": "<ralph>DONE 2.1</ralph>"});
        assert_eq!(
            decode(&[ev]),
            vec![AgentEvent::Text("<ralph>DONE 2.1</ralph>".into())]
        );
    }

    #[test]
    fn tool_use_ends_the_message_and_is_summarised() {
        let evs = [
            delta("Let me run it"),
            json!({"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "x",
                   "parameters": {"command": "echo hi &&\n touch f", "description": "hi"}}),
        ];
        assert_eq!(
            decode(&evs),
            vec![
                AgentEvent::Text("Let me run it".into()),
                AgentEvent::ToolUse {
                    name: "run_shell_command".into(),
                    summary: "echo hi && touch f".into()
                },
            ]
        );
        let long = json!({"type": "tool_use", "tool_name": "read_file",
                          "parameters": {"absolute_path": "/a/".repeat(50)}});
        let AgentEvent::ToolUse { summary, .. } = &decode(&[long])[0] else {
            panic!("not a tool use")
        };
        assert_eq!(
            summary.chars().count(),
            crate::agent::parser::TOOL_SUMMARY_CAP
        );
    }

    #[test]
    fn result_usage_excludes_cached_input() {
        let out = decode(&[result_ok()]);
        assert_eq!(
            out,
            vec![AgentEvent::Result {
                is_error: false,
                text: String::new(),
                usage: Usage {
                    input_tokens: 800,
                    output_tokens: 30,
                    cache_creation_input_tokens: 0,
                    cache_read_input_tokens: 100,
                },
                cost_usd: None,
                num_turns: None,
                api_error_status: None,
            }]
        );
        // Without `input`, the cached part is taken off `input_tokens`.
        let ev = json!({"type": "result", "status": "success",
                        "stats": {"input_tokens": 900, "cached": 100, "output_tokens": 3}});
        let AgentEvent::Result { usage, .. } = decode(&[ev]).remove(0) else {
            panic!("not a result")
        };
        assert_eq!(
            (usage.input_tokens, usage.cache_read_input_tokens),
            (800, 100)
        );
    }

    #[test]
    fn error_result_is_an_error_but_not_a_limit() {
        let out = decode(&[error_result(
            "[API Error: exception TypeError: fetch failed sending request]",
        )]);
        assert!(matches!(
            &out[..],
            [AgentEvent::Result { is_error: true, text, .. }] if text.contains("fetch failed")
        ));
    }

    #[test]
    fn quota_texts_are_limits_with_their_reset() {
        // 2026-11-22T12:55:34Z
        let t0 = 1_795_352_134;
        let out = decode(&[error_result(
            "[API Error: You have exhausted your capacity on this model. Your quota will reset after 2h13m5s.]",
        )]);
        assert_eq!(
            out[0],
            AgentEvent::RateLimited {
                resets_at: Some(t0 + 2 * 3600 + 13 * 60 + 5),
                message: "[API Error: You have exhausted your capacity on this model. Your quota will reset after 2h13m5s.]".into(),
            }
        );
        let out = decode(&[error_result("Quota exceeded. Please retry in 539.47ms")]);
        assert!(
            matches!(out[0], AgentEvent::RateLimited { resets_at: Some(t) , .. } if t == t0 + 1)
        );
        // A 429 by code, without a reset; an `error` event too.
        let ev = json!({"type": "result", "status": "error",
                        "error": {"type": "api", "message": "slow down", "code": 429}});
        assert!(matches!(
            &decode(&[ev])[..],
            [
                AgentEvent::RateLimited {
                    resets_at: None,
                    ..
                },
                AgentEvent::Result {
                    api_error_status: Some(429),
                    ..
                }
            ]
        ));
        let ev = json!({"type": "error", "severity": "error", "message": "RESOURCE_EXHAUSTED"});
        assert!(matches!(
            &decode(&[ev])[..],
            [AgentEvent::RateLimited { .. }]
        ));
        let ev = json!({"type": "error", "severity": "warning", "message": "Loop detected, stopping execution"});
        assert!(decode(&[ev]).is_empty());
        // A successful result never is a limit, whatever its text.
        let ev =
            json!({"type": "result", "status": "success", "error": {"message": "quota exceeded"}});
        assert!(matches!(
            &decode(&[ev])[..],
            [AgentEvent::Result {
                is_error: false,
                ..
            }]
        ));
    }

    #[test]
    fn stderr_retry_lines() {
        let mut d = Decoder::default();
        d.event(
            &json!({"type": "init", "timestamp": "2026-11-22T12:48:16.890Z", "session_id": "s"}),
        );
        let out = d.plain_line("Attempt 1 failed: You have exhausted your capacity on this model. Your quota will reset after 2h13m5s.. Retrying after 8587399ms...");
        assert!(matches!(
            &out[..],
            [AgentEvent::RateLimited { resets_at: Some(t), .. }] if *t == 1_795_351_696 + 7985
        ));
        assert_eq!(
            d.plain_line("Attempt 2 failed: Quota exceeded for quota metric 'Generate Content API requests per minute'"),
            vec![AgentEvent::ApiRetry {
                attempt: 2,
                error: "Quota exceeded for quota metric 'Generate Content API requests per minute'".into(),
                status: None,
            }]
        );
        assert!(d
            .plain_line("Ripgrep is not available. Falling back to GrepTool.")
            .is_empty());
    }

    #[test]
    fn time_and_delay_parsing() {
        assert_eq!(iso_secs("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(iso_secs("2026-11-22T12:48:16.890Z"), Some(1_795_351_696));
        assert_eq!(iso_secs("2024-02-29T23:59:59Z"), Some(1_709_251_199));
        for bad in [
            "",
            "2026-11-22",
            "2026-13-22T00:00:00Z",
            "2026-11-22T12:48:16+01:00",
            "yyyy-mm-ddThh:mm:ssZ",
        ] {
            assert_eq!(iso_secs(bad), None, "{bad}");
        }
        assert_eq!(delay_secs("quota will reset after 2h13m5s."), Some(7985));
        assert_eq!(delay_secs("Your quota will reset after 39s"), Some(39));
        assert_eq!(delay_secs("Suggested retry after 1s."), Some(1));
        assert_eq!(delay_secs("Please retry in 250ms"), Some(1));
        assert_eq!(delay_secs("reset after 10m"), Some(600));
        assert_eq!(delay_secs("try again later"), None);
    }

    #[test]
    fn bad_events_never_panic() {
        let mut d = Decoder::default();
        for ev in [
            json!(null),
            json!({}),
            json!({"type": 5}),
            json!({"type": "message", "role": "assistant", "content": 5, "delta": "yes"}),
            json!({"type": "tool_use", "parameters": "x"}),
            json!({"type": "result", "stats": "x", "error": "x"}),
            json!({"type": "result", "stats": {"input_tokens": -1, "cached": 5}}),
            json!({"type": "init", "timestamp": "9999-99-99T99:99:99Z"}),
            json!({"type": "error", "message": "quota will reset after 99999999999h"}),
        ] {
            d.event(&ev);
        }
    }

    // ---- golden tests on the CLI's output (`tests/fixtures/agents/gemini`) ----

    fn recordings() -> PathBuf {
        testkit::recording_dir("gemini")
    }

    fn recorded(dir: &std::path::Path, name: &str) -> Vec<String> {
        std::fs::read_to_string(dir.join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn every_recording_parses() {
        let dir = recordings();
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if name.ends_with(".stdout") || name.ends_with(".stderr") {
                parse(&recorded(&dir, &name));
                n += 1;
            }
        }
        assert!(n >= 12, "expected every recording, saw {n}");
    }

    #[test]
    fn golden_success_runs() {
        let dir = recordings();
        for (name, session, tools, input, output, cached) in [
            (
                "text-stream.stdout",
                "6d0f3a52-1b7e-4c39-9a41-0c5e2f7d8b11",
                0,
                560,
                25,
                140,
            ),
            (
                "tool-yolo.stdout",
                "a3c94e07-5d21-4f6b-8e10-2b7c6d9f0e42",
                1,
                1120,
                50,
                280,
            ),
            (
                "tool-default.stdout",
                "f18b2d6c-90a3-4e57-b6c4-7d1e0a35c983",
                1,
                1120,
                50,
                280,
            ),
        ] {
            let lines = recorded(&dir, name);
            let mut p = OutputParser::for_backend(Backend::Gemini);
            let events: Vec<AgentEvent> = lines.iter().flat_map(|l| p.feed_line(l)).collect();
            let texts: Vec<&str> = events
                .iter()
                .filter_map(|e| match e {
                    AgentEvent::Text(t) => Some(t.as_str()),
                    _ => None,
                })
                .collect();
            // One answer, streamed in one or two deltas.
            assert_eq!(texts.concat(), testkit::ANSWER, "{name}");
            let n_tools = events
                .iter()
                .filter(|e| {
                    matches!(e, AgentEvent::ToolUse { name, summary }
                    if name == "run_shell_command" && summary == testkit::TOOL)
                })
                .count();
            assert_eq!(n_tools, tools, "{name}");
            let s = p.finish();
            assert!(s.result_seen && !s.is_error, "{name}");
            assert_eq!(s.session_id.as_deref(), Some(session), "{name}");
            assert_eq!(
                s.usage,
                Usage {
                    input_tokens: input,
                    output_tokens: output,
                    cache_creation_input_tokens: 0,
                    cache_read_input_tokens: cached,
                },
                "{name}"
            );
            assert_eq!(s.rate_limited, None, "{name}");
            assert_eq!(s.last_line, testkit::ANSWER, "{name}");
            // "DONE: ..." is prose, not a tag.
            assert_eq!(s.signals.done, None, "{name}");
        }
    }

    #[test]
    fn golden_no_network_is_an_error_not_a_limit() {
        let dir = recordings();
        let s = parse(&recorded(&dir, "fakekey-nonet.stdout"));
        assert!(s.result_seen && s.is_error);
        assert_eq!(
            s.result_text,
            "[API Error: exception TypeError: fetch failed sending request]"
        );
        assert_eq!(
            s.session_id.as_deref(),
            Some("0b7e5c21-3f48-4d96-a2e1-9c8d7f6a5b30")
        );
        assert_eq!(s.usage, Usage::default());
        assert_eq!(s.rate_limited, None);
        // Its stderr: retries of a network error, no limit either.
        let mut d = Decoder::default();
        let stderr = recorded(&dir, "fakekey-nonet.stderr");
        let evs: Vec<_> = stderr.iter().flat_map(|l| d.plain_line(l)).collect();
        assert!(evs.len() >= 9, "{} retries", evs.len());
        assert!(evs.iter().all(|e| matches!(e, AgentEvent::ApiRetry { .. })));
    }

    #[test]
    fn golden_per_minute_quota_is_a_limit() {
        let dir = recordings();
        let s = parse(&recorded(&dir, "quota-429rpm.stdout"));
        assert!(s.result_seen && s.is_error);
        assert!(s.result_text.contains("Quota exceeded for quota metric"));
        // "Suggested retry after 3s", from the result's 2026-11-27T08:31:05.640Z.
        assert_eq!(s.rate_limited, Some(Some(1_795_768_265 + 3)));
        assert_eq!(
            s.session_id.as_deref(),
            Some("47c1d9e3-2a6f-4b58-9e07-c5d4b3a29180")
        );
    }

    #[test]
    fn golden_exhausted_quota_is_seen_only_on_stderr() {
        let dir = recordings();
        let stdout = recorded(&dir, "quota-429.stdout");
        let s = parse(&stdout);
        // Gemini sleeps until the reset: no result, and nothing on stdout
        // says why.
        assert!(!s.result_seen);
        assert_eq!(s.rate_limited, None);
        assert_eq!(
            s.session_id.as_deref(),
            Some("9e2a7c14-6b03-4f85-b1d9-3a4c5e6f7081")
        );
        // Its stderr says it, once `plain_line` is wired in.
        let mut d = Decoder::default();
        for l in &stdout {
            d.event(&serde_json::from_str(l).unwrap());
        }
        let limits: Vec<_> = recorded(&dir, "quota-429.stderr")
            .iter()
            .flat_map(|l| d.plain_line(l))
            .collect();
        // init at 2026-11-27T08:20:30.250Z + 1h40m12s.
        assert!(
            matches!(&limits[..], [AgentEvent::RateLimited { resets_at: Some(t), .. }] if *t == 1_795_767_630 + 6012),
            "{limits:?}"
        );
    }

    #[test]
    fn golden_no_credentials_has_no_json() {
        let dir = recordings();
        let s = parse(&recorded(&dir, "nocreds-stream.stderr"));
        assert!(!s.result_seen);
        assert!(s.last_line.starts_with("Please set an Auth method"));
    }

    /// `cargo test --release --lib agent::gemini -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn throughput() {
        let dir = recordings();
        let mut block = Vec::new();
        for name in [
            "text-stream.stdout",
            "tool-yolo.stdout",
            "tool-default.stdout",
            "quota-429rpm.stdout",
            "fakekey-nonet.stdout",
        ] {
            block.extend(recorded(&dir, name));
        }
        let lines: Vec<&str> = block.iter().map(String::as_str).collect();
        let s = testkit::throughput(Backend::Gemini, &lines);
        let reps = 50_000_000 / lines.iter().map(|l| l.len() + 1).sum::<usize>() + 1;
        assert_eq!(s.usage.input_tokens, reps as u64 * (560 + 1120 + 1120));
    }
}
