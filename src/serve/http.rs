//! The server: the page, the JSON API under `/api/`, the event streams,
//! the token check and the control requests. Reads go through `Live` (the
//! run as it is now) or the project's files (state, records, logs);
//! everything sent is redacted (`Live::out`).

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures_util::stream;
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use super::live::Live;
use crate::paths;
use crate::runlog;

/// How often a followed log file is read for new lines.
const LOG_POLL: Duration = Duration::from_millis(250);
/// Lines of a log a client gets first.
const TAIL_LINES: usize = 80;
/// A line of a log is cut to this many characters.
const LINE_CHARS: usize = 2000;

#[derive(Clone)]
pub(crate) struct App {
    pub(crate) live: Arc<Live>,
    pub(crate) token: Arc<str>,
}

pub(crate) fn router(app: App) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/api/state", get(state))
        .route("/api/stories", get(stories))
        .route("/api/stories/{id}", get(story))
        .route("/api/stories/{id}/log", get(log_stream))
        .route("/api/runs", get(runs))
        .route("/api/runs/{id}", get(run))
        .route("/api/events", get(events))
        .route("/api/dag.svg", get(dag))
        .route("/api/control", post(control))
        .layer(middleware::from_fn_with_state(app.clone(), auth))
        .with_state(app)
}

/// True when `given` is the token (in time independent of where they differ).
fn same(given: &str, token: &str) -> bool {
    given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// The token a request carries: `X-Ralph-Token`, `Authorization: Bearer`,
/// or `?token=` (what a browser's address bar and `EventSource` can send).
fn token_of(req: &Request) -> Option<String> {
    let h = req.headers();
    if let Some(v) = h.get("x-ralph-token").and_then(|v| v.to_str().ok()) {
        return Some(v.to_string());
    }
    if let Some(v) = h
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(v.to_string());
    }
    req.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("token="))
            .map(str::to_string)
    })
}

async fn auth(State(app): State<App>, req: Request, next: Next) -> Response {
    // Every route, reads included, whatever the address (issue 31): an
    // agent shares the host's loopback while `sandbox.network` is true, and
    // the logs and state of other stories are no business of it; no other
    // site a browser visits can press a button either (it cannot read the
    // token). The page's own URL carries the token, which it passes on.
    if !token_of(&req).is_some_and(|t| same(&t, &app.token)) {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({
                "ok": false,
                "message": "this needs the token ralph printed with the page's URL",
                "hint": "open the URL ralph printed (it ends in ?token=...), or send the header X-Ralph-Token"
            })),
        )
            .into_response();
    }
    next.run(req).await
}

/// A JSON answer, redacted.
fn json_out(app: &App, v: &impl serde::Serialize) -> Response {
    let text = serde_json::to_string(v).unwrap_or_else(|_| "null".into());
    (
        [(header::CONTENT_TYPE, "application/json")],
        app.live.out(&text),
    )
        .into_response()
}

fn not_found(what: String, hint: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({ "ok": false, "message": what, "hint": hint })),
    )
        .into_response()
}

async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            // Nothing from elsewhere, ever: the page is whole as served.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:",
            ),
        ],
        Html(super::page::html()),
    )
        .into_response()
}

async fn state(State(app): State<App>) -> Response {
    json_out(&app, &app.live.snapshot())
}

async fn stories(State(app): State<App>) -> Response {
    let snap = app.live.snapshot();
    let st = crate::store::load_state(&app.live.root).unwrap_or_default();
    let rows: Vec<Value> = snap
        .stories
        .iter()
        .map(|s| {
            let rec = st.record(&s.id).cloned().unwrap_or_default();
            json!({
                "id": s.id,
                "title": s.title,
                "status": s.status,
                "attempts": rec.history.len(),
                "failed_attempts": rec.attempts,
                "conflicts": rec.conflicts,
                "cost_usd": rec.cost_usd,
                "last_error": rec.last_error,
                "landed_commit": rec.landed_commit,
            })
        })
        .collect();
    json_out(&app, &rows)
}

/// The numbers of a story's attempt logs, in order.
fn logged_attempts(app: &App, id: &str) -> Vec<u32> {
    crate::store::logged_attempts(&paths::story_logs(&app.live.root, id))
}

/// The last `n` lines of `text`, each cut to `LINE_CHARS`.
fn last_lines(text: &str, n: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| l.chars().take(LINE_CHARS).collect())
        .collect()
}

async fn story(State(app): State<App>, UrlPath(id): UrlPath<String>) -> Response {
    let snap = app.live.snapshot();
    let Some(view) = snap.stories.iter().find(|s| s.id == id) else {
        return not_found(
            format!("no story {id} in the backlog"),
            "/api/stories lists the stories",
        );
    };
    let st = crate::store::load_state(&app.live.root).unwrap_or_default();
    let record = st.record(&id).cloned().unwrap_or_default();
    let latest = logged_attempts(&app, &id).last().copied();
    let tail = latest
        .and_then(|n| std::fs::read(paths::attempt_log_path(&app.live.root, &id, n)).ok())
        .map(|b| last_lines(&String::from_utf8_lossy(&b), TAIL_LINES))
        .unwrap_or_default();
    json_out(
        &app,
        &json!({
            "id": view.id,
            "title": view.title,
            "status": view.status,
            "record": record,
            "running": snap.summary.running.iter().find(|r| r.story == id),
            "activity": snap.activity.get(&id),
            "log": { "attempt": latest, "tail": tail },
        }),
    )
}

#[derive(serde::Deserialize)]
struct LogQuery {
    attempt: Option<u32>,
    /// A racing candidate's log (best of N, issue 36), with `attempt`.
    candidate: Option<u32>,
}

/// The latest attempt's log (or `?attempt=N`'s, `&candidate=K` for a
/// racing candidate's) as it grows: `tail` first (its last lines), then
/// `lines` as they are written; a newer attempt's log is followed once it
/// starts (without `?attempt`).
async fn log_stream(
    State(app): State<App>,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<LogQuery>,
) -> Response {
    if crate::backlog::check_id(&id).is_err() {
        return not_found(format!("no story {id:?}"), "/api/stories lists the stories");
    }
    struct Follow {
        app: App,
        id: String,
        fixed: Option<u32>,
        candidate: Option<u32>,
        attempt: Option<u32>,
        offset: u64,
        /// A line cut at the end of what was read, kept for the next read.
        partial: String,
        started: bool,
        closed: tokio::sync::watch::Receiver<bool>,
        /// The run ended: this read is the stream's last.
        last: bool,
    }
    let f = Follow {
        closed: app.live.closed(),
        last: false,
        app,
        id,
        fixed: q.attempt,
        candidate: q.candidate,
        attempt: None,
        offset: 0,
        partial: String::new(),
        started: false,
    };
    let s = stream::unfold(f, |mut f| async move {
        loop {
            if f.last {
                return None;
            }
            if f.started {
                tokio::select! {
                    _ = tokio::time::sleep(LOG_POLL) => {}
                    // One more read for what the attempt wrote last.
                    _ = f.closed.wait_for(|c| *c) => f.last = true,
                }
            }
            let want = f
                .fixed
                .or_else(|| logged_attempts(&f.app, &f.id).last().copied());
            let switched = want != f.attempt || !f.started;
            if want != f.attempt {
                f.attempt = want;
                f.offset = 0;
                f.partial.clear();
            }
            let first = !f.started;
            f.started = true;
            let Some(n) = f.attempt else {
                if first {
                    let data = f
                        .app
                        .live
                        .out(&json!({ "attempt": null, "lines": [] }).to_string());
                    return Some((
                        Ok::<_, Infallible>(Event::default().event("tail").data(data)),
                        f,
                    ));
                }
                continue;
            };
            let path = match f.candidate {
                Some(k) => paths::candidate_log_path(&f.app.live.root, &f.id, n, k),
                None => paths::attempt_log_path(&f.app.live.root, &f.id, n),
            };
            let new = read_from(&path, f.offset).await;
            if new.is_empty() && !switched {
                continue;
            }
            f.offset += new.len() as u64;
            let mut text = std::mem::take(&mut f.partial);
            text.push_str(&String::from_utf8_lossy(&new));
            if let Some(cut) = text.rfind('\n') {
                f.partial = text[cut + 1..].to_string();
                text.truncate(cut + 1);
            } else {
                f.partial = text;
                text = String::new();
            }
            let (event, lines) = if switched {
                ("tail", last_lines(&text, TAIL_LINES))
            } else {
                ("lines", last_lines(&text, usize::MAX))
            };
            if lines.is_empty() && !switched {
                continue;
            }
            let data = f
                .app
                .live
                .out(&json!({ "attempt": n, "lines": lines }).to_string());
            return Some((Ok(Event::default().event(event).data(data)), f));
        }
    });
    Sse::new(s).keep_alive(KeepAlive::default()).into_response()
}

/// What `path` holds from `offset` on (empty when nothing new or no file).
async fn read_from(path: &std::path::Path, offset: u64) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let Ok(mut file) = tokio::fs::File::open(path).await else {
        return Vec::new();
    };
    if file.seek(std::io::SeekFrom::Start(offset)).await.is_err() {
        return Vec::new();
    }
    let mut out = Vec::new();
    // One read's worth at a time keeps a huge log from landing at once.
    let _ = file.take(4 << 20).read_to_end(&mut out).await;
    out
}

async fn runs(State(app): State<App>) -> Response {
    let root: PathBuf = app.live.root.clone();
    let list = tokio::task::spawn_blocking(move || {
        runlog::read_all(&root)
            .into_iter()
            .map(|r| {
                let start = r.records.first().map(|x| x.t);
                let end = r.records.iter().rev().find_map(|x| match &x.ev {
                    runlog::Ev::RunEnd { exit_code, .. } => {
                        Some(json!({ "t": x.t, "exit_code": exit_code }))
                    }
                    runlog::Ev::Recovered { .. } => {
                        Some(json!({ "t": x.t, "exit_code": null, "killed": true }))
                    }
                    _ => None,
                });
                json!({ "id": r.id, "started": start, "end": end, "records": r.records.len() })
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    json_out(&app, &list)
}

async fn run(State(app): State<App>, UrlPath(id): UrlPath<String>) -> Response {
    let known = runlog::list_runs(&app.live.root).contains(&id);
    match known
        .then(|| runlog::read_run(&app.live.root, &id))
        .flatten()
    {
        Some(r) => json_out(&app, &json!({ "id": r.id, "records": r.records })),
        None => not_found(format!("no run {id}"), "/api/runs lists the recorded runs"),
    }
}

fn snapshot_event(live: &Live) -> Event {
    let text = serde_json::to_string(&live.snapshot()).unwrap_or_default();
    Event::default().event("state").data(live.out(&text))
}

/// The run's changes as server-sent events: `state` (a whole snapshot)
/// first and whenever the client fell behind, then one event per change
/// numbered by `id` (a change numbered at or below the snapshot's `seq`
/// is already in it).
async fn events(State(app): State<App>) -> Response {
    let rx = app.live.subscribe();
    // Subscribed first: a close after this sends its `end` to `rx`.
    let ended = *app.live.closed().borrow();
    let first = snapshot_event(&app.live);
    let s = stream::unfold(
        (Some(first), ended, rx, app.live.clone()),
        |(first, ended, mut rx, live)| async move {
            if let Some(ev) = first {
                return Some((Ok::<_, Infallible>(ev), (None, ended, rx, live)));
            }
            if ended {
                return None;
            }
            let (ev, ended) = match rx.recv().await {
                Ok(frame) => (
                    Event::default()
                        .event(frame.event)
                        .id(frame.seq.to_string())
                        .data(frame.data.clone()),
                    frame.event == "end",
                ),
                // The `end` may be among what was missed: a snapshot
                // taken after the close was seen then stands for it.
                Err(RecvError::Lagged(_)) => {
                    let ended = *live.closed().borrow();
                    (snapshot_event(&live), ended)
                }
                Err(RecvError::Closed) => return None,
            };
            Some((Ok(ev), (None, ended, rx, live)))
        },
    );
    Sse::new(s).keep_alive(KeepAlive::default()).into_response()
}

async fn dag(State(app): State<App>) -> Response {
    let (stories, edges) = app.live.graph();
    let nodes: Vec<(&str, &str, &'static str)> = stories
        .iter()
        .map(|s| (s.id.as_str(), s.title.as_str(), s.status))
        .collect();
    let svg = crate::report_html::dag_figure(&nodes, &edges);
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        app.live.out(&svg),
    )
        .into_response()
}

/// A control pressed on the page: the steering commands' own request,
/// read as they read it, sent with their client (`steer::client`).
async fn control(State(app): State<App>, body: Bytes) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({
                    "ok": false,
                    "message": "the body must be one JSON object such as {\"cmd\":\"pause\"}",
                    "hint": "docs/steering.md lists the commands"
                })),
            )
                .into_response()
        }
    };
    let cmd = match crate::steer::Command::parse(&request.to_string()) {
        Ok(cmd) => cmd,
        Err(refused) => {
            let refused = serde_json::to_value(refused).unwrap_or_default();
            return (StatusCode::BAD_REQUEST, axum::Json(refused)).into_response();
        }
    };
    let root = app.live.root.clone();
    let sent = tokio::task::spawn_blocking(move || crate::steer::client::send(&root, &cmd)).await;
    let reply = match sent {
        Ok(Ok(reply)) => serde_json::to_value(reply).unwrap_or_default(),
        Ok(Err(e)) => {
            let (message, hint) = match e.downcast_ref::<crate::error::RalphError>() {
                Some(r) => (r.to_string(), r.hint().unwrap_or_default().to_string()),
                None => (format!("{e:#}"), String::new()),
            };
            json!({ "ok": false, "message": message, "hint": hint })
        }
        Err(e) => {
            json!({ "ok": false, "message": format!("the control was lost: {e}"), "hint": "" })
        }
    };
    app.live.control(&request, &reply);
    let status = if reply.get("ok") == Some(&Value::Bool(true)) {
        StatusCode::OK
    } else {
        StatusCode::CONFLICT
    };
    (status, json_out(&app, &reply)).into_response()
}
