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
    Gates { tests, patterns }
}
