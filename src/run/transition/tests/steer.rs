//! Steering a running run (issue 24): pause, resume, drain, stop, hold,
//! release, note, jobs and land, as the transition decides them.

use super::*;
use crate::run::model::Model;
use crate::state::Outcome;
use crate::steer::{Command, Reply};

/// Steers `m` with `cmd`; the actions and the reply the run gives.
fn steer(m: &mut Model, cmd: Command) -> (Vec<Action>, Reply) {
    let actions = handle(m, Event::Steer { req: 7, cmd }, t0());
    let replies: Vec<Reply> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Reply { req, reply } => {
                assert_eq!(*req, 7, "the answer goes to the request");
                Some(reply.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(replies.len(), 1, "one answer per request: {actions:?}");
    (actions.clone(), replies[0].clone())
}

fn steer_records(actions: &[Action]) -> Vec<(String, Option<String>)> {
    records(actions)
        .into_iter()
        .filter_map(|e| match e {
            Ev::Steer { cmd, story, .. } => Some((cmd, story)),
            _ => None,
        })
        .collect()
}

fn saved(actions: &[Action]) -> bool {
    actions.iter().any(|a| matches!(a, Action::Save))
}

fn ids(m: &Model, reqs: &[AttemptRequest]) -> Vec<String> {
    reqs.iter().map(|r| m.id(r.idx).to_string()).collect()
}

#[test]
fn paused_nothing_starts_running_work_lands_and_the_run_waits_for_resume() {
    let mut m = model_with(&INDEPENDENT[..3], 1, 3, None);
    let first = begin(&mut m);
    let (actions, reply) = steer(&mut m, Command::Pause);
    assert!(reply.ok && reply.message.starts_with("paused"), "{reply:?}");
    assert!(
        m.state.paused && saved(&actions),
        "a pause survives a crash"
    );
    assert_eq!(steer_records(&actions), vec![("pause".into(), None)]);
    assert!(said(&actions)
        .iter()
        .any(|s| matches!(s, Message::Steered { .. })));
    // The running attempt finishes and lands; nothing new starts.
    let after = handle(&mut m, finished(&first[0], Verdict::Done), t0());
    assert!(starts(&after).is_empty());
    let after = land(&mut m, first[0].idx, landed_as(first[0].idx), t0());
    assert!(starts(&after).is_empty());
    assert!(!is_over(&m), "a paused run waits for `ralph resume`");
    let (again, reply) = steer(&mut m, Command::Pause);
    assert!(reply.ok && reply.message == "already paused");
    assert!(!saved(&again));
    let (actions, reply) = steer(&mut m, Command::Resume);
    assert!(reply.ok && reply.message.starts_with("resumed"));
    assert!(!m.state.paused);
    assert_eq!(ids(&m, &starts(&actions)), vec!["b"]);
}

#[test]
fn a_drained_run_starts_nothing_and_ends_once_nothing_runs() {
    let mut m = model_with(&INDEPENDENT[..4], 2, 3, None);
    let first = begin(&mut m);
    assert_eq!(first.len(), 2);
    let (_, reply) = steer(&mut m, Command::Drain);
    assert!(reply.ok && reply.message.contains("2 running"), "{reply:?}");
    assert!(!m.state.paused, "a drain is not kept for the next run");
    let after = handle(&mut m, finished(&first[0], failed("no")), t0());
    assert!(starts(&after).is_empty(), "not even the retry");
    assert!(!is_over(&m));
    handle(&mut m, finished(&first[1], failed("no")), t0());
    assert!(is_over(&m));
    let (_, code) = {
        let (s, e, c) = finish(&m, 1.0);
        ((s, e), c)
    };
    assert_eq!(code, EXIT_OK, "a drain with nothing failed is exit 0");
}

#[test]
fn a_stopped_attempt_costs_no_retry_is_recorded_stopped_and_holds_the_story() {
    let mut m = model_with(&[("a", &[]), ("b", &["a"]), ("c", &[])], 2, 3, None);
    let first = begin(&mut m);
    assert_eq!(ids(&m, &first), vec!["a", "c"]);
    let (actions, reply) = steer(&mut m, Command::Stop { id: "a".into() });
    assert!(reply.ok, "{reply:?}");
    assert!(actions.contains(&Action::StopAttempt {
        slot: first[0].slot
    }));
    assert!(m.state.held.contains("a") && saved(&actions));
    // The agent was killed: its attempt comes back interrupted.
    let after = handle(&mut m, finished(&first[0], Verdict::Interrupted), t0());
    assert!(
        starts(&after).is_empty(),
        "a held story does not start again"
    );
    let rec = m.state.record("a").unwrap();
    assert_eq!(rec.attempts, 0, "no retry charged");
    assert_eq!(rec.history.last().unwrap().outcome, Outcome::Stopped);
    let ends: Vec<Outcome> = records(&after)
        .into_iter()
        .filter_map(|e| match e {
            Ev::AttemptEnd { verdict, .. } => Some(verdict),
            _ => None,
        })
        .collect();
    assert_eq!(ends, vec![Outcome::Stopped]);
    // c finishes: the run does not end while a story held here waits.
    handle(&mut m, finished(&first[1], Verdict::Done), t0());
    land(&mut m, first[1].idx, landed_as(first[1].idx), t0());
    assert!(!is_over(&m));
    let (actions, reply) = steer(&mut m, Command::Release { id: "a".into() });
    assert!(reply.ok && reply.message.starts_with("released a"));
    assert_eq!(ids(&m, &starts(&actions)), vec!["a"]);
}

#[test]
fn stop_refuses_a_story_that_is_not_running_and_an_unknown_one() {
    let mut m = model_with(&INDEPENDENT[..2], 1, 3, None);
    begin(&mut m);
    let (actions, reply) = steer(&mut m, Command::Stop { id: "b".into() });
    assert!(
        !reply.ok && reply.message.contains("not running"),
        "{reply:?}"
    );
    assert!(reply.hint.unwrap().contains("ralph hold b"));
    assert!(records(&actions).is_empty() && !saved(&actions));
    let (_, reply) = steer(&mut m, Command::Hold { id: "zz".into() });
    assert!(!reply.ok && reply.message == "no story zz in the backlog");
}

#[test]
fn a_held_story_and_its_dependents_wait_until_released() {
    let mut m = model_with(&[("a", &[]), ("b", &["a"]), ("c", &[])], 1, 3, None);
    // Held before anything started: the run begins with c.
    let (actions, reply) = steer(&mut m, Command::Hold { id: "a".into() });
    assert!(reply.ok && reply.message.starts_with("held a"), "{reply:?}");
    let first = starts(&actions);
    assert_eq!(ids(&m, &first), vec!["c"]);
    handle(&mut m, finished(&first[0], Verdict::Done), t0());
    let after = land(&mut m, first[0].idx, landed_as(first[0].idx), t0());
    assert!(
        starts(&after).is_empty(),
        "neither a nor b, which waits for it"
    );
    assert!(!is_over(&m), "the run waits for the release");
    let (actions, _) = steer(&mut m, Command::Release { id: "a".into() });
    assert_eq!(ids(&m, &starts(&actions)), vec!["a"]);
    let (_, reply) = steer(&mut m, Command::Release { id: "a".into() });
    assert!(reply.ok && reply.message.contains("not held"));
}

#[test]
fn a_hold_from_before_the_run_does_not_keep_it_waiting() {
    let mut m = model_with(&[("a", &[]), ("b", &[])], 1, 3, None);
    m.state.held.insert("a".into());
    let first = begin(&mut m);
    assert_eq!(ids(&m, &first), vec!["b"]);
    handle(&mut m, finished(&first[0], Verdict::Done), t0());
    land(&mut m, first[0].idx, landed_as(first[0].idx), t0());
    assert!(is_over(&m), "nobody in this run asked to wait for it");
}

#[test]
fn a_note_reaches_the_next_attempts_prompt_once() {
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    let first = begin(&mut m);
    let (actions, reply) = steer(
        &mut m,
        Command::Note {
            id: "a".into(),
            text: "use the v2 API".into(),
        },
    );
    assert!(
        reply.ok && reply.message.contains("does not see it"),
        "{reply:?}"
    );
    assert!(saved(&actions));
    assert_eq!(m.state.user_notes["a"], "use the v2 API");
    let after = handle(&mut m, finished(&first[0], failed("tests fail")), t0());
    let retry = &starts(&after)[0];
    let text = &retry.note.as_ref().unwrap().text;
    assert!(text.contains("use the v2 API"), "{text}");
    assert!(
        m.state.user_notes.is_empty(),
        "taken by the attempt it was for"
    );
    let after = handle(&mut m, finished(retry, failed("again")), t0());
    let third = &starts(&after)[0];
    assert!(!third.note.as_ref().unwrap().text.contains("v2 API"));
    let (_, reply) = steer(
        &mut m,
        Command::Note {
            id: "a".into(),
            text: "  ".into(),
        },
    );
    assert!(!reply.ok);
}

#[test]
fn lowering_jobs_stops_nothing_and_starts_less_raising_starts_more() {
    let mut m = model_with(&INDEPENDENT, 3, 3, None);
    let first = begin(&mut m);
    assert_eq!(first.len(), 3);
    let (_, reply) = steer(&mut m, Command::Jobs { n: 1 });
    assert!(
        reply.ok && reply.message.starts_with("jobs: 3 → 1"),
        "{reply:?}"
    );
    assert!(reply.message.contains("the 3 running go on"));
    let a = handle(&mut m, finished(&first[0], Verdict::Done), t0());
    assert!(starts(&a).is_empty(), "two still run, more than one");
    land(&mut m, first[0].idx, landed_as(first[0].idx), t0());
    handle(&mut m, finished(&first[1], Verdict::Done), t0());
    let a = land(&mut m, first[1].idx, landed_as(first[1].idx), t0());
    assert!(starts(&a).is_empty(), "one runs: the limit");
    let (actions, _) = steer(&mut m, Command::Jobs { n: 4 });
    assert_eq!(starts(&actions).len(), 3, "up to four at once");
    assert_eq!(m.slots.len(), 4);
    let (_, reply) = steer(&mut m, Command::Jobs { n: 0 });
    assert!(!reply.ok);
}

#[test]
fn review_waits_for_approval_and_lands_what_is_approved_while_running() {
    let mut m = model_with(&[("a", &[]), ("b", &["a"])], 1, 3, None);
    m.waits_for_review = true;
    let first = begin(&mut m);
    handle(&mut m, finished(&first[0], Verdict::Done), t0());
    let after = land(&mut m, first[0].idx, LandResult::InReview, t0());
    assert!(!is_over(&m), "the run waits for the review");
    assert!(said(&after).contains(&Message::WaitingForPerson {
        what: "`ralph land ID` (in review: a)".into()
    }));
    let (_, reply) = steer(&mut m, Command::Land { id: "b".into() });
    assert!(!reply.ok && reply.message.contains("not waiting for review"));
    let (actions, reply) = steer(&mut m, Command::Land { id: "a".into() });
    assert!(reply.ok, "{reply:?}");
    assert!(actions
        .iter()
        .any(|a| matches!(a, Action::Land { approved: true, .. })));
    let after = land(&mut m, 0, landed_as(0), t0());
    assert_eq!(
        ids(&m, &starts(&after)),
        vec!["b"],
        "its dependent runs now"
    );
}

#[test]
fn a_story_rejected_while_the_run_waits_runs_again_told_why() {
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    m.waits_for_review = true;
    let first = begin(&mut m);
    handle(&mut m, finished(&first[0], Verdict::Done), t0());
    land(&mut m, first[0].idx, LandResult::InReview, t0());
    let (actions, reply) = steer(
        &mut m,
        Command::Reject {
            id: "a".into(),
            note: Some("use the shared helper".into()),
        },
    );
    assert!(reply.ok, "{reply:?}");
    let again = &starts(&actions)[0];
    assert_eq!(again.kind, AttemptKind::Redo);
    assert!(again
        .note
        .as_ref()
        .unwrap()
        .text
        .contains("use the shared helper"));
}

#[test]
fn with_exit_on_review_the_run_ends_when_only_reviews_are_left() {
    let mut m = model_with(&[("a", &[]), ("b", &["a"])], 1, 3, None);
    let first = begin(&mut m);
    handle(&mut m, finished(&first[0], Verdict::Done), t0());
    land(&mut m, first[0].idx, LandResult::InReview, t0());
    assert!(is_over(&m));
}

#[test]
fn a_stopping_run_takes_no_more_commands() {
    let mut m = model_with(&INDEPENDENT[..2], 1, 3, None);
    begin(&mut m);
    handle(&mut m, Event::Signal(OsSignal::Interrupt), t0());
    let (actions, reply) = steer(&mut m, Command::Pause);
    assert!(!reply.ok && reply.message.contains("stopping"));
    assert!(
        !m.state.paused
            && records(&actions)
                .iter()
                .all(|e| !matches!(e, Ev::Steer { .. }))
    );
}

#[test]
fn a_run_restarted_after_a_pause_starts_paused_and_says_what_it_waits_for() {
    let mut m = model_with(&INDEPENDENT[..2], 1, 3, None);
    m.state.paused = true;
    let actions = handle(&mut m, Event::Start { reland: vec![] }, t0());
    assert!(starts(&actions).is_empty());
    assert!(!is_over(&m));
    assert!(said(&actions).contains(&Message::WaitingForPerson {
        what: "`ralph resume` (paused)".into()
    }));
    let (actions, _) = steer(&mut m, Command::Resume);
    assert_eq!(ids(&m, &starts(&actions)), vec!["a"]);
}
