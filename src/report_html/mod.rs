//! `ralph report`: one self-contained HTML page (no network, no external
//! script or font) with the run's totals and waste, a Gantt timeline per
//! slot (SVG), the story DAG with statuses (SVG, laid out by `layout`) and
//! a per-story table. Lean enough for 2,000 stories: one element per bar
//! and per node, every edge in one path, wide drawings scroll.
//!
//! `render` is pure over a plain `PageInput` (`model.rs`: what the caller
//! or `load` gathers — no run machinery); `write` puts the page in a file.
//! One file per part of the page: `timeline.rs`, `dag.rs`, `table.rs`.

mod dag;
mod model;
mod table;
mod timeline;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::report::short_count;
use crate::state::AttemptKind;
use crate::stats::{self, kinds_text, Figures};
use crate::timefmt::human_duration;

pub(crate) use model::{load, PageInput};
// `status --json` reads the rows from here until `cli` asks `status` itself.

pub(super) fn esc(s: &str) -> String {
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

pub(super) fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut c: String = s.chars().take(n.saturating_sub(1)).collect();
        c.push('…');
        c
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

/// The story graph alone (legend and SVG, each node a `data-id`), with the
/// style its colours need: the live web view draws the report's graph.
pub(crate) fn dag_figure(
    stories: &[(&str, &str, &'static str)],
    edges: &[(usize, usize)],
) -> String {
    let p = PageInput {
        stories: stories
            .iter()
            .map(|&(id, title, status)| crate::status::StoryRow {
                id: id.to_string(),
                title: title.to_string(),
                status,
                ..Default::default()
            })
            .collect(),
        edges: edges.to_vec(),
        ..PageInput::default()
    };
    let mut o = String::with_capacity(4096 + stories.len() * 300);
    o.push_str("<style>");
    for (i, hue) in dag::EPIC_HUES.iter().enumerate() {
        let _ = write!(o, ".e{i} rect{{stroke:{hue}}}");
    }
    o.push_str("</style>");
    dag::dag(&p, &mut o);
    o
}

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
    for (i, hue) in dag::EPIC_HUES.iter().enumerate() {
        let _ = write!(o, ".e{i} rect{{stroke:{hue}}}");
    }
    o.push_str("</style></head><body>\n");
    header(p, &mut o);
    o.push_str("<main>\n");
    totals(p, &mut o);
    timeline::timeline(p, &mut o);
    dag::dag(p, &mut o);
    table::table(p, &mut o);
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
    let c = &f.costs;
    card(
        o,
        crate::spend::money(f.cost_usd, c.unknown > 0, c.unknown < f.attempts),
        "cost",
    );
    card(
        o,
        match c.per_landed_story() {
            Some(p) => format!("${p:.2}"),
            None if c.landed > 0 => "unknown".into(),
            None => "–".into(),
        },
        "spend per landed story",
    );
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
    if let Some(share) = c.unlanded_share() {
        let _ = write!(
            o,
            "<div class=\"meta\">spent on stories that never landed: {:.0}%</div>",
            share * 100.0
        );
    }
    if !c.per_model.is_empty() {
        let _ = write!(
            o,
            "<div class=\"meta\">cost by model: {}</div>",
            esc(&crate::spend::bucket_text(&c.per_model))
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

/// The default place of the report: `.ralph/report.html`.
pub(crate) fn default_path(root: &Path) -> PathBuf {
    crate::paths::report(root)
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
    use crate::stats::{sample_run, Stats, Which};
    use crate::status::StoryRow;

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
