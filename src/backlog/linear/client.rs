//! The edge of the Linear source: GraphQL POSTs with `ureq` and the API
//! key, sent bare in `Authorization` (Linear's personal keys take no
//! `Bearer`).
//!
//! The key is read here and kept in this struct only: never logged,
//! written or put in an error message, and agents and hooks never see it
//! (`sandbox::TRACKER_SECRETS` names `LINEAR_API_KEY`).

use crate::backlog::github::poll::{Http, Req, Resp};
use crate::backlog::tracker::edge::{agent, header};

pub(crate) const KEY_VAR: &str = "LINEAR_API_KEY";

pub(crate) struct Client {
    agent: ureq::Agent,
    key: Option<String>,
}

/// The key: `LINEAR_API_KEY`, when set and not blank.
pub(crate) fn key() -> Option<String> {
    std::env::var(KEY_VAR)
        .ok()
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
}

impl Client {
    pub(crate) fn new(key: Option<String>) -> Client {
        Client {
            agent: agent(),
            key,
        }
    }
}

impl Http for Client {
    fn request(&mut self, req: Req<'_>) -> Result<Resp, String> {
        let Some(key) = &self.key else {
            // Asked of no server: a person must set the key.
            return Ok(Resp {
                status: 401,
                body: format!(
                    "{{\"message\": \"{KEY_VAR} is not set: export a Linear API key \
                     (Settings, Security & access, Personal API keys)\"}}"
                ),
                ..Resp::default()
            });
        };
        let req = ureq::http::Request::builder()
            .method(req.method)
            .uri(req.url)
            .header("Content-Type", "application/json")
            .header("Authorization", key.as_str())
            .body(req.body.unwrap_or_default().to_string())
            .map_err(|e| e.to_string())?;
        // The error's text names the host and the failure, never a header.
        let mut resp = self.agent.run(req).map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let retry_after = header(&resp, "retry-after");
        let remaining = header(&resp, "x-ratelimit-requests-remaining").map(|r| r.max(0) as u64);
        // Linear says the reset in milliseconds.
        let reset = header(&resp, "x-ratelimit-requests-reset").map(|ms| ms / 1000);
        let body = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| e.to_string())?;
        Ok(Resp {
            status,
            body,
            retry_after,
            remaining,
            reset,
            ..Resp::default()
        })
    }
}
