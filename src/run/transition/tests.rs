//! Table tests of every policy of the transition: plain data in, actions
//! out, no processes, no git, no clock.

use std::time::{Duration, Instant};

use super::*;
use crate::agent::{Backend, FaultKind, ResultKind};
use crate::backlog::{Backlog, Section, Source, Story};
use crate::dag::Dag;
use crate::error::{EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_STORIES_FAILED};
use crate::state::{AttemptKind, FixupCause, State, Status};

fn story(id: &str, deps: &[&str]) -> Story {
    Story {
        id: id.into(),
        title: format!("Story {id}"),
        line: 0,
        section: 0,
        spec_path: None,
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        estimation: None,
        agent: None,
        allow_empty_done: false,
        prd_passes: false,
        prd_spec: None,
        priority: crate::backlog::files::DEFAULT_RANK,
        files: Vec::new(),
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

fn t0() -> Now {
    Now {
        mono: Instant::now(),
        unix: 1_700_000_000,
    }
}

fn later(now: Now, secs: u64) -> Now {
    Now {
        mono: now.mono + Duration::from_secs(secs),
        unix: now.unix + secs as i64,
    }
}

fn finished(req: &AttemptRequest, verdict: Verdict) -> Event {
    let mut r = AttemptReport::empty(
        req,
        verdict,
        format!(".ralph/logs/x/attempt-{}.log", req.attempt),
    );
    r.duration = Duration::from_secs(3);
    Event::AttemptFinished(Box::new(r))
}

fn failed(reason: &str) -> Verdict {
    Verdict::Failed {
        reason: reason.into(),
        kind: ResultKind::Fail,
    }
}

fn starts(actions: &[Action]) -> Vec<AttemptRequest> {
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
    assert_eq!(m.landing.map(|l| l.idx), Some(idx), "not the story landing");
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

#[test]
fn a_started_attempt_is_saved_before_it_is_started() {
    let mut m = model_with(&[("1.1", &[])], 1, 3, None);
    let actions = handle(&mut m, Event::Start { reland: vec![] }, t0());
    let save = actions.iter().position(|a| *a == Action::Save).unwrap();
    let start = actions
        .iter()
        .position(|a| matches!(a, Action::StartAttempt(_)))
        .unwrap();
    assert!(save < start, "{actions:?}");
    assert_eq!(m.state.status("1.1"), Status::Running);
    assert_eq!(m.node(0), Node::Running);
}

#[test]
fn a_failure_is_retried_with_its_reason_then_given_up() {
    let mut m = model_with(&[("1.1", &[])], 1, 2, None);
    let first = begin(&mut m);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].note, None);
    assert_eq!(first[0].kind, AttemptKind::First);
    let a = handle(&mut m, finished(&first[0], failed("tests broke")), t0());
    let retry = starts(&a);
    assert_eq!(retry.len(), 1);
    assert_eq!(retry[0].attempt, 2);
    assert_eq!(retry[0].kind, AttemptKind::Redo);
    assert!(retry[0].note.as_ref().unwrap().text.contains("tests broke"));
    assert!(a.iter().any(
        |x| matches!(x, Action::Progress(p) if p.starts_with("[FAIL] Story 1.1 - tests broke"))
    ));
    let a = handle(&mut m, finished(&retry[0], failed("still broken")), t0());
    assert!(starts(&a).is_empty());
    assert!(said(&a)
        .iter()
        .any(|s| matches!(s, Message::FailedForGood { id, .. } if id == "1.1")));
    assert_eq!(m.state.status("1.1"), Status::Failed);
    assert!(is_over(&m));
    assert_eq!(finish(&m, 1.0).2, EXIT_STORIES_FAILED);
}

#[test]
fn work_ralph_committed_for_a_done_agent_is_said_before_it_lands() {
    let mut m = model_with(&[("1.1", &[])], 1, 2, None);
    let first = begin(&mut m);
    let mut r = AttemptReport::empty(&first[0], Verdict::Done, String::new());
    r.committed_for_agent = Some((2, "ab".repeat(20)));
    let a = handle(&mut m, Event::AttemptFinished(Box::new(r)), t0());
    let lines = said(&a);
    let note = lines
        .iter()
        .position(|s| matches!(s, Message::CommittedForAgent { id, files: 2, .. } if id == "1.1"));
    let landing = lines
        .iter()
        .position(|s| matches!(s, Message::Finished { .. }));
    assert!(note.is_some() && note < landing, "{lines:?}");
    assert_eq!(lands(&a), vec![0]);
}

#[test]
fn a_story_that_fails_for_good_blocks_its_dependents_only() {
    let mut m = model_with(
        &[("a", &[]), ("b", &["a"]), ("c", &["b"]), ("d", &[])],
        2,
        1,
        None,
    );
    let first = begin(&mut m);
    assert_eq!(first.iter().map(|r| r.idx).collect::<Vec<_>>(), vec![0, 3]);
    let a = handle(&mut m, finished(&first[0], failed("no")), t0());
    let blocked = said(&a)
        .into_iter()
        .find_map(|s| match s {
            Message::FailedForGood { blocked, .. } => Some(blocked),
            _ => None,
        })
        .unwrap();
    assert_eq!(blocked, vec!["b", "c"]);
    assert_eq!(m.node(1), Node::Blocked);
    assert_eq!(m.node(3), Node::Running);
}

#[test]
fn a_conflict_is_fixed_up_once_then_redone_until_the_limit() {
    let mut m = model_with(&[("1.1", &[])], 1, 1, None);
    let mut req = begin(&mut m).remove(0);
    let limit = m.policy.max_conflicts();
    for n in 1..=limit + 1 {
        let a = handle(&mut m, finished(&req, Verdict::Done), t0());
        assert_eq!(lands(&a), vec![0]);
        assert_eq!(m.state.status("1.1"), Status::Landing);
        let was = req.kind;
        let conflict = LandResult::Conflict {
            paths: vec!["FEATURES.md".into()],
            saved_ref: Some(format!("refs/ralph/conflicts/1.1/{}", req.attempt)),
        };
        let a = land(&mut m, 0, conflict, t0());
        if n <= limit {
            req = starts(&a).remove(0);
            let note = req.note.clone().unwrap();
            if was == AttemptKind::Fixup {
                // A fix-up whose own result conflicts is redone from scratch.
                assert_eq!(req.kind, AttemptKind::Redo);
                assert!(note.fixup.is_none() && note.redo);
                assert!(
                    note.text.contains("FEATURES.md")
                        && note.text.contains("refs/ralph/conflicts/1.1/"),
                    "{note:?}"
                );
            } else {
                assert_eq!(req.kind, AttemptKind::Fixup);
                let f = note.fixup.unwrap();
                assert_eq!(
                    f.cause,
                    FixupCause::Conflict {
                        paths: vec!["FEATURES.md".into()]
                    }
                );
                assert_eq!(
                    f.work,
                    format!("refs/ralph/conflicts/1.1/{}", req.attempt - 1)
                );
                assert_eq!(f.attempt, req.attempt - 1);
            }
        } else {
            assert!(starts(&a).is_empty());
            assert!(said(&a)
                .iter()
                .any(|s| matches!(s, Message::ConflictGiveUp { .. })));
            assert_eq!(m.state.status("1.1"), Status::Failed);
        }
    }
    // Conflicts are not failed attempts: the retry budget is untouched.
    assert_eq!(m.state.record("1.1").unwrap().attempts, 0);
    let kinds: Vec<AttemptKind> = m
        .state
        .record("1.1")
        .unwrap()
        .history
        .iter()
        .map(|h| h.kind())
        .collect();
    assert_eq!(
        &kinds[..3],
        [AttemptKind::First, AttemptKind::Fixup, AttemptKind::Redo]
    );
}

#[test]
fn a_conflict_whose_work_was_not_kept_is_redone() {
    let mut m = model_with(&[("1.1", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    handle(&mut m, finished(&req, Verdict::Done), t0());
    let conflict = LandResult::Conflict {
        paths: vec!["a".into()],
        saved_ref: None,
    };
    let next = starts(&land(&mut m, 0, conflict, t0())).remove(0);
    assert_eq!(next.kind, AttemptKind::Redo);
    assert!(next.note.unwrap().text.contains("ralph/story-1.1"));
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

#[test]
fn a_validation_failure_is_fixed_up_with_its_output_and_a_failed_fixup_is_redone() {
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    handle(&mut m, finished(&req, Verdict::Done), t0());
    let fix = starts(&land(&mut m, 0, validation_failed(1), t0())).remove(0);
    // The validation failure counts; its fix-up gets the command and output.
    assert_eq!(m.state.record("a").unwrap().attempts, 1);
    assert_eq!(fix.kind, AttemptKind::Fixup);
    let f = fix.note.clone().unwrap().fixup.unwrap();
    assert_eq!(f.work, "refs/ralph/attempts/a/1");
    assert_eq!(
        f.cause,
        FixupCause::Validation {
            name: "tests".into(),
            cmd: "make test".into(),
            tail: "ok 1\nFAILED: 2 tests\n".into(),
            log: ".ralph/logs/a/validation-1.log".into(),
        }
    );
    // The note is in the state: a restart would find it.
    assert_eq!(m.state.note("a"), fix.note.as_ref());
    // The fix-up fails: a counted failure, and a fresh redo told both.
    let a = handle(&mut m, finished(&fix, failed("could not fix it")), t0());
    assert_eq!(m.state.record("a").unwrap().attempts, 2);
    let redo = starts(&a).remove(0);
    assert_eq!(redo.kind, AttemptKind::Redo);
    let note = redo.note.unwrap();
    assert!(note.fixup.is_none());
    assert!(
        note.text.contains("FAILED: 2 tests") && note.text.contains("could not fix it"),
        "{note:?}"
    );
}

#[test]
fn a_fixup_whose_result_fails_validation_again_is_redone() {
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    handle(&mut m, finished(&req, Verdict::Done), t0());
    let fix = starts(&land(&mut m, 0, validation_failed(1), t0())).remove(0);
    handle(&mut m, finished(&fix, Verdict::Done), t0());
    let redo = starts(&land(&mut m, 0, validation_failed(2), t0())).remove(0);
    assert_eq!(redo.kind, AttemptKind::Redo);
    assert!(redo
        .note
        .unwrap()
        .text
        .contains("A fix-up of that work failed too"));
    assert_eq!(m.state.record("a").unwrap().attempts, 2);
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

#[test]
fn a_fixup_resumes_the_session_of_the_work_it_fixes_in_its_slot() {
    let mut m = model_with(&[("a", &[]), ("b", &[])], 2, 3, None);
    let first = begin(&mut m);
    assert_eq!(first[1].slot, 1);
    let fix = fixup_after_session(&mut m, &first[1], "sess-b");
    // Slot 0 is busy with a; b's own slot 1 is free again, and chosen.
    assert_eq!((fix.slot, fix.resume.as_deref()), (1, Some("sess-b")));
    let rec = m.state.attempt("b", 1).unwrap();
    assert_eq!(
        (rec.session_id.as_deref(), rec.slot, rec.kind()),
        (Some("sess-b"), Some(1), AttemptKind::First)
    );

    // Turned off, or run by another agent: the fix-up starts a new session.
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    m.policy.resume_session = false;
    let req = begin(&mut m).remove(0);
    assert_eq!(fixup_after_session(&mut m, &req, "s").resume, None);
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    let mut req = begin(&mut m).remove(0);
    req.agent = Backend::Gemini;
    let fix = fixup_after_session(&mut m, &req, "s");
    assert_eq!((fix.kind, fix.resume), (AttemptKind::Fixup, None));
}

#[test]
fn a_session_that_cannot_be_resumed_is_not_charged_and_not_resumed_again() {
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    let fix = fixup_after_session(&mut m, &req, "gone");
    assert_eq!(fix.resume.as_deref(), Some("gone"));
    let mut r = AttemptReport::empty(&fix, failed("No conversation found"), String::new());
    r.resumed = true;
    let again = starts(&handle(&mut m, Event::AttemptFinished(Box::new(r)), t0())).remove(0);
    assert_eq!(m.state.record("a").unwrap().attempts, 0);
    assert_eq!((again.kind, again.resume), (AttemptKind::Fixup, None));
}

#[test]
fn an_interrupted_attempts_kept_work_reaches_the_next_prompt() {
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    let fix = fixup_after_session(&mut m, &req, "s");
    let mut r = AttemptReport::empty(&fix, Verdict::Interrupted, String::new());
    r.saved_ref = Some("refs/ralph/attempts/a/2".into());
    r.kept = vec!["refs/ralph/attempts/a/2-uncommitted".into()];
    handle(&mut m, Event::AttemptFinished(Box::new(r)), t0());
    // Still a fix-up (nothing was charged), and told where the work is.
    assert_eq!(m.state.next_kind("a"), AttemptKind::Fixup);
    let text = &m.state.note("a").unwrap().text;
    assert!(
        text.contains("refs/ralph/attempts/a/2,") && text.contains("a/2-uncommitted"),
        "{text}"
    );
}

#[test]
fn waste_counts_runs_by_kind_per_landed_story() {
    let mut m = model_with(&[("a", &[]), ("b", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    let fix = fixup_after_session(&mut m, &req, "s");
    let mut r = AttemptReport::empty(&fix, Verdict::Done, String::new());
    r.usage.output_tokens = 50;
    let a = handle(&mut m, Event::AttemptFinished(Box::new(r)), t0());
    assert_eq!(lands(&a), vec![0]);
    let b = starts(&land(&mut m, 0, landed_as(0), t0())).remove(0);
    let a = handle(&mut m, finished(&b, failed("x")), t0());
    let b2 = starts(&a).remove(0);
    handle(&mut m, finished(&b2, Verdict::Done), t0());
    land(&mut m, 1, landed_as(1), t0());
    let w = m.state.waste();
    assert_eq!(w.landed, 2);
    assert_eq!(
        (w.first.runs, w.fixup.runs, w.redo.runs, w.failed.runs),
        (2, 1, 1, 1)
    );
    assert_eq!(w.fixup.tokens, 50);
    assert_eq!(w.per_landed().unwrap().0, 2.0);
}

#[test]
fn a_usage_limit_with_a_reset_time_pauses_until_just_after_it() {
    let mut m = model_with(&[("1.1", &[]), ("1.2", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    let now = t0();
    let limited = Verdict::RateLimited {
        resets_at: Some((now.unix + 100) as u64),
    };
    let a = handle(&mut m, finished(&req, limited), now);
    assert!(starts(&a).is_empty());
    assert_eq!(m.wake_at(now), Some(now.mono + Duration::from_secs(102)));
    // Not counted, and the run waits instead of ending.
    assert_eq!(m.state.record("1.1").unwrap().attempts, 0);
    assert_eq!(m.state.status("1.1"), Status::Pending);
    assert!(!is_over(&m));
    assert!(starts(&handle(&mut m, Event::Timer, later(now, 50))).is_empty());
    let a = handle(&mut m, Event::Timer, later(now, 102));
    assert_eq!(
        starts(&a).iter().map(|r| r.idx).collect::<Vec<_>>(),
        vec![0]
    );
}

#[test]
fn a_usage_limit_without_a_reset_time_backs_off_doubling() {
    let mut m = model_with(&[("1.1", &[])], 1, 3, None);
    let mut now = t0();
    let mut req = begin(&mut m).remove(0);
    for wait in [60, 120, 240] {
        handle(
            &mut m,
            finished(&req, Verdict::RateLimited { resets_at: None }),
            now,
        );
        assert_eq!(m.wake_at(now), Some(now.mono + Duration::from_secs(wait)));
        now = later(now, wait);
        req = starts(&handle(&mut m, Event::Timer, now)).remove(0);
    }
}

#[test]
fn one_job_waits_for_the_previous_landing() {
    let mut m = model_with(&[("1.1", &[]), ("1.2", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    let a = handle(&mut m, finished(&req, Verdict::Done), t0());
    assert_eq!(lands(&a), vec![0]);
    assert!(
        starts(&a).is_empty(),
        "the next story waits for the tip holding 1.1"
    );
    let a = land(&mut m, 0, landed_as(0), t0());
    assert_eq!(
        starts(&a).iter().map(|r| r.idx).collect::<Vec<_>>(),
        vec![1]
    );
    assert_eq!(
        m.state.record("1.1").unwrap().landed_commit.as_deref(),
        Some(format!("{:040}", 0).as_str())
    );
}

#[test]
fn with_more_jobs_a_dependent_waits_for_its_dependencys_landing_only() {
    let mut m = model_with(
        &[("a", &[]), ("b", &["a"]), ("c", &[]), ("d", &[])],
        2,
        3,
        None,
    );
    let first = begin(&mut m);
    assert_eq!(first.len(), 2);
    let a = handle(&mut m, finished(&first[0], Verdict::Done), t0());
    // a's slot is free; b is not ready until a lands.
    assert!(starts(&a).iter().all(|r| r.idx != 1));
    let a = land(&mut m, 0, landed_as(0), t0());
    assert!(starts(&a).iter().any(|r| r.idx == 1), "{a:?}");
}

#[test]
fn the_merge_queue_lands_one_story_at_a_time_in_arrival_order() {
    let mut m = model_with(&[("a", &[]), ("b", &[])], 2, 3, None);
    let first = begin(&mut m);
    let a = handle(&mut m, finished(&first[1], Verdict::Done), t0());
    assert_eq!(lands(&a), vec![1]);
    let a = handle(&mut m, finished(&first[0], Verdict::Tentative), t0());
    assert!(lands(&a).is_empty());
    assert_eq!(m.state.status("a"), Status::Landing);
    let a = land(&mut m, 1, landed_as(1), t0());
    assert_eq!(lands(&a), vec![0]);
    let a = land(&mut m, 0, landed_as(0), t0());
    assert!(a.iter().any(
        |x| matches!(x, Action::Progress(p) if p.contains("Story a") && p.contains("tentative"))
    ));
    assert!(is_over(&m));
    let (summary, error, code) = finish(&m, 1.0);
    assert_eq!(
        (summary.done, summary.all_complete, error, code),
        (2, true, None, EXIT_OK)
    );
}

#[test]
fn the_iteration_limit_stops_new_attempts_and_says_so() {
    let mut m = model_with(&[("a", &[]), ("b", &[]), ("c", &[])], 3, 3, Some(2));
    let first = begin(&mut m);
    assert_eq!(first.len(), 2);
    let a = handle(&mut m, finished(&first[0], failed("x")), t0());
    assert!(starts(&a).is_empty());
    handle(&mut m, finished(&first[1], Verdict::Done), t0());
    land(&mut m, 1, landed_as(1), t0());
    assert!(is_over(&m));
    let (summary, _, code) = finish(&m, 1.0);
    assert_eq!((summary.limit_reached, code), (Some(2), EXIT_OK));
}

#[test]
fn ctrl_c_once_stops_gracefully_and_twice_kills() {
    let mut m = model_with(&[("a", &[]), ("b", &[]), ("c", &[])], 2, 3, None);
    let first = begin(&mut m);
    let a = handle(&mut m, Event::Signal(OsSignal::Interrupt), t0());
    assert!(a.contains(&Action::Control(Control::Stop)));
    let a = handle(&mut m, Event::Signal(OsSignal::Interrupt), t0());
    assert!(a.contains(&Action::Control(Control::Kill)));
    let a = handle(&mut m, finished(&first[0], Verdict::Interrupted), t0());
    assert!(starts(&a).is_empty(), "nothing starts once stopping");
    assert_eq!(m.state.status("a"), Status::Pending);
    assert_eq!(m.state.record("a").unwrap().attempts, 0);
    assert!(!is_over(&m));
    handle(&mut m, finished(&first[1], Verdict::Interrupted), t0());
    assert!(is_over(&m));
    assert_eq!(finish(&m, 1.0).2, EXIT_INTERRUPTED);
}

#[test]
fn ctrl_c_leaves_queued_landings_for_the_next_run() {
    let mut m = model_with(&[("a", &[]), ("b", &[])], 2, 3, None);
    let first = begin(&mut m);
    handle(&mut m, finished(&first[0], Verdict::Done), t0());
    handle(&mut m, finished(&first[1], Verdict::Done), t0());
    let a = handle(&mut m, Event::Signal(OsSignal::Terminate), t0());
    assert!(said(&a).contains(&Message::LandingStopped { id: "b".into() }));
    // b stays `landing` on disk, so the next run lands it without the agent.
    assert_eq!(m.state.status("b"), Status::Landing);
    let a = land(&mut m, 0, LandResult::Interrupted, t0());
    assert!(lands(&a).is_empty());
    assert_eq!(m.state.status("a"), Status::Landing);
    assert!(is_over(&m));
}

#[test]
fn a_state_that_cannot_be_saved_stops_the_run_as_ralphs_own_failure() {
    let mut m = model_with(&[("a", &[]), ("b", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    let a = handle(
        &mut m,
        Event::SaveFailed("No space left on device".into()),
        t0(),
    );
    assert!(a.contains(&Action::Control(Control::Stop)));
    let a = handle(&mut m, finished(&req, Verdict::Interrupted), t0());
    assert!(starts(&a).is_empty());
    let (_, error, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_INTERNAL);
    assert!(error.unwrap().contains("No space left"));
}

#[test]
fn a_blocked_checkout_needs_a_person_and_keeps_the_work() {
    let mut m = model_with(&[("a", &[]), ("b", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    handle(&mut m, finished(&req, Verdict::Done), t0());
    let blocked = LandResult::CheckoutBlocked {
        paths: vec!["README.md".into()],
    };
    let a = land(&mut m, 0, blocked, t0());
    assert!(starts(&a).is_empty());
    assert!(is_over(&m));
    let (_, error, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_STORIES_FAILED);
    assert!(error.unwrap().contains("README.md"));
    assert_eq!(
        m.state.status("a"),
        Status::Landing,
        "landed by the next run"
    );
}

/// A merge commit the signing program could not sign (issue 21): the
/// user's setup, not the story; it stays `landing`, uncharged, and the run
/// stops with the config keys to check.
#[test]
fn an_unsigned_merge_stops_the_run_and_charges_nothing() {
    let mut m = model_with(&[("a", &[]), ("b", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    handle(&mut m, finished(&req, Verdict::Done), t0());
    let unsigned = LandResult::Unsigned {
        message: "signing with ssh-keygen (gpg.format ssh) failed: no such key".into(),
    };
    let a = land(&mut m, 0, unsigned, t0());
    assert!(starts(&a).is_empty(), "b does not start");
    assert!(is_over(&m));
    let (_, error, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_STORIES_FAILED);
    let error = error.unwrap();
    assert!(
        error.contains("no such key") && error.contains("user.signingkey"),
        "{error}"
    );
    assert_eq!(m.state.status("a"), Status::Landing);
    assert_eq!(m.state.record("a").unwrap().attempts, 0);
}

#[test]
fn a_root_refusal_is_not_retried() {
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    let a = handle(&mut m, finished(&req, Verdict::RootRefusal), t0());
    assert!(starts(&a).is_empty());
    let (_, error, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_STORIES_FAILED);
    assert!(error.unwrap().contains("IS_SANDBOX=1"));
}

#[test]
fn a_validation_failure_counts_and_names_its_log() {
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    handle(&mut m, finished(&req, Verdict::Done), t0());
    let fail = LandResult::ValidationFailed {
        name: "tests".into(),
        cmd: "make test".into(),
        tail: "ok 1\nFAILED: 2 tests\n\n".into(),
        saved_ref: Some("refs/ralph/attempts/a/1".into()),
        log_rel: ".ralph/logs/a/validation-1.log".into(),
    };
    let a = land(&mut m, 0, fail, t0());
    let failed = said(&a)
        .into_iter()
        .find(|s| matches!(s, Message::Failed { .. }))
        .unwrap();
    let line = crate::report::render(&failed);
    assert!(
        line.contains("validation 'tests' failed on the merged tree: FAILED: 2 tests"),
        "{line}"
    );
    assert!(
        line.contains("(log: .ralph/logs/a/validation-1.log)"),
        "{line}"
    );
    assert_eq!(starts(&a).len(), 1);
}

#[test]
fn finished_work_found_at_startup_goes_straight_to_landing() {
    let mut m = model_with(&[("a", &[]), ("b", &["a"])], 1, 3, None);
    let a = handle(&mut m, Event::Start { reland: vec![0] }, t0());
    assert_eq!(lands(&a), vec![0]);
    assert!(starts(&a).is_empty());
    let a = land(&mut m, 0, landed_as(0), t0());
    assert_eq!(
        starts(&a).iter().map(|r| r.idx).collect::<Vec<_>>(),
        vec![1]
    );
}

#[test]
fn state_and_scheduler_never_drift_over_a_long_mixed_run() {
    let ids: Vec<String> = (0..12).map(|i| format!("s{i}")).collect();
    let deps: Vec<(&str, Vec<&str>)> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            (
                id.as_str(),
                if i % 3 == 2 {
                    vec![ids[i - 1].as_str()]
                } else {
                    vec![]
                },
            )
        })
        .collect();
    let spec: Vec<(&str, &[&str])> = deps.iter().map(|(id, d)| (*id, d.as_slice())).collect();
    let mut m = model_with(&spec, 3, 2, None);
    let mut running = begin(&mut m);
    let mut step = 0u64;
    let mut now = t0();
    while !is_over(&m) {
        step += 1;
        assert!(step < 500, "the run does not converge");
        let a = if let Some(landing) = m.landing {
            let result = if step.is_multiple_of(4) {
                LandResult::Conflict {
                    paths: vec!["f".into()],
                    saved_ref: None,
                }
            } else {
                LandResult::Landed {
                    commit: "c".repeat(40),
                }
            };
            land(&mut m, landing.idx, result, now)
        } else if let Some(req) = running.pop() {
            let verdict = match step % 5 {
                0 => failed("flaky"),
                1 => Verdict::RateLimited { resets_at: None },
                _ => Verdict::Done,
            };
            handle(&mut m, finished(&req, verdict), now)
        } else {
            now = later(now, 3600);
            handle(&mut m, Event::Timer, now)
        };
        running.extend(starts(&a));
        for i in 0..m.stories.len() {
            assert!(m.in_step(i), "{} drifted at step {step}", m.id(i));
        }
    }
}

fn fault(kind: FaultKind) -> Verdict {
    Verdict::Fault {
        reason: "could not prepare the worktree".into(),
        kind,
    }
}

#[test]
fn a_transient_fault_is_not_counted_and_waits_longer_each_time() {
    let mut m = model_with(&[("a", &[])], 1, 2, None);
    let mut now = t0();
    let mut req = begin(&mut m).remove(0);
    for wait in [5, 10, 20, 40] {
        let a = handle(&mut m, finished(&req, fault(FaultKind::Transient)), now);
        assert!(starts(&a).is_empty());
        assert_eq!(m.pause_until, Some(now.mono + Duration::from_secs(wait)));
        assert_eq!(m.state.record("a").unwrap().attempts, 0, "not counted");
        now = later(now, wait);
        req = starts(&handle(&mut m, Event::Timer, now)).remove(0);
    }
    // The fifth in a row asks for a person instead of waiting forever.
    handle(&mut m, finished(&req, fault(FaultKind::Transient)), now);
    assert!(is_over(&m));
    assert_eq!(finish(&m, 1.0).2, EXIT_STORIES_FAILED);
    assert_eq!(m.state.status("a"), Status::Pending);
}

#[test]
fn a_fault_that_needs_a_person_starts_nothing_new_and_lets_running_work_land() {
    let mut m = model_with(&[("a", &[]), ("b", &[]), ("c", &[])], 2, 2, None);
    let first = begin(&mut m);
    let a = handle(
        &mut m,
        finished(&first[0], fault(FaultKind::NeedsPerson)),
        t0(),
    );
    assert!(
        !a.contains(&Action::Control(Control::Stop)),
        "b's work is still good"
    );
    assert!(starts(&a).is_empty(), "c must not start");
    let a = handle(&mut m, finished(&first[1], Verdict::Done), t0());
    assert_eq!(lands(&a), vec![1]);
    land(&mut m, 1, landed_as(1), t0());
    assert!(is_over(&m));
    let (_, error, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_STORIES_FAILED);
    assert!(error.unwrap().contains("could not prepare"));
    assert_eq!(m.state.record("a").unwrap().attempts, 0);
    assert_eq!(m.state.status("a"), Status::Pending);
    assert_eq!(m.state.status("b"), Status::Done);
}

#[test]
fn a_fault_that_makes_running_work_useless_stops_it_without_counting() {
    let mut m = model_with(&[("a", &[]), ("b", &[])], 2, 2, None);
    let first = begin(&mut m);
    let a = handle(&mut m, finished(&first[0], fault(FaultKind::StopNow)), t0());
    assert!(a.contains(&Action::Control(Control::Stop)));
    assert!(starts(&a).is_empty());
    handle(&mut m, finished(&first[1], Verdict::Interrupted), t0());
    assert!(is_over(&m));
    let (_, error, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_STORIES_FAILED);
    assert!(error.unwrap().contains("could not prepare"));
    for id in ["a", "b"] {
        assert_eq!(m.state.record(id).unwrap().attempts, 0);
        assert_eq!(m.state.status(id), Status::Pending);
    }
}

#[test]
fn a_landing_that_fails_in_git_charges_nobody_and_keeps_the_work_landing() {
    let mut m = model_with(&[("a", &[]), ("b", &[])], 1, 2, None);
    let req = begin(&mut m).remove(0);
    handle(&mut m, finished(&req, Verdict::Done), t0());
    let a = land(
        &mut m,
        0,
        LandResult::Error("No space left on device".into()),
        t0(),
    );
    assert!(starts(&a).is_empty());
    assert!(is_over(&m));
    assert_eq!(
        m.state.status("a"),
        Status::Landing,
        "the next run lands it"
    );
    assert_eq!(m.state.record("a").unwrap().attempts, 0);
    let (_, error, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_INTERNAL);
    assert!(error.unwrap().contains("No space left"));
}

#[test]
fn a_landing_that_loses_the_race_waits_its_turn_without_counting() {
    let mut m = model_with(&[("a", &[]), ("b", &[])], 2, 2, None);
    let first = begin(&mut m);
    handle(&mut m, finished(&first[0], Verdict::Done), t0());
    handle(&mut m, finished(&first[1], Verdict::Done), t0());
    // a lost every round to a moving target: b gets the queue, a waits behind it.
    let a = land(&mut m, 0, LandResult::Raced, t0());
    assert_eq!(lands(&a), vec![1]);
    assert_eq!(m.state.status("a"), Status::Landing);
    let a = land(&mut m, 1, landed_as(1), t0());
    assert_eq!(lands(&a), vec![0]);
    for _ in 2..Policy::MAX_RACES {
        let a = land(&mut m, 0, LandResult::Raced, t0());
        assert_eq!(lands(&a), vec![0]);
    }
    assert_eq!(m.state.record("a").unwrap().attempts, 0, "never counted");
    // A target that never holds still needs a person; the work stays landing.
    land(&mut m, 0, LandResult::Raced, t0());
    assert!(is_over(&m));
    let (_, error, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_STORIES_FAILED);
    assert!(error.unwrap().contains("kept moving"));
    assert_eq!(m.state.status("a"), Status::Landing);
}

#[test]
fn a_spent_budget_starts_nothing_new_but_lets_running_work_land() {
    let mut m = model_with(&[("a", &[]), ("b", &[]), ("c", &[])], 2, 3, None);
    m.policy.budget.run_usd = Some(0.5);
    let first = begin(&mut m);
    assert_eq!(first.len(), 2);
    let mut report = AttemptReport::empty(&first[0], Verdict::Done, "log".into());
    report.cost_usd = 0.6;
    let a = handle(&mut m, Event::AttemptFinished(Box::new(report)), t0());
    assert!(starts(&a).is_empty(), "c must not start");
    assert_eq!(lands(&a), vec![0], "finished work still lands");
    land(&mut m, 0, landed_as(0), t0());
    let a = handle(&mut m, finished(&first[1], Verdict::Done), t0());
    assert!(starts(&a).is_empty());
    land(&mut m, 1, landed_as(1), t0());
    assert!(is_over(&m));
    let (summary, error, code) = finish(&m, 1.0);
    assert_eq!((summary.done, code), (2, EXIT_STORIES_FAILED));
    assert!(error.unwrap().contains("budget.max_cost_usd"));
}

#[test]
fn a_usage_limit_resetting_past_the_max_wait_is_not_waited_for() {
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    let now = t0();
    let far = Verdict::RateLimited {
        resets_at: Some((now.unix + 7 * 3600) as u64),
    };
    handle(&mut m, finished(&req, far), now);
    assert!(m.pause_until.is_none());
    assert!(is_over(&m));
    let (_, error, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_STORIES_FAILED);
    assert!(error.unwrap().contains("limits.max_wait_hours"));
    assert_eq!(m.state.record("a").unwrap().attempts, 0);
}

#[test]
fn a_usage_limit_pause_is_kept_in_the_state_and_honoured_by_the_next_run() {
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    let now = t0();
    let soon = Verdict::RateLimited {
        resets_at: Some((now.unix + 600) as u64),
    };
    let mut r = AttemptReport::empty(&req, soon, "log".into());
    r.agent = Some("claude");
    handle(&mut m, Event::AttemptFinished(Box::new(r)), now);
    assert_eq!(m.state.paused_until.get("claude"), Some(&(now.unix + 602)));
    // A new run from that state starts paused.
    let stories = m.stories.clone();
    let backlog = Backlog {
        source: Source::StoriesTxt,
        stories: stories.clone(),
        sections: vec![Section {
            label: Some("1".into()),
            chain: false,
        }],
        skipped: vec![],
    };
    let dag = Dag::build(&backlog).unwrap();
    let later_now = later(now, 60);
    let mut again = Model::new(
        stories,
        &dag,
        m.state.clone(),
        m.policy.clone(),
        None,
        0,
        later_now,
    );
    assert_eq!(
        again.wake_at(later_now),
        Some(later_now.mono + Duration::from_secs(542))
    );
    let a = handle(&mut again, Event::Start { reland: vec![] }, later_now);
    assert!(starts(&a).is_empty());
    assert!(said(&a)
        .iter()
        .any(|s| matches!(s, Message::Paused { agent, .. } if agent == "claude")));
    let a = handle(&mut again, Event::Timer, later(now, 602));
    assert_eq!(starts(&a).len(), 1);
    assert!(again.state.paused_until.is_empty());
}

#[test]
fn the_same_failure_across_stories_trips_the_breaker_and_charges_nobody() {
    let mut m = model_with(
        &[("a", &[]), ("b", &["a"]), ("c", &[]), ("d", &[])],
        2,
        1,
        None,
    );
    let first = begin(&mut m);
    let bad = || failed("Exit code 1: unknown model 'gpt-9'\nmore detail");
    // a fails for good (max_retries 1) and blocks b; c fails too.
    let a = handle(&mut m, finished(&first[0], bad()), t0());
    assert_eq!(m.node(1), Node::Blocked);
    let next = starts(&a);
    handle(&mut m, finished(&first[1], bad()), t0());
    assert!(!is_over(&m));
    // The third in a row, over more than one story, trips it.
    let a = handle(&mut m, finished(&next[0], bad()), t0());
    assert!(a.contains(&Action::Control(Control::Stop)));
    for id in ["a", "b", "c", "d"] {
        assert_eq!(m.state.status(id), Status::Pending, "{id}");
        assert_eq!(m.state.record(id).map_or(0, |r| r.attempts), 0, "{id}");
    }
    assert_eq!(m.node(1), Node::Pending, "b is no longer blocked");
    let (_, error, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_STORIES_FAILED);
    assert!(error.unwrap().contains("unknown model 'gpt-9'"));
}

#[test]
fn different_failures_or_one_story_do_not_trip_the_breaker() {
    let mut m = model_with(&[("a", &[])], 1, 5, None);
    let mut req = begin(&mut m).remove(0);
    for _ in 0..3 {
        req = starts(&handle(&mut m, finished(&req, failed("same")), t0())).remove(0);
    }
    assert!(
        m.fatal.is_none(),
        "one story failing is the story's business"
    );
    let mut m = model_with(&[("a", &[]), ("b", &[]), ("c", &[])], 3, 5, None);
    let first = begin(&mut m);
    for (i, req) in first.iter().enumerate() {
        handle(&mut m, finished(req, failed(&format!("cause {i}"))), t0());
    }
    assert!(m.fatal.is_none());
}

#[test]
fn a_limit_warning_runs_one_job_fewer_until_the_window_resets() {
    let stories = INDEPENDENT;
    let mut m = model_with(&stories, 3, 3, None);
    let now = t0();
    let first = begin(&mut m);
    assert_eq!(first.len(), 3);
    let mut r = AttemptReport::empty(&first[0], Verdict::Done, "log".into());
    r.limit_warning = Some(Some((now.unix + 600) as u64));
    let a = handle(&mut m, Event::AttemptFinished(Box::new(r)), now);
    assert!(starts(&a).is_empty(), "two still run: the limit allows two");
    assert!(said(&a)
        .iter()
        .any(|s| matches!(s, Message::LimitNear { jobs: 2, .. })));
    let a = handle(&mut m, finished(&first[1], Verdict::Done), now);
    assert_eq!(starts(&a).len(), 1, "back to two running");
    // After the window, three again.
    let a = handle(&mut m, finished(&first[2], Verdict::Done), later(now, 601));
    assert_eq!(starts(&a).len(), 2);
}

/// Which of the running attempts are retries (attempt after a failure).
fn running_retries(m: &Model) -> usize {
    m.slots.iter().flatten().filter(|&&i| m.is_retry(i)).count()
}

#[test]
fn retries_run_one_at_a_time_while_first_attempts_fill_the_slots() {
    let stories = INDEPENDENT;
    let mut m = model_with(&stories, 3, 3, None);
    let mut running: Vec<AttemptRequest> = begin(&mut m);
    assert_eq!(running.iter().map(|r| r.idx).collect::<Vec<_>>(), [0, 1, 2]);
    // Each fails for its own reason (one shared cause trips the breaker).
    let own = |r: &AttemptRequest| failed(&format!("story {} broke", r.idx));
    // a fails: its retry takes the slot (it heads the order).
    let r = running.remove(0);
    let a = handle(&mut m, finished(&r, own(&r)), t0());
    let next = starts(&a);
    assert_eq!(
        next.iter().map(|r| (r.idx, r.attempt)).collect::<Vec<_>>(),
        [(0, 2)]
    );
    running.extend(next);
    // b and c fail: their retries wait, first attempts of d and e run.
    for _ in 0..2 {
        let r = running.remove(0);
        let a = handle(&mut m, finished(&r, own(&r)), t0());
        let next = starts(&a);
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].attempt, 1, "a first attempt, not {:?}", next[0]);
        running.extend(next);
        assert_eq!(running_retries(&m), 1);
    }
    // Drive the rest: at no point do two retries run.
    let mut rounds = 0;
    while let Some(r) = running.pop() {
        rounds += 1;
        assert!(rounds < 50);
        let verdict = if r.attempt == 1 {
            own(&r)
        } else {
            Verdict::Done
        };
        let mut a = handle(&mut m, finished(&r, verdict), t0());
        while let Some(l) = m.landing {
            a.extend(land(&mut m, l.idx, landed_as(l.idx), t0()));
        }
        running.extend(starts(&a));
        assert!(running_retries(&m) <= 1, "{:?}", m.slots);
        assert!(m.slots.iter().flatten().count() >= running.len().min(1));
    }
    assert!(is_over(&m));
    assert_eq!(m.count(Node::Done), 6);
    // Two at once when asked.
    let mut m = model_with(&stories[..3], 3, 3, None);
    m.policy.retry_concurrency = 2;
    let first = begin(&mut m);
    for r in &first {
        handle(&mut m, finished(r, own(r)), t0());
    }
    assert_eq!(running_retries(&m), 2);
}

#[test]
fn an_interrupted_attempt_is_not_a_retry() {
    let mut m = model_with(&[("a", &[]), ("b", &[])], 2, 3, None);
    let first = begin(&mut m);
    handle(&mut m, finished(&first[0], Verdict::Interrupted), t0());
    assert!(!m.is_retry(0));
    handle(&mut m, finished(&first[1], failed("no")), t0());
    assert!(m.is_retry(1));
}

#[test]
fn memory_for_fewer_agents_lowers_the_jobs_and_says_why() {
    let stories = &INDEPENDENT[..4];
    let mut m = model_with(stories, 4, 3, None);
    m.policy.agent_memory_mb = 2048;
    m.memory_mb = Some(4500);
    let now = t0();
    let a = handle(&mut m, Event::Start { reland: vec![] }, now);
    assert_eq!(starts(&a).len(), 2, "4.5 GB holds two agents of 2 GB");
    assert!(said(&a).iter().any(|s| matches!(
        s,
        Message::MemoryLow {
            jobs: 2,
            asked: 4,
            available_mb: 4500,
            per_agent_mb: 2048
        }
    )));
    // What status --json shows, saved.
    let jobs = m.state.jobs.clone().unwrap();
    assert_eq!((jobs.asked, jobs.now), (4, 2));
    assert!(jobs.memory_bound());
    let saved = a.iter().rposition(|x| *x == Action::Save).unwrap();
    let started = a
        .iter()
        .position(|x| matches!(x, Action::StartAttempt(_)))
        .unwrap();
    assert!(saved < started || a[..started].contains(&Action::Save));
    let Some(Action::Totals(t)) = a.last() else {
        panic!("{a:?}")
    };
    assert_eq!(t.jobs_now.as_ref().map(|j| j.now), Some(2));
    // Memory is looked at again without any event of the run's.
    assert!(m.wake_at(now).is_some());
    // The two young agents keep their room even though the reading has
    // not dropped yet: nothing more starts.
    m.memory_mb = Some(6000);
    assert!(starts(&handle(&mut m, Event::Timer, later(now, 2))).is_empty());
    // Once they are past their warm-up, the reading is believed.
    m.memory_mb = Some(4500);
    let a = handle(&mut m, Event::Timer, later(now, 61));
    assert_eq!(starts(&a).len(), 2);
    // Never fewer than one: even with no memory, work goes on one at a time.
    let mut m = model_with(stories, 4, 3, None);
    m.policy.agent_memory_mb = 2048;
    m.memory_mb = Some(0);
    let first = begin(&mut m);
    assert_eq!(first.len(), 1);
    let a = handle(&mut m, finished(&first[0], Verdict::Done), later(now, 120));
    assert_eq!(starts(&a).len(), 1, "a landing is not an agent");
}

#[test]
fn conflicting_paths_are_remembered_and_keep_the_story_apart() {
    let stories = &INDEPENDENT[..4];
    let mut m = model_with(stories, 2, 3, None);
    let first = begin(&mut m);
    assert_eq!(first.iter().map(|r| r.idx).collect::<Vec<_>>(), [0, 1]);
    // b's worktree changes FEATURES.md (as the dispatcher read it).
    m.set_touched(1, vec!["FEATURES.md".into()]);
    let c = starts(&handle(&mut m, finished(&first[0], Verdict::Done), t0())).remove(0);
    assert_eq!(c.idx, 2);
    let conflict = LandResult::Conflict {
        paths: vec!["FEATURES.md".into()],
        saved_ref: Some("refs/ralph/conflicts/a/1".into()),
    };
    land(&mut m, 0, conflict, t0());
    assert_eq!(
        m.state.conflict_paths.get("a"),
        Some(&vec!["FEATURES.md".to_string()])
    );
    // a would redo FEATURES.md beside b, which changes it: d goes first.
    let a = handle(&mut m, finished(&c, Verdict::Done), t0());
    let d = starts(&a);
    assert_eq!(d.iter().map(|r| r.idx).collect::<Vec<_>>(), [3]);
    land(&mut m, 2, landed_as(2), t0());
    // b finishes: a still clashes with it (landing), but no other work is
    // ready, and a slot never idles for a prediction.
    let a = handle(&mut m, finished(&first[1], Verdict::Done), t0());
    let redo = starts(&a);
    assert_eq!(redo.iter().map(|r| r.idx).collect::<Vec<_>>(), [0]);
    land(&mut m, 1, landed_as(1), t0());
    // Landed: nothing left to keep apart.
    handle(&mut m, finished(&redo[0], Verdict::Done), t0());
    land(&mut m, 0, landed_as(0), t0());
    assert!(m.state.conflict_paths.is_empty());
}

#[test]
fn while_the_agent_is_limited_new_attempts_go_to_the_fallback_then_back() {
    let stories = &INDEPENDENT[..4];
    let mut m = model_with(stories, 1, 3, None);
    m.policy.agents = vec![Backend::Claude, Backend::Codex];
    let now = t0();
    let req = begin(&mut m).remove(0);
    assert_eq!(req.agent, Backend::Claude);
    let mut r = AttemptReport::empty(
        &req,
        Verdict::RateLimited {
            resets_at: Some((now.unix + 600) as u64),
        },
        "log".into(),
    );
    r.agent = Some("claude");
    let a = handle(&mut m, Event::AttemptFinished(Box::new(r)), now);
    let next = starts(&a);
    assert_eq!(next.len(), 1, "no pause: the fallback takes over");
    assert_eq!(next[0].agent, Backend::Codex);
    let a = handle(&mut m, finished(&next[0], Verdict::Done), later(now, 10));
    assert!(starts(&a).is_empty(), "one job: it waits for the landing");
    let a = land(&mut m, next[0].idx, landed_as(next[0].idx), later(now, 11));
    assert_eq!(starts(&a)[0].agent, Backend::Codex);
    // After Claude's reset, new attempts go back to it.
    let req = starts(&a).remove(0);
    handle(&mut m, Event::Timer, later(now, 603));
    handle(&mut m, finished(&req, Verdict::Done), later(now, 604));
    let a = land(&mut m, req.idx, landed_as(req.idx), later(now, 605));
    assert_eq!(starts(&a)[0].agent, Backend::Claude);
}

#[test]
fn staggered_starts_are_spaced() {
    let stories = &INDEPENDENT[..3];
    let mut m = model_with(stories, 3, 3, None);
    m.policy.stagger = Duration::from_secs(3);
    let now = t0();
    let a = handle(&mut m, Event::Start { reland: vec![] }, now);
    assert_eq!(starts(&a).len(), 1);
    assert!(!is_over(&m));
    assert!(starts(&handle(&mut m, Event::Timer, later(now, 1))).is_empty());
    assert_eq!(
        starts(&handle(&mut m, Event::Timer, later(now, 3))).len(),
        1
    );
    assert_eq!(
        starts(&handle(&mut m, Event::Timer, later(now, 6))).len(),
        1
    );
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

#[test]
fn finished_work_runs_its_post_hooks_once_its_landing_decided() {
    let mut m = model_with(&[("a", &[]), ("b", &[])], 2, 3, None);
    let first = begin(&mut m);
    let a = handle(&mut m, finished(&first[0], Verdict::Done), t0());
    assert!(post_hooks(&a).is_empty(), "not before the landing");
    // A lost race keeps the iteration for the landing that follows.
    let a = land(&mut m, 0, LandResult::Raced, t0());
    assert!(post_hooks(&a).is_empty());
    let a = land(&mut m, 0, landed_as(0), t0());
    assert_eq!(
        post_hooks(&a),
        vec![("a".to_string(), first[0].iteration, "done")]
    );
    handle(&mut m, finished(&first[1], Verdict::Done), t0());
    let fail = LandResult::ValidationFailed {
        name: "tests".into(),
        cmd: "make test".into(),
        tail: String::new(),
        saved_ref: None,
        log_rel: "log".into(),
    };
    let a = land(&mut m, 1, fail, t0());
    assert_eq!(
        post_hooks(&a),
        vec![("b".to_string(), first[1].iteration, "fail")]
    );
}

/// Every start and landing is preceded by a save, and no two saves follow
/// each other with nothing depending on the first.
#[test]
fn state_is_saved_once_before_what_depends_on_it() {
    let check = |actions: &[Action]| {
        let mut pending = false;
        for a in actions {
            match a {
                Action::Save => {
                    assert!(!pending, "two saves in a row: {actions:?}");
                    pending = true;
                }
                Action::StartAttempt(_) | Action::Land { .. } => {
                    assert!(pending, "not saved before: {actions:?}");
                    pending = false;
                }
                _ => {}
            }
        }
    };
    let mut m = model_with(&[("a", &[]), ("b", &[]), ("c", &["a"])], 2, 3, None);
    let a = handle(&mut m, Event::Start { reland: vec![] }, t0());
    check(&a);
    let first = starts(&a);
    let a = handle(&mut m, finished(&first[0], Verdict::Done), t0());
    check(&a);
    assert_eq!(lands(&a), vec![0]);
    let a = land(&mut m, 0, landed_as(0), t0());
    check(&a);
    assert_eq!(starts(&a).len(), 1, "c starts once a landed");
    let a = handle(&mut m, finished(&first[1], failed("x")), t0());
    check(&a);
    assert_eq!(a.iter().filter(|x| **x == Action::Save).count(), 1);
}

#[test]
fn one_job_begins_the_next_iteration_after_the_previous_post_hooks() {
    let mut m = model_with(&[("a", &[]), ("b", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    handle(&mut m, finished(&req, Verdict::Done), t0());
    let a = handle(&mut m, Event::LandingFinished(landed_as(0)), t0());
    assert_eq!(post_hooks(&a).len(), 1);
    assert!(starts(&a).is_empty(), "b waits for a's post_iteration");
    assert!(!is_over(&m), "the run waits for the hooks too");
    let a = handle(&mut m, Event::HooksDone, t0());
    assert_eq!(
        starts(&a).iter().map(|r| r.idx).collect::<Vec<_>>(),
        vec![1]
    );
}

/// `run -s b` after `a` landed counts b alone, and its summary's tokens
/// and cost are this run's (issue 13: it printed "2/2 done" with lifetime
/// totals).
#[test]
fn a_run_of_one_story_counts_that_story_and_this_runs_cost() {
    let stories = vec![story("a", &[]), story("b", &[])];
    let backlog = Backlog {
        source: Source::StoriesTxt,
        stories: stories.clone(),
        sections: vec![Section {
            label: Some("1".into()),
            chain: false,
        }],
        skipped: vec![],
    };
    let dag = Dag::build(&backlog).expect("a valid DAG");
    let mut state = State::default();
    state.mark_done("a", Some("c0ffee"));
    state.add_usage("a", Default::default(), 5.0, 1.0);
    let base = model_with(&[("a", &[])], 1, 3, None);
    let mut m = Model::new(stories, &dag, state, base.policy, Some(1), 0, t0());
    let a = handle(&mut m, Event::Start { reland: vec![] }, t0());
    assert!(a.contains(&Action::Say(Message::Header {
        total: 1,
        done: 0,
        jobs: 1,
        target: "main".into()
    })));
    let req = starts(&a).remove(0);
    let mut r = AttemptReport::empty(&req, Verdict::Done, String::new());
    r.cost_usd = 0.25;
    handle(&mut m, Event::AttemptFinished(Box::new(r)), t0());
    handle(&mut m, Event::LandingFinished(landed_as(1)), t0());
    let (summary, _, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_OK);
    assert_eq!((summary.done, summary.total), (1, 1));
    assert!(summary.all_complete);
    assert_eq!(summary.run_cost_usd, 0.25);
    assert_eq!(summary.cost_usd, 5.25, "lifetime, on its own line");
}

/// A model of `stories` (one batch section) from `state`, asked for
/// `only`; with `by_hand`, the run of `ralph decompose` that story.
fn model_of(stories: Vec<Story>, state: State, only: usize, by_hand: bool) -> Model {
    let backlog = Backlog {
        source: Source::StoriesTxt,
        stories: stories.clone(),
        sections: vec![Section {
            label: Some("1".into()),
            chain: false,
        }],
        skipped: vec![],
    };
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

/// Issue 21: `ralph decompose b` whose answer is refused leaves b as it
/// was (attempts, retry count, status, note), starts nothing else (not b
/// as a normal attempt, while a, which b waits for, is pending), and the
/// run needs a person.
#[test]
fn a_refused_split_by_hand_costs_nothing_and_runs_nothing_else() {
    let mut state = State::default();
    state.fail_attempt("b", "first try", 3);
    state.set_note("b", None);
    let retry_count = state.retry_count;
    let mut m = model_of(vec![story("a", &[]), story("b", &["a"])], state, 1, true);
    let first = begin(&mut m);
    assert_eq!(first.len(), 1);
    assert_eq!((first[0].idx, first[0].kind), (1, AttemptKind::Decompose));
    let a = handle(
        &mut m,
        finished(
            &first[0],
            failed("decomposition refused, nothing written: bad"),
        ),
        t0(),
    );
    assert!(starts(&a).is_empty(), "{a:?}");
    assert_eq!(m.state.status("b"), Status::Pending);
    assert_eq!(m.state.record("b").unwrap().attempts, 1);
    assert_eq!(m.state.retry_count, retry_count);
    assert_eq!(m.state.note("b"), None);
    assert_eq!(m.state.next_kind("b"), AttemptKind::First);
    assert_eq!(m.state.status("a"), Status::Pending);
    assert!(is_over(&m));
    let (_, error, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_STORIES_FAILED);
    assert!(error
        .unwrap()
        .contains("story b was not split: decomposition refused"));
}

/// Issue 21: `-s c` brings in what c waits for that is not done, says so
/// once, and starts c only after they landed.
#[test]
fn run_s_starts_the_missing_dependencies_first() {
    let stories = vec![
        story("a", &[]),
        story("b", &["a"]),
        story("c", &["b"]),
        story("d", &[]),
    ];
    let mut m = model_of(stories, State::default(), 2, false);
    let a = handle(&mut m, Event::Start { reland: vec![] }, t0());
    assert!(said(&a).contains(&Message::DependenciesFirst {
        ids: vec!["c".into()],
        run_first: vec!["a".into(), "b".into()],
        failed: vec![],
    }));
    let mut order = Vec::new();
    let mut next = starts(&a);
    while let Some(req) = next.pop() {
        order.push(m.id(req.idx).to_string());
        handle(&mut m, finished(&req, Verdict::Done), t0());
        next = starts(&land(&mut m, req.idx, landed_as(req.idx), t0()));
    }
    assert_eq!(order, ["a", "b", "c"]);
    let (summary, _, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_OK);
    assert_eq!((summary.done, summary.total), (3, 3));
}

/// A split asked for by hand whose landing conflicts is refused the same
/// way: nothing charged, nothing else run, its work kept.
#[test]
fn a_split_by_hand_that_does_not_land_costs_nothing() {
    let mut m = model_of(
        vec![story("a", &[]), story("b", &["a"])],
        State::default(),
        1,
        true,
    );
    let first = begin(&mut m);
    handle(&mut m, finished(&first[0], Verdict::Done), t0());
    let a = land(
        &mut m,
        1,
        LandResult::Conflict {
            paths: vec![".ralph/stories.txt".into()],
            saved_ref: Some("refs/ralph/conflicts/b/1".into()),
        },
        t0(),
    );
    assert!(starts(&a).is_empty(), "{a:?}");
    let rec = m.state.record("b").unwrap();
    assert_eq!(
        (rec.attempts, rec.conflicts, rec.status),
        (0, 0, Status::Pending)
    );
    assert_eq!(m.state.note("b"), None);
    assert!(is_over(&m));
    let (_, error, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_STORIES_FAILED);
    let error = error.unwrap();
    assert!(
        error.contains("conflicted in .ralph/stories.txt")
            && error.contains("refs/ralph/conflicts/b/1"),
        "{error}"
    );
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

/// Before the fix an API fault counted like any transient fault of the
/// story: five in a row asked for a person, however long they took, and
/// each story kept its own count, so many stories retried a dead API for
/// hours. Now the wait is per agent and bounded in time.
#[test]
fn a_failing_api_is_waited_on_no_longer_than_max_wait() {
    let mut m = model_with(&[("a", &[])], 1, 2, None);
    m.policy.max_wait = Duration::from_secs(3600);
    let t = t0();
    let mut req = begin(&mut m).remove(0);
    let mut at = 0;
    let mut waits = Vec::new();
    // Doubling pauses, never charged, well past five in a row.
    while at < 3600 {
        let a = handle(&mut m, api_down(&req, at), later(t, at));
        assert!(starts(&a).is_empty());
        assert!(!is_over(&m), "still waiting at {at}s");
        assert_eq!(m.state.record("a").unwrap().attempts, 0, "not charged");
        let wait = m.pause_until.unwrap() - later(t, at).mono;
        waits.push(wait.as_secs());
        at += wait.as_secs();
        req = starts(&handle(&mut m, Event::Timer, later(t, at))).remove(0);
        assert_eq!(req.agent, Backend::Claude);
    }
    assert_eq!(&waits[..4], &[5, 10, 20, 40]);
    assert!(waits.len() > 5, "{waits:?}");
    assert_eq!(at, 3600, "the last pause ends at the bound: {waits:?}");
    // The bound reached: no fallback, so the run stops, naming the error.
    let a = handle(&mut m, api_down(&req, at), later(t, at));
    assert!(starts(&a).is_empty());
    assert!(is_over(&m));
    let (_, error, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_STORIES_FAILED, "not ralph's own failure");
    let error = error.unwrap();
    assert!(
        error.contains("500 Internal Server Error (3600)"),
        "{error}"
    );
    assert!(error.contains("limits.max_wait_hours"), "{error}");
    assert_eq!(m.state.status("a"), Status::Pending);
    assert_eq!(m.state.record("a").unwrap().attempts, 0);
}

#[test]
fn past_max_wait_the_fallback_agent_takes_over() {
    let mut m = model_with(&INDEPENDENT[..2], 1, 2, None);
    m.policy.agents = vec![Backend::Claude, Backend::Codex];
    m.policy.max_wait = Duration::ZERO;
    let t = t0();
    let req = begin(&mut m).remove(0);
    let a = handle(&mut m, api_down(&req, 0), t);
    let next = starts(&a);
    assert_eq!(next.len(), 1, "no wait at all with a bound of 0");
    assert_eq!(next[0].agent, Backend::Codex);
    assert!(said(&a)
        .iter()
        .any(|s| matches!(s, Message::ApiGivenUp { fallback, .. } if fallback == "codex")));
    // Codex's API fails too: nothing is left; the run stops.
    let a = handle(&mut m, api_down(&next[0], 1), later(t, 1));
    assert!(starts(&a).is_empty());
    assert!(is_over(&m));
    let (_, error, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_STORIES_FAILED);
    assert!(error.unwrap().contains("codex"));
}

/// Stories left for an agent the run gave up on (the frontmatter's
/// `agent:`) end the run with that agent's error, not a clean exit.
#[test]
fn stories_only_a_given_up_agent_may_run_end_the_run_with_its_error() {
    let mut m = model_with(&INDEPENDENT[..2], 1, 2, None);
    m.policy.agents = vec![Backend::Claude, Backend::Codex];
    m.policy.max_wait = Duration::ZERO;
    m.stories[1].agent = Some(Backend::Claude);
    let t = t0();
    let req = begin(&mut m).remove(0);
    let a = handle(&mut m, api_down(&req, 0), t);
    let next = starts(&a);
    assert_eq!((next[0].idx, next[0].agent), (0, Backend::Codex));
    handle(&mut m, finished(&next[0], Verdict::Done), t);
    let a = land(&mut m, 0, landed_as(0), t);
    assert!(starts(&a).is_empty(), "b is Claude's");
    assert!(is_over(&m));
    let (_, error, code) = finish(&m, 1.0);
    assert_eq!(code, EXIT_STORIES_FAILED);
    assert!(error.unwrap().contains("claude agent's model API"));
}

#[test]
fn an_answer_from_the_api_ends_the_streak() {
    let mut m = model_with(&INDEPENDENT[..1], 1, 3, None);
    m.policy.max_wait = Duration::from_secs(3600);
    let t = t0();
    let req = begin(&mut m).remove(0);
    handle(&mut m, api_down(&req, 0), t);
    let req = starts(&handle(&mut m, Event::Timer, later(t, 3000))).remove(0);
    // The API answered (the attempt failed on its own merits).
    let mut r = AttemptReport::empty(&req, failed("tests red"), "log".into());
    r.agent = Some("claude");
    let a = handle(&mut m, Event::AttemptFinished(Box::new(r)), later(t, 3001));
    let req = starts(&a).remove(0);
    // An hour after the first failure, but the first of a new streak.
    let a = handle(&mut m, api_down(&req, 3700), later(t, 3700));
    assert!(!is_over(&m));
    assert_eq!(
        m.pause_until.unwrap() - later(t, 3700).mono,
        Duration::from_secs(5)
    );
    assert!(starts(&a).is_empty());
}

fn records(actions: &[Action]) -> Vec<Ev> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Record(ev) => Some(ev.clone()),
            _ => None,
        })
        .collect()
}

/// A run record is the transition's decision as it made it, not a reading
/// of it afterwards: a fix-up whose kept work could not be set up again
/// runs as a redo, and its record says so, as the state's history does
/// (the records used to say `fixup`, from the request).
#[test]
fn a_record_is_what_the_transition_decided() {
    let mut m = model_with(&[("1.1", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    handle(&mut m, finished(&req, Verdict::Done), t0());
    let conflict = LandResult::Conflict {
        paths: vec!["FEATURES.md".into()],
        saved_ref: Some("refs/ralph/conflicts/1.1/1".into()),
    };
    let fixup = starts(&land(&mut m, 0, conflict, t0())).remove(0);
    assert_eq!(fixup.kind, AttemptKind::Fixup);
    let mut r = AttemptReport::empty(&fixup, failed("tests broke"), String::new());
    r.kind = AttemptKind::Redo;
    let a = handle(&mut m, Event::AttemptFinished(Box::new(r)), t0());
    let decided = m
        .state
        .record("1.1")
        .unwrap()
        .history
        .last()
        .unwrap()
        .clone();
    assert_eq!(decided.kind(), AttemptKind::Redo);
    let recorded = records(&a);
    assert!(
        matches!(
            &recorded[0],
            Ev::AttemptEnd { story, attempt, kind, verdict, reason, .. }
                if story == "1.1"
                    && *attempt == decided.number
                    && *kind == decided.kind()
                    && *verdict == decided.outcome
                    && *reason == decided.reason
        ),
        "{recorded:?} vs {decided:?}"
    );
}

/// A failure the circuit breaker takes back in the same step was never a
/// failure for good: no record says it was (the story is pending again).
#[test]
fn a_failure_the_breaker_takes_back_is_not_recorded_as_failed_for_good() {
    let mut m = model_with(&[("a", &[]), ("c", &[]), ("d", &[])], 2, 1, None);
    let first = begin(&mut m);
    let bad = || failed("Exit code 1: unknown model 'gpt-9'");
    let a = handle(&mut m, finished(&first[0], bad()), t0());
    assert!(records(&a).contains(&Ev::FailedForGood {
        story: "a".into(),
        reason: Some("Exit code 1: unknown model 'gpt-9'".into())
    }));
    let next = starts(&a);
    handle(&mut m, finished(&first[1], bad()), t0());
    let a = handle(&mut m, finished(&next[0], bad()), t0());
    let recorded = records(&a);
    assert!(
        recorded.contains(&Ev::Breaker {
            reason: "Exit code 1: unknown model 'gpt-9'".into()
        }),
        "{recorded:?}"
    );
    assert!(
        !recorded
            .iter()
            .any(|e| matches!(e, Ev::FailedForGood { .. })),
        "{recorded:?}"
    );
    assert_eq!(m.state.status("d"), Status::Pending);
}
