//! `ralph plan FILE.md` (issue 27): one agent run turns a PRD into a
//! backlog. Pure: the prompt, reading the reply with decomposition's own
//! checks (`decompose::spec_blocks`, `check_set`: IDs, frontmatter, known
//! dependencies, no cycle), where each spec goes (never outside the
//! project), the stories.txt text, and the backlog shown before writing.

use std::collections::{BTreeMap, HashSet};
use std::path::{Component, PathBuf};

use crate::backlog::{split_frontmatter, Backlog, Section, Source, Story};
use crate::decompose::{self, SubStory};

/// The built-in prompt.
pub(crate) const TEMPLATE: &str = "\
Turn the product requirements below into a backlog of stories for coding agents.

You do not implement anything and you change no file: you only answer with the stories.

## The requirements

{{PRD}}

{{#if EXISTING}}
## Stories already in the backlog (a new story may depend on them)

{{EXISTING}}

{{/if}}
## How to answer

Give each story as a complete spec between two tags, with frontmatter. IDs are
short: letters, digits, '.', '_' or '-' (for example 1.1, 1.2, 2.1). A story
depends on the stories that must land before it; `batch` groups stories that can
run in parallel (batches run in order).

<ralph>STORY_START 1.1</ralph>
---
id: \"1.1\"
title: \"A short title\"
batch: 1
depends_on: []
estimation: small
---
# A short title

## Context
## Acceptance Criteria
## Files to Create/Modify
<ralph>STORY_END 1.1</ralph>

End with
<ralph>PLAN_DONE: <how many> stories</ralph>
";

/// The most stories one plan may hold.
const MAX_STORIES: usize = 200;

/// One story of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Planned {
    pub(crate) story: SubStory,
    /// Frontmatter `batch`, if any.
    pub(crate) batch: Option<String>,
}

/// Reads the agent's reply; `known` holds the IDs already in the backlog.
/// `Err` says why the reply was refused: nothing is written then.
pub(crate) fn parse_plan(text: &str, known: &HashSet<String>) -> Result<Vec<Planned>, String> {
    if !text.contains("<ralph>PLAN_DONE") {
        return Err("the reply has no <ralph>PLAN_DONE</ralph>".into());
    }
    let stories = decompose::spec_blocks(text, "STORY", &|id| {
        if known.contains(id) {
            Err(format!("story {id} is already in the backlog"))
        } else {
            Ok(())
        }
    })?;
    if stories.len() > MAX_STORIES {
        return Err(format!(
            "{} stories; at most {MAX_STORIES} are accepted in one plan",
            stories.len()
        ));
    }
    decompose::check_set(&stories, known, None)?;
    Ok(stories
        .into_iter()
        .map(|s| {
            let batch = batch_of(&s.text);
            Planned { story: s, batch }
        })
        .collect())
}

/// The frontmatter's `batch`, as text.
fn batch_of(spec: &str) -> Option<String> {
    let (yaml, _) = split_frontmatter(spec)?;
    let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(yaml).ok()?;
    match v.get("batch")? {
        serde_yaml_ng::Value::Number(n) => Some(n.to_string()),
        serde_yaml_ng::Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        _ => None,
    }
}

/// Where a planned story's spec goes: `specs.pattern` with its ID, never
/// outside the project (an absolute path or a `..` is refused).
pub(crate) fn spec_path(pattern: &str, p: &Planned) -> Result<PathBuf, String> {
    let path = decompose::child_spec_path(pattern, &p.story);
    let escapes = path.components().any(|c| {
        matches!(
            c,
            Component::ParentDir | Component::RootDir | Component::Prefix(_)
        )
    });
    if escapes {
        return Err(format!(
            "story {}'s spec would be written at {}, outside the project; fix specs.pattern",
            p.story.id,
            path.display()
        ));
    }
    Ok(path)
}

/// The batches in order: unbatched first, then by number.
fn batches(plan: &[Planned]) -> Vec<Option<String>> {
    let mut labels: Vec<String> = plan.iter().filter_map(|p| p.batch.clone()).collect();
    labels.sort_by(|a, b| match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x.total_cmp(&y),
        _ => a.cmp(b),
    });
    labels.dedup();
    std::iter::once(None)
        .chain(labels.into_iter().map(Some))
        .collect()
}

/// stories.txt with the plan's lines after what it held (`existing`), one
/// `# [batch:N]` section per batch. Unbatched stories go in a `[batch:0]`
/// section when the file already has lines (so they do not chain onto it).
pub(crate) fn queue_text(existing: &str, plan: &[Planned]) -> String {
    let mut out = existing.to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    let mut grouped: BTreeMap<usize, Vec<&Planned>> = BTreeMap::new();
    let order = batches(plan);
    for p in plan {
        let i = order.iter().position(|b| *b == p.batch).unwrap_or(0);
        grouped.entry(i).or_default().push(p);
    }
    for (i, stories) in grouped {
        match &order[i] {
            Some(b) => out.push_str(&format!("\n# [batch:{b}]\n")),
            None if !out.trim().is_empty() => out.push_str("\n# [batch:0]\n"),
            None => {}
        }
        for p in stories {
            out.push_str(&format!("{} | {}\n", p.story.id, p.story.title));
        }
    }
    out
}

/// The plan as a backlog of its own, to draw and check with the DAG code.
pub(crate) fn as_backlog(plan: &[Planned], known: &HashSet<String>) -> Backlog {
    let order = batches(plan);
    let sections = order
        .iter()
        .map(|b| Section {
            label: b.clone(),
            chain: false,
        })
        .collect();
    let mut stories: Vec<Story> = plan
        .iter()
        .map(|p| Story {
            section: order.iter().position(|b| *b == p.batch).unwrap_or(0),
            // Known stories are outside this drawing: satisfied.
            depends_on: p
                .story
                .depends_on
                .iter()
                .filter(|d| !known.contains(*d))
                .cloned()
                .collect(),
            ..Story::bare(p.story.id.clone(), p.story.title.clone())
        })
        .collect();
    stories.sort_by_key(|s| s.section);
    Backlog {
        source: Source::StoriesTxt,
        stories,
        sections,
        skipped: Vec::new(),
    }
}

/// One line per story: ID, batch, dependencies, title.
pub(crate) fn table(plan: &[Planned]) -> String {
    let w = plan
        .iter()
        .map(|p| p.story.id.len())
        .max()
        .unwrap_or(2)
        .max(2);
    let mut out = format!("{:w$}  batch  depends on       title\n", "ID");
    for p in plan {
        let deps = if p.story.depends_on.is_empty() {
            "-".to_string()
        } else {
            p.story.depends_on.join(", ")
        };
        out.push_str(&format!(
            "{:w$}  {:5}  {:15}  {}\n",
            p.story.id,
            p.batch.as_deref().unwrap_or("-"),
            deps,
            p.story.title
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(id: &str, batch: &str, deps: &str) -> String {
        format!(
            "<ralph>STORY_START {id}</ralph>\n---\nid: \"{id}\"\ntitle: \"Story {id}\"\nbatch: {batch}\ndepends_on: [{deps}]\n---\n# Story {id}\n<ralph>STORY_END {id}</ralph>\n"
        )
    }

    const DONE: &str = "<ralph>PLAN_DONE: 3 stories</ralph>";

    #[test]
    fn a_plan_is_read_with_its_batches_and_dependencies() {
        let text = format!(
            "{}{}{}{DONE}",
            block("1.1", "1", ""),
            block("1.2", "1", ""),
            block("2.1", "2", "\"1.1\", \"0.9\"")
        );
        let known: HashSet<String> = ["0.9".to_string()].into();
        let plan = parse_plan(&text, &known).unwrap();
        assert_eq!(plan.len(), 3);
        assert_eq!(plan[2].batch.as_deref(), Some("2"));
        assert_eq!(plan[2].story.depends_on, ["1.1", "0.9"]);
        let q = queue_text("0.9 | Old\n", &plan);
        assert_eq!(
            q,
            "0.9 | Old\n\n# [batch:1]\n1.1 | Story 1.1\n1.2 | Story 1.2\n\n# [batch:2]\n2.1 | Story 2.1\n"
        );
        let b = as_backlog(&plan, &known);
        assert!(crate::dag::Dag::build(&b).is_ok());
        assert!(table(&plan).contains("2.1  2      1.1, 0.9"));
        let path = spec_path("specs/epic-{{epic}}/story-{{id}}-*.md", &plan[0]).unwrap();
        assert_eq!(path, PathBuf::from("specs/epic-1/story-1.1-story-1-1.md"));
    }

    #[test]
    fn a_cycle_an_unknown_dependency_or_a_path_in_an_id_is_refused() {
        let none = HashSet::new();
        let cases = [
            (
                format!(
                    "{}{}{DONE}",
                    block("a", "1", "\"b\""),
                    block("b", "1", "\"a\"")
                ),
                "cycle",
            ),
            (format!("{}{DONE}", block("a", "1", "\"zz\"")), "zz"),
            (format!("{}{DONE}", block("../x", "1", "")), "'..'"),
            (format!("{}{DONE}", block("a/b", "1", "")), "'/'"),
            (block("a", "1", ""), "PLAN_DONE"),
            (
                format!("{}{}{DONE}", block("a", "1", ""), block("a", "1", "")),
                "twice",
            ),
        ];
        for (text, want) in cases {
            let got = parse_plan(&text, &none).unwrap_err();
            assert!(got.contains(want), "{want:?} in {got:?}");
        }
        let known: HashSet<String> = ["a".to_string()].into();
        let err = parse_plan(&format!("{}{DONE}", block("a", "1", "")), &known).unwrap_err();
        assert!(err.contains("already in the backlog"), "{err}");
    }

    #[test]
    fn a_pattern_leading_outside_the_project_is_refused() {
        let plan = parse_plan(&format!("{}{DONE}", block("a", "1", "")), &HashSet::new()).unwrap();
        assert!(spec_path("../specs/{{id}}-*.md", &plan[0]).is_err());
        assert!(spec_path("/tmp/{{id}}.md", &plan[0]).is_err());
    }
}
