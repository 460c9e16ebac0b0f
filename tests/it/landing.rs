//! Landing while the user works in the main checkout (issue 9): their
//! commits, their uncommitted edits and their other worktrees must come
//! through any number of landings intact.
//!
//! The user is a real process (bash running git) racing a real `-j 2` run.
//! It starts once the first agent has (a file in `$SCRATCH` says so) and
//! stops when the test creates `$SCRATCH/stop` after ralph exited. Each test
//! runs `RALPH_RACE_ROUNDS` rounds (default 1) and reports every round that
//! went wrong before failing, so before/after figures come from one command.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::harness::*;

/// Stories per round: enough landings for the user to race.
const STORIES: usize = 16;

/// Tracked files besides the backlog: a landing on a repo this size takes
/// long enough for a user's git to land in the middle of it.
const FILLER: usize = 1500;

/// What a story's agent writes into `story/<id>.txt`, and what the user
/// overwrites it with: the same length, so only a content check tells them apart.
const AGENT_TEXT: &str = "story";
const USER_TEXT: &str = "USER!";

fn rounds() -> usize {
    std::env::var("RALPH_RACE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

/// A project of `STORIES` independent stories (one batch, so `-j 2` runs
/// two at once); each story adds `story/<id>.txt`.
fn project() -> (Project, Vec<String>) {
    let ids: Vec<String> = (1..=STORIES).map(|i| format!("1.{i}")).collect();
    let mut queue = String::from("# [batch:1]\n");
    for id in &ids {
        queue.push_str(&format!("{id} | Story {id}\n"));
    }
    let p = Project::with_backlog(&queue, FAST_CONFIG);
    for i in 0..FILLER {
        p.write(&format!("src/m{}/f{i:04}.txt", i % 30), &format!("{i}\n"));
    }
    p.commit_all("backlog");
    p.agent(&format!(
        r#"touch "$SCRATCH/started-$ID"; commit_file "story/$ID.txt" "{AGENT_TEXT}"; done_"#
    ));
    (p, ids)
}

/// `ralph run --parallel -j 2` in the background, its output kept in `$SCRATCH`.
fn spawn_run(p: &Project) -> Child {
    let out = fs::File::create(p.scratch.join("ralph.out")).unwrap();
    let err = fs::File::create(p.scratch.join("ralph.err")).unwrap();
    p.command(&["run", "--parallel", "-j", "2"])
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("ralph starts")
}

/// The user: `script` run by bash in the main checkout, with the same
/// git environment ralph gets.
fn spawn_user(p: &Project, script: &str) -> Child {
    Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(&p.root)
        .env("HOME", &p.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("SCRATCH", &p.scratch)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(p.scratch.join("user.err")).unwrap())
        .spawn()
        .expect("bash starts")
}

fn wait_exit(child: &mut Child, what: &str) -> i32 {
    wait_for_exit(child, what, Duration::from_secs(120))
        .code()
        .unwrap_or(-1)
}

/// Runs ralph with `user` racing it; returns ralph's exit code and output.
fn race(p: &Project, user: &str) -> (i32, String) {
    let mut ralph = spawn_run(p);
    // The dirty-checkout check at start-up must not see the user's work:
    // the user starts once an agent runs.
    wait_until("the first agent to start", Duration::from_secs(60), || {
        fs::read_dir(&p.scratch).unwrap().flatten().any(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("started-"))
        })
    });
    let mut user = spawn_user(p, user);
    let code = wait_exit(&mut ralph, "ralph to finish");
    fs::write(p.scratch.join("stop"), "").unwrap();
    wait_exit(&mut user, "the user's loop to stop");
    let output = format!(
        "{}\n{}\nuser stderr:\n{}",
        fs::read_to_string(p.scratch.join("ralph.out")).unwrap_or_default(),
        fs::read_to_string(p.scratch.join("ralph.err")).unwrap_or_default(),
        fs::read_to_string(p.scratch.join("user.err")).unwrap_or_default()
    );
    (code, output)
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn git_ok(dir: &Path, args: &[&str]) -> bool {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// Fails the test with every round's problems once all rounds ran.
fn report(what: &str, failures: Vec<(usize, Vec<String>)>, n: usize) {
    let bad: Vec<String> = failures
        .iter()
        .filter(|(_, problems)| !problems.is_empty())
        .map(|(round, problems)| format!("round {round}:\n  {}", problems.join("\n  ")))
        .collect();
    eprintln!("{what}: {} of {n} rounds went wrong", bad.len());
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The user adds and commits new files in a loop while stories land. git's
/// own lock protocol makes some of their commands fail (`index.lock` or the
/// branch's lock exists, HEAD moved under `git commit`): like a person, the
/// loop retries.
///
/// The commit names its path (`git commit -- <file>`): that form holds
/// `index.lock` until HEAD has moved. A bare `git commit` reads the index
/// before it takes the lock and writes that copy back before it moves HEAD;
/// ralph outlasts such a process before it lets go of the lock
/// (`a_bare_git_commit_straddling_a_landing_reverts_nothing`, and
/// `benches/race-user-commits.sh` for the loop).
const USER_COMMITS: &str = r#"
i=0
mkdir -p user
while [ ! -e "$SCRATCH/stop" ]; do
  i=$((i+1))
  f="user/u$i.txt"
  echo "user file $i" > "$f"
  tries=0
  until git add -- "$f" && git commit -qm "user $i" -- "$f"; do
    tries=$((tries+1))
    if [ "$tries" -ge 500 ]; then echo "$i" >> "$SCRATCH/user-gave-up"; break; fi
    sleep 0.01
  done
  [ "$tries" -lt 500 ] && echo "$i" >> "$SCRATCH/user-commits"
  # A person's pace, give or take: a loop with no pause at all commits
  # between every merge and its landing, five times in a row, and the
  # merge queue gives the story up as "kept moving".
  sleep 0.05
done
"#;

#[test]
fn a_user_committing_in_the_main_checkout_while_stories_land_loses_nothing() {
    let n = rounds();
    let mut failures = Vec::new();
    for round in 1..=n {
        let (p, ids) = project();
        let (code, output) = race(&p, USER_COMMITS);
        let mut problems = Vec::new();
        if code != 0 {
            problems.push(format!("ralph exited {code}:\n{output}"));
        }
        for id in &ids {
            let m = p.merges_of(id);
            if m != 1 {
                problems.push(format!("merge: story {id} is on main {m} times"));
            }
        }
        let committed = lines(&p.scratch.join("user-commits"));
        if committed.is_empty() {
            problems.push("the user never managed to commit".into());
        }
        for i in lines(&p.scratch.join("user-gave-up")) {
            problems.push(format!("the user could not commit user/u{i}.txt"));
        }
        let log = git(&p.root, &["log", "--format=%s", "main"]);
        for i in &committed {
            let rel = format!("user/u{i}.txt");
            if p.read(&rel) != format!("user file {i}\n") {
                problems.push(format!("{rel}, committed by the user, is gone from disk"));
            }
            if !git_ok(&p.root, &["cat-file", "-e", &format!("main:{rel}")]) {
                problems.push(format!("{rel} is not in main's tree"));
            }
            if !log.lines().any(|s| s == format!("user {i}")) {
                problems.push(format!("the user's commit 'user {i}' is not on main"));
            }
        }
        // Nothing a story wrote may sit uncommitted (or be committed by the
        // user) outside its own merge commit.
        for id in &ids {
            let rel = format!("story/{id}.txt");
            let introduced = git(
                &p.root,
                &["log", "--format=%s", "--diff-filter=A", "main", "--", &rel],
            );
            if introduced.lines().any(|s| s.starts_with("user ")) {
                problems.push(format!("{rel} was committed by the user, not landed"));
            }
        }
        let status = git(&p.root, &["status", "--porcelain"]);
        if !status.is_empty() {
            problems.push(format!("the main checkout is not clean:\n{status}"));
        }
        let again = p.ralph(&["run"]);
        if again.code != 0 {
            problems.push(format!("the next ralph run failed: {again:?}"));
        }
        failures.push((round, problems));
    }
    report("user-commit race", failures, n);
}

/// The user overwrites each story's file, the moment it lands in the main
/// checkout, with content of the same length.
fn user_edits(ids: &[String]) -> String {
    let list = ids.join(" ");
    format!(
        r#"
for id in {list}; do
  f="story/$id.txt"
  c=
  # Builtins only: the user reacts within microseconds of the landing.
  until [ "$c" = "{AGENT_TEXT}" ]; do
    [ -e "$SCRATCH/stop" ] && exit 0
    c=
    read -r c 2>/dev/null < "$f"
  done
  echo "{USER_TEXT}" > "$f"
  echo "$id" >> "$SCRATCH/user-edited"
done
"#
    )
}

#[test]
fn an_edit_made_while_stories_land_stays_visible_to_git() {
    let n = rounds();
    let mut failures = Vec::new();
    for round in 1..=n {
        let (p, ids) = project();
        let (code, output) = race(&p, &user_edits(&ids));
        let mut problems = Vec::new();
        if code != 0 {
            problems.push(format!("ralph exited {code}:\n{output}"));
        }
        let status = git(&p.root, &["status", "--porcelain"]);
        let mut edited = 0;
        for id in &ids {
            let rel = format!("story/{id}.txt");
            let on_disk = p.read(&rel);
            let on_main = p.file_on_main(&rel);
            if on_main.is_none() {
                problems.push(format!("story {id} did not land"));
                continue;
            }
            if Some(&on_disk) == on_main.as_ref() {
                continue;
            }
            edited += 1;
            if !status.lines().any(|l| l == format!(" M {rel}")) {
                problems.push(format!(
                    "{rel} holds the user's edit but git status does not show it:\n{status}"
                ));
            }
        }
        if edited == 0 {
            problems.push("the user edited no landed file".into());
        }
        failures.push((round, problems));
    }
    report("hidden-edit race", failures, n);
}

#[test]
fn a_target_branch_checked_out_in_another_worktree_is_refused_before_anything_runs() {
    let p = Project::new();
    p.write(
        "prd.json",
        r#"{
  "branchName": "feature",
  "userStories": [
    { "id": "US-001", "title": "First", "description": "Start", "acceptanceCriteria": ["works"], "priority": 1, "passes": false }
  ]
}
"#,
    );
    p.commit_all("prd");
    git(&p.root, &["branch", "feature"]);
    let second = p.tmp.path().join("second");
    git(
        &p.root,
        &["worktree", "add", "-q", second.to_str().unwrap(), "feature"],
    );
    let tip = git(&p.root, &["rev-parse", "feature"]);
    p.agent(r#"echo "$ID" >> "$SCRATCH/calls"; commit_file "src/$ID.txt"; done_"#);

    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 2, "{r:?}");
    let second_canon = second.canonicalize().unwrap();
    assert!(
        r.stderr.contains(&second_canon.display().to_string()),
        "the message names the worktree: {r:?}"
    );
    assert!(r.stderr.contains("feature"), "{r:?}");
    assert!(!p.scratch.join("calls").exists(), "no agent ran");
    assert_eq!(git(&p.root, &["rev-parse", "feature"]), tip);
    assert_eq!(git(&second, &["status", "--porcelain"]), "");
    assert!(!p.root.join(".ralph/state.json").exists(), "nothing ran");

    // Detaching that worktree's HEAD frees the branch: the run lands there.
    git(&second, &["switch", "-q", "--detach"]);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(git(&p.root, &["log", "--format=%s", "feature"]).contains("merge: story US-001"));
    assert_eq!(git(&second, &["status", "--porcelain"]), "");
}

#[test]
fn a_user_holding_the_index_lock_makes_the_landing_wait_not_fail() {
    let p = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(r#"commit_file "src/$ID.txt"; done_"#);
    // What `git commit` with its editor open looks like: a live process
    // with index.lock open.
    let lock = p.root.join(".git/index.lock");
    let mut holder = hold_open(&p, &lock);
    let mut ralph = spawn_run(&p);
    wait_until("the landing to wait", Duration::from_secs(60), || {
        p.read("ralph.log")
            .contains("is held by another git process; waiting")
    });
    // The user's commit ends: git removes its lock.
    fs::remove_file(&lock).unwrap();
    holder.kill().unwrap();
    holder.wait().unwrap();
    let code = wait_exit(&mut ralph, "ralph to finish");
    let out = fs::read_to_string(p.scratch.join("ralph.err")).unwrap_or_default();
    assert_eq!(code, 0, "{out}");
    assert_eq!(p.completed(), ["1.1"]);
    assert_eq!(p.merges_of("1.1"), 1);
    let rec = p.story("1.1");
    assert_eq!(rec["attempts_started"], 1, "{rec}");
    assert_eq!(rec["attempts"], 0, "no failed attempt counted: {rec}");
    assert!(!out.contains("[fail]"), "{out}");
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
}

/// A user's git that died leaves `index.lock` behind in the middle of a run
/// (issue 35, the soak's stray lock). While agents run git in their
/// worktrees, those gits once counted as possible holders, so the landing
/// waited them out and stopped the run for a person. Their worktrees have
/// indexes of their own: the lock is stale, removed, and the run lands.
#[test]
fn a_stray_index_lock_is_removed_while_agents_run_git_in_their_worktrees() {
    let p = Project::with_backlog("# [batch:1]\n1.1 | A\n1.2 | B\n", FAST_CONFIG);
    p.commit_all("backlog");
    // 1.2's `git commit` stays open in its worktree (its editor waits).
    let editor = p.scratch.join("editor.sh");
    fs::write(
        &editor,
        "#!/bin/sh\ntouch \"$SCRATCH/in-git\"\n\
         while [ ! -e \"$SCRATCH/release\" ]; do sleep 0.05; done\n\
         echo 'feat(story-1.2): B' > \"$1\"\n",
    )
    .unwrap();
    fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p.agent(
        r#"case "$ID" in
1.2) mkdir -p src; echo B > src/1.2.txt; git add src
     GIT_EDITOR="$SCRATCH/editor.sh" git commit -q; done_ ;;
*) while [ ! -e "$SCRATCH/in-git" ]; do sleep 0.05; done
   : > "$(git rev-parse --path-format=absolute --git-common-dir)/index.lock"
   commit_file "src/$ID.txt"; done_ ;;
esac"#,
    );
    let mut ralph = spawn_run(&p);
    let mut exited = None;
    wait_until(
        "1.1 to land or ralph to stop",
        Duration::from_secs(60),
        || {
            exited = ralph.try_wait().unwrap();
            exited.is_some()
                || (p.root.join(".ralph/state.json").exists()
                    && p.completed().contains(&"1.1".to_string()))
        },
    );
    fs::write(p.scratch.join("release"), "").unwrap();
    let code = wait_exit(&mut ralph, "ralph to finish");
    let err = fs::read_to_string(p.scratch.join("ralph.err")).unwrap_or_default();
    assert_eq!(code, 0, "{err}");
    assert_eq!(p.completed(), ["1.1", "1.2"]);
    assert!(!p.root.join(".git/index.lock").exists());
    assert!(
        p.read("ralph.log").contains("removed stale"),
        "{}",
        p.read("ralph.log")
    );
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
}

/// git's fsmonitor hook (protocol 2), which `git commit` runs while it
/// reads the index, before it takes `index.lock`: the first call says so
/// (`$SCRATCH/read`) and holds the commit there until ralph says it waits
/// for it, or until the landing is over (main moved, `index.lock` gone).
const STRADDLING_HOOK: &str = r#"#!/bin/sh
unset GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT
if [ ! -e "$SCRATCH/read" ]; then
  start="$(cat .git/refs/heads/main)"
  touch "$SCRATCH/read"
  i=0
  while [ "$i" -lt 3000 ]; do
    if grep -q "waiting for git process" ralph.log 2>/dev/null; then
      echo waited > "$SCRATCH/hook-saw"; break
    fi
    now="$(cat .git/refs/heads/main 2>/dev/null)"
    if [ -n "$now" ] && [ "$now" != "$start" ] && [ ! -e .git/index.lock ]; then
      echo landed > "$SCRATCH/hook-saw"; break
    fi
    i=$((i+1)); sleep 0.02
  done
fi
printf 'token\0/\0'
"#;

/// The user's bare `git commit` reads the index, a story lands, then the
/// commit takes `index.lock`: git writes back the index it read (without
/// the story) and fails on HEAD. Before the fix that stale index stayed, and
/// the user's next commit reverted the landed story.
#[test]
fn a_bare_git_commit_straddling_a_landing_reverts_nothing() {
    let p = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"touch "$SCRATCH/started"; commit_file "story/$ID.txt" "story work"
i=0; until [ -e "$SCRATCH/read" ] || [ "$i" -ge 3000 ]; do i=$((i+1)); sleep 0.02; done
done_"#,
    );
    let hook = p.scratch.join("fsmonitor.sh");
    fs::write(&hook, STRADDLING_HOOK).unwrap();
    fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut ralph = spawn_run(&p);
    wait_until("the agent to start", Duration::from_secs(60), || {
        p.scratch.join("started").exists()
    });
    p.write("user/one.txt", "one\n");
    git(&p.root, &["add", "user/one.txt"]);
    let fsmonitor = format!("core.fsmonitor={}", hook.display());
    let mut commit = spawn_user(
        &p,
        &format!("git -c '{fsmonitor}' commit -qm 'user one'; echo $? > \"$SCRATCH/commit-rc\""),
    );
    let code = wait_exit(&mut ralph, "ralph to finish");
    wait_exit(&mut commit, "the user's commit to end");
    let out = fs::read_to_string(p.scratch.join("ralph.err")).unwrap_or_default();
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        p.scratch_text("hook-saw"),
        "waited\n",
        "ralph waited for the commit held between its read and its lock"
    );
    // The user's next, ordinary commit.
    p.write("user/two.txt", "two\n");
    git(&p.root, &["add", "user/two.txt"]);
    git(&p.root, &["commit", "-qm", "user two"]);

    assert_eq!(p.completed(), ["1.1"]);
    assert_eq!(
        p.file_on_main("story/1.1.txt").as_deref(),
        Some("story work\n"),
        "the landed story is still on main: {}",
        git(&p.root, &["log", "--stat", "--format=%s", "-3", "main"])
    );
    for f in ["user/one.txt", "user/two.txt"] {
        assert!(p.file_on_main(f).is_some(), "{f}, the user's, is on main");
    }
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
}

/// A landed story's file removed again by a commit of the user's: the run
/// still counts the story as landed, but says loudly which commit undid
/// what (ralph.log, the run's records, after the summary).
#[test]
fn landed_work_a_later_user_commit_reverts_is_warned_about_naming_the_commit() {
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"touch "$SCRATCH/started-$ID"; commit_file "story/$ID.txt" "story work"
if [ "$ID" = 1.2 ]; then
  i=0; until [ -e "$SCRATCH/go" ] || [ "$i" -ge 3000 ]; do i=$((i+1)); sleep 0.02; done
fi
done_"#,
    );
    let out = fs::File::create(p.scratch.join("ralph.out")).unwrap();
    let err = fs::File::create(p.scratch.join("ralph.err")).unwrap();
    let mut ralph = p
        .command(&["run"])
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("ralph starts");
    wait_until("story 1.2 to start", Duration::from_secs(60), || {
        p.scratch.join("started-1.2").exists()
    });
    git(&p.root, &["rm", "-q", "story/1.1.txt"]);
    git(&p.root, &["commit", "-qm", "user: drop it"]);
    let by = git(&p.root, &["rev-parse", "HEAD"]);
    fs::write(p.scratch.join("go"), "").unwrap();
    let code = wait_exit(&mut ralph, "ralph to finish");
    let stderr = fs::read_to_string(p.scratch.join("ralph.err")).unwrap_or_default();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(p.completed().len(), 2);
    let short = &by.trim()[..12];
    let warning = format!(
        "warning: story 1.1 landed, but commit {short} (\"user: drop it\") on main set story/1.1.txt back"
    );
    assert!(stderr.contains(&warning), "{stderr}");
    assert!(p.read("ralph.log").contains("WARNING: story 1.1 landed"));
    let records: String = fs::read_dir(p.root.join(".ralph/runs"))
        .unwrap()
        .flatten()
        .map(|e| fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    assert!(records.contains(r#""ev":"reverted""#), "{records}");
    assert!(!stderr.contains("story 1.2 landed, but"), "{stderr}");
}

/// A validation command that commits to `main` in the main checkout, as a
/// user committing while each merge is validated does: every round's
/// validation is outrun. Before the merge was made again under the landing's
/// locks, the story never landed (the run stopped, "kept moving").
const USER_COMMITS_WHILE_VALIDATING: &str = r#"n=$(ls "$SCRATCH" | grep -c '^validated-'); touch "$SCRATCH/validated-$n"
cd "$RALPH_PROJECT_DIR" && mkdir -p user && echo "$n" > "user/u$n.txt" && git add user && git commit -qm "user $n""#;

fn validating_config(cmd: &str) -> String {
    let cmd = serde_json::to_string(cmd).unwrap();
    format!(
        r#"{{ "loop": {{ "max_retries": 2, "grace_seconds": 1 }},
      "validation": {{ "commands": [ {{ "name": "user", "cmd": {cmd}, "required": true }} ] }} }}"#
    )
}

fn validations(p: &Project) -> usize {
    fs::read_dir(&p.scratch)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with("validated-")
        })
        .count()
}

#[test]
fn a_user_committing_during_every_validation_does_not_starve_the_merge_queue() {
    let p = Project::with_backlog(
        "1.1 | A\n",
        &validating_config(USER_COMMITS_WHILE_VALIDATING),
    );
    p.commit_all("backlog");
    p.agent(r#"commit_file "story/$ID.txt" "story work"; done_"#);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), ["1.1"]);
    assert_eq!(
        validations(&p),
        1,
        "the validated merge landed on top of the user's commit"
    );
    assert_eq!(
        p.file_on_main("story/1.1.txt").as_deref(),
        Some("story work\n")
    );
    assert_eq!(p.file_on_main("user/u0.txt").as_deref(), Some("0\n"));
    // The merge sits on the user's commit, with the story's work as its
    // second parent, and the checkout agrees with the branch.
    assert_eq!(
        git(
            &p.root,
            &["log", "-2", "--first-parent", "--format=%s", "main"]
        ),
        "merge: story 1.1\nuser 0\n"
    );
    assert_eq!(
        git(&p.root, &["log", "-1", "--format=%s", "main^2"]),
        "feat(story-1.1): story/1.1.txt\n",
        "the story's commits are the merge's second parent"
    );
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
}

/// The user's commit touches a file the story changed too: the merge made
/// on it is another tree than the one validated, so it is validated again.
#[test]
fn a_user_commit_touching_the_storys_paths_during_validation_is_validated_again() {
    let once = r#"n=$(ls "$SCRATCH" | grep -c '^validated-'); touch "$SCRATCH/validated-$n"
if [ "$n" = 0 ]; then cd "$RALPH_PROJECT_DIR" && printf '1\n2\n3\n4\n5\n6\n7\n8\n9\nuser\n' > shared.txt && git commit -qam "user edit"; fi"#;
    let p = Project::with_backlog("1.1 | A\n", &validating_config(once));
    p.write("shared.txt", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n");
    p.commit_all("backlog");
    p.agent(
        r#"printf 'story\n2\n3\n4\n5\n6\n7\n8\n9\n10\n' > shared.txt; git commit -qam "story edit"; done_"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), ["1.1"]);
    assert_eq!(
        validations(&p),
        2,
        "the merge on the user's edit was validated"
    );
    assert_eq!(
        p.file_on_main("shared.txt").as_deref(),
        Some("story\n2\n3\n4\n5\n6\n7\n8\n9\nuser\n")
    );
    assert_eq!(git(&p.root, &["status", "--porcelain"]), "");
}
