//! Landing: moving the target to a merge commit while updating the main
//! checkout under git's own locks (see `landing.rs` for the protocol), and
//! undoing a landing a crash cut short.

use super::*;
use landing::CheckoutWatch;

impl Git {
    /// Moves `target` from `expected` to `new` (compare-and-swap). When the
    /// main working directory has `target` checked out, its files and index
    /// are updated too, under git's own `index.lock` (see `landing`): a
    /// safe checkout that never overwrites local changes, the index renamed
    /// into place, then the ref moved. A landing that does not move the ref
    /// leaves the checkout as it found it.
    #[cfg(test)]
    pub(crate) fn land(&self, target: &str, expected: &Oid, new: &Oid) -> Result<LandOutcome> {
        self.land_watched(target, expected, new, &landing::NoWatch, &[])
    }

    /// `land`, outlasting the user's git processes `watch` sees (see
    /// `landing`: `index.lock` is not let go while a git process that may
    /// hold a copy of the old index lives), after repairing an index left
    /// stale against one of the `earlier` landings (base, merge) of the run.
    pub(crate) fn land_watched(
        &self,
        target: &str,
        expected: &Oid,
        new: &Oid,
        watch: &dyn CheckoutWatch,
        earlier: &[(Oid, Oid)],
    ) -> Result<LandOutcome> {
        self.land_inner(target, expected, new, landing::LOCK_WAIT, watch, earlier)
    }

    /// `land`, waiting up to `wait` for each lock someone else holds.
    #[cfg(test)]
    pub(super) fn land_waiting(
        &self,
        target: &str,
        expected: &Oid,
        new: &Oid,
        wait: std::time::Duration,
    ) -> Result<LandOutcome> {
        self.land_inner(target, expected, new, wait, &landing::NoWatch, &[])
    }

    /// The landing itself; `wait` bounds each wait, for a lock and for
    /// the user's git processes alike.
    pub(super) fn land_inner(
        &self,
        target: &str,
        expected: &Oid,
        new: &Oid,
        wait: std::time::Duration,
        watch: &dyn CheckoutWatch,
        earlier: &[(Oid, Oid)],
    ) -> Result<LandOutcome> {
        let refname = branch_ref(target)?;
        let expected_oid = parse_oid(expected)?;
        let new_oid = parse_oid(new)?;
        let repo = self.repo()?;
        repo.find_commit(new_oid)?;
        // A tip moved other than by adding commits needs no lock to say so;
        // one the user only added to may take the merge on top (below).
        let now = tip(&repo, target)?.ok_or_else(|| missing_branch(target))?;
        if now != expected_oid && !repo.graph_descendant_of(now, expected_oid)? {
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
            return Ok(LandOutcome::Busy {
                lock: lock_path,
                holder: None,
            });
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
                holder: None,
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
        let mut remade = None;
        if now != expected_oid {
            // The user committed while the merge was validated. Made again
            // here, under both locks, the merge cannot be overtaken once more,
            // however often the user commits (the merge queue starved when
            // every round's validation was outrun).
            let again = self.remade_on(&repo, expected_oid, now, new_oid)?;
            let Some(again) = again.filter(|m| watch.relanding(&now.to_string(), &m.to_string()))
            else {
                return Ok(LandOutcome::TargetMoved {
                    now: now.to_string(),
                });
            };
            watch.log(&format!(
                "landing: {target} gained commits touching none of the merge's paths while it \
                 was validated; the validated merge {new_oid} is made again on {now} as {again}"
            ));
            remade = Some(again);
        }
        let (expected_oid, new_oid) = match remade {
            Some(again) => (now, again),
            None => (expected_oid, new_oid),
        };
        let head = repo.find_reference("HEAD")?;
        let checked_out = head.symbolic_target()? == Some(refname.as_str());
        drop(head);
        let on_top = |landed: Result<LandOutcome>| match (landed, remade) {
            (Ok(LandOutcome::Landed), Some(commit)) => Ok(LandOutcome::LandedOnTop {
                base: expected_oid.to_string(),
                commit: commit.to_string(),
            }),
            (landed, _) => landed,
        };
        if !checked_out {
            drop(ref_lock);
            return on_top(self.finish_landing(
                &repo,
                &refname,
                target,
                new_oid,
                expected_oid,
                None,
            ));
        }
        if repo.state() != git2::RepositoryState::Clean {
            return Err(GitError::Other(format!(
                "{}: a {:?} is in progress in the main checkout; finish or abort it, then resume",
                self.workdir.display(),
                repo.state()
            )));
        }
        // A git process that read the index before this lock was taken may
        // write that copy back once it is let go (`git commit` reads first,
        // locks later): it must end before anything changes, or the landing
        // waits for another time.
        let left = landing::outlast(
            watch,
            watch.now(),
            wait,
            "it may write back the index it read before this landing",
        );
        if let Some(g) = left.first() {
            return Ok(LandOutcome::Busy {
                lock: lock_path,
                holder: Some(format!("git process {} ({})", g.pid, landing::describe(g))),
            });
        }
        let landed = self.update_and_move(
            &repo,
            &admin,
            &refname,
            target,
            (expected_oid, new_oid),
            ref_lock,
            watch,
            earlier,
        );
        // Whatever the index now is, a git process that may have read the one
        // before it must not be able to write that copy back: the lock stays
        // until every such process has ended (new ones read this index).
        self.outlast_then_release(watch, wait, index_lock);
        on_top(landed)
    }

    /// The merge `new`, made on `base`, made again on `now` when `now` only
    /// added commits to `base` and those touch none of the paths the merge
    /// changes: the tree is then the one the user would have had by making
    /// those commits right after the landing, so the merge's validation
    /// still speaks for it. `None` when the paths meet (the merge must be
    /// validated again), the history was rewritten, or the trees do not
    /// merge cleanly (a file where the other side has a directory).
    pub(super) fn remade_on(
        &self,
        repo: &git2::Repository,
        base: git2::Oid,
        now: git2::Oid,
        new: git2::Oid,
    ) -> Result<Option<git2::Oid>> {
        if !repo.graph_descendant_of(now, base)? {
            return Ok(None);
        }
        let merge = repo.find_commit(new)?;
        let on = repo.find_commit(now)?;
        let (bt, nt, mt) = (repo.find_commit(base)?.tree()?, on.tree()?, merge.tree()?);
        let theirs = changed_paths(repo, &bt, &nt)?;
        let ours = changed_paths(repo, &bt, &mt)?;
        if landing::paths_meet(&ours, &theirs) {
            return Ok(None);
        }
        // The merge queue may land a chain of merges at once (each on the
        // one before it, the first on `base`): each is made again in turn,
        // so every story keeps its own merge on the first-parent line.
        let mut chain = vec![merge.clone()];
        while chain.last().and_then(|c| c.parent_id(0).ok()) != Some(base) {
            let Some(parent) = chain.last().and_then(|c| c.parent(0).ok()) else {
                return Ok(None);
            };
            if chain.len() >= 256 {
                return Ok(None);
            }
            chain.push(parent);
        }
        let sig = signature(repo)?;
        let mut on = on;
        for m in chain.iter().rev() {
            let mut index = repo.merge_trees(&bt, &nt, &m.tree()?, None)?;
            if index.has_conflicts() {
                return Ok(None);
            }
            let tree = repo.find_tree(index.write_tree_to(repo)?)?;
            let story_parents: Vec<git2::Commit<'_>> = m.parents().skip(1).collect();
            let mut parents = vec![&on];
            parents.extend(story_parents.iter());
            let message = m.message_raw().unwrap_or_default();
            let made = sign::commit(repo, None, &sig, message, &tree, &parents)?;
            on = repo.find_commit(made)?;
        }
        Ok(Some(on.id()))
    }

    /// The landing's changes under both locks, the user's git outlasted:
    /// a stale index repaired, the checkout updated, the ref moved (or the
    /// checkout put back).
    #[allow(clippy::too_many_arguments)]
    fn update_and_move(
        &self,
        repo: &git2::Repository,
        admin: &Path,
        refname: &str,
        target: &str,
        (expected_oid, new_oid): (git2::Oid, git2::Oid),
        ref_lock: landing::LockFile,
        watch: &dyn CheckoutWatch,
        earlier: &[(Oid, Oid)],
    ) -> Result<LandOutcome> {
        let repaired = repair_stale_index(self, repo, admin, expected_oid, earlier)?;
        for merge in repaired {
            watch.log(&format!(
                "landing: the main checkout's index was a copy from before the landing of {merge} \
                 (written back by a git process that read it earlier); its entries for that \
                 landing's paths are restored"
            ));
        }
        let base = repo.find_commit(expected_oid)?;
        let merge = repo.find_commit(new_oid)?;
        let undo = match update_checkout(repo, &self.workdir, admin, &base, &merge)? {
            Checkout::Blocked(paths) => return Ok(LandOutcome::CheckoutBlocked { paths }),
            Checkout::Updated(undo) => undo,
        };
        // libgit2 moves the ref through the same lock file. Someone taking it
        // in between makes the compare-and-swap fail, and `undo` then puts
        // the checkout back: the index lock is still held.
        drop(ref_lock);
        self.finish_landing(repo, refname, target, new_oid, expected_oid, Some(&undo))
    }

    /// Keeps `index_lock` until no git process that started before now and
    /// may hold a copy of an older index lives (up to `wait`), then lets go.
    fn outlast_then_release(
        &self,
        watch: &dyn CheckoutWatch,
        wait: std::time::Duration,
        index_lock: landing::LockFile,
    ) {
        let left = landing::outlast(
            watch,
            watch.now(),
            wait,
            "it may have read the index this landing replaced",
        );
        for g in &left {
            watch.log(&format!(
                "landing: git process {} ({}) still runs; index.lock is released anyway (the \
                 next landing and the run's end repair an index it writes back)",
                g.pid,
                landing::describe(g)
            ));
        }
        drop(index_lock);
    }

    /// At the end of a run: repairs the main index if a git process wrote
    /// back a copy read before one of the run's `landings` (base, merge),
    /// under git's locks and outlasting the user's git as a landing does.
    /// Returns the merges whose entries were restored.
    pub(crate) fn settle_index(
        &self,
        target: &str,
        landings: &[(Oid, Oid)],
        watch: &dyn CheckoutWatch,
    ) -> Result<Vec<String>> {
        if landings.is_empty() {
            return Ok(Vec::new());
        }
        let wait = landing::LOCK_WAIT;
        let refname = branch_ref(target)?;
        let repo = self.repo()?;
        let admin = repo.path().to_path_buf();
        let head = repo.find_reference("HEAD")?;
        if head.symbolic_target()? != Some(refname.as_str()) {
            return Ok(Vec::new());
        }
        drop(head);
        drop(repo);
        let lock_path = admin.join("index.lock");
        let Some(index_lock) = landing::LockFile::acquire(&lock_path, wait)
            .map_err(|e| landing::io_error("creating", &lock_path, e))?
        else {
            watch.log(
                "run end: index.lock is held; the index was not checked against the run's landings",
            );
            return Ok(Vec::new());
        };
        let ref_lock_path = self.git_dir.join(format!("{refname}.lock"));
        let Some(ref_lock) = landing::LockFile::acquire(&ref_lock_path, wait)
            .map_err(|e| landing::io_error("creating", &ref_lock_path, e))?
        else {
            return Ok(Vec::new());
        };
        let left = landing::outlast(
            watch,
            watch.now(),
            wait,
            "it may write back the index it read before the run's last landing",
        );
        if !left.is_empty() {
            return Ok(Vec::new());
        }
        let repo = self.repo()?;
        let Some(tip) = tip(&repo, target)? else {
            return Ok(Vec::new());
        };
        let repaired = repair_stale_index(self, &repo, &admin, tip, landings);
        drop(ref_lock);
        self.outlast_then_release(watch, wait, index_lock);
        Ok(repaired?.into_iter().map(|o| o.to_string()).collect())
    }

    /// What the landing from `base` to `merge` changed, path by path; read
    /// once per run (a landing's changes never change).
    pub(super) fn changes_of(
        &self,
        repo: &git2::Repository,
        base: git2::Oid,
        merge: git2::Oid,
    ) -> Result<std::sync::Arc<Vec<landing::PathChange>>> {
        if let Some(c) = self.memo().changes.get(&(base, merge)) {
            return Ok(c.clone());
        }
        let changes = std::sync::Arc::new(landing_changes(repo, base, merge)?);
        self.memo().changes.insert((base, merge), changes.clone());
        Ok(changes)
    }

    /// Is `merge` on `tip`'s history? Each answer is kept while the target
    /// only gains commits: a tip that descends from the last one asked about
    /// holds every merge found on that one, so a landing walks only the
    /// commits new since the previous landing, not the run's whole history
    /// once per earlier landing.
    fn on_history(
        &self,
        repo: &git2::Repository,
        tip: git2::Oid,
        merge: git2::Oid,
    ) -> Result<bool> {
        let seen = self.memo().tip;
        if seen != Some(tip) {
            let kept = match seen {
                Some(old) => repo.graph_descendant_of(tip, old)?,
                None => false,
            };
            let mut memo = self.memo();
            if !kept {
                memo.on_tip.clear();
            }
            memo.tip = Some(tip);
        }
        if merge == tip || self.memo().on_tip.contains(&merge) {
            return Ok(true);
        }
        let on = repo.graph_descendant_of(tip, merge)?;
        if on {
            self.memo().on_tip.insert(merge);
        }
        Ok(on)
    }

    pub(super) fn memo(&self) -> std::sync::MutexGuard<'_, Memo> {
        self.memo.lock().unwrap_or_else(|e| e.into_inner())
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
    let (snapshot, new_index) = copy_index(admin)?;
    // The checkout must judge the user's changes by the index as it is now,
    // under the lock, and must not write it: ralph writes it below.
    let mut index = git2::Index::open(&new_index)?;
    landing::refresh_settled(&mut index, workdir, snapshot.stamp())?;
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
    smudge_racy(index, old)?;
    index.write()?;
    Ok(())
}

/// What `Git` keeps of the run's landings between calls.
#[derive(Debug, Default)]
pub(super) struct Memo {
    /// Each landing's changes, by (base, merge).
    pub(super) changes:
        std::collections::HashMap<(git2::Oid, git2::Oid), std::sync::Arc<Vec<landing::PathChange>>>,
    /// The tip `on_tip` was found on.
    tip: Option<git2::Oid>,
    /// Merges found on `tip`'s history.
    on_tip: std::collections::HashSet<git2::Oid>,
    /// Every merge base of a pair of commits (the lesser first), as
    /// `Git::merge_bases_of` found it.
    pub(super) bases: std::collections::HashMap<(git2::Oid, git2::Oid), Vec<git2::Oid>>,
}

/// What a landing from `base` to `merge` changed, path by path.
pub(super) fn landing_changes(
    repo: &git2::Repository,
    base: git2::Oid,
    merge: git2::Oid,
) -> Result<Vec<landing::PathChange>> {
    let bt = repo.find_commit(base)?.tree()?;
    let mt = repo.find_commit(merge)?.tree()?;
    let diff = repo.diff_tree_to_tree(Some(&bt), Some(&mt), None)?;
    let mut out = Vec::new();
    for d in diff.deltas() {
        let (old, new) = (d.old_file(), d.new_file());
        let Some(path) = new.path().or(old.path()) else {
            continue;
        };
        let id = |f: &git2::DiffFile<'_>| (!f.id().is_zero()).then(|| f.id());
        out.push(landing::PathChange {
            path: path.to_string_lossy().replace('\\', "/"),
            before: id(&old),
            after: id(&new),
            mode: u32::from(new.mode()),
        });
    }
    Ok(out)
}

/// When the main index is a stale copy against one of `earlier` landings
/// (base, merge) whose merge is on `tip`'s history (see
/// `landing::stale_against`), puts that landing's entries back: its blobs,
/// smudged, as a landing writes them. `index.lock` is held. Returns the
/// merges whose entries were restored.
pub(super) fn repair_stale_index(
    git: &Git,
    repo: &git2::Repository,
    admin: &Path,
    tip: git2::Oid,
    earlier: &[(Oid, Oid)],
) -> Result<Vec<git2::Oid>> {
    if earlier.is_empty() {
        return Ok(Vec::new());
    }
    let index_path = admin.join("index");
    let index = git2::Index::open(&index_path)?;
    let tip_tree = repo.find_commit(tip)?.tree()?;
    let mut fixes = Vec::new();
    for (base, merge) in earlier {
        let (base, merge) = (parse_oid(base)?, parse_oid(merge)?);
        if !git.on_history(repo, tip, merge)? {
            continue;
        }
        let changes = git.changes_of(repo, base, merge)?;
        let stale = landing::stale_against(
            &changes,
            |p| index.get_path(Path::new(p), 0).map(|e| e.id),
            |p| blob_at(&tip_tree, p),
        );
        if stale {
            fixes.push((merge, changes));
        }
    }
    drop(index);
    if fixes.is_empty() {
        return Ok(Vec::new());
    }
    rewrite_index(admin, |index| {
        for (_, changes) in &fixes {
            for c in changes.iter() {
                match c.after {
                    Some(id) => index.add(&landing::smudged_entry(&c.path, id, c.mode))?,
                    None => index.remove_path(Path::new(&c.path))?,
                }
            }
        }
        Ok(())
    })?;
    Ok(fixes.into_iter().map(|(m, _)| m).collect())
}

/// `what` failing on `path`, as a landing's error.
fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> GitError {
    let path = path.to_path_buf();
    move |e| landing::io_error(what, &path, e)
}

/// The main index as it is now (`index.lock` held), copied beside it where
/// the new one is built: the snapshot puts it back, the copy is edited.
fn copy_index(admin: &Path) -> Result<(landing::IndexSnapshot, PathBuf)> {
    let index_path = admin.join("index");
    let snapshot = landing::IndexSnapshot::read(&index_path).map_err(io("reading", &index_path))?;
    let new_index = landing::new_index_path(admin);
    landing::clear_new_index(admin).map_err(io("cleaning", admin))?;
    snapshot
        .write_to(&new_index)
        .map_err(io("writing", &new_index))?;
    Ok((snapshot, new_index))
}

/// Rewrites the main index (`index.lock` held) through `edit`, as a
/// landing writes it: beside it, racily clean entries smudged, renamed in.
fn rewrite_index(admin: &Path, edit: impl FnOnce(&mut git2::Index) -> Result<()>) -> Result<()> {
    let index_path = admin.join("index");
    let (snapshot, new_index) = copy_index(admin)?;
    let written = (|| {
        let mut index = git2::Index::open(&new_index)?;
        edit(&mut index)?;
        smudge_racy(&mut index, &snapshot)?;
        index.write()?;
        std::fs::rename(&new_index, &index_path).map_err(io("renaming", &new_index))
    })();
    if written.is_err() {
        let _ = landing::clear_new_index(admin);
    }
    written
}

/// Entries racily clean against the old index's timestamp lose their stat
/// data: the new index file is newer and would otherwise vouch for them.
fn smudge_racy(index: &mut git2::Index, old: &landing::IndexSnapshot) -> Result<()> {
    for mut e in landing::racy_entries(index.iter(), old.stamp()) {
        e.ctime = git2::IndexTime::new(0, 0);
        e.mtime = git2::IndexTime::new(0, 0);
        e.file_size = 0;
        index.add(&e)?;
    }
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
