//! `ralph status [--json]`: progress, running, failed, blocked, cost.

use std::path::Path;

use super::{load, warn_if_empty};
use crate::error::{RalphError, EXIT_OK};
use crate::project::Project;
use crate::report;
use crate::run;
use crate::schedule::StoryState;
use crate::state::State;
use crate::stats;
use crate::store::{self, RunLock};

/// How often `ralph status --watch` draws again.
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

pub(super) fn cmd_status(root: &Path, json: bool, watch: bool) -> anyhow::Result<i32> {
    if !watch {
        return status_once(root, json, false, &mut |t| print!("{t}"));
    }
    use std::io::{IsTerminal, Write};
    let tty = std::io::stdout().is_terminal();
    loop {
        status_once(root, false, true, &mut |t| {
            if tty {
                // Home, then clear: the new frame replaces the old in place.
                print!("\x1b[H\x1b[2J{t}");
            } else {
                println!("{t}");
            }
        })?;
        let _ = std::io::stdout().flush();
        // Ctrl-C ends it (the default SIGINT: nothing to clean up).
        std::thread::sleep(WATCH_EVERY);
    }
}

fn status_once(
    root: &Path,
    json: bool,
    watching: bool,
    emit: &mut dyn FnMut(&str),
) -> anyhow::Result<i32> {
    let (project, mut state) = load(root)?;
    // A fetch a second is too much: the run itself checks pull requests.
    if !watching {
        if let Some(checked) = merged_prs(root, &project, &state)? {
            state = checked;
        }
    }
    let sched = crate::status::view(&project, &state);
    let live = RunLock::is_held(root);
    let ids = |n: StoryState| -> Vec<String> {
        project
            .backlog
            .stories
            .iter()
            .enumerate()
            .filter(|(i, _)| sched.nodes[*i] == n)
            .map(|(_, s)| s.id.clone())
            .collect()
    };
    let (usage, cost) = state.total_usage();
    let total = project.backlog.stories.len();
    let done = ids(StoryState::Done);
    let mut running = ids(StoryState::Running);
    running.extend(ids(StoryState::Landing));
    if !live {
        // Without a live run these are leftovers of a crash; the next run resumes them.
        running.clear();
    }
    // Where each running cluster attempt runs, once the run knows.
    let running_on: std::collections::BTreeMap<&str, &str> = running
        .iter()
        .filter_map(|id| Some((id.as_str(), state.record(id)?.running_on.as_deref()?)))
        .collect();
    let failed = ids(StoryState::Failed);
    let blocked = ids(StoryState::Blocked);
    // A held story is not next, whatever its rank.
    let next = sched
        .ready()
        .into_iter()
        .map(|i| project.backlog.stories[i].id.clone())
        .find(|id| !state.held.contains(id));
    let now = crate::timefmt::now_secs();
    let paused: Vec<(String, i64)> = state
        .paused_until
        .iter()
        .filter(|(_, t)| **t > now)
        .map(|(a, t)| (a.clone(), *t))
        .collect();
    let attempts = if live {
        running_attempts(root)
    } else {
        Default::default()
    };
    let eta = live
        .then(|| eta_now(root, &project, &sched, &state, &attempts))
        .flatten();
    if json {
        warn_if_empty(&project);
        // The latest run's figures: what the per-run budget is about.
        let latest = crate::runlog::list_runs(root)
            .last()
            .and_then(|id| crate::runlog::read_run(root, id));
        let latest_stats = latest.as_ref().map(stats::run_stats);
        let budget_stop = latest.as_ref().is_some_and(|r| {
            r.records.iter().any(|x| {
                matches!(
                    x.ev,
                    crate::runlog::Ev::Pause {
                        why: crate::runlog::PauseWhy::Budget,
                        ..
                    }
                )
            })
        });
        let spent_run = latest_stats.as_ref().map(|s| s.figures.cost_usd);
        let v = serde_json::json!({
            "total": total,
            "done": done,
            "running": running,
            "running_on": running_on,
            "failed": failed,
            "blocked": blocked,
            "next": next,
            "run_in_progress": live,
            "usage": usage,
            "cost_usd": cost,
            "agent_runs": report::waste_json(&state.waste()),
            "paused_until": paused
                .iter()
                .map(|(a, t)| (a.clone(), serde_json::Value::from(crate::timefmt::iso(*t))))
                .collect::<serde_json::Map<_, _>>(),
            "budget": {
                "max_cost_usd_total": project.config.budget.total_usd,
                "max_cost_usd_per_run": project.config.budget.run_usd,
                "spent_usd_total": cost,
                "spent_usd_latest_run": spent_run,
                "exhausted": budget_stop
                    || project.config.budget.total_usd.is_some_and(|m| cost >= m),
            },
            // The run in progress: `now` of `asked` jobs, and why fewer.
            "jobs": state.jobs.as_ref().filter(|_| live),
            // The run in progress: seconds until it is through, as forecast
            // from the project's history (null without one).
            "eta_secs": eta.map(f64::round),
            "paused": !paused.is_empty() || (live && budget_stop),
            "latest_run": latest_stats.as_ref().map(|s| serde_json::json!({
                "id": s.id,
                "started": s.started.map(|t| crate::timefmt::iso(t as i64)),
                "in_progress": live && s.killed,
                "exit_code": s.exit_code,
                "landed": s.figures.landed,
                "attempts": s.figures.attempts,
                "tokens": s.figures.tokens,
                "cost_usd": s.figures.cost_usd,
                "cost_unknown_attempts": s.figures.costs.unknown,
                "spend_per_landed_story_usd": s.figures.costs.per_landed_story(),
                "by_model": s.figures.costs.per_model,
                "by_backend": s.figures.costs.per_backend,
            })),
            "stories": crate::status::story_rows(&project, &state, None),
            // Steering (issue 24): what a person asked for.
            "paused_by_person": state.paused,
            "held": state.held,
            "notes": state.user_notes,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(EXIT_OK);
    }
    let running = running_shown(&running, &attempts, &state);
    let text = status_text(
        &project, &state, live, &running, &failed, &blocked, next, total, &done, usage, cost,
        &paused, now, eta,
    );
    emit(&text);
    warn_if_empty(&project);
    Ok(EXIT_OK)
}

/// `landing.mode: pr` with stories in a pull request: the ones merged on
/// the remote are done now, as the next run would find them. Only when no
/// run holds the lock (a run checks them itself): then the state as it is
/// after the check, else `None`.
fn merged_prs(root: &Path, project: &Project, state: &State) -> anyhow::Result<Option<State>> {
    let Some(remote) = &project.config.landing.pr_remote else {
        return Ok(None);
    };
    let in_pr = |s: &State| {
        project
            .backlog
            .stories
            .iter()
            .any(|st| s.status(&st.id) == crate::state::Status::InPr)
    };
    // Without one the lock is not taken: a run starting meanwhile would
    // find it held.
    if !in_pr(state) {
        return Ok(None);
    }
    let Ok(_lock) = RunLock::acquire(root) else {
        return Ok(None);
    };
    // Read again under the lock: a run may have ended since.
    let mut state = store::load_state(root).map_err(|p| RalphError::BadInput(vec![p]))?;
    let git = crate::gitops::Git::open(root).map_err(|e| RalphError::usage(e.to_string()))?;
    let target = run::target_branch(project, &git)?;
    let log = store::TechLog::new(Some(crate::paths::tech_log(root)));
    run::prs_merged(project, &git, &target, remote, &mut state, &log)?;
    store::save_state(root, &state)?;
    Ok(Some(state))
}

/// `ralph status` as text, every line fitted to 80 columns.
#[allow(clippy::too_many_arguments)]
fn status_text(
    project: &Project,
    state: &State,
    live: bool,
    running: &[String],
    failed: &[String],
    blocked: &[String],
    next: Option<String>,
    total: usize,
    done: &[String],
    usage: crate::agent::event::Usage,
    cost: f64,
    paused: &[(String, i64)],
    now: i64,
    eta: Option<f64>,
) -> String {
    let mut o = Lines(String::new());
    o.push_line(format!(
        "Progress: {} / {} stories ({} remaining)",
        done.len(),
        total,
        total - done.len()
    ));
    o.push_line(format!(
        "Run in progress: {}",
        if live { "yes" } else { "no" }
    ));
    if let Some(j) = state.jobs.as_ref().filter(|j| live && j.now < j.asked) {
        o.push_line(report::render_jobs(j).to_string());
    }
    if !running.is_empty() {
        o.push_line(format!("Running: {}", running.join(", ")));
    }
    if let Some(eta) = eta {
        o.push_line(format!(
            "ETA: ~{} (forecast from this project's past attempts)",
            crate::forecast::human_secs(eta)
        ));
    }
    if state.paused {
        o.push_line(
            "Paused by `ralph pause`: no new attempt starts until `ralph resume`".to_string(),
        );
    }
    if !state.held.is_empty() {
        let held: Vec<&str> = state.held.iter().map(String::as_str).collect();
        o.push_line(format!(
            "Held: {} (`ralph release ID` lets one start)",
            held.join(", ")
        ));
    }
    for (id, text) in &state.user_notes {
        // One line each, fitted to 80 columns: `ralph status --json` has it all.
        let line = format!("Note for {id}: {}", text.replace('\n', " "));
        o.push_line(line);
    }
    for id in failed {
        let r = state.record(id).cloned().unwrap_or_default();
        o.push_line(format!(
            "Failed: {id} after {} attempts: {}",
            r.attempts,
            r.last_error.unwrap_or_default()
        ));
    }
    if !blocked.is_empty() {
        o.push_line(format!("Blocked: {}", blocked.join(", ")));
    }
    for s in &project.backlog.stories {
        let Some(g) = state.record(&s.id).and_then(|r| r.gate.as_ref()) else {
            continue;
        };
        if g.decision == crate::state::GateDecision::Fixup {
            continue;
        }
        o.push_line(format!(
            "Gates: {} {} ({} finding(s)){}",
            s.id,
            g.decision.name(),
            g.findings.len(),
            g.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ));
        for f in &g.findings {
            o.push_line(format!("  {}", f.line_text()));
        }
    }
    o.push_line(format!(
        "Tokens: {} in, {} out, {} cache write, {} cache read · Cost: ${:.2}",
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_creation_input_tokens,
        usage.cache_read_input_tokens,
        cost
    ));
    if let Some(line) = report::render_waste(&state.waste()) {
        o.push_line(line);
    }
    for (agent, until) in paused {
        o.push_line(format!(
            "Paused: the {agent} agent's usage limit resets in {} (at {})",
            crate::timefmt::human_duration((until - now) as f64),
            crate::timefmt::iso(*until)
        ));
    }
    if let Some(max) = project.config.budget.total_usd {
        o.push_line(format!(
            "Budget: ${cost:.2} of ${max:.2} spent (budget.max_cost_usd_total)"
        ));
    }
    if let Some(tracker) = crate::backlog::tracker::open(&project.root, &project.config) {
        let pending = tracker.pending();
        if !pending.is_empty() {
            o.push_line(format!(
                "Tracker: {} writes to {} pending (made by the next run): {}",
                pending.len(),
                tracker.describe(),
                // ` · ` is where a line too long for 80 columns breaks.
                pending.join(" · ")
            ));
        }
        // Handed to the tracker's thread by a run that ended (or was
        // killed) before the thread queued them.
        let journaled = crate::run::tracker_journal::read(&project.root).unwrap_or_else(|e| {
            o.push_line(format!("Tracker: {e}"));
            Vec::new()
        });
        if !journaled.is_empty() {
            let told: Vec<String> = journaled
                .iter()
                .map(|(id, u)| crate::run::tracker_journal::describe(id, u))
                .collect();
            o.push_line(format!(
                "Tracker: {} status change{} for {} not yet queued (queued by the next run): {}",
                told.len(),
                if told.len() == 1 { "" } else { "s" },
                tracker.describe(),
                told.join(" · ")
            ));
        }
    }
    match next {
        Some(n) => o.push_line(format!("Next: Story {n}")),
        None if total == 0 => {}
        None if done.len() == total => o.push_line("[OK] All stories complete!".to_string()),
        None => {}
    }
    stats::fit_lines(&o.0, stats::LINE_COLS)
}

/// Text built line by line.
struct Lines(String);

impl Lines {
    fn push_line(&mut self, line: String) {
        self.0.push_str(&line);
        self.0.push('\n');
    }
}

/// The latest run's attempts that have not ended, by story: when each
/// began and the model ralph chose for it (their `attempt_start`).
type Attempts = std::collections::HashMap<String, (f64, Option<String>)>;

fn running_attempts(root: &Path) -> Attempts {
    let latest = crate::runlog::list_runs(root)
        .last()
        .and_then(|id| crate::runlog::read_run(root, id));
    let mut started = Attempts::default();
    for r in latest.iter().flat_map(|r| &r.records) {
        match &r.ev {
            crate::runlog::Ev::AttemptStart { story, model, .. } => {
                started.insert(story.clone(), (r.t, model.clone()));
            }
            crate::runlog::Ev::AttemptEnd { story, .. } => {
                started.remove(story);
            }
            _ => {}
        }
    }
    started
}

/// The running stories as `Running:` names them: each with the model its
/// attempt runs on, when ralph chose one (issue 25), and the cluster node
/// it was placed on, once known (issue 23).
fn running_shown(running: &[String], attempts: &Attempts, state: &State) -> Vec<String> {
    running
        .iter()
        .map(|id| {
            let model = attempts.get(id).and_then(|(_, m)| m.as_deref());
            let node = state.record(id).and_then(|r| r.running_on.as_deref());
            match (model, node) {
                (Some(m), Some(n)) => format!("{id} ({m} on {n})"),
                (Some(m), None) => format!("{id} ({m})"),
                (None, Some(n)) => format!("{id} (on {n})"),
                (None, None) => id.clone(),
            }
        })
        .collect()
}

/// The ETA of the run in progress, from the project's history: the
/// running stories' time so far is read from the latest run's records
/// (`attempts`), the job count from the state the run keeps.
fn eta_now(
    root: &Path,
    project: &Project,
    sched: &crate::schedule::Scheduler,
    state: &State,
    attempts: &Attempts,
) -> Option<f64> {
    use crate::forecast::{History, Left};
    let stories = &project.backlog.stories;
    let history = History::load(root, stories);
    let bytes: Vec<usize> = stories.iter().map(|s| s.spec_bytes).collect();
    let expected = history.expected_secs(&bytes, Some(project.config.agent.name.name()))?;
    let now = crate::timefmt::now_secs() as f64;
    let left: Vec<Left> = (0..stories.len())
        .map(|i| match sched.nodes[i] {
            StoryState::Pending => Left::Waiting,
            StoryState::Running => Left::Running {
                elapsed: attempts
                    .get(&stories[i].id)
                    .map_or(0.0, |(t, _)| (now - t).max(0.0)),
            },
            StoryState::Landing => Left::Running {
                elapsed: expected[i],
            },
            _ => Left::Nothing,
        })
        .collect();
    let waits: Vec<Vec<usize>> = (0..stories.len())
        .map(|i| sched.waits_of(i).to_vec())
        .collect();
    let jobs = state.jobs.as_ref().map_or(1, |j| j.now);
    Some(crate::forecast::eta_secs(&expected, &waits, &left, jobs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_names_the_model_ralph_chose() {
        let attempts: Attempts = [
            ("1.1".to_string(), (0.0, Some("haiku".to_string()))),
            ("1.2".to_string(), (0.0, None)),
        ]
        .into_iter()
        .collect();
        let running = ["1.1", "1.2", "1.3"].map(String::from);
        let mut state = State::default();
        for id in ["1.1", "1.2"] {
            state.stories.entry(id.into()).or_default().running_on = Some("w2/0".into());
        }
        assert_eq!(
            running_shown(&running, &attempts, &State::default()),
            ["1.1 (haiku)", "1.2", "1.3"]
        );
        assert_eq!(
            running_shown(&running, &attempts, &state),
            ["1.1 (haiku on w2/0)", "1.2 (on w2/0)", "1.3"]
        );
    }
}
