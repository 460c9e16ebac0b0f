//! Jira as the backlog (issue 37): the issues of project
//! `backlog.jira.project` carrying `backlog.jira.label` (and matching
//! `backlog.jira.jql`) are the stories.
//!
//! This file is the mapping (pure: issues → `Backlog`, tracker updates →
//! REST writes and whether they are made); `poll.rs` reads and writes over
//! an `Http`; `client.rs` is the edge that speaks HTTPS with the
//! credentials; `source.rs` is the `Tracker`. What maps where:
//!
//! | story | issue |
//! |---|---|
//! | ID | the key (`SHOP-7`) |
//! | title | the summary |
//! | spec | `# Story SHOP-7: summary` and the description (ADF as plain text) |
//! | `depends_on` | `Blocks` links (on X, `inwardIssue: Y`: X waits for Y) and subtasks (the parent waits) |
//! | `agent`, `estimation`, `priority` | `agent:`, `effort:`, `priority:` in a fenced ```` ```ralph ```` block of the description |
//! | done | the status category is `done` |

use serde::{Deserialize, Serialize};

use super::tracker::story::{backlog_of, Node, Terms};
use super::{Backlog, Source};
use crate::error::Problem;

pub(crate) mod client;
pub(crate) mod poll;
pub(crate) mod source;

pub(crate) use super::tracker::interface::Update;

/// The status category of work begun (Jira's key for "In Progress").
pub(crate) const IN_PROGRESS: &str = "indeterminate";
pub(crate) const DONE: &str = "done";

/// One issue as the snapshot keeps it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Issue {
    /// `SHOP-7`: what writes name too.
    pub(crate) key: String,
    pub(crate) summary: String,
    /// The description as plain text.
    #[serde(default)]
    pub(crate) description: String,
    /// The status category's key: `new`, `indeterminate` or `done`.
    pub(crate) category: String,
    #[serde(default)]
    pub(crate) labels: Vec<String>,
    /// Issues this one waits for (`Blocks` links naming an `inwardIssue`).
    #[serde(default)]
    pub(crate) blocked_by: Vec<String>,
    /// Issues waiting for this one (`Blocks` links naming an `outwardIssue`).
    #[serde(default)]
    pub(crate) blocks: Vec<String>,
    #[serde(default)]
    pub(crate) subtasks: Vec<String>,
}

impl Issue {
    fn done(&self) -> bool {
        self.category == DONE
    }
}

/// Jira as last read (`.ralph/tracker/snapshot.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Snapshot {
    /// The project's key.
    pub(crate) project: String,
    pub(crate) label: String,
    pub(crate) issues: Vec<Issue>,
    /// Rate limited: nothing is asked of the API before this (Unix seconds).
    #[serde(default)]
    pub(crate) not_before: Option<i64>,
}

impl Snapshot {
    pub(crate) fn issue(&self, key: &str) -> Option<&Issue> {
        self.issues.iter().find(|i| i.key == key)
    }
}

/// Where a problem of issue `key` is reported.
pub(crate) fn issue_place(key: &str) -> String {
    format!("Jira {key}")
}

/// The backlog the snapshot describes: the labelled issues (done ones
/// count as done), by number. Every problem is collected; an issue with
/// one still stands, without what was wrong.
pub(crate) fn to_backlog(snap: &Snapshot) -> (Backlog, Vec<Problem>) {
    // The waiting issue's inward side and the blocker's outward side.
    let nodes: Vec<Node> = snap
        .issues
        .iter()
        .map(|i| Node {
            id: &i.key,
            title: &i.summary,
            body: &i.description,
            done: i.done(),
            labels: &i.labels,
            blocked_by: &i.blocked_by,
            blocks: &i.blocks,
            children: &i.subtasks,
        })
        .collect();
    let terms = Terms {
        label: &snap.label,
        outside: format!(
            "an issue of project {} labelled {:?}",
            snap.project, snap.label
        ),
        link: "link",
        child: "is its subtask",
        place: issue_place,
        source: Source::Jira {
            project: snap.project.clone(),
        },
    };
    backlog_of(&nodes, terms)
}

/// Where a transition goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Target {
    /// The first transition into a status of category "In Progress", when
    /// the issue's workflow has one from where it is.
    InProgress,
    /// The transition of this name (`backlog.jira.done_transition`).
    Named(String),
}

/// One REST write, as queued in `.ralph/tracker/pending.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Op {
    Transition { issue: String, to: Target },
    Remark { issue: String, body: String },
    Label { issue: String, label: String },
    Unlabel { issue: String, label: String },
}

impl Op {
    pub(crate) fn issue(&self) -> &str {
        match self {
            Op::Transition { issue, .. }
            | Op::Remark { issue, .. }
            | Op::Label { issue, .. }
            | Op::Unlabel { issue, .. } => issue,
        }
    }

    /// A line for `ralph status`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Op::Transition {
                issue,
                to: Target::InProgress,
            } => format!("{issue}: transition to In Progress"),
            Op::Transition {
                issue,
                to: Target::Named(name),
            } => format!("{issue}: transition {name:?}"),
            Op::Remark { issue, .. } => format!("{issue}: comment"),
            Op::Label { issue, label } => format!("{issue}: add label {label}"),
            Op::Unlabel { issue, label } => format!("{issue}: remove label {label}"),
        }
    }

    /// Two writes of which only the later one counts: the same issue's
    /// transitions, or its writes of the same label.
    fn same_slot(&self, other: &Op) -> bool {
        match (self, other) {
            (Op::Transition { issue: a, .. }, Op::Transition { issue: b, .. }) => a == b,
            (
                Op::Label { issue: a, label: x } | Op::Unlabel { issue: a, label: x },
                Op::Label { issue: b, label: y } | Op::Unlabel { issue: b, label: y },
            ) => a == b && x == y,
            _ => false,
        }
    }
}

pub(crate) const FAILED: &str = "ralph:failed";

/// The writes that say `update` of issue `issue`; `done` is the name of
/// the transition a landed issue takes. A comment comes before the write
/// that says it was made (`settled`).
pub(crate) fn ops_for(issue: &str, done: &str, update: &Update) -> Vec<Op> {
    let issue = issue.to_string();
    let unlabel = Op::Unlabel {
        issue: issue.clone(),
        label: FAILED.into(),
    };
    let remark = |body: String| Op::Remark {
        issue: issue.clone(),
        body,
    };
    match update {
        Update::Running => vec![
            unlabel,
            Op::Transition {
                issue: issue.clone(),
                to: Target::InProgress,
            },
        ],
        Update::Pending => vec![unlabel],
        Update::Review => Vec::new(),
        Update::Failed => vec![
            remark(format!(
                "ralph gave up on {issue}: it failed for good (`ralph log {issue}` says why)."
            )),
            Op::Label {
                issue: issue.clone(),
                label: FAILED.into(),
            },
        ],
        Update::Landed { commit, target } => vec![
            unlabel,
            remark(format!("Landed by ralph on {target} as {commit}.")),
            Op::Transition {
                issue: issue.clone(),
                to: Target::Named(done.to_string()),
            },
        ],
    }
}

/// Whether each of `ops` (one issue's, from `ops_for`) needs no making:
/// queued in `pending`, or made as `issue` was last read (`None`: not in
/// that read). The latest queued write of a slot (a transition, a label)
/// is what the issue will have, whatever the read says. A comment is made
/// when the write after it is: they are queued together, in order. Pure.
pub(crate) fn settled(ops: &[Op], pending: &[Op], issue: Option<&Issue>) -> Vec<bool> {
    let mut out = vec![false; ops.len()];
    for (i, op) in ops.iter().enumerate().rev() {
        let queued = pending.iter().rev().find(|p| p.same_slot(op));
        out[i] = match (op, queued) {
            (Op::Remark { .. }, _) => pending.contains(op) || out.get(i + 1) == Some(&true),
            (_, Some(q)) => q == op,
            (Op::Transition { to, .. }, None) => issue.is_some_and(|i| {
                i.done() || (*to == Target::InProgress && i.category == IN_PROGRESS)
            }),
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
        Op::Transition { to, .. } => {
            issue.category = match to {
                Target::InProgress => IN_PROGRESS,
                Target::Named(_) => DONE,
            }
            .to_string()
        }
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
