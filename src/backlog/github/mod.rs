//! GitHub Issues as the backlog (issue 27): the open issues carrying
//! `backlog.github.label` are the stories, the closed ones count as done.
//!
//! This file is the mapping (pure: issues → `Backlog`, tracker updates →
//! REST operations) and the poll over an `Http` (the REST calls and their
//! ETags); `client.rs` is the edge that speaks HTTPS. What maps where:
//!
//! | story | issue |
//! |---|---|
//! | ID | the issue number |
//! | title | the title |
//! | spec | `# Story N: title` and the body |
//! | `depends_on` | native "blocked by" dependencies, `Depends on #N` lines, and the sub-issues (a parent waits for its children) |
//! | batch | a `batch:N` label |
//! | `agent`, `estimation`, `priority` | `agent:`, `effort:`, `priority:` in a fenced ```` ```ralph ```` block of the body |
//! | done | the issue is closed |

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{Backlog, Section, Source};
use crate::error::Problem;

pub(crate) mod client;
pub(crate) mod poll;
pub(crate) mod source;

pub(crate) use super::tracker::interface::Update;

/// One issue as the snapshot keeps it: what the mapping needs, nothing more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Issue {
    pub(crate) number: u64,
    pub(crate) title: String,
    #[serde(default)]
    pub(crate) body: String,
    /// `open` or `closed`.
    pub(crate) state: String,
    #[serde(default)]
    pub(crate) labels: Vec<String>,
    #[serde(default)]
    pub(crate) updated_at: String,
    /// The issue's "blocked by" count, when the API says it (`None`: ask).
    #[serde(default)]
    pub(crate) blocked_by_count: Option<u64>,
    /// The issue's sub-issue count, when the API says it (`None`: ask).
    #[serde(default)]
    pub(crate) sub_issue_count: Option<u64>,
    /// Closed once and opened again (`state_reason: reopened`): by a
    /// person, since ralph never reopens one.
    #[serde(default)]
    pub(crate) reopened: bool,
}

/// What an issue's dependency and sub-issue lists were when last read,
/// and at which `updated_at`: read again only when the issue changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Links {
    pub(crate) updated_at: String,
    pub(crate) blocked_by: Vec<u64>,
    pub(crate) sub_issues: Vec<u64>,
}

/// One page of the issue list with the ETag it came with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Page {
    /// The URL the page was read from (its ETag answers for it only).
    pub(crate) url: String,
    pub(crate) etag: Option<String>,
    pub(crate) issues: Vec<Issue>,
    /// The next page's URL (`Link: rel="next"`).
    pub(crate) next: Option<String>,
}

/// The tracker as last read (`.ralph/tracker/snapshot.json`): what reads
/// fall back to when it cannot be reached, and the ETags that make a poll
/// of an unchanged backlog a few `304`s.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Snapshot {
    pub(crate) repo: String,
    pub(crate) label: String,
    pub(crate) pages: Vec<Page>,
    pub(crate) links: BTreeMap<u64, Links>,
    /// Rate limited: nothing is asked of the API before this (Unix seconds).
    #[serde(default)]
    pub(crate) not_before: Option<i64>,
}

impl Snapshot {
    pub(crate) fn issues(&self) -> impl Iterator<Item = &Issue> {
        self.pages.iter().flat_map(|p| p.issues.iter())
    }
}

/// The label a `batch:N` sets, if any.
fn batch_of(labels: &[String]) -> Option<String> {
    labels.iter().find_map(|l| {
        l.strip_prefix("batch:")
            .map(str::trim)
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == '.'))
            .map(str::to_string)
    })
}

/// Issue numbers named by `Depends on #N` lines (also `Depends on: #1, #2`).
pub(crate) fn depends_lines(body: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for line in body.lines() {
        let t = line.trim().trim_start_matches(['-', '*', ' ']);
        let lower = t.to_ascii_lowercase();
        let Some(rest) = lower.strip_prefix("depends on") else {
            continue;
        };
        for part in rest.split(|c: char| c == ',' || c.is_whitespace() || c == ':') {
            if let Some(n) = part.strip_prefix('#').and_then(|n| n.parse::<u64>().ok()) {
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        }
    }
    out
}

#[cfg(test)]
use super::tracker::story::fenced_keys;
use super::tracker::story::{story_of, Item};

/// Where a problem of issue `n` is reported.
pub(crate) fn issue_place(repo: &str, n: u64) -> String {
    format!("{repo}#{n}")
}

/// The backlog the snapshot describes: the labelled issues (open ones to
/// run, closed ones done), by batch then number. Every problem is
/// collected; an issue with one still stands, without what was wrong.
pub(crate) fn to_backlog(snap: &Snapshot) -> (Backlog, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut issues: Vec<&Issue> = snap
        .issues()
        .filter(|i| i.labels.iter().any(|l| l == &snap.label))
        .collect();
    issues.sort_by_key(|i| i.number);
    issues.dedup_by_key(|i| i.number);
    let known: BTreeSet<u64> = issues.iter().map(|i| i.number).collect();
    // Batches in numeric order; issues without one come first, unchained.
    let mut batches: Vec<String> = issues.iter().filter_map(|i| batch_of(&i.labels)).collect();
    batches.sort_by(|a, b| {
        let (x, y) = (a.parse::<f64>(), b.parse::<f64>());
        match (x, y) {
            (Ok(x), Ok(y)) => x.total_cmp(&y),
            _ => a.cmp(b),
        }
    });
    batches.dedup();
    let mut sections = vec![Section {
        label: None,
        chain: false,
    }];
    sections.extend(batches.iter().map(|b| Section {
        label: Some(b.clone()),
        chain: false,
    }));
    let mut stories = Vec::with_capacity(issues.len());
    for issue in &issues {
        let place = issue_place(&snap.repo, issue.number);
        let section = batch_of(&issue.labels)
            .and_then(|b| batches.iter().position(|x| *x == b))
            .map_or(0, |p| p + 1);
        let links = snap.links.get(&issue.number).cloned().unwrap_or_default();
        let mut depends: Vec<u64> = Vec::new();
        for n in links
            .blocked_by
            .iter()
            .chain(&depends_lines(&issue.body))
            .chain(&links.sub_issues)
        {
            if *n == issue.number || depends.contains(n) {
                continue;
            }
            depends.push(*n);
        }
        let mut depends_on = Vec::new();
        for n in depends {
            if known.contains(&n) {
                depends_on.push(n.to_string());
            } else {
                // An issue without the label is no story: nothing to wait
                // for in the backlog, and nothing ralph could run either.
                problems.push(Problem::new(
                    &place,
                    None,
                    format!(
                        "story {}: depends on #{n}, which is not an issue labelled {:?}; \
                         add the label to #{n} or remove the dependency",
                        issue.number, snap.label
                    ),
                ));
            }
        }
        stories.push(story_of(
            Item {
                id: &issue.number.to_string(),
                title: &issue.title,
                body: &issue.body,
                done: issue.state == "closed",
                section,
                depends_on,
                place: &place,
            },
            &mut problems,
        ));
    }
    // Batches run in order; within a section, issue numbers.
    let mut order: Vec<usize> = (0..stories.len()).collect();
    order.sort_by_key(|&i| (stories[i].section, i));
    let stories = order.into_iter().map(|i| stories[i].clone()).collect();
    let backlog = Backlog {
        source: Source::GitHub {
            repo: snap.repo.clone(),
        },
        stories,
        sections,
        skipped: Vec::new(),
    };
    (backlog, problems)
}

/// One REST write, as queued in `.ralph/tracker/pending.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Op {
    AddLabel { issue: u64, label: String },
    RemoveLabel { issue: u64, label: String },
    Comment { issue: u64, body: String },
    Close { issue: u64 },
}

impl Op {
    pub(crate) fn issue(&self) -> u64 {
        match self {
            Op::AddLabel { issue, .. }
            | Op::RemoveLabel { issue, .. }
            | Op::Comment { issue, .. }
            | Op::Close { issue } => *issue,
        }
    }

    fn is_label(&self) -> bool {
        matches!(self, Op::AddLabel { .. } | Op::RemoveLabel { .. })
    }

    /// A line for `ralph status`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Op::AddLabel { issue, label } => format!("#{issue}: add label {label}"),
            Op::RemoveLabel { issue, label } => format!("#{issue}: remove label {label}"),
            Op::Comment { issue, .. } => format!("#{issue}: comment"),
            Op::Close { issue } => format!("#{issue}: close"),
        }
    }
}

pub(crate) const RUNNING: &str = "ralph:running";
pub(crate) const FAILED: &str = "ralph:failed";
pub(crate) const REVIEW: &str = "ralph:review";
const STATUS_LABELS: [&str; 3] = [RUNNING, FAILED, REVIEW];

/// The REST writes that say `update` of issue `issue`. `pr`: the landing
/// went through a pull request whose body closes the issue (`Closes #N`),
/// so ralph neither comments nor closes.
pub(crate) fn ops_for(issue: u64, update: &Update, pr: bool) -> Vec<Op> {
    let only = |keep: Option<&str>| -> Vec<Op> {
        let mut ops: Vec<Op> = STATUS_LABELS
            .iter()
            .filter(|l| Some(**l) != keep)
            .map(|l| Op::RemoveLabel {
                issue,
                label: l.to_string(),
            })
            .collect();
        if let Some(l) = keep {
            ops.insert(
                0,
                Op::AddLabel {
                    issue,
                    label: l.to_string(),
                },
            );
        }
        ops
    };
    match update {
        Update::Running => only(Some(RUNNING)),
        Update::Failed => only(Some(FAILED)),
        Update::Review => only(Some(REVIEW)),
        Update::Pending => only(None),
        Update::Landed { commit, target } => {
            let mut ops = only(None);
            if !pr {
                ops.push(Op::Comment {
                    issue,
                    body: format!("Landed by ralph on `{target}` as {commit}."),
                });
                ops.push(Op::Close { issue });
            }
            ops
        }
    }
}

/// Whether the writes `ops` (one issue's, from `ops_for`) need no making:
/// each is queued in `pending` or made already as `issue` was last read
/// (`None`: not in that read). What is queued wins over the read: label
/// writes queued for the issue are the labels it will have (`enqueue`
/// replaces them whole), so a label write not among them is undone. A
/// comment is made before its close from the same queue, in order: a close
/// still queued, or made, says the comment before it was made. An issue a
/// person opened again after its close counts as closed: ralph does not
/// close it again. Pure.
pub(crate) fn settled(ops: &[Op], pending: &[Op], issue: Option<&Issue>) -> bool {
    let Some(number) = ops.first().map(Op::issue) else {
        return true;
    };
    let closed = issue.is_some_and(|i| i.state == "closed" || i.reopened);
    let labels_queued = pending.iter().any(|o| o.is_label() && o.issue() == number);
    let close_queued = pending.contains(&Op::Close { issue: number });
    let has_label = |l: &String| issue.is_some_and(|i| i.labels.contains(l));
    ops.iter().all(|op| {
        pending.contains(op)
            || match op {
                Op::AddLabel { label, .. } => !labels_queued && has_label(label),
                Op::RemoveLabel { label, .. } => {
                    !labels_queued && issue.is_some() && !has_label(label)
                }
                Op::Comment { .. } => close_queued || closed,
                Op::Close { .. } => closed,
            }
    })
}

/// `issue` as it is once `op` was made: what a read after the write would
/// show (a comment changes nothing a status depends on).
pub(crate) fn apply(issue: &mut Issue, op: &Op) {
    match op {
        Op::AddLabel { label, .. } => {
            if !issue.labels.contains(label) {
                issue.labels.push(label.clone());
            }
        }
        Op::RemoveLabel { label, .. } => issue.labels.retain(|l| l != label),
        Op::Close { .. } => issue.state = "closed".into(),
        Op::Comment { .. } => {}
    }
}

/// Queues `ops` behind `pending`: label writes of an issue still queued
/// are superseded by newer ones (only the latest status is worth saying);
/// comments and closes are never dropped.
pub(crate) fn enqueue(pending: &mut Vec<Op>, ops: Vec<Op>) {
    let issues: BTreeSet<u64> = ops.iter().filter(|o| o.is_label()).map(Op::issue).collect();
    pending.retain(|o| !(o.is_label() && issues.contains(&o.issue())));
    pending.extend(ops);
}

#[cfg(test)]
mod tests;
