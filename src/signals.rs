//! Agent output parsing (SPEC 4.3, 4.5): stream-json / json / text events and
//! the `<ralph>` signal tags. Pure and incremental: output is fed line by line
//! and nothing grows with the size of the output except the learnings found.

/// Token usage of one attempt (summed over results).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
}

/// What one line of agent output meant.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// Assistant text (or a text-format line).
    Text(String),
    /// The agent called a tool; `summary` is a short one-line description.
    ToolUse { name: String, summary: String },
    /// The final result.
    Result {
        is_error: bool,
        text: String,
        usage: Usage,
        cost_usd: Option<f64>,
        num_turns: Option<u64>,
        api_error_status: Option<u64>,
    },
    /// A usage/rate limit was hit; `resets_at` in epoch seconds when known.
    RateLimited { resets_at: Option<u64>, message: String },
    /// The CLI is retrying an API error itself.
    ApiRetry { attempt: u64, error: String },
}

/// A parsed DONE/FAIL decision and the learnings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signals {
    /// ID of the last `<ralph>DONE id</ralph>` (or legacy `[DONE] Story id`).
    pub done: Option<String>,
    /// (id, reason) of the last FAIL tag, `|` in the reason replaced by `-`.
    pub fail: Option<(String, String)>,
    /// LEARN texts in order, without duplicates.
    pub learnings: Vec<String>,
}

/// Incremental parser for one attempt's output.
#[derive(Debug, Default)]
pub struct OutputParser {
    _private: (),
}

/// Everything the parser concluded once the output ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub signals: Signals,
    /// The last `result` event, if any.
    pub result_seen: bool,
    pub is_error: bool,
    pub result_text: String,
    pub usage: Usage,
    pub cost_usd: Option<f64>,
    pub num_turns: Option<u64>,
    /// A usage/rate limit answer (SPEC 4.5).
    pub rate_limited: Option<Option<u64>>,
    /// Claude Code refused `--dangerously-skip-permissions` as root.
    pub root_refusal: bool,
    /// Last non-empty line of agent text or stderr, for error messages.
    pub last_line: String,
}

impl OutputParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one line (without its newline); returns the events it carried.
    /// JSON lines are understood as stream-json or a json `result`; anything
    /// else is plain text. Only agent text (assistant text blocks, the final
    /// result, plain text lines) is scanned for tags — never tool inputs or results.
    pub fn feed_line(&mut self, line: &str) -> Vec<AgentEvent> {
        let _ = line;
        todo!()
    }

    /// Ends the output and returns the summary.
    pub fn finish(self) -> Summary {
        todo!()
    }
}

/// Scans a complete agent text for tags (used by `OutputParser` and tests).
pub fn scan_text(text: &str) -> Signals {
    let _ = text;
    todo!()
}
