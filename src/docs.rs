//! Documents generated from the code, so they cannot drift from it:
//! docs/config.md (every config key, its type, default and meaning) and
//! docs/config.schema.json (a JSON Schema of `.ralph/config.json` for
//! editors). Both come from `config::keys::KEYS` and `config::defaults()`.
//! The files in the repository are checked against these renderings by a
//! test; `RALPH_BLESS=1 cargo test --lib docs::` rewrites them.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::config::keys::{KeyDoc, Kind, KEYS};
use crate::config::{self, RALPH_V2_IGNORED, RALPH_V2_INERT};

/// What each section of the file is about.
const SECTIONS: &[(&str, &str)] = &[
    ("", "Top level"),
    ("specs", "Where each story's spec is"),
    (
        "backlog",
        "Where the stories are kept: files, GitHub Issues or Linear",
    ),
    ("loop", "Attempts: how many, how long"),
    ("validation", "What a story must pass to land"),
    ("claude", "Claude Code, the default agent"),
    ("agent", "Which agent CLI runs the stories"),
    ("limits", "Usage limits of the agents"),
    ("budget", "Spending caps"),
    ("commit", "What the prompt asks the agent to commit"),
    ("learnings", "What agents pass on to later stories"),
    ("parallel", "Several stories at once"),
    ("hooks", "Shell commands around each attempt"),
    ("notify", "Webhooks: chat and JSON posts about the run"),
    ("retry", "Fix-ups: finished work handed back to its agent"),
    ("attempts", "Best of N: candidates racing for one attempt"),
    ("decomposition", "Splitting a story that keeps failing"),
    ("postmortem", "A lesson after a timeout"),
    ("runs", "Run records"),
    ("serve", "The live web view"),
    ("landing", "Landing, or keeping work for review"),
    ("gates", "Trust gates before landing (docs/gates.md)"),
    (
        "sandbox",
        "Sealed attempts: environment, redaction, confinement",
    ),
    (
        "executor",
        "Where attempts run: this machine or a Ray cluster",
    ),
];

fn section_of(key: &str) -> &str {
    match key.split_once('.') {
        Some((s, _)) => s,
        None => "",
    }
}

fn section_title(section: &str) -> &'static str {
    SECTIONS
        .iter()
        .find(|(s, _)| *s == section)
        .map_or("", |(_, t)| t)
}

fn lookup<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.')
        .try_fold(v, |cur, key| cur.as_object()?.get(key))
}

/// The built-in default of `key`, when `config::defaults()` holds one.
fn default_value(key: &str) -> Option<Value> {
    lookup(&config::defaults(), key).cloned()
}

fn type_words(kind: Kind) -> String {
    match kind {
        Kind::Uint { min } => format!("integer ≥ {min}"),
        Kind::Bool => "boolean".into(),
        Kind::Str => "string".into(),
        Kind::Strings => "array of strings".into(),
        Kind::Amount => "number (USD)".into(),
        Kind::Agent => "agent name".into(),
        Kind::Agents => "array of agent names".into(),
        Kind::ValidationCommands | Kind::Webhooks => "array of objects".into(),
        Kind::Ladder => "array of model names or objects".into(),
        Kind::Prices => "object of objects".into(),
        Kind::StringMap => "object of strings".into(),
        Kind::Any => "any".into(),
    }
}

/// A table cell: no line breaks, no bare `|`.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn default_words(k: &KeyDoc) -> String {
    match (default_value(k.key), k.default) {
        (Some(v), _) => format!("`{v}`"),
        (None, Some(words)) => words.to_string(),
        (None, None) => "none".to_string(),
    }
}

/// docs/config.md.
pub(crate) fn config_markdown() -> String {
    let mut out = String::new();
    out.push_str(
        "<!-- Generated from src/config/keys.rs and config::defaults() by \
         `RALPH_BLESS=1 cargo test --lib docs::`: edit those, not this file. -->\n\n",
    );
    out.push_str(&format!("# Configuration: `{}`\n\n", crate::paths::CONFIG));
    out.push_str(
        "The file is optional. It is a JSON object deep-merged over the defaults below: \
         objects merge key by key, arrays and other values replace. A whole number may \
         also be written as a string (`\"60\"`), a boolean as `\"true\"`/`\"false\"`, and \
         `null` means the default. A bad value is an error naming the file, the line and \
         the key (exit 2, before anything runs).\n\n\
         Keys ralph does not read are kept and ignored; `ralph validate` and `ralph run` \
         warn about each with its line and, for a likely typo, the key it resembles \
         (`\"paralell\"` → `parallel.enabled`). Ralph v2's keys are accepted (see the end).\n\n\
         Editors that understand JSON Schema complete and check the file when it names \
         the schema shipped with ralph, [`docs/config.schema.json`](config.schema.json):\n\n\
         ```json\n{\n  \"$schema\": \"../path/to/ralph/docs/config.schema.json\",\n  \
         \"parallel\": { \"enabled\": true, \"max_concurrent\": 4 }\n}\n```\n\n\
         Command-line flags win over the file: `-n` over `loop.max_iterations`, `-t` over \
         `loop.timeout_seconds`, `--parallel`/`-j` over `parallel.*`, `--agent` over \
         `agent.name`, `--max-cost` over `budget.max_cost_usd`.\n",
    );
    let mut sections: Vec<&str> = Vec::new();
    for k in KEYS {
        let s = section_of(k.key);
        if !sections.contains(&s) {
            sections.push(s);
        }
    }
    for s in sections {
        let title = section_title(s);
        if s.is_empty() {
            out.push_str(&format!("\n## {title}\n\n"));
        } else {
            out.push_str(&format!("\n## `{s}`: {title}\n\n"));
        }
        out.push_str("| key | type | default | what it does |\n|---|---|---|---|\n");
        for k in KEYS.iter().filter(|k| section_of(k.key) == s) {
            out.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                k.key,
                type_words(k.kind),
                cell(&default_words(k)),
                cell(k.doc)
            ));
        }
    }
    out.push_str(&format!(
        "\nAgent names: {}.\n\n\
         `validation.commands` entries: `name` (shown in messages; default: the command), \
         `cmd` (the shell command, run with `bash -c` in a worktree of the merged tree), \
         `required` (default `true`; a command with `false` is listed in the prompt but \
         does not gate landing).\n",
        crate::agent::Backend::ALL
            .iter()
            .map(|b| format!("`{}`", b.name()))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    out.push_str(
        "\n## Ralph v2 keys\n\n\
         Accepted without a word (ralph needs no setting for them): ",
    );
    out.push_str(
        &RALPH_V2_INERT
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    out.push_str(".\n\nAccepted with a warning, because ralph has no such feature:\n\n");
    for (k, why) in RALPH_V2_IGNORED {
        if documented_under(k) {
            continue;
        }
        out.push_str(&format!("- `{k}`: {why}\n"));
    }
    out
}

/// True when a key ralph reads lies at or under `prefix` (a Ralph v2
/// feature ralph has since gained).
fn documented_under(prefix: &str) -> bool {
    KEYS.iter().any(|k| {
        k.key == prefix
            || k.key
                .strip_prefix(prefix)
                .is_some_and(|r| r.starts_with('.'))
            || prefix
                .strip_prefix(k.key)
                .is_some_and(|r| r.starts_with('.'))
    })
}

fn uint_string() -> Value {
    json!({"type": "string", "pattern": "^\\s*[0-9]*\\s*$"})
}

fn bool_schema() -> Value {
    json!({"anyOf": [{"type": "boolean"}, {"enum": ["true", "false"]}, {"type": "null"}]})
}

fn kind_schema(kind: Kind) -> Value {
    let agents: Vec<Value> = crate::agent::Backend::ALL
        .iter()
        .map(|b| Value::from(b.name()))
        .collect();
    match kind {
        Kind::Uint { min } => json!({"anyOf": [
            {"type": "integer", "minimum": min},
            uint_string(),
            {"type": "null"}
        ]}),
        Kind::Bool => bool_schema(),
        Kind::Str => json!({"type": ["string", "null"]}),
        Kind::Strings => json!({"type": ["array", "null"], "items": {"type": "string"}}),
        Kind::Amount => json!({"anyOf": [
            {"type": "number", "minimum": 0},
            {"type": "string", "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*$"},
            {"type": "null"}
        ]}),
        Kind::Agent => {
            let mut names = agents;
            names.push(Value::Null);
            json!({ "enum": names })
        }
        Kind::Agents => json!({"type": ["array", "null"], "items": {"enum": agents}}),
        Kind::Webhooks => json!({
            "type": ["array", "null"],
            "items": {
                "type": "object",
                "required": ["url"],
                "properties": {
                    "url": {"type": "string", "pattern": "^https?://"},
                    "events": {"type": ["array", "null"], "items": {"enum": ["run_end", "story_landed", "story_failed", "paused"]}},
                    "format": {"enum": ["slack", "discord", "json", null]}
                }
            }
        }),
        Kind::ValidationCommands => json!({
            "type": ["array", "null"],
            "items": {
                "type": "object",
                "required": ["cmd"],
                "properties": {
                    "name": {"type": ["string", "null"], "description": "Shown in messages; default: the command."},
                    "cmd": {"type": "string", "minLength": 1, "description": "The shell command, run with bash -c in a worktree of the merged tree."},
                    "required": {
                        "description": "A failing required command refuses the landing (default true).",
                        "anyOf": bool_schema()["anyOf"].clone()
                    }
                },
                "additionalProperties": false
            }
        }),
        Kind::Ladder => json!({"type": ["array", "null"], "items": {"anyOf": [
            {"type": "string"},
            {"type": "object", "properties": {"agent": {"enum": agents}, "model": {"type": "string"}},
             "required": ["model"]}
        ]}}),
        Kind::Prices => json!({"type": ["object", "null"], "additionalProperties": {
            "type": "object",
            "properties": {
                "input": {"type": "number", "minimum": 0},
                "output": {"type": "number", "minimum": 0},
                "cache_read": {"type": "number", "minimum": 0},
                "cache_write": {"type": "number", "minimum": 0}
            },
            "required": ["input", "output"]
        }}),
        Kind::StringMap => json!({
            "type": ["object", "null"],
            "additionalProperties": {"type": "string"}
        }),
        Kind::Any => json!({}),
    }
}

/// Markdown backticks are noise in an editor's tooltip.
fn plain(doc: &str) -> String {
    doc.replace('`', "")
}

/// docs/config.schema.json.
pub(crate) fn config_schema() -> String {
    // section → key → schema ("" is the top level).
    let mut tree: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for k in KEYS {
        let mut schema = kind_schema(k.kind);
        let obj = schema.as_object_mut().expect("schemas are objects");
        let mut description = plain(k.doc);
        if k.kind == Kind::Any {
            description.push_str(" Type: any.");
        }
        obj.insert("description".into(), Value::from(description));
        if let Some(d) = default_value(k.key) {
            obj.insert("default".into(), d);
        }
        let (section, name) = match k.key.split_once('.') {
            Some((s, n)) => (s, n),
            None => ("", k.key),
        };
        tree.entry(section.to_string())
            .or_default()
            .insert(name.to_string(), schema);
    }
    let v2 = |why: &str| json!({"description": format!("Ralph v2 key, ignored: {why}."), "deprecationMessage": format!("ralph ignores this Ralph v2 key: {why}.")});
    for (prefix, why) in RALPH_V2_IGNORED {
        if documented_under(prefix) {
            continue;
        }
        let (section, name) = prefix.split_once('.').unwrap_or(("", prefix));
        tree.entry(section.to_string())
            .or_default()
            .insert(name.to_string(), v2(why));
    }
    for k in RALPH_V2_INERT {
        let covered = RALPH_V2_IGNORED
            .iter()
            .any(|(p, _)| k.starts_with(&format!("{p}.")));
        if covered || documented_under(k) {
            continue;
        }
        let (section, name) = k.split_once('.').unwrap_or(("", k));
        tree.entry(section.to_string()).or_default().insert(
            name.to_string(),
            json!({"description": "Ralph v2 key; ralph needs no setting for it and ignores it."}),
        );
    }
    let mut top = tree.remove("").unwrap_or_default();
    for (section, props) in tree {
        let title = section_title(&section);
        let mut s = json!({
            "type": ["object", "null"],
            "properties": props,
            "additionalProperties": false,
        });
        if !title.is_empty() {
            s["description"] = Value::from(title);
        }
        top.insert(section, s);
    }
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": format!("ralph: {}", crate::paths::CONFIG),
        "description": "Settings of ralph, deep-merged over its defaults. Generated from ralph's code (docs/config.md has the same in prose).",
        "type": "object",
        "properties": top,
        "additionalProperties": false,
    });
    let mut text = serde_json::to_string_pretty(&schema).expect("a JSON value");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::Path;

    fn docs_dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs")
    }

    /// `RALPH_BLESS=1` writes `want` to the file; otherwise the file must
    /// already hold it.
    fn check_file(name: &str, want: &str) {
        let path = docs_dir().join(name);
        if std::env::var_os("RALPH_BLESS").is_some() {
            std::fs::write(&path, want).unwrap();
            return;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "docs/{name} is not what the code generates; run \
             `RALPH_BLESS=1 cargo test --lib docs::` and commit the result"
        );
    }

    #[test]
    fn docs_config_md_is_current() {
        check_file("config.md", &config_markdown());
    }

    #[test]
    fn docs_config_schema_is_current() {
        check_file("config.schema.json", &config_schema());
    }

    fn built(user: Value) -> Result<config::Config, Vec<crate::error::Problem>> {
        let mut merged = config::defaults();
        config::deep_merge(&mut merged, user);
        config::from_value(merged, Path::new(".ralph/config.json"))
    }

    #[test]
    fn every_key_the_reader_reads_is_documented_and_nothing_else() {
        let read = built(json!({})).unwrap().known_keys;
        let table: BTreeSet<String> = KEYS.iter().map(|k| k.key.to_string()).collect();
        let undocumented: Vec<_> = read.difference(&table).collect();
        let unread: Vec<_> = table.difference(&read).collect();
        assert!(
            undocumented.is_empty() && unread.is_empty(),
            "config keys read but not in src/config/keys.rs: {undocumented:?}; \
             in the table but never read: {unread:?}"
        );
        assert_eq!(KEYS.len(), table.len(), "a key is in the table twice");
        for k in KEYS {
            assert!(
                SECTIONS.iter().any(|(s, _)| *s == section_of(k.key)),
                "{}: add its section to docs::SECTIONS",
                k.key
            );
        }
    }

    /// A value of the right shape for `kind`.
    fn accepts(kind: Kind, v: &Value) -> bool {
        let names = crate::agent::Backend::names();
        let agent = |v: &Value| {
            v.as_str()
                .is_some_and(|s| names.split(", ").any(|n| n == s))
        };
        match kind {
            Kind::Uint { min } => v.as_u64().is_some_and(|n| n >= min),
            Kind::Bool => v.is_boolean(),
            Kind::Str => v.is_string(),
            Kind::Strings => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
            Kind::Amount => v.as_f64().is_some_and(|x| x >= 0.0),
            Kind::Agent => agent(v),
            Kind::Agents => v.as_array().is_some_and(|a| a.iter().all(agent)),
            Kind::ValidationCommands | Kind::Ladder | Kind::Webhooks => v.is_array(),
            Kind::Prices => v.is_object(),
            Kind::StringMap => v
                .as_object()
                .is_some_and(|o| o.values().all(Value::is_string)),
            Kind::Any => true,
        }
    }

    #[test]
    fn defaults_come_from_the_code() {
        for k in KEYS {
            match (default_value(k.key), k.default) {
                (Some(v), None) => assert!(accepts(k.kind, &v), "{}: default {v}", k.key),
                (None, Some(_)) => {}
                (Some(v), Some(w)) => panic!(
                    "{}: config::defaults() says {v}; drop the words {w:?} from the table",
                    k.key
                ),
                (None, None) => panic!(
                    "{}: no default in config::defaults(); say it in words",
                    k.key
                ),
            }
        }
    }

    /// Each declared kind is what the reader checks: a value of another
    /// shape is refused under that very key.
    #[test]
    fn the_declared_kinds_are_what_the_reader_refuses() {
        for k in KEYS {
            let bad = match k.kind {
                Kind::Uint { min } if min > 0 => json!(min - 1),
                Kind::Uint { .. } => json!("many"),
                Kind::Bool => json!("yes"),
                Kind::Str => json!(5),
                Kind::Strings => json!("one string"),
                Kind::Amount => json!("a lot"),
                Kind::Agent => json!("no-such-agent"),
                Kind::Agents => json!(["no-such-agent"]),
                Kind::ValidationCommands => json!(5),
                Kind::Webhooks => json!([{"url": "ftp://x"}]),
                Kind::Ladder => json!("haiku"),
                Kind::Prices => json!({"m": {"input": "cheap"}}),
                Kind::StringMap => json!(["A=1"]),
                Kind::Any => continue,
            };
            let mut user = json!({});
            let mut at = &mut user;
            let parts: Vec<&str> = k.key.split('.').collect();
            for p in &parts[..parts.len() - 1] {
                at = at.as_object_mut().unwrap().entry(*p).or_insert(json!({}));
            }
            at[parts[parts.len() - 1]] = bad.clone();
            let problems = built(user).err().unwrap_or_default();
            assert!(
                problems.iter().any(|p| p.key.as_deref() == Some(k.key)),
                "{}: the table says {:?}, but the reader took {bad}",
                k.key,
                k.kind
            );
        }
    }

    fn read_doc(name: &str) -> String {
        std::fs::read_to_string(docs_dir().join(name)).unwrap_or_default()
    }

    /// Every `.rs` file under `src/`, with its text.
    fn sources() -> Vec<(std::path::PathBuf, String)> {
        fn walk(dir: &Path, out: &mut Vec<(std::path::PathBuf, String)>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
                }
            }
        }
        let mut out = Vec::new();
        walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
        out
    }

    /// The guide names every prompt variable the code sets.
    #[test]
    fn every_prompt_variable_is_in_the_guide() {
        let guide = read_doc("agents.md");
        let code =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/prompt.rs"))
                .unwrap();
        let re = regex::Regex::new(r#"v\.set\(\s*"([A-Z_]+)""#).unwrap();
        let vars: Vec<&str> = re
            .captures_iter(&code)
            .map(|c| c.get(1).unwrap().as_str())
            .collect();
        assert!(vars.len() >= 9, "{vars:?}");
        for v in vars {
            assert!(
                guide.contains(&format!("`{{{{{v}}}}}`")),
                "docs/agents.md does not describe {{{{{v}}}}}"
            );
        }
    }

    /// The guide names every `RALPH_*` variable ralph sets for a child.
    #[test]
    fn every_ralph_variable_is_in_the_guide() {
        // Names in the code that are no child's environment.
        const NOT_FOR_CHILDREN: &[&str] = &[
            "RALPH_BLESS",
            "RALPH_GIT_COMMIT",
            "RALPH_GIT_DATE",
            "RALPH_ODD",
        ];
        let guide = read_doc("running.md");
        let re = regex::Regex::new(r#""(RALPH_[A-Z_]+)""#).unwrap();
        let mut seen = BTreeSet::new();
        for (path, text) in sources() {
            for c in re.captures_iter(&text) {
                let name = c.get(1).unwrap().as_str().to_string();
                if !NOT_FOR_CHILDREN.contains(&name.as_str()) {
                    seen.insert((name, path.clone()));
                }
            }
        }
        assert!(seen.iter().any(|(n, _)| n == "RALPH_RESULT"), "{seen:?}");
        for (name, path) in seen {
            assert!(
                guide.contains(&format!("| `{name}` |")),
                "{name} (set in {}) is not in docs/running.md's table",
                path.display()
            );
        }
    }

    /// The guide's exit-code table has every code.
    #[test]
    fn every_exit_code_is_in_the_guide() {
        use crate::error::*;
        let guide = read_doc("running.md");
        for code in [
            EXIT_OK,
            EXIT_STORIES_FAILED,
            EXIT_BAD_INPUT,
            EXIT_LOCKED,
            EXIT_INTERNAL,
            EXIT_INTERRUPTED,
        ] {
            assert!(
                guide.contains(&format!("\n| {code} | ")),
                "exit code {code}"
            );
        }
    }

    #[test]
    fn the_schema_is_valid_json_naming_every_key() {
        let schema: Value = serde_json::from_str(&config_schema()).unwrap();
        for k in KEYS {
            let at = match k.key.split_once('.') {
                Some((s, n)) => &schema["properties"][s]["properties"][n],
                None => &schema["properties"][k.key],
            };
            assert!(at.is_object(), "{} is missing from the schema", k.key);
            assert!(at["description"].is_string(), "{}", k.key);
        }
        assert_eq!(
            schema["properties"]["loop"]["properties"]["timeout_seconds"]["default"],
            1800
        );
        assert!(schema["properties"]["caffeine"]["deprecationMessage"].is_string());
    }
}
