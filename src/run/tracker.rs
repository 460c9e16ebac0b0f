//! The run's side of an issue tracker backlog (issue 27): between events
//! the dispatcher asks the tracker again (at most every `poll_seconds`)
//! and tells it each story's status. Decisions are the pure functions
//! here and in `backlog::tracker`; this file only carries them out, the
//! network on a thread of its own (issue 35: a tracker that took
//! connections and never answered froze the run, and Ctrl-C with it).
//!
//! New or edited issues are taken in as a decomposition's sub-stories are:
//! `Model::reload_pending` holds new starts, and once nothing runs the run
//! reloads the backlog (`run::run`), which reads the tracker again.
//!
//! Every change told is journaled before the thread is handed it
//! (`tracker_journal.rs`), so none is lost with a thread stuck in a
//! request when the run ends or is killed (issue 35, finding 8).

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use crate::backlog::tracker::{Read, Tracker, Update};
use crate::backlog::{Backlog, Story};
use crate::schedule::StoryState;

use super::events::Event;
use super::model::Model;
use super::tracker_journal::{self, Journal};

/// The run's tracker: what it was told, and the thread that asks it.
pub(crate) struct TrackerSync {
    describe: String,
    /// What the tracker was last told of each story.
    told: HashMap<String, Update>,
    last_poll: Option<Instant>,
    every: Duration,
    target: String,
    /// A read was asked of the edge and has not come back.
    reading: bool,
    /// What was handed to the thread and is not yet in the tracker's queue.
    journal: Journal,
    jobs: std_mpsc::Sender<Job>,
    done: std_mpsc::Receiver<Done>,
}

/// What the run asks of the tracker's thread.
enum Job {
    Read,
    /// Queue these updates (journaled as hand-over `seq`, 0: none), then
    /// make the writes that can be made; `last`: the run ends (an
    /// unreachable tracker is asked once more).
    Tell(u64, Vec<(String, Update)>, bool),
}

/// What the tracker's thread answers.
enum Done {
    Read(Read),
    /// Hand-over `seq` is in the tracker's queue on disk: it leaves the
    /// journal. Sent before the flush, which may never come back.
    Queued(u64),
    /// The lines of a `Tell`'s flush, and whether it was the run's last:
    /// an earlier `Tell`'s answer may still be waiting in the channel when
    /// the last one is sent, and must not be taken for it.
    Told(Vec<String>, bool),
}

/// How long the run's end waits for the tracker's last writes: the
/// client's own limit (20 s a request) and a little, or, once a signal
/// asked the run to stop, hardly at all. Writes not made stay on disk for
/// the next run: queued by the tracker, or in the run's journal.
const LAST_WRITES: Duration = Duration::from_secs(25);
const LAST_WRITES_STOPPING: Duration = Duration::from_secs(2);

/// True when `now` (the tracker's backlog) holds work the run does not
/// know of: a new story, dependencies that changed, a story the run would
/// still start that the tracker says is done. Pure.
pub(crate) fn backlog_changed(stories: &[Story], nodes: &[StoryState], now: &Backlog) -> bool {
    let known: HashMap<&str, usize> = stories
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    now.stories.iter().any(|s| match known.get(s.id.as_str()) {
        None => !s.prd_passes,
        // A closed issue's dependencies are no work: the tracker reads
        // none for it (`poll` asks only for open issues' links), so every
        // story with dependencies that landed would otherwise "change" at
        // the next poll and drain the run (found by benches/soak).
        Some(&i) if s.prd_passes => nodes.get(i) == Some(&StoryState::Pending),
        Some(&i) => {
            let mut was = stories[i].depends_on.clone();
            let mut is = s.depends_on.clone();
            was.sort();
            is.sort();
            was != is
        }
    })
}

/// What to tell the tracker of a story the run sees as `node`, given what
/// it was told last (`None`: nothing new to say). Pure.
pub(crate) fn update_for(
    node: StoryState,
    told: Option<&Update>,
    landed_commit: Option<&str>,
    target: &str,
) -> Option<Update> {
    let now = match node {
        StoryState::Running | StoryState::Landing => Update::Running,
        StoryState::Failed => Update::Failed,
        StoryState::Review => Update::Review,
        StoryState::Done => match landed_commit {
            Some(c) => Update::Landed {
                commit: c.to_string(),
                target: target.to_string(),
            },
            // Done before this run (closed already, or landed earlier).
            None => return None,
        },
        StoryState::Pending | StoryState::Blocked | StoryState::Excluded => match told {
            None | Some(Update::Pending) => return None,
            Some(_) => Update::Pending,
        },
    };
    match (told, &now) {
        (Some(t), n) if t == n => None,
        // Landed stays landed: a later view of it says nothing new.
        (Some(Update::Landed { .. }), _) => None,
        _ => Some(now),
    }
}

/// What an earlier run's journal still asks of the tracker: each story's
/// last journaled change (a later one supersedes an earlier: labels are
/// set whole, a landing is final), unless the tracker has it made or
/// queued already (`has`: a run killed after the thread queued it, before
/// the journal heard). In the journal's order. Pure.
pub(crate) fn to_replay(
    journal: &[(String, Update)],
    has: &dyn Fn(&str, &Update) -> bool,
) -> Vec<(String, Update)> {
    let mut last: Vec<(String, Update)> = Vec::new();
    for (id, update) in journal {
        last.retain(|(i, _)| i != id);
        last.push((id.clone(), update.clone()));
    }
    last.retain(|(id, update)| !has(id, update));
    last
}

/// A story as a run starts with it, for `told_at_start`.
pub(crate) struct AtStart<'a> {
    pub(crate) id: &'a str,
    pub(crate) node: StoryState,
    /// The tracker says it is done (a closed issue).
    pub(crate) closed: bool,
    /// Its merge commit, when state.json has one.
    pub(crate) landed: Option<&'a str>,
}

/// What the tracker counts as told of each story when a run starts, from
/// data: a landed story only when the tracker has its landing (made, as
/// the last read has it, or queued: `has`) or the journal holds it (it is
/// handed on again), else it is told again (a landing whose issue was
/// left open must not count as told); a story the tracker says is done,
/// or done with no merge commit to tell, has nothing to say; any other
/// story counts as told running when the journal last holds that for it,
/// or (nothing journaled) the tracker shows it: nothing runs when a run
/// starts, so that is what a killed run left, and the run's first word on
/// the story takes it off. Other statuses count as untold, as before the
/// journal (a story this run leaves out keeps its failed label). Pure.
pub(crate) fn told_at_start(
    stories: &[AtStart<'_>],
    journal: &[(String, Update)],
    target: &str,
    has: &dyn Fn(&str, &Update) -> bool,
) -> HashMap<String, Update> {
    let last: HashMap<&str, &Update> = journal.iter().map(|(i, u)| (i.as_str(), u)).collect();
    let landed = |commit: &str| Update::Landed {
        commit: commit.to_string(),
        target: target.to_string(),
    };
    let told = |s: &AtStart<'_>| -> Option<Update> {
        match (s.node, s.landed) {
            (StoryState::Done, Some(c)) if !s.closed => {
                let u = landed(c);
                (has(s.id, &u) || last.get(s.id) == Some(&&u)).then_some(u)
            }
            (StoryState::Done, c) => Some(landed(c.unwrap_or_default())),
            _ => match last.get(s.id) {
                Some(u) => (**u == Update::Running).then_some(Update::Running),
                None => has(s.id, &Update::Running).then_some(Update::Running),
            },
        }
    };
    stories
        .iter()
        .filter_map(|s| Some((s.id.to_string(), told(s)?)))
        .collect()
}

/// The run's stories as `told_at_start` takes them.
fn at_start(model: &Model) -> Vec<AtStart<'_>> {
    model
        .stories
        .iter()
        .zip(&model.sched().nodes)
        .map(|(s, node)| AtStart {
            id: &s.id,
            node: *node,
            closed: s.prd_passes,
            landed: model
                .state
                .record(&s.id)
                .and_then(|r| r.landed_commit.as_deref()),
        })
        .collect()
}

impl TrackerSync {
    /// The sync of a run starting from `model` in project `root`: what
    /// counts as told is derived from the tracker and the journal an
    /// earlier run left (`told_at_start`); what that journal holds and the
    /// tracker has not is handed on first (`to_replay`).
    pub(crate) fn new(
        tracker: Box<dyn Tracker>,
        every: Duration,
        target: String,
        model: &Model,
        root: &Path,
        wake: impl Fn() + Send + 'static,
        log: &dyn Fn(&str),
    ) -> TrackerSync {
        let journaled = tracker_journal::read(root).unwrap_or_else(|e| {
            log(&format!(
                "{e}; set aside: the landings it held are told again from state.json"
            ));
            Vec::new()
        });
        let has = |id: &str, u: &Update| tracker.has(id, u);
        let replay = to_replay(&journaled, &has);
        let told = told_at_start(&at_start(model), &journaled, &target, &has);
        let mut journal = Journal::new(root);
        let first = if replay.is_empty() {
            if !journaled.is_empty() {
                if let Err(e) = journal.save() {
                    log(&e);
                }
            }
            None
        } else {
            log(&format!(
                "{}: {} status change{} an earlier run journaled queued again",
                tracker.describe(),
                replay.len(),
                if replay.len() == 1 { "" } else { "s" }
            ));
            let (seq, written) = journal.hand(&replay);
            if let Err(e) = written {
                log(&e);
            }
            Some(Job::Tell(seq, replay, false))
        };
        let describe = tracker.describe();
        let (jobs, job_rx) = std_mpsc::channel();
        let (done_tx, done) = std_mpsc::channel();
        // The tracker's HTTP (20 s a request at worst, for ever with a
        // server that takes connections and never answers) happens on a
        // thread of its own: the run, Ctrl-C and steering never wait on it.
        std::thread::Builder::new()
            .name("ralph-tracker".into())
            .spawn(move || edge(tracker, &job_rx, &done_tx, &wake))
            .ok();
        if let Some(job) = first {
            let _ = jobs.send(job);
        }
        TrackerSync {
            describe,
            told,
            last_poll: Some(Instant::now()),
            every,
            target,
            reading: false,
            journal,
            jobs,
            done,
        }
    }

    /// The next `poll` asks the tracker, whenever it was last read: the
    /// run's start went on without its read (`tracker::START_WAIT`).
    pub(crate) fn poll_soon(&mut self) {
        self.last_poll = None;
    }

    /// Takes in a read that came back, then asks for the next when one is
    /// due. Never waits. New work comes back as the event the run feeds to
    /// its transition (the model changes there only).
    pub(crate) fn poll(&mut self, model: &Model, log: &dyn Fn(&str)) -> Option<Event> {
        let mut changed = None;
        while let Ok(done) = self.done.try_recv() {
            changed = changed.or(self.took(done, model, log));
        }
        if self.reading
            || model.reload_pending
            || changed.is_some()
            || self.last_poll.is_some_and(|t| t.elapsed() < self.every)
        {
            return changed;
        }
        self.last_poll = Some(Instant::now());
        self.reading = self.jobs.send(Job::Read).is_ok();
        None
    }

    fn took(&mut self, done: Done, model: &Model, log: &dyn Fn(&str)) -> Option<Event> {
        match done {
            Done::Read(read) => {
                self.reading = false;
                if let Some(why) = &read.stale {
                    log(&format!("backlog: the last snapshot stands: {why}"));
                }
                let backlog = read.backlog?;
                backlog_changed(&model.stories, &model.sched().nodes, &backlog).then(|| {
                    Event::BacklogChanged {
                        describe: self.describe.clone(),
                    }
                })
            }
            Done::Queued(seq) => {
                if let Err(e) = self.journal.queued(seq) {
                    log(&e);
                }
                None
            }
            Done::Told(lines, _) => {
                for line in lines {
                    log(&line);
                }
                None
            }
        }
    }

    /// Tells the tracker what changed since it was last told (journaled,
    /// then queued on disk by its thread and written when it can be).
    /// `last`: the run is ending, so this waits, boundedly, for a read
    /// under way (it may hold new work) and for the last writes. New work found meanwhile
    /// comes back as the event for the transition, as from `poll`.
    pub(crate) fn tell(&mut self, model: &Model, last: bool, log: &dyn Fn(&str)) -> Option<Event> {
        let mut updates = Vec::new();
        for (i, story) in model.stories.iter().enumerate() {
            let landed = model
                .state
                .record(&story.id)
                .and_then(|r| r.landed_commit.as_deref());
            let node = model.sched().nodes[i];
            if let Some(u) = update_for(node, self.told.get(&story.id), landed, &self.target) {
                updates.push((story.id.clone(), u.clone()));
                self.told.insert(story.id.clone(), u);
            }
        }
        // On disk before the thread has it: the thread may be stuck in a
        // request when the run ends, or the run killed, before it takes it.
        let seq = if updates.is_empty() {
            0
        } else {
            let (seq, written) = self.journal.hand(&updates);
            if let Err(e) = written {
                log(&e);
            }
            seq
        };
        let mut changed = None;
        if !last {
            if !updates.is_empty() {
                let _ = self.jobs.send(Job::Tell(seq, updates, false));
            }
            while let Ok(done) = self.done.try_recv() {
                changed = changed.or(self.took(done, model, log));
            }
            return changed;
        }
        if self.jobs.send(Job::Tell(seq, updates, true)).is_err() {
            return None;
        }
        let stopping = model.signals != crate::run::model::SignalCount::None;
        let deadline = Instant::now()
            + if stopping {
                LAST_WRITES_STOPPING
            } else {
                LAST_WRITES
            };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.done.recv_timeout(left) {
                Ok(Done::Told(lines, true)) => {
                    self.took(Done::Told(lines, true), model, log);
                    // Jobs are done in order: a read asked before is in.
                    return changed;
                }
                Ok(done) => changed = changed.or(self.took(done, model, log)),
                Err(_) => {
                    log(&format!(
                        "{}: the last writes did not finish; they stay in {}/ for the next run",
                        self.describe,
                        crate::paths::TRACKER
                    ));
                    return changed;
                }
            }
        }
    }
}

/// The tracker's thread: one job at a time, in order, until the run drops
/// its end of the queue. `wake` nudges the run's loop when an answer is in.
fn edge(
    mut tracker: Box<dyn Tracker>,
    jobs: &std_mpsc::Receiver<Job>,
    done: &std_mpsc::Sender<Done>,
    wake: &dyn Fn(),
) {
    while let Ok(job) = jobs.recv() {
        let answer = match job {
            Job::Read => Done::Read(tracker.read(crate::timefmt::now_secs())),
            Job::Tell(seq, updates, last) => {
                let mut lines = Vec::new();
                for (id, u) in updates {
                    if let Err(e) = tracker.tell(&id, u) {
                        lines.push(e);
                    }
                }
                // Only what is durably queued leaves the journal.
                if lines.is_empty() && seq > 0 {
                    if done.send(Done::Queued(seq)).is_err() {
                        return;
                    }
                    wake();
                }
                lines.extend(tracker.flush(crate::timefmt::now_secs(), last));
                Done::Told(lines, last)
            }
        };
        if done.send(answer).is_err() {
            return;
        }
        wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backlog::{Section, Source};

    fn story(id: &str, deps: &[&str], done: bool) -> Story {
        Story {
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            prd_passes: done,
            ..Story::bare(id, "")
        }
    }

    fn backlog(stories: Vec<Story>) -> Backlog {
        Backlog {
            source: Source::GitHub { repo: "o/r".into() },
            stories,
            sections: vec![Section {
                label: None,
                chain: false,
            }],
            skipped: Vec::new(),
        }
    }

    #[test]
    fn new_issues_and_changed_dependencies_are_new_work_and_nothing_else_is() {
        let run = vec![story("1", &[], false), story("2", &["1"], false)];
        let nodes = [StoryState::Done, StoryState::Pending];
        let same = backlog(vec![story("1", &[], true), story("2", &["1"], false)]);
        assert!(
            !backlog_changed(&run, &nodes, &same),
            "a landed story closed"
        );
        let added = backlog(vec![
            story("1", &[], true),
            story("2", &["1"], false),
            story("3", &[], false),
        ]);
        assert!(backlog_changed(&run, &nodes, &added));
        let closed_new = backlog(vec![
            story("1", &[], true),
            story("2", &["1"], false),
            story("3", &[], true),
        ]);
        assert!(
            !backlog_changed(&run, &nodes, &closed_new),
            "a closed issue is no work"
        );
        let edited = backlog(vec![story("1", &[], true), story("2", &[], false)]);
        assert!(backlog_changed(&run, &nodes, &edited));
        let landed_with_dependencies = backlog(vec![story("1", &[], true), story("2", &[], true)]);
        assert!(
            !backlog_changed(
                &run,
                &[StoryState::Done, StoryState::Done],
                &landed_with_dependencies
            ),
            "a story with dependencies landed and closed: the read has no links for it"
        );
        let done_elsewhere = backlog(vec![story("1", &[], true), story("2", &["1"], true)]);
        assert!(
            backlog_changed(&run, &nodes, &done_elsewhere),
            "closed by a person"
        );
    }

    #[test]
    fn each_status_is_told_once_and_a_landing_for_good() {
        let t = "main";
        assert_eq!(update_for(StoryState::Pending, None, None, t), None);
        assert_eq!(
            update_for(StoryState::Running, None, None, t),
            Some(Update::Running)
        );
        assert_eq!(
            update_for(StoryState::Landing, Some(&Update::Running), None, t),
            None
        );
        assert_eq!(
            update_for(StoryState::Pending, Some(&Update::Running), None, t),
            Some(Update::Pending),
            "a retry takes the running label off"
        );
        assert_eq!(
            update_for(StoryState::Failed, Some(&Update::Running), None, t),
            Some(Update::Failed)
        );
        let landed = Update::Landed {
            commit: "abc".into(),
            target: t.into(),
        };
        assert_eq!(
            update_for(StoryState::Done, Some(&Update::Running), Some("abc"), t),
            Some(landed.clone())
        );
        assert_eq!(
            update_for(StoryState::Done, Some(&landed), Some("abc"), t),
            None
        );
        assert_eq!(
            update_for(StoryState::Done, None, None, t),
            None,
            "done before the run"
        );
    }

    /// A tracker that records what it was told and flushed, and lets the
    /// test hold its last flush (every flush: `hold_all`) until it is let go.
    struct Recorder {
        told: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
        flushed: std_mpsc::Sender<bool>,
        let_go: std::sync::Arc<std::sync::Mutex<std_mpsc::Receiver<()>>>,
        hold_all: bool,
    }

    impl Tracker for Recorder {
        fn describe(&self) -> String {
            "recorder".into()
        }
        fn read(&mut self, _now: i64) -> Read {
            self.snapshot()
        }
        fn snapshot(&self) -> Read {
            Read {
                backlog: None,
                problems: Vec::new(),
                stale: None,
            }
        }
        fn tell(&mut self, id: &str, update: Update) -> Result<(), String> {
            self.told.lock().unwrap().push(format!("{id} {update:?}"));
            Ok(())
        }
        fn has(&self, _id: &str, _update: &Update) -> bool {
            false
        }
        fn flush(&mut self, _now: i64, last: bool) -> Vec<String> {
            if last || self.hold_all {
                let _ = self.let_go.lock().unwrap().recv();
            }
            let _ = self.flushed.send(last);
            vec![format!("flushed last={last}")]
        }
        fn pending(&self) -> Vec<String> {
            Vec::new()
        }
    }

    type Told = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

    /// A `Recorder`, what it is told, its flushes, and what lets a held
    /// flush go (dropped: let go).
    fn recorder(
        hold_all: bool,
    ) -> (
        Recorder,
        Told,
        std_mpsc::Receiver<bool>,
        std_mpsc::Sender<()>,
    ) {
        let told = Told::default();
        let (flushed, flushes) = std_mpsc::channel();
        let (release, let_go) = std_mpsc::channel();
        let rec = Recorder {
            told: told.clone(),
            flushed,
            let_go: std::sync::Arc::new(std::sync::Mutex::new(let_go)),
            hold_all,
        };
        (rec, told, flushes, release)
    }

    fn model_of(stories: Vec<Story>) -> Model {
        let now = crate::run::events::Now {
            mono: Instant::now(),
            unix: 1_000,
        };
        crate::run::model::test_model(stories, 2, 3, None, now)
    }

    fn sync_over(rec: Recorder, m: &Model, root: &Path, log: &dyn Fn(&str)) -> TrackerSync {
        let hour = Duration::from_secs(3600);
        TrackerSync::new(Box::new(rec), hour, "main".into(), m, root, || {}, log)
    }

    /// CI saw a landed issue left open: the answer to an earlier `Tell`
    /// was still in the channel when the run's last one was sent, was
    /// taken for the last one's, and the run ended before its writes.
    #[test]
    fn the_runs_end_waits_for_its_own_last_writes_not_an_earlier_answer() {
        let mut m = model_of(vec![story("1", &[], false), story("2", &[], false)]);
        let (rec, told, flushes, release) = recorder(false);
        let dir = tempfile::tempdir().unwrap();
        let mut sync = sync_over(rec, &m, dir.path(), &|_| {});
        let lines = std::cell::RefCell::new(Vec::new());
        let log = |l: &str| lines.borrow_mut().push(l.to_string());
        m.set_node(0, StoryState::Running);
        sync.tell(&m, false, &log);
        // The first answer is in the channel, not yet taken by the run.
        assert!(!flushes.recv().unwrap());
        m.set_node(1, StoryState::Running);
        // The last flush goes on only once the run waits for it.
        let opener = std::thread::spawn(move || release.send(()).unwrap());
        sync.tell(&m, true, &log);
        opener.join().unwrap();
        assert_eq!(
            flushes.try_recv(),
            Ok(true),
            "the run ended before its last flush: {:?}",
            lines.borrow()
        );
        assert_eq!(told.lock().unwrap().len(), 2, "{:?}", told.lock().unwrap());
        assert!(lines.borrow().iter().any(|l| l == "flushed last=true"));
    }

    fn landed(c: &str) -> Update {
        Update::Landed {
            commit: c.into(),
            target: "main".into(),
        }
    }

    /// Issue 35, finding 8: the thread stuck in a request that never came
    /// back when the run ended had not taken the landing from its channel;
    /// the landing was gone. Now it is in the journal, and the next run's
    /// sync hands it on first.
    #[test]
    fn a_landing_the_stuck_thread_never_took_is_handed_on_by_the_next_run() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = model_of(vec![story("1", &[], false)]);
        let (stuck, told, flushes, release) = recorder(true);
        let mut sync = sync_over(stuck, &m, dir.path(), &|_| {});
        m.set_node(0, StoryState::Running);
        sync.tell(&m, false, &|_| {});
        m.state.mark_done("1", Some("abc"));
        m.set_node(0, StoryState::Done);
        // The thread is in its first flush, which never comes back.
        sync.tell(&m, false, &|_| {});
        drop(sync);
        let left = tracker_journal::read(dir.path()).unwrap();
        assert!(left.contains(&("1".into(), landed("abc"))), "{left:?}");
        assert_eq!(*told.lock().unwrap(), ["1 Running"]);
        drop((release, flushes));

        let (rec, next, flushes, _release) = recorder(false);
        let lines = std::cell::RefCell::new(Vec::new());
        let log = |l: &str| lines.borrow_mut().push(l.to_string());
        let mut sync = sync_over(rec, &m, dir.path(), &log);
        assert_eq!(flushes.recv(), Ok(false), "the replay was flushed");
        assert_eq!(
            *next.lock().unwrap(),
            [format!("1 {:?}", landed("abc"))],
            "the landing alone, once: {:?}",
            lines.borrow()
        );
        // Its answer taken, the journal is empty; nothing is told twice.
        sync.tell(&m, false, &|_| {});
        assert!(!crate::paths::tracker_journal(dir.path()).exists());
        assert_eq!(next.lock().unwrap().len(), 1);
    }

    #[test]
    fn a_journal_replays_each_storys_last_change_the_tracker_lacks() {
        let journal = vec![
            ("1".to_string(), Update::Running),
            ("2".to_string(), Update::Running),
            ("1".to_string(), landed("a")),
            ("3".to_string(), Update::Failed),
            ("2".to_string(), Update::Pending),
        ];
        let none = |_: &str, _: &Update| false;
        assert_eq!(
            to_replay(&journal, &none),
            vec![
                ("1".to_string(), landed("a")),
                ("3".to_string(), Update::Failed),
                ("2".to_string(), Update::Pending),
            ],
            "a later change supersedes an earlier one; the order stays"
        );
        // Queued (or made) before the run was killed: not again.
        let has_1 = |id: &str, u: &Update| id == "1" && *u == landed("a");
        assert_eq!(
            to_replay(&journal, &has_1),
            vec![
                ("3".to_string(), Update::Failed),
                ("2".to_string(), Update::Pending),
            ]
        );
        assert_eq!(to_replay(&[], &none), vec![]);
    }

    #[test]
    fn a_landing_counts_as_told_at_the_start_only_when_the_tracker_or_journal_has_it() {
        let at = |id: &'static str, node, closed, landed: Option<&'static str>| AtStart {
            id,
            node,
            closed,
            landed,
        };
        let stories = [
            // Landed, its close neither made nor queued nor journaled.
            at("1", StoryState::Done, false, Some("a")),
            // Landed, its close queued (or made).
            at("2", StoryState::Done, false, Some("b")),
            // Landed, journaled.
            at("3", StoryState::Done, false, Some("c")),
            // Closed on the tracker (by a person, or long ago).
            at("4", StoryState::Done, true, None),
            // Done with no merge commit to tell of.
            at("5", StoryState::Done, false, None),
            // Waiting; a killed run journaled it as running.
            at("6", StoryState::Pending, false, None),
            // Failed for good; the tracker shows the failed label.
            at("7", StoryState::Failed, false, None),
            // Waiting, nothing anywhere.
            at("8", StoryState::Pending, false, None),
            // Left out of this run; the tracker shows it running.
            at("9", StoryState::Excluded, false, None),
            // Left out of this run; it failed in the killed one (the
            // tracker's last read still shows it running).
            at("10", StoryState::Excluded, false, None),
        ];
        let journal = vec![
            ("3".to_string(), landed("c")),
            ("6".to_string(), Update::Running),
            ("10".to_string(), Update::Running),
            ("10".to_string(), Update::Failed),
        ];
        let has = |id: &str, u: &Update| {
            (id == "2" && *u == landed("b"))
                || (id == "7" && *u == Update::Failed)
                || (["9", "10"].contains(&id) && *u == Update::Running)
        };
        let told = told_at_start(&stories, &journal, "main", &has);
        assert_eq!(told.get("1"), None, "an open issue's landing is told again");
        assert_eq!(told.get("2"), Some(&landed("b")));
        assert_eq!(told.get("3"), Some(&landed("c")));
        assert_eq!(told.get("4"), Some(&landed("")));
        assert_eq!(told.get("5"), Some(&landed("")));
        assert_eq!(told.get("6"), Some(&Update::Running));
        assert_eq!(told.get("7"), None, "as before the journal");
        assert_eq!(told.get("8"), None);
        assert_eq!(told.get("9"), Some(&Update::Running));
        assert_eq!(told.get("10"), None, "the journal is newer than the read");
        // What the run then tells: the lost landing, and stories 6 and 9
        // back to waiting (their running labels come off); story 10 keeps
        // its failed label.
        let tells = |id: &str, node, commit| update_for(node, told.get(id), commit, "main");
        assert_eq!(tells("1", StoryState::Done, Some("a")), Some(landed("a")));
        assert_eq!(tells("2", StoryState::Done, Some("b")), None);
        assert_eq!(tells("6", StoryState::Pending, None), Some(Update::Pending));
        assert_eq!(
            tells("9", StoryState::Excluded, None),
            Some(Update::Pending)
        );
        assert_eq!(tells("10", StoryState::Excluded, None), None);
    }
}
