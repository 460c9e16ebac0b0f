//! The git files a sealed agent writes (issue 31, items 1-3): ralph acts on
//! them outside the sandbox after the attempt, so each is an escape to
//! close. One test per escape the red team found: a signing program named
//! by a config the agent made, a host directory passed off as the
//! worktree, a FIFO where ralph reads refs, and the object store deleted.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::harness::*;
use crate::sandbox::bwrap_works;

fn sealed(queue: &str) -> Project {
    let p = Project::with_backlog(
        queue,
        r#"{ "loop": { "max_retries": 1, "grace_seconds": 1 }, "sandbox": { "mode": "bwrap" } }"#,
    );
    p.commit_all("backlog");
    p
}

fn log_of(p: &Project, id: &str) -> String {
    fs::read_to_string(p.root.join(format!(".ralph/logs/{id}/attempt-1.log"))).unwrap_or_default()
}

/// Every object of the repository, contents included (`git cat-file
/// --batch-all-objects`): loose, packed, reachable or not.
fn all_objects(root: &Path) -> String {
    let out = Command::new("git")
        .args(["cat-file", "--batch-all-objects", "--batch"])
        .current_dir(root)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn tracked_on_main(root: &Path) -> Vec<String> {
    git(root, &["ls-tree", "-r", "--name-only", "main"])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Where the agent finds its git directories, absolute.
const GIT_DIRS: &str = r#"
ADMIN="$(git rev-parse --absolute-git-dir)"
COMMON="$(git rev-parse --git-common-dir)"
case "$COMMON" in /*) ;; *) COMMON="$PWD/$COMMON" ;; esac
BRANCH="$(git symbolic-ref HEAD)"
"#;

#[test]
fn a_signing_program_the_agent_names_never_runs_outside_the_sandbox() {
    if !bwrap_works() {
        return;
    }
    let p = sealed("1.1 | First\n");
    // Outside the sandbox only: the program writes here if ralph runs it.
    let marker = p.tmp.path().join("ran-outside");
    let script = format!(
        r#"{GIT_DIRS}
cat > "$PWD/sign.sh" <<EOF
#!/bin/sh
echo "ran as \$(id -u)" >> "{marker}"
exit 1
EOF
chmod +x "$PWD/sign.sh"
mkdir -p "$PWD/hooks"
for h in pre-commit commit-msg post-commit reference-transaction; do cp "$PWD/sign.sh" "$PWD/hooks/$h"; done
cfg() {{
  printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n'
  printf '\tfsmonitor = %s\n\thooksPath = %s\n\tsshCommand = %s\n' "$PWD/sign.sh" "$PWD/hooks" "$PWD/sign.sh"
  printf '[commit]\n\tgpgsign = true\n[gpg]\n\tprogram = %s\n' "$PWD/sign.sh"
  printf '[gpg "openpgp"]\n\tprogram = %s\n[gpg "ssh"]\n\tprogram = %s\n' "$PWD/sign.sh" "$PWD/sign.sh"
}}
# A git directory of the agent's own, on the story branch's tip.
EVIL="$ADMIN/evil"
mkdir -p "$EVIL/refs/heads/ralph" "$EVIL/objects/info"
echo "$COMMON/objects" > "$EVIL/objects/info/alternates"
git rev-parse HEAD > "$EVIL/$BRANCH"
echo "ref: $BRANCH" > "$EVIL/HEAD"
cp "$ADMIN/index" "$EVIL/index"
cfg > "$EVIL/config"
cfg > "$ADMIN/config.worktree"
# Reached through the admin dir's commondir, then the worktree's .git file.
printf '%s\n' "$EVIL" > "$ADMIN/commondir" 2>/dev/null && echo "wrote commondir"
printf 'gitdir: %s\n' "$EVIL" > .git 2>/dev/null && echo "wrote .git"
echo "left by the agent" > left.txt
done_
"#,
        marker = marker.display()
    );
    p.agent(&script);
    let r = p.ralph(&["run"]);
    assert!(
        !marker.exists(),
        "a program the agent named ran outside the sandbox: {}\n{r:?}\n{}",
        fs::read_to_string(&marker).unwrap_or_default(),
        log_of(&p, "1.1")
    );
    assert_eq!(r.code, 0, "{r:?}\n{}", log_of(&p, "1.1"));
    assert_eq!(p.completed(), vec!["1.1"]);
    let ralph_log = fs::read_to_string(p.root.join("ralph.log")).unwrap_or_default();
    assert!(
        ralph_log.contains("config.worktree: git config in a slot's admin dir; removed"),
        "{ralph_log}"
    );
    assert_eq!(
        p.file_on_main("left.txt").as_deref(),
        Some("left by the agent\n"),
        "what the agent left is committed with the user's own settings"
    );
}

#[test]
fn a_rewritten_gitdir_brings_no_host_file_in_and_deletes_nothing() {
    if !bwrap_works() {
        return;
    }
    let p = sealed("1.1 | First\n");
    p.write("src/keep.txt", "tracked\n");
    p.commit_all("more files");
    let tracked = tracked_on_main(&p.root);
    let canary = "host-canary-5b1d0e77";
    let host = p.tmp.path().join("hostdir");
    p.write_outside(&host.join("canary.txt"), canary);
    let script = format!(
        r#"{GIT_DIRS}
printf '%s/.git\n' "{host}" > "$ADMIN/gitdir" 2>/dev/null && echo "wrote gitdir"
echo "left by the agent" > left.txt
done_
"#,
        host = host.display()
    );
    p.agent(&script);
    let r = p.ralph(&["run"]);
    let objects = all_objects(&p.root);
    assert!(
        !objects.contains(canary),
        "a host file reached the repository\n{r:?}\n{}",
        log_of(&p, "1.1")
    );
    // Nor in what any ref keeps (refs/ralph/* included): no path of it.
    for r in p.refs("refs/") {
        let files = git(&p.root, &["ls-tree", "-r", "--name-only", &r]);
        assert!(!files.contains("canary"), "{r}: {files}");
    }
    let now = tracked_on_main(&p.root);
    for f in &tracked {
        assert!(now.contains(f), "{f} was deleted from main: {now:?}\n{r:?}");
    }
    assert!(!now.iter().any(|f| f.contains("canary")), "{now:?}");
    assert_eq!(r.code, 0, "{r:?}\n{}", log_of(&p, "1.1"));
    assert_eq!(
        p.file_on_main("left.txt").as_deref(),
        Some("left by the agent\n")
    );
}

#[test]
fn a_fifo_in_the_ref_stand_in_hangs_neither_this_run_nor_the_next() {
    if !bwrap_works() {
        return;
    }
    let p = sealed("1.1 | First\n1.2 | Second\n");
    p.agent(&format!(
        r#"{GIT_DIRS}
if [ "$ID" = 1.1 ]; then
  mkfifo "$COMMON/refs/heads/ralph/zz-fifo" && echo "made a fifo"
  ln -s zz-fifo "$COMMON/refs/heads/ralph/zz-link"
  ln -s /dev/zero "$COMMON/refs/heads/ralph/zz-zero"
  mkfifo "$COMMON/logs/refs/heads/ralph/zz-fifo"
fi
commit_file "src/$ID.txt"
done_
"#
    ));
    let run = |args: &[&str]| {
        let mut child = p
            .command(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The issue's bound: the run ends by itself within 120 s of the
        // agent's exit. Past it the run hangs: kill it and fail.
        let mut status = None;
        let end = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while status.is_none() && std::time::Instant::now() < end {
            status = child.try_wait().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let hung = status.is_none();
        if hung {
            let _ = child.kill();
        }
        let status = child.wait().unwrap();
        assert!(
            !hung,
            "ralph {args:?} hung on the FIFO\n{}",
            log_of(&p, "1.1")
        );
        status
    };
    let first = run(&["run", "-s", "1.1"]);
    assert!(log_of(&p, "1.1").contains("made a fifo"));
    assert_eq!(first.code(), Some(0), "{}", log_of(&p, "1.1"));
    assert_eq!(p.completed(), vec!["1.1"]);
    let ralph_log = fs::read_to_string(p.root.join("ralph.log")).unwrap_or_default();
    assert!(
        ralph_log.contains("not a regular file (a FIFO)"),
        "the FIFO is a finding: {ralph_log}"
    );
    assert!(
        log_of(&p, "1.1").contains("ralph: sandbox finding:"),
        "and on the attempt's log"
    );
    let second = run(&["run"]);
    assert_eq!(second.code(), Some(0), "{}", log_of(&p, "1.2"));
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    assert_eq!(p.file_on_main("src/1.2.txt").as_deref(), Some("1.2\n"));
}

#[test]
fn an_agent_deleting_the_object_store_destroys_only_its_own_attempt() {
    if !bwrap_works() {
        return;
    }
    let p = sealed("1.1 | First\n");
    for i in 0..3 {
        p.write(&format!("history/{i}.txt"), &format!("{i}\n"));
        p.commit_all(&format!("history {i}"));
    }
    git(&p.root, &["gc", "-q"]);
    p.write("history/loose.txt", "loose\n");
    p.commit_all("a loose commit");
    assert!(fs::read_dir(p.root.join(".git/objects/pack"))
        .unwrap()
        .any(|e| e.unwrap().path().extension().is_some_and(|x| x == "pack")));
    let before: Vec<String> = git(&p.root, &["rev-list", "--all"])
        .lines()
        .map(str::to_string)
        .collect();
    p.agent(&format!(
        r#"{GIT_DIRS}
rm -f "$COMMON"/objects/??/* "$COMMON"/objects/pack/* 2>/dev/null
echo "packs left: $(ls "$COMMON/objects/pack" | wc -l)"
commit_file "src/$ID.txt"
done_
"#
    ));
    let r = p.ralph(&["run"]);
    let fsck = Command::new("git")
        .args(["fsck", "--connectivity-only"])
        .current_dir(&p.root)
        .output()
        .unwrap();
    assert!(
        fsck.status.success(),
        "git fsck: {}{}\n{r:?}\n{}",
        String::from_utf8_lossy(&fsck.stdout),
        String::from_utf8_lossy(&fsck.stderr),
        log_of(&p, "1.1")
    );
    for c in &before {
        git(&p.root, &["cat-file", "-p", c]);
    }
    assert_eq!(r.code, 0, "{r:?}\n{}", log_of(&p, "1.1"));
    assert_eq!(p.completed(), vec!["1.1"]);
    assert_eq!(p.file_on_main("src/1.1.txt").as_deref(), Some("1.1\n"));
    assert_eq!(
        p.file_on_main("history/loose.txt").as_deref(),
        Some("loose\n")
    );
}
