//! Pauses and stops: OS signals, the model API's faults, `halt` (nothing
//! new starts) and `needs_person` (running agents stop too).

use std::time::{Duration, Instant};

use crate::control::Control;
use crate::report::Message;
use crate::runlog::{Ev, PauseWhy};

use crate::run::events::{Action, Now, OsSignal};
use crate::run::model::{Fatal, Model, Policy, SignalCount};

pub(super) fn on_signal(model: &mut Model, sig: OsSignal, out: &mut Vec<Action>) {
    out.push(Action::Record(Ev::Signal {
        signal: sig.name().to_string(),
    }));
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

/// `agent`'s CLI gave up on its model API (5xx, overloaded, unreachable):
/// not the story's failure. As with a usage limit, the run waits (doubling
/// pauses) but no longer than `limits.max_wait_hours` from the first
/// failure in a row; then the next of the run's agents (`agent.fallback`)
/// takes new attempts, or, with none left, the run stops naming the error.
/// A dead proxy in `ANTHROPIC_BASE_URL` used to be retried without end.
pub(super) fn api_fault(
    model: &mut Model,
    id: &str,
    agent: &str,
    reason: &str,
    now: Now,
    out: &mut Vec<Action>,
) {
    let streak =
        model
            .api_faults
            .entry(agent.to_string())
            .or_insert(crate::run::model::ApiFaults {
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
        pause_new_work(model, now.mono + wait, out);
        out.push(Action::Say(Message::Fault {
            id: id.to_string(),
            reason: reason.to_string(),
            wait_secs: wait.as_secs_f64(),
            kept: None,
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

pub(super) fn api_stop_message(what: &str) -> String {
    format!(
        "{what}. Check the API the agent talks to (a proxy in ANTHROPIC_BASE_URL or the \
         provider's status), name another agent in agent.fallback, or raise \
         limits.max_wait_hours; then run `ralph run` again"
    )
}

/// Nothing new starts; running agents finish and their work lands; the
/// run ends with `why` (the first reason given wins).
pub(super) fn halt(model: &mut Model, why: Fatal) {
    if model.fatal.is_none() {
        model.fatal = Some(why);
    }
}

/// Only a person can go on, and what runs now is wasted or harmful: as
/// `halt`, and running agents are stopped (their attempts are not counted).
pub(super) fn needs_person(model: &mut Model, message: String, out: &mut Vec<Action>) {
    halt(model, Fatal::NeedsPerson(message));
    if model.signals == SignalCount::None {
        model.signals = SignalCount::Once;
    }
    out.push(Action::Control(Control::Stop));
}

/// The end of pauses: the fault backoff's (`pause_until`), agents' usage
/// limits whose reset passed, the spacing of starts, the memory recheck.
pub(super) fn on_timer(model: &mut Model, now: Now, out: &mut Vec<Action>) {
    if model.pause_until.is_some_and(|t| now.mono >= t) {
        model.pause_until = None;
        out.push(Action::Record(Ev::Resume {
            why: PauseWhy::Fault,
            agent: None,
        }));
    }
    if model.next_start_at.is_some_and(|t| now.mono >= t) {
        model.next_start_at = None;
    }
    if model.recheck_at.is_some_and(|t| now.mono >= t) {
        model.recheck_at = None;
    }
    let lifted: Vec<String> = model
        .state
        .paused_until
        .iter()
        .filter(|(_, until)| **until <= now.unix)
        .map(|(agent, _)| agent.clone())
        .collect();
    if lifted.is_empty() {
        return;
    }
    for agent in lifted {
        model.state.paused_until.remove(&agent);
        out.push(Action::Record(Ev::Resume {
            why: PauseWhy::UsageLimit,
            agent: Some(agent),
        }));
    }
    out.push(Action::Save);
}

/// New work waits until `until` at least (a fault outside the story); the
/// pause is recorded when it begins, not each time it grows.
pub(super) fn pause_new_work(model: &mut Model, until: Instant, out: &mut Vec<Action>) {
    if model.pause_until.is_none() {
        out.push(Action::Record(Ev::Pause {
            why: PauseWhy::Fault,
            agent: None,
            until: None,
        }));
    }
    model.pause_until = Some(model.pause_until.map_or(until, |p| p.max(until)));
}

/// An agent's usage limit holds until `until` (Unix seconds): kept in the
/// state, so a restart during the pause honours it.
pub(super) fn pause_agent(model: &mut Model, agent: String, until: i64, out: &mut Vec<Action>) {
    if model.state.paused_until.get(&agent) != Some(&until) {
        out.push(Action::Record(Ev::Pause {
            why: PauseWhy::UsageLimit,
            agent: Some(agent.clone()),
            until: Some(until),
        }));
    }
    model.state.paused_until.insert(agent, until);
}
