//! Dispatch decisions (SPEC 3.5, issue "parallel engine"): which ready story
//! starts next, and what a failure blocks. Pure: the engine feeds it status
//! changes and asks it questions.

use crate::dag::Dag;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Node {
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
}

#[derive(Debug, Clone)]
pub(crate) struct Scheduler {
    pub(crate) nodes: Vec<Node>,
    waits: Vec<Vec<usize>>,
    dependents: Vec<Vec<usize>>,
    /// Higher starts first; ties go to the earlier story in file order.
    priority: Vec<u64>,
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
    /// `weights`: `None` for file order (sequential mode), otherwise the
    /// per-story weights whose heaviest downstream chain sets priority.
    pub(crate) fn new(dag: &Dag, initial: Vec<Node>, weights: Option<&[u64]>) -> Scheduler {
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
        };
        for i in 0..n {
            if s.nodes[i] == Node::Failed {
                s.block_downstream(i);
            }
        }
        s
    }

    fn satisfied(&self, i: usize) -> bool {
        matches!(self.nodes[i], Node::Done | Node::Excluded)
    }

    pub(crate) fn is_ready(&self, i: usize) -> bool {
        self.nodes[i] == Node::Pending && self.waits[i].iter().all(|&w| self.satisfied(w))
    }

    /// Ready stories, best first.
    pub(crate) fn ready(&self) -> Vec<usize> {
        let mut r: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.is_ready(i))
            .collect();
        r.sort_by(|&a, &b| self.priority[b].cmp(&self.priority[a]).then(a.cmp(&b)));
        r
    }

    /// Pending stories that become ready as soon as the stories now landing
    /// land (every wait is satisfied or landing, at least one landing).
    pub(crate) fn imminent(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| {
                self.nodes[i] == Node::Pending
                    && self.waits[i]
                        .iter()
                        .any(|&w| self.nodes[w] == Node::Landing)
                    && self.waits[i]
                        .iter()
                        .all(|&w| self.satisfied(w) || self.nodes[w] == Node::Landing)
            })
            .collect()
    }

    /// What to start now in `free` slots: the best `free` stories among the
    /// ready ones *and* the imminent ones, so a landing story's critical
    /// dependents are not beaten to the slot by lesser work that happens to
    /// be ready a few milliseconds earlier. Imminent picks start nothing now;
    /// their slot stays free until the landing decides.
    pub(crate) fn pick(&self, free: usize) -> Vec<usize> {
        let ready = self.ready();
        if free == 0 || ready.is_empty() {
            return Vec::new();
        }
        let mut all: Vec<(usize, bool)> = ready.iter().map(|&i| (i, true)).collect();
        all.extend(self.imminent().into_iter().map(|i| (i, false)));
        all.sort_by(|a, b| {
            self.priority[b.0]
                .cmp(&self.priority[a.0])
                .then(a.0.cmp(&b.0))
        });
        all.into_iter()
            .take(free)
            .filter(|(_, ready)| *ready)
            .map(|(i, _)| i)
            .collect()
    }

    /// The next story to start, if any is ready.
    pub(crate) fn next(&self) -> Option<usize> {
        self.ready().into_iter().next()
    }

    pub(crate) fn set(&mut self, i: usize, node: Node) {
        self.nodes[i] = node;
    }

    /// Marks `i` failed for good; returns the stories this newly blocks.
    pub(crate) fn fail(&mut self, i: usize) -> Vec<usize> {
        self.nodes[i] = Node::Failed;
        self.block_downstream(i)
    }

    fn block_downstream(&mut self, i: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = self.dependents[i].clone();
        while let Some(d) = stack.pop() {
            if self.nodes[d] == Node::Pending {
                self.nodes[d] = Node::Blocked;
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
        if self.nodes[i] == Node::Failed {
            self.nodes[i] = Node::Pending;
        }
        for n in self.nodes.iter_mut() {
            if *n == Node::Blocked {
                *n = Node::Pending;
            }
        }
        for j in 0..self.nodes.len() {
            if self.nodes[j] == Node::Failed {
                self.block_downstream(j);
            }
        }
    }

    pub(crate) fn count(&self, node: Node) -> usize {
        self.nodes.iter().filter(|&&n| n == node).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backlog::{Backlog, Section, Source, Story};

    fn story(id: &str, section: usize, deps: &[&str], est: Option<&str>) -> Story {
        Story {
            id: id.into(),
            title: String::new(),
            line: 0,
            section,
            spec_path: None,
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            estimation: est.map(str::to_string),
            agent: None,
            allow_empty_done: false,
            prd_passes: false,
            prd_spec: None,
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

    #[test]
    fn ready_follows_barriers_and_critical_path() {
        let d = dag();
        let w: Vec<u64> = [None, Some("small"), Some("large"), None, None]
            .iter()
            .map(|e| estimation_weight(*e))
            .collect();
        let mut s = Scheduler::new(&d, vec![Node::Pending; 5], Some(&w));
        assert_eq!(s.ready(), vec![0]);
        s.set(0, Node::Done);
        // c heads the heaviest chain (large + e), so it starts first.
        assert_eq!(s.ready(), vec![2, 1]);
        s.set(2, Node::Running);
        s.set(1, Node::Running);
        assert_eq!(s.next(), None);
        s.set(1, Node::Done);
        assert_eq!(s.ready(), vec![3]);
    }

    #[test]
    fn sequential_mode_is_file_order() {
        let d = dag();
        let mut s = Scheduler::new(&d, vec![Node::Pending; 5], None);
        s.set(0, Node::Done);
        assert_eq!(s.ready(), vec![1, 2]);
    }

    #[test]
    fn a_failure_blocks_exactly_its_descendants() {
        let d = dag();
        let mut s = Scheduler::new(&d, vec![Node::Pending; 5], None);
        s.set(0, Node::Done);
        assert_eq!(s.fail(2), vec![4]);
        assert_eq!(s.nodes[3], Node::Pending);
        s.set(1, Node::Done);
        assert_eq!(s.next(), Some(3));
        s.set(3, Node::Done);
        assert_eq!(s.next(), None);
        assert_eq!(s.count(Node::Blocked), 1);
    }

    #[test]
    fn excluded_stories_count_as_satisfied() {
        let d = dag();
        let mut nodes = vec![Node::Excluded; 5];
        nodes[3] = Node::Pending;
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
            vec![Node::Done, Node::Landing, Node::Pending, Node::Pending],
            Some(&w),
        );
        assert_eq!(s.imminent(), vec![2]);
        // One free slot: it waits for c rather than going to d.
        assert_eq!(s.pick(1), Vec::<usize>::new());
        // Two free slots: d starts, one stays for c.
        assert_eq!(s.pick(2), vec![3]);
        s.set(1, Node::Done);
        assert_eq!(s.pick(1), vec![2]);
    }
}
