//! The merge queue's chain (issue 34, docs/merge-queue.md): the stories the
//! transition took (`Action::LandChain`) are merged each on the one before
//! (M1 = tip + S1, M2 = M1 + S2, ...), the gates asked per story, every
//! merge validated at once in a worktree of its own, and the target moved
//! with one compare-and-swap to the longest prefix whose merges all passed.
//! A story whose merge conflicts or is gated leaves the chain with its
//! result and the next is merged where it would have gone; the first
//! failed validation is that story's, and the merges behind it (built on
//! it) are stopped and go back to the queue (`LandResult::Behind`).
//!
//! The invariant stays: the target only ever moves to a merge whose exact
//! tree passed (or to the same chain made again on the user's own commits
//! touching none of its paths, `Git::remade_on`), under the landing intent.

use std::sync::Arc;

use tokio::sync::watch;

use crate::gitops::{GitError, LandOutcome, MergeOutcome, Oid};
use crate::process::Control;
use crate::project::{self, KeptRef};

use super::context::{blocking, RunContext};
use super::events::LandResult;
use super::land::{self, LandRequest, LandingIntent};

/// One merge of the chain: story `pos` of the request merged on `base`.
#[derive(Debug, Clone)]
struct Link {
    pos: usize,
    commit: Oid,
    base: Oid,
}

/// How the compare-and-swap of a chain's passed prefix ended.
enum Cas {
    /// Each link's commit on the target, in chain order.
    Landed(Vec<(Oid, Oid)>),
    /// The user's commits meet the chain's paths: merge and validate again.
    Moved,
    /// Cannot go on (the checkout, a lock, git): the first story's result.
    Stop(LandResult),
}

/// Lands `reqs` as one chain; one result per story, in order.
pub(crate) async fn land_chain(
    ctx: &Arc<RunContext>,
    reqs: Vec<LandRequest>,
    control: watch::Receiver<Control>,
) -> Vec<LandResult> {
    let mut results: Vec<Option<LandResult>> = vec![None; reqs.len()];
    let mut live: Vec<usize> = (0..reqs.len()).collect();
    for _round in 0..land::ROUNDS {
        if *control.borrow() != Control::Run {
            for &i in &live {
                results[i] = Some(LandResult::Interrupted);
            }
            live.clear();
            break;
        }
        let chain = build(ctx, &reqs, &live, &mut results).await;
        live.clear();
        if chain.is_empty() {
            break;
        }
        let passed = validate(ctx, &reqs, &chain, &control, &mut results).await;
        if passed == 0 {
            break;
        }
        let links = &chain[..passed];
        match cas(ctx, &reqs, links, &control).await {
            Cas::Landed(commits) => {
                let mut landed = Vec::new();
                for (link, (base, commit)) in links.iter().zip(commits) {
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
            // Merged and validated again on the new tip, as one landing is.
            Cas::Moved => live = links.iter().map(|l| l.pos).collect(),
            Cas::Stop(result) => results[links[0].pos] = Some(result),
        }
    }
    for &i in &live {
        results[i] = Some(LandResult::Raced);
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or(LandResult::Behind))
        .collect()
}

/// Merges the stories at `live` each on the one before, the first on the
/// target's tip; conflicts and gate findings are those stories' results
/// and the chain goes on without them. A failure of git or signing ends
/// the chain there (the stories after it get no result: `Behind`).
async fn build(
    ctx: &Arc<RunContext>,
    reqs: &[LandRequest],
    live: &[usize],
    results: &mut [Option<LandResult>],
) -> Vec<Link> {
    let tip = blocking(ctx, |c| c.git.branch_tip(&c.target)).await;
    let mut base = match tip {
        Ok(Ok(Some(tip))) => tip,
        Ok(Ok(None)) => {
            results[live[0]] = Some(LandResult::Error("the target branch is gone".to_string()));
            return Vec::new();
        }
        Ok(Err(e)) => {
            results[live[0]] = Some(LandResult::Error(e.to_string()));
            return Vec::new();
        }
        Err(e) => {
            results[live[0]] = Some(LandResult::Error(e));
            return Vec::new();
        }
    };
    let mut chain = Vec::new();
    for &pos in live {
        let req = &reqs[pos];
        let branch = project::story_branch(&req.id);
        let merged = land::merge_for_landing(ctx, req, Some(base.clone())).await;
        let commit = match merged {
            Ok(Ok(MergeOutcome::Merged { commit, .. })) => commit,
            Ok(Ok(MergeOutcome::Conflict { paths })) => {
                let saved = land::keep(ctx, &branch, KeptRef::Conflict, req).await;
                results[pos] = Some(LandResult::Conflict {
                    paths,
                    saved_ref: saved,
                });
                continue;
            }
            Ok(Err(GitError::Sign(e))) => {
                results[pos] = Some(LandResult::Unsigned { message: e.message });
                break;
            }
            Ok(Err(e)) => {
                results[pos] = Some(LandResult::Error(e.to_string()));
                break;
            }
            Err(e) => {
                results[pos] = Some(LandResult::Error(e));
                break;
            }
        };
        // Before validation, per story: weakened checks are not worth
        // running, and the chain goes on without it.
        let findings = land::gate_findings(ctx, req, &commit).await;
        if !findings.is_empty() {
            let saved = land::keep(ctx, &branch, KeptRef::Attempt, req).await;
            results[pos] = Some(LandResult::Gated {
                findings,
                saved_ref: saved,
            });
            continue;
        }
        chain.push(Link {
            pos,
            commit: commit.clone(),
            base: base.clone(),
        });
        base = commit;
    }
    chain
}

/// Validates every link of `chain` at once, each in its own worktree;
/// returns how many links from the first passed. The first link that did
/// not pass gets its result (a failed validation is its story's), and the
/// validations behind it are stopped: their merges hold that story.
async fn validate(
    ctx: &Arc<RunContext>,
    reqs: &[LandRequest],
    chain: &[Link],
    control: &watch::Receiver<Control>,
    results: &mut [Option<LandResult>],
) -> usize {
    if ctx.required_validation.is_empty() {
        return chain.len();
    }
    let mut stops = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    let mut slot_of = std::collections::HashMap::new();
    let mut holds = Vec::new();
    for (k, link) in chain.iter().enumerate() {
        let (tx, rx) = watch::channel(*control.borrow());
        stops.push(tx);
        holds.push(reqs[link.pos].id.clone());
        let stories = holds.clone();
        let (ctx, req, link) = (ctx.clone(), reqs[link.pos].clone(), link.clone());
        let handle = tasks.spawn(async move {
            let started = std::time::Instant::now();
            let tree = super::candidate::validate_start(&ctx, &link.commit, stories, k).await;
            let failed = land::validate_merged(&ctx, &req, &link.commit, &link.base, rx, k).await;
            ctx.record(crate::runlog::Ev::Validated {
                story: req.id.clone(),
                attempt: req.attempt,
                secs: started.elapsed().as_secs_f64(),
                ok: failed.is_none(),
            });
            (failed, tree, started)
        });
        slot_of.insert(handle.id(), k);
    }
    let mut ended: Vec<Option<(String, std::time::Instant)>> = vec![None; chain.len()];
    // `None` while it runs; `Some(None)` passed; `Some(Some(r))` did not.
    let mut verdicts: Vec<Option<Option<LandResult>>> = vec![None; chain.len()];
    let mut first_failed = chain.len();
    let mut run_control = control.clone();
    loop {
        tokio::select! {
            done = tasks.join_next_with_id() => {
                let Some(done) = done else { break };
                let (k, verdict) = match done {
                    Ok((id, (v, tree, started))) => {
                        ended[slot_of[&id]] = Some((tree, started));
                        (slot_of[&id], v)
                    }
                    Err(e) => (
                        slot_of[&e.id()],
                        Some(LandResult::Error(format!("internal error while validating: {e}"))),
                    ),
                };
                if verdict.is_some() && k < first_failed {
                    // Whatever runs behind it holds this story: thrown away.
                    first_failed = k;
                    for stop in &stops[k + 1..] {
                        let _ = stop.send(Control::Kill);
                    }
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
    let passed = verdicts
        .iter()
        .take_while(|v| matches!(v, Some(None)))
        .count();
    for (k, end) in ended.into_iter().enumerate() {
        let Some((tree, started)) = end else { continue };
        let verdict = match &verdicts[k] {
            _ if k > passed => "thrown",
            Some(None) => "passed",
            Some(Some(LandResult::ValidationFailed { .. })) => "failed",
            _ => "stopped",
        };
        let stories = chain[..=k].iter().map(|l| reqs[l.pos].id.clone()).collect();
        super::candidate::validate_end(ctx, tree, stories, verdict, started);
    }
    if let Some(Some(Some(result))) = verdicts.get(passed).cloned() {
        results[chain[passed].pos] = Some(result);
    }
    passed
}

/// Moves the target from the chain's base to its last passed merge, under
/// the landing intent, as one landing does (`land::land`).
async fn cas(
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
    let mut busy = 0;
    let landed = loop {
        let landed = land::land_once(ctx, &base, &top, &first.id).await;
        match &landed {
            Ok(Ok(LandOutcome::Busy { lock, .. }))
                if *control.borrow() == Control::Run && busy < land::LAND_BUSY_ROUNDS =>
            {
                busy += 1;
                ctx.log.line(&format!(
                    "landing {}: {} is held by another git process; waiting",
                    first.id,
                    lock.display()
                ));
            }
            _ => break landed,
        }
    };
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
