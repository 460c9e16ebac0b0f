//! What the run's tasks (landings, hooks, notifications) share, read-only,
//! for one run: the attempts' environment (`crate::executor::AttemptEnv`,
//! which the executor gets too) and what only the coordinator needs.

use std::ops::Deref;
use std::sync::Arc;

use crate::executor::AttemptEnv;

pub(crate) use crate::executor::env::WORKTREE_PREP;
pub(crate) use crate::executor::{blocking, env_pairs, run_hook, HOOK_TIMEOUT};

#[derive(Debug)]
pub(crate) struct RunContext {
    /// The environment the run's attempts get; its fields read as the
    /// context's own (`Deref`).
    pub(crate) env: Arc<AttemptEnv>,
    /// The backlog is a prd.json (whose `passes` a landing sets).
    pub(crate) prd: bool,
    /// `landing.mode: pr`: the remote validated work is pushed to, and the
    /// `gh` that opens its pull request.
    pub(crate) pr: Option<PrLanding>,
    /// This run's records (`None` when `.ralph/runs/` cannot be written:
    /// records are worth a log line, not the run).
    pub(crate) runlog: Option<crate::runlog::RunLog>,
    /// The stories this run landed on the target: (story, base, merge).
    /// Each landing checks the main index and the target's tip against
    /// them (`land::check_landed_work`).
    pub(crate) landed: std::sync::Mutex<Vec<(String, crate::gitops::Oid, crate::gitops::Oid)>>,
    /// Landed work found reverted on the target (story, path), each said
    /// once, and how far the check has read the target's history.
    pub(crate) reverted: std::sync::Mutex<crate::gitops::RevertCheck>,
    /// The executor's validations (`validation.where: executor` on an
    /// executor with machines of its own), set once the executor exists;
    /// unset, the merge queue validates here.
    pub(crate) validator: std::sync::OnceLock<Arc<dyn crate::executor::Validator>>,
}

/// Where `landing.mode: pr` sends work.
#[derive(Debug, Clone)]
pub(crate) struct PrLanding {
    pub(crate) remote: String,
    /// The GitHub CLI's executable.
    pub(crate) gh: String,
}

impl Deref for RunContext {
    type Target = AttemptEnv;

    fn deref(&self) -> &AttemptEnv {
        &self.env
    }
}

impl RunContext {
    /// The one constructor: nothing landed yet.
    pub(crate) fn new(
        env: Arc<AttemptEnv>,
        prd: bool,
        pr: Option<PrLanding>,
        runlog: Option<crate::runlog::RunLog>,
    ) -> RunContext {
        RunContext {
            env,
            prd,
            pr,
            runlog,
            landed: Default::default(),
            reverted: Default::default(),
            validator: std::sync::OnceLock::new(),
        }
    }

    /// Appends `ev` to the run's records.
    pub(crate) fn record(&self, ev: crate::runlog::Ev) {
        if let Some(l) = &self.runlog {
            if let Err(e) = l.write(ev) {
                self.log
                    .line(&format!("cannot append to {}: {e}", l.path.display()));
            }
        }
    }

    /// This run's ID in `.ralph/runs/` ("" without records).
    pub(crate) fn run_id(&self) -> &str {
        self.runlog.as_ref().map_or("", |l| l.id.as_str())
    }
}
