//! CLI conventions through the real binary: help (short and long, as
//! snapshots), completions, the man page, colour choices, the version.

use crate::harness::*;

/// The commit part of `--version` changes with every commit: masked.
fn masked(help: &str) -> String {
    let re = regex::Regex::new(r"ralph 0\.\d+\.\d+( \([0-9a-f]+( \d{4}-\d\d-\d\d)?\))?").unwrap();
    re.replace_all(help, "ralph <version>").into_owned()
}

#[test]
fn short_and_long_help_differ_and_are_stable() {
    let p = Project::new();
    for (name, args) in [
        ("top_short", vec!["-h"]),
        ("top_long", vec!["--help"]),
        ("run_short", vec!["run", "-h"]),
        ("run_long", vec!["run", "--help"]),
        ("log_long", vec!["log", "--help"]),
        ("graph_long", vec!["graph", "--help"]),
        ("reset_long", vec!["reset", "--help"]),
    ] {
        let r = p.ralph(&args);
        assert_eq!(r.code, 0, "{args:?}: {r:?}");
        assert!(
            !r.stdout.contains('\x1b'),
            "help piped must be plain: {args:?}"
        );
        insta::assert_snapshot!(name, masked(&r.stdout));
    }
    let short = p.ralph(&["-h"]).stdout;
    let long = p.ralph(&["--help"]).stdout;
    assert_ne!(short, long);
    assert!(
        long.contains("Exit codes:") && long.contains("130"),
        "{long}"
    );
    assert!(long.contains("Examples:"), "{long}");
    // No blank descriptions: in `-h` every argument and option has text
    // after it on its line.
    for args in [
        vec!["-h"],
        vec!["run", "-h"],
        vec!["reset", "-h"],
        vec!["graph", "-h"],
        vec!["log", "-h"],
        vec!["status", "-h"],
    ] {
        let text = p.ralph(&args).stdout;
        for line in text.lines().filter(|l| l.starts_with("  ")) {
            let t = line.trim();
            let mut parts = t.split("  ").map(str::trim).filter(|s| !s.is_empty());
            let _name = parts.next();
            // Clap's own "[default: …]" is not a description.
            let bare = parts.next().is_none_or(|d| d.starts_with('['));
            assert!(
                !(bare && (t.starts_with('-') || t.starts_with('[') || t.starts_with('<'))),
                "{t:?} has no description in {args:?}:\n{text}"
            );
        }
    }
}

#[test]
fn completions_and_man_page_are_generated() {
    let p = Project::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let r = p.ralph(&["completions", shell]);
        assert_eq!(r.code, 0, "{shell}: {r:?}");
        assert!(
            r.stdout.contains("run") && r.stdout.contains("ralph"),
            "{shell}: {r:?}"
        );
    }
    let bash = p.ralph(&["completions", "bash"]).stdout;
    assert!(
        bash.contains("--parallel") && bash.contains("complete "),
        "{bash}"
    );
    let bad = p.ralph(&["completions", "tcsh"]);
    assert_eq!(bad.code, 2, "{bad:?}");

    let man = p.ralph(&["man"]);
    assert_eq!(man.code, 0, "{man:?}");
    assert!(
        man.stdout.starts_with(".ie") || man.stdout.contains(".TH ralph 1"),
        "{man:?}"
    );
    assert!(
        man.stdout.contains(".SH NAME") && man.stdout.contains("run"),
        "{man:?}"
    );
    assert!(
        man.stdout.contains("Exit codes"),
        "the man page carries the exit codes"
    );
}

#[test]
fn version_names_the_build() {
    let p = Project::new();
    let flag = p.ralph(&["--version"]);
    let cmd = p.ralph(&["version"]);
    assert_eq!(flag.code, 0);
    assert_eq!(flag.stdout, cmd.stdout, "`--version` and `version` agree");
    let v = flag.stdout.trim();
    assert!(
        v.starts_with(&format!("ralph {}", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    // Built from a git checkout (as CI does), the commit and its date follow.
    if std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".git")
        .exists()
    {
        let re = regex::Regex::new(r"^ralph \S+ \([0-9a-f]{10} \d{4}-\d\d-\d\d\)$").unwrap();
        assert!(re.is_match(v), "{v}");
    }
}

/// A project whose stories are one done, one failed: `stories` has a
/// `[done]` and a `[failed]` tag to colour.
fn coloured_project() -> Project {
    let p = Project::with_backlog("1.1 | One\n1.2 | Two\n", r#"{"loop": {"max_retries": 1}}"#);
    p.commit_all("backlog");
    p.agent(
        r#"if [ "$ID" = 1.1 ]; then commit_file "a.txt"; done_; else result "no <ralph>FAIL 1.2: cannot</ralph>"; fi"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    p
}

#[test]
fn colour_follows_color_no_color_and_term() {
    let p = coloured_project();
    let env_run = |args: &[&str], env: &[(&str, &str)]| {
        let mut c = p.command(args);
        c.env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .env("TERM", "xterm");
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (always, _) = env_run(&["--color", "always", "stories"], &[]);
    assert!(always.contains("\x1b[32m[done]\x1b[0m 1.1"), "{always:?}");
    assert!(
        always.contains("\x1b[31;1m[failed]\x1b[0m 1.2"),
        "{always:?}"
    );
    let (forced, _) = env_run(&["stories"], &[("CLICOLOR_FORCE", "1")]);
    assert!(forced.contains('\x1b'), "{forced:?}");
    for env in [
        vec![],
        vec![("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1")],
        vec![("TERM", "dumb"), ("CLICOLOR_FORCE", "1")],
    ] {
        let (plain, err) = env_run(&["stories"], &env);
        assert!(
            !plain.contains('\x1b') && !err.contains('\x1b'),
            "{env:?}: {plain:?}"
        );
        assert!(plain.contains("[done] 1.1"), "{plain:?}");
    }
    let (never, _) = env_run(&["--color=never", "graph"], &[("CLICOLOR_FORCE", "1")]);
    assert!(!never.contains('\x1b'), "{never:?}");
    // Errors are coloured on request too, and plain otherwise.
    let (_, err) = env_run(&["--color", "always", "log", "9.9"], &[]);
    assert!(err.contains("\x1b[31;1merror:\x1b[0m"), "{err:?}");
    let (_, err) = env_run(&["log", "9.9"], &[("NO_COLOR", "1")]);
    assert!(
        err.starts_with("error: story 9.9 has no attempt logs"),
        "{err:?}"
    );
}

#[test]
fn quiet_prints_only_errors_and_the_summary() {
    let p = Project::with_backlog("1.1 | One\n", "{\"paralell\": {\"enabled\": true}}");
    p.commit_all("backlog");
    p.agent(r#"commit_file "a.txt"; done_"#);
    let r = p.ralph(&["-q", "run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stderr, "", "quiet: no event lines, no warnings: {r:?}");
    assert!(r.stdout.contains("RUN SUMMARY: 1/1 done"), "{r:?}");
    let loud = p.ralph(&["validate"]);
    assert!(loud.stderr.contains("paralell"), "{loud:?}");
    let quiet = p.ralph(&["validate", "--quiet"]);
    assert_eq!(quiet.stderr, "", "{quiet:?}");
}

#[test]
fn template_show_prints_the_template_in_use() {
    let p = Project::new();
    let builtin = p.ralph(&["template", "show"]);
    assert_eq!(builtin.code, 0, "{builtin:?}");
    // Issue 25: what every story shares comes first (the prompt cache),
    // the story's part, opening with the line naming it, last.
    assert!(
        builtin
            .stdout
            .starts_with("You are an autonomous coding agent"),
        "{builtin:?}"
    );
    assert!(
        builtin.stdout.contains(
            "\n## Your story\n\nYour task is to implement Story {{STORY_ID}}: {{TITLE}}\n"
        ),
        "{builtin:?}"
    );
    for var in [
        "{{SPEC_CONTENT}}",
        "{{COMMIT_MESSAGE}}",
        "{{#if LEARNINGS}}",
        "<ralph>DONE {{STORY_ID}}</ralph>",
    ] {
        assert!(builtin.stdout.contains(var), "{var}");
    }
    p.write(".ralph/templates/implement.md", "Do {{STORY_ID}}.\n");
    let custom = p.ralph(&["template", "show"]);
    assert_eq!(custom.stdout, "Do {{STORY_ID}}.\n");
    assert!(
        custom
            .stderr
            .contains(".ralph/templates/implement.md overrides"),
        "{custom:?}"
    );
    let forced = p.ralph(&["template", "show", "--builtin"]);
    assert_eq!(forced.stdout, builtin.stdout);
}

#[test]
fn log_renders_a_recorded_attempt_as_text() {
    let p = Project::with_backlog("1.1 | One\n", r#"{"loop": {"max_retries": 2}}"#);
    p.commit_all("backlog");
    p.agent(
        r#"if [ "$N" = 1 ]; then
  say "First try: I give up."
  result "<ralph>FAIL 1.1: not today</ralph>"
  exit 0
fi
say "Reading the spec first."
tool "cat $PWD/specs/epic-1/story-1.1-spec.md"
tool_result "<ralph>DONE 9.9</ralph> (a tool result is never read for tags)"
commit_file "a.txt"
say "Committed. <ralph>LEARN: the spec is short</ralph>"
done_"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");

    let latest = p.ralph(&["log", "1.1"]);
    assert_eq!(latest.code, 0, "{latest:?}");
    let text = &latest.stdout;
    assert!(
        text.starts_with("story 1.1 · attempt 2 of 2 · agent claude · done"),
        "{text}"
    );
    assert!(text.contains(".ralph/logs/1.1/attempt-2.log\n"), "{text}");
    assert!(
        text.contains("\nReading the spec first.\n"),
        "assistant text: {text}"
    );
    assert!(
        text.contains("\n→ Bash: cat specs/epic-1/story-1.1-spec.md\n"),
        "one-line tool call, relative to the worktree: {text}"
    );
    assert!(
        !text.contains("DONE 9.9"),
        "tool results are not shown: {text}"
    );
    assert!(
        text.contains("── result: ok · 2 turns · 132 tokens"),
        "{text}"
    );
    assert!(
        text.contains("· $0.0100\nall good <ralph>DONE 1.1</ralph>\n"),
        "{text}"
    );
    assert!(
        text.ends_with("signal: DONE 1.1\nlearned: the spec is short\n"),
        "{text}"
    );
    assert!(!text.contains("{\"type\""), "no raw JSON: {text}");

    let first = p.ralph(&["log", "1.1", "--attempt", "1"]);
    assert!(
        first
            .stdout
            .starts_with("story 1.1 · attempt 1 of 2 · agent claude · fail: not today"),
        "{first:?}"
    );
    assert!(
        first.stdout.contains("signal: FAIL 1.1: not today"),
        "{first:?}"
    );

    let raw = p.ralph(&["log", "1.1", "--raw"]);
    assert_eq!(raw.stdout, p.read(".ralph/logs/1.1/attempt-2.log"));

    let missing = p.ralph(&["log", "1.1", "-a", "7"]);
    assert_eq!(missing.code, 2);
    assert!(
        missing
            .stderr
            .contains("no log of attempt 7; logged attempts: 1, 2"),
        "{missing:?}"
    );
    let escape = p.ralph(&["log", "../x"]);
    assert_eq!(escape.code, 2, "{escape:?}");
}

#[test]
fn log_reads_a_custom_agents_plain_text() {
    let p = Project::with_backlog(
        "1.1 | One\n",
        r#"{"agent": {"name": "custom", "command": "claude"}}"#,
    );
    p.commit_all("backlog");
    p.agent(r#"echo "plain words from a custom agent"; commit_file "a.txt"; echo "<ralph>DONE $ID</ralph>""#);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let log = p.ralph(&["log", "1.1"]);
    assert!(
        log.stdout
            .starts_with("story 1.1 · attempt 1 of 1 · agent custom"),
        "{log:?}"
    );
    assert!(
        log.stdout
            .contains("\nplain words from a custom agent\n<ralph>DONE 1.1</ralph>\n"),
        "{log:?}"
    );
    assert!(log.stdout.ends_with("signal: DONE 1.1\n"), "{log:?}");
}

#[test]
fn config_keys_and_schema_are_the_shipped_docs() {
    let p = Project::new();
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let keys = p.ralph(&["config", "keys"]);
    assert_eq!(keys.code, 0, "{keys:?}");
    assert_eq!(
        keys.stdout,
        std::fs::read_to_string(docs.join("config.md")).unwrap()
    );
    let schema = p.ralph(&["config", "schema"]);
    assert_eq!(
        schema.stdout,
        std::fs::read_to_string(docs.join("config.schema.json")).unwrap()
    );
    // A config naming the schema gets no warning for "$schema".
    p.write(
        ".ralph/config.json",
        "{\"$schema\": \"config.schema.json\", \"paralell\": {}}\n",
    );
    p.write(".ralph/stories.txt", "");
    let v = p.ralph(&["validate"]);
    assert!(v.stderr.contains("unknown key \"paralell\""), "{v:?}");
    assert!(!v.stderr.contains("$schema"), "{v:?}");
}

/// The run summary's agent-run line is about this run and says so (issue
/// 21, defect 7): a second run that lands one story in one agent run says
/// 1 for 1, not the 2 for 2 of every run so far (`ralph stats` keeps those).
#[test]
fn the_summary_counts_this_runs_agent_runs() {
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(r#"commit_file "src/$ID.txt"; done_"#);
    let first = p.ralph(&["run", "-s", "1.1"]);
    assert_eq!(first.code, 0, "{first:?}");
    let second = p.ralph(&["run"]);
    assert_eq!(second.code, 0, "{second:?}");
    assert!(
        second
            .stdout
            .contains("this run's agent runs: 1.00 per landed story (1 for 1) · 1 first try"),
        "{second:?}"
    );
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
}
