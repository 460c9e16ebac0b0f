//! Best of N (issue 36): the candidates racing for one attempt at a story,
//! and the rules that say how many race and who each runs as. Pure.
//!
//! An attempt with `best_of` N starts N candidates, each in its own slot
//! (its own worktree, on its own branch: `project::candidate_branch`). A
//! candidate whose agent said DONE enters the merge queue as the story's
//! work; the first to land wins and the others are stopped. One in the
//! queue at a time: the next DONE one waits for that landing's end, and
//! goes in only if it failed. No candidate landing is one failed attempt.

use std::cmp::Reverse;

use crate::agent::Backend;
use crate::config::CandidateSpec;
use crate::state::{AttemptKind, FixupCause, Note};

/// How many candidates race for an attempt at a story: `--best-of` wins
/// over the story's `best_of:`, which wins over `attempts.best_of`; never
/// fewer than one.
pub(crate) fn best_of(cli: Option<u32>, story: Option<u32>, config: u32) -> u32 {
    cli.or(story).unwrap_or(config).max(1)
}

/// Who candidate `k` (1-based) runs as: entry (k−1) mod len of
/// `attempts.candidates`, else the story's own agent and model (`own`).
/// An entry naming the story's own agent without a model keeps the
/// story's model.
pub(crate) fn candidate_agent(
    k: u32,
    list: &[CandidateSpec],
    own: (Backend, Option<String>),
) -> (Backend, Option<String>) {
    if list.is_empty() {
        return own;
    }
    let spec = &list[(k as usize - 1) % list.len()];
    let model = match &spec.model {
        Some(m) => Some(m.clone()),
        None if spec.agent == own.0 => own.1,
        None => None,
    };
    (spec.agent, model)
}

/// Where a candidate is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CandState {
    /// Not started yet: it waits for a free slot.
    Waiting,
    Running,
    /// Its agent said DONE: it waits for its turn in the merge queue.
    Done,
    /// Its work is in the merge queue.
    Validating,
    /// Its work passed validation and the gates on the target's tip
    /// without landing (`attempts.pick: judge`): it waits for the pick.
    Passed,
    /// It did not pass (its agent failed, or its work failed validation,
    /// the gates or the merge).
    Failed,
    /// Stopped: another candidate won, or the run stopped.
    Stopped,
    /// Its work landed.
    Won,
}

impl CandState {
    /// The word `status --json` and the records use.
    pub(crate) fn word(self) -> &'static str {
        match self {
            CandState::Waiting => "waiting",
            CandState::Running => "running",
            CandState::Done => "done",
            CandState::Validating => "validating",
            CandState::Passed => "passed",
            CandState::Failed => "failed",
            CandState::Stopped => "stopped",
            CandState::Won => "won",
        }
    }
}

/// One candidate of a race.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Candidate {
    /// 1-based.
    pub(crate) k: u32,
    pub(crate) agent: Backend,
    pub(crate) model: Option<String>,
    pub(crate) state: CandState,
    /// The slot it runs in, while it runs.
    pub(crate) slot: Option<usize>,
    /// The cluster node and worker slot it was placed on (kept once it
    /// ended, as a finished attempt's `node` is).
    pub(crate) node: Option<String>,
    /// Its report came back (its slot is free, its spend counted).
    pub(crate) ended: bool,
    /// Why it did not pass, for the next attempt's note.
    pub(crate) why: Option<String>,
    /// Its iteration (`RALPH_ITERATION`), for post hooks after a landing.
    pub(crate) iteration: u64,
    /// Its log, relative to the project root.
    pub(crate) log_rel: Option<String>,
    /// Its end was recorded (`candidate_end`) and its work kept.
    pub(crate) settled: bool,
    /// In which order its report came (1: the first to finish).
    pub(crate) finished: u32,
    /// What it spent (its CLI's figure; `cost_unknown`: a floor).
    pub(crate) cost_usd: f64,
    pub(crate) cost_unknown: bool,
    /// Lines its work adds and removes (`AttemptReport::diff_lines`).
    pub(crate) diff_lines: Option<u64>,
    /// The gates' findings let be on its work (`gates.tests: warn`).
    pub(crate) findings: usize,
    /// Why its work did not land, as a fix-up of it would be told: set
    /// when the merge queue turned it down (a conflict, the gates,
    /// validation, a reviewer).
    pub(crate) cause: Option<FixupCause>,
    /// It was itself a fix-up (of a lost race's closest work): one fix-up
    /// per failure, so its own work is not fixed up again.
    pub(crate) fixup: bool,
}

/// The candidates racing for one attempt at a story.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Race {
    pub(crate) attempt: u32,
    pub(crate) kind: AttemptKind,
    /// What every candidate's prompt is told (the previous attempt's note).
    pub(crate) note: Option<Note>,
    pub(crate) cands: Vec<Candidate>,
    /// Every candidate's spend and the longest run, for the attempt's
    /// record once the race is over.
    pub(crate) usage: crate::agent::event::Usage,
    pub(crate) secs: f64,
    /// Its judge agent runs (`attempts.judge.agent`), and what judges
    /// cost it so far.
    pub(crate) judging: bool,
    pub(crate) judge_cost: (f64, bool),
}

impl Race {
    pub(crate) fn new(
        attempt: u32,
        kind: AttemptKind,
        note: Option<Note>,
        who: Vec<(Backend, Option<String>)>,
    ) -> Race {
        let cands = who
            .into_iter()
            .zip(1..)
            .map(|((agent, model), k)| Candidate {
                k,
                agent,
                model,
                state: CandState::Waiting,
                slot: None,
                node: None,
                ended: false,
                why: None,
                iteration: 0,
                log_rel: None,
                settled: false,
                finished: 0,
                cost_usd: 0.0,
                cost_unknown: false,
                diff_lines: None,
                findings: 0,
                cause: None,
                fixup: false,
            })
            .collect();
        Race {
            attempt,
            kind,
            note,
            cands,
            usage: Default::default(),
            secs: 0.0,
            judging: false,
            judge_cost: (0.0, false),
        }
    }

    pub(crate) fn get(&self, k: u32) -> Option<&Candidate> {
        self.cands.get((k as usize).checked_sub(1)?)
    }

    pub(crate) fn get_mut(&mut self, k: u32) -> Option<&mut Candidate> {
        self.cands.get_mut((k as usize).checked_sub(1)?)
    }

    /// The next candidate to start, if one waits.
    pub(crate) fn next_waiting(&self) -> Option<u32> {
        self.cands
            .iter()
            .find(|c| c.state == CandState::Waiting)
            .map(|c| c.k)
    }

    /// A candidate won.
    pub(crate) fn won(&self) -> Option<u32> {
        self.cands
            .iter()
            .find(|c| c.state == CandState::Won)
            .map(|c| c.k)
    }

    /// The candidate in the merge queue, if one is.
    pub(crate) fn validating(&self) -> Option<u32> {
        self.cands
            .iter()
            .find(|c| c.state == CandState::Validating)
            .map(|c| c.k)
    }

    /// The next DONE candidate for the merge queue: the first to finish,
    /// when none is there.
    pub(crate) fn next_for_queue(&self) -> Option<u32> {
        if self.validating().is_some() || self.won().is_some() {
            return None;
        }
        self.cands
            .iter()
            .filter(|c| c.state == CandState::Done)
            .min_by_key(|c| c.finished)
            .map(|c| c.k)
    }

    /// `attempts.pick: judge`: once no candidate runs, waits or waits to
    /// be judged, the passing one the fixed ranking puts first: fewest gate
    /// findings, then the smallest diff, then the earliest finish.
    pub(crate) fn ranked_first(&self) -> Option<u32> {
        let open = self.cands.iter().any(|c| {
            matches!(
                c.state,
                CandState::Waiting | CandState::Running | CandState::Done | CandState::Validating
            )
        });
        if open || self.won().is_some() {
            return None;
        }
        self.cands
            .iter()
            .filter(|c| c.state == CandState::Passed)
            .min_by_key(|c| (c.findings, c.diff_lines.unwrap_or(u64::MAX), c.finished))
            .map(|c| c.k)
    }

    /// Why the ranking put candidate `k` first, for the run records.
    pub(crate) fn ranking_reason(&self, k: u32) -> String {
        let passed: Vec<&Candidate> = self
            .cands
            .iter()
            .filter(|c| c.state == CandState::Passed || c.k == k)
            .collect();
        let each: Vec<String> = passed
            .iter()
            .map(|c| {
                format!(
                    "{}: {} finding(s), {} line(s) changed, finished #{}",
                    c.k,
                    c.findings,
                    c.diff_lines.map_or("?".to_string(), |n| n.to_string()),
                    c.finished
                )
            })
            .collect();
        format!(
            "ranking (fewest findings, smallest diff, earliest finish) of {} passing: {}",
            passed.len(),
            each.join("; ")
        )
    }

    /// A lost race's candidate whose work came closest to passing: the
    /// one the next race's candidate 1 fixes up (`Note::closest`). `None`
    /// when no candidate's work reached the merge queue and failed there
    /// (see `closeness`); `checks` are the required validation commands'
    /// names in the order they run.
    pub(crate) fn closest(&self, checks: &[String]) -> Option<u32> {
        self.cands
            .iter()
            .filter_map(|c| Some((closeness(c, checks)?, c.k)))
            .min()
            .map(|(_, k)| k)
    }

    /// Why candidate `k` came closest, every candidate's standing said,
    /// for ralph.log and the run records.
    pub(crate) fn closest_reason(&self, k: u32, checks: &[String]) -> String {
        let each: Vec<String> = self
            .cands
            .iter()
            .map(|c| format!("{}: {}", c.k, standing(c, checks)))
            .collect();
        format!(
            "candidate {k} came closest (a reviewer's changes, then the latest failing \
             check, then the gates, then a conflict; then fewest findings, smallest diff, \
             earliest finish) of {}: {}",
            self.cands.len(),
            each.join("; ")
        )
    }

    /// No candidate can still pass: none waits, runs, is done or in the
    /// queue.
    pub(crate) fn lost(&self) -> bool {
        self.won().is_none()
            && self
                .cands
                .iter()
                .all(|c| matches!(c.state, CandState::Failed | CandState::Stopped) && c.ended)
    }

    /// Every candidate's report is in: the race may be forgotten once
    /// decided.
    pub(crate) fn all_ended(&self) -> bool {
        self.cands
            .iter()
            .all(|c| c.ended || c.state == CandState::Waiting)
    }

    /// How many candidates' reports are in.
    pub(crate) fn ended_count(&self) -> u32 {
        self.cands.iter().filter(|c| c.ended).count() as u32
    }

    /// Every candidate's cost and its judge's, and whether one was unknown.
    pub(crate) fn cost(&self) -> (f64, bool) {
        let usd: f64 = self.cands.iter().map(|c| c.cost_usd).sum();
        let unknown = self.cands.iter().any(|c| c.cost_unknown);
        (usd + self.judge_cost.0, unknown || self.judge_cost.1)
    }

    /// The candidates that passed and wait for the pick.
    pub(crate) fn passing(&self) -> Vec<u32> {
        self.cands
            .iter()
            .filter(|c| c.state == CandState::Passed)
            .map(|c| c.k)
            .collect()
    }

    /// The candidates as `state.json` shows them (`status --json`).
    pub(crate) fn rows(&self) -> Vec<crate::state::CandidateRow> {
        self.cands
            .iter()
            .map(|c| crate::state::CandidateRow {
                k: c.k,
                agent: c.agent.name().to_string(),
                model: c.model.clone(),
                state: c.state.word().to_string(),
                node: c.node.clone(),
            })
            .collect()
    }

    /// Some candidate failed on its own (not only stopped): a lost race
    /// is then a failed attempt, else (all stopped) it is not charged.
    pub(crate) fn any_failed(&self) -> bool {
        self.cands.iter().any(|c| c.state == CandState::Failed)
    }

    /// The candidates' failures, one line each, for the next attempt's note.
    pub(crate) fn failures(&self) -> String {
        self.cands
            .iter()
            .filter_map(|c| {
                let why = c.why.as_deref()?;
                Some(format!(
                    "candidate {} ({}): {}",
                    c.k,
                    who(c.agent, c.model.as_deref()),
                    why.lines().next().unwrap_or(why)
                ))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// How near candidate `c` of a lost race came to passing, smaller is
/// nearer; `None` when its work is not to be fixed up. Its work merged
/// and passed the gates and validation, and only a reviewer asked for
/// changes; else it failed validation, nearer the later its failing
/// command comes (more commands passed); else only the gates found
/// something; else it conflicted. Then fewest gate findings, the smallest
/// diff, the earliest finish. A candidate that never said DONE with work,
/// was stopped, or was itself a fix-up (one fix-up per failure) is none.
fn closeness(c: &Candidate, checks: &[String]) -> Option<(u8, Reverse<usize>, usize, u64, u32)> {
    if c.state != CandState::Failed || c.fixup {
        return None;
    }
    let (tier, passed, findings) = match c.cause.as_ref()? {
        FixupCause::Review { .. } => (0, checks.len(), c.findings),
        FixupCause::Validation { name, .. } => (1, failing_check(name, checks), c.findings),
        FixupCause::Gate { findings, .. } => (2, 0, findings.len()),
        FixupCause::Conflict { .. } => (3, 0, c.findings),
    };
    Some((
        tier,
        Reverse(passed),
        findings,
        c.diff_lines.unwrap_or(u64::MAX),
        c.finished,
    ))
}

/// Where check `name` comes in `checks` (how many passed before it
/// failed); one no longer there counts as the first.
fn failing_check(name: &str, checks: &[String]) -> usize {
    checks.iter().position(|n| n == name).unwrap_or(0)
}

/// Candidate `c`'s end in words, for `Race::closest_reason`.
fn standing(c: &Candidate, checks: &[String]) -> String {
    let how = match (&c.cause, c.state) {
        (Some(FixupCause::Review { .. }), _) => {
            "passed validation; a reviewer asked for changes".into()
        }
        (Some(FixupCause::Validation { name, .. }), _) => format!(
            "failed check {} of {} ({name})",
            failing_check(name, checks) + 1,
            checks.len().max(1)
        ),
        (Some(FixupCause::Gate { findings, .. }), _) => {
            format!("the gates found {}", findings.len())
        }
        (Some(FixupCause::Conflict { .. }), _) => "conflicted".into(),
        (None, CandState::Failed) => "no work to fix up (it did not finish with work)".into(),
        (None, state) => state.word().to_string(),
    };
    let mut s = format!(
        "{how}, {} finding(s), {} line(s) changed, finished #{}",
        c.findings,
        c.diff_lines.map_or("?".to_string(), |n| n.to_string()),
        c.finished
    );
    if c.fixup {
        s.push_str(" (itself a fix-up: not fixed up again)");
    }
    s
}

/// `agent` or `agent:model`, as `attempts.candidates` spells it.
pub(crate) fn who(agent: Backend, model: Option<&str>) -> String {
    match model {
        Some(m) => format!("{}:{m}", agent.name()),
        None => agent.name().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_over_the_story_which_wins_over_the_config() {
        let table = [
            (None, None, 1, 1),
            (None, None, 3, 3),
            (None, Some(2), 3, 2),
            (Some(4), Some(2), 3, 4),
            (Some(1), Some(2), 3, 1),
            (Some(0), None, 3, 1),
        ];
        for (cli, story, config, want) in table {
            assert_eq!(
                best_of(cli, story, config),
                want,
                "{cli:?} {story:?} {config}"
            );
        }
    }

    #[test]
    fn candidate_k_takes_entry_k_minus_one_mod_len() {
        let list: Vec<CandidateSpec> = ["claude:sonnet", "codex:gpt-5", "claude"]
            .iter()
            .map(|e| CandidateSpec::parse(e).unwrap())
            .collect();
        let own = (Backend::Claude, Some("haiku".to_string()));
        let got: Vec<String> = (1..=5)
            .map(|k| {
                let (a, m) = candidate_agent(k, &list, own.clone());
                who(a, m.as_deref())
            })
            .collect();
        assert_eq!(
            got,
            [
                "claude:sonnet",
                "codex:gpt-5",
                "claude:haiku",
                "claude:sonnet",
                "codex:gpt-5"
            ]
        );
        assert_eq!(candidate_agent(2, &[], own.clone()), own);
    }

    fn race(states: &[(CandState, bool, u64)]) -> Race {
        let mut r = Race::new(
            1,
            AttemptKind::First,
            None,
            vec![(Backend::Claude, None); states.len()],
        );
        for (c, &(state, ended, finished)) in r.cands.iter_mut().zip(states) {
            c.state = state;
            c.ended = ended;
            c.finished = finished as u32;
        }
        r
    }

    #[test]
    fn the_first_done_goes_to_the_queue_one_at_a_time() {
        use CandState::*;
        let r = race(&[(Done, true, 3), (Done, true, 2), (Running, false, 1)]);
        assert_eq!(r.next_for_queue(), Some(2));
        let r = race(&[(Done, true, 3), (Validating, true, 2)]);
        assert_eq!(r.next_for_queue(), None);
        let r = race(&[(Done, true, 3), (Won, true, 2)]);
        assert_eq!(r.next_for_queue(), None);
    }

    #[test]
    fn the_ranking_takes_fewest_findings_then_the_smallest_diff_then_the_first_finished() {
        use CandState::*;
        let mut r = race(&[(Passed, true, 1), (Passed, true, 2), (Failed, true, 3)]);
        r.cands[0].diff_lines = Some(40);
        r.cands[1].diff_lines = Some(12);
        r.cands[2].diff_lines = Some(1);
        assert_eq!(r.ranked_first(), Some(2), "the smallest passing diff");
        r.cands[1].findings = 1;
        assert_eq!(r.ranked_first(), Some(1), "fewer findings first");
        r.cands[1].findings = 0;
        r.cands[0].diff_lines = Some(12);
        assert_eq!(
            r.ranked_first(),
            Some(1),
            "the same diff: the earlier finish"
        );
        let r = race(&[(Passed, true, 1), (Running, false, 0)]);
        assert_eq!(r.ranked_first(), None, "not while one still runs");
        let r = race(&[(Failed, true, 1), (Stopped, true, 2)]);
        assert_eq!(r.ranked_first(), None);
    }

    fn validation(name: &str) -> Option<FixupCause> {
        Some(FixupCause::Validation {
            name: name.into(),
            cmd: format!("make {name}"),
            tail: String::new(),
            log: String::new(),
        })
    }

    fn gate(n: usize) -> Option<FixupCause> {
        let finding = crate::gates::Finding {
            kind: crate::gates::FindingKind::GateError,
            file: "t.rs".into(),
            line: None,
            what: "x".into(),
        };
        Some(FixupCause::Gate {
            findings: vec![finding; n],
            other_side_of: None,
        })
    }

    fn conflict() -> Option<FixupCause> {
        Some(FixupCause::Conflict {
            paths: vec!["f".into()],
        })
    }

    fn review() -> Option<FixupCause> {
        Some(FixupCause::Review {
            text: "rename it".into(),
        })
    }

    #[test]
    fn the_closest_work_is_the_one_that_got_furthest_through_the_merge_queue() {
        use CandState::*;
        let checks: Vec<String> = ["build", "test", "lint"].map(String::from).to_vec();
        // (state, why its landing failed, itself a fix-up, findings, diff
        // lines, finish order) per candidate, and the one that came closest.
        type Row = (CandState, Option<FixupCause>, bool, usize, Option<u64>);
        let table: Vec<(&str, Vec<Row>, Option<u32>)> = vec![
            (
                "a later failing check beats an earlier one",
                vec![
                    (Failed, validation("build"), false, 0, Some(1)),
                    (Failed, validation("lint"), false, 0, Some(90)),
                    (Failed, validation("test"), false, 0, Some(5)),
                ],
                Some(2),
            ),
            (
                "validation beats the gates, which beat a conflict",
                vec![
                    (Failed, conflict(), false, 0, Some(1)),
                    (Failed, gate(1), false, 0, Some(1)),
                    (Failed, validation("build"), false, 0, Some(50)),
                ],
                Some(3),
            ),
            (
                "the gates beat a conflict",
                vec![
                    (Failed, conflict(), false, 0, Some(1)),
                    (Failed, gate(3), false, 0, Some(9)),
                ],
                Some(2),
            ),
            (
                "fewer gate findings first",
                vec![
                    (Failed, gate(3), false, 0, Some(1)),
                    (Failed, gate(1), false, 0, Some(9)),
                ],
                Some(2),
            ),
            (
                "a reviewer's changes beat every failure",
                vec![
                    (Failed, validation("lint"), false, 0, Some(1)),
                    (Failed, review(), false, 0, Some(99)),
                ],
                Some(2),
            ),
            (
                "the same check: fewest findings let be, then the smallest diff",
                vec![
                    (Failed, validation("test"), false, 2, Some(1)),
                    (Failed, validation("test"), false, 0, Some(30)),
                    (Failed, validation("test"), false, 0, Some(20)),
                ],
                Some(3),
            ),
            (
                "all else equal: the first to finish",
                vec![
                    (Failed, validation("test"), false, 0, Some(20)),
                    (Failed, validation("test"), false, 0, Some(20)),
                ],
                Some(1),
            ),
            (
                "a check no longer configured counts as the first",
                vec![
                    (Failed, validation("gone"), false, 0, Some(1)),
                    (Failed, validation("test"), false, 0, Some(9)),
                ],
                Some(2),
            ),
            (
                "a fix-up's work is not fixed up again",
                vec![
                    (Failed, validation("lint"), true, 0, Some(1)),
                    (Failed, validation("build"), false, 0, Some(9)),
                ],
                Some(2),
            ),
            (
                "no work reached the queue: nothing to fix up",
                vec![
                    (Failed, None, false, 0, None),
                    (Stopped, None, false, 0, Some(3)),
                ],
                None,
            ),
            (
                "only a fix-up failed: nothing",
                vec![
                    (Failed, validation("lint"), true, 0, Some(1)),
                    (Failed, None, false, 0, None),
                ],
                None,
            ),
        ];
        for (what, rows, want) in table {
            let mut r = race(&vec![(Failed, true, 0); rows.len()]);
            for (i, (c, (state, cause, fixup, findings, diff))) in
                r.cands.iter_mut().zip(rows).enumerate()
            {
                (c.state, c.cause, c.fixup, c.findings, c.diff_lines) =
                    (state, cause, fixup, findings, diff);
                c.finished = i as u32 + 1;
            }
            assert_eq!(r.closest(&checks), want, "{what}");
        }
    }

    #[test]
    fn the_closest_reason_says_every_candidates_standing() {
        let mut r = race(&[(CandState::Failed, true, 1), (CandState::Failed, true, 2)]);
        r.cands[0].cause = validation("build");
        r.cands[1].cause = validation("test");
        r.cands[1].diff_lines = Some(12);
        let checks: Vec<String> = ["build", "test"].map(String::from).to_vec();
        assert_eq!(r.closest(&checks), Some(2));
        let why = r.closest_reason(2, &checks);
        assert!(why.starts_with("candidate 2 came closest"), "{why}");
        assert!(
            why.contains(
                "1: failed check 1 of 2 (build), 0 finding(s), ? line(s) changed, finished #1"
            ),
            "{why}"
        );
        assert!(
            why.contains(
                "2: failed check 2 of 2 (test), 0 finding(s), 12 line(s) changed, finished #2"
            ),
            "{why}"
        );
    }

    #[test]
    fn a_race_is_lost_once_every_candidate_ended_without_passing() {
        use CandState::*;
        assert!(race(&[(Failed, true, 1), (Stopped, true, 2)]).lost());
        assert!(!race(&[(Failed, true, 1), (Running, false, 2)]).lost());
        assert!(!race(&[(Failed, true, 1), (Waiting, false, 0)]).lost());
        assert!(!race(&[(Failed, true, 1), (Done, true, 2)]).lost());
        assert!(!race(&[(Won, true, 1), (Stopped, true, 2)]).lost());
        assert!(race(&[(Failed, true, 1)]).any_failed());
        assert!(!race(&[(Stopped, true, 1)]).any_failed());
    }
}
