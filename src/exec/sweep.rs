//! The end of a run on a Ray cluster (issue 23): the jobs of a crashed run
//! that no attempt claimed are stopped and deleted, and the project's
//! relay namespace is swept (`relay::sweep_decision`), so the relay keeps
//! nothing once a run is over and nothing anyone left there is lost.

use std::time::{Duration, Instant};

use crate::executor::AttemptEnv;
use crate::gitops::{relay, Oid};

use super::cluster::Orphan;
use super::ray::{call, git, lock, stop_wait, RayExecutor, POLL, STOP_KEEP};
use super::worker;

impl RayExecutor {
    /// The end of a run (issue 23): the jobs of a crashed run that no
    /// attempt of this one claimed are stopped and deleted (what they kept
    /// comes home), then the project's relay namespace is swept: nothing of
    /// this run's attempts, or of those jobs, stays on the relay, and what
    /// no one collected is kept here first (nothing lost).
    pub(crate) async fn end_of_run(&self) {
        let left: Vec<(String, Orphan)> = lock(&self.orphans).drain().collect();
        for (id, orphan) in left {
            self.retire(&id, &orphan).await;
        }
        let clears: Vec<_> = lock(&self.relayed.clears).drain(..).collect();
        for c in clears {
            let _ = c.await;
        }
        self.sweep_relay().await;
    }

    /// Stops an unclaimed job of a crashed run, waits for its end (its
    /// worker keeps and pushes what its agent left), keeps its log, and
    /// deletes it.
    async fn retire(&self, id: &str, orphan: &Orphan) {
        let ctx = &self.ctx;
        let sid = orphan.submission_id.clone();
        let limit = Instant::now() + stop_wait(ctx) + STOP_KEEP + STOP_KEEP;
        let mut stopped = false;
        loop {
            let sid2 = sid.clone();
            match call(&self.cluster, move |c| c.info(&sid2)).await {
                Ok(Some(i)) if i.finished() => break,
                Ok(None) => return,
                Ok(Some(_)) if !stopped => {
                    ctx.log.line(&format!(
                        "job {sid} of an earlier run (story {id}) was claimed by no attempt: \
                         stopping it"
                    ));
                    let sid2 = sid.clone();
                    let _ = call(&self.cluster, move |c| c.stop(&sid2)).await;
                    stopped = true;
                }
                Ok(Some(_)) => {}
                Err(e) => ctx.log.line(&format!("job {sid}: {e}")),
            }
            if Instant::now() > limit {
                ctx.log.line(&format!(
                    "job {sid} did not end after its stop: left on the cluster"
                ));
                return;
            }
            tokio::time::sleep(POLL).await;
        }
        let sid2 = sid.clone();
        let logs = call(&self.cluster, move |c| c.logs(&sid2))
            .await
            .unwrap_or_default();
        if let Some(wire) = worker::report_in(&logs) {
            let path = crate::paths::attempt_log_path(&ctx.root, id, orphan.attempt);
            if !path.exists() {
                if let Some(dir) = path.parent() {
                    let _ = std::fs::create_dir_all(dir);
                }
                let _ = std::fs::write(&path, wire.log.as_bytes());
            }
        }
        let sid2 = sid.clone();
        let _ = call(&self.cluster, move |c| c.delete(&sid2)).await;
        ctx.log
            .line(&format!("job {sid} of an earlier run (story {id}) deleted"));
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

/// Work already in the target's history needs no ref to keep it.
fn landed_on(c: &AttemptEnv, oid: &Oid) -> bool {
    c.git
        .branch_tip(&c.target)
        .ok()
        .flatten()
        .is_some_and(|t| c.git.descends_from(&t, oid).unwrap_or(false))
}
