//! What the trust gates (issue 26) leave in a story's record: the agent's
//! own explanation of a change they would hold, and what was found and
//! decided on a landing.

use serde::{Deserialize, Serialize};

/// An agent's own words for changes the gates would hold against it:
/// `<ralph>TESTS_CHANGED id: reason</ralph>`, `<ralph>DROPS id: reason</ralph>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub(crate) struct Explained {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tests_changed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) drops: Option<String>,
}

impl Explained {
    pub(crate) fn is_empty(&self) -> bool {
        self.tests_changed.is_none() && self.drops.is_none()
    }
}

/// What the gates found on a story's landing and what followed, for
/// `ralph review`, `status` and the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct GateRecord {
    pub(crate) findings: Vec<crate::gates::Finding>,
    /// Why it may stand, in the spec's or the agent's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    pub(crate) decision: GateDecision,
    /// The attempt whose work was checked.
    pub(crate) attempt: u32,
}

/// What the gates' findings led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum GateDecision {
    /// Sent back to its agent as a fix-up naming the findings.
    Fixup,
    /// Held for a person (`ralph review`, `ralph land`, `ralph reject`).
    Review,
    /// Landed with the findings recorded (`gates.tests: warn`).
    Warned,
    /// A person approved it (`ralph land`): its next landing is not held.
    Approved,
}

impl GateDecision {
    pub(crate) fn name(self) -> &'static str {
        match self {
            GateDecision::Fixup => "fixup",
            GateDecision::Review => "review",
            GateDecision::Warned => "warned",
            GateDecision::Approved => "approved",
        }
    }
}
