//! Linear as the backlog (issue 37), against a scripted GraphQL API on
//! 127.0.0.1 (`linear_api.rs`).

use std::fs;

use crate::harness::*;
use crate::linear_api::{issue, Api, Server};

const KEY: &str = "lin_api_test0123456789abcdef";

fn project(api: Api) -> (Project, Server) {
    let p = Project::new();
    let server = Server::start(
        Api {
            key: KEY.into(),
            ..api
        },
        p.scratch.clone(),
    );
    p.write(
        ".ralph/config.json",
        &quiet_extras(&format!(
            r#"{{ "loop": {{ "max_retries": 1, "grace_seconds": 1 }},
  "hooks": {{ "pre_story": "env > \"$SCRATCH/hook-env-$RALPH_STORY\"" }},
  "backlog": {{ "source": "linear",
    "linear": {{ "team": "ENG", "api_url": "{}", "poll_seconds": 0 }} }} }}"#,
            server.url
        )),
    );
    p.commit_all("config");
    (p, server)
}

fn run(p: &Project, args: &[&str]) -> RunResult {
    p.ralph_with(args, &[("LINEAR_API_KEY", KEY)])
}

fn backlog() -> Api {
    let mut issues = vec![
        issue(1, "s-backlog", &["ralph"]),
        issue(2, "s-triage", &["ralph"]),
        issue(3, "s-todo", &["ralph"]),
        issue(4, "s-todo", &["ralph"]),
        issue(6, "s-todo", &["ralph"]),
        issue(7, "s-todo", &["ralph"]),
        issue(9, "s-done", &["ralph"]),
        issue(10, "s-todo", &["ralph"]),
        issue(11, "s-todo", &["bug"]),
        issue(12, "s-cancel", &["ralph"]),
    ];
    // ENG-1 blocks ENG-2, which blocks ENG-3; ENG-7 (which fails) is only
    // `related` to ENG-3, which does not wait for it.
    issues[0].blocks = vec!["ENG-2".into()];
    issues[1].blocks = vec!["ENG-3".into()];
    issues[5].related = vec!["ENG-3".into()];
    // ENG-4 is the parent of ENG-6; ENG-9 (done) blocks ENG-10.
    issues[3].children = vec!["ENG-6".into()];
    issues[6].blocks = vec!["ENG-10".into()];
    // Added while the run runs, blocked by ENG-3.
    let mut added = issue(8, "s-todo", &["ralph"]);
    issues[2].blocks.push("ENG-8".into());
    added.title = "Added mid-run".into();
    Api {
        to_add: Some(added),
        issues: issues
            .into_iter()
            .map(|i| (i.identifier.clone(), i))
            .collect(),
        labels: vec![
            ("ralph".into(), "label-ralph".into()),
            ("bug".into(), "label-bug".into()),
        ],
        ..Api::default()
    }
}

/// Landing order of the stories, from the merge subjects on main.
pub(crate) fn landed(p: &Project) -> Vec<String> {
    p.main_subjects()
        .iter()
        .filter_map(|s| s.strip_prefix("merge: story "))
        .map(|s| s.split_whitespace().next().unwrap_or_default().to_string())
        .collect()
}

pub(crate) fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_run_lands_linear_issues_in_dependency_order_and_moves_and_comments_them() {
    let (p, server) = project(backlog());
    // Story ENG-3's agent takes the API down (every answer a 502) and
    // ENG-6's brings it back: the writes queued meanwhile are made later.
    p.agent(
        r#"
env > "$SCRATCH/env-$ID"
case "$ID" in
  ENG-1) touch "$SCRATCH/add-issue" ;;
  ENG-3) touch "$SCRATCH/down" ;;
  ENG-6) rm -f "$SCRATCH/down"
     # Until ralph has read the issue added mid-run: the run must
     # not end before that read, however fast the stories land.
     while [ ! -e "$SCRATCH/listed" ]; do sleep 0.1; done ;;
  ENG-7) result "<ralph>FAIL ENG-7: cannot</ralph>"; exit 0 ;;
esac
commit_file "src/$ID.txt"
done_
"#,
    );
    let r = run(&p, &["run"]);
    let order = landed(&p);
    let pos = |id: &str| {
        order
            .iter()
            .position(|x| x == id)
            .unwrap_or_else(|| panic!("{id} did not land: {order:?}\n{r:?}"))
    };
    assert!(
        pos("ENG-1") < pos("ENG-2") && pos("ENG-2") < pos("ENG-3"),
        "{order:?}"
    );
    assert!(pos("ENG-6") < pos("ENG-4"), "a parent waits: {order:?}");
    pos("ENG-10");
    assert!(
        pos("ENG-3") < pos("ENG-8"),
        "the issue added mid-run ran: {order:?}"
    );
    for not in ["ENG-7", "ENG-9", "ENG-11", "ENG-12"] {
        assert!(!order.contains(&not.to_string()), "{not}: {order:?}");
    }
    assert_eq!(r.code, 1, "one story failed: {r:?}");
    let log = git(
        &p.root,
        &["log", "--first-parent", "--format=%H %s", "main"],
    );
    for id in [
        "ENG-1", "ENG-2", "ENG-3", "ENG-4", "ENG-6", "ENG-8", "ENG-10",
    ] {
        let i = server.issue(id);
        let sha = log
            .lines()
            .find(|l| l.split_whitespace().nth(3) == Some(id))
            .and_then(|l| l.split_whitespace().next())
            .unwrap();
        assert_eq!(i.comments.len(), 1, "{id}: one comment: {i:?}");
        assert!(
            i.comments[0].contains(sha),
            "{id}: {:?} names {sha}",
            i.comments
        );
        // The first state of each type: the lowest position, not the first listed.
        assert_eq!(i.moves, ["s-doing", "s-done"], "{id}: {i:?}");
        assert!(!i.labels.contains(&"ralph:failed".to_string()), "{i:?}");
    }
    let failed = server.issue("ENG-7");
    assert!(
        failed.labels.contains(&"ralph:failed".to_string()),
        "{failed:?}"
    );
    assert_eq!(failed.moves, ["s-doing"], "{failed:?}");
    assert_eq!(failed.comments.len(), 1, "{failed:?}");
    assert!(failed.comments[0].contains("ENG-7"), "{failed:?}");
    assert!(
        server.log().iter().any(|l| l == "RalphCreateLabel"),
        "the label was made in the team: {:?}",
        server.log()
    );
    for done in ["ENG-9", "ENG-12"] {
        let i = server.issue(done);
        assert!(i.moves.is_empty() && i.comments.is_empty(), "{i:?}");
    }
    // The API was down a while, and the writes queued meanwhile were made.
    assert!(
        p.read("ralph.log").contains("502"),
        "{}",
        p.read("ralph.log")
    );
    assert_eq!(p.read(".ralph/tracker/pending.json").trim(), "[]");
    // The key reached no agent, no hook and no file under .ralph/.
    for id in ["ENG-1", "ENG-3", "ENG-6"] {
        for file in [format!("env-{id}"), format!("hook-env-{id}")] {
            let env = p.scratch_text(&file);
            assert!(env.contains("PATH="), "{file} was written");
            assert!(!env.contains(KEY), "the key reached {file}");
            assert!(!env.contains("LINEAR_API_KEY"), "{file}");
        }
    }
    for f in walk(&p.root.join(".ralph")) {
        let text = fs::read(&f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&text).contains(KEY),
            "{} holds the key",
            f.display()
        );
    }
    assert!(!p.read("ralph.log").contains(KEY));
    let st = run(&p, &["status"]);
    assert!(!st.stdout.contains("writes to Linear"), "{st:?}");
    // The failed story by its identifier: its log, then a retry that
    // lands, which takes the label off again.
    let l = run(&p, &["log", "ENG-7"]);
    assert_eq!(l.code, 0, "{l:?}");
    p.agent("commit_file \"src/$ID.txt\"\ndone_\n");
    let r = run(&p, &["run", "-s", "ENG-7"]);
    assert_eq!(r.code, 0, "{r:?}");
    let retried = server.issue("ENG-7");
    assert!(
        !retried.labels.contains(&"ralph:failed".to_string()),
        "{retried:?}"
    );
    assert_eq!(retried.moves, ["s-doing", "s-done"], "{retried:?}");
    assert_eq!(retried.comments.len(), 2, "{retried:?}");
}

#[test]
fn writes_wait_while_linear_is_down_and_status_names_them() {
    let mut api = backlog();
    api.issues.retain(|k, _| k == "ENG-1");
    let (p, server) = project(api);
    p.agent("commit_file \"src/$ID.txt\"\ndone_\n");
    // A snapshot, then Linear goes down: the run lands over the snapshot.
    let v = run(&p, &["validate"]);
    assert_eq!(v.code, 0, "{v:?}");
    fs::write(p.scratch.join("down"), "").unwrap();
    let r = run(&p, &["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        server.issue("ENG-1").moves.is_empty(),
        "nothing reached Linear"
    );
    let st = run(&p, &["status"]);
    assert!(
        st.stdout
            .contains("3 writes to Linear team ENG pending (made by the next run): ENG-1: mov"),
        "{st:?}"
    );
    // Back up: the next run makes them, in order.
    fs::remove_file(p.scratch.join("down")).unwrap();
    let r = run(&p, &["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let i = server.issue("ENG-1");
    assert_eq!(i.moves, ["s-doing", "s-done"], "{i:?}\n{r:?}");
    assert_eq!(i.comments.len(), 1, "{i:?}");
    assert_eq!(p.read(".ralph/tracker/pending.json").trim(), "[]");
}

#[test]
fn a_blocker_or_child_without_the_label_fails_validation_naming_both() {
    let mut api = backlog();
    api.issues.get_mut("ENG-11").unwrap().blocks = vec!["ENG-3".into()];
    api.issues.get_mut("ENG-10").unwrap().children = vec!["ENG-11".into()];
    let (p, server) = project(api);
    p.agent("done_");
    let v = run(&p, &["validate", "--online"]);
    assert_eq!(v.code, 2, "{v:?}");
    let all = v.all();
    assert!(
        all.contains("ENG-3") && all.contains("ENG-11 blocks it"),
        "{v:?}"
    );
    assert!(
        all.contains("ENG-10") && all.contains("ENG-11 is its sub-issue"),
        "{v:?}"
    );
    // Reads never write to Linear, and only `--online` asks it.
    let asked = server.log().len();
    for cmd in [&["validate"][..], &["stories"], &["graph"], &["status"]] {
        run(&p, cmd);
    }
    assert_eq!(server.log().len(), asked, "{:?}", server.log());
    run(&p, &["validate", "--online"]);
    assert!(
        server.log().iter().all(|l| l == "RalphIssues"),
        "{:?}",
        server.log()
    );
}

#[test]
fn a_missing_or_refused_key_is_named() {
    let (p, _server) = project(backlog());
    let v = p.ralph(&["validate"]);
    assert_eq!(v.code, 2, "{v:?}");
    assert!(v.all().contains("LINEAR_API_KEY is not set"), "{v:?}");
    let v = p.ralph_with(&["validate"], &[("LINEAR_API_KEY", "lin_api_wrong")]);
    assert_eq!(v.code, 2, "{v:?}");
    assert!(v.all().contains("LINEAR_API_KEY was refused"), "{v:?}");
    assert!(!v.all().contains("lin_api_wrong"), "{v:?}");
}
