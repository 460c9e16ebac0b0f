//! Claude Code's `stream-json` (and `--output-format json`'s one `result`),
//! also Amp's `--stream-json`: each JSON line as `AgentEvent`s, which reach
//! the summary through `OutputParser::absorb` as every other CLI's do.

use serde_json::Value;

use super::event::{AgentEvent, Usage};
use super::parser::one_line;

/// Claude Code's events need no memory of earlier lines.
#[derive(Debug, Default)]
pub(crate) struct Decoder;

impl Decoder {
    /// The events of one JSON object; `None` when it is not one of Claude
    /// Code's stream events (text output that happens to be a JSON object
    /// is neither read as events nor scanned as text, and does not make the
    /// output a stream).
    pub(crate) fn event(&mut self, ev: &Value) -> Option<Vec<AgentEvent>> {
        let mut out = Vec::new();
        match ev.get("type").and_then(Value::as_str).unwrap_or("") {
            "assistant" => assistant(ev, &mut out),
            "result" => out.push(result(ev)),
            "rate_limit_event" => rate_limit(ev, &mut out),
            // The session a fix-up resumes (`claude --resume <id>`).
            "system" if ev.get("subtype").and_then(Value::as_str) == Some("init") => {
                if let Some(id) = ev.get("session_id").and_then(Value::as_str) {
                    if !id.is_empty() {
                        out.push(AgentEvent::SessionId(id.to_string()));
                    }
                }
            }
            "system" if ev.get("subtype").and_then(Value::as_str) == Some("api_retry") => {
                api_retry(ev, &mut out)
            }
            // Tool results ("user") can quote anything, old tags included;
            // init and the many informational events carry nothing we need.
            "system" | "user" | "stream_event" => {}
            _ => return None,
        }
        Some(out)
    }
}

fn rate_limit(ev: &Value, out: &mut Vec<AgentEvent>) {
    let info = ev.get("rate_limit_info");
    let status = info.and_then(|i| i.get("status")).and_then(Value::as_str);
    if status == Some("rejected") {
        let resets_at = info.and_then(|i| u64_field(i, "resetsAt"));
        let kind = info
            .and_then(|i| i.get("rateLimitType"))
            .and_then(Value::as_str)
            .unwrap_or("usage");
        out.push(AgentEvent::RateLimited {
            resets_at,
            message: format!("{kind} limit reached"),
        });
    } else if status == Some("allowed_warning") {
        let resets_at = info.and_then(|i| u64_field(i, "resetsAt"));
        let used_percent = info
            .and_then(|i| i.get("utilization"))
            .and_then(Value::as_f64)
            .map(|u| if u <= 1.0 { u * 100.0 } else { u });
        out.push(AgentEvent::LimitWarning {
            resets_at,
            used_percent,
        });
    }
}

fn api_retry(ev: &Value, out: &mut Vec<AgentEvent>) {
    let mut error = ev
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_string();
    let status = u64_field(ev, "error_status");
    // Claude Code retries a rejected key for minutes (10 tries, backing off
    // to ~40 s): nothing will change until a person fixes the credentials.
    if status == Some(401) || error == "authentication_failed" {
        out.push(AgentEvent::AuthRejected);
    }
    if let Some(status) = status {
        error = format!("{error} ({status})");
    }
    // The CLI sleeps before its next try (minutes in all under an API key's
    // 429): say so, or the attempt looks hung.
    if let Some(ms) = ev.get("retry_delay_ms").and_then(Value::as_f64) {
        error = format!(
            "{error}, waiting {}",
            crate::timefmt::human_duration(ms / 1000.0)
        );
    }
    out.push(AgentEvent::ApiRetry {
        attempt: u64_field(ev, "attempt").unwrap_or(0),
        error,
        status,
    });
}

fn assistant(ev: &Value, out: &mut Vec<AgentEvent>) {
    // A sub-agent's words are reported back to the main agent as a tool
    // result; only the main agent decides the attempt's outcome.
    let from_subagent = ev.get("parent_tool_use_id").is_some_and(|p| !p.is_null());
    let api_error = ev.get("error").and_then(Value::as_str);
    if let Some(kind) = api_error.filter(|_| !from_subagent) {
        out.push(AgentEvent::ApiError(kind.to_string()));
    }
    let content = ev.pointer("/message/content").and_then(Value::as_array);
    for block in content.into_iter().flatten() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                if api_error == Some("rate_limit") {
                    out.push(AgentEvent::RateLimited {
                        resets_at: None,
                        message: text.trim().to_string(),
                    });
                }
                out.push(if from_subagent {
                    AgentEvent::Aside(text.to_string())
                } else {
                    AgentEvent::Text(text.to_string())
                });
            }
            Some("tool_use") => {
                let name = block
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let summary = tool_summary(&name, block.get("input"));
                out.push(AgentEvent::ToolUse { name, summary });
            }
            _ => out.push(AgentEvent::Thinking),
        }
    }
}

fn result(ev: &Value) -> AgentEvent {
    let is_error = ev.get("is_error").and_then(Value::as_bool).unwrap_or(false);
    let text = match ev.get("result").and_then(Value::as_str) {
        Some(t) => t.to_string(),
        // Amp puts its error text in `error`.
        None if ev.get("error").and_then(Value::as_str).is_some() => {
            ev["error"].as_str().unwrap_or_default().to_string()
        }
        // Error subtypes (max turns, budget) have `errors` instead of `result`.
        None => ev
            .get("errors")
            .and_then(Value::as_array)
            .map(|errs| {
                errs.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default(),
    };
    AgentEvent::Result {
        is_error,
        text,
        usage: result_usage(ev),
        cost_usd: ev.get("total_cost_usd").and_then(Value::as_f64),
        num_turns: u64_field(ev, "num_turns"),
        api_error_status: u64_field(ev, "api_error_status"),
    }
}

fn u64_field(v: &Value, key: &str) -> Option<u64> {
    let f = v.get(key)?;
    f.as_u64()
        .or_else(|| f.as_f64().filter(|x| *x >= 0.0).map(|x| x as u64))
}

fn usage_from(v: &Value) -> Usage {
    Usage {
        input_tokens: u64_field(v, "input_tokens").unwrap_or(0),
        output_tokens: u64_field(v, "output_tokens").unwrap_or(0),
        cache_creation_input_tokens: u64_field(v, "cache_creation_input_tokens").unwrap_or(0),
        cache_read_input_tokens: u64_field(v, "cache_read_input_tokens").unwrap_or(0),
    }
}

/// Tokens of a result: `modelUsage` (which also counts sub-agents) when
/// present, else the main loop's `usage`.
fn result_usage(v: &Value) -> Usage {
    if let Some(models) = v
        .get("modelUsage")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
    {
        let mut u = Usage::default();
        for m in models.values() {
            u.input_tokens += u64_field(m, "inputTokens").unwrap_or(0);
            u.output_tokens += u64_field(m, "outputTokens").unwrap_or(0);
            u.cache_creation_input_tokens += u64_field(m, "cacheCreationInputTokens").unwrap_or(0);
            u.cache_read_input_tokens += u64_field(m, "cacheReadInputTokens").unwrap_or(0);
        }
        return u;
    }
    v.get("usage").map(usage_from).unwrap_or_default()
}

/// One line describing a tool call: the command, path or query it acts on.
pub(super) fn tool_summary(name: &str, input: Option<&Value>) -> String {
    let Some(input) = input else {
        return String::new();
    };
    const KEYS: [&str; 9] = [
        "command",
        "file_path",
        "notebook_path",
        "pattern",
        "url",
        "query",
        "path",
        "description",
        "prompt",
    ];
    let text = KEYS
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str).map(str::to_string))
        .or_else(|| {
            input
                .get("todos")
                .and_then(Value::as_array)
                .map(|t| format!("{} todos", t.len()))
        })
        .unwrap_or_else(|| {
            let s = input.to_string();
            if s == "{}" && !name.is_empty() {
                String::new()
            } else {
                s
            }
        });
    one_line(&text)
}
