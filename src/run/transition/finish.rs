//! How the run stands and how it ended: the totals shown as it goes,
//! the spent budget, and `finish` (the summary and the exit code).

use crate::report::{RunSummary, Totals};
use crate::schedule::StoryState;

use super::limits::api_stop_message;
use crate::pricing::{expected_cost, Past};
use crate::run::events::Now;
use crate::run::model::{CandState, Fatal, Model};

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
        running: model.count(StoryState::Running),
        landing: model.count(StoryState::Landing),
        failed: model.count(StoryState::Failed),
        blocked: model.count(StoryState::Blocked),
        usage,
        cost_usd: cost,
        cost_unknown: model
            .state
            .stories
            .values()
            .any(|r| r.history.iter().any(|h| h.cost_unknown)),
        paused_secs,
        jobs_now,
        landing_now: model
            .landing
            .iter()
            .map(|l| story_label(model, l.idx))
            .collect(),
        land_queue: model
            .land_queue
            .iter()
            .map(|l| story_label(model, l.idx))
            .collect(),
        eta_secs: now.and_then(|now| model.eta_secs(now)),
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
        failed: model.ids_with(StoryState::Failed),
        blocked: model.ids_with(StoryState::Blocked),
        pending: model.count(StoryState::Pending),
        elapsed_secs,
        usage: t.usage,
        cost_usd: t.cost_usd,
        cost_unknown: t.cost_unknown,
        run_tokens: model.run_tokens,
        run_cost_usd: model.run_cost_usd,
        run_cost_unknown: model.run_cost_unknown,
        limit_reached: None,
        in_review: model.ids_with(StoryState::Review),
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
pub(super) fn budget_spent(model: &Model) -> Option<String> {
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

/// The run's budget with the running attempts counted at what they are
/// expected to cost (`pricing::expected_cost`): in words when nothing more
/// should start beside them, so once one attempt has finished to go by, a
/// budget is overshot by one attempt at most. Before any has, nothing is
/// known to count and the first attempts start as without a budget.
///
/// Best of N (issue 36): `starting`, the models of a race's candidates
/// about to start, are reserved together: a race starts only when the
/// budget has room for all N, so two races never share what only one can
/// spend and leave their candidates waiting. The candidates still waiting
/// in running races stay reserved, but those of race `own`: its own
/// candidates start one by one, each as an attempt would, so it is
/// overshot by one candidate at most.
pub(super) fn budget_ahead_for(
    model: &Model,
    starting: &[Option<String>],
    own: Option<usize>,
) -> Option<String> {
    let b = model.policy.budget;
    if b.run_usd.is_none() && b.total_usd.is_none() {
        return None;
    }
    let past: Vec<Past<'_>> = model
        .state
        .stories
        .values()
        .flat_map(|r| &r.history)
        .map(|h| Past {
            model: h.model.as_deref(),
            cost_usd: h.cost_usd,
        })
        // A racing candidate that ended is known before its race's record
        // (best of N, issue 36).
        .chain(
            model
                .racing
                .values()
                .flat_map(|r| &r.cands)
                .filter(|c| c.ended)
                .map(|c| Past {
                    model: c.model.as_deref(),
                    cost_usd: c.cost_usd,
                }),
        )
        .collect();
    let expected = |m: Option<&str>| expected_cost(&past, m).unwrap_or(0.0);
    let mut ahead = 0.0;
    for (slot, idx) in model.slots.iter().enumerate() {
        if idx.is_none() {
            continue;
        }
        ahead += expected(model.slot_model[slot].as_deref());
    }
    let reserved: f64 = model
        .racing
        .iter()
        .filter(|(idx, _)| Some(**idx) != own)
        .flat_map(|(_, r)| &r.cands)
        .filter(|c| c.state == CandState::Waiting)
        .map(|c| expected(c.model.as_deref()))
        .sum();
    let new: f64 = starting.iter().map(|m| expected(m.as_deref())).sum();
    let ahead = ahead + reserved + new;
    let (_, total) = model.state.total_usage();
    let over = |spent: f64, max: Option<f64>| max.is_some_and(|m| spent + ahead >= m);
    (over(model.run_cost_usd, b.run_usd) || over(total, b.total_usd)).then(|| {
        format!(
            "budget: ${:.2} spent and ${ahead:.2} expected of the running attempts and the \
             candidates reserved; the next attempt waits for them",
            model.run_cost_usd
        )
    })
}
