//! What starts next (issues 11 and 15): retries one at a time beside first
//! attempts, a job count memory can hold, frontmatter priority among equal
//! stories, and stories that declare the same file kept apart.
//!
//! Agents write start and end markers (`S <id> <attempt>`, `E <id>
//! <attempt>`) to one file under `flock`; the tests assert on the order of
//! the markers, never on time.

use std::fs;
use std::process::Stdio;
use std::time::Duration;

use crate::harness::*;

/// One parsed marker: start or end, story, attempt.
#[derive(Debug, Clone, PartialEq)]
struct Marker {
    start: bool,
    id: String,
    attempt: u32,
}

fn markers(p: &Project) -> Vec<Marker> {
    fs::read_to_string(p.scratch.join("markers"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Marker {
                start: f[0] == "S",
                id: f[1].to_string(),
                attempt: f[2].parse().unwrap(),
            }
        })
        .collect()
}

/// For each marker, the attempts open right after it (started, not ended).
fn open_after_each(ms: &[Marker]) -> Vec<Vec<Marker>> {
    let mut open: Vec<Marker> = Vec::new();
    let mut out = Vec::new();
    for m in ms {
        if m.start {
            open.push(m.clone());
        } else {
            open.retain(|o| !(o.id == m.id && o.attempt == m.attempt));
        }
        out.push(open.clone());
    }
    out
}

/// A spec with frontmatter `extra` lines and a Ralph v2 "Files to
/// Create/Modify" section listing `files`.
fn spec(p: &Project, id: &str, extra: &str, files: &[&str]) {
    let epic = id.split('.').next().unwrap();
    let mut body =
        format!("---\nid: \"{id}\"\nstatus: pending\n{extra}---\n\n# Story {id}\n\nDo it.\n");
    if !files.is_empty() {
        body.push_str("\n## Files to Create/Modify\n");
        for f in files {
            body.push_str(&format!("- `{f}` — what changes (modify)\n"));
        }
        body.push_str("\n## Test Definition\n- `tests/not-a-target.sh`\n");
    }
    p.write(&format!("specs/epic-{epic}/story-{id}-spec.md"), &body);
}

#[test]
fn retries_run_one_at_a_time_while_first_attempts_fill_the_slots() {
    // The memory check is off: this test needs four agents at once
    // whatever the machine.
    let p = Project::with_backlog(
        SIX,
        r#"{ "loop": { "max_retries": 3 }, "parallel": { "agent_memory_mb": 0 } }"#,
    );
    p.commit_all("backlog");
    // First attempts fail (for a reason of their own: one shared cause
    // would trip the circuit breaker); the first four meet first, so first
    // attempts demonstrably overlap. A retry holds until every first
    // attempt has ended: retries started beside each other would all be
    // open at once then.
    p.agent(&format!(
        r#"{MARKERS}
mark S
if [ "$N" = 1 ]; then
  case "$ID" in 1.[1-4]) touch "$SCRATCH/met-$ID"; for _ in $(seq 1 400); do [ "$(ls "$SCRATCH" | grep -c '^met-')" -ge 4 ] && break; sleep 0.05; done ;; esac
  mark E
  result "<ralph>FAIL $ID: story $ID is not there yet</ralph>"
  exit 0
fi
wait_markers '^E .* 1$' 6
commit_file "src/$ID.txt"
mark E
done_
"#
    ));
    let r = p.ralph(&["run", "--parallel", "-j", "4"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed().len(), 6, "{r:?}");
    let ms = markers(&p);
    assert_eq!(ms.len(), 24, "six stories, two attempts each: {ms:?}");
    let open = open_after_each(&ms);
    let retries = |o: &Vec<Marker>| o.iter().filter(|m| m.attempt > 1).count();
    let firsts = |o: &Vec<Marker>| o.iter().filter(|m| m.attempt == 1).count();
    for (m, o) in ms.iter().zip(&open) {
        assert!(retries(o) <= 1, "two retries at once after {m:?}: {ms:?}");
    }
    assert!(
        open.iter().any(|o| firsts(o) >= 4),
        "first attempts overlap: {ms:?}"
    );
    assert!(
        open.iter().any(|o| retries(o) == 1 && firsts(o) >= 1),
        "first attempts ran beside a retry: {ms:?}"
    );
    assert_eq!(
        fs::read_to_string(p.scratch.join("waits")).unwrap_or_default(),
        "",
        "no agent had to give up waiting"
    );
}

#[test]
fn more_memory_per_agent_than_the_machine_has_runs_one_agent_at_a_time() {
    let queue = "# [batch:1]\n1.1 | A\n1.2 | B\n1.3 | C\n1.4 | D\n";
    // ~95 TB per agent: more than any machine this runs on.
    let p = Project::with_backlog(queue, r#"{ "parallel": { "agent_memory_mb": 100000000 } }"#);
    p.commit_all("backlog");
    // The first agent holds until the test has looked at `status --json`.
    p.agent(&format!(
        r#"{MARKERS}
mark S
if [ "$ID" = 1.1 ]; then
  for _ in $(seq 1 1200); do [ -f "$SCRATCH/release" ] && break; sleep 0.05; done
fi
commit_file "src/$ID.txt"
mark E
done_
"#
    ));
    let run = p
        .command(&["run", "--parallel", "-j", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ralph starts");
    wait_until("the first agent", Duration::from_secs(60), || {
        !markers(&p).is_empty()
    });
    let status = p.ralph(&["status", "--json"]);
    // Let the run go on whatever the status said, then judge both.
    fs::write(p.scratch.join("release"), "").unwrap();
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(status.code, 0, "{status:?}");
    let v: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(v["run_in_progress"], true, "{v}");
    assert_eq!(v["jobs"]["asked"], 4, "{v}");
    assert_eq!(v["jobs"]["now"], 1, "{v}");
    assert_eq!(v["jobs"]["fewer"][0]["reason"], "memory", "{v}");
    assert_eq!(v["jobs"]["fewer"][0]["per_agent_mb"], 100_000_000u64, "{v}");
    assert!(
        stderr.contains("per agent (parallel.agent_memory_mb): at most 1 job of 4"),
        "{stderr}"
    );

    assert_eq!(p.completed().len(), 4);
    let ms = markers(&p);
    assert_eq!(ms.len(), 8, "{ms:?}");
    for (m, o) in ms.iter().zip(open_after_each(&ms)) {
        assert!(o.len() <= 1, "two agents at once after {m:?}: {ms:?}");
    }
    // Once the run is over, no job count is left to show.
    let v: serde_json::Value =
        serde_json::from_str(&p.ralph(&["status", "--json"]).stdout).unwrap();
    assert_eq!(v["jobs"], serde_json::Value::Null, "{v}");
}

/// IDs of the `start story <id> attempt <n> in slot <s>` lines of
/// ralph.log (the dispatch decisions), in order.
fn starts_in_log(p: &Project) -> Vec<String> {
    p.read("ralph.log")
        .lines()
        .filter(|l| l.contains(" in slot "))
        .filter_map(|l| l.split_once("start story ").map(|(_, r)| r))
        .filter_map(|r| r.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
fn a_high_priority_story_starts_in_the_first_wave_and_sequential_keeps_file_order() {
    let queue = "# [batch:1]\n1.1 | A\n1.2 | B\n1.3 | C\n1.4 | D\n";
    let backlog = |p: &Project| {
        for (id, prio) in [
            ("1.1", "low"),
            ("1.2", "low"),
            ("1.3", "high"),
            ("1.4", "low"),
        ] {
            spec(p, id, &format!("priority: {prio}\n"), &[]);
        }
        p.commit_all("backlog");
        p.agent(r#"commit_file "src/$ID.txt"; done_"#);
    };
    let p = Project::with_backlog(queue, r#"{ "parallel": { "agent_memory_mb": 0 } }"#);
    backlog(&p);
    let r = p.ralph(&["run", "--parallel", "-j", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    let starts = starts_in_log(&p);
    assert_eq!(starts.len(), 4, "{starts:?}");
    // The first wave is the run's first dispatch: both start before either
    // ends, and the high one is in it (ties go to file order after that).
    assert_eq!(starts[..2], ["1.3", "1.1"], "{starts:?}");

    let p = Project::with_backlog(queue, "{}");
    backlog(&p);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(starts_in_log(&p), ["1.1", "1.2", "1.3", "1.4"]);
    let merged: Vec<String> = p
        .main_subjects()
        .into_iter()
        .filter(|s| s.starts_with("merge: story "))
        .collect();
    assert_eq!(
        merged,
        [
            "merge: story 1.1",
            "merge: story 1.2",
            "merge: story 1.3",
            "merge: story 1.4"
        ]
    );
}

#[test]
fn stories_declaring_the_same_file_do_not_run_together_while_other_work_is_ready() {
    let p = Project::with_backlog(SIX, r#"{ "parallel": { "agent_memory_mb": 0 } }"#);
    // 1.1 and 1.2 both extend FEATURES.md (Ralph v2's section, with
    // annotations); the others touch files of their own.
    spec(&p, "1.1", "", &["FEATURES.md", "src/a.rs"]);
    spec(&p, "1.2", "", &["./FEATURES.md"]);
    for id in ["1.3", "1.4", "1.5", "1.6"] {
        spec(&p, id, "", &[&format!("src/{id}.rs")]);
    }
    // 1.1 runs until every other independent story has started, so the
    // slot beside it always has other work to take.
    run_two_on_features_md(&p);
    let ms = markers(&p);
    let start_of = |id: &str| {
        ms.iter()
            .position(|m| m.start && m.id == id)
            .unwrap_or_else(|| panic!("{id} never started: {ms:?}"))
    };
    for other in ["1.3", "1.4", "1.5", "1.6"] {
        assert!(
            start_of(other) < start_of("1.2"),
            "1.2 started beside 1.1 while {other} was ready: {ms:?}"
        );
    }
    assert_eq!(
        fs::read_to_string(p.scratch.join("waits")).unwrap_or_default(),
        ""
    );
    let features = p.file_on_main("FEATURES.md").unwrap();
    assert!(
        features.contains("feature 1.1") && features.contains("feature 1.2"),
        "{features}"
    );
}

/// Two stories declaring one file, two slots, nothing else to run: with
/// `parallel.conflicts: wait` (the default) the second starts only once the
/// first ended, and lands without a conflict; with `risk` it starts beside
/// it (before issue 34 it always did: the slot only it could fill was its),
/// which the `risk` round shows: that is what the `wait` round fails on.
#[test]
fn a_story_declaring_a_file_in_flight_work_declares_waits_with_a_slot_free() {
    for (mode, apart) in [("wait", true), ("risk", false)] {
        let p = Project::with_backlog(
            "# [batch:1]\n1.1 | A\n1.2 | B\n",
            &format!(r#"{{ "parallel": {{ "agent_memory_mb": 0, "conflicts": "{mode}" }} }}"#),
        );
        spec(&p, "1.1", "", &["FEATURES.md"]);
        spec(&p, "1.2", "", &["FEATURES.md"]);
        p.write("FEATURES.md", "# Features\n");
        p.commit_all("backlog");
        p.agent(&format!(
            r#"{MARKERS}
mark S
echo "- feature $ID" >> FEATURES.md; git add FEATURES.md; git commit -qm "feat: $ID"
mark E
done_
"#
        ));
        let r = p.ralph(&["run", "--parallel", "-j", "2"]);
        assert_eq!(r.code, 0, "{mode}: {r:?}");
        assert_eq!(p.completed().len(), 2, "{mode}: {r:?}");
        let ms = markers(&p);
        let together = open_after_each(&ms).iter().any(|open| open.len() > 1);
        let first_runs = ms.iter().filter(|m| m.start).count();
        if apart {
            assert!(!together, "{mode}: the two ran side by side: {ms:?}");
            assert_eq!(first_runs, 2, "{mode}: one run each, no fix-up: {ms:?}");
        } else {
            // Both start from one tip: side by side, or the second to land
            // conflicts and is fixed up.
            assert!(together || first_runs > 2, "{mode}: {ms:?}");
        }
    }
}

/// `# [batch:1]` stories: 1.2 depends on 1.1, 1.3 on 1.2, 1.4 on nothing.
fn chain_project(config: &str) -> Project {
    let p = Project::with_backlog(
        "# [batch:1]\n1.1 | One\n1.2 | Two\n1.3 | Three\n1.4 | Apart\n",
        config,
    );
    for (id, dep) in [("1.2", "1.1"), ("1.3", "1.2")] {
        p.write(
            &format!("specs/epic-1/story-{id}-spec.md"),
            &format!("---\nid: \"{id}\"\ntitle: \"S{id}\"\nstatus: pending\ndepends_on: [\"{dep}\"]\n---\n\n# Story {id}\n"),
        );
    }
    p.commit_all("backlog");
    p.agent(
        r#"
echo "$ID" >> "$SCRATCH/calls"
if grep -qx "$ID" "$SCRATCH/failing" 2>/dev/null; then
  result "no <ralph>FAIL $ID: broken</ralph>"; exit 0
fi
commit_file "src/$ID.txt"; done_
"#,
    );
    p
}

/// The `merge: story` subjects on main, in order.
fn merged(p: &Project) -> Vec<String> {
    p.main_subjects()
        .into_iter()
        .filter_map(|s| s.strip_prefix("merge: story ").map(str::to_string))
        .collect()
}

/// Issue 21, the DAG is law: `run -s 1.3` with 1.1 and 1.2 pending runs
/// them first, in DAG order, says so, and lands 1.3 only after them; the
/// story nobody waits for is left alone. With three jobs, so nothing but
/// the DAG keeps them apart.
#[test]
fn run_s_runs_the_missing_dependencies_first_and_says_so() {
    let p = chain_project(FAST_CONFIG);
    // The dry run's plan is the same selection.
    let plan = p.ralph(&["run", "-s", "1.3", "-d"]);
    assert_eq!(plan.code, 0, "{plan:?}");
    assert!(plan.stdout.contains("plan (3 stories"), "{plan:?}");
    assert!(!plan.stdout.contains("1.4"), "{plan:?}");
    let r = p.ralph(&["run", "-s", "1.3", "--parallel", "-j", "3"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr
            .contains("[deps] 1.3 waits for 1.1, 1.2, not landed yet: they run first"),
        "{r:?}"
    );
    assert_eq!(merged(&p), ["1.1", "1.2", "1.3"]);
    assert_eq!(p.scratch_text("calls"), "1.1\n1.2\n1.3\n");
    assert_eq!(p.completed(), ["1.1", "1.2", "1.3"]);
    assert!(p.story("1.4").is_null(), "1.4 was not selected");
    // Its dependencies landed: the next `-s` runs the story alone, silently.
    let r = p.ralph(&["run", "-s", "1.4"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stderr.contains("[deps]"), "{r:?}");
}

/// A dependency that fails for good blocks the story asked for: it never
/// runs, its attempts are untouched, the run needs a person (exit 1). A
/// later `-s` of it says why and runs nothing.
#[test]
fn run_s_never_runs_a_story_whose_dependency_failed() {
    let p = chain_project(FAST_CONFIG);
    fs::write(p.scratch.join("failing"), "1.1\n").unwrap();
    let r = p.ralph(&["run", "-s", "1.2"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(p.scratch_text("calls"), "1.1\n1.1\n", "1.2 never ran");
    assert_eq!(p.story("1.1")["status"], "failed");
    assert!(
        p.story("1.2")["attempts"].as_u64().unwrap_or(0) == 0
            && p.story("1.2")["history"].is_null(),
        "{}",
        p.story("1.2")
    );
    assert!(merged(&p).is_empty());
    let r = p.ralph(&["run", "-s", "1.3"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("[deps] 1.1 failed for good, so 1.3 cannot run (`ralph run -s 1.1`"),
        "{r:?}"
    );
    assert_eq!(p.scratch_text("calls"), "1.1\n1.1\n", "nothing ran");
}
