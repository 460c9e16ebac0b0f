use super::*;

fn issue(n: u64, body: &str, labels: &[&str], state: &str) -> Issue {
    Issue {
        number: n,
        title: format!("Issue {n}"),
        body: body.to_string(),
        state: state.to_string(),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        updated_at: "2026-01-01T00:00:00Z".into(),
        blocked_by_count: None,
        sub_issue_count: None,
        reopened: false,
    }
}

fn snap(issues: Vec<Issue>, links: &[(u64, &[u64], &[u64])]) -> Snapshot {
    Snapshot {
        repo: "o/r".into(),
        label: "ralph".into(),
        pages: vec![Page {
            url: "u".into(),
            etag: None,
            issues,
            next: None,
        }],
        links: links
            .iter()
            .map(|(n, b, s)| {
                (
                    *n,
                    Links {
                        updated_at: String::new(),
                        blocked_by: b.to_vec(),
                        sub_issues: s.to_vec(),
                    },
                )
            })
            .collect(),
        not_before: None,
    }
}

#[test]
fn depends_on_lines_name_issue_numbers() {
    assert_eq!(
        depends_lines("Depends on #3\n- depends on: #4, #5\nno #6"),
        vec![3, 4, 5]
    );
    assert_eq!(depends_lines("This depends on #7"), Vec::<u64>::new());
}

#[test]
fn the_fenced_block_holds_the_frontmatter_keys() {
    let body = "Text\n```ralph\nagent: codex\neffort: Small\nmodel: \"o3\"\n```\nmodel: no";
    let k = fenced_keys(body);
    assert_eq!(k.get("agent").map(String::as_str), Some("codex"));
    assert_eq!(k.get("effort").map(String::as_str), Some("Small"));
    assert_eq!(k.get("model").map(String::as_str), Some("o3"));
    assert!(
        fenced_keys("```\nagent: codex\n```").is_empty(),
        "only a ralph block"
    );
}

#[test]
fn issues_become_stories_with_their_dependencies_and_batches() {
    let s = snap(
        vec![
            issue(1, "", &["ralph"], "closed"),
            issue(2, "Depends on #1", &["ralph", "batch:2"], "open"),
            issue(
                3,
                "```ralph\nagent: codex\neffort: large\n```",
                &["ralph"],
                "open",
            ),
            issue(4, "", &["ralph", "batch:1"], "open"),
            issue(5, "", &["bug"], "open"),
        ],
        &[(3, &[4], &[]), (4, &[], &[2])],
    );
    let (b, problems) = to_backlog(&s);
    assert!(problems.is_empty(), "{problems:?}");
    let ids: Vec<&str> = b.stories.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        ["1", "3", "4", "2"],
        "unbatched first, then batch 1, batch 2"
    );
    let by = |id: &str| b.stories.iter().find(|s| s.id == id).unwrap();
    assert!(by("1").prd_passes, "closed is done");
    assert!(!by("2").prd_passes);
    assert_eq!(by("2").depends_on, ["1"]);
    assert_eq!(by("3").depends_on, ["4"], "blocked by");
    assert_eq!(
        by("4").depends_on,
        ["2"],
        "a parent waits for its sub-issues"
    );
    assert_eq!(by("3").agent, crate::agent::Backend::parse("codex"));
    assert_eq!(by("3").estimation.as_deref(), Some("large"));
    assert!(by("2")
        .prd_spec
        .as_deref()
        .unwrap()
        .starts_with("# Story 2: Issue 2\n"));
    assert_eq!(b.sections.len(), 3);
    assert_eq!(by("2").section, 2);
    assert!(
        b.sections.iter().all(|s| !s.chain),
        "issues are never chained"
    );
}

#[test]
fn a_dependency_on_an_unlabelled_issue_is_a_problem_naming_both() {
    let s = snap(vec![issue(2, "Depends on #9", &["ralph"], "open")], &[]);
    let (b, problems) = to_backlog(&s);
    assert_eq!(b.stories.len(), 1);
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].file, std::path::PathBuf::from("o/r#2"));
    assert!(
        problems[0].message.contains("#9"),
        "{}",
        problems[0].message
    );
}

fn landed_on_main(commit: &str) -> Update {
    Update::Landed {
        commit: commit.into(),
        target: "main".into(),
    }
}

#[test]
fn a_landing_comments_and_closes_unless_a_pull_request_does() {
    let landed = landed_on_main("abc123");
    let ops = ops_for(7, &landed, false);
    assert!(ops.contains(&Op::Close { issue: 7 }));
    assert!(ops
        .iter()
        .any(|o| matches!(o, Op::Comment { body, .. } if body.contains("abc123"))));
    let pr = ops_for(7, &landed, true);
    assert!(!pr
        .iter()
        .any(|o| matches!(o, Op::Close { .. } | Op::Comment { .. })));
    let failed = ops_for(7, &Update::Failed, false);
    assert_eq!(
        failed[0],
        Op::AddLabel {
            issue: 7,
            label: FAILED.into()
        }
    );
}

#[test]
fn a_newer_status_supersedes_queued_labels_but_never_a_comment() {
    let mut q = Vec::new();
    enqueue(&mut q, ops_for(1, &Update::Running, false));
    enqueue(&mut q, ops_for(2, &Update::Running, false));
    let landed = Update::Landed {
        commit: "c".into(),
        target: "main".into(),
    };
    enqueue(&mut q, ops_for(1, &landed, false));
    enqueue(&mut q, ops_for(1, &Update::Failed, false));
    assert!(q.contains(&Op::Close { issue: 1 }));
    assert!(q.iter().any(|o| matches!(o, Op::Comment { issue: 1, .. })));
    assert!(!q.contains(&Op::AddLabel {
        issue: 1,
        label: RUNNING.into()
    }));
    assert!(q.contains(&Op::AddLabel {
        issue: 2,
        label: RUNNING.into()
    }));
}

/// What a journal replays and what counts as told at a run's start rest
/// on this (issue 35, finding 8): a landing is settled once its close is
/// made or queued, never by a label or comment alone.
#[test]
fn a_status_is_settled_when_made_as_last_read_or_queued() {
    let landed = landed_on_main("abc");
    let land = ops_for(5, &landed, false);
    let open = issue(5, "", &["ralph", RUNNING], "open");
    let open_bare = issue(5, "", &["ralph"], "open");
    let closed = issue(5, "", &["ralph"], "closed");
    assert!(!settled(&land, &[], Some(&open)), "open, nothing queued");
    assert!(
        !settled(&land, &[], Some(&open_bare)),
        "labels right, yet open"
    );
    assert!(settled(&land, &[], Some(&closed)), "made");
    let reopened = Issue {
        reopened: true,
        ..open_bare.clone()
    };
    assert!(
        settled(&land, &[], Some(&reopened)),
        "made, and a person opened it again: not closed again"
    );
    assert!(
        !settled(&land, &[], None),
        "not in the last read: nothing says it was made"
    );
    let mut q = Vec::new();
    enqueue(&mut q, land.clone());
    assert!(settled(&land, &q, Some(&open)), "queued whole");
    // The labels and the comment were made, the close was not.
    let close_left = vec![Op::Close { issue: 5 }];
    assert!(settled(&land, &close_left, Some(&open_bare)));
    // Newer label writes queued undo the landing's: not settled.
    let mut newer = q.clone();
    enqueue(&mut newer, ops_for(5, &Update::Running, false));
    assert!(!settled(
        &ops_for(5, &Update::Pending, false),
        &newer,
        Some(&open_bare)
    ));
    // Labels as the issue shows them, with none queued for it.
    let running = ops_for(5, &Update::Running, false);
    assert!(settled(&running, &[], Some(&open)));
    assert!(!settled(&running, &[], Some(&open_bare)));
    let other = ops_for(6, &Update::Failed, false);
    assert!(
        settled(&running, &other, Some(&open)),
        "another issue's writes say nothing of this one"
    );
    // With pull requests a landing only takes the status labels off.
    let pr = ops_for(5, &landed, true);
    assert!(settled(&pr, &[], Some(&open_bare)));
    assert!(!settled(&pr, &[], Some(&open)));
}
