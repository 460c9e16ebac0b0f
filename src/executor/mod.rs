//! The boundary attempts run behind, below both sides of it (issue 33):
//! the run (`run/`, the coordinator) hands attempts to an `Executor` and
//! reads their reports; the executors (`exec/`: `local` on this machine,
//! `ray` on a cluster) run them. Neither side imports the other: both
//! build on what is here (`arch_tests`).
//!
//! Files: `attempt` (the request, the report and what a running attempt
//! says before it), `env` (what an attempt runs with: the project's
//! places, the config, the agents; the hooks and the helpers attempts and
//! landings share), `seal` (how the run's children are sealed),
//! `validate` (the merge queue's validations handed to the executor).

pub(crate) mod attempt;
pub(crate) mod env;
pub(crate) mod seal;
pub(crate) mod validate;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::agent::Backend;
use crate::backlog::Story;
use crate::control::Control;
use crate::error::RalphError;
use crate::gitops::Git;
use crate::project::Project;

pub(crate) use attempt::{AttemptEvent, AttemptReport, AttemptRequest};
pub(crate) use env::{
    blocking, build_prompt, env_pairs, post_hooks, run_hook, template, AttemptEnv, HOOK_TIMEOUT,
};
pub(crate) use seal::RunSeal;
pub(crate) use validate::{Validated, ValidationEnd, ValidationJob, Validator};

/// Every backend a run may use: its executable (resolved once at the
/// start, or the nodes' to find) and its arguments.
pub(crate) type Agents = HashMap<Backend, (String, Vec<String>)>;

/// Where attempts run: a slot worktree and a child process on this machine
/// (`exec::local::LocalExecutor`) or a cluster's job (`exec::ray`).
pub(crate) trait Executor: Send + Sync + 'static {
    /// Runs one attempt to its verdict. `activity` takes what the agent is
    /// doing, for the display; `control` asks it to stop.
    fn run(
        &self,
        req: AttemptRequest,
        story: Story,
        control: watch::Receiver<Control>,
        activity: mpsc::UnboundedSender<AttemptEvent>,
    ) -> impl Future<Output = AttemptReport> + Send + 'static;

    /// The log of an attempt, relative to the project root (for a report
    /// made up when the attempt's task died).
    fn log_rel(&self, id: &str, attempt: u32) -> String;

    /// Between two events, the run's free slots (`free`) while stories
    /// wait: made ready for their next story in the background, or
    /// removed (`retire`) once none waits to start. Only an executor with
    /// slots of its own on this machine has any to warm.
    fn warm(&self, _free: &[usize], _retire: bool) {}

    /// The attempt in `slot` is over (its report is in, or its task died):
    /// whatever it did to the slot is done.
    fn slot_left(&self, _slot: usize) {}

    /// Waits for the warms still running (they may be making a worktree
    /// the run's cleanup is about to remove).
    fn warmed(&self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// The merge queue's validations as jobs of this executor
    /// (`validation.where: executor`); `None`: it has no machines but
    /// this one, and the queue validates here.
    fn validator(&self) -> Option<Arc<dyn Validator>> {
        None
    }

    /// What an executor does once the run's attempts have all answered.
    fn end_of_run(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// The executor of a run, as the command that assembles the run chose it
/// (`exec::ByConfig`: `executor.kind`). The run asks it, in its phases:
/// which agents the attempts may use and whether each starts, before
/// anything is touched; then, once the attempts' environment exists, the
/// executor itself.
pub(crate) trait ExecutorChoice {
    type Executor: Executor;

    /// The agents the run's attempts may use (`default`: the run's own,
    /// `--agent` or `agent.name`); one that is missing is a usage error.
    fn agents(&self, project: &Project, default: Backend) -> Result<Agents, RalphError>;

    /// Each agent started once as its attempts will be, sealed the same
    /// way: one that cannot start is the user's to fix, never a story's
    /// failure (issue 32).
    fn check_agents(
        &self,
        project: &Project,
        git: &Git,
        agents: &Agents,
        seal: &RunSeal,
    ) -> Result<(), RalphError>;

    /// The executor for the run's attempts; one that cannot be had (a
    /// cluster that does not answer) is said before any attempt.
    /// `claimable`: the stories an attempt of this run may start, whose
    /// work left by a crashed run it may take over (a cluster's other jobs
    /// of this project are stopped at once).
    fn executor(
        &self,
        env: Arc<AttemptEnv>,
        verbose: bool,
        claimable: &HashSet<String>,
    ) -> Result<Self::Executor, RalphError>;
}
