//! `ralph plan FILE.md` (issue 27): one agent run turns a PRD into a
//! backlog; a reply that fails decomposition's checks writes nothing.

use std::fs;

use crate::harness::*;

const PRD: &str =
    "# Text toolkit\n\nA CLI with word count and line count, then a summary command using both.\n";

fn block(id: &str, batch: &str, deps: &str) -> String {
    format!(
        "<ralph>STORY_START {id}</ralph>\n---\nid: \"{id}\"\ntitle: \"Story {id}\"\nbatch: {batch}\ndepends_on: [{deps}]\n---\n# Story {id}\n\n## Acceptance Criteria\n- works\n<ralph>STORY_END {id}</ralph>\n"
    )
}

/// A project with no stories yet, whose agent answers `reply`.
fn project(reply: &str) -> Project {
    let p = Project::new();
    p.write(".ralph/config.json", &quiet_extras("{}"));
    p.write("PRD.md", PRD);
    p.commit_all("config");
    fs::write(p.scratch.join("reply"), reply).unwrap();
    // The prompt holds the PRD: the agent proves it read it.
    p.agent(
        r#"
prompt=$(cat "$PROMPT_FILE")
case "$prompt" in *"word count and line count"*) ;; *) result "no PRD in the prompt" true; exit 1 ;; esac
while IFS= read -r line || [ -n "$line" ]; do say "$line"; done < "$SCRATCH/reply"
result "planned"
"#,
    );
    p
}

#[test]
fn a_plan_from_a_prd_writes_a_backlog_that_validates() {
    let reply = format!(
        "{}{}{}<ralph>PLAN_DONE: 3 stories</ralph>",
        block("1.1", "1", ""),
        block("1.2", "1", ""),
        block("2.1", "2", "\"1.1\", \"1.2\"")
    );
    let p = project(&reply);
    let dry = p.ralph(&["plan", "PRD.md", "--dry-run"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(
        dry.stdout.contains("2.1") && dry.stdout.contains("1.1, 1.2"),
        "{dry:?}"
    );
    assert!(
        !p.root.join(".ralph/stories.txt").exists(),
        "--dry-run wrote"
    );
    let no = p.ralph(&["plan", "PRD.md"]);
    assert_eq!(no.code, 0, "{no:?}");
    assert!(no.stdout.contains("pass --yes"), "{no:?}");
    assert!(
        !p.root.join(".ralph/stories.txt").exists(),
        "written without --yes"
    );
    let r = p.ralph(&["plan", "PRD.md", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    let queue = p.read(".ralph/stories.txt");
    assert!(
        queue.contains("# [batch:1]\n1.1 | Story 1.1\n1.2 | Story 1.2\n"),
        "{queue}"
    );
    assert!(queue.contains("# [batch:2]\n2.1 | Story 2.1\n"), "{queue}");
    let spec = p.read("specs/epic-2/story-2.1-story-2-1.md");
    assert!(spec.contains("depends_on: [\"1.1\", \"1.2\"]"), "{spec}");
    assert!(spec.contains("status: pending"), "{spec}");
    let v = p.ralph(&["validate"]);
    assert_eq!(v.code, 0, "{v:?}");
    let g = p.ralph(&["graph", "--format", "mermaid"]);
    assert!(
        g.stdout.contains("1.1") && g.stdout.contains("2.1"),
        "{g:?}"
    );
}

#[test]
fn a_reply_with_a_cycle_an_unknown_dependency_or_a_path_in_an_id_writes_nothing() {
    let done = "<ralph>PLAN_DONE: 2 stories</ralph>";
    let cases = [
        (
            format!(
                "{}{}{done}",
                block("1.1", "1", "\"1.2\""),
                block("1.2", "1", "\"1.1\"")
            ),
            "cycle",
        ),
        (format!("{}{done}", block("1.1", "1", "\"9.9\"")), "9.9"),
        (format!("{}{done}", block("../1.1", "1", "")), ".."),
    ];
    for (reply, want) in cases {
        let p = project(&reply);
        let before = p.snapshot();
        let r = p.ralph(&["plan", "PRD.md", "--yes"]);
        assert_eq!(r.code, 1, "{r:?}");
        assert!(
            r.stderr.contains("nothing was written") && r.stderr.contains(want),
            "{want}: {r:?}"
        );
        // Only the agent's log of the plan run is new (a runtime file).
        let mut after = p.snapshot();
        after.retain(|k, _| !k.starts_with(".ralph/logs"));
        let status = after.remove("<status>").unwrap_or_default();
        assert_eq!(String::from_utf8_lossy(&status), "?? .ralph/logs/\n");
        let mut before = before;
        before.remove("<status>");
        assert_eq!(before, after, "{want}: files changed");
    }
}

#[test]
fn with_the_github_source_a_plan_becomes_issues_that_depend_on_each_other() {
    use crate::github_api::{issue, Api, Server};
    let reply = format!(
        "{}{}{}<ralph>PLAN_DONE: 3 stories</ralph>",
        block("b", "2", "\"a\", \"5\""),
        block("a", "1", ""),
        block("c", "2", "")
    );
    let p = project(&reply);
    let server = Server::start(
        Api {
            token: "t0k3n-for-plan".into(),
            issues: [(5, issue(5, "There already.", &["ralph"]))].into(),
            ..Api::default()
        },
        p.scratch.clone(),
    );
    p.write(
        ".ralph/config.json",
        &quiet_extras(&format!(
            r#"{{ "backlog": {{ "source": "github", "github": {{ "repo": "o/r", "api_url": "{}" }} }} }}"#,
            server.url
        )),
    );
    let before = p.snapshot();
    let r = p.ralph_with(
        &["plan", "PRD.md", "--yes"],
        &[("GITHUB_TOKEN", "t0k3n-for-plan")],
    );
    assert_eq!(r.code, 0, "{r:?}");
    // `a` first (b waits for it), then b and c: issues 6, 7, 8.
    assert!(r.stdout.contains("story a → issue #6"), "{r:?}");
    let b = server.issue(7);
    assert_eq!(b.title, "Story b");
    assert!(
        b.body.contains("Depends on #6") && b.body.contains("Depends on #5"),
        "{b:?}"
    );
    assert_eq!(b.labels, ["ralph", "batch:2"]);
    assert!(
        !b.body.contains("depends_on"),
        "the frontmatter stays out: {b:?}"
    );
    // No spec file and no stories.txt: the backlog is the tracker.
    let mut after = p.snapshot();
    after.retain(|k, _| !k.starts_with(".ralph/logs") && !k.starts_with(".ralph/tracker"));
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    let v = p.ralph_with(&["validate"], &[("GITHUB_TOKEN", "t0k3n-for-plan")]);
    assert_eq!(v.code, 0, "{v:?}");
    let s = p.ralph_with(&["stories"], &[("GITHUB_TOKEN", "t0k3n-for-plan")]);
    assert!(s.stdout.contains("7 | Story b"), "{s:?}");
}

#[test]
fn with_the_linear_source_a_plan_becomes_labelled_issues_that_block_each_other() {
    use crate::linear_api::{issue, Api, Server};
    let reply = format!(
        "{}{}<ralph>PLAN_DONE: 2 stories</ralph>",
        block("b", "2", "\"a\", \"ENG-5\""),
        block("a", "1", ""),
    );
    let p = project(&reply);
    let key = "lin_api_for_plan";
    let server = Server::start(
        Api {
            key: key.into(),
            issues: [("ENG-5".to_string(), issue(5, "s-todo", &["ralph"]))].into(),
            labels: vec![("bug".into(), "label-bug".into())],
            ..Api::default()
        },
        p.scratch.clone(),
    );
    p.write(
        ".ralph/config.json",
        &quiet_extras(&format!(
            r#"{{ "backlog": {{ "source": "linear", "linear": {{ "team": "ENG", "api_url": "{}" }} }} }}"#,
            server.url
        )),
    );
    let r = p.ralph_with(&["plan", "PRD.md", "--yes"], &[("LINEAR_API_KEY", key)]);
    assert_eq!(r.code, 0, "{r:?}");
    // `a` first (b waits for it): ENG-6, then ENG-7.
    assert!(
        r.stdout.contains("story a → issue ENG-6") && r.stdout.contains("story b → issue ENG-7"),
        "{r:?}"
    );
    let b = server.issue("ENG-7");
    assert_eq!(b.title, "Story b");
    assert_eq!(b.labels, ["ralph"], "the label was made in the team");
    assert!(!b.description.contains("depends_on"), "{b:?}");
    assert_eq!(server.issue("ENG-6").blocks, ["ENG-7"]);
    assert_eq!(server.issue("ENG-5").blocks, ["ENG-7"]);
    let s = p.ralph_with(&["graph"], &[("LINEAR_API_KEY", key)]);
    assert_eq!(s.code, 0, "{s:?}");
    let s = p.ralph_with(&["stories"], &[("LINEAR_API_KEY", key)]);
    assert!(s.stdout.contains("ENG-7 | Story b"), "{s:?}");
    let v = p.ralph_with(&["validate"], &[("LINEAR_API_KEY", key)]);
    assert_eq!(v.code, 0, "{v:?}");
}

#[test]
fn with_the_jira_source_a_plan_becomes_labelled_tasks_linked_by_blocks() {
    use crate::jira_api::{issue, Api, Server};
    let reply = format!(
        "{}{}<ralph>PLAN_DONE: 2 stories</ralph>",
        block("b", "2", "\"a\", \"SHOP-5\""),
        block("a", "1", ""),
    );
    let p = project(&reply);
    let env = [("JIRA_TOKEN", "pat-for-plan")];
    let server = Server::start(
        Api {
            auth: "Bearer pat-for-plan".into(),
            issues: [("SHOP-5".to_string(), issue(5, "To Do", &["ralph"]))].into(),
            ..Api::default()
        },
        p.scratch.clone(),
    );
    p.write(
        ".ralph/config.json",
        &quiet_extras(&format!(
            r#"{{ "backlog": {{ "source": "jira", "jira": {{ "url": "{}", "project": "SHOP" }} }} }}"#,
            server.url
        )),
    );
    let r = p.ralph_with(&["plan", "PRD.md", "--yes"], &env);
    assert_eq!(r.code, 0, "{r:?}");
    // `a` first (b waits for it): SHOP-6, then SHOP-7.
    assert!(
        r.stdout.contains("story a → issue SHOP-6") && r.stdout.contains("story b → issue SHOP-7"),
        "{r:?}"
    );
    let b = server.issue("SHOP-7");
    assert_eq!(b.summary, "Story b");
    assert_eq!(b.labels, ["ralph"]);
    assert!(b.description.contains("Acceptance Criteria"), "{b:?}");
    assert!(!b.description.contains("depends_on"), "{b:?}");
    // Read back, the links make b wait for a and SHOP-5.
    assert_eq!(b.blocked_by, ["SHOP-6", "SHOP-5"]);
    let s = p.ralph_with(&["graph"], &env);
    assert_eq!(s.code, 0, "{s:?}");
    let s = p.ralph_with(&["stories"], &env);
    assert!(s.stdout.contains("SHOP-7 | Story b"), "{s:?}");
    let v = p.ralph_with(&["validate"], &env);
    assert_eq!(v.code, 0, "{v:?}");
}

/// Regression: `ralph plan` ran its agent unsealed whatever
/// `sandbox.mode` said. With `bwrap` it runs as an attempt's agent does:
/// inside the sandbox (no file under `$HOME` to read) and with the
/// allowlisted environment (no secret variable).
#[test]
fn the_plans_agent_runs_sealed_as_configured() {
    if !crate::sandbox::bwrap_works() {
        return;
    }
    let p = Project::new();
    p.write(
        ".ralph/config.json",
        &quiet_extras(r#"{ "sandbox": { "mode": "bwrap" } }"#),
    );
    p.write("PRD.md", PRD);
    p.commit_all("config");
    p.write_outside(&p.home.join(".ssh/id_rsa"), "planted-ssh-key-material");
    // The reply is in the script: the sandbox hides the test's scratch.
    let reply = format!("{}<ralph>PLAN_DONE: 1 story</ralph>", block("1.1", "1", ""));
    p.agent(&format!(
        r#"
echo "key=$(cat "$HOME/.ssh/id_rsa" 2>/dev/null || echo hidden)"
echo "planted=${{PLANTED_SECRET:-absent}}"
while IFS= read -r line || [ -n "$line" ]; do say "$line"; done <<'REPLY'
{reply}
REPLY
result "planned"
"#
    ));
    let r = p.ralph_with(
        &["plan", "PRD.md", "--dry-run"],
        &[("PLANTED_SECRET", "planted-secret-value-9876543210")],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("1.1"), "{r:?}");
    let logs = p.root.join(".ralph/logs/plan");
    let log: String = fs::read_dir(&logs)
        .unwrap()
        .flatten()
        .map(|e| fs::read_to_string(e.path()).unwrap())
        .collect();
    assert!(log.contains("key=hidden"), "{log}");
    assert!(log.contains("planted=absent"), "{log}");
    assert!(!r.all().contains("planted-"), "{r:?}");
}
