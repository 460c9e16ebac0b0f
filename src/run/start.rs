//! The run's first phases, before anything runs: its input checked
//! (nothing touched yet: exit 2 refuses it) and its start-up (the lock,
//! what a killed run left recovered, the checkout checked, the state
//! reconciled with git, the run's records).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

use crate::agent::Backend;
use crate::backlog::Source;
use crate::display;
use crate::error::RalphError;
use crate::executor::{Agents, ExecutorChoice, RunSeal};
use crate::gitops::Git;
use crate::paths;
use crate::process;
use crate::project::{self, Project};
use crate::report;
use crate::store::{self, TechLog};

use super::context::PrLanding;
use super::recover::{self, take_run_lock};
use super::{dry_run, preflight};

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
    /// `--best-of N`: candidates racing per attempt (over the stories'
    /// `best_of:` and `attempts.best_of`; issue 36).
    pub(crate) best_of: Option<u32>,
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

/// What the input checks found: everything the run starts from, checked
/// before anything is touched (exit 2).
pub(super) struct Checked {
    pub(super) project: Project,
    pub(super) git: Git,
    pub(super) target: String,
    /// The run's agent: `--agent`, else `agent.name`.
    pub(super) backend: Backend,
    pub(super) agents: Agents,
    pub(super) seal: RunSeal,
    /// `agents`' backends, by name.
    pub(super) backends: Vec<Backend>,
    /// Where the web view is served (`--serve`, `serve.addr`).
    pub(super) serve_at: Option<std::net::SocketAddr>,
    pub(super) pr: Option<PrLanding>,
    /// The tracker did not answer the start's read in time: the run starts
    /// from its snapshot and asks it again at once, from its own thread.
    pub(super) tracker_reading_on: bool,
}

/// What the start-up leaves the run: its lock (held to the end), its log
/// and records, the state reconciled with git.
pub(super) struct Started {
    pub(super) lock: store::RunLock,
    pub(super) log: TechLog,
    pub(super) state: crate::state::State,
    /// Stories reconcile found finished: they go to the merge queue first.
    pub(super) reland: Vec<String>,
    pub(super) runlog: Option<crate::runlog::RunLog>,
}

/// The run's input, checked before anything is touched: the project
/// loads with stories to run, the flags name what exists, the target can
/// be landed on, the agents are there and start, the web view's address
/// and `gh` for pull requests.
pub(super) fn check_inputs<C: ExecutorChoice>(
    root: &Path,
    opts: &RunOptions,
    choice: &C,
) -> Result<Checked> {
    let (stale, tracker_reading_on) =
        project::refresh_tracker_at_start(root).map_err(RalphError::BadInput)?;
    if let Some(why) = stale {
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
    check_flags(&project, opts)?;
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
    let backend = backend_of(&project, opts)?;
    let agents = choice.agents(&project, backend)?;
    let (seal, backends) = RunSeal::for_run(&project.config, &agents)?;
    // Before any attempt: an agent that cannot start is the user's to fix,
    // never a story's failure (issue 32).
    choice.check_agents(&project, &git, &agents, &seal)?;
    // The web view's address is checked with the rest of the input.
    let serve_at = match (opts.land, &opts.decompose) {
        (false, None) => {
            crate::serve::address(opts.serve.as_ref().map(|a| a.as_deref()), &project.config)?
        }
        _ => None,
    };
    let pr = pr_landing(root, &project)?;
    Ok(Checked {
        project,
        git,
        target,
        backend,
        agents,
        seal,
        backends,
        serve_at,
        pr,
        tracker_reading_on,
    })
}

/// A backlog with stories to run, and `-s`, `-r`, `ralph decompose ID`
/// and `-t` that make sense for it.
fn check_flags(project: &Project, opts: &RunOptions) -> Result<()> {
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
    Ok(())
}

/// The run's agent (`--agent`, else `agent.name`), and `--model` only for
/// one whose command line has a choice of model.
fn backend_of(project: &Project, opts: &RunOptions) -> Result<Backend> {
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
    Ok(backend)
}

/// Pull-request landing needs the GitHub CLI: said now, not after the work.
fn pr_landing(root: &Path, project: &Project) -> Result<Option<PrLanding>, RalphError> {
    let Some(remote) = &project.config.landing.pr_remote else {
        return Ok(None);
    };
    let path = std::env::var("PATH").unwrap_or_default();
    let gh = crate::sandbox::which("gh", &path, root)
        .map(|_| "gh".to_string())
        .ok_or_else(|| {
            RalphError::usage(
            "landing.mode \"pr\" opens pull requests with the GitHub CLI, and `gh` is not on PATH",
        )
        .with_hint(format!(
            "install it (https://cli.github.com) and run `gh auth login`, or set landing.mode \
             to \"merge\" or \"review\" in {}",
            paths::CONFIG
        ))
        })?;
    Ok(Some(PrLanding {
        remote: remote.clone(),
        gh,
    }))
}

/// A dry run refuses what the run would refuse, but recovers nothing:
/// a landing a killed run cut short may show as a spec's edit.
/// An uncommitted backlog is said, not refused: the plan is what one
/// wants to see before committing it (issue 32).
pub(super) fn preview(root: &Path, opts: &RunOptions, checked: &Checked) -> Result<i32> {
    if !paths::landing_intent_path(root).exists() {
        if let Err(e) =
            preflight::refuse_uncommitted_backlog(&checked.project, &checked.git, &checked.target)
        {
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
    dry_run::dry_run(&checked.project, opts, &checked.seal, &checked.backends)
}

/// The start-up, in order (CLAUDE.md, "Startup order"): the run lock;
/// what a killed run left (processes, git locks, a landing cut short,
/// sandbox refs) recovered; the backlog and the main checkout checked;
/// the state reconciled with git; the run's records file.
pub(super) fn start_up(root: &Path, opts: &RunOptions, checked: &Checked) -> Result<Started> {
    let Checked {
        project,
        git,
        target,
        ..
    } = checked;
    if let Some(w) = crate::sandbox::unconfined_warning(&checked.seal.decision) {
        if !crate::ui::get().quiet {
            eprintln!("{}", crate::ui::paint_tag(&w, crate::ui::stderr_colors()));
        }
    }

    preflight::refuse_a_setup_that_cannot_sign(git)?;

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
    ensure_target(project, git, target, &log)?;
    // Processes, lock files and a half-done landing of a killed run are
    // dealt with before the checkout is judged: they are ours, not the user's.
    process::set_shell_token_prefix(&tag);
    recover::recover_processes_and_git(root, git, target, &tag, &log)?;
    // Commits a killed run's sandboxed agents made on their branch's
    // stand-in go onto the real branch before anything judges the branch.
    for (slot, r) in git.sandbox_refs_collect_all() {
        log.line(&format!(
            "sandbox refs of {slot} left by a killed run: {r:?}"
        ));
    }
    preflight::refuse_uncommitted_backlog(project, git, target)?;
    preflight::refuse_dirty_checkout(root, git)?;

    let mut state = store::load_state(root).map_err(|p| RalphError::BadInput(vec![p]))?;
    for line in recover::keep_unknown_story_branches(project, git, target, &state, &log)? {
        display::err(&line);
    }
    if let Some(pr) = &checked.pr {
        prs_merged(project, git, target, &pr.remote, &mut state, &log)?;
    }
    let reland = recover::reconcile(project, git, target, &mut state, &log)?;
    store::save_state(root, &state)?;
    // After the lock: the previous run's file is closed here if it was killed.
    let runlog = crate::runlog::RunLog::create(
        root,
        crate::timefmt::now_secs(),
        project.config.runs.max_bytes,
    )
    .inspect_err(|e| log.line(&format!("cannot record this run in {}/: {e}", paths::RUNS)))
    .ok();
    Ok(Started {
        lock,
        log,
        state,
        reland,
        runlog,
    })
}

/// The target branch exists: prd.json may name one that does not yet,
/// which starts at HEAD.
fn ensure_target(project: &Project, git: &Git, target: &str, log: &TechLog) -> Result<()> {
    if git.branch_tip(target)?.is_some() {
        return Ok(());
    }
    let head = git.head_commit_of_worktree(&git.workdir).ok().flatten();
    match head {
        Some(h) if matches!(project.backlog.source, Source::Prd { branch: Some(_) }) => {
            git.ensure_branch(target, &h)?;
            log.line(&format!("created target branch {target} at {h}"));
            Ok(())
        }
        _ => Err(
            RalphError::usage(format!("target branch {target} does not exist"))
                .with_hint("create it, or fix branchName in prd.json")
                .into(),
        ),
    }
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
