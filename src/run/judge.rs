//! Best of N's judge agent (issue 36, `attempts.pick: judge` with
//! `attempts.judge.agent`): shown the story and each passing candidate's
//! validation and diff (`judge::prompt`), it answers `<ralph>PICK
//! k</ralph>`. It runs sealed as an agent, with `RALPH_JUDGE=1`, in a
//! scratch directory of its own (it changes nothing; its answer is its
//! text). Whatever goes wrong is an answer without a pick: the ranking
//! decides then.

use std::sync::Arc;

use tokio::sync::watch;

use crate::backlog::Story;
use crate::judge::{self, Shown};
use crate::process::{self, Control};
use crate::project;

use super::context::{blocking, env_pairs, RunContext};
use super::events::{JudgeAsk, JudgeReport};

/// The most of the judge's own words kept in the run records.
const REASON_CHARS: usize = 2_000;

pub(crate) async fn run_judge(
    ctx: &Arc<RunContext>,
    story: &Story,
    ask: &JudgeAsk,
    control: watch::Receiver<Control>,
) -> JudgeReport {
    let mut report = JudgeReport {
        idx: ask.idx,
        attempt: ask.attempt,
        pick: None,
        reason: String::new(),
        usage: Default::default(),
        cost_usd: 0.0,
        cost_unknown: false,
    };
    match judged(ctx, story, ask, control, &mut report).await {
        Ok(()) => {}
        Err(why) => report.reason = why,
    }
    report
}

async fn judged(
    ctx: &Arc<RunContext>,
    story: &Story,
    ask: &JudgeAsk,
    control: watch::Receiver<Control>,
    report: &mut JudgeReport,
) -> Result<(), String> {
    let text = prompt_for(ctx, story, ask).await;
    let backend = ask.agent;
    let (program, mut args) = crate::agent::invocation(&ctx.config.agent, backend);
    if let Some(m) = &ask.model {
        args = crate::agent::with_model(backend, &args, m)
            .ok_or_else(|| format!("the {} judge has no place for a model", backend.name()))?;
    }
    let log = crate::paths::judge_log(&ctx.root, &story.id, ask.attempt);
    let _ = std::fs::remove_file(&log);
    let stamp = crate::timefmt::now_secs();
    let cwd = std::env::temp_dir().join(format!(
        "ralph-judge-{}-{}-{}-{stamp}",
        std::process::id(),
        story.id,
        ask.attempt
    ));
    std::fs::create_dir_all(&cwd).map_err(|e| format!("no scratch directory for it: {e}"))?;
    let (c2, p2) = (cwd.clone(), program.clone());
    let seal = blocking(ctx, move |c| {
        c.seal.for_text_agent(&c.git, backend, &p2, &c2)
    })
    .await
    .map_err(|e| format!("the judge could not be sealed: {e}"))?;
    let judge_id = format!("{}.judge", story.id);
    let spec = process::AttemptSpec {
        program,
        args,
        cwd: cwd.clone(),
        env: env_pairs(&[
            ("RALPH_STORY", &story.id),
            ("RALPH_JUDGE", "1"),
            ("RALPH_ATTEMPT", &ask.attempt.to_string()),
            ("RALPH_PROJECT_DIR", &ctx.root.display().to_string()),
        ]),
        // A judge is an agent like any: no tracker token either.
        env_remove: crate::sandbox::agent_env_remove(backend.env_remove()),
        stdin: text.into_bytes(),
        log_path: log,
        timeout: ctx.timeout,
        idle: None,
        grace: std::time::Duration::from_secs(ctx.config.loop_.grace_secs),
        token: project::attempt_token(&ctx.tag, &judge_id, ask.attempt),
        seal,
        redact: ctx.seal.secrets.clone(),
    };
    let mut parser =
        crate::agent::parser::OutputParser::for_backend(backend).keeping_text(REASON_CHARS * 4);
    let ran = process::run_attempt(
        spec,
        |line| {
            parser.feed_line(line);
            false
        },
        control,
    )
    .await;
    let _ = std::fs::remove_dir_all(&cwd);
    let summary = parser.finish();
    report.usage = summary.usage;
    report.cost_usd = summary.cost_usd.unwrap_or(0.0);
    // Its CLI said nothing of its cost: unknown, never a made-up $0.
    report.cost_unknown = summary.cost_usd.is_none();
    report.pick = summary.signals.pick;
    let words: String = summary.text.chars().take(REASON_CHARS).collect();
    report.reason = match ran {
        Err(e) => format!("the judge could not start: {e}"),
        Ok(x) if x.stopped.is_some() && report.pick.is_none() => {
            "the judge was stopped before it answered".to_string()
        }
        Ok(_) => words.trim().to_string(),
    };
    Ok(())
}

/// The story's spec and each passing candidate's validation and diff.
async fn prompt_for(ctx: &Arc<RunContext>, story: &Story, ask: &JudgeAsk) -> String {
    // The text every attempt's prompt gets; a title line when it is empty
    // or unreadable.
    let spec = crate::backlog::spec_text(&ctx.root, story)
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("# Story {}: {}\n", story.id, story.title));
    let per = judge::DIFF_BYTES / ask.passing.len().max(1);
    let mut diffs = Vec::new();
    for (k, _, _) in &ask.passing {
        let branch = project::story_branch(&project::candidate_key(&story.id, *k));
        let diff = blocking(ctx, move |c| c.git.branch_patch(&branch, &c.target, per))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        diffs.push(diff);
    }
    let names: Vec<&str> = ctx
        .required_validation
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    let validations: Vec<String> = ask
        .passing
        .iter()
        .map(|(_, _, findings)| {
            format!(
                "passed {} on the target's tip; {findings} gate finding(s) let be",
                if names.is_empty() {
                    "(no required validation)".to_string()
                } else {
                    names.join(", ")
                }
            )
        })
        .collect();
    let shown: Vec<Shown<'_>> = ask
        .passing
        .iter()
        .zip(&diffs)
        .zip(&validations)
        .map(|(((k, who, _), diff), validation)| Shown {
            k: *k,
            who,
            validation,
            diff,
        })
        .collect();
    judge::prompt(&story.id, &story.title, &spec, &shown)
}
