//! Agent output parsing (SPEC 4.3, 4.5): each line to the backend's decoder
//! (a JSON event) or read as plain text, what they mean taken in by `absorb`,
//! and the `<ralph>` signal tags. Pure and incremental: output is fed line by
//! line and nothing grows with the size of the output except the learnings
//! found.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::event::{AgentEvent, Usage};

/// A parsed DONE/FAIL decision and the learnings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Signals {
    /// ID of the last `<ralph>DONE id</ralph>` (or legacy `[DONE] Story id`).
    pub(crate) done: Option<String>,
    /// (id, reason) of the last FAIL tag, `|` in the reason replaced by `-`.
    pub(crate) fail: Option<(String, String)>,
    /// LEARN texts in order, without duplicates.
    pub(crate) learnings: Vec<String>,
    /// (id, reason) of the last `<ralph>TESTS_CHANGED id: reason</ralph>`:
    /// the agent says why it changed tests (the gate sends it to review).
    pub(crate) tests_changed: Option<(String, String)>,
    /// (id, reason) of the last `<ralph>DROPS id: reason</ralph>`: a
    /// conflict fix-up says why it removed what another story landed.
    pub(crate) drops: Option<(String, String)>,
    /// A reviewer's answer (issue 26): the ID of `<ralph>APPROVE id</ralph>`,
    /// or (id, review) of `<ralph>CHANGES id: review</ralph>`; the last wins.
    pub(crate) review: Option<ReviewTag>,
    /// A best-of-N judge's answer (issue 36): the candidate of the last
    /// `<ralph>PICK k</ralph>`.
    pub(crate) pick: Option<u32>,
}

/// A reviewer's verdict tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReviewTag {
    Approve(String),
    Changes(String, String),
}

/// Incremental parser for one attempt's output.
#[derive(Debug, Default)]
pub(crate) struct OutputParser {
    /// The JSON events of the CLI go through its decoder; `None` reads
    /// every line as plain text (a custom command).
    decoder: Option<super::Decoder>,
    /// Unix time and local UTC offset at the attempt's start, for limit
    /// messages that give a clock time ("try again at 3:51 PM").
    clock: Option<(i64, i32)>,
    tags: TagScan,
    /// Text from an unclosed `<ralph>` in plain-text output, so a tag split
    /// over lines (a multi-line LEARN) is still found. Capped by `CARRY_CAP`.
    carry: Option<String>,
    /// A stream-json event was seen: the agent's words come only through
    /// JSON events, so plain lines (stderr, or pieces of an over-long JSON
    /// line split by the reader) are not scanned for tags.
    stream: bool,
    /// The `custom` backend: every line is plain text, even one that looks
    /// like a JSON event (a custom agent's output is ours to scan, not to
    /// interpret as some CLI's stream).
    plain_only: bool,
    /// The agent's text kept whole, up to this many bytes (a decomposition
    /// run's answer is read block by block); `None` keeps nothing.
    keep_text: Option<usize>,
    summary: Summary,
}

/// Everything the parser concluded once the output ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Summary {
    pub(crate) signals: Signals,
    /// The last `result` event, if any.
    pub(crate) result_seen: bool,
    pub(crate) is_error: bool,
    pub(crate) result_text: String,
    pub(crate) usage: Usage,
    pub(crate) cost_usd: Option<f64>,
    pub(crate) num_turns: Option<u64>,
    /// A usage/rate limit answer (SPEC 4.5).
    pub(crate) rate_limited: Option<Option<u64>>,
    /// Claude Code refused `--dangerously-skip-permissions` as root.
    pub(crate) root_refusal: bool,
    /// Last non-empty line of agent text or stderr, for error messages.
    pub(crate) last_line: String,
    /// The agent's session ID, when its CLI reports one.
    pub(crate) session_id: Option<String>,
    /// The agent's own text, when the parser was asked to keep it
    /// (`keeping_text`): its messages in order (a sub-agent's and tool
    /// output never), then the final result unless it repeats what they
    /// ended with (Claude Code's and Codex's result is the last message,
    /// Cursor's all of them), or plain lines.
    pub(crate) text: String,
    /// Bytes of the agent's text offered to `text`; past the cap given to
    /// `keeping_text` nothing more is kept, so `text` is whole only while
    /// this is at most the cap.
    pub(crate) text_bytes: usize,
    /// The API rejected the agent's credentials (401).
    pub(crate) auth_failed: bool,
    /// The CLI warned that its usage limit is near, with the window's reset.
    pub(crate) limit_warning: Option<Option<u64>>,
    /// The last thing the CLI said was that it retries a failed API call
    /// (with the HTTP status, when known): an attempt stopped then was
    /// waiting on the API, not working on its story.
    pub(crate) waiting_on_api: Option<Option<u64>>,
    /// The HTTP status of the API error the last result reports.
    pub(crate) api_error_status: Option<u64>,
    /// The CLI retried a failed call to the model API at least once.
    pub(crate) api_retried: bool,
    /// The kind of API failure the CLI's own error message names (Claude
    /// Code's `"error"` on the assistant line it makes up: `server_error`,
    /// `overloaded`, `unknown`, …); its result often has no HTTP status.
    pub(crate) api_error: Option<String>,
}

/// Longest unclosed `<ralph>` tag carried across plain-text lines; past it
/// the tag is dropped, so a stray `<ralph>` cannot make us buffer the output.
const CARRY_CAP: usize = 64 * 1024;

/// `last_line` is for error messages, not a transcript.
const LAST_LINE_CAP: usize = 300;

/// Tool summaries are shown on one line of the live display.
pub(super) const TOOL_SUMMARY_CAP: usize = 80;

/// A story ID as SPEC 3.4 allows it; validation proper happens elsewhere.
const ID: &str = r"[A-Za-z0-9_][A-Za-z0-9._-]*";

static DONE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"<ralph>DONE\s+({ID})\s*</ralph>")).unwrap());
static FAIL_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"<ralph>FAIL\s+({ID})\s*:([^<]*)</ralph>")).unwrap());
static TESTS_CHANGED_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"<ralph>TESTS_CHANGED\s+({ID})\s*:([^<]*)</ralph>"
    ))
    .unwrap()
});
static DROPS_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"<ralph>DROPS\s+({ID})\s*:([^<]*)</ralph>")).unwrap());
static PICK_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"<ralph>PICK\s+(\d{1,9})\s*</ralph>").unwrap());
static APPROVE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"<ralph>APPROVE\s+({ID})\s*</ralph>")).unwrap());
static CHANGES_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"(?s)<ralph>CHANGES\s+({ID})\s*:(.*?)</ralph>")).unwrap()
});
static LEARN_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)<ralph>LEARN:(.*?)</ralph>").unwrap());
static LEGACY_DONE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"\[DONE\][ \t]+Story[ \t]+({ID})")).unwrap());
static LEGACY_FAIL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"\[FAIL\][ \t]+Story[ \t]+({ID})[ \t]+-[ \t]*([^\r\n]*)"
    ))
    .unwrap()
});

/// Limit messages as the whole line: agent prose that merely mentions a
/// "usage limit" (a story about rate limiting, say) must not pause the run.
static LIMIT_LINE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^\s*(?:error:\s*)?(?:you['’]ve hit your [^·]*limit|you['’]ve reached your [^·]*limit|claude (?:ai )?usage limit reached|\d+-hour limit reached|you['’]re out of (?:extra )?usage|your org is out of usage|api error: request rejected \(429\)|api error: 429\b)",
    )
    .unwrap()
});

/// Looser match for the text of an `is_error` result, which is an error
/// message by construction.
static LIMIT_ERROR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)usage limit|hit your .*limit|reached your .*limit|limit reached|out of (?:extra )?usage|out of (?:usage )?credits|request rejected \(429\)|rate_limit_error",
    )
    .unwrap()
});

/// The HTTP status in a retry notice of a CLI that has no status field
/// (Codex: "Reconnecting... 1/5 (last status: 429 Too Many Requests)").
static RETRY_STATUS_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b(429|5\d\d)\b").unwrap());

/// The old `Claude AI usage limit reached|<epoch>` form carries its reset time.
static LIMIT_EPOCH_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\|\s*(\d{9,11})\b").unwrap());

const ROOT_REFUSAL: &str =
    "--dangerously-skip-permissions cannot be used with root/sudo privileges";

/// Tag state accumulated over the texts scanned so far.
#[derive(Debug, Default)]
struct TagScan {
    done: Option<String>,
    fail: Option<(String, String)>,
    legacy_done: Option<String>,
    legacy_fail: Option<(String, String)>,
    learnings: Vec<String>,
    seen_learnings: HashSet<String>,
    tests_changed: Option<(String, String)>,
    drops: Option<(String, String)>,
    review: Option<ReviewTag>,
    pick: Option<u32>,
}

impl TagScan {
    /// Scans one complete piece of agent text; later pieces override earlier ones.
    fn scan(&mut self, text: &str) {
        if !text.contains('[') && !text.contains("<ralph>") {
            return;
        }
        if let Some(c) = DONE_RE.captures_iter(text).last() {
            self.done = Some(c[1].to_string());
        }
        if let Some(c) = FAIL_RE.captures_iter(text).last() {
            self.fail = Some((c[1].to_string(), clean_reason(&c[2])));
        }
        if let Some(c) = TESTS_CHANGED_RE.captures_iter(text).last() {
            self.tests_changed = Some((c[1].to_string(), clean_reason(&c[2])));
        }
        if let Some(c) = DROPS_RE.captures_iter(text).last() {
            self.drops = Some((c[1].to_string(), clean_reason(&c[2])));
        }
        if let Some(c) = PICK_RE.captures_iter(text).last() {
            self.pick = c[1].parse().ok();
        }
        // Within one text the later tag wins, as across texts.
        let approve = APPROVE_RE.captures_iter(text).last();
        let changes = CHANGES_RE.captures_iter(text).last();
        let pos =
            |c: &Option<regex::Captures<'_>>| c.as_ref().and_then(|c| c.get(0)).map(|m| m.start());
        match (pos(&approve), pos(&changes)) {
            (Some(a), Some(c)) if a > c => {
                self.review = approve.map(|c| ReviewTag::Approve(c[1].to_string()));
            }
            (_, Some(_)) => {
                self.review =
                    changes.map(|c| ReviewTag::Changes(c[1].to_string(), c[2].trim().to_string()));
            }
            (Some(_), None) => {
                self.review = approve.map(|c| ReviewTag::Approve(c[1].to_string()));
            }
            (None, None) => {}
        }
        for c in LEARN_RE.captures_iter(text) {
            let learning = c[1].trim();
            // A learning may mention `Vec<u8>` or `lib/<name>.sh`, but never
            // swallow another tag (an unclosed LEARN before a DONE).
            if learning.contains("<ralph>") {
                continue;
            }
            if !learning.is_empty() && self.seen_learnings.insert(learning.to_string()) {
                self.learnings.push(learning.to_string());
            }
        }
        if let Some(c) = LEGACY_DONE_RE.captures_iter(text).last() {
            // Prose ends sentences with a period: "[DONE] Story 1.1."
            self.legacy_done = Some(c[1].trim_end_matches('.').to_string());
        }
        if let Some(c) = LEGACY_FAIL_RE.captures_iter(text).last() {
            self.legacy_fail = Some((c[1].to_string(), clean_reason(&c[2])));
        }
    }

    fn signals(&self) -> Signals {
        let tagged = self.done.is_some() || self.fail.is_some();
        let (done, fail) = if tagged {
            (self.done.clone(), self.fail.clone())
        } else {
            (self.legacy_done.clone(), self.legacy_fail.clone())
        };
        Signals {
            done,
            fail,
            learnings: self.learnings.clone(),
            tests_changed: self.tests_changed.clone(),
            drops: self.drops.clone(),
            review: self.review.clone(),
            pick: self.pick,
        }
    }
}

/// A FAIL reason ends up in one-line, `|`-separated records (progress.txt).
fn clean_reason(raw: &str) -> String {
    let one_line: String = raw
        .trim()
        .chars()
        .map(|c| {
            if c == '|' {
                '-'
            } else if c == '\n' || c == '\r' {
                ' '
            } else {
                c
            }
        })
        .collect();
    one_line
}

/// `s` cut to `max` characters (then ending in an ellipsis) into `into`,
/// whose buffer is reused: this runs for every line of agent output.
fn set_truncated(into: &mut String, s: &str, max: usize) {
    into.clear();
    match s.char_indices().nth(max) {
        Some((idx, _)) => {
            into.push_str(&s[..idx]);
            into.push('…');
        }
        None => into.push_str(s),
    }
}

/// `text` as one line of the live display: paths inside ralph's worktrees
/// relative to the worktree, whitespace runs become one space, and past `TOOL_SUMMARY_CAP` characters it is cut, the ellipsis
/// included in the count.
pub(super) fn one_line(text: &str) -> String {
    // Before the cut: an absolute worktree path would push the file name out.
    let text = crate::paths::relative_to_worktree(text);
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match joined.char_indices().nth(TOOL_SUMMARY_CAP - 1) {
        Some((idx, _)) if joined.chars().count() > TOOL_SUMMARY_CAP => {
            format!("{}…", &joined[..idx])
        }
        _ => joined,
    }
}

/// The string at `key`, or "" (decoders read many optional fields).
pub(super) fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The count at `key`, or 0.
pub(super) fn u64_of(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// True when `hay` ends with `needle`, whitespace left out of both (an
/// empty `needle` too).
fn ends_with_ignoring_space(hay: &str, needle: &str) -> bool {
    let mut hay = hay.chars().rev().filter(|c| !c.is_whitespace());
    needle
        .chars()
        .rev()
        .filter(|c| !c.is_whitespace())
        .all(|c| hay.next() == Some(c))
}

fn last_nonempty_line(text: &str) -> Option<&str> {
    text.lines().rev().map(str::trim).find(|l| !l.is_empty())
}

impl OutputParser {
    /// A parser for Claude Code's output (stream-json, json or text).
    pub(crate) fn new() -> Self {
        Self::for_backend(super::Backend::Claude)
    }

    /// Feeds one line (without its newline); returns the events it carried.
    /// JSON lines are understood as stream-json or a json `result`; anything
    /// else is plain text. Only agent text (assistant text blocks, the final
    /// result, plain text lines) is scanned for tags — never tool inputs or results.
    pub(crate) fn feed_line(&mut self, line: &str) -> Vec<AgentEvent> {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let trimmed = line.trim_start();
        if !self.plain_only && trimmed.starts_with('{') {
            if let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(trimmed) {
                let ev = Value::Object(obj);
                if let Some(d) = &mut self.decoder {
                    return match d.event(&ev) {
                        Some(events) => self.absorb(events),
                        None => Vec::new(),
                    };
                }
            }
        }
        let decoded = match &mut self.decoder {
            Some(d) => d.plain_line(line),
            None => Vec::new(),
        };
        if decoded.is_empty() {
            return self.feed_plain(line);
        }
        let mut out = self.absorb(decoded);
        out.extend(self.feed_plain(line));
        out
    }

    /// A parser for the output of `backend`'s CLI.
    pub(crate) fn for_backend(backend: super::Backend) -> Self {
        OutputParser {
            decoder: super::Decoder::for_backend(backend),
            plain_only: backend == super::Backend::Custom,
            ..OutputParser::default()
        }
    }

    /// Keeps the agent's text, up to `cap` bytes, in `Summary::text`.
    pub(crate) fn keeping_text(mut self, cap: usize) -> Self {
        self.keep_text = Some(cap);
        self
    }

    fn keep(&mut self, text: &str) {
        let Some(cap) = self.keep_text else {
            return;
        };
        let s = &mut self.summary;
        s.text_bytes += text.len() + 1;
        // Once one piece did not fit, none after it is kept: the text is
        // whole or it is known not to be.
        if s.text_bytes <= cap {
            s.text.push_str(text);
            s.text.push('\n');
        }
    }

    /// The final result, kept unless it repeats the end of the messages
    /// kept before it (whitespace aside: CLIs join messages differently).
    fn keep_result(&mut self, text: &str) {
        let whole = self
            .keep_text
            .is_some_and(|cap| self.summary.text_bytes <= cap);
        if whole && ends_with_ignoring_space(&self.summary.text, text) {
            return;
        }
        self.keep(text);
    }

    /// Reads clock-time reset messages against `now` (Unix seconds) in a
    /// zone `local_offset_secs` east of UTC.
    pub(crate) fn with_clock(mut self, now: i64, local_offset_secs: i32) -> Self {
        self.clock = Some((now, local_offset_secs));
        self
    }

    /// Takes in what a backend's decoder made of one JSON event: agent text
    /// is scanned for tags, results, usage and limits go into the summary;
    /// returns the events to show (an `Aside` as `Text`; `Thinking`,
    /// `ApiError` and `AuthRejected` are the summary's alone).
    fn absorb(&mut self, events: Vec<AgentEvent>) -> Vec<AgentEvent> {
        self.stream = true;
        self.carry = None;
        let mut out = Vec::with_capacity(events.len());
        let limited_here = events
            .iter()
            .any(|e| matches!(e, AgentEvent::RateLimited { .. }));
        for mut ev in events {
            match &ev {
                AgentEvent::ApiRetry { error, status, .. } => {
                    let status = status.or_else(|| {
                        RETRY_STATUS_RE
                            .captures(error)
                            .and_then(|c| c[1].parse().ok())
                    });
                    self.summary.waiting_on_api = Some(status);
                    self.summary.api_retried = true;
                }
                AgentEvent::Text(_)
                | AgentEvent::Aside(_)
                | AgentEvent::Thinking
                | AgentEvent::ToolUse { .. }
                | AgentEvent::Result { .. } => {
                    self.summary.waiting_on_api = None;
                }
                _ => {}
            }
            match &mut ev {
                AgentEvent::Text(t) => {
                    self.tags.scan(t);
                    self.note_last_line(t);
                    self.keep(t);
                }
                AgentEvent::Aside(t) => self.note_last_line(t),
                AgentEvent::ApiError(kind) => self.summary.api_error = Some(kind.clone()),
                AgentEvent::AuthRejected => self.summary.auth_failed = true,
                AgentEvent::Result {
                    is_error,
                    text,
                    usage,
                    cost_usd,
                    num_turns,
                    api_error_status,
                } => {
                    self.tags.scan(text);
                    self.note_last_line(text);
                    self.keep_result(text);
                    // A decoder that said "limited" itself has said it once.
                    if *is_error
                        && !limited_here
                        && (*api_error_status == Some(429) || LIMIT_ERROR_RE.is_match(text))
                    {
                        let resets_at = self.reset_of(text);
                        self.mark_limited(resets_at);
                        out.push(AgentEvent::RateLimited {
                            resets_at,
                            message: text.trim().to_string(),
                        });
                    }
                    let s = &mut self.summary;
                    s.result_seen = true;
                    s.is_error = *is_error;
                    s.api_error_status = *api_error_status;
                    s.result_text.clone_from(text);
                    s.usage += *usage;
                    if cost_usd.is_some() {
                        s.cost_usd = *cost_usd;
                    }
                    if num_turns.is_some() {
                        s.num_turns = *num_turns;
                    }
                }
                AgentEvent::RateLimited { resets_at, message } => {
                    // Shown with the reset time its words give, as it is
                    // counted.
                    *resets_at = resets_at.or_else(|| self.reset_of(message));
                    self.mark_limited(*resets_at);
                }
                AgentEvent::Usage { usage, cost_usd } => {
                    self.summary.usage += *usage;
                    if let Some(c) = cost_usd {
                        *self.summary.cost_usd.get_or_insert(0.0) += *c;
                    }
                }
                AgentEvent::SessionId(id) => self.summary.session_id = Some(id.clone()),
                AgentEvent::LimitWarning { resets_at, .. } => {
                    self.summary.limit_warning = Some(*resets_at);
                }
                AgentEvent::ToolUse { .. } | AgentEvent::ApiRetry { .. } | AgentEvent::Thinking => {
                }
            }
            // What is shown: an aside as text; what only the summary needs
            // stays here.
            match ev {
                AgentEvent::Aside(t) => out.push(AgentEvent::Text(t)),
                AgentEvent::Thinking | AgentEvent::ApiError(_) | AgentEvent::AuthRejected => {}
                ev => out.push(ev),
            }
        }
        out
    }

    fn feed_plain(&mut self, line: &str) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        if line.contains(ROOT_REFUSAL) {
            self.summary.root_refusal = true;
        }
        if LIMIT_LINE_RE.is_match(line) {
            let resets_at = self.reset_of(line);
            self.mark_limited(resets_at);
            out.push(AgentEvent::RateLimited {
                resets_at,
                message: line.trim().to_string(),
            });
        }
        if !self.stream {
            self.scan_plain(line);
            self.keep(line);
        }
        if !line.trim().is_empty() {
            self.note_last_line(line);
            out.push(AgentEvent::Text(line.to_string()));
        }
        out
    }

    /// Scans a plain line, joined to the open tag carried from earlier lines.
    /// The carry never holds a `</ralph>`, so no tag is counted twice.
    fn scan_plain(&mut self, line: &str) {
        let joined;
        let (chunk, line_start) = match self.carry.take() {
            Some(mut c) => {
                c.push('\n');
                let start = c.len();
                c.push_str(line);
                joined = c;
                (joined.as_str(), start)
            }
            None => (line, 0),
        };
        if line.contains("</ralph>") {
            self.tags.scan(chunk);
        } else if line.contains('[') {
            // Legacy forms are one-line.
            self.tags.scan(line);
        }
        // The carry restarts at the last `<ralph>`: in the new line if it has
        // one, else where the old carry started.
        let open = match line.rfind("<ralph>") {
            Some(i) => Some(line_start + i),
            None if line_start > 0 => Some(0),
            None => None,
        };
        if let Some(open) = open {
            let rest = &chunk[open..];
            if !rest.contains("</ralph>") && rest.len() <= CARRY_CAP {
                self.carry = Some(rest.to_string());
            }
        }
    }

    fn note_last_line(&mut self, text: &str) {
        if let Some(l) = last_nonempty_line(text) {
            set_truncated(&mut self.summary.last_line, l, LAST_LINE_CAP);
        }
    }

    /// A known reset time is never forgotten for a later "limited" without one.
    /// The reset time a limit message names: the epoch after `|`, else any
    /// form `reset::reset_time` reads, once the parser knows the clock.
    fn reset_of(&self, text: &str) -> Option<u64> {
        limit_epoch(text).or_else(|| {
            let (now, offset) = self.clock?;
            super::reset::reset_time(text, now, offset).and_then(|t| u64::try_from(t).ok())
        })
    }

    fn mark_limited(&mut self, resets_at: Option<u64>) {
        // The first reset time reported wins: CLIs send the structured one
        // (`resetsAt`) before the error text, whose clock time is cut to the
        // minute or stale.
        let known = self.summary.rate_limited.flatten();
        self.summary.rate_limited = Some(known.or(resets_at));
    }

    /// True once the API has rejected the agent's credentials: the attempt
    /// can be stopped at once.
    pub(crate) fn auth_failed(&self) -> bool {
        self.summary.auth_failed
    }

    /// Whatever the decoder still holds at the end of the output, as
    /// events (`finish` takes it in too; this is for readers that show them).
    pub(crate) fn flush(&mut self) -> Vec<AgentEvent> {
        match self.decoder.take() {
            Some(mut d) => {
                let rest = d.finish();
                self.absorb(rest)
            }
            None => Vec::new(),
        }
    }

    /// Ends the output and returns the summary.
    pub(crate) fn finish(mut self) -> Summary {
        if let Some(mut d) = self.decoder.take() {
            let rest = d.finish();
            self.absorb(rest);
        }
        let mut summary = self.summary;
        summary.signals = self.tags.signals();
        summary
    }
}

fn limit_epoch(text: &str) -> Option<u64> {
    LIMIT_EPOCH_RE
        .captures(text)
        .and_then(|c| c[1].parse().ok())
}

/// Scans a complete agent text for tags (tests check the line-fed parser
/// agrees with it).
#[cfg(test)]
pub(crate) fn scan_text(text: &str) -> Signals {
    let mut tags = TagScan::default();
    tags.scan(text);
    tags.signals()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn a_judge_picks_with_the_last_pick_tag() {
        assert_eq!(scan_text("no answer").pick, None);
        assert_eq!(scan_text("<ralph>PICK 2</ralph>").pick, Some(2));
        let s = scan_text("first <ralph>PICK 1</ralph>, no: <ralph>PICK 3</ralph>");
        assert_eq!(s.pick, Some(3));
        assert_eq!(scan_text("<ralph>PICK two</ralph>").pick, None);
    }

    #[test]
    fn tests_changed_and_drops_tags_carry_the_id_and_the_reason() {
        let s = scan_text(
            "<ralph>TESTS_CHANGED 1.2: the old parser tests\nmove to tests/parse.rs</ralph>\n\
             <ralph>DROPS 1.2: the menu entry is replaced</ralph>\n<ralph>DONE 1.2</ralph>",
        );
        assert_eq!(
            s.tests_changed,
            Some((
                "1.2".into(),
                "the old parser tests move to tests/parse.rs".into()
            ))
        );
        assert_eq!(
            s.drops,
            Some(("1.2".into(), "the menu entry is replaced".into()))
        );
        assert_eq!(s.done.as_deref(), Some("1.2"));
        assert_eq!(
            scan_text("<ralph>TESTS_CHANGED 1.2</ralph>").tests_changed,
            None
        );
    }

    /// Parse speed of Claude Code's stream-json (also Amp's) on ~50 MB of
    /// recorded lines: `cargo test --release --lib agent::parser -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn throughput() {
        let recs = crate::agent::testkit::recordings("claude");
        let lines: Vec<&str> = recs
            .iter()
            .filter(|(n, _)| !n.starts_with("text") && !n.starts_with("json"))
            .flat_map(|(_, t)| t.lines())
            .filter(|l| l.starts_with('{'))
            .collect();
        assert!(
            !lines.is_empty(),
            "recordings: {:?}",
            recs.iter().map(|r| &r.0).collect::<Vec<_>>()
        );
        let s = crate::agent::testkit::throughput(crate::agent::Backend::Claude, &lines);
        assert!(s.result_seen);
    }

    fn parse_lines(text: &str) -> Summary {
        let mut p = OutputParser::new();
        for line in text.lines() {
            p.feed_line(line);
        }
        p.finish()
    }

    /// Ralph v2's plain-text answers (`claude --print`), our own.
    fn fixtures_dir() -> PathBuf {
        crate::testenv::fixture("ralph-v2/files/agent-outputs")
    }

    fn fixture(name: &str) -> String {
        crate::testenv::fixture_text(&format!("ralph-v2/files/agent-outputs/{name}"))
    }

    /// Both entry points must agree on every recorded output.
    fn both(text: &str) -> Signals {
        let whole = scan_text(text);
        let fed = parse_lines(text).signals;
        assert_eq!(whole, fed, "scan_text and feed_line disagree");
        whole
    }

    #[test]
    fn fixtures_all_parse_consistently() {
        let dir = fixtures_dir();
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            both(&text);
            n += 1;
        }
        assert!(n >= 11, "expected all fixtures, saw {n}");
    }

    #[test]
    fn fixture_done() {
        for name in ["done.txt", "done-no-learns.txt"] {
            let s = both(&fixture(name));
            assert_eq!(s.done.as_deref(), Some("1.1"), "{name}");
            assert_eq!(s.fail, None);
            assert!(s.learnings.is_empty());
        }
    }

    #[test]
    fn fixture_fail_and_pipe() {
        let s = both(&fixture("fail.txt"));
        assert_eq!(s.done, None);
        assert_eq!(
            s.fail,
            Some(("1.1".into(), "make test failed with 2 failures".into()))
        );

        let s = both(&fixture("fail-with-pipe.txt"));
        assert_eq!(
            s.fail,
            Some(("3.1".into(), "package-upload step error".into()))
        );
    }

    #[test]
    fn fixture_learn_multiple() {
        let s = both(&fixture("learn-multiple.txt"));
        assert_eq!(s.done.as_deref(), Some("2.1"));
        assert_eq!(
            s.learnings,
            vec![
                "the ledger file must end with a newline".to_string(),
                "make test needs LC_ALL=C for sorted output".to_string(),
            ]
        );
    }

    #[test]
    fn fixture_legacy_forms() {
        assert_eq!(
            both(&fixture("legacy-done.txt")).done.as_deref(),
            Some("1.1")
        );
        let s = both(&fixture("legacy-fail.txt"));
        assert_eq!(s.done, None);
        assert_eq!(
            s.fail,
            Some(("1.1".into(), "linker error in ledger.c".into()))
        );
    }

    #[test]
    fn fixtures_without_story_signal() {
        for name in [
            "no-signal.txt",
            "merge-done.txt",
            "merge-fail.txt",
            "test-review-done.txt",
        ] {
            let s = both(&fixture(name));
            assert_eq!((s.done, s.fail), (None, None), "{name}");
        }
        assert_eq!(
            parse_lines(&fixture("no-signal.txt")).last_line,
            "Still checking the last two cases."
        );
    }

    fn assistant_text(text: &str) -> String {
        serde_json::json!({
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            "parent_tool_use_id": null,
        })
        .to_string()
    }

    fn tool_result(content: &str) -> String {
        serde_json::json!({
            "type": "user",
            "message": {"role": "user", "content": [
                {"tool_use_id": "t1", "type": "tool_result", "content": content, "is_error": false}
            ]},
            "tool_use_result": {"stdout": content, "stderr": ""},
        })
        .to_string()
    }

    fn result(text: &str, is_error: bool) -> String {
        serde_json::json!({
            "type": "result", "subtype": "success", "is_error": is_error, "result": text,
            "num_turns": 3, "total_cost_usd": 0.0237,
            "usage": {"input_tokens": 2400, "output_tokens": 119,
                      "cache_creation_input_tokens": 600, "cache_read_input_tokens": 10000},
        })
        .to_string()
    }

    const INIT: &str =
        r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"s","tools":["Bash"]}"#;

    /// Claude Code's made-up assistant line for a limit: the event shown
    /// carries the reset time its text gives, as the summary does.
    #[test]
    fn a_limit_line_is_shown_with_its_reset_time() {
        let line = serde_json::json!({"type": "assistant", "error": "rate_limit",
            "message": {"content": [{"type": "text", "text": "Claude AI usage limit reached|1795356277"}]}})
        .to_string();
        let mut p = OutputParser::new();
        let ev = p.feed_line(&line);
        assert_eq!(
            ev[0],
            AgentEvent::RateLimited {
                resets_at: Some(1795356277),
                message: "Claude AI usage limit reached|1795356277".into()
            }
        );
        let s = p.finish();
        assert_eq!(s.rate_limited, Some(Some(1795356277)));
        assert_eq!(s.api_error.as_deref(), Some("rate_limit"));
    }

    #[test]
    fn claude_init_gives_the_session_a_fixup_resumes() {
        let s = parse_lines(&[INIT.to_string(), result("ok", false)].join("\n"));
        assert_eq!(s.session_id.as_deref(), Some("s"));
    }

    #[test]
    fn done_only_in_tool_result_is_ignored() {
        let out = [
            INIT.to_string(),
            assistant_text("Let me look at the old log."),
            tool_result("<ralph>DONE 1.1</ralph>\n<ralph>LEARN: from a file</ralph>"),
            result("I looked.", false),
        ]
        .join("\n");
        let s = parse_lines(&out);
        assert_eq!(s.signals, Signals::default());
    }

    #[test]
    fn done_in_tool_use_input_is_ignored() {
        let mut p = OutputParser::new();
        p.feed_line(INIT);
        let line = serde_json::json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "t", "name": "Bash",
             "input": {"command": "echo '<ralph>DONE 1.1</ralph>' > notes.txt && cat notes.txt"}}
        ]}})
        .to_string();
        let ev = p.feed_line(&line);
        assert_eq!(
            ev,
            vec![AgentEvent::ToolUse {
                name: "Bash".into(),
                summary: "echo '<ralph>DONE 1.1</ralph>' > notes.txt && cat notes.txt".into(),
            }]
        );
        // The tool's stdout comes back on stderr-like plain lines too: still not agent text.
        p.feed_line("<ralph>DONE 1.1</ralph>");
        assert_eq!(p.finish().signals.done, None);
    }

    #[test]
    fn tool_summaries() {
        let mut p = OutputParser::new();
        let line = serde_json::json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "name": "Edit", "input": {"file_path": "/w/src/lib.rs", "old_string": "a"}},
            {"type": "tool_use", "name": "Bash", "input": {"command": format!("cargo test\n{}", "x".repeat(200))}},
            {"type": "tool_use", "name": "TodoWrite", "input": {"todos": [1, 2]}},
        ]}})
        .to_string();
        let ev = p.feed_line(&line);
        let summaries: Vec<_> = ev
            .iter()
            .map(|e| match e {
                AgentEvent::ToolUse { summary, .. } => summary.clone(),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(summaries[0], "/w/src/lib.rs");
        assert!(summaries[1].starts_with("cargo test xxx"));
        assert!(!summaries[1].contains('\n'));
        assert_eq!(summaries[1].chars().count(), TOOL_SUMMARY_CAP);
        assert_eq!(summaries[2], "2 todos");
    }

    #[test]
    fn done_for_another_id_is_reported_as_is() {
        let out = [
            INIT.to_string(),
            assistant_text("All good.\n<ralph>DONE 2.3</ralph>"),
        ]
        .join("\n");
        assert_eq!(parse_lines(&out).signals.done.as_deref(), Some("2.3"));
        assert_eq!(
            scan_text("<ralph>DONE US-001</ralph>").done.as_deref(),
            Some("US-001")
        );
        assert_eq!(
            scan_text("<ralph>DONE  \n 3.1.2 </ralph>").done.as_deref(),
            Some("3.1.2")
        );
        assert_eq!(scan_text("<ralph>DONE ../x</ralph>").done, None);
    }

    #[test]
    fn assistant_text_and_result_are_scanned() {
        let out = [
            INIT.to_string(),
            assistant_text("Working.\n<ralph>LEARN: use\nthe builder</ralph>"),
            result(
                "Done.\n<ralph>LEARN: use\nthe builder</ralph>\n<ralph>DONE 1.1</ralph>",
                false,
            ),
        ]
        .join("\n");
        let s = parse_lines(&out);
        assert_eq!(s.signals.done.as_deref(), Some("1.1"));
        assert_eq!(s.signals.learnings, vec!["use\nthe builder".to_string()]);
        assert!(s.result_seen && !s.is_error);
        assert_eq!(s.last_line, "<ralph>DONE 1.1</ralph>");
    }

    #[test]
    fn subagent_text_is_not_scanned() {
        let line = serde_json::json!({"type": "assistant", "parent_tool_use_id": "toolu_1",
            "message": {"content": [{"type": "text", "text": "<ralph>DONE 1.1</ralph>"}]}})
        .to_string();
        let mut p = OutputParser::new();
        assert_eq!(
            p.feed_line(&line),
            vec![AgentEvent::Text("<ralph>DONE 1.1</ralph>".into())]
        );
        assert_eq!(p.finish().signals.done, None);
    }

    #[test]
    fn error_result() {
        let mut p = OutputParser::new();
        p.feed_line(INIT);
        let ev = p.feed_line(&result("Not logged in · Please run /login", true));
        assert!(matches!(
            &ev[..],
            [AgentEvent::Result { is_error: true, .. }]
        ));
        let s = p.finish();
        assert!(s.result_seen && s.is_error);
        assert_eq!(s.result_text, "Not logged in · Please run /login");
        assert_eq!(s.rate_limited, None);
        assert_eq!(s.signals.done, None);
    }

    #[test]
    fn max_turns_result_uses_errors() {
        let line = r#"{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":3,"terminal_reason":"max_turns","errors":["Reached maximum number of turns (2)"]}"#;
        let s = parse_lines(line);
        assert!(s.is_error);
        assert_eq!(s.result_text, "Reached maximum number of turns (2)");
        assert_eq!(s.num_turns, Some(3));
    }

    #[test]
    fn usage_and_cost() {
        let mut p = OutputParser::new();
        let ev = p.feed_line(&result("ok", false));
        let want = Usage {
            input_tokens: 2400,
            output_tokens: 119,
            cache_creation_input_tokens: 600,
            cache_read_input_tokens: 10000,
        };
        assert_eq!(
            ev,
            vec![AgentEvent::Result {
                is_error: false,
                text: "ok".into(),
                usage: want,
                cost_usd: Some(0.0237),
                num_turns: Some(3),
                api_error_status: None,
            }]
        );
        let s = p.finish();
        assert_eq!(s.usage, want);
        assert_eq!(s.cost_usd, Some(0.0237));
        assert_eq!(s.num_turns, Some(3));
    }

    #[test]
    fn model_usage_preferred_when_present() {
        let line = r#"{"type":"result","is_error":false,"result":"ok","total_cost_usd":0.5,"usage":{"input_tokens":1,"output_tokens":1},"modelUsage":{"opus":{"inputTokens":100,"outputTokens":10,"cacheReadInputTokens":5,"cacheCreationInputTokens":7},"haiku":{"inputTokens":20,"outputTokens":2,"cacheReadInputTokens":0,"cacheCreationInputTokens":0}}}"#;
        let s = parse_lines(line);
        assert_eq!(
            s.usage,
            Usage {
                input_tokens: 120,
                output_tokens: 12,
                cache_creation_input_tokens: 7,
                cache_read_input_tokens: 5
            }
        );
    }

    #[test]
    fn multi_line_learn_in_text_format() {
        let text = "Notes follow.\n<ralph>LEARN: first line\nsecond line\n  third</ralph> trailing\n<ralph>DONE 1.1</ralph>\n";
        let s = parse_lines(text);
        assert_eq!(
            s.signals.learnings,
            vec!["first line\nsecond line\n  third".to_string()]
        );
        assert_eq!(s.signals.done.as_deref(), Some("1.1"));
        assert_eq!(scan_text(text), s.signals);
    }

    #[test]
    fn unclosed_tag_carry_is_bounded() {
        let mut p = OutputParser::new();
        p.feed_line("<ralph>LEARN: this never closes");
        for _ in 0..2000 {
            p.feed_line(&"z".repeat(100));
        }
        assert!(p.carry.is_none(), "carry must be dropped past the cap");
        p.feed_line("</ralph>");
        p.feed_line("<ralph>DONE 1.1</ralph>");
        let s = p.finish();
        assert!(s.signals.learnings.is_empty());
        assert_eq!(s.signals.done.as_deref(), Some("1.1"));
    }

    #[test]
    fn last_done_and_fail_win() {
        let text = "<ralph>DONE 1.1</ralph>\n<ralph>FAIL 1.1: first</ralph>\n<ralph>DONE 1.2</ralph>\n<ralph>FAIL 1.3: second</ralph>";
        let s = both(text);
        assert_eq!(s.done.as_deref(), Some("1.2"));
        assert_eq!(s.fail, Some(("1.3".into(), "second".into())));

        let out = [
            INIT.to_string(),
            assistant_text("<ralph>DONE 1.1</ralph>"),
            assistant_text("<ralph>DONE 1.4</ralph>"),
        ]
        .join("\n");
        assert_eq!(parse_lines(&out).signals.done.as_deref(), Some("1.4"));
    }

    #[test]
    fn fail_reason_rules() {
        assert_eq!(
            scan_text("<ralph>FAIL 2.1: a | b || c</ralph>").fail,
            Some(("2.1".into(), "a - b -- c".into()))
        );
        // A reason may not contain `<`; such a tag is not a FAIL.
        assert_eq!(scan_text("<ralph>FAIL 2.1: a < b</ralph>").fail, None);
    }

    #[test]
    fn legacy_only_as_fallback() {
        let s = both("[DONE] Story 1.1\n<ralph>FAIL 1.1: real</ralph>");
        assert_eq!(s.done, None);
        assert_eq!(s.fail, Some(("1.1".into(), "real".into())));
        let s = both("[FAIL] Story 1.2 - flaky | tests\n[DONE] Story 1.2.");
        assert_eq!(s.done.as_deref(), Some("1.2"));
        assert_eq!(s.fail, Some(("1.2".into(), "flaky - tests".into())));
    }

    #[test]
    fn learnings_deduplicated_in_order() {
        let s = scan_text(
            "<ralph>LEARN: b</ralph><ralph>LEARN:  a </ralph><ralph>LEARN: b</ralph><ralph>LEARN: </ralph>",
        );
        assert_eq!(s.learnings, vec!["b".to_string(), "a".to_string()]);
    }

    #[test]
    fn rate_limit_event_rejected() {
        let mut p = OutputParser::new();
        let allowed = r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1795352682,"utilization":0.92}}"#;
        // A warning is not a limit (it lowers the run's concurrency instead).
        assert!(!p
            .feed_line(allowed)
            .iter()
            .any(|e| matches!(e, AgentEvent::RateLimited { .. })));
        let rejected = r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1795356277,"rateLimitType":"five_hour"}}"#;
        let ev = p.feed_line(rejected);
        assert!(matches!(
            &ev[..],
            [AgentEvent::RateLimited {
                resets_at: Some(1795356277),
                ..
            }]
        ));
        let synthetic = r#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"You've hit your session limit · resets 2:04pm (UTC)"}]},"parent_tool_use_id":null,"error":"rate_limit"}"#;
        p.feed_line(synthetic);
        let res = r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"num_turns":1,"result":"You've hit your session limit · resets 2:04pm (UTC)","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}"#;
        p.feed_line(res);
        let s = p.finish();
        assert_eq!(s.rate_limited, Some(Some(1795356277)));
        assert!(s.is_error);
    }

    #[test]
    fn rate_limits_from_text() {
        let s = parse_lines("You've hit your session limit · resets 2:04pm (UTC)");
        assert_eq!(s.rate_limited, Some(None));
        let s = parse_lines("Claude AI usage limit reached|1755615600");
        assert_eq!(s.rate_limited, Some(Some(1755615600)));
        let s = parse_lines(
            r#"{"type":"result","is_error":true,"api_error_status":429,"result":"API Error: Request rejected (429) · slow down"}"#,
        );
        assert_eq!(s.rate_limited, Some(None));
        let s = parse_lines(
            r#"{"type":"result","is_error":true,"api_error_status":null,"result":"API Error: Request rejected (429) · slow down"}"#,
        );
        assert_eq!(s.rate_limited, Some(None));
        // Prose about limits, or a successful result mentioning them, is not a limit.
        let s = parse_lines(
            "I added a banner shown when the usage limit is reached.\n<ralph>DONE 1.1</ralph>",
        );
        assert_eq!(s.rate_limited, None);
        let s = parse_lines(&result("Implemented: hit your rate limit handling.", false));
        assert_eq!(s.rate_limited, None);
        let s = parse_lines(&result("API Error: 529 Overloaded", true));
        assert_eq!(s.rate_limited, None);
    }

    /// Gemini says its quota is spent only on stderr (then sleeps for
    /// hours): the decoder's plain-line hook must turn that into a limit
    /// with its reset time.
    #[test]
    fn gemini_quota_on_stderr_is_a_limit_with_a_reset() {
        let (out, err) = (
            crate::testenv::fixture_text("agents/gemini/quota-429.stdout"),
            crate::testenv::fixture_text("agents/gemini/quota-429.stderr"),
        );
        let mut p = OutputParser::for_backend(super::super::Backend::Gemini);
        for line in out.lines().chain(err.lines()) {
            p.feed_line(line);
        }
        let s = p.finish();
        assert!(matches!(s.rate_limited, Some(Some(_))), "{s:?}");
    }

    /// A decoder's held text still counts when the agent dies mid-message.
    #[test]
    fn text_a_decoder_still_holds_at_the_end_is_scanned() {
        let mut p = OutputParser::for_backend(super::super::Backend::Gemini);
        p.feed_line(
            r#"{"type":"message","role":"assistant","content":"all done <ralph>DO","delta":true}"#,
        );
        p.feed_line(
            r#"{"type":"message","role":"assistant","content":"NE 1.1</ralph>","delta":true}"#,
        );
        assert_eq!(p.finish().signals.done.as_deref(), Some("1.1"));
    }

    #[test]
    fn a_limit_warning_is_kept_with_its_reset() {
        let mut p = OutputParser::new();
        let ev = p.feed_line(r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1795356277,"rateLimitType":"five_hour","utilization":0.92}}"#);
        assert_eq!(
            ev,
            vec![AgentEvent::LimitWarning {
                resets_at: Some(1795356277),
                used_percent: Some(92.0)
            }]
        );
        let s = p.finish();
        assert_eq!(s.limit_warning, Some(Some(1795356277)));
        assert_eq!(s.rate_limited, None);
    }

    #[test]
    fn a_rejected_key_is_noticed_at_the_first_retry() {
        let mut p = OutputParser::new();
        p.feed_line(r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":529,"error":"overloaded"}"#);
        assert!(!p.auth_failed());
        p.feed_line(r#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":600,"error_status":401,"error":"authentication_failed"}"#);
        assert!(p.auth_failed());
        assert!(p.finish().auth_failed);
    }

    #[test]
    fn a_retry_is_waiting_on_the_api_until_the_cli_says_more() {
        let mut p = OutputParser::new();
        p.feed_line(r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":429,"error":"rate_limit"}"#);
        p.feed_line(INIT);
        assert_eq!(p.summary.waiting_on_api, Some(Some(429)));
        p.feed_line(&assistant_text("Working."));
        assert_eq!(p.summary.waiting_on_api, None);
        p.feed_line(r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":null,"error":"unknown"}"#);
        assert_eq!(p.finish().waiting_on_api, Some(None));

        let mut p = OutputParser::for_backend(super::super::Backend::Codex);
        p.feed_line(r#"{"type":"error","message":"Reconnecting... 1/5 (exceeded retry limit, last status: 429 Too Many Requests)"}"#);
        assert_eq!(p.summary.waiting_on_api, Some(Some(429)));
        p.feed_line(r#"{"type":"turn.failed","error":{"message":"exceeded retry limit, last status: 429 Too Many Requests"}}"#);
        let s = p.finish();
        assert_eq!(s.waiting_on_api, None);
        assert_eq!(s.api_error_status, Some(429));
    }

    #[test]
    fn api_retry_event() {
        let mut p = OutputParser::new();
        let ev = p.feed_line(r#"{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":615.5,"error_status":529,"error":"overloaded"}"#);
        assert_eq!(
            ev,
            vec![AgentEvent::ApiRetry {
                attempt: 2,
                error: "overloaded (529), waiting 1s".into(),
                status: Some(529),
            }]
        );
        // Init carries nothing for the display but the session.
        assert_eq!(p.feed_line(INIT), vec![AgentEvent::SessionId("s".into())]);
    }

    #[test]
    fn root_refusal_line() {
        let s = parse_lines(
            "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons",
        );
        assert!(s.root_refusal);
        assert!(s.last_line.starts_with("--dangerously-skip-permissions"));
        assert!(
            !parse_lines(&tool_result(
                "--dangerously-skip-permissions cannot be used with root/sudo privileges"
            ))
            .root_refusal
        );
    }

    #[test]
    fn bad_input_never_panics() {
        let mut p = OutputParser::new();
        for line in [
            "{",
            "{}",
            "[1,2]",
            "null",
            r#"{"type":5}"#,
            r#"{"type":"assistant","message":{"content":"x"}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text"}]}}"#,
            r#"{"type":"result","usage":{"input_tokens":-1},"num_turns":"x","total_cost_usd":"free"}"#,
            "<ralph>",
            "</ralph>",
            "<ralph>DONE</ralph>",
            "\u{0}\u{fffd}é",
            "",
        ] {
            p.feed_line(line);
        }
        let s = p.finish();
        assert!(s.result_seen);
        assert_eq!(s.usage, Usage::default());
    }

    #[test]
    fn a_custom_agent_is_plain_text_even_when_a_line_looks_like_json() {
        let mut p = OutputParser::for_backend(crate::agent::Backend::Custom);
        for line in [
            r#"{"type":"system","subtype":"init","session_id":"s"}"#,
            "working on it",
            "<ralph>DONE 1.1</ralph>",
        ] {
            p.feed_line(line);
        }
        let s = p.finish();
        assert_eq!(s.signals.done.as_deref(), Some("1.1"));
        assert!(!s.result_seen);
    }

    #[test]
    fn last_line_is_truncated() {
        let s = parse_lines(&format!("first\n{}\n\n", "é".repeat(1000)));
        assert_eq!(s.last_line.chars().count(), LAST_LINE_CAP + 1);
    }
}

#[cfg(test)]
mod learn_angle_brackets {
    use super::*;

    #[test]
    fn a_learning_may_contain_angle_brackets() {
        let s = scan_text(
            "<ralph>LEARN: use Vec<u8> in lib/<name>.sh</ralph>\n<ralph>DONE 1.1</ralph>",
        );
        assert_eq!(s.learnings, vec!["use Vec<u8> in lib/<name>.sh"]);
        let s = scan_text("<ralph>LEARN: never closed\n<ralph>DONE 1.1</ralph>");
        assert!(s.learnings.is_empty());
        assert_eq!(s.done.as_deref(), Some("1.1"));
    }
}

/// A decomposition's answer is read from all of the agent's own text
/// (issue 21): sub-story blocks in an earlier message count, a result that
/// repeats the last message does not count twice, and tool output or a
/// sub-agent's words never count. For every backend's stream.
#[cfg(test)]
mod kept_text {
    use super::*;
    use crate::agent::Backend;
    use crate::decompose::{parse_reply, Reply};
    use serde_json::json;

    fn block(id: &str) -> String {
        format!(
            "<ralph>SUBSTORY_START {id}</ralph>\n---\nid: \"{id}\"\ntitle: \"Part {id}\"\nstatus: pending\ndepends_on: []\n---\n# Part {id}\n<ralph>SUBSTORY_END {id}</ralph>"
        )
    }

    fn blocks() -> String {
        format!(
            "Here is the split:\n{}\n{}\n",
            block("1.1.1"),
            block("1.1.2")
        )
    }

    const DONE: &str = "<ralph>DECOMPOSE_DONE 1.1: 2 sub-stories</ralph>";

    /// A block in tool output: a spec the agent read, an old answer.
    fn quoted() -> String {
        block("1.1.9")
    }

    fn kept(backend: Backend, events: &[Value]) -> Summary {
        let mut p = OutputParser::for_backend(backend).keeping_text(1 << 20);
        for e in events {
            p.feed_line(&e.to_string());
        }
        p.finish()
    }

    /// The children the answer gives, by ID.
    fn children(text: &str) -> Vec<String> {
        let known = std::collections::HashSet::new();
        match parse_reply(text, "1.1", &known) {
            Ok(Reply::Split(kids)) => kids.into_iter().map(|k| k.id).collect(),
            other => panic!("{other:?} from:\n{text}"),
        }
    }

    fn claude_text(text: &str) -> Value {
        json!({"type": "assistant", "message": {"id": "msg_1", "role": "assistant",
               "content": [{"type": "text", "text": text}]}, "parent_tool_use_id": null})
    }

    fn claude_result(text: &str) -> Value {
        json!({"type": "result", "subtype": "success", "is_error": false, "num_turns": 3,
               "result": text, "usage": {"input_tokens": 10, "output_tokens": 5}})
    }

    /// Shaped as `tests/fixtures/agents/claude/allowed-bash.stdout`: text,
    /// a tool call and its result, more text, the result repeating the last.
    #[test]
    fn claude_blocks_in_an_earlier_message_and_done_in_the_result() {
        let s = kept(
            Backend::Claude,
            &[
                json!({"type": "system", "subtype": "init", "session_id": "s1"}),
                claude_text("I'll read the spec first."),
                json!({"type": "assistant", "message": {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash",
                     "input": {"command": format!("echo '{}'", quoted())}}]},
                    "parent_tool_use_id": null}),
                json!({"type": "user", "message": {"role": "user", "content": [
                    {"tool_use_id": "t1", "type": "tool_result", "content": quoted()}]}}),
                json!({"type": "assistant", "message": {"role": "assistant", "content": [
                    {"type": "text", "text": block("1.1.7")}]}, "parent_tool_use_id": "t1"}),
                claude_text(&blocks()),
                claude_text(DONE),
                claude_result(DONE),
            ],
        );
        assert_eq!(children(&s.text), ["1.1.1", "1.1.2"], "{}", s.text);
        assert_eq!(s.text.matches("DECOMPOSE_DONE").count(), 1, "{}", s.text);
        assert!(!s.text.contains("1.1.9") && !s.text.contains("1.1.7"));
    }

    #[test]
    fn claude_result_repeating_the_blocks_counts_them_once() {
        let last = format!("{}{DONE}", blocks());
        let s = kept(
            Backend::Claude,
            &[
                claude_text("Thinking."),
                claude_text(&last),
                claude_result(&last),
            ],
        );
        assert_eq!(children(&s.text), ["1.1.1", "1.1.2"], "{}", s.text);
        // `--output-format json`: the result is all there is.
        let s = kept(Backend::Claude, &[claude_result(&last)]);
        assert_eq!(children(&s.text), ["1.1.1", "1.1.2"]);
    }

    #[test]
    fn codex_blocks_in_an_earlier_message() {
        let msg = |t: &str| json!({"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": t}});
        let s = kept(
            Backend::Codex,
            &[
                json!({"type": "thread.started", "thread_id": "th"}),
                json!({"type": "turn.started"}),
                msg(&blocks()),
                json!({"type": "item.completed", "item": {"id": "c", "type": "command_execution",
                       "command": "cat spec.md", "aggregated_output": quoted(), "exit_code": 0,
                       "status": "completed"}}),
                msg(DONE),
                json!({"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 5}}),
            ],
        );
        assert_eq!(children(&s.text), ["1.1.1", "1.1.2"], "{}", s.text);
        assert_eq!(s.text.matches("DECOMPOSE_DONE").count(), 1, "{}", s.text);
        assert!(!s.text.contains("1.1.9"));
    }

    #[test]
    fn opencode_blocks_in_an_earlier_message() {
        let text = |t: &str| json!({"type": "text", "sessionID": "ses", "part": {"type": "text", "text": t}});
        let s = kept(
            Backend::Opencode,
            &[
                text(&blocks()),
                json!({"type": "tool_use", "sessionID": "ses", "part": {"tool": "bash",
                       "state": {"status": "completed", "input": {"command": "cat"}, "output": quoted()}}}),
                text(DONE),
                json!({"type": "step_finish", "sessionID": "ses", "part": {"reason": "stop",
                       "tokens": {"input": 10, "output": 5}}}),
            ],
        );
        assert_eq!(children(&s.text), ["1.1.1", "1.1.2"], "{}", s.text);
        assert_eq!(s.text.matches("DECOMPOSE_DONE").count(), 1, "{}", s.text);
        assert!(!s.text.contains("1.1.9"));
    }

    #[test]
    fn gemini_blocks_in_an_earlier_message() {
        let msg =
            |t: &str| json!({"type": "message", "role": "assistant", "content": t, "delta": true});
        let s = kept(
            Backend::Gemini,
            &[
                json!({"type": "init", "session_id": "g"}),
                json!({"type": "message", "role": "user", "content": quoted()}),
                msg(&blocks()),
                json!({"type": "tool_use", "tool_name": "read_file", "tool_id": "t", "parameters": {"path": "x"}}),
                json!({"type": "tool_result", "tool_id": "t", "status": "success", "output": quoted()}),
                msg(DONE),
                json!({"type": "result", "status": "success", "stats": {"input_tokens": 10, "output_tokens": 5}}),
            ],
        );
        assert_eq!(children(&s.text), ["1.1.1", "1.1.2"], "{}", s.text);
        assert!(!s.text.contains("1.1.9"));
    }

    /// Cursor's result repeats every message, joined.
    #[test]
    fn cursor_result_repeating_every_message_counts_them_once() {
        let whole = |t: &str| {
            json!({"type": "assistant", "message": {"role": "assistant",
            "content": [{"type": "text", "text": t}]}, "timestamp_ms": 1u64, "model_call_id": "m"})
        };
        let s = kept(
            Backend::Cursor,
            &[
                json!({"type": "system", "subtype": "init", "session_id": "c"}),
                json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": quoted()}]}}),
                whole(&blocks()),
                json!({"type": "tool_call", "subtype": "completed", "tool_call": {"shellToolCall": {
                       "result": {"success": {"stdout": quoted()}}}}}),
                whole(DONE),
                json!({"type": "result", "subtype": "success", "is_error": false,
                       "result": format!("{}{DONE}", blocks())}),
            ],
        );
        assert_eq!(children(&s.text), ["1.1.1", "1.1.2"], "{}", s.text);
        assert_eq!(s.text.matches("DECOMPOSE_DONE").count(), 1, "{}", s.text);
        assert!(!s.text.contains("1.1.9"));
    }

    /// The recorded multi-message sessions of the CLIs
    /// (`tests/fixtures/agents/`), their words replaced: the first message
    /// gives the blocks and the last (and the result repeating it) only
    /// DECOMPOSE_DONE; where the CLI said one message only, it gives both.
    /// The tool's command and output quote a block of their own.
    #[test]
    fn recorded_sessions_give_the_blocks_once() {
        use crate::agent::testkit::{ANSWER, FIRST};
        let esc = |s: &str| {
            let j = serde_json::to_string(s).unwrap();
            j[1..j.len() - 1].to_string()
        };
        let cases = [
            ("claude", "allowed-bash", Backend::Claude),
            ("claude", "tool-default", Backend::Claude),
            ("opencode", "tool-json", Backend::Opencode),
            ("codex", "tool-bypass", Backend::Codex),
            ("gemini", "tool-yolo", Backend::Gemini),
        ];
        for (cli, name, backend) in cases {
            let dir = super::super::testkit::recording_dir(cli);
            let raw = std::fs::read_to_string(dir.join(format!("{name}.stdout"))).unwrap();
            let two_messages = raw.contains(FIRST);
            let last = if two_messages {
                DONE.to_string()
            } else {
                format!("{}{DONE}", blocks())
            };
            let mut p = OutputParser::for_backend(backend).keeping_text(1 << 20);
            for line in raw.lines() {
                let line = line
                    .replace(FIRST, &esc(&blocks()))
                    .replace(ANSWER, &esc(&last))
                    .replace("marker-from-tool", &esc(&quoted()));
                p.feed_line(&line);
            }
            let s = p.finish();
            assert_eq!(
                children(&s.text),
                ["1.1.1", "1.1.2"],
                "{cli}/{name}: {}",
                s.text
            );
            assert_eq!(
                s.text.matches("DECOMPOSE_DONE").count(),
                1,
                "{cli}/{name}: {}",
                s.text
            );
            assert!(!s.text.contains("1.1.9"), "{cli}/{name}: {}", s.text);
        }
    }

    /// Past the cap nothing more is kept, and the size says so.
    #[test]
    fn text_past_the_cap_is_counted_not_kept() {
        let mut p = OutputParser::for_backend(Backend::Claude).keeping_text(100);
        for e in [
            claude_text(&"x".repeat(60)),
            claude_text(&"y".repeat(60)),
            claude_result("z"),
        ] {
            p.feed_line(&e.to_string());
        }
        let s = p.finish();
        assert_eq!(s.text_bytes, 61 + 61 + 2);
        assert_eq!(s.text, format!("{}\n", "x".repeat(60)));
    }

    #[test]
    fn plain_text_is_read_whole() {
        let mut p = OutputParser::for_backend(Backend::Custom).keeping_text(1 << 20);
        for line in format!("{}\n{DONE}", blocks()).lines() {
            p.feed_line(line);
        }
        assert_eq!(children(&p.finish().text), ["1.1.1", "1.1.2"]);
    }
}
