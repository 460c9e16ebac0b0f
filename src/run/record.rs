//! What a run records (`runlog::Ev`) and whom it notifies (`Notice`).
//! The transition decides and says so with `Action::Record`: the records
//! here are built from its decisions (`attempt_end` from the attempt record
//! it keeps in the state, `land_end` from the landing result it acts on),
//! never read back off the model, so a record cannot disagree with what the
//! transition did. The `Recorder` turns the records a person should hear
//! about at once into `Notice`s.
//!
//! Pure: the caller passes `now`, stamps and writes the records, and runs
//! the notification hooks.

use std::collections::BTreeMap;

use crate::report;
use crate::runlog::{Ev, PauseWhy};
use crate::schedule::StoryState;
use crate::state::AttemptRecord;

use super::events::{AttemptRequest, LandResult};
use super::model::Model;

/// Something a person may want to hear about at once.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Notice {
    /// A story failed for good (`story`), or the circuit breaker tripped.
    Failure {
        story: Option<String>,
        reason: String,
    },
    /// New work waits: an agent's usage limit (until its reset) or the
    /// spent budget.
    Pause {
        why: PauseWhy,
        agent: Option<String>,
        until: Option<i64>,
    },
}

/// Notices from a run's records.
#[derive(Debug)]
pub(crate) struct Recorder {
    /// Usage-limit pauses the run started inside: recorded, not notified.
    inherited: BTreeMap<String, i64>,
}

impl Recorder {
    /// For a run whose model starts as `model`.
    pub(crate) fn new(model: &Model) -> Recorder {
        Recorder {
            inherited: model.state.paused_until.clone(),
        }
    }

    /// The notice `record` calls for, if any.
    pub(crate) fn notice(&self, record: &Ev) -> Option<Notice> {
        match record {
            Ev::Pause {
                why: PauseWhy::UsageLimit,
                agent,
                until,
            } => {
                let inherited = agent.as_ref().and_then(|a| self.inherited.get(a));
                (inherited != until.as_ref()).then(|| Notice::Pause {
                    why: PauseWhy::UsageLimit,
                    agent: agent.clone(),
                    until: *until,
                })
            }
            Ev::Pause {
                why: PauseWhy::Budget,
                ..
            } => Some(Notice::Pause {
                why: PauseWhy::Budget,
                agent: None,
                until: None,
            }),
            Ev::Breaker { reason } => Some(Notice::Failure {
                story: None,
                reason: format!("circuit breaker: the same failure over several stories: {reason}"),
            }),
            Ev::FailedForGood { story, reason } => Some(Notice::Failure {
                story: Some(story.clone()),
                reason: reason.clone().unwrap_or_default(),
            }),
            _ => None,
        }
    }
}

/// The record of an attempt the transition starts.
pub(crate) fn attempt_start(model: &Model, req: &AttemptRequest) -> Ev {
    Ev::AttemptStart {
        story: model.id(req.idx).to_string(),
        attempt: req.attempt,
        slot: req.slot,
        agent: req.agent.name().to_string(),
        kind: req.kind,
        model: req.model.clone(),
        est: model.stories[req.idx].estimation.clone(),
    }
}

/// The record of a finished attempt: the attempt record the transition
/// keeps in story `id`'s history, as it is (its kind is the one the attempt
/// ran as: a fix-up whose work could not be set up again is a redo).
pub(crate) fn attempt_end(id: &str, rec: &AttemptRecord) -> Ev {
    Ev::AttemptEnd {
        story: id.to_string(),
        attempt: rec.number,
        slot: rec.slot.unwrap_or_default(),
        agent: rec.agent.clone(),
        kind: rec.kind(),
        verdict: rec.outcome,
        reason: rec.reason.clone(),
        tokens: report::tokens(&rec.usage),
        usage: rec.usage,
        cost_usd: rec.cost_usd,
        cost_unknown: rec.cost_unknown,
        model: rec.model.clone(),
        secs: rec.duration_secs,
        saved_ref: rec.saved_ref.clone(),
        node: rec.node.clone(),
    }
}

/// The record of a landing of story `story`'s `attempt` that ended with
/// `result` after `secs`.
pub(crate) fn land_end(story: &str, attempt: u32, result: &LandResult, secs: f64) -> Ev {
    let story = story.to_string();
    let end = |result: &str, reason: Option<String>| Ev::LandEnd {
        story: story.clone(),
        attempt,
        result: result.to_string(),
        reason,
        secs,
    };
    match result {
        LandResult::Landed { commit } => Ev::Landed {
            story: story.clone(),
            attempt,
            commit: commit.clone(),
            secs,
        },
        LandResult::Conflict { paths, .. } => Ev::Conflict {
            story: story.clone(),
            attempt,
            paths: paths.clone(),
            secs,
        },
        LandResult::ValidationFailed { name, .. } => end(
            "validation_failed",
            Some(format!("validation '{name}' failed on the merged tree")),
        ),
        LandResult::CheckoutBlocked { paths } => end("checkout_blocked", Some(paths.join(", "))),
        LandResult::Busy { lock, holder } => end(
            "busy",
            Some(holder.clone().unwrap_or_else(|| lock.display().to_string())),
        ),
        LandResult::Raced => end("raced", None),
        LandResult::Behind => end("behind", None),
        LandResult::Unsigned { message } => end("unsigned", Some(message.clone())),
        LandResult::InReview => end("in_review", None),
        LandResult::InPr { url } => end("in_pr", Some(url.clone())),
        LandResult::Interrupted => end("interrupted", None),
        LandResult::Error(e) => end("error", Some(e.clone())),
        LandResult::Reviewed { then: Some(t), .. } => land_end(&story, attempt, t, secs),
        LandResult::Reviewed { review, .. } => {
            end("reviewed", Some(review.verdict.name().to_string()))
        }
        LandResult::Gated { findings, .. } => end(
            "gated",
            Some(format!("{} finding(s) of the trust gates", findings.len())),
        ),
    }
}

/// A run's figures at a moment, for notification hooks.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Figures {
    pub(crate) done: usize,
    pub(crate) total: usize,
    pub(crate) failed: Vec<String>,
    pub(crate) blocked: Vec<String>,
    pub(crate) run_cost_usd: f64,
    pub(crate) run_tokens: u64,
    pub(crate) lifetime_cost_usd: f64,
}

impl Figures {
    pub(crate) fn of(model: &Model) -> Figures {
        let (_, lifetime) = model.state.total_usage();
        let chosen = |node: StoryState| -> Vec<String> {
            (0..model.stories.len())
                .filter(|&i| model.chosen[i] && model.sched().nodes[i] == node)
                .map(|i| model.id(i).to_string())
                .collect()
        };
        Figures {
            done: model.done_selected(),
            total: model.selected(),
            failed: chosen(StoryState::Failed),
            blocked: chosen(StoryState::Blocked),
            run_cost_usd: model.run_cost_usd,
            run_tokens: model.run_tokens,
            lifetime_cost_usd: lifetime,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::agent::event::Usage;
    use crate::agent::{FaultKind, Verdict};
    use crate::backlog::Story;
    use crate::run::events::{AttemptReport, Event, Now};
    use crate::run::transition::handle;
    use crate::run::transition::tests::{failed, finished, later, records, starts};
    use crate::state::{AttemptKind, Outcome};

    fn model(n: usize, max_retries: u32) -> Model {
        let stories: Vec<Story> = (1..=n)
            .map(|i| Story {
                line: i,
                estimation: Some("small".into()),
                ..Story::bare(format!("1.{i}"), format!("S{i}"))
            })
            .collect();
        crate::run::model::test_model(stories, 2, max_retries, None, t0())
    }

    /// The records' timestamps below are read against this clock.
    fn t0() -> Now {
        Now {
            mono: Instant::now(),
            unix: 1_000,
        }
    }

    #[test]
    fn attempts_carry_their_kind_from_start_to_end() {
        let mut m = model(1, 3);
        let a = handle(&mut m, Event::Start { reland: vec![] }, t0());
        assert!(matches!(
            &records(&a)[..],
            [Ev::AttemptStart { kind: AttemptKind::First, est: Some(e), .. }] if e == "small"
        ));
        let req = &starts(&a)[0];
        let mut r = AttemptReport::empty(req, failed("red"), String::new());
        r.usage = Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        };
        r.cost_usd = 0.25;
        let a = handle(&mut m, Event::AttemptFinished(Box::new(r)), t0());
        let recs = records(&a);
        assert!(
            matches!(
                &recs[..],
                [
                    Ev::AttemptEnd { kind: AttemptKind::First, verdict: Outcome::Fail, tokens: 15, reason: Some(why), .. },
                    // Its failure is on record: the next attempt is a retry.
                    Ev::AttemptStart { kind: AttemptKind::Redo, .. },
                ] if why == "red"
            ),
            "{recs:?}"
        );
    }

    #[test]
    fn pauses_failures_and_the_breaker_are_recorded_once_and_notified() {
        let mut m = model(2, 1);
        m.state.paused_until.insert("codex".into(), 5_000);
        let rec = Recorder::new(&m);
        // A pause the run started inside: recorded, not news.
        let a = handle(&mut m, Event::Start { reland: vec![] }, t0());
        let inherited = Ev::Pause {
            why: PauseWhy::UsageLimit,
            agent: Some("codex".into()),
            until: Some(5_000),
        };
        assert!(records(&a).contains(&inherited));
        assert_eq!(rec.notice(&inherited), None);
        let first = starts(&a);
        let limited = Verdict::RateLimited {
            resets_at: Some(1_058),
        };
        let a = handle(&mut m, finished(&first[0], limited), t0());
        let pause = Ev::Pause {
            why: PauseWhy::UsageLimit,
            agent: Some("claude".into()),
            until: Some(1_060),
        };
        let recorded = records(&a);
        assert!(
            matches!(&recorded[..], [Ev::AttemptEnd { .. }, p] if *p == pause),
            "{recorded:?}"
        );
        assert!(rec.notice(&pause).is_some());
        // The resets pass: each pause ends once.
        let a = handle(&mut m, Event::Timer, later(t0(), 5_000));
        let resumed: Vec<Ev> = records(&a)
            .into_iter()
            .filter(|e| matches!(e, Ev::Resume { .. }))
            .collect();
        assert_eq!(resumed.len(), 2, "{resumed:?}");
        assert_eq!(
            records(&handle(&mut m, Event::Timer, later(t0(), 5_001))),
            []
        );

        // Failed for good (one try each), then the breaker: the same cause
        // over two stories.
        let a = handle(&mut m, finished(&first[1], failed("boom")), t0());
        let failed_for_good = Ev::FailedForGood {
            story: "1.2".into(),
            reason: Some("boom".into()),
        };
        assert!(records(&a).contains(&failed_for_good), "{a:?}");
        assert!(matches!(
            rec.notice(&failed_for_good),
            Some(Notice::Failure { story: Some(s), .. }) if s == "1.2"
        ));
        let breaker = Ev::Breaker {
            reason: "bad key".into(),
        };
        assert!(matches!(
            rec.notice(&breaker),
            Some(Notice::Failure { story: None, reason }) if reason.contains("bad key")
        ));
        let budget = Ev::Pause {
            why: PauseWhy::Budget,
            agent: None,
            until: None,
        };
        assert_eq!(
            rec.notice(&budget),
            Some(Notice::Pause {
                why: PauseWhy::Budget,
                agent: None,
                until: None
            })
        );
        assert_eq!(
            rec.notice(&Ev::Resume {
                why: PauseWhy::Fault,
                agent: None
            }),
            None
        );
    }

    #[test]
    fn a_spent_budget_is_recorded_once() {
        let mut m = model(2, 3);
        m.policy.budget.run_usd = Some(1.0);
        m.run_cost_usd = 2.0;
        let a = handle(&mut m, Event::Start { reland: vec![] }, t0());
        assert_eq!(
            records(&a),
            [Ev::Pause {
                why: PauseWhy::Budget,
                agent: None,
                until: None
            }]
        );
        assert_eq!(records(&handle(&mut m, Event::Timer, t0())), []);
    }

    #[test]
    fn a_fault_pause_is_recorded_when_it_begins_and_ends() {
        let mut m = model(2, 3);
        let first = starts(&handle(&mut m, Event::Start { reland: vec![] }, t0()));
        let fault = || Verdict::Fault {
            reason: "disk full".into(),
            kind: FaultKind::Transient,
        };
        let a = handle(&mut m, finished(&first[0], fault()), t0());
        assert!(records(&a).contains(&Ev::Pause {
            why: PauseWhy::Fault,
            agent: None,
            until: None
        }));
        // A second fault while paused makes the pause longer, not another.
        let a = handle(&mut m, finished(&first[1], fault()), t0());
        assert_eq!(
            records(&a)
                .iter()
                .filter(|e| matches!(e, Ev::Pause { .. }))
                .count(),
            0
        );
        let a = handle(&mut m, Event::Timer, later(t0(), 3_600));
        assert_eq!(
            records(&a)[0],
            Ev::Resume {
                why: PauseWhy::Fault,
                agent: None
            }
        );
    }

    #[test]
    fn a_landing_is_timed_from_its_start() {
        let mut m = model(1, 3);
        let t0 = t0();
        let first = starts(&handle(&mut m, Event::Start { reland: vec![] }, t0));
        let a = handle(&mut m, finished(&first[0], Verdict::Done), t0);
        assert!(records(&a).contains(&Ev::LandStart {
            story: "1.1".into(),
            attempt: 1
        }));
        let a = handle(
            &mut m,
            Event::LandingFinished(LandResult::Landed {
                commit: "abc".into(),
            }),
            later(t0, 3),
        );
        assert_eq!(
            records(&a),
            vec![Ev::Landed {
                story: "1.1".into(),
                attempt: 1,
                commit: "abc".into(),
                secs: 3.0
            }]
        );
    }
}
