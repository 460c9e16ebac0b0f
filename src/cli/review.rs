//! Review landing (`landing.mode: review` or `pr`): `ralph review`,
//! `ralph land [ID...]`, `ralph reject ID`.

use std::io::Write;
use std::path::Path;

use super::{load, with_locked_state};
use crate::error::{RalphError, EXIT_OK};
use crate::project::{self, Project};
use crate::run::{self, RunOptions};
use crate::state::State;

pub(super) fn cmd_review(root: &Path) -> anyhow::Result<i32> {
    let (project, state) = load(root)?;
    let git = crate::gitops::Git::open(root).map_err(|e| RalphError::usage(e.to_string()))?;
    let target = run::target_branch(&project, &git)?;
    let validated = project
        .config
        .validation
        .commands
        .iter()
        .any(|v| v.required);
    let mut out = std::io::stdout().lock();
    let mut n = 0;
    for s in &project.backlog.stories {
        if state.status(&s.id) == crate::state::Status::InPr {
            let url = state
                .record(&s.id)
                .and_then(|r| r.pr_url.clone())
                .unwrap_or_default();
            n += 1;
            if writeln!(
                out,
                "{} {} · pull request {url} (done once merged)",
                s.id, s.title
            )
            .is_err()
            {
                return Ok(EXIT_OK);
            }
            continue;
        }
        if state.status(&s.id) != crate::state::Status::Review {
            continue;
        }
        n += 1;
        let branch = project::story_branch(&s.id);
        let stat = match git.diffstat(&branch, &target) {
            Ok(Some((f, a, d))) => format!("{f} files, +{a} -{d}"),
            _ => "its branch is gone".to_string(),
        };
        let held = state
            .record(&s.id)
            .and_then(|r| r.gate.as_ref())
            .filter(|g| g.decision == crate::state::GateDecision::Review);
        let check = match held {
            Some(g) => format!(
                "held by the trust gates ({}): {}",
                g.findings.len(),
                g.reason
                    .as_deref()
                    .unwrap_or("its fix-up did not restore what they found")
            ),
            None if validated => "passed validation on the merged tree".to_string(),
            None => "no required validation configured".to_string(),
        };
        if writeln!(out, "{} {} · {branch} · {stat} · {check}", s.id, s.title).is_err() {
            return Ok(EXIT_OK);
        }
        for f in held.map(|g| g.findings.as_slice()).unwrap_or_default() {
            if writeln!(out, "    {}", f.line_text()).is_err() {
                return Ok(EXIT_OK);
            }
        }
    }
    if n == 0 {
        let _ = writeln!(out, "nothing waits for review");
    } else {
        let _ = writeln!(
            out,
            "`git diff {target}...ralph/story-<id>` shows one; `ralph land [ID...]` lands, \
             `ralph reject ID --note TEXT` sends back"
        );
    }
    Ok(EXIT_OK)
}

/// The stories in review among `ids` (all of them when empty); an ID not in
/// review is an error naming it.
fn in_review(state: &State, project: &Project, ids: &[String]) -> anyhow::Result<Vec<String>> {
    let waiting: Vec<String> = project
        .backlog
        .stories
        .iter()
        .filter(|s| state.status(&s.id) == crate::state::Status::Review)
        .map(|s| s.id.clone())
        .collect();
    if ids.is_empty() {
        return Ok(waiting);
    }
    for id in ids {
        if !waiting.contains(id) {
            return Err(
                RalphError::usage(format!("story {id} is not waiting for review"))
                    .with_hint("`ralph review` lists the stories that are")
                    .into(),
            );
        }
    }
    Ok(ids.to_vec())
}

pub(super) fn cmd_land(root: &Path, ids: Vec<String>) -> anyhow::Result<i32> {
    if crate::store::RunLock::is_held(root) {
        if let Some(code) = land_in_running_run(root, &ids)? {
            return Ok(code);
        }
    }
    let chosen = with_locked_state(root, "before approving stories", |state| {
        let project = project::load(root).map_err(RalphError::BadInput)?;
        let chosen = in_review(state, &project, &ids)?;
        for id in &chosen {
            state.approve(id);
        }
        Ok(chosen)
    })?;
    if chosen.is_empty() {
        println!("nothing waits for review");
        return Ok(EXIT_OK);
    }
    // A run that starts no agent: reconcile sends the approved stories to
    // the merge queue, which validates each again on the current tip.
    let opts = RunOptions {
        land: true,
        ..RunOptions::default()
    };
    crate::process::become_subreaper();
    run::run(root, opts, &crate::exec::ByConfig)
}

/// A run holds the lock: the approval goes to it through its socket
/// (issue 24), and it lands the stories while it runs. `None` when no run
/// answers there (one without a socket: the lock is then refused as before).
fn land_in_running_run(root: &Path, ids: &[String]) -> anyhow::Result<Option<i32>> {
    use crate::steer::{client, Command};
    let ids = if ids.is_empty() {
        let (project, state) = load(root)?;
        in_review(&state, &project, &[])?
    } else {
        ids.to_vec()
    };
    if ids.is_empty() {
        println!("nothing waits for review");
        return Ok(Some(EXIT_OK));
    }
    let mut refused = None;
    for id in ids {
        let Some(reply) = client::try_send(root, &Command::Land { id })? else {
            return Ok(None);
        };
        if reply.ok {
            println!("{}", reply.message);
        } else if refused.is_none() {
            refused = Some(reply);
        }
    }
    match refused {
        Some(r) => super::steer::answered(r).map(Some),
        None => Ok(Some(EXIT_OK)),
    }
}

pub(super) fn cmd_reject(root: &Path, id: &str, note: Option<&str>) -> anyhow::Result<i32> {
    if crate::store::RunLock::is_held(root) {
        let cmd = crate::steer::Command::Reject {
            id: id.to_string(),
            note: note.map(str::to_string),
        };
        // A run waiting for reviews takes it; one without a socket keeps
        // the lock's refusal below.
        if let Some(reply) = crate::steer::client::try_send(root, &cmd)? {
            return super::steer::answered(reply);
        }
    }
    with_locked_state(root, "before sending a story back", |state| {
        let project = project::load(root).map_err(RalphError::BadInput)?;
        in_review(state, &project, &[id.to_string()])?;
        state.reject(id, note.unwrap_or("no reason given"));
        Ok(())
    })?;
    println!(
        "Story {id} goes back to the queue; its next attempt is told the note and its work \
         stays on {} until then.",
        project::story_branch(id)
    );
    Ok(EXIT_OK)
}
