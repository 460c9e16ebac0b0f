//! The Linear `Tracker`: the snapshot and the write queue on disk
//! (`.ralph/tracker/`, the same files as GitHub's: one backlog a project),
//! the client, and the back-off after a failure.

use std::collections::HashSet;
use std::path::Path;

use super::client::{self, Client, KEY_VAR};
use super::poll;
use super::{apply, ops_for, settled, to_backlog, Op, Snapshot};
use crate::backlog::github::poll::Http;
use crate::backlog::tracker::edge::Offline;
use crate::backlog::tracker::interface::{Read, Tracker, Update};
use crate::backlog::tracker::kept::{unread, Kept, Snap};
use crate::backlog::tracker::story::{make_planned, NewIssue};
use crate::config::LinearSettings;

impl Snap for Snapshot {
    fn not_before(&mut self) -> &mut Option<i64> {
        &mut self.not_before
    }
}

pub(crate) struct Linear {
    settings: LinearSettings,
    http: Box<dyn Http + Send>,
    kept: Kept<Snapshot, Op>,
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
        let fresh = Snapshot {
            team: settings.team.clone(),
            label: settings.label.clone(),
            ..Snapshot::default()
        };
        // A snapshot of another team or label (or tracker) is no fallback.
        let kept = Kept::load(
            root,
            |s: &Snapshot| s.team == settings.team && s.label == settings.label,
            fresh,
        );
        Linear {
            settings,
            http,
            kept,
        }
    }

    /// Reads Linear now; `Some(why)` when it could not.
    fn poll(&mut self, now: i64) -> Option<String> {
        match poll::poll(
            self.http.as_mut(),
            &self.settings.api_url,
            &self.kept.snapshot,
            now,
        ) {
            Ok(snap) => {
                self.kept.read_ok(snap);
                None
            }
            Err(fail) => {
                self.kept.failed(&fail, now);
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
        let mut team = self.kept.snapshot.team_info.clone().unwrap_or_default();
        let label = poll::label_id(http, &api, &mut team, &self.settings.label, now)
            .map_err(|f| f.describe())?;
        let snapshot = &self.kept.snapshot;
        make_planned(
            http,
            (planned, known),
            |http, p| {
                poll::create_issue(http, &api, &team, (&p.title, p.body.trim()), &label, now)
                    .map_err(|f| f.describe())
            },
            |http, blocker, blocked| {
                poll::relate(http, &api, blocker, blocked, now).map_err(|f| f.describe())
            },
            |d| snapshot.issue(d).map(|i| i.id.clone()),
        )
    }
}

impl Tracker for Linear {
    fn describe(&self) -> String {
        format!("Linear team {}", self.settings.team)
    }

    fn read(&mut self, now: i64) -> Read {
        let stale = match self.kept.waits(now, &self.describe()) {
            Some(why) => Some(why),
            None => self.poll(now),
        };
        if !self.kept.have_snapshot {
            let check = format!("backlog.linear.team and .api_url, and the key in {KEY_VAR}");
            return unread(
                &self.describe(),
                Some(stale.unwrap_or_default()),
                &check,
                KEY_VAR,
            );
        }
        Read {
            stale,
            ..self.snapshot()
        }
    }

    fn snapshot(&self) -> Read {
        if !self.kept.have_snapshot {
            return unread(&self.describe(), None, "", KEY_VAR);
        }
        let (backlog, problems) = to_backlog(&self.kept.snapshot);
        Read {
            backlog: Some(backlog),
            problems,
            stale: None,
        }
    }

    fn tell(&mut self, id: &str, update: Update) -> Result<(), String> {
        // Not an issue of the last read: nothing this tracker would write.
        let Some(issue) = self.kept.snapshot.issue(id) else {
            return Ok(());
        };
        let ops = ops_for(id, &issue.id, &update);
        let done = settled(&ops, &self.kept.pending, Some(issue));
        self.kept.queue(ops, done)
    }

    fn has(&self, id: &str, update: &Update) -> bool {
        let Some(issue) = self.kept.snapshot.issue(id) else {
            return true;
        };
        settled(
            &ops_for(id, &issue.id, update),
            &self.kept.pending,
            Some(issue),
        )
        .into_iter()
        .all(|s| s)
    }

    fn flush(&mut self, now: i64, last: bool) -> Vec<String> {
        if !self.kept.may_flush(now, last) {
            return Vec::new();
        }
        // The writes need the team's states and labels: a read gives them.
        if self.kept.snapshot.team_info.is_none() {
            if let Some(why) = self.poll(now) {
                return vec![format!("{} writes wait ({why})", self.kept.pending.len())];
            }
        }
        let mut team = self.kept.snapshot.team_info.clone().unwrap_or_default();
        let mut made: Vec<Op> = Vec::new();
        let (done, dropped, fail) = poll::flush(
            self.http.as_mut(),
            &self.settings.api_url,
            &mut team,
            &self.kept.pending,
            now,
            |op| made.push(op.clone()),
        );
        for op in &made {
            if let Some(i) = self
                .kept
                .snapshot
                .issues
                .iter_mut()
                .find(|i| i.identifier == op.issue())
            {
                apply(op, i);
            }
        }
        self.kept.snapshot.team_info = Some(team);
        let describe = self.describe();
        self.kept.flushed(done, dropped, fail, now, &describe)
    }

    fn pending(&self) -> Vec<String> {
        self.kept.pending.iter().map(Op::describe).collect()
    }
}
