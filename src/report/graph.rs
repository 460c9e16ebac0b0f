//! `ralph graph`'s forms of the DAG: DOT, Mermaid and text, each story
//! with its status word (and `held` when a person holds it).

use crate::schedule::StoryState;

/// One story of `ralph graph`.
#[derive(Debug, Clone)]
pub(crate) struct GraphNode<'a> {
    pub(crate) id: &'a str,
    pub(crate) title: &'a str,
    pub(crate) node: StoryState,
    /// Held by `ralph hold ID` (or `stop`): its status alone does not say
    /// why it does not start.
    pub(crate) held: bool,
}

/// The words that mark a held story in `stories` and `graph`.
pub(crate) const HELD: &str = "held";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GraphStyle {
    Dot,
    Mermaid,
    Text,
}

/// Renders the DAG; `edges` are `(waited for, waiting)` index pairs and
/// `order` a topological order (used by the text form).
pub(crate) fn render_graph(
    nodes: &[GraphNode<'_>],
    edges: &[(usize, usize)],
    order: &[usize],
    style: GraphStyle,
) -> String {
    let quote = |s: &str| s.replace('"', "'");
    let mut out = String::new();
    match style {
        GraphStyle::Dot => {
            out.push_str("digraph stories {\n  rankdir=LR;\n");
            for n in nodes {
                let color = match n.node {
                    StoryState::Done => "palegreen",
                    StoryState::Failed => "salmon",
                    StoryState::Blocked => "lightgrey",
                    StoryState::Running | StoryState::Landing => "lightblue",
                    StoryState::Review => "khaki",
                    StoryState::Pending | StoryState::Excluded => "white",
                };
                // A held story's box is dashed, and its label says so.
                let (mark, style) = match n.held {
                    true => (format!(" {HELD}"), "\"filled,dashed\""),
                    false => (String::new(), "filled"),
                };
                out.push_str(&format!(
                    "  \"{}\" [label=\"{}\\n{}\\n[{}]{mark}\", style={style}, fillcolor={color}];\n",
                    n.id,
                    n.id,
                    quote(n.title),
                    n.node.word()
                ));
            }
            for &(a, b) in edges {
                out.push_str(&format!("  \"{}\" -> \"{}\";\n", nodes[a].id, nodes[b].id));
            }
            out.push_str("}\n");
        }
        GraphStyle::Mermaid => {
            out.push_str("graph LR\n");
            for (i, n) in nodes.iter().enumerate() {
                out.push_str(&format!(
                    "  s{i}[\"{} {} ({}{})\"]\n",
                    n.id,
                    quote(n.title),
                    n.node.word(),
                    if n.held {
                        format!(", {HELD}")
                    } else {
                        String::new()
                    }
                ));
            }
            for &(a, b) in edges {
                out.push_str(&format!("  s{a} --> s{b}\n"));
            }
        }
        GraphStyle::Text => {
            for &i in order {
                let mut waits: Vec<&str> = edges
                    .iter()
                    .filter(|e| e.1 == i)
                    .map(|e| nodes[e.0].id)
                    .collect();
                waits.sort_unstable();
                let n = &nodes[i];
                out.push_str(&format!("[{}] {} {}", n.node.word(), n.id, n.title));
                if n.held {
                    out.push_str(&format!(" ({HELD})"));
                }
                if !waits.is_empty() {
                    out.push_str(&format!("  <- {}", waits.join(", ")));
                }
                out.push('\n');
            }
        }
    }
    out
}
