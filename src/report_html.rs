//! `ralph report`: one self-contained HTML page (no network, no external
//! script or font) with the run's totals and waste, a Gantt timeline per
//! slot (SVG), the story DAG with statuses (SVG, laid out by `layout`) and
//! a per-story table. Lean enough for 2,000 stories: one element per bar
//! and per node, every edge in one path, wide drawings scroll.
//!
//! `render` is pure; `load` reads the project, the state and the records
//! it draws, and `write` puts the page in a file.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::RalphError;
use crate::layout::{layout, Layout};
use crate::report::short_count;
use crate::runlog::{self, Ev, PauseWhy, RunData};
use crate::schedule::{Node, Scheduler};
use crate::state::{AttemptKind, Outcome};
use crate::stats::{self, bars, epic_of, kinds_text, pauses, Figures, Stats, Which};
use crate::timefmt::human_duration;

/// One row of the per-story table, one node of the DAG, one record of
/// `status --json`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub(crate) struct StoryRow {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) status: &'static str,
    pub(crate) estimation: Option<String>,
    /// Agent runs on record, and the same by kind.
    pub(crate) attempts: usize,
    #[serde(rename = "attempts_by_kind")]
    pub(crate) by_kind: BTreeMap<AttemptKind, usize>,
    /// Failed attempts counted against `loop.max_retries`; conflicts.
    pub(crate) failed_attempts: u32,
    pub(crate) conflicts: u32,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
    #[serde(rename = "duration_secs")]
    pub(crate) secs: f64,
    pub(crate) landed_commit: Option<String>,
    pub(crate) last_error: Option<String>,
    /// The agent of the latest attempt.
    pub(crate) agent: Option<String>,
}

/// Everything the page shows.
#[derive(Debug, Clone, Default)]
pub(crate) struct PageInput {
    pub(crate) project: String,
    /// Unix time the page was made, and the local UTC offset (seconds).
    pub(crate) generated: i64,
    pub(crate) offset: i32,
    /// The run drawn on the timeline (none before the first run).
    pub(crate) run: Option<RunData>,
    /// That run's figures and the lifetime ones.
    pub(crate) stats: Stats,
    pub(crate) stories: Vec<StoryRow>,
    /// `(a, b)`: b waits for a (indices into `stories`).
    pub(crate) edges: Vec<(usize, usize)>,
}

/// The word for a story's status.
pub(crate) fn status_word(node: Node) -> &'static str {
    match node {
        Node::Done => "done",
        Node::Running => "running",
        Node::Landing => "landing",
        Node::Review => "review",
        Node::Failed => "failed",
        Node::Blocked => "blocked",
        Node::Pending | Node::Excluded => "pending",
    }
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut c: String = s.chars().take(n.saturating_sub(1)).collect();
        c.push('…');
        c
    }
}

fn verdict_class(v: Option<Outcome>) -> String {
    match v {
        None => "v-cut".into(),
        Some(o) => format!("v-{}", stats::outcome_name(o).replace('_', "-")),
    }
}

const STYLE: &str = r#"
:root{--fg:#1d2330;--muted:#5d6675;--line:#d9dde3;--bg:#fff;--soft:#f5f6f8}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{padding:16px 24px;border-bottom:1px solid var(--line);background:var(--soft)}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
main{padding:0 24px 40px}
.meta{color:var(--muted)}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(150px,1fr));gap:8px}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 10px;background:#fff}
.card b{display:block;font-size:18px}.card span{color:var(--muted);font-size:12px}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:24px}
@media (max-width:900px){.cols{grid-template-columns:1fr}}
.waste{display:flex;height:14px;border-radius:3px;overflow:hidden;margin:6px 0;background:var(--soft)}
.waste div{height:100%}
.scroll{overflow:auto;border:1px solid var(--line);border-radius:6px;max-height:80vh;background:#fff}
svg text{font:11px system-ui,sans-serif;fill:var(--fg)}
.legend{display:flex;flex-wrap:wrap;gap:10px;margin:6px 0;color:var(--muted);font-size:12px}
.legend i{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:middle;border-radius:2px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:3px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{position:sticky;top:0;background:var(--soft);cursor:pointer;user-select:none}
td.n{text-align:right;font-variant-numeric:tabular-nums}
td.err{color:#8a1c1c;max-width:380px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
tr:target{background:#fff6c9}
input#filter{padding:4px 8px;border:1px solid var(--line);border-radius:4px;width:260px;margin-bottom:6px}
.v-done{fill:#2e9d57}.v-tentative{fill:#58b97c}.v-fail{fill:#d64545}.v-timeout{fill:#e08a1e}
.v-error{fill:#a52a2a}.v-no-signal{fill:#c97070}.v-rate-limited{fill:#8e6bd6}.v-interrupted{fill:#9aa0a6}
.v-fault{fill:#7a5c3e}.v-cut{fill:#5b8def}.v-unknown{fill:#999}
.k-retry{stroke:#1d2330;stroke-dasharray:3 2}.k-fix-up{stroke:#1d2330;stroke-width:2}
.k-redo{stroke:#1d2330;stroke-dasharray:1 2}.k-decomposition,.k-postmortem{stroke:#6b3fa0;stroke-width:2}
.land{fill:#9fd3b0}.land.l-fail{fill:#f0a3a3}.land.l-conflict{fill:#f5c27a}.land.l-other{fill:#c9ccd1}
.conflict{fill:#d9480f}.pause{fill:#ffe9a8;opacity:.6}.pause.p-budget{fill:#f7c6c6}
.signal{stroke:#d64545;stroke-dasharray:4 3}
.grid{stroke:#eceef1}.rowsep{stroke:#e3e6ea}
.node rect{stroke-width:1.5}.node text{pointer-events:none}
.s-done rect{fill:#cdebd7}.s-failed rect{fill:#f6c9c9}.s-blocked rect{fill:#e4e6ea}
.s-running rect{fill:#cfe0fb}.s-landing rect{fill:#dff0ff}.s-pending rect{fill:#fff}
.edges{fill:none;stroke:#a9b0ba;stroke-width:1}.junction{fill:#6b7480}.barrier{fill:#8d96a3}
"#;

const SCRIPT: &str = r#"
(function () {
  var b = document.body;
  b.setAttribute('data-bars', document.querySelectorAll('#timeline .bar').length);
  b.setAttribute('data-nodes', document.querySelectorAll('#dag .node').length);
  var table = document.getElementById('stories');
  if (table) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var heads = table.tHead.rows[0].cells;
    var dir = {};
    Array.prototype.forEach.call(heads, function (th, i) {
      th.addEventListener('click', function () {
        dir[i] = -(dir[i] || -1);
        var key = function (r) {
          var c = r.cells[i];
          var v = c.getAttribute('data-v');
          return v === null ? c.textContent : parseFloat(v);
        };
        rows.sort(function (x, y) {
          var a = key(x), c = key(y);
          return (a < c ? -1 : a > c ? 1 : 0) * dir[i];
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
    var filter = document.getElementById('filter');
    filter.addEventListener('input', function () {
      var q = filter.value.toLowerCase();
      rows.forEach(function (r) {
        r.style.display = r.textContent.toLowerCase().indexOf(q) < 0 ? 'none' : '';
      });
    });
  }
  b.setAttribute('data-ready', '1');
})();
"#;

/// Fan lines into and out of a junction above which a bar is drawn instead.
const BARRIER_FAN: usize = 24;

/// Epic colours (the DAG's node outlines), by epic rank.
const EPIC_HUES: [&str; 10] = [
    "#3b6fd1", "#2e9d57", "#c2410c", "#7e3fb8", "#0f8b8d", "#b8326b", "#8a6d1d", "#4b5563",
    "#1d7fb8", "#9a3412",
];

/// The page.
pub(crate) fn render(p: &PageInput) -> String {
    let mut o = String::with_capacity(64 * 1024 + p.stories.len() * 700);
    let title = match &p.run {
        Some(r) => format!("ralph report · {} · run {}", p.project, r.id),
        None => format!("ralph report · {}", p.project),
    };
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{}</title><style>{STYLE}",
        esc(&title)
    );
    for (i, hue) in EPIC_HUES.iter().enumerate() {
        let _ = write!(o, ".e{i} rect{{stroke:{hue}}}");
    }
    o.push_str("</style></head><body>\n");
    header(p, &mut o);
    o.push_str("<main>\n");
    totals(p, &mut o);
    timeline(p, &mut o);
    dag(p, &mut o);
    table(p, &mut o);
    let _ = write!(o, "</main>\n<script>{SCRIPT}</script>\n</body></html>\n");
    o
}

fn header(p: &PageInput, o: &mut String) {
    let _ = write!(
        o,
        "<header><h1>ralph · {}</h1><div class=\"meta\">",
        esc(&p.project)
    );
    match p.stats.runs.first() {
        Some(r) => {
            let start = r
                .started
                .map(|t| stats::local_stamp(t, p.offset))
                .unwrap_or_default();
            let end = match (r.killed, r.exit_code) {
                (true, _) => "killed (its work was picked up by the next run)".to_string(),
                (false, Some(c)) => format!("exit {c}"),
                (false, None) => "?".into(),
            };
            let _ = write!(
                o,
                "run <b>{}</b> · started {} · {} · {} job{} · agent {} · target {} · {} · \
                 <code>ralph {}</code>",
                esc(&r.id),
                esc(&start),
                human_duration(r.figures.wall_secs),
                r.jobs,
                if r.jobs == 1 { "" } else { "s" },
                esc(&r.agent),
                esc(&r.target),
                esc(&end),
                esc(&r.args.join(" "))
            );
            if let Some(k) = &r.resumes {
                let _ = write!(o, " · picked up the work of run {} (killed)", esc(k));
            }
        }
        None => o.push_str("no run recorded yet: the timeline fills in once `ralph run` runs"),
    }
    let _ = writeln!(
        o,
        "<br>generated {} · {} stories</div></header>",
        esc(&stats::local_stamp(p.generated as f64, p.offset)),
        p.stories.len()
    );
}

fn cards(f: &Figures, o: &mut String) {
    let card = |o: &mut String, value: String, label: &str| {
        let _ = write!(
            o,
            "<div class=\"card\"><b>{}</b><span>{}</span></div>",
            esc(&value),
            esc(label)
        );
    };
    o.push_str("<div class=\"cards\">");
    card(o, f.landed.to_string(), "stories landed");
    card(o, f.attempts.to_string(), "agent runs");
    card(
        o,
        f.runs_per_landed
            .map(|x| format!("{x:.2}"))
            .unwrap_or_else(|| "–".into()),
        "agent runs per landed story",
    );
    card(o, short_count(f.tokens), "tokens");
    card(o, format!("${:.2}", f.cost_usd), "cost");
    card(o, human_duration(f.agent_secs), "agent time");
    card(
        o,
        f.slot_utilisation
            .map(|u| format!("{:.0}%", u * 100.0))
            .unwrap_or_else(|| "–".into()),
        "slots busy",
    );
    card(o, human_duration(f.paused_secs), "paused");
    card(o, f.conflicts.to_string(), "conflicts");
    card(o, human_duration(f.wall_secs), "wall time");
    o.push_str("</div>");
    // The waste: every agent run past a story's first.
    let total: usize = f.by_kind.values().sum();
    if total > 0 {
        o.push_str("<div class=\"waste\" title=\"agent runs by kind\">");
        for (k, n) in &f.by_kind {
            let color = match k {
                AttemptKind::First => "#2e9d57",
                AttemptKind::Fixup => "#e08a1e",
                AttemptKind::Redo => "#c2410c",
                AttemptKind::Decompose => "#7e3fb8",
            };
            let _ = write!(
                o,
                "<div style=\"width:{:.2}%;background:{color}\" title=\"{n} {}\"></div>",
                *n as f64 * 100.0 / total as f64,
                k.name()
            );
        }
        let _ = write!(
            o,
            "</div><div class=\"meta\">agent runs by kind: {}</div>",
            esc(&kinds_text(&f.by_kind))
        );
    }
    let mut rows: Vec<String> = Vec::new();
    for (e, d) in &f.by_estimation {
        rows.push(format!(
            "{}: {} landed, median {}, longest {} ({})",
            esc(e),
            d.stories,
            human_duration(d.median_secs),
            human_duration(d.longest_secs),
            esc(&d.longest_story)
        ));
    }
    if !rows.is_empty() {
        let _ = write!(
            o,
            "<div class=\"meta\">agent time by estimation: {}</div>",
            rows.join(" · ")
        );
    }
    let spend = |m: &BTreeMap<String, stats::Spend>| -> String {
        let mut v: Vec<_> = m.iter().collect();
        v.sort_by(|a, b| b.1.cost_usd.total_cmp(&a.1.cost_usd).then(a.0.cmp(b.0)));
        let mut parts: Vec<String> = v
            .iter()
            .take(12)
            .map(|(k, s)| format!("{} ${:.2}", esc(k), s.cost_usd))
            .collect();
        if v.len() > 12 {
            parts.push(format!("… {} more", v.len() - 12));
        }
        parts.join(" · ")
    };
    if !f.per_epic.is_empty() {
        let _ = write!(
            o,
            "<div class=\"meta\">cost by epic: {}</div>",
            spend(&f.per_epic)
        );
    }
    if !f.per_agent.is_empty() {
        let _ = write!(
            o,
            "<div class=\"meta\">cost by agent: {}</div>",
            spend(&f.per_agent)
        );
    }
    if !f.most_failed.is_empty() {
        let parts: Vec<String> = f
            .most_failed
            .iter()
            .map(|m| {
                format!(
                    "<a href=\"#s-{id}\">{id}</a> ({})",
                    m.counts(),
                    id = esc(&m.story)
                )
            })
            .collect();
        let _ = write!(
            o,
            "<div class=\"meta\">most failed: {}</div>",
            parts.join(" · ")
        );
    }
}

fn totals(p: &PageInput, o: &mut String) {
    o.push_str("<div class=\"cols\">");
    if let Some(r) = p.stats.runs.first() {
        let _ = write!(o, "<section><h2>This run ({})</h2>", esc(&r.id));
        cards(&r.figures, o);
        o.push_str("</section>");
    }
    let _ = write!(
        o,
        "<section><h2>Lifetime ({} run{})</h2>",
        p.stats.lifetime.runs,
        if p.stats.lifetime.runs == 1 { "" } else { "s" }
    );
    cards(&p.stats.lifetime, o);
    o.push_str("</section></div>\n");
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

fn timeline(p: &PageInput, o: &mut String) {
    o.push_str("<h2>Timeline</h2>");
    let Some(run) = &p.run else {
        o.push_str("<p class=\"meta\">No run records yet.</p><div id=\"timeline\"></div>\n");
        return;
    };
    let bars = bars(run);
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
    // Wide enough that most bars are visible; a long run scrolls.
    let mut durs: Vec<f64> = bars.iter().map(|b| (b.end - b.start).max(0.1)).collect();
    durs.sort_by(f64::total_cmp);
    let d10 = durs.get(durs.len() / 10).copied().unwrap_or(wall);
    let pps = (1000.0 / wall).max((3.0 / d10).min(40000.0 / wall));
    let (left, row_h, bar_h) = (96.0, 22.0, 16.0);
    let width = left + wall * pps + 20.0;
    let rows = jobs + 1;
    let axis = 20.0;
    let height = axis + rows as f64 * row_h + 4.0;
    let x = |t: f64| left + (t - t0) * pps;
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
    // Time axis with local clock times.
    let step = tick_step(pps, 90.0);
    let first = ((t0 + f64::from(p.offset)) / step).ceil() * step - f64::from(p.offset);
    let mut t = first;
    while t <= t1 {
        let xx = x(t);
        let iso = crate::timefmt::iso(t as i64 + i64::from(p.offset));
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
    for b in &bars {
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
    // The merge queue: landings, conflicts, stops.
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
    o.push_str("</svg></div>\n");
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

fn dag(p: &PageInput, o: &mut String) {
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
            "<a class=\"node s-{} e{}\" href=\"#s-{id}\"><rect x=\"{x:.0}\" y=\"{y:.0}\" width=\"{node_w}\" \
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

fn table(p: &PageInput, o: &mut String) {
    o.push_str(
        "<h2>Stories</h2><input id=\"filter\" placeholder=\"filter: ID, title, status, error…\">\
         <div class=\"scroll\"><table id=\"stories\"><thead><tr><th>ID</th><th>title</th>\
         <th>status</th><th>est.</th><th>agent runs</th><th>by kind</th><th>tokens</th>\
         <th>cost</th><th>agent time</th><th>agent</th><th>landed</th><th>last error</th>\
         </tr></thead><tbody>\n",
    );
    for s in &p.stories {
        let _ = writeln!(
            o,
            "<tr id=\"s-{id}\"><td>{id}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"n\" data-v=\"{}\">{}</td><td>{}</td><td class=\"n\" data-v=\"{}\">{}</td>\
             <td class=\"n\" data-v=\"{:.4}\">${:.2}</td><td class=\"n\" data-v=\"{:.0}\">{}</td>\
             <td>{}</td><td><code>{}</code></td><td class=\"err\" title=\"{err}\">{err}</td></tr>",
            esc(&s.title),
            s.status,
            esc(s.estimation.as_deref().unwrap_or("")),
            s.attempts,
            s.attempts,
            esc(&if s.attempts == 0 {
                String::new()
            } else {
                kinds_text(&s.by_kind)
            }),
            s.tokens,
            short_count(s.tokens),
            s.cost_usd,
            s.cost_usd,
            s.secs,
            if s.secs > 0.0 {
                human_duration(s.secs)
            } else {
                String::new()
            },
            esc(s.agent.as_deref().unwrap_or("")),
            esc(&s
                .landed_commit
                .as_deref()
                .map(|c| c.chars().take(10).collect::<String>())
                .unwrap_or_default()),
            id = esc(&s.id),
            err = esc(&clip(s.last_error.as_deref().unwrap_or(""), 300)),
        );
    }
    o.push_str("</tbody></table></div>\n");
}

/// The page's input from the project at `root`: the run `run` (default:
/// the latest), its and the lifetime figures, every story's record.
pub(crate) fn load(root: &Path, run: Option<&str>) -> anyhow::Result<PageInput> {
    let project = crate::project::load(root).map_err(RalphError::BadInput)?;
    let state = crate::store::load_state(root).map_err(|p| RalphError::BadInput(vec![p]))?;
    let runs = runlog::read_all(root);
    let which = match run {
        Some(id) => {
            if !runs.iter().any(|r| r.id == id) {
                return Err(RalphError::usage(format!("no run {id} in .ralph/runs/"))
                    .with_hint("`ralph stats --all` lists the recorded runs")
                    .into());
            }
            Which::Run(id.to_string())
        }
        None => Which::Latest,
    };
    let stats = stats::stats(&runs, &which);
    let shown = stats
        .runs
        .first()
        .and_then(|r| runs.iter().find(|x| x.id == r.id).cloned());
    let stories = story_rows(&project, &state, Some(&stats.lifetime));
    let edges = project
        .dag
        .graph
        .raw_edges()
        .iter()
        .map(|e| (e.source().index(), e.target().index()))
        .collect();
    let now = crate::timefmt::now_secs();
    Ok(PageInput {
        project: root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| root.display().to_string()),
        generated: now,
        offset: crate::timefmt::local_offset_secs(now),
        run: shown,
        stats,
        stories,
        edges,
    })
}

/// Every story of the backlog with its status and record; attempts by
/// kind from the run records (`lifetime`) where they cover the state's
/// history, else from the state.
pub(crate) fn story_rows(
    project: &crate::project::Project,
    state: &crate::state::State,
    lifetime: Option<&Figures>,
) -> Vec<StoryRow> {
    let nodes = project
        .backlog
        .stories
        .iter()
        .map(|s| crate::run::story_node(state, s))
        .collect();
    let sched = Scheduler::new(&project.dag, nodes, None);
    project
        .backlog
        .stories
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let rec = state.record(&s.id).cloned().unwrap_or_default();
            let mut by_kind: BTreeMap<AttemptKind, usize> =
                AttemptKind::ALL.iter().map(|k| (*k, 0)).collect();
            let seen = lifetime.and_then(|f| f.per_story.get(&s.id));
            let attempts = match seen {
                Some(f) if f.attempts >= rec.history.len() => {
                    by_kind.extend(f.by_kind.iter().map(|(k, n)| (*k, *n)));
                    f.attempts
                }
                _ => {
                    for h in &rec.history {
                        *by_kind.entry(h.kind()).or_default() += 1;
                    }
                    rec.history.len()
                }
            };
            StoryRow {
                id: s.id.clone(),
                title: s.title.clone(),
                status: status_word(sched.nodes[i]),
                estimation: s.estimation.clone(),
                attempts,
                by_kind,
                failed_attempts: rec.attempts,
                conflicts: rec.conflicts,
                tokens: crate::report::tokens(&rec.usage),
                cost_usd: rec.cost_usd,
                secs: rec.duration_secs,
                landed_commit: rec.landed_commit.clone(),
                last_error: rec.last_error.clone(),
                agent: rec.history.last().and_then(|h| h.agent.clone()),
            }
        })
        .collect()
}

/// The default place of the report: `.ralph/report.html`.
pub(crate) fn default_path(root: &Path) -> PathBuf {
    root.join(".ralph/report.html")
}

/// Writes the report of `run` (default: the latest) to `out`.
pub(crate) fn write(root: &Path, run: Option<&str>, out: &Path) -> anyhow::Result<usize> {
    let page = render(&load(root, run)?);
    crate::store::write_atomic(out, page.as_bytes())
        .and_then(|()| {
            // It shows what agents printed: the user's eyes only.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(out, std::fs::Permissions::from_mode(0o600))
        })
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", out.display()))?;
    Ok(page.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::sample_run;

    fn page(n: usize) -> PageInput {
        let run = sample_run("20261122-115121", 1_795_348_281.0);
        let stats = stats::stats(std::slice::from_ref(&run), &Which::Latest);
        let stories: Vec<StoryRow> = (0..n)
            .map(|i| StoryRow {
                id: format!("{}.{}", i / 5 + 1, i % 5 + 1),
                title: format!("Story <{i}> & \"friends\""),
                status: if i % 3 == 0 { "done" } else { "pending" },
                attempts: 1,
                ..StoryRow::default()
            })
            .collect();
        let edges = (1..n).filter(|i| i % 5 != 0).map(|i| (i - 1, i)).collect();
        PageInput {
            project: "demo".into(),
            generated: 1_795_348_400,
            offset: 0,
            run: Some(run),
            stats,
            stories,
            edges,
        }
    }

    #[test]
    fn one_bar_per_attempt_one_node_per_story_all_escaped() {
        let html = render(&page(10));
        assert_eq!(html.matches("<rect class=\"bar ").count(), 4);
        assert_eq!(html.matches("<a class=\"node ").count(), 10);
        assert_eq!(html.matches("<tr id=\"s-").count(), 10);
        assert!(html.contains("Story &lt;3&gt; &amp; &quot;friends&quot;"));
        assert!(!html.contains("<3>"));
        assert!(html.contains("k-retry"), "the retry is marked");
        assert!(html.contains("class=\"conflict\""));
        assert!(html.contains("class=\"pause p-usage-limit\""));
        // Self-contained: nothing is fetched.
        for bad in ["src=\"http", "href=\"http", "@import", "url("] {
            assert!(!html.contains(bad), "{bad}");
        }
    }

    #[test]
    fn a_page_without_runs_still_draws_the_graph() {
        let mut p = page(3);
        p.run = None;
        p.stats = Stats::default();
        let html = render(&p);
        assert!(html.contains("No run records yet"));
        assert_eq!(html.matches("<a class=\"node ").count(), 3);
    }
}
