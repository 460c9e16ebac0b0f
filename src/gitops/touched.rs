//! What an agent has changed so far in its worktree, for conflict-aware
//! dispatch: read-only, safe beside the agent's own git (nothing is locked
//! or written, the index included), and beside a sealed agent: nothing of
//! its admin dir but HEAD is read, and that as data.

use super::*;

impl Git {
    /// Repository paths the worktree at `path`, on `branch`, changed since
    /// it left `target` (their merge base): its commits, staged and
    /// unstaged edits, deletions and untracked files that are not ignored
    /// (a new untracked directory as one `dir/` entry, which covers what
    /// is inside it: an unignored `node_modules/` stays one entry). Sorted.
    /// `None` while the worktree is on another branch (a slot still being
    /// prepared for the story).
    pub(crate) fn changed_since(
        &self,
        path: &Path,
        branch: &str,
        target: &str,
    ) -> Result<Option<Vec<String>>> {
        // The agent is running: its admin dir is read as data only (a FIFO
        // put there must not hang this thread), and the worktree is
        // compared with the tree alone, not through the agent's index.
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| GitError::Other(format!("{}: not a worktree", path.display())))?;
        let Some(head) = super::slot::read_text(&self.admin_dir(name)?.join("HEAD")) else {
            return Ok(None);
        };
        if head.trim().strip_prefix("ref:").map(str::trim) != Some(branch_ref(branch)?.as_str()) {
            return Ok(None);
        }
        let wrepo = git2::Repository::open_bare(&self.git_dir)?;
        wrepo.set_workdir(path, false)?;
        let Some(head) = tip(&wrepo, branch)? else {
            return Ok(None);
        };
        let Some(tip) = tip(&wrepo, target)? else {
            return Ok(Some(Vec::new()));
        };
        let base = wrepo.merge_base(head, tip)?;
        let tree = wrepo.find_commit(base)?.tree()?;
        let mut opts = git2::DiffOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(false)
            .include_ignored(false);
        let diff = wrepo.diff_tree_to_workdir(Some(&tree), Some(&mut opts))?;
        let mut out: Vec<String> = Vec::new();
        for d in diff.deltas() {
            for f in [d.old_file(), d.new_file()] {
                if let Some(p) = f.path() {
                    out.push(p.to_string_lossy().into_owned());
                }
            }
        }
        out.sort();
        out.dedup();
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gitops::tests::git;

    #[test]
    fn committed_staged_unstaged_and_untracked_changes_count() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("README.md"), "readme\n").unwrap();
        std::fs::write(dir.join(".gitignore"), "target/\n").unwrap();
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-qm", "init"]);
        let g = Git::open(dir).unwrap();
        let wt = dir.join("wt");
        git(dir, &["worktree", "add", "-q", "-b", "ralph/story-1", "wt"]);
        let changed = |branch: &str| g.changed_since(&wt, branch, "main").unwrap();
        assert_eq!(changed("ralph/story-1"), Some(vec![]));
        assert_eq!(changed("ralph/story-2"), None, "another story's slot");
        std::fs::write(wt.join("committed.txt"), "c\n").unwrap();
        git(&wt, &["add", "committed.txt"]);
        git(&wt, &["commit", "-qm", "c"]);
        std::fs::write(wt.join("staged.txt"), "s\n").unwrap();
        git(&wt, &["add", "staged.txt"]);
        std::fs::write(wt.join("README.md"), "edited\n").unwrap();
        std::fs::create_dir_all(wt.join("new/dir")).unwrap();
        std::fs::write(wt.join("new/dir/untracked.txt"), "u\n").unwrap();
        std::fs::create_dir_all(wt.join("target")).unwrap();
        std::fs::write(wt.join("target/ignored.o"), "o\n").unwrap();
        // The target moving on (other stories landing) is not this work.
        std::fs::write(dir.join("landed.txt"), "l\n").unwrap();
        git(dir, &["add", "landed.txt"]);
        git(dir, &["commit", "-qm", "landed"]);
        assert_eq!(
            changed("ralph/story-1").unwrap(),
            ["README.md", "committed.txt", "new/", "staged.txt"]
        );
    }
}
