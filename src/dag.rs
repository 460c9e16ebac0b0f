//! The story DAG (SPEC 3.5), built with petgraph. Pure: no IO.
//!
//! Node `i` is `backlog.stories[i]`. An edge `a -> b` means "b waits for a".

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::path::PathBuf;

use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;

use crate::backlog::{Backlog, Source};
use crate::error::Problem;
use crate::paths;

#[derive(Debug, Clone)]
pub(crate) struct Dag {
    pub(crate) graph: DiGraph<usize, ()>,
}

impl Dag {
    /// Every edge as (from, to) story indices: what the drawings (`plan`,
    /// the report page, the web view, the live graph) are given.
    pub(crate) fn edges(&self) -> Vec<(usize, usize)> {
        self.graph
            .raw_edges()
            .iter()
            .map(|e| (e.source().index(), e.target().index()))
            .collect()
    }

    /// Builds the DAG from `depends_on` and the batch sections. An unknown
    /// dependency, a self-dependency or a cycle is a problem naming the IDs (the
    /// cycle's IDs in order) and the spec or queue file involved.
    pub(crate) fn build(backlog: &Backlog) -> Result<Dag, Vec<Problem>> {
        let n = backlog.stories.len();
        let mut graph: DiGraph<usize, ()> = DiGraph::with_capacity(n, n);
        for i in 0..n {
            graph.add_node(i);
        }
        let index: HashMap<&str, usize> = backlog
            .stories
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), i))
            .collect();
        let skipped: HashSet<&str> = backlog.skipped.iter().map(String::as_str).collect();
        let mut problems = Vec::new();

        // waits[b] = the stories b waits for, without duplicates.
        let mut waits: Vec<Vec<usize>> = vec![Vec::new(); n];
        add_batch_edges(backlog, &mut waits);
        // The depends_on edges, so a cycle message can tell them apart from
        // arrows that come from the batch order.
        let mut declared: HashSet<(usize, usize)> = HashSet::new();

        // stamp[a] == b + 1 marks "a already in waits[b]": O(E) de-duplication.
        let mut stamp = vec![0usize; n];
        for (b, story) in backlog.stories.iter().enumerate() {
            for &a in &waits[b] {
                stamp[a] = b + 1;
            }
            for dep in &story.depends_on {
                if dep == &story.id {
                    problems.push(Problem::new(
                        story_file(backlog, b),
                        None,
                        format!(
                            "story {} depends on itself; remove {dep} from its depends_on",
                            story.id
                        ),
                    ));
                    continue;
                }
                match index.get(dep.as_str()) {
                    Some(&a) => {
                        declared.insert((a, b));
                        if stamp[a] != b + 1 {
                            stamp[a] = b + 1;
                            waits[b].push(a);
                        }
                    }
                    // A skipped story that was decomposed (`x 3.1` with
                    // 3.1.1, 3.1.2 listed) is finished only when all its
                    // sub-stories are: its dependents wait for every one.
                    None if skipped.contains(dep.as_str()) => {
                        let prefix = format!("{dep}.");
                        for (a, s) in backlog.stories.iter().enumerate() {
                            if s.id.starts_with(&prefix) && a != b && stamp[a] != b + 1 {
                                stamp[a] = b + 1;
                                waits[b].push(a);
                                declared.insert((a, b));
                            }
                        }
                    }
                    None => problems.push(Problem::new(
                        story_file(backlog, b),
                        None,
                        format!(
                            "story {} depends on {dep}, which is not in the backlog; add {dep} to the queue or remove it from depends_on",
                            story.id
                        ),
                    )),
                }
            }
        }
        for (b, list) in waits.iter().enumerate() {
            for &a in list {
                graph.add_edge(NodeIndex::new(a), NodeIndex::new(b), ());
            }
        }

        let dag = Dag { graph };
        problems.extend(dag.cycle_problems(backlog, &declared));
        if problems.is_empty() {
            Ok(dag)
        } else {
            Err(problems)
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.graph.node_count()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.graph.node_count() == 0
    }

    /// Stories `i` waits for directly.
    pub(crate) fn waits_for(&self, i: usize) -> Vec<usize> {
        self.neighbors(i, Direction::Incoming)
    }

    /// Stories that wait for `i` directly.
    pub(crate) fn dependents(&self, i: usize) -> Vec<usize> {
        self.neighbors(i, Direction::Outgoing)
    }

    #[cfg(test)]
    /// Everything downstream of `i` (not including `i`), sorted.
    pub(crate) fn descendants(&self, i: usize) -> Vec<usize> {
        self.reach(i, Direction::Outgoing)
    }

    #[cfg(test)]
    /// Everything upstream of `i` (not including `i`), sorted.
    pub(crate) fn ancestors(&self, i: usize) -> Vec<usize> {
        self.reach(i, Direction::Incoming)
    }

    /// For each node, the weight of the heaviest path starting at it (its own
    /// weight included): the critical-path priority used for dispatch.
    pub(crate) fn critical_path(&self, weights: &[u64]) -> Vec<u64> {
        let n = self.len();
        let mut best = vec![0u64; n];
        // Reverse topological order: every dependent is final before its
        // predecessor reads it.
        for &v in self.topo_order().iter().rev() {
            let tail = self
                .graph
                .neighbors_directed(NodeIndex::new(v), Direction::Outgoing)
                .map(|d| best[d.index()])
                .max()
                .unwrap_or(0);
            best[v] = weights.get(v).copied().unwrap_or(0).saturating_add(tail);
        }
        best
    }

    /// A topological order (file order among independent stories).
    pub(crate) fn topo_order(&self) -> Vec<usize> {
        let n = self.len();
        let mut indegree: Vec<usize> = (0..n)
            .map(|i| {
                self.graph
                    .neighbors_directed(NodeIndex::new(i), Direction::Incoming)
                    .count()
            })
            .collect();
        let mut ready: BinaryHeap<Reverse<usize>> =
            (0..n).filter(|&i| indegree[i] == 0).map(Reverse).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(Reverse(v)) = ready.pop() {
            order.push(v);
            for d in self
                .graph
                .neighbors_directed(NodeIndex::new(v), Direction::Outgoing)
            {
                let d = d.index();
                indegree[d] -= 1;
                if indegree[d] == 0 {
                    ready.push(Reverse(d));
                }
            }
        }
        order
    }

    fn neighbors(&self, i: usize, dir: Direction) -> Vec<usize> {
        if i >= self.len() {
            return Vec::new();
        }
        let mut out: Vec<usize> = self
            .graph
            .neighbors_directed(NodeIndex::new(i), dir)
            .map(|n| n.index())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    #[cfg(test)]
    fn reach(&self, i: usize, dir: Direction) -> Vec<usize> {
        let n = self.len();
        if i >= n {
            return Vec::new();
        }
        let mut seen = vec![false; n];
        let mut stack = vec![i];
        seen[i] = true;
        while let Some(v) = stack.pop() {
            for w in self.graph.neighbors_directed(NodeIndex::new(v), dir) {
                if !seen[w.index()] {
                    seen[w.index()] = true;
                    stack.push(w.index());
                }
            }
        }
        seen[i] = false;
        (0..n).filter(|&v| seen[v]).collect()
    }

    /// One problem per strongly connected component with more than one story,
    /// listing a shortest cycle through its first story.
    fn cycle_problems(
        &self,
        backlog: &Backlog,
        declared: &HashSet<(usize, usize)>,
    ) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut sccs: Vec<Vec<usize>> = tarjan_scc(&self.graph)
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|c| {
                let mut c: Vec<usize> = c.into_iter().map(|n| n.index()).collect();
                c.sort_unstable();
                c
            })
            .collect();
        sccs.sort();
        for scc in sccs {
            let cycle = self.cycle_through(scc[0], &scc);
            let id = |i: usize| backlog.stories[i].id.as_str();
            let mut text = id(cycle[0]).to_string();
            let mut via_batch = Vec::new();
            for pair in cycle.windows(2) {
                // In the message "x -> y" reads "x waits for y", i.e. edge y -> x.
                let (waiter, waited) = (pair[0], pair[1]);
                text.push_str(" -> ");
                text.push_str(id(waited));
                if !declared.contains(&(waited, waiter)) {
                    via_batch.push(format!("{} -> {}", id(waiter), id(waited)));
                }
            }
            let mut files: Vec<String> = Vec::new();
            for &s in &cycle[..cycle.len() - 1] {
                let f = story_file(backlog, s).display().to_string();
                if !files.contains(&f) {
                    files.push(f);
                }
            }
            let mut message = format!("dependency cycle: {text} (in {})", files.join(", "));
            match via_batch.as_slice() {
                [] => {}
                [one] => message.push_str(&format!(
                    "; the arrow {one} comes from the batch order in {}",
                    paths::QUEUE
                )),
                many => message.push_str(&format!(
                    "; the arrows {} come from the batch order in {}",
                    many.join(", "),
                    paths::QUEUE
                )),
            }
            message.push_str("; remove a depends_on entry to break the cycle");
            problems.push(Problem::new(story_file(backlog, cycle[0]), None, message));
        }
        problems
    }

    /// A shortest cycle start -> ... -> start following "waits for", within `scc`.
    fn cycle_through(&self, start: usize, scc: &[usize]) -> Vec<usize> {
        let in_scc = |v: usize| scc.binary_search(&v).is_ok();
        let mut parent: HashMap<usize, usize> = HashMap::new();
        let mut queue = VecDeque::from([start]);
        while let Some(v) = queue.pop_front() {
            for w in self
                .graph
                .neighbors_directed(NodeIndex::new(v), Direction::Incoming)
            {
                let w = w.index();
                if w == start {
                    let mut path = Vec::new();
                    let mut cur = v;
                    while cur != start {
                        path.push(cur);
                        cur = parent[&cur];
                    }
                    path.push(start);
                    path.reverse();
                    path.push(start);
                    return path;
                }
                if in_scc(w) && w != start && !parent.contains_key(&w) {
                    parent.insert(w, v);
                    queue.push_back(w);
                }
            }
        }
        // Unreachable for a real SCC; fall back to listing its members.
        let mut all = scc.to_vec();
        all.push(start);
        all
    }
}

/// Barrier and chain edges (SPEC 3.5), transitively reduced: a section waits
/// only for the previous non-empty section's exits, which themselves wait for
/// everything earlier, so readiness is the same as with the full barrier.
fn add_batch_edges(backlog: &Backlog, waits: &mut [Vec<usize>]) {
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); backlog.sections.len()];
    for (i, s) in backlog.stories.iter().enumerate() {
        if let Some(m) = members.get_mut(s.section) {
            m.push(i);
        }
    }
    let mut exits: Vec<usize> = Vec::new();
    for (section, m) in backlog.sections.iter().zip(&members) {
        if m.is_empty() {
            continue;
        }
        if section.chain {
            for &a in &exits {
                waits[m[0]].push(a);
            }
            for pair in m.windows(2) {
                waits[pair[1]].push(pair[0]);
            }
            exits = vec![m[m.len() - 1]];
        } else {
            for &b in m {
                for &a in &exits {
                    waits[b].push(a);
                }
            }
            exits = m.clone();
        }
    }
}

fn story_file(backlog: &Backlog, i: usize) -> PathBuf {
    match (&backlog.source, &backlog.stories[i].spec_path) {
        (_, Some(p)) => p.clone(),
        (Source::Prd { .. }, None) => PathBuf::from(paths::PRD),
        (Source::StoriesTxt, None) => PathBuf::from(paths::QUEUE),
        (Source::GitHub { repo }, None) => PathBuf::from(crate::backlog::github::issue_place(
            repo,
            backlog.stories[i].id.parse().unwrap_or_default(),
        )),
        (Source::Linear { .. }, None) => PathBuf::from(format!("Linear {}", backlog.stories[i].id)),
        (Source::Jira { .. }, None) => PathBuf::from(format!("Jira {}", backlog.stories[i].id)),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::backlog::{parse_queue, Story};

    /// A backlog from queue text plus `(id, depends_on)` pairs.
    fn backlog(queue: &str, deps: &[(&str, &[&str])]) -> Backlog {
        let q = parse_queue(queue, Path::new(".ralph/stories.txt")).unwrap();
        let stories = q
            .entries
            .iter()
            .map(|e| Story {
                line: e.line,
                section: e.section,
                spec_path: Some(PathBuf::from(format!("specs/story-{}.md", e.id))),
                depends_on: deps
                    .iter()
                    .find(|(id, _)| *id == e.id)
                    .map(|(_, d)| d.iter().map(|s| s.to_string()).collect())
                    .unwrap_or_default(),
                ..Story::bare(e.id.clone(), e.title.clone())
            })
            .collect();
        Backlog {
            source: Source::StoriesTxt,
            stories,
            sections: q.sections,
            skipped: q.skipped,
        }
    }

    fn ids(b: &Backlog, v: &[usize]) -> Vec<String> {
        v.iter().map(|&i| b.stories[i].id.clone()).collect()
    }

    fn messages(problems: &[Problem]) -> Vec<String> {
        problems.iter().map(|p| p.to_string()).collect()
    }

    /// Ancestors under the unreduced SPEC 3.5 rules: every earlier section in
    /// full, every earlier story of the same chain section, and depends_on.
    fn brute_force_ancestors(b: &Backlog) -> Vec<Vec<usize>> {
        let n = b.stories.len();
        let mut direct = vec![Vec::new(); n];
        for (j, sj) in b.stories.iter().enumerate() {
            for (i, si) in b.stories.iter().enumerate() {
                let earlier_section = si.section < sj.section;
                let chain_before =
                    si.section == sj.section && b.sections[sj.section].chain && i < j;
                if earlier_section || chain_before || sj.depends_on.contains(&si.id) {
                    direct[j].push(i);
                }
            }
        }
        (0..n)
            .map(|j| {
                let mut seen = vec![false; n];
                let mut stack = direct[j].clone();
                while let Some(v) = stack.pop() {
                    if !seen[v] {
                        seen[v] = true;
                        stack.extend(direct[v].iter().copied());
                    }
                }
                (0..n).filter(|&v| seen[v]).collect()
            })
            .collect()
    }

    #[test]
    fn reduced_barriers_equal_the_full_semantics() {
        let queue = "h1\nh2\n# [batch:1]\na1\na2\na3\n# [batch:2]\n# [batch:0]\nc1\nc2\n# [batch:3]\nd1\nd2\n# [batch:31.5]\ne1\n# [batch:0]\nf1\nf2\nf3\n";
        let b = backlog(
            queue,
            &[("a2", &["a1"]), ("d2", &["d1", "h1"]), ("f3", &["f1"])],
        );
        let dag = Dag::build(&b).unwrap();
        let expected = brute_force_ancestors(&b);
        for (i, want) in expected.iter().enumerate() {
            assert_eq!(&dag.ancestors(i), want, "ancestors of {}", b.stories[i].id);
        }
        // The reduction keeps the graph small: a1..a3 wait only for h2.
        assert_eq!(ids(&b, &dag.waits_for(b.index_of("a3").unwrap())), ["h2"]);
        assert_eq!(
            ids(&b, &dag.waits_for(b.index_of("a2").unwrap())),
            ["h2", "a1"]
        );
        assert_eq!(
            ids(&b, &dag.waits_for(b.index_of("c1").unwrap())),
            ["a1", "a2", "a3"]
        );
        assert_eq!(ids(&b, &dag.waits_for(b.index_of("c2").unwrap())), ["c1"]);
        assert_eq!(ids(&b, &dag.waits_for(b.index_of("d1").unwrap())), ["c2"]);
        assert_eq!(
            ids(&b, &dag.dependents(b.index_of("h2").unwrap())),
            ["a1", "a2", "a3"]
        );
    }

    #[test]
    fn a_decomposed_story_is_finished_only_by_all_its_sub_stories() {
        // 1.2 was split into 1.2.1 and 1.2.2; 2.1 depended on 1.2.
        let queue = "# [batch:1]\n1.1\nx 1.2\n1.2.1\n1.2.2\n2.1\n1.20\n";
        let b = backlog(queue, &[("2.1", &["1.2"]), ("1.2.2", &["1.2.1"])]);
        let dag = Dag::build(&b).unwrap();
        assert_eq!(
            ids(&b, &dag.waits_for(b.index_of("2.1").unwrap())),
            ["1.2.1", "1.2.2"]
        );
        // A skipped story without sub-stories is satisfied, as before.
        let b = backlog("1.1\nx 1.2\n# [batch:1]\n2.1\n", &[("2.1", &["1.2"])]);
        let dag = Dag::build(&b).unwrap();
        assert_eq!(ids(&b, &dag.waits_for(b.index_of("2.1").unwrap())), ["1.1"]);
    }

    #[test]
    fn pipeline_shape_batch_zero_after_batch_one() {
        // The compat pipeline fixture: an unbatched head, then [batch:1], then
        // [batch:0] (a chain that still comes after batch 1), then [batch:2].
        let queue = "1.1\n1.2\nx 1.3\n# [batch:1]\n2.1\n2.2\n2.3\n# [batch:0]\n3.1\n3.2\n# [batch:2]\n4.1\n4.2\n";
        let b = backlog(
            queue,
            &[
                ("3.1", &["2.1"]),
                ("3.2", &["2.1", "2.2"]),
                ("1.2", &["1.3"]),
            ],
        );
        let dag = Dag::build(&b).unwrap();
        let at = |id: &str| b.index_of(id).unwrap();
        assert_eq!(ids(&b, &dag.waits_for(at("1.2"))), ["1.1"]);
        assert_eq!(ids(&b, &dag.waits_for(at("2.2"))), ["1.2"]);
        assert_eq!(ids(&b, &dag.waits_for(at("3.1"))), ["2.1", "2.2", "2.3"]);
        assert_eq!(ids(&b, &dag.waits_for(at("3.2"))), ["2.1", "2.2", "3.1"]);
        assert_eq!(ids(&b, &dag.waits_for(at("4.1"))), ["3.2"]);
        assert_eq!(
            ids(&b, &dag.ancestors(at("4.2"))),
            ["1.1", "1.2", "2.1", "2.2", "2.3", "3.1", "3.2"]
        );
        assert_eq!(
            ids(&b, &dag.descendants(at("2.3"))),
            ["3.1", "3.2", "4.1", "4.2"]
        );
        assert_eq!(dag.topo_order(), (0..b.stories.len()).collect::<Vec<_>>());
        let expected = brute_force_ancestors(&b);
        for (i, want) in expected.iter().enumerate() {
            assert_eq!(&dag.ancestors(i), want);
        }
    }

    #[test]
    fn unknown_and_self_dependencies() {
        let b = backlog(
            "# [batch:1]\n1.1\n2.3\n",
            &[("2.3", &["9.9", "2.3", "1.1"])],
        );
        let problems = messages(&Dag::build(&b).unwrap_err());
        assert_eq!(
            problems,
            [
                "specs/story-2.3.md: story 2.3 depends on 9.9, which is not in the backlog; add 9.9 to the queue or remove it from depends_on",
                "specs/story-2.3.md: story 2.3 depends on itself; remove 2.3 from its depends_on",
            ]
        );
    }

    #[test]
    fn prd_problems_name_prd_json() {
        let mut b = backlog("# [batch:1]\nUS-1\n", &[("US-1", &["US-9"])]);
        b.source = Source::Prd { branch: None };
        b.stories[0].spec_path = None;
        let problems = messages(&Dag::build(&b).unwrap_err());
        assert!(
            problems[0].starts_with("prd.json: story US-1 depends on US-9"),
            "{problems:?}"
        );
    }

    #[test]
    fn cycles_list_their_ids_in_order() {
        let b = backlog(
            "# [batch:1]\n1.1\n1.2\n1.3\n1.4\n2.1\n",
            &[
                ("1.1", &["1.2"]),
                ("1.2", &["1.3"]),
                ("1.3", &["1.1"]),
                ("2.1", &["2.1x"]),
            ],
        );
        let problems = messages(&Dag::build(&b).unwrap_err());
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert_eq!(
            problems[1],
            "specs/story-1.1.md: dependency cycle: 1.1 -> 1.2 -> 1.3 -> 1.1 (in specs/story-1.1.md, specs/story-1.2.md, specs/story-1.3.md); remove a depends_on entry to break the cycle"
        );
    }

    #[test]
    fn cycles_through_the_batch_order_say_so() {
        let b = backlog("1.1\n# [batch:1]\n2.1\n", &[("1.1", &["2.1"])]);
        let problems = messages(&Dag::build(&b).unwrap_err());
        assert_eq!(
            problems,
            ["specs/story-1.1.md: dependency cycle: 1.1 -> 2.1 -> 1.1 (in specs/story-1.1.md, specs/story-2.1.md); the arrow 2.1 -> 1.1 comes from the batch order in .ralph/stories.txt; remove a depends_on entry to break the cycle"]
        );
    }

    #[test]
    fn critical_path_and_topo_order() {
        // c waits for a and b; d waits for b; e is independent.
        let b = backlog(
            "# [batch:1]\na\nb\nc\nd\ne\n",
            &[("c", &["a", "b"]), ("d", &["b"])],
        );
        let dag = Dag::build(&b).unwrap();
        assert_eq!(dag.critical_path(&[1, 2, 10, 3, 4]), [11, 12, 10, 3, 4]);
        assert_eq!(dag.critical_path(&[]), [0; 5]);
        assert_eq!(dag.topo_order(), [0, 1, 2, 3, 4]);

        // File order among ready nodes, but never before a dependency.
        let b = backlog("# [batch:1]\nx\ny\nz\n", &[("x", &["z"])]);
        let dag = Dag::build(&b).unwrap();
        assert_eq!(ids(&b, &dag.topo_order()), ["y", "z", "x"]);
        assert_eq!(dag.len(), 3);
        assert!(!dag.is_empty());
        assert!(dag.waits_for(99).is_empty());
    }

    #[test]
    fn empty_backlog() {
        let b = backlog("", &[]);
        let dag = Dag::build(&b).unwrap();
        assert!(dag.is_empty());
        assert!(dag.topo_order().is_empty());
    }

    #[test]
    fn compat_sandboxes_build() {
        let base = crate::testenv::fixture("ralph-v2");
        for run in ["batched", "parallel", "sequential"] {
            let root = base.join(run);
            let config = crate::config::load(&root).unwrap();
            let b = crate::backlog::load(&root, &config).unwrap();
            let dag = Dag::build(&b).unwrap_or_else(|p| panic!("{run}: {p:#?}"));
            assert_eq!(
                dag.topo_order(),
                (0..b.stories.len()).collect::<Vec<_>>(),
                "{run}"
            );
            let last = b.stories.len() - 1;
            assert_eq!(
                dag.ancestors(last).len(),
                last,
                "{run}: the last story waits for all"
            );
        }
    }

    /// Generates a 2,000-story project (20 epics of 100, one batch each, a
    /// depends_on in every spec) and times load + build.
    #[test]
    fn two_thousand_stories_are_fast() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut queue = String::from("# generated\n");
        for e in 1..=20 {
            queue.push_str(&format!("# [batch:{e}]\n"));
            let epic = root.join(format!("specs/epic-{e}"));
            std::fs::create_dir_all(&epic).unwrap();
            for s in 1..=100 {
                let id = format!("{e}.{s}");
                queue.push_str(&format!("{id} | Story {id}\n"));
                let dep = if e > 1 {
                    format!("[{}.{s}]", e - 1)
                } else {
                    "[]".into()
                };
                std::fs::write(
                    epic.join(format!("story-{id}-generated-story.md")),
                    format!("---\nid: \"{id}\"\nstatus: pending\nestimation: small\ndepends_on: {dep}\n---\n\n# Story {id}\n\nBody text.\n"),
                )
                .unwrap();
            }
        }
        std::fs::create_dir_all(root.join(".ralph")).unwrap();
        std::fs::write(root.join(".ralph/stories.txt"), queue).unwrap();

        let start = std::time::Instant::now();
        let config = crate::config::load(root).unwrap();
        let b = crate::backlog::load(root, &config).unwrap();
        let loaded = start.elapsed();
        let dag = Dag::build(&b).unwrap();
        let total = start.elapsed();
        let cp = dag.critical_path(&vec![1; b.stories.len()]);
        let all = start.elapsed();
        eprintln!(
            "2000 stories: load {loaded:?}, load+build {total:?}, +critical_path {all:?} ({} edges)",
            dag.graph.edge_count()
        );
        assert_eq!(b.stories.len(), 2000);
        assert_eq!(cp[0], 20);
        // Generous: unoptimised test builds on a shared machine.
        assert!(total < std::time::Duration::from_secs(5), "{total:?}");
    }
}
