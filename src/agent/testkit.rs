//! What the decoders' tests share: the CLIs' output under
//! `tests/fixtures/agents/` (Claude Code's and Codex's recorded by
//! `tests/record-agents.sh`, the others' written in their documented
//! format by `tests/fixtures/agents/authored.py`), feeding lines through
//! the shared parser, and the parse-speed measure.

use std::path::PathBuf;

use super::event::AgentEvent;
use super::parser::{OutputParser, Summary};
use super::Backend;

/// What every scripted model answers when it is finished.
pub(super) const ANSWER: &str = "Finished: every check passes.";
/// The command the scripted models ask the CLIs' shell tools to run.
pub(super) const TOOL: &str = "echo marker-from-tool && touch agent-was-here.txt";
/// The text a model says before it asks for the tool, where it says one.
pub(super) const FIRST: &str = "I'll write and commit the file.";

/// `tests/fixtures/agents/<cli>/`.
pub(super) fn recording_dir(cli: &str) -> PathBuf {
    crate::testenv::fixture(&format!("agents/{cli}"))
}

/// Every recorded `*.stdout` of `cli`: (scenario, text), sorted.
pub(super) fn recordings(cli: &str) -> Vec<(String, String)> {
    let dir = recording_dir(cli);
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "stdout"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

/// `lines` fed through `backend`'s parser, as an attempt would.
pub(super) fn parse<S: AsRef<str>>(
    backend: Backend,
    lines: impl IntoIterator<Item = S>,
) -> Summary {
    let mut p = OutputParser::for_backend(backend);
    for l in lines {
        p.feed_line(l.as_ref());
    }
    p.finish()
}

/// `events` through `backend`'s decoder alone (no parser), in order.
pub(super) fn decode(backend: Backend, events: &[serde_json::Value]) -> Vec<AgentEvent> {
    let mut d = super::backend::Decoder::for_backend(backend).expect("a JSON backend");
    events
        .iter()
        .flat_map(|e| d.event(e).unwrap_or_default())
        .collect()
}

/// Parse speed of `backend` on ~50 MB made of `lines` repeated; prints the
/// figure (run the `#[ignore]`d tests with `--release -- --ignored --nocapture`).
pub(super) fn throughput(backend: Backend, lines: &[&str]) -> Summary {
    let round: usize = lines.iter().map(|l| l.len() + 1).sum();
    let rounds = 50_000_000 / round + 1;
    let started = std::time::Instant::now();
    let mut p = OutputParser::for_backend(backend);
    let mut events = 0usize;
    for _ in 0..rounds {
        for l in lines {
            events += p.feed_line(l).len();
        }
    }
    let s = p.finish();
    let secs = started.elapsed().as_secs_f64();
    let mb = (round * rounds) as f64 / 1e6;
    println!(
        "{}: {mb:.1} MB, {} lines, {events} events in {secs:.2} s = {:.1} MB/s",
        backend.name(),
        lines.len() * rounds,
        mb / secs
    );
    s
}

/// `text`'s lines fed through `backend`'s parser: the events it gave, and
/// the summary.
pub(super) fn events(backend: Backend, text: &str) -> (Vec<AgentEvent>, Summary) {
    let mut p = OutputParser::for_backend(backend);
    let events = text.lines().flat_map(|l| p.feed_line(l)).collect();
    (events, p.finish())
}

/// The recordings answer `ANSWER`; with the answer a prompt asks for, the
/// recording `name` must give the tag and the learning.
pub(super) fn assert_tagged_answer_is_done(backend: Backend, name: &str, text: &str) {
    let tagged = text.replace(
        ANSWER,
        "All tests pass.\\n<ralph>LEARN: run the linter first</ralph>\\n<ralph>DONE 1.1</ralph>",
    );
    assert_ne!(tagged, text, "{name}");
    let (_, s) = events(backend, &tagged);
    assert_eq!(s.signals.done.as_deref(), Some("1.1"), "{name}");
    assert_eq!(s.signals.learnings, vec!["run the linter first"], "{name}");
    assert!(s.result_seen && !s.is_error, "{name}");
    assert_eq!(s.last_line, "<ralph>DONE 1.1</ralph>", "{name}");
}
