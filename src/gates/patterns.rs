//! The one table of what the test-integrity gate looks for, by language,
//! and what users add to it (`gates.tests_patterns.*`).

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::FileChange;

/// Source files whose tests the built-in rows know.
const RUST: &str = r"\.rs$";
const PYTHON: &str = r"\.py$";
const JS: &str = r"\.[cm]?[jt]sx?$";
const GO_TEST: &str = r"_test\.go$";

/// Paths that are test files, whatever their content.
const TEST_FILES: &[&str] = &[
    r"(^|/)tests?/",
    r"(^|/)__tests__/",
    r"(^|/)spec/",
    r"(^|/)test_[^/]*\.py$",
    r"_test\.py$",
    r"_test\.go$",
    r"\.(test|spec)\.[cm]?[jt]sx?$",
    r"(^|/)[^/]*_tests?\.rs$",
];

/// Test functions: (files, a marker line before the name, or none; the
/// name's pattern, its first non-empty group being the name).
const TEST_FUNCTIONS: &[(&str, Option<&str>, &str)] = &[
    (
        RUST,
        Some(r"^\s*#\[(?:[\w:]+::)?test\b"),
        r"\bfn\s+([A-Za-z_]\w*)",
    ),
    (PYTHON, None, r"^\s*(?:async\s+)?def\s+(test\w*)\s*\("),
    (
        JS,
        None,
        r#"(?:^|[^.\w])x?(?:it|test)(?:\.only|\.skip)?\s*\(\s*(?:'([^']*)'|"([^"]*)"|`([^`]*)`)"#,
    ),
    (GO_TEST, None, r"^func\s+(Test\w*)\s*\("),
];

/// Skip markers: (files, line).
const SKIPS: &[(&str, &str)] = &[
    (RUST, r"#\[ignore\b"),
    (PYTHON, r"@pytest\.mark\.(?:skip|skipif|xfail)\b"),
    (PYTHON, r"\bpytest\.skip\s*\("),
    (PYTHON, r"@unittest\.skip"),
    (PYTHON, r"\.skipTest\s*\("),
    (JS, r"\b(?:it|test|describe)\.skip\s*\("),
    (JS, r"(?:^|[^.\w])x(?:it|test|describe)\s*\("),
    (GO_TEST, r"\bt\.Skip(?:Now|f)?\s*\("),
];

/// Assertion lines: (files, line).
const ASSERTIONS: &[(&str, &str)] = &[
    (RUST, r"\b(?:debug_)?assert(?:_eq|_ne|_matches)?!\s*\("),
    (RUST, r"\.(?:unwrap_err|expect_err)\s*\("),
    (PYTHON, r"^\s*assert\b"),
    (PYTHON, r"\bself\.assert\w*\s*\("),
    (PYTHON, r"\bpytest\.raises\s*\("),
    (JS, r"\bexpect\s*\("),
    (JS, r"\bassert(?:\.\w+)?\s*\("),
    (
        GO_TEST,
        r"\bt\.(?:Error|Errorf|Fatal|Fatalf|Fail|FailNow)\s*\(",
    ),
    (GO_TEST, r"\b(?:assert|require)\.\w+\s*\("),
];

/// Files whose every change touches how the work is checked: CI.
const VALIDATION_FILES: &[&str] = &[
    r"^\.github/workflows/",
    r"^\.gitlab-ci\.ya?ml$",
    r"^\.circleci/",
    r"^\.ci/",
    r"^Jenkinsfile$",
    r"^\.travis\.ya?ml$",
    r"^azure-pipelines\.ya?ml$",
    r"(^|/)pytest\.ini$",
];

/// What a user adds (`gates.tests_patterns.*`), as regular expressions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UserPatterns {
    pub(crate) test_files: Vec<String>,
    pub(crate) test_functions: Vec<String>,
    pub(crate) skips: Vec<String>,
    pub(crate) assertions: Vec<String>,
    pub(crate) validation_files: Vec<String>,
}

/// A user's pattern that is no regular expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PatternsError {
    /// The config key's last part (`skips`, ...).
    pub(crate) list: &'static str,
    pub(crate) pattern: String,
    pub(crate) message: String,
}

struct LineRule {
    files: Regex,
    line: Regex,
}

struct NameRule {
    files: Regex,
    marker: Option<Regex>,
    name: Regex,
}

/// The table, compiled.
pub(crate) struct Patterns {
    test_files: Vec<Regex>,
    functions: Vec<NameRule>,
    skips: Vec<LineRule>,
    assertions: Vec<LineRule>,
    validation_files: Vec<Regex>,
}

/// Matches any path: a user's line pattern applies to every test file.
const ANY: &str = r"";

fn re(s: &str) -> Regex {
    Regex::new(s).expect("a built-in gate pattern compiles")
}

static BUILT_IN: LazyLock<Patterns> = LazyLock::new(|| Patterns {
    test_files: TEST_FILES.iter().map(|s| re(s)).collect(),
    functions: TEST_FUNCTIONS
        .iter()
        .map(|(f, m, n)| NameRule {
            files: re(f),
            marker: m.map(re),
            name: re(n),
        })
        .collect(),
    skips: SKIPS
        .iter()
        .map(|(f, l)| LineRule {
            files: re(f),
            line: re(l),
        })
        .collect(),
    assertions: ASSERTIONS
        .iter()
        .map(|(f, l)| LineRule {
            files: re(f),
            line: re(l),
        })
        .collect(),
    validation_files: VALIDATION_FILES.iter().map(|s| re(s)).collect(),
});

impl Patterns {
    /// The built-in table with `user`'s rows added; a pattern that does
    /// not compile is an error naming it.
    pub(crate) fn new(user: &UserPatterns) -> Result<Patterns, PatternsError> {
        let compile = |list: &'static str, s: &String| {
            Regex::new(s).map_err(|e| PatternsError {
                list,
                pattern: s.clone(),
                message: e.to_string(),
            })
        };
        let b = &*BUILT_IN;
        let mut p = Patterns {
            test_files: b.test_files.clone(),
            functions: b
                .functions
                .iter()
                .map(|r| NameRule {
                    files: r.files.clone(),
                    marker: r.marker.clone(),
                    name: r.name.clone(),
                })
                .collect(),
            skips: b.skips.iter().map(LineRule::copy).collect(),
            assertions: b.assertions.iter().map(LineRule::copy).collect(),
            validation_files: b.validation_files.clone(),
        };
        for s in &user.test_files {
            p.test_files.push(compile("test_files", s)?);
        }
        for s in &user.test_functions {
            p.functions.push(NameRule {
                files: re(ANY),
                marker: None,
                name: compile("test_functions", s)?,
            });
        }
        for s in &user.skips {
            p.skips.push(LineRule {
                files: re(ANY),
                line: compile("skips", s)?,
            });
        }
        for s in &user.assertions {
            p.assertions.push(LineRule {
                files: re(ANY),
                line: compile("assertions", s)?,
            });
        }
        for s in &user.validation_files {
            p.validation_files.push(compile("validation_files", s)?);
        }
        Ok(p)
    }

    pub(crate) fn is_test_file(&self, path: &str) -> bool {
        self.test_files.iter().any(|r| r.is_match(path))
    }

    /// A file whose assertions count: a test file, or a source file with
    /// tests in it (Rust's unit tests live beside the code).
    pub(crate) fn holds_tests(&self, path: &str, text: &str) -> bool {
        self.is_test_file(path) || !self.test_names(path, text).is_empty()
    }

    /// The test functions in `text`: (name, 1-based line). A user's row
    /// applies to test files only, the built-in rows to their language.
    pub(crate) fn test_names(&self, path: &str, text: &str) -> Vec<(String, u32)> {
        let test_file = self.is_test_file(path);
        let rules: Vec<&NameRule> = self
            .functions
            .iter()
            .filter(|r| r.files.is_match(path) && (!r.files.as_str().is_empty() || test_file))
            .collect();
        if rules.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut armed = vec![false; rules.len()];
        for (i, line) in text.lines().enumerate() {
            for (k, r) in rules.iter().enumerate() {
                if let Some(m) = &r.marker {
                    if m.is_match(line) {
                        armed[k] = true;
                        continue;
                    }
                    if !armed[k] {
                        continue;
                    }
                }
                if let Some(c) = r.name.captures(line) {
                    let name = (1..c.len())
                        .find_map(|g| c.get(g).map(|m| m.as_str()))
                        .unwrap_or_else(|| c.get(0).map_or("", |m| m.as_str()));
                    out.push((name.to_string(), i as u32 + 1));
                    armed[k] = false;
                }
            }
        }
        out
    }

    /// Lines of `text` holding a skip marker: (1-based line, trimmed text).
    pub(crate) fn skip_lines<'t>(&self, path: &str, text: &'t str) -> Vec<(u32, &'t str)> {
        lines_matching(&self.skips, self.is_test_file(path), path, text)
    }

    pub(crate) fn assertion_lines<'t>(&self, path: &str, text: &'t str) -> Vec<(u32, &'t str)> {
        lines_matching(&self.assertions, self.is_test_file(path), path, text)
    }

    /// How a change of `path` touches the validation commands' own
    /// configuration, in words; `None` when it does not.
    pub(crate) fn validation_change(&self, path: &str, f: &FileChange) -> Option<String> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let old = f
            .old_text
            .as_deref()
            .filter(|_| f.old_path.as_deref() == Some(path));
        let new = f
            .new_text
            .as_deref()
            .filter(|_| f.new_path.as_deref() == Some(path));
        if path == crate::paths::CONFIG {
            let v = |t: Option<&str>| {
                t.and_then(|t| serde_json::from_str::<Value>(t).ok())
                    .and_then(|v| v.get("validation").cloned())
            };
            return (v(old) != v(new)).then(|| "the `validation` section changed".to_string());
        }
        if name == "package.json" {
            let v = |t: Option<&str>| -> Vec<(String, Value)> {
                t.and_then(|t| serde_json::from_str::<Value>(t).ok())
                    .and_then(|v| v.get("scripts").and_then(Value::as_object).cloned())
                    .map(|m| m.into_iter().filter(|(k, _)| k.contains("test")).collect())
                    .unwrap_or_default()
            };
            return (v(old) != v(new)).then(|| "its test scripts changed".to_string());
        }
        let sections: Option<&[&str]> = match name {
            "pyproject.toml" => Some(&["[tool.pytest"]),
            "setup.cfg" | "tox.ini" => Some(&["[tool:pytest", "[pytest"]),
            "Cargo.toml" => Some(&["[[test]]"]),
            _ => None,
        };
        if let Some(heads) = sections {
            let cargo = name == "Cargo.toml";
            let pick = |t: Option<&str>| test_settings(t.unwrap_or(""), heads, cargo);
            return (pick(old) != pick(new)).then(|| format!("its test settings changed ({name})"));
        }
        if self.validation_files.iter().any(|r| r.is_match(path)) && old != new {
            return Some("a file that runs or configures the checks changed".to_string());
        }
        None
    }
}

impl LineRule {
    fn copy(&self) -> LineRule {
        LineRule {
            files: self.files.clone(),
            line: self.line.clone(),
        }
    }
}

fn lines_matching<'t>(
    rules: &[LineRule],
    test_file: bool,
    path: &str,
    text: &'t str,
) -> Vec<(u32, &'t str)> {
    let rules: Vec<&LineRule> = rules
        .iter()
        .filter(|r| r.files.is_match(path) && (!r.files.as_str().is_empty() || test_file))
        .collect();
    if rules.is_empty() {
        return Vec::new();
    }
    text.lines()
        .enumerate()
        .filter(|(_, l)| rules.iter().any(|r| r.line.is_match(l)))
        .map(|(i, l)| (i as u32 + 1, l.trim()))
        .collect()
}

/// The lines of the sections of an ini/TOML file that configure tests
/// (headers starting with one of `heads`); in a Cargo.toml also any
/// `test =`/`harness =` key (a target's tests turned off).
fn test_settings(text: &str, heads: &[&str], cargo: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for l in text.lines() {
        let t = l.trim();
        if t.starts_with('[') {
            inside = heads.iter().any(|h| t.starts_with(h));
        }
        let key = t.split('=').next().unwrap_or("").trim();
        let counts = inside || (cargo && matches!(key, "test" | "harness" | "doctest"));
        if counts && !t.is_empty() && !t.starts_with('#') {
            out.push(t.to_string());
        }
    }
    out
}
