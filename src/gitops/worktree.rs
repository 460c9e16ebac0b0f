//! Worktrees: the slot and validation worktrees ralph makes, reuses,
//! lists and removes, their admin dirs and lock files.

use super::*;

impl Git {
    /// Makes `path` a worktree named `name` with `branch` checked out at
    /// `base`: the branch is created or force-moved to `base`. An existing valid
    /// worktree of that name is reused: switched to `branch`, hard-reset to
    /// `base`, untracked-but-not-ignored files removed (ignored build output is
    /// kept warm). Stale admin dirs, stale `index.lock`/`HEAD.lock`/`locked`
    /// files of this worktree and a leftover directory are cleaned first.
    pub(crate) fn prepare_worktree(
        &self,
        name: &str,
        path: &Path,
        branch: &str,
        base: &Oid,
    ) -> Result<()> {
        let admin = self.admin_dir(name)?;
        self.refuse_main_workdir(path)?;
        // A sealed agent wrote here: put its git files right before libgit2 reads them.
        self.slot_files(name, path, true)?;
        let repo = self.repo()?;
        let base_oid = parse_oid(base)?;
        let base_commit = repo.find_commit(base_oid)?;
        let refname = branch_ref(branch)?;

        if self.reusable_worktree(&repo, name, path) {
            self.clear_worktree_locks(name)?;
            if let Some(holder) = self.checked_out_elsewhere(&refname, Some(name)) {
                return Err(checked_out_error(branch, &holder));
            }
            let wrepo = open_worktree_repo(path, &admin)?;
            // Detach first so that moving the branch never rewrites the ref
            // this worktree's HEAD is following mid-switch.
            wrepo.set_head_detached(base_oid)?;
            wrepo.reference(&refname, base_oid, true, "ralph: prepare worktree")?;
            wrepo.set_head(&refname)?;
            let obj = wrepo.find_object(base_oid, None)?;
            force_checkout(&wrepo, &obj)?;
            return Ok(());
        }

        // Not reusable: whatever is left of a previous worktree of this name
        // is stale (crash, rm -rf) and would make `worktree add` fail.
        remove_path(&admin)?;
        remove_path(path)?;
        if let Some(holder) = self.checked_out_elsewhere(&refname, Some(name)) {
            return Err(checked_out_error(branch, &holder));
        }
        let reference =
            repo.reference(&refname, base_commit.id(), true, "ralph: prepare worktree")?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut opts = git2::WorktreeAddOptions::new();
        opts.reference(Some(&reference));
        if let Err(e) = repo.worktree(name, path, Some(&opts)) {
            // libgit2 never rolls back a failed add; an orphan admin dir
            // would be invisible to git2 and block the next attempt.
            let _ = remove_path(&admin);
            let _ = remove_path(path);
            return Err(e.into());
        }
        Ok(())
    }

    /// Makes the free slot worktree `name` ready for a story not chosen yet,
    /// while agents run elsewhere (issue 21): detached at `base` with a clean
    /// tree; made first when missing, on `scratch` (a branch force-set to
    /// `base` for the add and deleted once the slot is detached). A slot
    /// holding uncommitted or untracked work is left as it is (`Ok(false)`):
    /// preparing it for its story keeps that work first. Callers hold
    /// `WORKTREE_PREP`, as for `prepare_worktree`.
    pub(crate) fn warm_worktree(
        &self,
        name: &str,
        path: &Path,
        base: &Oid,
        scratch: &str,
    ) -> Result<bool> {
        let admin = self.admin_dir(name)?;
        self.refuse_main_workdir(path)?;
        self.slot_files(name, path, true)?;
        let repo = self.repo()?;
        let base_oid = parse_oid(base)?;
        if self.reusable_worktree(&repo, name, path) {
            self.clear_worktree_locks(name)?;
            let wrepo = open_worktree_repo(path, &admin)?;
            let mut opts = git2::StatusOptions::new();
            opts.include_untracked(true).include_ignored(false);
            if !wrepo.statuses(Some(&mut opts))?.is_empty() {
                return Ok(false);
            }
            wrepo.set_head_detached(base_oid)?;
            let obj = wrepo.find_object(base_oid, None)?;
            force_checkout(&wrepo, &obj)?;
            return Ok(true);
        }
        self.prepare_worktree(name, path, scratch, base)?;
        open_worktree_repo(path, &admin)?.set_head_detached(base_oid)?;
        self.delete_branch(scratch)?;
        Ok(true)
    }

    /// Puts a slot `warm_worktree` left detached at `base` on `branch`
    /// (created or force-moved to `base`) without a checkout: its tree is
    /// `base`'s already. `Ok(false)`, touching nothing, when its HEAD is not
    /// detached at `base`: the caller prepares it in full. Only for a slot
    /// nothing ran in since it was warmed (the caller knows).
    pub(crate) fn start_warm_worktree(
        &self,
        name: &str,
        path: &Path,
        branch: &str,
        base: &Oid,
    ) -> Result<bool> {
        let admin = self.admin_dir(name)?;
        self.refuse_main_workdir(path)?;
        self.slot_files(name, path, true)?;
        let repo = self.repo()?;
        let base_oid = parse_oid(base)?;
        if !self.reusable_worktree(&repo, name, path) {
            return Ok(false);
        }
        let wrepo = open_worktree_repo(path, &admin)?;
        if !wrepo.head_detached()? || wrepo.head()?.target() != Some(base_oid) {
            return Ok(false);
        }
        let refname = branch_ref(branch)?;
        if let Some(holder) = self.checked_out_elsewhere(&refname, Some(name)) {
            return Err(checked_out_error(branch, &holder));
        }
        self.clear_worktree_locks(name)?;
        wrepo.reference(&refname, base_oid, true, "ralph: prepare worktree")?;
        wrepo.set_head(&refname)?;
        Ok(true)
    }

    /// Checks out `commit` detached in the worktree at `path` (forced), removing
    /// untracked-but-not-ignored files: used to validate a merged tree.
    pub(crate) fn checkout_detached(&self, path: &Path, commit: &Oid) -> Result<()> {
        self.refuse_main_workdir(path)?;
        let oid = parse_oid(commit)?;
        let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
            GitError::Other(format!(
                "{}: not a linked worktree; refusing a forced checkout there",
                path.display()
            ))
        })?;
        let admin = self.admin_dir(name)?;
        self.slot_files(name, path, true)?;
        let wrepo = open_worktree_repo(path, &admin)?;
        remove_lock_files(wrepo.path())?;
        let obj = wrepo.find_object(oid, None)?;
        obj.peel_to_commit()?;
        wrepo.set_head_detached(oid)?;
        force_checkout(&wrepo, &obj)
    }

    /// Worktrees of this repository, including broken admin dirs git2 hides.
    pub(crate) fn list_worktrees(&self) -> Result<Vec<WorktreeInfo>> {
        let repo = self.repo()?;
        let mut names = std::collections::BTreeSet::new();
        for name in repo.worktrees()?.iter_bytes() {
            names.insert(String::from_utf8_lossy(name).into_owned());
        }
        match std::fs::read_dir(self.git_dir.join("worktrees")) {
            Ok(entries) => {
                for entry in entries {
                    let entry = entry?;
                    if entry.file_type()?.is_dir() {
                        names.insert(entry.file_name().to_string_lossy().into_owned());
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        let mut out = Vec::new();
        for name in names {
            let admin = self.git_dir.join("worktrees").join(&name);
            let path = admin_worktree_path(&admin).unwrap_or_default();
            let valid = repo
                .find_worktree(&name)
                .and_then(|wt| wt.validate())
                .is_ok();
            let prunable = path.as_os_str().is_empty() || !path.is_dir() || !valid;
            let locked = admin.join("locked").exists();
            out.push(WorktreeInfo {
                name,
                path,
                prunable,
                locked,
            });
        }
        Ok(out)
    }

    /// Removes a worktree: its directory, its admin dir and its lock files.
    pub(crate) fn remove_worktree(&self, name: &str, path: &Path) -> Result<()> {
        let admin = self.admin_dir(name)?;
        self.refuse_main_workdir(path)?;
        if admin.is_dir() {
            remove_lock_files(&admin)?;
        }
        let repo = self.repo()?;
        if let Ok(wt) = repo.find_worktree(name) {
            let same_dir = same_path(wt.path(), path);
            let mut opts = git2::WorktreePruneOptions::new();
            // Let prune delete the working tree only when it is the one we were
            // asked about; a mismatched admin dir must not cost another dir.
            opts.valid(true).locked(true).working_tree(same_dir);
            // Best effort: whatever prune leaves is removed by hand below.
            let _ = wt.prune(Some(&mut opts));
        }
        remove_path(&admin)?;
        remove_path(path)?;
        Ok(())
    }

    /// Removes the admin dir of a worktree whose working directory is gone
    /// (or was never recorded), like `git worktree prune` does for one entry.
    pub(crate) fn prune_admin(&self, name: &str) -> Result<()> {
        let admin = self.admin_dir(name)?;
        remove_path(&admin)
    }

    /// Detaches the HEAD of every linked worktree under `under` that has
    /// `branch` checked out, so another of ralph's worktrees may take it (a
    /// retry can land in a different job slot). Returns the worktrees
    /// released. Worktrees elsewhere are never touched.
    pub(crate) fn release_branch(&self, branch: &str, under: &Path) -> Result<Vec<String>> {
        let refname = branch_ref(branch)?;
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir(self.git_dir.join("worktrees")) else {
            return Ok(out);
        };
        let under_canon = under.canonicalize().unwrap_or_else(|_| under.to_path_buf());
        for entry in entries.flatten() {
            let admin = entry.path();
            if head_file_ref(&admin).as_deref() != Some(refname.as_str()) {
                continue;
            }
            let Some(path) = admin_worktree_path(&admin) else {
                continue;
            };
            if !(path.starts_with(under) || path.starts_with(&under_canon)) || !path.is_dir() {
                continue;
            }
            let wrepo = open_worktree_repo(&path, &admin)?;
            let head = wrepo.head()?.peel_to_commit()?.id();
            wrepo.set_head_detached(head)?;
            out.push(entry.file_name().to_string_lossy().into_owned());
        }
        Ok(out)
    }

    /// Deletes the stale `index.lock`, `HEAD.lock` and `locked` files of the
    /// worktree `name` and returns the ones that existed. Only for ralph's own
    /// worktrees, once no process can be running in them.
    pub(crate) fn clear_worktree_locks(&self, name: &str) -> Result<Vec<PathBuf>> {
        let admin = self.admin_dir(name)?;
        remove_lock_files(&admin)
    }

    /// Lock files git or libgit2 leave behind when killed mid-write: in the
    /// common dir (`index.lock`, `HEAD.lock`, `packed-refs.lock`, any
    /// `refs/**.lock`) and in every worktree admin dir.
    pub(crate) fn lock_files(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            let Ok(rd) = std::fs::read_dir(dir) else {
                return;
            };
            for e in rd.flatten() {
                let p = e.path();
                // Never through a link: a sealed agent could plant one.
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "lock") {
                    out.push(p);
                }
            }
        }
        let mut out = Vec::new();
        // Top level (index, HEAD, packed-refs, config, shallow, …) and the
        // object store's maintenance lock, which `git commit` takes for its
        // automatic maintenance.
        for dir in [self.git_dir.clone(), self.git_dir.join("objects")] {
            if let Ok(rd) = std::fs::read_dir(&dir) {
                for e in rd.flatten() {
                    let p = e.path();
                    if p.is_file() && p.extension().is_some_and(|x| x == "lock") {
                        out.push(p);
                    }
                }
            }
        }
        walk(&self.git_dir.join("refs"), &mut out);
        if let Ok(rd) = std::fs::read_dir(self.git_dir.join("worktrees")) {
            for e in rd.flatten() {
                for name in ["index.lock", "HEAD.lock"] {
                    let p = e.path().join(name);
                    if p.exists() {
                        out.push(p);
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// The admin dir of worktree `name`, refusing names that would escape
    /// `<git_dir>/worktrees` (they are later handed to `remove_dir_all`).
    pub(super) fn admin_dir(&self, name: &str) -> Result<PathBuf> {
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']) {
            return Err(GitError::Other(format!("invalid worktree name {name:?}")));
        }
        Ok(self.git_dir.join("worktrees").join(name))
    }

    /// Worktree paths are deleted and force-checked-out; the user's own
    /// checkout (or anything containing it) must never be one of them.
    pub(super) fn refuse_main_workdir(&self, path: &Path) -> Result<()> {
        let resolved = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        if self.workdir.starts_with(&resolved) || self.git_dir.starts_with(&resolved) {
            return Err(GitError::Other(format!(
                "{}: is (or contains) the main checkout; refusing to use it as a worktree",
                path.display()
            )));
        }
        Ok(())
    }

    /// A worktree called `name` that git2 considers valid and whose working
    /// directory is `path`.
    pub(super) fn reusable_worktree(
        &self,
        repo: &git2::Repository,
        name: &str,
        path: &Path,
    ) -> bool {
        match repo.find_worktree(name) {
            Ok(wt) => wt.validate().is_ok() && same_path(wt.path(), path),
            Err(_) => false,
        }
    }

    /// Who has `refname` checked out, other than worktree `except`: the main
    /// checkout (`None`) or a linked worktree (`Some(name)`). Admin dirs whose
    /// working directory is gone are stale and do not count.
    pub(super) fn checked_out_elsewhere(
        &self,
        refname: &str,
        except: Option<&str>,
    ) -> Option<Option<String>> {
        if head_file_ref(&self.git_dir).as_deref() == Some(refname) {
            return Some(None);
        }
        let entries = std::fs::read_dir(self.git_dir.join("worktrees")).ok()?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if Some(name.as_str()) == except {
                continue;
            }
            let admin = entry.path();
            if head_file_ref(&admin).as_deref() != Some(refname) {
                continue;
            }
            if admin_worktree_path(&admin).is_some_and(|p| p.is_dir()) {
                return Some(Some(name));
            }
        }
        None
    }

    /// The commit checked out in the worktree at `path` (attached or
    /// detached); `None` when its HEAD is unborn.
    pub(crate) fn head_commit_of_worktree(&self, path: &Path) -> Result<Option<Oid>> {
        let wrepo = self.open_slot(path)?;
        let head = match wrepo.head() {
            Ok(h) => h,
            Err(e)
                if matches!(
                    e.code(),
                    git2::ErrorCode::UnbornBranch | git2::ErrorCode::NotFound
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e.into()),
        };
        let id = head.peel_to_commit()?.id();
        Ok(Some(id.to_string()))
    }

    /// The local branch checked out in the worktree at `path`; `None` when
    /// its HEAD is detached.
    pub(crate) fn resolve_branch_at_head(&self, path: &Path) -> Result<Option<String>> {
        let wrepo = self.open_slot(path)?;
        let head = wrepo.find_reference("HEAD")?;
        Ok(head
            .symbolic_target()?
            .and_then(branch_of_ref)
            .map(str::to_string))
    }
}

/// Makes a worktree's files and index exactly `obj`'s tree, deleting
/// untracked files but keeping ignored ones (warm build output). HEAD must
/// already name `obj`, directly or through its branch.
pub(super) fn force_checkout(wrepo: &git2::Repository, obj: &git2::Object<'_>) -> Result<()> {
    let mut co = git2::build::CheckoutBuilder::new();
    co.force().remove_untracked(true);
    wrepo.checkout_tree(obj, Some(&mut co))?;
    // A hard reset would be the obvious call, but libgit2 overwrites its
    // checkout strategy with plain FORCE, dropping remove_untracked. A mixed
    // reset rebuilds the index from the tree (keeping stat data of unchanged
    // entries) and clears merge state.
    wrepo.reset(obj, git2::ResetType::Mixed, None)?;
    Ok(())
}

/// Opens the worktree at `path` through its admin dir `admin` (never
/// through the `.git` file in it, which an agent could have pointed
/// anywhere), checking it really is the linked worktree at `path`: a plain
/// directory there must never resolve to some other repository that a
/// forced checkout would then clobber.
pub(super) fn open_worktree_repo(path: &Path, admin: &Path) -> Result<git2::Repository> {
    let wrepo = git2::Repository::open_ext(
        admin,
        git2::RepositoryOpenFlags::NO_SEARCH,
        std::iter::empty::<&std::ffi::OsStr>(),
    )?;
    if !wrepo.is_worktree()
        || !same_path(wrepo.path(), admin)
        || !wrepo.workdir().is_some_and(|w| same_path(w, path))
    {
        return Err(GitError::Other(format!(
            "{}: is not the worktree administered by {}",
            path.display(),
            admin.display()
        )));
    }
    Ok(wrepo)
}

pub(super) fn remove_lock_files(admin: &Path) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for f in WORKTREE_LOCK_FILES {
        let p = admin.join(f);
        match std::fs::remove_file(&p) {
            Ok(()) => removed.push(p),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(removed)
}

/// Removes a file, symlink or directory tree; a missing path is fine.
pub(super) fn remove_path(path: &Path) -> Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let res = if meta.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    match res {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The ref a HEAD file in `dir` points at symbolically.
pub(super) fn head_file_ref(dir: &Path) -> Option<String> {
    let content = super::slot::read_text(&dir.join("HEAD"))?;
    content
        .trim()
        .strip_prefix("ref:")
        .map(|r| r.trim().to_string())
}

/// The working directory recorded in a worktree admin dir's `gitdir` file.
pub(super) fn admin_worktree_path(admin: &Path) -> Option<PathBuf> {
    let content = super::slot::read_text(&admin.join("gitdir"))?;
    let gitfile = content.trim_end_matches(['\n', '\r']);
    if gitfile.is_empty() {
        return None;
    }
    let gitfile = Path::new(gitfile);
    let dir = if gitfile.file_name() == Some(std::ffi::OsStr::new(".git")) {
        gitfile.parent().unwrap_or(gitfile)
    } else {
        gitfile
    };
    Some(dir.to_path_buf())
}

pub(super) fn same_path(a: &Path, b: &Path) -> bool {
    let norm = |p: &Path| {
        let p = p.components().as_path().to_path_buf();
        p.canonicalize().unwrap_or(p)
    };
    norm(a) == norm(b)
}
