//! The core of `ralph run`: attempts, verdicts, retries, landing, processes.

use std::fs;

use crate::harness::*;

const THREE: &str = "1.1 | First\n1.2 | Second\n1.3 | Third\n";

#[test]
fn happy_path_with_a_fail_then_succeed_story() {
    let p = Project::with_backlog(THREE, FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"
say "working on $ID"
tool "ls"
tool_result "<ralph>DONE 9.9</ralph> quoted from an old file"
if [ "$ID" = "1.2" ] && [ "$N" = "1" ]; then
  result "<ralph>FAIL 1.2: tests are red</ralph>"
  exit 0
fi
commit_file "src/$ID.txt"
say "<ralph>LEARN: keep sqlite schema migrations small</ralph>"
done_
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), vec!["1.1", "1.2", "1.3"]);
    for id in ["1.1", "1.2", "1.3"] {
        assert_eq!(p.merges_of(id), 1, "one merge commit for {id}");
        assert_eq!(
            p.file_on_main(&format!("src/{id}.txt")).as_deref(),
            Some(format!("{id}\n").as_str())
        );
        // The spec's status edit is part of the landing, on the branch and on disk.
        let spec = format!("specs/epic-1/story-{id}-spec.md");
        assert!(
            p.file_on_main(&spec).unwrap().contains("status: done"),
            "{id} spec on main"
        );
        assert!(p.read(&spec).contains("status: done"));
    }
    let s12 = p.story("1.2");
    assert_eq!(s12["attempts"], 1, "one failed attempt counted: {s12}");
    assert_eq!(s12["status"], "done");
    assert_eq!(p.story("1.1")["attempts"], 0);
    let st = p.state();
    assert_eq!(st["retry_count"], 0);
    assert!(st["current_story"].is_null());
    assert!(
        st["stories"]["1.1"]["usage"]["cache_read_input_tokens"]
            .as_u64()
            .unwrap()
            >= 7
    );
    let progress = p.read("progress.txt");
    assert!(
        progress.contains("[FAIL] Story 1.2 - tests are red - "),
        "{progress}"
    );
    assert!(progress.contains("(attempt 1/2)"));
    for id in ["1.1", "1.2", "1.3"] {
        assert!(
            progress.contains(&format!("[DONE] Story {id} - ")),
            "{progress}"
        );
    }
    // Learnings are stored once however often they are reported.
    assert_eq!(
        progress
            .matches("[LEARN] keep sqlite schema migrations small")
            .count(),
        1
    );
    assert!(p
        .read(".ralph/learnings/data-model.md")
        .contains("- [Story 1.1] keep sqlite schema migrations small"));
    assert!(p.root.join(".ralph/logs/1.2/attempt-1.log").exists());
    assert!(p.read(".ralph/logs/1.2/attempt-2.log").contains("DONE 1.2"));
    assert_eq!(
        p.worktrees().len(),
        1,
        "only the main checkout: {:?}",
        p.worktrees()
    );
    assert!(
        p.branches("ralph/*").is_empty(),
        "{:?}",
        p.branches("ralph/*")
    );
    assert!(!p.root.join(".ralph/.lock").exists());
    assert_eq!(
        git(&p.root, &["status", "--porcelain", "--untracked-files=no"]),
        ""
    );
}

#[test]
fn a_story_that_always_fails_uses_its_retries_and_blocks_its_dependents() {
    let p = Project::with_backlog(THREE, r#"{ "loop": { "max_retries": 3 } }"#);
    p.commit_all("backlog");
    p.agent(
        r#"
echo "attempt $ID $N" >> "$SCRATCH/calls"
if [ "$ID" = "1.1" ]; then commit_file "src/partial.txt"; exit 1; fi
commit_file "src/$ID.txt"; done_
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    let calls = fs::read_to_string(p.scratch.join("calls")).unwrap();
    assert_eq!(
        calls, "attempt 1.1 1\nattempt 1.1 2\nattempt 1.1 3\n",
        "dependents never ran"
    );
    let s = p.story("1.1");
    assert_eq!(s["attempts"], 3);
    assert_eq!(s["status"], "failed");
    assert!(
        s["last_error"].as_str().unwrap().contains("Exit code 1"),
        "{s}"
    );
    assert!(p.completed().is_empty());
    let progress = p.read("progress.txt");
    for n in 1..=3 {
        assert!(progress.contains(&format!("(attempt {n}/3)")), "{progress}");
    }
    assert!(r.all().contains("blocked: 1.2, 1.3"), "{r:?}");
    // Every failed attempt's commits are kept under a ref; nothing landed.
    assert_eq!(
        p.refs("refs/ralph/attempts/1.1/").len(),
        3,
        "{:?}",
        p.refs("refs/ralph/")
    );
    assert_eq!(p.main_subjects(), vec!["backlog"]);
    let st = p.ralph(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&st.stdout).unwrap();
    assert_eq!(v["failed"], serde_json::json!(["1.1"]));
    assert_eq!(v["blocked"], serde_json::json!(["1.2", "1.3"]));
}

#[test]
fn a_hanging_agent_and_its_grandchildren_are_killed_at_the_timeout() {
    let p = Project::with_backlog(
        "1.1 | Hang\n",
        r#"{ "loop": { "max_retries": 1, "grace_seconds": 1 } }"#,
    );
    p.commit_all("backlog");
    p.agent(
        r#"
sleep 1000 &
echo $! >> "$SCRATCH/pids"
setsid sleep 1000 < /dev/null > /dev/null 2>&1 &
echo $! >> "$SCRATCH/pids"
say "sleeping"
sleep 1000
"#,
    );
    let r = p.ralph(&["run", "-t", "3"]);
    assert_eq!(r.code, 1, "{r:?}");
    let pids = pids_in(&p.scratch.join("pids"));
    assert_eq!(pids.len(), 2);
    for pid in pids {
        assert!(!alive(pid), "grandchild {pid} outlived its attempt");
    }
    assert!(p.story("1.1")["last_error"]
        .as_str()
        .unwrap()
        .contains("Timeout after 3s"));
}

#[test]
fn a_background_sleeper_left_by_a_successful_agent_is_swept() {
    let p = Project::with_backlog("1.1 | Bg\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"
setsid sleep 1000 < /dev/null > /dev/null 2>&1 &
echo $! >> "$SCRATCH/pids"
commit_file "src/a.txt"
done_
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let pids = pids_in(&p.scratch.join("pids"));
    assert_eq!(pids.len(), 1);
    assert!(!alive(pids[0]));
}

#[test]
fn an_agent_that_answers_sigterm_with_done_is_still_a_timeout() {
    let p = Project::with_backlog(
        "1.1 | Sly\n",
        r#"{ "loop": { "max_retries": 1, "grace_seconds": 5 } }"#,
    );
    p.commit_all("backlog");
    p.agent(
        r#"
commit_file "src/a.txt"
trap 'done_; exit 0' TERM
say "waiting"
while true; do sleep 0.1; done
"#,
    );
    let r = p.ralph(&["run", "-t", "2"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(p.completed().is_empty());
    assert!(
        p.read(".ralph/logs/1.1/attempt-1.log").contains("DONE 1.1"),
        "the DONE was printed"
    );
    assert!(p.story("1.1")["last_error"]
        .as_str()
        .unwrap()
        .contains("Timeout"));
    assert_eq!(p.main_subjects(), vec!["backlog"]);
}

#[test]
fn an_attempt_ends_when_the_agent_exits_even_if_a_grandchild_holds_stdout() {
    let p = Project::with_backlog("1.1 | Pipe\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"
commit_file "src/a.txt"
done_
sleep 1000 &
echo $! >> "$SCRATCH/pids"
exit 0
"#,
    );
    let r = p.ralph(&["run", "-t", "600"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), vec!["1.1"]);
    for pid in pids_in(&p.scratch.join("pids")) {
        assert!(!alive(pid));
    }
}

#[test]
fn signals_are_read_from_the_agents_own_text_only() {
    let queue = "# [batch:1]\n1.1 | Other id\n1.2 | Tool result only\n1.3 | Is error\n1.4 | Silent\n1.5 | Fine\n";
    let p = Project::with_backlog(queue, r#"{ "loop": { "max_retries": 1 } }"#);
    p.commit_all("backlog");
    p.agent(
        r#"
commit_file "src/$ID.txt"
case "$ID" in
  1.1) done_ 1.9 ;;
  1.2) tool "grep DONE old.log"; tool_result "<ralph>DONE 1.2</ralph>"; result "looked around" ;;
  1.3) result "API Error: server exploded <ralph>DONE 1.3</ralph>" true ;;
  1.4) say "I did some work" ;;
  1.5) done_ ;;
esac
"#,
    );
    let r = p.ralph(&["run", "--parallel", "-j", "2"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(p.completed(), vec!["1.5"]);
    let err = |id: &str| p.story(id)["last_error"].as_str().unwrap_or("").to_string();
    assert!(err("1.1").contains("Mismatched DONE"), "{}", err("1.1"));
    assert!(
        err("1.2").contains("No completion signal"),
        "{}",
        err("1.2")
    );
    assert!(err("1.3").contains("error"), "{}", err("1.3"));
    assert!(
        err("1.4").contains("No completion signal"),
        "{}",
        err("1.4")
    );
}

#[test]
fn a_huge_spec_with_special_characters_reaches_the_agent_intact() {
    let p = Project::with_backlog("1.1 | Big\n", FAST_CONFIG);
    let mut spec = String::from("---\nstatus: pending\n---\n# Big spec\n");
    let line = "run `make && make test` for $HOME and \\1 and {{LEARNINGS}} {{TITLE}} & more\n";
    while spec.len() < 300_000 {
        spec.push_str(line);
    }
    p.write("specs/epic-1/story-1.1-spec.md", &spec);
    p.commit_all("backlog");
    p.agent(
        r#"
cp "$PROMPT_FILE" "$SCRATCH/prompt"
commit_file "src/a.txt"; done_
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let prompt = fs::read_to_string(p.scratch.join("prompt")).unwrap();
    assert!(
        prompt.contains(&spec),
        "the spec is in the prompt byte for byte"
    );
    // The story's part (issue 25: after what every story shares) opens
    // with the line naming the story.
    let story_part = prompt.split_once("## Your story\n").unwrap().1;
    assert!(story_part
        .lines()
        .find(|l| !l.is_empty())
        .unwrap()
        .contains("implement Story 1.1: Big"));
}

#[test]
fn dry_run_changes_nothing() {
    let p = Project::with_backlog(THREE, FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(r#"echo called >> "$SCRATCH/calls"; done_"#);
    let before = p.snapshot();
    let r = p.ralph(&["run", "-d"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("[DRY RUN]"));
    assert!(r.stdout.contains("implement Story 1.2: Second"), "{r:?}");
    assert_eq!(p.snapshot(), before);
    assert!(!p.scratch.join("calls").exists());
}

#[test]
fn a_held_lock_means_exit_3_and_no_change() {
    let p = Project::with_backlog(THREE, FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(r#"echo called >> "$SCRATCH/calls"; done_"#);
    fs::create_dir_all(p.root.join(".ralph")).unwrap();
    let f = fs::File::create(p.root.join(".ralph/.lock")).unwrap();
    f.lock().unwrap();
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("another ralph run holds"), "{r:?}");
    assert!(!p.scratch.join("calls").exists());
    // Read-only commands still work while a run holds the lock.
    assert_eq!(p.ralph(&["status"]).code, 0);
    assert_eq!(p.ralph(&["stories"]).code, 0);
    drop(f);
    // A lock whose holder is gone is simply free.
    assert_eq!(p.ralph(&["run", "-n", "1"]).code, 0);
}

#[test]
fn a_failing_validation_command_blocks_landing() {
    let config = r#"{ "loop": { "max_retries": 1 },
      "validation": { "commands": [ { "name": "has-ok", "cmd": "seq 1 500; echo 'no ok.txt here' >&2; test -f ok.txt", "required": true } ] } }"#;
    let p = Project::with_backlog("1.1 | Gate\n", config);
    p.commit_all("backlog");
    p.agent(r#"commit_file "src/a.txt"; done_"#);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    // The whole output is kept and the failure line names it (issue 9, 8).
    let log = p.read(".ralph/logs/1.1/validation-1.log");
    // stdout and stderr are two pipes: their lines interleave as they come.
    assert!(
        log.contains("1\n2\n") && log.contains("500\n") && log.contains("no ok.txt here\n"),
        "{log}"
    );
    assert!(
        r.stderr.contains("(log: .ralph/logs/1.1/validation-1.log)"),
        "{r:?}"
    );
    assert!(p.completed().is_empty());
    assert_eq!(p.main_subjects(), vec!["backlog"], "nothing reached main");
    assert!(p.story("1.1")["last_error"]
        .as_str()
        .unwrap()
        .contains("validation 'has-ok' failed"));
    // The work is kept.
    assert_eq!(p.refs("refs/ralph/attempts/1.1/").len(), 1);

    // With the file present on the merged tree, the same gate lets it land.
    p.write("ok.txt", "ok\n");
    p.commit_all("add ok");
    let r = p.ralph(&["run", "-s", "1.1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.merges_of("1.1"), 1);
}

#[test]
fn tentative_work_lands_only_through_required_validation() {
    let config = r#"{ "loop": { "max_retries": 1 },
      "validation": { "commands": [ { "name": "files", "cmd": "test -f src/a.txt", "required": true } ] } }"#;
    let p = Project::with_backlog("1.1 | Quiet\n", config);
    p.commit_all("backlog");
    p.agent(r#"commit_file "src/a.txt"; say "committed, forgot the tag""#);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert!(p
        .read("progress.txt")
        .contains("(tentative: commits detected, validated)"));
}

#[test]
fn hooks_run_with_their_variables() {
    let config = r#"{ "loop": { "max_retries": 2 }, "hooks": {
        "pre_iteration": "echo \"iteration $RALPH_ITERATION\" >> hooks.log",
        "post_iteration": "echo \"end of iteration\" >> hooks.log",
        "pre_story": "echo \"pre $RALPH_STORY $RALPH_SPEC\" >> hooks.log",
        "post_story": "echo \"post $RALPH_STORY $RALPH_RESULT\" >> hooks.log",
        "pre_worktree": "test \"$RALPH_STORY\" != 1.2 || test -f $RALPH_PROJECT_DIR/allow-1.2"
    } }"#;
    let p = Project::with_backlog("# [batch:1]\n1.1 | A\n1.2 | B\n", config);
    p.commit_all("backlog");
    p.agent(r#"commit_file "src/$ID.txt"; done_"#);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    let log = p.read("hooks.log");
    assert!(
        log.contains("pre 1.1 specs/epic-1/story-1.1-spec.md"),
        "{log}"
    );
    assert!(log.contains("post 1.1 done"), "{log}");
    assert!(log.contains("iteration 1\n"), "{log}");
    // 1.1 once, 1.2 twice (its pre_worktree hook fails both attempts), and
    // every attempt that began an iteration ends it, failed ones too.
    assert_eq!(log.matches("iteration ").count(), 3, "{log}");
    assert_eq!(log.matches("end of iteration").count(), 3, "{log}");
    assert_eq!(log.matches("post 1.2 error").count(), 2, "{log}");
    assert!(p.story("1.2")["last_error"]
        .as_str()
        .unwrap()
        .contains("pre_worktree hook failed"));
    assert_eq!(p.completed(), vec!["1.1"]);
}

#[test]
fn only_and_resume_select_stories() {
    // Independent stories (one batch section): unbatched ones form a chain,
    // and `-s` runs what a story waits for first (issue 21, the DAG is law;
    // `scheduling::run_s_runs_the_missing_dependencies_first_and_says_so`).
    let p = Project::with_backlog(&format!("# [batch:1]\n{THREE}"), FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(r#"echo "$ID" >> "$SCRATCH/calls"; commit_file "src/$ID.txt"; done_"#);
    assert_eq!(p.ralph(&["run", "-s", "1.2"]).code, 0);
    assert_eq!(p.completed(), vec!["1.2"]);
    assert_eq!(p.ralph(&["run", "-r", "1.3"]).code, 0);
    assert_eq!(p.completed(), vec!["1.2", "1.3"]);
    let r = p.ralph(&["run", "-r", "9.9"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("9.9"));
    assert_eq!(p.ralph(&["run", "-n", "1"]).code, 0);
    assert_eq!(
        fs::read_to_string(p.scratch.join("calls")).unwrap(),
        "1.2\n1.3\n1.1\n"
    );
}

#[test]
fn a_root_refusal_is_reported_and_not_retried() {
    let p = Project::with_backlog("1.1 | A\n", r#"{ "loop": { "max_retries": 3 } }"#);
    p.commit_all("backlog");
    p.agent(
        r#"echo "call" >> "$SCRATCH/calls"
echo "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons" >&2
exit 1"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("IS_SANDBOX=1"), "{r:?}");
    assert_eq!(
        fs::read_to_string(p.scratch.join("calls"))
            .unwrap()
            .lines()
            .count(),
        1
    );
    assert_eq!(p.story("1.1")["attempts"], 0);
}

#[test]
fn the_agent_environment_is_set_and_claudecode_removed() {
    let p = Project::with_backlog("1.1 | Env\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"env | grep -E '^(RALPH_|CLAUDECODE)' | sort > "$SCRATCH/env"
commit_file "src/a.txt"; done_"#,
    );
    let r = {
        let out = p.command(&["run"]).env("CLAUDECODE", "1").output().unwrap();
        out.status.code().unwrap()
    };
    assert_eq!(r, 0);
    let env = fs::read_to_string(p.scratch.join("env")).unwrap();
    assert!(!env.contains("CLAUDECODE"), "{env}");
    for var in [
        "RALPH_STORY=1.1",
        "RALPH_ATTEMPT=1",
        "RALPH_BRANCH=ralph/story-1.1",
        "RALPH_WORKTREE=",
        "RALPH_PROJECT_DIR=",
    ] {
        assert!(env.contains(var), "{var} missing: {env}");
    }
}

#[test]
fn init_scaffolds_and_ignores_runtime_files() {
    let p = Project::new();
    let r = p.ralph(&["init"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(p.root.join(".ralph/config.json").exists());
    assert!(p.root.join(".ralph/stories.txt").exists());
    assert!(p.read(".gitignore").contains("/.ralph/state.json"));
    // `validate` wants the agent CLI installed, then the scaffold is valid.
    let r = p.ralph(&["validate"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("'claude' was not found on PATH"), "{r:?}");
    p.agent("done_");
    assert_eq!(p.ralph(&["validate"]).code, 0);
    // A second `init` in the project is refused: it would make nothing new
    // (issue 14; `init_inside_a_project_refuses` has the details).
    let again = p.ralph(&["init"]);
    assert_eq!(again.code, 2, "{again:?}");
}

#[test]
fn a_usage_limit_pauses_and_is_not_a_failure() {
    let p = Project::with_backlog("1.1 | A\n", r#"{ "loop": { "max_retries": 1 } }"#);
    p.commit_all("backlog");
    p.agent(LIMITED_THEN_DONE);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("usage/rate limit"), "{r:?}");
    let s = p.story("1.1");
    assert_eq!(s["attempts"], 0, "a usage limit is not counted: {s}");
    assert_eq!(s["attempts_started"], 2);
    assert_eq!(p.merges_of("1.1"), 1);
}

#[test]
fn a_missing_agent_command_is_a_setup_error() {
    let p = Project::with_backlog(
        "1.1 | A\n",
        r#"{ "claude": { "command": "no-such-agent-xyz" } }"#,
    );
    p.commit_all("backlog");
    let before = p.snapshot();
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("no-such-agent-xyz") && r.stderr.contains("claude.command"),
        "{r:?}"
    );
    assert_eq!(p.snapshot(), before);
}

#[test]
fn a_prd_json_backlog_lands_on_its_branch_and_sets_passes() {
    let p = Project::new();
    p.write(
        "prd.json",
        r#"{
  "branchName": "ralph/feature",
  "userStories": [
    { "id": "US-002", "title": "Second", "description": "Needs the first", "acceptanceCriteria": ["works"], "priority": 2, "passes": false, "dependsOn": ["US-001"] },
    { "id": "US-001", "title": "First", "description": "Start", "acceptanceCriteria": ["works"], "priority": 1, "passes": false },
    { "id": "US-000", "title": "Old", "description": "Done before", "acceptanceCriteria": [], "priority": 0, "passes": true }
  ]
}
"#,
    );
    // The fake agent leaves evidence under $SCRATCH, outside a sandbox's reach.
    p.write(".ralph/config.json", r#"{ "sandbox": { "mode": "off" } }"#);
    p.commit_all("prd");
    p.agent(r#"echo "$ID" >> "$SCRATCH/calls"; grep -q "Needs the first\|Start" "$PROMPT_FILE" || exit 3; commit_file "src/$ID.txt"; done_"#);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        fs::read_to_string(p.scratch.join("calls")).unwrap(),
        "US-001\nUS-002\n"
    );
    let subjects = git(
        &p.root,
        &["log", "--first-parent", "--format=%s", "ralph/feature"],
    );
    assert!(
        subjects.contains("merge: story US-001") && subjects.contains("merge: story US-002"),
        "{subjects}"
    );
    assert_eq!(
        git(&p.root, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "main",
        "the user's checkout stays put"
    );
    let prd = git(&p.root, &["show", "ralph/feature:prd.json"]);
    let v: serde_json::Value = serde_json::from_str(&prd).unwrap();
    for s in v["userStories"].as_array().unwrap() {
        assert_eq!(s["passes"], true, "{s}");
    }
    // Only the two values changed: the user's key order and layout stay
    // (issue 9, finding 9).
    let original = git(&p.root, &["show", "main:prd.json"]);
    assert_eq!(
        prd,
        original.replace("\"passes\": false", "\"passes\": true")
    );
}

/// A prd.json story with `"passes": true` that the state has no record of
/// (a backlog from before ralph, or after `ralph reset --yes`) is done for
/// `ralph run -d` as it is for `ralph stories` and the real run: listed
/// `[done]`, no prompt head, not in the forecast.
#[test]
fn a_dry_run_counts_a_passing_prd_story_as_done() {
    let p = Project::new();
    p.write(
        "prd.json",
        r#"{
  "userStories": [
    { "id": "US-001", "title": "First", "description": "Start", "acceptanceCriteria": ["works"], "priority": 1, "passes": false },
    { "id": "US-002", "title": "Old", "description": "Done before", "acceptanceCriteria": [], "priority": 2, "passes": true },
    { "id": "US-003", "title": "Third", "description": "Later", "acceptanceCriteria": ["works"], "priority": 3, "passes": false }
  ]
}
"#,
    );
    p.write(".ralph/config.json", r#"{ "sandbox": { "mode": "off" } }"#);
    p.commit_all("prd");
    p.agent(r#"echo "$ID" >> "$SCRATCH/calls"; commit_file "src/$ID.txt"; done_"#);

    let stories = p.ralph(&["stories"]);
    assert!(stories.stdout.contains("[done] US-002"), "{stories:?}");
    let d = p.ralph(&["run", "-d"]);
    assert_eq!(d.code, 0, "{d:?}");
    assert!(d.stdout.contains("[done] US-002 Old"), "{d:?}");
    assert!(!d.stdout.contains("[    ] US-002"), "{d:?}");
    assert!(d.stdout.contains("[    ] US-001 First"), "{d:?}");
    assert!(d.stdout.contains("[    ] US-003 Third"), "{d:?}");
    assert_eq!(d.stdout.matches("prompt head:").count(), 2, "{d:?}");

    // With history to forecast from: US-001 landed (its `passes` is true
    // on main now), then the state is forgotten, so only prd.json says
    // which stories are done.
    assert_eq!(p.ralph(&["run", "-s", "US-001"]).code, 0);
    assert_eq!(p.ralph(&["reset", "--yes"]).code, 0);
    let d = p.ralph(&["run", "-d"]);
    assert_eq!(d.code, 0, "{d:?}");
    assert!(d.stdout.contains("[done] US-001 First"), "{d:?}");
    assert_eq!(d.stdout.matches("prompt head:").count(), 1, "{d:?}");
    assert!(d.stdout.contains("Forecast for 1 story at"), "{d:?}");

    // What the dry run showed is what the run does.
    assert_eq!(p.ralph(&["run"]).code, 0);
    assert_eq!(p.scratch_text("calls"), "US-001\nUS-003\n");
}

#[test]
fn verbose_streams_the_agents_text() {
    let p = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"printf '{"type":"assistant","message":{"content":[{"type":"text","text":"thinking about the schema\\nsecond line of thought"}]}}\n'
tool_result "SECRET TOOL OUTPUT"; commit_file "src/a.txt"; done_"#,
    );
    let r = p.ralph(&["run", "-v"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("[1.1] thinking about the schema"),
        "{r:?}"
    );
    assert!(r.stderr.contains("second line of thought"), "{r:?}");
    assert!(!r.all().contains("SECRET TOOL OUTPUT"));
    let quiet = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
    quiet.commit_all("backlog");
    quiet.agent(r#"say "thinking about the schema"; commit_file "src/a.txt"; done_"#);
    let r = quiet.ralph(&["run"]);
    assert!(!r.all().contains("thinking about the schema"), "{r:?}");
}

#[test]
fn read_only_output_into_a_closed_pipe_ends_quietly() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    let mut queue = String::new();
    for i in 1..=3000 {
        queue.push_str(&format!(
            "1.{i} | A story title long enough to fill the pipe quickly\n"
        ));
    }
    let p = Project::with_backlog(&queue, "{}");
    let mut child = p
        .command(&["stories"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("1.1 |"), "{first}");
    // The reader is gone; ralph must not panic on the broken pipe.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

/// Regression: hook failures went to `ralph.log` even with `-l FILE`.
#[test]
fn the_technical_log_goes_where_l_says() {
    let config = r#"{ "hooks": { "pre_story": "echo nope; exit 7" } }"#;
    let p = Project::with_backlog("1.1 | A\n", config);
    p.commit_all("backlog");
    p.agent(r#"commit_file "src/$ID.txt"; done_"#);
    let r = p.ralph(&["run", "-l", "logs/tech.log"]);
    assert_eq!(
        r.code, 0,
        "a failing pre_story hook is logged and ignored: {r:?}"
    );
    let log = p.read("logs/tech.log");
    assert!(log.contains("hook pre_story exited 7: nope"), "{log}");
    assert!(log.contains("landed story 1.1"), "{log}");
    assert!(!p.root.join("ralph.log").exists());
}

#[test]
fn reset_forgets_one_story_and_with_confirmation_all_state() {
    let p = Project::with_backlog(
        "# [batch:1]\n1.1 | A\n1.2 | B\n",
        r#"{ "loop": { "max_retries": 1 } }"#,
    );
    p.commit_all("backlog");
    p.agent(
        r#"
echo "$ID" >> "$SCRATCH/calls"
if [ "$ID" = 1.1 ] && [ ! -e "$SCRATCH/fixed" ]; then result "cannot" true; exit 1; fi
commit_file "src/$ID.txt"; done_
"#,
    );
    assert_eq!(p.ralph(&["run"]).code, 1);
    assert_eq!(p.story("1.1")["status"], "failed");
    assert_eq!(p.completed(), vec!["1.2"]);

    let r = p.ralph(&["reset", "1.1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(p.story("1.1").is_null(), "{}", p.story("1.1"));
    assert_eq!(p.completed(), vec!["1.2"], "other stories are kept");
    let r = p.ralph(&["reset", "9.9"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("9.9"), "{r:?}");

    fs::write(p.scratch.join("fixed"), "").unwrap();
    assert_eq!(p.ralph(&["run"]).code, 0);
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);

    // Without a terminal to ask, forgetting everything needs --yes.
    let r = p.ralph(&["reset"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--yes"), "{r:?}");
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    assert_eq!(p.ralph(&["reset", "--yes"]).code, 0);
    assert!(p.completed().is_empty());

    // The merges are still on main: the next run knows, and runs no agent.
    let calls = fs::read_to_string(p.scratch.join("calls")).unwrap();
    assert_eq!(p.ralph(&["run"]).code, 0);
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    assert_eq!(fs::read_to_string(p.scratch.join("calls")).unwrap(), calls);
    assert_eq!(p.merges_of("1.1"), 1);
}

/// ralph's own failures have their own exit code (4), distinct from "stories
/// failed" (1): here the state file becomes unwritable mid-run (a directory
/// takes its place), the run stops at once with exit 4 and says why, and once
/// the cause is gone the next run finishes without losing the agent's work.
#[test]
fn a_state_that_cannot_be_saved_ends_the_run_with_exit_4() {
    let p = Project::with_backlog("1.1 | First\n1.2 | Second\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"
echo "$ID" >> "$SCRATCH/calls"
if [ "$ID" = "1.1" ] && [ ! -e "$RALPH_PROJECT_DIR/.ralph/sabotaged" ]; then
  touch "$RALPH_PROJECT_DIR/.ralph/sabotaged"
  rm -f "$RALPH_PROJECT_DIR/.ralph/state.json"
  mkdir -p "$RALPH_PROJECT_DIR/.ralph/state.json/blocker"
fi
commit_file "src/$ID.txt"
done_
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 4, "{r:?}");
    assert!(r.stderr.contains("cannot save"), "{r:?}");
    assert!(
        !r.all().contains("[run ] 1.2"),
        "nothing starts once the state cannot be saved: {r:?}"
    );
    assert_eq!(
        p.scratch_text("calls"),
        "1.1\n",
        "no agent runs once the state cannot be saved: {r:?}"
    );
    fs::remove_dir_all(p.root.join(".ralph/state.json")).unwrap();
    let again = p.ralph(&["run"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert_eq!(p.merges_of("1.2"), 1);
}

/// `ralph reset ID` forgets a story's attempts, but not its kept work: the
/// next attempts are numbered after the highest kept ref and log, so no
/// earlier attempt's ref (or log) is overwritten (issue 9, finding 6).
#[test]
fn attempts_after_a_reset_never_overwrite_kept_refs() {
    let p = Project::with_backlog("1.1 | A\n", r#"{ "loop": { "max_retries": 1 } }"#);
    p.commit_all("backlog");
    p.agent(
        r#"
echo x >> "$SCRATCH/calls"
commit_file "src/try-$(wc -l < "$SCRATCH/calls").txt"
result "cannot" true; exit 1
"#,
    );
    assert_eq!(p.ralph(&["run"]).code, 1);
    let first = git(&p.root, &["rev-parse", "refs/ralph/attempts/1.1/1"]);
    let first_log = p.read(".ralph/logs/1.1/attempt-1.log");
    assert_eq!(p.ralph(&["reset", "1.1"]).code, 0);
    assert_eq!(p.ralph(&["run"]).code, 1);
    assert_eq!(
        git(&p.root, &["rev-parse", "refs/ralph/attempts/1.1/1"]),
        first,
        "the first attempt's ref was moved"
    );
    assert_eq!(p.read(".ralph/logs/1.1/attempt-1.log"), first_log);
    let second = git(&p.root, &["rev-parse", "refs/ralph/attempts/1.1/2"]);
    assert_ne!(second, first);
    assert!(git(&p.root, &["show", "--stat", second.trim()]).contains("try-2.txt"));
}

/// `post_story` hears the story's final outcome: finished work that fails
/// validation on the merged tree is `fail`, not `done` (issue 9, finding 8),
/// and every iteration still ends with `post_iteration`.
#[test]
fn post_story_reports_the_landing_outcome() {
    let config = r#"{ "loop": { "max_retries": 2 },
      "validation": { "commands": [ { "name": "gate", "cmd": "test -f \"$RALPH_PROJECT_DIR/open\"", "required": true } ] },
      "hooks": {
        "pre_iteration": "echo \"iteration $RALPH_ITERATION\" >> hooks.log",
        "post_iteration": "echo \"end $RALPH_ITERATION\" >> hooks.log",
        "post_story": "echo \"post $RALPH_STORY $RALPH_RESULT\" >> hooks.log"
    } }"#;
    let p = Project::with_backlog("1.1 | A\n", config);
    p.commit_all("backlog");
    // The gate opens after the first landing's validation failed.
    p.agent(r#"if [ "$N" = 2 ]; then touch "$RALPH_PROJECT_DIR/open"; fi; commit_file "src/$ID-$N.txt"; done_"#);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let log = p.read("hooks.log");
    assert_eq!(
        log, "iteration 1\npost 1.1 fail\nend 1\niteration 2\npost 1.1 done\nend 2\n",
        "{r:?}"
    );
}

/// Commands find the project from a subdirectory, as git does (issue 9,
/// finding 9).
#[test]
fn commands_work_from_a_subdirectory() {
    let p = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
    p.write("src/deep/keep.txt", "x\n");
    p.commit_all("backlog");
    p.agent(r#"commit_file "src/$ID.txt"; done_"#);
    let out = p
        .command(&["run"])
        .current_dir(p.root.join("src/deep"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert!(!p.root.join("src/deep/.ralph").exists());
    let out = p
        .command(&["status", "--json"])
        .current_dir(p.root.join("src"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["done"], serde_json::json!(["1.1"]));
}

/// The watchdog: an agent that goes silent is stopped as hung after
/// `loop.idle_timeout_seconds`, well before its wall-clock timeout (issue 10).
#[test]
fn a_silent_agent_is_stopped_by_the_idle_watchdog() {
    let config = r#"{ "loop": { "max_retries": 1, "grace_seconds": 1, "idle_timeout_seconds": 1, "timeout_seconds": 3600 } }"#;
    let p = Project::with_backlog("1.1 | A\n", config);
    p.commit_all("backlog");
    p.agent(r#"say "thinking"; exec sleep 3600"#);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    let err = p.story("1.1")["last_error"].as_str().unwrap().to_string();
    assert!(err.contains("No output for 1s"), "{err}");
}

/// `agent.name: custom` runs any command: the prompt on stdin, plain text
/// out, only the signal tags read (issue 10).
#[test]
fn a_custom_agent_speaks_plain_text() {
    let config = r#"{ "loop": { "max_retries": 1 }, "agent": { "name": "custom", "command": "claude", "flags": ["--my-flag"] } }"#;
    let p = Project::with_backlog("1.1 | A\n", config);
    p.commit_all("backlog");
    p.agent(
        r#"
echo "$*" > "$SCRATCH/args"
commit_file "src/$ID.txt"
echo "all done here"
echo "<ralph>DONE $ID</ralph>"
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert_eq!(
        fs::read_to_string(p.scratch.join("args")).unwrap(),
        "--my-flag\n"
    );
    assert_eq!(p.story("1.1")["history"][0]["agent"], "custom");
    // An unknown agent name is refused before anything runs.
    let r = p.ralph(&["run", "--agent", "nope"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("codex"), "{r:?}");
}

/// `--max-cost`: once the run has spent its budget nothing new starts, the
/// work already done lands, and the run ends with exit 1 naming the budget
/// (issue 10). Each fake attempt reports $0.01.
#[test]
fn a_run_stops_starting_work_when_its_budget_is_spent() {
    let p = Project::with_backlog(THREE, FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(r#"echo "$ID" >> "$SCRATCH/calls"; commit_file "src/$ID.txt"; done_"#);
    let r = p.ralph(&["run", "--max-cost", "0.015"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("budget"), "{r:?}");
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    assert_eq!(
        fs::read_to_string(p.scratch.join("calls")).unwrap(),
        "1.1\n1.2\n"
    );
    // A new run has a new budget.
    let r = p.ralph(&["run", "--max-cost", "0.015"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), vec!["1.1", "1.2", "1.3"]);
}

/// A rejected key: Claude Code would retry it for minutes; ralph stops the
/// attempt at the first 401 retry event, stops the run with one message,
/// and counts nothing against the stories, so after the key is fixed
/// `ralph run` just works (issue 10: ≤ 3 attempts, 0 stories failed).
#[test]
fn a_rejected_key_stops_the_run_at_once_and_fails_no_story() {
    let p = Project::with_backlog("# [batch:1]\n1.1 | A\n1.2 | B\n1.3 | C\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"
echo "$ID" >> "$SCRATCH/calls"
if [ ! -e "$SCRATCH/key-fixed" ]; then
  printf '{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":401,"error":"authentication_failed"}\n'
  exec sleep 3600
fi
commit_file "src/$ID.txt"; done_
"#,
    );
    let r = p.ralph(&["run", "-j", "2"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("credentials were rejected"), "{r:?}");
    let calls = fs::read_to_string(p.scratch.join("calls")).unwrap();
    assert!(calls.lines().count() <= 3, "{calls}");
    for id in ["1.1", "1.2", "1.3"] {
        let s = p.story(id);
        assert_ne!(s["status"], "failed", "{id}: {s}");
        assert_eq!(s["attempts"].as_u64().unwrap_or(0), 0, "{id}: {s}");
    }
    fs::write(p.scratch.join("key-fixed"), "").unwrap();
    let r = p.ralph(&["run", "-j", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed().len(), 3);
}

/// Every backend through the real binary: a fake CLI of that name speaking
/// its format (as recorded from the real CLIs) lands the story, and the
/// tokens and cost it reported are recorded with the agent's name (issue 10).
#[test]
fn each_backend_is_driven_in_its_own_format() {
    let cases: [(&str, &str, &str, [u64; 3], f64); 4] = [
        (
            "codex",
            "codex",
            r#"printf '%s\n' '{"type":"thread.started","thread_id":"t-1"}' '{"type":"turn.started"}'
printf '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"done <ralph>DONE %s</ralph>"}}\n' "$ID"
printf '%s\n' '{"type":"turn.completed","usage":{"input_tokens":2000,"cached_input_tokens":1500,"cache_write_input_tokens":0,"output_tokens":60}}'"#,
            [500, 60, 1500],
            0.0,
        ),
        (
            "opencode",
            "opencode",
            r#"printf '{"type":"text","timestamp":1795351979485,"sessionID":"ses_1","part":{"type":"text","text":"done <ralph>DONE %s</ralph>"}}\n' "$ID"
printf '%s\n' '{"type":"step_finish","timestamp":1795351979518,"sessionID":"ses_1","part":{"reason":"stop","type":"step-finish","tokens":{"input":1200,"output":42,"reasoning":0,"cache":{"write":300,"read":5000}},"cost":0.006855}}'"#,
            [1200, 42, 5000],
            0.006855,
        ),
        (
            "gemini",
            "gemini",
            r#"printf '%s\n' '{"type":"init","timestamp":"2026-11-22T12:48:07.741Z","session_id":"g-1","model":"gemini"}'
printf '{"type":"message","timestamp":"2026-11-22T12:48:07.788Z","role":"assistant","content":"done <ralph>DONE %s</ralph>","delta":true}\n' "$ID"
printf '%s\n' '{"type":"result","timestamp":"2026-11-22T12:48:07.822Z","status":"success","stats":{"total_tokens":930,"input_tokens":900,"output_tokens":30,"cached":100,"input":800}}'"#,
            [800, 30, 100],
            0.0,
        ),
        ("amp", "amp", r#"say "working"; done_"#, [100, 20, 7], 0.01),
    ];
    for (backend, command, speak, [input, output, cache_read], cost) in cases {
        let p = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
        p.commit_all("backlog");
        p.agent_named(command, &format!("commit_file \"src/$ID.txt\"\n{speak}"));
        let r = p.ralph(&["run", "--agent", backend]);
        assert_eq!(r.code, 0, "{backend}: {r:?}");
        assert_eq!(p.merges_of("1.1"), 1, "{backend}");
        let s = p.story("1.1");
        assert_eq!(s["history"][0]["agent"], backend, "{backend}: {s}");
        let u = &s["usage"];
        assert_eq!(
            [
                &u["input_tokens"],
                &u["output_tokens"],
                &u["cache_read_input_tokens"]
            ],
            [input, output, cache_read]
                .map(serde_json::Value::from)
                .each_ref(),
            "{backend}: {s}"
        );
        assert!(
            (s["cost_usd"].as_f64().unwrap() - cost).abs() < 1e-9,
            "{backend}: {s}"
        );
    }
}

/// The circuit breaker: an agent that dies at start with the same error for
/// every story stops the run after 3 attempts, and no story is charged, so
/// `ralph run` just works once the cause is fixed (issue 10).
#[test]
fn the_same_failure_across_stories_trips_the_breaker() {
    let p = Project::with_backlog(
        "# [batch:1]\n1.1 | A\n1.2 | B\n1.3 | C\n1.4 | D\n",
        FAST_CONFIG,
    );
    p.commit_all("backlog");
    p.agent(
        r#"
echo "$ID" >> "$SCRATCH/calls"
if [ ! -e "$SCRATCH/fixed" ]; then result "API Error: unknown model 'claude-nope'" true; exit 1; fi
commit_file "src/$ID.txt"; done_
"#,
    );
    let r = p.ralph(&["run", "-j", "2"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("the same failure ended 3 attempts"),
        "{r:?}"
    );
    let calls = fs::read_to_string(p.scratch.join("calls")).unwrap();
    assert!(calls.lines().count() <= 4, "{calls}");
    for id in ["1.1", "1.2", "1.3", "1.4"] {
        assert_ne!(p.story(id)["status"], "failed", "{id}");
        assert_eq!(p.story(id)["attempts"].as_u64().unwrap_or(0), 0, "{id}");
    }
    fs::write(p.scratch.join("fixed"), "").unwrap();
    assert_eq!(p.ralph(&["run", "-j", "2"]).code, 0);
    assert_eq!(p.completed().len(), 4);
}

/// `agent.fallback`: while Claude Code is at its usage limit, new attempts
/// go to the next agent instead of waiting, and the limit is not an attempt
/// (issue 10).
#[test]
fn a_limited_agent_falls_back_to_the_next_one() {
    let config = r#"{ "loop": { "max_retries": 1 }, "agent": { "fallback": ["codex"] } }"#;
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n", config);
    p.commit_all("backlog");
    p.agent(&format!(
        "echo \"claude $ID\" >> \"$SCRATCH/calls\"\n{LIMITED_FOR_AN_HOUR}"
    ));
    p.agent_named("codex", CODEX_DONE);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        fs::read_to_string(p.scratch.join("calls")).unwrap(),
        "claude 1.1\ncodex 1.1\ncodex 1.2\n"
    );
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    let h = &p.story("1.1")["history"];
    assert_eq!(
        (h[0]["agent"].as_str(), h[1]["agent"].as_str()),
        (Some("claude"), Some("codex"))
    );
    assert_eq!(p.story("1.1")["attempts"], 0);
}

/// A misspelled config key is named, with its line and the key it most
/// likely meant, and changes nothing (issues 12 and 14).
#[test]
fn a_misspelled_config_key_is_named_with_a_guess() {
    let p = Project::with_backlog("1.1 | A\n", "{\n  \"paralell\": { \"enabled\": true }\n}\n");
    p.agent("done_");
    p.commit_all("backlog");
    let before = p.snapshot();
    let r = p.ralph(&["validate"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.snapshot(), before, "validate changed the project");
    assert!(
        r.stderr.contains(
            ".ralph/config.json:2: unknown key \"paralell.enabled\" is ignored; did you mean \"parallel.enabled\"?"
        ),
        "{r:?}"
    );
    let v = p.ralph(&["version"]);
    assert_eq!(v.code, 0, "{v:?}");
    assert!(v.stdout.starts_with("ralph "), "{v:?}");
}
