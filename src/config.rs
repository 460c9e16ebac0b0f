//! `.ralph/config.json`: deep-merged over the built-in defaults (SPEC 3.1).
//!
//! Pure apart from `load`, which reads the one file.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::error::Problem;

pub(crate) mod keys;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ValidationCommand {
    pub(crate) name: String,
    pub(crate) cmd: String,
    pub(crate) required: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Hooks {
    pub(crate) pre_iteration: String,
    pub(crate) pre_story: String,
    pub(crate) post_story: String,
    pub(crate) post_iteration: String,
    pub(crate) pre_worktree: String,
    /// Seconds `pre_worktree` may take (the bash tool's key).
    pub(crate) pre_worktree_timeout: u64,
    /// Notifications: a run ended; a story failed for good or the circuit
    /// breaker tripped; new work paused for a usage limit or the budget.
    pub(crate) on_complete: String,
    pub(crate) on_failure: String,
    pub(crate) on_pause: String,
}

/// The effective configuration after merging.
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
    pub(crate) specs_pattern: String,
    pub(crate) status_field: String,
    pub(crate) max_iterations: u64,
    pub(crate) timeout_secs: u64,
    pub(crate) max_retries: u32,
    pub(crate) validation: Vec<ValidationCommand>,
    pub(crate) blocked_commands: Vec<String>,
    /// `agent.*` and `claude.command`/`claude.flags`: what `agent/` needs,
    /// as its own plain type.
    pub(crate) agent: crate::agent::Settings,
    /// `loop.idle_timeout_seconds` (default 600; 0 = none): an attempt that
    /// prints nothing for this long is stopped like a timeout.
    pub(crate) idle_timeout_secs: u64,
    /// `parallel.stagger_seconds` (Ralph v2's key; default 0): the least
    /// time between two agent starts.
    pub(crate) stagger_secs: u64,
    /// `limits.max_wait_hours` (default 6): a usage limit that resets later
    /// than this is not waited for.
    pub(crate) max_wait_hours: u64,
    /// `budget.max_cost_usd`: the most one run may spend.
    pub(crate) budget_run_usd: Option<f64>,
    /// `budget.max_cost_usd_total`: the most all runs together may spend.
    pub(crate) budget_total_usd: Option<f64>,
    /// `budget.max_tokens`: the most tokens one run may use (for agents
    /// that report tokens but no cost).
    pub(crate) budget_tokens: Option<u64>,
    pub(crate) commit_format: String,
    pub(crate) stage_paths: Vec<String>,
    pub(crate) learnings_enabled: bool,
    pub(crate) learnings_max: usize,
    pub(crate) parallel_enabled: bool,
    /// `parallel.max_concurrent` when the user set it; `-j` falls back to 4
    /// otherwise (SPEC 2).
    pub(crate) max_concurrent: Option<usize>,
    /// `parallel.retry_concurrency` (default 1): the most retries (attempts
    /// after a failure or a conflict) running at once.
    pub(crate) retry_concurrency: usize,
    /// `parallel.agent_memory_mb` (default 2048; 0 = no check): the memory
    /// one agent needs; an agent that would not fit does not start.
    pub(crate) agent_memory_mb: u64,
    pub(crate) hooks: Hooks,
    /// `loop.grace_seconds` (default 10): SIGTERM → SIGKILL grace period.
    pub(crate) grace_secs: u64,
    /// `loop.allow_empty_done` (default false): a DONE that changed nothing
    /// lands (as the status edit alone) instead of failing the attempt. A
    /// spec's frontmatter `allow_empty_done: true` allows it for one story.
    pub(crate) allow_empty_done: bool,
    /// `decomposition.enabled` (default true): a story that fails for good
    /// is split into sub-stories by one agent run.
    pub(crate) decompose_enabled: bool,
    /// `decomposition.max_depth` (default 2): how many times a story's
    /// line may be split.
    pub(crate) decompose_max_depth: usize,
    /// `decomposition.timeout_seconds` (default 600).
    pub(crate) decompose_timeout_secs: u64,
    /// `postmortem.enabled` (default true): after a timeout, a short run
    /// asks why and stores its lessons as learnings.
    pub(crate) postmortem_enabled: bool,
    /// `postmortem.window_seconds` (default 300): the postmortem's timeout.
    pub(crate) postmortem_window_secs: u64,
    /// `postmortem.max_output_chars` (default 50000): how much of the end
    /// of the timed-out attempt's output it reads.
    pub(crate) postmortem_max_chars: usize,
    /// `landing.mode: review` (or Ralph v2's `parallel.auto_merge: false`):
    /// validated work stays on its story branch for `ralph land`.
    pub(crate) review: bool,
    /// `landing.mode: pr`: validated work is pushed to `landing.remote`
    /// (default `origin`) and proposed with `gh pr create`; the remote.
    pub(crate) pr_remote: Option<String>,
    /// `retry.resume_session` (default true): a fix-up continues the agent's
    /// session where its CLI can resume one.
    pub(crate) resume_session: bool,
    /// `runs.max_mb` (default 100): the most `.ralph/runs/` holds; the
    /// oldest runs' records go first.
    pub(crate) runs_max_bytes: u64,
    /// `sandbox.*`: the environment allowlist, redaction and confinement
    /// of agents and the commands that run their code (SPEC 9).
    pub(crate) sandbox: crate::sandbox::Settings,
    /// `executor.*`: where attempts run (issue 23).
    pub(crate) executor: Executor,
}

/// `executor.kind` and its settings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Executor {
    /// Slot worktrees of this checkout, agents as children (the default).
    Local,
    /// Each attempt is a job on a Ray cluster.
    Ray(RaySettings),
}

/// `executor.ray.*` and `executor.relay`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RaySettings {
    /// The dashboard's HTTP address (`http://127.0.0.1:8265`).
    pub(crate) address: String,
    /// The environment variable holding the cluster's token (never its value).
    pub(crate) token_env: String,
    /// ralph's path on the nodes; empty: the binary is uploaded with the job.
    pub(crate) ralph_path: String,
    /// Custom resources each attempt's job asks for (`{"ralph_slot": 1}`).
    pub(crate) resources: Vec<(String, f64)>,
    /// The git remote work travels through.
    pub(crate) relay: String,
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
            "blocked_commands": []
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
            "remote": "origin"
        },
        "retry": {
            "resume_session": true
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
            "agent_memory_mb": 2048
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
        "sandbox": {
            "mode": "auto",
            "network": true,
            "env": { "pass": [], "set": {} },
            "redact": [],
            "allow_read": [],
            "allow_write": []
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

/// `executor.*`: the Ray settings are read (and checked) only for `ray`.
fn executor(r: &mut Reader) -> Executor {
    let kind = r.string("executor.kind", false);
    let relay = r.string("executor.relay", false);
    let address = r.string("executor.ray.address", false);
    let token_env = r.string("executor.ray.token_env", false);
    let ralph_path = r.string("executor.ray.ralph_path", true);
    let mut resources = Vec::new();
    if let Some(v) = r.get("executor.ray.resources").cloned() {
        let parsed = v.as_object().and_then(|o| {
            o.iter()
                .map(|(k, v)| Some((k.clone(), v.as_f64().filter(|x| *x > 0.0)?)))
                .collect::<Option<Vec<_>>>()
        });
        match parsed {
            Some(list) => resources = list,
            None => r.problem(
                "executor.ray.resources",
                format!(
                    "executor.ray.resources must be an object of positive amounts such as \
                     {{\"ralph_slot\": 1}}, got {v}"
                ),
            ),
        }
    }
    match kind.as_str() {
        "local" => Executor::Local,
        "ray" => {
            if !(address.starts_with("http://") || address.starts_with("https://")) {
                r.problem(
                    "executor.ray.address",
                    format!(
                        "executor.ray.address must be the dashboard's URL such as \
                         \"http://127.0.0.1:8265\", got {address:?}"
                    ),
                );
            }
            Executor::Ray(RaySettings {
                address,
                token_env,
                ralph_path,
                resources,
                relay,
            })
        }
        other => {
            r.problem(
                "executor.kind",
                format!(
                    "executor.kind {other:?} is not one ralph has: \"local\" (attempts on this \
                     machine) or \"ray\" (each attempt a job on a Ray cluster)"
                ),
            );
            Executor::Local
        }
    }
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
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return build(defaults(), rel, None);
        }
        Err(e) => {
            return Err(vec![Problem::new(
                rel,
                None,
                format!("cannot read the config file: {e}; check its permissions"),
            )])
        }
    };
    // Editors on Windows may save a BOM, which serde_json rejects.
    let body = text.strip_prefix('\u{feff}').unwrap_or(&text);
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
    build(merged, rel, Some(&text))
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

/// A key of the config file ralph does not act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyWarning {
    /// The dotted path, e.g. `paralell.enabled`.
    pub(crate) key: String,
    /// Its line in the file, when it can be found.
    pub(crate) line: Option<usize>,
    pub(crate) kind: KeyWarningKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyWarningKind {
    /// Not a key of ralph or Ralph v2; the nearest known key, if one is close.
    Unknown { did_you_mean: Option<String> },
    /// A Ralph v2 key for a feature ralph does not have.
    RalphV2 { why: &'static str },
}

impl KeyWarning {
    /// One line for the terminal, naming the file and line.
    pub(crate) fn render(&self, file: &str) -> String {
        let at = match self.line {
            Some(l) => format!("{file}:{l}"),
            None => file.to_string(),
        };
        match &self.kind {
            KeyWarningKind::Unknown {
                did_you_mean: Some(k),
            } => format!(
                "warning: {at}: unknown key \"{}\" is ignored; did you mean \"{k}\"?",
                self.key
            ),
            KeyWarningKind::Unknown { did_you_mean: None } => {
                format!("warning: {at}: unknown key \"{}\" is ignored", self.key)
            }
            KeyWarningKind::RalphV2 { why } => format!(
                "warning: {at}: Ralph v2 key \"{}\" is ignored: {why}",
                self.key
            ),
        }
    }
}

impl Config {
    /// The warnings about keys ralph ignores, one line each.
    pub(crate) fn warning_lines(&self) -> Vec<String> {
        self.key_warnings
            .iter()
            .map(|w| w.render(CONFIG_FILE))
            .collect()
    }
}

/// Ralph v2 keys that ralph accepts without a word: Ralph v2 itself never
/// read them, so ignoring them changes nothing.
pub(crate) const RALPH_V2_INERT: &[&str] = &[
    "version",
    "project.name",
    "specs.id_format",
    "commit.auto_commit",
    "parallel.strategy",
    "post_run.max_pipeline_iterations",
];

/// Ralph v2 features ralph does not have, by key prefix, and what to know.
pub(crate) const RALPH_V2_IGNORED: &[(&str, &str)] = &[
    (
        "testing_phase",
        "ralph has no separate test-review pass; put the checks in validation.commands",
    ),
    (
        "caffeine",
        "ralph does not keep a Mac awake; run it under `caffeinate -dims ralph run`",
    ),
    ("mcp", "MCP flags are not added; put them in claude.flags"),
    (
        "post_run",
        "ralph has no post-run chain (E2E, discovery, pipeline)",
    ),
    ("hitl", "ralph has no HITL review page"),
    (
        "parallel.merge_review_timeout",
        "ralph has no conflict-review agent",
    ),
];

/// Collects problems while reading typed values out of the merged JSON.
struct Reader<'a> {
    raw: &'a Value,
    defaults: Value,
    file: &'a Path,
    text: Option<&'a str>,
    problems: Vec<Problem>,
    /// Every dotted path asked for: a test holds `keys::KEYS`, which the
    /// unknown-key check accepts, to exactly these.
    read: std::cell::RefCell<std::collections::BTreeSet<String>>,
}

impl<'a> Reader<'a> {
    /// The value at a dotted path. JSON null falls back to the default, as
    /// the bash tool's `config_get` did, so `"timeout_seconds": null` is harmless.
    fn get(&self, path: &str) -> Option<&Value> {
        self.read.borrow_mut().insert(path.to_string());
        match lookup(self.raw, path) {
            Some(Value::Null) | None => lookup(&self.defaults, path),
            Some(v) => Some(v),
        }
    }

    fn problem(&mut self, path: &str, message: String) {
        let line = self.text.and_then(|t| line_of_key(t, path));
        let mut p = Problem::new(self.file, line, message);
        p.key = Some(path.to_string());
        self.problems.push(p);
    }

    /// An optional non-negative amount (dollars), as a number or numeric string.
    fn amount(&mut self, path: &str) -> Option<f64> {
        let v = self.get(path)?;
        let parsed = match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse::<f64>().ok(),
            _ => None,
        };
        match parsed {
            Some(x) if x.is_finite() && x >= 0.0 => Some(x),
            _ => {
                let shown = v.to_string();
                self.problem(
                    path,
                    format!("{path} must be an amount in USD such as 5.00, got {shown}"),
                );
                None
            }
        }
    }

    /// A non-negative integer, written as a JSON number or a numeric string.
    fn uint(&mut self, path: &str, min: u64, what: &str) -> u64 {
        let fallback = lookup(&self.defaults, path)
            .and_then(Value::as_u64)
            .unwrap_or(min);
        let Some(v) = self.get(path) else {
            return fallback;
        };
        let parsed = match v {
            Value::Number(n) => n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                    .map(|f| f as u64)
            }),
            Value::String(s) if s.trim().is_empty() => Some(fallback),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        };
        match parsed {
            Some(n) if n >= min => n,
            _ => {
                let shown = v.to_string();
                self.problem(path, format!("{path} must be {what}, got {shown}"));
                fallback
            }
        }
    }

    /// `true`/`false`, or the strings `"true"`/`"false"` the bash tool compared.
    fn boolean(&mut self, path: &str) -> bool {
        let fallback = lookup(&self.defaults, path)
            .and_then(Value::as_bool)
            .unwrap_or(false);
        match self.get(path) {
            None => fallback,
            Some(v) => match parse_bool(v) {
                Some(b) => b,
                None => {
                    let shown = v.to_string();
                    self.problem(path, format!("{path} must be true or false, got {shown}"));
                    fallback
                }
            },
        }
    }

    /// A string; an empty string means the default (as in the bash tool).
    fn string(&mut self, path: &str, allow_empty: bool) -> String {
        let fallback = lookup(&self.defaults, path)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match self.get(path) {
            None => fallback,
            Some(Value::String(s)) if s.is_empty() && !allow_empty => fallback,
            Some(Value::String(s)) => s.clone(),
            Some(v) => {
                let shown = v.to_string();
                self.problem(path, format!("{path} must be a string, got {shown}"));
                fallback
            }
        }
    }

    /// An array of strings, or `None` when absent or null.
    fn strings(&mut self, path: &str) -> Option<Vec<String>> {
        let v = self.get(path)?;
        let list = v.as_array().and_then(|items| {
            items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
        });
        if list.is_none() {
            let shown = v.to_string();
            self.problem(
                path,
                format!("{path} must be an array of strings such as [\"a\", \"b\"], got {shown}"),
            );
        }
        list
    }

    /// An object of string values (`sandbox.env.set`), in file order.
    fn string_map(&mut self, path: &str) -> Vec<(String, String)> {
        let Some(v) = self.get(path) else {
            return Vec::new();
        };
        let map = v.as_object().and_then(|o| {
            o.iter()
                .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect::<Option<Vec<_>>>()
        });
        if map.is_none() {
            let shown = v.to_string();
            self.problem(
                path,
                format!(
                    "{path} must be an object of strings such as {{\"NAME\": \"value\"}}, got {shown}"
                ),
            );
        }
        map.unwrap_or_default()
    }

    /// The `sandbox.*` keys.
    fn sandbox(&mut self) -> crate::sandbox::Settings {
        use crate::sandbox::{Mode, Settings};
        let mode_s = self.string("sandbox.mode", false);
        let mode = Mode::parse(&mode_s).unwrap_or_else(|| {
            self.problem(
                "sandbox.mode",
                format!("sandbox.mode must be auto, bwrap or off, got \"{mode_s}\""),
            );
            Mode::Auto
        });
        let names = |r: &mut Self, key: &str| {
            let list = r.strings(key).unwrap_or_default();
            for n in &list {
                let bad = n.is_empty() || n.contains(['=', '\0']);
                if bad {
                    r.problem(
                        key,
                        format!("{key} must hold variable names or PREFIX_* globs, got \"{n}\""),
                    );
                }
            }
            list
        };
        let pass = names(self, "sandbox.env.pass");
        let redact = names(self, "sandbox.redact");
        let set = self.string_map("sandbox.env.set");
        let paths = |r: &mut Self, key: &str| {
            let list = r.strings(key).unwrap_or_default();
            let mut out = Vec::new();
            for p in list {
                let expanded = match p.strip_prefix("~/") {
                    Some(rest) => match std::env::var_os("HOME") {
                        Some(h) => std::path::Path::new(&h).join(rest),
                        None => PathBuf::from(&p),
                    },
                    None => PathBuf::from(&p),
                };
                if !expanded.is_absolute() {
                    r.problem(
                        key,
                        format!("{key} must hold absolute paths (or ~/...), got \"{p}\""),
                    );
                    continue;
                }
                out.push(expanded);
            }
            out
        };
        let allow_read = paths(self, "sandbox.allow_read");
        let allow_write = paths(self, "sandbox.allow_write");
        let network = self.boolean("sandbox.network");
        Settings {
            mode,
            pass,
            set,
            redact,
            allow_read,
            allow_write,
            network,
        }
    }

    fn validation_commands(&mut self) -> Vec<ValidationCommand> {
        const PATH: &str = "validation.commands";
        let Some(v) = self.get(PATH) else {
            return Vec::new();
        };
        let Some(items) = v.as_array() else {
            let shown = v.to_string();
            self.problem(
                PATH,
                format!(
                    "{PATH} must be an array of {{\"name\": ..., \"cmd\": ..., \"required\": ...}} objects, got {shown}"
                ),
            );
            return Vec::new();
        };
        let items = items.clone();
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let at = format!("{PATH}[{i}]");
            let Some(obj) = item.as_object() else {
                self.problem(
                    PATH,
                    format!(
                        "{at} must be an object like {{\"name\": \"tests\", \"cmd\": \"npm test\"}}, got {item}"
                    ),
                );
                continue;
            };
            let cmd = match obj.get("cmd") {
                Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
                other => {
                    let shown = other.map_or_else(|| "nothing".to_string(), Value::to_string);
                    self.problem(
                        PATH,
                        format!("{at}.cmd must be the shell command to run, got {shown}"),
                    );
                    continue;
                }
            };
            let name = match obj.get("name") {
                None | Some(Value::Null) => cmd.clone(),
                Some(Value::String(s)) if s.is_empty() => cmd.clone(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => {
                    self.problem(PATH, format!("{at}.name must be a string, got {other}"));
                    cmd.clone()
                }
            };
            // SPEC 5 runs "required" commands; an entry that says nothing is
            // meant to gate landing, so it defaults to required.
            let required = match obj.get("required") {
                None | Some(Value::Null) => true,
                Some(v) => match parse_bool(v) {
                    Some(b) => b,
                    None => {
                        self.problem(
                            PATH,
                            format!("{at}.required must be true or false, got {v}"),
                        );
                        true
                    }
                },
            };
            out.push(ValidationCommand {
                name,
                cmd,
                required,
            });
        }
        out
    }
}

/// The keys of `raw` that are not `known` (ralph's), in file order where
/// known. Arrays and scalars are leaves; an object is known when ralph
/// reads it whole or any key under it is known.
fn key_warnings(
    raw: &Value,
    known: &std::collections::BTreeSet<String>,
    text: Option<&str>,
) -> Vec<KeyWarning> {
    fn walk(v: &Value, path: &str, leaves: &mut Vec<String>) {
        match v.as_object() {
            Some(obj) if !obj.is_empty() => {
                for (k, child) in obj {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(child, &p, leaves);
                }
            }
            _ if !path.is_empty() => leaves.push(path.to_string()),
            _ => {}
        }
    }
    let under = |key: &str, prefix: &str| {
        key == prefix || key.strip_prefix(prefix).is_some_and(|r| r.starts_with('.'))
    };
    let mut leaves = Vec::new();
    walk(raw, "", &mut leaves);
    let mut out: Vec<KeyWarning> = Vec::new();
    for key in leaves {
        if known.iter().any(|r| under(&key, r)) || RALPH_V2_INERT.iter().any(|k| under(&key, k)) {
            continue;
        }
        let kind = match RALPH_V2_IGNORED.iter().find(|(p, _)| under(&key, p)) {
            Some((prefix, why)) => {
                // One warning per ignored feature, not per sub-key.
                if out.iter().any(|w| under(&w.key, prefix)) {
                    continue;
                }
                KeyWarningKind::RalphV2 { why }
            }
            None => KeyWarningKind::Unknown {
                did_you_mean: nearest_key(&key, known),
            },
        };
        let key = match kind {
            KeyWarningKind::RalphV2 { .. } => RALPH_V2_IGNORED
                .iter()
                .find(|(p, _)| under(&key, p))
                .map_or(key.clone(), |(p, _)| p.to_string()),
            _ => key,
        };
        let line = text.and_then(|t| line_of_key(t, &key));
        out.push(KeyWarning { key, line, kind });
    }
    out.sort_by_key(|w| w.line.unwrap_or(usize::MAX));
    out
}

/// The unknown-key warnings of the config file alone, one line each: for
/// `validate` when the config (or the backlog) has errors, so the warnings
/// come with them instead of after they are fixed. Empty when the file is
/// missing or not a JSON object (that is an error of its own).
pub(crate) fn key_warning_lines(root: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(root.join(CONFIG_FILE)) else {
        return Vec::new();
    };
    let body = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let Ok(user @ Value::Object(_)) = serde_json::from_str::<Value>(body) else {
        return Vec::new();
    };
    let known = keys::KEYS.iter().map(|k| k.key.to_string()).collect();
    key_warnings(&user, &known, Some(&text))
        .iter()
        .map(|w| w.render(CONFIG_FILE))
        .collect()
}

/// The known key a misspelled one most likely meant: compared segment by
/// segment, so `paralell.enabled` finds `parallel.enabled`. A key of one
/// segment (`"paralell": true`) is compared with the sections, so it finds
/// `parallel`: every known key stands for its sections too.
fn nearest_key(key: &str, known: &std::collections::BTreeSet<String>) -> Option<String> {
    let sections = known.iter().flat_map(|k| {
        k.match_indices('.')
            .map(|(i, _)| k[..i].to_string())
            .collect::<Vec<_>>()
    });
    let candidates: std::collections::BTreeSet<String> =
        known.iter().cloned().chain(sections).collect();
    candidates
        .iter()
        .filter(|k| k.split('.').count() == key.split('.').count())
        .map(|k| {
            let d: usize = k
                .split('.')
                .zip(key.split('.'))
                .map(|(a, b)| edit_distance(a, b))
                .sum();
            (d, k)
        })
        .filter(|(d, k)| *d > 0 && *d <= 2.max(k.len() / 5))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.clone())
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn parse_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

fn lookup<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.')
        .try_fold(v, |cur, key| cur.as_object()?.get(key))
}

/// Best-effort line of a dotted key in the user's text: each segment is looked
/// up after the previous one, so `loop.timeout_seconds` does not land on
/// `testing_phase.timeout_seconds`.
fn line_of_key(text: &str, path: &str) -> Option<usize> {
    let mut pos = 0;
    for seg in path.split('.') {
        let seg = seg.split('[').next().unwrap_or(seg);
        let needle = format!("\"{seg}\"");
        pos += text.get(pos..)?.find(&needle)?;
    }
    Some(text[..pos].matches('\n').count() + 1)
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
    let specs_pattern = r.string("specs.pattern", false);
    if !specs_pattern.contains("{{epic}}") || !specs_pattern.contains("{{id}}") {
        r.problem(
            "specs.pattern",
            format!(
                "specs.pattern must contain both {{{{epic}}}} and {{{{id}}}} (default: specs/epic-{{{{epic}}}}/story-{{{{id}}}}-*.md), got {specs_pattern:?}"
            ),
        );
    }
    let status_field = r.string("specs.frontmatter_status_field", false);
    if !status_field
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        r.problem(
            "specs.frontmatter_status_field",
            format!(
                "specs.frontmatter_status_field must be a plain YAML key such as \"status\", got {status_field:?}"
            ),
        );
    }

    let max_iterations = r.uint(
        "loop.max_iterations",
        0,
        "a whole number of iterations (0 means no limit)",
    );
    let timeout_secs = r.uint("loop.timeout_seconds", 1, "a positive number of seconds");
    let max_retries = r.uint(
        "loop.max_retries",
        1,
        "a whole number of attempts, at least 1",
    );
    let max_retries = u32::try_from(max_retries).unwrap_or_else(|_| {
        r.problem(
            "loop.max_retries",
            format!("loop.max_retries is too large: {max_retries}"),
        );
        3
    });
    let grace_secs = r.uint("loop.grace_seconds", 0, "a whole number of seconds");
    let allow_empty_done = r.boolean("loop.allow_empty_done");

    let validation = r.validation_commands();
    let blocked_commands = r.strings("validation.blocked_commands").unwrap_or_default();

    let agent_command = r.string("claude.command", false);
    let agent_flags = r.strings("claude.flags");
    let name = r.string("agent.name", false);
    let agent_name = crate::agent::Backend::parse(&name).unwrap_or_else(|| {
        r.problem(
            "agent.name",
            format!(
                "agent.name {name:?} is not an agent ralph knows; one of: {}",
                crate::agent::Backend::names()
            ),
        );
        crate::agent::Backend::Claude
    });
    let agent_override_command = r
        .get("agent.command")
        .is_some()
        .then(|| r.string("agent.command", false))
        .filter(|c| !c.is_empty());
    let agent_override_flags = r.strings("agent.flags");
    let mut agent_fallback = Vec::new();
    for name in r.strings("agent.fallback").unwrap_or_default() {
        match crate::agent::Backend::parse(&name) {
            Some(b) if !agent_fallback.contains(&b) => agent_fallback.push(b),
            Some(_) => {}
            None => r.problem(
                "agent.fallback",
                format!(
                    "agent.fallback names {name:?}, not an agent ralph knows; one of: {}",
                    crate::agent::Backend::names()
                ),
            ),
        }
    }
    let max_wait_hours = r.uint("limits.max_wait_hours", 0, "a whole number of hours");
    let stagger_secs = r.uint("parallel.stagger_seconds", 0, "a whole number of seconds");
    let budget_run_usd = r.amount("budget.max_cost_usd");
    let budget_total_usd = r.amount("budget.max_cost_usd_total");
    let budget_tokens = r.get("budget.max_tokens").is_some().then(|| {
        r.uint(
            "budget.max_tokens",
            1,
            "a whole number of tokens, at least 1",
        )
    });
    let idle_timeout_secs = r.uint(
        "loop.idle_timeout_seconds",
        0,
        "a whole number of seconds (0 turns the watchdog off)",
    );

    let commit_format = r.string("commit.format", false);
    let stage_paths = r.strings("commit.stage_paths").unwrap_or_default();

    let learnings_enabled = r.boolean("learnings.enabled");
    let learnings_max = r.uint(
        "learnings.max_inject_count",
        0,
        "a whole number of learnings",
    ) as usize;
    let parallel_enabled = r.boolean("parallel.enabled");
    let resume_session = r.boolean("retry.resume_session");
    let mode = r.string("landing.mode", false);
    let remote = r.string("landing.remote", false);
    let (review, pr_remote) = match mode.as_str() {
        "merge" => (false, None),
        "review" => (true, None),
        "pr" => (false, Some(remote)),
        other => {
            r.problem(
                "landing.mode",
                format!(
                    "landing.mode {other:?} is not one ralph has: \"merge\" (land what passes \
                     validation), \"review\" (keep it for `ralph land`) or \"pr\" (push it and \
                     open a pull request)"
                ),
            );
            (false, None)
        }
    };
    let review = review || (pr_remote.is_none() && !r.boolean("parallel.auto_merge"));
    let decompose_enabled = r.boolean("decomposition.enabled");
    let decompose_max_depth =
        r.uint("decomposition.max_depth", 0, "a whole number of levels") as usize;
    let decompose_timeout_secs = r.uint(
        "decomposition.timeout_seconds",
        1,
        "a positive number of seconds",
    );
    let postmortem_enabled = r.boolean("postmortem.enabled");
    let postmortem_window_secs = r.uint(
        "postmortem.window_seconds",
        1,
        "a positive number of seconds",
    );
    let postmortem_max_chars = r.uint(
        "postmortem.max_output_chars",
        1,
        "a positive number of characters",
    ) as usize;
    let max_concurrent = r.get("parallel.max_concurrent").is_some().then(|| {
        r.uint(
            "parallel.max_concurrent",
            1,
            "a whole number of workers, at least 1",
        ) as usize
    });
    let retry_concurrency = r.uint(
        "parallel.retry_concurrency",
        1,
        "a whole number of attempts, at least 1",
    ) as usize;
    let agent_memory_mb = r.uint(
        "parallel.agent_memory_mb",
        0,
        "a whole number of megabytes (0 turns the memory check off)",
    );

    let hooks = Hooks {
        pre_iteration: r.string("hooks.pre_iteration", true),
        pre_story: r.string("hooks.pre_story", true),
        post_story: r.string("hooks.post_story", true),
        post_iteration: r.string("hooks.post_iteration", true),
        pre_worktree: r.string("hooks.pre_worktree", true),
        pre_worktree_timeout: r.uint(
            "hooks.pre_worktree_timeout",
            1,
            "a positive number of seconds",
        ),
        on_complete: r.string("hooks.on_complete", true),
        on_failure: r.string("hooks.on_failure", true),
        on_pause: r.string("hooks.on_pause", true),
    };
    let runs_max_bytes = match r.get("runs.max_mb").map(|v| {
        let mb = match v {
            Value::String(s) => s.trim().parse::<f64>().ok(),
            v => v.as_f64(),
        };
        (v.clone(), mb)
    }) {
        Some((_, Some(mb))) if mb.is_finite() && mb > 0.0 => (mb * 1024.0 * 1024.0) as u64,
        Some((v, _)) => {
            r.problem(
                "runs.max_mb",
                format!("runs.max_mb must be a positive number of megabytes, got {v}"),
            );
            0
        }
        None => 100 * 1024 * 1024,
    };
    let sandbox = r.sandbox();

    let executor = executor(&mut r);

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
        specs_pattern,
        status_field,
        max_iterations,
        timeout_secs,
        max_retries,
        validation,
        blocked_commands,
        agent: crate::agent::Settings {
            name: agent_name,
            command: agent_override_command,
            flags: agent_override_flags,
            fallback: agent_fallback,
            claude_command: agent_command,
            claude_flags: agent_flags,
        },
        idle_timeout_secs,
        max_wait_hours,
        stagger_secs,
        budget_run_usd,
        budget_total_usd,
        budget_tokens,
        commit_format,
        stage_paths,
        learnings_enabled,
        learnings_max,
        parallel_enabled,
        max_concurrent,
        retry_concurrency,
        agent_memory_mb,
        hooks,
        grace_secs,
        allow_empty_done,
        resume_session,
        review,
        pr_remote,
        executor,
        decompose_enabled,
        decompose_max_depth,
        decompose_timeout_secs,
        postmortem_enabled,
        postmortem_window_secs,
        postmortem_max_chars,
        sandbox,
        runs_max_bytes,
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
        assert_eq!(c.specs_pattern, "specs/epic-{{epic}}/story-{{id}}-*.md");
        assert_eq!(c.status_field, "status");
        assert_eq!(c.max_iterations, 0);
        assert_eq!(c.timeout_secs, 1800);
        assert_eq!(c.max_retries, 3);
        assert!(c.validation.is_empty());
        assert!(c.blocked_commands.is_empty());
        assert_eq!(c.agent.claude_command, "claude");
        assert_eq!(c.agent.claude_flags, None);
        assert_eq!(c.commit_format, "feat(story-{{id}}): {{title}}");
        assert!(c.stage_paths.is_empty());
        assert!(c.learnings_enabled);
        assert_eq!(c.learnings_max, 5);
        assert!(!c.parallel_enabled);
        assert!(c.resume_session);
        assert!(
            !cfg(json!({"retry": {"resume_session": "false"}}))
                .unwrap()
                .resume_session
        );
        assert_eq!(c.max_concurrent, None);
        assert_eq!(
            c.hooks,
            Hooks {
                pre_worktree_timeout: 120,
                ..Hooks::default()
            }
        );
        assert_eq!(c.grace_secs, 10);
        assert!(!c.allow_empty_done);
        assert_eq!(c.retry_concurrency, 1);
        assert_eq!(c.agent_memory_mb, 2048);
    }

    #[test]
    fn scheduling_keys() {
        let c = cfg(json!({"parallel": {"retry_concurrency": "2", "agent_memory_mb": 0}})).unwrap();
        assert_eq!((c.retry_concurrency, c.agent_memory_mb), (2, 0));
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
        assert!(!c.learnings_enabled);
        assert_eq!(c.learnings_max, 2);
        assert!(c.parallel_enabled);
        assert_eq!(c.max_concurrent, Some(3));
        assert_eq!(c.timeout_secs, 60);
        assert_eq!(c.max_retries, 2);
        assert_eq!(c.max_iterations, 0);
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

    #[test]
    fn unknown_keys_are_named_with_a_guess_and_their_line() {
        let text = "{\n  \"paralell\": {\"enabled\": true},\n  \"loop\": {\"max_retrys\": 2, \"zzz\": 1}\n}\n";
        let mut merged = defaults();
        deep_merge(&mut merged, serde_json::from_str(text).unwrap());
        let c = build(merged, Path::new(CONFIG_FILE), Some(text)).unwrap();
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
        let mut merged = defaults();
        deep_merge(&mut merged, serde_json::from_str(text).unwrap());
        let c = build(merged, Path::new(CONFIG_FILE), Some(text)).unwrap();
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
            {"name": "fmt", "cmd": "cargo fmt --check", "required": "true"}
        ]}}))
        .unwrap();
        assert_eq!(
            c.validation,
            vec![
                ValidationCommand {
                    name: "cargo test".into(),
                    cmd: "cargo test".into(),
                    required: true
                },
                ValidationCommand {
                    name: "lint".into(),
                    cmd: "cargo clippy".into(),
                    required: false
                },
                ValidationCommand {
                    name: "fmt".into(),
                    cmd: "cargo fmt --check".into(),
                    required: true
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
        assert_eq!(c.timeout_secs, 1800);
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
        let Some(base) = crate::shared_fixtures::shared("compat/ralphetamine") else {
            return;
        };
        for run in ["run-full", "run-parallel", "run-sequential"] {
            let c = load(&base.join("sandbox").join(run)).unwrap();
            assert_eq!(c.max_retries, 2, "{run}");
            assert_eq!(c.validation.len(), 1, "{run}");
            assert!(!c.validation[0].required, "{run}");
            assert_eq!(
                c.agent.claude_flags,
                Some(vec![
                    "--print".into(),
                    "--dangerously-skip-permissions".into()
                ])
            );
        }
        for f in [
            "tests/fixtures/config.json",
            "tests/fixtures/config-minimal.json",
            "tests/fixtures/pipeline/config.json",
        ] {
            let text = std::fs::read_to_string(base.join(f)).unwrap();
            let mut merged = defaults();
            deep_merge(&mut merged, serde_json::from_str(&text).unwrap());
            let c = from_value(merged, Path::new(f)).unwrap();
            assert!(c.timeout_secs > 0, "{f}");
        }
        let full = load(&base.join("sandbox/run-full")).unwrap();
        assert_eq!(
            full.hooks.pre_story,
            "echo \"Starting $RALPH_STORY\" >> hooks.log"
        );
        assert_eq!(full.max_concurrent, Some(2));
        assert_eq!(full.learnings_max, 3);
    }
}
