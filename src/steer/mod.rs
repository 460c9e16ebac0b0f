//! Steering a running run from outside it (issue 24): the wire protocol
//! spoken over the run's unix socket (`paths::STEER_SOCKET`), and the
//! client the CLI commands (and the web view) use.
//!
//! One JSON object per line each way: a request such as
//! `{"cmd":"pause"}` or `{"cmd":"note","id":"1.2","text":"..."}`, and one
//! reply line `{"ok":true,"message":"..."}` or
//! `{"ok":false,"message":"...","hint":"..."}`. The run decides what a
//! command does (`run/transition/steer.rs`); this module only carries it.
//!
//! Not to be confused with `control::Control`, what the run asks of one of
//! its own children (run, stop, kill).

use serde::{Deserialize, Serialize};

pub(crate) mod client;
pub(crate) mod server;

/// A request to the running run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub(crate) enum Command {
    /// No new attempt starts; running ones finish and land.
    Pause,
    /// Undoes `Pause` (not a drain).
    Resume,
    /// Pause, then end the run once nothing runs or lands.
    Drain,
    /// Kill the story's running attempt; it costs no retry and is held.
    Stop { id: String },
    /// Keep the story (and so its dependents) from starting.
    Hold { id: String },
    /// Let a held story be scheduled again.
    Release { id: String },
    /// A note for the story's next attempt (or fix-up).
    Note { id: String, text: String },
    /// The run's `-j` from now on.
    Jobs { n: usize },
    /// Approve a story waiting for review: the run lands it.
    Land { id: String },
    /// Send a story in review back for another attempt, told `note`.
    Reject {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
}

impl Command {
    /// The command's name, as the wire and the run records spell it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Command::Pause => "pause",
            Command::Resume => "resume",
            Command::Drain => "drain",
            Command::Stop { .. } => "stop",
            Command::Hold { .. } => "hold",
            Command::Release { .. } => "release",
            Command::Note { .. } => "note",
            Command::Jobs { .. } => "jobs",
            Command::Land { .. } => "land",
            Command::Reject { .. } => "reject",
        }
    }

    /// The story it is about, if any.
    pub(crate) fn story(&self) -> Option<&str> {
        match self {
            Command::Stop { id }
            | Command::Hold { id }
            | Command::Release { id }
            | Command::Note { id, .. }
            | Command::Land { id }
            | Command::Reject { id, .. } => Some(id),
            _ => None,
        }
    }

    /// One request line (without its newline).
    pub(crate) fn to_line(&self) -> String {
        serde_json::to_string(self).expect("a command serializes")
    }

    /// A request line as read off the socket; a line that is not one is an
    /// error reply, in words.
    pub(crate) fn parse(line: &str) -> Result<Command, Reply> {
        serde_json::from_str(line.trim()).map_err(|e| {
            Reply::refused(
                format!("not a steering request: {e}"),
                "send one JSON object per line, such as {\"cmd\":\"pause\"} \
                 (docs/steering.md lists them)",
            )
        })
    }
}

/// The run's answer to one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Reply {
    pub(crate) ok: bool,
    /// What changed, or why nothing did.
    pub(crate) message: String,
    /// What to do instead, when refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) hint: Option<String>,
}

impl Reply {
    pub(crate) fn done(message: impl Into<String>) -> Reply {
        Reply {
            ok: true,
            message: message.into(),
            hint: None,
        }
    }

    pub(crate) fn refused(message: impl Into<String>, hint: impl Into<String>) -> Reply {
        Reply {
            ok: false,
            message: message.into(),
            hint: Some(hint.into()),
        }
    }

    // The refusals a story command gets alike from a run (`run/transition/steer.rs`)
    // and without one (`cli/steer.rs`): one wording, whichever answers.

    /// No story `id` in the backlog.
    pub(crate) fn unknown_story(id: &str) -> Reply {
        Reply::refused(
            format!("no story {id} in the backlog"),
            "`ralph stories` lists the stories and their IDs",
        )
    }

    /// Story `id` is done, so the command has nothing to act on (`why`).
    pub(crate) fn story_done(id: &str, why: &str) -> Reply {
        Reply::refused(
            format!("story {id} is done; {why}"),
            format!("`ralph reset {id}` runs it again"),
        )
    }

    /// `ralph note ID` with no text.
    pub(crate) fn empty_note(id: &str) -> Reply {
        Reply::refused(
            format!("an empty note for {id}"),
            format!("`ralph note {id} \"TEXT\"`: say what its next attempt should know"),
        )
    }

    /// One reply line (without its newline).
    pub(crate) fn to_line(&self) -> String {
        serde_json::to_string(self).expect("a reply serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire format is a contract with the web view and with scripts:
    /// these lines are what docs/steering.md shows.
    #[test]
    fn requests_and_replies_read_and_write_as_documented() {
        let cases = [
            (r#"{"cmd":"pause"}"#, Command::Pause),
            (r#"{"cmd":"resume"}"#, Command::Resume),
            (r#"{"cmd":"drain"}"#, Command::Drain),
            (
                r#"{"cmd":"stop","id":"1.2"}"#,
                Command::Stop { id: "1.2".into() },
            ),
            (
                r#"{"cmd":"hold","id":"1.2"}"#,
                Command::Hold { id: "1.2".into() },
            ),
            (
                r#"{"cmd":"release","id":"1.2"}"#,
                Command::Release { id: "1.2".into() },
            ),
            (
                r#"{"cmd":"note","id":"1.2","text":"use the v2 API"}"#,
                Command::Note {
                    id: "1.2".into(),
                    text: "use the v2 API".into(),
                },
            ),
            (r#"{"cmd":"jobs","n":2}"#, Command::Jobs { n: 2 }),
            (
                r#"{"cmd":"land","id":"1.2"}"#,
                Command::Land { id: "1.2".into() },
            ),
            (
                r#"{"cmd":"reject","id":"1.2","note":"use the helper"}"#,
                Command::Reject {
                    id: "1.2".into(),
                    note: Some("use the helper".into()),
                },
            ),
        ];
        for (line, cmd) in cases {
            assert_eq!(Command::parse(line).unwrap(), cmd, "{line}");
            assert_eq!(cmd.to_line(), line);
        }
        assert_eq!(
            Reply::done("paused: no new attempt starts").to_line(),
            r#"{"ok":true,"message":"paused: no new attempt starts"}"#
        );
        assert_eq!(
            Reply::refused("no story 9", "`ralph stories` lists them").to_line(),
            r#"{"ok":false,"message":"no story 9","hint":"`ralph stories` lists them"}"#
        );
    }

    #[test]
    fn a_line_that_is_no_request_is_refused_in_words() {
        for bad in ["", "pause", r#"{"cmd":"explode"}"#, r#"{"cmd":"jobs"}"#] {
            let r = Command::parse(bad).unwrap_err();
            assert!(!r.ok);
            assert!(r.message.starts_with("not a steering request"), "{r:?}");
            assert!(r.hint.is_some());
        }
    }
}
