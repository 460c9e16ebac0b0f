//! Jira as the backlog (issue 37), against a scripted REST v3 API on
//! 127.0.0.1 (`jira_api.rs`).

use std::fs;

use crate::harness::*;
use crate::jira_api::{issue, Api, Server};
use crate::linear::{landed, walk};

const EMAIL: &str = "dev@example.com";
const API_TOKEN: &str = "ATATT3xFfGF0jiraApiToken0123";
const PAT: &str = "NjQ5MzE0pat0123456789abcdef";
/// `Basic` of `EMAIL:API_TOKEN`, computed apart from ralph's encoder.
fn basic() -> String {
    let out = std::process::Command::new("base64")
        .args(["-w0"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .unwrap()
                .write_all(format!("{EMAIL}:{API_TOKEN}").as_bytes())?;
            c.wait_with_output()
        })
        .expect("base64");
    format!("Basic {}", String::from_utf8_lossy(&out.stdout).trim())
}

fn project(api: Api, auth: &str) -> (Project, Server) {
    let version = if api.data_center { 2 } else { 3 };
    let p = Project::new();
    let server = Server::start(
        Api {
            auth: auth.into(),
            ..api
        },
        p.scratch.clone(),
    );
    p.write(
        ".ralph/config.json",
        &quiet_extras(&format!(
            r#"{{ "loop": {{ "max_retries": 1, "grace_seconds": 1 }},
  "hooks": {{ "pre_story": "env > \"$SCRATCH/hook-env-$RALPH_STORY\"" }},
  "backlog": {{ "source": "jira",
    "jira": {{ "url": "{}/", "project": "SHOP", "jql": "issuetype != Epic", "poll_seconds": 0,
      "api_version": {version} }} }} }}"#,
            server.url
        )),
    );
    p.commit_all("config");
    (p, server)
}

fn basic_env() -> [(&'static str, &'static str); 2] {
    [("JIRA_EMAIL", EMAIL), ("JIRA_API_TOKEN", API_TOKEN)]
}

fn backlog() -> Api {
    let mut issues = vec![
        issue(1, "To Do", &["ralph"]),
        issue(2, "To Do", &["ralph"]),
        issue(3, "To Do", &["ralph"]),
        issue(4, "To Do", &["ralph"]),
        issue(5, "To Do", &["ralph"]),
        issue(6, "Done", &["ralph"]),
        issue(7, "To Do", &["bug"]),
    ];
    // SHOP-2 is blocked by SHOP-1, SHOP-4 by SHOP-2; SHOP-3 is the parent
    // of SHOP-4; SHOP-5 (which fails) only relates to SHOP-2, which does
    // not wait for it.
    issues[1].blocked_by = vec!["SHOP-1".into()];
    issues[3].blocked_by = vec!["SHOP-2".into()];
    issues[2].subtasks = vec!["SHOP-4".into()];
    issues[1].related = vec!["SHOP-5".into()];
    // Added while the run runs, blocked by SHOP-3.
    let mut added = issue(8, "To Do", &["ralph"]);
    added.summary = "Added mid-run".into();
    added.blocked_by = vec!["SHOP-3".into()];
    Api {
        to_add: Some(added),
        issues: issues.into_iter().map(|i| (i.key.clone(), i)).collect(),
        ..Api::default()
    }
}

#[test]
fn a_run_lands_jira_issues_in_dependency_order_and_transitions_and_comments_them() {
    let (p, server) = project(backlog(), &basic());
    // SHOP-1's agent has an issue added (read before SHOP-2 lands); SHOP-4's
    // takes the API down (every answer a 502) and SHOP-8's (which waits for
    // SHOP-3, which waits for SHOP-4) brings it back: the writes queued
    // meanwhile are made later, in order.
    p.agent(
        r#"
env > "$SCRATCH/env-$ID"
case "$ID" in
  SHOP-1) touch "$SCRATCH/add-issue" ;;
  SHOP-4) touch "$SCRATCH/down" ;;
  SHOP-8) rm -f "$SCRATCH/down"
     # Until ralph has read the issue added mid-run: the run must
     # not end before that read, however fast the stories land.
     while [ ! -e "$SCRATCH/listed" ]; do sleep 0.1; done ;;
  SHOP-5) result "<ralph>FAIL SHOP-5: cannot</ralph>"; exit 0 ;;
esac
commit_file "src/$ID.txt"
done_
"#,
    );
    // Both credentials set: the pair wins (the server takes only basic).
    let mut env = basic_env().to_vec();
    env.push(("JIRA_TOKEN", PAT));
    let r = p.ralph_with(&["run"], &env);
    let order = landed(&p);
    let pos = |id: &str| {
        order
            .iter()
            .position(|x| x == id)
            .unwrap_or_else(|| panic!("{id} did not land: {order:?}\n{r:?}"))
    };
    assert!(
        pos("SHOP-1") < pos("SHOP-2") && pos("SHOP-2") < pos("SHOP-4"),
        "{order:?}"
    );
    assert!(pos("SHOP-4") < pos("SHOP-3"), "a parent waits: {order:?}");
    assert!(
        pos("SHOP-3") < pos("SHOP-8"),
        "the issue added mid-run ran: {order:?}"
    );
    for not in ["SHOP-5", "SHOP-6", "SHOP-7"] {
        assert!(!order.contains(&not.to_string()), "{not}: {order:?}");
    }
    assert_eq!(r.code, 1, "one story failed: {r:?}");
    let log = git(
        &p.root,
        &["log", "--first-parent", "--format=%H %s", "main"],
    );
    for id in ["SHOP-1", "SHOP-2", "SHOP-3", "SHOP-4", "SHOP-8"] {
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
        // The first transition into "In Progress", then `Done` by name.
        assert_eq!(i.moves, ["In Progress", "Done"], "{id}: {i:?}");
        assert!(!i.labels.contains(&"ralph:failed".to_string()), "{i:?}");
    }
    let failed = server.issue("SHOP-5");
    assert!(
        failed.labels.contains(&"ralph:failed".to_string()),
        "{failed:?}"
    );
    assert_eq!(failed.moves, ["In Progress"], "{failed:?}");
    assert_eq!(failed.comments.len(), 1, "{failed:?}");
    assert!(failed.comments[0].contains("SHOP-5"), "{failed:?}");
    let done = server.issue("SHOP-6");
    assert!(
        done.moves.is_empty() && done.comments.is_empty(),
        "{done:?}"
    );
    // The query: the project, the label and the user's JQL, asking only
    // the fields the mapping reads.
    let log = server.log();
    assert!(
        log.iter()
            .any(|l| l == r#"search project = "SHOP" AND labels = "ralph" AND (issuetype != Epic)"#),
        "{log:?}"
    );
    let fields = server.api.lock().unwrap().fields.clone();
    for f in [
        "summary",
        "description",
        "status",
        "issuelinks",
        "subtasks",
        "labels",
    ] {
        assert!(fields.iter().any(|x| x == f), "{f}: {fields:?}");
    }
    assert!(fields.len() <= 8, "{fields:?}");
    // The API was down a while, and the writes queued meanwhile were made.
    assert!(
        p.read("ralph.log").contains("502"),
        "{}",
        p.read("ralph.log")
    );
    assert_eq!(p.read(".ralph/tracker/pending.json").trim(), "[]");
    // The credentials reached no agent, no hook and no file under .ralph/.
    let secrets = [EMAIL, API_TOKEN, PAT];
    for id in ["SHOP-1", "SHOP-2", "SHOP-3"] {
        for file in [format!("env-{id}"), format!("hook-env-{id}")] {
            let env = p.scratch_text(&file);
            assert!(env.contains("PATH="), "{file} was written");
            for s in secrets
                .iter()
                .chain(&["JIRA_TOKEN", "JIRA_API_TOKEN", "JIRA_EMAIL"])
            {
                assert!(!env.contains(s), "{s} reached {file}");
            }
        }
    }
    for f in walk(&p.root.join(".ralph")) {
        let text = String::from_utf8_lossy(&fs::read(&f).unwrap_or_default()).to_string();
        for s in secrets.iter().chain(&[basic().as_str()]) {
            assert!(!text.contains(s), "{} holds a credential", f.display());
        }
    }
}

#[test]
fn on_data_center_jira_token_alone_is_sent_as_bearer_and_writes_wait_while_jira_is_down() {
    let mut api = backlog();
    api.issues.retain(|k, _| k == "SHOP-1");
    // Data Center: REST v2 only, plain-text comments.
    api.data_center = true;
    let (p, server) = project(api, &format!("Bearer {PAT}"));
    p.agent("commit_file \"src/$ID.txt\"\ndone_\n");
    let env = [("JIRA_TOKEN", PAT)];
    // A snapshot, then Jira goes down: the run lands over the snapshot.
    let v = p.ralph_with(&["validate", "--online"], &env);
    assert_eq!(v.code, 0, "{v:?}");
    fs::write(p.scratch.join("down"), "").unwrap();
    let r = p.ralph_with(&["run"], &env);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        server.issue("SHOP-1").moves.is_empty(),
        "nothing reached Jira"
    );
    let st = p.ralph_with(&["status"], &env);
    assert!(
        st.stdout
            .contains("3 writes to Jira project SHOP pending (made by the next run)")
            && st.stdout.contains("SHOP-1: transition \"Done\""),
        "{st:?}"
    );
    // Back up: the next run makes them, in order.
    fs::remove_file(p.scratch.join("down")).unwrap();
    let r = p.ralph_with(&["run"], &env);
    assert_eq!(r.code, 0, "{r:?}");
    let i = server.issue("SHOP-1");
    assert_eq!(i.moves, ["In Progress", "Done"], "{i:?}\n{r:?}");
    assert_eq!(i.comments.len(), 1, "{i:?}");
    assert!(
        i.comments[0].starts_with("Landed by ralph on main as "),
        "{i:?}"
    );
    assert_eq!(p.read(".ralph/tracker/pending.json").trim(), "[]");
}

#[test]
fn a_blocker_or_subtask_without_the_label_fails_validation_naming_both() {
    let mut api = backlog();
    api.issues.get_mut("SHOP-3").unwrap().blocked_by = vec!["SHOP-7".into()];
    api.issues.get_mut("SHOP-1").unwrap().subtasks = vec!["SHOP-7".into()];
    let (p, server) = project(api, &basic());
    p.agent("done_");
    let env = basic_env();
    let v = p.ralph_with(&["validate", "--online"], &env);
    assert_eq!(v.code, 2, "{v:?}");
    let all = v.all();
    assert!(all.contains("story SHOP-3: SHOP-7 blocks it"), "{v:?}");
    assert!(all.contains("story SHOP-1: SHOP-7 is its subtask"), "{v:?}");
    // Reads never write to Jira, and only `--online` asks it.
    let asked = server.log().len();
    for cmd in [&["validate"][..], &["stories"], &["graph"], &["status"]] {
        p.ralph_with(cmd, &env);
    }
    assert_eq!(server.log().len(), asked, "{:?}", server.log());
    assert!(
        server.log().iter().all(|l| l.starts_with("search ")),
        "{:?}",
        server.log()
    );
}

#[test]
fn missing_or_refused_credentials_are_named() {
    let (p, _server) = project(backlog(), &basic());
    let v = p.ralph(&["validate", "--online"]);
    assert_eq!(v.code, 2, "{v:?}");
    assert!(
        v.all().contains("JIRA_EMAIL and JIRA_API_TOKEN") && v.all().contains("are not set"),
        "{v:?}"
    );
    let v = p.ralph_with(&["validate", "--online"], &[("JIRA_TOKEN", "wrong-pat")]);
    assert_eq!(v.code, 2, "{v:?}");
    assert!(
        v.all()
            .contains("Jira refused the credentials of JIRA_TOKEN"),
        "{v:?}"
    );
    assert!(!v.all().contains("wrong-pat"), "{v:?}");
}
