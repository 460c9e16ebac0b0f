//! One attempt across the boundary: what the run asks for
//! (`AttemptRequest`, as the transition decides it), what a running
//! attempt says before its end (`AttemptEvent`) and what it comes back
//! with (`AttemptReport`). Plain data; the report is also what a cluster
//! node's worker sends back (`exec::worker`), as JSON.

use std::time::Duration;

use crate::agent::event::Usage;
use crate::agent::Verdict;
use crate::gitops::Oid;
use crate::state::{AttemptKind, Note};

/// What a running attempt tells the run before its report: for the
/// display and for dispatch (the run takes each as its own event).
#[derive(Debug)]
pub(crate) enum AttemptEvent {
    /// A line of what its agent is doing, for the display (a racing
    /// candidate's on its own row).
    Activity {
        idx: usize,
        candidate: Option<u32>,
        text: String,
    },
    /// Where it runs, as soon as its executor knows: a cluster node and
    /// worker slot (`<node>/<slot>`, `executor.kind: ray`); a local
    /// attempt sends none.
    Placed {
        idx: usize,
        attempt: u32,
        candidate: Option<u32>,
        node: String,
    },
    /// Its agent is editing a file (from its tool calls): a prediction of
    /// what it changes.
    Editing { idx: usize, path: String },
}

/// One attempt to start, as the transition decides it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AttemptRequest {
    pub(crate) idx: usize,
    pub(crate) slot: usize,
    pub(crate) attempt: u32,
    /// Attempts started by this run, this one included (`RALPH_ITERATION`).
    pub(crate) iteration: u64,
    /// A first try, a fix-up (of `note.fixup`) or a redo.
    pub(crate) kind: AttemptKind,
    /// What went wrong before, for the prompt.
    pub(crate) note: Option<Note>,
    /// The agent session a fix-up continues (`retry.resume_session`).
    pub(crate) resume: Option<String>,
    /// Where that session is: the cluster node (and worker slot) that ran
    /// its attempt (`AttemptReport::node`); `None` on this machine.
    pub(crate) resume_on: Option<String>,
    /// The agent it runs with.
    pub(crate) agent: crate::agent::Backend,
    /// The model it runs on (`ladder::choose`); `None` leaves it to the CLI.
    pub(crate) model: Option<String>,
    /// The model a timeout's postmortem runs on: the ladder's top rung.
    pub(crate) postmortem_model: Option<String>,
    /// Best of N (issue 36): which racing candidate this is (1-based); its
    /// branch, refs, log and token are its own (`project::candidate_key`).
    pub(crate) candidate: Option<u32>,
}

/// What one attempt came back with. Its JSON is what a worker prints
/// (`exec::worker::WorkerReport`): the coordinator and its workers are the
/// same ralph (its own binary is shipped to the nodes, or one of the same
/// version is required: `WorkerSpec::version`), so the format needs no
/// compatibility across versions — only names neither side may guess at.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct AttemptReport {
    pub(crate) idx: usize,
    pub(crate) slot: usize,
    pub(crate) attempt: u32,
    pub(crate) verdict: Verdict,
    pub(crate) usage: Usage,
    pub(crate) cost_usd: f64,
    /// Its CLI reported no cost and no price of its model is known:
    /// `cost_usd` is only what was known (issue 25: "unknown", never $0).
    pub(crate) cost_unknown: bool,
    /// The model it ran on, when ralph chose one (`AttemptRequest::model`).
    pub(crate) model: Option<String>,
    #[serde(rename = "duration_ms", with = "wire::millis")]
    pub(crate) duration: Duration,
    pub(crate) learnings: Vec<String>,
    pub(crate) saved_ref: Option<String>,
    /// The attempt's log, relative to the project root.
    pub(crate) log_rel: String,
    /// The attempt's `RALPH_ITERATION`: finished work's post hooks run
    /// after its landing, with this number.
    pub(crate) iteration: u64,
    /// The backend that ran (none when the attempt ended before its agent).
    #[serde(with = "wire::backend")]
    pub(crate) agent: wire::BackendName,
    /// The agent warned its usage limit is near (with the window's reset).
    #[serde(with = "wire::limit")]
    pub(crate) limit_warning: Option<Option<u64>>,
    /// The agent said DONE and left work uncommitted: ralph committed it
    /// on the story branch (how many files, the commit).
    pub(crate) committed_for_agent: Option<(usize, Oid)>,
    /// What it ran as: a fix-up whose work could not be set up again runs
    /// as a redo.
    pub(crate) kind: AttemptKind,
    /// The agent's session, when its CLI reported one.
    pub(crate) session_id: Option<String>,
    /// It continued an earlier session (`AttemptRequest::resume`).
    pub(crate) resumed: bool,
    /// Refs keeping what the agent left besides its commits (uncommitted
    /// changes, a HEAD it moved elsewhere).
    pub(crate) kept: Vec<String>,
    /// A decomposition run: the sub-stories it wrote on the story branch.
    pub(crate) children: Vec<String>,
    /// What the agent said about changes the gates find (its tags for
    /// this story).
    pub(crate) explained: crate::state::Explained,
    /// Where it ran on a cluster (`<node>/<worker slot>`); `None` here.
    pub(crate) node: Option<String>,
    /// The racing candidate it was (`AttemptRequest::candidate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) candidate: Option<u32>,
    /// A finished candidate's diff against where it left the target: lines
    /// added and removed (`attempts.pick: judge` ranks by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) diff_lines: Option<u64>,
}

impl AttemptReport {
    /// A report for an attempt that ended before its agent ran (or whose
    /// task died): nothing used, nothing kept.
    pub(crate) fn empty(req: &AttemptRequest, verdict: Verdict, log_rel: String) -> AttemptReport {
        AttemptReport {
            idx: req.idx,
            slot: req.slot,
            attempt: req.attempt,
            model: req.model.clone(),
            log_rel,
            iteration: req.iteration,
            kind: req.kind,
            candidate: req.candidate,
            ..AttemptReport::nothing(verdict)
        }
    }

    /// A report of `verdict` alone, for no request in particular (a
    /// worker's attempt that never began: the coordinator puts its
    /// request's numbers in).
    pub(crate) fn nothing(verdict: Verdict) -> AttemptReport {
        AttemptReport {
            idx: 0,
            slot: 0,
            attempt: 0,
            verdict,
            usage: Usage::default(),
            cost_usd: 0.0,
            cost_unknown: false,
            model: None,
            duration: Duration::ZERO,
            learnings: Vec::new(),
            saved_ref: None,
            log_rel: String::new(),
            iteration: 0,
            agent: None,
            limit_warning: None,
            committed_for_agent: None,
            kind: AttemptKind::First,
            session_id: None,
            resumed: false,
            kept: Vec::new(),
            children: Vec::new(),
            explained: crate::state::Explained::default(),
            node: None,
            candidate: None,
            diff_lines: None,
        }
    }
}

/// How the report's fields that are no plain data cross the wire.
mod wire {
    /// A backend's name, spelled as an alias: serde's derive takes an
    /// `Option<&str>` field for one it borrows from the input (which
    /// `'static` cannot be); `backend` makes it the known name instead.
    pub(crate) type BackendName = Option<&'static str>;

    /// A `Duration` as whole milliseconds.
    pub(super) mod millis {
        use std::time::Duration;

        use serde::{Deserialize, Deserializer, Serializer};

        pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
            u64::deserialize(d).map(Duration::from_millis)
        }
    }

    /// The backend by its name; one this ralph does not know is an error
    /// naming it.
    pub(super) mod backend {
        use serde::{de::Error, Deserialize, Deserializer, Serialize, Serializer};

        use crate::agent::Backend;

        pub(crate) fn serialize<S: Serializer>(
            agent: &Option<&'static str>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            agent.serialize(s)
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<&'static str>, D::Error> {
            Option::<String>::deserialize(d)?
                .map(|name| {
                    Backend::parse(&name)
                        .map(Backend::name)
                        .ok_or_else(|| D::Error::custom(format!("unknown agent `{name}`")))
                })
                .transpose()
        }
    }

    /// A usage-limit warning, with or without its reset time: `null` for
    /// none, `{"reset": null}` for one without.
    pub(super) mod limit {
        use serde::{Deserialize, Deserializer, Serialize, Serializer};

        #[derive(Serialize, Deserialize)]
        struct Warning {
            reset: Option<u64>,
        }

        pub(crate) fn serialize<S: Serializer>(
            w: &Option<Option<u64>>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            w.map(|reset| Warning { reset }).serialize(s)
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Option<u64>>, D::Error> {
            Ok(Option::<Warning>::deserialize(d)?.map(|w| w.reset))
        }
    }
}
