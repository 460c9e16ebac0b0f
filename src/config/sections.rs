//! The sections of `.ralph/config.json` ralph reads, one plain struct per
//! JSON section (`loop` is `Loop`, read by `read_loop`), each read by its
//! own function from the `Reader` so a section's checks sit by its fields.

use std::path::PathBuf;

use serde_json::Value;

use super::reader::{parse_bool, Reader};

/// `specs.*`: where stories' spec files are and which frontmatter key
/// holds their status.
#[derive(Debug, Clone)]
pub(crate) struct Specs {
    pub(crate) pattern: String,
    pub(crate) status_field: String,
}

pub(super) fn specs(r: &mut Reader) -> Specs {
    let pattern = r.string("specs.pattern", false);
    if !pattern.contains("{{epic}}") || !pattern.contains("{{id}}") {
        r.problem(
            "specs.pattern",
            format!(
                "specs.pattern must contain both {{{{epic}}}} and {{{{id}}}} (default: specs/epic-{{{{epic}}}}/story-{{{{id}}}}-*.md), got {pattern:?}"
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
    Specs {
        pattern,
        status_field,
    }
}

/// `loop.*`: how long and how often one story is tried.
#[derive(Debug, Clone)]
pub(crate) struct Loop {
    pub(crate) max_iterations: u64,
    pub(crate) timeout_secs: u64,
    pub(crate) max_retries: u32,
    /// `loop.idle_timeout_seconds` (default 600; 0 = none): an attempt that
    /// prints nothing for this long is stopped like a timeout.
    pub(crate) idle_timeout_secs: u64,
    /// `loop.grace_seconds` (default 10): SIGTERM → SIGKILL grace period.
    pub(crate) grace_secs: u64,
    /// `loop.allow_empty_done` (default false): a DONE that changed nothing
    /// lands (as the status edit alone) instead of failing the attempt. A
    /// spec's frontmatter `allow_empty_done: true` allows it for one story.
    pub(crate) allow_empty_done: bool,
}

pub(super) fn read_loop(r: &mut Reader) -> Loop {
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
    let idle_timeout_secs = r.uint(
        "loop.idle_timeout_seconds",
        0,
        "a whole number of seconds (0 turns the watchdog off)",
    );
    Loop {
        max_iterations,
        timeout_secs,
        max_retries,
        idle_timeout_secs,
        grace_secs,
        allow_empty_done,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ValidationCommand {
    pub(crate) name: String,
    pub(crate) cmd: String,
    pub(crate) required: bool,
    /// `exclusive: true`: never runs twice at once on this machine (a
    /// fixed port, one database), whatever the merge queue validates.
    pub(crate) exclusive: bool,
}

/// `validation.*`: the commands that gate landing, and the ones agents
/// must not run.
#[derive(Debug, Clone)]
pub(crate) struct Validation {
    pub(crate) commands: Vec<ValidationCommand>,
    pub(crate) blocked_commands: Vec<String>,
    /// `validation.where`.
    pub(crate) where_: super::ValidationWhere,
}

pub(super) fn validation(r: &mut Reader) -> Validation {
    let commands = validation_commands(r);
    let blocked_commands = r.strings("validation.blocked_commands").unwrap_or_default();
    let where_ = match r.string("validation.where", false).as_str() {
        "coordinator" => super::ValidationWhere::Coordinator,
        "executor" => super::ValidationWhere::Executor,
        other => {
            r.problem(
                "validation.where",
                format!(
                    "validation.where {other:?} is not one ralph has: \"coordinator\" (each \
                     candidate validated in a worktree here) or \"executor\" (as a job on the \
                     run's executor: a Ray job next to the attempts)"
                ),
            );
            super::ValidationWhere::Coordinator
        }
    };
    Validation {
        commands,
        blocked_commands,
        where_,
    }
}

/// `agent.*` and `claude.command`/`claude.flags`: what `agent/` needs, as
/// its own plain type.
pub(super) fn agent(r: &mut Reader) -> crate::agent::Settings {
    let claude_command = r.string("claude.command", false);
    let claude_flags = r.strings("claude.flags");
    let name = r.string("agent.name", false);
    let backend = crate::agent::Backend::parse(&name).unwrap_or_else(|| {
        r.problem(
            "agent.name",
            format!(
                "agent.name {name:?} is not an agent ralph knows; one of: {}",
                crate::agent::Backend::names()
            ),
        );
        crate::agent::Backend::Claude
    });
    let command = r
        .get("agent.command")
        .is_some()
        .then(|| r.string("agent.command", false))
        .filter(|c| !c.is_empty());
    let flags = r.strings("agent.flags");
    let mut fallback = Vec::new();
    for name in r.strings("agent.fallback").unwrap_or_default() {
        match crate::agent::Backend::parse(&name) {
            Some(b) if !fallback.contains(&b) => fallback.push(b),
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
    let model = r
        .get("agent.model")
        .is_some()
        .then(|| r.string("agent.model", false))
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty());
    if model.is_some() && backend.model_flag().is_none() {
        r.problem(
            "agent.model",
            format!(
                "agent.model is set, but the {} agent has no choice of model on its command \
                 line; remove agent.model or choose another agent.name",
                backend.name()
            ),
        );
    }
    let escalation = escalation(r, backend);
    crate::agent::Settings {
        name: backend,
        command,
        flags,
        fallback,
        claude_command,
        claude_flags,
        model,
        escalation,
    }
}

/// `agent.escalation`: model names (run by `agent.name`'s backend) or
/// `{"agent": "codex", "model": "gpt-5"}` rungs, cheapest first. A rung
/// whose backend has no model flag is refused, naming the key.
fn escalation(r: &mut Reader, default: crate::agent::Backend) -> Vec<crate::agent::Rung> {
    use crate::agent::{Backend, Rung};
    const KEY: &str = "agent.escalation";
    let Some(v) = r.get(KEY).cloned() else {
        return Vec::new();
    };
    let Some(items) = v.as_array() else {
        r.problem(
            KEY,
            format!(
                "{KEY} must be an array of model names or {{\"agent\", \"model\"}} objects, \
                 cheapest first, such as [\"haiku\", \"sonnet\", \"opus\"]; got {v}"
            ),
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in items {
        let rung = match item {
            serde_json::Value::String(m) if !m.trim().is_empty() => Some(Rung {
                agent: None,
                model: m.trim().to_string(),
            }),
            serde_json::Value::Object(o) => {
                let agent = o.get("agent").and_then(|a| a.as_str());
                let model = o.get("model").and_then(|m| m.as_str()).map(str::trim);
                match (agent.map(Backend::parse), model) {
                    (Some(None), _) => {
                        r.problem(
                            KEY,
                            format!(
                                "{KEY} names the agent {:?}, not one ralph knows; one of: {}",
                                agent.unwrap_or_default(),
                                Backend::names()
                            ),
                        );
                        continue;
                    }
                    (a, Some(m)) if !m.is_empty() => Some(Rung {
                        agent: a.flatten(),
                        model: m.to_string(),
                    }),
                    _ => None,
                }
            }
            _ => None,
        };
        let Some(rung) = rung else {
            r.problem(
                KEY,
                format!("{KEY} entry {item} is neither a model name nor {{\"agent\", \"model\"}}"),
            );
            continue;
        };
        let backend = rung.agent.unwrap_or(default);
        if backend.model_flag().is_none() {
            r.problem(
                KEY,
                format!(
                    "{KEY} runs {:?} on the {} agent, which has no choice of model on its \
                     command line; name another agent for that rung",
                    rung.model,
                    backend.name()
                ),
            );
            continue;
        }
        out.push(rung);
    }
    out
}

/// `pricing`: USD per million tokens of models ralph does not know, or
/// other prices for those it does: `{"model": {"input": 3, "output": 15,
/// "cache_read": 0.3, "cache_write": 3.75}}` (the cache prices default to
/// the input price).
pub(super) fn pricing(r: &mut Reader) -> crate::pricing::Table {
    const KEY: &str = "pricing";
    let Some(v) = r.get(KEY).cloned() else {
        return crate::pricing::Table::default();
    };
    let Some(map) = v.as_object() else {
        r.problem(
            KEY,
            format!(
                "{KEY} must be an object of models, such as {{\"my-model\": {{\"input\": 3, \
                 \"output\": 15}}}} (USD per million tokens); got {v}"
            ),
        );
        return crate::pricing::Table::default();
    };
    let mut own = Vec::new();
    for (model, price) in map {
        let num = |k: &str| {
            price
                .get(k)
                .and_then(|x| x.as_f64())
                .filter(|x| x.is_finite() && *x >= 0.0)
        };
        let has = |k: &str| price.get(k).is_some_and(|x| !x.is_null());
        let bad = ["input", "output", "cache_read", "cache_write"]
            .into_iter()
            .find(|k| has(k) && num(k).is_none());
        match (price.is_object(), num("input"), num("output"), bad) {
            (true, Some(input), Some(output), None) => own.push((
                model.clone(),
                crate::pricing::Price {
                    input,
                    output,
                    cache_read: num("cache_read").unwrap_or(input),
                    cache_write: num("cache_write").unwrap_or(input),
                },
            )),
            _ => r.problem(
                KEY,
                format!(
                    "{KEY}.{model} must be {{\"input\": N, \"output\": N}} with optional \
                     \"cache_read\" and \"cache_write\", each USD per million tokens; got {price}"
                ),
            ),
        }
    }
    crate::pricing::Table { own }
}

/// `limits.*`: usage limits of the agent's provider.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// `limits.max_wait_hours` (default 6): a usage limit that resets later
    /// than this is not waited for.
    pub(crate) max_wait_hours: u64,
}

pub(super) fn limits(r: &mut Reader) -> Limits {
    Limits {
        max_wait_hours: r.uint("limits.max_wait_hours", 0, "a whole number of hours"),
    }
}

/// `budget.*`: what runs may spend.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    /// `budget.max_cost_usd`: the most one run may spend.
    pub(crate) run_usd: Option<f64>,
    /// `budget.max_cost_usd_total`: the most all runs together may spend.
    pub(crate) total_usd: Option<f64>,
    /// `budget.max_tokens`: the most tokens one run may use (for agents
    /// that report tokens but no cost).
    pub(crate) tokens: Option<u64>,
    /// `budget.max_cost_per_story_usd`: the most one story may cost over
    /// all its attempts; past it, it fails (or is split) as after its last retry.
    pub(crate) story_usd: Option<f64>,
}

pub(super) fn budget(r: &mut Reader) -> Budget {
    let run_usd = r.amount("budget.max_cost_usd");
    let total_usd = r.amount("budget.max_cost_usd_total");
    let tokens = r.get("budget.max_tokens").is_some().then(|| {
        r.uint(
            "budget.max_tokens",
            1,
            "a whole number of tokens, at least 1",
        )
    });
    let story_usd = r.amount("budget.max_cost_per_story_usd");
    Budget {
        run_usd,
        total_usd,
        tokens,
        story_usd,
    }
}

/// `commit.*`: how landed work is committed.
#[derive(Debug, Clone)]
pub(crate) struct Commit {
    pub(crate) format: String,
    pub(crate) stage_paths: Vec<String>,
}

pub(super) fn commit(r: &mut Reader) -> Commit {
    Commit {
        format: r.string("commit.format", false),
        stage_paths: r.strings("commit.stage_paths").unwrap_or_default(),
    }
}

/// `learnings.*`: lessons carried from one attempt to the next.
#[derive(Debug, Clone)]
pub(crate) struct Learnings {
    pub(crate) enabled: bool,
    /// `learnings.max_inject_count`: how many go into one prompt.
    pub(crate) max: usize,
}

pub(super) fn learnings(r: &mut Reader) -> Learnings {
    let enabled = r.boolean("learnings.enabled");
    let max = r.uint(
        "learnings.max_inject_count",
        0,
        "a whole number of learnings",
    ) as usize;
    Learnings { enabled, max }
}

/// `parallel.*` (but `auto_merge`, which `landing` reads): how many agents
/// work at once.
#[derive(Debug, Clone)]
pub(crate) struct Parallel {
    pub(crate) enabled: bool,
    /// `parallel.max_concurrent` when the user set it; `-j` falls back to 4
    /// otherwise (SPEC 2).
    pub(crate) max_concurrent: Option<usize>,
    /// `parallel.retry_concurrency` (default 1): the most retries (attempts
    /// after a failure or a conflict) running at once.
    pub(crate) retry_concurrency: usize,
    /// `parallel.agent_memory_mb` (default 2048; 0 = no check): the memory
    /// one agent needs; an agent that would not fit does not start.
    pub(crate) agent_memory_mb: u64,
    /// `parallel.stagger_seconds` (Ralph v2's key; default 0): the least
    /// time between two agent starts.
    pub(crate) stagger_secs: u64,
    /// `parallel.predict_files` (default true): keep a story whose predicted
    /// files clash with running work from starting beside it while other
    /// work is ready.
    pub(crate) predict_files: bool,
    /// `parallel.conflicts` (default `wait`): may a story whose declared
    /// files clash with in-flight work start beside it when nothing else
    /// can use the slot?
    pub(crate) conflicts: super::Conflicts,
}

pub(super) fn parallel(r: &mut Reader) -> Parallel {
    let stagger_secs = r.uint("parallel.stagger_seconds", 0, "a whole number of seconds");
    let enabled = r.boolean("parallel.enabled");
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
    let predict_files = r.boolean("parallel.predict_files");
    let conflicts = match r.string("parallel.conflicts", false).as_str() {
        "wait" => super::Conflicts::Wait,
        "risk" => super::Conflicts::Risk,
        other => {
            r.problem(
                "parallel.conflicts",
                format!(
                    "parallel.conflicts {other:?} is not one ralph has: \"wait\" (a story \
                     whose declared files in-flight work declares or touches waits for it, even \
                     with a slot free) or \"risk\" (it starts beside it once nothing else is \
                     ready)"
                ),
            );
            super::Conflicts::Wait
        }
    };
    Parallel {
        enabled,
        max_concurrent,
        retry_concurrency,
        agent_memory_mb,
        stagger_secs,
        predict_files,
        conflicts,
    }
}

/// `retry.*`: how a failed attempt is tried again.
#[derive(Debug, Clone)]
pub(crate) struct Retry {
    /// `retry.resume_session` (default true): a fix-up continues the agent's
    /// session where its CLI can resume one.
    pub(crate) resume_session: bool,
}

pub(super) fn retry(r: &mut Reader) -> Retry {
    Retry {
        resume_session: r.boolean("retry.resume_session"),
    }
}

/// `decomposition.*`: a story that fails for good is split into
/// sub-stories by one agent run.
#[derive(Debug, Clone)]
pub(crate) struct Decomposition {
    /// `decomposition.enabled` (default true).
    pub(crate) enabled: bool,
    /// `decomposition.max_depth` (default 2): how many times a story's
    /// line may be split.
    pub(crate) max_depth: usize,
    /// `decomposition.timeout_seconds` (default 600).
    pub(crate) timeout_secs: u64,
}

pub(super) fn decomposition(r: &mut Reader) -> Decomposition {
    let enabled = r.boolean("decomposition.enabled");
    let max_depth = r.uint("decomposition.max_depth", 0, "a whole number of levels") as usize;
    let timeout_secs = r.uint(
        "decomposition.timeout_seconds",
        1,
        "a positive number of seconds",
    );
    Decomposition {
        enabled,
        max_depth,
        timeout_secs,
    }
}

/// `postmortem.*`: after a timeout, a short run asks why and stores its
/// lessons as learnings.
#[derive(Debug, Clone)]
pub(crate) struct Postmortem {
    /// `postmortem.enabled` (default true).
    pub(crate) enabled: bool,
    /// `postmortem.window_seconds` (default 300): the postmortem's timeout.
    pub(crate) window_secs: u64,
    /// `postmortem.max_output_chars` (default 50000): how much of the end
    /// of the timed-out attempt's output it reads.
    pub(crate) max_chars: usize,
}

pub(super) fn postmortem(r: &mut Reader) -> Postmortem {
    let enabled = r.boolean("postmortem.enabled");
    let window_secs = r.uint(
        "postmortem.window_seconds",
        1,
        "a positive number of seconds",
    );
    let max_chars = r.uint(
        "postmortem.max_output_chars",
        1,
        "a positive number of characters",
    ) as usize;
    Postmortem {
        enabled,
        window_secs,
        max_chars,
    }
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

pub(super) fn hooks(r: &mut Reader) -> Hooks {
    Hooks {
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
    }
}

/// `runs.*`: the records of past runs.
#[derive(Debug, Clone)]
pub(crate) struct Runs {
    /// `runs.max_mb` (default 100): the most `.ralph/runs/` holds; the
    /// oldest runs' records go first.
    pub(crate) max_bytes: u64,
}

pub(super) fn runs(r: &mut Reader) -> Runs {
    let max_bytes = match r.get("runs.max_mb").map(|v| {
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
    Runs { max_bytes }
}

/// `serve.*`: the live web view.
#[derive(Debug, Clone, Default)]
pub(crate) struct Serve {
    /// `serve.addr`: where every run serves its page (none: only with
    /// `--serve`); also what `--serve` and `ralph serve` use without ADDR.
    pub(crate) addr: Option<std::net::SocketAddr>,
}

pub(super) fn serve(r: &mut Reader) -> Serve {
    let text = r.string("serve.addr", true);
    let text = text.trim();
    if text.is_empty() {
        return Serve::default();
    }
    match text.parse() {
        Ok(addr) => Serve { addr: Some(addr) },
        Err(_) => {
            r.problem(
                "serve.addr",
                format!(
                    "serve.addr must be an IP address and port such as \"127.0.0.1:8080\" \
                     (port 0: a free one), got {text:?}"
                ),
            );
            Serve::default()
        }
    }
}

/// `sandbox.*`: the environment allowlist, redaction and confinement.
pub(super) fn sandbox(r: &mut Reader) -> crate::sandbox::Settings {
    use crate::sandbox::{Mode, Settings};
    let mode_s = r.string("sandbox.mode", false);
    let mode = Mode::parse(&mode_s).unwrap_or_else(|| {
        r.problem(
            "sandbox.mode",
            format!("sandbox.mode must be auto, bwrap or off, got \"{mode_s}\""),
        );
        Mode::Auto
    });
    let names = |r: &mut Reader<'_>, key: &str| {
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
    let pass = names(r, "sandbox.env.pass");
    let redact = names(r, "sandbox.redact");
    let set = r.string_map("sandbox.env.set");
    let paths = |r: &mut Reader<'_>, key: &str| {
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
    let allow_read = paths(r, "sandbox.allow_read");
    let allow_write = paths(r, "sandbox.allow_write");
    let network = r.boolean("sandbox.network");
    let limits = crate::sandbox::Limits {
        pids: r.uint(
            "sandbox.limits.pids",
            0,
            "a number of processes (0: no limit)",
        ),
        memory_mb: r.uint("sandbox.limits.memory_mb", 0, "a size in MiB (0: no limit)"),
    };
    Settings {
        mode,
        pass,
        set,
        redact,
        allow_read,
        allow_write,
        network,
        limits,
    }
}

fn validation_commands(r: &mut Reader) -> Vec<ValidationCommand> {
    const PATH: &str = "validation.commands";
    let Some(v) = r.get(PATH) else {
        return Vec::new();
    };
    let Some(items) = v.as_array() else {
        let shown = v.to_string();
        r.problem(
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
            r.problem(
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
                r.problem(
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
                r.problem(PATH, format!("{at}.name must be a string, got {other}"));
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
                    r.problem(
                        PATH,
                        format!("{at}.required must be true or false, got {v}"),
                    );
                    true
                }
            },
        };
        let exclusive = match obj.get("exclusive") {
            None | Some(Value::Null) => false,
            Some(v) => parse_bool(v).unwrap_or_else(|| {
                r.problem(
                    PATH,
                    format!("{at}.exclusive must be true or false, got {v}"),
                );
                false
            }),
        };
        out.push(ValidationCommand {
            name,
            cmd,
            required,
            exclusive,
        });
    }
    out
}
