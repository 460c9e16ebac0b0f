//! The parallel engine (`ralph run --parallel -j N`): DAG readiness, the job
//! limit, the merge queue and its conflicts, failure blocking, `-j 1`
//! equivalence, `ralph graph`, and warm slot worktrees.
//!
//! Concurrency is observed by the agents themselves (a counter under `flock`,
//! rendezvous files in `$SCRATCH`), never by timing in the test.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;

use crate::harness::*;

/// Agent-side helpers for observing concurrency.
const CONCURRENCY: &str = r#"
# Running-agents counter: +1 at start, -1 at the end, the maximum kept.
bump() {
  (
    flock 9
    c=$(( $(cat "$SCRATCH/cur" 2>/dev/null || echo 0) + $1 ))
    echo "$c" > "$SCRATCH/cur"
    m=$(cat "$SCRATCH/max" 2>/dev/null || echo 0)
    if [ "$c" -gt "$m" ]; then echo "$c" > "$SCRATCH/max"; fi
  ) 9>"$SCRATCH/lock"
}
# Waits (bounded) until $2 agents of group $1 have started; records a
# failure if they did not all run at once.
rendezvous() {
  touch "$SCRATCH/started-$1-$ID"
  n=0
  for _ in $(seq 1 200); do
    n=$(ls "$SCRATCH" | grep -c "^started-$1-")
    [ "$n" -ge "$2" ] && return 0
    sleep 0.1
  done
  echo "$ID: only $n of $2 agents of group $1 were running together within 20 s" >> "$SCRATCH/failures"
  return 1
}
"#;

/// For tests whose agents must run together: the memory check is off, so
/// a machine with less free memory than -j agents of 2 GB still runs them.
const TOGETHER_CONFIG: &str =
    r#"{ "loop": { "max_retries": 1 }, "parallel": { "agent_memory_mb": 0 } }"#;

fn only_main_worktree(p: &Project) {
    let wts = p.worktrees();
    assert_eq!(wts.len(), 1, "only the main checkout is left: {wts:?}");
    assert!(
        !p.root.join(".ralph/worktrees").exists()
            || fs::read_dir(p.root.join(".ralph/worktrees"))
                .unwrap()
                .next()
                .is_none(),
        "no slot directories are left behind"
    );
}

/// Position of `merge: story <id>` in main's first-parent history.
fn merge_position(subjects: &[String], id: &str) -> usize {
    subjects
        .iter()
        .position(|s| *s == format!("merge: story {id}"))
        .unwrap_or_else(|| panic!("story {id} is not on main: {subjects:?}"))
}

#[test]
fn no_story_starts_before_its_dependencies_landed() {
    // Unbatched 1.1 → 1.2 are a chain; batch 1 waits for them; 3.1 also waits
    // for 2.1 inside batch 1; batch 2 waits for all of batch 1; 3.3 waits for
    // 2.3 inside batch 2.
    let queue = "\
1.1 | Schema
1.2 | Models
# [batch:1]
2.1 | Api
2.2 | Auth
# a plain comment does not end the batch
3.1 | Shell
3.2 | Styles
# [batch:2]
2.3 | Billing
3.3 | Dashboard
1.3 | Reports
";
    let p = Project::with_backlog(queue, FAST_CONFIG);
    depends(&p, "3.1", "[2.1]");
    depends(&p, "2.3", "[\"3.1\"]");
    depends(&p, "3.3", "\n  - \"2.3\"\n  - 1.1");
    p.commit_all("backlog");

    // Everything each story must see when it starts (transitively).
    let batch1 = "1.1 1.2 2.1 2.2 3.1 3.2";
    let deps: BTreeMap<&str, String> = [
        ("1.1", String::new()),
        ("1.2", "1.1".into()),
        ("2.1", "1.1 1.2".into()),
        ("2.2", "1.1 1.2".into()),
        ("3.2", "1.1 1.2".into()),
        ("3.1", "1.1 1.2 2.1".into()),
        ("2.3", batch1.into()),
        ("1.3", batch1.into()),
        ("3.3", format!("{batch1} 2.3")),
    ]
    .into_iter()
    .collect();
    fs::create_dir_all(p.scratch.join("deps")).unwrap();
    for (id, d) in &deps {
        fs::write(p.scratch.join("deps").join(id), d).unwrap();
    }
    p.agent(
        r#"
if [ ! -f "$SCRATCH/deps/$ID" ]; then echo "$ID: unknown story" >> "$SCRATCH/violations"; fi
for d in $(cat "$SCRATCH/deps/$ID"); do
  { [ -f "src/$d.txt" ] && git cat-file -e "HEAD:src/$d.txt"; } ||
    echo "$ID started without $d" >> "$SCRATCH/violations"
done
echo "$ID" >> "$SCRATCH/starts"
sleep 0.2
commit_file "src/$ID.txt"
done_
"#,
    );
    let r = p.ralph(&["run", "--parallel", "-j", "4"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.scratch_text("violations"), "", "{r:?}");

    let all: Vec<String> = deps.keys().map(|s| s.to_string()).collect();
    assert_eq!(p.completed(), all);
    let mut starts: Vec<String> = p.scratch_text("starts").lines().map(String::from).collect();
    starts.sort();
    assert_eq!(starts, all, "every story ran exactly once");

    let subjects = p.main_subjects();
    for (id, d) in &deps {
        assert_eq!(p.merges_of(id), 1, "{id} landed once: {subjects:?}");
        assert_eq!(
            p.file_on_main(&format!("src/{id}.txt")).as_deref(),
            Some(format!("{id}\n").as_str())
        );
        assert_eq!(p.story(id)["status"], "done");
        for dep in d.split_whitespace() {
            assert!(
                merge_position(&subjects, dep) < merge_position(&subjects, id),
                "{dep} landed before {id}: {subjects:?}"
            );
        }
    }
    // Only ralph's merges are on main's first-parent line.
    assert_eq!(subjects.len(), 1 + all.len(), "{subjects:?}");
    only_main_worktree(&p);
    assert!(
        p.branches("ralph/*").is_empty(),
        "{:?}",
        p.branches("ralph/*")
    );
}

#[test]
fn at_most_j_agents_run_at_once_and_independent_stories_overlap() {
    // Batch 1: four independent stories that can only finish if all four run
    // together. Batch 2: six independent stories, more than -j allows.
    let queue = "\
# [batch:1]
1.1 | R1
1.2 | R2
1.3 | R3
1.4 | R4
# [batch:2]
2.1 | W1
2.2 | W2
2.3 | W3
2.4 | W4
2.5 | W5
2.6 | W6
";
    let p = Project::with_backlog(queue, TOGETHER_CONFIG);
    p.commit_all("backlog");
    p.agent(&format!(
        r#"{CONCURRENCY}
bump 1
case "$ID" in
  1.*) rendezvous four 4 ;;
  *) sleep 0.3 ;;
esac
commit_file "src/$ID.txt"
bump -1
done_
"#
    ));
    let r = p.ralph(&["run", "--parallel", "-j", "4"]);
    assert_eq!(
        p.scratch_text("failures"),
        "",
        "the four independent stories of batch 1 ran together: {r:?}"
    );
    assert_eq!(r.code, 0, "{r:?}");
    let max: u32 = p.scratch_text("max").trim().parse().expect("max recorded");
    assert_eq!(
        max, 4,
        "never more than -j 4 agents, and 4 at once in batch 1"
    );
    assert_eq!(p.scratch_text("cur").trim(), "0");
    assert_eq!(p.completed().len(), 10);
    let subjects = p.main_subjects();
    for i in 1..=4 {
        for j in 1..=6 {
            // The batch barrier: all of batch 1 landed before any of batch 2.
            assert!(
                merge_position(&subjects, &format!("1.{i}"))
                    < merge_position(&subjects, &format!("2.{j}"))
            );
        }
    }
    only_main_worktree(&p);
}

#[test]
fn a_job_limit_of_two_is_respected_with_more_stories_ready() {
    let queue = "# [batch:1]\n1.1 | A\n1.2 | B\n1.3 | C\n1.4 | D\n1.5 | E\n";
    let p = Project::with_backlog(queue, TOGETHER_CONFIG);
    p.commit_all("backlog");
    p.agent(&format!(
        r#"{CONCURRENCY}
bump 1
case "$ID" in
  1.1|1.2) rendezvous pair 2 ;;
  *) sleep 0.3 ;;
esac
commit_file "src/$ID.txt"
bump -1
done_
"#
    ));
    let r = p.ralph(&["run", "--parallel", "-j", "2"]);
    assert_eq!(p.scratch_text("failures"), "", "{r:?}");
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.scratch_text("max").trim(), "2", "{r:?}");
    assert_eq!(p.completed(), vec!["1.1", "1.2", "1.3", "1.4", "1.5"]);
}

/// Two stories start together from the same base and both append a line to
/// the same empty file. The agent running in `late_slot` finishes only after
/// the other story's merge is on main, so it is the one whose landing
/// conflicts. Its next attempt finds the merge in progress (`MERGE_HEAD`):
/// with `resolve`, the agent keeps both lines (the landed one, then its own)
/// and concludes the merge with plain git; without, it appends its line
/// again, markers and all, as an agent that ignores the conflict would.
/// A fresh start (no merge in progress) appends on top of the new tip.
/// Returns the project, the run, and (conflicted story, first lander).
fn conflict_run(late_slot: &str, resolve: bool) -> (Project, RunResult, String, String) {
    let queue = "# [batch:1]\n1.1 | Left\n1.2 | Right\n";
    let p = Project::with_backlog(
        queue,
        r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 }, "parallel": { "agent_memory_mb": 0 } }"#,
    );
    p.write("shared.txt", "");
    p.commit_all("backlog");
    p.agent(&format!(
        r#"{CONCURRENCY}
slot="$(basename "$RALPH_WORKTREE")"
cp "$PROMPT_FILE" "$SCRATCH/prompt-$ID-$N"
echo "$ID $N $slot" >> "$SCRATCH/slots"
if git rev-parse -q --verify MERGE_HEAD >/dev/null; then
  echo "$ID $N" >> "$SCRATCH/fixups"
  if {resolve}; then
    {{ git show HEAD:shared.txt; git show MERGE_HEAD:shared.txt; }} > shared.txt
    git add shared.txt
    git commit -q --no-edit
  else
    printf 'line from %s\n' "$ID" >> shared.txt
    git add shared.txt
    git commit -qm "feat(story-$ID): shared again"
  fi
  git rev-parse HEAD > "$SCRATCH/commit-$ID-$N"
  done_
  exit 0
fi
if [ "$N" = 1 ]; then
  rendezvous first 2 || exit 1
  if [ "$slot" = "{late_slot}" ]; then
    for _ in $(seq 1 300); do
      git -C "$RALPH_PROJECT_DIR" log --format=%s main | grep -q '^merge: story' && break
      sleep 0.1
    done
  fi
fi
printf 'line from %s\n' "$ID" >> shared.txt
git add shared.txt
git commit -qm "feat(story-$ID): shared"
git rev-parse HEAD > "$SCRATCH/commit-$ID-$N"
done_
"#
    ));
    let r = p.ralph(&["run", "--parallel", "-j", "2"]);
    assert_eq!(p.scratch_text("failures"), "", "{r:?}");
    let slots = p.scratch_text("slots");
    let x = slots
        .lines()
        .find(|l| l.ends_with(&format!(" 1 {late_slot}")))
        .unwrap_or_else(|| panic!("no first attempt ran in {late_slot}: {slots}\n{r:?}"))
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let y = if x == "1.1" { "1.2" } else { "1.1" }.to_string();
    (p, r, x, y)
}

/// What every conflict must lead to: both stories land once, the
/// conflicted one on top, with both lines; its first work kept under a
/// conflicts ref; the conflict not charged as a failed attempt.
fn assert_both_landed(p: &Project, r: &RunResult, x: &str, y: &str) {
    assert_eq!(r.code, 0, "{r:?}\nslots:\n{}", p.scratch_text("slots"));
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    assert_eq!(
        p.main_subjects(),
        vec![
            "backlog".to_string(),
            format!("merge: story {y}"),
            format!("merge: story {x}")
        ]
    );
    assert_eq!(
        p.file_on_main("shared.txt").as_deref(),
        Some(format!("line from {y}\nline from {x}\n").as_str())
    );
    assert!(!p.scratch.join(format!("prompt-{y}-2")).exists(), "{r:?}");
    assert!(!p
        .scratch_text(&format!("prompt-{x}-1"))
        .to_lowercase()
        .contains("conflict"));
    let conflicting = p.scratch_text(&format!("commit-{x}-1")).trim().to_string();
    let refs = p.refs(&format!("refs/ralph/conflicts/{x}/"));
    assert_eq!(refs.len(), 1, "{:?}", p.refs("refs/ralph/"));
    assert_eq!(git(&p.root, &["rev-parse", &refs[0]]).trim(), conflicting);
    assert!(p.refs(&format!("refs/ralph/conflicts/{y}/")).is_empty());
    assert_eq!(p.story(x)["conflicts"], 1);
    assert!(r.all().contains("conflict"), "{r:?}");
    only_main_worktree(p);
}

/// The conflicted story lands through one fix-up of its own work: no fresh
/// redo, three agent runs in all.
fn assert_fixed_up(p: &Project, r: &RunResult, x: &str, y: &str) {
    assert_both_landed(p, r, x, y);
    assert_eq!(p.scratch_text("fixups"), format!("{x} 2\n"), "{r:?}");
    assert_eq!(p.scratch_text("slots").lines().count(), 3, "agent runs");
    assert!(!p.scratch.join(format!("prompt-{x}-3")).exists(), "{r:?}");
    assert_eq!(p.kinds(x), vec!["first", "fixup"]);
    assert_eq!(p.kinds(y), vec!["first"]);
    assert_eq!(p.story(x)["attempts"], 0, "nothing was charged");
    // The fix-up prompt names the file and the story that landed meanwhile.
    let fix = p.scratch_text(&format!("prompt-{x}-2"));
    let y_title = if y == "1.1" { "Left" } else { "Right" };
    for want in [
        "`shared.txt`".to_string(),
        format!("Story {y}: {y_title}"),
        "both intents".to_string(),
        "git commit --no-edit".to_string(),
    ] {
        assert!(fix.contains(&want), "{want} missing from:\n{fix}");
    }
    // What landed is the fix-up's merge of main and the story's own work.
    let fixup = p.scratch_text(&format!("commit-{x}-2")).trim().to_string();
    let conflicting = p.scratch_text(&format!("commit-{x}-1")).trim().to_string();
    let landing = git(&p.root, &["rev-parse", "main"]).trim().to_string();
    assert_eq!(
        git(&p.root, &["rev-parse", &format!("{landing}^2")]).trim(),
        fixup
    );
    let parents = git(&p.root, &["log", "-1", "--format=%P", &fixup]);
    assert_eq!(
        parents.split_whitespace().collect::<Vec<_>>(),
        vec![
            git(&p.root, &["rev-parse", "main^"]).trim(),
            conflicting.as_str()
        ]
    );
    // The waste shows it.
    let out = p.command(&["status", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = &v["agent_runs"];
    assert_eq!(runs["landed"], 2, "{runs}");
    assert_eq!(runs["first"]["runs"], 2, "{runs}");
    assert_eq!(runs["fixup"]["runs"], 1, "{runs}");
    assert_eq!(runs["redo"]["runs"], 0, "{runs}");
    assert_eq!(runs["per_landed_story"]["runs"], 1.5, "{runs}");
    assert!(
        r.stdout
            .contains("agent runs: 1.50 per landed story (3 for 2)"),
        "{r:?}"
    );
}

#[test]
fn two_stories_on_the_same_lines_land_through_one_fixup() {
    // The conflicted story ran in slot-0, the slot its fix-up is given.
    let (p, r, x, y) = conflict_run("slot-0", true);
    assert_fixed_up(&p, &r, &x, &y);
    assert!(
        p.scratch_text("slots").contains(&format!("{x} 2 slot-0")),
        "{}",
        p.scratch_text("slots")
    );
}

#[test]
fn a_conflicted_story_fixed_up_in_another_slot_lands() {
    // The conflicted story ran in slot-1; when it comes back both slots are
    // free and its fix-up goes to slot-0 (it has no session to resume),
    // while its branch is still checked out in slot-1's worktree.
    let (p, r, x, y) = conflict_run("slot-1", true);
    assert_fixed_up(&p, &r, &x, &y);
}

#[test]
fn a_fixup_that_leaves_markers_falls_back_to_a_counted_redo() {
    let (p, r, x, y) = conflict_run("slot-0", false);
    assert_both_landed(&p, &r, &x, &y);
    assert_eq!(p.kinds(&x), vec!["first", "fixup", "redo"]);
    assert_eq!(p.story(&x)["attempts"], 1, "the failed fix-up counts");
    assert!(
        r.stderr
            .contains("the fix-up committed conflict markers in shared.txt"),
        "{r:?}"
    );
    // The fix-up's commits are kept; the redo was told what happened.
    let kept = format!("refs/ralph/attempts/{x}/2");
    assert_eq!(p.refs(&kept), vec![kept.clone()]);
    assert!(git(&p.root, &["show", &format!("{kept}:shared.txt")]).contains("<<<<<<<"));
    let redo = p.scratch_text(&format!("prompt-{x}-3"));
    assert!(
        redo.contains(&format!("implement Story {x}:"))
            && redo.contains("conflict markers")
            && redo.contains(&format!("refs/ralph/conflicts/{x}/1")),
        "{redo}"
    );
}

#[test]
fn a_story_that_always_fails_blocks_exactly_its_descendants() {
    let queue = "\
# [batch:1]
1.1 | Broken
1.2 | Needs broken
1.3 | Needs needs
1.4 | Fine
1.5 | Needs fine
2.1 | Diamond
2.2 | Independent
";
    let p = Project::with_backlog(queue, FAST_CONFIG);
    depends(&p, "1.2", "[1.1]");
    depends(&p, "1.3", "[1.2]");
    depends(&p, "1.5", "[1.4]");
    depends(&p, "2.1", "[1.4, 1.2]");
    p.commit_all("backlog");
    p.agent(
        r#"
echo "$ID $N" >> "$SCRATCH/calls"
if [ "$ID" = "1.1" ]; then
  commit_file "src/partial.txt"
  result "<ralph>FAIL 1.1: the build is broken</ralph>"
  exit 0
fi
sleep 0.1
commit_file "src/$ID.txt"
done_
"#,
    );
    let r = p.ralph(&["run", "--parallel", "-j", "4"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(p.completed(), vec!["1.4", "1.5", "2.2"]);
    let calls = p.scratch_text("calls");
    let mut ran: Vec<&str> = calls.lines().collect();
    ran.sort();
    assert_eq!(
        ran,
        vec!["1.1 1", "1.1 2", "1.4 1", "1.5 1", "2.2 1"],
        "blocked stories never ran"
    );
    let s = p.story("1.1");
    assert_eq!(s["status"], "failed", "{s}");
    assert_eq!(s["attempts"], 2);
    assert!(s["last_error"]
        .as_str()
        .unwrap()
        .contains("the build is broken"));
    for id in ["1.2", "1.3", "2.1"] {
        assert_ne!(p.story(id)["status"], "done");
        assert_eq!(p.merges_of(id), 0);
    }
    for id in ["1.4", "1.5", "2.2"] {
        assert_eq!(p.merges_of(id), 1);
    }
    assert_eq!(p.merges_of("1.1"), 0);
    assert_eq!(p.file_on_main("src/partial.txt"), None);
    assert_eq!(p.refs("refs/ralph/attempts/1.1/").len(), 2);

    let out = r.all();
    assert!(out.contains("failed: 1.1"), "{r:?}");
    assert!(out.contains("blocked: 1.2, 1.3, 2.1"), "{r:?}");

    let st = p.ralph(&["status", "--json"]);
    assert_eq!(st.code, 0, "{st:?}");
    let v: serde_json::Value = serde_json::from_str(&st.stdout).unwrap();
    assert_eq!(v["failed"], serde_json::json!(["1.1"]));
    assert_eq!(v["blocked"], serde_json::json!(["1.2", "1.3", "2.1"]));
    assert_eq!(v["done"], serde_json::json!(["1.4", "1.5", "2.2"]));
    assert_eq!(v["running"], serde_json::json!([]));
    assert_eq!(v["total"], 7);

    // A second run has nothing it may start: same verdict, no agent.
    let again = p.ralph(&["run", "--parallel", "-j", "4"]);
    assert_eq!(again.code, 1, "{again:?}");
    assert_eq!(p.scratch_text("calls"), calls, "nothing ran again");
    assert!(again.all().contains("blocked: 1.2, 1.3, 2.1"), "{again:?}");
    only_main_worktree(&p);
}

#[test]
fn one_job_gives_the_same_history_as_a_sequential_run() {
    let queue = "\
1.1 | Foundation
# [batch:1]
2.1 | After its sibling
2.2 | Sibling
3.1 | Other epic
# [batch:2]
3.2 | Late
2.3 | Later
";
    let build = || {
        let p = Project::with_backlog(queue, FAST_CONFIG);
        depends(&p, "2.1", "[2.2]");
        depends(&p, "2.3", "[3.2]");
        p.commit_all("backlog");
        // Content depends only on the story ID and the order stories land in.
        p.agent(
            r#"
# One job: every story that started before this one has landed.
for prev in $(cat "$SCRATCH/starts" 2>/dev/null); do
  [ -f "src/$prev.txt" ] || echo "$ID started before $prev landed" >> "$SCRATCH/violations"
done
echo "$ID" >> "$SCRATCH/starts"
commit_file "src/$ID.txt"
printf '%s\n' "$ID" >> changelog.txt
git add changelog.txt
git commit -qm "docs(story-$ID): changelog"
done_
"#,
        );
        p
    };
    let seq = build();
    let r = seq.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let par = build();
    let r = par.ralph(&["run", "--parallel", "-j", "1"]);
    assert_eq!(r.code, 0, "{r:?}");

    let subjects = seq.main_subjects();
    assert_eq!(subjects, par.main_subjects());
    assert_eq!(
        subjects,
        vec![
            "backlog",
            "merge: story 1.1",
            "merge: story 2.2",
            "merge: story 2.1",
            "merge: story 3.1",
            "merge: story 3.2",
            "merge: story 2.3",
        ]
    );
    let tree = |p: &Project| git(&p.root, &["rev-parse", "main^{tree}"]);
    assert_eq!(tree(&seq), tree(&par), "identical final trees");
    assert_eq!(
        seq.file_on_main("changelog.txt").as_deref(),
        Some("1.1\n2.2\n2.1\n3.1\n3.2\n2.3\n")
    );
    assert_eq!(seq.completed(), par.completed());
    for p in [&seq, &par] {
        // Stories start in queue order once ready, each from a tip holding
        // all earlier work: never a conflict, never a redo.
        assert_eq!(p.scratch_text("violations"), "");
        assert_eq!(p.scratch_text("starts"), "1.1\n2.2\n2.1\n3.1\n3.2\n2.3\n");
        assert!(
            p.refs("refs/ralph/").is_empty(),
            "{:?}",
            p.refs("refs/ralph/")
        );
    }
}

#[test]
fn sixteen_slot_worktrees_are_made_at_once_on_a_fresh_repository() {
    // Every slot's worktree is created in the first wave. Repeated on fresh
    // repositories because a race between creations shows only sometimes.
    let queue: String = std::iter::once("# [batch:1]\n".to_string())
        .chain((1..=16).map(|i| format!("1.{i} | S{i}\n")))
        .collect();
    for round in 1..=3 {
        let p = Project::with_backlog(&queue, r#"{ "loop": { "max_retries": 1 } }"#);
        p.commit_all("backlog");
        p.agent(r#"commit_file "src/$ID.txt"; done_"#);
        let r = p.ralph(&["run", "--parallel", "-j", "16"]);
        assert!(
            !r.all().contains("could not prepare the worktree"),
            "round {round}: {r:?}"
        );
        assert_eq!(r.code, 0, "round {round}: {r:?}");
        assert_eq!(p.completed().len(), 16);
        only_main_worktree(&p);
    }
}

#[test]
fn graph_prints_every_story_and_edge_with_its_status() {
    let queue = "\
# [batch:1]
1.1 | Base
1.2 | Broken
1.3 | After base
1.4 | After broken
# [batch:2]
2.1 | Later
";
    let p = Project::with_backlog(queue, r#"{ "loop": { "max_retries": 1 } }"#);
    depends(&p, "1.3", "[1.1]");
    depends(&p, "1.4", "[1.2]");
    p.commit_all("backlog");
    p.agent(
        r#"
if [ "$ID" = "1.2" ]; then result "<ralph>FAIL 1.2: nope</ralph>"; exit 0; fi
commit_file "src/$ID.txt"; done_
"#,
    );
    let r = p.ralph(&["run", "--parallel", "-j", "2"]);
    assert_eq!(r.code, 1, "{r:?}");

    let ids = ["1.1", "1.2", "1.3", "1.4", "2.1"];
    let titles = ["Base", "Broken", "After base", "After broken", "Later"];
    // The long words of `Node::word`, as `status --json` says them.
    let status = ["done", "failed", "done", "blocked", "blocked"];
    let edges: BTreeSet<(&str, &str)> = [
        ("1.1", "1.3"),
        ("1.2", "1.4"),
        ("1.1", "2.1"),
        ("1.2", "2.1"),
        ("1.3", "2.1"),
        ("1.4", "2.1"),
    ]
    .into_iter()
    .collect();

    // text: one line per story, `[status] id title  <- waits`.
    let text = p.ralph(&["graph", "--format", "text"]);
    assert_eq!(text.code, 0, "{text:?}");
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert_eq!(lines.len(), ids.len(), "{}", text.stdout);
    let mut text_edges = BTreeSet::new();
    for i in 0..ids.len() {
        let prefix = format!("[{}] {} {}", status[i], ids[i], titles[i]);
        let line = lines
            .iter()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?}:\n{}", text.stdout));
        if let Some((_, waits)) = line.split_once("<-") {
            for w in waits.split(',') {
                let w = ids.iter().find(|x| **x == w.trim()).expect("known id");
                text_edges.insert((*w, ids[i]));
            }
        }
    }
    assert_eq!(text_edges, edges, "{}", text.stdout);
    // Topological: a story's line comes after those it waits for.
    let pos = |id: &str| {
        lines
            .iter()
            .position(|l| l.split_whitespace().nth(1) == Some(id))
            .unwrap()
    };
    for (a, b) in &edges {
        assert!(pos(a) < pos(b), "{a} before {b}:\n{}", text.stdout);
    }

    // dot: a labelled node per story and an arrow per edge.
    let dot = p.ralph(&["graph", "--format", "dot"]);
    assert_eq!(dot.code, 0, "{dot:?}");
    assert!(dot.stdout.starts_with("digraph"), "{}", dot.stdout);
    for i in 0..ids.len() {
        let node = dot
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("\"{}\" [", ids[i])))
            .unwrap_or_else(|| panic!("no node {}:\n{}", ids[i], dot.stdout));
        assert!(node.contains(titles[i]), "{node}");
        assert!(node.contains(&format!("[{}]", status[i])), "{node}");
    }
    let dot_edges: BTreeSet<(String, String)> = dot
        .stdout
        .lines()
        .filter_map(|l| l.trim().trim_end_matches(';').split_once(" -> "))
        .map(|(a, b)| {
            (
                a.trim_matches('"').to_string(),
                b.trim_matches('"').to_string(),
            )
        })
        .collect();
    let want: BTreeSet<(String, String)> = edges
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(dot_edges, want, "{}", dot.stdout);

    // mermaid: nodes carry id, title and status; edges go between node names.
    let mm = p.ralph(&["graph", "--format", "mermaid"]);
    assert_eq!(mm.code, 0, "{mm:?}");
    assert!(mm.stdout.starts_with("graph"), "{}", mm.stdout);
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for l in mm.stdout.lines() {
        if let Some((name, label)) = l.trim().split_once("[\"") {
            let id = label.split_whitespace().next().unwrap().to_string();
            names.insert(name.to_string(), id);
        }
    }
    for i in 0..ids.len() {
        let label = mm
            .stdout
            .lines()
            .find(|l| l.contains(&format!("[\"{} {}", ids[i], titles[i])))
            .unwrap_or_else(|| panic!("no node {}:\n{}", ids[i], mm.stdout));
        assert!(label.contains(&format!("({})", status[i])), "{label}");
    }
    let mm_edges: BTreeSet<(String, String)> = mm
        .stdout
        .lines()
        .filter_map(|l| l.trim().split_once(" --> "))
        .map(|(a, b)| (names[a.trim()].clone(), names[b.trim()].clone()))
        .collect();
    assert_eq!(mm_edges, want, "{}", mm.stdout);
}

#[test]
fn a_reused_slot_worktree_keeps_ignored_build_output() {
    let queue = "1.1 | One\n1.2 | Two\n1.3 | Three\n";
    let p = Project::with_backlog(queue, FAST_CONFIG);
    p.write(".gitignore", "target/\n");
    p.commit_all("backlog");
    p.agent(
        r#"
slot="$(basename "$RALPH_WORKTREE")"
case "$slot" in slot-[0-9]*) ;; *) echo "$ID: odd worktree $RALPH_WORKTREE" >> "$SCRATCH/odd" ;; esac
[ "$(pwd -P)" = "$(cd "$RALPH_WORKTREE" && pwd -P)" ] || echo "$ID: cwd $(pwd) is not the worktree" >> "$SCRATCH/odd"
if [ -f "target/cache-$slot" ]; then
  echo "$ID $slot $(cat "target/cache-$slot")" >> "$SCRATCH/hits"
fi
mkdir -p target
echo "$ID" > "target/cache-$slot"
commit_file "src/$ID.txt"
done_
"#,
    );
    let r = p.ralph(&["run", "--parallel", "-j", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.scratch_text("odd"), "");
    assert_eq!(p.completed(), vec!["1.1", "1.2", "1.3"]);
    let hits = p.scratch_text("hits");
    assert!(!hits.is_empty(), "build output stayed warm in the slot");
    // One slot: each later story found its predecessor's output.
    assert_eq!(hits, "1.2 slot-0 1.1\n1.3 slot-0 1.2\n");
    // The ignored output never reached the branch.
    assert_eq!(p.file_on_main("target/cache-slot-0"), None);
    only_main_worktree(&p);
}

/// Issue 3's live display, through a real terminal: `script` gives ralph a
/// pseudo-terminal, and the test reads what it drew. Each agent announces a
/// tool use and then waits, so the lines can only be there because ralph
/// drew them while both stories ran. The terminal is made wide enough that
/// no line is cut.
#[test]
fn with_a_terminal_the_live_display_shows_totals_and_each_running_story() {
    let p = Project::with_backlog(
        "# [batch:1]\n1.1 | Alpha story\n1.2 | Beta story\n",
        r#"{ "loop": { "max_retries": 1 } }"#,
    );
    p.commit_all("backlog");
    p.agent(
        r#"
tool "make check-$ID"
for _ in $(seq 1 6000); do [ -e "$SCRATCH/release" ] && break; sleep 0.01; done
commit_file "src/$ID.txt"; done_
"#,
    );
    let inner = p.command(&["run", "--parallel", "-j", "2"]);
    let mut outer = std::process::Command::new("script");
    outer
        .args([
            "-qfec",
            &format!("stty cols 200 rows 40; exec '{RALPH}' run --parallel -j 2"),
            "/dev/null",
        ])
        .current_dir(&p.root)
        .stdin(std::process::Stdio::null());
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => outer.env(k, v),
            None => outer.env_remove(k),
        };
    }
    // The live display is for people at a terminal; CI gets plain lines.
    outer.env_remove("CI");
    let screen = p.scratch.join("screen");
    outer.stdout(fs::File::create(&screen).unwrap());
    let mut child = outer.spawn().expect("script(1) runs");
    let drawn = || fs::read_to_string(&screen).unwrap_or_default();
    wait_until(
        "both stories on screen",
        std::time::Duration::from_secs(60),
        || {
            if let Ok(Some(st)) = child.try_wait() {
                panic!(
                    "the run ended before the display showed both: {st:?}\n{}",
                    drawn()
                );
            }
            let s = drawn();
            [
                "1.1",
                "Alpha story",
                "Bash: make check-1.1",
                "1.2",
                "Beta story",
                "Bash: make check-1.2",
            ]
            .iter()
            .all(|want| s.contains(want))
                && s.contains("0/2 done · 2 running · 0 failed · 0 blocked")
        },
    );
    fs::write(p.scratch.join("release"), "").unwrap();
    assert!(child.wait().unwrap().success(), "{}", drawn());
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    let s = drawn();
    assert!(s.contains("\x1b["), "drawn with terminal control sequences");
    assert!(s.contains("ALL STORIES COMPLETE"), "{s}");
}

/// Issue 21: a free slot is made ready ahead, at the target's tip of that
/// moment, while other agents run. A dependency landing after that moves
/// the tip, and the story started in that slot must still begin from the
/// tip that holds it. 1.2 (large, so it goes first: slot 0) ends at once and
/// slot 0 is made ready while 1.1 runs; 1.1 holds on until ralph.log says
/// slot 0 is ready, then ends and lands; 1.3 (depends on 1.1) then starts
/// in slot 0, made ready at a tip without 1.1, and must find 1.1's file.
#[test]
fn a_slot_made_ready_before_a_dependency_landed_starts_from_the_tip_with_it() {
    let queue = "# [batch:1]\n1.1 | Bee\n1.2 | Dee\n1.3 | Cee\n";
    let p = Project::with_backlog(queue, TOGETHER_CONFIG);
    p.write(
        "specs/epic-1/story-1.2-spec.md",
        "---\nid: \"1.2\"\nstatus: pending\nestimation: large\n---\n\n# Story 1.2\n\nDo it.\n",
    );
    depends(&p, "1.3", "[1.1]");
    p.commit_all("backlog");
    p.agent(
        r#"
case "$ID" in
  1.1)
    for _ in $(seq 1 300); do
      grep -q "slot 0 ready at" "$RALPH_PROJECT_DIR/ralph.log" 2>/dev/null && break
      sleep 0.1
    done
    grep -q "slot 0 ready at" "$RALPH_PROJECT_DIR/ralph.log" ||
      echo "1.1: slot 0 was not made ready within 30 s" >> "$SCRATCH/violations" ;;
  1.3)
    { [ -f src/1.1.txt ] && git cat-file -e HEAD:src/1.1.txt; } ||
      echo "1.3 started without 1.1 in $(pwd)" >> "$SCRATCH/violations" ;;
esac
echo "$ID $(basename "$RALPH_WORKTREE")" >> "$SCRATCH/starts"
commit_file "src/$ID.txt"
done_
"#,
    );
    let r = p.ralph(&["run", "--parallel", "-j", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.scratch_text("violations"), "", "{r:?}");
    let starts = p.scratch_text("starts");
    // The case this test is about: 1.3 ran in the slot made ready before
    // 1.1 landed (the lowest free slot when 1.1 landed).
    assert!(starts.contains("1.3 slot-0"), "{starts}");
    assert_eq!(p.completed(), vec!["1.1", "1.2", "1.3"]);
    assert_eq!(p.file_on_main("src/1.1.txt").as_deref(), Some("1.1\n"));
    only_main_worktree(&p);
    assert!(
        p.branches("ralph/*").is_empty(),
        "{:?}",
        p.branches("ralph/*")
    );
}
