//! A scripted GitHub REST API on 127.0.0.1 (issue 27): issues with labels,
//! "blocked by" dependencies, sub-issues, comments, closing, ETags (`304`),
//! and switches a test or a fake agent flips through files: `down` (every
//! answer a 502), `hang` (every request taken and never answered, until
//! the switch goes; only those it names when it names some; a request the
//! client gives up on is logged `(given up)`), `add-issue`
//! (a new labelled issue appears once), and a rate limit the test arms. std only; never listens on another address.
//! Shared with benches/figures.rs (`#[path]`).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

#[derive(Debug, Clone, Default)]
pub struct Issue {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub open: bool,
    pub labels: Vec<String>,
    pub blocked_by: Vec<u64>,
    pub sub_issues: Vec<u64>,
    pub comments: Vec<String>,
    /// Bumped by every change, as GitHub's `updated_at`.
    pub version: u64,
}

#[derive(Debug, Default)]
pub struct Api {
    pub issues: BTreeMap<u64, Issue>,
    /// `METHOD path` of every request answered, in order.
    pub log: Vec<String>,
    /// The next list request answers 403 with this `x-ratelimit-reset`.
    pub rate_limit_reset: Option<i64>,
    /// Issue added when the `add-issue` file appears.
    pub to_add: Option<Issue>,
    /// Requests without `Authorization: Bearer <token>` are refused.
    pub token: String,
    /// The server's own URL, for `Link` headers.
    pub base: String,
}

pub struct Server {
    pub url: String,
    pub api: Arc<Mutex<Api>>,
}

impl Server {
    /// Serves `api` on an ephemeral loopback port; `switches` is the
    /// directory holding the `down` and `add-issue` files.
    pub fn start(mut api: Api, switches: PathBuf) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let url = format!("http://{}", listener.local_addr().unwrap());
        api.base = url.clone();
        let api = Arc::new(Mutex::new(api));
        let shared = api.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let api = shared.clone();
                let switches = switches.clone();
                std::thread::spawn(move || serve(stream, &api, &switches));
            }
        });
        Server { url, api }
    }

    pub fn issue(&self, n: u64) -> Issue {
        self.api.lock().unwrap().issues[&n].clone()
    }

    pub fn log(&self) -> Vec<String> {
        self.api.lock().unwrap().log.clone()
    }
}

pub fn issue(n: u64, body: &str, labels: &[&str]) -> Issue {
    Issue {
        number: n,
        title: format!("Issue {n}"),
        body: body.to_string(),
        open: true,
        labels: labels.iter().map(|l| l.to_string()).collect(),
        version: 1,
        ..Issue::default()
    }
}

fn serve(stream: TcpStream, api: &Mutex<Api>, switches: &std::path::Path) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let header = |k: &str| headers.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let len: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if hangs(switches, &method, &target) {
            // A tracker that takes the request and never answers: the
            // request is logged, then the connection is held, unanswered,
            // until the switch goes (bounded, so no thread outlives a test
            // by long). A client that gives up (its time limit, its exit)
            // is logged as it closes: `(given up)`.
            let log = |what: &str| {
                let line = format!("{method} {target} ({what})");
                api.lock().unwrap().log.push(line);
            };
            log("hung");
            let _ = stream.set_read_timeout(Some(std::time::Duration::from_millis(50)));
            let mut probe = [0u8; 1];
            for _ in 0..2400 {
                if !switches.join("hang").exists() {
                    break;
                }
                match stream.read(&mut probe) {
                    Ok(0) => return log("given up"),
                    Err(e)
                        if !matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        return log("given up")
                    }
                    _ => {}
                }
            }
            return;
        }
        let (status, extra, out) = answer(
            api,
            switches,
            &method,
            &target,
            header("if-none-match"),
            header("authorization"),
            &body,
        );
        let mut resp = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
            out.len()
        );
        for (k, v) in extra {
            resp.push_str(&format!("{k}: {v}\r\n"));
        }
        resp.push_str("\r\n");
        resp.push_str(&out);
        if stream.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

/// The `hang` switch: every request while it is empty, else only those
/// whose `METHOD target` starts with what it holds (one write hung, the
/// rest answered).
fn hangs(switches: &std::path::Path, method: &str, target: &str) -> bool {
    match std::fs::read_to_string(switches.join("hang")) {
        Ok(only) => {
            let only = only.trim();
            only.is_empty() || format!("{method} {target}").starts_with(only)
        }
        Err(_) => false,
    }
}

type Answer = (u16, Vec<(String, String)>, String);

fn answer(
    api: &Mutex<Api>,
    switches: &std::path::Path,
    method: &str,
    target: &str,
    etag: Option<String>,
    auth: Option<String>,
    body: &Value,
) -> Answer {
    let mut api = api.lock().unwrap();
    api.log.push(format!("{method} {target}"));
    if switches.join("down").exists() {
        return (502, vec![], "{\"message\":\"Bad Gateway\"}".into());
    }
    if auth.as_deref() != Some(&format!("Bearer {}", api.token)) {
        return (401, vec![], "{\"message\":\"Bad credentials\"}".into());
    }
    if switches.join("add-issue").exists() {
        if let Some(i) = api.to_add.take() {
            api.issues.insert(i.number, i);
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let rest = path.strip_prefix("/repos/o/r/issues").unwrap_or("?");
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let ok = |v: Value| (200, vec![], v.to_string());
    match (method, segs.as_slice()) {
        ("GET", []) => {
            if let Some(reset) = api.rate_limit_reset.take() {
                return (
                    403,
                    vec![
                        ("x-ratelimit-remaining".into(), "0".into()),
                        ("x-ratelimit-reset".into(), reset.to_string()),
                    ],
                    "{\"message\":\"API rate limit exceeded\"}".into(),
                );
            }
            let label = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("labels="))
                .unwrap_or("");
            let page: usize = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("page="))
                .and_then(|p| p.parse().ok())
                .unwrap_or(1);
            let all: Vec<&Issue> = api
                .issues
                .values()
                .filter(|i| i.labels.iter().any(|l| l == label))
                .collect();
            let chunk: Vec<Value> = all
                .iter()
                .skip((page - 1) * 100)
                .take(100)
                .map(|i| issue_json(i))
                .collect();
            if all.len() <= page * 100
                && api.to_add.is_none()
                && switches.join("add-issue").exists()
            {
                // A whole read holding the added issue was served.
                let _ = std::fs::write(switches.join("listed"), "");
            }
            let text = Value::Array(chunk).to_string();
            let tag = format!("\"{:x}\"", fnv(&text));
            let mut extra = vec![("etag".to_string(), tag.clone())];
            if all.len() > page * 100 {
                extra.push((
                    "link".into(),
                    format!(
                        "<{}/repos/o/r/issues?labels={label}&state=all&per_page=100&page={}>; rel=\"next\"",
                        api.base, page + 1
                    ),
                ));
            }
            if etag.as_deref() == Some(tag.as_str()) {
                return (304, extra, String::new());
            }
            (200, extra, text)
        }
        ("POST", []) => {
            let number = api.issues.keys().max().copied().unwrap_or(0) + 1;
            let mut i = issue(number, body["body"].as_str().unwrap_or_default(), &[]);
            i.title = body["title"].as_str().unwrap_or_default().to_string();
            i.labels = body["labels"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|l| l.as_str().map(str::to_string))
                .collect();
            api.issues.insert(number, i);
            (201, vec![], json!({ "number": number }).to_string())
        }
        ("GET", [n, "dependencies", "blocked_by"]) => {
            let Some(i) = api.issues.get(&n.parse().unwrap_or(0)) else {
                return (404, vec![], "{}".into());
            };
            ok(json!(i
                .blocked_by
                .iter()
                .map(|b| json!({"number": b}))
                .collect::<Vec<_>>()))
        }
        ("GET", [n, "sub_issues"]) => {
            let Some(i) = api.issues.get(&n.parse().unwrap_or(0)) else {
                return (404, vec![], "{}".into());
            };
            ok(json!(i
                .sub_issues
                .iter()
                .map(|b| json!({"number": b}))
                .collect::<Vec<_>>()))
        }
        (m, [n, rest @ ..]) => {
            let Some(i) = api.issues.get_mut(&n.parse().unwrap_or(0)) else {
                return (404, vec![], "{\"message\":\"Not Found\"}".into());
            };
            match (m, rest) {
                ("POST", ["labels"]) => {
                    for l in body["labels"].as_array().into_iter().flatten() {
                        let l = l.as_str().unwrap_or_default().to_string();
                        if !i.labels.contains(&l) {
                            i.labels.push(l);
                        }
                    }
                    i.version += 1;
                    ok(json!([]))
                }
                ("DELETE", ["labels", l]) => {
                    let l = l.replace("%3A", ":");
                    if !i.labels.contains(&l) {
                        return (404, vec![], "{\"message\":\"Label does not exist\"}".into());
                    }
                    i.labels.retain(|x| *x != l);
                    i.version += 1;
                    ok(json!([]))
                }
                ("POST", ["comments"]) => {
                    i.comments
                        .push(body["body"].as_str().unwrap_or_default().to_string());
                    i.version += 1;
                    (201, vec![], "{}".into())
                }
                ("PATCH", []) => {
                    if body["state"] == "closed" {
                        i.open = false;
                    }
                    i.version += 1;
                    ok(json!({}))
                }
                _ => (404, vec![], "{\"message\":\"Not Found\"}".into()),
            }
        }
        _ => (404, vec![], "{\"message\":\"Not Found\"}".into()),
    }
}

fn issue_json(i: &Issue) -> Value {
    json!({
        "number": i.number,
        "title": i.title,
        "body": i.body,
        "state": if i.open { "open" } else { "closed" },
        "labels": i.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
        "updated_at": format!("2026-01-01T00:00:{:02}Z", i.version % 60) + &"x".repeat((i.version / 60) as usize),
        "issue_dependencies_summary": {"blocked_by": i.blocked_by.len()},
        "sub_issues_summary": {"total": i.sub_issues.len()},
    })
}

/// A stable hash for ETags.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}
