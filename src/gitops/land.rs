//! Landing: moving the target to a merge commit while updating the main
//! checkout under git's own locks (see `landing.rs` for the protocol), and
//! undoing a landing a crash cut short.

use super::*;

impl Git {
    /// Moves `target` from `expected` to `new` (compare-and-swap). When the
    /// main working directory has `target` checked out, its files and index
    /// are updated too, under git's own `index.lock` (see `landing`): a
    /// safe checkout that never overwrites local changes, the index renamed
    /// into place, then the ref moved. A landing that does not move the ref
    /// leaves the checkout as it found it.
    pub(crate) fn land(&self, target: &str, expected: &Oid, new: &Oid) -> Result<LandOutcome> {
        self.land_waiting(target, expected, new, landing::LOCK_WAIT)
    }

    /// `land`, waiting up to `wait` for each lock someone else holds.
    pub(super) fn land_waiting(
        &self,
        target: &str,
        expected: &Oid,
        new: &Oid,
        wait: std::time::Duration,
    ) -> Result<LandOutcome> {
        let refname = branch_ref(target)?;
        let expected_oid = parse_oid(expected)?;
        let new_oid = parse_oid(new)?;
        let repo = self.repo()?;
        repo.find_commit(new_oid)?;
        // A tip that already moved needs no lock to say so.
        let now = tip(&repo, target)?.ok_or_else(|| missing_branch(target))?;
        if now != expected_oid {
            return Ok(LandOutcome::TargetMoved {
                now: now.to_string(),
            });
        }
        let admin = repo.path().to_path_buf();
        drop(repo);
        let lock_path = admin.join("index.lock");
        let Some(index_lock) = landing::LockFile::acquire(&lock_path, wait)
            .map_err(|e| landing::io_error("creating", &lock_path, e))?
        else {
            return Ok(LandOutcome::Busy { lock: lock_path });
        };
        // `git commit` writes the index and lets go of its lock before it
        // moves the branch: only the ref's own lock keeps that move out of
        // the landing, so the tip, the checkout's baseline (HEAD) and the
        // files all agree until ralph moves the ref itself.
        let ref_lock_path = self.git_dir.join(format!("{refname}.lock"));
        if let Some(dir) = ref_lock_path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let Some(ref_lock) = landing::LockFile::acquire(&ref_lock_path, wait)
            .map_err(|e| landing::io_error("creating", &ref_lock_path, e))?
        else {
            return Ok(LandOutcome::Busy {
                lock: ref_lock_path,
            });
        };
        // From here on no git command of the user's can change the index or
        // the target: everything is read afresh, from disk.
        let repo = self.repo()?;
        if let Some(holder) = self.worktree_holding(&refname, None) {
            return Err(GitError::Other(format!(
                "branch {target:?} is checked out in the worktree {}; refusing to move it under \
                 that worktree (switch it to another branch, then run again)",
                holder.display()
            )));
        }
        let now = tip(&repo, target)?.ok_or_else(|| missing_branch(target))?;
        if now != expected_oid {
            return Ok(LandOutcome::TargetMoved {
                now: now.to_string(),
            });
        }
        let head = repo.find_reference("HEAD")?;
        let checked_out = head.symbolic_target()? == Some(refname.as_str());
        drop(head);
        let undo = if checked_out {
            if repo.state() != git2::RepositoryState::Clean {
                return Err(GitError::Other(format!(
                    "{}: a {:?} is in progress in the main checkout; finish or abort it, then resume",
                    self.workdir.display(),
                    repo.state()
                )));
            }
            let base = repo.find_commit(expected_oid)?;
            let merge = repo.find_commit(new_oid)?;
            match update_checkout(&repo, &self.workdir, &admin, &base, &merge)? {
                Checkout::Blocked(paths) => return Ok(LandOutcome::CheckoutBlocked { paths }),
                Checkout::Updated(undo) => Some(undo),
            }
        } else {
            None
        };
        // libgit2 moves the ref through the same lock file. Someone taking it
        // in between makes the compare-and-swap fail, and `undo` then puts
        // the checkout back: the index lock is still held.
        drop(ref_lock);
        let landed = self.finish_landing(
            &repo,
            &refname,
            target,
            new_oid,
            expected_oid,
            undo.as_ref(),
        );
        drop(index_lock);
        landed
    }

    /// The ref move that ends a landing, `index.lock` held; `undo` puts the
    /// main checkout back when the ref does not move.
    pub(super) fn finish_landing(
        &self,
        repo: &git2::Repository,
        refname: &str,
        target: &str,
        new: git2::Oid,
        expected: git2::Oid,
        undo: Option<&Undo>,
    ) -> Result<LandOutcome> {
        let moved = cas_ref(repo, refname, new, expected);
        if moved.is_err() {
            if let Some(undo) = undo {
                undo.apply(repo, &self.workdir)?;
            }
        }
        match moved {
            Ok(()) => Ok(LandOutcome::Landed),
            Err(e) if e.code() == git2::ErrorCode::Modified => {
                let now = tip(repo, target)?
                    .map(|o| o.to_string())
                    .unwrap_or_default();
                Ok(LandOutcome::TargetMoved { now })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The worktree, other than the project's own checkout and ralph's
    /// worktrees under `ralph_worktrees`, that has `branch` checked out (or
    /// is rebasing it): git refuses to move such a branch, and so must ralph,
    /// or that worktree would show every landed story as a staged revert.
    pub(crate) fn branch_checked_out_elsewhere(
        &self,
        branch: &str,
        ralph_worktrees: &Path,
    ) -> Result<Option<PathBuf>> {
        let refname = branch_ref(branch)?;
        Ok(self.worktree_holding(&refname, Some(ralph_worktrees)))
    }

    pub(super) fn worktree_holding(
        &self,
        refname: &str,
        except_under: Option<&Path>,
    ) -> Option<PathBuf> {
        let canon = |p: PathBuf| p.canonicalize().unwrap_or(p);
        let mut candidates = Vec::new();
        // The main worktree's admin dir is the common dir itself (a bare
        // repository has none).
        if self.git_dir.file_name() == Some(std::ffi::OsStr::new(".git")) {
            if let Some(main) = self.git_dir.parent() {
                candidates.push((
                    canon(main.to_path_buf()),
                    landing::checked_out_refs(&self.git_dir),
                ));
            }
        }
        if let Ok(entries) = std::fs::read_dir(self.git_dir.join("worktrees")) {
            for entry in entries.flatten() {
                let admin = entry.path();
                // An admin dir whose working directory is gone is stale.
                if let Some(path) = admin_worktree_path(&admin).filter(|p| p.is_dir()) {
                    candidates.push((canon(path), landing::checked_out_refs(&admin)));
                }
            }
        }
        let except = except_under.map(|d| canon(d.to_path_buf()));
        landing::holder_of(refname, &self.workdir, except.as_deref(), &candidates)
            .map(Path::to_path_buf)
    }

    /// Undoes a landing cut short between its checkout of the main working
    /// directory and the ref move: every path the merge changes whose file
    /// and index entry still match the old tip or the merge is put back to
    /// the old tip. Paths matching neither are someone's edits and stay.
    /// Returns the paths restored.
    pub(crate) fn rollback_partial_landing(&self, base: &Oid, merge: &Oid) -> Result<Vec<String>> {
        let repo = self.repo()?;
        let base_c = repo.find_commit(parse_oid(base)?)?;
        let merge_c = repo.find_commit(parse_oid(merge)?)?;
        let (bt, mt) = (base_c.tree()?, merge_c.tree()?);
        let paths = changed_paths(&repo, &bt, &mt)?;
        let index = repo.index()?;
        let mut restore = Vec::new();
        for p in &paths {
            let b = blob_at(&bt, p);
            let m = blob_at(&mt, p);
            let full = self.workdir.join(p);
            let wd = workdir_blob(&full)?;
            // A kill in the middle of writing a file leaves a truncated copy
            // of one side: that is ours too.
            let truncated_of = |side: Option<git2::Oid>| -> bool {
                let (Some(side), Ok(content)) = (side, std::fs::read(&full)) else {
                    return false;
                };
                repo.find_blob(side)
                    .is_ok_and(|blob| blob.content().starts_with(&content))
            };
            let idx = index.get_path(Path::new(p), 0).map(|e| e.id);
            let wd_ours =
                wd == b || wd == m || (wd.is_some() && (truncated_of(m) || truncated_of(b)));
            if wd_ours && (idx == b || idx == m) {
                restore.push(p.clone());
            }
        }
        if restore.is_empty() {
            return Ok(restore);
        }
        write_tree_files(&repo, &self.workdir, &bt, &restore)?;
        repo.reset_default(Some(base_c.as_object()), restore.iter().map(String::as_str))?;
        Ok(restore)
    }
}

/// What the main checkout's update in a landing came to.
pub(super) enum Checkout {
    /// Local changes are in the way of these paths; nothing was written.
    Blocked(Vec<String>),
    /// Files and index are the merge's; this puts them back.
    Updated(Undo),
}

/// How to put the main checkout back as it was before a landing's update.
pub(super) struct Undo {
    index: landing::IndexSnapshot,
    admin: PathBuf,
    base: git2::Oid,
    merge: git2::Oid,
}

impl Undo {
    /// Files the merge changed that still hold the merge's content go back
    /// to the old tip's (a file changed since is someone's edit and stays),
    /// then the old index returns byte for byte. `index.lock` must be held.
    pub(super) fn apply(&self, repo: &git2::Repository, workdir: &Path) -> Result<()> {
        let bt = repo.find_commit(self.base)?.tree()?;
        let mt = repo.find_commit(self.merge)?.tree()?;
        let mut ours = Vec::new();
        for p in changed_paths(repo, &bt, &mt)? {
            if workdir_blob(&workdir.join(&p))? == blob_at(&mt, &p) {
                ours.push(p);
            }
        }
        write_tree_files(repo, workdir, &bt, &ours)?;
        self.index
            .restore(&self.admin)
            .map_err(|e| landing::io_error("restoring", &self.admin.join("index"), e))?;
        landing::clear_new_index(&self.admin)
            .map_err(|e| landing::io_error("cleaning", &self.admin, e))
    }
}

/// Updates the main checkout (working directory at `workdir`, admin dir
/// `admin`, HEAD on the target at `base`) to `merge`. The caller holds
/// `index.lock`; the new index is renamed into place before this returns.
pub(super) fn update_checkout(
    repo: &git2::Repository,
    workdir: &Path,
    admin: &Path,
    base: &git2::Commit<'_>,
    merge: &git2::Commit<'_>,
) -> Result<Checkout> {
    let index_path = admin.join("index");
    let io = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |e| landing::io_error(what, &path, e)
    };
    let snapshot = landing::IndexSnapshot::read(&index_path).map_err(io("reading", &index_path))?;
    let new_index = landing::new_index_path(admin);
    landing::clear_new_index(admin).map_err(io("cleaning", admin))?;
    snapshot
        .write_to(&new_index)
        .map_err(io("writing", &new_index))?;
    // The checkout must judge the user's changes by the index as it is now,
    // under the lock, and must not write it: ralph writes it below.
    let mut index = git2::Index::open(&new_index)?;
    repo.set_index(&mut index)?;
    let undo = Undo {
        index: snapshot,
        admin: admin.to_path_buf(),
        base: base.id(),
        merge: merge.id(),
    };
    let blocked = std::cell::RefCell::new(Vec::new());
    let result = {
        let mut co = git2::build::CheckoutBuilder::new();
        // While HEAD still names the old tip it is the checkout baseline,
        // which is what lets a safe checkout tell the user's edits apart
        // from the files the merge changes.
        co.safe()
            .update_index(false)
            .notify_on(git2::CheckoutNotificationType::CONFLICT)
            .notify(|_, path, _, _, _| {
                if let Some(p) = path {
                    blocked
                        .borrow_mut()
                        .push(p.to_string_lossy().replace('\\', "/"));
                }
                true
            });
        repo.checkout_tree(merge.tree()?.as_object(), Some(&mut co))
    };
    match result {
        Ok(()) => {}
        Err(e) if e.code() == git2::ErrorCode::Conflict => {
            // libgit2 decides every action before writing anything.
            landing::clear_new_index(admin).map_err(io("cleaning", admin))?;
            let mut paths = blocked.into_inner();
            paths.sort();
            paths.dedup();
            return Ok(Checkout::Blocked(paths));
        }
        Err(e) => {
            let _ = undo.apply(repo, workdir);
            return Err(e.into());
        }
    }
    let written = write_landed_index(repo, &mut index, base, merge, &undo.index).and_then(|()| {
        std::fs::rename(&new_index, &index_path).map_err(io("renaming", &new_index))
    });
    match written {
        Ok(()) => Ok(Checkout::Updated(undo)),
        Err(e) => {
            let _ = undo.apply(repo, workdir);
            Err(e)
        }
    }
}

/// The index after a landing: entries of the paths the merge changes carry
/// its blobs with no stat data, racily clean entries lose theirs (see
/// `landing`), every other entry stays exactly as the user's git left it.
pub(super) fn write_landed_index(
    repo: &git2::Repository,
    index: &mut git2::Index,
    base: &git2::Commit<'_>,
    merge: &git2::Commit<'_>,
    old: &landing::IndexSnapshot,
) -> Result<()> {
    let diff = repo.diff_tree_to_tree(Some(&base.tree()?), Some(&merge.tree()?), None)?;
    // Deletions first: a file replacing a directory (or the reverse) must
    // not meet the entries it replaces.
    for d in diff.deltas() {
        if d.status() == git2::Delta::Deleted {
            if let Some(p) = d.old_file().path() {
                index.remove_path(p)?;
            }
        }
    }
    for d in diff.deltas() {
        if d.status() == git2::Delta::Deleted {
            continue;
        }
        let f = d.new_file();
        if let Some(p) = f.path() {
            let p = p.to_string_lossy().replace('\\', "/");
            index.add(&landing::smudged_entry(&p, f.id(), u32::from(f.mode())))?;
        }
    }
    for mut e in landing::racy_entries(index.iter(), old.stamp()) {
        e.ctime = git2::IndexTime::new(0, 0);
        e.mtime = git2::IndexTime::new(0, 0);
        e.file_size = 0;
        index.add(&e)?;
    }
    index.write()?;
    Ok(())
}

/// Repo-relative paths that differ between two trees.
pub(super) fn changed_paths(
    repo: &git2::Repository,
    from: &git2::Tree<'_>,
    to: &git2::Tree<'_>,
) -> Result<Vec<String>> {
    let diff = repo.diff_tree_to_tree(Some(from), Some(to), None)?;
    let mut paths: Vec<String> = Vec::new();
    for d in diff.deltas() {
        for f in [d.old_file(), d.new_file()] {
            if let Some(p) = f.path() {
                let p = p.to_string_lossy().replace('\\', "/");
                if !paths.contains(&p) {
                    paths.push(p);
                }
            }
        }
    }
    Ok(paths)
}

pub(super) fn blob_at(tree: &git2::Tree<'_>, path: &str) -> Option<git2::Oid> {
    tree.get_path(Path::new(path)).ok().map(|e| e.id())
}

/// The blob ID of the file at `full`; `None` when there is no file.
pub(super) fn workdir_blob(full: &Path) -> Result<Option<git2::Oid>> {
    if full.is_file() {
        Ok(Some(git2::Oid::hash_file(git2::ObjectType::Blob, full)?))
    } else {
        Ok(None)
    }
}

/// Makes each of `paths` under `workdir` hold its content in `tree`
/// (deleted when `tree` has none). Files only: the index is the caller's.
pub(super) fn write_tree_files(
    repo: &git2::Repository,
    workdir: &Path,
    tree: &git2::Tree<'_>,
    paths: &[String],
) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for p in paths {
        let full = workdir.join(p);
        match tree.get_path(Path::new(p)) {
            Ok(entry) => {
                let blob = repo.find_blob(entry.id())?;
                if let Some(parent) = full.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&full, blob.content())?;
                let perm = if entry.filemode() == 0o100755 {
                    0o755
                } else {
                    0o644
                };
                std::fs::set_permissions(&full, std::fs::Permissions::from_mode(perm))?;
            }
            Err(_) => {
                if full.is_file() {
                    std::fs::remove_file(&full)?;
                }
            }
        }
    }
    Ok(())
}

/// Compare-and-swap of a ref, retrying briefly while another git process
/// holds its lock file (never deleting that lock: it is not ours).
pub(super) fn cas_ref(
    repo: &git2::Repository,
    refname: &str,
    new: git2::Oid,
    expected: git2::Oid,
) -> std::result::Result<(), git2::Error> {
    let mut attempts = 0;
    loop {
        match repo.reference_matching(refname, new, true, expected, "ralph: land") {
            Ok(_) => return Ok(()),
            Err(e) if e.code() == git2::ErrorCode::Locked && attempts < 20 => {
                attempts += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(e) => return Err(e),
        }
    }
}
