//! How this run seals its children (issue 22, SPEC 9): decided once at the
//! start (`RunSeal::new` probes bubblewrap), then applied to each agent
//! attempt, validation command and worktree hook. The decisions are
//! `crate::sandbox`'s; this file reads the machine for them and hands
//! `process` the result.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::agent::Backend;
use crate::config::Config;
use crate::gitops::Git;
use crate::process::{self, Seal};
use crate::redact::Secrets;
use crate::sandbox::{self, mounts, Decision, Settings};

/// The run's sealing, shared by every attempt.
#[derive(Debug, Clone)]
pub(crate) struct RunSeal {
    pub(crate) decision: Decision,
    bwrap: Option<PathBuf>,
    /// What every sealed child's output is cleaned of.
    pub(crate) secrets: Arc<Secrets>,
    host: Vec<(String, String)>,
    settings: Settings,
    system: Vec<mounts::SystemDir>,
    system_extras: Vec<PathBuf>,
    home: PathBuf,
}

fn host_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

impl RunSeal {
    /// How a run seals its children, probed once (`bwrap` mode without a
    /// working bubblewrap is a usage error), and the backends it may run.
    pub(crate) fn for_run(
        config: &Config,
        agents: &super::Agents,
    ) -> Result<(RunSeal, Vec<Backend>), crate::error::RalphError> {
        let mut backends: Vec<Backend> = agents.keys().copied().collect();
        backends.sort_by_key(|b| b.name());
        let s = RunSeal::new(config, &backends).map_err(|e| {
            crate::error::RalphError::usage(e).with_hint(format!(
                "{}, or set sandbox.mode to \"auto\" (the allowlist alone when bubblewrap is \
                 missing) in {}",
                sandbox::INSTALL_HINT,
                crate::paths::CONFIG
            ))
        })?;
        Ok((s, backends))
    }

    /// Decides the mode (probing bubblewrap once, unless `sandbox.mode` is
    /// off); `Err` is the message of a `bwrap` mode that cannot be had.
    pub(crate) fn new(config: &Config, backends: &[Backend]) -> Result<RunSeal, String> {
        let host = host_env();
        let path = host
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let mut bwrap = None;
        let decision = sandbox::decide(config.sandbox.mode, cfg!(target_os = "linux"), || {
            let (probe, found) = process::probe_bwrap(&path);
            bwrap = found;
            probe
        })?;
        let names: Vec<&str> = backends
            .iter()
            .flat_map(|b| b.env_names().iter().copied())
            .collect();
        let secrets = if decision.seal {
            let mut values = sandbox::secret_values(&host, &names, &config.sandbox);
            values.extend(sandbox::tracker_secret_values(&host));
            Secrets::new(values)
        } else {
            Secrets::default()
        };
        let home = host
            .iter()
            .find(|(k, _)| k == "HOME")
            .map(|(_, v)| PathBuf::from(v))
            .unwrap_or_default();
        Ok(RunSeal {
            bwrap: bwrap.filter(|_| decision.confine),
            decision,
            secrets: Arc::new(secrets),
            host,
            settings: config.sandbox.clone(),
            system: sandbox::gather_system(),
            system_extras: sandbox::gather_system_extras(),
            home,
        })
    }

    /// The environment a child of `backend` gets (`None`: a hook or a
    /// validation command, which get no CLI's variables).
    fn env(&self, backend: Option<Backend>, confined: bool) -> Vec<(String, String)> {
        let (names, remove) = match backend {
            Some(b) => (b.env_names(), b.env_remove()),
            None => (&[][..], &[][..]),
        };
        sandbox::allowed_env(&self.host, names, remove, &self.settings, confined)
    }

    /// The names (never the values) an agent of `backend` receives, for
    /// `ralph run -d`; `None` when nothing is sealed.
    pub(crate) fn agent_env_names(&self, backend: Backend) -> Option<Vec<String>> {
        self.decision.seal.then(|| {
            self.env(Some(backend), self.decision.confine)
                .into_iter()
                .map(|(k, _)| k)
                .collect()
        })
    }

    /// What an unsealed hook or validation command loses of ralph's
    /// environment (`sandbox::unsealed_env_remove`).
    pub(crate) fn unsealed_env_remove(&self) -> Vec<String> {
        sandbox::unsealed_env_remove(&self.settings)
    }

    /// A worktree hook's seal: the allowlisted environment, not confined
    /// (hooks are the user's commands, with the user's reach).
    pub(crate) fn for_hook(&self) -> Option<Seal> {
        self.decision.seal.then(|| Seal {
            env: self.env(None, false),
            ..Seal::default()
        })
    }

    fn layout(
        &self,
        git: &Git,
        env: &[(String, String)],
        work: &Path,
        admin: &str,
    ) -> mounts::Layout {
        let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str())
            .unwrap_or_default();
        let tools = path
            .split(':')
            .filter(|d| !d.is_empty() && Path::new(d).is_dir())
            .map(|d| canon(Path::new(d)))
            .collect();
        let home = env
            .iter()
            .find(|(k, _)| k == "HOME")
            .map(|(_, v)| PathBuf::from(v))
            .unwrap_or_else(|| self.home.clone());
        mounts::Layout {
            system: self.system.clone(),
            system_extras: self.system_extras.clone(),
            home_ro: sandbox::existing_under(&home, &[".gitconfig", ".config/git"]),
            home,
            state: Vec::new(),
            tools,
            allow_read: self.settings.allow_read.clone(),
            allow_write: self.settings.allow_write.clone(),
            project: canon(&git.workdir),
            git_dir: git.git_dir.clone(),
            // `objects/` is the slot's own (`gitops::sandbox`): the caller's.
            git_rw: vec![git.git_dir.join("worktrees").join(admin)],
            overlays: Vec::new(),
            ro_overlays: Vec::new(),
            git_ro: Vec::new(),
            work: canon(work),
        }
    }

    /// An agent attempt's seal in worktree `work` (slot `slot`) on story
    /// branch `branch`: inside bubblewrap when the run confines, with the
    /// story branch's private stand-in made (`gitops::sandbox`). Blocking
    /// (git). `None` when nothing is sealed.
    pub(crate) fn for_agent(
        &self,
        git: &Git,
        backend: Backend,
        program: &str,
        slot: &str,
        work: &Path,
        branch: &str,
    ) -> Result<Option<Seal>, String> {
        if !self.decision.seal {
            return Ok(None);
        }
        let env = self.env(Some(backend), self.bwrap.is_some());
        let Some(bwrap) = &self.bwrap else {
            return Ok(Some(Seal {
                env,
                bwrap: None,
                limits: self.settings.limits,
            }));
        };
        let mut layout = self.layout(git, &env, work, slot);
        layout.state = sandbox::existing_under(&layout.home, backend.state_paths());
        with_tools(&mut layout, &env, program, work);
        let refs = git
            .sandbox_prepare(slot, &layout.work, Some(branch))
            .map_err(|e| format!("cannot prepare the sandbox's refs: {e}"))?;
        layout.overlays = refs.overlays;
        layout.ro_overlays = refs.ro_overlays;
        layout.git_ro = refs.ro_files;
        let plan = mounts::plan(&layout);
        // Agents keep the network: they need their API.
        let args = mounts::bwrap_args(&plan, true, &layout.work);
        Ok(Some(Seal {
            env,
            bwrap: Some((bwrap.clone(), args)),
            limits: self.settings.limits,
        }))
    }

    /// The seal of the start-up probe of `backend`'s `program`
    /// (`process::can_start`): the environment its attempts get and, when
    /// the run confines, their mounts with the repository's work tree in the
    /// place of the attempt's worktree, read-only (an in-repository agent is
    /// at the same path in both; `agents_can_start` made sure it is
    /// committed). `None` when nothing is sealed.
    pub(crate) fn for_probe(&self, git: &Git, backend: Backend, program: &str) -> Option<Seal> {
        self.outside_slot(git, backend, program, &git.workdir, false)
    }

    /// The seal of an agent asked for text alone (`ralph plan`), run in
    /// `work`, a scratch directory of its own: an attempt's environment
    /// and, when the run confines, its mounts with `work` in the place of
    /// the worktree (no git of its own; the repository's, read-only, as
    /// every sealed child sees it). `None` when nothing is sealed.
    pub(crate) fn for_text_agent(
        &self,
        git: &Git,
        backend: Backend,
        program: &str,
        work: &Path,
    ) -> Option<Seal> {
        self.outside_slot(git, backend, program, work, true)
    }

    /// An agent's seal in `work`, a directory that is no slot's worktree
    /// (read-only unless `writable`).
    fn outside_slot(
        &self,
        git: &Git,
        backend: Backend,
        program: &str,
        work: &Path,
        writable: bool,
    ) -> Option<Seal> {
        if !self.decision.seal {
            return None;
        }
        let env = self.env(Some(backend), self.bwrap.is_some());
        let Some(bwrap) = &self.bwrap else {
            return Some(Seal {
                env,
                bwrap: None,
                limits: self.settings.limits,
            });
        };
        let mut layout = self.layout(git, &env, work, "");
        layout.git_rw = Vec::new();
        layout.state = sandbox::existing_under(&layout.home, backend.state_paths());
        let cwd = layout.work.clone();
        with_tools(&mut layout, &env, program, &cwd);
        let plan: Vec<mounts::Mount> = mounts::plan(&layout)
            .into_iter()
            .map(|m| match m {
                mounts::Mount::Rw(p) if p == layout.work && !writable => mounts::Mount::Ro(p),
                m => m,
            })
            .collect();
        let args = mounts::bwrap_args(&plan, true, &layout.work);
        Some(Seal {
            env,
            bwrap: Some((bwrap.clone(), args)),
            limits: self.settings.limits,
        })
    }

    /// Whether the run confines its agents (bubblewrap).
    pub(crate) fn confines(&self) -> bool {
        self.bwrap.is_some()
    }

    /// A validation command's seal in the merge queue's worktree `work`
    /// (git's worktree `admin`): the allowlisted environment, and inside
    /// bubblewrap (without the network when `sandbox.network` is false)
    /// when the run confines.
    pub(crate) fn for_validation(&self, git: &Git, work: &Path, admin: &str) -> Option<Seal> {
        if !self.decision.seal {
            return None;
        }
        let env = self.env(None, self.bwrap.is_some());
        let bwrap = self.bwrap.as_ref().map(|b| {
            let mut layout = self.layout(git, &env, work, admin);
            // Its own object directory, as an agent's (the next prepare or
            // run start brings in what it wrote); failing that, the
            // repository's objects stay read-only to it.
            if let Ok(refs) = git.sandbox_prepare(admin, &layout.work, None) {
                layout.overlays = refs.overlays;
                layout.ro_overlays = refs.ro_overlays;
                layout.git_ro = refs.ro_files;
            }
            let plan = mounts::plan(&layout);
            (
                b.clone(),
                mounts::bwrap_args(&plan, self.settings.network, &layout.work),
            )
        });
        Some(Seal {
            env,
            bwrap,
            ..Seal::default()
        })
    }
}

/// The program an attempt in worktree `work` runs: an agent inside the
/// repository `repo` from the worktree, where it is committed
/// (`sandbox::in_worktree`), when it is there; else `program` as resolved
/// (an uncommitted one runs unconfined from the main checkout, as before).
pub(crate) fn program_in(repo: &Path, program: &str, work: &Path) -> String {
    let p = Path::new(program);
    let canon = repo.canonicalize().ok();
    [Some(repo.to_path_buf()), canon]
        .into_iter()
        .flatten()
        .find_map(|r| sandbox::in_worktree(&r, p, work))
        .filter(|w| w.is_file())
        .map_or_else(|| program.to_string(), |w| w.display().to_string())
}

/// The agent's program, found along the sealed environment's PATH from
/// `cwd`, and what it runs on, made visible inside the sandbox.
fn with_tools(layout: &mut mounts::Layout, env: &[(String, String)], program: &str, cwd: &Path) {
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .unwrap_or_default();
    if let Some(found) = sandbox::which(program, path, cwd) {
        layout.tools.extend(sandbox::gather_exe_tree(&found));
    }
}
