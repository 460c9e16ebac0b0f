//! Models per attempt (issue 25): the escalation ladder as the agent sees
//! it (the fake agent records the `--model` it was given), a story's own
//! `model:`/`effort:`, fix-ups and usage limits on the ladder, the prompt's
//! shared prefix, and a budget that holds at `-j 4`.

use crate::harness::*;

const LADDER: &str = r#"{ "loop": { "max_retries": 3, "grace_seconds": 1 },
  "agent": { "escalation": ["haiku", "sonnet", "opus"] } }"#;

/// Records the model flag it got, one line per attempt, per story.
const RECORD_MODEL: &str = r#"
M=""; prev=""
for a in "$@"; do [ "$prev" = "--model" ] && M="$a"; prev="$a"; done
echo "${M:-none}" >> "$SCRATCH/models-$ID"
"#;

fn agent(p: &Project, rest: &str) {
    p.agent(&format!("{RECORD_MODEL}\n{rest}"));
}

fn lines(p: &Project, name: &str) -> Vec<String> {
    p.scratch_text(name).lines().map(str::to_string).collect()
}

fn spec(p: &Project, id: &str, extra: &str) {
    p.write(
        &format!("specs/epic-1/story-{id}-spec.md"),
        &format!("---\nid: \"{id}\"\nstatus: pending\n{extra}---\n\n# Story {id}\n\nDo it.\n"),
    );
}

#[test]
fn a_story_failing_twice_runs_its_three_attempts_on_three_rungs() {
    let p = Project::with_backlog("1.1 | Hard\n", LADDER);
    p.commit_all("backlog");
    agent(
        &p,
        r#"
if [ "$N" -lt 3 ]; then result "too hard <ralph>FAIL $ID: too hard</ralph>"; exit 0; fi
commit_file "src/$ID.txt"; done_
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(lines(&p, "models-1.1"), ["haiku", "sonnet", "opus"]);
    // The attempt record, status --json and stats say which model ran.
    let models: Vec<String> = p.story("1.1")["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["model"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(models, ["haiku", "sonnet", "opus"]);
    let status = p.ralph(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(
        v["stories"][0]["models"],
        serde_json::json!(["haiku", "sonnet", "opus"])
    );
    assert_eq!(v["latest_run"]["by_model"]["opus"]["landed"], 1, "{v}");
    let stats = p.ralph(&["stats"]);
    assert!(stats.stdout.contains("by model: "), "{stats:?}");
    assert!(
        stats
            .stdout
            .contains("opus $0.01 in 1 run, 1 landed ($0.01 each)"),
        "{stats:?}"
    );
}

#[test]
fn a_storys_model_or_effort_chooses_its_first_rung() {
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n1.3 | C\n", LADDER);
    spec(&p, "1.1", "model: sonnet\n");
    spec(&p, "1.2", "effort: high\n");
    p.commit_all("backlog");
    agent(&p, r#"commit_file "src/$ID.txt"; done_"#);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(lines(&p, "models-1.1"), ["sonnet"]);
    assert_eq!(lines(&p, "models-1.2"), ["opus"]);
    assert_eq!(lines(&p, "models-1.3"), ["haiku"]);
}

#[test]
fn a_fixup_continues_on_the_model_whose_work_it_fixes() {
    let config = r#"{ "loop": { "max_retries": 3, "grace_seconds": 1 },
      "agent": { "escalation": ["haiku", "sonnet", "opus"] },
      "validation": { "commands": [
        { "name": "has-ok", "cmd": "test -f ok.txt", "required": true } ] } }"#;
    let p = Project::with_backlog("1.1 | Gate\n", config);
    p.commit_all("backlog");
    agent(
        &p,
        r#"
if [ "$N" = 1 ]; then commit_file "src/a.txt"
else echo ok > ok.txt; git add ok.txt; git commit -qm "fix(story-1.1): ok.txt"; fi
done_
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.kinds("1.1"), vec!["first", "fixup"]);
    // The failed validation counted, yet the fix-up is haiku's, not sonnet's.
    assert_eq!(p.story("1.1")["attempts"], 1);
    assert_eq!(lines(&p, "models-1.1"), ["haiku", "haiku"]);
}

#[test]
fn a_usage_limit_does_not_move_a_story_up_the_ladder() {
    let p = Project::with_backlog("1.1 | A\n", LADDER);
    p.commit_all("backlog");
    agent(&p, LIMITED_THEN_DONE);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(lines(&p, "models-1.1"), ["haiku", "haiku"]);
}

/// What a person watching sees (issue 25): the line that starts each attempt
/// and `ralph status` while it runs name the model ralph chose for it.
#[test]
fn the_run_and_status_name_the_model_each_running_attempt_runs_on() {
    let p = Project::with_backlog("1.1 | Hard\n", LADDER);
    p.commit_all("backlog");
    agent(
        &p,
        r#"
if [ "$N" -lt 2 ]; then result "too hard <ralph>FAIL $ID: too hard</ralph>"; exit 0; fi
touch "$SCRATCH/running-$N"
while [ ! -e "$SCRATCH/go" ]; do sleep 0.05; done
commit_file "src/$ID.txt"; done_
"#,
    );
    let mut run = crate::crash::spawn(&p, &["run"]);
    wait_until(
        "the second attempt",
        std::time::Duration::from_secs(60),
        || p.scratch.join("running-2").exists(),
    );
    let status = p.ralph(&["status"]);
    assert!(
        status.stdout.contains("Running: 1.1 (sonnet)\n"),
        "{status:?}"
    );
    std::fs::write(p.scratch.join("go"), "").unwrap();
    let end = crate::crash::wait_exit(&mut run, "the run ends");
    let said = p.scratch_text("ralph.stderr");
    assert_eq!(end.code(), Some(0), "{said}");
    assert!(
        said.contains("[run ] 1.1 Hard (attempt 1/3) on haiku\n"),
        "{said}"
    );
    assert!(
        said.contains("[run ] 1.1 Hard (attempt 2/3) on sonnet\n"),
        "{said}"
    );
    assert_eq!(lines(&p, "models-1.1"), ["haiku", "sonnet"]);
    // Nothing runs now: nothing to name.
    let status = p.ralph(&["status"]);
    assert!(!status.stdout.contains("Running:"), "{status:?}");
}

#[test]
fn two_stories_prompts_share_the_static_prefix_byte_for_byte() {
    let config = r#"{ "loop": { "grace_seconds": 1 },
      "validation": { "commands": [ { "name": "t", "cmd": "true" } ],
                      "blocked_commands": ["rm -rf /"] } }"#;
    let p = Project::with_backlog("1.1 | First\n1.2 | Second\n", config);
    p.commit_all("backlog");
    p.agent(r#"cp "$PROMPT_FILE" "$SCRATCH/prompt-$ID"; commit_file "src/$ID.txt"; done_"#);
    let r = p.ralph(&["run", "-j", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    let (a, b) = (p.scratch_text("prompt-1.1"), p.scratch_text("prompt-1.2"));
    let at = a
        .find("## Your story\n")
        .expect("the story's part is marked");
    let shared = at + "## Your story\n".len();
    assert!(b.len() > shared && a.as_bytes()[..shared] == b.as_bytes()[..shared]);
    // What is shared holds the run's rules and no story's own words.
    let prefix = &a[..shared];
    assert!(prefix.contains("Run 'true' for t") && prefix.contains("NEVER run 'rm -rf /'"));
    assert!(
        !prefix.contains("1.1") && !prefix.contains("First"),
        "{prefix}"
    );
    assert!(a[shared..].contains("implement Story 1.1: First"));
    assert!(b[shared..].contains("implement Story 1.2: Second"));
}

#[test]
fn max_cost_at_four_jobs_overshoots_at_most_one_attempt() {
    // One batch: the stories may run side by side (unbatched, a chain).
    let mut queue = String::from("# [batch:1]\n");
    for i in 1..=12 {
        queue.push_str(&format!("1.{i} | S{i}\n"));
    }
    let config = r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 },
      "parallel": { "stagger_seconds": 0, "agent_memory_mb": 0 } }"#;
    let p = Project::with_backlog(&queue, config);
    p.commit_all("backlog");
    // Every attempt costs $1, as Claude Code reports cost. The first four
    // run together (each waits for the others to start), so four run at
    // once when the first costs are known.
    p.agent(
        r#"
touch "$SCRATCH/started-$ID"
case "$ID" in 1.[1-4])
  while [ "$(ls "$SCRATCH" | grep -c '^started-1\.[1-4]$')" -lt 4 ]; do sleep 0.05; done ;;
esac
commit_file "src/$ID.txt"
printf '{"type":"result","subtype":"success","is_error":false,"result":"<ralph>DONE %s</ralph>","total_cost_usd":1.0,"usage":{"input_tokens":100,"output_tokens":20}}\n' "$ID"
"#,
    );
    let r = p.ralph(&["run", "-j", "4", "--max-cost", "6"]);
    assert_eq!(r.code, 1, "the budget stops the run: {r:?}");
    let status = p.ralph(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    let spent = v["cost_usd"].as_f64().unwrap();
    // Without the look ahead, four run at $5 spent: $9.
    assert!(spent <= 6.0 + 1.0, "spent ${spent}: {r:?}");
    assert!(spent >= 6.0, "spent ${spent}");
}

#[test]
fn a_backend_without_a_model_flag_refuses_the_model_keys() {
    let p = Project::with_backlog(
        "1.1 | A\n",
        r#"{ "agent": { "name": "amp", "model": "x", "escalation": ["y"] } }"#,
    );
    p.commit_all("backlog");
    let r = p.ralph(&["validate"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.all().contains("agent.model") && r.all().contains("agent.escalation"),
        "{r:?}"
    );
    let q = Project::with_backlog("1.1 | A\n", r#"{ "agent": { "name": "custom" } }"#);
    spec(&q, "1.1", "model: big\n");
    q.commit_all("backlog");
    let r = q.ralph(&["validate"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.all().contains("story 1.1: model \"big\""), "{r:?}");
}
