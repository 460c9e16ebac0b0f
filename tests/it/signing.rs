//! Repositories that sign their commits (`commit.gpgsign`, issue 21):
//! ralph's merges are signed as git signs them, and a setup that cannot sign
//! is the environment's fault, never a story's.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use crate::harness::*;

/// ssh signing with a throwaway key in the test's directory; `git
/// verify-commit` checks against an allowed signers file. Returns the key.
fn sign_with_ssh(p: &Project) -> PathBuf {
    let key = p.tmp.path().join("signing_key");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "test", "-f"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let public = fs::read_to_string(key.with_extension("pub")).unwrap();
    let allowed = p.tmp.path().join("allowed_signers");
    fs::write(&allowed, format!("test@example.com {public}")).unwrap();
    for (k, v) in [
        ("commit.gpgsign", "true".to_string()),
        ("gpg.format", "ssh".into()),
        ("user.signingkey", key.display().to_string()),
        ("gpg.ssh.allowedSignersFile", allowed.display().to_string()),
    ] {
        git(&p.root, &["config", k, &v]);
    }
    key
}

fn verified(p: &Project, rev: &str) -> bool {
    std::process::Command::new("git")
        .args(["verify-commit", rev])
        .current_dir(&p.root)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", &p.home)
        .status()
        .unwrap()
        .success()
}

#[test]
fn a_signing_repository_gets_merges_git_verifies() {
    let p = Project::with_backlog("1.1 | First\n1.2 | Second\n", FAST_CONFIG);
    p.commit_all("backlog");
    sign_with_ssh(&p);
    // 1.1's agent commits (its git signs, with the same setup); 1.2's
    // leaves its work for ralph to commit on the story branch.
    p.agent(
        "if [ \"$ID\" = 1.1 ]; then commit_file \"src/$ID.txt\"; else echo x > left.txt; fi\ndone_",
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    for n in 0..2 {
        let rev = format!("main~{n}");
        let subject = git(&p.root, &["log", "-1", "--format=%s", &rev]);
        assert!(subject.starts_with("merge: story"), "{subject}");
        assert!(verified(&p, &rev), "{rev} ({subject}) is not signed");
        assert!(verified(&p, &format!("{rev}^2")), "the story's commit");
    }
    let shown = git(&p.root, &["log", "-1", "--show-signature", "main"]);
    assert!(shown.contains("Good \"git\" signature"), "{shown}");
}

/// Before issue 21 the agent's `git commit` failed to sign, so its attempts
/// failed and were charged (and retried to the end).
#[test]
fn a_setup_that_cannot_sign_stops_before_any_agent_runs() {
    let p = Project::with_backlog("1.1 | First\n", FAST_CONFIG);
    p.commit_all("backlog");
    sign_with_ssh(&p);
    let missing = p.tmp.path().join("no-such-key");
    git(
        &p.root,
        &["config", "user.signingkey", &missing.display().to_string()],
    );
    p.agent(
        "echo ran >> \"$SCRATCH/runs\"\n\
         if commit_file \"src/$ID.txt\"; then done_; else result \"git commit failed\" true; exit 1; fi",
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 2, "{r:?}");
    let all = r.all();
    assert!(all.contains("commit.gpgsign"), "{all}");
    assert!(
        all.contains("no-such-key"),
        "the program's own words: {all}"
    );
    assert!(
        all.contains("hint:") && all.contains("user.signingkey"),
        "{all}"
    );
    assert_eq!(p.scratch_text("runs"), "", "no agent ran");
    // Nothing was changed, so there is no state to charge an attempt in.
    if p.root.join(".ralph/state.json").exists() {
        let charged = p.story("1.1")["attempts"].as_u64().unwrap_or(0);
        assert_eq!(charged, 0, "nothing charged");
    }
}

/// Signing that breaks during the run (an expired agent cache, say) stops
/// the merge queue, not the story: the work stays `landing`, nothing is
/// charged, and the next run lands it, signed, without the agent.
#[test]
fn a_merge_that_cannot_be_signed_waits_for_the_next_run() {
    let p = Project::with_backlog("1.1 | First\n", FAST_CONFIG);
    p.commit_all("backlog");
    sign_with_ssh(&p);
    let program = p.bin.join("flaky-ssh-keygen");
    fs::write(
        &program,
        "#!/bin/bash\nif [ -e \"$SCRATCH/broken\" ]; then echo 'agent refused operation' >&2; exit 255; fi\nexec ssh-keygen \"$@\"\n",
    )
    .unwrap();
    fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).unwrap();
    git(
        &p.root,
        &["config", "gpg.ssh.program", &program.display().to_string()],
    );
    p.agent(
        "echo ran >> \"$SCRATCH/runs\"\ncommit_file \"src/$ID.txt\"\ntouch \"$SCRATCH/broken\"\ndone_",
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    let all = r.all();
    assert!(all.contains("could not be signed"), "{all}");
    assert!(all.contains("agent refused operation"), "{all}");
    assert!(all.contains("user.signingkey"), "{all}");
    let s = p.story("1.1");
    assert_eq!(s["status"], "landing", "{s}");
    assert_eq!(
        s["attempts"].as_u64().unwrap_or(0),
        0,
        "nothing charged: {s}"
    );
    assert_eq!(p.merges_of("1.1"), 0);

    fs::remove_file(p.scratch.join("broken")).unwrap();
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), vec!["1.1"]);
    assert_eq!(p.scratch_text("runs"), "ran\n", "the agent ran once");
    assert!(verified(&p, "main"));
}
