//! The live web view (issue 24): `ralph run --serve [ADDR]` serves a page
//! of the run while it lasts, `ralph serve [ADDR]` the same page for the
//! project without a run of its own (its state and history, and a run of
//! another process live, read from its records file as it grows).
//!
//! axum on the tokio runtime the run already has. `live.rs` is the hub the
//! run feeds (records, agent lines, statuses), `model.rs` the plain data
//! and the fold of records into it, `http.rs` the routes (page, `/api/`,
//! event streams, controls, the token), `client.rs` a control request to
//! the run's socket, `follow.rs` `ralph serve`'s reading of a run's files,
//! `page.rs` the page (HTML, CSS, script embedded with `include_str!`:
//! nothing is loaded from elsewhere).

mod follow;
mod http;
pub(crate) mod live;
pub(crate) mod model;
mod page;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

pub(crate) use live::Live;

use crate::config::Config;
use crate::error::RalphError;
use crate::redact::Secrets;

/// Where the page is served when nothing says where: this machine only,
/// a free port.
pub(crate) const DEFAULT_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

/// The address to serve on: `ADDR` of `--serve ADDR` / `ralph serve ADDR`
/// (`Some(None)`: the flag without one), else `serve.addr`; `None` when a
/// run is not to serve at all.
pub(crate) fn address(
    flag: Option<Option<&str>>,
    config: &Config,
) -> Result<Option<SocketAddr>, RalphError> {
    match flag {
        Some(Some(text)) => text.trim().parse().map(Some).map_err(|_| {
            RalphError::usage(format!(
                "--serve {text:?} is not an address such as 127.0.0.1:8080"
            ))
            .with_hint(
                "give IP:PORT (port 0: a free one), or --serve alone for 127.0.0.1 and a free port",
            )
        }),
        Some(None) => Ok(Some(config.serve.addr.unwrap_or(DEFAULT_ADDR))),
        None => Ok(config.serve.addr),
    }
}

/// 128 random bits as hex, from the kernel.
fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// What nothing served may show: every secret-looking variable any agent
/// backend could receive, a tracker's token, and what `sandbox.redact` names (whatever the
/// run's sandbox mode: a page can be opened from elsewhere).
pub(crate) fn secrets(config: &Config) -> Arc<Secrets> {
    let host: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let names: Vec<&str> = crate::agent::Backend::ALL
        .iter()
        .flat_map(|b| b.env_names().iter().copied())
        .collect();
    let mut values = crate::sandbox::secret_values(&host, &names, &config.sandbox);
    // A tracker's token or key (`LINEAR_API_KEY`, `GITHUB_TOKEN`) too.
    values.extend(crate::sandbox::tracker_secret_values(&host));
    Arc::new(Secrets::new(values))
}

/// Binds `addr` and serves the page on the current runtime until it
/// ends; returns the URL to print (with the token, which the page's
/// buttons need).
pub(crate) async fn start(live: Arc<Live>, addr: SocketAddr) -> Result<Server, RalphError> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        RalphError::usage(format!("cannot serve the web view on {addr}: {e}")).with_hint(
            "choose another address or port (port 0: a free one), or `serve.addr` in the config",
        )
    })?;
    let local = listener
        .local_addr()
        .map_err(|e| RalphError::usage(format!("cannot serve the web view on {addr}: {e}")))?;
    let token = new_token()
        .map_err(|e| RalphError::usage(format!("cannot make the web view's token: {e}")))?;
    let app = http::App {
        live: live.clone(),
        token: Arc::from(token.as_str()),
    };
    let mut closed = live.closed();
    let server = tokio::spawn(async move {
        // An accept error ends the server, never the run.
        let _ = axum::serve(listener, http::router(app))
            .with_graceful_shutdown(async move {
                let _ = closed.wait_for(|c| *c).await;
            })
            .await;
    });
    Ok(Server {
        url: format!("http://{local}/?token={token}"),
        live,
        done: server,
    })
}

/// A server `start`ed: its URL to print, and the task that ends once
/// `Live::close` was called and every stream has sent its last event.
pub(crate) struct Server {
    pub(crate) url: String,
    live: Arc<Live>,
    done: tokio::task::JoinHandle<()>,
}

/// How long a run's end waits for the pages to get its last events: a
/// client that does not read must not hold the exit.
const FLUSH: std::time::Duration = std::time::Duration::from_secs(2);

impl Server {
    /// Ends the server: the pages get the run's last changes and an `end`.
    pub(crate) async fn close(self, exit_code: Option<i32>) {
        self.live.close(exit_code);
        let _ = tokio::time::timeout(FLUSH, self.done).await;
    }
}

/// `ralph serve [ADDR]`: the page for this project until Ctrl-C.
pub(crate) fn cmd_serve(root: &Path, addr: Option<&str>) -> anyhow::Result<i32> {
    let project = crate::project::load(root).map_err(RalphError::BadInput)?;
    let addr = address(Some(addr), &project.config)?.unwrap_or(DEFAULT_ADDR);
    let live = Live::new(root.to_path_buf(), secrets(&project.config));
    live.set_budget(project.config.budget.run_usd, project.config.budget.tokens);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // The first picture is read before the URL is printed.
    let follower = follow::Follower::new(live.clone(), project);
    rt.block_on(async move {
        let url = start(live.clone(), addr).await?.url;
        crate::display::err(&format!("web view: {url}"));
        crate::display::err("serving until Ctrl-C");
        tokio::select! {
            _ = follower.follow() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok::<i32, anyhow::Error>(crate::error::EXIT_OK)
    })
}
