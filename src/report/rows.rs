//! The live display's lines: the totals line (fitted to a width), the
//! progress line (landed/total, elapsed, ETA), each story's row (its
//! layout, ID and title, where it is, its latest activity), and `status`'s
//! jobs line.

use std::time::Duration;

use crate::agent::event::Usage;
use crate::timefmt::human_duration;

/// Totals shown on the overall line.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Totals {
    pub(crate) done: usize,
    pub(crate) total: usize,
    /// Agents at work.
    pub(crate) running: usize,
    /// Finished work in the merge queue (waiting or landing now).
    pub(crate) landing: usize,
    pub(crate) failed: usize,
    pub(crate) blocked: usize,
    pub(crate) usage: Usage,
    pub(crate) cost_usd: f64,
    /// Some attempt's cost is unknown: `cost_usd` is what was known.
    pub(crate) cost_unknown: bool,
    /// Seconds until new work may start again (a usage limit), if waiting.
    pub(crate) paused_secs: Option<f64>,
    /// The jobs allowed now and why, when fewer than asked (a usage limit
    /// is near, memory).
    pub(crate) jobs_now: Option<crate::schedule::Jobs>,
    /// The merge queue, for the live display: (ID, title) of the story
    /// landing now, then those waiting, in order.
    /// What the merge queue validates now (its chain, in order).
    pub(crate) landing_now: Vec<(String, String)>,
    pub(crate) land_queue: Vec<(String, String)>,
    /// Seconds until the run is through, as forecast from the project's
    /// history (`None` without one).
    pub(crate) eta_secs: Option<f64>,
}

pub(crate) fn tokens(u: &Usage) -> u64 {
    u.input_tokens + u.output_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
}

/// `12.3k`, `1.2M`: token counts in a line or a table cell.
pub(crate) fn short_count(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 1_000 {
        format!("{:.1}k", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

/// `3/8 done · 2 running · 1 landing · 1 failed · 0 blocked · 4m10s · 12.3k tokens · $0.42`
/// (the live display uses `render_totals_fit`: indicatif ticks the time).
#[cfg(test)]
pub(crate) fn render_totals(t: &Totals, elapsed: Option<Duration>) -> String {
    totals_parts(t, elapsed)
        .into_iter()
        .map(|(part, _)| part)
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The parts of the totals line, each with how much it matters (0 =
/// always shown; higher numbers give way first when the line is narrow).
fn totals_parts(t: &Totals, elapsed: Option<Duration>) -> Vec<(String, u8)> {
    let mut parts = vec![
        (format!("{}/{} done", t.done, t.total), 0),
        (format!("{} running", t.running), 1),
    ];
    if t.landing > 0 {
        parts.push((format!("{} landing", t.landing), 1));
    }
    parts.push((
        format!("{} failed", t.failed),
        if t.failed > 0 { 1 } else { 4 },
    ));
    parts.push((
        format!("{} blocked", t.blocked),
        if t.blocked > 0 { 2 } else { 4 },
    ));
    if let Some(e) = elapsed {
        parts.push((human_duration(e.as_secs_f64()), 2));
    }
    parts.push((format!("{} tokens", short_count(tokens(&t.usage))), 3));
    parts.push((crate::spend::money(t.cost_usd, t.cost_unknown, true), 2));
    if let Some(eta) = t.eta_secs {
        parts.push((format!("ETA ~{}", crate::forecast::human_secs(eta)), 2));
    }
    if let Some(p) = t.paused_secs {
        parts.push((format!("usage limit: new work in {}", human_duration(p)), 0));
    }
    if let Some(j) = &t.jobs_now {
        let why: Vec<String> = j.fewer.iter().map(fewer_text).collect();
        parts.push((
            format!("{} of {} jobs: {}", j.now, j.asked, why.join(", ")),
            1,
        ));
    }
    parts
}

/// `Jobs: 1 of 4: memory (1.5 GB free, 2.0 GB per agent)`, for `status`.
pub(crate) fn render_jobs(j: &crate::schedule::Jobs) -> String {
    let why: Vec<String> = j.fewer.iter().map(fewer_text).collect();
    format!("Jobs: {} of {}: {}", j.now, j.asked, why.join(", "))
}

/// Megabytes as the user reads them: `900 MB`, `2.0 GB`.
pub(super) fn mb_text(mb: u64) -> String {
    if mb >= 1024 {
        format!("{:.1} GB", mb as f64 / 1024.0)
    } else {
        format!("{mb} MB")
    }
}

fn fewer_text(f: &crate::schedule::Fewer) -> String {
    use crate::schedule::Fewer;
    match f {
        Fewer::LimitNear => "usage limit near".to_string(),
        Fewer::Memory {
            available_mb,
            per_agent_mb,
        } => format!(
            "memory ({} free, {} per agent)",
            mb_text(*available_mb),
            mb_text(*per_agent_mb)
        ),
    }
}

/// The totals line in at most `max` columns: the least important parts
/// are left out first, and what still does not fit is cut.
pub(crate) fn render_totals_fit(t: &Totals, max: usize) -> String {
    let mut parts = totals_parts(t, None);
    loop {
        let line = parts
            .iter()
            .map(|(p, _)| p.as_str())
            .collect::<Vec<_>>()
            .join(" · ");
        if crate::ui::width(&line) <= max {
            return line;
        }
        match parts
            .iter()
            .enumerate()
            .filter(|(_, (_, rank))| *rank > 0)
            .max_by_key(|(i, (_, rank))| (*rank, *i))
        {
            Some((i, _)) => {
                parts.remove(i);
            }
            None => return crate::ui::truncate(&line, max),
        }
    }
}

/// The live display's progress line after its bar: stories landed of the
/// run's total, the time since the run began, and when it should end at
/// the pace of this run's landings so far (`landed_before`: done when it
/// began; no estimate before one landed).
pub(crate) fn render_progress(
    landed_before: usize,
    done: usize,
    total: usize,
    secs: f64,
) -> String {
    let landed_here = done.saturating_sub(landed_before);
    let left = total.saturating_sub(done);
    let eta = if left == 0 {
        "ETA now".to_string()
    } else if landed_here == 0 || secs <= 0.0 {
        "ETA –".to_string()
    } else {
        let per_story = secs / landed_here as f64;
        format!(
            "ETA {}",
            crate::timefmt::human_duration(per_story * left as f64)
        )
    };
    format!(
        "{done}/{total} landed · {} elapsed · {eta}",
        crate::timefmt::human_duration(secs)
    )
}

/// Column widths of a story row of the live display for a terminal `cols`
/// wide: `  <id> <title> <elapsed>  <activity>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowLayout {
    pub(crate) id: usize,
    pub(crate) title: usize,
    pub(crate) activity: usize,
}

/// Columns kept free at the right: the terminal echoes `^C` after the
/// last row, and a row that wraps then leaves a stale copy of the display
/// behind (the display counts the lines it drew).
pub(crate) const RIGHT_MARGIN: usize = 3;

/// The elapsed time's column (`{elapsed:>5}`) and the spaces around it.
pub(super) const ELAPSED_COLS: usize = 1 + 5 + 2;

impl RowLayout {
    pub(crate) fn new(cols: usize, longest_id: usize, longest_title: usize) -> RowLayout {
        let usable = cols.saturating_sub(RIGHT_MARGIN).max(40);
        let id = longest_id.clamp(3, 12);
        let rest = usable.saturating_sub(2 + id + 1 + ELAPSED_COLS);
        let title = longest_title.clamp(8, 40).min(rest * 2 / 5).max(8);
        RowLayout {
            id,
            title,
            activity: rest.saturating_sub(title),
        }
    }
}

/// The fixed part of a story's row, before its elapsed time: indent, ID
/// and title, fitted to `layout`.
pub(crate) fn render_story_prefix(id: &str, title: &str, layout: RowLayout) -> String {
    format!(
        "  {} {}",
        crate::ui::fit(id, layout.id),
        crate::ui::fit(title, layout.title)
    )
}

/// Where a story in the merge queue is, for its row.
pub(crate) fn render_landing_phase(position: Option<usize>) -> String {
    match position {
        None => "landing: merging and validating".to_string(),
        Some(0) => "waiting to land (next)".to_string(),
        Some(n) => format!("waiting to land ({} ahead)", n),
    }
}

/// The latest activity, one line, bounded (the display fits it further);
/// paths inside ralph's worktrees relative to the worktree.
pub(crate) fn render_activity(text: &str) -> String {
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    crate::paths::relative_to_worktree(first)
        .chars()
        .take(120)
        .collect()
}

/// A running story's row after its elapsed time: the cluster node its
/// attempt runs on once known (a local attempt has none), then its
/// latest activity (`render_activity`'s).
pub(crate) fn render_running(node: Option<&str>, activity: &str) -> String {
    match (node, activity.is_empty()) {
        (Some(n), true) => format!("on {n}"),
        (Some(n), false) => format!("on {n} · {activity}"),
        (None, true) => "starting".to_string(),
        (None, false) => activity.to_string(),
    }
}

/// The fixed part of a racing candidate's row under its story's (best of
/// N, issue 36): `└k` in the ID's column, `agent:model` in the title's.
pub(crate) fn render_candidate_prefix(k: u32, who: &str, layout: RowLayout) -> String {
    format!(
        "  {} {}",
        crate::ui::fit(&format!(" └{k}"), layout.id),
        crate::ui::fit(who, layout.title)
    )
}

/// A racing candidate's row after its elapsed time: where it is (its
/// `status --json` state), and while it runs its node and latest activity.
pub(crate) fn render_candidate(state: &str, node: Option<&str>, activity: &str) -> String {
    match state {
        "running" => match (node, activity.is_empty()) {
            (Some(_), _) => format!("running {}", render_running(node, activity)),
            (None, true) => "running".to_string(),
            (None, false) => format!("running · {activity}"),
        },
        "waiting" => "waiting for a slot".to_string(),
        "done" => "done: waiting for the merge queue".to_string(),
        "validating" => "in the merge queue".to_string(),
        "passed" => "passed: waiting for the pick".to_string(),
        other => other.to_string(),
    }
}

/// A racing story's own row after its elapsed time: how many candidates
/// are where, busiest first (`2 running, 1 failed`).
pub(crate) fn render_race(states: &[&str]) -> String {
    const ORDER: [&str; 8] = [
        "running",
        "validating",
        "done",
        "passed",
        "waiting",
        "won",
        "failed",
        "stopped",
    ];
    let count = |w: &str| states.iter().filter(|s| **s == w).count();
    let mut parts: Vec<String> = ORDER
        .iter()
        .filter(|w| count(w) > 0)
        .map(|w| format!("{} {w}", count(w)))
        .collect();
    let other = states.iter().filter(|s| !ORDER.contains(s)).count();
    if other > 0 {
        parts.push(format!("{other} other"));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_candidates_row_says_who_it_is_where_it_is_and_what_it_does() {
        let layout = RowLayout::new(80, 3, 13);
        let prefix = render_candidate_prefix(2, "claude:sonnet", layout);
        assert_eq!(prefix, "   └2 claude:sonnet");
        assert_eq!(
            crate::ui::width(&prefix),
            crate::ui::width(&render_story_prefix("1.1", "A title", layout))
        );
        // Cut to the title's column like a title.
        let narrow = RowLayout::new(40, 3, 8);
        assert_eq!(
            crate::ui::width(&render_candidate_prefix(
                2,
                "claude:sonnet-4-5-long",
                narrow
            )),
            2 + narrow.id + 1 + narrow.title
        );
        assert_eq!(render_candidate("running", None, ""), "running");
        assert_eq!(
            render_candidate("running", None, "Bash: ls"),
            "running · Bash: ls"
        );
        assert_eq!(
            render_candidate("running", Some("w2/0"), "Bash: ls"),
            "running on w2/0 · Bash: ls"
        );
        assert_eq!(
            render_candidate("running", Some("w2/0"), ""),
            "running on w2/0"
        );
        assert_eq!(render_candidate("waiting", None, ""), "waiting for a slot");
        assert_eq!(
            render_candidate("done", None, "Bash: ls"),
            "done: waiting for the merge queue"
        );
        assert_eq!(
            render_candidate("validating", None, ""),
            "in the merge queue"
        );
        assert_eq!(
            render_candidate("passed", None, ""),
            "passed: waiting for the pick"
        );
        for word in ["failed", "stopped", "won"] {
            assert_eq!(render_candidate(word, Some("w2/0"), "x"), word);
        }
    }

    #[test]
    fn a_racing_storys_row_counts_its_candidates_busiest_first() {
        assert_eq!(
            render_race(&["failed", "running", "running", "waiting"]),
            "2 running, 1 waiting, 1 failed"
        );
        assert_eq!(render_race(&["stopped", "won"]), "1 won, 1 stopped");
        assert_eq!(render_race(&["validating", "odd"]), "1 validating, 1 other");
        assert_eq!(render_race(&[]), "");
    }
}
