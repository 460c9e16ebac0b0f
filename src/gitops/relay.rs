//! The relay: the git remote that carries an attempt's work between the
//! coordinator and a worker on another machine (issue 23). Work never
//! travels by a shared disk: the coordinator pushes the base it hands out,
//! the worker fetches it, works, and pushes its result back under the
//! project's own namespace `refs/ralph/<project>/…`.
//!
//! Transport is the `git` CLI (through `process`, as `landing.mode: pr`
//! does): the vendored libgit2 here is built without https and ssh, and the
//! relay must be reached with the user's own credentials (helpers, ssh keys)
//! on every node. What stays here is the naming (pure) and the local checks
//! with git2 on what came back.

use super::*;

/// The relay refs of one attempt, under `refs/ralph/<project>/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RelayRefs {
    /// `…/base/<id>/<n>`: the target tip the attempt starts from.
    pub(crate) base: String,
    /// `…/work/<id>/<n>`: a fix-up's kept work.
    pub(crate) work: String,
    /// `…/out/<id>/<n>`: the story branch as the worker left it.
    pub(crate) out: String,
    /// `…/progress/<id>/<n>`: the agent's commits so far, pushed while it
    /// runs: what outlives a node that dies mid-attempt.
    pub(crate) progress: String,
    /// `…/kept/<id>/<n>/`: the refs keeping what the agent left, each under
    /// its local name without `refs/ralph/`.
    pub(crate) kept: String,
    /// `…/tracker/<id>/<n>`: a blob, the coordinator's snapshot of an issue
    /// tracker's backlog (a node reads no tracker itself).
    pub(crate) tracker: String,
}

/// The project's part of the relay namespace: `tag` is the project tag
/// (`ralph-1a2b3c4d-`), used without its trailing dash.
pub(crate) fn relay_prefix(tag: &str) -> String {
    format!("refs/ralph/{}/", tag.trim_end_matches('-'))
}

pub(crate) fn relay_refs(tag: &str, id: &str, n: u32) -> RelayRefs {
    let p = relay_prefix(tag);
    RelayRefs {
        base: format!("{p}base/{id}/{n}"),
        work: format!("{p}work/{id}/{n}"),
        out: format!("{p}out/{id}/{n}"),
        progress: format!("{p}progress/{id}/{n}"),
        kept: format!("{p}kept/{id}/{n}/"),
        tracker: format!("{p}tracker/{id}/{n}"),
    }
}

/// The relay name of a local kept ref (`refs/ralph/attempts/…`), `None`
/// for refs outside `refs/ralph/`.
pub(crate) fn kept_on_relay(refs: &RelayRefs, local: &str) -> Option<String> {
    let rest = local.strip_prefix(crate::project::KEPT_REFS)?;
    Some(format!("{}{rest}", refs.kept))
}

/// Where a fetched relay ref waits locally for its checks: outside
/// `refs/ralph/`, so no scan of kept work ever sees it.
pub(crate) fn landing_pad(tag: &str, id: &str, n: u32) -> String {
    format!("refs/ralph-relay/{}/{id}/{n}", tag.trim_end_matches('-'))
}

/// Where the end-of-run sweep mirrors the project's relay namespace
/// locally before it decides what to keep (outside `refs/ralph/`).
pub(crate) fn sweep_pad(tag: &str) -> String {
    format!("refs/ralph-relay/{}/sweep/", tag.trim_end_matches('-'))
}

/// What the sweep does with one relay ref it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sweep {
    /// Nothing of it is needed here: delete it on the relay.
    Drop,
    /// Keep it locally under this ref (absent there), then delete it.
    Keep(String),
    /// Not ralph's to judge (an unknown name): left alone.
    Leave,
}

/// The sweep's decision for relay ref `rel` (its name below the project's
/// relay prefix): bases and a fix-up's work copies are the coordinator's
/// own; a collected attempt's result is on its story branch already; what
/// a worker kept, and the result of an attempt nobody collected (its
/// coordinator died, or the collection failed), come home as kept refs.
/// `collected` says whether attempt `n` of story `id` was collected.
pub(crate) fn sweep_decision(rel: &str, collected: impl Fn(&str, u32) -> bool) -> Sweep {
    let mut parts = rel.splitn(4, '/');
    let (kind, id, n) = (parts.next(), parts.next(), parts.next());
    let (Some(kind), Some(id), Some(n)) = (kind, id, n.and_then(|n| n.parse::<u32>().ok())) else {
        return Sweep::Leave;
    };
    let rest = parts.next();
    match (kind, rest) {
        // `validate/<merge>/<k>`: a candidate's merge the coordinator made
        // and can make again (its stories' work is on their branches).
        ("base" | "work" | "tracker" | "validate", None) => Sweep::Drop,
        ("out" | "progress", None) if collected(id, n) => Sweep::Drop,
        ("progress", None) => Sweep::Keep(crate::project::kept_ref(
            crate::project::KeptRef::Interrupted,
            id,
            n,
        )),
        ("out", None) => Sweep::Keep(crate::project::kept_ref(
            crate::project::KeptRef::Attempt,
            id,
            n,
        )),
        ("kept", Some(local)) if !local.is_empty() => {
            Sweep::Keep(format!("{}{local}", crate::project::KEPT_REFS))
        }
        _ => Sweep::Leave,
    }
}

/// A relay URL that carries a password or token (`https://user:tok@host`)
/// would end up in the job spec a cluster shows to anyone: refused.
pub(crate) fn url_has_credentials(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or("");
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

impl Git {
    /// The URL of remote `name` (the relay), as the nodes must reach it.
    pub(crate) fn remote_url(&self, name: &str) -> Result<Option<String>> {
        let repo = self.repo()?;
        let url = match repo.find_remote(name) {
            Ok(r) => Ok(r.url().ok().map(str::to_string)),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        };
        url
    }

    /// The commit `refname` points at, if it exists.
    pub(crate) fn ref_target(&self, refname: &str) -> Result<Option<Oid>> {
        let repo = self.repo()?;
        let found = match repo.find_reference(refname) {
            Ok(r) => Ok(r.peel_to_commit().ok().map(|c| c.id().to_string())),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        };
        found
    }

    /// True when `commit` is `base` or has it in its history: work a worker
    /// sent back must grow from the base it was given.
    pub(crate) fn descends_from(&self, commit: &Oid, base: &Oid) -> Result<bool> {
        let repo = self.repo()?;
        let (c, b) = (parse_oid(commit)?, parse_oid(base)?);
        Ok(c == b || repo.graph_descendant_of(c, b)?)
    }

    /// Points local branch `branch` at `commit` (created or moved).
    pub(crate) fn set_branch(&self, branch: &str, commit: &Oid) -> Result<()> {
        let repo = self.repo()?;
        let c = repo.find_commit(parse_oid(commit)?)?;
        repo.branch(branch, &c, true)?;
        Ok(())
    }

    /// Points `refname` at `commit` unless it exists; true when it now
    /// points there (made, or already there).
    pub(crate) fn create_ref_if_absent(&self, refname: &str, commit: &Oid) -> Result<bool> {
        let repo = self.repo()?;
        let c = parse_oid(commit)?;
        if let Some(have) = self.ref_target(refname)? {
            return Ok(have == *commit);
        }
        repo.reference(refname, c, false, "ralph: kept from the relay")?;
        Ok(true)
    }

    /// The commit a worktree's HEAD is at (whatever branch or stand-in it
    /// has checked out).
    pub(crate) fn head_of(worktree: &Path) -> Option<Oid> {
        let repo = git2::Repository::open(worktree).ok()?;
        let head = repo.head().ok()?.peel_to_commit().ok()?;
        Some(head.id().to_string())
    }

    /// Deletes `refname` when it exists.
    pub(crate) fn delete_ref(&self, refname: &str) -> Result<()> {
        let repo = self.repo()?;
        let deleted = match repo.find_reference(refname) {
            Ok(mut r) => r.delete().map_err(GitError::from),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        };
        deleted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_live_under_the_project_namespace() {
        let r = relay_refs("ralph-1a2b3c4d-", "1.2", 3);
        assert_eq!(r.base, "refs/ralph/ralph-1a2b3c4d/base/1.2/3");
        assert_eq!(r.out, "refs/ralph/ralph-1a2b3c4d/out/1.2/3");
        assert_eq!(
            kept_on_relay(&r, "refs/ralph/attempts/1.2/3-uncommitted").as_deref(),
            Some("refs/ralph/ralph-1a2b3c4d/kept/1.2/3/attempts/1.2/3-uncommitted")
        );
        assert_eq!(kept_on_relay(&r, "refs/heads/x"), None);
        // Kept-ref scans (`refs/ralph/attempts|conflicts/…`) never see relay refs.
        assert_eq!(crate::project::kept_ref_attempt(&r.out), None);
        assert!(!landing_pad("ralph-1a2b3c4d-", "1.2", 3).starts_with("refs/ralph/"));
    }

    #[test]
    fn the_sweep_keeps_what_no_one_collected() {
        let collected = |id: &str, n: u32| id == "1.1" && n == 1;
        assert_eq!(sweep_decision("base/1.2/3", collected), Sweep::Drop);
        assert_eq!(sweep_decision("work/1.2/3", collected), Sweep::Drop);
        assert_eq!(sweep_decision("tracker/1.2/3", collected), Sweep::Drop);
        assert_eq!(
            sweep_decision(&format!("validate/{}/2", "a".repeat(40)), collected),
            Sweep::Drop
        );
        assert_eq!(sweep_decision("out/1.1/1", collected), Sweep::Drop);
        assert_eq!(sweep_decision("progress/1.1/1", collected), Sweep::Drop);
        assert_eq!(
            sweep_decision("progress/1.2/1", collected),
            Sweep::Keep("refs/ralph/attempts/1.2/1-interrupted".into())
        );
        assert_eq!(
            sweep_decision("out/1.1/2", collected),
            Sweep::Keep("refs/ralph/attempts/1.1/2".into())
        );
        assert_eq!(
            sweep_decision("kept/1.1/1/attempts/1.1/1-uncommitted", collected),
            Sweep::Keep("refs/ralph/attempts/1.1/1-uncommitted".into())
        );
        assert_eq!(sweep_decision("kept/1.1/1/", collected), Sweep::Leave);
        assert_eq!(sweep_decision("other/x", collected), Sweep::Leave);
        assert_eq!(sweep_decision("out/1.1/x", collected), Sweep::Leave);
        assert!(!sweep_pad("ralph-1a2b3c4d-").starts_with("refs/ralph/"));
    }

    #[test]
    fn credentials_in_a_url_are_seen() {
        assert!(url_has_credentials("https://me:tok@example.com/r.git"));
        assert!(!url_has_credentials("https://me@example.com/r.git"));
        assert!(!url_has_credentials("git@example.com:r.git"));
        assert!(!url_has_credentials("git://127.0.0.1:9418/r.git"));
        assert!(!url_has_credentials("/srv/relay.git"));
    }
}
