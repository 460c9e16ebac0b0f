//! The merge queue's chain (issue 34, docs/merge-queue.md): stories merged
//! on each other and validated side by side, the target moved to the
//! longest passed prefix. Validation commands record the tree they passed
//! (outside the worktree), so every first-parent tip of the target can be
//! checked against them.

use std::collections::BTreeSet;
use std::fs;
use std::time::Duration;

use crate::crash::{kill_session, spawn};
use crate::harness::*;

/// Five stories: 1.1 opens a chain, the three after it join it while it
/// validates, 1.5 once the first has landed (`landing.speculate: 4`).
const FIVE: &str = "# [batch:1]\n1.1 | A\n1.2 | B\n1.3 | C\n1.4 | D\n1.5 | E\n";

/// Waits (bounded) until the run's records hold `$1` ended attempts.
const WAIT_ENDED: &str = r#"
wait_ended() {
  for _ in $(seq 1 600); do
    n=$(cat "$RALPH_PROJECT_DIR"/.ralph/runs/*.jsonl 2>/dev/null | grep -c '"ev":"attempt_end"')
    [ "${n:-0}" -ge "$1" ] && return 0
    sleep 0.05
  done
}
"#;

/// An agent whose stories end in order (1.k once k-1 attempts ended), each
/// committing `story/<id>.txt`; a fix-up commits `story/<id>.fixed` too.
fn ordered_agent(p: &Project) {
    p.agent(&format!(
        r#"{WAIT_ENDED}
echo "$ID $N" >> "$SCRATCH/calls"
k=${{ID#1.}}
wait_ended $((k - 1))
commit_file "story/$ID.txt"
[ "$N" -gt 1 ] && commit_file "story/$ID.fixed"
done_
"#
    ));
}

/// The validation script: the first validation waits until all `stories`
/// attempts ended (so what follows lands as one chain); the merge holding
/// `fail`'s work without its fix fails; `extra` runs before the verdict.
/// A passed tree is appended to `$SCRATCH/passed` with the story and the
/// worktree it ran in.
fn validation(p: &Project, stories: usize, fail: &str, extra: &str) -> String {
    let script = format!(
        r#"#!/bin/bash
{WAIT_ENDED}
tree=$(git rev-parse 'HEAD^{{tree}}')
slot=$(basename "$PWD")
wait_ended {stories}
{extra}
if [ -n "{fail}" ] && [ -f "story/{fail}.txt" ] && [ ! -f "story/{fail}.fixed" ]; then
  echo "story {fail} broke the build"
  touch "$SCRATCH/failed-$RALPH_STORY"
  exit 1
fi
( flock 9; echo "$tree $RALPH_STORY $slot" >> "$SCRATCH/passed" ) 9>"$SCRATCH/passed.lock"
"#
    );
    let path = p.scratch.join("validate.sh");
    fs::write(&path, script).unwrap();
    let cmd = serde_json::to_string(&format!("bash {}", path.display())).unwrap();
    format!(
        r#"{{ "loop": {{ "max_retries": 2, "grace_seconds": 1 }},
      "landing": {{ "speculate": 4, "max_validations": 4 }},
      "validation": {{ "commands": [ {{ "name": "tests", "cmd": {cmd}, "required": true }} ] }} }}"#
    )
}

fn passed(p: &Project) -> Vec<(String, String, String)> {
    fs::read_to_string(p.scratch.join("passed"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((
                w.next()?.to_string(),
                w.next()?.to_string(),
                w.next()?.to_string(),
            ))
        })
        .collect()
}

/// Every first-parent tip of `main` after `start` is a tree a validation
/// passed.
fn assert_every_tip_validated(p: &Project, start: &str) {
    let trees: BTreeSet<String> = passed(p).into_iter().map(|(t, _, _)| t).collect();
    assert_every_tip_in(p, start, &trees);
}

/// The project with `config`, committed, and the ordered agent; the
/// target's tip before the run.
fn ready(p: &Project, config: &str) -> String {
    p.write(".ralph/config.json", &quiet_extras(config));
    p.commit_all("backlog");
    ordered_agent(p);
    start_of(p)
}

/// Nothing left behind: a clean checkout, no validation worktree or branch.
fn assert_tidy(p: &Project) {
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
    assert_eq!(p.worktrees().len(), 1, "{:?}", p.worktrees());
    assert!(p.branches("ralph/validate*").is_empty());
}

/// Runs the five stories with `config` to the end, every one landed; the
/// target's tip before the run.
fn run_all_five(p: &Project, config: &str) -> String {
    let start = ready(p, config);
    let r = p.ralph(&["run", "--parallel", "-j", "5"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed().len(), 5, "{r:?}");
    start
}

/// Every first-parent tip since `start` validated, each story merged once,
/// nothing left behind.
fn assert_landed_once_each(p: &Project, start: &str) {
    assert_every_tip_validated(p, start);
    for id in ["1.1", "1.2", "1.3", "1.4", "1.5"] {
        assert_eq!(p.merges_of(id), 1, "{id}");
    }
    assert_tidy(p);
}

fn calls(p: &Project) -> Vec<String> {
    let mut c: Vec<String> = fs::read_to_string(p.scratch.join("calls"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    c.sort();
    c
}

fn start_of(p: &Project) -> String {
    git(&p.root, &["rev-parse", "main"]).trim().to_string()
}

#[test]
fn a_chain_is_validated_side_by_side_and_every_tip_is_a_validated_tree() {
    let p = Project::with_backlog(FIVE, "{}");
    let config = validation(&p, 5, "", "");
    let start = ready(&p, &config);
    let d = p.ralph(&["run", "-d"]);
    assert!(
        d.stdout
            .contains("merge queue: chains of up to 4 merges validated side by side"),
        "{d:?}"
    );
    let r = p.ralph(&["run", "--parallel", "-j", "5"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed().len(), 5, "{r:?}");
    assert_every_tip_validated(&p, &start);
    // The records name each candidate's tree, its stories and the verdict.
    let ends: Vec<serde_json::Value> = run_records(&p)
        .into_iter()
        .filter(|r| r["ev"] == "validate_end")
        .collect();
    assert_eq!(ends.len(), 5, "{ends:?}");
    let trees: BTreeSet<String> = passed(&p).into_iter().map(|(t, _, _)| t).collect();
    for e in &ends {
        assert_eq!(e["verdict"], "passed", "{e}");
        assert!(trees.contains(e["tree"].as_str().unwrap()), "{e}");
    }
    assert!(
        ends.iter()
            .any(|e| e["stories"] == serde_json::json!(["1.1", "1.2", "1.3", "1.4"])),
        "the stories that finished while 1.1 validated joined its chain: {ends:?}"
    );
    let slots: BTreeSet<String> = passed(&p).into_iter().map(|(_, _, s)| s).collect();
    assert!(
        slots.contains("validate-4"),
        "four merges were validated side by side: {slots:?}"
    );
    // One validation per story: nothing was validated twice.
    assert_eq!(passed(&p).len(), 5, "{:?}", passed(&p));
    for id in ["1.1", "1.2", "1.3", "1.4", "1.5"] {
        assert_eq!(p.merges_of(id), 1, "{id}");
    }
    assert_tidy(&p);
}

/// The open chain: a merge that passed lands at once, while the merges
/// behind it still validate. Here each story's merge passes only once the
/// story before it is on main: a chain validated as a whole before any of
/// it lands would wait in vain.
#[test]
fn a_passed_merge_lands_while_the_merges_behind_it_still_validate() {
    let p = Project::with_backlog(FIVE, "{}");
    let behind = r#"k=${RALPH_STORY#1.}
if [ "$k" -gt 1 ]; then
  before="story 1.$((k - 1))"
  for _ in $(seq 1 1200); do
    git -C "$RALPH_PROJECT_DIR" log --first-parent --format=%s main | grep -q "$before\$" && break
    sleep 0.05
  done
  git -C "$RALPH_PROJECT_DIR" log --first-parent --format=%s main | grep -q "$before\$" \
    || { echo "$before had not landed while $RALPH_STORY validated"; exit 1; }
fi"#;
    let start = run_all_five(&p, &validation(&p, 5, "", behind));
    assert_eq!(
        calls(&p),
        ["1.1 1", "1.2 1", "1.3 1", "1.4 1", "1.5 1"],
        "no merge failed: {}",
        p.read("ralph.log")
    );
    assert_landed_once_each(&p, &start);
}

/// A story that conflicts with a merge of the chain that has not landed
/// is held, not sent back: that merge may never land, and a fix-up started
/// now would begin from code without it and conflict again once it lands.
/// Here 1.2's work conflicts with 1.1's while 1.1 validates: 1.2 waits,
/// then conflicts with 1.1 on main, and its one fix-up starts from code
/// holding 1.1's work and lands.
#[test]
fn a_conflict_with_a_merge_still_validating_waits_for_it_and_costs_one_fix_up() {
    let p = Project::with_backlog("# [batch:1]\n1.1 | A\n1.2 | B\n", "{}");
    // 1.1's merge validates until 1.2 was held (bounded: before the fix
    // the line never came, and 1.2's fix-up ran while 1.1 validated).
    let until_held = r#"if [ "$RALPH_STORY" = 1.1 ]; then
  for _ in $(seq 1 1200); do
    grep -q 'conflicts with the chain below it' "$RALPH_PROJECT_DIR/ralph.log" && break
    sleep 0.05
  done
fi"#;
    let config = validation(&p, 2, "", until_held);
    p.write(".ralph/config.json", &quiet_extras(&config));
    p.commit_all("backlog");
    let start = start_of(&p);
    // Both add `shared.txt` (a conflict), 1.2 after 1.1 ended; a fix-up
    // resolves the conflict it is given (the other side's lines, then its
    // own) and adds its line.
    p.agent(&format!(
        r#"{WAIT_ENDED}
echo "$ID $N" >> "$SCRATCH/calls"
if [ "$ID" = 1.2 ] && [ "$N" = 1 ]; then wait_ended 1; fi
if grep -q '^<<<<<<<' shared.txt 2>/dev/null; then
  grep -v -e '^<<<<<<<' -e '^|||||||' -e '^=======' -e '^>>>>>>>' -e "^$ID " shared.txt > shared.tmp
  mv shared.tmp shared.txt
fi
commit_file shared.txt "$ID $N"
done_
"#
    ));
    let r = p.ralph(&["run", "--parallel", "-j", "2"]);
    let log = p.read("ralph.log");
    assert_eq!(r.code, 0, "{r:?}\n{log}");
    assert!(
        log.contains("1.2 conflicts with the chain below it (1.1): held"),
        "{log}"
    );
    assert_eq!(calls(&p), ["1.1 1", "1.2 1", "1.2 2"], "{log}");
    assert_eq!(p.story("1.2")["conflicts"], 1, "{}", p.story("1.2"));
    assert_eq!(
        p.file_on_main("shared.txt").as_deref(),
        Some("1.1 1\n1.2 2\n")
    );
    assert_every_tip_validated(&p, &start);
    for id in ["1.1", "1.2"] {
        assert_eq!(p.merges_of(id), 1, "{id}");
    }
    assert_tidy(&p);
}

#[test]
fn a_failing_story_in_the_middle_of_a_chain_goes_back_alone() {
    let p = Project::with_backlog(FIVE, "{}");
    // The merges built on 1.3's broken work take long (a suite that fails
    // late), so 1.3's own merge fails first and they are thrown away.
    let long = r#"if [ "$RALPH_STORY" != 1.3 ] && [ -f story/1.3.txt ] && [ ! -f story/1.3.fixed ]; then
  for _ in $(seq 1 1200); do sleep 0.05; done
fi"#;
    let config = validation(&p, 5, "1.3", long);
    let start = ready(&p, &config);
    let r = p.ralph(&["run", "--parallel", "-j", "5"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed().len(), 5, "{r:?}");
    // 1.3 ran again, as a fix-up with the failing output; no other agent did.
    assert_eq!(
        calls(&p),
        ["1.1 1", "1.2 1", "1.3 1", "1.3 2", "1.4 1", "1.5 1"]
    );
    assert_eq!(p.kinds("1.3"), ["first", "fixup"]);
    for id in ["1.1", "1.2", "1.4", "1.5"] {
        assert_eq!(p.kinds(id), ["first"], "{id}");
        assert_eq!(p.merges_of(id), 1, "{id}");
    }
    assert_every_tip_validated(&p, &start);
    assert_eq!(p.file_on_main("story/1.3.fixed").as_deref(), Some("1.3\n"));
    let verdicts: Vec<String> = run_records(&p)
        .into_iter()
        .filter(|r| r["ev"] == "validate_end")
        .map(|r| r["verdict"].as_str().unwrap().to_string())
        .collect();
    assert!(verdicts.contains(&"failed".to_string()), "{verdicts:?}");
    assert!(verdicts.contains(&"thrown".to_string()), "{verdicts:?}");
}

/// A merge fails before the one it is built on has its verdict: the
/// failure is not yet anyone's (the merge holds the story before it too).
/// Here 1.4's merge, which holds 1.3's broken work, fails first; 1.3's own
/// merge fails after. Only 1.3 goes back to its agent.
#[test]
fn a_merge_failing_before_the_one_below_it_is_blamed_on_neither_until_that_one_ends() {
    let p = Project::with_backlog(FIVE, "{}");
    let later = r#"if [ "$RALPH_STORY" = 1.3 ]; then
  for _ in $(seq 1 1200); do [ -e "$SCRATCH/failed-1.4" ] && break; sleep 0.05; done
fi"#;
    let start = run_all_five(&p, &validation(&p, 5, "1.3", later));
    assert!(
        p.scratch.join("failed-1.4").exists(),
        "1.4's merge failed first"
    );
    assert_eq!(
        calls(&p),
        ["1.1 1", "1.2 1", "1.3 1", "1.3 2", "1.4 1", "1.5 1"],
        "{}",
        p.read("ralph.log")
    );
    assert_eq!(p.kinds("1.4"), ["first"]);
    assert_eq!(p.kinds("1.3"), ["first", "fixup"]);
    assert_landed_once_each(&p, &start);
}

#[test]
fn a_kill_during_a_chain_of_four_loses_nothing_and_lands_nothing_twice() {
    let p = Project::with_backlog(FIVE, "{}");
    // The chain's four validations hold until the test lets go (bounded).
    let hold = r#"if [ "$RALPH_STORY" != 1.1 ] && [ -e "$SCRATCH/hold" ]; then
  touch "$SCRATCH/holding-$slot"
  for _ in $(seq 1 1200); do [ -e "$SCRATCH/hold" ] || break; sleep 0.05; done
fi"#;
    let config = validation(&p, 5, "", hold);
    ready(&p, &config);
    fs::write(p.scratch.join("hold"), "").unwrap();
    let start = start_of(&p);
    let mut child = spawn(&p, &["run", "--parallel", "-j", "5"]);
    wait_until(
        "four validations side by side",
        Duration::from_secs(120),
        || {
            ["validate", "validate-2", "validate-3", "validate-4"]
                .iter()
                .all(|s| p.scratch.join(format!("holding-{s}")).exists())
        },
    );
    kill_session(child.id() as i32);
    let _ = child.wait();
    fs::remove_file(p.scratch.join("hold")).unwrap();
    assert_eq!(p.merges_of("1.1"), 1, "1.1 landed before the chain");
    for id in ["1.2", "1.3", "1.4", "1.5"] {
        assert_eq!(p.merges_of(id), 0, "{id} was only validating");
    }
    let r = p.ralph(&["run", "--parallel", "-j", "5"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed().len(), 5, "{r:?}");
    for id in ["1.1", "1.2", "1.3", "1.4", "1.5"] {
        assert_eq!(p.merges_of(id), 1, "{id} landed once");
    }
    // Finished work was landed, not redone.
    assert_eq!(calls(&p), ["1.1 1", "1.2 1", "1.3 1", "1.4 1", "1.5 1"]);
    assert_every_tip_validated(&p, &start);
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
    assert_eq!(p.worktrees().len(), 1, "{:?}", p.worktrees());
    assert!(!p.root.join(".git/index.lock").exists());
    assert!(!p.root.join(".git/refs/heads/main.lock").exists());
    assert!(!p.root.join(".ralph/landing.json").exists());
}

#[test]
fn a_user_committing_during_a_chain_reverts_nothing() {
    let p = Project::with_backlog(FIVE, "{}");
    // The user is a process of their own (a validation the chain stops
    // must not stop them): each validation asks them for a commit of a
    // file to main in the main checkout and waits (bounded) until it is
    // made; a commit git refuses while a landing holds a lock is made again,
    // as a person would.
    let ask = r#"if [ "$RALPH_STORY" != 1.1 ]; then
  touch "$SCRATCH/ask-$RALPH_STORY"
  for _ in $(seq 1 1200); do [ -e "$SCRATCH/made-$RALPH_STORY" ] && break; sleep 0.05; done
fi"#;
    let user = format!(
        r#"cd "{root}"
until [ -e "{s}/stop" ]; do
  for a in "{s}"/ask-*; do
    [ -e "$a" ] || continue
    id=${{a##*/ask-}}
    [ -e "{s}/made-$id" ] && continue
    mkdir -p user && echo "$id" > "user/$id.txt"
    for _ in $(seq 1 100); do
      git add "user/$id.txt" 2>/dev/null && git commit -qm "user $id" -- "user/$id.txt" 2>>"{s}/refused" && break
      sleep 0.05
    done
    echo "$id $(git rev-parse HEAD)" >> "{s}/committed"
    touch "{s}/made-$id"
  done
  sleep 0.05
done"#,
        root = p.root.display(),
        s = p.scratch.display()
    );
    let mut person = std::process::Command::new("bash")
        .args(["-c", &user])
        .spawn()
        .unwrap();
    let config = validation(&p, 5, "", ask);
    ready(&p, &config);
    let r = p.ralph(&["run", "--parallel", "-j", "5"]);
    fs::write(p.scratch.join("stop"), "").unwrap();
    person.wait().unwrap();
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed().len(), 5, "{r:?}");
    for id in ["1.1", "1.2", "1.3", "1.4", "1.5"] {
        assert_eq!(p.merges_of(id), 1, "{id}");
        assert_eq!(
            p.file_on_main(&format!("story/{id}.txt")).as_deref(),
            Some(format!("{id}\n").as_str()),
            "{id}'s work is on main"
        );
    }
    // Every commit the user made is on main, with its file.
    let committed = fs::read_to_string(p.scratch.join("committed")).unwrap_or_default();
    assert!(!committed.is_empty());
    let on_main = git(&p.root, &["rev-list", "main"]);
    for line in committed.lines() {
        let (id, commit) = line.split_once(' ').unwrap();
        assert!(
            on_main.contains(commit),
            "the user's commit for {id} was lost"
        );
        assert_eq!(
            p.file_on_main(&format!("user/{id}.txt")).as_deref(),
            Some(format!("{id}\n").as_str()),
            "the user's commit for {id} is kept"
        );
    }
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
    let records: String = fs::read_dir(p.root.join(".ralph/runs"))
        .unwrap()
        .flatten()
        .map(|e| fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    assert!(!records.contains(r#""ev":"reverted""#), "{records}");
}

#[test]
fn an_exclusive_validation_command_never_runs_twice_at_once() {
    let p = Project::with_backlog(FIVE, "{}");
    // Each run of the command waits (bounded) for another to be inside at
    // the same time: side by side they would meet, exclusive they never do.
    let meet = r#"( flock 9; n=$(cat "$SCRATCH/inside" 2>/dev/null || echo 0); echo $((n + 1)) > "$SCRATCH/inside"; [ "$n" -gt 0 ] && echo "$RALPH_STORY" >> "$SCRATCH/met" ) 9>"$SCRATCH/inside.lock"
for _ in $(seq 1 20); do [ -s "$SCRATCH/met" ] && break; sleep 0.05; done
( flock 9; n=$(cat "$SCRATCH/inside"); echo $((n - 1)) > "$SCRATCH/inside" ) 9>"$SCRATCH/inside.lock""#;
    let config = validation(&p, 5, "", meet).replace(
        r#""required": true"#,
        r#""required": true, "exclusive": true"#,
    );
    ready(&p, &config);
    let r = p.ralph(&["run", "--parallel", "-j", "5"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed().len(), 5, "{r:?}");
    assert_eq!(
        fs::read_to_string(p.scratch.join("met")).unwrap_or_default(),
        "",
        "two runs of the exclusive command overlapped"
    );
    // A chain was built all the same.
    let slots: BTreeSet<String> = passed(&p).into_iter().map(|(_, _, s)| s).collect();
    assert!(slots.contains("validate-2"), "{slots:?}");
}

// ---------------------------------------------------------------------------
// Batches (`landing.batch`): several stories, one validation; bisected on a
// failure.

/// Stories 1.1 … 1.n in one batch section.
fn stories_txt(n: usize) -> String {
    let mut s = String::from("# [batch:1]\n");
    for k in 1..=n {
        s.push_str(&format!("1.{k} | S{k}\n"));
    }
    s
}

/// `validation`'s config with the queue's shape set to `landing`.
fn batched(p: &Project, stories: usize, fail: &str, extra: &str, landing: &str) -> String {
    validation(p, stories, fail, extra).replace(
        r#""landing": { "speculate": 4, "max_validations": 4 }"#,
        &format!(r#""landing": {landing}"#),
    )
}

/// Every tip the target moved to after `start` (its reflog) is a tree a
/// validation passed, and every first-parent commit since is one story's
/// merge: the merges inside a batch are not tips the target stopped at.
fn assert_every_move_validated(p: &Project, start: &str) {
    let trees: BTreeSet<String> = passed(p).into_iter().map(|(t, _, _)| t).collect();
    let moves = git(&p.root, &["reflog", "show", "--format=%H", "main"]);
    let mut n = 0;
    for c in moves.lines().take_while(|c| *c != start) {
        n += 1;
        let tree = git(&p.root, &["rev-parse", &format!("{c}^{{tree}}")]);
        assert!(
            trees.contains(tree.trim()),
            "the target moved to {c} ({}), a tree no validation passed",
            git(&p.root, &["log", "-1", "--format=%s", c]).trim()
        );
    }
    assert!(n > 0, "the target never moved: {moves}");
    let subjects = git(
        &p.root,
        &[
            "log",
            "--first-parent",
            "--format=%s",
            &format!("{start}..main"),
        ],
    );
    for s in subjects.lines() {
        assert!(s.starts_with("merge: story"), "{s}");
    }
}

fn validations_run(p: &Project) -> usize {
    run_records(p)
        .into_iter()
        .filter(|r| r["ev"] == "validate_start")
        .count()
}

#[test]
fn batches_of_six_validate_once_each_and_every_move_of_the_target_is_validated() {
    let p = Project::with_backlog(&stories_txt(13), "{}");
    let config = batched(
        &p,
        13,
        "",
        "",
        r#"{ "speculate": 2, "batch": 6, "max_validations": 2 }"#,
    );
    let start = ready(&p, &config);
    let d = p.ralph(&["run", "-d"]);
    assert!(
        d.stdout
            .contains("batches of up to 6 stories validated once"),
        "{d:?}"
    );
    let r = p.ralph(&["run", "--parallel", "-j", "13"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed().len(), 13, "{r:?}");
    for k in 1..=13 {
        assert_eq!(p.merges_of(&format!("1.{k}")), 1, "1.{k}");
    }
    assert_every_move_validated(&p, &start);
    // 1.1 alone, then the twelve that waited as a chain of two batches.
    let runs = validations_run(&p);
    assert!(runs < 13, "{runs} validations for 13 landings");
    assert_eq!(runs, 3, "{:?}", passed(&p));
    let six: Vec<String> = (8..=13).map(|k| format!("1.{k}")).collect();
    assert!(
        run_records(&p).iter().any(|r| r["ev"] == "validate_end"
            && r["verdict"] == "passed"
            && r["stories"].as_array().is_some_and(|s| s.len() == 12
                && s.iter()
                    .rev()
                    .take(6)
                    .rev()
                    .map(|v| v.as_str().unwrap())
                    .eq(six.iter().map(String::as_str)))),
        "the chain's second batch holds the first: {:?}",
        run_records(&p)
    );
    assert_eq!(calls(&p).len(), 13, "no agent ran twice");
    assert_tidy(&p);
}

/// Seven stories: 1.1 lands alone, 1.2 … 1.7 wait and form one batch.
fn seven_with_a_bad_batch(p: &Project, extra: &str) {
    let config = batched(
        p,
        7,
        "1.4",
        extra,
        r#"{ "speculate": 1, "batch": 6, "max_validations": 2 }"#,
    );
    ready(p, &config);
}

#[test]
fn one_bad_story_in_a_batch_goes_back_alone_and_the_others_land() {
    let p = Project::with_backlog(&stories_txt(7), "{}");
    seven_with_a_bad_batch(&p, "");
    let start = start_of(&p);
    let r = p.ralph(&["run", "--parallel", "-j", "7"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed().len(), 7, "{r:?}");
    // 1.4 ran again, as a fix-up with the failing output; no other agent did.
    assert_eq!(
        calls(&p),
        ["1.1 1", "1.2 1", "1.3 1", "1.4 1", "1.4 2", "1.5 1", "1.6 1", "1.7 1"]
    );
    assert_eq!(p.kinds("1.4"), ["first", "fixup"]);
    for k in [1, 2, 3, 5, 6, 7] {
        let id = format!("1.{k}");
        assert_eq!(p.kinds(&id), ["first"], "{id}");
        assert_eq!(p.merges_of(&id), 1, "{id}");
    }
    assert_eq!(p.merges_of("1.4"), 1);
    assert_eq!(p.file_on_main("story/1.4.fixed").as_deref(), Some("1.4\n"));
    // The failing output is in 1.4's own validation log.
    let log =
        fs::read_to_string(p.root.join(".ralph/logs/1.4/validation-1.log")).unwrap_or_default();
    assert!(log.contains("story 1.4 broke the build"), "{log}");
    assert_every_move_validated(&p, &start);
    // The others landed before 1.4's fix-up: bisected, not sent back.
    let order: Vec<String> = git(
        &p.root,
        &[
            "log",
            "--first-parent",
            "--reverse",
            "--format=%s",
            &format!("{start}..main"),
        ],
    )
    .lines()
    .map(str::to_string)
    .collect();
    assert!(order.last().unwrap().contains("story 1.4"), "{order:?}");
    let records = run_records(&p);
    let failed: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r["ev"] == "validate_end" && r["verdict"] == "failed")
        .collect();
    assert!(
        failed
            .iter()
            .any(|r| r["stories"].as_array().unwrap().len() == 6),
        "the batch failed whole first: {failed:?}"
    );
    // Fewer validations than a one-by-one queue would have run (7 + 1).
    assert!(validations_run(&p) < 8 + 3, "{}", validations_run(&p));
    assert_tidy(&p);
}

#[test]
fn a_kill_during_a_bisection_loses_nothing_and_lands_nothing_twice() {
    let p = Project::with_backlog(&stories_txt(7), "{}");
    // Once the batch failed, the bisection's halves hold until the test
    // lets go (bounded); the failing run marks that it failed.
    let hold = r#"if [ -e "$SCRATCH/batch-failed" ] && [ -e "$SCRATCH/hold" ]; then
  touch "$SCRATCH/holding-$slot"
  for _ in $(seq 1 1200); do [ -e "$SCRATCH/hold" ] || break; sleep 0.05; done
fi
if [ -f story/1.4.txt ] && [ ! -f story/1.4.fixed ]; then touch "$SCRATCH/batch-failed"; fi"#;
    seven_with_a_bad_batch(&p, hold);
    fs::write(p.scratch.join("hold"), "").unwrap();
    let start = start_of(&p);
    let mut child = spawn(&p, &["run", "--parallel", "-j", "7"]);
    wait_until(
        "the bisection's halves validated side by side",
        Duration::from_secs(120),
        || {
            ["validate", "validate-2"]
                .iter()
                .all(|s| p.scratch.join(format!("holding-{s}")).exists())
        },
    );
    kill_session(child.id() as i32);
    let _ = child.wait();
    fs::remove_file(p.scratch.join("hold")).unwrap();
    assert_eq!(p.merges_of("1.1"), 1, "1.1 landed before the batch");
    for k in 2..=7 {
        assert_eq!(
            p.merges_of(&format!("1.{k}")),
            0,
            "1.{k} was only validating"
        );
    }
    let r = p.ralph(&["run", "--parallel", "-j", "7"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed().len(), 7, "{r:?}");
    for k in 1..=7 {
        assert_eq!(p.merges_of(&format!("1.{k}")), 1, "1.{k} landed once");
    }
    // Finished work was landed, not redone; only 1.4 went back, fixed.
    assert_eq!(
        calls(&p),
        ["1.1 1", "1.2 1", "1.3 1", "1.4 1", "1.4 2", "1.5 1", "1.6 1", "1.7 1"]
    );
    assert_every_move_validated(&p, &start);
    assert_tidy(&p);
    assert!(!p.root.join(".git/index.lock").exists());
    assert!(!p.root.join(".git/refs/heads/main.lock").exists());
    assert!(!p.root.join(".ralph/landing.json").exists());
}
