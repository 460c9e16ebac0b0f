//! Issue 12 through the real binary: a story that fails for good is split
//! into sub-stories that land in its place, and a timeout leaves a lesson.

use std::fs;

use crate::harness::*;

/// The fake agent: a decomposition prompt gets the answer the test left in
/// `$SCRATCH/answer.json` (one stream-json result line); story 1.1 and
/// every ID listed in `$SCRATCH/failing` fail; the rest commit and say DONE.
const AGENT: &str = r#"
if grep -q "Split it into smaller sub-stories" "$PROMPT_FILE"; then
  echo "split $RALPH_STORY" >> "$SCRATCH/calls"
  cat "$SCRATCH/answer.json"
  exit 0
fi
echo "$ID" >> "$SCRATCH/calls"
if grep -qx "$ID" "$SCRATCH/failing"; then
  result "too big <ralph>FAIL $ID: too big</ralph>"
  exit 0
fi
commit_file "src/$ID.txt"; done_
"#;

fn block(id: &str, deps: &str) -> String {
    format!(
        "<ralph>SUBSTORY_START {id}</ralph>\n---\nid: \"{id}\"\ntitle: \"Part {id}\"\nstatus: pending\ndepends_on: [{deps}]\n---\n# Part {id}\n\nDo part {id}.\n<ralph>SUBSTORY_END {id}</ralph>\n"
    )
}

fn project(config: &str, answer: &str, failing: &[&str]) -> Project {
    let p = Project::with_backlog("# [batch:1]\n1.1 | Big\n1.2 | After\n1.3 | Apart\n", config);
    // 1.2 waits for 1.1; 1.3 for nothing.
    p.write(
        "specs/epic-1/story-1.2-spec.md",
        "---\nid: \"1.2\"\ntitle: \"After\"\nstatus: pending\ndepends_on: [\"1.1\"]\n---\n\n# Story 1.2\n",
    );
    p.commit_all("backlog");
    agent(&p, answer, &failing.join("\n"));
    p
}

/// `AGENT` on `p`, answering a split with `answer` (as a stream-json
/// result line) and failing the stories on the lines of `failing`.
fn agent(p: &Project, answer: &str, failing: &str) {
    p.agent(AGENT);
    let line = serde_json::json!({
        "type": "result", "subtype": "success", "is_error": false, "result": answer,
        "usage": {"input_tokens": 50, "output_tokens": 40}, "total_cost_usd": 0.02
    });
    fs::write(p.scratch.join("answer.json"), format!("{line}\n")).unwrap();
    fs::write(p.scratch.join("failing"), format!("{failing}\n")).unwrap();
}

fn calls(p: &Project) -> Vec<String> {
    p.scratch_text("calls")
        .lines()
        .map(str::to_string)
        .collect()
}

const SPLIT: &str =
    r#"{ "loop": { "max_retries": 1, "grace_seconds": 1 }, "decomposition": { "enabled": true } }"#;

#[test]
fn a_story_failing_for_good_is_split_and_its_dependent_waits_for_every_part() {
    let answer = format!(
        "{}{}<ralph>DECOMPOSE_DONE 1.1: 2 sub-stories</ralph>",
        block("1.1.1", ""),
        block("1.1.2", "\"1.1.1\"")
    );
    let p = project(SPLIT, &answer, &["1.1"]);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("[split] 1.1 is replaced by 1.1.1, 1.1.2"),
        "{r:?}"
    );
    let calls = calls(&p);
    let at = |c: &str| {
        calls
            .iter()
            .position(|x| x == c)
            .unwrap_or_else(|| panic!("{c} in {calls:?}"))
    };
    assert!(at("1.1") < at("split 1.1"), "{calls:?}");
    assert!(at("split 1.1") < at("1.1.1"), "{calls:?}");
    assert!(at("1.1.1") < at("1.1.2"), "{calls:?}");
    // The parent's dependent waited for both parts, not for the split.
    assert!(at("1.1.2") < at("1.2"), "{calls:?}");
    for id in ["1.1.1", "1.1.2", "1.2", "1.3"] {
        assert_eq!(p.merges_of(id), 1, "{id}");
    }
    let queue = p.file_on_main(".ralph/stories.txt").unwrap();
    assert!(
        queue.contains("x 1.1 | Big\n1.1.1 | Part 1.1.1\n1.1.2 | Part 1.1.2\n"),
        "{queue}"
    );
    let spec = p
        .file_on_main("specs/epic-1/story-1.1.2-part-1-1-2.md")
        .expect("the child's spec is on main");
    assert!(spec.contains("depends_on: [\"1.1.1\"]"), "{spec}");
    assert_eq!(
        p.state()["decomposed_stories"]["1.1"],
        serde_json::json!(["1.1.1", "1.1.2"])
    );
    assert_eq!(p.kinds("1.1"), ["first", "decompose"]);
    // A crash between the split's landing and the state's save loses the
    // record; the next run finds it again from the backlog.
    let mut state = p.state();
    state["decomposed_stories"] = serde_json::json!({});
    fs::write(
        p.root.join(".ralph/state.json"),
        serde_json::to_string_pretty(&state).unwrap(),
    )
    .unwrap();
    assert_eq!(p.ralph(&["run"]).code, 0);
    assert_eq!(
        p.state()["decomposed_stories"]["1.1"],
        serde_json::json!(["1.1.1", "1.1.2"])
    );
}

#[test]
fn the_run_after_a_split_keeps_to_the_stories_resume_left_out() {
    let answer = format!("{}<ralph>DECOMPOSE_DONE 1.1: 1</ralph>", block("1.1.1", ""));
    let p = Project::with_backlog("# [batch:1]\n0.1 | Before\n1.1 | Big\n", SPLIT);
    p.commit_all("backlog");
    agent(&p, &answer, "1.1");
    let r = p.ralph(&["run", "-r", "1.1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.merges_of("1.1.1"), 1, "{r:?}");
    // 0.1 stood before the resume point: the reloaded run leaves it out too.
    assert!(!calls(&p).contains(&"0.1".to_string()), "{:?}", calls(&p));
    assert_eq!(p.merges_of("0.1"), 0);
}

#[test]
fn a_malformed_answer_changes_nothing_and_the_story_fails() {
    // A sub-story that depends on a story nobody knows.
    let answer = format!(
        "{}<ralph>DECOMPOSE_DONE 1.1: 1</ralph>",
        block("1.1.1", "\"9.9\"")
    );
    let p = project(SPLIT, &answer, &["1.1"]);
    let before = p.file_on_main(".ralph/stories.txt").unwrap();
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("decomposition refused"), "{r:?}");
    assert_eq!(p.file_on_main(".ralph/stories.txt").unwrap(), before);
    assert!(p
        .file_on_main("specs/epic-1/story-1.1.1-part-1-1-1.md")
        .is_none());
    assert_eq!(p.story("1.1")["status"], "failed");
    assert_eq!(
        p.story("1.2")["status"].as_str().unwrap_or("pending"),
        "pending"
    );
    assert_eq!(p.merges_of("1.3"), 1);
    let decomposed = p.state()["decomposed_stories"].clone();
    assert_eq!(decomposed, serde_json::json!({}), "nothing was split");
    assert!(!calls(&p).contains(&"1.2".to_string()), "1.2 waits for 1.1");
    // One split run, not one per retry.
    assert_eq!(
        calls(&p).iter().filter(|c| c.starts_with("split")).count(),
        1
    );
}

#[test]
fn a_sub_story_at_the_depth_limit_is_not_split_again() {
    let answer = format!("{}<ralph>DECOMPOSE_DONE 1.1: 1</ralph>", block("1.1.1", ""));
    let config = r#"{ "loop": { "max_retries": 1, "grace_seconds": 1 }, "decomposition": { "enabled": true, "max_depth": 1 } }"#;
    let p = project(config, &answer, &["1.1", "1.1.1"]);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    let calls = calls(&p);
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.starts_with("split"))
            .collect::<Vec<_>>(),
        ["split 1.1"],
        "{calls:?}"
    );
    assert_eq!(p.story("1.1.1")["status"], "failed");
    assert_eq!(p.merges_of("1.2"), 0, "1.2 waits for the failed part");
}

/// A timeout leaves a lesson: the postmortem's LEARN reaches the retry's
/// prompt and the learnings files.
#[test]
fn a_timeout_postmortem_lesson_reaches_the_retry() {
    let config = r#"{ "loop": { "max_retries": 2, "grace_seconds": 1, "timeout_seconds": 2 }, "postmortem": { "enabled": true, "window_seconds": 60 } }"#;
    let p = Project::with_backlog("1.1 | Slow\n", config);
    p.commit_all("backlog");
    p.agent(
        r#"
if grep -q "ran out of time" "$PROMPT_FILE"; then
  echo postmortem >> "$SCRATCH/calls"
  result "<ralph>LEARN: [Timeout postmortem for 1.1] run the quick test suite, not the full one</ralph> <ralph>TIMEOUT_POSTMORTEM_DONE 1.1</ralph>"
  exit 0
fi
echo "$ID $N" >> "$SCRATCH/calls"
if [ "$N" = 1 ]; then exec sleep 600; fi
cp "$PROMPT_FILE" "$SCRATCH/retry-prompt"
commit_file "src/$ID.txt"; done_
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(calls(&p), ["1.1 1", "postmortem", "1.1 2"]);
    let prompt = fs::read_to_string(p.scratch.join("retry-prompt")).unwrap();
    assert!(
        prompt.contains("run the quick test suite, not the full one"),
        "{prompt}"
    );
    let learned = p.ralph(&["learnings"]);
    assert!(learned.stdout.contains("quick test suite"), "{learned:?}");
}

/// `ralph decompose ID` by hand: the split lands, nothing else runs.
#[test]
fn decompose_by_hand_lands_the_split_and_stops() {
    let answer = format!(
        "{}{}<ralph>DECOMPOSE_DONE 1.1: 2</ralph>",
        block("1.1.1", ""),
        block("1.1.2", "")
    );
    let p = project(SPLIT, &answer, &[]);
    let r = p.ralph(&["decompose", "1.1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(calls(&p), ["split 1.1"]);
    let queue = p.file_on_main(".ralph/stories.txt").unwrap();
    assert!(
        queue.contains("x 1.1 | Big\n1.1.1 | Part 1.1.1\n"),
        "{queue}"
    );
    let s = p.ralph(&["stories"]);
    assert!(s.stdout.contains("1.1.2"), "{s:?}");
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    for id in ["1.1.1", "1.1.2", "1.2", "1.3"] {
        assert_eq!(p.merges_of(id), 1, "{id}");
    }
}

/// One stream-json event per line, as the fake agent prints them.
fn stream(events: &[serde_json::Value]) -> String {
    events.iter().map(|e| format!("{e}\n")).collect()
}

fn assistant(text: &str) -> serde_json::Value {
    serde_json::json!({"type": "assistant", "message": {"role": "assistant",
        "content": [{"type": "text", "text": text}]}, "parent_tool_use_id": null})
}

fn result_event(text: &str) -> serde_json::Value {
    serde_json::json!({"type": "result", "subtype": "success", "is_error": false,
        "num_turns": 3, "result": text, "total_cost_usd": 0.02,
        "usage": {"input_tokens": 50, "output_tokens": 40}})
}

/// Issue 21: a real multi-message session (shaped as
/// `tests/fixtures/agents/claude/allowed-bash.stdout`) gives the blocks in
/// an earlier assistant message and only DECOMPOSE_DONE in the result. The
/// blocks are read from the agent's own text, never from tool output (here
/// a spec quoting an old answer with a block of its own).
#[test]
fn a_split_given_in_an_earlier_message_lands() {
    let p = project(SPLIT, "unused", &["1.1"]);
    let done = "<ralph>DECOMPOSE_DONE 1.1: 2 sub-stories</ralph>";
    let old = block("1.1.9", "");
    let answer = stream(&[
        serde_json::json!({"type": "system", "subtype": "init", "session_id": "s-1"}),
        assistant("I'll read the spec and the last attempt first."),
        serde_json::json!({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat old-answer.md"}}]},
            "parent_tool_use_id": null}),
        serde_json::json!({"type": "user", "message": {"role": "user", "content": [
            {"tool_use_id": "t1", "type": "tool_result", "content": old, "is_error": false}]},
            "parent_tool_use_id": null}),
        assistant(&format!(
            "Two parts:\n{}{}",
            block("1.1.1", ""),
            block("1.1.2", "\"1.1.1\"")
        )),
        assistant(done),
        result_event(done),
    ]);
    fs::write(p.scratch.join("answer.json"), answer).unwrap();
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("[split] 1.1 is replaced by 1.1.1, 1.1.2"),
        "{r:?}"
    );
    for id in ["1.1.1", "1.1.2", "1.2", "1.3"] {
        assert_eq!(p.merges_of(id), 1, "{id}");
    }
    assert_eq!(
        p.state()["decomposed_stories"]["1.1"],
        serde_json::json!(["1.1.1", "1.1.2"])
    );
    let queue = p.file_on_main(".ralph/stories.txt").unwrap();
    assert!(!queue.contains("1.1.9"), "{queue}");
}

/// Issue 21: `ralph decompose ID` whose reply is refused leaves the story
/// as it was (attempts, retry count, status) and never runs it as a normal
/// attempt, here while the story it depends on is still pending. A title
/// with a line break is one such refusal, naming the sub-story.
#[test]
fn a_refused_split_by_hand_changes_nothing_and_runs_nothing() {
    let answer = format!(
        "{}<ralph>SUBSTORY_START 1.2.2</ralph>\n---\ntitle: \"Two\\n3.9 | lines\"\n---\nx\n<ralph>SUBSTORY_END 1.2.2</ralph>\n<ralph>DECOMPOSE_DONE 1.2: 2</ralph>",
        block("1.2.1", "")
    );
    let p = project(SPLIT, &answer, &[]);
    let queue = p.file_on_main(".ralph/stories.txt").unwrap();
    let r = p.ralph(&["decompose", "1.2"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("sub-story 1.2.2") && r.stderr.contains("line break"),
        "{r:?}"
    );
    assert_eq!(calls(&p), ["split 1.2"], "only the split ran");
    assert_eq!(p.merges_of("1.2"), 0);
    assert_eq!(p.file_on_main(".ralph/stories.txt").unwrap(), queue);
    let story = p.story("1.2");
    assert_eq!(story["status"], "pending", "{story}");
    assert_eq!(story["attempts"], 0, "{story}");
    assert!(story["note"].is_null(), "no split note is left: {story}");
    assert_eq!(p.state()["retry_count"], 0);
    assert_eq!(p.state()["decomposed_stories"], serde_json::json!({}));
    // The next run runs the stories in order, 1.2 after 1.1, as a first attempt.
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let calls = calls(&p);
    let at = |c: &str| calls.iter().position(|x| x == c).unwrap();
    assert!(at("1.1") < at("1.2"), "{calls:?}");
    assert_eq!(p.kinds("1.2"), ["decompose", "first"]);
}

/// Issue 21: a reply over the size limit is refused for its size, saying
/// so, though it holds good blocks and DECOMPOSE_DONE.
#[test]
fn a_split_reply_over_the_size_limit_is_refused_for_its_size() {
    let p = project(SPLIT, "unused", &[]);
    let done = format!("{}<ralph>DECOMPOSE_DONE 1.1: 1</ralph>", block("1.1.1", ""));
    let chatter = "thinking out loud. ".repeat(30_000);
    let answer = stream(&[
        assistant(&chatter),
        assistant(&chatter),
        assistant(&done),
        result_event(&done),
    ]);
    fs::write(p.scratch.join("answer.json"), answer).unwrap();
    let r = p.ralph(&["decompose", "1.1"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("bytes of text, over the limit of 1048576 bytes"),
        "{r:?}"
    );
    assert!(p
        .file_on_main("specs/epic-1/story-1.1.1-part-1-1-1.md")
        .is_none());
    assert_eq!(p.story("1.1")["attempts"], 0);
}
