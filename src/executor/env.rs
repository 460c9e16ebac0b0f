//! What an attempt runs with, whichever executor runs it: the project's
//! places, the config, the agents and how they are sealed
//! (`AttemptEnv`); and what attempts and the run's landings share: the
//! hooks, the templates, the worktree lock, git work off the runtime.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::backlog::{self, Story};
use crate::config::{Config, ValidationCommand};
use crate::gitops::Git;
use crate::learnings;
use crate::process;
use crate::prompt::{self, PromptInput};
use crate::store::TechLog;

use super::seal::RunSeal;

#[derive(Debug)]
pub(crate) struct AttemptEnv {
    pub(crate) root: PathBuf,
    pub(crate) config: Config,
    pub(crate) git: Git,
    pub(crate) target: String,
    /// Wall-clock limit of one agent attempt (and of a validation command).
    pub(crate) timeout: Duration,
    /// The project tag every attempt token starts with.
    pub(crate) tag: String,
    pub(crate) required_validation: Vec<ValidationCommand>,
    pub(crate) log: TechLog,
    /// Every backend this run may use: its executable (resolved once at
    /// start) and arguments.
    pub(crate) agents: HashMap<crate::agent::Backend, (String, Vec<String>)>,
    /// How children are sealed: environment, redaction, bubblewrap.
    pub(crate) seal: RunSeal,
}

impl AttemptEnv {
    /// The one constructor, for a run and for a worker's attempt on a
    /// node: `root` is the project's canonical root (its tag is made from
    /// it), `target` the branch stories land on.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        root: PathBuf,
        config: Config,
        git: Git,
        target: String,
        timeout: Duration,
        log: TechLog,
        agents: HashMap<crate::agent::Backend, (String, Vec<String>)>,
        seal: RunSeal,
    ) -> AttemptEnv {
        let required_validation = config
            .validation
            .commands
            .iter()
            .filter(|v| v.required)
            .cloned()
            .collect();
        AttemptEnv {
            tag: crate::project::project_tag(&root),
            root,
            config,
            git,
            target,
            timeout,
            required_validation,
            log,
            agents,
            seal,
        }
    }
}

/// Serialises every worktree preparation of this process: libgit2 does not
/// guard concurrent worktree creation in one repository (the admin dir and
/// the checked-out check race), and releasing a branch from another slot
/// must not race that slot. It also holds which free slots were warmed, so
/// that taking a slot and warming it never interleave.
pub(crate) static WORKTREE_PREP: std::sync::Mutex<WarmSlots> =
    std::sync::Mutex::new(WarmSlots(std::collections::BTreeMap::new()));

/// Slot worktrees (by path) that `slot::warm_slot` left detached at a
/// target tip with a clean tree, untouched since: the next story started
/// there needs no checkout when the tip is still that one.
#[derive(Debug)]
pub(crate) struct WarmSlots(std::collections::BTreeMap<PathBuf, String>);

impl WarmSlots {
    pub(crate) fn set(&mut self, path: PathBuf, tip: String) {
        self.0.insert(path, tip);
    }

    /// The tip `path` was warmed at, forgotten: whatever comes next uses it.
    pub(crate) fn take(&mut self, path: &std::path::Path) -> Option<String> {
        self.0.remove(path)
    }
}

/// The project's own template at `rel` (from the project root) when it
/// exists, else the built-in one.
pub(crate) fn template(root: &Path, rel: &str, builtin: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|_| builtin.to_string())
}

/// The prompt of one attempt (SPEC 4.1): the project's template or the
/// built-in one, with the story's spec and its most relevant learnings.
pub(crate) fn build_prompt(
    root: &Path,
    config: &Config,
    story: &Story,
    learnings_pool: &[String],
    retry_context: Option<&str>,
) -> std::io::Result<String> {
    let spec = backlog::spec_text(root, story)?;
    let chosen = learnings::select_relevant(learnings_pool, &spec, config.learnings.max);
    let template = template(
        root,
        crate::paths::IMPLEMENT_TEMPLATE,
        prompt::BUILTIN_TEMPLATE,
    );
    let input = PromptInput {
        id: &story.id,
        title: &story.title,
        spec: &spec,
        learnings: &chosen,
        retry_context,
    };
    Ok(prompt::render(&template, &prompt::vars_for(config, &input)))
}

/// `(key, value)` pairs for a child's environment.
pub(crate) fn env_pairs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Limit of the hooks other than `pre_worktree` (which has its own key).
pub(crate) const HOOK_TIMEOUT: Duration = Duration::from_secs(600);

/// Runs hook `name` (`cmd`, when set); `Some` is what went wrong.
pub(crate) async fn run_hook(
    ctx: &AttemptEnv,
    name: &str,
    cmd: &str,
    cwd: PathBuf,
    env: Vec<(String, String)>,
    timeout: Duration,
) -> Option<String> {
    if cmd.trim().is_empty() {
        return None;
    }
    // Hooks in or about the worktree may run the agent's code: they get
    // the allowlisted environment, and their output is redacted.
    let sealed = matches!(name, "pre_worktree" | "pre_story" | "post_story");
    let (seal, redact) = match sealed {
        true => (ctx.seal.for_hook(), ctx.seal.secrets.clone()),
        false => (None, Default::default()),
    };
    let (_control_tx, control) = tokio::sync::watch::channel(process::Control::Run);
    let ran = process::run_shell_sealed(
        cmd,
        cwd,
        env,
        timeout,
        control,
        None,
        seal,
        redact,
        ctx.seal.unsealed_env_remove(),
    )
    .await;
    match ran {
        Ok(r) if r.success => None,
        Ok(r) => Some(format!(
            "hook {name} {}: {}",
            if r.timed_out {
                "timed out".to_string()
            } else {
                format!("exited {}", r.code.unwrap_or(-1))
            },
            r.tail.lines().last().unwrap_or("")
        )),
        Err(e) => Some(format!("hook {name} could not start: {e}")),
    }
    .inspect(|msg| ctx.log.line(msg))
}

/// `post_story` with the story's outcome as `RALPH_RESULT`, then
/// `post_iteration`: the end of an iteration that began with `pre_iteration`.
pub(crate) async fn post_hooks(
    ctx: &AttemptEnv,
    id: &str,
    result: &str,
    iteration: u64,
    candidate: Option<u32>,
) {
    let hooks = &ctx.config.hooks;
    // A racing candidate's hooks know which one it was (issue 36).
    let k = candidate.map(|k| k.to_string());
    let with_k = |mut env: Vec<(String, String)>| {
        if let Some(k) = &k {
            env.push(("RALPH_CANDIDATE".to_string(), k.clone()));
        }
        env
    };
    let _ = run_hook(
        ctx,
        "post_story",
        &hooks.post_story,
        ctx.root.clone(),
        with_k(env_pairs(&[("RALPH_STORY", id), ("RALPH_RESULT", result)])),
        HOOK_TIMEOUT,
    )
    .await;
    let _ = run_hook(
        ctx,
        "post_iteration",
        &hooks.post_iteration,
        ctx.root.clone(),
        with_k(env_pairs(&[("RALPH_ITERATION", &iteration.to_string())])),
        HOOK_TIMEOUT,
    )
    .await;
}

/// Runs `f` (git work, mostly) on a blocking thread, never on a runtime
/// worker; a panic in it comes back as an error.
pub(crate) async fn blocking<C: Send + Sync + 'static, T: Send + 'static>(
    ctx: &std::sync::Arc<C>,
    f: impl FnOnce(&C) -> T + Send + 'static,
) -> Result<T, String> {
    let ctx = ctx.clone();
    tokio::task::spawn_blocking(move || f(&ctx))
        .await
        .map_err(|e| format!("internal error in a git task: {e}"))
}
