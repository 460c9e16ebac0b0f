//! One job list for the whole run (issue 35): a task asks the dashboard for
//! its jobs every `POLL` while some job is watched, and every watch reads
//! its own job off that list. 20 jobs running cost 4 requests a second, not
//! 80 (one status request per job per poll, as before).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::watch;

use super::super::cluster::{Cluster, JobInfo};
use super::watch::Fact;
use super::{call, lock, POLL};
use crate::store::TechLog;

/// One answer to the job list.
#[derive(Debug, Clone)]
pub(crate) struct Listing {
    /// When its request was sent: a job submitted after this is not in it
    /// (and must not be taken for lost).
    pub(crate) asked_at: Instant,
    /// Every job of the cluster by submission ID; the error's text when
    /// the list could not be read.
    pub(crate) jobs: Result<Arc<HashMap<String, JobInfo>>, String>,
}

impl Listing {
    /// What this listing tells the watch of job `sid`, submitted at
    /// `submitted_at`: nothing when its request was sent before (the job
    /// may not be in it yet, and must not be taken for lost).
    pub(crate) fn fact_for(&self, sid: &str, submitted_at: Instant) -> Option<Fact> {
        if self.asked_at < submitted_at {
            return None;
        }
        Some(match &self.jobs {
            Ok(jobs) => Fact::Listed(jobs.get(sid).cloned()),
            Err(_) => Fact::ListFailed,
        })
    }
}

/// The next fact a job's watch acts on: the run's stop (once: `stopped`
/// says the watch has it), the job as the next listing shows it, or a tick
/// (every fourth poll) so time limits are seen without a listing.
pub(crate) async fn next_fact(
    control: &mut watch::Receiver<crate::control::Control>,
    stopped: bool,
    list: &mut watch::Receiver<Option<Listing>>,
    sid: &str,
    submitted_at: Instant,
) -> Fact {
    loop {
        return tokio::select! {
            changed = control.changed(), if !stopped => {
                if changed.is_ok() && matches!(*control.borrow(), crate::control::Control::Run) {
                    continue;
                }
                Fact::RunStops
            }
            changed = list.changed() => match changed {
                Ok(()) => match list.borrow_and_update().as_ref().and_then(|l| l.fact_for(sid, submitted_at)) {
                    Some(f) => f,
                    None => continue,
                },
                Err(_) => Fact::ListFailed,
            },
            _ = tokio::time::sleep(POLL * 4) => Fact::Tick,
        };
    }
}

/// The list's poller and its subscribers.
pub(crate) struct Board {
    tx: watch::Sender<Option<Listing>>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Default for Board {
    fn default() -> Board {
        Board {
            tx: watch::channel(None).0,
            task: Mutex::new(None),
        }
    }
}

impl Board {
    /// A receiver of every listing from now on; starts the poller on the
    /// first call (inside the run's runtime).
    pub(crate) fn subscribe(
        &self,
        cluster: &Arc<Cluster>,
        log: &TechLog,
    ) -> watch::Receiver<Option<Listing>> {
        let rx = self.tx.subscribe();
        let mut task = lock(&self.task);
        if task.is_none() {
            let (tx, cluster, log) = (self.tx.clone(), cluster.clone(), log.clone());
            *task = Some(tokio::spawn(poll(tx, cluster, log)));
        }
        rx
    }

    /// Ends the poller (the run's end).
    pub(crate) fn close(&self) {
        if let Some(t) = lock(&self.task).take() {
            t.abort();
        }
    }
}

/// Lists the cluster's jobs every `POLL` while anyone watches; a failure
/// is logged once until the list answers again.
async fn poll(tx: watch::Sender<Option<Listing>>, cluster: Arc<Cluster>, log: TechLog) {
    let mut failing = false;
    loop {
        if tx.receiver_count() > 0 {
            let asked_at = Instant::now();
            let jobs = call(&cluster, |c| c.list()).await.map(Arc::new);
            match &jobs {
                Err(e) if !failing => {
                    log.line(&format!("the cluster's job list: {e}"));
                    failing = true;
                }
                Err(_) => {}
                Ok(_) => failing = false,
            }
            tx.send_replace(Some(Listing { asked_at, jobs }));
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_listing_asked_before_a_jobs_submission_says_nothing_of_it() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(10);
        let running = JobInfo {
            status: "RUNNING".into(),
            message: String::new(),
        };
        let jobs: HashMap<String, JobInfo> = [("a".to_string(), running.clone())].into();
        let listing = |asked_at, jobs| Listing { asked_at, jobs };
        let early = listing(t0, Ok(Arc::new(jobs.clone())));
        assert_eq!(early.fact_for("b", t1), None);
        let late = listing(t1, Ok(Arc::new(jobs)));
        assert_eq!(late.fact_for("a", t1), Some(Fact::Listed(Some(running))));
        assert_eq!(late.fact_for("b", t0), Some(Fact::Listed(None)));
        let failed = listing(t1, Err("HTTP 500".into()));
        assert_eq!(failed.fact_for("a", t0), Some(Fact::ListFailed));
    }
}
