//! A loaded project and every name ralph gives things in it: runtime paths,
//! the story branch, the `refs/ralph/...` refs that keep work, the merge
//! subject that marks a landed story. Each name is built here and parsed
//! here, nowhere else, so a rename cannot leave a reader behind.

use std::path::{Path, PathBuf};

use crate::backlog::{self, Backlog};
use crate::config::Config;
use crate::dag::Dag;
use crate::error::Problem;

/// A loaded, valid project.
#[derive(Debug, Clone)]
pub(crate) struct Project {
    pub(crate) root: PathBuf,
    pub(crate) config: Config,
    pub(crate) backlog: Backlog,
    pub(crate) dag: Dag,
}

/// Loads config, backlog and DAG, collecting every problem.
pub(crate) fn load(root: &Path) -> Result<Project, Vec<Problem>> {
    let pattern = |x: &Problem| x.key.as_deref() == Some("specs.pattern");
    let (config, mut problems) = match crate::config::load(root) {
        Ok(c) => (c, Vec::new()),
        Err(p) => {
            // Keep going with the defaults so one run of `validate` shows
            // the backlog's problems too.
            let defaults = crate::config::from_value(
                crate::config::defaults(),
                Path::new(".ralph/config.json"),
            )
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
        if project_marker(d).is_some() {
            return Ok(d.to_path_buf());
        }
        if d.join(".git").exists() {
            break;
        }
    }
    Err(last.to_path_buf())
}

/// What makes `dir` a project root: its `.ralph/`, else its `prd.json`.
pub(crate) fn project_marker(dir: &Path) -> Option<PathBuf> {
    let ralph = dir.join(".ralph");
    let prd = dir.join("prd.json");
    if ralph.is_dir() {
        Some(ralph)
    } else {
        prd.is_file().then_some(prd)
    }
}

/// Paths ralph writes at run time, as gitignore patterns anchored at the
/// project root: kept out of git and out of the dirty check.
pub(crate) const RUNTIME_PATTERNS: &[&str] = &[
    "/.ralph/state.json",
    "/.ralph/.lock",
    "/.ralph/landing.json",
    "/.ralph/logs/",
    "/.ralph/worktrees/",
    "/.ralph/learnings/",
    "/.ralph/runs/",
    "/.ralph/report.html",
    "/.ralph/.*.tmp-*",
    "/progress.txt",
    "/ralph.log",
];

/// True when `rel_to_root` matches one of `RUNTIME_PATTERNS`.
pub(crate) fn is_runtime_path(rel_to_root: &str) -> bool {
    RUNTIME_PATTERNS.iter().any(|p| {
        let p = &p[1..];
        if let Some(dir) = p.strip_suffix('/') {
            rel_to_root.starts_with(dir) && rel_to_root[dir.len()..].starts_with('/')
        } else if p.contains('*') {
            glob::Pattern::new(p).is_ok_and(|g| g.matches(rel_to_root))
        } else {
            rel_to_root == p
        }
    })
}

/// True when `repo_rel`, a path relative to the top of the repository (or
/// of one of its worktrees), is a runtime file of the project found at
/// `root_rel` inside it ("" when the project is the whole repository): the
/// one rule for what ralph's checks of a checkout and its commits leave out.
pub(crate) fn is_runtime_repo_path(repo_rel: &str, root_rel: &str) -> bool {
    let in_project = if root_rel.is_empty() {
        Some(repo_rel)
    } else {
        repo_rel
            .strip_prefix(root_rel)
            .and_then(|p| p.strip_prefix('/'))
    };
    in_project.is_some_and(is_runtime_path)
}

/// `.ralph/logs/`: one directory per story with logs.
pub(crate) fn logs_dir(root: &Path) -> PathBuf {
    root.join(".ralph/logs")
}

/// `.ralph/logs/<id>/attempt-<n>.log`: the raw output of one attempt.
pub(crate) fn attempt_log_path(root: &Path, id: &str, attempt: u32) -> PathBuf {
    logs_dir(root)
        .join(id)
        .join(format!("attempt-{attempt}.log"))
}

/// `.ralph/logs/<id>/validation-<n>.log`: the output of the validation
/// commands run on attempt `n`'s merged tree.
pub(crate) fn validation_log_path(root: &Path, id: &str, attempt: u32) -> PathBuf {
    logs_dir(root)
        .join(id)
        .join(format!("validation-{attempt}.log"))
}

/// The landing intent, written before the main checkout is touched and
/// removed once the landing is decided.
pub(crate) fn landing_intent_path(root: &Path) -> PathBuf {
    root.join(".ralph").join("landing.json")
}

/// Where the slot worktrees (and the validation one) live.
pub(crate) fn worktrees_dir(root: &Path) -> PathBuf {
    root.join(".ralph").join("worktrees")
}

/// The worktree of job slot `slot`: its name and its path.
pub(crate) fn slot_worktree(root: &Path, slot: usize) -> (String, PathBuf) {
    let name = format!("slot-{slot}");
    let path = worktrees_dir(root).join(&name);
    (name, path)
}

/// Absolute paths into one of ralph's worktrees, as agents write them in
/// their tool calls (`/home/u/p/.ralph/worktrees/slot-0/src/lib.rs`).
static WORKTREE_PATH_RE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r#"[^\s"'=:(\[]*/\.ralph/worktrees/[^/\s"')\]]+(/)?"#)
        .expect("static pattern")
});

/// `text` with paths inside a slot worktree made relative to it: the agent
/// works there, so `src/lib.rs` says all and leaves room for the file name.
pub(crate) fn relative_to_worktree(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("/.ralph/worktrees/") {
        return std::borrow::Cow::Borrowed(text);
    }
    WORKTREE_PATH_RE.replace_all(
        text,
        |c: &regex::Captures<'_>| {
            if c.get(1).is_some() {
                ""
            } else {
                "."
            }
        },
    )
}

/// Name of the worktree the merge queue validates merged trees in.
pub(crate) const VALIDATE_WORKTREE: &str = "validate";
/// Its branch (deleted at the end of a run).
pub(crate) const VALIDATE_BRANCH: &str = "ralph/validate";

/// True when `path` is one of ralph's worktrees (under `.ralph/worktrees`).
pub(crate) fn is_ours(root: &Path, path: &Path) -> bool {
    let dir = worktrees_dir(root);
    path.starts_with(&dir) || dir.canonicalize().is_ok_and(|c| path.starts_with(c))
}

/// Prefix of every story branch.
pub(crate) const STORY_BRANCH_PREFIX: &str = "ralph/story-";

pub(crate) fn story_branch(id: &str) -> String {
    format!("{STORY_BRANCH_PREFIX}{id}")
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

/// The attempt number an attempt log's file name carries (`attempt-<n>.log`).
pub(crate) fn attempt_log_number(file_name: &str) -> Option<u32> {
    file_name
        .strip_prefix("attempt-")?
        .strip_suffix(".log")?
        .parse()
        .ok()
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
        assert_eq!(project_marker(&t.join("proj")), Some(t.join("proj/.ralph")));
    }

    #[test]
    fn runtime_paths_of_a_project_inside_a_repository() {
        assert!(is_runtime_repo_path("progress.txt", ""));
        assert!(is_runtime_repo_path("app/progress.txt", "app"));
        assert!(is_runtime_repo_path(
            "app/.ralph/logs/1.1/attempt-1.log",
            "app"
        ));
        assert!(!is_runtime_repo_path("progress.txt", "app"));
        assert!(!is_runtime_repo_path("apple/progress.txt", "app"));
        assert!(!is_runtime_repo_path("app/.ralph/config.json", "app"));
    }

    #[test]
    fn runtime_paths_come_from_the_one_pattern_list() {
        for p in [
            ".ralph/state.json",
            ".ralph/landing.json",
            ".ralph/logs/1.1/attempt-1.log",
            ".ralph/worktrees/slot-0/x",
            ".ralph/.state.json.tmp-42",
            "progress.txt",
            "ralph.log",
        ] {
            assert!(is_runtime_path(p), "{p}");
        }
        for p in [
            ".ralph/stories.txt",
            ".ralph/logsx",
            "src/progress.txt",
            "specs/a.md",
        ] {
            assert!(!is_runtime_path(p), "{p}");
        }
    }

    #[test]
    fn worktree_paths_become_relative() {
        assert_eq!(
            relative_to_worktree("/home/u/p/.ralph/worktrees/slot-0/src/lib.rs"),
            "src/lib.rs"
        );
        assert_eq!(
            relative_to_worktree("cd /tmp/x/.ralph/worktrees/slot-12 && cat \"/tmp/x/.ralph/worktrees/slot-12/a b.md\""),
            "cd . && cat \"a b.md\""
        );
        assert_eq!(relative_to_worktree("ls src"), "ls src");
        assert_eq!(
            relative_to_worktree("file_path=/p/.ralph/worktrees/validate/x"),
            "file_path=x"
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
