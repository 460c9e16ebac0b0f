//! `landing.*`: what becomes of validated work, and how the merge queue
//! validates (docs/merge-queue.md).

use super::reader::Reader;

/// `landing.*` (and Ralph v2's `parallel.auto_merge`): what becomes of
/// validated work.
#[derive(Debug, Clone)]
pub(crate) struct Landing {
    /// `landing.mode: review` (or Ralph v2's `parallel.auto_merge: false`):
    /// validated work stays on its story branch for `ralph land`.
    pub(crate) review: bool,
    /// `landing.mode: pr`: validated work is pushed to `landing.remote`
    /// (default `origin`) and proposed with `gh pr create`; the remote.
    pub(crate) pr_remote: Option<String>,
    /// `landing.speculate` (default 4): how many merges the queue builds
    /// on each other and validates side by side (docs/merge-queue.md); 1
    /// validates one landing at a time.
    pub(crate) speculate: usize,
    /// `landing.batch` (default 1): how many waiting stories one candidate
    /// holds, validated once and bisected on a failure.
    pub(crate) batch: usize,
    /// `landing.max_validations` (0: the machine's CPUs and memory): the
    /// most candidates the queue validates at once on this machine.
    pub(crate) max_validations: usize,
    /// `landing.validation_memory_mb` (default 1024; 0: no memory rule):
    /// what one validation is taken to need when `max_validations` is 0.
    pub(crate) validation_memory_mb: u64,
}

pub(super) fn landing(r: &mut Reader) -> Landing {
    let mode = r.string("landing.mode", false);
    let remote = r.string("landing.remote", false);
    let (review, pr_remote) = match mode.as_str() {
        "merge" => (false, None),
        "review" => (true, None),
        "pr" => (false, Some(remote)),
        other => {
            r.problem(
                "landing.mode",
                format!(
                    "landing.mode {other:?} is not one ralph has: \"merge\" (land what passes \
                     validation), \"review\" (keep it for `ralph land`) or \"pr\" (push it and \
                     open a pull request)"
                ),
            );
            (false, None)
        }
    };
    let review = review || (pr_remote.is_none() && !r.boolean("parallel.auto_merge"));
    let speculate = r.uint(
        "landing.speculate",
        1,
        "a whole number of merges validated at once, at least 1",
    ) as usize;
    let batch = r.uint(
        "landing.batch",
        1,
        "a whole number of stories validated as one candidate, at least 1",
    ) as usize;
    let max_validations = r.uint(
        "landing.max_validations",
        0,
        "a whole number of validations at once (0: one per CPU, as memory allows)",
    ) as usize;
    let validation_memory_mb = r.uint(
        "landing.validation_memory_mb",
        0,
        "a whole number of megabytes (0 turns the memory rule off)",
    );
    Landing {
        review,
        pr_remote,
        speculate,
        batch,
        max_validations,
        validation_memory_mb,
    }
}
