//! Table tests of every policy of the transition: plain data in, actions
//! out, no processes, no git, no clock.

use std::time::{Duration, Instant};

use super::*;
use crate::agent::{Backend, FaultKind, ResultKind};
use crate::backlog::{Backlog, Story};
use crate::dag::Dag;
use crate::error::{EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_STORIES_FAILED};
use crate::run::model::Chain;
use crate::state::{AttemptKind, FixupCause, State, Status};

fn story(id: &str, deps: &[&str]) -> Story {
    Story {
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        ..Story::bare(id, format!("Story {id}"))
    }
}

/// A model over `stories` (ID, dependencies) in one batch section.
fn model_with(
    stories: &[(&str, &[&str])],
    jobs: usize,
    max_retries: u32,
    limit: Option<u64>,
) -> Model {
    let stories: Vec<Story> = stories.iter().map(|(id, deps)| story(id, deps)).collect();
    super::super::model::test_model(stories, jobs, max_retries, limit, t0())
}

/// Six stories that depend on nothing.
const INDEPENDENT: [(&str, &[&str]); 6] = [
    ("a", &[]),
    ("b", &[]),
    ("c", &[]),
    ("d", &[]),
    ("e", &[]),
    ("f", &[]),
];

pub(crate) fn t0() -> Now {
    Now {
        mono: Instant::now(),
        unix: 1_700_000_000,
    }
}

pub(crate) fn later(now: Now, secs: u64) -> Now {
    Now {
        mono: now.mono + Duration::from_secs(secs),
        unix: now.unix + secs as i64,
    }
}

pub(crate) fn finished(req: &AttemptRequest, verdict: Verdict) -> Event {
    let mut r = AttemptReport::empty(
        req,
        verdict,
        format!(".ralph/logs/x/attempt-{}.log", req.attempt),
    );
    r.duration = Duration::from_secs(3);
    Event::AttemptFinished(Box::new(r))
}

pub(crate) fn failed(reason: &str) -> Verdict {
    Verdict::Failed {
        reason: reason.into(),
        kind: ResultKind::Fail,
    }
}

pub(crate) fn starts(actions: &[Action]) -> Vec<AttemptRequest> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::StartAttempt(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

fn lands(actions: &[Action]) -> Vec<usize> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Land { idx, .. } => Some(*idx),
            _ => None,
        })
        .collect()
}

fn said(actions: &[Action]) -> Vec<Message> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Say(m) => Some(m.clone()),
            _ => None,
        })
        .collect()
}

/// The landing in progress ends with `result` (it must be story `idx`'s),
/// and the post hooks it asks for run and end.
fn land(m: &mut Model, idx: usize, result: LandResult, now: Now) -> Vec<Action> {
    assert_eq!(
        m.landing.first().map(|l| l.idx),
        Some(idx),
        "not the story landing"
    );
    let mut actions = handle(m, Event::LandingFinished(result), now);
    let hooks = post_hooks(&actions).len();
    for _ in 0..hooks {
        actions.extend(handle(m, Event::HooksDone, now));
    }
    actions
}

fn landed_as(idx: usize) -> LandResult {
    LandResult::Landed {
        commit: format!("{idx:040}"),
    }
}

/// Starts the run and returns the first attempts.
fn begin(m: &mut Model) -> Vec<AttemptRequest> {
    starts(&handle(m, Event::Start { reland: vec![] }, t0()))
}

fn validation_failed(attempt: u32) -> LandResult {
    LandResult::ValidationFailed {
        name: "tests".into(),
        cmd: "make test".into(),
        tail: "ok 1\nFAILED: 2 tests\n".into(),
        saved_ref: Some(format!("refs/ralph/attempts/a/{attempt}")),
        log_rel: format!(".ralph/logs/a/validation-{attempt}.log"),
    }
}

/// Finishes `req` with a session and lands it as a conflict: the next
/// request is its fix-up.
fn fixup_after_session(m: &mut Model, req: &AttemptRequest, session: &str) -> AttemptRequest {
    let mut r = AttemptReport::empty(req, Verdict::Done, String::new());
    r.agent = Some(req.agent.name());
    r.session_id = Some(session.into());
    handle(m, Event::AttemptFinished(Box::new(r)), t0());
    let conflict = LandResult::Conflict {
        paths: vec!["f".into()],
        saved_ref: Some(format!("refs/ralph/conflicts/x/{}", req.attempt)),
    };
    starts(&land(m, req.idx, conflict, t0())).remove(0)
}

fn fault(kind: FaultKind) -> Verdict {
    Verdict::Fault {
        reason: "could not prepare the worktree".into(),
        kind,
    }
}

/// Which of the running attempts are retries (attempt after a failure).
fn running_retries(m: &Model) -> usize {
    m.slots.iter().flatten().filter(|&&i| m.is_retry(i)).count()
}

fn post_hooks(actions: &[Action]) -> Vec<(String, u64, &'static str)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::PostHooks {
                id,
                iteration,
                result,
            } => Some((id.clone(), *iteration, *result)),
            _ => None,
        })
        .collect()
}

/// A model of `stories` (one batch section) from `state`, asked for
/// `only`; with `by_hand`, the run of `ralph decompose` that story.
fn model_of(stories: Vec<Story>, state: State, only: usize, by_hand: bool) -> Model {
    let backlog = Backlog::one_batch(stories.clone());
    let dag = Dag::build(&backlog).expect("a valid DAG");
    let mut policy = model_with(&[("a", &[])], 1, 3, None).policy;
    let mut state = state;
    if by_hand {
        let id = stories[only].id.clone();
        policy.split_by_hand = Some(super::super::model::SplitByHand {
            id: id.clone(),
            status: state.status(&id),
            note: state.note(&id).cloned(),
        });
        state.begin_decomposition(&id, "by hand".into());
    }
    Model::new(stories, &dag, state, policy, Some(only), 0, t0())
}

/// An attempt whose CLI gave up on its model API (issue 21, defect 5),
/// reported by the agent the request named.
fn api_down(req: &AttemptRequest, now_secs: u64) -> Event {
    let mut r = AttemptReport::empty(
        req,
        Verdict::Fault {
            reason: format!(
                "the model API failed: API Error: 500 Internal Server Error ({now_secs})"
            ),
            kind: FaultKind::Api,
        },
        "log".into(),
    );
    r.agent = Some(req.agent.name());
    Event::AttemptFinished(Box::new(r))
}

pub(crate) fn records(actions: &[Action]) -> Vec<Ev> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Record(ev) => Some(ev.clone()),
            _ => None,
        })
        .collect()
}

mod gates;
mod landing;
mod limits;
mod models;
mod outcome;
mod race;
mod run;
mod steer;
