//! Crash safety (SPEC 6): kill -9 anywhere, Ctrl-C, orphaned agents, stale
//! locks, dirty checkouts, agents that leave their worktree in odd states.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::harness::*;

/// Starts `ralph args` in a session of its own (so the test can kill the
/// whole session, as a closed terminal or a crashed machine would).
pub(crate) fn spawn(p: &Project, args: &[&str]) -> Child {
    let mut c = p.command(args);
    // Kept for diagnosis: a torture failure is explained by what ralph said.
    let err = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p.scratch.join("ralph.stderr"))
        .expect("stderr file");
    c.stdout(Stdio::null()).stderr(err);
    // SAFETY: setsid is async-signal-safe and touches no shared state.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    c.spawn().expect("ralph starts")
}

/// Waits (bounded) for `child` to exit on its own and returns its status.
pub(crate) fn wait_exit(child: &mut Child, what: &str) -> std::process::ExitStatus {
    wait_for_exit(child, what, Duration::from_secs(60))
}

pub(crate) fn kill_session(sid: i32) {
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: getsid/kill have no memory-safety preconditions.
        unsafe {
            if libc::getsid(pid) == sid {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

fn count_lines(path: &Path) -> usize {
    fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// xorshift64*: a seeded, dependency-free random source.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const TORTURE_QUEUE: &str = "\
1.1 | Foundation
1.2 | Core
# [batch:1]
2.1 | A
2.2 | B
2.3 | C
2.4 | D
2.5 | E
# [batch:2]
3.1 | F
3.2 | G
3.3 | H
3.4 | I
3.5 | J
";

fn lock_files_in_git(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(d: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "lock") {
                out.push(p.display().to_string());
            }
        }
    }
    walk(&root.join(".git"), &mut out);
    out
}

#[test]
fn sigkill_at_random_moments_then_resume_lands_every_story_exactly_once() {
    let seed: u64 = std::env::var("RALPH_TORTURE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1234);
    let kills: usize = std::env::var("RALPH_TORTURE_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24);
    // How many ralph.log lines past a run's start a kill may land: larger
    // values reach deeper into a run (landings, cleanup).
    let spread: u64 = std::env::var("RALPH_TORTURE_SPREAD")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let p = Project::with_backlog(
        TORTURE_QUEUE,
        r#"{ "loop": { "max_retries": 50, "grace_seconds": 1 } }"#,
    );
    p.commit_all("backlog");
    // Agents work a little (so kills land mid-attempt), leave a background
    // process behind half the time, commit their own file and say DONE.
    p.agent(
        r#"
echo $$ >> "$SCRATCH/pids"
case "$ID" in *1|*4) d=0.6 ;; *2|*5) d=0.4 ;; *) d=0.3 ;; esac
sleep $d
if [ "$ID" = "2.2" ] || [ "$ID" = "3.3" ]; then
  setsid sleep 1000 < /dev/null > /dev/null 2>&1 &
  echo $! >> "$SCRATCH/pids"
fi
commit_file "src/$ID.txt"
sleep 0.05
done_
"#,
    );
    let log = p.root.join("ralph.log");
    let mut rng = Rng(seed);
    let mut survived = 0;
    let mut finished_early = 0;
    for _ in 0..kills {
        let before = count_lines(&log);
        let mut child = spawn(&p, &["run", "--parallel", "-j", "4"]);
        let pid = child.id() as i32;
        let target = before + 1 + rng.below(spread) as usize;
        let mut exited = None;
        wait_until("a kill point", Duration::from_secs(120), || {
            if let Ok(Some(st)) = child.try_wait() {
                exited = Some(st);
                return true;
            }
            count_lines(&log) >= target
        });
        if let Some(st) = exited {
            finished_early += 1;
            if st.code() == Some(0) {
                break;
            }
            // A run that gives up on its own after a crash is worth a look.
            let said = fs::read_to_string(p.scratch.join("ralph.stderr")).unwrap_or_default();
            let tail: Vec<&str> = said.lines().rev().take(6).collect();
            eprintln!(
                "torture: a run exited {:?} on its own; its last words: {tail:?}",
                st.code()
            );
            continue;
        }
        if rng.below(2) == 0 {
            // SAFETY: plain kill(2).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        } else {
            kill_session(pid);
        }
        let _ = child.wait();
        survived += 1;
    }
    let mut last = None;
    for _ in 0..5 {
        let r = p.ralph(&["run", "--parallel", "-j", "4"]);
        let done = r.code == 0;
        last = Some(r);
        if done {
            break;
        }
    }
    let last = last.unwrap();
    assert_eq!(
        last.code,
        0,
        "the backlog finishes after the crashes: {last:?}\n{}\n{}",
        p.read(".ralph/state.json"),
        p.read("progress.txt")
    );

    let ids = [
        "1.1", "1.2", "2.1", "2.2", "2.3", "2.4", "2.5", "3.1", "3.2", "3.3", "3.4", "3.5",
    ];
    let mut wasted = 0u64;
    for id in ids {
        assert_eq!(
            p.merges_of(id),
            1,
            "story {id} landed exactly once: {:?}",
            p.main_subjects()
        );
        assert_eq!(
            p.file_on_main(&format!("src/{id}.txt")).as_deref(),
            Some(format!("{id}\n").as_str())
        );
        wasted += p.story(id)["attempts_started"]
            .as_u64()
            .unwrap_or(1)
            .saturating_sub(1);
    }
    assert_eq!(p.completed(), ids.to_vec());
    assert_eq!(p.worktrees().len(), 1, "{:?}", p.worktrees());
    assert!(!p.root.join(".ralph/.lock").exists());
    assert!(
        lock_files_in_git(&p.root).is_empty(),
        "{:?}",
        lock_files_in_git(&p.root)
    );
    for pid in pids_in(&p.scratch.join("pids")) {
        assert!(!alive(pid), "agent process {pid} is still alive");
    }
    if spread <= 8 {
        // With the default spread every kill point lands inside a run.
        assert!(
            survived >= 20.min(kills),
            "only {survived} kill points were reached"
        );
    }
    eprintln!(
        "torture: seed {seed:#x}: {survived} kills survived ({finished_early} runs ended before their kill point), \
         0 stories lost or duplicated, {wasted} agent attempts beyond one per story"
    );
}

#[test]
fn ctrl_c_stops_agents_saves_state_and_resume_finishes() {
    let p = Project::with_backlog(
        "# [batch:1]\n1.1 | A\n1.2 | B\n1.3 | C\n",
        r#"{ "loop": { "grace_seconds": 2 } }"#,
    );
    p.commit_all("backlog");
    p.agent(
        r#"
echo $$ >> "$SCRATCH/pids"
if [ ! -e "$SCRATCH/release" ]; then
  touch "$SCRATCH/started-$ID"
  sleep 1000 &
  echo $! >> "$SCRATCH/pids"
  wait
fi
commit_file "src/$ID.txt"; done_
"#,
    );
    let mut child = spawn(&p, &["run", "--parallel", "-j", "2"]);
    wait_until("two agents running", Duration::from_secs(60), || {
        fs::read_dir(&p.scratch)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("started-"))
            .count()
            >= 2
    });
    let t = Instant::now();
    // SAFETY: plain kill(2).
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    let took = t.elapsed();
    assert_eq!(status.code(), Some(130));
    for pid in pids_in(&p.scratch.join("pids")) {
        assert!(!alive(pid), "agent process {pid} outlived ralph");
    }
    let st = p.state();
    for (id, rec) in st["stories"].as_object().unwrap() {
        assert_ne!(rec["status"], "running", "{id} left running");
        assert_eq!(
            rec["attempts"], 0,
            "an interrupted attempt does not count: {id}"
        );
    }
    assert!(!p.root.join(".ralph/.lock").exists());
    eprintln!(
        "ctrl-c: exit 130 {:.0} ms after SIGINT",
        took.as_secs_f64() * 1e3
    );
    fs::write(p.scratch.join("release"), "").unwrap();
    let r = p.ralph(&["run", "--parallel", "-j", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), vec!["1.1", "1.2", "1.3"]);
}

#[test]
fn a_second_concurrent_run_exits_3_at_once() {
    let p = Project::with_backlog("1.1 | A\n", "{}");
    p.commit_all("backlog");
    p.agent(
        r#"
touch "$SCRATCH/started"
for i in $(seq 1 6000); do [ -e "$SCRATCH/release" ] && break; sleep 0.01; done
commit_file "src/$ID.txt"; done_
"#,
    );
    let mut first = spawn(&p, &["run"]);
    wait_until("the first run's agent", Duration::from_secs(60), || {
        p.scratch.join("started").exists()
    });
    let second = p.ralph(&["run"]);
    assert_eq!(second.code, 3, "{second:?}");
    assert!(second.stderr.contains("another ralph run"), "{second:?}");
    assert!(second.stderr.contains("PID"), "{second:?}");
    // Read-only commands work during the run.
    let st = p.ralph(&["status"]);
    assert_eq!(st.code, 0);
    assert!(st.stdout.contains("Run in progress: yes"), "{st:?}");
    assert!(st.stdout.contains("Running: 1.1"), "{st:?}");
    assert_eq!(p.ralph(&["graph"]).code, 0);
    assert_eq!(p.ralph(&["validate"]).code, 0);
    fs::write(p.scratch.join("release"), "").unwrap();
    assert_eq!(first.wait().unwrap().code(), Some(0));
    assert_eq!(p.completed(), vec!["1.1"]);
}

/// A run SIGKILLed while it was forking a child leaves the OS lock with that
/// child until its exec closes the file. The torture test met this as runs
/// that exited 3 naming a dead PID; now the next run waits it out.
#[test]
fn a_lock_kept_open_by_a_dead_runs_child_is_waited_for_then_taken() {
    let p = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(r#"commit_file "src/$ID.txt"; done_"#);
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let lock = p.root.join(".ralph/.lock");
    fs::write(&lock, format!("{dead_pid}\n")).unwrap();
    let locked = p.scratch.join("locked");
    let mut holder = std::process::Command::new("flock")
        .arg("-x")
        .arg(&lock)
        .args(["sh", "-c", "touch \"$0\"; exec cat"])
        .arg(&locked)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the holder's lock", Duration::from_secs(60), || {
        locked.exists()
    });
    let mut run = spawn(&p, &["run"]);
    wait_until(
        "ralph to wait for the lock",
        Duration::from_secs(60),
        || {
            if let Ok(Some(st)) = run.try_wait() {
                panic!(
                    "ralph gave up instead of waiting ({st:?}): {}",
                    fs::read_to_string(p.scratch.join("ralph.stderr")).unwrap_or_default()
                );
            }
            fs::read_to_string(p.scratch.join("ralph.stderr"))
                .unwrap_or_default()
                .contains(&format!("its holder (PID {dead_pid}) is gone"))
        },
    );
    drop(holder.stdin.take());
    holder.wait().unwrap();
    let st = wait_exit(&mut run, "the run");
    assert_eq!(st.code(), Some(0));
    assert_eq!(p.merges_of("1.1"), 1);
}

#[test]
fn a_dirty_checkout_is_refused_with_the_file_list() {
    let p = Project::with_backlog("1.1 | A\n", "{}");
    p.write("notes.txt", "mine\n");
    p.commit_all("backlog");
    p.agent(r#"echo called >> "$SCRATCH/calls"; done_"#);
    p.write("README.md", "my own edit\n");
    p.write("notes.txt", "my other edit\n");
    p.write("untracked.txt", "fine\n");
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("README.md") && r.stderr.contains("notes.txt"),
        "{r:?}"
    );
    assert!(!r.stderr.contains("untracked.txt"));
    assert!(!p.scratch.join("calls").exists());
    assert_eq!(
        p.read("README.md"),
        "my own edit\n",
        "the user's work is untouched"
    );
}

#[test]
fn agents_that_leave_their_worktree_odd_lose_nothing() {
    let p = Project::with_backlog("1.1 | Branch\n1.2 | Detached\n1.3 | Dirty\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"
case "$ID" in
  1.1) git checkout -q -b agent-side-branch; commit_file "src/$ID.txt" ;;
  1.2) git checkout -q --detach; commit_file "src/$ID.txt" ;;
  1.3) commit_file "src/$ID.txt"; echo wip > notes-wip.txt; echo changed >> README.md ;;
esac
done_
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    for id in ["1.1", "1.2", "1.3"] {
        assert_eq!(p.merges_of(id), 1);
        assert!(
            p.file_on_main(&format!("src/{id}.txt")).is_some(),
            "{id}'s commit landed"
        );
    }
    let kept = p.refs("refs/ralph/attempts/1.3/");
    assert_eq!(
        kept,
        vec!["refs/ralph/attempts/1.3/1-uncommitted".to_string()]
    );
    let wip = git(
        &p.root,
        &[
            "show",
            "refs/ralph/attempts/1.3/1-uncommitted:notes-wip.txt",
        ],
    );
    assert_eq!(wip, "wip\n");
    // DONE means the work is on the branch: what 1.3's agent left
    // uncommitted was committed for it and landed (issue 14).
    assert_eq!(p.file_on_main("notes-wip.txt").as_deref(), Some("wip\n"));
    assert!(p.file_on_main("README.md").unwrap().ends_with("changed\n"));
    assert!(r.stderr.contains("[note] 1.3:"), "{r:?}");
}

#[test]
fn stale_git_locks_are_removed_but_held_ones_are_not() {
    let p = Project::with_backlog("1.1 | A\n", r#"{ "loop": { "max_retries": 1 } }"#);
    p.commit_all("backlog");
    p.agent(r#"commit_file "src/$ID.txt"; done_"#);
    // Left by a killed git: nobody holds them (the maintenance lock is what
    // a `git commit` killed during its automatic maintenance leaves).
    fs::write(p.root.join(".git/index.lock"), "").unwrap();
    fs::write(p.root.join(".git/objects/maintenance.lock"), "").unwrap();
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!p.root.join(".git/index.lock").exists());
    assert!(!p.root.join(".git/objects/maintenance.lock").exists());

    // Held open by a live process: left alone, and the landing waits for a person.
    let p = Project::with_backlog("1.1 | A\n", r#"{ "loop": { "max_retries": 1 } }"#);
    p.commit_all("backlog");
    p.agent(r#"commit_file "src/$ID.txt"; done_"#);
    let lock = p.root.join(".git/index.lock");
    let mut holder = hold_open(&p, &lock);
    let r = p.ralph(&["run"]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(
        lock.exists(),
        "a lock a live process holds is never removed"
    );
    assert!(p.completed().is_empty());
    holder.kill().unwrap();
    holder.wait().unwrap();
}

#[test]
fn a_landing_cut_short_in_the_main_checkout_is_rolled_back() {
    let p = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
    p.write("shared.txt", "base\n");
    p.commit_all("backlog");
    let base = git(&p.root, &["rev-parse", "HEAD"]).trim().to_string();
    // A merge commit whose checkout was half applied when ralph died.
    git(&p.root, &["checkout", "-q", "-b", "ralph/story-9.9"]);
    p.write("shared.txt", "from the merge\n");
    p.write("added.txt", "new\n");
    p.commit_all("story work");
    let side = git(&p.root, &["rev-parse", "HEAD"]).trim().to_string();
    git(&p.root, &["checkout", "-q", "main"]);
    let tree = git(&p.root, &["rev-parse", &format!("{side}^{{tree}}")])
        .trim()
        .to_string();
    let merge = git(
        &p.root,
        &[
            "commit-tree",
            &tree,
            "-p",
            &base,
            "-p",
            &side,
            "-m",
            "merge: story 9.9",
        ],
    )
    .trim()
    .to_string();
    git(
        &p.root,
        &["checkout", &merge, "--", "shared.txt", "added.txt"],
    );
    git(&p.root, &["branch", "-D", "ralph/story-9.9"]);
    p.write(
        ".ralph/landing.json",
        &format!(r#"{{"story":"9.9","base":"{base}","commit":"{merge}"}}"#),
    );
    p.agent(r#"commit_file "src/$ID.txt"; done_"#);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.read("shared.txt"), "base\n");
    assert!(!p.root.join("added.txt").exists());
    assert_eq!(p.merges_of("1.1"), 1);
    assert_eq!(
        git(&p.root, &["status", "--porcelain", "--untracked-files=no"]),
        ""
    );
}

/// Regression: after a kill, a story's branch is still checked out in the
/// slot it ran in; a resumed run that gives it another slot must free it
/// instead of failing every attempt at once.
#[test]
fn a_story_resumed_in_another_slot_takes_its_branch_back() {
    let p = Project::with_backlog(
        "# [batch:1]\n1.1 | A\n1.2 | B\n",
        r#"{ "loop": { "max_retries": 2 } }"#,
    );
    p.commit_all("backlog");
    p.agent(
        r#"
if [ ! -e "$SCRATCH/release" ]; then
  touch "$SCRATCH/started-$ID"
  exec sleep 1000
fi
commit_file "src/$ID.txt"; done_
"#,
    );
    let mut child = spawn(&p, &["run", "--parallel", "-j", "2"]);
    wait_until("both agents", Duration::from_secs(60), || {
        p.scratch.join("started-1.1").exists() && p.scratch.join("started-1.2").exists()
    });
    kill_session(child.id() as i32);
    let _ = child.wait();
    fs::write(p.scratch.join("release"), "").unwrap();
    let r = p.ralph(&["run", "--parallel", "-j", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), vec!["1.1", "1.2"]);
    assert_eq!(p.story("1.1")["attempts"], 0);
    assert_eq!(p.story("1.2")["attempts"], 0);
}

#[test]
fn work_reported_done_before_a_crash_is_landed_not_redone() {
    let p = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"
echo "$N" >> "$SCRATCH/calls"
commit_file "src/$ID.txt"
done_
[ "$N" = 1 ] && exec sleep 1000
"#,
    );
    let mut child = spawn(&p, &["run"]);
    wait_until("ralph to log the DONE", Duration::from_secs(60), || {
        p.read(".ralph/logs/1.1/attempt-1.log").contains("DONE 1.1")
    });
    kill_session(child.id() as i32);
    let _ = child.wait();
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert_eq!(
        fs::read_to_string(p.scratch.join("calls")).unwrap(),
        "1\n",
        "the agent ran once"
    );
}

#[test]
fn a_second_ctrl_c_kills_agents_that_ignore_sigterm() {
    let p = Project::with_backlog(
        "1.1 | Stubborn\n",
        r#"{ "loop": { "grace_seconds": 600 } }"#,
    );
    p.commit_all("backlog");
    p.agent(
        r#"
echo $$ >> "$SCRATCH/pids"
trap 'touch "$SCRATCH/got-term"' TERM
touch "$SCRATCH/started"
while true; do sleep 0.05; done
"#,
    );
    let mut child = spawn(&p, &["run"]);
    wait_until("the agent", Duration::from_secs(60), || {
        p.scratch.join("started").exists()
    });
    let pid = child.id() as i32;
    // SAFETY: plain kill(2).
    unsafe { libc::kill(pid, libc::SIGINT) };
    wait_until(
        "SIGTERM reaching the agent",
        Duration::from_secs(60),
        || p.scratch.join("got-term").exists(),
    );
    // SAFETY: plain kill(2).
    unsafe { libc::kill(pid, libc::SIGINT) };
    // Far less than the 600 s grace: only the second Ctrl-C can end it.
    let status = wait_exit(&mut child, "ralph to exit after the second Ctrl-C");
    assert_eq!(status.code(), Some(130));
    for pid in pids_in(&p.scratch.join("pids")) {
        assert!(!alive(pid), "agent {pid} survived");
    }
    assert_eq!(p.story("1.1")["status"], "pending");
}

#[test]
fn agents_orphaned_by_a_killed_run_are_stopped_and_no_one_elses() {
    let p = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"
if [ ! -e "$SCRATCH/release" ]; then
  echo $$ > "$SCRATCH/orphan"
  exec sleep 1000
fi
commit_file "src/$ID.txt"; done_
"#,
    );
    // A process of another project's ralph: same variable, other prefix.
    let mut decoy = std::process::Command::new("sleep")
        .arg("1000")
        .env("RALPH_ATTEMPT_TOKEN", "ralph-00000000-1-1.1-1")
        .spawn()
        .unwrap();
    let mut child = spawn(&p, &["run"]);
    // The shell creates the file before it writes the pid: wait for the pid.
    wait_until("the agent", Duration::from_secs(60), || {
        !pids_in(&p.scratch.join("orphan")).is_empty()
    });
    // SAFETY: plain kill(2): ralph alone dies, its agent lives on.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let orphan = pids_in(&p.scratch.join("orphan"))[0];
    assert!(alive(orphan), "the agent outlived the killed ralph");
    fs::write(p.scratch.join("release"), "").unwrap();
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!alive(orphan), "the orphaned agent was stopped");
    let log = p.read("ralph.log");
    assert!(
        log.contains("stopped 1 process(es) left by an earlier run"),
        "{log}"
    );
    assert!(
        alive(decoy.id() as i32),
        "a process that is not ours is never touched"
    );
    decoy.kill().unwrap();
    decoy.wait().unwrap();
    assert_eq!(p.merges_of("1.1"), 1);
}

/// A tool command that clears its environment (`env -i`) and starts a new
/// session carries neither the token nor the group: only the attempt's
/// cgroup still holds it, at the end of the attempt and after a kill -9.
#[test]
fn processes_that_clear_their_environment_are_stopped_too() {
    let p = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"
env -i /usr/bin/setsid /usr/bin/sleep 1000 < /dev/null > /dev/null 2>&1 &
echo $! >> "$SCRATCH/escapees"
if [ ! -e "$SCRATCH/release" ]; then
  touch "$SCRATCH/started"
  exec sleep 1000
fi
commit_file "src/$ID.txt"; done_
"#,
    );
    let mut child = spawn(&p, &["run"]);
    wait_until("the agent", Duration::from_secs(60), || {
        p.scratch.join("started").exists()
    });
    if p.read("ralph.log").contains("no writable cgroup") {
        crate::testenv::skip("no writable cgroup v2 here, and nothing else can find these");
        // SAFETY: plain kill(2) on our own children.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        for pid in pids_in(&p.scratch.join("escapees")) {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        return;
    }
    // SAFETY: plain kill(2): ralph alone dies, its agent lives on.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let first = pids_in(&p.scratch.join("escapees"))[0];
    assert!(alive(first), "the escapee outlived the killed ralph");
    fs::write(p.scratch.join("release"), "").unwrap();
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let escapees = pids_in(&p.scratch.join("escapees"));
    assert_eq!(escapees.len(), 2, "one per attempt");
    for pid in escapees {
        assert!(!alive(pid), "{pid} cleared its environment and survived");
    }
    let log = p.read("ralph.log");
    assert!(
        log.contains("stopped 2 process(es) left by an earlier run"),
        "{log}"
    );
    assert_eq!(p.merges_of("1.1"), 1);
}

/// Regression: a landing blocked by the user's file in the way used to leave
/// the run waiting forever (the story was back in the queue, but nothing may
/// start once a person is needed).
#[test]
fn a_landing_blocked_by_a_file_in_the_way_ends_the_run_and_keeps_both() {
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(r#"echo "$ID" >> "$SCRATCH/calls"; commit_file "src/$ID.txt" "agent's"; done_"#);
    p.write("src/1.1.txt", "the user's own file\n");
    let mut child = spawn(&p, &["run"]);
    let status = wait_exit(&mut child, "ralph to end the run");
    assert_eq!(status.code(), Some(1));
    let stderr = fs::read_to_string(p.scratch.join("ralph.stderr")).unwrap();
    assert!(
        stderr.contains("src/1.1.txt") && stderr.contains("commit or stash"),
        "{stderr}"
    );
    assert_eq!(p.read("src/1.1.txt"), "the user's own file\n");
    assert_eq!(p.main_subjects(), vec!["backlog"]);
    assert!(
        p.branches("ralph/story-1.1").len() == 1,
        "the story's work is kept on its branch"
    );
    // With the user's file out of the way, the next run lands the kept,
    // finished work instead of paying for the agent again (issue 9, 7).
    fs::rename(p.root.join("src/1.1.txt"), p.scratch.join("mine.txt")).unwrap();
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert_eq!(p.merges_of("1.2"), 1);
    let calls = fs::read_to_string(p.scratch.join("calls")).unwrap();
    assert_eq!(calls.matches("1.1").count(), 1, "{calls}");
}

#[test]
fn ctrl_c_during_a_slow_validation_stops_it_and_resume_lands_without_redoing() {
    let config = r#"{ "loop": { "grace_seconds": 1 }, "validation": { "commands": [
        { "name": "slow", "cmd": "touch \"$SCRATCH/validating\"; while [ ! -e \"$SCRATCH/release\" ]; do sleep 0.05; done", "required": true } ] } }"#;
    let p = Project::with_backlog("1.1 | A\n", config);
    p.commit_all("backlog");
    p.agent(r#"echo "$N" >> "$SCRATCH/calls"; commit_file "src/$ID.txt"; done_"#);
    let mut child = spawn(&p, &["run"]);
    wait_until("the validation command", Duration::from_secs(60), || {
        p.scratch.join("validating").exists()
    });
    // SAFETY: plain kill(2).
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_exit(&mut child, "ralph to stop the validation and exit");
    assert_eq!(status.code(), Some(130));
    assert_eq!(p.story("1.1")["status"], "landing");
    assert_eq!(p.main_subjects(), vec!["backlog"]);
    fs::write(p.scratch.join("release"), "").unwrap();
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert_eq!(
        fs::read_to_string(p.scratch.join("calls")).unwrap(),
        "1\n",
        "the agent ran once"
    );
}

/// Faults outside the story are not attempts (issue 9, finding 5): a spec
/// deleted mid-run and an agent binary gone mid-run stop the run cleanly
/// with one message, burn no retry, and the next run finishes once the
/// cause is gone, without `ralph reset`.
#[test]
fn faults_outside_the_story_stop_cleanly_and_burn_no_retries() {
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n1.3 | C\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"
echo "$ID" >> "$SCRATCH/calls"
if [ "$ID" = 1.1 ]; then rm "$RALPH_PROJECT_DIR/specs/epic-1/story-1.2-spec.md"; fi
if [ "$ID" = 1.2 ]; then mv "$0" "$SCRATCH/agent.away"; fi
commit_file "src/$ID.txt"; done_
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("cannot read the spec of story 1.2"),
        "{r:?}"
    );
    assert_eq!(p.story("1.2")["attempts"], 0, "{}", p.story("1.2"));
    assert_eq!(p.story("1.2")["status"], "pending");
    assert_eq!(p.merges_of("1.1"), 1);

    git(
        &p.root,
        &["checkout", "--", "specs/epic-1/story-1.2-spec.md"],
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("not found"), "{r:?}");
    assert_eq!(p.merges_of("1.2"), 1);
    assert_eq!(p.story("1.3")["attempts"], 0, "{}", p.story("1.3"));

    fs::rename(p.scratch.join("agent.away"), p.bin.join("claude")).unwrap();
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.completed(), vec!["1.1", "1.2", "1.3"]);
}

/// An agent that deletes its worktree's `.git` file cannot make its git act
/// on the main repository (the slots live inside it), and its slot is
/// rebuilt for the next attempt (issue 9, finding 5).
#[test]
fn an_agent_that_deletes_its_worktree_git_file_cannot_touch_the_main_repository() {
    let p = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(
        r#"
if [ "$N" = 1 ]; then
  rm -f .git
  echo evil > evil.txt
  git add -A 2>/dev/null
  git commit -qm "evil commit" 2>/dev/null
  result "<ralph>FAIL 1.1: broke my checkout</ralph>"
  exit 0
fi
commit_file "src/$ID.txt"; done_
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let log = git(&p.root, &["log", "--all", "--format=%s"]);
    assert!(!log.contains("evil commit"), "{log}");
    assert_eq!(
        git(&p.root, &["status", "--porcelain", "--untracked-files=no"]),
        ""
    );
    assert_eq!(p.merges_of("1.1"), 1);
    assert!(p.file_on_main("evil.txt").is_none());
}

/// A `ralph/story-<id>` branch with commits ralph has no record of is
/// kept under a ref before ralph reuses the name, and the user is told
/// where (issue 9, finding 9: it used to be moved and deleted silently).
#[test]
fn a_story_branch_with_foreign_commits_is_kept_and_reported() {
    let p = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
    p.commit_all("backlog");
    git(&p.root, &["checkout", "-q", "-b", "ralph/story-1.1"]);
    p.write("mine.txt", "the user's work\n");
    p.commit_all("my own work on this branch");
    git(&p.root, &["checkout", "-q", "main"]);
    let tip = git(&p.root, &["rev-parse", "ralph/story-1.1"]);
    p.agent(r#"commit_file "src/$ID.txt"; done_"#);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let kept: Vec<String> = p
        .refs("refs/ralph/attempts/1.1/")
        .into_iter()
        .filter(|r| r.contains("/saved-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(git(&p.root, &["rev-parse", &kept[0]]), tip);
    assert!(
        r.stderr.contains("ralph/story-1.1") && r.stderr.contains(&kept[0]),
        "{r:?}"
    );
    assert_eq!(p.merges_of("1.1"), 1);
}

/// An agent that moves the target itself (`git update-ref` from its
/// worktree) is caught: the run stops, leaves the target as it is, says
/// what happened and how to undo it, and counts no attempt (issue 9, 4).
#[test]
fn an_agent_that_moves_the_target_itself_stops_the_run() {
    let p = Project::with_backlog("1.1 | A\n1.2 | B\n", FAST_CONFIG);
    p.commit_all("backlog");
    let before = git(&p.root, &["rev-parse", "main"]).trim().to_string();
    p.agent(
        r#"
echo "$ID" >> "$SCRATCH/calls"
commit_file "src/$ID.txt"
if [ "$ID" = 1.1 ] && [ ! -e "$SCRATCH/once" ]; then
  touch "$SCRATCH/once"
  git update-ref refs/heads/main HEAD
fi
done_
"#,
    );
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 1, "{r:?}");
    let agents = git(&p.root, &["rev-parse", "main"]).trim().to_string();
    assert_ne!(agents, before);
    let undo = format!("git update-ref refs/heads/main {before} {agents}");
    assert!(r.stderr.contains(&undo), "{r:?}");
    assert!(!r.all().contains("[run ] 1.2"), "{r:?}");
    assert_eq!(p.scratch_text("calls"), "1.1\n", "1.2 never started: {r:?}");
    assert_eq!(p.story("1.1")["attempts"], 0);
    assert!(p.completed().is_empty());
    // The user undoes it as told; the next run lands both, validated.
    let args: Vec<&str> = undo.split(' ').skip(1).collect();
    git(&p.root, &args);
    git(&p.root, &["reset", "-q", "--hard"]);
    let r = p.ralph(&["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.merges_of("1.1"), 1);
    assert_eq!(p.merges_of("1.2"), 1);
}

/// A usage-limit pause is kept in state.json: `status` shows it, and a run
/// restarted during it waits instead of respawning the agent into the quota
/// (issue 10).
#[test]
fn a_usage_limit_pause_survives_a_restart() {
    let p = Project::with_backlog("1.1 | A\n", FAST_CONFIG);
    p.commit_all("backlog");
    p.agent(&format!(
        "echo \"$N\" >> \"$SCRATCH/calls\"\n{LIMITED_FOR_AN_HOUR}"
    ));
    let mut child = spawn(&p, &["run"]);
    let state = p.root.join(".ralph/state.json");
    wait_until("the pause in state.json", Duration::from_secs(60), || {
        fs::read_to_string(&state).is_ok_and(|s| s.contains("paused_until"))
    });
    // SAFETY: plain kill(2).
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(wait_exit(&mut child, "ralph to stop").code(), Some(130));
    let r = p.ralph(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(v["paused_until"]["claude"].is_string(), "{v}");
    assert!(p
        .ralph(&["status"])
        .stdout
        .contains("Paused: the claude agent"));

    let mut again = spawn(&p, &["run"]);
    let log = p.scratch.join("ralph.stderr");
    wait_until(
        "the restarted run to say it waits",
        Duration::from_secs(60),
        || fs::read_to_string(&log).is_ok_and(|s| s.contains("usage limit resets in")),
    );
    unsafe { libc::kill(again.id() as i32, libc::SIGINT) };
    assert_eq!(wait_exit(&mut again, "ralph to stop").code(), Some(130));
    assert_eq!(
        fs::read_to_string(p.scratch.join("calls")).unwrap(),
        "1\n",
        "the agent was not respawned into the quota"
    );
    assert_eq!(p.story("1.1")["attempts"], 0);
}
