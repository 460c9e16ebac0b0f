//! A validation candidate's records (issue 34): `validate_start` and
//! `validate_end` name the tree the target may move to, the stories it
//! holds and the verdict, for a lone landing (`land.rs`) and a chain's
//! merges (`queue.rs`) alike.

use std::sync::Arc;

use crate::gitops::Oid;
use crate::project;

use super::context::{blocking, RunContext};

/// Records that the candidate `commit` (holding `stories`) starts to
/// validate in slot `slot`; returns its tree for the end's record.
pub(super) async fn validate_start(
    ctx: &Arc<RunContext>,
    commit: &Oid,
    stories: Vec<String>,
    slot: usize,
) -> String {
    let c = commit.clone();
    let tree = blocking(ctx, move |g| g.git.tree_of(&c))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    ctx.record(crate::runlog::Ev::ValidateStart {
        tree: tree.clone(),
        stories,
        slot: project::validation_slot(slot).0,
    });
    tree
}

/// Records the end of a candidate's validation, `verdict` as `Ev::ValidateEnd` says.
pub(super) fn validate_end(
    ctx: &RunContext,
    tree: String,
    stories: Vec<String>,
    verdict: &str,
    started: std::time::Instant,
) {
    ctx.record(crate::runlog::Ev::ValidateEnd {
        tree,
        stories,
        verdict: verdict.to_string(),
        secs: started.elapsed().as_secs_f64(),
    });
}

/// Taken for the whole run of an `exclusive: true` validation command: the
/// merge queue's side-by-side validations take turns for such commands
/// (one lock for them all: a port or a database is the machine's).
static EXCLUSIVE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The turn of command `v`: held while it runs when it is exclusive.
pub(super) async fn turn(
    v: &crate::config::ValidationCommand,
) -> Option<tokio::sync::MutexGuard<'static, ()>> {
    if v.exclusive {
        Some(EXCLUSIVE.lock().await)
    } else {
        None
    }
}
