//! What the user sees, as text: every line a run prints (`Message` and
//! `render`), its summary, progress.txt lines, the totals line and the
//! graph forms. Pure; `display` puts it on the terminal.

use std::time::Duration;

use crate::agent::event::Usage;
use crate::schedule::Node;
use crate::state::{Tally, Waste};
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
fn mb_text(mb: u64) -> String {
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
const ELAPSED_COLS: usize = 1 + 5 + 2;

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

/// A line a run prints about one of its events, as data; `render` is the
/// only place its words are chosen.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Message {
    Header {
        total: usize,
        done: usize,
        jobs: usize,
        target: String,
    },
    Started {
        id: String,
        title: String,
        attempt: u32,
        max: u32,
        /// Finished work handed back to its agent.
        fixup: bool,
        /// The model it runs on, when ralph chose one (issue 25).
        model: Option<String>,
        /// The number its log and kept refs carry, when not `attempt`: a
        /// story's log numbers run on over `ralph reset ID` and attempts
        /// not charged, so no earlier log is overwritten (issue 32).
        logged: Option<u32>,
    },
    Finished {
        id: String,
        secs: f64,
    },
    /// The agent said DONE but left its work uncommitted; ralph committed it.
    CommittedForAgent {
        id: String,
        files: usize,
        commit: String,
    },
    RateLimited {
        id: String,
        wait_secs: f64,
    },
    Stopped {
        id: String,
    },
    /// A person steered the run (`ralph pause`, `ralph hold ID`, ...): what
    /// changed.
    Steered {
        text: String,
    },
    /// Nothing runs and the run waits for a person: what for, in words.
    WaitingForPerson {
        what: String,
    },
    /// The agent warned its usage limit is near: fewer jobs for a while.
    LimitNear {
        jobs: usize,
        secs: f64,
    },
    /// Memory holds fewer agents than `-j` asks: the rest wait.
    MemoryLow {
        jobs: usize,
        asked: usize,
        available_mb: u64,
        per_agent_mb: u64,
    },
    /// An agent's model API failed past `limits.max_wait_hours`; the next
    /// agent takes new attempts.
    ApiGivenUp {
        agent: String,
        fallback: String,
        reason: String,
    },
    /// A run starts inside a usage-limit pause an earlier run recorded.
    Paused {
        agent: String,
        wait_secs: f64,
    },
    /// A fault outside the story: not counted, tried again after a pause.
    Fault {
        id: String,
        reason: String,
        wait_secs: f64,
        /// Where the commits it made before the fault are kept.
        kept: Option<String>,
    },
    Failed {
        id: String,
        attempt: u32,
        max: u32,
        reason: String,
        log: Option<String>,
        kept: Option<String>,
    },
    FailedForGood {
        id: String,
        max: u32,
        blocked: Vec<String>,
    },
    /// The trust gates found something on its landing (issue 26).
    Gated {
        id: String,
        /// The first finding, on one line.
        first: String,
        more: usize,
        /// What follows, in words.
        then: String,
    },
    /// Validated, kept on its branch for a person (`landing.mode: review`).
    InReview {
        id: String,
        title: String,
    },
    /// The run that splits a story into sub-stories starts.
    Splitting {
        id: String,
        title: String,
        model: Option<String>,
    },
    /// Validated, pushed and proposed as a pull request.
    InPr {
        id: String,
        url: String,
    },
    /// It failed for good; one agent run now splits it into sub-stories.
    Decomposing {
        id: String,
        max: u32,
    },
    /// Stories asked for (`ids`: `-s`, `-r`) wait for stories that are not
    /// done: those run first (`run_first`), or block them (`failed`).
    DependenciesFirst {
        ids: Vec<String>,
        run_first: Vec<String>,
        failed: Vec<String>,
    },
    /// Its sub-stories landed in the backlog, in its place.
    Decomposed {
        id: String,
        children: Vec<String>,
    },
    Landed {
        id: String,
        title: String,
        secs: f64,
        tokens: u64,
        cost_usd: f64,
        commit: String,
    },
    Conflict {
        id: String,
        target: String,
        paths: Vec<String>,
        /// Its agent gets the conflict to resolve (else: a redo).
        fixup: bool,
    },
    ConflictGiveUp {
        id: String,
        conflicts: u32,
        blocked: usize,
    },
    LandingStopped {
        id: String,
    },
    Stopping {
        signal: String,
    },
    Killing,
    SaveFailed {
        error: String,
    },
}

/// ` on <model>` when ralph chose the model, else nothing.
fn on(model: &Option<String>) -> String {
    model
        .as_deref()
        .map(|m| format!(" on {m}"))
        .unwrap_or_default()
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// `1 story`, `3 stories`; `1 dependency edge`, `2 dependency edges`.
pub(crate) fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The line the user sees for `m`.
pub(crate) fn render(m: &Message) -> String {
    match m {
        Message::Header {
            total,
            done,
            jobs,
            target,
        } => format!(
            "ralph: {total} stories, {done} done, {} to run · {} · landing on {target}",
            total - done,
            plural(*jobs, "job")
        ),
        Message::Started {
            id,
            title,
            attempt,
            max,
            fixup: false,
            model,
            logged,
        } => format!(
            "[run ] {id} {title} (attempt {attempt}/{max}{}){}",
            logged.map_or(String::new(), |n| format!(", logged as attempt-{n}")),
            on(model)
        ),
        Message::Started {
            id,
            title,
            fixup: true,
            model,
            ..
        } => format!(
            "[fix ] {id} {title} (fix-up of its finished work){}",
            on(model)
        ),
        Message::Finished { id, secs } => {
            format!("[land] {id} finished in {}; landing", human_duration(*secs))
        }
        Message::CommittedForAgent { id, files, commit } => format!(
            "[note] {id}: the agent said DONE but left {} uncommitted; ralph committed {} ({}) \
             so {} with the story",
            plural(*files, "file"),
            if *files == 1 { "it" } else { "them" },
            &commit[..commit.len().min(10)],
            if *files == 1 { "it lands" } else { "they land" }
        ),
        Message::RateLimited { id, wait_secs } => format!(
            "[wait] {id}: the agent hit a usage/rate limit; pausing new work for {}",
            human_duration(*wait_secs)
        ),
        Message::Fault {
            id,
            reason,
            wait_secs,
            kept,
        } => format!(
            "[wait] {id}: {reason}; not counted as an attempt, trying again in {}{}",
            human_duration(*wait_secs),
            kept.as_ref()
                .map(|r| format!("; its commits are kept at {r}"))
                .unwrap_or_default()
        ),
        Message::LimitNear { jobs, secs } => format!(
            "[wait] the agent's usage limit is near: at most {} for {}",
            plural(*jobs, "job"),
            human_duration(*secs)
        ),
        Message::MemoryLow {
            jobs,
            asked,
            available_mb,
            per_agent_mb,
        } => format!(
            "[wait] {} of memory available, {} per agent (parallel.agent_memory_mb): \
             at most {} of {asked} for now; the others start as memory frees up",
            mb_text(*available_mb),
            mb_text(*per_agent_mb),
            plural(*jobs, "job"),
        ),
        Message::ApiGivenUp {
            agent,
            fallback,
            reason,
        } => format!(
            "[wait] the {agent} agent's model API kept failing past limits.max_wait_hours \
             ({reason}); new attempts use the {fallback} agent"
        ),
        Message::Paused { agent, wait_secs } => format!(
            "[wait] the {agent} agent's usage limit resets in {}; new work waits until then",
            human_duration(*wait_secs)
        ),
        Message::Stopped { id } => {
            format!("[stop] {id} stopped; it will be redone by the next `ralph run`")
        }
        Message::Steered { text } => format!("[steer] {text}"),
        Message::WaitingForPerson { what } => {
            format!("[wait] nothing runs: waiting for {what}; Ctrl-C or `ralph drain` ends the run")
        }
        Message::Failed {
            id,
            attempt,
            max,
            reason,
            log,
            kept,
        } => {
            let log = log
                .as_ref()
                .map(|l| format!(" (log: {l})"))
                .unwrap_or_default();
            let kept = kept
                .as_ref()
                .map(|r| format!("; its commits are kept at {r}"))
                .unwrap_or_default();
            format!("[fail] {id} attempt {attempt}/{max}: {reason}{log}{kept}")
        }
        Message::Splitting { id, title, model } => format!(
            "[split] {id} {title}: one run{} splits it into smaller stories",
            on(model)
        ),
        Message::InPr { id, url } => {
            format!("[pr  ] {id} validated; pull request {url} (done once it is merged)")
        }
        Message::Gated {
            id,
            first,
            more,
            then,
        } => {
            let more = if *more > 0 {
                format!(" (and {more} more)")
            } else {
                String::new()
            };
            format!("[gate] {id}: {first}{more}; {then}")
        }
        Message::InReview { id, title } => format!(
            "[revw] {id} {title}: validated; waits for review on ralph/story-{id} \
             (`ralph review`, then `ralph land {id}` or `ralph reject {id}`)"
        ),
        Message::Decomposing { id, max } => {
            format!("[split] {id} failed {max} times; one run splits it into smaller stories")
        }
        Message::DependenciesFirst {
            ids,
            run_first,
            failed,
        } => {
            let who = ids.join(", ");
            let mut parts = Vec::new();
            if !run_first.is_empty() {
                parts.push(format!(
                    "{who} {} for {}, not landed yet: {} first",
                    if ids.len() == 1 { "waits" } else { "wait" },
                    run_first.join(", "),
                    if run_first.len() == 1 {
                        "it runs"
                    } else {
                        "they run"
                    }
                ));
            }
            if let Some(first) = failed.first() {
                parts.push(format!(
                    "{} failed for good, so {who} cannot run (`ralph run -s {first}` retries it)",
                    failed.join(", ")
                ));
            }
            format!("[deps] {}", parts.join("; "))
        }
        Message::Decomposed { id, children } => format!(
            "[split] {id} is replaced by {}; its dependents wait for all of them",
            children.join(", ")
        ),
        Message::FailedForGood { id, max, blocked } => format!(
            "[FAIL] {id} failed {max} times; a person is needed (`ralph run -s {id}` retries it){}",
            if blocked.is_empty() {
                String::new()
            } else {
                format!("; blocked: {}", blocked.join(", "))
            }
        ),
        Message::Landed {
            id,
            title,
            secs,
            tokens,
            cost_usd,
            commit,
        } => format!(
            "[done] {id} {title} ({}, {tokens} tokens, ${cost_usd:.2}) → {}",
            human_duration(*secs),
            &commit[..commit.len().min(10)]
        ),
        Message::Conflict {
            id,
            target,
            paths,
            fixup,
        } => format!(
            "[conf] {id} conflicts with {target} in {}; {}",
            paths.join(", "),
            if *fixup {
                "its agent resolves it on the new tip"
            } else {
                "redoing it from the new tip"
            }
        ),
        Message::ConflictGiveUp {
            id,
            conflicts,
            blocked,
        } => format!(
            "[FAIL] {id} conflicted {conflicts} times; a person is needed ({blocked} blocked)"
        ),
        Message::LandingStopped { id } => {
            format!("[stop] {id} was waiting to land; the next `ralph run` lands it")
        }
        Message::Stopping { signal } => format!(
            "ralph: {signal} received: stopping agents (again to kill them at once); state is saved"
        ),
        Message::Killing => "ralph: killing agents now".to_string(),
        Message::SaveFailed { error } => format!("error: cannot save state: {error}"),
    }
}

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

/// One story of `ralph graph`.
#[derive(Debug, Clone)]
pub(crate) struct GraphNode<'a> {
    pub(crate) id: &'a str,
    pub(crate) title: &'a str,
    pub(crate) node: Node,
    /// Held by `ralph hold ID` (or `stop`): its status alone does not say
    /// why it does not start.
    pub(crate) held: bool,
}

/// The words that mark a held story in `stories` and `graph`.
pub(crate) const HELD: &str = "held";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GraphStyle {
    Dot,
    Mermaid,
    Text,
}

/// Renders the DAG; `edges` are `(waited for, waiting)` index pairs and
/// `order` a topological order (used by the text form).
pub(crate) fn render_graph(
    nodes: &[GraphNode<'_>],
    edges: &[(usize, usize)],
    order: &[usize],
    style: GraphStyle,
) -> String {
    let quote = |s: &str| s.replace('"', "'");
    let mut out = String::new();
    match style {
        GraphStyle::Dot => {
            out.push_str("digraph stories {\n  rankdir=LR;\n");
            for n in nodes {
                let color = match n.node {
                    Node::Done => "palegreen",
                    Node::Failed => "salmon",
                    Node::Blocked => "lightgrey",
                    Node::Running | Node::Landing => "lightblue",
                    Node::Review => "khaki",
                    Node::Pending | Node::Excluded => "white",
                };
                // A held story's box is dashed, and its label says so.
                let (mark, style) = match n.held {
                    true => (format!(" {HELD}"), "\"filled,dashed\""),
                    false => (String::new(), "filled"),
                };
                out.push_str(&format!(
                    "  \"{}\" [label=\"{}\\n{}\\n[{}]{mark}\", style={style}, fillcolor={color}];\n",
                    n.id,
                    n.id,
                    quote(n.title),
                    n.node.word()
                ));
            }
            for &(a, b) in edges {
                out.push_str(&format!("  \"{}\" -> \"{}\";\n", nodes[a].id, nodes[b].id));
            }
            out.push_str("}\n");
        }
        GraphStyle::Mermaid => {
            out.push_str("graph LR\n");
            for (i, n) in nodes.iter().enumerate() {
                out.push_str(&format!(
                    "  s{i}[\"{} {} ({}{})\"]\n",
                    n.id,
                    quote(n.title),
                    n.node.word(),
                    if n.held {
                        format!(", {HELD}")
                    } else {
                        String::new()
                    }
                ));
            }
            for &(a, b) in edges {
                out.push_str(&format!("  s{a} --> s{b}\n"));
            }
        }
        GraphStyle::Text => {
            for &i in order {
                let mut waits: Vec<&str> = edges
                    .iter()
                    .filter(|e| e.1 == i)
                    .map(|e| nodes[e.0].id)
                    .collect();
                waits.sort_unstable();
                let n = &nodes[i];
                out.push_str(&format!("[{}] {} {}", n.node.word(), n.id, n.title));
                if n.held {
                    out.push_str(&format!(" ({HELD})"));
                }
                if !waits.is_empty() {
                    out.push_str(&format!("  <- {}", waits.join(", ")));
                }
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_line_estimates_from_this_runs_landings() {
        assert_eq!(
            render_progress(2, 2, 10, 30.0),
            "2/10 landed · 30s elapsed · ETA –"
        );
        // Two landed in 4 minutes: six left take twelve.
        assert_eq!(
            render_progress(2, 4, 10, 240.0),
            "4/10 landed · 4m00s elapsed · ETA 12m00s"
        );
        assert_eq!(
            render_progress(0, 5, 5, 61.0),
            "5/5 landed · 1m01s elapsed · ETA now"
        );
    }

    /// README's list of `ralph stories` tags names every tag the code
    /// prints (issue 21, defect 7: `[revw]` was missing).
    #[test]
    fn readme_names_every_story_tag() {
        let readme = include_str!("../README.md");
        let line = readme
            .lines()
            .find(|l| l.starts_with("| `ralph stories` |"))
            .expect("README's command table has `ralph stories`");
        for node in [
            Node::Done,
            Node::Running,
            Node::Landing,
            Node::Review,
            Node::Failed,
            Node::Blocked,
            Node::Pending,
        ] {
            let tag = format!("`[{}]`", node.word());
            assert!(line.contains(&tag), "README lacks {tag}: {line}");
        }
    }

    /// Every line a run can print about its events, one per variant.
    #[test]
    fn run_lines_snapshot() {
        let id = || "2.3".to_string();
        let messages = [
            Message::Header {
                total: 12,
                done: 4,
                jobs: 1,
                target: "main".into(),
            },
            Message::Header {
                total: 12,
                done: 0,
                jobs: 4,
                target: "feature/x".into(),
            },
            Message::Started {
                id: id(),
                title: "Add the parser".into(),
                attempt: 2,
                max: 3,
                fixup: false,
                model: None,
                logged: None,
            },
            Message::Started {
                id: id(),
                title: "Add the parser".into(),
                attempt: 1,
                max: 3,
                fixup: true,
                model: None,
                logged: None,
            },
            Message::Finished {
                id: id(),
                secs: 754.0,
            },
            Message::CommittedForAgent {
                id: id(),
                files: 3,
                commit: "0123456789abcdef".into(),
            },
            Message::CommittedForAgent {
                id: id(),
                files: 1,
                commit: "fedcba9876543210".into(),
            },
            Message::RateLimited {
                id: id(),
                wait_secs: 3602.0,
            },
            Message::Stopped { id: id() },
            Message::Steered {
                text: "paused: no new attempt starts; running ones finish and land".into(),
            },
            Message::WaitingForPerson {
                what: "`ralph land` (in review: 2.1)".into(),
            },
            Message::ApiGivenUp {
                agent: "claude".into(),
                fallback: "codex".into(),
                reason: "the model API failed: API Error: Repeated 529 Overloaded errors".into(),
            },
            Message::Paused {
                agent: "claude".into(),
                wait_secs: 1800.0,
            },
            Message::LimitNear {
                jobs: 3,
                secs: 5400.0,
            },
            Message::MemoryLow {
                jobs: 1,
                asked: 4,
                available_mb: 1500,
                per_agent_mb: 2048,
            },
            Message::Fault {
                id: id(),
                reason: "could not prepare the worktree of slot 1: No space left on device".into(),
                wait_secs: 10.0,
                kept: None,
            },
            Message::Fault {
                id: id(),
                reason: "job ralph-x-2.3-1 ended without a report (FAILED: node died); it runs \
                         again"
                    .into(),
                wait_secs: 10.0,
                kept: Some("refs/ralph/attempts/2.3/1-interrupted".into()),
            },
            Message::Failed {
                id: id(),
                attempt: 1,
                max: 3,
                reason: "Exit code 1: tests failed".into(),
                log: Some(".ralph/logs/2.3/attempt-1.log".into()),
                kept: Some("refs/ralph/attempts/2.3/1".into()),
            },
            Message::Failed {
                id: id(),
                attempt: 2,
                max: 3,
                reason: "validation 'tests' failed on the merged tree: 1 failed".into(),
                log: None,
                kept: None,
            },
            Message::FailedForGood {
                id: id(),
                max: 3,
                blocked: vec!["2.4".into(), "3.1".into()],
            },
            Message::FailedForGood {
                id: id(),
                max: 3,
                blocked: vec![],
            },
            Message::Decomposing { id: id(), max: 3 },
            Message::InReview {
                id: id(),
                title: "A title".into(),
            },
            Message::InPr {
                id: id(),
                url: "https://github.com/o/r/pull/7".into(),
            },
            Message::Splitting {
                id: id(),
                title: "A title".into(),
                model: None,
            },
            Message::Decomposed {
                id: id(),
                children: vec!["2.3.1".into(), "2.3.2".into()],
            },
            Message::DependenciesFirst {
                ids: vec![id()],
                run_first: vec!["1.1".into(), "2.1".into()],
                failed: vec![],
            },
            Message::DependenciesFirst {
                ids: vec![id()],
                run_first: vec!["2.1".into()],
                failed: vec!["1.1".into()],
            },
            Message::Landed {
                id: id(),
                title: "Add the parser".into(),
                secs: 61.0,
                tokens: 123_456,
                cost_usd: 0.4249,
                commit: "0123456789abcdef0123456789abcdef01234567".into(),
            },
            Message::Conflict {
                id: id(),
                target: "main".into(),
                paths: vec!["FEATURES.md".into(), "src/lib.rs".into()],
                fixup: true,
            },
            Message::Conflict {
                id: id(),
                target: "main".into(),
                paths: vec!["FEATURES.md".into()],
                fixup: false,
            },
            Message::ConflictGiveUp {
                id: id(),
                conflicts: 6,
                blocked: 2,
            },
            Message::LandingStopped { id: id() },
            Message::Stopping {
                signal: "interrupt".into(),
            },
            Message::Killing,
            Message::SaveFailed {
                error: "No space left on device (os error 28)".into(),
            },
            // The model ralph chose, where it chose one (issue 25).
            Message::Started {
                id: id(),
                title: "Add the parser".into(),
                attempt: 3,
                max: 3,
                fixup: false,
                model: Some("opus".into()),
                logged: None,
            },
            Message::Started {
                id: id(),
                title: "Add the parser".into(),
                attempt: 1,
                max: 3,
                fixup: true,
                model: Some("haiku".into()),
                logged: None,
            },
            Message::Splitting {
                id: id(),
                title: "A title".into(),
                model: Some("opus".into()),
            },
        ];
        let lines: Vec<String> = messages.iter().map(render).collect();
        insta::assert_snapshot!(lines.join("\n"));
    }

    #[test]
    fn run_summary_snapshot() {
        let usage = Usage {
            input_tokens: 1_200_000,
            output_tokens: 34_000,
            ..Usage::default()
        };
        let failed = RunSummary {
            done: 7,
            total: 10,
            failed: vec!["2.3".into()],
            blocked: vec!["2.4".into(), "3.1".into()],
            pending: 0,
            elapsed_secs: 4000.0,
            usage,
            cost_usd: 12.5,
            cost_unknown: false,
            run_tokens: 234_000,
            run_cost_usd: 2.5,
            run_cost_unknown: false,
            limit_reached: None,
            in_review: vec!["1.4".into()],
            all_complete: false,
            waste: Waste {
                landed: 7,
                first: Tally {
                    runs: 10,
                    tokens: 1_100_000,
                    cost_usd: 11.0,
                },
                fixup: Tally {
                    runs: 1,
                    tokens: 34_000,
                    cost_usd: 0.5,
                },
                redo: Tally {
                    runs: 1,
                    tokens: 100_000,
                    cost_usd: 1.0,
                },
                failed: Tally {
                    runs: 3,
                    tokens: 300_000,
                    cost_usd: 3.0,
                },
            },
        };
        let complete = RunSummary {
            done: 10,
            failed: vec![],
            blocked: vec![],
            all_complete: true,
            ..failed.clone()
        };
        let limited = RunSummary {
            done: 3,
            pending: 7,
            failed: vec![],
            blocked: vec![],
            limit_reached: Some(3),
            waste: Waste::default(),
            ..failed.clone()
        };
        let text = [failed, complete, limited]
            .iter()
            .map(render_summary)
            .collect::<Vec<_>>()
            .join("---\n");
        insta::assert_snapshot!(text);
        assert_eq!(
            progress_done("1.1", "Title", 1_700_000_000, true),
            format!(
                "[DONE] Story 1.1 - Title - {} (tentative: commits detected, validated)",
                crate::timefmt::progress_stamp(1_700_000_000)
            )
        );
    }

    #[test]
    fn totals_line() {
        let t = Totals {
            done: 3,
            total: 8,
            running: 2,
            failed: 1,
            blocked: 0,
            usage: Usage {
                input_tokens: 12_000,
                output_tokens: 300,
                ..Usage::default()
            },
            cost_usd: 0.421,
            ..Totals::default()
        };
        assert_eq!(
            render_totals(&t, Some(Duration::from_secs(250))),
            "3/8 done · 2 running · 1 failed · 0 blocked · 4m10s · 12.3k tokens · $0.42"
        );
        let waiting = Totals {
            paused_secs: Some(754.0),
            jobs_now: Some(crate::schedule::Jobs {
                asked: 4,
                now: 2,
                fewer: vec![
                    crate::schedule::Fewer::LimitNear,
                    crate::schedule::Fewer::Memory {
                        available_mb: 900,
                        per_agent_mb: 2048,
                    },
                ],
            }),
            landing: 1,
            ..t
        };
        assert_eq!(
            render_totals(&waiting, None),
            "3/8 done · 2 running · 1 landing · 1 failed · 0 blocked · 12.3k tokens · $0.42 · usage limit: new work in 12m34s · 2 of 4 jobs: usage limit near, memory (900 MB free, 2.0 GB per agent)"
        );
        // Narrow: the least important parts go first, the counts stay.
        assert_eq!(
            render_totals_fit(&waiting, 77),
            "3/8 done · 2 running · 1 landing · 1 failed · usage limit: new work in 12m34s"
        );
        for max in [20, 40, 60, 80, 100] {
            assert!(crate::ui::width(&render_totals_fit(&waiting, max)) <= max);
        }
        assert_eq!(
            render_totals_fit(&waiting, 200),
            render_totals(&waiting, None)
        );
    }

    /// A cluster attempt's row names its node, before and with its
    /// activity; a local one's says what it always said.
    #[test]
    fn a_running_row_names_its_node_when_there_is_one() {
        assert_eq!(render_running(None, ""), "starting");
        assert_eq!(render_running(None, "Edit src/a.rs"), "Edit src/a.rs");
        assert_eq!(render_running(Some("w2/0"), ""), "on w2/0");
        assert_eq!(
            render_running(Some("w2/0"), "Edit src/a.rs"),
            "on w2/0 · Edit src/a.rs"
        );
    }

    #[test]
    fn activity_is_one_bounded_line() {
        assert_eq!(render_activity("\n  first line\nsecond"), "first line");
        assert_eq!(render_activity(&"x".repeat(200)).chars().count(), 120);
        assert_eq!(
            render_activity("Write: /tmp/p/.ralph/worktrees/slot-2/lib/upper.sh"),
            "Write: lib/upper.sh"
        );
    }

    #[test]
    fn rows_fit_the_terminal() {
        for cols in [40, 60, 80, 100, 200] {
            let l = RowLayout::new(cols, 5, 60);
            let prefix = render_story_prefix("2.3.1", &"Title ".repeat(20), l);
            let row = crate::ui::width(&prefix) + ELAPSED_COLS + l.activity;
            assert!(
                row + RIGHT_MARGIN <= cols.max(40 + RIGHT_MARGIN),
                "{cols}: {l:?}"
            );
        }
        let l = RowLayout::new(80, 3, 20);
        assert_eq!(
            l,
            RowLayout {
                id: 3,
                title: 20,
                activity: 43
            }
        );
        assert_eq!(
            render_story_prefix("1.1", "Upper-case command", l),
            "  1.1 Upper-case command  "
        );
    }

    /// `graph` says the words `status --json` says (`Node::word`), in
    /// every form.
    #[test]
    fn graph_says_the_status_words() {
        let ids: Vec<String> = (0..Node::ALL.len()).map(|i| format!("1.{i}")).collect();
        let nodes: Vec<GraphNode> = Node::ALL
            .iter()
            .zip(&ids)
            .map(|(n, id)| GraphNode {
                id,
                title: "T",
                node: *n,
                held: false,
            })
            .collect();
        let order: Vec<usize> = (0..nodes.len()).collect();
        for style in [GraphStyle::Text, GraphStyle::Dot, GraphStyle::Mermaid] {
            let out = render_graph(&nodes, &[], &order, style);
            for (n, id) in Node::ALL.iter().zip(&ids) {
                let line = out.lines().find(|l| l.contains(id.as_str())).unwrap();
                let want = match style {
                    GraphStyle::Mermaid => format!("({})", n.word()),
                    _ => format!("[{}]", n.word()),
                };
                assert!(line.contains(&want), "{style:?}: {line}");
            }
        }
    }

    #[test]
    fn graph_forms() {
        let nodes = [
            GraphNode {
                id: "1.1",
                title: "A \"q\"",
                node: Node::Done,
                held: false,
            },
            GraphNode {
                id: "1.2",
                title: "B",
                node: Node::Pending,
                held: false,
            },
        ];
        let edges = [(0, 1)];
        let text = render_graph(&nodes, &edges, &[0, 1], GraphStyle::Text);
        assert_eq!(text, "[done] 1.1 A \"q\"\n[pending] 1.2 B  <- 1.1\n");
        let dot = render_graph(&nodes, &edges, &[0, 1], GraphStyle::Dot);
        assert!(dot.contains("\"1.1\" -> \"1.2\";"), "{dot}");
        assert!(dot.contains("A 'q'"), "{dot}");
        assert!(dot.contains("[pending]"), "{dot}");
        let mermaid = render_graph(&nodes, &edges, &[0, 1], GraphStyle::Mermaid);
        assert!(
            mermaid.starts_with("graph LR\n") && mermaid.contains("s0 --> s1"),
            "{mermaid}"
        );
    }

    /// A held story says so in every form of `graph` (issue 24: why it
    /// does not start), after its status word, which stays as it was.
    #[test]
    fn graph_marks_a_held_story() {
        let nodes = [
            GraphNode {
                id: "1.1",
                title: "A",
                node: Node::Pending,
                held: true,
            },
            GraphNode {
                id: "1.2",
                title: "B",
                node: Node::Pending,
                held: false,
            },
        ];
        let edges = [(0, 1)];
        let text = render_graph(&nodes, &edges, &[0, 1], GraphStyle::Text);
        assert_eq!(text, "[pending] 1.1 A (held)\n[pending] 1.2 B  <- 1.1\n");
        let dot = render_graph(&nodes, &edges, &[0, 1], GraphStyle::Dot);
        assert!(
            dot.contains(
                "\"1.1\" [label=\"1.1\\nA\\n[pending] held\", style=\"filled,dashed\", fillcolor=white];"
            ),
            "{dot}"
        );
        assert!(
            dot.contains("\"1.2\" [label=\"1.2\\nB\\n[pending]\", style=filled,"),
            "{dot}"
        );
        let mermaid = render_graph(&nodes, &edges, &[0, 1], GraphStyle::Mermaid);
        assert!(
            mermaid.contains("s0[\"1.1 A (pending, held)\"]"),
            "{mermaid}"
        );
        assert!(mermaid.contains("s1[\"1.2 B (pending)\"]"), "{mermaid}");
    }
}
