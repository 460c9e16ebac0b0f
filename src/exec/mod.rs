//! Where attempts run (`executor.kind`): on this machine (`local`), or as
//! jobs on a Ray cluster (`ray`), whose nodes run `ralph worker attempt`
//! (`worker`, the local executor on the node); `cluster` is the Jobs
//! API's client. The executors implement `crate::executor::Executor`; the run
//! that uses them is assembled by its command (`ByConfig`), and neither
//! imports the other (`arch_tests`).

pub(crate) mod cluster;
pub(crate) mod local;
pub(crate) mod package;
pub(crate) mod ray;
mod sweep;
pub(crate) mod worker;

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::agent::Backend;
use crate::backlog::Story;
use crate::config::Executor as Kind;
use crate::control::Control;
use crate::error::RalphError;
use crate::executor::{
    Agents, AttemptEnv, AttemptEvent, AttemptReport, AttemptRequest, Executor, ExecutorChoice,
    RunSeal,
};
use crate::gitops::Git;
use crate::project::Project;
pub(crate) mod agents;

pub(crate) use agents::{agents_can_start, resolve_agents};

use local::LocalExecutor;

/// The executor a run uses, chosen by `executor.kind`.
pub(crate) enum AnyExecutor {
    Local(LocalExecutor),
    Ray(Box<ray::RayExecutor>),
}

/// The executor `executor.kind` names, as the `run` command (and `ralph
/// land`, `ralph decompose`) assemble the run with it.
pub(crate) struct ByConfig;

impl ExecutorChoice for ByConfig {
    type Executor = AnyExecutor;

    /// On a cluster the agent is the nodes' to have (each worker checks).
    fn agents(&self, project: &Project, default: Backend) -> Result<Agents, RalphError> {
        match project.config.executor {
            Kind::Local => resolve_agents(project, default),
            Kind::Ray(_) => Ok(agents_on_nodes(project, default)),
        }
    }

    /// A cluster's nodes check their own.
    fn check_agents(
        &self,
        project: &Project,
        git: &Git,
        agents: &Agents,
        seal: &RunSeal,
    ) -> Result<(), RalphError> {
        match project.config.executor {
            Kind::Local => agents_can_start(project, git, agents, seal),
            Kind::Ray(_) => Ok(()),
        }
    }

    /// A cluster that cannot be reached is said before anything runs.
    fn executor(
        &self,
        env: Arc<AttemptEnv>,
        verbose: bool,
        claimable: &HashSet<String>,
    ) -> Result<AnyExecutor, RalphError> {
        Ok(match &env.config.executor {
            Kind::Local => AnyExecutor::Local(LocalExecutor::new(env, verbose)),
            Kind::Ray(settings) => {
                let settings = settings.clone();
                AnyExecutor::Ray(Box::new(ray::RayExecutor::connect(
                    env,
                    &settings,
                    Some(claimable),
                )?))
            }
        })
    }
}

/// `ralph validate`'s line: the sandbox mode a run would use, and why;
/// an agent that cannot start under it is the error a run would stop with.
pub(crate) fn sandbox_line(project: &Project, agents: &Agents) -> Result<String, RalphError> {
    let seal = RunSeal::for_run(&project.config, agents)?.0;
    let git = Git::open(&project.root).map_err(|e| RalphError::usage(e.to_string()))?;
    ByConfig.check_agents(project, &git, agents, &seal)?;
    Ok(seal.decision.why)
}

/// `ralph validate`'s check of where attempts would run: every agent CLI
/// installed here (local), or the cluster reachable with its token, a Jobs
/// API ralph speaks, the resources jobs ask offered, and a relay that
/// answers (ray, `ray::check`). The lines to print.
pub(crate) fn validate(project: &Project) -> Result<Vec<String>, RalphError> {
    match &project.config.executor {
        Kind::Local => {
            resolve_agents(project, project.config.agent.name)?;
            Ok(Vec::new())
        }
        Kind::Ray(settings) => ray::check::validate(project, settings),
    }
}

/// The agents a run on a cluster may use, as configured: whether they are
/// installed is each node's matter, checked by its worker.
pub(crate) fn agents_on_nodes(project: &Project, default: Backend) -> Agents {
    std::iter::once(default)
        .chain(project.config.agent.fallback.iter().copied())
        .chain(project.backlog.stories.iter().filter_map(|s| s.agent))
        .map(|b| (b, crate::agent::invocation(&project.config.agent, b)))
        .collect()
}

impl Executor for AnyExecutor {
    fn run(
        &self,
        req: AttemptRequest,
        story: Story,
        control: watch::Receiver<Control>,
        activity: mpsc::UnboundedSender<AttemptEvent>,
    ) -> impl Future<Output = AttemptReport> + Send + 'static {
        let fut: Pin<Box<dyn Future<Output = AttemptReport> + Send>> = match self {
            AnyExecutor::Local(e) => Box::pin(e.run(req, story, control, activity)),
            AnyExecutor::Ray(e) => Box::pin(e.run(req, story, control, activity)),
        };
        fut
    }

    fn log_rel(&self, id: &str, attempt: u32) -> String {
        match self {
            AnyExecutor::Local(e) => e.log_rel(id, attempt),
            AnyExecutor::Ray(e) => e.log_rel(id, attempt),
        }
    }

    /// Only local attempts have slots on this machine to warm: a Ray
    /// run's nodes keep their own.
    fn warm(&self, free: &[usize], retire: bool) {
        if let AnyExecutor::Local(e) = self {
            e.warm(free, retire);
        }
    }

    fn slot_left(&self, slot: usize) {
        if let AnyExecutor::Local(e) = self {
            e.slot_left(slot);
        }
    }

    async fn warmed(&self) {
        if let AnyExecutor::Local(e) = self {
            e.warmed().await;
        }
    }

    /// The Ray executor retires the jobs of a crashed run no attempt
    /// claimed and sweeps the relay.
    async fn end_of_run(&self) {
        if let AnyExecutor::Ray(e) = self {
            e.end_of_run().await;
        }
    }
}
