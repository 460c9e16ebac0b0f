//! What an attempt's verdict decides: landing, a retry and its note, a
//! pause, a fault, a failure for good (and a split), the circuit breaker.

use std::time::Duration;

use crate::agent::{FaultKind, Verdict};
use crate::prompt;
use crate::report::{self, Message};
use crate::state::{AttemptKind, AttemptRecord, Outcome};

use super::failure::{count_failure, failed_for_good, redo_note};
use super::landing::send_to_landing;
use super::limits::{api_fault, halt, needs_person, pause_agent, pause_new_work};
use crate::run::events::{Action, AttemptReport, Now};
use crate::run::model::{Change, Fatal, Model, Policy};
use crate::run::record;
use crate::runlog::Ev;

/// Where a running attempt runs, once its executor knows: kept in the
/// state (`status` reads it), recorded (the web view folds it in) and
/// shown. A placement of an attempt that has ended since, or said again,
/// changes nothing.
pub(super) fn placed(model: &mut Model, idx: usize, attempt: u32, node: String) -> Vec<Action> {
    let id = model.id(idx).to_string();
    let running = model.slots.contains(&Some(idx));
    let Some(rec) = model.state.stories.get_mut(&id) else {
        return Vec::new();
    };
    if !running || rec.attempts_started != attempt || rec.running_on.as_ref() == Some(&node) {
        return Vec::new();
    }
    rec.running_on = Some(node.clone());
    vec![
        Action::Record(Ev::AttemptPlaced {
            story: id.clone(),
            attempt,
            node: node.clone(),
        }),
        Action::Placed {
            id,
            candidate: None,
            node,
        },
        Action::Save,
    ]
}

/// What an attempt's end decides, one function per verdict: first what
/// every end does (the slot freed, the spend counted, the attempt
/// recorded and kept in the story's history), then the verdict's own arm.
pub(super) fn attempt_finished(
    model: &mut Model,
    r: AttemptReport,
    now: Now,
    out: &mut Vec<Action>,
) {
    let id = model.id(r.idx).to_string();
    slot_freed(model, &r, &id, out);
    spent(model, &r, &id, now, out);
    attempt_ended(model, r, now, out);
}

/// What an attempt's end decides once its slot is free and its spend
/// counted: its record, its place in the story's history, its verdict's
/// arm. A race's end comes here as one attempt (`race::race_lost`).
pub(super) fn attempt_ended(model: &mut Model, r: AttemptReport, now: Now, out: &mut Vec<Action>) {
    let id = model.id(r.idx).to_string();
    // `ralph stop ID` killed it: a person's choice, not the story's failure.
    let stopped_by_person =
        model.stop_asked.remove(&r.idx) && matches!(r.verdict, Verdict::Interrupted);
    let rec = attempt_record(&r, stopped_by_person);
    out.push(Action::Record(record::attempt_end(&id, &rec)));
    // What an attempt cut short by no fault of the story's (a stop, a
    // usage limit, a fault such as its cluster node lost) had done, for
    // the next prompt.
    let stopped_early = matches!(
        r.verdict,
        Verdict::Interrupted | Verdict::RateLimited { .. } | Verdict::Fault { .. }
    );
    let kept: Vec<String> = r.saved_ref.iter().chain(&r.kept).cloned().collect();
    if stopped_early && !kept.is_empty() {
        model
            .state
            .add_to_note(&id, &prompt::interrupted_before(&kept));
    }
    // Every verdict keeps its attempt in the history first (no arm's
    // choice reads it).
    model.state.push_history(&id, rec);
    match &r.verdict {
        Verdict::Done | Verdict::Tentative => work_finished(model, &r, &id, out),
        Verdict::Failed { reason, .. }
            if r.resumed && r.session_id.is_none() && report::tokens(&r.usage) == 0 =>
        {
            session_lost(model, r.idx, &id, reason, out);
        }
        Verdict::Failed { reason, .. }
            if r.kind == AttemptKind::Decompose && model.policy.split_by_hand.is_some() =>
        {
            split_failed(model, &r, &id, reason, out);
        }
        Verdict::Failed { reason, .. } => failed(model, &r, &id, reason, now, out),
        Verdict::RateLimited { resets_at } => rate_limited(model, &r, &id, *resets_at, now, out),
        Verdict::Interrupted if stopped_by_person => {
            model.apply(r.idx, Change::Requeue);
            out.push(Action::Save);
            out.push(Action::Say(Message::Steered {
                text: format!(
                    "{id} stopped (no retry charged); it is held until `ralph release {id}`"
                ),
            }));
        }
        Verdict::Interrupted => {
            model.apply(r.idx, Change::Requeue);
            out.push(Action::Say(Message::Stopped { id: id.clone() }));
        }
        Verdict::Fault { reason, kind } => fault(model, &r, &id, reason, kind, now, out),
        Verdict::RootRefusal => {
            model.apply(r.idx, Change::Requeue);
            needs_person(
                model,
                "Claude Code refuses --dangerously-skip-permissions when run as root. \
                 Run ralph as a normal user, or set IS_SANDBOX=1 if this is a sandbox or container."
                    .into(),
                out,
            );
        }
    }
    out.push(Action::Save);
}

/// The attempt's slot is free, and the streaks its verdict ends are over:
/// failures in a row (the breaker's), the story's faults, its agent's API
/// failures.
pub(super) fn slot_freed(model: &mut Model, r: &AttemptReport, id: &str, out: &mut Vec<Action>) {
    if let Some(rec) = model.state.stories.get_mut(id) {
        rec.running_on = None;
    }
    model.slots[r.slot] = None;
    model.slot_started[r.slot] = None;
    model.slot_model[r.slot] = None;
    if !matches!(r.verdict, Verdict::Failed { .. }) {
        model.recent_failures.clear();
    }
    if !matches!(r.verdict, Verdict::Fault { .. }) {
        model.faults.remove(&r.idx);
    }
    // The agent reached its API (an answer, even a 429): the streak of API
    // failures is over.
    if !matches!(r.verdict, Verdict::Fault { .. } | Verdict::Interrupted) {
        model.api_faults.remove(r.agent.unwrap_or("claude"));
    }
    out.push(Action::StoryFinished { id: id.to_string() });
}

/// What the attempt spent (the story's, the run's), one job fewer for a
/// while after a usage-limit warning, and its learnings to keep.
pub(super) fn spent(
    model: &mut Model,
    r: &AttemptReport,
    id: &str,
    now: Now,
    out: &mut Vec<Action>,
) {
    model
        .state
        .add_usage(id, r.usage, r.cost_usd, r.duration.as_secs_f64());
    model.run_cost_usd += r.cost_usd;
    model.run_cost_unknown |= r.cost_unknown;
    if let Some(reset) = r.limit_warning {
        let window = match reset {
            Some(t) => Duration::from_secs((t as i64 - now.unix).max(0) as u64),
            None => Policy::WARNING_WINDOW,
        };
        if model.policy.jobs > 1 && model.fewer_jobs_until.is_none_or(|u| u <= now.mono) {
            out.push(Action::Say(Message::LimitNear {
                jobs: model.policy.jobs - 1,
                secs: window.as_secs_f64(),
            }));
        }
        model.fewer_jobs_until = Some(now.mono + window);
    }
    model.run_tokens += report::tokens(&r.usage);
    if !r.learnings.is_empty() {
        out.push(Action::RecordLearnings {
            id: id.to_string(),
            learnings: r.learnings.clone(),
        });
    }
}

/// The attempt as the state's history keeps it.
pub(super) fn attempt_record(r: &AttemptReport, stopped_by_person: bool) -> AttemptRecord {
    let reason = match &r.verdict {
        Verdict::Failed { reason, .. } | Verdict::Fault { reason, .. } => Some(reason.clone()),
        _ => None,
    };
    AttemptRecord {
        number: r.attempt,
        kind: Some(r.kind),
        outcome: if stopped_by_person {
            Outcome::Stopped
        } else {
            Outcome::from(&r.verdict)
        },
        reason,
        duration_secs: r.duration.as_secs_f64(),
        usage: r.usage,
        cost_usd: r.cost_usd,
        cost_unknown: r.cost_unknown,
        model: r.model.clone(),
        saved_ref: r.saved_ref.clone(),
        agent: r.agent.map(str::to_string),
        session_id: r.session_id.clone(),
        slot: Some(r.slot),
        resumed: r.resumed,
        children: r.children.clone(),
        explained: r.explained.clone(),
        node: r.node.clone(),
    }
}

/// DONE: said, and on to the merge queue. The note stays until the
/// landing decides: a fix-up whose result fails to land is redone, told
/// what the fix-up was for.
fn work_finished(model: &mut Model, r: &AttemptReport, id: &str, out: &mut Vec<Action>) {
    if let Some((files, commit)) = &r.committed_for_agent {
        out.push(Action::Say(Message::CommittedForAgent {
            id: id.to_string(),
            files: *files,
            commit: commit.clone(),
        }));
    }
    out.push(Action::Say(Message::Finished {
        id: id.to_string(),
        secs: r.duration.as_secs_f64(),
    }));
    send_to_landing(model, r.idx, r.attempt, Some(r.iteration), out);
}

/// A resumed agent that failed before it even reported its session: its
/// CLI could not find the session (another machine, a cleared home). Not
/// the fix-up's failure: it runs again in a new session.
fn session_lost(model: &mut Model, idx: usize, id: &str, reason: &str, out: &mut Vec<Action>) {
    model.apply(idx, Change::Requeue);
    let fixup = model
        .state
        .stories
        .get_mut(id)
        .and_then(|s| s.note.as_mut())
        .and_then(|n| n.fixup.as_mut());
    if let Some(f) = fixup {
        f.fresh_session = true;
    }
    out.push(Action::Log(format!(
        "story {id}: the agent could not resume its session ({}); its fix-up runs in a new one",
        reason.replace('\n', " ")
    )));
}

/// `ralph decompose ID` asked for a split, not for the story's work: a
/// refused split costs the story nothing and runs nothing else.
fn split_failed(
    model: &mut Model,
    r: &AttemptReport,
    id: &str,
    reason: &str,
    out: &mut Vec<Action>,
) {
    model.apply(r.idx, Change::SplitRefused);
    let one_line = reason.replace('\n', " ");
    out.push(Action::Log(format!(
        "story {id}: the split asked for by hand failed: {one_line}"
    )));
    halt(
        model,
        Fatal::NeedsPerson(format!(
            "story {id} was not split: {one_line} (the answer: {}). Its attempts and \
             retries are as they were: run `ralph decompose {id}` again, or split it \
             by hand",
            r.log_rel
        )),
    );
    out.push(Action::Save);
}

/// The story's failure: counted, a redo told of it, or a failure for good
/// (unless the circuit breaker takes it back as a shared cause's).
fn failed(
    model: &mut Model,
    r: &AttemptReport,
    id: &str,
    reason: &str,
    now: Now,
    out: &mut Vec<Action>,
) {
    let note = redo_note(
        model,
        id,
        reason,
        r.saved_ref.as_deref(),
        r.kind == AttemptKind::Fixup,
    );
    let gone = count_failure(
        model,
        r.idx,
        reason,
        r.saved_ref.as_deref(),
        Some(&r.log_rel),
        note,
        now,
        out,
    );
    // The breaker takes back what one shared cause failed.
    if !circuit_breaker(model, r.idx, reason, out) && gone {
        failed_for_good(model, r.idx, out);
    }
}

/// A usage limit: the story waits, its agent paused until the reset (or a
/// back-off without one); a reset past `limits.max_wait_hours` asks for a
/// person instead.
fn rate_limited(
    model: &mut Model,
    r: &AttemptReport,
    id: &str,
    resets_at: Option<u64>,
    now: Now,
    out: &mut Vec<Action>,
) {
    model.apply(r.idx, Change::Requeue);
    let wait = match resets_at {
        // A little past the reset, so the quota has really come back.
        Some(t) => Duration::from_secs((t as i64 - now.unix).max(0) as u64 + 2),
        None => model.backoff,
    };
    model.backoff = (model.backoff * 2).min(Policy::MAX_BACKOFF);
    let agent = r.agent.unwrap_or("claude").to_string();
    if wait > model.policy.max_wait {
        needs_person(
            model,
            format!(
                "the {agent} agent hit its usage limit, which resets in {}: longer than \
                 limits.max_wait_hours ({}h), so ralph does not wait; run `ralph run` \
                 after the reset, or raise limits.max_wait_hours",
                crate::timefmt::human_duration(wait.as_secs_f64()),
                model.policy.max_wait.as_secs() / 3600
            ),
            out,
        );
    } else {
        pause_agent(model, agent, now.unix + wait.as_secs() as i64, out);
        out.push(Action::Say(Message::RateLimited {
            id: id.to_string(),
            wait_secs: wait.as_secs_f64(),
        }));
        out.push(Action::Log(format!("rate limited on {id}; pause {wait:?}")));
    }
}

/// A fault outside the story: the story waits; the API's faults are the
/// agent's, bounded in time, the others the story's slot or the machine's,
/// bounded in count (a pause that grows, then a person).
fn fault(
    model: &mut Model,
    r: &AttemptReport,
    id: &str,
    reason: &str,
    kind: &FaultKind,
    now: Now,
    out: &mut Vec<Action>,
) {
    model.apply(r.idx, Change::Requeue);
    let n = if *kind == FaultKind::Api {
        0
    } else {
        let n = model.faults.entry(r.idx).or_default();
        *n += 1;
        out.push(Action::Log(format!(
            "fault on {id} ({} in a row): {reason}",
            *n
        )));
        *n
    };
    match kind {
        FaultKind::Api => {
            api_fault(model, id, r.agent.unwrap_or("claude"), reason, now, out);
        }
        FaultKind::Transient if n < Policy::MAX_TRANSIENT_FAULTS => {
            let wait = Policy::FAULT_BACKOFF * 2u32.pow(n - 1);
            pause_new_work(model, now.mono + wait, out);
            out.push(Action::Say(Message::Fault {
                id: id.to_string(),
                reason: reason.to_string(),
                wait_secs: wait.as_secs_f64(),
                kept: r.saved_ref.clone(),
            }));
        }
        FaultKind::Transient | FaultKind::NeedsPerson => {
            halt(model, Fatal::NeedsPerson(reason.to_string()));
        }
        FaultKind::StopNow => needs_person(model, reason.to_string(), out),
    }
}

/// The same failure in several attempts in a row, across stories, is not
/// the stories' fault (a bad key, an unknown model, an agent that dies at
/// start): the run stops with one message and those attempts are taken back,
/// so after the fix `ralph run` just works. True when it took back story
/// `idx`'s attempt.
fn circuit_breaker(model: &mut Model, idx: usize, reason: &str, out: &mut Vec<Action>) -> bool {
    let cause: String = reason
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .chars()
        .take(200)
        .collect();
    if model.breaker_cause.as_deref() == Some(cause.as_str()) {
        model.apply(idx, Change::Refund);
        return true;
    }
    model.recent_failures.push((idx, cause.clone()));
    let n = Policy::BREAKER_ATTEMPTS;
    let recent = &model.recent_failures;
    if recent.len() < n {
        return false;
    }
    let last = &recent[recent.len() - n..];
    let same = last.iter().all(|(_, c)| *c == cause);
    let mut stories: Vec<usize> = last.iter().map(|(i, _)| *i).collect();
    stories.sort_unstable();
    stories.dedup();
    if !same || stories.len() < 2 {
        return false;
    }
    let taken: Vec<usize> = last.iter().map(|(i, _)| *i).collect();
    for i in taken {
        model.apply(i, Change::Refund);
    }
    model.recent_failures.clear();
    model.breaker_cause = Some(cause.clone());
    out.push(Action::Record(Ev::Breaker {
        reason: cause.clone(),
    }));
    let ids: Vec<&str> = stories.iter().map(|&i| model.id(i)).collect();
    let message = format!(
        "the same failure ended {n} attempts in a row, of stories {}: \"{cause}\". That is not \
         the stories' fault (credentials, the model name, the agent's installation?): \
         fix it and run `ralph run` again; those attempts were not counted",
        ids.join(", ")
    );
    out.push(Action::Log(format!("circuit breaker: {message}")));
    needs_person(model, message, out);
    true
}
