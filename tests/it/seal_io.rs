//! What crosses from a sealed attempt to ralph besides git (issue 31):
//! its output (redaction of what is stored *and* shown, escapes undone,
//! a key split across events), the web view on the shared loopback (the
//! token on every route), and its processes (`sandbox.limits.pids`).

use std::fs;
use std::path::Path;

use crate::harness::*;
use crate::sandbox::bwrap_works;

/// Long enough that each half is past the fragment length redaction
/// masks alone (16 bytes).
const KEY: &str = "sk-ant-api03-seal-io-Zq8vR2mT5xW1yB7nK4pL9cD3fH6j";

/// `text` with every `\uXXXX` escape decoded, over and over (what a reader
/// who decodes JSON escapes sees).
fn decoded(text: &str) -> String {
    let mut now = text.to_string();
    for _ in 0..4 {
        let mut out = String::new();
        let mut rest = now.as_str();
        while let Some(at) = rest.find("\\u") {
            out.push_str(&rest[..at]);
            let hex = rest.get(at + 2..at + 6).unwrap_or("");
            match u32::from_str_radix(hex, 16).ok().and_then(char::from_u32) {
                Some(c) if hex.len() == 4 => {
                    out.push(c);
                    rest = &rest[at + 6..];
                }
                _ => {
                    out.push_str("\\u");
                    rest = &rest[at + 2..];
                }
            }
        }
        out.push_str(rest);
        if out == now {
            break;
        }
        now = out;
    }
    now
}

/// The key is not in `text`, as is or decoded; with `lines`, not in two
/// consecutive lines put together either.
fn assert_no_key(what: &str, text: &str, lines: bool) {
    assert!(!text.contains(KEY), "{what} has the key:\n{text}");
    assert!(
        !decoded(text).contains(KEY),
        "{what} has the key once decoded:\n{text}"
    );
    if lines {
        let all: Vec<&str> = text.lines().map(str::trim).collect();
        for pair in all.windows(2) {
            let joined = format!("{}{}", pair[0], pair[1]);
            assert!(
                !joined.contains(KEY) && !decoded(&joined).contains(KEY),
                "{what} has the key across two lines:\n{}\n{}",
                pair[0],
                pair[1]
            );
        }
    }
}

/// Every file under `.ralph/` (worktrees left out) and the two logs at the
/// root, each with its path.
fn files_ralph_wrote(p: &Project) -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
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
            } else if let Ok(bytes) = fs::read(&path) {
                out.push((
                    path.display().to_string(),
                    String::from_utf8_lossy(&bytes).into_owned(),
                ));
            }
        }
    }
    let mut out = Vec::new();
    walk(&p.root.join(".ralph"), &mut out);
    for f in ["progress.txt", "ralph.log"] {
        out.push((
            f.to_string(),
            fs::read_to_string(p.root.join(f)).unwrap_or_default(),
        ));
    }
    out
}

/// The agent prints its key `\u`-escaped whole, escaped twice, half raw
/// and half escaped, split across two stream events, across two plain
/// lines, and across a newline inside one event; on stdout and stderr.
const LEAKS: &str = r#"
K="$ANTHROPIC_API_KEY"
U=""; for ((i=0;i<${#K};i++)); do U+=$(printf '\\u%04x' "'${K:i:1}"); done
H=$(( ${#K} / 2 ))
ev() { printf '{"type":"assistant","message":{"content":[{"type":"text","text":"%s"}]}}\n' "$1"; }
ev "escaped $U"
ev "twice ${U//\\/\\\\}"
ev "half ${K:0:$H}${U:$(( H * 6 ))}"
ev "${K:0:$H}"
ev "${K:$H}"
ev "one event ${K:0:$H}\n${K:$H} end"
echo "plain ${K:0:$H}"
echo "${K:$H} plain"
echo "stderr $U" >&2
tool "echo ${K:0:$H}"
tool "echo ${K:$H}"
commit_file "src/$ID.txt"
done_
"#;

#[test]
fn an_escaped_or_split_key_is_in_no_file_and_no_output() {
    if !bwrap_works() {
        return;
    }
    let p = Project::with_backlog(
        "1.1 | First\n",
        r#"{ "loop": { "max_retries": 1, "grace_seconds": 1 }, "sandbox": { "mode": "bwrap" } }"#,
    );
    p.commit_all("backlog");
    p.agent(LEAKS);
    let env = [("ANTHROPIC_API_KEY", KEY)];
    let run = p.ralph_with(&["run"], &env);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(p.completed(), vec!["1.1"]);
    let log = fs::read_to_string(p.root.join(".ralph/logs/1.1/attempt-1.log")).unwrap();
    assert!(log.contains("escaped "), "the agent ran: {log}");
    assert_no_key("ralph run", &run.all(), true);
    let report = p.ralph_with(&["report"], &env);
    assert_eq!(report.code, 0, "{report:?}");
    for (path, text) in files_ralph_wrote(&p) {
        assert_no_key(&path, &text, false);
    }
    assert!(log.contains("escaped ***"), "masked in place: {log}");
    let shown = p.ralph_with(&["log", "1.1"], &env);
    assert_eq!(shown.code, 0, "{shown:?}");
    assert!(shown.stdout.contains("escaped ***"), "{shown:?}");
    assert_no_key("ralph log", &shown.all(), true);
    let raw = p.ralph_with(&["log", "1.1", "--raw"], &env);
    assert_eq!(raw.code, 0, "{raw:?}");
    assert_no_key("ralph log --raw", &raw.all(), false);
}

/// A free port on 127.0.0.1 (the web view binds it right after).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Asks the web view (its port is in the story's title) for the state,
/// another story's log and the page, without the token, from inside the
/// sandbox, as the red team's agent did; and shows its environment.
const READS_THE_WEB_VIEW: &str = r#"
PORT="$(sed -n 's/.*port \([0-9][0-9]*\).*/\1/p' "$PROMPT_FILE" | head -1)"
for path in /api/state /api/stories/1.2/log /api/stories /; do
  ans="$(timeout 20 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT && printf 'GET $path HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 && head -1 <&3" 2>&1 | tr -d '\r')"
  echo "webview $path -> $ans"
done
env | sed 's/^/env: /'
commit_file "src/$ID.txt"
done_
"#;

#[test]
fn an_agent_reads_nothing_of_the_web_view_without_the_token() {
    if !bwrap_works() {
        return;
    }
    let port = free_port();
    let p = Project::with_backlog(
        &format!("1.1 | Reads port {port}\n1.2 | Other\n"),
        r#"{ "loop": { "max_retries": 1, "grace_seconds": 1 }, "sandbox": { "mode": "bwrap" } }"#,
    );
    p.commit_all("backlog");
    p.agent(READS_THE_WEB_VIEW);
    let addr = format!("127.0.0.1:{port}");
    let run = p.ralph(&["run", "-s", "1.1", "--serve", &addr]);
    assert_eq!(run.code, 0, "{run:?}");
    let url = run
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("web view: "))
        .unwrap_or_else(|| panic!("no URL: {run:?}"))
        .trim()
        .to_string();
    assert!(url.contains(&addr), "{url}");
    let token = url.split("token=").nth(1).unwrap().to_string();
    let log = fs::read_to_string(p.root.join(".ralph/logs/1.1/attempt-1.log")).unwrap();
    for path in ["/api/state", "/api/stories/1.2/log", "/api/stories", "/"] {
        let line = log
            .lines()
            .find(|l| l.starts_with(&format!("webview {path} -> ")))
            .unwrap_or_else(|| panic!("{path} was not asked: {log}"));
        assert!(line.contains(" 401 "), "{path} without the token: {line}");
    }
    assert!(!log.contains(" 200 "), "a read went through: {log}");
    assert!(
        log.contains("env: PATH="),
        "the agent showed its environment"
    );
    assert!(!log.contains(&token), "the agent had the token: {log}");
}

/// True when this machine has the cgroup controller `name` ralph can make
/// a cgroup of: cgroup v1's hierarchy of it writable where ralph's own
/// cgroup is, or cgroup v2 with it delegated to ralph's own cgroup.
fn controller_here(name: &str) -> bool {
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, ctls, path) = (parts.next(), parts.next(), parts.next());
        let (Some(ctls), Some(path)) = (ctls, path) else {
            continue;
        };
        if ctls.is_empty() {
            let control = format!("/sys/fs/cgroup{}/cgroup.subtree_control", path.trim());
            if fs::read_to_string(control).is_ok_and(|c| c.split_whitespace().any(|w| w == name)) {
                return true;
            }
        } else if ctls.split(',').any(|c| c == name) {
            let probe = Path::new("/sys/fs/cgroup")
                .join(name)
                .join(path.trim().trim_start_matches('/'))
                .join(format!("ralph-test-probe-{}", std::process::id()));
            if fs::create_dir(&probe).is_ok() {
                let _ = fs::remove_dir(&probe);
                return true;
            }
        }
    }
    false
}

/// Forks 300 sleepers (perl: a failed fork fails at once, where bash
/// retries for half a minute), says how many it got, and leaves five of
/// them running for ralph to end (the rest go, so that its commit can
/// fork).
const FORKS: &str = r#"
perl -e '
  my @kids;
  for (1..300) {
    my $pid = fork();
    last unless defined $pid;
    if ($pid == 0) { sleep 600; exit 0 }
    push @kids, $pid;
  }
  print "forked " . scalar(@kids) . " of 300\n";
  my @gone = @kids[5 .. $#kids];
  kill 9, @gone;
  waitpid($_, 0) for @gone;
' ralph-pids-probe-MARK
commit_file "src/$ID.txt"
done_
"#;

#[test]
fn three_hundred_processes_are_capped_by_sandbox_limits_pids() {
    if !bwrap_works() {
        return;
    }
    let cgroup = controller_here("pids");
    // SAFETY: getuid(2) cannot fail.
    let root = unsafe { libc::getuid() } == 0;
    if !cgroup && root {
        eprintln!("skipped: no pids controller here, and RLIMIT_NPROC holds nothing for root");
        return;
    }
    let mark = format!("ralph-pids-probe-{}", std::process::id());
    let p = Project::with_backlog(
        "1.1 | Forks\n",
        r#"{ "loop": { "max_retries": 1, "grace_seconds": 1 },
             "sandbox": { "mode": "bwrap", "limits": { "pids": 64 } } }"#,
    );
    p.commit_all("backlog");
    p.agent(&FORKS.replace("ralph-pids-probe-MARK", &mark));
    let run = p.ralph(&["run"]);
    let log = fs::read_to_string(p.root.join(".ralph/logs/1.1/attempt-1.log"))
        .unwrap_or_else(|e| panic!("no log ({e}): {run:?}"));
    let forked: usize = log
        .lines()
        .find_map(|l| l.strip_prefix("forked ")?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("the agent did not say: {log}\n{run:?}"));
    assert!(forked < 64, "forked {forked} of 300 under a cap of 64");
    // None of them outlives the attempt.
    let alive: Vec<String> = fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&mark))
        .collect();
    assert!(alive.is_empty(), "still running: {alive:?}");
    if cgroup {
        // Named: the attempt failed for the cap, whatever it said after.
        assert_eq!(run.code, 1, "{run:?}");
        let reason = p.story("1.1")["history"][0]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(reason.contains("sandbox.limits.pids"), "{reason}");
    }
}

/// Allocates 1 GiB (and touches it) past a cap of 128 MiB.
const ALLOCATES: &str = r#"
perl -e '$x = "a" x (1024 * 1024 * 1024); print "allocated\n"'
echo "perl ended with $?"
commit_file "src/$ID.txt"
done_
"#;

#[test]
fn memory_past_sandbox_limits_memory_mb_fails_the_attempt_by_name() {
    if !bwrap_works() {
        return;
    }
    if !controller_here("memory") {
        eprintln!("skipped: no memory controller ralph can use here (RLIMIT_DATA names no hit)");
        return;
    }
    let p = Project::with_backlog(
        "1.1 | Allocates\n",
        r#"{ "loop": { "max_retries": 1, "grace_seconds": 1 },
             "sandbox": { "mode": "bwrap", "limits": { "memory_mb": 128 } } }"#,
    );
    p.commit_all("backlog");
    p.agent(ALLOCATES);
    let run = p.ralph(&["run"]);
    let log = fs::read_to_string(p.root.join(".ralph/logs/1.1/attempt-1.log"))
        .unwrap_or_else(|e| panic!("no log ({e}): {run:?}"));
    assert!(
        !log.lines().any(|l| l == "allocated"),
        "1 GiB under a cap of 128 MiB: {log}"
    );
    assert!(log.contains("perl ended with 137"), "killed: {log}");
    assert_eq!(run.code, 1, "{run:?}");
    let reason = p.story("1.1")["history"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(reason.contains("sandbox.limits.memory_mb"), "{reason}");
}
