//! The Jira `Tracker`: the snapshot and the write queue on disk
//! (`.ralph/tracker/`, `tracker::kept`), the client, and the back-off
//! after a failure.

use std::collections::HashSet;
use std::path::Path;

use super::client::{self, Client, API_TOKEN_VAR, EMAIL_VAR, TOKEN_VAR};
use super::poll::{self, Rest};
use super::{apply, ops_for, settled, to_backlog, Op, Snapshot};
use crate::backlog::github::poll::Http;
use crate::backlog::tracker::edge::Offline;
use crate::backlog::tracker::interface::{Read, Tracker, Update};
use crate::backlog::tracker::kept::{unread, Kept, Snap};
use crate::backlog::tracker::story::{make_planned, NewIssue};
use crate::config::JiraSettings;

impl Snap for Snapshot {
    fn not_before(&mut self) -> &mut Option<i64> {
        &mut self.not_before
    }
}

pub(crate) struct Jira {
    settings: JiraSettings,
    http: Box<dyn Http + Send>,
    kept: Kept<Snapshot, Op>,
}

impl Jira {
    pub(crate) fn open(root: &Path, settings: JiraSettings) -> Jira {
        Jira::with_http(root, settings, Box::new(Client::new(client::auth())))
    }

    /// The tracker as the snapshot on disk has it: nothing is asked, not
    /// even the credentials.
    pub(crate) fn offline(root: &Path, settings: JiraSettings) -> Jira {
        Jira::with_http(root, settings, Box::new(Offline))
    }

    pub(crate) fn with_http(
        root: &Path,
        settings: JiraSettings,
        http: Box<dyn Http + Send>,
    ) -> Jira {
        let fresh = Snapshot {
            project: settings.project.clone(),
            label: settings.label.clone(),
            ..Snapshot::default()
        };
        let kept = Kept::load(
            root,
            |s: &Snapshot| s.project == settings.project && s.label == settings.label,
            fresh,
        );
        Jira {
            settings,
            http,
            kept,
        }
    }

    /// Reads Jira now; `Some(why)` when it could not.
    fn poll(&mut self, now: i64) -> Option<String> {
        let s = &self.settings;
        let site = (s.url.as_str(), Rest::of(s.api_version));
        match poll::poll(self.http.as_mut(), site, &s.jql, &self.kept.snapshot, now) {
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

impl Jira {
    /// `ralph plan` on this source: one labelled Task per planned story,
    /// each made after those it depends on, which then block it (a
    /// `Blocks` link per dependency). The planned IDs and the keys they
    /// became; an error stops at the first failure (the issues made before
    /// it stay, listed by the next read).
    pub(crate) fn create_issues(
        &mut self,
        planned: &[NewIssue],
        known: &HashSet<String>,
    ) -> Result<Vec<(String, String)>, String> {
        let now = crate::timefmt::now_secs();
        if let Some(why) = self.poll(now) {
            return Err(why);
        }
        let s = &self.settings;
        let site = (s.url.as_str(), Rest::of(s.api_version));
        let http = self.http.as_mut();
        let snapshot = &self.kept.snapshot;
        make_planned(
            http,
            (planned, known),
            |http, p| {
                let new = (p.title.as_str(), p.body.trim());
                let key = poll::create_issue(http, site, (&s.project, &s.label), new, now)
                    .map_err(|f| f.describe())?;
                // The key is what the API names it by too.
                Ok((key.clone(), key))
            },
            |http, blocker, blocked| {
                poll::link(http, site, blocker, blocked, now).map_err(|f| f.describe())
            },
            |d| snapshot.issue(d).map(|i| i.key.clone()),
        )
    }
}

fn creds() -> String {
    format!("{EMAIL_VAR} and {API_TOKEN_VAR} (or {TOKEN_VAR})")
}

impl Tracker for Jira {
    fn describe(&self) -> String {
        format!("Jira project {}", self.settings.project)
    }

    fn read(&mut self, now: i64) -> Read {
        let stale = match self.kept.waits(now, &self.describe()) {
            Some(why) => Some(why),
            None => self.poll(now),
        };
        if !self.kept.have_snapshot {
            let check = format!("backlog.jira.url, .project and .jql, and {}", creds());
            return unread(
                &self.describe(),
                Some(stale.unwrap_or_default()),
                &check,
                &creds(),
            );
        }
        Read {
            stale,
            ..self.snapshot()
        }
    }

    fn snapshot(&self) -> Read {
        if !self.kept.have_snapshot {
            return unread(&self.describe(), None, "", &creds());
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
        let ops = ops_for(id, &self.settings.done_transition, &update);
        let done = settled(&ops, &self.kept.pending, Some(issue));
        self.kept.queue(ops, done)
    }

    fn has(&self, id: &str, update: &Update) -> bool {
        let Some(issue) = self.kept.snapshot.issue(id) else {
            return true;
        };
        let ops = ops_for(id, &self.settings.done_transition, update);
        settled(&ops, &self.kept.pending, Some(issue))
            .into_iter()
            .all(|s| s)
    }

    fn flush(&mut self, now: i64, last: bool) -> Vec<String> {
        if !self.kept.may_flush(now, last) {
            return Vec::new();
        }
        let mut made: Vec<Op> = Vec::new();
        let (done, dropped, fail) = poll::flush(
            self.http.as_mut(),
            (&self.settings.url, Rest::of(self.settings.api_version)),
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
                .find(|i| i.key == op.issue())
            {
                apply(op, i);
            }
        }
        let describe = self.describe();
        self.kept.flushed(done, dropped, fail, now, &describe)
    }

    fn pending(&self) -> Vec<String> {
        self.kept.pending.iter().map(Op::describe).collect()
    }
}
