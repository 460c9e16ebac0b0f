//! The run's side of the live web view (`--serve`): the hub made from the
//! model at the start, and the server started on the run's runtime.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use super::model::Model;
use crate::serve::{self, Live};
use crate::store::TechLog;

/// Serves `live` at `addr` from the run's own runtime (so it lasts as long
/// as the run) and prints its URL; `None` when it cannot be served: agents
/// may already be set up, so that is said, not worth the run.
pub(super) fn serve(
    rt: &tokio::runtime::Runtime,
    live: &Arc<Live>,
    addr: SocketAddr,
    log: &TechLog,
) -> Option<serve::Server> {
    match rt.block_on(serve::start(live.clone(), addr)) {
        Ok(server) => {
            // The log is no place for the token.
            let url = &server.url;
            let bare = url.split('?').next().unwrap_or(url);
            log.line(&format!("web view at {bare}"));
            crate::display::err(&format!("web view: {url}"));
            Some(server)
        }
        Err(e) => {
            crate::display::err(&format!("warning: {e}"));
            None
        }
    }
}

/// The web view's hub for this run: the stories and their graph, the
/// budget, controls on (the run has its control socket).
pub(super) fn hub(
    root: &Path,
    config: &crate::config::Config,
    model: &Model,
    dag: &crate::dag::Dag,
) -> Arc<Live> {
    let live = Live::new(root.to_path_buf(), crate::serve::secrets(config));
    let (stories, edges) = graph(model, dag);
    live.set_graph(stories, edges);
    live.set_budget(model.policy.budget.run_usd, model.policy.budget.run_tokens);
    live.set_controls(true);
    live
}

/// Each story with its status now, and the DAG's edges (b waits for a).
pub(super) fn graph(
    model: &Model,
    dag: &crate::dag::Dag,
) -> (Vec<crate::serve::model::StoryView>, Vec<(usize, usize)>) {
    let stories = model
        .stories
        .iter()
        .enumerate()
        .map(|(i, s)| crate::serve::model::StoryView {
            id: s.id.clone(),
            title: s.title.clone(),
            status: model.sched().nodes[i].word(),
        })
        .collect();
    let edges = dag.edges();
    (stories, edges)
}
