//! Validation off the coordinator (issue 34, `validation.where: executor`):
//! the merge queue (`run/queue.rs`, `run/land.rs`) hands a candidate's
//! merge to the run's executor through this interface and reads its
//! verdict; the coordinator still makes every merge, every compare-and-swap
//! and every record. `exec/ray` implements it with a job on the cluster
//! (`ralph worker validate`); without one (the local executor) the queue
//! validates in its own worktrees as it always did.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::control::Control;
use crate::gitops::Oid;

/// One candidate's validation as the merge queue hands it over.
#[derive(Debug, Clone)]
pub(crate) struct ValidationJob {
    /// The candidate's top story (its `RALPH_STORY`; its log's name).
    pub(crate) story: String,
    pub(crate) attempt: u32,
    /// The merge whose exact tree is validated.
    pub(crate) commit: Oid,
    /// The target's tip as the validation starts (landed work and the
    /// user's own): the config the node seals the commands by is read
    /// there, never in the candidate, whose edits to it are an agent's.
    pub(crate) trusted: Oid,
    /// Its position in the chain (its relay ref and job are named by it).
    pub(crate) k: usize,
    /// Where the coordinator keeps its output, as a local validation's.
    pub(crate) log: PathBuf,
}

/// A validation's verdict, on the wire too (a node's report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub(crate) enum Validated {
    /// Every required command passed.
    Passed,
    /// Command `name` (`cmd`) failed; `tail` is the end of its own output.
    Failed {
        name: String,
        cmd: String,
        tail: String,
    },
    /// The run (or the chain, throwing the candidate away) stopped it.
    Interrupted,
    /// It could not run (a job refused, lost again and again, a command
    /// that could not start): said so, never taken for a pass.
    Error { reason: String },
}

/// What came back: the verdict and where it ran (`<node>/<slot>`).
#[derive(Debug, Clone)]
pub(crate) struct ValidationEnd {
    pub(crate) verdict: Validated,
    pub(crate) node: String,
}

/// The executor's side of a validation: object-safe, so the run's context
/// holds one whatever executor the run has.
pub(crate) trait Validator: Send + Sync + std::fmt::Debug {
    /// Validates `job`'s merge to its verdict; `control` stops it (the
    /// run's stop, or the chain throwing the candidate away). The log is
    /// at `job.log` when it returns.
    fn validate(
        &self,
        job: ValidationJob,
        control: watch::Receiver<Control>,
    ) -> Pin<Box<dyn Future<Output = ValidationEnd> + Send + 'static>>;
}

/// The end of what `log` holds from byte `from` on (lossy UTF-8), enough
/// for `prompt::output_tail`; `None` when it cannot be read.
pub(crate) fn output_since(log: &std::path::Path, from: u64) -> Option<String> {
    // A command can print gigabytes; the prompt shows 16 KB of it.
    let (text, cut) =
        crate::store::read_log_end(log, from, 4 * crate::prompt::TAIL_BYTES as u64).ok()?;
    Some(match text.find('\n') {
        // Cut mid-line: the partial first line goes.
        Some(nl) if cut => text[nl + 1..].to_string(),
        _ => text,
    })
}
