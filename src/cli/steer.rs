//! `ralph pause`, `resume`, `drain`, `stop ID`, `hold ID`, `release ID`,
//! `note ID TEXT`, `jobs N`: a request to the running run over its socket
//! (`steer::client`), its reply printed. `hold`, `release` and `note` also
//! work without a run: under the run lock, in the state.

use std::path::Path;

use super::with_locked_state;
use crate::error::{RalphError, EXIT_OK};
use crate::project;
use crate::state::State;
use crate::steer::{client, Command, Reply};

pub(super) fn cmd_steer(root: &Path, cmd: Command) -> anyhow::Result<i32> {
    if let Some(reply) = client::try_send(root, &cmd)? {
        return answered(reply);
    }
    match &cmd {
        Command::Hold { .. } | Command::Release { .. } | Command::Note { .. } => {
            let reply = with_locked_state(root, "before steering without it", |state| {
                let project = project::load(root).map_err(RalphError::BadInput)?;
                let known = project
                    .backlog
                    .stories
                    .iter()
                    .any(|s| Some(s.id.as_str()) == cmd.story());
                Ok(without_run(state, known, &cmd))
            })?;
            answered(reply)
        }
        _ => Err(client::no_run(&cmd).into()),
    }
}

/// A reply printed: what changed on stdout (exit 0), a refusal as an
/// error with its hint (exit 2).
pub(super) fn answered(reply: Reply) -> anyhow::Result<i32> {
    if reply.ok {
        println!("{}", reply.message);
        return Ok(EXIT_OK);
    }
    let mut e = RalphError::usage(reply.message);
    if let Some(h) = reply.hint {
        e = e.with_hint(h);
    }
    Err(e.into())
}

/// `hold`, `release` and `note` with no run: the state changes, and the
/// next run goes by it.
fn without_run(state: &mut State, known: bool, cmd: &Command) -> Reply {
    let id = cmd.story().unwrap_or_default().to_string();
    if !known {
        return Reply::unknown_story(&id);
    }
    let done = state.is_done(&id);
    match cmd {
        Command::Hold { .. } if done => Reply::story_done(&id, "there is nothing to hold"),
        Command::Hold { .. } if !state.held.insert(id.clone()) => {
            Reply::done(format!("{id} is already held"))
        }
        Command::Hold { .. } => Reply::done(format!(
            "held {id}: no run starts it or what depends on it until `ralph release {id}`"
        )),
        Command::Release { .. } if !state.held.remove(&id) => {
            Reply::done(format!("{id} was not held; nothing changed"))
        }
        Command::Release { .. } => Reply::done(format!("released {id}: the next run may start it")),
        Command::Note { text, .. } if text.trim().is_empty() => Reply::empty_note(&id),
        Command::Note { .. } if done => Reply::story_done(&id, "no attempt will read a note"),
        Command::Note { text, .. } => {
            state.add_user_note(&id, text);
            Reply::done(format!("noted for {id}'s next attempt: {}", text.trim()))
        }
        _ => Reply::refused(
            format!("`ralph {}` needs a running run", cmd.name()),
            "start one with `ralph run`",
        ),
    }
}
