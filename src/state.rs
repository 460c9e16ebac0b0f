//! `.ralph/state.json` (SPEC 3.8): the model and its transitions. Pure: the
//! store module reads and writes it.
//!
//! The bash tool's keys are kept so its users can still read the file; the
//! per-story records are ours. `attempts` counts only *failed* attempts (the
//! retry budget); an attempt interrupted by a crash or Ctrl-C is not counted.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::agent::output::Usage;

pub(crate) const FORMAT_VERSION: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    #[default]
    Pending,
    Running,
    Landing,
    Done,
    Failed,
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
    /// A fault outside the story (machine, project, agent installation).
    Fault,
    /// Written by a newer ralph; kept readable.
    #[serde(other)]
    Unknown,
}

/// Why an attempt ran: the first try at a story, or one of the ways of
/// trying again (what "waste" is made of). Today every attempt after a
/// story's first is a retry (`AttemptKind::after`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum AttemptKind {
    #[default]
    First,
    Retry,
    FixUp,
    Redo,
    Decomposition,
    Postmortem,
}

impl AttemptKind {
    pub(crate) const ALL: [AttemptKind; 6] = [
        AttemptKind::First,
        AttemptKind::Retry,
        AttemptKind::FixUp,
        AttemptKind::Redo,
        AttemptKind::Decomposition,
        AttemptKind::Postmortem,
    ];

    /// The kind of the next attempt at a story with `earlier` finished
    /// attempts on record.
    pub(crate) fn after(earlier: usize) -> AttemptKind {
        if earlier == 0 {
            AttemptKind::First
        } else {
            AttemptKind::Retry
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            AttemptKind::First => "first",
            AttemptKind::Retry => "retry",
            AttemptKind::FixUp => "fix-up",
            AttemptKind::Redo => "redo",
            AttemptKind::Decomposition => "decomposition",
            AttemptKind::Postmortem => "postmortem",
        }
    }
}

/// One finished attempt, kept for `status` and cost reporting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub(crate) struct AttemptRecord {
    pub(crate) number: u32,
    pub(crate) outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    pub(crate) duration_secs: f64,
    #[serde(default)]
    pub(crate) usage: Usage,
    #[serde(default)]
    pub(crate) cost_usd: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) saved_ref: Option<String>,
    /// The agent backend that ran the attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) agent: Option<String>,
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
    /// Keys we do not know are kept as they were.
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
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
        if !self.completed_stories.iter().any(|c| c == id) {
            self.completed_stories.push(id.to_string());
        }
        if self.current_story.as_deref() == Some(id) {
            self.current_story = None;
        }
        self.retry_count = 0;
    }

    /// Forgets one story's attempts (`ralph reset ID`).
    pub(crate) fn reset_story(&mut self, id: &str) {
        self.stories.remove(id);
        self.completed_stories.retain(|c| c != id);
        if self.current_story.as_deref() == Some(id) {
            self.current_story = None;
            self.retry_count = 0;
        }
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

    pub(crate) fn total_usage(&self) -> (Usage, f64) {
        let mut u = Usage::default();
        let mut cost = 0.0;
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
}
