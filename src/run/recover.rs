//! Startup and shutdown housekeeping, run synchronously outside the async
//! loop: the run lock, what a killed run left behind (processes, git lock
//! files, a half-done landing), reconciling the state with git, and the
//! worktrees and branches tidied at the end.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::agent::parser::OutputParser;
use crate::error::RalphError;
use crate::gitops::Git;
use crate::paths;
use crate::process;
use crate::project::{self, KeptRef, Project};
use crate::prompt;
use crate::state::{Fixup, FixupCause, State, Status};
use crate::store::{self, RunLock, TechLog};
use crate::{report, timefmt};

use super::intent::LandingIntent;

/// How long a lock whose recorded holder is dead may stay held: a child the
/// dead run forked keeps the lock's file open until its exec closes it.
const DEAD_HOLDER_WAIT: Duration = Duration::from_secs(5);

/// Takes `.ralph/.lock` for a run, or for `ralph reset` (`doing` says
/// which, for the message). A live holder means another run: exit 3 at
/// once. A holder that died by SIGKILL while forking a child leaves the OS
/// lock with that child until its exec: wait for it, briefly.
pub(crate) fn take_run_lock(root: &Path, doing: &str) -> Result<RunLock> {
    let deadline = Instant::now() + DEAD_HOLDER_WAIT;
    let mut told = false;
    loop {
        let pid = match RunLock::acquire(root) {
            Ok(lock) => return Ok(lock),
            Err(store::LockError::Io(e)) => {
                return Err(e).with_context(|| format!("taking {}", paths::LOCK))
            }
            Err(store::LockError::Held { pid }) => pid,
        };
        let gone = pid.is_some_and(|p| !process::pid_is_alive(p as i32));
        if gone && Instant::now() < deadline {
            if !told {
                crate::display::err(&format!(
                    "waiting for {}: its holder (PID {}) is gone, but a process it \
                     started still has the lock open",
                    paths::LOCK,
                    pid.unwrap_or(0)
                ));
                told = true;
            }
            // Only at start-up, before anything else runs.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let who = pid.map(|p| format!(" (PID {p})")).unwrap_or_default();
        let hint = if gone {
            format!(
                "that PID is gone, so a process it started keeps the lock open: \
                 `fuser -v {}` shows which",
                paths::LOCK
            )
        } else {
            format!("wait for it to finish, or stop it {doing}; `ralph status` works meanwhile")
        };
        return Err(RalphError::Locked {
            message: format!("another ralph run holds this project's lock{who}"),
            hint: Some(hint),
        }
        .into());
    }
}

/// Deletes git lock files that no live process has open and no git process
/// works next to (git writes no owner into them, so this is the only safe
/// test); a lock that may be in use is left alone and logged.
pub(crate) fn remove_stale_git_locks(git: &Git, log: &TechLog) {
    for lock in git.lock_files() {
        if process::lock_may_be_held(&lock, &git.workdir, None) {
            log.line(&format!("{} may be in use; left alone", lock.display()));
            continue;
        }
        if std::fs::remove_file(&lock).is_ok() {
            log.line(&format!("removed stale {}", lock.display()));
        }
    }
}

/// During a run, a lock the landing waited on in vain is removed when no
/// process has it open and no git works in the main checkout: the agents'
/// gits under `.ralph/worktrees/` do not count (a worktree has an index of
/// its own), so a user's crashed `git` no longer stops the run until the
/// next start. True when it was removed.
pub(crate) fn remove_stale_lock_now(root: &Path, git: &Git, lock: &Path, log: &TechLog) -> bool {
    let ours = paths::worktrees_dir(root);
    if process::lock_may_be_held(lock, &git.workdir, Some(&ours)) {
        return false;
    }
    let removed = std::fs::remove_file(lock).is_ok();
    if removed {
        log.line(&format!(
            "removed stale {}: no process has it open and no git works in the main checkout",
            lock.display()
        ));
    }
    removed
}

/// First half of startup recovery: stop agents a killed run left behind,
/// remove git lock files no live process can hold, and undo a landing that
/// was cut short between updating the main checkout and moving the ref.
pub(crate) fn recover_processes_and_git(
    root: &Path,
    git: &Git,
    target: &str,
    tag: &str,
    log: &TechLog,
) -> Result<()> {
    match process::probe_cgroups(tag) {
        Some(dir) => log.line(&format!(
            "processes: each child runs in a cgroup of its own under {}",
            dir.display()
        )),
        None => {
            log.line("processes: no writable cgroup v2 here; the token sweep alone finds leftovers")
        }
    }
    let killed = process::kill_by_token_prefix(tag);
    if killed > 0 {
        log.line(&format!(
            "reconcile: stopped {killed} process(es) left by an earlier run"
        ));
    }
    remove_stale_git_locks(git, log);
    let intent_path = paths::landing_intent_path(root);
    if let Some(intent) = LandingIntent::read(root) {
        let tip = git.branch_tip(target)?.unwrap_or_default();
        if tip == intent.base {
            let restored = git.rollback_partial_landing(&intent.base, &intent.commit)?;
            if !restored.is_empty() {
                log.line(&format!(
                    "reconcile: undid a half-done landing of story {} in the main checkout ({} files)",
                    intent.story,
                    restored.len()
                ));
            }
        }
    }
    let _ = std::fs::remove_file(&intent_path);
    Ok(())
}

/// True when an attempt's log holds a clean DONE for `id`: the agent had
/// finished and committed when the run died, so its work can go straight to
/// the merge queue (which still merges and validates it) instead of being
/// redone. Read line by line: logs can be huge.
fn attempt_log_says_done(path: &Path, id: &str) -> bool {
    use std::io::BufRead;
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    let mut parser = OutputParser::new();
    for line in std::io::BufReader::new(f).split(b'\n') {
        let Ok(line) = line else { return false };
        parser.feed_line(&String::from_utf8_lossy(&line));
    }
    let s = parser.finish();
    s.signals.done.as_deref() == Some(id) && !s.is_error && s.rate_limited.is_none()
}

/// Keeps story branches holding commits ralph has no record of (a branch
/// of that name made by the user, or ralph's own after its state was lost)
/// under a ref, and says so: ralph moves story branches for its attempts.
/// Returns the lines to tell the user.
pub(crate) fn keep_unknown_story_branches(
    project: &Project,
    git: &Git,
    target: &str,
    state: &State,
    log: &TechLog,
) -> Result<Vec<String>> {
    let Some(tip) = git.branch_tip(target)? else {
        return Ok(Vec::new());
    };
    let mut told = Vec::new();
    // The branches that exist, listed once: a backlog has thousands of
    // stories and few branches.
    for branch in git.branches_with_prefix(project::STORY_BRANCH_PREFIX)? {
        let Some(story) = branch
            .strip_prefix(project::STORY_BRANCH_PREFIX)
            .and_then(|id| project.backlog.index_of(id))
            .map(|i| &project.backlog.stories[i])
        else {
            continue;
        };
        let known = state
            .record(&story.id)
            .is_some_and(|r| r.attempts_started > 0);
        if known {
            continue;
        }
        let ahead = git.commits_ahead(&branch, &tip)?;
        if ahead == 0 || git.tip_saved_under(&branch, project::KEPT_REFS)? {
            continue;
        }
        let stamp = timefmt::now_secs().max(0) as u32;
        let r = project::kept_ref(KeptRef::Saved, &story.id, stamp);
        git.save_ref(&branch, &r)?;
        let line = format!(
            "note: {branch} holds {ahead} commit(s) ralph has no record of; they are kept at {r} \
             (ralph reuses that branch name for story {})",
            story.id
        );
        log.line(&line);
        told.push(line);
    }
    Ok(told)
}

/// Brings the state in line with git and the process table before anything
/// runs (SPEC 6); returns the stories whose finished work goes straight to
/// the merge queue.
pub(crate) fn reconcile(
    project: &Project,
    git: &Git,
    target: &str,
    state: &mut State,
    log: &TechLog,
) -> Result<Vec<String>> {
    let root = &project.root;
    record_landed_splits(project, state, log);
    mark_landed_done(project, git, target, state, log)?;
    let reland = requeue_interrupted(project, git, target, state, log)?;
    prune_worktrees(root, git, log)?;
    number_attempts_after_kept_work(project, git, state);
    store::remove_stale_temp_files(&paths::ralph_dir(root));
    // The tracker's snapshot and queue are written the same way, a pid in
    // each temp file's name: one a killed run left is never taken again.
    store::remove_stale_temp_files(&paths::at(root, paths::TRACKER));
    Ok(reland)
}

/// A split that landed before the run that made it could save the state
/// (a crash in between): the backlog says what replaced the parent.
fn record_landed_splits(project: &Project, state: &mut State, log: &TechLog) {
    let decomposed = state.decomposed();
    for parent in &project.backlog.skipped {
        let prefix = format!("{parent}.");
        let children: Vec<String> = project
            .backlog
            .stories
            .iter()
            .filter(|s| s.id.starts_with(&prefix))
            .map(|s| s.id.clone())
            .collect();
        if !children.is_empty()
            && !decomposed.contains_key(parent)
            && state.decomposition_tried(parent)
        {
            log.line(&format!(
                "reconcile: story {parent} was split into {} (its split landed); recorded",
                children.join(", ")
            ));
            state.set_decomposed(parent, &children);
        }
    }
}

/// The stories whose merge is on the target are done (landings a `ralph
/// reset ID` set aside do not count), each with its progress.txt line.
fn mark_landed_done(
    project: &Project,
    git: &Git,
    target: &str,
    state: &mut State,
    log: &TechLog,
) -> Result<()> {
    let root = &project.root;
    for (id, commit) in &state.counted_landings(git.story_landings(target)?) {
        let Some(i) = project.backlog.index_of(id) else {
            continue;
        };
        if !state.is_done(id) {
            log.line(&format!(
                "reconcile: story {id} is on {target} ({commit}); marking it done"
            ));
            state.mark_done(id, Some(commit));
            let title = &project.backlog.stories[i].title;
            let line = report::progress_done(id, title, timefmt::now_secs(), false);
            let _ = store::append_progress(root, &line);
        }
    }
    Ok(())
}

/// Running and landing stories go back to pending, or straight to the
/// merge queue (returned) when their work is finished; what an interrupted
/// attempt left, committed or not, is kept under refs its next prompt
/// names.
fn requeue_interrupted(
    project: &Project,
    git: &Git,
    target: &str,
    state: &mut State,
    log: &TechLog,
) -> Result<Vec<String>> {
    let root = &project.root;
    let mut reland = Vec::new();
    let landing: Vec<String> = state
        .stories
        .iter()
        .filter(|(_, r)| r.status == Status::Landing)
        .map(|(id, _)| id.clone())
        .collect();
    let target_tip = git.branch_tip(target)?.unwrap_or_default();
    // The slot worktrees, by the story branch each has checked out: what an
    // agent killed with the run left uncommitted there is kept before the
    // next attempt resets the slot.
    let slots: Vec<(String, std::path::PathBuf)> = git
        .list_worktrees()?
        .into_iter()
        .filter(|wt| paths::is_ours(root, &wt.path) && wt.path.exists())
        .filter_map(|wt| Some((git.resolve_branch_at_head(&wt.path).ok()??, wt.path)))
        .collect();
    for id in state.requeue_interrupted() {
        let branch = project::story_branch(&id);
        let n = state.record(&id).map(|r| r.attempts_started).unwrap_or(0);
        let mut kept = Vec::new();
        if let Some((_, path)) = slots.iter().find(|(b, _)| *b == branch) {
            let unc = project::kept_ref(KeptRef::Uncommitted, &id, n);
            let taken = git
                .refs_with_prefix(&unc)
                .unwrap_or_default()
                .contains(&unc);
            if !taken {
                if let Ok(Some(_)) = git.save_uncommitted(path, &unc) {
                    log.line(&format!(
                        "reconcile: story {id}: uncommitted changes of its interrupted attempt kept at {unc}"
                    ));
                    kept.push(unc);
                }
            }
        }
        kept.extend(keep_interrupted_candidates(
            git,
            (&slots, target),
            &id,
            n,
            log,
        ));
        if git.commits_ahead(&branch, &target_tip).unwrap_or(0) == 0 {
            if !kept.is_empty() {
                state.add_to_note(&id, &prompt::interrupted_before(&kept));
            }
            continue;
        }
        let was_landing = landing.contains(&id);
        // A conflict fix-up that said DONE but committed markers is not
        // finished (the attempt would have failed it, had the run lived).
        let markers = match state.note(&id).and_then(|n| n.fixup.as_ref()) {
            Some(Fixup {
                cause: FixupCause::Conflict { paths },
                ..
            }) => git.conflict_markers(&branch, paths).unwrap_or_default(),
            _ => Vec::new(),
        };
        let finished = !was_landing
            && markers.is_empty()
            && attempt_log_says_done(&paths::attempt_log_path(root, &id, n), &id);
        if (was_landing || finished) && project.backlog.index_of(&id).is_some() {
            reland.push(id.clone());
            log.line(&format!(
                "reconcile: story {id} {}; it goes to the merge queue",
                if finished {
                    "had reported DONE when the run died"
                } else {
                    "was landing"
                }
            ));
        } else {
            let r = project::kept_ref(KeptRef::Interrupted, &id, n);
            if git.save_ref(&branch, &r).is_ok() {
                kept.insert(0, r.clone());
            }
            log.line(&format!(
                "reconcile: story {id} was interrupted; its commits are kept at {r}"
            ));
            // The next attempt (a fix-up again, if this was one) is told.
            state.add_to_note(&id, &prompt::interrupted_before(&kept));
        }
    }
    Ok(reland)
}

/// Worktrees whose directory vanished are pruned (broken ones of ralph's
/// removed); live ones are reused.
fn prune_worktrees(root: &std::path::Path, git: &Git, log: &TechLog) -> Result<()> {
    for wt in git.list_worktrees()? {
        let ours = paths::is_ours(root, &wt.path);
        if ours {
            let _ = git.clear_worktree_locks(&wt.name);
        }
        let gone = wt.path.as_os_str().is_empty() || !wt.path.exists();
        if gone {
            log.line(&format!(
                "reconcile: pruning worktree {} (its directory is gone)",
                wt.name
            ));
            if let Err(e) = git.prune_admin(&wt.name) {
                log.line(&format!(
                    "reconcile: could not prune worktree {}: {e}",
                    wt.name
                ));
            }
        } else if ours && wt.prunable {
            log.line(&format!("reconcile: removing broken worktree {}", wt.name));
            if let Err(e) = git.remove_worktree(&wt.name, &wt.path) {
                log.line(&format!(
                    "reconcile: could not remove worktree {}: {e}",
                    wt.name
                ));
            }
        }
    }
    Ok(())
}

/// Attempt numbers continue after the highest one any kept ref or attempt
/// log uses: the state may have forgotten them (`ralph reset ID`), and a
/// new attempt must never overwrite an old one's ref or log.
fn number_attempts_after_kept_work(project: &Project, git: &Git, state: &mut State) {
    let mut highest: std::collections::HashMap<String, u32> = Default::default();
    let mut note = |id: &str, n: u32| {
        let h = highest.entry(id.to_string()).or_default();
        *h = (*h).max(n);
    };
    for r in git.refs_with_prefix(project::KEPT_REFS).unwrap_or_default() {
        if let Some((id, n)) = project::kept_ref_attempt(&r) {
            note(id, n);
        }
    }
    // `.ralph/logs/<id>/attempt-<n>.log`, read once for the stories that
    // have logs.
    let logs = std::fs::read_dir(paths::logs_dir(&project.root));
    for story_dir in logs.into_iter().flatten().flatten() {
        let id = story_dir.file_name().to_string_lossy().into_owned();
        for entry in std::fs::read_dir(story_dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if let Some(n) = paths::attempt_log_number(&entry.file_name().to_string_lossy()) {
                note(&id, n);
            }
        }
    }
    for (id, n) in highest {
        if project.backlog.index_of(&id).is_some() {
            state.number_attempts_after(&id, n);
        }
    }
}

/// The end of a run: worktrees are scratch space (the work lives on
/// branches and refs), and story branches go once their work is on the
/// target or kept under a ref; a branch holding unsaved work stays, and so
/// does the branch of a story waiting for review (`in_review`): `ralph land`
/// lands that branch, whatever refs keep its tip as well.
pub(crate) fn cleanup_worktrees(root: &Path, git: &Git, target: &str, in_review: &[String]) {
    if let Ok(list) = git.list_worktrees() {
        for wt in list.into_iter().filter(|wt| paths::is_ours(root, &wt.path)) {
            let _ = git.remove_worktree(&wt.name, &wt.path);
        }
    }
    let _ = git.delete_branch(project::VALIDATE_BRANCH);
    // The merge queue's other validation slots (a chain's).
    for b in git
        .branches_with_prefix(&format!("{}-", project::VALIDATE_BRANCH))
        .unwrap_or_default()
    {
        let _ = git.delete_branch(&b);
    }
    let _ = git.delete_branch(project::WARM_BRANCH);
    let _ = std::fs::remove_dir(paths::worktrees_dir(root));
    for b in git
        .branches_with_prefix(project::STORY_BRANCH_PREFIX)
        .unwrap_or_default()
    {
        if in_review.iter().any(|id| project::story_branch(id) == b) {
            continue;
        }
        let merged = git.is_merged(&b, target).unwrap_or(false);
        let saved = git.tip_saved_under(&b, project::KEPT_REFS).unwrap_or(false);
        if merged || saved {
            let _ = git.delete_branch(&b);
        }
    }
}

/// A race (best of N, issue 36) the run died in: what each candidate of
/// story `id`'s attempt `n` left uncommitted in its slot, and its commits,
/// kept (`-uncommitted` under its key, `project::candidate_ref`); the refs.
fn keep_interrupted_candidates(
    git: &Git,
    (slots, target): (&[(String, std::path::PathBuf)], &str),
    id: &str,
    n: u32,
    log: &TechLog,
) -> Vec<String> {
    let prefix = project::story_branch(&project::candidate_key_prefix(id));
    let mut kept = Vec::new();
    let branches = git.branches_with_prefix(&prefix).unwrap_or_default();
    for branch in branches {
        let Some(k) = branch
            .strip_prefix(&prefix)
            .and_then(|k| k.parse::<u32>().ok())
        else {
            continue;
        };
        let key = project::candidate_key(id, k);
        if let Some((_, path)) = slots.iter().find(|(b, _)| *b == branch) {
            let unc = project::kept_ref(KeptRef::Uncommitted, &key, n);
            if let Ok(Some(_)) = git.save_uncommitted(path, &unc) {
                kept.push(unc);
            }
        }
        let r = project::candidate_ref(id, n, k);
        if git
            .tip_saved_under(&branch, project::KEPT_REFS)
            .unwrap_or(false)
        {
            continue;
        }
        if let Ok(true) = git.keep_candidate(&branch, target, &r) {
            kept.push(r);
        }
    }
    if !kept.is_empty() {
        log.line(&format!(
            "reconcile: story {id}: its interrupted race's candidates kept at {}",
            kept.join(", ")
        ));
    }
    kept
}
