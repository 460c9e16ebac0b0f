//! `ralph run`. The startup sequence (load, run lock, process and git
//! recovery, the dirty-checkout check, reconcile) runs synchronously before
//! the tokio runtime exists; the runtime carries only the run itself
//! (`dispatcher`, deciding through the pure `transition`); the end of the
//! run (sweeps, worktree cleanup, the summary) is synchronous again.
//!
//! The run is the coordinator: it hands attempts to the executor the
//! command that assembled it chose (`crate::executor::ExecutorChoice`),
//! and imports none (`crate::exec` holds them).
//!
//! Files: `events` (what the loop receives and does), `model` and
//! `transition` (pure policy), `dispatcher` (the loop), `land` (the merge
//! queue's work), `recover` (startup and shutdown housekeeping),
//! `preflight` (what refuses a run before anything is touched), `context`
//! (what tasks share).

mod candidate;
pub(crate) mod context;
mod dispatcher;
mod dry_run;
pub(crate) mod events;
mod intent;
mod judge;
mod land;
mod landed;
mod live;
mod model;
mod notify;
mod preflight;
mod queue;
mod record;
mod recover;
mod start;
mod stream;
mod tracker;
pub(crate) mod tracker_journal;
mod transition;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::agent::Backend;
use crate::backlog::Source;
use crate::display::{self, Reporter};
use crate::error::{RalphError, EXIT_OK};
use crate::executor::{AttemptEnv, Executor, ExecutorChoice};
use crate::gitops::Git;
use crate::process;
use crate::project::{self, Project};
use crate::report;
use crate::store::{self, TechLog};

pub(crate) use crate::status::story_node;
pub(crate) use land::Watch as LandWatch;
pub(crate) use recover::take_run_lock;
pub(crate) use start::{prs_merged, target_branch, RunOptions};

use start::{check_inputs, preview, start_up, Checked, Started};

/// Runs the backlog with the executor `choice` gives; returns the exit
/// code. In phases, each assuming the one before: the input checked, the
/// start-up (lock, recovery, reconcile), the context and the policy the
/// model is made of, then the loop and the finish.
pub(crate) fn run<C: ExecutorChoice>(root: &Path, opts: RunOptions, choice: &C) -> Result<i32> {
    // Worktree paths, git's paths and the project tag all compare against
    // the canonical root.
    let root = &root.canonicalize()?;
    let checked = check_inputs(root, &opts, choice)?;
    if opts.dry_run {
        return preview(root, &opts, &checked);
    }
    let Started {
        lock,
        log,
        mut state,
        reland,
        runlog,
    } = start_up(root, &opts, &checked)?;
    let (env, ctx) = context(root, &opts, &checked, log, runlog);
    let mut policy = policy(&opts, &checked);
    if let Some(id) = &opts.decompose {
        policy.split_by_hand = Some(split_by_hand(id, &mut state)?);
    }
    let model = model(&opts, &checked, state, policy);
    let reland: Vec<usize> = reland
        .iter()
        .filter_map(|id| checked.project.backlog.index_of(id))
        .collect();
    let live = record_start(&checked, &ctx, &model);
    let started = Instant::now();
    let executor = choice.executor(env, opts.verbose, &claimable(&model))?;
    if checked.project.config.validates_remotely() {
        if let Some(v) = executor.validator() {
            let _ = ctx.validator.set(v);
        }
    }
    let reporter = Reporter::new(opts.verbose, !opts.no_dashboard);
    let d = dispatcher::Dispatcher::new(model, reporter, ctx, executor);
    let code = run_loop(root, &opts, &checked, d, live, reland, started);
    drop(lock);
    code
}

/// What an attempt of this run may start: a crashed run's job of any other
/// story is stopped at once (issue 35).
fn claimable(model: &model::Model) -> std::collections::HashSet<String> {
    use crate::schedule::StoryState;
    (0..model.chosen.len())
        .filter(|&i| model.chosen[i])
        .filter(|&i| {
            !matches!(
                model.sched().nodes[i],
                StoryState::Done | StoryState::Excluded
            )
        })
        .map(|i| model.id(i).to_string())
        .collect()
}

/// What the run's tasks share: the attempts' environment (the executor
/// gets it too) inside the run's context.
fn context(
    root: &Path,
    opts: &RunOptions,
    checked: &Checked,
    log: TechLog,
    runlog: Option<crate::runlog::RunLog>,
) -> (Arc<AttemptEnv>, Arc<context::RunContext>) {
    let config = &checked.project.config;
    let env = Arc::new(AttemptEnv::new(
        root.to_path_buf(),
        config.clone(),
        checked.git.clone(),
        checked.target.clone(),
        Duration::from_secs(opts.timeout.unwrap_or(config.loop_.timeout_secs)),
        log,
        checked.agents.clone(),
        checked.seal.clone(),
    ));
    let ctx = Arc::new(context::RunContext::new(
        env.clone(),
        matches!(checked.project.backlog.source, Source::Prd { .. }),
        checked.pr.clone(),
        runlog,
    ));
    (env, ctx)
}

/// How many attempts the run may start (`None`: no limit): `-n` over
/// `loop.max_iterations` (0 is none), and none at all for `ralph land`,
/// whose run has review off: an agent it started would land work nobody
/// reviewed.
fn attempt_limit(iterations: Option<u64>, max_iterations: u64, land: bool) -> Option<u64> {
    if land {
        return Some(0);
    }
    iterations.or(Some(max_iterations)).filter(|&n| n > 0)
}

/// The run's policy, from the flags over the config.
fn policy(opts: &RunOptions, checked: &Checked) -> model::Policy {
    let (project, backend) = (&checked.project, checked.backend);
    let config = &project.config;
    let queue_shape = transition::queue::shape(config, queue::machine(config));
    model::Policy {
        jobs: jobs_of(opts, config),
        max_retries: config.loop_.max_retries,
        limit: attempt_limit(opts.iterations, config.loop_.max_iterations, opts.land),
        target: checked.target.clone(),
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
            && !project.backlog.source.is_tracker())
        .then_some(config.decomposition.max_depth),
        retry_concurrency: config.parallel.retry_concurrency,
        agent_memory_mb: config.parallel.agent_memory_mb,
        predict_files: config.parallel.predict_files,
        conflicts: config.parallel.conflicts,
        history: {
            let h = crate::forecast::History::load(&project.root, &project.backlog.stories);
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
        // A person or a reviewer looks at one merged tree at a time
        // (`queue::shape`).
        speculate: queue_shape.0,
        landing_mode: model::LandingMode {
            review: config.landing.review && !opts.land,
            pr: checked.pr.is_some(),
        },
        batch: queue_shape.1,
        // Each candidate is an attempt of its own: a slot here, or a job
        // of its own on a cluster (`exec::ray`, by its candidate key).
        best_of: model::BestOf {
            cli: opts.best_of,
            config: config.attempts.best_of,
            candidates: config.attempts.candidates.clone(),
            pick: config.attempts.pick,
            judge: config.attempts.judge.clone(),
            checks: config
                .validation
                .commands
                .iter()
                .filter(|v| v.required)
                .map(|v| v.name.clone())
                .collect(),
        },
    }
}

/// `ralph decompose ID`: the story set to be split now, as it was before.
fn split_by_hand(id: &str, state: &mut crate::state::State) -> Result<model::SplitByHand> {
    if state.status(id) == crate::state::Status::Done {
        return Err(RalphError::usage(format!("story {id} is done already"))
            .with_hint("only a story that is not done can be split")
            .into());
    }
    let split = model::SplitByHand {
        id: id.to_string(),
        status: state.status(id),
        note: state.note(id).cloned(),
    };
    state.begin_decomposition(
        id,
        "The user asked for this split (`ralph decompose`).".into(),
    );
    Ok(split)
}

/// The model the loop runs on: the stories as the run sees them, the
/// state, the policy, what `-s`/`-r`/`decompose` select.
fn model(
    opts: &RunOptions,
    checked: &Checked,
    state: crate::state::State,
    policy: model::Policy,
) -> model::Model {
    let (project, git) = (&checked.project, &checked.git);
    let backlog = &project.backlog;
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
    let prefix = git.rel_path(&project.root).filter(|p| !p.is_empty());
    let mut model = model::Model::new(
        from_repo_root(&backlog.stories, prefix.as_deref()),
        &project.dag,
        state,
        policy,
        only,
        first,
        now(),
    );
    let config = &project.config;
    model.waits_for_review =
        config.landing.review && !opts.land && !opts.exit_on_review && opts.decompose.is_none();
    model
}

/// The run's start on record, and on the web view's hub (`--serve`),
/// made here from the model.
fn record_start(
    checked: &Checked,
    ctx: &context::RunContext,
    model: &model::Model,
) -> Option<Arc<crate::serve::Live>> {
    let project = &checked.project;
    let live = checked
        .serve_at
        .map(|_| live::hub(&project.root, &project.config, model, &project.dag));
    let target = &checked.target;
    let run_start = crate::runlog::Ev::RunStart {
        run: ctx.run_id().to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        args: std::env::args().skip(1).collect(),
        jobs: model.policy.jobs,
        agent: checked.backend.name().to_string(),
        target: target.clone(),
        commit: checked.git.branch_tip(target).ok().flatten(),
        selected: model.selected(),
        stories: project.backlog.stories.len(),
        pid: std::process::id(),
        resumes: ctx.runlog.as_ref().and_then(|l| l.resumes.clone()),
    };
    if let (Some(live), Some(log)) = (&live, &ctx.runlog) {
        // Every record, the merge queue's and the executors' too.
        let live = live.clone();
        log.observe(move |r| live.record(r));
    }
    ctx.record(run_start);
    live
}

/// The loop: the dispatcher with its steering socket, tracker and web
/// view on the run's runtime, again for each backlog a decomposition
/// changed; then the executor's end, the finish and the web view's close.
fn run_loop<E: Executor>(
    root: &Path,
    opts: &RunOptions,
    checked: &Checked,
    mut d: dispatcher::Dispatcher<E>,
    live: Option<Arc<crate::serve::Live>>,
    reland: Vec<usize>,
    started: Instant,
) -> Result<i32> {
    let end_ctx = d.ctx().clone();
    let log = end_ctx.log.clone();
    let webhooks = webhooks(&end_ctx);
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
    let config = &checked.project.config;
    d.tracker = crate::backlog::tracker::open(root, config).map(|t| {
        let mut sync = tracker::TrackerSync::new(
            t,
            config.backlog.poll_every(),
            checked.target.clone(),
            &d.model,
            root,
            wake,
            &|l| log.line(l),
        );
        if checked.tracker_reading_on {
            sync.poll_soon();
        }
        sync
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut server = None;
    if let (Some(l), Some(addr)) = (live, checked.serve_at) {
        server = live::serve(&rt, &l, addr, &log);
        d.live = server.is_some().then_some(l);
    }
    let mut looped = rt.block_on(d.run(reland));
    // A decomposition landed (its sub-stories are in the backlog on disk)
    // or the tracker has new work: the same run goes on over the backlog
    // as it is now.
    // (`ralph decompose ID` stops once its split landed.)
    while looped.is_ok() && d.model.reload_pending && opts.decompose.is_none() {
        looped = reload(root, &checked.git, &mut d, &log);
        if looped.is_ok() {
            looped = rt.block_on(d.run(Vec::new()));
        }
    }
    rt.block_on(d.executor.end_of_run());
    drop(steer_socket);
    let (git, target) = (&checked.git, &checked.target);
    let code = finish(
        root, git, target, &log, d.model, d.reporter, started, looped, &end_ctx,
    );
    if let Some(w) = webhooks {
        w.finish(WEBHOOKS_AT_END);
    }
    // The web view outlives the summary, so its pages see how it ended.
    if let Some(server) = server {
        rt.block_on(server.close(code.as_ref().ok().copied()));
    }
    // Attempts and landings have answered; what is left in the runtime (a
    // process reaper blocked on a pipe, say) must not hold the exit.
    rt.shutdown_timeout(Duration::from_secs(1));
    code
}

/// The backlog as it is on disk now, taken into the model (and the web
/// view's graph) after a decomposition landed.
fn reload<E: Executor>(
    root: &Path,
    git: &Git,
    d: &mut dispatcher::Dispatcher<E>,
    log: &TechLog,
) -> Result<()> {
    let now_on_disk = project::load(root).map_err(|problems| {
        let shown: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        anyhow::anyhow!(
            "the backlog does not load after a decomposition landed or the tracker changed: {}",
            shown.join("; ")
        )
    })?;
    log.line("reloading the backlog: a decomposition landed or the tracker has new work");
    let prefix = git.rel_path(root).filter(|p| !p.is_empty());
    let stories = from_repo_root(&now_on_disk.backlog.stories, prefix.as_deref());
    d.model.reload(stories, &now_on_disk.dag, now());
    if let Some(live) = &d.live {
        let (stories, edges) = live::graph(&d.model, &now_on_disk.dag);
        live.set_graph(stories, edges);
    }
    Ok(())
}

/// The clock as the model reads it.
fn now() -> events::Now {
    events::Now {
        mono: Instant::now(),
        unix: crate::timefmt::now_secs(),
    }
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

/// The end of a run, after the loop: sweep, tidy, save, summarise.
#[allow(clippy::too_many_arguments)]
fn finish(
    root: &Path,
    git: &Git,
    target: &str,
    log: &TechLog,
    model: model::Model,
    mut reporter: Reporter,
    started: Instant,
    looped: Result<()>,
    ctx: &context::RunContext,
) -> Result<i32> {
    // Each attempt was swept as it ended; this catches a process that was
    // caught mid-exec then and only got its token afterwards.
    let late = process::kill_by_token_prefix(&ctx.tag);
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

/// How long the run's end waits for its webhooks' last posts (issue 37: a
/// dead or silent receiver may cost the run under 2 s).
const WEBHOOKS_AT_END: std::time::Duration = std::time::Duration::from_millis(1500);

/// The run's webhooks (`notify.webhooks`), shown every record as it is
/// written; `None` without any (or without the run's records).
fn webhooks(ctx: &context::RunContext) -> Option<Arc<crate::webhook::Webhooks>> {
    let runlog = ctx.runlog.as_ref()?;
    if ctx.config.notify.webhooks.is_empty() {
        return None;
    }
    let log = ctx.log.clone();
    let w = Arc::new(crate::webhook::Webhooks::start(
        &ctx.config.notify.webhooks,
        &runlog.id,
        move |line| log.line(&line),
    ));
    let seen = w.clone();
    runlog.observe(move |r| seen.see(r));
    Some(w)
}

#[cfg(test)]
mod tests {
    use super::attempt_limit;

    #[test]
    fn land_starts_no_attempt_whatever_the_limits_say() {
        // (-n, loop.max_iterations, land) → the limit.
        let table = [
            (None, 0, false, None),
            (None, 5, false, Some(5)),
            (Some(2), 5, false, Some(2)),
            (Some(0), 5, false, None),
            (None, 0, true, Some(0)),
            (None, 5, true, Some(0)),
            (Some(3), 5, true, Some(0)),
        ];
        for (n, max, land, want) in table {
            assert_eq!(attempt_limit(n, max, land), want, "{n:?} {max} {land}");
        }
    }
}
