//! Where a backlog's agent runs went (`State::waste`): first tries,
//! fix-ups, redos and failures, for `stats` and the report.

use serde::Serialize;

/// Agent runs, tokens and cost of one kind of attempt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct Tally {
    pub(crate) runs: u32,
    pub(crate) tokens: u64,
    pub(crate) cost_usd: f64,
}

/// Where the agent runs went (`State::waste`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct Waste {
    /// Stories landed.
    pub(crate) landed: usize,
    pub(crate) first: Tally,
    pub(crate) fixup: Tally,
    pub(crate) redo: Tally,
    /// Runs of any kind that failed (their work did not land).
    pub(crate) failed: Tally,
}

impl Waste {
    /// Every agent run (first tries, fix-ups and redos).
    pub(crate) fn all(&self) -> Tally {
        let mut t = Tally::default();
        for k in [self.first, self.fixup, self.redo] {
            t.runs += k.runs;
            t.tokens += k.tokens;
            t.cost_usd += k.cost_usd;
        }
        t
    }

    /// What was added since `before` (this run's share: the whole run's
    /// waste less the one it started with).
    pub(crate) fn since(&self, before: &Waste) -> Waste {
        let less = |a: Tally, b: Tally| Tally {
            runs: a.runs.saturating_sub(b.runs),
            tokens: a.tokens.saturating_sub(b.tokens),
            cost_usd: (a.cost_usd - b.cost_usd).max(0.0),
        };
        Waste {
            landed: self.landed.saturating_sub(before.landed),
            first: less(self.first, before.first),
            fixup: less(self.fixup, before.fixup),
            redo: less(self.redo, before.redo),
            failed: less(self.failed, before.failed),
        }
    }

    /// Runs, tokens and cost per landed story; `None` before one landed.
    pub(crate) fn per_landed(&self) -> Option<(f64, f64, f64)> {
        let all = self.all();
        (self.landed > 0).then(|| {
            let n = self.landed as f64;
            (
                f64::from(all.runs) / n,
                all.tokens as f64 / n,
                all.cost_usd / n,
            )
        })
    }
}
