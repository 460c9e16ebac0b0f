//! The run's fixed parameters (`Policy`), set once where the run is
//! assembled: jobs, retries, limits, budget, agents and models, the
//! gates and the merge queue's depth; and the waits and counts the
//! transition holds every run to (`Policy::FIRST_BACKOFF`, ...).

use std::time::Duration;

use crate::agent::Backend;
use crate::state::{Note, Status};

/// The run's fixed parameters.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    pub(crate) jobs: usize,
    pub(crate) max_retries: u32,
    /// Most attempts this run (`-n`, `loop.max_iterations`).
    pub(crate) limit: Option<u64>,
    pub(crate) target: String,
    pub(crate) budget: Budget,
    /// Longest usage-limit reset worth waiting for.
    pub(crate) max_wait: Duration,
    /// The run's agent, then its fallbacks, in order.
    pub(crate) agents: Vec<Backend>,
    /// The least time between two agent starts (`parallel.stagger_seconds`).
    pub(crate) stagger: Duration,
    /// A fix-up continues the agent's session where its CLI can
    /// (`retry.resume_session`).
    pub(crate) resume_session: bool,
    /// A story that fails for good is decomposed once, down to this depth
    /// (`decomposition.max_depth`); `None` when `decomposition.enabled` is off
    /// or the run was asked for one story (`-s`).
    pub(crate) decompose_depth: Option<usize>,
    /// The most retries running at once (`parallel.retry_concurrency`).
    pub(crate) retry_concurrency: usize,
    /// The memory one agent needs, in MB (`parallel.agent_memory_mb`; 0 =
    /// no check).
    pub(crate) agent_memory_mb: u64,
    /// Predict what each story touches and keep clashing stories apart
    /// (`parallel.predict_files`); off, dispatch knows no files at all.
    pub(crate) predict_files: bool,
    /// `parallel.conflicts`: a clash on a declared file holds a story back
    /// even with a slot free (`Wait`), or only reorders (`Risk`).
    pub(crate) conflicts: crate::config::Conflicts,
    /// The project's past attempts (`forecast`), when it has any: each
    /// story's expected duration orders the critical path and gives the
    /// ETA. Advice only: nothing waits or fails for it.
    pub(crate) history: Option<std::sync::Arc<crate::forecast::History>>,
    /// `ralph decompose ID`: the run is that story's split and nothing else.
    pub(crate) split_by_hand: Option<SplitByHand>,
    /// Which model each attempt runs on (issue 25).
    pub(crate) models: Models,
    /// `gates.tests`: what the test-integrity gate's findings lead to.
    pub(crate) tests_gate: crate::config::TestsGate,
    /// `gates.review.*`: the reviewer after validation, when on.
    pub(crate) review: Option<crate::config::ReviewGate>,
    /// `landing.speculate`: the deepest chain the merge queue builds (1 in
    /// review and pr modes and with a reviewer: those land one at a time).
    pub(crate) speculate: usize,
    /// `landing.mode`: `review` (outside `ralph land`) keeps validated work
    /// for a person, `pr` opens a pull request of it.
    pub(crate) landing_mode: LandingMode,
    /// `landing.batch`: stories per candidate (1 where `speculate` is 1
    /// for a person or a reviewer).
    pub(crate) batch: usize,
    /// Best of N (issue 36): `--best-of`, `attempts.best_of`,
    /// `attempts.candidates`.
    pub(crate) best_of: BestOf,
}

/// How many candidates race for an attempt, and who they run as
/// (`race::best_of`, `race::candidate_agent`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct BestOf {
    pub(crate) cli: Option<u32>,
    pub(crate) config: u32,
    pub(crate) candidates: Vec<crate::config::CandidateSpec>,
    pub(crate) pick: crate::config::Pick,
    pub(crate) judge: Option<crate::config::CandidateSpec>,
    /// The required validation commands' names, in the order they run: a
    /// lost race's closest candidate is the one whose failing check comes
    /// latest (`Race::closest`).
    pub(crate) checks: Vec<String>,
}

/// The run's models: the ladder, `agent.model` (for the run's own agent)
/// and `--model`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Models {
    pub(crate) ladder: Vec<crate::agent::Rung>,
    pub(crate) base: Option<String>,
    pub(crate) pinned: Option<String>,
}

/// The story `ralph decompose ID` splits, as it was before the user asked:
/// a refused split leaves it so (not charged, not run as an attempt).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SplitByHand {
    pub(crate) id: String,
    pub(crate) status: Status,
    pub(crate) note: Option<Note>,
}

/// What a run may spend (`--max-cost`, `budget.*`); `None`s are no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Budget {
    pub(crate) run_usd: Option<f64>,
    pub(crate) total_usd: Option<f64>,
    pub(crate) run_tokens: Option<u64>,
    /// `budget.max_cost_per_story_usd`.
    pub(crate) story_usd: Option<f64>,
}

impl Policy {
    /// The merge queue keeps its chain open (`run/stream.rs`): stories
    /// join the chain in flight as they finish, each merged on the one
    /// before and validated at once. Batches keep their rounds (a batch
    /// is bisected as a whole: `run/queue.rs`), and so does a run with no
    /// required validation: with nothing to validate side by side, the
    /// open chain would only land what arrives one compare-and-swap at a
    /// time, where a round lands all that waited with one (the 1,000-story
    /// figure: 300 stories, 300 swaps against 155).
    pub(crate) fn streams(&self) -> bool {
        self.speculate > 1 && self.batch <= 1 && !self.best_of.checks.is_empty()
    }

    /// The top rung's model for a timeout's postmortem, when `agent` runs it.
    pub(crate) fn postmortem_model(&self, agent: Backend) -> Option<String> {
        let m = &self.models;
        if let Some(pinned) = &m.pinned {
            return Some(pinned.clone());
        }
        let top = crate::ladder::top(&m.ladder, m.base.as_deref());
        let meant = top.agent.or(self.agents.first().copied());
        top.model.filter(|_| meant == Some(agent))
    }

    /// Conflicts after which a story needs a person: a story that keeps
    /// colliding is not helped by more redos.
    pub(crate) fn max_conflicts(&self) -> u32 {
        self.max_retries + 2
    }

    /// First wait after a usage limit without a reset time.
    pub(crate) const FIRST_BACKOFF: Duration = Duration::from_secs(60);
    /// Longest wait after repeated usage limits without a reset time.
    pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(1800);
    /// First wait after a transient fault outside the story.
    pub(crate) const FAULT_BACKOFF: Duration = Duration::from_secs(5);
    /// Transient faults in a row after which a person is asked instead.
    pub(crate) const MAX_TRANSIENT_FAULTS: u32 = 5;
    /// Failed attempts in a row with one cause, over at least two stories,
    /// that trip the circuit breaker.
    pub(crate) const BREAKER_ATTEMPTS: usize = 3;
    /// How long one job fewer runs after a limit warning without a reset.
    pub(crate) const WARNING_WINDOW: Duration = Duration::from_secs(3600);
    /// While memory holds new agents back, how often it is read again.
    pub(crate) const MEMORY_RECHECK: Duration = Duration::from_secs(2);
    /// Merge-queue turns a story may lose to a moving target (each turn is
    /// five merge rounds) before the run asks for a quieter target.
    pub(crate) const MAX_RACES: u32 = 10;
}

/// What `landing.mode` asks of validated work (`ralph land` lands what a
/// person approved whatever the mode says).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LandingMode {
    pub(crate) review: bool,
    pub(crate) pr: bool,
}
