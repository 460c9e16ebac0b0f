//! Prompt rendering (SPEC 4.1). Pure: the caller supplies the template text
//! and every value.
//!
//! Conditionals are resolved on the *template* before substitution, and
//! substitution is a single left-to-right pass, so nothing inside a value
//! (`&`, `\1`, `$`, `{{LEARNINGS}}`, `{{/if}}`) is ever reinterpreted.

use std::collections::HashMap;

use crate::config::Config;

/// The project's own template, relative to the root: it replaces the
/// built-in one when present (SPEC 4.1).
pub(crate) const TEMPLATE_OVERRIDE: &str = ".ralph/templates/implement.md";

/// The built-in implement template. Its first line names the story.
pub(crate) const BUILTIN_TEMPLATE: &str = "\
You are an autonomous coding agent. Your task is to implement Story {{STORY_ID}}: {{TITLE}}

You work alone, in a git worktree of the project on a branch made for this
story. Implement this one story and nothing else.

## Story specification

{{SPEC_CONTENT}}

{{#if RETRY_CONTEXT}}
## What happened before

{{RETRY_CONTEXT}}

{{/if}}
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
4. Commit your work on the current branch with this message:
   {{COMMIT_MESSAGE}}
{{COMMIT_STAGE_INSTRUCTIONS}}
5. Do not merge, rebase, switch branches or push: ralph lands your commit.
6. End your last message with exactly one status line:
   <ralph>DONE {{STORY_ID}}</ralph> once the story is implemented and committed, or
   <ralph>FAIL {{STORY_ID}}: <reason></ralph> if you could not finish it.
   Anything the agents working on later stories should know, write as
   <ralph>LEARN: <one sentence></ralph>.
{{#if LEARNINGS}}

## Learnings from earlier stories

{{LEARNINGS}}
{{/if}}
";

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

fn shell_quote(s: &str) -> String {
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
        .iter()
        .map(|c| format!("   - Run '{}' for {}", c.cmd, c.name))
        .collect();
    v.set("VALIDATION_COMMANDS", validation.join("\n"));
    let blocked: Vec<String> = config
        .blocked_commands
        .iter()
        .map(|c| format!("   - NEVER run '{c}'"))
        .collect();
    v.set("BLOCKED_COMMANDS", blocked.join("\n"));
    v.set(
        "COMMIT_MESSAGE",
        commit_message(&config.commit_format, input.id, input.title),
    );
    let paths = if config.stage_paths.is_empty() {
        spec_file_paths(input.spec)
    } else {
        config.stage_paths.clone()
    };
    v.set("COMMIT_STAGE_INSTRUCTIONS", stage_instructions(&paths));
    let learnings = if config.learnings_enabled {
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
    fn builtin_first_line_names_the_story() {
        let v = vars(&[("STORY_ID", "1.2"), ("TITLE", "Seed data")]);
        let out = render(BUILTIN_TEMPLATE, &v);
        assert!(out
            .lines()
            .next()
            .unwrap()
            .ends_with("implement Story 1.2: Seed data"));
        assert!(!out.contains("{{#if"));
        assert!(!out.contains("Learnings from earlier"));
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
    fn commit_message_is_literal() {
        assert_eq!(
            commit_message("feat(story-{{id}}): {{title}}", "1.1", "A & {{id}}"),
            "feat(story-1.1): A & {{id}}"
        );
    }
}
