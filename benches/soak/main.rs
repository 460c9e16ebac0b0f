//! The soak (issue 35 item 6): a compressed night of `ralph run --parallel`
//! under scheduled faults, then the checks a morning makes — every story
//! landed exactly once, nothing lost, nothing leaked, ralph's RSS and
//! descriptors and the landing rate flat over time.
//!
//! `cargo bench --bench soak -- [--short] [--stories N] [--jobs N]
//!  [--duration S] [--fault-period S] [--kill-period S] [--drain S]
//!  [--disk-mb N] [--keep]` (each also `RALPH_SOAK_<NAME>` in the
//! environment, e.g. `RALPH_SOAK_STORIES=200`). `RALPH_BENCH_BIN` runs
//! another ralph binary than the one cargo built. Needs root for the tmpfs
//! that holds the project (the disk-full fault); without it that fault is
//! skipped and said so. BENCHMARKS.md ("Soak") has the fault schedule and
//! the figures.
//!
//! The backlog is 2,000 (`--stories`) issues of a scripted GitHub API on
//! 127.0.0.1 (`tests/it/github_api.rs`, shared by `#[path]`), so the
//! tracker can answer 502 or hang; the fake agents are in `agent.rs`, the
//! faults in `faults.rs`, the checks in `report.rs`.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[path = "../../tests/it/github_api.rs"]
mod github_api;

mod agent;
mod faults;
mod report;

use faults::{Lengths, Ralph, Shared};

const TOKEN: &str = "soak-token-0123456789";

pub struct Params {
    pub stories: u64,
    pub jobs: usize,
    pub duration: f64,
    pub fault_period: f64,
    pub kill_period: f64,
    pub drain: f64,
    pub disk_mb: u64,
    pub keep: bool,
    pub short: bool,
    /// The share of the slots' time agents are planned to take.
    pub busy: f64,
    /// The fault classes injected (`--only a,b`; default all of them).
    pub only: Vec<&'static str>,
}

fn params() -> Params {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let short =
        args.iter().any(|a| a == "--short") || std::env::var_os("RALPH_SOAK_SHORT").is_some();
    let get = |name: &str, full: f64, quick: f64| -> f64 {
        let flag = format!("--{name}");
        let env = format!("RALPH_SOAK_{}", name.to_ascii_uppercase().replace('-', "_"));
        let v = args
            .iter()
            .position(|a| *a == flag)
            .and_then(|i| args.get(i + 1).cloned())
            .or_else(|| std::env::var(&env).ok());
        match v {
            Some(v) => v.parse().unwrap_or_else(|_| {
                eprintln!("{flag} / {env}: not a number: {v:?}");
                std::process::exit(2)
            }),
            None if short => quick,
            None => full,
        }
    };
    let known = [
        "--short",
        "--keep",
        "--stories",
        "--jobs",
        "--duration",
        "--fault-period",
        "--kill-period",
        "--drain",
        "--disk-mb",
        "--busy",
        "--only",
    ];
    for (i, a) in args.iter().enumerate() {
        let is_value = i > 0 && known[2..].contains(&args[i - 1].as_str());
        if !is_value && !known.contains(&a.as_str()) {
            eprintln!("unknown argument {a:?}; flags: {}", known.join(" "));
            std::process::exit(2);
        }
    }
    Params {
        stories: get("stories", 2000.0, 200.0) as u64,
        jobs: get("jobs", 16.0, 16.0) as usize,
        duration: get("duration", 1800.0, 300.0),
        fault_period: get("fault-period", 40.0, 14.0),
        kill_period: get("kill-period", 180.0, 60.0),
        drain: get("drain", 600.0, 240.0),
        disk_mb: get("disk-mb", 4096.0, 2048.0) as u64,
        keep: args.iter().any(|a| a == "--keep") || std::env::var_os("RALPH_SOAK_KEEP").is_some(),
        short,
        busy: get("busy", 0.8, 0.8),
        only: {
            let v = args
                .iter()
                .position(|a| a == "--only")
                .and_then(|i| args.get(i + 1).cloned())
                .or_else(|| std::env::var("RALPH_SOAK_ONLY").ok());
            let wanted: Vec<String> =
                v.map_or_else(Vec::new, |v| v.split(',').map(str::to_string).collect());
            for w in &wanted {
                if !faults::CLASSES.contains(&w.as_str()) {
                    eprintln!("--only {w:?}: one of {}", faults::CLASSES.join(", "));
                    std::process::exit(2);
                }
            }
            faults::CLASSES
                .into_iter()
                .filter(|c| wanted.is_empty() || wanted.iter().any(|w| w == c))
                .collect()
        },
    }
}

fn ralph_bin() -> PathBuf {
    let p = match (
        std::env::var_os("RALPH_BENCH_BIN"),
        option_env!("CARGO_BIN_EXE_ralph"),
    ) {
        (Some(p), _) => PathBuf::from(p),
        (None, Some(p)) => PathBuf::from(p),
        (None, None) => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/ralph"),
    };
    if !p.exists() {
        eprintln!(
            "{} does not exist: run `cargo build --release` first",
            p.display()
        );
        std::process::exit(2);
    }
    p
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
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `merge: story <id>` subjects on main's first-parent history, with their
/// commit times: (id, unix seconds), oldest first.
pub fn landings(root: &Path) -> Vec<(u64, i64)> {
    let log = git(
        root,
        &[
            "log",
            "--first-parent",
            "--reverse",
            "--format=%ct %s",
            "main",
        ],
    );
    log.lines()
        .filter_map(|l| {
            let (t, s) = l.split_once(' ')?;
            let id = s.strip_prefix("merge: story ")?.split_whitespace().next()?;
            Some((id.parse().ok()?, t.parse().ok()?))
        })
        .collect()
}

fn mount_tmpfs(mnt: &Path, mb: u64) -> bool {
    fs::create_dir_all(mnt).expect("mkdir");
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "ralph-soak"])
        .arg(mnt)
        .status()
        .is_ok_and(|s| s.success())
}

/// ralph's tag for the project at `root` (`project::project_tag`, FNV-1a
/// of its path): the prefix of its cgroups' names and attempt tokens.
pub fn project_tag(root: &Path) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in root.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("ralph-{:08x}-", h as u32)
}

/// Every cgroup directory named with `tag`.
pub fn cgroups(tag: &str) -> Vec<PathBuf> {
    fn walk(d: &Path, depth: usize, out: &mut Vec<PathBuf>, tag: &str) {
        if depth == 0 {
            return;
        }
        for e in fs::read_dir(d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if e.file_name().to_string_lossy().starts_with(tag) {
                    out.push(e.path());
                }
                walk(&e.path(), depth - 1, out, tag);
            }
        }
    }
    let mut v = Vec::new();
    walk(Path::new("/sys/fs/cgroup"), 6, &mut v, tag);
    v
}

fn main() {
    let p = params();
    let bin = ralph_bin();
    let run_dir = tempfile::Builder::new()
        .prefix("ralph-soak-")
        .tempdir()
        .expect("tempdir")
        .keep();
    let mnt = run_dir.join("mnt");
    let mounted = mount_tmpfs(&mnt, p.disk_mb);
    if !mounted {
        eprintln!("no tmpfs at {} (root needed): the project sits on the ordinary disk and the disk-full fault is skipped", mnt.display());
    }
    let state = run_dir.join("state");
    let root = mnt.join("proj");
    for d in [
        &root,
        &mnt.join("home"),
        &mnt.join("tmp"),
        &state.join("switches"),
        &run_dir.join("soak-agent-bin"),
    ] {
        fs::create_dir_all(d).expect("mkdir");
    }

    // The fake agent and its generator, outside the project's disk.
    let scripted = agent::scripted(p.stories);
    // Agents as long as `-j` slots need to take `--duration` over the
    // backlog, less the time faults and restarts take away.
    let mean_ms = (p.jobs as f64 * p.duration / p.stories as f64 * p.busy * 1000.0) as u64;
    let dur = (mean_ms * 4 / 10, mean_ms * 16 / 10);
    let trace = state.join("trace");
    fs::write(&trace, "").unwrap();
    let gen = state.join("soak_gen.py");
    fs::write(&gen, agent::GEN).unwrap();
    let agent_path = run_dir.join("soak-agent-bin/claude");
    fs::write(
        &agent_path,
        agent::script(
            &trace.display().to_string(),
            &gen.display().to_string(),
            &scripted,
            dur,
        ),
    )
    .unwrap();
    fs::set_permissions(&agent_path, fs::Permissions::from_mode(0o755)).unwrap();

    // The tracker: one issue per story, one in twenty blocked by the one before.
    let mut issues = BTreeMap::new();
    for n in 1..=p.stories {
        let mut i = github_api::issue(
            n,
            &format!("As a user I want feature {n} so that the product moves forward.\n\n## Acceptance criteria\n\n- it works end to end\n- errors name the file and line\n"),
            &["ralph"],
        );
        i.title = format!("Feature {n}");
        if n % 20 == 0 {
            i.blocked_by = vec![n - 1];
        }
        issues.insert(n, i);
    }
    let server = github_api::Server::start(
        github_api::Api {
            issues,
            token: TOKEN.into(),
            ..github_api::Api::default()
        },
        state.join("switches"),
    );

    let timeout = 75.max(dur.1 / 1000 + 50);
    let config = format!(
        r#"{{
  "loop": {{ "max_retries": 3, "timeout_seconds": {timeout}, "grace_seconds": 5 }},
  "validation": {{ "commands": [ {{ "name": "check", "cmd": "sleep 0.3 && ! grep -rqs BROKEN bench-out" }} ] }},
  "parallel": {{ "retry_concurrency": 4, "agent_memory_mb": 256 }},
  "decomposition": {{ "enabled": false }},
  "postmortem": {{ "enabled": false }},
  "backlog": {{ "source": "github", "github": {{ "repo": "o/r", "api_url": "{}", "poll_seconds": 30 }} }},
  "sandbox": {{ "allow_write": ["{}"] }}
}}
"#,
        server.url,
        state.display()
    );
    git(&root, &["init", "-q", "-b", "main"]);
    for (k, v) in [
        ("user.name", "Soak"),
        ("user.email", "soak@example.com"),
        ("commit.gpgsign", "false"),
    ] {
        git(&root, &["config", k, v]);
    }
    fs::write(root.join("README.md"), "soak project\n").unwrap();
    fs::create_dir_all(root.join(".ralph")).unwrap();
    fs::write(root.join(".ralph/config.json"), config).unwrap();
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "soak project"]);

    let sh: &'static Shared = Box::leak(Box::new(Shared {
        t0: Instant::now(),
        run_dir: run_dir.clone(),
        root: root.clone(),
        state: state.clone(),
        mnt: mounted.then(|| mnt.clone()),
        disk_bytes: p.disk_mb << 20,
        done: AtomicBool::new(false),
        stalled: AtomicBool::new(false),
        ralph_pid: AtomicI32::new(0),
        out_bytes: AtomicU64::new(0),
        events: Mutex::new(Vec::new()),
        user_commits: Mutex::new(Vec::new()),
        checkout: Mutex::new(()),
        user_seq: AtomicU64::new(0),
    }));
    let cgroups_before = cgroups(&project_tag(&root));
    println!(
        "soak: {} stories, -j {}, faults every {:.0} s, ralph killed/stopped every {:.0} s, agents {:.1}–{:.1} s, timeout {timeout} s; ralph {}; in {}",
        p.stories, p.jobs, p.fault_period, p.kill_period, dur.0 as f64 / 1000.0, dur.1 as f64 / 1000.0, bin.display(), run_dir.display()
    );

    // Sampler: ralph's RSS, descriptors and threads every 5 s.
    let samples: &'static Mutex<Vec<report::Sample>> = Box::leak(Box::new(Mutex::new(Vec::new())));
    let sampler = std::thread::spawn(move || {
        while !sh.done.load(Ordering::Relaxed) {
            let pid = sh.ralph_pid.load(Ordering::SeqCst);
            if pid > 0 {
                if let Some((rss, fds, threads, anon)) = faults::sample(pid) {
                    samples.lock().unwrap().push(report::Sample {
                        t: sh.now(),
                        pid,
                        rss_kb: rss,
                        fds,
                        threads,
                        anon_kb: anon,
                    });
                }
            }
            sh.hold(5.0);
        }
    });

    // Fault scheduler: one class after the other, every fault period.
    let lengths = if p.short {
        Lengths {
            sigstop: 15.0,
            tracker: 20.0,
            unread: 45.0,
            lock: 20.0,
            disk: 30.0,
        }
    } else {
        Lengths {
            sigstop: 30.0,
            tracker: 60.0,
            unread: 150.0,
            lock: 60.0,
            disk: 30.0,
        }
    };
    let period = p.fault_period;
    let only = p.only.clone();
    let scheduler = std::thread::spawn(move || {
        let mut running = Vec::new();
        let mut k = 0;
        loop {
            sh.hold(period);
            if sh.done.load(Ordering::Relaxed) {
                break;
            }
            let class = only[k % only.len()];
            k += 1;
            let len = lengths;
            running.push(std::thread::spawn(move || faults::inject(sh, class, &len)));
        }
        for t in running {
            let _ = t.join();
        }
    });

    let restarts = run_loop(sh, &p, &bin, &root, &mnt, &state);
    sh.done.store(true, Ordering::SeqCst);
    let _ = scheduler.join();
    let _ = sampler.join();
    if mounted {
        faults::remount(&mnt, p.disk_mb << 20);
    }
    let ended = sh.now();
    // The morning: the faults are over and the tracker answers; one more
    // `ralph run` (every story done) delivers what the night's runs left
    // queued or journaled. The tracker's figures below are after it, so a
    // write that was lost (not merely late) shows as an issue left open.
    morning_run(&bin, p.jobs, &root, &mnt, &state);

    let rep = report::Report::gather(report::Inputs {
        p: &p,
        sh,
        server: &server,
        scripted: &scripted,
        trace: &trace,
        samples: &samples.lock().unwrap(),
        restarts: &restarts,
        cgroups_before: &cgroups_before,
        ended,
    });
    let text = rep.render();
    println!("{text}");
    fs::write(state.join("report.md"), &text).unwrap();

    if p.keep {
        println!(
            "kept {} (umount {} when done)",
            run_dir.display(),
            mnt.display()
        );
    } else {
        if mounted {
            let _ = Command::new("umount").arg(&mnt).status();
        }
        let _ = fs::remove_dir_all(&run_dir);
    }
}

pub struct Restart {
    pub t: f64,
    pub how: String,
    /// Seconds from the signal to ralph's exit.
    pub exit_secs: Option<f64>,
    pub code: Option<i32>,
    pub on: &'static str,
}

fn ralph_cmd(bin: &Path, jobs: usize, root: &Path, mnt: &Path) -> Command {
    let mut c = Command::new(bin);
    c.args(["run", "--parallel", "-j", &jobs.to_string(), "-v"])
        .current_dir(root)
        .env(
            "PATH",
            format!(
                "{}:{}",
                mnt.parent().unwrap().join("soak-agent-bin").display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("HOME", mnt.join("home"))
        .env("TMPDIR", mnt.join("tmp"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GITHUB_TOKEN", TOKEN)
        .env_remove("RALPH_ATTEMPT_TOKEN")
        .env_remove("CLAUDECODE")
        .env_remove("CI");
    c
}

/// `ralph run` once more after the night, bounded at 3 minutes; says how
/// it ended. Its output goes to `morning.log` beside the report.
fn morning_run(bin: &Path, jobs: usize, root: &Path, mnt: &Path, state: &Path) {
    let log = fs::File::create(state.join("morning.log")).unwrap();
    let started = Instant::now();
    let mut child = ralph_cmd(bin, jobs, root, mnt)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("ralph starts");
    let status = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break Some(st);
        }
        if started.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    eprintln!(
        "morning run (the tracker answering): {} in {:.1} s",
        status.map_or("killed after 180 s".to_string(), |s| s.to_string()),
        started.elapsed().as_secs_f64()
    );
}

/// Runs ralph until every story landed (or the deadline), killing it with
/// SIGKILL, or stopping it with SIGTERM every third time, every kill
/// period, and starting it again at once; alternately on a pty and a pipe.
fn run_loop(
    sh: &'static Shared,
    p: &Params,
    bin: &Path,
    root: &Path,
    mnt: &Path,
    _state: &Path,
) -> Vec<Restart> {
    let mut restarts = Vec::new();
    let mut k = 0usize;
    let start = |k: usize| -> Ralph {
        faults::spawn(
            sh,
            ralph_cmd(bin, p.jobs, root, mnt),
            k.is_multiple_of(2),
            k,
        )
    };
    let mut ralph = start(k);
    let mut next_kill = p.kill_period;
    let mut next_poll = 10.0;
    let mut all_landed_at: Option<f64> = None;
    let deadline = p.duration + p.drain;
    loop {
        std::thread::sleep(Duration::from_millis(250));
        let now = sh.now();
        if now >= next_poll {
            next_poll = now + 10.0;
            let distinct: std::collections::BTreeSet<u64> =
                landings(root).into_iter().map(|(id, _)| id).collect();
            eprintln!(
                "[{now:7.1}s] landed {} of {}; ralph output read {} MB",
                distinct.len(),
                p.stories,
                sh.out_bytes.load(Ordering::Relaxed) >> 20
            );
            if distinct.len() as u64 >= p.stories && all_landed_at.is_none() {
                all_landed_at = Some(now);
            }
        }
        if let Ok(Some(st)) = ralph.child.try_wait() {
            sh.ralph_pid.store(0, Ordering::SeqCst);
            restarts.push(Restart {
                t: now,
                how: "exited by itself".into(),
                exit_secs: None,
                code: st.code(),
                on: ralph.on,
            });
            eprintln!("[{now:7.1}s] ralph exited by itself: {st}");
            let distinct: std::collections::BTreeSet<u64> =
                landings(root).into_iter().map(|(id, _)| id).collect();
            if distinct.len() as u64 >= p.stories || now >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_secs(3));
            k += 1;
            ralph = start(k);
            continue;
        }
        if let Some(t) = all_landed_at {
            if now - t > 120.0 {
                restarts.push(stop(
                    sh,
                    &mut ralph,
                    "still running 120 s after every story landed: SIGTERM",
                ));
                break;
            }
            continue;
        }
        if now >= deadline {
            restarts.push(stop(sh, &mut ralph, "deadline: SIGTERM"));
            break;
        }
        if now >= next_kill {
            next_kill = now + p.kill_period;
            let n = restarts
                .iter()
                .filter(|r| r.how.starts_with("kill") || r.how.starts_with("SIGTERM"))
                .count();
            let r = if n % 3 == 2 {
                stop(sh, &mut ralph, "SIGTERM")
            } else {
                let t = sh.now();
                faults::signal(ralph.child.id() as i32, libc::SIGKILL);
                let st = faults::wait_exit(&mut ralph, 30.0);
                Restart {
                    t,
                    how: "kill -9".into(),
                    exit_secs: st.map(|_| sh.now() - t),
                    code: st.and_then(|s| s.code()),
                    on: ralph.on,
                }
            };
            eprintln!("[{:7.1}s] {} ({:?} s); restarting", r.t, r.how, r.exit_secs);
            restarts.push(r);
            k += 1;
            ralph = start(k);
        }
    }
    sh.ralph_pid.store(0, Ordering::SeqCst);
    restarts
}

/// SIGTERM, then up to 60 s for ralph to end (SIGKILL after that).
fn stop(sh: &Shared, ralph: &mut Ralph, how: &str) -> Restart {
    let t = sh.now();
    let unread = sh.stalled.load(Ordering::SeqCst);
    faults::signal(ralph.child.id() as i32, libc::SIGTERM);
    let st = faults::wait_exit(ralph, 60.0);
    let exit_secs = st.map(|_| sh.now() - t);
    let mut how = how.to_string();
    if unread {
        how += " (its output not read)";
    }
    let code = match st {
        Some(s) => s.code(),
        None => {
            faults::signal(ralph.child.id() as i32, libc::SIGKILL);
            let _ = faults::wait_exit(ralph, 30.0);
            how += " (not obeyed in 60 s: SIGKILL)";
            None
        }
    };
    Restart {
        t,
        how,
        exit_secs,
        code,
        on: ralph.on,
    }
}
