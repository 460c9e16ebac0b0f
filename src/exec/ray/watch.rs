//! The watch over one Ray job (issue 33): facts in (the job as the last
//! job list showed it, the run asking its attempts to stop, time passing),
//! the next step out (wait, read the job's log, stop the job, or the watch
//! is over); then `judge`, from how it ended and what the job's log held,
//! says what the attempt's verdict is. Pure: the I/O loop in `job.rs`
//! feeds it and does what it says; the table tests below cover every path
//! the cluster tests (`tests/it/ray.rs`) take.

use std::time::Duration;

use super::super::cluster::JobInfo;

/// Why ralph stopped a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopWhy {
    /// The run asked (Ctrl-C, `ralph stop`): the run's doing, not the story's.
    Run,
    /// Pinned to the node holding its session, it never started there (a
    /// node that died a moment ago may still look alive to the cluster).
    PinWait,
    /// Running past the attempt's timeout and slack: the worker, which
    /// enforces the timeout, could not (a dead-man stop).
    DeadMan,
}

/// What the watch is told.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fact {
    /// A job list asked after the job was submitted: the job as it lists
    /// it, `None` when the cluster no longer knows it.
    Listed(Option<JobInfo>),
    /// The job list could not be read this time.
    ListFailed,
    /// The run asks its attempts to stop (or is gone).
    RunStops,
    /// Time passed with no list (a slow dashboard): time limits still hold.
    Tick,
}

/// What the I/O loop does next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    Wait,
    /// Read the job's log for where it runs and what its agent does.
    ReadActivity,
    /// Send the job a stop, then go on watching for its end.
    Stop(StopWhy),
    Over(Ended),
}

/// How a watch ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ended {
    /// The job finished (SUCCEEDED, FAILED or STOPPED).
    Finished(JobInfo),
    /// The cluster no longer knows the job.
    Gone,
    /// Stopped, it did not end within the stop's wait.
    StopUnanswered,
}

/// The watch's limits, from the run's config.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Limits {
    /// `Some` for a job pinned to a node: how long it may wait to start.
    pub(crate) pin_wait: Option<Duration>,
    /// How long it may run before the dead-man stop: the attempt's timeout,
    /// the agent's grace, and the worker's slack.
    pub(crate) deadline: Duration,
    /// How long a stopped job may take to end (Ray's stop wait, the
    /// worker's keeping and pushing, and a margin).
    pub(crate) stop_wait: Duration,
    /// Every how many listings of a running job its log is read.
    pub(crate) activity_every: u32,
}

/// One job's watch: what it has seen, what it has done.
#[derive(Debug, Clone)]
pub(crate) struct JobWatch {
    limits: Limits,
    /// When it was first listed RUNNING (time since the watch began).
    running_since: Option<Duration>,
    stop_sent: Option<(StopWhy, Duration)>,
    run_stopped: bool,
    listings: u32,
}

impl JobWatch {
    pub(crate) fn new(limits: Limits) -> JobWatch {
        JobWatch {
            limits,
            running_since: None,
            stop_sent: None,
            run_stopped: false,
            listings: 0,
        }
    }

    /// Takes in `fact`, seen at `now` (time since the watch began).
    pub(crate) fn on(&mut self, fact: Fact, now: Duration) -> Step {
        let mut listed_running = false;
        match fact {
            Fact::Listed(Some(info)) if info.finished() => {
                return Step::Over(Ended::Finished(info))
            }
            Fact::Listed(None) => return Step::Over(Ended::Gone),
            Fact::Listed(Some(info)) => {
                self.listings += 1;
                if info.status == "RUNNING" && self.running_since.is_none() {
                    self.running_since = Some(now);
                }
                listed_running = self.running_since.is_some();
            }
            Fact::RunStops => self.run_stopped = true,
            Fact::ListFailed | Fact::Tick => {}
        }
        if let Some(why) = self.stop_due(now) {
            self.stop_sent = Some((why, now));
            return Step::Stop(why);
        }
        if self
            .stop_sent
            .is_some_and(|(_, at)| now.saturating_sub(at) > self.limits.stop_wait)
        {
            return Step::Over(Ended::StopUnanswered);
        }
        if listed_running
            && self
                .listings
                .is_multiple_of(self.limits.activity_every.max(1))
        {
            return Step::ReadActivity;
        }
        Step::Wait
    }

    /// The stop to send now, if one is due: one stop per job, the run's
    /// before a pin's wait before the dead man's.
    fn stop_due(&self, now: Duration) -> Option<StopWhy> {
        if self.stop_sent.is_some() {
            return None;
        }
        if self.run_stopped {
            return Some(StopWhy::Run);
        }
        let waited_for_pin = self
            .limits
            .pin_wait
            .is_some_and(|w| self.running_since.is_none() && now > w);
        if waited_for_pin {
            return Some(StopWhy::PinWait);
        }
        let past = self
            .running_since
            .is_some_and(|t| now.saturating_sub(t) > self.limits.deadline);
        past.then_some(StopWhy::DeadMan)
    }

    /// Whether the run asked the attempt to stop (then it stops listening).
    pub(crate) fn run_stopped(&self) -> bool {
        self.run_stopped
    }

    /// The stop ralph sent, if any.
    pub(crate) fn stopped(&self) -> Option<StopWhy> {
        self.stop_sent.map(|(why, _)| why)
    }
}

/// What the job's log held: the worker's report, and whether its verdict
/// is `Done`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    NoReport,
    Report { done: bool },
}

/// The attempt's verdict, as far as the watch decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Judgement {
    /// The worker's report stands (its work is collected).
    Report,
    /// The worker reported, but the run stopped it before its work was
    /// done (its agent killed by the stop): interrupted, no retry charged;
    /// what it kept is collected.
    ReportInterrupted,
    /// Pinned, it never started on the node holding its session: a fault,
    /// run again (with a fresh session when that node is gone).
    NeverStarted,
    /// Stopped by the run, no report: interrupted.
    Interrupted,
    /// Stopped past its timeout, no report: the story's timeout.
    TimedOut,
    /// Ended without a report (its node or worker died, the cluster lost
    /// it): a fault outside the story, run again; its pushed commits kept.
    Lost,
}

/// The verdict of a watch that ended, given what the job's log held.
pub(crate) fn judge(watch: &JobWatch, read: Read) -> Judgement {
    match read {
        Read::Report { done: false } if watch.run_stopped => Judgement::ReportInterrupted,
        Read::Report { .. } => Judgement::Report,
        Read::NoReport => match watch.stopped() {
            Some(StopWhy::PinWait) => Judgement::NeverStarted,
            _ if watch.run_stopped => Judgement::Interrupted,
            Some(StopWhy::DeadMan) => Judgement::TimedOut,
            Some(StopWhy::Run) | None => Judgement::Lost,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(status: &str) -> Option<JobInfo> {
        Some(JobInfo {
            status: status.into(),
            message: String::new(),
        })
    }

    fn limits(pinned: bool) -> Limits {
        Limits {
            pin_wait: pinned.then_some(Duration::from_secs(90)),
            deadline: Duration::from_secs(600),
            stop_wait: Duration::from_secs(60),
            activity_every: 4,
        }
    }

    use Fact::*;

    /// Plays `facts` (at their second) into a watch; the steps that were
    /// not `Wait`, with their second, and the watch.
    fn play(pinned: bool, facts: &[(u64, Fact)]) -> (Vec<(u64, Step)>, JobWatch) {
        let mut w = JobWatch::new(limits(pinned));
        let mut steps = Vec::new();
        for (t, f) in facts {
            let s = w.on(f.clone(), Duration::from_secs(*t));
            if s != Step::Wait {
                steps.push((*t, s));
            }
        }
        (steps, w)
    }

    fn finished(status: &str) -> Step {
        Step::Over(Ended::Finished(info(status).unwrap()))
    }

    const DONE: Read = Read::Report { done: true };
    const NOT_DONE: Read = Read::Report { done: false };

    #[test]
    fn a_job_that_runs_and_reports_keeps_its_report() {
        let (steps, w) = play(
            false,
            &[
                (0, Listed(info("PENDING"))),
                (1, Listed(info("RUNNING"))),
                (2, Listed(info("SUCCEEDED"))),
            ],
        );
        assert_eq!(steps, [(2, finished("SUCCEEDED"))]);
        assert_eq!(judge(&w, DONE), Judgement::Report);
        assert_eq!(judge(&w, NOT_DONE), Judgement::Report);
    }

    #[test]
    fn a_pinned_job_that_never_starts_is_stopped_and_runs_again() {
        let (steps, w) = play(
            true,
            &[
                (0, Listed(info("PENDING"))),
                (90, Listed(info("PENDING"))),
                (91, Listed(info("PENDING"))),
                (92, Listed(info("PENDING"))),
                (93, Listed(info("STOPPED"))),
            ],
        );
        assert_eq!(
            steps,
            [
                (91, Step::Stop(StopWhy::PinWait)),
                (93, finished("STOPPED"))
            ]
        );
        assert_eq!(judge(&w, Read::NoReport), Judgement::NeverStarted);
    }

    #[test]
    fn a_pinned_job_that_starts_in_time_is_not_stopped() {
        let (steps, w) = play(
            true,
            &[
                (0, Listed(info("PENDING"))),
                (80, Listed(info("RUNNING"))),
                (200, Tick),
                (300, Listed(info("SUCCEEDED"))),
            ],
        );
        assert_eq!(steps, [(300, finished("SUCCEEDED"))]);
        assert_eq!(w.stopped(), None);
    }

    #[test]
    fn an_unpinned_job_may_wait_for_a_slot_as_long_as_it_takes() {
        let (steps, _) = play(false, &[(0, Listed(info("PENDING"))), (5000, Tick)]);
        assert_eq!(steps, []);
    }

    #[test]
    fn a_job_past_its_deadline_gets_the_dead_man_stop_and_times_out() {
        let (steps, w) = play(
            false,
            &[
                (0, Listed(info("PENDING"))),
                (10, Listed(info("RUNNING"))),
                (610, Listed(info("RUNNING"))),
                (611, Listed(info("RUNNING"))),
                (612, Tick),
                (620, Listed(info("STOPPED"))),
            ],
        );
        assert_eq!(
            steps,
            [
                (611, Step::Stop(StopWhy::DeadMan)),
                (620, finished("STOPPED"))
            ]
        );
        assert_eq!(judge(&w, Read::NoReport), Judgement::TimedOut);
        // A worker that still reported (its own timeout) is believed.
        assert_eq!(judge(&w, NOT_DONE), Judgement::Report);
    }

    #[test]
    fn the_dead_man_counts_from_the_start_not_the_submission() {
        let (steps, _) = play(
            false,
            &[
                (0, Listed(info("PENDING"))),
                (500, Listed(info("RUNNING"))),
                (1000, Tick),
            ],
        );
        assert_eq!(steps, []);
    }

    #[test]
    fn a_dead_man_stop_is_also_found_by_a_tick_when_the_list_hangs() {
        let (steps, _) = play(false, &[(0, Listed(info("RUNNING"))), (700, Tick)]);
        assert_eq!(steps, [(700, Step::Stop(StopWhy::DeadMan))]);
    }

    #[test]
    fn a_job_the_cluster_lost_is_a_fault_outside_the_story() {
        // The node died: the cluster forgets the job, or fails it.
        let (steps, w) = play(false, &[(0, Listed(info("RUNNING"))), (30, Listed(None))]);
        assert_eq!(steps, [(30, Step::Over(Ended::Gone))]);
        assert_eq!(judge(&w, Read::NoReport), Judgement::Lost);
        let (steps, w) = play(
            false,
            &[(0, Listed(info("RUNNING"))), (30, Listed(info("FAILED")))],
        );
        assert_eq!(steps, [(30, finished("FAILED"))]);
        assert_eq!(judge(&w, Read::NoReport), Judgement::Lost);
    }

    #[test]
    fn list_failures_end_nothing() {
        let (steps, w) = play(
            false,
            &[
                (0, Listed(info("RUNNING"))),
                (1, ListFailed),
                (2, ListFailed),
                (3, Tick),
            ],
        );
        assert_eq!(steps, []);
        assert_eq!(w.stopped(), None);
    }

    #[test]
    fn a_run_that_stops_stops_the_job_once_and_its_attempt_is_interrupted() {
        let (steps, w) = play(
            false,
            &[
                (0, Listed(info("RUNNING"))),
                (5, RunStops),
                (6, Listed(info("RUNNING"))),
                (7, RunStops),
                (9, Listed(info("STOPPED"))),
            ],
        );
        assert_eq!(
            steps,
            [(5, Step::Stop(StopWhy::Run)), (9, finished("STOPPED"))]
        );
        // No report: interrupted; a report of unfinished work (its agent
        // killed by the stop): interrupted too, its kept work collected.
        assert_eq!(judge(&w, Read::NoReport), Judgement::Interrupted);
        assert_eq!(judge(&w, NOT_DONE), Judgement::ReportInterrupted);
    }

    #[test]
    fn work_done_before_the_kill_stands() {
        let (_, w) = play(
            false,
            &[
                (0, Listed(info("RUNNING"))),
                (5, RunStops),
                (6, Listed(info("SUCCEEDED"))),
            ],
        );
        assert_eq!(judge(&w, DONE), Judgement::Report);
    }

    #[test]
    fn a_stop_that_is_not_answered_ends_the_watch() {
        let (steps, w) = play(
            false,
            &[
                (0, Listed(info("RUNNING"))),
                (5, RunStops),
                (60, Listed(info("RUNNING"))),
                (66, Tick),
            ],
        );
        assert_eq!(
            steps,
            [
                (5, Step::Stop(StopWhy::Run)),
                (66, Step::Over(Ended::StopUnanswered))
            ]
        );
        assert_eq!(judge(&w, Read::NoReport), Judgement::Interrupted);
    }

    #[test]
    fn the_run_stopping_after_a_dead_man_stop_sends_no_second_stop() {
        let (steps, w) = play(
            false,
            &[
                (0, Listed(info("RUNNING"))),
                (601, Tick),
                (602, RunStops),
                (603, Listed(info("STOPPED"))),
            ],
        );
        assert_eq!(
            steps,
            [
                (601, Step::Stop(StopWhy::DeadMan)),
                (603, finished("STOPPED"))
            ]
        );
        // The run's stop wins: the story is not charged a timeout.
        assert_eq!(judge(&w, Read::NoReport), Judgement::Interrupted);
        assert_eq!(judge(&w, NOT_DONE), Judgement::ReportInterrupted);
    }

    #[test]
    fn a_pin_wait_then_the_runs_stop_is_still_a_pin_that_never_came() {
        let (steps, w) = play(
            true,
            &[
                (0, Listed(info("PENDING"))),
                (91, Tick),
                (92, RunStops),
                (93, Listed(None)),
            ],
        );
        assert_eq!(
            steps,
            [
                (91, Step::Stop(StopWhy::PinWait)),
                (93, Step::Over(Ended::Gone))
            ]
        );
        assert_eq!(judge(&w, Read::NoReport), Judgement::NeverStarted);
    }

    #[test]
    fn a_running_jobs_log_is_read_every_fourth_listing() {
        let mut facts = vec![(0, Listed(info("PENDING"))); 3];
        facts.extend((1..=8).map(|t| (t, Listed(info("RUNNING")))));
        let (steps, _) = play(false, &facts);
        // Listings 4 and 8 are running ones; 12 would be the next.
        let reads: Vec<u64> = steps
            .iter()
            .filter(|(_, s)| *s == Step::ReadActivity)
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(reads, [1, 5]);
    }
}
