//! The edge of the Jira source: REST requests with `ureq` and the
//! credentials: `JIRA_EMAIL` + `JIRA_API_TOKEN` (basic, Jira Cloud) or
//! `JIRA_TOKEN` alone (a bearer personal access token, Data Center); with
//! both set, the pair wins.
//!
//! The credentials are read here and kept in this struct only: never
//! logged, written or put in an error message, and agents and hooks never
//! see them (`sandbox::TRACKER_SECRETS` names all three variables).

use crate::backlog::github::poll::{Http, Req, Resp};
use crate::backlog::tracker::edge::{agent, header};

pub(crate) const EMAIL_VAR: &str = "JIRA_EMAIL";
pub(crate) const API_TOKEN_VAR: &str = "JIRA_API_TOKEN";
pub(crate) const TOKEN_VAR: &str = "JIRA_TOKEN";

/// How requests authenticate.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Auth {
    Basic { email: String, token: String },
    Bearer(String),
}

impl Auth {
    /// The `Authorization` header's value.
    pub(crate) fn header(&self) -> String {
        match self {
            Auth::Basic { email, token } => {
                format!("Basic {}", base64(format!("{email}:{token}").as_bytes()))
            }
            Auth::Bearer(token) => format!("Bearer {token}"),
        }
    }

    /// The variables it came from, for messages.
    pub(crate) fn vars(&self) -> String {
        match self {
            Auth::Basic { .. } => format!("{EMAIL_VAR} and {API_TOKEN_VAR}"),
            Auth::Bearer(_) => TOKEN_VAR.to_string(),
        }
    }
}

/// The credentials from `var` (the environment's): the pair when both are
/// set, else the bearer token. Pure.
pub(crate) fn auth_from(var: impl Fn(&str) -> Option<String>) -> Option<Auth> {
    let get = |k: &str| {
        var(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    match (get(EMAIL_VAR), get(API_TOKEN_VAR), get(TOKEN_VAR)) {
        (Some(email), Some(token), _) => Some(Auth::Basic { email, token }),
        (_, _, Some(token)) => Some(Auth::Bearer(token)),
        _ => None,
    }
}

pub(crate) fn auth() -> Option<Auth> {
    auth_from(|k| std::env::var(k).ok())
}

/// Standard base64 with padding (the basic credentials).
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub(crate) struct Client {
    agent: ureq::Agent,
    auth: Option<Auth>,
}

impl Client {
    pub(crate) fn new(auth: Option<Auth>) -> Client {
        Client {
            agent: agent(),
            auth,
        }
    }
}

/// A refusal in words, as `classify` reads an answer's `message`.
fn said(status: u16, message: &str) -> Resp {
    Resp {
        status,
        body: serde_json::json!({ "message": message }).to_string(),
        ..Resp::default()
    }
}

impl Http for Client {
    fn request(&mut self, req: Req<'_>) -> Result<Resp, String> {
        let Some(auth) = &self.auth else {
            // Asked of no server: a person must set the credentials.
            return Ok(said(
                401,
                &format!(
                    "{EMAIL_VAR} and {API_TOKEN_VAR} (Jira Cloud: an API token of \
                     id.atlassian.com) or {TOKEN_VAR} (Data Center: a personal access token) \
                     are not set: export them"
                ),
            ));
        };
        let mut builder = ureq::http::Request::builder()
            .method(req.method)
            .uri(req.url)
            .header("Accept", "application/json")
            .header("Authorization", auth.header());
        if req.body.is_some() {
            builder = builder.header("Content-Type", "application/json");
        }
        let req = builder
            .body(req.body.unwrap_or_default().to_string())
            .map_err(|e| e.to_string())?;
        // The error's text names the host and the failure, never a header.
        let mut resp = self.agent.run(req).map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let retry_after = header(&resp, "retry-after");
        let body = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| e.to_string())?;
        if status == 401 {
            return Ok(said(
                401,
                &format!(
                    "Jira refused the credentials of {}: check them",
                    auth.vars()
                ),
            ));
        }
        Ok(Resp {
            status,
            body,
            retry_after,
            ..Resp::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pair_wins_over_the_bearer_token() {
        let env = |set: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                set.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let both = auth_from(env(&[
            ("JIRA_EMAIL", "a@b.c"),
            ("JIRA_API_TOKEN", "t0k"),
            ("JIRA_TOKEN", "pat"),
        ]))
        .unwrap();
        assert_eq!(both.header(), "Basic YUBiLmM6dDBr");
        assert_eq!(
            auth_from(env(&[("JIRA_TOKEN", "pat"), ("JIRA_EMAIL", "a@b.c")]))
                .unwrap()
                .header(),
            "Bearer pat"
        );
        assert!(auth_from(env(&[("JIRA_EMAIL", "a@b.c"), ("JIRA_TOKEN", " ")])).is_none());
    }

    #[test]
    fn base64_pads() {
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
