//! `ralph status [--json]`: progress, running, failed, blocked, cost.

use std::path::Path;

use super::{load, warn_if_empty};
use crate::error::{RalphError, EXIT_OK};
use crate::project::Project;
use crate::report;
use crate::run;
use crate::schedule::Node;
use crate::state::State;
use crate::stats;
use crate::store::{self, RunLock};

pub(super) fn cmd_status(root: &Path, json: bool) -> anyhow::Result<i32> {
    let (project, mut state) = load(root)?;
    if let Some(checked) = merged_prs(root, &project, &state)? {
        state = checked;
    }
    let sched = crate::status::view(&project, &state);
    let live = RunLock::is_held(root);
    let ids = |n: Node| -> Vec<String> {
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
    let done = ids(Node::Done);
    let mut running = ids(Node::Running);
    running.extend(ids(Node::Landing));
    if !live {
        // Without a live run these are leftovers of a crash; the next run resumes them.
        running.clear();
    }
    let failed = ids(Node::Failed);
    let blocked = ids(Node::Blocked);
    let next = sched.next().map(|i| project.backlog.stories[i].id.clone());
    let now = crate::timefmt::now_secs();
    let paused: Vec<(String, i64)> = state
        .paused_until
        .iter()
        .filter(|(_, t)| **t > now)
        .map(|(a, t)| (a.clone(), *t))
        .collect();
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
            })),
            "stories": crate::status::story_rows(&project, &state, None),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(EXIT_OK);
    }
    println!(
        "Progress: {} / {} stories ({} remaining)",
        done.len(),
        total,
        total - done.len()
    );
    println!("Run in progress: {}", if live { "yes" } else { "no" });
    if let Some(j) = state.jobs.as_ref().filter(|j| live && j.now < j.asked) {
        println!("{}", report::render_jobs(j));
    }
    if !running.is_empty() {
        println!("Running: {}", running.join(", "));
    }
    for id in &failed {
        let r = state.record(id).cloned().unwrap_or_default();
        println!(
            "Failed: {id} after {} attempts: {}",
            r.attempts,
            r.last_error.unwrap_or_default()
        );
    }
    if !blocked.is_empty() {
        println!("Blocked: {}", blocked.join(", "));
    }
    for s in &project.backlog.stories {
        let Some(g) = state.record(&s.id).and_then(|r| r.gate.as_ref()) else {
            continue;
        };
        if g.decision == crate::state::GateDecision::Fixup {
            continue;
        }
        println!(
            "Gates: {} {} ({} finding(s)){}",
            s.id,
            g.decision.name(),
            g.findings.len(),
            g.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
        for f in &g.findings {
            println!("  {}", f.line_text());
        }
    }
    println!(
        "Tokens: {} in, {} out, {} cache write, {} cache read · Cost: ${:.2}",
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_creation_input_tokens,
        usage.cache_read_input_tokens,
        cost
    );
    if let Some(line) = report::render_waste(&state.waste()) {
        println!("{line}");
    }
    for (agent, until) in &paused {
        println!(
            "Paused: the {agent} agent's usage limit resets in {} (at {})",
            crate::timefmt::human_duration((until - now) as f64),
            crate::timefmt::iso(*until)
        );
    }
    if let Some(max) = project.config.budget.total_usd {
        println!("Budget: ${cost:.2} of ${max:.2} spent (budget.max_cost_usd_total)");
    }
    match next {
        Some(n) => println!("Next: Story {n}"),
        None if total == 0 => {}
        None if done.len() == total => println!("[OK] All stories complete!"),
        None => {}
    }
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
