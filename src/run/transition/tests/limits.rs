//! Pauses and limits: usage limits, faults outside the story, a spent
//! budget, the circuit breaker, limit warnings, a failing model API.

use super::*;

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
    let backlog = Backlog::one_batch(stories.clone());
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
    assert_eq!(m.node(1), StoryState::Blocked);
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
    assert_eq!(m.node(1), StoryState::Pending, "b is no longer blocked");
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
