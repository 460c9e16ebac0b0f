//! An attempt's verdict, from what was found after its agent exited
//! (architecture.md, change 2). The agent's own word (`agent::classify`)
//! is where it starts; ralph's checks override it: an agent that moved the
//! target or whose credentials were rejected stops the run (invariant 11),
//! a decomposition's answer is its verdict, a DONE that changed nothing
//! fails (invariant 16), a fix-up that left its merge undone fails. Then
//! what is due after it: the timeout postmortem, the attempt's kept ref.
//!
//! Pure: the executor gathers the facts (git through `spawn_blocking`),
//! asks `wants_split`/`wants_done_check` before the two readings that write
//! (the answer's files, the leftovers' commit), then `decide` and
//! `follow_ups`.

use crate::agent::{FaultKind, ResultKind, Verdict};
use crate::project::{self, KeptRef};

/// The agent moved the target itself (no landing and no user commit puts
/// the story's own work there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Moved {
    pub(crate) target: String,
    /// The target's tip when the attempt began.
    pub(crate) from: String,
    /// Its tip now, a commit of the story's work.
    pub(crate) to: String,
}

/// What a DONE left, once ralph committed the agent's leftovers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DoneCheck {
    /// ralph committed files the agent left uncommitted.
    pub(crate) committed_for_agent: bool,
    /// The branch has its base's tree: nothing changed.
    pub(crate) empty: bool,
    /// `allow_empty_done` (the spec's or `loop.`) lets that be.
    pub(crate) allowed: bool,
}

/// Everything an attempt's verdict is decided on, read after its agent
/// exited.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AttemptFacts {
    pub(crate) story: String,
    pub(crate) attempt: u32,
    /// The backend's name, for what the person is told.
    pub(crate) agent: &'static str,
    /// The agent's own verdict (`agent::classify`).
    pub(crate) classified: Verdict,
    /// Commits on the story branch beyond the attempt's base.
    pub(crate) commits: usize,
    pub(crate) moved: Option<Moved>,
    /// The CLI's credentials were rejected, and the attempt was not killed.
    pub(crate) auth_rejected: bool,
    /// A decomposition run: its answer, not a DONE, is what counts.
    pub(crate) decomposing: bool,
    /// The decomposition's answer as written (its verdict), or why the
    /// writer failed; `None` when it was not asked for (`wants_split`).
    pub(crate) split: Option<Result<Verdict, String>>,
    /// After a DONE, the leftovers committed (`wants_done_check`), or why
    /// they could not be.
    pub(crate) done: Option<Result<DoneCheck, String>>,
    /// A fix-up whose merge was left to the agent: the files that
    /// conflicted and still hold markers on the branch (`None` for any
    /// other attempt).
    pub(crate) fixup_merge: Option<Vec<String>>,
}

/// What the executor does after the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct FollowUps {
    /// Run the timeout postmortem (`exec/local/postmortem.rs`).
    pub(crate) postmortem: bool,
    /// Keep the branch under the attempt's ref (invariant 2).
    pub(crate) save_ref: bool,
}

/// A verdict before ralph's checks: the agent moved the target or its
/// credentials were rejected, and nothing else matters.
fn stop(f: &AttemptFacts) -> Option<Verdict> {
    if let Some(m) = &f.moved {
        return Some(Verdict::Fault {
            reason: format!(
                "the agent of story {id} moved {target} itself, from {base} to its own \
                 unvalidated commit {now}; ralph left {target} as it is and stops. To undo \
                 it: git update-ref refs/heads/{target} {base} {now}",
                id = f.story,
                target = m.target,
                base = m.from,
                now = m.to,
            ),
            kind: FaultKind::StopNow,
        });
    }
    f.auth_rejected.then(|| Verdict::Fault {
        reason: format!(
            "the {} agent's credentials were rejected (401 authentication_failed): \
             fix the API key or log in again, then run `ralph run`",
            f.agent
        ),
        kind: FaultKind::StopNow,
    })
}

/// A decomposition run answered: it ended for no reason outside the answer
/// (a stop, a limit, a fault, the timeout keep their verdict).
fn answered(v: &Verdict) -> bool {
    !matches!(
        v,
        Verdict::Interrupted
            | Verdict::RateLimited { .. }
            | Verdict::Fault { .. }
            | Verdict::RootRefusal
            | Verdict::Failed {
                kind: ResultKind::Timeout,
                ..
            }
    )
}

/// The decomposition's answer is to be read and written (into the slot,
/// committed on the story branch) before deciding.
pub(crate) fn wants_split(f: &AttemptFacts) -> bool {
    f.decomposing && stop(f).is_none() && answered(&f.classified)
}

/// A DONE: what the agent left is to be committed on its branch, and the
/// branch compared with its base, before deciding.
pub(crate) fn wants_done_check(f: &AttemptFacts) -> bool {
    !f.decomposing && stop(f).is_none() && f.classified == Verdict::Done
}

/// The commits that count for the attempt: a merge or leftovers ralph
/// committed for the agent count.
fn commits(f: &AttemptFacts) -> usize {
    let for_agent = matches!(
        f.done,
        Some(Ok(DoneCheck {
            committed_for_agent: true,
            ..
        }))
    );
    f.commits + usize::from(for_agent)
}

/// The attempt's verdict.
pub(crate) fn decide(f: &AttemptFacts) -> Verdict {
    if let Some(v) = stop(f) {
        return v;
    }
    let failed = |reason: String| Verdict::Failed {
        reason,
        kind: ResultKind::Fail,
    };
    let mut v = f.classified.clone();
    if f.decomposing {
        match &f.split {
            Some(Ok(answer)) if answered(&v) => v = answer.clone(),
            Some(Err(e)) if answered(&v) => {
                v = Verdict::Fault {
                    reason: format!("the decomposition's writer failed: {e}"),
                    kind: FaultKind::Transient,
                }
            }
            _ => {}
        }
    } else if v == Verdict::Done {
        match &f.done {
            Some(Ok(d)) if d.empty && !d.allowed => {
                v = failed("reported DONE but changed nothing".to_string())
            }
            Some(Ok(_)) | None => {}
            // The machine's or git's trouble, not the story's.
            Some(Err(e)) => {
                let kept = project::kept_ref(KeptRef::Uncommitted, &f.story, f.attempt);
                v = Verdict::Fault {
                    reason: format!(
                        "could not commit the work story {}'s agent left uncommitted ({e}); \
                         what it left is kept at {kept}",
                        f.story
                    ),
                    kind: FaultKind::Transient,
                }
            }
        }
    }
    if let (Some(marked), Verdict::Done | Verdict::Tentative) = (&f.fixup_merge, &v) {
        if commits(f) == 0 {
            v = failed(
                "the fix-up committed nothing: the merge was left in progress (resolve, then \
                 `git commit --no-edit`)"
                    .to_string(),
            );
        } else if !marked.is_empty() {
            v = failed(format!(
                "the fix-up committed conflict markers in {}",
                marked.join(", ")
            ));
        }
    }
    v
}

/// What is due after `verdict` (`decide`'s): the postmortem after a timeout
/// (`postmortem.enabled`; a decomposition has none), and the attempt's ref
/// for work that will not land (and always when the agent moved the target:
/// its branch is the evidence).
pub(crate) fn follow_ups(f: &AttemptFacts, verdict: &Verdict, postmortem: bool) -> FollowUps {
    let timed_out = matches!(
        verdict,
        Verdict::Failed {
            kind: ResultKind::Timeout,
            ..
        }
    );
    let unlanded = matches!(
        verdict,
        Verdict::Failed { .. } | Verdict::Interrupted | Verdict::RateLimited { .. }
    );
    FollowUps {
        postmortem: timed_out && postmortem && !f.decomposing,
        save_ref: f.moved.is_some() || (unlanded && commits(f) > 0),
    }
}

/// The attempt's post hooks run now: finished work runs them after its
/// landing (with the landing's outcome), an interrupted attempt not at all.
pub(crate) fn post_hooks_now(verdict: &Verdict) -> bool {
    !matches!(
        verdict,
        Verdict::Interrupted | Verdict::Done | Verdict::Tentative
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(classified: Verdict) -> AttemptFacts {
        AttemptFacts {
            story: "S-1".to_string(),
            attempt: 2,
            agent: "claude",
            classified,
            commits: 1,
            moved: None,
            auth_rejected: false,
            decomposing: false,
            split: None,
            done: None,
            fixup_merge: None,
        }
    }

    fn failed(reason: &str, kind: ResultKind) -> Verdict {
        Verdict::Failed {
            reason: reason.to_string(),
            kind,
        }
    }

    fn timeout() -> Verdict {
        failed("timed out", ResultKind::Timeout)
    }

    fn done_check(committed_for_agent: bool, empty: bool, allowed: bool) -> DoneCheck {
        DoneCheck {
            committed_for_agent,
            empty,
            allowed,
        }
    }

    fn moved() -> Moved {
        Moved {
            target: "main".to_string(),
            from: "aaa".to_string(),
            to: "bbb".to_string(),
        }
    }

    fn fault(kind: FaultKind) -> impl Fn(&Verdict) -> bool {
        move |v| matches!(v, Verdict::Fault { kind: k, .. } if *k == kind)
    }

    fn is(want: Verdict) -> impl Fn(&Verdict) -> bool {
        move |v| *v == want
    }

    fn reason_has(needle: &'static str) -> impl Fn(&Verdict) -> bool {
        move |v| match v {
            Verdict::Failed { reason, .. } | Verdict::Fault { reason, .. } => {
                reason.contains(needle)
            }
            _ => false,
        }
    }

    /// Every override, one row each: (what, the facts, the verdict wanted,
    /// postmortem due, ref due).
    #[test]
    #[allow(clippy::type_complexity)]
    fn every_override_decides_the_verdict_and_its_follow_ups() {
        let with = |f: fn(&mut AttemptFacts), v: Verdict| {
            let mut x = facts(v);
            f(&mut x);
            x
        };
        let rows: Vec<(
            &str,
            AttemptFacts,
            Box<dyn Fn(&Verdict) -> bool>,
            bool,
            bool,
        )> = vec![
            (
                "a DONE that changed something is done",
                with(
                    |f| f.done = Some(Ok(done_check(false, false, false))),
                    Verdict::Done,
                ),
                Box::new(is(Verdict::Done)),
                false,
                false,
            ),
            (
                "a tentative result stays tentative",
                facts(Verdict::Tentative),
                Box::new(is(Verdict::Tentative)),
                false,
                false,
            ),
            (
                "a failure with commits keeps them",
                facts(failed("no", ResultKind::Fail)),
                Box::new(is(failed("no", ResultKind::Fail))),
                false,
                true,
            ),
            (
                "a failure without commits keeps nothing",
                with(|f| f.commits = 0, failed("no", ResultKind::Fail)),
                Box::new(is(failed("no", ResultKind::Fail))),
                false,
                false,
            ),
            (
                "an interrupted attempt with commits keeps them",
                facts(Verdict::Interrupted),
                Box::new(is(Verdict::Interrupted)),
                false,
                true,
            ),
            (
                "a limit with commits keeps them",
                facts(Verdict::RateLimited { resets_at: None }),
                Box::new(is(Verdict::RateLimited { resets_at: None })),
                false,
                true,
            ),
            (
                "a fault is no attempt: no ref",
                facts(Verdict::Fault {
                    reason: "x".into(),
                    kind: FaultKind::Api,
                }),
                Box::new(fault(FaultKind::Api)),
                false,
                false,
            ),
            (
                "a timeout has its postmortem",
                facts(timeout()),
                Box::new(is(timeout())),
                true,
                true,
            ),
            (
                "the agent moved the target: it stops, even after a DONE, its branch kept",
                with(
                    |f| {
                        f.moved = Some(moved());
                        f.commits = 0;
                        f.auth_rejected = true;
                    },
                    Verdict::Done,
                ),
                Box::new(|v| {
                    fault(FaultKind::StopNow)(v)
                        && reason_has("moved main itself, from aaa to its own")(v)
                        && reason_has("git update-ref refs/heads/main aaa bbb")(v)
                }),
                false,
                true,
            ),
            (
                "rejected credentials stop it",
                with(|f| f.auth_rejected = true, timeout()),
                Box::new(|v| {
                    fault(FaultKind::StopNow)(v)
                        && reason_has("the claude agent's credentials were rejected")(v)
                }),
                false,
                false,
            ),
            (
                "a decomposition's answer is its verdict",
                with(
                    |f| {
                        f.decomposing = true;
                        f.split = Some(Ok(failed("refused", ResultKind::Fail)));
                    },
                    Verdict::Done,
                ),
                Box::new(is(failed("refused", ResultKind::Fail))),
                false,
                true,
            ),
            (
                "a decomposition without DONE still answered",
                with(
                    |f| {
                        f.decomposing = true;
                        f.split = Some(Ok(Verdict::Done));
                    },
                    failed("no DONE", ResultKind::Fail),
                ),
                Box::new(is(Verdict::Done)),
                false,
                false,
            ),
            (
                "a decomposition whose writer failed is a transient fault",
                with(
                    |f| {
                        f.decomposing = true;
                        f.split = Some(Err("panicked".into()));
                    },
                    Verdict::Done,
                ),
                Box::new(|v| {
                    fault(FaultKind::Transient)(v)
                        && reason_has("the decomposition's writer failed: panicked")(v)
                }),
                false,
                false,
            ),
            (
                "a decomposition that timed out keeps its timeout, without postmortem",
                with(|f| f.decomposing = true, timeout()),
                Box::new(is(timeout())),
                false,
                true,
            ),
            (
                "a DONE that changed nothing fails",
                with(
                    |f| f.done = Some(Ok(done_check(false, true, false))),
                    Verdict::Done,
                ),
                Box::new(is(failed(
                    "reported DONE but changed nothing",
                    ResultKind::Fail,
                ))),
                false,
                true,
            ),
            (
                "a DONE that changed nothing, allowed, is done",
                with(
                    |f| f.done = Some(Ok(done_check(false, true, true))),
                    Verdict::Done,
                ),
                Box::new(is(Verdict::Done)),
                false,
                false,
            ),
            (
                "a DONE whose leftovers could not be committed is a transient fault",
                with(|f| f.done = Some(Err("disk full".into())), Verdict::Done),
                Box::new(|v| {
                    fault(FaultKind::Transient)(v)
                        && reason_has("(disk full); what it left is kept at ")(v)
                        && reason_has("attempts/S-1/2-uncommitted")(v)
                }),
                false,
                false,
            ),
            (
                "ralph's commit of the leftovers counts: a failing DONE keeps it",
                with(
                    |f| {
                        f.commits = 0;
                        f.done = Some(Ok(done_check(true, true, false)));
                    },
                    Verdict::Done,
                ),
                Box::new(reason_has("reported DONE but changed nothing")),
                false,
                true,
            ),
            (
                "a fix-up that committed nothing fails",
                with(
                    |f| {
                        f.commits = 0;
                        f.fixup_merge = Some(Vec::new());
                        f.done = Some(Ok(done_check(false, false, false)));
                    },
                    Verdict::Done,
                ),
                Box::new(reason_has("the fix-up committed nothing")),
                false,
                false,
            ),
            (
                "a fix-up whose leftovers ralph committed did commit",
                with(
                    |f| {
                        f.commits = 0;
                        f.fixup_merge = Some(Vec::new());
                        f.done = Some(Ok(done_check(true, false, false)));
                    },
                    Verdict::Done,
                ),
                Box::new(is(Verdict::Done)),
                false,
                false,
            ),
            (
                "a tentative fix-up with conflict markers fails",
                with(
                    |f| f.fixup_merge = Some(vec!["a.rs".into(), "b.rs".into()]),
                    Verdict::Tentative,
                ),
                Box::new(is(failed(
                    "the fix-up committed conflict markers in a.rs, b.rs",
                    ResultKind::Fail,
                ))),
                false,
                true,
            ),
            (
                "a fix-up's failure is its own",
                with(|f| f.fixup_merge = Some(vec!["a.rs".into()]), timeout()),
                Box::new(is(timeout())),
                true,
                true,
            ),
        ];
        for (what, f, want, postmortem, save_ref) in rows {
            let v = decide(&f);
            assert!(want(&v), "{what}: {v:?}");
            assert_eq!(
                follow_ups(&f, &v, true),
                FollowUps {
                    postmortem,
                    save_ref
                },
                "{what}"
            );
        }
    }

    #[test]
    fn the_postmortem_runs_only_when_enabled() {
        let f = facts(timeout());
        assert!(!follow_ups(&f, &decide(&f), false).postmortem);
    }

    /// The two readings that write happen only when their answer counts.
    #[test]
    fn split_and_done_check_are_asked_for_only_when_they_count() {
        let dec = |v: Verdict| AttemptFacts {
            decomposing: true,
            ..facts(v)
        };
        assert!(wants_split(&dec(Verdict::Done)));
        assert!(wants_split(&dec(failed("no DONE", ResultKind::Fail))));
        assert!(wants_split(&dec(Verdict::Tentative)));
        for v in [
            timeout(),
            Verdict::Interrupted,
            Verdict::RateLimited { resets_at: None },
            Verdict::RootRefusal,
            Verdict::Fault {
                reason: "x".into(),
                kind: FaultKind::Transient,
            },
        ] {
            assert!(!wants_split(&dec(v.clone())), "{v:?}");
        }
        assert!(!wants_split(&facts(Verdict::Done)));
        let mut stopped = dec(Verdict::Done);
        stopped.auth_rejected = true;
        assert!(!wants_split(&stopped));

        assert!(wants_done_check(&facts(Verdict::Done)));
        assert!(!wants_done_check(&facts(Verdict::Tentative)));
        assert!(!wants_done_check(&dec(Verdict::Done)));
        let mut stopped = facts(Verdict::Done);
        stopped.moved = Some(moved());
        assert!(!wants_done_check(&stopped));
    }

    #[test]
    fn post_hooks_wait_for_the_landing_and_skip_an_interrupt() {
        assert!(!post_hooks_now(&Verdict::Done));
        assert!(!post_hooks_now(&Verdict::Tentative));
        assert!(!post_hooks_now(&Verdict::Interrupted));
        assert!(post_hooks_now(&timeout()));
        assert!(post_hooks_now(&Verdict::RootRefusal));
        assert!(post_hooks_now(&Verdict::Fault {
            reason: "x".into(),
            kind: FaultKind::StopNow,
        }));
    }
}
