//! Best of N (issue 36): an attempt raced by several candidates, each in
//! its own slot. Started here (`start_race`, `start_waiting`), ended here
//! (`candidate_finished`), and judged by the merge queue: a candidate that
//! said DONE goes to it as the story's work (`Action::AdoptCandidate`),
//! one at a time in the order they finished; the first to land wins
//! (`landing_ended`), the others are stopped, not charged, their work kept
//! (`Action::KeepCandidate`). No candidate landing is one failed attempt,
//! its note naming every candidate's failure (`race_lost`).
//!
//! Why the merge queue judges: "passes" is the merged tree's required
//! validation and the integrity gate, which is exactly what a landing
//! runs; a second check before the queue would validate the same tree
//! twice. The price: a later candidate waits for an earlier one's landing.

use crate::agent::{ResultKind, Verdict};
use crate::config::Pick;
use crate::report::Message;
use crate::runlog::Ev;
use crate::state::{AttemptKind, Fixup, FixupCause, Note};

use super::finish::budget_ahead_for;
use super::landing::send_to_landing;
use crate::run::events::{
    Action, AttemptReport, AttemptRequest, JudgeAsk, JudgeReport, LandResult, Now, ReviewVerdict,
};
use crate::run::model::race::{candidate_agent, who};
use crate::run::model::{CandState, Change, Landing, Model, Race};
use crate::run::record;

/// Story `idx`'s next attempt races: a first try or a redo with `best_of`
/// above 1 (a fix-up continues one candidate's work, so it runs alone).
pub(super) fn races(model: &Model, idx: usize) -> bool {
    model.best_of(idx) > 1
        && matches!(
            model.state.next_kind(model.id(idx)),
            AttemptKind::First | AttemptKind::Redo
        )
}

/// Who story `idx`'s candidates run as, candidate 1 first; `own` is the
/// story's own agent and model.
pub(super) fn runners(
    model: &Model,
    idx: usize,
    own: (crate::agent::Backend, Option<String>),
) -> Vec<(crate::agent::Backend, Option<String>)> {
    let list = &model.policy.best_of.candidates;
    (1..=model.best_of(idx))
        .map(|k| candidate_agent(k, list, own.clone()))
        .collect()
}

/// Starts story `idx`'s attempt as a race of `best_of` candidates, then as
/// many of them as there are `free` slots for (at least one: the caller
/// found a slot); the rest start as slots free (`start_waiting`).
/// `own` is the story's own agent and model.
pub(super) fn start_race(
    model: &mut Model,
    idx: usize,
    own: (crate::agent::Backend, Option<String>),
    free: usize,
    now: Now,
    out: &mut Vec<Action>,
) -> usize {
    let (kind, note) = model.begin_attempt(idx);
    let id = model.id(idx).to_string();
    let attempt = model.apply(idx, Change::Start).attempt;
    let n = model.best_of(idx);
    let who_runs = runners(model, idx, own.clone());
    let title = model.stories[idx].title.clone();
    let counted = model.state.record(&id).map(|r| r.attempts).unwrap_or(0) + 1;
    out.push(Action::Say(Message::Started {
        id: id.clone(),
        title: title.clone(),
        attempt: counted,
        max: model.policy.max_retries,
        fixup: false,
        model: own.1.clone(),
        logged: (attempt != counted).then_some(attempt),
    }));
    // Its row says it races; each candidate's model is in its records.
    out.push(Action::StoryStarted {
        id: id.clone(),
        title,
        model: Some(format!("best of {n}")),
    });
    out.push(Action::Log(format!(
        "start story {id} attempt {attempt} ({}) as a race of {n} candidates",
        kind.as_str()
    )));
    // The attempt's own record says who the story runs as; each candidate
    // has its `candidate_start`.
    let head = AttemptRequest {
        idx,
        slot: model.slots.iter().position(Option::is_none).unwrap_or(0),
        attempt,
        iteration: model.attempts_this_run,
        kind,
        note: note.clone(),
        resume: None,
        resume_on: None,
        agent: own.0,
        model: own.1.clone(),
        postmortem_model: None,
        candidate: None,
    };
    out.push(Action::Record(record::attempt_start(model, &head)));
    model
        .racing
        .insert(idx, Race::new(attempt, kind, note, who_runs));
    let started = fill(model, idx, free.max(1), now, out);
    out.push(Action::Save);
    started
}

/// Starts waiting candidates of running races while there are `free`
/// slots; returns how many started.
pub(super) fn start_waiting(
    model: &mut Model,
    free: usize,
    now: Now,
    out: &mut Vec<Action>,
) -> usize {
    let mut racing: Vec<usize> = model.racing.keys().copied().collect();
    racing.sort_unstable();
    let mut started = 0;
    for idx in racing {
        if started >= free {
            break;
        }
        started += fill(model, idx, free - started, now, out);
    }
    if started > 0 {
        out.push(Action::Save);
    }
    started
}

/// Starts up to `free` of race `idx`'s waiting candidates.
fn fill(model: &mut Model, idx: usize, free: usize, now: Now, out: &mut Vec<Action>) -> usize {
    let mut started = 0;
    while started < free {
        let Some(k) = model.racing.get(&idx).and_then(Race::next_waiting) else {
            break;
        };
        let Some(slot) = model.slots.iter().position(Option::is_none) else {
            break;
        };
        // The budget looks ahead for each candidate as for an attempt: it
        // is overshot by one candidate's expected cost at most. The race's
        // own waiting candidates were reserved when it started.
        if budget_ahead_for(model, &[], Some(idx)).is_some()
            && model.slots.iter().any(Option::is_some)
        {
            break;
        }
        start_candidate(model, idx, k, slot, now, out);
        started += 1;
    }
    sync_rows(model, idx, out);
    started
}

fn start_candidate(
    model: &mut Model,
    idx: usize,
    k: u32,
    slot: usize,
    now: Now,
    out: &mut Vec<Action>,
) {
    let id = model.id(idx).to_string();
    let iteration = model.attempts_this_run;
    let Some(race) = model.racing.get_mut(&idx) else {
        return;
    };
    let (attempt, (kind, note)) = (race.attempt, candidate_task(race, k));
    let of = race.cands.len() as u32;
    let Some(c) = race.get_mut(k) else { return };
    c.state = CandState::Running;
    c.slot = Some(slot);
    c.iteration = iteration;
    let (agent, chosen) = (c.agent, c.model.clone());
    model.slots[slot] = Some(idx);
    model.slot_started[slot] = Some(now.mono);
    model.slot_model[slot] = chosen.clone();
    let fixing = note
        .as_ref()
        .and_then(|n| n.fixup.as_ref())
        .map(|f| format!(", fixing up {}", f.work))
        .unwrap_or_default();
    out.push(Action::Log(format!(
        "start story {id} attempt {attempt} candidate {k} ({}) in slot {slot}{fixing}",
        who(agent, chosen.as_deref())
    )));
    out.push(Action::Say(Message::CandidateStarted {
        id: id.clone(),
        k,
        of,
        who: who(agent, chosen.as_deref()),
    }));
    out.push(Action::Record(Ev::CandidateStart {
        story: id,
        attempt,
        candidate: k,
        slot,
        agent: agent.name().to_string(),
        model: chosen.clone(),
    }));
    out.push(Action::StartAttempt(AttemptRequest {
        idx,
        slot,
        attempt,
        iteration,
        kind,
        note,
        resume: None,
        resume_on: None,
        agent,
        postmortem_model: model.policy.postmortem_model(agent),
        model: chosen,
        candidate: Some(k),
    }));
}

/// What candidate `k` of `race` runs as, and is told. After a lost race
/// whose work came closest somewhere (`Note::closest`), candidate 1 is a
/// fix-up of that work (its failure's output in the fix-up prompt, the
/// race's note after it); every other candidate starts over, told the
/// race's note.
fn candidate_task(race: &Race, k: u32) -> (AttemptKind, Option<Note>) {
    let Some(note) = race.note.clone() else {
        return (race.kind, None);
    };
    let closest = note.closest.clone();
    let fresh = Note {
        closest: None,
        ..note
    };
    match closest {
        Some(work) if k == 1 => (
            AttemptKind::Fixup,
            Some(Note {
                fixup: Some(*work),
                redo: false,
                ..fresh
            }),
        ),
        _ => (race.kind, Some(fresh)),
    }
}

/// A candidate's report: its slot freed, its spend the story's, its state
/// from its verdict; then the race goes on (`advance`).
pub(super) fn candidate_finished(
    model: &mut Model,
    r: AttemptReport,
    now: Now,
    out: &mut Vec<Action>,
) {
    let (idx, id) = (r.idx, model.id(r.idx).to_string());
    let Some(k) = r.candidate else { return };
    model.slots[r.slot] = None;
    model.slot_started[r.slot] = None;
    model.slot_model[r.slot] = None;
    if let Some(rec) = model.state.stories.get_mut(&id) {
        rec.running_on = None;
    }
    super::outcome::spent(model, &r, &id, now, out);
    let Some(race) = model.racing.get_mut(&idx) else {
        return;
    };
    race.usage += r.usage;
    race.secs = race.secs.max(r.duration.as_secs_f64());
    let finished = race.ended_count() + 1;
    let Some(c) = race.get_mut(k) else { return };
    c.ended = true;
    c.slot = None;
    c.finished = finished;
    c.log_rel = Some(r.log_rel.clone());
    c.cost_usd = r.cost_usd;
    c.cost_unknown = r.cost_unknown;
    c.diff_lines = r.diff_lines;
    c.fixup = r.kind == AttemptKind::Fixup;
    // A candidate stopped because another won stays stopped, whatever its
    // agent said as it went.
    if c.state == CandState::Running {
        (c.state, c.why) = match &r.verdict {
            Verdict::Done | Verdict::Tentative => (CandState::Done, None),
            Verdict::Failed { reason, .. } => (CandState::Failed, Some(reason.clone())),
            Verdict::RootRefusal => (CandState::Failed, Some("its CLI refused to run".into())),
            Verdict::Interrupted | Verdict::RateLimited { .. } | Verdict::Fault { .. } => {
                (CandState::Stopped, None)
            }
        };
    }
    // A candidate stopped before its CLI reported a cost spent an unknown
    // amount, never a made-up $0.
    let unreported = r.cost_usd == 0.0 && crate::report::tokens(&r.usage) == 0;
    if let Some(c) = race
        .get_mut(k)
        .filter(|c| c.state == CandState::Stopped && unreported)
    {
        c.cost_unknown = true;
        model.run_cost_unknown = true;
    }
    let running = race.cands.iter().any(|c| c.state == CandState::Running);
    out.push(Action::Log(format!(
        "story {id} attempt {} candidate {k} ended: {}",
        race.attempt,
        race.get(k).map_or("?", |c| c.state.word())
    )));
    if !running {
        out.push(Action::StoryFinished { id: id.clone() });
    }
    advance(model, idx, now, out);
    out.push(Action::Save);
}

/// The race after a change: the next DONE candidate to the merge queue,
/// the race lost once none can pass, every decided candidate settled, and
/// the race forgotten once decided and every report is in.
fn advance(model: &mut Model, idx: usize, now: Now, out: &mut Vec<Action>) {
    let id = model.id(idx).to_string();
    let Some(race) = model.racing.get_mut(&idx) else {
        return;
    };
    let judge = model.policy.best_of.pick == Pick::Judge;
    if let Some(k) = race.next_for_queue() {
        let attempt = race.attempt;
        let Some(c) = race.get_mut(k) else { return };
        c.state = CandState::Validating;
        let label = who(c.agent, c.model.as_deref());
        out.push(Action::Log(format!(
            "story {id} attempt {attempt}: candidate {k} ({label}) said DONE; its work goes \
             to the merge queue{}",
            if judge { " to be judged" } else { "" }
        )));
        out.push(Action::AdoptCandidate { id: id.clone(), k });
        if !judge {
            out.push(Action::Say(Message::Finished {
                id: id.clone(),
                secs: race.secs,
            }));
        }
        // A candidate's post hooks are the attempt's: they ran with its end.
        send_to_landing(model, idx, attempt, None, out);
        if let Some(l) = model.land_queue.back_mut().filter(|_| judge) {
            l.trial = true;
        }
    } else if let Some(k) = race.ranked_first().filter(|_| judge) {
        match model.policy.best_of.judge.clone() {
            Some(j) if !race.judging => {
                race.judging = true;
                let passing = race
                    .cands
                    .iter()
                    .filter(|c| c.state == CandState::Passed)
                    .map(|c| (c.k, who(c.agent, c.model.as_deref()), c.findings))
                    .collect();
                out.push(Action::Log(format!(
                    "story {id} attempt {}: the judge ({}) picks among candidates {:?}",
                    race.attempt,
                    who(j.agent, j.model.as_deref()),
                    race.passing()
                )));
                out.push(Action::Judge(JudgeAsk {
                    idx,
                    attempt: race.attempt,
                    agent: j.agent,
                    model: j.model,
                    passing,
                }));
            }
            // Its judge is still out.
            Some(_) => {}
            None => {
                let reason = race.ranking_reason(k);
                picked(model, idx, (k, "ranking"), reason, out);
            }
        }
    }
    settle(model, idx, out);
    let Some(race) = model.racing.get(&idx) else {
        return;
    };
    if race.lost() {
        race_lost(model, idx, now, out);
    } else if race.won().is_some() && race.all_ended() {
        race_won(model, idx, out);
    }
    sync_rows(model, idx, out);
}

/// Best of N's judge answered: its cost is the story's, and its valid
/// pick lands; a failed judge or one without a valid PICK leaves the pick
/// to the ranking.
pub(super) fn judged(model: &mut Model, rep: JudgeReport, out: &mut Vec<Action>) {
    let (idx, id) = (rep.idx, model.id(rep.idx).to_string());
    model.state.add_usage(&id, rep.usage, rep.cost_usd, 0.0);
    model.run_cost_usd += rep.cost_usd;
    model.run_cost_unknown |= rep.cost_unknown;
    model.run_tokens += crate::report::tokens(&rep.usage);
    let Some(race) = model.racing.get_mut(&idx) else {
        return;
    };
    if race.attempt != rep.attempt || !race.judging {
        return;
    }
    race.judging = false;
    race.usage += rep.usage;
    race.judge_cost = (
        race.judge_cost.0 + rep.cost_usd,
        race.judge_cost.1 || rep.cost_unknown,
    );
    let pick = crate::judge::valid_pick(rep.pick, &race.passing());
    let (k, by, reason) = match (pick, race.ranked_first()) {
        (Some(k), _) => (k, "judge", rep.reason),
        (None, Some(k)) => {
            let said = rep.reason.lines().next().unwrap_or("").to_string();
            let why = match rep.pick {
                Some(p) => format!("the judge picked {p}, no passing candidate"),
                None => format!("the judge gave no PICK ({said})"),
            };
            (k, "ranking", format!("{why}; {}", race.ranking_reason(k)))
        }
        (None, None) => return,
    };
    picked(model, idx, (k, by), reason, out);
    sync_rows(model, idx, out);
    out.push(Action::Save);
}

/// `attempts.pick: judge` chose candidate `k` (`by` the judge or the
/// ranking, for `reason`): said and recorded, and its work goes to the
/// merge queue to land.
fn picked(
    model: &mut Model,
    idx: usize,
    (k, by): (u32, &str),
    reason: String,
    out: &mut Vec<Action>,
) {
    let id = model.id(idx).to_string();
    let Some(race) = model.racing.get_mut(&idx) else {
        return;
    };
    let (attempt, secs) = (race.attempt, race.secs);
    if let Some(c) = race.get_mut(k) {
        c.state = CandState::Validating;
    }
    out.push(Action::Log(format!(
        "story {id} attempt {attempt}: candidate {k} picked by the {by}: {}",
        reason.lines().next().unwrap_or("")
    )));
    out.push(Action::Record(Ev::CandidatePick {
        story: id.clone(),
        attempt,
        candidate: k,
        by: by.into(),
        reason,
    }));
    out.push(Action::AdoptCandidate { id: id.clone(), k });
    out.push(Action::Say(Message::Finished { id, secs }));
    send_to_landing(model, idx, attempt, None, out);
}

/// Records each candidate whose fate is decided and keeps the work of
/// those that did not win.
fn settle(model: &mut Model, idx: usize, out: &mut Vec<Action>) {
    let id = model.id(idx).to_string();
    let Some(race) = model.racing.get_mut(&idx) else {
        return;
    };
    let decided = race.won().is_some();
    let (attempt, of) = (race.attempt, race.cands.len() as u32);
    for c in race.cands.iter_mut().filter(|c| c.ended && !c.settled) {
        let done = matches!(
            c.state,
            CandState::Failed | CandState::Stopped | CandState::Won
        );
        let unneeded = matches!(c.state, CandState::Done | CandState::Passed);
        if !(done || (decided && unneeded)) {
            continue;
        }
        c.settled = true;
        let winner = c.state == CandState::Won;
        out.push(Action::Say(Message::CandidateEnded {
            id: id.clone(),
            k: c.k,
            of,
            who: who(c.agent, c.model.as_deref()),
            outcome: c.state.word().to_string(),
        }));
        out.push(Action::Record(Ev::CandidateEnd {
            story: id.clone(),
            attempt,
            candidate: c.k,
            agent: c.agent.name().to_string(),
            model: c.model.clone(),
            outcome: c.state.word().to_string(),
            winner,
            cost_usd: c.cost_usd,
            cost_unknown: c.cost_unknown,
        }));
        if !winner {
            out.push(Action::KeepCandidate {
                id: id.clone(),
                attempt,
                k: c.k,
            });
        }
    }
}

/// A landing of a racing story ended. Landed (or kept for review or a
/// pull request): its candidate won, the others are stopped. Its work
/// failed validation, the gates or the merge: that candidate failed and
/// the race goes on, the story running again — true then, and the
/// landing's own arms are skipped (no fix-up inside a race). Any other end
/// (a lost turn, Ctrl-C) is the landing's as for any story.
pub(super) fn landing_ended(
    model: &mut Model,
    landing: Landing,
    result: &LandResult,
    now: Now,
    out: &mut Vec<Action>,
) -> bool {
    let idx = landing.idx;
    let Some(race) = model.racing.get_mut(&idx) else {
        return false;
    };
    let Some(k) = race.validating() else {
        return false;
    };
    let why = match result {
        // Judged, not landed: it waits for the pick.
        LandResult::InReview if landing.trial => {
            if let Some(c) = race.get_mut(k) {
                c.state = CandState::Passed;
            }
            model.apply(idx, Change::RaceOn);
            advance(model, idx, now, out);
            out.push(Action::Save);
            return true;
        }
        // `gates.tests: warn`: the findings are recorded and the work
        // goes on as the gate decides; the ranking counts them.
        LandResult::Gated { findings, .. }
            if model.policy.tests_gate == crate::config::TestsGate::Warn =>
        {
            if let Some(c) = race.get_mut(k) {
                c.findings = findings.len();
            }
            return false;
        }
        LandResult::Landed { .. } | LandResult::InReview | LandResult::InPr { .. } => {
            won(model, idx, k, out);
            return false;
        }
        _ => match turned_down(result) {
            Some(why) => why,
            None => return false,
        },
    };
    if let Some(c) = race.get_mut(k) {
        c.state = CandState::Failed;
        c.why = Some(why.0);
        c.cause = why.1;
    }
    model.apply(idx, Change::RaceOn);
    advance(model, idx, now, out);
    out.push(Action::Save);
    true
}

/// Why the merge queue turned a candidate's work down, in words for the
/// next attempt's note, and as a fix-up of that work would be told (none
/// for a landing that failed on its own); `None` for an end that is no
/// verdict on the work.
fn turned_down(result: &LandResult) -> Option<(String, Option<FixupCause>)> {
    Some(match result {
        LandResult::ValidationFailed {
            name,
            cmd,
            tail,
            log_rel,
            ..
        } => (
            format!("its work failed validation {name} ({cmd}) on the target's tip"),
            Some(FixupCause::Validation {
                name: name.clone(),
                cmd: cmd.clone(),
                tail: tail.clone(),
                log: log_rel.clone(),
            }),
        ),
        LandResult::Conflict { paths, .. } => (
            format!(
                "its work conflicted with the target on {}",
                paths.join(", ")
            ),
            Some(FixupCause::Conflict {
                paths: paths.clone(),
            }),
        ),
        LandResult::Gated { findings, .. } => (
            format!(
                "the integrity gate found {}",
                findings
                    .iter()
                    .map(crate::gates::Finding::line_text)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Some(FixupCause::Gate {
                findings: findings.clone(),
                other_side_of: None,
            }),
        ),
        LandResult::Reviewed { review, .. } => (
            format!(
                "the reviewer did not approve it ({})",
                review.verdict.name()
            ),
            match &review.verdict {
                ReviewVerdict::Changes(text) => Some(FixupCause::Review { text: text.clone() }),
                _ => None,
            },
        ),
        LandResult::Error(e) => (format!("its landing failed: {e}"), None),
        _ => return None,
    })
}

/// Candidate `k` won: every other running one is stopped (its process
/// tree, by its slot's control), one not started yet never starts.
fn won(model: &mut Model, idx: usize, k: u32, out: &mut Vec<Action>) {
    let id = model.id(idx).to_string();
    let Some(race) = model.racing.get_mut(&idx) else {
        return;
    };
    for c in race.cands.iter_mut() {
        if c.k == k {
            c.state = CandState::Won;
            continue;
        }
        match c.state {
            CandState::Running => {
                c.state = CandState::Stopped;
                if let Some(slot) = c.slot {
                    out.push(Action::StopAttempt { slot });
                }
            }
            CandState::Waiting => {
                c.state = CandState::Stopped;
                c.ended = true;
            }
            _ => {}
        }
    }
    out.push(Action::Log(format!(
        "story {id} attempt {}: candidate {k} won; the others are stopped",
        race.attempt
    )));
    settle(model, idx, out);
    if model.racing.get(&idx).is_some_and(Race::all_ended) {
        race_won(model, idx, out);
    }
    sync_rows(model, idx, out);
}

/// The race is over with a winner and every report in: the attempt's
/// record (its history and `attempt_end`) as one attempt's, then the race
/// forgotten.
fn race_won(model: &mut Model, idx: usize, out: &mut Vec<Action>) {
    let Some(race) = model.racing.remove(&idx) else {
        return;
    };
    let r = summary_report(model, idx, &race, Verdict::Done);
    let id = model.id(idx).to_string();
    let rec = super::outcome::attempt_record(&r, false);
    out.push(Action::Record(record::attempt_end(&id, &rec)));
    model.state.push_history(&id, rec);
    sync_rows(model, idx, out);
    out.push(Action::Save);
}

/// No candidate can pass: one failed attempt, told every candidate's
/// failure (or, every candidate stopped by the run, none charged); the
/// retry's candidate 1 fixes up the work that came closest.
fn race_lost(model: &mut Model, idx: usize, now: Now, out: &mut Vec<Action>) {
    let Some(race) = model.racing.remove(&idx) else {
        return;
    };
    let closest = closest_work(model, idx, &race);
    let verdict = if race.any_failed() {
        Verdict::Failed {
            reason: format!(
                "no candidate of {} passed:\n{}",
                race.cands.len(),
                race.failures()
            ),
            kind: ResultKind::Error,
        }
    } else {
        Verdict::Interrupted
    };
    let failed = matches!(verdict, Verdict::Failed { .. });
    let r = summary_report(model, idx, &race, verdict);
    sync_rows(model, idx, out);
    super::outcome::attempt_ended(model, r, now, out);
    // The retry's note hands the closest work to the next race's
    // candidate 1. No retry (failed for good, or a split next), no hand:
    // a race every candidate of which was stopped leaves the note it
    // began with.
    let id = model.id(idx).to_string();
    let retried = model.state.status(&id) != crate::state::Status::Failed;
    let note = model
        .state
        .stories
        .get_mut(&id)
        .and_then(|s| s.note.as_mut())
        .filter(|n| failed && retried && n.fixup.is_none() && !n.decompose);
    let (Some(note), Some((k, fixup, reason))) = (note, closest) else {
        return;
    };
    out.push(Action::Log(format!(
        "story {id} attempt {}: {reason}; the next race's candidate 1 fixes up {}",
        race.attempt, fixup.work
    )));
    out.push(Action::Record(Ev::CandidateClosest {
        story: id,
        attempt: race.attempt,
        candidate: k,
        work: fixup.work.clone(),
        reason,
    }));
    note.closest = Some(Box::new(fixup));
}

/// The lost race's candidate whose work came closest (`Race::closest`),
/// that work as a fix-up of its kept ref, and why it was that one; `None`
/// when no candidate's work can be fixed up.
fn closest_work(model: &Model, idx: usize, race: &Race) -> Option<(u32, Fixup, String)> {
    let checks = &model.policy.best_of.checks;
    let k = race.closest(checks)?;
    let fixup = Fixup {
        cause: race.get(k)?.cause.clone()?,
        work: crate::project::candidate_ref(model.id(idx), race.attempt, k),
        attempt: race.attempt,
        // Its session ran in another candidate's worktree.
        fresh_session: true,
    };
    Some((k, fixup, race.closest_reason(k, checks)))
}

/// The race as one attempt's report, for the records and the history:
/// every candidate's usage and cost, the longest run, the winner's (else
/// the last failed candidate's) agent, model and log.
fn summary_report(model: &Model, idx: usize, race: &Race, verdict: Verdict) -> AttemptReport {
    let face = race
        .cands
        .iter()
        .find(|c| c.state == CandState::Won)
        .or_else(|| {
            race.cands
                .iter()
                .filter(|c| c.ended)
                .max_by_key(|c| c.finished)
        });
    let (cost_usd, cost_unknown) = race.cost();
    AttemptReport {
        idx,
        attempt: race.attempt,
        verdict,
        usage: race.usage,
        cost_usd,
        cost_unknown,
        model: face.and_then(|c| c.model.clone()),
        duration: std::time::Duration::from_secs_f64(race.secs),
        log_rel: face.and_then(|c| c.log_rel.clone()).unwrap_or_default(),
        iteration: face.map_or(model.attempts_this_run, |c| c.iteration),
        agent: face.map(|c| c.agent.name()),
        kind: race.kind,
        ..AttemptReport::nothing(Verdict::Interrupted)
    }
}

/// `state.json`'s rows of story `idx`'s candidates (`status --json`): the
/// race's while it runs, none after. A change of a candidate's state that
/// neither its `candidate_start` (running) nor its `candidate_end` (once
/// settled) says is recorded as `candidate_state` (done, validating,
/// passed, stopped before its report), so the web view's fold of the
/// records shows it too.
fn sync_rows(model: &mut Model, idx: usize, out: &mut Vec<Action>) {
    let id = model.id(idx).to_string();
    let rows = model.racing.get(&idx).map(Race::rows).unwrap_or_default();
    let Some(rec) = model.state.stories.get_mut(&id) else {
        return;
    };
    if rec.candidates != rows {
        out.push(Action::Candidates {
            id: id.clone(),
            rows: rows.clone(),
        });
    }
    if let Some(race) = model.racing.get(&idx) {
        for c in race.cands.iter().filter(|c| !c.settled) {
            let word = c.state.word();
            let was = rec.candidates.iter().find(|r| r.k == c.k);
            if word != "running" && word != "waiting" && was.is_none_or(|r| r.state != word) {
                out.push(Action::Record(Ev::CandidateState {
                    story: id.clone(),
                    attempt: race.attempt,
                    candidate: c.k,
                    state: word.to_string(),
                }));
            }
        }
    }
    rec.candidates = rows;
}

/// Where racing candidate `k` of attempt `attempt` at story `idx` runs (a
/// cluster node): shown on its row while it runs, kept in its state row
/// (`status --json`) and recorded (the web view folds it in); the story's
/// own placement (`outcome::placed`) is an attempt's. A placement of a
/// candidate that has ended since, or said again, changes nothing.
pub(super) fn placed(
    model: &mut Model,
    idx: usize,
    (attempt, k): (u32, u32),
    node: String,
) -> Vec<Action> {
    let id = model.id(idx).to_string();
    let Some(c) = model
        .racing
        .get_mut(&idx)
        .filter(|r| r.attempt == attempt)
        .and_then(|r| r.get_mut(k))
        .filter(|c| c.state == CandState::Running && c.node.as_ref() != Some(&node))
    else {
        return Vec::new();
    };
    c.node = Some(node.clone());
    let mut out = vec![
        Action::Record(Ev::CandidatePlaced {
            story: id.clone(),
            attempt,
            candidate: k,
            node: node.clone(),
        }),
        Action::Placed {
            id,
            candidate: Some(k),
            node,
        },
    ];
    sync_rows(model, idx, &mut out);
    out.push(Action::Save);
    out
}
