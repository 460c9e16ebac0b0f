//! One attempt's job (issue 23), from the base pushed to the result
//! fetched, in phases: `plan` (the base, the relay refs, a session's node),
//! `submit`, `watch` (the small loop feeding `JobWatch`, which decides),
//! then the verdict `judge` gave: the worker's report collected
//! (`collect`), or a stop, a timeout or a lost job said as such.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::agent::{FaultKind, Verdict};
use crate::backlog::Story;
use crate::control::Control;
use crate::executor::AttemptEnv;
use crate::executor::{AttemptEvent, AttemptReport, AttemptRequest};
use crate::gitops::{relay, Oid};
use crate::project::{self, KeptRef};

use super::board::Board;
use super::watch::{judge, Ended, JobWatch, Judgement, Limits, Read, Step, StopWhy};
use super::{
    call, git, git_line, job_spec, lock, node_resource, shell, split_node, stop_wait,
    submission_id, Cluster, EntryFn, Orphan, Relayed, ACTIVITY_EVERY, DEAD_MAN_SLACK, PIN,
    PIN_WAIT, STOP_KEEP,
};
use crate::exec::worker::{self, WorkerReport, WorkerSpec};

/// One attempt's job, from the base pushed to the result fetched.
pub(super) struct Job {
    pub(super) ctx: Arc<AttemptEnv>,
    pub(super) cluster: Arc<Cluster>,
    pub(super) board: Arc<Board>,
    pub(super) orphan: Option<Orphan>,
    pub(super) relay_url: String,
    pub(super) subdir: String,
    /// The relay as git names it here (a remote, or its URL).
    pub(super) remote: String,
    pub(super) resources: Vec<(String, f64)>,
    pub(super) entry: EntryFn,
    pub(super) package: Option<String>,
    /// The display's channel: the agent's latest activity, from the job's log.
    pub(super) activity: mpsc::UnboundedSender<AttemptEvent>,
    pub(super) relayed: Arc<Relayed>,
}

/// An attempt's job as `plan` made it ready.
struct Plan {
    /// What names its job, relay refs and branch: the story, or a racing
    /// candidate's key (`project::candidate_key`, issue 36).
    id: String,
    /// What its job's name and git names are made of: the story's ID, or
    /// a racing candidate's key (`project::attempt_key`, issue 36).
    key: String,
    /// The attempt number naming its job and relay refs (an adopted job's own).
    n: u32,
    sid: String,
    /// A job of a crashed run this attempt took over.
    adopted: bool,
    refs: relay::RelayRefs,
    log_path: PathBuf,
    log_rel: String,
    base: Oid,
    /// Whether a fix-up's work went to the relay (its ref to clear).
    work_sent: bool,
    /// Whether the tracker's snapshot went to the relay (its ref to clear).
    tracker_sent: bool,
    /// The push of the base, running while Ray starts the job.
    base_push: Option<JoinHandle<Result<(), String>>>,
    /// Pinned to the node holding the session it resumes.
    pinned: bool,
    resources: Vec<(String, f64)>,
    resume: Option<String>,
    prefer_slot: Option<usize>,
}

/// How the job went, for the report's phase and latency line.
struct Times {
    phases: worker::Phases,
    submitted_ms: u64,
    seen_ms: u64,
}

fn fault(req: &AttemptRequest, log_rel: &str, reason: String) -> AttemptReport {
    AttemptReport::empty(
        req,
        Verdict::Fault {
            reason,
            kind: FaultKind::Transient,
        },
        log_rel.to_string(),
    )
}

impl Job {
    pub(super) async fn run(
        self,
        req: AttemptRequest,
        story: Story,
        control: watch::Receiver<Control>,
    ) -> AttemptReport {
        let mut phases = worker::Phases::new();
        let mut plan = match self.plan(&req, &story).await {
            Ok(p) => p,
            Err(r) => return *r,
        };
        let submitted_at = match self.submit(&req, &mut plan).await {
            Ok(t) => t,
            Err(r) => return *r,
        };
        if !plan.adopted {
            phases.mark("submit and push base");
        }
        let submitted_ms = worker::epoch_ms();
        let (watch, ended) = self.watch(&req, &plan, submitted_at, control).await;
        let seen_ms = worker::epoch_ms();
        phases.mark("job");
        let sid = plan.sid.clone();
        let logs = call(&self.cluster, move |c| c.logs(&sid))
            .await
            .unwrap_or_default();
        phases.mark("logs");
        // A report that does not read is no report (the job is lost), its
        // error said with the verdict.
        let (wire, unreadable) = match worker::report_in(&logs) {
            Some(Ok(w)) => (Some(w), None),
            Some(Err(e)) => (None, Some(e)),
            None => (None, None),
        };
        let read = match &wire {
            Some(w) => Read::Report {
                done: matches!(w.report.verdict, Verdict::Done),
            },
            None => Read::NoReport,
        };
        let judgement = judge(&watch, read);
        let times = Times {
            phases,
            submitted_ms,
            seen_ms,
        };
        match (judgement, wire) {
            (Judgement::Report | Judgement::ReportInterrupted, Some(wire)) => {
                let interrupted = judgement == Judgement::ReportInterrupted;
                self.collected(&req, &plan, wire, times, interrupted).await
            }
            (judgement, _) => {
                let mut r = self.unreported(&req, &plan, judgement, &ended).await;
                if let (Some(e), Verdict::Fault { reason, .. }) = (unreadable, &mut r.verdict) {
                    *reason = format!("{reason}; {e}");
                }
                r
            }
        }
    }

    /// The attempt's job made ready: its name (an adopted job's own), its
    /// base (pushed while the job is submitted), and, for a fix-up that
    /// resumes a session, the node holding it.
    async fn plan(&self, req: &AttemptRequest, story: &Story) -> Result<Plan, Box<AttemptReport>> {
        let ctx = &self.ctx;
        let id = story.id.clone();
        let key = project::attempt_key(&id, req.candidate);
        let log_path = crate::paths::log_of(&ctx.root, &id, req.attempt, req.candidate);
        let log_rel = log_path
            .strip_prefix(&ctx.root)
            .unwrap_or(&log_path)
            .display()
            .to_string();
        let failed = |why: String| Box::new(fault(req, &log_rel, why));
        // A job of a crashed run for this story: its attempt number names
        // its relay refs; this attempt takes over its result.
        let (n, sid, adopted) = match &self.orphan {
            Some(o) => (o.attempt, o.submission_id.clone(), true),
            None => (
                req.attempt,
                submission_id(&ctx.tag, &key, req.attempt),
                false,
            ),
        };
        let refs = relay::relay_refs(&ctx.tag, &key, n);
        let mut plan = Plan {
            id,
            key,
            n,
            sid,
            adopted,
            refs,
            log_path: log_path.clone(),
            log_rel: log_rel.clone(),
            base: Oid::default(),
            work_sent: false,
            tracker_sent: false,
            base_push: None,
            pinned: false,
            resources: self.resources.clone(),
            resume: req.resume.clone(),
            prefer_slot: None,
        };
        if adopted {
            ctx.log.line(&format!(
                "story {} attempt {}: re-attaching to job {} of an earlier run",
                plan.id, req.attempt, plan.sid
            ));
            plan.base = match ctx.git.ref_target(&format!("refs/heads/{}", ctx.target)) {
                Ok(Some(b)) => b,
                _ => return Err(failed(format!("target {} vanished", ctx.target))),
            };
            return Ok(plan);
        }
        plan.base = match ctx.git.branch_tip(&ctx.target) {
            Ok(Some(b)) => b,
            Ok(None) => return Err(failed(format!("target {} vanished", ctx.target))),
            Err(e) => return Err(failed(e.to_string())),
        };
        // The push of the base runs while Ray starts the job (a second or
        // more); the worker waits for its base ref to appear.
        let mut push = vec![
            "push".to_string(),
            "--quiet".into(),
            "--force".into(),
            self.remote.clone(),
            format!("{}:{}", plan.base, plan.refs.base),
        ];
        if let Some(f) = req.note.as_ref().and_then(|n| n.fixup.as_ref()) {
            if req.kind == crate::state::AttemptKind::Fixup {
                push.push(format!("{}:{}", f.work, plan.refs.work));
                plan.work_sent = true;
            }
        }
        let mut line = git_line(ctx, &push);
        // A backlog kept in an issue tracker: the node reads this run's
        // snapshot of it (a blob on the relay), never the tracker.
        let snapshot = crate::paths::tracker_snapshot(&ctx.root);
        if snapshot.exists() {
            let blob = [
                "hash-object".to_string(),
                "-w".into(),
                snapshot.display().to_string(),
            ];
            let q = crate::prompt::shell_quote;
            line.push_str(&format!(
                " \"$({})\":{}",
                git_line(ctx, &blob),
                q(&plan.refs.tracker)
            ));
            plan.tracker_sent = true;
        }
        let ctx2 = ctx.clone();
        plan.base_push = Some(tokio::spawn(async move { shell(&ctx2, line).await }));
        if let Some(session) = &req.resume {
            self.pin(req, session, &mut plan).await;
        }
        Ok(plan)
    }

    /// A fix-up that resumes a session runs on the node holding it, in the
    /// same worker slot (a session names its worktree's paths); with that
    /// node gone (or never known) it starts a fresh session.
    async fn pin(&self, req: &AttemptRequest, session: &str, plan: &mut Plan) {
        let on = req.resume_on.clone().unwrap_or_default();
        let (name, slot) = split_node(&on);
        let res = node_resource(name);
        let res2 = res.clone();
        let alive = !name.is_empty()
            && call(&self.cluster, move |c| c.node_offers(&res2))
                .await
                .unwrap_or(false);
        let (id, n) = (&plan.id, plan.n);
        if alive {
            plan.resources.retain(|(k, _)| *k != res);
            plan.resources.push((res, PIN));
            plan.prefer_slot = slot;
            plan.pinned = true;
            self.ctx.log.line(&format!(
                "story {id} attempt {n}: resuming session {session} on node {on}"
            ));
        } else {
            self.ctx.log.line(&format!(
                "story {id} attempt {n}: no live node offers {res} (session {session} was \
                 on {}): the fix-up starts a fresh session",
                if on.is_empty() {
                    "an unknown node"
                } else {
                    on.as_str()
                }
            ));
            plan.resume = None;
        }
    }

    /// Submits the job (an adopted one runs already) and waits for its
    /// base's push; when it was submitted.
    async fn submit(
        &self,
        req: &AttemptRequest,
        plan: &mut Plan,
    ) -> Result<Instant, Box<AttemptReport>> {
        if plan.adopted {
            return Ok(Instant::now());
        }
        let ctx = &self.ctx;
        let spec = WorkerSpec {
            version: worker::version().to_string(),
            relay_url: self.relay_url.clone(),
            tag: ctx.tag.clone(),
            subdir: self.subdir.clone(),
            target: ctx.target.clone(),
            id: plan.id.clone(),
            attempt: plan.n,
            iteration: req.iteration,
            kind: req.kind,
            note: req.note.clone(),
            resume: plan.resume.clone(),
            agent: req.agent.name().to_string(),
            model: req.model.clone(),
            postmortem_model: req.postmortem_model.clone(),
            timeout_secs: ctx.timeout.as_secs(),
            base: plan.base.clone(),
            prefer_slot: plan.prefer_slot,
            tracker: plan.tracker_sent,
            candidate: req.candidate,
        };
        let job = job_spec(
            &plan.sid,
            self.entry.line(&spec),
            &plan.resources,
            self.package.as_deref(),
            stop_wait(ctx),
            &ctx.tag,
            &plan.key,
            plan.n,
        );
        let sid = plan.sid.clone();
        let submitted = call(&self.cluster, move |c| match c.submit(&job) {
            Ok(()) => Ok(()),
            // The same name twice: a job this attempt already has (a
            // retry of the call): attach to it.
            Err(e) => match c.info(&sid)? {
                Some(_) => Ok(()),
                None => Err(e),
            },
        })
        .await;
        let at = Instant::now();
        let pushed = match plan.base_push.take() {
            Some(t) => t
                .await
                .unwrap_or_else(|e| Err(format!("internal error in a push: {e}"))),
            None => Ok(()),
        };
        let sid = plan.sid.clone();
        if let Err(e) = submitted {
            return Err(Box::new(fault(
                req,
                &plan.log_rel,
                format!("Ray refused job {sid}: {e}"),
            )));
        }
        if let Err(e) = pushed {
            // The job would wait for a base that never comes.
            let sid2 = sid.clone();
            let _ = call(&self.cluster, move |c| {
                c.stop(&sid2)?;
                c.delete(&sid2)
            })
            .await;
            return Err(Box::new(fault(
                req,
                &plan.log_rel,
                format!("cannot hand the work to the relay: {e}"),
            )));
        }
        ctx.log.line(&format!(
            "story {} attempt {}: submitted job {sid}",
            plan.id, plan.n
        ));
        Ok(at)
    }

    /// Feeds the job's watch (the run's job list, the run's control, time)
    /// and does what it says, until it is over.
    async fn watch(
        &self,
        req: &AttemptRequest,
        plan: &Plan,
        submitted_at: Instant,
        mut control: watch::Receiver<Control>,
    ) -> (JobWatch, Ended) {
        let ctx = &self.ctx;
        let sid = &plan.sid;
        let mut watch = JobWatch::new(Limits {
            pin_wait: plan.pinned.then_some(PIN_WAIT),
            deadline: ctx.timeout
                + Duration::from_secs(ctx.config.loop_.grace_secs)
                + DEAD_MAN_SLACK,
            stop_wait: stop_wait(ctx) + STOP_KEEP,
            activity_every: ACTIVITY_EVERY,
        });
        let mut list = self.board.subscribe(&self.cluster, &ctx.log);
        let mut shown = Shown::default();
        loop {
            let fact = super::board::next_fact(
                &mut control,
                watch.run_stopped(),
                &mut list,
                sid,
                submitted_at,
            )
            .await;
            match watch.on(fact, submitted_at.elapsed()) {
                Step::Wait => {}
                Step::ReadActivity => self.show_activity(req, sid, &mut shown).await,
                Step::Stop(why) => {
                    match why {
                        StopWhy::PinWait => ctx.log.line(&format!(
                            "job {sid} waited {}s for the node holding its session: stopping it",
                            PIN_WAIT.as_secs()
                        )),
                        StopWhy::DeadMan => ctx.log.line(&format!(
                            "job {sid} still runs past the attempt's timeout: stopping it"
                        )),
                        StopWhy::Run => {}
                    }
                    let sid2 = sid.clone();
                    if let Err(e) = call(&self.cluster, move |c| c.stop(&sid2)).await {
                        ctx.log.line(&format!("job {sid}: stop: {e}"));
                    }
                }
                Step::Over(ended) => return (watch, ended),
            }
        }
    }

    /// Where the attempt runs, from the worker's first line (the log read
    /// for its activity anyway: no request more), said once; then what its
    /// agent does there.
    async fn show_activity(&self, req: &AttemptRequest, sid: &str, shown: &mut Shown) {
        let sid2 = sid.to_string();
        let Ok(logs) = call(&self.cluster, move |c| c.logs(&sid2)).await else {
            return;
        };
        if let (None, Some(on)) = (&shown.placed, worker::node_in(&logs)) {
            shown.placed = Some(on.to_string());
            let _ = self.activity.send(AttemptEvent::Placed {
                idx: req.idx,
                attempt: req.attempt,
                candidate: req.candidate,
                node: on.to_string(),
            });
        }
        if let Some(text) = worker::activity_in(&logs) {
            if text != shown.activity {
                shown.activity = text.to_string();
                let _ = self.activity.send(AttemptEvent::Activity {
                    idx: req.idx,
                    candidate: req.candidate,
                    text: shown.activity.clone(),
                });
            }
        }
    }

    /// The attempt's report when its job left none, as `judge` said; the
    /// job is deleted.
    async fn unreported(
        &self,
        req: &AttemptRequest,
        plan: &Plan,
        judgement: Judgement,
        ended: &Ended,
    ) -> AttemptReport {
        let sid = plan.sid.clone();
        let _ = call(&self.cluster, move |c| c.delete(&sid)).await;
        let (sid, log_rel) = (&plan.sid, plan.log_rel.clone());
        match judgement {
            Judgement::NeverStarted => fault(
                req,
                &log_rel,
                format!("job {sid} never started on the node holding its session"),
            ),
            Judgement::Interrupted => AttemptReport::empty(req, Verdict::Interrupted, log_rel),
            Judgement::TimedOut => AttemptReport::empty(
                req,
                Verdict::Failed {
                    reason: format!(
                        "the job ran past the attempt's timeout ({}s) and was stopped",
                        self.ctx.timeout.as_secs()
                    ),
                    kind: crate::agent::ResultKind::Timeout,
                },
                log_rel,
            ),
            Judgement::Lost | Judgement::Report | Judgement::ReportInterrupted => {
                self.lost(req, plan, ended).await
            }
        }
    }

    /// Its node or its worker died: not the story's doing. What its agent
    /// had committed and the worker pushed on the way is kept.
    async fn lost(&self, req: &AttemptRequest, plan: &Plan, ended: &Ended) -> AttemptReport {
        let ctx = &self.ctx;
        let (id, n, sid) = (&plan.id, plan.n, &plan.sid);
        let why = match ended {
            Ended::Finished(i) => {
                let words: Vec<&str> = i.message.split_whitespace().collect();
                format!("{}: {}", i.status, words.join(" "))
            }
            Ended::Gone | Ended::StopUnanswered => "the cluster lost it".to_string(),
        };
        let mut r = fault(
            req,
            &plan.log_rel,
            format!("job {sid} ended without a report ({why}); it runs again"),
        );
        let keep = project::kept_ref(KeptRef::Interrupted, &plan.key, n);
        let fetch = [
            "fetch".to_string(),
            "--quiet".into(),
            "--no-tags".into(),
            "--no-write-fetch-head".into(),
            self.remote.clone(),
            format!("{}:{keep}", plan.refs.progress),
        ];
        let had = ctx.git.ref_target(&keep).ok().flatten().is_some();
        if !had && git(ctx, &fetch).await.is_ok() {
            ctx.log.line(&format!(
                "story {id} attempt {n}: the commits job {sid} pushed before it was lost \
                 are kept at {keep}"
            ));
            // The attempt's commits, as a local attempt's saved ref: its
            // history, record, note and `ralph log` name it.
            r.saved_ref = Some(keep);
        }
        r
    }

    /// The worker's report: its log kept, its work fetched, checked and
    /// made the story branch, the job deleted off the report's path.
    /// `interrupted`: the run stopped it before its work was done (its
    /// agent killed by the stop, "Killed by signal 15"): the run's doing,
    /// not the story's, and no retry is charged; what it kept stands.
    async fn collected(
        &self,
        req: &AttemptRequest,
        plan: &Plan,
        wire: WorkerReport,
        mut times: Times,
        interrupted: bool,
    ) -> AttemptReport {
        let ctx = &self.ctx;
        let (id, n, sid) = (&plan.id, plan.n, &plan.sid);
        if let Some(dir) = plan.log_path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(&plan.log_path, wire.log.as_bytes());
        ctx.log.line(&format!(
            "story {id} attempt {n}: job {sid} ran on {}",
            wire.node
        ));
        // A job of a crashed run was handed the target of its day: its work
        // must grow from that base, which must be in the target's history.
        let base = if plan.adopted {
            let sent = wire.base.clone();
            let on_target = !sent.is_empty()
                && ctx
                    .git
                    .branch_tip(&ctx.target)
                    .ok()
                    .flatten()
                    .is_some_and(|tip| ctx.git.descends_from(&tip, &sent).unwrap_or(false));
            if !on_target {
                return fault(
                    req,
                    &plan.log_rel,
                    format!(
                        "job {sid} of an earlier run started from {sent:?}, which is not in \
                         {}'s history",
                        ctx.target
                    ),
                );
            }
            sent
        } else {
            plan.base.clone()
        };
        if let Err(e) = self.collect(plan, &base, &wire).await {
            return fault(
                req,
                &plan.log_rel,
                format!("cannot take the work of job {sid} back: {e}"),
            );
        }
        times.phases.mark("collect");
        // The job's deletion is off the attempt's path too.
        let (cluster, sid2) = (self.cluster.clone(), sid.clone());
        let task = tokio::spawn(async move {
            let _ = call(&cluster, move |c| c.delete(&sid2)).await;
        });
        lock(&self.relayed.clears).push(task);
        let (w0, w1) = wire.span_ms;
        if w0 > 0 && !plan.adopted {
            ctx.log.line(&format!(
                "story {id} attempt {n}: job {sid} timing: {}; submitted to worker start {} ms, \
                 worker {} ({} ms in all), worker end to end seen {} ms",
                worker::phases_text(&times.phases.done),
                w0.saturating_sub(times.submitted_ms),
                worker::phases_text(&wire.phases),
                w1.saturating_sub(w0),
                times.seen_ms.saturating_sub(w1),
            ));
        }
        let mut report = wire.into_report(req, plan.log_rel.clone());
        if interrupted {
            report.verdict = Verdict::Interrupted;
        }
        report
    }

    /// Fetches the worker's refs from the relay, checks the work grew from
    /// `base`, sets the story branch, and clears the relay.
    async fn collect(&self, plan: &Plan, base: &Oid, wire: &WorkerReport) -> Result<(), String> {
        let (id, n, refs) = (plan.key.as_str(), plan.n, &plan.refs);
        let (out, kept, saved) = (
            wire.out.as_ref(),
            &wire.report.kept,
            wire.report.saved_ref.as_ref(),
        );
        let (work_sent, progress) = (plan.work_sent, wire.progress);
        let ctx = &self.ctx;
        let pad = relay::landing_pad(&ctx.tag, id, n);
        let mut fetch = vec![
            "fetch".to_string(),
            "--quiet".into(),
            "--no-tags".into(),
            "--no-write-fetch-head".into(),
            self.remote.clone(),
        ];
        if out.is_some() {
            fetch.push(format!("+{}:{pad}", refs.out));
        }
        let mut kept_pairs = Vec::new();
        for k in kept.iter().chain(saved) {
            if let Some(remote) = relay::kept_on_relay(refs, k) {
                kept_pairs.push((remote.clone(), k.clone()));
                // Never overwritten: a local kept ref of that name stays.
                fetch.push(format!("{remote}:{k}"));
            }
        }
        if fetch.len() > 5 {
            git(ctx, &fetch).await?;
        }
        if let Some(out) = out {
            let (id2, pad2, base2, out2) = (id.to_string(), pad.clone(), base.clone(), out.clone());
            crate::executor::blocking(ctx, move |c| adopt_branch(c, &id2, &pad2, &base2, &out2))
                .await??;
        }
        // The relay keeps nothing of a collected attempt. Clearing it is off
        // the attempt's path (its report waits for nothing more); one that
        // fails (a relay busy with other pushes) is swept at the run's end.
        lock(&self.relayed.collected).insert((id.to_string(), n));
        let mut clear = vec![
            "push".to_string(),
            "--quiet".into(),
            self.remote.clone(),
            format!(":{}", refs.base),
        ];
        if out.is_some() {
            clear.push(format!(":{}", refs.out));
        }
        if work_sent {
            clear.push(format!(":{}", refs.work));
        }
        if plan.tracker_sent {
            clear.push(format!(":{}", refs.tracker));
        }
        if progress {
            clear.push(format!(":{}", refs.progress));
        }
        for (remote, _) in &kept_pairs {
            clear.push(format!(":{remote}"));
        }
        let (ctx2, id2) = (ctx.clone(), id.to_string());
        let task = tokio::spawn(async move {
            if let Err(e) = git(&ctx2, &clear).await {
                ctx2.log.line(&format!(
                    "relay refs of story {id2} attempt {n} stay until the run's end: {e}"
                ));
            }
        });
        lock(&self.relayed.clears).push(task);
        Ok(())
    }
}

/// The fetched result becomes the story branch once it is known to grow
/// from the base it was given; a local branch holding unsaved commits is
/// kept first (as a local attempt's `prepare` does).
fn adopt_branch(
    ctx: &AttemptEnv,
    id: &str,
    pad: &str,
    base: &Oid,
    out: &Oid,
) -> Result<(), String> {
    let git = &ctx.git;
    let got = git
        .ref_target(pad)
        .map_err(|e| e.to_string())?
        .ok_or("the relay did not have the story's branch")?;
    let result = (|| {
        if &got != out {
            return Err(format!("the relay holds {got} where the worker said {out}"));
        }
        if !git.descends_from(&got, base).map_err(|e| e.to_string())? {
            return Err(format!(
                "the worker's result {got} does not grow from the base {base} it was given"
            ));
        }
        let branch = project::story_branch(id);
        if git.branch_tip(&branch).ok().flatten().is_some()
            && git.commits_ahead(&branch, base).unwrap_or(0) > 0
            && !git
                .tip_saved_under(&branch, project::KEPT_REFS)
                .unwrap_or(false)
        {
            let stamp = crate::timefmt::now_secs().max(0) as u32;
            git.save_ref(&branch, &project::kept_ref(KeptRef::Saved, id, stamp))
                .map_err(|e| e.to_string())?;
        }
        git.release_branch(&branch, &crate::paths::worktrees_dir(&ctx.root))
            .map_err(|e| e.to_string())?;
        git.set_branch(&branch, &got).map_err(|e| e.to_string())
    })();
    let _ = git.delete_ref(pad);
    result
}

/// What the display was told of a job.
#[derive(Default)]
struct Shown {
    placed: Option<String>,
    activity: String,
}
