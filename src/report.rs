//! What the user sees, as text: every line a run prints (`Message` and
//! `render`, here), the live display's totals, progress line and story
//! rows (`rows.rs`), the run's summary and progress.txt lines
//! (`summary.rs`), and the graph forms (`graph.rs`). Pure; `display` puts
//! it on the terminal.

use crate::timefmt::human_duration;

mod graph;
mod rows;
mod summary;

pub(crate) use graph::{render_graph, GraphNode, GraphStyle, HELD};
use rows::mb_text;
#[cfg(test)]
pub(crate) use rows::render_totals;
pub(crate) use rows::{
    render_activity, render_candidate, render_candidate_prefix, render_jobs, render_landing_phase,
    render_progress, render_race, render_running, render_story_prefix, render_totals_fit,
    short_count, tokens, RowLayout, Totals, RIGHT_MARGIN,
};

// What the tests name unqualified (`use super::*`).
pub(crate) use summary::{
    progress_done, progress_fail, render_summary, render_waste, waste_json, RunSummary,
};
#[cfg(test)]
use {
    crate::agent::event::Usage,
    crate::schedule::StoryState,
    crate::state::{Tally, Waste},
    rows::ELAPSED_COLS,
    std::time::Duration,
};

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
    /// Racing candidate `k` of `of` started (best of N, issue 36); `who`
    /// is `agent` or `agent:model`.
    CandidateStarted {
        id: String,
        k: u32,
        of: u32,
        who: String,
    },
    /// Racing candidate `k`'s fate is decided: `outcome` is its state's
    /// word (`won`, `failed`, `stopped`, ...).
    CandidateEnded {
        id: String,
        k: u32,
        of: u32,
        who: String,
        outcome: String,
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
            fixup,
            model,
            logged,
        } => started_line(id, title, *attempt, *max, *fixup, model, *logged),
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
        } => fault_line(id, reason, *wait_secs, kept.as_deref()),
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
        } => memory_low_line(*jobs, *asked, *available_mb, *per_agent_mb),
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
        } => failed_line(id, *attempt, *max, reason, log.as_deref(), kept.as_deref()),
        m @ (Message::CandidateStarted { .. } | Message::CandidateEnded { .. }) => race_line(m),
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
        } => gated_line(id, first, *more, then),
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
        } => dependencies_first_line(ids, run_first, failed),
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
        } => landed_line(id, title, *secs, *tokens, *cost_usd, commit),
        Message::Conflict {
            id,
            target,
            paths,
            fixup,
        } => conflict_line(id, target, paths, *fixup),
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

/// `[run ] ID title (attempt n/max)` or `[fix ] ID title (fix-up ...)`,
/// with the model ralph chose.
/// A racing candidate's start or end (best of N, issue 36).
fn race_line(m: &Message) -> String {
    match m {
        Message::CandidateStarted { id, k, of, who } => {
            format!("[race] {id} candidate {k} of {of} ({who}) started")
        }
        Message::CandidateEnded {
            id,
            k,
            of,
            who,
            outcome,
        } => format!("[race] {id} candidate {k} of {of} ({who}): {outcome}"),
        _ => String::new(),
    }
}

fn started_line(
    id: &str,
    title: &str,
    attempt: u32,
    max: u32,
    fixup: bool,
    model: &Option<String>,
    logged: Option<u32>,
) -> String {
    if fixup {
        return format!(
            "[fix ] {id} {title} (fix-up of its finished work){}",
            on(model)
        );
    }
    format!(
        "[run ] {id} {title} (attempt {attempt}/{max}{}){}",
        logged.map_or(String::new(), |n| format!(", logged as attempt-{n}")),
        on(model)
    )
}

/// `[done] ID title (time, tokens, cost) → commit`.
fn landed_line(
    id: &str,
    title: &str,
    secs: f64,
    tokens: u64,
    cost_usd: f64,
    commit: &str,
) -> String {
    format!(
        "[done] {id} {title} ({}, {tokens} tokens, ${cost_usd:.2}) → {}",
        human_duration(secs),
        &commit[..commit.len().min(10)]
    )
}

/// `[conf] ID conflicts with TARGET in paths; what happens next`.
fn conflict_line(id: &str, target: &str, paths: &[String], fixup: bool) -> String {
    format!(
        "[conf] {id} conflicts with {target} in {}; {}",
        paths.join(", "),
        if fixup {
            "its agent resolves it on the new tip"
        } else {
            "redoing it from the new tip"
        }
    )
}

/// `[wait] ID: a fault; ...`: not the story's, tried again after a wait.
fn fault_line(id: &str, reason: &str, wait_secs: f64, kept: Option<&str>) -> String {
    format!(
        "[wait] {id}: {reason}; not counted as an attempt, trying again in {}{}",
        human_duration(wait_secs),
        kept.map(|r| format!("; its commits are kept at {r}"))
            .unwrap_or_default()
    )
}

/// `[wait] 1.5 GB of memory available, ...`: fewer jobs for now.
fn memory_low_line(jobs: usize, asked: usize, available_mb: u64, per_agent_mb: u64) -> String {
    format!(
        "[wait] {} of memory available, {} per agent (parallel.agent_memory_mb): \
         at most {} of {asked} for now; the others start as memory frees up",
        mb_text(available_mb),
        mb_text(per_agent_mb),
        plural(jobs, "job"),
    )
}

/// `[fail] ID attempt n/max: reason (log: ...); its commits are kept at ...`.
fn failed_line(
    id: &str,
    attempt: u32,
    max: u32,
    reason: &str,
    log: Option<&str>,
    kept: Option<&str>,
) -> String {
    let log = log.map(|l| format!(" (log: {l})")).unwrap_or_default();
    let kept = kept
        .map(|r| format!("; its commits are kept at {r}"))
        .unwrap_or_default();
    format!("[fail] {id} attempt {attempt}/{max}: {reason}{log}{kept}")
}

/// `[gate] ID: the first finding (and n more); what it leads to`.
fn gated_line(id: &str, first: &str, more: usize, then: &str) -> String {
    let more = if more > 0 {
        format!(" (and {more} more)")
    } else {
        String::new()
    };
    format!("[gate] {id}: {first}{more}; {then}")
}

/// `[deps] ...`: what the stories asked for wait for, and what failed
/// under them.
fn dependencies_first_line(ids: &[String], run_first: &[String], failed: &[String]) -> String {
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
        for node in StoryState::ALL {
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

    /// Plain output's lines about a race: one at each candidate's start
    /// and one at its end (issue 36).
    #[test]
    fn a_race_says_each_candidates_start_and_end() {
        let start = Message::CandidateStarted {
            id: "2.3".into(),
            k: 2,
            of: 3,
            who: "claude:sonnet".into(),
        };
        assert_eq!(
            render(&start),
            "[race] 2.3 candidate 2 of 3 (claude:sonnet) started"
        );
        let end = Message::CandidateEnded {
            id: "2.3".into(),
            k: 2,
            of: 3,
            who: "codex".into(),
            outcome: "stopped".into(),
        };
        assert_eq!(render(&end), "[race] 2.3 candidate 2 of 3 (codex): stopped");
        assert_eq!(
            crate::ui::tag_tone(&render(&end)).map(|t| t.1),
            Some(crate::ui::Tone::Busy)
        );
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

    /// `graph` says the words `status --json` says (`StoryState::word`), in
    /// every form.
    #[test]
    fn graph_says_the_status_words() {
        let ids: Vec<String> = (0..StoryState::ALL.len())
            .map(|i| format!("1.{i}"))
            .collect();
        let nodes: Vec<GraphNode> = StoryState::ALL
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
            for (n, id) in StoryState::ALL.iter().zip(&ids) {
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
                node: StoryState::Done,
                held: false,
            },
            GraphNode {
                id: "1.2",
                title: "B",
                node: StoryState::Pending,
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
                node: StoryState::Pending,
                held: true,
            },
            GraphNode {
                id: "1.2",
                title: "B",
                node: StoryState::Pending,
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
