//! The only module that uses git2. Everything crosses this boundary as plain
//! data (hex commit IDs, paths, strings), never as git2 handles. Each call opens
//! its own `Repository`, so calls may run on any blocking thread; callers
//! serialise the ones that move refs (the merge queue).

use std::path::{Path, PathBuf};

mod diff;
mod fixup;
mod keep;
mod land;
mod landing;
mod lost;
pub(crate) mod relay;
mod reverted;
mod sandbox;
mod sign;
mod slot;
mod touched;
mod worktree;

pub(crate) use fixup::{FixupLabels, FixupStart};
#[cfg(test)]
use land::{update_checkout, Checkout};
pub(crate) use landing::{CheckoutWatch, UserGit};
pub(crate) use reverted::{RevertCheck, Reverted};
pub(crate) use sign::SignError;
use worktree::*;

pub(crate) type Oid = String;

#[derive(Debug, thiserror::Error)]
pub(crate) enum GitError {
    #[error("{path}: not inside a git repository (run `git init` and commit first)")]
    NotARepo { path: PathBuf },
    #[error(
        "{path}: the repository is bare (no working tree): ralph lands stories in a checkout; \
         clone it (`git clone {path} <dir>`) and run ralph there"
    )]
    Bare { path: PathBuf },
    /// Not a `source`: the message says it all (with one, `{:#}` printed
    /// it twice: "git: no error: no error").
    #[error("git: {0}")]
    Git(git2::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Other(String),
    /// `commit.gpgsign` is on and the signing program could not sign:
    /// the user's setup, not git or the story (`SignError::hint`).
    #[error("{0}")]
    Sign(SignError),
}

/// Every libgit2 error becomes one here (`?`), right after the call that
/// failed: one that lost its reason gets a message saying what it may be.
impl From<git2::Error> for GitError {
    fn from(e: git2::Error) -> GitError {
        GitError::Git(lost::with_reason(e))
    }
}

pub(crate) type Result<T> = std::result::Result<T, GitError>;

/// Outcome of building a merge commit (no ref moves).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MergeOutcome {
    /// The merge commit exists (unreferenced); `base` is the target tip it was built on.
    Merged { commit: Oid, base: Oid },
    /// The story branch conflicts with the target tip; nothing was written.
    Conflict { paths: Vec<String> },
}

/// Outcome of moving the target branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LandOutcome {
    Landed,
    /// The target gained the user's commits while the merge was validated,
    /// touching none of its paths: the merge was made again on them
    /// (`commit`, on `base`) and that landed.
    LandedOnTop {
        base: Oid,
        commit: Oid,
    },
    /// The target branch no longer points at the expected commit.
    TargetMoved {
        now: Oid,
    },
    /// The main checkout has local changes to files the merge changes;
    /// nothing was written and the ref was not moved.
    CheckoutBlocked {
        paths: Vec<String>,
    },
    /// Another process (the user's git) held `lock`, the main checkout's
    /// `index.lock`, for as long as a landing waits; nothing was written.
    /// Not the story's failure: land again later.
    Busy {
        lock: PathBuf,
        /// The live git process the landing waited for in vain, when that
        /// was what kept it (pid and command line).
        holder: Option<String>,
    },
}

/// What `adopt_worktree_head` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Adopted {
    Unchanged,
    FastForwarded { to: Oid },
    Saved { refname: String },
}

/// How a file of the main checkout differs from what is committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotCommitted {
    /// Not in git at all.
    Untracked,
    /// Not in git, and `.gitignore` (or an exclude file) ignores it.
    Ignored,
    /// Added to the index but never committed.
    Staged,
    /// Committed, with changes since (staged or not).
    Modified,
}

/// What `commit_left_work` did with a DONE attempt's uncommitted work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LeftWork {
    /// Nothing was left uncommitted.
    Nothing,
    /// Committed on the story branch: the new commit and the paths in it.
    Committed { commit: Oid, files: Vec<String> },
    /// The worktree's HEAD is not the story branch's tip; nothing committed.
    OffBranch,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WorktreeInfo {
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    /// The admin dir exists but the working directory is gone or broken.
    pub(crate) prunable: bool,
    pub(crate) locked: bool,
}

/// Handle on the repository that contains the project root.
#[derive(Debug, Clone)]
pub(crate) struct Git {
    /// The main working directory (repository workdir).
    pub(crate) workdir: PathBuf,
    /// The common git dir (`.git`).
    pub(crate) git_dir: PathBuf,
    /// What the run's landings changed and which are on the target's
    /// history, read once (`land::Memo`): each landing checks the index
    /// against every earlier one, which must not cost more as they add up.
    memo: std::sync::Arc<std::sync::Mutex<land::Memo>>,
}

/// Pairs of commits whose merge bases `Git` keeps (a few per landing).
const MERGE_BASES_KEPT: usize = 4096;

/// Files inside a worktree's admin dir that a killed process can leave
/// behind. They are ours to delete: nothing but ralph runs in its worktrees.
const WORKTREE_LOCK_FILES: [&str; 3] = ["index.lock", "HEAD.lock", "locked"];

impl Git {
    /// Opens the repository containing `project_root` (searching upwards).
    pub(crate) fn open(project_root: &Path) -> Result<Git> {
        let repo = match git2::Repository::discover(project_root) {
            Ok(repo) => repo,
            Err(e) => return Err(open_error(project_root, e)),
        };
        let Some(workdir) = repo.workdir() else {
            return Err(GitError::Bare {
                path: repo.path().to_path_buf(),
            });
        };
        let workdir = workdir.canonicalize()?;
        let git_dir = repo.commondir().canonicalize()?;
        Ok(Git {
            workdir,
            git_dir,
            memo: Default::default(),
        })
    }

    /// The branch checked out in the main working directory; `None` when
    /// HEAD is detached or unborn.
    pub(crate) fn head_branch(&self) -> Result<Option<String>> {
        let repo = self.repo()?;
        let head = repo.find_reference("HEAD")?;
        let Some(branch) = head.symbolic_target()?.and_then(branch_of_ref) else {
            return Ok(None);
        };
        // An unborn branch (fresh `git init`) is not a branch one can land on.
        Ok(tip(&repo, branch)?.map(|_| branch.to_string()))
    }

    /// The commit a local branch points at, if the branch exists.
    pub(crate) fn branch_tip(&self, branch: &str) -> Result<Option<Oid>> {
        let repo = self.repo()?;
        Ok(tip(&repo, branch)?.map(|o| o.to_string()))
    }

    /// Creates `branch` at `at` unless it exists.
    pub(crate) fn ensure_branch(&self, branch: &str, at: &Oid) -> Result<()> {
        let repo = self.repo()?;
        if tip(&repo, branch)?.is_some() {
            return Ok(());
        }
        let commit = repo.find_commit(parse_oid(at)?)?;
        let created = repo.branch(branch, &commit, false).map(|_| ());
        match created {
            Ok(()) => Ok(()),
            // Lost a race with another creator: the branch exists, as asked.
            Err(e) if e.code() == git2::ErrorCode::Exists => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Commits reachable from `branch` but not from `base`.
    pub(crate) fn commits_ahead(&self, branch: &str, base: &Oid) -> Result<usize> {
        let repo = self.repo()?;
        let Some(tip) = tip(&repo, branch)? else {
            return Ok(0);
        };
        let mut walk = repo.revwalk()?;
        walk.push(tip)?;
        walk.hide(parse_oid(base)?)?;
        let mut n = 0;
        for oid in walk {
            oid?;
            n += 1;
        }
        Ok(n)
    }

    /// Builds the merge of `story_branch` into the current tip of `target`
    /// as a commit with parents `[target tip, story tip]` and message
    /// `message` (a single-parent commit when the story has no commits of its
    /// own). `edit` is applied to each repo-relative path in `edit_paths` that
    /// exists in the merged tree: `Some(new)` replaces the file's content.
    pub(crate) fn merge_story(
        &self,
        target: &str,
        story_branch: &str,
        message: &str,
        edit_paths: &[String],
        edit: &dyn Fn(&str, &str) -> Option<String>,
    ) -> Result<MergeOutcome> {
        let repo = self.repo()?;
        let t_oid = tip(&repo, target)?.ok_or_else(|| missing_branch(target))?;
        self.merge_story_on(&repo, t_oid, story_branch, message, edit_paths, edit)
    }

    /// `merge_story` onto the commit `base` rather than a branch's tip: the
    /// merge queue's chain builds each story's merge on the one before it.
    pub(crate) fn merge_story_onto(
        &self,
        base: &Oid,
        story_branch: &str,
        message: &str,
        edit_paths: &[String],
        edit: &dyn Fn(&str, &str) -> Option<String>,
    ) -> Result<MergeOutcome> {
        let repo = self.repo()?;
        let t_oid = parse_oid(base)?;
        self.merge_story_on(&repo, t_oid, story_branch, message, edit_paths, edit)
    }

    fn merge_story_on(
        &self,
        repo: &git2::Repository,
        t_oid: git2::Oid,
        story_branch: &str,
        message: &str,
        edit_paths: &[String],
        edit: &dyn Fn(&str, &str) -> Option<String>,
    ) -> Result<MergeOutcome> {
        let s_oid = tip(repo, story_branch)?.ok_or_else(|| missing_branch(story_branch))?;
        let t = repo.find_commit(t_oid)?;
        let s = repo.find_commit(s_oid)?;

        let bases = self.merge_bases_of(repo, t_oid, s_oid)?;
        // The story's tip on the target's history: nothing of its own.
        let story_has_own = s_oid != t_oid && bases != [s_oid];
        let merged_tree = if story_has_own {
            let mut idx = match bases.as_slice() {
                // What `merge_commits` does with one base, without finding it again.
                [base] => {
                    let ancestor = repo.find_commit(*base)?.tree()?;
                    repo.merge_trees(&ancestor, &t.tree()?, &s.tree()?, None)?
                }
                // No base, or several (a criss-cross): libgit2's own recursion.
                _ => repo.merge_commits(&t, &s, None)?,
            };
            if idx.has_conflicts() {
                let mut paths = Vec::new();
                for c in idx.conflicts()? {
                    let c = c?;
                    for e in [c.ancestor, c.our, c.their].into_iter().flatten() {
                        paths.push(String::from_utf8_lossy(&e.path).into_owned());
                    }
                }
                paths.sort();
                paths.dedup();
                return Ok(MergeOutcome::Conflict { paths });
            }
            // The merge index is in-memory only: it must be written into the
            // object database explicitly.
            match index_tree_onto(repo, &idx, &t.tree()?) {
                Ok(tree) => tree,
                // libgit2 updates no path whose file becomes a directory or
                // the reverse: the whole index then.
                Err(_) => idx.write_tree_to(repo)?,
            }
        } else {
            t.tree_id()
        };
        let tree_id = apply_edits(repo, merged_tree, edit_paths, edit)?;
        let tree = repo.find_tree(tree_id)?;
        let sig = signature(repo)?;
        let parents: Vec<&git2::Commit<'_>> = if story_has_own {
            vec![&t, &s]
        } else {
            vec![&t]
        };
        let commit = sign::commit(repo, None, &sig, message, &tree, &parents)?;
        Ok(MergeOutcome::Merged {
            commit: commit.to_string(),
            base: t_oid.to_string(),
        })
    }

    /// Every merge base of `a` and `b`, kept for the run: two commits'
    /// bases never change, and each walk reads commit after commit as loose
    /// objects (a landing's merge and its gates ask about the same pair).
    pub(super) fn merge_bases_of(
        &self,
        repo: &git2::Repository,
        a: git2::Oid,
        b: git2::Oid,
    ) -> Result<Vec<git2::Oid>> {
        let key = if a <= b { (a, b) } else { (b, a) };
        if let Some(found) = self.memo().bases.get(&key) {
            return Ok(found.clone());
        }
        let found: Vec<git2::Oid> = match repo.merge_bases(a, b) {
            Ok(all) => all.iter().copied().collect(),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let mut memo = self.memo();
        if memo.bases.len() >= MERGE_BASES_KEPT {
            memo.bases.clear();
        }
        memo.bases.insert(key, found.clone());
        Ok(found)
    }

    /// The text of `path` (repository-relative) in `commit`; `None` when
    /// the commit has no such file.
    pub(crate) fn text_at(&self, commit: &Oid, path: &str) -> Result<Option<String>> {
        let repo = self.repo()?;
        let tree = repo.find_commit(parse_oid(commit)?)?.tree()?;
        let Ok(entry) = tree.get_path(Path::new(path)) else {
            return Ok(None);
        };
        if entry.kind() != Some(git2::ObjectType::Blob) {
            return Ok(None);
        }
        let blob = repo.find_blob(entry.id())?;
        Ok(Some(String::from_utf8_lossy(blob.content()).into_owned()))
    }

    /// The tree of `commit` (what a validation record names).
    pub(crate) fn tree_of(&self, commit: &Oid) -> Result<Oid> {
        let repo = self.repo()?;
        let tree = repo.find_commit(parse_oid(commit)?)?.tree_id();
        Ok(tree.to_string())
    }

    /// `commit` and its first parents, newest first, `n` commits at most: a
    /// chain of merges the queue landed at once, one per story.
    pub(crate) fn first_parents(&self, commit: &Oid, n: usize) -> Result<Vec<Oid>> {
        let repo = self.repo()?;
        let mut c = repo.find_commit(parse_oid(commit)?)?;
        let mut out = vec![c.id().to_string()];
        while out.len() < n {
            let Ok(p) = c.parent(0) else { break };
            out.push(p.id().to_string());
            c = p;
        }
        Ok(out)
    }

    /// With `commit.gpgsign` on, signs a small payload as a commit would be
    /// signed: an `Err(GitError::Sign)` says the setup cannot sign. `true`
    /// when commits are signed.
    pub(crate) fn check_signing(&self) -> Result<bool> {
        Ok(sign::check(&self.repo()?)?.is_some())
    }

    /// Story IDs with a `merge: story <id>` commit in `target`'s first-parent
    /// history, with that commit, oldest first. (Reconcile now reads every
    /// landing, `story_landings`, since a reset can set one aside.)
    #[cfg(test)]
    pub(crate) fn landed_stories(&self, target: &str) -> Result<Vec<(String, Oid)>> {
        let mut seen = std::collections::HashSet::new();
        Ok(self
            .story_landings(target)?
            .into_iter()
            .filter(|(id, _)| seen.insert(id.clone()))
            .collect())
    }

    /// Every `merge: story <id>` commit in `target`'s first-parent history
    /// (a story landed again after `ralph reset ID` has two), oldest first.
    pub(crate) fn story_landings(&self, target: &str) -> Result<Vec<(String, Oid)>> {
        let repo = self.repo()?;
        let Some(tip) = tip(&repo, target)? else {
            return Ok(Vec::new());
        };
        let mut walk = repo.revwalk()?;
        walk.simplify_first_parent()?;
        walk.push(tip)?;
        let mut newest_first = Vec::new();
        for oid in walk {
            let oid = oid?;
            let commit = repo.find_commit(oid)?;
            let summary = commit
                .summary_bytes()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            if let Some(id) = crate::project::landed_id(&summary) {
                newest_first.push((id.to_string(), oid.to_string()));
            }
        }
        newest_first.reverse();
        Ok(newest_first)
    }

    /// A commit on `target`'s tip that changes only `edit_paths`, each by
    /// `edit` (as `merge_story`'s edits): `ralph reset ID` putting a story's
    /// status back. Returns `(commit, base)`, or `None` when no file changes.
    /// No ref moves: `land` moves the target, updating the checkout safely.
    pub(crate) fn edit_commit(
        &self,
        target: &str,
        message: &str,
        edit_paths: &[String],
        edit: &dyn Fn(&str, &str) -> Option<String>,
    ) -> Result<Option<(Oid, Oid)>> {
        let repo = self.repo()?;
        let t_oid = tip(&repo, target)?.ok_or_else(|| missing_branch(target))?;
        let t = repo.find_commit(t_oid)?;
        let tree_id = apply_edits(&repo, t.tree_id(), edit_paths, edit)?;
        if tree_id == t.tree_id() {
            return Ok(None);
        }
        let tree = repo.find_tree(tree_id)?;
        let sig = signature(&repo)?;
        let commit = repo.commit(None, &sig, &sig, message, &tree, &[&t])?;
        Ok(Some((commit.to_string(), t_oid.to_string())))
    }

    /// Tracked files of the main working directory with uncommitted changes
    /// (staged or not), repo-relative, excluding paths for which `ignore`
    /// returns true.
    pub(crate) fn dirty_tracked_files(&self, ignore: &dyn Fn(&str) -> bool) -> Result<Vec<String>> {
        use git2::Status;
        let repo = self.repo()?;
        let mut opts = git2::StatusOptions::new();
        opts.include_untracked(false).include_ignored(false);
        let dirty = Status::INDEX_NEW
            | Status::INDEX_MODIFIED
            | Status::INDEX_DELETED
            | Status::INDEX_RENAMED
            | Status::INDEX_TYPECHANGE
            | Status::WT_MODIFIED
            | Status::WT_DELETED
            | Status::WT_RENAMED
            | Status::WT_TYPECHANGE
            | Status::CONFLICTED;
        let mut out = Vec::new();
        for entry in repo.statuses(Some(&mut opts))?.iter() {
            if !entry.status().intersects(dirty) {
                continue;
            }
            let path = String::from_utf8_lossy(entry.path_bytes()).into_owned();
            if !ignore(&path) {
                out.push(path);
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// The files among `paths` (repository-relative) whose content on disk
    /// is not what HEAD holds, with how; committed files are left out.
    pub(crate) fn not_committed(&self, paths: &[String]) -> Result<Vec<(String, NotCommitted)>> {
        use git2::Status;
        let repo = self.repo()?;
        let mut out = Vec::new();
        for p in paths {
            let st = repo.status_file(Path::new(p))?;
            let how = if st.contains(Status::IGNORED) {
                NotCommitted::Ignored
            } else if st.contains(Status::WT_NEW) {
                NotCommitted::Untracked
            } else if st.contains(Status::INDEX_NEW) {
                NotCommitted::Staged
            } else if st.is_empty() {
                continue;
            } else {
                NotCommitted::Modified
            };
            out.push((p.clone(), how));
        }
        Ok(out)
    }

    /// Deletes a local branch if it exists.
    pub(crate) fn delete_branch(&self, branch: &str) -> Result<()> {
        let repo = self.repo()?;
        let deleted = match repo.find_branch(branch, git2::BranchType::Local) {
            Ok(mut b) => b.delete(),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(()),
            Err(e) => Err(e),
        };
        Ok(deleted?)
    }

    /// Local branch names starting with `prefix`.
    pub(crate) fn branches_with_prefix(&self, prefix: &str) -> Result<Vec<String>> {
        let repo = self.repo()?;
        let mut out = Vec::new();
        for b in repo.branches(Some(git2::BranchType::Local))? {
            let (b, _) = b?;
            let name = String::from_utf8_lossy(b.name_bytes()?).into_owned();
            if name.starts_with(prefix) {
                out.push(name);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Full names of the refs under `prefix` (e.g. `refs/ralph/`), sorted.
    pub(crate) fn refs_with_prefix(&self, prefix: &str) -> Result<Vec<String>> {
        let repo = self.repo()?;
        let mut out = Vec::new();
        let mut refs = repo.references_glob(&format!("{prefix}*"))?;
        for name in refs.names() {
            out.push(name?.to_string());
        }
        out.sort();
        Ok(out)
    }

    /// True when the tip of `branch` is already kept by a ref under
    /// `ref_prefix` (e.g. `refs/ralph/`), so moving the branch loses nothing.
    pub(crate) fn tip_saved_under(&self, branch: &str, ref_prefix: &str) -> Result<bool> {
        let repo = self.repo()?;
        let Some(b) = tip(&repo, branch)? else {
            return Ok(true);
        };
        for r in repo.references_glob(&format!("{ref_prefix}*"))? {
            let r = r?;
            if r.target() == Some(b) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// True when `branch`'s tip has the tree of `base`: landing it would
    /// bring nothing (no commits, or commits that undo each other).
    pub(crate) fn same_tree(&self, branch: &str, base: &Oid) -> Result<bool> {
        let repo = self.repo()?;
        let Some(b) = tip(&repo, branch)? else {
            return Ok(true);
        };
        let base_tree = repo.find_commit(parse_oid(base)?)?.tree_id();
        let tip_tree = repo.find_commit(b)?.tree_id();
        Ok(tip_tree == base_tree)
    }

    /// What `branch` changes against where it left `target` (their merge
    /// base): files, lines added, lines removed. `None` without the branch.
    pub(crate) fn diffstat(
        &self,
        branch: &str,
        target: &str,
    ) -> Result<Option<(usize, usize, usize)>> {
        let repo = self.repo()?;
        let (Some(b), Some(t)) = (tip(&repo, branch)?, tip(&repo, target)?) else {
            return Ok(None);
        };
        let base = repo.merge_base(b, t)?;
        let old = repo.find_commit(base)?.tree()?;
        let new = repo.find_commit(b)?.tree()?;
        let stats = repo
            .diff_tree_to_tree(Some(&old), Some(&new), None)?
            .stats()?;
        Ok(Some((
            stats.files_changed(),
            stats.insertions(),
            stats.deletions(),
        )))
    }

    /// True when every commit of `branch` is reachable from `target`.
    pub(crate) fn is_merged(&self, branch: &str, target: &str) -> Result<bool> {
        let repo = self.repo()?;
        let Some(b) = tip(&repo, branch)? else {
            return Ok(true);
        };
        let Some(t) = tip(&repo, target)? else {
            return Ok(false);
        };
        Ok(b == t || repo.graph_descendant_of(t, b)?)
    }

    /// True when `commit` is `branch`'s tip or one of its ancestors.
    pub(crate) fn branch_contains(&self, branch: &str, commit: &Oid) -> Result<bool> {
        let repo = self.repo()?;
        let Some(b) = tip(&repo, branch)? else {
            return Ok(false);
        };
        let c = parse_oid(commit)?;
        Ok(b == c || repo.graph_descendant_of(b, c)?)
    }

    /// True when the tip of local `branch` is reachable from the ref
    /// `refname` (a remote-tracking branch such as `refs/remotes/origin/main`).
    pub(crate) fn ref_contains_branch(&self, refname: &str, branch: &str) -> Result<bool> {
        let repo = self.repo()?;
        let Some(b) = tip(&repo, branch)? else {
            return Ok(false);
        };
        let Ok(r) = repo.find_reference(refname) else {
            return Ok(false);
        };
        let Some(t) = r.target() else {
            return Ok(false);
        };
        Ok(t == b || repo.graph_descendant_of(t, b)?)
    }

    /// Adds `patterns` to `.git/info/exclude` unless present (runtime files
    /// are ignored without touching the user's `.gitignore`).
    pub(crate) fn exclude(&self, patterns: &[&str]) -> Result<()> {
        let info = self.git_dir.join("info");
        std::fs::create_dir_all(&info)?;
        let file = info.join("exclude");
        let existing = match std::fs::read_to_string(&file) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e.into()),
        };
        let present: std::collections::HashSet<&str> = existing.lines().map(str::trim).collect();
        let mut added = String::new();
        let mut seen = std::collections::HashSet::new();
        for p in patterns {
            let p = p.trim();
            if !p.is_empty() && !present.contains(p) && seen.insert(p) {
                added.push_str(p);
                added.push('\n');
            }
        }
        if added.is_empty() {
            return Ok(());
        }
        let mut content = existing;
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&added);
        std::fs::write(&file, content)?;
        Ok(())
    }

    /// Converts a path under the workdir to a repo-relative string with `/`.
    pub(crate) fn rel_path(&self, abs_or_rel_to_workdir: &Path) -> Option<String> {
        let p = abs_or_rel_to_workdir
            .strip_prefix(&self.workdir)
            .unwrap_or(abs_or_rel_to_workdir);
        if p.is_absolute() {
            return None;
        }
        Some(p.to_string_lossy().replace('\\', "/"))
    }

    fn repo(&self) -> Result<git2::Repository> {
        git2::Repository::open(&self.workdir).map_err(|e| open_error(&self.workdir, e))
    }
}

pub(super) fn open_error(path: &Path, e: git2::Error) -> GitError {
    if e.code() == git2::ErrorCode::NotFound {
        return GitError::NotARepo {
            path: path.to_path_buf(),
        };
    }
    if e.code() == git2::ErrorCode::Owner {
        return GitError::Other(format!(
            "{}: the repository is owned by another user; if you trust it, run \
             `git config --global --add safe.directory <repo path>`",
            path.display()
        ));
    }
    if e.message().contains("unsupported extension") {
        return GitError::Other(format!(
            "{}: the repository uses a git extension ralph cannot open \
             (partial clones and reftable are unsupported): {}",
            path.display(),
            e.message()
        ));
    }
    GitError::from(e)
}

pub(super) fn parse_oid(s: &str) -> Result<git2::Oid> {
    git2::Oid::from_str(s.trim()).map_err(|_| GitError::Other(format!("not a commit ID: {s:?}")))
}

pub(super) fn branch_ref(branch: &str) -> Result<String> {
    let refname = format!("refs/heads/{branch}");
    if branch.is_empty() || !git2::Reference::is_valid_name(&refname) {
        return Err(GitError::Other(format!("invalid branch name {branch:?}")));
    }
    Ok(refname)
}

pub(super) fn branch_of_ref(refname: &str) -> Option<&str> {
    refname.strip_prefix("refs/heads/")
}

pub(super) fn missing_branch(branch: &str) -> GitError {
    GitError::Other(format!("branch {branch:?} does not exist"))
}

pub(super) fn checked_out_error(branch: &str, holder: &Option<String>) -> GitError {
    let place = match holder {
        None => "the main checkout".to_string(),
        Some(name) => format!("worktree {name:?}"),
    };
    GitError::Other(format!("branch {branch:?} is checked out in {place}"))
}

/// The commit a local branch points at; `None` when the branch is missing.
pub(super) fn tip(repo: &git2::Repository, branch: &str) -> Result<Option<git2::Oid>> {
    let refname = branch_ref(branch)?;
    match repo.find_reference(&refname) {
        Ok(r) => Ok(Some(r.peel_to_commit()?.id())),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Author and committer of ralph's merge commits: the repo's identity when
/// configured, so landings look like the user's, else a recognisable default.
pub(super) fn signature(repo: &git2::Repository) -> Result<git2::Signature<'static>> {
    let cfg = repo.config()?;
    let get = |key: &str| cfg.get_string(key).ok().filter(|v| !v.trim().is_empty());
    let name = get("user.name").unwrap_or_else(|| "ralph".to_string());
    let email = get("user.email").unwrap_or_else(|| "ralph@localhost".to_string());
    match git2::Signature::now(&name, &email) {
        Ok(sig) => Ok(sig),
        // A name or email libgit2 rejects (e.g. with angle brackets) must not
        // stop a landing.
        Err(_) => Ok(git2::Signature::now("ralph", "ralph@localhost")?),
    }
}

/// Applies `edit` to the blobs at `paths` in `tree_id`, returning the new tree.
/// The tree of a merge's index (no conflicts), written as `onto` with the
/// paths where the index differs from it: only the trees on those paths
/// are written, and only their new entries looked up. Writing the whole
/// index wrote every tree of the repository again and looked up each of
/// its entries, one loose object at a time.
fn index_tree_onto(
    repo: &git2::Repository,
    idx: &git2::Index,
    onto: &git2::Tree<'_>,
) -> Result<git2::Oid> {
    let diff = repo.diff_tree_to_index(Some(onto), Some(idx), None)?;
    // A path's type change comes as a deletion and an addition: one
    // update a path, the addition winning.
    let mut updates: std::collections::BTreeMap<PathBuf, Option<(git2::Oid, git2::FileMode)>> =
        std::collections::BTreeMap::new();
    for d in diff.deltas() {
        if d.status() == git2::Delta::Deleted {
            if let Some(p) = d.old_file().path() {
                updates.entry(p.to_path_buf()).or_insert(None);
            }
        } else if let Some(p) = d.new_file().path() {
            let f = d.new_file();
            updates.insert(p.to_path_buf(), Some((f.id(), f.mode())));
        }
    }
    let mut b = git2::build::TreeUpdateBuilder::new();
    for (path, update) in &updates {
        match update {
            Some((id, mode)) => b.upsert(path, *id, *mode),
            None => b.remove(path),
        };
    }
    Ok(b.create_updated(repo, onto)?)
}

pub(super) fn apply_edits(
    repo: &git2::Repository,
    tree_id: git2::Oid,
    paths: &[String],
    edit: &dyn Fn(&str, &str) -> Option<String>,
) -> Result<git2::Oid> {
    let tree = repo.find_tree(tree_id)?;
    let mut update = git2::build::TreeUpdateBuilder::new();
    let mut changed = false;
    let mut seen = std::collections::HashSet::new();
    for path in paths {
        let rel = path.trim_start_matches("./");
        // NUL would panic inside git2's path conversion; a repeated path
        // would be a duplicate tree update, which libgit2 rejects.
        if rel.is_empty() || rel.contains('\0') || !seen.insert(rel) {
            continue;
        }
        let Ok(entry) = tree.get_path(Path::new(rel)) else {
            continue;
        };
        if entry.kind() != Some(git2::ObjectType::Blob) {
            continue;
        }
        let mode = match entry.filemode() {
            0o100755 => git2::FileMode::BlobExecutable,
            0o120000 => continue,
            _ => git2::FileMode::Blob,
        };
        let blob = repo.find_blob(entry.id())?;
        let old = String::from_utf8_lossy(blob.content()).into_owned();
        if let Some(new) = edit(rel, &old) {
            if new != old {
                let id = repo.blob(new.as_bytes())?;
                update.upsert(rel, id, mode);
                changed = true;
            }
        }
    }
    if !changed {
        return Ok(tree_id);
    }
    Ok(update.create_updated(repo, &tree)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Runs the git CLI in `dir`, isolated from the host's configuration
    /// (the submodules' tests use it too).
    pub(super) fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn write(dir: &Path, rel: &str, content: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    fn read(dir: &Path, rel: &str) -> String {
        std::fs::read_to_string(dir.join(rel)).unwrap()
    }

    fn commit_all(dir: &Path, msg: &str) -> String {
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", msg]);
        git(dir, &["rev-parse", "HEAD"]).trim().to_string()
    }

    const SPEC: &str = "specs/epic-1/story-1.1-x.md";

    /// A repo on `main` with a spec, a couple of files and `target/` ignored.
    fn assert_on_branch(g: &Git, worktree: &Path, branch: &str) {
        assert_eq!(
            g.resolve_branch_at_head(worktree).unwrap().as_deref(),
            Some(branch),
            "{}",
            worktree.display()
        );
    }

    fn fixture() -> (tempfile::TempDir, Git) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        git(dir, &["config", "user.name", "Test"]);
        git(dir, &["config", "user.email", "test@example.com"]);
        // git2 reads the user's global config: a signing setup there must
        // not sign (or fail) these commits.
        git(dir, &["config", "commit.gpgsign", "false"]);
        write(dir, ".gitignore", "target/\n");
        write(dir, "a.txt", "one\ntwo\nthree\n");
        write(dir, "README", "readme\n");
        write(dir, SPEC, "---\nid: 1.1\nstatus: pending\n---\nDo x.\n");
        commit_all(dir, "init");
        let g = Git::open(dir).unwrap();
        (tmp, g)
    }

    fn tip_of(g: &Git, b: &str) -> String {
        g.branch_tip(b).unwrap().unwrap()
    }

    fn mark_done(_: &str, old: &str) -> Option<String> {
        Some(old.replace("status: pending", "status: done"))
    }

    /// Story 1.1 merged into main, its spec marked done (`mark_done`).
    fn merge_1_1(g: &Git) -> MergeOutcome {
        g.merge_story(
            "main",
            "ralph/1.1",
            "merge: story 1.1",
            &[SPEC.to_string()],
            &mark_done,
        )
        .unwrap()
    }

    fn porcelain(dir: &Path) -> String {
        git(dir, &["status", "--porcelain"])
    }

    fn wt_path(g: &Git, name: &str) -> PathBuf {
        g.workdir.join(".ralph/worktrees").join(name)
    }

    /// slot-0 prepared for `branch` at main's tip: (that tip, the worktree).
    fn slot0_at_main(g: &Git, branch: &str) -> (String, PathBuf) {
        let base = tip_of(g, "main");
        let wt = wt_path(g, "slot-0");
        g.prepare_worktree("slot-0", &wt, branch, &base).unwrap();
        (base, wt)
    }

    /// A story's work kept at `refs/ralph/conflicts/1.1/1` (line two of
    /// a.txt and a file of its own), and story 1.2 landed on main meanwhile
    /// (line two too when `same_line`); slot-0 prepared at main's tip.
    fn fixup_fixture(same_line: bool) -> (tempfile::TempDir, Git, PathBuf, String, String) {
        let (tmp, g) = fixture();
        let dir = tmp.path().to_path_buf();
        git(&dir, &["checkout", "-q", "-b", "ralph/story-1.1"]);
        write(&dir, "a.txt", "one\nTWO from the story\nthree\n");
        write(&dir, "story.txt", "mine\n");
        let work = commit_all(&dir, "feat(story-1.1): x");
        git(&dir, &["update-ref", "refs/ralph/conflicts/1.1/1", &work]);
        git(&dir, &["checkout", "-q", "main"]);
        if same_line {
            write(&dir, "a.txt", "one\ntwo from 1.2\nthree\n");
        } else {
            write(&dir, "b.txt", "from 1.2\n");
        }
        git(&dir, &["add", "-A"]);
        git(
            &dir,
            &[
                "commit",
                "-q",
                "-m",
                "merge: story 1.2",
                "-m",
                "Other thing",
            ],
        );
        let tip = tip_of(&g, "main");
        let path = wt_path(&g, "slot-0");
        g.prepare_worktree("slot-0", &path, "ralph/story-1.1", &tip)
            .unwrap();
        (tmp, g, path, tip, work)
    }

    const LABELS: FixupLabels<'static> = FixupLabels {
        ours: "main",
        theirs: "story 1.1",
        message: "fix-up(story-1.1): merge main\n",
    };

    #[test]
    fn a_fixup_leaves_the_conflict_for_plain_git_to_conclude() {
        let (tmp, g, path, tip, work) = fixup_fixture(true);
        let main_before = read(tmp.path(), "a.txt");
        let start = g
            .start_fixup(&path, "refs/ralph/conflicts/1.1/1", &LABELS, true)
            .unwrap();
        assert_eq!(
            start,
            FixupStart::Merging {
                conflicts: vec!["a.txt".into()]
            }
        );
        let text = read(&path, "a.txt");
        for marker in ["<<<<<<< main", "||||||| base", ">>>>>>> story 1.1"] {
            assert!(text.contains(marker), "{text}");
        }
        assert_eq!(
            read(&path, "story.txt"),
            "mine\n",
            "the clean part is merged"
        );
        assert_eq!(
            g.landed_since("refs/ralph/conflicts/1.1/1", "main")
                .unwrap(),
            vec![("1.2".to_string(), "Other thing".to_string())]
        );
        // The agent resolves and concludes the merge with plain git.
        write(
            &path,
            "a.txt",
            "one\ntwo from 1.2\nTWO from the story\nthree\n",
        );
        git(&path, &["add", "a.txt"]);
        git(&path, &["commit", "-q", "--no-edit"]);
        let parents = git(&path, &["log", "-1", "--format=%P"]);
        assert_eq!(
            parents.split_whitespace().collect::<Vec<_>>(),
            vec![tip.as_str(), work.as_str()]
        );
        assert_eq!(
            git(&path, &["log", "-1", "--format=%s"]).trim(),
            "fix-up(story-1.1): merge main"
        );
        assert!(g
            .conflict_markers("ralph/story-1.1", &["a.txt".into()])
            .unwrap()
            .is_empty());
        // The main checkout saw none of it.
        assert_eq!(tip_of(&g, "main"), tip);
        assert_eq!(read(tmp.path(), "a.txt"), main_before);
        assert_eq!(g.head_branch().unwrap().as_deref(), Some("main"));
    }

    #[test]
    fn a_clean_fixup_is_committed_and_left_markers_are_found() {
        let (_tmp, g, path, tip, work) = fixup_fixture(false);
        let start = g
            .start_fixup(&path, "refs/ralph/conflicts/1.1/1", &LABELS, true)
            .unwrap();
        let FixupStart::Committed { commit } = start else {
            panic!("{start:?}");
        };
        assert_eq!(tip_of(&g, "ralph/story-1.1"), commit);
        let parents = git(&path, &["log", "-1", "--format=%P"]);
        assert_eq!(
            parents.split_whitespace().collect::<Vec<_>>(),
            vec![tip.as_str(), work.as_str()]
        );
        assert_eq!(porcelain(&path), "");
        assert_eq!(read(&path, "b.txt"), "from 1.2\n");
        // Work already on the target is nothing to fix up.
        assert!(g.start_fixup(&path, &tip, &LABELS, true).is_err());
        // A file committed with markers is caught; a lone ======= is not one.
        write(&path, "c.md", "Title\n=======\n");
        write(
            &path,
            "a.txt",
            "x\n<<<<<<< main\ny\n=======\nz\n>>>>>>> story\n",
        );
        git(&path, &["add", "-A"]);
        git(&path, &["commit", "-q", "-m", "oops"]);
        assert_eq!(
            g.conflict_markers(
                "ralph/story-1.1",
                &["a.txt".into(), "c.md".into(), "gone.txt".into()]
            )
            .unwrap(),
            vec!["a.txt".to_string()]
        );
    }

    #[test]
    fn open_reports_not_a_repo_and_bare() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(matches!(
            Git::open(tmp.path()),
            Err(GitError::NotARepo { .. })
        ));
        git(tmp.path(), &["init", "-q", "--bare", "b.git"]);
        assert!(matches!(
            Git::open(&tmp.path().join("b.git")),
            Err(GitError::Bare { .. })
        ));
    }

    #[test]
    fn open_explains_unsupported_extensions() {
        let (tmp, _g) = fixture();
        git(tmp.path(), &["config", "core.repositoryformatversion", "1"]);
        git(tmp.path(), &["config", "extensions.partialclone", "origin"]);
        match Git::open(tmp.path()) {
            Err(GitError::Other(msg)) => assert!(msg.contains("partial clones"), "{msg}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn open_from_subdir_and_head_branch() {
        let (tmp, g) = fixture();
        let sub = Git::open(&tmp.path().join("specs/epic-1")).unwrap();
        assert_eq!(sub.workdir, g.workdir);
        assert_eq!(g.git_dir, g.workdir.join(".git"));
        assert_eq!(g.head_branch().unwrap().as_deref(), Some("main"));
        let head = tip_of(&g, "main");
        git(tmp.path(), &["checkout", "-q", "--detach", &head]);
        assert_eq!(g.head_branch().unwrap(), None);
        let empty = tempfile::tempdir().unwrap();
        git(empty.path(), &["init", "-q", "-b", "trunk"]);
        assert_eq!(
            Git::open(empty.path()).unwrap().head_branch().unwrap(),
            None
        );
    }

    #[test]
    fn branch_helpers() {
        let (tmp, g) = fixture();
        let base = tip_of(&g, "main");
        assert_eq!(g.branch_tip("nope").unwrap(), None);
        g.ensure_branch("ralph/1.1", &base).unwrap();
        g.ensure_branch("ralph/1.2", &base).unwrap();
        git(tmp.path(), &["checkout", "-q", "ralph/1.1"]);
        write(tmp.path(), "b.txt", "b\n");
        let c = commit_all(tmp.path(), "b");
        git(tmp.path(), &["checkout", "-q", "main"]);
        // An existing branch is left where it is.
        g.ensure_branch("ralph/1.1", &base).unwrap();
        assert_eq!(tip_of(&g, "ralph/1.1"), c);
        assert_eq!(g.commits_ahead("ralph/1.1", &base).unwrap(), 1);
        assert_eq!(g.commits_ahead("ralph/1.2", &base).unwrap(), 0);
        assert_eq!(g.commits_ahead("missing", &base).unwrap(), 0);
        assert!(!g.is_merged("ralph/1.1", "main").unwrap());
        assert!(g.is_merged("ralph/1.2", "main").unwrap());
        assert!(g.is_merged("missing", "main").unwrap());
        assert_eq!(
            g.branches_with_prefix("ralph/").unwrap(),
            vec!["ralph/1.1", "ralph/1.2"]
        );

        g.save_ref("ralph/1.1", "refs/ralph/attempts/1.1/1")
            .unwrap();
        assert_eq!(
            git(tmp.path(), &["rev-parse", "refs/ralph/attempts/1.1/1"]).trim(),
            c
        );
        g.save_ref("ralph/1.2", "refs/ralph/attempts/1.1/1")
            .unwrap();
        assert_eq!(
            git(tmp.path(), &["rev-parse", "refs/ralph/attempts/1.1/1"]).trim(),
            base
        );
        g.save_ref("missing", "refs/ralph/attempts/9/1").unwrap();
        assert!(git(tmp.path(), &["for-each-ref", "refs/ralph/attempts/9"]).is_empty());

        g.delete_branch("ralph/1.1").unwrap();
        g.delete_branch("ralph/1.1").unwrap();
        assert_eq!(g.branch_tip("ralph/1.1").unwrap(), None);
        assert!(g.ensure_branch("bad..name", &base).is_err());
        assert!(g.ensure_branch("x", &"zz".to_string()).is_err());
    }

    #[test]
    fn worktree_create_and_reuse_keeps_ignored_output() {
        let (tmp, g) = fixture();
        let (base, wt) = slot0_at_main(&g, "ralph/1.1");
        assert_eq!(read(&wt, "a.txt"), "one\ntwo\nthree\n");
        assert_on_branch(&g, &wt, "ralph/1.1");
        assert_eq!(
            g.head_commit_of_worktree(&wt).unwrap().as_deref(),
            Some(base.as_str())
        );
        assert_eq!(porcelain(&wt), "");

        // Dirty the worktree every way an attempt can.
        write(&wt, "target/x", "build output");
        write(&wt, "untracked.txt", "u");
        write(&wt, "a.txt", "edited\n");
        write(&wt, "new.txt", "n\n");
        git(&wt, &["add", "new.txt"]);
        write(&wt, "committed.txt", "c\n");
        git(&wt, &["add", "committed.txt"]);
        git(&wt, &["commit", "-q", "-m", "work"]);
        write(&wt, "new.txt", "n\n");
        git(&wt, &["add", "new.txt"]);

        g.prepare_worktree("slot-0", &wt, "ralph/1.2", &base)
            .unwrap();
        assert_eq!(read(&wt, "target/x"), "build output");
        assert!(!wt.join("untracked.txt").exists());
        assert!(!wt.join("new.txt").exists());
        assert!(!wt.join("committed.txt").exists());
        assert_eq!(read(&wt, "a.txt"), "one\ntwo\nthree\n");
        assert_on_branch(&g, &wt, "ralph/1.2");
        assert_eq!(porcelain(&wt), "");
        // The previous attempt's branch keeps its commit.
        assert_eq!(g.commits_ahead("ralph/1.1", &base).unwrap(), 1);

        // Reusing with the branch it already has checked out, at a newer base.
        write(tmp.path(), "c.txt", "c\n");
        let base2 = commit_all(tmp.path(), "c");
        g.prepare_worktree("slot-0", &wt, "ralph/1.2", &base2)
            .unwrap();
        assert_eq!(read(&wt, "c.txt"), "c\n");
        assert_eq!(tip_of(&g, "ralph/1.2"), base2);
        assert_eq!(porcelain(&wt), "");
        assert_eq!(g.list_worktrees().unwrap().len(), 1);
    }

    #[test]
    fn worktree_recreated_after_rm_rf() {
        let (_tmp, g) = fixture();
        let (base, wt) = slot0_at_main(&g, "ralph/1.1");
        std::fs::remove_dir_all(&wt).unwrap();
        let listed = g.list_worktrees().unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].prunable);
        g.prepare_worktree("slot-0", &wt, "ralph/1.1", &base)
            .unwrap();
        assert_eq!(read(&wt, "README"), "readme\n");
        let listed = g.list_worktrees().unwrap();
        assert_eq!(listed.len(), 1);
        assert!(!listed[0].prunable);
        assert_eq!(listed[0].path, wt);
    }

    #[test]
    fn branch_of_a_vanished_worktree_can_move_to_another_slot() {
        let (_tmp, g) = fixture();
        let base = tip_of(&g, "main");
        let w0 = wt_path(&g, "slot-0");
        let w1 = wt_path(&g, "slot-1");
        g.prepare_worktree("slot-0", &w0, "ralph/1.1", &base)
            .unwrap();
        std::fs::remove_dir_all(&w0).unwrap();
        g.prepare_worktree("slot-1", &w1, "ralph/1.1", &base)
            .unwrap();
        assert_on_branch(&g, &w1, "ralph/1.1");
    }

    #[test]
    fn worktree_leftover_dir_without_admin_is_replaced() {
        let (_tmp, g) = fixture();
        let base = tip_of(&g, "main");
        let wt = wt_path(&g, "slot-1");
        write(&wt, "junk", "j");
        g.prepare_worktree("slot-1", &wt, "ralph/1.1", &base)
            .unwrap();
        assert!(!wt.join("junk").exists());
        assert_on_branch(&g, &wt, "ralph/1.1");
    }

    #[test]
    fn worktree_stale_locks_are_cleared() {
        let (_tmp, g) = fixture();
        let (base, wt) = slot0_at_main(&g, "ralph/1.1");
        let admin = g.git_dir.join("worktrees/slot-0");
        for f in ["index.lock", "HEAD.lock"] {
            std::fs::write(admin.join(f), "").unwrap();
        }
        std::fs::write(admin.join("locked"), "killed\n").unwrap();
        assert!(g.list_worktrees().unwrap()[0].locked);
        write(&wt, "a.txt", "dirty\n");
        g.prepare_worktree("slot-0", &wt, "ralph/1.2", &base)
            .unwrap();
        for f in ["index.lock", "HEAD.lock", "locked"] {
            assert!(!admin.join(f).exists(), "{f} left behind");
        }
        assert_eq!(read(&wt, "a.txt"), "one\ntwo\nthree\n");
        assert_on_branch(&g, &wt, "ralph/1.2");
        assert!(!g.list_worktrees().unwrap()[0].locked);
    }

    #[test]
    fn worktree_refuses_branch_checked_out_elsewhere() {
        let (_tmp, g) = fixture();
        let base = tip_of(&g, "main");
        let w0 = wt_path(&g, "slot-0");
        let w1 = wt_path(&g, "slot-1");
        g.prepare_worktree("slot-0", &w0, "ralph/1.1", &base)
            .unwrap();
        g.prepare_worktree("slot-1", &w1, "ralph/1.2", &base)
            .unwrap();
        assert!(g
            .prepare_worktree("slot-1", &w1, "ralph/1.1", &base)
            .is_err());
        assert!(g
            .prepare_worktree("slot-2", &wt_path(&g, "slot-2"), "main", &base)
            .is_err());
        assert!(g
            .prepare_worktree("a/b", &wt_path(&g, "x"), "ralph/9", &base)
            .is_err());
        assert!(g
            .prepare_worktree("slot-3", &g.workdir.clone(), "ralph/9", &base)
            .is_err());
        // Nothing was disturbed by the refusals.
        assert_on_branch(&g, &w1, "ralph/1.2");
        assert!(!wt_path(&g, "slot-2").exists());
    }

    #[test]
    fn checkout_detached_in_worktree() {
        let (tmp, g) = fixture();
        let base = tip_of(&g, "main");
        write(tmp.path(), "c.txt", "c\n");
        let next = commit_all(tmp.path(), "c");
        let wt = wt_path(&g, "slot-0");
        g.prepare_worktree("slot-0", &wt, "ralph/1.1", &base)
            .unwrap();
        write(&wt, "target/keep", "k");
        write(&wt, "stray", "s");
        g.checkout_detached(&wt, &next).unwrap();
        assert_eq!(g.resolve_branch_at_head(&wt).unwrap(), None);
        assert_eq!(
            g.head_commit_of_worktree(&wt).unwrap().as_deref(),
            Some(next.as_str())
        );
        assert_eq!(read(&wt, "c.txt"), "c\n");
        assert!(wt.join("target/keep").exists());
        assert!(!wt.join("stray").exists());
        assert_eq!(porcelain(&wt), "");
        assert_eq!(tip_of(&g, "ralph/1.1"), base);
        // The main checkout is never a target for a forced checkout.
        assert!(g.checkout_detached(&g.workdir.clone(), &base).is_err());
    }

    /// `main` gets `c.txt`; `ralph/1.1` (from the old tip) adds `b.txt`.
    fn diverged() -> (tempfile::TempDir, Git, String, String) {
        let (tmp, g) = fixture();
        let base = tip_of(&g, "main");
        let dir = tmp.path();
        git(dir, &["checkout", "-q", "-b", "ralph/1.1"]);
        write(dir, "b.txt", "b\n");
        commit_all(dir, "story work");
        git(dir, &["checkout", "-q", "main"]);
        write(dir, "c.txt", "c\n");
        let main_tip = commit_all(dir, "other");
        (tmp, g, base, main_tip)
    }

    #[test]
    fn a_merges_tree_written_onto_the_target_is_the_whole_index_written() {
        let (tmp, g) = fixture();
        let dir = tmp.path();
        write(dir, "dir/x.txt", "x\n");
        write(dir, "f", "a file\n");
        write(dir, "deep/er/y.txt", "y\n");
        let base = commit_all(dir, "base");
        git(dir, &["checkout", "-q", "-b", "ralph/1.1"]);
        // The story: a deletion, a file that becomes a directory, a mode
        // change, an edit deep down, a new file, a file both sides edit.
        std::fs::remove_file(dir.join("dir/x.txt")).unwrap();
        std::fs::remove_file(dir.join("f")).unwrap();
        write(dir, "f/g.txt", "now a directory\n");
        git(dir, &["update-index", "--chmod=+x", "a.txt"]);
        write(dir, "deep/er/y.txt", "y2\n");
        write(dir, "s.txt", "story\n");
        write(dir, "a.txt", "one\ntwo\nthree\nfour\n");
        commit_all(dir, "story");
        git(dir, &["checkout", "-q", "main"]);
        write(dir, "t.txt", "target\n");
        write(dir, "a.txt", "zero\none\ntwo\nthree\n");
        commit_all(dir, "target");
        let MergeOutcome::Merged { commit, .. } = merge_1_1(&g) else {
            panic!("merges")
        };
        let repo = git2::Repository::open(dir).unwrap();
        let (t, s) = (
            repo.revparse_single("main")
                .unwrap()
                .peel_to_commit()
                .unwrap(),
            repo.revparse_single("ralph/1.1")
                .unwrap()
                .peel_to_commit()
                .unwrap(),
        );
        let mut whole = repo.merge_commits(&t, &s, None).unwrap();
        let expected = whole.write_tree_to(&repo).unwrap();
        let merged = repo
            .find_commit(git2::Oid::from_str(&commit).unwrap())
            .unwrap();
        // The merge's own edit (the spec marked done) comes on top.
        let edited = apply_edits(&repo, expected, &[SPEC.to_string()], &mark_done).unwrap();
        assert_eq!(merged.tree_id(), edited);
        assert_eq!(
            git(dir, &["ls-tree", "-r", "--name-only", &commit])
                .lines()
                .collect::<Vec<_>>(),
            vec![
                ".gitignore",
                "README",
                "a.txt",
                "deep/er/y.txt",
                "f/g.txt",
                "s.txt",
                SPEC,
                "t.txt"
            ]
        );
        assert_eq!(
            g.merge_bases_of(&repo, t.id(), s.id()).unwrap(),
            vec![git2::Oid::from_str(&base).unwrap()]
        );
        // The file that became a directory is the one update libgit2
        // refuses: that merge was the whole index's. Without it, the
        // targeted write itself.
        assert!(index_tree_onto(&repo, &whole, &t.tree().unwrap()).is_err());
        git(dir, &["checkout", "-q", "-b", "ralph/1.2", "ralph/1.1"]);
        git(dir, &["rm", "-q", "-r", "f"]);
        write(dir, "f", "a file again\n");
        commit_all(dir, "no directory");
        git(dir, &["checkout", "-q", "main"]);
        let s2 = repo
            .revparse_single("ralph/1.2")
            .unwrap()
            .peel_to_commit()
            .unwrap();
        let mut whole = repo.merge_commits(&t, &s2, None).unwrap();
        assert_eq!(
            index_tree_onto(&repo, &whole, &t.tree().unwrap()).unwrap(),
            whole.write_tree_to(&repo).unwrap()
        );
    }

    #[test]
    fn merge_story_builds_two_parent_commit_with_edit() {
        let (tmp, g, _base, main_tip) = diverged();
        let story_tip = tip_of(&g, "ralph/1.1");
        let paths = vec![
            SPEC.to_string(),
            "specs/missing.md".to_string(),
            SPEC.to_string(),
            "specs".to_string(),
        ];
        let out = g
            .merge_story("main", "ralph/1.1", "merge: story 1.1", &paths, &mark_done)
            .unwrap();
        let MergeOutcome::Merged { commit, base } = out else {
            panic!("{out:?}")
        };
        assert_eq!(base, main_tip);
        let dir = tmp.path();
        let parents = git(dir, &["rev-list", "--parents", "-n1", &commit]);
        assert_eq!(
            parents.split_whitespace().collect::<Vec<_>>(),
            vec![&commit, &main_tip, &story_tip]
        );
        assert_eq!(
            git(dir, &["log", "-1", "--format=%s|%an|%ae", &commit]).trim(),
            "merge: story 1.1|Test|test@example.com"
        );
        assert_eq!(
            git(dir, &["show", &format!("{commit}:{SPEC}")]),
            "---\nid: 1.1\nstatus: done\n---\nDo x.\n"
        );
        assert_eq!(git(dir, &["show", &format!("{commit}:b.txt")]), "b\n");
        assert_eq!(git(dir, &["show", &format!("{commit}:c.txt")]), "c\n");
        assert_eq!(
            git(dir, &["show", &format!("{commit}:a.txt")]),
            "one\ntwo\nthree\n"
        );
        // Only the spec differs from a plain merge of the two sides.
        assert_eq!(
            git(dir, &["diff", "--name-only", &story_tip, &commit]).trim(),
            format!("c.txt\n{SPEC}")
        );
        // No ref moved.
        assert_eq!(tip_of(&g, "main"), main_tip);
        assert_eq!(tip_of(&g, "ralph/1.1"), story_tip);
        assert_eq!(porcelain(dir), "");
    }

    #[test]
    fn merge_story_without_own_commits_is_single_parent() {
        let (tmp, g) = fixture();
        let base = tip_of(&g, "main");
        g.ensure_branch("ralph/1.1", &base).unwrap();
        write(tmp.path(), "c.txt", "c\n");
        let main_tip = commit_all(tmp.path(), "c");
        let out = merge_1_1(&g);
        let MergeOutcome::Merged { commit, base } = out else {
            panic!("{out:?}")
        };
        assert_eq!(base, main_tip);
        let parents = git(tmp.path(), &["rev-list", "--parents", "-n1", &commit]);
        assert_eq!(
            parents.split_whitespace().collect::<Vec<_>>(),
            vec![&commit, &main_tip]
        );
        assert!(git(tmp.path(), &["show", &format!("{commit}:{SPEC}")]).contains("status: done"));
    }

    #[test]
    fn merge_story_fast_forwardable_still_merges() {
        let (tmp, g) = fixture();
        let dir = tmp.path();
        let main_tip = tip_of(&g, "main");
        git(dir, &["checkout", "-q", "-b", "ralph/1.1"]);
        write(dir, "b.txt", "b\n");
        let story = commit_all(dir, "b");
        git(dir, &["checkout", "-q", "main"]);
        let out = g
            .merge_story("main", "ralph/1.1", "merge: story 1.1", &[], &|_, _| None)
            .unwrap();
        let MergeOutcome::Merged { commit, .. } = out else {
            panic!("{out:?}")
        };
        let parents = git(dir, &["rev-list", "--parents", "-n1", &commit]);
        assert_eq!(
            parents.split_whitespace().collect::<Vec<_>>(),
            vec![&commit, &main_tip, &story]
        );
    }

    #[test]
    fn merge_story_conflict_writes_nothing() {
        let (tmp, g) = fixture();
        let dir = tmp.path();
        git(dir, &["checkout", "-q", "-b", "ralph/1.1"]);
        write(dir, "a.txt", "one\nTWO story\nthree\n");
        let story = commit_all(dir, "story");
        git(dir, &["checkout", "-q", "main"]);
        write(dir, "a.txt", "one\nTWO main\nthree\n");
        let main_tip = commit_all(dir, "main");
        let refs_before = git(dir, &["for-each-ref"]);
        let out = merge_1_1(&g);
        assert_eq!(
            out,
            MergeOutcome::Conflict {
                paths: vec!["a.txt".to_string()]
            }
        );
        assert_eq!(tip_of(&g, "main"), main_tip);
        assert_eq!(tip_of(&g, "ralph/1.1"), story);
        assert_eq!(git(dir, &["for-each-ref"]), refs_before);
        assert_eq!(porcelain(dir), "");
        assert!(g
            .merge_story("main", "missing", "m", &[], &mark_done)
            .is_err());
    }

    fn merged(g: &Git) -> (String, String) {
        let out = merge_1_1(g);
        match out {
            MergeOutcome::Merged { commit, base } => (commit, base),
            other => panic!("{other:?}"),
        }
    }

    /// A landing allowed to make its merge again on the user's new commits,
    /// recording each (base, merge) it was asked to go on with.
    struct Relanding(std::cell::RefCell<Vec<(String, String)>>);

    impl landing::CheckoutWatch for Relanding {
        fn now(&self) -> u64 {
            0
        }
        fn git_processes(&self) -> Vec<landing::UserGit> {
            Vec::new()
        }
        fn log(&self, _: &str) {}
        fn relanding(&self, base: &str, merge: &str) -> bool {
            self.0.borrow_mut().push((base.into(), merge.into()));
            true
        }
    }

    fn land_relanding(g: &Git, base: &str, commit: &str) -> (LandOutcome, Vec<(String, String)>) {
        let watch = Relanding(Default::default());
        let out = g
            .land_inner(
                "main",
                &base.to_string(),
                &commit.to_string(),
                landing::LOCK_WAIT,
                &watch,
                &[],
            )
            .unwrap();
        (out, watch.0.into_inner())
    }

    #[test]
    fn a_merge_outrun_by_user_commits_elsewhere_is_made_again_on_them_under_the_locks() {
        let (tmp, g, _, _) = diverged();
        let dir = tmp.path();
        let story_tip = tip_of(&g, "ralph/1.1");
        let (commit, base) = merged(&g);
        write(dir, "d.txt", "user\n");
        let user = commit_all(dir, "user");
        // Without leave to land it again, the target moved, as before.
        assert_eq!(
            g.land("main", &base, &commit).unwrap(),
            LandOutcome::TargetMoved { now: user.clone() }
        );
        let (out, asked) = land_relanding(&g, &base, &commit);
        let LandOutcome::LandedOnTop {
            base: on,
            commit: again,
        } = out
        else {
            panic!("{out:?}")
        };
        assert_eq!(on, user);
        assert_eq!(
            asked,
            vec![(user.clone(), again.clone())],
            "the intent came first"
        );
        assert_eq!(tip_of(&g, "main"), again);
        let parents = git(dir, &["rev-list", "--parents", "-n1", &again]);
        assert_eq!(
            parents.split_whitespace().collect::<Vec<_>>(),
            vec![again.as_str(), user.as_str(), story_tip.as_str()]
        );
        assert_eq!(
            git(dir, &["log", "-1", "--format=%s", &again]).trim(),
            "merge: story 1.1"
        );
        // The validated merge's tree plus the user's file, in the checkout too.
        assert_eq!(
            git(dir, &["diff", "--name-only", &commit, &again]).trim(),
            "d.txt"
        );
        assert_eq!(read(dir, "b.txt"), "b\n");
        assert_eq!(read(dir, "d.txt"), "user\n");
        assert_eq!(porcelain(dir), "");
    }

    #[test]
    fn a_merge_outrun_by_user_commits_on_its_paths_or_a_rewritten_target_is_not_made_again() {
        // The user's commit changes a path the merge changes.
        let (tmp, g, _, _) = diverged();
        let dir = tmp.path();
        let (commit, base) = merged(&g);
        write(dir, "b.txt", "b\n");
        let user = commit_all(dir, "user adds the same file");
        let (out, asked) = land_relanding(&g, &base, &commit);
        assert_eq!(out, LandOutcome::TargetMoved { now: user });
        assert!(asked.is_empty());
        // The target set back to an older commit: no user commit explains it.
        let (tmp, g, first, _) = diverged();
        let (commit, base) = merged(&g);
        git(tmp.path(), &["reset", "-q", "--hard", &first]);
        let (out, asked) = land_relanding(&g, &base, &commit);
        assert_eq!(out, LandOutcome::TargetMoved { now: first });
        assert!(asked.is_empty());
    }

    #[test]
    fn land_updates_clean_main_checkout() {
        let (tmp, g, _, _) = diverged();
        let dir = tmp.path();
        write(dir, "target/out", "o");
        let (commit, base) = merged(&g);
        assert_eq!(g.land("main", &base, &commit).unwrap(), LandOutcome::Landed);
        assert_eq!(tip_of(&g, "main"), commit);
        assert_eq!(porcelain(dir), "");
        assert_eq!(read(dir, "b.txt"), "b\n");
        assert!(read(dir, SPEC).contains("status: done"));
        assert_eq!(g.head_branch().unwrap().as_deref(), Some("main"));
    }

    #[test]
    fn land_keeps_unrelated_local_edits() {
        let (tmp, g, _, _) = diverged();
        let dir = tmp.path();
        write(dir, "README", "my notes\n");
        write(dir, "c.txt", "staged\n");
        git(dir, &["add", "c.txt"]);
        write(dir, "scratch", "untracked\n");
        let (commit, base) = merged(&g);
        assert_eq!(g.land("main", &base, &commit).unwrap(), LandOutcome::Landed);
        assert_eq!(read(dir, "README"), "my notes\n");
        assert_eq!(read(dir, "scratch"), "untracked\n");
        assert_eq!(read(dir, "b.txt"), "b\n");
        let mut status: Vec<String> = porcelain(dir).lines().map(str::to_string).collect();
        status.sort();
        assert_eq!(status, vec![" M README", "?? scratch", "M  c.txt"]);
        assert_eq!(
            g.dirty_tracked_files(&|_| false).unwrap(),
            vec!["README", "c.txt"]
        );
    }

    #[test]
    fn land_blocked_by_local_edit_to_merged_file() {
        let (tmp, g, _, main_tip) = diverged();
        let dir = tmp.path();
        write(dir, SPEC, "my own edit\n");
        let (commit, base) = merged(&g);
        let out = g.land("main", &base, &commit).unwrap();
        assert_eq!(
            out,
            LandOutcome::CheckoutBlocked {
                paths: vec![SPEC.to_string()]
            }
        );
        assert_eq!(tip_of(&g, "main"), main_tip);
        assert_eq!(read(dir, SPEC), "my own edit\n");
        assert!(!dir.join("b.txt").exists());
        assert_eq!(porcelain(dir), format!(" M {SPEC}\n"));
    }

    #[test]
    fn land_blocked_by_untracked_file_in_the_way() {
        let (tmp, g, _, main_tip) = diverged();
        let dir = tmp.path();
        write(dir, "b.txt", "mine\n");
        let (commit, base) = merged(&g);
        let out = g.land("main", &base, &commit).unwrap();
        assert_eq!(
            out,
            LandOutcome::CheckoutBlocked {
                paths: vec!["b.txt".to_string()]
            }
        );
        assert_eq!(tip_of(&g, "main"), main_tip);
        assert_eq!(read(dir, "b.txt"), "mine\n");
    }

    #[test]
    fn land_reports_target_moved() {
        let (tmp, g, _, _) = diverged();
        let dir = tmp.path();
        let (commit, base) = merged(&g);
        write(dir, "d.txt", "d\n");
        let moved = commit_all(dir, "user commit");
        assert_eq!(
            g.land("main", &base, &commit).unwrap(),
            LandOutcome::TargetMoved { now: moved.clone() }
        );
        assert_eq!(tip_of(&g, "main"), moved);
        assert_eq!(porcelain(dir), "");
    }

    #[test]
    fn land_when_target_not_checked_out_moves_only_the_ref() {
        let (tmp, g, _, _) = diverged();
        let dir = tmp.path();
        git(dir, &["checkout", "-q", "-b", "elsewhere"]);
        let (commit, base) = merged(&g);
        assert_eq!(g.land("main", &base, &commit).unwrap(), LandOutcome::Landed);
        assert_eq!(tip_of(&g, "main"), commit);
        assert!(!dir.join("b.txt").exists());
        assert_eq!(porcelain(dir), "");
    }

    #[test]
    fn land_refuses_during_a_merge_in_progress() {
        let (tmp, g, _, main_tip) = diverged();
        let (commit, base) = merged(&g);
        std::fs::write(tmp.path().join(".git/MERGE_HEAD"), format!("{main_tip}\n")).unwrap();
        assert!(matches!(
            g.land("main", &base, &commit),
            Err(GitError::Other(_))
        ));
        assert_eq!(tip_of(&g, "main"), main_tip);
    }

    #[test]
    fn land_waits_for_someone_elses_index_lock_then_reports_busy() {
        let (tmp, g, _, main_tip) = diverged();
        let dir = tmp.path();
        let (commit, base) = merged(&g);
        let lock = dir.join(".git/index.lock");
        std::fs::write(&lock, "").unwrap();
        let wait = std::time::Duration::from_millis(30);
        assert_eq!(
            g.land_waiting("main", &base, &commit, wait).unwrap(),
            LandOutcome::Busy {
                lock: lock.clone(),
                holder: None
            }
        );
        assert!(lock.exists(), "someone else's lock is never removed");
        assert_eq!(tip_of(&g, "main"), main_tip);
        assert!(!dir.join("b.txt").exists());
        std::fs::remove_file(&lock).unwrap();
        let ref_lock = dir.join(".git/refs/heads/main.lock");
        std::fs::write(&ref_lock, "").unwrap();
        assert_eq!(
            g.land_waiting("main", &base, &commit, wait).unwrap(),
            LandOutcome::Busy {
                lock: ref_lock.clone(),
                holder: None
            }
        );
        assert!(ref_lock.exists());
        assert!(!lock.exists(), "ralph's own index.lock is released");
        std::fs::remove_file(&ref_lock).unwrap();
        assert_eq!(g.land("main", &base, &commit).unwrap(), LandOutcome::Landed);
        assert_eq!(porcelain(dir), "");
    }

    #[test]
    fn land_releases_its_locks_and_leaves_no_scratch_index_whatever_the_outcome() {
        let (tmp, g, _, _) = diverged();
        let dir = tmp.path();
        let leftovers = || {
            [
                ".git/index.lock",
                ".git/refs/heads/main.lock",
                ".git/ralph-landing.index",
                ".git/ralph-landing.index.lock",
            ]
            .into_iter()
            .filter(|p| dir.join(p).exists())
            .collect::<Vec<_>>()
        };
        write(dir, SPEC, "my own edit\n");
        let (commit, base) = merged(&g);
        assert!(matches!(
            g.land("main", &base, &commit).unwrap(),
            LandOutcome::CheckoutBlocked { .. }
        ));
        assert_eq!(leftovers(), Vec::<&str>::new());
        git(dir, &["checkout", "--", SPEC]);
        assert_eq!(g.land("main", &base, &commit).unwrap(), LandOutcome::Landed);
        assert_eq!(leftovers(), Vec::<&str>::new());
        assert!(matches!(
            g.land("main", &base, &commit).unwrap(),
            LandOutcome::TargetMoved { .. }
        ));
        assert_eq!(leftovers(), Vec::<&str>::new());
    }

    #[test]
    fn an_entry_racy_to_git_by_the_second_keeps_a_same_size_edit_visible_after_a_landing() {
        let (tmp, g, _, _) = diverged();
        let dir = tmp.path();
        let set_mtime = |rel: &str, t: std::time::SystemTime| {
            std::fs::File::options()
                .write(true)
                .open(dir.join(rel))
                .unwrap()
                .set_modified(t)
                .unwrap();
        };
        // A second well in the past: README is modified at .1 of it, staged
        // (the index records that stat), and the index is written at .5.
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            - 100;
        let at = |nanos| std::time::UNIX_EPOCH + std::time::Duration::new(secs, nanos);
        write(dir, "README", "readme 1\n");
        set_mtime("README", at(100_000_000));
        git(dir, &["add", "README"]);
        set_mtime(".git/index", at(500_000_000));
        // Then, in that same second, a same-size edit. git (whole seconds,
        // no USE_NSEC) cannot trust README's stat data against this index.
        write(dir, "README", "readme 2\n");
        set_mtime("README", at(400_000_000));
        let (commit, base) = merged(&g);
        assert_eq!(g.land("main", &base, &commit).unwrap(), LandOutcome::Landed);
        // Before the fix ralph compared nanoseconds, kept README's stat
        // data, and `git status` said nothing at all here.
        assert_eq!(porcelain(dir), "MM README\n");
        let index = git2::Index::open(&dir.join(".git/index")).unwrap();
        let e = index.get_path(Path::new("README"), 0).unwrap();
        assert_eq!(
            (e.file_size, e.mtime.seconds()),
            (0, 0),
            "the new index does not vouch for README"
        );
    }

    #[test]
    fn an_index_written_back_from_before_a_landing_is_repaired_keeping_the_users_staging() {
        let (tmp, g, _, _) = diverged();
        let dir = tmp.path();
        write(dir, "c.txt", "staged by the user\n");
        git(dir, &["add", "c.txt"]);
        let old_index = std::fs::read(dir.join(".git/index")).unwrap();
        let (commit, base) = merged(&g);
        assert_eq!(g.land("main", &base, &commit).unwrap(), LandOutcome::Landed);
        // What a `git commit` whose read of the index straddled the landing
        // writes before it fails on HEAD.
        std::fs::write(dir.join(".git/index"), &old_index).unwrap();
        assert_ne!(porcelain(dir), "M  c.txt\n");
        let landings = [(base.clone(), commit.clone())];
        let watch = landing::NoWatch;
        let repaired = g.settle_index("main", &landings, &watch).unwrap();
        assert_eq!(repaired, std::slice::from_ref(&commit));
        assert_eq!(porcelain(dir), "M  c.txt\n");
        assert!(!dir.join(".git/index.lock").exists());
        assert!(g
            .settle_index("main", &landings, &watch)
            .unwrap()
            .is_empty());
        // One path of the story unstaged on purpose is the user's doing.
        git(dir, &["rm", "-q", "--cached", "b.txt"]);
        assert!(g
            .settle_index("main", &landings, &watch)
            .unwrap()
            .is_empty());
        assert_eq!(porcelain(dir), "D  b.txt\nM  c.txt\n?? b.txt\n");
    }

    /// A user's git process that never ends (`git add -p` waiting for
    /// answers), started at tick `started`.
    struct Lingering {
        started: u64,
    }

    impl CheckoutWatch for Lingering {
        fn now(&self) -> u64 {
            100
        }
        fn git_processes(&self) -> Vec<UserGit> {
            vec![UserGit {
                pid: 4242,
                started: self.started,
                argv: vec!["git".into(), "add".into(), "-p".into()],
            }]
        }
        fn log(&self, _: &str) {}
    }

    #[test]
    fn a_user_git_alive_through_the_wait_makes_the_landing_busy_changing_nothing() {
        let (tmp, g, _, _) = diverged();
        let dir = tmp.path();
        let (commit, base) = merged(&g);
        let index = std::fs::read(dir.join(".git/index")).unwrap();
        let wait = std::time::Duration::from_millis(50);
        let out = g
            .land_inner(
                "main",
                &base,
                &commit,
                wait,
                &Lingering { started: 90 },
                &[],
            )
            .unwrap();
        assert_eq!(
            out,
            LandOutcome::Busy {
                lock: g.git_dir.join("index.lock"),
                holder: Some("git process 4242 (git add -p)".to_string())
            }
        );
        assert_eq!(tip_of(&g, "main"), base);
        assert_eq!(std::fs::read(dir.join(".git/index")).unwrap(), index);
        assert!(!dir.join(".git/index.lock").exists());
        assert!(!dir.join(".git/refs/heads/main.lock").exists());
        assert_eq!(porcelain(dir), "");
        // One that started after the landing took its locks read nothing
        // older than what it finds: not waited for.
        let out = g
            .land_inner(
                "main",
                &base,
                &commit,
                wait,
                &Lingering { started: 101 },
                &[],
            )
            .unwrap();
        assert_eq!(out, LandOutcome::Landed);
        assert_eq!(porcelain(dir), "");
    }

    #[test]
    fn landed_work_set_back_by_a_later_commit_is_found_with_that_commit() {
        let (tmp, g, _, _) = diverged();
        let dir = tmp.path();
        let (commit, base) = merged(&g);
        assert_eq!(g.land("main", &base, &commit).unwrap(), LandOutcome::Landed);
        let mut landings = vec![("1.1".to_string(), base.clone(), commit.clone())];
        let mut check = RevertCheck::default();
        assert_eq!(g.reverted_since("main", &landings, &mut check).unwrap(), []);
        git(dir, &["rm", "-q", "b.txt"]);
        git(dir, &["commit", "-qm", "user: tidy up"]);
        let by = tip_of(&g, "main");
        write(dir, "d.txt", "d\n");
        commit_all(dir, "later");
        let found = Reverted {
            story: "1.1".to_string(),
            path: "b.txt".to_string(),
            commit: by,
            subject: "user: tidy up".to_string(),
        };
        assert_eq!(
            g.reverted_since("main", &landings, &mut check).unwrap(),
            [found]
        );
        // Read once: the next check reads only what came since.
        assert_eq!(g.reverted_since("main", &landings, &mut check).unwrap(), []);
        // A second landing of the run whose merge writes the same path
        // (b.txt again: work, not a revert), then a user commit that sets it
        // back to the second story's "before" (absent): the second story's
        // work is said, the first's was said already.
        git(dir, &["checkout", "-q", "-b", "ralph/1.2"]);
        write(dir, "b.txt", "b again\n");
        commit_all(dir, "story 1.2 work");
        git(dir, &["checkout", "-q", "main"]);
        let base2 = tip_of(&g, "main");
        git(
            dir,
            &[
                "merge",
                "-q",
                "--no-ff",
                "-m",
                "merge: story 1.2",
                "ralph/1.2",
            ],
        );
        let merge2 = tip_of(&g, "main");
        landings.push(("1.2".to_string(), base2, merge2));
        assert_eq!(g.reverted_since("main", &landings, &mut check).unwrap(), []);
        git(dir, &["rm", "-q", "b.txt"]);
        git(dir, &["commit", "-qm", "user: drop it again"]);
        let by2 = tip_of(&g, "main");
        let again = g.reverted_since("main", &landings, &mut check).unwrap();
        assert_eq!(
            again
                .iter()
                .map(|r| (r.story.as_str(), r.path.as_str(), r.commit.as_str()))
                .collect::<Vec<_>>(),
            [
                ("1.1", "b.txt", by2.as_str()),
                ("1.2", "b.txt", by2.as_str())
            ]
        );
    }

    #[test]
    fn landed_files_carry_no_stat_data_so_an_instant_same_size_edit_shows() {
        let (tmp, g, _, _) = diverged();
        let dir = tmp.path();
        let (commit, base) = merged(&g);
        assert_eq!(g.land("main", &base, &commit).unwrap(), LandOutcome::Landed);
        // Same length, same second (and often the same timestamp tick) as
        // the landing wrote it: only a content check can see this edit.
        write(dir, "b.txt", "B\n");
        let index = git2::Index::open(&dir.join(".git/index")).unwrap();
        for p in ["b.txt", SPEC] {
            let e = index.get_path(Path::new(p), 0).unwrap();
            assert_eq!((e.file_size, e.mtime.seconds(), e.ino), (0, 0, 0), "{p}");
        }
        assert_eq!(porcelain(dir), " M b.txt\n");
    }

    #[test]
    fn a_landed_file_settled_before_the_index_takes_its_stat_data_back_and_an_edit_still_shows() {
        let (tmp, g, _, _) = diverged();
        let dir = tmp.path();
        let (commit, base) = merged(&g);
        assert_eq!(g.land("main", &base, &commit).unwrap(), LandOutcome::Landed);
        // Time passes: both landed files last changed 100 s ago, the index
        // was written 50 s ago. Meanwhile the user made a same-size edit to
        // b.txt that kept an old mtime (a tool that restores times).
        let ago = |s| std::time::SystemTime::now() - std::time::Duration::from_secs(s);
        let set_mtime = |rel: &str, t| {
            std::fs::File::options()
                .write(true)
                .open(dir.join(rel))
                .unwrap()
                .set_modified(t)
                .unwrap();
        };
        write(dir, "b.txt", "B\n");
        for p in ["b.txt", SPEC] {
            set_mtime(p, ago(100));
        }
        set_mtime(".git/index", ago(50));
        // Story 1.2 (d.txt) made beside the checkout, then landed.
        let repo = git2::Repository::open(dir).unwrap();
        let head = repo
            .find_commit(repo.refname_to_id("refs/heads/main").unwrap())
            .unwrap();
        let mut tb = repo.treebuilder(Some(&head.tree().unwrap())).unwrap();
        tb.insert("d.txt", repo.blob(b"d\n").unwrap(), 0o100644)
            .unwrap();
        let tree = repo.find_tree(tb.write().unwrap()).unwrap();
        let sig = git2::Signature::now("Test", "test@example.com").unwrap();
        repo.commit(
            Some("refs/heads/ralph/1.2"),
            &sig,
            &sig,
            "story 1.2",
            &tree,
            &[&head],
        )
        .unwrap();
        let MergeOutcome::Merged { commit, base } = g
            .merge_story("main", "ralph/1.2", "merge: story 1.2", &[], &|_, _| None)
            .unwrap()
        else {
            panic!("story 1.2 merges")
        };
        assert_eq!(g.land("main", &base, &commit).unwrap(), LandOutcome::Landed);
        let index = git2::Index::open(&dir.join(".git/index")).unwrap();
        let entry = |p: &str| index.get_path(Path::new(p), 0).unwrap();
        let spec = std::fs::metadata(dir.join(SPEC)).unwrap();
        // Hashed once, found unchanged: later landings need not hash it again.
        assert_eq!(u64::from(entry(SPEC).file_size), spec.len());
        assert_ne!(entry(SPEC).mtime.seconds(), 0);
        // The edited file stays without stat data: nothing vouches for it.
        assert_eq!(
            (entry("b.txt").file_size, entry("b.txt").mtime.seconds()),
            (0, 0)
        );
        assert_eq!(
            (entry("d.txt").file_size, entry("d.txt").mtime.seconds()),
            (0, 0)
        );
        drop(index);
        assert_eq!(read(dir, "b.txt"), "B\n");
        assert_eq!(porcelain(dir), " M b.txt\n");
    }

    #[test]
    fn a_landing_whose_ref_move_fails_puts_files_and_index_back() {
        let (tmp, g, _, main_tip) = diverged();
        let dir = tmp.path();
        write(dir, "README", "my notes\n");
        let (commit, base) = merged(&g);
        // `git status` refreshes the index file: read it once beforehand.
        let status_before = porcelain(dir);
        let index_before = std::fs::read(dir.join(".git/index")).unwrap();
        let mtime_before = std::fs::metadata(dir.join(".git/index"))
            .unwrap()
            .modified()
            .unwrap();
        let repo = g.repo().unwrap();
        let (b, m) = (
            repo.find_commit(parse_oid(&base).unwrap()).unwrap(),
            repo.find_commit(parse_oid(&commit).unwrap()).unwrap(),
        );
        let admin = repo.path().to_path_buf();
        let undo = match update_checkout(&repo, &g.workdir, &admin, &b, &m).unwrap() {
            Checkout::Updated(undo) => undo,
            Checkout::Blocked(p) => panic!("blocked: {p:?}"),
        };
        assert_eq!(read(dir, "b.txt"), "b\n");
        // Someone moves the branch without git's index lock.
        let side = git(
            dir,
            &[
                "commit-tree",
                "-p",
                &main_tip,
                "-m",
                "side",
                &format!("{main_tip}^{{tree}}"),
            ],
        );
        let side = side.trim().to_string();
        git(dir, &["update-ref", "refs/heads/main", &side]);
        let out = g
            .finish_landing(
                &repo,
                "refs/heads/main",
                "main",
                m.id(),
                b.id(),
                Some(&undo),
            )
            .unwrap();
        assert_eq!(out, LandOutcome::TargetMoved { now: side });
        assert!(!dir.join("b.txt").exists());
        assert_eq!(read(dir, "README"), "my notes\n");
        assert!(read(dir, SPEC).contains("status: pending"));
        assert_eq!(std::fs::read(dir.join(".git/index")).unwrap(), index_before);
        let mtime_after = std::fs::metadata(dir.join(".git/index"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(mtime_after, mtime_before);
        git(dir, &["reset", "-q", "--soft", &main_tip]);
        assert_eq!(porcelain(dir), status_before);
    }

    #[test]
    fn the_target_checked_out_in_another_worktree_is_named() {
        let (tmp, g) = fixture();
        let dir = tmp.path();
        git(dir, &["branch", "feature"]);
        git(dir, &["branch", "story"]);
        let ralph_wts = dir.join(".ralph/worktrees");
        let mine = ralph_wts.join("slot-0");
        std::fs::create_dir_all(&ralph_wts).unwrap();
        git(
            dir,
            &["worktree", "add", "-q", mine.to_str().unwrap(), "story"],
        );
        let other = tempfile::tempdir().unwrap();
        let other_wt = other.path().join("second");
        git(
            dir,
            &[
                "worktree",
                "add",
                "-q",
                other_wt.to_str().unwrap(),
                "feature",
            ],
        );
        let found = g
            .branch_checked_out_elsewhere("feature", &ralph_wts)
            .unwrap();
        assert_eq!(found, Some(other_wt.canonicalize().unwrap()));
        assert_eq!(
            g.branch_checked_out_elsewhere("main", &ralph_wts).unwrap(),
            None
        );
        assert_eq!(
            g.branch_checked_out_elsewhere("story", &ralph_wts).unwrap(),
            None
        );
        // A rebase in progress there still holds the branch (HEAD detached).
        git(&other_wt, &["switch", "-q", "--detach"]);
        assert_eq!(
            g.branch_checked_out_elsewhere("feature", &ralph_wts)
                .unwrap(),
            None
        );
        let admin = dir.join(".git/worktrees/second/rebase-merge");
        std::fs::create_dir_all(&admin).unwrap();
        std::fs::write(admin.join("head-name"), "refs/heads/feature\n").unwrap();
        assert_eq!(
            g.branch_checked_out_elsewhere("feature", &ralph_wts)
                .unwrap(),
            Some(other_wt.canonicalize().unwrap())
        );
    }

    #[test]
    fn landed_stories_first_parent_oldest_first_deduped() {
        let (tmp, g) = fixture();
        let dir = tmp.path();
        let empty = |msg: &str| {
            git(dir, &["commit", "-q", "--allow-empty", "-m", msg]);
            git(dir, &["rev-parse", "HEAD"]).trim().to_string()
        };
        let first = empty("merge: story 1.1");
        empty("merge: story 1.2 extra words");
        empty("merge: story");
        empty("feat: merge: story 9.9");
        let second = empty("merge: story 2.1\n\nbody");
        empty("merge: story 1.1");
        // A landing subject reachable only through a second parent is not one.
        git(dir, &["checkout", "-q", "-b", "side"]);
        empty("merge: story 7.7");
        git(dir, &["checkout", "-q", "main"]);
        git(dir, &["merge", "-q", "--no-ff", "-m", "merge side", "side"]);
        let got = g.landed_stories("main").unwrap();
        let ids: Vec<&str> = got.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, vec!["1.1", "1.2 extra words", "2.1"]);
        assert_eq!(got[0].1, first);
        assert_eq!(got[2].1, second);
        assert!(g.landed_stories("missing").unwrap().is_empty());
        let subjects = git(
            dir,
            &["log", "--first-parent", "-n", "2", "--format=%s", "main"],
        );
        assert_eq!(subjects, "merge side\nmerge: story 1.1\n");
    }

    #[test]
    fn dirty_tracked_files_honours_ignore() {
        let (tmp, g) = fixture();
        let dir = tmp.path();
        assert!(g.dirty_tracked_files(&|_| false).unwrap().is_empty());
        write(dir, "a.txt", "changed\n");
        write(dir, SPEC, "changed\n");
        std::fs::remove_file(dir.join("README")).unwrap();
        write(dir, "new.txt", "n\n");
        git(dir, &["add", "new.txt"]);
        write(dir, "untracked", "u\n");
        write(dir, "target/x", "ignored\n");
        let all = g.dirty_tracked_files(&|_| false).unwrap();
        assert_eq!(all, vec!["README", "a.txt", "new.txt", SPEC]);
        let some = g.dirty_tracked_files(&|p| p.starts_with("specs/")).unwrap();
        assert_eq!(some, vec!["README", "a.txt", "new.txt"]);
    }

    #[test]
    fn list_worktrees_sees_broken_admin_dir() {
        let (_tmp, g) = fixture();
        slot0_at_main(&g, "ralph/1.1");
        let ghost = g.git_dir.join("worktrees/ghost");
        std::fs::create_dir_all(&ghost).unwrap();
        std::fs::write(ghost.join("gitdir"), "/nowhere/ghost/.git\n").unwrap();
        std::fs::create_dir_all(g.git_dir.join("worktrees/empty")).unwrap();
        let listed = g.list_worktrees().unwrap();
        let names: Vec<&str> = listed.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, vec!["empty", "ghost", "slot-0"]);
        assert!(listed[0].prunable);
        assert_eq!(listed[1].path, PathBuf::from("/nowhere/ghost"));
        assert!(listed[1].prunable);
        assert!(!listed[2].prunable);
        assert!(!listed[2].locked);
        g.remove_worktree("ghost", Path::new("/nowhere/ghost"))
            .unwrap();
        g.remove_worktree("empty", &wt_path(&g, "empty")).unwrap();
        assert_eq!(g.list_worktrees().unwrap().len(), 1);
    }

    #[test]
    fn remove_worktree_is_idempotent() {
        let (tmp, g) = fixture();
        let (_, wt) = slot0_at_main(&g, "ralph/1.1");
        write(&wt, "target/x", "x");
        let admin = g.git_dir.join("worktrees/slot-0");
        std::fs::write(admin.join("locked"), "x").unwrap();
        std::fs::write(admin.join("index.lock"), "").unwrap();
        g.remove_worktree("slot-0", &wt).unwrap();
        assert!(!wt.exists());
        assert!(!admin.exists());
        assert!(g.list_worktrees().unwrap().is_empty());
        g.remove_worktree("slot-0", &wt).unwrap();
        // The branch survives and can now be deleted.
        g.delete_branch("ralph/1.1").unwrap();
        assert!(
            git(tmp.path(), &["worktree", "list", "--porcelain"])
                .lines()
                .filter(|l| l.starts_with("worktree "))
                .count()
                == 1
        );
        assert!(g.remove_worktree("..", &wt).is_err());
        assert!(g.remove_worktree("x", &g.workdir.clone()).is_err());
        assert!(g.workdir.join("a.txt").exists());
    }

    #[test]
    fn exclude_appends_missing_patterns_once() {
        let (tmp, g) = fixture();
        let file = g.git_dir.join("info/exclude");
        std::fs::write(&file, "# comment\n.ralph/state.json").unwrap();
        g.exclude(&[
            ".ralph/state.json",
            ".ralph/worktrees/",
            ".ralph/worktrees/",
        ])
        .unwrap();
        g.exclude(&[".ralph/worktrees/", "progress.txt"]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "# comment\n.ralph/state.json\n.ralph/worktrees/\nprogress.txt\n"
        );
        write(tmp.path(), "progress.txt", "p");
        assert_eq!(porcelain(tmp.path()), "");
        std::fs::remove_dir_all(g.git_dir.join("info")).unwrap();
        g.exclude(&["x"]).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "x\n");
    }

    #[test]
    fn release_branch_frees_it_from_an_idle_slot_only_under_the_dir() {
        let (_tmp, g) = fixture();
        let base = tip_of(&g, "main");
        let w0 = wt_path(&g, "slot-0");
        g.prepare_worktree("slot-0", &w0, "ralph/story-1.1", &base)
            .unwrap();
        let elsewhere = g.workdir.join("other-dir");
        assert!(g
            .release_branch("ralph/story-1.1", &elsewhere)
            .unwrap()
            .is_empty());
        assert!(g
            .prepare_worktree("slot-1", &wt_path(&g, "slot-1"), "ralph/story-1.1", &base)
            .is_err());
        let released = g
            .release_branch("ralph/story-1.1", &g.workdir.join(".ralph/worktrees"))
            .unwrap();
        assert_eq!(released, vec!["slot-0".to_string()]);
        assert_eq!(g.resolve_branch_at_head(&w0).unwrap(), None);
        g.prepare_worktree("slot-1", &wt_path(&g, "slot-1"), "ralph/story-1.1", &base)
            .unwrap();
    }

    #[test]
    fn save_uncommitted_keeps_edits_and_new_files_without_touching_the_worktree() {
        let (_tmp, g) = fixture();
        let (_, wt) = slot0_at_main(&g, "ralph/story-1.1");
        assert_eq!(g.save_uncommitted(&wt, "refs/ralph/x").unwrap(), None);
        write(&wt, "a.txt", "changed\n");
        write(&wt, "new/file.txt", "new\n");
        write(&wt, "target/ignored", "i\n");
        std::fs::remove_file(wt.join("README")).unwrap();
        let before = porcelain(&wt);
        let saved = g.save_uncommitted(&wt, "refs/ralph/x").unwrap().unwrap();
        assert_eq!(porcelain(&wt), before, "the worktree is untouched");
        let show = |p: &str| git(&g.workdir, &["show", &format!("{saved}:{p}")]);
        assert_eq!(show("a.txt"), "changed\n");
        assert_eq!(show("new/file.txt"), "new\n");
        let files = git(&g.workdir, &["ls-tree", "-r", "--name-only", &saved]);
        assert!(
            !files.contains("README") && !files.contains("target/"),
            "{files}"
        );
    }

    #[test]
    fn not_committed_says_how_each_file_differs_from_head() {
        let (tmp, g) = fixture();
        let dir = tmp.path();
        write(dir, "new.md", "n\n");
        write(dir, "target/spec.md", "i\n");
        write(dir, "staged.md", "s\n");
        git(dir, &["add", "staged.md"]);
        write(dir, "a.txt", "edited\n");
        let paths: Vec<String> = ["README", "new.md", "target/spec.md", "staged.md", "a.txt"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            g.not_committed(&paths).unwrap(),
            vec![
                ("new.md".to_string(), NotCommitted::Untracked),
                ("target/spec.md".to_string(), NotCommitted::Ignored),
                ("staged.md".to_string(), NotCommitted::Staged),
                ("a.txt".to_string(), NotCommitted::Modified),
            ]
        );
    }

    #[test]
    fn commit_left_work_commits_what_git_add_all_would_minus_skipped_paths() {
        let (_tmp, g) = fixture();
        let base = tip_of(&g, "main");
        let wt = wt_path(&g, "slot-0");
        let b = "ralph/story-1.1";
        g.prepare_worktree("slot-0", &wt, b, &base).unwrap();
        let skip = |p: &str| p == "progress.txt";
        assert_eq!(
            g.commit_left_work(&wt, b, "m", &skip).unwrap(),
            LeftWork::Nothing
        );
        assert!(g.same_tree(b, &base).unwrap());
        write(&wt, "a.txt", "changed\n");
        write(&wt, "new/file.txt", "new\n");
        write(&wt, "target/ignored", "i\n");
        write(&wt, "progress.txt", "runtime\n");
        std::fs::remove_file(wt.join("README")).unwrap();
        let LeftWork::Committed { commit, files } = g
            .commit_left_work(&wt, b, "feat(story-1.1): X", &skip)
            .unwrap()
        else {
            panic!("nothing committed");
        };
        assert_eq!(files, vec!["README", "a.txt", "new/file.txt"]);
        assert_eq!(tip_of(&g, b), commit, "the story branch holds it");
        assert_eq!(
            git(&g.workdir, &["log", "-1", "--format=%s", &commit]).trim(),
            "feat(story-1.1): X"
        );
        let tree = git(&g.workdir, &["ls-tree", "-r", "--name-only", &commit]);
        assert!(tree.contains("new/file.txt") && !tree.contains("README"));
        assert!(!tree.contains("target/") && !tree.contains("progress.txt"));
        // Only the skipped runtime file is left over.
        assert_eq!(porcelain(&wt), "?? progress.txt\n");
        assert!(!g.same_tree(b, &base).unwrap());
    }

    #[test]
    fn commit_left_work_finishes_a_merge_the_agent_resolved() {
        let (tmp, g) = fixture();
        let dir = tmp.path();
        let base = tip_of(&g, "main");
        git(dir, &["checkout", "-q", "-b", "other"]);
        write(dir, "a.txt", "one\nTWO\nthree\n");
        let other = commit_all(dir, "other");
        git(dir, &["checkout", "-q", "main"]);
        let wt = wt_path(&g, "slot-0");
        let b = "ralph/story-1.1";
        g.prepare_worktree("slot-0", &wt, b, &base).unwrap();
        write(&wt, "a.txt", "one\n2\nthree\n");
        commit_all(&wt, "mine");
        let out = Command::new("git")
            .args(["merge", "-q", "--no-commit", "other"])
            .current_dir(&wt)
            .output()
            .unwrap();
        assert!(!out.status.success(), "the merge conflicts");
        // Resolved on disk, never added nor committed.
        write(&wt, "a.txt", "one\nTWO 2\nthree\n");
        let LeftWork::Committed { commit, files } =
            g.commit_left_work(&wt, b, "m", &|_: &str| false).unwrap()
        else {
            panic!("nothing committed");
        };
        assert_eq!(files, vec!["a.txt"]);
        let parents = git(&g.workdir, &["log", "-1", "--format=%P", &commit]);
        assert!(parents.trim().ends_with(&other), "{parents}");
        assert_eq!(parents.split_whitespace().count(), 2);
        assert!(!g.git_dir.join("worktrees/slot-0/MERGE_HEAD").exists());
        assert_eq!(porcelain(&wt), "");
    }

    #[test]
    fn commit_left_work_follows_a_detached_head_but_not_a_diverged_one() {
        let (_tmp, g) = fixture();
        let base = tip_of(&g, "main");
        let wt = wt_path(&g, "slot-0");
        let b = "ralph/story-1.1";
        g.prepare_worktree("slot-0", &wt, b, &base).unwrap();
        git(&wt, &["checkout", "-q", "--detach"]);
        write(&wt, "x.txt", "x\n");
        let skip = |_: &str| false;
        let LeftWork::Committed { commit, .. } = g.commit_left_work(&wt, b, "m", &skip).unwrap()
        else {
            panic!("nothing committed");
        };
        assert_eq!(tip_of(&g, b), commit);
        assert_on_branch(&g, &wt, b);
        // HEAD on a commit the branch does not have: the work is not the branch's.
        git(&wt, &["checkout", "-q", "--detach"]);
        write(&wt, "y.txt", "y\n");
        commit_all(&wt, "elsewhere");
        write(&wt, "z.txt", "z\n");
        assert_eq!(
            g.commit_left_work(&wt, b, "m", &skip).unwrap(),
            LeftWork::OffBranch
        );
        assert_eq!(tip_of(&g, b), commit);
    }

    #[test]
    fn adopt_worktree_head_follows_a_detached_or_switched_agent() {
        let (_tmp, g) = fixture();
        let (base, wt) = slot0_at_main(&g, "ralph/story-1.1");
        assert_eq!(
            g.adopt_worktree_head(&wt, "ralph/story-1.1", &base, "refs/ralph/h")
                .unwrap(),
            Adopted::Unchanged
        );
        git(&wt, &["checkout", "-q", "--detach"]);
        write(&wt, "x.txt", "x\n");
        let c = commit_all(&wt, "work");
        assert_eq!(
            g.adopt_worktree_head(&wt, "ralph/story-1.1", &base, "refs/ralph/h")
                .unwrap(),
            Adopted::FastForwarded { to: c.clone() }
        );
        assert_eq!(tip_of(&g, "ralph/story-1.1"), c);
        // Diverged: the agent restarted from the base on a branch of its own.
        git(&wt, &["checkout", "-q", "-b", "agent-branch", &base]);
        write(&wt, "y.txt", "y\n");
        let d = commit_all(&wt, "other take");
        assert_eq!(
            g.adopt_worktree_head(&wt, "ralph/story-1.1", &base, "refs/ralph/h")
                .unwrap(),
            Adopted::Saved {
                refname: "refs/ralph/h".into()
            }
        );
        assert_eq!(
            tip_of(&g, "ralph/story-1.1"),
            c,
            "the branch keeps its own work"
        );
        assert_eq!(git(&g.workdir, &["rev-parse", "refs/ralph/h"]).trim(), d);
    }

    #[test]
    fn rollback_restores_paths_a_cut_short_landing_wrote() {
        let (_tmp, g) = fixture();
        let base = tip_of(&g, "main");
        git(&g.workdir, &["checkout", "-q", "-b", "side"]);
        write(&g.workdir, "a.txt", "one\ntwo\nTHREE\n");
        write(&g.workdir, "added.txt", "a long enough added file\n");
        let side = commit_all(&g.workdir, "side");
        git(&g.workdir, &["checkout", "-q", "main"]);
        // The merge's files half-written: one complete, one truncated.
        write(&g.workdir, "a.txt", "one\ntwo\nTHREE\n");
        write(&g.workdir, "added.txt", "a long");
        // And the user's own edit of a file the merge does not touch.
        write(&g.workdir, "README", "mine\n");
        let mut restored = g.rollback_partial_landing(&base, &side).unwrap();
        restored.sort();
        assert_eq!(restored, vec!["a.txt".to_string(), "added.txt".to_string()]);
        assert_eq!(read(&g.workdir, "a.txt"), "one\ntwo\nthree\n");
        assert!(!g.workdir.join("added.txt").exists());
        assert_eq!(read(&g.workdir, "README"), "mine\n");
        // A file the merge touches but holding someone's own content stays.
        write(&g.workdir, "a.txt", "someone else's\n");
        let again = g.rollback_partial_landing(&base, &side).unwrap();
        assert!(!again.contains(&"a.txt".to_string()), "{again:?}");
        assert_eq!(read(&g.workdir, "a.txt"), "someone else's\n");
    }

    #[test]
    fn lock_files_lists_top_level_objects_refs_and_worktree_locks() {
        let (_tmp, g) = fixture();
        for p in [
            "index.lock",
            "objects/maintenance.lock",
            "refs/heads/main.lock",
        ] {
            std::fs::write(g.git_dir.join(p), "").unwrap();
        }
        let names: Vec<String> = g
            .lock_files()
            .iter()
            .map(|p| p.strip_prefix(&g.git_dir).unwrap().display().to_string())
            .collect();
        for p in [
            "index.lock",
            "objects/maintenance.lock",
            "refs/heads/main.lock",
        ] {
            assert!(names.contains(&p.to_string()), "{p} missing from {names:?}");
        }
    }

    /// Issue 21: a free slot made ready ahead (made when missing, detached
    /// at the tip, clean) is taken without a checkout only at that tip; a
    /// slot holding work is left as it is.
    #[test]
    fn a_warmed_slot_is_taken_at_its_tip_only_and_a_dirty_one_is_not_warmed() {
        let (tmp, g) = fixture();
        let dir = tmp.path().to_path_buf();
        let base = tip_of(&g, "main");
        let wt = wt_path(&g, "slot-0");
        assert!(g.warm_worktree("slot-0", &wt, &base, "ralph/warm").unwrap());
        assert_eq!(read(&wt, "a.txt"), "one\ntwo\nthree\n");
        assert_eq!(g.head_commit_of_worktree(&wt).unwrap(), Some(base.clone()));
        assert_eq!(g.resolve_branch_at_head(&wt).unwrap(), None, "detached");
        assert_eq!(
            g.branch_tip("ralph/warm").unwrap(),
            None,
            "scratch branch gone"
        );

        // The tip moved: not taken (the caller prepares it in full).
        write(&dir, "b.txt", "b\n");
        let moved = commit_all(&dir, "b");
        assert!(!g
            .start_warm_worktree("slot-0", &wt, "ralph/story-1.2", &moved)
            .unwrap());
        assert_eq!(g.branch_tip("ralph/story-1.2").unwrap(), None);
        // At its tip: on the story branch, at that tip, nothing else changed.
        assert!(g
            .start_warm_worktree("slot-0", &wt, "ralph/story-1.1", &base)
            .unwrap());
        assert_on_branch(&g, &wt, "ralph/story-1.1");
        assert_eq!(tip_of(&g, "ralph/story-1.1"), base);
        assert_eq!(porcelain(&wt), "");

        // Work left in the slot: not warmed, nothing touched.
        write(&wt, "a.txt", "edited\n");
        write(&wt, "new.txt", "new\n");
        let before = porcelain(&wt);
        assert!(!g
            .warm_worktree("slot-0", &wt, &moved, "ralph/warm")
            .unwrap());
        assert_eq!(porcelain(&wt), before);
        assert_on_branch(&g, &wt, "ralph/story-1.1");
        // Clean again: warmed at the new tip, ignored build output kept.
        git(&wt, &["checkout", "-q", "--", "a.txt"]);
        std::fs::remove_file(wt.join("new.txt")).unwrap();
        write(&wt, "target/cache", "warm\n");
        assert!(g
            .warm_worktree("slot-0", &wt, &moved, "ralph/warm")
            .unwrap());
        assert_eq!(read(&wt, "b.txt"), "b\n");
        assert_eq!(read(&wt, "target/cache"), "warm\n");
        assert_eq!(g.resolve_branch_at_head(&wt).unwrap(), None);
    }
}
