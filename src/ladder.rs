//! Which model (and backend) an attempt runs on (issue 25): the story's
//! own word, `--model`, `agent.model`, and the escalation ladder
//! (`agent.escalation`) that retries climb. Pure: plain data in, a choice
//! out; the transition asks it before every start.

use crate::agent::{Backend, Rung};
use crate::backlog::{Effort, ModelChoice};
use crate::state::AttemptKind;

/// The model an attempt runs on, and the backend when the rung names one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Choice {
    pub(crate) agent: Option<Backend>,
    pub(crate) model: Option<String>,
}

/// What the choice depends on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask<'a> {
    /// `agent.escalation`, cheapest first.
    pub(crate) ladder: &'a [Rung],
    /// `agent.model`.
    pub(crate) base: Option<&'a str>,
    /// `ralph run --model`: every attempt of the run on it, the ladder off.
    pub(crate) pinned: Option<&'a str>,
    /// The story's frontmatter (prd.json) `model:` and `effort:`.
    pub(crate) story: &'a ModelChoice,
    /// The story's own `agent:`: rungs of other backends are passed over.
    pub(crate) story_agent: Option<Backend>,
    pub(crate) kind: AttemptKind,
    /// The story's attempts counted so far (failed ones; a conflict, a
    /// usage limit or an interruption is none): attempt n is `failed + 1`.
    pub(crate) failed: u32,
    /// What ran the attempt a fix-up fixes.
    pub(crate) fixed: Option<&'a Choice>,
}

/// The rung a story starts on: its `model:` where the ladder has it, else
/// its `effort:` (low the first rung, medium the middle, high the top).
fn first_rung(ladder: &[Rung], story: &ModelChoice) -> usize {
    let last = ladder.len().saturating_sub(1);
    if let Some(at) = story
        .model
        .as_deref()
        .and_then(|m| ladder.iter().position(|r| r.model == m))
    {
        return at;
    }
    match story.effort {
        None | Some(Effort::Low) => 0,
        Some(Effort::Medium) => (ladder.len() / 2).min(last),
        Some(Effort::High) => last,
    }
}

/// The rungs a story may run on: all of them, or those its own backend
/// can run when its frontmatter names one.
fn usable(ask: &Ask<'_>) -> Vec<Rung> {
    ask.ladder
        .iter()
        .filter(|r| match (ask.story_agent, r.agent) {
            (Some(mine), Some(theirs)) => mine == theirs,
            _ => true,
        })
        .cloned()
        .collect()
}

fn from_rung(r: &Rung) -> Choice {
    Choice {
        agent: r.agent,
        model: Some(r.model.clone()),
    }
}

/// The model an attempt runs on. A fix-up continues on what made the work
/// it fixes; a decomposition takes the top rung; with a ladder, attempt n
/// runs rung min(first + n - 1, last); without one, the story's model,
/// else `agent.model`. `--model` pins every attempt but a fix-up.
pub(crate) fn choose(ask: &Ask<'_>) -> Choice {
    if ask.kind == AttemptKind::Fixup {
        if let Some(f) = ask.fixed {
            return f.clone();
        }
    }
    if let Some(m) = ask.pinned {
        return Choice {
            agent: None,
            model: Some(m.to_string()),
        };
    }
    let ladder = usable(ask);
    let plain = || Choice {
        agent: None,
        model: ask.story.model.as_deref().or(ask.base).map(str::to_string),
    };
    let Some(top) = ladder.last() else {
        return plain();
    };
    if ask.kind == AttemptKind::Decompose {
        return from_rung(top);
    }
    let off_ladder = ask
        .story
        .model
        .as_deref()
        .is_some_and(|m| !ladder.iter().any(|r| r.model == m));
    // A model the ladder does not have runs the first attempt; retries
    // climb the ladder from the rung they would have reached.
    if off_ladder && ask.failed == 0 {
        return plain();
    }
    let start = if off_ladder {
        0
    } else {
        first_rung(&ladder, ask.story)
    };
    let at = (start + ask.failed as usize).min(ladder.len() - 1);
    from_rung(&ladder[at])
}

/// The top rung (postmortems), else `agent.model`.
pub(crate) fn top(ladder: &[Rung], base: Option<&str>) -> Choice {
    match ladder.last() {
        Some(r) => from_rung(r),
        None => Choice {
            agent: None,
            model: base.map(str::to_string),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rung(agent: Option<Backend>, model: &str) -> Rung {
        Rung {
            agent,
            model: model.into(),
        }
    }

    fn ladder() -> Vec<Rung> {
        vec![
            rung(None, "haiku"),
            rung(None, "sonnet"),
            rung(None, "opus"),
        ]
    }

    fn ask<'a>(
        ladder: &'a [Rung],
        story: &'a ModelChoice,
        kind: AttemptKind,
        failed: u32,
    ) -> Ask<'a> {
        Ask {
            ladder,
            base: Some("base"),
            pinned: None,
            story,
            story_agent: None,
            kind,
            failed,
            fixed: None,
        }
    }

    fn model(c: Choice) -> String {
        c.model.unwrap_or_default()
    }

    fn story(model: Option<&str>, effort: Option<Effort>) -> ModelChoice {
        ModelChoice {
            model: model.map(str::to_string),
            effort,
            best_of: None,
        }
    }

    #[test]
    fn attempt_n_runs_rung_n_minus_one_up_to_the_top() {
        let l = ladder();
        let s = story(None, None);
        let got: Vec<String> = (0..5)
            .map(|failed| {
                let kind = if failed == 0 {
                    AttemptKind::First
                } else {
                    AttemptKind::Redo
                };
                model(choose(&ask(&l, &s, kind, failed)))
            })
            .collect();
        assert_eq!(got, ["haiku", "sonnet", "opus", "opus", "opus"]);
    }

    #[test]
    fn the_story_picks_its_first_rung() {
        let l = ladder();
        let table = [
            (story(Some("sonnet"), None), 0, "sonnet"),
            (story(Some("sonnet"), None), 1, "opus"),
            (story(None, Some(Effort::Low)), 0, "haiku"),
            (story(None, Some(Effort::Medium)), 0, "sonnet"),
            (story(None, Some(Effort::High)), 0, "opus"),
            (story(None, Some(Effort::High)), 3, "opus"),
            // `model:` wins over `effort:`.
            (story(Some("haiku"), Some(Effort::High)), 0, "haiku"),
            // Off the ladder: the first attempt, then the ladder.
            (story(Some("gpt-5"), None), 0, "gpt-5"),
            (story(Some("gpt-5"), None), 1, "sonnet"),
        ];
        for (s, failed, want) in table {
            let kind = if failed == 0 {
                AttemptKind::First
            } else {
                AttemptKind::Redo
            };
            assert_eq!(
                model(choose(&ask(&l, &s, kind, failed))),
                want,
                "{s:?} after {failed}"
            );
        }
    }

    #[test]
    fn fixups_keep_the_model_splits_take_the_top_and_pins_hold() {
        let l = ladder();
        let s = story(None, None);
        let fixed = Choice {
            agent: None,
            model: Some("haiku".into()),
        };
        let mut a = ask(&l, &s, AttemptKind::Fixup, 2);
        a.fixed = Some(&fixed);
        assert_eq!(model(choose(&a)), "haiku");
        assert_eq!(
            model(choose(&ask(&l, &s, AttemptKind::Decompose, 3))),
            "opus"
        );
        let mut p = ask(&l, &s, AttemptKind::Redo, 2);
        p.pinned = Some("pinned");
        assert_eq!(model(choose(&p)), "pinned");
        assert_eq!(model(top(&l, Some("base"))), "opus");
        assert_eq!(model(top(&[], Some("base"))), "base");
    }

    #[test]
    fn without_a_ladder_the_story_or_the_config_says() {
        let s = story(Some("mine"), None);
        assert_eq!(model(choose(&ask(&[], &s, AttemptKind::Redo, 4))), "mine");
        let none = story(None, Some(Effort::High));
        assert_eq!(
            model(choose(&ask(&[], &none, AttemptKind::First, 0))),
            "base"
        );
        let mut a = ask(&[], &none, AttemptKind::First, 0);
        a.base = None;
        assert_eq!(choose(&a), Choice::default());
    }

    #[test]
    fn rungs_may_change_backend_unless_the_story_names_its_own() {
        let l = vec![
            rung(None, "haiku"),
            rung(Some(Backend::Codex), "gpt-5"),
            rung(None, "opus"),
        ];
        let s = story(None, None);
        let c = choose(&ask(&l, &s, AttemptKind::Redo, 1));
        assert_eq!(
            (c.agent, model(c)),
            (Some(Backend::Codex), "gpt-5".to_string())
        );
        let mut own = ask(&l, &s, AttemptKind::Redo, 1);
        own.story_agent = Some(Backend::Claude);
        assert_eq!(model(choose(&own)), "opus");
    }
}
