//! The merge queue's validations as Ray jobs (issue 34, `validation.where:
//! executor`): the candidate's merge pushed to the relay
//! (`…/validate/<commit>/<k>`), a job running `ralph worker validate` next
//! to the attempts (the same resources, the same package of ralph), its
//! watch (`watch::JobWatch`: the run's stop or the chain throwing the
//! candidate away stops the job), the report read off its log, the log
//! written where a local validation's goes, the job and the relay ref
//! cleared. A job lost without a report (its node died) is submitted
//! again; the coordinator never takes a validation it did not see pass for
//! a pass.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;

use crate::control::Control;
use crate::executor::{AttemptEnv, Validated, ValidationEnd, ValidationJob, Validator};
use crate::gitops::relay;

use super::super::worker::{self, ValidateReport, ValidateSpec, ValidationCmd};
use super::board::Board;
use super::watch::{Ended, JobWatch, Limits, Step};
use super::{
    call, git, job_spec, lock, stop_wait, Cluster, EntryFn, RayExecutor, Relayed, DEAD_MAN_SLACK,
    STOP_KEEP,
};

/// How many times a validation whose job was lost (no report) is submitted.
const TRIES: u32 = 3;

/// The metadata key saying a job is a validation (of the story it names):
/// a crashed run's are stopped at the next run's start.
pub(crate) const VALIDATION_KEY: &str = "ralph_validation";

/// The run's Ray validations: what every one needs of the executor.
#[derive(Clone)]
pub(super) struct RayValidator {
    ctx: Arc<AttemptEnv>,
    cluster: Arc<Cluster>,
    board: Arc<Board>,
    relay_url: String,
    subdir: String,
    remote: String,
    resources: Vec<(String, f64)>,
    entry: EntryFn,
    package: Option<String>,
    relayed: Arc<Relayed>,
}

impl std::fmt::Debug for RayValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RayValidator({})", self.cluster.address)
    }
}

impl RayExecutor {
    /// Validations as jobs of this cluster.
    pub(crate) fn validator(&self) -> Option<Arc<dyn Validator>> {
        Some(Arc::new(RayValidator {
            ctx: self.ctx.clone(),
            cluster: self.cluster.clone(),
            board: self.board.clone(),
            relay_url: self.relay_url.clone(),
            subdir: self.subdir.clone(),
            remote: self.settings.relay.clone(),
            resources: self.settings.resources.clone(),
            entry: EntryFn(self.settings.ralph_path.clone()),
            package: self.package.clone(),
            relayed: self.relayed.clone(),
        }))
    }
}

impl Validator for RayValidator {
    fn validate(
        &self,
        job: ValidationJob,
        control: watch::Receiver<Control>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ValidationEnd> + Send + 'static>> {
        let me = self.clone();
        Box::pin(async move { me.run(job, control).await })
    }
}

/// How one job of a validation ended.
enum Try {
    /// The worker's report, and when the job was submitted and its end
    /// seen (Unix ms).
    Report(ValidateReport, (u64, u64)),
    /// The run (or the chain) stopped it before it reported.
    Stopped,
    /// It ended without a report: why.
    Lost(String),
}

impl RayValidator {
    async fn run(self, job: ValidationJob, control: watch::Receiver<Control>) -> ValidationEnd {
        let ctx = self.ctx.clone();
        let relay_ref = format!(
            "{}validate/{}/{}",
            relay::relay_prefix(&ctx.tag),
            job.commit,
            job.k
        );
        // The push runs while Ray starts the job; the worker waits for it.
        let push = vec![
            "push".to_string(),
            "--quiet".into(),
            "--force".into(),
            self.remote.clone(),
            format!("{}:{relay_ref}", job.commit),
        ];
        let ctx2 = ctx.clone();
        let mut pushing = Some(tokio::spawn(async move { git(&ctx2, &push).await }));
        let spec = ValidateSpec {
            version: worker::version().to_string(),
            relay_url: self.relay_url.clone(),
            tag: ctx.tag.clone(),
            subdir: self.subdir.clone(),
            story: job.story.clone(),
            attempt: job.attempt,
            commit: job.commit.clone(),
            trusted: job.trusted.clone(),
            relay_ref: relay_ref.clone(),
            commands: ctx
                .required_validation
                .iter()
                .map(|v| ValidationCmd {
                    name: v.name.clone(),
                    cmd: v.cmd.clone(),
                    exclusive: v.exclusive,
                })
                .collect(),
            timeout_secs: ctx.timeout.as_secs(),
        };
        let mut last = String::new();
        let mut end = None;
        for n in 1..=TRIES {
            if *control.borrow() != Control::Run {
                end = Some(stopped());
                break;
            }
            match self
                .one_job(&job, &spec, n, &mut pushing, control.clone())
                .await
            {
                Ok(Try::Report(r, seen)) => {
                    end = Some(self.reported(&job, r, seen));
                    break;
                }
                Ok(Try::Stopped) => {
                    end = Some(stopped());
                    break;
                }
                Ok(Try::Lost(why)) => {
                    ctx.log.line(&format!(
                        "validation of story {} (merge {}): job {n} of {TRIES} ended without \
                         a report ({why})",
                        job.story, job.commit
                    ));
                    last = why;
                }
                Err(e) => {
                    last = e;
                    break;
                }
            }
        }
        let end = end.unwrap_or_else(|| ValidationEnd {
            verdict: Validated::Error {
                reason: format!(
                    "the validation of story {}'s merge {} could not run on the cluster: {last}",
                    job.story, job.commit
                ),
            },
            node: String::new(),
        });
        // Off the landing's path; the run's end waits for it, and sweeps
        // the relay's validate refs whatever became of this one.
        let clear = vec![
            "push".to_string(),
            "--quiet".into(),
            self.remote.clone(),
            format!(":{relay_ref}"),
        ];
        if let Some(p) = pushing.take() {
            let _ = p.await;
        }
        let ctx2 = ctx.clone();
        lock(&self.relayed.clears).push(tokio::spawn(async move {
            if let Err(e) = git(&ctx2, &clear).await {
                ctx2.log.line(&format!(
                    "relay ref {relay_ref} stays until the run's end: {e}"
                ));
            }
        }));
        end
    }

    /// The worker's report: its output written where the merge queue reads
    /// a validation's log.
    fn reported(
        &self,
        job: &ValidationJob,
        r: ValidateReport,
        (submitted, seen): (u64, u64),
    ) -> ValidationEnd {
        if let Some(dir) = job.log.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(&job.log, r.log.as_bytes());
        let word = match &r.verdict {
            Validated::Passed => "passed",
            Validated::Failed { .. } => "failed",
            Validated::Interrupted => "stopped",
            Validated::Error { .. } => "could not run",
        };
        let (w0, w1) = r.span_ms;
        self.ctx.log.line(&format!(
            "validation of story {} (merge {}) on {}: {word}; timing: submitted to worker \
             start {} ms, worker {} ({} ms in all), worker end to end seen {} ms",
            job.story,
            job.commit,
            r.node,
            w0.saturating_sub(submitted),
            worker::phases_text(&r.phases),
            w1.saturating_sub(w0),
            seen.saturating_sub(w1),
        ));
        ValidationEnd {
            verdict: r.verdict,
            node: r.node,
        }
    }

    /// Submits job `n` of `job`'s validation and watches it to its end;
    /// `Err`: it could not be submitted (or its merge not handed over).
    async fn one_job(
        &self,
        job: &ValidationJob,
        spec: &ValidateSpec,
        n: u32,
        pushing: &mut Option<tokio::task::JoinHandle<Result<(), String>>>,
        control: watch::Receiver<Control>,
    ) -> Result<Try, String> {
        let ctx = &self.ctx;
        let short = &job.commit[..job.commit.len().min(12)];
        let sid = format!(
            "{}validate-{short}-{}-{}",
            ctx.tag,
            job.k,
            worker::epoch_ms()
        );
        let mut body = job_spec(
            &sid,
            self.entry.command("validate", &spec.encode()),
            &self.resources,
            self.package.as_deref(),
            stop_wait(ctx),
            &ctx.tag,
            "",
            n,
        );
        // Not an attempt: no story to claim it by; the next run's start
        // stops it (`validations_of`).
        body["metadata"] = serde_json::json!({
            "ralph_project": ctx.tag,
            VALIDATION_KEY: job.story,
            "ralph_commit": job.commit,
        });
        let submitted_ms = worker::epoch_ms();
        let submitted = call(&self.cluster, move |c| c.submit(&body)).await;
        let at = Instant::now();
        let pushed = match pushing.take() {
            Some(t) => t
                .await
                .unwrap_or_else(|e| Err(format!("internal error in a push: {e}"))),
            None => Ok(()),
        };
        submitted.map_err(|e| format!("Ray refused job {sid}: {e}"))?;
        if let Err(e) = pushed {
            let sid2 = sid.clone();
            let _ = call(&self.cluster, move |c| {
                c.stop(&sid2)?;
                c.delete(&sid2)
            })
            .await;
            return Err(format!("cannot hand the merge to the relay: {e}"));
        }
        ctx.log.line(&format!(
            "validation of story {} (merge {}): submitted job {sid}",
            job.story, job.commit
        ));
        let (watch, ended) = self.watch(&sid, at, spec.commands.len(), control).await;
        let seen_ms = worker::epoch_ms();
        let sid2 = sid.clone();
        let logs = call(&self.cluster, move |c| c.logs(&sid2))
            .await
            .unwrap_or_default();
        let (cluster, sid2) = (self.cluster.clone(), sid.clone());
        lock(&self.relayed.clears).push(tokio::spawn(async move {
            let _ = call(&cluster, move |c| c.delete(&sid2)).await;
        }));
        Ok(match worker::report_in_as::<ValidateReport>(&logs) {
            // A command killed by the stop ralph asked for fails: that says
            // nothing of the tree, and must cost the story no attempt.
            Some(Ok(r)) if watch.stopped().is_some() && r.verdict != Validated::Passed => {
                Try::Stopped
            }
            Some(Ok(r)) => Try::Report(r, (submitted_ms, seen_ms)),
            _ if watch.stopped().is_some() => Try::Stopped,
            Some(Err(e)) => Try::Lost(e),
            None => Try::Lost(match ended {
                Ended::Finished(i) => format!("{}: {}", i.status, i.message.trim()),
                Ended::Gone | Ended::StopUnanswered => "the cluster lost it".to_string(),
            }),
        })
    }

    /// Feeds the job's watch until it is over, stopping the job when the
    /// run (or the chain) says so, or when it runs past every command's
    /// timeout and the slack.
    async fn watch(
        &self,
        sid: &str,
        submitted_at: Instant,
        commands: usize,
        mut control: watch::Receiver<Control>,
    ) -> (JobWatch, Ended) {
        let ctx = &self.ctx;
        let mut watch = JobWatch::new(Limits {
            pin_wait: None,
            deadline: ctx.timeout * u32::try_from(commands.max(1)).unwrap_or(u32::MAX)
                + DEAD_MAN_SLACK,
            stop_wait: stop_wait(ctx) + STOP_KEEP,
            activity_every: u32::MAX,
        });
        let mut list = self.board.subscribe(&self.cluster, &ctx.log);
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
                Step::Wait | Step::ReadActivity => {}
                Step::Stop(_) => {
                    let sid2 = sid.to_string();
                    if let Err(e) = call(&self.cluster, move |c| c.stop(&sid2)).await {
                        ctx.log.line(&format!("job {sid}: stop: {e}"));
                    }
                }
                Step::Over(ended) => return (watch, ended),
            }
        }
    }
}

fn stopped() -> ValidationEnd {
    ValidationEnd {
        verdict: Validated::Interrupted,
        node: String::new(),
    }
}
