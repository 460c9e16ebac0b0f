//! A validation candidate (issue 34), for a lone landing (`land.rs`) and a
//! chain's merges (`queue.rs`) alike: its run (`validate_tree`: the
//! required commands in a worktree here, or, with `validation.where:
//! executor`, as a job on the run's executor through its
//! `executor::Validator`) and its records (`validate_start` and
//! `validate_end` name the tree the target may move to, the stories it
//! holds, the verdict and where it ran).

use std::sync::Arc;

use tokio::sync::watch;

use crate::executor::validate::output_since;
use crate::executor::{Validated, ValidationJob};
use crate::gitops::{GitError, Oid};
use crate::process::{self, Control};
use crate::project;
use crate::prompt;

use super::context::{blocking, env_pairs, RunContext, WORKTREE_PREP};
use super::events::LandResult;

/// Where a validation on the coordinator ran, as its records say.
pub(super) const HERE: &str = "coordinator";

/// Records that the candidate `commit` (holding `stories`) starts to
/// validate in slot `slot`; returns its tree for the end's record.
pub(super) async fn validate_start(
    ctx: &Arc<RunContext>,
    commit: &Oid,
    stories: Vec<String>,
    slot: usize,
) -> String {
    let c = commit.clone();
    let tree = blocking(ctx, move |g| g.git.tree_of(&c))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let remote = ctx.validator.get().is_some();
    ctx.record(crate::runlog::Ev::ValidateStart {
        tree: tree.clone(),
        stories,
        slot: project::validation_slot(slot).0,
        node: (!remote).then(|| HERE.to_string()),
    });
    tree
}

/// How a candidate's validation ended, for its end's record.
pub(super) struct Run {
    pub(super) failed: Option<LandResult>,
    pub(super) tree: String,
    pub(super) started: std::time::Instant,
    pub(super) node: String,
}

/// The whole validation of the merge `commit` (on `base`, holding
/// `stories`) in slot `slot`, named after `story`'s attempt: its start's
/// record, the run, and its `validated` record; the end's record is the
/// caller's (its verdict may be a chain's: passed, failed, thrown).
pub(super) async fn validate_candidate(
    ctx: &Arc<RunContext>,
    (story, attempt): (&str, u32),
    (commit, base): (&Oid, &Oid),
    stories: Vec<String>,
    control: watch::Receiver<Control>,
    slot: usize,
) -> Run {
    let started = std::time::Instant::now();
    let tree = validate_start(ctx, commit, stories, slot).await;
    let (failed, node) = validate_tree(ctx, story, attempt, commit, base, control, slot).await;
    ctx.record(crate::runlog::Ev::Validated {
        story: story.to_string(),
        attempt,
        secs: started.elapsed().as_secs_f64(),
        ok: failed.is_none(),
    });
    Run {
        failed,
        tree,
        started,
        node,
    }
}

/// Records the end of a candidate's validation, `verdict` as
/// `Ev::ValidateEnd` says, on `node` (`HERE`, or the executor's node).
pub(super) fn validate_end(
    ctx: &RunContext,
    tree: String,
    stories: Vec<String>,
    verdict: &str,
    started: std::time::Instant,
    node: String,
) {
    ctx.record(crate::runlog::Ev::ValidateEnd {
        tree,
        stories,
        verdict: verdict.to_string(),
        secs: started.elapsed().as_secs_f64(),
        node: (!node.is_empty()).then_some(node),
    });
}

/// Taken for the whole run of an `exclusive: true` validation command: the
/// merge queue's side-by-side validations take turns for such commands
/// (one lock for them all: a port or a database is the machine's).
static EXCLUSIVE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The turn of command `v`: held while it runs when it is exclusive.
pub(super) async fn turn(
    v: &crate::config::ValidationCommand,
) -> Option<tokio::sync::MutexGuard<'static, ()>> {
    if v.exclusive {
        Some(EXCLUSIVE.lock().await)
    } else {
        None
    }
}

/// Runs the required validation commands on the merged tree, in the
/// worktree of validation slot `slot`; `Some` is the failure, no one's yet
/// (`blamed` charges it: a batch's failure is not yet any one story's).
/// `story` and `attempt` name the log; `story` is `RALPH_STORY`. With a validator (`validation.where:
/// executor`) it runs as the executor's job instead. Where it ran comes
/// with the verdict.
pub(super) async fn validate_tree(
    ctx: &Arc<RunContext>,
    story: &str,
    attempt: u32,
    commit: &Oid,
    base: &Oid,
    control: watch::Receiver<Control>,
    slot: usize,
) -> (Option<LandResult>, String) {
    if ctx.validator.get().is_some() {
        return on_executor(ctx, story, attempt, commit, slot, control).await;
    }
    (
        here(ctx, story, attempt, commit, base, control, slot).await,
        HERE.to_string(),
    )
}

/// The validation as a job of the run's executor: the verdict read as a
/// local one's, its output at the usual log path.
async fn on_executor(
    ctx: &Arc<RunContext>,
    story: &str,
    attempt: u32,
    commit: &Oid,
    slot: usize,
    control: watch::Receiver<Control>,
) -> (Option<LandResult>, String) {
    let Some(validator) = ctx.validator.get() else {
        return (
            Some(LandResult::Error("no validator".into())),
            String::new(),
        );
    };
    let log = crate::paths::validation_log_path(&ctx.root, story, attempt);
    // As here: a round that lost the race to a moving target validates
    // again, and the log holds the last round's output.
    let _ = std::fs::remove_file(&log);
    let target = ctx.target.clone();
    let trusted = match blocking(ctx, move |c| c.git.branch_tip(&target)).await {
        Ok(Ok(Some(tip))) => tip,
        _ => {
            return (
                Some(LandResult::Error(format!(
                    "cannot read the tip of {} for the validation's settings",
                    ctx.target
                ))),
                String::new(),
            )
        }
    };
    let job = ValidationJob {
        story: story.to_string(),
        attempt,
        commit: commit.clone(),
        trusted,
        k: slot,
        log: log.clone(),
    };
    let end = validator.validate(job, control).await;
    let log_rel = log.strip_prefix(&ctx.root).unwrap_or(&log);
    let failed = match end.verdict {
        Validated::Passed => None,
        Validated::Failed { name, cmd, tail } => Some(LandResult::ValidationFailed {
            name,
            cmd,
            tail,
            saved_ref: None,
            log_rel: log_rel.display().to_string(),
        }),
        Validated::Interrupted => Some(LandResult::Interrupted),
        Validated::Error { reason } => Some(LandResult::Error(reason)),
    };
    (failed, end.node)
}

/// The validation in the coordinator's worktree of slot `slot`.
async fn here(
    ctx: &Arc<RunContext>,
    story: &str,
    attempt: u32,
    commit: &Oid,
    base: &Oid,
    control: watch::Receiver<Control>,
    slot: usize,
) -> Option<LandResult> {
    let wt = project::validation_slot(slot).0;
    let path = match merged_tree(ctx, commit, base, slot).await {
        Ok(p) => p,
        Err(e) => return Some(e),
    };
    let log = crate::paths::validation_log_path(&ctx.root, story, attempt);
    // A round that lost the race to a moving target validates again: the
    // log holds the last round's output.
    let _ = std::fs::remove_file(&log);
    for v in &ctx.required_validation {
        // Where this command's output begins in the log: a fix-up is shown
        // the failing command's own output.
        let from = std::fs::metadata(&log).map_or(0, |m| m.len());
        let env = env_pairs(&[
            ("RALPH_STORY", story),
            ("RALPH_PROJECT_DIR", &ctx.root.display().to_string()),
        ]);
        let _turn = turn(v).await;
        // It runs code the agents wrote: sealed like them (issue 22).
        let seal = ctx.seal.for_validation(&ctx.git, &path, &wt);
        let run = process::run_shell_sealed(
            &v.cmd,
            path.clone(),
            env,
            ctx.timeout,
            control.clone(),
            Some(&log),
            seal,
            ctx.seal.secrets.clone(),
            ctx.seal.unsealed_env_remove(),
        );
        match run.await {
            Ok(r) if r.success => {}
            Ok(r) if r.interrupted => return Some(LandResult::Interrupted),
            Ok(r) => {
                let log_rel = log.strip_prefix(&ctx.root).unwrap_or(&log);
                let tail = match output_since(&log, from) {
                    Some(out) => prompt::output_tail(&out),
                    None => r.tail,
                };
                return Some(LandResult::ValidationFailed {
                    name: v.name.clone(),
                    cmd: v.cmd.clone(),
                    tail,
                    saved_ref: None,
                    log_rel: log_rel.display().to_string(),
                });
            }
            Err(e) => {
                return Some(LandResult::Error(format!(
                    "validation '{}' could not start: {e}",
                    v.name
                )))
            }
        }
    }
    None
}

/// The merge queue's worktree, checked out (detached) at the merged tree
/// `commit`: where validation and the reviewer run.
pub(super) async fn merged_tree(
    ctx: &Arc<RunContext>,
    commit: &Oid,
    base: &Oid,
    slot: usize,
) -> Result<std::path::PathBuf, LandResult> {
    let (name, branch) = project::validation_slot(slot);
    let path = crate::paths::worktrees_dir(&ctx.root).join(&name);
    let (p, commit, base) = (path.clone(), commit.clone(), base.clone());
    let prep = blocking(ctx, move |c| -> Result<(), GitError> {
        let _guard = WORKTREE_PREP.lock().unwrap_or_else(|e| e.into_inner());
        c.git.prepare_worktree(&name, &p, &branch, &base)?;
        c.git.checkout_detached(&p, &commit)
    })
    .await;
    match prep {
        Ok(Ok(())) => Ok(path),
        Ok(Err(e)) => Err(LandResult::Error(format!(
            "preparing the validation worktree: {e}"
        ))),
        Err(e) => Err(LandResult::Error(e)),
    }
}
