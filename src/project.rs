//! A loaded project and the names ralph gives things in git: the story
//! branch, the `refs/ralph/...` refs that keep work, the merge subject that
//! marks a landed story. Each name is built here and parsed here, nowhere
//! else, so a rename cannot leave a reader behind. Paths are `paths.rs`'s.

use std::path::{Path, PathBuf};

use crate::backlog::{self, Backlog};
use crate::config::Config;
use crate::dag::Dag;
use crate::error::Problem;
use crate::paths;

// Where these lived before `paths.rs`; files being reworked elsewhere still
// name them here (issue 21: to go once those land).

/// A loaded, valid project.
#[derive(Debug, Clone)]
pub(crate) struct Project {
    pub(crate) root: PathBuf,
    pub(crate) config: Config,
    pub(crate) backlog: Backlog,
    pub(crate) dag: Dag,
}

/// Reads an issue tracker backlog over the network now, so the `load`s
/// that follow (which read its snapshot only) see it as it is: the run's
/// start and `validate --online`. `Ok(Some(why))`: the tracker could not
/// be read and the last snapshot stands; `Err`: nothing to fall back on.
/// Without a tracker (or with a config `load` will refuse), nothing.
pub(crate) fn refresh_tracker(root: &Path) -> Result<Option<String>, Vec<Problem>> {
    refresh_tracker_within(root, None).map(|(stale, _)| stale)
}

/// `refresh_tracker` for the run's start: with a snapshot to go on from,
/// waits at most `backlog::tracker::START_WAIT`; `true` when the read was
/// left going on in the background (the run then polls at once).
pub(crate) fn refresh_tracker_at_start(
    root: &Path,
) -> Result<(Option<String>, bool), Vec<Problem>> {
    refresh_tracker_within(root, Some(backlog::tracker::START_WAIT))
}

fn refresh_tracker_within(
    root: &Path,
    wait: Option<std::time::Duration>,
) -> Result<(Option<String>, bool), Vec<Problem>> {
    let Ok(config) = crate::config::load(root) else {
        return Ok((None, false));
    };
    let read = match wait {
        Some(wait) => backlog::tracker::refresh_within(root, &config, wait),
        None => backlog::tracker::refresh(root, &config).map(|read| backlog::tracker::StartRead {
            read,
            reading_on: false,
        }),
    };
    match read {
        None => Ok((None, false)),
        Some(s) if s.read.backlog.is_none() => Err(s.read.problems),
        Some(s) => Ok((s.read.stale, s.reading_on)),
    }
}

/// Loads config, backlog and DAG, collecting every problem. An issue
/// tracker's backlog is read from its snapshot: no read waits on the
/// network (`refresh_tracker` is the one that asks).
pub(crate) fn load(root: &Path) -> Result<Project, Vec<Problem>> {
    let pattern = |x: &Problem| x.key.as_deref() == Some("specs.pattern");
    let (config, mut problems) = match crate::config::load(root) {
        Ok(c) => (c, Vec::new()),
        Err(p) => {
            // Keep going with the defaults so one run of `validate` shows
            // the backlog's problems too.
            let defaults =
                crate::config::from_value(crate::config::defaults(), Path::new(paths::CONFIG))
                    .map_err(|_| p.clone())?;
            (defaults, p)
        }
    };
    let pattern_broken = problems.iter().any(pattern);
    // The DAG is checked over whatever of the backlog could be read: every
    // problem at once, never one stage hiding the next.
    let (backlog, mut p) = backlog::load_partial(root, &config);
    if pattern_broken {
        // Specs not found by the default pattern only repeat that the
        // user's pattern is broken.
        p.retain(|x| !pattern(x));
    }
    problems.append(&mut p);
    let Some(backlog) = backlog else {
        return Err(problems);
    };
    let dag = match Dag::build(&backlog) {
        Ok(d) => d,
        Err(mut p) => {
            // A dependency problem is fixed at the spec's depends_on line.
            for prob in p.iter_mut().filter(|p| p.line.is_none()) {
                let is_spec = backlog
                    .stories
                    .iter()
                    .any(|s| s.spec_path.as_deref() == Some(prob.file.as_path()));
                if is_spec {
                    prob.line = std::fs::read_to_string(root.join(&prob.file))
                        .ok()
                        .and_then(|t| crate::backlog::depends_on_line(&t));
                }
            }
            problems.append(&mut p);
            return Err(problems);
        }
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Project {
        root: root.to_path_buf(),
        config,
        backlog,
        dag,
    })
}

/// The project a command started in `start` acts on, found as git finds
/// its repository: the nearest directory at or above `start` holding
/// `.ralph/` or `prd.json`, looking no higher than the top of the git work
/// tree `start` is in (a `.ralph/` in a home directory is not the project of
/// every repository below it). `Err` holds the last directory searched.
pub(crate) fn find_root(start: &Path) -> Result<PathBuf, PathBuf> {
    let mut last = start;
    for d in start.ancestors() {
        last = d;
        if crate::paths::project_marker(d).is_some() {
            return Ok(d.to_path_buf());
        }
        if d.join(".git").exists() {
            break;
        }
    }
    Err(last.to_path_buf())
}

/// The branch of the merge queue's validation worktree (deleted at the end of a run).
pub(crate) const VALIDATE_BRANCH: &str = "ralph/validate";

/// The worktree and branch of validation slot `slot`: the first is the
/// one a single landing uses; a chain's `k`-th merge validates in the
/// `k`-th, side by side.
pub(crate) fn validation_slot(slot: usize) -> (String, String) {
    match slot {
        0 => (
            crate::paths::VALIDATE_WORKTREE.to_string(),
            VALIDATE_BRANCH.to_string(),
        ),
        k => (
            format!("{}-{}", crate::paths::VALIDATE_WORKTREE, k + 1),
            format!("{}-{}", VALIDATE_BRANCH, k + 1),
        ),
    }
}

/// The branch a new slot worktree is made on while it is warmed for a story
/// not chosen yet (`exec/local/slot.rs::warm_slot`); deleted as soon as the
/// slot is detached, and at the end of a run should a crash have left it.
pub(crate) const WARM_BRANCH: &str = "ralph/warm";

/// Prefix of every story branch.
pub(crate) const STORY_BRANCH_PREFIX: &str = "ralph/story-";

pub(crate) fn story_branch(id: &str) -> String {
    format!("{STORY_BRANCH_PREFIX}{id}")
}

/// What a racing candidate's git names are made of (issue 36): its branch
/// (`story_branch` of it), its attempt's refs and its process token. A
/// story ID has no `@`, so it is no other story's.
pub(crate) fn candidate_key(id: &str, k: u32) -> String {
    format!("{}{k}", candidate_key_prefix(id))
}

/// What an attempt's git names and token are made of: the story's ID, or
/// racing candidate `k`'s key (on this machine and on a cluster node alike).
pub(crate) fn attempt_key(id: &str, candidate: Option<u32>) -> String {
    match candidate {
        Some(k) => candidate_key(id, k),
        None => id.to_string(),
    }
}

/// `attempt_key` taken apart: the story's ID, and the racing candidate
/// when the key is one's (a crashed run's job names it so).
pub(crate) fn split_attempt_key(key: &str) -> (&str, Option<u32>) {
    match key.rsplit_once("@c").map(|(id, k)| (id, k.parse::<u32>())) {
        Some((id, Ok(k))) => (id, Some(k)),
        _ => (key, None),
    }
}

/// What every racing candidate's key of story `id` begins with.
pub(crate) fn candidate_key_prefix(id: &str) -> String {
    format!("{id}@c")
}

/// Where the work of candidate `k` of attempt `n` at story `id` is kept
/// when it did not win (issue 36).
pub(crate) fn candidate_ref(id: &str, n: u32, k: u32) -> String {
    format!("{KEPT_REFS}candidates/{id}/{n}/{k}")
}

/// Prefix of every ref that keeps work (attempts, conflicts).
pub(crate) const KEPT_REFS: &str = "refs/ralph/";

/// The refs under which one attempt's work is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeptRef {
    /// The commits of a failed or interrupted attempt.
    Attempt,
    /// What the agent left uncommitted.
    Uncommitted,
    /// Where the agent's worktree HEAD was, when it left the story branch.
    Head,
    /// A run died while the attempt was running.
    Interrupted,
    /// The branch's commits, found unsaved before it was moved.
    Saved,
    /// The work whose landing conflicted.
    Conflict,
}

/// The full ref name keeping attempt `n` of story `id`.
pub(crate) fn kept_ref(kind: KeptRef, id: &str, n: u32) -> String {
    match kind {
        KeptRef::Attempt => format!("{KEPT_REFS}attempts/{id}/{n}"),
        KeptRef::Uncommitted => format!("{KEPT_REFS}attempts/{id}/{n}-uncommitted"),
        KeptRef::Head => format!("{KEPT_REFS}attempts/{id}/{n}-head"),
        KeptRef::Interrupted => format!("{KEPT_REFS}attempts/{id}/{n}-interrupted"),
        KeptRef::Saved => format!("{KEPT_REFS}attempts/{id}/saved-{n}"),
        KeptRef::Conflict => format!("{KEPT_REFS}conflicts/{id}/{n}"),
    }
}

/// The story and attempt number a kept ref names (`refs/ralph/attempts/<id>/<n>`,
/// `.../<n>-uncommitted`, `refs/ralph/conflicts/<id>/<n>`, ...); `None` for
/// refs numbered otherwise (`saved-<time>`) and for other refs.
pub(crate) fn kept_ref_attempt(refname: &str) -> Option<(&str, u32)> {
    let rest = refname
        .strip_prefix(KEPT_REFS)?
        .split_once('/')
        .filter(|(kind, _)| matches!(*kind, "attempts" | "conflicts"))?
        .1;
    let (id, last) = rest.rsplit_once('/')?;
    let digits = last.split('-').next()?;
    Some((id, digits.parse().ok()?))
}

const MERGE_PREFIX: &str = "merge: story ";

/// The message of a story's landing commit: its subject is what marks the
/// story as landed (SPEC 5).
pub(crate) fn merge_message(id: &str, title: &str) -> String {
    format!("{MERGE_PREFIX}{id}\n\n{title}\n")
}

/// The story ID a commit subject marks as landed, if it is a landing.
pub(crate) fn landed_id(subject: &str) -> Option<&str> {
    let id = subject.strip_prefix(MERGE_PREFIX)?.trim();
    (!id.is_empty()).then_some(id)
}

/// The story a landing commit's whole message marks as landed, with the
/// title `merge_message` put in its body ("" when it has none).
pub(crate) fn landed_story(message: &str) -> Option<(String, String)> {
    let mut lines = message.lines();
    let id = landed_id(lines.next()?)?;
    let title = lines.find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    Some((id.to_string(), title.to_string()))
}

/// Short stable hash of the project path: the prefix of every attempt token,
/// so processes a killed run left behind can be found (and only ours).
pub(crate) fn project_tag(root: &Path) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in root.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("ralph-{:08x}-", h as u32)
}

/// The token of one attempt: the project tag, this run's PID, the story and
/// the attempt number.
pub(crate) fn attempt_token(tag: &str, id: &str, attempt: u32) -> String {
    format!("{tag}{}-{id}-{attempt}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::attempt_log_number;

    #[test]
    fn an_attempt_key_names_the_story_and_its_candidate() {
        for (id, k) in [("1.2", None), ("1.2", Some(3)), ("auth-login", Some(12))] {
            let key = attempt_key(id, k);
            assert_eq!(split_attempt_key(&key), (id, k), "{key}");
        }
        assert_eq!(attempt_key("1.2", Some(3)), "1.2@c3");
        assert_eq!(split_attempt_key("a@cx"), ("a@cx", None));
    }

    #[test]
    fn the_project_is_found_upwards_but_not_above_the_work_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        for d in [
            "outer/.ralph",
            "outer/repo/.git",
            "outer/repo/src/deep",
            "proj/.ralph",
            "proj/.git",
            "proj/a/b",
            "prd/x",
        ] {
            std::fs::create_dir_all(t.join(d)).unwrap();
        }
        std::fs::write(t.join("prd/prd.json"), "{}").unwrap();
        assert_eq!(find_root(&t.join("proj/a/b")), Ok(t.join("proj")));
        assert_eq!(find_root(&t.join("proj")), Ok(t.join("proj")));
        assert_eq!(find_root(&t.join("prd/x")), Ok(t.join("prd")));
        // outer/.ralph is above the repository: not its project.
        assert_eq!(
            find_root(&t.join("outer/repo/src/deep")),
            Err(t.join("outer/repo"))
        );
        assert_eq!(
            crate::paths::project_marker(&t.join("proj")),
            Some(t.join("proj/.ralph"))
        );
    }

    #[test]
    fn the_merge_subject_round_trips() {
        let msg = merge_message("2.10", "Add a thing");
        let subject = msg.lines().next().unwrap();
        assert_eq!(landed_id(subject), Some("2.10"));
        assert_eq!(landed_id("merge: story "), None);
        assert_eq!(
            landed_story(&msg),
            Some(("2.10".to_string(), "Add a thing".to_string()))
        );
        assert_eq!(
            landed_story("merge: story 3.1\n"),
            Some(("3.1".to_string(), String::new()))
        );
        assert_eq!(landed_story("Merge branch 'x'\n\nmerge: story 1.1"), None);
        assert_eq!(landed_id("Merge branch 'x'"), None);
    }

    #[test]
    fn kept_refs_name_their_attempt() {
        for kind in [
            KeptRef::Attempt,
            KeptRef::Uncommitted,
            KeptRef::Head,
            KeptRef::Interrupted,
            KeptRef::Conflict,
        ] {
            assert_eq!(
                kept_ref_attempt(&kept_ref(kind, "2.10", 7)),
                Some(("2.10", 7))
            );
        }
        assert_eq!(kept_ref_attempt(&kept_ref(KeptRef::Saved, "1.1", 99)), None);
        assert_eq!(kept_ref_attempt("refs/ralph/other/1.1/3"), None);
        assert_eq!(kept_ref_attempt("refs/heads/main"), None);
        assert_eq!(attempt_log_number("attempt-12.log"), Some(12));
        assert_eq!(attempt_log_number("validation-1.log"), None);
    }

    #[test]
    fn kept_refs_live_under_one_prefix() {
        for kind in [
            KeptRef::Attempt,
            KeptRef::Uncommitted,
            KeptRef::Head,
            KeptRef::Interrupted,
            KeptRef::Saved,
            KeptRef::Conflict,
        ] {
            assert!(kept_ref(kind, "1.1", 3).starts_with(KEPT_REFS));
        }
        assert_eq!(
            kept_ref(KeptRef::Attempt, "1.1", 3),
            "refs/ralph/attempts/1.1/3"
        );
    }
}
