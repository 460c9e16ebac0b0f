//! Where the money went (issue 25): spend per landed story (every attempt,
//! fix-up, decomposition and postmortem of the story, a split story's
//! spend counted with its sub-stories), per model and per backend, the
//! share spent on stories that never landed, and how much of the input the
//! providers' prompt caches served. Pure: run records in, figures out.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::agent::event::Usage;
use crate::runlog::Ev;

/// The name an attempt's model is shown under when the CLI chose it.
pub(crate) const CLI_DEFAULT: &str = "(the CLI's default)";

/// The spend of one model or one backend.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Bucket {
    pub(crate) attempts: usize,
    /// Stories whose landed work it made.
    pub(crate) landed: usize,
    /// The known cost (a floor when `unknown` > 0).
    pub(crate) cost_usd: f64,
    /// Attempts whose cost is unknown (no cost reported, no price known).
    pub(crate) unknown: usize,
    /// Input tokens, cached or not (uncached + cache reads + cache writes).
    pub(crate) input_tokens: u64,
    /// Of which the cache served.
    pub(crate) cached_tokens: u64,
    /// Races its candidates won (best of N, issue 36).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) wins: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Bucket {
    fn add(&mut self, usage: &Usage, cost: f64, unknown: bool) {
        self.attempts += 1;
        self.cost_usd += cost;
        self.unknown += usize::from(unknown);
        self.input_tokens +=
            usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens;
        self.cached_tokens += usage.cache_read_input_tokens;
    }

    /// Cached ÷ total input tokens.
    pub(crate) fn cache_share(&self) -> Option<f64> {
        (self.input_tokens > 0).then(|| self.cached_tokens as f64 / self.input_tokens as f64)
    }

    /// Its cost per story it landed; `None` when it landed none or a cost is unknown.
    pub(crate) fn per_landed(&self) -> Option<f64> {
        (self.landed > 0 && self.unknown == 0).then(|| self.cost_usd / self.landed as f64)
    }
}

/// The cost figures of a set of runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Costs {
    pub(crate) per_model: BTreeMap<String, Bucket>,
    pub(crate) per_backend: BTreeMap<String, Bucket>,
    /// Stories landed.
    pub(crate) landed: usize,
    /// What the landed stories cost, all their runs and their split parents' included.
    pub(crate) landed_cost_usd: f64,
    /// What stories that never landed cost.
    pub(crate) unlanded_cost_usd: f64,
    /// Attempts whose cost is unknown.
    pub(crate) unknown: usize,
    /// The landed stories that raced (best of N, issue 36) and those that
    /// did not, apart; `None` when none raced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) racing: Option<Racing>,
}

/// Spend per landed story with racing and without.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Racing {
    pub(crate) raced: Landed,
    pub(crate) alone: Landed,
}

/// Landed stories and what they cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Landed {
    pub(crate) stories: usize,
    pub(crate) cost_usd: f64,
}

impl Landed {
    pub(crate) fn per_story(&self) -> Option<f64> {
        (self.stories > 0).then(|| self.cost_usd / self.stories as f64)
    }
}

impl Costs {
    /// Spend per landed story; `None` before one landed, or when a cost is unknown.
    pub(crate) fn per_landed_story(&self) -> Option<f64> {
        (self.landed > 0 && self.unknown == 0).then(|| self.landed_cost_usd / self.landed as f64)
    }

    /// The share of all spend on stories that never landed.
    pub(crate) fn unlanded_share(&self) -> Option<f64> {
        let total = self.landed_cost_usd + self.unlanded_cost_usd;
        (total > 0.0).then(|| self.unlanded_cost_usd / total)
    }
}

/// The cost figures of `events` (the records of one or more runs, in order).
pub(crate) fn costs<'a>(events: impl IntoIterator<Item = &'a Ev>) -> Costs {
    let mut c = Costs::default();
    // (story, attempt) → (model, backend) from its start.
    let mut ran_on: HashMap<(String, u32), (String, String)> = HashMap::new();
    let mut per_story: BTreeMap<String, f64> = BTreeMap::new();
    let mut landed: BTreeSet<String> = BTreeSet::new();
    let mut raced: BTreeSet<String> = BTreeSet::new();
    for ev in events {
        match ev {
            Ev::CandidateStart { story, .. } => {
                raced.insert(story.clone());
            }
            Ev::AttemptStart {
                story,
                attempt,
                agent,
                model,
                ..
            } => {
                let m = model.clone().unwrap_or_else(|| CLI_DEFAULT.to_string());
                ran_on.insert((story.clone(), *attempt), (m, agent.clone()));
            }
            Ev::AttemptEnd {
                story,
                attempt,
                agent,
                model,
                usage,
                cost_usd,
                cost_unknown,
                ..
            } => {
                let started = ran_on.get(&(story.clone(), *attempt)).cloned();
                let m = model
                    .clone()
                    .or_else(|| started.as_ref().map(|s| s.0.clone()))
                    .unwrap_or_else(|| CLI_DEFAULT.to_string());
                let b = agent
                    .clone()
                    .or_else(|| started.map(|s| s.1))
                    .unwrap_or_else(|| "?".to_string());
                ran_on.insert((story.clone(), *attempt), (m.clone(), b.clone()));
                c.per_model
                    .entry(m)
                    .or_default()
                    .add(usage, *cost_usd, *cost_unknown);
                c.per_backend
                    .entry(b)
                    .or_default()
                    .add(usage, *cost_usd, *cost_unknown);
                c.unknown += usize::from(*cost_unknown);
                *per_story.entry(story.clone()).or_default() += cost_usd;
            }
            // A race's winner (best of N): a win for its model and backend.
            Ev::CandidateEnd {
                agent,
                model,
                winner: true,
                ..
            } => {
                let m = model.clone().unwrap_or_else(|| CLI_DEFAULT.to_string());
                c.per_model.entry(m).or_default().wins += 1;
                c.per_backend.entry(agent.clone()).or_default().wins += 1;
            }
            Ev::Landed { story, attempt, .. } if landed.insert(story.clone()) => {
                if let Some((m, b)) = ran_on.get(&(story.clone(), *attempt)) {
                    c.per_model.entry(m.clone()).or_default().landed += 1;
                    c.per_backend.entry(b.clone()).or_default().landed += 1;
                }
            }
            _ => {}
        }
    }
    c.landed = landed.len();
    for (story, cost) in per_story {
        // A split story lands through its sub-stories (`<id>.<n>`).
        let prefix = format!("{story}.");
        let landed_it = landed.contains(&story)
            || landed
                .range(prefix.clone()..)
                .next()
                .is_some_and(|s| s.starts_with(&prefix));
        if landed_it {
            c.landed_cost_usd += cost;
            if !raced.is_empty() {
                let r = c.racing.get_or_insert_with(Racing::default);
                let group = if raced.contains(&story) {
                    &mut r.raced
                } else {
                    &mut r.alone
                };
                group.stories += 1;
                group.cost_usd += cost;
            }
        } else {
            c.unlanded_cost_usd += cost;
        }
    }
    c
}

/// A cost for people: `$1.23`, `$1.23 + unknown` when some of it is not
/// known, `unknown` when none is.
pub(crate) fn money(cost: f64, unknown: bool, any_known: bool) -> String {
    match (unknown, any_known) {
        (false, _) => format!("${cost:.2}"),
        (true, true) => format!("${cost:.2} + unknown"),
        (true, false) => "unknown".to_string(),
    }
}

/// The per-model (or per-backend) lines of `stats`: each bucket's runs,
/// cost, cost per landed story and cache share.
pub(crate) fn bucket_text(m: &BTreeMap<String, Bucket>) -> String {
    let mut v: Vec<(&String, &Bucket)> = m.iter().collect();
    v.sort_by(|a, b| b.1.cost_usd.total_cmp(&a.1.cost_usd).then(a.0.cmp(b.0)));
    v.iter()
        .map(|(k, b)| {
            let known = b.attempts > b.unknown;
            let mut s = format!(
                "{k} {} in {} run{}",
                money(b.cost_usd, b.unknown > 0, known),
                b.attempts,
                if b.attempts == 1 { "" } else { "s" }
            );
            if b.landed > 0 {
                s.push_str(&format!(", {} landed", b.landed));
                if let Some(p) = b.per_landed() {
                    s.push_str(&format!(" (${p:.2} each)"));
                }
            }
            if b.wins > 0 {
                s.push_str(&format!(
                    ", won {} race{}",
                    b.wins,
                    if b.wins == 1 { "" } else { "s" }
                ));
            }
            if let Some(share) = b.cache_share() {
                s.push_str(&format!(", cached {:.0}% of input", share * 100.0));
            }
            s
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{AttemptKind, Outcome};

    fn start(story: &str, attempt: u32, model: Option<&str>) -> Ev {
        Ev::AttemptStart {
            story: story.into(),
            attempt,
            slot: 0,
            agent: "claude".into(),
            kind: AttemptKind::First,
            model: model.map(str::to_string),
            est: None,
        }
    }

    fn end(story: &str, attempt: u32, model: Option<&str>, cost: f64, unknown: bool) -> Ev {
        Ev::AttemptEnd {
            story: story.into(),
            attempt,
            slot: 0,
            agent: Some(if unknown { "codex" } else { "claude" }.into()),
            kind: AttemptKind::First,
            verdict: Outcome::Done,
            reason: None,
            tokens: 0,
            usage: Usage {
                input_tokens: 100,
                output_tokens: 10,
                cache_creation_input_tokens: 100,
                cache_read_input_tokens: 800,
            },
            cost_usd: cost,
            cost_unknown: unknown,
            model: model.map(str::to_string),
            secs: 1.0,
            saved_ref: None,
            node: None,
        }
    }

    fn landed(story: &str, attempt: u32) -> Ev {
        Ev::Landed {
            story: story.into(),
            attempt,
            commit: "c".into(),
            secs: 1.0,
        }
    }

    #[test]
    fn landed_stories_that_raced_are_counted_apart_from_the_others() {
        let candidate = |story: &str| Ev::CandidateStart {
            story: story.into(),
            attempt: 1,
            candidate: 1,
            slot: 0,
            agent: "claude".into(),
            model: None,
        };
        let alone = vec![
            start("1", 1, None),
            end("1", 1, None, 0.1, false),
            landed("1", 1),
        ];
        assert_eq!(costs(&alone).racing, None, "nothing raced: nothing apart");
        let mut evs = alone;
        evs.extend([
            start("2", 1, None),
            candidate("2"),
            end("2", 1, None, 0.3, false),
            landed("2", 1),
            start("3", 1, None),
            candidate("3"),
            end("3", 1, None, 0.5, false),
            landed("3", 1),
            // Raced and never landed: in neither.
            start("4", 1, None),
            candidate("4"),
            end("4", 1, None, 0.9, false),
        ]);
        let r = costs(&evs).racing.unwrap();
        assert_eq!((r.raced.stories, r.alone.stories), (2, 1));
        assert!((r.raced.per_story().unwrap() - 0.4).abs() < 1e-9, "{r:?}");
        assert!((r.alone.per_story().unwrap() - 0.1).abs() < 1e-9, "{r:?}");
    }

    #[test]
    fn spend_per_landed_story_counts_every_run_and_a_split_parent() {
        let evs = vec![
            start("1", 1, Some("haiku")),
            end("1", 1, Some("haiku"), 0.1, false),
            start("1", 2, Some("sonnet")),
            end("1", 2, Some("sonnet"), 0.5, false),
            landed("1", 2),
            // Split: the parent's runs are its sub-stories' spend.
            start("2", 1, Some("opus")),
            end("2", 1, Some("opus"), 1.0, false),
            start("2.1", 1, Some("haiku")),
            end("2.1", 1, Some("haiku"), 0.2, false),
            landed("2.1", 1),
            // Never landed.
            start("3", 1, Some("haiku")),
            end("3", 1, Some("haiku"), 0.2, false),
        ];
        let c = costs(&evs);
        assert_eq!(c.landed, 2);
        assert!((c.per_landed_story().unwrap() - 0.9).abs() < 1e-9, "{c:?}");
        assert!((c.unlanded_share().unwrap() - 0.2 / 2.0).abs() < 1e-9);
        let haiku = &c.per_model["haiku"];
        assert_eq!((haiku.attempts, haiku.landed), (3, 1));
        assert_eq!(c.per_model["sonnet"].landed, 1);
        assert!((haiku.cache_share().unwrap() - 0.8).abs() < 1e-9);
        assert!(bucket_text(&c.per_model)
            .contains("sonnet $0.50 in 1 run, 1 landed ($0.50 each), cached 80% of input"));
    }

    #[test]
    fn an_unknown_cost_is_never_shown_as_zero() {
        let evs = vec![
            start("1", 1, None),
            end("1", 1, None, 0.0, true),
            landed("1", 1),
        ];
        let c = costs(&evs);
        assert_eq!(c.unknown, 1);
        assert_eq!(c.per_landed_story(), None);
        let text = bucket_text(&c.per_model);
        assert!(
            text.starts_with("(the CLI's default) unknown in 1 run"),
            "{text}"
        );
        assert!(!text.contains("$0.00"), "{text}");
        assert_eq!(money(1.0, true, true), "$1.00 + unknown");
    }

    #[test]
    fn a_races_winner_is_a_win_for_its_model_and_backend() {
        let cand_end = |k: u32, model: &str, winner: bool| Ev::CandidateEnd {
            story: "1".into(),
            attempt: 1,
            candidate: k,
            agent: "claude".into(),
            model: Some(model.into()),
            outcome: if winner { "won" } else { "stopped" }.into(),
            winner,
            cost_usd: 0.1,
            cost_unknown: false,
        };
        let evs = vec![
            start("2", 1, Some("haiku")),
            end("2", 1, Some("haiku"), 0.1, false),
            cand_end(1, "haiku", false),
            cand_end(2, "opus", true),
        ];
        let c = costs(&evs);
        assert_eq!(c.per_model["opus"].wins, 1);
        assert_eq!(c.per_model["haiku"].wins, 0);
        assert_eq!(c.per_backend["claude"].wins, 1);
        let json = serde_json::to_value(&c.per_model).unwrap();
        assert_eq!(json["opus"]["wins"], 1);
        assert!(
            json["haiku"].get("wins").is_none(),
            "no wins, no field: {json}"
        );
        assert!(bucket_text(&c.per_model).contains("won 1 race"));
    }
}
