//! Keeping work: refs that hold an attempt's commits, its uncommitted
//! changes, and wherever the agent left its worktree's HEAD.

use super::*;

impl Git {
    /// Best of N (issue 36): keeps the commits of a racing candidate's
    /// `branch` that `target` does not have at `refname`. `false` when it
    /// committed nothing of its own (nothing to keep).
    pub(crate) fn keep_candidate(&self, branch: &str, target: &str, refname: &str) -> Result<bool> {
        let Some(base) = self.branch_tip(target)? else {
            return Ok(false);
        };
        if self.commits_ahead(branch, &base)? == 0 {
            return Ok(false);
        }
        self.save_ref(branch, refname)?;
        Ok(true)
    }

    /// Points `refname` (a full ref such as `refs/ralph/attempts/1.2/1`) at
    /// the tip of `branch`, overwriting it.
    pub(crate) fn save_ref(&self, branch: &str, refname: &str) -> Result<()> {
        let repo = self.repo()?;
        if let Some(tip) = tip(&repo, branch)? {
            repo.reference(refname, tip, true, &format!("ralph: save {branch}"))?;
        }
        Ok(())
    }

    /// Commits the uncommitted changes of the worktree at `path` (tracked
    /// edits, deletions and untracked files that are not ignored) onto its
    /// HEAD and points `refname` at that commit, without touching the
    /// worktree. `None` when there was nothing to keep.
    pub(crate) fn save_uncommitted(&self, path: &Path, refname: &str) -> Result<Option<Oid>> {
        let wrepo = self.open_slot(path)?;
        let mut opts = git2::StatusOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_ignored(false);
        let statuses = wrepo.statuses(Some(&mut opts))?;
        if statuses.is_empty() {
            return Ok(None);
        }
        let head = wrepo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let mut idx = git2::Index::new()?;
        if let Some(h) = &head {
            idx.read_tree(&h.tree()?)?;
        }
        let workdir = wrepo
            .workdir()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| path.to_path_buf());
        for st in statuses.iter() {
            let Ok(rel) = st.path().map(str::to_string) else {
                continue;
            };
            let full = workdir.join(&rel);
            let meta = std::fs::symlink_metadata(&full);
            match meta {
                Ok(m) if m.is_file() => {
                    use std::os::unix::fs::PermissionsExt;
                    let id = wrepo.blob_path(&full)?;
                    let mode = if m.permissions().mode() & 0o111 != 0 {
                        0o100755
                    } else {
                        0o100644
                    };
                    idx.add(&super::landing::smudged_entry(&rel, id, mode))?;
                }
                Ok(_) => {}
                Err(_) => {
                    let _ = idx.remove_path(Path::new(&rel));
                }
            }
        }
        let tree_id = idx.write_tree_to(&wrepo)?;
        let tree = wrepo.find_tree(tree_id)?;
        if head.as_ref().is_some_and(|h| h.tree_id() == tree_id) {
            return Ok(None);
        }
        let sig = signature(&self.repo()?)?;
        let parents: Vec<&git2::Commit<'_>> = head.iter().collect();
        let oid = wrepo.commit(
            None,
            &sig,
            &sig,
            "ralph: uncommitted changes left by an attempt",
            &tree,
            &parents,
        )?;
        wrepo.reference(refname, oid, true, "ralph: keep uncommitted work")?;
        Ok(Some(oid.to_string()))
    }

    /// Commits what the agent of a DONE attempt left uncommitted in the
    /// worktree at `path` onto `branch`, as `git add -A && git commit` would:
    /// tracked edits, deletions and new files that are not ignored, except the
    /// paths `skip` names (ralph's runtime files). The worktree's index is
    /// updated too, so the worktree is clean afterwards. Only when the
    /// worktree's HEAD is the branch's tip: work left on top of another
    /// commit is not the branch's (`LeftWork::OffBranch`; it stays under the
    /// ref `save_uncommitted` made).
    pub(crate) fn commit_left_work(
        &self,
        path: &Path,
        branch: &str,
        message: &str,
        skip: &dyn Fn(&str) -> bool,
    ) -> Result<LeftWork> {
        let mut wrepo = self.open_slot(path)?;
        // A merge the agent resolved but did not commit keeps its parents.
        let mut merged = Vec::new();
        let _ = wrepo.mergehead_foreach(|o| {
            merged.push(*o);
            true
        });
        let wrepo = wrepo;
        let refname = branch_ref(branch)?;
        let Some(tip) = tip(&wrepo, branch)? else {
            return Ok(LeftWork::OffBranch);
        };
        let head = wrepo.head().ok().and_then(|h| h.peel_to_commit().ok());
        if head.as_ref().map(git2::Commit::id) != Some(tip) {
            return Ok(LeftWork::OffBranch);
        }
        let parent = wrepo.find_commit(tip)?;
        let mut opts = git2::StatusOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_ignored(false);
        let mut files: Vec<String> = Vec::new();
        for st in wrepo.statuses(Some(&mut opts))?.iter() {
            let rel = String::from_utf8_lossy(st.path_bytes()).into_owned();
            if !skip(&rel) && !files.contains(&rel) {
                files.push(rel);
            }
        }
        if files.is_empty() {
            return Ok(LeftWork::Nothing);
        }
        let workdir = wrepo
            .workdir()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| path.to_path_buf());
        let mut idx = wrepo.index()?;
        let mut staged = Vec::with_capacity(files.len());
        for rel in files {
            match std::fs::symlink_metadata(workdir.join(&rel)) {
                Ok(m) if m.is_file() || m.file_type().is_symlink() => {
                    idx.add_path(Path::new(&rel))?;
                }
                // A directory here is a nested repository: not ours to stage.
                Ok(_) => continue,
                Err(_) => {
                    // Gone from disk: a deletion (and any conflict on it resolved).
                    let _ = idx.remove_path(Path::new(&rel));
                    let _ = idx.conflict_remove(Path::new(&rel));
                }
            }
            staged.push(rel);
        }
        let tree_id = idx.write_tree()?;
        idx.write()?;
        if tree_id == parent.tree_id() {
            return Ok(LeftWork::Nothing);
        }
        // HEAD may be detached at the tip, or name another branch at it:
        // the commit belongs on the story branch.
        let head_ref = wrepo.find_reference("HEAD")?;
        if head_ref.symbolic_target()? != Some(refname.as_str()) {
            wrepo.set_head(&refname)?;
        }
        let others = merged
            .iter()
            .map(|o| wrepo.find_commit(*o))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let parents: Vec<&git2::Commit<'_>> = std::iter::once(&parent).chain(&others).collect();
        let tree = wrepo.find_tree(tree_id)?;
        // Identity and signing are the user's (the main repository's
        // config), never what the agent could write in its slot.
        let main = self.repo()?;
        let sig = signature(&main)?;
        // Through HEAD, libgit2 moves the branch only if it is still at
        // `parent`: a compare-and-swap.
        let oid =
            super::sign::commit_as(&wrepo, &main, Some("HEAD"), &sig, message, &tree, &parents)?;
        if !merged.is_empty() {
            wrepo.cleanup_state()?;
        }
        staged.sort();
        Ok(LeftWork::Committed {
            commit: oid.to_string(),
            files: staged,
        })
    }

    /// After an attempt, makes `branch` hold what the agent committed even if
    /// it left the worktree at `path` on another branch or a detached HEAD:
    /// when the worktree's HEAD descends from both `base` and the branch, the
    /// branch is fast-forwarded to it; when they diverged, HEAD's commit is
    /// kept at `save_as` and the branch is left alone.
    pub(crate) fn adopt_worktree_head(
        &self,
        path: &Path,
        branch: &str,
        base: &Oid,
        save_as: &str,
    ) -> Result<Adopted> {
        let repo = self.repo()?;
        let Some(head) = self.head_commit_of_worktree(path)? else {
            return Ok(Adopted::Unchanged);
        };
        let head = parse_oid(&head)?;
        let base = parse_oid(base)?;
        let Some(b) = tip(&repo, branch)? else {
            return Ok(Adopted::Unchanged);
        };
        if head == b || head == base || repo.graph_descendant_of(b, head)? {
            return Ok(Adopted::Unchanged);
        }
        let descends_from_base = repo.graph_descendant_of(head, base)?;
        if descends_from_base && (b == base || repo.graph_descendant_of(head, b)?) {
            repo.reference(
                &branch_ref(branch)?,
                head,
                true,
                "ralph: adopt the agent's commits",
            )?;
            return Ok(Adopted::FastForwarded {
                to: head.to_string(),
            });
        }
        repo.reference(save_as, head, true, "ralph: keep the agent's HEAD")?;
        Ok(Adopted::Saved {
            refname: save_as.to_string(),
        })
    }
}
