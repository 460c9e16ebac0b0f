//! The morning's checks, read from git, the agents' trace, the scripted
//! tracker, /proc and the samples taken during the run; rendered as the
//! Markdown BENCHMARKS.md quotes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::agent::{self, Script};
use crate::faults::{self, Shared};
use crate::{git, github_api, landings, Params, Restart};

pub struct Sample {
    pub t: f64,
    pub pid: i32,
    pub rss_kb: u64,
    pub fds: usize,
    pub threads: u64,
    pub anon_kb: u64,
}

pub struct Inputs<'a> {
    pub p: &'a Params,
    pub sh: &'static Shared,
    pub server: &'a github_api::Server,
    pub scripted: &'a BTreeMap<u64, Script>,
    pub trace: &'a Path,
    pub samples: &'a [Sample],
    pub restarts: &'a [Restart],
    pub cgroups_before: &'a [PathBuf],
    pub ended: f64,
}

pub struct Report {
    out: String,
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn list<T: std::fmt::Display>(v: &[T], most: usize) -> String {
    let mut s: Vec<String> = v.iter().take(most).map(|x| x.to_string()).collect();
    if v.len() > most {
        s.push(format!("… {} more", v.len() - most));
    }
    s.join(", ")
}

/// `git cat-file --batch` answers for `names`: the content, `None` when missing.
fn cat_files(root: &Path, names: &[String]) -> Vec<Option<String>> {
    let mut child = Command::new("git")
        .args(["cat-file", "--batch"])
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("git cat-file");
    let mut input = child.stdin.take().unwrap();
    let names_in: Vec<String> = names.to_vec();
    let writer = std::thread::spawn(move || {
        for n in names_in {
            let _ = writeln!(input, "{n}");
        }
    });
    let mut r = BufReader::new(child.stdout.take().unwrap());
    let mut out = Vec::new();
    for _ in names {
        let mut head = String::new();
        r.read_line(&mut head).unwrap();
        if head.trim_end().ends_with("missing") || head.is_empty() {
            out.push(None);
            continue;
        }
        let size: usize = head
            .split_whitespace()
            .nth(2)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut buf = vec![0; size + 1];
        r.read_exact(&mut buf).unwrap();
        buf.pop();
        out.push(Some(String::from_utf8_lossy(&buf).into_owned()));
    }
    writer.join().unwrap();
    let _ = child.wait();
    out
}

/// One agent run from the trace.
#[derive(Default, Clone)]
struct Run {
    mode: String,
    end: Option<String>,
}

fn read_trace(trace: &Path) -> BTreeMap<u64, Vec<Run>> {
    let mut m: BTreeMap<u64, Vec<Run>> = BTreeMap::new();
    for l in fs::read_to_string(trace).unwrap_or_default().lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 5 {
            continue;
        }
        let (Ok(id), Ok(n)) = (f[2].parse::<u64>(), f[3].parse::<usize>()) else {
            continue;
        };
        let runs = m.entry(id).or_default();
        while runs.len() < n {
            runs.push(Run::default());
        }
        match f[1] {
            "start" => runs[n - 1].mode = f[4].to_string(),
            "end" => runs[n - 1].end = Some(f[4].to_string()),
            _ => {}
        }
    }
    m
}

fn leaked_processes(sh: &Shared) -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    let dir = sh.run_dir.display().to_string();
    let find = || -> Vec<(i32, String)> {
        faults::processes()
            .into_iter()
            .filter(|(pid, c)| {
                *pid != me
                    && (c.contains(&dir)
                        || c.contains("soak-gen")
                        || fs::read_link(format!("/proc/{pid}/cwd"))
                            .is_ok_and(|p| p.starts_with(&sh.run_dir)))
            })
            .collect()
    };
    // What is on its way out gets 10 s.
    for _ in 0..50 {
        if find().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    find()
}

fn files_under(d: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(d).into_iter().flatten().flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

impl Report {
    pub fn gather(i: Inputs) -> Report {
        let mut o = String::new();
        let p = i.p;
        let root = &i.sh.root;
        let unix_now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let t0_unix = unix_now - i.sh.now();
        let _ = writeln!(
            o,
            "## Soak report\n\n{} stories, `-j {}`, {:.0} s of faults planned (every {:.0} s; ralph killed or stopped every {:.0} s); the run took {:.1} min; ralph's output {} MB read",
            p.stories,
            p.jobs,
            p.duration,
            p.fault_period,
            p.kill_period,
            i.ended / 60.0,
            i.sh.out_bytes.load(std::sync::atomic::Ordering::Relaxed) >> 20
        );

        // Landed exactly once.
        let lands = landings(root);
        let mut per: BTreeMap<u64, usize> = BTreeMap::new();
        for (id, _) in &lands {
            *per.entry(*id).or_default() += 1;
        }
        let twice: Vec<String> = per
            .iter()
            .filter(|(_, c)| **c > 1)
            .map(|(id, c)| format!("{id}×{c}"))
            .collect();
        let missing: Vec<u64> = (1..=p.stories).filter(|n| !per.contains_key(n)).collect();
        let once = per.values().filter(|c| **c == 1).count();
        let _ = writeln!(o, "\n### Landings\n\n- landed exactly once: **{once} of {}**; more than once: {} {}; not landed: {} {}; {:.1} landings a minute over the whole run", p.stories, twice.len(), list(&twice, 20), missing.len(), list(&missing, 30), lands.len() as f64 / (i.ended / 60.0));

        // Work present, user commits kept.
        let names: Vec<String> = (1..=p.stories)
            .map(|n| format!("main:bench-out/{n}.txt"))
            .collect();
        let content = cat_files(root, &names);
        let mut absent = Vec::new();
        let mut wrong = Vec::new();
        for (n, c) in (1..=p.stories).zip(&content) {
            match c {
                None => absent.push(n),
                Some(t) if t != &format!("story {n}\n") => wrong.push(n),
                Some(_) => {}
            }
        }
        let users = i.sh.user_commits.lock().unwrap();
        let mut lost_user = Vec::new();
        for u in users.iter() {
            let ancestor = Command::new("git")
                .args(["merge-base", "--is-ancestor", &u.sha, "main"])
                .current_dir(root)
                .status()
                .is_ok_and(|s| s.success());
            let present = cat_files(root, &[format!("main:{}", u.path)])[0].is_some();
            if !ancestor || !present {
                lost_user.push(format!(
                    "{} {} (ancestor {ancestor}, file {present})",
                    &u.sha[..10.min(u.sha.len())],
                    u.path
                ));
            }
        }
        let _ = writeln!(
            o,
            "- data lost: stories whose work is not on main: {} {}; with wrong content: {} {}; user commits lost: {} of {} {}",
            absent.len(), list(&absent, 30), wrong.len(), list(&wrong, 20), lost_user.len(), users.len(), list(&lost_user, 10)
        );

        // Agent runs.
        let trace = read_trace(i.trace);
        let (mut total, mut cut, mut disk, mut finished_extra) = (0, 0, 0, 0);
        let mut extra_ids = Vec::new();
        let mut cut_ids = Vec::new();
        for (id, runs) in &trace {
            total += runs.len();
            let mut ok = 0;
            for r in runs {
                let end = r.end.as_deref().unwrap_or("");
                if end.starts_with("ok-") && r.mode != "broken" {
                    ok += 1;
                }
                if matches!(r.mode.as_str(), "fail" | "ignore" | "broken" | "fixup") {
                    // Allowed by the script.
                } else if end == "commit-failed" {
                    disk += 1;
                } else if r.end.is_none() {
                    cut += 1;
                    cut_ids.push(*id);
                }
            }
            if ok > 1 {
                finished_extra += ok - 1;
                extra_ids.push(format!("{id}×{ok}"));
            }
        }
        let expected: usize = (1..=p.stories)
            .map(|n| agent::scripted_runs(i.scripted.get(&n)))
            .sum();
        let beyond = total.saturating_sub(expected);
        let _ = writeln!(
            o,
            "- agent runs: {total} for {} stories (scripted: {expected}, of which {} first attempts scripted to fail, time out deaf to SIGTERM or break validation); beyond the script: **{beyond}**, of which cut short by a kill or stop of ralph (no end in the trace) {cut}, failed to commit on the full disk {disk}; finished work done again (a second successful run of a story): **{finished_extra}** {}",
            p.stories, i.scripted.len(), list(&extra_ids, 20)
        );
        cut_ids.dedup();

        // The tracker.
        {
            let api = i.server.api.lock().unwrap();
            let open: Vec<u64> = api
                .issues
                .values()
                .filter(|x| x.open)
                .map(|x| x.number)
                .collect();
            let mut comments: BTreeMap<usize, usize> = BTreeMap::new();
            for x in api.issues.values() {
                *comments.entry(x.comments.len()).or_default() += 1;
            }
            let labelled: Vec<u64> = api
                .issues
                .values()
                .filter(|x| x.labels.iter().any(|l| l.starts_with("ralph:")))
                .map(|x| x.number)
                .collect();
            // A request ralph gave up on is logged twice: as hung, then given up.
            let calls = api
                .log
                .iter()
                .filter(|l| !l.ends_with("(given up)"))
                .count();
            let hung = api.log.iter().filter(|l| l.ends_with("(hung)")).count();
            let left = |name: &str| {
                let text =
                    fs::read_to_string(root.join(".ralph/tracker").join(name)).unwrap_or_default();
                if text.trim().is_empty() || text.trim() == "[]" {
                    "none".to_string()
                } else {
                    format!("{} bytes", text.len())
                }
            };
            let _ = writeln!(
                o,
                "- tracker: issues still open {} {}; comments per issue {:?}; status labels left {} {}; requests {calls} ({hung} hung); writes still queued: {}; status changes journaled, not yet queued: {}",
                open.len(), list(&open, 20), comments, labelled.len(), list(&labelled, 10),
                left("pending.json"), left("journal.json")
            );
        }

        // Leaks.
        let procs = leaked_processes(i.sh);
        let wt = git(root, &["worktree", "list", "--porcelain"]);
        let worktrees: Vec<&str> = wt
            .lines()
            .filter_map(|l| l.strip_prefix("worktree "))
            .filter(|w| Path::new(w) != root.as_path())
            .collect();
        let wt_dirs: Vec<String> = fs::read_dir(root.join(".ralph/worktrees"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        let refs = git(root, &["for-each-ref", "--format=%(refname)"]);
        let mut ref_kinds: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in refs.lines().filter(|r| *r != "refs/heads/main") {
            let kind: String = r.split('/').take(3).collect::<Vec<_>>().join("/");
            ref_kinds.entry(kind).or_default().push(r.to_string());
        }
        let mut tmp = Vec::new();
        files_under(
            &i.sh
                .mnt
                .clone()
                .unwrap_or_else(|| root.parent().unwrap().to_path_buf())
                .join("tmp"),
            &mut tmp,
        );
        let mut stray = Vec::new();
        let mut all = Vec::new();
        files_under(&root.join(".ralph"), &mut all);
        files_under(&root.join(".git"), &mut all);
        for f in all {
            let n = f
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            if n.ends_with(".lock") || n.contains(".tmp") || n.starts_with("tmp") {
                stray.push(f.strip_prefix(root).unwrap_or(&f).display().to_string());
            }
        }
        let after = crate::cgroups(&crate::project_tag(root));
        let new_cgroups: Vec<String> = after
            .iter()
            .filter(|c| !i.cgroups_before.contains(c))
            .map(|c| c.display().to_string())
            .collect();
        let _ = writeln!(o, "\n### Leaks (after the last ralph exited)\n");
        let _ = writeln!(
            o,
            "- processes: {} {}",
            procs.len(),
            list(
                &procs
                    .iter()
                    .map(|(p, c)| format!("{p} `{}`", c.chars().take(100).collect::<String>()))
                    .collect::<Vec<_>>(),
                10
            )
        );
        let _ = writeln!(
            o,
            "- worktrees: {} registered {}; {} under .ralph/worktrees {}",
            worktrees.len(),
            list(&worktrees, 5),
            wt_dirs.len(),
            list(&wt_dirs, 10)
        );
        // Kept refs are by design (nothing lost): a failed attempt's work,
        // an interrupted one's uncommitted files. Anything else is a leak.
        let kept = ref_kinds.remove("refs/ralph/attempts").unwrap_or_default();
        let uncommitted = kept.iter().filter(|r| r.ends_with("-uncommitted")).count();
        let of_broken = kept
            .iter()
            .filter(|r| !r.ends_with("-uncommitted"))
            .filter(|r| {
                r.split('/')
                    .nth(3)
                    .and_then(|id| id.parse::<u64>().ok())
                    .is_some_and(|id| i.scripted.get(&id) == Some(&Script::Broken))
            })
            .count();
        let others: Vec<String> = kept
            .iter()
            .filter(|r| !r.ends_with("-uncommitted"))
            .cloned()
            .collect();
        let _ = writeln!(
            o,
            "- refs besides main, not by design: {}; kept by design: {} under refs/ralph/attempts ({uncommitted} an interrupted attempt's uncommitted work, {of_broken} the first attempt of a story scripted to fail validation, {} other: {})",
            if ref_kinds.is_empty() { "none".to_string() } else { ref_kinds.iter().map(|(k, v)| format!("{k}: {} ({})", v.len(), list(v, 4))).collect::<Vec<_>>().join("; ") },
            kept.len(),
            kept.len() - uncommitted - of_broken,
            list(&others, 6)
        );
        let _ = writeln!(
            o,
            "- temp files: {} in TMPDIR {}; lock/temp files in .ralph and .git: {} {}",
            tmp.len(),
            list(
                &tmp.iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>(),
                5
            ),
            stray.len(),
            list(&stray, 10)
        );
        let _ = writeln!(
            o,
            "- cgroups made and not removed: {} {}",
            new_cgroups.len(),
            list(&new_cgroups, 5)
        );
        for (pid, _) in &procs {
            faults::signal(*pid, libc::SIGKILL);
        }

        // Faults and restarts.
        let events = i.sh.events.lock().unwrap();
        let mut by_class: BTreeMap<&str, Vec<&faults::Event>> = BTreeMap::new();
        for e in events.iter() {
            by_class.entry(e.class).or_default().push(e);
        }
        let _ = writeln!(o, "\n### Faults injected\n\n| fault | times | landings/min while it lasted | what happened (first ones) |\n|---|---|---|---|");
        let kills: Vec<&Restart> = i.restarts.iter().filter(|r| r.how == "kill -9").collect();
        let terms: Vec<&Restart> = i
            .restarts
            .iter()
            .filter(|r| r.how.starts_with("SIGTERM"))
            .collect();
        let _ = writeln!(
            o,
            "| kill -9 of ralph, restarted at once | {} | – | at {} s |",
            kills.len(),
            list(
                &kills
                    .iter()
                    .map(|r| format!("{:.0}", r.t))
                    .collect::<Vec<_>>(),
                12
            )
        );
        let _ = writeln!(
            o,
            "| SIGTERM to ralph (stop), restarted at once | {} | – | exit after {} s |",
            terms.len(),
            list(
                &terms
                    .iter()
                    .map(|r| {
                        let unread = if r.how.contains("not read") {
                            " (output unread)"
                        } else {
                            ""
                        };
                        r.exit_secs
                            .map_or("never".into(), |s| format!("{s:.1}{unread}"))
                    })
                    .collect::<Vec<_>>(),
                12
            )
        );
        let ignorers: Vec<u64> = trace
            .iter()
            .filter(|(_, runs)| runs.iter().any(|r| r.mode == "ignore"))
            .map(|(id, _)| *id)
            .collect();
        let log = fs::read_to_string(root.join("ralph.log")).unwrap_or_default();
        let timed_out: BTreeSet<u64> = log
            .lines()
            .filter(|l| l.contains("Timeout after") || l.contains("timed out"))
            .filter_map(|l| {
                l.split_once("] story ")?
                    .1
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .collect();
        let by_timeout = ignorers.iter().filter(|id| timed_out.contains(id)).count();
        let survived = trace
            .values()
            .flatten()
            .filter(|r| r.end.as_deref() == Some("ignored-timeout"))
            .count();
        let _ = writeln!(o, "| agent deaf to SIGTERM past the timeout (scripted) | {} | – | {by_timeout} stopped by ralph at `loop.timeout_seconds` (SIGTERM ignored, SIGKILL after `loop.grace_seconds`), the others by a restart of ralph first; {survived} outlived ralph's stop |", ignorers.len());
        for c in faults::CLASSES {
            let v = by_class.get(c).cloned().unwrap_or_default();
            let mut seen: Vec<String> = Vec::new();
            for e in &v {
                if !seen.contains(&e.detail) && seen.len() < 3 {
                    seen.push(e.detail.clone());
                }
            }
            let (mut secs, mut landed) = (0.0, 0);
            for e in &v {
                secs += e.end - e.start;
                landed += lands
                    .iter()
                    .filter(|(_, t)| {
                        let rel = *t as f64 - t0_unix;
                        rel >= e.start && rel < e.end
                    })
                    .count();
            }
            let rate = if secs > 1.0 {
                format!("{:.1}", landed as f64 / secs * 60.0)
            } else {
                "–".into()
            };
            let _ = writeln!(
                o,
                "| {c} | {} | {rate} | at {} s: {} |",
                v.len(),
                list(
                    &v.iter()
                        .map(|e| format!("{:.0}", e.start))
                        .collect::<Vec<_>>(),
                    8
                ),
                seen.join(" · ")
            );
        }
        // What ralph said about its stops and stalls.
        let secs = |l: &str| -> Option<f64> {
            let ts = l.strip_prefix('[')?.get(11..23)?;
            let h: f64 = ts.get(0..2)?.parse().ok()?;
            let m: f64 = ts.get(3..5)?.parse().ok()?;
            let s: f64 = ts.get(6..12)?.parse().ok()?;
            Some(h * 3600.0 + m * 60.0 + s)
        };
        let lines: Vec<&str> = log.lines().collect();
        let (mut drains, mut idle, mut longest) = (0, 0.0f64, 0.0f64);
        for (k, l) in lines.iter().enumerate() {
            if !l.contains("new work is taken in once the running stories are done") {
                continue;
            }
            drains += 1;
            let Some(t) = secs(l) else { continue };
            if let Some(t2) = lines[k + 1..]
                .iter()
                .find(|n| n.contains("] start story "))
                .and_then(|n| secs(n))
            {
                idle += t2 - t;
                longest = longest.max(t2 - t);
            }
        }
        let _ = writeln!(o, "\n`backlog: … changed; new work is taken in once the running stories are done` (no story started meanwhile): {drains} times in ralph.log, {idle:.0} s in all until the next start, the longest {longest:.0} s");
        let mut errors: BTreeMap<String, usize> = BTreeMap::new();
        for e in fs::read_dir(&i.sh.state).into_iter().flatten().flatten() {
            if !e.file_name().to_string_lossy().ends_with(".tail") {
                continue;
            }
            let text =
                String::from_utf8_lossy(&fs::read(e.path()).unwrap_or_default()).into_owned();
            for l in text.split(['\n', '\r']) {
                if let Some(m) = l.trim_start().strip_prefix("error: ") {
                    let m: String = m.chars().take(90).collect();
                    let m = m
                        .split(|c: char| c.is_ascii_digit())
                        .collect::<Vec<_>>()
                        .join("N");
                    *errors.entry(m).or_default() += 1;
                }
            }
        }
        if !errors.is_empty() {
            let _ = writeln!(o, "\nralph's `error:` lines at its exits (digits as N):\n");
            for (m, n) in &errors {
                let _ = writeln!(o, "- {n}× {m}…");
            }
        }
        let on: Vec<String> = i.restarts.iter().map(|r| r.on.to_string()).collect();
        let selfexits: Vec<String> = i
            .restarts
            .iter()
            .filter(|r| r.how == "exited by itself")
            .map(|r| format!("{:.0} s: {:?}", r.t, r.code))
            .collect();
        let _ = writeln!(
            o,
            "\nralph ran {} times (output on: {}); exited by itself: {}",
            i.restarts.len(),
            on.join(" "),
            list(&selfexits, 12)
        );

        // Over time: landings per minute, RSS, descriptors.
        let bucket = if p.duration >= 1200.0 { 300.0 } else { 60.0 };
        let n = (i.ended / bucket).ceil().max(1.0) as usize;
        let _ = writeln!(o, "\n### Over time ({:.0}-minute buckets)\n\n| from (min) | landings/min | ralph RSS MB min – median – max | open fds min – median – max | threads max |\n|---|---|---|---|---|", bucket / 60.0);
        for b in 0..n {
            let (lo, hi) = (b as f64 * bucket, (b + 1) as f64 * bucket);
            let landed = lands
                .iter()
                .filter(|(_, t)| {
                    let rel = *t as f64 - t0_unix;
                    rel >= lo && rel < hi
                })
                .count();
            let span = (hi.min(i.ended) - lo).max(1.0) / 60.0;
            let s: Vec<&Sample> = i.samples.iter().filter(|s| s.t >= lo && s.t < hi).collect();
            let mut rss: Vec<f64> = s.iter().map(|s| s.rss_kb as f64 / 1024.0).collect();
            let mut fds: Vec<f64> = s.iter().map(|s| s.fds as f64).collect();
            let th = s.iter().map(|s| s.threads).max().unwrap_or(0);
            let mm = |v: &mut Vec<f64>, d: usize| {
                if v.is_empty() {
                    return "–".to_string();
                }
                let m = median(v);
                format!("{:.p$} – {:.p$} – {:.p$}", v[0], m, v[v.len() - 1], p = d)
            };
            let _ = writeln!(
                o,
                "| {:.0} | {:.1} | {} | {} | {th} |",
                lo / 60.0,
                landed as f64 / span,
                mm(&mut rss, 1),
                mm(&mut fds, 0)
            );
        }
        let _ = writeln!(
            o,
            "\nralph processes sampled: {} (one per start); samples: {}",
            i.samples
                .iter()
                .map(|s| s.pid)
                .collect::<BTreeSet<_>>()
                .len(),
            i.samples.len()
        );
        // Each ralph process on its own: RSS and descriptors at its first
        // and last sample (a leak grows within a process, whatever the
        // restarts hide).
        let mut per_pid: BTreeMap<i32, (f64, &Sample, &Sample)> = BTreeMap::new();
        for s in i.samples {
            per_pid
                .entry(s.pid)
                .and_modify(|e| e.2 = s)
                .or_insert((s.t, s, s));
        }
        let longest: Vec<String> = {
            let mut v: Vec<&(f64, &Sample, &Sample)> = per_pid.values().collect();
            v.sort_by(|a, b| (b.2.t - b.1.t).partial_cmp(&(a.2.t - a.1.t)).unwrap());
            v.iter()
                .take(5)
                .map(|(_, a, b)| {
                    format!(
                        "{:.0} s: {:.1} → {:.1} MB (anonymous {:.1} → {:.1}), {} → {} fds",
                        b.t - a.t,
                        a.rss_kb as f64 / 1024.0,
                        b.rss_kb as f64 / 1024.0,
                        a.anon_kb as f64 / 1024.0,
                        b.anon_kb as f64 / 1024.0,
                        a.fds,
                        b.fds
                    )
                })
                .collect()
        };
        let _ = writeln!(
            o,
            "\nthe longest-lived ralph processes, first → last sample: {}",
            longest.join("; ")
        );
        let csv: String = i
            .samples
            .iter()
            .map(|s| {
                format!(
                    "{:.1},{},{},{},{},{}\n",
                    s.t, s.pid, s.rss_kb, s.fds, s.threads, s.anon_kb
                )
            })
            .collect();
        let _ = fs::write(
            i.sh.state.join("samples.csv"),
            format!("t,pid,rss_kb,fds,threads,anon_kb\n{csv}"),
        );
        Report { out: o }
    }

    pub fn render(&self) -> String {
        self.out.clone()
    }
}
