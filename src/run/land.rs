//! The merge queue's work for one story: merge it onto the target's tip
//! (with its spec's `status: done` edit), validate the merged tree, write
//! the landing intent, move the target with a compare-and-swap that also
//! updates the main checkout, and tidy up after a landing. The transition
//! decides the order; git work runs on blocking threads.

use std::sync::Arc;

use tokio::sync::watch;

use crate::backlog::{mark_done, Story};
use crate::gitops::{CheckoutWatch, GitError, LandOutcome, MergeOutcome, Oid, UserGit};
use crate::process::{self, Control};
use crate::project::{self, KeptRef};
use crate::prompt;
use crate::store;

use super::context::{blocking, env_pairs, RunContext};
use super::events::{GateAsk, LandPlan, LandResult};
use super::intent::LandingIntent;
use super::landed::check_landed_work;

/// Rounds of merge → validate → compare-and-swap before giving up on a
/// target that keeps moving under the queue.
pub(super) const ROUNDS: usize = 5;

/// Extra rounds a landing waits for someone else's git lock (each `land`
/// waits about 5 s itself) before the run ends and leaves it for the next.
pub(super) const LAND_BUSY_ROUNDS: u32 = 2;

/// One story to land.
#[derive(Debug, Clone)]
pub(crate) struct LandRequest {
    /// The story's index in the run's model: what its result is keyed by.
    pub(crate) idx: usize,
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) attempt: u32,
    /// The story's spec, repository-relative, when it is a file to edit.
    pub(crate) spec_rel: Option<String>,
    /// prd.json, repository-relative, when the backlog is one.
    pub(crate) prd_rel: Option<String>,
    /// Approved from review during the run (`ralph land ID`): it lands.
    pub(crate) approved: bool,
    /// The gates to run before validation (the transition's `gates::ask`).
    pub(crate) gates: GateAsk,
    /// Where the validated work goes (the transition's `landing::plan`).
    pub(crate) plan: LandPlan,
}

impl LandRequest {
    pub(crate) fn new(
        ctx: &RunContext,
        idx: usize,
        story: &Story,
        attempt: u32,
        gates: GateAsk,
    ) -> LandRequest {
        let spec_rel = story
            .spec_path
            .as_ref()
            .and_then(|p| ctx.git.rel_path(&ctx.root.join(p)));
        let prd_rel = if ctx.prd {
            ctx.git.rel_path(&ctx.root.join(crate::paths::PRD))
        } else {
            None
        };
        LandRequest {
            idx,
            id: story.id.clone(),
            title: story.title.clone(),
            attempt,
            spec_rel,
            prd_rel,
            approved: false,
            gates,
            plan: Default::default(),
        }
    }
}

/// Lands one story; never panics the caller.
pub(crate) async fn land(
    ctx: &Arc<RunContext>,
    req: &LandRequest,
    control: watch::Receiver<Control>,
) -> LandResult {
    if *control.borrow() != Control::Run {
        return LandResult::Interrupted;
    }
    let mut approval = None;
    let result = land_rounds(ctx, req, control, &mut approval).await;
    if let LandResult::Landed { .. } = &result {
        let req = req.clone();
        let _ = blocking(ctx, move |c| {
            after_landing(c, &req);
            check_landed_work(c);
            crate::allocator::give_back();
        })
        .await;
    }
    match approval {
        // The reviewer approved: its cost and verdict travel with the end.
        Some(review) => LandResult::Reviewed {
            review,
            then: Some(Box::new(result)),
            saved_ref: None,
        },
        None => result,
    }
}

/// After a chain landed: each story's branch goes and its spec is marked
/// done on disk, then the landed work is checked once.
pub(super) async fn after_chain(ctx: &Arc<RunContext>, reqs: Vec<LandRequest>) {
    let _ = blocking(ctx, move |c| {
        for req in &reqs {
            after_landing(c, req);
        }
        check_landed_work(c);
        crate::allocator::give_back();
    })
    .await;
}

/// The user's git processes on the main checkout, for a landing to outlast
/// (`gitops::landing`): read from `/proc` by `process`.
pub(crate) struct Watch<'a> {
    checkout: process::GitCheckout,
    log: &'a crate::store::TechLog,
    /// The story a landing lands, and its project root: a landing whose
    /// merge is made again on the user's new commits records that intent.
    landing: Option<(&'a std::path::Path, String)>,
}

impl<'a> Watch<'a> {
    pub(crate) fn new(ctx: &'a RunContext) -> Watch<'a> {
        Watch::of(&ctx.git, &ctx.root, &ctx.log)
    }

    /// The watch of a story's landing: its merge may be made again on
    /// commits the user added while it was validated.
    pub(super) fn landing(ctx: &'a RunContext, story: &str) -> Watch<'a> {
        Watch {
            landing: Some((&ctx.root, story.to_string())),
            ..Watch::new(ctx)
        }
    }

    /// The watch of the main checkout of `git` (project `root`), for any
    /// command that writes it as a landing does (`ralph reset ID`).
    pub(crate) fn of(
        git: &crate::gitops::Git,
        root: &std::path::Path,
        log: &'a crate::store::TechLog,
    ) -> Watch<'a> {
        Watch {
            checkout: process::GitCheckout::new(
                &git.workdir,
                &git.git_dir,
                &crate::paths::worktrees_dir(root),
            ),
            log,
            landing: None,
        }
    }
}

impl CheckoutWatch for Watch<'_> {
    fn now(&self) -> u64 {
        process::ticks_now()
    }

    fn git_processes(&self) -> Vec<UserGit> {
        self.checkout
            .git_processes()
            .into_iter()
            .map(|g| UserGit {
                pid: g.pid,
                started: g.started,
                argv: g.argv,
            })
            .collect()
    }

    fn log(&self, line: &str) {
        self.log.line(line);
    }

    fn relanding(&self, base: &str, merge: &str) -> bool {
        let Some((root, story)) = &self.landing else {
            return false;
        };
        // No intent, no landing: a crash mid-checkout must be undone
        // against the merge actually being landed.
        LandingIntent {
            story: story.clone(),
            base: base.to_string(),
            commit: merge.to_string(),
        }
        .write(root)
        .map_err(|e| self.log.line(&e))
        .is_ok()
    }
}

/// The end of a run: an index a straggling git process wrote back from
/// before a landing is repaired, and landed work reverted since is checked
/// once more.
pub(crate) fn after_run(ctx: &RunContext) {
    let landed = ctx.landed.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if landed.is_empty() || ctx.pr.is_some() {
        return;
    }
    let pairs: Vec<(Oid, Oid)> = landed
        .iter()
        .map(|(_, b, m)| (b.clone(), m.clone()))
        .collect();
    match ctx.git.settle_index(&ctx.target, &pairs, &Watch::new(ctx)) {
        Ok(repaired) => {
            for m in repaired {
                ctx.log.line(&format!(
                    "run end: the main checkout's index was a copy from before the landing of \
                     {m}; its entries for that landing's paths are restored"
                ));
            }
        }
        Err(e) => ctx
            .log
            .line(&format!("run end: checking the main index: {e}")),
    }
    check_landed_work(ctx);
}

/// `landing.mode: pr`: the validated story branch is pushed to the remote
/// and proposed with `gh pr create` (title from the story, body from its
/// spec); the story is done once the pull request is merged.
async fn open_pull_request(
    ctx: &Arc<RunContext>,
    req: &LandRequest,
    pr: &super::context::PrLanding,
) -> LandResult {
    let q = prompt::shell_quote;
    let branch = project::story_branch(&req.id);
    let body_path = crate::paths::pull_request_body(&ctx.root, &req.id);
    let spec = req
        .spec_rel
        .as_ref()
        .and_then(|rel| std::fs::read_to_string(ctx.git.workdir.join(rel)).ok())
        .unwrap_or_default();
    let mut body = format!(
        "Story {} landed by ralph after its validation passed on `{}`.\n\n{}",
        req.id,
        ctx.target,
        crate::postmortem::head_bytes(&spec, 8_000)
    );
    // A story of GitHub Issues: merging the pull request closes its issue.
    if matches!(ctx.config.backlog, crate::config::BacklogSource::GitHub(_)) {
        body = format!("Closes #{}\n\n{body}", req.id);
    }
    if let Some(dir) = body_path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = std::fs::write(&body_path, body) {
        return LandResult::Error(format!("cannot write {}: {e}", body_path.display()));
    }
    let cmd = format!(
        "git push --quiet {remote} {b}:refs/heads/{b} && {gh} pr create --head {b} --base {target} --title {title} --body-file {body}",
        remote = q(&pr.remote),
        b = q(&branch),
        gh = q(&pr.gh),
        target = q(&ctx.target),
        title = q(&format!("{}: {}", req.id, req.title)),
        body = q(&body_path.display().to_string()),
    );
    let ran = process::run_shell(
        &cmd,
        ctx.root.clone(),
        Vec::new(),
        std::time::Duration::from_secs(600),
    )
    .await;
    match ran {
        Ok(r) if r.success => {
            let url = r
                .tail
                .lines()
                .rev()
                .find(|l| l.trim().starts_with("http"))
                .unwrap_or("")
                .trim()
                .to_string();
            LandResult::InPr { url }
        }
        Ok(r) => LandResult::Error(format!(
            "opening the pull request of story {} failed (`git push` to {} or `gh pr create`): {}",
            req.id,
            pr.remote,
            r.tail.trim()
        )),
        Err(e) => LandResult::Error(format!("cannot run git push / gh: {e}")),
    }
}

/// Validated work the transition's plan sends elsewhere than the target:
/// kept for a person (the merge was only checked), or a pull request.
async fn not_landed(ctx: &Arc<RunContext>, req: &LandRequest) -> Option<LandResult> {
    match (req.plan, &ctx.pr) {
        (LandPlan::Land, _) => None,
        (LandPlan::Review, _) => Some(LandResult::InReview),
        (LandPlan::PullRequest, Some(pr)) => Some(open_pull_request(ctx, req, pr).await),
        (LandPlan::PullRequest, None) => Some(LandResult::Error(
            "internal error: a pull request was asked for without landing.mode pr".to_string(),
        )),
    }
}

async fn land_rounds(
    ctx: &Arc<RunContext>,
    req: &LandRequest,
    control: watch::Receiver<Control>,
    approval: &mut Option<super::events::ReviewReport>,
) -> LandResult {
    let branch = project::story_branch(&req.id);
    for _round in 0..ROUNDS {
        let merged = merge_for_landing(ctx, req, None).await;
        let (commit, base) = match merged {
            Ok(Ok(MergeOutcome::Merged { commit, base })) => (commit, base),
            Ok(Ok(MergeOutcome::Conflict { paths })) => {
                let saved = keep(ctx, &branch, KeptRef::Conflict, req).await;
                return LandResult::Conflict {
                    paths,
                    saved_ref: saved,
                };
            }
            Ok(Err(GitError::Sign(e))) => return LandResult::Unsigned { message: e.message },
            Ok(Err(e)) => return LandResult::Error(e.to_string()),
            Err(e) => return LandResult::Error(e),
        };
        // Before validation: weakened checks are not worth running.
        let findings = gate_findings(ctx, req, &commit).await;
        if !findings.is_empty() {
            let saved = keep(ctx, &branch, KeptRef::Attempt, req).await;
            return LandResult::Gated {
                findings,
                saved_ref: saved,
            };
        }
        if !ctx.required_validation.is_empty() {
            let started = std::time::Instant::now();
            let tree =
                super::candidate::validate_start(ctx, &commit, vec![req.id.clone()], 0).await;
            let (failed, node) = super::candidate::validate_tree(
                ctx,
                &req.id,
                req.attempt,
                &commit,
                &base,
                control.clone(),
                0,
            )
            .await;
            let failed = match failed {
                Some(failure) => Some(blamed(ctx, req, failure).await),
                None => None,
            };
            let verdict = match &failed {
                None => "passed",
                Some(LandResult::ValidationFailed { .. }) => "failed",
                Some(_) => "stopped",
            };
            let stories = vec![req.id.clone()];
            super::candidate::validate_end(ctx, tree, stories, verdict, started, node);
            ctx.record(crate::runlog::Ev::Validated {
                story: req.id.clone(),
                attempt: req.attempt,
                secs: started.elapsed().as_secs_f64(),
                ok: failed.is_none(),
            });
            if let Some(fail) = failed {
                return fail;
            }
        }
        // Once per landing: a round that lost the race to a moving target
        // does not ask again.
        // A person's approval in this run stands for the reviewer's too.
        if let (Some(gate), None, false) = (&req.gates.review, &approval, req.approved) {
            let review = run_reviewer(ctx, req, gate, &commit, &base, control.clone()).await;
            match review {
                Err(result) => return result,
                Ok(r) if r.verdict == super::events::ReviewVerdict::Approve => *approval = Some(r),
                Ok(r) => {
                    let saved = keep(ctx, &branch, KeptRef::Attempt, req).await;
                    return LandResult::Reviewed {
                        review: r,
                        then: None,
                        saved_ref: saved,
                    };
                }
            }
        }
        if let Some(elsewhere) = not_landed(ctx, req).await {
            return elsewhere;
        }
        let intent = LandingIntent {
            story: req.id.clone(),
            base: base.clone(),
            commit: commit.clone(),
        };
        // Without the intent a crash mid-checkout could not be undone: no
        // intent, no landing.
        if let Err(e) = intent.write(&ctx.root) {
            return LandResult::Error(e);
        }
        let landed = land_waiting(ctx, &base, &commit, &req.id, &control).await;
        let _ = std::fs::remove_file(crate::paths::landing_intent_path(&ctx.root));
        match landed {
            Ok(Ok(outcome @ (LandOutcome::Landed | LandOutcome::LandedOnTop { .. }))) => {
                // Made again on the user's new commits, the merge that landed
                // is another than the one validated, on another base.
                let (base, commit) = match outcome {
                    LandOutcome::LandedOnTop { base, commit } => (base, commit),
                    _ => (base, commit),
                };
                ctx.landed.lock().unwrap_or_else(|e| e.into_inner()).push((
                    req.id.clone(),
                    base,
                    commit.clone(),
                ));
                return LandResult::Landed { commit };
            }
            Ok(Ok(LandOutcome::TargetMoved { .. })) => continue,
            Ok(Ok(LandOutcome::CheckoutBlocked { paths })) => {
                return LandResult::CheckoutBlocked { paths }
            }
            Ok(Ok(LandOutcome::Busy { .. })) if *control.borrow() != Control::Run => {
                return LandResult::Interrupted
            }
            Ok(Ok(LandOutcome::Busy { lock, holder })) => return LandResult::Busy { lock, holder },
            Ok(Err(e)) => return LandResult::Error(e.to_string()),
            Err(e) => return LandResult::Error(e),
        }
    }
    LandResult::Raced
}

/// `land_once`, again while someone else's git holds a lock of the main
/// checkout (a commit in progress, say): not the story's failure. Each try
/// waited a while already; this waits on a bounded number of times, unless
/// the run stops, and removes a lock that turns out stale at once.
pub(super) async fn land_waiting(
    ctx: &Arc<RunContext>,
    base: &Oid,
    tip: &Oid,
    id: &str,
    control: &watch::Receiver<Control>,
) -> Result<crate::gitops::Result<LandOutcome>, String> {
    let mut busy = 0;
    loop {
        let landed = land_once(ctx, base, tip, id).await;
        let Ok(Ok(LandOutcome::Busy { lock, holder })) = &landed else {
            return landed;
        };
        if *control.borrow() != Control::Run || busy >= LAND_BUSY_ROUNDS {
            return landed;
        }
        busy += 1;
        let stray = lock.clone();
        let removed = holder.is_none()
            && blocking(ctx, move |c| {
                super::recover::remove_stale_lock_now(&c.root, &c.git, &stray, &c.log)
            })
            .await
            .unwrap_or(false);
        if removed {
            continue;
        }
        match holder {
            Some(h) => ctx.log.line(&format!(
                "landing {id}: {h} in the main checkout may write back an index read \
                 before the landing; waiting"
            )),
            None => ctx.log.line(&format!(
                "landing {id}: {} is held by another git process; waiting",
                lock.display()
            )),
        }
    }
}

/// The story's merge with its spec's `status: done` edit, onto the
/// target's tip, or onto `onto` (a chain's merge before it).
pub(super) async fn merge_for_landing(
    ctx: &Arc<RunContext>,
    req: &LandRequest,
    onto: Option<Oid>,
) -> Result<crate::gitops::Result<MergeOutcome>, String> {
    let r = req.clone();
    blocking(ctx, move |c| {
        let paths: Vec<String> = r.spec_rel.iter().chain(&r.prd_rel).cloned().collect();
        let edit = mark_done::landing_edit(
            r.spec_rel.clone(),
            r.prd_rel.clone(),
            c.config.specs.status_field.clone(),
            r.id.clone(),
        );
        let (branch, message) = (
            project::story_branch(&r.id),
            project::merge_message(&r.id, &r.title),
        );
        match &onto {
            Some(base) => c
                .git
                .merge_story_onto(base, &branch, &message, &paths, &edit),
            None => c
                .git
                .merge_story(&c.target, &branch, &message, &paths, &edit),
        }
    })
    .await
}

/// One try at moving the target from `base` to `tip` through the landing
/// protocol (a story's merge, or the top of a chain), with the run's
/// landed merges for the stale-index repair.
pub(super) async fn land_once(
    ctx: &Arc<RunContext>,
    base: &Oid,
    tip: &Oid,
    id: &str,
) -> Result<crate::gitops::Result<LandOutcome>, String> {
    let (b, t, id) = (base.clone(), tip.clone(), id.to_string());
    blocking(ctx, move |c| {
        let earlier: Vec<(Oid, Oid)> = c
            .landed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(_, b, m)| (b.clone(), m.clone()))
            .collect();
        c.git
            .land_watched(&c.target, &b, &t, &Watch::landing(c, &id), &earlier)
    })
    .await
}

/// What the gates the transition asked for find on the story's work and
/// the merged tree `commit`. A gate that cannot read git says so in
/// ralph.log and finds a `GateError`, which the transition sends to review:
/// a gate that could not look must not pass the work.
pub(super) async fn gate_findings(
    ctx: &Arc<RunContext>,
    req: &LandRequest,
    commit: &Oid,
) -> Vec<crate::gates::Finding> {
    if !req.gates.tests && req.gates.other_side_of.is_none() {
        return Vec::new();
    }
    let started = std::time::Instant::now();
    let (r, commit) = (req.clone(), commit.clone());
    let found = blocking(
        ctx,
        move |c| -> Result<Vec<crate::gates::Finding>, GitError> {
            let mut found = Vec::new();
            if r.gates.tests {
                let patterns = crate::gates::Patterns::new(&c.config.gates.patterns)
                    .map_err(|e| GitError::Other(e.message))?;
                if let Some(diff) = c.git.story_diff(&c.target, &project::story_branch(&r.id))? {
                    found.extend(crate::gates::test_integrity(&diff, &patterns));
                }
            }
            if let Some(work) = &r.gates.other_side_of {
                if let Some((other, merged)) = c.git.other_side(work, &c.target, &commit)? {
                    found.extend(crate::gates::lost_lines(&other, &merged));
                }
            }
            Ok(found)
        },
    )
    .await;
    ctx.record(crate::runlog::Ev::GateChecked {
        story: req.id.clone(),
        attempt: req.attempt,
        secs: started.elapsed().as_secs_f64(),
        findings: match &found {
            Ok(Ok(f)) => f.len(),
            _ => 0,
        },
    });
    let what = match found {
        Ok(Ok(f)) => return f,
        Ok(Err(e)) => format!("the gates could not read git: {e}"),
        Err(e) => format!("the gates did not run: {e}"),
    };
    ctx.log.line(&format!("story {}: {what}", req.id));
    vec![crate::gates::Finding {
        kind: crate::gates::FindingKind::GateError,
        file: String::new(),
        line: None,
        what,
    }]
}

/// Keeps the story branch's commits under a ref of `kind`.
pub(super) async fn keep(
    ctx: &Arc<RunContext>,
    branch: &str,
    kind: KeptRef,
    req: &LandRequest,
) -> Option<String> {
    let r = project::kept_ref(kind, &req.id, req.attempt);
    let (b, r2) = (branch.to_string(), r.clone());
    match blocking(ctx, move |c| c.git.save_ref(&b, &r2)).await {
        Ok(Ok(())) => Some(r),
        _ => None,
    }
}

/// After the ref moved: the story branch goes (its work is on the target),
/// and a spec git does not track gets its `status: done` on disk.
fn after_landing(ctx: &RunContext, req: &LandRequest) {
    let _ = ctx.git.delete_branch(&project::story_branch(&req.id));
    let head = ctx.git.head_branch().ok().flatten();
    if head.as_deref() == Some(ctx.target.as_str()) {
        mark_done::finish_on_disk(
            req.spec_rel.as_deref().map(|s| ctx.git.workdir.join(s)),
            req.prd_rel.as_deref().map(|p| ctx.git.workdir.join(p)),
            &ctx.config.specs.status_field,
            &req.id,
            store::write_atomic,
        );
    }
}

/// Most of a diff a reviewer is shown.
const REVIEW_DIFF_BYTES: usize = 60_000;

/// The review gate's reviewer on the merged tree: the spec, the diff
/// against the target and the validation output in, a verdict out. It runs
/// in the merge queue's scratch worktree (what it writes there is thrown
/// away; the landing lands `commit`, never that worktree), sealed as an
/// agent when the run seals. `Err` is a landing that cannot go on.
async fn run_reviewer(
    ctx: &Arc<RunContext>,
    req: &LandRequest,
    gate: &crate::config::ReviewGate,
    commit: &Oid,
    base: &Oid,
    control: watch::Receiver<Control>,
) -> Result<super::events::ReviewReport, LandResult> {
    use super::events::{ReviewReport, ReviewVerdict};
    let path = super::candidate::merged_tree(ctx, commit, base, 0).await?;
    let (c1, b1) = (commit.clone(), base.clone());
    let diff = blocking(ctx, move |c| c.git.patch_text(&b1, &c1, REVIEW_DIFF_BYTES))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let spec = req
        .spec_rel
        .as_ref()
        .and_then(|rel| std::fs::read_to_string(path.join(rel)).ok())
        .unwrap_or_else(|| format!("# Story {}: {}\n", req.id, req.title));
    let validation = crate::executor::validate::output_since(
        &crate::paths::validation_log_path(&ctx.root, &req.id, req.attempt),
        0,
    )
    .map(|o| prompt::output_tail(&o))
    .unwrap_or_default();
    let text = prompt::review_prompt(&prompt::ReviewInput {
        id: &req.id,
        title: &req.title,
        target: &ctx.target,
        spec: &spec,
        diff: &diff,
        validation: &validation,
    });
    let backend = gate.agent;
    let (program, mut args) = crate::agent::invocation(&ctx.config.agent, backend);
    if let Some(m) = &gate.model {
        args.push("--model".to_string());
        args.push(m.clone());
    }
    let log = crate::paths::review_log(&ctx.root, &req.id, req.attempt);
    let log_rel = log
        .strip_prefix(&ctx.root)
        .unwrap_or(&log)
        .display()
        .to_string();
    let _ = std::fs::remove_file(&log);
    let (p2, prog2) = (path.clone(), program.clone());
    let seal = blocking(ctx, move |c| {
        c.seal.for_agent(
            &c.git,
            backend,
            &prog2,
            crate::paths::VALIDATE_WORKTREE,
            &p2,
            project::VALIDATE_BRANCH,
        )
    })
    .await
    .and_then(|r| r)
    .map_err(|e| {
        LandResult::Error(format!(
            "could not seal the reviewer of story {}: {e}",
            req.id
        ))
    })?;
    let review_id = format!("{}.review", req.id);
    let spec = process::AttemptSpec {
        program,
        args,
        cwd: path.clone(),
        env: env_pairs(&[
            ("RALPH_STORY", &req.id),
            ("RALPH_REVIEW", "1"),
            ("RALPH_WORKTREE", &path.display().to_string()),
            ("RALPH_PROJECT_DIR", &ctx.root.display().to_string()),
        ]),
        // The reviewer is an agent like any: no tracker token either.
        env_remove: crate::sandbox::agent_env_remove(backend.env_remove()),
        stdin: text.into_bytes(),
        log_path: log.clone(),
        timeout: ctx.timeout,
        idle: None,
        grace: std::time::Duration::from_secs(ctx.config.loop_.grace_secs),
        token: project::attempt_token(&ctx.tag, &review_id, req.attempt),
        seal,
        redact: ctx.seal.secrets.clone(),
    };
    let mut parser = crate::agent::parser::OutputParser::for_backend(backend);
    let ran = process::run_attempt(
        spec,
        |line| {
            parser.feed_line(line);
            false
        },
        control.clone(),
    )
    .await;
    let _ = blocking(ctx, |c| {
        c.git.sandbox_refs_collect(crate::paths::VALIDATE_WORKTREE)
    })
    .await;
    if *control.borrow() != Control::Run {
        return Err(LandResult::Interrupted);
    }
    let summary = parser.finish();
    let verdict = match (&ran, &summary.signals.review) {
        (_, Some(crate::agent::parser::ReviewTag::Approve(id))) if *id == req.id => {
            ReviewVerdict::Approve
        }
        (_, Some(crate::agent::parser::ReviewTag::Changes(id, text))) if *id == req.id => {
            ReviewVerdict::Changes(text.clone())
        }
        (Err(e), _) => ReviewVerdict::NoAnswer(format!("the reviewer could not start: {e}")),
        (Ok(x), _) if x.stopped.is_some() => {
            ReviewVerdict::NoAnswer("the reviewer was stopped before it answered".to_string())
        }
        _ => ReviewVerdict::NoAnswer(format!(
            "the reviewer gave no APPROVE or CHANGES for story {} (its log: {log_rel})",
            req.id
        )),
    };
    Ok(ReviewReport {
        verdict,
        usage: summary.usage,
        cost_usd: summary.cost_usd.unwrap_or(0.0),
        log_rel,
    })
}

/// A failed validation charged to `req`'s story: its work is kept for the
/// fix-up (the lone landing's failure, or a batch's story found alone).
pub(super) async fn blamed(
    ctx: &Arc<RunContext>,
    req: &LandRequest,
    failure: LandResult,
) -> LandResult {
    match failure {
        LandResult::ValidationFailed {
            name,
            cmd,
            tail,
            log_rel,
            ..
        } => {
            let branch = project::story_branch(&req.id);
            LandResult::ValidationFailed {
                saved_ref: keep(ctx, &branch, KeptRef::Attempt, req).await,
                name,
                cmd,
                tail,
                log_rel,
            }
        }
        other => other,
    }
}
