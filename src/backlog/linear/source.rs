//! The Linear `Tracker`: the snapshot and the write queue on disk
//! (`.ralph/tracker/`, the same files as GitHub's: one backlog a project),
//! the client, and the back-off after a failure.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::client::{self, Client, KEY_VAR};
use super::poll;
use super::{apply, ops_for, settled, to_backlog, Op, Snapshot};
use crate::atomic::write_atomic;
use crate::backlog::github::poll::{Fail, Http, Req, Resp};
use crate::backlog::github::source::NewIssue;
use crate::backlog::tracker::disk::read_json;
use crate::backlog::tracker::interface::{Read, Tracker, Update};
use crate::config::LinearSettings;
use crate::paths;

pub(crate) struct Linear {
    snapshot_path: PathBuf,
    pending_path: PathBuf,
    settings: LinearSettings,
    http: Box<dyn Http + Send>,
    snapshot: Snapshot,
    /// Read from the snapshot file or the API (false: no fallback yet).
    have_snapshot: bool,
    pending: Vec<Op>,
    /// Rate limited: nothing is asked before this (Unix seconds).
    limited_until: i64,
    /// Unreachable: not asked again before this, but for a last flush.
    retry_at: i64,
}

impl Linear {
    pub(crate) fn open(root: &Path, settings: LinearSettings) -> Linear {
        Linear::with_http(root, settings, Box::new(Client::new(client::key())))
    }

    /// The tracker as the snapshot on disk has it: nothing is asked, not
    /// even the key.
    pub(crate) fn offline(root: &Path, settings: LinearSettings) -> Linear {
        Linear::with_http(root, settings, Box::new(Offline))
    }

    pub(crate) fn with_http(
        root: &Path,
        settings: LinearSettings,
        http: Box<dyn Http + Send>,
    ) -> Linear {
        let snapshot_path = paths::tracker_snapshot(root);
        let pending_path = paths::tracker_pending(root);
        // A snapshot of another team or label (or tracker) is no fallback.
        let read = read_json::<Snapshot>(&snapshot_path)
            .filter(|s| s.team == settings.team && s.label == settings.label);
        let have_snapshot = read.is_some();
        let snapshot = read.unwrap_or_else(|| Snapshot {
            team: settings.team.clone(),
            label: settings.label.clone(),
            ..Snapshot::default()
        });
        Linear {
            snapshot_path,
            limited_until: snapshot.not_before.unwrap_or(0),
            pending: read_json(&pending_path).unwrap_or_default(),
            pending_path,
            retry_at: 0,
            settings,
            http,
            snapshot,
            have_snapshot,
        }
    }

    fn save_pending(&self) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(&self.pending).unwrap_or_default();
        write_atomic(&self.pending_path, text.as_bytes())
    }

    fn save_snapshot(&self) {
        if let Ok(text) = serde_json::to_string(&self.snapshot) {
            let _ = write_atomic(&self.snapshot_path, text.as_bytes());
        }
    }

    /// A failure's back-off: a rate limit until its reset, anything else a
    /// short while.
    fn failed(&mut self, fail: &Fail, now: i64) {
        match fail {
            Fail::Limited { until } => {
                self.limited_until = *until;
                self.snapshot.not_before = Some(*until);
                self.save_snapshot();
            }
            Fail::Unreachable(_) | Fail::Refused(..) => self.retry_at = now + 5,
        }
    }

    /// Reads Linear now; `Some(why)` when it could not.
    fn poll(&mut self, now: i64) -> Option<String> {
        match poll::poll(
            self.http.as_mut(),
            &self.settings.api_url,
            &self.snapshot,
            now,
        ) {
            Ok(snap) => {
                self.snapshot = snap;
                self.have_snapshot = true;
                self.limited_until = 0;
                self.retry_at = 0;
                self.save_snapshot();
                None
            }
            Err(fail) => {
                self.failed(&fail, now);
                Some(format!("{}: {}", self.describe(), fail.describe()))
            }
        }
    }
}

impl Linear {
    /// `ralph plan` on this source: one issue per planned story, labelled,
    /// each made after those it depends on, which then block it (a
    /// `blocks` relation per dependency; batches say nothing more). The
    /// planned IDs and the identifiers they became; an error stops at the
    /// first failure (the issues made before it stay, listed by the next
    /// read).
    pub(crate) fn create_issues(
        &mut self,
        planned: &[NewIssue],
        known: &HashSet<String>,
    ) -> Result<Vec<(String, String)>, String> {
        let now = crate::timefmt::now_secs();
        if let Some(why) = self.poll(now) {
            return Err(why);
        }
        let api = self.settings.api_url.clone();
        let http = self.http.as_mut();
        let mut team = self.snapshot.team_info.clone().unwrap_or_default();
        let label = poll::label_id(http, &api, &mut team, &self.settings.label, now)
            .map_err(|f| f.describe())?;
        // Planned ID → (Linear's ID, identifier).
        let mut made: Vec<(String, String, String)> = Vec::new();
        for i in creation_order(planned, known)? {
            let p = &planned[i];
            let (id, identifier) =
                poll::create_issue(http, &api, &team, (&p.title, p.body.trim()), &label, now)
                    .map_err(|f| f.describe())?;
            for d in &p.depends_on {
                let blocker = made
                    .iter()
                    .find(|(planned, ..)| planned == d)
                    .map(|(_, id, _)| id.as_str())
                    .or_else(|| self.snapshot.issue(d).map(|i| i.id.as_str()));
                if let Some(blocker) = blocker {
                    poll::relate(http, &api, blocker, &id, now).map_err(|f| f.describe())?;
                }
            }
            made.push((p.id.clone(), id, identifier));
        }
        Ok(made.into_iter().map(|(p, _, ident)| (p, ident)).collect())
    }
}

/// The order `planned` can be made in: each one after what it depends on
/// among them (what `known` holds exists already).
fn creation_order(planned: &[NewIssue], known: &HashSet<String>) -> Result<Vec<usize>, String> {
    let mut order: Vec<usize> = Vec::new();
    while order.len() < planned.len() {
        let ready = (0..planned.len()).find(|i| {
            !order.contains(i)
                && planned[*i]
                    .depends_on
                    .iter()
                    .all(|d| known.contains(d) || order.iter().any(|o| planned[*o].id == *d))
        });
        order.push(ready.ok_or("the plan's dependencies form a cycle")?);
    }
    Ok(order)
}

impl Tracker for Linear {
    fn describe(&self) -> String {
        format!("Linear team {}", self.settings.team)
    }

    fn read(&mut self, now: i64) -> Read {
        let wait = self.limited_until.max(self.retry_at);
        let stale = if now < wait {
            Some(format!(
                "{} is not asked before {wait} (Unix time): rate limited or unreachable",
                self.describe(),
            ))
        } else {
            self.poll(now)
        };
        if !self.have_snapshot {
            let why = stale.unwrap_or_default();
            return Read::none(format!(
                        "the backlog is on {} and could not be read, with no snapshot to fall back on: {why}; \
                         check backlog.linear.team and .api_url, and the key in {KEY_VAR}",
                        self.describe()
                    ));
        }
        Read {
            stale,
            ..self.snapshot()
        }
    }

    fn snapshot(&self) -> Read {
        if !self.have_snapshot {
            return Read::none(format!(
                "the backlog is on {} and no snapshot of it was taken yet; \
                         `ralph validate --online` (or `ralph run`) reads it, with {KEY_VAR} set",
                self.describe()
            ));
        }
        let (backlog, problems) = to_backlog(&self.snapshot);
        Read {
            backlog: Some(backlog),
            problems,
            stale: None,
        }
    }

    fn tell(&mut self, id: &str, update: Update) -> Result<(), String> {
        // Not an issue of the last read: nothing this tracker would write.
        let Some(issue) = self.snapshot.issue(id) else {
            return Ok(());
        };
        let ops = ops_for(id, &issue.id, &update);
        let done = settled(&ops, &self.pending, Some(issue));
        self.pending.extend(
            ops.into_iter()
                .zip(done)
                .filter(|(_, done)| !done)
                .map(|(op, _)| op),
        );
        // The queue is on disk before anything is asked: a write cut short
        // by a crash is made by the next run.
        self.save_pending()
            .map_err(|e| format!("cannot write {}: {e}", self.pending_path.display()))
    }

    fn has(&self, id: &str, update: &Update) -> bool {
        let Some(issue) = self.snapshot.issue(id) else {
            return true;
        };
        settled(&ops_for(id, &issue.id, update), &self.pending, Some(issue))
            .into_iter()
            .all(|s| s)
    }

    fn flush(&mut self, now: i64, last: bool) -> Vec<String> {
        if self.pending.is_empty() || now < self.limited_until || (now < self.retry_at && !last) {
            return Vec::new();
        }
        let mut lines = Vec::new();
        // The writes need the team's states and labels: a read gives them.
        if self.snapshot.team_info.is_none() {
            if let Some(why) = self.poll(now) {
                lines.push(format!("{} writes wait ({why})", self.pending.len()));
                return lines;
            }
        }
        let mut team = self.snapshot.team_info.clone().unwrap_or_default();
        let mut made: Vec<Op> = Vec::new();
        let (done, dropped, fail) = poll::flush(
            self.http.as_mut(),
            &self.settings.api_url,
            &mut team,
            &self.pending,
            now,
            |op| made.push(op.clone()),
        );
        for op in &made {
            if let Some(i) = self
                .snapshot
                .issues
                .iter_mut()
                .find(|i| i.identifier == op.issue())
            {
                apply(op, i);
            }
        }
        self.snapshot.team_info = Some(team);
        self.save_snapshot();
        self.pending.drain(..done);
        lines.extend(
            dropped
                .into_iter()
                .map(|d| format!("{}: a write was refused and dropped: {d}", self.describe())),
        );
        if let Some(fail) = fail {
            lines.push(format!(
                "{}: {} writes wait ({})",
                self.describe(),
                self.pending.len(),
                fail.describe()
            ));
            self.failed(&fail, now);
        }
        if let Err(e) = self.save_pending() {
            lines.push(format!("cannot write {}: {e}", self.pending_path.display()));
        }
        lines
    }

    fn pending(&self) -> Vec<String> {
        self.pending.iter().map(Op::describe).collect()
    }
}

/// The client of `Linear::offline`: asks nothing.
struct Offline;

impl Http for Offline {
    fn request(&mut self, _req: Req<'_>) -> Result<Resp, String> {
        Err("not asked: this command reads the snapshot only".into())
    }
}
