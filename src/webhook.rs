//! Chat and JSON webhooks (issue 37 item 5, `notify.webhooks`): the run's
//! records mapped to events (`run_end`, `story_landed`, `story_failed`,
//! `paused`) and posted off the run loop, each receiver on a thread of its
//! own, so a dead or silent receiver holds up neither the run nor another
//! receiver. Which record is which event, and the body each format gets,
//! are pure functions; the posting is the edge at the end of this file.
//!
//! A webhook's URL often holds its secret (Slack's and Discord's do): only
//! its scheme and host are ever written anywhere (`shown`).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::config::{shown, Webhook, WebhookEvent, WebhookFormat};
use crate::runlog::{Ev, PauseWhy, Record};

/// The event `ev` is, and its story for a story's event. Pure.
pub(crate) fn event_of(ev: &Ev) -> Option<(WebhookEvent, Option<&str>)> {
    match ev {
        Ev::Landed { story, .. } => Some((WebhookEvent::StoryLanded, Some(story))),
        // For good: a failed attempt that will be retried is no event.
        Ev::FailedForGood { story, .. } => Some((WebhookEvent::StoryFailed, Some(story))),
        // Any pause: a usage limit, the budget, a fault, or a person's.
        Ev::Pause { .. } => Some((WebhookEvent::Paused, None)),
        Ev::Steer { cmd, .. } if cmd == "pause" => Some((WebhookEvent::Paused, None)),
        Ev::RunEnd { .. } => Some((WebhookEvent::RunEnd, None)),
        _ => None,
    }
}

/// One line a person reads in a chat. Pure.
fn sentence(rec: &Record, run_id: &str) -> String {
    match &rec.ev {
        Ev::Landed { story, commit, .. } => {
            let short: String = commit.chars().take(10).collect();
            format!("ralph: story {story} landed ({short})")
        }
        Ev::FailedForGood { story, reason } => match reason {
            Some(r) => format!("ralph: story {story} failed for good: {r}"),
            None => format!("ralph: story {story} failed for good"),
        },
        Ev::Pause { why, agent, .. } => {
            let why = match why {
                PauseWhy::UsageLimit => "a usage limit",
                PauseWhy::Budget => "the budget is spent",
                _ => "a fault",
            };
            match agent {
                Some(a) => format!("ralph: run {run_id} paused: {why} ({a})"),
                None => format!("ralph: run {run_id} paused: {why}"),
            }
        }
        Ev::Steer { .. } => format!("ralph: run {run_id} paused by a person"),
        Ev::RunEnd {
            done,
            total,
            failed,
            blocked,
            exit_code,
            ..
        } => format!(
            "ralph: run {run_id} ended (exit {exit_code}): {done}/{total} done, {} failed, {} blocked",
            failed.len(),
            blocked.len()
        ),
        _ => String::new(),
    }
}

/// The body posted for `rec` in `format`: Slack's `text`, Discord's
/// `content`, or the record itself with `event`, `run_id` and, for a
/// story's event, `story`. Pure.
pub(crate) fn payload(format: WebhookFormat, rec: &Record, run_id: &str) -> Option<Value> {
    let (event, story) = event_of(&rec.ev)?;
    Some(match format {
        WebhookFormat::Slack => json!({ "text": sentence(rec, run_id) }),
        WebhookFormat::Discord => json!({ "content": sentence(rec, run_id) }),
        WebhookFormat::Json => {
            let mut v = serde_json::to_value(rec).unwrap_or_else(|_| json!({}));
            if let Some(o) = v.as_object_mut() {
                o.insert("event".into(), json!(event.name()));
                o.insert("run_id".into(), json!(run_id));
                if let Some(s) = story {
                    o.insert("story".into(), json!(s));
                }
            }
            v
        }
    })
}

/// Waits after a failed post: 1, 2 and 4 s, then it is given up.
pub(crate) const RETRIES: [Duration; 3] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
];
/// One post's time limit.
const POST_LIMIT: Duration = Duration::from_secs(5);

// ---- the edge: one thread per receiver ----

/// The run's webhooks: `see` each record as it is written, `finish` at
/// the run's end (bounded).
pub(crate) struct Webhooks {
    hooks: Vec<Webhook>,
    run_id: String,
    /// Each receiver's queue, and word from its thread that it is done.
    senders: std::sync::Mutex<Vec<(mpsc::Sender<Value>, mpsc::Receiver<()>)>>,
}

impl Webhooks {
    /// A thread per webhook; `log` takes the lines about failed posts.
    pub(crate) fn start(
        hooks: &[Webhook],
        run_id: &str,
        log: impl Fn(String) + Send + Sync + Clone + 'static,
    ) -> Webhooks {
        let mut senders = Vec::new();
        for hook in hooks {
            let (tx, rx) = mpsc::channel::<Value>();
            let (done_tx, done_rx) = mpsc::channel();
            let (url, say) = (hook.url.clone(), log.clone());
            let spawned = std::thread::Builder::new()
                .name("ralph-webhook".into())
                .spawn(move || {
                    let agent = ureq::Agent::new_with_config(
                        ureq::Agent::config_builder()
                            .http_status_as_error(false)
                            .timeout_global(Some(POST_LIMIT))
                            .user_agent(concat!("ralph/", env!("CARGO_PKG_VERSION")))
                            .build(),
                    );
                    for body in rx {
                        if let Err(e) = post_with_retries(&agent, &url, &body) {
                            say(format!("webhook {}: {e}; given up", shown(&url)));
                        }
                    }
                    let _ = done_tx.send(());
                });
            match spawned {
                Ok(_) => senders.push((tx, done_rx)),
                Err(e) => log(format!("webhook {}: no thread: {e}", shown(&hook.url))),
            }
        }
        Webhooks {
            hooks: hooks.to_vec(),
            run_id: run_id.to_string(),
            senders: std::sync::Mutex::new(senders),
        }
    }

    /// Queues the posts `rec` calls for; never waits on a receiver.
    pub(crate) fn see(&self, rec: &Record) {
        let Some((event, _)) = event_of(&rec.ev) else {
            return;
        };
        let senders = self.senders.lock().unwrap_or_else(|e| e.into_inner());
        for (hook, (tx, _)) in self.hooks.iter().zip(senders.iter()) {
            if hook.events.contains(&event) {
                if let Some(body) = payload(hook.format, rec, &self.run_id) {
                    let _ = tx.send(body);
                }
            }
        }
    }

    /// The run ends: the receivers' last posts get until `within` has
    /// passed; one that does not answer is left behind (the process exits
    /// without it). Posts seen after this are dropped.
    pub(crate) fn finish(&self, within: Duration) {
        let deadline = Instant::now() + within;
        let senders = std::mem::take(&mut *self.senders.lock().unwrap_or_else(|e| e.into_inner()));
        let waits: Vec<mpsc::Receiver<()>> = senders
            .into_iter()
            .map(|(tx, done)| {
                drop(tx);
                done
            })
            .collect();
        for done in waits {
            let left = deadline.saturating_duration_since(Instant::now());
            let _ = done.recv_timeout(left);
        }
    }
}

fn post_with_retries(agent: &ureq::Agent, url: &str, body: &Value) -> Result<(), String> {
    let mut last = String::new();
    for wait in std::iter::once(Duration::ZERO).chain(RETRIES) {
        std::thread::sleep(wait);
        match post(agent, url, body) {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn post(agent: &ureq::Agent, url: &str, body: &Value) -> Result<(), String> {
    let req = ureq::http::Request::builder()
        .method("POST")
        .uri(url)
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .map_err(|_| "not a URL ralph can post to".to_string())?;
    // ureq's error names the URL: only its kind is kept.
    let resp = agent.run(req).map_err(|e| error_kind(&e))?;
    let status = resp.status().as_u16();
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(format!("answered {status}"))
    }
}

fn error_kind(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "no answer within 5 s".into(),
        ureq::Error::Io(io) => format!("cannot connect ({})", io.kind()),
        ureq::Error::HostNotFound => "host not found".into(),
        _ => "the request failed".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ev: Ev) -> Record {
        Record { t: 1.5, ev }
    }

    fn landed() -> Record {
        rec(Ev::Landed {
            story: "1.2".into(),
            attempt: 1,
            commit: "0123456789abcdef".into(),
            secs: 0.5,
        })
    }

    #[test]
    fn records_are_events_only_where_the_issue_says() {
        let cases: Vec<(Ev, Option<WebhookEvent>)> = vec![
            (landed().ev, Some(WebhookEvent::StoryLanded)),
            (
                Ev::FailedForGood {
                    story: "1.3".into(),
                    reason: None,
                },
                Some(WebhookEvent::StoryFailed),
            ),
            (
                Ev::Pause {
                    why: PauseWhy::Budget,
                    agent: None,
                    until: None,
                },
                Some(WebhookEvent::Paused),
            ),
            (
                Ev::Steer {
                    cmd: "pause".into(),
                    story: None,
                    message: String::new(),
                },
                Some(WebhookEvent::Paused),
            ),
            (
                Ev::Steer {
                    cmd: "resume".into(),
                    story: None,
                    message: String::new(),
                },
                None,
            ),
            (
                Ev::LandStart {
                    story: "1.1".into(),
                    attempt: 1,
                },
                None,
            ),
        ];
        for (ev, want) in cases {
            assert_eq!(event_of(&ev).map(|(e, _)| e), want, "{ev:?}");
        }
    }

    #[test]
    fn each_format_gets_its_own_body() {
        let r = landed();
        assert_eq!(
            payload(WebhookFormat::Slack, &r, "run-1").unwrap(),
            json!({ "text": "ralph: story 1.2 landed (0123456789)" })
        );
        assert_eq!(
            payload(WebhookFormat::Discord, &r, "run-1").unwrap()["content"],
            json!("ralph: story 1.2 landed (0123456789)")
        );
        let j = payload(WebhookFormat::Json, &r, "run-1").unwrap();
        assert_eq!(j["event"], json!("story_landed"));
        assert_eq!(j["run_id"], json!("run-1"));
        assert_eq!(j["story"], json!("1.2"));
        assert_eq!(j["commit"], json!("0123456789abcdef"));
        let none = rec(Ev::LandStart {
            story: "1.1".into(),
            attempt: 1,
        });
        assert!(payload(WebhookFormat::Json, &none, "run-1").is_none());
    }

    /// A receiver on 127.0.0.1 that answers 502 to its first post and 200
    /// after: the post is made again (after the first wait) and succeeds.
    #[test]
    fn a_502_is_posted_again() {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let mut bodies = Vec::new();
            for (i, conn) in listener.incoming().take(2).enumerate() {
                let mut conn = conn.unwrap();
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut len = 0;
                loop {
                    let mut line = String::new();
                    r.read_line(&mut line).unwrap();
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; len];
                r.read_exact(&mut body).unwrap();
                bodies.push(String::from_utf8(body).unwrap());
                let status = if i == 0 { "502 Bad Gateway" } else { "200 OK" };
                write!(
                    conn,
                    "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
                .unwrap();
            }
            bodies
        });
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(POST_LIMIT))
                .build(),
        );
        let body = json!({"text": "hi"});
        assert_eq!(post_with_retries(&agent, &url, &body), Ok(()));
        let bodies = server.join().unwrap();
        assert_eq!(bodies.len(), 2);
        assert!(bodies.iter().all(|b| b == r#"{"text":"hi"}"#), "{bodies:?}");
    }
}
