//! Dispatch decisions (SPEC 3.5, issue "parallel engine"): which ready story
//! starts next, and what a failure blocks. Pure: the engine feeds it status
//! changes and asks it questions.

use std::cmp::Ordering;
use std::time::Duration;

use crate::backlog::files::{overlap, Rank};
use crate::backlog::Story;
use crate::dag::Dag;

/// Where a story stands in the run (issue 33: once `Node`, a name a
/// cluster's machines have too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoryState {
    /// Selected and not started (or sent back to the queue).
    Pending,
    Running,
    /// Finished; waiting for or inside the merge queue.
    Landing,
    Done,
    /// Failed for good: a person is needed.
    Failed,
    /// Downstream of a failed story.
    Blocked,
    /// Not selected for this run (`-s`, `-r`): counts as satisfied.
    Excluded,
    /// Validated work waiting for a person (`landing.mode: review`): not
    /// done, so its dependents wait; nothing runs it.
    Review,
}

impl StoryState {
    /// Every status, in the order lists show them.
    #[cfg(test)]
    pub(crate) const ALL: [StoryState; 8] = [
        StoryState::Done,
        StoryState::Running,
        StoryState::Landing,
        StoryState::Review,
        StoryState::Failed,
        StoryState::Blocked,
        StoryState::Pending,
        StoryState::Excluded,
    ];

    /// The word for the status: what `graph`, `status --json`, the report
    /// and every other view say. `status --json` values are read by scripts
    /// (SPEC 8): a word, once shipped, stays. A story left out of a run is
    /// still pending as far as anyone looking is concerned.
    pub(crate) fn word(self) -> &'static str {
        match self {
            StoryState::Done => "done",
            StoryState::Running => "running",
            StoryState::Landing => "landing",
            StoryState::Review => "review",
            StoryState::Failed => "failed",
            StoryState::Blocked => "blocked",
            StoryState::Pending | StoryState::Excluded => "pending",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Scheduler {
    pub(crate) nodes: Vec<StoryState>,
    waits: Vec<Vec<usize>>,
    dependents: Vec<Vec<usize>>,
    /// Higher starts first (the heaviest chain downstream).
    priority: Vec<u64>,
    /// Among equal `priority`, lower starts first (frontmatter `priority`);
    /// then the earlier story in file order.
    rank: Vec<Rank>,
}

/// What bounds a choice of stories besides free slots.
#[derive(Clone, Copy)]
pub(crate) struct Bounds<'a> {
    /// Retries (attempts after a failure or a conflict) that may still
    /// start now (`parallel.retry_concurrency` minus the running ones).
    pub(crate) retries: usize,
    pub(crate) is_retry: &'a dyn Fn(usize) -> bool,
    /// The files each story is predicted to touch (by index; empty when
    /// nothing is known).
    pub(crate) files: &'a [Vec<String>],
    /// With `parallel.conflicts: wait`, the stories (by index), whose
    /// declared files (`Story::files`: the spec's "Files to Create/Modify",
    /// prd.json `files`) must not meet what in-flight work, or a story
    /// chosen before, declares or is predicted to touch: such a story
    /// waits, whatever slot stays free. `None`: declared files only reorder.
    pub(crate) declared: Option<&'a [Story]>,
    /// Stories a person holds (`ralph hold ID`): they do not start, and
    /// their dependents wait as for any story not done.
    pub(crate) held: &'a dyn Fn(usize) -> bool,
}

/// Weight of a story for critical-path ordering, from its `estimation`.
pub(crate) fn estimation_weight(estimation: Option<&str>) -> u64 {
    match estimation.map(|e| e.trim().to_ascii_lowercase()) {
        Some(e) if e == "small" || e == "s" => 1,
        Some(e) if e == "large" || e == "l" => 5,
        _ => 2,
    }
}

impl Scheduler {
    /// The one way a scheduler is made: over `stories` (in file order, as
    /// the `dag` was built from them) starting at `nodes`. `parallel`
    /// orders ready stories by critical path (each story weighted by its
    /// `estimation`), then `priority` rank; otherwise file order, as the
    /// sequential loop and every view of the backlog have it.
    ///
    /// `expected`: each story's expected duration in seconds, from the
    /// project's history (`forecast`); when given, the critical path is
    /// the longest *expected* chain (tenths of a second, at least one),
    /// not the estimation's guess.
    pub(crate) fn for_stories(
        dag: &Dag,
        stories: &[Story],
        nodes: Vec<StoryState>,
        parallel: bool,
        expected: Option<&[f64]>,
    ) -> Scheduler {
        if !parallel {
            return Scheduler::new(dag, nodes, None);
        }
        let weights: Vec<u64> = match expected.filter(|e| e.len() == stories.len()) {
            Some(e) => e
                .iter()
                .map(|s| ((s * 10.0).round() as u64).max(1))
                .collect(),
            None => stories
                .iter()
                .map(|s| estimation_weight(s.estimation.as_deref()))
                .collect(),
        };
        Scheduler::new(dag, nodes, Some(&weights))
            .with_ranks(stories.iter().map(|s| s.priority).collect())
    }

    /// `weights`: `None` for file order (sequential mode), otherwise the
    /// per-story weights whose heaviest downstream chain sets priority.
    /// Callers outside this file use `for_stories`, the one constructor.
    fn new(dag: &Dag, initial: Vec<StoryState>, weights: Option<&[u64]>) -> Scheduler {
        let n = dag.len();
        let waits = (0..n).map(|i| dag.waits_for(i)).collect();
        let dependents = (0..n).map(|i| dag.dependents(i)).collect();
        let priority = match weights {
            Some(w) => dag.critical_path(w),
            None => vec![0; n],
        };
        let mut s = Scheduler {
            nodes: initial,
            waits,
            dependents,
            priority,
            rank: vec![0; n],
        };
        for i in 0..n {
            if s.nodes[i] == StoryState::Failed {
                s.block_downstream(i);
            }
        }
        s
    }

    /// Breaks ties of critical path with `rank` (parallel mode only: the
    /// sequential loop keeps file order).
    fn with_ranks(mut self, rank: Vec<Rank>) -> Scheduler {
        debug_assert_eq!(rank.len(), self.nodes.len());
        self.rank = rank;
        self
    }

    /// Dispatch order: heaviest chain first, then rank, then file order.
    fn order(&self, a: usize, b: usize) -> Ordering {
        self.priority[b]
            .cmp(&self.priority[a])
            .then(self.rank[a].cmp(&self.rank[b]))
            .then(a.cmp(&b))
    }

    /// The stories `i` waits for.
    pub(crate) fn waits_of(&self, i: usize) -> &[usize] {
        &self.waits[i]
    }

    fn satisfied(&self, i: usize) -> bool {
        matches!(self.nodes[i], StoryState::Done | StoryState::Excluded)
    }

    pub(crate) fn is_ready(&self, i: usize) -> bool {
        self.nodes[i] == StoryState::Pending && self.waits[i].iter().all(|&w| self.satisfied(w))
    }

    /// Ready stories, best first.
    pub(crate) fn ready(&self) -> Vec<usize> {
        let mut r: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.is_ready(i))
            .collect();
        r.sort_by(|&a, &b| self.order(a, b));
        r
    }

    /// Pending stories that become ready as soon as the stories now landing
    /// land (every wait is satisfied or landing, at least one landing).
    pub(crate) fn imminent(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| {
                self.nodes[i] == StoryState::Pending
                    && self.waits[i]
                        .iter()
                        .any(|&w| self.nodes[w] == StoryState::Landing)
                    && self.waits[i]
                        .iter()
                        .all(|&w| self.satisfied(w) || self.nodes[w] == StoryState::Landing)
            })
            .collect()
    }

    /// What to start now in `free` slots: the best `free` stories among the
    /// ready ones *and* the imminent ones, so a landing story's critical
    /// dependents are not beaten to the slot by lesser work that happens to
    /// be ready a few milliseconds earlier. Imminent picks start nothing now;
    /// their slot stays free until the landing decides.
    #[cfg(test)]
    pub(crate) fn pick(&self, free: usize) -> Vec<usize> {
        let anything = |_: usize| false;
        let files = vec![Vec::new(); self.nodes.len()];
        self.choose(
            free,
            Bounds {
                retries: usize::MAX,
                is_retry: &anything,
                files: &files,
                declared: None,
                held: &anything,
            },
        )
    }

    /// `pick`, bounded: a ready retry beyond `bounds.retries` waits (its
    /// slot goes to first attempts), and stories predicted to touch a file
    /// that in-flight work (running or landing) or an earlier pick touches
    /// go after those that touch none, so they start from a tip that holds
    /// the other's work instead of conflicting with it. A prediction only
    /// reorders: a slot that only a clashing story could fill gets it. A
    /// file the story *declares* is more than a prediction: with
    /// `bounds.declared` (`parallel.conflicts: wait`) a story whose declared
    /// file in-flight work or an earlier pick declares or touches does not
    /// start, even if its slot stays idle.
    pub(crate) fn choose(&self, free: usize, bounds: Bounds<'_>) -> Vec<usize> {
        let ready = self.ready();
        if free == 0 || ready.is_empty() {
            return Vec::new();
        }
        let mut all: Vec<(usize, bool)> = ready.iter().map(|&i| (i, true)).collect();
        all.extend(self.imminent().into_iter().map(|i| (i, false)));
        all.sort_by(|a, b| self.order(a.0, b.0));
        all.retain(|&(i, _)| !(bounds.held)(i));
        let mut retries = bounds.retries;
        all.retain(|&(i, ready)| {
            if !ready || !(bounds.is_retry)(i) {
                return true;
            }
            let room = retries > 0;
            retries = retries.saturating_sub(1);
            room
        });
        let files = |i: usize| bounds.files.get(i).map_or(&[][..], Vec::as_slice);
        let declared = |i: usize| {
            bounds
                .declared
                .and_then(|s| s.get(i))
                .map_or(&[][..], |s| s.files.as_slice())
        };
        // Does `i`'s declared file meet what `j` declares or touches?
        let apart = |i: usize, j: usize| {
            let mine = declared(i);
            !mine.is_empty() && (overlap(mine, declared(j)) || overlap(mine, files(j)))
        };
        let in_flight: Vec<usize> = (0..self.nodes.len())
            .filter(|&j| matches!(self.nodes[j], StoryState::Running | StoryState::Landing))
            .filter(|&j| !files(j).is_empty() || !declared(j).is_empty())
            .collect();
        let mut chosen: Vec<(usize, bool)> = Vec::with_capacity(free);
        let mut deferred: Vec<(usize, bool)> = Vec::new();
        for (i, ready) in all {
            // A prediction trades a likely conflict (one short fix-up) for
            // order, never the critical path for it: a deferred story much
            // more critical than the next candidate goes first all the same.
            while chosen.len() < free {
                match deferred
                    .iter()
                    .position(|&(d, _)| self.much_more_critical(d, i))
                {
                    Some(pos) => chosen.push(deferred.remove(pos)),
                    None => break,
                }
            }
            if chosen.len() == free {
                break;
            }
            // A declared clash waits (`parallel.conflicts: wait`): it is
            // neither chosen nor deferred for a slot nothing else fills.
            let waits = in_flight
                .iter()
                .any(|&j| !self.waits[i].contains(&j) && apart(i, j))
                || chosen.iter().chain(&deferred).any(|&(c, _)| apart(i, c));
            if waits {
                continue;
            }
            let mine = files(i);
            // What a story waits for lands before it starts: no clash.
            let clashes = !mine.is_empty()
                && (in_flight
                    .iter()
                    .any(|&j| !self.waits[i].contains(&j) && overlap(mine, files(j)))
                    || chosen.iter().any(|&(c, _)| overlap(mine, files(c))));
            if clashes {
                deferred.push((i, ready));
            } else {
                chosen.push((i, ready));
            }
        }
        let room = free - chosen.len();
        chosen.extend(deferred.into_iter().take(room));
        chosen
            .into_iter()
            .filter(|(_, ready)| *ready)
            .map(|(i, _)| i)
            .collect()
    }

    /// `a`'s chain is more than a third longer than `b`'s: deferring `a`
    /// behind `b` for a predicted clash would cost the run time.
    fn much_more_critical(&self, a: usize, b: usize) -> bool {
        self.priority[a].saturating_mul(3) > self.priority[b].saturating_mul(4)
    }

    /// The next story to start, if any is ready.
    pub(crate) fn next(&self) -> Option<usize> {
        self.ready().into_iter().next()
    }

    pub(crate) fn set(&mut self, i: usize, node: StoryState) {
        self.nodes[i] = node;
    }

    /// Marks `i` failed for good; returns the stories this newly blocks.
    pub(crate) fn fail(&mut self, i: usize) -> Vec<usize> {
        self.nodes[i] = StoryState::Failed;
        self.block_downstream(i)
    }

    fn block_downstream(&mut self, i: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = self.dependents[i].clone();
        while let Some(d) = stack.pop() {
            if self.nodes[d] == StoryState::Pending {
                self.nodes[d] = StoryState::Blocked;
                out.push(d);
                stack.extend(self.dependents[d].iter().copied());
            }
        }
        out.sort_unstable();
        out
    }

    /// Gives a failed story back to the queue; what only it blocked is
    /// unblocked.
    pub(crate) fn unfail(&mut self, i: usize) {
        if self.nodes[i] == StoryState::Failed {
            self.nodes[i] = StoryState::Pending;
        }
        for n in self.nodes.iter_mut() {
            if *n == StoryState::Blocked {
                *n = StoryState::Pending;
            }
        }
        for j in 0..self.nodes.len() {
            if self.nodes[j] == StoryState::Failed {
                self.block_downstream(j);
            }
        }
    }

    pub(crate) fn count(&self, node: StoryState) -> usize {
        self.nodes.iter().filter(|&&n| n == node).count()
    }
}

/// The stories a run selects, and which were added to what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Selection {
    pub(crate) chosen: Vec<bool>,
    /// Stories not asked for but waited for by one that was, transitively,
    /// in topological order (file order among independent ones).
    pub(crate) added: Vec<usize>,
    /// Asked stories that wait directly for an added one, in file order.
    pub(crate) needing: Vec<usize>,
}

/// What a run selects (issue 21, "the DAG is law"): the `asked` stories
/// (`-s`, `-r`) and, transitively, every story one of them waits for that
/// is not done, as `cargo test -p` builds what a package needs: nothing
/// starts before what it waits for has landed. `nodes` are the stories'
/// states at the start. A dependency that failed for good is selected, so
/// it blocks what waits for it, but what it waits for is not pulled in (it
/// will not run); a done one ends the walk.
pub(crate) fn with_dependencies(dag: &Dag, asked: &[bool], nodes: &[StoryState]) -> Selection {
    let n = asked.len();
    let mut chosen = asked.to_vec();
    let mut stack: Vec<usize> = (0..n).filter(|&i| asked[i]).collect();
    while let Some(i) = stack.pop() {
        if matches!(nodes[i], StoryState::Done | StoryState::Failed) {
            continue;
        }
        for w in dag.waits_for(i) {
            if !chosen[w] && nodes[w] != StoryState::Done {
                chosen[w] = true;
                stack.push(w);
            }
        }
    }
    let added: Vec<usize> = dag
        .topo_order()
        .into_iter()
        .filter(|&i| chosen[i] && !asked[i])
        .collect();
    let needing = (0..n)
        .filter(|&i| asked[i] && nodes[i] != StoryState::Done)
        .filter(|&i| dag.waits_for(i).iter().any(|w| added.contains(w)))
        .collect();
    Selection {
        chosen,
        added,
        needing,
    }
}

/// Why fewer agents may run than `-j` asks.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub(crate) enum Fewer {
    /// The agent warned that its usage limit is near: one job fewer.
    LimitNear,
    /// Memory for fewer agents (`parallel.agent_memory_mb` each).
    Memory {
        available_mb: u64,
        per_agent_mb: u64,
    },
}

/// How many agents may run now, out of how many asked, and why fewer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Jobs {
    pub(crate) asked: usize,
    pub(crate) now: usize,
    #[serde(default)]
    pub(crate) fewer: Vec<Fewer>,
}

impl Jobs {
    /// The same decision for the same reasons (the memory figures aside,
    /// which change with every reading).
    pub(crate) fn same_as(&self, other: &Jobs) -> bool {
        let kinds = |j: &Jobs| {
            j.fewer
                .iter()
                .map(std::mem::discriminant)
                .collect::<Vec<_>>()
        };
        self.asked == other.asked && self.now == other.now && kinds(self) == kinds(other)
    }

    pub(crate) fn memory_bound(&self) -> bool {
        self.fewer.iter().any(|f| matches!(f, Fewer::Memory { .. }))
    }
}

/// Memory as last read, against what one agent needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Memory {
    /// What a new agent could get now (cgroup headroom or MemAvailable).
    pub(crate) available_mb: u64,
    pub(crate) per_agent_mb: u64,
    /// Running agents younger than `AGENT_WARMUP`: they have not reached
    /// their footprint yet, so the reading does not show it; it is kept
    /// for them.
    pub(crate) warming: usize,
}

/// How long a new agent takes to reach its footprint, as far as the
/// memory check is concerned (Claude Code's node process grows over its
/// first minute).
pub(crate) const AGENT_WARMUP: Duration = Duration::from_secs(60);

/// The most agents that may run now (`running` run already): `asked`, one
/// fewer while the agent's usage limit is near, and no more than memory
/// holds at `per_agent_mb` each; never fewer than one.
pub(crate) fn jobs_now(
    asked: usize,
    limit_near: bool,
    running: usize,
    memory: Option<Memory>,
) -> Jobs {
    let mut now = asked;
    let mut fewer = Vec::new();
    if limit_near && asked > 1 {
        now = asked - 1;
        fewer.push(Fewer::LimitNear);
    }
    if let Some(m) = memory.filter(|m| m.per_agent_mb > 0) {
        let reserved = m.per_agent_mb.saturating_mul(m.warming as u64);
        let room = m.available_mb.saturating_sub(reserved) / m.per_agent_mb;
        let cap = running
            .saturating_add(usize::try_from(room).unwrap_or(usize::MAX))
            .max(1);
        if cap < asked {
            fewer.push(Fewer::Memory {
                available_mb: m.available_mb,
                per_agent_mb: m.per_agent_mb,
            });
            now = now.min(cap);
        }
    }
    Jobs {
        asked,
        now: now.max(1),
        fewer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backlog::{Backlog, Section, Source, Story};

    fn story(id: &str, section: usize, deps: &[&str], est: Option<&str>) -> Story {
        Story {
            section,
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            estimation: est.map(str::to_string),
            ..Story::bare(id, "")
        }
    }

    /// An unbatched head (section 0) and one `[batch:1]` section.
    fn unbatched_then_batch_1(stories: Vec<Story>) -> Backlog {
        Backlog {
            source: Source::StoriesTxt,
            stories,
            sections: vec![
                Section {
                    label: None,
                    chain: true,
                },
                Section {
                    label: Some("1".into()),
                    chain: false,
                },
            ],
            skipped: vec![],
        }
    }

    /// a; then a batch of b, c (c large), d; d depends on b; e depends on c.
    fn dag() -> Dag {
        let backlog = unbatched_then_batch_1(vec![
            story("a", 0, &[], None),
            story("b", 1, &[], Some("small")),
            story("c", 1, &[], Some("large")),
            story("d", 1, &["b"], None),
            story("e", 1, &["c"], None),
        ]);
        Dag::build(&backlog).unwrap()
    }

    /// a → b → c (depends_on), d apart; e waits for a failed f.
    fn chain_dag() -> Dag {
        let backlog = Backlog {
            source: Source::StoriesTxt,
            stories: vec![
                story("a", 0, &[], None),
                story("b", 0, &["a"], None),
                story("c", 0, &["b"], None),
                story("d", 0, &[], None),
                story("f", 0, &["d"], None),
                story("e", 0, &["f"], None),
            ],
            sections: vec![Section {
                label: Some("1".into()),
                chain: false,
            }],
            skipped: vec![],
        };
        Dag::build(&backlog).unwrap()
    }

    fn asked(n: usize, which: &[usize]) -> Vec<bool> {
        (0..n).map(|i| which.contains(&i)).collect()
    }

    #[test]
    fn a_selected_story_brings_its_missing_dependencies_in_dag_order() {
        let d = chain_dag();
        let pending = vec![StoryState::Pending; 6];
        let s = with_dependencies(&d, &asked(6, &[2]), &pending);
        assert_eq!(s.chosen, [true, true, true, false, false, false]);
        assert_eq!(s.added, [0, 1]);
        assert_eq!(s.needing, [2]);
        // What is done is not run again, and ends the walk.
        let mut nodes = pending.clone();
        nodes[1] = StoryState::Done;
        let s = with_dependencies(&d, &asked(6, &[2]), &nodes);
        assert_eq!(s.chosen, [false, false, true, false, false, false]);
        assert!(s.added.is_empty() && s.needing.is_empty());
        // Nothing missing: the selection is what was asked.
        let s = with_dependencies(&d, &asked(6, &[0, 3]), &pending);
        assert_eq!(s.chosen, asked(6, &[0, 3]));
        assert!(s.added.is_empty());
    }

    #[test]
    fn a_failed_dependency_is_selected_to_block_but_its_own_are_not() {
        let d = chain_dag();
        let mut nodes = vec![StoryState::Pending; 6];
        nodes[4] = StoryState::Failed;
        let s = with_dependencies(&d, &asked(6, &[5]), &nodes);
        assert_eq!(s.chosen, asked(6, &[4, 5]), "d is not run for a failed f");
        assert_eq!(s.added, [4]);
        // The scheduler then blocks e, never runs it.
        let sched = Scheduler::new(
            &d,
            (0..6)
                .map(|i| match (s.chosen[i], nodes[i]) {
                    (false, _) => StoryState::Excluded,
                    (true, n) => n,
                })
                .collect(),
            None,
        );
        assert_eq!(sched.nodes[5], StoryState::Blocked);
        assert!(sched.ready().is_empty());
    }

    #[test]
    fn ready_follows_barriers_and_critical_path() {
        let d = dag();
        let w: Vec<u64> = [None, Some("small"), Some("large"), None, None]
            .iter()
            .map(|e| estimation_weight(*e))
            .collect();
        let mut s = Scheduler::new(&d, vec![StoryState::Pending; 5], Some(&w));
        assert_eq!(s.ready(), vec![0]);
        s.set(0, StoryState::Done);
        // c heads the heaviest chain (large + e), so it starts first.
        assert_eq!(s.ready(), vec![2, 1]);
        s.set(2, StoryState::Running);
        s.set(1, StoryState::Running);
        assert_eq!(s.next(), None);
        s.set(1, StoryState::Done);
        assert_eq!(s.ready(), vec![3]);
    }

    #[test]
    fn sequential_mode_is_file_order() {
        let d = dag();
        let mut s = Scheduler::new(&d, vec![StoryState::Pending; 5], None);
        s.set(0, StoryState::Done);
        assert_eq!(s.ready(), vec![1, 2]);
    }

    #[test]
    fn a_failure_blocks_exactly_its_descendants() {
        let d = dag();
        let mut s = Scheduler::new(&d, vec![StoryState::Pending; 5], None);
        s.set(0, StoryState::Done);
        assert_eq!(s.fail(2), vec![4]);
        assert_eq!(s.nodes[3], StoryState::Pending);
        s.set(1, StoryState::Done);
        assert_eq!(s.next(), Some(3));
        s.set(3, StoryState::Done);
        assert_eq!(s.next(), None);
        assert_eq!(s.count(StoryState::Blocked), 1);
    }

    #[test]
    fn excluded_stories_count_as_satisfied() {
        let d = dag();
        let mut nodes = vec![StoryState::Excluded; 5];
        nodes[3] = StoryState::Pending;
        let s = Scheduler::new(&d, nodes, None);
        assert_eq!(s.ready(), vec![3]);
    }

    #[test]
    fn a_landing_storys_critical_dependent_keeps_the_slot() {
        // a; batch: b (small), c depends on b (large, so b heads the
        // heaviest chain), d (small, independent).
        let backlog = unbatched_then_batch_1(vec![
            story("a", 0, &[], None),
            story("b", 1, &[], Some("small")),
            story("c", 1, &["b"], Some("large")),
            story("d", 1, &[], Some("small")),
        ]);
        let d = Dag::build(&backlog).unwrap();
        let w: Vec<u64> = backlog
            .stories
            .iter()
            .map(|s| estimation_weight(s.estimation.as_deref()))
            .collect();
        let mut s = Scheduler::new(
            &d,
            vec![
                StoryState::Done,
                StoryState::Landing,
                StoryState::Pending,
                StoryState::Pending,
            ],
            Some(&w),
        );
        assert_eq!(s.imminent(), vec![2]);
        // One free slot: it waits for c rather than going to d.
        assert_eq!(s.pick(1), Vec::<usize>::new());
        // Two free slots: d starts, one stays for c.
        assert_eq!(s.pick(2), vec![3]);
        s.set(1, StoryState::Done);
        assert_eq!(s.pick(1), vec![2]);
    }

    /// `n` independent stories in one batch section.
    fn flat(n: usize) -> (Dag, Vec<Story>) {
        let stories: Vec<Story> = (0..n)
            .map(|i| story(&format!("s{i}"), 1, &[], None))
            .collect();
        let backlog = unbatched_then_batch_1(stories.clone());
        (Dag::build(&backlog).unwrap(), stories)
    }

    fn files_of(list: &[&[&str]]) -> Vec<Vec<String>> {
        list.iter()
            .map(|f| f.iter().map(|p| p.to_string()).collect())
            .collect()
    }

    fn bounds<'a>(
        retries: usize,
        is_retry: &'a dyn Fn(usize) -> bool,
        files: &'a [Vec<String>],
    ) -> Bounds<'a> {
        Bounds {
            retries,
            is_retry,
            files,
            declared: None,
            held: &|_| false,
        }
    }

    #[test]
    fn priority_breaks_ties_of_critical_path_in_parallel_only() {
        let (d, _) = flat(4);
        let w = vec![2; 4];
        // s0 low, s1 medium, s2 high, s3 low.
        let ranks = vec![3, 2, 1, 3];
        let s =
            Scheduler::new(&d, vec![StoryState::Pending; 4], Some(&w)).with_ranks(ranks.clone());
        assert_eq!(s.ready(), vec![2, 1, 0, 3]);
        assert_eq!(s.pick(2), vec![2, 1]);
        // A heavier chain still comes first, whatever its priority.
        let w = vec![2, 2, 2, 5];
        let s = Scheduler::new(&d, vec![StoryState::Pending; 4], Some(&w)).with_ranks(ranks);
        assert_eq!(s.ready(), vec![3, 2, 1, 0]);
        // Sequential mode gives no ranks: file order.
        let s = Scheduler::new(&d, vec![StoryState::Pending; 4], None);
        assert_eq!(s.ready(), vec![0, 1, 2, 3]);
    }

    /// The stories of `flat(n)` declaring `files` ("Files to Create/Modify").
    fn declaring(stories: &[Story], files: &[Vec<String>]) -> Vec<Story> {
        stories
            .iter()
            .zip(files)
            .map(|(s, f)| Story {
                files: f.clone(),
                ..s.clone()
            })
            .collect()
    }

    #[test]
    fn a_declared_clash_waits_with_a_slot_free_unless_conflicts_are_risked() {
        let never = |_: usize| false;
        // s0 and s1 declare one file, s2 and s3 another; s4 declares none.
        let (d, stories) = flat(5);
        let files = files_of(&[&["a.txt"], &["a.txt"], &["b.txt"], &["b.txt"], &[]]);
        let stories = declaring(&stories, &files);
        let w = vec![2; 5];
        let mut s = Scheduler::new(&d, vec![StoryState::Pending; 5], Some(&w));
        let wait = |free| {
            let b = Bounds {
                declared: Some(&stories),
                ..bounds(9, &never, &files)
            };
            move |s: &Scheduler| s.choose(free, b)
        };
        // Nothing in flight: one of each pair, and the free story.
        assert_eq!(wait(4)(&s), vec![0, 2, 4]);
        s.set(0, StoryState::Running);
        s.set(2, StoryState::Landing);
        s.set(4, StoryState::Running);
        // Two slots free, only the partners of in-flight work ready: they
        // wait (`wait`), or start (`risk`: today's deferral only reorders).
        assert_eq!(wait(2)(&s), Vec::<usize>::new());
        assert_eq!(s.choose(2, bounds(9, &never, &files)), vec![1, 3]);
        // Once its partner landed, a story starts.
        s.set(0, StoryState::Done);
        assert_eq!(wait(2)(&s), vec![1]);
        // A file the in-flight story only names in prose, or is editing
        // (its predicted files), holds back a story that declares it too;
        // the other way round, a story that only names a declared file
        // does not wait (prose names what a story reads as often as what
        // it writes).
        let predicted = files_of(&[&["a.txt"], &["a.txt"], &["c.txt"], &["c.txt"], &[]]);
        let declared = declaring(
            &stories,
            &files_of(&[&[], &["a.txt"], &["c.txt"], &[], &[]]),
        );
        let mut s = Scheduler::new(&d, vec![StoryState::Pending; 5], Some(&w));
        s.set(0, StoryState::Running);
        s.set(3, StoryState::Running);
        let b = Bounds {
            declared: Some(&declared),
            ..bounds(9, &never, &predicted)
        };
        assert_eq!(s.choose(3, b), vec![4]);
        let mut s = Scheduler::new(&d, vec![StoryState::Pending; 5], Some(&w));
        s.set(2, StoryState::Running);
        assert_eq!(s.choose(1, b), vec![0]);
        assert_eq!(s.choose(3, b), vec![0, 4, 3]);
    }

    #[test]
    fn a_declared_clash_waits_even_for_a_much_more_critical_story() {
        let never = |_: usize| false;
        let (d, stories) = flat(3);
        let files = files_of(&[&["a.txt"], &["a.txt"], &[]]);
        let stories = declaring(&stories, &files);
        // s1's chain is far longer than s2's: with `risk` it would start
        // beside s0 (see the test below); with `wait` it does not.
        let w = vec![10, 20, 8];
        let mut s = Scheduler::new(&d, vec![StoryState::Pending; 3], Some(&w));
        s.set(0, StoryState::Running);
        let b = Bounds {
            declared: Some(&stories),
            ..bounds(9, &never, &files)
        };
        assert_eq!(s.choose(2, b), vec![2]);
        assert_eq!(s.choose(2, bounds(9, &never, &files)), vec![1, 2]);
    }

    #[test]
    fn a_predicted_clash_never_defers_a_much_more_critical_story() {
        let (d, _) = flat(4);
        let files = files_of(&[&["FEATURES.md"], &["FEATURES.md"], &[], &[]]);
        let never = |_: usize| false;
        // s1 clashes with running s0. Chains: s1 10, s2 and s3 8 (within a
        // third of s1: they may pass it).
        let w = vec![10, 10, 8, 8];
        let mut s = Scheduler::new(&d, vec![StoryState::Pending; 4], Some(&w));
        s.set(0, StoryState::Running);
        assert_eq!(s.choose(1, bounds(9, &never, &files)), vec![2]);
        assert_eq!(s.choose(2, bounds(9, &never, &files)), vec![2, 3]);
        // s1's chain is far longer than s2's: it starts, clash or not.
        let w = vec![10, 20, 8, 8];
        let mut s = Scheduler::new(&d, vec![StoryState::Pending; 4], Some(&w));
        s.set(0, StoryState::Running);
        assert_eq!(s.choose(1, bounds(9, &never, &files)), vec![1]);
        assert_eq!(s.choose(2, bounds(9, &never, &files)), vec![1, 2]);
    }

    #[test]
    fn the_longest_expected_chain_starts_first() {
        // a → b → c (three stories) against d alone.
        let stories = vec![
            story("a", 0, &[], None),
            story("b", 0, &["a"], None),
            story("c", 0, &["b"], None),
            story("d", 0, &[], None),
        ];
        let backlog = Backlog::one_batch(stories.clone());
        let d = Dag::build(&backlog).unwrap();
        let pending = vec![StoryState::Pending; 4];
        // By story count (equal estimations) the chain is the longest.
        let s = Scheduler::for_stories(&d, &stories, pending.clone(), true, None);
        assert_eq!(s.ready(), vec![0, 3]);
        // History says d takes 10 minutes and the chain's stories 1 each:
        // d is the longest expected chain.
        let expected = [60.0, 60.0, 60.0, 600.0];
        let s = Scheduler::for_stories(&d, &stories, pending.clone(), true, Some(&expected));
        assert_eq!(s.ready(), vec![3, 0]);
        // Sequential mode keeps file order whatever the history.
        let s = Scheduler::for_stories(&d, &stories, pending.clone(), false, Some(&expected));
        assert_eq!(s.ready(), vec![0, 3]);
        // Expected durations that do not fit the backlog are not used.
        let s = Scheduler::for_stories(&d, &stories, pending, true, Some(&expected[..2]));
        assert_eq!(s.ready(), vec![0, 3]);
    }

    #[test]
    fn retries_beyond_the_bound_leave_their_slots_to_first_attempts() {
        let (d, _) = flat(5);
        let s = Scheduler::new(&d, vec![StoryState::Pending; 5], None);
        let retry = |i: usize| i < 3;
        let none = vec![Vec::new(); 5];
        assert_eq!(s.choose(4, bounds(1, &retry, &none)), vec![0, 3, 4]);
        assert_eq!(s.choose(4, bounds(2, &retry, &none)), vec![0, 1, 3, 4]);
        // A retry already runs: the next waits, the slot goes to s3.
        assert_eq!(s.choose(1, bounds(0, &retry, &none)), vec![3]);
        // Only retries left and none may start: the slot stays free.
        let only_retries = |_: usize| true;
        assert_eq!(
            s.choose(2, bounds(0, &only_retries, &none)),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn a_story_touching_in_flight_files_waits_while_other_work_is_ready() {
        let (d, _) = flat(4);
        let files = files_of(&[&["FEATURES.md"], &["FEATURES.md", "b.rs"], &[], &["data/"]]);
        let never = |_: usize| false;
        let mut s = Scheduler::new(&d, vec![StoryState::Pending; 4], None);
        // Two free slots: s0, then s1 clashes with it; s2 takes the slot.
        assert_eq!(s.choose(2, bounds(9, &never, &files)), vec![0, 2]);
        s.set(0, StoryState::Running);
        s.set(2, StoryState::Running);
        // s0 runs: s1 waits behind s3.
        assert_eq!(s.choose(1, bounds(9, &never, &files)), vec![3]);
        // Nothing else ready: a slot never idles for a prediction.
        s.set(3, StoryState::Running);
        assert_eq!(s.choose(1, bounds(9, &never, &files)), vec![1]);
        // Landing work is still in flight; done work is on the target.
        s.set(0, StoryState::Landing);
        let only_s1 = vec![
            StoryState::Landing,
            StoryState::Pending,
            StoryState::Pending,
            StoryState::Done,
        ];
        let s = Scheduler::new(&d, only_s1, None);
        assert_eq!(s.choose(1, bounds(9, &never, &files)), vec![2]);
        let s = Scheduler::new(
            &d,
            vec![
                StoryState::Done,
                StoryState::Pending,
                StoryState::Pending,
                StoryState::Done,
            ],
            None,
        );
        assert_eq!(s.choose(1, bounds(9, &never, &files)), vec![1]);
        // A directory and a file inside it clash.
        let files = files_of(&[&["data/seed.json"], &[], &[], &["data/"]]);
        let s = Scheduler::new(
            &d,
            vec![
                StoryState::Running,
                StoryState::Pending,
                StoryState::Done,
                StoryState::Pending,
            ],
            None,
        );
        assert_eq!(s.choose(1, bounds(9, &never, &files)), vec![1]);
    }

    #[test]
    fn a_dependent_does_not_clash_with_what_it_waits_for() {
        // b depends on a (landing); both touch lib.rs; c is small and free.
        let backlog = unbatched_then_batch_1(vec![
            story("a", 1, &[], None),
            story("b", 1, &["a"], Some("large")),
            story("c", 1, &[], Some("small")),
        ]);
        let d = Dag::build(&backlog).unwrap();
        let w: Vec<u64> = [None, Some("large"), Some("small")]
            .iter()
            .map(|e| estimation_weight(*e))
            .collect();
        let files = files_of(&[&["lib.rs"], &["lib.rs"], &[]]);
        let never = |_: usize| false;
        let s = Scheduler::new(
            &d,
            vec![
                StoryState::Landing,
                StoryState::Pending,
                StoryState::Pending,
            ],
            Some(&w),
        );
        // b keeps the one free slot for when a lands, as without files.
        assert_eq!(s.choose(1, bounds(9, &never, &files)), Vec::<usize>::new());
        let mut s = s;
        s.set(0, StoryState::Done);
        assert_eq!(s.choose(1, bounds(9, &never, &files)), vec![1]);
    }

    #[test]
    fn jobs_now_lowers_for_a_near_limit_and_for_memory_never_below_one() {
        let mem = |available_mb, per_agent_mb, warming| {
            Some(Memory {
                available_mb,
                per_agent_mb,
                warming,
            })
        };
        let j = jobs_now(4, false, 0, None);
        assert_eq!((j.now, j.fewer.clone()), (4, vec![]));
        assert_eq!(jobs_now(4, true, 0, None).now, 3);
        assert_eq!(jobs_now(1, true, 0, None).fewer, vec![]);
        // 20 GB free, 2 GB each: all four.
        assert_eq!(jobs_now(4, false, 0, mem(20_000, 2048, 0)).now, 4);
        // 5 GB free: two more beside the two running.
        let j = jobs_now(4, false, 2, mem(5_000, 2048, 0));
        assert_eq!((j.now, j.fewer.len()), (4, 0));
        // Two of them just started: their footprint is kept for them.
        let j = jobs_now(4, false, 2, mem(5_000, 2048, 2));
        assert_eq!(j.now, 2);
        assert_eq!(
            j.fewer,
            vec![Fewer::Memory {
                available_mb: 5_000,
                per_agent_mb: 2048
            }]
        );
        // More than the machine has: one at a time, never none.
        let j = jobs_now(4, false, 0, mem(20_000, u64::MAX / 2, 0));
        assert_eq!(j.now, 1);
        assert!(j.memory_bound());
        assert_eq!(jobs_now(4, false, 1, mem(0, 2048, 1)).now, 1);
        // Both reasons at once, the tighter one binding.
        let j = jobs_now(4, true, 0, mem(4_500, 2048, 0));
        assert_eq!(j.now, 2);
        assert_eq!(j.fewer.len(), 2);
        // 0 MB per agent is no check.
        assert_eq!(jobs_now(4, false, 0, mem(0, 0, 0)).now, 4);
        // The recorded decision changes with its reasons, not the figures.
        let a = jobs_now(4, false, 0, mem(3000, 2048, 0));
        let b = jobs_now(4, false, 0, mem(3100, 2048, 0));
        assert!(a.same_as(&b) && a != b);
        assert!(!a.same_as(&jobs_now(4, false, 0, None)));
    }
}
