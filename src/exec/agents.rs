//! Which agent executable each backend runs, found before anything runs
//! (on this machine; a cluster's nodes check their own).

use std::collections::HashMap;
use std::path::Path;

use crate::agent::{self, Backend};
use crate::error::RalphError;
use crate::paths;
use crate::project::Project;

/// The agent executable: a project-local one (`bin/agent`) is found from the
/// project root, not from the worktree the child starts in; a bare name is
/// looked up on PATH. `None` when it does not exist.
pub(crate) fn resolve_agent(root: &Path, program: &str) -> Option<String> {
    if program.contains('/') {
        let p = Path::new(program);
        let p = if p.is_relative() {
            root.join(p)
        } else {
            p.to_path_buf()
        };
        p.is_file().then(|| p.display().to_string())
    } else {
        let paths = std::env::var_os("PATH")?;
        std::env::split_paths(&paths)
            .any(|d| d.join(program).is_file())
            .then(|| program.to_string())
    }
}

/// The executable and arguments of every backend the backlog may use (the
/// run's, and any a story's frontmatter names), each found once: a missing
/// one is a usage error before anything runs.
pub(crate) fn resolve_agents(
    project: &Project,
    default: Backend,
) -> Result<HashMap<Backend, (String, Vec<String>)>, RalphError> {
    let mut used: Vec<Backend> = vec![default];
    used.extend(project.config.agent.fallback.iter().copied());
    used.extend(
        project
            .config
            .agent
            .escalation
            .iter()
            .filter_map(|r| r.agent),
    );
    used.extend(project.backlog.stories.iter().filter_map(|s| s.agent));
    let mut out = HashMap::new();
    for b in used {
        if out.contains_key(&b) {
            continue;
        }
        let (command, args) = agent::invocation(&project.config.agent, b);
        let Some(program) = resolve_agent(&project.root, &command) else {
            let where_ = if command.contains('/') {
                ""
            } else {
                " on PATH"
            };
            let install = match b {
                Backend::Claude => "npm install -g @anthropic-ai/claude-code",
                Backend::Codex => "npm install -g @openai/codex",
                _ => "install it",
            };
            return Err(RalphError::usage(format!(
                "the {} agent's command '{command}' was not found{where_}",
                b.name()
            ))
            .with_hint(format!(
                "{install}, or set agent.command (claude.command for Claude Code) in {}",
                paths::CONFIG
            )));
        };
        out.insert(b, (program, args));
    }
    Ok(out)
}
