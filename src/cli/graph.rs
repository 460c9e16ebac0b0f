//! `ralph stories` and `ralph graph`: each story with its status.

use std::io::Write;
use std::path::Path;

use super::args::GraphFormat;
use super::load;
use crate::error::EXIT_OK;
use crate::report::{self, GraphNode};
use crate::ui;

pub(super) fn cmd_stories(root: &Path) -> anyhow::Result<i32> {
    let (project, state) = load(root)?;
    let sched = crate::status::view(&project, &state);
    let on = ui::stdout_colors();
    let mut out = std::io::stdout().lock();
    for (i, s) in project.backlog.stories.iter().enumerate() {
        let line = format!("[{}] {} | {}", sched.nodes[i].label(), s.id, s.title);
        writeln!(out, "{}", ui::paint_tag(&line, on))?;
    }
    Ok(EXIT_OK)
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
