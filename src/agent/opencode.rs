//! opencode: how ralph reads `opencode run --format json`'s JSON event stream (see
//! `../shared/notes/agents.md`). Pure: one JSON event in, our events out.

use serde_json::Value;

use super::output::AgentEvent;

/// State kept across the events of one attempt.
#[derive(Debug, Default)]
pub(crate) struct Decoder {}

impl Decoder {
    /// What one JSON event of the stream means; never panics.
    pub(crate) fn event(&mut self, _ev: &Value) -> Vec<AgentEvent> {
        Vec::new()
    }
}
