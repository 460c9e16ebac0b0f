//! The run as a whole: dispatch (retries, memory, predicted clashes,
//! fallback agents, staggered starts), signals and the iteration limit,
//! splits and the run's selection, finishing, and the records it writes.

use super::*;

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
        let a = if let Some(&landing) = m.landing.first() {
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
        while let Some(&l) = m.landing.first() {
            a.extend(land(&mut m, l.idx, landed_as(l.idx), t0()));
        }
        running.extend(starts(&a));
        assert!(running_retries(&m) <= 1, "{:?}", m.slots);
        assert!(m.slots.iter().flatten().count() >= running.len().min(1));
    }
    assert!(is_over(&m));
    assert_eq!(m.count(StoryState::Done), 6);
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

/// `run -s b` after `a` landed counts b alone, and its summary's tokens
/// and cost are this run's (issue 13: it printed "2/2 done" with lifetime
/// totals).
#[test]
fn a_run_of_one_story_counts_that_story_and_this_runs_cost() {
    let stories = vec![story("a", &[]), story("b", &[])];
    let backlog = Backlog::one_batch(stories.clone());
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

/// A model over `INDEPENDENT[..n]` whose stories' specs name `named` paths.
fn model_naming(n: usize, jobs: usize, named: &[(usize, &str)]) -> Model {
    let mut stories: Vec<Story> = INDEPENDENT[..n]
        .iter()
        .map(|(id, deps)| story(id, deps))
        .collect();
    for &(i, p) in named {
        stories[i].named.push(p.to_string());
    }
    super::super::super::model::test_model(stories, jobs, 3, None, t0())
}

#[test]
fn a_path_named_in_prose_keeps_two_stories_apart_while_other_work_is_ready() {
    // a and b both name shared.txt in their specs' prose: b waits for a,
    // c takes the second slot.
    let mut m = model_naming(4, 2, &[(0, "shared.txt"), (1, "shared.txt")]);
    let first = begin(&mut m);
    assert_eq!(first.iter().map(|r| r.idx).collect::<Vec<_>>(), [0, 2]);
    // With the prediction off, file order alone.
    let mut m = model_naming(4, 2, &[(0, "shared.txt"), (1, "shared.txt")]);
    m.policy.predict_files = false;
    m.refresh_files(0);
    m.refresh_files(1);
    let first = begin(&mut m);
    assert_eq!(first.iter().map(|r| r.idx).collect::<Vec<_>>(), [0, 1]);
}

#[test]
fn a_file_a_running_agent_edits_keeps_a_story_naming_it_waiting() {
    // Only c's spec names notes.md; a's agent is seen editing it.
    let mut m = model_naming(4, 2, &[(2, "notes.md")]);
    let first = begin(&mut m);
    assert_eq!(first.iter().map(|r| r.idx).collect::<Vec<_>>(), [0, 1]);
    assert!(handle(
        &mut m,
        Event::Editing {
            idx: 0,
            path: "notes.md".into()
        },
        t0()
    )
    .is_empty());
    // b finishes: c clashes with a, which is still editing; d goes first.
    let a = handle(&mut m, finished(&first[1], Verdict::Done), t0());
    assert_eq!(starts(&a).iter().map(|r| r.idx).collect::<Vec<_>>(), [3]);
    // What a touched is kept in the state for its next attempt, until it lands.
    assert_eq!(
        m.state.touched_paths.get("a"),
        Some(&vec!["notes.md".to_string()])
    );
    // An edit reported for a story that no longer runs changes nothing.
    handle(
        &mut m,
        Event::Editing {
            idx: 1,
            path: "late.md".into(),
        },
        t0(),
    );
    assert!(!m.files[1].contains(&"late.md".to_string()));
}

#[test]
fn files_touched_in_an_earlier_run_are_predicted_in_the_next() {
    let mut m = model_naming(4, 2, &[(2, "lib.rs")]);
    m.state
        .touched_paths
        .insert("a".into(), vec!["lib.rs".into()]);
    m.refresh_files(0);
    // a touched lib.rs before (a killed run, a failed attempt): it and c,
    // whose spec names lib.rs, do not start together.
    let first = begin(&mut m);
    assert_eq!(first.iter().map(|r| r.idx).collect::<Vec<_>>(), [0, 1]);
    let a = handle(&mut m, finished(&first[1], Verdict::Done), t0());
    assert_eq!(starts(&a).iter().map(|r| r.idx).collect::<Vec<_>>(), [3]);
}

#[test]
fn the_totals_carry_an_eta_only_with_a_forecast() {
    let mut m = model_with(&INDEPENDENT[..4], 2, 3, None);
    let now = t0();
    let first = begin(&mut m);
    assert_eq!(first.len(), 2);
    assert_eq!(super::super::finish::totals(&m, Some(now)).eta_secs, None);
    // 60 s each: two running (just started), two waiting, two agents.
    m.expected_secs = Some(vec![60.0; 4]);
    let eta = super::super::finish::totals(&m, Some(now))
        .eta_secs
        .unwrap();
    assert!((eta - 120.0).abs() < 1.0, "{eta}");
    // 30 s later, half of the running ones is left.
    let eta = m.eta_secs(later(now, 30)).unwrap();
    assert!((eta - 90.0).abs() < 1.0, "{eta}");
}

/// Issue 33 item 4: a tracker's news reaches the model through the
/// transition only; new starts wait until the run reads its backlog again.
#[test]
fn a_changed_tracker_backlog_holds_new_starts_until_the_reload() {
    let mut m = model_with(&INDEPENDENT, 1, 3, None);
    let first = begin(&mut m);
    assert_eq!(first.len(), 1);
    let a = handle(
        &mut m,
        Event::BacklogChanged {
            describe: "GitHub o/r".into(),
        },
        t0(),
    );
    assert!(m.reload_pending);
    assert!(
        a.iter()
            .any(|x| matches!(x, Action::Log(l) if l.contains("GitHub o/r changed"))),
        "{a:?}"
    );
    let a = handle(&mut m, finished(&first[0], Verdict::Done), t0());
    assert!(starts(&a).is_empty(), "nothing new starts: {a:?}");
}
