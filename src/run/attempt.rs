//! One attempt, from worktree to verdict, on this machine: prepare the
//! slot's worktree at the target's tip, run the hooks, render the prompt,
//! run the agent in its own process group, keep whatever it left, and
//! classify the result (SPEC 4.4). Every failure becomes a verdict.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::agent::output::{AgentEvent, OutputParser};
use crate::agent::{self, FaultKind, ResultKind, Verdict};
use crate::backlog::{self, Story};
use crate::config::Config;
use crate::gitops::{GitError, Oid};
use crate::learnings;
use crate::process::{self, AttemptSpec, Control};
use crate::project::{self, KeptRef};
use crate::prompt::{self, PromptInput};

use super::context::{blocking, env_pairs, run_hook, RunContext, HOOK_TIMEOUT, WORKTREE_PREP};
use super::dispatcher::Executor;
use super::events::{AttemptReport, AttemptRequest, Event};

/// Shortest gap between two activity lines sent to the display (it needs
/// the latest, not every line).
const ACTIVITY_GAP: Duration = Duration::from_millis(200);

/// Attempts in slot worktrees of the main repository, agents as children.
pub(crate) struct LocalExecutor {
    pub(crate) ctx: Arc<RunContext>,
    pub(crate) verbose: bool,
}

impl Executor for LocalExecutor {
    fn run(
        &self,
        req: AttemptRequest,
        story: Story,
        control: watch::Receiver<Control>,
        activity: mpsc::UnboundedSender<Event>,
    ) -> impl std::future::Future<Output = AttemptReport> + Send + 'static {
        let (ctx, verbose) = (self.ctx.clone(), self.verbose);
        async move { run_attempt(ctx, req, story, control, activity, verbose).await }
    }

    fn log_rel(&self, id: &str, attempt: u32) -> String {
        rel(
            &self.ctx.root,
            &project::attempt_log_path(&self.ctx.root, id, attempt),
        )
    }
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

/// The prompt of one attempt (SPEC 4.1): the project's template or the
/// built-in one, with the story's spec and its most relevant learnings.
pub(crate) fn build_prompt(
    root: &Path,
    config: &Config,
    story: &Story,
    learnings_pool: &[String],
    retry_context: Option<&str>,
) -> std::io::Result<String> {
    let spec = backlog::spec_text(root, story)?;
    let chosen = learnings::select_relevant(learnings_pool, &spec, config.learnings_max);
    let template = std::fs::read_to_string(root.join(prompt::TEMPLATE_OVERRIDE))
        .unwrap_or_else(|_| prompt::BUILTIN_TEMPLATE.to_string());
    let input = PromptInput {
        id: &story.id,
        title: &story.title,
        spec: &spec,
        learnings: &chosen,
        retry_context,
    };
    Ok(prompt::render(&template, &prompt::vars_for(config, &input)))
}

/// Puts the slot's worktree on the story branch at the target's tip; a
/// previous attempt's unsaved commits on that branch are kept first.
fn prepare(ctx: &RunContext, id: &str, slot: usize) -> Result<Oid, GitError> {
    let _guard = WORKTREE_PREP.lock().unwrap_or_else(|e| e.into_inner());
    let branch = project::story_branch(id);
    let (wt_name, wt_path) = project::slot_worktree(&ctx.root, slot);
    let base = ctx
        .git
        .branch_tip(&ctx.target)?
        .ok_or_else(|| GitError::Other(format!("target branch {} vanished", ctx.target)))?;
    if ctx.git.branch_tip(&branch)?.is_some()
        && ctx.git.commits_ahead(&branch, &base)? > 0
        && !ctx.git.tip_saved_under(&branch, project::KEPT_REFS)?
    {
        let stamp = crate::timefmt::now_secs().max(0) as u32;
        ctx.git
            .save_ref(&branch, &project::kept_ref(KeptRef::Saved, id, stamp))?;
    }
    ctx.git
        .release_branch(&branch, &project::worktrees_dir(&ctx.root))?;
    ctx.git
        .prepare_worktree(&wt_name, &wt_path, &branch, &base)?;
    Ok(base)
}

/// `prepare`, and when the slot is broken (an agent deleted its `.git`, a
/// crash left it half-made) the slot is removed and made again, once.
fn prepare_or_rebuild(ctx: &RunContext, id: &str, slot: usize) -> Result<Oid, GitError> {
    match prepare(ctx, id, slot) {
        Ok(base) => Ok(base),
        Err(first) => {
            let (name, path) = project::slot_worktree(&ctx.root, slot);
            ctx.log.line(&format!(
                "slot {slot} could not be prepared ({first}); rebuilding it"
            ));
            {
                let _guard = WORKTREE_PREP.lock().unwrap_or_else(|e| e.into_inner());
                let _ = ctx.git.remove_worktree(&name, &path);
            }
            prepare(ctx, id, slot)
        }
    }
}

/// The agent may have left the worktree dirty, detached or on another
/// branch: keep everything, and let the story branch hold its commits.
fn keep_what_the_agent_left(ctx: &RunContext, id: &str, n: u32, wt: &Path, base: &Oid) {
    let branch = project::story_branch(id);
    let unc = project::kept_ref(KeptRef::Uncommitted, id, n);
    if let Ok(Some(_)) = ctx.git.save_uncommitted(wt, &unc) {
        ctx.log.line(&format!(
            "story {id} attempt {n}: uncommitted changes kept at {unc}"
        ));
    }
    let head = project::kept_ref(KeptRef::Head, id, n);
    if let Ok(a) = ctx.git.adopt_worktree_head(wt, &branch, base, &head) {
        if a != crate::gitops::Adopted::Unchanged {
            ctx.log.line(&format!(
                "story {id} attempt {n}: agent left its branch: {a:?}"
            ));
        }
    }
}

async fn run_attempt(
    ctx: Arc<RunContext>,
    req: AttemptRequest,
    story: Story,
    control: watch::Receiver<Control>,
    events: mpsc::UnboundedSender<Event>,
    verbose: bool,
) -> AttemptReport {
    let id = story.id.clone();
    let n = req.attempt;
    let branch = project::story_branch(&id);
    let (_, wt_path) = project::slot_worktree(&ctx.root, req.slot);
    let log_path = project::attempt_log_path(&ctx.root, &id, n);
    let fail = |reason: String| Verdict::Failed {
        reason,
        kind: ResultKind::Error,
    };
    let mut report = AttemptReport::empty(&req, Verdict::Interrupted, rel(&ctx.root, &log_path));
    let backend = req.agent;
    report.agent = Some(backend.name());
    let started = Instant::now();

    let (id2, slot) = (id.clone(), req.slot);
    let base = match blocking(&ctx, move |c| prepare_or_rebuild(c, &id2, slot)).await {
        Ok(Ok(b)) => b,
        // The slot could not be made even from scratch: the machine's
        // trouble, not the story's (disk, permissions, a held lock).
        Ok(Err(e)) => {
            report.verdict = Verdict::Fault {
                reason: format!("could not prepare the worktree of slot {slot}: {e}"),
                kind: FaultKind::Transient,
            };
            return report;
        }
        Err(e) => {
            report.verdict = fail(e);
            return report;
        }
    };

    let root_s = ctx.root.display().to_string();
    let wt_s = wt_path.display().to_string();
    let spec_s = story
        .spec_path
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let iter_s = req.iteration.to_string();
    let hooks = &ctx.config.hooks;
    let _ = run_hook(
        &ctx,
        "pre_iteration",
        &hooks.pre_iteration,
        ctx.root.clone(),
        env_pairs(&[("RALPH_ITERATION", &iter_s)]),
        HOOK_TIMEOUT,
    )
    .await;
    // Once pre_iteration has run, post_story and post_iteration run too,
    // whatever ends the attempt early: break out of this block, never return.
    'attempt: {
        if let Some(msg) = run_hook(
            &ctx,
            "pre_worktree",
            &hooks.pre_worktree,
            wt_path.clone(),
            env_pairs(&[
                ("RALPH_STORY", &id),
                ("RALPH_WORKTREE", &wt_s),
                ("RALPH_BRANCH", &branch),
                ("RALPH_PROJECT_DIR", &root_s),
            ]),
            Duration::from_secs(hooks.pre_worktree_timeout),
        )
        .await
        {
            report.verdict = fail(format!("pre_worktree hook failed: {msg}"));
            break 'attempt;
        }
        let _ = run_hook(
            &ctx,
            "pre_story",
            &hooks.pre_story,
            ctx.root.clone(),
            env_pairs(&[("RALPH_STORY", &id), ("RALPH_SPEC", &spec_s)]),
            HOOK_TIMEOUT,
        )
        .await;

        let pool = if ctx.config.learnings_enabled {
            learnings::load(&ctx.root)
        } else {
            Vec::new()
        };
        let text = match build_prompt(
            &ctx.root,
            &ctx.config,
            &story,
            &pool,
            req.retry_context.as_deref(),
        ) {
            Ok(t) => t,
            Err(e) => {
                report.verdict = Verdict::Fault {
                    reason: format!(
                        "cannot read the spec of story {id} ({spec_s}): {e}; restore it, \
                         then run `ralph run` again"
                    ),
                    kind: FaultKind::NeedsPerson,
                };
                break 'attempt;
            }
        };
        let mut agent_env = env_pairs(&[
            ("RALPH_STORY", &id),
            ("RALPH_ATTEMPT", &n.to_string()),
            ("RALPH_WORKTREE", &wt_s),
            ("RALPH_BRANCH", &branch),
            ("RALPH_PROJECT_DIR", &root_s),
        ]);
        agent_env.push(ceiling(&ctx.root));
        let (program, args) = ctx.agents[&backend].clone();
        let spec_run = AttemptSpec {
            program,
            args,
            cwd: wt_path.clone(),
            env: agent_env,
            env_remove: backend.env_remove().iter().map(|s| s.to_string()).collect(),
            stdin: text.into_bytes(),
            log_path: log_path.clone(),
            timeout: ctx.timeout,
            idle: (ctx.config.idle_timeout_secs > 0)
                .then(|| Duration::from_secs(ctx.config.idle_timeout_secs)),
            grace: Duration::from_secs(ctx.config.grace_secs),
            token: project::attempt_token(&ctx.tag, &id, n),
        };
        let now = crate::timefmt::now_secs();
        let mut parser = OutputParser::for_backend(backend)
            .with_clock(now, crate::timefmt::local_offset_secs(now));
        let idx = req.idx;
        let mut last_sent = Instant::now() - ACTIVITY_GAP;
        let on_line = |line: &str| {
            let decoded = parser.feed_line(line);
            for ev in decoded {
                let text = activity_text(ev, verbose);
                if text.is_empty() {
                    continue;
                }
                if verbose || last_sent.elapsed() >= ACTIVITY_GAP {
                    last_sent = Instant::now();
                    let _ = events.send(Event::Activity { idx, text });
                }
            }
            // A rejected key: the CLI would retry it for minutes, in vain.
            parser.auth_failed()
        };
        ctx.log.line(&format!("agent start story {id} attempt {n}"));
        let exit = process::run_attempt(spec_run, on_line, control.clone()).await;
        let summary = parser.finish();
        report.duration = started.elapsed();
        report.usage = summary.usage;
        report.cost_usd = summary.cost_usd.unwrap_or(0.0);
        report.learnings = summary.signals.learnings.clone();
        report.limit_warning = summary.limit_warning;
        let exit = match exit {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                report.verdict = Verdict::Fault {
                    reason: format!(
                        "the {} agent's command '{}' not found: install it or set agent.command \
                         in .ralph/config.json",
                        backend.name(),
                        ctx.agents[&backend].0
                    ),
                    kind: FaultKind::NeedsPerson,
                };
                break 'attempt;
            }
            Err(e) => {
                report.verdict = Verdict::Fault {
                    reason: format!("could not start the agent: {e}"),
                    kind: FaultKind::Transient,
                };
                break 'attempt;
            }
        };
        let (id2, wt2, base2, b2) = (id.clone(), wt_path.clone(), base.clone(), branch.clone());
        let (commits, moved) = blocking(&ctx, move |c| {
            keep_what_the_agent_left(c, &id2, n, &wt2, &base2);
            let commits = c.git.commits_ahead(&b2, &base2).unwrap_or(0);
            (commits, target_moved_by_agent(c, &b2, &base2))
        })
        .await
        .unwrap_or((0, None));
        if let Some(now) = moved {
            report.verdict = Verdict::Fault {
                reason: format!(
                    "the agent of story {id} moved {target} itself, from {base} to its own \
                     unvalidated commit {now}; ralph left {target} as it is and stops. To undo \
                     it: git update-ref refs/heads/{target} {base} {now}",
                    target = ctx.target
                ),
                kind: FaultKind::StopNow,
            };
            let r = project::kept_ref(KeptRef::Attempt, &id, n);
            let (b3, r2) = (branch.clone(), r.clone());
            if let Ok(Ok(())) = blocking(&ctx, move |c| c.git.save_ref(&b3, &r2)).await {
                report.saved_ref = Some(r);
            }
            break 'attempt;
        }
        if summary.auth_failed && !matches!(*control.borrow(), Control::Kill) {
            report.verdict = Verdict::Fault {
                reason: format!(
                    "the {} agent's credentials were rejected (401 authentication_failed): \
                     fix the API key or log in again, then run `ralph run`",
                    backend.name()
                ),
                kind: FaultKind::StopNow,
            };
            break 'attempt;
        }
        report.verdict = agent::classify(
            &id,
            &exit,
            &summary,
            commits,
            ctx.timeout.as_secs(),
            ctx.config.idle_timeout_secs,
            !ctx.required_validation.is_empty(),
        );
        let unlanded = matches!(
            report.verdict,
            Verdict::Failed { .. } | Verdict::Interrupted | Verdict::RateLimited { .. }
        );
        if unlanded && commits > 0 {
            let r = project::kept_ref(KeptRef::Attempt, &id, n);
            let (b2, r2) = (branch.clone(), r.clone());
            if let Ok(Ok(())) = blocking(&ctx, move |c| c.git.save_ref(&b2, &r2)).await {
                report.saved_ref = Some(r);
            }
        }
    }
    // Finished work is not done until it lands: its post hooks run after
    // the landing, with the landing's outcome (`land::land`).
    let lands = matches!(report.verdict, Verdict::Done | Verdict::Tentative);
    if !matches!(report.verdict, Verdict::Interrupted) && !lands {
        post_hooks(&ctx, &id, report.verdict.kind().as_str(), req.iteration).await;
    }
    report
}

/// `post_story` with the story's outcome as `RALPH_RESULT`, then
/// `post_iteration`: the end of an iteration that began with `pre_iteration`.
pub(crate) async fn post_hooks(ctx: &RunContext, id: &str, result: &str, iteration: u64) {
    let hooks = &ctx.config.hooks;
    let _ = run_hook(
        ctx,
        "post_story",
        &hooks.post_story,
        ctx.root.clone(),
        env_pairs(&[("RALPH_STORY", id), ("RALPH_RESULT", result)]),
        HOOK_TIMEOUT,
    )
    .await;
    let _ = run_hook(
        ctx,
        "post_iteration",
        &hooks.post_iteration,
        ctx.root.clone(),
        env_pairs(&[("RALPH_ITERATION", &iteration.to_string())]),
        HOOK_TIMEOUT,
    )
    .await;
}

/// The target's new tip when the agent moved the target itself: it moved
/// since the attempt began, to a commit of the story's own work (no landing
/// and no user commit puts one there). `None` otherwise.
fn target_moved_by_agent(ctx: &RunContext, branch: &str, base: &Oid) -> Option<Oid> {
    let now = ctx.git.branch_tip(&ctx.target).ok()??;
    if &now == base {
        return None;
    }
    ctx.git
        .branch_contains(branch, &now)
        .ok()
        .filter(|&c| c)
        .map(|_| now)
}

/// `GIT_CEILING_DIRECTORIES` for an agent: git run in a slot whose `.git`
/// file the agent deleted must fail, not walk up into the main repository
/// (the slots live inside it) and act there. The user's own ceilings stay.
fn ceiling(root: &Path) -> (String, String) {
    let ours = project::worktrees_dir(root).display().to_string();
    let value = match std::env::var("GIT_CEILING_DIRECTORIES") {
        Ok(v) if !v.is_empty() => format!("{v}:{ours}"),
        _ => ours,
    };
    ("GIT_CEILING_DIRECTORIES".to_string(), value)
}

/// One line of what the agent is doing, for the display ("" for nothing).
fn activity_text(ev: AgentEvent, verbose: bool) -> String {
    match ev {
        AgentEvent::ToolUse { name, summary } => format!("{name}: {summary}"),
        // `-v` streams the whole text; the display keeps one line.
        AgentEvent::Text(t) if verbose => t.trim().to_string(),
        AgentEvent::Text(t) => crate::report::render_activity(&t),
        AgentEvent::ApiRetry { attempt, error } => format!("API retry {attempt}: {error}"),
        AgentEvent::RateLimited { message, .. } => format!("rate limited: {message}"),
        AgentEvent::LimitWarning { used_percent, .. } => match used_percent {
            Some(p) => format!("usage limit near ({p:.0}% used)"),
            None => "usage limit near".to_string(),
        },
        AgentEvent::SessionId(_) | AgentEvent::Usage { .. } => String::new(),
        AgentEvent::Result { is_error, .. } => if is_error {
            "finished with an error"
        } else {
            "finished"
        }
        .to_string(),
    }
}
