//! The trust gates' decisions (issue 26): the pure verdict over findings,
//! and what a gated landing does to the story.

use super::*;
use crate::config::TestsGate;
use crate::gates::{Finding, FindingKind};
use crate::run::transition::gates::{decide, GateContext, GateVerdict};
use crate::state::{Explained, GateDecision};

fn finding(kind: FindingKind) -> Finding {
    Finding {
        kind,
        file: "tests/a.rs".into(),
        line: Some(3),
        what: "x".into(),
    }
}

fn gated(kinds: &[FindingKind]) -> LandResult {
    LandResult::Gated {
        findings: kinds.iter().map(|k| finding(*k)).collect(),
        saved_ref: Some("refs/ralph/attempts/1.1/1".into()),
    }
}

#[test]
fn the_verdict_over_findings_mode_and_explanations() {
    use FindingKind::*;
    use GateVerdict::*;
    let tests_changed = Explained {
        tests_changed: Some("moved to tests/".into()),
        drops: None,
    };
    let drops = Explained {
        tests_changed: None,
        drops: Some("the menu is replaced".into()),
    };
    let ctx = |mode, spec_allows, explained: &Explained, after| GateContext {
        mode,
        spec_allows,
        explained: explained.clone(),
        after_gate_fixup: after,
    };
    let none = Explained::default();
    let fix = |k: &[FindingKind]| Fixup(k.iter().map(|k| finding(*k)).collect());
    let b = TestsGate::Block;
    let w = TestsGate::Warn;
    let cases: Vec<(&str, Vec<FindingKind>, GateContext, GateVerdict)> = vec![
        (
            "a skip, blocked",
            vec![SkipAdded],
            ctx(b, false, &none, false),
            fix(&[SkipAdded]),
        ),
        (
            "the agent explains itself",
            vec![TestRemoved],
            ctx(b, false, &tests_changed, false),
            Review(Some("TESTS_CHANGED: moved to tests/".into())),
        ),
        (
            "the spec allows it",
            vec![ValidationConfigChanged],
            ctx(b, true, &none, false),
            Review(Some("the spec allows test changes".into())),
        ),
        (
            "warn lands",
            vec![AssertionsLost],
            ctx(w, false, &none, false),
            Land,
        ),
        (
            "a gate fix-up that restored nothing goes to a person",
            vec![TestFileDeleted],
            ctx(b, false, &none, true),
            Review(None),
        ),
        (
            "lost lines block even in warn",
            vec![OtherSideLost, SkipAdded],
            ctx(w, false, &none, false),
            fix(&[OtherSideLost]),
        ),
        (
            "DROPS sends lost lines to review",
            vec![OtherSideLost],
            ctx(b, false, &drops, false),
            Review(Some("DROPS: the menu is replaced".into())),
        ),
        (
            "TESTS_CHANGED does not answer lost lines",
            vec![OtherSideLost, SkipAdded],
            ctx(b, false, &tests_changed, false),
            fix(&[OtherSideLost]),
        ),
        (
            "off ignores test findings",
            vec![SkipAdded],
            ctx(TestsGate::Off, false, &none, false),
            Land,
        ),
        (
            "a gate that could not read git goes to a person, even in warn",
            vec![GateError],
            ctx(w, false, &none, false),
            Review(Some("the gates could not read the work: x".into())),
        ),
        (
            "a gate error wins over what an agent could fix",
            vec![SkipAdded, GateError],
            ctx(b, false, &tests_changed, false),
            Review(Some("the gates could not read the work: x".into())),
        ),
    ];
    for (name, kinds, c, want) in cases {
        let found: Vec<Finding> = kinds.iter().map(|k| finding(*k)).collect();
        assert_eq!(decide(&found, &c), want, "{name}");
    }
}

#[test]
fn a_gate_that_could_not_read_git_sends_the_story_to_review() {
    let mut m = model_with(&[("1.1", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    handle(&mut m, finished(&req, Verdict::Done), t0());
    let a = land(&mut m, 0, gated(&[FindingKind::GateError]), t0());
    assert!(starts(&a).is_empty(), "no fix-up: {a:?}");
    assert_eq!(m.node(0), crate::schedule::StoryState::Review, "{a:?}");
}

#[test]
fn a_gated_landing_goes_back_as_a_fix_up_naming_the_findings_then_lands() {
    let mut m = model_with(&[("1.1", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    let a = handle(&mut m, finished(&req, Verdict::Done), t0());
    assert!(a.iter().any(|x| matches!(
        x,
        Action::Land { gates, .. } if gates.tests && gates.other_side_of.is_none()
    )));
    let a = land(&mut m, 0, gated(&[FindingKind::SkipAdded]), t0());
    let next = starts(&a).remove(0);
    assert_eq!(next.kind, AttemptKind::Fixup);
    let cause = next.note.clone().unwrap().fixup.unwrap().cause;
    assert!(
        matches!(&cause, FixupCause::Gate { findings, .. } if findings[0].kind == FindingKind::SkipAdded),
        "{cause:?}"
    );
    assert!(a.iter().any(|x| matches!(x, Action::Record(crate::runlog::Ev::Gate { decision, .. }) if decision == "fixup")));
    // Nothing charged: the work was finished.
    assert_eq!(m.state.record("1.1").unwrap().attempts, 0);
    handle(&mut m, finished(&next, Verdict::Done), t0());
    let a = land(&mut m, 0, landed_as(0), t0());
    assert_eq!(m.state.status("1.1"), Status::Done);
    assert!(said(&a).iter().any(|s| matches!(s, Message::Landed { .. })));
}

#[test]
fn a_gate_fix_up_that_restores_nothing_waits_for_a_person() {
    let mut m = model_with(&[("1.1", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    handle(&mut m, finished(&req, Verdict::Done), t0());
    let a = land(&mut m, 0, gated(&[FindingKind::TestRemoved]), t0());
    let next = starts(&a).remove(0);
    handle(&mut m, finished(&next, Verdict::Done), t0());
    land(&mut m, 0, gated(&[FindingKind::TestRemoved]), t0());
    assert_eq!(m.state.status("1.1"), Status::Review);
    let g = m.state.record("1.1").unwrap().gate.clone().unwrap();
    assert_eq!(g.decision, GateDecision::Review);
    // A person approves: the next landing runs no gate.
    m.state.approve("1.1");
    assert_eq!(
        m.state
            .record("1.1")
            .unwrap()
            .gate
            .as_ref()
            .unwrap()
            .decision,
        GateDecision::Approved
    );
    // The landing of the approved work runs no gate; a later attempt's
    // work is checked again.
    let held = m
        .state
        .record("1.1")
        .unwrap()
        .gate
        .as_ref()
        .unwrap()
        .attempt;
    let at = |attempt| crate::run::model::Landing {
        idx: 0,
        attempt,
        iteration: None,
        since: None,
        approved: false,
        tests_let_be: false,
        trial: false,
    };
    assert_eq!(
        crate::run::transition::gates::ask(&m, &at(held)),
        crate::run::events::GateAsk::default()
    );
    assert!(crate::run::transition::gates::ask(&m, &at(held + 1)).tests);
}

#[test]
fn warn_records_the_findings_and_lands_at_once_without_the_test_gate() {
    let mut m = model_with(&[("1.1", &[])], 1, 3, None);
    m.policy.tests_gate = TestsGate::Warn;
    let req = begin(&mut m).remove(0);
    handle(&mut m, finished(&req, Verdict::Done), t0());
    let a = land(&mut m, 0, gated(&[FindingKind::AssertionsLost]), t0());
    assert!(
        a.iter().any(|x| matches!(
            x,
            Action::Land { idx: 0, gates, .. } if !gates.tests
        )),
        "{a:?}"
    );
    assert!(starts(&a).is_empty());
    let g = m.state.record("1.1").unwrap().gate.clone().unwrap();
    assert_eq!(g.decision, GateDecision::Warned);
    land(&mut m, 0, landed_as(0), t0());
    assert_eq!(m.state.status("1.1"), Status::Done);
    assert!(
        m.state.record("1.1").unwrap().gate.is_some(),
        "the findings stay on record"
    );
}

#[test]
fn the_tests_changed_tag_holds_the_story_for_review() {
    let mut m = model_with(&[("1.1", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    let mut r = AttemptReport::empty(&req, Verdict::Done, String::new());
    r.explained.tests_changed = Some("the parser tests are obsolete".into());
    handle(&mut m, Event::AttemptFinished(Box::new(r)), t0());
    land(&mut m, 0, gated(&[FindingKind::TestFileDeleted]), t0());
    assert_eq!(m.state.status("1.1"), Status::Review);
    assert_eq!(
        m.state
            .record("1.1")
            .unwrap()
            .gate
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("TESTS_CHANGED: the parser tests are obsolete")
    );
}

#[test]
fn a_conflict_fix_up_lands_with_its_other_side_checked() {
    let mut m = model_with(&[("1.1", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    let next = fixup_after_session(&mut m, &req, "s");
    let a = handle(&mut m, finished(&next, Verdict::Done), t0());
    assert!(a.iter().any(|x| matches!(
        x,
        Action::Land { gates, .. } if gates.other_side_of.as_deref() == Some("refs/ralph/conflicts/x/1")
    )), "{a:?}");
    // The other story's lines are gone: a fix-up that still checks them.
    let a = land(&mut m, 0, gated(&[FindingKind::OtherSideLost]), t0());
    let again = starts(&a).remove(0);
    assert!(matches!(
        again.note.as_ref().unwrap().fixup.as_ref().unwrap().cause,
        FixupCause::Gate { ref other_side_of, .. } if other_side_of.as_deref() == Some("refs/ralph/conflicts/x/1")
    ));
    let a = handle(&mut m, finished(&again, Verdict::Done), t0());
    assert!(a.iter().any(|x| matches!(
        x,
        Action::Land { gates, .. } if gates.other_side_of.is_some()
    )));
}

fn review(verdict: crate::run::events::ReviewVerdict) -> crate::run::events::ReviewReport {
    crate::run::events::ReviewReport {
        verdict,
        usage: crate::agent::event::Usage {
            input_tokens: 10,
            ..Default::default()
        },
        cost_usd: 0.5,
        log_rel: ".ralph/logs/1.1/review-1.log".into(),
    }
}

#[test]
fn the_reviewer_asks_for_changes_up_to_max_rounds_then_a_person_decides() {
    use crate::run::events::ReviewVerdict::*;
    assert_eq!(
        crate::run::transition::gates::after_changes(1, 2),
        GateDecision::Fixup
    );
    assert_eq!(
        crate::run::transition::gates::after_changes(2, 2),
        GateDecision::Review
    );
    let mut m = model_with(&[("1.1", &[])], 1, 3, None);
    m.policy.review = Some(crate::config::ReviewGate {
        agent: crate::agent::Backend::Codex,
        model: None,
        max_rounds: 2,
    });
    let mut req = begin(&mut m).remove(0);
    for round in 1..=2 {
        let a = handle(&mut m, finished(&req, Verdict::Done), t0());
        assert!(a
            .iter()
            .any(|x| matches!(x, Action::Land { gates, .. } if gates.review.is_some())));
        let changes = LandResult::Reviewed {
            review: review(Changes(format!("round {round}: name the error"))),
            then: None,
            saved_ref: Some(format!("refs/ralph/attempts/1.1/{}", req.attempt)),
        };
        let a = land(&mut m, 0, changes, t0());
        assert!(a.iter().any(|x| matches!(x, Action::Record(crate::runlog::Ev::Review { verdict, .. }) if verdict == "changes")));
        if round < 2 {
            req = starts(&a).remove(0);
            assert!(matches!(
                &req.note.as_ref().unwrap().fixup.as_ref().unwrap().cause,
                FixupCause::Review { text } if text.starts_with(&format!("round {round}"))
            ));
        } else {
            assert!(starts(&a).is_empty());
        }
    }
    assert_eq!(m.state.status("1.1"), Status::Review);
    // The reviewer's two runs count to the story.
    assert!((m.state.record("1.1").unwrap().cost_usd - 1.0).abs() < 1e-9);
}

#[test]
fn an_approved_landing_ends_as_its_landing_did_with_the_reviewers_cost() {
    let mut m = model_with(&[("1.1", &[])], 1, 3, None);
    let req = begin(&mut m).remove(0);
    handle(&mut m, finished(&req, Verdict::Done), t0());
    let approved = LandResult::Reviewed {
        review: review(crate::run::events::ReviewVerdict::Approve),
        then: Some(Box::new(landed_as(0))),
        saved_ref: None,
    };
    let a = land(&mut m, 0, approved, t0());
    assert_eq!(m.state.status("1.1"), Status::Done);
    assert!(said(&a).iter().any(|s| matches!(s, Message::Landed { .. })));
    assert!((m.state.record("1.1").unwrap().cost_usd - 0.5).abs() < 1e-9);
    assert_eq!(
        post_hooks(&a).len(),
        1,
        "the hooks run once, for the landing"
    );
}
