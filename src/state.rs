//! `.ralph/state.json` (SPEC 3.8): the model and its transitions. Pure: the
//! store module reads and writes it.
//!
//! The bash tool's keys are kept so its users can still read the file; the
//! per-story records are ours. `attempts` counts only *failed* attempts (the
//! retry budget); an attempt interrupted by a crash or Ctrl-C is not counted.

mod candidates;
mod gate;
mod waste;
pub(crate) use candidates::CandidateRow;
pub(crate) use gate::{Explained, GateDecision, GateRecord};
pub(crate) use waste::{Tally, Waste};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::agent::event::Usage;
use crate::agent::{ResultKind, Verdict};

/// 3: attempt kinds, agent sessions and the note for the next attempt.
pub(crate) const FORMAT_VERSION: u32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    #[default]
    Pending,
    Running,
    Landing,
    Done,
    Failed,
    /// Validated on the target's tip and kept on its story branch for a
    /// person (`landing.mode: review`): `ralph land` or `ralph reject`.
    Review,
    /// Pushed and proposed as a pull request (`landing.mode: pr`): done once
    /// its commits are on the remote's target branch.
    #[serde(rename = "in_pr")]
    InPr,
}

/// How one attempt ended, as `state.json` records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// DONE for this story.
    Done,
    /// No DONE but commits, landed only through required validation.
    Tentative,
    /// The agent reported FAIL.
    Fail,
    Timeout,
    #[default]
    Error,
    /// Exit 0 without a signal or commits.
    NoSignal,
    RateLimited,
    Interrupted,
    /// `ralph stop ID` killed it: not charged, and the story is held.
    Stopped,
    /// A fault outside the story (machine, project, agent installation).
    Fault,
    /// Written by a newer ralph; kept readable.
    #[serde(other)]
    Unknown,
}

/// How `state.json` records an attempt with this verdict.
impl From<&Verdict> for Outcome {
    fn from(verdict: &Verdict) -> Self {
        match verdict {
            Verdict::Done => Outcome::Done,
            Verdict::Tentative => Outcome::Tentative,
            Verdict::Failed { kind, .. } => match kind {
                ResultKind::Timeout => Outcome::Timeout,
                ResultKind::Error => Outcome::Error,
                ResultKind::NoSignal => Outcome::NoSignal,
                ResultKind::Done | ResultKind::Fail => Outcome::Fail,
            },
            Verdict::RateLimited { .. } => Outcome::RateLimited,
            Verdict::Interrupted => Outcome::Interrupted,
            Verdict::RootRefusal => Outcome::Error,
            Verdict::Fault { .. } => Outcome::Fault,
        }
    }
}

/// What an attempt set out to do (what "waste" is made of).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AttemptKind {
    /// The story's first try (attempts that were only interrupted, limited
    /// or hit a fault before it do not make the next one a redo).
    #[default]
    First,
    /// Finished work that could not land (a conflict, failed validation),
    /// handed back to the agent from where it stopped.
    Fixup,
    /// A fresh start after work was thrown away (a failed attempt, a failed
    /// fix-up, or a conflict with no fix-up to give).
    Redo,
    /// The story failed for good: one run splits it into sub-stories.
    Decompose,
}

impl AttemptKind {
    pub(crate) const ALL: [AttemptKind; 4] = [
        AttemptKind::First,
        AttemptKind::Fixup,
        AttemptKind::Redo,
        AttemptKind::Decompose,
    ];

    pub(crate) fn name(self) -> &'static str {
        self.as_str()
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AttemptKind::First => "first",
            AttemptKind::Fixup => "fixup",
            AttemptKind::Redo => "redo",
            AttemptKind::Decompose => "decompose",
        }
    }
}

/// What the next attempt at a story is told, kept in `state.json` so a
/// restart does not forget it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub(crate) struct Note {
    /// What went wrong before, in words for the agent.
    pub(crate) text: String,
    /// The next attempt fixes up this finished work instead of starting over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fixup: Option<Fixup>,
    /// Work was thrown away: the next fresh start is a redo.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) redo: bool,
    /// The story failed for good: the next run splits it into sub-stories.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) decompose: bool,
    /// Best of N (issue 36): a lost race's candidate whose work came
    /// closest (`race::Race::closest`). The next race's candidate 1 fixes
    /// it up; the others start over, told `text`. A lone attempt ignores
    /// it: the story's next attempt is still a redo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) closest: Option<Box<Fixup>>,
}

impl Note {
    /// The note that hands `attempt`'s kept `work` back to its agent to fix
    /// up for `cause`: no words of its own (the fix-up prompt says them from
    /// the cause), its session resumed.
    pub(crate) fn fixup(cause: FixupCause, work: String, attempt: u32) -> Note {
        Note {
            text: String::new(),
            fixup: Some(Fixup {
                cause,
                work,
                attempt,
                fresh_session: false,
            }),
            redo: false,
            decompose: false,
            closest: None,
        }
    }
}

/// Finished work to hand back to the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Fixup {
    pub(crate) cause: FixupCause,
    /// The ref keeping the work (`refs/ralph/conflicts/...` or
    /// `refs/ralph/attempts/...`): merged onto the new tip in the slot.
    pub(crate) work: String,
    /// The attempt that made it (its session is the one resumed).
    pub(crate) attempt: u32,
    /// Its session could not be resumed: the fix-up starts a new one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) fresh_session: bool,
}

/// Why finished work could not land.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum FixupCause {
    /// Its merge onto the target conflicted in these files.
    Conflict { paths: Vec<String> },
    /// A required validation command failed on the merged tree.
    Validation {
        name: String,
        cmd: String,
        /// The end of its output (`prompt::output_tail`).
        tail: String,
        /// The whole output, relative to the project root.
        log: String,
    },
    /// The trust gates found weakened tests or another story's lost lines
    /// (issue 26): the fix-up restores each finding.
    Gate {
        findings: Vec<crate::gates::Finding>,
        /// The conflict fix-up's kept work whose other side is checked
        /// again when this fix-up lands.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        other_side_of: Option<String>,
    },
    /// The review gate's reviewer asked for changes (issue 26).
    Review { text: String },
}

/// One finished attempt, kept for `status` and cost reporting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub(crate) struct AttemptRecord {
    pub(crate) number: u32,
    /// `None` only while an older file is read; `upgrade` fills it in.
    #[serde(default)]
    pub(crate) kind: Option<AttemptKind>,
    pub(crate) outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    pub(crate) duration_secs: f64,
    #[serde(default)]
    pub(crate) usage: Usage,
    #[serde(default)]
    pub(crate) cost_usd: f64,
    /// No cost was reported and no price is known: `cost_usd` is a floor.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) cost_unknown: bool,
    /// The model ralph chose for it (`agent.model`, a story's `model:`,
    /// the escalation ladder); absent when the CLI chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) saved_ref: Option<String>,
    /// The agent backend that ran the attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) agent: Option<String>,
    /// The agent's session, for a fix-up to resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) session_id: Option<String>,
    /// The job slot it ran in: a session resumes only in the same worktree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) slot: Option<usize>,
    /// It continued an earlier attempt's session.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) resumed: bool,
    /// The cluster node (and worker slot) it ran on (`executor.kind: ray`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) node: Option<String>,
    /// A decomposition run: the sub-stories it wrote (they replace the
    /// story once this attempt's work lands).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) children: Vec<String>,
    /// What its agent said about changes the gates find (issue 26).
    #[serde(default, skip_serializing_if = "Explained::is_empty")]
    pub(crate) explained: Explained,
}

impl AttemptRecord {
    pub(crate) fn kind(&self) -> AttemptKind {
        self.kind.unwrap_or_default()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub(crate) struct StoryRecord {
    #[serde(default)]
    pub(crate) status: Status,
    /// Failed attempts counted against `loop.max_retries`.
    #[serde(default)]
    pub(crate) attempts: u32,
    /// Every attempt ever started (numbers the log files).
    #[serde(default)]
    pub(crate) attempts_started: u32,
    /// Landings that hit a merge conflict and sent the story back.
    #[serde(default)]
    pub(crate) conflicts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) landed_commit: Option<String>,
    #[serde(default)]
    pub(crate) usage: Usage,
    #[serde(default)]
    pub(crate) cost_usd: f64,
    #[serde(default)]
    pub(crate) duration_secs: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) history: Vec<AttemptRecord>,
    /// What the next attempt is told (and whether it is a fix-up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<Note>,
    /// Where its running attempt runs, once known (`<node>/<slot>`,
    /// `executor.kind: ray`; for `status`); cleared at its start and end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) running_on: Option<String>,
    /// `landing.mode: pr`: the pull request its work was proposed in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pr_url: Option<String>,
    /// The trust gates' last findings and what followed (issue 26).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) gate: Option<GateRecord>,
    /// CHANGES answers of the review gate so far (`gates.review.max_rounds`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) review_rounds: u32,
    /// The review gate's verdicts, in order: `approve`, `changes: <text>`,
    /// `no_answer: <why>` (for `status --json` and the report).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) reviews: Vec<String>,
    /// Its racing candidates while a race runs (issue 36).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) candidates: Vec<CandidateRow>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct State {
    #[serde(default)]
    pub(crate) format_version: u32,
    #[serde(default)]
    pub(crate) completed_stories: Vec<String>,
    #[serde(default)]
    pub(crate) current_story: Option<String>,
    #[serde(default)]
    pub(crate) retry_count: u64,
    #[serde(default)]
    pub(crate) absorbed_stories: Map<String, Value>,
    #[serde(default)]
    pub(crate) merged_stories: Vec<String>,
    #[serde(default)]
    pub(crate) decomposed_stories: Map<String, Value>,
    #[serde(default)]
    pub(crate) pipeline_iteration: u64,
    #[serde(default)]
    pub(crate) stories: BTreeMap<String, StoryRecord>,
    /// Usage-limit pauses still in force: agent backend → Unix time of the
    /// reset. A run started during a pause honours it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) paused_until: BTreeMap<String, i64>,
    /// Paths a story's landing conflicted on, by story ID: its next attempt
    /// touches them again, so dispatch keeps it apart from work on them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) conflict_paths: BTreeMap<String, Vec<String>>,
    /// Paths a story's attempts touched (its worktree's changes, the files
    /// its agent edited), by story ID, until it lands: a later attempt,
    /// in this run or the next, likely touches them again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) touched_paths: BTreeMap<String, Vec<String>>,
    /// Landing commits (`merge: story <id>`) that `ralph reset ID` set
    /// aside, by story: reconcile no longer counts them as the story done,
    /// so it runs again and lands anew.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) reset_landings: BTreeMap<String, Vec<String>>,
    /// The run in progress: how many jobs may run now, and why fewer than
    /// asked (for `status --json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) jobs: Option<crate::schedule::Jobs>,
    /// `ralph pause`: no new attempt starts until `ralph resume` (kept
    /// across a crash: a restarted run starts paused).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) paused: bool,
    /// `ralph hold ID` (or `ralph stop ID`): these stories, and so their
    /// dependents, do not start until `ralph release ID`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub(crate) held: std::collections::BTreeSet<String>,
    /// `ralph note ID TEXT`: what a person wants the story's next attempt
    /// (or fix-up) told; taken into its prompt when that attempt starts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) user_notes: BTreeMap<String, String>,
    /// What the stories `ralph reset` forgot had spent (tokens, USD): spent
    /// all the same, so the lifetime totals (the run summary's, `status`'s,
    /// `budget.max_cost_usd_total`'s) keep it, as `ralph stats`, read from
    /// the run records, does (issue 32).
    #[serde(default, skip_serializing_if = "Spent::is_zero")]
    pub(crate) spent_before_reset: Spent,
    /// Keys we do not know are kept as they were.
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

/// Tokens and USD spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Spent {
    #[serde(default)]
    pub(crate) usage: Usage,
    #[serde(default)]
    pub(crate) cost_usd: f64,
}

impl Spent {
    fn is_zero(&self) -> bool {
        *self == Spent::default()
    }
}

impl Default for State {
    fn default() -> Self {
        State {
            format_version: FORMAT_VERSION,
            completed_stories: Vec::new(),
            current_story: None,
            retry_count: 0,
            absorbed_stories: Map::new(),
            merged_stories: Vec::new(),
            decomposed_stories: Map::new(),
            pipeline_iteration: 0,
            stories: BTreeMap::new(),
            paused_until: BTreeMap::new(),
            conflict_paths: BTreeMap::new(),
            touched_paths: BTreeMap::new(),
            reset_landings: BTreeMap::new(),
            jobs: None,
            paused: false,
            held: Default::default(),
            user_notes: BTreeMap::new(),
            spent_before_reset: Spent::default(),
            extra: Map::new(),
        }
    }
}

/// Why a state file cannot be read.
#[derive(Debug)]
pub(crate) enum StateError {
    Json(serde_json::Error),
    /// Written by a newer ralph, in this `format_version`.
    Newer(u32),
}

/// What happened to a story after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterFailure {
    Retry,
    FailedForGood,
}

impl State {
    /// Parses any version of the file, upgrading it in memory.
    pub(crate) fn from_json(text: &str) -> Result<State, StateError> {
        let mut st: State = serde_json::from_str(text).map_err(StateError::Json)?;
        // Rewriting a newer file would drop what the newer ralph keeps in it.
        if st.format_version > FORMAT_VERSION {
            return Err(StateError::Newer(st.format_version));
        }
        st.upgrade();
        Ok(st)
    }

    /// Brings an older file up to the current format: records for completed
    /// stories, the version number.
    pub(crate) fn upgrade(&mut self) {
        dedup_in_place(&mut self.completed_stories);
        for id in self.completed_stories.clone() {
            let rec = self.stories.entry(id).or_default();
            rec.status = Status::Done;
        }
        // Before kinds were recorded, every attempt after the first was a
        // fresh start.
        for rec in self.stories.values_mut() {
            for h in rec.history.iter_mut().filter(|h| h.kind.is_none()) {
                h.kind = Some(if h.number <= 1 {
                    AttemptKind::First
                } else {
                    AttemptKind::Redo
                });
            }
        }
        self.format_version = FORMAT_VERSION;
    }

    /// A state seeded from `progress.txt`'s `[DONE] Story <id>` lines.
    pub(crate) fn bootstrap_from_progress(progress: &str) -> State {
        let mut st = State::default();
        for line in progress.lines() {
            if let Some(rest) = line.strip_prefix("[DONE] Story ") {
                let id = rest.split_whitespace().next().unwrap_or("");
                if !id.is_empty() {
                    st.completed_stories.push(id.to_string());
                }
            }
        }
        st.upgrade();
        st
    }

    pub(crate) fn record(&self, id: &str) -> Option<&StoryRecord> {
        self.stories.get(id)
    }

    pub(crate) fn status(&self, id: &str) -> Status {
        self.stories.get(id).map(|r| r.status).unwrap_or_default()
    }

    pub(crate) fn is_done(&self, id: &str) -> bool {
        self.status(id) == Status::Done
    }

    fn rec(&mut self, id: &str) -> &mut StoryRecord {
        self.stories.entry(id.to_string()).or_default()
    }

    /// Marks the start of an attempt; returns its number (1-based).
    pub(crate) fn start_attempt(&mut self, id: &str) -> u32 {
        self.current_story = Some(id.to_string());
        let r = self.rec(id);
        r.status = Status::Running;
        r.running_on = None;
        r.attempts_started += 1;
        r.attempts_started
    }

    /// Makes the next attempt's number larger than `n`, an attempt number
    /// already used by kept refs or logs (after `ralph reset ID`, say), so
    /// no ref and no log of an earlier attempt is overwritten.
    pub(crate) fn number_attempts_after(&mut self, id: &str, n: u32) {
        let r = self.rec(id);
        r.attempts_started = r.attempts_started.max(n);
    }

    /// Adds one attempt's cost and time to the story's totals.
    pub(crate) fn add_usage(&mut self, id: &str, usage: Usage, cost: f64, secs: f64) {
        let r = self.rec(id);
        r.usage += usage;
        r.cost_usd += cost;
        r.duration_secs += secs;
    }

    pub(crate) fn push_history(&mut self, id: &str, rec: AttemptRecord) {
        let r = self.rec(id);
        r.history.push(rec);
        // Bounded so a story retried for weeks cannot bloat the file.
        if r.history.len() > 50 {
            let excess = r.history.len() - 50;
            r.history.drain(..excess);
        }
    }

    /// Records a failed attempt and decides whether the story gets another.
    pub(crate) fn fail_attempt(
        &mut self,
        id: &str,
        reason: &str,
        max_retries: u32,
    ) -> AfterFailure {
        let r = self.rec(id);
        r.attempts += 1;
        r.last_error = Some(reason.to_string());
        let after = if r.attempts >= max_retries {
            r.status = Status::Failed;
            AfterFailure::FailedForGood
        } else {
            r.status = Status::Pending;
            AfterFailure::Retry
        };
        let attempts = r.attempts;
        self.retry_count = u64::from(attempts);
        self.current_story = Some(id.to_string());
        after
    }

    /// A story that failed for good gets one decomposition run: back to
    /// pending, its attempts still counted, its note asking for the split.
    pub(crate) fn begin_decomposition(&mut self, id: &str, text: String) {
        let r = self.rec(id);
        r.status = Status::Pending;
        r.note = Some(Note {
            text,
            fixup: None,
            redo: false,
            decompose: true,
            closest: None,
        });
    }

    /// A split asked for by hand was refused: the story is as it was before
    /// (`status`, `note`); its attempts and the retry count were never
    /// touched.
    pub(crate) fn restore(&mut self, id: &str, status: Status, note: Option<Note>) {
        let r = self.rec(id);
        r.status = status;
        r.note = note;
    }

    /// Its work passed validation and waits for a person on its branch.
    pub(crate) fn send_to_review(&mut self, id: &str) {
        self.rec(id).status = Status::Review;
    }

    /// Its work is proposed as a pull request at `url`.
    pub(crate) fn send_to_pr(&mut self, id: &str, url: &str) {
        let r = self.rec(id);
        r.status = Status::InPr;
        r.pr_url = Some(url.to_string());
    }

    /// A reviewer sent it back: the next attempt starts over, told why.
    pub(crate) fn reject(&mut self, id: &str, why: &str) {
        let r = self.rec(id);
        r.status = Status::Pending;
        r.note = Some(Note {
            text: format!("A reviewer sent your previous work on this story back: {why}"),
            fixup: None,
            redo: true,
            decompose: false,
            closest: None,
        });
    }

    /// `ralph note ID TEXT`: kept for the story's next attempt; a second
    /// note is added to the first.
    pub(crate) fn add_user_note(&mut self, id: &str, text: &str) {
        let n = self.user_notes.entry(id.to_string()).or_default();
        if !n.is_empty() {
            n.push('\n');
        }
        n.push_str(text.trim());
    }

    /// The attempt of `id` that starts now takes the person's note.
    pub(crate) fn take_user_note(&mut self, id: &str) -> Option<String> {
        self.user_notes.remove(id)
    }

    /// `ralph land`: reviewed work goes to the merge queue of the next run.
    pub(crate) fn approve(&mut self, id: &str) {
        let r = self.rec(id);
        r.status = Status::Landing;
        // A person read what the gates held it for: it lands as it is.
        if let Some(g) = r.gate.as_mut() {
            g.decision = GateDecision::Approved;
        }
    }

    pub(crate) fn set_gate(&mut self, id: &str, gate: Option<GateRecord>) {
        self.rec(id).gate = gate;
    }

    /// True when a decomposition of `id` already ran (once is enough).
    pub(crate) fn decomposition_tried(&self, id: &str) -> bool {
        self.record(id)
            .is_some_and(|r| r.history.iter().any(|h| h.kind() == AttemptKind::Decompose))
    }

    /// Records that `parent` was replaced by `children` (Ralph v2's
    /// `decomposed_stories`).
    pub(crate) fn set_decomposed(&mut self, parent: &str, children: &[String]) {
        self.decomposed_stories
            .insert(parent.to_string(), Value::from(children.to_vec()));
    }

    /// `decomposed_stories` as lists of IDs (what is not one is skipped).
    pub(crate) fn decomposed(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        self.decomposed_stories
            .iter()
            .map(|(k, v)| {
                let kids = v
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                (k.clone(), kids)
            })
            .collect()
    }

    /// Takes one failed attempt back (the circuit breaker found its cause
    /// outside the story): the story gets that try again.
    pub(crate) fn refund_attempt(&mut self, id: &str) {
        let r = self.rec(id);
        r.attempts = r.attempts.saturating_sub(1);
        if r.status == Status::Failed {
            r.status = Status::Pending;
        }
    }

    /// An attempt that did not count (interrupted, rate-limited, crashed run).
    pub(crate) fn requeue(&mut self, id: &str) {
        let r = self.rec(id);
        if matches!(r.status, Status::Running | Status::Landing) {
            r.status = Status::Pending;
        }
    }

    /// An explicit `ralph run -s ID` gives a failed story a fresh budget.
    pub(crate) fn reset_attempts(&mut self, id: &str) {
        let r = self.rec(id);
        r.attempts = 0;
        r.status = Status::Pending;
    }

    /// The story will not be tried again this run or later without a person.
    pub(crate) fn give_up(&mut self, id: &str) {
        self.rec(id).status = Status::Failed;
    }

    /// The merge conflicted: back to the queue; returns the conflict count.
    pub(crate) fn conflict(&mut self, id: &str, note: &str) -> u32 {
        let r = self.rec(id);
        r.conflicts += 1;
        r.status = Status::Pending;
        r.last_error = Some(note.to_string());
        r.conflicts
    }

    /// A racing candidate's landing failed while others race on (issue 36).
    pub(crate) fn race_on(&mut self, id: &str) {
        self.rec(id).status = Status::Running;
    }

    pub(crate) fn begin_landing(&mut self, id: &str) {
        self.rec(id).status = Status::Landing;
    }

    /// The story's merge is on the target branch.
    pub(crate) fn mark_done(&mut self, id: &str, commit: Option<&str>) {
        let r = self.rec(id);
        r.status = Status::Done;
        if let Some(c) = commit {
            r.landed_commit = Some(c.to_string());
        }
        r.last_error = None;
        r.note = None;
        if !self.completed_stories.iter().any(|c| c == id) {
            self.completed_stories.push(id.to_string());
        }
        if self.current_story.as_deref() == Some(id) {
            self.current_story = None;
        }
        self.retry_count = 0;
    }

    /// Forgets one story's attempts (`ralph reset ID`).
    /// `ralph reset --yes`: every story's status and attempts forgotten,
    /// what they spent kept (`spent_before_reset`).
    pub(crate) fn reset_all(&mut self) {
        let (usage, cost_usd) = self.total_usage();
        *self = State::default();
        self.spent_before_reset = Spent { usage, cost_usd };
    }

    pub(crate) fn reset_story(&mut self, id: &str) {
        if let Some(r) = self.stories.remove(id) {
            self.spent_before_reset.usage += r.usage;
            self.spent_before_reset.cost_usd += r.cost_usd;
        }
        self.completed_stories.retain(|c| c != id);
        if self.current_story.as_deref() == Some(id) {
            self.current_story = None;
            self.retry_count = 0;
        }
    }

    /// `ralph reset ID` of a story that landed: these landing commits of it
    /// no longer make it done (`counted_landings`).
    pub(crate) fn set_aside_landings(&mut self, id: &str, commits: &[String]) {
        let kept = self.reset_landings.entry(id.to_string()).or_default();
        for c in commits {
            if !kept.contains(c) {
                kept.push(c.clone());
            }
        }
        if kept.is_empty() {
            self.reset_landings.remove(id);
        }
    }

    /// Of every landing on the target (story, commit; oldest first), the
    /// ones that make a story done: those not set aside by a reset, the
    /// oldest of each story.
    pub(crate) fn counted_landings(&self, all: Vec<(String, String)>) -> Vec<(String, String)> {
        let mut seen = std::collections::HashSet::new();
        all.into_iter()
            .filter(|(id, c)| !self.reset_landings.get(id).is_some_and(|v| v.contains(c)))
            .filter(|(id, _)| seen.insert(id.clone()))
            .collect()
    }

    /// Stories left running or landing by a previous run go back to pending.
    pub(crate) fn requeue_interrupted(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for (id, r) in self.stories.iter_mut() {
            if matches!(r.status, Status::Running | Status::Landing) {
                r.status = Status::Pending;
                out.push(id.clone());
            }
        }
        out
    }

    pub(crate) fn note(&self, id: &str) -> Option<&Note> {
        self.stories.get(id).and_then(|r| r.note.as_ref())
    }

    /// What the next attempt at `id` is told; `None` forgets it.
    pub(crate) fn set_note(&mut self, id: &str, note: Option<Note>) {
        self.rec(id).note = note;
    }

    /// Adds `line` to the note of `id` (an interrupted attempt's kept work),
    /// keeping whatever fix-up or redo it already announces.
    pub(crate) fn add_to_note(&mut self, id: &str, line: &str) {
        let note = self.rec(id).note.get_or_insert_with(Note::default);
        if !note.text.is_empty() {
            note.text.push_str("\n\n");
        }
        note.text.push_str(line);
    }

    /// What the next attempt at `id` will be.
    pub(crate) fn next_kind(&self, id: &str) -> AttemptKind {
        match self.note(id) {
            Some(n) if n.decompose => AttemptKind::Decompose,
            Some(n) if n.fixup.is_some() => AttemptKind::Fixup,
            Some(n) if n.redo => AttemptKind::Redo,
            _ => AttemptKind::First,
        }
    }

    /// The record of attempt `n` of `id`, if it is still in the history.
    pub(crate) fn attempt(&self, id: &str, n: u32) -> Option<&AttemptRecord> {
        self.record(id)?
            .history
            .iter()
            .rev()
            .find(|h| h.number == n)
    }

    /// Where the agent runs went, over every story: by kind, and the runs
    /// that failed. Faults are not attempts and not counted.
    pub(crate) fn waste(&self) -> Waste {
        let mut w = Waste::default();
        for r in self.stories.values() {
            if r.status == Status::Done {
                w.landed += 1;
            }
            for h in r.history.iter().filter(|h| h.outcome != Outcome::Fault) {
                let add = |t: &mut Tally| {
                    t.runs += 1;
                    t.tokens += h.usage.input_tokens
                        + h.usage.output_tokens
                        + h.usage.cache_creation_input_tokens
                        + h.usage.cache_read_input_tokens;
                    t.cost_usd += h.cost_usd;
                };
                add(match h.kind() {
                    AttemptKind::First => &mut w.first,
                    AttemptKind::Fixup => &mut w.fixup,
                    AttemptKind::Redo | AttemptKind::Decompose => &mut w.redo,
                });
                if matches!(
                    h.outcome,
                    Outcome::Fail | Outcome::Timeout | Outcome::Error | Outcome::NoSignal
                ) {
                    add(&mut w.failed);
                }
            }
        }
        w
    }

    pub(crate) fn total_usage(&self) -> (Usage, f64) {
        let mut u = self.spent_before_reset.usage;
        let mut cost = self.spent_before_reset.cost_usd;
        for r in self.stories.values() {
            u += r.usage;
            cost += r.cost_usd;
        }
        (u, cost)
    }

    pub(crate) fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("state serialises");
        s.push('\n');
        s
    }
}

fn dedup_in_place(v: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    v.retain(|x| seen.insert(x.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_file_upgrades_and_keeps_unknown_keys() {
        let st = State::from_json(
            r#"{"completed_stories":["1.1","1.1"],"current_story":null,"retry_count":0,"custom":5}"#,
        )
        .unwrap();
        assert_eq!(st.completed_stories, vec!["1.1"]);
        assert_eq!(st.format_version, FORMAT_VERSION);
        assert!(st.is_done("1.1"));
        let out = st.to_json();
        for key in [
            "absorbed_stories",
            "merged_stories",
            "decomposed_stories",
            "pipeline_iteration",
            "format_version",
            "custom",
        ] {
            assert!(out.contains(key), "{key} missing from {out}");
        }
        let again = State::from_json(&out).unwrap();
        assert_eq!(again, st);
    }

    #[test]
    fn a_newer_format_is_refused_not_rewritten() {
        let newer = format!(
            "{{\"format_version\": {}, \"future\": 1}}",
            FORMAT_VERSION + 1
        );
        assert!(matches!(
            State::from_json(&newer),
            Err(StateError::Newer(n)) if n == FORMAT_VERSION + 1
        ));
        assert!(matches!(State::from_json("{"), Err(StateError::Json(_))));
    }

    #[test]
    fn a_version_2_file_loads_with_attempt_kinds_and_notes_round_trip() {
        let v2 = r#"{"format_version":2,"completed_stories":[],"stories":{"1.1":{"status":"pending",
            "attempts":1,"attempts_started":2,"history":[
              {"number":1,"outcome":"fail","duration_secs":1.0},
              {"number":2,"outcome":"interrupted","duration_secs":1.0}]}}}"#;
        let mut st = State::from_json(v2).unwrap();
        assert_eq!(st.format_version, FORMAT_VERSION);
        let kinds: Vec<_> = st
            .record("1.1")
            .unwrap()
            .history
            .iter()
            .map(|h| h.kind)
            .collect();
        assert_eq!(
            kinds,
            vec![Some(AttemptKind::First), Some(AttemptKind::Redo)]
        );
        assert_eq!(st.next_kind("1.1"), AttemptKind::First);
        st.set_note(
            "1.1",
            Some(Note::fixup(
                FixupCause::Conflict {
                    paths: vec!["a.txt".into()],
                },
                "refs/ralph/conflicts/1.1/2".into(),
                2,
            )),
        );
        st.add_to_note("1.1", "interrupted once");
        let again = State::from_json(&st.to_json()).unwrap();
        assert_eq!(again, st);
        assert_eq!(again.next_kind("1.1"), AttemptKind::Fixup);
        assert_eq!(again.note("1.1").unwrap().text, "interrupted once");
        st.mark_done("1.1", None);
        assert_eq!(st.note("1.1"), None, "a landed story needs no note");
    }

    #[test]
    fn bootstrap_reads_done_lines_only() {
        let st = State::bootstrap_from_progress(
            "[DONE] Story 1.1 - A - ts\n[FAIL] Story 2.1 - x - ts (attempt 1/3)\n[DONE] Story 2.1 - B - ts\n[LEARN] x\n[DONE] Story 1.1 - A - ts\n",
        );
        assert_eq!(st.completed_stories, vec!["1.1", "2.1"]);
    }

    #[test]
    fn retries_are_per_story() {
        let mut st = State::default();
        st.start_attempt("1.1");
        assert_eq!(st.fail_attempt("1.1", "boom", 2), AfterFailure::Retry);
        st.start_attempt("1.2");
        assert_eq!(st.fail_attempt("1.2", "boom", 2), AfterFailure::Retry);
        st.start_attempt("1.1");
        assert_eq!(
            st.fail_attempt("1.1", "boom", 2),
            AfterFailure::FailedForGood
        );
        assert_eq!(st.status("1.1"), Status::Failed);
        assert_eq!(st.status("1.2"), Status::Pending);
        assert_eq!(st.record("1.1").unwrap().attempts_started, 2);
    }

    #[test]
    fn interrupted_attempts_do_not_count() {
        let mut st = State::default();
        st.start_attempt("1.1");
        assert_eq!(st.requeue_interrupted(), vec!["1.1"]);
        assert_eq!(st.record("1.1").unwrap().attempts, 0);
        assert_eq!(st.status("1.1"), Status::Pending);
    }

    #[test]
    fn done_resets_legacy_counters() {
        let mut st = State::default();
        st.start_attempt("1.1");
        st.fail_attempt("1.1", "x", 3);
        st.start_attempt("1.1");
        st.mark_done("1.1", Some("abc"));
        st.mark_done("1.1", Some("abc"));
        assert_eq!(st.completed_stories, vec!["1.1"]);
        assert_eq!(st.current_story, None);
        assert_eq!(st.retry_count, 0);
        st.reset_story("1.1");
        assert!(!st.is_done("1.1"));
        assert!(st.completed_stories.is_empty());
    }

    #[test]
    fn waste_since_is_what_was_added() {
        let tally = |runs, tokens, cost_usd| Tally {
            runs,
            tokens,
            cost_usd,
        };
        let before = Waste {
            landed: 1,
            first: tally(2, 100, 1.0),
            failed: tally(1, 50, 0.5),
            ..Waste::default()
        };
        let now = Waste {
            landed: 2,
            first: tally(3, 150, 1.5),
            fixup: tally(1, 10, 0.25),
            failed: tally(1, 50, 0.5),
            ..Waste::default()
        };
        assert_eq!(
            now.since(&before),
            Waste {
                landed: 1,
                first: tally(1, 50, 0.5),
                fixup: tally(1, 10, 0.25),
                ..Waste::default()
            }
        );
        assert_eq!(now.since(&now), Waste::default());
    }

    #[test]
    fn landings_a_reset_set_aside_do_not_count() {
        let l = |id: &str, c: &str| (id.to_string(), c.to_string());
        let all = vec![l("1.1", "a"), l("1.2", "b"), l("1.1", "c"), l("1.1", "d")];
        let mut st = State::default();
        assert_eq!(
            st.counted_landings(all.clone()),
            vec![l("1.1", "a"), l("1.2", "b")]
        );
        st.set_aside_landings("1.1", &["a".to_string()]);
        st.set_aside_landings("1.1", &["a".to_string()]);
        assert_eq!(st.reset_landings["1.1"], vec!["a"]);
        assert_eq!(
            st.counted_landings(all.clone()),
            vec![l("1.2", "b"), l("1.1", "c")]
        );
        st.set_aside_landings("1.2", &["b".to_string()]);
        st.set_aside_landings("1.1", &["c".to_string(), "d".to_string()]);
        assert_eq!(st.counted_landings(all), vec![]);
        st.set_aside_landings("9.9", &[]);
        assert!(!st.reset_landings.contains_key("9.9"));
        // Kept across a save and a load.
        let back = State::from_json(&st.to_json()).unwrap();
        assert_eq!(back.reset_landings, st.reset_landings);
    }
}
