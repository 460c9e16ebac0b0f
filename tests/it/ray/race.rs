//! Best of N on a real Ray cluster (issue 36): each racing candidate is a
//! job of its own, on whichever node has room, its branch, relay refs and
//! job named by its key (`project::candidate_key`); the first DONE
//! candidate whose work passes lands, the other's job is stopped and its
//! work kept.

use std::time::Duration;

use super::{cluster, project_with, relay_refs, run_to_end};
use crate::harness::{alive, git, run_records, wait_until, RALPH};

/// Candidate 1 commits, then holds until stopped; candidate 2 finishes
/// once candidate 1 is holding. Each notes which it is and its node.
const RACING_AGENT: &str = r#"
echo "$RALPH_CANDIDATE $RALPH_TEST_NODE" >> "$SCRATCH/candidates"
if [ "$RALPH_CANDIDATE" = 1 ]; then
  commit_file "src/slow.txt"
  echo $$ > "$SCRATCH/slow.pid"
  while [ ! -f "$SCRATCH/never" ]; do sleep 0.1; done
fi
for _ in $(seq 600); do [ -f "$SCRATCH/slow.pid" ] && break; sleep 0.1; done
commit_file "src/$ID.txt" "candidate $RALPH_CANDIDATE"
done_
"#;

#[test]
fn candidates_race_as_jobs_on_the_nodes() {
    let Some((_one, scratch, bin, c)) = cluster() else {
        return;
    };
    let p = project_with(
        &c,
        "1.1 | A\n",
        RACING_AGENT,
        RALPH,
        r#"{ "ralph_slot": 1 }"#,
    );
    let cfg = p.read(".ralph/config.json");
    let mut v: serde_json::Value = serde_json::from_str(&cfg).unwrap();
    v["attempts"] = serde_json::json!({ "best_of": 2 });
    p.write(".ralph/config.json", &v.to_string());
    p.commit_all("a race");
    std::fs::copy(p.bin.join("claude"), bin.path().join("claude")).unwrap();
    let r = run_to_end(&p, c.ralph(&p, &["run", "-j", "2"]));
    let shown = format!("{r:?}\n{}", p.read("ralph.log"));
    assert_eq!(r.code, 0, "{shown}");
    assert_eq!(p.completed(), ["1.1"], "{shown}");
    // Candidate 2's work landed; both ran, each as a job on a node.
    assert_eq!(
        p.file_on_main("src/1.1.txt").as_deref(),
        Some("candidate 2\n"),
        "{shown}"
    );
    assert_eq!(p.file_on_main("src/slow.txt"), None, "{shown}");
    let ran = std::fs::read_to_string(scratch.path().join("candidates")).unwrap();
    let mut who: Vec<&str> = ran.lines().collect();
    who.sort_unstable();
    assert_eq!(who.len(), 2, "{ran}");
    for (k, line) in who.iter().enumerate() {
        let (cand, node) = line.split_once(' ').unwrap();
        assert_eq!(cand, (k + 1).to_string(), "{ran}");
        assert!(node == "head" || node == "w2", "{ran}");
    }
    let starts = run_records(&p)
        .into_iter()
        .filter(|r| r["ev"] == "candidate_start")
        .count();
    assert_eq!(starts, 2, "{shown}");
    // The loser's job was stopped (its agent with it) and its work kept.
    let pid: i32 = std::fs::read_to_string(scratch.path().join("slow.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_until(
        "the losing agent to be gone",
        Duration::from_secs(60),
        || !alive(pid),
    );
    let kept = "refs/ralph/candidates/1.1/1/1";
    assert_eq!(p.refs("refs/ralph/candidates/"), [kept], "{shown}");
    assert_eq!(
        git(&p.root, &["show", &format!("{kept}:src/slow.txt")]),
        "1.1\n"
    );
    // Nothing of the race stays on the cluster or the relay.
    assert!(
        !c.jobs().iter().any(|j| j["metadata"]["ralph_story"]
            .as_str()
            .is_some_and(|s| s.starts_with("1.1"))
            && j["status"] == "RUNNING"),
        "{:?}\n{shown}",
        c.jobs()
    );
    assert_eq!(relay_refs(&c), Vec::<String>::new(), "{shown}");
    assert_eq!(p.refs("refs/ralph-relay/"), Vec::<String>::new(), "{shown}");
}
