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
use crate::gitops::{FixupLabels, FixupStart, GitError, LeftWork, Oid};
use crate::learnings;
use crate::process::{self, AttemptSpec, Control};
use crate::project::{self, KeptRef};
use crate::prompt::{self, FixupInput, PromptInput};
use crate::state::{AttemptKind, Fixup, FixupCause};

use super::context::{
    blocking, env_pairs, run_hook, template, RunContext, HOOK_TIMEOUT, WORKTREE_PREP,
};
use super::events::{AttemptReport, AttemptRequest, Event};
use super::executor::Executor;

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

/// The prompt of a fix-up: `.ralph/templates/fixup.md` or the built-in
/// one, with what went wrong and where the worktree was left; the spec only
/// when the agent's session is not resumed (it has read it there).
fn build_fixup_prompt(
    ctx: &RunContext,
    story: &Story,
    fixup: &Fixup,
    setup: &FixupSetup,
    resumed: bool,
    extra: &str,
) -> std::io::Result<String> {
    let (root, config, target) = (&ctx.root, &ctx.config, ctx.target.as_str());
    let spec = if resumed {
        None
    } else {
        Some(backlog::spec_text(root, story)?)
    };
    let template = template(root, crate::paths::FIXUP_TEMPLATE, prompt::FIXUP_TEMPLATE);
    let (conflicts, merging) = match &setup.start {
        FixupStart::Merging { conflicts } => (conflicts.as_slice(), true),
        FixupStart::Committed { .. } => (&[][..], false),
    };
    let input = FixupInput {
        id: &story.id,
        title: &story.title,
        target,
        cause: &fixup.cause,
        conflicts,
        merging,
        landed: &setup.landed,
        spec: spec.as_deref(),
        extra,
    };
    Ok(prompt::render(
        &template,
        &prompt::fixup_vars(config, &input),
    ))
}

/// How a fix-up's worktree was set up.
#[derive(Debug, Clone)]
struct FixupSetup {
    start: FixupStart,
    /// Stories landed on the target since the work began: (ID, title).
    landed: Vec<(String, String)>,
}

/// Merges the story's kept work onto the target's tip in its slot (just
/// prepared there): conflicts are left for the agent, a clean validation
/// fix-up's merge is committed by ralph.
fn setup_fixup(
    ctx: &RunContext,
    id: &str,
    wt: &Path,
    fixup: &Fixup,
) -> Result<FixupSetup, GitError> {
    let landed = ctx
        .git
        .landed_since(&fixup.work, &ctx.target)
        .unwrap_or_default();
    let ours = format!("{} (landed meanwhile)", ctx.target);
    let theirs = format!("story {id} (your work)");
    let message = format!(
        "fix-up(story-{id}): merge {} into the story's work\n",
        ctx.target
    );
    let labels = FixupLabels {
        ours: &ours,
        theirs: &theirs,
        message: &message,
    };
    let commit_clean = matches!(fixup.cause, FixupCause::Validation { .. });
    let start = ctx
        .git
        .start_fixup(wt, &fixup.work, &labels, commit_clean)?;
    Ok(FixupSetup { start, landed })
}

/// A fix-up's result that cannot land: nothing committed while the merge
/// was left to the agent, or conflict markers still in the files that
/// conflicted. `None` when it may go to the merge queue.
fn fixup_left_undone(
    ctx: &RunContext,
    branch: &str,
    setup: &FixupSetup,
    commits: usize,
) -> Option<String> {
    let FixupStart::Merging { conflicts } = &setup.start else {
        return None;
    };
    if commits == 0 {
        return Some(
            "the fix-up committed nothing: the merge was left in progress (resolve, then \
             `git commit --no-edit`)"
                .to_string(),
        );
    }
    let marked = ctx
        .git
        .conflict_markers(branch, conflicts)
        .unwrap_or_default();
    (!marked.is_empty()).then(|| {
        format!(
            "the fix-up committed conflict markers in {}",
            marked.join(", ")
        )
    })
}

/// After a timeout: a short run reads the spec's head and the end of what
/// the stopped attempt printed and says why; its `LEARN` tags join the
/// attempt's learnings (stored like any), its usage the attempt's.
async fn postmortem(
    ctx: &Arc<RunContext>,
    story: &Story,
    n: u32,
    mut spec: AttemptSpec,
    backend: agent::Backend,
    control: &watch::Receiver<Control>,
    report: &mut AttemptReport,
) {
    let id = &story.id;
    let max_chars = ctx.config.postmortem.max_chars;
    // A char is at most 4 bytes: the end read holds the last `max_chars`.
    let partial = crate::store::read_log_end(&spec.log_path, 0, 4 * max_chars as u64 + 4)
        .map(|(text, _)| text)
        .unwrap_or_default();
    let partial = crate::postmortem::tail_chars(&partial, max_chars);
    let spec_text = backlog::spec_text(&ctx.root, story).unwrap_or_default();
    let template = template(
        &ctx.root,
        crate::paths::POSTMORTEM_TEMPLATE,
        crate::postmortem::TEMPLATE,
    );
    let mut v = prompt::Vars::default();
    v.set("STORY_ID", id.as_str());
    v.set("TITLE", story.title.as_str());
    v.set(
        "SPEC_CONTENT",
        crate::postmortem::head_bytes(&spec_text, crate::postmortem::SPEC_HEAD_BYTES),
    );
    v.set("PARTIAL_OUTPUT", partial);
    v.set(
        "TIMEOUT",
        crate::timefmt::human_duration(spec.timeout.as_secs_f64()),
    );
    spec.stdin = prompt::render(&template, &v).into_bytes();
    spec.log_path = crate::paths::postmortem_log(&ctx.root, id, n);
    // Never longer than the attempt it explains: `-t 3` must not let a
    // hung postmortem hold the slot for `postmortem.window_seconds`.
    spec.timeout = Duration::from_secs(ctx.config.postmortem.window_secs).min(spec.timeout);
    // Its args are the attempt's: a resumed session would only repeat it.
    if spec.args.first().is_some_and(|a| a == "--resume") {
        spec.args.drain(..2);
    }
    // Its sandbox needs the branch's stand-in again (collected after the
    // attempt), and gives it back after.
    let slot = spec
        .cwd
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if spec.seal.as_ref().is_some_and(|s| s.bwrap.is_some()) {
        let (program, wt, branch, slot2) = (
            spec.program.clone(),
            spec.cwd.clone(),
            project::story_branch(id),
            slot.clone(),
        );
        let again = blocking(ctx, move |c| {
            c.seal
                .for_agent(&c.git, backend, &program, &slot2, &wt, &branch)
        })
        .await
        .and_then(|r| r);
        match again {
            Ok(seal) => spec.seal = seal,
            Err(e) => {
                ctx.log.line(&format!(
                    "postmortem of story {id} attempt {n} skipped: cannot seal it: {e}"
                ));
                return;
            }
        }
    }
    let mut parser = OutputParser::for_backend(backend);
    ctx.log
        .line(&format!("postmortem of story {id} attempt {n}"));
    let ran = process::run_attempt(
        spec,
        |l| {
            parser.feed_line(l);
            false
        },
        control.clone(),
    )
    .await;
    let _ = blocking(ctx, move |c| c.git.sandbox_refs_collect(&slot)).await;
    let summary = parser.finish();
    report.usage += summary.usage;
    report.cost_usd += summary.cost_usd.unwrap_or(0.0);
    let lessons = summary.signals.learnings;
    ctx.log.line(&format!(
        "postmortem of story {id} attempt {n}: {} ({} lesson(s))",
        match ran {
            Ok(e) if e.stopped.is_some() => "stopped".to_string(),
            Ok(e) => format!("exit {:?}", e.code),
            Err(e) => format!("could not start: {e}"),
        },
        lessons.len()
    ));
    // The retry is told directly (learnings are chosen by relevance to
    // the spec, which a lesson about the run itself may not share).
    if let Verdict::Failed { reason, .. } = &mut report.verdict {
        for l in &lessons {
            reason.push_str(&format!("\nTimeout postmortem: {l}"));
        }
    }
    report.learnings.extend(lessons);
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
    let chosen = learnings::select_relevant(learnings_pool, &spec, config.learnings.max);
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

/// Puts the slot's worktree on the story branch at the target's tip; a
/// previous attempt's unsaved commits on that branch are kept first.
fn prepare(ctx: &RunContext, id: &str, slot: usize) -> Result<Oid, GitError> {
    let mut warm = WORKTREE_PREP.lock().unwrap_or_else(|e| e.into_inner());
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
    super::slots::take_slot(ctx, &mut warm, &wt_name, &wt_path, &branch, &base)?;
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
/// Returns the refs it kept besides the branch.
fn keep_what_the_agent_left(
    ctx: &RunContext,
    id: &str,
    n: u32,
    wt: &Path,
    base: &Oid,
) -> Vec<String> {
    let mut kept = Vec::new();
    let branch = project::story_branch(id);
    let unc = project::kept_ref(KeptRef::Uncommitted, id, n);
    if let Ok(Some(_)) = ctx.git.save_uncommitted(wt, &unc) {
        ctx.log.line(&format!(
            "story {id} attempt {n}: uncommitted changes kept at {unc}"
        ));
        kept.push(unc);
    }
    let head = project::kept_ref(KeptRef::Head, id, n);
    if let Ok(a) = ctx.git.adopt_worktree_head(wt, &branch, base, &head) {
        if a != crate::gitops::Adopted::Unchanged {
            ctx.log.line(&format!(
                "story {id} attempt {n}: agent left its branch: {a:?}"
            ));
        }
        if let crate::gitops::Adopted::Saved { refname } = a {
            kept.push(refname);
        }
    }
    kept
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
    let tip = match blocking(&ctx, move |c| prepare_or_rebuild(c, &id2, slot)).await {
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
            match blocking(&ctx, move |c| setup_fixup(c, &id2, &wt2, &f)).await {
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
            prepare_or_rebuild(c, &id2, slot).map_err(|e| e.to_string())
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
        Some(FixupSetup {
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

        let pool = if ctx.config.learnings.enabled {
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
                let chosen = learnings::select_relevant(&pool, &spec, ctx.config.learnings.max);
                super::split::prompt(&ctx, &story, extra, n, &chosen)
            }
            (Some(f), Some(setup)) => {
                build_fixup_prompt(&ctx, &story, f, setup, report.resumed, extra)
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
                Duration::from_secs(ctx.config.decomposition.timeout_secs)
            } else {
                ctx.timeout
            },
            idle: (ctx.config.loop_.idle_timeout_secs > 0)
                .then(|| Duration::from_secs(ctx.config.loop_.idle_timeout_secs)),
            grace: Duration::from_secs(ctx.config.loop_.grace_secs),
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
        let (id2, wt2, base2, b2) = (id.clone(), wt_path.clone(), base.clone(), branch.clone());
        let tip2 = tip.clone();
        let (commits, moved, kept) = blocking(&ctx, move |c| {
            let kept = keep_what_the_agent_left(c, &id2, n, &wt2, &base2);
            let commits = c.git.commits_ahead(&b2, &base2).unwrap_or(0);
            (commits, target_moved_by_agent(c, &b2, &tip2), kept)
        })
        .await
        .unwrap_or((0, None, Vec::new()));
        report.kept = kept;
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
            ctx.config.loop_.idle_timeout_secs,
            !ctx.required_validation.is_empty(),
        );
        if splitting {
            // Its answer is sub-stories, not a DONE: a run that ended for a
            // reason outside the answer keeps that verdict.
            let answered = !matches!(
                report.verdict,
                Verdict::Interrupted
                    | Verdict::RateLimited { .. }
                    | Verdict::Fault { .. }
                    | Verdict::RootRefusal
                    | Verdict::Failed {
                        kind: ResultKind::Timeout,
                        ..
                    }
            );
            if answered {
                // All of the agent's own text, in order (issue 21).
                let (answer, bytes) = (summary.text.clone(), summary.text_bytes);
                let (story2, slot) = (story.clone(), req.slot);
                let applied = blocking(&ctx, move |c| {
                    super::split::apply_answer(c, &story2, slot, (&answer, bytes), commits)
                })
                .await;
                match applied {
                    Ok((verdict, children)) => {
                        report.verdict = verdict;
                        report.children = children;
                    }
                    Err(e) => {
                        report.verdict = Verdict::Fault {
                            reason: format!("the decomposition's writer failed: {e}"),
                            kind: FaultKind::Transient,
                        }
                    }
                }
            }
        } else if report.verdict == Verdict::Done {
            report.verdict = honest_done(&ctx, &story, n, req.slot, &base, &mut report).await;
        }
        let timed_out = matches!(
            report.verdict,
            Verdict::Failed {
                kind: ResultKind::Timeout,
                ..
            }
        );
        if timed_out && ctx.config.postmortem.enabled && !splitting {
            postmortem(
                &ctx,
                &story,
                n,
                postmortem_spec,
                backend,
                &control,
                &mut report,
            )
            .await;
        }
        // A merge the agent resolved but left for ralph to commit counts.
        let commits = commits + usize::from(report.committed_for_agent.is_some());
        if let (Some(setup), Verdict::Done | Verdict::Tentative) = (&setup, &report.verdict) {
            let (b2, setup2) = (branch.clone(), setup.clone());
            let undone = blocking(&ctx, move |c| fixup_left_undone(c, &b2, &setup2, commits))
                .await
                .unwrap_or_default();
            if let Some(reason) = undone {
                report.verdict = Verdict::Failed {
                    reason,
                    kind: ResultKind::Fail,
                };
            }
        }
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

/// "Done" means the work is on the story branch: what the agent left
/// uncommitted is committed there (the prompt's commit message; runtime
/// files and ignored files left out), and a DONE that changed nothing fails
/// the attempt unless `loop.allow_empty_done` or the spec's
/// `allow_empty_done` allows it. The verdict that goes to landing.
async fn honest_done(
    ctx: &Arc<RunContext>,
    story: &Story,
    n: u32,
    slot: usize,
    base: &Oid,
    report: &mut AttemptReport,
) -> Verdict {
    let id = story.id.clone();
    let message = prompt::commit_message(&ctx.config.commit.format, &id, &story.title);
    let base2 = base.clone();
    let checked = blocking(ctx, move |c| {
        let (name, path) = project::slot_worktree(&c.root, slot);
        let branch = project::story_branch(&id);
        // Every process of the attempt is gone: a lock left in the slot is stale.
        c.git.clear_worktree_locks(&name)?;
        let root_rel = c.git.rel_path(&c.root).unwrap_or_default();
        let skip = |p: &str| project::is_runtime_repo_path(p, &root_rel);
        let left = c.git.commit_left_work(&path, &branch, &message, &skip)?;
        let empty = c.git.same_tree(&branch, &base2)?;
        Ok::<_, GitError>((left, empty))
    })
    .await;
    let id = &story.id;
    let branch = project::story_branch(id);
    let (left, empty) = match checked {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return left_work_fault(ctx, id, n, e.to_string()),
        Err(e) => return left_work_fault(ctx, id, n, e),
    };
    match &left {
        LeftWork::Committed { commit, files } => {
            ctx.log.line(&format!(
                "story {id} attempt {n}: the agent said DONE and left {} file(s) uncommitted \
                 ({}); ralph committed them on {branch} as {commit}",
                files.len(),
                files.join(", ")
            ));
            report.committed_for_agent = Some((files.len(), commit.clone()));
        }
        LeftWork::OffBranch => ctx.log.line(&format!(
            "story {id} attempt {n}: the agent said DONE with its worktree's HEAD off {branch}; \
             nothing committed for it"
        )),
        LeftWork::Nothing => {}
    }
    if !empty {
        return Verdict::Done;
    }
    if story.allow_empty_done || ctx.config.loop_.allow_empty_done {
        ctx.log.line(&format!(
            "story {id} attempt {n}: DONE with no change, allowed by allow_empty_done"
        ));
        return Verdict::Done;
    }
    ctx.log.line(&format!(
        "story {id} attempt {n}: reported DONE but {branch} has no change over {base} and \
         nothing was left uncommitted; a story that needs no change may say so with \
         `allow_empty_done: true` in its spec's frontmatter (or loop.allow_empty_done)"
    ));
    Verdict::Failed {
        reason: "reported DONE but changed nothing".to_string(),
        kind: ResultKind::Fail,
    }
}

/// ralph could not commit what a DONE agent left: the machine's or git's
/// trouble, not the story's; the work stays under its `-uncommitted` ref.
fn left_work_fault(ctx: &RunContext, id: &str, n: u32, e: String) -> Verdict {
    let kept = project::kept_ref(KeptRef::Uncommitted, id, n);
    ctx.log.line(&format!(
        "story {id} attempt {n}: committing what the agent left failed: {e}"
    ));
    Verdict::Fault {
        reason: format!(
            "could not commit the work story {id}'s agent left uncommitted ({e}); \
             what it left is kept at {kept}"
        ),
        kind: FaultKind::Transient,
    }
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
