//! The review gate's reviewer (issue 26): an agent shown the spec, the
//! diff against the target and the validation output, asked for a verdict
//! on a merged tree before it lands.

use std::sync::Arc;

use tokio::sync::watch;

use crate::gitops::Oid;
use crate::process::{self, Control};
use crate::{project, prompt};

use super::context::{blocking, env_pairs, RunContext};
use super::events::LandResult;
use super::land::{merged_tree, output_since, LandRequest};

/// Most of a diff a reviewer is shown.
const REVIEW_DIFF_BYTES: usize = 60_000;

/// The review gate's reviewer on the merged tree: the spec, the diff
/// against the target and the validation output in, a verdict out. It runs
/// in the merge queue's scratch worktree (what it writes there is thrown
/// away; the landing lands `commit`, never that worktree), sealed as an
/// agent when the run seals. `Err` is a landing that cannot go on.
pub(super) async fn run_reviewer(
    ctx: &Arc<RunContext>,
    req: &LandRequest,
    gate: &crate::config::ReviewGate,
    commit: &Oid,
    base: &Oid,
    control: watch::Receiver<Control>,
) -> Result<super::events::ReviewReport, LandResult> {
    use super::events::{ReviewReport, ReviewVerdict};
    let path = merged_tree(ctx, commit, base, 0).await?;
    let (c1, b1) = (commit.clone(), base.clone());
    let diff = blocking(ctx, move |c| c.git.patch_text(&b1, &c1, REVIEW_DIFF_BYTES))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let spec = req
        .spec_rel
        .as_ref()
        .and_then(|rel| std::fs::read_to_string(path.join(rel)).ok())
        .unwrap_or_else(|| format!("# Story {}: {}\n", req.id, req.title));
    let validation = output_since(
        &crate::paths::validation_log_path(&ctx.root, &req.id, req.attempt),
        0,
    )
    .map(|o| prompt::output_tail(&o))
    .unwrap_or_default();
    let text = prompt::review_prompt(&prompt::ReviewInput {
        id: &req.id,
        title: &req.title,
        target: &ctx.target,
        spec: &spec,
        diff: &diff,
        validation: &validation,
    });
    let backend = gate.agent;
    let (program, mut args) = crate::agent::invocation(&ctx.config.agent, backend);
    if let Some(m) = &gate.model {
        args.push("--model".to_string());
        args.push(m.clone());
    }
    let log = crate::paths::review_log(&ctx.root, &req.id, req.attempt);
    let log_rel = log
        .strip_prefix(&ctx.root)
        .unwrap_or(&log)
        .display()
        .to_string();
    let _ = std::fs::remove_file(&log);
    let (p2, prog2) = (path.clone(), program.clone());
    let seal = blocking(ctx, move |c| {
        c.seal.for_agent(
            &c.git,
            backend,
            &prog2,
            crate::paths::VALIDATE_WORKTREE,
            &p2,
            project::VALIDATE_BRANCH,
        )
    })
    .await
    .and_then(|r| r)
    .map_err(|e| {
        LandResult::Error(format!(
            "could not seal the reviewer of story {}: {e}",
            req.id
        ))
    })?;
    let review_id = format!("{}.review", req.id);
    let spec = process::AttemptSpec {
        program,
        args,
        cwd: path.clone(),
        env: env_pairs(&[
            ("RALPH_STORY", &req.id),
            ("RALPH_REVIEW", "1"),
            ("RALPH_WORKTREE", &path.display().to_string()),
            ("RALPH_PROJECT_DIR", &ctx.root.display().to_string()),
        ]),
        // The reviewer is an agent like any: no tracker token either.
        env_remove: crate::sandbox::agent_env_remove(backend.env_remove()),
        stdin: text.into_bytes(),
        log_path: log.clone(),
        timeout: ctx.timeout,
        idle: None,
        grace: std::time::Duration::from_secs(ctx.config.loop_.grace_secs),
        token: project::attempt_token(&ctx.tag, &review_id, req.attempt),
        seal,
        redact: ctx.seal.secrets.clone(),
    };
    let mut parser = crate::agent::parser::OutputParser::for_backend(backend);
    let ran = process::run_attempt(
        spec,
        |line| {
            parser.feed_line(line);
            false
        },
        control.clone(),
    )
    .await;
    let _ = blocking(ctx, |c| {
        c.git.sandbox_refs_collect(crate::paths::VALIDATE_WORKTREE)
    })
    .await;
    if *control.borrow() != Control::Run {
        return Err(LandResult::Interrupted);
    }
    let summary = parser.finish();
    let verdict = match (&ran, &summary.signals.review) {
        (_, Some(crate::agent::parser::ReviewTag::Approve(id))) if *id == req.id => {
            ReviewVerdict::Approve
        }
        (_, Some(crate::agent::parser::ReviewTag::Changes(id, text))) if *id == req.id => {
            ReviewVerdict::Changes(text.clone())
        }
        (Err(e), _) => ReviewVerdict::NoAnswer(format!("the reviewer could not start: {e}")),
        (Ok(x), _) if x.stopped.is_some() => {
            ReviewVerdict::NoAnswer("the reviewer was stopped before it answered".to_string())
        }
        _ => ReviewVerdict::NoAnswer(format!(
            "the reviewer gave no APPROVE or CHANGES for story {} (its log: {log_rel})",
            req.id
        )),
    };
    Ok(ReviewReport {
        verdict,
        usage: summary.usage,
        cost_usd: summary.cost_usd.unwrap_or(0.0),
        log_rel,
    })
}
