//! `ralph stats`: figures of runs, aggregated from their records
//! (`runlog`): stories landed, agent runs per landed story by kind (the
//! waste), tokens and cost per story, epic and agent, durations by
//! estimation, slot utilisation, time paused, the most-failed stories.
//! Pure: records in, figures and text out.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::report::short_count;
use crate::runlog::{Ev, PauseWhy, RunData};
use crate::state::{AttemptKind, Outcome};
use crate::timefmt::human_duration;

/// Tokens, cost and counts of a group of attempts.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Spend {
    pub(crate) attempts: usize,
    pub(crate) landed: usize,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
}

/// One story's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct StoryFigures {
    pub(crate) attempts: usize,
    pub(crate) by_kind: BTreeMap<AttemptKind, usize>,
    /// Failed attempts and failed validations.
    pub(crate) failures: usize,
    pub(crate) conflicts: usize,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
    /// Agent time over its attempts.
    pub(crate) agent_secs: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) landed_commit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) estimation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) agent: Option<String>,
}

/// Agent time of the landed stories of one `estimation`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Durations {
    pub(crate) stories: usize,
    pub(crate) median_secs: f64,
    pub(crate) longest_secs: f64,
    pub(crate) longest_story: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct MostFailed {
    pub(crate) story: String,
    pub(crate) failures: usize,
    pub(crate) conflicts: usize,
}

impl MostFailed {
    /// `2 failed, 1 conflict`
    pub(crate) fn counts(&self) -> String {
        let mut what = Vec::new();
        if self.failures > 0 {
            what.push(format!("{} failed", self.failures));
        }
        if self.conflicts > 0 {
            what.push(plural(self.conflicts, "conflict"));
        }
        what.join(", ")
    }
}

/// The figures of one run, or of several together.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Figures {
    pub(crate) runs: usize,
    pub(crate) landed: usize,
    pub(crate) attempts: usize,
    /// Agent runs by kind: every one past `first` is waste.
    pub(crate) by_kind: BTreeMap<AttemptKind, usize>,
    /// Agent runs per landed story (`None` before anything landed).
    pub(crate) runs_per_landed: Option<f64>,
    /// Attempts by verdict (`done`, `fail`, `timeout`, ...).
    pub(crate) verdicts: BTreeMap<String, usize>,
    pub(crate) conflicts: usize,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
    pub(crate) agent_secs: f64,
    pub(crate) validation_secs: f64,
    pub(crate) wall_secs: f64,
    /// Time attempts held a slot, and the slots' time (jobs × wall).
    pub(crate) slot_busy_secs: f64,
    pub(crate) slot_secs: f64,
    pub(crate) slot_utilisation: Option<f64>,
    pub(crate) paused_secs: f64,
    pub(crate) per_epic: BTreeMap<String, Spend>,
    pub(crate) per_agent: BTreeMap<String, Spend>,
    pub(crate) by_estimation: BTreeMap<String, Durations>,
    pub(crate) most_failed: Vec<MostFailed>,
    pub(crate) per_story: BTreeMap<String, StoryFigures>,
    /// Spend per landed story, model and backend (`spend`).
    pub(crate) costs: crate::spend::Costs,
    /// The merge queue's figures (`queue_figures`).
    pub(crate) queue: QueueFigures,
}

/// The merge queue (issue 34): how fast it lands, how long finished work
/// waits for it, and what its validations cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct QueueFigures {
    /// Stories landed per hour of run time.
    pub(crate) landings_per_hour: Option<f64>,
    /// From an attempt's end to its story's landing, in seconds.
    pub(crate) wait_p50_secs: Option<f64>,
    pub(crate) wait_p95_secs: Option<f64>,
    /// Candidates validated (a chain's merges each count).
    pub(crate) validation_runs: usize,
    pub(crate) validation_runs_per_landing: Option<f64>,
    /// Validation time spent on candidates behind a failure in a chain.
    pub(crate) thrown_secs: f64,
}

/// The `p`-th percentile (0..=1) of `v`, nearest rank.
fn percentile(v: &mut [f64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

/// The merge queue's figures of `runs`, from their records' times: a
/// story's wait runs from its latest attempt's end to its landing.
pub(crate) fn queue_figures(runs: &[&RunData], landed: usize, wall_secs: f64) -> QueueFigures {
    let mut waits = Vec::new();
    let mut q = QueueFigures::default();
    for run in runs {
        let mut ended: HashMap<&str, f64> = HashMap::new();
        for r in &run.records {
            match &r.ev {
                Ev::AttemptEnd { story, .. } => {
                    ended.insert(story, r.t);
                }
                Ev::Landed { story, .. } => {
                    if let Some(t) = ended.remove(story.as_str()) {
                        waits.push((r.t - t).max(0.0));
                    }
                }
                Ev::ValidateEnd { verdict, secs, .. } => {
                    q.validation_runs += 1;
                    if verdict == "thrown" {
                        q.thrown_secs += secs;
                    }
                }
                _ => {}
            }
        }
    }
    q.wait_p50_secs = percentile(&mut waits, 0.5);
    q.wait_p95_secs = percentile(&mut waits, 0.95);
    q.landings_per_hour =
        (wall_secs > 0.0 && landed > 0).then(|| landed as f64 * 3600.0 / wall_secs);
    q.validation_runs_per_landing =
        (landed > 0 && q.validation_runs > 0).then(|| q.validation_runs as f64 / landed as f64);
    q
}

/// What a run was: when, how, how it ended, and its figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct RunStats {
    pub(crate) id: String,
    pub(crate) started: Option<f64>,
    pub(crate) ended: Option<f64>,
    pub(crate) jobs: usize,
    pub(crate) agent: String,
    pub(crate) args: Vec<String>,
    pub(crate) target: String,
    /// `None` when the run was killed (its file has no `run_end`).
    pub(crate) exit_code: Option<i32>,
    pub(crate) killed: bool,
    /// The killed run whose work this one picked up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) resumes: Option<String>,
    pub(crate) figures: Figures,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Stats {
    pub(crate) runs: Vec<RunStats>,
    pub(crate) lifetime: Figures,
    /// Each model's attempts, landings, spend and race wins over every run
    /// (`by_model.<model>.wins`, issue 36's format): the lifetime's
    /// `costs.per_model`, with `wins` always said.
    pub(crate) by_model: BTreeMap<String, ModelFigures>,
}

/// A model's figures in `stats --json`'s `by_model`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct ModelFigures {
    pub(crate) attempts: usize,
    pub(crate) landed: usize,
    pub(crate) cost_usd: f64,
    pub(crate) wins: usize,
}

/// The epic of a story ID: up to its first `.` (as `specs.pattern`).
pub(crate) fn epic_of(id: &str) -> &str {
    id.split('.').next().unwrap_or(id)
}

/// A failed attempt in the retry-budget sense.
fn is_failure(v: Outcome) -> bool {
    matches!(
        v,
        Outcome::Fail | Outcome::Timeout | Outcome::Error | Outcome::NoSignal
    )
}

pub(crate) fn outcome_name(v: Outcome) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|s| s.as_str().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// The end of a run: its `run_end`, else its last record (a killed run).
fn run_bounds(run: &RunData) -> (Option<f64>, Option<f64>) {
    let start = run
        .records
        .iter()
        .find(|r| matches!(r.ev, Ev::RunStart { .. }))
        .or(run.records.first())
        .map(|r| r.t);
    let end = run
        .records
        .iter()
        .rev()
        .find(|r| !matches!(r.ev, Ev::Recovered { .. } | Ev::Unknown))
        .map(|r| r.t);
    (start, end)
}

/// Attempt intervals of a run, for the timeline and slot utilisation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bar {
    pub(crate) story: String,
    pub(crate) attempt: u32,
    pub(crate) slot: usize,
    pub(crate) kind: AttemptKind,
    pub(crate) agent: String,
    pub(crate) start: f64,
    pub(crate) end: f64,
    /// `None` for an attempt the run's end (a kill) cut off.
    pub(crate) verdict: Option<Outcome>,
    pub(crate) reason: Option<String>,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
}

/// One attempt per bar, in start order; an attempt without an end runs to
/// the run's last record.
pub(crate) fn bars(run: &RunData) -> Vec<Bar> {
    let (_, end) = run_bounds(run);
    let mut open: HashMap<(String, u32), usize> = HashMap::new();
    let mut out: Vec<Bar> = Vec::new();
    for r in &run.records {
        match &r.ev {
            Ev::AttemptStart {
                story,
                attempt,
                slot,
                agent,
                kind,
                ..
            } => {
                open.insert((story.clone(), *attempt), out.len());
                out.push(Bar {
                    story: story.clone(),
                    attempt: *attempt,
                    slot: *slot,
                    kind: *kind,
                    agent: agent.clone(),
                    start: r.t,
                    end: end.unwrap_or(r.t),
                    verdict: None,
                    reason: None,
                    tokens: 0,
                    cost_usd: 0.0,
                });
            }
            Ev::AttemptEnd {
                story,
                attempt,
                verdict,
                reason,
                tokens,
                cost_usd,
                ..
            } => {
                if let Some(i) = open.remove(&(story.clone(), *attempt)) {
                    let b = &mut out[i];
                    b.end = r.t.max(b.start);
                    b.verdict = Some(*verdict);
                    b.reason = reason.clone();
                    b.tokens = *tokens;
                    b.cost_usd = *cost_usd;
                }
            }
            _ => {}
        }
    }
    out
}

/// Pause intervals of a run (union over agents and causes), clipped to it.
pub(crate) fn pauses(run: &RunData) -> Vec<(f64, f64, PauseWhy)> {
    let (_, end) = run_bounds(run);
    let end = end.unwrap_or(0.0);
    let mut open: BTreeMap<(PauseWhy, Option<String>), f64> = BTreeMap::new();
    let mut out = Vec::new();
    for r in &run.records {
        match &r.ev {
            Ev::Pause { why, agent, .. } => {
                open.entry((*why, agent.clone())).or_insert(r.t);
            }
            Ev::Resume { why, agent } => {
                if let Some(s) = open.remove(&(*why, agent.clone())) {
                    out.push((s, r.t, *why));
                }
            }
            _ => {}
        }
    }
    for ((why, _), s) in open {
        out.push((s, end.max(s), why));
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

fn union_secs(intervals: &[(f64, f64, PauseWhy)]) -> f64 {
    let mut total = 0.0;
    let mut cur: Option<(f64, f64)> = None;
    for &(s, e, _) in intervals {
        cur = match cur {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    if let Some((cs, ce)) = cur {
        total += ce - cs;
    }
    total
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The figures of `runs` taken together.
pub(crate) fn figures(runs: &[&RunData]) -> Figures {
    let mut f = Figures {
        runs: runs.len(),
        ..Figures::default()
    };
    let mut est_of: HashMap<String, String> = HashMap::new();
    for run in runs {
        let (start, end) = run_bounds(run);
        let wall = match (start, end) {
            (Some(s), Some(e)) => (e - s).max(0.0),
            _ => 0.0,
        };
        f.wall_secs += wall;
        let jobs = run.records.iter().find_map(|r| match &r.ev {
            Ev::RunStart { jobs, .. } => Some(*jobs),
            _ => None,
        });
        f.slot_secs += wall * jobs.unwrap_or(1) as f64;
        for b in bars(run) {
            f.slot_busy_secs += b.end - b.start;
        }
        f.paused_secs += union_secs(&pauses(run));
        for r in &run.records {
            absorb(&mut f, &mut est_of, &r.ev);
        }
    }
    f.costs = crate::spend::costs(runs.iter().flat_map(|r| r.records.iter().map(|r| &r.ev)));
    f.runs_per_landed = (f.landed > 0).then(|| f.attempts as f64 / f.landed as f64);
    f.queue = queue_figures(runs, f.landed, f.wall_secs);
    f.slot_utilisation = (f.slot_secs > 0.0).then(|| (f.slot_busy_secs / f.slot_secs).min(1.0));
    let mut by_est: BTreeMap<String, Vec<(f64, String)>> = BTreeMap::new();
    for (id, s) in &f.per_story {
        if s.landed_commit.is_some() {
            // No estimation weighs as medium (docs/backlog.md), and says so.
            let est = est_of.get(id).cloned().unwrap_or_else(|| "medium".into());
            by_est
                .entry(est)
                .or_default()
                .push((s.agent_secs, id.clone()));
        }
    }
    for (est, v) in by_est {
        let (longest_secs, longest_story) = v
            .iter()
            .max_by(|a, b| a.0.total_cmp(&b.0).then_with(|| b.1.cmp(&a.1)))
            .cloned()
            .unwrap_or_default();
        let mut secs: Vec<f64> = v.iter().map(|x| x.0).collect();
        f.by_estimation.insert(
            est,
            Durations {
                stories: v.len(),
                median_secs: median(&mut secs),
                longest_secs,
                longest_story,
            },
        );
    }
    let mut failed: Vec<MostFailed> = f
        .per_story
        .iter()
        .filter(|(_, s)| s.failures + s.conflicts > 0)
        .map(|(id, s)| MostFailed {
            story: id.clone(),
            failures: s.failures,
            conflicts: s.conflicts,
        })
        .collect();
    failed.sort_by(|a, b| {
        (b.failures + b.conflicts)
            .cmp(&(a.failures + a.conflicts))
            .then_with(|| a.story.cmp(&b.story))
    });
    failed.truncate(10);
    f.most_failed = failed;
    f
}

fn absorb(f: &mut Figures, est_of: &mut HashMap<String, String>, ev: &Ev) {
    match ev {
        Ev::AttemptStart {
            story,
            kind,
            agent,
            est,
            ..
        } => {
            f.attempts += 1;
            *f.by_kind.entry(*kind).or_default() += 1;
            if let Some(e) = est {
                est_of.insert(story.clone(), e.clone());
            }
            let s = f.per_story.entry(story.clone()).or_default();
            s.attempts += 1;
            *s.by_kind.entry(*kind).or_default() += 1;
            s.estimation = est.clone().or(s.estimation.take());
            s.agent = Some(agent.clone());
            f.per_epic
                .entry(epic_of(story).to_string())
                .or_default()
                .attempts += 1;
            f.per_agent.entry(agent.clone()).or_default().attempts += 1;
        }
        Ev::AttemptEnd {
            story,
            agent,
            verdict,
            tokens,
            cost_usd,
            secs,
            ..
        } => {
            *f.verdicts.entry(outcome_name(*verdict)).or_default() += 1;
            f.tokens += tokens;
            f.cost_usd += cost_usd;
            f.agent_secs += secs;
            let s = f.per_story.entry(story.clone()).or_default();
            s.tokens += tokens;
            s.cost_usd += cost_usd;
            s.agent_secs += secs;
            if is_failure(*verdict) {
                s.failures += 1;
            }
            let e = f.per_epic.entry(epic_of(story).to_string()).or_default();
            e.tokens += tokens;
            e.cost_usd += cost_usd;
            if let Some(a) = agent {
                let a = f.per_agent.entry(a.clone()).or_default();
                a.tokens += tokens;
                a.cost_usd += cost_usd;
            }
        }
        Ev::Validated { secs, .. } => f.validation_secs += secs,
        Ev::Landed { story, commit, .. } => {
            f.landed += 1;
            let s = f.per_story.entry(story.clone()).or_default();
            s.landed_commit = Some(commit.clone());
            f.per_epic
                .entry(epic_of(story).to_string())
                .or_default()
                .landed += 1;
            if let Some(a) = s.agent.clone() {
                f.per_agent.entry(a).or_default().landed += 1;
            }
        }
        Ev::Conflict { story, .. } => {
            f.conflicts += 1;
            f.per_story.entry(story.clone()).or_default().conflicts += 1;
        }
        Ev::LandEnd { story, result, .. } if result == "validation_failed" => {
            f.per_story.entry(story.clone()).or_default().failures += 1;
        }
        _ => {}
    }
}

/// What a run was, from its records.
pub(crate) fn run_stats(run: &RunData) -> RunStats {
    let (started, ended) = run_bounds(run);
    let mut s = RunStats {
        id: run.id.clone(),
        started,
        ended,
        figures: figures(&[run]),
        killed: true,
        ..RunStats::default()
    };
    for r in &run.records {
        match &r.ev {
            Ev::RunStart {
                jobs,
                agent,
                args,
                target,
                resumes,
                ..
            } => {
                s.resumes = resumes.clone();
                s.jobs = *jobs;
                s.agent = agent.clone();
                s.args = args.clone();
                s.target = target.clone();
            }
            Ev::RunEnd { exit_code, .. } => {
                s.exit_code = Some(*exit_code);
                s.killed = false;
            }
            _ => {}
        }
    }
    s
}

/// Which runs `ralph stats` shows besides the lifetime figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Which {
    Latest,
    Run(String),
    All,
}

/// The stats of `which` among `runs` (oldest first), with lifetime figures
/// over all of them.
pub(crate) fn stats(runs: &[RunData], which: &Which) -> Stats {
    let all: Vec<&RunData> = runs.iter().collect();
    let shown: Vec<&RunData> = match which {
        Which::Latest => runs.last().into_iter().collect(),
        Which::Run(id) => runs.iter().filter(|r| &r.id == id).collect(),
        Which::All => all.clone(),
    };
    let lifetime = figures(&all);
    let by_model = lifetime
        .costs
        .per_model
        .iter()
        .map(|(m, b)| {
            let f = ModelFigures {
                attempts: b.attempts,
                landed: b.landed,
                cost_usd: b.cost_usd,
                wins: b.wins,
            };
            (m.clone(), f)
        })
        .collect();
    Stats {
        runs: shown.into_iter().map(run_stats).collect(),
        lifetime,
        by_model,
    }
}

fn money(x: f64) -> String {
    format!("${x:.2}")
}

/// `8 first, 4 retry`
pub(crate) fn kinds_text(by_kind: &BTreeMap<AttemptKind, usize>) -> String {
    let parts: Vec<String> = by_kind
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{n} {}", k.name()))
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

fn top_spend(m: &BTreeMap<String, Spend>, n: usize) -> String {
    let mut v: Vec<(&String, &Spend)> = m.iter().collect();
    v.sort_by(|a, b| b.1.cost_usd.total_cmp(&a.1.cost_usd).then(a.0.cmp(b.0)));
    let mut parts: Vec<String> = v
        .iter()
        .take(n)
        .map(|(k, s)| {
            format!(
                "{k} {} ({} tokens)",
                money(s.cost_usd),
                short_count(s.tokens)
            )
        })
        .collect();
    if v.len() > n {
        parts.push(format!("… {} more", v.len() - n));
    }
    parts.join(" · ")
}

fn figures_text(f: &Figures, out: &mut String) {
    let per = f
        .runs_per_landed
        .map(|x| format!("{x:.2}"))
        .unwrap_or_else(|| "–".into());
    out.push_str(&format!(
        "  landed {} · agent runs {} ({}) · {per} runs per landed story\n",
        f.landed,
        f.attempts,
        kinds_text(&f.by_kind)
    ));
    let util = f
        .slot_utilisation
        .map(|u| format!("{:.0}%", u * 100.0))
        .unwrap_or_else(|| "–".into());
    let c = &f.costs;
    out.push_str(&format!(
        "  {} tokens · {} · slots busy {util} · paused {} · conflicts {}\n",
        short_count(f.tokens),
        crate::spend::money(f.cost_usd, c.unknown > 0, c.unknown < f.attempts),
        human_duration(f.paused_secs),
        f.conflicts
    ));
    if c.landed > 0 || c.unlanded_cost_usd > 0.0 {
        let per = match c.per_landed_story() {
            Some(p) => format!("${p:.2}"),
            None if c.landed == 0 => "–".to_string(),
            None => "unknown".to_string(),
        };
        let never = c
            .unlanded_share()
            .map(|s| format!("; {:.0}% of spend on stories that never landed", s * 100.0))
            .unwrap_or_default();
        out.push_str(&format!("  spend per landed story {per}{never}\n"));
    }
    if let Some(r) = &c.racing {
        let group = |g: &crate::spend::Landed| match g.per_story() {
            Some(p) => format!(
                "${p:.2} ({})",
                crate::report::counted(g.stories, "story", "stories")
            ),
            None => "– (none)".to_string(),
        };
        out.push_str(&format!(
            "  spend per landed story that raced {}, alone {}\n",
            group(&r.raced),
            group(&r.alone)
        ));
    }
    if !c.per_model.is_empty() {
        out.push_str(&format!(
            "  by model: {}\n",
            crate::spend::bucket_text(&c.per_model)
        ));
    }
    if c.per_backend.len() > 1 {
        out.push_str(&format!(
            "  by backend: {}\n",
            crate::spend::bucket_text(&c.per_backend)
        ));
    }
    if let Some(line) = queue_text(&f.queue) {
        out.push_str(&line);
    }
    if !f.by_estimation.is_empty() {
        let parts: Vec<String> = f
            .by_estimation
            .iter()
            .map(|(e, d)| {
                format!(
                    "{e}: {} landed, median {}, longest {} ({})",
                    d.stories,
                    human_duration(d.median_secs),
                    human_duration(d.longest_secs),
                    d.longest_story
                )
            })
            .collect();
        out.push_str(&format!(
            "  agent time by estimation: {}\n",
            parts.join(" · ")
        ));
    }
    if !f.per_epic.is_empty() {
        out.push_str(&format!("  cost by epic: {}\n", top_spend(&f.per_epic, 8)));
    }
    if !f.per_agent.is_empty() {
        out.push_str(&format!(
            "  cost by agent: {}\n",
            top_spend(&f.per_agent, 8)
        ));
    }
    let mut stories: Vec<(&String, &StoryFigures)> = f.per_story.iter().collect();
    stories.sort_by(|a, b| b.1.cost_usd.total_cmp(&a.1.cost_usd).then(a.0.cmp(b.0)));
    if !stories.is_empty() {
        let parts: Vec<String> = stories
            .iter()
            .take(5)
            .map(|(id, s)| {
                format!(
                    "{id} {} ({})",
                    money(s.cost_usd),
                    plural(s.attempts, "agent run")
                )
            })
            .collect();
        out.push_str(&format!("  costliest stories: {}\n", parts.join(" · ")));
    }
    if !f.most_failed.is_empty() {
        let parts: Vec<String> = f
            .most_failed
            .iter()
            .map(|m| format!("{} ({})", m.story, m.counts()))
            .collect();
        out.push_str(&format!("  most failed: {}\n", parts.join(" · ")));
    }
}

/// The merge queue's line, once something landed.
fn queue_text(q: &QueueFigures) -> Option<String> {
    let per_hour = q.landings_per_hour?;
    let mut parts = vec![format!("merge queue: {per_hour:.0} landings/hour")];
    if let (Some(p50), Some(p95)) = (q.wait_p50_secs, q.wait_p95_secs) {
        parts.push(format!(
            "wait P50 {} P95 {}",
            human_duration(p50),
            human_duration(p95)
        ));
    }
    if let Some(per) = q.validation_runs_per_landing {
        parts.push(format!("{per:.2} validation runs per landing"));
        parts.push(format!(
            "{:.1} validation min thrown away",
            q.thrown_secs / 60.0
        ));
    }
    Some(format!("  {}\n", parts.join(" · ")))
}

/// `ralph stats` as text; `offset` is the local UTC offset in seconds.
pub(crate) fn render(s: &Stats, offset: i32) -> String {
    let mut out = String::new();
    for r in &s.runs {
        let when = r
            .started
            .map(|t| local_stamp(t, offset))
            .unwrap_or_else(|| "?".into());
        let end = match (r.killed, r.exit_code) {
            (true, _) => "killed".to_string(),
            (false, Some(c)) => format!("exit {c}"),
            (false, None) => "?".to_string(),
        };
        out.push_str(&format!(
            "run {} · {when} · {} · {} · {} · {end}\n",
            r.id,
            human_duration(r.figures.wall_secs),
            plural(r.jobs, "job"),
            if r.agent.is_empty() { "?" } else { &r.agent },
        ));
        figures_text(&r.figures, &mut out);
        out.push('\n');
    }
    out.push_str(&format!(
        "lifetime · {} · {} of runs\n",
        plural(s.lifetime.runs, "run"),
        human_duration(s.lifetime.wall_secs)
    ));
    figures_text(&s.lifetime, &mut out);
    fit_lines(&out, LINE_COLS)
}

/// The widest line `stats` and `status` print: they read on an 80-column
/// terminal, in a mail, in a CI log.
pub(crate) const LINE_COLS: usize = 80;

/// Each line of `text` made to fit `cols` columns: a longer one is broken
/// between its ` · ` parts, the rest indented under its first part; a part
/// too long alone is cut.
pub(crate) fn fit_lines(text: &str, cols: usize) -> String {
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if crate::ui::width(body) <= cols {
            out.push_str(line);
            continue;
        }
        let indent = body.len() - body.trim_start().len() + 2;
        let mut current = String::new();
        for part in body.split(" · ") {
            let joined = if current.is_empty() {
                part.to_string()
            } else {
                format!("{current} · {part}")
            };
            if crate::ui::width(&joined) <= cols || current.is_empty() {
                current = joined;
                continue;
            }
            out.push_str(&crate::ui::truncate(&current, cols));
            out.push('\n');
            current = format!("{}{part}", " ".repeat(indent));
        }
        out.push_str(&crate::ui::truncate(&current, cols));
        out.push_str(nl);
    }
    out
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// `2026-11-22 11:51` in local time (`offset` seconds east of UTC).
pub(crate) fn local_stamp(t: f64, offset: i32) -> String {
    let iso = crate::timefmt::iso(t as i64 + i64::from(offset));
    format!("{} {}", &iso[..10], &iso[11..16])
}

/// Records with made-up times, for tests here and in `report_html`.
#[cfg(test)]
pub(crate) fn sample_run(id: &str, t0: f64) -> RunData {
    let rec = |t: f64, ev: Ev| crate::runlog::Record { t: t0 + t, ev };
    let start = |t, story: &str, attempt, slot, kind| {
        rec(
            t,
            Ev::AttemptStart {
                story: story.into(),
                attempt,
                slot,
                agent: "claude".into(),
                kind,
                model: None,
                est: Some(if story == "2.1" { "large" } else { "small" }.into()),
            },
        )
    };
    let end = |t, story: &str, attempt, slot, verdict, secs| {
        rec(
            t,
            Ev::AttemptEnd {
                story: story.into(),
                attempt,
                slot,
                agent: Some("claude".into()),
                kind: AttemptKind::First,
                verdict,
                reason: None,
                tokens: 1000,
                usage: Default::default(),
                cost_usd: 0.5,
                cost_unknown: false,
                model: None,
                secs,
                saved_ref: None,
                node: None,
            },
        )
    };
    let landed = |t, story: &str, attempt| {
        rec(
            t,
            Ev::Landed {
                story: story.into(),
                attempt,
                commit: format!("c{story}"),
                secs: 2.0,
            },
        )
    };
    RunData {
        id: id.into(),
        skipped: 0,
        records: vec![
            rec(
                0.0,
                Ev::RunStart {
                    run: id.into(),
                    version: "0".into(),
                    args: vec!["run".into(), "-j".into(), "2".into()],
                    jobs: 2,
                    agent: "claude".into(),
                    target: "main".into(),
                    commit: None,
                    selected: 3,
                    stories: 3,
                    pid: 1,
                    resumes: None,
                },
            ),
            start(0.0, "1.1", 1, 0, AttemptKind::First),
            start(0.0, "1.2", 1, 1, AttemptKind::First),
            end(10.0, "1.1", 1, 0, Outcome::Done, 10.0),
            rec(
                10.0,
                Ev::LandStart {
                    story: "1.1".into(),
                    attempt: 1,
                },
            ),
            landed(12.0, "1.1", 1),
            end(20.0, "1.2", 1, 1, Outcome::Fail, 20.0),
            start(20.0, "1.2", 2, 1, AttemptKind::Redo),
            rec(
                20.0,
                Ev::Pause {
                    why: PauseWhy::UsageLimit,
                    agent: Some("claude".into()),
                    until: None,
                },
            ),
            rec(
                30.0,
                Ev::Resume {
                    why: PauseWhy::UsageLimit,
                    agent: Some("claude".into()),
                },
            ),
            end(50.0, "1.2", 2, 1, Outcome::Done, 30.0),
            landed(52.0, "1.2", 2),
            start(52.0, "2.1", 1, 0, AttemptKind::First),
            end(92.0, "2.1", 1, 0, Outcome::Done, 40.0),
            rec(
                93.0,
                Ev::Conflict {
                    story: "2.1".into(),
                    attempt: 1,
                    paths: vec!["a.rs".into()],
                    secs: 1.0,
                },
            ),
            rec(
                100.0,
                Ev::RunEnd {
                    done: 2,
                    total: 3,
                    failed: vec![],
                    blocked: vec![],
                    pending: 1,
                    exit_code: 0,
                    elapsed_secs: 100.0,
                    tokens: 4000,
                    cost_usd: 2.0,
                },
            ),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_break_between_their_parts_to_fit_80_columns() {
        let line = format!(
            "  costliest stories: {}\n",
            ["1.2 $1.00 (2 agent runs)"; 4].join(" · ")
        );
        let fitted = fit_lines(&line, 80);
        assert_eq!(
            fitted,
            "  costliest stories: 1.2 $1.00 (2 agent runs) · 1.2 $1.00 (2 agent runs)\n    \
             1.2 $1.00 (2 agent runs) · 1.2 $1.00 (2 agent runs)\n"
        );
        assert!(fitted.lines().all(|l| crate::ui::width(l) <= 80));
        assert_eq!(fit_lines("short\nlines\n", 80), "short\nlines\n");
        let one = "x".repeat(100);
        assert_eq!(crate::ui::width(&fit_lines(&one, 80)), 80);
    }
    use crate::runlog::Record;

    #[test]
    fn queue_figures_read_waits_and_validation_runs_off_the_records() {
        let mut run = sample_run("r", 1_000.0);
        let end = |t: f64, verdict: &str, secs: f64| crate::runlog::Record {
            t: 1_000.0 + t,
            ev: Ev::ValidateEnd {
                tree: "t".into(),
                stories: vec!["1.1".into()],
                verdict: verdict.into(),
                secs,
                node: None,
            },
        };
        run.records.push(end(1.0, "passed", 2.0));
        run.records.push(end(1.0, "failed", 2.0));
        run.records.push(end(1.0, "thrown", 90.0));
        let f = figures(&[&run]);
        let q = &f.queue;
        assert!(f.landed > 0);
        assert_eq!(q.validation_runs, 3);
        assert_eq!(q.validation_runs_per_landing, Some(3.0 / f.landed as f64));
        assert_eq!(q.thrown_secs, 90.0);
        assert!(q.wait_p50_secs.is_some() && q.wait_p50_secs <= q.wait_p95_secs);
        assert!(q.landings_per_hour.is_some_and(|x| x > 0.0));
        assert_eq!(percentile(&mut [5.0, 1.0, 3.0, 2.0, 4.0], 0.5), Some(3.0));
        assert_eq!(percentile(&mut [5.0, 1.0, 3.0, 2.0, 4.0], 0.95), Some(5.0));
        assert_eq!(percentile(&mut [], 0.5), None);
    }

    #[test]
    fn figures_of_a_known_run() {
        let run = sample_run("r1", 1_000.0);
        let f = figures(&[&run]);
        assert_eq!(f.landed, 2);
        assert_eq!(f.attempts, 4);
        assert_eq!(f.by_kind[&AttemptKind::First], 3);
        assert_eq!(f.by_kind[&AttemptKind::Redo], 1);
        assert_eq!(f.runs_per_landed, Some(2.0));
        assert_eq!(f.tokens, 4000);
        assert!((f.cost_usd - 2.0).abs() < 1e-9);
        assert_eq!(f.verdicts["done"], 3);
        assert_eq!(f.verdicts["fail"], 1);
        assert_eq!(f.conflicts, 1);
        // Slots: 10 + 20 + 30 + 40 busy of 2 × 100.
        assert!((f.slot_busy_secs - 100.0).abs() < 1e-9);
        assert_eq!(f.slot_utilisation, Some(0.5));
        assert!((f.paused_secs - 10.0).abs() < 1e-9);
        // 1.1 landed after 10 s of agent time, 1.2 after 20 + 30.
        let small = &f.by_estimation["small"];
        assert_eq!(small.stories, 2);
        assert!((small.median_secs - 30.0).abs() < 1e-9);
        assert_eq!(small.longest_story, "1.2");
        assert!(!f.by_estimation.contains_key("large"), "2.1 did not land");
        assert_eq!(f.per_epic["1"].landed, 2);
        assert!((f.per_epic["2"].cost_usd - 0.5).abs() < 1e-9);
        assert_eq!(f.per_agent["claude"].attempts, 4);
        assert_eq!(
            f.most_failed,
            vec![
                MostFailed {
                    story: "1.2".into(),
                    failures: 1,
                    conflicts: 0
                },
                MostFailed {
                    story: "2.1".into(),
                    failures: 0,
                    conflicts: 1
                },
            ]
        );
        let s = run_stats(&run);
        assert_eq!((s.exit_code, s.killed, s.jobs), (Some(0), false, 2));
    }

    #[test]
    fn lifetime_adds_runs_and_a_killed_run_ends_at_its_last_record() {
        let a = sample_run("a", 0.0);
        let mut b = sample_run("b", 1_000.0);
        // Killed at t=50: no run_end, 2.1 never started.
        b.records.retain(|r| r.t <= 1_050.0);
        b.records.push(Record {
            t: 5_000.0,
            ev: Ev::Recovered {
                next_run: "c".into(),
            },
        });
        let st = stats(&[a.clone(), b.clone()], &Which::All);
        assert_eq!(st.runs.len(), 2);
        assert!(st.runs[1].killed);
        assert_eq!(st.runs[1].exit_code, None);
        assert!((st.runs[1].figures.wall_secs - 50.0).abs() < 1e-9);
        assert_eq!(st.lifetime.runs, 2);
        assert_eq!(st.lifetime.landed, 2 + 1, "1.2 landed after the kill point");
        assert_eq!(st.lifetime.attempts, 4 + 3);
        let latest = stats(&[a, b], &Which::Latest);
        assert_eq!(latest.runs.len(), 1);
        assert_eq!(latest.runs[0].id, "b");
        let json = serde_json::to_value(&latest).unwrap();
        assert_eq!(json["lifetime"]["by_kind"]["redo"], 2);
    }

    #[test]
    fn an_attempt_cut_off_by_a_kill_is_a_bar_to_the_end() {
        let mut run = sample_run("r", 0.0);
        run.records.retain(|r| r.t <= 60.0);
        let bars = bars(&run);
        assert_eq!(bars.len(), 4);
        let last = bars.last().unwrap();
        assert_eq!((last.story.as_str(), last.verdict), ("2.1", None));
        assert!((last.end - 52.0).abs() < 1e-9);
    }

    #[test]
    fn text_snapshot() {
        let st = stats(
            &[sample_run("20261122-115121", 1_795_348_281.0)],
            &Which::Latest,
        );
        insta::assert_snapshot!(render(&st, 3600));
    }
}
