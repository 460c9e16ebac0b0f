//! The merge queue: one landing at a time, what a landing's result does to
//! the story, post hooks once the landing decided, saves before what needs them.

use super::*;

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

/// The stories the actions start fix-ups of.
fn fixups(actions: &[Action]) -> Vec<usize> {
    starts(actions)
        .iter()
        .filter(|r| r.kind == AttemptKind::Fixup)
        .map(|r| r.idx)
        .collect()
}

/// Each `land_end` record the actions hold, as `story:result`.
fn land_ends(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|x| match x {
            Action::Record(Ev::LandEnd { story, result, .. }) => Some(format!("{story}:{result}")),
            _ => None,
        })
        .collect()
}

fn chain_asks(actions: &[Action], add: bool) -> Vec<usize> {
    actions
        .iter()
        .filter_map(|x| match x {
            Action::LandChain(asks) if !add => Some(asks.iter().map(|l| l.idx).collect::<Vec<_>>()),
            Action::ChainAdd(asks) if add => Some(asks.iter().map(|l| l.idx).collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The merge queue's open chain (`landing.speculate`, `run/stream.rs`):
/// the first story to finish opens it and those finishing while it
/// validates join it, up to the window; a failed validation goes back to
/// its agent alone and halves the window; what the chain held when it
/// ended goes back to the front of the queue with nothing charged; the
/// chain is closed once it holds nothing and nothing waits.
#[test]
fn an_open_chain_takes_stories_as_they_finish_and_requeues_what_it_held_at_its_end() {
    let mut m = model_with(&INDEPENDENT[..5], 5, 3, None);
    m.policy.speculate = 4;
    m.policy.best_of.checks = vec!["tests".to_string()];
    m.window = 4;
    let reqs = begin(&mut m);
    assert_eq!(reqs.len(), 5);
    let a = handle(&mut m, finished(&reqs[0], Verdict::Done), t0());
    assert_eq!(chain_asks(&a, false), vec![0], "the first opens a chain");
    assert!(lands(&a).is_empty());
    assert_eq!(m.chain, Chain::Open);
    for r in &reqs[1..4] {
        let a = handle(&mut m, finished(r, Verdict::Done), t0());
        assert_eq!(
            chain_asks(&a, true),
            vec![r.idx],
            "joins the chain in flight"
        );
    }
    let a = handle(&mut m, finished(&reqs[4], Verdict::Done), t0());
    assert!(chain_asks(&a, true).is_empty(), "the window is full");
    assert_eq!(m.land_queue.len(), 1);
    let a = handle(
        &mut m,
        Event::ChainResults(vec![(0, landed_as(0)), (1, landed_as(1))]),
        t0(),
    );
    assert_eq!(m.state.status("a"), Status::Done);
    assert_eq!(m.state.status("b"), Status::Done);
    assert_eq!(chain_asks(&a, true), vec![4], "room again: the fifth joins");
    let a = handle(
        &mut m,
        Event::ChainResults(vec![(2, validation_failed(1))]),
        t0(),
    );
    assert_eq!(fixups(&a), vec![2]);
    assert_eq!(m.window, 2, "halved by the failure");
    // The chain ends holding d and e: both go back, uncharged, and a new
    // chain takes them.
    let a = handle(&mut m, Event::ChainFinished(Vec::new()), t0());
    assert_eq!(chain_asks(&a, false), vec![3, 4]);
    assert_eq!(m.state.status("d"), Status::Landing);
    assert_eq!(m.state.record("d").map(|r| r.attempts_started), Some(1));
    let ends = land_ends(&a);
    assert_eq!(ends, vec!["d:behind", "e:behind"]);
    let a = handle(
        &mut m,
        Event::ChainResults(vec![(3, landed_as(3)), (4, landed_as(4))]),
        t0(),
    );
    assert!(
        a.contains(&Action::ChainClose),
        "nothing held, nothing waits"
    );
    assert_eq!(m.chain, Chain::Closing);
    assert!(m.busy(), "the run waits for the chain's end");
    handle(&mut m, Event::ChainFinished(Vec::new()), t0());
    assert_eq!(m.chain, Chain::Idle);
}

/// A chain of rounds (no required validation, or batches): what waits is
/// taken together; a failed validation in the middle goes back to its
/// agent alone, the story behind it goes back to the front of the queue
/// with nothing charged, and the window halves.
#[test]
fn a_chain_of_rounds_lands_its_passed_prefix_and_requeues_what_is_behind_a_failure() {
    let mut m = model_with(&INDEPENDENT[..4], 4, 3, None);
    m.policy.speculate = 4;
    m.window = 4;
    let reqs = begin(&mut m);
    assert_eq!(reqs.len(), 4);
    let a = handle(&mut m, finished(&reqs[0], Verdict::Done), t0());
    assert_eq!(lands(&a), vec![0], "alone in the queue: a landing of one");
    for r in &reqs[1..] {
        let a = handle(&mut m, finished(r, Verdict::Done), t0());
        assert!(lands(&a).is_empty(), "the queue is busy");
    }
    let a = land(&mut m, 0, landed_as(0), t0());
    assert_eq!(
        chain_asks(&a, false),
        vec![1, 2, 3],
        "what waited is one chain"
    );
    assert_eq!(m.chain, Chain::Idle, "not open");
    let a = handle(
        &mut m,
        Event::ChainFinished(vec![
            (1, landed_as(1)),
            (2, validation_failed(1)),
            (3, LandResult::Behind),
        ]),
        t0(),
    );
    assert_eq!(m.state.status("b"), Status::Done);
    assert_eq!(fixups(&a), vec![2]);
    assert_eq!(lands(&a), vec![3], "d is merged again on the new tip");
    assert_eq!(m.state.record("d").map(|r| r.attempts_started), Some(1));
    assert_eq!(m.window, 2, "halved by the failure");
    let ends = land_ends(&a);
    assert_eq!(ends, vec!["c:validation_failed", "d:behind"]);
}

/// Batches (`landing.batch`): with a window of one, what waits is taken
/// as one candidate of up to the batch's size; the rest waits its turn.
#[test]
fn a_batch_takes_up_to_its_size_of_what_waits_with_a_window_of_one() {
    let mut m = model_with(&INDEPENDENT[..6], 6, 3, None);
    m.policy.speculate = 1;
    m.policy.batch = 4;
    m.window = 1;
    let reqs = begin(&mut m);
    assert_eq!(reqs.len(), 6);
    let a = handle(&mut m, finished(&reqs[0], Verdict::Done), t0());
    assert_eq!(lands(&a), vec![0], "alone in the queue: a landing of one");
    for r in &reqs[1..] {
        handle(&mut m, finished(r, Verdict::Done), t0());
    }
    let a = land(&mut m, 0, landed_as(0), t0());
    let taken: Vec<usize> = a
        .iter()
        .filter_map(|x| match x {
            Action::LandChain(asks) => Some(asks.iter().map(|l| l.idx).collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(
        taken,
        vec![1, 2, 3, 4],
        "one batch of four; the fifth waits"
    );
    assert_eq!(m.land_queue.len(), 1);
}

/// Issue 33 item 4: where validated work goes is the transition's
/// decision, sent with the land request.
#[test]
fn the_landing_plan_is_decided_here_and_sent_with_the_request() {
    use crate::run::events::LandPlan::*;
    use crate::run::model::LandingMode;
    use crate::run::transition::landing::plan;
    let mode = |review, pr| LandingMode { review, pr };
    let cases = [
        (mode(false, false), false, Land),
        (mode(true, false), false, Review),
        (mode(true, false), true, Land),
        (mode(false, true), false, PullRequest),
        (mode(false, true), true, PullRequest),
        (mode(true, true), false, Review),
        (mode(true, true), true, PullRequest),
    ];
    for (m, approved, want) in cases {
        assert_eq!(plan(m, approved), want, "{m:?} approved={approved}");
    }
    let mut m = model_with(&[("1.1", &[])], 1, 3, None);
    m.policy.landing_mode = mode(true, false);
    let req = begin(&mut m).remove(0);
    let a = handle(&mut m, finished(&req, Verdict::Done), t0());
    assert!(
        a.iter()
            .any(|x| matches!(x, Action::Land { plan: Review, .. })),
        "{a:?}"
    );
}
