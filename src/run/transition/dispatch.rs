//! Choosing and starting attempts: which ready stories start now, in
//! which slot, with which agent and session, and the jobs allowed now.

use crate::agent::{self, Backend};
use crate::config::Conflicts;
use crate::report::Message;
use crate::runlog::{Ev, PauseWhy};
use crate::schedule::{Bounds, Fewer, Jobs, StoryState};
use crate::state::AttemptKind;

use super::finish::{budget_ahead_for, budget_spent};
use super::limits::halt;
use crate::run::events::{Action, AttemptRequest, Now};
use crate::run::model::{Change, Fatal, Model, Policy};
use crate::run::record;

/// Starts what can start.
pub(super) fn dispatch(model: &mut Model, now: Now, out: &mut Vec<Action>) {
    if model.stopping()
        || model.fatal.is_some()
        || model.pause_until.is_some()
        || model.reload_pending
        || model.new_work_paused()
    {
        return;
    }
    if let Some(spent) = budget_spent(model) {
        // Nothing new starts; what runs finishes and lands.
        if model.sched().next().is_some() {
            out.push(Action::Log(spent.clone()));
            out.push(Action::Record(Ev::Pause {
                why: PauseWhy::Budget,
                agent: None,
                until: None,
            }));
            model.fatal = Some(Fatal::NeedsPerson(spent));
        }
        return;
    }
    // One job is the sequential loop: the next story starts from a tip
    // that holds the previous one, so it waits for its landing, and its
    // iteration begins after the previous one's post hooks ended.
    if model.policy.jobs == 1 && (model.count(StoryState::Landing) > 0 || model.hooks_running > 0) {
        return;
    }
    // Near a usage limit one job fewer, and no more than memory holds
    // (never fewer than one).
    let jobs = model.jobs_now(now);
    note_jobs(model, &jobs, now, out);
    let busy = model.slots.iter().filter(|s| s.is_some()).count();
    // Candidates of a running race take free slots before new stories.
    let free = jobs.now.saturating_sub(busy);
    let free = free - super::race::start_waiting(model, free, now, out);
    // Retries run one at a time (`parallel.retry_concurrency`): a shared
    // cause (a broken target, a flaky service) fails them all at once
    // otherwise, and first attempts keep the other slots busy.
    let is_retry = |i: usize| model.is_retry(i);
    let running_retries = model
        .slots
        .iter()
        .flatten()
        .filter(|&&i| is_retry(i))
        .count();
    let bounds = Bounds {
        retries: model
            .policy
            .retry_concurrency
            .saturating_sub(running_retries),
        is_retry: &is_retry,
        files: &model.files,
        declared: (model.policy.conflicts == Conflicts::Wait).then_some(&model.stories[..]),
        held: &|i| model.is_held(i),
    };
    let chosen = model.sched().choose(free, bounds);
    for idx in chosen {
        if model.limit_reached() {
            return;
        }
        // `ralph decompose ID` runs the split and nothing else: a split
        // that did not land (a conflict, say) leaves the story to `ralph run`.
        if model.policy.split_by_hand.is_some()
            && model.state.next_kind(model.id(idx)) != AttemptKind::Decompose
        {
            let id = model.id(idx).to_string();
            let why = model
                .state
                .record(&id)
                .and_then(|r| r.last_error.clone())
                .unwrap_or_else(|| "it did not land".into());
            halt(
                model,
                Fatal::NeedsPerson(format!(
                    "story {id} was not split ({why}); `ralph decompose {id}` runs only the \
                     split: run it again, or `ralph run` to go on with the story"
                )),
            );
            return;
        }
        // Its agent is at its limit (and no fallback is free): it waits.
        let Some((agent, chosen)) = model.agent_and_model(idx, now) else {
            continue;
        };
        // The budget looks ahead: what the running attempts are expected
        // to cost counts as spent, so it is overshot by one attempt at most;
        // a race reserves what all its candidates are expected to cost.
        let races = super::race::races(model, idx);
        let starting: Vec<Option<String>> = if races {
            super::race::runners(model, idx, (agent, chosen.clone()))
                .into_iter()
                .map(|(_, m)| m)
                .collect()
        } else {
            Vec::new()
        };
        if budget_ahead_for(model, &starting, None).is_some()
            && model.slots.iter().any(Option::is_some)
        {
            return;
        }
        // Starts are spaced: the next waits for its turn.
        if model.next_start_at.is_some_and(|t| t > now.mono) {
            return;
        }
        if !model.policy.stagger.is_zero() {
            model.next_start_at = Some(now.mono + model.policy.stagger);
        }
        let Some(slot) = slot_for(model, idx, agent) else {
            return;
        };
        if races {
            let busy = model.slots.iter().filter(|s| s.is_some()).count();
            let room = jobs.now.saturating_sub(busy);
            super::race::start_race(model, idx, (agent, chosen), room, now, out);
            continue;
        }
        model.slot_started[slot] = Some(now.mono);
        start(model, idx, slot, agent, chosen, out);
    }
}

/// The session a fix-up of story `idx` would resume, run by `agent` in
/// `slot`: the one of the attempt whose work it fixes, when the same CLI
/// runs it in the same worktree (a session's history names that
/// worktree's paths; Claude Code also finds sessions by directory).
fn session_to_resume(model: &Model, idx: usize, slot: usize, agent: Backend) -> Option<String> {
    if !model.policy.resume_session || !agent::resumes(agent) {
        return None;
    }
    let id = model.id(idx);
    let fixup = model.state.note(id)?.fixup.as_ref()?;
    if fixup.fresh_session {
        return None;
    }
    let rec = model.state.attempt(id, fixup.attempt)?;
    (rec.agent.as_deref() == Some(agent.name()) && rec.slot == Some(slot))
        .then(|| rec.session_id.clone())
        .flatten()
}

/// A free slot for story `idx`: the one its session can be resumed in when
/// that one is free, else the first free one.
fn slot_for(model: &Model, idx: usize, agent: Backend) -> Option<usize> {
    let free = |s: usize| model.slots.get(s).is_some_and(Option::is_none);
    let id = model.id(idx);
    let own = model
        .state
        .note(id)
        .and_then(|n| n.fixup.as_ref())
        .and_then(|f| model.state.attempt(id, f.attempt))
        .and_then(|rec| rec.slot)
        .filter(|&s| free(s) && session_to_resume(model, idx, s, agent).is_some());
    own.or_else(|| model.slots.iter().position(Option::is_none))
}

/// Records the jobs allowed now for `status --json` (saved when the
/// decision or its reasons change) and says when memory lowers them.
fn note_jobs(model: &mut Model, jobs: &Jobs, now: Now, out: &mut Vec<Action>) {
    if !model.state.jobs.as_ref().is_some_and(|j| j.same_as(jobs)) {
        model.state.jobs = Some(jobs.clone());
        out.push(Action::Save);
    }
    if !jobs.memory_bound() {
        model.memory_said = None;
        model.recheck_at = None;
        return;
    }
    // Memory frees up without any event of the run's: look again soon.
    if model.recheck_at.is_none() {
        model.recheck_at = Some(now.mono + Policy::MEMORY_RECHECK);
    }
    if model.memory_said.is_none_or(|said| jobs.now < said) {
        model.memory_said = Some(jobs.now);
        if let Some(Fewer::Memory {
            available_mb,
            per_agent_mb,
        }) = jobs
            .fewer
            .iter()
            .find(|f| matches!(f, Fewer::Memory { .. }))
        {
            out.push(Action::Say(Message::MemoryLow {
                jobs: jobs.now,
                asked: jobs.asked,
                available_mb: *available_mb,
                per_agent_mb: *per_agent_mb,
            }));
            out.push(Action::Log(format!(
                "memory: {available_mb} MB available, {per_agent_mb} MB per agent: at most {} of {} jobs",
                jobs.now, jobs.asked
            )));
        }
    }
}

fn start(
    model: &mut Model,
    idx: usize,
    slot: usize,
    agent: Backend,
    chosen: Option<String>,
    out: &mut Vec<Action>,
) {
    let (kind, note) = model.begin_attempt(idx);
    let id = model.id(idx).to_string();
    let resume = match kind {
        AttemptKind::Fixup => session_to_resume(model, idx, slot, agent),
        _ => None,
    };
    // A session on a cluster lives on the node that ran its attempt.
    let resume_on = resume.as_ref().and_then(|_| {
        let fixup = model.state.note(&id)?.fixup.as_ref()?;
        model.state.attempt(&id, fixup.attempt)?.node.clone()
    });
    let attempt = model.apply(idx, Change::Start).attempt;
    model.slots[slot] = Some(idx);
    model.slot_model[slot] = chosen.clone();
    out.push(Action::Save);
    let title = model.stories[idx].title.clone();
    let counted = model.state.record(&id).map(|r| r.attempts).unwrap_or(0) + 1;
    out.push(Action::Say(if kind == AttemptKind::Decompose {
        // Not an attempt at the story's work: its retries are spent.
        Message::Splitting {
            id: id.clone(),
            title: title.clone(),
            model: chosen.clone(),
        }
    } else {
        Message::Started {
            id: id.clone(),
            title: title.clone(),
            attempt: counted,
            max: model.policy.max_retries,
            fixup: kind == AttemptKind::Fixup,
            model: chosen.clone(),
            logged: (attempt != counted).then_some(attempt),
        }
    }));
    out.push(Action::StoryStarted {
        id: id.clone(),
        title,
        model: chosen.clone(),
    });
    out.push(Action::Log(format!(
        "start story {id} attempt {attempt} ({}{}{}) in slot {slot}",
        kind.as_str(),
        chosen
            .as_deref()
            .map(|m| format!(", {} on {m}", agent.name()))
            .unwrap_or_default(),
        resume
            .as_deref()
            .map(|s| format!(", resuming session {s}"))
            .unwrap_or_default()
    )));
    let req = AttemptRequest {
        idx,
        slot,
        attempt,
        iteration: model.attempts_this_run,
        kind,
        note,
        resume,
        resume_on,
        agent,
        postmortem_model: model.policy.postmortem_model(agent),
        model: chosen,
        candidate: None,
    };
    out.push(Action::Record(record::attempt_start(model, &req)));
    out.push(Action::StartAttempt(req));
}
