//! `executor.kind: ray` (issue 23): each attempt is a job on a Ray cluster,
//! through the dashboard's Jobs REST API. The coordinator (`ralph run`)
//! keeps scheduling, the state and the merge queue; a job runs `ralph
//! worker attempt` (`exec/worker.rs`) on some node; work travels by git
//! through the relay remote (`gitops/relay.rs`).
//!
//! - `submission_id` = `<project tag><story>-<attempt>`: a coordinator that
//!   crashed finds its jobs again (`Orphans`), re-attaches to a running one
//!   and collects a finished one instead of starting the story again.
//! - Stop and Ctrl-C stop the job (Ray kills its process tree); the worker
//!   enforces the timeout, and the coordinator stops a job still running at
//!   timeout + grace (a dead-man check for a worker that cannot).
//! - A job that ends without a report (its node or worker died) is a fault
//!   outside the story: not counted, retried.
//! - The cluster token is read from the environment variable the config
//!   names and sent as `Authorization: Bearer`; it is never written
//!   anywhere, and nothing secret goes into a job spec (the cluster shows
//!   specs to anyone who can list jobs).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::agent::{FaultKind, Verdict};
use crate::backlog::Story;
use crate::config::RaySettings;
use crate::control::Control;
use crate::error::RalphError;
use crate::gitops::{relay, Oid};
use crate::process;
use crate::project::{self, KeptRef};
// The attempts' environment and events under the names the run gave them.
use crate::executor::{
    AttemptEnv as RunContext, AttemptEvent as Event, AttemptReport, AttemptRequest,
};

pub(crate) use super::cluster::{
    job_spec, node_resource, split_node, submission_id, Cluster, Orphan,
};
use super::worker::{self, WorkerSpec};

/// How often a running job is looked at: its end is seen this late at
/// most (a status call is cheap; the report waits on it).
pub(super) const POLL: Duration = Duration::from_millis(250);
/// Every how many polls the job's log is read for the agent's activity.
const ACTIVITY_EVERY: u32 = 4;
/// How much of its node's resource a job pinned to a node asks: any
/// amount places it there, and a tiny one never keeps others off.
const PIN: f64 = 0.001;
/// How long a job pinned to a node may wait to start: a node that died a
/// moment ago may still look alive to the cluster.
const PIN_WAIT: Duration = Duration::from_secs(90);
/// Beyond the attempt's timeout: fetching, hooks, pushing, a stop's grace.
const DEAD_MAN_SLACK: Duration = Duration::from_secs(120);
/// Beyond the agent's grace, what a stopped worker may take to keep and
/// push what its agent left.
pub(super) const STOP_KEEP: Duration = Duration::from_secs(30);

/// How long Ray lets a stopped job's worker finish (`RAY_JOB_STOP_WAIT_TIME_S`).
pub(super) fn stop_wait(ctx: &RunContext) -> Duration {
    Duration::from_secs(ctx.config.loop_.grace_secs) + STOP_KEEP
}

/// The Ray executor: one job per attempt.
pub(crate) struct RayExecutor {
    pub(super) ctx: Arc<RunContext>,
    pub(super) cluster: Arc<Cluster>,
    pub(super) settings: RaySettings,
    relay_url: String,
    /// The project's directory inside its repository.
    subdir: String,
    /// Jobs of a previous run, by story: claimed by the story's next attempt.
    pub(super) orphans: Arc<Mutex<HashMap<String, Orphan>>>,
    /// ralph's package on the cluster (`executor.ray.ralph_path` empty).
    package: Option<String>,
    /// What became of this run's attempts on the relay (`Relayed`).
    pub(super) relayed: Arc<Relayed>,
}

/// The attempts this run collected, and the relay clean-ups still under
/// way: the end of the run waits for those, then sweeps what any of them
/// (or a crashed run, or a fault) left.
#[derive(Default)]
pub(super) struct Relayed {
    pub(super) collected: Mutex<std::collections::HashSet<(String, u32)>>,
    pub(super) clears: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl RayExecutor {
    /// Connects before the run starts: the cluster answers and takes the
    /// token, the relay has a URL the nodes can use, and this project's
    /// jobs of a crashed run are found.
    pub(crate) fn connect(
        ctx: Arc<RunContext>,
        settings: &RaySettings,
    ) -> Result<RayExecutor, RalphError> {
        let cluster = Cluster::new(settings)?;
        let version = cluster.check()?;
        let relay_url = relay_url(&ctx.git, settings)?;
        let orphans = cluster
            .orphans(&ctx.tag)
            .map_err(|e| RalphError::usage(format!("listing the cluster's jobs: {e}")))?;
        ctx.log.line(&format!(
            "executor: Ray {version} at {}, relay {relay_url}, {} job(s) of an earlier run",
            settings.address,
            orphans.len()
        ));
        let subdir = ctx.git.rel_path(&ctx.root).unwrap_or_default();
        let package = if settings.ralph_path.is_empty() {
            let uri = cluster.upload_self().map_err(|e| {
                RalphError::usage(format!("cannot hand ralph to the cluster: {e}")).with_hint(
                    "install ralph on the nodes and set executor.ray.ralph_path to its path",
                )
            })?;
            ctx.log
                .line(&format!("executor: ralph is on the cluster as {uri}"));
            Some(uri)
        } else {
            None
        };
        Ok(RayExecutor {
            package,
            cluster: Arc::new(cluster),
            settings: settings.clone(),
            relay_url,
            subdir,
            orphans: Arc::new(Mutex::new(orphans)),
            relayed: Arc::default(),
            ctx,
        })
    }
}

/// The relay's URL: `executor.relay` names a remote (or is a URL itself);
/// a URL carrying a password is refused (it would sit in every job spec).
pub(crate) fn relay_url(
    git: &crate::gitops::Git,
    settings: &RaySettings,
) -> Result<String, RalphError> {
    let url = match git.remote_url(&settings.relay) {
        Ok(Some(u)) => u,
        _ if settings.relay.contains(':') || settings.relay.starts_with('/') => {
            settings.relay.clone()
        }
        _ => {
            return Err(RalphError::usage(format!(
                "executor.relay: the repository has no remote {:?}",
                settings.relay
            ))
            .with_hint(
                "add the git remote every node can fetch from and push to (`git remote add \
                 origin URL`), or set executor.relay to its name",
            ))
        }
    };
    if relay::url_has_credentials(&url) {
        return Err(RalphError::usage(format!(
            "executor.relay {:?}: its URL carries a password, which would be shown in every \
             job's spec",
            settings.relay
        ))
        .with_hint("use a credential helper or an SSH key on the nodes, and a URL without one"));
    }
    Ok(url)
}

impl crate::executor::Executor for RayExecutor {
    fn run(
        &self,
        req: AttemptRequest,
        story: Story,
        control: watch::Receiver<Control>,
        activity: mpsc::UnboundedSender<Event>,
    ) -> impl std::future::Future<Output = AttemptReport> + Send + 'static {
        let job = Job {
            ctx: self.ctx.clone(),
            cluster: self.cluster.clone(),
            orphan: self
                .orphans
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&story.id),
            relay_url: self.relay_url.clone(),
            subdir: self.subdir.clone(),
            remote: self.settings.relay.clone(),
            resources: self.settings.resources.clone(),
            entry: EntryFn(self.settings.ralph_path.clone()),
            package: self.package.clone(),
            relayed: self.relayed.clone(),
            activity,
        };
        async move { job.run(req, story, control).await }
    }

    fn log_rel(&self, id: &str, attempt: u32) -> String {
        let p = crate::paths::attempt_log_path(&self.ctx.root, id, attempt);
        p.strip_prefix(&self.ctx.root)
            .unwrap_or(&p)
            .display()
            .to_string()
    }
}

/// The worker's command line.
#[derive(Debug, Clone)]
struct EntryFn(String);

impl EntryFn {
    fn line(&self, spec: &WorkerSpec) -> String {
        let q = crate::prompt::shell_quote;
        // Uploaded: the job starts in its unpacked working_dir.
        let ralph = if self.0.is_empty() {
            "./ralph".to_string()
        } else {
            self.0.clone()
        };
        format!("{} worker attempt {}", q(&ralph), spec.encode())
    }
}

/// One attempt's job, from the base pushed to the result fetched.
struct Job {
    ctx: Arc<RunContext>,
    cluster: Arc<Cluster>,
    orphan: Option<Orphan>,
    relay_url: String,
    subdir: String,
    /// The relay as git names it here (a remote, or its URL).
    remote: String,
    resources: Vec<(String, f64)>,
    entry: EntryFn,
    package: Option<String>,
    /// The display's channel: the agent's latest activity, from the job's log.
    activity: mpsc::UnboundedSender<Event>,
    relayed: Arc<Relayed>,
}

fn fault(req: &AttemptRequest, log_rel: &str, reason: String) -> AttemptReport {
    AttemptReport::empty(
        req,
        Verdict::Fault {
            reason,
            kind: FaultKind::Transient,
        },
        log_rel.to_string(),
    )
}

pub(super) async fn git(ctx: &RunContext, args: &[String]) -> Result<(), String> {
    let q = crate::prompt::shell_quote;
    // Named by its git dir, from the slots' directory: a landing outlasts
    // the git processes working in the main checkout (they may have read
    // its index), and these never touch an index; found there (git moves
    // to the top of the work tree it discovers), each would hold up the
    // merge queue until it ended.
    let cmd = [
        "git".to_string(),
        q(&format!("--git-dir={}", ctx.git.git_dir.display())),
    ]
    .into_iter()
    .chain(args.iter().map(|a| q(a)))
    .collect::<Vec<_>>()
    .join(" ");
    let dir = crate::paths::worktrees_dir(&ctx.root);
    let cwd = match std::fs::create_dir_all(&dir) {
        Ok(()) => dir,
        Err(_) => ctx.root.clone(),
    };
    match process::run_shell(&cmd, cwd, Vec::new(), Duration::from_secs(600)).await {
        Ok(r) if r.success => Ok(()),
        Ok(r) => Err(format!("`{cmd}` failed: {}", r.tail.trim())),
        Err(e) => Err(format!("`{cmd}` could not start: {e}")),
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs a blocking cluster call off the runtime's workers.
pub(super) async fn call<T: Send + 'static>(
    cluster: &Arc<Cluster>,
    f: impl FnOnce(&Cluster) -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || f(&c))
        .await
        .map_err(|e| format!("internal error in a cluster call: {e}"))?
}

impl Job {
    async fn run(
        self,
        req: AttemptRequest,
        story: Story,
        mut control: watch::Receiver<Control>,
    ) -> AttemptReport {
        let ctx = self.ctx.clone();
        let id = story.id.clone();
        let log_path = crate::paths::attempt_log_path(&ctx.root, &id, req.attempt);
        let log_rel = log_path
            .strip_prefix(&ctx.root)
            .unwrap_or(&log_path)
            .display()
            .to_string();
        // A job of a crashed run for this story: its attempt number names
        // its relay refs; this attempt takes over its result.
        let (n, sid, adopted) = match &self.orphan {
            Some(o) => (o.attempt, o.submission_id.clone(), true),
            None => (
                req.attempt,
                submission_id(&ctx.tag, &id, req.attempt),
                false,
            ),
        };
        let refs = relay::relay_refs(&ctx.tag, &id, n);
        let mut phases = worker::Phases::new();
        // Whether a fix-up's work went to the relay (its ref to clear).
        let mut work_sent = false;
        // The push of the base runs while Ray starts the job (a second or
        // more); the worker waits for its base ref to appear.
        let mut base_push = None;
        let base: Oid = if adopted {
            ctx.log.line(&format!(
                "story {id} attempt {}: re-attaching to job {sid} of an earlier run",
                req.attempt
            ));
            match ctx.git.ref_target(&format!("refs/heads/{}", ctx.target)) {
                Ok(Some(b)) => b,
                _ => return fault(&req, &log_rel, format!("target {} vanished", ctx.target)),
            }
        } else {
            let base = match ctx.git.branch_tip(&ctx.target) {
                Ok(Some(b)) => b,
                Ok(None) => {
                    return fault(&req, &log_rel, format!("target {} vanished", ctx.target))
                }
                Err(e) => return fault(&req, &log_rel, e.to_string()),
            };
            let mut push = vec![
                "push".to_string(),
                "--quiet".into(),
                "--force".into(),
                self.remote.clone(),
                format!("{base}:{}", refs.base),
            ];
            if let Some(f) = req.note.as_ref().and_then(|n| n.fixup.as_ref()) {
                if req.kind == crate::state::AttemptKind::Fixup {
                    push.push(format!("{}:{}", f.work, refs.work));
                    work_sent = true;
                }
            }
            let ctx2 = ctx.clone();
            base_push = Some(tokio::spawn(async move { git(&ctx2, &push).await }));
            base
        };
        // A fix-up that resumes a session runs on the node holding it, in
        // the same worker slot (a session names its worktree's paths); with
        // that node gone (or never known) it starts a fresh session.
        let mut resume = req.resume.clone();
        let mut prefer_slot = None;
        let mut resources = self.resources.clone();
        let mut pinned = false;
        if let (Some(session), false) = (&req.resume, adopted) {
            let on = req.resume_on.clone().unwrap_or_default();
            let (name, slot) = split_node(&on);
            let res = node_resource(name);
            let res2 = res.clone();
            let alive = !name.is_empty()
                && call(&self.cluster, move |c| c.node_offers(&res2))
                    .await
                    .unwrap_or(false);
            if alive {
                resources.retain(|(k, _)| *k != res);
                resources.push((res, PIN));
                prefer_slot = slot;
                pinned = true;
                ctx.log.line(&format!(
                    "story {id} attempt {n}: resuming session {session} on node {on}"
                ));
            } else {
                ctx.log.line(&format!(
                    "story {id} attempt {n}: no live node offers {res} (session {session} was \
                     on {}): the fix-up starts a fresh session",
                    if on.is_empty() {
                        "an unknown node"
                    } else {
                        on.as_str()
                    }
                ));
                resume = None;
            }
        }
        let spec = WorkerSpec {
            version: worker::version().to_string(),
            relay_url: self.relay_url.clone(),
            tag: ctx.tag.clone(),
            subdir: self.subdir.clone(),
            target: ctx.target.clone(),
            id: id.clone(),
            attempt: n,
            iteration: req.iteration,
            kind: req.kind,
            note: req.note.clone(),
            resume,
            agent: req.agent.name().to_string(),
            model: req.model.clone(),
            postmortem_model: req.postmortem_model.clone(),
            timeout_secs: ctx.timeout.as_secs(),
            base: base.clone(),
            prefer_slot,
        };
        if !adopted {
            let job = job_spec(
                &sid,
                self.entry.line(&spec),
                &resources,
                self.package.as_deref(),
                stop_wait(&ctx),
                &ctx.tag,
                &id,
                n,
            );
            let sid2 = sid.clone();
            let submitted = call(&self.cluster, move |c| match c.submit(&job) {
                Ok(()) => Ok(()),
                // The same name twice: a job this attempt already has (a
                // retry of the call): attach to it.
                Err(e) => match c.info(&sid2)? {
                    Some(_) => Ok(()),
                    None => Err(e),
                },
            })
            .await;
            let pushed = match base_push.take() {
                Some(t) => t
                    .await
                    .unwrap_or_else(|e| Err(format!("internal error in a push: {e}"))),
                None => Ok(()),
            };
            if let Err(e) = submitted {
                return fault(&req, &log_rel, format!("Ray refused job {sid}: {e}"));
            }
            if let Err(e) = pushed {
                // The job would wait for a base that never comes.
                let sid2 = sid.clone();
                let _ = call(&self.cluster, move |c| {
                    c.stop(&sid2)?;
                    c.delete(&sid2)
                })
                .await;
                return fault(
                    &req,
                    &log_rel,
                    format!("cannot hand the work to the relay: {e}"),
                );
            }
            ctx.log
                .line(&format!("story {id} attempt {n}: submitted job {sid}"));
            phases.mark("submit and push base");
        }
        let submitted_ms = worker::epoch_ms();

        // Wait for the job's end; stop it when asked or past its time.
        let deadline =
            ctx.timeout + Duration::from_secs(ctx.config.loop_.grace_secs) + DEAD_MAN_SLACK;
        let mut running_since: Option<Instant> = None;
        let mut stop_sent: Option<Instant> = None;
        let mut asked_to_stop = false;
        // Stopped because the run was (Ctrl-C, `ralph stop`), not by a
        // timeout or a pin that never came: the attempt is interrupted.
        let mut stopped_by_run = false;
        let mut dead_man = false;
        let mut polls: u32 = 0;
        let mut shown = String::new();
        let mut placed: Option<String> = None;
        let submitted_at = Instant::now();
        let mut pin_timed_out = false;
        let info = loop {
            polls += 1;
            if running_since.is_some() && polls.is_multiple_of(ACTIVITY_EVERY) {
                let sid2 = sid.clone();
                if let Ok(logs) = call(&self.cluster, move |c| c.logs(&sid2)).await {
                    // Where the attempt runs, from the worker's first line
                    // (the log read for its activity anyway: no request
                    // more), said once; then what its agent does there.
                    if let (None, Some(on)) = (&placed, worker::node_in(&logs)) {
                        placed = Some(on.to_string());
                        let _ = self.activity.send(Event::Placed {
                            idx: req.idx,
                            attempt: req.attempt,
                            node: on.to_string(),
                        });
                    }
                    if let Some(text) = worker::activity_in(&logs) {
                        if text != shown {
                            shown = text.to_string();
                            let _ = self.activity.send(Event::Activity {
                                idx: req.idx,
                                text: shown.clone(),
                            });
                        }
                    }
                }
            }
            let sid2 = sid.clone();
            match call(&self.cluster, move |c| c.info(&sid2)).await {
                Ok(Some(i)) if i.finished() => break Some(i),
                Ok(Some(i)) => {
                    if i.status == "RUNNING" && running_since.is_none() {
                        running_since = Some(Instant::now());
                    }
                }
                Ok(None) => break None,
                Err(e) => ctx.log.line(&format!("job {sid}: {e}")),
            }
            if pinned
                && running_since.is_none()
                && !pin_timed_out
                && submitted_at.elapsed() > PIN_WAIT
                && stop_sent.is_none()
            {
                ctx.log.line(&format!(
                    "job {sid} waited {}s for the node holding its session: stopping it",
                    PIN_WAIT.as_secs()
                ));
                pin_timed_out = true;
                asked_to_stop = true;
            }
            let past = running_since.is_some_and(|t| t.elapsed() > deadline);
            if stop_sent.is_none() && (asked_to_stop || past) {
                dead_man = !asked_to_stop;
                if dead_man {
                    ctx.log.line(&format!(
                        "job {sid} still runs past the attempt's timeout: stopping it"
                    ));
                }
                let sid2 = sid.clone();
                if let Err(e) = call(&self.cluster, move |c| c.stop(&sid2)).await {
                    ctx.log.line(&format!("job {sid}: stop: {e}"));
                }
                stop_sent = Some(Instant::now());
            }
            if stop_sent.is_some_and(|t| t.elapsed() > stop_wait(&ctx) + STOP_KEEP) {
                break None;
            }
            tokio::select! {
                changed = control.changed(), if !asked_to_stop => {
                    if changed.is_err() || !matches!(*control.borrow(), Control::Run) {
                        asked_to_stop = true;
                        stopped_by_run = true;
                    }
                }
                _ = tokio::time::sleep(POLL) => {}
            }
        };

        let seen_ms = worker::epoch_ms();
        phases.mark("job");
        let sid2 = sid.clone();
        let logs = call(&self.cluster, move |c| c.logs(&sid2))
            .await
            .unwrap_or_default();
        phases.mark("logs");
        let Some(wire) = worker::report_in(&logs) else {
            let why = info
                .map(|i| {
                    let words: Vec<&str> = i.message.split_whitespace().collect();
                    format!("{}: {}", i.status, words.join(" "))
                })
                .unwrap_or_else(|| "the cluster lost it".to_string());
            let sid2 = sid.clone();
            let _ = call(&self.cluster, move |c| c.delete(&sid2)).await;
            if pin_timed_out {
                return fault(
                    &req,
                    &log_rel,
                    format!("job {sid} never started on the node holding its session"),
                );
            }
            if asked_to_stop {
                return AttemptReport::empty(&req, Verdict::Interrupted, log_rel);
            }
            if dead_man {
                return AttemptReport::empty(
                    &req,
                    Verdict::Failed {
                        reason: format!(
                            "the job ran past the attempt's timeout ({}s) and was stopped",
                            ctx.timeout.as_secs()
                        ),
                        kind: crate::agent::ResultKind::Timeout,
                    },
                    log_rel,
                );
            }
            // Its node or its worker died: not the story's doing. What its
            // agent had committed and the worker pushed on the way is kept.
            let mut r = fault(
                &req,
                &log_rel,
                format!("job {sid} ended without a report ({why}); it runs again"),
            );
            let keep = project::kept_ref(KeptRef::Interrupted, &id, n);
            let fetch = [
                "fetch".to_string(),
                "--quiet".into(),
                "--no-tags".into(),
                "--no-write-fetch-head".into(),
                self.remote.clone(),
                format!("{}:{keep}", refs.progress),
            ];
            let had = ctx.git.ref_target(&keep).ok().flatten().is_some();
            if !had && git(&ctx, &fetch).await.is_ok() {
                ctx.log.line(&format!(
                    "story {id} attempt {n}: the commits job {sid} pushed before it was lost \
                     are kept at {keep}"
                ));
                // The attempt's commits, as a local attempt's saved ref:
                // its history, record, note and `ralph log` name it.
                r.saved_ref = Some(keep);
            }
            return r;
        };

        // The log, then the work: fetched, checked, the story branch set.
        if let Some(dir) = log_path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(&log_path, wire.log.as_bytes());
        ctx.log.line(&format!(
            "story {id} attempt {n}: job {sid} ran on {}",
            wire.node
        ));
        // A job of a crashed run was handed the target of its day: its work
        // must grow from that base, which must be in the target's history.
        let base = if adopted {
            let sent = wire.base.clone();
            let on_target = !sent.is_empty()
                && ctx
                    .git
                    .branch_tip(&ctx.target)
                    .ok()
                    .flatten()
                    .is_some_and(|tip| ctx.git.descends_from(&tip, &sent).unwrap_or(false));
            if !on_target {
                return fault(
                    &req,
                    &log_rel,
                    format!(
                        "job {sid} of an earlier run started from {sent:?}, which is not in \
                         {}'s history",
                        ctx.target
                    ),
                );
            }
            sent
        } else {
            base
        };
        if let Err(e) = self
            .collect(
                &id,
                n,
                &base,
                &refs,
                wire.out.as_ref(),
                &wire.kept,
                wire.saved_ref.as_ref(),
                work_sent,
                wire.progress,
            )
            .await
        {
            return fault(
                &req,
                &log_rel,
                format!("cannot take the work of job {sid} back: {e}"),
            );
        }
        phases.mark("collect");
        // The job's deletion is off the attempt's path too.
        let (cluster, sid2) = (self.cluster.clone(), sid.clone());
        let task = tokio::spawn(async move {
            let _ = call(&cluster, move |c| c.delete(&sid2)).await;
        });
        lock(&self.relayed.clears).push(task);
        let (w0, w1) = wire.span_ms;
        if w0 > 0 && !adopted {
            ctx.log.line(&format!(
                "story {id} attempt {n}: job {sid} timing: {}; submitted to worker start {} ms, \
                 worker {} ({} ms in all), worker end to end seen {} ms",
                worker::phases_text(&phases.done),
                w0.saturating_sub(submitted_ms),
                worker::phases_text(&wire.phases),
                w1.saturating_sub(w0),
                seen_ms.saturating_sub(w1),
            ));
        }
        let mut report = wire.into_report(&req, log_rel);
        // A worker stopped by the run may still report: its agent was
        // killed by the stop ("Killed by signal 15"), which is the run's
        // doing, not the story's, and costs no retry. Work it finished
        // before the stop stands.
        if stopped_by_run && !matches!(report.verdict, Verdict::Done) {
            report.verdict = Verdict::Interrupted;
        }
        report
    }

    /// Fetches the worker's refs from the relay, checks the work grew from
    /// `base`, sets the story branch, and clears the relay.
    #[allow(clippy::too_many_arguments)]
    async fn collect(
        &self,
        id: &str,
        n: u32,
        base: &Oid,
        refs: &relay::RelayRefs,
        out: Option<&Oid>,
        kept: &[String],
        saved: Option<&String>,
        work_sent: bool,
        progress: bool,
    ) -> Result<(), String> {
        let ctx = &self.ctx;
        let pad = relay::landing_pad(&ctx.tag, id, n);
        let mut fetch = vec![
            "fetch".to_string(),
            "--quiet".into(),
            "--no-tags".into(),
            "--no-write-fetch-head".into(),
            self.remote.clone(),
        ];
        if out.is_some() {
            fetch.push(format!("+{}:{pad}", refs.out));
        }
        let mut kept_pairs = Vec::new();
        for k in kept.iter().chain(saved) {
            if let Some(remote) = relay::kept_on_relay(refs, k) {
                kept_pairs.push((remote.clone(), k.clone()));
                // Never overwritten: a local kept ref of that name stays.
                fetch.push(format!("{remote}:{k}"));
            }
        }
        if fetch.len() > 5 {
            git(ctx, &fetch).await?;
        }
        if let Some(out) = out {
            let (id2, pad2, base2, out2) = (id.to_string(), pad.clone(), base.clone(), out.clone());
            crate::executor::blocking(ctx, move |c| adopt_branch(c, &id2, &pad2, &base2, &out2))
                .await??;
        }
        // The relay keeps nothing of a collected attempt. Clearing it is off
        // the attempt's path (its report waits for nothing more); one that
        // fails (a relay busy with other pushes) is swept at the run's end.
        lock(&self.relayed.collected).insert((id.to_string(), n));
        let mut clear = vec![
            "push".to_string(),
            "--quiet".into(),
            self.remote.clone(),
            format!(":{}", refs.base),
        ];
        if out.is_some() {
            clear.push(format!(":{}", refs.out));
        }
        if work_sent {
            clear.push(format!(":{}", refs.work));
        }
        if progress {
            clear.push(format!(":{}", refs.progress));
        }
        for (remote, _) in &kept_pairs {
            clear.push(format!(":{remote}"));
        }
        let (ctx2, id2) = (ctx.clone(), id.to_string());
        let task = tokio::spawn(async move {
            if let Err(e) = git(&ctx2, &clear).await {
                ctx2.log.line(&format!(
                    "relay refs of story {id2} attempt {n} stay until the run's end: {e}"
                ));
            }
        });
        lock(&self.relayed.clears).push(task);
        Ok(())
    }
}

/// The fetched result becomes the story branch once it is known to grow
/// from the base it was given; a local branch holding unsaved commits is
/// kept first (as a local attempt's `prepare` does).
fn adopt_branch(
    ctx: &RunContext,
    id: &str,
    pad: &str,
    base: &Oid,
    out: &Oid,
) -> Result<(), String> {
    let git = &ctx.git;
    let got = git
        .ref_target(pad)
        .map_err(|e| e.to_string())?
        .ok_or("the relay did not have the story's branch")?;
    let result = (|| {
        if &got != out {
            return Err(format!("the relay holds {got} where the worker said {out}"));
        }
        if !git.descends_from(&got, base).map_err(|e| e.to_string())? {
            return Err(format!(
                "the worker's result {got} does not grow from the base {base} it was given"
            ));
        }
        let branch = project::story_branch(id);
        if git.branch_tip(&branch).ok().flatten().is_some()
            && git.commits_ahead(&branch, base).unwrap_or(0) > 0
            && !git
                .tip_saved_under(&branch, project::KEPT_REFS)
                .unwrap_or(false)
        {
            let stamp = crate::timefmt::now_secs().max(0) as u32;
            git.save_ref(&branch, &project::kept_ref(KeptRef::Saved, id, stamp))
                .map_err(|e| e.to_string())?;
        }
        git.release_branch(&branch, &crate::paths::worktrees_dir(&ctx.root))
            .map_err(|e| e.to_string())?;
        git.set_branch(&branch, &got).map_err(|e| e.to_string())
    })();
    let _ = git.delete_ref(pad);
    result
}
