//! One attempt, from worktree to verdict, on this machine, in short steps
//! (SPEC 4.4): the slot made ready (`slot.rs`, a fix-up's merge in
//! `fixup.rs`), the hooks, the prompt, the agent in its own process group,
//! the facts it left, the verdict (`verdict::decide`, pure), what follows
//! it (the postmortem in `postmortem.rs`, the attempt's ref). Every failure
//! becomes a verdict.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::agent::event::AgentEvent;
use crate::agent::parser::{OutputParser, Summary};
use crate::agent::{self, FaultKind, ResultKind, Verdict};
use crate::backlog::{self, Story};
use crate::gitops::{FixupStart, Oid};
use crate::learnings;
use crate::process::{self, AttemptExit, AttemptSpec, Control};
use crate::project::{self, KeptRef};
use crate::prompt;
use crate::state::{AttemptKind, Fixup};

use crate::executor::{
    blocking, build_prompt, env_pairs, post_hooks, run_hook, AttemptEnv, AttemptEvent,
    AttemptReport, AttemptRequest, HOOK_TIMEOUT,
};

use super::verdict::{self, AttemptFacts, Moved};
use super::{fixup, postmortem, slot};

/// Shortest gap between two activity lines sent to the display (it needs
/// the latest, not every line).
const ACTIVITY_GAP: Duration = Duration::from_millis(200);

pub(super) fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

/// One attempt's names and places, shared by its steps.
struct Attempt<'a> {
    ctx: &'a Arc<AttemptEnv>,
    req: &'a AttemptRequest,
    story: &'a Story,
    id: &'a str,
    /// What its git names and token are made of: the story's ID, or a
    /// racing candidate's key (`project::candidate_key`, issue 36).
    gid: String,
    n: u32,
    branch: String,
    wt_path: PathBuf,
    log_path: PathBuf,
    backend: agent::Backend,
    /// When the attempt began (its duration includes preparing the slot).
    started: Instant,
    control: watch::Receiver<Control>,
    /// What the agent is doing goes to the display.
    events: mpsc::UnboundedSender<AttemptEvent>,
    verbose: bool,
}

/// The slot made ready for the agent.
struct Ready {
    /// The target's tip the slot was prepared at.
    tip: Oid,
    /// Where the agent's own work is counted from: the tip, or ralph's
    /// merge commit for a clean validation fix-up.
    base: Oid,
    /// The fix-up asked for, when it was set up.
    fixup: Option<(Fixup, fixup::FixupSetup)>,
    /// Why the fix-up asked for could not be set up (it starts over).
    setup_error: Option<String>,
}

/// What the agent's run left to judge.
struct Ran {
    exit: AttemptExit,
    summary: Summary,
    /// Its command line, for the postmortem.
    spec: AttemptSpec,
}

/// Runs one attempt to its report; the post hooks of whatever did not
/// finish (finished work's wait for its landing).
pub(super) async fn run_attempt(
    ctx: Arc<AttemptEnv>,
    req: AttemptRequest,
    story: Story,
    control: watch::Receiver<Control>,
    events: mpsc::UnboundedSender<AttemptEvent>,
    verbose: bool,
) -> AttemptReport {
    let gid = project::attempt_key(&story.id, req.candidate);
    let a = Attempt {
        ctx: &ctx,
        req: &req,
        story: &story,
        id: &story.id,
        n: req.attempt,
        branch: project::story_branch(&gid),
        wt_path: crate::paths::slot_worktree(&ctx.root, req.slot).1,
        log_path: crate::paths::log_of(&ctx.root, &story.id, req.attempt, req.candidate),
        gid,
        backend: req.agent,
        started: Instant::now(),
        control,
        events,
        verbose,
    };
    let mut report = AttemptReport::empty(&req, Verdict::Interrupted, rel(&ctx.root, &a.log_path));
    report.agent = Some(a.backend.name());
    let ready = match a.ready(&mut report).await {
        Ok(r) => r,
        Err(v) => {
            report.verdict = v;
            return report;
        }
    };
    let iter_s = req.iteration.to_string();
    let _ = run_hook(
        &ctx,
        "pre_iteration",
        &ctx.config.hooks.pre_iteration,
        ctx.root.clone(),
        a.with_candidate(env_pairs(&[("RALPH_ITERATION", &iter_s)])),
        HOOK_TIMEOUT,
    )
    .await;
    // Once pre_iteration has run, post_story and post_iteration run too,
    // whatever ends the steps early (invariant 9).
    if let Err(v) = a.steps(&ready, &mut report).await {
        report.verdict = v;
    }
    // Finished work is not done until it lands: its post hooks run after
    // the landing, with the landing's outcome (`land::land`).
    // A racing candidate's are its own, at its end: its work may never
    // land (another's does), and its hooks still end what pre_iteration
    // began.
    if verdict::post_hooks_now(&report.verdict) || req.candidate.is_some() {
        let result = report.verdict.kind().as_str();
        post_hooks(&ctx, a.id, result, req.iteration, req.candidate).await;
    }
    report
}

impl Attempt<'_> {
    /// Hooks, prompt, the agent, the facts, the verdict, what follows it.
    /// An early end is the verdict.
    async fn steps(&self, ready: &Ready, report: &mut AttemptReport) -> Result<(), Verdict> {
        self.pre_hooks().await?;
        let (program, args, text) = self.prompt(ready, report)?;
        let ran = self.spawn(program, args, text, report).await?;
        let facts = self.gather(ready, &ran, report).await;
        report.verdict = verdict::decide(&facts);
        let due = verdict::follow_ups(&facts, &report.verdict, self.ctx.config.postmortem.enabled);
        let (ctx, story, n) = (self.ctx, self.story, self.n);
        if due.postmortem {
            let (spec, control) = (ran.spec, &self.control);
            let pm_model = self.req.postmortem_model.as_deref();
            let who = (self.backend, pm_model);
            postmortem::postmortem(ctx, story, n, spec, who, control, report).await;
        }
        if self.req.candidate.is_some()
            && matches!(report.verdict, Verdict::Done | Verdict::Tentative)
        {
            let b2 = self.branch.clone();
            let stat = blocking(ctx, move |c| c.git.diffstat(&b2, &c.target)).await;
            if let Ok(Ok(Some((_, added, removed)))) = stat {
                report.diff_lines = Some((added + removed) as u64);
            }
        }
        if due.save_ref {
            let r = project::kept_ref(KeptRef::Attempt, &self.gid, n);
            let (b2, r2) = (self.branch.clone(), r.clone());
            if let Ok(Ok(())) = blocking(ctx, move |c| c.git.save_ref(&b2, &r2)).await {
                report.saved_ref = Some(r);
            }
        }
        Ok(())
    }

    /// The slot prepared at the target's tip, and a fix-up's merge of the
    /// story's kept work onto it. When that cannot be done (its ref is
    /// gone, say), the attempt is a fresh redo from a slot prepared again.
    async fn ready(&self, report: &mut AttemptReport) -> Result<Ready, Verdict> {
        let (ctx, id, n, slot) = (self.ctx, self.id, self.n, self.req.slot);
        let id2 = self.gid.clone();
        let tip = match blocking(ctx, move |c| slot::prepare_or_rebuild(c, &id2, slot)).await {
            Ok(Ok(b)) => b,
            // The slot could not be made even from scratch: the machine's
            // trouble, not the story's (disk, permissions, a held lock).
            Ok(Err(e)) => return Err(unprepared(slot, e)),
            Err(e) => return Err(fail(e)),
        };
        let asked = match (&self.req.note, self.req.kind) {
            (Some(note), AttemptKind::Fixup) => note.fixup.clone(),
            _ => None,
        };
        let mut setup_error = None;
        let mut fixup = None;
        if let Some(f) = asked {
            let (id2, wt2, f2) = (id.to_string(), self.wt_path.clone(), f.clone());
            match blocking(ctx, move |c| fixup::setup_fixup(c, &id2, &wt2, &f2)).await {
                Ok(Ok(setup)) => fixup = Some((f, setup)),
                Ok(Err(e)) => setup_error = Some(e.to_string()),
                Err(e) => setup_error = Some(e),
            }
        }
        if let Some(e) = &setup_error {
            ctx.log.line(&format!(
                "story {id} attempt {n}: its fix-up could not be set up ({e}); it starts over"
            ));
            report.kind = AttemptKind::Redo;
            let id2 = self.gid.clone();
            let again = blocking(ctx, move |c| {
                slot::prepare_or_rebuild(c, &id2, slot).map_err(|e| e.to_string())
            })
            .await
            .and_then(|r| r);
            if let Err(e) = again {
                return Err(unprepared(slot, e));
            }
        }
        // The agent's own work is counted from here: a clean validation
        // fix-up starts from ralph's merge commit.
        let base = match &fixup {
            Some((
                _,
                fixup::FixupSetup {
                    start: FixupStart::Committed { commit },
                    ..
                },
            )) => commit.clone(),
            _ => tip.clone(),
        };
        Ok(Ready {
            tip,
            base,
            fixup,
            setup_error,
        })
    }

    /// `pre_worktree` (its failure fails the attempt), then `pre_story`.
    async fn pre_hooks(&self) -> Result<(), Verdict> {
        let (ctx, id) = (self.ctx, self.id);
        let hooks = &ctx.config.hooks;
        let (root_s, wt_s) = (ctx.root.display().to_string(), self.wt_path_s());
        if let Some(msg) = run_hook(
            ctx,
            "pre_worktree",
            &hooks.pre_worktree,
            self.wt_path.clone(),
            self.with_candidate(env_pairs(&[
                ("RALPH_STORY", id),
                ("RALPH_WORKTREE", &wt_s),
                ("RALPH_BRANCH", &self.branch),
                ("RALPH_PROJECT_DIR", &root_s),
            ])),
            Duration::from_secs(hooks.pre_worktree_timeout),
        )
        .await
        {
            return Err(fail(format!("pre_worktree hook failed: {msg}")));
        }
        let _ = run_hook(
            ctx,
            "pre_story",
            &hooks.pre_story,
            ctx.root.clone(),
            self.with_candidate(env_pairs(&[
                ("RALPH_STORY", id),
                ("RALPH_SPEC", &self.spec_s()),
            ])),
            HOOK_TIMEOUT,
        )
        .await;
        Ok(())
    }

    /// The agent's command line (a fix-up's session resumed when asked
    /// and possible) and its prompt: a decomposition's, a fix-up's, or the
    /// story's with what the retry is told.
    fn prompt(
        &self,
        ready: &Ready,
        report: &mut AttemptReport,
    ) -> Result<(String, Vec<String>, String), Verdict> {
        let (ctx, story, id, n, backend) = (self.ctx, self.story, self.id, self.n, self.backend);
        let pool = if ctx.config.learnings.enabled {
            learnings::load(&ctx.root)
        } else {
            Vec::new()
        };
        let (program, mut args) = ctx.agents[&backend].clone();
        if let Some(m) = &self.req.model {
            match agent::with_model(backend, &args, m) {
                Some(a) => args = a,
                None => ctx.log.line(&format!(
                    "story {id}: the configured {} command line has no place for the model \
                     {m}; the CLI runs its own",
                    backend.name()
                )),
            }
        }
        let resume = self.req.resume.as_ref().filter(|_| ready.fixup.is_some());
        if let Some(session) = resume {
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
        let note = self.req.note.as_ref();
        let extra = note.map(|n| n.text.as_str()).unwrap_or("");
        let built = match &ready.fixup {
            _ if self.splitting() => {
                let spec = backlog::spec_text(&ctx.root, story).unwrap_or_default();
                let chosen = learnings::select_relevant(&pool, &spec, ctx.config.learnings.max);
                super::split::prompt(ctx, story, extra, n, &chosen)
            }
            Some((f, setup)) => {
                fixup::build_fixup_prompt(ctx, story, f, setup, report.resumed, extra)
            }
            None => {
                let mut context = note
                    .map(|n| prompt::note_context(n, &ctx.target))
                    .unwrap_or_default();
                if let Some(e) = &ready.setup_error {
                    context.push_str(&format!(
                        "\n\n(Handing that work back to you failed: {e}; so you start over.)"
                    ));
                }
                build_prompt(
                    &ctx.root,
                    &ctx.config,
                    story,
                    &pool,
                    Some(context.trim()).filter(|c| !c.is_empty()),
                )
            }
        };
        match built {
            Ok(text) => Ok((program, args, text)),
            Err(e) => Err(Verdict::Fault {
                reason: format!(
                    "cannot read the spec of story {id} ({}): {e}; restore it, then run \
                     `ralph run` again",
                    self.spec_s()
                ),
                kind: FaultKind::NeedsPerson,
            }),
        }
    }

    /// The agent run in its own process group (sealed when the run is),
    /// its activity sent to the display; what it used goes into `report`.
    async fn spawn(
        &self,
        program: String,
        args: Vec<String>,
        text: String,
        report: &mut AttemptReport,
    ) -> Result<Ran, Verdict> {
        let (ctx, id, n, backend) = (self.ctx, self.id, self.n, self.backend);
        let (events, verbose) = (&self.events, self.verbose);
        let spec = self.agent_spec(program, args, text).await?;
        let now = crate::timefmt::now_secs();
        let mut parser = OutputParser::for_backend(backend)
            .with_clock(now, crate::timefmt::local_offset_secs(now));
        if self.splitting() {
            parser = parser.keeping_text(super::split::KEEP_TEXT);
        }
        let (idx, candidate) = (self.req.idx, self.req.candidate);
        let mut last_sent = Instant::now() - ACTIVITY_GAP;
        let mut edited = std::collections::HashSet::new();
        let on_line = |line: &str| {
            let decoded = parser.feed_line(line);
            for ev in decoded {
                if let AgentEvent::ToolUse { name, summary } = &ev {
                    let path = crate::agent::event::edited_path(name, summary);
                    if let Some(path) = path.filter(|p| edited.insert(p.clone())) {
                        let _ = events.send(AttemptEvent::Editing { idx, path });
                    }
                }
                let text = activity_text(ev, verbose);
                if text.is_empty() {
                    continue;
                }
                if verbose || last_sent.elapsed() >= ACTIVITY_GAP {
                    last_sent = Instant::now();
                    let _ = events.send(AttemptEvent::Activity {
                        idx,
                        candidate,
                        text,
                    });
                }
            }
            // A rejected key: the CLI would retry it for minutes, in vain.
            parser.auth_failed()
        };
        ctx.log.line(&format!("agent start story {id} attempt {n}"));
        let kept_spec = spec.clone();
        let exit = process::run_attempt(spec, on_line, self.control.clone()).await;
        self.collect_sandbox().await;
        let summary = parser.finish();
        self.fill_report(&summary, report);
        let exit = exit.map_err(|e| self.start_failed(&e))?;
        Ok(Ran {
            exit,
            summary,
            spec: kept_spec,
        })
    }

    /// The agent's command line, environment, limits and seal.
    async fn agent_spec(
        &self,
        program: String,
        args: Vec<String>,
        text: String,
    ) -> Result<AttemptSpec, Verdict> {
        let (ctx, id, n, backend) = (self.ctx, self.id, self.n, self.backend);
        let (root_s, wt_s) = (ctx.root.display().to_string(), self.wt_path_s());
        // An agent kept in the project runs from this worktree (issue 32).
        let program = crate::executor::seal::program_in(&ctx.git.workdir, &program, &self.wt_path);
        let mut agent_env = self.with_candidate(env_pairs(&[
            ("RALPH_STORY", id),
            ("RALPH_ATTEMPT", &n.to_string()),
            ("RALPH_WORKTREE", &wt_s),
            ("RALPH_BRANCH", &self.branch),
            ("RALPH_PROJECT_DIR", &root_s),
        ]));
        agent_env.push(ceiling(&ctx.root));
        let (program2, wt2, b2) = (program.clone(), self.wt_path.clone(), self.branch.clone());
        let slot_name = crate::paths::slot_worktree(&ctx.root, self.req.slot).0;
        let seal = blocking(ctx, move |c| {
            c.seal
                .for_agent(&c.git, backend, &program2, &slot_name, &wt2, &b2)
        })
        .await
        .and_then(|r| r)
        .map_err(|e| Verdict::Fault {
            reason: format!("could not seal the attempt of story {id}: {e}"),
            kind: FaultKind::Transient,
        })?;
        Ok(AttemptSpec {
            program,
            args,
            cwd: self.wt_path.clone(),
            env: agent_env,
            // A tracker's token never reaches an agent, sealed or not.
            env_remove: crate::sandbox::agent_env_remove(backend.env_remove()),
            stdin: text.into_bytes(),
            log_path: self.log_path.clone(),
            timeout: if self.splitting() {
                Duration::from_secs(ctx.config.decomposition.timeout_secs)
            } else {
                ctx.timeout
            },
            idle: (ctx.config.loop_.idle_timeout_secs > 0)
                .then(|| Duration::from_secs(ctx.config.loop_.idle_timeout_secs)),
            grace: Duration::from_secs(ctx.config.loop_.grace_secs),
            token: project::attempt_token(&ctx.tag, &self.gid, n),
            seal,
            redact: ctx.seal.secrets.clone(),
        })
    }

    /// A confined agent committed on its branch's stand-in: the real branch
    /// follows before anything looks at it. What the agent left in git's
    /// files that ralph would not take as git's was undone first; each such
    /// finding goes to ralph.log and the attempt's own log.
    async fn collect_sandbox(&self) {
        let (ctx, id, n) = (self.ctx, self.id, self.n);
        let slot_name = crate::paths::slot_worktree(&ctx.root, self.req.slot).0;
        match blocking(ctx, move |c| c.git.sandbox_refs_collect(&slot_name)).await {
            Ok(Err(e)) => ctx.log.line(&format!(
                "story {id} attempt {n}: the sandbox's commits could not be brought onto its \
                 branch ({e}); they stay in .git/ralph-sandbox until the next run"
            )),
            Ok(Ok(c)) => {
                for f in c.findings() {
                    ctx.log
                        .line(&format!("story {id} attempt {n}: sandbox finding: {f}"));
                }
                // On the attempt's own record too, where `ralph log` shows it.
                if !c.findings().is_empty() {
                    use std::io::Write;
                    if let Ok(mut f) = std::fs::OpenOptions::new()
                        .append(true)
                        .open(&self.log_path)
                    {
                        for line in c.findings() {
                            let _ = writeln!(f, "ralph: sandbox finding: {line}");
                        }
                    }
                }
            }
            Err(_) => {}
        }
    }

    /// What the agent's output said it used and explained.
    fn fill_report(&self, summary: &crate::agent::parser::Summary, report: &mut AttemptReport) {
        let (ctx, id, backend) = (self.ctx, self.id, self.backend);
        report.duration = self.started.elapsed();
        report.usage = summary.usage;
        let cost = crate::pricing::attempt_cost(
            &ctx.config.pricing,
            summary.cost_usd,
            self.req.model.as_deref(),
            &summary.usage,
            backend != agent::Backend::Custom,
        );
        report.cost_usd = cost.unwrap_or(0.0);
        report.cost_unknown = cost.is_none();
        report.learnings = summary.signals.learnings.clone();
        report.limit_warning = summary.limit_warning;
        report.session_id = summary.session_id.clone();
        // Only this story's tags count: an agent quoting another's is not
        // explaining its own work.
        let own = |t: &Option<(String, String)>| {
            t.as_ref()
                .filter(|(tag_id, _)| tag_id == id)
                .map(|(_, why)| why.clone())
        };
        report.explained = crate::state::Explained {
            tests_changed: own(&summary.signals.tests_changed),
            drops: own(&summary.signals.drops),
        };
    }

    /// The fault of an agent that could not be started.
    fn start_failed(&self, e: &std::io::Error) -> Verdict {
        let (ctx, backend) = (self.ctx, self.backend);
        match e.kind() {
            std::io::ErrorKind::NotFound => Verdict::Fault {
                reason: format!(
                    "the {} agent's command '{}' not found: install it or set agent.command \
                     in {}",
                    backend.name(),
                    ctx.agents[&backend].0,
                    crate::paths::CONFIG
                ),
                kind: FaultKind::NeedsPerson,
            },
            _ => Verdict::Fault {
                reason: format!("could not start the agent: {e}"),
                kind: FaultKind::Transient,
            },
        }
    }

    /// What `verdict::decide` needs: what the agent left (kept under refs),
    /// its commits, where the target is, its own verdict; then, when they
    /// count, the decomposition's answer written, a DONE's leftovers
    /// committed, a fix-up's markers read.
    async fn gather(&self, ready: &Ready, ran: &Ran, report: &mut AttemptReport) -> AttemptFacts {
        let (ctx, id, n, summary) = (self.ctx, self.id, self.n, &ran.summary);
        let (id2, wt2, b2) = (self.gid.clone(), self.wt_path.clone(), self.branch.clone());
        let (base2, tip2) = (ready.base.clone(), ready.tip.clone());
        let (commits, moved, kept) = blocking(ctx, move |c| {
            let kept = slot::keep_what_the_agent_left(c, &id2, n, &wt2, &base2);
            let commits = c.git.commits_ahead(&b2, &base2).unwrap_or(0);
            (commits, slot::target_moved_by_agent(c, &b2, &tip2), kept)
        })
        .await
        .unwrap_or((0, None, Vec::new()));
        report.kept = kept;
        let mut facts = AttemptFacts {
            story: self.gid.clone(),
            attempt: n,
            agent: self.backend.name(),
            classified: agent::classify(
                id,
                &ran.exit,
                summary,
                commits,
                ctx.timeout.as_secs(),
                ctx.config.loop_.idle_timeout_secs,
                !ctx.required_validation.is_empty(),
            ),
            commits,
            moved: moved.map(|now| Moved {
                target: ctx.target.clone(),
                from: ready.base.to_string(),
                to: now.to_string(),
            }),
            auth_rejected: summary.auth_failed && !matches!(*self.control.borrow(), Control::Kill),
            decomposing: self.splitting(),
            split: None,
            done: None,
            fixup_merge: None,
        };
        if verdict::wants_split(&facts) {
            // All of the agent's own text, in order (issue 21).
            let (answer, bytes) = (summary.text.clone(), summary.text_bytes);
            let (story2, slot) = (self.story.clone(), self.req.slot);
            let applied = blocking(ctx, move |c| {
                super::split::apply_answer(c, &story2, slot, (&answer, bytes), commits)
            })
            .await;
            facts.split = Some(applied.map(|(verdict, children)| {
                report.children = children;
                verdict
            }));
        }
        if verdict::wants_done_check(&facts) {
            let (slot, base) = (self.req.slot, &ready.base);
            let branch = self.branch.clone();
            let done = slot::commit_done_work(ctx, self.story, (n, slot, branch), base, report);
            facts.done = Some(done.await);
        }
        // Leftovers of a resolved merge that ralph committed count.
        let made = commits + usize::from(report.committed_for_agent.is_some());
        if let Some((_, setup)) = ready.fixup.clone() {
            let b2 = self.branch.clone();
            facts.fixup_merge = blocking(ctx, move |c| fixup::merge_left(c, &b2, &setup, made))
                .await
                .unwrap_or_default();
        }
        facts
    }

    /// `env` with `RALPH_CANDIDATE` for a racing candidate (issue 36).
    fn with_candidate(&self, mut env: Vec<(String, String)>) -> Vec<(String, String)> {
        if let Some(k) = self.req.candidate {
            env.push(("RALPH_CANDIDATE".to_string(), k.to_string()));
        }
        env
    }

    fn splitting(&self) -> bool {
        self.req.kind == AttemptKind::Decompose
    }

    fn wt_path_s(&self) -> String {
        self.wt_path.display().to_string()
    }

    fn spec_s(&self) -> String {
        let spec = self.story.spec_path.as_ref();
        spec.map(|p| p.display().to_string()).unwrap_or_default()
    }
}

/// A failure of ralph's own step.
fn fail(reason: String) -> Verdict {
    Verdict::Failed {
        reason,
        kind: ResultKind::Error,
    }
}

/// The slot could not be made even from scratch: the machine's trouble,
/// not the story's.
fn unprepared(slot: usize, e: impl std::fmt::Display) -> Verdict {
    Verdict::Fault {
        reason: format!("could not prepare the worktree of slot {slot}: {e}"),
        kind: FaultKind::Transient,
    }
}

/// `GIT_CEILING_DIRECTORIES` for an agent: git run in a slot whose `.git`
/// file the agent deleted must fail, not walk up into the main repository
/// (the slots live inside it) and act there. The user's own ceilings stay.
fn ceiling(root: &Path) -> (String, String) {
    let ours = crate::paths::worktrees_dir(root).display().to_string();
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
