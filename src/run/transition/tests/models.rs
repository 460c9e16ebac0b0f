//! Which model each attempt runs on (issue 25): the escalation ladder
//! through the transition, and budgets that look ahead.

use super::*;
use crate::agent::Rung;
use crate::run::model::Models;

fn ladder(m: &mut Model) {
    m.policy.models = Models {
        ladder: ["haiku", "sonnet", "opus"]
            .map(|r| Rung {
                agent: None,
                model: r.into(),
            })
            .to_vec(),
        base: None,
        pinned: None,
    };
}

fn model_of(req: &AttemptRequest) -> &str {
    req.model.as_deref().unwrap_or("")
}

fn finish_with(m: &mut Model, req: &AttemptRequest, verdict: Verdict, cost: f64) -> Vec<Action> {
    let mut r = AttemptReport::empty(req, verdict, String::new());
    r.agent = Some(req.agent.name());
    r.cost_usd = cost;
    handle(m, Event::AttemptFinished(Box::new(r)), t0())
}

#[test]
fn a_story_failing_twice_climbs_three_rungs_and_stays_on_the_top() {
    let mut m = model_with(&[("a", &[])], 1, 4, None);
    ladder(&mut m);
    let mut req = begin(&mut m).remove(0);
    let mut seen = vec![model_of(&req).to_string()];
    for _ in 0..3 {
        req = starts(&finish_with(&mut m, &req, failed("red"), 0.1)).remove(0);
        seen.push(model_of(&req).to_string());
    }
    assert_eq!(seen, ["haiku", "sonnet", "opus", "opus"]);
    assert_eq!(
        m.state.attempt("a", 1).unwrap().model.as_deref(),
        Some("haiku")
    );
}

#[test]
fn a_usage_limit_does_not_move_a_story_up() {
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    ladder(&mut m);
    let req = begin(&mut m).remove(0);
    let now = t0();
    let limit = Verdict::RateLimited {
        resets_at: Some((now.unix + 60) as u64),
    };
    handle(&mut m, finished(&req, limit), now);
    let again = starts(&handle(&mut m, Event::Timer, later(now, 120))).remove(0);
    assert_eq!(model_of(&again), "haiku");
}

#[test]
fn a_fixup_continues_on_the_model_whose_work_it_fixes() {
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    ladder(&mut m);
    let first = begin(&mut m).remove(0);
    let second = starts(&finish_with(&mut m, &first, failed("red"), 0.1)).remove(0);
    assert_eq!(model_of(&second), "sonnet");
    let fixup = fixup_after_session(&mut m, &second, "s-1");
    assert_eq!(fixup.kind, AttemptKind::Fixup);
    assert_eq!(model_of(&fixup), "sonnet");
}

#[test]
fn a_story_model_or_effort_picks_the_first_rung_and_a_pin_holds() {
    let mut m = model_with(&[("a", &[]), ("b", &[]), ("c", &[])], 3, 3, None);
    ladder(&mut m);
    m.stories[0].model.model = Some("sonnet".into());
    m.stories[1].model.effort = Some(crate::backlog::Effort::High);
    let got: Vec<String> = begin(&mut m)
        .iter()
        .map(|r| model_of(r).to_string())
        .collect();
    assert_eq!(got, ["sonnet", "opus", "haiku"]);
    let mut p = model_with(&[("a", &[])], 1, 3, None);
    ladder(&mut p);
    p.policy.models.pinned = Some("pinned".into());
    assert_eq!(model_of(&begin(&mut p)[0]), "pinned");
}

#[test]
fn a_fallback_backend_gets_no_model_meant_for_another() {
    let mut m = model_with(&[("a", &[])], 1, 3, None);
    ladder(&mut m);
    m.policy.agents = vec![Backend::Claude, Backend::Codex];
    m.state
        .paused_until
        .insert("claude".into(), t0().unix + 600);
    let req = begin(&mut m).remove(0);
    assert_eq!((req.agent, req.model.as_deref()), (Backend::Codex, None));
}

#[test]
fn the_budget_counts_what_running_attempts_are_expected_to_cost() {
    // $1 an attempt, $4.5 to spend, four jobs: without the look ahead a
    // fifth and sixth would start at $3 spent with three running ($7).
    let mut m = model_with(&INDEPENDENT, 4, 3, None);
    m.policy.budget.run_usd = Some(4.5);
    let mut running = begin(&mut m);
    assert_eq!(running.len(), 4, "nothing known yet: the first wave starts");
    let mut started = running.len();
    while let Some(req) = running.pop() {
        let a = finish_with(&mut m, &req, Verdict::Done, 1.0);
        for &i in lands(&a).iter() {
            land(&mut m, i, landed_as(i), t0());
        }
        let new = starts(&a);
        started += new.len();
        running.extend(new);
        let ahead = running.len() as f64;
        assert!(
            m.run_cost_usd + ahead <= 4.5 + 1.0,
            "spent {} with {ahead} running",
            m.run_cost_usd
        );
    }
    assert!(m.run_cost_usd <= 4.5 + 1.0, "{}", m.run_cost_usd);
    assert_eq!(started, 5);
}

#[test]
fn a_story_past_its_own_budget_fails_as_after_its_last_retry() {
    let mut m = model_with(&[("a", &[]), ("b", &[])], 1, 5, None);
    m.policy.budget.story_usd = Some(1.0);
    let req = begin(&mut m).remove(0);
    let a = finish_with(&mut m, &req, failed("red"), 0.4);
    let next = starts(&a).remove(0);
    assert_eq!(m.id(next.idx), "a", "under its budget it is retried");
    let a = finish_with(&mut m, &next, failed("red"), 0.7);
    assert_eq!(m.state.status("a"), Status::Failed);
    assert_eq!(m.state.record("a").unwrap().attempts, 2);
    assert!(starts(&a).iter().all(|r| m.id(r.idx) == "b"));
}
