//! A scripted Jira REST v3 API on 127.0.0.1 (issue 37), over `fakeapi`'s
//! server: `POST /rest/api/3/search/jql` paged two issues at a time by
//! `nextPageToken`, issues with `Blocks` (and `Relates`) links and
//! subtasks, transitions listed and posted by ID, comments (ADF only),
//! labels added and removed through `update`. A request without the
//! expected `Authorization` is answered 401. With `Api::data_center` it is
//! Jira Data Center's REST v2 instead (no v3: `POST /rest/api/2/search`
//! paged by `startAt`, comments as plain text). A switch file `down` makes
//! every answer a 502; `add-issue` adds `Api::to_add` once.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::fakeapi::{FakeApi, Reply, Request};

pub const PROJECT: &str = "SHOP";

/// The workflow's statuses: name and category key.
pub const STATUSES: &[(&str, &str)] = &[
    ("To Do", "new"),
    ("In Progress", "indeterminate"),
    ("In Review", "indeterminate"),
    ("Done", "done"),
];

/// Every transition, from anywhere: ID, name, the status it goes to. The
/// first into an "In Progress" category is not the first listed.
pub const TRANSITIONS: &[(&str, &str, &str)] = &[
    ("11", "Reopen", "To Do"),
    ("21", "Start work", "In Progress"),
    ("22", "Ask review", "In Review"),
    ("31", "Done", "Done"),
];

#[derive(Debug, Clone, Default)]
pub struct Issue {
    pub key: String,
    pub summary: String,
    pub description: String,
    /// Its status's name (`STATUSES`).
    pub status: String,
    pub labels: Vec<String>,
    /// Issues it waits for: on it, `Blocks` links with `inwardIssue`.
    pub blocked_by: Vec<String>,
    /// Issues it `Relates` to (no order).
    pub related: Vec<String>,
    pub subtasks: Vec<String>,
    /// The comments' text (taken out of their ADF).
    pub comments: Vec<String>,
    /// Every status it was moved to, in order.
    pub moves: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Api {
    pub issues: BTreeMap<String, Issue>,
    /// What was asked, in order: `search <jql>`, `METHOD KEY/what`.
    pub log: Vec<String>,
    /// The `Authorization` header a request must carry, exactly.
    pub auth: String,
    /// Issue added when the `add-issue` switch file appears.
    pub to_add: Option<Issue>,
    /// The `fields` each search asked for.
    pub fields: Vec<String>,
    /// Serves REST v2 (Data Center) rather than v3 (Cloud).
    pub data_center: bool,
}

pub struct Server {
    pub url: String,
    pub api: Arc<Mutex<Api>>,
    _server: FakeApi,
}

impl Server {
    /// Serves `api` on an ephemeral loopback port; `switches` holds `down`.
    pub fn start(api: Api, switches: PathBuf) -> Server {
        let api = Arc::new(Mutex::new(api));
        let shared = api.clone();
        let server = FakeApi::start(move |req| {
            let (status, body) = answer(&mut shared.lock().unwrap(), &switches, req);
            match status {
                // No content, as Jira answers a transition or an edit.
                204 => Reply {
                    body: Vec::new(),
                    ..Reply::json(204, Value::Null)
                },
                _ => Reply::json(status, body),
            }
        });
        Server {
            url: server.url(),
            api,
            _server: server,
        }
    }

    pub fn issue(&self, key: &str) -> Issue {
        self.api.lock().unwrap().issues[key].clone()
    }

    pub fn log(&self) -> Vec<String> {
        self.api.lock().unwrap().log.clone()
    }
}

/// An issue of the project in status `status` with `labels`.
pub fn issue(n: u64, status: &str, labels: &[&str]) -> Issue {
    Issue {
        key: format!("{PROJECT}-{n}"),
        summary: format!("Issue {n}"),
        description: format!("Make issue {n}."),
        status: status.into(),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        ..Issue::default()
    }
}

fn category(status: &str) -> &'static str {
    STATUSES
        .iter()
        .find(|s| s.0 == status)
        .map_or("new", |s| s.1)
}

fn status_json(status: &str) -> Value {
    json!({"name": status, "statusCategory": {"key": category(status)}})
}

fn errors(status: u16, message: &str) -> (u16, Value) {
    (status, json!({"errorMessages": [message], "errors": {}}))
}

/// The text of an ADF document's text nodes.
fn text_of(v: &Value) -> String {
    match v.get("text").and_then(Value::as_str) {
        Some(t) => t.to_string(),
        None => v
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(text_of)
            .collect(),
    }
}

fn answer(api: &mut Api, switches: &Path, req: &Request) -> (u16, Value) {
    let path = req.path.split('?').next().unwrap_or_default().to_string();
    let (root, search_at) = if api.data_center {
        ("/rest/api/2", "/rest/api/2/search")
    } else {
        ("/rest/api/3", "/rest/api/3/search/jql")
    };
    let issue_at = format!("{root}/issue/");
    let about = match path.strip_prefix(&issue_at) {
        Some(rest) => format!("{} {rest}", req.method),
        None if path == search_at => {
            format!("search {}", req.body["jql"].as_str().unwrap_or_default())
        }
        None => format!("{} {path}", req.method),
    };
    api.log.push(about);
    if switches.join("down").exists() {
        return (502, json!("Bad Gateway"));
    }
    if req.header("authorization") != Some(api.auth.as_str()) {
        return errors(401, "Client must be authenticated to access this resource.");
    }
    if switches.join("add-issue").exists() {
        if let Some(i) = api.to_add.take() {
            api.issues.insert(i.key.clone(), i);
        }
    }
    if path == search_at && req.method == "POST" {
        let (status, out) = search(api, &req.body);
        let from = out["startAt"].as_u64().unwrap_or(0) as usize;
        let shown = out["issues"].as_array().map_or(0, Vec::len);
        let last = out["isLast"]
            .as_bool()
            .unwrap_or_else(|| from + shown >= out["total"].as_u64().unwrap_or(0) as usize);
        if last && api.to_add.is_none() && switches.join("add-issue").exists() {
            // A whole read holding the added issue was served.
            let _ = std::fs::write(switches.join("listed"), "");
        }
        return (status, out);
    }
    if path == format!("{root}/issue") && req.method == "POST" {
        return create(api, &req.body["fields"]);
    }
    if path == format!("{root}/issueLink") && req.method == "POST" {
        let key = |side: &str| {
            req.body[side]["key"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        let (blocker, blocked) = (key("outwardIssue"), key("inwardIssue"));
        if req.body.pointer("/type/name") != Some(&json!("Blocks"))
            || !api.issues.contains_key(&blocker)
        {
            return errors(404, "No issue link type or issue of that name.");
        }
        let Some(b) = api.issues.get_mut(&blocked) else {
            return errors(404, "Issue does not exist.");
        };
        b.blocked_by.push(blocker);
        return (201, Value::Null);
    }
    let Some(rest) = path.strip_prefix(&issue_at) else {
        return errors(404, "no such resource");
    };
    let (key, what) = rest.split_once('/').unwrap_or((rest, ""));
    let Some(i) = api.issues.get_mut(key) else {
        return errors(
            404,
            "Issue does not exist or you do not have permission to see it.",
        );
    };
    match (req.method.as_str(), what) {
        ("GET", "transitions") => {
            let list: Vec<Value> = TRANSITIONS
                .iter()
                .filter(|t| t.2 != i.status)
                .map(|(id, name, to)| json!({"id": id, "name": name, "to": status_json(to)}))
                .collect();
            (200, json!({ "transitions": list }))
        }
        ("POST", "transitions") => {
            let id = req.body.pointer("/transition/id").and_then(Value::as_str);
            match TRANSITIONS
                .iter()
                .find(|t| Some(t.0) == id && t.2 != i.status)
            {
                Some((_, _, to)) => {
                    i.status = to.to_string();
                    i.moves.push(to.to_string());
                    (204, Value::Null)
                }
                None => errors(400, "Transition id is not valid for this issue."),
            }
        }
        ("POST", "comment") => {
            let body = &req.body["body"];
            match (api_v2(&req.path), body.as_str()) {
                (true, Some(text)) => i.comments.push(text.to_string()),
                (false, None) if body["type"] == "doc" => i.comments.push(text_of(body)),
                _ => return errors(400, "Comment body is not valid for this API version."),
            }
            (201, json!({"id": "1"}))
        }
        ("PUT", "") => {
            for change in req
                .body
                .pointer("/update/labels")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(l) = change["add"].as_str() {
                    if !i.labels.iter().any(|x| x == l) {
                        i.labels.push(l.to_string());
                    }
                }
                if let Some(l) = change["remove"].as_str() {
                    i.labels.retain(|x| x != l);
                }
            }
            (204, Value::Null)
        }
        _ => errors(405, "method not allowed"),
    }
}

/// `project = KEY AND labels = "L"` (and whatever follows) over the
/// issues; the page token is the index of the page's first issue.
fn search(api: &mut Api, body: &Value) -> (u16, Value) {
    let jql = body["jql"].as_str().unwrap_or_default();
    let Some(rest) = jql.strip_prefix(&format!("project = \"{PROJECT}\" AND labels = \"")) else {
        return errors(400, "The value does not exist for the field 'project'.");
    };
    let label = rest.split('"').next().unwrap_or_default();
    api.fields = body["fields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect();
    let all: Vec<&Issue> = api
        .issues
        .values()
        .filter(|i| i.labels.iter().any(|l| l == label))
        .collect();
    let from: usize = if api.data_center {
        body["startAt"].as_u64().unwrap_or(0) as usize
    } else {
        body["nextPageToken"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0)
    };
    let page: Vec<Value> = all
        .iter()
        .skip(from)
        .take(2)
        .map(|i| issue_json(api, i))
        .collect();
    if api.data_center {
        let total = all.len();
        return (
            200,
            json!({ "issues": page, "startAt": from, "total": total }),
        );
    }
    let mut out = json!({ "issues": page, "isLast": all.len() <= from + 2 });
    if all.len() > from + 2 {
        out["nextPageToken"] = json!((from + 2).to_string());
    }
    (200, out)
}

/// A new issue from `fields`: a Task of the project, keyed after the
/// highest number.
fn create(api: &mut Api, fields: &Value) -> (u16, Value) {
    if fields.pointer("/project/key") != Some(&json!(PROJECT))
        || fields.pointer("/issuetype/name") != Some(&json!("Task"))
    {
        return errors(400, "project or issue type is not valid");
    }
    let description = match &fields["description"] {
        Value::String(s) if api.data_center => s.clone(),
        d if !api.data_center && d["type"] == "doc" => text_of(d),
        _ => return errors(400, "description is not valid for this API version"),
    };
    let n = crate::linear_api::next_number(api.issues.keys());
    let mut i = issue(n, "To Do", &[]);
    i.summary = fields["summary"].as_str().unwrap_or_default().to_string();
    i.description = description;
    i.labels = fields["labels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l.as_str().map(str::to_string))
        .collect();
    let key = i.key.clone();
    api.issues.insert(key.clone(), i);
    (201, json!({ "id": format!("100{n}"), "key": key }))
}

fn api_v2(path: &str) -> bool {
    path.starts_with("/rest/api/2/")
}

fn issue_json(api: &Api, i: &Issue) -> Value {
    let blocks = json!({"name": "Blocks", "inward": "is blocked by", "outward": "blocks"});
    let relates = json!({"name": "Relates", "inward": "relates to", "outward": "relates to"});
    let mut links: Vec<Value> = i
        .blocked_by
        .iter()
        .map(|k| json!({"type": blocks, "inwardIssue": {"key": k}}))
        .collect();
    links.extend(
        api.issues
            .values()
            .filter(|o| o.blocked_by.contains(&i.key))
            .map(|o| json!({"type": blocks, "outwardIssue": {"key": o.key}})),
    );
    links.extend(
        i.related
            .iter()
            .map(|k| json!({"type": relates, "inwardIssue": {"key": k}})),
    );
    let parent = api
        .issues
        .values()
        .find(|p| p.subtasks.contains(&i.key))
        .map(|p| json!({"key": p.key}));
    // Data Center's v2 has the description as text, v3 as ADF.
    let description = if api.data_center {
        json!(i.description)
    } else {
        json!({"type": "doc", "version": 1, "content": [
            {"type": "paragraph", "content": [{"type": "text", "text": i.description}]}]})
    };
    json!({
        "id": format!("100{}", i.key.rsplit('-').next().unwrap_or("0")),
        "key": i.key,
        "fields": {
            "summary": i.summary,
            "description": description,
            "status": status_json(&i.status),
            "labels": i.labels,
            "issuelinks": links,
            "subtasks": i.subtasks.iter().map(|k| json!({"key": k})).collect::<Vec<_>>(),
            "parent": parent,
        }
    })
}
