//! The run's model: the saved state and the scheduler's view of it, changed
//! only together through `apply`, plus what the run itself keeps in memory
//! (slots, the landing queue, pauses, signals). Pure.
//!
//! `policy.rs` holds the run's fixed parameters (`Policy`); `touched.rs`
//! what each story is predicted to touch, kept up as agents edit.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::events::Now;
use crate::agent::Backend;
use crate::backlog::Story;
use crate::dag::Dag;
use crate::schedule::{
    jobs_now, with_dependencies, Jobs, Memory, Scheduler, StoryState, AGENT_WARMUP,
};
use crate::state::{AfterFailure, State, Status};
use crate::status::story_node;

mod policy;
pub(crate) mod race;
mod touched;

pub(crate) use policy::{BestOf, Budget, LandingMode, Models, Policy, SplitByHand};
pub(crate) use race::{CandState, Race};

/// Why the run stops starting work before the backlog is finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fatal {
    /// Something only a person can fix (exit 1).
    NeedsPerson(String),
    /// ralph itself failed, e.g. the state cannot be written (exit 4).
    Internal(String),
}

/// One agent's model API failing attempt after attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ApiFaults {
    /// When the first failure of the streak was reported (Unix seconds).
    pub(crate) since: i64,
    pub(crate) count: u32,
}

/// Ctrl-C once stops gracefully, twice kills at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) enum SignalCount {
    #[default]
    None,
    Once,
    Twice,
}

/// A status change of one story, applied to the state and the scheduler
/// together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Change<'a> {
    /// An attempt starts.
    Start,
    /// Finished work goes to the merge queue.
    BeginLanding,
    /// Back to the queue without counting (interrupted, rate-limited,
    /// blocked checkout).
    Requeue,
    /// A racing candidate's work did not land: the race goes on, the story
    /// running again (issue 36).
    RaceOn,
    /// A failed attempt, counted against the retry budget.
    Fail {
        reason: &'a str,
    },
    /// The landing conflicted.
    Conflict {
        note: &'a str,
    },
    /// No more tries without a person.
    GiveUp,
    Landed {
        commit: &'a str,
    },
    /// A failed attempt is taken back: its cause was not the story's.
    Refund,
    /// Its validated work waits on its branch for a person.
    InReview,
    /// A person sent its work in review back (`ralph reject`): it runs
    /// again, told why.
    Rejected {
        why: &'a str,
    },
    /// Its validated work is proposed as a pull request.
    InPr {
        url: &'a str,
    },
    /// It failed for good; one run will split it into sub-stories.
    Decompose {
        note: &'a str,
    },
    /// The split `ralph decompose ID` asked for was refused: the story is
    /// as it was before (`Policy::split_by_hand`), nothing charged.
    SplitRefused,
    /// Ctrl-C caught the story waiting to land. The state keeps it
    /// `landing` so the next run lands it; the scheduler lets it go, as
    /// nothing more happens to it in this run.
    LandingInterrupted,
}

/// A story in the merge queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Landing {
    pub(crate) idx: usize,
    /// The attempt whose work lands (names the refs that keep it).
    pub(crate) attempt: u32,
    /// The iteration whose post hooks wait for the landing's outcome (none
    /// for work found finished at startup).
    pub(crate) iteration: Option<u64>,
    /// When the merge queue took it up (its record's `secs`).
    pub(crate) since: Option<Instant>,
    /// A person approved it from review during this run (`ralph land ID`):
    /// it lands on the target instead of stopping for review again.
    pub(crate) approved: bool,
    /// The test gate's findings were recorded and let be (`gates.tests:
    /// warn`): this landing does not check them again.
    pub(crate) tests_let_be: bool,
    /// A racing candidate's work judged, not landed (`attempts.pick:
    /// judge`): validated on the target's tip and kept on its branch.
    pub(crate) trial: bool,
}

/// The merge queue's chain in flight, as the transition sees it: none
/// (`Idle`: a landing of one, the rounds of batches, or nothing), one
/// that takes the stories finished while it validates (`Open`: Zuul's
/// dependent pipeline, `run/stream.rs`), or one told it gets no more
/// (`Closing`), whose end the next landing waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Chain {
    #[default]
    Idle,
    Open,
    Closing,
}

/// What `apply` found out while changing a story.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Applied {
    /// The attempt's number (`Start`).
    pub(crate) attempt: u32,
    /// Failed attempts or conflicts counted so far (`Fail`, `Conflict`).
    pub(crate) count: u32,
    /// The story failed for good (`Fail`, `GiveUp`).
    pub(crate) failed_for_good: bool,
    /// Stories newly blocked by that.
    pub(crate) blocked: Vec<usize>,
}

#[derive(Debug, Clone)]
pub(crate) struct Model {
    pub(crate) state: State,
    sched: Scheduler,
    pub(crate) stories: Vec<Story>,
    pub(crate) policy: Policy,
    /// The story each job slot is running.
    pub(crate) slots: Vec<Option<usize>>,
    /// Stories waiting for the merge queue, in arrival order.
    pub(crate) land_queue: VecDeque<Landing>,
    /// The stories being landed now: one, or the merge queue's chain
    /// (`landing.speculate`), in chain order.
    pub(crate) landing: Vec<Landing>,
    /// Whether the chain in flight takes more stories as they arrive
    /// (`Chain::Open`, `run/stream.rs`).
    pub(crate) chain: Chain,
    /// How many stories the next chain may take (Zuul's window: halved by a
    /// failed validation, one more per landing, up to `Policy::speculate`).
    pub(crate) window: usize,
    /// Post hooks of landed (or refused) work still running.
    pub(crate) hooks_running: usize,
    pub(crate) attempts_this_run: u64,
    pub(crate) signals: SignalCount,
    pub(crate) fatal: Option<Fatal>,
    /// No new work before then (a fault outside the story).
    pub(crate) pause_until: Option<Instant>,
    pub(crate) backoff: Duration,
    /// Transient faults in a row, per story (reset by any other outcome).
    pub(crate) faults: HashMap<usize, u32>,
    /// The model API's failures in a row, per agent name (`FaultKind::Api`):
    /// when the first was (Unix seconds) and how many; an attempt of that
    /// agent that reached the API clears it.
    pub(crate) api_faults: HashMap<String, ApiFaults>,
    /// Agents whose API kept failing past `limits.max_wait_hours`: no new
    /// attempt uses them this run. The value says what failed, for the end.
    pub(crate) api_given_up: HashMap<String, String>,
    /// Turns of the merge queue lost to a moving target, per story.
    pub(crate) races: HashMap<usize, u32>,
    /// The causes of the latest failed attempts in a row (story, first line
    /// of the reason), for the circuit breaker.
    pub(crate) recent_failures: Vec<(usize, String)>,
    /// The cause that tripped the breaker: attempts still running when it
    /// tripped that end the same way are not charged either.
    pub(crate) breaker_cause: Option<String>,
    /// No agent starts before then (`parallel.stagger_seconds`).
    pub(crate) next_start_at: Option<Instant>,
    /// Until then one job fewer runs: the agent warned its limit is near.
    pub(crate) fewer_jobs_until: Option<Instant>,
    /// The state's agent runs when the run began: the summary counts
    /// only this run's.
    pub(crate) waste_at_start: crate::state::Waste,
    /// Spent by this run's attempts.
    pub(crate) run_cost_usd: f64,
    /// An attempt of this run had an unknown cost.
    pub(crate) run_cost_unknown: bool,
    pub(crate) run_tokens: u64,
    /// A decomposition landed: the backlog on disk has new stories. No new
    /// work starts; once nothing runs, the run reloads the backlog and goes
    /// on with a model of the new one (`reload`).
    pub(crate) reload_pending: bool,
    /// When each slot's agent started (the memory check keeps room for
    /// young agents).
    pub(crate) slot_started: Vec<Option<Instant>>,
    /// The model of the attempt running in each slot (`None` also when the
    /// CLI chose), for the budget's look ahead.
    pub(crate) slot_model: Vec<Option<String>>,
    /// Memory a new agent could get, in MB, as the dispatcher last read it
    /// (`None`: unknown, no check).
    pub(crate) memory_mb: Option<u64>,
    /// Memory held agents back: read it again then.
    pub(crate) recheck_at: Option<Instant>,
    /// The job count last said to be lowered for memory.
    pub(crate) memory_said: Option<usize>,
    /// What each story's worktree changed so far, while it runs or waits
    /// to land (and for its next attempt), as the dispatcher last read it.
    pub(crate) touched: HashMap<usize, Vec<String>>,
    /// The files each story is predicted to touch: its spec's, the paths it
    /// conflicted on before, what it touched so far (`refresh_files`).
    pub(crate) files: Vec<Vec<String>>,
    /// The stories this run selected (`-s`, `-r`, and what those wait for
    /// that is not done): a story done earlier stays `Done` for the
    /// scheduler, but only these are counted.
    pub(crate) chosen: Vec<bool>,
    /// Stories selected only because a selected one waits for them
    /// (`schedule::with_dependencies`), and the selected ones that do.
    pub(crate) pulled_in: Vec<usize>,
    pub(crate) needing: Vec<usize>,
    /// `ralph drain`: nothing new starts, and the run ends once nothing
    /// runs or lands.
    pub(crate) draining: bool,
    /// `ralph stop ID` asked these stories' attempts to stop: their end is
    /// recorded as stopped, not charged.
    pub(crate) stop_asked: std::collections::HashSet<usize>,
    /// A person held a story during this run (`ralph hold`, `ralph stop`):
    /// the run waits for its release (or a drain) rather than end with it.
    pub(crate) holds_here: bool,
    /// `landing.mode: review` without `--exit-on-review`: the run waits for
    /// stories in review to be approved (`ralph land ID` reaches it).
    pub(crate) waits_for_review: bool,
    /// The run said it waits for a person (once per wait).
    pub(crate) said_waiting: bool,
    /// Each story's expected duration in seconds (attempts and landing),
    /// from `policy.history`; `None` without history.
    pub(crate) expected_secs: Option<Vec<f64>>,
    /// Best of N (issue 36): the candidates racing for a story's attempt,
    /// by story, until every candidate's report is in.
    pub(crate) racing: HashMap<usize, Race>,
    /// Landings of racing candidates, for the race to judge once the
    /// event that ended them is through (`transition::race`).
    pub(crate) race_landings: Vec<(Landing, super::events::LandResult)>,
}

impl Model {
    /// At least `n` slots, every per-slot vector grown with them (`ralph
    /// jobs N` raising the count mid-run).
    pub(crate) fn grow_slots(&mut self, n: usize) {
        if self.slots.len() < n {
            self.slots.resize(n, None);
            self.slot_started.resize(n, None);
            self.slot_model.resize(n, None);
        }
    }

    /// The model of a run over `stories` from `state`: `only` (`-s`) and
    /// `first` (`-r`) exclude the others.
    pub(crate) fn new(
        stories: Vec<Story>,
        dag: &Dag,
        state: State,
        policy: Policy,
        only: Option<usize>,
        first: usize,
        now_at_start: Now,
    ) -> Model {
        let chosen = (0..stories.len())
            .map(|i| only.is_none_or(|o| o == i) && i >= first)
            .collect();
        Model::selecting(stories, dag, state, policy, chosen, only, now_at_start)
    }

    /// The model of a run over the `chosen` stories and what they wait
    /// for that is not done (the DAG is law: nothing starts before what it
    /// waits for landed; `ralph decompose ID` alone runs its split at once,
    /// as a split does not need them); `only` is a story asked for by hand,
    /// whose failure is forgiven.
    fn selecting(
        stories: Vec<Story>,
        dag: &Dag,
        mut state: State,
        policy: Policy,
        chosen: Vec<bool>,
        only: Option<usize>,
        now_at_start: Now,
    ) -> Model {
        let selection = if policy.split_by_hand.is_some() {
            crate::schedule::Selection {
                chosen,
                added: Vec::new(),
                needing: Vec::new(),
            }
        } else {
            let at_start: Vec<StoryState> = stories.iter().map(|s| story_node(&state, s)).collect();
            with_dependencies(dag, &chosen, &at_start)
        };
        let chosen = selection.chosen;
        let nodes: Vec<StoryState> = stories
            .iter()
            .enumerate()
            .map(|(i, s)| match story_node(&state, s) {
                StoryState::Done => {
                    // prd.json's `passes` joins the state's completed list.
                    state.mark_done(&s.id, None);
                    StoryState::Done
                }
                _ if !chosen[i] => StoryState::Excluded,
                StoryState::Failed if only == Some(i) => {
                    // An explicit `-s` gives a failed story a fresh budget.
                    state.reset_attempts(&s.id);
                    StoryState::Pending
                }
                node => node,
            })
            .collect();
        let now = now_at_start;
        // Agents' usage limits are kept in the state (`paused_until`): the
        // ones a previous run recorded that are still in force hold here too.
        state.paused_until.retain(|_, until| *until > now.unix);
        let spec_bytes: Vec<usize> = stories.iter().map(|s| s.spec_bytes).collect();
        let agent = policy.agents.first().map(|b| b.name());
        let expected_secs = policy
            .history
            .as_ref()
            .and_then(|h| h.expected_secs(&spec_bytes, agent));
        let sched = Scheduler::for_stories(
            dag,
            &stories,
            nodes,
            policy.jobs > 1,
            expected_secs.as_deref(),
        );
        let (n, jobs) = (stories.len(), policy.jobs);
        let speculate = policy.speculate.max(1);
        let waste_at_start = state.waste();
        let mut model = Model {
            chosen,
            pulled_in: selection.added,
            needing: selection.needing,
            waste_at_start,
            state,
            sched,
            stories,
            slots: vec![None; policy.jobs],
            policy,
            land_queue: VecDeque::new(),
            landing: Vec::new(),
            chain: Chain::Idle,
            window: speculate,
            hooks_running: 0,
            attempts_this_run: 0,
            signals: SignalCount::None,
            fatal: None,
            pause_until: None,
            backoff: Policy::FIRST_BACKOFF,
            faults: HashMap::new(),
            api_faults: HashMap::new(),
            api_given_up: HashMap::new(),
            races: HashMap::new(),
            recent_failures: Vec::new(),
            breaker_cause: None,
            fewer_jobs_until: None,
            next_start_at: None,
            run_cost_usd: 0.0,
            run_cost_unknown: false,
            run_tokens: 0,
            reload_pending: false,
            slot_started: vec![None; jobs],
            slot_model: vec![None; jobs],
            memory_mb: None,
            recheck_at: None,
            memory_said: None,
            touched: HashMap::new(),
            files: vec![Vec::new(); n],
            draining: false,
            stop_asked: Default::default(),
            holds_here: false,
            waits_for_review: false,
            said_waiting: false,
            expected_secs,
            racing: HashMap::new(),
            race_landings: Vec::new(),
        };
        let named: Vec<Vec<String>> = model.stories.iter().map(|s| s.named.clone()).collect();
        for (s, kept) in model
            .stories
            .iter_mut()
            .zip(crate::backlog::files::telling(&named))
        {
            s.named = kept;
        }
        for i in 0..n {
            model.refresh_files(i);
        }
        model
    }

    pub(crate) fn id(&self, idx: usize) -> &str {
        &self.stories[idx].id
    }

    #[cfg(test)]
    pub(crate) fn node(&self, idx: usize) -> StoryState {
        self.sched.nodes[idx]
    }

    #[cfg(test)]
    pub(crate) fn set_node(&mut self, idx: usize, node: StoryState) {
        self.sched.set(idx, node);
    }

    pub(crate) fn sched(&self) -> &Scheduler {
        &self.sched
    }

    /// The one place a story's status changes: the state (what is saved)
    /// and the scheduler (what runs next) move together.
    pub(crate) fn apply(&mut self, idx: usize, change: Change<'_>) -> Applied {
        let id = self.stories[idx].id.clone();
        let mut out = Applied::default();
        match change {
            Change::Start => {
                out.attempt = self.state.start_attempt(&id);
                self.sched.set(idx, StoryState::Running);
            }
            Change::BeginLanding => {
                self.state.begin_landing(&id);
                self.sched.set(idx, StoryState::Landing);
            }
            Change::RaceOn => {
                self.state.race_on(&id);
                self.sched.set(idx, StoryState::Running);
            }
            Change::Requeue => {
                self.state.requeue(&id);
                self.sched.set(idx, StoryState::Pending);
            }
            Change::Fail { reason } => {
                // Past `budget.max_cost_per_story_usd` this failure is its
                // last, as its last retry's would be.
                let max = match self.over_story_budget(&id) {
                    true => self.state.record(&id).map_or(1, |r| r.attempts + 1),
                    false => self.policy.max_retries,
                };
                let after = self
                    .state
                    .fail_attempt(&id, reason, max.min(self.policy.max_retries));
                out.count = self.state.record(&id).map(|r| r.attempts).unwrap_or(0);
                match after {
                    AfterFailure::Retry => self.sched.set(idx, StoryState::Pending),
                    AfterFailure::FailedForGood => {
                        out.failed_for_good = true;
                        out.blocked = self.sched.fail(idx);
                    }
                }
            }
            Change::Conflict { note } => {
                out.count = self.state.conflict(&id, note);
                self.sched.set(idx, StoryState::Pending);
            }
            Change::GiveUp => {
                self.state.give_up(&id);
                out.failed_for_good = true;
                out.blocked = self.sched.fail(idx);
            }
            Change::Landed { commit } => {
                self.state.mark_done(&id, Some(commit));
                self.sched.set(idx, StoryState::Done);
                // Its files are on the target now: nothing left to keep apart.
                self.state.conflict_paths.remove(&id);
                self.state.touched_paths.remove(&id);
                self.touched.remove(&idx);
                self.files[idx].clear();
            }
            Change::LandingInterrupted => {
                self.sched.set(idx, StoryState::Pending);
            }
            Change::Refund => {
                self.state.refund_attempt(&id);
                self.sched.unfail(idx);
            }
            Change::InPr { url } => {
                self.state.send_to_pr(&id, url);
                self.sched.set(idx, StoryState::Review);
            }
            Change::InReview => {
                self.state.send_to_review(&id);
                self.sched.set(idx, StoryState::Review);
            }
            Change::Rejected { why } => {
                self.state.reject(&id, why);
                self.sched.set(idx, StoryState::Pending);
            }
            Change::Decompose { note } => {
                self.state.begin_decomposition(&id, note.to_string());
                self.sched.unfail(idx);
            }
            Change::SplitRefused => {
                let before = self.policy.split_by_hand.clone();
                let (status, note) = before.map_or((Status::Pending, None), |b| (b.status, b.note));
                self.state.restore(&id, status, note);
                match story_node(&self.state, &self.stories[idx]) {
                    StoryState::Failed => out.blocked = self.sched.fail(idx),
                    node => self.sched.set(idx, node),
                }
            }
        }
        debug_assert!(
            self.in_step(idx) || change == Change::LandingInterrupted,
            "state and scheduler disagree on {id} after {change:?}"
        );
        out
    }

    /// Becomes the model of the same run over the backlog as it is now on
    /// disk (after a decomposition landed): the state, the policy, the
    /// selection (`-s`, `-r`: a story keeps its place in or out of it, a
    /// new sub-story is in, as only a selected story is split) and what the
    /// run spent and was told (signals, a fatal stop) carry over; nothing
    /// runs or waits to land at this point.
    pub(crate) fn reload(&mut self, stories: Vec<Story>, dag: &Dag, now: Now) {
        debug_assert!(self.slots.iter().all(Option::is_none) && self.landing.is_empty());
        let was: HashMap<&str, bool> = self
            .stories
            .iter()
            .zip(&self.chosen)
            .map(|(s, &c)| (s.id.as_str(), c))
            .collect();
        let chosen = stories
            .iter()
            .map(|s| was.get(s.id.as_str()).copied().unwrap_or(true))
            .collect();
        let state = std::mem::take(&mut self.state);
        let policy = self.policy.clone();
        let mut m = Model::selecting(stories, dag, state, policy, chosen, None, now);
        m.attempts_this_run = self.attempts_this_run;
        m.signals = self.signals;
        m.fatal = self.fatal.take();
        m.waste_at_start = self.waste_at_start;
        m.run_cost_usd = self.run_cost_usd;
        m.run_cost_unknown = self.run_cost_unknown;
        m.run_tokens = self.run_tokens;
        m.next_start_at = self.next_start_at;
        m.fewer_jobs_until = self.fewer_jobs_until;
        m.draining = self.draining;
        m.holds_here = self.holds_here;
        m.waits_for_review = self.waits_for_review;
        m.window = self.window;
        *self = m;
    }

    /// True when the state and the scheduler agree on story `idx`.
    pub(crate) fn in_step(&self, idx: usize) -> bool {
        let node = self.sched.nodes[idx];
        let expected = story_node(&self.state, &self.stories[idx]);
        node == expected
            || node == StoryState::Excluded
            || (node == StoryState::Blocked && expected == StoryState::Pending)
    }

    /// A person holds story `idx` (`ralph hold ID`).
    pub(crate) fn is_held(&self, idx: usize) -> bool {
        self.state.held.contains(self.id(idx))
    }

    /// A person paused new work (`ralph pause`, `ralph drain`).
    pub(crate) fn new_work_paused(&self) -> bool {
        // `ralph decompose ID` is a person asking for that split now.
        (self.state.paused && self.policy.split_by_hand.is_none()) || self.draining
    }

    /// The index of the story `id`, if the backlog has it.
    pub(crate) fn index_of(&self, id: &str) -> Option<usize> {
        self.stories.iter().position(|s| s.id == id)
    }

    /// The run waits for a person rather than end with nothing to do: it
    /// is paused, a story held during the run waits for its release, or
    /// (review without `--exit-on-review`) a story waits for approval.
    pub(crate) fn waits_for_person(&self) -> bool {
        if self.stopping()
            || self.fatal.is_some()
            || self.draining
            || self.limit_reached()
            || self.policy.split_by_hand.is_some()
        {
            return false;
        }
        let held_waiting = self.holds_here
            && (0..self.stories.len())
                .any(|i| self.is_held(i) && self.sched.nodes[i] == StoryState::Pending);
        let review_waiting = self.waits_for_review && self.count(StoryState::Review) > 0;
        self.state.paused || held_waiting || review_waiting
    }

    /// What the run waits for a person for, in words (`waits_for_person`).
    pub(crate) fn waiting_for(&self) -> String {
        let mut what = Vec::new();
        if self.state.paused {
            what.push("`ralph resume` (paused)".to_string());
        }
        let held: Vec<&str> = (0..self.stories.len())
            .filter(|&i| self.is_held(i) && self.sched.nodes[i] == StoryState::Pending)
            .map(|i| self.id(i))
            .collect();
        if self.holds_here && !held.is_empty() {
            what.push(format!("`ralph release ID` (held: {})", held.join(", ")));
        }
        let review = self.ids_with(StoryState::Review);
        if self.waits_for_review && !review.is_empty() {
            what.push(format!(
                "`ralph land ID` (in review: {})",
                review.join(", ")
            ));
        }
        what.join(" or ")
    }

    pub(crate) fn stopping(&self) -> bool {
        self.signals != SignalCount::None
    }

    pub(crate) fn limit_reached(&self) -> bool {
        self.policy
            .limit
            .is_some_and(|l| self.attempts_this_run >= l)
    }

    pub(crate) fn count(&self, node: StoryState) -> usize {
        self.sched.count(node)
    }

    /// Stories selected for this run.
    pub(crate) fn selected(&self) -> usize {
        self.sched
            .nodes
            .iter()
            .zip(&self.chosen)
            .filter(|(n, c)| **c && **n != StoryState::Excluded)
            .count()
    }

    /// Stories selected for this run that are done.
    pub(crate) fn done_selected(&self) -> usize {
        self.sched
            .nodes
            .iter()
            .zip(&self.chosen)
            .filter(|(n, c)| **c && **n == StoryState::Done)
            .count()
    }

    pub(crate) fn ids_with(&self, node: StoryState) -> Vec<String> {
        (0..self.stories.len())
            .filter(|&i| self.sched.nodes[i] == node)
            .map(|i| self.stories[i].id.clone())
            .collect()
    }

    /// The agent a new attempt at story `idx` runs with: the story's own,
    /// else the first of the run's agents not at its usage limit; `None`
    /// when the one it may use is limited.
    pub(crate) fn agent_for(&self, idx: usize, now: Now) -> Option<Backend> {
        let free = |b: &Backend| {
            !self.api_given_up.contains_key(b.name())
                && self
                    .state
                    .paused_until
                    .get(b.name())
                    .is_none_or(|&until| until <= now.unix)
        };
        match self.stories[idx].agent {
            Some(b) => free(&b).then_some(b),
            None => self.policy.agents.iter().copied().find(free),
        }
    }

    /// Story `id` has cost `budget.max_cost_per_story_usd` or more.
    pub(crate) fn over_story_budget(&self, id: &str) -> bool {
        self.policy
            .budget
            .story_usd
            .is_some_and(|max| self.state.record(id).is_some_and(|r| r.cost_usd >= max))
    }

    /// The model (and backend, when a rung names one) the next attempt of
    /// story `idx` runs on: `ladder::choose` over the story's history.
    pub(crate) fn choice_for(&self, idx: usize) -> crate::ladder::Choice {
        use crate::state::AttemptKind;
        let id = self.id(idx);
        let story = &self.stories[idx];
        let kind = self.state.next_kind(id);
        let failed = self.state.record(id).map(|r| r.attempts).unwrap_or(0);
        let fixed = (kind == AttemptKind::Fixup)
            .then(|| {
                let f = self.state.note(id)?.fixup.as_ref()?;
                let rec = self.state.attempt(id, f.attempt)?;
                Some(crate::ladder::Choice {
                    agent: rec.agent.as_deref().and_then(Backend::parse),
                    model: rec.model.clone(),
                })
            })
            .flatten();
        let m = &self.policy.models;
        crate::ladder::choose(&crate::ladder::Ask {
            ladder: &m.ladder,
            base: m.base.as_deref(),
            pinned: m.pinned.as_deref(),
            story: &story.model,
            story_agent: story.agent,
            kind,
            failed,
            fixed: fixed.as_ref(),
        })
    }

    /// The backend and model the next attempt of story `idx` starts with
    /// now, or `None` while its backend waits for a usage limit. A rung's
    /// (or a fixed attempt's) backend is waited for, not replaced: a limit
    /// never moves a story up the ladder. A model goes only to the backend
    /// it was meant for (a fallback runs its own default).
    pub(crate) fn agent_and_model(
        &self,
        idx: usize,
        now: Now,
    ) -> Option<(Backend, Option<String>)> {
        let choice = self.choice_for(idx);
        let story_agent = self.stories[idx].agent;
        let agent = match (story_agent, choice.agent) {
            (None, Some(b)) => {
                let free = !self.api_given_up.contains_key(b.name())
                    && self
                        .state
                        .paused_until
                        .get(b.name())
                        .is_none_or(|&until| until <= now.unix);
                free.then_some(b)?
            }
            _ => self.agent_for(idx, now)?,
        };
        let meant = story_agent
            .or(choice.agent)
            .or(self.policy.agents.first().copied())
            .unwrap_or_default();
        Some((agent, choice.model.filter(|_| agent == meant)))
    }

    /// The next attempt at story `idx` begins: counted for this run; its
    /// kind, and what its prompt is told (the story's note, with what a
    /// person said for it taken in: the next attempt is not told again).
    pub(crate) fn begin_attempt(
        &mut self,
        idx: usize,
    ) -> (crate::state::AttemptKind, Option<crate::state::Note>) {
        self.attempts_this_run += 1;
        let id = self.id(idx).to_string();
        let kind = self.state.next_kind(&id);
        let mut note = self.state.note(&id).cloned();
        if let Some(said) = self.state.take_user_note(&id) {
            let n = note.get_or_insert_with(Default::default);
            n.text = crate::prompt::with_user_note(&n.text, &said);
        }
        (kind, note)
    }

    /// How many candidates race for an attempt at story `idx` (issue 36).
    pub(crate) fn best_of(&self, idx: usize) -> u32 {
        let b = &self.policy.best_of;
        race::best_of(b.cli, self.stories[idx].model.best_of, b.config)
    }

    /// Something the run waits for before it can go on: a pause, an
    /// agent's usage limit, or the next staggered start.
    pub(crate) fn waiting(&self) -> bool {
        self.pause_until.is_some()
            || !self.state.paused_until.is_empty()
            || self.next_start_at.is_some()
    }

    /// When something the run waits for is due: the pause, an agent's
    /// reset, the next staggered start, or another look at memory.
    pub(crate) fn wake_at(&self, now: Now) -> Option<Instant> {
        self.limit_lifts_at(now)
            .into_iter()
            .chain(self.next_start_at)
            .chain(self.recheck_at)
            .min()
    }

    /// A retry: an attempt after a failed one or a conflict (fix-ups
    /// included). An attempt only interrupted (Ctrl-C, a crash, a usage
    /// limit, a fault outside the story) counts neither, so a resumed run
    /// is not held to one retry at a time.
    pub(crate) fn is_retry(&self, idx: usize) -> bool {
        self.state
            .record(self.id(idx))
            .is_some_and(|r| r.attempts > 0 || r.conflicts > 0)
    }

    /// How many agents may run now, and why fewer than asked.
    pub(crate) fn jobs_now(&self, now: Now) -> Jobs {
        let limit_near = self.fewer_jobs_until.is_some_and(|t| t > now.mono);
        let running = self.slots.iter().filter(|s| s.is_some()).count();
        let memory = self
            .memory_mb
            .filter(|_| self.policy.agent_memory_mb > 0)
            .map(|available_mb| Memory {
                available_mb,
                per_agent_mb: self.policy.agent_memory_mb,
                warming: self
                    .slots
                    .iter()
                    .zip(&self.slot_started)
                    .filter(|(s, t)| s.is_some() && t.is_some_and(|t| now.mono < t + AGENT_WARMUP))
                    .count(),
            });
        jobs_now(self.policy.jobs, limit_near, running, memory)
    }

    /// Seconds until the run is through, as forecast from the project's
    /// history (`None` without one): what is left of the running stories
    /// and the schedule of the waiting ones at the jobs allowed now.
    pub(crate) fn eta_secs(&self, now: Now) -> Option<f64> {
        use crate::forecast::Left;
        let expected = self.expected_secs.as_ref()?;
        let started: HashMap<usize, Instant> = self
            .slots
            .iter()
            .zip(&self.slot_started)
            .filter_map(|(s, t)| Some(((*s)?, (*t)?)))
            .collect();
        let left: Vec<Left> = (0..self.stories.len())
            .map(|i| match self.sched.nodes[i] {
                StoryState::Pending => Left::Waiting,
                StoryState::Running => Left::Running {
                    elapsed: started.get(&i).map_or(0.0, |t| {
                        now.mono.saturating_duration_since(*t).as_secs_f64()
                    }),
                },
                // Its agent is through: what is left is its landing.
                StoryState::Landing => Left::Running {
                    elapsed: expected[i],
                },
                _ => Left::Nothing,
            })
            .collect();
        let waits: Vec<Vec<usize>> = (0..self.stories.len())
            .map(|i| self.sched.waits_of(i).to_vec())
            .collect();
        Some(crate::forecast::eta_secs(
            expected,
            &waits,
            &left,
            self.jobs_now(now).now,
        ))
    }

    /// When a usage limit (or a fault's pause) next lifts.
    pub(crate) fn limit_lifts_at(&self, now: Now) -> Option<Instant> {
        let resets = self.state.paused_until.values().map(|&until| {
            now.mono + Duration::from_secs(u64::try_from(until - now.unix).unwrap_or(0))
        });
        self.pause_until.into_iter().chain(resets).min()
    }

    /// Anything in flight: an attempt, a landing, work queued to land, or
    /// post hooks.
    pub(crate) fn busy(&self) -> bool {
        self.slots.iter().any(Option::is_some)
            || !self.landing.is_empty()
            || self.chain != Chain::Idle
            || !self.land_queue.is_empty()
            || self.hooks_running > 0
            || self.racing.values().any(|r| r.judging)
    }
}

/// A model over `stories` in one batch section, for tests.
#[cfg(test)]
pub(crate) fn test_model(
    stories: Vec<Story>,
    jobs: usize,
    max_retries: u32,
    limit: Option<u64>,
    now: Now,
) -> Model {
    use crate::backlog::Backlog;
    let backlog = Backlog::one_batch(stories.clone());
    let dag = Dag::build(&backlog).expect("a valid DAG");
    let policy = Policy {
        jobs,
        max_retries,
        limit,
        target: "main".into(),
        budget: Budget::default(),
        max_wait: Duration::from_secs(6 * 3600),
        agents: vec![Backend::Claude],
        stagger: Duration::ZERO,
        resume_session: true,
        decompose_depth: None,
        retry_concurrency: 1,
        agent_memory_mb: 0,
        predict_files: true,
        conflicts: crate::config::Conflicts::Wait,
        history: None,
        split_by_hand: None,
        models: Models::default(),
        tests_gate: crate::config::TestsGate::Block,
        review: None,
        speculate: 1,
        landing_mode: Default::default(),
        batch: 1,
        best_of: Default::default(),
    };
    Model::new(stories, &dag, State::default(), policy, None, 0, now)
}
