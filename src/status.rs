//! Each story's status as ralph shows it outside a run — `stories`,
//! `status` (text and `--json`), `graph` and the HTML report all read it
//! from here, so they cannot disagree. The words themselves are
//! `StoryState::word` (and `StoryState::label`, the four-column tags of `stories`).
//! Pure.

use std::collections::BTreeMap;

use crate::backlog::Story;
use crate::project::Project;
use crate::schedule::{Scheduler, StoryState};
use crate::state::{AttemptKind, State, Status};
use crate::stats::Figures;

/// A story's node as the state describes it (prd.json's `passes: true`
/// counts as done for a story ralph has no record of).
pub(crate) fn story_node(state: &State, story: &Story) -> StoryState {
    match state.status(&story.id) {
        Status::Done => StoryState::Done,
        Status::Failed => StoryState::Failed,
        Status::Running => StoryState::Running,
        Status::Landing => StoryState::Landing,
        Status::Review | Status::InPr => StoryState::Review,
        Status::Pending if story.prd_passes && state.record(&story.id).is_none() => {
            StoryState::Done
        }
        Status::Pending => StoryState::Pending,
    }
}

/// Each story's status as a run would see it now (the failed ones' dependents
/// blocked), in backlog order; `next()` is the story a sequential run starts.
pub(crate) fn view(project: &Project, state: &State) -> Scheduler {
    let stories = &project.backlog.stories;
    let nodes = stories.iter().map(|s| story_node(state, s)).collect();
    Scheduler::for_stories(&project.dag, stories, nodes, false, None)
}

/// One story's status and record: a row of the report's table, a node of
/// its DAG, one record of `status --json`'s `stories`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub(crate) struct StoryRow {
    pub(crate) id: String,
    pub(crate) title: String,
    /// `StoryState::word`.
    pub(crate) status: &'static str,
    pub(crate) estimation: Option<String>,
    /// Agent runs on record, and the same by kind.
    pub(crate) attempts: usize,
    #[serde(rename = "attempts_by_kind")]
    pub(crate) by_kind: BTreeMap<AttemptKind, usize>,
    /// Failed attempts counted against `loop.max_retries`; conflicts.
    pub(crate) failed_attempts: u32,
    pub(crate) conflicts: u32,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
    #[serde(rename = "duration_secs")]
    pub(crate) secs: f64,
    pub(crate) landed_commit: Option<String>,
    pub(crate) last_error: Option<String>,
    /// The agent of the latest attempt.
    pub(crate) agent: Option<String>,
    /// The model of the latest attempt, when ralph chose one (issue 25).
    pub(crate) model: Option<String>,
    /// The model of each attempt on record, oldest first (`null` where the
    /// CLI chose).
    pub(crate) models: Vec<Option<String>>,
    /// Some attempt's cost is unknown: `cost_usd` is what was known.
    pub(crate) cost_unknown: bool,
    /// The trust gates' last findings, when they held it, let it land with
    /// them (`warn`) or a person approved it (issue 26).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) gate: Option<crate::state::GateRecord>,
    /// The review gate's verdicts, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) reviews: Vec<String>,
    /// The cluster node (and worker slot) of the latest attempt: while
    /// one runs, its own once known (none before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) node: Option<String>,
    /// A running story's racing candidates: `{k, agent, model, state}`
    /// (best of N, issue 36).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) candidates: Vec<crate::state::CandidateRow>,
}

/// Every story of the backlog with its status and record; attempts by
/// kind from the run records (`lifetime`) where they cover the state's
/// history, else from the state.
pub(crate) fn story_rows(
    project: &Project,
    state: &State,
    lifetime: Option<&Figures>,
) -> Vec<StoryRow> {
    let sched = view(project, state);
    project
        .backlog
        .stories
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let rec = state.record(&s.id).cloned().unwrap_or_default();
            let mut by_kind: BTreeMap<AttemptKind, usize> =
                AttemptKind::ALL.iter().map(|k| (*k, 0)).collect();
            let seen = lifetime.and_then(|f| f.per_story.get(&s.id));
            let attempts = match seen {
                Some(f) if f.attempts >= rec.history.len() => {
                    by_kind.extend(f.by_kind.iter().map(|(k, n)| (*k, *n)));
                    f.attempts
                }
                _ => {
                    for h in &rec.history {
                        *by_kind.entry(h.kind()).or_default() += 1;
                    }
                    rec.history.len()
                }
            };
            StoryRow {
                id: s.id.clone(),
                title: s.title.clone(),
                status: sched.nodes[i].word(),
                estimation: s.estimation.clone(),
                attempts,
                by_kind,
                failed_attempts: rec.attempts,
                conflicts: rec.conflicts,
                tokens: crate::report::tokens(&rec.usage),
                cost_usd: rec.cost_usd,
                secs: rec.duration_secs,
                landed_commit: rec.landed_commit.clone(),
                last_error: rec.last_error.clone(),
                agent: rec.history.last().and_then(|h| h.agent.clone()),
                model: rec.history.last().and_then(|h| h.model.clone()),
                models: rec.history.iter().map(|h| h.model.clone()).collect(),
                cost_unknown: rec.history.iter().any(|h| h.cost_unknown),
                // A fix-up that restored what was found leaves nothing to show.
                gate: rec
                    .gate
                    .clone()
                    .filter(|g| g.decision != crate::state::GateDecision::Fixup),
                reviews: rec.reviews.clone(),
                candidates: match rec.status {
                    Status::Running | Status::Landing => rec.candidates.clone(),
                    _ => Vec::new(),
                },
                node: match rec.status {
                    Status::Running => rec.running_on.clone(),
                    _ => rec.history.last().and_then(|h| h.node.clone()),
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status vocabulary, every form of it: a change here changes what
    /// scripts read (`status --json`) or what Ralph v2's readers parse
    /// (`stories`), so it is made on purpose or not at all.
    #[test]
    fn the_status_vocabulary() {
        let table: String = StoryState::ALL
            .iter()
            .map(|n| format!("{n:?}: {:?}\n", n.word()))
            .collect();
        insta::assert_snapshot!(table, @r#"
        Done: "done"
        Running: "running"
        Landing: "landing"
        Review: "review"
        Failed: "failed"
        Blocked: "blocked"
        Pending: "pending"
        Excluded: "pending"
        "#);
    }

    /// `graph`'s text lines are coloured by their status tag, as
    /// `stories`' are (a pending story has nothing to say).
    #[test]
    fn every_status_tag_has_a_tone() {
        for n in StoryState::ALL {
            if matches!(n, StoryState::Pending | StoryState::Excluded) {
                continue;
            }
            let line = format!("[{}] 1.1 title", n.word());
            assert!(crate::ui::tag_tone(&line).is_some(), "{line}");
        }
    }

    #[test]
    fn prd_passes_is_done_only_without_a_record() {
        let story = Story {
            prd_passes: true,
            ..Story::bare("1.1", "")
        };
        let mut state = State::default();
        assert_eq!(story_node(&state, &story), StoryState::Done);
        state.start_attempt("1.1");
        assert_eq!(story_node(&state, &story), StoryState::Running);
    }
}
