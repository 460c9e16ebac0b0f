//! `attempts.*`: best of N (issue 36), several candidates racing for one
//! attempt at a story.

use super::reader::Reader;
use crate::agent::Backend;

/// `attempts.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attempts {
    /// `attempts.best_of` (default 1): how many candidates race for each
    /// attempt; 1 is one agent at a time, as ever.
    pub(crate) best_of: u32,
    /// `attempts.candidates`: who candidate k runs as, entry (k−1) mod len;
    /// empty, every candidate runs as the story's own agent and model.
    pub(crate) candidates: Vec<CandidateSpec>,
    /// `attempts.pick` (default `first`): which passing candidate lands.
    pub(crate) pick: Pick,
    /// `attempts.judge.agent` / `.model`: the agent that picks among the
    /// passing candidates under `pick: judge`; `None`, the fixed ranking.
    pub(crate) judge: Option<CandidateSpec>,
}

/// `attempts.pick`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Pick {
    /// The first candidate whose work lands; the others are stopped.
    #[default]
    First,
    /// Every candidate finishes; among those whose work passes, the fixed
    /// ranking picks: the smallest diff, then the earliest finish.
    Judge,
}

/// One entry of `attempts.candidates`: `"agent"` or `"agent:model"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CandidateSpec {
    pub(crate) agent: Backend,
    /// `None`: the CLI's own model (or the story's, for its own agent).
    pub(crate) model: Option<String>,
}

impl CandidateSpec {
    /// `"agent"` or `"agent:model"`; `Err` says what is wrong with it.
    pub(crate) fn parse(entry: &str) -> Result<CandidateSpec, String> {
        let (name, model) = match entry.trim().split_once(':') {
            Some((n, m)) => (n.trim(), Some(m.trim())),
            None => (entry.trim(), None),
        };
        let agent = Backend::parse(name).ok_or_else(|| {
            format!(
                "names the agent {name:?}, not one ralph knows; one of: {}",
                Backend::names()
            )
        })?;
        let model = match model {
            Some("") => return Err(format!("{entry:?} has no model after the ':'")),
            Some(m) if agent.model_flag().is_none() => {
                return Err(format!(
                    "runs {m:?} on the {} agent, which has no choice of model on its command line",
                    agent.name()
                ))
            }
            m => m.map(str::to_string),
        };
        Ok(CandidateSpec { agent, model })
    }
}

pub(super) fn attempts(r: &mut Reader) -> Attempts {
    let best_of = r.uint(
        "attempts.best_of",
        1,
        "a whole number of candidates of at least 1 (1: one agent at a time)",
    );
    let mut candidates = Vec::new();
    for entry in r.strings("attempts.candidates").unwrap_or_default() {
        match CandidateSpec::parse(&entry) {
            Ok(c) => candidates.push(c),
            Err(why) => r.problem(
                "attempts.candidates",
                format!(
                    "attempts.candidates entry {entry:?} {why}; write \"agent\" or \
                     \"agent:model\", such as \"claude:sonnet\""
                ),
            ),
        }
    }
    let pick = match r.string("attempts.pick", false).as_str() {
        "first" => Pick::First,
        "judge" => Pick::Judge,
        other => {
            r.problem(
                "attempts.pick",
                format!(
                    "attempts.pick {other:?} is not one ralph has: \"first\" (the first \
                     candidate whose work lands) or \"judge\" (every candidate finishes, the \
                     best passing one lands)"
                ),
            );
            Pick::First
        }
    };
    let judge = judge(r);
    Attempts {
        best_of: best_of.min(u32::MAX as u64) as u32,
        candidates,
        pick,
        judge,
    }
}

/// `attempts.judge.agent` and `.model`, read as a candidate entry is.
fn judge(r: &mut Reader) -> Option<CandidateSpec> {
    let model = r
        .get("attempts.judge.model")
        .is_some()
        .then(|| r.string("attempts.judge.model", false))
        .filter(|m| !m.trim().is_empty());
    let agent = r
        .get("attempts.judge.agent")
        .is_some()
        .then(|| r.string("attempts.judge.agent", false))?;
    let entry = match &model {
        Some(m) => format!("{}:{m}", agent.trim()),
        None => agent.trim().to_string(),
    };
    match CandidateSpec::parse(&entry) {
        Ok(j) => Some(j),
        Err(why) => {
            r.problem(
                "attempts.judge.agent",
                format!("attempts.judge.agent/model {entry:?} {why}"),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_candidate_is_an_agent_and_maybe_its_model() {
        assert_eq!(
            CandidateSpec::parse("claude:opus"),
            Ok(CandidateSpec {
                agent: Backend::Claude,
                model: Some("opus".into())
            })
        );
        assert_eq!(
            CandidateSpec::parse(" codex "),
            Ok(CandidateSpec {
                agent: Backend::Codex,
                model: None
            })
        );
        assert!(CandidateSpec::parse("nobody:x")
            .unwrap_err()
            .contains("nobody"));
        assert!(CandidateSpec::parse("claude:").is_err());
        assert!(CandidateSpec::parse("amp:fast")
            .unwrap_err()
            .contains("no choice of model"));
    }

    fn read(v: serde_json::Value) -> Result<Attempts, Vec<crate::error::Problem>> {
        let mut all = crate::config::defaults();
        crate::config::deep_merge(&mut all, v);
        crate::config::from_value(all, std::path::Path::new(".ralph/config.json"))
            .map(|c| c.attempts)
    }

    #[test]
    fn best_of_is_at_least_one_and_a_bad_one_names_its_key() {
        assert_eq!(read(serde_json::json!({})).unwrap().best_of, 1);
        let a =
            read(serde_json::json!({"attempts": {"best_of": 3, "candidates": ["claude:opus"]}}))
                .unwrap();
        assert_eq!((a.best_of, a.candidates.len()), (3, 1));
        for bad in [
            serde_json::json!(0),
            serde_json::json!("x"),
            serde_json::json!(-2),
        ] {
            let problems = read(serde_json::json!({"attempts": {"best_of": bad}})).unwrap_err();
            assert!(
                problems[0].to_string().contains("attempts.best_of"),
                "{problems:?}"
            );
        }
        let problems =
            read(serde_json::json!({"attempts": {"candidates": ["wizard:x"]}})).unwrap_err();
        assert!(problems[0].to_string().contains("attempts.candidates"));
        assert_eq!(read(serde_json::json!({})).unwrap().pick, Pick::First);
        let judge = read(serde_json::json!({"attempts": {"pick": "judge"}})).unwrap();
        assert_eq!(judge.pick, Pick::Judge);
        let problems = read(serde_json::json!({"attempts": {"pick": "best"}})).unwrap_err();
        assert!(problems[0].to_string().contains("attempts.pick"));
        let j =
            read(serde_json::json!({"attempts": {"judge": {"agent": "claude", "model": "opus"}}}))
                .unwrap()
                .judge;
        assert_eq!(j, CandidateSpec::parse("claude:opus").ok());
        let problems =
            read(serde_json::json!({"attempts": {"judge": {"agent": "oracle"}}})).unwrap_err();
        assert!(problems[0].to_string().contains("attempts.judge.agent"));
    }
}
