//! Fix-ups: a story's finished work merged onto the target's new tip in its
//! slot worktree, for the agent to finish: conflicted files with markers and
//! the merge in progress, or (validation) the merged tree committed.

use super::*;

/// How `start_fixup` left the worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FixupStart {
    /// The work merged cleanly and ralph committed the merge on the branch.
    Committed { commit: Oid },
    /// The merge is in progress (`MERGE_HEAD` set): the agent's `git commit`
    /// concludes it. `conflicts` are the files left with markers.
    Merging { conflicts: Vec<String> },
}

/// Conflict labels and the merge's message.
#[derive(Debug, Clone)]
pub(crate) struct FixupLabels<'a> {
    /// The side of the target's tip.
    pub(crate) ours: &'a str,
    /// The side of the story's work.
    pub(crate) theirs: &'a str,
    pub(crate) message: &'a str,
}

impl Git {
    /// Merges `work` (a ref keeping the story's finished work) into the
    /// worktree at `path`, a slot freshly prepared on its story branch at
    /// the target's tip. A clean merge is committed by ralph when
    /// `commit_clean` says so; otherwise the merge is left in progress as
    /// `git merge` leaves it (index stages, diff3 markers, `MERGE_HEAD`,
    /// `MERGE_MSG`), so the agent resolves and commits with plain git.
    /// Only the slot worktree is written; never the main checkout.
    pub(crate) fn start_fixup(
        &self,
        path: &Path,
        work: &str,
        labels: &FixupLabels<'_>,
        commit_clean: bool,
    ) -> Result<FixupStart> {
        self.refuse_main_workdir(path)?;
        let wrepo = self.open_slot(path)?;
        if !wrepo.is_worktree() {
            return Err(GitError::Other(format!(
                "{}: not a linked worktree; refusing to merge there",
                path.display()
            )));
        }
        let head = wrepo.head()?.peel_to_commit()?;
        let theirs = wrepo.revparse_single(work)?.peel_to_commit()?;
        if theirs.id() == head.id() || wrepo.graph_descendant_of(head.id(), theirs.id())? {
            return Err(GitError::Other(format!(
                "{work} is already part of the target: nothing to fix up"
            )));
        }
        let mut merged = wrepo.merge_commits(&head, &theirs, None)?;
        if commit_clean && !merged.has_conflicts() {
            let tree = wrepo.find_tree(merged.write_tree_to(&wrepo)?)?;
            // Identity and signing are the user's (the main repository's
            // config), never what a slot could hold.
            let main = self.repo()?;
            let sig = signature(&main)?;
            // HEAD follows the story branch: the branch moves with it.
            let oid = super::sign::commit_as(
                &wrepo,
                &main,
                Some("HEAD"),
                &sig,
                labels.message,
                &tree,
                &[&head, &theirs],
            )?;
            force_checkout(&wrepo, &wrepo.find_object(oid, None)?)?;
            return Ok(FixupStart::Committed {
                commit: oid.to_string(),
            });
        }
        let annotated = wrepo.find_annotated_commit(theirs.id())?;
        let mut co = git2::build::CheckoutBuilder::new();
        co.safe()
            .allow_conflicts(true)
            .conflict_style_diff3(true)
            .our_label(labels.ours)
            .their_label(labels.theirs)
            .ancestor_label("base");
        wrepo.merge(&[&annotated], None, Some(&mut co))?;
        std::fs::write(wrepo.path().join("MERGE_MSG"), labels.message)?;
        let mut conflicts = Vec::new();
        for c in wrepo.index()?.conflicts()? {
            let c = c?;
            if let Some(e) = [c.our, c.their, c.ancestor].into_iter().flatten().next() {
                conflicts.push(String::from_utf8_lossy(&e.path).into_owned());
            }
        }
        conflicts.sort();
        conflicts.dedup();
        Ok(FixupStart::Merging { conflicts })
    }

    /// Stories landed on `target` since `work` branched off it, oldest
    /// first, with the title their landing commit carries.
    pub(crate) fn landed_since(&self, work: &str, target: &str) -> Result<Vec<(String, String)>> {
        let repo = self.repo()?;
        let tip = tip(&repo, target)?.ok_or_else(|| missing_branch(target))?;
        let w = repo.revparse_single(work)?.peel_to_commit()?.id();
        let mut walk = repo.revwalk()?;
        walk.simplify_first_parent()?;
        walk.push(tip)?;
        walk.hide(w)?;
        let mut newest_first = Vec::new();
        for oid in walk {
            let commit = repo.find_commit(oid?)?;
            let message = String::from_utf8_lossy(commit.message_bytes()).into_owned();
            if let Some(landed) = crate::project::landed_story(&message) {
                newest_first.push(landed);
            }
        }
        newest_first.reverse();
        Ok(newest_first)
    }

    /// The files among `paths` that still hold a conflict marker line
    /// (`<<<<<<<` or `>>>>>>>`) at the tip of `branch`.
    pub(crate) fn conflict_markers(&self, branch: &str, paths: &[String]) -> Result<Vec<String>> {
        let repo = self.repo()?;
        let Some(t) = tip(&repo, branch)? else {
            return Ok(Vec::new());
        };
        let tree = repo.find_commit(t)?.tree()?;
        let mut out = Vec::new();
        for p in paths {
            let Ok(entry) = tree.get_path(Path::new(p)) else {
                continue;
            };
            let Ok(blob) = repo.find_blob(entry.id()) else {
                continue;
            };
            let marked = blob.content().split(|&b| b == b'\n').any(|line| {
                (line.starts_with(b"<<<<<<<") || line.starts_with(b">>>>>>>"))
                    && matches!(line.get(7), None | Some(b' ') | Some(b'\r'))
            });
            if marked {
                out.push(p.clone());
            }
        }
        Ok(out)
    }
}
