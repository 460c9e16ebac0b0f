//! Notification hooks: `hooks.on_complete` (a run ended), `on_failure` (a
//! story failed for good, or the circuit breaker tripped) and `on_pause`
//! (a usage limit, the budget), with the run's figures in the environment
//! and its HTML report written first so `RALPH_REPORT` names a real file.
//! A hook's failure is logged and changes nothing.

use std::path::Path;
use std::sync::Arc;

use crate::runlog::PauseWhy;

use super::context::{run_hook, RunContext, HOOK_TIMEOUT};
use super::record::{Figures, Notice};

/// The figures every notification carries.
pub(crate) fn base_env(
    event: &str,
    f: &Figures,
    run_id: &str,
    root: &Path,
) -> Vec<(String, String)> {
    let report = crate::report_html::default_path(root);
    let records = crate::runlog::run_path(root, run_id);
    let pairs: Vec<(&str, String)> = vec![
        ("RALPH_EVENT", event.to_string()),
        ("RALPH_RUN_ID", run_id.to_string()),
        ("RALPH_DONE", f.done.to_string()),
        ("RALPH_TOTAL", f.total.to_string()),
        ("RALPH_FAILED", f.failed.len().to_string()),
        ("RALPH_FAILED_IDS", f.failed.join(",")),
        ("RALPH_BLOCKED", f.blocked.len().to_string()),
        ("RALPH_COST", format!("{:.2}", f.run_cost_usd)),
        ("RALPH_COST_TOTAL", format!("{:.2}", f.lifetime_cost_usd)),
        ("RALPH_TOKENS", f.run_tokens.to_string()),
        ("RALPH_REPORT", report.display().to_string()),
        ("RALPH_RECORDS", records.display().to_string()),
        ("RALPH_PROJECT_DIR", root.display().to_string()),
    ];
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// `8/10 done, 1 failed, 1 blocked, $3.20`
fn figures_line(f: &Figures) -> String {
    format!(
        "{}/{} done, {} failed, {} blocked, ${:.2}",
        f.done,
        f.total,
        f.failed.len(),
        f.blocked.len(),
        f.run_cost_usd
    )
}

/// The hook name, its command and its environment for `notice`.
pub(crate) fn for_notice<'a>(
    ctx: &'a RunContext,
    notice: &Notice,
    f: &Figures,
    run_id: &str,
) -> (&'static str, &'a str, Vec<(String, String)>) {
    let project = project_name(&ctx.root);
    match notice {
        Notice::Failure { story, reason } => {
            let mut env = base_env("failure", f, run_id, &ctx.root);
            let what = match story {
                Some(id) => format!("story {id} failed for good"),
                None => "the circuit breaker stopped the run".to_string(),
            };
            let reason1 = reason.lines().next().unwrap_or("").to_string();
            env.push(("RALPH_STORY".into(), story.clone().unwrap_or_default()));
            env.push(("RALPH_REASON".into(), reason1.clone()));
            env.push((
                "RALPH_SUMMARY".into(),
                format!(
                    "ralph {project}: {what}: {} · {}",
                    clip(&reason1, 200),
                    figures_line(f)
                ),
            ));
            ("on_failure", &ctx.config.hooks.on_failure, env)
        }
        Notice::Pause { why, agent, until } => {
            let mut env = base_env("pause", f, run_id, &ctx.root);
            env.push(("RALPH_REASON".into(), why.name().to_string()));
            env.push(("RALPH_AGENT".into(), agent.clone().unwrap_or_default()));
            let at = until.map(crate::timefmt::iso).unwrap_or_default();
            env.push(("RALPH_RESUME_AT".into(), at.clone()));
            let what = match why {
                PauseWhy::UsageLimit => format!(
                    "the {} agent hit its usage limit; new work waits until {at}",
                    agent.as_deref().unwrap_or("?")
                ),
                PauseWhy::Budget => {
                    "the budget is spent; nothing new starts, running work lands".to_string()
                }
                PauseWhy::Fault => "a fault outside the stories pauses new work".to_string(),
            };
            env.push((
                "RALPH_SUMMARY".into(),
                format!("ralph {project}: {what} · {}", figures_line(f)),
            ));
            ("on_pause", &ctx.config.hooks.on_pause, env)
        }
    }
}

/// The environment of `on_complete`.
pub(crate) fn complete_env(
    root: &Path,
    f: &Figures,
    run_id: &str,
    exit_code: i32,
    elapsed_secs: f64,
) -> Vec<(String, String)> {
    let mut env = base_env("complete", f, run_id, root);
    env.push(("RALPH_EXIT_CODE".into(), exit_code.to_string()));
    env.push(("RALPH_ELAPSED".into(), format!("{elapsed_secs:.0}")));
    let how = match exit_code {
        0 if f.done == f.total => "all stories done".to_string(),
        0 => "run ended".to_string(),
        1 => "a person is needed".to_string(),
        130 => "interrupted".to_string(),
        c => format!("ralph failed (exit {c})"),
    };
    env.push((
        "RALPH_SUMMARY".into(),
        format!(
            "ralph {}: {how}: {} in {}",
            project_name(root),
            figures_line(f),
            crate::timefmt::human_duration(elapsed_secs)
        ),
    ));
    env
}

fn project_name(root: &Path) -> String {
    root.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn clip(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Writes the run's report then runs hook `name` (`cmd`) with `env`.
pub(crate) async fn notify(
    ctx: Arc<RunContext>,
    name: &'static str,
    cmd: String,
    env: Vec<(String, String)>,
    run_id: String,
) {
    let c2 = ctx.clone();
    let written = tokio::task::spawn_blocking(move || {
        let out = crate::report_html::default_path(&c2.root);
        let run = Some(run_id.as_str()).filter(|id| !id.is_empty());
        crate::report_html::write(&c2.root, run, &out)
    })
    .await;
    match written {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => ctx
            .log
            .line(&format!("{name}: cannot write the report: {e:#}")),
        Err(e) => ctx
            .log
            .line(&format!("{name}: cannot write the report: {e}")),
    }
    let _ = run_hook(&ctx, name, &cmd, ctx.root.clone(), env, HOOK_TIMEOUT).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_carries_the_figures() {
        let f = Figures {
            done: 3,
            total: 5,
            failed: vec!["1.2".into()],
            blocked: vec!["1.3".into(), "1.4".into()],
            run_cost_usd: 1.234,
            run_tokens: 4200,
            lifetime_cost_usd: 9.5,
        };
        let env = complete_env(Path::new("/p/demo"), &f, "20261122-115121", 1, 75.0);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("RALPH_DONE"), Some("3"));
        assert_eq!(get("RALPH_FAILED"), Some("1"));
        assert_eq!(get("RALPH_FAILED_IDS"), Some("1.2"));
        assert_eq!(get("RALPH_COST"), Some("1.23"));
        assert_eq!(get("RALPH_COST_TOTAL"), Some("9.50"));
        assert_eq!(get("RALPH_EXIT_CODE"), Some("1"));
        assert_eq!(get("RALPH_REPORT"), Some("/p/demo/.ralph/report.html"));
        assert_eq!(
            get("RALPH_RECORDS"),
            Some("/p/demo/.ralph/runs/20261122-115121.jsonl")
        );
        assert_eq!(
            get("RALPH_SUMMARY"),
            Some("ralph demo: a person is needed: 3/5 done, 1 failed, 2 blocked, $1.23 in 1m15s")
        );
    }
}
