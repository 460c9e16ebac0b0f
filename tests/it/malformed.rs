//! Every malformed input exits 2 with a message naming the file, line or ID,
//! and changes nothing (SPEC 7).

use crate::harness::*;

struct Case {
    name: &'static str,
    queue: &'static str,
    config: &'static str,
    /// Extra files written after the generated specs (path, content).
    files: &'static [(&'static str, &'static str)],
    /// Files removed after generation.
    remove: &'static [&'static str],
    /// Every one of these must appear in stderr.
    expect: &'static [&'static str],
    run_args: &'static [&'static str],
}

const OK_CONFIG: &str = "{}";

fn case(name: &'static str) -> Case {
    Case {
        name,
        queue: "1.1 | A\n1.2 | B\n",
        config: OK_CONFIG,
        files: &[],
        remove: &[],
        expect: &[],
        run_args: &["run"],
    }
}

fn corpus() -> Vec<Case> {
    vec![
        Case {
            files: &[
                (
                    "specs/epic-1/story-1.1-spec.md",
                    "---\ndepends_on: [1.2]\n---\n",
                ),
                (
                    "specs/epic-1/story-1.2-spec.md",
                    "---\ndepends_on: [1.1]\n---\n",
                ),
            ],
            queue: "# [batch:1]\n1.1 | A\n1.2 | B\n",
            expect: &["cycle", "1.1", "1.2"],
            ..case("cycle")
        },
        Case {
            files: &[(
                "specs/epic-1/story-1.1-spec.md",
                "---\ndepends_on: [1.1]\n---\n",
            )],
            expect: &["story-1.1-spec.md", "1.1"],
            ..case("self dependency")
        },
        Case {
            files: &[(
                "specs/epic-1/story-1.2-spec.md",
                "---\ndepends_on:\n  - 9.9\n---\n",
            )],
            expect: &["story-1.2-spec.md", "9.9"],
            ..case("unknown dependency")
        },
        Case {
            queue: "1.1 | A\n1.2 | B\n1.1 | again\n",
            expect: &[".ralph/stories.txt:3", "1.1"],
            ..case("duplicate id")
        },
        Case {
            queue: "1.1 | A\n../x | escape\n",
            expect: &[".ralph/stories.txt:2", "../x"],
            ..case("dotdot id")
        },
        Case {
            queue: "1.1 | A\n--force | flag\n",
            expect: &[".ralph/stories.txt:2", "--force"],
            ..case("flag-like id")
        },
        Case {
            queue: "1.1 | A\nfoo bar | spaces\n",
            expect: &[".ralph/stories.txt:2"],
            ..case("id with a space")
        },
        Case {
            remove: &["specs/epic-1/story-1.2-spec.md"],
            expect: &["1.2", "specs/epic-1/story-1.2-*.md"],
            ..case("missing spec")
        },
        Case {
            config: "{ \"loop\": { \"max_retries\": 3, }\n",
            expect: &[".ralph/config.json"],
            ..case("bad json")
        },
        Case {
            files: &[(
                "specs/epic-1/story-1.2-spec.md",
                "---\nstatus: [unclosed\n---\n",
            )],
            expect: &["story-1.2-spec.md"],
            ..case("bad yaml")
        },
        Case {
            files: &[("specs/epic-1/story-1.2-spec.md", "---\nstatus: pending\n")],
            expect: &["story-1.2-spec.md"],
            ..case("unterminated frontmatter")
        },
        Case {
            config: r#"{ "specs": { "pattern": "specs/story-{{epic}}.md" } }"#,
            expect: &[".ralph/config.json", "{{id}}"],
            ..case("pattern without id")
        },
        Case {
            config: r#"{ "loop": { "timeout_seconds": -5 } }"#,
            expect: &[".ralph/config.json", "timeout_seconds"],
            ..case("negative timeout")
        },
        Case {
            config: r#"{ "loop": { "max_retries": 0 } }"#,
            expect: &["max_retries"],
            ..case("zero retries")
        },
        Case {
            queue: "1.1 | A\n# [batch:abc]\n1.2 | B\n",
            expect: &[".ralph/stories.txt:2"],
            ..case("bad batch label")
        },
        Case {
            files: &[(
                "specs/epic-1/story-1.2-spec.md",
                "---\ndepends_on: [\"a/b\"]\n---\n",
            )],
            expect: &["story-1.2-spec.md", "a/b"],
            ..case("bad id in depends_on")
        },
        Case {
            config: r#"{ "validation": { "commands": [ { "name": "x" } ] } }"#,
            expect: &["validation"],
            ..case("validation without cmd")
        },
        Case {
            config: r#"{ "claude": { "flags": "--print" } }"#,
            expect: &["claude.flags"],
            ..case("flags not a list")
        },
        Case {
            run_args: &["run", "-s", "7.7"],
            expect: &["7.7"],
            ..case("unknown -s story")
        },
        Case {
            run_args: &["run", "-t", "-5"],
            expect: &["-5"],
            ..case("negative -t flag")
        },
    ]
}

#[test]
fn malformed_inputs_exit_2_and_change_nothing() {
    let cases = corpus();
    assert!(cases.len() >= 15);
    let mut failures = Vec::new();
    for c in &cases {
        let p = Project::with_backlog(c.queue, c.config);
        for (path, content) in c.files {
            p.write(path, content);
        }
        for path in c.remove {
            std::fs::remove_file(p.root.join(path)).unwrap();
        }
        p.commit_all("backlog");
        p.agent(r#"echo called >> "$SCRATCH/calls"; done_"#);
        let before = p.snapshot();
        let mut results = vec![p.ralph(c.run_args)];
        if c.run_args == ["run"] {
            results.push(p.ralph(&["validate"]));
        }
        for r in results {
            let ok = r.code == 2 && c.expect.iter().all(|e| r.stderr.contains(e));
            if !ok {
                failures.push(format!(
                    "case '{}': expected exit 2 mentioning {:?}, got {r:?}",
                    c.name, c.expect
                ));
            }
        }
        if p.snapshot() != before {
            failures.push(format!("case '{}': files changed", c.name));
        }
        if p.scratch.join("calls").exists() {
            failures.push(format!("case '{}': the agent ran", c.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn validate_reports_every_problem_at_once() {
    let p = Project::with_backlog(
        "1.1 | A\n1.1 | dup\n../x | bad\n1.3 | C\n",
        r#"{ "loop": { "timeout_seconds": -1 } }"#,
    );
    std::fs::remove_file(p.root.join("specs/epic-1/story-1.3-spec.md")).unwrap();
    let r = p.ralph(&["validate"]);
    assert_eq!(r.code, 2, "{r:?}");
    for needle in [
        ".ralph/stories.txt:2",
        ".ralph/stories.txt:3",
        "timeout_seconds",
    ] {
        assert!(r.stderr.contains(needle), "{needle} missing: {r:?}");
    }
}

/// A state file from a newer ralph is refused (exit 2) and left byte for
/// byte as it was: rewriting it would drop what the newer version keeps.
#[test]
fn a_state_file_from_a_newer_ralph_is_refused_and_kept() {
    let p = Project::with_backlog("1.1 | First\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(r#"echo called >> "$SCRATCH/calls"; done_"#);
    let newer = "{\"format_version\": 99, \"completed_stories\": [], \"future\": {\"x\": 1}}\n";
    p.write(".ralph/state.json", newer);
    for args in [&["run"][..], &["status"], &["run", "-d"]] {
        let r = p.ralph(args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains("newer ralph"), "{r:?}");
    }
    assert_eq!(p.read(".ralph/state.json"), newer);
    assert!(!p.scratch.join("calls").exists());
}

/// A state file that is no state file stops every command that reads it,
/// and `ralph reset --yes` is the way out: under the run lock (exit 3 while
/// a run holds it) it sets the file aside, byte for byte, where its output
/// says, and starts from empty state; `ralph reset ID` cannot reset one
/// story of it and says what will.
#[test]
fn a_broken_state_file_is_set_aside_by_reset_yes() {
    let p = Project::with_backlog("1.1 | First\n1.2 | Second\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(r#"echo "$ID" >> "$SCRATCH/calls"; commit_file "src/$ID.txt"; done_"#);
    assert_eq!(p.ralph(&["run"]).code, 0);
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    let broken = "{\"completed_stories\": [\"1.1\",\n  half a file\n";
    p.write(".ralph/state.json", broken);
    let set_aside = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(p.root.join(".ralph"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("state.json.broken-"))
            .collect();
        v.sort();
        v
    };

    let r = p.ralph(&["status"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains(".ralph/state.json:2: not a valid state file")
            && r.stderr.contains("ralph reset --yes"),
        "{r:?}"
    );
    let r = p.ralph(&["reset", "1.1"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("not a valid state file")
            && r.stderr.contains("`ralph reset 1.1` cannot")
            && r.stderr.contains("hint:")
            && r.stderr.contains("ralph reset --yes"),
        "{r:?}"
    );
    assert_eq!(p.read(".ralph/state.json"), broken);

    // A run holds the lock: nothing is touched.
    let f = std::fs::File::create(p.root.join(".ralph/.lock")).unwrap();
    f.lock().unwrap();
    let r = p.ralph(&["reset", "--yes"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert_eq!(p.read(".ralph/state.json"), broken);
    assert!(set_aside().is_empty());
    drop(f);

    let r = p.ralph(&["reset", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    let kept = set_aside();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        r.stdout.contains(&format!("kept as .ralph/{}", kept[0])),
        "{r:?}"
    );
    assert_eq!(p.read(&format!(".ralph/{}", kept[0])), broken);
    // An empty state, not a missing one: progress.txt's DONE lines would
    // otherwise become the state again.
    assert!(p.completed().is_empty(), "{}", p.read(".ralph/state.json"));
    assert_eq!(p.ralph(&["status"]).code, 0);
    let untracked = git(&p.root, &["status", "--porcelain", "--untracked-files=all"]);
    assert!(
        !untracked.contains("broken"),
        "kept out of git: {untracked}"
    );

    // As after any `reset --yes`: the merges on main make both done again,
    // and no agent runs.
    assert_eq!(p.ralph(&["run"]).code, 0);
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    assert_eq!(p.scratch_text("calls"), "1.1\n1.2\n");
}

/// A bare repository is named as one, not as "not inside a git repository"
/// (issue 9, finding 9).
#[test]
fn a_bare_repository_is_named_as_such() {
    let p = Project::with_backlog("1.1 | First\n", FAST_CONFIG);
    p.commit_all("backlog");
    let bare = p.tmp.path().join("bare.git");
    git(
        p.tmp.path(),
        &[
            "clone",
            "-q",
            "--bare",
            p.root.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    // The backlog files sit inside the bare repository's directory.
    for f in [
        ".ralph/stories.txt",
        ".ralph/config.json",
        "specs/epic-1/story-1.1-spec.md",
    ] {
        let to = bare.join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(p.root.join(f), &to).unwrap();
    }
    let out = p.command(&["run"]).current_dir(&bare).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("bare"), "{stderr}");
    assert!(!stderr.contains("not inside a git repository"), "{stderr}");
}
