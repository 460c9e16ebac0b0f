//! Faults outside the story that must not be waited on forever (issue 21):
//! a model API that keeps failing, a postmortem that would outlive its
//! attempt.

use std::fs;

use crate::harness::*;

/// What Claude Code prints when it gave up on an API answering 500 (as in
/// the recordings: `api_retry`, then a made-up assistant line with
/// `"error"`, then an error result), exit 1.
const API_500: &str = r#"
echo "claude $ID" >> "$SCRATCH/calls"
printf '%s\n' '{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":5,"error_status":500,"error":"server_error"}'
printf '%s\n' '{"type":"assistant","message":{"model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: 500 upstream proxy is down"}]},"error":"server_error"}'
printf '%s\n' '{"type":"result","subtype":"success","is_error":true,"api_error_status":500,"num_turns":1,"result":"API Error: 500 upstream proxy is down","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}'
exit 1
"#;

/// Before the fix the run paused 5, 10, 20 and 40 s and ran the agent five
/// times (more with more stories: the count was per story) before asking
/// for a person; with `limits.max_wait_hours: 0` it now waits not at all.
#[test]
fn a_model_api_that_keeps_failing_stops_the_run_naming_the_error() {
    let config = r#"{ "loop": { "max_retries": 2 }, "limits": { "max_wait_hours": 0 } }"#;
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n", config);
    p.commit_all("backlog");
    p.agent(API_500);
    let r = p.ralph(&["run"]);
    assert_eq!(
        r.code, 1,
        "a person is needed, not ralph's own failure: {r:?}"
    );
    let all = r.all();
    assert!(
        all.contains("API Error: 500 upstream proxy is down"),
        "{all}"
    );
    assert!(all.contains("limits.max_wait_hours"), "{all}");
    assert_eq!(
        p.scratch_text("calls"),
        "claude 1.1\n",
        "no retry past the bound"
    );
    for id in ["1.1", "1.2"] {
        let s = p.story(id);
        assert_eq!(s["attempts"].as_u64().unwrap_or(0), 0, "not charged: {s}");
        assert_ne!(s["status"], "failed", "{s}");
    }
}

#[test]
fn past_the_bound_a_dead_api_hands_over_to_the_fallback_agent() {
    let config = r#"{ "loop": { "max_retries": 1 }, "agent": { "fallback": ["codex"] },
      "limits": { "max_wait_hours": 0 } }"#;
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n", config);
    p.commit_all("backlog");
    p.agent(API_500);
    p.agent_named("codex", CODEX_DONE);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        fs::read_to_string(p.scratch.join("calls")).unwrap(),
        "claude 1.1\ncodex 1.1\ncodex 1.2\n"
    );
    assert!(
        r.all().contains("new attempts use the codex agent"),
        "{r:?}"
    );
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    assert_eq!(p.story("1.1")["attempts"], 0);
}

/// A postmortem runs no longer than the attempt it explains: with `-t 1`
/// and `postmortem.window_seconds` at an hour, a postmortem that hangs is
/// stopped at the attempt's timeout (before the fix it ran for the whole
/// window: this test hit the harness's five-minute guard).
#[test]
fn a_postmortem_is_bounded_by_the_attempts_timeout() {
    let config = r#"{ "loop": { "max_retries": 1, "grace_seconds": 1 },
      "postmortem": { "enabled": true, "window_seconds": 3600 } }"#;
    let p = Project::with_backlog("1.1 | A\n", config);
    p.commit_all("backlog");
    p.agent(
        r#"
if [ -n "$ID" ]; then echo "attempt $ID" >> "$SCRATCH/calls"; else echo postmortem >> "$SCRATCH/calls"; fi
say "working"
exec sleep 3600
"#,
    );
    let r = p.ralph(&["run", "-t", "1"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(p.scratch_text("calls"), "attempt 1.1\npostmortem\n");
    let log = p.read("ralph.log");
    assert!(
        log.contains("postmortem of story 1.1 attempt 1: stopped"),
        "{log}"
    );
    assert_eq!(p.story("1.1")["history"][0]["outcome"], "timeout");
}
