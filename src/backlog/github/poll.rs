//! Reading the tracker and writing back to it over an `Http` (the real
//! client in `client.rs`; a scripted one in tests): conditional requests
//! so an unchanged backlog costs a `304` per page, dependencies asked only
//! of issues that changed, and one rule for what a failure means.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Issue, Links, Op, Page, Snapshot};

/// One HTTP answer, with the headers the source reads.
#[derive(Debug, Clone, Default)]
pub(crate) struct Resp {
    pub(crate) status: u16,
    pub(crate) etag: Option<String>,
    pub(crate) next: Option<String>,
    pub(crate) body: String,
    /// `Retry-After`, in seconds.
    pub(crate) retry_after: Option<i64>,
    /// `x-ratelimit-remaining`.
    pub(crate) remaining: Option<u64>,
    /// `x-ratelimit-reset`, in Unix seconds.
    pub(crate) reset: Option<i64>,
}

/// One request: what every `Http` is asked, in one value so the real client
/// and the scripted one take it the same way.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Req<'a> {
    pub(crate) method: &'a str,
    pub(crate) url: &'a str,
    /// Sent as `If-None-Match`.
    pub(crate) etag: Option<&'a str>,
    /// A JSON body.
    pub(crate) body: Option<&'a str>,
}

pub(crate) trait Http {
    /// One request; `Err` when no answer came (unreachable, timeout).
    fn request(&mut self, req: Req<'_>) -> Result<Resp, String>;
}

/// Why the tracker could not be read or written now. Never a story's
/// failure: reads fall back to the snapshot, writes stay queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fail {
    /// No answer, or a server error: try again later.
    Unreachable(String),
    /// Rate limited: nothing is asked before `until` (Unix seconds).
    Limited { until: i64 },
    /// An answer that will not change by asking again (a wrong repository,
    /// a token without access): a person must act.
    Refused(u16, String),
}

impl Fail {
    pub(crate) fn describe(&self) -> String {
        match self {
            Fail::Unreachable(e) => format!("unreachable ({e})"),
            Fail::Limited { until } => format!("rate limited until {until} (Unix time)"),
            Fail::Refused(code, msg) => format!("refused the request (HTTP {code}: {msg})"),
        }
    }
}

/// What an answer means: fine (2xx, 304), or which failure.
pub(crate) fn classify(resp: &Resp, now: i64) -> Result<(), Fail> {
    match resp.status {
        200..=299 | 304 => Ok(()),
        403 | 429 if resp.retry_after.is_some() || resp.remaining == Some(0) => {
            let until = match (resp.retry_after, resp.reset) {
                (Some(s), _) => now + s.max(1),
                (None, Some(r)) => r.max(now + 1),
                (None, None) => now + 60,
            };
            Err(Fail::Limited { until })
        }
        500..=599 => Err(Fail::Unreachable(format!("HTTP {}", resp.status))),
        code => Err(Fail::Refused(code, message_of(&resp.body))),
    }
}

fn message_of(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| body.chars().take(120).collect())
}

fn get(http: &mut dyn Http, url: &str, etag: Option<&str>, now: i64) -> Result<Resp, Fail> {
    let resp = http
        .request(Req {
            method: "GET",
            url,
            etag,
            body: None,
        })
        .map_err(Fail::Unreachable)?;
    classify(&resp, now)?;
    Ok(resp)
}

/// An issue from the list's JSON (`None` for a pull request, which the
/// issues endpoint lists too).
pub(crate) fn issue_from(v: &Value) -> Option<Issue> {
    if v.get("pull_request").is_some() {
        return None;
    }
    let labels = v
        .get("labels")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|l| {
                    l.get("name")
                        .and_then(Value::as_str)
                        .or(l.as_str())
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    Some(Issue {
        number: v.get("number")?.as_u64()?,
        title: v.get("title")?.as_str()?.to_string(),
        body: v
            .get("body")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        state: v
            .get("state")
            .and_then(Value::as_str)
            .unwrap_or("open")
            .to_string(),
        labels,
        updated_at: v
            .get("updated_at")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        blocked_by_count: v
            .pointer("/issue_dependencies_summary/blocked_by")
            .and_then(Value::as_u64),
        sub_issue_count: v
            .pointer("/sub_issues_summary/total")
            .and_then(Value::as_u64),
        reopened: v.get("state_reason").and_then(Value::as_str) == Some("reopened"),
    })
}

fn numbers(body: &str) -> Vec<u64> {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|i| i.get("number").and_then(Value::as_u64))
        .collect()
}

/// The first page's URL of the labelled issues, open and closed.
pub(crate) fn list_url(api: &str, repo: &str, label: &str) -> String {
    format!(
        "{api}/repos/{repo}/issues?labels={}&state=all&per_page=100",
        encode(label)
    )
}

/// Percent-encoding of a URL component (labels hold `:` and spaces).
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Reads the tracker again from `old`: each page of the list with its
/// ETag (a `304` keeps the page as it was), then the "blocked by" and
/// sub-issue lists of each open issue that changed since they were read
/// (and has any, when the issue says). `Err`: the snapshot stays `old`.
pub(crate) fn poll(
    http: &mut dyn Http,
    api: &str,
    old: &Snapshot,
    now: i64,
) -> Result<Snapshot, Fail> {
    let mut pages = Vec::new();
    let mut url = Some(list_url(api, &old.repo, &old.label));
    let mut i = 0;
    while let Some(u) = url.take() {
        let was = old.pages.get(i).filter(|p| p.url == u);
        let resp = get(http, &u, was.and_then(|p| p.etag.as_deref()), now)?;
        let page = match (resp.status, was) {
            (304, Some(p)) => p.clone(),
            _ => {
                let list: Vec<Value> = serde_json::from_str(&resp.body).map_err(|e| {
                    Fail::Refused(resp.status, format!("the issue list is not JSON: {e}"))
                })?;
                Page {
                    url: u.clone(),
                    etag: resp.etag.clone(),
                    issues: list.iter().filter_map(issue_from).collect(),
                    next: resp.next.clone(),
                }
            }
        };
        url = page.next.clone();
        pages.push(page);
        i += 1;
        if i > 1000 {
            break;
        }
    }
    let mut links = BTreeMap::new();
    let open: Vec<Issue> = pages
        .iter()
        .flat_map(|p| p.issues.iter())
        .filter(|i| i.state == "open")
        .cloned()
        .collect();
    for issue in open {
        if let Some(l) = old.links.get(&issue.number) {
            if l.updated_at == issue.updated_at && !issue.updated_at.is_empty() {
                links.insert(issue.number, l.clone());
                continue;
            }
        }
        let base = format!("{api}/repos/{}/issues/{}", old.repo, issue.number);
        let blocked_by = if issue.blocked_by_count == Some(0) {
            Vec::new()
        } else {
            let r = get(http, &format!("{base}/dependencies/blocked_by"), None, now);
            match r {
                Ok(r) => numbers(&r.body),
                // An API without dependencies (an older GitHub Enterprise):
                // `Depends on #N` lines still say them.
                Err(Fail::Refused(404, _)) => Vec::new(),
                Err(e) => return Err(e),
            }
        };
        let sub_issues = if issue.sub_issue_count == Some(0) {
            Vec::new()
        } else {
            match get(http, &format!("{base}/sub_issues"), None, now) {
                Ok(r) => numbers(&r.body),
                Err(Fail::Refused(404, _)) => Vec::new(),
                Err(e) => return Err(e),
            }
        };
        links.insert(
            issue.number,
            Links {
                updated_at: issue.updated_at.clone(),
                blocked_by,
                sub_issues,
            },
        );
    }
    Ok(Snapshot {
        repo: old.repo.clone(),
        label: old.label.clone(),
        pages,
        links,
        not_before: None,
    })
}

/// Makes the queued writes in order; returns how many were made (they
/// leave the queue) and why it stopped early. A write the tracker refuses
/// for good (a 404 or 422: the issue or label is gone) is dropped and
/// named in the returned list, so one bad write never holds the rest.
/// `left` is called after each write that leaves the queue with how many
/// have: the caller saves the queue then, so a flush cut short by a kill
/// repeats at most the write in flight (a comment made twice otherwise).
pub(crate) fn flush(
    http: &mut dyn Http,
    api: &str,
    repo: &str,
    pending: &[Op],
    now: i64,
    left: &mut dyn FnMut(usize),
) -> (usize, Vec<String>, Option<Fail>) {
    let mut dropped = Vec::new();
    for (done, op) in pending.iter().enumerate() {
        let base = format!("{api}/repos/{repo}/issues/{}", op.issue());
        let (method, url, body) = match op {
            Op::AddLabel { label, .. } => (
                "POST",
                format!("{base}/labels"),
                Some(serde_json::json!({ "labels": [label] }).to_string()),
            ),
            Op::RemoveLabel { label, .. } => {
                ("DELETE", format!("{base}/labels/{}", encode(label)), None)
            }
            Op::Comment { body, .. } => (
                "POST",
                format!("{base}/comments"),
                Some(serde_json::json!({ "body": body }).to_string()),
            ),
            Op::Close { .. } => (
                "PATCH",
                base.clone(),
                Some(
                    serde_json::json!({"state": "closed", "state_reason": "completed"}).to_string(),
                ),
            ),
        };
        let resp = match http.request(Req {
            method,
            url: &url,
            etag: None,
            body: body.as_deref(),
        }) {
            Ok(r) => r,
            Err(e) => return (done, dropped, Some(Fail::Unreachable(e))),
        };
        match classify(&resp, now) {
            Ok(()) => {}
            // Removing a label the issue does not have.
            Err(Fail::Refused(404, _)) if matches!(op, Op::RemoveLabel { .. }) => {}
            Err(Fail::Refused(code @ (404 | 410 | 422), msg)) => {
                dropped.push(format!("{} (HTTP {code}: {msg})", op.describe()));
            }
            Err(e) => return (done, dropped, Some(e)),
        }
        left(done + 1);
    }
    (pending.len(), dropped, None)
}

/// Opens an issue; its number.
pub(crate) fn create_issue(
    http: &mut dyn Http,
    api: &str,
    repo: &str,
    title: &str,
    body: &str,
    labels: &[String],
    now: i64,
) -> Result<u64, Fail> {
    let payload = serde_json::json!({ "title": title, "body": body, "labels": labels }).to_string();
    let resp = http
        .request(Req {
            method: "POST",
            url: &format!("{api}/repos/{repo}/issues"),
            etag: None,
            body: Some(&payload),
        })
        .map_err(Fail::Unreachable)?;
    classify(&resp, now)?;
    serde_json::from_str::<Value>(&resp.body)
        .ok()
        .and_then(|v| v.get("number").and_then(Value::as_u64))
        .ok_or_else(|| Fail::Refused(resp.status, "the answer names no issue number".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(status: u16) -> Resp {
        Resp {
            status,
            ..Resp::default()
        }
    }

    #[test]
    fn what_an_answer_means() {
        assert_eq!(classify(&resp(200), 100), Ok(()));
        assert_eq!(classify(&resp(304), 100), Ok(()));
        let limited = Resp {
            remaining: Some(0),
            reset: Some(500),
            ..resp(403)
        };
        assert_eq!(classify(&limited, 100), Err(Fail::Limited { until: 500 }));
        let retry = Resp {
            retry_after: Some(30),
            ..resp(429)
        };
        assert_eq!(classify(&retry, 100), Err(Fail::Limited { until: 130 }));
        assert!(matches!(
            classify(&resp(502), 100),
            Err(Fail::Unreachable(_))
        ));
        assert!(matches!(
            classify(&resp(403), 100),
            Err(Fail::Refused(403, _))
        ));
    }

    /// How the script answers: method, URL, ETag sent.
    type Answer = Box<dyn FnMut(&str, &str, Option<&str>) -> Result<Resp, String>>;

    /// An `Http` answering from a script, recording what was asked.
    struct Script {
        asked: Vec<(String, String, Option<String>)>,
        answer: Answer,
    }

    impl Http for Script {
        fn request(&mut self, req: Req<'_>) -> Result<Resp, String> {
            let Req {
                method, url, etag, ..
            } = req;
            self.asked
                .push((method.into(), url.into(), etag.map(str::to_string)));
            (self.answer)(method, url, etag)
        }
    }

    fn list(body: &str) -> Resp {
        Resp {
            status: 200,
            etag: Some("\"e1\"".into()),
            body: body.into(),
            ..Resp::default()
        }
    }

    #[test]
    fn a_poll_of_an_unchanged_list_is_one_conditional_request() {
        let issues = r#"[{"number": 1, "title": "A", "state": "open", "state_reason": "reopened",
            "labels": [{"name": "ralph"}],
            "updated_at": "t1", "issue_dependencies_summary": {"blocked_by": 1},
            "sub_issues_summary": {"total": 0}},
            {"number": 2, "title": "PR", "pull_request": {}, "state": "open"}]"#;
        let mut http = Script {
            asked: Vec::new(),
            answer: Box::new(move |_, url, etag| {
                if url.ends_with("blocked_by") {
                    return Ok(list(r#"[{"number": 7}]"#));
                }
                Ok(match etag {
                    Some("\"e1\"") => resp(304),
                    _ => list(issues),
                })
            }),
        };
        let empty = Snapshot {
            repo: "o/r".into(),
            label: "ralph".into(),
            ..Snapshot::default()
        };
        let first = poll(&mut http, "http://api", &empty, 0).unwrap();
        assert_eq!(first.issues().count(), 1, "a pull request is no issue");
        assert_eq!(first.links[&1].blocked_by, [7]);
        assert!(
            first.issues().all(|i| i.reopened),
            "opened again by a person"
        );
        assert_eq!(http.asked.len(), 2, "{:?}", http.asked);
        assert!(http.asked[0].1.contains("labels=ralph&state=all"));
        let again = poll(&mut http, "http://api", &first, 0).unwrap();
        assert_eq!(again, first);
        assert_eq!(http.asked.len(), 3, "one 304, no dependency read");
        assert_eq!(http.asked[2].2.as_deref(), Some("\"e1\""));
    }

    #[test]
    fn a_write_that_fails_stops_the_flush_and_a_refused_one_is_dropped() {
        let mut http = Script {
            asked: Vec::new(),
            answer: Box::new(|method, _, _| {
                Ok(match method {
                    "POST" => resp(422),
                    "DELETE" => resp(404),
                    _ => resp(502),
                })
            }),
        };
        let ops = vec![
            Op::AddLabel {
                issue: 1,
                label: "ralph:running".into(),
            },
            Op::RemoveLabel {
                issue: 1,
                label: "ralph:failed".into(),
            },
            Op::Close { issue: 1 },
            Op::Close { issue: 2 },
        ];
        let mut saved = Vec::new();
        let (done, dropped, fail) = flush(&mut http, "http://api", "o/r", &ops, 0, &mut |n| {
            saved.push(n)
        });
        assert_eq!(
            saved,
            [1, 2],
            "the queue is saved after each write that left it"
        );
        assert_eq!(
            done, 2,
            "the 422 is dropped, the 404 of a removal is fine, the 502 stops"
        );
        assert_eq!(dropped.len(), 1, "{dropped:?}");
        assert!(matches!(fail, Some(Fail::Unreachable(_))));
        assert!(http.asked[1].1.ends_with("/labels/ralph%3Afailed"));
    }
}
