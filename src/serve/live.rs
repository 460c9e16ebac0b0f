//! The hub between a run and the page: what the run (or `ralph serve`'s
//! follower) tells it — records, agent activity, statuses — kept as the
//! current `Snapshot`, and every change broadcast to the event streams as
//! one numbered frame. Everything leaves through `Live::out`, redacted.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::sync::broadcast;

use super::model::{counts, Snapshot, StoryView, Summary, ACTIVITY_LINES};
use crate::redact::Secrets;
use crate::runlog::{Ev, Record};

/// Frames a slow client may fall behind by before it is sent a whole
/// snapshot instead.
const BACKLOG: usize = 1024;

/// One change, ready to send as a server-sent event.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub(crate) seq: u64,
    /// The SSE event name: `record`, `status`, `activity`, `graph`,
    /// `controls`, `control`, `summary`, `end` (the last).
    pub(crate) event: &'static str,
    /// Its JSON, already redacted.
    pub(crate) data: String,
}

#[derive(Debug, Default)]
struct Inner {
    seq: u64,
    graph: u64,
    stories: Vec<StoryView>,
    edges: Vec<(usize, usize)>,
    summary: Summary,
    activity: HashMap<String, VecDeque<String>>,
    controls: bool,
}

/// See the module doc. Shared by the run (or the follower) and the server.
#[derive(Debug)]
pub(crate) struct Live {
    pub(crate) root: PathBuf,
    pub(crate) project: String,
    secrets: Arc<Secrets>,
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<Frame>>,
    /// Set once by `close`: streams end after what was sent before it.
    closed: tokio::sync::watch::Sender<bool>,
}

impl Live {
    pub(crate) fn new(root: PathBuf, secrets: Arc<Secrets>) -> Arc<Live> {
        let project = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| root.display().to_string());
        Arc::new(Live {
            root,
            project,
            secrets,
            inner: Mutex::new(Inner::default()),
            tx: broadcast::channel(BACKLOG).0,
            closed: tokio::sync::watch::channel(false).0,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `text` with every secret masked: the one way out of the server.
    pub(crate) fn out(&self, text: &str) -> String {
        self.secrets.redact_str(text)
    }

    /// Numbers and sends one change (under the lock, so frames leave in
    /// the order of their numbers).
    fn send(&self, inner: &mut Inner, event: &'static str, data: serde_json::Value) {
        inner.seq += 1;
        let frame = Frame {
            seq: inner.seq,
            event,
            data: self.out(&data.to_string()),
        };
        // No client listening is no error.
        let _ = self.tx.send(Arc::new(frame));
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Frame>> {
        self.tx.subscribe()
    }

    /// The stories (id, title, status) and the DAG's edges (`(a, b)`: b
    /// waits for a), at the start and whenever the backlog changes.
    pub(crate) fn set_graph(&self, stories: Vec<StoryView>, edges: Vec<(usize, usize)>) {
        let mut inner = self.lock();
        inner.stories = stories;
        inner.edges = edges;
        inner.graph += 1;
        let graph = inner.graph;
        self.send(&mut inner, "graph", json!({ "graph": graph }));
    }

    /// Each story's status (in the order of `set_graph`'s stories); sends
    /// only what changed.
    pub(crate) fn set_statuses(&self, n: usize, status: impl Fn(usize) -> &'static str) {
        let mut inner = self.lock();
        if n != inner.stories.len() {
            return;
        }
        let mut changes = serde_json::Map::new();
        for (i, s) in inner.stories.iter_mut().enumerate() {
            let now = status(i);
            if s.status != now {
                s.status = now;
                changes.insert(s.id.clone(), now.into());
            }
        }
        if changes.is_empty() {
            return;
        }
        let counts = counts(&inner.stories);
        self.send(
            &mut inner,
            "status",
            json!({ "changes": changes, "counts": counts }),
        );
    }

    pub(crate) fn set_budget(&self, usd: Option<f64>, tokens: Option<u64>) {
        let mut inner = self.lock();
        inner.summary.budget_usd = usd;
        inner.summary.budget_tokens = tokens;
    }

    /// Whether a run is there for the controls to reach.
    pub(crate) fn set_controls(&self, on: bool) {
        let mut inner = self.lock();
        if inner.controls != on {
            inner.controls = on;
            self.send(&mut inner, "controls", json!({ "controls": on }));
        }
    }

    /// A run record, as it is written.
    pub(crate) fn record(&self, rec: &Record) {
        let mut inner = self.lock();
        inner.summary.apply(rec);
        if let Ev::AttemptStart { story, .. } = &rec.ev {
            inner.activity.remove(story);
        }
        if rec.ev.ends_run() {
            inner.activity.clear();
        }
        let data = json!({ "record": rec, "summary": inner.summary });
        self.send(&mut inner, "record", data);
    }

    /// The run's records start over (`ralph serve` found a newer run).
    pub(crate) fn new_run(&self) {
        let mut inner = self.lock();
        let (usd, tokens) = (inner.summary.budget_usd, inner.summary.budget_tokens);
        inner.summary = Summary {
            budget_usd: usd,
            budget_tokens: tokens,
            ..Summary::default()
        };
        inner.activity.clear();
    }

    /// Whether the summary says a run is going on.
    pub(crate) fn snapshot_live(&self) -> bool {
        self.lock().summary.live
    }

    /// The run whose records are followed ended without saying so (it was
    /// killed).
    pub(crate) fn not_live(&self) {
        let mut inner = self.lock();
        inner.summary.not_live();
        let data = json!({ "summary": inner.summary });
        self.send(&mut inner, "summary", data);
    }

    /// The run is over: the last frame, `end`, says so (with the summary
    /// as it ended), and every stream ends once it has sent it, so a page
    /// sees the run's last changes before its server goes.
    pub(crate) fn close(&self, exit_code: Option<i32>) {
        let mut inner = self.lock();
        if *self.closed.borrow() {
            return;
        }
        inner.summary.not_live();
        inner.summary.exit_code = exit_code;
        inner.controls = false;
        let data = json!({ "summary": inner.summary });
        self.send(&mut inner, "end", data);
        self.closed.send_replace(true);
    }

    /// Whether `close` was called; its receiver wakes when it is.
    pub(crate) fn closed(&self) -> tokio::sync::watch::Receiver<bool> {
        self.closed.subscribe()
    }

    /// A line of what a story's agent is doing.
    pub(crate) fn activity(&self, id: &str, text: &str) {
        let mut inner = self.lock();
        let lines = inner.activity.entry(id.to_string()).or_default();
        if lines.len() == ACTIVITY_LINES {
            lines.pop_front();
        }
        lines.push_back(text.to_string());
        let t = crate::timefmt::now_secs();
        self.send(
            &mut inner,
            "activity",
            json!({ "id": id, "text": text, "t": t }),
        );
    }

    /// A control command sent from the page and the run's answer.
    pub(crate) fn control(&self, request: &serde_json::Value, reply: &serde_json::Value) {
        let mut inner = self.lock();
        self.send(
            &mut inner,
            "control",
            json!({ "request": request, "reply": reply }),
        );
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        let inner = self.lock();
        Snapshot {
            seq: inner.seq,
            project: self.project.clone(),
            controls: inner.controls,
            graph: inner.graph,
            stories: inner.stories.clone(),
            counts: counts(&inner.stories),
            summary: inner.summary.clone(),
            activity: inner.activity.clone(),
        }
    }

    /// The stories and edges, for drawing the graph.
    pub(crate) fn graph(&self) -> (Vec<StoryView>, Vec<(usize, usize)>) {
        let inner = self.lock();
        (inner.stories.clone(), inner.edges.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live() -> Arc<Live> {
        Live::new(
            PathBuf::from("/x/proj"),
            Arc::new(Secrets::new(["sk-very-secret-value"])),
        )
    }

    fn story(id: &str) -> StoryView {
        StoryView {
            id: id.into(),
            title: format!("t {id}"),
            status: "pending",
        }
    }

    #[test]
    fn only_changed_statuses_are_sent_in_order() {
        let l = live();
        let mut rx = l.subscribe();
        l.set_graph(vec![story("1.1"), story("1.2")], vec![(0, 1)]);
        l.set_statuses(2, |i| if i == 0 { "running" } else { "pending" });
        l.set_statuses(2, |i| if i == 0 { "running" } else { "pending" });
        l.set_statuses(3, |_| "done"); // another backlog: ignored
        let g = rx.try_recv().unwrap();
        assert_eq!((g.seq, g.event), (1, "graph"));
        let s = rx.try_recv().unwrap();
        assert_eq!((s.seq, s.event), (2, "status"));
        let v: serde_json::Value = serde_json::from_str(&s.data).unwrap();
        assert_eq!(v["changes"], json!({ "1.1": "running" }));
        assert_eq!(v["counts"], json!({ "pending": 1, "running": 1 }));
        assert!(rx.try_recv().is_err(), "nothing changed after");
        assert_eq!(l.snapshot().seq, 2);
        assert_eq!(l.snapshot().project, "proj");
    }

    #[test]
    fn close_sends_end_last_once_with_the_run_over() {
        let l = live();
        let mut rx = l.subscribe();
        let closed = l.closed();
        l.set_controls(true);
        l.activity("1.1", "busy");
        l.close(Some(0));
        l.close(Some(1));
        let events: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|f| f.event)
            .collect();
        assert_eq!(events, ["controls", "activity", "end"]);
        assert!(*closed.borrow());
        let snap = l.snapshot();
        assert!(!snap.summary.live && !snap.controls);
        assert_eq!(snap.summary.exit_code, Some(0), "the first close stands");
    }

    #[test]
    fn secrets_never_leave() {
        let l = live();
        let mut rx = l.subscribe();
        l.activity("1.1", "token is sk-very-secret-value, ok");
        let f = rx.try_recv().unwrap();
        assert!(!f.data.contains("sk-very-secret-value"), "{}", f.data);
        assert!(f.data.contains("***"));
        assert_eq!(l.snapshot().activity["1.1"].len(), 1);
        for i in 0..20 {
            l.activity("1.1", &format!("line {i}"));
        }
        assert_eq!(l.snapshot().activity["1.1"].len(), ACTIVITY_LINES);
    }
}
