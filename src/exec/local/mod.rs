//! The local executor: each attempt in a slot worktree of the main
//! repository, its agent a child process (also what a Ray worker runs on
//! its node). Files: `attempt` (one attempt in short steps), `slot` (the
//! slot's worktree around the agent, and slots made ready ahead),
//! `fixup` (a fix-up's merge and prompt), `postmortem` (the timeout's),
//! `split` (a decomposition's answer written), `verdict` (pure: the
//! verdict from the facts).

mod attempt;
mod fixup;
mod postmortem;
mod slot;
mod split;
mod verdict;

use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::backlog::Story;
use crate::control::Control;
use crate::executor::{
    blocking, AttemptEnv, AttemptEvent, AttemptReport, AttemptRequest, Executor,
};

use slot::SLOT_STARTS;

/// Attempts in slot worktrees of the main repository, agents as children.
pub(crate) struct LocalExecutor {
    ctx: Arc<AttemptEnv>,
    verbose: bool,
    warming: Mutex<Warming>,
}

/// Free slots being made ready for their next story (`slot::warm_slot`).
#[derive(Default)]
struct Warming {
    /// Each answers with its slot when it gave way to a start.
    tasks: JoinSet<Option<usize>>,
    /// What was asked of each slot since a story last left it: a warm
    /// (`Some(false)`) or its removal (`Some(true)`).
    asked: Vec<Option<bool>>,
}

impl LocalExecutor {
    pub(crate) fn new(ctx: Arc<AttemptEnv>, verbose: bool) -> LocalExecutor {
        LocalExecutor {
            ctx,
            verbose,
            warming: Mutex::new(Warming::default()),
        }
    }

    fn warming(&self) -> std::sync::MutexGuard<'_, Warming> {
        self.warming.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn slot_path(&self, slot: usize) -> std::path::PathBuf {
        crate::paths::slot_worktree(&self.ctx.root, slot).1
    }

    /// A story is given `slot`: a warm asked for before does nothing now.
    fn slot_asked(&self, slot: usize) {
        let path = self.slot_path(slot);
        {
            let mut starts = SLOT_STARTS.lock().unwrap_or_else(|e| e.into_inner());
            starts.entry(path).or_default().asked += 1;
        }
        if let Some(a) = self.warming().asked.get_mut(slot) {
            *a = None;
        }
    }
}

impl Executor for LocalExecutor {
    fn run(
        &self,
        req: AttemptRequest,
        story: Story,
        control: watch::Receiver<Control>,
        activity: mpsc::UnboundedSender<AttemptEvent>,
    ) -> impl std::future::Future<Output = AttemptReport> + Send + 'static {
        // Now, not when the attempt's task first runs: a warm asked from
        // here on must not touch the slot.
        self.slot_asked(req.slot);
        let (ctx, verbose) = (self.ctx.clone(), self.verbose);
        async move { attempt::run_attempt(ctx, req, story, control, activity, verbose).await }
    }

    fn log_rel(&self, id: &str, attempt: u32) -> String {
        attempt::rel(
            &self.ctx.root,
            &crate::paths::attempt_log_path(&self.ctx.root, id, attempt),
        )
    }

    /// Issue 21: ralph's own work for a story should not sit between its
    /// dependency landing and its agent starting. Each slot that is free
    /// while more stories wait is made ready in the background (made when
    /// missing, detached at the target's tip, clean), so the start there is
    /// a branch and a HEAD when the tip has not moved since, and a checkout
    /// of what changed when it has.
    ///
    /// Once no story waits to start, a free slot is removed the same way
    /// instead: the run's cleanup would remove it after the last landing,
    /// where it adds to the run's length. A story sent back to the queue
    /// later (a retry, a fix-up) gets its slot made again.
    fn warm(&self, free: &[usize], retire: bool) {
        let mut w = self.warming();
        if let Some(&last) = free.iter().max() {
            if w.asked.len() <= last {
                w.asked.resize(last + 1, None);
            }
        }
        while let Some(done) = w.tasks.try_join_next() {
            if let Ok(Some(slot)) = done {
                w.asked[slot] = None;
            }
        }
        for &slot in free {
            if w.asked[slot] == Some(retire) {
                continue;
            }
            w.asked[slot] = Some(retire);
            let path = self.slot_path(slot);
            let epoch = {
                let starts = SLOT_STARTS.lock().unwrap_or_else(|e| e.into_inner());
                starts.get(&path).map_or(0, |s| s.asked)
            };
            let ctx = self.ctx.clone();
            w.tasks.spawn(async move {
                let gave_way =
                    blocking(&ctx, move |c| slot::warm_slot(c, slot, epoch, retire)).await;
                gave_way.unwrap_or(false).then_some(slot)
            });
        }
    }

    fn slot_left(&self, slot: usize) {
        let path = self.slot_path(slot);
        let mut starts = SLOT_STARTS.lock().unwrap_or_else(|e| e.into_inner());
        let s = starts.entry(path).or_default();
        s.taken = s.asked;
    }

    async fn warmed(&self) {
        let mut tasks = std::mem::take(&mut self.warming().tasks);
        while tasks.join_next().await.is_some() {}
    }
}
