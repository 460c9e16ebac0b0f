//! Best of N (issue 36): candidates racing for one attempt at a story,
//! each a real agent process in its own worktree, told apart by the model
//! ralph gives it (`attempts.candidates`): the first whose work passes
//! validation on the target's tip lands, the others are stopped (their
//! whole process tree) and their work kept; no candidate passing is one
//! failed attempt.

use crate::harness::*;

/// Validation on the merged tree: `ok.txt` must be there. A tree without
/// it leaves a mark, so an agent can wait for that failure.
const CONFIG: &str = r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 },
  "attempts": { "best_of": 3,
    "candidates": ["claude:failfast", "claude:slow", "claude:fast"] },
  "validation": { "commands": [ { "name": "has-ok", "required": true,
    "cmd": "if [ -f ok.txt ]; then exit 0; fi; touch \"$SCRATCH/validation-failed\"; exit 1" } ] } }"#;

/// Installs `body` as the fake agent, `$M` its model.
fn agent_by_model(p: &Project, body: &str) {
    p.agent(&format!("{MODEL_AS_M}{body}"));
}

/// What every candidate does first: it says which it is, then behaves by
/// the model it was given.
const BY_MODEL: &str = r#"
echo "$M $RALPH_CANDIDATE $RALPH_ATTEMPT" >> "$SCRATCH/candidates"
cp "$PROMPT_FILE" "$SCRATCH/prompt-$M-$N"
case "$M" in
failfast)
  # Done at once, with work that fails validation.
  commit_file "src/failfast.txt"; done_ ;;
slow)
  # Commits, then waits for a file no one makes: only a stop ends it. Its
  # child and its token show whether its whole tree was stopped.
  commit_file "src/slow.txt"
  echo "$RALPH_ATTEMPT_TOKEN" > "$SCRATCH/slow.token"
  sleep 1000 & echo $! > "$SCRATCH/slow.pids"; echo $$ >> "$SCRATCH/slow.pids"
  while [ ! -f "$SCRATCH/never" ]; do sleep 0.05; done
  done_ ;;
fast)
  # Passes, once the fast failure was judged and the test saw the race.
  while [ ! -f "$SCRATCH/validation-failed" ] || [ ! -f "$SCRATCH/go-fast" ]; do sleep 0.05; done
  echo ok > ok.txt; commit_file "src/fast.txt"; git add ok.txt; git commit -qm "feat(story-$ID): ok"
  done_ ;;
esac
"#;

/// Story 1.1 alone, committed, with these `attempts` settings.
fn one_story(attempts: &str) -> Project {
    let config = format!(
        r#"{{ "loop": {{ "max_retries": 2, "grace_seconds": 1 }}, "attempts": {attempts} }}"#
    );
    let p = Project::with_backlog("1.1 | A\n", &config);
    p.commit_all("backlog");
    p
}

/// Processes whose environment holds `token` (what `process` stops by).
fn holding(token: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        let needle = format!("RALPH_ATTEMPT_TOKEN={token}");
        if env.split(|b| *b == 0).any(|v| v == needle.as_bytes())
            && alive(e.file_name().to_string_lossy().parse().unwrap_or(-1))
        {
            found.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    found
}

#[test]
fn first_lands_the_fast_passing_candidate_and_stops_the_slow_one() {
    let p = Project::with_backlog("1.1 | Hard\n", CONFIG);
    p.commit_all("backlog");
    agent_by_model(&p, BY_MODEL);
    let mut child = p
        .command(&["run", "-j", "3"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // While they race, `status --json` shows the story's candidates.
    let mut seen = serde_json::Value::Null;
    wait_until(
        "the race in status --json",
        std::time::Duration::from_secs(60),
        || {
            let s = p.ralph(&["status", "--json"]);
            let v: serde_json::Value = serde_json::from_str(&s.stdout).unwrap_or_default();
            seen = v["stories"][0]["candidates"].clone();
            seen.as_array().is_some_and(|c| {
                c.len() == 3 && c[0]["state"] == "failed" && c[1]["state"] == "running"
            })
        },
    );
    assert_eq!(seen[1]["agent"], "claude");
    assert_eq!(seen[1]["model"], "slow");
    assert_eq!(seen[1]["k"], 2);
    std::fs::write(p.scratch.join("go-fast"), "").unwrap();
    let status = wait_for_exit(&mut child, "the run", std::time::Duration::from_secs(120));
    assert!(status.success(), "{status:?}\n{}", p.read("ralph.log"));

    // The fast passing candidate's work landed.
    assert_eq!(p.completed(), ["1.1"]);
    assert_eq!(p.file_on_main("ok.txt").as_deref(), Some("ok\n"));
    assert_eq!(p.file_on_main("src/slow.txt"), None);
    // Every candidate of attempt 1 knew which it was.
    let mut who: Vec<String> = p
        .scratch_text("candidates")
        .lines()
        .map(String::from)
        .collect();
    who.sort();
    assert_eq!(who, ["failfast 1 1", "fast 3 1", "slow 2 1"]);
    // The slow one was stopped, its whole tree gone.
    let token = p.scratch_text("slow.token").trim().to_string();
    assert!(!token.is_empty());
    assert_eq!(holding(&token), Vec::<String>::new(), "left running");
    for pid in pids_in(&p.scratch.join("slow.pids")) {
        assert!(!alive(pid), "slow candidate's process {pid} is alive");
    }
    // No retry charged: one attempt, not a failed one.
    let story = p.story("1.1");
    assert_eq!(story["attempts"], 0, "{story}");
    assert_eq!(story["history"].as_array().unwrap().len(), 1, "{story}");
    // Every candidate that committed and did not win is kept.
    assert_eq!(
        p.refs("refs/ralph/candidates/"),
        [
            "refs/ralph/candidates/1.1/1/1",
            "refs/ralph/candidates/1.1/1/2"
        ]
    );
    let kept = git(
        &p.root,
        &["show", "refs/ralph/candidates/1.1/1/2:src/slow.txt"],
    );
    assert_eq!(kept, "1.1\n");
    assert_eq!(
        candidate_ends(&p),
        [
            (1, "failed".to_string(), false),
            (2, "stopped".to_string(), false),
            (3, "won".to_string(), true)
        ]
    );
    // The stopped one's CLI reported no cost: unknown, never $0.
    let slow_end = run_records(&p)
        .into_iter()
        .find(|r| r["ev"] == "candidate_end" && r["candidate"] == 2)
        .unwrap();
    assert_eq!(slow_end["cost_unknown"], true, "{slow_end}");
    // Each candidate's log is the story's, named by its candidate.
    for k in 1..=3 {
        let log = p.root.join(format!(".ralph/logs/1.1/attempt-1-c{k}.log"));
        assert!(log.is_file(), "{}", log.display());
    }
    let starts = run_records(&p)
        .iter()
        .filter(|r| r["ev"] == "candidate_start")
        .count();
    assert_eq!(starts, 3);
}

#[test]
fn no_candidate_passing_counts_one_failed_attempt_and_the_retry_is_told_why() {
    let config = r#"{ "loop": { "max_retries": 3, "grace_seconds": 1 },
      "attempts": { "best_of": 2, "candidates": ["claude:a", "claude:b"] },
      "hooks": { "pre_iteration": "echo \"pre $RALPH_CANDIDATE\" >> \"$SCRATCH/hooks\"",
        "post_story": "echo \"post $RALPH_CANDIDATE\" >> \"$SCRATCH/hooks\"" },
      "validation": { "commands": [ { "name": "has-ok", "required": true,
        "cmd": "test -f ok.txt" } ] } }"#;
    let p = Project::with_backlog("1.1 | Hard\n", config);
    p.commit_all("backlog");
    agent_by_model(
        &p,
        r#"
cp "$PROMPT_FILE" "$SCRATCH/prompt-$M-$N"
if [ "$N" = 1 ]; then
  if [ "$M" = a ]; then result "stuck <ralph>FAIL $ID: cannot find the parser</ralph>"; exit 0; fi
  commit_file "src/b.txt"; done_; exit 0
fi
echo ok > ok.txt; git add ok.txt; git commit -qm "feat(story-$ID): ok"; done_
"#,
    );
    let r = p.ralph(&["run", "-j", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), ["1.1"]);
    let story = p.story("1.1");
    assert_eq!(story["attempts"], 1, "exactly one failed attempt: {story}");
    assert_eq!(story["history"].as_array().unwrap().len(), 2, "{story}");
    // The second attempt's candidates were told both failures.
    for m in ["a", "b"] {
        let prompt = p.scratch_text(&format!("prompt-{m}-2"));
        assert!(prompt.contains("cannot find the parser"), "{prompt}");
        assert!(prompt.contains("failed validation has-ok"), "{prompt}");
    }
    // Every candidate's hooks knew which it was, whatever its end.
    let mut hooks: Vec<String> = p.scratch_text("hooks").lines().map(String::from).collect();
    hooks.sort();
    assert_eq!(
        hooks,
        ["post 1", "post 1", "post 2", "post 2", "pre 1", "pre 1", "pre 2", "pre 2"]
    );
    // b committed in the first race and did not win: kept.
    assert!(p
        .refs("refs/ralph/candidates/")
        .contains(&"refs/ralph/candidates/1.1/1/2".to_string()));
}

#[test]
fn best_of_on_the_command_line_wins_over_the_config() {
    let p = one_story(r#"{ "best_of": 3 }"#);
    p.agent(
        r#"echo "${RALPH_CANDIDATE:-none}" >> "$SCRATCH/candidates"
commit_file "src/$ID.txt"; done_"#,
    );
    // The dry run says which stories race.
    let d = p.ralph(&["run", "-d"]);
    assert!(d.stdout.contains("1.1 A  (best of 3)"), "{d:?}");
    assert!(d.stdout.contains("best of 3: ×3 for 1 story"), "{d:?}");
    let d = p.ralph(&["run", "-d", "--best-of", "1"]);
    assert!(!d.stdout.contains("best of"), "{d:?}");
    let r = p.ralph(&["run", "--best-of", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    // One agent, as without racing: no candidate, no candidate records.
    assert_eq!(p.scratch_text("candidates"), "none\n");
    assert!(run_records(&p).iter().all(|r| r["ev"] != "candidate_start"));
}

#[test]
fn judge_without_a_judge_agent_lands_the_smallest_passing_diff() {
    let config = r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 },
      "attempts": { "best_of": 3, "pick": "judge",
        "candidates": ["claude:big", "claude:small", "claude:broken"] },
      "validation": { "commands": [ { "name": "has-ok", "required": true,
        "cmd": "test -f ok.txt" } ] } }"#;
    let p = Project::with_backlog("1.1 | A\n", config);
    p.commit_all("backlog");
    agent_by_model(
        &p,
        r#"
case "$M" in
big) seq 1 40 > big.txt; echo ok > ok.txt; git add big.txt ok.txt; git commit -qm "feat(story-$ID): big" ;;
small) echo ok > ok.txt; git add ok.txt; git commit -qm "feat(story-$ID): small" ;;
broken) commit_file "src/broken.txt" ;;
esac
done_
"#,
    );
    let r = p.ralph(&["run", "-j", "3"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), ["1.1"]);
    // The smallest passing diff landed; the bigger passing one is kept.
    assert_eq!(p.file_on_main("ok.txt").as_deref(), Some("ok\n"));
    assert_eq!(p.file_on_main("big.txt"), None);
    assert_eq!(
        candidate_ends(&p),
        [
            (1, "passed".to_string(), false),
            (2, "won".to_string(), true),
            (3, "failed".to_string(), false)
        ]
    );
    let pick: Vec<serde_json::Value> = run_records(&p)
        .into_iter()
        .filter(|r| r["ev"] == "candidate_pick")
        .collect();
    assert_eq!(pick.len(), 1);
    assert_eq!(pick[0]["candidate"], 2);
    assert_eq!(pick[0]["by"], "ranking");
    assert_eq!(
        p.refs("refs/ralph/candidates/"),
        [
            "refs/ralph/candidates/1.1/1/1",
            "refs/ralph/candidates/1.1/1/3"
        ]
    );
    assert_eq!(p.story("1.1")["attempts"], 0);
}

/// Two candidates that both pass (`one` a small change, `two` a bigger
/// one) and a judge (the same fake CLI, told apart by `RALPH_JUDGE`) that
/// answers what `$SCRATCH/judge-answer` says.
fn judged(answer: &str) -> Project {
    let config = r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 },
      "attempts": { "best_of": 2, "pick": "judge",
        "candidates": ["claude:one", "claude:two"],
        "judge": { "agent": "claude", "model": "wise" } },
      "validation": { "commands": [ { "name": "has-ok", "required": true,
        "cmd": "test -f ok.txt" } ] } }"#;
    let p = Project::with_backlog("1.1 | A\n", config);
    p.commit_all("backlog");
    std::fs::write(p.scratch.join("judge-answer"), answer).unwrap();
    agent_by_model(
        &p,
        r#"
if [ "$RALPH_JUDGE" = 1 ]; then
  cp "$PROMPT_FILE" "$SCRATCH/judge-prompt"; echo "$M" > "$SCRATCH/judge-model"
  result "$(cat "$SCRATCH/judge-answer")"; exit 0
fi
case "$M" in
one) echo ok > ok.txt; git add ok.txt; git commit -qm "feat(story-$ID): one" ;;
two) seq 1 30 > two.txt; echo ok > ok.txt; git add two.txt ok.txt; git commit -qm "feat(story-$ID): two" ;;
esac
done_
"#,
    );
    let r = p.ralph(&["run", "-j", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), ["1.1"]);
    p
}

fn the_pick(p: &Project) -> serde_json::Value {
    let picks: Vec<serde_json::Value> = run_records(p)
        .into_iter()
        .filter(|r| r["ev"] == "candidate_pick")
        .collect();
    assert_eq!(picks.len(), 1, "{picks:?}");
    picks[0].clone()
}

#[test]
fn a_judge_agents_pick_is_obeyed() {
    let p = judged("two does it properly <ralph>PICK 2</ralph>");
    let pick = the_pick(&p);
    assert_eq!(
        (pick["candidate"].as_u64(), pick["by"].as_str()),
        (Some(2), Some("judge"))
    );
    let reason = pick["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("two does it properly"), "{pick}");
    // The bigger change landed, as the judge said; it saw both diffs on its model.
    assert_eq!(
        p.file_on_main("two.txt").map(|t| t.lines().count()),
        Some(30)
    );
    let prompt = p.scratch_text("judge-prompt");
    assert!(prompt.contains("## Candidate 1 (claude:one)"), "{prompt}");
    assert!(prompt.contains("+++ b/two.txt"), "{prompt}");
    assert_eq!(p.scratch_text("judge-model").trim(), "wise");
    // Its cost is the story's: two candidates and the judge.
    let cost = p.story("1.1")["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.03).abs() < 1e-9, "{cost}");
}

#[test]
fn a_judge_reply_without_a_valid_pick_falls_back_to_the_ranking() {
    let p = judged("they are both fine <ralph>PICK 9</ralph>");
    let pick = the_pick(&p);
    assert_eq!(
        (pick["candidate"].as_u64(), pick["by"].as_str()),
        (Some(1), Some("ranking"))
    );
    assert_eq!(p.file_on_main("two.txt"), None);
}

#[test]
fn a_race_killed_mid_way_keeps_every_candidates_work_for_the_next_run() {
    let p = one_story(r#"{ "best_of": 2 }"#);
    // Each candidate commits, leaves a file uncommitted, then works on.
    p.agent(
        r#"
K="$RALPH_CANDIDATE"
commit_file "src/c$K.txt"; echo wip > "wip-$K.txt"
touch "$SCRATCH/ready-$K"
while [ ! -f "$SCRATCH/never" ]; do sleep 0.05; done
"#,
    );
    let mut child = crate::crash::spawn(&p, &["run", "-j", "2"]);
    wait_until(
        "both candidates at work",
        std::time::Duration::from_secs(60),
        || p.scratch.join("ready-1").exists() && p.scratch.join("ready-2").exists(),
    );
    crate::crash::kill_session(child.id() as i32);
    crate::crash::wait_exit(&mut child, "the killed run");
    // The next run finds the race's leftovers first, then lands the story.
    p.agent(r#"commit_file "src/$ID.txt"; done_"#);
    let r = p.ralph(&["run", "-j", "2", "--best-of", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), ["1.1"]);
    let refs = p.refs("refs/ralph/");
    for k in [1, 2] {
        let kept = format!("refs/ralph/candidates/1.1/1/{k}");
        assert!(refs.contains(&kept), "{refs:?}");
        let committed = git(&p.root, &["show", &format!("{kept}:src/c{k}.txt")]);
        assert_eq!(committed, "1.1\n");
        let unc = format!("refs/ralph/attempts/1.1@c{k}/1-uncommitted");
        let wip = git(&p.root, &["show", &format!("{unc}:wip-{k}.txt")]);
        assert_eq!(wip, "wip\n");
    }
}

#[test]
fn a_dry_run_counts_a_race_at_n_attempts_in_the_forecast() {
    let p = Project::with_backlog(
        "# [batch:1]\n1.1 | A\n1.2 | B\n1.3 | C\n1.4 | D\n",
        r#"{ "parallel": { "agent_memory_mb": 0 } }"#,
    );
    p.commit_all("backlog");
    // Each attempt reports $0.01 (the harness's `result`).
    p.agent("commit_file \"src/$ID.rs\"\ndone_\n");
    for id in ["1.1", "1.2"] {
        let r = p.ralph(&["run", "-s", id]);
        assert_eq!(r.code, 0, "{r:?}");
    }
    let forecast = |args: &[&str]| {
        let d = p.ralph(args);
        assert_eq!(d.code, 0, "{d:?}");
        d.stdout
    };
    let plain = forecast(&["run", "-d", "-j", "2"]);
    assert!(plain.contains("cost $0.02, wall time"), "{plain}");
    assert!(!plain.contains("best of"), "{plain}");
    // Raced by three, the two stories left cost three attempts each.
    let raced = forecast(&["run", "-d", "-j", "6", "--best-of", "3"]);
    assert!(
        raced.contains("cost $0.06 (best of 3: ×3 for 2 stories), wall time"),
        "{raced}"
    );
    assert!(
        raced.contains("[DRY RUN] best of 3: ×3 for 2 stories: candidates race"),
        "{raced}"
    );
}

#[test]
fn stats_tells_the_spend_of_stories_that_raced_from_the_others() {
    let p = Project::with_backlog(
        "# [batch:1]\n1.1 | A\n1.2 | B\n",
        r#"{ "parallel": { "agent_memory_mb": 0 } }"#,
    );
    p.commit_all("backlog");
    // Every run reports $0.01 (the harness's `result`). Candidate 2
    // answers FAIL at once; candidate 1 waits for that answer, then
    // passes: the race costs $0.02, the story run alone $0.01.
    p.agent(
        r#"
if [ "${RALPH_CANDIDATE:-0}" = 2 ]; then
  result "no <ralph>FAIL $ID: not this one</ralph>"; touch "$SCRATCH/two-answered"; exit 0
fi
for _ in $(seq 600); do [ "${RALPH_CANDIDATE:-0}" = 1 ] && [ ! -f "$SCRATCH/two-answered" ] || break; sleep 0.05; done
commit_file "src/$ID.rs"; done_
"#,
    );
    // Two slots: candidate 1 waits for candidate 2, which must start.
    let r = p.ralph(&["run", "-s", "1.1", "-j", "2", "--best-of", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = p.ralph(&["run", "-s", "1.2"]);
    assert_eq!(r.code, 0, "{r:?}");
    let s = p.ralph(&["stats"]);
    assert_eq!(s.code, 0, "{s:?}");
    assert!(
        s.stdout
            .contains("spend per landed story that raced $0.02 (1 story), alone $0.01 (1 story)"),
        "{s:?}"
    );
    // `stats --json` has them under the lifetime figures' costs.
    let j: serde_json::Value = serde_json::from_str(&p.ralph(&["stats", "--json"]).stdout).unwrap();
    let racing = &j["lifetime"]["costs"]["racing"];
    assert_eq!(racing["raced"]["stories"], 1, "{j}");
    assert_eq!(racing["alone"]["stories"], 1, "{j}");
    // And each model's race wins at `by_model.<model>.wins` (issue 36's
    // format), said for every model: one race, won once.
    let by_model = j["by_model"].as_object().expect("by_model");
    assert!(by_model.values().all(|m| m["wins"].is_u64()), "{j}");
    let wins: u64 = by_model.values().map(|m| m["wins"].as_u64().unwrap()).sum();
    assert_eq!(wins, 1, "{j}");
}

/// Two required checks: `one` wants `one.txt`, `two` wants `two.txt`;
/// each says what is missing in words its command line does not hold, so
/// only a prompt shown the check's output has them.
const TWO_CHECKS: &str = r#"{ "loop": { "max_retries": 3, "grace_seconds": 1 },
  "attempts": { "best_of": 2, "candidates": ["claude:early", "claude:late"] },
  "validation": { "commands": [
    { "name": "one", "required": true,
      "cmd": "test -f one.txt || { echo \"missing: $(echo one | tr a-z A-Z)\"; exit 1; }" },
    { "name": "two", "required": true,
      "cmd": "test -f two.txt || { echo \"missing: $(echo two | tr a-z A-Z)\"; exit 1; }" } ] } }"#;

#[test]
fn a_lost_races_closest_work_is_fixed_up_by_the_next_races_first_candidate() {
    let p = Project::with_backlog("1.1 | Hard\n", TWO_CHECKS);
    p.commit_all("backlog");
    agent_by_model(
        &p,
        r#"
cp "$PROMPT_FILE" "$SCRATCH/prompt-$RALPH_CANDIDATE-$N"
if [ "$N" = 1 ]; then
  # early fails the first check; late passes it and fails the second.
  case "$M" in
  early) commit_file "src/early.txt" ;;
  late) echo one > one.txt; git add one.txt; git commit -qm "feat(story-$ID): one"; git rev-parse HEAD > "$SCRATCH/late-commit" ;;
  esac
  done_; exit 0
fi
if [ "$RALPH_CANDIDATE" = 1 ]; then
  # The fix-up: what its branch holds, then the missing piece.
  git rev-list HEAD > "$SCRATCH/fixup-history"
  echo two > two.txt; git add two.txt; git commit -qm "fix(story-$ID): two"; done_; exit 0
fi
commit_file "src/again.txt"; result "no <ralph>FAIL $ID: not this time</ralph>"
"#,
    );
    let r = p.ralph(&["run", "-j", "2"]);
    assert_eq!(r.code, 0, "{r:?}\n{}", p.read("ralph.log"));
    assert_eq!(p.completed(), ["1.1"]);
    let story = p.story("1.1");
    assert_eq!(story["attempts"], 1, "one failed attempt: {story}");
    // The late failure came closest: the next race's candidate 1 began on
    // a branch holding that candidate's kept commit ...
    let late = p.scratch_text("late-commit").trim().to_string();
    assert!(!late.is_empty());
    let kept = git(&p.root, &["rev-parse", "refs/ralph/candidates/1.1/1/2"]);
    assert_eq!(kept.trim(), late);
    let history = p.scratch_text("fixup-history");
    assert!(history.lines().any(|l| l == late), "{history}");
    // ... told the fix-up's way, with that candidate's failing output.
    let prompt = p.scratch_text("prompt-1-2");
    assert!(
        prompt.contains("Fix that work\nup; do not start over"),
        "{prompt}"
    );
    assert!(prompt.contains("missing: TWO"), "{prompt}");
    assert!(!prompt.contains("missing: ONE"), "{prompt}");
    // The other candidate started over, told both failures.
    let fresh = p.scratch_text("prompt-2-2");
    assert!(!fresh.contains("do not start over"), "{fresh}");
    assert!(fresh.contains("failed validation one"), "{fresh}");
    assert!(fresh.contains("failed validation two"), "{fresh}");
    // Its fix-up landed, with the closest work in it.
    assert_eq!(p.file_on_main("two.txt").as_deref(), Some("two\n"));
    assert_eq!(p.file_on_main("one.txt").as_deref(), Some("one\n"));
    assert_eq!(p.file_on_main("src/early.txt"), None);
    // Which candidate was chosen, and why, is on record.
    let closest: Vec<serde_json::Value> = run_records(&p)
        .into_iter()
        .filter(|r| r["ev"] == "candidate_closest")
        .collect();
    assert_eq!(closest.len(), 1, "{closest:?}");
    assert_eq!(closest[0]["candidate"], 2);
    assert_eq!(closest[0]["work"], "refs/ralph/candidates/1.1/1/2");
    let reason = closest[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("2: failed check 2 of 2 (two)"), "{reason}");
    assert!(reason.contains("1: failed check 1 of 2 (one)"), "{reason}");
    // Nothing lost: every committed candidate that did not win is kept.
    assert_eq!(
        p.refs("refs/ralph/candidates/"),
        [
            "refs/ralph/candidates/1.1/1/1",
            "refs/ralph/candidates/1.1/1/2",
            "refs/ralph/candidates/1.1/2/2"
        ]
    );
}
