//! A scripted Linear GraphQL API on 127.0.0.1 (issue 37): one team with
//! workflow states and labels, issues with `blocks`/`related` relations and
//! sub-issues, comments, state moves, label writes and creation. Requests
//! are told apart by their operation name (`RalphIssues`, `RalphMove`, ...)
//! and read through their variables; the query text is not parsed. The
//! issue list comes two to a page, so every read pages. A switch file
//! `down` makes every answer a 502; `add-issue` adds `Api::to_add` once, and
//! `listed` appears once a whole read holding it was served. Served
//! by `fakeapi`'s server on 127.0.0.1.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::fakeapi::{FakeApi, Reply};

pub const TEAM: &str = "ENG";

#[derive(Debug, Clone, Default)]
pub struct Issue {
    pub identifier: String,
    pub title: String,
    pub description: String,
    /// The ID of its workflow state (`STATES`).
    pub state: String,
    pub labels: Vec<String>,
    /// Issues this one blocks.
    pub blocks: Vec<String>,
    /// Issues it is `related` to (no order).
    pub related: Vec<String>,
    pub children: Vec<String>,
    pub comments: Vec<String>,
    /// Every state it was moved to, in order.
    pub moves: Vec<String>,
}

/// The team's states: ID, type, position. Two of type `started` and two of
/// `completed`, the first of each not listed first.
pub const STATES: &[(&str, &str, f64)] = &[
    ("s-backlog", "backlog", 0.0),
    ("s-triage", "triage", 0.0),
    ("s-todo", "unstarted", 0.0),
    ("s-review", "started", 5.0),
    ("s-doing", "started", 1.0),
    ("s-shipped", "completed", 3.0),
    ("s-done", "completed", 2.0),
    ("s-cancel", "canceled", 0.0),
];

fn state_type(id: &str) -> &'static str {
    STATES
        .iter()
        .find(|s| s.0 == id)
        .map_or("unstarted", |s| s.1)
}

#[derive(Debug, Default)]
pub struct Api {
    pub issues: BTreeMap<String, Issue>,
    /// The team's labels: name and ID.
    pub labels: Vec<(String, String)>,
    /// The operation (and its issue) of every request answered, in order.
    pub log: Vec<String>,
    /// The `Authorization` header a request must carry, exactly.
    pub key: String,
    /// Issue added when the `add-issue` switch file appears.
    pub to_add: Option<Issue>,
}

pub struct Server {
    pub url: String,
    pub api: Arc<Mutex<Api>>,
    _server: FakeApi,
}

impl Server {
    /// Serves `api` on an ephemeral loopback port (`fakeapi`'s server);
    /// `switches` holds `down`.
    pub fn start(api: Api, switches: PathBuf) -> Server {
        let api = Arc::new(Mutex::new(api));
        let shared = api.clone();
        let server = FakeApi::start(move |req| {
            let auth = req.header("authorization").map(str::to_string);
            let (status, out) = answer(&shared, &switches, auth, &req.body);
            Reply {
                body: out.into_bytes(),
                ..Reply::json(status, Value::Null)
            }
        });
        Server {
            url: format!("{}/graphql", server.url()),
            api,
            _server: server,
        }
    }

    pub fn issue(&self, identifier: &str) -> Issue {
        self.api.lock().unwrap().issues[identifier].clone()
    }

    pub fn log(&self) -> Vec<String> {
        self.api.lock().unwrap().log.clone()
    }
}

/// An issue of the team in state `state` with `labels`.
pub fn issue(n: u64, state: &str, labels: &[&str]) -> Issue {
    Issue {
        identifier: format!("{TEAM}-{n}"),
        title: format!("Issue {n}"),
        description: format!("Make issue {n}."),
        state: state.into(),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        ..Issue::default()
    }
}

/// The number after the highest of `keys` (`ENG-3`, `SHOP-7`): a new
/// issue's, in the Linear and Jira servers alike.
pub fn next_number<'a>(keys: impl Iterator<Item = &'a String>) -> u64 {
    keys.filter_map(|k| k.rsplit_once('-').and_then(|(_, n)| n.parse::<u64>().ok()))
        .max()
        .unwrap_or(0)
        + 1
}

fn error(message: &str, code: &str) -> (u16, String) {
    (
        400,
        json!({"errors": [{"message": message, "extensions": {"code": code}}]}).to_string(),
    )
}

fn answer(api: &Mutex<Api>, switches: &Path, auth: Option<String>, body: &Value) -> (u16, String) {
    let mut api = api.lock().unwrap();
    let op = body["operationName"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let vars = &body["variables"];
    let var = |k: &str| vars[k].as_str().unwrap_or_default().to_string();
    let about = if vars["id"].is_string() {
        format!("{op} {}", var("id"))
    } else {
        op.clone()
    };
    api.log.push(about);
    if switches.join("down").exists() {
        return (502, "Bad Gateway".into());
    }
    if auth.as_deref() != Some(api.key.as_str()) {
        return error("Authentication required", "AUTHENTICATION_ERROR");
    }
    if switches.join("add-issue").exists() {
        if let Some(i) = api.to_add.take() {
            api.issues.insert(i.identifier.clone(), i);
        }
    }
    let data = |v: Value| (200, json!({ "data": v }).to_string());
    // Writes name an issue by Linear's ID (`id-ENG-1`).
    let target = var("id").trim_start_matches("id-").to_string();
    match op.as_str() {
        "RalphIssues" => {
            if var("team") != TEAM {
                return data(json!({"teams": {"nodes": []}, "issues": {"nodes": [],
                    "pageInfo": {"hasNextPage": false, "endCursor": null}}}));
            }
            let label = var("label");
            let all: Vec<&Issue> = api
                .issues
                .values()
                .filter(|i| i.labels.contains(&label))
                .collect();
            let from: usize = var("after").parse().unwrap_or(0);
            let page: Vec<Value> = all
                .iter()
                .skip(from)
                .take(2)
                .map(|i| issue_json(&api, i))
                .collect();
            let more = all.len() > from + 2;
            if !more && api.to_add.is_none() && switches.join("add-issue").exists() {
                // A whole read holding the added issue was served.
                let _ = std::fs::write(switches.join("listed"), "");
            }
            data(json!({
                "teams": {"nodes": [{"id": "team-eng", "key": TEAM,
                    "states": {"nodes": STATES.iter().map(|(id, t, p)|
                        json!({"id": id, "type": t, "position": p})).collect::<Vec<_>>()},
                    "labels": {"nodes": api.labels.iter().map(|(n, id)|
                        json!({"id": id, "name": n})).collect::<Vec<_>>()}}]},
                "issues": {"nodes": page, "pageInfo": {"hasNextPage": more,
                    "endCursor": if more { json!((from + 2).to_string()) } else { Value::Null }}}
            }))
        }
        "RalphCreateLabel" => {
            let name = var("name");
            if var("team") != "team-eng" || api.labels.iter().any(|(n, _)| *n == name) {
                return error("label exists or no such team", "INVALID_INPUT");
            }
            let id = format!("label-{name}");
            api.labels.push((name, id.clone()));
            data(json!({"issueLabelCreate": {"success": true, "issueLabel": {"id": id}}}))
        }
        "RalphCreateIssue" => {
            if var("team") != "team-eng" {
                return error("no such team", "INVALID_INPUT");
            }
            let n = next_number(api.issues.keys());
            let mut i = issue(n, "s-todo", &[]);
            i.title = var("title");
            i.description = var("description");
            for l in vars["labels"].as_array().into_iter().flatten() {
                match api
                    .labels
                    .iter()
                    .find(|(_, id)| Some(id.as_str()) == l.as_str())
                {
                    Some((name, _)) => i.labels.push(name.clone()),
                    None => return error("no such label", "INVALID_INPUT"),
                }
            }
            let identifier = i.identifier.clone();
            api.issues.insert(identifier.clone(), i);
            data(json!({"issueCreate": {"success": true,
                "issue": {"id": format!("id-{identifier}"), "identifier": identifier}}}))
        }
        "RalphBlocks" => {
            let blocked = var("blocked").trim_start_matches("id-").to_string();
            let blocker = var("blocker").trim_start_matches("id-").to_string();
            if !api.issues.contains_key(&blocked) {
                return error("no such issue", "INVALID_INPUT");
            }
            let Some(b) = api.issues.get_mut(&blocker) else {
                return error("no such issue", "INVALID_INPUT");
            };
            b.blocks.push(blocked);
            data(json!({"issueRelationCreate": {"success": true}}))
        }
        "RalphMove" | "RalphComment" | "RalphAddLabel" | "RalphRemoveLabel" => {
            let label_name = api
                .labels
                .iter()
                .find(|(_, id)| *id == var("label"))
                .map(|(n, _)| n.clone());
            let Some(i) = api.issues.get_mut(&target) else {
                return (
                    200,
                    json!({"errors": [{"message": "Entity not found"}], "data": null}).to_string(),
                );
            };
            match op.as_str() {
                "RalphMove" => {
                    let state = var("state");
                    if !STATES.iter().any(|s| s.0 == state) {
                        return error("no such state", "INVALID_INPUT");
                    }
                    i.moves.push(state.clone());
                    i.state = state;
                }
                "RalphComment" => i.comments.push(var("body")),
                "RalphAddLabel" => match label_name {
                    Some(l) if !i.labels.contains(&l) => i.labels.push(l),
                    Some(_) => {}
                    None => return error("no such label", "INVALID_INPUT"),
                },
                _ => {
                    if let Some(l) = label_name {
                        i.labels.retain(|x| *x != l);
                    }
                }
            }
            data(json!({"result": {"success": true}}))
        }
        _ => error(
            &format!("unknown operation {op:?}"),
            "GRAPHQL_VALIDATION_FAILED",
        ),
    }
}

fn issue_json(api: &Api, i: &Issue) -> Value {
    let id = |s: &str| json!({ "identifier": s });
    let relations: Vec<Value> = i
        .blocks
        .iter()
        .map(|b| json!({"type": "blocks", "relatedIssue": id(b)}))
        .chain(
            i.related
                .iter()
                .map(|r| json!({"type": "related", "relatedIssue": id(r)})),
        )
        .collect();
    let inverse: Vec<Value> = api
        .issues
        .values()
        .filter(|o| o.blocks.contains(&i.identifier))
        .map(|o| json!({"type": "blocks", "issue": id(&o.identifier)}))
        .chain(
            api.issues
                .values()
                .filter(|o| o.related.contains(&i.identifier))
                .map(|o| json!({"type": "related", "issue": id(&o.identifier)})),
        )
        .collect();
    json!({
        "id": format!("id-{}", i.identifier),
        "identifier": i.identifier,
        "title": i.title,
        "description": i.description,
        "state": {"type": state_type(&i.state)},
        "labels": {"nodes": i.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>()},
        "children": {"nodes": i.children.iter().map(|c| id(c)).collect::<Vec<_>>()},
        "relations": {"nodes": relations},
        "inverseRelations": {"nodes": inverse},
    })
}
