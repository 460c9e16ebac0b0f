//! Lays out the story DAG for drawing, without an external tool: layers by
//! longest-path depth, the order within each layer from a few barycentre
//! sweeps (crossing reduction), and edges reduced to what the eye needs
//! (a transitive reduction; the many-to-many edges of a batch barrier
//! meet at one junction point). Pure.

use std::collections::HashMap;

/// Where a node sits: its layer (column) and its y position in rows (a
/// fraction when a node is centred between its predecessors).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Place {
    pub(crate) layer: usize,
    pub(crate) row: f64,
}

/// A point edges of a batch barrier meet at, between two layers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Junction {
    /// Sits after this layer (and before the next).
    pub(crate) after_layer: usize,
    pub(crate) row: f64,
    pub(crate) from: Vec<usize>,
    pub(crate) to: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Layout {
    pub(crate) places: Vec<Place>,
    pub(crate) layers: usize,
    /// The tallest layer, in rows.
    pub(crate) rows: f64,
    /// Edges drawn directly, `(from, to)`.
    pub(crate) edges: Vec<(usize, usize)>,
    pub(crate) junctions: Vec<Junction>,
}

/// Bundles smaller than this are drawn edge by edge.
const BUNDLE_MIN: usize = 3;
/// Barycentre sweeps (down and up) of the crossing reduction.
const SWEEPS: usize = 4;

/// Nodes in topological order (`None` when `edges` have a cycle).
fn topo(n: usize, preds: &[Vec<usize>], succs: &[Vec<usize>]) -> Option<Vec<usize>> {
    let mut indeg: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut order: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    let mut k = 0;
    while k < order.len() {
        let a = order[k];
        k += 1;
        for &b in &succs[a] {
            indeg[b] -= 1;
            if indeg[b] == 0 {
                order.push(b);
            }
        }
    }
    (order.len() == n).then_some(order)
}

/// A fixed-size bit set over node indices.
#[derive(Clone)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn has(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
    fn or(&mut self, o: &Bits) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a |= b;
        }
    }
}

/// Lays out `n` nodes with `edges` (`(a, b)`: b waits for a); `group[i]`
/// (an epic's rank) orders nodes before the sweeps, so epics start
/// together.
pub(crate) fn layout(n: usize, edges: &[(usize, usize)], group: &[usize]) -> Layout {
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in edges {
        if a < n && b < n && a != b {
            preds[b].push(a);
            succs[a].push(b);
        }
    }
    for v in preds.iter_mut().chain(succs.iter_mut()) {
        v.sort_unstable();
        v.dedup();
    }
    // A cycle cannot come from a validated backlog; draw the nodes anyway.
    let order = topo(n, &preds, &succs).unwrap_or_else(|| (0..n).collect());
    let mut depth = vec![0usize; n];
    for &b in &order {
        for &a in &preds[b] {
            depth[b] = depth[b].max(depth[a] + 1);
        }
    }

    let kept_preds = reduce(n, &order, &preds);
    let layers = depth.iter().max().map_or(0, |d| d + 1);
    let mut by_layer: Vec<Vec<usize>> = vec![Vec::new(); layers];
    let mut initial: Vec<usize> = (0..n).collect();
    initial.sort_by_key(|&i| (group.get(i).copied().unwrap_or(0), i));
    for i in initial {
        by_layer[depth[i]].push(i);
    }
    let mut kept_succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (b, ps) in kept_preds.iter().enumerate() {
        for &a in ps {
            kept_succs[a].push(b);
        }
    }

    order_layers(n, &mut by_layer, &kept_preds, &kept_succs, group);
    let (row, tallest) = rows_of(n, &by_layer, &kept_preds);
    let (junctions, drawn) = bundle(n, &kept_preds, &depth, &row);
    Layout {
        places: (0..n)
            .map(|i| Place {
                layer: depth[i],
                row: row[i],
            })
            .collect(),
        layers,
        rows: tallest,
        edges: drawn,
        junctions,
    }
}

/// Transitive reduction: a → b is implied when a is an ancestor of
/// another of b's predecessors. Each node's predecessors kept.
fn reduce(n: usize, order: &[usize], preds: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut anc: Vec<Bits> = vec![Bits::new(n); n];
    let mut kept_preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &b in order {
        let mut through = Bits::new(n);
        let mut own = Bits::new(n);
        for &a in &preds[b] {
            through.or(&anc[a]);
            own.or(&anc[a]);
            own.set(a);
        }
        kept_preds[b] = preds[b]
            .iter()
            .copied()
            .filter(|&a| !through.has(a))
            .collect();
        anc[b] = own;
    }
    kept_preds
}

/// Crossing reduction: order each layer by the mean position of its
/// neighbours in the layer before (down) or after (up).
fn order_layers(
    n: usize,
    by_layer: &mut [Vec<usize>],
    kept_preds: &[Vec<usize>],
    kept_succs: &[Vec<usize>],
    group: &[usize],
) {
    let layers = by_layer.len();
    let mut pos = vec![0.0f64; n];
    let place = |by_layer: &[Vec<usize>], pos: &mut Vec<f64>| {
        for layer in by_layer {
            let len = layer.len().max(1) as f64;
            for (k, &i) in layer.iter().enumerate() {
                pos[i] = (k as f64 + 0.5) / len;
            }
        }
    };
    place(by_layer, &mut pos);
    for sweep in 0..SWEEPS {
        let down = sweep % 2 == 0;
        let idx: Vec<usize> = if down {
            (1..layers).collect()
        } else {
            (0..layers.saturating_sub(1)).rev().collect()
        };
        for l in idx {
            let keys: HashMap<usize, f64> = by_layer[l]
                .iter()
                .map(|&i| {
                    let nb = if down { &kept_preds[i] } else { &kept_succs[i] };
                    let k = if nb.is_empty() {
                        pos[i]
                    } else {
                        nb.iter().map(|&j| pos[j]).sum::<f64>() / nb.len() as f64
                    };
                    (i, k)
                })
                .collect();
            by_layer[l].sort_by(|&a, &b| {
                keys[&a]
                    .total_cmp(&keys[&b])
                    .then_with(|| group.get(a).cmp(&group.get(b)))
                    .then(a.cmp(&b))
            });
            let len = by_layer[l].len().max(1) as f64;
            for (k, &i) in by_layer[l].iter().enumerate() {
                pos[i] = (k as f64 + 0.5) / len;
            }
        }
    }
}

/// Rows: each node as near the mean row of its predecessors as the order
/// and one row of spacing allow, so chains run straight. Each node's row,
/// and the rows the drawing needs.
fn rows_of(n: usize, by_layer: &[Vec<usize>], kept_preds: &[Vec<usize>]) -> (Vec<f64>, f64) {
    let mut row = vec![0.0f64; n];
    let mut tallest: f64 = 0.0;
    for layer in by_layer {
        let mut next_free = 0.0f64;
        let wanted: Vec<f64> = layer
            .iter()
            .map(|&i| {
                let ps = &kept_preds[i];
                if ps.is_empty() {
                    0.0
                } else {
                    ps.iter().map(|&a| row[a]).sum::<f64>() / ps.len() as f64
                }
            })
            .collect();
        // Never push a layer further down than it needs: start it where
        // its first node wants to be, but no lower than that allows for
        // the rest of the layer to stay in order.
        for (k, &i) in layer.iter().enumerate() {
            let r = wanted[k].max(next_free);
            row[i] = r;
            next_free = r + 1.0;
        }
        tallest = tallest.max(next_free);
    }
    (row, tallest)
}

/// Batch barriers: many nodes waiting for the same set of many nodes meet
/// at one junction instead of |from| × |to| lines. The junctions, and the
/// edges still drawn one by one.
fn bundle(
    n: usize,
    kept_preds: &[Vec<usize>],
    depth: &[usize],
    row: &[f64],
) -> (Vec<Junction>, Vec<(usize, usize)>) {
    let mut bundles: HashMap<Vec<usize>, Vec<usize>> = HashMap::new();
    for (b, ps) in kept_preds.iter().enumerate() {
        if ps.len() >= BUNDLE_MIN {
            bundles.entry(ps.clone()).or_default().push(b);
        }
    }
    let mut junctions: Vec<Junction> = Vec::new();
    let mut bundled = vec![false; n];
    let mut sets: Vec<(Vec<usize>, Vec<usize>)> = bundles
        .into_iter()
        .filter(|(_, to)| to.len() >= 2)
        .collect();
    sets.sort();
    for (from, to) in sets {
        let after_layer = from.iter().map(|&a| depth[a]).max().unwrap_or(0);
        let rows: Vec<f64> = from.iter().chain(&to).map(|&i| row[i]).collect();
        let mid = rows.iter().sum::<f64>() / rows.len() as f64;
        for &b in &to {
            bundled[b] = true;
        }
        junctions.push(Junction {
            after_layer,
            row: mid,
            from,
            to,
        });
    }
    let mut drawn: Vec<(usize, usize)> = Vec::new();
    for (b, ps) in kept_preds.iter().enumerate() {
        if !bundled[b] {
            drawn.extend(ps.iter().map(|&a| (a, b)));
        }
    }
    (junctions, drawn)
}

/// Crossings between consecutive layers of the drawn edges (a measure of
/// the layout, for tests).
#[cfg(test)]
pub(crate) fn crossings(l: &Layout) -> usize {
    let mut by_gap: HashMap<usize, Vec<(f64, f64)>> = HashMap::new();
    for &(a, b) in &l.edges {
        let (pa, pb) = (l.places[a], l.places[b]);
        if pb.layer == pa.layer + 1 {
            by_gap.entry(pa.layer).or_default().push((pa.row, pb.row));
        }
    }
    let mut n = 0;
    for v in by_gap.values() {
        for i in 0..v.len() {
            for j in i + 1..v.len() {
                let (a, b) = (v[i], v[j]);
                if (a.0 - b.0) * (a.1 - b.1) < 0.0 {
                    n += 1;
                }
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_follow_the_longest_path_and_implied_edges_go() {
        // 0 → 1 → 2, and 0 → 2 (implied by the chain).
        let l = layout(3, &[(0, 1), (1, 2), (0, 2)], &[0, 0, 0]);
        let layers: Vec<usize> = l.places.iter().map(|p| p.layer).collect();
        assert_eq!(layers, vec![0, 1, 2]);
        assert_eq!(l.layers, 3);
        let mut e = l.edges.clone();
        e.sort();
        assert_eq!(e, vec![(0, 1), (1, 2)]);
        // A chain runs straight.
        assert!(l.places.iter().all(|p| p.row == 0.0));
    }

    #[test]
    fn a_batch_barrier_meets_at_one_junction() {
        // 0..4 then 4..8, every one of the second batch waiting for every
        // one of the first.
        let mut edges = Vec::new();
        for a in 0..4 {
            for b in 4..8 {
                edges.push((a, b));
            }
        }
        let l = layout(8, &edges, &[0; 8]);
        assert!(l.edges.is_empty(), "{:?}", l.edges);
        assert_eq!(l.junctions.len(), 1);
        let j = &l.junctions[0];
        assert_eq!((j.from.len(), j.to.len(), j.after_layer), (4, 4, 0));
    }

    #[test]
    fn sweeps_untangle_a_crossed_pair() {
        // Initial order puts 0 above 1, but 0's child 3 is listed below
        // 1's child 2: the sweeps swap them.
        let l = layout(4, &[(0, 3), (1, 2)], &[0, 0, 0, 1]);
        assert_eq!(crossings(&l), 0);
        assert!(l.places[3].row < l.places[2].row);
    }

    #[test]
    fn two_thousand_stories_lay_out_in_bounded_size() {
        // Ten batches of 200, each story also waiting for one story of its
        // own batch: the shape of a large backlog.
        let n = 2000;
        let mut edges = Vec::new();
        for b in 200..n {
            let batch = b / 200;
            for a in (batch - 1) * 200..batch * 200 {
                edges.push((a, b));
            }
            if b % 200 > 0 && b % 3 == 0 {
                edges.push((b - 1, b));
            }
        }
        let group: Vec<usize> = (0..n).map(|i| i / 50).collect();
        let l = layout(n, &edges, &group);
        assert_eq!(l.places.len(), n);
        let lines: usize = l.edges.len()
            + l.junctions
                .iter()
                .map(|j| j.from.len() + j.to.len())
                .sum::<usize>();
        assert!(lines < 10 * n, "{lines} lines to draw");
    }
}
