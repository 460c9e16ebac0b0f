//! The merge queue's chain (issue 34, docs/merge-queue.md): the stories the
//! transition took (`Action::LandChain`) are cut into candidates of up to
//! `landing.batch` stories (`transition::batch`), each story merged on the
//! one before (M1 = tip + S1, M2 = M1 + S2, ...), the gates asked per
//! story, every candidate's top validated at once in a worktree of its
//! own, and the target moved with one compare-and-swap to the longest
//! prefix whose candidates all passed. A story whose merge conflicts or is
//! gated leaves with its result and the next is merged where it would have
//! gone; a failed candidate of one story is that story's, and the merges
//! behind it (built on it) are stopped and go back to the queue
//! (`LandResult::Behind`). A failed candidate of several stories is
//! bisected here, round after round, until the story that fails is alone
//! (`batch::layout`, `batch::decide`).
//!
//! The invariant stays: the target only ever moves to a candidate's top
//! whose exact tree passed (or to the same merges made again on the user's
//! own commits touching none of their paths, `Git::remade_on`), under the
//! landing intent. A `kill -9` at any point leaves the stories `landing`
//! in the state: the next run lands them, the bisection starting afresh.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::watch;

use crate::gitops::{GitError, LandOutcome, MergeOutcome, Oid};
use crate::process::Control;
use crate::project::{self, KeptRef};

use super::context::{blocking, RunContext};
use super::events::LandResult;
use super::intent::LandingIntent;
use super::land::{self, LandRequest};
use super::transition::batch::{self, Cand, Verdict};

/// One merge of the chain: story `pos` of the request merged on `base`.
#[derive(Debug, Clone)]
pub(super) struct Link {
    pub(super) pos: usize,
    pub(super) commit: Oid,
    pub(super) base: Oid,
}

/// How the compare-and-swap of a chain's passed prefix ended.
pub(super) enum Cas {
    /// Each link's commit on the target, in chain order.
    Landed(Vec<(Oid, Oid)>),
    /// The user's commits meet the chain's paths: merge and validate again.
    Moved,
    /// Cannot go on (the checkout, a lock, git): the first story's result.
    Stop(LandResult),
}

/// What this machine offers validations now: its CPUs and the memory a
/// new child could get (`process::memory`). Validations run as executor
/// jobs (`validation.where: executor`) take none of it: the cluster's room
/// bounds them (a job waits in its queue), and `landing.max_validations`
/// only when set.
pub(crate) fn machine(config: &crate::config::Config) -> batch::Machine {
    if config.validates_remotely() {
        return batch::Machine {
            cpus: usize::MAX,
            available_mb: None,
            per_validation_mb: 0,
        };
    }
    batch::Machine {
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        available_mb: crate::process::memory::available_mb(),
        per_validation_mb: config.landing.validation_memory_mb,
    }
}

/// Lands `reqs` as one chain of candidates; one result per story, in order.
pub(crate) async fn land_chain(
    ctx: &Arc<RunContext>,
    reqs: Vec<LandRequest>,
    control: watch::Receiver<Control>,
) -> Vec<LandResult> {
    let mut results: Vec<Option<LandResult>> = vec![None; reqs.len()];
    // Read now: the agents running hold memory a validation cannot have.
    let here = machine(&ctx.config);
    let room = batch::room(ctx.config.landing.max_validations, here);
    let size = super::transition::queue::shape(&ctx.config, here).1;
    let mut plan = batch::cut(reqs.len(), size);
    // The failure of each tree that failed in this landing: a bisection
    // meets the same tree again (the second half on the first once the
    // first landed) and need not validate it twice.
    let mut failures: HashMap<Oid, LandResult> = HashMap::new();
    let (mut raced, mut rounds) = (0, 0);
    // Each round lands, blames or splits something: this only bounds a
    // bug, never a working bisection.
    let most = land::ROUNDS + 2 * reqs.len();
    while !plan.is_empty() && raced < land::ROUNDS && rounds < most {
        rounds += 1;
        if *control.borrow() != Control::Run {
            for g in plan.drain(..) {
                for i in g.stories {
                    results[i] = Some(LandResult::Interrupted);
                }
            }
            break;
        }
        let (mut cands, rest) = batch::layout(&plan, room);
        let (links, broken) = build(ctx, &reqs, &mut cands, &mut results).await;
        let verdicts = validate(ctx, &reqs, &cands, &links, &control, &mut failures).await;
        let mut d = batch::decide(&cands, &verdicts.iter().map(|v| v.0).collect::<Vec<_>>(), {
            // A broken build ends the landing: what waited goes back.
            if broken {
                Vec::new()
            } else {
                rest
            }
        });
        for &c in &d.culprits {
            let pos = cands[c].stories[0];
            let failure = verdicts[c].1.clone().unwrap_or_else(|| {
                LandResult::Error("a failed validation without its output".into())
            });
            let failure = own_log(ctx, &reqs[pos], failure);
            results[pos] = Some(land::blamed(ctx, &reqs[pos], failure).await);
        }
        if let Some(c) = d.stopped {
            let result = verdicts[c].1.clone();
            results[cands[c].stories[0]] =
                Some(result.unwrap_or_else(|| LandResult::Error("not validated".into())));
        }
        let landing: Vec<Link> = d.land.iter().flat_map(|&c| links[c].clone()).collect();
        if !landing.is_empty() {
            match cas(ctx, &reqs, &landing, &control).await {
                Cas::Landed(commits) => {
                    let mut landed = Vec::new();
                    for (link, (base, commit)) in landing.iter().zip(commits) {
                        let req = &reqs[link.pos];
                        ctx.landed.lock().unwrap_or_else(|e| e.into_inner()).push((
                            req.id.clone(),
                            base,
                            commit.clone(),
                        ));
                        results[link.pos] = Some(LandResult::Landed { commit });
                        landed.push(req.clone());
                    }
                    land::after_chain(ctx, landed).await;
                }
                // Merged and validated again on the new tip, as one
                // landing is; the rest of the plan after them.
                Cas::Moved => {
                    raced += 1;
                    let back = d.land.iter().map(|&c| batch::Group {
                        stories: cands[c].stories.clone(),
                        split: false,
                    });
                    d.plan = back.chain(d.plan).collect();
                }
                Cas::Stop(result) => {
                    results[landing[0].pos] = Some(result);
                    d.plan.clear();
                }
            }
        }
        plan = if d.stopped.is_some() || broken {
            Vec::new()
        } else {
            d.plan
        };
    }
    for g in plan {
        for i in g.stories {
            results[i] = Some(LandResult::Raced);
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or(LandResult::Behind))
        .collect()
}

/// A candidate's failure found to be `req`'s story's: its output goes to
/// that story's own validation log, which the failure then names (the
/// candidate's log is its top story's, which a later candidate with the
/// same top writes again).
fn own_log(ctx: &RunContext, req: &LandRequest, failure: LandResult) -> LandResult {
    let LandResult::ValidationFailed {
        name,
        cmd,
        tail,
        log_rel,
        saved_ref,
    } = failure
    else {
        return failure;
    };
    let own = crate::paths::validation_log_path(&ctx.root, &req.id, req.attempt);
    let own_rel = own
        .strip_prefix(&ctx.root)
        .unwrap_or(&own)
        .display()
        .to_string();
    let text = format!(
        "(the validation of a candidate holding story {} failed; its whole output was \
         {log_rel}; its end:)\n{tail}",
        req.id
    );
    let written = own.parent().map(std::fs::create_dir_all);
    let log_rel = match (own_rel == log_rel, written) {
        (true, _) => log_rel,
        (false, Some(Ok(()))) if std::fs::write(&own, text).is_ok() => own_rel,
        _ => log_rel,
    };
    LandResult::ValidationFailed {
        name,
        cmd,
        tail,
        log_rel,
        saved_ref,
    }
}

/// A story merged on a chain's top, its gates asked.
pub(super) enum Merged {
    /// The merge, to validate.
    Link(Oid),
    /// The story leaves the chain with this result (a conflict, the gates'
    /// findings); the next is merged where it would have gone.
    Left(LandResult),
    /// Git or signing failed: the chain cannot go on.
    Broken(LandResult),
    /// It conflicts at `paths`: its result (`conflicted`) once what it
    /// conflicts with is on the target, which the caller knows.
    Conflict(Vec<String>),
}

/// `req`'s story merged on `base`; its gates asked before validation, per
/// story: weakened checks are not worth running.
pub(super) async fn merge_one(ctx: &Arc<RunContext>, req: &LandRequest, base: &Oid) -> Merged {
    let branch = project::story_branch(&req.id);
    let commit = match land::merge_for_landing(ctx, req, Some(base.clone())).await {
        Ok(Ok(MergeOutcome::Merged { commit, .. })) => commit,
        Ok(Ok(MergeOutcome::Conflict { paths })) => return Merged::Conflict(paths),
        Ok(Err(GitError::Sign(e))) => {
            return Merged::Broken(LandResult::Unsigned { message: e.message })
        }
        Ok(Err(e)) => return Merged::Broken(LandResult::Error(e.to_string())),
        Err(e) => return Merged::Broken(LandResult::Error(e)),
    };
    let findings = land::gate_findings(ctx, req, &commit).await;
    if !findings.is_empty() {
        let saved = land::keep(ctx, &branch, KeptRef::Attempt, req).await;
        return Merged::Left(LandResult::Gated {
            findings,
            saved_ref: saved,
        });
    }
    Merged::Link(commit)
}

/// A conflict at `paths` as `req`'s result: its work kept for the fix-up.
pub(super) async fn conflicted(
    ctx: &Arc<RunContext>,
    req: &LandRequest,
    paths: Vec<String>,
) -> LandResult {
    let branch = project::story_branch(&req.id);
    let saved = land::keep(ctx, &branch, KeptRef::Conflict, req).await;
    LandResult::Conflict {
        paths,
        saved_ref: saved,
    }
}

/// Merges each candidate's stories each on the one before, the first on
/// the target's tip, or on the candidate before it; conflicts and gate
/// findings are those stories' results and the candidate goes on without
/// them. A failure of git or signing ends the build there (the stories
/// after it get no result: `Behind`), and says so (`true`).
async fn build(
    ctx: &Arc<RunContext>,
    reqs: &[LandRequest],
    cands: &mut Vec<Cand>,
    results: &mut [Option<LandResult>],
) -> (Vec<Vec<Link>>, bool) {
    let tip = blocking(ctx, |c| c.git.branch_tip(&c.target)).await;
    let first = cands.first().and_then(|c| c.stories.first().copied());
    let tip = match (tip, first) {
        (_, None) => return (Vec::new(), false),
        (Ok(Ok(Some(tip))), _) => tip,
        (Ok(Ok(None)), Some(pos)) => {
            results[pos] = Some(LandResult::Error("the target branch is gone".to_string()));
            cands.clear();
            return (Vec::new(), true);
        }
        (Ok(Err(e)), Some(pos)) => {
            results[pos] = Some(LandResult::Error(e.to_string()));
            cands.clear();
            return (Vec::new(), true);
        }
        (Err(e), Some(pos)) => {
            results[pos] = Some(LandResult::Error(e));
            cands.clear();
            return (Vec::new(), true);
        }
    };
    let mut all: Vec<Vec<Link>> = Vec::new();
    let mut top = tip.clone();
    for k in 0..cands.len() {
        let mut base = if cands[k].on_tip {
            tip.clone()
        } else {
            top.clone()
        };
        let mut links = Vec::new();
        let mut kept = Vec::new();
        let mut broken = false;
        for &pos in &cands[k].stories {
            let commit = match merge_one(ctx, &reqs[pos], &base).await {
                Merged::Link(commit) => commit,
                Merged::Left(result) => {
                    results[pos] = Some(result);
                    continue;
                }
                // A round's results are said once it ended, when what a
                // story conflicts with has landed or not: nothing is held.
                Merged::Conflict(paths) => {
                    results[pos] = Some(conflicted(ctx, &reqs[pos], paths).await);
                    continue;
                }
                Merged::Broken(result) => {
                    results[pos] = Some(result);
                    broken = true;
                    break;
                }
            };
            links.push(Link {
                pos,
                commit: commit.clone(),
                base: base.clone(),
            });
            kept.push(pos);
            base = commit;
        }
        cands[k].stories = kept;
        top = base;
        all.push(links);
        if broken {
            cands.truncate(k + 1);
            return (all, true);
        }
    }
    (all, false)
}

/// Validates every candidate's top at once, each in its own worktree (a
/// tree that failed before in this landing is not validated again); a
/// verdict per candidate, with the failure. A failure stops the
/// validations of the candidates built on it: thrown away.
async fn validate(
    ctx: &Arc<RunContext>,
    reqs: &[LandRequest],
    cands: &[Cand],
    links: &[Vec<Link>],
    control: &watch::Receiver<Control>,
    failures: &mut HashMap<Oid, LandResult>,
) -> Vec<(Verdict, Option<LandResult>)> {
    let mut out: Vec<(Verdict, Option<LandResult>)> = vec![(Verdict::Passed, None); cands.len()];
    if ctx.required_validation.is_empty() {
        return out;
    }
    let mut stops = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    let mut slot_of = HashMap::new();
    let mut trees: Vec<Option<Oid>> = vec![None; cands.len()];
    // `None` while it runs; `Some(None)` passed; `Some(Some(r))` did not.
    let mut verdicts: Vec<Option<Option<LandResult>>> = vec![Some(None); cands.len()];
    let mut thrown = vec![false; cands.len()];
    // Built on a candidate known to fail: not worth starting.
    let mut dead = false;
    for (k, cand_links) in links.iter().enumerate() {
        let (tx, rx) = watch::channel(*control.borrow());
        stops.push(tx);
        dead &= !cands[k].on_tip;
        if dead {
            thrown[k] = true;
            continue;
        }
        let Some(link) = cand_links.last().cloned() else {
            // Every story left it (a conflict, a gate): nothing to validate.
            continue;
        };
        let c = link.commit.clone();
        let tree = blocking(ctx, move |g| g.git.tree_of(&c))
            .await
            .ok()
            .and_then(Result::ok);
        if let Some(known) = tree.as_ref().and_then(|t| failures.get(t)) {
            verdicts[k] = Some(Some(known.clone()));
            dead = true;
            continue;
        }
        trees[k] = tree;
        verdicts[k] = None;
        let stories = batch::holds(cands, k)
            .into_iter()
            .map(|p| reqs[p].id.clone())
            .collect();
        let (ctx, req) = (ctx.clone(), reqs[link.pos].clone());
        let base = cand_links[0].base.clone();
        let handle = tasks.spawn(async move {
            let c = (&link.commit, &base);
            let end = super::candidate::validate_candidate(
                &ctx,
                (&req.id, req.attempt),
                c,
                stories,
                rx,
                k,
            )
            .await;
            end
        });
        slot_of.insert(handle.id(), k);
    }
    let throw = |k: usize, thrown: &mut Vec<bool>| {
        for j in batch::built_on(cands, k) {
            thrown[j] = true;
            let _ = stops[j].send(Control::Kill);
        }
    };
    let mut ended: Vec<Option<super::candidate::Run>> = (0..cands.len()).map(|_| None).collect();
    let mut run_control = control.clone();
    loop {
        tokio::select! {
            done = tasks.join_next_with_id() => {
                let Some(done) = done else { break };
                let (k, verdict) = match done {
                    Ok((id, end)) => {
                        let verdict = end.failed.clone();
                        ended[slot_of[&id]] = Some(end);
                        (slot_of[&id], verdict)
                    }
                    Err(e) => (
                        slot_of[&e.id()],
                        Some(LandResult::Error(format!("internal error while validating: {e}"))),
                    ),
                };
                if verdict.is_some() && !thrown[k] {
                    // Whatever runs built on it holds this candidate: thrown away.
                    throw(k, &mut thrown);
                }
                verdicts[k] = Some(verdict);
            }
            Ok(()) = run_control.changed() => {
                let now = *run_control.borrow();
                for stop in &stops {
                    let _ = stop.send(now);
                }
            }
        }
    }
    for k in 0..cands.len() {
        let failure = verdicts[k].clone().flatten();
        let verdict = match &failure {
            _ if thrown[k] => Verdict::Thrown,
            None => Verdict::Passed,
            Some(LandResult::ValidationFailed { .. }) => Verdict::Failed,
            Some(_) => Verdict::Stopped,
        };
        if let (Verdict::Failed, Some(tree)) = (verdict, &trees[k]) {
            failures.insert(tree.clone(), failure.clone().expect("a failure"));
        }
        if let Some(end) = ended[k].take() {
            let word = match verdict {
                Verdict::Passed => "passed",
                Verdict::Failed => "failed",
                Verdict::Thrown => "thrown",
                Verdict::Stopped => "stopped",
            };
            let stories = batch::holds(cands, k)
                .into_iter()
                .map(|p| reqs[p].id.clone())
                .collect();
            super::candidate::validate_end(ctx, end.tree, stories, word, end.started, end.node);
        }
        out[k] = (verdict, failure);
    }
    out
}

/// Moves the target from the chain's base to its last passed merge, under
/// the landing intent, as one landing does (`land::land`).
pub(super) async fn cas(
    ctx: &Arc<RunContext>,
    reqs: &[LandRequest],
    links: &[Link],
    control: &watch::Receiver<Control>,
) -> Cas {
    let first = &reqs[links[0].pos];
    let base = links[0].base.clone();
    let top = links[links.len() - 1].commit.clone();
    let intent = LandingIntent {
        story: first.id.clone(),
        base: base.clone(),
        commit: top.clone(),
    };
    // Without the intent a crash mid-checkout could not be undone: no
    // intent, no landing.
    if let Err(e) = intent.write(&ctx.root) {
        return Cas::Stop(LandResult::Error(e));
    }
    let landed = land::land_waiting(ctx, &base, &top, &first.id, control).await;
    let _ = std::fs::remove_file(crate::paths::landing_intent_path(&ctx.root));
    match landed {
        Ok(Ok(LandOutcome::Landed)) => {
            let mut on = base;
            let mut out = Vec::new();
            for l in links {
                out.push((on, l.commit.clone()));
                on = l.commit.clone();
            }
            Cas::Landed(out)
        }
        // Made again on the user's commits: each story's merge is the one
        // made again, read back down the first-parent line.
        Ok(Ok(LandOutcome::LandedOnTop { base, commit })) => {
            let (c, n) = (commit.clone(), links.len());
            let mut made = match blocking(ctx, move |g| g.git.first_parents(&c, n)).await {
                Ok(Ok(list)) if list.len() == n => list,
                _ => vec![commit; n],
            };
            made.reverse();
            let mut on = base;
            let mut out = Vec::new();
            for m in made {
                out.push((on, m.clone()));
                on = m;
            }
            Cas::Landed(out)
        }
        Ok(Ok(LandOutcome::TargetMoved { .. })) => Cas::Moved,
        Ok(Ok(LandOutcome::CheckoutBlocked { paths })) => {
            Cas::Stop(LandResult::CheckoutBlocked { paths })
        }
        Ok(Ok(LandOutcome::Busy { .. })) if *control.borrow() != Control::Run => {
            Cas::Stop(LandResult::Interrupted)
        }
        Ok(Ok(LandOutcome::Busy { lock, holder })) => Cas::Stop(LandResult::Busy { lock, holder }),
        Ok(Err(e)) => Cas::Stop(LandResult::Error(e.to_string())),
        Err(e) => Cas::Stop(LandResult::Error(e)),
    }
}
