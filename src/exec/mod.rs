//! Where attempts run (`executor.kind`): on this machine
//! (`run::LocalExecutor`), or as jobs on a Ray cluster (`ray`), whose nodes
//! run `ralph worker attempt` (`worker`). `http` is the Jobs API's client.

pub(crate) mod http;
pub(crate) mod ray;
pub(crate) mod worker;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::backlog::Story;
use crate::config::Executor as Kind;
use crate::control::Control;
use crate::error::RalphError;
use crate::run::{AttemptReport, AttemptRequest, Event, Executor, LocalExecutor, RunContext};

/// The executor a run uses, chosen by `executor.kind`.
pub(crate) enum AnyExecutor {
    Local(LocalExecutor),
    Ray(ray::RayExecutor),
}

/// The executor `executor.kind` names; a cluster that cannot be reached is
/// said before anything runs.
pub(crate) fn choose(ctx: Arc<RunContext>, verbose: bool) -> Result<AnyExecutor, RalphError> {
    Ok(match &ctx.config.executor {
        Kind::Local => AnyExecutor::Local(LocalExecutor { ctx, verbose }),
        Kind::Ray(settings) => {
            let settings = settings.clone();
            AnyExecutor::Ray(ray::RayExecutor::connect(ctx, &settings)?)
        }
    })
}

/// The agents a run on a cluster may use, as configured: whether they are
/// installed is each node's matter, checked by its worker.
pub(crate) fn agents_on_nodes(
    project: &crate::project::Project,
    default: crate::agent::Backend,
) -> std::collections::HashMap<crate::agent::Backend, (String, Vec<String>)> {
    std::iter::once(default)
        .chain(project.config.agent_fallback.iter().copied())
        .chain(project.backlog.stories.iter().filter_map(|s| s.agent))
        .map(|b| (b, crate::agent::invocation(&project.config, b)))
        .collect()
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
