//! The real agent CLIs, installed from npm at pinned versions into a cache
//! this suite owns (`target/agent-clis/`, or `RALPH_AGENT_CLIS`). Installed
//! once, reused by later runs; a file lock makes concurrent test processes
//! wait for one install instead of racing. Without npm or the registry the
//! tests that need a CLI say so and pass, except under `CI=true`, where a
//! missing CLI fails them.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One npm package and where its executable lands.
pub struct Cli {
    /// The cache directory's name.
    pub name: &'static str,
    pub package: &'static str,
    pub version: &'static str,
    /// Executables to try, relative to the install prefix, best first: the
    /// npm shim, then the platform package's native binary (for an npm that
    /// did not run the package's postinstall).
    pub bins: &'static [&'static str],
}

/// The versions `tests/fixtures/agents/` was recorded with
/// (`tests/record-agents.sh`).
pub const CLAUDE: Cli = Cli {
    name: "claude-code",
    package: "@anthropic-ai/claude-code",
    version: "2.1.197",
    bins: &[
        "node_modules/.bin/claude",
        "node_modules/@anthropic-ai/claude-code-linux-x64/claude",
        "node_modules/@anthropic-ai/claude-code-linux-arm64/claude",
    ],
};

pub const CODEX: Cli = Cli {
    name: "codex",
    package: "@openai/codex",
    version: "0.169.0",
    bins: &["node_modules/.bin/codex"],
};

/// How long one `npm install` may take (a first install downloads ~250 MB
/// per CLI).
const INSTALL_LIMIT: Duration = Duration::from_secs(900);

/// Where the CLIs are kept.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("RALPH_AGENT_CLIS") {
        Some(d) => PathBuf::from(d),
        // `<target>/tmp` for integration tests.
        None => Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("target dir")
            .join("agent-clis"),
    }
}

/// The executable of `cli`, installed first if needed. `None` (after saying
/// why on stderr) when it cannot be had; under `CI=true` that panics.
pub fn installed(cli: &Cli) -> Option<PathBuf> {
    static DONE: Mutex<Option<HashMap<&'static str, Result<PathBuf, String>>>> = Mutex::new(None);
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    let result = done
        .get_or_insert_with(HashMap::new)
        .entry(cli.name)
        .or_insert_with(|| install(cli))
        .clone();
    drop(done);
    match result {
        Ok(bin) => Some(bin),
        Err(why) if crate::testenv::under_ci() => {
            panic!(
                "the real {} CLI is needed in CI and could not be installed: {why}",
                cli.package
            )
        }
        Err(why) => {
            crate::testenv::skip(&format!("{why} (CI=true makes this a failure)"));
            None
        }
    }
}

fn install(cli: &Cli) -> Result<PathBuf, String> {
    let cache = cache_dir();
    fs::create_dir_all(&cache).map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
    let prefix = cache.join(format!("{}-{}", cli.name, cli.version));
    if let Some(bin) = working_bin(cli, &prefix) {
        return Ok(bin);
    }
    // Another test process may be installing it: wait for it, then look again.
    let lock = fs::File::create(cache.join(".install.lock"))
        .map_err(|e| format!("cannot create the install lock in {}: {e}", cache.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock the CLI cache: {e}"))?;
    if let Some(bin) = working_bin(cli, &prefix) {
        return Ok(bin);
    }
    let spec = format!("{}@{}", cli.package, cli.version);
    let _ = fs::remove_dir_all(&prefix);
    fs::create_dir_all(&prefix).map_err(|e| format!("cannot create {}: {e}", prefix.display()))?;
    eprintln!("installing {spec} into {} ...", prefix.display());
    let log = prefix.join("npm-install.log");
    let log_file = fs::File::create(&log).map_err(|e| e.to_string())?;
    let mut child = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg(&spec)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().map_err(|e| e.to_string())?)
        .stderr(log_file)
        .spawn()
        .map_err(|e| format!("cannot run npm to install {spec}: {e}"))?;
    let end = Instant::now() + INSTALL_LIMIT;
    let status = loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            break st;
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "npm install {spec} took over {}s (see {})",
                INSTALL_LIMIT.as_secs(),
                log.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if !status.success() {
        let tail: String = fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = tail.lines().rev().take(5).collect();
        return Err(format!(
            "npm install {spec} failed ({status}): {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        ));
    }
    working_bin(cli, &prefix).ok_or_else(|| {
        format!(
            "npm installed {spec} but none of {:?} under {} prints its version",
            cli.bins,
            prefix.display()
        )
    })
}

/// The first of the CLI's executables under `prefix` whose `--version`
/// names the pinned version.
fn working_bin(cli: &Cli, prefix: &Path) -> Option<PathBuf> {
    let home = tempfile::tempdir().ok()?;
    cli.bins.iter().map(|b| prefix.join(b)).find(|bin| {
        bin.exists()
            && Command::new(bin)
                .arg("--version")
                .env("HOME", home.path())
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output()
                .is_ok_and(|o| {
                    o.status.success() && String::from_utf8_lossy(&o.stdout).contains(cli.version)
                })
    })
}
