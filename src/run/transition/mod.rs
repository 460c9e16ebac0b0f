//! Every decision of a run: `handle(model, event, now)` changes the model
//! and returns the actions to carry out, in order. Retries, conflict
//! limits, usage-limit pauses and backoff, one-job gating, the merge queue's
//! order, `-n`, Ctrl-C once and twice, what is saved, what is said and
//! what is recorded (`Action::Record`: the run's records are these
//! decisions, never read back off the model).
//!
//! `handle` is the one entry; the decisions are split by what they decide:
//! `dispatch` (choosing and starting attempts), `outcome` (an attempt's
//! verdict), `landing` (the merge queue), `limits` (pauses, faults,
//! signals, halting) and `finish` (totals, the budget, the exit code).
//!
//! Pure: no I/O, no clock (the caller passes `now`), no git, no tokio.

pub(crate) mod batch;
mod dispatch;
mod failure;
mod finish;
pub(crate) mod gates;
mod landing;
mod limits;
mod outcome;
pub(crate) mod queue;
mod race;
mod steer;

use crate::control::Control;
use crate::report::Message;
use crate::runlog::{Ev, PauseWhy};
use crate::schedule::StoryState;

use super::events::{Action, Event, Now};
use super::model::{Fatal, Model};
use dispatch::dispatch;
pub(crate) use finish::{finish, totals};
use landing::{chain_results, next_landing, send_to_landing};
use limits::{on_signal, on_timer};
use outcome::{attempt_finished, placed};

// What the table tests name unqualified (`use super::*`).
#[cfg(test)]
use {
    super::events::{AttemptReport, AttemptRequest, LandResult, OsSignal},
    super::model::Policy,
    crate::agent::Verdict,
};

/// Where an attempt runs (`outcome::placed`), or a racing candidate
/// (`race::placed`): a cluster node.
fn where_it_runs(
    model: &mut Model,
    idx: usize,
    (attempt, candidate): (u32, Option<u32>),
    node: String,
) -> Vec<Action> {
    match candidate {
        Some(k) => race::placed(model, idx, (attempt, k), node),
        None => placed(model, idx, attempt, node),
    }
}

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
                let with = |node: StoryState| -> Vec<usize> {
                    let nodes = &model.sched().nodes;
                    model
                        .pulled_in
                        .iter()
                        .copied()
                        .filter(|&i| nodes[i] == node)
                        .collect()
                };
                let (run_first, failed) = (with(StoryState::Pending), with(StoryState::Failed));
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
                out.push(Action::Record(Ev::Pause {
                    why: PauseWhy::UsageLimit,
                    agent: Some(agent.clone()),
                    until: Some(*until),
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
        Event::BacklogChanged { describe } => {
            model.reload_pending = true;
            out.push(Action::Log(format!(
                "backlog: {describe} changed; new work is taken in once the running stories are done"
            )));
        }
        Event::Activity {
            idx,
            candidate,
            text,
        } => {
            // Changes nothing the scheduler looks at.
            return vec![Action::Activity {
                id: model.id(idx).to_string(),
                candidate,
                text,
            }];
        }
        Event::Placed {
            idx,
            attempt,
            candidate,
            node,
        } => return where_it_runs(model, idx, (attempt, candidate), node),
        Event::Editing { idx, path } => {
            // Only what later choices see: nothing starts or stops for it.
            model.editing(idx, path);
            return Vec::new();
        }
        Event::Touched { found } => {
            // A story that stopped running meanwhile is left out.
            for (idx, paths) in found {
                model.set_touched(idx, paths);
            }
            return Vec::new();
        }
        // A racing candidate's end is the race's (issue 36).
        Event::AttemptFinished(r) if r.candidate.is_some() && model.racing.contains_key(&r.idx) => {
            race::candidate_finished(model, *r, now, &mut out)
        }
        Event::AttemptFinished(r) => attempt_finished(model, *r, now, &mut out),
        Event::LandingFinished(result) => {
            debug_assert!(
                model.landing.len() == 1,
                "a landing of one finished that never started"
            );
            let results = model.landing.first().map(|l| (l.idx, result));
            chain_results(model, results.into_iter().collect(), true, now, &mut out);
        }
        Event::ChainResults(results) => chain_results(model, results, false, now, &mut out),
        Event::ChainFinished(results) => chain_results(model, results, true, now, &mut out),
        Event::Judged(report) => race::judged(model, report, &mut out),
        Event::HooksDone => model.hooks_running = model.hooks_running.saturating_sub(1),
        Event::Signal(sig) => on_signal(model, sig, &mut out),
        Event::Timer => on_timer(model, now, &mut out),
        Event::Steer { req, cmd } => steer::on_steer(model, req, cmd, &mut out),
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
    // The landings of racing candidates, left for the race to judge.
    for (landing, result) in std::mem::take(&mut model.race_landings) {
        if !race::landing_ended(model, landing, &result, now, &mut out) {
            landing::landing_result(model, landing, result, now, &mut out);
        }
    }
    next_landing(model, now, &mut out);
    dispatch(model, now, &mut out);
    if model.busy() || !model.waits_for_person() {
        model.said_waiting = false;
    } else if !model.said_waiting {
        model.said_waiting = true;
        out.push(Action::Say(Message::WaitingForPerson {
            what: model.waiting_for(),
        }));
    }
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
            Action::StartAttempt(_)
            | Action::Land { .. }
            | Action::LandChain(_)
            | Action::ChainAdd(_) => saved_later = false,
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
    !model.busy() && !waiting_out_limit && !model.waits_for_person()
}

#[cfg(test)]
pub(super) mod tests;
