//! Fix-ups (issue 11): finished work that could not land goes back to its
//! agent with what went wrong — the failing validation's output, the
//! session to resume — and that note survives a killed run.

use std::time::Duration;

use crate::crash::{kill_session, spawn};
use crate::harness::*;

/// A gate that fails until the story's tree has `ok.txt`, after 300 lines
/// of output and a complaint; another command passes before it.
const GATED: &str = r#"{ "loop": { "max_retries": 3, "grace_seconds": 1 },
  "validation": { "commands": [
    { "name": "lint", "cmd": "printf 'lint %s\\n' passed", "required": true },
    { "name": "has-ok", "cmd": "seq 1 300; echo 'MISSING ok.txt'; test -f ok.txt", "required": true } ] } }"#;

#[test]
fn a_validation_failure_is_fixed_up_from_the_merged_tree_with_its_output() {
    let p = Project::with_backlog("1.1 | Gate\n", GATED);
    p.commit_all("backlog");
    p.agent(
        r#"
cp "$PROMPT_FILE" "$SCRATCH/prompt-$N"
git log -1 --format=%s > "$SCRATCH/head-$N"
if [ "$N" = 1 ]; then
  commit_file "src/a.txt"
else
  echo ok > ok.txt; git add ok.txt; git commit -qm "fix(story-1.1): ok.txt"
fi
done_
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert_eq!(p.kinds("1.1"), vec!["first", "fixup"]);
    // The fix-up began on the merged tree (ralph's merge of main and the
    // story's work), not on a fresh tip.
    assert_eq!(
        p.scratch_text("head-2").trim(),
        "fix-up(story-1.1): merge main into the story's work"
    );
    let fix = p.scratch_text("prompt-2");
    for want in [
        "'has-ok'",
        "`seq 1 300; echo 'MISSING ok.txt'; test -f ok.txt`",
        "\n300\nMISSING ok.txt\n```",
        ".ralph/logs/1.1/validation-1.log",
    ] {
        assert!(fix.contains(want), "{want:?} missing from:\n{fix}");
    }
    // The tail: the last 200 lines of the failing command's own output.
    assert!(fix.contains("\n102\n") && !fix.contains("\n101\n"), "{fix}");
    assert!(!fix.contains("lint passed"), "{fix}");
    // The whole output is kept.
    let log = p.read(".ralph/logs/1.1/validation-1.log");
    assert!(
        log.contains("lint passed\n1\n2\n") && log.contains("MISSING ok.txt"),
        "{log}"
    );
    // The validation failure counted; the fix-up that landed did not.
    assert_eq!(p.story("1.1")["attempts"], 1);
    assert!(
        p.story("1.1").get("note").is_none(),
        "a landed story has no note"
    );
}

/// A Claude-format agent that reports a session in `system/init` and
/// records its arguments.
const SESSION_AGENT: &str = r#"
printf '%s\n' "$@" > "$SCRATCH/argv-$N"
cp "$PROMPT_FILE" "$SCRATCH/prompt-$N"
printf '{"type":"system","subtype":"init","session_id":"sess-%s-%s","tools":["Bash"]}\n' "$ID" "$N"
if [ "$N" = 1 ]; then
  commit_file "src/a.txt"
else
  echo ok > ok.txt; git add ok.txt; git commit -qm "fix(story-1.1): ok.txt"
fi
done_
"#;

#[test]
fn a_fixup_resumes_the_session_of_the_work_it_fixes() {
    let p = Project::with_backlog("1.1 | Gate\n", GATED);
    p.commit_all("backlog");
    p.agent(SESSION_AGENT);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let argv: Vec<String> = p
        .scratch_text("argv-2")
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(argv[..2], ["--resume", "sess-1.1-1"], "{argv:?}");
    assert!(argv.contains(&"--print".to_string()), "{argv:?}");
    assert!(!p.scratch_text("argv-1").contains("--resume"));
    // The resumed conversation has the spec: the prompt is the short one.
    let fix = p.scratch_text("prompt-2");
    assert!(
        fix.contains("MISSING ok.txt") && !fix.contains("Do Gate."),
        "{fix}"
    );
    assert!(p.scratch_text("prompt-1").contains("Do Gate."));
    let hist = &p.story("1.1")["history"];
    assert_eq!(hist[0]["session_id"], "sess-1.1-1");
    assert_eq!(hist[1]["session_id"], "sess-1.1-2");
    assert_eq!(hist[1]["resumed"], true);

    // retry.resume_session false: a new session, told the whole story.
    let off = GATED.replacen(
        "\"loop\"",
        "\"retry\": { \"resume_session\": false }, \"loop\"",
        1,
    );
    let p = Project::with_backlog("1.1 | Gate\n", &off);
    p.commit_all("backlog");
    p.agent(SESSION_AGENT);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!p.scratch_text("argv-2").contains("--resume"));
    let fix = p.scratch_text("prompt-2");
    assert!(
        fix.contains("MISSING ok.txt") && fix.contains("Do Gate."),
        "{fix}"
    );
    assert_eq!(p.kinds("1.1"), vec!["first", "fixup"]);
}

#[test]
fn a_fixup_note_survives_a_kill_and_its_interrupted_work_is_kept() {
    let p = Project::with_backlog("1.1 | Gate\n", GATED);
    p.commit_all("backlog");
    p.agent(
        r#"
cp "$PROMPT_FILE" "$SCRATCH/prompt-$N"
case "$N" in
  1) commit_file "src/a.txt" ;;
  2) echo "half done" > wip.txt
     touch "$SCRATCH/fixup-started"
     exec sleep 1000 ;;
  *) echo ok > ok.txt; git add ok.txt; git commit -qm "fix(story-1.1): ok.txt" ;;
esac
done_
"#,
    );
    let mut child = spawn(&p, &["run"]);
    wait_until("the fix-up to start", Duration::from_secs(60), || {
        p.scratch.join("fixup-started").exists()
    });
    kill_session(child.id() as i32);
    let _ = child.wait();
    // The note is on disk: the fix-up and the output it is about.
    let note = &p.story("1.1")["note"];
    assert_eq!(note["fixup"]["cause"]["kind"], "validation", "{note}");
    assert!(note["fixup"]["cause"]["tail"]
        .as_str()
        .unwrap()
        .contains("MISSING ok.txt"));

    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    // After the restart the story got its fix-up again, told what the
    // killed one left and where it is kept.
    let again = p.scratch_text("prompt-3");
    let unc = "refs/ralph/attempts/1.1/2-uncommitted";
    for want in [
        "MISSING ok.txt",
        unc,
        "refs/ralph/attempts/1.1/2-interrupted",
    ] {
        assert!(again.contains(want), "{want} missing from:\n{again}");
    }
    assert_eq!(
        git(&p.root, &["show", &format!("{unc}:wip.txt")]),
        "half done\n"
    );
    assert_eq!(p.kinds("1.1"), vec!["first", "fixup"]);
    assert_eq!(p.story("1.1")["history"][1]["number"], 3);
}

#[test]
fn a_fixup_whose_work_is_gone_starts_over_as_a_redo() {
    let p = Project::with_backlog("1.1 | Gate\n", GATED);
    p.commit_all("backlog");
    p.agent(
        r#"
cp "$PROMPT_FILE" "$SCRATCH/prompt-$N"
if [ "$N" = 1 ]; then
  commit_file "src/a.txt"
else
  commit_file "src/a.txt"; echo ok > ok.txt; git add ok.txt; git commit -qm "fix(story-1.1): ok.txt"
fi
done_
"#,
    );
    let r = p.ralph(&["run", "-n", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        p.story("1.1")["note"]["fixup"]["work"],
        "refs/ralph/attempts/1.1/1"
    );
    // Someone deletes the kept work before the next run.
    git(&p.root, &["update-ref", "-d", "refs/ralph/attempts/1.1/1"]);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert_eq!(p.kinds("1.1"), vec!["first", "redo"]);
    let redo = p.scratch_text("prompt-2");
    assert!(
        redo.contains("Do Gate.")
            && redo.contains("MISSING ok.txt")
            && redo.contains("Handing that work back to you failed"),
        "{redo}"
    );
}
