//! The timeline: a Gantt bar per agent run, one row per slot and one for
//! the merge queue (landings, conflicts), pauses and signals over them.

use std::fmt::Write as _;

use super::{clip, esc, PageInput};
use crate::report::short_count;
use crate::runlog::{Ev, PauseWhy};
use crate::state::Outcome;
use crate::stats::{self, bars, pauses};
use crate::timefmt::human_duration;

fn verdict_class(v: Option<Outcome>) -> String {
    match v {
        None => "v-cut".into(),
        Some(o) => format!("v-{}", stats::outcome_name(o).replace('_', "-")),
    }
}

/// A tick step (seconds) that puts ticks about `px` pixels apart.
fn tick_step(pps: f64, px: f64) -> f64 {
    const STEPS: [f64; 14] = [
        1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0,
        43200.0,
    ];
    STEPS
        .iter()
        .copied()
        .find(|s| s * pps >= px)
        .unwrap_or(86400.0)
}

/// Where things go on the timeline: seconds to pixels, the rows.
struct Scale {
    t0: f64,
    t1: f64,
    /// Pixels per second.
    pps: f64,
    /// The row labels' column.
    left: f64,
    row_h: f64,
    bar_h: f64,
    /// The time axis' height, above the rows.
    axis: f64,
    /// The slots, a row each; the merge queue's row after them.
    jobs: usize,
    rows: usize,
    width: f64,
    height: f64,
}

impl Scale {
    fn x(&self, t: f64) -> f64 {
        self.left + (t - self.t0) * self.pps
    }
}

pub(super) fn timeline(p: &PageInput, o: &mut String) {
    o.push_str("<h2>Timeline</h2>");
    let Some(run) = &p.run else {
        o.push_str("<p class=\"meta\">No run records yet.</p><div id=\"timeline\"></div>\n");
        return;
    };
    let bars = bars(run);
    let sc = scale(run, &bars);
    let (width, height) = (sc.width, sc.height);
    let _ = write!(
        o,
        "<div class=\"legend\"><span><i class=\"v-done\" style=\"background:#2e9d57\"></i>done</span>\
         <span><i style=\"background:#58b97c\"></i>tentative</span>\
         <span><i style=\"background:#d64545\"></i>failed</span>\
         <span><i style=\"background:#e08a1e\"></i>timeout</span>\
         <span><i style=\"background:#a52a2a\"></i>error</span>\
         <span><i style=\"background:#8e6bd6\"></i>usage limit</span>\
         <span><i style=\"background:#9aa0a6\"></i>interrupted</span>\
         <span><i style=\"background:#7a5c3e\"></i>fault</span>\
         <span><i style=\"background:#5b8def\"></i>cut off</span>\
         <span><i style=\"background:#fff;border:1px dashed #1d2330\"></i>retry</span>\
         <span><i style=\"background:#fff;border:2px solid #1d2330\"></i>fix-up</span>\
         <span><i style=\"background:#9fd3b0\"></i>landing</span>\
         <span><i style=\"background:#d9480f\"></i>conflict</span>\
         <span><i style=\"background:#ffe9a8\"></i>paused</span></div>\
         <div class=\"scroll\"><svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" \
         width=\"{width:.0}\" height=\"{height:.0}\">"
    );
    time_axis(o, &sc, p.offset);
    row_labels(o, &sc);
    pause_bands(o, &sc, run);
    attempt_bars(o, &sc, &bars);
    merge_queue(o, &sc, run);
    o.push_str("</svg></div>\n");
}

/// The scale the run's records and bars need: wide enough that most bars
/// are visible (a long run scrolls), a row per slot and the merge queue.
fn scale(run: &crate::runlog::RunData, bars: &[crate::stats::Bar]) -> Scale {
    let t0 = run.records.first().map(|r| r.t).unwrap_or(0.0);
    let t1 = run
        .records
        .iter()
        .rev()
        .find(|r| !matches!(r.ev, Ev::Recovered { .. } | Ev::Unknown))
        .map(|r| r.t)
        .unwrap_or(t0);
    let wall = (t1 - t0).max(1.0);
    let jobs = run
        .records
        .iter()
        .find_map(|r| match &r.ev {
            Ev::RunStart { jobs, .. } => Some(*jobs),
            _ => None,
        })
        .unwrap_or(1)
        .max(bars.iter().map(|b| b.slot + 1).max().unwrap_or(1));
    let mut durs: Vec<f64> = bars.iter().map(|b| (b.end - b.start).max(0.1)).collect();
    durs.sort_by(f64::total_cmp);
    let d10 = durs.get(durs.len() / 10).copied().unwrap_or(wall);
    let pps = (1000.0 / wall).max((3.0 / d10).min(40000.0 / wall));
    let (left, row_h, bar_h) = (96.0, 22.0, 16.0);
    let width = left + wall * pps + 20.0;
    let rows = jobs + 1;
    let axis = 20.0;
    let height = axis + rows as f64 * row_h + 4.0;
    Scale {
        t0,
        t1,
        pps,
        left,
        row_h,
        bar_h,
        axis,
        jobs,
        rows,
        width,
        height,
    }
}

/// The time axis, in local clock times, with a grid line at each tick.
fn time_axis(o: &mut String, sc: &Scale, offset: i32) {
    let (t0, t1, pps, axis, height) = (sc.t0, sc.t1, sc.pps, sc.axis, sc.height);
    let x = |t: f64| sc.x(t);
    let step = tick_step(pps, 90.0);
    let first = ((t0 + f64::from(offset)) / step).ceil() * step - f64::from(offset);
    let mut t = first;
    while t <= t1 {
        let xx = x(t);
        let iso = crate::timefmt::iso(t as i64 + i64::from(offset));
        let label = if step < 60.0 {
            &iso[11..19]
        } else {
            &iso[11..16]
        };
        let _ = write!(
            o,
            "<line class=\"grid\" x1=\"{xx:.1}\" y1=\"{axis}\" x2=\"{xx:.1}\" y2=\"{height:.0}\"/>\
             <text x=\"{:.1}\" y=\"13\">{label}</text>",
            xx + 2.0
        );
        t += step;
    }
}

/// Each row's label and the line under it.
fn row_labels(o: &mut String, sc: &Scale) {
    let (rows, jobs, row_h, axis, width) = (sc.rows, sc.jobs, sc.row_h, sc.axis, sc.width);
    for r in 0..rows {
        let y = axis + r as f64 * row_h;
        let label = if r < jobs {
            format!("slot {r}")
        } else {
            "merge queue".into()
        };
        let _ = write!(
            o,
            "<line class=\"rowsep\" x1=\"0\" y1=\"{:.1}\" x2=\"{width:.0}\" y2=\"{:.1}\"/>\
             <text x=\"4\" y=\"{:.1}\">{label}</text>",
            y + row_h,
            y + row_h,
            y + 15.0
        );
    }
}

/// Pauses, as bands over every row.
fn pause_bands(o: &mut String, sc: &Scale, run: &crate::runlog::RunData) {
    let (pps, axis, rows, row_h) = (sc.pps, sc.axis, sc.rows, sc.row_h);
    let x = |t: f64| sc.x(t);
    for (s, e, why) in pauses(run) {
        let _ = write!(
            o,
            "<rect class=\"pause p-{}\" x=\"{:.1}\" y=\"{axis}\" width=\"{:.1}\" height=\"{:.0}\">\
             <title>paused ({}): {}</title></rect>",
            why.name().replace('_', "-"),
            x(s),
            ((e - s) * pps).max(1.0),
            rows as f64 * row_h,
            match why {
                PauseWhy::UsageLimit => "usage limit",
                PauseWhy::Fault => "fault outside the story",
                PauseWhy::Budget => "budget spent",
            },
            human_duration(e - s)
        );
    }
}

/// A bar per agent run, in its slot's row.
fn attempt_bars(o: &mut String, sc: &Scale, bars: &[crate::stats::Bar]) {
    let (pps, axis, row_h, bar_h) = (sc.pps, sc.axis, sc.row_h, sc.bar_h);
    let x = |t: f64| sc.x(t);
    for b in bars {
        let y = axis + b.slot as f64 * row_h + (row_h - bar_h) / 2.0;
        let w = ((b.end - b.start) * pps).max(1.0);
        let verdict = b
            .verdict
            .map(stats::outcome_name)
            .unwrap_or_else(|| "cut off by the run's end".into());
        let _ = write!(
            o,
            "<rect class=\"bar {} k-{}\" x=\"{:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{bar_h}\">\
             <title>{} attempt {} ({}, {}) · {verdict} · {} · {} tokens · ${:.2}{}</title></rect>",
            verdict_class(b.verdict),
            b.kind.name(),
            x(b.start),
            esc(&b.story),
            b.attempt,
            b.kind.name(),
            esc(&b.agent),
            human_duration(b.end - b.start),
            short_count(b.tokens),
            b.cost_usd,
            b.reason
                .as_deref()
                .map(|r| format!(" · {}", esc(&clip(r, 200))))
                .unwrap_or_default()
        );
        if w > 8.0 * b.story.len() as f64 + 6.0 {
            let _ = write!(
                o,
                "<text x=\"{:.1}\" y=\"{:.1}\" style=\"fill:#fff\">{}</text>",
                x(b.start) + 3.0,
                y + 12.0,
                esc(&b.story)
            );
        }
    }
}

/// The merge queue's row: landings, conflicts; signals over every row.
fn merge_queue(o: &mut String, sc: &Scale, run: &crate::runlog::RunData) {
    let (pps, axis, height, jobs, row_h) = (sc.pps, sc.axis, sc.height, sc.jobs, sc.row_h);
    let x = |t: f64| sc.x(t);
    let qy = axis + jobs as f64 * row_h;
    let mut landing: Option<(f64, String)> = None;
    for r in &run.records {
        match &r.ev {
            Ev::LandStart { story, .. } => landing = Some((r.t, story.clone())),
            Ev::Landed { story, commit, .. } => {
                land_bar(o, &x, pps, qy, &mut landing, r.t, story, "l-landed", commit)
            }
            Ev::Conflict { story, paths, .. } => {
                land_bar(o, &x, pps, qy, &mut landing, r.t, story, "l-conflict", "");
                let cx = x(r.t);
                let _ = write!(
                    o,
                    "<path class=\"conflict\" d=\"M{cx:.1} {:.1}l5 9h-10z\"><title>conflict: {} in {}</title></path>",
                    qy + 6.0,
                    esc(story),
                    esc(&clip(&paths.join(", "), 200))
                );
            }
            Ev::LandEnd { story, result, .. } => {
                let class = if result == "validation_failed" {
                    "l-fail"
                } else {
                    "l-other"
                };
                land_bar(o, &x, pps, qy, &mut landing, r.t, story, class, result);
            }
            Ev::Signal { signal } => {
                let sx = x(r.t);
                let _ = write!(
                    o,
                    "<line class=\"signal\" x1=\"{sx:.1}\" y1=\"{axis}\" x2=\"{sx:.1}\" y2=\"{height:.0}\">\
                     <title>{} received</title></line>",
                    esc(signal)
                );
            }
            _ => {}
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn land_bar(
    o: &mut String,
    x: &dyn Fn(f64) -> f64,
    pps: f64,
    qy: f64,
    landing: &mut Option<(f64, String)>,
    t: f64,
    story: &str,
    class: &str,
    what: &str,
) {
    let start = match landing.take() {
        Some((s, id)) if id == story => s,
        _ => t,
    };
    let _ = write!(
        o,
        "<rect class=\"land {class}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"16\">\
         <title>{} landing · {} · {}</title></rect>",
        x(start),
        qy + 3.0,
        ((t - start) * pps).max(2.0),
        esc(story),
        esc(&clip(what, 40)),
        human_duration(t - start)
    );
}
