//! Issue 12's review landing through the real binary: validated work waits
//! on its branch for `ralph land`, or goes back with `ralph reject`.

use std::fs;

use crate::harness::*;

const AGENT: &str = r#"
echo "$ID" >> "$SCRATCH/calls"
cp "$PROMPT_FILE" "$SCRATCH/prompt-$ID-$N"
commit_file "src/$ID.txt"; done_
"#;

fn project(config: &str) -> Project {
    let p = Project::with_backlog("# [batch:1]\n1.1 | First\n1.2 | Second\n", config);
    p.write(
        "specs/epic-1/story-1.2-spec.md",
        "---\nid: \"1.2\"\ntitle: \"Second\"\nstatus: pending\ndepends_on: [\"1.1\"]\n---\n\n# Story 1.2\n",
    );
    p.commit_all("backlog");
    p.agent(AGENT);
    p
}

#[test]
fn review_mode_keeps_work_off_the_target_until_it_is_landed() {
    let p = project(
        r#"{ "loop": { "max_retries": 2 }, "landing": { "mode": "review" },
             "validation": { "commands": [ { "name": "has", "cmd": "test -f src/1.1.txt", "required": true } ] } }"#,
    );
    let r = p.ralph(&["run", "--exit-on-review"]);
    assert_eq!(r.code, 1, "a person is needed: {r:?}");
    assert!(r.stderr.contains("[revw] 1.1"), "{r:?}");
    assert!(
        r.stdout.contains("in review or in a pull request: 1.1"),
        "{r:?}"
    );
    assert_eq!(p.merges_of("1.1"), 0, "nothing landed");
    assert_eq!(p.story("1.1")["status"], "review");
    assert!(p.branches("ralph/story-1.1").len() == 1);
    // Its dependent waits for the landing, not for the review.
    assert_eq!(
        fs::read_to_string(p.scratch.join("calls")).unwrap(),
        "1.1\n"
    );

    let listed = p.ralph(&["review"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(
        listed
            .stdout
            .contains("1.1 First · ralph/story-1.1 · 1 files, +1 -0"),
        "{listed:?}"
    );
    // Another run leaves it waiting.
    assert_eq!(p.ralph(&["run", "--exit-on-review"]).code, 1);
    assert_eq!(p.merges_of("1.1"), 0);

    let landed = p.ralph(&["land", "1.1"]);
    assert_eq!(landed.code, 0, "{landed:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert_eq!(p.story("1.1")["status"], "done");
    assert_eq!(
        fs::read_to_string(p.scratch.join("calls")).unwrap(),
        "1.1\n",
        "landing starts no agent"
    );
    // Now its dependent runs, and waits for review in turn.
    assert_eq!(p.ralph(&["run", "--exit-on-review"]).code, 1);
    assert_eq!(p.story("1.2")["status"], "review");
    assert_eq!(p.ralph(&["land"]).code, 0);
    assert_eq!(p.merges_of("1.2"), 1);
    assert_eq!(p.ralph(&["land", "1.2"]).code, 2, "not in review any more");
}

/// `ralph land` lands what a person approved and starts no agent, whatever
/// `loop.max_iterations` says: its run has review off, so an agent it
/// started would land work nobody reviewed (1.2, ready once 1.1 landed).
#[test]
fn land_starts_no_agent_when_max_iterations_is_set() {
    let p = project(
        r#"{ "loop": { "max_retries": 2, "max_iterations": 5 }, "landing": { "mode": "review" } }"#,
    );
    assert_eq!(p.ralph(&["run", "--exit-on-review"]).code, 1);
    assert_eq!(p.story("1.1")["status"], "review");
    let landed = p.ralph(&["land", "1.1"]);
    assert_eq!(landed.code, 0, "{landed:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert_eq!(
        fs::read_to_string(p.scratch.join("calls")).unwrap(),
        "1.1\n",
        "landing started an agent: {landed:?}"
    );
    assert_eq!(p.merges_of("1.2"), 0, "1.2 landed unreviewed");
    let st = p.story("1.2");
    assert!(
        matches!(st["status"].as_str(), None | Some("pending")),
        "{st}"
    );
}

/// Ralph v2's `parallel.auto_merge: false` is review mode; a rejected story
/// runs again, told the reviewer's note.
#[test]
fn a_rejected_story_runs_again_with_the_note() {
    let p = project(r#"{ "loop": { "max_retries": 2 }, "parallel": { "auto_merge": false } }"#);
    assert_eq!(p.ralph(&["run", "--exit-on-review"]).code, 1);
    assert_eq!(p.story("1.1")["status"], "review");
    let r = p.ralph(&["reject", "1.1", "--note", "use the shared helper instead"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.story("1.1")["status"], "pending");
    assert_eq!(p.ralph(&["run", "--exit-on-review"]).code, 1);
    let prompt = fs::read_to_string(p.scratch.join("prompt-1.1-2")).unwrap();
    assert!(prompt.contains("use the shared helper instead"), "{prompt}");
    assert_eq!(p.story("1.1")["status"], "review");
    assert_eq!(p.merges_of("1.1"), 0);
}

/// `landing.mode: pr` against a local bare remote and a fake `gh`: the
/// validated branch is pushed, the pull request recorded, and the story is
/// done once its commits reach the remote's target.
#[test]
fn pr_mode_pushes_opens_a_pull_request_and_is_done_once_merged() {
    use std::os::unix::fs::PermissionsExt;
    let p = project(r#"{ "loop": { "max_retries": 2 }, "landing": { "mode": "pr" } }"#);
    let remote = p.scratch.join("remote.git");
    git(
        &p.scratch,
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            remote.to_str().unwrap(),
        ],
    );
    git(
        &p.root,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    git(&p.root, &["push", "-q", "origin", "main"]);
    // Without gh: refused before any work.
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("`gh` is not on PATH"), "{r:?}");
    assert!(!p.scratch.join("calls").exists());
    let gh = p.bin.join("gh");
    fs::write(
        &gh,
        "#!/bin/bash\necho \"$@\" >> \"$SCRATCH/gh-calls\"\necho https://github.example/o/r/pull/1\n",
    )
    .unwrap();
    fs::set_permissions(&gh, fs::Permissions::from_mode(0o755)).unwrap();
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("[pr  ] 1.1"), "{r:?}");
    assert_eq!(p.story("1.1")["status"], "in_pr");
    assert_eq!(
        p.story("1.1")["pr_url"],
        "https://github.example/o/r/pull/1"
    );
    assert_eq!(p.merges_of("1.1"), 0, "nothing lands locally");
    let calls = fs::read_to_string(p.scratch.join("gh-calls")).unwrap();
    assert!(
        calls.starts_with("pr create --head ralph/story-1.1 --base main --title 1.1: First"),
        "{calls}"
    );
    // The branch is on the remote.
    let on_remote = git(&remote, &["branch", "--list", "ralph/story-1.1"]);
    assert!(on_remote.contains("ralph/story-1.1"), "{on_remote}");
    // Not merged yet: still waiting, and its dependent with it.
    assert_eq!(p.ralph(&["run"]).code, 1);
    assert_eq!(p.story("1.1")["status"], "in_pr");
    let done_in_status = || {
        let r = p.ralph(&["status", "--json"]);
        assert_eq!(r.code, 0, "{r:?}");
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        v["done"].as_array().unwrap().contains(&"1.1".into())
    };
    assert!(!done_in_status());
    assert_eq!(p.story("1.1")["status"], "in_pr");
    // Someone merges the pull request on the remote.
    git(
        &remote,
        &[
            "update-ref",
            "refs/heads/main",
            "refs/heads/ralph/story-1.1",
        ],
    );
    // `ralph status` fetches and finds it merged, before any run.
    assert!(done_in_status());
    assert_eq!(p.story("1.1")["status"], "done");
    let r = p.ralph(&["run"]);
    assert_eq!(p.story("1.1")["status"], "done", "{r:?}");
    assert_eq!(p.story("1.2")["status"], "in_pr", "{r:?}");
}
