//! `.ralph/config.json`: deep-merged over the built-in defaults (SPEC 3.1),
//! then read into one typed section per JSON section (`config.loop_`,
//! `config.parallel`, `config.landing`, …; `sections.rs`), so a key's
//! field is found by its name in the file.
//!
//! Pure apart from `load`, which reads the one file.

use std::path::Path;

use serde_json::{json, Value};

use crate::error::Problem;

mod attempts;
mod backlog;
mod executor;
mod gates;
pub(crate) mod keys;
mod landing;
mod notify;
mod reader;
mod sections;
mod warnings;

pub(crate) use attempts::{Attempts, CandidateSpec, Pick};
pub(crate) use backlog::{BacklogSource, GitHubSettings, JiraSettings, LinearSettings};
pub(crate) use executor::{Executor, RaySettings};
pub(crate) use gates::{Gates, ReviewGate, TestsGate};
pub(crate) use landing::Landing;
pub(crate) use notify::{shown, Notify, Webhook, WebhookEvent, WebhookFormat};
use reader::Reader;
pub(crate) use sections::{
    Budget, Commit, Decomposition, Hooks, Learnings, Limits, Loop, Parallel, Postmortem, Retry,
    Runs, Serve, Specs, Validation, ValidationCommand,
};
use warnings::key_warnings;

/// `validation.where`: where the merge queue validates a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ValidationWhere {
    /// In a worktree of the coordinator's (what a local run always does).
    #[default]
    Coordinator,
    /// As a job on the run's executor (a Ray job next to the attempts);
    /// with the local executor, the same as `Coordinator`.
    Executor,
}

impl Config {
    /// Whether the merge queue's validations run as executor jobs: asked
    /// for, and an executor that runs elsewhere (the local one is this
    /// machine, the coordinator).
    pub(crate) fn validates_remotely(&self) -> bool {
        self.validation.where_ == ValidationWhere::Executor
            && !matches!(self.executor, Executor::Local)
    }
}

/// `parallel.conflicts`: what a clash on a file a story declares does to
/// its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Conflicts {
    /// It waits for the in-flight work it clashes with, even with a slot
    /// free: an idle slot costs nothing, a conflict costs a fix-up.
    #[default]
    Wait,
    /// It starts beside that work once nothing else is ready.
    Risk,
}

#[cfg(test)]
use warnings::KeyWarningKind;
pub(crate) use warnings::{key_warning_lines, KeyWarning};
pub(crate) use warnings::{RALPH_V2_IGNORED, RALPH_V2_INERT};

/// The effective configuration after merging: one field per JSON section.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// The merged JSON (unknown keys kept, as SPEC 3.1 promises).
    #[cfg_attr(not(test), expect(dead_code, reason = "read by tests only"))]
    pub(crate) raw: Value,
    /// Keys in the file that ralph does not read (`validate` and `run`
    /// warn; never an error, SPEC 3.1 keeps unknown keys).
    pub(crate) key_warnings: Vec<KeyWarning>,
    /// Every key the reader asked for: what ralph reads (`keys::KEYS`
    /// documents exactly these; a test holds them together).
    #[cfg_attr(not(test), expect(dead_code, reason = "read by tests only"))]
    pub(crate) known_keys: std::collections::BTreeSet<String>,
    pub(crate) specs: Specs,
    /// `loop.*` (`loop` is a Rust keyword).
    pub(crate) loop_: Loop,
    pub(crate) validation: Validation,
    /// `agent.*` and `claude.command`/`claude.flags`: what `agent/` needs,
    /// as its own plain type.
    pub(crate) agent: crate::agent::Settings,
    pub(crate) limits: Limits,
    pub(crate) budget: Budget,
    pub(crate) commit: Commit,
    pub(crate) learnings: Learnings,
    pub(crate) parallel: Parallel,
    pub(crate) retry: Retry,
    /// `attempts.*`: best of N (issue 36).
    pub(crate) attempts: Attempts,
    pub(crate) landing: Landing,
    pub(crate) decomposition: Decomposition,
    pub(crate) postmortem: Postmortem,
    pub(crate) hooks: Hooks,
    pub(crate) runs: Runs,
    /// `serve.*`: the live web view (`ralph run --serve`, `ralph serve`).
    pub(crate) serve: Serve,
    /// `sandbox.*`: the environment allowlist, redaction and confinement
    /// of agents and the commands that run their code (SPEC 9).
    pub(crate) sandbox: crate::sandbox::Settings,
    /// `executor.*`: where attempts run (issue 23).
    pub(crate) executor: Executor,
    /// `backlog.*`: files, or an issue tracker (issue 27).
    pub(crate) backlog: BacklogSource,
    /// `pricing`: prices of models, over the built-in table (issue 25).
    pub(crate) pricing: crate::pricing::Table,
    /// `gates.*`: the checks before landing (issue 26).
    pub(crate) gates: Gates,
    /// `notify.*`: chat and JSON webhooks (issue 37).
    pub(crate) notify: Notify,
}

/// The built-in defaults as JSON (SPEC 3.1).
pub(crate) fn defaults() -> Value {
    // `claude.flags` is deliberately absent: "no flags configured" must stay
    // distinguishable from an explicit list so the SPEC 4.2 defaults apply.
    json!({
        "specs": {
            "pattern": "specs/epic-{{epic}}/story-{{id}}-*.md",
            "frontmatter_status_field": "status"
        },
        "loop": {
            "max_iterations": 0,
            "timeout_seconds": 1800,
            "max_retries": 3,
            "grace_seconds": 10,
            "idle_timeout_seconds": 600,
            "allow_empty_done": false
        },
        "validation": {
            "commands": [],
            "blocked_commands": [],
            "where": "coordinator"
        },
        "claude": {
            "command": "claude"
        },
        "agent": {
            "name": "claude"
        },
        "limits": {
            "max_wait_hours": 6
        },
        "backlog": {
            "source": "files",
            "github": {
                "label": "ralph",
                "api_url": "https://api.github.com",
                "poll_seconds": 60
            },
            "linear": {
                "label": "ralph",
                "api_url": "https://api.linear.app/graphql",
                "poll_seconds": 60
            },
            "jira": {
                "label": "ralph",
                "jql": "",
                "done_transition": "Done",
                "api_version": 3,
                "poll_seconds": 60
            }
        },
        "decomposition": {
            "enabled": true,
            "max_depth": 2,
            "timeout_seconds": 600
        },
        "postmortem": {
            "enabled": true,
            "window_seconds": 300,
            "max_output_chars": 50000
        },
        "landing": {
            "mode": "merge",
            "remote": "origin",
            "speculate": 4,
            "batch": 1,
            "max_validations": 0,
            "validation_memory_mb": 1024
        },
        "retry": {
            "resume_session": true
        },
        "attempts": {
            "best_of": 1,
            "pick": "first"
        },
        "commit": {
            "format": "feat(story-{{id}}): {{title}}",
            "stage_paths": []
        },
        "learnings": {
            "enabled": true,
            "max_inject_count": 5
        },
        "parallel": {
            "enabled": false,
            "auto_merge": true,
            "retry_concurrency": 1,
            "agent_memory_mb": 2048,
            "predict_files": true,
            "conflicts": "wait"
        },
        "hooks": {
            "pre_iteration": "",
            "pre_story": "",
            "post_story": "",
            "post_iteration": "",
            "pre_worktree": "",
            "pre_worktree_timeout": 120,
            "on_complete": "",
            "on_failure": "",
            "on_pause": ""
        },
        "runs": {
            "max_mb": 100
        },
        "gates": {
            "tests": "block",
            "review": {
                "max_rounds": 2
            }
        },
        "sandbox": {
            "mode": "auto",
            "network": true,
            "env": { "pass": [], "set": {} },
            "redact": [],
            "allow_read": [],
            "allow_write": [],
            "limits": { "pids": 4096, "memory_mb": 8192 }
        },
        "executor": {
            "kind": "local",
            "relay": "origin",
            "ray": {
                "address": "http://127.0.0.1:8265",
                "token_env": "RAY_AUTH_TOKEN",
                "ralph_path": ""
            }
        }
    })
}

/// Deep merge: objects merge key by key, arrays and scalars replace.
pub(crate) fn deep_merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(slot) => deep_merge(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, over) => *base = over,
    }
}

/// Builds a `Config` from merged JSON; every problem is reported against `file`.
pub(crate) fn from_value(raw: Value, file: &Path) -> Result<Config, Vec<Problem>> {
    build(raw, file, None)
}

/// Reads `<root>/.ralph/config.json` (optional) and merges it over the defaults.
pub(crate) fn load(root: &Path) -> Result<Config, Vec<Problem>> {
    let rel = Path::new(CONFIG_FILE);
    let path = root.join(rel);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return from_text(None),
        Err(e) => {
            return Err(vec![Problem::new(
                rel,
                None,
                format!("cannot read the config file: {e}; check its permissions"),
            )])
        }
    };
    from_text(Some(&text))
}

/// The config a `.ralph/config.json` of `text` makes (`None`: no file, the
/// defaults): what `load` reads, from wherever the text came.
pub(crate) fn from_text(text: Option<&str>) -> Result<Config, Vec<Problem>> {
    let rel = Path::new(CONFIG_FILE);
    let Some(text) = text else {
        return build(defaults(), rel, None);
    };
    // Editors on Windows may save a BOM, which serde_json rejects.
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    let user: Value = serde_json::from_str(body).map_err(|e| {
        vec![Problem::new(
            rel,
            Some(e.line()).filter(|&l| l > 0),
            format!(
                "invalid JSON ({}); fix the syntax or delete the file to use the defaults",
                strip_serde_position(&e.to_string())
            ),
        )]
    })?;
    if !user.is_object() {
        return Err(vec![Problem::new(
            rel,
            Some(1),
            format!(
                "the config must be a JSON object such as {{\"loop\": {{\"max_retries\": 3}}}}, got {}",
                kind(&user)
            ),
        )]);
    }
    let mut merged = defaults();
    deep_merge(&mut merged, user);
    build(merged, rel, Some(text))
}

pub(crate) const CONFIG_FILE: &str = crate::paths::CONFIG;

/// serde_json appends "at line L column C"; the line already goes into the
/// `Problem`, so repeating it would only add noise.
fn strip_serde_position(msg: &str) -> &str {
    match msg.rfind(" at line ") {
        Some(i) => &msg[..i],
        None => msg,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn build(raw: Value, file: &Path, text: Option<&str>) -> Result<Config, Vec<Problem>> {
    let mut r = Reader {
        raw: &raw,
        defaults: defaults(),
        file,
        text,
        problems: Vec::new(),
        read: Default::default(),
    };

    if !raw.is_object() {
        let shown = kind(&raw);
        return Err(vec![Problem::new(
            file,
            None,
            format!("the config must be a JSON object, got {shown}"),
        )]);
    }
    // Every section of the key table, so a new one cannot be left out.
    let sections: std::collections::BTreeSet<&str> = keys::KEYS
        .iter()
        .filter_map(|k| k.key.split_once('.').map(|(s, _)| s))
        .collect();
    for section in sections {
        if let Some(v) = raw.get(section).filter(|v| !v.is_object() && !v.is_null()) {
            let shown = v.to_string();
            r.problem(
                section,
                format!("{section} must be a JSON object of settings, got {shown}"),
            );
        }
    }

    // Editors find the JSON Schema through it (docs/config.schema.json).
    let _ = r.get("$schema");
    let specs = sections::specs(&mut r);
    let loop_ = sections::read_loop(&mut r);
    let validation = sections::validation(&mut r);
    let agent = sections::agent(&mut r);
    let limits = sections::limits(&mut r);
    let budget = sections::budget(&mut r);
    let commit = sections::commit(&mut r);
    let learnings = sections::learnings(&mut r);
    let parallel = sections::parallel(&mut r);
    let retry = sections::retry(&mut r);
    let attempts = attempts::attempts(&mut r);
    let landing = landing::landing(&mut r);
    let decomposition = sections::decomposition(&mut r);
    let postmortem = sections::postmortem(&mut r);
    let hooks = sections::hooks(&mut r);
    let runs = sections::runs(&mut r);
    let serve = sections::serve(&mut r);
    let sandbox = sections::sandbox(&mut r);
    let executor = executor::executor(&mut r);
    let backlog = backlog::backlog(&mut r);
    let pricing = sections::pricing(&mut r);
    let gates = gates::gates(&mut r);
    let notify = notify::notify(&mut r);

    let problems = std::mem::take(&mut r.problems);
    let read = r.read.take();
    drop(r);
    if !problems.is_empty() {
        return Err(problems);
    }
    // The table, not `read`: a key read only in some modes (`parallel.
    // auto_merge` is moot once landing.mode is set) is still ralph's.
    let known = keys::KEYS.iter().map(|k| k.key.to_string()).collect();
    let key_warnings = key_warnings(&raw, &known, text);
    Ok(Config {
        raw: raw.clone(),
        key_warnings,
        known_keys: read,
        specs,
        loop_,
        validation,
        agent,
        limits,
        budget,
        commit,
        learnings,
        parallel,
        retry,
        attempts,
        landing,
        decomposition,
        postmortem,
        hooks,
        runs,
        serve,
        sandbox,
        executor,
        backlog,
        pricing,
        gates,
        notify,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(user: Value) -> Result<Config, Vec<Problem>> {
        let mut merged = defaults();
        deep_merge(&mut merged, user);
        from_value(merged, Path::new(".ralph/config.json"))
    }

    fn messages(problems: &[Problem]) -> Vec<String> {
        problems.iter().map(|p| p.message.clone()).collect()
    }

    #[test]
    fn pre_worktree_timeout_is_the_bash_tools_key() {
        assert_eq!(cfg(json!({})).unwrap().hooks.pre_worktree_timeout, 120);
        let c = cfg(json!({"hooks": {"pre_worktree_timeout": "30"}})).unwrap();
        assert_eq!(c.hooks.pre_worktree_timeout, 30);
        let bad = cfg(json!({"hooks": {"pre_worktree_timeout": 0}})).unwrap_err();
        assert_eq!(
            messages(&bad),
            vec!["hooks.pre_worktree_timeout must be a positive number of seconds, got 0"]
        );
    }

    #[test]
    fn defaults_match_the_spec() {
        let c = cfg(json!({})).unwrap();
        assert_eq!(c.specs.pattern, "specs/epic-{{epic}}/story-{{id}}-*.md");
        assert_eq!(c.specs.status_field, "status");
        assert_eq!(c.loop_.max_iterations, 0);
        assert_eq!(c.loop_.timeout_secs, 1800);
        assert_eq!(c.loop_.max_retries, 3);
        assert!(c.validation.commands.is_empty());
        assert!(c.validation.blocked_commands.is_empty());
        assert_eq!(c.agent.claude_command, "claude");
        assert_eq!(c.agent.claude_flags, None);
        assert_eq!(c.commit.format, "feat(story-{{id}}): {{title}}");
        assert!(c.commit.stage_paths.is_empty());
        assert!(c.learnings.enabled);
        assert_eq!(c.learnings.max, 5);
        assert!(!c.parallel.enabled);
        assert!(c.retry.resume_session);
        assert!(
            !cfg(json!({"retry": {"resume_session": "false"}}))
                .unwrap()
                .retry
                .resume_session
        );
        assert_eq!(c.parallel.max_concurrent, None);
        assert_eq!(
            c.hooks,
            Hooks {
                pre_worktree_timeout: 120,
                ..Hooks::default()
            }
        );
        assert_eq!(c.loop_.grace_secs, 10);
        assert!(!c.loop_.allow_empty_done);
        assert_eq!(c.parallel.retry_concurrency, 1);
        assert_eq!(c.parallel.agent_memory_mb, 2048);
    }

    #[test]
    fn scheduling_keys() {
        let c = cfg(json!({"parallel": {"retry_concurrency": "2", "agent_memory_mb": 0}})).unwrap();
        assert_eq!(
            (c.parallel.retry_concurrency, c.parallel.agent_memory_mb),
            (2, 0)
        );
        let bad =
            cfg(json!({"parallel": {"retry_concurrency": 0, "agent_memory_mb": -1}})).unwrap_err();
        assert_eq!(
            messages(&bad),
            vec![
                "parallel.retry_concurrency must be a whole number of attempts, at least 1, got 0",
                "parallel.agent_memory_mb must be a whole number of megabytes (0 turns the memory \
                 check off), got -1"
            ]
        );
    }

    #[test]
    fn merge_objects_merge_and_arrays_replace() {
        let mut base = json!({"a": {"x": 1, "y": [1, 2, 3]}, "b": 2});
        deep_merge(
            &mut base,
            json!({"a": {"y": [9], "z": true}, "c": {"d": null}}),
        );
        assert_eq!(
            base,
            json!({"a": {"x": 1, "y": [9], "z": true}, "b": 2, "c": {"d": null}})
        );

        let mut base = json!({"a": {"x": 1}});
        deep_merge(&mut base, json!({"a": 5}));
        assert_eq!(base, json!({"a": 5}));
    }

    #[test]
    fn string_booleans_and_numbers_are_accepted() {
        let c = cfg(json!({
            "learnings": {"enabled": "false", "max_inject_count": "2"},
            "parallel": {"enabled": "true", "max_concurrent": "3"},
            "loop": {"timeout_seconds": "60", "max_retries": 2, "max_iterations": null},
            "claude": {"flags": ["--print"]},
            "unknown": {"kept": 1}
        }))
        .unwrap();
        assert!(!c.learnings.enabled);
        assert_eq!(c.learnings.max, 2);
        assert!(c.parallel.enabled);
        assert_eq!(c.parallel.max_concurrent, Some(3));
        assert_eq!(c.loop_.timeout_secs, 60);
        assert_eq!(c.loop_.max_retries, 2);
        assert_eq!(c.loop_.max_iterations, 0);
        assert_eq!(c.agent.claude_flags, Some(vec!["--print".to_string()]));
        assert_eq!(c.raw["unknown"]["kept"], 1);
    }

    #[test]
    fn the_defaults_have_no_unread_key() {
        // A default that the code never reads would warn every user.
        assert_eq!(cfg(json!({})).unwrap().key_warnings, vec![]);
    }

    #[test]
    fn a_key_read_only_in_some_modes_is_never_unknown() {
        // `parallel.auto_merge` means nothing once landing.mode says review
        // or pr, so the reader skips it; it is still ralph's key.
        for mode in ["review", "pr"] {
            let c = cfg(json!({"landing": {"mode": mode}})).unwrap();
            assert_eq!(c.key_warnings, vec![], "landing.mode {mode}");
        }
    }

    /// `text` as .ralph/config.json, merged over the defaults as `load` does,
    /// its lines kept for the warnings.
    fn from_text(text: &str) -> Config {
        let mut merged = defaults();
        deep_merge(&mut merged, serde_json::from_str(text).unwrap());
        build(merged, Path::new(CONFIG_FILE), Some(text)).unwrap()
    }

    #[test]
    fn unknown_keys_are_named_with_a_guess_and_their_line() {
        let text = "{\n  \"paralell\": {\"enabled\": true},\n  \"loop\": {\"max_retrys\": 2, \"zzz\": 1}\n}\n";
        let c = from_text(text);
        assert_eq!(
            c.warning_lines(),
            vec![
                "warning: .ralph/config.json:2: unknown key \"paralell.enabled\" is ignored; did you mean \"parallel.enabled\"?",
                "warning: .ralph/config.json:3: unknown key \"loop.max_retrys\" is ignored; did you mean \"loop.max_retries\"?",
                "warning: .ralph/config.json:3: unknown key \"loop.zzz\" is ignored",
            ]
        );
    }

    /// Regression (issue 21, 7): the documented typo as a key of its own
    /// (`"paralell": true`) got no guess; the sections are candidates too.
    #[test]
    fn a_misspelt_section_is_guessed_like_a_misspelt_key() {
        let text = "{\n  \"paralell\": true,\n  \"lop\": {}\n}\n";
        let c = from_text(text);
        assert_eq!(
            c.warning_lines(),
            vec![
                "warning: .ralph/config.json:2: unknown key \"paralell\" is ignored; did you mean \"parallel\"?",
                "warning: .ralph/config.json:3: unknown key \"lop\" is ignored; did you mean \"loop\"?",
            ]
        );
    }

    #[test]
    fn ralph_v2_keys_warn_once_per_feature_or_not_at_all() {
        let c = cfg(json!({
            "version": "2.0.0",
            "project": {"name": "x"},
            "specs": {"id_format": "epic.story"},
            "caffeine": false,
            "mcp": {"enabled": false, "browser": {"enabled": false}},
            "parallel": {"strategy": "worktree", "stagger_seconds": 3}
        }))
        .unwrap();
        let keys: Vec<_> = c.key_warnings.iter().map(|w| w.key.as_str()).collect();
        assert_eq!(keys, vec!["caffeine", "mcp"]);
        assert!(matches!(
            c.key_warnings[0].kind,
            KeyWarningKind::RalphV2 { .. }
        ));
    }

    #[test]
    fn validation_commands_default_name_and_required() {
        let c = cfg(json!({"validation": {"commands": [
            {"cmd": "cargo test"},
            {"name": "lint", "cmd": "cargo clippy", "required": false},
            {"name": "fmt", "cmd": "cargo fmt --check", "required": "true", "exclusive": true}
        ]}}))
        .unwrap();
        assert_eq!(
            c.validation.commands,
            vec![
                ValidationCommand {
                    name: "cargo test".into(),
                    cmd: "cargo test".into(),
                    required: true,
                    exclusive: false
                },
                ValidationCommand {
                    name: "lint".into(),
                    cmd: "cargo clippy".into(),
                    required: false,
                    exclusive: false
                },
                ValidationCommand {
                    name: "fmt".into(),
                    cmd: "cargo fmt --check".into(),
                    required: true,
                    exclusive: true
                },
            ]
        );
    }

    #[test]
    fn every_problem_is_reported() {
        let problems = cfg(json!({
            "specs": {"pattern": "specs/{{id}}.md"},
            "loop": {"timeout_seconds": -5, "max_retries": 0, "max_iterations": "many"},
            "validation": {"commands": ["npm test", {"name": "x"}], "blocked_commands": [1]},
            "claude": {"flags": "--print"},
            "parallel": {"max_concurrent": -1, "enabled": "yes"},
            "hooks": {"pre_story": 3}
        }))
        .unwrap_err();
        let msgs = messages(&problems);
        let expect = [
            "specs.pattern must contain both {{epic}} and {{id}}",
            "loop.timeout_seconds must be a positive number of seconds, got -5",
            "loop.max_retries must be a whole number of attempts, at least 1, got 0",
            "loop.max_iterations must be a whole number of iterations (0 means no limit), got \"many\"",
            "validation.commands[0] must be an object",
            "validation.commands[1].cmd must be the shell command to run, got nothing",
            "validation.blocked_commands must be an array of strings",
            "claude.flags must be an array of strings",
            "parallel.max_concurrent must be a whole number of workers, at least 1, got -1",
            "parallel.enabled must be true or false, got \"yes\"",
            "hooks.pre_story must be a string, got 3",
        ];
        for e in expect {
            assert!(
                msgs.iter().any(|m| m.starts_with(e)),
                "missing {e:?} in {msgs:#?}"
            );
        }
        assert_eq!(msgs.len(), expect.len(), "{msgs:#?}");
        assert!(problems
            .iter()
            .all(|p| p.file == Path::new(".ralph/config.json")));
    }

    #[test]
    fn zero_timeout_is_a_problem() {
        let problems = cfg(json!({"loop": {"timeout_seconds": 0}})).unwrap_err();
        assert_eq!(
            messages(&problems),
            ["loop.timeout_seconds must be a positive number of seconds, got 0"]
        );
    }

    #[test]
    fn section_of_the_wrong_type_is_a_problem() {
        let problems = cfg(json!({"loop": 5})).unwrap_err();
        assert_eq!(
            messages(&problems),
            ["loop must be a JSON object of settings, got 5"]
        );
        let problems = cfg(json!({"landing": "pr"})).unwrap_err();
        assert_eq!(
            messages(&problems),
            ["landing must be a JSON object of settings, got \"pr\""]
        );
    }

    fn write_config(text: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".ralph")).unwrap();
        std::fs::write(dir.path().join(".ralph/config.json"), text).unwrap();
        dir
    }

    #[test]
    fn load_without_a_file_gives_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let c = load(dir.path()).unwrap();
        assert_eq!(c.loop_.timeout_secs, 1800);
    }

    #[test]
    fn load_reports_bad_json_with_its_line() {
        let dir = write_config("{\n  \"loop\": {\n    \"max_retries\": 2,\n  }\n}\n");
        let problems = load(dir.path()).unwrap_err();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].file, Path::new(".ralph/config.json"));
        assert_eq!(problems[0].line, Some(4));
        assert!(
            problems[0].message.starts_with("invalid JSON"),
            "{}",
            problems[0]
        );
    }

    #[test]
    fn load_rejects_a_non_object() {
        let dir = write_config("[1, 2]");
        let problems = load(dir.path()).unwrap_err();
        assert!(
            problems[0].message.contains("must be a JSON object"),
            "{}",
            problems[0]
        );
    }

    #[test]
    fn load_locates_the_offending_key() {
        let dir = write_config(
            "{\n  \"testing_phase\": {\"timeout_seconds\": 5},\n  \"loop\": {\n    \"timeout_seconds\": -5\n  }\n}\n",
        );
        let problems = load(dir.path()).unwrap_err();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].line, Some(4));
        assert_eq!(
            problems[0].to_string(),
            ".ralph/config.json:4: loop.timeout_seconds must be a positive number of seconds, got -5"
        );
    }

    #[test]
    fn compat_configs_load() {
        let base = crate::testenv::fixture("ralph-v2");
        for run in ["batched", "parallel", "sequential"] {
            let c = load(&base.join(run)).unwrap();
            assert_eq!(c.loop_.max_retries, 2, "{run}");
            assert_eq!(c.validation.commands.len(), 1, "{run}");
            assert!(!c.validation.commands[0].required, "{run}");
            assert_eq!(
                c.agent.claude_flags,
                Some(vec![
                    "--print".into(),
                    "--dangerously-skip-permissions".into()
                ])
            );
        }
        for f in [
            "files/config.json",
            "files/config-minimal.json",
            "files/pipeline/config.json",
        ] {
            let text = std::fs::read_to_string(base.join(f)).unwrap();
            let mut merged = defaults();
            deep_merge(&mut merged, serde_json::from_str(&text).unwrap());
            let c = from_value(merged, Path::new(f)).unwrap();
            assert!(c.loop_.timeout_secs > 0, "{f}");
        }
        let full = load(&base.join("batched")).unwrap();
        assert_eq!(
            full.hooks.pre_story,
            "echo \"Starting $RALPH_STORY\" >> hooks.log"
        );
        assert_eq!(full.parallel.max_concurrent, Some(2));
        assert_eq!(full.learnings.max, 3);
    }
}
