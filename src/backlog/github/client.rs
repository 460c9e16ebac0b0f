//! The edge of the GitHub source: HTTP(S) requests with `ureq` (rustls,
//! blocking: every caller is off the runtime or before it) and the token.
//!
//! The token is read here and kept in this struct only: never logged,
//! written or put in an error message, and agents never see it (the
//! sandbox's allowlist leaves `GITHUB_TOKEN` out and redacts its value).

use std::time::Duration;

use super::poll::{Http, Req, Resp};

pub(crate) struct Client {
    agent: ureq::Agent,
    token: Option<String>,
}

/// The token: `GITHUB_TOKEN`, else what `gh auth token` prints.
pub(crate) fn token() -> Option<String> {
    if let Some(t) = std::env::var("GITHUB_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
    {
        return Some(t.trim().to_string());
    }
    let out = crate::process::run_captured(
        "gh",
        &["auth".to_string(), "token".to_string()],
        b"",
        Duration::from_secs(10),
    )
    .ok()?;
    let t = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.code == Some(0) && !t.is_empty()).then_some(t)
}

impl Client {
    pub(crate) fn new(token: Option<String>) -> Client {
        Client {
            agent: crate::backlog::tracker::edge::agent(),
            token,
        }
    }
}

fn header(resp: &ureq::http::Response<ureq::Body>, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The `rel="next"` URL of a `Link` header.
pub(crate) fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (url, rest) = part.split_once(';')?;
        rest.contains("rel=\"next\"").then(|| {
            url.trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_string()
        })
    })
}

impl Http for Client {
    fn request(&mut self, req: Req<'_>) -> Result<Resp, String> {
        let Req {
            method,
            url,
            etag,
            body,
        } = req;
        let mut req = ureq::http::Request::builder()
            .method(method)
            .uri(url)
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28");
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        if let Some(e) = etag {
            req = req.header("If-None-Match", e);
        }
        let result = match body {
            Some(b) => {
                let req = req
                    .header("Content-Type", "application/json")
                    .body(b.to_string())
                    .map_err(|e| e.to_string())?;
                self.agent.run(req)
            }
            None => {
                let req = req.body(()).map_err(|e| e.to_string())?;
                self.agent.run(req)
            }
        };
        // The error's text names the host and the failure, never a header.
        let mut resp = result.map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let etag = header(&resp, "etag");
        let next = header(&resp, "link").and_then(|l| next_link(&l));
        let retry_after = header(&resp, "retry-after").and_then(|v| v.trim().parse().ok());
        let remaining = header(&resp, "x-ratelimit-remaining").and_then(|v| v.trim().parse().ok());
        let reset = header(&resp, "x-ratelimit-reset").and_then(|v| v.trim().parse().ok());
        let body = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| e.to_string())?;
        Ok(Resp {
            status,
            etag,
            next,
            body,
            retry_after,
            remaining,
            reset,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_page_comes_from_the_link_header() {
        let link = "<https://api.github.com/repositories/1/issues?page=2>; rel=\"next\", \
                    <https://api.github.com/repositories/1/issues?page=5>; rel=\"last\"";
        assert_eq!(
            next_link(link).as_deref(),
            Some("https://api.github.com/repositories/1/issues?page=2")
        );
        assert_eq!(next_link("<https://x/?page=1>; rel=\"prev\""), None);
    }
}
