//! Commands that print what ralph knows rather than change anything:
//! `learnings`, `template show`.

use std::io::Write;
use std::path::Path;

use crate::error::EXIT_OK;
use crate::ui;

pub(super) fn cmd_learnings(root: &Path) -> anyhow::Result<i32> {
    let all = crate::learnings::load_by_file(root);
    if all.is_empty() {
        println!("no learnings yet (agents record them with <ralph>LEARN: ...</ralph>)");
    }
    let mut out = std::io::stdout().lock();
    for (file, line) in all {
        if writeln!(out, "{}: {}", file.display(), crate::learnings::body(&line)).is_err() {
            break;
        }
    }
    Ok(EXIT_OK)
}

pub(super) fn cmd_template_show(root: &Path, builtin: bool) -> anyhow::Result<i32> {
    let custom = root.join(crate::paths::IMPLEMENT_TEMPLATE);
    let text = match std::fs::read_to_string(&custom) {
        Ok(t) if !builtin => {
            if !ui::get().quiet {
                eprintln!(
                    "({} overrides the built-in template; `ralph template show --builtin` prints that one)",
                    crate::paths::IMPLEMENT_TEMPLATE
                );
            }
            t
        }
        _ => crate::prompt::BUILTIN_TEMPLATE.to_string(),
    };
    print!("{text}");
    Ok(EXIT_OK)
}
