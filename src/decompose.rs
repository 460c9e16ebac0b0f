//! Decomposition (issue 12, Ralph v2 §3.8): a story that failed for good is
//! split into sub-stories by one agent run. Pure: the prompt's template,
//! reading the agent's reply, and the file edits that add the children;
//! the run does the I/O.
//!
//! The reply speaks Ralph v2's protocol, so `.ralph/templates/decompose.md`
//! overrides written for it keep working:
//! `<ralph>SUBSTORY_START <id></ralph>` spec text `<ralph>SUBSTORY_END <id></ralph>`
//! blocks, closed by `<ralph>DECOMPOSE_DONE <id>: …</ralph>`, or
//! `<ralph>DECOMPOSE_FAIL <id>: reason</ralph>` to decline.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::backlog::{
    check_id, parse_frontmatter, parse_queue_lenient, sets_key, spec_glob, split_frontmatter,
};

/// The built-in decomposition prompt (override: `.ralph/templates/decompose.md`).
/// Cache-friendly as the implement prompt (issue 25): up to
/// `prompt::STORY_PART` it is the same, byte for byte, for every story a run
/// splits (the task and the answer's form, with `<id>` for the ID); the
/// story's part follows, its first line naming the story, with the exact
/// IDs and closing tags to write.
pub(crate) const TEMPLATE: &str = "\
You are an autonomous coding agent working through a project's backlog of
stories. A story failed every attempt it was allowed.
Split it into smaller sub-stories that can each be implemented and committed on their own.
The story is described at the end of this prompt.

You do not implement anything and you change no file: you only answer with the sub-stories.

## How to answer

Give 2 to 4 sub-stories, smallest first. Their IDs are the story's ID followed
by .1, .2, and so on (written <id>.1, <id>.2 here; the story's own are given
with it). Each one is a complete spec between two tags, with frontmatter:

<ralph>SUBSTORY_START <id>.1</ralph>
---
id: \"<id>.1\"
title: \"A short title\"
status: pending
depends_on: []
---
# A short title

## Context
## Acceptance Criteria
## Technical Notes
<ralph>SUBSTORY_END <id>.1</ralph>

A sub-story may depend on its earlier siblings (depends_on: [\"<id>.1\"]); it
already waits for whatever the story waited for. End with
<ralph>DECOMPOSE_DONE <id>: <how many> sub-stories</ralph>
or, if the story cannot be split, with
<ralph>DECOMPOSE_FAIL <id>: <why></ralph>

## Your story

Split Story {{STORY_ID}}: {{TITLE}}. It failed {{RETRY_COUNT}} times.

Its sub-stories' IDs are {{STORY_ID}}.1, {{STORY_ID}}.2, and so on. End with
<ralph>DECOMPOSE_DONE {{STORY_ID}}: <how many> sub-stories</ralph>
or, if it cannot be split, with
<ralph>DECOMPOSE_FAIL {{STORY_ID}}: <why></ralph>

## The story

{{SPEC_CONTENT}}
{{#if FAILURE_HISTORY}}

## How its attempts failed

{{FAILURE_HISTORY}}
{{/if}}
{{#if LAST_OUTPUT}}

## The end of the last attempt's output

{{LAST_OUTPUT}}
{{/if}}
{{#if LEARNINGS}}

## Learnings from earlier stories

{{LEARNINGS}}
{{/if}}
";

/// The most sub-stories one decomposition may add.
const MAX_CHILDREN: usize = 12;

/// The most agent text a decomposition's answer may hold (its messages and
/// result, `agent::Summary::text_bytes`): a dozen specs fit many times over,
/// and past it the answer is not kept whole.
pub(crate) const MAX_REPLY_BYTES: usize = 1 << 20;

/// Refuses an answer of `bytes` of agent text over `MAX_REPLY_BYTES`: what
/// was kept of it is not all of it, so its blocks cannot be trusted.
pub(crate) fn check_size(bytes: usize) -> Result<(), String> {
    if bytes <= MAX_REPLY_BYTES {
        return Ok(());
    }
    Err(format!(
        "the reply is {bytes} bytes of text, over the limit of {MAX_REPLY_BYTES} bytes (1 MiB) \
         for a decomposition answer; ask for fewer or shorter sub-stories \
         ({})",
        crate::paths::DECOMPOSE_TEMPLATE
    ))
}

/// One sub-story as the agent wrote it, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SubStory {
    pub(crate) id: String,
    pub(crate) title: String,
    /// The dependencies its frontmatter names (siblings or known stories).
    pub(crate) depends_on: Vec<String>,
    /// The block's text between the tags, trimmed.
    pub(crate) text: String,
}

/// What the decomposition agent answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    Split(Vec<SubStory>),
    Declined(String),
}

/// Reads the agent's text. `known` holds every story ID the children may
/// depend on besides their siblings. `Err` says why the reply was refused;
/// nothing is written then.
pub(crate) fn parse_reply(
    text: &str,
    parent: &str,
    known: &HashSet<String>,
) -> Result<Reply, String> {
    if let Some(rest) = tag_body(text, "DECOMPOSE_FAIL") {
        let reason = rest
            .split_once(':')
            .map_or("", |(_, r)| r)
            .trim()
            .to_string();
        return Ok(Reply::Declined(if reason.is_empty() {
            "no reason given".into()
        } else {
            reason
        }));
    }
    match tag_body(text, "DECOMPOSE_DONE") {
        Some(rest) if rest.split(':').next().unwrap_or("").trim() == parent => {}
        Some(rest) => {
            return Err(format!(
                "DECOMPOSE_DONE names {:?}, not {parent}",
                rest.split(':').next().unwrap_or("").trim()
            ))
        }
        None => return Err("the reply has no <ralph>DECOMPOSE_DONE</ralph>".into()),
    }
    let children = spec_blocks(text, "SUBSTORY", &|id| child_id_rule(id, parent))?;
    if children.len() > MAX_CHILDREN {
        return Err(format!(
            "{} sub-stories; at most {MAX_CHILDREN} are accepted",
            children.len()
        ));
    }
    check_set(&children, known, Some(parent))?;
    Ok(Reply::Split(children))
}

/// The `<ralph>{KIND}_START id</ralph>` … `<ralph>{KIND}_END id</ralph>`
/// blocks of `text`, each checked (`check_block`: the ID by `rule` and
/// `check_id`, a frontmatter with a title of one line): what a
/// decomposition (`SUBSTORY`) and `ralph plan` (`STORY`) read.
pub(crate) fn spec_blocks(
    text: &str,
    kind: &str,
    rule: &dyn Fn(&str) -> Result<(), String>,
) -> Result<Vec<SubStory>, String> {
    let mut children: Vec<SubStory> = Vec::new();
    let mut rest = text;
    let start = format!("<ralph>{kind}_START ");
    while let Some(at) = rest.find(&start) {
        let after = &rest[at + start.len()..];
        let Some(close) = after.find("</ralph>") else {
            return Err(format!("a {kind}_START tag is never closed"));
        };
        let id = after[..close].trim().to_string();
        let body_start = close + "</ralph>".len();
        let end_tag = format!("<ralph>{kind}_END {id}</ralph>");
        let Some(end) = after[body_start..].find(&end_tag) else {
            return Err(format!("story {id} has no {end_tag}"));
        };
        let body = after[body_start..body_start + end].trim().to_string();
        rest = &after[body_start + end + end_tag.len()..];
        children.push(check_block(&id, body, rule)?);
    }
    if children.is_empty() {
        return Err(format!("the reply has no {kind}_START … {kind}_END block"));
    }
    Ok(children)
}

/// The checks of a set of new stories: each ID once, every dependency on
/// one of them or a `known` story (never on `parent`, the story a split
/// replaces), and no cycle among them.
pub(crate) fn check_set(
    stories: &[SubStory],
    known: &HashSet<String>,
    parent: Option<&str>,
) -> Result<(), String> {
    let mut ids = HashSet::new();
    for c in stories {
        if !ids.insert(c.id.as_str()) {
            return Err(format!("story {} appears twice", c.id));
        }
    }
    for c in stories {
        for d in &c.depends_on {
            if Some(d.as_str()) == parent {
                return Err(format!(
                    "sub-story {} depends on {d}, the story it replaces",
                    c.id
                ));
            }
            if !ids.contains(d.as_str()) && !known.contains(d) {
                return Err(format!(
                    "story {} depends on {d}, which is neither a sibling nor a known story",
                    c.id
                ));
            }
        }
    }
    if let Some(id) = sibling_cycle(stories) {
        return Err(format!("the stories' depends_on form a cycle through {id}"));
    }
    Ok(())
}

/// A sub-story's ID is `<parent>.<n>`, n = 1, 2, …
fn child_id_rule(id: &str, parent: &str) -> Result<(), String> {
    let k = id
        .strip_prefix(parent)
        .and_then(|r| r.strip_prefix('.'))
        .unwrap_or("");
    if k.is_empty() || !k.chars().all(|c| c.is_ascii_digit()) || k.starts_with('0') {
        return Err(format!(
            "sub-story ID {id:?} must be {parent}.<n> with n = 1, 2, …"
        ));
    }
    Ok(())
}

/// The text after `<ralph>KIND` up to its `</ralph>`, of the last such tag.
fn tag_body<'t>(text: &'t str, kind: &str) -> Option<&'t str> {
    let open = format!("<ralph>{kind}");
    let at = text.rfind(&open)?;
    let after = &text[at + open.len()..];
    let body = &after[..after.find("</ralph>")?];
    (body.is_empty() || body.starts_with(char::is_whitespace)).then(|| body.trim())
}

fn check_block(
    id: &str,
    body: String,
    rule: &dyn Fn(&str) -> Result<(), String>,
) -> Result<SubStory, String> {
    rule(id)?;
    check_id(id).map_err(|why| format!("sub-story ID {id:?} {why}"))?;
    let fm = parse_frontmatter(&body, Path::new(id))
        .map_err(|p| format!("sub-story {id}: {}", p.message))?;
    if split_frontmatter(&body).is_none() {
        return Err(format!(
            "sub-story {id} has no frontmatter (a --- block with its title)"
        ));
    }
    if let Some(fid) = fm.id.as_deref().filter(|f| *f != id) {
        return Err(format!("sub-story {id}'s frontmatter says id {fid:?}"));
    }
    let title = fm
        .title
        .clone()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| format!("sub-story {id}'s frontmatter has no title"))?;
    // The title becomes a line of stories.txt: a line break there would
    // start a line the queue reads as another story.
    if title.trim().chars().any(char::is_control) {
        return Err(format!(
            "sub-story {id}'s title has a line break or control character ({:?}); a title is one line",
            title.trim()
        ));
    }
    Ok(SubStory {
        id: id.to_string(),
        title: title.trim().to_string(),
        depends_on: fm.depends_on,
        text: body,
    })
}

/// An ID on a cycle of the siblings' dependencies, if there is one.
fn sibling_cycle(children: &[SubStory]) -> Option<String> {
    let deps: HashMap<&str, Vec<&str>> = children
        .iter()
        .map(|c| {
            (
                c.id.as_str(),
                c.depends_on.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    // 0 = unseen, 1 = on the path, 2 = done.
    fn visit<'a>(
        id: &'a str,
        deps: &HashMap<&'a str, Vec<&'a str>>,
        mark: &mut HashMap<&'a str, u8>,
    ) -> Option<String> {
        match mark.get(id) {
            Some(1) => return Some(id.to_string()),
            Some(2) => return None,
            _ => {}
        }
        mark.insert(id, 1);
        for d in deps.get(id).into_iter().flatten() {
            if deps.contains_key(d) {
                if let Some(c) = visit(d, deps, mark) {
                    return Some(c);
                }
            }
        }
        mark.insert(id, 2);
        None
    }
    let mut mark = HashMap::new();
    children.iter().find_map(|c| visit(&c.id, &deps, &mut mark))
}

/// How deep `id` sits below stories that were decomposed (0 = an original
/// story), counted through `decomposed_stories`.
pub(crate) fn depth(id: &str, decomposed: &BTreeMap<String, Vec<String>>) -> usize {
    let parent_of = |c: &str| {
        decomposed
            .iter()
            .find(|(_, kids)| kids.iter().any(|k| k == c))
            .map(|(p, _)| p.clone())
    };
    let mut d = 0;
    let mut cur = id.to_string();
    while let Some(p) = parent_of(&cur) {
        d += 1;
        cur = p;
        if d > decomposed.len() {
            break; // a malformed map with a loop must not hang
        }
    }
    d
}

/// The spec text ralph writes for a child: its frontmatter with the
/// parent's dependencies added (the child waits for whatever the parent
/// waited for) and `status: pending`; every other key and the body kept.
pub(crate) fn child_spec(child: &SubStory, inherited: &[String], status_field: &str) -> String {
    let mut deps: Vec<String> = inherited.to_vec();
    for d in &child.depends_on {
        if !deps.contains(d) {
            deps.push(d.clone());
        }
    }
    let (yaml, body) = split_frontmatter(&child.text).unwrap_or(("", &child.text));
    let mut out = String::from("---\n");
    out += &format!("id: \"{}\"\n", child.id);
    out += &format!("title: {}\n", yaml_string(&child.title));
    out += &format!("{status_field}: pending\n");
    let list: Vec<String> = deps.iter().map(|d| format!("\"{d}\"")).collect();
    out += &format!("depends_on: [{}]\n", list.join(", "));
    let replaced = ["id", "title", status_field, "depends_on"];
    let mut skipping = false;
    for line in yaml.lines() {
        let top = !line.starts_with(char::is_whitespace) && !line.starts_with('-');
        if top {
            skipping = replaced.iter().any(|k| sets_key(line, k));
        }
        if !skipping && !line.trim().is_empty() {
            out += line;
            out.push('\n');
        }
    }
    out += "---\n";
    out += body.trim_start_matches('\n');
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

fn yaml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Where a child's spec goes: `specs.pattern` with the ID, and the title's
/// slug for the pattern's `*`.
pub(crate) fn child_spec_path(pattern: &str, child: &SubStory) -> PathBuf {
    let mut slug: String = child
        .title
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    while slug.contains("--") {
        slug = slug.replace("--", "-");
    }
    let slug: String = slug.trim_matches('-').chars().take(40).collect();
    let slug = slug.trim_end_matches('-');
    let slug = if slug.is_empty() {
        format!("sub-{}", child.id.replace('.', "-"))
    } else {
        slug.to_string()
    };
    PathBuf::from(
        spec_glob(pattern, &child.id)
            .replacen('*', &slug, 1)
            .replace('*', ""),
    )
}

/// stories.txt with the parent's line skipped (`x `) and one line per child
/// right after it, so the children keep the parent's batch section. The
/// parent's line is found by the queue's own grammar.
pub(crate) fn insert_in_queue(
    text: &str,
    parent: &str,
    children: &[SubStory],
) -> Result<String, String> {
    let (queue, _) = parse_queue_lenient(text, Path::new(crate::paths::QUEUE));
    let Some(at) = queue
        .entries
        .iter()
        .find(|e| e.id == parent)
        .map(|e| e.line)
    else {
        return Err(format!(
            "story {parent} is not a line of {}",
            crate::paths::QUEUE
        ));
    };
    for c in children {
        if c.title.chars().any(char::is_control) {
            return Err(format!(
                "sub-story {}'s title is not one line of text",
                c.id
            ));
        }
    }
    // The grammar's lines are those after a byte-order mark, which stays
    // where it was.
    let (bom, rest) = match text.strip_prefix('\u{feff}') {
        Some(rest) => ("\u{feff}", rest),
        None => ("", text),
    };
    let mut out = String::with_capacity(text.len() + 64 * children.len());
    out += bom;
    for (i, line) in rest.split_inclusive('\n').enumerate() {
        if i + 1 != at {
            out += line;
            continue;
        }
        let body = line.trim_end_matches(['\n', '\r']);
        let trimmed = body.trim_start();
        let indent = &body[..body.len() - trimmed.len()];
        out += &format!("{indent}x {trimmed}\n");
        for c in children {
            out += &format!("{indent}{} | {}\n", c.id, c.title);
        }
    }
    Ok(out)
}

/// prd.json with the children as user stories right after the parent, and
/// the parent marked `"decomposedInto"` (ralph skips such a story).
pub(crate) fn insert_in_prd(
    text: &str,
    parent: &str,
    children: &[SubStory],
    inherited: &[String],
) -> Result<String, String> {
    let mut doc: serde_json::Value =
        serde_json::from_str(text.strip_prefix('\u{feff}').unwrap_or(text))
            .map_err(|e| e.to_string())?;
    let stories = doc
        .get_mut("userStories")
        .and_then(|v| v.as_array_mut())
        .ok_or("prd.json has no userStories array")?;
    let at = stories
        .iter()
        .position(|s| s.get("id").and_then(|v| v.as_str()) == Some(parent))
        .ok_or_else(|| format!("story {parent} is not in prd.json"))?;
    let priority = stories[at].get("priority").cloned();
    stories[at]["decomposedInto"] = children.iter().map(|c| c.id.clone()).collect();
    for (k, c) in children.iter().enumerate() {
        let mut deps: Vec<String> = inherited.to_vec();
        deps.extend(
            c.depends_on
                .iter()
                .filter(|d| !inherited.contains(d))
                .cloned(),
        );
        let (_, body) = split_frontmatter(&c.text).unwrap_or(("", &c.text));
        let mut s = serde_json::json!({
            "id": c.id,
            "title": c.title,
            "description": body.trim(),
            "acceptanceCriteria": [],
            "dependsOn": deps,
            "passes": false,
        });
        if let Some(p) = &priority {
            s["priority"] = p.clone();
        }
        stories.insert(at + 1 + k, s);
    }
    let mut out = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    out.push('\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A byte-order mark is read as `backlog/` reads it (issue 21): a
    /// sub-story's spec that starts with one has its frontmatter all the
    /// same, and the child spec ralph writes has one frontmatter, no mark.
    #[test]
    fn a_child_spec_with_a_byte_order_mark_is_read_as_the_backlog_reads_it() {
        let text = "<ralph>SUBSTORY_START 3.1.1</ralph>\n\u{feff}---\nid: \"3.1.1\"\ntitle: \"Part one\"\ndepends_on: [\"2.1\"]\nestimation: small\n---\n# Part one\n\nDo it.\n<ralph>SUBSTORY_END 3.1.1</ralph>\n<ralph>DECOMPOSE_DONE 3.1: 1 sub-story</ralph>";
        let Reply::Split(kids) = parse_reply(text, "3.1", &known()).unwrap() else {
            panic!("split")
        };
        let spec = child_spec(&kids[0], &["1.1".to_string()], "status");
        assert!(spec.starts_with("---\n"), "{spec}");
        assert_eq!(spec.matches("---").count(), 2, "{spec}");
        assert!(spec.contains("estimation: small\n") && spec.ends_with("# Part one\n\nDo it.\n"));
        let fm = crate::backlog::parse_frontmatter(&spec, Path::new("s.md")).unwrap();
        assert_eq!(fm.title.as_deref(), Some("Part one"));
        assert_eq!(fm.depends_on, ["1.1", "2.1"]);
        let prd = "{\"userStories\": [{\"id\": \"3.1\", \"title\": \"P\"}]}";
        let out: serde_json::Value =
            serde_json::from_str(&insert_in_prd(prd, "3.1", &kids, &[]).unwrap()).unwrap();
        assert_eq!(out["userStories"][1]["description"], "# Part one\n\nDo it.");
    }

    /// stories.txt with a byte-order mark, the parent on its first line: the
    /// queue's grammar finds it there, and the mark stays.
    #[test]
    fn a_queue_with_a_byte_order_mark_gets_its_children() {
        let kids = [SubStory {
            id: "1.1.1".into(),
            title: "Part".into(),
            depends_on: vec![],
            text: String::new(),
        }];
        let text = "\u{feff}1.1 | First\n1.2 | Second\n";
        let out = insert_in_queue(text, "1.1", &kids).unwrap();
        assert_eq!(out, "\u{feff}x 1.1 | First\n1.1.1 | Part\n1.2 | Second\n");
        let q = crate::backlog::parse_queue(&out, Path::new("stories.txt")).unwrap();
        assert_eq!(q.skipped, ["1.1"]);
        assert_eq!(
            q.entries.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
            ["1.1.1", "1.2"]
        );
    }

    fn known() -> HashSet<String> {
        ["1.1", "2.1"].iter().map(|s| s.to_string()).collect()
    }

    fn block(id: &str, deps: &str) -> String {
        format!(
            "<ralph>SUBSTORY_START {id}</ralph>\n---\nid: \"{id}\"\ntitle: \"Part {id}\"\nstatus: pending\ndepends_on: [{deps}]\nestimation: small\n---\n# Part {id}\n\nDo it.\n<ralph>SUBSTORY_END {id}</ralph>\n"
        )
    }

    #[test]
    fn a_good_reply_gives_the_children_in_order() {
        let text = format!(
            "Here:\n{}{}<ralph>DECOMPOSE_DONE 3.1: 2 sub-stories</ralph>",
            block("3.1.1", ""),
            block("3.1.2", "\"3.1.1\", \"2.1\"")
        );
        let Reply::Split(kids) = parse_reply(&text, "3.1", &known()).unwrap() else {
            panic!("split")
        };
        assert_eq!(
            kids.iter().map(|k| k.id.as_str()).collect::<Vec<_>>(),
            ["3.1.1", "3.1.2"]
        );
        assert_eq!(kids[1].depends_on, ["3.1.1", "2.1"]);
        assert_eq!(kids[0].title, "Part 3.1.1");
    }

    #[test]
    fn a_declined_reply_carries_its_reason() {
        assert_eq!(
            parse_reply(
                "<ralph>DECOMPOSE_FAIL 3.1: too small already</ralph>",
                "3.1",
                &known()
            ),
            Ok(Reply::Declined("too small already".into()))
        );
    }

    #[test]
    fn malformed_replies_are_refused_with_the_reason() {
        let done = "<ralph>DECOMPOSE_DONE 3.1: ok</ralph>";
        let cases = [
            (block("3.1.1", ""), "no <ralph>DECOMPOSE_DONE"),
            (done.to_string(), "no SUBSTORY_START"),
            (format!("{}{done}", block("3.2.1", "")), "must be 3.1.<n>"),
            (format!("{}{done}", block("3.1.x", "")), "must be 3.1.<n>"),
            (format!("{}{done}", block("3.1.1", "\"9.9\"")), "neither a sibling nor a known"),
            (format!("{}{done}", block("3.1.1", "\"3.1\"")), "the story it replaces"),
            (
                format!("{}{}{done}", block("3.1.1", "\"3.1.2\""), block("3.1.2", "\"3.1.1\"")),
                "cycle",
            ),
            (format!("{}{}{done}", block("3.1.1", ""), block("3.1.1", "")), "twice"),
            (
                format!("<ralph>SUBSTORY_START 3.1.1</ralph>\n# no frontmatter\n<ralph>SUBSTORY_END 3.1.1</ralph>{done}"),
                "no frontmatter",
            ),
            (
                format!("<ralph>SUBSTORY_START 3.1.1</ralph>\n---\nid: \"3.1.1\"\n---\nx\n<ralph>SUBSTORY_END 3.1.1</ralph>{done}"),
                "no title",
            ),
            (
                format!("<ralph>SUBSTORY_START 3.1.1</ralph>\n---\ntitle: x\n---\n{done}"),
                "has no <ralph>SUBSTORY_END",
            ),
            (format!("{}<ralph>DECOMPOSE_DONE 3.2: x</ralph>", block("3.1.1", "")), "not 3.1"),
        ];
        for (text, want) in cases {
            let got = parse_reply(&text, "3.1", &known()).unwrap_err();
            assert!(got.contains(want), "{want:?} in {got:?}\n{text}");
        }
    }

    /// A title is one line of stories.txt (issue 21): a line break in it
    /// refuses the reply, naming the sub-story.
    #[test]
    fn a_title_with_a_line_break_is_refused() {
        let done = "<ralph>DECOMPOSE_DONE 3.1: 2</ralph>";
        for title in ["\"One\\nTwo\"", "|\n  One\n  3.9 | Two", "\"One\\rTwo\""] {
            let text = format!(
                "{}<ralph>SUBSTORY_START 3.1.2</ralph>\n---\ntitle: {title}\n---\nx\n<ralph>SUBSTORY_END 3.1.2</ralph>{done}",
                block("3.1.1", "")
            );
            let got = parse_reply(&text, "3.1", &known()).unwrap_err();
            assert!(
                got.contains("sub-story 3.1.2") && got.contains("line break"),
                "{got}\n{text}"
            );
        }
        let kid = SubStory {
            id: "1.2.1".into(),
            title: "A\nB".into(),
            depends_on: vec![],
            text: String::new(),
        };
        assert!(insert_in_queue("1.2 | Two\n", "1.2", &[kid]).is_err());
    }

    #[test]
    fn a_reply_over_the_size_limit_is_refused_saying_its_size() {
        assert_eq!(check_size(MAX_REPLY_BYTES), Ok(()));
        let why = check_size(MAX_REPLY_BYTES + 5).unwrap_err();
        assert!(
            why.contains(&format!("{} bytes", MAX_REPLY_BYTES + 5))
                && why.contains(&format!("limit of {MAX_REPLY_BYTES} bytes")),
            "{why}"
        );
    }

    #[test]
    fn depth_is_counted_through_the_decomposed_map() {
        let mut m = BTreeMap::new();
        m.insert(
            "3.1".to_string(),
            vec!["3.1.1".to_string(), "3.1.2".to_string()],
        );
        m.insert("3.1.2".to_string(), vec!["3.1.2.1".to_string()]);
        assert_eq!(depth("3.1", &m), 0);
        assert_eq!(depth("3.1.1", &m), 1);
        assert_eq!(depth("3.1.2.1", &m), 2);
    }

    #[test]
    fn a_child_spec_inherits_the_parents_dependencies_and_keeps_other_keys() {
        let text = block("3.1.2", "\"3.1.1\"");
        let Reply::Split(kids) = parse_reply(
            &format!(
                "{}{text}<ralph>DECOMPOSE_DONE 3.1: 2</ralph>",
                block("3.1.1", "")
            ),
            "3.1",
            &known(),
        )
        .unwrap() else {
            panic!()
        };
        let spec = child_spec(&kids[1], &["2.1".to_string()], "status");
        assert_eq!(
            spec,
            "---\nid: \"3.1.2\"\ntitle: \"Part 3.1.2\"\nstatus: pending\ndepends_on: [\"2.1\", \"3.1.1\"]\nestimation: small\n---\n# Part 3.1.2\n\nDo it.\n"
        );
        let fm = parse_frontmatter(&spec, Path::new("x")).unwrap();
        assert_eq!(fm.depends_on, ["2.1", "3.1.1"]);
        assert_eq!(
            child_spec_path("specs/epic-{{epic}}/story-{{id}}-*.md", &kids[1]),
            PathBuf::from("specs/epic-3/story-3.1.2-part-3-1-2.md")
        );
    }

    #[test]
    fn the_queue_skips_the_parent_and_lists_the_children_in_its_place() {
        let kids = vec![
            SubStory {
                id: "1.2.1".into(),
                title: "A".into(),
                depends_on: vec![],
                text: String::new(),
            },
            SubStory {
                id: "1.2.2".into(),
                title: "B".into(),
                depends_on: vec![],
                text: String::new(),
            },
        ];
        let q = "# [batch:1]\n1.1 | One\n1.2 | Two\n# [batch:2]\n1.3 | Three\n";
        assert_eq!(
            insert_in_queue(q, "1.2", &kids).unwrap(),
            "# [batch:1]\n1.1 | One\nx 1.2 | Two\n1.2.1 | A\n1.2.2 | B\n# [batch:2]\n1.3 | Three\n"
        );
        assert!(insert_in_queue(q, "9.9", &kids).is_err());
        let prd = r#"{"userStories": [{"id": "US-1", "title": "t", "priority": 2}, {"id": "US-2", "title": "u"}]}"#;
        let kids = vec![SubStory {
            id: "US-1.1".into(),
            title: "A".into(),
            depends_on: vec![],
            text: "---\ntitle: A\n---\nbody".into(),
        }];
        let out: serde_json::Value =
            serde_json::from_str(&insert_in_prd(prd, "US-1", &kids, &["US-0".into()]).unwrap())
                .unwrap();
        let s = out["userStories"].as_array().unwrap();
        assert_eq!(s[0]["decomposedInto"], serde_json::json!(["US-1.1"]));
        assert_eq!(s[1]["id"], "US-1.1");
        assert_eq!(s[1]["dependsOn"], serde_json::json!(["US-0"]));
        assert_eq!(s[1]["priority"], 2);
        assert_eq!(s[1]["description"], "body");
        assert_eq!(s[2]["id"], "US-2");
    }
}
