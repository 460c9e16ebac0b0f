//! Best of N (issue 36): a race's start, its candidates' ends, the merge
//! queue judging them one at a time, the winner, a lost race.

use super::*;
use crate::run::model::CandState;

/// Story a raced by `n` candidates (its `best_of:`), b run alone, with
/// `jobs` slots.
fn racing(n: u32, jobs: usize) -> Model {
    let mut m = model_with(&[("a", &[]), ("b", &[])], jobs, 3, None);
    m.stories[0].model.best_of = Some(n);
    m
}

/// The requests of story a's candidates.
fn of_a(reqs: Vec<AttemptRequest>) -> Vec<AttemptRequest> {
    reqs.into_iter().filter(|r| r.idx == 0).collect()
}

fn candidates(reqs: &[AttemptRequest]) -> Vec<(usize, Option<u32>)> {
    reqs.iter().map(|r| (r.idx, r.candidate)).collect()
}

fn kept(actions: &[Action]) -> Vec<u32> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::KeepCandidate { k, .. } => Some(*k),
            _ => None,
        })
        .collect()
}

fn stopped(actions: &[Action]) -> Vec<usize> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::StopAttempt { slot } => Some(*slot),
            _ => None,
        })
        .collect()
}

fn ends(actions: &[Action]) -> Vec<(u32, String, bool)> {
    records(actions)
        .into_iter()
        .filter_map(|e| match e {
            Ev::CandidateEnd {
                candidate,
                outcome,
                winner,
                ..
            } => Some((candidate, outcome, winner)),
            _ => None,
        })
        .collect()
}

#[test]
fn best_of_one_starts_one_attempt_as_ever() {
    let mut m = racing(1, 4);
    let reqs = begin(&mut m);
    assert_eq!(candidates(&reqs), vec![(0, None), (1, None)]);
    assert!(m.racing.is_empty());
    // The config's, over which a story's `best_of:` and `--best-of` win.
    let mut m = racing(1, 4);
    m.policy.best_of.config = 2;
    m.policy.best_of.cli = Some(3);
    let reqs = begin(&mut m);
    assert_eq!(reqs.iter().filter(|r| r.candidate.is_some()).count(), 4);
}

#[test]
fn candidates_take_the_slots_there_are_and_the_rest_wait() {
    let mut m = racing(3, 2);
    let reqs = begin(&mut m);
    // Two slots: two candidates of the first story; the other story and
    // the third candidate wait.
    assert_eq!(candidates(&reqs), vec![(0, Some(1)), (0, Some(2))]);
    assert!(reqs.iter().all(|r| r.attempt == 1));
    let a = handle(&mut m, finished(&reqs[0], failed("tests broke")), t0());
    assert_eq!(candidates(&starts(&a)), vec![(0, Some(3))]);
    assert_eq!(m.state.record("a").unwrap().attempts, 0, "not charged yet");
    let rows = &m.state.record("a").unwrap().candidates;
    let states: Vec<&str> = rows.iter().map(|r| r.state.as_str()).collect();
    assert_eq!(states, ["failed", "running", "running"]);
}

#[test]
fn the_first_to_land_wins_and_the_others_are_stopped_and_kept() {
    let mut m = racing(3, 4);
    let reqs = begin(&mut m);
    assert_eq!(reqs.len(), 4, "one slot left for the other story: {reqs:?}");
    let reqs = of_a(reqs);
    let a = handle(&mut m, finished(&reqs[0], failed("tests broke")), t0());
    assert_eq!(kept(&a), vec![1], "a failed candidate's work is kept");
    let a = handle(&mut m, finished(&reqs[2], Verdict::Done), t0());
    assert!(a.contains(&Action::AdoptCandidate {
        id: "a".into(),
        k: 3
    }));
    assert_eq!(lands(&a), vec![0]);
    let a = land(&mut m, 0, landed_as(0), t0());
    assert_eq!(stopped(&a), vec![reqs[1].slot], "candidate 2 is stopped");
    assert_eq!(m.state.record("a").unwrap().status, Status::Done);
    assert_eq!(
        ends(&a),
        vec![(3, "won".to_string(), true)],
        "candidate 2 ends when its report is in"
    );
    let a = handle(&mut m, finished(&reqs[1], Verdict::Interrupted), t0());
    assert_eq!(ends(&a), vec![(2, "stopped".to_string(), false)]);
    assert_eq!(kept(&a), vec![2]);
    assert!(m.racing.is_empty(), "the race is over");
    let rec = m.state.record("a").unwrap();
    assert_eq!(rec.attempts, 0, "no failure charged");
    assert_eq!(rec.history.len(), 1, "one attempt on record");
    assert!(rec.candidates.is_empty());
}

fn states(actions: &[Action]) -> Vec<(u32, String)> {
    records(actions)
        .into_iter()
        .filter_map(|e| match e {
            Ev::CandidateState {
                candidate, state, ..
            } => Some((candidate, state)),
            _ => None,
        })
        .collect()
}

/// The web view folds the records: a candidate's changes between its
/// start and its end are recorded, once each.
#[test]
fn a_candidates_state_between_its_start_and_end_is_recorded() {
    let mut m = racing(2, 4);
    let reqs = of_a(begin(&mut m));
    let a = handle(&mut m, finished(&reqs[0], Verdict::Done), t0());
    assert_eq!(states(&a), vec![(1, "validating".to_string())]);
    let a = land(&mut m, 0, landed_as(0), t0());
    assert_eq!(
        states(&a),
        vec![(2, "stopped".to_string())],
        "the winner's is its candidate_end"
    );
    assert_eq!(ends(&a), vec![(1, "won".to_string(), true)]);
    let a = handle(&mut m, finished(&reqs[1], Verdict::Interrupted), t0());
    assert!(states(&a).is_empty(), "its end says it: {a:?}");
    assert_eq!(ends(&a), vec![(2, "stopped".to_string(), false)]);
}

#[test]
fn a_candidate_whose_work_fails_validation_lets_the_next_done_one_land() {
    let mut m = racing(2, 4);
    let reqs = of_a(begin(&mut m));
    handle(&mut m, finished(&reqs[0], Verdict::Done), t0());
    let a = handle(&mut m, finished(&reqs[1], Verdict::Done), t0());
    assert!(lands(&a).is_empty(), "one candidate in the queue at a time");
    let a = land(&mut m, 0, validation_failed(1), t0());
    assert!(a.contains(&Action::AdoptCandidate {
        id: "a".into(),
        k: 2
    }));
    let race = &m.racing[&0];
    assert_eq!(race.get(1).unwrap().state, CandState::Failed);
    let a = land(&mut m, 0, landed_as(0), t0());
    assert_eq!(ends(&a), vec![(2, "won".to_string(), true)]);
    assert!(m.racing.is_empty());
    assert_eq!(m.state.record("a").unwrap().status, Status::Done);
}

#[test]
fn no_candidate_passing_is_one_failed_attempt_told_every_failure() {
    let mut m = racing(2, 2);
    let reqs = of_a(begin(&mut m));
    handle(&mut m, finished(&reqs[0], failed("tests broke")), t0());
    let a = handle(&mut m, finished(&reqs[1], Verdict::Done), t0());
    assert_eq!(lands(&a), vec![0]);
    let a = land(&mut m, 0, validation_failed(1), t0());
    let rec = m.state.record("a").unwrap();
    assert_eq!(rec.attempts, 1, "one failed attempt");
    assert_eq!(rec.history.len(), 1);
    let note = rec.note.as_ref().unwrap().text.clone();
    assert!(note.contains("candidate 1 (claude): tests broke"), "{note}");
    assert!(
        note.contains("candidate 2 (claude): its work failed validation"),
        "{note}"
    );
    // The retry races again, told of both: b took one of the two slots,
    // so one candidate starts and the other waits for a slot.
    let again = of_a(starts(&a));
    assert_eq!(candidates(&again), vec![(0, Some(1))]);
    assert_eq!(m.racing[&0].next_waiting(), Some(2));
    // Candidate 2's work came closest (candidate 1 has none to fix up):
    // the retry's candidate 1 fixes it up, told the race's note too.
    assert!(again
        .iter()
        .all(|r| r.attempt == 2 && r.kind == AttemptKind::Fixup));
    let told = again[0].note.as_ref().unwrap().text.clone();
    assert!(told.contains("candidate 1 (claude): tests broke"), "{told}");
}

/// A landing of story a's candidate work that failed required check `name`.
fn check_failed(name: &str, tail: &str) -> LandResult {
    LandResult::ValidationFailed {
        name: name.into(),
        cmd: format!("make {name}"),
        tail: tail.into(),
        saved_ref: None,
        log_rel: format!(".ralph/logs/a/validation-{name}.log"),
    }
}

#[test]
fn a_lost_races_closest_work_is_the_next_races_first_candidates_fixup() {
    let mut m = racing(3, 4);
    m.policy.best_of.checks = ["build", "test", "lint"].map(String::from).to_vec();
    let reqs = of_a(begin(&mut m));
    // 1 fails the last check, 2 the first, 3 never says DONE.
    handle(&mut m, finished(&reqs[1], Verdict::Done), t0());
    handle(&mut m, finished(&reqs[0], Verdict::Done), t0());
    land(&mut m, 0, check_failed("build", "build broke"), t0());
    handle(&mut m, finished(&reqs[2], failed("gave up")), t0());
    let a = land(&mut m, 0, check_failed("lint", "LINT: 1 warning"), t0());
    assert_eq!(
        m.state.record("a").unwrap().attempts,
        1,
        "one failed attempt"
    );
    let closest = records(&a)
        .into_iter()
        .find_map(|e| match e {
            Ev::CandidateClosest {
                candidate,
                work,
                reason,
                ..
            } => Some((candidate, work, reason)),
            _ => None,
        })
        .expect("the closest candidate recorded");
    assert_eq!(closest.0, 1);
    assert_eq!(closest.1, "refs/ralph/candidates/a/1/1");
    assert!(
        closest.2.contains("1: failed check 3 of 3 (lint)"),
        "{}",
        closest.2
    );
    assert!(
        closest.2.contains("2: failed check 1 of 3 (build)"),
        "{}",
        closest.2
    );
    // The next race: candidate 1 fixes up that work with its failure's
    // output; the others start over, told every candidate's failure.
    let again = of_a(starts(&a));
    assert_eq!(
        candidates(&again),
        vec![(0, Some(1)), (0, Some(2)), (0, Some(3))]
    );
    let fixup = again[0].note.as_ref().and_then(|n| n.fixup.clone());
    assert_eq!(again[0].kind, AttemptKind::Fixup);
    let fixup = fixup.expect("candidate 1's note names the work");
    assert_eq!(fixup.work, "refs/ralph/candidates/a/1/1");
    assert_eq!(fixup.attempt, 1);
    assert!(
        matches!(&fixup.cause, FixupCause::Validation { name, tail, .. }
            if name == "lint" && tail.contains("LINT: 1 warning")),
        "{fixup:?}"
    );
    for r in &again[1..] {
        assert_eq!(r.kind, AttemptKind::Redo);
        let note = r.note.as_ref().unwrap();
        assert!(note.fixup.is_none() && note.closest.is_none(), "{note:?}");
        assert!(
            note.text.contains("failed validation build"),
            "{}",
            note.text
        );
        assert!(
            note.text.contains("failed validation lint"),
            "{}",
            note.text
        );
    }
    // A fix-up that fails is not fixed up again: with nothing else
    // reaching the queue, the race after it starts every candidate over.
    let a = handle(&mut m, finished(&again[0], Verdict::Done), t0());
    assert_eq!(lands(&a), vec![0]);
    handle(&mut m, finished(&again[1], failed("no")), t0());
    handle(&mut m, finished(&again[2], failed("no")), t0());
    let a = land(&mut m, 0, check_failed("lint", "still"), t0());
    assert!(records(&a)
        .iter()
        .all(|e| !matches!(e, Ev::CandidateClosest { .. })));
    let third = of_a(starts(&a));
    assert_eq!(third.len(), 3);
    assert!(
        third
            .iter()
            .all(|r| r.kind == AttemptKind::Redo
                && r.note.as_ref().is_some_and(|n| n.fixup.is_none())),
        "{third:?}"
    );
}

#[test]
fn a_lost_race_with_no_work_to_fix_up_starts_every_candidate_over() {
    let mut m = racing(2, 4);
    let reqs = of_a(begin(&mut m));
    handle(&mut m, finished(&reqs[0], failed("stuck")), t0());
    let a = handle(&mut m, finished(&reqs[1], failed("lost")), t0());
    assert!(records(&a)
        .iter()
        .all(|e| !matches!(e, Ev::CandidateClosest { .. })));
    assert_eq!(m.state.note("a").unwrap().closest, None);
    let again = of_a(starts(&a));
    assert_eq!(candidates(&again), vec![(0, Some(1)), (0, Some(2))]);
    assert!(again.iter().all(|r| r.kind == AttemptKind::Redo));
}

#[test]
fn a_lost_race_that_fails_the_story_for_good_hands_no_work_on() {
    let mut m = racing(2, 4);
    m.policy.max_retries = 1;
    let reqs = of_a(begin(&mut m));
    handle(&mut m, finished(&reqs[0], failed("stuck")), t0());
    handle(&mut m, finished(&reqs[1], Verdict::Done), t0());
    let a = land(&mut m, 0, check_failed("tests", "broke"), t0());
    assert_eq!(m.state.record("a").unwrap().status, Status::Failed);
    assert!(records(&a)
        .iter()
        .all(|e| !matches!(e, Ev::CandidateClosest { .. })));
    assert!(m.state.note("a").is_none_or(|n| n.closest.is_none()));
}

#[test]
fn a_winner_kept_for_review_that_then_fails_validation_gets_an_ordinary_fixup() {
    let mut m = racing(2, 4);
    m.policy.landing_mode.review = true;
    let reqs = of_a(begin(&mut m));
    handle(&mut m, finished(&reqs[0], Verdict::Done), t0());
    let a = land(&mut m, 0, LandResult::InReview, t0());
    assert_eq!(stopped(&a), vec![reqs[1].slot]);
    handle(&mut m, finished(&reqs[1], Verdict::Interrupted), t0());
    assert!(m.racing.is_empty(), "the race is over: candidate 1 won");
    assert_eq!(m.state.record("a").unwrap().status, Status::Review);
    // `ralph land a` while the run goes on: its landing fails validation.
    handle(
        &mut m,
        Event::Steer {
            req: 1,
            cmd: crate::steer::Command::Land { id: "a".into() },
        },
        t0(),
    );
    let a = land(&mut m, 0, validation_failed(1), t0());
    let next = of_a(starts(&a));
    assert_eq!(candidates(&next), vec![(0, None)], "one attempt, no race");
    assert_eq!(next[0].kind, AttemptKind::Fixup);
    let fixup = next[0].note.as_ref().and_then(|n| n.fixup.clone()).unwrap();
    assert_eq!(fixup.work, "refs/ralph/attempts/a/1");
}

#[test]
fn candidates_run_as_attempts_candidates_says() {
    let mut m = racing(3, 4);
    m.policy.best_of.candidates = ["claude:fast", "codex:gpt-5"]
        .iter()
        .map(|e| crate::config::CandidateSpec::parse(e).unwrap())
        .collect();
    let reqs = of_a(begin(&mut m));
    let who: Vec<(Backend, Option<&str>)> = reqs
        .iter()
        .filter(|r| r.candidate.is_some())
        .map(|r| (r.agent, r.model.as_deref()))
        .collect();
    assert_eq!(
        who,
        vec![
            (Backend::Claude, Some("fast")),
            (Backend::Codex, Some("gpt-5")),
            (Backend::Claude, Some("fast"))
        ]
    );
}

fn plans(actions: &[Action]) -> Vec<crate::run::events::LandPlan> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Land { plan, .. } => Some(*plan),
            _ => None,
        })
        .collect()
}

fn done_with_diff(req: &AttemptRequest, lines: u64) -> Event {
    let Event::AttemptFinished(mut r) = finished(req, Verdict::Done) else {
        unreachable!()
    };
    r.diff_lines = Some(lines);
    Event::AttemptFinished(r)
}

#[test]
fn judge_validates_every_done_candidate_then_lands_the_smallest_passing_diff() {
    use crate::run::events::LandPlan;
    let mut m = racing(3, 4);
    m.policy.best_of.pick = crate::config::Pick::Judge;
    let reqs = of_a(begin(&mut m));
    let a = handle(&mut m, done_with_diff(&reqs[0], 40), t0());
    assert_eq!(plans(&a), vec![LandPlan::Review], "judged, not landed");
    handle(&mut m, done_with_diff(&reqs[1], 12), t0());
    let a = land(&mut m, 0, LandResult::InReview, t0());
    assert_eq!(plans(&a), vec![LandPlan::Review], "the next one judged");
    assert!(stopped(&a).is_empty(), "nobody is stopped while judging");
    assert_eq!(m.racing[&0].get(1).unwrap().state, CandState::Passed);
    let a = land(&mut m, 0, LandResult::InReview, t0());
    assert!(plans(&a).is_empty(), "candidate 3 still runs");
    let a = handle(&mut m, finished(&reqs[2], failed("gave up")), t0());
    // Every candidate is in: the ranking picks 2 (12 lines), which lands.
    assert!(a.contains(&Action::AdoptCandidate {
        id: "a".into(),
        k: 2
    }));
    assert_eq!(plans(&a), vec![LandPlan::Land]);
    let pick = records(&a)
        .into_iter()
        .find_map(|e| match e {
            Ev::CandidatePick {
                candidate, reason, ..
            } => Some((candidate, reason)),
            _ => None,
        })
        .unwrap();
    assert_eq!(pick.0, 2);
    assert!(pick.1.contains("2: 0 finding(s), 12 line(s)"), "{}", pick.1);
    let a = land(&mut m, 0, landed_as(0), t0());
    assert_eq!(
        ends(&a),
        vec![
            (1, "passed".to_string(), false),
            (2, "won".to_string(), true)
        ]
    );
    assert_eq!(kept(&a), vec![1]);
    assert!(m.racing.is_empty());
    assert_eq!(m.state.record("a").unwrap().status, Status::Done);
}

fn judge_asks(actions: &[Action]) -> Vec<crate::run::events::JudgeAsk> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Judge(ask) => Some(ask.clone()),
            _ => None,
        })
        .collect()
}

/// Story a raced by two candidates, both passed, its judge asked.
fn judged_race() -> (Model, crate::run::events::JudgeAsk) {
    let mut m = racing(2, 4);
    m.policy.best_of.pick = crate::config::Pick::Judge;
    m.policy.best_of.judge = crate::config::CandidateSpec::parse("claude:opus").ok();
    let reqs = of_a(begin(&mut m));
    handle(&mut m, done_with_diff(&reqs[0], 5), t0());
    handle(&mut m, done_with_diff(&reqs[1], 50), t0());
    land(&mut m, 0, LandResult::InReview, t0());
    let a = land(&mut m, 0, LandResult::InReview, t0());
    assert!(
        plans(&a).is_empty(),
        "nothing lands before the judge answers"
    );
    let mut asks = judge_asks(&a);
    assert_eq!(asks.len(), 1);
    assert!(m.busy(), "the run waits for its judge");
    (m, asks.remove(0))
}

fn answer(ask: &crate::run::events::JudgeAsk, pick: Option<u32>) -> Event {
    Event::Judged(crate::run::events::JudgeReport {
        idx: ask.idx,
        attempt: ask.attempt,
        pick,
        reason: "2 is clearer".into(),
        usage: Default::default(),
        cost_usd: 0.25,
        cost_unknown: false,
    })
}

fn pick_of(actions: &[Action]) -> Option<(u32, String)> {
    records(actions).into_iter().find_map(|e| match e {
        Ev::CandidatePick { candidate, by, .. } => Some((candidate, by)),
        _ => None,
    })
}

#[test]
fn a_judges_valid_pick_lands_and_costs_the_story() {
    let (mut m, ask) = judged_race();
    assert_eq!(ask.agent, Backend::Claude);
    assert_eq!(ask.model.as_deref(), Some("opus"));
    let passing: Vec<u32> = ask.passing.iter().map(|p| p.0).collect();
    assert_eq!(passing, vec![1, 2]);
    let a = handle(&mut m, answer(&ask, Some(2)), t0());
    assert_eq!(pick_of(&a), Some((2, "judge".to_string())));
    assert!(a.contains(&Action::AdoptCandidate {
        id: "a".into(),
        k: 2
    }));
    assert_eq!(m.state.record("a").unwrap().cost_usd, 0.25);
}

#[test]
fn a_judge_without_a_valid_pick_leaves_it_to_the_ranking() {
    for pick in [None, Some(7)] {
        let (mut m, ask) = judged_race();
        let a = handle(&mut m, answer(&ask, pick), t0());
        // Candidate 1 has the smaller diff.
        assert_eq!(pick_of(&a), Some((1, "ranking".to_string())), "{pick:?}");
    }
}

/// Carries out what the run asks for in a table test of a budget: new
/// starts join `running`, landings land, a stopped candidate ends having
/// spent $1 as every other.
fn drive(m: &mut Model, actions: Vec<Action>, running: &mut Vec<AttemptRequest>) {
    running.extend(starts(&actions));
    for a in &actions {
        if let Action::StopAttempt { slot } = a {
            if let Some(i) = running.iter().position(|r| r.slot == *slot) {
                let req = running.remove(i);
                let mut r = AttemptReport::empty(&req, Verdict::Interrupted, String::new());
                r.cost_usd = 1.0;
                let next = handle(m, Event::AttemptFinished(Box::new(r)), t0());
                drive(m, next, running);
            }
        }
    }
    for i in lands(&actions) {
        let next = land(m, i, landed_as(i), t0());
        drive(m, next, running);
    }
}

#[test]
fn the_budget_is_overshot_by_one_candidates_cost_at_most() {
    // Six stories raced by three candidates each, $1 a candidate, $4.5 to
    // spend, four jobs.
    let mut m = model_with(&INDEPENDENT, 4, 3, None);
    for s in &mut m.stories {
        s.model.best_of = Some(3);
    }
    m.policy.budget.run_usd = Some(4.5);
    let mut running = Vec::new();
    let first = handle(&mut m, Event::Start { reland: vec![] }, t0());
    drive(&mut m, first, &mut running);
    assert_eq!(running.len(), 4, "nothing known yet: the first wave starts");
    while !running.is_empty() {
        let req = running.remove(0);
        let mut r = AttemptReport::empty(&req, Verdict::Done, String::new());
        r.cost_usd = 1.0;
        let a = handle(&mut m, Event::AttemptFinished(Box::new(r)), t0());
        drive(&mut m, a, &mut running);
        assert!(
            m.run_cost_usd <= 4.5 + 1.0 + running.len() as f64,
            "spent {} with {} running",
            m.run_cost_usd,
            running.len()
        );
    }
    // Once a candidate's cost was known, nothing started past the budget
    // but one candidate.
    assert!(m.run_cost_usd <= 4.5 + 1.0, "{}", m.run_cost_usd);
    assert!(
        m.run_cost_usd >= 4.5,
        "it spent its budget: {}",
        m.run_cost_usd
    );
}

#[test]
fn stopping_a_racing_story_stops_every_candidate_and_charges_nothing() {
    let mut m = racing(2, 4);
    let reqs = of_a(begin(&mut m));
    let a = handle(
        &mut m,
        Event::Steer {
            req: 1,
            cmd: crate::steer::Command::Stop { id: "a".into() },
        },
        t0(),
    );
    let mut slots = stopped(&a);
    slots.sort_unstable();
    assert_eq!(slots, vec![reqs[0].slot, reqs[1].slot]);
    handle(&mut m, finished(&reqs[0], Verdict::Interrupted), t0());
    handle(&mut m, finished(&reqs[1], Verdict::Interrupted), t0());
    let rec = m.state.record("a").unwrap();
    assert_eq!(rec.attempts, 0, "not charged");
    assert_eq!(rec.status, Status::Pending);
    assert!(m.racing.is_empty());
    assert!(m.is_held(0), "held until released");
}

#[test]
fn a_race_starts_only_when_the_budget_holds_all_its_candidates() {
    // x costs $1 and lands; then a and b, each raced by three candidates,
    // are ready with seven free slots and $5.5 to spend: a's three ($3
    // expected) fit beside the $1 spent, b's three more would not. Without
    // the reservation b's race started too, two of its candidates running
    // and the third left waiting for budget.
    let mut m = model_with(&[("x", &[]), ("a", &["x"]), ("b", &["x"])], 7, 3, None);
    for s in &mut m.stories[1..] {
        s.model.best_of = Some(3);
    }
    m.policy.budget.run_usd = Some(5.5);
    let x = begin(&mut m);
    assert_eq!(candidates(&x), vec![(0, None)]);
    let mut r = AttemptReport::empty(&x[0], Verdict::Done, String::new());
    r.cost_usd = 1.0;
    let a = handle(&mut m, Event::AttemptFinished(Box::new(r)), t0());
    assert!(starts(&a).is_empty(), "x lands first");
    let a = land(&mut m, 0, landed_as(0), t0());
    let started = starts(&a);
    assert_eq!(
        candidates(&started),
        vec![(1, Some(1)), (1, Some(2)), (1, Some(3))],
        "a's race starts whole, b waits"
    );
    assert!(!m.racing.contains_key(&2));
    // With nothing else running, b's race starts as an attempt would, its
    // candidates one by one while the budget holds.
    let mut running = started;
    while !running.is_empty() {
        let req = running.remove(0);
        let mut r = AttemptReport::empty(&req, Verdict::Done, String::new());
        r.cost_usd = 1.0;
        let a = handle(&mut m, Event::AttemptFinished(Box::new(r)), t0());
        drive(&mut m, a, &mut running);
        assert!(
            m.run_cost_usd <= 5.5 + 1.0,
            "overshot by more than one candidate: {}",
            m.run_cost_usd
        );
    }
}

/// What the display is told of story a's candidates: their rows as they
/// change (none once the race is over), and a line each at its start and
/// at its end.
fn shown_rows(actions: &[Action]) -> Vec<Vec<(u32, String)>> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Candidates { id, rows } if id == "a" => {
                Some(rows.iter().map(|r| (r.k, r.state.clone())).collect())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn the_display_is_told_each_candidates_row_start_end_and_node() {
    let mut m = racing(2, 4);
    let a = handle(&mut m, Event::Start { reland: vec![] }, t0());
    let reqs = of_a(starts(&a));
    let row = |k: u32, s: &str| (k, s.to_string());
    assert_eq!(
        shown_rows(&a).last(),
        Some(&vec![row(1, "running"), row(2, "running")])
    );
    let started: Vec<Message> = said(&a)
        .into_iter()
        .filter(|m| matches!(m, Message::CandidateStarted { .. }))
        .collect();
    assert_eq!(
        started,
        [1, 2].map(|k| Message::CandidateStarted {
            id: "a".into(),
            k,
            of: 2,
            who: "claude".into(),
        })
    );
    // Where each runs goes to its own row, its state row (`status --json`)
    // and the records; a placement of a candidate not running (or of
    // another attempt), or said again, is dropped.
    let placed = |attempt, k| Event::Placed {
        idx: 0,
        attempt,
        candidate: Some(k),
        node: "w2/0".into(),
    };
    let a = handle(&mut m, placed(1, 2), t0());
    assert_eq!(
        a[..2],
        [
            Action::Record(Ev::CandidatePlaced {
                story: "a".into(),
                attempt: 1,
                candidate: 2,
                node: "w2/0".into(),
            }),
            Action::Placed {
                id: "a".into(),
                candidate: Some(2),
                node: "w2/0".into()
            }
        ]
    );
    assert!(a.contains(&Action::Save), "{a:?}");
    let nodes = |m: &Model| -> Vec<Option<String>> {
        let rows = &m.state.record("a").unwrap().candidates;
        rows.iter().map(|r| r.node.clone()).collect()
    };
    assert_eq!(nodes(&m), [None, Some("w2/0".to_string())]);
    assert!(handle(&mut m, placed(1, 2), t0()).is_empty());
    assert!(handle(&mut m, placed(2, 1), t0()).is_empty());
    assert!(handle(&mut m, placed(1, 3), t0()).is_empty());
    assert_eq!(m.state.record("a").unwrap().running_on, None);
    // A row changes only when a state does.
    let a = handle(&mut m, finished(&reqs[0], Verdict::Done), t0());
    assert_eq!(
        shown_rows(&a),
        [vec![row(1, "validating"), row(2, "running")]]
    );
    let a = land(&mut m, 0, landed_as(0), t0());
    assert_eq!(shown_rows(&a), [vec![row(1, "won"), row(2, "stopped")]]);
    assert!(said(&a).contains(&Message::CandidateEnded {
        id: "a".into(),
        k: 1,
        of: 2,
        who: "claude".into(),
        outcome: "won".into(),
    }));
    let a = handle(&mut m, finished(&reqs[1], Verdict::Interrupted), t0());
    assert_eq!(shown_rows(&a), [Vec::<(u32, String)>::new()], "race over");
    assert!(said(&a).contains(&Message::CandidateEnded {
        id: "a".into(),
        k: 2,
        of: 2,
        who: "claude".into(),
        outcome: "stopped".into(),
    }));
}
