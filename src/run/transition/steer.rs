//! What a person's steering command does to the run (`ralph pause`,
//! `resume`, `drain`, `stop ID`, `hold ID`, `release ID`, `note ID TEXT`,
//! `jobs N`, and `land ID` in review mode): each changes the model, is
//! saved when it must survive a crash (pause, holds, notes), recorded,
//! said on the display, and answered (`Action::Reply`).

use crate::report::Message;
use crate::runlog::Ev;
use crate::schedule::StoryState;
use crate::state::Status;
use crate::steer::{Command, Reply};

use super::landing::send_to_landing;
use crate::run::events::Action;
use crate::run::model::{Change, Model};

/// The most jobs `ralph jobs N` gives a run (as `-j`).
const MAX_JOBS: usize = 256;

pub(super) fn on_steer(model: &mut Model, req: u64, cmd: Command, out: &mut Vec<Action>) {
    let (reply, save) = decide(model, &cmd, out);
    if reply.ok {
        if save {
            out.push(Action::Save);
        }
        out.push(Action::Record(Ev::Steer {
            cmd: cmd.name().to_string(),
            story: cmd.story().map(str::to_string),
            message: reply.message.clone(),
        }));
        out.push(Action::Say(Message::Steered {
            text: reply.message.clone(),
        }));
        out.push(Action::Log(format!(
            "steer {}: {}",
            cmd.name(),
            reply.message
        )));
    }
    out.push(Action::Reply { req, reply });
}

/// The reply, and whether the state changed (a save is due).
fn decide(model: &mut Model, cmd: &Command, out: &mut Vec<Action>) -> (Reply, bool) {
    if model.stopping() || model.fatal.is_some() {
        return (
            Reply::refused(
                "the run is stopping; it takes no more commands",
                "wait for it to end; `ralph hold`, `release` and `note` work without a run",
            ),
            false,
        );
    }
    match cmd {
        Command::Pause if model.state.paused => (Reply::done("already paused"), false),
        Command::Pause => {
            model.state.paused = true;
            (
                Reply::done(
                    "paused: no new attempt starts; running ones finish and land \
                     (`ralph resume` goes on)",
                ),
                true,
            )
        }
        Command::Resume if !model.state.paused && !model.draining => {
            (Reply::done("not paused; nothing changed"), false)
        }
        Command::Resume => {
            let was_draining = std::mem::take(&mut model.draining);
            model.state.paused = false;
            let what = if was_draining {
                "resumed: the drain is called off; new attempts start again"
            } else {
                "resumed: new attempts start again"
            };
            (Reply::done(what), true)
        }
        Command::Drain => {
            model.draining = true;
            let running = model.count(StoryState::Running);
            let landing = model.count(StoryState::Landing);
            (
                Reply::done(format!(
                    "draining: no new attempt starts; the run ends once {running} running and \
                     {landing} landing are done"
                )),
                false,
            )
        }
        Command::Jobs { n } if *n == 0 || *n > MAX_JOBS => (
            Reply::refused(
                format!("{n} jobs: a run takes 1 to {MAX_JOBS}"),
                "give a number of jobs from 1 to 256",
            ),
            false,
        ),
        Command::Jobs { n } => {
            let was = model.policy.jobs;
            model.policy.jobs = *n;
            model.grow_slots(*n);
            let running = model.slots.iter().filter(|s| s.is_some()).count();
            let how = if running > *n {
                format!("; the {running} running go on, none starts until fewer than {n} run")
            } else {
                String::new()
            };
            (Reply::done(format!("jobs: {was} → {n}{how}")), false)
        }
        Command::Stop { id }
        | Command::Hold { id }
        | Command::Release { id }
        | Command::Note { id, .. }
        | Command::Land { id }
        | Command::Reject { id, .. } => match model.index_of(id) {
            None => (Reply::unknown_story(id), false),
            Some(idx) => on_story(model, idx, cmd, out),
        },
    }
}

fn on_story(model: &mut Model, idx: usize, cmd: &Command, out: &mut Vec<Action>) -> (Reply, bool) {
    let id = model.id(idx).to_string();
    let node = model.sched().nodes[idx];
    let slot = model.slots.iter().position(|s| *s == Some(idx));
    match cmd {
        Command::Stop { .. } => {
            let Some(slot) = slot else {
                return (
                    Reply::refused(
                        format!("story {id} is not running ({})", node.word()),
                        format!("`ralph hold {id}` keeps it from starting"),
                    ),
                    false,
                );
            };
            if !model.stop_asked.insert(idx) {
                return (Reply::done(format!("{id} is already being stopped")), false);
            }
            model.state.held.insert(id.clone());
            model.holds_here = true;
            out.push(Action::StopAttempt { slot });
            // A race's every candidate (best of N).
            for other in (0..model.slots.len()).filter(|&s| s != slot) {
                if model.slots[other] == Some(idx) {
                    out.push(Action::StopAttempt { slot: other });
                }
            }
            (
                Reply::done(format!(
                    "stopping {id}: its agent is stopped, no retry is charged, and the story \
                     is held (`ralph release {id}` lets it run again)"
                )),
                true,
            )
        }
        Command::Hold { .. } => {
            if node == StoryState::Done {
                return (Reply::story_done(&id, "there is nothing to hold"), false);
            }
            // Asked during this run: the run waits for its release.
            model.holds_here = true;
            if !model.state.held.insert(id.clone()) {
                return (Reply::done(format!("{id} is already held")), false);
            }
            let running = if slot.is_some() {
                format!("; its running attempt goes on (`ralph stop {id}` stops it)")
            } else {
                String::new()
            };
            (
                Reply::done(format!(
                    "held {id}: neither it nor what depends on it starts until `ralph release \
                     {id}`{running}"
                )),
                true,
            )
        }
        Command::Release { .. } => {
            if !model.state.held.remove(&id) {
                return (
                    Reply::done(format!("{id} was not held; nothing changed")),
                    false,
                );
            }
            (
                Reply::done(format!("released {id}: it may start again")),
                true,
            )
        }
        Command::Note { text, .. } => {
            if text.trim().is_empty() {
                return (Reply::empty_note(&id), false);
            }
            if node == StoryState::Done {
                return (Reply::story_done(&id, "no attempt will read a note"), false);
            }
            model.state.add_user_note(&id, text);
            let running = if slot.is_some() {
                " (the attempt running now does not see it)"
            } else {
                ""
            };
            (
                Reply::done(format!(
                    "noted for {id}'s next attempt{running}: {}",
                    text.trim()
                )),
                true,
            )
        }
        Command::Land { .. } => {
            if let Some(refused) = unless_in_review(model, &id, node) {
                return refused;
            }
            model.state.approve(&id);
            let attempt = model
                .state
                .record(&id)
                .map(|r| r.attempts_started)
                .unwrap_or(0);
            send_to_landing(model, idx, attempt, None, out);
            if let Some(l) = model.land_queue.back_mut() {
                l.approved = true;
            }
            (
                Reply::done(format!(
                    "approved {id}: it lands through the merge queue (validated again on the \
                     current tip)"
                )),
                true,
            )
        }
        Command::Reject { note, .. } => {
            if let Some(refused) = unless_in_review(model, &id, node) {
                return refused;
            }
            let why = note.as_deref().unwrap_or("no reason given");
            model.apply(idx, Change::Rejected { why });
            (
                Reply::done(format!(
                    "{id} goes back to the queue; its next attempt is told: {why}"
                )),
                true,
            )
        }
        Command::Pause | Command::Resume | Command::Drain | Command::Jobs { .. } => (
            Reply::refused(
                format!("`{}` is about no story", cmd.name()),
                "this is a bug in ralph: report it",
            ),
            false,
        ),
    }
}

/// `land` and `reject` act only on a story waiting for review: the refusal
/// for any other.
fn unless_in_review(model: &Model, id: &str, node: StoryState) -> Option<(Reply, bool)> {
    (model.state.status(id) != Status::Review || node != StoryState::Review).then(|| {
        (
            Reply::refused(
                format!("story {id} is not waiting for review"),
                "`ralph review` lists the stories that are",
            ),
            false,
        )
    })
}
