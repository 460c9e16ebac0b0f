//! What the run asks of a running child (an agent, a validation command):
//! plain data shared by the pure transition and the process edge.

/// Requests sent to a running attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Control {
    Run,
    /// Graceful stop: SIGTERM, grace, SIGKILL.
    Stop,
    /// SIGKILL at once.
    Kill,
}
