//! What every tracker's issue becomes as a story: the spec an agent gets
//! and the keys of a fenced ```` ```ralph ```` block (the frontmatter an
//! issue has no room for). Shared by GitHub and Linear.

use std::collections::BTreeMap;

use std::collections::BTreeSet;

use crate::backlog::{files, Backlog, Effort, ModelChoice, Section, Source, Story};
use crate::error::Problem;

/// `key: value` pairs of the body's first fenced ```` ```ralph ```` block.
pub(crate) fn fenced_keys(body: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut inside = false;
    for line in body.lines() {
        let t = line.trim();
        if !inside {
            if t.starts_with("```") && t.trim_start_matches('`').trim() == "ralph" {
                inside = true;
            }
            continue;
        }
        if t.starts_with("```") {
            break;
        }
        if let Some((k, v)) = t.split_once(':') {
            out.insert(
                k.trim().to_ascii_lowercase(),
                v.trim().trim_matches('"').to_string(),
            );
        }
    }
    out
}

/// The spec an agent gets for an issue: `# Story ID: title` and the body.
pub(crate) fn spec_of(id: &str, title: &str, body: &str) -> String {
    let mut out = format!("# Story {id}: {}\n", title.trim());
    if !body.trim().is_empty() {
        out.push('\n');
        out.push_str(body.trim());
        out.push('\n');
    }
    out
}

/// One issue as the mapping sees it, whichever tracker it is in.
pub(crate) struct Item<'a> {
    pub(crate) id: &'a str,
    pub(crate) title: &'a str,
    pub(crate) body: &'a str,
    pub(crate) done: bool,
    pub(crate) section: usize,
    pub(crate) depends_on: Vec<String>,
    /// Where its problems are reported (`o/r#3`, `Linear ENG-12`).
    pub(crate) place: &'a str,
}

/// The story of `item`; a problem of its ralph block is pushed to
/// `problems` and the story stands without what was wrong.
pub(crate) fn story_of(item: Item<'_>, problems: &mut Vec<Problem>) -> Story {
    let keys = fenced_keys(item.body);
    let agent = match keys.get("agent") {
        None => None,
        Some(name) => match crate::agent::Backend::parse(name) {
            Some(b) => Some(b),
            None => {
                problems.push(Problem::new(
                    item.place,
                    None,
                    format!(
                        "story {}: unknown agent {name:?} in the ralph block; one of: {}",
                        item.id,
                        crate::agent::Backend::names()
                    ),
                ));
                None
            }
        },
    };
    let estimation = keys
        .get("effort")
        .or(keys.get("estimation"))
        .map(|e| e.to_ascii_lowercase());
    let spec = spec_of(item.id, item.title, item.body);
    Story {
        id: item.id.to_string(),
        title: item.title.trim().to_string(),
        line: 0,
        section: item.section,
        spec_path: None,
        depends_on: item.depends_on,
        estimation,
        agent,
        allow_empty_done: keys.get("allow_empty_done").is_some_and(|v| v == "true"),
        prd_passes: item.done,
        spec_bytes: spec.len(),
        prd_spec: Some(spec),
        priority: files::priority_rank(keys.get("priority").map(String::as_str)),
        files: files::spec_files(item.body),
        named: files::named_paths(item.body),
        allow_test_changes: keys.get("allow_test_changes").is_some_and(|v| v == "true"),
        // `model:` and `effort:` of the ralph block, as a spec's
        // frontmatter gives them (an effort that is no rung starts
        // on the first).
        model: ModelChoice {
            model: keys.get("model").map(|m| m.trim().to_string()),
            effort: keys.get("effort").and_then(|e| Effort::parse(e)),
            best_of: keys
                .get("best_of")
                .and_then(|n| crate::backlog::parse_best_of(n)),
        },
    }
}

/// A story `ralph plan` makes an issue of, in any tracker.
pub(crate) struct NewIssue {
    pub(crate) id: String,
    pub(crate) title: String,
    /// The spec without its frontmatter.
    pub(crate) body: String,
    pub(crate) depends_on: Vec<String>,
    pub(crate) batch: Option<String>,
}

/// `ENG-12` (`SHOP-7`) sorts as (ENG, 12): a tracker's issues in number
/// order within their team or project.
fn key_order(key: &str) -> (String, u64) {
    match key.rsplit_once('-') {
        Some((team, n)) => (team.to_string(), n.parse().unwrap_or(u64::MAX)),
        None => (key.to_string(), u64::MAX),
    }
}

/// One issue of Linear or Jira as the backlog is made of it.
pub(crate) struct Node<'a> {
    pub(crate) id: &'a str,
    pub(crate) title: &'a str,
    pub(crate) body: &'a str,
    pub(crate) done: bool,
    pub(crate) labels: &'a [String],
    /// Issues it says it waits for, and issues it says wait for it: both
    /// ends of a link say it.
    pub(crate) blocked_by: &'a [String],
    pub(crate) blocks: &'a [String],
    /// Its sub-issues (subtasks): it waits for them.
    pub(crate) children: &'a [String],
}

/// What the backlog of a tracker's issues is made with.
pub(crate) struct Terms<'a> {
    /// The label that makes an issue a story.
    pub(crate) label: &'a str,
    /// What an issue outside the backlog is not ("an issue of team ENG
    /// labelled \"ralph\"").
    pub(crate) outside: String,
    /// What ties two issues ("relation", "link").
    pub(crate) link: &'a str,
    /// What a child is to its parent ("is its sub-issue").
    pub(crate) child: &'a str,
    /// Where a problem of an issue is reported (`Linear ENG-12`).
    pub(crate) place: fn(&str) -> String,
    pub(crate) source: Source,
}

/// The backlog of `nodes`: the labelled issues (done ones count as done),
/// by number. Every problem is collected; an issue with one still stands,
/// without what was wrong: a blocker or child outside the backlog is a
/// problem naming both.
pub(crate) fn backlog_of(nodes: &[Node<'_>], terms: Terms<'_>) -> (Backlog, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut issues: Vec<&Node> = nodes
        .iter()
        .filter(|i| i.labels.iter().any(|l| l == terms.label))
        .collect();
    issues.sort_by_key(|i| key_order(i.id));
    issues.dedup_by(|a, b| a.id == b.id);
    let known: BTreeSet<&str> = issues.iter().map(|i| i.id).collect();
    let mut stories = Vec::with_capacity(issues.len());
    for issue in &issues {
        let me = issue.id;
        let blockers = issue.blocked_by.iter().map(String::as_str).chain(
            issues
                .iter()
                .filter(|o| o.blocks.iter().any(|b| b == me))
                .map(|o| o.id),
        );
        let edges = blockers
            .map(|b| (b, "blocks it"))
            .chain(issue.children.iter().map(|c| (c.as_str(), terms.child)));
        let place = (terms.place)(me);
        let mut depends: Vec<(&str, &str)> = Vec::new();
        for (other, why) in edges {
            if other != me && !depends.iter().any(|(d, _)| *d == other) {
                depends.push((other, why));
            }
        }
        let mut depends_on = Vec::new();
        for (other, why) in depends {
            if known.contains(other) {
                depends_on.push(other.to_string());
            } else {
                problems.push(Problem::new(
                    &place,
                    None,
                    format!(
                        "story {me}: {other} {why}, and {other} is not {}; add the label to \
                         {other} or remove the {}",
                        terms.outside, terms.link
                    ),
                ));
            }
        }
        let item = Item {
            id: me,
            title: issue.title,
            body: issue.body,
            done: issue.done,
            section: 0,
            depends_on,
            place: &place,
        };
        stories.push(story_of(item, &mut problems));
    }
    let backlog = Backlog {
        source: terms.source,
        stories,
        sections: vec![Section {
            label: None,
            chain: false,
        }],
        skipped: Vec::new(),
    };
    (backlog, problems)
}

/// The order `planned` can be made in: each one after what it depends on
/// among them (what `known` holds exists already).
fn creation_order(
    planned: &[NewIssue],
    known: &std::collections::HashSet<String>,
) -> Result<Vec<usize>, String> {
    let mut order: Vec<usize> = Vec::new();
    while order.len() < planned.len() {
        let ready = (0..planned.len()).find(|i| {
            !order.contains(i)
                && planned[*i]
                    .depends_on
                    .iter()
                    .all(|d| known.contains(d) || order.iter().any(|o| planned[*o].id == *d))
        });
        order.push(ready.ok_or("the plan's dependencies form a cycle")?);
    }
    Ok(order)
}

/// `ralph plan` on a tracker: makes `planned` in `creation_order`, through
/// `at` (the tracker's client): `create` opens one issue (its ID for the
/// API, and the ID people see), `link(blocker, blocked)` (API IDs) makes
/// one wait for the other, `existing` is the API ID of an issue already
/// there. The planned IDs and the IDs people see; the first failure stops
/// it (the issues made before stay).
pub(crate) fn make_planned<C: ?Sized>(
    at: &mut C,
    (planned, known): (&[NewIssue], &std::collections::HashSet<String>),
    create: impl Fn(&mut C, &NewIssue) -> Result<(String, String), String>,
    link: impl Fn(&mut C, &str, &str) -> Result<(), String>,
    existing: impl Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, String> {
    // Planned ID → (API ID, ID people see).
    let mut made: Vec<(String, String, String)> = Vec::new();
    for i in creation_order(planned, known)? {
        let p = &planned[i];
        let (id, shown) = create(at, p)?;
        for d in &p.depends_on {
            let blocker = made
                .iter()
                .find(|(planned, ..)| planned == d)
                .map(|(_, id, _)| id.clone())
                .or_else(|| existing(d));
            if let Some(blocker) = blocker {
                link(at, &blocker, &id)?;
            }
        }
        made.push((p.id.clone(), id, shown));
    }
    Ok(made.into_iter().map(|(p, _, shown)| (p, shown)).collect())
}
