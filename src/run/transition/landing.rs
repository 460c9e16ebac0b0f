//! The merge queue: finished work enters it, one landing at a time, and
//! what each landing's result decides (landed, a fix-up, a redo, a halt).

use crate::prompt;
use crate::report::{self, Message};
use crate::state::{AttemptKind, FixupCause, Note, Outcome};

use super::failure::{count_failure, failed_for_good, kind_of, redo_note};
use super::limits::halt;
use crate::run::events::{Action, GateAsk, LandAsk, LandPlan, LandResult, Now};
use crate::run::model::{Chain, Change, Fatal, Landing, Model, Policy};
use crate::run::record;
use crate::runlog::Ev;

pub(super) fn send_to_landing(
    model: &mut Model,
    idx: usize,
    attempt: u32,
    iteration: Option<u64>,
    out: &mut Vec<Action>,
) {
    model.apply(idx, Change::BeginLanding);
    out.push(Action::Save);
    model.land_queue.push_back(Landing {
        idx,
        attempt,
        iteration,
        since: None,
        approved: false,
        tests_let_be: false,
        trial: false,
    });
}

/// The merge queue takes the stories waiting, in arrival order: one, or a
/// chain of up to the window's depth (`landing.speculate`) validated side
/// by side, kept open (`Policy::streams`) for those that finish while it
/// validates; once the run is stopping, what waits stays `landing` for
/// the next run.
pub(super) fn next_landing(model: &mut Model, now: Now, out: &mut Vec<Action>) {
    if model.stopping() {
        while let Some(Landing { idx, .. }) = model.land_queue.pop_front() {
            model.apply(idx, Change::LandingInterrupted);
            out.push(Action::Say(Message::LandingStopped {
                id: model.id(idx).to_string(),
            }));
        }
        close_chain(model, out);
        return;
    }
    match model.chain {
        Chain::Closing => return,
        Chain::Open => {
            let room = model.window.saturating_sub(model.landing.len());
            let asks = take(model, room, now, out);
            if !asks.is_empty() {
                out.push(Action::ChainAdd(land_asks(asks)));
            } else if model.landing.is_empty() {
                close_chain(model, out);
            }
            return;
        }
        Chain::Idle => {}
    }
    if !model.landing.is_empty() {
        return;
    }
    let trial_first = model.land_queue.front().is_some_and(|l| l.trial);
    if model.policy.streams() && !trial_first && !model.land_queue.is_empty() {
        let asks = take(model, model.window, now, out);
        model.chain = Chain::Open;
        out.push(Action::LandChain(land_asks(asks)));
        return;
    }
    // A chain of candidates, each up to `landing.batch` stories.
    let n = super::batch::take(model.window, model.policy.batch, model.land_queue.len());
    let mut asks = if trial_first {
        Vec::new()
    } else {
        take(model, n, now, out)
    };
    if trial_first || asks.len() == 1 {
        // One story lands as it always did (remade on the user's commits,
        // the reviewer, review and pr modes); a racing candidate's trial
        // is validated alone (`LandPlan::Review`).
        let (next, gates) = match asks.pop() {
            Some(ask) => ask,
            None => match take_one(model, now, out) {
                Some(ask) => ask,
                None => return,
            },
        };
        out.push(Action::Land {
            idx: next.idx,
            attempt: next.attempt,
            approved: next.approved,
            gates,
            plan: match next.trial {
                true => LandPlan::Review,
                false => plan(model.policy.landing_mode, next.approved),
            },
        });
    } else if !asks.is_empty() {
        out.push(Action::LandChain(land_asks(asks)));
    }
}

fn land_asks(asks: Vec<(Landing, GateAsk)>) -> Vec<LandAsk> {
    asks.into_iter()
        .map(|(l, gates)| LandAsk {
            idx: l.idx,
            attempt: l.attempt,
            gates,
        })
        .collect()
}

/// Tells an open chain it gets no more stories.
fn close_chain(model: &mut Model, out: &mut Vec<Action>) {
    if model.chain == Chain::Open {
        model.chain = Chain::Closing;
        out.push(Action::ChainClose);
    }
}

/// Takes up to `n` waiting stories for the merge queue, in arrival order,
/// up to a racing candidate's trial (validated alone).
fn take(model: &mut Model, n: usize, now: Now, out: &mut Vec<Action>) -> Vec<(Landing, GateAsk)> {
    let mut asks = Vec::with_capacity(n);
    while asks.len() < n && model.land_queue.front().is_some_and(|l| !l.trial) {
        match take_one(model, now, out) {
            Some(ask) => asks.push(ask),
            None => break,
        }
    }
    asks
}

/// The story at the front of the queue, taken up by the merge queue.
fn take_one(model: &mut Model, now: Now, out: &mut Vec<Action>) -> Option<(Landing, GateAsk)> {
    let mut next = model.land_queue.pop_front()?;
    next.since = Some(now.mono);
    model.landing.push(next);
    out.push(Action::Record(Ev::LandStart {
        story: model.id(next.idx).to_string(),
        attempt: next.attempt,
    }));
    Some((next, super::gates::ask(model, &next)))
}

/// Results of the chain in flight, by story: each decided as a landing of
/// its own; those behind a failure go back to the front of the queue as
/// they were (nothing charged, their agents not run again), and the window
/// moves (`queue::window_after`). Once the chain `ended`, whatever of it
/// got no result goes back too.
pub(super) fn chain_results(
    model: &mut Model,
    results: Vec<(usize, LandResult)>,
    ended: bool,
    now: Now,
    out: &mut Vec<Action>,
) {
    let (landed, failed) = super::queue::tally(results.iter().map(|(_, r)| r));
    let mut requeue = Vec::new();
    for (idx, result) in results {
        // A story's result comes once; another is no landing of this chain.
        let Some(p) = model.landing.iter().position(|l| l.idx == idx) else {
            continue;
        };
        let landing = model.landing.remove(p);
        if matches!(result, LandResult::Behind) {
            requeue.push(landing);
        } else {
            landing_finished(model, landing, result, now, out);
        }
    }
    if ended {
        requeue.extend(std::mem::take(&mut model.landing));
        model.chain = Chain::Idle;
    }
    for landing in &requeue {
        let secs = landing
            .since
            .map(|t| now.mono.saturating_duration_since(t).as_secs_f64())
            .unwrap_or(0.0);
        out.push(Action::Record(record::land_end(
            model.id(landing.idx),
            landing.attempt,
            &LandResult::Behind,
            secs,
        )));
    }
    for l in requeue.into_iter().rev() {
        model.land_queue.push_front(Landing { since: None, ..l });
    }
    if landed > 0 || failed {
        model.window =
            super::queue::window_after(model.window, model.policy.speculate, landed, failed);
    }
}

/// `RALPH_RESULT` of finished work once its landing decided; `None` while
/// it is still to land (Ctrl-C, a lost race): its hooks wait for that.
fn hook_result(result: &LandResult) -> Option<&'static str> {
    match result {
        LandResult::Landed { .. } => Some("done"),
        LandResult::ValidationFailed { .. } => Some("fail"),
        LandResult::Conflict { .. } => Some("conflict"),
        LandResult::CheckoutBlocked { .. }
        | LandResult::Busy { .. }
        | LandResult::Unsigned { .. }
        | LandResult::Error(_) => Some("error"),
        LandResult::InReview => Some("review"),
        LandResult::InPr { .. } => Some("pr"),
        // The gates' decision says (`gates::gated`).
        LandResult::Interrupted
        | LandResult::Raced
        | LandResult::Behind
        | LandResult::Gated { .. }
        | LandResult::Reviewed { .. } => None,
    }
}

/// What a landing's end decides, one function per result: the reviewer's
/// answer first (approved, the landing's own end after it), then the
/// record and hooks every end gets, a split asked for by hand that did not
/// land, and the result's own arm.
pub(super) fn landing_finished(
    model: &mut Model,
    landing: Landing,
    result: LandResult,
    now: Now,
    out: &mut Vec<Action>,
) {
    // The reviewer first: its cost and verdict, then (approved) the landing.
    let result = match result {
        LandResult::Reviewed {
            review,
            then,
            saved_ref,
        } => {
            if let Some(then) = super::gates::reviewed(model, landing, review, then, saved_ref, out)
            {
                landing_finished(model, landing, then, now, out);
            }
            return;
        }
        other => other,
    };
    landing_ended(model, landing, &result, now, out);
    if split_refused(model, landing, &result, out) {
        return;
    }
    // A racing candidate's landing is the race's to judge (`handle` gives
    // it to `race::landing_ended` once this event is through).
    if model
        .racing
        .get(&landing.idx)
        .is_some_and(|r| r.validating().is_some())
    {
        model.race_landings.push((landing, result));
        return;
    }
    landing_result(model, landing, result, now, out);
}

/// A landing's own arm, one function per result.
pub(super) fn landing_result(
    model: &mut Model,
    landing: Landing,
    result: LandResult,
    now: Now,
    out: &mut Vec<Action>,
) {
    let idx = landing.idx;
    match result {
        LandResult::Landed { commit } => landed(model, landing, &commit, now, out),
        LandResult::InPr { url } => in_pr(model, idx, &url, out),
        LandResult::InReview => in_review(model, idx, out),
        LandResult::Conflict { paths, saved_ref } => {
            conflicted(model, landing, &paths, saved_ref, out);
        }
        LandResult::ValidationFailed {
            name,
            cmd,
            tail,
            saved_ref,
            log_rel,
        } => validation_failed(
            model, landing, name, cmd, tail, saved_ref, log_rel, now, out,
        ),
        LandResult::CheckoutBlocked { paths } => checkout_blocked(model, idx, &paths, out),
        LandResult::Busy { lock, holder } => busy(model, idx, &lock, holder, out),
        LandResult::Unsigned { message } => unsigned(model, idx, &message, out),
        LandResult::Interrupted => {
            model.apply(idx, Change::LandingInterrupted);
            let id = model.id(idx).to_string();
            out.push(Action::Say(Message::LandingStopped { id }));
        }
        LandResult::Gated {
            findings,
            saved_ref,
        } => super::gates::gated(model, landing, findings, saved_ref, out),
        // Taken apart before anything else (`gates::reviewed`), or by the
        // chain (`chain_finished`).
        LandResult::Reviewed { .. } | LandResult::Behind => {}
        LandResult::Raced => raced(model, landing, out),
        LandResult::Error(e) => land_error(model, idx, &e, out),
    }
}

/// What every landing's end gets: its record, a race count cleared by
/// any other end, and the post hooks once the result is decided.
fn landing_ended(
    model: &mut Model,
    landing: Landing,
    result: &LandResult,
    now: Now,
    out: &mut Vec<Action>,
) {
    let idx = landing.idx;
    let secs = landing
        .since
        .map(|t| now.mono.saturating_duration_since(t).as_secs_f64())
        .unwrap_or(0.0);
    out.push(Action::Record(record::land_end(
        model.id(idx),
        landing.attempt,
        result,
        secs,
    )));
    if *result != LandResult::Raced {
        model.races.remove(&idx);
    }
    if let (Some(iteration), Some(result)) = (landing.iteration, hook_result(result)) {
        model.hooks_running += 1;
        out.push(Action::PostHooks {
            id: model.id(idx).to_string(),
            iteration,
            result,
        });
    }
}

/// A split asked for by hand that does not land is refused like a bad
/// answer: the story as it was, nothing charged, its work kept. True when
/// `result` was that.
fn split_refused(
    model: &mut Model,
    landing: Landing,
    result: &LandResult,
    out: &mut Vec<Action>,
) -> bool {
    let idx = landing.idx;
    let refused = match result {
        LandResult::Conflict { paths, saved_ref } => Some((
            format!("its landing conflicted in {}", paths.join(", ")),
            saved_ref.clone(),
        )),
        LandResult::ValidationFailed {
            name, saved_ref, ..
        } => Some((
            format!("validation '{name}' failed on the merged tree"),
            saved_ref.clone(),
        )),
        _ => None,
    };
    let Some((why, saved_ref)) = refused.filter(|_| {
        model.policy.split_by_hand.is_some()
            && kind_of(model, idx, landing.attempt) == AttemptKind::Decompose
    }) else {
        return false;
    };
    let id = model.id(idx).to_string();
    model.apply(idx, Change::SplitRefused);
    let kept = saved_ref.unwrap_or_else(|| crate::project::story_branch(&id));
    out.push(Action::Log(format!(
        "story {id}: the split asked for by hand did not land: {why}"
    )));
    halt(
        model,
        Fatal::NeedsPerson(format!(
            "story {id} was not split: {why} (the sub-stories are kept at {kept}). Its \
             attempts and retries are as they were: run `ralph decompose {id}` again"
        )),
    );
    out.push(Action::Save);
    true
}

/// Landed as `commit`: done, said, and a decomposition's sub-stories
/// taken in once nothing runs.
fn landed(model: &mut Model, landing: Landing, commit: &str, now: Now, out: &mut Vec<Action>) {
    let idx = landing.idx;
    let story = model.stories[idx].clone();
    let id = story.id.clone();
    model.apply(idx, Change::Landed { commit });
    out.push(Action::Save);
    let rec = model.state.record(&id).cloned().unwrap_or_default();
    let tentative = rec
        .history
        .last()
        .is_some_and(|h| h.outcome == Outcome::Tentative);
    out.push(Action::Progress(report::progress_done(
        &id,
        &story.title,
        now.unix,
        tentative,
    )));
    out.push(Action::Say(Message::Landed {
        id: id.clone(),
        title: story.title.clone(),
        secs: rec.duration_secs,
        tokens: report::tokens(&rec.usage),
        cost_usd: rec.cost_usd,
        commit: commit.to_string(),
    }));
    out.push(Action::Log(format!("landed story {id} as {commit}")));
    let children = model
        .state
        .attempt(&id, landing.attempt)
        .filter(|a| a.kind() == AttemptKind::Decompose)
        .map(|a| a.children.clone())
        .unwrap_or_default();
    if !children.is_empty() {
        // Its sub-stories are in the backlog on the target now; the
        // run takes them in once nothing runs (`Model::reload_pending`).
        model.state.set_decomposed(&id, &children);
        model.reload_pending = true;
        out.push(Action::Say(Message::Decomposed {
            id: id.clone(),
            children,
        }));
    }
}

/// Validated and proposed as the pull request at `url` (`landing.mode: pr`).
fn in_pr(model: &mut Model, idx: usize, url: &str, out: &mut Vec<Action>) {
    let id = model.id(idx).to_string();
    let target = model.policy.target.clone();
    model.apply(idx, Change::InPr { url });
    out.push(Action::Save);
    out.push(Action::Say(Message::InPr {
        id: id.clone(),
        url: url.to_string(),
    }));
    out.push(Action::Log(format!(
        "story {id} passed validation on {target}; pull request {url}"
    )));
}

/// Validated and kept on its branch for a person (`landing.mode: review`).
fn in_review(model: &mut Model, idx: usize, out: &mut Vec<Action>) {
    let story = model.stories[idx].clone();
    let id = story.id.clone();
    let target = model.policy.target.clone();
    model.apply(idx, Change::InReview);
    out.push(Action::Save);
    out.push(Action::Say(Message::InReview {
        id: id.clone(),
        title: story.title.clone(),
    }));
    out.push(Action::Log(format!(
        "story {id} passed validation on {target} and waits for review on {}",
        crate::project::story_branch(&id)
    )));
}

/// The merge conflicted on `paths`: the kept work back to its agent in a
/// fix-up (once), else a redo told of the conflict; past
/// `max_conflicts`, a failure for good.
fn conflicted(
    model: &mut Model,
    landing: Landing,
    paths: &[String],
    saved_ref: Option<String>,
    out: &mut Vec<Action>,
) {
    let idx = landing.idx;
    let id = model.id(idx).to_string();
    let target = model.policy.target.clone();
    model.remember_conflict(idx, paths);
    // Kept work goes back to its agent, once: a fix-up whose own
    // result conflicts again is redone from scratch.
    let fixup = match saved_ref.clone() {
        Some(work) if kind_of(model, idx, landing.attempt) != AttemptKind::Fixup => {
            Some(Note::fixup(
                FixupCause::Conflict {
                    paths: paths.to_vec(),
                },
                work,
                landing.attempt,
            ))
        }
        _ => None,
    };
    let kept = saved_ref.unwrap_or_else(|| crate::project::story_branch(&id));
    let note = match fixup {
        Some(note) => note,
        None => Note {
            text: prompt::conflict_redo(&target, paths, &kept),
            fixup: None,
            redo: true,
            decompose: false,
            closest: None,
        },
    };
    let n = model
        .apply(
            idx,
            Change::Conflict {
                note: &format!("merge conflict in {}", paths.join(", ")),
            },
        )
        .count;
    out.push(Action::Say(Message::Conflict {
        id: id.clone(),
        target,
        paths: paths.to_vec(),
        fixup: note.fixup.is_some(),
    }));
    out.push(Action::Log(format!(
        "conflict landing {id}: {paths:?}; kept at {kept}"
    )));
    if n > model.policy.max_conflicts() {
        let blocked = model.apply(idx, Change::GiveUp).blocked;
        out.push(Action::Say(Message::ConflictGiveUp {
            id,
            conflicts: n,
            blocked: blocked.len(),
        }));
        failed_for_good(model, idx, out);
    } else {
        model.state.set_note(&id, Some(note));
    }
    out.push(Action::Save);
}

/// Validation `name` failed on the merged tree: the merged tree back to
/// its agent with the output (once), else a counted failure and a redo.
#[expect(
    clippy::too_many_arguments,
    reason = "the fields of LandResult::ValidationFailed, taken apart by the one caller"
)]
fn validation_failed(
    model: &mut Model,
    landing: Landing,
    name: String,
    cmd: String,
    tail: String,
    saved_ref: Option<String>,
    log_rel: String,
    now: Now,
    out: &mut Vec<Action>,
) {
    let idx = landing.idx;
    let id = model.id(idx).to_string();
    let tail_line = tail
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let reason = format!("validation '{name}' failed on the merged tree: {tail_line}");
    // The merged tree goes back to its agent with the output, once.
    let after_fixup = kind_of(model, idx, landing.attempt) == AttemptKind::Fixup;
    let note = match saved_ref.clone() {
        Some(work) if !after_fixup => Note::fixup(
            FixupCause::Validation {
                name: name.clone(),
                cmd,
                tail: tail.clone(),
                log: log_rel.clone(),
            },
            work,
            landing.attempt,
        ),
        _ => redo_note(model, &id, &reason, saved_ref.as_deref(), after_fixup),
    };
    if count_failure(
        model,
        idx,
        &reason,
        saved_ref.as_deref(),
        Some(&log_rel),
        note,
        now,
        out,
    ) {
        failed_for_good(model, idx, out);
    }
    out.push(Action::Save);
}

/// The main checkout has local changes to `paths` the landing would
/// overwrite: the work is finished, so it stays `landing` and the next run
/// lands it without running the agent again.
fn checkout_blocked(model: &mut Model, idx: usize, paths: &[String], out: &mut Vec<Action>) {
    let id = model.id(idx).to_string();
    model.apply(idx, Change::LandingInterrupted);
    halt(
        model,
        Fatal::NeedsPerson(format!(
            "story {id} is ready to land, but the main checkout has local changes to {}: \
             commit or stash them and run `ralph run` again, which lands the story's \
             work (kept on {}) without running its agent again",
            paths.join(", "),
            crate::project::story_branch(&id)
        )),
    );
    out.push(Action::Save);
}

/// Someone else's git kept `lock` through every wait, not the story: it
/// stays `landing`, and the next run lands it.
fn busy(
    model: &mut Model,
    idx: usize,
    lock: &std::path::Path,
    holder: Option<String>,
    out: &mut Vec<Action>,
) {
    let id = model.id(idx).to_string();
    model.apply(idx, Change::LandingInterrupted);
    let why = match holder {
        Some(h) => format!(
            "{h} kept running in the main checkout the whole time (a git command that \
             may write back the index it read before the landing): let it finish and"
        ),
        None => format!(
            "another process kept {} the whole time: let that git command finish (no \
             git running? then the lock is stale: remove it) and",
            lock.display()
        ),
    };
    halt(
        model,
        Fatal::NeedsPerson(format!(
            "story {id} is ready to land, but {why} run `ralph run` again to land it"
        )),
    );
    out.push(Action::Save);
}

/// The merge commit could not be signed: the user's signing setup, not the
/// story. Nothing is charged, the work stays `landing`, and the next run
/// lands it.
fn unsigned(model: &mut Model, idx: usize, message: &str, out: &mut Vec<Action>) {
    let id = model.id(idx).to_string();
    model.apply(idx, Change::LandingInterrupted);
    halt(
        model,
        Fatal::NeedsPerson(format!(
            "story {id} is ready to land, but its merge commit could not be signed: \
             {message}. {}; then `ralph run` lands it (kept on {}) without running its \
             agent again",
            crate::gitops::SignError::hint(),
            crate::project::story_branch(&id)
        )),
    );
    out.push(Action::Save);
}

/// The target moved under every round: back in the queue for another
/// turn, up to `MAX_RACES` turns, then a person is asked for a quieter
/// target.
fn raced(model: &mut Model, landing: Landing, out: &mut Vec<Action>) {
    let idx = landing.idx;
    let id = model.id(idx).to_string();
    let target = model.policy.target.clone();
    let n = {
        let n = model.races.entry(idx).or_default();
        *n += 1;
        *n
    };
    out.push(Action::Log(format!(
        "landing {id}: {target} moved under it every round ({n} turns); it lands later"
    )));
    if n < Policy::MAX_RACES {
        model.land_queue.push_back(landing);
    } else {
        model.apply(idx, Change::LandingInterrupted);
        halt(
            model,
            Fatal::NeedsPerson(format!(
                "story {id} is ready to land, but {target} kept moving under the merge \
                 queue for {n} turns: pause your commits to {target} and run `ralph run` \
                 again, which lands it without running its agent"
            )),
        );
        out.push(Action::Save);
    }
}

/// git or the machine failed, not the story: its finished work stays
/// `landing` (nothing charged) and the next run lands it.
fn land_error(model: &mut Model, idx: usize, e: &str, out: &mut Vec<Action>) {
    let id = model.id(idx).to_string();
    out.push(Action::Log(format!("landing {id} failed: {e}")));
    model.apply(idx, Change::LandingInterrupted);
    halt(
        model,
        Fatal::Internal(format!(
            "landing story {id} failed: {e}; its finished work is kept on {} and \
             lands on the next `ralph run` once the cause is fixed",
            crate::project::story_branch(&id)
        )),
    );
    out.push(Action::Save);
}

/// Where a story's validated work goes: review mode keeps it on its
/// branch for a person, unless a person approved it in this run; pr mode
/// opens a pull request of it (approved or not); else it lands. Pure.
pub(crate) fn plan(mode: crate::run::model::LandingMode, approved: bool) -> LandPlan {
    if mode.review && !approved {
        LandPlan::Review
    } else if mode.pr {
        LandPlan::PullRequest
    } else {
        LandPlan::Land
    }
}
