//! The landing intent: what `.ralph/landing.json` holds while a landing
//! may have the main checkout half-updated. Apart from `land` so that
//! start-up recovery (which undoes a cut landing) and the landing itself
//! both read it without importing each other.

use crate::gitops::Oid;
use crate::store;

/// What `.ralph/landing.json` records while the main checkout may be
/// half-updated: enough for the next start to undo it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct LandingIntent {
    pub(crate) story: String,
    /// The target's tip the landing started from.
    pub(crate) base: Oid,
    /// The merge commit being landed.
    pub(crate) commit: Oid,
}

impl LandingIntent {
    /// Writes `.ralph/landing.json`; the error says which file.
    pub(super) fn write(&self, root: &std::path::Path) -> Result<(), String> {
        let text = serde_json::to_string(self).expect("the intent serialises");
        store::write_atomic(&crate::paths::landing_intent_path(root), text.as_bytes())
            .map_err(|e| format!("cannot write {} before landing: {e}", crate::paths::LANDING))
    }

    pub(crate) fn read(root: &std::path::Path) -> Option<LandingIntent> {
        let text = std::fs::read_to_string(crate::paths::landing_intent_path(root)).ok()?;
        serde_json::from_str(&text).ok()
    }
}
