//! Which agent executable each backend runs, found before anything runs
//! (on this machine; a cluster's nodes check their own).

use std::collections::HashMap;
use std::path::Path;

use crate::agent::{self, Backend};
use crate::backlog::Story;
use crate::error::RalphError;
use crate::executor::Agents;
use crate::paths;
use crate::project::Project;

/// Every backend the run may use, each once, in this order: the run's own
/// (`default`), `agent.fallback`'s, the escalation ladder's (`agent.escalation`'s
/// `agent` fields) and those a story's frontmatter names.
pub(crate) fn backends_used(
    settings: &agent::Settings,
    stories: &[Story],
    default: Backend,
) -> Vec<Backend> {
    let mut used: Vec<Backend> = Vec::new();
    let all = std::iter::once(default)
        .chain(settings.fallback.iter().copied())
        .chain(settings.escalation.iter().filter_map(|r| r.agent))
        .chain(stories.iter().filter_map(|s| s.agent));
    for b in all {
        if !used.contains(&b) {
            used.push(b);
        }
    }
    used
}

/// Every backend `project`'s run may use (`backends_used`), racing
/// candidates' too (`attempts.candidates`, issue 36).
pub(crate) fn used_by(project: &Project, default: Backend) -> Vec<Backend> {
    let mut used = backends_used(&project.config.agent, &project.backlog.stories, default);
    let attempts = &project.config.attempts;
    for c in attempts.candidates.iter().chain(&attempts.judge) {
        if !used.contains(&c.agent) {
            used.push(c.agent);
        }
    }
    used
}

/// The executable and arguments of every backend the backlog may use
/// (`backends_used`), each found once: a missing one is a usage error
/// before anything runs.
pub(crate) fn resolve_agents(project: &Project, default: Backend) -> Result<Agents, RalphError> {
    let used = used_by(project, default);
    resolve(&project.root, &project.config.agent, &used)
}

/// `backends`' executables and arguments, found from the project `root`
/// (`find_agent`); a missing one is a usage error saying how to install it.
pub(crate) fn resolve(
    root: &Path,
    settings: &agent::Settings,
    backends: &[Backend],
) -> Result<Agents, RalphError> {
    let mut out = HashMap::new();
    for &b in backends {
        let (command, args) = agent::invocation(settings, b);
        let program = match find_agent(root, &command) {
            Some(p) => p,
            // There but not runnable: the start-up probe says why
            // (`agents_can_start`), better than "not found".
            None if command.contains('/') && root.join(&command).is_file() => {
                root.join(&command).display().to_string()
            }
            None => {
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
            }
        };
        out.insert(b, (program, args));
    }
    Ok(out)
}

/// An agent's `command` as its attempts run it, when it is there and
/// runnable (`sandbox::which`, the one PATH lookup): a path with a `/`
/// found from the project `root` (a project-local `bin/agent`, not from
/// the worktree the child starts in), a bare name as it is once found on
/// PATH (`execvp` finds it the same way).
pub(crate) fn find_agent(root: &Path, command: &str) -> Option<String> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = crate::sandbox::which(command, &path, root)?;
    Some(if command.contains('/') {
        found.display().to_string()
    } else {
        command.to_string()
    })
}

/// Each agent command the run may use (`agents`: the run's, the fallbacks',
/// the escalation ladder's, the stories') started once as its attempts will
/// be, sealed the same way, by a probe that runs none of the agent's work
/// (`process::can_start`). One that cannot start is a usage error naming
/// it and why, before any attempt is made or charged (issue 32).
pub(crate) fn agents_can_start(
    project: &Project,
    git: &crate::gitops::Git,
    agents: &Agents,
    seal: &crate::executor::RunSeal,
) -> Result<(), RalphError> {
    let mut used: Vec<(&Backend, &String)> = agents.iter().map(|(b, (p, _))| (b, p)).collect();
    used.sort_by_key(|(b, _)| b.name());
    for (&backend, program) in used {
        let shown = agent::invocation(&project.config.agent, backend).0;
        let canon = git.workdir.canonicalize().ok();
        let in_repo = [Some(git.workdir.clone()), canon]
            .into_iter()
            .flatten()
            .find_map(|r| crate::sandbox::in_worktree(&r, Path::new(program), Path::new("")))
            .and_then(|rel| git.rel_path(&rel));
        // A confined attempt sees only what is committed in its worktree.
        if let (Some(rel), true) = (&in_repo, seal.confines()) {
            let not = git
                .not_committed(std::slice::from_ref(rel))
                .map_err(|e| RalphError::usage(format!("reading the status of {rel}: {e}")))?;
            if let Some((_, how)) = not.first() {
                return Err(cannot_start(&shown, backend, &Why::NotCommitted(*how)));
            }
        }
        let probe_seal = seal.for_probe(git, backend, program);
        if let Err(why) = crate::process::can_start(program, &git.workdir, probe_seal.as_ref()) {
            return Err(cannot_start(
                &shown,
                backend,
                &Why::Probe(why, seal.confines(), in_repo.is_some()),
            ));
        }
    }
    Ok(())
}

/// What `agents_can_start` found.
#[derive(Debug)]
enum Why {
    NotCommitted(crate::gitops::NotCommitted),
    /// The probe's answer, whether the run confines, whether the agent is
    /// in the repository.
    Probe(crate::process::CannotStart, bool, bool),
}

/// The message and hint for an agent that cannot start. Pure.
fn cannot_start(command: &str, backend: Backend, why: &Why) -> RalphError {
    use crate::gitops::NotCommitted as N;
    use crate::process::CannotStart as C;
    let config = paths::CONFIG;
    let key = if backend == Backend::Claude {
        "claude.command"
    } else {
        "agent.command"
    };
    let inside = |confined: bool| if confined { " inside the sandbox" } else { "" };
    let (reason, hint) = match why {
        Why::NotCommitted(how) => {
            let how = match how {
                N::Untracked => "untracked",
                N::Ignored => "ignored by git",
                N::Staged => "added but never committed",
                N::Modified => "changed since its last commit",
            };
            (
                format!(
                    "it is {how}, and a sandboxed attempt runs the copy committed in its \
                     worktree (bubblewrap hides the main checkout)"
                ),
                format!("commit it (`git add {command} && git commit`), or set sandbox.mode to \"off\" in {config}"),
            )
        }
        Why::Probe(c, confined, in_repo) => {
            let elsewhere = format!(
                "or set {key} in {config} to an agent the sandbox shows (sandbox.allow_read adds \
                 a directory; sandbox.mode \"off\" shows everything)"
            );
            match c {
                C::NotFound => (
                    format!("it is not there{}", inside(*confined)),
                    if *in_repo {
                        format!("commit it, {elsewhere}")
                    } else {
                        format!("install it, {elsewhere}")
                    },
                ),
                C::Directory => (
                    "it is a directory".to_string(),
                    format!("set {key} in {config} to the agent's executable"),
                ),
                C::NotExecutable => (
                    "it is not executable (no execute permission)".to_string(),
                    if *in_repo {
                        format!("`chmod +x {command}` and commit it (git keeps the bit)")
                    } else {
                        format!("`chmod +x {command}`")
                    },
                ),
                C::NoInterpreter => (
                    "its #! line names no interpreter".to_string(),
                    "write the interpreter after #! (`#!/usr/bin/env bash`)".to_string(),
                ),
                C::BadInterpreter(i) if i.ends_with('\r') => (
                    format!(
                        "its #! line ends in a carriage return (Windows line endings), so the \
                         interpreter {:?} does not exist",
                        i
                    ),
                    format!("convert {command} to Unix line endings (`sed -i 's/\\r$//' {command}`) and commit it"),
                ),
                C::BadInterpreter(i) => (
                    format!(
                        "its #! line names the interpreter {i}, which is not there{}",
                        inside(*confined)
                    ),
                    if *confined && Path::new(i).exists() {
                        format!(
                            "the sandbox hides {i}: add its directory to sandbox.allow_read in \
                             {config}, use an interpreter under /usr, or set sandbox.mode to \"off\""
                        )
                    } else {
                        format!("install {i}, or change the #! line of {command}")
                    },
                ),
                C::EnvProgram(p) => (
                    format!(
                        "its #! line runs `env {p}`, and {p} is not on the PATH the agent gets{}",
                        inside(*confined)
                    ),
                    format!(
                        "install {p} where PATH finds it (`ralph run -d` lists the variables an \
                         agent gets), or name the interpreter by its full path"
                    ),
                ),
                C::Probe(e) => (
                    format!("the sandbox could not start it: {e}"),
                    format!("set sandbox.mode to \"off\" in {config} to run agents unsealed"),
                ),
            }
        }
    };
    RalphError::usage(format!(
        "the {} agent's command '{command}' cannot start: {reason}",
        backend.name()
    ))
    .with_hint(hint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::CannotStart as C;

    fn text(e: RalphError) -> String {
        format!("{e}")
    }

    #[test]
    fn each_reason_names_the_command_and_what_to_do() {
        let e = cannot_start(
            "bin/my-agent",
            Backend::Custom,
            &Why::Probe(C::NotExecutable, true, true),
        );
        let t = text(e);
        assert!(
            t.contains("the custom agent's command 'bin/my-agent' cannot start"),
            "{t}"
        );
        assert!(t.contains("not executable"), "{t}");
        let t = text(cannot_start(
            "bin/a",
            Backend::Claude,
            &Why::Probe(C::BadInterpreter("/bin/bash\r".into()), true, true),
        ));
        assert!(t.contains("carriage return"), "{t}");
        let t = text(cannot_start(
            "bin/a",
            Backend::Claude,
            &Why::NotCommitted(crate::gitops::NotCommitted::Untracked),
        ));
        assert!(t.contains("untracked"), "{t}");
    }
}
