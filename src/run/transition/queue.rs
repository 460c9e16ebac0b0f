//! The merge queue's depth (issue 34, docs/merge-queue.md): how many
//! waiting stories the next chain takes, what a chain's results leave in
//! the queue, and how the window moves, as Zuul's does: one more per
//! landing up to `landing.speculate`, halved by a failed validation (never
//! below one), so a flaky suite throttles itself. Pure.

use crate::run::events::LandResult;

/// What a chain's results say for the window: stories landed, and whether
/// a validation failed (a story's own fault, the one thing that shrinks it).
pub(crate) fn tally<'a>(results: impl IntoIterator<Item = &'a LandResult>) -> (usize, bool) {
    results
        .into_iter()
        .fold((0, false), |(landed, failed), r| match r {
            LandResult::Landed { .. } => (landed + 1, failed),
            LandResult::ValidationFailed { .. } => (landed, true),
            _ => (landed, failed),
        })
}

/// The window after a chain that landed `landed` stories and had a failed
/// validation or not, never above `ceiling` nor below one.
pub(crate) fn window_after(window: usize, ceiling: usize, landed: usize, failed: bool) -> usize {
    let ceiling = ceiling.max(1);
    let next = if failed {
        window / 2
    } else {
        window.saturating_add(landed)
    };
    next.clamp(1, ceiling)
}

/// Why the merge queue lands one story at a time, when it must: a person
/// or a reviewer looks at one merged tree at a time.
pub(crate) fn one_at_a_time(c: &crate::config::Config) -> Option<&'static str> {
    if c.landing.review {
        Some("landing.mode: review")
    } else if c.landing.pr_remote.is_some() {
        Some("landing.mode: pr")
    } else if c.gates.review.is_some() {
        Some("the reviewer gate looks at one merge at a time")
    } else {
        None
    }
}

/// `ralph run -d`'s line on where the merge queue validates
/// (`validation.where`).
pub(crate) fn where_line(c: &crate::config::Config) -> String {
    use crate::config::ValidationWhere;
    let max = match c.landing.max_validations {
        0 => String::new(),
        n => format!("; at most {n} at once (landing.max_validations)"),
    };
    match c.validation.where_ {
        ValidationWhere::Coordinator => format!(
            "validations: on this machine, each candidate in a worktree of its own \
             (validation.where: coordinator){max}"
        ),
        _ if !c.validates_remotely() => format!(
            "validations: on this machine (validation.where: executor, with the local \
             executor, is the coordinator){max}"
        ),
        _ => format!(
            "validations: as jobs on the executor's nodes, next to the attempts \
             (validation.where: executor); the cluster's room bounds how many run at once, \
             the rest wait in its queue{max}; this machine still merges and moves the target"
        ),
    }
}

/// The queue's shape for a run on `machine`: the deepest chain
/// (`landing.speculate`, never above the room for validations,
/// `batch::room`) and the stories per candidate (`landing.batch`); (1, 1)
/// when it must land one at a time.
pub(crate) fn shape(c: &crate::config::Config, machine: super::batch::Machine) -> (usize, usize) {
    if one_at_a_time(c).is_some() {
        return (1, 1);
    }
    let room = super::batch::room(c.landing.max_validations, machine);
    (c.landing.speculate.min(room).max(1), c.landing.batch.max(1))
}

/// `ralph run -d`'s line on the merge queue: how deep its chains go and
/// why, how many stories a candidate holds, and what each validates.
pub(crate) fn describe(
    (speculate, batch): (usize, usize),
    one_at_a_time: Option<&str>,
    required: usize,
) -> String {
    let depth = match one_at_a_time {
        Some(why) => format!("one landing at a time ({why})"),
        None if speculate <= 1 => "one landing at a time (landing.speculate: 1)".to_string(),
        None if batch > 1 => format!(
            "chains of up to {speculate} merges validated side by side (landing.speculate; \
             halved after a failed validation)"
        ),
        None => format!(
            "chains of up to {speculate} merges validated side by side, a story joining the \
             chain in flight as it finishes (landing.speculate; halved after a failed \
             validation)"
        ),
    };
    let batches = match (one_at_a_time, batch) {
        (None, b) if b > 1 => format!(
            "; batches of up to {b} stories validated once (landing.batch; bisected on a \
             failure)"
        ),
        _ => String::new(),
    };
    let what = match required {
        0 => "no required validation command: merges land unvalidated".to_string(),
        1 => "1 required validation command per candidate".to_string(),
        n => format!("{n} required validation commands per candidate"),
    };
    format!("merge queue: {depth}{batches}; {what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn landed() -> LandResult {
        LandResult::Landed {
            commit: "c".to_string(),
        }
    }

    fn failed() -> LandResult {
        LandResult::ValidationFailed {
            name: "test".to_string(),
            cmd: "false".to_string(),
            tail: String::new(),
            saved_ref: None,
            log_rel: String::new(),
        }
    }

    #[test]
    fn a_chain_takes_the_window_or_what_waits() {
        for (window, waiting, len) in [(4, 10, 4), (4, 2, 2), (1, 5, 1), (0, 5, 1), (8, 0, 0)] {
            assert_eq!(
                super::super::batch::take(window, 1, waiting),
                len,
                "window {window}, {waiting} waiting"
            );
        }
    }

    #[test]
    fn the_window_halves_on_a_failure_and_grows_by_landings() {
        // (window, ceiling, landed, failed) -> window
        for (w, c, l, f, next) in [
            (4, 4, 4, false, 4),
            (2, 4, 1, false, 3),
            (2, 4, 5, false, 4),
            (4, 4, 1, true, 2),
            (3, 4, 2, true, 1),
            (1, 4, 0, true, 1),
            (1, 1, 3, false, 1),
            (6, 8, 0, false, 6),
        ] {
            assert_eq!(window_after(w, c, l, f), next, "{w} {c} {l} {f}");
        }
    }

    #[test]
    fn the_dry_run_says_where_validations_run() {
        let cfg = |extra: serde_json::Value| {
            let mut v = crate::config::defaults();
            crate::config::deep_merge(&mut v, extra);
            crate::config::from_value(v, std::path::Path::new("c.json")).unwrap()
        };
        let here = where_line(&cfg(serde_json::json!({})));
        assert!(here.contains("on this machine, each candidate"), "{here}");
        let local = where_line(&cfg(
            serde_json::json!({"validation": {"where": "executor"}}),
        ));
        assert!(
            local.contains("with the local executor, is the coordinator"),
            "{local}"
        );
        let ray = where_line(&cfg(serde_json::json!({
            "validation": {"where": "executor"},
            "landing": {"max_validations": 3},
            "executor": {"kind": "ray", "ray": {"address": "http://127.0.0.1:8265"}}
        })));
        assert!(ray.contains("as jobs on the executor's nodes"), "{ray}");
        assert!(ray.contains("at most 3 at once"), "{ray}");
    }

    #[test]
    fn the_dry_run_says_how_the_queue_lands() {
        assert_eq!(
            describe((4, 1), None, 1),
            "merge queue: chains of up to 4 merges validated side by side, a story joining the \
             chain in flight as it finishes (landing.speculate; halved after a failed \
             validation); 1 required validation command per candidate"
        );
        assert_eq!(
            describe((4, 6), Some("landing.mode: review"), 0),
            "merge queue: one landing at a time (landing.mode: review); no required validation \
             command: merges land unvalidated"
        );
        assert!(describe((1, 1), None, 2).contains("landing.speculate: 1"));
        assert!(describe((1, 6), None, 1)
            .contains("one landing at a time (landing.speculate: 1); batches of up to 6 stories"));
    }

    #[test]
    fn the_queue_lands_one_at_a_time_for_a_person_or_a_reviewer_else_as_configured() {
        let config = |landing: serde_json::Value| {
            let mut raw = crate::config::defaults();
            crate::config::deep_merge(&mut raw, serde_json::json!({ "landing": landing }));
            crate::config::from_value(raw, std::path::Path::new("config.json")).unwrap()
        };
        let machine = crate::run::transition::batch::Machine {
            cpus: 8,
            available_mb: None,
            per_validation_mb: 1024,
        };
        let c = config(serde_json::json!({ "speculate": 4, "batch": 6 }));
        assert_eq!((shape(&c, machine), one_at_a_time(&c)), ((4, 6), None));
        let c = config(serde_json::json!({ "speculate": 8, "max_validations": 2 }));
        assert_eq!(shape(&c, machine), (2, 1), "never deeper than the room");
        let c = config(serde_json::json!({ "mode": "review", "speculate": 4, "batch": 6 }));
        assert_eq!(shape(&c, machine), (1, 1));
        assert_eq!(one_at_a_time(&c), Some("landing.mode: review"));
    }

    #[test]
    fn a_chains_results_say_how_many_landed_and_whether_one_failed() {
        let r = vec![landed(), failed(), LandResult::Behind, LandResult::Behind];
        assert_eq!(tally(&r), (1, true));
        assert_eq!(tally(&[landed(), landed()]), (2, false));
        assert_eq!(tally(&[LandResult::Behind]), (0, false));
    }
}
