//! What a newcomer trusts on the first try (issue 14): "done" means the work
//! is on the branch, the backlog ralph runs is the one in git, a closed pipe
//! ends a command quietly, and the project is found from anywhere inside it.

use crate::harness::*;

/// Regression: an agent that wrote its file, forgot to commit and said DONE
/// got `[done]` and a landing holding only the spec's status edit; its work
/// sat under `refs/ralph/attempts/1.1/1-uncommitted`.
#[test]
fn done_with_uncommitted_work_lands_that_work() {
    let config = r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 },
                      "commit": { "format": "story {{id}}: {{title}}" } }"#;
    let p = Project::with_backlog("1.1 | Greeting\n", config);
    p.write(".gitignore", "*.tmp\n");
    p.commit_all("backlog");
    p.agent(
        r#"mkdir -p src; echo "hello from $ID" > "src/$ID.txt"; echo scratch > notes.tmp
           echo edited >> README.md
           done_"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), vec!["1.1"]);
    assert_eq!(
        p.file_on_main("src/1.1.txt").as_deref(),
        Some("hello from 1.1\n")
    );
    assert_eq!(
        p.file_on_main("README.md").as_deref(),
        Some("demo\nedited\n")
    );
    assert_eq!(p.file_on_main("notes.tmp"), None, "ignored files stay out");
    // The story's merge commit brings the work, committed with commit.format.
    let merge = git(
        &p.root,
        &[
            "log",
            "-1",
            "--format=%H",
            "--grep=^merge: story 1.1$",
            "main",
        ],
    );
    let merge = merge.trim();
    let changed = git(
        &p.root,
        &["diff", "--name-only", &format!("{merge}^1"), merge],
    );
    assert!(changed.lines().any(|l| l == "src/1.1.txt"), "{changed}");
    let work = git(
        &p.root,
        &["log", "-1", "--format=%s", &format!("{merge}^2")],
    );
    assert_eq!(work.trim(), "story 1.1: Greeting");
    // The run says so, on the terminal and in ralph.log.
    assert!(
        r.stderr
            .contains("[note] 1.1: the agent said DONE but left 2 files uncommitted"),
        "{r:?}"
    );
    assert!(p.read("ralph.log").contains("ralph committed them"));
    assert_eq!(p.story("1.1")["attempts_started"], 1);
}

/// Regression: an agent that said DONE and changed nothing got a landing of
/// the status edit alone.
#[test]
fn done_with_no_change_fails_the_attempt() {
    let p = Project::with_backlog("1.1 | Nothing\n", FAST_CONFIG);
    p.commit_all("backlog");
    let before = p.main_subjects();
    p.agent("done_");
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    let s = p.story("1.1");
    assert_eq!(s["status"], "failed", "{s}");
    assert_eq!(s["attempts"], 2, "retried, then failed for good: {s}");
    for h in s["history"].as_array().unwrap() {
        assert_eq!(h["outcome"], "fail", "{h}");
        assert_eq!(h["reason"], "reported DONE but changed nothing", "{h}");
    }
    assert_eq!(p.main_subjects(), before, "nothing landed");
    assert!(p.completed().is_empty());
    assert!(
        r.stderr.contains("reported DONE but changed nothing"),
        "{r:?}"
    );
}

/// A story that needs no change can say so: `allow_empty_done` in its spec's
/// frontmatter, or `loop.allow_empty_done` for the whole backlog.
#[test]
fn an_empty_done_lands_where_allowed() {
    let p = Project::with_backlog("1.1 | Check\n1.2 | Other\n", FAST_CONFIG);
    p.write(
        "specs/epic-1/story-1.1-spec.md",
        "---\nid: \"1.1\"\nstatus: pending\nallow_empty_done: true\n---\n\nCheck it works.\n",
    );
    p.commit_all("backlog");
    p.agent("done_");
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(p.completed(), vec!["1.1"]);
    assert_eq!(p.story("1.2")["status"], "failed");

    p.write(
        ".ralph/config.json",
        r#"{ "loop": { "max_retries": 2, "grace_seconds": 1, "allow_empty_done": true } }"#,
    );
    p.commit_all("allow empty done");
    p.ralph(&["reset", "1.2"]);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
}

/// `ralph <args> | head -1`: reads one line, closes the pipe, and returns
/// how ralph ended and what it said on stderr.
fn first_line_then_close(p: &Project, args: &[&str]) -> (std::process::ExitStatus, String, String) {
    use std::io::{BufRead, BufReader, Read};
    let mut child = p
        .command(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is gone now, as `head -1` goes.
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (child.wait().unwrap(), first, stderr)
}

/// Regression: `ralph run -d | head -2` panicked on the closed pipe (exit 101).
#[test]
fn every_command_ends_quietly_on_a_closed_pipe() {
    let mut queue = String::new();
    for i in 1..=300 {
        queue.push_str(&format!("1.{i} | A story with a title\n"));
    }
    let p = Project::with_backlog(&queue, FAST_CONFIG);
    p.commit_all("backlog");
    p.agent("done_");
    for args in [
        &["run", "-d"][..],
        &["status"],
        &["graph"],
        &["graph", "--format", "dot"],
        &["stories"],
        &["validate"],
    ] {
        let (status, first, stderr) = first_line_then_close(&p, args);
        assert!(!first.is_empty(), "{args:?} printed nothing");
        assert_ne!(status.code(), Some(101), "{args:?}: {status:?} {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(
            status.success() || status.code().is_none(),
            "{args:?}: {status:?} {stderr}"
        );
    }
}

/// A run whose reader went away (`ralph run | head -1`, a closed terminal
/// log) still lands its work and ends as it should: a broken pipe never
/// interrupts a landing or turns into a panic.
#[test]
fn a_run_with_its_output_pipes_closed_still_lands() {
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(r#"commit_file "src/$ID.txt"; done_"#);
    let mut child = p
        .command(&["run"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert_eq!(p.merges_of("1.2"), 1);
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
}

/// The `hint:` line's command after "commit them: ".
fn commit_command(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("hint: commit them: "))
        .unwrap_or_else(|| panic!("no commit hint in {stderr}"))
        .to_string()
}

/// Regression: `ralph run` ran a backlog whose `.ralph/` and specs were never
/// committed, without a word; agents' worktrees (made from the target) lacked
/// them.
#[test]
fn an_uncommitted_backlog_is_refused_with_the_command_that_commits_it() {
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n", FAST_CONFIG);
    git(&p.root, &["add", "README.md"]);
    git(&p.root, &["commit", "-qm", "the code, not the backlog"]);
    p.agent(r#"echo called >> "$SCRATCH/calls"; commit_file "src/$ID.txt"; done_"#);
    let before = p.main_subjects();
    // A dry run previews the plan and warns (issue 32: it refused, so the
    // plan could not be seen before committing).
    for args in [&["run"][..], &["run", "-d"]] {
        let r = p.ralph(args);
        let dry = args.len() == 2;
        assert_eq!(r.code, if dry { 0 } else { 2 }, "{args:?}: {r:?}");
        if dry {
            assert!(
                r.stderr.contains("warning: the backlog is not committed"),
                "{r:?}"
            );
            assert!(r.stdout.contains("1.2"), "the plan is shown: {r:?}");
        }
        for f in [
            ".ralph/config.json (untracked)",
            ".ralph/stories.txt (untracked)",
            "specs/epic-1/story-1.1-spec.md (untracked)",
            "specs/epic-1/story-1.2-spec.md (untracked)",
        ] {
            assert!(r.stderr.contains(f), "{f} not named: {r:?}");
        }
    }
    assert!(!p.scratch.join("calls").exists(), "no agent ran");
    assert_eq!(p.main_subjects(), before);

    // The command the hint gives does the job, from where the user is.
    let r = p.ralph(&["run"]);
    let cmd = commit_command(&r.stderr);
    git(&p.root, &["config", "commit.gpgsign", "false"]);
    let out = std::process::Command::new("bash")
        .args(["-c", &cmd])
        .current_dir(&p.root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{cmd}: {out:?}");

    // A spec changed since, or a spec git ignores, is refused as well.
    p.write(
        "specs/epic-1/story-1.2-spec.md",
        "---\nid: \"1.2\"\n---\nDo B, better.\n",
    );
    p.write(".gitignore", "specs/epic-1/story-1.1-spec.md\n");
    git(
        &p.root,
        &["rm", "-q", "--cached", "specs/epic-1/story-1.1-spec.md"],
    );
    git(&p.root, &["add", ".gitignore"]);
    git(&p.root, &["commit", "-qm", "ignore a spec"]);
    let r = p
        .command(&["run"])
        .current_dir(p.root.join("specs"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("specs/epic-1/story-1.1-spec.md (ignored by git)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("specs/epic-1/story-1.2-spec.md (changed since the last commit)"),
        "{stderr}"
    );
    let cmd = commit_command(&stderr);
    assert!(
        cmd.starts_with("git -C ") && cmd.contains(" add -f -- "),
        "{cmd}"
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &cmd])
        .current_dir(p.root.join("specs"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{cmd}: {out:?}");

    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    assert!(p
        .file_on_main("specs/epic-1/story-1.2-spec.md")
        .unwrap()
        .contains("better"));
}

/// Regression: an empty backlog reported success (`[OK] All stories
/// complete!`, `ok: 0 stories`).
#[test]
fn an_empty_backlog_is_an_error_for_run_and_a_warning_elsewhere() {
    let p = Project::with_backlog("# nothing yet\nx 1.1 | Deferred\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent("done_");
    for args in [&["run"][..], &["run", "-d"]] {
        let r = p.ralph(args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(
            r.stderr.contains(
                "error: the backlog is empty: .ralph/stories.txt lists no story to run \
                 (1 skipped with `x `)"
            ),
            "{r:?}"
        );
        assert!(r.stderr.contains("hint: add `ID | Title` lines"), "{r:?}");
    }
    assert!(!p.root.join(".ralph/state.json").exists());
    for args in [&["validate"][..], &["status"], &["status", "--json"]] {
        let r = p.ralph(args);
        assert_eq!(r.code, 0, "{args:?}: {r:?}");
        assert!(
            r.stderr.contains("warning: the backlog is empty"),
            "{args:?}: {r:?}"
        );
        assert!(
            !r.stdout.contains("All stories complete"),
            "{args:?}: {r:?}"
        );
    }
}

/// Commands act on the project from any directory inside it, as git does,
/// or from anywhere with `-C DIR`; a `.ralph/` above the repository is not
/// its project.
#[test]
fn commands_from_a_subdirectory_act_on_the_project() {
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n", FAST_CONFIG);
    p.write("src/deep/keep.txt", "x\n");
    p.commit_all("backlog");
    p.agent(r#"commit_file "src/$ID.txt"; done_"#);
    let deep = p.root.join("src/deep");
    let in_dir = |dir: &std::path::Path, args: &[&str]| {
        let out = p.command(args).current_dir(dir).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = in_dir(&deep, &["validate"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("ok: 2 stories"), "{out}");
    let (code, out, _) = in_dir(&deep, &["stories"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("1.2 | B"), "{out}");
    let (code, out, err) = in_dir(&deep, &["run", "-s", "1.1"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(p.merges_of("1.1"), 1);
    let (_, out, _) = in_dir(&deep, &["graph", "--format", "mermaid"]);
    assert!(out.contains("1.1") && out.contains("1.2"), "{out}");
    // -C: as if started there.
    let (code, out, err) = in_dir(
        &p.scratch,
        &["-C", deep.to_str().unwrap(), "status", "--json"],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["done"], serde_json::json!(["1.1"]));
    let (code, _, err) = in_dir(&p.scratch, &["-C", "no/such/dir", "status"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("-C no/such/dir"), "{err}");
    assert!(!deep.join(".ralph").exists() && !p.scratch.join(".ralph").exists());

    // A repository below a stray .ralph/ (in a home directory, say) is no
    // project until it has its own.
    let outer = p.tmp.path().join("home");
    std::fs::create_dir_all(outer.join(".ralph")).unwrap();
    let repo = outer.join("code/repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let (code, _, err) = in_dir(&repo.join("src"), &["status"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no ralph project here"), "{err}");
    assert!(err.contains(&format!("up to {}", repo.display())), "{err}");
    assert!(err.contains("hint: run `ralph init`"), "{err}");
}

/// Regression: `ralph init` in a subdirectory of a project made a nested
/// `.ralph/`.
#[test]
fn init_inside_a_project_refuses() {
    let p = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
    p.write("src/deep/keep.txt", "x\n");
    p.commit_all("backlog");
    let before = p.snapshot();
    for dir in [p.root.clone(), p.root.join("src/deep")] {
        let out = p.command(&["init"]).current_dir(&dir).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", dir.display());
        assert!(
            err.contains(&format!("({}/.ralph)", p.root.display())),
            "{err}"
        );
    }
    assert_eq!(p.snapshot(), before, "nothing was made");

    // A prd.json project is a project too.
    let q = Project::new();
    q.write("prd.json", r#"{ "userStories": [] }"#);
    let r = q.ralph(&["init"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("prd.json"), "{r:?}");
    assert!(!q.root.join(".ralph").exists());
}

/// Regression: `ralph init` outside a git repository succeeded, and only
/// `ralph run` then said so.
#[test]
fn init_outside_a_git_repository_refuses_with_a_hint() {
    let p = Project::new();
    let out = p
        .command(&["init"])
        .current_dir(&p.scratch)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("not inside a git repository"), "{err}");
    assert!(err.contains("hint: run `git init"), "{err}");
    assert!(!p.scratch.join(".ralph").exists(), "nothing was made");
}

/// Regression: `run -d` passed outside git and without the agent installed;
/// it refuses what the run would refuse.
#[test]
fn a_dry_run_checks_what_the_run_needs() {
    let p = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
    p.commit_all("backlog");
    let r = p.ralph(&["run", "-d"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("'claude' was not found on PATH"), "{r:?}");
    p.agent("done_");
    assert_eq!(p.ralph(&["run", "-d"]).code, 0);
    std::fs::remove_dir_all(p.root.join(".git")).unwrap();
    let r = p.ralph(&["run", "-d"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("not inside a git repository"), "{r:?}");
}

/// Many uncommitted specs: the list is cut at 20 lines, and the command
/// names their directory instead of each file.
#[test]
fn a_long_uncommitted_backlog_is_committed_by_directory() {
    let mut queue = String::new();
    for i in 1..=30 {
        queue.push_str(&format!("2.{i} | Story {i}\n"));
    }
    let p = Project::with_backlog(&queue, FAST_CONFIG);
    git(&p.root, &["add", "README.md"]);
    git(&p.root, &["commit", "-qm", "code"]);
    p.agent("done_");
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("  ... and 12 more"), "{r:?}");
    let cmd = commit_command(&r.stderr);
    assert_eq!(
        cmd,
        "git add -- .ralph/config.json .ralph/stories.txt specs && git commit -m \"Add the ralph backlog\""
    );
}

/// `validate` promises every problem at once (issue 21, defect 7): a config
/// error, a spec that is missing and a dependency cycle among the stories
/// that did load are all printed by one run, with the config's unknown-key
/// warnings (the documented `"paralell"` typo gets its guess), exit 2.
/// Before, a missing spec hid the cycle and any error hid the warnings.
#[test]
fn validate_prints_every_problem_at_once() {
    let p = Project::with_backlog(
        "1.1 | A\n1.2 | B\n1.3 | C\n",
        "{\n  \"paralell\": true,\n  \"loop\": { \"timeout_seconds\": -5 }\n}\n",
    );
    p.write(
        "specs/epic-1/story-1.1-spec.md",
        "---\nid: \"1.1\"\ndepends_on: [\"1.2\"]\n---\nA\n",
    );
    p.write(
        "specs/epic-1/story-1.2-spec.md",
        "---\nid: \"1.2\"\ndepends_on: [\"1.1\", \"1.3\"]\n---\nB\n",
    );
    std::fs::remove_file(p.root.join("specs/epic-1/story-1.3-spec.md")).unwrap();
    let r = p.ralph(&["validate"]);
    assert_eq!(r.code, 2, "{r:?}");
    for needle in [
        "loop.timeout_seconds must be a positive number",
        "story 1.3: no spec file matches",
        // With the depends_on line (issue 32: the file alone).
        "specs/epic-1/story-1.1-spec.md:3: dependency cycle: 1.1 -> 1.2 -> 1.1",
        "unknown key \"paralell\" is ignored; did you mean \"parallel\"?",
        "3 problems found",
    ] {
        assert!(r.stderr.contains(needle), "{needle:?} missing: {r:?}");
    }
    assert!(
        !r.stderr.contains("unknown dependency") && !r.stderr.contains("1.3 is not"),
        "a story whose spec is missing is still a story its dependents name: {r:?}"
    );
}

/// Regression: an unknown dependency named the spec but not its line.
#[test]
fn an_unknown_dependency_names_the_depends_on_line() {
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n", FAST_CONFIG);
    p.write(
        "specs/epic-1/story-1.2-spec.md",
        "---\nid: \"1.2\"\ntitle: \"B\"\ndepends_on: [\"9.9\"]\n---\nB\n",
    );
    let r = p.ralph(&["validate"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("specs/epic-1/story-1.2-spec.md:4: story 1.2 depends on 9.9"),
        "{r:?}"
    );
}

/// `ralph reset ID` on a story that landed runs it again (issue 21, defect
/// 7): before, the next run found its old `merge: story 1.1` on main and
/// marked it done at once. The reset puts the spec's status back in a commit
/// of its own (the backlog stays committed, so `ralph run` takes it), and
/// the story's next landing is a second merge with `status: done` again.
#[test]
fn reset_of_a_landed_story_runs_it_again() {
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(r#"echo "$ID" >> "$SCRATCH/calls"; commit_file "src/$ID.txt"; done_"#);
    let spec = "specs/epic-1/story-1.1-spec.md";
    assert_eq!(p.ralph(&["run"]).code, 0);
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    assert!(p.file_on_main(spec).unwrap().contains("status: done"));

    let r = p.ralph(&["reset", "1.1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("Story 1.1"), "{r:?}");
    assert_eq!(p.completed(), vec!["1.2"]);
    let on_main = p.file_on_main(spec).unwrap();
    assert!(on_main.contains("status: pending"), "{on_main}");
    assert_eq!(p.read(spec), on_main, "the checkout has the reset too");
    assert_eq!(
        git(&p.root, &["status", "--porcelain"]),
        "",
        "nothing left to commit"
    );
    assert_eq!(
        git(&p.root, &["log", "-1", "--format=%s", "main"]).trim(),
        "reset: story 1.1"
    );

    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.scratch_text("calls"), "1.1\n1.2\n1.1\n", "1.1 ran again");
    assert_eq!(p.merges_of("1.1"), 2);
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    assert!(p.file_on_main(spec).unwrap().contains("status: done"));
    assert_eq!(p.file_on_main("src/1.1.txt").as_deref(), Some("1.1\n1.1\n"));

    // Done again for good: the next run (and a crash's reconcile) knows.
    assert_eq!(p.ralph(&["run"]).code, 0);
    assert_eq!(p.scratch_text("calls"), "1.1\n1.2\n1.1\n");
}

/// The same with prd.json: the reset sets `passes` back to false in a
/// commit, and a user's edit of prd.json in the way stops it before
/// anything changes (never overwritten).
#[test]
fn reset_of_a_landed_prd_story_sets_passes_back() {
    let p = Project::new();
    let prd = r#"{
  "userStories": [
    { "id": "US-001", "title": "First", "description": "Start", "acceptanceCriteria": ["works"], "priority": 1, "passes": false }
  ]
}
"#;
    p.write("prd.json", prd);
    // The fake agent leaves evidence under $SCRATCH, outside a sandbox's reach.
    p.write(".ralph/config.json", r#"{ "sandbox": { "mode": "off" } }"#);
    p.commit_all("prd");
    p.agent(r#"echo "$ID" >> "$SCRATCH/calls"; commit_file "src/$ID.txt"; done_"#);
    assert_eq!(p.ralph(&["run"]).code, 0);
    assert!(p
        .file_on_main("prd.json")
        .unwrap()
        .contains("\"passes\": true"));

    p.write(
        "prd.json",
        &p.read("prd.json").replace("Start", "Start here"),
    );
    let r = p.ralph(&["reset", "US-001"]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("prd.json"), "{r:?}");
    assert!(
        p.read("prd.json").contains("Start here"),
        "the edit is kept"
    );
    assert_eq!(p.completed(), vec!["US-001"], "nothing changed");

    git(&p.root, &["checkout", "--", "prd.json"]);
    let r = p.ralph(&["reset", "US-001"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(p
        .file_on_main("prd.json")
        .unwrap()
        .contains("\"passes\": false"));
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
    assert_eq!(p.ralph(&["run"]).code, 0);
    assert_eq!(p.scratch_text("calls"), "US-001\nUS-001\n");
    assert!(p
        .file_on_main("prd.json")
        .unwrap()
        .contains("\"passes\": true"));
}

/// Even a broken `specs.pattern` hides nothing else: the queue's own
/// problems and the DAG are still checked, and no "no spec file matches"
/// line per story repeats the pattern's problem (issue 21, defect 7).
#[test]
fn a_broken_spec_pattern_hides_no_other_problem() {
    let p = Project::with_backlog(
        "1.1 | A\n# [batch:abc]\n1.2 | B\n",
        r#"{ "specs": { "pattern": "specs/story-{{epic}}.md" } }"#,
    );
    p.write(
        "specs/epic-1/story-1.1-spec.md",
        "---\nid: \"1.1\"\ndepends_on: [\"1.1\"]\n---\nA\n",
    );
    let r = p.ralph(&["validate"]);
    assert_eq!(r.code, 2, "{r:?}");
    for needle in [
        "specs.pattern must contain both {{epic}} and {{id}}",
        ".ralph/stories.txt:2",
        "story 1.1 depends on itself",
        "3 problems found",
    ] {
        assert!(r.stderr.contains(needle), "{needle:?} missing: {r:?}");
    }
    assert!(!r.stderr.contains("no spec file matches"), "{r:?}");
}

// ---- issue 32: the agent a newcomer starts with, under the default sandbox ----

/// Copies `from` (a directory of this repository) into the project root.
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dst = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
            copy_tree(&entry.path(), &dst);
        } else {
            std::fs::copy(entry.path(), &dst).unwrap();
        }
    }
}

/// Regression: with bubblewrap installed, `sandbox/run-demo.sh` landed 0 of 8
/// (`bwrap: execvp <project>/bin/demo-agent: No such file or directory`:
/// the sandbox hides the main checkout the agent was started from). The
/// demo as `run-demo.sh` runs it, with its own config (`sandbox.mode`
/// unset: auto), lands every story; where bubblewrap works (CI) it runs
/// confined.
#[test]
fn the_demo_lands_every_story_under_the_default_sandbox() {
    let p = Project::new();
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sandbox/demo");
    copy_tree(&demo, &p.root);
    p.commit_all("demo: toolkit backlog");
    let confined = crate::sandbox::bwrap_works();
    let r = p.ralph_with(
        &["run", "--parallel", "-j", "3"],
        &[("DEMO_AGENT_FAST", "1")],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let mut done = p.completed();
    done.sort();
    assert_eq!(
        done,
        ["1.1", "1.2", "2.1", "2.2", "2.3", "3.1", "3.2", "3.3"],
        "{r:?}"
    );
    if confined {
        assert!(!r.stderr.contains("not confined"), "{r:?}");
    }
    let tests = std::process::Command::new("bash")
        .args(["tests/run.sh"])
        .current_dir(&p.root)
        .output()
        .unwrap();
    assert!(tests.status.success(), "{tests:?}");
}

/// The fenced block of `lang` that follows `heading` in docs/README.md.
fn docs_block(heading: &str, lang: &str) -> String {
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/README.md"),
    )
    .unwrap();
    let after = &docs[docs
        .find(heading)
        .expect("the heading is in docs/README.md")..];
    let start = after.find(&format!("```{lang}\n")).unwrap() + lang.len() + 4;
    let len = after[start..].find("```").unwrap();
    after[start..start + len].to_string()
}

/// Regression: the docs' "a first agent of your own" (`bin/my-agent`,
/// committed in the project) failed 0 of 3 under the default sandbox, as
/// the demo did. Its script and config are read from docs/README.md.
#[test]
fn the_docs_own_agent_lands_under_the_default_sandbox() {
    let p = Project::with_backlog("1.1 | One\n1.2 | Two\n1.3 | Three\n", "{}");
    let heading = "### A first agent of your own";
    p.write("bin/my-agent", &docs_block(heading, "sh"));
    std::fs::set_permissions(
        p.root.join("bin/my-agent"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    p.write(".ralph/config.json", &docs_block(heading, "json"));
    p.commit_all("backlog and agent");
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), vec!["1.1", "1.2", "1.3"], "{r:?}");
    assert_eq!(
        p.file_on_main("notes-1.2.txt").as_deref(),
        Some("story 1.2\n")
    );
}

/// The run stopped before any attempt: exit 2 naming the command and
/// `why`, no attempt log, nothing in the state; `validate` says the same.
fn stops_before_any_attempt(p: &Project, command: &str, why: &str) {
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains(&format!("command '{command}' cannot start"))
            && r.stderr.contains(why),
        "{r:?}"
    );
    assert!(r.stderr.contains("hint:"), "{r:?}");
    assert!(!p.root.join(".ralph/logs").exists(), "no attempt log");
    let state = p.read(".ralph/state.json");
    assert!(
        !state.contains("attempts_started"),
        "nothing charged: {state}"
    );
    let v = p.ralph(&["validate"]);
    assert_eq!(v.code, 2, "{v:?}");
    assert!(v.stderr.contains(why), "{v:?}");
}

/// Regression: an agent committed without its execute bit was charged an
/// attempt (`ralph run` exit 1), and `validate` said ok.
#[test]
fn an_agent_without_its_execute_bit_stops_the_run_before_any_attempt() {
    let p = Project::with_backlog(
        "1.1 | One\n",
        r#"{ "agent": { "name": "custom", "command": "bin/my-agent" } }"#,
    );
    p.write(
        "bin/my-agent",
        "#!/bin/sh\necho '<ralph>DONE 1.1</ralph>'\n",
    );
    p.commit_all("backlog and agent");
    stops_before_any_attempt(&p, "bin/my-agent", "not executable");
}

/// Regression: an agent whose `#!` line names an interpreter that is not
/// there failed every attempt of the first story.
#[test]
fn an_agent_with_a_bad_interpreter_stops_the_run_before_any_attempt() {
    let p = Project::with_backlog("1.1 | One\n", "{}");
    p.commit_all("backlog");
    p.write_outside(
        &p.bin.join("claude"),
        "#!/no/such/dir/python3\nprint('hi')\n",
    );
    std::fs::set_permissions(
        p.bin.join("claude"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    stops_before_any_attempt(&p, "claude", "/no/such/dir/python3");
}

/// Regression: an agent in the project that is not committed is not in the
/// attempt's worktree, and bubblewrap hides the main checkout: every
/// attempt failed (`execvp ... No such file or directory`).
#[test]
fn an_agent_hidden_by_the_sandbox_stops_the_run_before_any_attempt() {
    if !crate::sandbox::bwrap_works() {
        return;
    }
    let p = Project::with_backlog(
        "1.1 | One\n",
        r#"{ "agent": { "name": "custom", "command": "bin/my-agent" },
             "sandbox": { "mode": "auto" } }"#,
    );
    p.write(".gitignore", "bin/\n");
    p.commit_all("backlog");
    p.write(
        "bin/my-agent",
        "#!/bin/sh\necho '<ralph>DONE 1.1</ralph>'\n",
    );
    std::fs::set_permissions(
        p.root.join("bin/my-agent"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    stops_before_any_attempt(&p, "bin/my-agent", "ignored by git");
}

/// An interpreter the sandbox hides (under `$HOME`, which an attempt sees
/// empty): found by the probe run inside bubblewrap, not by a check on the
/// host, where it exists.
#[test]
fn an_interpreter_the_sandbox_hides_stops_the_run_before_any_attempt() {
    if !crate::sandbox::bwrap_works() {
        return;
    }
    let p = Project::with_backlog("1.1 | One\n", r#"{ "sandbox": { "mode": "bwrap" } }"#);
    p.commit_all("backlog");
    let interp = p.home.join("tools/sh");
    std::fs::create_dir_all(interp.parent().unwrap()).unwrap();
    std::fs::copy("/bin/sh", &interp).unwrap();
    p.write_outside(
        &p.bin.join("claude"),
        &format!("#!{}\necho '<ralph>DONE 1.1</ralph>'\n", interp.display()),
    );
    std::fs::set_permissions(
        p.bin.join("claude"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    stops_before_any_attempt(&p, "claude", "inside the sandbox");
    // `--sandbox off` for one run, the config unchanged (issue 32).
    let r = p.ralph(&["run", "--sandbox", "off"]);
    assert_eq!(r.code, 1, "it starts now (and says no DONE of work): {r:?}");
    assert!(
        p.root.join(".ralph/logs/1.1/attempt-1.log").exists(),
        "{r:?}"
    );
}

/// `ralph run --sandbox MODE`: the mode of one run, over `sandbox.mode`.
#[test]
fn the_sandbox_flag_sets_the_mode_of_one_run() {
    let p = Project::with_backlog("1.1 | One\n", r#"{ "sandbox": { "mode": "auto" } }"#);
    p.commit_all("backlog");
    p.agent("done_");
    let r = p.ralph(&["run", "-d", "--sandbox", "off"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.all().contains("sandbox: off"), "{r:?}");
    let r = p.ralph(&["run", "-d", "--sandbox", "docker"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("auto, bwrap, off"), "{r:?}");
}

/// The tokens of the summary's `lifetime (all runs): N tokens` line.
fn lifetime_tokens(stdout: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("lifetime (all runs): "))
        .unwrap_or_else(|| panic!("no lifetime line: {stdout}"));
    line["lifetime (all runs): ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Regressions of issue 32 a newcomer met after `ralph reset`: attempt
/// logs went on at `attempt-3.log` while the display said `attempt 1/2`
/// (now it names the log: numbers never restart, so no log or kept ref is
/// overwritten, and `ralph log ID -a N` takes the number the display
/// shows); `ralph log` said `result: ok` of an attempt that said FAIL;
/// after `reset --yes` the summary's lifetime line said 0 tokens while
/// `stats` counted them; `stats` said `none` for a story without an
/// estimation (docs: medium).
#[test]
fn after_a_reset_the_display_logs_and_lifetime_agree() {
    let p = Project::with_backlog("1.1 | One\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"if [ "$N" = 1 ]; then result "no <ralph>FAIL $ID: not today</ralph>"; exit 0; fi
           commit_file "src/$ID-$N.txt"; done_"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let log1 = p.ralph(&["log", "1.1", "-a", "1"]);
    assert!(log1.stdout.contains("── result: FAIL"), "{log1:?}");
    let stats = p.ralph(&["stats"]);
    assert!(stats.stdout.contains("medium"), "{stats:?}");
    assert!(!stats.stdout.contains("none "), "{stats:?}");

    let reset = p.ralph(&["reset", "1.1"]);
    assert_eq!(reset.code, 0, "{reset:?}");
    assert!(reset.stdout.contains("N up to 2"), "{reset:?}");
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("(attempt 1/2, logged as attempt-3)")
            || r.stdout.contains("(attempt 1/2, logged as attempt-3)"),
        "{r:?}"
    );
    let latest = p.ralph(&["log", "1.1"]);
    let third = p.ralph(&["log", "1.1", "-a", "3"]);
    assert_eq!(latest.stdout, third.stdout);
    assert!(third.stdout.contains("── result: ok"), "{third:?}");

    let all = p.ralph(&["reset", "--yes"]);
    assert_eq!(all.code, 0, "{all:?}");
    let again = p.ralph(&["run"]);
    assert_eq!(again.code, 0, "{again:?}");
    let json = p.ralph(&["stats", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("stats --json");
    let counted = v["lifetime"]["tokens"].as_u64().unwrap();
    assert!(counted > 0, "{v}");
    assert_eq!(lifetime_tokens(&again.stdout), counted, "{again:?}");
}
