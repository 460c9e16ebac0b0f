//! Landed work set back (issue 21's defence, incremental since issue 34):
//! which commits to reach the target since the last check put a landed
//! story's paths back to their content from before its merge. Split from
//! `land.rs` (the landing itself) by concern; each landing's changes it
//! reads through `Git::changes_of` (`land.rs`, read once per run).

use super::land::{blob_at, changed_paths};
use super::*;

impl Git {
    /// The work of the run's `landings` (story, base, merge; all of them,
    /// in landing order) that a commit to reach `target` since the last
    /// call set back to its content from before the story's merge, with
    /// that commit. Incremental: each call reads only the commits that
    /// reached the target since the one before (first parents, each against
    /// its first parent) and, of each, only the paths it changed; what every
    /// landing changed is read once, when it is first seen (`check`). A
    /// landing's paths count from its merge on: a commit before it sets
    /// nothing of its back.
    pub(crate) fn reverted_since(
        &self,
        target: &str,
        landings: &[(String, Oid, Oid)],
        check: &mut RevertCheck,
    ) -> Result<Vec<Reverted>> {
        let repo = self.repo()?;
        let Some(tip_oid) = tip(&repo, target)? else {
            return Ok(Vec::new());
        };
        for (story, base, merge) in landings.get(check.taken..).unwrap_or_default() {
            let (base, merge) = (parse_oid(base)?, parse_oid(merge)?);
            check.seen.get_or_insert(base);
            let changes = self.changes_of(&repo, base, merge)?;
            check.waiting.push((merge, story.clone(), changes.to_vec()));
        }
        check.taken = check.taken.max(landings.len());
        let Some(seen) = check.seen else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        if seen != tip_oid {
            let mut walk = repo.revwalk()?;
            walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)?;
            walk.simplify_first_parent()?;
            walk.push(tip_oid)?;
            walk.hide(seen)?;
            for oid in walk {
                let oid = oid?;
                if let Some(i) = check.waiting.iter().position(|(m, ..)| *m == oid) {
                    // A story's own merge is its work, not a revert.
                    let (_, story, changes) = check.waiting.remove(i);
                    check.take(story, changes);
                    continue;
                }
                out.extend(check.set_back_by(&repo, oid)?);
            }
        }
        // A merge the walk did not pass (history rewritten under the run):
        // its paths count from here on.
        for (_, story, changes) in std::mem::take(&mut check.waiting) {
            check.take(story, changes);
        }
        check.seen = Some(tip_oid);
        Ok(out)
    }
}

/// A landed story's path that the target's tip set back to its content
/// from before the story's merge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reverted {
    pub(crate) story: String,
    pub(crate) path: String,
    /// The commit that set it back, and its subject.
    pub(crate) commit: Oid,
    pub(crate) subject: String,
}

/// How far the run's check of landed work has read (`Git::reverted_since`),
/// and what it found.
#[derive(Debug, Default)]
pub(crate) struct RevertCheck {
    /// Landed work found set back, each said once.
    pub(crate) said: Vec<Reverted>,
    /// The target's tip at the last check: the commits after it are new.
    seen: Option<git2::Oid>,
    /// How many of the run's landings have been read.
    taken: usize,
    /// Landings read whose merge the walk has not passed yet.
    waiting: Vec<(git2::Oid, String, Vec<landing::PathChange>)>,
    /// Each path a landed story changed: the story and its change there.
    paths: std::collections::HashMap<String, Vec<(String, landing::PathChange)>>,
}

impl RevertCheck {
    fn take(&mut self, story: String, changes: Vec<landing::PathChange>) {
        for c in changes.into_iter().filter(|c| c.before != c.after) {
            self.paths
                .entry(c.path.clone())
                .or_default()
                .push((story.clone(), c));
        }
    }

    /// The landed work commit `oid` set back: of the paths it changed
    /// against its first parent, those a landed story changed whose content
    /// is now that story's "before".
    fn set_back_by(&self, repo: &git2::Repository, oid: git2::Oid) -> Result<Vec<Reverted>> {
        let c = repo.find_commit(oid)?;
        let Ok(parent) = c.parent(0) else {
            return Ok(Vec::new());
        };
        let tree = c.tree()?;
        let mut hit: Vec<(&str, Vec<landing::PathChange>)> = Vec::new();
        for path in changed_paths(repo, &parent.tree()?, &tree)? {
            for (story, change) in self.paths.get(&path).into_iter().flatten() {
                match hit.iter_mut().find(|(s, _)| s == story) {
                    Some((_, changes)) => changes.push(change.clone()),
                    None => hit.push((story, vec![change.clone()])),
                }
            }
        }
        let subject = c.summary().ok().flatten().unwrap_or("").to_string();
        let mut out = Vec::new();
        for (story, changes) in hit {
            for path in landing::reverted_paths(&changes, |p| blob_at(&tree, p)) {
                out.push(Reverted {
                    story: story.to_string(),
                    path,
                    commit: oid.to_string(),
                    subject: subject.clone(),
                });
            }
        }
        Ok(out)
    }
}
