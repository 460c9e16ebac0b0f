//! Reading Linear and writing back to it over an `Http` (the real client
//! in `client.rs`; a scripted one in tests): every request a GraphQL POST
//! to the one endpoint, named by its operation (`RalphIssues`, ...).
//!
//! One query reads the team (states, labels) and a page of its labelled
//! issues with their relations and sub-issues: a backlog of up to 100
//! issues is one request a poll.

use serde_json::{json, Value};

use super::{Issue, Op, Snapshot, State, Team};
use crate::backlog::github::poll::{classify, Fail, Http, Req, Resp};

const ISSUES: &str = "query RalphIssues($team: String!, $label: String!, $after: String) {
  teams(filter: {key: {eq: $team}}) { nodes { id key
    states { nodes { id type position } }
    labels(first: 250) { nodes { id name } } } }
  issues(first: 100, after: $after, filter: {team: {key: {eq: $team}}, labels: {some: {name: {eq: $label}}}}) {
    nodes { id identifier title description
      state { type }
      labels { nodes { name } }
      children { nodes { identifier } }
      relations { nodes { type relatedIssue { identifier } } }
      inverseRelations { nodes { type issue { identifier } } } }
    pageInfo { hasNextPage endCursor } } }";

const MOVE: &str = "mutation RalphMove($id: String!, $state: String!) {
  issueUpdate(id: $id, input: {stateId: $state}) { success } }";
const COMMENT: &str = "mutation RalphComment($id: String!, $body: String!) {
  commentCreate(input: {issueId: $id, body: $body}) { success } }";
const ADD_LABEL: &str = "mutation RalphAddLabel($id: String!, $label: String!) {
  issueAddLabel(id: $id, labelId: $label) { success } }";
const REMOVE_LABEL: &str = "mutation RalphRemoveLabel($id: String!, $label: String!) {
  issueRemoveLabel(id: $id, labelId: $label) { success } }";
const CREATE_LABEL: &str = "mutation RalphCreateLabel($team: String!, $name: String!) {
  issueLabelCreate(input: {teamId: $team, name: $name}) { success issueLabel { id } } }";

const CREATE_ISSUE: &str = "mutation RalphCreateIssue($team: String!, $title: String!, $description: String!, $labels: [String!]!) {
  issueCreate(input: {teamId: $team, title: $title, description: $description, labelIds: $labels}) {
    success issue { id identifier } } }";
const BLOCKS: &str = "mutation RalphBlocks($blocker: String!, $blocked: String!) {
  issueRelationCreate(input: {issueId: $blocker, relatedIssueId: $blocked, type: blocks}) { success } }";

/// What a GraphQL answer means: its `data`, or which failure. Linear says
/// a rate limit and a refused key in `errors` (`RATELIMITED`,
/// `AUTHENTICATION_ERROR`), with HTTP 400 or even 200.
pub(crate) fn answer(resp: &Resp, now: i64) -> Result<Value, Fail> {
    let body: Option<Value> = serde_json::from_str(&resp.body).ok();
    let errors = body
        .as_ref()
        .and_then(|b| b.get("errors"))
        .and_then(Value::as_array)
        .filter(|e| !e.is_empty());
    if let Some(errors) = errors {
        let code = |e: &Value| {
            e.pointer("/extensions/code")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_ascii_uppercase()
        };
        let message = errors
            .iter()
            .filter_map(|e| e.get("message").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("; ");
        if errors.iter().any(|e| code(e) == "RATELIMITED") {
            let until = resp.reset.filter(|r| *r > now).unwrap_or(now + 60);
            return Err(Fail::Limited { until });
        }
        if errors
            .iter()
            .any(|e| matches!(code(e).as_str(), "AUTHENTICATION_ERROR" | "FORBIDDEN"))
        {
            return Err(Fail::Refused(
                401,
                format!("LINEAR_API_KEY was refused: {message}"),
            ));
        }
        classify(resp, now)?;
        return Err(Fail::Refused(422, message));
    }
    classify(resp, now)?;
    body.and_then(|b| b.get("data").cloned())
        .filter(|d| !d.is_null())
        .ok_or_else(|| Fail::Refused(resp.status, "the answer holds no data".into()))
}

/// One GraphQL request: its `data`.
pub(crate) fn call(
    http: &mut dyn Http,
    api: &str,
    name: &str,
    query: &str,
    variables: Value,
    now: i64,
) -> Result<Value, Fail> {
    let body = json!({ "operationName": name, "query": query, "variables": variables });
    let resp = http
        .request(Req {
            method: "POST",
            url: api,
            etag: None,
            body: Some(&body.to_string()),
        })
        .map_err(Fail::Unreachable)?;
    answer(&resp, now)
}

fn names(v: &Value, list: &str, field: &str) -> Vec<String> {
    v.pointer(list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|n| n.pointer(field).and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// The `blocks` relations' other sides (`related` ones say no order).
fn blocking(v: &Value, list: &str, other: &str) -> Vec<String> {
    v.pointer(list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| r.get("type").and_then(Value::as_str) == Some("blocks"))
        .filter_map(|r| r.pointer(other).and_then(Value::as_str).map(str::to_string))
        .collect()
}

pub(crate) fn issue_from(v: &Value) -> Option<Issue> {
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    Some(Issue {
        id: text("id")?,
        identifier: text("identifier")?,
        title: text("title").unwrap_or_default(),
        description: text("description").unwrap_or_default(),
        state: v
            .pointer("/state/type")
            .and_then(Value::as_str)
            .unwrap_or("unstarted")
            .to_string(),
        labels: names(v, "/labels/nodes", "/name"),
        blocks: blocking(v, "/relations/nodes", "/relatedIssue/identifier"),
        blocked_by: blocking(v, "/inverseRelations/nodes", "/issue/identifier"),
        children: names(v, "/children/nodes", "/identifier"),
    })
}

fn team_from(v: &Value) -> Option<Team> {
    let states = v
        .pointer("/states/nodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| {
            Some(State {
                id: s.get("id")?.as_str()?.to_string(),
                kind: s.get("type")?.as_str()?.to_string(),
                position: s.get("position").and_then(Value::as_f64).unwrap_or(0.0),
            })
        })
        .collect();
    let labels = v
        .pointer("/labels/nodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|l| {
            Some((
                l.get("name")?.as_str()?.to_string(),
                l.get("id")?.as_str()?.to_string(),
            ))
        })
        .collect();
    Some(Team {
        id: v.get("id")?.as_str()?.to_string(),
        states,
        labels,
    })
}

/// Reads the team and its labelled issues, page by page. `Err`: the
/// snapshot stays `old`.
pub(crate) fn poll(
    http: &mut dyn Http,
    api: &str,
    old: &Snapshot,
    now: i64,
) -> Result<Snapshot, Fail> {
    let mut issues = Vec::new();
    let mut team = None;
    let mut after: Option<String> = None;
    for _ in 0..1000 {
        let vars = json!({ "team": old.team, "label": old.label, "after": after });
        let data = call(http, api, "RalphIssues", ISSUES, vars, now)?;
        if team.is_none() {
            team = data.pointer("/teams/nodes/0").and_then(team_from);
            if team.is_none() {
                return Err(Fail::Refused(
                    404,
                    format!(
                        "no team has the key {:?}: check backlog.linear.team",
                        old.team
                    ),
                ));
            }
        }
        issues.extend(
            data.pointer("/issues/nodes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(issue_from),
        );
        let more = data.pointer("/issues/pageInfo/hasNextPage") == Some(&Value::Bool(true));
        after = data
            .pointer("/issues/pageInfo/endCursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        if !more || after.is_none() {
            break;
        }
    }
    Ok(Snapshot {
        team: old.team.clone(),
        label: old.label.clone(),
        issues,
        team_info: team,
        not_before: None,
    })
}

/// The ID of the team's label `name`, made in the team when it has none.
pub(crate) fn label_id(
    http: &mut dyn Http,
    api: &str,
    team: &mut Team,
    name: &str,
    now: i64,
) -> Result<String, Fail> {
    if let Some(l) = team.label_id(name) {
        return Ok(l.to_string());
    }
    let vars = json!({ "team": team.id, "name": name });
    let data = call(http, api, "RalphCreateLabel", CREATE_LABEL, vars, now)?;
    let made = data
        .pointer("/issueLabelCreate/issueLabel/id")
        .and_then(Value::as_str)
        .ok_or_else(|| Fail::Refused(422, format!("label {name} was not created")))?
        .to_string();
    team.labels.push((name.to_string(), made.clone()));
    Ok(made)
}

/// Opens an issue in the team with the label `label` (its ID); its ID and
/// identifier.
pub(crate) fn create_issue(
    http: &mut dyn Http,
    api: &str,
    team: &Team,
    new: (&str, &str),
    label: &str,
    now: i64,
) -> Result<(String, String), Fail> {
    let (title, description) = new;
    let vars = json!({ "team": team.id, "title": title, "description": description,
        "labels": [label] });
    let data = call(http, api, "RalphCreateIssue", CREATE_ISSUE, vars, now)?;
    let field = |k: &str| {
        data.pointer(&format!("/issueCreate/issue/{k}"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    field("id")
        .zip(field("identifier"))
        .ok_or_else(|| Fail::Refused(422, "the answer names no issue".into()))
}

/// `blocker` blocks `blocked` (Linear's IDs).
pub(crate) fn relate(
    http: &mut dyn Http,
    api: &str,
    blocker: &str,
    blocked: &str,
    now: i64,
) -> Result<(), Fail> {
    let vars = json!({ "blocker": blocker, "blocked": blocked });
    call(http, api, "RalphBlocks", BLOCKS, vars, now).map(drop)
}

/// Makes one write. `team` gains a label ralph creates.
fn write(http: &mut dyn Http, api: &str, team: &mut Team, op: &Op, now: i64) -> Result<(), Fail> {
    let gone = |what: String| Fail::Refused(422, what);
    match op {
        Op::MoveTo { id, state, .. } => {
            let to = team
                .first_state(state)
                .ok_or_else(|| gone(format!("the team has no state of type {state}")))?;
            let vars = json!({ "id": id, "state": to.id });
            call(http, api, "RalphMove", MOVE, vars, now).map(drop)
        }
        Op::Remark { id, body, .. } => {
            let vars = json!({ "id": id, "body": body });
            call(http, api, "RalphComment", COMMENT, vars, now).map(drop)
        }
        Op::Label { id, label, .. } => {
            let label_id = label_id(http, api, team, label, now)?;
            let vars = json!({ "id": id, "label": label_id });
            call(http, api, "RalphAddLabel", ADD_LABEL, vars, now).map(drop)
        }
        Op::Unlabel { id, label, .. } => match team.label_id(label) {
            // No such label in the team: no issue has it.
            None => Ok(()),
            Some(l) => {
                let vars = json!({ "id": id, "label": l });
                call(http, api, "RalphRemoveLabel", REMOVE_LABEL, vars, now).map(drop)
            }
        },
    }
}

/// Makes the queued writes in order; returns how many left the queue,
/// the ones dropped (refused for good: the issue or state is gone) and why
/// it stopped early. A refused key or a rate limit stops: they pass.
pub(crate) fn flush(
    http: &mut dyn Http,
    api: &str,
    team: &mut Team,
    pending: &[Op],
    now: i64,
    mut made: impl FnMut(&Op),
) -> (usize, Vec<String>, Option<Fail>) {
    let mut dropped = Vec::new();
    for (done, op) in pending.iter().enumerate() {
        match write(http, api, team, op, now) {
            Ok(()) => made(op),
            Err(Fail::Refused(code @ (404 | 422), msg)) => {
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

    fn resp(status: u16, body: &str) -> Resp {
        Resp {
            status,
            body: body.into(),
            ..Resp::default()
        }
    }

    #[test]
    fn what_a_graphql_answer_means() {
        assert_eq!(
            answer(&resp(200, r#"{"data": {"x": 1}}"#), 0),
            Ok(json!({"x": 1}))
        );
        let limited =
            r#"{"errors": [{"message": "slow down", "extensions": {"code": "RATELIMITED"}}]}"#;
        assert_eq!(
            answer(&resp(400, limited), 100),
            Err(Fail::Limited { until: 160 })
        );
        let auth = r#"{"errors": [{"message": "bad key", "extensions": {"code": "AUTHENTICATION_ERROR"}}]}"#;
        assert!(
            matches!(answer(&resp(400, auth), 0), Err(Fail::Refused(401, m)) if m.contains("LINEAR_API_KEY"))
        );
        assert!(matches!(
            answer(&resp(502, "Bad Gateway"), 0),
            Err(Fail::Unreachable(_))
        ));
        let gone = r#"{"errors": [{"message": "Entity not found"}], "data": null}"#;
        assert!(matches!(
            answer(&resp(200, gone), 0),
            Err(Fail::Refused(422, _))
        ));
    }

    #[test]
    fn only_blocks_relations_are_read_as_order() {
        let v = json!({"id": "u1", "identifier": "ENG-2", "title": "T",
            "state": {"type": "backlog"},
            "labels": {"nodes": [{"name": "ralph"}]},
            "children": {"nodes": [{"identifier": "ENG-5"}]},
            "relations": {"nodes": [{"type": "blocks", "relatedIssue": {"identifier": "ENG-3"}},
                                    {"type": "related", "relatedIssue": {"identifier": "ENG-4"}}]},
            "inverseRelations": {"nodes": [{"type": "blocks", "issue": {"identifier": "ENG-1"}},
                                           {"type": "duplicate", "issue": {"identifier": "ENG-9"}}]}});
        let i = issue_from(&v).unwrap();
        assert_eq!(i.blocks, ["ENG-3"]);
        assert_eq!(i.blocked_by, ["ENG-1"]);
        assert_eq!(i.children, ["ENG-5"]);
        assert_eq!(i.state, "backlog");
    }
}
