//! Steering a running run (issue 24): `ralph pause`, `resume`, `drain`,
//! `stop`, `hold`, `release`, `note`, `jobs` and `land` against a real run
//! whose fake agents block on files the test creates. Every check is on
//! artefacts: the run's records, the agents' start/end lines, state.json,
//! live processes. No sleeps: a steering reply comes after the run handled
//! every event before it, which is what makes "nothing started" checkable.

use std::fs;
use std::process::Child;
use std::time::Duration;

use crate::crash::{spawn, wait_exit};
use crate::harness::*;

/// Each attempt writes `start ID N` and `end ID N` to `events`, its prompt
/// to `prompt-ID-N`, its PID and a child's to `pid-ID-N`/`child-ID-N`, then
/// waits for `go-ID` (or `go-all`) before committing and saying DONE.
const SLOW_AGENT: &str = r#"
cp "$PROMPT_FILE" "$SCRATCH/prompt-$ID-$N"
sleep 1000 &
CHILD=$!
echo "$CHILD" > "$SCRATCH/child-$ID-$N"
echo "$$" > "$SCRATCH/pid-$ID-$N"
echo "start $ID $N" >> "$SCRATCH/events"
say "working on $ID"
while [ ! -e "$SCRATCH/go-$ID" ] && [ ! -e "$SCRATCH/go-all" ]; do sleep 0.02; done
kill "$CHILD"
commit_file "src/$ID.txt"
echo "end $ID $N" >> "$SCRATCH/events"
done_
"#;

pub(crate) const LIMIT: Duration = Duration::from_secs(60);

/// Stories `(id, depends_on)` in one batch, the slow agent, committed.
pub(crate) fn project(stories: &[(&str, &[&str])], config: &str) -> Project {
    let queue: String = std::iter::once("# [batch:1]\n".to_string())
        .chain(stories.iter().map(|(id, _)| format!("{id} | Story {id}\n")))
        .collect();
    let p = Project::with_backlog(&queue, config);
    for (id, deps) in stories {
        let deps: Vec<String> = deps.iter().map(|d| format!("\"{d}\"")).collect();
        p.write(
            &format!("specs/epic-1/story-{id}-spec.md"),
            &format!(
                "---\nid: \"{id}\"\ntitle: \"Story {id}\"\nstatus: pending\ndepends_on: [{}]\n---\n\n# Story {id}\n",
                deps.join(", ")
            ),
        );
    }
    p.commit_all("backlog");
    p.agent(SLOW_AGENT);
    p
}

/// Story `id`'s status in state.json, once there is one.
fn status_of(p: &Project, id: &str) -> String {
    serde_json::from_str::<serde_json::Value>(&p.read(".ralph/state.json"))
        .ok()
        .and_then(|v| v["stories"][id]["status"].as_str().map(str::to_string))
        .unwrap_or_default()
}

pub(crate) fn go(p: &Project, id: &str) {
    fs::write(p.scratch.join(format!("go-{id}")), "").unwrap();
}

fn events(p: &Project) -> Vec<String> {
    p.scratch_text("events")
        .lines()
        .map(str::to_string)
        .collect()
}

pub(crate) fn started(p: &Project, id: &str) -> usize {
    events(p)
        .iter()
        .filter(|l| l.starts_with(&format!("start {id} ")))
        .count()
}

pub(crate) fn wait_started(p: &Project, id: &str, n: usize) {
    wait_until(&format!("{id} started {n} times"), LIMIT, || {
        started(p, id) >= n
    });
}

/// A steering command; its output.
fn steer(p: &Project, args: &[&str]) -> RunResult {
    p.ralph(args)
}

pub(crate) fn attempt_starts(p: &Project) -> Vec<String> {
    run_records(p)
        .iter()
        .filter(|r| r["ev"] == "attempt_start")
        .map(|r| r["story"].as_str().unwrap().to_string())
        .collect()
}

pub(crate) fn socket(p: &Project) -> std::path::PathBuf {
    p.root.join(".ralph/run.sock")
}

fn wait_socket(p: &Project) {
    wait_until("the run's steering socket", LIMIT, || socket(p).exists());
}

fn finish(p: &Project, mut run: Child) -> i32 {
    go(p, "all");
    let code = wait_exit(&mut run, "the run ends").code().unwrap_or(-1);
    assert!(!socket(p).exists(), "the socket goes with the run");
    code
}

pub(crate) fn stderr_of(p: &Project) -> String {
    p.scratch_text("ralph.stderr")
}

#[test]
fn while_paused_no_attempt_starts_and_resume_goes_on() {
    let p = project(&[("1.1", &[]), ("1.2", &[]), ("1.3", &[])], FAST_CONFIG);
    let run = spawn(&p, &["run", "-j", "2"]);
    wait_started(&p, "1.1", 1);
    wait_started(&p, "1.2", 1);
    let r = steer(&p, &["pause"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.starts_with("paused: no new attempt starts"),
        "{r:?}"
    );
    assert_eq!(p.state()["paused"], true, "kept across a crash");
    go(&p, "1.1");
    wait_until("1.1 landed", LIMIT, || {
        p.completed().contains(&"1.1".into())
    });
    // Answered after the run handled 1.1's end and landing: had the pause
    // not held, 1.3 would have started in that step.
    let r = steer(&p, &["pause"]);
    assert_eq!(r.stdout.trim(), "already paused", "{r:?}");
    assert_eq!(attempt_starts(&p), ["1.1", "1.2"]);
    assert_eq!(started(&p, "1.3"), 0);
    let r = steer(&p, &["resume"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("resumed"), "{r:?}");
    wait_started(&p, "1.3", 1);
    assert_eq!(finish(&p, run), 0, "{}", stderr_of(&p));
    assert_eq!(p.completed(), ["1.1", "1.2", "1.3"]);
    let steered: Vec<String> = run_records(&p)
        .iter()
        .filter(|r| r["ev"] == "steer")
        .map(|r| r["cmd"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(steered, ["pause", "pause", "resume"]);
    assert!(
        stderr_of(&p).contains("[steer] paused"),
        "{}",
        stderr_of(&p)
    );
    assert!(p.state().get("paused").is_none(), "resumed: nothing kept");
}

#[test]
fn a_drained_run_finishes_what_runs_and_ends_with_exit_0() {
    let p = project(&[("1.1", &[]), ("1.2", &[]), ("1.3", &[])], FAST_CONFIG);
    let mut run = spawn(&p, &["run", "-j", "2"]);
    wait_started(&p, "1.1", 1);
    wait_started(&p, "1.2", 1);
    let r = steer(&p, &["drain"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("the run ends once 2 running"), "{r:?}");
    go(&p, "all");
    let code = wait_exit(&mut run, "the drained run ends").code();
    assert_eq!(code, Some(0), "{}", stderr_of(&p));
    assert_eq!(p.completed(), ["1.1", "1.2"]);
    assert_eq!(started(&p, "1.3"), 0);
    assert!(!socket(&p).exists());
    assert!(p.state().get("paused").is_none(), "a drain is not a pause");
}

#[test]
fn a_stopped_attempt_dies_with_its_tree_costs_no_retry_and_is_held() {
    let p = project(
        &[("1.1", &[]), ("1.2", &[]), ("1.3", &["1.1"])],
        FAST_CONFIG,
    );
    let run = spawn(&p, &["run", "-j", "2"]);
    wait_started(&p, "1.1", 1);
    wait_started(&p, "1.2", 1);
    let pid = pids_in(&p.scratch.join("pid-1.1-1"))[0];
    let child = pids_in(&p.scratch.join("child-1.1-1"))[0];
    let r = steer(&p, &["stop", "1.1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("stopping 1.1"), "{r:?}");
    wait_until("the agent and its child are gone", LIMIT, || {
        !alive(pid) && !alive(child)
    });
    wait_until("the stop is recorded", LIMIT, || {
        p.story("1.1")["history"]
            .as_array()
            .is_some_and(|h| h.iter().any(|a| a["outcome"] == "stopped"))
    });
    assert_eq!(p.story("1.1")["attempts"], 0, "no retry charged");
    assert_eq!(p.state()["held"], serde_json::json!(["1.1"]));
    // 1.2 lands; held 1.1 and its dependent 1.3 wait, and so does the run.
    go(&p, "1.2");
    wait_until("1.2 landed", LIMIT, || {
        p.completed().contains(&"1.2".into())
    });
    let r = steer(&p, &["jobs", "2"]);
    assert_eq!(r.code, 0, "the run still answers: {r:?}");
    assert_eq!(started(&p, "1.1"), 1);
    assert_eq!(started(&p, "1.3"), 0);
    let r = steer(&p, &["release", "1.1"]);
    assert_eq!(r.code, 0, "{r:?}");
    wait_started(&p, "1.1", 2);
    assert_eq!(finish(&p, run), 0, "{}", stderr_of(&p));
    assert_eq!(p.completed(), ["1.1", "1.2", "1.3"]);
    let ends: Vec<String> = run_records(&p)
        .iter()
        .filter(|r| r["ev"] == "attempt_end" && r["story"] == "1.1")
        .map(|r| r["verdict"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ends, ["stopped", "done"]);
}

#[test]
fn a_held_story_and_its_dependents_wait_until_released() {
    let p = project(
        &[("1.1", &[]), ("1.2", &["1.1"]), ("1.3", &[])],
        FAST_CONFIG,
    );
    // Without a run: in the state, under the run lock.
    let r = steer(&p, &["hold", "1.1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("held 1.1"), "{r:?}");
    assert_eq!(p.state()["held"], serde_json::json!(["1.1"]));
    let run = spawn(&p, &["run", "-j", "2"]);
    wait_started(&p, "1.3", 1);
    // Held again from this run: the run waits for its release.
    let r = steer(&p, &["hold", "1.1"]);
    assert_eq!(r.stdout.trim(), "1.1 is already held", "{r:?}");
    assert_eq!(attempt_starts(&p), ["1.3"], "the held story did not start");
    go(&p, "1.3");
    wait_until("1.3 landed", LIMIT, || {
        p.completed().contains(&"1.3".into())
    });
    let r = steer(&p, &["jobs", "2"]);
    assert_eq!(r.code, 0, "the run waits: {r:?}");
    assert_eq!(attempt_starts(&p), ["1.3"]);
    let status = p.ralph(&["status"]);
    assert!(status.stdout.contains("Held: 1.1"), "{status:?}");
    assert!(!status.stdout.contains("Next: Story 1.1"), "{status:?}");
    let r = steer(&p, &["release", "1.1"]);
    assert_eq!(r.stdout.trim(), "released 1.1: it may start again", "{r:?}");
    assert_eq!(finish(&p, run), 0, "{}", stderr_of(&p));
    assert_eq!(p.completed(), ["1.1", "1.2", "1.3"]);
    let ev = events(&p);
    let pos = |l: &str| ev.iter().position(|e| e == l).unwrap();
    assert!(pos("end 1.1 1") < pos("start 1.2 1"), "{ev:?}");
}

/// `ralph stories` and `ralph graph` (every format) say which story is held,
/// so a person sees why it does not start; released, the mark is gone.
#[test]
fn stories_and_graph_mark_a_held_story() {
    let p = project(&[("1.1", &[]), ("1.2", &["1.1"])], FAST_CONFIG);
    let r = steer(&p, &["hold", "1.1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let shown = |args: &[&str]| {
        let r = p.ralph(args);
        assert_eq!(r.code, 0, "{args:?}: {r:?}");
        r.stdout
    };
    let stories = shown(&["stories"]);
    assert!(
        stories.contains("[pending] 1.1 | Story 1.1 (held)\n"),
        "{stories}"
    );
    assert!(stories.contains("[pending] 1.2 | Story 1.2\n"), "{stories}");
    let text = shown(&["graph"]);
    assert!(text.contains("[pending] 1.1 Story 1.1 (held)\n"), "{text}");
    assert!(
        text.contains("[pending] 1.2 Story 1.2  <- 1.1\n"),
        "only the held story is marked: {text}"
    );
    let dot = shown(&["graph", "--format", "dot"]);
    assert!(
        dot.contains(
            "\"1.1\" [label=\"1.1\\nStory 1.1\\n[pending] held\", style=\"filled,dashed\""
        ),
        "{dot}"
    );
    let mermaid = shown(&["graph", "--format", "mermaid"]);
    assert!(
        mermaid.contains("[\"1.1 Story 1.1 (pending, held)\"]"),
        "{mermaid}"
    );
    assert!(
        mermaid.contains("[\"1.2 Story 1.2 (pending)\"]"),
        "{mermaid}"
    );

    assert_eq!(steer(&p, &["release", "1.1"]).code, 0);
    for args in [
        &["stories"][..],
        &["graph"],
        &["graph", "--format", "dot"],
        &["graph", "--format", "mermaid"],
    ] {
        let out = shown(args);
        assert!(!out.contains("held"), "{args:?} after the release: {out}");
    }
}

#[test]
fn a_note_reaches_the_next_attempts_prompt_and_shows_in_status() {
    let p = project(&[("1.1", &[]), ("1.2", &[])], FAST_CONFIG);
    // Without a run, in the state.
    let r = steer(&p, &["note", "1.2", "first: keep the old API"]);
    assert_eq!(r.code, 0, "{r:?}");
    let run = spawn(&p, &["run", "-j", "1"]);
    wait_started(&p, "1.1", 1);
    let r = steer(&p, &["note", "1.2", "second: use the v2 client"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.starts_with("noted for 1.2's next attempt"),
        "{r:?}"
    );
    let status = p.ralph(&["status"]);
    assert!(
        status
            .stdout
            .contains("Note for 1.2: first: keep the old API second: use"),
        "{status:?}"
    );
    assert!(status.stdout.lines().all(|l| l.chars().count() <= 80));
    assert_eq!(finish(&p, run), 0, "{}", stderr_of(&p));
    let prompt = p.scratch_text("prompt-1.2-1");
    assert!(prompt.contains("first: keep the old API"), "{prompt}");
    assert!(prompt.contains("second: use the v2 client"), "{prompt}");
    assert!(!p.scratch_text("prompt-1.1-1").contains("v2 client"));
    assert!(
        p.state().get("user_notes").is_none(),
        "taken by its attempt"
    );
}

#[test]
fn after_jobs_1_at_most_one_agent_runs_at_a_time() {
    let stories: Vec<(String, &[&str])> = (1..=6).map(|i| (format!("1.{i}"), &[][..])).collect();
    let refs: Vec<(&str, &[&str])> = stories.iter().map(|(i, d)| (i.as_str(), *d)).collect();
    let p = project(&refs, FAST_CONFIG);
    let run = spawn(&p, &["run", "-j", "3"]);
    for id in ["1.1", "1.2", "1.3"] {
        wait_started(&p, id, 1);
    }
    let r = steer(&p, &["jobs", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("jobs: 3 → 1"), "{r:?}");
    assert_eq!(finish(&p, run), 0, "{}", stderr_of(&p));
    assert_eq!(p.completed().len(), 6);
    let stats = p.ralph(&["stats"]);
    assert_eq!(stats.code, 0, "{stats:?}");
    for line in stats.stdout.lines() {
        assert!(line.chars().count() <= 80, "wider than 80 columns: {line}");
    }
    // From the fourth start on, no agent's start overlaps another's run.
    let ev = events(&p);
    let mut running = 0i32;
    let mut starts = 0;
    for line in &ev {
        if line.starts_with("start ") {
            starts += 1;
            if starts > 3 {
                assert_eq!(running, 0, "two agents at once after `jobs 1`: {ev:?}");
            }
            running += 1;
        } else {
            running -= 1;
        }
    }
}

#[test]
fn run_only_commands_without_a_run_say_so_with_exit_2() {
    let p = project(&[("1.1", &[])], FAST_CONFIG);
    for args in [
        &["pause"][..],
        &["resume"],
        &["drain"],
        &["stop", "1.1"],
        &["jobs", "2"],
    ] {
        let r = p.ralph(args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains("no ralph run is running"), "{r:?}");
        assert!(r.stderr.contains("hint:"), "{r:?}");
    }
    let r = p.ralph(&["hold", "9.9"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no story 9.9"), "{r:?}");
    // A socket a killed run left behind is no run either.
    drop(std::os::unix::net::UnixListener::bind(socket(&p)).unwrap());
    let r = p.ralph(&["pause"]);
    assert_eq!(r.code, 2, "{r:?}");
    // ... and the next run replaces it.
    let mut run = spawn(&p, &["run"]);
    wait_started(&p, "1.1", 1);
    let r = steer(&p, &["pause"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = steer(&p, &["resume"]);
    assert_eq!(r.code, 0, "{r:?}");
    go(&p, "all");
    assert_eq!(wait_exit(&mut run, "the run").code(), Some(0));
}

#[test]
fn review_mode_waits_and_lands_what_ralph_land_approves_while_it_runs() {
    let p = project(
        &[("1.1", &[]), ("1.2", &["1.1"])],
        r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 }, "landing": { "mode": "review" } }"#,
    );
    go(&p, "all");
    let mut run = spawn(&p, &["run"]);
    wait_until("1.1 in review", LIMIT, || status_of(&p, "1.1") == "review");
    wait_socket(&p);
    let r = p.ralph(&["land", "1.1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("approved 1.1"), "{r:?}");
    wait_until("1.2 in review", LIMIT, || status_of(&p, "1.2") == "review");
    assert_eq!(p.merges_of("1.1"), 1);
    let r = p.ralph(&["reject", "1.2", "--note", "name it wc, not count"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("1.2 goes back to the queue"), "{r:?}");
    wait_until("1.2 in review again", LIMIT, || {
        started(&p, "1.2") == 2 && status_of(&p, "1.2") == "review"
    });
    assert!(p
        .scratch_text("prompt-1.2-2")
        .contains("name it wc, not count"));
    let r = p.ralph(&["land"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        wait_exit(&mut run, "the run").code(),
        Some(0),
        "{}",
        stderr_of(&p)
    );
    assert_eq!(p.completed(), ["1.1", "1.2"]);
}

/// `ralph` in the background with its stdout in `scratch/<out>`.
fn spawn_out(p: &Project, args: &[&str], out: &str) -> Child {
    let mut c = p.command(args);
    c.stdout(fs::File::create(p.scratch.join(out)).unwrap());
    c.spawn().expect("ralph starts")
}

#[test]
fn log_follow_shows_a_running_attempt_as_it_goes_and_ends_with_it() {
    let p = project(&[("1.1", &[])], FAST_CONFIG);
    let run = spawn(&p, &["run"]);
    wait_started(&p, "1.1", 1);
    let mut follow = spawn_out(&p, &["log", "-f", "1.1"], "follow.out");
    wait_until("the agent's words, followed", LIMIT, || {
        p.scratch_text("follow.out").contains("working on 1.1")
    });
    assert!(
        follow.try_wait().unwrap().is_none(),
        "it follows the running attempt"
    );
    assert!(!p.scratch_text("follow.out").contains("── result"));
    assert_eq!(finish(&p, run), 0, "{}", stderr_of(&p));
    assert_eq!(wait_exit(&mut follow, "the follower ends").code(), Some(0));
    let text = p.scratch_text("follow.out");
    assert!(text.contains("── result: ok"), "{text}");
    assert!(text.contains("DONE 1.1"), "{text}");
}

#[test]
fn status_watch_draws_again_until_stopped() {
    let p = project(&[("1.1", &[])], FAST_CONFIG);
    let run = spawn(&p, &["run"]);
    wait_started(&p, "1.1", 1);
    let mut watch = spawn_out(&p, &["status", "--watch"], "watch.out");
    wait_until("two frames", LIMIT, || {
        p.scratch_text("watch.out")
            .matches("Progress: 0 / 1")
            .count()
            >= 2
    });
    go(&p, "all");
    wait_until("a frame after the landing", LIMIT, || {
        p.scratch_text("watch.out").contains("Progress: 1 / 1")
    });
    assert!(watch.try_wait().unwrap().is_none());
    watch.kill().unwrap();
    watch.wait().unwrap();
    let mut run = run;
    assert_eq!(wait_exit(&mut run, "the run").code(), Some(0));
    let text = p.scratch_text("watch.out");
    assert!(text.contains("Run in progress: yes"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80));
}
