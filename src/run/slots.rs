//! Slots made ready ahead (issue 21, performance): a free slot is prepared
//! at the target's tip in the background while agents run, so a story's
//! start is only the agent's spawn; the attempt's `prepare` takes it. Its
//! own file so that the dispatcher (which warms) and the attempt (which
//! takes) both use it, never each other.

use crate::gitops::{GitError, Oid};

use super::context::{RunContext, SlotStarts, WarmSlots, SLOT_STARTS, WORKTREE_PREP};

/// Makes free slot `slot` ready for its next story (`Git::warm_worktree`),
/// or removes it (`retire`: no story waits to start), unless a story was
/// given it after this was asked for (`epoch`: the starts asked of it
/// then). A start waiting to take any slot goes first: the warm gives way
/// (returns true) and is asked again at the next event.
pub(crate) fn warm_slot(ctx: &RunContext, slot: usize, epoch: u64, retire: bool) -> bool {
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
pub(crate) fn take_slot(
    ctx: &RunContext,
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
