//! The run loop: waits for the next event (a finished attempt or landing,
//! agent activity, an OS signal, the end of a pause), hands it to the pure
//! transition and carries out the actions it returns. It decides nothing.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Result};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{Id, JoinSet};

use crate::agent::{ResultKind, Verdict};
use crate::control::Control;
use crate::display::Reporter;
use crate::learnings;
use crate::schedule::StoryState;
use crate::steer::{Command, Reply};
use crate::store;
use crate::timefmt;

use crate::executor::{AttemptEvent, Executor};

use super::context::{blocking, RunContext};
use super::events::{Action, AttemptReport, AttemptRequest, Event, LandResult, Now, OsSignal};
use super::land::{self, LandRequest};
use super::model::{Chain, Model};
use super::notify;
use super::record::{Figures, Notice, Recorder};
use super::transition::{handle, is_over};
use super::{queue, stream};

/// What a task in the set was doing, to answer for it if it panics.
enum Task {
    Attempt(Box<AttemptRequest>),
    Landing,
    /// The merge queue's chain: its results, given as it goes
    /// (`chain_rx`), come before its end.
    Chain,
    Hooks,
    /// Best of N's judge of story `.0`'s attempt `.1`.
    Judge(usize, u32),
}

pub(crate) struct Dispatcher<E: Executor> {
    pub(crate) model: Model,
    pub(crate) reporter: Reporter,
    ctx: Arc<RunContext>,
    pub(crate) executor: Arc<E>,
    tasks: JoinSet<Event>,
    owners: HashMap<Id, Task>,
    controls: HashMap<usize, watch::Sender<Control>>,
    land_control: watch::Sender<Control>,
    activity_tx: mpsc::UnboundedSender<Event>,
    activity_rx: mpsc::UnboundedReceiver<Event>,
    /// What running attempts say before their reports (`AttemptEvent`),
    /// taken as events of their own.
    attempt_tx: mpsc::UnboundedSender<AttemptEvent>,
    attempt_rx: mpsc::UnboundedReceiver<AttemptEvent>,
    /// The open chain's intake (`Action::ChainAdd`); dropped to close it.
    chain_in: Option<mpsc::UnboundedSender<LandRequest>>,
    /// Results the chain in flight gives as it goes (`Event::ChainResults`).
    chain_tx: mpsc::UnboundedSender<Vec<(usize, LandResult)>>,
    chain_rx: mpsc::UnboundedReceiver<Vec<(usize, LandResult)>>,
    /// Events taken in order before the next wait: a chain's results
    /// still in `chain_rx` when its task ended, then its end.
    queued: VecDeque<Event>,
    /// A reading of what running worktrees changed is under way
    /// (`read_touched`): one at a time.
    touched_reading: bool,
    /// Which records call for a notification.
    recorder: Recorder,
    /// Notifications the step's records called for (sent once it is done).
    notices: Vec<Notice>,
    /// Notification hooks: the run does not wait for them, but does not
    /// end before they do.
    notes: JoinSet<()>,
    /// The run's steering socket (`steer::server`), when it could be made.
    steer_socket: Option<std::os::unix::net::UnixListener>,
    /// Steering requests read off the socket, each with where its answer goes.
    steer_tx: mpsc::UnboundedSender<(Command, oneshot::Sender<Reply>)>,
    steer_rx: mpsc::UnboundedReceiver<(Command, oneshot::Sender<Reply>)>,
    /// Requests handed to the transition, waiting for its `Action::Reply`.
    replies: HashMap<u64, oneshot::Sender<Reply>>,
    next_request: u64,
    /// An issue tracker backlog: polled between events, told of statuses.
    pub(crate) tracker: Option<super::tracker::TrackerSync>,
    /// The live web view's hub (`--serve`): told every record, agent line
    /// and status change as the run makes them.
    pub(crate) live: Option<Arc<crate::serve::Live>>,
    /// `--hup stop`: SIGHUP stops the run like SIGINT; otherwise the run
    /// goes on without a terminal (`display::sink::hang_up`).
    pub(crate) hup_stops: bool,
}

/// How often the display is refreshed while the run waits out a limit.
const TICK: std::time::Duration = std::time::Duration::from_secs(1);

fn now() -> Now {
    Now {
        mono: Instant::now(),
        unix: timefmt::now_secs(),
    }
}

impl<E: Executor> Dispatcher<E> {
    pub(crate) fn new(
        model: Model,
        reporter: Reporter,
        ctx: Arc<RunContext>,
        executor: E,
    ) -> Dispatcher<E> {
        let (activity_tx, activity_rx) = mpsc::unbounded_channel();
        let (attempt_tx, attempt_rx) = mpsc::unbounded_channel();
        let (chain_tx, chain_rx) = mpsc::unbounded_channel();
        let (steer_tx, steer_rx) = mpsc::unbounded_channel();
        let recorder = Recorder::new(&model);
        Dispatcher {
            recorder,
            notices: Vec::new(),
            notes: JoinSet::new(),
            tracker: None,
            model,
            reporter,
            ctx,
            executor: Arc::new(executor),
            tasks: JoinSet::new(),
            owners: HashMap::new(),
            controls: HashMap::new(),
            land_control: watch::channel(Control::Run).0,
            activity_tx,
            activity_rx,
            attempt_tx,
            attempt_rx,
            chain_in: None,
            chain_tx,
            chain_rx,
            queued: Default::default(),
            steer_socket: None,
            steer_tx,
            steer_rx,
            replies: HashMap::new(),
            next_request: 0,
            live: None,
            hup_stops: false,
            touched_reading: false,
        }
    }

    /// What the run's tasks share.
    pub(crate) fn ctx(&self) -> &Arc<RunContext> {
        &self.ctx
    }

    /// Takes steering requests on `listener` while the run lasts.
    pub(crate) fn steer_on(&mut self, listener: std::os::unix::net::UnixListener) {
        self.steer_socket = Some(listener);
    }

    /// Accepts steering connections in the background: each sends one
    /// request line and gets one reply line. A line that is no request is
    /// answered here; the others go to the transition, between two events.
    fn accept_steering(&self) -> Option<tokio::task::JoinHandle<()>> {
        let std_listener = self.steer_socket.as_ref()?.try_clone().ok()?;
        std_listener.set_nonblocking(true).ok()?;
        let listener = tokio::net::UnixListener::from_std(std_listener).ok()?;
        let tx = self.steer_tx.clone();
        Some(tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let _ = steer_connection(stream, tx).await;
                });
            }
        }))
    }

    /// Runs until the transition says the run is over.
    pub(crate) async fn run(&mut self, reland: Vec<usize>) -> Result<()> {
        let mut sigint = signal(SignalKind::interrupt())?;
        let mut sigterm = signal(SignalKind::terminate())?;
        let mut sighup = signal(SignalKind::hangup())?;
        self.read_memory();
        let acceptor = self.accept_steering();
        self.feed(Event::Start { reland });
        self.warm_free_slots();
        let looped = self
            .event_loop(&mut sigint, &mut sigterm, &mut sighup)
            .await;
        if let Some(a) = acceptor {
            a.abort();
        }
        // Requests the run can no longer answer: their clients see the
        // connection close (the run has ended).
        self.replies.clear();
        looped?;
        self.executor.warmed().await;
        if let Some(t) = &mut self.tracker {
            let log = |l: &str| self.ctx.log.line(l);
            // Bounded: a tracker that does not answer costs its writes a
            // wait for the next run, never the run's end.
            let changed = tokio::task::block_in_place(|| t.tell(&self.model, true, &log));
            // New work found at the end: the run reads its backlog again.
            if let Some(ev) = changed {
                self.feed(ev);
            }
        }
        // A notification about the run's last moments still runs: wait
        // for it (each hook has its own time limit), unless told to stop.
        while !self.notes.is_empty() {
            tokio::select! {
                _ = self.notes.join_next() => {}
                _ = sigint.recv() => self.notes.abort_all(),
                _ = sigterm.recv() => self.notes.abort_all(),
            }
        }
        Ok(())
    }

    async fn event_loop(
        &mut self,
        sigint: &mut tokio::signal::unix::Signal,
        sigterm: &mut tokio::signal::unix::Signal,
        sighup: &mut tokio::signal::unix::Signal,
    ) -> Result<()> {
        while !is_over(&self.model) {
            if let Some(event) = self.queued.pop_front() {
                self.step(event);
                continue;
            }
            if self.tasks.is_empty() && self.model.busy() {
                self.executor.warmed().await;
                // Every result comes back through the task set: with the
                // set empty nothing can answer, so waiting would hang.
                return Err(anyhow!(
                    "internal error: the run waits for work no task is doing; \
                     run `ralph run` again to resume"
                ));
            }
            let pause = self.model.wake_at(now());
            let event = tokio::select! {
                Some(ev) = self.activity_rx.recv() => ev,
                Some(ev) = self.attempt_rx.recv() => ev.into(),
                Some(results) = self.chain_rx.recv() => Event::ChainResults(results),
                Some(joined) = self.tasks.join_next_with_id() => match self.joined(joined) {
                    Some(ev) => ev,
                    None => continue,
                },
                _ = sigint.recv() => Event::Signal(OsSignal::Interrupt),
                _ = sigterm.recv() => Event::Signal(OsSignal::Terminate),
                _ = sighup.recv() => {
                    if self.hup_stops {
                        Event::Signal(OsSignal::Hangup)
                    } else {
                        crate::display::sink::hang_up();
                        self.ctx.log.line(
                            "SIGHUP: the terminal is gone; the run goes on, its output here only \
                             (`ralph run --hup stop` stops instead)",
                        );
                        continue;
                    }
                }
                Some((cmd, reply)) = self.steer_rx.recv() => {
                    self.next_request += 1;
                    self.replies.insert(self.next_request, reply);
                    Event::Steer { req: self.next_request, cmd }
                }
                // While waiting out a limit, tick every second so the
                // display counts down.
                _ = sleep_until(pause.map(|p| p.min(Instant::now() + TICK))), if pause.is_some() => Event::Timer,
            };
            self.step(event);
        }
        Ok(())
    }

    /// One event through the transition, with what goes around it.
    fn step(&mut self, event: Event) {
        if let Event::Touched { .. } = &event {
            self.touched_reading = false;
        }
        if !matches!(
            event,
            Event::Activity { .. }
                | Event::Placed { .. }
                | Event::Editing { .. }
                | Event::Touched { .. }
        ) {
            self.read_memory();
            self.read_touched(&event);
        }
        if let Event::AttemptFinished(report) = &event {
            // Its attempt is over: whatever it did to the slot is done.
            self.executor.slot_left(report.slot);
        }
        let step = !matches!(event, Event::Activity { .. } | Event::Placed { .. });
        if step {
            self.sync_tracker(true);
        }
        self.feed(event);
        if step {
            self.sync_tracker(false);
        }
        self.warm_free_slots();
    }

    /// The tracker's side of a step (`run/tracker.rs`): before an event,
    /// a read that came back is taken in and the next asked when due;
    /// after it, what changed is told. Its HTTP is on a thread of its own:
    /// this never waits.
    fn sync_tracker(&mut self, before: bool) {
        let Some(t) = &mut self.tracker else { return };
        let log = |l: &str| self.ctx.log.line(l);
        let changed = if before {
            t.poll(&self.model, &log)
        } else {
            t.tell(&self.model, false, &log)
        };
        if let Some(ev) = changed {
            self.feed(ev);
        }
    }

    /// Wakes the loop from another thread (a tracker's answer is in): a
    /// `Timer` event, which changes nothing but lets the step run.
    pub(crate) fn waker(&self) -> impl Fn() + Send + 'static {
        let tx = self.activity_tx.clone();
        move || {
            let _ = tx.send(Event::Timer);
        }
    }

    /// The memory a new agent could get, for the transition's memory check
    /// (read only when the check is on).
    fn read_memory(&mut self) {
        if self.model.policy.agent_memory_mb > 0 {
            self.model.memory_mb = crate::process::memory::available_mb();
        }
    }

    /// On an event that may free a slot: what each running story's
    /// worktree changed so far, when a ready story has predicted files to
    /// compare it with. The worktree is the one source that holds whatever
    /// the agent did, through any backend and any tool (an edit, a
    /// generator, `sed -i`), where its tool-use events are summaries. Read
    /// in the background and fed back as `Event::Touched`: git work on
    /// every running worktree must not hold up the event it is read for
    /// (a start, a landing), so a choice sees the reading of the event
    /// before it, and the files agents announce (`Event::Editing`) at once.
    fn read_touched(&mut self, event: &Event) {
        let frees_a_slot = matches!(
            event,
            Event::AttemptFinished(_)
                | Event::LandingFinished(_)
                | Event::ChainResults(_)
                | Event::ChainFinished(_)
                | Event::HooksDone
                | Event::Timer
        );
        if self.touched_reading || !frees_a_slot || !self.model.wants_touched() {
            return;
        }
        let running: Vec<(usize, usize)> = self
            .model
            .slots
            .iter()
            .enumerate()
            .filter_map(|(slot, idx)| idx.map(|i| (slot, i)))
            .collect();
        let ids: std::collections::HashMap<usize, String> = running
            .iter()
            .map(|&(_, i)| (i, self.model.id(i).to_string()))
            .collect();
        self.touched_reading = true;
        let (ctx, tx) = (self.ctx.clone(), self.activity_tx.clone());
        tokio::spawn(async move {
            let found = blocking(&ctx, move |c| {
                running
                    .into_iter()
                    .filter_map(|(slot, idx)| {
                        let (_, path) = crate::paths::slot_worktree(&c.root, slot);
                        let branch = crate::project::story_branch(&ids[&idx]);
                        // A slot still being prepared has nothing to say yet.
                        c.git
                            .changed_since(&path, &branch, &c.target)
                            .ok()
                            .flatten()
                            .map(|paths| (idx, paths))
                    })
                    .collect::<Vec<_>>()
            })
            .await;
            let _ = tx.send(Event::Touched {
                found: found.unwrap_or_default(),
            });
        });
    }

    /// The merge queue's chain: open (`run/stream.rs`) when the
    /// transition opened it, else one of rounds (`run/queue.rs`).
    fn start_chain(&mut self, asks: Vec<super::events::LandAsk>) {
        let reqs = self.land_requests(asks);
        let (ctx, control) = (self.ctx.clone(), self.land_control.subscribe());
        let handle = if self.model.chain == Chain::Open {
            let (intake_tx, intake) = mpsc::unbounded_channel();
            self.chain_in = Some(intake_tx);
            let results = self.chain_tx.clone();
            self.tasks.spawn(async move {
                let left = stream::land_stream(&ctx, reqs, intake, results, control).await;
                Event::ChainFinished(left)
            })
        } else {
            self.tasks.spawn(async move {
                let idx: Vec<usize> = reqs.iter().map(|r| r.idx).collect();
                let results = queue::land_chain(&ctx, reqs, control).await;
                Event::ChainFinished(idx.into_iter().zip(results).collect())
            })
        };
        self.owners.insert(handle.id(), Task::Chain);
    }

    /// What the merge queue is given of the stories `asks` names.
    fn land_requests(&self, asks: Vec<super::events::LandAsk>) -> Vec<LandRequest> {
        asks.into_iter()
            .map(|a| {
                let story = &self.model.stories[a.idx];
                LandRequest::new(&self.ctx, a.idx, story, a.attempt, a.gates)
            })
            .collect()
    }

    /// The chain's task ended: its results sent before its end come first,
    /// then its end (a task that died ends it with an error for each of
    /// its stories).
    fn chain_ended(&mut self, result: Result<Event, tokio::task::JoinError>) {
        while let Ok(results) = self.chain_rx.try_recv() {
            self.queued.push_back(Event::ChainResults(results));
        }
        self.chain_in = None;
        let end = result.unwrap_or_else(|e| {
            let results = self.model.landing.iter().map(|l| {
                let why = format!("internal error while landing: {e}");
                (l.idx, LandResult::Error(why))
            });
            Event::ChainFinished(results.collect())
        });
        self.queued.push_back(end);
    }

    /// A task's result, or a failure in its name when it panicked.
    fn joined(&mut self, joined: Result<(Id, Event), tokio::task::JoinError>) -> Option<Event> {
        let (id, result) = match joined {
            Ok((id, ev)) => (id, Ok(ev)),
            Err(e) => (e.id(), Err(e)),
        };
        let task = self.owners.remove(&id);
        Some(match (result, task) {
            (result, Some(Task::Chain)) => {
                self.chain_ended(result);
                return None;
            }
            (Ok(ev), _) => ev,
            (Err(e), Some(Task::Attempt(req))) => {
                let log_rel = self.executor.log_rel(self.model.id(req.idx), req.attempt);
                let verdict = Verdict::Failed {
                    reason: format!("internal error in the attempt: {e}"),
                    kind: ResultKind::Error,
                };
                Event::AttemptFinished(Box::new(AttemptReport::empty(&req, verdict, log_rel)))
            }
            (Err(e), Some(Task::Landing)) => Event::LandingFinished(LandResult::Error(format!(
                "internal error while landing: {e}"
            ))),
            // A hook's task died: its hook's own failure is only logged too.
            (Err(e), Some(Task::Hooks)) => {
                self.ctx.log.line(&format!("post hooks: {e}"));
                Event::HooksDone
            }
            // A judge that died gave no pick: the ranking decides.
            (Err(e), Some(Task::Judge(idx, attempt))) => {
                Event::Judged(super::events::JudgeReport {
                    idx,
                    attempt,
                    pick: None,
                    reason: format!("internal error in the judge: {e}"),
                    usage: Default::default(),
                    cost_usd: 0.0,
                    cost_unknown: true,
                })
            }
            // Every task is registered as it is spawned.
            (Err(_), None) => return None,
        })
    }

    /// Hands `event` to the transition and carries out its actions; an
    /// action that fails becomes the next event.
    fn feed(&mut self, event: Event) {
        let mut queue = VecDeque::from([event]);
        while let Some(ev) = queue.pop_front() {
            for action in handle(&mut self.model, ev, now()) {
                if let Some(next) = self.execute(action) {
                    queue.push_back(next);
                }
            }
            self.settle();
        }
        if let Some(live) = &self.live {
            live.set_statuses(self.model.stories.len(), |i| {
                self.model.sched().nodes[i].word()
            });
        }
        while self.notes.try_join_next().is_some() {}
    }

    /// Sends the notifications the step's records call for, with the
    /// run's figures after it.
    fn settle(&mut self) {
        for notice in std::mem::take(&mut self.notices) {
            let figures = Figures::of(&self.model);
            let run_id = self.ctx.run_id().to_string();
            let (name, cmd, env) = notify::for_notice(&self.ctx, &notice, &figures, &run_id);
            if cmd.trim().is_empty() {
                continue;
            }
            let cmd = cmd.to_string();
            self.ctx.log.line(&format!("{name}: {notice:?}"));
            let ctx = self.ctx.clone();
            self.notes
                .spawn(async move { notify::notify(ctx, name, cmd, env, run_id).await });
        }
    }

    fn execute(&mut self, action: Action) -> Option<Event> {
        let root = &self.ctx.root;
        match action {
            Action::Save => {
                if let Err(e) = store::save_state(root, &self.model.state) {
                    return Some(Event::SaveFailed(format!("{e:#}")));
                }
            }
            Action::Say(m) => self.reporter.say(&m),
            Action::Progress(line) => progress(&self.ctx, &line),
            Action::Log(line) => self.ctx.log.line(&line),
            Action::Totals(t) => self.reporter.totals(&t),
            Action::StoryStarted { id, title, model } => {
                self.reporter.story_started(&id, &title, model.as_deref())
            }
            Action::StoryFinished { id } => self.reporter.story_finished(&id),
            Action::Activity {
                id,
                candidate,
                text,
            } => {
                if let Some(live) = &self.live {
                    live.activity(&id, &text);
                }
                self.reporter.activity(&id, candidate, &text);
            }
            Action::Placed {
                id,
                candidate,
                node,
            } => self.reporter.placed(&id, candidate, &node),
            Action::Candidates { id, rows } => self.reporter.candidates(&id, &rows),
            Action::RecordLearnings { id, learnings } => {
                if let Ok(added) = learnings::record(root, &id, &learnings) {
                    for l in added {
                        progress(&self.ctx, &format!("[LEARN] {l}"));
                    }
                }
            }
            Action::StartAttempt(req) => {
                let (control, control_rx) = watch::channel(Control::Run);
                self.controls.insert(req.slot, control);
                let story = self.model.stories[req.idx].clone();
                let fut =
                    self.executor
                        .run(req.clone(), story, control_rx, self.attempt_tx.clone());
                let handle = self
                    .tasks
                    .spawn(async move { Event::AttemptFinished(Box::new(fut.await)) });
                self.owners
                    .insert(handle.id(), Task::Attempt(Box::new(req)));
            }
            Action::Land {
                idx,
                attempt,
                approved,
                gates,
                plan,
            } => {
                let story = &self.model.stories[idx];
                let mut req = LandRequest::new(&self.ctx, idx, story, attempt, gates);
                req.approved = approved;
                req.plan = plan;
                let (ctx, control) = (self.ctx.clone(), self.land_control.subscribe());
                let handle = self.tasks.spawn(async move {
                    Event::LandingFinished(land::land(&ctx, &req, control).await)
                });
                self.owners.insert(handle.id(), Task::Landing);
            }
            Action::LandChain(asks) => self.start_chain(asks),
            Action::ChainAdd(asks) => {
                // Sent to a chain that has ended, they are part of its end
                // (`Event::ChainFinished`: back to the queue).
                for req in self.land_requests(asks) {
                    if let Some(intake) = &self.chain_in {
                        let _ = intake.send(req);
                    }
                }
            }
            Action::ChainClose => self.chain_in = None,
            // Off the merge queue: a slow hook must not hold other landings.
            Action::PostHooks {
                id,
                iteration,
                result,
            } => {
                let ctx = self.ctx.clone();
                let handle = self.tasks.spawn(async move {
                    crate::executor::post_hooks(&ctx, &id, result, iteration, None).await;
                    Event::HooksDone
                });
                self.owners.insert(handle.id(), Task::Hooks);
            }
            Action::Record(ev) => {
                self.notices.extend(self.recorder.notice(&ev));
                // The live view sees it through the run log's observer.
                self.ctx.record(ev);
            }
            Action::Reply { req, reply } => {
                if let Some(to) = self.replies.remove(&req) {
                    let _ = to.send(reply);
                }
            }
            Action::AdoptCandidate { id, k } => self.adopt_candidate(&id, k),
            Action::Judge(ask) => {
                let story = self.model.stories[ask.idx].clone();
                let (ctx, control) = (self.ctx.clone(), self.land_control.subscribe());
                let owner = Task::Judge(ask.idx, ask.attempt);
                let handle = self.tasks.spawn(async move {
                    Event::Judged(super::judge::run_judge(&ctx, &story, &ask, control).await)
                });
                self.owners.insert(handle.id(), owner);
            }
            Action::KeepCandidate { id, attempt, k } => {
                let branch = crate::project::story_branch(&crate::project::candidate_key(&id, k));
                let kept = crate::project::candidate_ref(&id, attempt, k);
                match self
                    .ctx
                    .git
                    .keep_candidate(&branch, &self.ctx.target, &kept)
                {
                    Ok(true) => self.ctx.log.line(&format!(
                        "story {id} attempt {attempt}: candidate {k}'s work kept at {kept}"
                    )),
                    Ok(false) => {}
                    Err(e) => self.ctx.log.line(&format!(
                        "story {id} attempt {attempt}: candidate {k}'s work could not be kept \
                         at {kept} ({e}); it stays on {branch}"
                    )),
                }
            }
            Action::StopAttempt { slot } => {
                if let Some(c) = self.controls.get(&slot) {
                    let _ = c.send(Control::Stop);
                }
            }
            Action::Control(how) => {
                for c in self.controls.values() {
                    let _ = c.send(how);
                }
                let _ = self.land_control.send(how);
            }
        }
        None
    }
}

impl<E: Executor> Dispatcher<E> {
    /// The story branch takes racing candidate `k`'s work (issue 36), which
    /// the merge queue then lands as the story's. Should that fail, the
    /// landing finds the story branch without it and fails: the race goes on.
    fn adopt_candidate(&self, id: &str, k: u32) {
        use crate::project::{self, KeptRef};
        let from = project::story_branch(&project::candidate_key(id, k));
        let branch = project::story_branch(id);
        // Commits on the story branch no ref keeps (an earlier run's) are
        // kept before it moves, as a slot's preparation keeps them.
        let git = &self.ctx.git;
        let unsaved = git
            .branch_tip(&self.ctx.target)
            .ok()
            .flatten()
            .is_some_and(|tip| {
                git.commits_ahead(&branch, &tip).unwrap_or(0) > 0
                    && !git
                        .tip_saved_under(&branch, project::KEPT_REFS)
                        .unwrap_or(true)
            });
        if unsaved {
            let stamp = crate::timefmt::now_secs().max(0) as u32;
            let kept = project::kept_ref(KeptRef::Saved, id, stamp);
            if let Err(e) = git.save_ref(&branch, &kept) {
                self.ctx.log.line(&format!(
                    "story {id}: its branch's commits could not be kept ({e}); candidate {k}'s \
                     work does not take its place"
                ));
                return;
            }
        }
        let to = format!("refs/heads/{branch}");
        if let Err(e) = self.ctx.git.save_ref(&from, &to) {
            self.ctx.log.line(&format!(
                "story {id}: candidate {k}'s work could not become the story branch's ({e})"
            ));
        }
    }

    /// Free slots made ready for their next story while agents run, or
    /// removed once no story waits to start (issue 21): the executor's,
    /// when it has slots on this machine. With one job nothing runs beside
    /// the landing that frees the slot, so there is nothing to hide it
    /// behind.
    fn warm_free_slots(&mut self) {
        let m = &self.model;
        if m.policy.jobs < 2 || m.stopping() || m.fatal.is_some() || m.limit_reached() {
            return;
        }
        let retire = m.count(StoryState::Pending) == 0;
        let free: Vec<usize> = (0..m.slots.len())
            .filter(|&slot| m.slots[slot].is_none())
            .collect();
        self.executor.warm(&free, retire);
    }
}

/// One steering connection: a request line in, the run's reply line out.
async fn steer_connection(
    stream: tokio::net::UnixStream,
    tx: mpsc::UnboundedSender<(Command, oneshot::Sender<Reply>)>,
) -> std::io::Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let (read, mut write) = stream.into_split();
    // A request is a short line; more is not one.
    let mut lines = BufReader::new(read.take(64 * 1024));
    let mut line = String::new();
    lines.read_line(&mut line).await?;
    let reply = match Command::parse(&line) {
        Err(refused) => refused,
        Ok(cmd) => {
            let (to, answer) = oneshot::channel();
            if tx.send((cmd, to)).is_err() {
                return Ok(());
            }
            match answer.await {
                Ok(r) => r,
                // The run ended before it came to the request.
                Err(_) => return Ok(()),
            }
        }
    };
    let mut out = reply.to_line();
    out.push('\n');
    write.write_all(out.as_bytes()).await?;
    write.shutdown().await
}

fn progress(ctx: &RunContext, line: &str) {
    if let Err(e) = store::append_progress(&ctx.root, line) {
        ctx.log.line(&format!("cannot append to progress.txt: {e}"));
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at.into()).await;
    }
}
