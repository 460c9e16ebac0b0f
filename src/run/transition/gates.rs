//! The trust gates' decisions (issue 26): which gates a landing runs, and
//! what their findings lead to — a fix-up naming each one, review by a
//! person, or (`gates.tests: warn`) landing with the findings recorded.
//! The findings are data (`gates::Finding`); nothing here reads git.

use crate::config::TestsGate;
use crate::gates::{Finding, FindingKind};
use crate::report::Message;
use crate::state::{AttemptKind, Explained, FixupCause, GateDecision, GateRecord, Note};

use super::failure::kind_of;
use crate::run::events::{Action, GateAsk, LandResult, ReviewReport, ReviewVerdict};
use crate::run::model::{Change, Landing, Model};
use crate::runlog::Ev;

/// What the findings on one landing lead to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GateVerdict {
    /// Back to the author's agent, naming these findings.
    Fixup(Vec<Finding>),
    /// A person decides (`ralph review`); the reason given, if any.
    Review(Option<String>),
    /// Land it; the findings are recorded (`warn`).
    Land,
}

/// What the decision reads besides the findings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GateContext {
    pub(crate) mode: TestsGate,
    /// The spec says `allow_test_changes: true`.
    pub(crate) spec_allows: bool,
    /// The agent's tags on the attempt whose work lands.
    pub(crate) explained: Explained,
    /// The work being landed is already a fix-up sent back by the gates:
    /// what it still did not restore goes to a person, not round again.
    pub(crate) after_gate_fixup: bool,
}

/// The pure decision. Lost lines of another story block whatever
/// `gates.tests` says (nothing landed is ever silently lost); a fix-up
/// outranks review, which outranks landing.
pub(crate) fn decide(findings: &[Finding], c: &GateContext) -> GateVerdict {
    // A gate that could not look found nothing, which proves nothing: never
    // a pass (whatever `gates.tests` says) and nothing an agent could fix.
    if let Some(e) = findings.iter().find(|f| f.kind == FindingKind::GateError) {
        return GateVerdict::Review(Some(format!(
            "the gates could not read the work: {}",
            e.what
        )));
    }
    let (tests, lost): (Vec<&Finding>, Vec<&Finding>) =
        findings.iter().partition(|f| f.kind.is_test_change());
    let mut fix = Vec::new();
    let mut review: Option<Option<String>> = None;
    if !lost.is_empty() {
        match &c.explained.drops {
            Some(why) => review = Some(Some(format!("DROPS: {why}"))),
            None if c.after_gate_fixup => review = Some(None),
            None => fix.extend(lost.iter().map(|f| (*f).clone())),
        }
    }
    if !tests.is_empty() && c.mode != TestsGate::Off {
        let why = match (&c.explained.tests_changed, c.spec_allows) {
            (Some(why), _) => Some(Some(format!("TESTS_CHANGED: {why}"))),
            (None, true) => Some(Some("the spec allows test changes".to_string())),
            (None, false) => None,
        };
        match (c.mode, why) {
            (TestsGate::Warn, _) => {}
            (_, Some(why)) => review = review.or(Some(why)),
            (_, None) if c.after_gate_fixup => review = review.or(Some(None)),
            (_, None) => fix.extend(tests.iter().map(|f| (*f).clone())),
        }
    }
    if !fix.is_empty() {
        GateVerdict::Fixup(fix)
    } else if let Some(why) = review {
        GateVerdict::Review(why)
    } else {
        GateVerdict::Land
    }
}

/// The gates the next landing of `l` runs: none once a person approved
/// it; the test gate unless off or let be; the other side of a conflict
/// fix-up (or of a gate fix-up that followed one).
pub(super) fn ask(model: &Model, l: &Landing) -> GateAsk {
    let id = model.id(l.idx);
    let rec = model.state.record(id);
    // A person approved this very work: a later attempt's is checked again.
    let approved = rec
        .and_then(|r| r.gate.as_ref())
        .is_some_and(|g| g.decision == GateDecision::Approved && g.attempt == l.attempt);
    if approved {
        return GateAsk::default();
    }
    let other_side_of = rec
        .and_then(|r| r.note.as_ref())
        .and_then(|n| n.fixup.as_ref())
        .and_then(|f| match &f.cause {
            FixupCause::Conflict { .. } => Some(f.work.clone()),
            FixupCause::Gate { other_side_of, .. } => other_side_of.clone(),
            FixupCause::Validation { .. } | FixupCause::Review { .. } => None,
        })
        // Only the fix-up's own work is checked: a first try has no other side.
        .filter(|_| kind_of(model, l.idx, l.attempt) == AttemptKind::Fixup);
    GateAsk {
        tests: model.policy.tests_gate != TestsGate::Off && !l.tests_let_be,
        other_side_of,
        review: model.policy.review.clone(),
    }
}

/// What a reviewer's CHANGES leads to after `rounds` of them (this one
/// counted): the author's fix-up, or a person once `max_rounds` reviews
/// all asked for changes.
pub(crate) fn after_changes(rounds: u32, max_rounds: u32) -> GateDecision {
    if rounds >= max_rounds {
        GateDecision::Review
    } else {
        GateDecision::Fixup
    }
}

/// The review gate's reviewer answered on `landing`: its cost goes to the
/// story, its verdict on record; approved work ends as its landing did
/// (returned, for the landing to carry on with), CHANGES goes back to the
/// author (up to `max_rounds`), no answer or too many rounds wait for a
/// person.
pub(super) fn reviewed(
    model: &mut Model,
    landing: Landing,
    review: ReviewReport,
    then: Option<Box<LandResult>>,
    saved_ref: Option<String>,
    out: &mut Vec<Action>,
) -> Option<LandResult> {
    let idx = landing.idx;
    let id = model.id(idx).to_string();
    model
        .state
        .add_usage(&id, review.usage, review.cost_usd, 0.0);
    model.run_cost_usd += review.cost_usd;
    model.run_tokens += crate::report::tokens(&review.usage);
    let text = match &review.verdict {
        ReviewVerdict::Changes(t) | ReviewVerdict::NoAnswer(t) => t.clone(),
        ReviewVerdict::Approve => String::new(),
    };
    out.push(Action::Record(Ev::Review {
        story: id.clone(),
        attempt: landing.attempt,
        verdict: review.verdict.name().to_string(),
        text: text.clone(),
        cost_usd: review.cost_usd,
    }));
    out.push(Action::Log(format!(
        "review of story {id} attempt {}: {}{} (log {})",
        landing.attempt,
        review.verdict.name(),
        if text.is_empty() {
            String::new()
        } else {
            format!(": {}", text.replace('\n', " "))
        },
        review.log_rel
    )));
    let said = match text.trim() {
        "" => review.verdict.name().to_string(),
        t => format!("{}: {t}", review.verdict.name()),
    };
    if let Some(r) = model.state.stories.get_mut(&id) {
        r.reviews.push(said);
    }
    if let (ReviewVerdict::Approve, Some(then)) = (&review.verdict, then) {
        return Some(*then);
    }
    let max_rounds = model.policy.review.as_ref().map_or(1, |r| r.max_rounds);
    let decision = match &review.verdict {
        ReviewVerdict::Changes(_) => {
            let rounds = model.state.record(&id).map_or(0, |r| r.review_rounds) + 1;
            if let Some(r) = model.state.stories.get_mut(&id) {
                r.review_rounds = rounds;
            }
            after_changes(rounds, max_rounds)
        }
        _ => GateDecision::Review,
    };
    let hooks = |result: &'static str| {
        landing.iteration.map(|iteration| Action::PostHooks {
            id: id.clone(),
            iteration,
            result,
        })
    };
    let say = |then: &str| {
        Action::Say(Message::Gated {
            id: id.clone(),
            first: format!("the reviewer says {}", review.verdict.name()),
            more: 0,
            then: then.to_string(),
        })
    };
    match (decision, saved_ref) {
        (GateDecision::Fixup, Some(work)) => {
            out.push(say("its agent makes the changes in a fix-up"));
            if let Some(h) = hooks("fail") {
                model.hooks_running += 1;
                out.push(h);
            }
            model.apply(idx, Change::Requeue);
            model.state.set_note(
                &id,
                Some(Note::fixup(
                    FixupCause::Review { text },
                    work,
                    landing.attempt,
                )),
            );
        }
        _ => {
            out.push(say("held for a person (`ralph review`)"));
            if let Some(h) = hooks("review") {
                model.hooks_running += 1;
                out.push(h);
            }
            model.state.set_gate(
                &id,
                Some(GateRecord {
                    findings: Vec::new(),
                    reason: Some(format!("the reviewer: {}", text.trim())),
                    decision: GateDecision::Review,
                    attempt: landing.attempt,
                }),
            );
            model.apply(idx, Change::InReview);
        }
    }
    out.push(Action::Save);
    None
}

/// A landing the gates stopped: the decision, then its effects.
pub(super) fn gated(
    model: &mut Model,
    landing: Landing,
    findings: Vec<Finding>,
    saved_ref: Option<String>,
    out: &mut Vec<Action>,
) {
    let idx = landing.idx;
    let id = model.id(idx).to_string();
    let note_fixup = model
        .state
        .record(&id)
        .and_then(|r| r.note.as_ref())
        .and_then(|n| n.fixup.clone());
    let after_gate_fixup = kind_of(model, idx, landing.attempt) == AttemptKind::Fixup
        && note_fixup
            .as_ref()
            .is_some_and(|f| matches!(f.cause, FixupCause::Gate { .. }));
    let context = GateContext {
        mode: model.policy.tests_gate,
        spec_allows: model.stories[idx].allow_test_changes,
        explained: model
            .state
            .attempt(&id, landing.attempt)
            .map(|a| a.explained.clone())
            .unwrap_or_default(),
        after_gate_fixup,
    };
    let verdict = decide(&findings, &context);
    let (decision, reason) = match &verdict {
        GateVerdict::Fixup(_) => (GateDecision::Fixup, None),
        GateVerdict::Review(why) => (GateDecision::Review, why.clone()),
        GateVerdict::Land => (GateDecision::Warned, None),
    };
    out.push(Action::Record(Ev::Gate {
        story: id.clone(),
        attempt: landing.attempt,
        decision: decision.name().to_string(),
        findings: findings.clone(),
        reason: reason.clone(),
    }));
    model.state.set_gate(
        &id,
        Some(GateRecord {
            findings: findings.clone(),
            reason: reason.clone(),
            decision,
            attempt: landing.attempt,
        }),
    );
    for f in &findings {
        out.push(Action::Log(format!(
            "gate, story {id} attempt {}: {}",
            landing.attempt,
            f.line_text()
        )));
    }
    let say = |then: &str| {
        Action::Say(Message::Gated {
            id: id.clone(),
            first: findings.first().map(Finding::line_text).unwrap_or_default(),
            more: findings.len().saturating_sub(1),
            then: then.to_string(),
        })
    };
    let hooks = |result: &'static str| {
        landing.iteration.map(|iteration| Action::PostHooks {
            id: id.clone(),
            iteration,
            result,
        })
    };
    match verdict {
        GateVerdict::Land => {
            out.push(say("recorded (gates.tests: warn); it lands"));
            // Straight back to the head of the queue, the tests let be.
            model.land_queue.push_front(Landing {
                since: None,
                tests_let_be: true,
                ..landing
            });
        }
        GateVerdict::Review(_) => {
            out.push(say("held for review (`ralph review`)"));
            if let Some(h) = hooks("review") {
                model.hooks_running += 1;
                out.push(h);
            }
            model.apply(idx, Change::InReview);
            out.push(Action::Save);
        }
        GateVerdict::Fixup(to_fix) => {
            let Some(work) = saved_ref else {
                // Nothing kept to hand back: a person looks at the branch.
                out.push(say(
                    "its work could not be kept for a fix-up; held for review",
                ));
                model.apply(idx, Change::InReview);
                out.push(Action::Save);
                return;
            };
            out.push(say("its agent restores them in a fix-up"));
            if let Some(h) = hooks("fail") {
                model.hooks_running += 1;
                out.push(h);
            }
            let other_side_of = to_fix
                .iter()
                .any(|f| f.kind == FindingKind::OtherSideLost)
                .then(|| match note_fixup.as_ref().map(|f| &f.cause) {
                    Some(FixupCause::Gate { other_side_of, .. }) => other_side_of.clone(),
                    _ => note_fixup.as_ref().map(|f| f.work.clone()),
                })
                .flatten();
            model.apply(idx, Change::Requeue);
            model.state.set_note(
                &id,
                Some(Note::fixup(
                    FixupCause::Gate {
                        findings: to_fix,
                        other_side_of,
                    },
                    work,
                    landing.attempt,
                )),
            );
            out.push(Action::Save);
        }
    }
}
