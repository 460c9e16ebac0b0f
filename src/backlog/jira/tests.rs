use super::*;

fn issue(key: &str, category: &str, labels: &[&str]) -> Issue {
    Issue {
        key: key.into(),
        summary: format!("Summary of {key}"),
        description: format!("Do {key}."),
        category: category.into(),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        ..Issue::default()
    }
}

fn snap(issues: Vec<Issue>) -> Snapshot {
    Snapshot {
        project: "SHOP".into(),
        label: "ralph".into(),
        issues,
        not_before: None,
    }
}

#[test]
fn links_either_side_and_subtasks_make_dependencies_and_done_is_the_category() {
    let mut a = issue("SHOP-1", "new", &["ralph"]);
    let mut b = issue("SHOP-2", "indeterminate", &["ralph"]);
    let c = issue("SHOP-10", "done", &["ralph"]);
    let mut d = issue("SHOP-3", "new", &["ralph"]);
    // SHOP-2 waits for SHOP-1 (its inward side); SHOP-3 waits for SHOP-2
    // (SHOP-2's outward side); SHOP-1 is the parent of SHOP-10.
    b.blocked_by = vec!["SHOP-1".into()];
    b.blocks = vec!["SHOP-3".into()];
    a.subtasks = vec!["SHOP-10".into()];
    d.labels.push("x".into());
    let other = issue("SHOP-4", "new", &["bug"]);
    let (backlog, problems) = to_backlog(&snap(vec![d, c, b, a, other]));
    assert!(problems.is_empty(), "{problems:?}");
    let ids: Vec<&str> = backlog.stories.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["SHOP-1", "SHOP-2", "SHOP-3", "SHOP-10"]);
    let s = &backlog.stories;
    assert_eq!(s[0].depends_on, ["SHOP-10"]);
    assert_eq!(s[1].depends_on, ["SHOP-1"]);
    assert_eq!(s[2].depends_on, ["SHOP-2"]);
    assert!(s[3].prd_passes && !s[1].prd_passes);
    assert!(s[0]
        .prd_spec
        .as_deref()
        .unwrap()
        .starts_with("# Story SHOP-1: Summary of SHOP-1\n\nDo SHOP-1."));
}

#[test]
fn a_blocker_or_subtask_without_the_label_is_a_problem_naming_both() {
    let mut a = issue("SHOP-1", "new", &["ralph"]);
    a.blocked_by = vec!["SHOP-8".into()];
    a.subtasks = vec!["SHOP-9".into()];
    let (backlog, problems) = to_backlog(&snap(vec![a, issue("SHOP-8", "new", &[])]));
    assert_eq!(problems.len(), 2, "{problems:?}");
    let all = format!("{problems:?}");
    assert!(all.contains("SHOP-8 blocks it") && all.contains("SHOP-9 is its subtask"));
    assert!(all.contains("story SHOP-1"));
    assert!(backlog.stories[0].depends_on.is_empty());
}

#[test]
fn writes_for_each_update_and_what_is_settled() {
    let landed = Update::Landed {
        commit: "abc123".into(),
        target: "main".into(),
    };
    let ops = ops_for("SHOP-1", "Done", &landed);
    assert_eq!(ops.len(), 3);
    assert!(matches!(&ops[1], Op::Remark { body, .. } if body.contains("abc123")));
    assert_eq!(
        ops[2],
        Op::Transition {
            issue: "SHOP-1".into(),
            to: Target::Named("Done".into())
        }
    );
    let open = issue("SHOP-1", "new", &["ralph"]);
    assert_eq!(settled(&ops, &[], Some(&open)), [true, false, false]);
    // Done in Jira: nothing to write, the comment with it.
    let done = issue("SHOP-1", "done", &["ralph"]);
    assert_eq!(settled(&ops, &[], Some(&done)), [true, true, true]);
    // Queued: settled; a later queued transition of the slot wins.
    assert_eq!(settled(&ops, &ops, Some(&open)), [true, true, true]);
    let running = ops_for("SHOP-1", "Done", &Update::Running);
    let both: Vec<Op> = ops.iter().chain(&running).cloned().collect();
    assert_eq!(settled(&ops, &both, Some(&open)), [true, true, false]);
    // Started: in progress already needs no transition.
    let started = issue("SHOP-1", "indeterminate", &["ralph"]);
    assert_eq!(settled(&running, &[], Some(&started)), [true, true]);
    let failed = ops_for("SHOP-1", "Done", &Update::Failed);
    let mut labelled = open.clone();
    for op in &failed {
        apply(op, &mut labelled);
    }
    assert!(labelled.labels.contains(&FAILED.to_string()));
    assert_eq!(settled(&failed, &[], Some(&labelled)), [true, true]);
}
