//! Reading Jira and writing back to it over an `Http` (the real client in
//! `client.rs`; a scripted one in tests), REST v3.
//!
//! The read is `POST /rest/api/3/search/jql` (the old `/search` is being
//! retired), paged by `nextPageToken`, asking only the fields the mapping
//! needs: a backlog of up to 100 issues is one request a poll. Jira Data
//! Center serves no v3: with `Rest::V2` the read is `POST
//! /rest/api/2/search` paged by `startAt`, and comments are plain text.

use serde_json::{json, Value};

use super::{Issue, Op, Snapshot, Target, IN_PROGRESS};
use crate::backlog::github::poll::{classify, Fail, Http, Req, Resp};

/// Which REST API the site serves (`backlog.jira.api_version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rest {
    /// Jira Cloud.
    V3,
    /// Jira Data Center.
    V2,
}

impl Rest {
    pub(crate) fn of(version: u64) -> Rest {
        if version == 2 {
            Rest::V2
        } else {
            Rest::V3
        }
    }

    fn root(self, url: &str) -> String {
        let n = if self == Rest::V2 { 2 } else { 3 };
        format!("{url}/rest/api/{n}")
    }
}

const FIELDS: &[&str] = &[
    "summary",
    "description",
    "status",
    "issuelinks",
    "subtasks",
    "parent",
    "labels",
];

/// The JQL of the backlog: the project's issues with the label, and the
/// user's own JQL ANDed.
pub(crate) fn jql(project: &str, label: &str, more: &str) -> String {
    let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    // Quoted, so a key or label that is a JQL word stays a value.
    let mut q = format!("project = {} AND labels = {}", quote(project), quote(label));
    if !more.trim().is_empty() {
        q.push_str(&format!(" AND ({})", more.trim()));
    }
    q
}

/// What an answer means: fine, or which failure. Jira says what is wrong
/// in `errorMessages` and `errors`, which `classify` does not read.
pub(crate) fn answer(resp: &Resp, now: i64) -> Result<(), Fail> {
    match classify(resp, now) {
        Err(Fail::Refused(code, msg)) => {
            let body: Option<Value> = serde_json::from_str(&resp.body).ok();
            let mut said: Vec<String> = body
                .as_ref()
                .and_then(|b| b.get("errorMessages"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|m| m.as_str().map(str::to_string))
                .collect();
            if let Some(errors) = body
                .as_ref()
                .and_then(|b| b.get("errors"))
                .and_then(Value::as_object)
            {
                said.extend(
                    errors
                        .iter()
                        .map(|(k, v)| format!("{k}: {}", v.as_str().unwrap_or_default())),
                );
            }
            Err(Fail::Refused(
                code,
                if said.is_empty() {
                    msg
                } else {
                    said.join("; ")
                },
            ))
        }
        other => other,
    }
}

/// One request with a JSON body (or none); the answer's JSON (`Null` for
/// an empty answer, as a 204).
fn call(
    http: &mut dyn Http,
    method: &str,
    url: &str,
    body: Option<Value>,
    now: i64,
) -> Result<Value, Fail> {
    let text = body.map(|b| b.to_string());
    let resp = http
        .request(Req {
            method,
            url,
            etag: None,
            body: text.as_deref(),
        })
        .map_err(Fail::Unreachable)?;
    answer(&resp, now)?;
    Ok(serde_json::from_str(&resp.body).unwrap_or(Value::Null))
}

/// The text of an Atlassian Document Format node: its text nodes, a line
/// break after each block. A description that is already a string (Data
/// Center's v2 shape) is taken as it is.
pub(crate) fn adf_text(v: &Value) -> String {
    fn walk(v: &Value, out: &mut String) {
        match v.get("type").and_then(Value::as_str) {
            Some("text") => out.push_str(v.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("hardBreak") => out.push('\n'),
            // Its fence kept, so a ```ralph block written as code in Jira
            // is read as one.
            Some("codeBlock") => {
                let lang = v.pointer("/attrs/language").and_then(Value::as_str);
                out.push_str(&format!("```{}\n", lang.unwrap_or("")));
                for c in v
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    walk(c, out);
                }
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str("```\n");
            }
            kind => {
                for c in v
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    walk(c, out);
                }
                let block = matches!(
                    kind,
                    Some("paragraph" | "heading" | "blockquote" | "listItem" | "rule")
                );
                if block && !out.ends_with('\n') {
                    out.push('\n');
                }
            }
        }
    }
    if let Some(s) = v.as_str() {
        return s.to_string();
    }
    let mut out = String::new();
    walk(v, &mut out);
    out.trim_end().to_string()
}

/// A comment's body as ADF: one paragraph of `text`.
pub(crate) fn adf_of(text: &str) -> Value {
    json!({"type": "doc", "version": 1, "content": [
        {"type": "paragraph", "content": [{"type": "text", "text": text}]}]})
}

fn keys(v: &Value, list: &str, key: &str) -> Vec<String> {
    v.pointer(list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|n| n.pointer(key).and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// The other ends of the issue's `Blocks` links on `side`
/// (`inwardIssue`: it waits for them; `outwardIssue`: they wait for it).
fn blocking(v: &Value, side: &str) -> Vec<String> {
    v.pointer("/fields/issuelinks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|l| {
            l.pointer("/type/name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.eq_ignore_ascii_case("blocks"))
        })
        .filter_map(|l| {
            l.get(side)
                .and_then(|i| i.get("key"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect()
}

pub(crate) fn issue_from(v: &Value) -> Option<Issue> {
    let f = v.get("fields")?;
    Some(Issue {
        key: v.get("key")?.as_str()?.to_string(),
        summary: f
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        description: f.get("description").map(adf_text).unwrap_or_default(),
        category: f
            .pointer("/status/statusCategory/key")
            .and_then(Value::as_str)
            .unwrap_or("new")
            .to_string(),
        labels: f
            .get("labels")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|l| l.as_str().map(str::to_string))
            .collect(),
        blocked_by: blocking(v, "inwardIssue"),
        blocks: blocking(v, "outwardIssue"),
        subtasks: keys(f, "/subtasks", "/key"),
    })
}

/// Reads the project's labelled issues, page by page. `Err`: the snapshot
/// stays `old`.
pub(crate) fn poll(
    http: &mut dyn Http,
    (url, rest): (&str, Rest),
    more: &str,
    old: &Snapshot,
    now: i64,
) -> Result<Snapshot, Fail> {
    let search = match rest {
        Rest::V3 => format!("{}/search/jql", rest.root(url)),
        Rest::V2 => format!("{}/search", rest.root(url)),
    };
    let query = jql(&old.project, &old.label, more);
    let mut issues = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..1000 {
        let mut body = json!({ "jql": query, "fields": FIELDS, "maxResults": 100 });
        match (rest, &token) {
            (Rest::V3, Some(t)) => body["nextPageToken"] = json!(t),
            (Rest::V2, _) => body["startAt"] = json!(issues.len()),
            (Rest::V3, None) => {}
        }
        let page = call(http, "POST", &search, Some(body), now)?;
        let listed = page.get("issues").and_then(Value::as_array);
        let got = listed.map_or(0, Vec::len);
        issues.extend(listed.into_iter().flatten().filter_map(issue_from));
        let last = match rest {
            Rest::V3 => {
                token = page
                    .get("nextPageToken")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                token.is_none() || page.get("isLast") == Some(&Value::Bool(true))
            }
            Rest::V2 => {
                let total = page.get("total").and_then(Value::as_u64).unwrap_or(0);
                got == 0 || issues.len() as u64 >= total
            }
        };
        if last {
            break;
        }
    }
    Ok(Snapshot {
        project: old.project.clone(),
        label: old.label.clone(),
        issues,
        not_before: None,
    })
}

/// The ID of the transition `to` takes from where `issue` is, if its
/// workflow has one (the transitions as Jira lists them, in order).
pub(crate) fn pick(transitions: &Value, to: &Target) -> Option<String> {
    transitions
        .get("transitions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|t| match to {
            Target::InProgress => {
                t.pointer("/to/statusCategory/key").and_then(Value::as_str) == Some(IN_PROGRESS)
            }
            Target::Named(name) => t
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.trim().eq_ignore_ascii_case(name.trim())),
        })
        .and_then(|t| t.get("id"))
        .and_then(|id| {
            id.as_str()
                .map(str::to_string)
                .or(id.as_u64().map(|n| n.to_string()))
        })
}

/// Opens an issue of type Task in `project` with the label `label`; its
/// key.
pub(crate) fn create_issue(
    http: &mut dyn Http,
    (url, rest): (&str, Rest),
    (project, label): (&str, &str),
    (summary, description): (&str, &str),
    now: i64,
) -> Result<String, Fail> {
    let description = match rest {
        Rest::V3 => adf_of(description),
        Rest::V2 => json!(description),
    };
    let body = json!({ "fields": {
        "project": { "key": project },
        "summary": summary,
        "description": description,
        "labels": [label],
        "issuetype": { "name": "Task" },
    }});
    let made = call(
        http,
        "POST",
        &format!("{}/issue", rest.root(url)),
        Some(body),
        now,
    )?;
    made.get("key")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| Fail::Refused(422, "the answer names no issue".into()))
}

/// `blocker` blocks `blocked`: a `Blocks` link from (outward) the blocker
/// to (inward) the blocked one, which then reads it as `inwardIssue:
/// blocker`.
pub(crate) fn link(
    http: &mut dyn Http,
    (url, rest): (&str, Rest),
    blocker: &str,
    blocked: &str,
    now: i64,
) -> Result<(), Fail> {
    let body = json!({ "type": { "name": "Blocks" },
        "outwardIssue": { "key": blocker }, "inwardIssue": { "key": blocked } });
    call(
        http,
        "POST",
        &format!("{}/issueLink", rest.root(url)),
        Some(body),
        now,
    )
    .map(drop)
}

/// Makes one write.
fn write(http: &mut dyn Http, (url, rest): (&str, Rest), op: &Op, now: i64) -> Result<(), Fail> {
    let at = format!("{}/issue/{}", rest.root(url), op.issue());
    match op {
        Op::Transition { to, issue } => {
            let listed = call(http, "GET", &format!("{at}/transitions"), None, now)?;
            match (pick(&listed, to), to) {
                (Some(id), _) => {
                    let body = json!({ "transition": { "id": id } });
                    call(http, "POST", &format!("{at}/transitions"), Some(body), now).map(drop)
                }
                // No way into "In Progress" from here: nothing to say.
                (None, Target::InProgress) => Ok(()),
                (None, Target::Named(name)) => Err(Fail::Refused(
                    422,
                    format!(
                        "{issue} has no transition named {name:?} from its status; \
                         check backlog.jira.done_transition"
                    ),
                )),
            }
        }
        Op::Remark { body, .. } => {
            let body = match rest {
                Rest::V3 => json!({ "body": adf_of(body) }),
                Rest::V2 => json!({ "body": body }),
            };
            call(http, "POST", &format!("{at}/comment"), Some(body), now).map(drop)
        }
        Op::Label { label, .. } | Op::Unlabel { label, .. } => {
            let verb = if matches!(op, Op::Label { .. }) {
                "add"
            } else {
                "remove"
            };
            let body = json!({ "update": { "labels": [{ verb: label }] } });
            call(http, "PUT", &at, Some(body), now).map(drop)
        }
    }
}

/// Makes the queued writes in order; returns how many left the queue,
/// the ones dropped (refused for good: the issue or transition is gone)
/// and why it stopped early. Refused credentials or a rate limit stop:
/// they pass.
pub(crate) fn flush(
    http: &mut dyn Http,
    site: (&str, Rest),
    pending: &[Op],
    now: i64,
    mut made: impl FnMut(&Op),
) -> (usize, Vec<String>, Option<Fail>) {
    let mut dropped = Vec::new();
    for (done, op) in pending.iter().enumerate() {
        match write(http, site, op, now) {
            Ok(()) => made(op),
            Err(Fail::Refused(code @ (400 | 404 | 422), msg)) => {
                dropped.push(format!("{} (HTTP {code}: {msg})", op.describe()));
            }
            Err(e) => return (done, dropped, Some(e)),
        }
    }
    (pending.len(), dropped, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_ands_the_users_jql() {
        assert_eq!(
            jql("SHOP", "ralph", ""),
            r#"project = "SHOP" AND labels = "ralph""#
        );
        assert_eq!(
            jql("SHOP", "a\"b", " sprint in openSprints() "),
            r#"project = "SHOP" AND labels = "a\"b" AND (sprint in openSprints())"#
        );
    }

    #[test]
    fn blocks_links_and_subtasks_are_read_as_order() {
        let v = json!({"key": "SHOP-2", "fields": {
            "summary": "S", "labels": ["ralph"],
            "status": {"statusCategory": {"key": "new"}},
            "description": {"type": "doc", "content": [
                {"type": "paragraph", "content": [{"type": "text", "text": "Make it."},
                    {"type": "hardBreak"}, {"type": "text", "text": "Now."}]},
                {"type": "paragraph", "content": [{"type": "text", "text": "Two"}]},
                {"type": "codeBlock", "attrs": {"language": "ralph"},
                    "content": [{"type": "text", "text": "agent: codex"}]}]},
            "subtasks": [{"key": "SHOP-5"}],
            "issuelinks": [
                {"type": {"name": "Blocks"}, "inwardIssue": {"key": "SHOP-1"}},
                {"type": {"name": "Blocks"}, "outwardIssue": {"key": "SHOP-3"}},
                {"type": {"name": "Relates"}, "inwardIssue": {"key": "SHOP-9"}}]}});
        let i = issue_from(&v).unwrap();
        assert_eq!(i.blocked_by, ["SHOP-1"]);
        assert_eq!(i.blocks, ["SHOP-3"]);
        assert_eq!(i.subtasks, ["SHOP-5"]);
        assert_eq!(
            i.description,
            "Make it.\nNow.\nTwo\n```ralph\nagent: codex\n```"
        );
        assert_eq!(i.category, "new");
    }

    #[test]
    fn transitions_are_picked_by_category_or_by_name() {
        let t = json!({"transitions": [
            {"id": "11", "name": "To Do", "to": {"statusCategory": {"key": "new"}}},
            {"id": "21", "name": "Start", "to": {"statusCategory": {"key": "indeterminate"}}},
            {"id": "22", "name": "Review", "to": {"statusCategory": {"key": "indeterminate"}}},
            {"id": "31", "name": "Done", "to": {"statusCategory": {"key": "done"}}}]});
        assert_eq!(pick(&t, &Target::InProgress).as_deref(), Some("21"));
        assert_eq!(
            pick(&t, &Target::Named("done".into())).as_deref(),
            Some("31")
        );
        assert_eq!(pick(&t, &Target::Named("Ship".into())), None);
    }

    #[test]
    fn jira_error_messages_are_named() {
        let resp = Resp {
            status: 400,
            body: r#"{"errorMessages": ["The value 'X' does not exist for the field 'project'."], "errors": {}}"#.into(),
            ..Resp::default()
        };
        assert!(
            matches!(answer(&resp, 0), Err(Fail::Refused(400, m)) if m.contains("does not exist"))
        );
        // Jira Cloud's rate limit: a 429 with Retry-After is waited out.
        let limited = Resp {
            status: 429,
            retry_after: Some(30),
            ..Resp::default()
        };
        assert_eq!(answer(&limited, 100), Err(Fail::Limited { until: 130 }));
    }
}
