//! What the page shows, as plain data, and how a run's records fold into
//! it. The same fold serves a live run (records as the dispatcher emits
//! them) and `ralph serve` (records read back from the run's file as it
//! grows), so the two cannot disagree. Pure.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Serialize;

use crate::runlog::{Ev, Record};
use crate::state::Outcome;

/// Lines of agent activity kept per story.
pub(crate) const ACTIVITY_LINES: usize = 8;

/// One story of the backlog as the page draws it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StoryView {
    pub(crate) id: String,
    pub(crate) title: String,
    /// `StoryState::word`.
    pub(crate) status: &'static str,
}

/// An attempt whose agent is running.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Running {
    pub(crate) story: String,
    pub(crate) attempt: u32,
    pub(crate) slot: usize,
    pub(crate) agent: String,
    /// Unix time it started (the page counts the elapsed time from it).
    pub(crate) since: f64,
    /// The cluster node (and worker slot) it runs on, once the run knows
    /// (`attempt_placed`); none for a local attempt.
    pub(crate) node: Option<String>,
}

/// A pause of new work in force.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Pause {
    /// `usage_limit`, `fault` or `budget`; `pause` or `drain` when a person
    /// steered the run (`ralph pause`, `ralph drain`, the page's buttons).
    pub(crate) why: &'static str,
    pub(crate) agent: Option<String>,
    /// Unix time it ends, when known (the page counts down to it).
    pub(crate) until: Option<i64>,
    pub(crate) since: f64,
}

/// A merge-queue candidate being validated (issue 34): a lone story's
/// merge, or one merge of a chain, which holds the stories before it too.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Validating {
    /// In chain order: the last is the story this candidate adds.
    pub(crate) stories: Vec<String>,
    /// The worktree it runs in (`validate`, `validate-2`, ...).
    pub(crate) slot: String,
    pub(crate) tree: String,
    pub(crate) since: f64,
}

/// A racing candidate (best of N, issue 36), as its records tell it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CandidateView {
    pub(crate) k: u32,
    pub(crate) agent: String,
    pub(crate) model: Option<String>,
    /// `running` from its `candidate_start`, then `candidate_state`'s
    /// words (`done`, `validating`, `passed`, `stopped`), then its
    /// `candidate_end`'s outcome (`won`, `failed`, `stopped`, `passed`,
    /// `done`).
    pub(crate) state: String,
    pub(crate) since: f64,
    /// When its end was recorded.
    pub(crate) ended: Option<f64>,
    /// The cluster node and worker slot it runs on, from its
    /// `candidate_placed` on (local candidates have none).
    pub(crate) node: Option<String>,
}

/// A story's race: one story, a row per candidate. The latest race of
/// each story that raced in this run, kept once over so the page shows
/// who won.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RaceView {
    pub(crate) story: String,
    pub(crate) attempt: u32,
    pub(crate) candidates: Vec<CandidateView>,
    /// The race's attempt ended (`attempt_end`): won, or lost.
    pub(crate) over: bool,
}

/// The run as its records tell it: small enough to send with every change.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Summary {
    /// The run's ID in `.ralph/runs/` (none before the first run).
    pub(crate) run: Option<String>,
    /// True while the run is going on.
    pub(crate) live: bool,
    pub(crate) started: Option<f64>,
    pub(crate) jobs: usize,
    pub(crate) running: Vec<Running>,
    pub(crate) pauses: Vec<Pause>,
    /// The stories the merge queue is landing now (one, or a chain's, in
    /// chain order), the candidates it validates, and the stories waiting.
    pub(crate) landing: Vec<String>,
    pub(crate) validating: Vec<Validating>,
    pub(crate) land_queue: Vec<String>,
    pub(crate) landed: usize,
    pub(crate) cost_usd: f64,
    pub(crate) tokens: u64,
    /// The run's budget (`budget.max_cost_usd`, `--max-cost`;
    /// `budget.max_tokens`).
    pub(crate) budget_usd: Option<f64>,
    pub(crate) budget_tokens: Option<u64>,
    /// Stories a person held (`ralph hold ID`, `ralph stop ID`) until
    /// `ralph release ID`.
    pub(crate) held: Vec<String>,
    /// The run's races (best of N), in the order they began.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) races: Vec<RaceView>,
    /// The run's exit code once it ended.
    pub(crate) exit_code: Option<i32>,
    /// Unix time of the last record.
    pub(crate) last: Option<f64>,
}

impl Summary {
    /// Nothing runs or lands any more (the run ended, said so or not).
    pub(crate) fn not_live(&mut self) {
        self.live = false;
        self.running.clear();
        self.landing.clear();
        self.validating.clear();
    }

    fn steered(&mut self, cmd: &str, story: Option<&str>, t: f64) {
        let person = |p: &Pause| p.why == "pause" || p.why == "drain";
        match (cmd, story) {
            ("pause" | "drain", _) => {
                let why = if cmd == "pause" { "pause" } else { "drain" };
                self.pauses.retain(|p| p.why != why);
                self.pauses.push(Pause {
                    why,
                    agent: None,
                    until: None,
                    since: t,
                });
            }
            // `ralph resume` ends a pause and a drain alike.
            ("resume", _) => self.pauses.retain(|p| !person(p)),
            ("hold" | "stop", Some(id)) if !self.held.iter().any(|h| h == id) => {
                self.held.push(id.to_string());
            }
            ("release", Some(id)) => self.held.retain(|h| h != id),
            _ => {}
        }
    }

    /// The summary after `rec`.
    pub(crate) fn apply(&mut self, rec: &Record) {
        self.last = Some(rec.t);
        match &rec.ev {
            Ev::RunStart { run, jobs, .. } => {
                let (budget_usd, budget_tokens) = (self.budget_usd, self.budget_tokens);
                *self = Summary {
                    run: Some(run.clone()),
                    live: true,
                    started: Some(rec.t),
                    jobs: *jobs,
                    budget_usd,
                    budget_tokens,
                    last: Some(rec.t),
                    ..Summary::default()
                };
            }
            Ev::AttemptStart {
                story,
                attempt,
                slot,
                agent,
                ..
            } => {
                self.running.retain(|r| r.story != *story);
                self.land_queue.retain(|s| s != story);
                self.running.push(Running {
                    story: story.clone(),
                    attempt: *attempt,
                    slot: *slot,
                    agent: agent.clone(),
                    since: rec.t,
                    node: None,
                });
            }
            Ev::AttemptPlaced {
                story,
                attempt,
                node,
            } => {
                let mut running = self.running.iter_mut();
                if let Some(r) = running.find(|r| r.story == *story && r.attempt == *attempt) {
                    r.node = Some(node.clone());
                }
            }
            Ev::AttemptEnd {
                story,
                attempt,
                verdict,
                tokens,
                cost_usd,
                ..
            } => {
                self.running.retain(|r| r.story != *story);
                // A race's attempt ends once its candidates' work went
                // through the merge queue: it queues nothing more.
                let raced = self.race_mut(story, *attempt).map(|r| r.over = true);
                self.cost_usd += cost_usd;
                self.tokens += tokens;
                if matches!(verdict, Outcome::Done | Outcome::Tentative)
                    && raced.is_none()
                    && !self.land_queue.contains(story)
                {
                    self.land_queue.push(story.clone());
                }
            }
            Ev::LandStart { story, .. } => {
                self.land_queue.retain(|s| s != story);
                if !self.landing.contains(story) {
                    self.landing.push(story.clone());
                }
            }
            Ev::ValidateStart {
                tree,
                stories,
                slot,
                ..
            } => self.validating.push(Validating {
                stories: stories.clone(),
                slot: slot.clone(),
                tree: tree.clone(),
                since: rec.t,
            }),
            Ev::ValidateEnd { tree, stories, .. } => self
                .validating
                .retain(|v| !(v.tree == *tree && v.stories == *stories)),
            Ev::Landed { story, .. } => {
                self.landed += 1;
                self.end_landing(story);
            }
            Ev::Conflict { story, .. } | Ev::LandEnd { story, .. } => self.end_landing(story),
            Ev::Pause { why, agent, until } => {
                let why = why.name();
                self.pauses.retain(|p| !(p.why == why && p.agent == *agent));
                self.pauses.push(Pause {
                    why,
                    agent: agent.clone(),
                    until: *until,
                    since: rec.t,
                });
            }
            Ev::Resume { why, agent } => {
                let why = why.name();
                self.pauses.retain(|p| !(p.why == why && p.agent == *agent));
            }
            // What a person steered (issue 32: only usage-limit pauses
            // showed); the words are `steer::Command::name`'s.
            Ev::Steer { cmd, story, .. } => self.steered(cmd, story.as_deref(), rec.t),
            Ev::CandidateStart {
                story,
                attempt,
                candidate,
                agent,
                model,
                ..
            } => self.candidate_started(story, *attempt, *candidate, agent, model, rec.t),
            Ev::CandidateState {
                story,
                attempt,
                candidate,
                state,
            } => self.candidate_is(story, *attempt, *candidate, state, None),
            Ev::CandidatePlaced {
                story,
                attempt,
                candidate,
                node,
            } => self.candidate_placed(story, *attempt, *candidate, node),
            Ev::CandidateEnd {
                story,
                attempt,
                candidate,
                outcome,
                winner,
                ..
            } => {
                let state = if *winner { "won" } else { outcome.as_str() };
                self.candidate_is(story, *attempt, *candidate, state, Some(rec.t));
            }
            Ev::RunEnd { exit_code, .. } => {
                self.not_live();
                self.exit_code = Some(*exit_code);
            }
            Ev::Recovered { .. } => self.not_live(),
            _ => {}
        }
    }

    fn race_mut(&mut self, story: &str, attempt: u32) -> Option<&mut RaceView> {
        self.races
            .iter_mut()
            .find(|r| r.story == story && r.attempt == attempt)
    }

    /// Candidate `k` of `story`'s race for `attempt` started: a new race
    /// (of a new attempt) takes the place of the story's last one.
    fn candidate_started(
        &mut self,
        story: &str,
        attempt: u32,
        k: u32,
        agent: &str,
        model: &Option<String>,
        t: f64,
    ) {
        if self.race_mut(story, attempt).is_none() {
            self.races.retain(|r| r.story != story);
            self.races.push(RaceView {
                story: story.to_string(),
                attempt,
                candidates: Vec::new(),
                over: false,
            });
        }
        let Some(race) = self.race_mut(story, attempt) else {
            return;
        };
        race.candidates.retain(|c| c.k != k);
        race.candidates.push(CandidateView {
            k,
            agent: agent.to_string(),
            model: model.clone(),
            state: "running".into(),
            since: t,
            ended: None,
            node: None,
        });
        race.candidates.sort_by_key(|c| c.k);
    }

    fn candidate_placed(&mut self, story: &str, attempt: u32, k: u32, node: &str) {
        let race = self.race_mut(story, attempt);
        if let Some(c) = race.and_then(|r| r.candidates.iter_mut().find(|c| c.k == k)) {
            c.node = Some(node.to_string());
        }
    }

    fn candidate_is(&mut self, story: &str, attempt: u32, k: u32, state: &str, end: Option<f64>) {
        let race = self.race_mut(story, attempt);
        if let Some(c) = race.and_then(|r| r.candidates.iter_mut().find(|c| c.k == k)) {
            c.state = state.to_string();
            c.ended = end.or(c.ended);
        }
    }

    fn end_landing(&mut self, story: &str) {
        self.landing.retain(|s| s != story);
        self.land_queue.retain(|s| s != story);
        // A candidate whose own story's landing ended validates no more
        // (its end record may not come: a landing that failed to merge).
        self.validating
            .retain(|v| v.stories.last().map(String::as_str) != Some(story));
    }
}

/// Everything the page needs to draw itself from nothing; what a client
/// gets first, and again whenever it fell behind the stream.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Snapshot {
    /// The number of the last change it includes.
    pub(crate) seq: u64,
    pub(crate) project: String,
    /// Whether controls can reach a run (a run is going on).
    pub(crate) controls: bool,
    /// Changes whenever the set of stories does (the graph is drawn anew).
    pub(crate) graph: u64,
    pub(crate) stories: Vec<StoryView>,
    pub(crate) counts: BTreeMap<&'static str, usize>,
    pub(crate) summary: Summary,
    /// The latest lines of each running story's agent.
    pub(crate) activity: HashMap<String, VecDeque<String>>,
}

/// How many stories have each status.
pub(crate) fn counts(stories: &[StoryView]) -> BTreeMap<&'static str, usize> {
    let mut out = BTreeMap::new();
    for s in stories {
        *out.entry(s.status).or_default() += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runlog::PauseWhy;
    use crate::state::AttemptKind;

    fn rec(t: f64, ev: Ev) -> Record {
        Record { t, ev }
    }

    fn start(story: &str, slot: usize) -> Ev {
        Ev::AttemptStart {
            story: story.into(),
            attempt: 1,
            slot,
            agent: "claude".into(),
            kind: AttemptKind::First,
            est: None,
            model: None,
        }
    }

    fn end(story: &str, verdict: Outcome, cost: f64) -> Ev {
        let mut ev = end_of(story, 1, verdict);
        if let Ev::AttemptEnd { cost_usd, .. } = &mut ev {
            *cost_usd = cost;
        }
        ev
    }

    fn end_of(story: &str, attempt: u32, verdict: Outcome) -> Ev {
        Ev::AttemptEnd {
            story: story.into(),
            attempt,
            slot: 0,
            agent: None,
            kind: AttemptKind::First,
            verdict,
            reason: None,
            tokens: 100,
            usage: Default::default(),
            cost_usd: 0.0,
            cost_unknown: false,
            model: None,
            secs: 1.0,
            saved_ref: None,
            node: None,
        }
    }

    /// Issue 34: a chain of three shows as three landing stories and three
    /// candidates, each with the stories its merge holds; each goes as its
    /// validation ends, and the landing ends with the stories landed.
    #[test]
    fn a_chain_shows_each_candidate_and_its_stories_until_it_ends() {
        let mut s = Summary::default();
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            s.apply(&rec(
                1.0 + i as f64,
                Ev::LandStart {
                    story: id.to_string(),
                    attempt: 1,
                },
            ));
        }
        assert_eq!(s.landing, vec!["a", "b", "c"]);
        let cand = |n: usize| -> Vec<String> {
            ["a", "b", "c"][..n].iter().map(|x| x.to_string()).collect()
        };
        for n in 1..=3 {
            s.apply(&rec(
                5.0,
                Ev::ValidateStart {
                    tree: format!("t{n}"),
                    stories: cand(n),
                    slot: format!("validate-{n}"),
                    node: None,
                },
            ));
        }
        assert_eq!(s.validating.len(), 3);
        assert_eq!(s.validating[2].stories, cand(3));
        assert_eq!(s.validating[1].slot, "validate-2");
        s.apply(&rec(
            6.0,
            Ev::ValidateEnd {
                tree: "t1".into(),
                stories: cand(1),
                verdict: "passed".into(),
                secs: 1.0,
                node: None,
            },
        ));
        assert_eq!(s.validating.len(), 2);
        // `b` fails to land without an end record for its candidate.
        s.apply(&rec(
            7.0,
            Ev::LandEnd {
                story: "b".into(),
                attempt: 1,
                result: "error".into(),
                reason: None,
                secs: 1.0,
            },
        ));
        assert_eq!(s.landing, vec!["a", "c"]);
        assert_eq!(s.validating.len(), 1);
        assert_eq!(s.validating[0].stories, cand(3));
        s.not_live();
        assert!(s.landing.is_empty() && s.validating.is_empty());
    }

    #[test]
    fn attempts_run_then_queue_then_land() {
        let mut s = Summary {
            budget_usd: Some(5.0),
            ..Summary::default()
        };
        s.apply(&rec(
            1.0,
            Ev::RunStart {
                run: "r1".into(),
                version: "0".into(),
                args: vec![],
                jobs: 2,
                agent: "claude".into(),
                target: "main".into(),
                commit: None,
                selected: 2,
                stories: 2,
                pid: 1,
                resumes: None,
            },
        ));
        assert_eq!(s.budget_usd, Some(5.0), "the budget outlives run_start");
        s.apply(&rec(2.0, start("1.1", 0)));
        s.apply(&rec(2.5, start("1.2", 1)));
        assert_eq!(s.running.len(), 2);
        assert_eq!(s.running[0].since, 2.0);
        s.apply(&rec(3.0, end("1.1", Outcome::Done, 0.5)));
        s.apply(&rec(3.1, end("1.2", Outcome::Fail, 0.25)));
        assert!(s.running.is_empty());
        assert_eq!(s.land_queue, vec!["1.1"], "only finished work queues");
        assert_eq!(s.cost_usd, 0.75);
        assert_eq!(s.tokens, 200);
        s.apply(&rec(
            3.2,
            Ev::LandStart {
                story: "1.1".into(),
                attempt: 1,
            },
        ));
        assert_eq!(s.landing, vec!["1.1"]);
        assert!(s.land_queue.is_empty());
        s.apply(&rec(
            3.5,
            Ev::Landed {
                story: "1.1".into(),
                attempt: 1,
                commit: "abc".into(),
                secs: 0.3,
            },
        ));
        assert_eq!((s.landing.len(), s.landed), (0, 1));
        s.apply(&rec(
            4.0,
            Ev::RunEnd {
                done: 1,
                total: 2,
                failed: vec![],
                blocked: vec![],
                pending: 1,
                exit_code: 1,
                elapsed_secs: 3.0,
                tokens: 200,
                cost_usd: 0.75,
            },
        ));
        assert!(!s.live);
        assert_eq!(s.exit_code, Some(1));
    }

    /// A running attempt shows its node from its `attempt_placed` on; a
    /// placement of an attempt no longer running changes nothing.
    #[test]
    fn a_running_attempt_shows_the_node_it_was_placed_on() {
        let mut s = Summary::default();
        let placed = |story: &str, attempt: u32| Ev::AttemptPlaced {
            story: story.into(),
            attempt,
            node: "w2/0".into(),
        };
        s.apply(&rec(1.0, start("1.1", 0)));
        s.apply(&rec(1.1, start("1.2", 1)));
        assert_eq!(s.running[0].node, None, "unknown until placed");
        s.apply(&rec(2.0, placed("1.1", 1)));
        s.apply(&rec(2.1, placed("1.2", 7)));
        let nodes: Vec<Option<&str>> = s.running.iter().map(|r| r.node.as_deref()).collect();
        assert_eq!(nodes, [Some("w2/0"), None]);
        s.apply(&rec(3.0, end("1.1", Outcome::Done, 0.0)));
        s.apply(&rec(3.5, placed("1.1", 1)));
        assert_eq!(s.running.len(), 1, "{s:?}");
        assert_eq!(s.running[0].node, None);
    }

    /// Issue 36: a race is one story with a row per candidate, each
    /// candidate's state as its records say, kept once the race is over.
    #[test]
    fn a_race_shows_a_row_per_candidate_until_its_winner() {
        let mut s = Summary::default();
        let cand = |k: u32, model: &str| Ev::CandidateStart {
            story: "1.1".into(),
            attempt: 1,
            candidate: k,
            slot: k as usize - 1,
            agent: "claude".into(),
            model: Some(model.into()),
        };
        let state = |k: u32, state: &str| Ev::CandidateState {
            story: "1.1".into(),
            attempt: 1,
            candidate: k,
            state: state.into(),
        };
        let end = |k: u32, outcome: &str, winner: bool| Ev::CandidateEnd {
            story: "1.1".into(),
            attempt: 1,
            candidate: k,
            agent: "claude".into(),
            model: None,
            outcome: outcome.into(),
            winner,
            cost_usd: 0.01,
            cost_unknown: false,
        };
        let states = |s: &Summary| -> Vec<(u32, String)> {
            s.races[0]
                .candidates
                .iter()
                .map(|c| (c.k, c.state.clone()))
                .collect()
        };
        s.apply(&rec(1.0, start("1.1", 0)));
        s.apply(&rec(1.1, cand(2, "slow")));
        s.apply(&rec(1.2, cand(1, "fast")));
        assert_eq!(s.races.len(), 1);
        assert_eq!(s.races[0].candidates[1].model.as_deref(), Some("slow"));
        assert_eq!(s.races[0].candidates[0].since, 1.2);
        s.apply(&rec(2.0, state(1, "validating")));
        s.apply(&rec(2.5, end(1, "won", true)));
        s.apply(&rec(2.6, state(2, "stopped")));
        assert_eq!(
            states(&s),
            [(1, "won".to_string()), (2, "stopped".to_string())]
        );
        assert!(!s.races[0].over);
        s.apply(&rec(3.0, end(2, "stopped", false)));
        s.apply(&rec(3.1, end_of("1.1", 1, Outcome::Done)));
        assert!(s.races[0].over, "{s:?}");
        assert!(s.land_queue.is_empty(), "its work went through the queue");
        assert_eq!(s.races[0].candidates[1].ended, Some(3.0));
        // The story's next race takes the place of this one.
        s.apply(&rec(
            4.0,
            Ev::CandidateStart {
                story: "1.1".into(),
                attempt: 2,
                candidate: 1,
                slot: 0,
                agent: "codex".into(),
                model: None,
            },
        ));
        assert_eq!(s.races.len(), 1);
        assert_eq!((s.races[0].attempt, s.races[0].over), (2, false));
        assert_eq!(states(&s), [(1, "running".to_string())]);
    }

    /// A candidate on a cluster shows its node from its `candidate_placed`
    /// on; a placement of another attempt's candidate changes nothing.
    #[test]
    fn a_racing_candidate_shows_the_node_it_was_placed_on() {
        let mut s = Summary::default();
        let placed = |attempt: u32, k: u32, node: &str| Ev::CandidatePlaced {
            story: "1.1".into(),
            attempt,
            candidate: k,
            node: node.into(),
        };
        s.apply(&rec(1.0, start("1.1", 0)));
        for k in [1, 2] {
            s.apply(&rec(
                1.1,
                Ev::CandidateStart {
                    story: "1.1".into(),
                    attempt: 1,
                    candidate: k,
                    slot: k as usize - 1,
                    agent: "claude".into(),
                    model: None,
                },
            ));
        }
        s.apply(&rec(1.5, placed(1, 2, "w2/1")));
        s.apply(&rec(1.6, placed(2, 1, "head/0")));
        let nodes: Vec<Option<&str>> = s.races[0]
            .candidates
            .iter()
            .map(|c| c.node.as_deref())
            .collect();
        assert_eq!(nodes, [None, Some("w2/1")]);
    }

    #[test]
    fn a_pause_lasts_until_its_resume() {
        let mut s = Summary::default();
        let pause = |agent: &str| Ev::Pause {
            why: PauseWhy::UsageLimit,
            agent: Some(agent.into()),
            until: Some(100),
        };
        s.apply(&rec(1.0, pause("claude")));
        s.apply(&rec(1.5, pause("codex")));
        s.apply(&rec(2.0, pause("claude")));
        assert_eq!(s.pauses.len(), 2, "a repeated pause is one: {s:?}");
        s.apply(&rec(
            3.0,
            Ev::Resume {
                why: PauseWhy::UsageLimit,
                agent: Some("claude".into()),
            },
        ));
        assert_eq!(s.pauses.len(), 1);
        assert_eq!(s.pauses[0].agent.as_deref(), Some("codex"));
        assert_eq!(s.pauses[0].until, Some(100));
    }

    /// Regression: a pause, drain or hold a person made (`ralph pause`, the
    /// page's buttons) never showed: only usage-limit pauses were read.
    #[test]
    fn a_steered_pause_drain_and_hold_show_until_undone() {
        let mut s = Summary::default();
        let steer = |cmd: &str, story: Option<&str>| Ev::Steer {
            cmd: cmd.into(),
            story: story.map(str::to_string),
            message: String::new(),
        };
        s.apply(&rec(1.0, steer("pause", None)));
        s.apply(&rec(1.5, steer("pause", None)));
        s.apply(&rec(2.0, steer("hold", Some("1.2"))));
        s.apply(&rec(2.5, steer("stop", Some("1.3"))));
        let whys: Vec<&str> = s.pauses.iter().map(|p| p.why).collect();
        assert_eq!(whys, ["pause"], "{s:?}");
        assert_eq!(s.held, ["1.2", "1.3"]);
        s.apply(&rec(3.0, steer("resume", None)));
        s.apply(&rec(3.1, steer("drain", None)));
        s.apply(&rec(3.2, steer("release", Some("1.2"))));
        let whys: Vec<&str> = s.pauses.iter().map(|p| p.why).collect();
        assert_eq!(whys, ["drain"], "{s:?}");
        assert_eq!(s.held, ["1.3"]);
        s.apply(&rec(4.0, steer("resume", None)));
        assert!(s.pauses.is_empty(), "{s:?}");
    }
}
