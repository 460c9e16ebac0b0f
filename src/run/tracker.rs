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

use std::collections::HashMap;
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use crate::backlog::tracker::{Read, Tracker, Update};
use crate::backlog::{Backlog, Story};
use crate::schedule::StoryState;

use super::events::Event;
use super::model::Model;

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
    jobs: std_mpsc::Sender<Job>,
    done: std_mpsc::Receiver<Done>,
}

/// What the run asks of the tracker's thread.
enum Job {
    Read,
    /// Queue these updates, then make the writes that can be made; `last`:
    /// the run ends (an unreachable tracker is asked once more).
    Tell(Vec<(String, Update)>, bool),
}

/// What the tracker's thread answers.
enum Done {
    Read(Read),
    /// The lines of a `Tell`'s flush, and whether it was the run's last:
    /// an earlier `Tell`'s answer may still be waiting in the channel when
    /// the last one is sent, and must not be taken for it.
    Told(Vec<String>, bool),
}

/// How long the run's end waits for the tracker's last writes: the
/// client's own limit (20 s a request) and a little, or, once a signal
/// asked the run to stop, hardly at all. Writes not made stay queued on
/// disk for the next run.
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

impl TrackerSync {
    /// The sync of a run starting from `model`: what was done before it
    /// counts as told (an earlier run told it, or queued it for the tracker).
    pub(crate) fn new(
        tracker: Box<dyn Tracker>,
        every: Duration,
        target: String,
        model: &Model,
        wake: impl Fn() + Send + 'static,
    ) -> TrackerSync {
        let told = model
            .stories
            .iter()
            .zip(&model.sched().nodes)
            .filter(|(_, n)| **n == StoryState::Done)
            .map(|(s, _)| {
                let landed = Update::Landed {
                    commit: String::new(),
                    target: target.clone(),
                };
                (s.id.clone(), landed)
            })
            .collect();
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
        TrackerSync {
            describe,
            told,
            last_poll: Some(Instant::now()),
            every,
            target,
            reading: false,
            jobs,
            done,
        }
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
            Done::Told(lines, _) => {
                for line in lines {
                    log(&line);
                }
                None
            }
        }
    }

    /// Tells the tracker what changed since it was last told (queued on
    /// disk by its thread, then written when it can be). `last`: the run
    /// is ending, so this waits, boundedly, for a read under way (it may
    /// hold new work) and for the last writes. New work found meanwhile
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
        let mut changed = None;
        if !last {
            if !updates.is_empty() {
                let _ = self.jobs.send(Job::Tell(updates, false));
            }
            while let Ok(done) = self.done.try_recv() {
                changed = changed.or(self.took(done, model, log));
            }
            return changed;
        }
        if self.jobs.send(Job::Tell(updates, true)).is_err() {
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
                        "{}: the last writes did not finish; they stay queued for the next run",
                        self.describe
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
            Job::Tell(updates, last) => {
                for (id, u) in updates {
                    tracker.tell(&id, u);
                }
                Done::Told(tracker.flush(crate::timefmt::now_secs(), last), last)
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
    /// test hold its last flush until it is let go.
    struct Recorder {
        told: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
        flushed: std_mpsc::Sender<bool>,
        let_go: std::sync::Arc<std::sync::Mutex<std_mpsc::Receiver<()>>>,
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
        fn tell(&mut self, id: &str, update: Update) {
            self.told.lock().unwrap().push(format!("{id} {update:?}"));
        }
        fn flush(&mut self, _now: i64, last: bool) -> Vec<String> {
            if last {
                let _ = self.let_go.lock().unwrap().recv();
            }
            let _ = self.flushed.send(last);
            vec![format!("flushed last={last}")]
        }
        fn pending(&self) -> Vec<String> {
            Vec::new()
        }
    }

    /// CI saw a landed issue left open: the answer to an earlier `Tell`
    /// was still in the channel when the run's last one was sent, was
    /// taken for the last one's, and the run ended before its writes.
    #[test]
    fn the_runs_end_waits_for_its_own_last_writes_not_an_earlier_answer() {
        use crate::run::events::Now;
        let stories = vec![story("1", &[], false), story("2", &[], false)];
        let now = Now {
            mono: Instant::now(),
            unix: 1_000,
        };
        let mut m = crate::run::model::test_model(stories, 2, 3, None, now);
        let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (flushed, flushes) = std_mpsc::channel();
        let (release, let_go) = std_mpsc::channel();
        let rec = Recorder {
            told: told.clone(),
            flushed,
            let_go: std::sync::Arc::new(std::sync::Mutex::new(let_go)),
        };
        let mut sync = TrackerSync::new(
            Box::new(rec),
            Duration::from_secs(3600),
            "main".into(),
            &m,
            || {},
        );
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
}
