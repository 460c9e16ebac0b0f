//! What attempts and landings share, read-only, for one run.

use std::path::PathBuf;
use std::time::Duration;

use crate::process;

use crate::config::{Config, ValidationCommand};
use crate::gitops::Git;
use crate::store::TechLog;

#[derive(Debug)]
pub(crate) struct RunContext {
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
    pub(crate) agents: std::collections::HashMap<crate::agent::Backend, (String, Vec<String>)>,
    /// The backlog is a prd.json (whose `passes` a landing sets).
    pub(crate) prd: bool,
    /// Validated work stays on its branch for a person (`landing.mode:
    /// review`), except in `ralph land`, which lands it.
    pub(crate) review: bool,
    /// `landing.mode: pr`: the remote validated work is pushed to, and the
    /// `gh` that opens its pull request.
    pub(crate) pr: Option<PrLanding>,
    /// This run's records (`None` when `.ralph/runs/` cannot be written:
    /// records are worth a log line, not the run).
    pub(crate) runlog: Option<crate::runlog::RunLog>,
    /// How children are sealed: environment, redaction, bubblewrap.
    pub(crate) seal: super::seal::RunSeal,
    /// The stories this run landed on the target: (story, base, merge).
    /// Each landing checks the main index and the target's tip against
    /// them (`land::check_landed_work`).
    pub(crate) landed: std::sync::Mutex<Vec<(String, crate::gitops::Oid, crate::gitops::Oid)>>,
    /// Landed work found reverted on the target (story, path), each said
    /// once, and how far the check has read the target's history.
    pub(crate) reverted: std::sync::Mutex<crate::gitops::RevertCheck>,
}

/// Where `landing.mode: pr` sends work.
#[derive(Debug, Clone)]
pub(crate) struct PrLanding {
    pub(crate) remote: String,
    /// The GitHub CLI's executable.
    pub(crate) gh: String,
}

impl RunContext {
    /// Appends `ev` to the run's records.
    pub(crate) fn record(&self, ev: crate::runlog::Ev) {
        if let Some(l) = &self.runlog {
            if let Err(e) = l.write(ev) {
                self.log
                    .line(&format!("cannot append to {}: {e}", l.path.display()));
            }
        }
    }

    /// This run's ID in `.ralph/runs/` ("" without records).
    pub(crate) fn run_id(&self) -> &str {
        self.runlog.as_ref().map_or("", |l| l.id.as_str())
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

/// Starts asked of each slot (by path) and how many of them took it:
/// a warm of a slot a start was asked of since the warm was does nothing,
/// and no warm goes before a start waiting to take its slot. Held for a
/// moment only (the dispatcher takes it, never around git work).
pub(crate) static SLOT_STARTS: std::sync::Mutex<std::collections::BTreeMap<PathBuf, SlotStarts>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SlotStarts {
    pub(crate) asked: u64,
    pub(crate) taken: u64,
}

/// The project's own template at `rel` (from the project root) when it
/// exists, else the built-in one.
pub(crate) fn template(root: &std::path::Path, rel: &str, builtin: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|_| builtin.to_string())
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
    ctx: &RunContext,
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

/// Runs `f` (git work, mostly) on a blocking thread, never on a runtime
/// worker; a panic in it comes back as an error.
pub(crate) async fn blocking<T: Send + 'static>(
    ctx: &std::sync::Arc<RunContext>,
    f: impl FnOnce(&RunContext) -> T + Send + 'static,
) -> Result<T, String> {
    let ctx = ctx.clone();
    tokio::task::spawn_blocking(move || f(&ctx))
        .await
        .map_err(|e| format!("internal error in a git task: {e}"))
}
