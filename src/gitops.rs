//! The only module that uses git2. Everything crosses this boundary as plain
//! data (hex commit IDs, paths, strings), never as git2 handles. Each call opens
//! its own `Repository`, so calls may run on any blocking thread; callers
//! serialise the ones that move refs (the merge queue).

use std::path::{Path, PathBuf};

pub type Oid = String;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("{path}: not inside a git repository (run `git init` and commit first)")]
    NotARepo { path: PathBuf },
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Other(String),
}

pub type Result<T> = std::result::Result<T, GitError>;

/// Outcome of building a merge commit (no ref moves).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeOutcome {
    /// The merge commit exists (unreferenced); `base` is the target tip it was built on.
    Merged { commit: Oid, base: Oid },
    /// The story branch conflicts with the target tip; nothing was written.
    Conflict { paths: Vec<String> },
}

/// Outcome of moving the target branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LandOutcome {
    Landed,
    /// The target branch no longer points at the expected commit.
    TargetMoved { now: Oid },
    /// The main checkout has local changes to files the merge changes;
    /// nothing was written and the ref was not moved.
    CheckoutBlocked { paths: Vec<String> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeInfo {
    pub name: String,
    pub path: PathBuf,
    /// The admin dir exists but the working directory is gone or broken.
    pub prunable: bool,
    pub locked: bool,
}

/// Handle on the repository that contains the project root.
#[derive(Debug, Clone)]
pub struct Git {
    /// The main working directory (repository workdir).
    pub workdir: PathBuf,
    /// The common git dir (`.git`).
    pub git_dir: PathBuf,
}

impl Git {
    /// Opens the repository containing `project_root` (searching upwards).
    pub fn open(project_root: &Path) -> Result<Git> {
        let _ = project_root;
        todo!()
    }

    /// The branch checked out in the main working directory; `None` when
    /// HEAD is detached or unborn.
    pub fn head_branch(&self) -> Result<Option<String>> {
        todo!()
    }

    /// The commit a local branch points at, if the branch exists.
    pub fn branch_tip(&self, branch: &str) -> Result<Option<Oid>> {
        let _ = branch;
        todo!()
    }

    /// Creates `branch` at `at` unless it exists.
    pub fn ensure_branch(&self, branch: &str, at: &Oid) -> Result<()> {
        let _ = (branch, at);
        todo!()
    }

    /// Makes `path` a worktree named `name` with `branch` checked out at
    /// `base`: the branch is created or force-moved to `base`. An existing valid
    /// worktree of that name is reused: switched to `branch`, hard-reset to
    /// `base`, untracked-but-not-ignored files removed (ignored build output is
    /// kept warm). Stale admin dirs, stale `index.lock`/`HEAD.lock`/`locked`
    /// files of this worktree and a leftover directory are cleaned first.
    pub fn prepare_worktree(&self, name: &str, path: &Path, branch: &str, base: &Oid) -> Result<()> {
        let _ = (name, path, branch, base);
        todo!()
    }

    /// Checks out `commit` detached in the worktree at `path` (forced), removing
    /// untracked-but-not-ignored files: used to validate a merged tree.
    pub fn checkout_detached(&self, path: &Path, commit: &Oid) -> Result<()> {
        let _ = (path, commit);
        todo!()
    }

    /// Commits reachable from `branch` but not from `base`.
    pub fn commits_ahead(&self, branch: &str, base: &Oid) -> Result<usize> {
        let _ = (branch, base);
        todo!()
    }

    /// Points `refname` (a full ref such as `refs/ralph/attempts/1.2/1`) at
    /// the tip of `branch`, overwriting it.
    pub fn save_ref(&self, branch: &str, refname: &str) -> Result<()> {
        let _ = (branch, refname);
        todo!()
    }

    /// Builds the merge of `story_branch` into the current tip of `target`
    /// as a commit with parents `[target tip, story tip]` and message
    /// `message` (a single-parent commit when the story has no commits of its
    /// own). `edit` is applied to each repo-relative path in `edit_paths` that
    /// exists in the merged tree: `Some(new)` replaces the file's content.
    pub fn merge_story(
        &self,
        target: &str,
        story_branch: &str,
        message: &str,
        edit_paths: &[String],
        edit: &dyn Fn(&str, &str) -> Option<String>,
    ) -> Result<MergeOutcome> {
        let _ = (target, story_branch, message, edit_paths, edit);
        todo!()
    }

    /// Moves `target` from `expected` to `new` (compare-and-swap). When the
    /// main working directory has `target` checked out, its files and index are
    /// updated first with a safe checkout that never overwrites local changes.
    pub fn land(&self, target: &str, expected: &Oid, new: &Oid) -> Result<LandOutcome> {
        let _ = (target, expected, new);
        todo!()
    }

    /// Story IDs with a `merge: story <id>` commit in `target`'s first-parent
    /// history, with that commit, oldest first.
    pub fn landed_stories(&self, target: &str) -> Result<Vec<(String, Oid)>> {
        let _ = target;
        todo!()
    }

    /// Tracked files of the main working directory with uncommitted changes
    /// (staged or not), repo-relative, excluding paths for which `ignore`
    /// returns true.
    pub fn dirty_tracked_files(&self, ignore: &dyn Fn(&str) -> bool) -> Result<Vec<String>> {
        let _ = ignore;
        todo!()
    }

    /// Worktrees of this repository, including broken admin dirs git2 hides.
    pub fn list_worktrees(&self) -> Result<Vec<WorktreeInfo>> {
        todo!()
    }

    /// Removes a worktree: its directory, its admin dir and its lock files.
    pub fn remove_worktree(&self, name: &str, path: &Path) -> Result<()> {
        let _ = (name, path);
        todo!()
    }

    /// Deletes a local branch if it exists.
    pub fn delete_branch(&self, branch: &str) -> Result<()> {
        let _ = branch;
        todo!()
    }

    /// Local branch names starting with `prefix`.
    pub fn branches_with_prefix(&self, prefix: &str) -> Result<Vec<String>> {
        let _ = prefix;
        todo!()
    }

    /// True when every commit of `branch` is reachable from `target`.
    pub fn is_merged(&self, branch: &str, target: &str) -> Result<bool> {
        let _ = (branch, target);
        todo!()
    }

    /// Adds `patterns` to `.git/info/exclude` unless present (runtime files
    /// are ignored without touching the user's `.gitignore`).
    pub fn exclude(&self, patterns: &[&str]) -> Result<()> {
        let _ = patterns;
        todo!()
    }

    /// Path of the main index lock file.
    pub fn main_index_lock(&self) -> PathBuf {
        self.git_dir.join("index.lock")
    }

    /// Converts a path under the workdir to a repo-relative string with `/`.
    pub fn rel_path(&self, abs_or_rel_to_workdir: &Path) -> Option<String> {
        let p = abs_or_rel_to_workdir.strip_prefix(&self.workdir).unwrap_or(abs_or_rel_to_workdir);
        if p.is_absolute() {
            return None;
        }
        Some(p.to_string_lossy().replace('\\', "/"))
    }
}
