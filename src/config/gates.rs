//! `gates.*`: the trust gates before landing (issue 26).

use super::reader::Reader;
use crate::gates::UserPatterns;

/// `gates.tests`: what the test-integrity gate does with its findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum TestsGate {
    /// Findings send the work back as a fix-up (or to review when allowed).
    #[default]
    Block,
    /// Findings are recorded; the work lands.
    Warn,
    /// No check.
    Off,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Gates {
    pub(crate) tests: TestsGate,
    /// `gates.tests_patterns.*`, checked to compile.
    pub(crate) patterns: UserPatterns,
    /// `gates.review.*`: a second agent's review; `None` when off.
    pub(crate) review: Option<ReviewGate>,
}

/// `gates.review.*`: the reviewer that reads validated work before it lands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReviewGate {
    pub(crate) agent: crate::agent::Backend,
    /// `--model <model>` added to the reviewer's command line.
    pub(crate) model: Option<String>,
    /// CHANGES answers before the story waits for a person.
    pub(crate) max_rounds: u32,
}

pub(super) fn gates(r: &mut Reader) -> Gates {
    let tests = match r.string("gates.tests", false).as_str() {
        "block" => TestsGate::Block,
        "warn" => TestsGate::Warn,
        "off" => TestsGate::Off,
        other => {
            r.problem(
                "gates.tests",
                format!(
                    "gates.tests {other:?} is not one ralph has: \"block\" (weakened tests send \
                     the work back), \"warn\" (land it, findings recorded) or \"off\""
                ),
            );
            TestsGate::Block
        }
    };
    let mut list = |name: &str| {
        r.strings(&format!("gates.tests_patterns.{name}"))
            .unwrap_or_default()
    };
    let patterns = UserPatterns {
        test_files: list("test_files"),
        test_functions: list("test_functions"),
        skips: list("skips"),
        assertions: list("assertions"),
        validation_files: list("validation_files"),
    };
    if let Err(e) = crate::gates::Patterns::new(&patterns) {
        r.problem(
            &format!("gates.tests_patterns.{}", e.list),
            format!(
                "gates.tests_patterns.{}: {:?} is no regular expression: {}",
                e.list, e.pattern, e.message
            ),
        );
    }
    let agent = r.string("gates.review.agent", true);
    let model = r.string("gates.review.model", true);
    let max_rounds = r.uint("gates.review.max_rounds", 1, "rounds") as u32;
    let review = match agent.as_str() {
        "" => None,
        name => match crate::agent::Backend::parse(name) {
            Some(agent) => Some(ReviewGate {
                agent,
                model: Some(model).filter(|m| !m.is_empty()),
                max_rounds,
            }),
            None => {
                r.problem(
                    "gates.review.agent",
                    format!(
                        "gates.review.agent {name:?} is not an agent ralph knows; one of: {}",
                        crate::agent::Backend::names()
                    ),
                );
                None
            }
        },
    };
    Gates {
        tests,
        patterns,
        review,
    }
}

/// The line `ralph validate` warns with when the reviewer is the stories'
/// own agent and model: a model that reviews its own work sees what it
/// meant to write, not what it wrote.
pub(crate) fn same_reviewer_warning(
    gates: &Gates,
    agent: &crate::agent::Settings,
) -> Option<String> {
    let review = gates.review.as_ref()?;
    if review.agent != agent.name {
        return None;
    }
    let (_, args) = crate::agent::invocation(agent, agent.name);
    let author_model = args
        .iter()
        .position(|a| a == "--model" || a == "-m")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--model=").map(str::to_string))
        })
        // `agent.model` (issue 25), when the command line does not name one.
        .or_else(|| agent.model.clone());
    (review.model == author_model).then(|| {
        format!(
            "warning: gates.review.agent is {} with {}, as the stories' own agent: a second \
             review by the same model finds little; name another agent or gates.review.model",
            review.agent.name(),
            review
                .model
                .as_deref()
                .map_or("its default model".to_string(), |m| format!("model {m}"))
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Backend;

    #[test]
    fn the_same_agent_and_model_as_the_author_is_warned_about() {
        let mut agent = crate::agent::Settings {
            name: Backend::Claude,
            command: None,
            flags: None,
            fallback: Vec::new(),
            claude_command: "claude".into(),
            claude_flags: None,
            model: None,
            escalation: Vec::new(),
        };
        let gates = |agent: Backend, model: Option<&str>| Gates {
            review: Some(ReviewGate {
                agent,
                model: model.map(str::to_string),
                max_rounds: 2,
            }),
            ..Gates::default()
        };
        assert!(same_reviewer_warning(&gates(Backend::Claude, None), &agent).is_some());
        assert!(same_reviewer_warning(&gates(Backend::Codex, None), &agent).is_none());
        assert!(same_reviewer_warning(&gates(Backend::Claude, Some("opus")), &agent).is_none());
        agent.claude_flags = Some(vec!["--print".into(), "--model".into(), "opus".into()]);
        assert!(same_reviewer_warning(&gates(Backend::Claude, Some("opus")), &agent).is_some());
        assert!(same_reviewer_warning(&Gates::default(), &agent).is_none());
        agent.claude_flags = None;
        agent.model = Some("sonnet".into());
        assert!(same_reviewer_warning(&gates(Backend::Claude, Some("sonnet")), &agent).is_some());
    }
}
