//! The per-story table (sortable and filtered by the page's script).

use std::fmt::Write as _;

use super::{clip, esc, PageInput};
use crate::report::short_count;
use crate::stats::kinds_text;
use crate::status::StoryRow;
use crate::timefmt::human_duration;

pub(super) fn table(p: &PageInput, o: &mut String) {
    o.push_str(
        "<h2>Stories</h2><input id=\"filter\" placeholder=\"filter: ID, title, status, error…\">\
         <div class=\"scroll\"><table id=\"stories\"><thead><tr><th>ID</th><th>title</th>\
         <th>status</th><th>est.</th><th>agent runs</th><th>by kind</th><th>tokens</th>\
         <th>cost</th><th>agent time</th><th>agent</th><th>model</th><th>landed</th><th>last error</th>\
         </tr></thead><tbody>\n",
    );
    for s in &p.stories {
        let _ = writeln!(
            o,
            "<tr id=\"s-{id}\"><td>{id}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"n\" data-v=\"{}\">{}</td><td>{}</td><td class=\"n\" data-v=\"{}\">{}</td>\
             <td class=\"n\" data-v=\"{:.4}\">{}</td><td class=\"n\" data-v=\"{:.0}\">{}</td>\
             <td>{}</td><td title=\"{}\">{}</td><td><code>{}</code></td><td class=\"err\" title=\"{err}\">{err}</td></tr>",
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
            crate::spend::money(s.cost_usd, s.cost_unknown, s.cost_unknown && s.cost_usd > 0.0),
            s.secs,
            if s.secs > 0.0 {
                human_duration(s.secs)
            } else {
                String::new()
            },
            esc(s.agent.as_deref().unwrap_or("")),
            esc(&s
                .models
                .iter()
                .map(|m| m.as_deref().unwrap_or("-"))
                .collect::<Vec<_>>()
                .join(" → ")),
            esc(s.model.as_deref().unwrap_or("")),
            esc(&s
                .landed_commit
                .as_deref()
                .map(|c| c.chars().take(10).collect::<String>())
                .unwrap_or_default()),
            id = esc(&s.id),
            err = esc(&clip(&row_notes(s), 300)),
        );
    }
    o.push_str("</tbody></table></div>\n");
}

/// A story's last error, and what the trust gates found on it.
fn row_notes(s: &StoryRow) -> String {
    let mut parts: Vec<String> = s.last_error.iter().cloned().collect();
    if let Some(g) = &s.gate {
        let found: Vec<String> = g.findings.iter().map(|f| f.line_text()).collect();
        parts.push(format!("gates {}: {}", g.decision.name(), found.join("; ")));
    }
    if !s.reviews.is_empty() {
        parts.push(format!("review: {}", s.reviews.join(" → ")));
    }
    parts.join(" · ")
}
