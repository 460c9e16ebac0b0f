//! The merge queue's open chain (issue 34 item 1, Zuul's dependent
//! pipeline; docs/merge-queue.md): stories join it as they finish, each
//! merged on the one before it (M1 = tip + S1, M2 = M1 + S2, ...) and
//! validated at once in a worktree of its own, up to the room for
//! validations; there are no rounds. The target moves, with one
//! compare-and-swap, to the longest prefix of the chain whose merges all
//! passed, as soon as it passed. A story whose merge fails validation goes
//! back to its agent with the output; the merges built on it are stopped
//! and made again where they would have gone, nothing charged. A conflict
//! on the target's tip or a gate's finding takes a story out at its merge;
//! a conflict with merges not landed yet holds it until they left the
//! chain (landed, blamed or made again), then it is merged again.
//!
//! The invariant is `queue.rs`'s: the target only ever moves to a merge
//! whose exact tree passed (or to the same merges made again on the user's
//! own commits touching none of their paths), under the landing intent; a
//! `kill -9` leaves the chain's stories `landing` in the state and the
//! next run lands them.
//!
//! Results go to the run as they are known (`Event::ChainResults`); the
//! chain ends once the run closes its intake and nothing is left in it, or
//! at once when it cannot go on (what it held goes back to the queue).

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::gitops::Oid;
use crate::process::Control;

use super::context::{blocking, RunContext};
use super::events::LandResult;
use super::land::{self, LandRequest};
use super::queue::{self, Cas, Link, Merged};
use super::transition::batch;

/// One merge of the chain: request `req`'s story on `base`.
struct Entry {
    req: usize,
    commit: Oid,
    base: Oid,
    check: Check,
}

enum Check {
    /// Its validation, numbered (the end of one stopped is thrown away),
    /// and how to stop it.
    Running {
        run: u64,
        stop: watch::Sender<Control>,
    },
    Passed,
    /// It did not pass: whose fault it is waits until every merge before
    /// it passed (a merge holds the stories before it too).
    Failed(LandResult),
}

/// A validation's end, as its task gives it.
struct Ended {
    run: u64,
    slot: usize,
    stories: Vec<String>,
    end: super::candidate::Run,
}

/// Whether the chain goes on.
#[derive(PartialEq, Eq)]
enum Flow {
    Go,
    End,
}

type Results = Vec<(usize, LandResult)>;

struct Stream<'a> {
    ctx: &'a Arc<RunContext>,
    reqs: Vec<LandRequest>,
    /// Requests not merged yet, in order.
    pending: VecDeque<usize>,
    /// Requests that conflicted with merges of the chain not landed yet,
    /// each with those merges' requests: merged again once none of them
    /// is in the chain any more (landed, blamed or made again).
    held: Vec<(usize, Vec<usize>)>,
    chain: Vec<Entry>,
    tasks: JoinSet<Ended>,
    /// Validation worktrees in use (a stopped validation's until it ends).
    slots: Vec<bool>,
    room: usize,
    runs: u64,
    /// Compare-and-swaps lost to a moving target in a row.
    raced: usize,
    out: mpsc::UnboundedSender<Results>,
    control: watch::Receiver<Control>,
}

/// Lands `first` and what comes through `intake` as one open chain,
/// sending each story's result on `out` as it is known; returns what is
/// left to say when it ends (a story with no result goes back to the
/// queue).
pub(crate) async fn land_stream(
    ctx: &Arc<RunContext>,
    first: Vec<LandRequest>,
    mut intake: mpsc::UnboundedReceiver<LandRequest>,
    out: mpsc::UnboundedSender<Results>,
    control: watch::Receiver<Control>,
) -> Results {
    // Read now: the agents running hold memory a validation cannot have.
    let room = batch::room(
        ctx.config.landing.max_validations,
        queue::machine(&ctx.config),
    );
    let mut s = Stream {
        ctx,
        pending: (0..first.len()).collect(),
        held: Vec::new(),
        reqs: first,
        chain: Vec::new(),
        tasks: JoinSet::new(),
        slots: Vec::new(),
        room: room.max(1),
        runs: 0,
        raced: 0,
        out,
        control,
    };
    let mut open = true;
    // Kept across waits: it remembers which change it has seen.
    let mut control = s.control.clone();
    loop {
        if *s.control.borrow() != Control::Run {
            return s.stopped().await;
        }
        // Whatever arrived while the chain was busy (a compare-and-swap, a
        // merge) is merged now, so one compare-and-swap lands it all.
        while open {
            match intake.try_recv() {
                Ok(req) => s.take(req),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => open = false,
            }
        }
        if s.land_prefix().await == Flow::End {
            return s.ended().await;
        }
        s.blame_front().await;
        s.release_held();
        if s.fill().await == Flow::End {
            return s.ended().await;
        }
        if matches!(
            s.chain.first(),
            Some(Entry {
                check: Check::Passed,
                ..
            })
        ) {
            continue;
        }
        // (Nothing is held by an empty chain: `release_held` ran.)
        if !open && s.chain.is_empty() && s.pending.is_empty() {
            return s.ended().await;
        }
        tokio::select! {
            Some(done) = s.tasks.join_next(), if !s.tasks.is_empty() => match done {
                Ok(ended) => s.verdict(ended).await,
                Err(e) => {
                    // A validation's task died (a bug): the chain cannot
                    // tell what passed. Its front story's landing fails,
                    // which halts the run, as the rounds do; the rest goes
                    // back to the queue. Requeued alone, the same chain
                    // would be opened and die again, forever.
                    let why = format!("internal error while validating: {e}");
                    ctx.log.line(&why);
                    let front = s.chain.first().map(|e| s.reqs[e.req].idx);
                    let mut results = s.ended().await;
                    results.extend(front.map(|idx| (idx, LandResult::Error(why))));
                    return results;
                }
            },
            req = intake.recv(), if open => match req {
                Some(req) => s.take(req),
                None => open = false,
            },
            Ok(()) = control.changed() => {
                let now = *control.borrow();
                for e in &s.chain {
                    if let Check::Running { stop, .. } = &e.check {
                        let _ = stop.send(now);
                    }
                }
            }
            // Nothing can come any more (the run's control is gone).
            else => return s.ended().await,
        }
    }
}

impl Stream<'_> {
    /// A story for the chain: merged on its top in its turn.
    fn take(&mut self, req: LandRequest) {
        self.pending.push_back(self.reqs.len());
        self.reqs.push(req);
    }

    fn say(&self, results: Results) {
        if !results.is_empty() {
            let _ = self.out.send(results);
        }
    }

    /// Moves the target to the longest passed prefix of the chain, when
    /// there is one.
    async fn land_prefix(&mut self) -> Flow {
        let n = self
            .chain
            .iter()
            .take_while(|e| matches!(e.check, Check::Passed))
            .count();
        if n == 0 {
            return Flow::Go;
        }
        let links: Vec<Link> = self.chain[..n]
            .iter()
            .map(|e| Link {
                pos: e.req,
                commit: e.commit.clone(),
                base: e.base.clone(),
            })
            .collect();
        match queue::cas(self.ctx, &self.reqs, &links, &self.control).await {
            Cas::Landed(commits) => {
                self.raced = 0;
                let mut said = Vec::new();
                let mut landed = Vec::new();
                let top = commits.last().map(|(_, c)| c.clone());
                for (link, (base, commit)) in links.iter().zip(commits) {
                    let req = &self.reqs[link.pos];
                    self.ctx
                        .landed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((req.id.clone(), base, commit.clone()));
                    said.push((req.idx, LandResult::Landed { commit }));
                    landed.push(req.clone());
                }
                land::after_chain(self.ctx, landed).await;
                self.say(said);
                self.chain.drain(..n);
                // Made again on the user's commits: what is behind was
                // built on the merges that did not land.
                if top.as_ref() != links.last().map(|l| &l.commit) {
                    self.requeue_from(0);
                }
                Flow::Go
            }
            Cas::Moved => {
                self.raced += 1;
                self.requeue_from(0);
                if self.raced >= land::ROUNDS {
                    let lost = self.pending.drain(..).map(|p| self.reqs[p].idx);
                    let lost = lost.map(|idx| (idx, LandResult::Raced)).collect();
                    self.say(lost);
                    return Flow::End;
                }
                Flow::Go
            }
            Cas::Stop(result) => {
                self.say(vec![(self.reqs[links[0].pos].idx, result)]);
                Flow::End
            }
        }
    }

    /// A merge that did not pass at the front of the chain (all before it
    /// landed): its story's result, charged to it (`land::blamed`).
    async fn blame_front(&mut self) {
        if !matches!(
            self.chain.first(),
            Some(Entry {
                check: Check::Failed(_),
                ..
            })
        ) {
            return;
        }
        let e = self.chain.remove(0);
        let Check::Failed(failure) = e.check else {
            return;
        };
        let req = self.reqs[e.req].clone();
        let result = land::blamed(self.ctx, &req, failure).await;
        self.say(vec![(req.idx, result)]);
    }

    /// Merges what waits on the chain's top and starts its validations,
    /// while there is room for them (never on a merge that did not pass).
    async fn fill(&mut self) -> Flow {
        if matches!(
            self.chain.last(),
            Some(Entry {
                check: Check::Failed(_),
                ..
            })
        ) {
            return Flow::Go;
        }
        while self.tasks.len() < self.room {
            let Some(p) = self.pending.pop_front() else {
                break;
            };
            let base = match self.chain.last() {
                Some(e) => e.commit.clone(),
                None => match self.tip().await {
                    Ok(tip) => tip,
                    Err(result) => {
                        self.say(vec![(self.reqs[p].idx, result)]);
                        return Flow::End;
                    }
                },
            };
            match queue::merge_one(self.ctx, &self.reqs[p], &base).await {
                // On merges not landed yet, which may never land: a fix-up
                // started now would begin from code without them.
                Merged::Conflict(_) if !self.chain.is_empty() => {
                    let below: Vec<usize> = self.chain.iter().map(|e| e.req).collect();
                    self.ctx.log.line(&format!(
                        "{} conflicts with the chain below it ({}): held until those land or leave",
                        self.reqs[p].id,
                        below
                            .iter()
                            .map(|&r| self.reqs[r].id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                    self.held.push((p, below));
                }
                Merged::Link(commit) => {
                    self.chain.push(Entry {
                        req: p,
                        commit,
                        base,
                        check: Check::Passed,
                    });
                    if !self.ctx.required_validation.is_empty() {
                        self.start(self.chain.len() - 1);
                    }
                }
                Merged::Conflict(paths) => {
                    let result = queue::conflicted(self.ctx, &self.reqs[p], paths).await;
                    self.say(vec![(self.reqs[p].idx, result)]);
                }
                Merged::Left(result) => self.say(vec![(self.reqs[p].idx, result)]),
                Merged::Broken(result) => {
                    self.say(vec![(self.reqs[p].idx, result)]);
                    return Flow::End;
                }
            }
        }
        Flow::Go
    }

    /// Held requests whose merges below have all left the chain go back to
    /// the front of what waits, in the order they came: merged again on
    /// whatever is then the top (on the target's tip, a conflict is theirs).
    fn release_held(&mut self) {
        let in_chain: Vec<usize> = self.chain.iter().map(|e| e.req).collect();
        let (free, still): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(_, below)| below.iter().all(|r| !in_chain.contains(r)));
        self.held = still;
        for (p, _) in free.into_iter().rev() {
            self.pending.push_front(p);
        }
    }

    /// The target's tip, which an empty chain is built on.
    async fn tip(&self) -> Result<Oid, LandResult> {
        match blocking(self.ctx, |c| c.git.branch_tip(&c.target)).await {
            Ok(Ok(Some(tip))) => Ok(tip),
            Ok(Ok(None)) => Err(LandResult::Error("the target branch is gone".to_string())),
            Ok(Err(e)) => Err(LandResult::Error(e.to_string())),
            Err(e) => Err(LandResult::Error(e)),
        }
    }

    /// Starts the validation of the chain's merge `i`, in a free worktree.
    fn start(&mut self, i: usize) {
        let slot = match self.slots.iter().position(|used| !used) {
            Some(k) => k,
            None => {
                self.slots.push(false);
                self.slots.len() - 1
            }
        };
        self.slots[slot] = true;
        self.runs += 1;
        let run = self.runs;
        let (stop, rx) = watch::channel(*self.control.borrow());
        let e = &self.chain[i];
        let stories: Vec<String> = self.chain[..=i]
            .iter()
            .map(|e| self.reqs[e.req].id.clone())
            .collect();
        let (ctx, req) = (self.ctx.clone(), self.reqs[e.req].clone());
        let (commit, base) = (e.commit.clone(), e.base.clone());
        self.tasks.spawn(async move {
            let c = (&commit, &base);
            let id = (req.id.as_str(), req.attempt);
            let end =
                super::candidate::validate_candidate(&ctx, id, c, stories.clone(), rx, slot).await;
            Ended {
                run,
                slot,
                stories,
                end,
            }
        });
        self.chain[i].check = Check::Running { run, stop };
    }

    /// A validation ended: its merge passed, or it did not and what was
    /// built on it is stopped, to be made again once it is known whose
    /// fault it was (`blame_front`).
    async fn verdict(&mut self, ended: Ended) {
        self.slots[ended.slot] = false;
        let at = self
            .chain
            .iter()
            .position(|e| matches!(&e.check, Check::Running { run, .. } if *run == ended.run));
        let word = match (&at, &ended.end.failed) {
            (None, _) => "thrown",
            (Some(_), None) => "passed",
            (Some(_), Some(LandResult::ValidationFailed { .. })) => "failed",
            (Some(_), Some(_)) => "stopped",
        };
        let Ended { stories, end, .. } = ended;
        super::candidate::validate_end(self.ctx, end.tree, stories, word, end.started, end.node);
        let Some(i) = at else { return };
        let failure = match end.failed {
            None => {
                self.chain[i].check = Check::Passed;
                return;
            }
            // Stopped by the run: the stop is said for the whole chain.
            Some(_) if *self.control.borrow() != Control::Run => return,
            Some(f) => f,
        };
        self.chain[i].check = Check::Failed(failure);
        self.requeue_from(i + 1);
    }

    /// The chain's merges from `keep` on are stopped and go back, in
    /// order, to the front of what waits: made again on whatever is then
    /// below them.
    fn requeue_from(&mut self, keep: usize) {
        if keep >= self.chain.len() {
            return;
        }
        for e in self.chain.drain(keep..).rev() {
            if let Check::Running { stop, .. } = &e.check {
                let _ = stop.send(Control::Kill);
            }
            self.pending.push_front(e.req);
        }
        self.release_held();
    }

    /// Waits for every validation still running (stopped ones included),
    /// recording each end.
    async fn wait_all(&mut self) {
        while let Some(done) = self.tasks.join_next().await {
            if let Ok(ended) = done {
                self.verdict(ended).await;
            }
        }
    }

    /// The run stops: every validation is stopped with it and whatever
    /// the chain holds stays `landing` for the next run.
    async fn stopped(mut self) -> Results {
        let now = *self.control.borrow();
        for e in &self.chain {
            if let Check::Running { stop, .. } = &e.check {
                let _ = stop.send(now);
            }
        }
        self.wait_all().await;
        let held = self
            .chain
            .iter()
            .map(|e| e.req)
            .chain(self.pending.iter().copied())
            .chain(self.held.iter().map(|(p, _)| *p));
        held.map(|p| (self.reqs[p].idx, LandResult::Interrupted))
            .collect()
    }

    /// The chain cannot go on: its validations are stopped and what it
    /// holds goes back to the queue (no result: `LandResult::Behind`).
    async fn ended(mut self) -> Results {
        self.requeue_from(0);
        self.wait_all().await;
        Vec::new()
    }
}
