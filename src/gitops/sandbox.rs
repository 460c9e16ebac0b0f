//! The story branch of an attempt confined by bubblewrap (issue 22).
//!
//! Inside the sandbox `.git` is read-only, and the real
//! `refs/heads/ralph/` (every story's branch) is out of reach: the agent
//! commits onto a private stand-in, `<git dir>/ralph-sandbox/<slot>/refs/`,
//! bound over `refs/heads/ralph/` (and `.../logs/` over its reflog
//! directory), holding only its own branch's ref. After the attempt — or,
//! when ralph was killed meanwhile, at the next run's start — `collect`
//! moves the real branch to what the agent committed (compare-and-swap
//! from the tip it started at); a branch the agent made beside it is kept
//! under `refs/ralph/sandbox/`. Until then the stand-in is the only ref to
//! the agent's commits, so it is removed only once they are on real refs.

use std::path::{Path, PathBuf};

use super::{Git, GitError, Result};

/// The private ref directories of one sandboxed attempt: each `(source,
/// destination)` pair is bound read-write over the real directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SandboxRefs {
    pub(crate) overlays: Vec<(PathBuf, PathBuf)>,
}

/// What `collect` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Collected {
    /// No stand-in (the attempt was not confined).
    Nothing,
    /// The branch is where the agent left it (`moved`: it committed).
    Branch {
        branch: String,
        moved: bool,
        /// Other branches it made, kept under these refs.
        kept: Vec<String>,
    },
}

const DIR: &str = "ralph-sandbox";

impl Git {
    fn sandbox_dir(&self, slot: &str) -> Result<PathBuf> {
        if slot.is_empty() || slot.contains(['/', '\\', '\0']) || slot.starts_with('.') {
            return Err(GitError::Other(format!("invalid slot name {slot:?}")));
        }
        Ok(self.git_dir.join(DIR).join(slot))
    }

    /// Makes the stand-in for `branch` in `slot`, at the branch's tip. The
    /// real directories it covers are made when missing (a packed branch
    /// has none), since a mount needs somewhere to go.
    pub(crate) fn sandbox_refs_prepare(&self, slot: &str, branch: &str) -> Result<SandboxRefs> {
        // Left by a run that was killed: its commits go home first.
        self.sandbox_refs_collect(slot)?;
        let tip = self
            .branch_tip(branch)?
            .ok_or_else(|| GitError::Other(format!("branch {branch} does not exist")))?;
        let (parent, leaf) = split_branch(branch)?;
        let dir = self.sandbox_dir(slot)?;
        let refs = dir.join("refs");
        let logs = dir.join("logs");
        std::fs::create_dir_all(&refs)?;
        std::fs::create_dir_all(&logs)?;
        std::fs::write(refs.join(leaf), format!("{tip}\n"))?;
        std::fs::write(dir.join("start"), format!("{branch}\n{tip}\n"))?;
        let real_refs = self.git_dir.join("refs/heads").join(parent);
        let real_logs = self.git_dir.join("logs/refs/heads").join(parent);
        std::fs::create_dir_all(&real_refs)?;
        std::fs::create_dir_all(&real_logs)?;
        Ok(SandboxRefs {
            overlays: vec![(refs, real_refs), (logs, real_logs)],
        })
    }

    /// Brings the agent's commits from `slot`'s stand-in onto the real
    /// story branch, then removes the stand-in.
    pub(crate) fn sandbox_refs_collect(&self, slot: &str) -> Result<Collected> {
        let dir = self.sandbox_dir(slot)?;
        let Ok(start) = std::fs::read_to_string(dir.join("start")) else {
            if dir.exists() {
                std::fs::remove_dir_all(&dir)?;
            }
            return Ok(Collected::Nothing);
        };
        let mut lines = start.lines();
        let (Some(branch), Some(base)) = (lines.next(), lines.next()) else {
            std::fs::remove_dir_all(&dir)?;
            return Ok(Collected::Nothing);
        };
        let (branch, base) = (branch.to_string(), base.to_string());
        let (_, leaf) = split_branch(&branch)?;
        let repo = self.repo()?;
        let mut moved = false;
        let mut kept = Vec::new();
        for (name, oid) in loose_refs(&dir.join("refs")) {
            let Ok(id) = git2::Oid::from_str(&oid) else {
                continue;
            };
            if repo.find_commit(id).is_err() {
                continue;
            }
            if name == leaf {
                if oid != base {
                    let refname = format!("refs/heads/{branch}");
                    let base_id = git2::Oid::from_str(&base)?;
                    repo.reference_matching(
                        &refname,
                        id,
                        true,
                        base_id,
                        "ralph: the commits of a sandboxed attempt",
                    )?;
                    moved = true;
                }
            } else {
                let short = &oid[..oid.len().min(12)];
                let keep = format!("refs/ralph/sandbox/{slot}/{name}-{short}");
                repo.reference(&keep, id, true, "ralph: a branch a sandboxed agent made")?;
                kept.push(keep);
            }
        }
        std::fs::remove_dir_all(&dir)?;
        Ok(Collected::Branch {
            branch,
            moved,
            kept,
        })
    }

    /// `sandbox_refs_collect` for every slot a killed run left a stand-in in.
    pub(crate) fn sandbox_refs_collect_all(&self) -> Vec<(String, Result<Collected>)> {
        let Ok(entries) = std::fs::read_dir(self.git_dir.join(DIR)) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .map(|slot| {
                let r = self.sandbox_refs_collect(&slot);
                (slot, r)
            })
            .collect()
    }
}

/// `ralph/story-1.1` → (`ralph`, `story-1.1`).
fn split_branch(branch: &str) -> Result<(&str, &str)> {
    branch
        .rsplit_once('/')
        .filter(|(p, l)| !p.is_empty() && !l.is_empty() && !l.starts_with('.'))
        .ok_or_else(|| GitError::Other(format!("branch {branch} has no directory of its own")))
}

/// The loose refs under `dir` (relative names, their hex values); files
/// that are not a ref (a lock left behind) are skipped.
fn loose_refs(dir: &Path) -> Vec<(String, String)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            let oid = text.trim();
            if oid.len() == 40 && oid.bytes().all(|b| b.is_ascii_hexdigit()) {
                if let Ok(rel) = p.strip_prefix(base) {
                    out.push((rel.display().to_string(), oid.to_string()));
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gitops::tests::git;
    use crate::gitops::Oid;

    fn repo_with_commit() -> (tempfile::TempDir, Git) {
        let tmp = tempfile::tempdir().unwrap();
        git(tmp.path(), &["init", "-q", "-b", "main"]);
        git(tmp.path(), &["commit", "-q", "--allow-empty", "-m", "init"]);
        let g = Git::open(tmp.path()).unwrap();
        (tmp, g)
    }

    #[test]
    fn the_agents_commit_on_the_stand_in_moves_the_real_branch() {
        let (_dir, g) = repo_with_commit();
        let tip: Oid = g.branch_tip("main").unwrap().unwrap();
        g.ensure_branch("ralph/story-1", &tip).unwrap();
        let refs = g.sandbox_refs_prepare("slot-0", "ralph/story-1").unwrap();
        let (stand_in, real) = &refs.overlays[0];
        assert!(real.ends_with("refs/heads/ralph"));
        assert_eq!(
            std::fs::read_to_string(stand_in.join("story-1"))
                .unwrap()
                .trim(),
            tip
        );
        // The agent committed: a commit that exists, off no real branch.
        let dir = g.workdir.clone();
        let tree = git(&dir, &["rev-parse", "HEAD^{tree}"]);
        let new = git(
            &dir,
            &["commit-tree", tree.trim(), "-p", &tip, "-m", "agent"],
        )
        .trim()
        .to_string();
        std::fs::write(stand_in.join("story-1"), format!("{new}\n")).unwrap();
        std::fs::write(stand_in.join("side"), format!("{new}\n")).unwrap();
        std::fs::write(stand_in.join("story-1.lock"), "junk").unwrap();
        let c = g.sandbox_refs_collect("slot-0").unwrap();
        let Collected::Branch { moved, kept, .. } = c else {
            panic!("{c:?}")
        };
        assert!(moved);
        assert_eq!(kept.len(), 1);
        assert!(kept[0].starts_with("refs/ralph/sandbox/slot-0/side-"));
        assert_eq!(g.branch_tip("ralph/story-1").unwrap().unwrap(), new);
        assert!(!stand_in.exists());
        assert_eq!(
            g.sandbox_refs_collect("slot-0").unwrap(),
            Collected::Nothing
        );
    }

    #[test]
    fn nothing_committed_leaves_the_branch() {
        let (_dir, g) = repo_with_commit();
        let tip: Oid = g.branch_tip("main").unwrap().unwrap();
        g.ensure_branch("ralph/story-2", &tip).unwrap();
        g.sandbox_refs_prepare("slot-1", "ralph/story-2").unwrap();
        let all = g.sandbox_refs_collect_all();
        assert_eq!(all.len(), 1);
        assert!(matches!(
            all[0].1,
            Ok(Collected::Branch { moved: false, .. })
        ));
        assert_eq!(g.branch_tip("ralph/story-2").unwrap().unwrap(), tip);
    }

    #[test]
    fn branch_names_need_a_directory() {
        assert_eq!(split_branch("ralph/story-1").unwrap(), ("ralph", "story-1"));
        assert!(split_branch("main").is_err());
    }
}
