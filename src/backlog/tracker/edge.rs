//! What the HTTPS edges of the trackers share: the `ureq`
//! agent with its time limits, a numeric header, and the `Http` of a
//! tracker opened offline (which asks nothing).

use std::time::Duration;

use crate::backlog::github::poll::{Http, Req, Resp};

/// An agent that hands back every status (the callers classify them) and
/// gives up on a tracker that does not answer.
pub(crate) fn agent() -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(5)))
        .timeout_global(Some(Duration::from_secs(20)))
        .user_agent(concat!("ralph/", env!("CARGO_PKG_VERSION")))
        .build();
    ureq::Agent::new_with_config(config)
}

/// A header's value as a whole number.
pub(crate) fn header(resp: &ureq::http::Response<ureq::Body>, name: &str) -> Option<i64> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// The client of a tracker opened offline: asks nothing.
pub(crate) struct Offline;

impl Http for Offline {
    fn request(&mut self, _req: Req<'_>) -> Result<Resp, String> {
        Err("not asked: this command reads the snapshot only".into())
    }
}
