//! `ralph reset [ID]`: forget one story's attempts, or all state.
//!
//! A story that landed is done because its `merge: story <id>` is on the
//! target, whatever the state says: forgetting its record alone would have
//! the next run's reconcile mark it done again. So `reset ID` also sets its
//! landings aside in the state (reconcile no longer counts them) and puts
//! its source back to not done (the spec's `status: done` → `pending`,
//! prd.json's `passes` → false) in a commit of its own on the target,
//! through the landing's safe checkout: the backlog stays committed, which
//! `ralph run` requires, and a local edit in the way stops the reset before
//! anything changes.
//!
//! A state file that is no state file (not JSON, not UTF-8, not the state's
//! shape) stops every command that reads it; `reset --yes` sets it aside
//! and starts from empty state, so there is always a way out.

use std::io::{BufRead, IsTerminal};
use std::path::Path;

use super::change_state;
use crate::backlog::mark_done;
use crate::backlog::Source;
use crate::error::{Problem, RalphError, EXIT_OK};
use crate::gitops::{Git, LandOutcome};
use crate::paths;
use crate::project;
use crate::run;
use crate::state::State;
use crate::store::{self, BrokenState, StateFile};

pub(super) fn cmd_reset(root: &Path, id: Option<String>, yes: bool) -> anyhow::Result<i32> {
    let _lock = run::take_run_lock(root, "before resetting state")?;
    let read = store::read_state(root).map_err(|p| RalphError::BadInput(vec![p]))?;
    let said = match read {
        StateFile::Read(state) => change_state(root, *state, |state| match id {
            Some(id) => reset_story(root, &id, state),
            None => {
                if !confirmed(yes, "Forget every story's status and attempts?")? {
                    return Ok("Nothing changed.".to_string());
                }
                state.reset_all();
                Ok(
                    "State reset (what the stories spent stays in the lifetime totals)."
                        .to_string(),
                )
            }
        })?,
        StateFile::Broken(broken) => reset_broken(root, id.as_deref(), yes, &broken)?,
    };
    println!("{said}");
    Ok(EXIT_OK)
}

/// True when the user said yes: `--yes`, or `y` at the terminal.
fn confirmed(yes: bool, question: &str) -> anyhow::Result<bool> {
    if yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(RalphError::usage("resetting all state needs confirmation")
            .with_hint("run `ralph reset --yes`")
            .into());
    }
    eprint!("{question} [y/N] ");
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(answer.trim().eq_ignore_ascii_case("y"))
}

/// `ralph reset` when the state file is no state file: every other command
/// refuses it, so the whole reset is the way out. The file may hold what a
/// person wants back, so it is set aside, never deleted.
fn reset_broken(
    root: &Path,
    id: Option<&str>,
    yes: bool,
    broken: &BrokenState,
) -> anyhow::Result<String> {
    if let Some(id) = id {
        let problem = Problem::new(
            paths::STATE,
            broken.line,
            format!(
                "not a valid state file ({}), so `ralph reset {id}` cannot forget that \
                 story alone",
                broken.why
            ),
        );
        return Err(RalphError::usage(problem.to_string())
            .with_hint(format!(
                "fix the file, or run `ralph reset --yes` to set it aside (as {}) and forget \
                 every story's state",
                paths::BROKEN_STATE.replace('*', "<time>")
            ))
            .into());
    }
    let question = format!(
        "{} is not a valid state file. Set it aside and forget every story's status and attempts?",
        paths::STATE
    );
    if !confirmed(yes, &question)? {
        return Ok("Nothing changed.".to_string());
    }
    let kept = store::set_aside_state(root)?;
    // An empty state written, not the file left missing: without one the
    // next command would take `progress.txt`'s DONE lines for the state.
    store::save_state(root, &State::default())?;
    Ok(format!(
        "State reset: {} was not a valid state file ({}); it is kept as {}.\nWhat the stories \
         spent before is not in the lifetime totals any more (`status`, \
         budget.max_cost_usd_total); `ralph stats --all` still counts it from the run records.",
        paths::STATE,
        broken.why,
        kept.strip_prefix(root).unwrap_or(&kept).display()
    ))
}

/// What undoing a landing changed: the target's commit, the landings set aside.
struct Undone {
    commit: Option<String>,
    landings: Vec<String>,
}

fn reset_story(root: &Path, id: &str, state: &mut State) -> anyhow::Result<String> {
    let recorded =
        state.stories.contains_key(id) || state.completed_stories.iter().any(|c| c == id);
    let undone = match project::load(root) {
        Ok(p) if p.backlog.index_of(id).is_some() => undo_landing(root, &p, id, state.is_done(id))?,
        Ok(_) => None,
        // Without a backlog that loads, what was done cannot be undone in
        // its source; a story that is not done needs nothing undone.
        Err(problems) if state.is_done(id) => return Err(RalphError::BadInput(problems).into()),
        Err(_) => None,
    };
    let undone = undone.unwrap_or(Undone {
        commit: None,
        landings: Vec::new(),
    });
    if !recorded && undone.commit.is_none() && undone.landings.is_empty() {
        return Err(RalphError::usage(format!("story {id} has no recorded state")).into());
    }
    state.reset_story(id);
    state.set_aside_landings(id, &undone.landings);
    let mut said = format!(
        "Story {id}: attempts and status forgotten; it runs again on the next `ralph run`."
    );
    // Log numbers never restart: a kept ref or a log of an earlier attempt
    // must not be overwritten. The display counts attempts from 1 again
    // and names the log number (issue 32).
    let logs = crate::store::logged_attempts(&crate::paths::logs_dir(root).join(id));
    if let Some(last) = logs.last() {
        said.push_str(&format!(
            "\nIts logs stay (`ralph log {id} -a N`, N up to {last}); its next attempt counts \
             as attempt 1 of loop.max_retries and is logged after them."
        ));
    }
    if let Some(c) = &undone.commit {
        said.push_str(&format!(
            "\nIts source says it is not done any more ({}, `reset: story {id}`); its earlier \
             landing stays in history.",
            &c[..c.len().min(10)]
        ));
    }
    Ok(said)
}

/// Finds the story's landings (to set aside) and commits its source back to
/// not done. `None` when there is no target to look at (a detached HEAD)
/// and the state does not say the story is `done`: then nothing landed that
/// the state knows of, and a reset of its attempts works as it always did.
fn undo_landing(
    root: &Path,
    project: &project::Project,
    id: &str,
    done: bool,
) -> anyhow::Result<Option<Undone>> {
    let git = Git::open(root).map_err(|e| RalphError::usage(e.to_string()))?;
    let target = match run::target_branch(project, &git) {
        Ok(t) => t,
        Err(_) if !done => return Ok(None),
        Err(e) => return Err(e),
    };
    let landings: Vec<String> = git
        .story_landings(&target)?
        .into_iter()
        .filter(|(s, _)| s == id)
        .map(|(_, c)| c)
        .collect();
    let story = &project.backlog.stories[project.backlog.index_of(id).unwrap_or_default()];
    let spec_rel = story
        .spec_path
        .as_ref()
        .and_then(|p| git.rel_path(&root.join(p)));
    let prd_rel = match project.backlog.source {
        Source::Prd { .. } => git.rel_path(&root.join("prd.json")),
        Source::StoriesTxt
        | Source::GitHub { .. }
        | Source::Linear { .. }
        | Source::Jira { .. } => None,
    };
    let paths: Vec<String> = spec_rel.iter().chain(&prd_rel).cloned().collect();
    let edit = mark_done::reset_edit(
        spec_rel,
        prd_rel,
        project.config.specs.status_field.clone(),
        id.to_string(),
    );
    let message = format!("reset: story {id}\n\nralph reset {id}: it runs again.\n");
    let Some((commit, base)) = git.edit_commit(&target, &message, &paths, &edit)? else {
        return Ok(Some(Undone {
            commit: None,
            landings,
        }));
    };
    // The reset's commit reaches the user's checkout as a landing does:
    // outlasting the user's git (`gitops::landing`).
    let log = crate::store::TechLog::new(Some(crate::paths::tech_log(root)));
    let watch = crate::run::LandWatch::of(&git, root, &log);
    match git.land_watched(&target, &base, &commit, &watch, &[])? {
        LandOutcome::Landed => Ok(Some(Undone {
            commit: Some(commit),
            landings,
        })),
        LandOutcome::LandedOnTop { commit, .. } => Ok(Some(Undone {
            commit: Some(commit),
            landings,
        })),
        LandOutcome::CheckoutBlocked { paths } => Err(RalphError::usage(format!(
            "story {id}: your uncommitted changes to {} are in the way of putting its status \
             back; nothing was changed",
            paths.join(", ")
        ))
        .with_hint("commit or stash them, then run `ralph reset` again")
        .into()),
        LandOutcome::TargetMoved { .. } | LandOutcome::Busy { .. } => Err(RalphError::usage(
            format!("story {id}: {target} changed, or git was busy, while ralph reset it; nothing was changed"),
        )
        .with_hint("run `ralph reset` again")
        .into()),
    }
}
