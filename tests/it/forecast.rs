//! Issue 25, items 6 and 7: a wider prediction of what stories touch (paths
//! named anywhere in a spec) keeps likely conflicts apart; forecasts of a
//! run from the project's own run records.
//!
//! Order is read from the run records (`.ralph/runs/*.jsonl`) and from the
//! agents' markers, never from time.

use std::fs;

use crate::harness::*;

/// `(story, start)` for every attempt start and end, in record order.
fn attempt_events(recs: &[serde_json::Value]) -> Vec<(String, bool)> {
    recs.iter()
        .filter_map(|r| {
            let start = match r["ev"].as_str()? {
                "attempt_start" => true,
                "attempt_end" => false,
                _ => return None,
            };
            Some((r["story"].as_str()?.to_string(), start))
        })
        .collect()
}

/// Runs SIX with 1.1 and 1.2 naming `FEATURES.md` in their specs' prose
/// only (no files section); 1.1 runs until every other independent story
/// has started. Returns the attempt events of the run's records.
fn prose_run(config: &str) -> Vec<(String, bool)> {
    let p = Project::with_backlog(SIX, config);
    for (id, words) in [
        ("1.1", "Add feature A to the list in `FEATURES.md`."),
        (
            "1.2",
            "List feature B in FEATURES.md's sibling docs/FEATURES.md too, and in `FEATURES.md`.",
        ),
    ] {
        p.write(
            &format!("specs/epic-1/story-{id}-spec.md"),
            &format!("---\nid: \"{id}\"\nstatus: pending\n---\n\n# Story {id}\n\n{words}\n"),
        );
    }
    run_two_on_features_md(&p);
    assert_eq!(p.scratch_text("waits"), "", "an agent gave up waiting");
    attempt_events(&run_records(&p))
}

/// True when 1.2 started while 1.1 ran and another story had not started
/// yet (so it was ready: the six are independent).
fn ran_beside_with_other_work_ready(evs: &[(String, bool)]) -> bool {
    let mut running: Vec<&str> = Vec::new();
    let mut started: Vec<&str> = Vec::new();
    for (id, start) in evs {
        if *start {
            if id == "1.2" && running.contains(&"1.1") && started.len() < 5 {
                return true;
            }
            running.push(id);
            if !started.contains(&id.as_str()) {
                started.push(id);
            }
        } else {
            running.retain(|r| r != id);
        }
    }
    false
}

#[test]
fn a_path_named_in_prose_keeps_two_stories_apart_while_other_work_is_ready() {
    let evs = prose_run(r#"{ "parallel": { "agent_memory_mb": 0 } }"#);
    assert!(
        !ran_beside_with_other_work_ready(&evs),
        "1.2 started beside 1.1 while other work was ready: {evs:?}"
    );
    // The check can fail: without the prediction, 1.2 takes the second
    // slot of the first wave, beside 1.1.
    let evs = prose_run(r#"{ "parallel": { "agent_memory_mb": 0, "predict_files": false } }"#);
    assert!(
        ran_beside_with_other_work_ready(&evs),
        "without the prediction 1.2 should start beside 1.1: {evs:?}"
    );
}

const FOUR: &str = "\
# [batch:1]
1.1 | A
1.2 | B
1.3 | C
1.4 | D
";

/// The first line of `out` that starts with `prefix`.
fn line_with<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find(|l| l.contains(prefix))
        .unwrap_or_else(|| panic!("no line with {prefix:?} in:\n{out}"))
}

#[test]
fn a_dry_run_after_earlier_runs_forecasts_from_their_attempts() {
    let p = Project::with_backlog(FOUR, r#"{ "parallel": { "agent_memory_mb": 0 } }"#);
    p.commit_all("backlog");
    // Each attempt reports $0.01 (the harness's `result`).
    p.agent("commit_file \"src/$ID.rs\"\ndone_\n");
    let d = p.ralph(&["run", "-d", "-j", "2"]);
    assert_eq!(d.code, 0, "{d:?}");
    assert!(
        line_with(&d.stdout, "Forecast").contains("no history"),
        "{d:?}"
    );
    for id in ["1.1", "1.2"] {
        let r = p.ralph(&["run", "-s", id]);
        assert_eq!(r.code, 0, "{r:?}");
    }
    let d = p.ralph(&["run", "-d", "-j", "2"]);
    assert_eq!(d.code, 0, "{d:?}");
    let f = line_with(&d.stdout, "Forecast");
    assert!(f.contains("Forecast for 2 stories at -j 2"), "{f}");
    assert!(f.contains("based on 2 past attempts"), "{f}");
    // Two stories like the two before, one attempt each at $0.01.
    assert!(f.contains("cost $0.02"), "{f}");
    assert!(f.contains("wall time"), "{f}");
    // A forecast is advice: the run goes on as ever.
    let r = p.ralph(&["run", "-j", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed().len(), 4, "{r:?}");
}

#[test]
fn status_shows_an_eta_while_a_run_with_history_is_under_way() {
    let p = Project::with_backlog(FOUR, r#"{ "parallel": { "agent_memory_mb": 0 } }"#);
    p.commit_all("backlog");
    // 1.2 to 1.4 wait (bounded) for the test's go-ahead once they start.
    p.agent(
        r#"
if [ "$ID" != 1.1 ]; then
  touch "$SCRATCH/started-$ID"
  for _ in $(seq 1 600); do [ -e "$SCRATCH/go" ] && break; sleep 0.05; done
fi
commit_file "src/$ID.rs"
done_
"#,
    );
    let r = p.ralph(&["run", "-s", "1.1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let s = p.ralph(&["status"]);
    assert!(!s.stdout.contains("ETA"), "no run under way: {s:?}");
    let mut run = p
        .command(&["run", "-j", "2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("ralph starts");
    wait_until(
        "an agent started",
        std::time::Duration::from_secs(60),
        || {
            fs::read_dir(&p.scratch)
                .map(|d| {
                    d.flatten()
                        .any(|e| e.file_name().to_string_lossy().starts_with("started-"))
                })
                .unwrap_or(false)
        },
    );
    let s = p.ralph(&["status"]);
    let json = p.ralph(&["status", "--json"]);
    fs::write(p.scratch.join("go"), "").unwrap();
    let status = run.wait().expect("ralph ends");
    assert!(status.success(), "{status:?}");
    assert!(
        line_with(&s.stdout, "ETA: ~").contains("past attempts"),
        "{s:?}"
    );
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("status --json");
    assert!(v["eta_secs"].as_f64().is_some(), "{v}");
    assert_eq!(p.completed().len(), 4);
}
