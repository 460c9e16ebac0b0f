//! `ralph reset [ID]`: forget one story's attempts, or all state.

use std::io::{BufRead, IsTerminal};
use std::path::Path;

use super::with_locked_state;
use crate::error::{RalphError, EXIT_OK};
use crate::state::State;

pub(super) fn cmd_reset(root: &Path, id: Option<String>, yes: bool) -> anyhow::Result<i32> {
    let said = with_locked_state(root, "before resetting state", |state| match id {
        Some(id) => {
            if !state.stories.contains_key(&id) && !state.completed_stories.contains(&id) {
                return Err(RalphError::usage(format!("story {id} has no recorded state")).into());
            }
            state.reset_story(&id);
            Ok(format!(
                "Story {id}: attempts and status forgotten; it runs again on the next `ralph run`."
            ))
        }
        None => {
            if !yes {
                if !std::io::stdin().is_terminal() {
                    return Err(RalphError::usage("resetting all state needs confirmation")
                        .with_hint("run `ralph reset --yes`")
                        .into());
                }
                eprint!("Forget every story's status and attempts? [y/N] ");
                let mut answer = String::new();
                std::io::stdin().lock().read_line(&mut answer)?;
                if !answer.trim().eq_ignore_ascii_case("y") {
                    return Ok("Nothing changed.".to_string());
                }
            }
            *state = State::default();
            Ok("State reset.".to_string())
        }
    })?;
    println!("{said}");
    Ok(EXIT_OK)
}
