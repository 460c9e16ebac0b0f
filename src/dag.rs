//! The story DAG (SPEC 3.5), built with petgraph. Pure: no IO.
//!
//! Node `i` is `backlog.stories[i]`. An edge `a -> b` means "b waits for a".

use petgraph::graph::DiGraph;

use crate::backlog::Backlog;
use crate::error::Problem;

#[derive(Debug, Clone)]
pub struct Dag {
    pub graph: DiGraph<usize, ()>,
}

impl Dag {
    /// Builds the DAG from `depends_on` and the batch sections. An unknown
    /// dependency, a self-dependency or a cycle is a problem naming the IDs (the
    /// cycle's IDs in order) and the spec or queue file involved.
    pub fn build(backlog: &Backlog) -> Result<Dag, Vec<Problem>> {
        let _ = backlog;
        todo!()
    }

    pub fn len(&self) -> usize {
        self.graph.node_count()
    }

    pub fn is_empty(&self) -> bool {
        self.graph.node_count() == 0
    }

    /// Stories `i` waits for directly.
    pub fn waits_for(&self, i: usize) -> Vec<usize> {
        let _ = i;
        todo!()
    }

    /// Stories that wait for `i` directly.
    pub fn dependents(&self, i: usize) -> Vec<usize> {
        let _ = i;
        todo!()
    }

    /// Everything downstream of `i` (not including `i`), sorted.
    pub fn descendants(&self, i: usize) -> Vec<usize> {
        let _ = i;
        todo!()
    }

    /// Everything upstream of `i` (not including `i`), sorted.
    pub fn ancestors(&self, i: usize) -> Vec<usize> {
        let _ = i;
        todo!()
    }

    /// For each node, the weight of the heaviest path starting at it (its own
    /// weight included): the critical-path priority used for dispatch.
    pub fn critical_path(&self, weights: &[u64]) -> Vec<u64> {
        let _ = weights;
        todo!()
    }

    /// A topological order (file order among independent stories).
    pub fn topo_order(&self) -> Vec<usize> {
        todo!()
    }
}
