//! Where attempts run (`executor.kind`): on this machine
//! (`run::LocalExecutor`), or as jobs on a Ray cluster (`ray`), whose nodes
//! run `ralph worker attempt` (`worker`); `cluster` is the Jobs API's client.

pub(crate) mod cluster;
pub(crate) mod package;
pub(crate) mod ray;
mod sweep;
pub(crate) mod worker;

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::backlog::Story;
use crate::config::Executor as Kind;
use crate::control::Control;
use crate::error::RalphError;
pub(crate) mod agents;

pub(crate) use agents::{agents_can_start, resolve_agent, resolve_agents};

use crate::run::attempt::LocalExecutor;
use crate::run::context::RunContext;
use crate::run::events::{AttemptReport, AttemptRequest, Event};
use crate::run::executor::Executor;

/// The executor a run uses, chosen by `executor.kind`.
pub(crate) enum AnyExecutor {
    Local(LocalExecutor),
    Ray(Box<ray::RayExecutor>),
}

/// The executor `executor.kind` names; a cluster that cannot be reached is
/// said before anything runs. `claimable`: the stories an attempt of this
/// run may start (`None`: any), whose jobs of a crashed run it may take
/// over; the cluster's other jobs of this project are stopped at once.
pub(crate) fn choose(
    ctx: Arc<RunContext>,
    verbose: bool,
    claimable: Option<&HashSet<String>>,
) -> Result<AnyExecutor, RalphError> {
    Ok(match &ctx.config.executor {
        Kind::Local => AnyExecutor::Local(LocalExecutor { ctx, verbose }),
        Kind::Ray(settings) => {
            let settings = settings.clone();
            AnyExecutor::Ray(Box::new(ray::RayExecutor::connect(
                ctx, &settings, claimable,
            )?))
        }
    })
}

/// `ralph validate`'s check of where attempts would run: every agent CLI
/// installed here (local), or the cluster reachable with its token, a Jobs
/// API ralph speaks, the resources jobs ask offered, and a relay that
/// answers (ray, `ray::check`). The lines to print.
pub(crate) fn validate(project: &crate::project::Project) -> Result<Vec<String>, RalphError> {
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
pub(crate) fn agents_on_nodes(
    project: &crate::project::Project,
    default: crate::agent::Backend,
) -> std::collections::HashMap<crate::agent::Backend, (String, Vec<String>)> {
    std::iter::once(default)
        .chain(project.config.agent.fallback.iter().copied())
        .chain(project.backlog.stories.iter().filter_map(|s| s.agent))
        .map(|b| (b, crate::agent::invocation(&project.config.agent, b)))
        .collect()
}

impl AnyExecutor {
    /// What an executor does once the run's attempts have all answered:
    /// the Ray executor retires the jobs of a crashed run no attempt
    /// claimed and sweeps the relay.
    pub(crate) async fn end_of_run(&self) {
        if let AnyExecutor::Ray(e) = self {
            e.end_of_run().await;
        }
    }
}

impl Executor for AnyExecutor {
    fn run(
        &self,
        req: AttemptRequest,
        story: Story,
        control: watch::Receiver<Control>,
        activity: mpsc::UnboundedSender<Event>,
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
}
