//! `ralph stories` and `ralph graph`: each story with its status.

use std::io::Write;
use std::path::Path;

use super::args::GraphFormat;
use super::load;
use crate::error::EXIT_OK;
use crate::report::{self, GraphNode};
use crate::schedule::StoryState;
use crate::ui;

pub(super) fn cmd_stories(root: &Path) -> anyhow::Result<i32> {
    let (project, state) = load(root)?;
    let sched = crate::status::view(&project, &state);
    let on = ui::stdout_colors();
    let mut out = std::io::stdout().lock();
    for (i, s) in project.backlog.stories.iter().enumerate() {
        let held = state.held.contains(&s.id);
        let line = story_line(sched.nodes[i], &s.id, &s.title, held);
        writeln!(out, "{}", ui::paint_tag(&line, on))?;
    }
    Ok(EXIT_OK)
}

/// One line of `ralph stories`: Ralph v2's `[tag] id | title` with the
/// tag the status word `status --json` and `graph` say (issue 33: it said
/// `fail`/`blkd` where they say `failed`/`blocked`; `[done]` is as in v2),
/// and for a story `ralph hold` holds, the mark that says why it does not
/// start (after the title).
fn story_line(node: StoryState, id: &str, title: &str, held: bool) -> String {
    let mut line = format!("[{}] {id} | {title}", node.word());
    if held {
        line.push_str(&format!(" ({})", report::HELD));
    }
    line
}

pub(super) fn cmd_graph(root: &Path, format: GraphFormat) -> anyhow::Result<i32> {
    let (project, state) = load(root)?;
    let sched = crate::status::view(&project, &state);
    let nodes: Vec<GraphNode> = project
        .backlog
        .stories
        .iter()
        .enumerate()
        .map(|(i, s)| GraphNode {
            id: &s.id,
            title: &s.title,
            node: sched.nodes[i],
            held: state.held.contains(&s.id),
        })
        .collect();
    let edges: Vec<(usize, usize)> = project
        .dag
        .graph
        .raw_edges()
        .iter()
        .map(|e| (e.source().index(), e.target().index()))
        .collect();
    let format = match format {
        GraphFormat::Dot => report::GraphStyle::Dot,
        GraphFormat::Mermaid => report::GraphStyle::Mermaid,
        GraphFormat::Text => report::GraphStyle::Text,
    };
    let text = report::render_graph(&nodes, &edges, &project.dag.topo_order(), format);
    if format == report::GraphStyle::Text && ui::stdout_colors() {
        for line in text.lines() {
            println!("{}", ui::paint_tag(line, true));
        }
    } else {
        print!("{text}");
    }
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_story_line_says_so_after_its_title() {
        assert_eq!(
            story_line(StoryState::Pending, "1.2", "Parser", true),
            "[pending] 1.2 | Parser (held)"
        );
        assert_eq!(
            story_line(StoryState::Running, "1.3", "Lexer", true),
            "[running] 1.3 | Lexer (held)"
        );
        assert_eq!(
            story_line(StoryState::Done, "1.1", "Seed", false),
            "[done] 1.1 | Seed"
        );
        assert_eq!(
            story_line(StoryState::Blocked, "1.4", "Emit", false),
            "[blocked] 1.4 | Emit"
        );
    }
}
