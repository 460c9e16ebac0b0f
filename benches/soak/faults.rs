//! The faults the soak injects, and ralph's process under them: its output
//! on a pseudo-terminal or a pipe that the bench stops reading for minutes,
//! `kill -9` and SIGTERM stops, SIGSTOP/SIGCONT of agents, a full disk, a
//! stray `index.lock`, a user committing, a tracker answering 502 or hanging.
//! Each fault is one thread that records what it did in `Shared::events`.

use std::collections::VecDeque;
use std::fs;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Event {
    pub class: &'static str,
    pub start: f64,
    pub end: f64,
    pub detail: String,
}

pub struct UserCommit {
    pub sha: String,
    pub path: String,
}

/// What the fault threads, the sampler and the run loop share.
pub struct Shared {
    pub t0: Instant,
    pub run_dir: PathBuf,
    pub root: PathBuf,
    pub state: PathBuf,
    pub mnt: Option<PathBuf>,
    pub disk_bytes: u64,
    pub done: AtomicBool,
    pub stalled: AtomicBool,
    pub ralph_pid: AtomicI32,
    pub out_bytes: AtomicU64,
    pub events: Mutex<Vec<Event>>,
    pub user_commits: Mutex<Vec<UserCommit>>,
    /// The user at the main checkout: a stray lock and a commit are not
    /// theirs at once (a commit fails on their own stray lock).
    pub checkout: Mutex<()>,
    pub user_seq: AtomicU64,
}

impl Shared {
    pub fn now(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    pub fn record(&self, class: &'static str, start: f64, detail: String) {
        let end = self.now();
        eprintln!("[{end:7.1}s] fault {class}: {detail}");
        self.events.lock().unwrap().push(Event {
            class,
            start,
            end,
            detail,
        });
    }

    /// Waits `secs`, or less once the run is over.
    pub fn hold(&self, secs: f64) {
        let until = Instant::now() + Duration::from_secs_f64(secs);
        while Instant::now() < until && !self.done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The fault classes the scheduler cycles through (kill -9 and SIGTERM
/// stops have a timer of their own).
pub const CLASSES: [&str; 7] = [
    "sigstop-agents",
    "user-commit",
    "tracker-502",
    "terminal-unread",
    "index-lock",
    "disk-full",
    "tracker-hang",
];

/// How long the faults that last last, in seconds (scaled down for short
/// runs).
#[derive(Clone, Copy)]
pub struct Lengths {
    pub sigstop: f64,
    pub tracker: f64,
    pub unread: f64,
    pub lock: f64,
    pub disk: f64,
}

pub fn inject(sh: &Shared, class: &'static str, len: &Lengths) {
    let t = sh.now();
    let detail = match class {
        "sigstop-agents" => sigstop(sh, len.sigstop),
        "user-commit" => user_commits(sh),
        "tracker-502" => switch(sh, "down", len.tracker),
        "tracker-hang" => switch(sh, "hang", len.tracker),
        "terminal-unread" => {
            sh.stalled.store(true, Ordering::SeqCst);
            sh.hold(len.unread);
            sh.stalled.store(false, Ordering::SeqCst);
            format!("output not read for {:.0} s", sh.now() - t)
        }
        "index-lock" => index_lock(sh, len.lock),
        "disk-full" => disk_full(sh, len.disk),
        _ => unreachable!("{class}"),
    };
    sh.record(class, t, detail);
}

fn switch(sh: &Shared, name: &str, secs: f64) -> String {
    let f = sh.state.join("switches").join(name);
    let _ = fs::write(&f, "");
    let t = sh.now();
    sh.hold(secs);
    let _ = fs::remove_file(&f);
    format!("`{name}` for {:.0} s", sh.now() - t)
}

// ---------------------------------------------------------------------------
// Processes

/// Every process id with its command line.
pub fn processes() -> Vec<(i32, String)> {
    let mut v = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return v;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Ok(c) = fs::read(e.path().join("cmdline")) {
            let c: Vec<u8> = c.iter().map(|b| if *b == 0 { b' ' } else { *b }).collect();
            v.push((pid, String::from_utf8_lossy(&c).trim_end().to_string()));
        }
    }
    v
}

fn ppid(pid: i32) -> Option<i32> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `pid` and all its descendants.
fn tree(pid: i32) -> Vec<i32> {
    let all: Vec<(i32, Option<i32>)> = processes().into_iter().map(|(p, _)| (p, ppid(p))).collect();
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(
            all.iter()
                .filter(|(_, pp)| *pp == Some(parent))
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    out
}

pub fn signal(pid: i32, sig: i32) -> bool {
    // SAFETY: kill(2) with a pid this bench found or started.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// Up to two running agents (their bash and everything under it) stopped
/// with SIGSTOP for `secs`, then continued.
fn sigstop(sh: &Shared, secs: f64) -> String {
    let agents: Vec<i32> = processes()
        .into_iter()
        .filter(|(_, c)| c.contains("soak-agent-bin/claude"))
        .map(|(p, _)| p)
        .collect();
    if agents.is_empty() {
        return "no agent running".into();
    }
    let picked: Vec<i32> = agents
        .iter()
        .step_by(agents.len().div_ceil(2))
        .copied()
        .collect();
    let mut stopped = Vec::new();
    for a in &picked {
        for p in tree(*a) {
            if signal(p, libc::SIGSTOP) {
                stopped.push(p);
            }
        }
    }
    sh.hold(secs);
    for p in &stopped {
        signal(*p, libc::SIGCONT);
    }
    format!(
        "{} agents ({} processes) stopped for {secs:.0} s",
        picked.len(),
        stopped.len()
    )
}

// ---------------------------------------------------------------------------
// The user at the main checkout

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Three commits by a user in the main checkout, a few seconds apart; a
/// commit that fails (ralph's lock, a full disk) is retried as a person
/// would, and given up after a minute, its file removed.
fn user_commits(sh: &Shared) -> String {
    let _user = sh.checkout.lock().unwrap();
    let mut made = 0;
    let mut failures = Vec::new();
    for _ in 0..3 {
        let n = sh.user_seq.fetch_add(1, Ordering::SeqCst) + 1;
        let rel = format!("user/note-{n}.txt");
        let path = sh.root.join(&rel);
        let t = Instant::now();
        loop {
            let r = fs::create_dir_all(path.parent().unwrap())
                .and_then(|_| fs::write(&path, format!("a user's note {n}\n")))
                .map_err(|e| e.to_string())
                .and_then(|_| git(&sh.root, &["add", &rel]))
                .and_then(|_| {
                    git(
                        &sh.root,
                        &["commit", "-q", "-m", &format!("user: note {n}")],
                    )
                })
                .and_then(|_| git(&sh.root, &["rev-parse", "HEAD"]));
            match r {
                Ok(sha) => {
                    sh.user_commits.lock().unwrap().push(UserCommit {
                        sha: sha.trim().to_string(),
                        path: rel.clone(),
                    });
                    made += 1;
                    break;
                }
                Err(e) if t.elapsed() < Duration::from_secs(60) => {
                    if failures.len() < 3 {
                        failures.push(e.lines().next().unwrap_or_default().to_string());
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => {
                    let _ = git(
                        &sh.root,
                        &["rm", "-q", "--cached", "--ignore-unmatch", &rel],
                    );
                    let _ = fs::remove_file(&path);
                    failures.push(format!("gave up: {e}"));
                    break;
                }
            }
        }
        sh.hold(2.0);
    }
    let mut s = format!("{made} commits on main");
    if !failures.is_empty() {
        s += &format!(" (retried: {})", failures.join("; "));
    }
    s
}

/// A user's git died and left `.git/index.lock`: it stays until ralph
/// clears it or, after `secs`, the user notices and deletes it.
fn index_lock(sh: &Shared, secs: f64) -> String {
    let _user = sh.checkout.lock().unwrap();
    let lock = sh.root.join(".git/index.lock");
    let t = Instant::now();
    while lock.exists() && t.elapsed() < Duration::from_secs(30) {
        // A git (ralph's) is working right now: a stray lock is one left
        // when nothing works.
        std::thread::sleep(Duration::from_millis(100));
    }
    if fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
        .is_err()
    {
        return "could not make a stray lock (git busy)".into();
    }
    let made = sh.now();
    while sh.now() - made < secs && !sh.done.load(Ordering::Relaxed) {
        if !lock.exists() {
            return format!("removed by ralph after {:.1} s", sh.now() - made);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = fs::remove_file(&lock);
    format!("still there after {secs:.0} s: the user removed it")
}

// ---------------------------------------------------------------------------
// The disk

fn statvfs(p: &Path) -> Option<(u64, u64)> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statvfs fills the struct it is given.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    let bs = s.f_frsize as u64;
    Some((s.f_blocks as u64 * bs, s.f_bfree as u64 * bs))
}

pub fn remount(mnt: &Path, bytes: u64) -> bool {
    Command::new("mount")
        .args(["-o", &format!("remount,size={}k", bytes.div_ceil(1024))])
        .arg(mnt)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The tmpfs holding the project shrunk to what it holds (tmpfs refuses
/// less), the rest taken by a filler file, for `secs`; then its size back.
fn disk_full(sh: &Shared, secs: f64) -> String {
    let Some(mnt) = &sh.mnt else {
        return "no tmpfs (not root?): skipped".into();
    };
    let mut shrunk = false;
    for slack in [64u64 << 10, 1 << 20, 4 << 20, 16 << 20] {
        let Some((total, free)) = statvfs(mnt) else {
            break;
        };
        if remount(mnt, total - free + slack) {
            shrunk = true;
            break;
        }
    }
    let filler = mnt.join("filler");
    let mut filled = 0u64;
    if let Ok(mut f) = fs::File::create(&filler) {
        use std::io::Write;
        let block = vec![0u8; 64 << 10];
        while let Ok(n) = f.write(&block) {
            if n == 0 {
                break;
            }
            filled += n as u64;
        }
    }
    let t = sh.now();
    sh.hold(secs);
    let _ = fs::remove_file(&filler);
    let restored = remount(mnt, sh.disk_bytes);
    format!(
        "full for {:.0} s (shrunk: {shrunk}, filler {} KB, size restored: {restored})",
        sh.now() - t,
        filled >> 10
    )
}

// ---------------------------------------------------------------------------
// ralph itself

pub struct Ralph {
    pub child: Child,
    pub on: &'static str,
}

/// Starts `cmd` with its stdout and stderr on a fresh pty (`pty`) or pipe;
/// a thread reads it (except while `Shared::stalled`), counting bytes and
/// keeping the tail in `state/out-<k>.tail`.
pub fn spawn(sh: &'static Shared, mut cmd: Command, pty: bool, k: usize) -> Ralph {
    let reader: Box<dyn Read + Send> = if pty {
        let (mut master, mut slave) = (0, 0);
        let ws = libc::winsize {
            ws_row: 50,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: openpty fills the two descriptors it returns.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &ws,
            )
        };
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: a flag on a descriptor owned here; then both owned.
        unsafe {
            libc::fcntl(master, libc::F_SETFD, libc::FD_CLOEXEC);
        }
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .env("TERM", "xterm-256color");
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Box::new(fs::File::from(master))
    } else {
        let (r, w) = std::io::pipe().expect("pipe");
        cmd.stdin(Stdio::null())
            .stdout(w.try_clone().expect("pipe"))
            .stderr(w);
        Box::new(r)
    };
    let child = cmd.spawn().expect("ralph starts");
    drop(cmd);
    sh.ralph_pid.store(child.id() as i32, Ordering::SeqCst);
    let tail_file = sh.state.join(format!("out-{k}.tail"));
    let mut reader = reader;
    std::thread::spawn(move || {
        let mut tail: VecDeque<u8> = VecDeque::new();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            if sh.stalled.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    sh.out_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    tail.extend(&buf[..n]);
                    let over = tail.len().saturating_sub(256 << 10);
                    tail.drain(..over);
                }
            }
        }
        let _ = fs::write(tail_file, tail.make_contiguous());
    });
    Ralph {
        child,
        on: if pty { "pty" } else { "pipe" },
    }
}

/// Waits at most `secs` for the child to end.
pub fn wait_exit(r: &mut Ralph, secs: f64) -> Option<std::process::ExitStatus> {
    let t = Instant::now();
    loop {
        if let Ok(Some(s)) = r.child.try_wait() {
            return Some(s);
        }
        if t.elapsed().as_secs_f64() > secs {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// RSS (KB), open descriptors, threads and the anonymous part of the RSS
/// (KB; the rest is mapped files: libgit2's packs and index, the binary).
pub fn sample(pid: i32) -> Option<(u64, usize, u64, u64)> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    let fds = fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some((
        field("VmRSS:")?,
        fds,
        field("Threads:").unwrap_or(0),
        field("RssAnon:").unwrap_or(0),
    ))
}
