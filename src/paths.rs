//! Every path ralph gives a project, in one place (as cargo's `Layout`
//! owns `target/`). Nothing else spells a `.ralph/` path: code joins these
//! to the root, messages print these, and the runtime patterns (what
//! `.gitignore` and `.git/info/exclude` get, what the dirty check skips)
//! come from the same table, so a new file cannot be forgotten in one of
//! them. A test (`arch_tests`) fails on a `.ralph/` literal anywhere else.
//!
//! ```text
//! <root>/                          the project (a git work tree, or a directory in one)
//! ├── prd.json                     backlog, when there is no stories.txt
//! ├── specs/                       one spec per story (`specs.pattern`)
//! ├── progress.txt              R  the human log, Ralph v2's format
//! ├── ralph.log                 R  the technical log (`-l FILE` moves it)
//! └── .ralph/
//!     ├── config.json              configuration (committed)
//!     ├── stories.txt              the backlog queue (committed)
//!     ├── templates/               prompts overriding the built-in ones (committed)
//!     │   ├── implement.md
//!     │   ├── fixup.md
//!     │   ├── decompose.md
//!     │   └── timeout-postmortem.md
//!     ├── state.json            R  every story's status and attempts
//!     ├── state.json.broken-<time> R  a state file ralph could not read, set
//!     │                            aside by `ralph reset --yes`
//!     ├── .lock                 R  the run lock (flock), its holder's PID
//!     ├── .<name>.tmp-<pid>     R  an atomic write in flight (or cut short)
//!     ├── landing.json          R  a landing's intent, until it is decided
//!     ├── logs/<id>/            R  attempt-<n>.log (the agent's raw output),
//!     │                            validation-<n>.log, postmortem-<n>.log,
//!     │                            pull-request.md; logs/plan/plan-<stamp>.log
//!     ├── worktrees/            R  slot-<n>/ (one per job), validate/ (the merge queue's)
//!     ├── learnings/            R  what agents learned, by topic, and _index.json
//!     ├── runs/                 R  <run-id>.jsonl, one record file per run
//!     ├── run.sock              R  the running run's steering socket (0600)
//!     ├── tracker/              R  an issue tracker backlog's snapshot.json (the
//!     │                            last read, with ETags), pending.json (writes queued)
//!     │                            journal.json (status changes not yet queued)
//!     │                            and made.json (writes made since the last read)
//!     └── report.html           R  `ralph report`'s page
//! ```
//!
//! `R`: written at run time — kept out of git and out of the dirty check.

use std::path::{Path, PathBuf};

/// One path of the table: its name, where it is relative to the project
/// root, and whether ralph writes it at run time (and in what form the
/// runtime pattern takes it).
macro_rules! table {
    ($( $(#[$meta:meta])* $name:ident = $rel:literal $(, runtime $form:ident)? ; )*) => {
        $( $(#[$meta])* pub(crate) const $name: &str = $rel; )*

        /// Paths ralph writes at run time, as gitignore patterns anchored at
        /// the project root: kept out of git and out of the dirty check.
        pub(crate) const RUNTIME_PATTERNS: &[&str] = &[
            $( $( pattern!($form, $rel), )? )*
        ];

        /// Every named path, for the tests.
        #[cfg(test)]
        pub(crate) const ALL: &[(&str, &str)] = &[ $( (stringify!($name), $rel), )* ];
    };
}

macro_rules! pattern {
    (file, $rel:literal) => {
        concat!("/", $rel)
    };
    (dir, $rel:literal) => {
        concat!("/", $rel, "/")
    };
}

table! {
    /// ralph's directory in a project: what makes a directory a project.
    DIR = ".ralph";
    /// The configuration (SPEC 3.2).
    CONFIG = ".ralph/config.json";
    /// The backlog queue (SPEC 3.3).
    QUEUE = ".ralph/stories.txt";
    /// Prompt templates overriding the built-in ones.
    IMPLEMENT_TEMPLATE = ".ralph/templates/implement.md";
    FIXUP_TEMPLATE = ".ralph/templates/fixup.md";
    DECOMPOSE_TEMPLATE = ".ralph/templates/decompose.md";
    POSTMORTEM_TEMPLATE = ".ralph/templates/timeout-postmortem.md";
    /// Every story's status and attempts (`store`).
    STATE = ".ralph/state.json", runtime file;
    /// A state file that was no state file, set aside by `ralph reset
    /// --yes` (`store::set_aside_state`): `*` is the time it was.
    BROKEN_STATE = ".ralph/state.json.broken-*", runtime file;
    /// The run lock.
    LOCK = ".ralph/.lock", runtime file;
    /// A landing's intent, written before the main checkout is touched and
    /// removed once the landing is decided.
    LANDING = ".ralph/landing.json", runtime file;
    /// One directory per story with logs.
    LOGS = ".ralph/logs", runtime dir;
    /// The slot worktrees and the validation one.
    WORKTREES = ".ralph/worktrees", runtime dir;
    /// Learnings agents recorded.
    LEARNINGS = ".ralph/learnings", runtime dir;
    /// Run records, one `<run-id>.jsonl` per run.
    RUNS = ".ralph/runs", runtime dir;
    /// An issue tracker backlog's last snapshot and its queued writes (issue 27).
    TRACKER = ".ralph/tracker", runtime dir;
    /// `ralph report`'s page, by default.
    REPORT = ".ralph/report.html", runtime file;
    /// The running run's steering socket (`steer`): mode 0600, removed at
    /// the run's end; one left by a killed run is removed at the next start.
    STEER_SOCKET = ".ralph/run.sock", runtime file;
    /// Temp files of atomic writes (`store::write_atomic`): `.<name>.tmp-<pid>`.
    /// Only its pattern is used.
    #[allow(dead_code)]
    TEMP_FILES = ".ralph/.*.tmp-*", runtime file;
    /// The human log (Ralph v2's format).
    PROGRESS = "progress.txt", runtime file;
    /// The technical log, unless `-l FILE` says otherwise.
    TECH_LOG = "ralph.log", runtime file;
    /// The prd.json backlog (SPEC 3.6).
    PRD = "prd.json";
}

/// `<root>/<rel>` for one of the paths above.
pub(crate) fn at(root: &Path, rel: &str) -> PathBuf {
    root.join(rel)
}

/// `.ralph/`.
pub(crate) fn ralph_dir(root: &Path) -> PathBuf {
    at(root, DIR)
}

/// `.ralph/tracker/snapshot.json`: the tracker's issues as last read.
pub(crate) fn tracker_snapshot(root: &Path) -> PathBuf {
    at(root, TRACKER).join("snapshot.json")
}

/// `.ralph/tracker/pending.json`: writes to the tracker not yet made.
pub(crate) fn tracker_pending(root: &Path) -> PathBuf {
    at(root, TRACKER).join("pending.json")
}

/// `.ralph/tracker/made.json`: writes made since the snapshot was last read,
/// which the snapshot does not show yet.
pub(crate) fn tracker_made(root: &Path) -> PathBuf {
    at(root, TRACKER).join("made.json")
}

/// `.ralph/tracker/journal.json`: status changes a run told the tracker's
/// thread that it has not yet queued (`run/tracker_journal.rs`).
pub(crate) fn tracker_journal(root: &Path) -> PathBuf {
    at(root, TRACKER).join("journal.json")
}

/// `.ralph/state.json`.
pub(crate) fn state(root: &Path) -> PathBuf {
    at(root, STATE)
}

/// `.ralph/state.json.broken-<stamp>`.
pub(crate) fn broken_state(root: &Path, stamp: &str) -> PathBuf {
    at(root, &BROKEN_STATE.replace('*', stamp))
}

/// `.ralph/.lock`.
pub(crate) fn lock(root: &Path) -> PathBuf {
    at(root, LOCK)
}

/// `.ralph/landing.json`.
pub(crate) fn landing_intent_path(root: &Path) -> PathBuf {
    at(root, LANDING)
}

/// `.ralph/logs/`.
pub(crate) fn logs_dir(root: &Path) -> PathBuf {
    at(root, LOGS)
}

/// `.ralph/logs/<id>/`: every log of one story.
pub(crate) fn story_logs(root: &Path, id: &str) -> PathBuf {
    logs_dir(root).join(id)
}

/// `.ralph/logs/<id>/attempt-<n>.log`: the raw output of one attempt.
pub(crate) fn attempt_log_path(root: &Path, id: &str, attempt: u32) -> PathBuf {
    story_logs(root, id).join(format!("attempt-{attempt}.log"))
}

/// `.ralph/logs/<id>/attempt-<n>-c<k>.log`: the raw output of racing
/// candidate `k` of attempt `n` (best of N, issue 36).
pub(crate) fn candidate_log_path(root: &Path, id: &str, attempt: u32, k: u32) -> PathBuf {
    story_logs(root, id).join(format!("attempt-{attempt}-c{k}.log"))
}

/// The log of attempt `n`, or of its racing `candidate`.
pub(crate) fn log_of(root: &Path, id: &str, attempt: u32, candidate: Option<u32>) -> PathBuf {
    match candidate {
        Some(k) => candidate_log_path(root, id, attempt, k),
        None => attempt_log_path(root, id, attempt),
    }
}

/// The attempt number an attempt log's file name carries (`attempt-<n>.log`).
pub(crate) fn attempt_log_number(file_name: &str) -> Option<u32> {
    file_name
        .strip_prefix("attempt-")?
        .strip_suffix(".log")?
        .parse()
        .ok()
}

/// `.ralph/logs/<id>/validation-<n>.log`: the output of the validation
/// commands run on attempt `n`'s merged tree.
pub(crate) fn validation_log_path(root: &Path, id: &str, attempt: u32) -> PathBuf {
    story_logs(root, id).join(format!("validation-{attempt}.log"))
}

/// `.ralph/logs/<id>/review-<n>.log`: the review gate's reviewer on the
/// landing of attempt `n`'s work (issue 26).
pub(crate) fn review_log(root: &Path, id: &str, attempt: u32) -> PathBuf {
    story_logs(root, id).join(format!("review-{attempt}.log"))
}

/// `.ralph/logs/<id>/judge-<n>.log`: the judge of attempt `n`'s racing
/// candidates (issue 36).
pub(crate) fn judge_log(root: &Path, id: &str, attempt: u32) -> PathBuf {
    story_logs(root, id).join(format!("judge-{attempt}.log"))
}

/// `.ralph/logs/<id>/postmortem-<n>.log`: the timeout postmortem of attempt `n`.
pub(crate) fn postmortem_log(root: &Path, id: &str, attempt: u32) -> PathBuf {
    story_logs(root, id).join(format!("postmortem-{attempt}.log"))
}

/// `.ralph/logs/plan/plan-<stamp>.log`: the agent run of one `ralph plan`
/// (`stamp`: its start, Unix seconds).
pub(crate) fn plan_log(root: &Path, stamp: i64) -> PathBuf {
    logs_dir(root)
        .join("plan")
        .join(format!("plan-{stamp}.log"))
}

/// `.ralph/logs/<id>/pull-request.md`: the body of a story's pull request.
pub(crate) fn pull_request_body(root: &Path, id: &str) -> PathBuf {
    story_logs(root, id).join("pull-request.md")
}

/// `.ralph/worktrees/`: where the slot worktrees (and the validation one) live.
pub(crate) fn worktrees_dir(root: &Path) -> PathBuf {
    at(root, WORKTREES)
}

/// The worktree of job slot `slot`: its name and its path.
pub(crate) fn slot_worktree(root: &Path, slot: usize) -> (String, PathBuf) {
    let name = format!("slot-{slot}");
    let path = worktrees_dir(root).join(&name);
    (name, path)
}

/// Name of the worktree the merge queue validates merged trees in.
pub(crate) const VALIDATE_WORKTREE: &str = "validate";

/// True when `path` is one of ralph's worktrees (under `.ralph/worktrees`).
pub(crate) fn is_ours(root: &Path, path: &Path) -> bool {
    let dir = worktrees_dir(root);
    path.starts_with(&dir) || dir.canonicalize().is_ok_and(|c| path.starts_with(c))
}

/// `.ralph/learnings/`.
pub(crate) fn learnings_dir(root: &Path) -> PathBuf {
    at(root, LEARNINGS)
}

/// `.ralph/run.sock`.
pub(crate) fn steer_socket(root: &Path) -> PathBuf {
    at(root, STEER_SOCKET)
}

/// `.ralph/runs/`.
pub(crate) fn runs_dir(root: &Path) -> PathBuf {
    at(root, RUNS)
}

/// `.ralph/runs/<run-id>.jsonl`: one run's records.
pub(crate) fn run_records(root: &Path, id: &str) -> PathBuf {
    runs_dir(root).join(format!("{id}.jsonl"))
}

/// `.ralph/report.html`.
pub(crate) fn report(root: &Path) -> PathBuf {
    at(root, REPORT)
}

/// `progress.txt`.
pub(crate) fn progress(root: &Path) -> PathBuf {
    at(root, PROGRESS)
}

/// `ralph.log`, where `-l` does not say otherwise.
pub(crate) fn tech_log(root: &Path) -> PathBuf {
    at(root, TECH_LOG)
}

/// What makes `dir` a project root: its `.ralph/`, else its `prd.json`.
pub(crate) fn project_marker(dir: &Path) -> Option<PathBuf> {
    let ralph = ralph_dir(dir);
    let prd = at(dir, PRD);
    if ralph.is_dir() {
        Some(ralph)
    } else {
        prd.is_file().then_some(prd)
    }
}

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

/// `/.ralph/worktrees/`: what every absolute path into a worktree holds.
fn worktrees_infix() -> String {
    format!("/{WORKTREES}/")
}

/// Absolute paths into one of ralph's worktrees, as agents write them in
/// their tool calls (`/home/u/p/.ralph/worktrees/slot-0/src/lib.rs`).
static WORKTREE_PATH_RE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    let infix = regex::escape(&worktrees_infix());
    regex::Regex::new(&format!(r#"[^\s"'=:(\[]*{infix}[^/\s"')\]]+(/)?"#)).expect("static pattern")
});

/// `text` with paths inside a slot worktree made relative to it: the agent
/// works there, so `src/lib.rs` says all and leaves room for the file name.
pub(crate) fn relative_to_worktree(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(&worktrees_infix()) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The table, as `ralph init` writes it into `.gitignore` and every
    /// run into `.git/info/exclude`: a change here is a change users see.
    #[test]
    fn the_runtime_patterns() {
        assert_eq!(
            RUNTIME_PATTERNS,
            [
                "/.ralph/state.json",
                "/.ralph/state.json.broken-*",
                "/.ralph/.lock",
                "/.ralph/landing.json",
                "/.ralph/logs/",
                "/.ralph/worktrees/",
                "/.ralph/learnings/",
                "/.ralph/runs/",
                "/.ralph/tracker/",
                "/.ralph/report.html",
                "/.ralph/run.sock",
                "/.ralph/.*.tmp-*",
                "/progress.txt",
                "/ralph.log",
            ]
        );
    }

    /// Every path under `.ralph/` is drawn in the module's tree, and every
    /// one is under `DIR`.
    #[test]
    fn the_doc_tree_draws_every_path() {
        let doc = include_str!("paths.rs");
        let tree: String = doc.lines().take_while(|l| l.starts_with("//!")).collect();
        for (name, rel) in ALL {
            let last = rel
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap()
                .replace(".*.tmp-*", ".<name>.tmp-<pid>")
                .replace(".broken-*", ".broken-<time>");
            assert!(tree.contains(&last), "{name} ({rel}) is not in the tree");
            if *name != "PROGRESS" && *name != "TECH_LOG" && *name != "PRD" {
                assert!(rel.starts_with(DIR), "{name}");
            }
        }
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
            ".ralph/state.json.broken-20261122-115121",
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
    fn paths_join_the_root() {
        let root = Path::new("/p");
        assert_eq!(state(root), Path::new("/p/.ralph/state.json"));
        assert_eq!(
            broken_state(root, "20261122-115121"),
            Path::new("/p/.ralph/state.json.broken-20261122-115121")
        );
        assert_eq!(
            attempt_log_path(root, "1.1", 2),
            Path::new("/p/.ralph/logs/1.1/attempt-2.log")
        );
        assert_eq!(attempt_log_number("attempt-12.log"), Some(12));
        assert_eq!(attempt_log_number("validation-1.log"), None);
        assert_eq!(
            slot_worktree(root, 3).1,
            Path::new("/p/.ralph/worktrees/slot-3")
        );
        assert_eq!(
            run_records(root, "20261122-115121"),
            Path::new("/p/.ralph/runs/20261122-115121.jsonl")
        );
    }
}
