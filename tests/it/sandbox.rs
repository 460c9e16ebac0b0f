//! Sealed attempts (issue 22): a fake agent tries each escape — read a
//! planted SSH key and a planted secret variable, write the main checkout,
//! another worktree, `.git/config`, `.git/hooks`, move `refs/heads/main`,
//! print its API key — and the story still lands its real work.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::harness::*;

const API_KEY: &str = "sk-ant-sandbox-test-0123456789abcdef";
const PLANTED: &str = "planted-secret-value-9876543210";
const SSH_KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY----- planted-ssh-key-material";

/// bubblewrap works here. In CI (`CI=true`) it must: `.ci/run` installs
/// it, and a sandbox test that silently skips proves nothing.
pub fn bwrap_works() -> bool {
    let ok = std::process::Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "true",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("bubblewrap is missing or broken, and CI=true: install bubblewrap");
        }
        crate::testenv::skip(
            "bubblewrap is missing or broken here (apt-get install bubblewrap; CI=true makes this a failure)",
        );
    }
    ok
}

/// The escapes, each leaving its outcome on stdout (which ralph logs),
/// then the real work.
const ESCAPES: &str = r#"
COMMON="$(git rev-parse --git-common-dir)"
case "$COMMON" in /*) ;; *) COMMON="$PWD/$COMMON" ;; esac
probe() { if eval "$2" >/dev/null 2>&1; then echo "ESCAPE $1 worked"; else echo "blocked $1"; fi; }
probe ssh "cat \"\$HOME/.ssh/id_rsa\""
cat "$HOME/.ssh/id_rsa" 2>/dev/null
echo "planted=${PLANTED_SECRET:-absent}"
echo "key=$ANTHROPIC_API_KEY"
probe see-main "cat \"$RALPH_PROJECT_DIR/README.md\""
probe see-state "cat \"$RALPH_PROJECT_DIR/.ralph/state.json\""
echo x > "$RALPH_PROJECT_DIR/escape.txt" 2>/dev/null
echo x >> "$RALPH_PROJECT_DIR/.ralph/state.json" 2>/dev/null
probe other-worktree "echo x > \"$RALPH_PROJECT_DIR/.ralph/worktrees/slot-1/escape.txt\""
probe git-config "git config --file \"$COMMON/config\" evil.key 1"
probe git-hooks "echo x > \"$COMMON/hooks/x\""
probe move-main "git update-ref refs/heads/main HEAD"
probe packed-refs "echo x >> \"$COMMON/packed-refs\""
probe kept-refs "git update-ref refs/ralph/evil HEAD"
commit_file "src/$ID.txt"
done_
"#;

fn sandbox_project(mode: &str) -> Project {
    let p = Project::with_backlog(
        "1.1 | First\n1.2 | Second\n",
        &format!(
            r#"{{ "loop": {{ "max_retries": 1, "grace_seconds": 1 }}, "sandbox": {{ "mode": "{mode}" }} }}"#
        ),
    );
    p.commit_all("backlog");
    p.write_outside(&p.home.join(".ssh/id_rsa"), SSH_KEY);
    p.agent(ESCAPES);
    p
}

/// Every file ralph wrote under `.ralph/` and the report, as text.
fn everything_ralph_wrote(p: &Project) -> String {
    fn walk(dir: &Path, out: &mut String) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.ends_with("worktrees") {
                continue;
            }
            if path.is_dir() {
                walk(&path, out);
            } else if let Ok(t) = fs::read_to_string(&path) {
                out.push_str(&t);
            }
        }
    }
    let mut out = String::new();
    walk(&p.root.join(".ralph"), &mut out);
    for f in ["progress.txt", "ralph.log"] {
        out.push_str(&fs::read_to_string(p.root.join(f)).unwrap_or_default());
    }
    out
}

fn logs(p: &Project) -> String {
    let mut out = String::new();
    for id in ["1.1", "1.2"] {
        out.push_str(
            &fs::read_to_string(p.root.join(format!(".ralph/logs/{id}/attempt-1.log")))
                .unwrap_or_default(),
        );
    }
    out
}

fn mode_of(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn every_escape_fails_inside_bwrap_and_the_work_still_lands() {
    if !bwrap_works() {
        return;
    }
    let p = sandbox_project("bwrap");
    let main_before = git(&p.root, &["rev-parse", "main"]);
    let config_before = fs::read_to_string(p.root.join(".git/config")).unwrap();
    let r = p.ralph_with(
        &["run", "--parallel", "-j", "2"],
        &[("ANTHROPIC_API_KEY", API_KEY), ("PLANTED_SECRET", PLANTED)],
    );
    assert_eq!(r.code, 0, "{r:?}\n{}", logs(&p));
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    for id in ["1.1", "1.2"] {
        assert_eq!(p.merges_of(id), 1);
        assert_eq!(
            p.file_on_main(&format!("src/{id}.txt")).as_deref(),
            Some(format!("{id}\n").as_str()),
            "the real work of {id} landed"
        );
    }
    let out = logs(&p);
    for escape in [
        "ssh",
        "see-main",
        "see-state",
        "other-worktree",
        "git-config",
        "git-hooks",
        "move-main",
        "packed-refs",
        "kept-refs",
    ] {
        assert!(
            out.contains(&format!("blocked {escape}")),
            "{escape}:\n{out}"
        );
        assert!(
            !out.contains(&format!("ESCAPE {escape}")),
            "{escape}:\n{out}"
        );
    }
    assert!(out.contains("planted=absent"), "{out}");
    assert!(
        out.contains("key=***"),
        "the key is redacted in the log: {out}"
    );
    // On the host: nothing moved but what the merge queue did; what the
    // agent wrote where the checkout would be went to its private tmpfs.
    assert!(!p.root.join("escape.txt").exists());
    assert!(!fs::read_to_string(p.root.join(".ralph/state.json"))
        .unwrap()
        .contains("\nx\n"));
    assert!(!p.root.join(".git/hooks/x").exists());
    assert_eq!(
        fs::read_to_string(p.root.join(".git/config")).unwrap(),
        config_before
    );
    assert!(p.refs("refs/ralph/evil").is_empty());
    let first_parent = git(&p.root, &["rev-list", "--first-parent", "main"]);
    assert!(
        first_parent.contains(main_before.trim()),
        "main only moved forward by landings"
    );
    let subjects = p.main_subjects();
    assert!(
        subjects[1..].iter().all(|s| s.starts_with("merge: story")),
        "{subjects:?}"
    );
    let all = everything_ralph_wrote(&p);
    for secret in [API_KEY, PLANTED, "planted-ssh-key-material"] {
        assert!(!all.contains(secret), "{secret} reached a file ralph wrote");
    }
    // Files that hold agent output are the user's alone.
    let logs_dir = p.root.join(".ralph/logs");
    assert_eq!(mode_of(&logs_dir), 0o700);
    assert_eq!(mode_of(&logs_dir.join("1.1")), 0o700);
    assert_eq!(mode_of(&logs_dir.join("1.1/attempt-1.log")), 0o600);
    let runs = p.root.join(".ralph/runs");
    assert_eq!(mode_of(&runs), 0o700);
    for e in fs::read_dir(&runs).unwrap().flatten() {
        assert_eq!(mode_of(&e.path()), 0o600, "{}", e.path().display());
    }
    let report = p.root.join(".ralph/report.html");
    if report.exists() {
        assert_eq!(mode_of(&report), 0o600);
    }
    // Nothing of the stand-ins is left behind.
    assert!(!p.root.join(".git/ralph-sandbox/slot-0").exists());
}

/// A PATH with everything of `/usr/bin` but bubblewrap.
fn path_without_bwrap(p: &Project) -> String {
    let dir = p.tmp.path().join("nobwrap");
    fs::create_dir_all(&dir).unwrap();
    for e in fs::read_dir("/usr/bin").unwrap().flatten() {
        if e.file_name() != "bwrap" {
            let _ = std::os::unix::fs::symlink(e.path(), dir.join(e.file_name()));
        }
    }
    format!("{}:{}", p.bin.display(), dir.display())
}

#[test]
fn without_bwrap_auto_still_seals_the_environment_and_warns_once() {
    let p = sandbox_project("auto");
    // Unconfined, the file escapes would work: only the environment's.
    p.agent(
        r#"
echo "planted=${PLANTED_SECRET:-absent}"
echo "key=$ANTHROPIC_API_KEY"
commit_file "src/$ID.txt"
done_
"#,
    );
    let path = path_without_bwrap(&p);
    let r = p.ralph_with(
        &["run", "--parallel", "-j", "2"],
        &[
            ("PATH", &path),
            ("ANTHROPIC_API_KEY", API_KEY),
            ("PLANTED_SECRET", PLANTED),
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    let warning = "agents are not confined";
    assert_eq!(r.all().matches(warning).count(), 1, "{r:?}");
    assert!(r.all().contains("apt-get install bubblewrap"), "{r:?}");
    let out = logs(&p);
    assert!(out.contains("planted=absent"), "{out}");
    assert!(out.contains("key=***"), "{out}");
    let all = everything_ralph_wrote(&p);
    for secret in [API_KEY, PLANTED] {
        assert!(!all.contains(secret), "{secret} reached a file ralph wrote");
    }
}

#[test]
fn bwrap_mode_without_bwrap_refuses_to_start() {
    let p = sandbox_project("bwrap");
    let path = path_without_bwrap(&p);
    let r = p.ralph_with(&["run"], &[("PATH", &path)]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("sandbox.mode is bwrap but bwrap is not installed"),
        "{r:?}"
    );
    assert!(r.stderr.contains("apt-get install bubblewrap"), "{r:?}");
    assert!(!p.root.join(".ralph/logs").exists(), "nothing ran");
}

#[test]
fn dry_run_names_the_mode_and_the_variables_but_no_value() {
    let p = sandbox_project("auto");
    let r = p.ralph_with(
        &["run", "-d"],
        &[("ANTHROPIC_API_KEY", API_KEY), ("PLANTED_SECRET", PLANTED)],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("[DRY RUN] sandbox: "), "{r:?}");
    let env_line = r
        .stdout
        .lines()
        .find(|l| l.contains("the claude agent's environment"))
        .unwrap_or_else(|| panic!("{r:?}"));
    for name in ["ANTHROPIC_API_KEY", "PATH", "HOME"] {
        assert!(env_line.contains(name), "{env_line}");
    }
    assert!(!env_line.contains("PLANTED_SECRET"), "{env_line}");
    assert!(!r.all().contains(API_KEY), "{r:?}");
}

#[test]
fn validate_reports_the_mode() {
    let p = sandbox_project("off");
    let r = p.ralph(&["validate"]);
    assert!(
        r.all().contains("sandbox: off (sandbox.mode is off)"),
        "{r:?}"
    );
}

#[test]
fn a_sandboxed_commit_is_on_the_story_branch_even_when_the_attempt_fails() {
    if !bwrap_works() {
        return;
    }
    let p = sandbox_project("bwrap");
    p.agent(
        r#"
commit_file "src/$ID.txt"
result "<ralph>FAIL $ID: not today</ralph>"
"#,
    );
    let r = p.ralph(&["run", "-s", "1.1"]);
    assert_eq!(r.code, 1, "{r:?}");
    // The failed attempt's commits are kept, as outside the sandbox.
    let kept = p.refs("refs/ralph/attempts/1.1/");
    assert_eq!(kept.len(), 1, "{kept:?}");
    let shown = git(&p.root, &["show", "--stat", "--format=%s", &kept[0]]);
    assert!(shown.contains("src/1.1.txt"), "{shown}");
}

/// Host processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<i32> {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
                && alive(*pid)
        })
        .collect()
}

/// A confined agent that hangs, with a background child in a session of
/// its own, times out, and nothing of it outlives the attempt.
#[test]
fn a_hanging_sandboxed_agent_times_out_and_nothing_survives() {
    if !bwrap_works() {
        return;
    }
    let p = Project::with_backlog(
        "1.1 | First\n",
        r#"{ "loop": { "max_retries": 1, "grace_seconds": 1, "idle_timeout_seconds": 1 }, "sandbox": { "mode": "bwrap" } }"#,
    );
    p.commit_all("backlog");
    p.agent(
        r#"
setsid sleep 864231 &
say "working"
sleep 864232
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.all().contains("No output for 1s"), "{r:?}");
    wait_until(
        "no sandboxed process left",
        std::time::Duration::from_secs(10),
        || processes_with("86423").is_empty(),
    );
}

/// Validation commands run sealed too: in the merge queue's worktree, with
/// the allowlisted environment, no view of $HOME, and without the network
/// when `sandbox.network` is false.
#[test]
fn validation_runs_sealed_and_offline() {
    if !bwrap_works() {
        return;
    }
    let p = Project::with_backlog(
        "1.1 | First\n",
        r#"{ "loop": { "max_retries": 1, "grace_seconds": 1 },
  "sandbox": { "mode": "bwrap", "network": false },
  "validation": { "commands": [ { "name": "sealed", "cmd": "test -f src/1.1.txt && ! test -e \"$HOME/.ssh/id_rsa\" && test -z \"$PLANTED_SECRET\" && test \"$(tail -n +3 /proc/net/dev | wc -l)\" = 1 && echo \"key=$ANTHROPIC_API_KEY\" && echo sealed-ok" } ] } }"#,
    );
    p.commit_all("backlog");
    p.write_outside(&p.home.join(".ssh/id_rsa"), SSH_KEY);
    p.agent(r#"commit_file "src/$ID.txt"; done_"#);
    let r = p.ralph_with(
        &["run"],
        &[("ANTHROPIC_API_KEY", API_KEY), ("PLANTED_SECRET", PLANTED)],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let log = p.read(".ralph/logs/1.1/validation-1.log");
    assert!(log.contains("sealed-ok"), "{log}");
    // A validation command gets no agent CLI's variables.
    assert!(log.contains("key=\n") || log.contains("key=\r\n"), "{log}");
}

/// A confined agent commits on its branch's stand-in; ralph is killed
/// before it could bring the commit home. The next run does, before
/// anything judges the branch: the commit is kept, not lost.
#[test]
fn commits_of_a_killed_sandboxed_run_are_kept() {
    if !bwrap_works() {
        return;
    }
    let p = Project::with_backlog(
        "1.1 | First\n",
        r#"{ "loop": { "max_retries": 2, "grace_seconds": 1 }, "sandbox": { "mode": "bwrap" } }"#,
    );
    p.commit_all("backlog");
    p.agent(
        r#"
if [ "$N" = 1 ]; then
  commit_file "src/first.txt"
  touch committed.marker
  sleep 1000
fi
commit_file "src/$ID.txt"
done_
"#,
    );
    let mut child = crate::crash::spawn(&p, &["run"]);
    let marker = p.root.join(".ralph/worktrees/slot-0/committed.marker");
    wait_until(
        "the agent committed",
        std::time::Duration::from_secs(60),
        || marker.exists(),
    );
    crate::crash::kill_session(child.id() as i32);
    let _ = child.wait();
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let all = git(&p.root, &["log", "--all", "--format=%s"]);
    assert!(all.contains("feat(story-1.1): src/first.txt"), "{all}");
    assert!(!p.root.join(".git/ralph-sandbox/slot-0").exists());
}

/// With the sandbox off, hooks and validation commands still never see a
/// tracker's token (issue 35), unless `sandbox.env.pass` names it: before,
/// they inherited ralph's whole environment, `GITHUB_TOKEN` included.
#[test]
fn a_trackers_token_reaches_no_unsealed_hook_or_validation_unless_passed() {
    for (pass, expect) in [("[]", "none"), (r#"["GITHUB_TOKEN"]"#, "tok-123")] {
        let p = Project::with_backlog(
            "1.1 | One\n",
            &format!(
                r#"{{"loop": {{"max_retries": 1, "grace_seconds": 1}},
  "sandbox": {{"mode": "off", "env": {{"pass": {pass}}}}},
  "hooks": {{"pre_iteration": "echo \"${{GITHUB_TOKEN:-none}}\" > \"$SCRATCH/hook\""}},
  "validation": {{"commands": [{{"name": "v", "cmd": "echo \"${{GITHUB_TOKEN:-none}}\" > \"$SCRATCH/validation\""}}]}}}}"#
            ),
        );
        p.commit_all("backlog");
        p.agent("commit_file \"src/$ID.txt\"\ndone_\n");
        let r = p.ralph_with(&["run"], &[("GITHUB_TOKEN", "tok-123")]);
        assert_eq!(r.code, 0, "{}", r.all());
        assert_eq!(p.scratch_text("hook").trim(), expect, "pass {pass}");
        assert_eq!(p.scratch_text("validation").trim(), expect, "pass {pass}");
    }
}
