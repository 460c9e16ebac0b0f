//! What refuses a run before anything is touched (exit 2): a backlog file
//! that is not committed, a signing setup that cannot sign, a main checkout
//! with changes a landing could overwrite.

use std::path::Path;

use anyhow::{Context, Result};

use crate::error::RalphError;
use crate::gitops::{Git, NotCommitted};
use crate::paths::{self, RUNTIME_PATTERNS};
use crate::project::Project;

/// Agents work in worktrees made from the target branch, and a landing
/// edits the spec there: a backlog file that is not committed is not the
/// backlog they get. Names each such file and the command that commits them.
pub(super) fn refuse_uncommitted_backlog(project: &Project, git: &Git, target: &str) -> Result<()> {
    let root = &project.root;
    let root_rel = git.rel_path(root).unwrap_or_default();
    // (as the user names it, from the project root; as git names it)
    let files: Vec<(String, String)> = project
        .backlog
        .files(root)
        .into_iter()
        .filter_map(|p| Some((p.display().to_string(), git.rel_path(&root.join(&p))?)))
        .filter(|(_, in_repo)| !paths::is_runtime_repo_path(in_repo, &root_rel))
        .collect();
    let in_repo: Vec<String> = files.iter().map(|(_, r)| r.clone()).collect();
    let bad = git
        .not_committed(&in_repo)
        .context("reading the main checkout's status")?;
    if bad.is_empty() {
        return Ok(());
    }
    let shown = |repo_rel: &str| {
        files
            .iter()
            .find(|(_, r)| r == repo_rel)
            .map_or(repo_rel.to_string(), |(p, _)| p.clone())
    };
    let mut listed: Vec<String> = bad
        .iter()
        .take(20)
        .map(|(r, how)| {
            let how = match how {
                NotCommitted::Untracked => "untracked",
                NotCommitted::Ignored => "ignored by git",
                NotCommitted::Staged => "added, never committed",
                NotCommitted::Modified => "changed since the last commit",
            };
            format!("  {} ({how})", shown(r))
        })
        .collect();
    if bad.len() > 20 {
        listed.push(format!("  ... and {} more", bad.len() - 20));
    }
    let mut names: Vec<String> = bad.iter().map(|(r, _)| shown(r)).collect();
    // A long list of specs is committed by naming their top directories.
    if names.len() > 20 {
        let specs: Vec<String> = project
            .backlog
            .stories
            .iter()
            .filter_map(|s| s.spec_path.as_ref().map(|p| p.display().to_string()))
            .collect();
        let mut short: Vec<String> = Vec::new();
        for n in names {
            let n = match n.split_once('/') {
                Some((top, _)) if specs.contains(&n) => top.to_string(),
                _ => n,
            };
            if !short.contains(&n) {
                short.push(n);
            }
        }
        names = short;
    }
    // `git add` wants `-f` for an ignored file.
    let force = bad.iter().any(|(_, how)| *how == NotCommitted::Ignored);
    let here = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .is_ok_and(|d| d == *root);
    let git_cmd = if here {
        "git".to_string()
    } else {
        format!(
            "git -C {}",
            crate::prompt::shell_quote(&root.display().to_string())
        )
    };
    let quoted: Vec<String> = names
        .iter()
        .map(|n| crate::prompt::shell_quote(n))
        .collect();
    Err(RalphError::usage(format!(
        "the backlog is not committed: agents work in worktrees made from {target}, which \
         would lack these files or hold other versions of them:\n{}",
        listed.join("\n")
    ))
    .with_hint(format!(
        "commit them: {git_cmd} add{} -- {} && {git_cmd} commit -m \"Add the ralph backlog\"",
        if force { " -f" } else { "" },
        quoted.join(" ")
    ))
    .into())
}

/// With `commit.gpgsign` on, every commit ralph lands is signed, and so
/// must be each agent's own `git commit`: a setup that cannot sign is found
/// once, before anything runs, instead of as failed attempts (the agent's
/// commit refused) or a merge queue that cannot land. Nothing was changed
/// yet: exit 2, as for a missing agent binary.
pub(super) fn refuse_a_setup_that_cannot_sign(git: &Git) -> Result<()> {
    use crate::gitops::{GitError, SignError};
    match git.check_signing() {
        Ok(_) => Ok(()),
        Err(GitError::Sign(e)) => Err(RalphError::usage(format!(
            "this repository signs its commits (commit.gpgsign), and signing does not work: {e}"
        ))
        .with_hint(SignError::hint())
        .into()),
        Err(e) => Err(RalphError::usage(e.to_string()).into()),
    }
}

/// The dirty-checkout check: tracked files with local changes could be
/// overwritten by a landing (runtime files excluded).
pub(super) fn refuse_dirty_checkout(root: &Path, git: &Git) -> Result<()> {
    let root_rel = git.rel_path(root).unwrap_or_default();
    let prefix = if root_rel.is_empty() {
        String::new()
    } else {
        format!("{root_rel}/")
    };
    let dirty = git
        .dirty_tracked_files(&|p: &str| paths::is_runtime_repo_path(p, &root_rel))
        .context("reading the main checkout's status")?;
    if !dirty.is_empty() {
        let list: Vec<String> = dirty.iter().take(20).map(|p| format!("  {p}")).collect();
        return Err(RalphError::usage(format!(
            "the main checkout has uncommitted changes to tracked files that landing could \
             overwrite:\n{}",
            list.join("\n")
        ))
        .with_hint("commit or stash them, then run `ralph run` again")
        .into());
    }
    let excludes: Vec<String> = RUNTIME_PATTERNS
        .iter()
        .map(|p| format!("/{prefix}{}", &p[1..]))
        .collect();
    let _ = git.exclude(&excludes.iter().map(String::as_str).collect::<Vec<_>>());
    Ok(())
}
