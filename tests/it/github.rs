//! GitHub Issues as the backlog (issue 27), against a scripted REST API on
//! 127.0.0.1 (`github_api.rs`).

use std::fs;

use crate::github_api::{issue, Api, Server};
use crate::harness::*;

const TOKEN: &str = "test-token-0123456789";

fn project(api: Api) -> (Project, Server) {
    let p = Project::new();
    let server = Server::start(
        Api {
            token: TOKEN.into(),
            ..api
        },
        p.scratch.clone(),
    );
    p.write(
        ".ralph/config.json",
        &quiet_extras(&format!(
            r#"{{ "loop": {{ "max_retries": 1, "grace_seconds": 1 }},
  "backlog": {{ "source": "github",
    "github": {{ "repo": "o/r", "api_url": "{}", "poll_seconds": 0 }} }} }}"#,
            server.url
        )),
    );
    p.commit_all("config");
    (p, server)
}

fn run(p: &Project, args: &[&str]) -> RunResult {
    p.ralph_with(args, &[("GITHUB_TOKEN", TOKEN)])
}

/// `ralph ARGS` started in the background, its output not read.
fn spawn_run(p: &Project, args: &[&str]) -> std::process::Child {
    p.command(args)
        .env("GITHUB_TOKEN", TOKEN)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn backlog() -> Api {
    let mut issues = vec![
        issue(1, "The first.", &["ralph"]),
        issue(2, "Second, blocked by #1 natively.", &["ralph"]),
        issue(3, "Depends on #2", &["ralph"]),
        issue(4, "A parent: waits for its sub-issue #6.", &["ralph"]),
        issue(6, "A sub-issue.", &["ralph"]),
        issue(7, "This one fails.", &["ralph"]),
        issue(9, "Done before.", &["ralph"]),
        issue(10, "Depends on #9", &["ralph"]),
        issue(11, "Not a story.", &["bug"]),
    ];
    issues[1].blocked_by = vec![1];
    issues[3].sub_issues = vec![6];
    issues[6].open = false;
    let mut added = issue(8, "Added while the run runs.", &["ralph"]);
    added.blocked_by = vec![3];
    Api {
        issues: issues.into_iter().map(|i| (i.number, i)).collect(),
        to_add: Some(added),
        ..Api::default()
    }
}

/// Landing order of the stories, from the merge subjects on main.
fn landed(p: &Project) -> Vec<String> {
    let ids: Vec<String> = p
        .main_subjects()
        .iter()
        .filter_map(|s| s.strip_prefix("merge: story "))
        .map(|s| s.split_whitespace().next().unwrap_or_default().to_string())
        .collect();
    ids
}

#[test]
fn a_run_lands_issues_in_dependency_order_closes_them_and_takes_in_new_ones() {
    let (p, server) = project(backlog());
    // Story 1 adds issue 8 to the tracker while it runs; story 3's agent
    // takes the tracker down (every answer a 502) and story 6's brings it
    // back: nothing is lost meanwhile, and the run catches up.
    p.agent(
        r#"
env > "$SCRATCH/env-$ID"
case "$ID" in
  1) touch "$SCRATCH/add-issue" ;;
  3) touch "$SCRATCH/down" ;;
  6) rm -f "$SCRATCH/down"
     # Until ralph has read the issue added mid-run: the run must
     # not end before that read, however fast the stories land.
     while [ ! -e "$SCRATCH/listed" ]; do sleep 0.1; done ;;
  7) result "<ralph>FAIL 7: cannot</ralph>"; exit 0 ;;
esac
commit_file "src/$ID.txt"
done_
"#,
    );
    let r = run(&p, &["run"]);
    let order = landed(&p);
    let pos = |id: &str| {
        order
            .iter()
            .position(|x| x == id)
            .unwrap_or_else(|| panic!("{id} did not land: {order:?}\n{r:?}"))
    };
    assert!(pos("1") < pos("2") && pos("2") < pos("3"), "{order:?}");
    assert!(
        pos("6") < pos("4"),
        "a parent lands after its sub-issue: {order:?}"
    );
    assert!(
        pos("3") < pos("8"),
        "the issue added mid-run ran: {order:?}"
    );
    pos("10");
    assert!(!order.contains(&"9".to_string()), "a closed issue is done");
    assert!(
        !order.contains(&"11".to_string()),
        "an unlabelled issue is no story"
    );
    assert!(!order.contains(&"7".to_string()));
    assert_eq!(r.code, 1, "one story failed: {r:?}");
    for n in [1, 2, 3, 4, 6, 8, 10] {
        let i = server.issue(n);
        assert!(!i.open, "#{n} is closed: {i:?}");
        assert_eq!(i.comments.len(), 1, "#{n}: one comment: {i:?}");
        let log = git(
            &p.root,
            &["log", "--first-parent", "--format=%H %s", "main"],
        );
        let sha = log
            .lines()
            .find(|l| l.split_whitespace().nth(3) == Some(n.to_string().as_str()))
            .and_then(|l| l.split_whitespace().next())
            .unwrap()
            .to_string();
        assert!(
            i.comments[0].contains(sha.trim()),
            "#{n}: {:?} names {sha}",
            i.comments
        );
        assert!(
            !i.labels.iter().any(|l| l.starts_with("ralph:")),
            "#{n} keeps no status label: {:?}",
            i.labels
        );
    }
    let failed = server.issue(7);
    assert!(failed.open);
    assert!(
        failed.labels.contains(&"ralph:failed".to_string()),
        "{failed:?}"
    );
    assert!(!failed.labels.contains(&"ralph:running".to_string()));
    assert!(server.issue(9).comments.is_empty());
    // The writes queued while the tracker was down were all made.
    let pending = p.read(".ralph/tracker/pending.json");
    assert_eq!(pending.trim(), "[]", "{pending}");
    // The token reached no agent and no file ralph wrote.
    for id in ["1", "3", "6"] {
        let env = p.scratch_text(&format!("env-{id}"));
        assert!(!env.is_empty());
        assert!(!env.contains(TOKEN), "the token reached agent {id}");
    }
    for f in walk(&p.root.join(".ralph")) {
        let text = fs::read(&f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&text).contains(TOKEN),
            "{} holds the token",
            f.display()
        );
    }
    // The API was down for a while: some requests got a 502.
    assert!(
        p.read("ralph.log").contains("502"),
        "{}",
        p.read("ralph.log")
    );
    let st = run(&p, &["status"]);
    assert!(!st.stdout.contains("pending (made by"), "{st:?}");
}

#[test]
fn an_unreachable_tracker_keeps_its_writes_for_the_next_run_and_status_says_so() {
    let (p, server) = project(backlog());
    // The tracker goes down during story 1 and stays down: the run goes on
    // over the snapshot, and every write waits in the queue.
    p.agent(
        r#"
case "$ID" in
  1) touch "$SCRATCH/down" ;;
  7) result "<ralph>FAIL 7: cannot</ralph>"; exit 0 ;;
esac
commit_file "src/$ID.txt"
done_
"#,
    );
    let r = run(&p, &["run"]);
    assert!(landed(&p).contains(&"10".to_string()), "{r:?}");
    assert!(server.issue(1).open, "no write reached the tracker yet");
    let st = run(&p, &["status"]);
    assert_eq!(st.code, 0, "{st:?}");
    assert!(
        st.stdout.contains("writes to GitHub o/r pending") && st.stdout.contains("#2: close"),
        "{st:?}"
    );
    // Back up: the next command that runs makes them (a run with nothing
    // left to do but the failed story, which `-s` retries).
    fs::remove_file(p.scratch.join("down")).unwrap();
    p.agent("commit_file \"src/$ID.txt\"\ndone_\n");
    let r = run(&p, &["run", "-s", "7"]);
    assert_eq!(r.code, 0, "{r:?}");
    for n in [1, 2, 3, 4, 6, 7, 10] {
        let i = server.issue(n);
        assert!(!i.open, "#{n} closed after the tracker came back: {i:?}");
        assert_eq!(i.comments.len(), 1, "#{n}: {:?}", i.comments);
    }
}

#[test]
fn an_unchanged_backlog_costs_one_conditional_request_and_a_rate_limit_is_honoured() {
    let (p, server) = project(backlog());
    p.agent("done_");
    let v = run(&p, &["validate"]);
    assert_eq!(v.code, 0, "{v:?}");
    let first = server.log().len();
    let v = run(&p, &["validate", "--online"]);
    assert_eq!(v.code, 0, "{v:?}");
    let again: Vec<String> = server.log()[first..].to_vec();
    assert_eq!(again.len(), 1, "one 304 for the one page: {again:?}");
    // A rate limit: the snapshot stands, and nothing is asked before the reset.
    server.api.lock().unwrap().rate_limit_reset = Some(4_000_000_000);
    let g = run(&p, &["validate", "--online"]);
    assert_eq!(g.code, 0, "{g:?}");
    let limited = server.log().len();
    let s = run(&p, &["stories"]);
    assert_eq!(s.code, 0, "{s:?}");
    assert!(s.stdout.contains("Issue 10"), "{s:?}");
    assert_eq!(
        server.log().len(),
        limited,
        "nothing asked before the reset"
    );
}

/// A tracker that takes connections and never answers (issues 33, 35):
/// reads answer from the snapshot without asking it anything (`status`
/// took 20.9 s before), the run lands from the snapshot with its reads
/// and writes left on the tracker's own thread, and Ctrl-C ends it.
#[test]
fn a_tracker_that_hangs_holds_up_neither_the_reads_nor_the_run() {
    let (p, server) = project(backlog());
    // Story 1's agent waits to be let go, so the run below is under way
    // (reading and writing on the hung tracker) when it is stopped.
    p.agent(
        r#"touch "$SCRATCH/started-$ID"
while [ ! -e "$SCRATCH/go" ]; do sleep 0.05; done
commit_file "src/$ID.txt"
done_
"#,
    );
    // The first read takes the snapshot the rest go by.
    let v = run(&p, &["validate"]);
    assert_eq!(v.code, 0, "{v:?}");
    fs::write(p.scratch.join("hang"), "").unwrap();
    let asked = server.log().len();
    for cmd in [&["status"][..], &["stories"], &["graph"], &["validate"]] {
        let r = run(&p, cmd);
        assert_eq!(r.code, 0, "{cmd:?}: {r:?}");
    }
    assert!(run(&p, &["stories"]).stdout.contains("Issue 10"));
    assert_eq!(
        server.log()[asked..],
        [] as [String; 0],
        "reads asked the tracker"
    );
    let mut child = spawn_run(&p, &["run", "-s", "1"]);
    wait_until(
        "story 1's agent",
        std::time::Duration::from_secs(120),
        || p.scratch.join("started-1").exists(),
    );
    // SAFETY: a signal to the child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = wait_for_exit(
        &mut child,
        "ralph to stop",
        std::time::Duration::from_secs(120),
    );
    assert_eq!(status.code(), Some(130));
    assert!(
        p.scratch.join("hang").exists(),
        "the run ended while the tracker still hung"
    );
    // Back up: the next run lands the story and tells the tracker.
    fs::remove_file(p.scratch.join("hang")).unwrap();
    fs::write(p.scratch.join("go"), "").unwrap();
    let r = run(&p, &["run", "-s", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!server.issue(1).open, "#1 closed once the tracker answered");
}

#[test]
fn a_dependency_on_an_issue_without_the_label_fails_validation_naming_both() {
    let mut api = backlog();
    api.issues.get_mut(&3).unwrap().body = "Depends on #11".into();
    let (p, _server) = project(api);
    let v = run(&p, &["validate"]);
    assert_eq!(v.code, 2, "{v:?}");
    assert!(
        v.all().contains("o/r#3") && v.all().contains("#11"),
        "{v:?}"
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn work_kept_for_review_is_labelled_for_review_and_stays_open() {
    let api = Api {
        issues: [(1, issue(1, "Reviewed.", &["ralph"]))].into(),
        ..Api::default()
    };
    let (p, server) = project(api);
    let config = p.read(".ralph/config.json");
    p.write(
        ".ralph/config.json",
        &config.replacen(
            "\"backlog\"",
            "\"landing\": { \"mode\": \"review\" }, \"backlog\"",
            1,
        ),
    );
    p.commit_all("review mode");
    p.agent("commit_file \"src/$ID.txt\"\ndone_\n");
    // A run in review mode waits for the review unless told not to.
    let r = run(&p, &["run", "--exit-on-review"]);
    assert!(r.code == 0 || r.code == 1, "{r:?}");
    let i = server.issue(1);
    assert!(i.open, "{i:?}");
    assert!(i.comments.is_empty(), "{i:?}");
    assert!(
        i.labels.contains(&"ralph:review".to_string()),
        "{i:?}\n{r:?}"
    );
    assert!(!i.labels.contains(&"ralph:running".to_string()), "{i:?}");
}

#[test]
fn a_temp_file_a_killed_run_left_in_the_tracker_dir_is_removed_by_the_next_run() {
    // A run killed (or out of disk space) while writing the tracker's
    // snapshot or queue leaves `.tracker.tmp-<pid>`: a pid of its own each
    // time, so they piled up run after run (found by benches/soak).
    let (p, _server) = project(backlog());
    p.agent("commit_file \"src/$ID.txt\"\ndone_\n");
    let stale = p.root.join(".ralph/tracker/.tracker.tmp-4242");
    fs::create_dir_all(stale.parent().unwrap()).unwrap();
    fs::write(&stale, "{\"half\": ").unwrap();
    let r = run(&p, &["run", "-s", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!stale.exists(), "the stale temp file is still there");
    let left: Vec<String> = fs::read_dir(p.root.join(".ralph/tracker"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert_eq!(left, [] as [String; 0]);
}

/// Issue 35, item 3 (the soak): with a tracker that takes connections and
/// never answers, every run's start waited for the client's 20 s limit
/// before its first attempt. Now the run starts from the snapshot while
/// its start's read is still under way. The scripted API logs a request
/// the client gave up on (`(given up)`): before the fix, the start's read
/// was given up before any agent could start.
#[test]
fn a_run_starts_from_the_snapshot_while_the_tracker_hangs() {
    let (p, server) = project(backlog());
    p.agent(
        r#"touch "$SCRATCH/started-$ID"
commit_file "src/$ID.txt"
done_
"#,
    );
    let v = run(&p, &["validate"]);
    assert_eq!(v.code, 0, "the first read takes the snapshot: {v:?}");
    fs::write(p.scratch.join("hang"), "").unwrap();
    let mut child = spawn_run(&p, &["run", "-s", "1"]);
    let limit = std::time::Duration::from_secs(120);
    wait_until("story 1's agent", limit, || {
        p.scratch.join("started-1").exists()
    });
    let log = server.log();
    let list = "GET /repos/o/r/issues?labels=ralph&state=all&per_page=100";
    assert!(
        log.contains(&format!("{list} (hung)")),
        "the start asked the tracker: {log:?}"
    );
    assert!(
        !log.iter().any(|l| l.ends_with("(given up)")),
        "the first attempt waited for the start's read to give up: {log:?}"
    );
    // Back up: the run lands the story and tells the tracker.
    fs::remove_file(p.scratch.join("hang")).unwrap();
    let status = wait_for_exit(&mut child, "the run to end", limit);
    assert_eq!(status.code(), Some(0));
    assert_eq!(landed(&p), ["1"]);
    assert!(!server.issue(1).open, "{:?}", server.issue(1));
}

/// With no snapshot yet, the run cannot start from one: it reads the
/// tracker first, and one that cannot be read is an error saying so,
/// before any agent starts.
#[test]
fn a_run_with_no_snapshot_reads_the_tracker_first_and_says_when_it_cannot() {
    let (p, _server) = project(backlog());
    p.agent("touch \"$SCRATCH/started-$ID\"\ncommit_file \"src/$ID.txt\"\ndone_\n");
    fs::write(p.scratch.join("down"), "").unwrap();
    let r = run(&p, &["run", "-s", "1"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("could not be read, with no snapshot to fall back on")
            && r.stderr.contains("backlog.github.repo"),
        "{r:?}"
    );
    assert!(!p.scratch.join("started-1").exists(), "an agent started");
}

/// Issue 35, finding 8 (the soak, BENCHMARKS.md §23): a landing was told
/// to the tracker's thread through a channel only, so with that thread
/// stuck in a request that never came back, a run that ended (or was
/// killed) lost it: the issue stayed open with nothing queued, and the
/// next run counted the done story as told. Here the close of #1 hangs,
/// #2 lands behind it, and ralph is killed once state.json has #2 done
/// (and, with `journaled`, the run's journal has #2's landing).
fn killed_behind_a_hung_close(journaled: bool) -> (Project, Server) {
    let api = Api {
        issues: [
            (1, issue(1, "The first.", &["ralph"])),
            (2, issue(2, "Depends on #1", &["ralph"])),
        ]
        .into(),
        ..Api::default()
    };
    let (p, server) = project(api);
    // Story 2 starts only once the tracker's thread is stuck on #1's close.
    p.agent(
        r#"if [ "$ID" = 2 ]; then
  while [ ! -e "$SCRATCH/go" ]; do sleep 0.05; done
fi
commit_file "src/$ID.txt"
done_
"#,
    );
    let close_1 = "PATCH /repos/o/r/issues/1";
    fs::write(p.scratch.join("hang"), close_1).unwrap();
    let mut child = spawn_run(&p, &["run"]);
    let limit = std::time::Duration::from_secs(120);
    wait_until("the close of #1 to hang", limit, || {
        server.log().contains(&format!("{close_1} (hung)"))
    });
    fs::write(p.scratch.join("go"), "").unwrap();
    let journal = p.root.join(".ralph/tracker/journal.json");
    wait_until("story 2 done in state.json", limit, || {
        let done = fs::read_to_string(p.root.join(".ralph/state.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|s| s["stories"]["2"]["status"] == "done");
        done && (!journaled || fs::read_to_string(&journal).is_ok_and(|j| j.contains("\"Landed\"")))
    });
    // SAFETY: a signal to the child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let _ = child.wait();
    assert!(server.issue(2).open, "nothing reached #2 before the kill");
    (p, server)
}

/// The next run, with the tracker answering again, makes every write.
fn next_run_closes_both(p: &Project, server: &Server) {
    fs::remove_file(p.scratch.join("hang")).unwrap();
    let r = run(p, &["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(p.story("2")["status"], "done", "{r:?}");
    for n in [2, 1] {
        let i = server.issue(n);
        assert!(
            !i.open,
            "#{n} closed once the tracker answered: {i:?}\n{r:?}"
        );
        assert!(
            !i.labels.iter().any(|l| l.starts_with("ralph:")),
            "#{n} keeps no status label: {i:?}"
        );
    }
    // #2's landing was never queued before: it is told once. #1's comment
    // was made before its close hung, and the queue is saved after each
    // write made: the kill left only the close queued, so the comment is
    // not made again.
    assert_eq!(server.issue(2).comments.len(), 1, "{:?}", server.issue(2));
    assert_eq!(server.issue(1).comments.len(), 1, "{:?}", server.issue(1));
    let log = server.log();
    assert!(
        log.iter().any(|l| l == "PATCH /repos/o/r/issues/2"),
        "#2's close was asked: {log:?}"
    );
    assert_eq!(p.read(".ralph/tracker/pending.json").trim(), "[]");
    assert!(
        !p.root.join(".ralph/tracker/journal.json").exists(),
        "every journaled update was queued and made"
    );
}

#[test]
fn a_landing_told_while_the_tracker_hangs_is_made_by_the_next_run_after_a_kill() {
    let (p, server) = killed_behind_a_hung_close(true);
    let st = run(&p, &["status"]);
    assert!(
        st.stdout.contains("not yet queued") && st.stdout.contains("story 2: landed on main"),
        "{st:?}"
    );
    next_run_closes_both(&p, &server);
}

/// Killed after state.json had the landing and before the journal did:
/// the next run tells a landed story whose issue is open with no close
/// queued, rather than count it as told.
#[test]
fn a_landing_neither_queued_nor_journaled_is_told_by_the_next_run() {
    let (p, server) = killed_behind_a_hung_close(false);
    let _ = fs::remove_file(p.root.join(".ralph/tracker/journal.json"));
    next_run_closes_both(&p, &server);
}

/// A run lands #1 (comment and close made) and ends before it reads the
/// tracker again, so its snapshot still has #1 open. The next run starts
/// with the tracker down: the landing was made, not lost, and is not told
/// again, so #1 gets one comment, not two, once the tracker is back.
#[test]
fn a_landing_made_is_not_told_again_by_a_run_that_cannot_read_the_tracker() {
    let (p, server) = project(Api {
        issues: [(1, issue(1, "The only one.", &["ralph"]))].into(),
        ..Api::default()
    });
    p.agent("commit_file \"src/$ID.txt\"\ndone_\n");
    let r = run(&p, &["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!server.issue(1).open, "{r:?}");
    assert_eq!(server.issue(1).comments.len(), 1);
    fs::write(p.scratch.join("down"), "").unwrap();
    let r = run(&p, &["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    fs::remove_file(p.scratch.join("down")).unwrap();
    let r = run(&p, &["run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let i = server.issue(1);
    assert_eq!(i.comments.len(), 1, "told again: {:?}", i.comments);
    assert!(
        !p.root.join(".ralph/tracker/made.json").exists(),
        "a read shows what was made"
    );
}
