//! `ralph run`. The startup sequence (load, run lock, process and git
//! recovery, the dirty-checkout check, reconcile) runs synchronously before
//! the tokio runtime exists; the runtime carries only the run itself
//! (`dispatcher`, deciding through the pure `transition`); the end of the
//! run (sweeps, worktree cleanup, the summary) is synchronous again.
//!
//! Files: `events` (what the loop receives and does), `model` and
//! `transition` (pure policy), `dispatcher` (the loop), `attempt` (one
//! attempt on this machine, in steps: `slot`, `fixup`, `postmortem`, its
//! verdict decided by the pure `verdict`), `land` (the merge queue's work),
//! `recover` (startup and shutdown housekeeping), `preflight` (what
//! refuses a run before anything is touched), `context` (what tasks
//! share).

pub(crate) mod attempt;
mod candidate;
pub(crate) mod context;
mod dispatcher;
mod dry_run;
pub(crate) mod events;
pub(crate) mod executor;
mod fixup;
mod land;
mod landed;
mod live;
mod model;
mod notify;
mod postmortem;
mod preflight;
mod queue;
mod record;
mod recover;
pub(crate) mod seal;
mod slot;
mod split;
mod tracker;
mod transition;
mod verdict;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;

use std::collections::HashMap;

use crate::agent::Backend;
use crate::backlog::Source;
use crate::display::{self, Reporter};
use crate::error::{RalphError, EXIT_OK};
use crate::exec::{resolve_agent, resolve_agents};
use crate::gitops::Git;
use crate::paths;
use crate::process;
use crate::project::{self, Project};
use crate::report;
use crate::store::{self, TechLog};

pub(crate) use crate::status::story_node;
pub(crate) use land::Watch as LandWatch;
pub(crate) use recover::take_run_lock;

/// `ralph run` options after merging flags with the config.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunOptions {
    pub(crate) parallel: bool,
    pub(crate) jobs: Option<usize>,
    pub(crate) iterations: Option<u64>,
    pub(crate) story: Option<String>,
    pub(crate) resume: Option<String>,
    pub(crate) timeout: Option<u64>,
    pub(crate) dry_run: bool,
    pub(crate) verbose: bool,
    pub(crate) log: Option<PathBuf>,
    /// `--agent NAME`: the backend for stories that do not name their own.
    pub(crate) agent: Option<String>,
    /// `--max-cost USD`: the run's budget (over `budget.max_cost_usd`).
    pub(crate) max_cost: Option<f64>,
    /// `--model NAME`: every attempt of the run on it (the ladder off).
    pub(crate) model: Option<String>,
    /// `--no-dashboard`: plain lines even on a terminal.
    pub(crate) no_dashboard: bool,
    /// `--serve [ADDR]`: the live web view (`Some(None)`: the flag alone).
    pub(crate) serve: Option<Option<String>>,
    /// `ralph decompose ID`: split this story now, land the split, stop.
    pub(crate) decompose: Option<String>,
    /// `ralph land`: land the stories approved from review; start nothing.
    pub(crate) land: bool,
    /// `--exit-on-review`: in `landing.mode: review`, end the run once only
    /// reviews are left instead of waiting for `ralph land`.
    pub(crate) exit_on_review: bool,
    /// `--hup stop`: a hang-up stops the run; by default it goes on with
    /// its output to the log only.
    pub(crate) hup_stops: bool,
    /// `--sandbox MODE`: `sandbox.mode` for this run only.
    pub(crate) sandbox: Option<crate::sandbox::Mode>,
}

/// How this run seals its children, probed once (`bwrap` mode without a
/// working bubblewrap is a usage error), and the backends it may run.
fn run_seal(
    project: &Project,
    agents: &HashMap<Backend, (String, Vec<String>)>,
) -> Result<(seal::RunSeal, Vec<Backend>), RalphError> {
    let mut backends: Vec<Backend> = agents.keys().copied().collect();
    backends.sort_by_key(|b| b.name());
    let s = seal::RunSeal::new(&project.config, &backends).map_err(|e| {
        RalphError::usage(e).with_hint(format!(
            "{}, or set sandbox.mode to \"auto\" (the allowlist alone when bubblewrap is \
             missing) in {}",
            crate::sandbox::INSTALL_HINT,
            crate::paths::CONFIG
        ))
    })?;
    Ok((s, backends))
}

/// `ralph validate`'s line: the sandbox mode a run would use, and why;
/// an agent that cannot start under it is the error a run would stop with.
pub(crate) fn sandbox_line(
    project: &Project,
    agents: &HashMap<Backend, (String, Vec<String>)>,
) -> Result<String, RalphError> {
    let seal = run_seal(project, agents)?.0;
    if matches!(project.config.executor, crate::config::Executor::Local) {
        let git = Git::open(&project.root).map_err(|e| RalphError::usage(e.to_string()))?;
        crate::exec::agents_can_start(project, &git, agents, &seal)?;
    }
    Ok(seal.decision.why)
}

/// The branch stories land on: prd.json's `branchName`, else the main
/// checkout's branch.
pub(crate) fn target_branch(project: &Project, git: &Git) -> Result<String> {
    if let Source::Prd { branch: Some(b) } = &project.backlog.source {
        return Ok(b.clone());
    }
    let head = git
        .head_branch()
        .map_err(|e| RalphError::usage(e.to_string()))?;
    head.ok_or_else(|| {
        RalphError::usage(
            "the main checkout has no branch checked out (detached HEAD or no commits)",
        )
        .with_hint("check out the branch stories should land on, with at least one commit")
        .into()
    })
}

/// Runs the backlog; returns the exit code.
pub(crate) fn run(root: &Path, opts: RunOptions) -> Result<i32> {
    // Worktree paths, git's paths and the project tag all compare against
    // the canonical root.
    let root = &root.canonicalize()?;
    if let Some(why) = project::refresh_tracker(root).map_err(RalphError::BadInput)? {
        crate::display::err(&format!(
            "warning: the run starts from the tracker's last snapshot: {why}"
        ));
    }
    let mut project = project::load(root).map_err(RalphError::BadInput)?;
    if let Some(mode) = opts.sandbox {
        project.config.sandbox.mode = mode;
    }
    for w in project.config.warning_lines() {
        if !crate::ui::get().quiet {
            eprintln!("{}", crate::ui::paint_tag(&w, crate::ui::stderr_colors()));
        }
    }
    let backlog = &project.backlog;
    if let Some((what, hint)) = backlog.emptiness() {
        return Err(RalphError::usage(what).with_hint(hint).into());
    }
    for (flag, id) in [
        ("-s", &opts.story),
        ("-r", &opts.resume),
        ("decompose", &opts.decompose),
    ] {
        if let Some(id) = id {
            if backlog.index_of(id).is_none() {
                return Err(RalphError::usage(format!(
                    "{flag} {id}: no such story in the backlog"
                ))
                .with_hint("`ralph stories` lists them")
                .into());
            }
        }
    }
    if opts.timeout == Some(0) {
        return Err(RalphError::usage("-t must be a positive number of seconds").into());
    }
    let git = Git::open(root).map_err(|e| RalphError::usage(e.to_string()))?;
    let target = target_branch(&project, &git)?;
    if let Some(wt) = git
        .branch_checked_out_elsewhere(&target, &paths::worktrees_dir(root))
        .map_err(|e| RalphError::usage(e.to_string()))?
    {
        let wt = wt.display();
        return Err(RalphError::usage(format!(
            "target branch {target} is checked out in the worktree {wt}: landing would move it \
             under that worktree"
        ))
        .with_hint(format!(
            "switch that worktree to another branch (`git -C {wt} switch --detach`) or remove \
             it (`git worktree remove {wt}`), then run again"
        ))
        .into());
    }
    let backend = match &opts.agent {
        None => project.config.agent.name,
        Some(name) => Backend::parse(name).ok_or_else(|| {
            RalphError::usage(format!("--agent {name}: not an agent ralph knows"))
                .with_hint(format!("one of: {}", Backend::names()))
        })?,
    };
    if let Some(m) = &opts.model {
        if backend.model_flag().is_none() || m.trim().is_empty() || m.starts_with('-') {
            return Err(RalphError::usage(format!(
                "--model {m}: the {} agent has no choice of model on its command line",
                backend.name()
            ))
            .with_hint("leave --model out, or choose another agent with --agent")
            .into());
        }
    }
    // On a cluster the agent is the nodes' to have (each worker checks).
    let agents = match project.config.executor {
        crate::config::Executor::Local => resolve_agents(&project, backend)?,
        crate::config::Executor::Ray(_) => crate::exec::agents_on_nodes(&project, backend),
    };
    let (run_seal, backends) = run_seal(&project, &agents)?;
    // Before any attempt: an agent that cannot start is the user's to fix,
    // never a story's failure (issue 32). A cluster's nodes check their own.
    if matches!(project.config.executor, crate::config::Executor::Local) {
        crate::exec::agents_can_start(&project, &git, &agents, &run_seal)?;
    }
    // The web view's address is checked with the rest of the input.
    let serve_at = match (opts.land, &opts.decompose) {
        (false, None) => {
            crate::serve::address(opts.serve.as_ref().map(|a| a.as_deref()), &project.config)?
        }
        _ => None,
    };
    // Pull-request landing needs the GitHub CLI: said now, not after the work.
    let pr = match &project.config.landing.pr_remote {
        Some(remote) => Some(context::PrLanding {
            remote: remote.clone(),
            gh: resolve_agent(root, "gh").ok_or_else(|| {
                RalphError::usage(
                    "landing.mode \"pr\" opens pull requests with the GitHub CLI, and `gh` is not \
                     on PATH",
                )
                .with_hint(format!(
                    "install it (https://cli.github.com) and run `gh auth login`, or set \
                     landing.mode to \"merge\" or \"review\" in {}",
                    paths::CONFIG
                ))
            })?,
        }),
        None => None,
    };
    if opts.dry_run {
        // A dry run refuses what the run would refuse, but recovers nothing:
        // a landing a killed run cut short may show as a spec's edit.
        // An uncommitted backlog is said, not refused: the plan is what one
        // wants to see before committing it (issue 32).
        if !paths::landing_intent_path(root).exists() {
            if let Err(e) = preflight::refuse_uncommitted_backlog(&project, &git, &target) {
                let hint = e
                    .downcast_ref::<RalphError>()
                    .and_then(|r| r.hint())
                    .map(|h| format!("\nhint: {h}"))
                    .unwrap_or_default();
                eprintln!(
                    "warning: {e}{hint}\n(`ralph run` refuses to start until it is committed; \
                     this dry run only previews the plan)"
                );
            }
        }
        return dry_run::dry_run(&project, &opts, &run_seal, &backends);
    }
    if let Some(w) = crate::sandbox::unconfined_warning(&run_seal.decision) {
        if !crate::ui::get().quiet {
            eprintln!("{}", crate::ui::paint_tag(&w, crate::ui::stderr_colors()));
        }
    }

    preflight::refuse_a_setup_that_cannot_sign(&git)?;

    let lock = take_run_lock(root, "before running")?;
    let log = TechLog::new(Some(
        opts.log.clone().unwrap_or_else(|| paths::tech_log(root)),
    ));
    let tag = project::project_tag(root);
    // Logs made by an older ralph were world-readable; they hold agent output.
    {
        use std::os::unix::fs::PermissionsExt;
        let logs = crate::paths::logs_dir(root);
        if logs.is_dir() {
            let _ = std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(0o700));
        }
    }
    if git.branch_tip(&target)?.is_none() {
        // prd.json names a branch that does not exist yet: start it at HEAD.
        let head = git.head_commit_of_worktree(&git.workdir).ok().flatten();
        match head {
            Some(h) if matches!(backlog.source, Source::Prd { branch: Some(_) }) => {
                git.ensure_branch(&target, &h)?;
                log.line(&format!("created target branch {target} at {h}"));
            }
            _ => {
                return Err(
                    RalphError::usage(format!("target branch {target} does not exist"))
                        .with_hint("create it, or fix branchName in prd.json")
                        .into(),
                )
            }
        }
    }
    // Processes, lock files and a half-done landing of a killed run are
    // dealt with before the checkout is judged: they are ours, not the user's.
    process::set_shell_token_prefix(&tag);
    recover::recover_processes_and_git(root, &git, &target, &tag, &log)?;
    // Commits a killed run's sandboxed agents made on their branch's
    // stand-in go onto the real branch before anything judges the branch.
    for (slot, r) in git.sandbox_refs_collect_all() {
        log.line(&format!(
            "sandbox refs of {slot} left by a killed run: {r:?}"
        ));
    }
    preflight::refuse_uncommitted_backlog(&project, &git, &target)?;
    preflight::refuse_dirty_checkout(root, &git)?;

    let mut state = store::load_state(root).map_err(|p| RalphError::BadInput(vec![p]))?;
    for line in recover::keep_unknown_story_branches(&project, &git, &target, &state, &log)? {
        display::err(&line);
    }
    if let Some(pr) = &pr {
        prs_merged(&project, &git, &target, &pr.remote, &mut state, &log)?;
    }
    let reland = recover::reconcile(&project, &git, &target, &mut state, &log)?;
    store::save_state(root, &state)?;
    // After the lock: the previous run's file is closed here if it was killed.
    let runlog = crate::runlog::RunLog::create(
        root,
        crate::timefmt::now_secs(),
        project.config.runs.max_bytes,
    )
    .inspect_err(|e| log.line(&format!("cannot record this run in {}/: {e}", paths::RUNS)))
    .ok();

    // `--parallel` also comes from `parallel.enabled`; `-j` defaults to
    // `parallel.max_concurrent` when the user set it, else 4 (SPEC 2).
    let config = &project.config;
    let jobs = jobs_of(&opts, config);
    let ctx = Arc::new(context::RunContext {
        root: root.to_path_buf(),
        config: config.clone(),
        git: git.clone(),
        target: target.clone(),
        timeout: Duration::from_secs(opts.timeout.unwrap_or(config.loop_.timeout_secs)),
        tag: tag.clone(),
        required_validation: config
            .validation
            .commands
            .iter()
            .filter(|v| v.required)
            .cloned()
            .collect(),
        log: log.clone(),
        agents,
        prd: matches!(backlog.source, Source::Prd { .. }),
        review: config.landing.review && !opts.land,
        pr: pr.clone(),
        runlog,
        seal: run_seal,
        landed: Default::default(),
        reverted: Default::default(),
    });
    let mut policy = model::Policy {
        jobs,
        max_retries: config.loop_.max_retries,
        limit: opts
            .iterations
            .or(Some(config.loop_.max_iterations))
            .filter(|&n| n > 0)
            // `ralph land` starts no agent: it only lands.
            .or(opts.land.then_some(0)),
        target: target.clone(),
        budget: model::Budget {
            run_usd: opts.max_cost.or(config.budget.run_usd),
            total_usd: config.budget.total_usd,
            run_tokens: config.budget.tokens,
            story_usd: config.budget.story_usd,
        },
        max_wait: Duration::from_secs(config.limits.max_wait_hours * 3600),
        agents: std::iter::once(backend)
            .chain(
                config
                    .agent
                    .fallback
                    .iter()
                    .copied()
                    .filter(|b| *b != backend),
            )
            .collect(),
        stagger: Duration::from_secs(config.parallel.stagger_secs),
        resume_session: config.retry.resume_session,
        // One story asked for by hand is not split behind the user's back.
        // A tracker's stories are split in the tracker (sub-issues).
        decompose_depth: (config.decomposition.enabled
            && opts.story.is_none()
            && !matches!(backlog.source, Source::GitHub { .. }))
        .then_some(config.decomposition.max_depth),
        retry_concurrency: config.parallel.retry_concurrency,
        agent_memory_mb: config.parallel.agent_memory_mb,
        predict_files: config.parallel.predict_files,
        conflicts: config.parallel.conflicts,
        history: {
            let h = crate::forecast::History::load(root, &project.backlog.stories);
            (!h.is_empty()).then(|| Arc::new(h))
        },
        split_by_hand: None,
        models: model::Models {
            ladder: config.agent.escalation.clone(),
            // `agent.model` names a model of `agent.name`'s backend.
            base: config
                .agent
                .model
                .clone()
                .filter(|_| backend == config.agent.name),
            pinned: opts.model.clone(),
        },
        tests_gate: config.gates.tests,
        review: config.gates.review.clone(),
        // A person or a reviewer looks at one merged tree at a time.
        speculate: if config.landing.review
            || config.landing.pr_remote.is_some()
            || config.gates.review.is_some()
        {
            1
        } else {
            config
                .landing
                .speculate
                .min(match config.landing.max_validations {
                    0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
                    n => n,
                })
        },
    };
    if let Some(id) = &opts.decompose {
        if state.status(id) == crate::state::Status::Done {
            return Err(RalphError::usage(format!("story {id} is done already"))
                .with_hint("only a story that is not done can be split")
                .into());
        }
        policy.split_by_hand = Some(model::SplitByHand {
            id: id.clone(),
            status: state.status(id),
            note: state.note(id).cloned(),
        });
        state.begin_decomposition(
            id,
            "The user asked for this split (`ralph decompose`).".into(),
        );
    }
    let only = opts
        .story
        .as_ref()
        .or(opts.decompose.as_ref())
        .and_then(|s| backlog.index_of(s));
    let first = opts
        .resume
        .as_ref()
        .and_then(|r| backlog.index_of(r))
        .unwrap_or(0);
    let prefix = git.rel_path(root).filter(|p| !p.is_empty());
    let mut model = model::Model::new(
        from_repo_root(&backlog.stories, prefix.as_deref()),
        &project.dag,
        state,
        policy,
        only,
        first,
        events::Now {
            mono: Instant::now(),
            unix: crate::timefmt::now_secs(),
        },
    );
    model.waits_for_review =
        config.landing.review && !opts.land && !opts.exit_on_review && opts.decompose.is_none();
    let reland: Vec<usize> = reland
        .iter()
        .filter_map(|id| backlog.index_of(id))
        .collect();
    let live = serve_at.map(|_| live::hub(root, &project.config, &model, &project.dag));
    let run_start = crate::runlog::Ev::RunStart {
        run: ctx.run_id().to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        args: std::env::args().skip(1).collect(),
        jobs,
        agent: backend.name().to_string(),
        target: target.clone(),
        commit: git.branch_tip(&target).ok().flatten(),
        selected: model.selected(),
        stories: backlog.stories.len(),
        pid: std::process::id(),
        resumes: ctx.runlog.as_ref().and_then(|l| l.resumes.clone()),
    };
    if let Some(live) = &live {
        live.record(&crate::runlog::Record {
            t: crate::runlog::now_unix_f64(),
            ev: run_start.clone(),
        });
    }
    ctx.record(run_start);
    let started = Instant::now();
    let executor = crate::exec::choose(ctx.clone(), opts.verbose)?;
    let end_ctx = ctx.clone();
    let mut d = dispatcher::Dispatcher::new(
        model,
        Reporter::new(opts.verbose, !opts.no_dashboard),
        ctx,
        executor,
    );
    // `ralph pause`, `hold ID`, ... reach the run here; without the socket
    // the run goes on unsteerable (a path too long for a socket, say).
    let steer_socket = match crate::steer::server::SteerSocket::bind(root) {
        Ok(s) => {
            if let Ok(l) = s.listener.try_clone() {
                d.steer_on(l);
            }
            Some(s)
        }
        Err(e) => {
            log.line(&format!("no steering socket: {e:#}"));
            d.reporter.line(&format!(
                "warning: `ralph pause`, `hold` and the other steering commands cannot reach \
                 this run: {e:#}"
            ));
            None
        }
    };
    d.hup_stops = opts.hup_stops;
    let wake = d.waker();
    d.tracker = crate::backlog::tracker::open(root, config).map(|t| {
        tracker::TrackerSync::new(
            t,
            config.backlog.poll_every(),
            target.clone(),
            &d.model,
            wake,
        )
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut server = None;
    if let (Some(l), Some(addr)) = (live, serve_at) {
        server = live::serve(&rt, &l, addr, &log);
        d.live = server.is_some().then_some(l);
    }
    let mut looped = rt.block_on(d.run(reland));
    // A decomposition landed (its sub-stories are in the backlog on disk)
    // or the tracker has new work: the same run goes on over the backlog
    // as it is now.
    // (`ralph decompose ID` stops once its split landed.)
    while looped.is_ok() && d.model.reload_pending && opts.decompose.is_none() {
        match project::load(root) {
            Ok(now_on_disk) => {
                log.line(
                    "reloading the backlog: a decomposition landed or the tracker has new work",
                );
                let now = events::Now {
                    mono: Instant::now(),
                    unix: crate::timefmt::now_secs(),
                };
                let stories = from_repo_root(&now_on_disk.backlog.stories, prefix.as_deref());
                d.model.reload(stories, &now_on_disk.dag, now);
                if let Some(live) = &d.live {
                    let (stories, edges) = live::graph(&d.model, &now_on_disk.dag);
                    live.set_graph(stories, edges);
                }
                looped = rt.block_on(d.run(Vec::new()));
            }
            Err(problems) => {
                let shown: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
                looped = Err(anyhow::anyhow!(
                    "the backlog does not load after a decomposition landed or the tracker changed: {}",
                    shown.join("; ")
                ));
            }
        }
    }
    rt.block_on(d.executor.end_of_run());
    drop(steer_socket);
    let code = finish(
        root, &git, &target, &tag, &log, d.model, d.reporter, started, looped, &end_ctx,
    );
    // The web view outlives the summary, so its pages see how it ended.
    if let Some(server) = server {
        rt.block_on(server.close(code.as_ref().ok().copied()));
    }
    // Attempts and landings have answered; what is left in the runtime (a
    // process reaper blocked on a pipe, say) must not hold the exit.
    rt.shutdown_timeout(Duration::from_secs(1));
    drop(lock);
    code
}

/// The stories as the run sees them: specs name files from the project
/// root, git from the repository's (`prefix`), which differ when the
/// project is a subdirectory. At the start, and again for the backlog a
/// decomposition changed.
fn from_repo_root(
    stories: &[crate::backlog::Story],
    prefix: Option<&str>,
) -> Vec<crate::backlog::Story> {
    let mut stories = stories.to_vec();
    if let Some(prefix) = prefix {
        for s in &mut stories {
            for f in s.files.iter_mut().chain(s.named.iter_mut()) {
                *f = format!("{prefix}/{f}");
            }
        }
    }
    stories
}

/// `landing.mode: pr`: a story whose pull request was merged (its branch's
/// commits are on the remote's target after a fetch) is done.
pub(crate) fn prs_merged(
    project: &Project,
    git: &Git,
    target: &str,
    remote: &str,
    state: &mut crate::state::State,
    log: &TechLog,
) -> Result<()> {
    let open: Vec<String> = project
        .backlog
        .stories
        .iter()
        .filter(|s| state.status(&s.id) == crate::state::Status::InPr)
        .map(|s| s.id.clone())
        .collect();
    if open.is_empty() {
        return Ok(());
    }
    let q = crate::prompt::shell_quote;
    let cmd = format!("git fetch --quiet {} {}", q(remote), q(target));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let fetched = rt.block_on(process::run_shell(
        &cmd,
        project.root.clone(),
        Vec::new(),
        Duration::from_secs(300),
    ))?;
    if !fetched.success {
        log.line(&format!(
            "pull requests: `{cmd}` failed; their state is checked next run: {}",
            fetched.tail.trim()
        ));
        return Ok(());
    }
    let remote_ref = format!("refs/remotes/{remote}/{target}");
    for id in open {
        let branch = project::story_branch(&id);
        if git.ref_contains_branch(&remote_ref, &branch)? {
            log.line(&format!(
                "pull request of story {id} is merged ({branch} is on {remote_ref}); done"
            ));
            state.mark_done(&id, None);
            if let Some(s) = project.backlog.stories.iter().find(|s| s.id == id) {
                let line = report::progress_done(&id, &s.title, crate::timefmt::now_secs(), false);
                let _ = store::append_progress(&project.root, &line);
            }
        }
    }
    Ok(())
}

/// The end of a run, after the loop: sweep, tidy, save, summarise.
#[allow(clippy::too_many_arguments)]
fn finish(
    root: &Path,
    git: &Git,
    target: &str,
    tag: &str,
    log: &TechLog,
    model: model::Model,
    mut reporter: Reporter,
    started: Instant,
    looped: Result<()>,
    ctx: &context::RunContext,
) -> Result<i32> {
    // Each attempt was swept as it ended; this catches a process that was
    // caught mid-exec then and only got its token afterwards.
    let late = process::kill_by_token_prefix(tag);
    if late > 0 {
        log.line(&format!(
            "run end: stopped {late} process(es) that outlived their attempt"
        ));
    }
    let in_review: Vec<String> = model
        .state
        .stories
        .iter()
        .filter(|(_, r)| r.status == crate::state::Status::Review)
        .map(|(id, _)| id.clone())
        .collect();
    recover::cleanup_worktrees(root, git, target, &in_review);
    // A sweep may have killed a git an agent started mid-write (its
    // automatic maintenance, say): leave no stale lock behind.
    recover::remove_stale_git_locks(git, log);
    land::after_run(ctx);
    reporter.finish();
    let mut model = model;
    // Only a run in progress has a job count to show.
    model.state.jobs = None;
    let saved = store::save_state(root, &model.state);
    let (summary, error, code) = transition::finish(&model, started.elapsed().as_secs_f64());
    let end = |code: i32| crate::runlog::Ev::RunEnd {
        done: summary.done,
        total: summary.total,
        failed: summary.failed.clone(),
        blocked: summary.blocked.clone(),
        pending: summary.pending,
        exit_code: code,
        elapsed_secs: summary.elapsed_secs,
        tokens: summary.run_tokens,
        cost_usd: summary.run_cost_usd,
    };
    if looped.is_err() {
        ctx.record(end(crate::error::EXIT_INTERNAL));
    }
    looped?;
    display::out(&display::for_stdout(&report::render_summary(&summary)));
    log.line(&format!(
        "run end: {} done, {} failed, {} blocked",
        summary.done,
        summary.failed.len(),
        summary.blocked.len()
    ));
    ctx.record(end(code));
    if let Some(l) = &ctx.runlog {
        l.sync();
    }
    saved?;
    for line in landed::reverted_warnings(ctx) {
        display::err(&line);
    }
    if let Some(e) = error {
        display::err(&format!("error: {e}"));
    }
    on_complete(ctx, &model, code, summary.elapsed_secs);
    Ok(code)
}

/// `hooks.on_complete`, once the run's end is on record and on screen.
fn on_complete(ctx: &context::RunContext, model: &model::Model, code: i32, elapsed: f64) {
    let cmd = &ctx.config.hooks.on_complete;
    if cmd.trim().is_empty() {
        return;
    }
    let figures = record::Figures::of(model);
    let env = notify::complete_env(&ctx.root, &figures, ctx.run_id(), code, elapsed);
    let out = crate::report_html::default_path(&ctx.root);
    let run = Some(ctx.run_id()).filter(|id| !id.is_empty());
    if let Err(e) = crate::report_html::write(&ctx.root, run, &out) {
        ctx.log
            .line(&format!("on_complete: cannot write the report: {e:#}"));
    }
    // The run's runtime is gone; a small one runs the hook.
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => {
            rt.block_on(context::run_hook(
                ctx,
                "on_complete",
                cmd,
                ctx.root.clone(),
                env,
                context::HOOK_TIMEOUT,
            ));
        }
        Err(e) => ctx.log.line(&format!("on_complete: {e}")),
    }
}

/// The run's job count: `--parallel` also comes from `parallel.enabled`;
/// `-j` defaults to `parallel.max_concurrent` when the user set it, else 4
/// (SPEC 2).
fn jobs_of(opts: &RunOptions, config: &crate::config::Config) -> usize {
    let parallel = opts.parallel || config.parallel.enabled || opts.jobs.is_some_and(|j| j > 1);
    if parallel {
        opts.jobs
            .or(config.parallel.max_concurrent)
            .unwrap_or(4)
            .max(1)
    } else {
        1
    }
}
