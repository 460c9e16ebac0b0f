//! The boundary attempts run behind: a local worktree and a child process
//! (`attempt::LocalExecutor`) or a cluster's job (`exec::ray`). Its own
//! file so that the dispatcher and every executor depend on it, never on
//! each other.

use std::future::Future;

use tokio::sync::{mpsc, watch};

use super::events::{AttemptReport, AttemptRequest, Event};
use crate::backlog::Story;
use crate::control::Control;

/// Where attempts run. Today a local worktree and a child process
/// (`attempt::LocalExecutor`); a remote executor is another implementation.
pub(crate) trait Executor: Send + Sync + 'static {
    /// Runs one attempt to its verdict. `activity` takes what the agent is
    /// doing, for the display; `control` asks it to stop.
    fn run(
        &self,
        req: AttemptRequest,
        story: Story,
        control: watch::Receiver<Control>,
        activity: mpsc::UnboundedSender<Event>,
    ) -> impl Future<Output = AttemptReport> + Send + 'static;

    /// The log of an attempt, relative to the project root (for a report
    /// made up when the attempt's task died).
    fn log_rel(&self, id: &str, attempt: u32) -> String;
}
