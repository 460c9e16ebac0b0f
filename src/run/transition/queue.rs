//! The merge queue's depth (issue 34, docs/merge-queue.md): how many
//! waiting stories the next chain takes, what a chain's results leave in
//! the queue, and how the window moves, as Zuul's does: one more per
//! landing up to `landing.speculate`, halved by a failed validation (never
//! below one), so a flaky suite throttles itself. Pure.

use crate::run::events::LandResult;

/// How many of the `waiting` stories the next chain takes.
pub(crate) fn chain_len(window: usize, waiting: usize) -> usize {
    window.max(1).min(waiting)
}

/// What a chain's results say for the window: stories landed, and whether
/// a validation failed (a story's own fault, the one thing that shrinks it).
pub(crate) fn tally(results: &[LandResult]) -> (usize, bool) {
    let landed = results
        .iter()
        .filter(|r| matches!(r, LandResult::Landed { .. }))
        .count();
    let failed = results
        .iter()
        .any(|r| matches!(r, LandResult::ValidationFailed { .. }));
    (landed, failed)
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

/// The positions of a chain's results that go back to the front of the
/// queue, in chain order: those behind a failure, and those the chain
/// gave no result for.
pub(crate) fn requeued(chain_len: usize, results: &[LandResult]) -> Vec<usize> {
    (0..chain_len)
        .filter(|&i| matches!(results.get(i), None | Some(LandResult::Behind)))
        .collect()
}

/// `ralph run -d`'s line on the merge queue: how deep its chains go and
/// why, and what each landing validates.
pub(crate) fn describe(speculate: usize, one_at_a_time: Option<&str>, required: usize) -> String {
    let depth = match one_at_a_time {
        Some(why) => format!("one landing at a time ({why})"),
        None if speculate <= 1 => "one landing at a time (landing.speculate: 1)".to_string(),
        None => format!(
            "chains of up to {speculate} merges validated side by side (landing.speculate; \
             halved after a failed validation)"
        ),
    };
    let what = match required {
        0 => "no required validation command: merges land unvalidated".to_string(),
        1 => "1 required validation command per candidate".to_string(),
        n => format!("{n} required validation commands per candidate"),
    };
    format!("merge queue: {depth}; {what}")
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
                chain_len(window, waiting),
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
    fn the_dry_run_says_how_the_queue_lands() {
        assert_eq!(
            describe(4, None, 1),
            "merge queue: chains of up to 4 merges validated side by side (landing.speculate; \
             halved after a failed validation); 1 required validation command per candidate"
        );
        assert_eq!(
            describe(4, Some("landing.mode: review"), 0),
            "merge queue: one landing at a time (landing.mode: review); no required validation \
             command: merges land unvalidated"
        );
        assert!(describe(1, None, 2).contains("landing.speculate: 1"));
    }

    #[test]
    fn what_is_behind_a_failure_goes_back_in_order() {
        let r = vec![landed(), failed(), LandResult::Behind, LandResult::Behind];
        assert_eq!(requeued(4, &r), vec![2, 3]);
        assert_eq!(tally(&r), (1, true));
        // A chain cut short: what has no result goes back too.
        assert_eq!(requeued(3, &[failed()]), vec![1, 2]);
        assert_eq!(requeued(2, &[landed(), landed()]), Vec::<usize>::new());
        assert_eq!(tally(&[landed(), landed()]), (2, false));
    }
}
