//! The executor's side of a decomposition run (issue 12): its prompt, and
//! turning the agent's answer into files on the story branch. What is
//! checked and written is decided by the pure `crate::decompose`.

use std::collections::HashSet;
use std::path::Path;

use crate::agent::{ResultKind, Verdict};
use crate::backlog::{self, Source, Story};
use crate::dag::Dag;
use crate::decompose::{self, Reply};
use crate::gitops::LeftWork;
use crate::project;
use crate::prompt;

use crate::executor::AttemptEnv;

/// How much of the spec and of the last attempt's output the prompt holds
/// (Ralph v2's limits).
const SPEC_BYTES: usize = 10_000;
const LAST_OUTPUT_CHARS: usize = 10_000;
/// Most agent text kept to read the answer from; a longer answer is refused.
pub(crate) const KEEP_TEXT: usize = decompose::MAX_REPLY_BYTES;

/// The decomposition prompt: `.ralph/templates/decompose.md` or the
/// built-in one, with Ralph v2's variables.
pub(crate) fn prompt(
    ctx: &AttemptEnv,
    story: &Story,
    history: &str,
    attempt: u32,
    learnings: &[String],
) -> std::io::Result<String> {
    let spec = backlog::spec_text(&ctx.root, story)?;
    let spec = crate::postmortem::head_bytes(&spec, SPEC_BYTES);
    let last_log = (1..attempt)
        .rev()
        .map(|n| crate::paths::attempt_log_path(&ctx.root, &story.id, n))
        // A char is at most 4 bytes: the end read holds the last chars kept.
        .find_map(|p| crate::store::read_log_end(&p, 0, 4 * LAST_OUTPUT_CHARS as u64 + 4).ok())
        .map(|(text, _)| text)
        .unwrap_or_default();
    let last = crate::postmortem::tail_chars(&last_log, LAST_OUTPUT_CHARS);
    let template = crate::executor::template(
        &ctx.root,
        crate::paths::DECOMPOSE_TEMPLATE,
        decompose::TEMPLATE,
    );
    let mut v = prompt::Vars::default();
    v.set("STORY_ID", story.id.as_str());
    v.set("TITLE", story.title.as_str());
    v.set("SPEC_CONTENT", spec);
    v.set("FAILURE_HISTORY", history);
    v.set("LAST_OUTPUT", last);
    v.set("LEARNINGS", learnings.join("\n"));
    v.set("RETRY_COUNT", ctx.config.loop_.max_retries.to_string());
    Ok(prompt::render(&template, &v))
}

/// Reads the answer (all of the agent's own text, `answer_bytes` long in
/// all, of which `answer` was kept), writes the sub-stories into the slot's
/// worktree and commits them on the story branch. The verdict, and the IDs
/// written.
pub(crate) fn apply_answer(
    ctx: &AttemptEnv,
    story: &Story,
    slot: usize,
    (answer, answer_bytes): (&str, usize),
    commits: usize,
) -> (Verdict, Vec<String>) {
    let failed = |reason: String| {
        (
            Verdict::Failed {
                reason,
                kind: ResultKind::Fail,
            },
            Vec::new(),
        )
    };
    if let Err(why) = decompose::check_size(answer_bytes) {
        return failed(format!("decomposition refused, nothing written: {why}"));
    }
    if commits > 0 {
        return failed(
            "the decomposition run committed changes; it must only answer with sub-stories".into(),
        );
    }
    let (_, wt) = crate::paths::slot_worktree(&ctx.root, slot);
    let root_rel = ctx.git.rel_path(&ctx.root).unwrap_or_default();
    let wt_root = if root_rel.is_empty() {
        wt.clone()
    } else {
        wt.join(&root_rel)
    };
    let before = match backlog::load(&wt_root, &ctx.config) {
        Ok(b) => b,
        Err(p) => return failed(format!("the backlog does not load in the slot: {}", p[0])),
    };
    let known: HashSet<String> = before
        .stories
        .iter()
        .map(|s| s.id.clone())
        .chain(before.skipped.iter().cloned())
        .collect();
    let children = match decompose::parse_reply(answer, &story.id, &known) {
        Ok(Reply::Split(c)) => c,
        Ok(Reply::Declined(why)) => return failed(format!("decomposition declined: {why}")),
        Err(why) => return failed(format!("decomposition refused, nothing written: {why}")),
    };
    let ids: Vec<String> = children.iter().map(|c| c.id.clone()).collect();
    match write(ctx, &wt_root, &before.source, story, &children) {
        Ok(paths) => {
            // The backlog with the children must load and form a DAG, or
            // nothing is committed (the slot is reset for its next use).
            let checked = backlog::load(&wt_root, &ctx.config).and_then(|b| Dag::build(&b));
            if let Err(p) = checked {
                return failed(format!("the sub-stories do not fit the backlog: {}", p[0]));
            }
            let ours: HashSet<String> = paths
                .iter()
                .map(|p| {
                    if root_rel.is_empty() {
                        p.clone()
                    } else {
                        format!("{root_rel}/{p}")
                    }
                })
                .collect();
            let message = format!("decompose: story {} into {}", story.id, ids.join(", "));
            let branch = project::story_branch(&story.id);
            let skip = |p: &str| !ours.contains(p);
            match ctx.git.commit_left_work(&wt, &branch, &message, &skip) {
                Ok(LeftWork::Committed { .. }) => (Verdict::Done, ids),
                Ok(_) => {
                    failed("the sub-stories could not be committed on the story branch".into())
                }
                Err(e) => failed(format!("committing the sub-stories failed: {e}")),
            }
        }
        Err(e) => failed(format!("writing the sub-stories failed: {e}")),
    }
}

/// Writes the children's specs and the queue (or prd.json); the paths
/// written, relative to the project root.
fn write(
    ctx: &AttemptEnv,
    root: &Path,
    source: &Source,
    parent: &Story,
    children: &[decompose::SubStory],
) -> Result<Vec<String>, String> {
    let io = |e: std::io::Error| e.to_string();
    let mut paths = Vec::new();
    match source {
        Source::StoriesTxt => {
            for c in children {
                let rel = decompose::child_spec_path(&ctx.config.specs.pattern, c);
                let text =
                    decompose::child_spec(c, &parent.depends_on, &ctx.config.specs.status_field);
                let full = root.join(&rel);
                if let Some(dir) = full.parent() {
                    std::fs::create_dir_all(dir).map_err(io)?;
                }
                std::fs::write(&full, text).map_err(io)?;
                paths.push(rel.display().to_string());
            }
            let queue = crate::paths::QUEUE;
            let text = std::fs::read_to_string(root.join(queue)).map_err(io)?;
            let new = decompose::insert_in_queue(&text, &parent.id, children)?;
            std::fs::write(root.join(queue), new).map_err(io)?;
            paths.push(queue.to_string());
        }
        Source::Prd { .. } => {
            let prd = crate::paths::PRD;
            let text = std::fs::read_to_string(root.join(prd)).map_err(io)?;
            let new = decompose::insert_in_prd(&text, &parent.id, children, &parent.depends_on)?;
            std::fs::write(root.join(prd), new).map_err(io)?;
            paths.push(prd.to_string());
        }
        // The run does not split a tracker's stories (`decompose_depth` is
        // off for one); a split asked by hand is refused here, before
        // anything is written.
        Source::GitHub { .. } | Source::Linear { .. } | Source::Jira { .. } => {
            return Err(
                "a story of an issue tracker is split in the tracker (sub-issues), not by ralph"
                    .to_string(),
            )
        }
    }
    Ok(paths)
}
