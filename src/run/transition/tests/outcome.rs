//! An attempt's outcome: failures and retries, fix-ups and their sessions,
//! what an interrupted attempt keeps, the waste counted per landed story.

use super::*;

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
    assert_eq!(m.node(0), StoryState::Running);
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
    assert_eq!(m.node(1), StoryState::Blocked);
    assert_eq!(m.node(3), StoryState::Running);
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

/// Where a cluster attempt runs is kept while it runs (for `status`),
/// recorded once (for the web view) and shown; its end clears it, and a
/// placement arriving after the end, or for another attempt, is dropped.
#[test]
fn a_placed_attempt_is_kept_recorded_and_shown_until_it_ends() {
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    let placed = |attempt: u32| Event::Placed {
        idx: req.idx,
        attempt,
        candidate: None,
        node: "w2/1".into(),
    };
    let a = handle(&mut m, placed(req.attempt), t0());
    assert_eq!(
        records(&a),
        [Ev::AttemptPlaced {
            story: "a".into(),
            attempt: req.attempt,
            node: "w2/1".into(),
        }]
    );
    assert!(a.contains(&Action::Placed {
        id: "a".into(),
        candidate: None,
        node: "w2/1".into()
    }));
    assert!(a.contains(&Action::Save), "status reads it from the state");
    let on = |m: &Model| m.state.record("a").unwrap().running_on.clone();
    assert_eq!(on(&m).as_deref(), Some("w2/1"));
    assert!(
        handle(&mut m, placed(req.attempt), t0()).is_empty(),
        "said once"
    );
    assert!(handle(&mut m, placed(req.attempt + 1), t0()).is_empty());
    handle(&mut m, finished(&req, failed("x")), t0());
    assert_eq!(on(&m), None, "an ended attempt runs nowhere");
    assert!(handle(&mut m, placed(req.attempt), t0()).is_empty());
    assert_eq!(on(&m), None);
}

/// A fault (a lost cluster node) that kept the attempt's commits names
/// them as a stopped attempt's are: in the next attempt's note, the
/// attempt's history and record, and the line the run prints.
#[test]
fn a_faults_kept_commits_are_named_like_other_kept_work() {
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    let kept = "refs/ralph/attempts/a/1-interrupted";
    let mut r = AttemptReport::empty(&req, fault(FaultKind::Transient), String::new());
    r.saved_ref = Some(kept.into());
    let a = handle(&mut m, Event::AttemptFinished(Box::new(r)), t0());
    assert_eq!(m.state.record("a").unwrap().attempts, 0, "not charged");
    let text = &m.state.note("a").unwrap().text;
    assert!(text.contains(kept), "{text}");
    assert_eq!(
        m.state
            .attempt("a", req.attempt)
            .unwrap()
            .saved_ref
            .as_deref(),
        Some(kept)
    );
    assert!(
        records(&a).iter().any(|e| matches!(e,
            Ev::AttemptEnd { saved_ref: Some(s), .. } if s == kept)),
        "{a:?}"
    );
    assert!(
        said(&a).iter().any(|s| matches!(s,
            Message::Fault { kept: Some(k), .. } if k == kept)),
        "{a:?}"
    );
}
