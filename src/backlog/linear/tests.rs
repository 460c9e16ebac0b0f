use super::*;

fn issue(identifier: &str, state: &str, labels: &[&str]) -> Issue {
    Issue {
        id: format!("uuid-{identifier}"),
        identifier: identifier.into(),
        title: format!("Title {identifier}"),
        description: "Do it.".into(),
        state: state.into(),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        ..Issue::default()
    }
}

fn snap(issues: Vec<Issue>) -> Snapshot {
    Snapshot {
        team: "ENG".into(),
        label: "ralph".into(),
        issues,
        ..Snapshot::default()
    }
}

#[test]
fn blocks_relations_and_sub_issues_are_dependencies() {
    let mut a = issue("ENG-1", "backlog", &["ralph"]);
    a.blocks = vec!["ENG-2".into()];
    let mut b = issue("ENG-2", "unstarted", &["ralph"]);
    b.blocked_by = vec!["ENG-1".into()];
    let mut parent = issue("ENG-10", "triage", &["ralph"]);
    parent.children = vec!["ENG-3".into(), "ENG-4".into()];
    let child = issue("ENG-3", "completed", &["ralph"]);
    let outside = issue("ENG-4", "started", &["bug"]);
    let (backlog, problems) = to_backlog(&snap(vec![parent, b, a, child, outside]));
    let ids: Vec<&str> = backlog.stories.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["ENG-1", "ENG-2", "ENG-3", "ENG-10"], "by number");
    assert_eq!(backlog.stories[1].depends_on, ["ENG-1"], "said twice, once");
    assert_eq!(backlog.stories[3].depends_on, ["ENG-3"]);
    assert!(backlog.stories[2].prd_passes, "completed is done");
    assert!(!backlog.stories[0].prd_passes, "backlog runs");
    assert_eq!(
        backlog.stories[0].prd_spec.as_deref(),
        Some("# Story ENG-1: Title ENG-1\n\nDo it.\n")
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    let p = problems[0].to_string();
    assert!(
        p.contains("ENG-10") && p.contains("ENG-4") && p.contains("sub-issue"),
        "{p}"
    );
}

#[test]
fn the_first_state_of_a_type_is_the_lowest_position() {
    let state = |id: &str, kind: &str, position: f64| State {
        id: id.into(),
        kind: kind.into(),
        position,
    };
    let team = Team {
        id: "t".into(),
        states: vec![
            state("review", "started", 2.0),
            state("doing", "started", 1.0),
            state("done", "completed", 0.0),
        ],
        labels: Vec::new(),
    };
    assert_eq!(team.first_state("started").unwrap().id, "doing");
    assert_eq!(team.first_state("completed").unwrap().id, "done");
    assert!(team.first_state("triage").is_none());
}

#[test]
fn what_is_queued_or_made_needs_no_telling() {
    let landed = Update::Landed {
        commit: "abc".into(),
        target: "main".into(),
    };
    let open = issue("ENG-1", "unstarted", &["ralph"]);
    let ops = ops_for("ENG-1", "uuid-ENG-1", &landed);
    assert_eq!(
        settled(&ops, &[], Some(&open)),
        [true, false, false],
        "no failed label to remove"
    );
    assert_eq!(
        settled(&ops, &ops[1..], Some(&open)),
        [true, true, true],
        "queued"
    );
    let done = issue("ENG-1", "completed", &["ralph"]);
    assert!(settled(&ops, &[], Some(&done)).iter().all(|s| *s));
    // A started issue needs no move; one queued back to unstarted would.
    let started = issue("ENG-1", "started", &["ralph"]);
    let running = ops_for("ENG-1", "u", &Update::Running);
    assert_eq!(settled(&running, &[], Some(&started)), [true, true]);
    // Failed: the comment is made with the label after it.
    let failed = ops_for("ENG-1", "u", &Update::Failed);
    assert_eq!(settled(&failed, &[], Some(&open)), [false, false]);
    let labelled = issue("ENG-1", "started", &["ralph", FAILED]);
    assert_eq!(settled(&failed, &[], Some(&labelled)), [true, true]);
    // A label queued off again is not on.
    let unlabel = ops_for("ENG-1", "u", &Update::Pending);
    assert_eq!(settled(&failed[1..], &unlabel, Some(&labelled)), [false]);
    let mut i = open.clone();
    apply(&failed[1], &mut i);
    apply(&running[1], &mut i);
    assert_eq!(i.labels, ["ralph", FAILED]);
    assert_eq!(i.state, "started");
}

/// A scripted `Http`: answers from `answers` in turn (the last one again
/// once they run out) and counts what it was asked.
struct Script {
    answers: Vec<(u16, String)>,
    asked: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl crate::backlog::github::poll::Http for Script {
    fn request(
        &mut self,
        _req: crate::backlog::github::poll::Req<'_>,
    ) -> Result<crate::backlog::github::poll::Resp, String> {
        let n = self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let (status, body) = self.answers[n.min(self.answers.len() - 1)].clone();
        Ok(crate::backlog::github::poll::Resp {
            status,
            body,
            ..Default::default()
        })
    }
}

#[test]
fn a_rate_limit_keeps_the_snapshot_and_asks_nothing_before_its_reset() {
    use crate::backlog::tracker::Tracker;
    let dir = tempfile::tempdir().unwrap();
    let page = serde_json::json!({"data": {
        "teams": {"nodes": [{"id": "t", "states": {"nodes": []}, "labels": {"nodes": []}}]},
        "issues": {"nodes": [{"id": "u1", "identifier": "ENG-1", "title": "A",
            "state": {"type": "unstarted"}, "labels": {"nodes": [{"name": "ralph"}]}}],
            "pageInfo": {"hasNextPage": false}}}});
    let limited = r#"{"errors": [{"message": "Rate limit exceeded", "extensions": {"code": "RATELIMITED"}}]}"#;
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let settings = crate::config::LinearSettings {
        team: "ENG".into(),
        label: "ralph".into(),
        api_url: "http://linear".into(),
        poll_secs: 0,
    };
    let mut linear = source::Linear::with_http(
        dir.path(),
        settings,
        Box::new(Script {
            answers: vec![(200, page.to_string()), (400, limited.into())],
            asked: asked.clone(),
        }),
    );
    let first = linear.read(1000);
    assert!(first.stale.is_none() && first.problems.is_empty());
    assert_eq!(first.backlog.unwrap().stories[0].id, "ENG-1");
    let second = linear.read(1001);
    assert!(second.stale.unwrap().contains("rate limited"));
    assert_eq!(
        second.backlog.unwrap().stories.len(),
        1,
        "the snapshot stands"
    );
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 2);
    let third = linear.read(1030);
    assert!(third.stale.is_some());
    assert_eq!(
        asked.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "nothing asked before the reset (60 s without a header)"
    );
    linear.read(1062);
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 3);
}
