//! `notify.*`: where a run tells people what happened (issue 37 item 5:
//! chat and JSON webhooks; the notification hooks are `hooks.*`).

use serde_json::Value;

use super::reader::Reader;

/// What a webhook may be told of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WebhookEvent {
    RunEnd,
    StoryLanded,
    StoryFailed,
    Paused,
}

impl WebhookEvent {
    const ALL: [WebhookEvent; 4] = [
        WebhookEvent::RunEnd,
        WebhookEvent::StoryLanded,
        WebhookEvent::StoryFailed,
        WebhookEvent::Paused,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            WebhookEvent::RunEnd => "run_end",
            WebhookEvent::StoryLanded => "story_landed",
            WebhookEvent::StoryFailed => "story_failed",
            WebhookEvent::Paused => "paused",
        }
    }

    fn parse(s: &str) -> Option<WebhookEvent> {
        Self::ALL.into_iter().find(|e| e.name() == s)
    }
}

/// The body a webhook is sent: Slack's `text`, Discord's `content`, or the
/// run record as JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WebhookFormat {
    Slack,
    Discord,
    Json,
}

/// One `notify.webhooks` entry.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Webhook {
    pub(crate) url: String,
    pub(crate) events: Vec<WebhookEvent>,
    pub(crate) format: WebhookFormat,
}

// The URL may hold the webhook's secret: never in a debug print.
impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("url", &shown(&self.url))
            .field("events", &self.events)
            .field("format", &self.format)
            .finish()
    }
}

/// `scheme://host[:port]` of `url`: all of a webhook's URL that is ever
/// written (its path and query often hold its secret). Pure.
pub(crate) fn shown(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("?", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    // Credentials before an `@` are a secret too.
    let host = authority.rsplit('@').next().unwrap_or("");
    format!("{scheme}://{host}")
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Notify {
    pub(crate) webhooks: Vec<Webhook>,
}

pub(super) fn notify(r: &mut Reader) -> Notify {
    const PATH: &str = "notify.webhooks";
    let Some(v) = r.get(PATH).cloned() else {
        return Notify::default();
    };
    let Some(items) = v.as_array() else {
        r.problem(
            PATH,
            format!("{PATH} must be an array of {{\"url\": ..., \"events\": [...], \"format\": ...}} objects"),
        );
        return Notify::default();
    };
    let webhooks = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| webhook(r, &format!("{PATH}[{i}]"), item))
        .collect();
    Notify { webhooks }
}

fn webhook(r: &mut Reader, at: &str, item: &Value) -> Option<Webhook> {
    const PATH: &str = "notify.webhooks";
    let url = match item.get("url") {
        Some(Value::String(u)) if u.starts_with("https://") || u.starts_with("http://") => {
            u.clone()
        }
        // The value is not repeated: it may be a secret.
        _ => {
            r.problem(PATH, format!("{at}.url must be an http:// or https:// URL"));
            return None;
        }
    };
    let names = ["run_end", "story_landed", "story_failed", "paused"];
    let events = match item.get("events") {
        None | Some(Value::Null) => WebhookEvent::ALL.to_vec(),
        Some(Value::Array(list)) => {
            let mut out = Vec::new();
            for e in list {
                match e.as_str().and_then(WebhookEvent::parse) {
                    Some(ev) if !out.contains(&ev) => out.push(ev),
                    Some(_) => {}
                    None => r.problem(
                        PATH,
                        format!("{at}.events: {e} is no event; one of {}", names.join(", ")),
                    ),
                }
            }
            out
        }
        Some(other) => {
            r.problem(
                PATH,
                format!(
                    "{at}.events must be a list among {}, got {other}",
                    names.join(", ")
                ),
            );
            return None;
        }
    };
    let format = match item.get("format").and_then(Value::as_str) {
        None if item.get("format").is_none() => WebhookFormat::Json,
        Some("slack") => WebhookFormat::Slack,
        Some("discord") => WebhookFormat::Discord,
        Some("json") => WebhookFormat::Json,
        _ => {
            r.problem(
                PATH,
                format!("{at}.format must be \"slack\", \"discord\" or \"json\""),
            );
            return None;
        }
    };
    Some(Webhook {
        url,
        events,
        format,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_scheme_and_host_of_a_url_are_shown() {
        assert_eq!(
            shown("https://hooks.slack.com/services/T0/B0/secret"),
            "https://hooks.slack.com"
        );
        assert_eq!(
            shown("http://user:pw@127.0.0.1:9/x?token=s"),
            "http://127.0.0.1:9"
        );
        assert_eq!(shown("https://h.example?k=secret"), "https://h.example");
    }
}
