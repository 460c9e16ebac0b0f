//! A fix-up's side of an attempt (issue 11): the story's kept work merged
//! onto the target's tip in its slot, the fix-up's prompt, and after the
//! agent, the conflict markers it may have left (`verdict::decide` judges).

use std::path::Path;

use crate::backlog::{self, Story};
use crate::gitops::{FixupLabels, FixupStart, GitError};
use crate::prompt::{self, FixupInput};
use crate::state::{Fixup, FixupCause};

use crate::executor::{template, AttemptEnv};

/// The prompt of a fix-up: `.ralph/templates/fixup.md` or the built-in
/// one, with what went wrong and where the worktree was left; the spec only
/// when the agent's session is not resumed (it has read it there).
pub(super) fn build_fixup_prompt(
    ctx: &AttemptEnv,
    story: &Story,
    fixup: &Fixup,
    setup: &FixupSetup,
    resumed: bool,
    extra: &str,
) -> std::io::Result<String> {
    let (root, config, target) = (&ctx.root, &ctx.config, ctx.target.as_str());
    let spec = if resumed {
        None
    } else {
        Some(backlog::spec_text(root, story)?)
    };
    let template = template(root, crate::paths::FIXUP_TEMPLATE, prompt::FIXUP_TEMPLATE);
    let (conflicts, merging) = match &setup.start {
        FixupStart::Merging { conflicts } => (conflicts.as_slice(), true),
        FixupStart::Committed { .. } => (&[][..], false),
    };
    let input = FixupInput {
        id: &story.id,
        title: &story.title,
        target,
        cause: &fixup.cause,
        conflicts,
        merging,
        landed: &setup.landed,
        spec: spec.as_deref(),
        extra,
    };
    Ok(prompt::render(
        &template,
        &prompt::fixup_vars(config, &input),
    ))
}

/// How a fix-up's worktree was set up.
#[derive(Debug, Clone)]
pub(super) struct FixupSetup {
    pub(super) start: FixupStart,
    /// Stories landed on the target since the work began: (ID, title).
    pub(super) landed: Vec<(String, String)>,
}

/// Merges the story's kept work onto the target's tip in its slot (just
/// prepared there): conflicts are left for the agent, a clean validation
/// fix-up's merge is committed by ralph.
pub(super) fn setup_fixup(
    ctx: &AttemptEnv,
    id: &str,
    wt: &Path,
    fixup: &Fixup,
) -> Result<FixupSetup, GitError> {
    let landed = ctx
        .git
        .landed_since(&fixup.work, &ctx.target)
        .unwrap_or_default();
    let ours = format!("{} (landed meanwhile)", ctx.target);
    let theirs = format!("story {id} (your work)");
    let message = format!(
        "fix-up(story-{id}): merge {} into the story's work\n",
        ctx.target
    );
    let labels = FixupLabels {
        ours: &ours,
        theirs: &theirs,
        message: &message,
    };
    let commit_clean = matches!(
        fixup.cause,
        FixupCause::Validation { .. } | FixupCause::Gate { .. } | FixupCause::Review { .. }
    );
    let start = ctx
        .git
        .start_fixup(wt, &fixup.work, &labels, commit_clean)?;
    Ok(FixupSetup { start, landed })
}

/// A fix-up whose merge was left to the agent: the files that conflicted
/// and still hold conflict markers on the branch (none read when nothing
/// was committed: the merge is undone anyway). `None` when ralph's clean
/// merge began it.
pub(super) fn merge_left(
    ctx: &AttemptEnv,
    branch: &str,
    setup: &FixupSetup,
    commits: usize,
) -> Option<Vec<String>> {
    let FixupStart::Merging { conflicts } = &setup.start else {
        return None;
    };
    if commits == 0 {
        return Some(Vec::new());
    }
    Some(
        ctx.git
            .conflict_markers(branch, conflicts)
            .unwrap_or_default(),
    )
}
