//! A running story's racing candidates as `state.json` keeps them (best of
//! N, issue 36), for `status --json`: written by the run, cleared when
//! the race is over.

use serde::{Deserialize, Serialize};

/// One candidate: `{k, agent, model, state}`, and `node` once it runs on
/// a cluster node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CandidateRow {
    pub(crate) k: u32,
    pub(crate) agent: String,
    pub(crate) model: Option<String>,
    /// `waiting`, `running`, `done`, `validating`, `failed`, `stopped`, `won`.
    pub(crate) state: String,
    /// The cluster node and worker slot it runs (or ran) on, once known;
    /// local candidates have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) node: Option<String>,
}

impl CandidateRow {
    /// `agent:model`, or the agent alone, as `attempts.candidates` names it.
    pub(crate) fn who(&self) -> String {
        match &self.model {
            Some(m) => format!("{}:{m}", self.agent),
            None => self.agent.clone(),
        }
    }
}
