//! What the run loop receives (`Event`) and what it is asked to carry out
//! (`Action`): plain data, so the transition between them is a pure function.

use std::time::Instant;

use crate::agent::event::Usage;
use crate::control::Control;
use crate::gitops::Oid;
use crate::report::{Message, Totals};
use crate::runlog::Ev;

// An attempt's request and report are the executors' vocabulary too
// (`crate::executor`); the run speaks them under these names.
pub(crate) use crate::executor::{AttemptEvent, AttemptReport, AttemptRequest};

/// The OS signals a run reacts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OsSignal {
    Interrupt,
    Terminate,
    Hangup,
}

impl OsSignal {
    pub(crate) fn name(self) -> &'static str {
        match self {
            OsSignal::Interrupt => "interrupt",
            OsSignal::Terminate => "terminate",
            OsSignal::Hangup => "hangup",
        }
    }
}

/// Messages into the transition.
#[derive(Debug)]
pub(crate) enum Event {
    /// The run begins: stories found finished by reconcile go to landing.
    Start {
        reland: Vec<usize>,
    },
    /// A line of what an agent is doing, for the display.
    Activity {
        idx: usize,
        /// A racing candidate's (issue 36): shown on its own row.
        candidate: Option<u32>,
        text: String,
    },
    /// Where a running attempt runs, as soon as its executor knows: a
    /// cluster node and worker slot (`<node>/<slot>`, `executor.kind:
    /// ray`); a local attempt sends none.
    Placed {
        idx: usize,
        attempt: u32,
        candidate: Option<u32>,
        node: String,
    },
    /// A running story's agent is editing a file (from its tool calls):
    /// a prediction of what it changes, for dispatch.
    Editing {
        idx: usize,
        path: String,
    },
    /// What running stories' worktrees changed so far, read in the
    /// background (`(story, paths)`).
    Touched {
        found: Vec<(usize, Vec<String>)>,
    },
    AttemptFinished(Box<AttemptReport>),
    /// The landing in progress (`Model::landing`) ended.
    LandingFinished(LandResult),
    /// Results of stories of the chain in flight, by story index, while
    /// it goes on (`run/stream.rs` lands a passed prefix at once).
    ChainResults(Vec<(usize, LandResult)>),
    /// The merge queue's chain ended: the results it had left to give, by
    /// story index; a story of it with none goes back to the queue
    /// (`LandResult::Behind`).
    ChainFinished(Vec<(usize, LandResult)>),
    /// A story's post hooks ran.
    HooksDone,
    /// Best of N's judge answered (issue 36).
    Judged(JudgeReport),
    Signal(OsSignal),
    /// The usage-limit pause may be over.
    Timer,
    /// The issue tracker holds work the run does not know of (`describe`
    /// names the tracker): new starts wait, and the backlog is read again
    /// once nothing runs (`Model::reload_pending`).
    BacklogChanged {
        describe: String,
    },
    /// `state.json` could not be written: ralph itself failed.
    SaveFailed(String),
    /// A person steers the run (`ralph pause`, `ralph hold ID`, ...,
    /// through the run's socket); `req` names the connection to answer.
    Steer {
        req: u64,
        cmd: crate::steer::Command,
    },
}

impl From<AttemptEvent> for Event {
    fn from(ev: AttemptEvent) -> Event {
        match ev {
            AttemptEvent::Activity {
                idx,
                candidate,
                text,
            } => Event::Activity {
                idx,
                candidate,
                text,
            },
            AttemptEvent::Placed {
                idx,
                attempt,
                candidate,
                node,
            } => Event::Placed {
                idx,
                attempt,
                candidate,
                node,
            },
            AttemptEvent::Editing { idx, path } => Event::Editing { idx, path },
        }
    }
}

/// How a landing ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LandResult {
    Landed {
        commit: Oid,
    },
    Conflict {
        paths: Vec<String>,
        saved_ref: Option<String>,
    },
    ValidationFailed {
        name: String,
        /// The command that failed.
        cmd: String,
        /// The end of its output (`prompt::output_tail`).
        tail: String,
        saved_ref: Option<String>,
        /// The whole output, relative to the project root.
        log_rel: String,
    },
    CheckoutBlocked {
        paths: Vec<String>,
    },
    /// Another process kept the main checkout's `lock` (a git lock file)
    /// through every wait; nothing was written.
    Busy {
        lock: std::path::PathBuf,
        /// The user's git process that the landing waited for in vain
        /// (pid and command line), when that is what kept it.
        holder: Option<String>,
    },
    /// Validated on the target's tip and kept on its branch for a person
    /// (`landing.mode: review`); the target did not move.
    InReview,
    /// Pushed and proposed as a pull request (`landing.mode: pr`).
    InPr {
        url: String,
    },
    /// The target moved under every round (the user committing, say): not
    /// the story's fault; it waits for another turn of the merge queue.
    Raced,
    /// In a chain behind a story whose validation failed (or whose landing
    /// could not go on): its merge was built on that story's, so it is
    /// merged and validated again on the tip without it. Not its fault:
    /// nothing is charged and its agent does not run again.
    Behind,
    /// `commit.gpgsign` is on and the merge commit could not be signed:
    /// the user's signing setup, not the story; nothing moved.
    Unsigned {
        message: String,
    },
    /// Ctrl-C stopped it before the ref moved; the story stays `landing` in
    /// the state so the next run lands it without redoing it.
    Interrupted,
    Error(String),
    /// The trust gates found something (issue 26); nothing moved. The
    /// transition decides: a fix-up, review, or (warn) landing anyway.
    Gated {
        findings: Vec<crate::gates::Finding>,
        saved_ref: Option<String>,
    },
    /// The review gate's reviewer answered (issue 26). Approved: how the
    /// landing then ended (`then`); otherwise nothing moved and the work
    /// is kept at `saved_ref`.
    Reviewed {
        review: ReviewReport,
        then: Option<Box<LandResult>>,
        saved_ref: Option<String>,
    },
}

/// Best of N's judge to run (issue 36): who judges, and the passing
/// candidates (`k`, `agent[:model]`, gate findings).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JudgeAsk {
    pub(crate) idx: usize,
    pub(crate) attempt: u32,
    pub(crate) agent: crate::agent::Backend,
    pub(crate) model: Option<String>,
    pub(crate) passing: Vec<(u32, String, usize)>,
}

/// What the judge answered and cost.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JudgeReport {
    pub(crate) idx: usize,
    pub(crate) attempt: u32,
    /// The candidate of its `<ralph>PICK k</ralph>`, as it said it.
    pub(crate) pick: Option<u32>,
    /// Its own words (cut short), or why it gave none.
    pub(crate) reason: String,
    pub(crate) usage: Usage,
    pub(crate) cost_usd: f64,
    pub(crate) cost_unknown: bool,
}

/// What the review gate's reviewer said and cost.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReviewReport {
    pub(crate) verdict: ReviewVerdict,
    pub(crate) usage: Usage,
    pub(crate) cost_usd: f64,
    /// Its log, relative to the project root.
    pub(crate) log_rel: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReviewVerdict {
    Approve,
    /// The review text, for the author's fix-up.
    Changes(String),
    /// No verdict for this story (the reviewer failed, timed out, or said
    /// neither): a person decides.
    NoAnswer(String),
}

impl ReviewVerdict {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            ReviewVerdict::Approve => "approve",
            ReviewVerdict::Changes(_) => "changes",
            ReviewVerdict::NoAnswer(_) => "no_answer",
        }
    }
}

/// One story of the merge queue's chain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LandAsk {
    pub(crate) idx: usize,
    pub(crate) attempt: u32,
    pub(crate) gates: GateAsk,
}

/// Where validated work goes, as the transition decides it (issue 33: it
/// was decided in the landing's I/O): onto the target, to a person
/// (`landing.mode: review`), or into a pull request (`landing.mode: pr`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum LandPlan {
    #[default]
    Land,
    Review,
    PullRequest,
}

/// Which gates a landing runs, as the transition asks (issue 26).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GateAsk {
    /// The test-integrity gate.
    pub(crate) tests: bool,
    /// A conflict fix-up's kept work: the target's changes since its base
    /// must still stand in the merged tree.
    pub(crate) other_side_of: Option<String>,
    /// The review gate's reviewer, once validation passed.
    pub(crate) review: Option<crate::config::ReviewGate>,
}

/// What the transition asks the dispatcher to do, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// Write `state.json` now (before anything that depends on it).
    Save,
    Say(Message),
    /// A line for `progress.txt`.
    Progress(String),
    /// A line for the technical log.
    Log(String),
    Totals(Totals),
    StoryStarted {
        id: String,
        title: String,
        /// The model it runs on, when ralph chose one: shown on its row.
        model: Option<String>,
    },
    StoryFinished {
        id: String,
    },
    Activity {
        id: String,
        /// A racing candidate's: its own row's.
        candidate: Option<u32>,
        text: String,
    },
    /// Show where a running story's attempt (or racing candidate) runs
    /// (`Event::Placed`).
    Placed {
        id: String,
        candidate: Option<u32>,
        node: String,
    },
    /// Show a racing story's candidates (best of N, issue 36): each with
    /// its state, as `status --json` has them; none once the race is over.
    Candidates {
        id: String,
        rows: Vec<crate::state::CandidateRow>,
    },
    /// Keep what the agent learnt (and say which lines were new).
    RecordLearnings {
        id: String,
        learnings: Vec<String>,
    },
    StartAttempt(AttemptRequest),
    Land {
        idx: usize,
        attempt: u32,
        /// Approved from review in this run: lands instead of stopping
        /// for review again.
        approved: bool,
        gates: GateAsk,
        plan: LandPlan,
    },
    /// The merge queue's chain (`landing.speculate`): each story merged on
    /// the one before, validated side by side (`run/queue.rs`).
    LandChain(Vec<LandAsk>),
    /// More stories for the open chain in flight (`Chain::Open`), merged
    /// on its top in this order.
    ChainAdd(Vec<LandAsk>),
    /// The open chain gets no more stories: it ends once it has none.
    ChainClose,
    /// `post_story` (with the outcome, as `RALPH_RESULT`) then
    /// `post_iteration`, for finished work once its landing decided.
    PostHooks {
        id: String,
        iteration: u64,
        result: &'static str,
    },
    /// Tell every running attempt and the landing in progress.
    Control(Control),
    /// A line of the run's records (`.ralph/runs/<run-id>.jsonl`): what
    /// the transition decided, written as it is given (a record never
    /// re-derives a decision, so it cannot disagree with one).
    Record(Ev),
    /// Answer the steering request `req` (`Event::Steer`).
    Reply {
        req: u64,
        reply: crate::steer::Reply,
    },
    /// Stop the attempt running in `slot` (its whole process tree), as
    /// `ralph stop ID` asked.
    StopAttempt {
        slot: usize,
    },
    /// Best of N (issue 36): the story's branch takes racing candidate
    /// `k`'s work, which goes to the merge queue as the story's.
    AdoptCandidate {
        id: String,
        k: u32,
    },
    /// Run best of N's judge agent over the passing candidates (issue 36).
    Judge(JudgeAsk),
    /// Keep what candidate `k` of attempt `attempt` committed, when it did
    /// not win, at `project::candidate_ref`.
    KeepCandidate {
        id: String,
        attempt: u32,
        k: u32,
    },
}

/// The clock as the transition sees it: read once per event by the caller.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    pub(crate) mono: Instant,
    /// Seconds since the Unix epoch (reset times are given in it).
    pub(crate) unix: i64,
}
