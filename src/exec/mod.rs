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
/// They are the same backends a local run resolves (`backends_used`: the
/// escalation ladder's and the fallbacks' too): the run's seal redacts
/// each one's secrets, and its policy knows them.
pub(crate) fn agents_on_nodes(project: &Project, default: Backend) -> Agents {
    agents::used_by(project, default)
        .into_iter()
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

    fn validator(&self) -> Option<Arc<dyn crate::executor::Validator>> {
        match self {
            AnyExecutor::Local(_) => None,
            AnyExecutor::Ray(e) => e.validator(),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a Ray run's agents left out the escalation ladder's
    /// backends, so the run's seal did not know (nor redact) their secrets.
    #[test]
    fn the_nodes_agents_are_every_backend_a_run_may_use() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let write = |rel: &str, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write(
            crate::paths::CONFIG,
            r#"{ "agent": { "fallback": ["gemini"],
                 "escalation": ["haiku", { "agent": "codex", "model": "gpt-5" }] } }"#,
        );
        write(crate::paths::QUEUE, "1.1 | One\n");
        write(
            "specs/epic-1/story-1.1-one.md",
            "---\nid: \"1.1\"\ntitle: \"One\"\nagent: amp\n---\n# One\n",
        );
        let project = crate::project::load(root).unwrap();
        let agents = agents_on_nodes(&project, Backend::Claude);
        let mut names: Vec<&str> = agents.keys().map(|b| b.name()).collect();
        names.sort_unstable();
        assert_eq!(names, ["amp", "claude", "codex", "gemini"]);
        assert_eq!(
            agents::backends_used(
                &project.config.agent,
                &project.backlog.stories,
                Backend::Amp
            ),
            [Backend::Amp, Backend::Gemini, Backend::Codex],
            "each once, the run's own first"
        );
    }
}
