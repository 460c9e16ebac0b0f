//! `validation.where: executor` on a real Ray cluster (issue 34 item 3):
//! each merge-queue candidate is validated by a Ray job on a node, while
//! the coordinator merges and moves the target. The validation command
//! records the tree it passed and the node it ran on (`$RALPH_NODE`,
//! which only the nodes have) in the scratch directory, outside every
//! repository.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::{cluster, ended, project_with, relay_refs, run_to_end, Cluster};
use crate::harness::{alive, assert_every_tip_in, git, run_records, wait_until, Project, RALPH};

/// `bash` lines waiting (bounded) until the coordinator's records in
/// `root` hold `$1` ended attempts: the nodes share its disk here.
fn wait_ended(root: &Path) -> String {
    format!(
        r#"wait_ended() {{
  for _ in $(seq 1 1200); do
    n=$(cat '{}'/.ralph/runs/*.jsonl 2>/dev/null | grep -c '"ev":"attempt_end"')
    [ "${{n:-0}}" -ge "$1" ] && return 0
    sleep 0.05
  done
}}"#,
        root.display()
    )
}

/// The project on the cluster: `queue`, validations as jobs, chains of
/// four, and `script` (written to the scratch directory) the one required
/// validation command.
fn on_ray(c: &Cluster, queue: &str, scratch: &Path, bin: &Path, script: &str) -> Project {
    let p = project_with(c, queue, "done_\n", RALPH, r#"{ "ralph_slot": 1 }"#);
    let path = scratch.join("validate.sh");
    std::fs::write(&path, script.replace("WAIT_ENDED", &wait_ended(&p.root))).unwrap();
    let cfg = p.read(".ralph/config.json");
    let mut v: serde_json::Value = serde_json::from_str(&cfg).unwrap();
    v["validation"] = serde_json::json!({ "where": "executor", "commands": [
        { "name": "tests", "cmd": format!("bash {}", path.display()), "required": true } ] });
    v["landing"] = serde_json::json!({ "speculate": 4 });
    p.write(".ralph/config.json", &v.to_string());
    p.commit_all("validated on the cluster");
    std::fs::copy(p.bin.join("claude"), bin.join("claude")).unwrap();
    p
}

/// No validation job, no relay ref, no coordinator worktree left behind.
fn assert_nothing_left(c: &Cluster, p: &Project, shown: &str) {
    let jobs = c.jobs();
    assert!(
        !jobs
            .iter()
            .any(|j| j["metadata"]["ralph_validation"].is_string()),
        "validation jobs left on the cluster: {jobs:?}\n{shown}"
    );
    assert_eq!(relay_refs(c), Vec::<String>::new(), "{shown}");
    assert_eq!(p.refs("refs/ralph-relay/"), Vec::<String>::new(), "{shown}");
    assert_eq!(p.worktrees().len(), 1, "{:?}", p.worktrees());
    assert!(p.branches("ralph/validate*").is_empty(), "{shown}");
}

/// Five stories ending in order (1.k once k-1 attempts ended), so 1.1
/// lands alone and 1.2..1.5 form one chain of four; the merge holding 1.3
/// without its fix fails. Every tip is a tree a node validated, 1.3 alone
/// goes back (shown its failing output), and nothing is left anywhere.
#[test]
fn a_chain_validated_as_jobs_on_the_nodes_lands_only_validated_trees() {
    let Some((_one, scratch, bin, c)) = cluster() else {
        return;
    };
    let s = scratch.path().display().to_string();
    let script = r#"#!/bin/bash
WAIT_ENDED
tree=$(git rev-parse 'HEAD^{tree}')
node=${RALPH_NODE:-coordinator}
( flock 9; echo "$tree $RALPH_STORY $node" >> 'S/ran' ) 9>'S/ran.lock'
wait_ended 5
if [ -f story/1.3.txt ] && [ ! -f story/1.3.fixed ]; then
  echo "story 1.3 broke the build on $node"
  exit 1
fi
( flock 9; echo "$tree $RALPH_STORY $node" >> 'S/passed' ) 9>'S/passed.lock'
"#;
    let p = on_ray(
        &c,
        "# [batch:1]\n1.1 | A\n1.2 | B\n1.3 | C\n1.4 | D\n1.5 | E\n",
        scratch.path(),
        bin.path(),
        &script.replace("'S/", &format!("'{s}/")),
    );
    p.agent(&format!(
        r#"{}
echo "$ID $N" >> "$SCRATCH/calls"
k=${{ID#1.}}
wait_ended $((k - 1))
commit_file "story/$ID.txt"
if [ "$N" -gt 1 ]; then
  grep -q "story 1.3 broke the build on" "$PROMPT_FILE" && touch "$SCRATCH/fixup-saw-output"
  commit_file "story/$ID.fixed"
fi
done_
"#,
        wait_ended(&p.root)
    ));
    std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
    let d = run_to_end(&p, c.ralph(&p, &["run", "-d"]));
    assert!(
        d.stdout
            .contains("validations: as jobs on the executor's nodes, next to the attempts"),
        "{d:?}"
    );
    let start = git(&p.root, &["rev-parse", "main"]).trim().to_string();
    let r = run_to_end(&p, c.ralph(&p, &["run", "-j", "4"]));
    let shown = format!("{r:?}\n{}", p.read("ralph.log"));
    assert_eq!(r.code, 0, "{shown}");
    assert_eq!(p.completed().len(), 5, "{shown}");
    let lines = |name: &str| -> Vec<Vec<String>> {
        std::fs::read_to_string(scratch.path().join(name))
            .unwrap_or_default()
            .lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .collect()
    };
    // (1) Every tip the target moved to is a tree a validation passed.
    let passed: BTreeSet<String> = lines("passed").iter().map(|l| l[0].clone()).collect();
    assert_every_tip_in(&p, &start, &passed);
    // (2) Every validation ran on a node, none on the coordinator; the
    // records say where.
    let nodes: BTreeSet<String> = lines("ran").iter().map(|l| l[2].clone()).collect();
    assert!(
        !nodes.is_empty() && nodes.iter().all(|n| n == "head" || n == "w2"),
        "{nodes:?}\n{shown}"
    );
    let records = run_records(&p);
    let ends: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r["ev"] == "validate_end" && r["verdict"] != "thrown")
        .collect();
    assert!(!ends.is_empty(), "{shown}");
    for e in &ends {
        let node = e["node"].as_str().unwrap_or("");
        assert!(
            node.starts_with("head/") || node.starts_with("w2/"),
            "{e}\n{shown}"
        );
    }
    // (3) 1.3 alone went back, as a fix-up shown its failing output; no
    // other story ran twice or landed twice.
    assert_eq!(p.kinds("1.3"), ["first", "fixup"], "{shown}");
    for id in ["1.1", "1.2", "1.4", "1.5"] {
        assert_eq!(p.kinds(id), ["first"], "{id}: {shown}");
    }
    for id in ["1.1", "1.2", "1.3", "1.4", "1.5"] {
        assert_eq!(p.merges_of(id), 1, "{id}: {shown}");
    }
    assert!(
        scratch.path().join("fixup-saw-output").exists(),
        "the fix-up's prompt lacked the failing output\n{shown}"
    );
    assert!(
        p.read(".ralph/logs/1.3/validation-1.log")
            .contains("story 1.3 broke the build on"),
        "{shown}"
    );
    assert!(
        records
            .iter()
            .any(|r| r["ev"] == "validate_end" && r["verdict"] == "failed"),
        "{shown}"
    );
    // (4) No job, relay ref or worktree left.
    assert_nothing_left(&c, &p, &shown);
}

/// A coordinator killed while a node validates: the next run's start stops
/// that job (no one waits for its verdict), validates again, and lands.
#[test]
fn a_crashed_runs_validation_job_is_stopped_at_the_next_start() {
    let Some((_one, scratch, bin, c)) = cluster() else {
        return;
    };
    let s = scratch.path().display().to_string();
    // The first validation notes its PID and holds for ever; the next
    // waits (bounded) for it to be gone, notes if it was not, and passes.
    let script = r#"#!/bin/bash
if [ ! -e 'S/first' ]; then
  echo $$ > 'S/first'
  while true; do sleep 0.1; done
fi
for _ in $(seq 600); do kill -0 "$(cat 'S/first')" 2>/dev/null || break; sleep 0.1; done
kill -0 "$(cat 'S/first')" 2>/dev/null && echo "the crashed run's validation still ran" >> 'S/overlap'
echo "$(git rev-parse 'HEAD^{tree}')" >> 'S/passed'
"#;
    let p = on_ray(
        &c,
        "1.1 | A\n",
        scratch.path(),
        bin.path(),
        &script.replace("'S/", &format!("'{s}/")),
    );
    p.agent("commit_file \"src/$ID.txt\"\ndone_\n");
    std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
    let start = git(&p.root, &["rev-parse", "main"]).trim().to_string();
    let mut first = c
        .ralph(&p, &["run"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let first_pid = || -> Option<i32> {
        std::fs::read_to_string(scratch.path().join("first"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    wait_until("a node to validate", Duration::from_secs(180), || {
        first_pid().is_some()
    });
    first.kill().unwrap();
    first.wait().unwrap();
    let pid = first_pid().unwrap();
    assert!(alive(pid), "the validation runs on without its coordinator");
    let second = c
        .ralph(&p, &["run"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(
        "the crashed run's validation to be stopped",
        Duration::from_secs(180),
        || !alive(pid),
    );
    let r = ended(second);
    let shown = format!("{r:?}\n{}", p.read("ralph.log"));
    assert_eq!(r.code, 0, "{shown}");
    assert_eq!(p.completed(), ["1.1"], "{shown}");
    // Stopped at the start: gone before the run's own validation was done.
    assert!(!scratch.path().join("overlap").exists(), "{shown}");
    assert!(
        shown.contains("(a validation of story 1.1) stopped at the start"),
        "{shown}"
    );
    let passed: BTreeSet<String> = std::fs::read_to_string(scratch.path().join("passed"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    assert_every_tip_in(&p, &start, &passed);
    assert_eq!(p.merges_of("1.1"), 1, "{shown}");
    assert_nothing_left(&c, &p, &shown);
}

/// BENCHMARKS.md's figure (issue 34: "two nodes land a validation-bound
/// backlog in ≤ 0.6× the time of one"): 12 independent stories, an
/// instant agent, a required validation of 4 s (`sleep 4`), chains of 4
/// (`landing.speculate`), `-j 4`, validations as jobs; one node of two
/// slots against two nodes of two slots, `RALPH_BENCH_N` runs each
/// (default 3), alternated. `RALPH_BENCH_STORIES`, `RALPH_BENCH_SPECULATE`
/// `RALPH_BENCH_J` and `RALPH_BENCH_VALIDATION_SECS` change the backlog,
/// the chain, `-j` and the validation's length;
/// `RALPH_BENCH_LOGS=DIR` keeps each run's ralph.log and records there. Not a test of speed (nothing is asserted on time): run it by
/// hand with `cargo test --test it ray::validation::figures -- --ignored
/// --nocapture`.
#[test]
#[ignore]
fn figures() {
    let Some((_one, scratch, bin, c)) = cluster() else {
        return;
    };
    let var = |name: &str, default: usize| -> usize {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let n = var("RALPH_BENCH_N", 3);
    let (stories, speculate) = (
        var("RALPH_BENCH_STORIES", 12),
        var("RALPH_BENCH_SPECULATE", 4),
    );
    let jobs = var("RALPH_BENCH_J", 4).to_string();
    let suite = var("RALPH_BENCH_VALIDATION_SECS", 4);
    let mut queue = String::from("# [batch:1]\n");
    for i in 1..=stories {
        queue.push_str(&format!("1.{i} | s{i}\n"));
    }
    let run = |resources: &str| -> f64 {
        let p = project_with(
            &c,
            &queue,
            "commit_file \"src/$ID.txt\"\ndone_\n",
            RALPH,
            resources,
        );
        let cfg = p.read(".ralph/config.json");
        let mut v: serde_json::Value = serde_json::from_str(&cfg).unwrap();
        v["validation"] = serde_json::json!({ "where": "executor", "commands": [
            { "name": "suite", "cmd": format!("sleep {suite}"), "required": true } ] });
        v["landing"] = serde_json::json!({ "speculate": speculate });
        p.write(".ralph/config.json", &v.to_string());
        p.commit_all("validated on the cluster");
        std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
        let t = std::time::Instant::now();
        let r = run_to_end(&p, c.ralph(&p, &["run", "-j", &jobs]));
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(r.code, 0, "{r:?}\n{}", p.read("ralph.log"));
        assert_eq!(p.completed().len(), stories);
        // `RALPH_BENCH_LOGS=DIR` keeps each run's ralph.log and records.
        if let Some(dir) = std::env::var_os("RALPH_BENCH_LOGS") {
            let dir = std::path::PathBuf::from(dir).join(format!("{resources:?}-{secs:.0}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::copy(p.root.join("ralph.log"), dir.join("ralph.log")).unwrap();
            let records: Vec<String> = run_records(&p).iter().map(|r| r.to_string()).collect();
            std::fs::write(dir.join("records.jsonl"), records.join("\n")).unwrap();
        }
        secs
    };
    let _ = scratch;
    let (mut one, mut two) = (Vec::new(), Vec::new());
    for _ in 0..n {
        one.push(run(r#"{ "ralph_slot": 1, "node_head": 0.01 }"#));
        two.push(run(r#"{ "ralph_slot": 1 }"#));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (m1, m2) = (median(&mut one), median(&mut two));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "figures: {stories} stories, instant agent, validation {suite} s as Ray jobs, \
         landing.speculate {speculate}, -j {jobs}\n\
         ray, 1 node x 2 slots: median {m1:.1} s, runs {one:.1?}\n\
         ray, 2 nodes x 2 slots: median {m2:.1} s, runs {two:.1?}\n\
         two nodes / one node: {:.2}\n\
         load average: {load}",
        m2 / m1
    );
}

/// Ctrl-C while a node validates: the run stops the validation's job (its
/// command with it), ends with 130, charges the story nothing, and leaves
/// no relay ref.
#[test]
fn ctrl_c_stops_a_validation_job() {
    let Some((_one, scratch, bin, c)) = cluster() else {
        return;
    };
    let s = scratch.path().display().to_string();
    // Stopped, it fails at once, as a test suite cut short does: a verdict
    // the stop caused, which must not count against the story.
    let script = r#"#!/bin/bash
trap 'exit 1' TERM INT HUP
echo "${RALPH_NODE:-coordinator}" > 'S/node'
echo $$ > 'S/validating'
while true; do sleep 0.1; done
"#;
    let p = on_ray(
        &c,
        "1.1 | A\n",
        scratch.path(),
        bin.path(),
        &script.replace("'S/", &format!("'{s}/")),
    );
    p.agent("commit_file \"src/$ID.txt\"\ndone_\n");
    std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
    let mut run = c
        .ralph(&p, &["run"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = || -> Option<i32> {
        std::fs::read_to_string(scratch.path().join("validating"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    wait_until("a node to validate", Duration::from_secs(180), || {
        pid().is_some()
    });
    let pid = pid().unwrap();
    assert!(alive(pid));
    let node = std::fs::read_to_string(scratch.path().join("node")).unwrap();
    assert!(["head\n", "w2\n"].contains(&node.as_str()), "{node}");
    std::process::Command::new("kill")
        .args(["-INT", &run.id().to_string()])
        .status()
        .unwrap();
    let limit = std::time::Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = run.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < limit, "ralph did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    let shown = p.read("ralph.log");
    assert_eq!(status.code(), Some(130), "{shown}");
    wait_until(
        "the validation command to be gone",
        Duration::from_secs(60),
        || !alive(pid),
    );
    let jobs = c.jobs();
    assert!(
        jobs.iter()
            .filter(|j| j["metadata"]["ralph_validation"].is_string())
            .all(|j| j["status"] == "STOPPED"),
        "{jobs:?}\n{shown}"
    );
    assert_eq!(p.story("1.1")["attempts"], 0, "{shown}");
    assert_eq!(p.merges_of("1.1"), 0, "{shown}");
    assert_eq!(relay_refs(&c), Vec::<String>::new(), "{shown}");
}
