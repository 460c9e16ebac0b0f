//! `ralph log ID [--attempt N]`: an attempt's log (the agent's raw output,
//! `.ralph/logs/<id>/attempt-<n>.log`) as text a person reads. The lines
//! go through the same decoder the run used (`OutputParser::for_backend`,
//! with the backend the state recorded for that attempt), so what is shown
//! is what ralph understood: tool calls as one-line summaries, the agent's
//! text, limits and retries, the result and the `<ralph>` tags it found.

use std::io::{BufRead, Write};
use std::path::Path;

use crate::agent::event::AgentEvent;
use crate::agent::parser::{OutputParser, Summary};
use crate::agent::Backend;
use crate::error::{RalphError, EXIT_OK};
use crate::paths;
use crate::redact::Stream;
use crate::report::tokens;
use crate::state::AttemptRecord;
use crate::timefmt::human_duration;
use crate::ui::{self, Tone};

/// The log of an attempt that is still running, read as it grows: at its
/// end, the reader waits for more while a run holds the lock and the state
/// says this attempt of the story is running, and ends once it is not.
struct Follow {
    file: std::fs::File,
    root: std::path::PathBuf,
    id: String,
    attempt: u32,
}

/// How often a followed log is looked at again at its end (as `tail -f`).
const FOLLOW_POLL: std::time::Duration = std::time::Duration::from_millis(200);

impl Follow {
    fn still_running(&self) -> bool {
        if !crate::store::RunLock::is_held(&self.root) {
            return false;
        }
        let Ok(state) = crate::store::load_state(&self.root) else {
            return false;
        };
        state.record(&self.id).is_some_and(|r| {
            r.status == crate::state::Status::Running && r.attempts_started == self.attempt
        })
    }
}

impl std::io::Read for Follow {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = self.file.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            if !self.still_running() {
                // What it wrote between the last read and its end.
                return self.file.read(buf);
            }
            std::thread::sleep(FOLLOW_POLL);
        }
    }
}

pub(crate) fn cmd_log(
    root: &Path,
    id: &str,
    attempt: Option<u32>,
    raw: bool,
    follow: bool,
) -> anyhow::Result<i32> {
    // The ID names a directory: refuse anything that could leave the logs.
    if let Err(why) = crate::backlog::check_id(id) {
        return Err(RalphError::usage(format!("story ID {id:?} {why}")).into());
    }
    let dir = paths::logs_dir(root).join(id);
    let numbers = crate::store::logged_attempts(&dir);
    let Some(&latest) = numbers.last() else {
        return Err(RalphError::usage(format!(
            "story {id} has no attempt logs (looked in {})",
            dir.strip_prefix(root).unwrap_or(&dir).display()
        ))
        .with_hint("a log appears once an attempt starts; `ralph stories` lists the stories")
        .into());
    };
    let n = attempt.unwrap_or(latest);
    if !numbers.contains(&n) {
        let list: Vec<String> = numbers.iter().map(u32::to_string).collect();
        return Err(RalphError::usage(format!(
            "story {id} has no log of attempt {n}; logged attempts: {}",
            list.join(", ")
        ))
        .into());
    }
    let path = paths::attempt_log_path(root, id, n);
    let file = std::fs::File::open(&path)?;
    let input: Box<dyn std::io::Read> = if follow {
        Box::new(Follow {
            file,
            root: root.to_path_buf(),
            id: id.to_string(),
            attempt: n,
        })
    } else {
        Box::new(file)
    };
    // What is shown is redacted again, with this environment's secrets:
    // a log written before the filter decoded escapes, or a value the
    // rendering puts back together, never shows (issue 31).
    let secrets = crate::config::load(root)
        .map(|c| crate::serve::secrets(&c))
        .unwrap_or_default();
    let mut out = Redacted {
        inner: std::io::stdout().lock(),
        stream: Stream::new(secrets),
    };
    if raw {
        std::io::copy(&mut std::io::BufReader::new(input), &mut out)?;
        out.finish()?;
        return Ok(EXIT_OK);
    }
    let state = crate::store::load_state(root).unwrap_or_default();
    let record = state
        .record(id)
        .and_then(|r| r.history.iter().rev().find(|h| h.number == n))
        .cloned();
    let backend = record
        .as_ref()
        .and_then(|r| r.agent.as_deref())
        .and_then(Backend::parse)
        .or_else(|| crate::config::load(root).ok().map(|c| c.agent.name))
        .unwrap_or_default();
    let rel = path
        .strip_prefix(root)
        .unwrap_or(&path)
        .display()
        .to_string();
    let color = ui::stdout_colors();
    let header = Header {
        id,
        attempt: n,
        of: latest,
        backend,
        record: record.as_ref(),
        path: &rel,
    };
    render(std::io::BufReader::new(input), &header, &mut out, color)?;
    // The review gate's reviewer on this attempt's landing, and its verdict.
    let review = paths::review_log(root, id, n);
    if let Ok(file) = std::fs::File::open(&review) {
        let reviewer = crate::config::load(root)
            .ok()
            .and_then(|c| c.gates.review.map(|r| r.agent))
            .unwrap_or(backend);
        let rel = review
            .strip_prefix(root)
            .unwrap_or(&review)
            .display()
            .to_string();
        writeln!(out, "\n── the reviewer of attempt {n}'s landing ──")?;
        let header = Header {
            id,
            attempt: n,
            of: latest,
            backend: reviewer,
            record: None,
            path: &rel,
        };
        render(std::io::BufReader::new(file), &header, &mut out, color)?;
    }
    out.finish()?;
    Ok(EXIT_OK)
}

/// A writer that passes everything through the redaction filter.
struct Redacted<W: Write> {
    inner: W,
    stream: Stream,
}

impl<W: Write> Redacted<W> {
    /// Writes what the filter held back (an unfinished last line).
    fn finish(&mut self) -> std::io::Result<()> {
        let rest = self.stream.finish();
        self.inner.write_all(&rest)?;
        self.inner.flush()
    }
}

impl<W: Write> Write for Redacted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let clean = self.stream.push(buf);
        self.inner.write_all(&clean)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// What the log is of, for its first lines.
pub(crate) struct Header<'a> {
    pub(crate) id: &'a str,
    pub(crate) attempt: u32,
    /// The latest logged attempt.
    pub(crate) of: u32,
    pub(crate) backend: Backend,
    /// The attempt as the state recorded it, when it did.
    pub(crate) record: Option<&'a AttemptRecord>,
    pub(crate) path: &'a str,
}

/// What was printed last, to separate the agent's prose from tool lines.
#[derive(PartialEq, Eq, Clone, Copy)]
enum Last {
    Nothing,
    Text,
    Tool,
}

/// Writes the readable form of an attempt's output. Streams: the log may
/// be as large as the agent made it.
pub(crate) fn render(
    input: impl BufRead,
    header: &Header<'_>,
    out: &mut impl Write,
    color: bool,
) -> std::io::Result<()> {
    let dim = |s: &str| ui::paint(s, Tone::Dim, color);
    let mut title = format!(
        "story {} · attempt {} of {} · agent {}",
        header.id,
        header.attempt,
        header.of,
        header.backend.name()
    );
    if let Some(r) = header.record {
        let outcome = serde_json::to_value(r.outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        title.push_str(&format!(" · {outcome}"));
        if let Some(reason) = &r.reason {
            title.push_str(&format!(": {reason}"));
        }
        title.push_str(&format!(" · {}", human_duration(r.duration_secs)));
    }
    writeln!(out, "{}", ui::paint(&title, Tone::Bold, color))?;
    writeln!(out, "{}", dim(header.path))?;
    if let Some(r) = header.record.and_then(|r| r.saved_ref.as_deref()) {
        writeln!(out, "{}", dim(&format!("its commits are kept at {r}")))?;
    }

    let mut parser = OutputParser::for_backend(header.backend);
    let mut last = Last::Nothing;
    let mut buf = Vec::new();
    let mut input = input;
    loop {
        buf.clear();
        if input.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end_matches(['\n', '\r']);
        for ev in parser.feed_line(line) {
            event(out, ev, &mut last, color)?;
        }
    }
    for ev in parser.flush() {
        event(out, ev, &mut last, color)?;
    }
    summary(out, &parser.finish(), color)
}

fn event(
    out: &mut impl Write,
    ev: AgentEvent,
    last: &mut Last,
    color: bool,
) -> std::io::Result<()> {
    let mut turn = |out: &mut dyn Write, now: Last| -> std::io::Result<()> {
        if *last != now {
            writeln!(out)?;
        }
        *last = now;
        Ok(())
    };
    match ev {
        AgentEvent::Text(t) => {
            if t.trim().is_empty() {
                return Ok(());
            }
            turn(out, Last::Text)?;
            writeln!(out, "{}", t.trim_end())?;
        }
        AgentEvent::ToolUse { name, summary } => {
            turn(out, Last::Tool)?;
            let arrow = ui::paint("→", Tone::Busy, color);
            if summary.is_empty() {
                writeln!(out, "{arrow} {name}")?;
            } else {
                writeln!(out, "{arrow} {name}: {summary}")?;
            }
        }
        AgentEvent::Result {
            is_error,
            text,
            usage,
            cost_usd,
            num_turns,
            ..
        } => {
            *last = Last::Nothing;
            // The CLI's own status says the session ended well; an agent
            // that said FAIL did not do the work (issue 32: this said `ok`).
            let failed = said_fail(&text);
            let mut head = format!(
                "── result: {}",
                if is_error {
                    "error"
                } else if failed {
                    "FAIL (the agent said so)"
                } else {
                    "ok"
                }
            );
            if let Some(n) = num_turns {
                head.push_str(&format!(" · {n} turns"));
            }
            let t = tokens(&usage);
            if t > 0 {
                head.push_str(&format!(
                    " · {t} tokens ({} in, {} out, {} cache write, {} cache read)",
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cache_creation_input_tokens,
                    usage.cache_read_input_tokens
                ));
            }
            if let Some(c) = cost_usd {
                head.push_str(&format!(" · ${c:.4}"));
            }
            let tone = if is_error || failed {
                Tone::Bad
            } else {
                Tone::Good
            };
            writeln!(out, "\n{}", ui::paint(&head, tone, color))?;
            if !text.trim().is_empty() {
                writeln!(out, "{}", text.trim_end())?;
            }
        }
        AgentEvent::RateLimited { resets_at, message } => {
            turn(out, Last::Tool)?;
            let when = resets_at
                .map(|t| format!(" (resets {})", crate::timefmt::iso(t as i64)))
                .unwrap_or_default();
            let line = format!("!! usage limit: {}{when}", message.trim());
            writeln!(out, "{}", ui::paint(&line, Tone::Warn, color))?;
        }
        AgentEvent::ApiRetry { attempt, error, .. } => {
            turn(out, Last::Tool)?;
            let line = format!("!! API retry {attempt}: {error}");
            writeln!(out, "{}", ui::paint(&line, Tone::Warn, color))?;
        }
        AgentEvent::LimitWarning { used_percent, .. } => {
            turn(out, Last::Tool)?;
            let line = match used_percent {
                Some(p) => format!("!! usage limit near ({p:.0}% used)"),
                None => "!! usage limit near".to_string(),
            };
            writeln!(out, "{}", ui::paint(&line, Tone::Warn, color))?;
        }
        AgentEvent::SessionId(_)
        | AgentEvent::Usage { .. }
        | AgentEvent::Aside(_)
        | AgentEvent::Thinking
        | AgentEvent::ApiError(_)
        | AgentEvent::AuthRejected => {}
    }
    Ok(())
}

/// The tags ralph read, last: what decided the attempt.
fn summary(out: &mut impl Write, s: &Summary, color: bool) -> std::io::Result<()> {
    writeln!(out)?;
    let signal = match (&s.signals.done, &s.signals.fail) {
        (Some(id), _) => ui::paint(&format!("signal: DONE {id}"), Tone::Good, color),
        (None, Some((id, why))) => {
            ui::paint(&format!("signal: FAIL {id}: {why}"), Tone::Bad, color)
        }
        (None, None) => ui::paint(
            "signal: none (no <ralph>DONE/FAIL</ralph> tag)",
            Tone::Warn,
            color,
        ),
    };
    writeln!(out, "{signal}")?;
    for l in &s.signals.learnings {
        writeln!(out, "learned: {l}")?;
    }
    if let Some(id) = &s.session_id {
        writeln!(
            out,
            "{}",
            ui::paint(&format!("session: {id}"), Tone::Dim, color)
        )?;
    }
    Ok(())
}

/// Whether the agent's last `<ralph>` verdict in a result's `text` is FAIL.
fn said_fail(text: &str) -> bool {
    match (text.rfind("<ralph>FAIL"), text.rfind("<ralph>DONE")) {
        (Some(f), Some(d)) => f > d,
        (f, _) => f.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render_str(log: &str, backend: Backend) -> String {
        let header = Header {
            id: "1.1",
            attempt: 1,
            of: 1,
            backend,
            record: None,
            path: ".ralph/logs/1.1/attempt-1.log",
        };
        let mut out = Vec::new();
        render(log.as_bytes(), &header, &mut out, false).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn claude_stream_reads_as_text() {
        let log = [
            r#"{"type":"system","subtype":"init","session_id":"s-1"}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"I'll read the spec."}]}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Read","input":{"file_path":"/home/u/p/.ralph/worktrees/slot-0/specs/a.md"}}]}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"<ralph>DONE 9.9</ralph> quoted","is_error":false}]}}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"num_turns":3,"result":"Done. <ralph>LEARN: use wc -w</ralph> <ralph>DONE 1.1</ralph>","total_cost_usd":0.0123,"usage":{"input_tokens":100,"output_tokens":20}}"#,
        ]
        .join("\n");
        let text = render_str(&log, Backend::Claude);
        assert_eq!(
            text,
            "story 1.1 · attempt 1 of 1 · agent claude\n\
             .ralph/logs/1.1/attempt-1.log\n\
             \n\
             I'll read the spec.\n\
             \n\
             → Read: specs/a.md\n\
             \n\
             ── result: ok · 3 turns · 120 tokens (100 in, 20 out, 0 cache write, 0 cache read) · $0.0123\n\
             Done. <ralph>LEARN: use wc -w</ralph> <ralph>DONE 1.1</ralph>\n\
             \n\
             signal: DONE 1.1\n\
             learned: use wc -w\n\
             session: s-1\n"
        );
    }

    #[test]
    fn plain_text_agents_are_shown_line_by_line() {
        let text = render_str(
            "working\n\n<ralph>FAIL 1.1: no idea</ralph>\n",
            Backend::Custom,
        );
        assert!(
            text.contains("\nworking\n<ralph>FAIL 1.1: no idea</ralph>\n"),
            "{text}"
        );
        assert!(text.ends_with("signal: FAIL 1.1: no idea\n"), "{text}");
    }

    /// Regression: an attempt that said FAIL was shown as `result: ok`.
    #[test]
    fn a_result_that_said_fail_is_shown_as_fail() {
        assert!(said_fail("cannot do it <ralph>FAIL 1.1: no tests</ralph>"));
        assert!(!said_fail(
            "<ralph>FAIL 1.1: x</ralph> then <ralph>DONE 1.1</ralph>"
        ));
        assert!(!said_fail("<ralph>DONE 1.1</ralph>"));
    }
}
