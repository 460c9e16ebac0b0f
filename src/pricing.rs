//! What tokens cost (issue 25): list prices of known models, which the
//! config's `pricing` overrides and extends, for backends that report
//! tokens but no cost (Codex, Gemini, Cursor). A model with no known price
//! costs "unknown", never zero. Pure.

use crate::agent::event::Usage;

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Price {
    pub(crate) input: f64,
    pub(crate) output: f64,
    pub(crate) cache_read: f64,
    pub(crate) cache_write: f64,
}

const fn p(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Price {
    Price {
        input,
        output,
        cache_read,
        cache_write,
    }
}

/// List prices (USD per million tokens, standard tier, short context) as
/// the providers published them in November 2026. A name matches a model
/// that is it or starts with it (`claude-opus-4-8[1m]`, a dated snapshot);
/// the longest match wins (`gpt-5-mini` before `gpt-5`).
pub(crate) const KNOWN: &[(&str, Price)] = &[
    ("opus", p(5.0, 25.0, 0.5, 6.25)),
    ("sonnet", p(3.0, 15.0, 0.3, 3.75)),
    ("haiku", p(1.0, 5.0, 0.1, 1.25)),
    ("claude-opus-4", p(5.0, 25.0, 0.5, 6.25)),
    ("claude-sonnet-4", p(3.0, 15.0, 0.3, 3.75)),
    ("claude-haiku-4", p(1.0, 5.0, 0.1, 1.25)),
    ("gpt-5", p(1.25, 10.0, 0.125, 1.25)),
    ("gpt-5-codex", p(1.25, 10.0, 0.125, 1.25)),
    ("gpt-5-mini", p(0.25, 2.0, 0.025, 0.25)),
    ("gpt-5-nano", p(0.05, 0.4, 0.005, 0.05)),
    ("gpt-5.1-codex-mini", p(0.25, 2.0, 0.025, 0.25)),
    ("o3", p(2.0, 8.0, 0.5, 2.0)),
    ("o4-mini", p(1.1, 4.4, 0.275, 1.1)),
    ("gemini-2.5-pro", p(1.25, 10.0, 0.125, 1.25)),
    ("gemini-2.5-flash", p(0.3, 2.5, 0.03, 0.3)),
    ("gemini-2.5-flash-lite", p(0.1, 0.4, 0.01, 0.1)),
];

/// The prices ralph knows: the config's `pricing` first, then `KNOWN`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Table {
    /// `pricing` in the config: model name → price (exact or prefix, as `KNOWN`).
    pub(crate) own: Vec<(String, Price)>,
}

/// A model's name as a price is looked up: opencode's `provider/` and
/// Claude Code's `[1m]` context tag left out.
fn bare(model: &str) -> &str {
    let m = model.rsplit('/').next().unwrap_or(model);
    m.split('[').next().unwrap_or(m).trim()
}

fn best<'a, I: Iterator<Item = (&'a str, Price)>>(model: &str, rows: I) -> Option<Price> {
    rows.filter(|(name, _)| model == *name || model.starts_with(name))
        .max_by_key(|(name, _)| name.len())
        .map(|(_, p)| p)
}

impl Table {
    /// The price of `model`, if known.
    pub(crate) fn price(&self, model: &str) -> Option<Price> {
        let full = model.trim();
        let m = bare(full);
        best(full, self.own.iter().map(|(n, p)| (n.as_str(), *p)))
            .or_else(|| best(m, self.own.iter().map(|(n, p)| (n.as_str(), *p))))
            .or_else(|| best(m, KNOWN.iter().copied()))
    }

    /// The cost of `usage` on `model`; `None` when its price is unknown.
    pub(crate) fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.price(model).map(|p| cost(usage, p))
    }
}

/// `usage` at `price`. Input tokens are those not read from the cache
/// (every decoder counts them so).
pub(crate) fn cost(usage: &Usage, price: Price) -> f64 {
    (usage.input_tokens as f64 * price.input
        + usage.output_tokens as f64 * price.output
        + usage.cache_read_input_tokens as f64 * price.cache_read
        + usage.cache_creation_input_tokens as f64 * price.cache_write)
        / 1e6
}

/// What an attempt cost: the CLI's own figure when it gives one, else its
/// tokens priced by the model it ran on; `None` (unknown) when neither is
/// known. An attempt that used no tokens by any account costs nothing
/// only when its CLI reports usage at all (`reports_usage`).
pub(crate) fn attempt_cost(
    table: &Table,
    reported: Option<f64>,
    model: Option<&str>,
    usage: &Usage,
    reports_usage: bool,
) -> Option<f64> {
    if let Some(c) = reported {
        return Some(c);
    }
    if let Some(c) = model.and_then(|m| table.cost(m, usage)) {
        return Some(c);
    }
    (reports_usage && *usage == Usage::default()).then_some(0.0)
}

/// One finished attempt, as a forecast of the next reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Past<'a> {
    pub(crate) model: Option<&'a str>,
    pub(crate) cost_usd: f64,
}

/// What an attempt about to start on `model` is expected to cost, for the
/// budget's look ahead: the most expensive past attempt on that model, or
/// on any when none ran on it; `None` without history. Issue 25 item 7's
/// forecast may replace this; the budget only needs a number per attempt.
pub(crate) fn expected_cost(past: &[Past<'_>], model: Option<&str>) -> Option<f64> {
    let max = |it: &mut dyn Iterator<Item = &Past<'_>>| {
        it.map(|p| p.cost_usd)
            .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.max(c))))
    };
    max(&mut past.iter().filter(|p| model.is_some() && p.model == model))
        .or_else(|| max(&mut past.iter()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, read: u64, write: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_input_tokens: read,
            cache_creation_input_tokens: write,
        }
    }

    #[test]
    fn the_notes_claude_call_prices_as_claude_code_priced_it() {
        // The workspace notes (agents.md 1.2): one Opus call, $0.011425.
        let u = usage(1200, 42, 5000, 300);
        let c = Table::default().cost("claude-opus-4-8[1m]", &u).unwrap();
        assert!((c - 0.011425).abs() < 1e-9, "{c}");
    }

    #[test]
    fn the_longest_name_wins_and_the_config_comes_first() {
        let t = Table::default();
        assert_eq!(t.price("gpt-5-mini-2026-08").unwrap().input, 0.25);
        assert_eq!(t.price("gpt-5").unwrap().input, 1.25);
        assert_eq!(t.price("openai/gpt-5-codex").unwrap().output, 10.0);
        assert_eq!(t.price("no-such-model"), None);
        let own = Table {
            own: vec![
                ("gpt-5".into(), p(9.0, 9.0, 9.0, 9.0)),
                ("mine".into(), p(1.0, 1.0, 1.0, 1.0)),
            ],
        };
        assert_eq!(own.price("gpt-5").unwrap().input, 9.0);
        assert_eq!(own.price("mine-large").unwrap().input, 1.0);
        assert_eq!(own.price("haiku").unwrap().input, 1.0);
    }

    #[test]
    fn the_expected_cost_is_the_dearest_past_attempt_on_the_model() {
        let past = [
            Past {
                model: Some("haiku"),
                cost_usd: 0.1,
            },
            Past {
                model: Some("haiku"),
                cost_usd: 0.3,
            },
            Past {
                model: Some("opus"),
                cost_usd: 2.0,
            },
        ];
        assert_eq!(expected_cost(&past, Some("haiku")), Some(0.3));
        assert_eq!(expected_cost(&past, Some("sonnet")), Some(2.0));
        assert_eq!(expected_cost(&past, None), Some(2.0));
        assert_eq!(expected_cost(&[], Some("haiku")), None);
    }

    #[test]
    fn a_cost_is_reported_priced_zero_or_unknown_never_a_made_up_zero() {
        let t = Table::default();
        let u = usage(1_000_000, 0, 0, 0);
        assert_eq!(
            attempt_cost(&t, Some(0.5), Some("gpt-5"), &u, true),
            Some(0.5)
        );
        assert_eq!(attempt_cost(&t, None, Some("gpt-5"), &u, true), Some(1.25));
        assert_eq!(attempt_cost(&t, None, Some("mystery"), &u, true), None);
        assert_eq!(attempt_cost(&t, None, None, &u, true), None);
        assert_eq!(
            attempt_cost(&t, None, None, &Usage::default(), true),
            Some(0.0)
        );
        assert_eq!(attempt_cost(&t, None, None, &Usage::default(), false), None);
    }
}
