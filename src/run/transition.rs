//! Every decision of a run: `handle(model, event, now)` changes the model
//! and returns the actions to carry out, in order. Retries, conflict
//! limits, usage-limit pauses and backoff, one-job gating, the merge queue's
//! order, `-n`, Ctrl-C once and twice, what is saved and what is said.
//!
//! Pure: no I/O, no clock (the caller passes `now`), no git, no tokio.

use std::time::Duration;

use crate::agent::{self, Backend, FaultKind, Verdict};
use crate::control::Control;
use crate::prompt;
use crate::report::{self, Message, RunSummary, Totals};
use crate::schedule::{Bounds, Fewer, Jobs, Node};
use crate::state::{AttemptKind, AttemptRecord, Fixup, FixupCause, Note, Outcome};

use super::events::{Action, AttemptReport, AttemptRequest, Event, LandResult, Now, OsSignal};
use super::model::{Change, Fatal, Landing, Model, Policy, SignalCount};

/// Applies `event` to `model`; returns what to do.
pub(crate) fn handle(model: &mut Model, event: Event, now: Now) -> Vec<Action> {
    let mut out = Vec::new();
    match event {
        Event::Start { reland } => {
            let t = totals(model, Some(now));
            out.push(Action::Say(Message::Header {
                total: t.total,
                done: t.done,
                jobs: model.policy.jobs,
                target: model.policy.target.clone(),
            }));
            out.push(Action::Log(format!(
                "run start: {} jobs, target {}",
                model.policy.jobs, model.policy.target
            )));
            if !model.pulled_in.is_empty() {
                let ids = |list: &[usize]| -> Vec<String> {
                    list.iter().map(|&i| model.id(i).to_string()).collect()
                };
                // (Those a failed one blocks go unnamed: they will not run.)
                let with = |node: Node| -> Vec<usize> {
                    let nodes = &model.sched().nodes;
                    model
                        .pulled_in
                        .iter()
                        .copied()
                        .filter(|&i| nodes[i] == node)
                        .collect()
                };
                let (run_first, failed) = (with(Node::Pending), with(Node::Failed));
                if !run_first.is_empty() || !failed.is_empty() {
                    out.push(Action::Say(Message::DependenciesFirst {
                        ids: ids(&model.needing),
                        run_first: ids(&run_first),
                        failed: ids(&failed),
                    }));
                }
            }
            for (agent, until) in &model.state.paused_until {
                out.push(Action::Say(Message::Paused {
                    agent: agent.clone(),
                    wait_secs: (until - now.unix).max(0) as f64,
                }));
            }
            for idx in reland {
                let attempt = model
                    .state
                    .record(model.id(idx))
                    .map(|r| r.attempts_started)
                    .unwrap_or(0);
                send_to_landing(model, idx, attempt, None, &mut out);
            }
        }
        Event::Activity { idx, text } => {
            // Changes nothing the scheduler looks at.
            return vec![Action::Activity {
                id: model.id(idx).to_string(),
                text,
            }];
        }
        Event::AttemptFinished(r) => attempt_finished(model, *r, now, &mut out),
        Event::LandingFinished(result) => match model.landing.take() {
            Some(landing) => landing_finished(model, landing, result, now, &mut out),
            None => debug_assert!(false, "a landing finished that never started"),
        },
        Event::HooksDone => model.hooks_running = model.hooks_running.saturating_sub(1),
        Event::Signal(sig) => on_signal(model, sig, &mut out),
        Event::Timer => {
            if model.pause_until.is_some_and(|t| now.mono >= t) {
                model.pause_until = None;
            }
            if model.next_start_at.is_some_and(|t| now.mono >= t) {
                model.next_start_at = None;
            }
            if model.recheck_at.is_some_and(|t| now.mono >= t) {
                model.recheck_at = None;
            }
            let before = model.state.paused_until.len();
            model
                .state
                .paused_until
                .retain(|_, until| *until > now.unix);
            if model.state.paused_until.len() != before {
                out.push(Action::Save);
            }
        }
        Event::SaveFailed(error) => {
            out.push(Action::Say(Message::SaveFailed {
                error: error.clone(),
            }));
            out.push(Action::Log(format!("cannot save state: {error}")));
            // Going on would run work whose result cannot be recorded.
            if model.fatal.is_none() {
                model.fatal = Some(Fatal::Internal(format!(
                    "cannot save {}: {error}; the state on disk is the last one \
                     saved: free space or fix permissions, then run `ralph run` again",
                    crate::paths::STATE
                )));
                out.push(Action::Control(Control::Stop));
            }
        }
    }
    next_landing(model, &mut out);
    dispatch(model, now, &mut out);
    out.push(Action::Totals(totals(model, Some(now))));
    coalesce_saves(out)
}

/// One write of `state.json` where several follow each other: a save must
/// precede what depends on it (an agent starting, a landing), and the last
/// one holds every change; the others would only be the same fsync again.
fn coalesce_saves(actions: Vec<Action>) -> Vec<Action> {
    let mut kept = Vec::with_capacity(actions.len());
    let mut saved_later = false;
    for a in actions.into_iter().rev() {
        match a {
            Action::Save if saved_later => continue,
            Action::Save => saved_later = true,
            Action::StartAttempt(_) | Action::Land { .. } => saved_later = false,
            _ => {}
        }
        kept.push(a);
    }
    kept.reverse();
    kept
}

/// True when the run has nothing left to wait for.
pub(crate) fn is_over(model: &Model) -> bool {
    let waiting_out_limit = model.waiting()
        && !model.stopping()
        && model.fatal.is_none()
        && !model.limit_reached()
        && model.sched().next().is_some();
    !model.busy() && !waiting_out_limit
}

pub(crate) fn totals(model: &Model, now: Option<Now>) -> Totals {
    let (usage, cost) = model.state.total_usage();
    // Shown only while nothing can start: a limit with no free fallback.
    let paused_secs = now.and_then(|now| {
        model
            .limit_lifts_at(now)
            .filter(|_| model.slots.iter().all(Option::is_none))
            .map(|t| t.saturating_duration_since(now.mono).as_secs_f64())
    });
    let jobs_now = now
        .map(|now| model.jobs_now(now))
        .filter(|j| j.now < j.asked);
    Totals {
        done: model.done_selected(),
        total: model.selected(),
        running: model.count(Node::Running),
        landing: model.count(Node::Landing),
        failed: model.count(Node::Failed),
        blocked: model.count(Node::Blocked),
        usage,
        cost_usd: cost,
        paused_secs,
        jobs_now,
        landing_now: model.landing.as_ref().map(|l| story_label(model, l.idx)),
        land_queue: model
            .land_queue
            .iter()
            .map(|l| story_label(model, l.idx))
            .collect(),
    }
}

/// (ID, title) of a story, for the display.
fn story_label(model: &Model, idx: usize) -> (String, String) {
    let s = &model.stories[idx];
    (s.id.clone(), s.title.clone())
}

/// How the run ended: the summary, an error for stderr, the exit code.
pub(crate) fn finish(model: &Model, elapsed_secs: f64) -> (RunSummary, Option<String>, i32) {
    use crate::error::{EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_STORIES_FAILED};
    let t = totals(model, None);
    let mut summary = RunSummary {
        done: t.done,
        total: t.total,
        failed: model.ids_with(Node::Failed),
        blocked: model.ids_with(Node::Blocked),
        pending: model.count(Node::Pending),
        elapsed_secs,
        usage: t.usage,
        cost_usd: t.cost_usd,
        run_tokens: model.run_tokens,
        run_cost_usd: model.run_cost_usd,
        limit_reached: None,
        in_review: model.ids_with(Node::Review),
        all_complete: false,
        waste: model.state.waste().since(&model.waste_at_start),
    };
    match &model.fatal {
        Some(Fatal::NeedsPerson(m)) => return (summary, Some(m.clone()), EXIT_STORIES_FAILED),
        Some(Fatal::Internal(m)) => return (summary, Some(m.clone()), EXIT_INTERNAL),
        None => {}
    }
    if model.stopping() {
        return (summary, None, EXIT_INTERRUPTED);
    }
    // Stories left that only an agent whose API was given up could run.
    if summary.pending > 0 {
        if let Some(what) = model.api_given_up.values().next() {
            return (summary, Some(api_stop_message(what)), EXIT_STORIES_FAILED);
        }
    }
    if !summary.failed.is_empty() || !summary.blocked.is_empty() || !summary.in_review.is_empty() {
        return (summary, None, EXIT_STORIES_FAILED);
    }
    // (`ralph land` runs with a limit of 0: it starts nothing by design.)
    if model.limit_reached() && model.sched().next().is_some() && model.policy.limit != Some(0) {
        summary.limit_reached = model.policy.limit;
    } else {
        summary.all_complete = summary.done == summary.total;
    }
    (summary, None, EXIT_OK)
}

/// The budget that is spent, in words, if one is.
pub(crate) fn budget_spent(model: &Model) -> Option<String> {
    let b = model.policy.budget;
    if let Some(max) = b.run_usd.filter(|&m| model.run_cost_usd >= m) {
        return Some(format!(
            "the run's budget is spent: ${:.2} of ${max:.2} (--max-cost / budget.max_cost_usd); \
             no new attempt starts. Raise it or run again with a new budget",
            model.run_cost_usd
        ));
    }
    if let Some(max) = b.total_usd {
        let (_, total) = model.state.total_usage();
        if total >= max {
            return Some(format!(
                "the total budget is spent: ${total:.2} of ${max:.2} over all runs \
                 (budget.max_cost_usd_total); no new attempt starts. Raise it to go on"
            ));
        }
    }
    if let Some(max) = b.run_tokens.filter(|&m| model.run_tokens >= m) {
        return Some(format!(
            "the run's token budget is spent: {} of {max} tokens (budget.max_tokens); \
             no new attempt starts. Raise it or run again",
            model.run_tokens
        ));
    }
    None
}

/// Starts what can start.
fn dispatch(model: &mut Model, now: Now, out: &mut Vec<Action>) {
    if model.stopping()
        || model.fatal.is_some()
        || model.pause_until.is_some()
        || model.reload_pending
    {
        return;
    }
    if let Some(spent) = budget_spent(model) {
        // Nothing new starts; what runs finishes and lands.
        if model.sched().next().is_some() {
            out.push(Action::Log(spent.clone()));
            model.fatal = Some(Fatal::NeedsPerson(spent));
        }
        return;
    }
    // One job is the sequential loop: the next story starts from a tip
    // that holds the previous one, so it waits for its landing, and its
    // iteration begins after the previous one's post hooks ended.
    if model.policy.jobs == 1 && (model.count(Node::Landing) > 0 || model.hooks_running > 0) {
        return;
    }
    // Near a usage limit one job fewer, and no more than memory holds
    // (never fewer than one).
    let jobs = model.jobs_now(now);
    note_jobs(model, &jobs, now, out);
    let busy = model.slots.iter().filter(|s| s.is_some()).count();
    let free = jobs.now.saturating_sub(busy);
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
        let Some(agent) = model.agent_for(idx, now) else {
            continue;
        };
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
        model.slot_started[slot] = Some(now.mono);
        start(model, idx, slot, agent, out);
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

fn start(model: &mut Model, idx: usize, slot: usize, agent: Backend, out: &mut Vec<Action>) {
    model.attempts_this_run += 1;
    let id = model.id(idx).to_string();
    let kind = model.state.next_kind(&id);
    let note = model.state.note(&id).cloned();
    let resume = match kind {
        AttemptKind::Fixup => session_to_resume(model, idx, slot, agent),
        _ => None,
    };
    let attempt = model.apply(idx, Change::Start).attempt;
    model.slots[slot] = Some(idx);
    out.push(Action::Save);
    let title = model.stories[idx].title.clone();
    let counted = model.state.record(&id).map(|r| r.attempts).unwrap_or(0) + 1;
    out.push(Action::Say(if kind == AttemptKind::Decompose {
        // Not an attempt at the story's work: its retries are spent.
        Message::Splitting {
            id: id.clone(),
            title: title.clone(),
        }
    } else {
        Message::Started {
            id: id.clone(),
            title: title.clone(),
            attempt: counted,
            max: model.policy.max_retries,
            fixup: kind == AttemptKind::Fixup,
        }
    }));
    out.push(Action::StoryStarted {
        id: id.clone(),
        title,
    });
    out.push(Action::Log(format!(
        "start story {id} attempt {attempt} ({}{}) in slot {slot}",
        kind.as_str(),
        resume
            .as_deref()
            .map(|s| format!(", resuming session {s}"))
            .unwrap_or_default()
    )));
    out.push(Action::StartAttempt(AttemptRequest {
        idx,
        slot,
        attempt,
        iteration: model.attempts_this_run,
        kind,
        note,
        resume,
        agent,
    }));
}

fn send_to_landing(
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
    });
}

/// The merge queue lands one story at a time, in arrival order; once the
/// run is stopping, what waits stays `landing` for the next run.
fn next_landing(model: &mut Model, out: &mut Vec<Action>) {
    if model.stopping() {
        while let Some(Landing { idx, .. }) = model.land_queue.pop_front() {
            model.apply(idx, Change::LandingInterrupted);
            out.push(Action::Say(Message::LandingStopped {
                id: model.id(idx).to_string(),
            }));
        }
        return;
    }
    if model.landing.is_some() {
        return;
    }
    if let Some(next) = model.land_queue.pop_front() {
        model.landing = Some(next);
        out.push(Action::Land {
            idx: next.idx,
            attempt: next.attempt,
        });
    }
}

fn on_signal(model: &mut Model, sig: OsSignal, out: &mut Vec<Action>) {
    match model.signals {
        SignalCount::None => {
            model.signals = SignalCount::Once;
            out.push(Action::Say(Message::Stopping {
                signal: sig.name().to_string(),
            }));
            out.push(Action::Log(format!("{}: graceful stop", sig.name())));
            out.push(Action::Control(Control::Stop));
        }
        SignalCount::Once => {
            model.signals = SignalCount::Twice;
            out.push(Action::Say(Message::Killing));
            out.push(Action::Control(Control::Kill));
        }
        SignalCount::Twice => {}
    }
}

fn attempt_finished(model: &mut Model, r: AttemptReport, now: Now, out: &mut Vec<Action>) {
    let id = model.id(r.idx).to_string();
    model.slots[r.slot] = None;
    model.slot_started[r.slot] = None;
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
    out.push(Action::StoryFinished { id: id.clone() });
    model
        .state
        .add_usage(&id, r.usage, r.cost_usd, r.duration.as_secs_f64());
    model.run_cost_usd += r.cost_usd;
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
            id: id.clone(),
            learnings: r.learnings.clone(),
        });
    }
    let mut rec = AttemptRecord {
        number: r.attempt,
        kind: Some(r.kind),
        outcome: Outcome::from(&r.verdict),
        reason: None,
        duration_secs: r.duration.as_secs_f64(),
        usage: r.usage,
        cost_usd: r.cost_usd,
        saved_ref: r.saved_ref.clone(),
        agent: r.agent.map(str::to_string),
        session_id: r.session_id.clone(),
        slot: Some(r.slot),
        resumed: r.resumed,
        children: r.children.clone(),
    };
    // What an attempt that stopped early had done, for the next prompt.
    let stopped_early = matches!(
        r.verdict,
        Verdict::Interrupted | Verdict::RateLimited { .. }
    );
    let kept: Vec<String> = r.saved_ref.iter().chain(&r.kept).cloned().collect();
    if stopped_early && !kept.is_empty() {
        model
            .state
            .add_to_note(&id, &prompt::interrupted_before(&kept));
    }
    match &r.verdict {
        Verdict::Done | Verdict::Tentative => {
            // The note stays until the landing decides: a fix-up whose
            // result fails to land is redone, told what the fix-up was for.
            model.state.push_history(&id, rec);
            if let Some((files, commit)) = &r.committed_for_agent {
                out.push(Action::Say(Message::CommittedForAgent {
                    id: id.clone(),
                    files: *files,
                    commit: commit.clone(),
                }));
            }
            out.push(Action::Say(Message::Finished {
                id: id.clone(),
                secs: r.duration.as_secs_f64(),
            }));
            send_to_landing(model, r.idx, r.attempt, Some(r.iteration), out);
        }
        // A resumed agent that failed before it even reported its session:
        // its CLI could not find the session (another machine, a cleared
        // home). Not the fix-up's failure: it runs again in a new session.
        Verdict::Failed { reason, .. }
            if r.resumed && r.session_id.is_none() && report::tokens(&r.usage) == 0 =>
        {
            rec.reason = Some(reason.clone());
            model.state.push_history(&id, rec);
            model.apply(r.idx, Change::Requeue);
            let fixup = model
                .state
                .stories
                .get_mut(&id)
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
        // `ralph decompose ID` asked for a split, not for the story's work:
        // a refused split costs the story nothing and runs nothing else.
        Verdict::Failed { reason, .. }
            if r.kind == AttemptKind::Decompose && model.policy.split_by_hand.is_some() =>
        {
            rec.reason = Some(reason.clone());
            model.state.push_history(&id, rec);
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
        Verdict::Failed { reason, .. } => {
            rec.reason = Some(reason.clone());
            model.state.push_history(&id, rec);
            let note = redo_note(
                model,
                &id,
                reason,
                r.saved_ref.as_deref(),
                r.kind == AttemptKind::Fixup,
            );
            count_failure(
                model,
                r.idx,
                reason,
                r.saved_ref.as_deref(),
                Some(&r.log_rel),
                note,
                now,
                out,
            );
            circuit_breaker(model, r.idx, reason, out);
        }
        Verdict::RateLimited { resets_at } => {
            model.state.push_history(&id, rec);
            model.apply(r.idx, Change::Requeue);
            let wait = match resets_at {
                // A little past the reset, so the quota has really come back.
                Some(t) => Duration::from_secs((*t as i64 - now.unix).max(0) as u64 + 2),
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
                // Kept in the state, so a restart during the pause honours it.
                let until = now.unix + wait.as_secs() as i64;
                model.state.paused_until.insert(agent, until);
                out.push(Action::Say(Message::RateLimited {
                    id: id.clone(),
                    wait_secs: wait.as_secs_f64(),
                }));
                out.push(Action::Log(format!("rate limited on {id}; pause {wait:?}")));
            }
        }
        Verdict::Interrupted => {
            model.state.push_history(&id, rec);
            model.apply(r.idx, Change::Requeue);
            out.push(Action::Say(Message::Stopped { id: id.clone() }));
        }
        Verdict::Fault { reason, kind } => {
            rec.reason = Some(reason.clone());
            model.state.push_history(&id, rec);
            model.apply(r.idx, Change::Requeue);
            // The API's faults are the agent's, bounded in time; the
            // others are the story's slot or the machine's, bounded in count.
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
                    api_fault(model, &id, r.agent.unwrap_or("claude"), reason, now, out);
                }
                FaultKind::Transient if n < Policy::MAX_TRANSIENT_FAULTS => {
                    let wait = Policy::FAULT_BACKOFF * 2u32.pow(n - 1);
                    let until = now.mono + wait;
                    model.pause_until = Some(model.pause_until.map_or(until, |p| p.max(until)));
                    out.push(Action::Say(Message::Fault {
                        id: id.clone(),
                        reason: reason.clone(),
                        wait_secs: wait.as_secs_f64(),
                    }));
                }
                FaultKind::Transient | FaultKind::NeedsPerson => {
                    halt(model, Fatal::NeedsPerson(reason.clone()));
                }
                FaultKind::StopNow => needs_person(model, reason.clone(), out),
            }
        }
        Verdict::RootRefusal => {
            model.state.push_history(&id, rec);
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

/// `agent`'s CLI gave up on its model API (5xx, overloaded, unreachable):
/// not the story's failure. As with a usage limit, the run waits (doubling
/// pauses) but no longer than `limits.max_wait_hours` from the first
/// failure in a row; then the next of the run's agents (`agent.fallback`)
/// takes new attempts, or, with none left, the run stops naming the error.
/// A dead proxy in `ANTHROPIC_BASE_URL` used to be retried without end.
fn api_fault(
    model: &mut Model,
    id: &str,
    agent: &str,
    reason: &str,
    now: Now,
    out: &mut Vec<Action>,
) {
    let streak = model
        .api_faults
        .entry(agent.to_string())
        .or_insert(super::model::ApiFaults {
            since: now.unix,
            count: 0,
        });
    streak.count += 1;
    let (since, n) = (streak.since, streak.count);
    out.push(Action::Log(format!(
        "the {agent} agent's model API failed on {id} ({n} in a row): {reason}"
    )));
    let waited = Duration::from_secs(u64::try_from(now.unix - since).unwrap_or(0));
    let max = model.policy.max_wait;
    if waited < max {
        let wait = (Policy::FAULT_BACKOFF * 2u32.saturating_pow((n - 1).min(16)))
            .min(Policy::MAX_BACKOFF)
            .min(max - waited)
            .max(Duration::from_secs(1));
        let until = now.mono + wait;
        model.pause_until = Some(model.pause_until.map_or(until, |p| p.max(until)));
        out.push(Action::Say(Message::Fault {
            id: id.to_string(),
            reason: reason.to_string(),
            wait_secs: wait.as_secs_f64(),
        }));
        return;
    }
    model.api_faults.remove(agent);
    let what = format!(
        "the {agent} agent's model API kept failing for {} ({n} attempts in a row, none charged; \
         limits.max_wait_hours is {}h). Its last error: {reason}",
        crate::timefmt::human_duration(waited.as_secs_f64()),
        max.as_secs() / 3600
    );
    model.api_given_up.insert(agent.to_string(), what.clone());
    let fallback = model
        .policy
        .agents
        .iter()
        .find(|b| !model.api_given_up.contains_key(b.name()));
    match fallback {
        Some(b) => out.push(Action::Say(Message::ApiGivenUp {
            agent: agent.to_string(),
            fallback: b.name().to_string(),
            reason: reason.to_string(),
        })),
        None => halt(model, Fatal::NeedsPerson(api_stop_message(&what))),
    }
}

fn api_stop_message(what: &str) -> String {
    format!(
        "{what}. Check the API the agent talks to (a proxy in ANTHROPIC_BASE_URL or the \
         provider's status), name another agent in agent.fallback, or raise \
         limits.max_wait_hours; then run `ralph run` again"
    )
}

/// The same failure in several attempts in a row, across stories, is not
/// the stories' fault (a bad key, an unknown model, an agent that dies at
/// start): the run stops with one message and those attempts are taken back,
/// so after the fix `ralph run` just works.
fn circuit_breaker(model: &mut Model, idx: usize, reason: &str, out: &mut Vec<Action>) {
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
        return;
    }
    model.recent_failures.push((idx, cause.clone()));
    let n = Policy::BREAKER_ATTEMPTS;
    let recent = &model.recent_failures;
    if recent.len() < n {
        return;
    }
    let last = &recent[recent.len() - n..];
    let same = last.iter().all(|(_, c)| *c == cause);
    let mut stories: Vec<usize> = last.iter().map(|(i, _)| *i).collect();
    stories.sort_unstable();
    stories.dedup();
    if !same || stories.len() < 2 {
        return;
    }
    let taken: Vec<usize> = last.iter().map(|(i, _)| *i).collect();
    for i in taken {
        model.apply(i, Change::Refund);
    }
    model.recent_failures.clear();
    model.breaker_cause = Some(cause.clone());
    let ids: Vec<&str> = stories.iter().map(|&i| model.id(i)).collect();
    let message = format!(
        "the same failure ended {n} attempts in a row, of stories {}: \"{cause}\". That is not \
         the stories' fault (credentials, the model name, the agent's installation?): \
         fix it and run `ralph run` again; those attempts were not counted",
        ids.join(", ")
    );
    out.push(Action::Log(format!("circuit breaker: {message}")));
    needs_person(model, message, out);
}

/// Nothing new starts; running agents finish and their work lands; the
/// run ends with `why` (the first reason given wins).
fn halt(model: &mut Model, why: Fatal) {
    if model.fatal.is_none() {
        model.fatal = Some(why);
    }
}

/// Only a person can go on, and what runs now is wasted or harmful: as
/// `halt`, and running agents are stopped (their attempts are not counted).
fn needs_person(model: &mut Model, message: String, out: &mut Vec<Action>) {
    halt(model, Fatal::NeedsPerson(message));
    if model.signals == SignalCount::None {
        model.signals = SignalCount::Once;
    }
    out.push(Action::Control(Control::Stop));
}

/// The note of a fresh start after a failure: the failure, and when it was
/// a fix-up's, what that fix-up was for (its work is still kept).
fn redo_note(
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
    }
}

/// What the attempt whose work landed (or tried to) was.
fn kind_of(model: &Model, idx: usize, attempt: u32) -> AttemptKind {
    model
        .state
        .attempt(model.id(idx), attempt)
        .map(AttemptRecord::kind)
        .unwrap_or_default()
}

/// Counts a failed attempt; when the story gets another, `note` is what
/// that one is told.
#[expect(clippy::too_many_arguments, reason = "one call site per cause")]
fn count_failure(
    model: &mut Model,
    idx: usize,
    reason: &str,
    saved_ref: Option<&str>,
    log: Option<&str>,
    note: Note,
    now: Now,
    out: &mut Vec<Action>,
) {
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
            return;
        }
        let blocked = applied.blocked.iter().map(|&b| model.id(b).to_string());
        out.push(Action::Say(Message::FailedForGood {
            id,
            max,
            blocked: blocked.collect(),
        }));
    } else {
        model.state.set_note(&id, Some(note));
    }
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
        LandResult::Interrupted | LandResult::Raced => None,
    }
}

fn landing_finished(
    model: &mut Model,
    landing: Landing,
    result: LandResult,
    now: Now,
    out: &mut Vec<Action>,
) {
    let idx = landing.idx;
    if result != LandResult::Raced {
        model.races.remove(&idx);
    }
    if let (Some(iteration), Some(result)) = (landing.iteration, hook_result(&result)) {
        model.hooks_running += 1;
        out.push(Action::PostHooks {
            id: model.id(idx).to_string(),
            iteration,
            result,
        });
    }
    let story = model.stories[idx].clone();
    let id = story.id.clone();
    let target = model.policy.target.clone();
    // A split asked for by hand that does not land is refused like a bad
    // answer: the story as it was, nothing charged, its work kept.
    let refused = match &result {
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
    if let Some((why, saved_ref)) = refused.filter(|_| {
        model.policy.split_by_hand.is_some()
            && kind_of(model, idx, landing.attempt) == AttemptKind::Decompose
    }) {
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
        return;
    }
    match result {
        LandResult::Landed { commit } => {
            model.apply(idx, Change::Landed { commit: &commit });
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
                commit: commit.clone(),
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
        LandResult::InPr { url } => {
            model.apply(idx, Change::InPr { url: &url });
            out.push(Action::Save);
            out.push(Action::Say(Message::InPr {
                id: id.clone(),
                url: url.clone(),
            }));
            out.push(Action::Log(format!(
                "story {id} passed validation on {target}; pull request {url}"
            )));
        }
        LandResult::InReview => {
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
        LandResult::Conflict { paths, saved_ref } => {
            model.remember_conflict(idx, &paths);
            // Kept work goes back to its agent, once: a fix-up whose own
            // result conflicts again is redone from scratch.
            let fixup = match saved_ref.clone() {
                Some(work) if kind_of(model, idx, landing.attempt) != AttemptKind::Fixup => {
                    Some(Fixup {
                        cause: FixupCause::Conflict {
                            paths: paths.clone(),
                        },
                        work,
                        attempt: landing.attempt,
                        fresh_session: false,
                    })
                }
                _ => None,
            };
            let kept = saved_ref.unwrap_or_else(|| crate::project::story_branch(&id));
            let note = match fixup {
                Some(f) => Note {
                    text: String::new(),
                    fixup: Some(f),
                    redo: false,
                    decompose: false,
                },
                None => Note {
                    text: prompt::conflict_redo(&target, &paths, &kept),
                    fixup: None,
                    redo: true,
                    decompose: false,
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
                paths: paths.clone(),
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
            } else {
                model.state.set_note(&id, Some(note));
            }
            out.push(Action::Save);
        }
        LandResult::ValidationFailed {
            name,
            cmd,
            tail,
            saved_ref,
            log_rel,
        } => {
            let tail_line = tail
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            let reason = format!("validation '{name}' failed on the merged tree: {tail_line}");
            // The merged tree goes back to its agent with the output, once.
            let after_fixup = kind_of(model, idx, landing.attempt) == AttemptKind::Fixup;
            let note = match saved_ref.clone() {
                Some(work) if !after_fixup => Note {
                    text: String::new(),
                    fixup: Some(Fixup {
                        cause: FixupCause::Validation {
                            name: name.clone(),
                            cmd,
                            tail: tail.clone(),
                            log: log_rel.clone(),
                        },
                        work,
                        attempt: landing.attempt,
                        fresh_session: false,
                    }),
                    redo: false,
                    decompose: false,
                },
                _ => redo_note(model, &id, &reason, saved_ref.as_deref(), after_fixup),
            };
            count_failure(
                model,
                idx,
                &reason,
                saved_ref.as_deref(),
                Some(&log_rel),
                note,
                now,
                out,
            );
            out.push(Action::Save);
        }
        LandResult::CheckoutBlocked { paths } => {
            // The work is finished: it stays `landing`, so the next run lands
            // it without running the agent again.
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
        LandResult::Busy { lock } => {
            // Someone else's git, not the story: it stays `landing`, and
            // the next run lands it.
            model.apply(idx, Change::LandingInterrupted);
            halt(
                model,
                Fatal::NeedsPerson(format!(
                    "story {id} is ready to land, but another process kept {} the whole time: \
                     let that git command finish (no git running? then the lock is stale: \
                     remove it) and run `ralph run` again to land it",
                    lock.display()
                )),
            );
            out.push(Action::Save);
        }
        LandResult::Unsigned { message } => {
            // The user's signing setup, not the story: nothing is charged,
            // the work stays `landing`, and the next run lands it.
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
        LandResult::Interrupted => {
            model.apply(idx, Change::LandingInterrupted);
            out.push(Action::Say(Message::LandingStopped { id }));
        }
        LandResult::Raced => {
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
        // git or the machine failed, not the story: its finished work stays
        // `landing` (nothing charged) and the next run lands it.
        LandResult::Error(e) => {
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
    }
}

#[cfg(test)]
#[path = "transition_tests.rs"]
mod tests;
