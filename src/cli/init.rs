//! `ralph init`: scaffold `.ralph/` in a repository.

use std::io::Write;
use std::path::Path;

use crate::error::EXIT_OK;

const INIT_CONFIG: &str = r#"{
  "specs": { "pattern": "specs/epic-{{epic}}/story-{{id}}-*.md" },
  "loop": { "timeout_seconds": 1800, "max_retries": 3 },
  "validation": { "commands": [] },
  "parallel": { "enabled": false, "max_concurrent": 4 }
}
"#;

const INIT_STORIES: &str = "\
# Story queue: one `ID | Title` per line, in the order you want them.
# `# [batch:N]` starts a section whose stories wait for every earlier section.
# Specs live in specs/epic-<N>/story-<ID>-<slug>.md (see .ralph/config.json).
";

pub(super) fn cmd_init(root: &Path) -> anyhow::Result<i32> {
    // Every run works in git worktrees and lands through git: a project
    // outside a repository could only fail later, at `ralph run`.
    if crate::gitops::Git::open(root).is_err() {
        return Err(crate::error::RalphError::usage(format!(
            "{} is not inside a git repository; ralph runs its agents in git worktrees and \
             lands their work with git",
            root.display()
        ))
        .with_hint(format!(
            "run `git init && git commit --allow-empty -m init` in {} first (or `ralph init` \
             inside an existing repository)",
            root.display()
        ))
        .into());
    }
    let ralph = root.join(crate::paths::DIR);
    std::fs::create_dir_all(&ralph)?;
    let mut made = Vec::new();
    for (path, content) in [
        (ralph.join("config.json"), INIT_CONFIG),
        (ralph.join("stories.txt"), INIT_STORIES),
    ] {
        if !path.exists() {
            std::fs::write(&path, content)?;
            made.push(
                path.strip_prefix(root)
                    .unwrap_or(&path)
                    .display()
                    .to_string(),
            );
        }
    }
    std::fs::create_dir_all(root.join("specs"))?;
    let gi = root.join(".gitignore");
    let existing = std::fs::read_to_string(&gi).unwrap_or_default();
    let missing: Vec<&str> = crate::paths::RUNTIME_PATTERNS
        .iter()
        .copied()
        .filter(|p| !existing.lines().any(|l| l.trim() == *p))
        .collect();
    if !missing.is_empty() {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&gi)?;
        if !existing.is_empty() && !existing.ends_with('\n') {
            writeln!(f)?;
        }
        writeln!(f, "# ralph runtime files")?;
        for p in missing {
            writeln!(f, "{p}")?;
        }
        made.push(".gitignore (runtime paths)".into());
    }
    println!("Created: {}", made.join(", "));
    println!(
        "Next: add stories to {} and specs under specs/, commit, then `ralph run`.",
        crate::paths::QUEUE
    );
    Ok(EXIT_OK)
}
