//! Landed work set back (issue 21's defence, made incremental in issue
//! 34): after each landing, the commits that reached the target since the
//! last check are read for paths a story of this run landed and a later
//! commit set back; said at once and again at the run's end.

use crate::project;

use super::context::RunContext;

/// After each landing: did a commit that reached the target since the last
/// check set back work a story of this run landed? A path that a later
/// commit (other than a story's merge) set back to its old content is said
/// at once in ralph.log and the run's records, and again at the end of the
/// run. Only the new commits and their paths are read (`Git::reverted_since`):
/// a landing costs the same at the thousandth story as at the first.
pub(super) fn check_landed_work(ctx: &RunContext) {
    let mut check = ctx.reverted.lock().unwrap_or_else(|e| e.into_inner());
    let found = {
        let landed = ctx.landed.lock().unwrap_or_else(|e| e.into_inner());
        ctx.git.reverted_since(&ctx.target, &landed, &mut check)
    };
    let found = match found {
        Ok(found) => found,
        Err(e) => {
            ctx.log.line(&format!(
                "checking the landed stories on {}: {e}",
                ctx.target
            ));
            return;
        }
    };
    for r in found {
        // A later story may change what an earlier one wrote: that is work,
        // not a revert.
        if project::landed_id(&r.subject).is_some() {
            continue;
        }
        if check
            .said
            .iter()
            .any(|s| s.story == r.story && s.path == r.path && s.commit == r.commit)
        {
            continue;
        }
        ctx.log
            .line(&format!("WARNING: {}", reverted_line(&r, &ctx.target)));
        ctx.record(crate::runlog::Ev::Reverted {
            story: r.story.clone(),
            path: r.path.clone(),
            commit: r.commit.clone(),
            subject: r.subject.clone(),
        });
        check.said.push(r);
    }
}

fn reverted_line(r: &crate::gitops::Reverted, target: &str) -> String {
    format!(
        "story {} landed, but commit {} (\"{}\") on {target} set {} back to its content from \
         before the story: that work is no longer on {target} (restore it with `git checkout {} \
         -- {}` or revert that commit)",
        r.story,
        &r.commit[..r.commit.len().min(12)],
        r.subject,
        r.path,
        project::story_branch(&r.story),
        r.path
    )
}

/// The loud lines for the end of the run: every landed story whose work a
/// later commit set back.
pub(crate) fn reverted_warnings(ctx: &RunContext) -> Vec<String> {
    ctx.reverted
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .said
        .iter()
        .map(|r| format!("warning: {}", reverted_line(r, &ctx.target)))
        .collect()
}
