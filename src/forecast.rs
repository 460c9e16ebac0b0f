//! Forecasts from the project's own history (issue 25, item 7): what a run
//! will cost and how long it will take at its `-j`, the ETA of a run under
//! way, the expected duration of each story for the scheduler's critical
//! path, and the expected cost of one attempt for a budget check.
//!
//! Pure: the past attempts come in as plain data (`History::from_runs` reads
//! parsed run records), the backlog as each story's spec size and what it
//! waits for. A forecast is advice: nothing here can stop a run, and with no
//! history there is none (`None`), never a made-up figure.
//!
//! The method, in the open so users can judge it (docs/forecasts.md):
//! - a story is compared with past attempts of stories of a similar spec size
//!   (the same power-of-two size class when it has at least `MIN_SIMILAR`
//!   attempts, else every attempt), preferring the run's agent (and model,
//!   where the records name one);
//! - a story costs `attempts per story` (past attempts ÷ stories attempted:
//!   retries and fix-ups are paid for) times a typical attempt: the mean
//!   for the expected figure, the lower and upper quartiles for the range;
//! - the wall time is the schedule simulated with `-j` agents over the DAG
//!   (what each story waits for), longest expected chain first, as the
//!   scheduler orders them, each story taking its expected attempts one
//!   after the other plus a typical landing.

use std::collections::{HashMap, HashSet};

use crate::runlog::{Ev, RunData};

/// Fewer attempts of a story's size class than this, and all attempts are
/// its comparison.
const MIN_SIMILAR: usize = 3;

/// One finished attempt, as the records tell it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PastAttempt {
    pub(crate) story: String,
    pub(crate) agent: Option<String>,
    /// The model it ran, where the records name one.
    pub(crate) model: Option<String>,
    /// The size of the story's spec (as it is now), when it is still in the
    /// backlog.
    pub(crate) spec_bytes: Option<usize>,
    pub(crate) secs: f64,
    pub(crate) cost_usd: f64,
}

/// What the forecasts are based on.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct History {
    pub(crate) attempts: Vec<PastAttempt>,
    /// Merge, validation and ref move of each landing, in seconds.
    pub(crate) landings: Vec<f64>,
}

/// Low, expected and high.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Span {
    pub(crate) low: f64,
    pub(crate) mid: f64,
    pub(crate) high: f64,
}

impl Span {
    fn add(self, o: Span) -> Span {
        Span {
            low: self.low + o.low,
            mid: self.mid + o.mid,
            high: self.high + o.high,
        }
    }

    fn scale(self, k: f64) -> Span {
        Span {
            low: self.low * k,
            mid: self.mid * k,
            high: self.high * k,
        }
    }

    const ZERO: Span = Span {
        low: 0.0,
        mid: 0.0,
        high: 0.0,
    };
}

/// A story as a forecast sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Planned {
    pub(crate) spec_bytes: usize,
    /// Indices of the planned stories it waits for (others count as done).
    pub(crate) waits: Vec<usize>,
    /// How many candidates race for each of its attempts (best of N,
    /// issue 36): its cost counts N times.
    pub(crate) best_of: u32,
}

/// The forecast of a run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Forecast {
    /// How many past attempts it is based on.
    pub(crate) based_on: usize,
    pub(crate) stories: usize,
    pub(crate) cost_usd: Span,
    pub(crate) wall_secs: Span,
    /// The races counted in the cost: (N, how many stories race N
    /// candidates), N above 1, by N (`multiplier`).
    pub(crate) races: Vec<(u32, usize)>,
}

/// The races of `stories`, as `Forecast::races` has them.
pub(crate) fn races(stories: &[Planned]) -> Vec<(u32, usize)> {
    let mut by_n: std::collections::BTreeMap<u32, usize> = Default::default();
    for s in stories.iter().filter(|s| s.best_of > 1) {
        *by_n.entry(s.best_of).or_default() += 1;
    }
    by_n.into_iter().collect()
}

/// "best of 3: ×3 for 2 stories", one part per N; empty without races.
pub(crate) fn multiplier(races: &[(u32, usize)]) -> String {
    races
        .iter()
        .map(|&(n, k)| {
            // Not `report::counted`: `report` reads forecasts.
            let stories = if k == 1 { "story" } else { "stories" };
            format!("best of {n}: ×{n} for {k} {stories}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl History {
    /// The attempts and landings of `runs` (oldest first); `spec_bytes`
    /// gives the spec size of a story still in the backlog. Attempts that
    /// ran no agent (0 s, nothing spent: a fault before it started) say
    /// nothing about stories and are left out.
    pub(crate) fn from_runs(
        runs: &[RunData],
        spec_bytes: &dyn Fn(&str) -> Option<usize>,
    ) -> History {
        let mut h = History::default();
        for rec in runs.iter().flat_map(|r| &r.records) {
            match &rec.ev {
                Ev::AttemptEnd {
                    story,
                    agent,
                    secs,
                    cost_usd,
                    model,
                    ..
                } if *secs > 0.0 && agent.is_some() => h.attempts.push(PastAttempt {
                    story: story.clone(),
                    agent: agent.clone(),
                    model: model.clone(),
                    spec_bytes: spec_bytes(story),
                    secs: *secs,
                    cost_usd: *cost_usd,
                }),
                Ev::Landed { secs, .. } => h.landings.push(*secs),
                _ => {}
            }
        }
        h
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.attempts.is_empty()
    }

    /// Past attempts ÷ the stories they were for (at least 1).
    pub(crate) fn attempts_per_story(&self) -> f64 {
        let stories: HashSet<&str> = self.attempts.iter().map(|a| a.story.as_str()).collect();
        if stories.is_empty() {
            return 1.0;
        }
        (self.attempts.len() as f64 / stories.len() as f64).max(1.0)
    }

    /// The attempts a story of `spec_bytes` is compared with: those of
    /// `agent`/`model` when there are enough (any otherwise), then those of
    /// its size class when there are enough.
    fn similar(
        &self,
        spec_bytes: usize,
        agent: Option<&str>,
        model: Option<&str>,
    ) -> Vec<&PastAttempt> {
        let mut pool: Vec<&PastAttempt> = self.attempts.iter().collect();
        let narrow = |pool: &mut Vec<&PastAttempt>, keep: &dyn Fn(&PastAttempt) -> bool| {
            let kept: Vec<&PastAttempt> = pool.iter().copied().filter(|a| keep(a)).collect();
            if kept.len() >= MIN_SIMILAR {
                *pool = kept;
            }
        };
        if let Some(agent) = agent {
            narrow(&mut pool, &|a| a.agent.as_deref() == Some(agent));
        }
        if let Some(model) = model {
            narrow(&mut pool, &|a| a.model.as_deref() == Some(model));
        }
        let class = size_class(spec_bytes);
        narrow(&mut pool, &|a| a.spec_bytes.map(size_class) == Some(class));
        pool
    }

    /// One attempt of a story of `spec_bytes`: seconds and dollars.
    fn attempt(
        &self,
        spec_bytes: usize,
        agent: Option<&str>,
        model: Option<&str>,
    ) -> Option<(Span, Span)> {
        let pool = self.similar(spec_bytes, agent, model);
        if pool.is_empty() {
            return None;
        }
        let secs: Vec<f64> = pool.iter().map(|a| a.secs).collect();
        let cost: Vec<f64> = pool.iter().map(|a| a.cost_usd).collect();
        Some((span(&secs), span(&cost)))
    }

    /// A typical landing, in seconds (0 with none recorded).
    fn landing_secs(&self) -> f64 {
        mean(&self.landings).unwrap_or(0.0)
    }

    /// The expected duration of each story (its attempts one after the
    /// other, and its landing), for the critical path and the ETA; `None`
    /// with no history.
    pub(crate) fn expected_secs(
        &self,
        spec_bytes: &[usize],
        agent: Option<&str>,
    ) -> Option<Vec<f64>> {
        if self.is_empty() {
            return None;
        }
        let per = self.attempts_per_story();
        let land = self.landing_secs();
        Some(
            spec_bytes
                .iter()
                .map(|&b| {
                    self.attempt(b, agent, None)
                        .map_or(0.0, |(secs, _)| secs.mid * per + land)
                })
                .collect(),
        )
    }
}

impl History {
    /// The history in `.ralph/runs/` of the project at `root`, stories
    /// compared by the specs of `stories` (the backlog as it is now). A
    /// record file that cannot be read counts as no history.
    pub(crate) fn load(root: &std::path::Path, stories: &[crate::backlog::Story]) -> History {
        let sizes: HashMap<&str, usize> = stories
            .iter()
            .map(|s| (s.id.as_str(), s.spec_bytes))
            .collect();
        History::from_runs(&crate::runlog::read_all(root), &|id| sizes.get(id).copied())
    }
}

/// The `chosen` stories of `dag` as a forecast plans them (what each waits
/// for among them; the others count as done), and their indices.
pub(crate) fn plan(
    dag: &crate::dag::Dag,
    stories: &[crate::backlog::Story],
    chosen: &[bool],
) -> Vec<Planned> {
    let index: HashMap<usize, usize> = (0..stories.len())
        .filter(|&i| chosen[i])
        .enumerate()
        .map(|(k, i)| (i, k))
        .collect();
    (0..stories.len())
        .filter(|&i| chosen[i])
        .map(|i| Planned {
            spec_bytes: stories[i].spec_bytes,
            waits: dag
                .waits_for(i)
                .iter()
                .filter_map(|w| index.get(w).copied())
                .collect(),
            best_of: 1,
        })
        .collect()
}

/// What one attempt of a story is expected to cost, in dollars: the mean
/// of similar past attempts (by `model` where the records name it, and by
/// spec size); `None` with no history. For budget checks before an attempt
/// starts (issue 25, item 5).
// The budget check of issue 25 item 5 (another change) calls it.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn expected_attempt_cost(
    history: &History,
    model: Option<&str>,
    spec_bytes: usize,
) -> Option<f64> {
    history
        .attempt(spec_bytes, None, model)
        .map(|(_, cost)| cost.mid)
}

/// The forecast of running `stories` with `jobs` agents: cost and wall time
/// (low, expected, high); `None` with no history.
pub(crate) fn forecast(
    history: &History,
    stories: &[Planned],
    jobs: usize,
    agent: Option<&str>,
) -> Option<Forecast> {
    if history.is_empty() {
        return None;
    }
    let per = history.attempts_per_story();
    let land = history.landing_secs();
    let mut cost = Span::ZERO;
    let mut secs: Vec<Span> = Vec::with_capacity(stories.len());
    for s in stories {
        let (t, c) = history
            .attempt(s.spec_bytes, agent, None)
            .unwrap_or((Span::ZERO, Span::ZERO));
        // Every candidate of a race is an attempt's spend; its wall time
        // is one attempt's (they run at once, each in its own slot).
        cost = cost.add(c.scale(per * f64::from(s.best_of.max(1))));
        secs.push(t.scale(per).add(Span {
            low: land,
            mid: land,
            high: land,
        }));
    }
    let waits: Vec<Vec<usize>> = stories.iter().map(|s| s.waits.clone()).collect();
    let wall = |pick: fn(&Span) -> f64| {
        let d: Vec<f64> = secs.iter().map(pick).collect();
        makespan(&d, &waits, &vec![0.0; d.len()], jobs)
    };
    Some(Forecast {
        based_on: history.attempts.len(),
        stories: stories.len(),
        cost_usd: cost,
        wall_secs: Span {
            low: wall(|s| s.low),
            mid: wall(|s| s.mid),
            high: wall(|s| s.high),
        },
        races: races(stories),
    })
}

/// Where a story stands, for an ETA.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Left {
    /// Done, failed, blocked or not in the run: nothing left of it.
    Nothing,
    /// Not started yet (or back in the queue).
    Waiting,
    /// Its agent has been at work `elapsed` seconds (or its work waits to
    /// land).
    Running { elapsed: f64 },
}

/// Seconds until every story is through, at `jobs` agents: what is left
/// of the running ones (at least a tenth of their expected time: one past
/// its forecast is not done yet), then the waiting ones scheduled over
/// the DAG. `expected` as `History::expected_secs` gives it.
pub(crate) fn eta_secs(expected: &[f64], waits: &[Vec<usize>], left: &[Left], jobs: usize) -> f64 {
    let mut d = vec![0.0; expected.len()];
    let mut running = vec![0.0; expected.len()];
    for (i, l) in left.iter().enumerate() {
        match *l {
            Left::Nothing => {}
            Left::Waiting => d[i] = expected[i],
            Left::Running { elapsed } => {
                d[i] = (expected[i] - elapsed).max(expected[i] / 10.0);
                running[i] = 1.0;
            }
        }
    }
    let jobs = jobs.max(running.iter().filter(|&&r| r > 0.0).count());
    makespan(&d, waits, &running, jobs)
}

/// The schedule of `durations` simulated with `jobs` workers: whenever one
/// is free it takes the ready story (everything it waits for finished)
/// with the longest expected chain downstream, as the scheduler does.
/// Stories with `running[i] > 0` hold a worker from the start (their
/// duration is what is left of them). Returns when the last one finishes.
pub(crate) fn makespan(
    durations: &[f64],
    waits: &[Vec<usize>],
    running: &[f64],
    jobs: usize,
) -> f64 {
    let n = durations.len();
    let jobs = jobs.max(1);
    let chain = expected_chain(durations, waits);
    let mut finish: Vec<Option<f64>> = vec![None; n];
    let mut busy: Vec<(f64, usize)> = Vec::new();
    for i in (0..n).filter(|&i| running.get(i).is_some_and(|&r| r > 0.0)) {
        finish[i] = Some(durations[i]);
        busy.push((durations[i], i));
    }
    let mut now = 0.0f64;
    loop {
        // Start what can start now, best first.
        while busy.len() < jobs {
            let next = (0..n)
                .filter(|&i| finish[i].is_none())
                .filter(|&i| {
                    waits[i]
                        .iter()
                        .all(|&w| w >= n || finish[w].is_some_and(|f| f <= now))
                })
                .max_by(|&a, &b| chain[a].total_cmp(&chain[b]).then(b.cmp(&a)));
            let Some(i) = next else { break };
            finish[i] = Some(now + durations[i]);
            busy.push((now + durations[i], i));
        }
        if busy.is_empty() {
            break;
        }
        // Advance to the next finish.
        busy.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (t, _) = busy.remove(0);
        now = now.max(t);
        busy.retain(|&(f, _)| f > now);
        if finish.iter().all(Option::is_some) && busy.is_empty() {
            break;
        }
    }
    finish.iter().flatten().copied().fold(0.0, f64::max)
}

/// The longest expected chain from each story down through what waits for
/// it (its own duration included).
pub(crate) fn expected_chain(durations: &[f64], waits: &[Vec<usize>]) -> Vec<f64> {
    let n = durations.len();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, ws) in waits.iter().enumerate() {
        for &w in ws.iter().filter(|&&w| w < n) {
            dependents[w].push(i);
        }
    }
    let mut memo: HashMap<usize, f64> = HashMap::new();
    fn down(
        i: usize,
        d: &[f64],
        deps: &[Vec<usize>],
        memo: &mut HashMap<usize, f64>,
        depth: usize,
    ) -> f64 {
        if let Some(&v) = memo.get(&i) {
            return v;
        }
        // A cycle cannot be in a loaded DAG; the depth bound keeps a bad
        // input from recursing forever all the same.
        let tail = if depth > d.len() {
            0.0
        } else {
            deps[i]
                .iter()
                .map(|&j| down(j, d, deps, memo, depth + 1))
                .fold(0.0, f64::max)
        };
        let v = d[i] + tail;
        memo.insert(i, v);
        v
    }
    (0..n)
        .map(|i| down(i, durations, &dependents, &mut memo, 0))
        .collect()
}

/// Power-of-two size class of a spec: stories within a factor of two of
/// each other compare.
fn size_class(bytes: usize) -> u32 {
    usize::BITS - bytes.max(1).leading_zeros()
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Lower quartile, mean, upper quartile (the mean inside the quartiles'
/// range, so the range always holds the expected figure).
fn span(v: &[f64]) -> Span {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let q = |p: f64| {
        let pos = p * (s.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
    };
    let mid = mean(&s).unwrap_or(0.0);
    Span {
        low: q(0.25).min(mid),
        mid,
        high: q(0.75).max(mid),
    }
}

/// `~12 min`, `~1 h 05 min`, `~40 s`: a forecast's time, rounded as a
/// forecast should be.
pub(crate) fn human_secs(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s < 90 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{} min", (s + 30) / 60)
    } else {
        let m = (s + 30) / 60;
        format!("{} h {:02} min", m / 60, m % 60)
    }
}

/// The lines `ralph run -d` prints for a forecast (or for none).
pub(crate) fn render(f: Option<&Forecast>, jobs: usize) -> String {
    let Some(f) = f else {
        return format!(
            "Forecast: no history (no finished attempts in {}/ yet)",
            crate::paths::RUNS
        );
    };
    let range = |s: Span, fmt: &dyn Fn(f64) -> String| {
        if fmt(s.low) == fmt(s.high) {
            fmt(s.mid)
        } else {
            format!("{} ({} – {})", fmt(s.mid), fmt(s.low), fmt(s.high))
        }
    };
    let races = if f.races.is_empty() {
        String::new()
    } else {
        format!(" ({})", multiplier(&f.races))
    };
    format!(
        "Forecast for {} stor{} at -j {jobs}: cost {}{races}, wall time {}; based on {} past \
         attempt{}",
        f.stories,
        if f.stories == 1 { "y" } else { "ies" },
        range(f.cost_usd, &|c| format!("${c:.2}")),
        range(f.wall_secs, &|t| human_secs(t)),
        f.based_on,
        if f.based_on == 1 { "" } else { "s" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runlog::Record;

    fn past(story: &str, bytes: usize, secs: f64, cost: f64) -> PastAttempt {
        PastAttempt {
            story: story.into(),
            agent: Some("claude".into()),
            model: None,
            spec_bytes: Some(bytes),
            secs,
            cost_usd: cost,
        }
    }

    fn planned(bytes: usize, waits: &[usize]) -> Planned {
        Planned {
            best_of: 1,
            spec_bytes: bytes,
            waits: waits.to_vec(),
        }
    }

    #[test]
    fn no_history_no_forecast() {
        let h = History::default();
        assert_eq!(forecast(&h, &[planned(100, &[])], 4, None), None);
        assert_eq!(expected_attempt_cost(&h, None, 100), None);
        assert_eq!(h.expected_secs(&[100], None), None);
        assert!(render(None, 4).contains("no history"));
    }

    #[test]
    fn the_schedule_is_simulated_with_j_over_the_dag() {
        // Four stories of 10 s; the third waits for the first.
        let d = [10.0, 10.0, 10.0, 10.0];
        let waits = vec![vec![], vec![], vec![0], vec![]];
        let idle = [0.0; 4];
        assert_eq!(makespan(&d, &waits, &idle, 1), 40.0);
        assert_eq!(makespan(&d, &waits, &idle, 2), 20.0);
        // Four workers: the chain 0 → 2 is the bound.
        assert_eq!(makespan(&d, &waits, &idle, 4), 20.0);
        // Longest expected chain first: with two workers, the long chain
        // (a 5 s story before a 30 s one) starts at once, not the short
        // stories listed before it.
        let d = [8.0, 8.0, 5.0, 30.0];
        let waits = vec![vec![], vec![], vec![], vec![2]];
        assert_eq!(makespan(&d, &waits, &[0.0; 4], 2), 35.0);
        // A running story holds its worker for what is left of it.
        let d = [4.0, 10.0];
        assert_eq!(makespan(&d, &[vec![], vec![]], &[1.0, 0.0], 1), 14.0);
        assert_eq!(makespan(&[], &[], &[], 3), 0.0);
    }

    #[test]
    fn an_eta_counts_what_is_left_of_running_stories_then_the_waiting_ones() {
        // 0 done; 1 running for 4 s of its expected 10; 2 waits for 1; 3 waiting.
        let expected = [10.0, 10.0, 10.0, 10.0];
        let waits = vec![vec![], vec![], vec![1], vec![]];
        let left = [
            Left::Nothing,
            Left::Running { elapsed: 4.0 },
            Left::Waiting,
            Left::Waiting,
        ];
        // Two agents: 3 beside 1, then 2 after 1 (at 6 s): 16 s.
        assert_eq!(eta_secs(&expected, &waits, &left, 2), 16.0);
        // One agent: 1's 6 s left, then 3 and 2.
        assert_eq!(eta_secs(&expected, &waits, &left, 1), 26.0);
        // Past its forecast, a running story still has a tenth left.
        let over = [
            Left::Nothing,
            Left::Running { elapsed: 60.0 },
            Left::Nothing,
            Left::Nothing,
        ];
        assert_eq!(eta_secs(&expected, &waits, &over, 2), 1.0);
        assert_eq!(eta_secs(&expected, &waits, &[Left::Nothing; 4], 2), 0.0);
    }

    #[test]
    fn the_expected_chain_counts_durations_not_stories() {
        // 0 → 1 → 2 of 1 s each, against 3 alone of 10 s.
        let d = [1.0, 1.0, 1.0, 10.0];
        let waits = vec![vec![], vec![0], vec![1], vec![]];
        let c = expected_chain(&d, &waits);
        assert_eq!(c, [3.0, 2.0, 1.0, 10.0]);
    }

    #[test]
    fn a_forecast_is_the_similar_past_scaled_by_attempts_per_story() {
        // Three small stories took one attempt each (10 s, $0.10); of two
        // large ones, one took two (100 s, $1.00 each): 6 attempts, 5 stories.
        let h = History {
            attempts: vec![
                past("a", 600, 10.0, 0.10),
                past("b", 700, 10.0, 0.10),
                past("c", 800, 10.0, 0.10),
                past("d", 5000, 100.0, 1.00),
                past("d", 5000, 100.0, 1.00),
                past("e", 6000, 100.0, 1.00),
            ],
            landings: vec![1.0, 1.0],
        };
        let per = h.attempts_per_story();
        assert!((per - 6.0 / 5.0).abs() < 1e-9);
        // A small story is compared with the small ones only.
        let near = |x: Option<f64>, y: f64| x.is_some_and(|x| (x - y).abs() < 1e-9);
        assert!(near(expected_attempt_cost(&h, None, 550), 0.10));
        assert!(near(expected_attempt_cost(&h, None, 5500), 1.00));
        let f = forecast(
            &h,
            &[planned(550, &[]), planned(5500, &[])],
            2,
            Some("claude"),
        )
        .unwrap();
        assert_eq!(f.based_on, 6);
        assert!((f.cost_usd.mid - 1.10 * per).abs() < 1e-9, "{f:?}");
        // Two agents: the large story alone sets the wall time.
        assert!(
            (f.wall_secs.mid - (100.0 * per + 1.0)).abs() < 1e-9,
            "{f:?}"
        );
        // One agent: one after the other.
        let f1 = forecast(&h, &[planned(550, &[]), planned(5500, &[])], 1, None).unwrap();
        assert!(
            (f1.wall_secs.mid - (110.0 * per + 2.0)).abs() < 1e-9,
            "{f1:?}"
        );
        assert!(f.cost_usd.low <= f.cost_usd.mid && f.cost_usd.mid <= f.cost_usd.high);
        let text = render(Some(&f), 2);
        assert!(text.contains("2 stories at -j 2"), "{text}");
        assert!(text.contains("based on 6 past attempts"), "{text}");
        assert!(text.contains("$1.32"), "{text}");
    }

    #[test]
    fn a_racing_story_costs_n_attempts_in_one_attempt_s_time() {
        let h = History {
            attempts: vec![past("a", 600, 10.0, 0.10), past("b", 600, 10.0, 0.10)],
            landings: vec![1.0, 1.0],
        };
        let mut raced = planned(600, &[]);
        raced.best_of = 3;
        let alone = forecast(&h, &[planned(600, &[]), planned(600, &[])], 2, None).unwrap();
        let f = forecast(&h, &[raced, planned(600, &[])], 2, None).unwrap();
        assert!((f.cost_usd.mid - 0.40).abs() < 1e-9, "{f:?}");
        assert!((alone.cost_usd.mid - 0.20).abs() < 1e-9, "{alone:?}");
        assert_eq!(f.wall_secs, alone.wall_secs);
        assert_eq!(f.races, vec![(3, 1)]);
        let text = render(Some(&f), 2);
        assert!(
            text.contains("cost $0.40 (best of 3: ×3 for 1 story), wall time"),
            "{text}"
        );
        assert!(!render(Some(&alone), 2).contains("best of"));
    }

    #[test]
    fn the_run_s_agent_and_model_narrow_the_comparison_when_they_can() {
        let mut h = History::default();
        for k in 0..3 {
            h.attempts.push(past(&format!("c{k}"), 100, 10.0, 0.10));
            let mut a = past(&format!("x{k}"), 100, 50.0, 0.50);
            a.agent = Some("codex".into());
            a.model = Some("gpt-x".into());
            h.attempts.push(a);
        }
        let got = expected_attempt_cost(&h, Some("gpt-x"), 100).unwrap();
        assert!((got - 0.50).abs() < 1e-9);
        let all = expected_attempt_cost(&h, None, 100).unwrap();
        assert!((all - 0.30).abs() < 1e-9);
        let e = h.expected_secs(&[100], Some("claude")).unwrap();
        assert!((e[0] - 10.0).abs() < 1e-9, "{e:?}");
        // A model with too few attempts: every attempt is the comparison.
        assert!((expected_attempt_cost(&h, Some("unknown"), 100).unwrap() - 0.30).abs() < 1e-9);
    }

    #[test]
    fn history_is_read_from_run_records() {
        let end = |story: &str, secs: f64, agent: Option<&str>| Record {
            t: 1.0,
            ev: Ev::AttemptEnd {
                story: story.into(),
                attempt: 1,
                slot: 0,
                agent: agent.map(str::to_string),
                kind: crate::state::AttemptKind::First,
                verdict: crate::state::Outcome::Done,
                reason: None,
                tokens: 10,
                usage: Default::default(),
                cost_usd: 0.25,
                cost_unknown: false,
                model: None,
                secs,
                saved_ref: None,
                node: None,
            },
        };
        let run = RunData {
            id: "r1".into(),
            records: vec![
                end("1.1", 12.0, Some("claude")),
                // No agent ran: says nothing about the story.
                end("1.2", 0.0, None),
                Record {
                    t: 2.0,
                    ev: Ev::Landed {
                        story: "1.1".into(),
                        attempt: 1,
                        commit: "abc".into(),
                        secs: 0.5,
                    },
                },
            ],
            skipped: 0,
        };
        let h = History::from_runs(&[run], &|id| (id == "1.1").then_some(300));
        assert_eq!(h.attempts, [past("1.1", 300, 12.0, 0.25)]);
        assert_eq!(h.landings, [0.5]);
    }

    #[test]
    fn times_read_as_forecasts() {
        assert_eq!(human_secs(42.4), "42 s");
        assert_eq!(human_secs(600.0), "10 min");
        assert_eq!(human_secs(3900.0), "1 h 05 min");
    }
}
