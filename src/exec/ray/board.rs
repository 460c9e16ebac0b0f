//! One job list for the whole run (issue 35): a task asks the dashboard for
//! its jobs every `POLL` while some job is watched, and every watch reads
//! its own job off that list. 20 jobs running cost 4 requests a second, not
//! 80 (one status request per job per poll, as before).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::watch;

use super::super::cluster::{Cluster, JobInfo};
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
