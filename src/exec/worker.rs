//! `ralph worker attempt SPEC`: one attempt on a cluster node, started by a
//! Ray job the coordinator submitted (`exec/ray.rs`). It runs the attempt
//! exactly as the local executor does (`exec::local::LocalExecutor`: slot worktree,
//! hooks, prompt, the agent in its group with its timeout, keeping
//! leftovers, the verdict), in a node-local clone of the relay, and ends
//! with one machine-readable line: `REPORT_MARKER` + the report as JSON.
//!
//! Work travels by git only: the base and a fix-up's kept work are fetched
//! from the relay, the story branch and the refs keeping what the agent
//! left are pushed back under `refs/ralph/<project>/`.
//!
//! Node-local cache: `$RALPH_WORKER_CACHE` (else `~/.cache/ralph/worker`)
//! `/<project>/slot-<k>/repo`, one clone per slot, each held by a file lock
//! while an attempt uses it: several attempts on one node never share a
//! repository, and a slot's build directories stay warm between attempts.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};

use crate::agent::{Backend, FaultKind, Verdict};
use crate::control::Control;
use crate::exec::local::LocalExecutor;
use crate::executor::{AttemptEnv, AttemptReport, AttemptRequest, Executor};
use crate::gitops::{relay, Git, Oid};
use crate::process;
use crate::project;
use crate::state::{AttemptKind, Note};
use crate::store::TechLog;

mod validate;
pub(crate) use validate::{validate, ValidateReport, ValidateSpec, ValidationCmd};

/// The start of the worker's last stdout line.
pub(crate) const REPORT_MARKER: &str = "ralph-worker-report: ";
/// The start of a line saying what the agent is doing (for the
/// coordinator's display; the latest one counts).
pub(crate) const ACTIVITY_MARKER: &str = "ralph-worker-activity: ";

/// How long a worker waits for the base the coordinator pushes while Ray
/// starts the job.
const BASE_WAIT: Duration = Duration::from_secs(60);

/// The start of the line saying where the worker runs (`<node>/<slot>`).
pub(crate) const NODE_MARKER: &str = "ralph-worker-node: ";

/// ralph's version as coordinator and worker must share it.
pub(crate) fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// What the coordinator hands a worker (in the job's entrypoint, hex):
/// names and commits only, never a secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct WorkerSpec {
    pub(crate) version: String,
    /// The relay's URL as the nodes reach it (no credentials).
    pub(crate) relay_url: String,
    /// The coordinator's project tag: the relay namespace.
    pub(crate) tag: String,
    /// The project's directory inside its repository ("" at the top).
    pub(crate) subdir: String,
    pub(crate) target: String,
    pub(crate) id: String,
    pub(crate) attempt: u32,
    pub(crate) iteration: u64,
    pub(crate) kind: AttemptKind,
    pub(crate) note: Option<Note>,
    pub(crate) resume: Option<String>,
    pub(crate) agent: String,
    /// The model it runs on (`AttemptRequest::model`), and its postmortem's.
    #[serde(default)]
    pub(crate) model: Option<String>,
    #[serde(default)]
    pub(crate) postmortem_model: Option<String>,
    pub(crate) timeout_secs: u64,
    /// The target tip pushed to the relay's base ref.
    pub(crate) base: Oid,
    /// The worker slot to take when it is free: the one whose worktree
    /// holds the session a fix-up resumes.
    #[serde(default)]
    pub(crate) prefer_slot: Option<usize>,
    /// The coordinator pushed its snapshot of the issue tracker's backlog
    /// to the relay's tracker ref: the node reads it, not the tracker.
    #[serde(default)]
    pub(crate) tracker: bool,
    /// Best of N (issue 36): the racing candidate this attempt is; its
    /// branch, relay refs, kept refs, log and token are its own
    /// (`project::attempt_key`).
    #[serde(default)]
    pub(crate) candidate: Option<u32>,
}

impl WorkerSpec {
    /// What the attempt's git names are made of (`project::attempt_key`).
    pub(crate) fn key(&self) -> String {
        project::attempt_key(&self.id, self.candidate)
    }

    pub(crate) fn encode(&self) -> String {
        to_hex(self)
    }

    pub(crate) fn decode(hex: &str) -> Result<WorkerSpec, String> {
        from_hex(hex)
    }
}

/// A spec as a job's entrypoint carries it: JSON in hex (no quoting to get
/// wrong in a shell line).
pub(crate) fn to_hex(spec: &impl Serialize) -> String {
    let json = serde_json::to_vec(spec).unwrap_or_default();
    json.iter().map(|b| format!("{b:02x}")).collect()
}

/// The spec `to_hex` made.
pub(crate) fn from_hex<T: serde::de::DeserializeOwned>(hex: &str) -> Result<T, String> {
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| "the spec is not hex".to_string())
        })
        .collect::<Result<Vec<u8>, String>>()?;
    serde_json::from_slice(&bytes).map_err(|e| format!("the spec is not a worker spec: {e}"))
}

/// What a worker answers: the attempt's report itself (`AttemptReport`,
/// serde's form of the real type: no copy of it to keep in step), where
/// its work went on the relay, and its log. Coordinator and worker are the
/// same ralph (see `AttemptReport`): no compatibility across versions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WorkerReport {
    pub(crate) report: AttemptReport,
    /// The story branch's tip, pushed to the relay's out ref.
    pub(crate) out: Option<Oid>,
    /// The node that ran it (`node_name`).
    pub(crate) node: String,
    /// The worker slot (node-local clone) it ran in.
    #[serde(default)]
    pub(crate) slot: usize,
    /// The base it was given (`WorkerSpec::base`): what a coordinator that
    /// re-attached checks the work against.
    #[serde(default)]
    pub(crate) base: Oid,
    /// Where the worker's time went, in milliseconds by phase (the
    /// coordinator logs it: the per-job overhead's breakdown).
    #[serde(default)]
    pub(crate) phases: Vec<(String, u64)>,
    /// When the worker started and ended (Unix milliseconds): with the
    /// coordinator's own clock, the job's start and end latency.
    #[serde(default)]
    pub(crate) span_ms: (u64, u64),
    /// The agent's commits were pushed to the relay's progress ref on the
    /// way (a ref to clear).
    #[serde(default)]
    pub(crate) progress: bool,
    /// The attempt's log.
    pub(crate) log: String,
}

impl WorkerReport {
    pub(crate) fn of(report: AttemptReport, out: Option<Oid>, log: String) -> WorkerReport {
        WorkerReport {
            report,
            out,
            node: node_name(),
            slot: 0,
            base: Oid::new(),
            phases: Vec::new(),
            span_ms: (0, 0),
            progress: false,
            log,
        }
    }

    /// The coordinator's report for `req`: the worker's, with the
    /// request's own numbers, model and log, and where it ran.
    pub(crate) fn into_report(self, req: &AttemptRequest, log_rel: String) -> AttemptReport {
        let mut r = self.report;
        r.idx = req.idx;
        r.slot = req.slot;
        r.attempt = req.attempt;
        r.iteration = req.iteration;
        r.model = req.model.clone();
        r.candidate = req.candidate;
        r.log_rel = log_rel;
        r.node = (!self.node.is_empty()).then(|| format!("{}/{}", self.node, self.slot));
        r
    }
}

/// Where the job runs, `<node>/<worker slot>`, from its log.
pub(crate) fn node_in(logs: &str) -> Option<&str> {
    logs.lines().find_map(|l| l.strip_prefix(NODE_MARKER))
}

/// The latest activity line in a job's log.
pub(crate) fn activity_in(logs: &str) -> Option<&str> {
    logs.lines()
        .rev()
        .find_map(|l| l.strip_prefix(ACTIVITY_MARKER))
}

/// The report in a job's log: its last line carrying the marker (`None`:
/// no such line). One that does not read (a verdict or agent this ralph
/// does not know, say) is an error saying why.
pub(crate) fn report_in(logs: &str) -> Option<Result<WorkerReport, String>> {
    report_in_as(logs)
}

/// `report_in` for any worker's report (an attempt's, a validation's).
pub(crate) fn report_in_as<T: serde::de::DeserializeOwned>(
    logs: &str,
) -> Option<Result<T, String>> {
    logs.lines()
        .rev()
        .find_map(|l| l.strip_prefix(REPORT_MARKER))
        .map(|j| {
            serde_json::from_str(j).map_err(|e| format!("the worker's report does not read: {e}"))
        })
}

pub(crate) fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The node's name as ralph reports it and as its per-node resource
/// (`ralph_node_<name>`) is named: `$RALPH_NODE`, else the host name.
pub(crate) fn node_name() -> String {
    std::env::var("RALPH_NODE")
        .ok()
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(hostname)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("RALPH_WORKER_CACHE") {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("ralph").join("worker")
}

/// The first free slot of this project's cache on this node, locked for as
/// long as the returned file lives.
fn take_slot(
    project_dir: &Path,
    prefer: Option<usize>,
) -> std::io::Result<(usize, PathBuf, std::fs::File)> {
    std::fs::create_dir_all(project_dir)?;
    for k in prefer.into_iter().chain(0..) {
        let lock_path = project_dir.join(format!("slot-{k}.lock"));
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)?;
        if f.try_lock().is_ok() {
            return Ok((k, project_dir.join(format!("slot-{k}")), f));
        }
    }
    unreachable!("an unbounded range ends only by returning")
}

/// Runs `git` with `args` in `cwd`; the end of its output on failure.
/// Where a worker's slot repository keeps the tracker snapshot it fetched.
const TRACKER_REF: &str = "refs/ralph-relay/tracker";

/// The coordinator's tracker snapshot (fetched to `TRACKER_REF`) written
/// where `project::load` reads it.
fn write_tracker_snapshot(repo: &Path, root: &Path) -> Result<(), String> {
    let args = [
        "-C".to_string(),
        repo.display().to_string(),
        "cat-file".into(),
        "blob".into(),
        TRACKER_REF.into(),
    ];
    let out = process::run_captured("git", &args, b"", Duration::from_secs(60))
        .map_err(|e| format!("git could not start: {e}"))?;
    if out.code != Some(0) {
        return Err(format!("the tracker's snapshot: {}", out.stderr.trim()));
    }
    let path = crate::paths::tracker_snapshot(root);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(&path, &out.stdout).map_err(|e| format!("{}: {e}", path.display()))
}

async fn run_git(cwd: &Path, args: &[&str]) -> Result<(), String> {
    let q = crate::prompt::shell_quote;
    let cmd = std::iter::once("git".to_string())
        .chain(args.iter().map(|a| q(a)))
        .collect::<Vec<_>>()
        .join(" ");
    match process::run_shell(
        &cmd,
        cwd.to_path_buf(),
        Vec::new(),
        Duration::from_secs(600),
    )
    .await
    {
        Ok(r) if r.success => Ok(()),
        Ok(r) => Err(format!("`{cmd}` failed: {}", r.tail.trim())),
        Err(e) => Err(format!("`{cmd}` could not start: {e}")),
    }
}

/// `ralph worker attempt SPEC`: prints the report line; the exit code is 0
/// whenever a report was printed (the verdict is in it).
pub(crate) fn attempt(spec_hex: &str) -> anyhow::Result<i32> {
    let started = epoch_ms();
    let spec = WorkerSpec::decode(spec_hex.trim()).map_err(anyhow::Error::msg)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut wire = rt.block_on(run(&spec));
    rt.shutdown_timeout(Duration::from_secs(1));
    wire.span_ms = (started, epoch_ms());
    println!(
        "{REPORT_MARKER}{}",
        serde_json::to_string(&wire).unwrap_or_default()
    );
    Ok(0)
}

fn fault(reason: String, kind: FaultKind) -> WorkerReport {
    WorkerReport::of(
        AttemptReport::nothing(Verdict::Fault { reason, kind }),
        None,
        String::new(),
    )
}

async fn run(spec: &WorkerSpec) -> WorkerReport {
    if spec.version != version() {
        return fault(
            format!(
                "the worker on {} is ralph {} but the coordinator is ralph {}: install the same \
                 version on the nodes (executor.ray.ralph_path) or leave ralph_path empty to \
                 upload it with each job",
                hostname(),
                version(),
                spec.version
            ),
            FaultKind::NeedsPerson,
        );
    }
    let project_dir = cache_dir().join(spec.tag.trim_end_matches('-'));
    let (slot, slot_dir, _lock) = match take_slot(&project_dir, spec.prefer_slot) {
        Ok(s) => s,
        Err(e) => {
            return fault(
                format!(
                    "cannot use the worker cache {} on {}: {e}",
                    project_dir.display(),
                    hostname()
                ),
                FaultKind::Transient,
            )
        }
    };
    println!("{NODE_MARKER}{}/{slot}", node_name());
    let mut wire = match attempt_in_slot(spec, slot, &slot_dir).await {
        Ok(w) => w,
        Err(e) => fault(format!("on {}: {e}", node_name()), FaultKind::Transient),
    };
    wire.slot = slot;
    wire
}

/// The attempt's base (and a fix-up's work, and the tracker's snapshot)
/// fetched from the relay into the slot's repository, the base checked out.
async fn fetch_base(
    spec: &WorkerSpec,
    repo: &Path,
    refs: &relay::RelayRefs,
    phases: &mut Phases,
) -> Result<(), String> {
    let target_ref = format!("refs/heads/{}", spec.target);
    let mut fetch = vec![
        "fetch".to_string(),
        "--quiet".into(),
        "--no-tags".into(),
        "--force".into(),
        "--update-head-ok".into(),
        spec.relay_url.clone(),
        format!("{}:{target_ref}", refs.base),
    ];
    let fixup_work = spec
        .note
        .as_ref()
        .and_then(|n| n.fixup.as_ref())
        .filter(|_| spec.kind == AttemptKind::Fixup)
        .map(|f| f.work.clone());
    if let Some(work) = &fixup_work {
        fetch.push(format!("{}:{work}", refs.work));
    }
    if spec.tracker {
        fetch.push(format!("+{}:{TRACKER_REF}", refs.tracker));
    }
    fetch_waiting(repo, &fetch).await?;
    phases.mark("fetch");
    run_git(
        repo,
        &["checkout", "--quiet", "--force", "--detach", &target_ref],
    )
    .await?;
    phases.mark("checkout");
    Ok(())
}

/// Runs the `fetch` git arguments in `repo` until they succeed: the
/// coordinator pushes what it hands over while Ray starts this job, and
/// on a busy relay it may not be there yet.
async fn fetch_waiting(repo: &Path, fetch: &[String]) -> Result<(), String> {
    let fetch_args: Vec<&str> = fetch.iter().map(String::as_str).collect();
    let waited = std::time::Instant::now();
    let mut pause = Duration::from_millis(100);
    loop {
        match run_git(repo, &fetch_args).await {
            Ok(()) => return Ok(()),
            Err(e) if waited.elapsed() > BASE_WAIT => return Err(e),
            Err(_) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// Everything the coordinator needs back on the relay: the story branch
/// (its tip, returned) and the refs keeping what the agent left.
async fn push_back(
    spec: &WorkerSpec,
    git: &Git,
    repo: &Path,
    refs: &relay::RelayRefs,
    report: &crate::executor::AttemptReport,
) -> Result<Option<Oid>, String> {
    let branch = project::story_branch(&spec.key());
    let out = git.branch_tip(&branch).ok().flatten();
    let mut push = vec![
        "push".to_string(),
        "--quiet".into(),
        "--force".into(),
        spec.relay_url.clone(),
    ];
    if out.is_some() {
        push.push(format!("refs/heads/{branch}:{}", refs.out));
    }
    for k in report.kept.iter().chain(report.saved_ref.iter()) {
        if let Some(remote) = relay::kept_on_relay(refs, k) {
            push.push(format!("{k}:{remote}"));
        }
    }
    if push.len() > 4 {
        let push_args: Vec<&str> = push.iter().map(String::as_str).collect();
        run_git(repo, &push_args).await?;
    }
    Ok(out)
}

async fn attempt_in_slot(
    spec: &WorkerSpec,
    slot: usize,
    slot_dir: &Path,
) -> Result<WorkerReport, String> {
    let mut phases = Phases::new();
    let repo = slot_dir.join("repo");
    std::fs::create_dir_all(&repo).map_err(|e| format!("{}: {e}", repo.display()))?;
    if !repo.join(".git").exists() {
        run_git(&repo, &["init", "--quiet"]).await?;
    }
    let refs = relay::relay_refs(&spec.tag, &spec.key(), spec.attempt);
    fetch_base(spec, &repo, &refs, &mut phases).await?;

    let root = if spec.subdir.is_empty() {
        repo.clone()
    } else {
        repo.join(&spec.subdir)
    };
    let root = root
        .canonicalize()
        .map_err(|e| format!("{}: {e}", root.display()))?;
    // A node's checkout holds no snapshot of an issue tracker's backlog:
    // the coordinator's comes with the base (the node needs no tracker
    // token); without it the worker reads the tracker itself once.
    if spec.tracker {
        write_tracker_snapshot(&repo, &root)?;
    } else if !crate::paths::tracker_snapshot(&root).exists() {
        let _ = project::refresh_tracker(&root);
    }
    let project = project::load(&root).map_err(|problems| {
        let shown: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        format!(
            "the project at the base does not load: {}",
            shown.join("; ")
        )
    })?;
    let Some(story) = project
        .backlog
        .stories
        .iter()
        .find(|s| s.id == spec.id)
        .cloned()
    else {
        return Err(format!(
            "story {} is not in the backlog at the base",
            spec.id
        ));
    };
    let backend = Backend::parse(&spec.agent)
        .ok_or_else(|| format!("agent {:?} is not one this ralph knows", spec.agent))?;
    let (command, args) = crate::agent::invocation(&project.config.agent, backend);
    let Some(program) = super::agents::find_agent(&root, &command) else {
        return Ok(fault(
            format!(
                "the {} agent's command '{command}' is not installed (or not executable) on \
                 node {}",
                backend.name(),
                hostname()
            ),
            FaultKind::NeedsPerson,
        ));
    };
    let git = Git::open(&root).map_err(|e| e.to_string())?;
    // Its own token prefix (from the slot's path): a coordinator's sweep on
    // the same host never hits it, and what a dead worker of this slot left
    // running is ours to end, holding the slot's lock.
    let tag = project::project_tag(&root);
    process::set_shell_token_prefix(&tag);
    process::kill_by_token_prefix(&tag);
    let config = project.config.clone();
    // The node seals its attempt as a local run would (SPEC 9): the
    // allowlisted environment, redaction, bubblewrap where it works here.
    let seal = crate::executor::RunSeal::new(&config, &[backend])?;
    let ctx = Arc::new(AttemptEnv::new(
        root.clone(),
        config,
        git,
        spec.target.clone(),
        Duration::from_secs(spec.timeout_secs),
        TechLog::new(Some(slot_dir.join("ralph.log"))),
        [(backend, (program, args))].into_iter().collect(),
        seal,
    ));
    let req = AttemptRequest {
        idx: 0,
        slot: 0,
        attempt: spec.attempt,
        iteration: spec.iteration,
        kind: spec.kind,
        note: spec.note.clone(),
        resume: spec.resume.clone(),
        resume_on: None,
        agent: backend,
        model: spec.model.clone(),
        postmortem_model: spec.postmortem_model.clone(),
        candidate: spec.candidate,
    };
    ctx.log.line(&format!(
        "worker slot {slot}: story {} attempt {} from {}",
        spec.id, spec.attempt, spec.base
    ));
    let (control_tx, control_rx) = watch::channel(Control::Run);
    let signals = tokio::spawn(forward_signals(control_tx));
    let (activity_tx, mut activity_rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(ev) = activity_rx.recv().await {
            if let crate::executor::AttemptEvent::Activity { text, .. } = ev {
                println!("{ACTIVITY_MARKER}{}", text.replace('\n', " "));
            }
        }
    });
    let exec = LocalExecutor::new(ctx.clone(), false);
    phases.mark("load");
    // The agent's commits go to the relay as it makes them: a node that
    // dies takes only what was not committed yet.
    let pushed_progress = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let progress = tokio::spawn(push_progress(
        crate::paths::slot_worktree(&root, 0).1,
        repo.clone(),
        spec.relay_url.clone(),
        refs.progress.clone(),
        spec.base.clone(),
        pushed_progress.clone(),
    ));
    let report = exec.run(req, story, control_rx, activity_tx).await;
    signals.abort();
    progress.abort();
    let _ = progress.await;
    phases.mark("attempt");

    let out = push_back(spec, &ctx.git, &repo, &refs, &report).await?;
    phases.mark("push");
    let log_path = crate::paths::log_of(&root, &spec.id, spec.attempt, spec.candidate);
    let log = std::fs::read(&log_path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let mut wire = WorkerReport::of(report, out, log);
    wire.base = spec.base.clone();
    wire.phases = phases.done;
    wire.progress = pushed_progress.load(std::sync::atomic::Ordering::SeqCst);
    Ok(wire)
}

/// Wall-clock time by phase, each from the end of the one before.
pub(crate) struct Phases {
    last: std::time::Instant,
    pub(crate) done: Vec<(String, u64)>,
}

impl Phases {
    pub(crate) fn new() -> Phases {
        Phases {
            last: std::time::Instant::now(),
            done: Vec::new(),
        }
    }

    /// Ends phase `name` now.
    pub(crate) fn mark(&mut self, name: &str) {
        let now = std::time::Instant::now();
        let ms = now.duration_since(self.last).as_millis() as u64;
        self.done.push((name.to_string(), ms));
        self.last = now;
    }
}

/// Phases as one log line's words: `fetch 120 ms, load 30 ms`.
pub(crate) fn phases_text(phases: &[(String, u64)]) -> String {
    phases
        .iter()
        .map(|(n, ms)| format!("{n} {ms} ms"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How often a running attempt's commits are looked for.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Pushes the HEAD of the attempt's worktree to the relay's progress ref
/// whenever it moved (one `git push` per new commit seen, nothing when the
/// agent commits nothing).
async fn push_progress(
    worktree: PathBuf,
    repo: PathBuf,
    relay_url: String,
    progress_ref: String,
    base: Oid,
    pushed: Arc<std::sync::atomic::AtomicBool>,
) {
    let mut last = base;
    loop {
        tokio::time::sleep(PROGRESS_EVERY).await;
        let Some(head) = Git::head_of(&worktree) else {
            continue;
        };
        if head == last {
            continue;
        }
        let refspec = format!("{head}:{progress_ref}");
        let args = ["push", "--quiet", "--force", relay_url.as_str(), &refspec];
        // The flag first: a push cut short by the attempt's end may still
        // have reached the relay.
        pushed.store(true, std::sync::atomic::Ordering::SeqCst);
        if run_git(&repo, &args).await.is_ok() {
            last = head;
        }
    }
}

/// Ray stops a job with SIGTERM (then SIGKILL): the first asks the agent to
/// stop, a second kills it.
async fn forward_signals(tx: watch::Sender<Control>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return;
    };
    let mut seen = 0;
    loop {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        seen += 1;
        let _ = tx.send(if seen == 1 {
            Control::Stop
        } else {
            Control::Kill
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::ResultKind;

    fn spec() -> WorkerSpec {
        WorkerSpec {
            version: version().into(),
            relay_url: "git://127.0.0.1:9418/relay.git".into(),
            tag: "ralph-1a2b3c4d-".into(),
            subdir: String::new(),
            target: "main".into(),
            id: "1.2".into(),
            attempt: 2,
            iteration: 5,
            kind: AttemptKind::Fixup,
            note: Some(Note {
                text: "it's \"quoted\" and\nmultiline".into(),
                ..Note::default()
            }),
            resume: None,
            agent: "claude".into(),
            model: Some("haiku".into()),
            postmortem_model: None,
            timeout_secs: 60,
            base: "0".repeat(40),
            prefer_slot: Some(1),
            tracker: false,
            candidate: Some(2),
        }
    }

    #[test]
    fn a_spec_survives_its_encoding() {
        let s = spec();
        let hex = s.encode();
        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(WorkerSpec::decode(&hex).unwrap(), s);
        assert!(WorkerSpec::decode("zz").is_err());
    }

    /// Every verdict, with every result and fault kind.
    fn every_verdict() -> Vec<Verdict> {
        let mut all = vec![
            Verdict::Done,
            Verdict::Tentative,
            Verdict::RateLimited { resets_at: Some(7) },
            Verdict::RateLimited { resets_at: None },
            Verdict::Interrupted,
            Verdict::RootRefusal,
        ];
        for kind in [
            ResultKind::Done,
            ResultKind::Fail,
            ResultKind::Timeout,
            ResultKind::Error,
            ResultKind::NoSignal,
        ] {
            all.push(Verdict::Failed {
                reason: "r".into(),
                kind,
            });
        }
        for kind in [
            FaultKind::Transient,
            FaultKind::Api,
            FaultKind::NeedsPerson,
            FaultKind::StopNow,
        ] {
            all.push(Verdict::Fault {
                reason: "f".into(),
                kind,
            });
        }
        all
    }

    /// A worker's whole report line, as the coordinator reads it.
    fn crossed(w: &WorkerReport) -> Result<WorkerReport, String> {
        let line = format!("{REPORT_MARKER}{}\n", serde_json::to_string(w).unwrap());
        report_in(&line).expect("a marked line")
    }

    #[test]
    fn every_verdict_crosses_the_wire() {
        for v in every_verdict() {
            let w = WorkerReport::of(AttemptReport::nothing(v.clone()), None, String::new());
            let back = crossed(&w).unwrap();
            assert_eq!(back.report.verdict, v);
        }
        // A result kind keeps its `RALPH_RESULT` name on the wire.
        let json = serde_json::to_string(&Verdict::Failed {
            reason: "r".into(),
            kind: ResultKind::NoSignal,
        })
        .unwrap();
        assert!(json.contains(r#""verdict":"failed""#), "{json}");
        assert!(json.contains(r#""kind":"no_signal""#), "{json}");
    }

    #[test]
    fn every_field_of_the_report_crosses_the_wire() {
        let mut r = AttemptReport::nothing(Verdict::Done);
        r.usage.input_tokens = 3;
        r.cost_usd = 0.5;
        r.cost_unknown = true;
        r.duration = Duration::from_millis(1234);
        r.learnings = vec!["l".into()];
        r.saved_ref = Some("refs/ralph/x".into());
        r.agent = Some("codex");
        r.limit_warning = Some(None);
        r.committed_for_agent = Some((2, "a".repeat(40)));
        r.kind = AttemptKind::Redo;
        r.session_id = Some("s".into());
        r.resumed = true;
        r.kept = vec!["refs/ralph/k".into()];
        r.children = vec!["1.1.1".into()];
        let mut w = WorkerReport::of(r.clone(), Some("b".repeat(40)), "log".into());
        w.slot = 3;
        let back = crossed(&w).unwrap();
        let b = &back.report;
        assert_eq!(
            (b.usage, b.cost_usd, b.cost_unknown, b.duration),
            (r.usage, r.cost_usd, r.cost_unknown, r.duration)
        );
        assert_eq!((&b.learnings, &b.saved_ref), (&r.learnings, &r.saved_ref));
        assert_eq!((b.agent, b.limit_warning), (Some("codex"), Some(None)));
        assert_eq!(b.committed_for_agent, r.committed_for_agent);
        assert_eq!(
            (b.kind, &b.session_id, b.resumed),
            (r.kind, &r.session_id, true)
        );
        assert_eq!((&b.kept, &b.children), (&r.kept, &r.children));
        assert_eq!(
            (&back.out, back.slot, back.log.as_str()),
            (&w.out, 3, "log")
        );
        // A warning without its reset is not "no warning".
        w.report.limit_warning = None;
        assert_eq!(crossed(&w).unwrap().report.limit_warning, None);
        w.report.limit_warning = Some(Some(9));
        assert_eq!(crossed(&w).unwrap().report.limit_warning, Some(Some(9)));
    }

    #[test]
    fn an_unknown_kind_is_an_error_naming_it() {
        let w = fault("x".into(), FaultKind::NeedsPerson);
        let json = serde_json::to_string(&w).unwrap();
        assert!(json.contains(r#""kind":"needs_person""#), "{json}");
        for (known, unknown) in [
            (r#""kind":"needs_person""#, r#""kind":"on_fire""#),
            (r#""verdict":"fault""#, r#""verdict":"exploded""#),
        ] {
            let line = format!("{REPORT_MARKER}{}", json.replacen(known, unknown, 1));
            let err = report_in(&line).unwrap().unwrap_err();
            let name = unknown.split(':').nth(1).unwrap().trim_matches('"');
            assert!(err.contains(&format!("`{name}`")), "{err}");
        }
        let mut w = WorkerReport::of(AttemptReport::nothing(Verdict::Done), None, String::new());
        w.report.agent = Some("claude");
        let json = serde_json::to_string(&w).unwrap();
        let line = format!(
            "{REPORT_MARKER}{}",
            json.replacen(r#""agent":"claude""#, r#""agent":"hal""#, 1)
        );
        let err = report_in(&line).unwrap().unwrap_err();
        assert!(err.contains("unknown agent `hal`"), "{err}");
    }

    #[test]
    fn the_report_is_the_last_marked_line() {
        // A verdict's `kind` and the attempt's `kind` in one report.
        let mut w = fault("x".into(), FaultKind::Transient);
        w.log = "line\nralph-worker-report: not this one".into();
        let logs = format!(
            "noise\n{REPORT_MARKER}{{\"old\":1}}\n{REPORT_MARKER}{}\n",
            serde_json::to_string(&w).unwrap()
        );
        let read = report_in(&logs).unwrap().unwrap();
        assert_eq!(read.report.verdict, w.report.verdict);
        assert_eq!(read.log, w.log);
        assert!(report_in("no report\n").is_none());
        let logs = format!("{ACTIVITY_MARKER}Bash ls\n{ACTIVITY_MARKER}Edit a.rs\nother\n");
        assert_eq!(activity_in(&logs), Some("Edit a.rs"));
        assert_eq!(activity_in("none"), None);
    }
}
