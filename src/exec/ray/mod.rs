//! `executor.kind: ray` (issue 23): each attempt is a job on a Ray cluster,
//! through the dashboard's Jobs REST API. The coordinator (`ralph run`)
//! keeps scheduling, the state and the merge queue; a job runs `ralph
//! worker attempt` (`exec/worker.rs`) on some node; work travels by git
//! through the relay remote (`gitops/relay.rs`).
//!
//! - `submission_id` = `<project tag><story>-<attempt>`: a coordinator that
//!   crashed finds its jobs again (`Orphans`), re-attaches to a running one
//!   and collects a finished one instead of starting the story again; a job
//!   no attempt of this run can claim (its story not selected, or done) is
//!   stopped at once (issue 35), the others at the run's end if unclaimed.
//! - One job list a poll for the whole run (`board.rs`); each job's watch
//!   (`watch.rs`, pure) reads its job off it (`job.rs`, the I/O).
//! - Stop and Ctrl-C stop the job (Ray kills its process tree); the worker
//!   enforces the timeout, and the coordinator stops a job still running at
//!   timeout + grace (a dead-man check for a worker that cannot).
//! - A job that ends without a report (its node or worker died) is a fault
//!   outside the story: not counted, retried.
//! - The cluster token is read from the environment variable the config
//!   names and sent as `Authorization: Bearer`; it is never written
//!   anywhere, and nothing secret goes into a job spec (the cluster shows
//!   specs to anyone who can list jobs).

mod board;
pub(crate) mod check;
mod job;
mod retire;
mod validate;
mod watch;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch as channel};

use crate::backlog::Story;
use crate::config::RaySettings;
use crate::control::Control;
use crate::error::RalphError;
use crate::executor::AttemptEnv;
use crate::executor::{AttemptEvent, AttemptReport, AttemptRequest};
use crate::gitops::relay;
use crate::process;

pub(crate) use super::cluster::{
    job_spec, node_resource, split_node, submission_id, Cluster, Orphan,
};
use super::worker::WorkerSpec;
pub(super) use board::{Board, Listing};
use job::Job;

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
pub(super) fn stop_wait(ctx: &AttemptEnv) -> Duration {
    Duration::from_secs(ctx.config.loop_.grace_secs) + STOP_KEEP
}

/// The Ray executor: one job per attempt.
pub(crate) struct RayExecutor {
    pub(super) ctx: Arc<AttemptEnv>,
    pub(super) cluster: Arc<Cluster>,
    pub(super) settings: RaySettings,
    relay_url: String,
    /// The project's directory inside its repository.
    subdir: String,
    /// Jobs of a previous run, by story: claimed by the story's next attempt.
    pub(super) orphans: Arc<Mutex<HashMap<String, Orphan>>>,
    /// Jobs of a previous run no attempt of this one can claim: stopped
    /// from the run's first attempt on (`retiring`).
    pub(super) leftovers: Mutex<Vec<(String, Orphan)>>,
    /// The task stopping the leftovers; the run's end waits for it.
    pub(super) retiring: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The run's one job list.
    pub(super) board: Arc<Board>,
    /// ralph's package on the cluster (`executor.ray.ralph_path` empty).
    package: Option<String>,
    /// What became of this run's attempts on the relay (`Relayed`).
    pub(super) relayed: Arc<Relayed>,
    /// When the executor connected: the span its requests are counted over.
    pub(super) since: Instant,
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
    /// jobs of a crashed run are found: those of stories not in
    /// `claimable` (`None`: every story may run) are to be stopped.
    pub(crate) fn connect(
        ctx: Arc<AttemptEnv>,
        settings: &RaySettings,
        claimable: Option<&HashSet<String>>,
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
        let (orphans, mut leftovers) =
            split_orphans(orphans, |id| claimable.is_none_or(|c| c.contains(id)));
        // A crashed run's validations: no one waits for their verdict.
        let validations = cluster
            .validations(&ctx.tag)
            .map_err(|e| RalphError::usage(format!("listing the cluster's jobs: {e}")))?;
        // Stopped now, not at the first attempt (a run that only lands has
        // none); retired with the rest (deleted once they end).
        for (what, job) in &validations {
            let sid = &job.submission_id;
            match cluster.stop(sid) {
                Ok(()) => ctx.log.line(&format!(
                    "executor: job {sid} of an earlier run ({}) stopped at the start: no one \
                     waits for its verdict",
                    retire::what(what)
                )),
                Err(e) => ctx.log.line(&format!("executor: job {sid}: stop: {e}")),
            }
        }
        leftovers.extend(validations);
        if !leftovers.is_empty() {
            let ids: Vec<String> = leftovers.iter().map(|(id, _)| retire::what(id)).collect();
            ctx.log.line(&format!(
                "executor: no attempt of this run can claim the earlier run's job(s) of \
                 {}: they are stopped from the run's first attempt on",
                ids.join(", ")
            ));
        }
        Ok(RayExecutor {
            package,
            leftovers: Mutex::new(leftovers),
            retiring: Mutex::new(None),
            board: Arc::default(),
            cluster: Arc::new(cluster),
            settings: settings.clone(),
            relay_url,
            subdir,
            orphans: Arc::new(Mutex::new(orphans)),
            relayed: Arc::default(),
            since: Instant::now(),
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
        control: channel::Receiver<Control>,
        activity: mpsc::UnboundedSender<AttemptEvent>,
    ) -> impl std::future::Future<Output = AttemptReport> + Send + 'static {
        self.start_retiring();
        let job = Job {
            ctx: self.ctx.clone(),
            cluster: self.cluster.clone(),
            board: self.board.clone(),
            // A racing candidate never takes over a crashed run's job: its
            // own (named by its key) were left over at the start.
            orphan: match req.candidate {
                None => lock(&self.orphans).remove(&story.id),
                Some(_) => None,
            },
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
        self.command("attempt", &spec.encode())
    }

    /// `ralph worker <what> <spec>`.
    fn command(&self, what: &str, spec_hex: &str) -> String {
        let q = crate::prompt::shell_quote;
        // Uploaded: the job starts in its unpacked working_dir.
        let ralph = if self.0.is_empty() {
            "./ralph".to_string()
        } else {
            self.0.clone()
        };
        format!("{} worker {what} {spec_hex}", q(&ralph))
    }
}

pub(super) async fn git(ctx: &AttemptEnv, args: &[String]) -> Result<(), String> {
    shell(ctx, git_line(ctx, args)).await
}

/// The shell line of git `args` on the project's repository.
pub(super) fn git_line(ctx: &AttemptEnv, args: &[String]) -> String {
    let q = crate::prompt::shell_quote;
    // Named by its git dir, from the slots' directory: a landing outlasts
    // the git processes working in the main checkout (they may have read
    // its index), and these never touch an index; found there (git moves
    // to the top of the work tree it discovers), each would hold up the
    // merge queue until it ended.
    [
        "git".to_string(),
        q(&format!("--git-dir={}", ctx.git.git_dir.display())),
    ]
    .into_iter()
    .chain(args.iter().map(|a| q(a)))
    .collect::<Vec<_>>()
    .join(" ")
}

/// Runs a git line (`git_line`, or a composition of them) from the slots'
/// directory.
pub(super) async fn shell(ctx: &AttemptEnv, cmd: String) -> Result<(), String> {
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

/// The jobs of a crashed run split: those an attempt of this run may claim
/// (by story), and those none can.
fn split_orphans(
    orphans: HashMap<String, Orphan>,
    claimable: impl Fn(&str) -> bool,
) -> (HashMap<String, Orphan>, Vec<(String, Orphan)>) {
    let (keep, left): (HashMap<_, _>, HashMap<_, _>) =
        orphans.into_iter().partition(|(id, _)| claimable(id));
    let mut left: Vec<(String, Orphan)> = left.into_iter().collect();
    left.sort_by(|a, b| a.0.cmp(&b.0));
    (keep, left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crashed_runs_job_is_left_over_when_its_story_cannot_run() {
        let orphan = |n| Orphan {
            submission_id: format!("p-{n}"),
            attempt: 1,
        };
        let all: HashMap<String, Orphan> = [
            ("1.1".to_string(), orphan(1)),
            ("1.2".to_string(), orphan(2)),
        ]
        .into();
        let (keep, left) = split_orphans(all.clone(), |id| id == "1.1");
        assert_eq!(keep.keys().collect::<Vec<_>>(), ["1.1"]);
        assert_eq!(left, [("1.2".to_string(), orphan(2))]);
        let (keep, left) = split_orphans(all, |_| true);
        assert_eq!((keep.len(), left.len()), (2, 0));
    }
}
