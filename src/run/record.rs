//! What a run records (`runlog::Ev`) and whom it notifies (`Notice`), read
//! off what the dispatcher already sees: the events it feeds the
//! transition, the actions it carries out, and the model after each step.
//! The transition stays as it is; this module only watches.
//!
//! Pure: the caller passes `now`, stamps and writes the records, and runs
//! the notification hooks.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use crate::agent::Verdict;
use crate::report;
use crate::runlog::{Ev, PauseWhy};
use crate::schedule::Node;
use crate::state::AttemptKind;

use super::events::{Action, Event, LandResult, Now};
use super::model::Model;
use super::transition::budget_spent;

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

/// The watcher's memory: what it saw last, to tell what changed.
#[derive(Debug)]
pub(crate) struct Recorder {
    /// The kind of each running attempt, by (story, attempt number).
    kinds: HashMap<(usize, u32), AttemptKind>,
    /// When the landing in progress started.
    landing_since: Option<Instant>,
    paused_agents: BTreeMap<String, i64>,
    /// Usage-limit pauses the run started inside: recorded, not notified.
    inherited: BTreeMap<String, i64>,
    fault_pause: bool,
    budget: bool,
    breaker: bool,
    failed: BTreeSet<usize>,
}

impl Recorder {
    /// A watcher of a run whose model starts as `model` (stories failed in
    /// earlier runs are not news).
    pub(crate) fn new(model: &Model) -> Recorder {
        Recorder {
            kinds: HashMap::new(),
            landing_since: None,
            paused_agents: BTreeMap::new(),
            inherited: model.state.paused_until.clone(),
            fault_pause: false,
            budget: false,
            breaker: model.breaker_cause.is_some(),
            failed: failed_set(model),
        }
    }

    /// Records of `event`, before the transition handles it.
    pub(crate) fn event(&mut self, model: &Model, event: &Event, now: Now) -> Vec<Ev> {
        match event {
            Event::AttemptFinished(r) => {
                let reason = match &r.verdict {
                    Verdict::Failed { reason, .. } | Verdict::Fault { reason, .. } => {
                        Some(reason.clone())
                    }
                    _ => None,
                };
                vec![Ev::AttemptEnd {
                    story: model.id(r.idx).to_string(),
                    attempt: r.attempt,
                    slot: r.slot,
                    agent: r.agent.map(str::to_string),
                    kind: self.kinds.remove(&(r.idx, r.attempt)).unwrap_or_default(),
                    verdict: crate::state::Outcome::from(&r.verdict),
                    reason,
                    tokens: report::tokens(&r.usage),
                    usage: r.usage,
                    cost_usd: r.cost_usd,
                    secs: r.duration.as_secs_f64(),
                    saved_ref: r.saved_ref.clone(),
                }]
            }
            Event::LandingFinished(result) => {
                let Some(landing) = model.landing else {
                    return Vec::new();
                };
                let secs = self
                    .landing_since
                    .take()
                    .map(|t| now.mono.saturating_duration_since(t).as_secs_f64())
                    .unwrap_or(0.0);
                let story = model.id(landing.idx).to_string();
                let attempt = landing.attempt;
                let end = |result: &str, reason: Option<String>| Ev::LandEnd {
                    story: story.clone(),
                    attempt,
                    result: result.to_string(),
                    reason,
                    secs,
                };
                vec![match result {
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
                    LandResult::CheckoutBlocked { paths } => {
                        end("checkout_blocked", Some(paths.join(", ")))
                    }
                    LandResult::Busy { lock } => end("busy", Some(lock.display().to_string())),
                    LandResult::Raced => end("raced", None),
                    LandResult::Unsigned { message } => end("unsigned", Some(message.clone())),
                    LandResult::InReview => end("in_review", None),
                    LandResult::InPr { url } => end("in_pr", Some(url.clone())),
                    LandResult::Interrupted => end("interrupted", None),
                    LandResult::Error(e) => end("error", Some(e.clone())),
                }]
            }
            Event::Signal(sig) => vec![Ev::Signal {
                signal: sig.name().to_string(),
            }],
            _ => Vec::new(),
        }
    }

    /// Records of an action about to be carried out.
    pub(crate) fn action(&mut self, model: &Model, action: &Action, now: Now) -> Vec<Ev> {
        match action {
            Action::StartAttempt(req) => {
                let id = model.id(req.idx);
                let kind = req.kind;
                self.kinds.insert((req.idx, req.attempt), kind);
                vec![Ev::AttemptStart {
                    story: id.to_string(),
                    attempt: req.attempt,
                    slot: req.slot,
                    agent: req.agent.name().to_string(),
                    kind,
                    est: model.stories[req.idx].estimation.clone(),
                }]
            }
            Action::Land { idx, attempt } => {
                self.landing_since = Some(now.mono);
                vec![Ev::LandStart {
                    story: model.id(*idx).to_string(),
                    attempt: *attempt,
                }]
            }
            _ => Vec::new(),
        }
    }

    /// What changed in `model` since the last look: pauses and their end,
    /// stories failed for good, the breaker.
    pub(crate) fn settle(&mut self, model: &Model) -> (Vec<Ev>, Vec<Notice>) {
        let mut evs = Vec::new();
        let mut notices = Vec::new();
        let now_paused = &model.state.paused_until;
        for (agent, &until) in now_paused {
            if self.paused_agents.get(agent) == Some(&until) {
                continue;
            }
            let agent = Some(agent.clone());
            evs.push(Ev::Pause {
                why: PauseWhy::UsageLimit,
                agent: agent.clone(),
                until: Some(until),
            });
            if self.inherited.get(agent.as_deref().unwrap_or("")) != Some(&until) {
                notices.push(Notice::Pause {
                    why: PauseWhy::UsageLimit,
                    agent,
                    until: Some(until),
                });
            }
        }
        for agent in self.paused_agents.keys() {
            if !now_paused.contains_key(agent) {
                evs.push(Ev::Resume {
                    why: PauseWhy::UsageLimit,
                    agent: Some(agent.clone()),
                });
            }
        }
        self.paused_agents = now_paused.clone();

        let fault = model.pause_until.is_some();
        if fault != self.fault_pause {
            self.fault_pause = fault;
            evs.push(if fault {
                Ev::Pause {
                    why: PauseWhy::Fault,
                    agent: None,
                    until: None,
                }
            } else {
                Ev::Resume {
                    why: PauseWhy::Fault,
                    agent: None,
                }
            });
        }

        if !self.budget && model.fatal.is_some() && budget_spent(model).is_some() {
            self.budget = true;
            evs.push(Ev::Pause {
                why: PauseWhy::Budget,
                agent: None,
                until: None,
            });
            notices.push(Notice::Pause {
                why: PauseWhy::Budget,
                agent: None,
                until: None,
            });
        }

        if let (false, Some(cause)) = (self.breaker, &model.breaker_cause) {
            self.breaker = true;
            evs.push(Ev::Breaker {
                reason: cause.clone(),
            });
            notices.push(Notice::Failure {
                story: None,
                reason: format!("circuit breaker: the same failure over several stories: {cause}"),
            });
        }

        if model.count(Node::Failed) != self.failed.len() {
            let now_failed = failed_set(model);
            for &idx in now_failed.difference(&self.failed) {
                let id = model.id(idx).to_string();
                let reason = model.state.record(&id).and_then(|r| r.last_error.clone());
                evs.push(Ev::FailedForGood {
                    story: id.clone(),
                    reason: reason.clone(),
                });
                notices.push(Notice::Failure {
                    story: Some(id),
                    reason: reason.unwrap_or_default(),
                });
            }
            self.failed = now_failed;
        }
        (evs, notices)
    }
}

fn failed_set(model: &Model) -> BTreeSet<usize> {
    model
        .sched()
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| **n == Node::Failed)
        .map(|(i, _)| i)
        .collect()
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
        let chosen = |node: Node| -> Vec<String> {
            (0..model.stories.len())
                .filter(|&i| model.chosen[i] && model.sched().nodes[i] == node)
                .map(|i| model.id(i).to_string())
                .collect()
        };
        Figures {
            done: model.done_selected(),
            total: model.selected(),
            failed: chosen(Node::Failed),
            blocked: chosen(Node::Blocked),
            run_cost_usd: model.run_cost_usd,
            run_tokens: model.run_tokens,
            lifetime_cost_usd: lifetime,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::agent::event::Usage;
    use crate::agent::{Backend, ResultKind};
    use crate::backlog::Story;
    use crate::run::events::{AttemptReport, AttemptRequest};
    use crate::run::model::{Fatal, Landing};
    use crate::state::Outcome;

    fn model(n: usize) -> Model {
        let stories: Vec<Story> = (1..=n)
            .map(|i| Story {
                id: format!("1.{i}"),
                title: format!("S{i}"),
                line: i,
                section: 0,
                spec_path: None,
                depends_on: Vec::new(),
                estimation: Some("small".into()),
                agent: None,
                prd_passes: false,
                prd_spec: None,
                allow_empty_done: false,
                priority: crate::backlog::files::DEFAULT_RANK,
                files: Vec::new(),
            })
            .collect();
        crate::run::model::test_model(stories, 2, 1, None, now())
    }

    fn now() -> Now {
        Now {
            mono: Instant::now(),
            unix: 1_000,
        }
    }

    fn req(idx: usize, attempt: u32) -> AttemptRequest {
        AttemptRequest {
            idx,
            slot: 0,
            attempt,
            iteration: 1,
            kind: if attempt == 1 {
                crate::state::AttemptKind::First
            } else {
                crate::state::AttemptKind::Redo
            },
            note: None,
            resume: None,
            agent: Backend::Claude,
        }
    }

    #[test]
    fn attempts_carry_their_kind_from_start_to_end() {
        let mut m = model(1);
        let mut rec = Recorder::new(&m);
        let start = rec.action(&m, &Action::StartAttempt(req(0, 1)), now());
        assert!(matches!(
            &start[..],
            [Ev::AttemptStart { kind: AttemptKind::First, est: Some(e), .. }] if e == "small"
        ));
        let mut r = AttemptReport::empty(
            &req(0, 1),
            Verdict::Failed {
                reason: "red".into(),
                kind: ResultKind::Fail,
            },
            String::new(),
        );
        r.usage = Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        };
        r.cost_usd = 0.25;
        let end = rec.event(&m, &Event::AttemptFinished(Box::new(r)), now());
        assert!(matches!(
            &end[..],
            [Ev::AttemptEnd { kind: AttemptKind::First, verdict: Outcome::Fail, tokens: 15, reason: Some(why), .. }] if why == "red"
        ));
        // Its failure is on record: the next attempt is a retry.
        m.state
            .push_history("1.1", crate::state::AttemptRecord::default());
        let again = rec.action(&m, &Action::StartAttempt(req(0, 2)), now());
        assert!(matches!(
            &again[..],
            [Ev::AttemptStart {
                kind: AttemptKind::Redo,
                ..
            }]
        ));
    }

    #[test]
    fn pauses_failures_and_the_breaker_are_recorded_once_and_notified() {
        let mut m = model(2);
        m.state.paused_until.insert("codex".into(), 5_000);
        let mut rec = Recorder::new(&m);
        // A pause the run started inside: recorded, not news.
        let (evs, notices) = rec.settle(&m);
        assert_eq!(evs.len(), 1);
        assert!(notices.is_empty());
        m.state.paused_until.insert("claude".into(), 9_000);
        let (evs, notices) = rec.settle(&m);
        assert_eq!(
            evs,
            vec![Ev::Pause {
                why: PauseWhy::UsageLimit,
                agent: Some("claude".into()),
                until: Some(9_000)
            }]
        );
        assert_eq!(notices.len(), 1);
        m.state.paused_until.clear();
        let (evs, _) = rec.settle(&m);
        assert_eq!(evs.len(), 2, "{evs:?}");
        assert!(evs.iter().all(|e| matches!(e, Ev::Resume { .. })));

        m.apply(0, crate::run::model::Change::Start);
        m.apply(0, crate::run::model::Change::Fail { reason: "boom" });
        m.breaker_cause = Some("bad key".into());
        let (evs, notices) = rec.settle(&m);
        assert!(evs.contains(&Ev::FailedForGood {
            story: "1.1".into(),
            reason: Some("boom".into())
        }));
        assert!(evs.contains(&Ev::Breaker {
            reason: "bad key".into()
        }));
        assert_eq!(notices.len(), 2);
        assert_eq!(rec.settle(&m), (vec![], vec![]), "nothing new");

        m.policy.budget.run_usd = Some(1.0);
        m.run_cost_usd = 2.0;
        m.fatal = Some(Fatal::NeedsPerson("budget".into()));
        let (evs, notices) = rec.settle(&m);
        assert_eq!(
            notices,
            vec![Notice::Pause {
                why: PauseWhy::Budget,
                agent: None,
                until: None
            }]
        );
        assert_eq!(evs.len(), 1);
    }

    #[test]
    fn a_landing_is_timed_from_its_start() {
        let mut m = model(1);
        let mut rec = Recorder::new(&m);
        let t0 = now();
        rec.action(&m, &Action::Land { idx: 0, attempt: 1 }, t0);
        m.landing = Some(Landing {
            idx: 0,
            attempt: 1,
            iteration: Some(1),
        });
        let later = Now {
            mono: t0.mono + Duration::from_secs(3),
            unix: t0.unix + 3,
        };
        let evs = rec.event(
            &m,
            &Event::LandingFinished(LandResult::Landed {
                commit: "abc".into(),
            }),
            later,
        );
        assert_eq!(
            evs,
            vec![Ev::Landed {
                story: "1.1".into(),
                attempt: 1,
                commit: "abc".into(),
                secs: 3.0
            }]
        );
    }
}
