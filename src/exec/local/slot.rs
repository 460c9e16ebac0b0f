//! The slot's worktree around an agent (invariants 2 and 16): prepared on
//! the story branch at the target's tip (a previous attempt's unsaved
//! commits kept first), rebuilt once when broken; after the agent, what it
//! left kept under refs, a DONE's leftovers committed on its branch, the
//! target checked for a move of its own. Readings for `verdict::decide`,
//! which judges them. Free slots are also made ready ahead here (issue 21,
//! performance): the executor warms a free slot at the target's tip in
//! the background while agents run (`warm_slot`), and `prepare` takes it
//! without a checkout when it is at the story's base (`take_slot`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::backlog::Story;
use crate::gitops::{GitError, LeftWork, Oid};
use crate::project::{self, KeptRef};
use crate::prompt;

use crate::executor::env::{WarmSlots, WORKTREE_PREP};
use crate::executor::{blocking, AttemptEnv, AttemptReport};

use super::verdict::DoneCheck;

/// Starts asked of each slot (by path) and how many of them took it:
/// a warm of a slot a start was asked of since the warm was does nothing,
/// and no warm goes before a start waiting to take its slot. Held for a
/// moment only (never around git work).
pub(super) static SLOT_STARTS: std::sync::Mutex<std::collections::BTreeMap<PathBuf, SlotStarts>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct SlotStarts {
    pub(super) asked: u64,
    pub(super) taken: u64,
}

/// Puts the slot's worktree on the story branch at the target's tip; a
/// previous attempt's unsaved commits on that branch are kept first.
fn prepare(ctx: &AttemptEnv, id: &str, slot: usize) -> Result<Oid, GitError> {
    let mut warm = WORKTREE_PREP.lock().unwrap_or_else(|e| e.into_inner());
    let branch = project::story_branch(id);
    let (wt_name, wt_path) = crate::paths::slot_worktree(&ctx.root, slot);
    let base = ctx
        .git
        .branch_tip(&ctx.target)?
        .ok_or_else(|| GitError::Other(format!("target branch {} vanished", ctx.target)))?;
    if ctx.git.branch_tip(&branch)?.is_some()
        && ctx.git.commits_ahead(&branch, &base)? > 0
        && !ctx.git.tip_saved_under(&branch, project::KEPT_REFS)?
    {
        let stamp = crate::timefmt::now_secs().max(0) as u32;
        ctx.git
            .save_ref(&branch, &project::kept_ref(KeptRef::Saved, id, stamp))?;
    }
    ctx.git
        .release_branch(&branch, &crate::paths::worktrees_dir(&ctx.root))?;
    take_slot(ctx, &mut warm, &wt_name, &wt_path, &branch, &base)?;
    Ok(base)
}

/// `prepare`, and when the slot is broken (an agent deleted its `.git`, a
/// crash left it half-made) the slot is removed and made again, once.
pub(super) fn prepare_or_rebuild(ctx: &AttemptEnv, id: &str, slot: usize) -> Result<Oid, GitError> {
    match prepare(ctx, id, slot) {
        Ok(base) => Ok(base),
        Err(first) => {
            let (name, path) = crate::paths::slot_worktree(&ctx.root, slot);
            ctx.log.line(&format!(
                "slot {slot} could not be prepared ({first}); rebuilding it"
            ));
            {
                let _guard = WORKTREE_PREP.lock().unwrap_or_else(|e| e.into_inner());
                let _ = ctx.git.remove_worktree(&name, &path);
            }
            prepare(ctx, id, slot)
        }
    }
}

/// The agent may have left the worktree dirty, detached or on another
/// branch: keep everything, and let the story branch hold its commits.
/// Returns the refs it kept besides the branch.
pub(super) fn keep_what_the_agent_left(
    ctx: &AttemptEnv,
    id: &str,
    n: u32,
    wt: &Path,
    base: &Oid,
) -> Vec<String> {
    let mut kept = Vec::new();
    let branch = project::story_branch(id);
    let unc = project::kept_ref(KeptRef::Uncommitted, id, n);
    if let Ok(Some(_)) = ctx.git.save_uncommitted(wt, &unc) {
        ctx.log.line(&format!(
            "story {id} attempt {n}: uncommitted changes kept at {unc}"
        ));
        kept.push(unc);
    }
    let head = project::kept_ref(KeptRef::Head, id, n);
    if let Ok(a) = ctx.git.adopt_worktree_head(wt, &branch, base, &head) {
        if a != crate::gitops::Adopted::Unchanged {
            ctx.log.line(&format!(
                "story {id} attempt {n}: agent left its branch: {a:?}"
            ));
        }
        if let crate::gitops::Adopted::Saved { refname } = a {
            kept.push(refname);
        }
    }
    kept
}

/// "Done" means the work is on the story branch: what the agent left
/// uncommitted is committed there (the prompt's commit message; runtime
/// files and ignored files left out), and the branch is compared with its
/// base (a DONE that changed nothing fails unless `loop.allow_empty_done`
/// or the spec's `allow_empty_done` allows it: `verdict::decide`). `Err`
/// when ralph could not commit it: the work stays under its
/// `-uncommitted` ref.
pub(super) async fn commit_done_work(
    ctx: &Arc<AttemptEnv>,
    story: &Story,
    (n, slot, branch): (u32, usize, String),
    base: &Oid,
    report: &mut AttemptReport,
) -> Result<DoneCheck, String> {
    let id = story.id.clone();
    let message = prompt::commit_message(&ctx.config.commit.format, &id, &story.title);
    let base2 = base.clone();
    let branch2 = branch.clone();
    let checked = blocking(ctx, move |c| {
        let (name, path) = crate::paths::slot_worktree(&c.root, slot);
        let branch = branch2;
        // Every process of the attempt is gone: a lock left in the slot is stale.
        c.git.clear_worktree_locks(&name)?;
        let root_rel = c.git.rel_path(&c.root).unwrap_or_default();
        let skip = |p: &str| crate::paths::is_runtime_repo_path(p, &root_rel);
        let left = c.git.commit_left_work(&path, &branch, &message, &skip)?;
        let empty = c.git.same_tree(&branch, &base2)?;
        Ok::<_, GitError>((left, empty))
    })
    .await;
    let id = &story.id;
    let (left, empty) = match checked.and_then(|r| r.map_err(|e| e.to_string())) {
        Ok(r) => r,
        Err(e) => {
            ctx.log.line(&format!(
                "story {id} attempt {n}: committing what the agent left failed: {e}"
            ));
            return Err(e);
        }
    };
    match &left {
        LeftWork::Committed { commit, files } => {
            ctx.log.line(&format!(
                "story {id} attempt {n}: the agent said DONE and left {} file(s) uncommitted \
                 ({}); ralph committed them on {branch} as {commit}",
                files.len(),
                files.join(", ")
            ));
            report.committed_for_agent = Some((files.len(), commit.clone()));
        }
        LeftWork::OffBranch => ctx.log.line(&format!(
            "story {id} attempt {n}: the agent said DONE with its worktree's HEAD off {branch}; \
             nothing committed for it"
        )),
        LeftWork::Nothing => {}
    }
    let allowed = story.allow_empty_done || ctx.config.loop_.allow_empty_done;
    if empty && allowed {
        ctx.log.line(&format!(
            "story {id} attempt {n}: DONE with no change, allowed by allow_empty_done"
        ));
    } else if empty {
        ctx.log.line(&format!(
            "story {id} attempt {n}: reported DONE but {branch} has no change over {base} and \
             nothing was left uncommitted; a story that needs no change may say so with \
             `allow_empty_done: true` in its spec's frontmatter (or loop.allow_empty_done)"
        ));
    }
    Ok(DoneCheck {
        committed_for_agent: matches!(left, LeftWork::Committed { .. }),
        empty,
        allowed,
    })
}

/// The target's new tip when the agent moved the target itself: it moved
/// since the attempt began, to a commit of the story's own work (no landing
/// and no user commit puts one there). `None` otherwise.
pub(super) fn target_moved_by_agent(ctx: &AttemptEnv, branch: &str, base: &Oid) -> Option<Oid> {
    let now = ctx.git.branch_tip(&ctx.target).ok()??;
    if &now == base {
        return None;
    }
    ctx.git
        .branch_contains(branch, &now)
        .ok()
        .filter(|&c| c)
        .map(|_| now)
}

/// Makes free slot `slot` ready for its next story (`Git::warm_worktree`),
/// or removes it (`retire`: no story waits to start), unless a story was
/// given it after this was asked for (`epoch`: the starts asked of it
/// then). A start waiting to take any slot goes first: the warm gives way
/// (returns true) and is asked again at the next event.
pub(super) fn warm_slot(ctx: &AttemptEnv, slot: usize, epoch: u64, retire: bool) -> bool {
    let mut warm = WORKTREE_PREP.lock().unwrap_or_else(|e| e.into_inner());
    let (name, path) = crate::paths::slot_worktree(&ctx.root, slot);
    {
        let starts = SLOT_STARTS.lock().unwrap_or_else(|e| e.into_inner());
        let mine = starts.get(&path).copied().unwrap_or_default();
        if mine.asked != epoch {
            return false;
        }
        if starts.values().any(|s| s.taken < s.asked) {
            return true;
        }
    }
    if retire {
        warm.take(&path);
        if path.exists() {
            // As the run's cleanup would: the attempt that left the slot kept
            // whatever it held (`attempt.rs::keep_what_the_agent_left`).
            match ctx.git.remove_worktree(&name, &path) {
                Ok(()) => ctx
                    .log
                    .line(&format!("slot {slot} removed: no story waits to start")),
                Err(e) => ctx
                    .log
                    .line(&format!("slot {slot} could not be removed yet ({e})")),
            }
        }
        return false;
    }
    let Ok(Some(tip)) = ctx.git.branch_tip(&ctx.target) else {
        return false;
    };
    match ctx
        .git
        .warm_worktree(&name, &path, &tip, crate::project::WARM_BRANCH)
    {
        Ok(true) => {
            ctx.log.line(&format!("slot {slot} ready at {tip:.8}"));
            warm.set(path, tip);
        }
        Ok(false) => {}
        Err(e) => ctx.log.line(&format!(
            "slot {slot} could not be made ready ahead ({e}); it is prepared when a story starts there"
        )),
    }
    false
}

/// Puts slot worktree `name` at `path` on `branch` at `base` for a story
/// starting there (the caller holds `WORKTREE_PREP`: `warm`): a slot
/// `warm_slot` left at `base` needs no checkout (nothing ran in it since:
/// a warm is recorded only for a free slot and taken by the next start);
/// any other is prepared in full, one warmed at an older tip by a checkout
/// of what changed since.
pub(super) fn take_slot(
    ctx: &AttemptEnv,
    warm: &mut WarmSlots,
    name: &str,
    path: &std::path::Path,
    branch: &str,
    base: &Oid,
) -> Result<(), GitError> {
    {
        let mut starts = SLOT_STARTS.lock().unwrap_or_else(|e| e.into_inner());
        let s: &mut SlotStarts = starts.entry(path.to_path_buf()).or_default();
        s.taken = s.asked;
    }
    if warm.take(path).as_ref() == Some(base)
        && ctx.git.start_warm_worktree(name, path, branch, base)?
    {
        return Ok(());
    }
    ctx.git.prepare_worktree(name, path, branch, base)
}
