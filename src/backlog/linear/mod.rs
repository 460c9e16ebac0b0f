//! Linear as the backlog (issue 37): the issues of team
//! `backlog.linear.team` carrying `backlog.linear.label` are the stories.
//!
//! This file is the mapping (pure: issues → `Backlog`, tracker updates →
//! GraphQL writes and whether they are made); `poll.rs` reads and writes
//! over an `Http`; `client.rs` is the edge that speaks HTTPS with the key;
//! `source.rs` is the `Tracker`. What maps where:
//!
//! | story | issue |
//! |---|---|
//! | ID | the identifier (`ENG-12`) |
//! | title | the title |
//! | spec | `# Story ENG-12: title` and the description |
//! | `depends_on` | `blocks` relations (A blocks B: B waits for A) and sub-issues (a parent waits for its children) |
//! | `agent`, `estimation`, `priority` | `agent:`, `effort:`, `priority:` in a fenced ```` ```ralph ```` block of the description |
//! | done | the state's type is `completed` or `canceled` |

use serde::{Deserialize, Serialize};

use super::tracker::story::{backlog_of, Node, Terms};
use super::{Backlog, Source};
use crate::error::Problem;

pub(crate) mod client;
pub(crate) mod poll;
pub(crate) mod source;

pub(crate) use super::tracker::interface::Update;

/// One issue as the snapshot keeps it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Issue {
    /// Linear's own ID (a UUID), which writes name.
    pub(crate) id: String,
    /// `ENG-12`.
    pub(crate) identifier: String,
    pub(crate) title: String,
    #[serde(default)]
    pub(crate) description: String,
    /// The workflow state's type: `backlog`, `triage`, `unstarted`,
    /// `started`, `completed` or `canceled`.
    pub(crate) state: String,
    #[serde(default)]
    pub(crate) labels: Vec<String>,
    /// Issues this one `blocks` (its relations).
    #[serde(default)]
    pub(crate) blocks: Vec<String>,
    /// Issues that `block` this one (its inverse relations).
    #[serde(default)]
    pub(crate) blocked_by: Vec<String>,
    /// Its sub-issues.
    #[serde(default)]
    pub(crate) children: Vec<String>,
}

impl Issue {
    fn done(&self) -> bool {
        matches!(self.state.as_str(), "completed" | "canceled")
    }
}

/// A workflow state of the team.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct State {
    pub(crate) id: String,
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) position: f64,
}

/// What the writes need of the team: its ID, states and labels.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Team {
    pub(crate) id: String,
    pub(crate) states: Vec<State>,
    /// Label name and ID.
    pub(crate) labels: Vec<(String, String)>,
}

impl Team {
    /// The first state of type `kind`: the one with the lowest position.
    pub(crate) fn first_state(&self, kind: &str) -> Option<&State> {
        self.states
            .iter()
            .filter(|s| s.kind == kind)
            .min_by(|a, b| a.position.total_cmp(&b.position))
    }

    pub(crate) fn label_id(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, id)| id.as_str())
    }
}

/// Linear as last read (`.ralph/tracker/snapshot.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Snapshot {
    /// The team's key.
    pub(crate) team: String,
    pub(crate) label: String,
    pub(crate) issues: Vec<Issue>,
    #[serde(default)]
    pub(crate) team_info: Option<Team>,
    /// Rate limited: nothing is asked of the API before this (Unix seconds).
    #[serde(default)]
    pub(crate) not_before: Option<i64>,
}

impl Snapshot {
    pub(crate) fn issue(&self, identifier: &str) -> Option<&Issue> {
        self.issues.iter().find(|i| i.identifier == identifier)
    }
}

/// Where a problem of issue `identifier` is reported.
pub(crate) fn issue_place(identifier: &str) -> String {
    format!("Linear {identifier}")
}

/// The backlog the snapshot describes: the labelled issues (done ones
/// count as done), by number. Every problem is collected; an issue with
/// one still stands, without what was wrong.
pub(crate) fn to_backlog(snap: &Snapshot) -> (Backlog, Vec<Problem>) {
    // The blocker's relations and the blocked one's inverse relations.
    let nodes: Vec<Node> = snap
        .issues
        .iter()
        .map(|i| Node {
            id: &i.identifier,
            title: &i.title,
            body: &i.description,
            done: i.done(),
            labels: &i.labels,
            blocked_by: &i.blocked_by,
            blocks: &i.blocks,
            children: &i.children,
        })
        .collect();
    let terms = Terms {
        label: &snap.label,
        outside: format!("an issue of team {} labelled {:?}", snap.team, snap.label),
        link: "relation",
        child: "is its sub-issue",
        place: issue_place,
        source: Source::Linear {
            team: snap.team.clone(),
        },
    };
    backlog_of(&nodes, terms)
}

/// One GraphQL write, as queued in `.ralph/tracker/pending.json`. `issue`
/// is the identifier (for people), `id` Linear's own (for the API).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Op {
    /// To the team's first state of type `state`.
    MoveTo {
        issue: String,
        id: String,
        state: String,
    },
    Remark {
        issue: String,
        id: String,
        body: String,
    },
    Label {
        issue: String,
        id: String,
        label: String,
    },
    Unlabel {
        issue: String,
        id: String,
        label: String,
    },
}

impl Op {
    pub(crate) fn issue(&self) -> &str {
        match self {
            Op::MoveTo { issue, .. }
            | Op::Remark { issue, .. }
            | Op::Label { issue, .. }
            | Op::Unlabel { issue, .. } => issue,
        }
    }

    /// A line for `ralph status`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Op::MoveTo { issue, state, .. } => format!("{issue}: move to the first {state} state"),
            Op::Remark { issue, .. } => format!("{issue}: comment"),
            Op::Label { issue, label, .. } => format!("{issue}: add label {label}"),
            Op::Unlabel { issue, label, .. } => format!("{issue}: remove label {label}"),
        }
    }

    /// Two writes of which only the later one counts: the same issue's
    /// moves, or its writes of the same label.
    fn same_slot(&self, other: &Op) -> bool {
        match (self, other) {
            (Op::MoveTo { issue: a, .. }, Op::MoveTo { issue: b, .. }) => a == b,
            (
                Op::Label {
                    issue: a, label: x, ..
                }
                | Op::Unlabel {
                    issue: a, label: x, ..
                },
                Op::Label {
                    issue: b, label: y, ..
                }
                | Op::Unlabel {
                    issue: b, label: y, ..
                },
            ) => a == b && x == y,
            _ => false,
        }
    }
}

pub(crate) const FAILED: &str = "ralph:failed";

/// The writes that say `update` of the issue (`issue` its identifier, `id`
/// Linear's ID). A comment comes before the write that says it was made
/// (`settled`).
pub(crate) fn ops_for(issue: &str, id: &str, update: &Update) -> Vec<Op> {
    let (issue, id) = (issue.to_string(), id.to_string());
    let unlabel = Op::Unlabel {
        issue: issue.clone(),
        id: id.clone(),
        label: FAILED.into(),
    };
    let move_to = |state: &str| Op::MoveTo {
        issue: issue.clone(),
        id: id.clone(),
        state: state.into(),
    };
    let remark = |body: String| Op::Remark {
        issue: issue.clone(),
        id: id.clone(),
        body,
    };
    match update {
        Update::Running => vec![unlabel, move_to("started")],
        Update::Pending => vec![unlabel],
        Update::Review => Vec::new(),
        Update::Failed => vec![
            remark(format!(
                "ralph gave up on {issue}: it failed for good (`ralph log {issue}` says why)."
            )),
            Op::Label {
                issue: issue.clone(),
                id: id.clone(),
                label: FAILED.into(),
            },
        ],
        Update::Landed { commit, target } => vec![
            unlabel,
            remark(format!("Landed by ralph on `{target}` as {commit}.")),
            move_to("completed"),
        ],
    }
}

/// Whether each of `ops` (one issue's, from `ops_for`) needs no making:
/// queued in `pending`, or made as `issue` was last read (`None`: not in
/// that read). The latest queued write of a slot (a move, a label) is what
/// the issue will have, whatever the read says. A comment is made when the
/// write after it is: they are queued together, in order. Pure.
pub(crate) fn settled(ops: &[Op], pending: &[Op], issue: Option<&Issue>) -> Vec<bool> {
    let mut out = vec![false; ops.len()];
    for (i, op) in ops.iter().enumerate().rev() {
        let queued = pending.iter().rev().find(|p| p.same_slot(op));
        out[i] = match (op, queued) {
            (Op::Remark { .. }, _) => pending.contains(op) || out.get(i + 1) == Some(&true),
            (_, Some(q)) => q == op,
            (Op::MoveTo { state, .. }, None) => {
                issue.is_some_and(|i| i.done() || (state == "started" && i.state == "started"))
            }
            (Op::Label { label, .. }, None) => issue.is_some_and(|i| i.labels.contains(label)),
            (Op::Unlabel { label, .. }, None) => issue.is_some_and(|i| !i.labels.contains(label)),
        };
    }
    out
}

/// What a write made does to the issue as the snapshot has it, so the
/// snapshot answers `has` right until the next read.
pub(crate) fn apply(op: &Op, issue: &mut Issue) {
    match op {
        Op::MoveTo { state, .. } => issue.state = state.clone(),
        Op::Remark { .. } => {}
        Op::Label { label, .. } => {
            if !issue.labels.contains(label) {
                issue.labels.push(label.clone());
            }
        }
        Op::Unlabel { label, .. } => issue.labels.retain(|l| l != label),
    }
}

#[cfg(test)]
mod tests;
