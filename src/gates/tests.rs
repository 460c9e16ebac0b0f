//! Table tests of the gates over hand-made diffs.

use std::collections::BTreeMap;

use super::*;

fn modified(path: &str, old: &str, new: &str) -> FileChange {
    FileChange {
        old_path: Some(path.into()),
        new_path: Some(path.into()),
        old_text: Some(old.into()),
        new_text: Some(new.into()),
    }
}

fn added(path: &str, new: &str) -> FileChange {
    FileChange {
        old_path: None,
        new_path: Some(path.into()),
        old_text: None,
        new_text: Some(new.into()),
    }
}

fn deleted(path: &str, old: &str) -> FileChange {
    FileChange {
        old_path: Some(path.into()),
        new_path: None,
        old_text: Some(old.into()),
        new_text: None,
    }
}

fn renamed(old: &str, new: &str, text: &str) -> FileChange {
    FileChange {
        old_path: Some(old.into()),
        new_path: Some(new.into()),
        old_text: Some(text.into()),
        new_text: Some(text.into()),
    }
}

fn kinds(files: Vec<FileChange>) -> Vec<(FindingKind, String, Option<u32>)> {
    let p = Patterns::new(&UserPatterns::default()).unwrap();
    let mut v: Vec<_> = test_integrity(&Diff { files }, &p)
        .into_iter()
        .map(|f| (f.kind, f.file, f.line))
        .collect();
    v.sort();
    v
}

const RS_OLD: &str = "fn add(a: i32) -> i32 { a + 1 }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds_one() {\n        assert_eq!(super::add(1), 2);\n    }\n\n    #[test]\n    fn adds_to_zero() {\n        assert_eq!(super::add(0), 1);\n    }\n}\n";
const PY_OLD: &str = "def test_parse():\n    assert parse('1') == 1\n\n\ndef test_empty():\n    assert parse('') is None\n";
const JS_OLD: &str = "describe('sum', () => {\n  it('adds', () => {\n    expect(sum(1, 2)).toBe(3);\n  });\n  test(\"zero\", () => {\n    expect(sum(0, 0)).toBe(0);\n  });\n});\n";
const GO_OLD: &str = "package sum\n\nfunc TestSum(t *testing.T) {\n\tif Sum(1, 2) != 3 {\n\t\tt.Errorf(\"bad\")\n\t}\n}\n";

use FindingKind::*;

#[test]
fn each_cheat_is_one_finding_of_its_kind_and_honest_work_none() {
    type Want<'a> = Vec<(FindingKind, &'a str, Option<u32>)>;
    let cases: Vec<(&str, Vec<FileChange>, Want)> = vec![
        (
            "a code change and a new test",
            vec![
                modified("src/lib.rs", "fn a() {}\n", "fn a() {}\nfn b() {}\n"),
                added("tests/b.rs", "#[test]\nfn b_works() {\n    assert!(true);\n}\n"),
            ],
            vec![],
        ),
        (
            "deleted test file",
            vec![deleted("tests/test_parse.py", PY_OLD)],
            vec![
                (TestFileDeleted, "tests/test_parse.py", None),
                (TestRemoved, "tests/test_parse.py", Some(1)),
                (TestRemoved, "tests/test_parse.py", Some(5)),
                (AssertionsLost, "tests/test_parse.py", Some(2)),
            ],
        ),
        (
            "a test file renamed to no test file",
            vec![renamed("tests/test_parse.py", "old/parse_checks.txt", PY_OLD)],
            vec![
                (TestFileDeleted, "tests/test_parse.py", None),
                (TestRemoved, "tests/test_parse.py", Some(1)),
                (TestRemoved, "tests/test_parse.py", Some(5)),
                (AssertionsLost, "tests/test_parse.py", Some(2)),
            ],
        ),
        (
            "a test file renamed to another test file",
            vec![renamed("tests/test_parse.py", "tests/test_parsing.py", PY_OLD)],
            vec![],
        ),
        (
            "a Rust unit test removed",
            vec![modified(
                "src/add.rs",
                RS_OLD,
                &RS_OLD.replace(
                    "\n    #[test]\n    fn adds_to_zero() {\n        assert_eq!(super::add(0), 1);\n    }\n",
                    "",
                ),
            )],
            vec![
                (TestRemoved, "src/add.rs", Some(11)),
                (AssertionsLost, "src/add.rs", Some(12)),
            ],
        ),
        (
            "a Rust test ignored",
            vec![modified(
                "src/add.rs",
                RS_OLD,
                &RS_OLD.replace("    #[test]\n    fn adds_one", "    #[test]\n    #[ignore]\n    fn adds_one"),
            )],
            vec![(SkipAdded, "src/add.rs", Some(6))],
        ),
        (
            "a pytest skip marker",
            vec![modified(
                "tests/test_parse.py",
                PY_OLD,
                &format!("import pytest\n\n@pytest.mark.skip(reason='flaky')\n{PY_OLD}"),
            )],
            vec![(SkipAdded, "tests/test_parse.py", Some(3))],
        ),
        (
            "pytest.skip inside a test",
            vec![modified(
                "tests/test_parse.py",
                PY_OLD,
                &PY_OLD.replace("    assert parse('1') == 1", "    pytest.skip('later')\n    assert parse('1') == 1"),
            )],
            vec![(SkipAdded, "tests/test_parse.py", Some(2))],
        ),
        (
            "a JS test skipped and one x'd",
            vec![modified(
                "src/sum.test.ts",
                JS_OLD,
                &JS_OLD.replace("  it('adds'", "  it.skip('adds'").replace("  test(\"zero\"", "  xit(\"zero\""),
            )],
            vec![
                (SkipAdded, "src/sum.test.ts", Some(2)),
                (SkipAdded, "src/sum.test.ts", Some(5)),
            ],
        ),
        (
            "a Go test skipped",
            vec![modified(
                "sum_test.go",
                GO_OLD,
                &GO_OLD.replace("{\n\tif", "{\n\tt.Skip(\"later\")\n\tif"),
            )],
            vec![(SkipAdded, "sum_test.go", Some(4))],
        ),
        (
            "a Go test removed",
            vec![modified("sum_test.go", GO_OLD, "package sum\n")],
            vec![
                (TestRemoved, "sum_test.go", Some(3)),
                (AssertionsLost, "sum_test.go", Some(5)),
            ],
        ),
        (
            "assertions loosened in place",
            vec![modified(
                "tests/test_parse.py",
                PY_OLD,
                &PY_OLD.replace("    assert parse('') is None\n", "    parse('')\n"),
            )],
            vec![(AssertionsLost, "tests/test_parse.py", Some(6))],
        ),
        (
            "an assertion rewritten (same count) is no loss",
            vec![modified(
                "tests/test_parse.py",
                PY_OLD,
                &PY_OLD.replace("assert parse('1') == 1", "assert parse(\"1\") == 1"),
            )],
            vec![],
        ),
        (
            "a test moved to another file, with its assertions",
            vec![
                modified(
                    "tests/test_parse.py",
                    PY_OLD,
                    "def test_parse():\n    assert parse('1') == 1\n",
                ),
                added(
                    "tests/test_empty.py",
                    "def test_empty():\n    assert parse('') is None\n",
                ),
            ],
            vec![],
        ),
        (
            "a Rust test moved from a unit test module to an integration test",
            vec![
                modified(
                    "src/add.rs",
                    RS_OLD,
                    &RS_OLD.replace(
                        "\n    #[test]\n    fn adds_to_zero() {\n        assert_eq!(super::add(0), 1);\n    }\n",
                        "",
                    ),
                ),
                added(
                    "tests/add.rs",
                    "#[test]\nfn adds_to_zero() {\n    assert_eq!(demo::add(0), 1);\n}\n",
                ),
            ],
            vec![],
        ),
        (
            "Rust iterator .skip( in code is no skip marker",
            vec![modified("src/lib.rs", "fn a() {}\n", "fn a() { v.iter().skip(1); }\n")],
            vec![],
        ),
    ];
    for (name, files, want) in cases {
        let want: Vec<(FindingKind, String, Option<u32>)> = want
            .into_iter()
            .map(|(k, f, l)| (k, f.to_string(), l))
            .collect();
        let mut want = want;
        want.sort();
        assert_eq!(kinds(files), want, "{name}");
    }
}

#[test]
fn changes_to_the_validation_configuration_are_findings_and_other_edits_are_not() {
    let cfg = crate::paths::CONFIG;
    let cases: Vec<(&str, FileChange, bool)> = vec![
        (
            "ralph's validation command",
            modified(
                cfg,
                r#"{"validation": {"commands": [{"name": "t", "cmd": "cargo test"}]}}"#,
                r#"{"validation": {"commands": [{"name": "t", "cmd": "true"}]}}"#,
            ),
            true,
        ),
        (
            "another section of ralph's config",
            modified(
                cfg,
                r#"{"agent": {"name": "claude"}}"#,
                r#"{"agent": {"name": "codex"}}"#,
            ),
            false,
        ),
        (
            "package.json test script",
            modified(
                "web/package.json",
                r#"{"scripts": {"test": "jest", "build": "tsc"}}"#,
                r#"{"scripts": {"test": "exit 0", "build": "tsc"}}"#,
            ),
            true,
        ),
        (
            "package.json build script",
            modified(
                "package.json",
                r#"{"scripts": {"test": "jest", "build": "tsc"}}"#,
                r#"{"scripts": {"test": "jest", "build": "tsc -b"}}"#,
            ),
            false,
        ),
        (
            "pytest.ini",
            modified(
                "pytest.ini",
                "[pytest]\naddopts = -q\n",
                "[pytest]\naddopts = -q -k 'not slow'\n",
            ),
            true,
        ),
        (
            "pyproject pytest section",
            modified(
                "pyproject.toml",
                "[project]\nname = 'x'\n[tool.pytest.ini_options]\ntestpaths = ['tests']\n",
                "[project]\nname = 'x'\n[tool.pytest.ini_options]\ntestpaths = []\n",
            ),
            true,
        ),
        (
            "pyproject version",
            modified(
                "pyproject.toml",
                "[project]\nversion = '1'\n[tool.pytest.ini_options]\ntestpaths = ['tests']\n",
                "[project]\nversion = '2'\n[tool.pytest.ini_options]\ntestpaths = ['tests']\n",
            ),
            false,
        ),
        (
            "Cargo test target turned off",
            modified(
                "Cargo.toml",
                "[lib]\nname = 'x'\n",
                "[lib]\nname = 'x'\ntest = false\n",
            ),
            true,
        ),
        (
            "Cargo dependency added",
            modified(
                "Cargo.toml",
                "[dependencies]\n",
                "[dependencies]\nregex = '1'\n",
            ),
            false,
        ),
        (
            "a CI workflow",
            modified(
                ".github/workflows/ci.yml",
                "run: cargo test\n",
                "run: cargo build\n",
            ),
            true,
        ),
        ("a README", modified("README.md", "a\n", "b\n"), false),
    ];
    for (name, f, want) in cases {
        let found = kinds(vec![f]);
        let got = found.iter().any(|(k, _, _)| *k == ValidationConfigChanged);
        assert_eq!(got, want, "{name}: {found:?}");
    }
}

#[test]
fn a_users_patterns_extend_the_table_and_a_bad_one_is_named() {
    let user = UserPatterns {
        test_files: vec![r"\.check$".into()],
        test_functions: vec![r"^check (\w+)".into()],
        skips: vec![r"^pending\b".into()],
        assertions: vec![r"^expect\b".into()],
        validation_files: vec![r"^checks\.mk$".into()],
    };
    let p = Patterns::new(&user).unwrap();
    let old = "check one\nexpect 1\ncheck two\nexpect 2\n";
    let new = "check one\nexpect 1\npending\n";
    let diff = Diff {
        files: vec![
            modified("a.check", old, new),
            modified("checks.mk", "all:\n", "all: quick\n"),
        ],
    };
    let mut got: Vec<FindingKind> = test_integrity(&diff, &p).iter().map(|f| f.kind).collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            TestRemoved,
            SkipAdded,
            AssertionsLost,
            ValidationConfigChanged
        ]
    );
    // The user's rows apply to test files only.
    assert!(p.test_names("notes.txt", old).is_empty());

    let bad = UserPatterns {
        skips: vec!["(unclosed".into()],
        ..UserPatterns::default()
    };
    let e = Patterns::new(&bad).err().unwrap();
    assert_eq!((e.list, e.pattern.as_str()), ("skips", "(unclosed"));
}

#[test]
fn lines_the_target_gained_must_survive_a_conflict_fix_up() {
    let other = Diff {
        files: vec![modified(
            "src/menu.rs",
            "fn menu() {\n    item(\"open\");\n}\n",
            "fn menu() {\n    item(\"open\");\n    item(\"save\");\n}\n",
        )],
    };
    let merged = |t: Option<&str>| {
        let mut m = BTreeMap::new();
        m.insert("src/menu.rs".to_string(), t.map(str::to_string));
        m
    };
    let cases = [
        (
            "both sides kept",
            Some("fn menu() {\n    item(\"open\");\n    item(\"save\");\n    item(\"quit\");\n}\n"),
            None,
        ),
        (
            "theirs taken: the other story's line is gone",
            Some("fn menu() {\n    item(\"open\");\n    item(\"quit\");\n}\n"),
            Some(3),
        ),
        ("the file deleted", None, Some(3)),
    ];
    for (name, text, want) in cases {
        let found = lost_lines(&other, &merged(text));
        let got = found.first().map(|f| {
            assert_eq!(f.kind, OtherSideLost);
            assert!(f.what.contains("item(\"save\")"), "{name}: {}", f.what);
            f.line.unwrap()
        });
        assert_eq!(got, want, "{name}: {found:?}");
    }
}

#[test]
fn a_finding_reads_as_one_line_with_its_place_and_kind() {
    let f = Finding {
        kind: SkipAdded,
        file: "tests/a.rs".into(),
        line: Some(4),
        what: "skip marker added: `#[ignore]`".into(),
    };
    assert_eq!(
        f.line_text(),
        "tests/a.rs:4: skip marker added: `#[ignore]` [skip_added]"
    );
}
