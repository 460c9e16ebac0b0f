//! Trust gates before landing (issue 26): fake agents that weaken the
//! tests or drop another story's lines are sent back as fix-ups naming
//! what they did, and land once it is restored; a legitimate move of a
//! test lands at once; an agent that explains itself waits for review;
//! `gates.tests: warn` lands with the findings recorded.

use crate::harness::*;

const TESTS: &str = "def test_add():\n    assert add(1, 2) == 3\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n    assert add(0, 1) == 1\n";

const CONFIG: &str = r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 },
  "validation": { "commands": [ { "name": "tests", "cmd": "true", "required": true } ] } }"#;

/// One story over a project with a Python test file; the agent's first
/// attempt does `cheat` then says DONE, its fix-up (if any) restores every
/// file from `main` and says DONE.
fn cheating_run(cheat: &str, config: &str) -> (Project, RunResult) {
    let p = Project::with_backlog("1.1 | Calc\n", config);
    p.write("tests/test_calc.py", TESTS);
    p.write("calc.py", "def add(a, b):\n    return a + b\n");
    p.commit_all("backlog");
    p.agent(&format!(
        r#"
cp "$PROMPT_FILE" "$SCRATCH/prompt-$N"
if [ "$N" = 1 ]; then
  commit_file "src/feature.txt"
  {cheat}
  git add -A && git commit -qm "feat(story-$ID): the cheat"
else
  git checkout main -- tests .ralph/config.json 2>/dev/null
  git add -A && git commit -qm "fix(story-$ID): restore the checks"
fi
done_
"#
    ));
    let r = p.ralph(&["run"]);
    (p, r)
}

#[test]
fn each_cheat_goes_back_as_a_fix_up_naming_it_and_lands_once_restored() {
    let cases = [
        (
            "a deleted test file",
            "git rm -q tests/test_calc.py",
            "tests/test_calc.py: test file deleted",
        ),
        (
            "an added skip",
            r#"sed -i 's/^def test_zero/@pytest.mark.skip\ndef test_zero/' tests/test_calc.py"#,
            "skip marker added: `@pytest.mark.skip`",
        ),
        (
            "removed assertions",
            r#"sed -i '/assert add(0/d' tests/test_calc.py"#,
            "[assertions_lost]",
        ),
        (
            "an edited validation command",
            r#"sed -i 's/"cmd": "true"/"cmd": "exit 0"/' .ralph/config.json"#,
            ".ralph/config.json: the `validation` section changed",
        ),
    ];
    for (name, cheat, finding) in cases {
        let (p, r) = cheating_run(cheat, CONFIG);
        assert_eq!(r.code, 0, "{name}: {r:?}");
        assert_eq!(p.kinds("1.1"), vec!["first", "fixup"], "{name}: {r:?}");
        let fix = p.scratch_text("prompt-2");
        assert!(fix.contains("## Checks before landing"), "{name}: {fix}");
        assert!(
            fix.contains(finding),
            "{name}: {finding:?} missing from:\n{fix}"
        );
        assert_eq!(p.merges_of("1.1"), 1, "{name}");
        assert_eq!(
            p.file_on_main("tests/test_calc.py").as_deref(),
            Some(TESTS),
            "{name}"
        );
        assert!(
            p.read(".ralph/config.json").contains(r#""cmd": "true""#),
            "{name}"
        );
        // The cheat is on record: the run's records and the first landing's refs.
        let runs = std::fs::read_dir(p.root.join(".ralph/runs"))
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .collect::<String>();
        assert!(
            runs.contains(r#""ev":"gate""#) && runs.contains(r#""decision":"fixup""#),
            "{name}: {runs}"
        );
        // A gate fix-up is no failed attempt.
        assert_eq!(p.story("1.1")["attempts"], 0, "{name}");
    }
}

#[test]
fn a_test_moved_to_another_file_is_no_finding() {
    let moved = r#"printf 'def test_add():\n    assert add(1, 2) == 3\n' > tests/test_calc.py
printf 'def test_zero():\n    assert add(0, 0) == 0\n    assert add(0, 1) == 1\n' > tests/test_zero.py"#;
    let (p, r) = cheating_run(moved, CONFIG);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.kinds("1.1"), vec!["first"], "{r:?}");
    assert!(p.file_on_main("tests/test_zero.py").is_some());
    assert!(p.story("1.1").get("gate").is_none());
}

#[test]
fn an_agent_that_explains_its_test_change_waits_for_review_with_the_reason() {
    let p = Project::with_backlog("1.1 | Calc\n", CONFIG);
    p.write("tests/test_calc.py", TESTS);
    p.commit_all("backlog");
    p.agent(
        r#"
git rm -q tests/test_calc.py
git commit -qm "feat(story-$ID): drop the old tests"
result "the tests went with the old API <ralph>TESTS_CHANGED $ID: the old API is gone</ralph> <ralph>DONE $ID</ralph>"
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "a person is needed: {r:?}");
    assert_eq!(p.story("1.1")["status"], "review", "{r:?}");
    assert_eq!(p.merges_of("1.1"), 0);
    assert_eq!(p.kinds("1.1"), vec!["first"]);
    let review = p.ralph(&["review"]);
    for want in [
        "held by the trust gates (",
        "TESTS_CHANGED: the old API is gone",
        "tests/test_calc.py: test file deleted [test_file_deleted]",
    ] {
        assert!(
            review.stdout.contains(want),
            "{want:?} missing from:\n{}",
            review.stdout
        );
    }
    // A person approves: it lands as it is.
    let landed = p.ralph(&["land", "1.1"]);
    assert_eq!(landed.code, 0, "{landed:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert!(p.file_on_main("tests/test_calc.py").is_none());
}

#[test]
fn warn_lands_the_work_with_the_findings_recorded() {
    let warn =
        r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 }, "gates": { "tests": "warn" } }"#;
    let (p, r) = cheating_run(r#"sed -i '/assert add(0/d' tests/test_calc.py"#, warn);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.kinds("1.1"), vec!["first"]);
    assert_eq!(p.merges_of("1.1"), 1);
    assert_eq!(p.story("1.1")["gate"]["decision"], "warned");
    assert_eq!(
        p.story("1.1")["gate"]["findings"][0]["kind"],
        "assertions_lost"
    );
    let status = p.ralph(&["status"]);
    assert!(
        status.stdout.contains("Gates: 1.1 warned (1 finding(s))"),
        "{}",
        status.stdout
    );
}

/// Two stories append to one file; 1.2 starts from the old tip and waits
/// for 1.1 to land, so its landing conflicts. Its conflict fix-up takes
/// its own side whole (`git checkout --theirs`), losing 1.1's line: the
/// gate sends it back, and the second fix-up keeps both.
#[test]
fn a_conflict_fix_up_that_takes_one_side_is_sent_back_and_lands_with_both() {
    let queue = "# [batch:1]\n1.1 | Left\n1.2 | Right\n";
    let p = Project::with_backlog(
        queue,
        r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 }, "parallel": { "agent_memory_mb": 0 } }"#,
    );
    p.write("shared.txt", "first line\n");
    p.commit_all("backlog");
    p.agent(
        r#"
cp "$PROMPT_FILE" "$SCRATCH/prompt-$ID-$N"
if git rev-parse -q --verify MERGE_HEAD >/dev/null; then
  git checkout --theirs shared.txt
  git add shared.txt
  git commit -q --no-edit
  done_
  exit 0
fi
if grep -q "Checks before landing" "$PROMPT_FILE"; then
  { git show main:shared.txt; echo "line from $ID"; } > shared.txt
  git add shared.txt
  git commit -qm "fix(story-$ID): keep both sides"
  done_
  exit 0
fi
if [ "$ID" = "1.2" ]; then
  for _ in $(seq 1 300); do
    git -C "$RALPH_PROJECT_DIR" log --format=%s main | grep -q '^merge: story 1.1' && break
    sleep 0.1
  done
fi
echo "line from $ID" >> shared.txt
git add shared.txt
git commit -qm "feat(story-$ID): shared"
done_
"#,
    );
    let r = p.ralph(&["run", "--parallel", "-j", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    assert_eq!(p.kinds("1.2"), vec!["first", "fixup", "fixup"], "{r:?}");
    let gate = p.scratch_text("prompt-1.2-3");
    assert!(
        gate.contains("shared.txt:2:")
            && gate.contains("`line from 1.1`")
            && gate.contains("[other_side_lost]"),
        "{gate}"
    );
    assert_eq!(
        p.file_on_main("shared.txt").as_deref(),
        Some("first line\nline from 1.1\nline from 1.2\n")
    );
}

/// The review gate: a reviewer (a fake `amp`, which speaks Claude Code's
/// stream-json) that asks for changes on its first `changes` reviews, then
/// approves; the author fixes up what it is told.
fn reviewed_run(changes: u32) -> (Project, RunResult) {
    let p = Project::with_backlog(
        "1.1 | Feature\n",
        r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 },
  "validation": { "commands": [ { "name": "tests", "cmd": "echo VALIDATION-RAN", "required": true } ] },
  "gates": { "review": { "agent": "amp" } } }"#,
    );
    p.commit_all("backlog");
    p.agent(
        r#"
cp "$PROMPT_FILE" "$SCRATCH/prompt-$N"
if grep -q "a reviewer asked for changes" "$PROMPT_FILE"; then
  commit_file "README.md" "a line the reviewer asked for"
else
  commit_file "src/feature.txt" "the feature"
fi
done_
"#,
    );
    p.agent_named(
        "amp",
        &format!(
            r#"
n=$(( $(cat "$SCRATCH/reviews" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$SCRATCH/reviews"
cp "$PROMPT_FILE" "$SCRATCH/review-$n"
if [ "$n" -le {changes} ]; then
  result "Not yet. <ralph>CHANGES $RALPH_STORY: add a README line ($n)</ralph>"
else
  result "Fine. <ralph>APPROVE $RALPH_STORY</ralph>"
fi
"#
        ),
    );
    let r = p.ralph(&["run"]);
    (p, r)
}

#[test]
fn a_reviewer_that_asks_for_changes_once_gets_one_fix_up_then_the_story_lands() {
    let (p, r) = reviewed_run(1);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.kinds("1.1"), vec!["first", "fixup"], "{r:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert_eq!(p.scratch_text("reviews").trim(), "2");
    let first = p.scratch_text("review-1");
    for want in [
        "Read only",
        "# Story 1.1",
        "+the feature",
        "VALIDATION-RAN",
        "<ralph>APPROVE 1.1</ralph>",
    ] {
        assert!(first.contains(want), "{want:?} missing from:\n{first}");
    }
    let fix = p.scratch_text("prompt-2");
    assert!(fix.contains("add a README line (1)"), "{fix}");
    assert!(p
        .file_on_main("README.md")
        .unwrap()
        .contains("a line the reviewer asked for"));
    // The reviewer's two runs ($0.01 each) count to the story's cost.
    let cost = p.story("1.1")["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.04).abs() < 1e-6, "{cost}");
    let runs = std::fs::read_dir(p.root.join(".ralph/runs"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect::<String>();
    assert!(
        runs.contains(r#""verdict":"changes""#) && runs.contains(r#""verdict":"approve""#),
        "{runs}"
    );
    let log = p.ralph(&["log", "1.1", "-a", "1"]);
    assert!(
        log.stdout.contains("the reviewer of attempt 1's landing")
            && log.stdout.contains("add a README line (1)"),
        "{log:?}"
    );
    assert_eq!(
        p.story("1.1")["reviews"],
        serde_json::json!(["changes: add a README line (1)", "approve"])
    );
    p.ralph(&["report"]);
    let html = std::fs::read_to_string(p.root.join(".ralph/report.html")).unwrap_or_default();
    assert!(
        html.contains("review: changes: add a README line (1) → approve"),
        "no verdicts in the report"
    );
}

#[test]
fn a_reviewer_that_never_approves_leaves_the_story_in_review_after_two_rounds() {
    let (p, r) = reviewed_run(99);
    assert_eq!(r.code, 1, "a person is needed: {r:?}");
    assert_eq!(p.story("1.1")["status"], "review");
    assert_eq!(p.kinds("1.1"), vec!["first", "fixup"]);
    assert_eq!(p.scratch_text("reviews").trim(), "2");
    assert_eq!(p.merges_of("1.1"), 0);
    let review = p.ralph(&["review"]);
    assert!(
        review
            .stdout
            .contains("the reviewer: add a README line (2)"),
        "{}",
        review.stdout
    );
}

/// A tracker's token reaches no agent, the reviewer included, even with
/// the sandbox off (before, the reviewer kept `GITHUB_TOKEN`).
#[test]
fn the_reviewer_like_every_agent_gets_no_tracker_token() {
    let p = Project::with_backlog(
        "1.1 | Feature\n",
        r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 },
  "gates": { "review": { "agent": "amp" } } }"#,
    );
    p.commit_all("backlog");
    p.agent(
        r#"echo "${GITHUB_TOKEN:-none} ${GH_TOKEN:-none}" > "$SCRATCH/author-env"
commit_file "src/feature.txt" "the feature"; done_"#,
    );
    p.agent_named(
        "amp",
        r#"echo "${GITHUB_TOKEN:-none} ${GH_TOKEN:-none}" > "$SCRATCH/reviewer-env"
result "Fine. <ralph>APPROVE $RALPH_STORY</ralph>""#,
    );
    let r = p.ralph_with(
        &["run"],
        &[
            ("GITHUB_TOKEN", "ghp_tracker0123456789"),
            ("GH_TOKEN", "gho_other0123456789"),
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.scratch_text("author-env"), "none none\n");
    assert_eq!(
        p.scratch_text("reviewer-env"),
        "none none\n",
        "the reviewer ran without them"
    );
}

/// Issue 33: a gate that cannot read the story's work found nothing, and
/// the landing went on as if it had looked. Here the agent's commit names
/// a test file and then removes the file's old blob (unsealed: the shared
/// object store), which the merge does not need but the gate's diff does: the story waits for a
/// person, nothing lands, the work is kept.
#[test]
fn a_gate_that_cannot_read_the_work_sends_the_story_to_review() {
    let config = r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 },
  "sandbox": { "mode": "off" },
  "validation": { "commands": [ { "name": "tests", "cmd": "true", "required": true } ] } }"#;
    let p = Project::with_backlog("1.1 | Calc\n", config);
    p.write("tests/test_calc.py", TESTS);
    p.commit_all("backlog");
    p.agent(
        r#"
old=$(git rev-parse HEAD:tests/test_calc.py)
printf 'def test_new():\n    assert True\n' > tests/test_calc.py
git add -A && git commit -qm "feat(story-$ID): new tests"
rm -f "$(git rev-parse --git-common-dir)/objects/${old:0:2}/${old:2}"
done_
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "a person is needed: {r:?}");
    assert_eq!(p.story("1.1")["status"], "review", "{r:?}");
    assert_eq!(p.merges_of("1.1"), 0, "{r:?}");
    assert_eq!(p.kinds("1.1"), vec!["first"], "no agent run for it: {r:?}");
    let review = p.ralph(&["review"]);
    assert!(
        review.stdout.contains("the gates could not read the work"),
        "{}",
        review.stdout
    );
    assert!(
        !p.refs("refs/ralph/").is_empty() || !p.branches("ralph/*").is_empty(),
        "the work is kept: {r:?}"
    );
}
