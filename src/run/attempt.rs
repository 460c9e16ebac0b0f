//! One attempt, from worktree to verdict, on this machine: prepare the
//! slot's worktree at the target's tip, run the hooks, render the prompt,
//! run the agent in its own process group, keep whatever it left, and
//! classify the result (SPEC 4.4). Every failure becomes a verdict.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::agent::event::AgentEvent;
use crate::agent::parser::OutputParser;
use crate::agent::{self, FaultKind, ResultKind, Verdict};
use crate::backlog::{self, Story};
use crate::config::Config;
use crate::gitops::FixupStart;
use crate::learnings;
use crate::process::{self, AttemptSpec, Control};
use crate::project::{self, KeptRef};
use crate::prompt::{self, PromptInput};
use crate::state::AttemptKind;

use super::context::{blocking, env_pairs, run_hook, template, RunContext, HOOK_TIMEOUT};
use super::events::{AttemptReport, AttemptRequest, Event};
use super::executor::Executor;
use super::verdict::{self, AttemptFacts, Moved};
use super::{fixup, postmortem, slot};

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
    let template = template(root, prompt::TEMPLATE_OVERRIDE, prompt::BUILTIN_TEMPLATE);
    let input = PromptInput {
        id: &story.id,
        title: &story.title,
        spec: &spec,
        learnings: &chosen,
        retry_context,
    };
    Ok(prompt::render(&template, &prompt::vars_for(config, &input)))
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
    let tip = match blocking(&ctx, move |c| slot::prepare_or_rebuild(c, &id2, slot)).await {
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

    // A fix-up merges the story's kept work onto the new tip in the slot.
    // When that cannot be done (its ref is gone, say), the attempt is a
    // fresh redo from a slot prepared again.
    let fixup = match (&req.note, req.kind) {
        (Some(note), AttemptKind::Fixup) => note.fixup.clone(),
        _ => None,
    };
    let mut setup_error = None;
    let setup = match fixup.clone() {
        Some(f) => {
            let (id2, wt2) = (id.clone(), wt_path.clone());
            match blocking(&ctx, move |c| fixup::setup_fixup(c, &id2, &wt2, &f)).await {
                Ok(Ok(setup)) => Some(setup),
                Ok(Err(e)) => {
                    setup_error = Some(e.to_string());
                    None
                }
                Err(e) => {
                    setup_error = Some(e);
                    None
                }
            }
        }
        None => None,
    };
    if let Some(e) = &setup_error {
        ctx.log.line(&format!(
            "story {id} attempt {n}: its fix-up could not be set up ({e}); it starts over"
        ));
        report.kind = AttemptKind::Redo;
        let (id2, slot) = (id.clone(), req.slot);
        let again = blocking(&ctx, move |c| {
            slot::prepare_or_rebuild(c, &id2, slot).map_err(|e| e.to_string())
        })
        .await
        .and_then(|r| r);
        if let Err(e) = again {
            report.verdict = Verdict::Fault {
                reason: format!("could not prepare the worktree of slot {slot}: {e}"),
                kind: FaultKind::Transient,
            };
            return report;
        }
    }
    // The agent's own work is counted from here: a clean validation
    // fix-up starts from ralph's merge commit.
    let base = match &setup {
        Some(fixup::FixupSetup {
            start: FixupStart::Committed { commit },
            ..
        }) => commit.clone(),
        _ => tip.clone(),
    };
    let resume = req.resume.clone().filter(|_| setup.is_some());

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
        let (program, mut args) = ctx.agents[&backend].clone();
        if let Some(session) = &resume {
            match agent::resume_args(backend, &args, session) {
                Some(a) => {
                    args = a;
                    report.resumed = true;
                }
                None => ctx.log.line(&format!(
                    "story {id}: the configured {} command line has no place for a resumed \
                     session; the fix-up starts a new one",
                    backend.name()
                )),
            }
        }
        let extra = req.note.as_ref().map(|n| n.text.as_str()).unwrap_or("");
        let splitting = req.kind == AttemptKind::Decompose;
        let built = match (&fixup, &setup) {
            _ if splitting => {
                let spec = backlog::spec_text(&ctx.root, &story).unwrap_or_default();
                let chosen = learnings::select_relevant(&pool, &spec, ctx.config.learnings_max);
                super::split::prompt(&ctx, &story, extra, n, &chosen)
            }
            (Some(f), Some(setup)) => {
                fixup::build_fixup_prompt(&ctx, &story, f, setup, report.resumed, extra)
            }
            _ => {
                let mut context = req
                    .note
                    .as_ref()
                    .map(|n| prompt::note_context(n, &ctx.target))
                    .unwrap_or_default();
                if let Some(e) = &setup_error {
                    context.push_str(&format!(
                        "\n\n(Handing that work back to you failed: {e}; so you start over.)"
                    ));
                }
                build_prompt(
                    &ctx.root,
                    &ctx.config,
                    &story,
                    &pool,
                    Some(context.trim()).filter(|c| !c.is_empty()),
                )
            }
        };
        let text = match built {
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
        let (program2, wt2, b2) = (program.clone(), wt_path.clone(), branch.clone());
        let slot_name = project::slot_worktree(&ctx.root, req.slot).0;
        let seal = match blocking(&ctx, move |c| {
            c.seal
                .for_agent(&c.git, backend, &program2, &slot_name, &wt2, &b2)
        })
        .await
        .and_then(|r| r)
        {
            Ok(seal) => seal,
            Err(e) => {
                report.verdict = Verdict::Fault {
                    reason: format!("could not seal the attempt of story {id}: {e}"),
                    kind: FaultKind::Transient,
                };
                break 'attempt;
            }
        };
        let spec_run = AttemptSpec {
            program,
            args,
            cwd: wt_path.clone(),
            env: agent_env,
            env_remove: backend.env_remove().iter().map(|s| s.to_string()).collect(),
            stdin: text.into_bytes(),
            log_path: log_path.clone(),
            timeout: if splitting {
                Duration::from_secs(ctx.config.decompose_timeout_secs)
            } else {
                ctx.timeout
            },
            idle: (ctx.config.idle_timeout_secs > 0)
                .then(|| Duration::from_secs(ctx.config.idle_timeout_secs)),
            grace: Duration::from_secs(ctx.config.grace_secs),
            token: project::attempt_token(&ctx.tag, &id, n),
            seal,
            redact: ctx.seal.secrets.clone(),
        };
        let now = crate::timefmt::now_secs();
        let mut parser = OutputParser::for_backend(backend)
            .with_clock(now, crate::timefmt::local_offset_secs(now));
        if splitting {
            parser = parser.keeping_text(super::split::KEEP_TEXT);
        }
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
        let postmortem_spec = spec_run.clone();
        let exit = process::run_attempt(spec_run, on_line, control.clone()).await;
        // A confined agent committed on its branch's stand-in: the real
        // branch follows before anything looks at it.
        let slot_name = project::slot_worktree(&ctx.root, req.slot).0;
        if let Ok(Err(e)) = blocking(&ctx, move |c| c.git.sandbox_refs_collect(&slot_name)).await {
            ctx.log.line(&format!(
                "story {id} attempt {n}: the sandbox's commits could not be brought onto its \
                 branch ({e}); they stay in .git/ralph-sandbox until the next run"
            ));
        }
        let summary = parser.finish();
        report.duration = started.elapsed();
        report.usage = summary.usage;
        report.cost_usd = summary.cost_usd.unwrap_or(0.0);
        report.learnings = summary.signals.learnings.clone();
        report.limit_warning = summary.limit_warning;
        report.session_id = summary.session_id.clone();
        let exit = match exit {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                report.verdict = Verdict::Fault {
                    reason: format!(
                        "the {} agent's command '{}' not found: install it or set agent.command \
                         in {}",
                        backend.name(),
                        ctx.agents[&backend].0,
                        crate::paths::CONFIG
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
        // Facts: what the agent left, where the target is.
        let (id2, wt2, base2, b2) = (id.clone(), wt_path.clone(), base.clone(), branch.clone());
        let tip2 = tip.clone();
        let (commits, moved, kept) = blocking(&ctx, move |c| {
            let kept = slot::keep_what_the_agent_left(c, &id2, n, &wt2, &base2);
            let commits = c.git.commits_ahead(&b2, &base2).unwrap_or(0);
            (commits, slot::target_moved_by_agent(c, &b2, &tip2), kept)
        })
        .await
        .unwrap_or((0, None, Vec::new()));
        report.kept = kept;
        let mut facts = AttemptFacts {
            story: id.clone(),
            attempt: n,
            agent: backend.name(),
            classified: agent::classify(
                &id,
                &exit,
                &summary,
                commits,
                ctx.timeout.as_secs(),
                ctx.config.idle_timeout_secs,
                !ctx.required_validation.is_empty(),
            ),
            commits,
            moved: moved.map(|now| Moved {
                target: ctx.target.clone(),
                from: base.to_string(),
                to: now.to_string(),
            }),
            auth_rejected: summary.auth_failed && !matches!(*control.borrow(), Control::Kill),
            decomposing: splitting,
            split: None,
            done: None,
            fixup_merge: None,
        };
        if verdict::wants_split(&facts) {
            // All of the agent's own text, in order (issue 21).
            let (answer, bytes) = (summary.text.clone(), summary.text_bytes);
            let (story2, slot) = (story.clone(), req.slot);
            let applied = blocking(&ctx, move |c| {
                super::split::apply_answer(c, &story2, slot, (&answer, bytes), commits)
            })
            .await;
            facts.split = Some(applied.map(|(verdict, children)| {
                report.children = children;
                verdict
            }));
        }
        if verdict::wants_done_check(&facts) {
            let done = slot::commit_done_work(&ctx, &story, n, req.slot, &base, &mut report);
            facts.done = Some(done.await);
        }
        // Leftovers of a resolved merge that ralph committed count.
        let made = commits + usize::from(report.committed_for_agent.is_some());
        if let Some(setup) = setup.clone() {
            let b2 = branch.clone();
            facts.fixup_merge = blocking(&ctx, move |c| fixup::merge_left(c, &b2, &setup, made))
                .await
                .unwrap_or_default();
        }

        report.verdict = verdict::decide(&facts);
        let due = verdict::follow_ups(&facts, &report.verdict, ctx.config.postmortem_enabled);
        if due.postmortem {
            let spec = postmortem_spec;
            postmortem::postmortem(&ctx, &story, n, spec, backend, &control, &mut report).await;
        }
        if due.save_ref {
            let r = project::kept_ref(KeptRef::Attempt, &id, n);
            let (b2, r2) = (branch.clone(), r.clone());
            if let Ok(Ok(())) = blocking(&ctx, move |c| c.git.save_ref(&b2, &r2)).await {
                report.saved_ref = Some(r);
            }
        }
    }
    // Finished work is not done until it lands: its post hooks run after
    // the landing, with the landing's outcome (`land::land`).
    if verdict::post_hooks_now(&report.verdict) {
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
        AgentEvent::ApiRetry { attempt, error, .. } => format!("API retry {attempt}: {error}"),
        AgentEvent::RateLimited { message, .. } => format!("rate limited: {message}"),
        AgentEvent::LimitWarning { used_percent, .. } => match used_percent {
            Some(p) => format!("usage limit near ({p:.0}% used)"),
            None => "usage limit near".to_string(),
        },
        AgentEvent::SessionId(_)
        | AgentEvent::Usage { .. }
        | AgentEvent::Aside(_)
        | AgentEvent::Thinking
        | AgentEvent::ApiError(_)
        | AgentEvent::AuthRejected => String::new(),
        AgentEvent::Result { is_error, .. } => if is_error {
            "finished with an error"
        } else {
            "finished"
        }
        .to_string(),
    }
}
