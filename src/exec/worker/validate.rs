//! `ralph worker validate SPEC` (issue 34, `validation.where: executor`):
//! one merge-queue candidate validated on a cluster node. It takes a worker
//! slot as `worker attempt` does (its clone, under its file lock), fetches
//! the merge the coordinator pushed to the relay, checks it out detached in
//! the slot's validation worktree (as the coordinator's merge queue would,
//! `project::validation_slot`), runs the required commands there sealed as
//! `sandbox.mode` says on this node (`exclusive` ones one at a time on the
//! node: a file lock beside the slots), and ends with the report line
//! (`REPORT_MARKER`): the verdict, where it ran, and the output.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::control::Control;
use crate::executor::validate::output_since;
use crate::executor::Validated;
use crate::gitops::{Git, Oid};
use crate::process;
use crate::project;

use super::{
    cache_dir, epoch_ms, fetch_waiting, forward_signals, from_hex, hostname, node_name, run_git,
    take_slot, to_hex, version, NODE_MARKER, REPORT_MARKER,
};

/// One required command as the coordinator's config has it: the node runs
/// the coordinator's commands, whatever the candidate's config says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ValidationCmd {
    pub(crate) name: String,
    pub(crate) cmd: String,
    #[serde(default)]
    pub(crate) exclusive: bool,
}

/// What the coordinator hands a validating worker: names, commits and the
/// commands, never a secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ValidateSpec {
    pub(crate) version: String,
    pub(crate) relay_url: String,
    pub(crate) tag: String,
    pub(crate) subdir: String,
    /// The candidate's top story (`RALPH_STORY`) and its attempt.
    pub(crate) story: String,
    pub(crate) attempt: u32,
    /// The merge to validate, and the relay ref it was pushed to.
    pub(crate) commit: Oid,
    /// The target's tip the config (the seal's settings) is read at: an
    /// ancestor of `commit`, never the candidate's own (agent-written) copy.
    pub(crate) trusted: Oid,
    pub(crate) relay_ref: String,
    pub(crate) commands: Vec<ValidationCmd>,
    /// Each command's timeout (the run's).
    pub(crate) timeout_secs: u64,
}

impl ValidateSpec {
    pub(crate) fn encode(&self) -> String {
        to_hex(self)
    }
}

/// The config at `trusted` (the target's tip), as the coordinator reads it:
/// a candidate that edits `.ralph/config.json` (`sandbox.mode: off`) must
/// not decide how its own code is sealed.
fn trusted_config(git: &Git, trusted: &Oid, subdir: &str) -> Result<crate::config::Config, String> {
    let path = Path::new(subdir).join(crate::config::CONFIG_FILE);
    let text = git
        .text_at(trusted, &path.to_string_lossy())
        .map_err(|e| format!("reading the config at {trusted}: {e}"))?;
    crate::config::from_text(text.as_deref()).map_err(|problems| {
        let shown: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        format!("the target's config does not load: {}", shown.join("; "))
    })
}

/// A validating worker's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ValidateReport {
    #[serde(flatten)]
    pub(crate) verdict: Validated,
    /// `<node>/<worker slot>`.
    pub(crate) node: String,
    /// The commands' output, as the coordinator's log of it.
    pub(crate) log: String,
    /// When the worker started and ended (Unix milliseconds).
    #[serde(default)]
    pub(crate) span_ms: (u64, u64),
    /// Where the worker's time went, by phase (ms): the coordinator logs it.
    #[serde(default)]
    pub(crate) phases: Vec<(String, u64)>,
}

/// Where a slot's repository keeps the merge it fetched.
const VALIDATE_REF: &str = "refs/ralph-relay/validate";

/// `ralph worker validate SPEC`: prints the report line; 0 whenever one
/// was printed (the verdict is in it).
pub(crate) fn validate(spec_hex: &str) -> anyhow::Result<i32> {
    let started = epoch_ms();
    let spec: ValidateSpec = from_hex(spec_hex.trim()).map_err(anyhow::Error::msg)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut report = rt.block_on(run(&spec));
    rt.shutdown_timeout(Duration::from_secs(1));
    report.span_ms = (started, epoch_ms());
    println!(
        "{REPORT_MARKER}{}",
        serde_json::to_string(&report).unwrap_or_default()
    );
    Ok(0)
}

fn error(reason: String, node: String) -> ValidateReport {
    ValidateReport {
        verdict: Validated::Error { reason },
        node,
        log: String::new(),
        span_ms: (0, 0),
        phases: Vec::new(),
    }
}

async fn run(spec: &ValidateSpec) -> ValidateReport {
    if spec.version != version() {
        return error(
            format!(
                "the worker on {} is ralph {} but the coordinator is ralph {}",
                hostname(),
                version(),
                spec.version
            ),
            node_name(),
        );
    }
    let project_dir = cache_dir().join(spec.tag.trim_end_matches('-'));
    let (slot, slot_dir, _lock) = match take_slot(&project_dir, None) {
        Ok(s) => s,
        Err(e) => {
            return error(
                format!("cannot use the worker cache {}: {e}", project_dir.display()),
                node_name(),
            )
        }
    };
    let node = format!("{}/{slot}", node_name());
    println!("{NODE_MARKER}{node}");
    let (control_tx, control) = watch::channel(Control::Run);
    let signals = tokio::spawn(forward_signals(control_tx));
    let exclusive = project_dir.join("exclusive.lock");
    let mut phases = super::Phases::new();
    let report = match in_slot(spec, &slot_dir, &exclusive, control, &mut phases).await {
        Ok((verdict, log)) => ValidateReport {
            verdict,
            node: node.clone(),
            log,
            span_ms: (0, 0),
            phases: phases.done,
        },
        Err(e) => error(format!("on {node}: {e}"), node.clone()),
    };
    signals.abort();
    report
}

/// The merge fetched and checked out in the slot's validation worktree,
/// then each command run there; the verdict and the output.
async fn in_slot(
    spec: &ValidateSpec,
    slot_dir: &Path,
    exclusive: &Path,
    control: watch::Receiver<Control>,
    phases: &mut super::Phases,
) -> Result<(Validated, String), String> {
    let repo = slot_dir.join("repo");
    std::fs::create_dir_all(&repo).map_err(|e| format!("{}: {e}", repo.display()))?;
    if !repo.join(".git").exists() {
        run_git(&repo, &["init", "--quiet"]).await?;
    }
    let fetch = [
        "fetch".to_string(),
        "--quiet".into(),
        "--no-tags".into(),
        "--force".into(),
        spec.relay_url.clone(),
        format!("+{}:{VALIDATE_REF}", spec.relay_ref),
    ];
    fetch_waiting(&repo, &fetch).await?;
    phases.mark("fetch");
    // The candidate's files; the config (the seal's settings) is the
    // target's, read below: the candidate's copy is the agent's to edit.
    run_git(
        &repo,
        &["checkout", "--quiet", "--force", "--detach", &spec.commit],
    )
    .await?;
    let root = repo.join(&spec.subdir);
    let root = root
        .canonicalize()
        .map_err(|e| format!("{}: {e}", root.display()))?;
    let git = Git::open(&root).map_err(|e| e.to_string())?;
    let config = trusted_config(&git, &spec.trusted, &spec.subdir)?;
    // Its own token prefix, as an attempt's worker: what a dead worker of
    // this slot left running is ours to end.
    let tag = project::project_tag(&root);
    process::set_shell_token_prefix(&tag);
    process::kill_by_token_prefix(&tag);
    let (wt, branch) = project::validation_slot(0);
    let path = crate::paths::worktrees_dir(&root).join(&wt);
    let (g, p, c) = (git.clone(), path.clone(), spec.commit.clone());
    let (b, name) = (branch.clone(), wt.clone());
    tokio::task::spawn_blocking(move || {
        g.prepare_worktree(&name, &p, &b, &c)?;
        g.checkout_detached(&p, &c)
    })
    .await
    .map_err(|e| format!("internal error preparing the worktree: {e}"))?
    .map_err(|e| format!("preparing the validation worktree: {e}"))?;
    let _ = git.delete_ref(VALIDATE_REF);
    phases.mark("checkout");
    // Sealed as a validation on the coordinator would be (SPEC 9).
    let seal = crate::executor::RunSeal::new(&config, &[])?;
    let log = slot_dir.join("validate.log");
    let _ = std::fs::remove_file(&log);
    let env = crate::executor::env_pairs(&[
        ("RALPH_STORY", &spec.story),
        ("RALPH_PROJECT_DIR", &root.display().to_string()),
        ("RALPH_NODE", &node_name()),
    ]);
    let timeout = Duration::from_secs(spec.timeout_secs);
    let mut verdict = Validated::Passed;
    for v in &spec.commands {
        let from = std::fs::metadata(&log).map_or(0, |m| m.len());
        let _turn = match v.exclusive {
            true => Some(turn(exclusive).await?),
            false => None,
        };
        let run = process::run_shell_sealed(
            &v.cmd,
            path.clone(),
            env.clone(),
            timeout,
            control.clone(),
            Some(&log),
            seal.for_validation(&git, &path, &wt),
            seal.secrets.clone(),
            seal.unsealed_env_remove(),
        );
        match run.await {
            Ok(r) if r.success => {}
            // Stopped before its command started, or killed with the job:
            // what failed then is the stop, not the tree.
            Ok(r) if r.interrupted || !matches!(*control.borrow(), Control::Run) => {
                verdict = Validated::Interrupted;
                break;
            }
            Ok(r) => {
                let tail = match output_since(&log, from) {
                    Some(out) => crate::prompt::output_tail(&out),
                    None => r.tail,
                };
                verdict = Validated::Failed {
                    name: v.name.clone(),
                    cmd: v.cmd.clone(),
                    tail,
                };
                break;
            }
            Err(e) => {
                verdict = Validated::Error {
                    reason: format!("validation '{}' could not start: {e}", v.name),
                };
                break;
            }
        }
    }
    phases.mark("commands");
    let out = std::fs::read(&log)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    Ok((verdict, out))
}

/// The node's turn for an `exclusive` command: a lock on a file every
/// worker of this project on the node shares, held while it runs.
async fn turn(path: &Path) -> Result<std::fs::File, String> {
    let p = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&p)
            .map_err(|e| format!("{}: {e}", p.display()))?;
        f.lock().map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(f)
    })
    .await
    .map_err(|e| format!("internal error waiting for a turn: {e}"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seal_is_the_targets_config_not_the_candidates() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(dir)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap();
            assert!(out.status.success(), "{args:?}");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        git(&["init", "-q", "-b", "main"]);
        git(&["config", "user.name", "T"]);
        git(&["config", "user.email", "t@e"]);
        let write = |text: &str| {
            std::fs::create_dir_all(dir.join("sub/.ralph")).unwrap();
            std::fs::write(dir.join("sub/.ralph/config.json"), text).unwrap();
        };
        write(r#"{"sandbox": {"mode": "bwrap"}}"#);
        git(&["add", "-A"]);
        git(&["commit", "-qm", "target"]);
        let target = git(&["rev-parse", "HEAD"]);
        // The candidate's agent turns the seal off in its own copy.
        write(r#"{"sandbox": {"mode": "off"}}"#);
        git(&["commit", "-qam", "agent"]);
        let candidate = git(&["rev-parse", "HEAD"]);
        let g = Git::open(dir).unwrap();
        let mode = |at: &str| {
            trusted_config(&g, &at.to_string(), "sub")
                .unwrap()
                .sandbox
                .mode
        };
        assert_eq!(mode(&target), crate::sandbox::Mode::Bwrap);
        assert_eq!(
            mode(&candidate),
            crate::sandbox::Mode::Off,
            "the check can tell them apart"
        );
        // No config at the target: the defaults, never the candidate's.
        assert_eq!(
            trusted_config(&g, &target, "elsewhere")
                .unwrap()
                .sandbox
                .mode,
            crate::sandbox::Mode::Auto
        );
    }

    #[test]
    fn a_validation_spec_and_report_cross_the_wire() {
        let spec = ValidateSpec {
            version: version().into(),
            relay_url: "git://127.0.0.1:9418/relay.git".into(),
            tag: "ralph-1a2b3c4d-".into(),
            subdir: String::new(),
            story: "1.2".into(),
            attempt: 1,
            commit: "a".repeat(40),
            trusted: "b".repeat(40),
            relay_ref: "refs/ralph/ralph-1a2b3c4d/validate/aaaa/0".into(),
            commands: vec![ValidationCmd {
                name: "test".into(),
                cmd: "make test".into(),
                exclusive: true,
            }],
            timeout_secs: 60,
        };
        assert_eq!(from_hex::<ValidateSpec>(&spec.encode()).unwrap(), spec);
        for verdict in [
            Validated::Passed,
            Validated::Failed {
                name: "test".into(),
                cmd: "make test".into(),
                tail: "1 failed".into(),
            },
            Validated::Interrupted,
            Validated::Error { reason: "r".into() },
        ] {
            let r = ValidateReport {
                verdict: verdict.clone(),
                node: "w2/0".into(),
                log: "out".into(),
                span_ms: (1, 2),
                phases: Vec::new(),
            };
            let line = format!("{REPORT_MARKER}{}\n", serde_json::to_string(&r).unwrap());
            let back = super::super::report_in_as::<ValidateReport>(&line)
                .unwrap()
                .unwrap();
            assert_eq!((back.verdict, back.node.as_str()), (verdict, "w2/0"));
        }
    }
}
