//! Test fixtures: real git repositories in temp dirs, a fake agent that is a
//! real executable first on PATH, and the built `ralph` binary.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tempfile::TempDir;

pub const RALPH: &str = env!("CARGO_BIN_EXE_ralph");

/// Shared bash helpers every fake agent starts with. The agent reads the
/// prompt from stdin like Claude Code, finds its story on the first line, and
/// speaks stream-json.
pub const AGENT_PRELUDE: &str = r#"#!/bin/bash
PROMPT_FILE="$(mktemp)"
cat > "$PROMPT_FILE"
ID="$(sed -n 's/.*implement Story \([^:]*\):.*/\1/p' "$PROMPT_FILE" | head -1)"
N="${RALPH_ATTEMPT:-1}"
esc() { printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g'; }
say() { printf '{"type":"assistant","message":{"content":[{"type":"text","text":"%s"}]}}\n' "$(esc "$1")"; }
tool() { printf '{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"%s"}}]}}\n' "$(esc "$1")"; }
tool_result() { printf '{"type":"user","message":{"content":[{"type":"tool_result","content":"%s","is_error":false}]}}\n' "$(esc "$1")"; }
result() { printf '{"type":"result","subtype":"success","is_error":%s,"result":"%s","num_turns":2,"total_cost_usd":0.01,"usage":{"input_tokens":100,"output_tokens":20,"cache_creation_input_tokens":5,"cache_read_input_tokens":7}}\n' "${2:-false}" "$(esc "$1")"; }
commit_file() { mkdir -p "$(dirname "$1")"; printf '%s\n' "${2:-$ID}" >> "$1"; git add -- "$1"; git commit -qm "feat(story-$ID): $1"; }
done_() { result "all good <ralph>DONE ${1:-$ID}</ralph>"; }
"#;

/// A fake agent's first lines that put the model ralph gave it
/// (`--model`) in `$M` (best of N's candidates are told apart by it).
pub const MODEL_AS_M: &str = r#"
M=""; prev=""
for a in "$@"; do [ "$prev" = "--model" ] && M="$a"; prev="$a"; done
"#;

pub struct Project {
    pub tmp: TempDir,
    pub root: PathBuf,
    pub bin: PathBuf,
    pub home: PathBuf,
    /// Scratch space outside the repo for agents to leave evidence in.
    pub scratch: PathBuf,
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub struct RunResult {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl RunResult {
    pub fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

impl std::fmt::Debug for RunResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

impl Project {
    /// An empty repository with one commit on `main`.
    pub fn new() -> Project {
        let mut tmp = tempfile::tempdir().expect("tempdir");
        // RALPH_TEST_KEEP=1 keeps every project for a post-mortem.
        if std::env::var_os("RALPH_TEST_KEEP").is_some() {
            tmp.disable_cleanup(true);
            eprintln!("keeping {}", tmp.path().display());
        }
        let root = tmp.path().join("proj");
        let bin = tmp.path().join("bin");
        let home = tmp.path().join("home");
        let scratch = tmp.path().join("scratch");
        for d in [&root, &bin, &home, &scratch] {
            fs::create_dir_all(d).unwrap();
        }
        git(&root, &["init", "-q", "-b", "main"]);
        git(&root, &["config", "user.name", "Test"]);
        git(&root, &["config", "user.email", "test@example.com"]);
        git(&root, &["config", "commit.gpgsign", "false"]);
        let p = Project {
            tmp,
            root,
            bin,
            home,
            scratch,
        };
        p.write("README.md", "demo\n");
        p
    }

    /// A project with `stories` (`id | title` lines, may include batch
    /// lines), one spec per story, and `config` as .ralph/config.json.
    /// Decomposition and the timeout postmortem are off unless `config`
    /// names them: each is one more agent run after a story fails for good
    /// or times out, which tests of retries and timeouts do not expect.
    pub fn with_backlog(queue: &str, config: &str) -> Project {
        let p = Project::new();
        p.write(".ralph/stories.txt", queue);
        p.write(".ralph/config.json", &quiet_extras(config));
        for line in queue.lines() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') || t.starts_with("x ") {
                continue;
            }
            let (id, title) = t
                .split_once('|')
                .map(|(a, b)| (a.trim(), b.trim()))
                .unwrap_or((t, ""));
            let epic = id.split('.').next().unwrap();
            p.write(
                &format!("specs/epic-{epic}/story-{id}-spec.md"),
                &format!("---\nid: \"{id}\"\ntitle: \"{title}\"\nstatus: pending\n---\n\n# Story {id}\n\nDo {title}.\n"),
            );
        }
        p
    }

    pub fn write(&self, rel: &str, content: &str) {
        let path = self.root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    /// Writes a file anywhere (the scratch HOME, say), making its directories.
    pub fn write_outside(&self, path: &Path, content: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.root.join(rel)).unwrap_or_default()
    }

    pub fn commit_all(&self, msg: &str) {
        git(&self.root, &["add", "-A"]);
        git(&self.root, &["commit", "-qm", msg]);
    }

    /// Installs the fake agent as `claude` first on PATH.
    pub fn agent(&self, body: &str) {
        self.agent_named("claude", body);
    }

    /// Installs a fake agent CLI called `command` (`codex`, say) first on
    /// PATH: the shared prelude, then `body`.
    pub fn agent_named(&self, command: &str, body: &str) {
        let path = self.bin.join(command);
        fs::write(&path, format!("{AGENT_PRELUDE}\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// A file the agents wrote under `scratch` (empty if there is none).
    pub fn scratch_text(&self, name: &str) -> String {
        fs::read_to_string(self.scratch.join(name)).unwrap_or_default()
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(RALPH);
        c.args(args)
            .current_dir(&self.root)
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    self.bin.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("CI", "1")
            .env("SCRATCH", &self.scratch)
            .env_remove("RALPH_ATTEMPT_TOKEN")
            .stdin(Stdio::null());
        c
    }

    /// `ralph` with these variables added to (or replacing) its environment.
    pub fn ralph_with(&self, args: &[&str], env: &[(&str, &str)]) -> RunResult {
        let mut c = self.command(args);
        for (k, v) in env {
            c.env(k, v);
        }
        self.run_to_end(c, args)
    }

    /// Runs ralph to completion. A run that hangs fails the test after
    /// five minutes instead of hanging the suite.
    pub fn ralph(&self, args: &[&str]) -> RunResult {
        self.run_to_end(self.command(args), args)
    }

    /// Runs `cmd` (a ralph command line made by `command`, then adjusted) to
    /// completion, with `ralph`'s five-minute guard.
    pub fn run_to_end(&self, mut cmd: Command, args: &[&str]) -> RunResult {
        use std::io::Read;
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ralph runs");
        let mut out_pipe = child.stdout.take().unwrap();
        let mut err_pipe = child.stderr.take().unwrap();
        let out_t = std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = out_pipe.read_to_end(&mut s);
            s
        });
        let err_t = std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = err_pipe.read_to_end(&mut s);
            s
        });
        let limit = std::time::Instant::now() + std::time::Duration::from_secs(300);
        let status = loop {
            if let Some(st) = child.try_wait().expect("wait") {
                break st;
            }
            if std::time::Instant::now() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!("ralph {args:?} did not finish within 5 minutes");
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        RunResult {
            code: status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out_t.join().unwrap_or_default()).into_owned(),
            stderr: String::from_utf8_lossy(&err_t.join().unwrap_or_default()).into_owned(),
        }
    }

    pub fn state(&self) -> serde_json::Value {
        serde_json::from_str(&self.read(".ralph/state.json")).expect("state.json parses")
    }

    pub fn completed(&self) -> Vec<String> {
        let mut v: Vec<String> = self.state()["completed_stories"]
            .as_array()
            .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    pub fn story(&self, id: &str) -> serde_json::Value {
        self.state()["stories"][id].clone()
    }

    /// The kinds (`first`, `fixup`, `redo`, …) of a story's recorded
    /// attempts, in order.
    pub fn kinds(&self, id: &str) -> Vec<String> {
        self.story(id)["history"]
            .as_array()
            .unwrap_or_else(|| panic!("story {id} has no history"))
            .iter()
            .map(|h| h["kind"].as_str().unwrap().to_string())
            .collect()
    }

    /// First-parent subjects of `main`, oldest first.
    pub fn main_subjects(&self) -> Vec<String> {
        let out = git(
            &self.root,
            &["log", "--first-parent", "--reverse", "--format=%s", "main"],
        );
        out.lines().map(str::to_string).collect()
    }

    pub fn merges_of(&self, id: &str) -> usize {
        self.main_subjects()
            .iter()
            .filter(|s| **s == format!("merge: story {id}"))
            .count()
    }

    pub fn worktrees(&self) -> Vec<String> {
        git(&self.root, &["worktree", "list", "--porcelain"])
            .lines()
            .filter_map(|l| l.strip_prefix("worktree ").map(str::to_string))
            .collect()
    }

    pub fn branches(&self, pattern: &str) -> Vec<String> {
        git(
            &self.root,
            &["branch", "--list", pattern, "--format=%(refname:short)"],
        )
        .lines()
        .map(str::to_string)
        .collect()
    }

    pub fn refs(&self, prefix: &str) -> Vec<String> {
        git(&self.root, &["for-each-ref", "--format=%(refname)", prefix])
            .lines()
            .map(str::to_string)
            .collect()
    }

    pub fn file_on_main(&self, rel: &str) -> Option<String> {
        let out = Command::new("git")
            .args(["show", &format!("main:{rel}")])
            .current_dir(&self.root)
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Every file under the project (except .git) with its content, plus
    /// every ref: what "nothing was changed" compares.
    pub fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
            for e in fs::read_dir(dir).unwrap() {
                let e = e.unwrap();
                let p = e.path();
                let rel = p.strip_prefix(base).unwrap().display().to_string();
                if rel == ".git" {
                    continue;
                }
                if p.is_dir() {
                    out.insert(format!("{rel}/"), Vec::new());
                    walk(base, &p, out);
                } else {
                    out.insert(rel, fs::read(&p).unwrap_or_default());
                }
            }
        }
        walk(&self.root, &self.root, &mut out);
        out.insert(
            "<refs>".into(),
            git(&self.root, &["for-each-ref"]).into_bytes(),
        );
        out.insert(
            "<status>".into(),
            git(&self.root, &["status", "--porcelain", "--ignored"]).into_bytes(),
        );
        out
    }
}

/// True while a process with this PID exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .next()
                .unwrap_or("");
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

pub fn pids_in(path: &Path) -> Vec<i32> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

pub const FAST_CONFIG: &str = r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 } }"#;

/// Waits (bounded) until `cond` holds: the event-driven way to sync with a
/// ralph run in another process.
pub fn wait_until(what: &str, limit: std::time::Duration, mut cond: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + limit;
    while !cond() {
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Waits (bounded by `limit`) for `child` to exit on its own; its status.
pub fn wait_for_exit(
    child: &mut std::process::Child,
    what: &str,
    limit: std::time::Duration,
) -> std::process::ExitStatus {
    let mut status = None;
    wait_until(what, limit, || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    status.expect("waited for it")
}

/// A live process holding `path` open, as git does with a lock file while
/// it runs (a `git commit` with its editor open, say); returns once it holds
/// it. Kill and wait for the child to let go.
pub fn hold_open(p: &Project, path: &Path) -> std::process::Child {
    let child = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec 3>'{}'; touch '{}/held'; exec sleep 1000",
            path.display(),
            p.scratch.display()
        ))
        .spawn()
        .unwrap();
    wait_until(
        "the lock holder",
        std::time::Duration::from_secs(30),
        || p.scratch.join("held").exists(),
    );
    child
}

/// `config` with `decomposition` and `postmortem` off where it does not set
/// them itself, added before its closing brace so the lines of the keys it
/// has do not move (a config that is not a JSON object is left as it is).
pub fn quiet_extras(config: &str) -> String {
    let Ok(serde_json::Value::Object(obj)) = serde_json::from_str::<serde_json::Value>(config)
    else {
        return config.to_string();
    };
    let mut extra = String::new();
    // The sandbox too: fake agents leave evidence under $SCRATCH and read
    // variables the tests set, which a sealed agent cannot; the sandbox's
    // own tests (`sandbox.rs`) turn it on.
    for (key, off) in [
        ("decomposition", "{ \"enabled\": false }"),
        ("postmortem", "{ \"enabled\": false }"),
        ("sandbox", "{ \"mode\": \"off\" }"),
    ] {
        if !obj.contains_key(key) {
            let sep = if obj.is_empty() && extra.is_empty() {
                ""
            } else {
                ", "
            };
            extra.push_str(&format!("{sep}\"{key}\": {off}"));
        }
    }
    let end = config.rfind('}').expect("a JSON object ends with }");
    format!("{}{extra}{}", &config[..end], &config[end..])
}

/// Every first-parent tip of `main` after `start` has a tree in `passed`
/// (the trees validation commands recorded: issue 34's invariant).
pub fn assert_every_tip_in(p: &Project, start: &str, passed: &std::collections::BTreeSet<String>) {
    let tips = git(
        &p.root,
        &["rev-list", "--first-parent", &format!("{start}..main")],
    );
    assert!(!tips.trim().is_empty(), "nothing landed");
    for c in tips.lines() {
        let tree = git(&p.root, &["rev-parse", &format!("{c}^{{tree}}")]);
        assert!(
            passed.contains(tree.trim()),
            "tip {c} ({}) has a tree no validation passed: {passed:?}",
            git(&p.root, &["log", "-1", "--format=%s", c]).trim()
        );
    }
}

/// The run's records, every run's, in order.
pub fn run_records(p: &Project) -> Vec<serde_json::Value> {
    let mut files: Vec<_> = fs::read_dir(p.root.join(".ralph/runs"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect::<Vec<serde_json::Value>>()
        })
        .collect()
}

/// Six independent stories in one batch, 1.1 to 1.6.
pub const SIX: &str = "\
# [batch:1]
1.1 | A
1.2 | B
1.3 | C
1.4 | D
1.5 | E
1.6 | F
";

/// Agent-side helpers: `mark S|E` appends `<S|E> <id> <attempt>` to
/// `$SCRATCH/markers` under `flock`; `wait_markers PATTERN N` waits
/// (bounded, 20 s) until `grep -c PATTERN` on the markers reaches N, and
/// notes a give-up in `$SCRATCH/waits`.
pub const MARKERS: &str = r#"
mark() { ( flock 9; echo "$1 $ID $N" >> "$SCRATCH/markers" ) 9>"$SCRATCH/lock"; }
wait_markers() {
  for _ in $(seq 1 400); do
    n=$(grep -c "$1" "$SCRATCH/markers" 2>/dev/null)
    [ "${n:-0}" -ge "$2" ] && return 0
    sleep 0.05
  done
  echo "$ID attempt $N: gave up waiting for $2 of '$1'" >> "$SCRATCH/waits"
}
"#;

/// `SIX` run with `-j 2` where 1.1 and 1.2 both append to `FEATURES.md`
/// (committed here) and the others commit a file of their own; 1.1 runs
/// until 1.3 to 1.6 have all started. Asserts the run ended 0 with all six
/// done; how the specs say which files they touch is the caller's.
pub fn run_two_on_features_md(p: &Project) {
    p.write("FEATURES.md", "# Features\n");
    p.commit_all("backlog");
    p.agent(&format!(
        r#"{MARKERS}
mark S
case "$ID" in
  1.1) wait_markers '^S 1\.[3-6] ' 4; echo "- feature $ID" >> FEATURES.md; git add FEATURES.md; git commit -qm "feat: $ID" ;;
  1.2) echo "- feature $ID" >> FEATURES.md; git add FEATURES.md; git commit -qm "feat: $ID" ;;
  *) commit_file "src/$ID.rs" ;;
esac
mark E
done_
"#
    ));
    let r = p.ralph(&["run", "--parallel", "-j", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed().len(), 6, "{r:?}");
}

/// Chromium's executable, or `None` (the test is skipped, with a word
/// saying that `what` is not checked in a browser) when it is not installed
/// outside CI; under CI a missing one fails.
pub fn chromium(what: &str) -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Some(p) = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        }) {
            return Some(p);
        }
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    assert!(
        !ci,
        "chromium is not installed: .ci/run installs it under CI=true"
    );
    crate::testenv::skip(&format!(
        "chromium is not installed (apt-get install chromium): {what} is not checked in a browser"
    ));
    None
}

/// A fake `codex` (for `p.agent_named("codex", CODEX_DONE)`): notes
/// `codex <id>` in `$SCRATCH/calls`, commits `src/<id>.txt` and says DONE
/// in Codex's JSON stream, with a few tokens.
pub const CODEX_DONE: &str = r#"echo "codex $ID" >> "$SCRATCH/calls"
commit_file "src/$ID.txt"
printf '{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"<ralph>DONE %s</ralph>"}}\n' "$ID"
printf '%s\n' '{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":5}}'"#;

/// An agent whose first attempt hits Claude Code's usage limit (one that
/// has already reset, so the run goes on at once) and whose next one
/// commits `src/<id>.txt` and says DONE.
pub const LIMITED_THEN_DONE: &str = r#"
if [ "$N" = "1" ]; then
  now=$(date +%s)
  printf '{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":%s,"rateLimitType":"five_hour"}}\n' "$((now - 10))"
  result "You've hit your session limit · resets 2:04pm (UTC)" true
  exit 1
fi
commit_file "src/$ID.txt"; done_
"#;

/// Agent lines that hit Claude Code's usage limit, reset in an hour: the
/// agent pauses for the rest of the test.
pub const LIMITED_FOR_AN_HOUR: &str = r#"
now=$(date +%s)
printf '{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":%s,"rateLimitType":"five_hour"}}\n' "$((now + 3600))"
result "You've hit your session limit" true
exit 1
"#;

/// Overwrites a generated spec with one that declares `depends_on`
/// (`deps` is the YAML value as written after `depends_on:`).
pub fn depends(p: &Project, id: &str, deps: &str) {
    let epic = id.split('.').next().unwrap();
    p.write(
        &format!("specs/epic-{epic}/story-{id}-spec.md"),
        &format!(
            "---\nid: \"{id}\"\nstatus: pending\ndepends_on: {deps}\n---\n\n# Story {id}\n\nDo it.\n"
        ),
    );
}

/// Each `candidate_end` record of the run (best of N, issue 36):
/// (candidate, outcome, winner), in candidate order.
pub fn candidate_ends(p: &Project) -> Vec<(u64, String, bool)> {
    let mut ends: Vec<(u64, String, bool)> = run_records(p)
        .iter()
        .filter(|r| r["ev"] == "candidate_end")
        .map(|r| {
            (
                r["candidate"].as_u64().unwrap(),
                r["outcome"].as_str().unwrap().to_string(),
                r["winner"].as_bool().unwrap(),
            )
        })
        .collect();
    ends.sort();
    ends
}
