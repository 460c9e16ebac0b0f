//! A failed attempt counted, for whatever ended it (its verdict, or its
//! landing): the note its next try is told, a failure for good (or a
//! decomposition instead), and what kind of attempt it was. Below both
//! `outcome` and `landing`, which each decide when a failure is one.

use crate::prompt;
use crate::report::{self, Message};
use crate::state::{AttemptKind, AttemptRecord, Note, Outcome};

use crate::run::events::{Action, Now};
use crate::run::model::{Change, Model};
use crate::runlog::Ev;

/// The note of a fresh start after a failure: the failure, and when it was
/// a fix-up's, what that fix-up was for (its work is still kept).
pub(super) fn redo_note(
    model: &Model,
    id: &str,
    reason: &str,
    saved_ref: Option<&str>,
    after_fixup: bool,
) -> Note {
    let mut text = prompt::failed_before(&reason.replace('\n', " "), saved_ref);
    let before = model.state.note(id).filter(|n| n.fixup.is_some());
    if let Some(before) = before.filter(|_| after_fixup) {
        text = format!(
            "{}\n\nA fix-up of that work failed too. {text}",
            prompt::note_context(before, &model.policy.target)
        );
    }
    Note {
        text,
        fixup: None,
        redo: true,
        decompose: false,
        closest: None,
    }
}

/// What the attempt whose work landed (or tried to) was.
pub(super) fn kind_of(model: &Model, idx: usize, attempt: u32) -> AttemptKind {
    model
        .state
        .attempt(model.id(idx), attempt)
        .map(AttemptRecord::kind)
        .unwrap_or_default()
}

/// Counts a failed attempt; when the story gets another, `note` is what
/// that one is told. True when the story failed for good (and is not to
/// be split).
#[expect(clippy::too_many_arguments, reason = "one call site per cause")]
pub(super) fn count_failure(
    model: &mut Model,
    idx: usize,
    reason: &str,
    saved_ref: Option<&str>,
    log: Option<&str>,
    note: Note,
    now: Now,
    out: &mut Vec<Action>,
) -> bool {
    let id = model.id(idx).to_string();
    let max = model.policy.max_retries;
    let applied = model.apply(idx, Change::Fail { reason });
    let n = applied.count;
    let one_line = reason.replace('\n', " ");
    out.push(Action::Progress(report::progress_fail(
        &id, &one_line, now.unix, n, max,
    )));
    out.push(Action::Say(Message::Failed {
        id: id.clone(),
        attempt: n,
        max,
        reason: one_line.clone(),
        log: log.filter(|l| !l.is_empty()).map(str::to_string),
        kept: saved_ref.map(str::to_string),
    }));
    out.push(Action::Log(format!(
        "story {id} failed attempt {n}/{max}: {one_line}"
    )));
    if applied.failed_for_good && n < max && model.over_story_budget(&id) {
        out.push(Action::Log(format!(
            "story {id} has spent its budget.max_cost_per_story_usd: no retry"
        )));
    }
    if applied.failed_for_good {
        if let Some(note) = decomposition_note(model, &id) {
            model.apply(idx, Change::Decompose { note: &note });
            out.push(Action::Say(Message::Decomposing {
                id: id.clone(),
                max,
            }));
            out.push(Action::Log(format!(
                "story {id} failed for good; its next run splits it into sub-stories"
            )));
            return false;
        }
        let blocked = applied.blocked.iter().map(|&b| model.id(b).to_string());
        out.push(Action::Say(Message::FailedForGood {
            id,
            max,
            blocked: blocked.collect(),
        }));
        true
    } else {
        model.state.set_note(&id, Some(note));
        false
    }
}

/// Records that story `idx` failed for good, with the error the state
/// keeps for it.
pub(super) fn failed_for_good(model: &Model, idx: usize, out: &mut Vec<Action>) {
    let story = model.id(idx).to_string();
    let reason = model
        .state
        .record(&story)
        .and_then(|r| r.last_error.clone());
    out.push(Action::Record(Ev::FailedForGood { story, reason }));
}

/// The note of a decomposition run when story `id`, failed for good, gets
/// one (`decomposition.*`: enabled, not tried yet, not too deep): the
/// failure history in words, for its prompt.
fn decomposition_note(model: &Model, id: &str) -> Option<String> {
    let max_depth = model.policy.decompose_depth?;
    if model.state.decomposition_tried(id)
        || crate::decompose::depth(id, &model.state.decomposed()) >= max_depth
    {
        return None;
    }
    let rec = model.state.record(id)?;
    let lines: Vec<String> = rec
        .history
        .iter()
        .filter(|h| h.outcome != Outcome::Fault)
        .map(|h| {
            format!(
                "- attempt {} ({}): {}{}",
                h.number,
                h.kind().as_str(),
                format!("{:?}", h.outcome).to_lowercase(),
                h.reason
                    .as_deref()
                    .map(|r| format!(": {}", r.replace('\n', " ")))
                    .unwrap_or_default()
            )
        })
        .collect();
    Some(lines.join("\n"))
}
