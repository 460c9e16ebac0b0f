//! What a run leaves written as it ends: the summary on stdout (this
//! run's figures, lifetime totals, where the agent runs went) and each
//! story's progress.txt line (Ralph v2's format).

use super::{short_count, tokens};
use crate::agent::event::Usage;
use crate::state::{Tally, Waste};
use crate::timefmt::human_duration;

/// What a run reports when it ends.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RunSummary {
    pub(crate) done: usize,
    pub(crate) total: usize,
    pub(crate) failed: Vec<String>,
    pub(crate) blocked: Vec<String>,
    pub(crate) pending: usize,
    pub(crate) elapsed_secs: f64,
    /// Lifetime totals: every run's attempts.
    pub(crate) usage: Usage,
    pub(crate) cost_usd: f64,
    pub(crate) cost_unknown: bool,
    /// This run's attempts only.
    pub(crate) run_tokens: u64,
    pub(crate) run_cost_usd: f64,
    /// Some attempt of this run has an unknown cost (issue 25: never $0.00).
    pub(crate) run_cost_unknown: bool,
    /// `-n`/`loop.max_iterations`, when it stopped a run with work left.
    pub(crate) limit_reached: Option<u64>,
    /// Validated work waiting for a person (`landing.mode: review`).
    pub(crate) in_review: Vec<String>,
    /// Every selected story is done and nothing went wrong.
    pub(crate) all_complete: bool,
    /// Where the agent runs went.
    pub(crate) waste: Waste,
}

/// The summary printed on stdout at the end of `ralph run`: this run's
/// figures over the stories it selected, lifetime totals on their own line.
pub(crate) fn render_summary(s: &RunSummary) -> String {
    let mut out = format!(
        "RUN SUMMARY: {}/{} done, {} failed, {} blocked, {} pending · {} · {} tokens · {}\n",
        s.done,
        s.total,
        s.failed.len(),
        s.blocked.len(),
        s.pending,
        human_duration(s.elapsed_secs),
        s.run_tokens,
        crate::spend::money(s.run_cost_usd, s.run_cost_unknown, true)
    );
    out.push_str(&format!(
        "lifetime (all runs): {} tokens · {}\n",
        tokens(&s.usage),
        crate::spend::money(s.cost_usd, s.cost_unknown, true)
    ));
    // This run's, labelled: the lifetime figures are `ralph stats`'.
    if let Some(line) = render_waste(&s.waste) {
        out.push_str("this run's ");
        out.push_str(&line);
        out.push('\n');
    }
    if !s.failed.is_empty() {
        out.push_str(&format!(
            "failed: {} (see {}/<id>/; retry with `ralph run -s <id>`)\n",
            s.failed.join(", "),
            crate::paths::LOGS
        ));
    }
    if !s.blocked.is_empty() {
        out.push_str(&format!("blocked: {}\n", s.blocked.join(", ")));
    }
    if !s.in_review.is_empty() {
        out.push_str(&format!(
            "in review or in a pull request: {} (`ralph review` lists them)\n",
            s.in_review.join(", ")
        ));
    }
    if let Some(n) = s.limit_reached {
        out.push_str(&format!("Reached iteration limit ({n})\n"));
    } else if s.all_complete {
        out.push_str("ALL STORIES COMPLETE\n");
    }
    out
}

/// `agent runs: 1.20 per landed story (12 for 10) · 10 first tries (…) ·
/// 1 fix-up (2.1k tokens, $0.03) · 1 redo (…) · 1 failed (…)`;
/// `None` before any agent ran.
pub(crate) fn render_waste(w: &Waste) -> Option<String> {
    let all = w.all();
    if all.runs == 0 {
        return None;
    }
    let per = match w.per_landed() {
        Some((runs, _, _)) => format!("{runs:.2} per landed story ({} for {})", all.runs, w.landed),
        None => format!("{} for no landed story", all.runs),
    };
    let part = |t: &Tally, one: &str, many: &str| {
        let name = if t.runs == 1 { one } else { many };
        if t.runs == 0 {
            format!("0 {name}")
        } else {
            format!(
                "{} {name} ({} tokens, ${:.2})",
                t.runs,
                short_count(t.tokens),
                t.cost_usd
            )
        }
    };
    Some(format!(
        "agent runs: {per} · {} · {} · {} · {}",
        part(&w.first, "first try", "first tries"),
        part(&w.fixup, "fix-up", "fix-ups"),
        part(&w.redo, "redo", "redos"),
        part(&w.failed, "failed", "failed"),
    ))
}

/// `status --json`'s `agent_runs`: the tallies and the per-landed-story figures.
pub(crate) fn waste_json(w: &Waste) -> serde_json::Value {
    let per = w.per_landed().map(|(runs, tokens, cost)| {
        serde_json::json!({ "runs": runs, "tokens": tokens, "cost_usd": cost })
    });
    serde_json::json!({
        "landed": w.landed,
        "per_landed_story": per,
        "first": w.first,
        "fixup": w.fixup,
        "redo": w.redo,
        "failed": w.failed,
    })
}

/// `progress.txt` line of a landed story (Ralph v2's format).
pub(crate) fn progress_done(id: &str, title: &str, unix: i64, tentative: bool) -> String {
    format!(
        "[DONE] Story {id} - {title} - {}{}",
        crate::timefmt::progress_stamp(unix),
        if tentative {
            " (tentative: commits detected, validated)"
        } else {
            ""
        }
    )
}

/// `progress.txt` line of a failed attempt (Ralph v2's format).
pub(crate) fn progress_fail(id: &str, reason: &str, unix: i64, attempt: u32, max: u32) -> String {
    format!(
        "[FAIL] Story {id} - {} - {} (attempt {attempt}/{max})",
        reason.replace('|', "-"),
        crate::timefmt::progress_stamp(unix)
    )
}
