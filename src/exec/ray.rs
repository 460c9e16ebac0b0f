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

use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

use crate::agent::{FaultKind, Verdict};
use crate::backlog::Story;
use crate::config::RaySettings;
use crate::control::Control;
use crate::error::RalphError;
use crate::gitops::{relay, Oid};
use crate::process;
use crate::project::{self, KeptRef};
use crate::run::context::RunContext;
use crate::run::events::{AttemptReport, AttemptRequest, Event};

use super::http::{self, Endpoint};
use super::worker::{self, WorkerSpec};

/// The Jobs API version ralph speaks (`GET /api/version`).
const JOBS_API_VERSION: &str = "4";
/// The most the dashboard reads in one request (`DASHBOARD_CLIENT_MAX_SIZE`).
const UPLOAD_MAX: usize = 100 << 20;
/// How often a running job is looked at.
const POLL: Duration = Duration::from_secs(1);
/// Every how many polls the job's log is read for the agent's activity.
const ACTIVITY_EVERY: u32 = 3;
/// Beyond the attempt's timeout: fetching, hooks, pushing, a stop's grace.
const DEAD_MAN_SLACK: Duration = Duration::from_secs(120);
/// Beyond the agent's grace, what a stopped worker may take to keep and
/// push what its agent left.
const STOP_KEEP: Duration = Duration::from_secs(30);

/// How long Ray lets a stopped job's worker finish (`RAY_JOB_STOP_WAIT_TIME_S`).
fn stop_wait(ctx: &RunContext) -> Duration {
    Duration::from_secs(ctx.config.loop_.grace_secs) + STOP_KEEP
}

/// The Jobs API of one cluster.
#[derive(Debug, Clone)]
pub(crate) struct Cluster {
    ep: Endpoint,
    /// The token's value: kept in memory only.
    token: Option<String>,
    pub(crate) address: String,
}

/// What `GET /api/jobs/{id}` says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JobInfo {
    pub(crate) status: String,
    pub(crate) message: String,
}

impl JobInfo {
    pub(crate) fn finished(&self) -> bool {
        matches!(self.status.as_str(), "SUCCEEDED" | "FAILED" | "STOPPED")
    }
}

/// A job this project submitted before this run started.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Orphan {
    pub(crate) submission_id: String,
    pub(crate) attempt: u32,
}

impl Cluster {
    /// The cluster of `settings`; the token from the variable it names.
    pub(crate) fn new(settings: &RaySettings) -> Result<Cluster, RalphError> {
        let ep = http::parse_endpoint(&settings.address).map_err(|e| {
            RalphError::usage(format!("executor.ray.address: {e}"))
                .with_hint("set it to the dashboard's http:// address, e.g. http://127.0.0.1:8265")
        })?;
        let token = std::env::var(&settings.token_env)
            .ok()
            .filter(|t| !t.trim().is_empty());
        Ok(Cluster {
            ep,
            token,
            address: settings.address.clone(),
        })
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value), String> {
        let bytes = body.map(|b| serde_json::to_vec(b).unwrap_or_default());
        let r = http::request(
            &self.ep,
            method,
            path,
            bytes.as_deref(),
            "application/json",
            self.token.as_deref(),
        )
        .map_err(|e| format!("Ray at {}: {e}", self.address))?;
        let v = serde_json::from_slice(&r.body).unwrap_or(Value::String(r.text()));
        Ok((r.status, v))
    }

    /// Reachable, the token accepted, a Jobs API ralph speaks (`version` 4);
    /// the Ray version (`GET /api/version`).
    pub(crate) fn check(&self) -> Result<String, RalphError> {
        let (status, v) = self.call("GET", "/api/version", None).map_err(|e| {
            RalphError::usage(e)
                .with_hint("start the cluster (`ray start --head`) or fix executor.ray.address")
        })?;
        match status {
            200 if v["version"].as_str() != Some(JOBS_API_VERSION) => {
                Err(RalphError::usage(format!(
                    "Ray at {} speaks Jobs API version {} (ray {}); ralph speaks version \
                     {JOBS_API_VERSION} (Ray 2.x)",
                    self.address, v["version"], v["ray_version"]
                ))
                .with_hint("run a Ray 2 cluster (ralph is tested with Ray 2.60)"))
            }
            200 => Ok(v["ray_version"].as_str().unwrap_or("?").to_string()),
            401 | 403 => Err(RalphError::usage(format!(
                "Ray at {} refused ralph's token (HTTP {status})",
                self.address
            ))
            .with_hint(
                "export the cluster's token in the variable executor.ray.token_env names \
                 (RAY_AUTH_TOKEN by default)",
            )),
            s => Err(RalphError::usage(format!(
                "Ray at {} answered HTTP {s} to /api/version: {v}",
                self.address
            ))
            .with_hint("is executor.ray.address the dashboard's address (port 8265)?")),
        }
    }

    /// Uploads this very binary as a `working_dir` package unless the
    /// cluster has it; its URI.
    pub(crate) fn upload_self(&self) -> Result<String, String> {
        let exe = std::env::current_exe().map_err(|e| format!("ralph's own path: {e}"))?;
        let bytes = std::fs::read(&exe).map_err(|e| format!("{}: {e}", exe.display()))?;
        let name = super::package::package_name(&bytes);
        let path = format!("/api/packages/gcs/{name}");
        let (status, _) = self.call("GET", &path, None)?;
        if status != 200 {
            let zip = super::package::zip_one("ralph", &bytes);
            drop(bytes);
            if zip.len() > UPLOAD_MAX {
                return Err(format!(
                    "ralph packed is {} MiB, more than the {} MiB the dashboard takes",
                    zip.len() >> 20,
                    UPLOAD_MAX >> 20
                ));
            }
            let r = http::request(
                &self.ep,
                "PUT",
                &path,
                Some(&zip),
                "application/zip",
                self.token.as_deref(),
            )
            .map_err(|e| format!("Ray at {}: {e}", self.address))?;
            if r.status != 200 {
                return Err(format!("uploading ralph: HTTP {}: {}", r.status, r.text()));
            }
        }
        Ok(format!("gcs://{name}"))
    }

    pub(crate) fn submit(&self, job: &Value) -> Result<(), String> {
        let (status, v) = self.call("POST", "/api/jobs/", Some(job))?;
        if status == 200 {
            Ok(())
        } else {
            Err(format!("HTTP {status}: {v}"))
        }
    }

    /// `None` when the cluster knows no such job.
    pub(crate) fn info(&self, id: &str) -> Result<Option<JobInfo>, String> {
        let (status, v) = self.call("GET", &format!("/api/jobs/{id}"), None)?;
        match status {
            200 => Ok(Some(JobInfo {
                status: v["status"].as_str().unwrap_or("").to_string(),
                message: v["message"].as_str().unwrap_or("").to_string(),
            })),
            404 => Ok(None),
            s => Err(format!("HTTP {s}: {v}")),
        }
    }

    pub(crate) fn logs(&self, id: &str) -> Result<String, String> {
        let (status, v) = self.call("GET", &format!("/api/jobs/{id}/logs"), None)?;
        match status {
            200 => Ok(v["logs"].as_str().unwrap_or("").to_string()),
            s => Err(format!("HTTP {s}: {v}")),
        }
    }

    pub(crate) fn stop(&self, id: &str) -> Result<(), String> {
        self.call("POST", &format!("/api/jobs/{id}/stop"), None)
            .map(|_| ())
    }

    pub(crate) fn delete(&self, id: &str) -> Result<(), String> {
        self.call("DELETE", &format!("/api/jobs/{id}"), None)
            .map(|_| ())
    }

    /// This project's jobs the cluster still holds, by story.
    pub(crate) fn orphans(&self, tag: &str) -> Result<HashMap<String, Orphan>, String> {
        let (status, v) = self.call("GET", "/api/jobs/", None)?;
        if status != 200 {
            return Err(format!("HTTP {status}: {v}"));
        }
        Ok(orphans_of(&v, tag))
    }
}

/// The jobs in a `GET /api/jobs/` answer that this project (`tag`)
/// submitted, the latest attempt per story.
pub(crate) fn orphans_of(list: &Value, tag: &str) -> HashMap<String, Orphan> {
    let mut out: HashMap<String, Orphan> = HashMap::new();
    for job in list.as_array().into_iter().flatten() {
        let m = &job["metadata"];
        if m["ralph_project"].as_str() != Some(tag) {
            continue;
        }
        let (Some(id), Some(n), Some(sid)) = (
            m["ralph_story"].as_str(),
            m["ralph_attempt"]
                .as_str()
                .and_then(|n| n.parse::<u32>().ok()),
            job["submission_id"].as_str(),
        ) else {
            continue;
        };
        let newer = out.get(id).is_none_or(|o| o.attempt < n);
        if newer {
            out.insert(
                id.to_string(),
                Orphan {
                    submission_id: sid.to_string(),
                    attempt: n,
                },
            );
        }
    }
    out
}

/// The job of attempt `n` of story `id`: the same name after a restart.
pub(crate) fn submission_id(tag: &str, id: &str, n: u32) -> String {
    format!("{tag}{id}-{n}")
}

/// The job's JSON: names, commits and the worker's command; never a secret.
#[allow(clippy::too_many_arguments)]
pub(crate) fn job_spec(
    sid: &str,
    entrypoint: String,
    resources: &[(String, f64)],
    package: Option<&str>,
    stop_wait: Duration,
    tag: &str,
    id: &str,
    n: u32,
) -> Value {
    let res: serde_json::Map<String, Value> = resources
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let mut spec = json!({
        "submission_id": sid,
        "entrypoint": entrypoint,
        "entrypoint_num_cpus": 0,
        "entrypoint_resources": res,
        "metadata": {
            "ralph_project": tag,
            "ralph_story": id,
            "ralph_attempt": n.to_string(),
        },
    });
    // Ray's stop sends SIGTERM, then SIGKILL after this long (3 s by
    // default): the worker needs the agent's grace and the time to keep
    // and push what the agent left.
    spec["runtime_env"] = json!({ "env_vars": {
        "RAY_JOB_STOP_WAIT_TIME_S": stop_wait.as_secs().to_string(),
    } });
    if let Some(uri) = package {
        spec["runtime_env"]["working_dir"] = json!(uri);
    }
    spec
}

/// The Ray executor: one job per attempt.
pub(crate) struct RayExecutor {
    ctx: Arc<RunContext>,
    cluster: Arc<Cluster>,
    settings: RaySettings,
    relay_url: String,
    /// The project's directory inside its repository.
    subdir: String,
    /// Jobs of a previous run, by story: claimed by the story's next attempt.
    orphans: Arc<Mutex<HashMap<String, Orphan>>>,
    /// ralph's package on the cluster (`executor.ray.ralph_path` empty).
    package: Option<String>,
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

impl crate::run::executor::Executor for RayExecutor {
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

async fn git(ctx: &RunContext, args: &[String]) -> Result<(), String> {
    let q = crate::prompt::shell_quote;
    let cmd = std::iter::once("git".to_string())
        .chain(args.iter().map(|a| q(a)))
        .collect::<Vec<_>>()
        .join(" ");
    match process::run_shell(&cmd, ctx.root.clone(), Vec::new(), Duration::from_secs(600)).await {
        Ok(r) if r.success => Ok(()),
        Ok(r) => Err(format!("`{cmd}` failed: {}", r.tail.trim())),
        Err(e) => Err(format!("`{cmd}` could not start: {e}")),
    }
}

/// Runs a blocking cluster call off the runtime's workers.
async fn call<T: Send + 'static>(
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
                }
            }
            if let Err(e) = git(&ctx, &push).await {
                return fault(
                    &req,
                    &log_rel,
                    format!("cannot hand the work to the relay: {e}"),
                );
            }
            base
        };
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
            resume: req.resume.clone(),
            agent: req.agent.name().to_string(),
            model: req.model.clone(),
            postmortem_model: req.postmortem_model.clone(),
            timeout_secs: ctx.timeout.as_secs(),
            base: base.clone(),
        };
        if !adopted {
            let job = job_spec(
                &sid,
                self.entry.line(&spec),
                &self.resources,
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
            if let Err(e) = submitted {
                return fault(&req, &log_rel, format!("Ray refused job {sid}: {e}"));
            }
            ctx.log
                .line(&format!("story {id} attempt {n}: submitted job {sid}"));
        }

        // Wait for the job's end; stop it when asked or past its time.
        let deadline =
            ctx.timeout + Duration::from_secs(ctx.config.loop_.grace_secs) + DEAD_MAN_SLACK;
        let mut running_since: Option<Instant> = None;
        let mut stop_sent: Option<Instant> = None;
        let mut asked_to_stop = false;
        let mut dead_man = false;
        let mut polls: u32 = 0;
        let mut shown = String::new();
        let info = loop {
            polls += 1;
            if running_since.is_some() && polls.is_multiple_of(ACTIVITY_EVERY) {
                let sid2 = sid.clone();
                if let Ok(logs) = call(&self.cluster, move |c| c.logs(&sid2)).await {
                    if let Some(text) = worker::activity_in(&logs).filter(|t| *t != shown) {
                        shown = text.to_string();
                        let _ = self.activity.send(Event::Activity {
                            idx: req.idx,
                            text: shown.clone(),
                        });
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
                    }
                }
                _ = tokio::time::sleep(POLL) => {}
            }
        };

        let sid2 = sid.clone();
        let logs = call(&self.cluster, move |c| c.logs(&sid2))
            .await
            .unwrap_or_default();
        let Some(wire) = worker::report_in(&logs) else {
            let why = info
                .map(|i| {
                    let words: Vec<&str> = i.message.split_whitespace().collect();
                    format!("{}: {}", i.status, words.join(" "))
                })
                .unwrap_or_else(|| "the cluster lost it".to_string());
            let sid2 = sid.clone();
            let _ = call(&self.cluster, move |c| c.delete(&sid2)).await;
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
            // Its node or its worker died: not the story's doing.
            return fault(
                &req,
                &log_rel,
                format!("job {sid} ended without a report ({why}); it runs again"),
            );
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
            )
            .await
        {
            return fault(
                &req,
                &log_rel,
                format!("cannot take the work of job {sid} back: {e}"),
            );
        }
        let sid2 = sid.clone();
        let _ = call(&self.cluster, move |c| c.delete(&sid2)).await;
        wire.into_report(&req, log_rel)
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
            crate::run::context::blocking(ctx, move |c| {
                adopt_branch(c, &id2, &pad2, &base2, &out2)
            })
            .await??;
        }
        // The relay keeps nothing of a collected attempt.
        let mut clear = vec![
            "push".to_string(),
            "--quiet".into(),
            self.remote.clone(),
            format!(":{}", refs.base),
        ];
        if out.is_some() {
            clear.push(format!(":{}", refs.out));
        }
        for (remote, _) in &kept_pairs {
            clear.push(format!(":{remote}"));
        }
        if let Err(e) = git(ctx, &clear).await {
            ctx.log
                .line(&format!("relay refs of story {id} attempt {n} stay: {e}"));
        }
        let _ = git(
            ctx,
            &[
                "push".to_string(),
                "--quiet".into(),
                self.remote.clone(),
                format!(":{}", refs.work),
            ],
        )
        .await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_spec_holds_names_not_secrets() {
        let spec = job_spec(
            "ralph-1a2b3c4d-1.2-3",
            "ralph worker attempt 00".into(),
            &[("ralph_slot".into(), 1.0)],
            None,
            Duration::from_secs(40),
            "ralph-1a2b3c4d-",
            "1.2",
            3,
        );
        assert_eq!(spec["entrypoint_resources"]["ralph_slot"], 1.0);
        assert_eq!(spec["metadata"]["ralph_attempt"], "3");
        assert_eq!(
            spec["runtime_env"],
            json!({ "env_vars": { "RAY_JOB_STOP_WAIT_TIME_S": "40" } })
        );
    }

    #[test]
    fn orphans_are_this_projects_latest_jobs() {
        let list = json!([
            {"submission_id": "a", "metadata": {"ralph_project": "p-", "ralph_story": "1", "ralph_attempt": "1"}},
            {"submission_id": "b", "metadata": {"ralph_project": "p-", "ralph_story": "1", "ralph_attempt": "2"}},
            {"submission_id": "c", "metadata": {"ralph_project": "q-", "ralph_story": "2", "ralph_attempt": "1"}},
            {"submission_id": "d", "metadata": null},
        ]);
        let o = orphans_of(&list, "p-");
        assert_eq!(o.len(), 1);
        assert_eq!(
            o["1"],
            Orphan {
                submission_id: "b".into(),
                attempt: 2
            }
        );
    }

    #[test]
    fn a_submission_id_is_stable() {
        assert_eq!(
            submission_id("ralph-1a2b3c4d-", "1.2", 3),
            "ralph-1a2b3c4d-1.2-3"
        );
    }
}
