//! Projects laid out as Ralph v2 (the bash tool) keeps them run unchanged:
//! our own samples in its layout, `tests/fixtures/ralph-v2/`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::harness::*;

fn compat_dir() -> PathBuf {
    crate::testenv::fixture("ralph-v2")
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.path().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            fs::copy(e.path(), &dest).unwrap();
            // The fixtures are read-only; a project's files are not.
            fs::set_permissions(&dest, fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
    fs::set_permissions(to, fs::Permissions::from_mode(0o755)).unwrap();
}

/// The bash tool's fake claude: text output (these configs ask for no
/// output format), one commit, DONE.
const TEXT_AGENT: &str = r#"
echo "$ID" >> "$SCRATCH/calls"
mkdir -p src
echo "story $ID" > "src/story-$ID.txt"
git add -- "src/story-$ID.txt"
git commit -qm "feat(story-$ID): done"
echo "Implemented story $ID."
echo "<ralph>LEARN: bash scripts should use set -euo pipefail</ralph>"
echo "<ralph>DONE $ID</ralph>"
"#;

#[test]
fn the_three_bash_sandboxes_run_to_completion() {
    let dir = compat_dir();
    for (name, ids) in [
        ("sequential", vec!["1.1", "1.2", "1.3"]),
        ("parallel", vec!["1.1", "1.2", "2.1", "2.2", "2.3", "3.1"]),
        ("batched", vec!["1.1", "1.2", "2.1", "2.2", "3.1"]),
    ] {
        let p = Project::new();
        copy_tree(&dir.join(name), &p.root);
        p.commit_all("sandbox");
        p.agent(TEXT_AGENT);
        if name == "batched" {
            // Ralph v2 keys ralph ignores are named, without failing; the
            // flags that name no output format get stream-json added.
            let v = p.ralph(&["validate"]);
            assert_eq!(v.code, 0, "{v:?}");
            for key in ["testing_phase", "caffeine", "parallel.merge_review_timeout"] {
                assert!(
                    v.stderr
                        .contains(&format!("Ralph v2 key \"{key}\" is ignored")),
                    "{key}: {v:?}"
                );
            }
            assert!(!v.stderr.contains("\"version\""), "{v:?}");
            assert!(v.stderr.contains("--output-format stream-json"), "{v:?}");
        }
        // Ralph v2's scripts pass these flags.
        let r = p.ralph(&["run", "--no-interactive", "--no-dashboard"]);
        assert_eq!(r.code, 0, "{name}: {r:?}");
        assert_eq!(p.completed(), ids, "{name}");
        for id in &ids {
            assert_eq!(p.merges_of(id), 1, "{name} {id}");
        }
        assert_eq!(p.worktrees().len(), 1, "{name}");
        if name == "batched" {
            let hooks = p.read("hooks.log");
            assert!(hooks.contains("Starting 1.1"), "{hooks}");
            assert!(hooks.contains("Finished 3.1: done"), "{hooks}");
        }
        let learned = p.ralph(&["learnings"]);
        assert_eq!(learned.code, 0, "{learned:?}");
        assert!(
            learned.stdout.contains(".ralph/learnings/")
                && learned
                    .stdout
                    .contains(": bash scripts should use set -euo pipefail"),
            "{name}: {learned:?}"
        );
        let state = p.state();
        assert!(
            state["format_version"].as_u64().is_some(),
            "{name}: state upgraded"
        );
    }
}

#[test]
fn the_fixture_state_files_and_progress_load() {
    let fx = compat_dir().join("files");
    for f in [
        "state-empty.json",
        "state-partial.json",
        "state-retrying.json",
        "state-legacy-no-absorbed.json",
    ] {
        let p = Project::with_backlog("1.1 | A\n1.2 | B\n2.1 | C\n", "{}");
        p.write(
            ".ralph/state.json",
            &fs::read_to_string(fx.join(f)).unwrap(),
        );
        let r = p.ralph(&["status", "--json"]);
        assert_eq!(r.code, 0, "{f}: {r:?}");
        // What the old file says is done is what ralph reports as done.
        let old: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(fx.join(f)).unwrap()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(v["done"], old["completed_stories"], "{f}: {r:?}");
    }
    // No state file but a progress.txt: its DONE lines seed the state.
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n2.1 | C\n", "{}");
    p.write(
        "progress.txt",
        &fs::read_to_string(fx.join("progress-legacy.txt")).unwrap(),
    );
    let r = p.ralph(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["done"], serde_json::json!(["1.1", "1.2", "2.1"]), "{r:?}");
    // The queue and config fixtures validate.
    let p = Project::new();
    p.write(
        ".ralph/stories.txt",
        &fs::read_to_string(fx.join("stories.txt")).unwrap(),
    );
    p.write(
        ".ralph/config.json",
        &fs::read_to_string(fx.join("config.json")).unwrap(),
    );
    copy_tree(&fx.join("specs"), &p.root.join("specs"));
    for id in ["1.2", "2.2", "3.1"] {
        let epic = &id[..1];
        if !p.root.join(format!("specs/epic-{epic}")).exists()
            || fs::read_dir(p.root.join(format!("specs/epic-{epic}")))
                .unwrap()
                .all(|e| {
                    !e.unwrap()
                        .file_name()
                        .to_string_lossy()
                        .starts_with(&format!("story-{id}-"))
                })
        {
            p.write(&format!("specs/epic-{epic}/story-{id}-x.md"), "# spec\n");
        }
    }
    // `validate` also checks the agent CLI is installed.
    p.agent("done_");
    let r = p.ralph(&["validate"]);
    assert_eq!(r.code, 0, "{r:?}");
}
