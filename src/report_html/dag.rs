//! The story graph: nodes placed by `layout`, coloured by status and
//! outlined by epic; a batch barrier of many stories drawn as one bar.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{clip, esc, PageInput};
use crate::layout::{layout, Layout};
use crate::stats::epic_of;

/// Fan lines into and out of a junction above which a bar is drawn instead.
const BARRIER_FAN: usize = 24;

/// Epic colours (the DAG's node outlines), by epic rank.
pub(super) const EPIC_HUES: [&str; 10] = [
    "#3b6fd1", "#2e9d57", "#c2410c", "#7e3fb8", "#0f8b8d", "#b8326b", "#8a6d1d", "#4b5563",
    "#1d7fb8", "#9a3412",
];

pub(super) fn dag(p: &PageInput, o: &mut String) {
    o.push_str("<h2>Story graph</h2>");
    let n = p.stories.len();
    let mut epics: Vec<&str> = p.stories.iter().map(|s| epic_of(&s.id)).collect();
    epics.dedup();
    let mut rank: BTreeMap<&str, usize> = BTreeMap::new();
    for e in &epics {
        let next = rank.len();
        rank.entry(e).or_insert(next);
    }
    let group: Vec<usize> = p.stories.iter().map(|s| rank[epic_of(&s.id)]).collect();
    let l: Layout = layout(n, &p.edges, &group);
    let (col_w, node_w, row_h, node_h, pad) = (130.0, 96.0, 26.0, 20.0, 10.0);
    let width = pad * 2.0 + l.layers.max(1) as f64 * col_w;
    let height = pad * 2.0 + l.rows.max(1.0) * row_h;
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in &p.stories {
        *counts.entry(s.status).or_default() += 1;
    }
    let parts: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    let _ = write!(
        o,
        "<div class=\"legend\"><span><i style=\"background:#cdebd7\"></i>done</span>\
         <span><i style=\"background:#cfe0fb\"></i>running</span>\
         <span><i style=\"background:#dff0ff\"></i>landing</span>\
         <span><i style=\"background:#f6c9c9\"></i>failed</span>\
         <span><i style=\"background:#e4e6ea\"></i>blocked</span>\
         <span><i style=\"background:#fff;border:1px solid #999\"></i>pending</span>\
         <span><i style=\"background:#8d96a3;width:4px\"></i>batch barrier</span>\
         <span>outline colour: epic · columns: dependency depth · {}</span></div>\
         <div class=\"scroll\"><svg id=\"dag\" xmlns=\"http://www.w3.org/2000/svg\" \
         width=\"{width:.0}\" height=\"{height:.0}\">",
        esc(&parts.join(", "))
    );
    let nx = |i: usize| pad + l.places[i].layer as f64 * col_w;
    let ny = |i: usize| pad + l.places[i].row * row_h;
    let mut d = String::new();
    let curve = |d: &mut String, x1: f64, y1: f64, x2: f64, y2: f64| {
        let c = ((x2 - x1) / 2.0).max(10.0);
        let _ = write!(
            d,
            "M{x1:.0} {y1:.0}C{:.0} {y1:.0} {:.0} {y2:.0} {x2:.0} {y2:.0}",
            x1 + c,
            x2 - c
        );
    };
    for &(a, b) in &l.edges {
        curve(
            &mut d,
            nx(a) + node_w,
            ny(a) + node_h / 2.0,
            nx(b),
            ny(b) + node_h / 2.0,
        );
    }
    let mut dots = String::new();
    for j in &l.junctions {
        let jx = pad + j.after_layer as f64 * col_w + node_w + (col_w - node_w) / 2.0;
        let jy = pad + j.row * row_h + node_h / 2.0;
        if j.from.len() + j.to.len() > BARRIER_FAN {
            // A batch barrier of hundreds of stories: one bar says it
            // better than hundreds of converging lines.
            let rows = j.from.iter().chain(&j.to).map(|&i| ny(i));
            let (top, bottom) = rows.fold((f64::MAX, f64::MIN), |(a, b), y| (a.min(y), b.max(y)));
            let _ = write!(
                dots,
                "<rect class=\"barrier\" x=\"{:.0}\" y=\"{top:.0}\" width=\"4\" height=\"{:.0}\">\
                 <title>barrier: the {} stories after it wait for the {} before it</title></rect>",
                jx - 2.0,
                bottom - top + node_h,
                j.to.len(),
                j.from.len()
            );
            continue;
        }
        for &a in &j.from {
            curve(&mut d, nx(a) + node_w, ny(a) + node_h / 2.0, jx, jy);
        }
        for &b in &j.to {
            curve(&mut d, jx, jy, nx(b), ny(b) + node_h / 2.0);
        }
        let _ = write!(
            dots,
            "<circle class=\"junction\" cx=\"{jx:.0}\" cy=\"{jy:.0}\" r=\"3\"><title>{} stories wait for {} stories</title></circle>",
            j.to.len(),
            j.from.len()
        );
    }
    let _ = write!(o, "<path class=\"edges\" d=\"{d}\"/>{dots}");
    for (i, s) in p.stories.iter().enumerate() {
        let (x, y) = (nx(i), ny(i));
        let _ = write!(
            o,
            "<a class=\"node s-{} e{}\" href=\"#s-{id}\" data-id=\"{id}\"><rect x=\"{x:.0}\" y=\"{y:.0}\" width=\"{node_w}\" \
             height=\"{node_h}\" rx=\"3\"/><text x=\"{:.0}\" y=\"{:.0}\">{}</text><title>{id} {} ({})</title></a>",
            s.status,
            group[i] % EPIC_HUES.len(),
            x + 5.0,
            y + 14.0,
            esc(&clip(&s.id, 14)),
            esc(&s.title),
            s.status,
            id = esc(&s.id),
        );
    }
    o.push_str("</svg></div>\n");
}
