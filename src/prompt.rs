//! Prompt rendering (SPEC 4.1). Pure: the caller supplies the template text
//! and every value.
//!
//! Conditionals are resolved on the *template* before substitution, and
//! substitution is a single left-to-right pass, so nothing inside a value
//! (`&`, `\1`, `$`, `{{LEARNINGS}}`, `{{/if}}`) is ever reinterpreted.

use std::collections::HashMap;

use crate::config::Config;
use crate::state::{FixupCause, Note};

/// The built-in implement template. Cache-friendly (issue 25): everything
/// up to `STORY_PART` is the same, byte for byte, for every story of a run
/// (it names no story and holds only the run's rules and commands), so the
/// providers' prompt caches serve it to every parallel attempt; the story's
/// own part comes last, starting with the line that names it
/// (`… implement Story <id>: <title>`). Learnings stay in the story's part:
/// they are chosen per story, by relevance to its spec.
pub(crate) const BUILTIN_TEMPLATE: &str = "\
You are an autonomous coding agent working through a project's backlog of
stories, one story per run. Your story is described at the end of this prompt.

You work alone, in a git worktree of the project on a branch made for your
story. Implement that one story and nothing else.

## How to work

1. Read the code that is already there before you change it.
2. Implement the story until every acceptance criterion holds.
{{#if VALIDATION_COMMANDS}}
3. Check your work with these commands and fix what they report:
{{VALIDATION_COMMANDS}}
{{/if}}
{{#if BLOCKED_COMMANDS}}
   Commands you must not run:
{{BLOCKED_COMMANDS}}
{{/if}}
4. Commit your work on the current branch with the commit message given
   with your story, staging only the files it names.
5. Do not merge, rebase, switch branches or push: ralph lands your commit.
6. End your last message with exactly one status line naming your story's
   ID: DONE once the story is implemented and committed, FAIL with a
   reason if you could not finish it (the exact lines are given with your
   story). Anything the agents working on later stories should know, write
   as <ralph>LEARN: <one sentence></ralph>.

## Your story

Your task is to implement Story {{STORY_ID}}: {{TITLE}}

Commit message:
   {{COMMIT_MESSAGE}}
{{COMMIT_STAGE_INSTRUCTIONS}}

Status line:
   <ralph>DONE {{STORY_ID}}</ralph> once the story is implemented and committed, or
   <ralph>FAIL {{STORY_ID}}: <reason></ralph> if you could not finish it.

## Story specification

{{SPEC_CONTENT}}
{{#if RETRY_CONTEXT}}

## What happened before

{{RETRY_CONTEXT}}
{{/if}}
{{#if LEARNINGS}}

## Learnings from earlier stories

{{LEARNINGS}}
{{/if}}
";

/// Where the story's own part of `BUILTIN_TEMPLATE` and `FIXUP_TEMPLATE`
/// begins: what comes before it is the same for every story of a run.
pub(crate) const STORY_PART: &str = "## Your story\n";

/// The built-in fix-up template: finished work that could not land goes
/// back to the agent with what went wrong, without the whole story again
/// when its session is resumed. `.ralph/templates/fixup.md` overrides it.
/// Cache-friendly as the implement template (issue 25): up to `STORY_PART`
/// it is the same, byte for byte, for every fix-up of a run (the rules and
/// commands; it names no story, no cause and no way to commit), so a fix-up
/// in a new session shares that prefix with every other one; the story's
/// part comes last, starting with the line that names it (`… implement
/// Story <id>: <title> …`), then what went wrong and how to commit.
pub(crate) const FIXUP_TEMPLATE: &str = "\
You are an autonomous coding agent working through a project's backlog of
stories. Work you finished on your story could not land as it is: your story
and what went wrong are described at the end of this prompt. Fix that work
up; do not start over.

## How to fix it up

1. Read what went wrong and the code as it is now before you change it.
{{#if VALIDATION_COMMANDS}}
2. Run the validation commands and fix what they report:
{{VALIDATION_COMMANDS}}
{{/if}}
{{#if BLOCKED_COMMANDS}}
   Commands you must not run:
{{BLOCKED_COMMANDS}}
{{/if}}
3. Commit your fix as told with your story.
4. Do not rebase, reset, abort the merge, switch branches or push: ralph lands your commit.
5. End your last message with exactly one status line naming your story's
   ID: DONE once it is fixed and committed, FAIL with a reason if you could
   not fix it (the exact lines are given with your story).

## Your story

Your work to implement Story {{STORY_ID}}: {{TITLE}} is finished, but it could not land on {{TARGET}} as it is. Fix it up; do not start over.

{{#if LANDED_STORIES}}
While you worked, these stories landed on {{TARGET}}:
{{LANDED_STORIES}}

{{/if}}
{{#if CONFLICT_FILES}}
## Merge conflict

This worktree is at the new {{TARGET}}, with your work being merged in. The
merge is in progress and these files conflict (they hold conflict markers):
{{CONFLICT_FILES}}

Resolve every conflict so that both intents survive: what the stories that
landed meanwhile did, and what this story does. Leave no conflict marker.

{{/if}}
{{#if MERGE_CLEAN}}
## Merge

This worktree is at the new {{TARGET}}, with your work being merged in; the
merge applied without conflicts this time. Check that the two still fit together.

{{/if}}
{{#if FAILED_COMMAND}}
## Validation failed

Your work, merged onto {{TARGET}}, failed the required check '{{FAILED_NAME}}'
(`{{FAILED_COMMAND}}`). The end of its output (all of it is in
{{VALIDATION_LOG}} under the project directory):

```
{{VALIDATION_OUTPUT}}
```

This worktree holds your work merged onto {{TARGET}}. Find the cause and fix it.

{{/if}}
{{#if GATE_FINDINGS}}
## Checks before landing

Your work, merged onto {{TARGET}}, weakens the checks it must pass or drops
what another story landed. Each finding (file, line, what changed):
{{GATE_FINDINGS}}

Restore each one: the deleted or skipped tests, the assertions, the
validation settings, the other story's lines. If a change is truly part of
the story, say why in one line instead, and the story waits for a person:
   <ralph>TESTS_CHANGED {{STORY_ID}}: <reason></ralph> for tests and their settings,
   <ralph>DROPS {{STORY_ID}}: <reason></ralph> for another story's lines.

{{/if}}
{{#if REVIEW_TEXT}}
## Review

Your work passed validation on {{TARGET}}, but a reviewer asked for changes:

{{REVIEW_TEXT}}

Make them on this worktree (your work merged onto {{TARGET}}).

{{/if}}
{{#if RETRY_CONTEXT}}
## Also

{{RETRY_CONTEXT}}

{{/if}}
## Then

{{#if MERGE_IN_PROGRESS}}
Stage the files you changed (`git add -- <path>`) and run `git commit --no-edit`:
that concludes the merge with the message ralph prepared.
{{/if}}
{{#if MERGE_COMMITTED}}
Commit your fix on the current branch with this message:
   {{COMMIT_MESSAGE}}
{{/if}}

Status line:
   <ralph>DONE {{STORY_ID}}</ralph> once it is fixed and committed, or
   <ralph>FAIL {{STORY_ID}}: <reason></ralph> if you could not fix it.
{{#if SPEC_CONTENT}}

## Story specification (for reference)

{{SPEC_CONTENT}}
{{/if}}
";

/// What the review gate's reviewer is shown.
#[derive(Debug, Clone)]
pub(crate) struct ReviewInput<'a> {
    pub(crate) id: &'a str,
    pub(crate) title: &'a str,
    pub(crate) target: &'a str,
    pub(crate) spec: &'a str,
    pub(crate) diff: &'a str,
    /// The end of the validation output (empty: none configured).
    pub(crate) validation: &'a str,
}

/// The review gate's prompt (issue 26): read-only, one verdict tag.
pub(crate) fn review_prompt(r: &ReviewInput<'_>) -> String {
    let validation = if r.validation.trim().is_empty() {
        "No validation output (no required validation command is configured).".to_string()
    } else {
        format!(
            "The required validation commands passed on the merged tree; the end of their \
             output:\n\n```\n{}\n```",
            r.validation.trim_end()
        )
    };
    format!(
        "You are reviewing another coding agent's work on Story {id}: {title}, before it lands \
         on {target}. This worktree holds that work merged onto {target}. Read only: change \
         no file, make no commit.\n\n## The story\n\n{spec}\n\n## The change (against \
         {target})\n\n```diff\n{diff}\n```\n\n## Validation\n\n{validation}\n\n## Your \
         answer\n\nCheck that the change does what the story asks, keeps the tests honest and \
         breaks nothing else. End your last message with exactly one line:\n\
         <ralph>APPROVE {id}</ralph> when it may land as it is, or\n\
         <ralph>CHANGES {id}: <what must change, specific enough to act on></ralph>\n",
        id = r.id,
        title = r.title,
        target = r.target,
        spec = r.spec.trim_end(),
        diff = r.diff.trim_end(),
    )
}

/// Lines of a failed validation's output a fix-up prompt shows.
pub(crate) const TAIL_LINES: usize = 200;
/// Bytes of it, at most.
pub(crate) const TAIL_BYTES: usize = 16 * 1024;

/// The end of a command's output for a prompt: its last `TAIL_LINES` lines,
/// cut to the last `TAIL_BYTES` bytes at a line start where one is near.
pub(crate) fn output_tail(text: &str) -> String {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let start = body
        .rmatch_indices('\n')
        .nth(TAIL_LINES - 1)
        .map_or(0, |(i, _)| i + 1);
    let mut tail = &body[start..];
    if tail.len() > TAIL_BYTES {
        let mut cut = tail.len() - TAIL_BYTES;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        tail = &tail[cut..];
        if let Some(nl) = tail.find('\n') {
            tail = &tail[nl + 1..];
        }
    }
    tail.to_string()
}

/// What a fix-up prompt is made of, besides the config.
#[derive(Debug, Clone)]
pub(crate) struct FixupInput<'a> {
    pub(crate) id: &'a str,
    pub(crate) title: &'a str,
    pub(crate) target: &'a str,
    pub(crate) cause: &'a FixupCause,
    /// Files the merge in progress left conflicted (none when it applied
    /// cleanly or ralph committed it).
    pub(crate) conflicts: &'a [String],
    /// The merge is left in progress for the agent's commit to conclude.
    pub(crate) merging: bool,
    /// Stories that landed on the target since the work began: (ID, title).
    pub(crate) landed: &'a [(String, String)],
    /// The story's spec, unless the agent's session is resumed (it has it).
    pub(crate) spec: Option<&'a str>,
    /// Anything else the note says (an interrupted attempt's kept work).
    pub(crate) extra: &'a str,
}

/// The variables of the fix-up template.
pub(crate) fn fixup_vars(config: &Config, input: &FixupInput<'_>) -> Vars {
    let mut v = vars_for(
        config,
        &PromptInput {
            id: input.id,
            title: input.title,
            spec: input.spec.unwrap_or(""),
            learnings: &[],
            retry_context: Some(input.extra),
        },
    );
    v.set("TARGET", input.target);
    let landed: Vec<String> = input
        .landed
        .iter()
        .map(|(id, title)| format!("   - Story {id}: {title}"))
        .collect();
    v.set("LANDED_STORIES", landed.join("\n"));
    let files: Vec<String> = input
        .conflicts
        .iter()
        .map(|p| format!("   - `{p}`"))
        .collect();
    v.set("CONFLICT_FILES", files.join("\n"));
    let conflict_cause = matches!(input.cause, FixupCause::Conflict { .. });
    let clean = conflict_cause && input.merging && input.conflicts.is_empty();
    v.set("MERGE_CLEAN", if clean { "yes" } else { "" });
    v.set("MERGE_IN_PROGRESS", if input.merging { "yes" } else { "" });
    v.set("MERGE_COMMITTED", if input.merging { "" } else { "yes" });
    let findings = match input.cause {
        FixupCause::Gate { findings, .. } => findings
            .iter()
            .map(|f| format!("   - {}", f.line_text()))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    v.set("GATE_FINDINGS", findings);
    let review = match input.cause {
        FixupCause::Review { text } => text.trim(),
        _ => "",
    };
    v.set("REVIEW_TEXT", review);
    match input.cause {
        FixupCause::Validation {
            name,
            cmd,
            tail,
            log,
        } => {
            v.set("FAILED_NAME", name.as_str());
            v.set("FAILED_COMMAND", cmd.as_str());
            v.set("VALIDATION_OUTPUT", tail.trim_end());
            v.set("VALIDATION_LOG", log.as_str());
        }
        FixupCause::Conflict { .. } | FixupCause::Gate { .. } | FixupCause::Review { .. } => {
            for k in [
                "FAILED_NAME",
                "FAILED_COMMAND",
                "VALIDATION_OUTPUT",
                "VALIDATION_LOG",
            ] {
                v.set(k, "");
            }
        }
    }
    v
}

/// What a fresh start is told about finished work it replaces: the fix-up
/// the note announced, in words, and anything else the note says.
pub(crate) fn note_context(note: &Note, target: &str) -> String {
    let mut parts = Vec::new();
    if let Some(f) = &note.fixup {
        parts.push(match &f.cause {
            FixupCause::Conflict { paths } => conflict_redo(target, paths, &f.work),
            FixupCause::Gate { findings, .. } => format!(
                "Your earlier work on this story weakened its checks or dropped what another \
                 story landed:\n{}\n\nThat work is kept at the git ref {}. Start from the \
                 current code and keep every test, assertion and landed line.",
                findings
                    .iter()
                    .map(|f| format!("- {}", f.line_text()))
                    .collect::<Vec<_>>()
                    .join("\n"),
                f.work
            ),
            FixupCause::Review { text } => format!(
                "A reviewer asked for changes to your earlier work on this story:\n\n{}\n\n\
                 That work is kept at the git ref {}.",
                text.trim(),
                f.work
            ),
            FixupCause::Validation { name, tail, .. } => format!(
                "Your earlier work on this story failed the required check '{name}' once \
                 merged onto {target}; the end of its output:\n\n```\n{}\n```\n\nThat work is \
                 kept at the git ref {}. Start from the current code and make the check pass.",
                tail.trim_end(),
                f.work
            ),
        });
    }
    if !note.text.is_empty() {
        parts.push(note.text.clone());
    }
    parts.join("\n\n")
}

/// A conflict the next attempt redoes from scratch.
pub(crate) fn conflict_redo(target: &str, paths: &[String], kept: &str) -> String {
    let where_ = if paths.is_empty() {
        "some files".to_string()
    } else {
        paths.join(", ")
    };
    format!(
        "Your earlier work on this story conflicted with changes that landed on {target} \
         meanwhile (in {where_}). That work is kept at the git ref {kept}. Start from the \
         current code, which includes those changes, and implement the story again on top of it."
    )
}

/// A failed attempt the next one starts over from.
pub(crate) fn failed_before(reason: &str, kept: Option<&str>) -> String {
    let mut s = format!("The previous attempt at this story failed: {reason}.");
    if let Some(r) = kept {
        s.push_str(&format!(
            " Its commits are kept at the git ref {r} if you want to look at them; \
             you start again from the current code."
        ));
    }
    s
}

/// The note's text with what a person said for this attempt (`ralph note
/// ID TEXT`) after it.
pub(crate) fn with_user_note(text: &str, said: &str) -> String {
    let said = format!("A note from the person running ralph, for this attempt:\n\n{said}");
    if text.trim().is_empty() {
        said
    } else {
        format!("{}\n\n{said}", text.trim_end())
    }
}

/// An attempt stopped before it finished (Ctrl-C, a killed run): where
/// what it had done is kept.
pub(crate) fn interrupted_before(kept: &[String]) -> String {
    format!(
        "An earlier attempt at this story was interrupted before it finished. What it had \
         done is kept at the git ref{} {}; look at it (`git show <ref>`) and reuse what helps.",
        if kept.len() == 1 { "" } else { "s" },
        kept.join(", ")
    )
}

/// Variables whose emptiness `{{#if VAR}}` tests, and which are substituted.
#[derive(Debug, Clone, Default)]
pub(crate) struct Vars {
    map: HashMap<String, String>,
}

impl Vars {
    pub(crate) fn set(&mut self, key: &str, value: impl Into<String>) {
        self.map.insert(key.to_string(), value.into());
    }

    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.map.get(key).map(String::as_str)
    }
}

/// Renders `template` with `vars`.
pub(crate) fn render(template: &str, vars: &Vars) -> String {
    substitute(&resolve_conditionals(template, vars), vars)
}

/// Drops `{{#if VAR}}`/`{{/if}}` lines, and the lines between them when
/// VAR is empty or unknown. Tags must sit on their own lines.
pub(crate) fn resolve_conditionals(template: &str, vars: &Vars) -> String {
    let mut out = String::with_capacity(template.len());
    // Depth of nested blocks being skipped (0 = emitting).
    let mut skip_depth = 0usize;
    for line in template.split_inclusive('\n') {
        if let Some(var) = if_tag(line) {
            if skip_depth > 0 {
                skip_depth += 1;
            } else if vars.get(var).is_none_or(|v| v.trim().is_empty()) {
                skip_depth = 1;
            }
            continue;
        }
        if line.contains("{{/if}}") {
            skip_depth = skip_depth.saturating_sub(1);
            continue;
        }
        if skip_depth == 0 {
            out.push_str(line);
        }
    }
    out
}

fn if_tag(line: &str) -> Option<&str> {
    let start = line.find("{{#if ")? + "{{#if ".len();
    let end = line[start..].find("}}")? + start;
    Some(line[start..end].trim())
}

/// Replaces each `{{NAME}}` of a known variable; everything else stays.
pub(crate) fn substitute(text: &str, vars: &Vars) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        match after.find("}}") {
            Some(close) if vars.get(&after[..close]).is_some() => {
                out.push_str(vars.get(&after[..close]).unwrap_or_default());
                rest = &after[close + 2..];
            }
            _ => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `commit.format` with `{{id}}` and `{{title}}` replaced (literally).
pub(crate) fn commit_message(format: &str, id: &str, title: &str) -> String {
    let mut v = Vars::default();
    v.set("id", id);
    v.set("title", title);
    substitute(format, &v)
}

/// The backticked path at the start of each line under a spec's
/// "Files to Create/Modify" heading, until the next heading.
pub(crate) fn spec_file_paths(spec: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in spec.lines() {
        let t = line.trim_start();
        if t.starts_with('#') {
            let heading = t.trim_start_matches('#').trim().to_ascii_lowercase();
            inside = heading.starts_with("files to create/modify")
                || heading.starts_with("files to create or modify");
            continue;
        }
        if !inside {
            continue;
        }
        if let Some(start) = t.find('`') {
            if let Some(len) = t[start + 1..].find('`') {
                let p = &t[start + 1..start + 1 + len];
                if !p.is_empty() && !out.iter().any(|o| o == p) {
                    out.push(p.to_string());
                }
            }
        }
    }
    out
}

/// `s` as one shell word: bare when that is safe, else single-quoted.
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%=,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The staging instructions: scoped to the story's files when known.
pub(crate) fn stage_instructions(paths: &[String]) -> String {
    if paths.is_empty() {
        return "   Stage only the files this story touches, naming each one \
                (`git add -- <path>`); never `git add -A` or `git add .`."
            .to_string();
    }
    let mut s =
        String::from("   Stage only the story's files (never `git add -A` or `git add .`):\n");
    for p in paths {
        s.push_str(&format!("     - `{p}`\n"));
    }
    let quoted: Vec<String> = paths.iter().map(|p| shell_quote(p)).collect();
    s.push_str(&format!("   Run: `git add -- {}`", quoted.join(" ")));
    s
}

/// Everything needed to render one story's prompt.
#[derive(Debug, Clone)]
pub(crate) struct PromptInput<'a> {
    pub(crate) id: &'a str,
    pub(crate) title: &'a str,
    pub(crate) spec: &'a str,
    pub(crate) learnings: &'a [String],
    /// Set on a redo: what went wrong before (conflict, failure).
    pub(crate) retry_context: Option<&'a str>,
}

/// Builds the variables of SPEC 4.1 from the config and the story.
pub(crate) fn vars_for(config: &Config, input: &PromptInput<'_>) -> Vars {
    let mut v = Vars::default();
    v.set("STORY_ID", input.id);
    v.set("TITLE", input.title);
    v.set("SPEC_CONTENT", input.spec);
    let validation: Vec<String> = config
        .validation
        .commands
        .iter()
        .map(|c| format!("   - Run '{}' for {}", c.cmd, c.name))
        .collect();
    v.set("VALIDATION_COMMANDS", validation.join("\n"));
    let blocked: Vec<String> = config
        .validation
        .blocked_commands
        .iter()
        .map(|c| format!("   - NEVER run '{c}'"))
        .collect();
    v.set("BLOCKED_COMMANDS", blocked.join("\n"));
    v.set(
        "COMMIT_MESSAGE",
        commit_message(&config.commit.format, input.id, input.title),
    );
    let paths = if config.commit.stage_paths.is_empty() {
        spec_file_paths(input.spec)
    } else {
        config.commit.stage_paths.clone()
    };
    v.set("COMMIT_STAGE_INSTRUCTIONS", stage_instructions(&paths));
    let learnings = if config.learnings.enabled {
        input.learnings.join("\n")
    } else {
        String::new()
    };
    v.set("LEARNINGS", learnings);
    v.set("RETRY_CONTEXT", input.retry_context.unwrap_or(""));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vars {
        let mut v = Vars::default();
        for (k, val) in pairs {
            v.set(k, *val);
        }
        v
    }

    #[test]
    fn substitution_is_literal() {
        let v = vars(&[
            ("SPEC_CONTENT", "a && b $1 \\1 {{LEARNINGS}} {{/if}}"),
            ("LEARNINGS", "L"),
        ]);
        let out = render("X {{SPEC_CONTENT}} Y {{LEARNINGS}} {{UNKNOWN}}", &v);
        assert_eq!(out, "X a && b $1 \\1 {{LEARNINGS}} {{/if}} Y L {{UNKNOWN}}");
    }

    #[test]
    fn conditionals_drop_empty_blocks_with_nesting() {
        let t =
            "a\n{{#if A}}\nin-a\n{{#if B}}\nin-b\n{{/if}}\n{{/if}}\n{{#if C}}\nin-c\n{{/if}}\nz\n";
        assert_eq!(
            render(t, &vars(&[("A", ""), ("B", "x"), ("C", "y")])),
            "a\nin-c\nz\n"
        );
        assert_eq!(
            render(t, &vars(&[("A", "1"), ("B", ""), ("C", "")])),
            "a\nin-a\nz\n"
        );
    }

    #[test]
    fn value_with_if_tags_is_not_a_block() {
        let t = "{{#if S}}\n{{S}}\n{{/if}}\nend\n";
        assert_eq!(
            render(t, &vars(&[("S", "{{#if X}}\nhidden?\n{{/if}}")])),
            "{{#if X}}\nhidden?\n{{/if}}\nend\n"
        );
    }

    #[test]
    fn builtin_story_part_begins_with_the_line_naming_the_story() {
        // Issue 25 moved the story's line from the first line to the start
        // of the story's part, after what every story of a run shares.
        let v = vars(&[("STORY_ID", "1.2"), ("TITLE", "Seed data")]);
        let out = render(BUILTIN_TEMPLATE, &v);
        let (_, story) = out.split_once(STORY_PART).unwrap();
        assert!(story
            .lines()
            .find(|l| !l.is_empty())
            .unwrap()
            .ends_with("implement Story 1.2: Seed data"));
        assert!(!out.contains("{{#if"));
        assert!(!out.contains("Learnings from earlier"));
    }

    #[test]
    fn two_stories_share_the_static_part_byte_for_byte() {
        let mut c = config();
        c.validation.blocked_commands = vec!["rm -rf /".into()];
        let one = |id: &str, title: &str, spec: &str, learnings: &[String]| {
            let input = PromptInput {
                id,
                title,
                spec,
                learnings,
                retry_context: Some(id).filter(|i| *i == "2.7"),
            };
            render(BUILTIN_TEMPLATE, &vars_for(&c, &input))
        };
        let a = one(
            "1.1",
            "Seed",
            "# A\n## Files to Create/Modify\n- `a.rs`\n",
            &[],
        );
        let b = one(
            "2.7",
            "Other",
            "# B\n",
            &["[Story 1.1] a lesson".to_string()],
        );
        let shared = a.find(STORY_PART).unwrap() + STORY_PART.len();
        assert_eq!(a[..shared], b[..shared]);
        for part in [&a[..shared], &b[..shared]] {
            assert!(!part.contains("1.1") && !part.contains("2.7"), "{part}");
            assert!(part.contains("NEVER run 'rm -rf /'"), "{part}");
        }
    }

    /// Fix-ups too (issue 25): two stories' fix-ups for different causes,
    /// one resumed (no spec) and one not, one merging and one committed,
    /// share everything up to `STORY_PART` byte for byte.
    #[test]
    fn two_fixups_share_the_static_part_byte_for_byte() {
        let mut c = config();
        c.validation.blocked_commands = vec!["rm -rf /".into()];
        let conflict = FixupCause::Conflict {
            paths: vec!["a.rs".into()],
        };
        let failed = FixupCause::Validation {
            name: "tests".into(),
            cmd: "make test".into(),
            tail: "FAILED: parser\n".into(),
            log: ".ralph/logs/2.7/validation-1.log".into(),
        };
        let review = FixupCause::Review {
            text: "Name the flag.".into(),
        };
        let landed = [("3.1".to_string(), "Landed meanwhile".to_string())];
        let conflicts = ["a.rs".to_string()];
        let render_one = |id, title, cause, merging, files: &[String], spec, extra| {
            let input = FixupInput {
                id,
                title,
                target: "main",
                cause,
                conflicts: files,
                merging,
                landed: &landed,
                spec,
                extra,
            };
            render(FIXUP_TEMPLATE, &fixup_vars(&c, &input))
        };
        let a = render_one("1.1", "Seed", &conflict, true, &conflicts, None, "");
        let b = render_one(
            "2.7",
            "Other",
            &failed,
            false,
            &[],
            Some("# B\n## Files to Create/Modify\n- `b.rs`\n"),
            "An earlier attempt was interrupted.",
        );
        let d = render_one("4.2", "Third", &review, false, &[], None, "");
        let shared = a.find(STORY_PART).unwrap() + STORY_PART.len();
        for other in [&b, &d] {
            assert_eq!(a[..shared], other[..shared], "{other}");
        }
        let part = &a[..shared];
        for story_own in [
            "1.1",
            "2.7",
            "4.2",
            "Seed",
            "main",
            "a.rs",
            "make test",
            "--no-edit",
            "feat(",
        ] {
            assert!(!part.contains(story_own), "{story_own} in:\n{part}");
        }
        assert!(part.contains("NEVER run 'rm -rf /'"), "{part}");
        // The story's part names it first, as the implement prompt's does.
        for (out, line) in [
            (&a, "implement Story 1.1: Seed"),
            (&b, "implement Story 2.7: Other"),
            (&d, "implement Story 4.2: Third"),
        ] {
            let first = out[shared..].lines().find(|l| !l.is_empty()).unwrap();
            assert!(first.contains(line), "{first}");
        }
    }

    /// Decomposition and timeout postmortem prompts too (issue 25): what two
    /// stories' prompts share up to `STORY_PART` is byte-identical and names
    /// neither; the story's part names it first and gives its exact tags.
    #[test]
    fn two_splits_and_two_postmortems_share_the_static_part_byte_for_byte() {
        let split = |id: &str, title: &str, history: &str| {
            let v = vars(&[
                ("STORY_ID", id),
                ("TITLE", title),
                ("SPEC_CONTENT", "# Spec\n"),
                ("FAILURE_HISTORY", history),
                ("LAST_OUTPUT", ""),
                ("LEARNINGS", "- [Story 0.1] a lesson"),
                ("RETRY_COUNT", "3"),
            ]);
            render(crate::decompose::TEMPLATE, &v)
        };
        let postmortem = |id: &str, timeout: &str| {
            let v = vars(&[
                ("STORY_ID", id),
                ("SPEC_CONTENT", "# Spec\n"),
                ("PARTIAL_OUTPUT", "running the whole suite"),
                ("TIMEOUT", timeout),
            ]);
            render(crate::postmortem::TEMPLATE, &v)
        };
        let pairs = [
            (
                split("1.1", "Seed", ""),
                split("2.7", "Other", "attempt 1: FAIL"),
            ),
            (postmortem("1.1", "30m"), postmortem("2.7", "1h")),
        ];
        for (a, b) in &pairs {
            let shared = a.find(STORY_PART).unwrap() + STORY_PART.len();
            assert_eq!(a[..shared], b[..shared]);
            let part = &a[..shared];
            for story_own in ["1.1", "2.7", "Seed", "{{"] {
                assert!(!part.contains(story_own), "{story_own} in:\n{part}");
            }
        }
        let story = &pairs[0].1[pairs[0].1.find(STORY_PART).unwrap()..];
        for want in [
            "Split Story 2.7: Other. It failed 3 times.",
            "<ralph>DECOMPOSE_DONE 2.7: <how many> sub-stories</ralph>",
            "<ralph>DECOMPOSE_FAIL 2.7: <why></ralph>",
            "attempt 1: FAIL",
            "[Story 0.1] a lesson",
        ] {
            assert!(story.contains(want), "{want} missing:\n{story}");
        }
        // What the test harness's fake agents look for.
        assert!(pairs[0].0.contains("Split it into smaller sub-stories"));
        let story = &pairs[1].1[pairs[1].1.find(STORY_PART).unwrap()..];
        for want in [
            "Story 2.7 ran out of time: its agent was stopped after 1h",
            "<ralph>LEARN: [Timeout postmortem for 2.7] <one sentence></ralph>",
            "<ralph>TIMEOUT_POSTMORTEM_DONE 2.7</ralph>",
            "running the whole suite",
        ] {
            assert!(story.contains(want), "{want} missing:\n{story}");
        }
    }

    #[test]
    fn files_section_gives_stage_paths() {
        let spec = "# S\n## Files to Create/Modify\n- `src/a.sh` — create\n- `src/b c.sh` — modify\n## Next\n- `no.sh`\n";
        let paths = spec_file_paths(spec);
        assert_eq!(paths, vec!["src/a.sh", "src/b c.sh"]);
        let s = stage_instructions(&paths);
        assert!(s.contains("git add -- src/a.sh 'src/b c.sh'"), "{s}");
    }

    #[test]
    fn output_tail_keeps_the_last_lines_within_the_byte_cap() {
        let many: String = (1..=500).map(|i| format!("{i}\n")).collect();
        let t = output_tail(&many);
        assert_eq!(t.lines().count(), TAIL_LINES);
        assert!(t.starts_with("301\n") && t.ends_with("\n500"), "{t}");
        let wide: String = (0..300).map(|i| format!("{i:>120}\n")).collect();
        let t = output_tail(&wide);
        assert!(t.len() <= TAIL_BYTES);
        assert!(t.ends_with("299"));
        assert_eq!(t.lines().next().unwrap().len(), 120, "cut at a line start");
        assert_eq!(output_tail("short\n"), "short");
        assert!(output_tail(&"é".repeat(20_000)).len() <= TAIL_BYTES);
    }

    fn config() -> Config {
        crate::config::from_value(
            crate::config::defaults(),
            std::path::Path::new(".ralph/config.json"),
        )
        .unwrap()
    }

    #[test]
    fn a_conflict_fixup_prompt_names_the_files_and_what_landed() {
        let cause = FixupCause::Conflict {
            paths: vec!["FEATURES.md".into()],
        };
        let landed = [("1.2".to_string(), "Other thing".to_string())];
        let conflicts = ["FEATURES.md".to_string()];
        let input = FixupInput {
            id: "1.1",
            title: "Title",
            target: "main",
            cause: &cause,
            conflicts: &conflicts,
            merging: true,
            landed: &landed,
            spec: None,
            extra: "",
        };
        let out = render(FIXUP_TEMPLATE, &fixup_vars(&config(), &input));
        // Issue 25 moved the story's line from the first line to the start
        // of the story's part, after what every fix-up of a run shares.
        let (_, story) = out.split_once(STORY_PART).unwrap();
        let first = story.lines().find(|l| !l.is_empty()).unwrap();
        assert!(first.contains("implement Story 1.1: Title"), "{first}");
        for want in [
            "   - `FEATURES.md`",
            "   - Story 1.2: Other thing",
            "both intents",
            "git commit --no-edit",
            "<ralph>DONE 1.1</ralph>",
        ] {
            assert!(out.contains(want), "{want} missing:\n{out}");
        }
        for unwanted in ["{{", "Story specification", "Validation failed", "## Also"] {
            assert!(!out.contains(unwanted), "{unwanted} in:\n{out}");
        }
    }

    #[test]
    fn a_validation_fixup_prompt_shows_the_command_and_its_output() {
        let cause = FixupCause::Validation {
            name: "tests".into(),
            cmd: "make test".into(),
            tail: "ok 1\nFAILED: parser\n".into(),
            log: ".ralph/logs/1.1/validation-1.log".into(),
        };
        let input = FixupInput {
            id: "1.1",
            title: "Title",
            target: "main",
            cause: &cause,
            conflicts: &[],
            merging: false,
            landed: &[],
            spec: Some("SPEC BODY"),
            extra: "An earlier attempt was interrupted.",
        };
        let out = render(FIXUP_TEMPLATE, &fixup_vars(&config(), &input));
        for want in [
            "'tests'",
            "`make test`",
            "ok 1\nFAILED: parser\n```",
            ".ralph/logs/1.1/validation-1.log",
            "feat(story-1.1): Title",
            "SPEC BODY",
            "An earlier attempt was interrupted.",
        ] {
            assert!(out.contains(want), "{want} missing:\n{out}");
        }
        for unwanted in ["{{", "--no-edit", "Merge conflict", "landed on main:"] {
            assert!(!out.contains(unwanted), "{unwanted} in:\n{out}");
        }
        // A fresh start told about it instead gets the same facts.
        let note = Note {
            text: String::new(),
            fixup: Some(crate::state::Fixup {
                cause,
                work: "refs/ralph/attempts/1.1/1".into(),
                attempt: 1,
                fresh_session: false,
            }),
            redo: false,
            decompose: false,
            closest: None,
        };
        let ctx = note_context(&note, "main");
        assert!(
            ctx.contains("FAILED: parser") && ctx.contains("refs/ralph/attempts/1.1/1"),
            "{ctx}"
        );
    }

    #[test]
    fn commit_message_is_literal() {
        assert_eq!(
            commit_message("feat(story-{{id}}): {{title}}", "1.1", "A & {{id}}"),
            "feat(story-1.1): A & {{id}}"
        );
    }
}
