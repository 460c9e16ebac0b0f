//! Sealed attempts (SPEC 9): which environment an agent and the commands
//! that run its code receive, which of those values are secret, which mode
//! of confinement a run uses and why, and (in `mounts`) what a bubblewrap
//! sandbox shows them. The decisions are pure functions over plain data;
//! the few readings of the machine they need are gathered by the `gather`
//! functions at the bottom and by `process::probe_bwrap`.

pub(crate) mod mounts;

use std::path::{Path, PathBuf};

/// `sandbox.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Mode {
    /// bubblewrap when it is installed and works, else the allowlist alone.
    #[default]
    Auto,
    /// bubblewrap or refuse to run.
    Bwrap,
    /// Nothing sealed: the whole environment, no confinement, no redaction.
    Off,
}

impl Mode {
    pub(crate) fn parse(s: &str) -> Option<Mode> {
        match s.trim() {
            "auto" | "" => Some(Mode::Auto),
            "bwrap" => Some(Mode::Bwrap),
            "off" => Some(Mode::Off),
            _ => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Bwrap => "bwrap",
            Mode::Off => "off",
        }
    }
}

/// The `sandbox.*` keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) mode: Mode,
    /// `sandbox.env.pass`: more names (or `PREFIX_*` globs) that pass.
    pub(crate) pass: Vec<String>,
    /// `sandbox.env.set`: variables given to agents whatever ralph's own
    /// environment holds.
    pub(crate) set: Vec<(String, String)>,
    /// `sandbox.redact`: names (or globs) whose values are hidden as well.
    pub(crate) redact: Vec<String>,
    pub(crate) allow_read: Vec<PathBuf>,
    pub(crate) allow_write: Vec<PathBuf>,
    /// `sandbox.network` (default true): false cuts the network of
    /// validation commands (agents always keep theirs: they need their API).
    pub(crate) network: bool,
    /// `sandbox.limits.*`: what one attempt may use.
    pub(crate) limits: Limits,
}

/// `sandbox.limits.*`: caps on one agent attempt, all its processes
/// together (`process::cgroup` makes them real). 0: no cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Processes and threads at once (`pids.max`).
    pub(crate) pids: u64,
    /// Memory in MiB (`memory.max`, cgroup v1 `memory.limit_in_bytes`).
    pub(crate) memory_mb: u64,
}

impl Limits {
    pub(crate) fn is_none(&self) -> bool {
        self.pids == 0 && self.memory_mb == 0
    }
}

/// A limit an attempt ran into: the attempt's failure, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LimitHit {
    /// A fork failed at `sandbox.limits.pids`.
    Pids(u64),
    /// A process was killed for memory at `sandbox.limits.memory_mb`.
    Memory(u64),
}

impl std::fmt::Display for LimitHit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitHit::Pids(n) => write!(
                f,
                "the attempt hit sandbox.limits.pids ({n} processes at once): a fork failed"
            ),
            LimitHit::Memory(mb) => write!(
                f,
                "the attempt hit sandbox.limits.memory_mb ({mb} MiB): a process was killed \
                 for lack of memory"
            ),
        }
    }
}

/// Names every sealed child gets (besides its backend's and ralph's own).
pub(crate) const BASE_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_*", "TERM", "TZ", "TMPDIR", "RALPH_*",
];

/// Parts of a name that make its value a secret (matched without case).
pub(crate) const SECRET_WORDS: &[&str] =
    &["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH"];

/// `name` matches `pattern`, where `*` stands for any run of characters
/// (`LC_*`, `*_TOKEN`, an exact name).
pub(crate) fn glob_match(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for p in middle {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// A name whose value ralph hides wherever it writes agent output.
pub(crate) fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_WORDS.iter().any(|w| upper.contains(w))
}

/// The environment of a sealed child: the variables of `host` whose names
/// match `BASE_ENV`, `backend` (its own CLI's) or `settings.pass`, less
/// `remove`; then `settings.set`. Inside bubblewrap, `TMPDIR` is the
/// private `/tmp` and `IS_SANDBOX=1` tells Claude Code it may skip its
/// permission prompts as root. Sorted by name.
pub(crate) fn allowed_env(
    host: &[(String, String)],
    backend: &[&str],
    remove: &[&str],
    settings: &Settings,
    confined: bool,
) -> Vec<(String, String)> {
    let passes = |name: &str| {
        BASE_ENV
            .iter()
            .chain(backend)
            .copied()
            .chain(settings.pass.iter().map(String::as_str))
            .any(|p| glob_match(p, name))
    };
    let mut out: std::collections::BTreeMap<String, String> = host
        .iter()
        .filter(|(k, _)| passes(k) && !remove.contains(&k.as_str()))
        .cloned()
        .collect();
    for (k, v) in &settings.set {
        out.insert(k.clone(), v.clone());
    }
    if confined {
        out.insert("TMPDIR".into(), "/tmp".into());
        out.insert("IS_SANDBOX".into(), "1".into());
    }
    out.into_iter().collect()
}

/// The values to redact in a run: of every variable a sealed child may
/// receive (`BASE_ENV`, any backend's names in `backends`, `pass`, `set`)
/// whose name looks secret, and of every variable `settings.redact` names.
pub(crate) fn secret_values(
    host: &[(String, String)],
    backends: &[&str],
    settings: &Settings,
) -> Vec<String> {
    let received = |name: &str| {
        BASE_ENV
            .iter()
            .chain(backends)
            .copied()
            .chain(settings.pass.iter().map(String::as_str))
            .any(|p| glob_match(p, name))
    };
    let named = |name: &str| settings.redact.iter().any(|p| glob_match(p, name));
    let mut out: Vec<String> = host
        .iter()
        .filter(|(k, _)| (received(k) && looks_secret(k)) || named(k))
        .map(|(_, v)| v.clone())
        .collect();
    out.extend(
        settings
            .set
            .iter()
            .filter(|(k, _)| looks_secret(k) || named(k))
            .map(|(_, v)| v.clone()),
    );
    out.sort();
    out.dedup();
    out
}

/// The variables holding an issue tracker's token (issue 27): never on
/// the allowlist, and their values redacted wherever a child's output
/// shows them (an agent that runs `gh auth token` itself, say).
pub(crate) const TRACKER_SECRETS: &[&str] = &[
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "LINEAR_API_KEY",
    "JIRA_EMAIL",
    "JIRA_API_TOKEN",
    "JIRA_TOKEN",
];

/// What an agent's environment loses before it starts, sealed or not: the
/// variables its backend must not inherit, and a tracker's token (every
/// agent run: an attempt, a plan, a reviewer).
/// `own`: the backend's (`Backend::env_remove`; `sandbox` imports no
/// `agent`, which starts processes through `process`, which seals them here).
pub(crate) fn agent_env_remove(own: &[&str]) -> Vec<String> {
    own.iter()
        .chain(TRACKER_SECRETS)
        .map(|s| s.to_string())
        .collect()
}

/// What an unsealed hook or validation command loses of ralph's own
/// environment (issue 35): a tracker's token, unless `sandbox.env.pass`
/// names it on purpose. Sealed, the allowlist leaves it out anyway.
pub(crate) fn unsealed_env_remove(settings: &Settings) -> Vec<String> {
    TRACKER_SECRETS
        .iter()
        .filter(|name| !settings.pass.iter().any(|p| glob_match(p, name)))
        .map(|s| s.to_string())
        .collect()
}

/// The values of `TRACKER_SECRETS` in `host`.
pub(crate) fn tracker_secret_values(host: &[(String, String)]) -> Vec<String> {
    host.iter()
        .filter(|(k, v)| TRACKER_SECRETS.contains(&k.as_str()) && !v.trim().is_empty())
        .map(|(_, v)| v.clone())
        .collect()
}

/// What `bwrap --version` and a trial sandbox said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Probe {
    Works,
    /// Not on PATH.
    Missing,
    /// Installed but a trial sandbox failed (no user namespaces, say).
    Broken(String),
}

/// How a run seals its attempts, and the words for `validate` and `run -d`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    /// Agents and validation commands run inside bubblewrap.
    pub(crate) confine: bool,
    /// The allowlist and redaction apply.
    pub(crate) seal: bool,
    /// One line: the mode used and why.
    pub(crate) why: String,
}

/// How to get bubblewrap, for messages.
pub(crate) const INSTALL_HINT: &str =
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)";

/// The mode a run uses. `linux` is false elsewhere (bubblewrap is Linux
/// only); `probe` runs only when bubblewrap could be used. `Err` when
/// `sandbox.mode` is `bwrap` and bubblewrap cannot be used.
pub(crate) fn decide(
    mode: Mode,
    linux: bool,
    probe: impl FnOnce() -> Probe,
) -> Result<Decision, String> {
    let unconfined = |why: String| Decision {
        confine: false,
        seal: true,
        why,
    };
    match mode {
        Mode::Off => Ok(Decision {
            confine: false,
            seal: false,
            why: "off (sandbox.mode is off): agents get ralph's whole environment and reach \
                  everything ralph can"
                .into(),
        }),
        _ if !linux => match mode {
            Mode::Bwrap => Err("sandbox.mode is bwrap but bubblewrap runs on Linux only".into()),
            _ => Ok(unconfined(
                "environment allowlist only (sandbox.mode auto: bubblewrap is Linux only); \
                 agents are not confined"
                    .into(),
            )),
        },
        _ => match (probe(), mode) {
            (Probe::Works, _) => Ok(Decision {
                confine: true,
                seal: true,
                why: format!(
                    "bwrap (sandbox.mode {}: bubblewrap works): agents see their worktree, \
                     the system and their CLI's own state",
                    mode.name()
                ),
            }),
            (Probe::Missing, Mode::Bwrap) => {
                Err("sandbox.mode is bwrap but bwrap is not installed".into())
            }
            (Probe::Broken(e), Mode::Bwrap) => Err(format!(
                "sandbox.mode is bwrap but bubblewrap does not work here: {e}"
            )),
            (Probe::Missing, _) => Ok(unconfined(
                "environment allowlist only (sandbox.mode auto: bwrap is not installed); \
                 agents are not confined"
                    .into(),
            )),
            (Probe::Broken(e), _) => Ok(unconfined(format!(
                "environment allowlist only (sandbox.mode auto: bubblewrap does not work \
                 here: {e}); agents are not confined"
            ))),
        },
    }
}

/// The one line `run` prints when agents run unconfined in `auto` mode.
pub(crate) fn unconfined_warning(d: &Decision) -> Option<String> {
    (d.seal && !d.confine).then(|| {
        format!(
            "warning: agents are not confined (no working bubblewrap): they can read and write \
             anything ralph can; {INSTALL_HINT}, or set sandbox.mode to off to silence this"
        )
    })
}

/// Where an agent executable inside the repository's work tree `repo`
/// (`bin/my-agent`, resolved from the project) is in the attempt's worktree
/// `work`: the same path under it. `None` for one outside the repository
/// (on `PATH`, under `/opt`, ...). An attempt runs the worktree's copy in
/// every mode: under bubblewrap the main checkout is not there at all, and
/// the copy on the story's branch is the one its commits go with.
pub(crate) fn in_worktree(repo: &Path, program: &Path, work: &Path) -> Option<PathBuf> {
    let rel = program.strip_prefix(repo).ok()?;
    (!rel.as_os_str().is_empty()).then(|| work.join(rel))
}

// ---- readings of the machine (edge) ----

/// `program` as `execvp` would find it along `path` (a `PATH` value), but
/// for empty entries, skipped (not read as `cwd`): a file with its execute
/// bit; a name with a `/` is taken as it is, from `cwd`. ralph's one PATH lookup (agents, `gh`, bubblewrap, a sealed
/// child's program).
pub(crate) fn which(program: &str, path: &str, cwd: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = cwd.join(program);
        return runnable(&p).then_some(p);
    }
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(program))
        .find(|p| runnable(p))
}

/// The system directories that exist, each with its link target when it is
/// a symbolic link (`/bin` → `usr/bin` on merged-/usr systems).
pub(crate) fn gather_system() -> Vec<mounts::SystemDir> {
    mounts::SYSTEM_DIRS
        .iter()
        .filter_map(|d| {
            let p = Path::new(d);
            let meta = std::fs::symlink_metadata(p).ok()?;
            let link = meta
                .file_type()
                .is_symlink()
                .then(|| std::fs::read_link(p).ok())
                .flatten();
            Some(mounts::SystemDir {
                path: p.to_path_buf(),
                link,
            })
        })
        .collect()
}

/// Files outside the system directories the system needs: the target of
/// `/etc/resolv.conf` when it links into `/run` (systemd-resolved).
pub(crate) fn gather_system_extras() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(real) = std::fs::canonicalize("/etc/resolv.conf") {
        if !mounts::SYSTEM_DIRS.iter().any(|d| real.starts_with(d)) {
            out.push(real);
        }
    }
    out
}

/// Which of `rel` (paths relative to `home`) exist.
pub(crate) fn existing_under(home: &Path, rel: &[&str]) -> Vec<PathBuf> {
    rel.iter()
        .map(|r| home.join(r))
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect()
}

/// The directories an agent's executable needs read-only: where it was
/// found, and the tree it really lives in (through symlinks).
pub(crate) fn gather_exe_tree(found: &Path) -> Vec<PathBuf> {
    let real = std::fs::canonicalize(found).unwrap_or_else(|_| found.to_path_buf());
    mounts::exe_tree(found, &real)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn which_finds_only_runnable_files_as_execvp_would() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (a, b) = (d.join("a"), d.join("b"));
        for p in [&a, &b] {
            std::fs::create_dir_all(p).unwrap();
        }
        let file = |p: &Path, mode: u32| {
            std::fs::write(p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        // Found first in `a` but not runnable there: `b`'s.
        file(&a.join("agent"), 0o644);
        file(&b.join("agent"), 0o755);
        std::fs::create_dir_all(a.join("dir")).unwrap();
        let path = format!("::{}:{}", a.display(), b.display());
        assert_eq!(which("agent", &path, d), Some(b.join("agent")));
        assert_eq!(which("dir", &path, d), None, "a directory");
        assert_eq!(which("nothing", &path, d), None);
        // Empty PATH entries are skipped, not read as `cwd`.
        file(&d.join("here"), 0o755);
        assert_eq!(which("here", &path, d), None);
        // A path with a `/`: from `cwd`, PATH not asked, the bit checked.
        assert_eq!(which("a/agent", &path, d), None, "not executable");
        assert_eq!(which("b/agent", "", d), Some(d.join("b/agent")));
        let abs = b.join("agent").display().to_string();
        assert_eq!(which(&abs, "", Path::new("/")), Some(b.join("agent")));
    }

    #[test]
    fn globs() {
        assert!(glob_match("LC_*", "LC_ALL"));
        assert!(glob_match("LC_*", "LC_"));
        assert!(!glob_match("LC_*", "LANG"));
        assert!(glob_match("PATH", "PATH"));
        assert!(!glob_match("PATH", "PATHS"));
        assert!(glob_match("*_TOKEN", "GITHUB_TOKEN"));
        assert!(glob_match("A*B*C", "AxxBxxC"));
        assert!(!glob_match("A*B*C", "AxxCxxB"));
        assert!(!glob_match("AB*BA", "ABA"));
    }

    #[test]
    fn secret_names() {
        for n in [
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "aws_secret_access_key",
            "DB_PASSWORD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "SSH_AUTH_SOCK",
        ] {
            assert!(looks_secret(n), "{n}");
        }
        for n in ["PATH", "HOME", "ANTHROPIC_BASE_URL", "LANG"] {
            assert!(!looks_secret(n), "{n}");
        }
    }

    fn host() -> Vec<(String, String)> {
        env(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("LC_ALL", "C.UTF-8"),
            ("AWS_SECRET_ACCESS_KEY", "aws-very-secret"),
            ("GITHUB_TOKEN", "ghp_0123456789"),
            ("SSH_AUTH_SOCK", "/tmp/ssh/agent"),
            ("ANTHROPIC_API_KEY", "sk-ant-0123456789"),
            ("OPENAI_API_KEY", "sk-openai-0123456789"),
            ("CLAUDE_CODE_ENTRYPOINT", "cli"),
            ("CLAUDECODE", "1"),
            ("RALPH_STORY", "1.1"),
            ("NPM_TOKEN", "npm-0123456789"),
            ("MY_TOOL_HOME", "/opt/tool"),
            ("TMPDIR", "/var/tmp/u"),
        ])
    }

    fn names(e: &[(String, String)]) -> Vec<&str> {
        e.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn the_allowlist_keeps_the_base_the_backend_and_ralph() {
        let claude = ["ANTHROPIC_*", "CLAUDE_CODE_*"];
        let e = allowed_env(
            &host(),
            &claude,
            &["CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"],
            &Settings::default(),
            false,
        );
        assert_eq!(
            names(&e),
            [
                "ANTHROPIC_API_KEY",
                "HOME",
                "LC_ALL",
                "PATH",
                "RALPH_STORY",
                "TMPDIR"
            ]
        );
    }

    #[test]
    fn another_backend_gets_its_own_and_not_claudes() {
        let e = allowed_env(
            &host(),
            &["OPENAI_*", "CODEX_*"],
            &[],
            &Settings::default(),
            false,
        );
        assert!(names(&e).contains(&"OPENAI_API_KEY"));
        assert!(!names(&e).contains(&"ANTHROPIC_API_KEY"));
    }

    #[test]
    fn pass_and_set_add_and_set_wins() {
        let s = Settings {
            pass: vec!["MY_TOOL_*".into(), "NPM_TOKEN".into()],
            set: vec![
                ("HOME".into(), "/elsewhere".into()),
                ("X".into(), "1".into()),
            ],
            ..Settings::default()
        };
        let e = allowed_env(&host(), &[], &[], &s, false);
        assert!(names(&e).contains(&"MY_TOOL_HOME"));
        assert!(names(&e).contains(&"NPM_TOKEN"));
        assert!(e.contains(&("HOME".into(), "/elsewhere".into())));
        assert!(e.contains(&("X".into(), "1".into())));
        assert!(!names(&e).contains(&"GITHUB_TOKEN"));
    }

    #[test]
    fn a_tracker_token_is_kept_out_and_redacted() {
        let e = allowed_env(&host(), &[], &[], &Settings::default(), false);
        for name in TRACKER_SECRETS {
            assert!(!names(&e).contains(name), "{name} reaches a child");
        }
        assert_eq!(tracker_secret_values(&host()), ["ghp_0123456789"]);
    }

    #[test]
    fn inside_bubblewrap_tmp_is_private_and_claude_is_told() {
        let e = allowed_env(&host(), &[], &[], &Settings::default(), true);
        assert!(e.contains(&("TMPDIR".into(), "/tmp".into())));
        assert!(e.contains(&("IS_SANDBOX".into(), "1".into())));
        let outside = allowed_env(&host(), &[], &[], &Settings::default(), false);
        assert!(!names(&outside).contains(&"IS_SANDBOX"));
    }

    #[test]
    fn secrets_are_what_children_may_receive_and_look_secret() {
        let s = Settings {
            pass: vec!["NPM_TOKEN".into()],
            set: vec![("EXTRA_API_KEY".into(), "set-key-0123".into())],
            redact: vec!["MY_TOOL_HOME".into()],
            ..Settings::default()
        };
        let v = secret_values(&host(), &["ANTHROPIC_*"], &s);
        assert_eq!(
            v,
            [
                "/opt/tool",
                "npm-0123456789",
                "set-key-0123",
                "sk-ant-0123456789"
            ]
        );
    }

    #[test]
    fn modes() {
        let works = || Probe::Works;
        let missing = || Probe::Missing;
        let d = decide(Mode::Auto, true, works).unwrap();
        assert!(d.confine && d.seal);
        assert!(d.why.starts_with("bwrap"));
        let d = decide(Mode::Auto, true, missing).unwrap();
        assert!(!d.confine && d.seal);
        assert!(unconfined_warning(&d)
            .unwrap()
            .contains("apt-get install bubblewrap"));
        assert!(decide(Mode::Bwrap, true, missing)
            .unwrap_err()
            .contains("not installed"));
        assert!(
            decide(Mode::Bwrap, true, || Probe::Broken("no userns".into()))
                .unwrap_err()
                .contains("no userns")
        );
        let d = decide(Mode::Off, true, || panic!("no probe when off")).unwrap();
        assert!(!d.confine && !d.seal);
        assert_eq!(unconfined_warning(&d), None);
        let d = decide(Mode::Auto, false, || panic!("no probe off Linux")).unwrap();
        assert!(!d.confine && d.seal);
        assert!(decide(Mode::Bwrap, false, works).is_err());
    }

    #[test]
    fn mode_names_round_trip() {
        for m in [Mode::Auto, Mode::Bwrap, Mode::Off] {
            assert_eq!(Mode::parse(m.name()), Some(m));
        }
        assert_eq!(Mode::parse("docker"), None);
    }

    #[test]
    fn an_agent_in_the_repository_runs_from_the_worktree() {
        let (repo, work) = (Path::new("/p"), Path::new("/p/.ralph/worktrees/slot-1"));
        assert_eq!(
            in_worktree(repo, Path::new("/p/bin/my-agent"), work),
            Some(PathBuf::from("/p/.ralph/worktrees/slot-1/bin/my-agent"))
        );
        assert_eq!(in_worktree(repo, Path::new("/usr/bin/claude"), work), None);
        assert_eq!(in_worktree(repo, Path::new("/p"), work), None);
        assert_eq!(in_worktree(repo, Path::new("/pp/agent"), work), None);
    }
}
