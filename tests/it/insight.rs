//! Seeing a run: run records (`.ralph/runs/`), `ralph stats`, the HTML
//! report opened in a real headless Chromium, `status --json` per story,
//! the RUN SUMMARY's figures and the notification hooks.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::crash::{kill_session, spawn};
use crate::harness::*;

const THREE: &str = "1.1 | First\n1.2 | Second\n1.3 | Third\n";

/// Every record of every run, oldest run first: `(run id, records)`.
fn runs(p: &Project) -> Vec<(String, Vec<Value>)> {
    let dir = p.root.join(".ralph/runs");
    // Run IDs sort by start time (`X` before `X-2`, a run in the same second).
    let mut ids: Vec<String> = fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.strip_suffix(".jsonl").map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids.into_iter()
        .map(|id| {
            let n = format!("{id}.jsonl");
            let text = fs::read_to_string(dir.join(&n)).unwrap();
            let recs = text
                .lines()
                .map(|l| {
                    serde_json::from_str(l).unwrap_or_else(|e| panic!("{n}: bad line {l:?}: {e}"))
                })
                .collect();
            (id, recs)
        })
        .collect()
}

fn events<'a>(recs: &'a [Value], ev: &str) -> Vec<&'a Value> {
    recs.iter().filter(|r| r["ev"] == ev).collect()
}

fn json(r: &RunResult) -> Value {
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {r:?}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// The agent of a scripted run: 1.2 fails its first attempt, everything
/// else succeeds; each attempt reports 132 tokens and $0.01.
const SCRIPTED: &str = r#"
if [ "$ID" = "1.2" ] && [ "$N" = "1" ]; then
  result "<ralph>FAIL 1.2: tests are red</ralph>"
  exit 0
fi
commit_file "src/$ID.txt"
done_
"#;

#[test]
fn stats_and_status_match_a_scripted_run_whose_costs_are_known() {
    let p = Project::with_backlog(THREE, FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(SCRIPTED);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    // This run's figures, lifetime on its own line.
    assert!(
        r.stdout
            .contains("RUN SUMMARY: 3/3 done, 0 failed, 0 blocked, 0 pending"),
        "{r:?}"
    );
    assert!(r.stdout.contains(" · 528 tokens · $0.04\n"), "{r:?}");
    assert!(
        r.stdout.contains("lifetime (all runs): 528 tokens · $0.04"),
        "{r:?}"
    );

    let all = runs(&p);
    assert_eq!(all.len(), 1);
    let recs = &all[0].1;
    assert_eq!(recs[0]["ev"], "run_start");
    assert_eq!(recs[0]["jobs"], 1);
    assert_eq!(recs[0]["agent"], "claude");
    assert_eq!(recs.last().unwrap()["ev"], "run_end");
    assert_eq!(recs.last().unwrap()["exit_code"], 0);
    let kinds: Vec<(String, String)> = events(recs, "attempt_start")
        .iter()
        .map(|r| {
            (
                r["story"].as_str().unwrap().to_string(),
                r["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("1.1", "first"),
            ("1.2", "first"),
            ("1.2", "redo"),
            ("1.3", "first")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let ends = events(recs, "attempt_end");
    assert_eq!(ends.len(), 4);
    assert_eq!(ends[1]["verdict"], "fail");
    assert!(ends[1]["reason"]
        .as_str()
        .unwrap()
        .contains("tests are red"));
    let landed = events(recs, "landed");
    assert_eq!(landed.len(), 3);
    let merge = git(&p.root, &["rev-parse", "main"]);
    assert_eq!(landed[2]["commit"].as_str().unwrap(), merge.trim());
    for r in recs {
        assert!(r["t"].as_f64().unwrap() > 1.6e9, "stamped: {r}");
    }

    let s = json(&p.ralph(&["stats", "--json"]));
    for f in [&s["runs"][0]["figures"], &s["lifetime"]] {
        assert_eq!(f["landed"], 3, "{f}");
        assert_eq!(f["attempts"], 4);
        assert_eq!(f["by_kind"]["first"], 3);
        assert_eq!(f["by_kind"]["redo"], 1);
        assert!(close(f["runs_per_landed"].as_f64().unwrap(), 4.0 / 3.0));
        assert_eq!(f["tokens"], 528);
        assert!(close(f["cost_usd"].as_f64().unwrap(), 0.04));
        assert_eq!(f["verdicts"]["done"], 3);
        assert_eq!(f["verdicts"]["fail"], 1);
        assert!(close(
            f["per_epic"]["1"]["cost_usd"].as_f64().unwrap(),
            0.04
        ));
        assert_eq!(f["per_agent"]["claude"]["landed"], 3);
        assert_eq!(f["per_story"]["1.2"]["failures"], 1);
        assert!(close(
            f["per_story"]["1.2"]["cost_usd"].as_f64().unwrap(),
            0.02
        ));
        assert_eq!(f["most_failed"][0]["story"], "1.2");
        assert_eq!(f["most_failed"].as_array().unwrap().len(), 1);
        // No estimation weighs (and is counted) as medium (issue 32: "none").
        assert_eq!(f["by_estimation"]["medium"]["stories"], 3);
    }
    assert_eq!(s["runs"][0]["exit_code"], 0);
    assert_eq!(s["runs"][0]["killed"], false);
    let text = p.ralph(&["stats"]);
    assert!(
        text.stdout
            .contains("landed 3 · agent runs 4 (3 first, 1 redo) · 1.33 runs per landed story"),
        "{text:?}"
    );
    assert!(
        text.stdout.contains("most failed: 1.2 (1 failed)"),
        "{text:?}"
    );

    let st = json(&p.ralph(&["status", "--json"]));
    let stories = st["stories"].as_array().unwrap();
    assert_eq!(stories.len(), 3);
    let s12 = &stories[1];
    assert_eq!(s12["id"], "1.2");
    assert_eq!(s12["status"], "done");
    assert_eq!(s12["attempts"], 2);
    assert_eq!(s12["attempts_by_kind"]["first"], 1);
    assert_eq!(s12["attempts_by_kind"]["redo"], 1);
    assert_eq!(s12["attempts_by_kind"]["fixup"], 0);
    assert_eq!(s12["failed_attempts"], 1);
    assert_eq!(s12["tokens"], 264);
    assert!(close(s12["cost_usd"].as_f64().unwrap(), 0.02));
    assert_eq!(s12["agent"], "claude");
    assert_eq!(s12["landed_commit"].as_str().unwrap().len(), 40);
    assert!(s12["last_error"].is_null());
    assert_eq!(st["paused"], false);
    assert_eq!(st["budget"]["exhausted"], false);
    assert_eq!(st["latest_run"]["id"], all[0].0.as_str());
    assert_eq!(st["latest_run"]["landed"], 3);
    assert_eq!(st["latest_run"]["in_progress"], false);
}

/// A `run -s` counts the story it selected, not the ones done before, and
/// its tokens and cost are this run's (issue 13: it printed "2/2 done"
/// with lifetime totals).
#[test]
fn the_run_summary_counts_only_the_selected_stories_and_this_runs_cost() {
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent("commit_file \"src/$ID.txt\"\ndone_\n");
    let first = p.ralph(&["run", "-s", "1.1"]);
    assert_eq!(first.code, 0, "{first:?}");
    assert!(first.stdout.contains("RUN SUMMARY: 1/1 done"), "{first:?}");
    let second = p.ralph(&["run", "-s", "1.2"]);
    assert_eq!(second.code, 0, "{second:?}");
    assert!(
        second.stdout.contains("RUN SUMMARY: 1/1 done"),
        "{second:?}"
    );
    assert!(
        second.stdout.contains(" · 132 tokens · $0.01\n"),
        "{second:?}"
    );
    assert!(
        second
            .stdout
            .contains("lifetime (all runs): 264 tokens · $0.02"),
        "{second:?}"
    );
    let s = json(&p.ralph(&["stats", "--all", "--json"]));
    assert_eq!(s["runs"].as_array().unwrap().len(), 2);
    assert_eq!(s["runs"][1]["figures"]["landed"], 1);
    assert_eq!(s["lifetime"]["landed"], 2);
    let one = s["runs"][0]["id"].as_str().unwrap();
    let only = json(&p.ralph(&["stats", "--json", "--run", one]));
    assert_eq!(only["runs"][0]["id"], one);
    let bad = p.ralph(&["stats", "--run", "nope"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.stderr.contains("no run nope"), "{bad:?}");
}

/// A kill -9 in the middle leaves a file that reads line by line; the
/// next run closes it with a `recovered` record naming itself and keeps
/// its own.
#[test]
fn a_killed_runs_records_stay_readable_and_the_next_run_appends_to_them() {
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"
commit_file "src/$ID.txt"
if [ "$ID" = "1.2" ] && [ ! -e "$SCRATCH/release" ]; then
  touch "$SCRATCH/hanging"
  exec sleep 1000
fi
done_
"#,
    );
    let mut child = spawn(&p, &["run"]);
    wait_until("1.2 to hang", Duration::from_secs(60), || {
        p.scratch.join("hanging").exists()
    });
    kill_session(child.id() as i32);
    let _ = child.wait();

    let killed = runs(&p);
    assert_eq!(killed.len(), 1);
    let (first_id, recs) = &killed[0];
    assert_eq!(recs[0]["ev"], "run_start");
    assert_eq!(events(recs, "landed").len(), 1, "{recs:?}");
    let starts = events(recs, "attempt_start");
    assert_eq!(starts.last().unwrap()["story"], "1.2");
    assert!(events(recs, "run_end").is_empty());

    fs::write(p.scratch.join("release"), "").unwrap();
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let after = runs(&p);
    assert_eq!(after.len(), 2);
    let (id, recs) = &after[0];
    assert_eq!(id, first_id);
    let last = recs.last().unwrap();
    assert_eq!(last["ev"], "recovered");
    assert_eq!(last["next_run"], after[1].0.as_str());
    let new = &after[1].1;
    assert_eq!(new[0]["ev"], "run_start");
    assert_eq!(new[0]["resumes"], first_id.as_str());
    assert_eq!(new.last().unwrap()["ev"], "run_end");
    assert_eq!(events(new, "landed").len(), 1);

    let s = json(&p.ralph(&["stats", "--all", "--json"]));
    assert_eq!(s["runs"][0]["killed"], true);
    assert!(s["runs"][0]["exit_code"].is_null());
    assert_eq!(s["runs"][1]["killed"], false);
    assert_eq!(s["lifetime"]["landed"], 2);
    // The attempt the kill cut off still counts as an agent run.
    assert_eq!(s["lifetime"]["attempts"], 3);
    assert!(close(
        s["lifetime"]["runs_per_landed"].as_f64().unwrap(),
        1.5
    ));
}

#[test]
fn run_records_stay_under_runs_max_mb() {
    // About two runs' worth of records.
    let p = Project::with_backlog(
        "1.1 | A\n",
        r#"{ "loop": { "max_retries": 1, "grace_seconds": 1 }, "runs": { "max_mb": 0.003 } }"#,
    );
    p.commit_all("backlog");
    p.agent("result \"no luck\"\nexit 1\n");
    let mut seen = Vec::new();
    for _ in 0..4 {
        let r = p.ralph(&["run", "-s", "1.1"]);
        assert_eq!(r.code, 1, "{r:?}");
        seen.push(runs(&p).last().unwrap().0.clone());
    }
    let left = runs(&p);
    assert!(
        left.len() < 4,
        "{:?}",
        left.iter().map(|r| &r.0).collect::<Vec<_>>()
    );
    assert_eq!(
        &left.last().unwrap().0,
        seen.last().unwrap(),
        "the newest run is kept"
    );
    let bytes: u64 = fs::read_dir(p.root.join(".ralph/runs"))
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(bytes <= 3 * 1024 * 1024 / 1000 + 512, "{bytes} bytes");
}

#[test]
fn notification_hooks_get_the_figures() {
    let config = r#"{ "loop": { "max_retries": 1, "grace_seconds": 1 }, "hooks": {
        "on_failure": "env | grep ^RALPH_ | sort > \"$SCRATCH/failure.env\"",
        "on_complete": "env | grep ^RALPH_ | sort > \"$SCRATCH/complete.env\"; cp \"$RALPH_REPORT\" \"$SCRATCH/report.html\""
    } }"#;
    let p = Project::with_backlog("# [batch:1]\n1.1 | A\n1.2 | B\n", config);
    p.commit_all("backlog");
    p.agent(
        r#"
if [ "$ID" = "1.1" ]; then result "<ralph>FAIL 1.1: cannot</ralph>"; exit 0; fi
commit_file "src/$ID.txt"
done_
"#,
    );
    let r = p.ralph(&["run", "--parallel", "-j", "2"]);
    assert_eq!(r.code, 1, "{r:?}");
    let read = |name: &str| -> Vec<(String, String)> {
        fs::read_to_string(p.scratch.join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let get = |env: &[(String, String)], k: &str| -> String {
        env.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{k} missing from {env:?}"))
    };
    let failure = read("failure.env");
    assert_eq!(get(&failure, "RALPH_EVENT"), "failure");
    assert_eq!(get(&failure, "RALPH_STORY"), "1.1");
    assert!(get(&failure, "RALPH_REASON").contains("cannot"));
    let complete = read("complete.env");
    assert_eq!(get(&complete, "RALPH_EVENT"), "complete");
    assert_eq!(get(&complete, "RALPH_DONE"), "1");
    assert_eq!(get(&complete, "RALPH_TOTAL"), "2");
    assert_eq!(get(&complete, "RALPH_FAILED"), "1");
    assert_eq!(get(&complete, "RALPH_FAILED_IDS"), "1.1");
    assert_eq!(get(&complete, "RALPH_COST"), "0.02");
    assert_eq!(get(&complete, "RALPH_EXIT_CODE"), "1");
    let run_id = runs(&p).last().unwrap().0.clone();
    assert_eq!(get(&complete, "RALPH_RUN_ID"), run_id);
    assert!(get(&complete, "RALPH_SUMMARY").contains("1/2 done, 1 failed"));
    // The report was there for the hook to send.
    let html = fs::read_to_string(p.scratch.join("report.html")).unwrap();
    assert!(html.contains(&run_id), "the report is this run's");
    let all = runs(&p);
    let recs = &all.last().unwrap().1;
    assert_eq!(events(recs, "failed_for_good")[0]["story"], "1.1");
}

#[test]
fn a_usage_limit_pause_is_recorded_and_notified() {
    let config = r#"{ "loop": { "grace_seconds": 1 }, "hooks": {
        "on_pause": "env | grep ^RALPH_ | sort > \"$SCRATCH/pause.tmp\"; mv \"$SCRATCH/pause.tmp\" \"$SCRATCH/pause.env\""
    } }"#;
    let p = Project::with_backlog("1.1 | A\n", config);
    p.commit_all("backlog");
    p.agent(LIMITED_FOR_AN_HOUR);
    let mut child = spawn(&p, &["run"]);
    wait_until("the on_pause hook", Duration::from_secs(60), || {
        p.scratch.join("pause.env").exists()
    });
    // SAFETY: plain kill(2).
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let mut status = None;
    wait_until("ralph to stop", Duration::from_secs(60), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    assert_eq!(status.unwrap().code(), Some(130));
    let env = fs::read_to_string(p.scratch.join("pause.env")).unwrap();
    assert!(env.contains("RALPH_EVENT=pause\n"), "{env}");
    assert!(env.contains("RALPH_REASON=usage_limit\n"), "{env}");
    assert!(env.contains("RALPH_AGENT=claude\n"), "{env}");
    assert!(env.contains("RALPH_RESUME_AT=20"), "{env}");
    let all = runs(&p);
    let recs = &all[0].1;
    let pause = events(recs, "pause");
    assert_eq!(pause.len(), 1, "{recs:?}");
    assert_eq!(pause[0]["why"], "usage_limit");
    assert_eq!(events(recs, "signal")[0]["signal"], "interrupt");
    assert_eq!(recs.last().unwrap()["exit_code"], 130);
}

// ---------------------------------------------------------------------------
// The report in a real browser

/// What Chromium made of `page`: the DOM after its scripts ran, and the
/// console lines it printed (the page prints none unless something fails).
fn open_in_chromium(
    chrome: &Path,
    page: &Path,
    screenshot: Option<&Path>,
) -> (String, Vec<String>) {
    let profile = tempfile::tempdir().unwrap();
    let url = format!("file://{}", page.display());
    let common = |c: &mut Command| {
        c.args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .stdin(Stdio::null());
    };
    let mut c = Command::new(chrome);
    common(&mut c);
    let out = c
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("chromium runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let console: Vec<String> = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    if let Some(png) = screenshot {
        let mut c = Command::new(chrome);
        common(&mut c);
        let st = c
            .arg(format!("--screenshot={}", png.display()))
            .arg("--window-size=1400,1800")
            .arg(&url)
            .output()
            .expect("chromium runs");
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
    }
    (String::from_utf8_lossy(&out.stdout).into_owned(), console)
}

fn attr(dom: &str, name: &str) -> Option<String> {
    let body = &dom[dom.find("<body")?..];
    let tag = &body[..body.find('>')?];
    let key = format!("{name}=\"");
    let at = tag.find(&key)? + key.len();
    Some(tag[at..at + tag[at..].find('"')?].to_string())
}

#[test]
fn the_report_opens_in_headless_chromium_without_errors() {
    let Some(chrome) = chromium("the report") else {
        return;
    };
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ralph-report");
    fs::create_dir_all(&shots).unwrap();

    // The check itself must see an error when there is one.
    let broken = shots.join("broken.html");
    fs::write(
        &broken,
        "<!DOCTYPE html><body><script>nosuchfunction();</script></body>",
    )
    .unwrap();
    let (_, console) = open_in_chromium(&chrome, &broken, None);
    assert!(
        console
            .iter()
            .any(|l| l.contains("Uncaught ReferenceError")),
        "this Chromium does not report console errors on stderr: {console:?}"
    );

    // A run with a failure, a retry, a conflict and a blocked story.
    let p = Project::with_backlog(
        "# [batch:1]\n1.1 | Shared file, first\n1.2 | Shared file, second\n2.1 | Red <always> & failing\n2.2 | After red\n",
        r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 } }"#,
    );
    p.write(
        "specs/epic-2/story-2.2-spec.md",
        "---\nid: \"2.2\"\ntitle: \"After red\"\ndepends_on: [2.1]\n---\nDo it.\n",
    );
    p.commit_all("backlog");
    p.agent(
        r#"
case "$ID" in
  2.1) result "<ralph>FAIL 2.1: red</ralph>"; exit 0 ;;
  1.1|1.2)
    # Both first attempts start from the same tip: the second to land
    # conflicts on shared.txt.
    commit_file "shared.txt" "$ID attempt $N"
    if [ "$N" = "1" ]; then
      touch "$SCRATCH/$ID-started"
      while [ ! -e "$SCRATCH/1.1-started" ] || [ ! -e "$SCRATCH/1.2-started" ]; do sleep 0.05; done
    fi
    done_ ;;
  *) commit_file "src/$ID.txt"; done_ ;;
esac
"#,
    );
    let r = p.ralph(&["run", "--parallel", "-j", "2"]);
    assert_eq!(r.code, 1, "{r:?}");
    let all = runs(&p);
    let recs = &all[0].1;
    let attempts = events(recs, "attempt_start").len();
    assert!(!events(recs, "conflict").is_empty(), "{recs:?}");
    let page = shots.join("report.html");
    let out = p.ralph(&["report", "--out", page.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{out:?}");
    let html = fs::read_to_string(&page).unwrap();
    for external in ["src=\"http", "href=\"http", "@import", "url(", "<link"] {
        assert!(!html.contains(external), "the page loads {external}");
    }

    let png = shots.join("report.png");
    let _ = fs::remove_file(&png);
    let (dom, console) = open_in_chromium(&chrome, &page, Some(&png));
    assert!(console.is_empty(), "console output: {console:?}");
    assert_eq!(
        attr(&dom, "data-ready").as_deref(),
        Some("1"),
        "the script ran to its end"
    );
    assert_eq!(
        attr(&dom, "data-bars"),
        Some(attempts.to_string()),
        "one timeline bar per attempt"
    );
    assert_eq!(
        attr(&dom, "data-nodes").as_deref(),
        Some("4"),
        "one DAG node per story"
    );
    assert!(
        dom.contains("Red &lt;always&gt; &amp;"),
        "titles are escaped"
    );
    assert!(
        fs::metadata(&png).unwrap().len() > 10_000,
        "a screenshot at {}",
        png.display()
    );
    eprintln!("report screenshot: {}", png.display());
}
