//! `ralph run`: the dispatcher. It owns the state, the scheduler and the
//! display; attempts run as tasks in job slots (one reused worktree per slot)
//! and finished work goes through one merge queue task. Tasks talk to the
//! dispatcher only through `Event`s, so every state change happens here, in
//! order, and is saved before anything depends on it.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, watch};

use crate::agent::{self, ResultKind, Verdict};
use crate::backlog::{self, Backlog, Source, Story};
use crate::config::Config;
use crate::dag::Dag;
use crate::error::{Problem, RalphError, EXIT_INTERRUPTED, EXIT_OK, EXIT_STORIES_FAILED};
use crate::gitops::{Git, LandOutcome, MergeOutcome, Oid};
use crate::learnings;
use crate::process::{self, AttemptSpec, Control};
use crate::prompt::{self, PromptInput};
use crate::report::{Reporter, Totals};
use crate::schedule::{estimation_weight, Node, Scheduler};
use crate::signals::{AgentEvent, OutputParser, Usage};
use crate::state::{AfterFailure, AttemptRecord, State, Status};
use crate::store::{self, RunLock, TechLog};
use crate::timefmt;

/// `ralph run` options after merging flags with the config.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub parallel: bool,
    pub jobs: Option<usize>,
    pub iterations: Option<u64>,
    pub story: Option<String>,
    pub resume: Option<String>,
    pub timeout: Option<u64>,
    pub dry_run: bool,
    pub verbose: bool,
    pub log: Option<PathBuf>,
}

/// A loaded, valid project.
#[derive(Debug, Clone)]
pub struct Project {
    pub root: PathBuf,
    pub config: Config,
    pub backlog: Backlog,
    pub dag: Dag,
}

/// Loads config, backlog and DAG, collecting every problem.
pub fn load_project(root: &Path) -> Result<Project, Vec<Problem>> {
    let (config, mut problems) = match crate::config::load(root) {
        Ok(c) => (c, Vec::new()),
        Err(p) => {
            // Keep going with the defaults so one run of `validate` shows
            // the backlog's problems too — unless the spec pattern itself is
            // broken, which would only add noise.
            let pattern_broken = p.iter().any(|x| x.message.contains("specs.pattern"));
            if pattern_broken {
                return Err(p);
            }
            let defaults = crate::config::from_value(
                crate::config::defaults(),
                Path::new(".ralph/config.json"),
            )
            .map_err(|_| p.clone())?;
            (defaults, p)
        }
    };
    let backlog = match backlog::load(root, &config) {
        Ok(b) => b,
        Err(mut p) => {
            problems.append(&mut p);
            return Err(problems);
        }
    };
    let dag = match Dag::build(&backlog) {
        Ok(d) => d,
        Err(mut p) => {
            problems.append(&mut p);
            return Err(problems);
        }
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Project {
        root: root.to_path_buf(),
        config,
        backlog,
        dag,
    })
}

/// Paths ralph writes at run time, as gitignore patterns anchored at the
/// project root: kept out of git and out of the dirty check.
pub const RUNTIME_PATTERNS: &[&str] = &[
    "/.ralph/state.json",
    "/.ralph/.lock",
    "/.ralph/landing.json",
    "/.ralph/logs/",
    "/.ralph/worktrees/",
    "/.ralph/learnings/",
    "/.ralph/.*.tmp-*",
    "/progress.txt",
    "/ralph.log",
];

/// True when `rel_to_root` matches one of `RUNTIME_PATTERNS`.
fn is_runtime_path(rel_to_root: &str) -> bool {
    RUNTIME_PATTERNS.iter().any(|p| {
        let p = &p[1..];
        if let Some(dir) = p.strip_suffix('/') {
            rel_to_root.starts_with(dir) && rel_to_root[dir.len()..].starts_with('/')
        } else if p.contains('*') {
            glob::Pattern::new(p).is_ok_and(|g| g.matches(rel_to_root))
        } else {
            rel_to_root == p
        }
    })
}

/// `.ralph/logs/<id>/attempt-<n>.log`: the raw output of one attempt.
fn attempt_log_path(root: &Path, id: &str, attempt: u32) -> PathBuf {
    root.join(".ralph/logs")
        .join(id)
        .join(format!("attempt-{attempt}.log"))
}

/// True when `path` is one of ralph's worktrees (under `.ralph/worktrees`).
fn is_ours(root: &Path, path: &Path) -> bool {
    let dir = worktrees_dir(root);
    path.starts_with(&dir) || dir.canonicalize().is_ok_and(|c| path.starts_with(c))
}

/// The agent executable: a project-local one (`bin/agent`) is found from the
/// project root, not from the worktree the child starts in; a bare name is
/// looked up on PATH. `None` when it does not exist.
fn resolve_agent(root: &Path, program: &str) -> Option<String> {
    if program.contains('/') {
        let p = Path::new(program);
        let p = if p.is_relative() {
            root.join(p)
        } else {
            p.to_path_buf()
        };
        p.is_file().then(|| p.display().to_string())
    } else {
        let paths = std::env::var_os("PATH")?;
        std::env::split_paths(&paths)
            .any(|d| d.join(program).is_file())
            .then(|| program.to_string())
    }
}

/// The prompt of one attempt (SPEC 4.1): the project's template or the
/// built-in one, with the story's spec and its most relevant learnings.
fn build_prompt(
    root: &Path,
    config: &Config,
    story: &Story,
    learnings_pool: &[String],
    retry_context: Option<&str>,
) -> std::io::Result<String> {
    let spec = backlog::spec_text(root, story)?;
    let chosen = learnings::select_relevant(learnings_pool, &spec, config.learnings_max);
    let template = std::fs::read_to_string(root.join(".ralph/templates/implement.md"))
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

/// A story's node as the state describes it (prd.json's `passes: true`
/// counts as done for a story ralph has no record of).
pub fn story_node(state: &State, story: &Story) -> Node {
    match state.status(&story.id) {
        Status::Done => Node::Done,
        Status::Failed => Node::Failed,
        Status::Running => Node::Running,
        Status::Landing => Node::Landing,
        Status::Pending if story.prd_passes && state.record(&story.id).is_none() => Node::Done,
        Status::Pending => Node::Pending,
    }
}

/// Short stable hash of the project path: the prefix of every attempt token,
/// so processes a killed run left behind can be found (and only ours).
pub fn project_tag(root: &Path) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in root.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("ralph-{:08x}-", h as u32)
}

pub fn story_branch(id: &str) -> String {
    format!("ralph/story-{id}")
}

fn worktrees_dir(root: &Path) -> PathBuf {
    root.join(".ralph").join("worktrees")
}

/// Messages from tasks to the dispatcher.
enum Event {
    Activity { idx: usize, text: String },
    AttemptDone(Box<AttemptReport>),
    Landed { idx: usize, result: LandResult },
}

struct AttemptReport {
    idx: usize,
    slot: usize,
    attempt: u32,
    verdict: Verdict,
    usage: Usage,
    cost_usd: f64,
    duration: Duration,
    learnings: Vec<String>,
    saved_ref: Option<String>,
    log_path: PathBuf,
}

#[derive(Debug)]
enum LandResult {
    Landed {
        commit: Oid,
    },
    Conflict {
        paths: Vec<String>,
        saved_ref: Option<String>,
    },
    ValidationFailed {
        name: String,
        tail: String,
        saved_ref: Option<String>,
    },
    CheckoutBlocked {
        paths: Vec<String>,
    },
    /// Another process kept the main checkout's `lock` (a git lock file)
    /// through every wait; nothing was written.
    Busy {
        lock: PathBuf,
    },
    /// Ctrl-C stopped it before the ref moved; the story stays `landing` in
    /// the state so the next run lands it without redoing it.
    Interrupted,
    Error(String),
}

struct LandRequest {
    idx: usize,
    id: String,
    title: String,
    attempt: u32,
    spec_rel: Option<String>,
    prd_rel: Option<String>,
}

/// Everything attempt and landing tasks share, read-only.
struct Shared {
    root: PathBuf,
    config: Config,
    git: Git,
    target: String,
    timeout: Duration,
    tag: String,
    required_validation: Vec<crate::config::ValidationCommand>,
    log: TechLog,
    /// `claude.command`, resolved once at start.
    agent_program: String,
}

struct RunningSlot {
    control: watch::Sender<Control>,
}

/// Runs the backlog; returns the exit code.
pub async fn run(root: &Path, opts: RunOptions) -> Result<i32> {
    // Worktree paths, git's paths and the project tag all compare against
    // the canonical root.
    let root = &root.canonicalize()?;
    let project = load_project(root).map_err(RalphError::BadInput)?;
    let backlog = &project.backlog;
    for (flag, id) in [("-s", &opts.story), ("-r", &opts.resume)] {
        if let Some(id) = id {
            if backlog.index_of(id).is_none() {
                return Err(RalphError::Usage(format!(
                    "{flag} {id}: no such story in the backlog (see `ralph stories`)"
                ))
                .into());
            }
        }
    }
    if opts.timeout == Some(0) {
        return Err(RalphError::Usage("-t must be a positive number of seconds".into()).into());
    }
    if opts.dry_run {
        return dry_run(&project, &opts);
    }

    let git = Git::open(root).map_err(|e| RalphError::Usage(e.to_string()))?;
    let target = match &backlog.source {
        Source::Prd { branch: Some(b) } => b.clone(),
        _ => git
            .head_branch()
            .map_err(|e| RalphError::Usage(e.to_string()))?
            .ok_or_else(|| {
                RalphError::Usage(
                    "the main checkout has no branch checked out (detached HEAD or no commits): \
                 check out the branch stories should land on, with at least one commit"
                        .into(),
                )
            })?,
    };

    if let Some(wt) = git
        .branch_checked_out_elsewhere(&target, &worktrees_dir(root))
        .map_err(|e| RalphError::Usage(e.to_string()))?
    {
        let wt = wt.display();
        return Err(RalphError::Usage(format!(
            "target branch {target} is checked out in the worktree {wt}: landing would move it \
             under that worktree. Switch that worktree to another branch (`git -C {wt} switch \
             --detach`) or remove it (`git worktree remove {wt}`), then run again"
        ))
        .into());
    }

    let agent_program = resolve_agent(root, &project.config.agent_command).ok_or_else(|| {
        let program = &project.config.agent_command;
        RalphError::Usage(format!(
            "agent command '{program}' not found{}: install it (Claude Code: npm install -g \
             @anthropic-ai/claude-code) or set claude.command in .ralph/config.json",
            if program.contains('/') {
                ""
            } else {
                " on PATH"
            }
        ))
    })?;

    let lock = take_run_lock(root, "before running")?;

    let log = TechLog::new(Some(
        opts.log.clone().unwrap_or_else(|| root.join("ralph.log")),
    ));
    let tag = project_tag(root);
    if git.branch_tip(&target)?.is_none() {
        // prd.json names a branch that does not exist yet: start it at HEAD.
        let head = git.head_commit_of_worktree(&git.workdir).ok().flatten();
        match head {
            Some(h) if matches!(backlog.source, Source::Prd { branch: Some(_) }) => {
                git.ensure_branch(&target, &h)?;
                log.line(&format!("created target branch {target} at {h}"));
            }
            _ => {
                return Err(RalphError::Usage(format!(
                    "target branch {target} does not exist: create it or fix branchName in prd.json"
                ))
                .into())
            }
        }
    }
    // Processes, lock files and a half-done landing of a killed run are
    // dealt with before the checkout is judged: they are ours, not the user's.
    process::set_shell_token_prefix(&tag);
    recover_processes_and_git(root, &git, &target, &tag, &log)?;

    let root_rel = git.rel_path(root).unwrap_or_default();
    let prefix = if root_rel.is_empty() {
        String::new()
    } else {
        format!("{root_rel}/")
    };
    let dirty = git
        .dirty_tracked_files(&|p: &str| is_runtime_path(p.strip_prefix(&prefix).unwrap_or(p)))
        .context("reading the main checkout's status")?;
    if !dirty.is_empty() {
        let list: Vec<String> = dirty.iter().take(20).map(|p| format!("  {p}")).collect();
        return Err(RalphError::Usage(format!(
            "the main checkout has uncommitted changes to tracked files that landing could \
             overwrite:\n{}\ncommit or stash them, then run `ralph run` again",
            list.join("\n")
        ))
        .into());
    }
    let excludes: Vec<String> = RUNTIME_PATTERNS
        .iter()
        .map(|p| format!("/{prefix}{}", &p[1..]))
        .collect();
    let _ = git.exclude(&excludes.iter().map(String::as_str).collect::<Vec<_>>());

    let mut state = store::load_state(root).map_err(|p| RalphError::BadInput(vec![p]))?;
    let reconciled = reconcile(root, &project, &git, &target, &mut state, &log)?;
    store::save_state(root, &state)?;

    // `--parallel` also comes from `parallel.enabled`; `-j` defaults to
    // `parallel.max_concurrent` when the user set it, else 4 (SPEC 2).
    let parallel =
        opts.parallel || project.config.parallel_enabled || opts.jobs.is_some_and(|j| j > 1);
    let jobs = if parallel {
        opts.jobs
            .or(project.config.max_concurrent)
            .unwrap_or(4)
            .max(1)
    } else {
        1
    };
    let timeout = Duration::from_secs(opts.timeout.unwrap_or(project.config.timeout_secs));
    let shared = Arc::new(Shared {
        root: root.to_path_buf(),
        config: project.config.clone(),
        git: git.clone(),
        target: target.clone(),
        timeout,
        tag,
        required_validation: project
            .config
            .validation
            .iter()
            .filter(|v| v.required)
            .cloned()
            .collect(),
        log: log.clone(),
        agent_program,
    });

    let mut d = Dispatcher::new(project, shared, state, jobs, opts, log, reconciled);
    let code = d.run().await;
    drop(lock);
    code
}

/// True when an attempt's log holds a clean DONE for `id`: the agent had
/// finished and committed when the run died, so its work can go straight to
/// the merge queue (which still merges and validates it) instead of being
/// redone. Read line by line: logs can be huge.
fn attempt_log_says_done(path: &Path, id: &str) -> bool {
    use std::io::BufRead;
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    let mut parser = OutputParser::new();
    for line in std::io::BufReader::new(f).split(b'\n') {
        let Ok(line) = line else { return false };
        parser.feed_line(&String::from_utf8_lossy(&line));
    }
    let s = parser.finish();
    s.signals.done.as_deref() == Some(id) && !s.is_error && s.rate_limited.is_none()
}

/// What startup reconciliation found and did.
#[derive(Debug, Default)]
struct Reconciled {
    /// Stories whose finished branch should go straight to the merge queue.
    reland: Vec<String>,
}

/// Path of the merge queue's landing intent (written before the main
/// checkout is touched, removed once the landing is decided).
fn landing_intent_path(root: &Path) -> PathBuf {
    root.join(".ralph").join("landing.json")
}

/// Deletes git lock files that no live process has open and no git process
/// works next to (git writes no owner into them, so this is the only safe
/// test); a lock that may be in use is left alone and logged.
fn remove_stale_git_locks(git: &Git, log: &TechLog) {
    for lock in git.lock_files() {
        if process::lock_may_be_held(&lock, &git.workdir) {
            log.line(&format!("{} may be in use; left alone", lock.display()));
            continue;
        }
        if std::fs::remove_file(&lock).is_ok() {
            log.line(&format!("removed stale {}", lock.display()));
        }
    }
}

/// How long a lock whose recorded holder is dead may stay held: a child the
/// dead run forked keeps the lock's file open until its exec closes it.
const DEAD_HOLDER_WAIT: Duration = Duration::from_secs(5);

/// Takes `.ralph/.lock` for a run, or for `ralph reset` (`doing` says
/// which, for the message). A live holder means another run: exit 3 at
/// once. A holder that died by SIGKILL while forking a child leaves the OS
/// lock with that child until its exec: wait for it, briefly.
pub fn take_run_lock(root: &Path, doing: &str) -> Result<RunLock> {
    let deadline = Instant::now() + DEAD_HOLDER_WAIT;
    let mut told = false;
    loop {
        let pid = match RunLock::acquire(root) {
            Ok(lock) => return Ok(lock),
            Err(store::LockError::Io(e)) => return Err(e).context("taking .ralph/.lock"),
            Err(store::LockError::Held { pid }) => pid,
        };
        let gone = pid.is_some_and(|p| !process::pid_is_alive(p as i32));
        if gone && Instant::now() < deadline {
            if !told {
                eprintln!(
                    "waiting for .ralph/.lock: its holder (PID {}) is gone, but a process it \
                     started still has the lock open",
                    pid.unwrap_or(0)
                );
                told = true;
            }
            // Only at start-up, before anything else runs.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let who = pid.map(|p| format!(" (PID {p})")).unwrap_or_default();
        let hint = if gone {
            "; that PID is gone, so a process it started keeps the lock open: \
             `fuser -v .ralph/.lock` shows which"
        } else {
            ""
        };
        return Err(RalphError::Locked(format!(
            "another ralph run holds this project's lock{who}: wait for it to finish, \
             or stop it {doing}; `ralph status` works meanwhile{hint}"
        ))
        .into());
    }
}

/// First half of startup recovery: stop agents a killed run left behind,
/// remove git lock files no live process can hold, and undo a landing that
/// was cut short between updating the main checkout and moving the ref.
fn recover_processes_and_git(
    root: &Path,
    git: &Git,
    target: &str,
    tag: &str,
    log: &TechLog,
) -> Result<()> {
    match process::probe_cgroups(tag) {
        Some(dir) => log.line(&format!(
            "processes: each child runs in a cgroup of its own under {}",
            dir.display()
        )),
        None => {
            log.line("processes: no writable cgroup v2 here; the token sweep alone finds leftovers")
        }
    }
    let killed = process::kill_by_token_prefix(tag);
    if killed > 0 {
        log.line(&format!(
            "reconcile: stopped {killed} process(es) left by an earlier run"
        ));
    }
    remove_stale_git_locks(git, log);
    let intent_path = landing_intent_path(root);
    if let Ok(text) = std::fs::read_to_string(&intent_path) {
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let (base, commit) = (
            v["base"].as_str().unwrap_or(""),
            v["commit"].as_str().unwrap_or(""),
        );
        let tip = git.branch_tip(target)?.unwrap_or_default();
        if !base.is_empty() && tip == base && !commit.is_empty() {
            let restored = git.rollback_partial_landing(&base.to_string(), &commit.to_string())?;
            if !restored.is_empty() {
                log.line(&format!(
                    "reconcile: undid a half-done landing of story {} in the main checkout ({} files)",
                    v["story"].as_str().unwrap_or("?"),
                    restored.len()
                ));
            }
        }
        let _ = std::fs::remove_file(&intent_path);
    }
    Ok(())
}

/// Brings the state in line with git and the process table before anything
/// runs (SPEC 6).
fn reconcile(
    root: &Path,
    project: &Project,
    git: &Git,
    target: &str,
    state: &mut State,
    log: &TechLog,
) -> Result<Reconciled> {
    let mut out = Reconciled::default();
    let landed = git.landed_stories(target)?;
    for (id, commit) in &landed {
        let Some(i) = project.backlog.index_of(id) else {
            continue;
        };
        if !state.is_done(id) {
            log.line(&format!(
                "reconcile: story {id} is on {target} ({commit}); marking it done"
            ));
            let title = &project.backlog.stories[i].title;
            state.mark_done(id, Some(commit));
            let _ = store::append_progress(
                root,
                &format!(
                    "[DONE] Story {id} - {title} - {}",
                    timefmt::progress_stamp(timefmt::now_secs())
                ),
            );
        }
    }
    let landing: Vec<String> = state
        .stories
        .iter()
        .filter(|(_, r)| r.status == Status::Landing)
        .map(|(id, _)| id.clone())
        .collect();
    let target_tip = git.branch_tip(target)?.unwrap_or_default();
    for id in state.requeue_interrupted() {
        let branch = story_branch(&id);
        let ahead = git.commits_ahead(&branch, &target_tip).unwrap_or(0);
        if ahead == 0 {
            continue;
        }
        let n = state.record(&id).map(|r| r.attempts_started).unwrap_or(0);
        let was_landing = landing.contains(&id);
        let finished = !was_landing && attempt_log_says_done(&attempt_log_path(root, &id, n), &id);
        if (was_landing || finished) && project.backlog.index_of(&id).is_some() {
            out.reland.push(id.clone());
            log.line(&format!(
                "reconcile: story {id} {}; it goes to the merge queue",
                if finished {
                    "had reported DONE when the run died"
                } else {
                    "was landing"
                }
            ));
        } else {
            let r = format!("refs/ralph/attempts/{id}/{n}-interrupted");
            let _ = git.save_ref(&branch, &r);
            log.line(&format!(
                "reconcile: story {id} was interrupted; its commits are kept at {r}"
            ));
        }
    }
    // Worktrees whose directory vanished are pruned; live ones are reused.
    for wt in git.list_worktrees()? {
        let ours = is_ours(root, &wt.path);
        if ours {
            let _ = git.clear_worktree_locks(&wt.name);
        }
        let gone = wt.path.as_os_str().is_empty() || !wt.path.exists();
        if gone {
            log.line(&format!(
                "reconcile: pruning worktree {} (its directory is gone)",
                wt.name
            ));
            if let Err(e) = git.prune_admin(&wt.name) {
                log.line(&format!(
                    "reconcile: could not prune worktree {}: {e}",
                    wt.name
                ));
            }
        } else if ours && wt.prunable {
            log.line(&format!("reconcile: removing broken worktree {}", wt.name));
            if let Err(e) = git.remove_worktree(&wt.name, &wt.path) {
                log.line(&format!(
                    "reconcile: could not remove worktree {}: {e}",
                    wt.name
                ));
            }
        }
    }
    store::remove_stale_temp_files(&root.join(".ralph"));
    Ok(out)
}

struct Dispatcher {
    project: Project,
    shared: Arc<Shared>,
    state: State,
    sched: Scheduler,
    slots: Vec<Option<RunningSlot>>,
    jobs: usize,
    opts: RunOptions,
    log: TechLog,
    reporter: Reporter,
    events_tx: mpsc::UnboundedSender<Event>,
    events_rx: mpsc::UnboundedReceiver<Event>,
    land_tx: mpsc::UnboundedSender<LandRequest>,
    land_rx: Option<mpsc::UnboundedReceiver<LandRequest>>,
    land_control: watch::Sender<Control>,
    attempts_this_run: u64,
    limit: Option<u64>,
    stopping: bool,
    killing: bool,
    fatal: Option<String>,
    pause_until: Option<Instant>,
    rate_backoff: Duration,
    retry_context: HashMap<usize, String>,
    reland: VecDeque<usize>,
}

impl Dispatcher {
    fn new(
        project: Project,
        shared: Arc<Shared>,
        state: State,
        jobs: usize,
        opts: RunOptions,
        log: TechLog,
        reconciled: Reconciled,
    ) -> Dispatcher {
        let backlog = &project.backlog;
        let first = opts
            .resume
            .as_ref()
            .and_then(|r| backlog.index_of(r))
            .unwrap_or(0);
        let only = opts.story.as_ref().and_then(|s| backlog.index_of(s));
        let mut state = state;
        let nodes: Vec<Node> = backlog
            .stories
            .iter()
            .enumerate()
            .map(|(i, s)| match story_node(&state, s) {
                Node::Done => {
                    // prd.json's `passes` joins the state's completed list.
                    state.mark_done(&s.id, None);
                    Node::Done
                }
                _ if only.is_some_and(|o| o != i) || i < first => Node::Excluded,
                Node::Failed if only == Some(i) => {
                    // An explicit `-s` gives a failed story a fresh budget.
                    state.reset_attempts(&s.id);
                    Node::Pending
                }
                node => node,
            })
            .collect();
        let weights: Vec<u64> = backlog
            .stories
            .iter()
            .map(|s| estimation_weight(s.estimation.as_deref()))
            .collect();
        let sched = Scheduler::new(
            &project.dag,
            nodes,
            if jobs > 1 {
                Some(weights.as_slice())
            } else {
                None
            },
        );
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (land_tx, land_rx) = mpsc::unbounded_channel();
        let reland = reconciled
            .reland
            .iter()
            .filter_map(|id| project.backlog.index_of(id))
            .collect();
        let limit = opts
            .iterations
            .or(Some(project.config.max_iterations))
            .filter(|&n| n > 0);
        let reporter = Reporter::new(opts.verbose);
        Dispatcher {
            project,
            shared,
            state,
            sched,
            slots: (0..jobs).map(|_| None).collect(),
            jobs,
            opts,
            log,
            reporter,
            events_tx,
            events_rx,
            land_tx,
            land_rx: Some(land_rx),
            land_control: watch::channel(Control::Run).0,
            attempts_this_run: 0,
            limit,
            stopping: false,
            killing: false,
            fatal: None,
            pause_until: None,
            rate_backoff: Duration::from_secs(60),
            retry_context: HashMap::new(),
            reland,
        }
    }

    fn story(&self, idx: usize) -> &Story {
        &self.project.backlog.stories[idx]
    }

    fn save(&self) {
        if let Err(e) = store::save_state(&self.shared.root, &self.state) {
            self.reporter
                .line(&format!("error: cannot save state: {e:#}"));
            self.log.line(&format!("cannot save state: {e:#}"));
        }
    }

    fn progress(&self, line: &str) {
        if let Err(e) = store::append_progress(&self.shared.root, line) {
            self.log
                .line(&format!("cannot append to progress.txt: {e}"));
        }
    }

    fn totals(&self) -> Totals {
        let (usage, cost) = self.state.total_usage();
        let selected = self
            .sched
            .nodes
            .iter()
            .filter(|n| **n != Node::Excluded)
            .count();
        Totals {
            done: self.sched.count(Node::Done),
            total: selected,
            running: self.sched.count(Node::Running) + self.sched.count(Node::Landing),
            failed: self.sched.count(Node::Failed),
            blocked: self.sched.count(Node::Blocked),
            usage,
            cost_usd: cost,
        }
    }

    fn limit_reached(&self) -> bool {
        self.limit.is_some_and(|l| self.attempts_this_run >= l)
    }

    async fn run(&mut self) -> Result<i32> {
        let shared = self.shared.clone();
        let land_rx = self.land_rx.take().expect("run is called once");
        let events = self.events_tx.clone();
        let lander = tokio::spawn(merge_queue(
            shared,
            land_rx,
            events,
            self.land_control.subscribe(),
        ));

        let mut sigint = signal(SignalKind::interrupt())?;
        let mut sigterm = signal(SignalKind::terminate())?;
        let mut sighup = signal(SignalKind::hangup())?;

        let t = self.totals();
        self.reporter.line(&format!(
            "ralph: {} stories, {} done, {} to run · {} job{} · landing on {}",
            t.total,
            t.done,
            t.total - t.done,
            self.jobs,
            if self.jobs == 1 { "" } else { "s" },
            self.shared.target
        ));
        self.log.line(&format!(
            "run start: {} jobs, target {}",
            self.jobs, self.shared.target
        ));

        while let Some(idx) = self.reland.pop_front() {
            self.send_to_landing(
                idx,
                self.state
                    .record(&self.story(idx).id)
                    .map(|r| r.attempts_started)
                    .unwrap_or(0),
            );
        }

        loop {
            self.dispatch();
            self.reporter.totals(&self.totals());
            let busy =
                self.slots.iter().any(Option::is_some) || self.sched.count(Node::Landing) > 0;
            // dispatch() just started everything it could: with nothing in
            // flight the run is over, unless it only waits out a usage limit.
            let waiting_out_limit = self.pause_until.is_some()
                && !self.stopping
                && self.fatal.is_none()
                && !self.limit_reached()
                && self.sched.next().is_some();
            if !busy && !waiting_out_limit {
                break;
            }
            let pause = self.pause_until;
            tokio::select! {
                ev = self.events_rx.recv() => match ev {
                    // Activity changes nothing the scheduler looks at: show
                    // it and keep waiting (an agent may stream a lot of it).
                    Some(Event::Activity { idx, text }) => {
                        let id = self.story(idx).id.clone();
                        self.reporter.activity(&id, &text);
                        continue;
                    }
                    Some(Event::AttemptDone(r)) => self.attempt_done(*r),
                    Some(Event::Landed { idx, result }) => self.landed(idx, result),
                    None => {}
                },
                _ = sigint.recv() => self.on_signal("interrupt"),
                _ = sigterm.recv() => self.on_signal("terminate"),
                _ = sighup.recv() => self.on_signal("hangup"),
                _ = async { tokio::time::sleep_until(pause.expect("guarded").into()).await }, if pause.is_some() => {
                    self.pause_until = None;
                }
            }
        }
        drop(std::mem::replace(
            &mut self.land_tx,
            mpsc::unbounded_channel().0,
        ));
        let _ = lander.await;
        self.finish_run().await
    }

    fn dispatch(&mut self) {
        if self.stopping || self.fatal.is_some() || self.pause_until.is_some() {
            return;
        }
        // One job is the sequential loop: the next story starts from a tip
        // that holds the previous one, so it waits for its landing.
        if self.jobs == 1 && self.sched.count(Node::Landing) > 0 {
            return;
        }
        let free = self.slots.iter().filter(|s| s.is_none()).count();
        for idx in self.sched.pick(free) {
            if self.limit_reached() {
                return;
            }
            let Some(slot) = self.slots.iter().position(Option::is_none) else {
                return;
            };
            self.start(idx, slot);
        }
    }

    fn start(&mut self, idx: usize, slot: usize) {
        let story = self.story(idx).clone();
        self.attempts_this_run += 1;
        let attempt = self.state.start_attempt(&story.id);
        self.save();
        self.sched.set(idx, Node::Running);
        let max = self.shared.config.max_retries;
        let counted = self
            .state
            .record(&story.id)
            .map(|r| r.attempts)
            .unwrap_or(0)
            + 1;
        self.reporter.line(&format!(
            "[run ] {} {} (attempt {counted}/{max})",
            story.id, story.title
        ));
        self.reporter.story_started(&story.id, &story.title);
        self.log.line(&format!(
            "start story {} attempt {attempt} in slot {slot}",
            story.id
        ));
        let (control, control_rx) = watch::channel(Control::Run);
        self.slots[slot] = Some(RunningSlot { control });
        let ctx = AttemptCtx {
            shared: self.shared.clone(),
            story,
            idx,
            slot,
            attempt,
            iteration: self.attempts_this_run,
            retry_context: self.retry_context.get(&idx).cloned(),
            events: self.events_tx.clone(),
            verbose: self.opts.verbose,
        };
        let log_path = attempt_log_path(&self.shared.root, &self.story(idx).id, attempt);
        tokio::spawn(async move {
            let events = ctx.events.clone();
            // A panic in an attempt must free its slot, not hang the run.
            let report = match tokio::spawn(run_one_attempt(ctx, control_rx)).await {
                Ok(r) => r,
                Err(e) => AttemptReport {
                    idx,
                    slot,
                    attempt,
                    verdict: Verdict::Failed {
                        reason: format!("internal error in the attempt: {e}"),
                        kind: ResultKind::Error,
                    },
                    usage: Usage::default(),
                    cost_usd: 0.0,
                    duration: Duration::ZERO,
                    learnings: Vec::new(),
                    saved_ref: None,
                    log_path,
                },
            };
            let _ = events.send(Event::AttemptDone(Box::new(report)));
        });
    }

    fn on_signal(&mut self, what: &str) {
        if !self.stopping {
            self.stopping = true;
            self.reporter.line(&format!(
                "ralph: {what} received: stopping agents (again to kill them at once); state is saved"
            ));
            self.log.line(&format!("{what}: graceful stop"));
            self.stop_all(Control::Stop);
        } else if !self.killing {
            self.killing = true;
            self.reporter.line("ralph: killing agents now");
            self.stop_all(Control::Kill);
        }
    }

    /// Tells every running attempt and the merge queue to stop.
    fn stop_all(&mut self, how: Control) {
        self.stopping = true;
        for s in self.slots.iter().flatten() {
            let _ = s.control.send(how);
        }
        let _ = self.land_control.send(how);
    }

    fn send_to_landing(&mut self, idx: usize, attempt: u32) {
        let story = self.story(idx).clone();
        self.state.begin_landing(&story.id);
        self.save();
        self.sched.set(idx, Node::Landing);
        let root = &self.shared.root;
        let spec_rel = story
            .spec_path
            .as_ref()
            .and_then(|p| self.shared.git.rel_path(&root.join(p)));
        let prd_rel = match self.project.backlog.source {
            Source::Prd { .. } => self.shared.git.rel_path(&root.join("prd.json")),
            Source::StoriesTxt => None,
        };
        let _ = self.land_tx.send(LandRequest {
            idx,
            id: story.id.clone(),
            title: story.title.clone(),
            attempt,
            spec_rel,
            prd_rel,
        });
    }

    fn attempt_done(&mut self, r: AttemptReport) {
        let story = self.story(r.idx).clone();
        let id = story.id.clone();
        self.slots[r.slot] = None;
        self.reporter.story_finished(&id);
        self.state
            .add_usage(&id, r.usage, r.cost_usd, r.duration.as_secs_f64());
        if let Ok(added) = learnings::record(&self.shared.root, &id, &r.learnings) {
            for l in added {
                self.progress(&format!("[LEARN] {l}"));
            }
        }
        let mut rec = AttemptRecord {
            number: r.attempt,
            outcome: r.verdict.kind().as_str().to_string(),
            reason: None,
            duration_secs: r.duration.as_secs_f64(),
            usage: r.usage,
            cost_usd: r.cost_usd,
            saved_ref: r.saved_ref.clone(),
        };
        let log_rel = r
            .log_path
            .strip_prefix(&self.shared.root)
            .unwrap_or(&r.log_path)
            .display()
            .to_string();
        match &r.verdict {
            Verdict::Done | Verdict::Tentative => {
                rec.outcome = if r.verdict == Verdict::Tentative {
                    "tentative"
                } else {
                    "done"
                }
                .into();
                self.state.push_history(&id, rec);
                self.retry_context.remove(&r.idx);
                self.reporter.line(&format!(
                    "[land] {id} finished in {}; landing",
                    timefmt::human_duration(r.duration.as_secs_f64())
                ));
                self.send_to_landing(r.idx, r.attempt);
            }
            Verdict::Failed { reason, .. } => {
                rec.reason = Some(reason.clone());
                self.state.push_history(&id, rec);
                self.count_failure(r.idx, reason, r.saved_ref.as_deref(), &log_rel);
            }
            Verdict::RateLimited { resets_at } => {
                rec.outcome = "rate_limited".into();
                self.state.push_history(&id, rec);
                self.state.requeue(&id);
                self.sched.set(r.idx, Node::Pending);
                let wait = resets_at
                    .map(|t| (t as i64 - timefmt::now_secs()).max(0) as u64)
                    .map(|s| Duration::from_secs(s + 2))
                    .unwrap_or(self.rate_backoff);
                self.rate_backoff = (self.rate_backoff * 2).min(Duration::from_secs(1800));
                self.pause_until = Some(Instant::now() + wait);
                self.reporter.line(&format!(
                    "[wait] {id}: the agent hit a usage/rate limit; pausing new work for {}",
                    timefmt::human_duration(wait.as_secs_f64())
                ));
                self.log
                    .line(&format!("rate limited on {id}; pause {wait:?}"));
            }
            Verdict::Interrupted => {
                rec.outcome = "interrupted".into();
                self.state.push_history(&id, rec);
                self.state.requeue(&id);
                self.sched.set(r.idx, Node::Pending);
                self.reporter.line(&format!(
                    "[stop] {id} stopped; it will be redone by the next `ralph run`"
                ));
            }
            Verdict::RootRefusal => {
                self.state.push_history(&id, rec);
                self.state.requeue(&id);
                self.sched.set(r.idx, Node::Pending);
                self.fatal = Some(
                    "Claude Code refuses --dangerously-skip-permissions when run as root. \
                     Run ralph as a normal user, or set IS_SANDBOX=1 if this is a sandbox or container."
                        .into(),
                );
                self.stop_all(Control::Stop);
            }
        }
        self.save();
    }

    fn count_failure(&mut self, idx: usize, reason: &str, saved_ref: Option<&str>, log_rel: &str) {
        let id = self.story(idx).id.clone();
        let max = self.shared.config.max_retries;
        let after = self.state.fail_attempt(&id, reason, max);
        let n = self.state.record(&id).map(|r| r.attempts).unwrap_or(0);
        let one_line = reason.replace('\n', " ");
        self.progress(&format!(
            "[FAIL] Story {id} - {} - {} (attempt {n}/{max})",
            one_line.replace('|', "-"),
            timefmt::progress_stamp(timefmt::now_secs())
        ));
        let kept = saved_ref
            .map(|r| format!("; its commits are kept at {r}"))
            .unwrap_or_default();
        self.reporter.line(&format!(
            "[fail] {id} attempt {n}/{max}: {one_line} (log: {log_rel}){kept}"
        ));
        self.log
            .line(&format!("story {id} failed attempt {n}/{max}: {one_line}"));
        match after {
            AfterFailure::Retry => {
                self.sched.set(idx, Node::Pending);
                let mut ctx = format!("The previous attempt at this story failed: {one_line}.");
                if let Some(r) = saved_ref {
                    ctx.push_str(&format!(" Its commits are kept at the git ref {r} if you want to look at them; you start again from the current code."));
                }
                self.retry_context.insert(idx, ctx);
            }
            AfterFailure::FailedForGood => {
                let blocked = self.sched.fail(idx);
                let names: Vec<String> =
                    blocked.iter().map(|&b| self.story(b).id.clone()).collect();
                self.reporter.line(&format!(
                    "[FAIL] {id} failed {max} times; a person is needed (`ralph run -s {id}` retries it){}",
                    if names.is_empty() { String::new() } else { format!("; blocked: {}", names.join(", ")) }
                ));
            }
        }
    }

    fn landed(&mut self, idx: usize, result: LandResult) {
        let story = self.story(idx).clone();
        let id = story.id.clone();
        match result {
            LandResult::Landed { commit } => {
                self.state.mark_done(&id, Some(&commit));
                self.save();
                self.sched.set(idx, Node::Done);
                let tentative = self
                    .state
                    .record(&id)
                    .and_then(|r| r.history.last())
                    .is_some_and(|h| h.outcome == "tentative");
                self.progress(&format!(
                    "[DONE] Story {id} - {} - {}{}",
                    story.title,
                    timefmt::progress_stamp(timefmt::now_secs()),
                    if tentative {
                        " (tentative: commits detected, validated)"
                    } else {
                        ""
                    }
                ));
                self.finish_spec_on_disk(&story);
                let _ = self.shared.git.delete_branch(&story_branch(&id));
                let rec = self.state.record(&id).cloned().unwrap_or_default();
                self.reporter.line(&format!(
                    "[done] {id} {} ({}, {} tokens, ${:.2}) → {}",
                    story.title,
                    timefmt::human_duration(rec.duration_secs),
                    crate::report::tokens(&rec.usage),
                    rec.cost_usd,
                    &commit[..commit.len().min(10)]
                ));
                self.log.line(&format!("landed story {id} as {commit}"));
            }
            LandResult::Conflict { paths, saved_ref } => {
                let kept = saved_ref.clone().unwrap_or_else(|| story_branch(&id));
                let note = format!(
                    "Your earlier work on this story conflicted with changes that landed on {} meanwhile (in {}). \
                     That work is kept at the git ref {kept}. Start from the current code, which includes \
                     those changes, and implement the story again on top of it.",
                    self.shared.target,
                    if paths.is_empty() { "some files".to_string() } else { paths.join(", ") }
                );
                let n = self
                    .state
                    .conflict(&id, &format!("merge conflict in {}", paths.join(", ")));
                self.reporter.line(&format!(
                    "[conf] {id} conflicts with {} in {}; redoing it from the new tip",
                    self.shared.target,
                    paths.join(", ")
                ));
                self.log
                    .line(&format!("conflict landing {id}: {paths:?}; kept at {kept}"));
                if n > self.shared.config.max_retries + 2 {
                    self.state.give_up(&id);
                    let blocked = self.sched.fail(idx);
                    self.reporter.line(&format!(
                        "[FAIL] {id} conflicted {n} times; a person is needed ({} blocked)",
                        blocked.len()
                    ));
                } else {
                    self.sched.set(idx, Node::Pending);
                    self.retry_context.insert(idx, note);
                }
                self.save();
            }
            LandResult::ValidationFailed {
                name,
                tail,
                saved_ref,
            } => {
                let tail_line = tail
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .to_string();
                let reason = format!("validation '{name}' failed on the merged tree: {tail_line}");
                self.count_failure(idx, &reason, saved_ref.as_deref(), "");
                self.save();
            }
            LandResult::CheckoutBlocked { paths } => {
                self.state.requeue(&id);
                self.sched.set(idx, Node::Pending);
                self.fatal = Some(format!(
                    "story {id} is ready to land, but the main checkout has local changes to {}: \
                     commit or stash them and run `ralph run` again (the story's work is kept on {})",
                    paths.join(", "),
                    story_branch(&id)
                ));
                self.save();
            }
            LandResult::Busy { lock } => {
                // Still `landing` in the state: the next run lands it.
                self.sched.set(idx, Node::Pending);
                self.fatal = Some(format!(
                    "story {id} is ready to land, but another process kept {} the whole time: \
                     let that git command finish (no git running? then the lock is stale: \
                     remove it) and run `ralph run` again to land it",
                    lock.display()
                ));
            }
            LandResult::Interrupted => {
                // Still `landing` in the state: the next run lands it.
                self.sched.set(idx, Node::Pending);
                self.reporter.line(&format!(
                    "[stop] {id} was waiting to land; the next `ralph run` lands it"
                ));
            }
            LandResult::Error(e) => {
                self.log.line(&format!("landing {id} failed: {e}"));
                self.count_failure(idx, &format!("landing failed: {e}"), None, "");
                self.save();
            }
        }
    }

    /// The merge commit carries the status edit for tracked specs; an
    /// untracked spec (or prd.json) is edited on disk instead.
    fn finish_spec_on_disk(&self, story: &Story) {
        let root = &self.shared.root;
        let head = self.shared.git.head_branch().ok().flatten();
        if head.as_deref() != Some(self.shared.target.as_str()) {
            return;
        }
        if let Some(p) = &story.spec_path {
            let path = root.join(p);
            if let Ok(text) = std::fs::read_to_string(&path) {
                let new = backlog::set_status_done(&text, &self.shared.config.status_field);
                if new != text {
                    let _ = store::write_atomic(&path, new.as_bytes());
                }
            }
        }
        if matches!(self.project.backlog.source, Source::Prd { .. }) {
            let path = root.join("prd.json");
            if let Ok(text) = std::fs::read_to_string(&path) {
                if let Some(new) = set_prd_passes(&text, &story.id) {
                    if new != text {
                        let _ = store::write_atomic(&path, new.as_bytes());
                    }
                }
            }
        }
    }

    async fn finish_run(&mut self) -> Result<i32> {
        // Each attempt was swept as it ended; this catches a process that
        // was caught mid-exec then and only got its token afterwards.
        let tag = self.shared.tag.clone();
        let late = tokio::task::spawn_blocking(move || process::kill_by_token_prefix(&tag))
            .await
            .unwrap_or(0);
        if late > 0 {
            self.log.line(&format!(
                "run end: stopped {late} process(es) that outlived their attempt"
            ));
        }
        // Worktrees are scratch space: the work lives on branches and refs.
        cleanup_worktrees(&self.shared).await;
        // A sweep may have killed a git an agent started mid-write (its
        // automatic maintenance, say): leave no stale lock behind.
        remove_stale_git_locks(&self.shared.git, &self.log);
        self.reporter.finish();
        let t = self.totals();
        let failed: Vec<String> = (0..self.sched.nodes.len())
            .filter(|&i| self.sched.nodes[i] == Node::Failed)
            .map(|i| self.story(i).id.clone())
            .collect();
        let blocked: Vec<String> = (0..self.sched.nodes.len())
            .filter(|&i| self.sched.nodes[i] == Node::Blocked)
            .map(|i| self.story(i).id.clone())
            .collect();
        self.save();
        let (usage, cost) = self.state.total_usage();
        println!(
            "RUN SUMMARY: {}/{} done, {} failed, {} blocked, {} pending · {} · {} tokens · ${:.2}",
            t.done,
            t.total,
            failed.len(),
            blocked.len(),
            self.sched.count(Node::Pending),
            timefmt::human_duration(self.reporter.elapsed().as_secs_f64()),
            crate::report::tokens(&usage),
            cost
        );
        if !failed.is_empty() {
            println!(
                "failed: {} (see .ralph/logs/<id>/; retry with `ralph run -s <id>`)",
                failed.join(", ")
            );
        }
        if !blocked.is_empty() {
            println!("blocked: {}", blocked.join(", "));
        }
        self.log.line(&format!(
            "run end: {} done, {} failed, {} blocked",
            t.done,
            failed.len(),
            blocked.len()
        ));
        if let Some(f) = &self.fatal {
            eprintln!("error: {f}");
            return Ok(EXIT_STORIES_FAILED);
        }
        if self.stopping {
            return Ok(EXIT_INTERRUPTED);
        }
        if !failed.is_empty() || !blocked.is_empty() {
            return Ok(EXIT_STORIES_FAILED);
        }
        if self.limit_reached() && self.sched.next().is_some() {
            println!("Reached iteration limit ({})", self.limit.unwrap_or(0));
            return Ok(EXIT_OK);
        }
        if t.done == t.total {
            println!("ALL STORIES COMPLETE");
        }
        Ok(EXIT_OK)
    }
}

/// Sets `passes: true` on story `id` of a prd.json text.
pub fn set_prd_passes(text: &str, id: &str) -> Option<String> {
    let mut v: serde_json::Value = serde_json::from_str(text).ok()?;
    let stories = v.get_mut("userStories")?.as_array_mut()?;
    for s in stories {
        let sid = match s.get("id") {
            Some(serde_json::Value::String(x)) => x.clone(),
            Some(other) => other.to_string(),
            None => continue,
        };
        if sid == id {
            s.as_object_mut()?
                .insert("passes".into(), serde_json::Value::Bool(true));
        }
    }
    let mut out = serde_json::to_string_pretty(&v).ok()?;
    out.push('\n');
    Some(out)
}

async fn cleanup_worktrees(shared: &Arc<Shared>) {
    let s = shared.clone();
    let _ = tokio::task::spawn_blocking(move || {
        if let Ok(list) = s.git.list_worktrees() {
            for wt in list.into_iter().filter(|wt| is_ours(&s.root, &wt.path)) {
                let _ = s.git.remove_worktree(&wt.name, &wt.path);
            }
        }
        let _ = s.git.delete_branch("ralph/validate");
        let _ = std::fs::remove_dir(worktrees_dir(&s.root));
        // Story branches go once their work is on the target or kept under a
        // ref; a branch holding unsaved work stays.
        for b in s
            .git
            .branches_with_prefix("ralph/story-")
            .unwrap_or_default()
        {
            let merged = s.git.is_merged(&b, &s.target).unwrap_or(false);
            let saved = s.git.tip_saved_under(&b, "refs/ralph/").unwrap_or(false);
            if merged || saved {
                let _ = s.git.delete_branch(&b);
            }
        }
    })
    .await;
}

/// Serialises every worktree preparation of this process.
static WORKTREE_PREP: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct AttemptCtx {
    shared: Arc<Shared>,
    story: Story,
    idx: usize,
    slot: usize,
    attempt: u32,
    iteration: u64,
    retry_context: Option<String>,
    events: mpsc::UnboundedSender<Event>,
    verbose: bool,
}

fn hook_env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Limit of the hooks other than `pre_worktree` (which has its own key).
const HOOK_TIMEOUT: Duration = Duration::from_secs(600);

async fn run_hook(
    shared: &Shared,
    name: &str,
    cmd: &str,
    cwd: PathBuf,
    env: Vec<(String, String)>,
    timeout: Duration,
) -> Option<String> {
    if cmd.trim().is_empty() {
        return None;
    }
    match process::run_shell(cmd, cwd, env, timeout).await {
        Ok(r) if r.success => None,
        Ok(r) => Some(format!(
            "hook {name} {}: {}",
            if r.timed_out {
                "timed out".to_string()
            } else {
                format!("exited {}", r.code.unwrap_or(-1))
            },
            r.tail.lines().last().unwrap_or("")
        )),
        Err(e) => Some(format!("hook {name} could not start: {e}")),
    }
    .inspect(|msg| shared.log.line(msg))
}

/// One attempt from worktree to verdict. Never panics the dispatcher: every
/// failure becomes a failed verdict with a reason.
async fn run_one_attempt(ctx: AttemptCtx, control: watch::Receiver<Control>) -> AttemptReport {
    let s = ctx.shared.clone();
    let id = ctx.story.id.clone();
    let branch = story_branch(&id);
    let wt_name = format!("slot-{}", ctx.slot);
    let wt_path = worktrees_dir(&s.root).join(&wt_name);
    let log_path = attempt_log_path(&s.root, &id, ctx.attempt);
    let mut report = AttemptReport {
        idx: ctx.idx,
        slot: ctx.slot,
        attempt: ctx.attempt,
        verdict: Verdict::Interrupted,
        usage: Usage::default(),
        cost_usd: 0.0,
        duration: Duration::ZERO,
        learnings: Vec::new(),
        saved_ref: None,
        log_path: log_path.clone(),
    };
    let started = Instant::now();
    let fail = |reason: String, kind: ResultKind| Verdict::Failed { reason, kind };

    // A previous attempt's commits on the story branch are saved before the
    // branch is moved to the new base.
    let prep = {
        let s = s.clone();
        let (branch, wt_name, wt_path, id) =
            (branch.clone(), wt_name.clone(), wt_path.clone(), id.clone());
        tokio::task::spawn_blocking(move || -> crate::gitops::Result<Oid> {
            // libgit2 does not guard concurrent worktree creation in one
            // repository (the admin dir and the checked-out check race), and
            // releasing a branch from another slot must not race that slot.
            let _guard = WORKTREE_PREP.lock().unwrap_or_else(|e| e.into_inner());
            let base = s.git.branch_tip(&s.target)?.ok_or_else(|| {
                crate::gitops::GitError::Other(format!("target branch {} vanished", s.target))
            })?;
            if s.git.branch_tip(&branch)?.is_some()
                && s.git.commits_ahead(&branch, &base)? > 0
                && !s.git.tip_saved_under(&branch, "refs/ralph/")?
            {
                let r = format!("refs/ralph/attempts/{id}/saved-{}", timefmt::now_secs());
                s.git.save_ref(&branch, &r)?;
            }
            s.git.release_branch(&branch, &worktrees_dir(&s.root))?;
            s.git.prepare_worktree(&wt_name, &wt_path, &branch, &base)?;
            Ok(base)
        })
        .await
    };
    let base = match prep {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            report.verdict = fail(
                format!("could not prepare the worktree: {e}"),
                ResultKind::Error,
            );
            return report;
        }
        Err(e) => {
            report.verdict = fail(format!("worktree task failed: {e}"), ResultKind::Error);
            return report;
        }
    };

    let root_s = s.root.display().to_string();
    let wt_s = wt_path.display().to_string();
    let spec_s = ctx
        .story
        .spec_path
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let iter_s = ctx.iteration.to_string();
    let hooks = &s.config.hooks;
    let _ = run_hook(
        &s,
        "pre_iteration",
        &hooks.pre_iteration,
        s.root.clone(),
        hook_env(&[("RALPH_ITERATION", &iter_s)]),
        HOOK_TIMEOUT,
    )
    .await;
    // Once pre_iteration has run, post_story and post_iteration run too,
    // whatever ends the attempt early.
    'attempt: {
        if let Some(msg) = run_hook(
            &s,
            "pre_worktree",
            &hooks.pre_worktree,
            wt_path.clone(),
            hook_env(&[
                ("RALPH_STORY", &id),
                ("RALPH_WORKTREE", &wt_s),
                ("RALPH_BRANCH", &branch),
                ("RALPH_PROJECT_DIR", &root_s),
            ]),
            Duration::from_secs(hooks.pre_worktree_timeout),
        )
        .await
        {
            report.verdict = fail(
                format!("pre_worktree hook failed: {msg}"),
                ResultKind::Error,
            );
            break 'attempt;
        }
        let _ = run_hook(
            &s,
            "pre_story",
            &hooks.pre_story,
            s.root.clone(),
            hook_env(&[("RALPH_STORY", &id), ("RALPH_SPEC", &spec_s)]),
            HOOK_TIMEOUT,
        )
        .await;

        let pool = if s.config.learnings_enabled {
            learnings::load(&s.root)
        } else {
            Vec::new()
        };
        let text = match build_prompt(
            &s.root,
            &s.config,
            &ctx.story,
            &pool,
            ctx.retry_context.as_deref(),
        ) {
            Ok(t) => t,
            Err(e) => {
                report.verdict = fail(format!("cannot read the spec: {e}"), ResultKind::Error);
                break 'attempt;
            }
        };
        let program = s.agent_program.clone();
        let args = agent::agent_args(&s.config);
        let token = format!("{}{}-{}-{}", s.tag, std::process::id(), id, ctx.attempt);
        let spec_run = AttemptSpec {
            program,
            args,
            cwd: wt_path.clone(),
            env: hook_env(&[
                ("RALPH_STORY", &id),
                ("RALPH_ATTEMPT", &ctx.attempt.to_string()),
                ("RALPH_WORKTREE", &wt_s),
                ("RALPH_BRANCH", &branch),
                ("RALPH_PROJECT_DIR", &root_s),
            ]),
            env_remove: agent::ENV_REMOVE.iter().map(|s| s.to_string()).collect(),
            stdin: text.into_bytes(),
            log_path: log_path.clone(),
            timeout: s.timeout,
            grace: Duration::from_secs(s.config.grace_secs),
            token,
        };
        let mut parser = OutputParser::new();
        let events = ctx.events.clone();
        let idx = ctx.idx;
        let verbose = ctx.verbose;
        let mut last_sent = Instant::now() - Duration::from_secs(1);
        let on_line = |line: &str| {
            for ev in parser.feed_line(line) {
                let text = match ev {
                    AgentEvent::ToolUse { name, summary } => format!("{name}: {summary}"),
                    // `-v` streams the whole text; the display keeps one line.
                    AgentEvent::Text(t) if verbose => t.trim().to_string(),
                    AgentEvent::Text(t) => crate::report::render_activity(&t),
                    AgentEvent::ApiRetry { attempt, error } => {
                        format!("API retry {attempt}: {error}")
                    }
                    AgentEvent::RateLimited { message, .. } => format!("rate limited: {message}"),
                    AgentEvent::Result { is_error, .. } => {
                        if is_error {
                            "finished with an error".into()
                        } else {
                            "finished".into()
                        }
                    }
                };
                if text.is_empty() {
                    continue;
                }
                // The display needs the latest activity, not every line.
                if verbose || last_sent.elapsed() >= Duration::from_millis(200) {
                    last_sent = Instant::now();
                    let _ = events.send(Event::Activity { idx, text });
                }
            }
        };
        s.log
            .line(&format!("agent start story {id} attempt {}", ctx.attempt));
        let exit = process::run_attempt(spec_run, on_line, control).await;
        let summary = parser.finish();
        report.duration = started.elapsed();
        report.usage = summary.usage;
        report.cost_usd = summary.cost_usd.unwrap_or(0.0);
        report.learnings = summary.signals.learnings.clone();
        let exit = match exit {
            Ok(e) => e,
            Err(e) => {
                let msg = if e.kind() == std::io::ErrorKind::NotFound {
                    format!("agent command '{}' not found: install it or set claude.command in .ralph/config.json", s.config.agent_command)
                } else {
                    format!("could not start the agent: {e}")
                };
                report.verdict = fail(msg, ResultKind::Error);
                break 'attempt;
            }
        };
        // The agent may have left the worktree dirty, detached or on another
        // branch: keep everything, and let the story branch hold its commits.
        {
            let s2 = s.clone();
            let (wt, b, base2, id2, n) = (
                wt_path.clone(),
                branch.clone(),
                base.clone(),
                id.clone(),
                ctx.attempt,
            );
            let kept = tokio::task::spawn_blocking(move || {
                let unc = s2
                    .git
                    .save_uncommitted(&wt, &format!("refs/ralph/attempts/{id2}/{n}-uncommitted"))
                    .ok()
                    .flatten();
                let adopted = s2
                    .git
                    .adopt_worktree_head(
                        &wt,
                        &b,
                        &base2,
                        &format!("refs/ralph/attempts/{id2}/{n}-head"),
                    )
                    .ok();
                (unc, adopted)
            })
            .await
            .unwrap_or((None, None));
            if kept.0.is_some() {
                s.log.line(&format!("story {id} attempt {}: uncommitted changes kept at refs/ralph/attempts/{id}/{}-uncommitted", ctx.attempt, ctx.attempt));
            }
            if let Some(a) = kept.1 {
                if a != crate::gitops::Adopted::Unchanged {
                    s.log.line(&format!(
                        "story {id} attempt {}: agent left its branch: {a:?}",
                        ctx.attempt
                    ));
                }
            }
        }
        let commits = {
            let s = s.clone();
            let (branch, base) = (branch.clone(), base.clone());
            tokio::task::spawn_blocking(move || s.git.commits_ahead(&branch, &base).unwrap_or(0))
                .await
                .unwrap_or(0)
        };
        report.verdict = agent::classify(
            &id,
            &exit,
            &summary,
            commits,
            s.timeout.as_secs(),
            !s.required_validation.is_empty(),
        );
        if matches!(
            report.verdict,
            Verdict::Failed { .. } | Verdict::Interrupted | Verdict::RateLimited { .. }
        ) && commits > 0
        {
            let r = format!("refs/ralph/attempts/{id}/{}", ctx.attempt);
            let s2 = s.clone();
            let (b2, r2) = (branch.clone(), r.clone());
            if let Ok(Ok(())) = tokio::task::spawn_blocking(move || s2.git.save_ref(&b2, &r2)).await
            {
                report.saved_ref = Some(r);
            }
        }
    }
    if !matches!(report.verdict, Verdict::Interrupted) {
        let result = report.verdict.kind().as_str();
        let _ = run_hook(
            &s,
            "post_story",
            &hooks.post_story,
            s.root.clone(),
            hook_env(&[("RALPH_STORY", &id), ("RALPH_RESULT", result)]),
            HOOK_TIMEOUT,
        )
        .await;
        let _ = run_hook(
            &s,
            "post_iteration",
            &hooks.post_iteration,
            s.root.clone(),
            hook_env(&[("RALPH_ITERATION", &iter_s)]),
            HOOK_TIMEOUT,
        )
        .await;
    }
    report
}

/// The merge queue: lands finished stories one at a time, in arrival order.
async fn merge_queue(
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<LandRequest>,
    events: mpsc::UnboundedSender<Event>,
    control: watch::Receiver<Control>,
) {
    while let Some(req) = rx.recv().await {
        let idx = req.idx;
        if *control.borrow() != Control::Run {
            let result = LandResult::Interrupted;
            let _ = events.send(Event::Landed { idx, result });
            continue;
        }
        let shared2 = shared.clone();
        let ctl = control.clone();
        // A panic while landing must answer the dispatcher, not hang the run.
        let result = match tokio::spawn(async move { land_one(&shared2, req, ctl).await }).await {
            Ok(r) => r,
            Err(e) => LandResult::Error(format!("internal error while landing: {e}")),
        };
        let _ = events.send(Event::Landed { idx, result });
    }
}

/// How many times a landing waits out someone else's git lock (each wait
/// is `gitops`' own, a few seconds) before the run ends and leaves the
/// story to the next run.
const LAND_BUSY_ROUNDS: u32 = 2;

async fn land_one(
    s: &Arc<Shared>,
    req: LandRequest,
    control: watch::Receiver<Control>,
) -> LandResult {
    let branch = story_branch(&req.id);
    let message = format!("merge: story {}\n\n{}\n", req.id, req.title);
    for _round in 0..5 {
        let merged = {
            let s = s.clone();
            let (branch, message) = (branch.clone(), message.clone());
            let spec_rel = req.spec_rel.clone();
            let prd_rel = req.prd_rel.clone();
            let id = req.id.clone();
            tokio::task::spawn_blocking(move || {
                let mut paths = Vec::new();
                paths.extend(spec_rel.clone());
                paths.extend(prd_rel.clone());
                let field = s.config.status_field.clone();
                let edit = move |path: &str, old: &str| -> Option<String> {
                    if Some(path) == spec_rel.as_deref() {
                        Some(backlog::set_status_done(old, &field))
                    } else if Some(path) == prd_rel.as_deref() {
                        set_prd_passes(old, &id)
                    } else {
                        None
                    }
                };
                s.git
                    .merge_story(&s.target, &branch, &message, &paths, &edit)
            })
            .await
        };
        let (commit, base) = match merged {
            Ok(Ok(MergeOutcome::Merged { commit, base })) => (commit, base),
            Ok(Ok(MergeOutcome::Conflict { paths })) => {
                let r = format!("refs/ralph/conflicts/{}/{}", req.id, req.attempt);
                let saved = s.git.save_ref(&branch, &r).ok().map(|_| r);
                return LandResult::Conflict {
                    paths,
                    saved_ref: saved,
                };
            }
            Ok(Err(e)) => return LandResult::Error(e.to_string()),
            Err(e) => return LandResult::Error(e.to_string()),
        };
        if !s.required_validation.is_empty() {
            if let Some(fail) = validate_merged(s, &req, &commit, &base, control.clone()).await {
                return fail;
            }
        }
        let intent = serde_json::json!({ "story": req.id, "base": base, "commit": commit });
        let _ = store::write_atomic(&landing_intent_path(&s.root), intent.to_string().as_bytes());
        let mut busy = 0;
        let landed = loop {
            let landed = {
                let s = s.clone();
                let (base, commit) = (base.clone(), commit.clone());
                tokio::task::spawn_blocking(move || s.git.land(&s.target, &base, &commit)).await
            };
            // The user's git holds a lock of the main checkout (a commit
            // in progress, say): not the story's failure. `land` waited a
            // while already; wait on, a bounded number of times, unless the
            // run stops.
            match &landed {
                Ok(Ok(LandOutcome::Busy { lock }))
                    if *control.borrow() == Control::Run && busy < LAND_BUSY_ROUNDS =>
                {
                    busy += 1;
                    s.log.line(&format!(
                        "landing {}: {} is held by another git process; waiting",
                        req.id,
                        lock.display()
                    ));
                }
                _ => break landed,
            }
        };
        let _ = std::fs::remove_file(landing_intent_path(&s.root));
        match landed {
            Ok(Ok(LandOutcome::Landed)) => return LandResult::Landed { commit },
            Ok(Ok(LandOutcome::TargetMoved { .. })) => continue,
            Ok(Ok(LandOutcome::CheckoutBlocked { paths })) => {
                return LandResult::CheckoutBlocked { paths }
            }
            Ok(Ok(LandOutcome::Busy { .. })) if *control.borrow() != Control::Run => {
                return LandResult::Interrupted
            }
            Ok(Ok(LandOutcome::Busy { lock })) => return LandResult::Busy { lock },
            Ok(Err(e)) => return LandResult::Error(e.to_string()),
            Err(e) => return LandResult::Error(e.to_string()),
        }
    }
    LandResult::Error(format!(
        "{} kept moving while landing; will retry",
        s.target
    ))
}

/// Runs the required validation commands on the merged tree, in a worktree
/// of its own; `Some` is the failure.
async fn validate_merged(
    s: &Arc<Shared>,
    req: &LandRequest,
    commit: &Oid,
    base: &Oid,
    control: watch::Receiver<Control>,
) -> Option<LandResult> {
    let path = worktrees_dir(&s.root).join("validate");
    let prep = {
        let s = s.clone();
        let (path, commit, base) = (path.clone(), commit.clone(), base.clone());
        tokio::task::spawn_blocking(move || {
            let _guard = WORKTREE_PREP.lock().unwrap_or_else(|e| e.into_inner());
            s.git
                .prepare_worktree("validate", &path, "ralph/validate", &base)?;
            s.git.checkout_detached(&path, &commit)
        })
        .await
    };
    match prep {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            return Some(LandResult::Error(format!(
                "preparing the validation worktree: {e}"
            )))
        }
        Err(e) => return Some(LandResult::Error(e.to_string())),
    }
    for v in &s.required_validation {
        let env = hook_env(&[
            ("RALPH_STORY", &req.id),
            ("RALPH_PROJECT_DIR", &s.root.display().to_string()),
        ]);
        let run =
            process::run_shell_controlled(&v.cmd, path.clone(), env, s.timeout, control.clone());
        match run.await {
            Ok(r) if r.success => {}
            Ok(r) if r.interrupted => return Some(LandResult::Interrupted),
            Ok(r) => {
                let rf = format!("refs/ralph/attempts/{}/{}", req.id, req.attempt);
                let saved = s.git.save_ref(&story_branch(&req.id), &rf).ok().map(|_| rf);
                return Some(LandResult::ValidationFailed {
                    name: v.name.clone(),
                    tail: r.tail,
                    saved_ref: saved,
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

/// `ralph run -d`: the plan and each prompt's head; nothing is changed.
fn dry_run(project: &Project, opts: &RunOptions) -> Result<i32> {
    let state = store::load_state(&project.root).map_err(|p| RalphError::BadInput(vec![p]))?;
    let b = &project.backlog;
    let order: Vec<usize> = match &opts.story {
        Some(s) => b.index_of(s).into_iter().collect(),
        None => {
            let first = opts
                .resume
                .as_ref()
                .and_then(|r| b.index_of(r))
                .unwrap_or(0);
            project
                .dag
                .topo_order()
                .into_iter()
                .filter(|&i| i >= first)
                .collect()
        }
    };
    println!(
        "[DRY RUN] plan ({} stories; nothing will be changed):",
        order.len()
    );
    let all_learnings = learnings::load(&project.root);
    for i in order {
        let s = &b.stories[i];
        if state.is_done(&s.id) {
            println!("  [done] {} {}", s.id, s.title);
            continue;
        }
        let waits: Vec<&str> = project
            .dag
            .waits_for(i)
            .iter()
            .map(|&w| b.stories[w].id.as_str())
            .collect();
        println!(
            "  [    ] {} {}{}",
            s.id,
            s.title,
            if waits.is_empty() {
                String::new()
            } else {
                format!("  (after {})", waits.join(", "))
            }
        );
        let text = build_prompt(&project.root, &project.config, s, &all_learnings, None)
            .unwrap_or_else(|e| format!("(cannot read the spec: {e})"));
        println!("  [DRY RUN] prompt head:");
        for line in text.lines().take(12) {
            println!("    | {line}");
        }
    }
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_paths_come_from_the_one_pattern_list() {
        for p in [
            ".ralph/state.json",
            ".ralph/landing.json",
            ".ralph/logs/1.1/attempt-1.log",
            ".ralph/worktrees/slot-0/x",
            ".ralph/.state.json.tmp-42",
            "progress.txt",
            "ralph.log",
        ] {
            assert!(is_runtime_path(p), "{p}");
        }
        for p in [
            ".ralph/stories.txt",
            ".ralph/logsx",
            "src/progress.txt",
            "specs/a.md",
        ] {
            assert!(!is_runtime_path(p), "{p}");
        }
    }
}
