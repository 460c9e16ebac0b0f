//! The story branch and the object store of an attempt confined by
//! bubblewrap (issues 22 and 31).
//!
//! Inside the sandbox `.git` is read-only, and the real
//! `refs/heads/ralph/` (every story's branch) is out of reach: the agent
//! commits onto a private stand-in, `<git dir>/ralph-sandbox/<slot>/refs/`,
//! bound over `refs/heads/ralph/` (and `.../logs/` over its reflog
//! directory), holding only its own branch's ref. Its objects go to a
//! private object directory too, `.../<slot>/objects/`, bound over
//! `objects/`; the repository's own objects are seen read-only at
//! `.../<slot>/base-objects/` through git's alternates, so an agent that
//! deletes objects or packs deletes only its own.
//!
//! After the attempt — or, when ralph was killed meanwhile, at the next
//! run's start — `collect` first puts the slot's git files right
//! (`slot_files`), then copies the attempt's objects into the repository
//! (each read and hash-checked by libgit2; nothing else of the directory,
//! alternates included, is read), then moves the real branch to what the
//! agent committed (compare-and-swap from the tip it started at); a branch
//! the agent made beside it is kept under `refs/ralph/sandbox/`. Until then
//! the stand-in is the only ref to the agent's commits, so it is removed
//! only once they are on real refs. Everything read there is read as data
//! (`slot::read_data`): a FIFO or a link is a finding, never a hang.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::slot::{read_data, SMALL};
use super::{Git, GitError, Result};

/// The private directories of one sandboxed attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SandboxRefs {
    /// `(source, destination)`: bound read-write over the real directory.
    pub(crate) overlays: Vec<(PathBuf, PathBuf)>,
    /// `(source, destination)`: bound read-only (the repository's objects).
    pub(crate) ro_overlays: Vec<(PathBuf, PathBuf)>,
    /// Files bound read-only over themselves: the where-files.
    pub(crate) ro_files: Vec<PathBuf>,
}

/// What `collect` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Collected {
    /// No stand-in (the attempt was not confined).
    Nothing,
    /// A slot with no branch's stand-in (a validation command's).
    Checked { findings: Vec<String> },
    /// The branch is where the agent left it (`moved`: it committed).
    Branch {
        branch: String,
        moved: bool,
        /// Other branches it made, kept under these refs.
        kept: Vec<String>,
        /// What the agent left that ralph did not take as git's (a FIFO, a
        /// link, a where-file rewritten, a corrupt object): each undone.
        findings: Vec<String>,
    },
}

impl Collected {
    pub(crate) fn findings(&self) -> &[String] {
        match self {
            Collected::Nothing => &[],
            Collected::Checked { findings } | Collected::Branch { findings, .. } => findings,
        }
    }
}

const DIR: &str = "ralph-sandbox";

impl Git {
    fn sandbox_dir(&self, slot: &str) -> Result<PathBuf> {
        if slot.is_empty() || slot.contains(['/', '\\', '\0']) || slot.starts_with('.') {
            return Err(GitError::Other(format!("invalid slot name {slot:?}")));
        }
        Ok(self.git_dir.join(DIR).join(slot))
    }

    /// Makes the private directories of slot `name` (worktree `work`): its
    /// object directory, and with a `branch` the stand-in for that branch
    /// at its tip. The real directories they cover are made when missing
    /// (a packed branch has none), since a mount needs somewhere to go.
    pub(crate) fn sandbox_prepare(
        &self,
        slot: &str,
        work: &Path,
        branch: Option<&str>,
    ) -> Result<SandboxRefs> {
        // Left by a run that was killed: its commits go home first.
        self.sandbox_refs_collect(slot)?;
        let dir = self.sandbox_dir(slot)?;
        let objects = dir.join("objects");
        let base = dir.join("base-objects");
        std::fs::create_dir_all(objects.join("info"))?;
        std::fs::create_dir_all(objects.join("pack"))?;
        std::fs::create_dir_all(&base)?;
        // Read by git inside the sandbox only; ralph never reads it back.
        std::fs::write(
            objects.join("info/alternates"),
            format!("{}\n", base.display()),
        )?;
        std::fs::write(dir.join("work"), format!("{}\n", work.display()))?;
        let mut out = SandboxRefs {
            overlays: vec![(objects, self.git_dir.join("objects"))],
            ro_overlays: vec![(self.git_dir.join("objects"), base)],
            ro_files: Vec::new(),
        };
        let admin = self.admin_dir(slot)?;
        for f in [
            admin.join("gitdir"),
            admin.join("commondir"),
            work.join(".git"),
        ] {
            if std::fs::symlink_metadata(&f).is_ok_and(|m| m.is_file()) {
                out.ro_files.push(f);
            }
        }
        let Some(branch) = branch else {
            return Ok(out);
        };
        let tip = self
            .branch_tip(branch)?
            .ok_or_else(|| GitError::Other(format!("branch {branch} does not exist")))?;
        let (parent, leaf) = split_branch(branch)?;
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
        out.overlays.push((refs, real_refs));
        out.overlays.push((logs, real_logs));
        Ok(out)
    }

    /// Puts slot `slot`'s git files right, brings the attempt's objects
    /// into the repository and its commits from the stand-in onto the real
    /// story branch, then removes the slot's private directories.
    pub(crate) fn sandbox_refs_collect(&self, slot: &str) -> Result<Collected> {
        let dir = self.sandbox_dir(slot)?;
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                super::worktree::remove_path(&dir)?;
                return Ok(Collected::Nothing);
            }
            Err(_) => return Ok(Collected::Nothing),
        }
        let mut findings = Vec::new();
        let text = |name: &str| {
            read_data(&dir.join(name), SMALL)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
        };
        if let Some(work) = text("work") {
            let work = PathBuf::from(work.trim_end_matches('\n'));
            findings.extend(self.slot_files(slot, &work, true)?);
        }
        let broken = self.import_objects(&dir.join("objects"), &mut findings)?;
        let start = text("start");
        let mut lines = start.as_deref().unwrap_or_default().lines();
        let (Some(branch), Some(base)) = (lines.next(), lines.next()) else {
            std::fs::remove_dir_all(&dir)?;
            return Ok(Collected::Checked { findings });
        };
        let (branch, base) = (branch.to_string(), base.to_string());
        let (_, leaf) = split_branch(&branch)?;
        let repo = self.repo()?;
        let mut moved = false;
        let mut kept = Vec::new();
        for (name, oid) in loose_refs(&dir.join("refs"), &mut findings) {
            let Ok(id) = git2::Oid::from_str(&oid) else {
                continue;
            };
            if repo.find_commit(id).is_err() {
                findings.push(format!("ref {name} names {oid}, which is no commit here"));
                continue;
            }
            if broken.contains(&id) {
                findings.push(format!(
                    "ref {name} names {oid}, whose history misses objects; not taken"
                ));
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
            findings,
        })
    }

    /// Copies the objects in the attempt's object directory `objects` into
    /// the repository: loose objects and packs only, each read (inflated,
    /// its hash checked) by libgit2 from a database of that directory
    /// alone. Its `info/` (alternates, commit-graph) is never read, and
    /// anything that is not a regular file is a finding. The work is what
    /// the agent wrote, never the repository's size: objects the
    /// repository has are skipped. Returns the copied objects that name
    /// an object the repository lacks, directly or through other copied
    /// ones (or do not parse): no ref is moved onto one, so the
    /// repository's refs stay connected (`git fsck --connectivity-only`).
    fn import_objects(
        &self,
        objects: &Path,
        findings: &mut Vec<String>,
    ) -> Result<HashSet<git2::Oid>> {
        if !std::fs::symlink_metadata(objects).is_ok_and(|m| m.is_dir()) {
            return Ok(HashSet::new());
        }
        super::worktree::remove_path(&objects.join("info"))?;
        for e in std::fs::read_dir(objects)?.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            let t = e.file_type()?;
            let ours = t.is_dir()
                && (name == "pack"
                    || (name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit())));
            if !ours {
                if !t.is_dir() {
                    findings.push(format!(
                        "{}: not an object directory's entry; removed",
                        path.display()
                    ));
                }
                super::worktree::remove_path(&path)?;
                continue;
            }
            for f in std::fs::read_dir(&path)?.flatten() {
                let ft = f.file_type()?;
                if !ft.is_file() {
                    findings.push(format!(
                        "{}: not a regular file; removed",
                        f.path().display()
                    ));
                    super::worktree::remove_path(&f.path())?;
                }
            }
        }
        let Some(dir) = objects.to_str() else {
            return Ok(HashSet::new());
        };
        let theirs = git2::Odb::new()?;
        theirs.add_disk_alternate(dir)?;
        let repo = self.repo()?;
        let ours = repo.odb()?;
        let mut ids = Vec::new();
        theirs.foreach(|id| {
            ids.push(*id);
            true
        })?;
        let mut copied = Vec::new();
        for id in ids {
            if ours.exists(id) {
                continue;
            }
            let obj = match theirs.read(id) {
                Ok(o) => o,
                Err(e) => {
                    findings.push(format!(
                        "object {id}: unreadable ({}); left out",
                        e.message()
                    ));
                    continue;
                }
            };
            let written = ours.write(obj.kind(), obj.data())?;
            if written != id {
                findings.push(format!("object {id}: its content hashes to {written}"));
            }
            copied.push(written);
        }
        Ok(incomplete(&repo, &copied))
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

/// Of the objects `new` (just copied in), those that do not parse or name
/// an object `repo` lacks, directly or through another of `new`. Only the
/// new objects are read: what the repository had is whole already.
fn incomplete(repo: &git2::Repository, new: &[git2::Oid]) -> HashSet<git2::Oid> {
    let mut broken = HashSet::new();
    let Ok(odb) = repo.odb() else {
        return new.iter().copied().collect();
    };
    let mut links: HashMap<git2::Oid, Vec<git2::Oid>> = HashMap::new();
    for &id in new {
        let Ok(obj) = repo.find_object(id, None) else {
            broken.insert(id);
            continue;
        };
        let named: Option<Vec<git2::Oid>> = match obj.kind() {
            Some(git2::ObjectType::Commit) => obj
                .as_commit()
                .map(|c| std::iter::once(c.tree_id()).chain(c.parent_ids()).collect()),
            Some(git2::ObjectType::Tree) => obj.as_tree().map(|t| {
                t.iter()
                    // A submodule's commit lives in another repository.
                    .filter(|e| e.kind() != Some(git2::ObjectType::Commit))
                    .map(|e| e.id())
                    .collect()
            }),
            Some(git2::ObjectType::Tag) => obj.as_tag().map(|t| vec![t.target_id()]),
            _ => Some(Vec::new()),
        };
        match named {
            // The new objects are in the repository already, checked or not.
            Some(named) if named.iter().all(|n| odb.exists(*n)) => {
                links.insert(id, named);
            }
            _ => {
                broken.insert(id);
            }
        }
    }
    // What names a broken object is broken too.
    loop {
        let more: Vec<git2::Oid> = links
            .iter()
            .filter(|(id, named)| !broken.contains(*id) && named.iter().any(|n| broken.contains(n)))
            .map(|(id, _)| *id)
            .collect();
        if more.is_empty() {
            return broken;
        }
        broken.extend(more);
    }
}

/// `ralph/story-1.1` → (`ralph`, `story-1.1`).
fn split_branch(branch: &str) -> Result<(&str, &str)> {
    branch
        .rsplit_once('/')
        .filter(|(p, l)| !p.is_empty() && !l.is_empty() && !l.starts_with('.'))
        .ok_or_else(|| GitError::Other(format!("branch {branch} has no directory of its own")))
}

/// The loose refs under `dir` (relative names, their hex values), read as
/// data: anything that is not a regular file of a ref's size (a FIFO, a
/// link, a device) is a finding and never opened; files that are not a ref
/// (a lock left behind) are skipped.
fn loose_refs(dir: &Path, findings: &mut Vec<String>) -> Vec<(String, String)> {
    fn walk(
        base: &Path,
        dir: &Path,
        depth: usize,
        out: &mut Vec<(String, String)>,
        findings: &mut Vec<String>,
    ) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                if depth > 0 {
                    walk(base, &p, depth - 1, out, findings);
                }
                continue;
            }
            let text = match read_data(&p, SMALL) {
                Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                Err(e) => {
                    findings.push(format!("{}: {e}; not read", p.display()));
                    continue;
                }
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
    walk(dir, dir, 16, &mut out, findings);
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
        let work = g.workdir.clone();
        let refs = g
            .sandbox_prepare("slot-0", &work, Some("ralph/story-1"))
            .unwrap();
        let (stand_in, real) = &refs.overlays[1];
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
        let work = g.workdir.clone();
        g.sandbox_prepare("slot-1", &work, Some("ralph/story-2"))
            .unwrap();
        let all = g.sandbox_refs_collect_all();
        assert_eq!(all.len(), 1);
        assert!(matches!(
            all[0].1,
            Ok(Collected::Branch { moved: false, .. })
        ));
        assert_eq!(g.branch_tip("ralph/story-2").unwrap().unwrap(), tip);
    }

    fn mkfifo(p: &Path) {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn fifos_and_links_in_a_stand_in_are_findings_not_hangs() {
        let (_dir, g) = repo_with_commit();
        let tip: Oid = g.branch_tip("main").unwrap().unwrap();
        g.ensure_branch("ralph/story-3", &tip).unwrap();
        let work = g.workdir.clone();
        let refs = g
            .sandbox_prepare("slot-2", &work, Some("ralph/story-3"))
            .unwrap();
        let stand_in = &refs.overlays[1].0;
        mkfifo(&stand_in.join("zz-fifo"));
        std::os::unix::fs::symlink("zz-fifo", stand_in.join("zz-link")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", stand_in.join("zz-zero")).unwrap();
        mkfifo(&refs.overlays[2].0.join("story-3"));
        let c = g.sandbox_refs_collect("slot-2").unwrap();
        let found = c.findings().join("\n");
        assert_eq!(c.findings().len(), 3, "{found}");
        assert!(
            found.contains("a FIFO") && found.contains("a symlink"),
            "{found}"
        );
        assert!(matches!(c, Collected::Branch { moved: false, .. }));
        assert!(!g.git_dir.join("ralph-sandbox/slot-2").exists());
    }

    #[test]
    fn the_attempts_objects_come_in_checked_and_the_repositorys_stay() {
        let (_dir, g) = repo_with_commit();
        let tip: Oid = g.branch_tip("main").unwrap().unwrap();
        g.ensure_branch("ralph/story-4", &tip).unwrap();
        let work = g.workdir.clone();
        let refs = g
            .sandbox_prepare("slot-3", &work, Some("ralph/story-4"))
            .unwrap();
        let (objects, real) = &refs.overlays[0];
        assert!(real.ends_with("objects"));
        assert_eq!(refs.ro_overlays[0].0, *real);
        // The agent commits into its own object directory, as git does
        // inside the sandbox (the repository's objects through alternates).
        let env = |c: &mut std::process::Command| {
            c.env("GIT_OBJECT_DIRECTORY", objects)
                .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", real);
        };
        let run = |args: &[&str]| {
            let mut c = std::process::Command::new("git");
            c.args(args).current_dir(&work);
            env(&mut c);
            let out = c.output().unwrap();
            assert!(out.status.success(), "{args:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        std::fs::write(work.join("new.txt"), "new\n").unwrap();
        run(&["hash-object", "-w", "new.txt"]);
        let tree = run(&["mktree"]);
        let new = run(&["commit-tree", &tree, "-p", &tip, "-m", "agent"]);
        assert!(git2::Repository::open(&work)
            .unwrap()
            .find_commit(git2::Oid::from_str(&new).unwrap())
            .is_err());
        std::fs::write(refs.overlays[1].0.join("story-4"), format!("{new}\n")).unwrap();
        // A corrupt loose object and a link are left out.
        let bad = objects.join("ab");
        std::fs::create_dir_all(&bad).unwrap();
        std::fs::write(bad.join("c".repeat(38)), "not zlib").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", bad.join("d".repeat(38))).unwrap();
        let c = g.sandbox_refs_collect("slot-3").unwrap();
        assert!(matches!(c, Collected::Branch { moved: true, .. }), "{c:?}");
        let found = c.findings().join("\n");
        assert!(
            found.contains("unreadable") && found.contains("not a regular file"),
            "{found}"
        );
        assert_eq!(g.branch_tip("ralph/story-4").unwrap().unwrap(), new);
        let fsck = std::process::Command::new("git")
            .args(["fsck", "--connectivity-only"])
            .current_dir(&work)
            .output()
            .unwrap();
        assert!(fsck.status.success());
    }

    #[test]
    fn a_commit_whose_objects_are_missing_moves_no_ref() {
        let (_dir, g) = repo_with_commit();
        let tip: Oid = g.branch_tip("main").unwrap().unwrap();
        g.ensure_branch("ralph/story-5", &tip).unwrap();
        let work = g.workdir.clone();
        let refs = g
            .sandbox_prepare("slot-4", &work, Some("ralph/story-5"))
            .unwrap();
        let objects = &refs.overlays[0].0;
        let missing = "1234567890123456789012345678901234567890";
        let body = format!(
            "tree {missing}\nparent {tip}\nauthor a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n\nbad\n"
        );
        std::fs::write(work.join("c.txt"), body).unwrap();
        let out = std::process::Command::new("git")
            .args(["hash-object", "-t", "commit", "--literally", "-w", "c.txt"])
            .env("GIT_OBJECT_DIRECTORY", objects)
            .current_dir(&work)
            .output()
            .unwrap();
        let bad = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert_eq!(bad.len(), 40, "{out:?}");
        std::fs::write(refs.overlays[1].0.join("story-5"), format!("{bad}\n")).unwrap();
        std::fs::write(refs.overlays[1].0.join("side"), format!("{bad}\n")).unwrap();
        let c = g.sandbox_refs_collect("slot-4").unwrap();
        assert!(
            matches!(&c, Collected::Branch { moved: false, kept, .. } if kept.is_empty()),
            "{c:?}"
        );
        assert!(c.findings().join("\n").contains("misses objects"), "{c:?}");
        assert_eq!(g.branch_tip("ralph/story-5").unwrap().unwrap(), tip);
        let fsck = std::process::Command::new("git")
            .args(["fsck", "--connectivity-only"])
            .current_dir(&work)
            .output()
            .unwrap();
        assert!(fsck.status.success(), "{fsck:?}");
    }

    #[test]
    fn branch_names_need_a_directory() {
        assert_eq!(split_branch("ralph/story-1").unwrap(), ("ralph", "story-1"));
        assert!(split_branch("main").is_err());
    }
}
