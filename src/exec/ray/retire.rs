//! The jobs of a crashed run no attempt claims, stopped and deleted (those
//! no attempt of the run can claim from its first attempt on, issue 35;
//! the rest at its end), and the end of a run on a Ray cluster (issue 23):
//! the project's relay namespace is swept (`relay::sweep_decision`), so the
//! relay keeps nothing once a run is over and nothing anyone left there is
//! lost.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::executor::AttemptEnv;
use crate::gitops::{relay, Oid};

use super::super::cluster::{Cluster, Orphan, VALIDATION_OF};
use super::super::worker;
use super::{call, git, lock, stop_wait, Board, Listing, RayExecutor, POLL, STOP_KEEP};

impl RayExecutor {
    /// Starts stopping the jobs of a crashed run that no attempt of this
    /// one can claim (once, from the run's first attempt: inside its
    /// runtime).
    pub(super) fn start_retiring(&self) {
        let mut task = lock(&self.retiring);
        if task.is_some() {
            return;
        }
        let left: Vec<(String, Orphan)> = lock(&self.leftovers).drain(..).collect();
        let (ctx, cluster, board) = (self.ctx.clone(), self.cluster.clone(), self.board.clone());
        *task = Some(tokio::spawn(retire_all(ctx, cluster, board, left)));
    }

    /// The end of a run (issue 23): the jobs of a crashed run that no
    /// attempt of this one claimed are stopped and deleted (what they kept
    /// comes home), then the project's relay namespace is swept: nothing of
    /// this run's attempts, or of those jobs, stays on the relay, and what
    /// no one collected is kept here first (nothing lost).
    pub(crate) async fn end_of_run(&self) {
        self.start_retiring();
        let retiring = lock(&self.retiring).take();
        if let Some(t) = retiring {
            let _ = t.await;
        }
        let left: Vec<(String, Orphan)> = lock(&self.orphans).drain().collect();
        let (ctx, cluster, board) = (self.ctx.clone(), self.cluster.clone(), self.board.clone());
        retire_all(ctx, cluster, board, left).await;
        self.board.close();
        let clears: Vec<_> = lock(&self.relayed.clears).drain(..).collect();
        for c in clears {
            let _ = c.await;
        }
        self.sweep_relay().await;
        self.ctx
            .log
            .line(&requests_line(&self.cluster.counts(), self.since.elapsed()));
    }

    /// Brings the project's relay namespace here, keeps what no one
    /// collected (`relay::sweep_decision`), and deletes the rest on the
    /// relay in one push, tried again when the relay is busy.
    async fn sweep_relay(&self) {
        let ctx = &self.ctx;
        let prefix = relay::relay_prefix(&ctx.tag);
        let pad = relay::sweep_pad(&ctx.tag);
        let fetch = [
            "fetch".to_string(),
            "--quiet".into(),
            "--no-tags".into(),
            "--no-write-fetch-head".into(),
            "--prune".into(),
            self.settings.relay.clone(),
            format!("+{prefix}*:{pad}*"),
        ];
        if let Err(e) = git(ctx, &fetch).await {
            ctx.log
                .line(&format!("relay sweep: cannot read the relay: {e}"));
            return;
        }
        let collected = lock(&self.relayed.collected).clone();
        let (pad2, prefix2) = (pad.clone(), prefix.clone());
        let deletions = crate::executor::blocking(ctx, move |c| {
            let mut deletions = Vec::new();
            for local in c.git.refs_with_prefix(&pad2).unwrap_or_default() {
                let rel = &local[pad2.len()..];
                let decision =
                    relay::sweep_decision(rel, |id, n| collected.contains(&(id.to_string(), n)));
                let oid = c.git.ref_target(&local).ok().flatten();
                let gone = match (&decision, oid) {
                    (relay::Sweep::Drop, _) => true,
                    (relay::Sweep::Keep(_), Some(oid)) if landed_on(c, &oid) => true,
                    (relay::Sweep::Keep(keep), Some(oid)) => {
                        match c.git.create_ref_if_absent(keep, &oid) {
                            Ok(true) => {
                                c.log
                                    .line(&format!("relay sweep: {prefix2}{rel} kept as {keep}"));
                                true
                            }
                            Ok(false) => {
                                c.log.line(&format!(
                                    "relay sweep: {prefix2}{rel} stays on the relay: {keep} \
                                     holds other work here"
                                ));
                                false
                            }
                            Err(e) => {
                                c.log.line(&format!(
                                    "relay sweep: {prefix2}{rel} stays on the relay: {e}"
                                ));
                                false
                            }
                        }
                    }
                    _ => false,
                };
                if gone {
                    deletions.push(format!(":{prefix2}{rel}"));
                }
                let _ = c.git.delete_ref(&local);
            }
            deletions
        })
        .await
        .unwrap_or_default();
        if deletions.is_empty() {
            return;
        }
        let mut push = vec![
            "push".to_string(),
            "--quiet".into(),
            self.settings.relay.clone(),
        ];
        push.extend(deletions);
        // Deleting refs locks the relay's packed-refs for a moment: a push
        // of another project (or a slow relay) can hold it past git's wait.
        let mut last = String::new();
        for wait_ms in [0u64, 500, 2000] {
            tokio::time::sleep(Duration::from_millis(wait_ms)).await;
            match git(ctx, &push).await {
                Ok(()) => return,
                Err(e) => last = e,
            }
        }
        ctx.log
            .line(&format!("relay sweep: refs stay on the relay: {last}"));
    }
}

/// The `timing:` line of the requests this run made to the dashboard:
/// in all, per second, and by kind.
fn requests_line(counts: &std::collections::BTreeMap<String, u64>, span: Duration) -> String {
    let all: u64 = counts.values().sum();
    let secs = span.as_secs_f64().max(0.001);
    let kinds: Vec<String> = counts
        .iter()
        .map(|(k, n)| format!("{k} {n} ({:.1}/s)", *n as f64 / secs))
        .collect();
    format!(
        "executor timing: {all} requests to the Ray dashboard in {secs:.1} s ({:.1}/s): {}",
        all as f64 / secs,
        kinds.join(", ")
    )
}

/// Work already in the target's history needs no ref to keep it.
fn landed_on(c: &AttemptEnv, oid: &Oid) -> bool {
    c.git
        .branch_tip(&c.target)
        .ok()
        .flatten()
        .is_some_and(|t| c.git.descends_from(&t, oid).unwrap_or(false))
}

/// A leftover job as the log names it: an attempt's story, or a
/// validation (`VALIDATION_OF`).
pub(super) fn what(id: &str) -> String {
    match id.strip_prefix(VALIDATION_OF) {
        Some(story) => format!("a validation of story {story}"),
        None => format!("story {id}"),
    }
}

/// Retires `left`, all at once.
async fn retire_all(
    ctx: Arc<AttemptEnv>,
    cluster: Arc<Cluster>,
    board: Arc<Board>,
    left: Vec<(String, Orphan)>,
) {
    let mut set = tokio::task::JoinSet::new();
    for (id, orphan) in left {
        let (ctx, cluster, board) = (ctx.clone(), cluster.clone(), board.clone());
        set.spawn(async move { retire(&ctx, &cluster, &board, &id, &orphan).await });
    }
    while set.join_next().await.is_some() {}
}

/// Stops an unclaimed job of a crashed run, waits for its end (its worker
/// keeps and pushes what its agent left), keeps its log, and deletes it.
async fn retire(
    ctx: &Arc<AttemptEnv>,
    cluster: &Arc<Cluster>,
    board: &Board,
    id: &str,
    orphan: &Orphan,
) {
    let sid = orphan.submission_id.clone();
    let since = Instant::now();
    let limit = since + stop_wait(ctx) + STOP_KEEP + STOP_KEEP;
    let mut list = board.subscribe(cluster, &ctx.log);
    let mut stopped = false;
    loop {
        let listed = tokio::select! {
            r = list.changed() => r.ok().and_then(|()| list.borrow_and_update().clone()),
            _ = tokio::time::sleep(POLL * 4) => None,
        };
        if let Some(Listing {
            asked_at,
            jobs: Ok(jobs),
        }) = listed
        {
            if asked_at >= since {
                match jobs.get(&sid) {
                    None => return,
                    Some(i) if i.finished() => break,
                    Some(_) if !stopped => {
                        ctx.log.line(&format!(
                            "job {sid} of an earlier run ({}) was claimed by no attempt: \
                             stopping it",
                            what(id)
                        ));
                        let sid2 = sid.clone();
                        let _ = call(cluster, move |c| c.stop(&sid2)).await;
                        stopped = true;
                    }
                    Some(_) => {}
                }
            }
        }
        if Instant::now() > limit {
            ctx.log.line(&format!(
                "job {sid} did not end after its stop: left on the cluster"
            ));
            return;
        }
    }
    drop(list);
    let sid2 = sid.clone();
    let logs = call(cluster, move |c| c.logs(&sid2))
        .await
        .unwrap_or_default();
    let attempt = !id.starts_with(VALIDATION_OF);
    if let (true, Some(Ok(wire))) = (attempt, worker::report_in(&logs)) {
        // A racing candidate's job is named by its key.
        let (story, k) = crate::project::split_attempt_key(id);
        let path = crate::paths::log_of(&ctx.root, story, orphan.attempt, k);
        if !path.exists() {
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = std::fs::write(&path, wire.log.as_bytes());
        }
    }
    let sid2 = sid.clone();
    let _ = call(cluster, move |c| c.delete(&sid2)).await;
    ctx.log.line(&format!(
        "job {sid} of an earlier run ({}) deleted",
        what(id)
    ));
}
