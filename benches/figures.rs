//! The figures of BENCHMARKS.md, measured on the release `ralph` binary.
//!
//! `cargo bench --bench figures [-- FIGURE...] [--quick] [--write]`
//!
//! FIGURE is one of `rss`, `validate`, `makespan`, `makespan-ref`, `overhead`,
//! `latency`, `conflicts`, `report`, `sandbox`, `tracker-poll`, `serve`, `ladder`, `predict-makespan`, `forecast`, `gates`, `landing`, `conflicts-declared`, `best-of` (default: all). `RALPH_BENCH_BIN` measures another
//! ralph binary than the one cargo built (a copy of an older build, say). `conflicts` also measures the binary named by
//! `RALPH_BENCH_BASELINE`, when set (an older ralph, for before/after). `--quick` takes fewer samples (a smoke run, not for the
//! record). `--write` replaces the tables between the `<!-- bench:NAME -->`
//! markers of BENCHMARKS.md; without it nothing is written into the repo.
//! `serve` opens the page in headless Chromium when one is on PATH, unless
//! `RALPH_BENCH_NO_BROWSER` is set.
//!
//! Every input (git repositories, backlogs, fake agents) is generated in temp
//! dirs. The fake agent is a bash script named `claude` first on PATH: it
//! reads the prompt from stdin, takes the story ID from the line saying
//! `implement Story <id>:`, and prints Claude Code stream-json.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

#[path = "../tests/it/github_api.rs"]
mod github_api;

#[path = "figures/best_of.rs"]
mod best_of;

const FIGURES: [&str; 21] = [
    "rss",
    "rss-agents",
    "validate",
    "makespan",
    "makespan-ref",
    "overhead",
    "latency",
    "conflicts",
    "report",
    "sandbox",
    "tracker-poll",
    "serve",
    "ladder",
    "predict-makespan",
    "forecast",
    "gates",
    "queue",
    "queue-batch",
    "landing",
    "conflicts-declared",
    "best-of",
];
const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");

fn main() {
    let mut selected: Vec<String> = Vec::new();
    let mut write = false;
    let mut quick = false;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--write" => write = true,
            "--quick" => quick = true,
            // cargo passes `--bench` to every bench binary.
            "--bench" => {}
            f if FIGURES.contains(&f) => selected.push(f.to_string()),
            other => {
                eprintln!(
                    "unknown argument {other:?}; figures: {} (flags: --quick, --write)",
                    FIGURES.join(", ")
                );
                std::process::exit(2);
            }
        }
    }
    if selected.is_empty() {
        selected = FIGURES.iter().map(|s| s.to_string()).collect();
    }
    let bin = ralph_bin();
    let machine = Machine::probe();
    println!("ralph: {}", bin.display());
    println!("{}", machine.line());
    println!();

    let mut done: Vec<Figure> = Vec::new();
    for name in &selected {
        let load_before = loadavg();
        let started = Instant::now();
        let mut fig = match name.as_str() {
            "rss" => fig_rss(&bin, quick),
            "rss-agents" => fig_rss_agents(&bin, quick),
            "validate" => fig_validate(&bin, quick),
            "makespan" => fig_makespan(&bin, quick),
            "makespan-ref" => fig_makespan_ref(&bin, quick),
            "overhead" => fig_overhead(&bin, quick),
            "latency" => fig_latency(&bin, quick),
            "conflicts" => fig_conflicts(&bin, quick),
            "report" => fig_report(&bin, quick),
            "sandbox" => fig_sandbox(&bin, quick),
            "tracker-poll" => fig_tracker_poll(&bin, quick),
            "serve" => fig_serve(&bin, quick),
            "ladder" => fig_ladder(&bin, quick),
            "predict-makespan" => fig_predict_makespan(&bin, quick),
            "forecast" => fig_forecast(&bin, quick),
            "gates" => fig_gates(&bin, quick),
            "queue" => fig_queue(&bin, quick),
            "queue-batch" => fig_queue_batch(&bin, quick),
            "landing" => fig_landing(&bin, quick),
            "conflicts-declared" => fig_conflicts_declared(&bin, quick),
            "best-of" => best_of::fig_best_of(&bin, quick),
            _ => unreachable!(),
        };
        fig.notes.push(format!(
            "load average (1 min) {load_before} before, {} after; figure took {:.0} s",
            loadavg(),
            started.elapsed().as_secs_f64()
        ));
        print!("{}", fig.text());
        println!();
        done.push(fig);
    }
    if write {
        if quick {
            eprintln!("--write ignored with --quick: quick runs are not for the record");
        } else {
            write_markdown(&machine, &done);
        }
    }
}

// ---------------------------------------------------------------------------
// Environment

fn ralph_bin() -> PathBuf {
    // Cargo sets this for benches (it builds the binary target first, in the
    // bench profile, which inherits `release`).
    let p = match (
        std::env::var_os("RALPH_BENCH_BIN"),
        option_env!("CARGO_BIN_EXE_ralph"),
    ) {
        (Some(p), _) => PathBuf::from(p),
        (None, Some(p)) => PathBuf::from(p),
        (None, None) => Path::new(MANIFEST_DIR).join("target/release/ralph"),
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

struct Machine {
    nproc: usize,
    model: String,
    kernel: String,
    date: String,
    commit: String,
}

impl Machine {
    fn probe() -> Machine {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let model = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .and_then(|r| r.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
            model,
            kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_string(),
            date: cmd_stdout(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"])),
            commit: cmd_stdout(Command::new("git").args([
                "-C",
                MANIFEST_DIR,
                "rev-parse",
                "--short",
                "HEAD",
            ])),
        }
    }

    fn line(&self) -> String {
        format!(
            "machine: {} CPUs (nproc), {}, Linux {}; {}; ralph at {}",
            self.nproc, self.model, self.kernel, self.date, self.commit
        )
    }
}

fn cmd_stdout(c: &mut Command) -> String {
    c.output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_string()
}

// ---------------------------------------------------------------------------
// Statistics and tables

#[derive(Clone, Copy)]
enum Cmp {
    Lt,
    Le,
}

struct Row {
    metric: String,
    unit: &'static str,
    samples: Vec<f64>,
    target: Option<(Cmp, f64)>,
}

impl Row {
    fn new(metric: &str, unit: &'static str, samples: Vec<f64>) -> Row {
        Row {
            metric: metric.into(),
            unit,
            samples,
            target: None,
        }
    }

    fn target(mut self, cmp: Cmp, value: f64) -> Row {
        self.target = Some((cmp, value));
        self
    }

    fn met(&self) -> Option<bool> {
        let m = median(&self.samples);
        self.target.map(|(c, v)| match c {
            Cmp::Lt => m < v,
            Cmp::Le => m <= v,
        })
    }

    fn cells(&self) -> [String; 7] {
        let s = &self.samples;
        let f = |v: f64| fmt_num(v, self.unit);
        let (q1, q3) = (quantile(s, 0.25), quantile(s, 0.75));
        [
            self.metric.clone(),
            format!("{} {}", f(median(s)), self.unit),
            format!("{} – {}", f(min(s)), f(max(s))),
            if s.len() >= 4 {
                format!("{} – {}", f(q1), f(q3))
            } else {
                "–".into()
            },
            s.len().to_string(),
            match self.target {
                Some((Cmp::Lt, v)) => format!("< {} {}", fmt_num(v, self.unit), self.unit),
                Some((Cmp::Le, v)) => format!("≤ {} {}", fmt_num(v, self.unit), self.unit),
                None => String::new(),
            },
            match self.met() {
                Some(true) => "yes".into(),
                Some(false) => "**no**".into(),
                None => String::new(),
            },
        ]
    }
}

const HEADER: [&str; 7] = ["metric", "median", "min – max", "IQR", "n", "target", "met"];

struct Figure {
    name: &'static str,
    title: &'static str,
    rows: Vec<Row>,
    notes: Vec<String>,
}

impl Figure {
    fn new(name: &'static str, title: &'static str) -> Figure {
        Figure {
            name,
            title,
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn text(&self) -> String {
        let cells: Vec<[String; 7]> = self.rows.iter().map(Row::cells).collect();
        let mut width = HEADER.map(|h| h.chars().count());
        for r in &cells {
            for (w, c) in width.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let mut out = format!("== {} ({})\n", self.title, self.name);
        let line = |cols: &[String]| {
            let mut l = String::new();
            for (c, w) in cols.iter().zip(width) {
                let pad = w.saturating_sub(c.chars().count());
                let _ = write!(l, "{c}{}  ", " ".repeat(pad));
            }
            l.trim_end().to_string() + "\n"
        };
        out += &line(&HEADER.map(String::from));
        for r in &cells {
            out += &line(&r.clone().map(|c| c.replace("**", "")));
        }
        for n in &self.notes {
            out += &format!("  {n}\n");
        }
        out
    }

    fn markdown(&self) -> String {
        let mut out = format!("| {} |\n", HEADER.join(" | "));
        out += &format!("|{}\n", "---|".repeat(HEADER.len()));
        for r in &self.rows {
            out += &format!("| {} |\n", r.cells().join(" | "));
        }
        out += "\n";
        for n in &self.notes {
            out += &format!("- {n}\n");
        }
        out
    }
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let s = sorted(v);
    let pos = q * (s.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

fn median(v: &[f64]) -> f64 {
    quantile(v, 0.5)
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

fn fmt_num(v: f64, unit: &str) -> String {
    match unit {
        "×" | "per landing" => format!("{v:.3}"),
        "$" => format!("{v:.4}"),
        "s" => format!("{v:.2}"),
        "MB/s" | "MB" | "ms" | "%" => format!("{v:.1}"),
        _ => format!("{v}"),
    }
}

fn write_markdown(machine: &Machine, figs: &[Figure]) {
    let path = Path::new(MANIFEST_DIR).join("BENCHMARKS.md");
    let mut doc = fs::read_to_string(&path).unwrap_or_else(|_| "# Benchmarks\n".into());
    let mut blocks: Vec<(String, String)> = vec![("machine".into(), machine.line() + "\n")];
    for f in figs {
        blocks.push((f.name.to_string(), f.markdown()));
    }
    for (name, body) in blocks {
        let open = format!("<!-- bench:{name} -->");
        let close = format!("<!-- /bench:{name} -->");
        let block = format!("{open}\n{body}{close}");
        match (doc.find(&open), doc.find(&close)) {
            (Some(a), Some(b)) if b > a => doc.replace_range(a..b + close.len(), &block),
            _ => doc = format!("{}\n\n## {name}\n\n{block}\n", doc.trim_end()),
        }
    }
    fs::write(&path, doc).expect("write BENCHMARKS.md");
    println!("updated {}", path.display());
}

// ---------------------------------------------------------------------------
// Backlogs, projects and fake agents

#[derive(Clone)]
struct Story {
    id: String,
    title: String,
    est: &'static str,
    deps: Vec<String>,
}

/// A stories.txt section: `None` = unbatched (before any batch line).
struct Section {
    label: Option<String>,
    comment: Option<String>,
    stories: Vec<Story>,
}

struct Backlog {
    sections: Vec<Section>,
}

impl Backlog {
    fn stories(&self) -> impl Iterator<Item = &Story> {
        self.sections.iter().flat_map(|s| s.stories.iter())
    }

    fn queue(&self) -> String {
        let mut q = String::from("# generated by benches/figures.rs\n");
        for s in &self.sections {
            if let Some(l) = &s.label {
                let _ = writeln!(q, "\n# [batch:{l}]");
            }
            if let Some(c) = &s.comment {
                let _ = writeln!(q, "# {c}");
            }
            for st in &s.stories {
                let _ = writeln!(q, "{} | {}", st.id, st.title);
            }
        }
        q
    }

    fn spec(st: &Story) -> (String, String) {
        let epic = st.id.split('.').next().unwrap_or("0");
        let slug: String = st
            .title
            .to_ascii_lowercase()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join("-");
        let deps = st
            .deps
            .iter()
            .map(|d| format!("\"{d}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let text = format!(
            "---\nid: \"{id}\"\nepic: {epic}\ntitle: \"{title}\"\nstatus: pending\npriority: 2\n\
             estimation: {est}\ndepends_on: [{deps}]\n---\n\n# Story {id}: {title}\n\n\
             As a user I want {lower} so that the product moves forward.\n\n\
             ## Acceptance criteria\n\n- {title} works end to end\n- errors name the file and line\n\
             - unit tests cover the happy path and one failure\n\n## Notes\n\n\
             Keep the change small; follow the conventions of the surrounding code.\n",
            id = st.id,
            title = st.title,
            est = st.est,
            lower = st.title.to_ascii_lowercase(),
        );
        (format!("specs/epic-{epic}/story-{}-{slug}.md", st.id), text)
    }

    fn write_to(&self, root: &Path) {
        write(root, ".ralph/stories.txt", &self.queue());
        for st in self.stories() {
            let (rel, text) = Backlog::spec(st);
            write(root, &rel, &text);
        }
    }

    /// SPEC 3.5, implemented here independently of ralph: each story waits
    /// for its depends_on and for every story of all earlier sections;
    /// unbatched and `[batch:0]` stories form a chain in file order.
    fn waits(&self) -> (Vec<Story>, Vec<Vec<usize>>) {
        let all: Vec<Story> = self.stories().cloned().collect();
        let index: HashMap<&str, usize> = all
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), i))
            .collect();
        let mut waits: Vec<Vec<usize>> = vec![Vec::new(); all.len()];
        let mut earlier: Vec<usize> = Vec::new();
        let mut i = 0;
        for sec in &self.sections {
            let chain = sec.label.as_deref().is_none_or(|l| l == "0");
            let members: Vec<usize> = (i..i + sec.stories.len()).collect();
            for (k, &m) in members.iter().enumerate() {
                waits[m].extend(earlier.iter().copied());
                if chain && k > 0 {
                    waits[m].push(members[k - 1]);
                }
                for d in &all[m].deps {
                    waits[m].push(index[d.as_str()]);
                }
                waits[m].sort_unstable();
                waits[m].dedup();
            }
            earlier.extend(members);
            i += sec.stories.len();
        }
        (all, waits)
    }
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().expect("a file has a parent")).expect("mkdir");
    fs::write(p, text).expect("write file");
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A new repository at `dir` on `main`, committing as the bench (unsigned,
/// whatever the user's global config says).
fn git_init(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    for (k, v) in [
        ("user.name", "Bench"),
        ("user.email", "bench@example.com"),
        ("commit.gpgsign", "false"),
    ] {
        git(dir, &["config", k, v]);
    }
}

struct Project {
    tmp: TempDir,
    root: PathBuf,
    bin: PathBuf,
}

impl Project {
    /// A git repo on `main` holding the backlog (and whatever `extra` adds),
    /// committed, with a fake agent `claude` whose body is `agent_body`.
    fn new(backlog: &Backlog, agent_body: &str, extra: impl FnOnce(&Path)) -> Project {
        Project::new_in(&std::env::temp_dir(), backlog, agent_body, extra)
    }

    /// As `new`, with the temp dir under `base`.
    fn new_in(
        base: &Path,
        backlog: &Backlog,
        agent_body: &str,
        extra: impl FnOnce(&Path),
    ) -> Project {
        let mut tmp = tempfile::Builder::new()
            .prefix("ralph-bench-")
            .tempdir_in(base)
            .expect("tempdir");
        if std::env::var_os("RALPH_BENCH_KEEP").is_some() {
            tmp.disable_cleanup(true);
            eprintln!("  keeping {}", tmp.path().display());
        }
        let root = tmp.path().join("proj");
        let bin = tmp.path().join("bin");
        fs::create_dir_all(&root).expect("mkdir");
        fs::create_dir_all(&bin).expect("mkdir");
        git_init(&root);
        write(&root, "README.md", "bench project\n");
        write(
            &root,
            ".ralph/config.json",
            "{ \"loop\": { \"max_retries\": 1 } }\n",
        );
        backlog.write_to(&root);
        extra(&root);
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-qm", "bench project"]);
        // Settles the index stat data so nobody pays a refresh in the timing.
        git(&root, &["status", "--porcelain"]);
        let p = Project { tmp, root, bin };
        p.agent(agent_body);
        p
    }

    fn agent(&self, body: &str) {
        self.agent_named("claude", body);
    }

    /// The fake agent under another backend's executable name.
    fn agent_named(&self, name: &str, body: &str) {
        let path = self.bin.join(name);
        fs::write(&path, format!("{AGENT_PRELUDE}\n{body}\n")).expect("write agent");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    fn path_env(&self) -> String {
        format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// `ralph ARGS` in the project, output to files next to the project.
    fn ralph(&self, bin: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(bin);
        c.args(args)
            .current_dir(&self.root)
            .env("PATH", self.path_env())
            .env("HOME", self.tmp.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("CI", "1")
            .env_remove("RALPH_ATTEMPT_TOKEN")
            .env_remove("CLAUDECODE")
            .stdin(Stdio::null())
            .stdout(fs::File::create(self.tmp.path().join("stdout")).expect("stdout file"))
            .stderr(fs::File::create(self.tmp.path().join("stderr")).expect("stderr file"));
        c
    }

    fn output_tail(&self) -> String {
        let mut s = String::new();
        for f in ["stdout", "stderr"] {
            let t = fs::read_to_string(self.tmp.path().join(f)).unwrap_or_default();
            let lines: Vec<&str> = t.lines().collect();
            let _ = writeln!(s, "--- {f}");
            for l in &lines[lines.len().saturating_sub(15)..] {
                let _ = writeln!(s, "{l}");
            }
        }
        s
    }

    /// Runs ralph to completion; panics (with its output) unless it exits 0.
    fn run_ok(&self, bin: &Path, args: &[&str]) -> Duration {
        let t = Instant::now();
        let status = self.ralph(bin, args).status().expect("ralph starts");
        let wall = t.elapsed();
        self.check(status, args);
        wall
    }

    fn check(&self, status: ExitStatus, args: &[&str]) {
        assert!(
            status.success(),
            "ralph {args:?} in {} ended with {status}\n{}",
            self.root.display(),
            self.output_tail()
        );
    }

    fn log(&self) -> String {
        fs::read_to_string(self.root.join("ralph.log")).unwrap_or_default()
    }

    fn merges_on_main(&self) -> usize {
        let out = Command::new("git")
            .args(["log", "--first-parent", "--format=%s", "main"])
            .current_dir(&self.root)
            .output()
            .expect("git log");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("merge: story "))
            .count()
    }
}

/// Shared start of every fake agent: the prompt from stdin, the story ID
/// from the line naming it (RALPH_STORY only as a fallback), helpers that
/// print stream-json.
const AGENT_PRELUDE: &str = r#"#!/bin/bash
prompt="$(cat)"
first="$(printf '%s\n' "$prompt" | grep -m1 'implement Story ')"
id=""
case "$first" in
  *"implement Story "*:*) id="${first#*implement Story }"; id="${id%%:*}" ;;
esac
[ -n "$id" ] || id="$RALPH_STORY"
# RALPH_BENCH_TRACE=FILE (profiling only): the agent's own start and end.
trace() { [ -z "$RALPH_BENCH_TRACE" ] || printf '%s %s %s\n' "$id" "$1" "$(date +%s.%3N)" >> "$RALPH_BENCH_TRACE"; }
trace start
init() { printf '{"type":"system","subtype":"init","session_id":"bench-%s","tools":["Bash"]}\n' "$id"; }
say() { printf '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"%s"}]}}\n' "$1"; }
finish() {
  mkdir -p bench-out
  printf '%s\n' "$id" > "bench-out/$id.txt"
  git add "bench-out/$id.txt" && git commit -q -m "feat(story-$id): bench change"
  say "implemented $id"
  printf '{"type":"result","subtype":"success","is_error":false,"result":"done <ralph>DONE %s</ralph>","num_turns":2,"total_cost_usd":0.001,"usage":{"input_tokens":10,"output_tokens":5,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}\n' "$id"
  trace end
}
init
"#;

/// An agent that sleeps the duration listed for its story, then commits.
fn sleeping_agent(durations: &[(String, f64)]) -> String {
    let mut s = String::from("case \"$id\" in\n");
    for (id, d) in durations {
        let _ = writeln!(s, "  \"{id}\") sleep {d:.3} ;;");
    }
    s += "esac\nfinish\n";
    s
}

/// The generator of figure 1: ~`bytes` of stream-json made of assistant
/// text blocks, tool calls and tool results of a few KB each.
const STREAM_GEN: &str = r#"
import json, sys
total = int(sys.argv[1])
words = ("the parser keeps every line under a megabyte and the merge queue "
         "lands one story at a time while tests run in the worktree").split()
def prose(n, seed):
    out, i = [], seed
    size = 0
    while size < n:
        w = words[i % len(words)]
        out.append(w)
        size += len(w) + 1
        i = i * 7 + 3
        if i % 13 == 0:
            out.append("\n")
    return " ".join(out)
lines, size, k = [], 0, 0
while size < (1 << 20):
    k += 1
    for ev in (
        {"type": "assistant", "message": {"id": "msg_%d" % k, "role": "assistant",
         "content": [{"type": "text", "text": prose(3000, k)}]}},
        {"type": "assistant", "message": {"id": "msg_%db" % k, "role": "assistant",
         "content": [{"type": "tool_use", "id": "toolu_%d" % k, "name": "Bash",
                      "input": {"command": "cat src/module_%d.rs" % k}}]}},
        {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result",
         "tool_use_id": "toolu_%d" % k, "content": prose(4000, k + 5), "is_error": False}]}},
    ):
        line = json.dumps(ev) + "\n"
        lines.append(line)
        size += len(line)
chunk = "".join(lines).encode()
out = sys.stdout.buffer
written = 0
while written < total:
    out.write(chunk)
    written += len(chunk)
out.flush()
"#;

fn stories(epic: usize, n: usize, est: impl Fn(usize) -> &'static str) -> Vec<Story> {
    (1..=n)
        .map(|k| Story {
            id: format!("{epic}.{k}"),
            title: format!("Feature {k} of epic {epic}"),
            est: est(k),
            deps: Vec::new(),
        })
        .collect()
}

fn batch(label: &str, stories: Vec<Story>) -> Section {
    Section {
        label: Some(label.into()),
        comment: None,
        stories,
    }
}

// ---------------------------------------------------------------------------
// ralph.log

/// Milliseconds since the epoch of a `[YYYY-MM-DDTHH:MM:SS.mmmZ] ` prefix.
fn log_time(line: &str) -> Option<(i64, &str)> {
    let rest = line.strip_prefix('[')?;
    let (ts, msg) = rest.split_once("] ")?;
    let num = |a: usize, b: usize| ts.get(a..b)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (h, mi, s, ms) = (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 23)?);
    let mut days = 0i64;
    for year in 1970..y {
        days += if is_leap(year) { 366 } else { 365 };
    }
    let month_days = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    for (m, len) in month_days.iter().enumerate().take((mo - 1) as usize) {
        days += len + i64::from(m == 1 && is_leap(y));
    }
    days += d - 1;
    Some((((days * 24 + h) * 60 + mi) * 60_000 + s * 1000 + ms, msg))
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// `landed story X` and `agent start story Y attempt 1` times, by story.
fn log_events(log: &str) -> (HashMap<String, i64>, HashMap<String, i64>) {
    let mut landed = HashMap::new();
    let mut started = HashMap::new();
    for line in log.lines() {
        let Some((t, msg)) = log_time(line) else {
            continue;
        };
        if let Some(r) = msg.strip_prefix("landed story ") {
            if let Some((id, _)) = r.split_once(' ') {
                landed.insert(id.to_string(), t);
            }
        } else if let Some(r) = msg.strip_prefix("agent start story ") {
            if let Some((id, _)) = r.split_once(' ') {
                started.entry(id.to_string()).or_insert(t);
            }
        }
    }
    (landed, started)
}

// ---------------------------------------------------------------------------
// Figure 1: peak RSS while one agent prints 1 GiB of stream-json

/// A backlog of one medium story (the RSS figures).
fn one_story() -> Backlog {
    Backlog {
        sections: vec![Section {
            label: None,
            comment: None,
            stories: stories(1, 1, |_| "medium"),
        }],
    }
}

/// The attempt log's size after a 1 GiB run, checked: the output was all
/// logged and the story landed.
fn logged_gib(p: &Project, what: &str) -> u64 {
    const GIB: u64 = 1 << 30;
    let logged = fs::metadata(p.root.join(".ralph/logs/1.1/attempt-1.log"))
        .map(|m| m.len())
        .unwrap_or(0);
    assert!(
        logged >= GIB,
        "{what}: the attempt log has {logged} bytes, expected ≥ 1 GiB"
    );
    assert_eq!(p.merges_on_main(), 1, "{what}: story 1.1 landed");
    logged
}

/// The RSS figures' agents run python3, which the sandbox (on by default
/// where bubblewrap works) does not reach when it lives under the home
/// directory (pyenv): the figure is ralph's memory, so they run unsealed.
fn unsealed(root: &Path) {
    write(
        root,
        ".ralph/config.json",
        "{ \"loop\": { \"max_retries\": 1 }, \"sandbox\": { \"mode\": \"off\" } }\n",
    );
}

fn fig_rss(bin: &Path, quick: bool) -> Figure {
    const GIB: u64 = 1 << 30;
    let runs = if quick { 1 } else { 5 };
    let mut fig = Figure::new(
        "rss",
        "Peak RSS of ralph while one agent prints 1 GiB of stream-json",
    );
    let backlog = one_story();
    let big_agent = format!("python3 - {GIB} <<'PY'\n{STREAM_GEN}\nPY\nfinish\n");
    let small_agent = "say \"a short attempt\"\nfinish\n";
    let (mut peak, mut wall, mut rate) = (Vec::new(), Vec::new(), Vec::new());
    let mut base_peak = Vec::new();
    for i in 0..runs {
        let p = Project::new(&backlog, &big_agent, unsealed);
        let (hwm, t) = run_polling_rss(&p, bin, &["run"]);
        let logged = logged_gib(&p, "rss");
        eprintln!(
            "  rss run {}/{runs}: peak {:.1} MB, {:.1} s",
            i + 1,
            hwm,
            t.as_secs_f64()
        );
        peak.push(hwm);
        wall.push(t.as_secs_f64());
        rate.push(logged as f64 / 1e6 / t.as_secs_f64());
        drop(p);
        let q = Project::new(&backlog, small_agent, unsealed);
        base_peak.push(run_polling_rss(&q, bin, &["run"]).0);
    }
    fig.rows
        .push(Row::new("peak RSS (VmHWM), 1 GiB of output", "MB", peak).target(Cmp::Lt, 64.0));
    fig.rows.push(Row::new(
        "peak RSS (VmHWM), a 1 KB attempt",
        "MB",
        base_peak,
    ));
    fig.rows
        .push(Row::new("wall time of `ralph run`", "s", wall));
    fig.rows
        .push(Row::new("throughput (output bytes / wall)", "MB/s", rate));
    fig.notes.push(
        "VmHWM of the ralph process alone (polled every 5 ms from `/proc/<pid>/status`), \
         so the agent's python and git children are not counted; MB = 10^6 bytes"
            .into(),
    );
    fig
}

// ---------------------------------------------------------------------------
// Figure 1b: the same 1 GiB through every backend's decoder (issue 10)

/// Every backend with its executable name; `amp` speaks Claude Code's stream.
const BACKENDS: [(&str, &str); 8] = [
    ("claude", "claude"),
    ("codex", "codex"),
    ("gemini", "gemini"),
    ("agy", "agy"),
    ("opencode", "opencode"),
    ("cursor", "cursor-agent"),
    ("amp", "amp"),
    ("custom", "agent"),
];

fn fig_rss_agents(bin: &Path, quick: bool) -> Figure {
    const GIB: u64 = 1 << 30;
    let runs = if quick { 1 } else { 3 };
    let mut fig = Figure::new(
        "rss-agents",
        "Peak RSS of ralph while one agent prints 1 GiB in each backend's format",
    );
    let backlog = one_story();
    for (backend, exe) in BACKENDS {
        let body = format!("python3 - {backend} {GIB} \"$id\" <<'PY'\n{AGENT_STREAM_GEN}\nPY\n");
        let (mut peak, mut rate) = (Vec::new(), Vec::new());
        for i in 0..runs {
            let p = Project::new(&backlog, "true", |root| {
                let cfg = format!(
                    "{{ \"loop\": {{ \"max_retries\": 1 }}, \"agent\": {{ \"name\": \"{backend}\" }}, \"sandbox\": {{ \"mode\": \"off\" }} }}\n"
                );
                write(root, ".ralph/config.json", &cfg);
            });
            // The stream says nothing of the commit: the agent does its git
            // work first, then only prints.
            p.agent_named(exe, &format!("{COMMIT_ONLY}\n{body}"));
            let (hwm, t) = run_polling_rss(&p, bin, &["run"]);
            let logged = logged_gib(&p, backend);
            eprintln!(
                "  rss-agents {backend} {}/{runs}: peak {hwm:.1} MB, {:.1} s",
                i + 1,
                t.as_secs_f64()
            );
            peak.push(hwm);
            rate.push(logged as f64 / 1e6 / t.as_secs_f64());
        }
        fig.rows.push(
            Row::new(&format!("{backend}: peak RSS (VmHWM)"), "MB", peak).target(Cmp::Lt, 64.0),
        );
        fig.rows.push(Row::new(
            &format!("{backend}: output bytes / wall"),
            "MB/s",
            rate,
        ));
    }
    fig.notes.push(
        "VmHWM of the ralph process alone, polled every 5 ms; each agent prints \
         assistant text, a shell tool call and its output (~7 KB per round) in its \
         CLI's own event format, then a DONE in that format; MB = 10^6 bytes. The \
         MB/s column is end to end (the python generator, the pipe, the attempt log \
         write and the decoder), not the decoder alone"
            .into(),
    );
    fig
}

/// Commits the story's file without printing anything (the prelude's
/// `finish` prints Claude Code events, which other backends would not read).
const COMMIT_ONLY: &str = r#"mkdir -p bench-out
printf '%s\n' "$id" > "bench-out/$id.txt"
git add "bench-out/$id.txt" && git commit -q -m "feat(story-$id): bench change""#;

/// The generator of figure 1b: `bytes` of one backend's event stream, then
/// that backend's way of saying DONE.
const AGENT_STREAM_GEN: &str = r#"
import json, sys
fmt, total, sid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
words = ("the parser keeps every line under a megabyte and the merge queue "
         "lands one story at a time while tests run in the worktree").split()
def prose(n, seed):
    out, i, size = [], seed, 0
    while size < n:
        w = words[i % len(words)]
        out.append(w)
        size += len(w) + 1
        i = i * 7 + 3
    return " ".join(out)
def step(i, state, kind, **extra):
    s = {"conversation_id": "c1", "step_index": i, "state": state, "step_type": kind}
    s.update(extra)
    return {"event": "step_update", "step_update": s}
def rounds(k, text, cmd, out):
    if fmt in ("claude", "amp"):
        return [
            {"type": "assistant", "message": {"id": "m%d" % k, "role": "assistant",
             "content": [{"type": "text", "text": text}]}},
            {"type": "assistant", "message": {"id": "m%db" % k, "role": "assistant",
             "content": [{"type": "tool_use", "id": "t%d" % k, "name": "Bash", "input": {"command": cmd}}]}},
            {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result",
             "tool_use_id": "t%d" % k, "content": out, "is_error": False}]}}]
    if fmt == "codex":
        return [
            {"type": "item.completed", "item": {"id": "i%da" % k, "type": "agent_message", "text": text}},
            {"type": "item.started", "item": {"id": "i%db" % k, "type": "command_execution",
             "command": cmd, "status": "in_progress"}},
            {"type": "item.completed", "item": {"id": "i%db" % k, "type": "command_execution",
             "command": cmd, "aggregated_output": out, "exit_code": 0, "status": "completed"}}]
    if fmt == "gemini":
        return [
            {"type": "message", "role": "assistant", "content": text + "\n", "delta": True},
            {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "t%d" % k,
             "parameters": {"command": cmd}},
            {"type": "tool_result", "tool_id": "t%d" % k, "status": "success", "output": out}]
    if fmt == "agy":
        return [
            step(3 * k, "DONE", "agent_response", text_delta=text),
            step(3 * k + 1, "ACTIVE", "tool", tool_name="run_command",
                 tool_info={"name": "run_command", "parameters": {"CommandLine": cmd}}),
            step(3 * k + 1, "DONE", "tool", tool_name="run_command", output=out)]
    if fmt == "opencode":
        return [
            {"type": "text", "sessionID": "ses_1", "part": {"type": "text", "text": text}},
            {"type": "tool_use", "sessionID": "ses_1", "part": {"type": "tool", "tool": "bash",
             "state": {"status": "completed", "input": {"command": cmd}, "output": out}}}]
    if fmt == "cursor":
        return [
            {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
             "session_id": "s1"},
            {"type": "tool_call", "subtype": "started", "call_id": "c%d" % k,
             "tool_call": {"shellToolCall": {"args": {"command": cmd}}}, "session_id": "s1"},
            {"type": "tool_call", "subtype": "completed", "call_id": "c%d" % k,
             "tool_call": {"shellToolCall": {"args": {"command": cmd},
              "result": {"success": {"exitCode": 0, "stdout": out, "stderr": ""}}}}, "session_id": "s1"}]
    return [text, "$ " + cmd, out]
done = "<ralph>DONE %s</ralph>" % sid
finals = {
    "claude": [{"type": "result", "subtype": "success", "is_error": False, "result": "done " + done,
                "total_cost_usd": 0.001, "usage": {"input_tokens": 10, "output_tokens": 5}}],
    "codex": [{"type": "item.completed", "item": {"id": "last", "type": "agent_message", "text": done}},
              {"type": "turn.completed", "usage": {"input_tokens": 10, "cached_input_tokens": 0,
               "output_tokens": 5}}],
    "gemini": [{"type": "message", "role": "assistant", "content": done, "delta": True},
               {"type": "result", "status": "success", "stats": {"total_tokens": 15,
                "input_tokens": 10, "output_tokens": 5, "cached": 0, "input": 10}}],
    "agy": [step(10**9, "DONE", "agent_response", text_delta=done),
            {"event": "result", "result": {"conversation_id": "c1", "status": "SUCCESS",
             "response": done, "num_turns": 2, "usage": {"input_tokens": 10, "output_tokens": 5}}}],
    "opencode": [{"type": "text", "sessionID": "ses_1", "part": {"type": "text", "text": done}},
                 {"type": "step_finish", "sessionID": "ses_1", "part": {"type": "step-finish",
                  "reason": "stop", "tokens": {"input": 10, "output": 5, "reasoning": 0,
                  "cache": {"write": 0, "read": 0}}, "cost": 0.001}}],
    "cursor": [{"type": "result", "subtype": "success", "is_error": False, "result": done,
                "session_id": "s1"}],
    "custom": [done],
}
finals["amp"] = finals["claude"]
def line(ev):
    return (ev if isinstance(ev, str) else json.dumps(ev)) + "\n"
lines, size, k = [], 0, 0
while size < (1 << 20):
    k += 1
    for ev in rounds(k, prose(3000, k), "cat src/module_%d.rs" % k, prose(4000, k + 5)):
        l = line(ev)
        lines.append(l)
        size += len(l)
chunk = "".join(lines).encode()
out = sys.stdout.buffer
written = 0
while written < total:
    out.write(chunk)
    written += len(chunk)
for ev in finals[fmt]:
    out.write(line(ev).encode())
out.flush()
"#;

/// Runs ralph, polling its VmHWM; returns the last value seen (MB) and the
/// wall time.
fn run_polling_rss(p: &Project, bin: &Path, args: &[&str]) -> (f64, Duration) {
    let t = Instant::now();
    let mut child = p.ralph(bin, args).spawn().expect("ralph starts");
    let (status, hwm_kb) = wait_polling_hwm(&mut child);
    let wall = t.elapsed();
    p.check(status, args);
    (hwm_kb as f64 * 1024.0 / 1e6, wall)
}

/// Waits for `child`, reading its VmHWM from `/proc/<pid>/status` every
/// 5 ms: its exit status and the highest value seen (kB).
fn wait_polling_hwm(child: &mut std::process::Child) -> (std::process::ExitStatus, u64) {
    let status_path = format!("/proc/{}/status", child.id());
    let mut hwm_kb = 0u64;
    let status = loop {
        if let Ok(s) = fs::read_to_string(&status_path) {
            if let Some(v) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                hwm_kb = hwm_kb.max(v);
            }
        }
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    (status, hwm_kb)
}

// ---------------------------------------------------------------------------
// Figure 2: `ralph validate` on 2,000 stories

fn validate_backlog() -> Backlog {
    let ests = ["small", "medium", "medium", "large"];
    let mut sections = Vec::new();
    for b in 0..10 {
        let mut all = Vec::new();
        for e in [2 * b + 1, 2 * b + 2] {
            let mut st = stories(e, 100, |k| ests[(k * 7 + e) % 4]);
            for k in 1..=100usize {
                let deps = &mut st[k - 1].deps;
                if k % 4 == 0 {
                    deps.push(format!("{e}.{}", k - 1));
                }
                if k % 10 == 5 && k > 10 {
                    deps.push(format!("{e}.{}", k - 10));
                }
                // Across epics of the same batch section.
                if k == 50 && e % 2 == 0 {
                    deps.push(format!("{}.50", e - 1));
                }
            }
            all.extend(st);
        }
        sections.push(Section {
            label: Some((b + 1).to_string()),
            comment: Some(format!("Epics {} and {}", 2 * b + 1, 2 * b + 2)),
            stories: all,
        });
    }
    Backlog { sections }
}

fn fig_validate(bin: &Path, quick: bool) -> Figure {
    let runs = if quick { 5 } else { 30 };
    let mut fig = Figure::new(
        "validate",
        "Wall time of `ralph validate` on a 2,000-story backlog",
    );
    let backlog = validate_backlog();
    let n = backlog.stories().count();
    let edges: usize = backlog.stories().map(|s| s.deps.len()).sum();
    let p = Project::new(&backlog, "finish\n", |_| {});
    // One untimed run warms the page cache (the specs were just written).
    p.run_ok(bin, &["validate"]);
    let mut t = Vec::new();
    for _ in 0..runs {
        t.push(p.run_ok(bin, &["validate"]).as_secs_f64() * 1e3);
    }
    fig.rows
        .push(Row::new("`ralph validate` wall time", "ms", t).target(Cmp::Lt, 300.0));
    fig.notes.push(format!(
        "{n} stories (20 epics × 100) in 10 `[batch:N]` sections, {edges} depends_on edges, \
         one spec file with YAML frontmatter per story; warm page cache (one untimed run first)"
    ));
    fig
}

// ---------------------------------------------------------------------------
// Figure 3: makespan of a 40-story DAG with -j 4

/// A small deterministic PRNG (xorshift64*), so the generated DAG is the
/// same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// 40 stories: 2 unbatched (a chain), then `[batch:1]` 14, `[batch:2]` 14,
/// `[batch:3]` 10. Estimations are drawn small/small/medium/medium/medium/
/// large; each batched story after the first of its section depends, with
/// probability 0.35, on a random earlier story of the same section.
fn makespan_backlog(seed: u64) -> Backlog {
    let ests = ["small", "small", "medium", "medium", "medium", "large"];
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut sections = Vec::new();
    for (si, n) in [2usize, 14, 14, 10].into_iter().enumerate() {
        let epic = si + 1;
        let mut st = stories(epic, n, |_| "medium");
        for (k, story) in st.iter_mut().enumerate() {
            story.est = ests[rng.below(ests.len())];
            if k > 0 && si > 0 && rng.below(100) < 35 {
                let d = rng.below(k);
                story.deps.push(format!("{epic}.{}", d + 1));
            }
        }
        sections.push(Section {
            label: (si > 0).then(|| si.to_string()),
            comment: None,
            stories: st,
        });
    }
    Backlog { sections }
}

/// What the schedule of a backlog can be, in the durations' own units.
struct Plan {
    d: Vec<f64>,
    cp: f64,
    work: f64,
    lb: f64,
    batch_sync: f64,
    dag_sim: f64,
}

impl Plan {
    /// Seconds per unit (two decimals) that put the lower bound near `secs`.
    fn unit_for(&self, secs: f64) -> f64 {
        ((secs / self.lb) * 100.0).round() / 100.0
    }

    /// Each of `stories`' (ID, seconds) at `unit` seconds per unit, for
    /// `sleeping_agent`.
    fn durations(&self, stories: &[Story], unit: f64) -> Vec<(String, f64)> {
        stories
            .iter()
            .map(|s| s.id.clone())
            .zip(self.d.iter().map(|u| u * unit))
            .collect()
    }
}

fn plan(backlog: &Backlog, d: Vec<f64>, jobs: usize) -> Plan {
    let (_, waits) = backlog.waits();
    let cp = critical_path(&d, &waits);
    let work: f64 = d.iter().sum();
    let lb = cp.max(work / jobs as f64);
    // Batch-synchronous: each section runs (list-scheduled, file order, its
    // own depends_on) only after the previous one finished.
    let mut batch_sync = 0.0;
    let mut i = 0;
    for sec in &backlog.sections {
        let order: Vec<usize> = (i..i + sec.stories.len()).collect();
        batch_sync += list_schedule(&d, &waits, &order, jobs);
        i += sec.stories.len();
    }
    // The whole DAG list-scheduled by the heaviest chain downstream (ralph's
    // rule), with zero overhead.
    let n = d.len();
    let mut tail = vec![0.0f64; n];
    for v in (0..n).rev() {
        let down = (0..n)
            .filter(|&j| waits[j].contains(&v))
            .map(|j| tail[j])
            .fold(0.0, f64::max);
        tail[v] = d[v] + down;
    }
    let mut prio: Vec<usize> = (0..n).collect();
    prio.sort_by(|&a, &b| tail[b].total_cmp(&tail[a]).then(a.cmp(&b)));
    let dag_sim = list_schedule(&d, &waits, &prio, jobs);
    Plan {
        d,
        cp,
        work,
        lb,
        batch_sync,
        dag_sim,
    }
}

fn units(est: &str) -> f64 {
    match est {
        "small" => 1.0,
        "large" => 4.0,
        _ => 2.0,
    }
}

/// Longest path through the DAG (sum of durations).
fn critical_path(d: &[f64], waits: &[Vec<usize>]) -> f64 {
    // Stories only wait for earlier stories here, so file order is topological.
    let mut finish = vec![0.0f64; d.len()];
    for i in 0..d.len() {
        assert!(
            waits[i].iter().all(|&w| w < i),
            "generated DAG goes forward"
        );
        let start = waits[i].iter().map(|&w| finish[w]).fold(0.0, f64::max);
        finish[i] = start + d[i];
    }
    finish.iter().copied().fold(0.0, f64::max)
}

/// Greedy list scheduling of `tasks` on `workers`: whenever a worker is free,
/// it takes the ready task that comes first in `order`. Waits on tasks outside
/// `tasks` count as satisfied. Returns the makespan.
fn list_schedule(d: &[f64], waits: &[Vec<usize>], order: &[usize], workers: usize) -> f64 {
    let inside: std::collections::HashSet<usize> = order.iter().copied().collect();
    let mut finish: HashMap<usize, f64> = HashMap::new();
    let mut running: Vec<(f64, usize)> = Vec::new();
    let mut now = 0.0f64;
    while finish.len() < order.len() {
        let done = |j: usize, finish: &HashMap<usize, f64>| {
            !inside.contains(&j) || finish.get(&j).is_some_and(|&f| f <= now)
        };
        let started = |i: usize| finish.contains_key(&i);
        let mut progressed = false;
        if running.len() < workers {
            if let Some(&i) = order
                .iter()
                .find(|&&i| !started(i) && waits[i].iter().all(|&w| done(w, &finish)))
            {
                finish.insert(i, now + d[i]);
                running.push((now + d[i], i));
                progressed = true;
            }
        }
        if !progressed {
            // Advance to the next completion.
            running.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (t, _) = running.remove(0);
            now = t;
        }
        running.retain(|&(t, _)| t > now);
    }
    finish.values().copied().fold(0.0, f64::max)
}

fn fig_makespan(bin: &Path, quick: bool) -> Figure {
    const JOBS: usize = 4;
    let mut fig = Figure::new("makespan", "Makespan of a 40-story DAG with -j 4");
    let make = |seed: u64| {
        let b = makespan_backlog(seed);
        let d: Vec<f64> = b.stories().map(|s| units(s.est)).collect();
        let p = plan(&b, d, JOBS);
        (seed, b, p)
    };
    let edges = |b: &Backlog| b.stories().map(|s| s.deps.len()).sum::<usize>();
    // DAG A, the one the target is about: the first seed whose lower bound
    // is attainable (a zero-overhead critical-path-first schedule comes
    // within 2 % of it), so the figure measures ralph rather than the slack
    // of the bound.
    let a = (0u64..)
        .map(make)
        .find(|(_, b, p)| p.dag_sim <= 1.02 * p.lb && edges(b) >= 8)
        .expect("some seed works");
    // DAG B: the generator's first DAG as it comes (seed 0, or the next one
    // when seed 0 is DAG A); its bound need not be attainable.
    let b = make(if a.0 == 0 { 1 } else { 0 });
    for (name, (seed, backlog, p), runs) in [
        ("A", a, if quick { 1 } else { 3 }),
        ("B", b, if quick { 1 } else { 2 }),
    ] {
        let all: Vec<Story> = backlog.stories().cloned().collect();
        // Scale so the lower bound is ~50 s.
        let unit = p.unit_for(50.0);
        let d: Vec<f64> = p.d.iter().map(|u| u * unit).collect();
        let (cp, work, lb) = (p.cp * unit, p.work * unit, p.lb * unit);
        let (batch_sync, dag_sim) = (p.batch_sync * unit, p.dag_sim * unit);
        let durations: Vec<(String, f64)> = all
            .iter()
            .map(|s| s.id.clone())
            .zip(d.iter().copied())
            .collect();
        let agent = sleeping_agent(&durations);
        let mut walls = Vec::new();
        for r in 0..runs {
            let proj = Project::new(&backlog, &agent, |_| {});
            let wall = proj
                .run_ok(bin, &["run", "--parallel", "-j", "4"])
                .as_secs_f64();
            assert_eq!(proj.merges_on_main(), all.len(), "every story landed");
            eprintln!(
                "  makespan DAG {name} run {}/{runs}: {wall:.2} s (lower bound {lb:.2} s)",
                r + 1
            );
            walls.push(wall);
        }
        let ratios: Vec<f64> = walls.iter().map(|w| w / lb).collect();
        fig.rows
            .push(Row::new(&format!("DAG {name}: ralph makespan"), "s", walls));
        let ratio = Row::new(&format!("DAG {name}: ralph ÷ lower bound"), "×", ratios);
        fig.rows.push(if name == "A" {
            ratio.target(Cmp::Le, 1.10)
        } else {
            ratio
        });
        fig.rows.push(Row::new(
            &format!("DAG {name}: batch-synchronous (simulated, no overhead) ÷ lower bound"),
            "×",
            vec![batch_sync / lb],
        ));
        fig.rows.push(Row::new(
            &format!("DAG {name}: critical-path-first list schedule (simulated, no overhead) ÷ lower bound"),
            "×",
            vec![dag_sim / lb],
        ));
        fig.notes.push(format!(
            "DAG {name} (generator seed {seed}): {} depends_on edges; unit {unit:.2} s; total work {work:.1} s, \
             work ÷ 4 = {:.1} s, critical path {cp:.1} s, lower bound {lb:.1} s; batch-synchronous \
             {batch_sync:.1} s; critical-path-first list schedule {dag_sim:.1} s",
            edges(&backlog),
            work / JOBS as f64,
        ));
    }
    fig.notes.push(
        "40 stories: 2 unbatched (a chain) + [batch:1] 14 + [batch:2] 14 + [batch:3] 10; the agent \
         sleeps small = 1, medium = 2, large = 4 units; makespan = wall time of \
         `ralph run --parallel -j 4`, start to exit (startup, landing and cleanup included)"
            .into(),
    );
    fig
}

// ---------------------------------------------------------------------------
// Figure 3b: ralph against a zero-overhead reference dispatcher (issue 21)

/// Stories in the order ralph's `Scheduler::choose` ranks ready ones: the
/// heaviest chain downstream by estimation weight (small 1, medium 2,
/// large 5, as `schedule::estimation_weight`), then file order.
fn ralph_priority(backlog: &Backlog) -> Vec<usize> {
    let (all, waits) = backlog.waits();
    let w: Vec<u64> = all
        .iter()
        .map(|s| match s.est {
            "small" => 1,
            "large" => 5,
            _ => 2,
        })
        .collect();
    let n = all.len();
    let mut tail = vec![0u64; n];
    for v in (0..n).rev() {
        let down = (0..n)
            .filter(|&j| waits[j].contains(&v))
            .map(|j| tail[j])
            .max()
            .unwrap_or(0);
        tail[v] = w[v] + down;
    }
    let mut prio: Vec<usize> = (0..n).collect();
    prio.sort_by(|&a, &b| tail[b].cmp(&tail[a]).then(a.cmp(&b)));
    prio
}

/// The reference dispatcher: the project's own fake agent over the same DAG
/// with `jobs` at a time, each story started the moment its last dependency
/// finished, first in `prio` among the ready ones. It has no overhead
/// beyond spawning the agent and waiting for it: no worktree (each agent
/// gets a plain git repository of its own, made before the clock starts,
/// so its `git commit` works as in ralph's worktree), no landing, no state,
/// no parsing of the agent's output (it goes to a file). Returns the wall
/// time from the first spawn to the last exit.
fn reference_makespan(p: &Project, backlog: &Backlog, prio: &[usize], jobs: usize) -> f64 {
    use std::io::Write as _;
    let (all, waits) = backlog.waits();
    let base = p
        .tmp
        .path()
        .join(format!("reference-{}", timestamp_nanos()));
    let dirs: Vec<PathBuf> = all
        .iter()
        .map(|s| {
            let d = base.join(&s.id);
            fs::create_dir_all(&d).expect("mkdir");
            git_init(&d);
            d
        })
        .collect();
    let agent = p.bin.join("claude");
    let path_env = p.path_env();
    let (tx, rx) = std::sync::mpsc::channel::<(usize, bool)>();
    let n = all.len();
    let (mut started, mut done) = (vec![false; n], vec![false; n]);
    let (mut running, mut finished) = (0usize, 0usize);
    let t = Instant::now();
    while finished < n {
        while running < jobs {
            let Some(&i) = prio
                .iter()
                .find(|&&i| !started[i] && waits[i].iter().all(|&w| done[w]))
            else {
                break;
            };
            started[i] = true;
            running += 1;
            let out = fs::File::create(base.join(format!("{}.out", all[i].id))).expect("out");
            let mut child = Command::new(&agent)
                .current_dir(&dirs[i])
                .env("PATH", &path_env)
                .env("HOME", p.tmp.path())
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env_remove("CLAUDECODE")
                .stdin(Stdio::piped())
                .stdout(out)
                .stderr(Stdio::null())
                .spawn()
                .expect("the fake agent starts");
            let prompt = format!("implement Story {}: {}\n", all[i].id, all[i].title);
            // A few bytes: the pipe takes them whether or not the agent reads yet.
            let mut stdin = child.stdin.take().expect("piped stdin");
            stdin.write_all(prompt.as_bytes()).expect("prompt written");
            drop(stdin);
            let tx = tx.clone();
            std::thread::spawn(move || {
                let ok = child.wait().is_ok_and(|s| s.success());
                let _ = tx.send((i, ok));
            });
        }
        let (i, ok) = rx.recv().expect("a running agent reports");
        assert!(ok, "reference: the agent of story {} failed", all[i].id);
        done[i] = true;
        running -= 1;
        finished += 1;
    }
    let wall = t.elapsed().as_secs_f64();
    let _ = fs::remove_dir_all(&base);
    wall
}

fn timestamp_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Issue 21: ralph's makespan over DAG A of figure 3 against the reference
/// dispatcher running the same agent over the same DAG with the same `-j`,
/// alternating in one bench run (ralph, reference, ralph, ...), so both see
/// the same machine load; ratios pair run i of ralph with run i of the
/// reference.
fn fig_makespan_ref(bin: &Path, quick: bool) -> Figure {
    const JOBS: usize = 4;
    let mut fig = Figure::new(
        "makespan-ref",
        "Makespan of DAG A with -j 4: ralph ÷ a zero-overhead reference dispatcher",
    );
    let make = |seed: u64| {
        let b = makespan_backlog(seed);
        let d: Vec<f64> = b.stories().map(|s| units(s.est)).collect();
        let p = plan(&b, d, JOBS);
        (seed, b, p)
    };
    let edges = |b: &Backlog| b.stories().map(|s| s.deps.len()).sum::<usize>();
    // The same DAG A as figure 3.
    let (seed, backlog, p) = (0u64..)
        .map(make)
        .find(|(_, b, p)| p.dag_sim <= 1.02 * p.lb && edges(b) >= 8)
        .expect("some seed works");
    let runs = if quick { 2 } else { 5 };
    let all: Vec<Story> = backlog.stories().cloned().collect();
    let unit = p.unit_for(50.0);
    let lb = p.lb * unit;
    let durations = p.durations(&all, unit);
    let agent = sleeping_agent(&durations);
    let prio = ralph_priority(&backlog);
    let (mut walls, mut refs, mut loads) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..runs {
        let proj = Project::new(&backlog, &agent, |_| {});
        loads.push(loadavg());
        let wall = proj
            .run_ok(bin, &["run", "--parallel", "-j", "4"])
            .as_secs_f64();
        assert_eq!(proj.merges_on_main(), all.len(), "every story landed");
        let reference = reference_makespan(&proj, &backlog, &prio, JOBS);
        eprintln!(
            "  makespan-ref run {}/{runs}: ralph {wall:.2} s, reference {reference:.2} s, \
             ratio {:.4} (load {})",
            r + 1,
            wall / reference,
            loads.last().map_or("?", String::as_str),
        );
        walls.push(wall);
        refs.push(reference);
    }
    let ratios: Vec<f64> = walls.iter().zip(&refs).map(|(w, r)| w / r).collect();
    fig.rows
        .push(Row::new("ralph ÷ reference dispatcher", "×", ratios).target(Cmp::Le, 1.02));
    let over: Vec<f64> = walls.iter().zip(&refs).map(|(w, r)| w - r).collect();
    fig.rows.push(Row::new("ralph makespan", "s", walls));
    fig.rows
        .push(Row::new("reference dispatcher makespan", "s", refs));
    fig.rows.push(Row::new("ralph − reference", "s", over));
    fig.notes.push(format!(
        "DAG A of figure 3 (seed {seed}, unit {unit:.2} s, lower bound {lb:.1} s); `ralph run \
         --parallel -j 4` against the reference dispatcher of `benches/figures.rs` \
         (`reference_makespan`: the same fake agent, the same DAG and -j, ralph's priority \
         rule, each agent in a plain git repo of its own, no worktree, landing or state), \
         alternating, run i of one paired with run i of the other; ralph's wall time \
         includes its startup and cleanup; load average (1 min) before each pair: {}",
        loads.join(", ")
    ));
    fig
}

// ---------------------------------------------------------------------------
// The merge queue's chains (issue 34)

/// One run of the queue figure: 24 independent stories, `-j 8`, an agent of
/// 1 s, a required validation of 2 s (failing once on story 1.5's first
/// work when `bad`), the `landing` section given. Returns the wall time, the
/// agent runs and the validation runs.
fn queue_run(bin: &Path, landing: &str, bad: bool) -> (f64, usize, usize) {
    let backlog = Backlog {
        sections: vec![batch("1", stories(1, 24, |_| "small"))],
    };
    // A fix-up finds its kept work merged in: it marks the story fixed.
    let agent = "sleep 1\nif [ -f \"bench-out/$id.txt\" ]; then echo fixed > \"bench-out/$id.fixed\"; git add bench-out; fi\nfinish\n";
    let check = if bad {
        "sleep 2; if [ -f bench-out/1.5.txt ] && [ ! -f bench-out/1.5.fixed ]; then echo broken; exit 1; fi"
    } else {
        "sleep 2"
    };
    let config = format!(
        "{{ \"loop\": {{ \"max_retries\": 2 }}, \"landing\": {landing},\n  \
         \"validation\": {{ \"commands\": [ {{ \"name\": \"tests\", \"cmd\": \"{check}\", \
         \"required\": true }} ] }} }}\n"
    );
    let proj = Project::new(&backlog, agent, |root| {
        write(root, ".ralph/config.json", &config);
    });
    let wall = proj
        .run_ok(bin, &["run", "--parallel", "-j", "8"])
        .as_secs_f64();
    assert_eq!(proj.merges_on_main(), 24, "every story landed");
    let state: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(proj.root.join(".ralph/state.json")).unwrap_or_default(),
    )
    .unwrap_or_default();
    let runs = state["stories"]
        .as_object()
        .map(|m| {
            m.values()
                .map(|s| s["history"].as_array().map_or(0, Vec::len))
                .sum()
        })
        .unwrap_or(0);
    let validations = fs::read_dir(proj.root.join(".ralph/runs"))
        .map(|d| {
            d.flatten()
                .map(|e| fs::read_to_string(e.path()).unwrap_or_default())
                .map(|t| t.matches("\"ev\":\"validate_start\"").count())
                .sum()
        })
        .unwrap_or(0);
    (wall, runs, validations)
}

/// The queue's shape as `landing` config: chains of `k`, batches of `b`.
fn queue_landing(k: usize, b: usize) -> String {
    format!("{{ \"speculate\": {k}, \"batch\": {b}, \"max_validations\": {k} }}")
}

/// Batches of 6 (issue 34 item 2): validation runs per landing, all
/// passing and with one story failing once, on the queue figure's run.
fn queue_batch_rows(bin: &Path, quick: bool, fig: &mut Figure) {
    let runs = if quick { 1 } else { 3 };
    for (bad, label, target) in [
        (false, "all pass", 0.3),
        (true, "one story in 24 failing once", 0.6),
    ] {
        let (mut per, mut ratios) = (Vec::new(), Vec::new());
        for r in 0..runs {
            let load = loadavg();
            let (wall, a, v) = queue_run(bin, &queue_landing(4, 6), bad);
            eprintln!(
                "  queue batch 6 {label} run {}/{runs}: {wall:.2} s, {v} validation runs, \
                 {a} agent runs (load {load})",
                r + 1
            );
            per.push(v as f64 / 24.0);
            ratios.push(wall / 9.0);
        }
        fig.rows.push(
            Row::new(
                &format!("validation runs, batch 6, speculate 4, {label}"),
                "per landing",
                per,
            )
            .target(Cmp::Le, target),
        );
        fig.rows.push(Row::new(
            &format!("makespan ÷ 9 s, batch 6, speculate 4, {label}"),
            "×",
            ratios,
        ));
    }
}

fn fig_queue_batch(bin: &Path, quick: bool) -> Figure {
    let mut fig = Figure::new(
        "queue-batch",
        "Merge queue batches: 24 stories, -j 8, agent 1 s, validation 2 s, batches of 6",
    );
    queue_batch_rows(bin, quick, &mut fig);
    fig.notes.push(QUEUE_NOTE.to_string());
    fig
}

fn fig_queue(bin: &Path, quick: bool) -> Figure {
    let mut fig = Figure::new(
        "queue",
        "Merge queue: 24 stories, -j 8, agent 1 s, validation 2 s, ÷ the 9 s bound",
    );
    let runs = if quick { 1 } else { 3 };
    let bound = 9.0;
    for (k, bad, label, target) in [
        (1, false, "landing.speculate 1 (one at a time)", None),
        (4, false, "landing.speculate 4 (default)", None),
        (8, false, "landing.speculate 8", Some(1.35)),
        (
            8,
            true,
            "landing.speculate 8, one story failing once",
            Some(1.8),
        ),
    ] {
        // The one-at-a-time baseline is long: once.
        let n = if k == 1 { 1 } else { runs };
        let (mut ratios, mut agent_runs) = (Vec::new(), Vec::new());
        for r in 0..n {
            let load = loadavg();
            let (wall, a, _) = queue_run(bin, &queue_landing(k, 1), bad);
            eprintln!(
                "  queue {label} run {}/{n}: {wall:.2} s ({:.2}×), {a} agent runs (load {load})",
                r + 1,
                wall / bound
            );
            ratios.push(wall / bound);
            agent_runs.push(a as f64);
        }
        let row = Row::new(&format!("makespan ÷ 9 s, {label}"), "×", ratios);
        fig.rows.push(match target {
            Some(t) => row.target(Cmp::Le, t),
            None => row,
        });
        if bad {
            fig.rows.push(
                Row::new("agent runs (24 stories, one fix-up)", "", agent_runs)
                    .target(Cmp::Le, 25.0),
            );
        }
    }
    queue_batch_rows(bin, quick, &mut fig);
    fig.notes.push(QUEUE_NOTE.to_string());
    fig
}

const QUEUE_NOTE: &str = "24 stories in one batch, each committing one file after `sleep 1`; \
    one required validation command `sleep 2` (the failing case: story 1.5's first work fails \
    it, its fix-up passes); the bound is 1 s + ⌈24/8⌉ rounds of agents … = 9 s as issue 34 \
    states it; ralph's wall time includes its start and end; validation runs are the run's \
    `validate_start` records, over the 24 stories landed";

// ---------------------------------------------------------------------------
// Figure 4: overhead per story against a git-CLI shell loop

/// 100 dirs × 100 files of ~400 bytes.
fn ten_thousand_files(root: &Path) {
    let filler = "lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod.\n";
    for d in 0..100 {
        let dir = root.join(format!("src/d{d:02}"));
        fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..100 {
            let mut text = format!("// file d{d:02}/f{f:02}\n");
            while text.len() < 400 {
                text += filler;
            }
            fs::write(dir.join(format!("f{f:02}.txt")), text).expect("write");
        }
    }
}

const BASELINE: &str = r#"#!/bin/bash
# The same work as `ralph run` per story, with the git CLI.
set -euo pipefail
root="$1"; wts="$2"; logs="$3"; shift 3
cd "$root"
for id in "$@"; do
  wt="$wts/story-$id"
  git worktree add -q -b "ralph/story-$id" "$wt" main
  spec=$(ls specs/epic-${id%%.*}/story-$id-*.md)
  { printf 'You are an autonomous coding agent. Your task is to implement Story %s: bench\n\n' "$id"; cat "$spec"; } \
    | (cd "$wt" && claude --print --output-format stream-json > "$logs/$id.log")
  grep -q "<ralph>DONE $id</ralph>" "$logs/$id.log"
  git merge -q --no-ff -m "merge: story $id" "ralph/story-$id"
  git worktree remove "$wt"
  git branch -q -d "ralph/story-$id"
done
"#;

/// A tmpfs for the 10,000-file repos when there is one: on this class of VM
/// creating files on the disk costs ~0.5 ms each and varies with the other
/// tenants, which would swamp what the figure compares.
fn memory_tmp() -> PathBuf {
    if let Some(p) = std::env::var_os("RALPH_BENCH_FAST_TMP") {
        return PathBuf::from(p);
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() && tempfile::tempdir_in(shm).is_ok() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn fig_overhead(bin: &Path, quick: bool) -> Figure {
    const N: usize = 30;
    let runs = if quick { 1 } else { 3 };
    let mut fig = Figure::new(
        "overhead",
        "Overhead per story: ralph against a git-CLI shell loop",
    );
    let backlog = Backlog {
        sections: vec![batch("1", stories(1, N, |_| "small"))],
    };
    let ids: Vec<String> = backlog.stories().map(|s| s.id.clone()).collect();
    let agent = "finish\n";
    let mem = memory_tmp();
    let new = || Project::new_in(&mem, &backlog, agent, ten_thousand_files);
    let (mut seq, mut par, mut base) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..runs {
        let p = new();
        let t = p.run_ok(bin, &["run"]).as_secs_f64();
        assert_eq!(p.merges_on_main(), N);
        seq.push(t);
        drop(p);

        let p = new();
        let script = p.tmp.path().join("baseline.sh");
        fs::write(&script, BASELINE).expect("write baseline");
        let (wts, logs) = (p.tmp.path().join("wt"), p.tmp.path().join("logs"));
        fs::create_dir_all(&wts).expect("mkdir");
        fs::create_dir_all(&logs).expect("mkdir");
        let start = Instant::now();
        let status = Command::new("bash")
            .arg(&script)
            .arg(&p.root)
            .arg(&wts)
            .arg(&logs)
            .args(&ids)
            .env("PATH", p.path_env())
            .env("HOME", p.tmp.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null())
            .status()
            .expect("bash runs");
        let b = start.elapsed().as_secs_f64();
        assert!(status.success(), "the baseline script failed");
        assert_eq!(p.merges_on_main(), N);
        base.push(b);
        drop(p);

        let p = new();
        let t4 = p
            .run_ok(bin, &["run", "--parallel", "-j", "4"])
            .as_secs_f64();
        assert_eq!(p.merges_on_main(), N);
        par.push(t4);
        eprintln!(
            "  overhead run {}/{runs}: ralph {t:.2} s, shell {b:.2} s, ralph -j 4 {t4:.2} s",
            r + 1
        );
    }
    let ratio = |a: &[f64]| a.iter().zip(&base).map(|(x, y)| x / y).collect::<Vec<_>>();
    let per_story = |a: &[f64]| a.iter().map(|x| x / N as f64 * 1e3).collect::<Vec<_>>();
    fig.rows
        .push(Row::new("ralph (sequential) ÷ shell loop", "×", ratio(&seq)).target(Cmp::Le, 1.0));
    fig.rows.push(Row::new(
        "ralph --parallel -j 4 ÷ shell loop",
        "×",
        ratio(&par),
    ));
    fig.rows.push(Row::new(
        "ralph (sequential), per story",
        "ms",
        per_story(&seq),
    ));
    fig.rows.push(Row::new(
        "ralph --parallel -j 4, per story",
        "ms",
        per_story(&par),
    ));
    fig.rows.push(Row::new(
        "shell loop (git CLI), per story",
        "ms",
        per_story(&base),
    ));
    fig.notes.push(format!(
        "{N} independent stories in one batch; repo of 10,000 committed files (100 dirs × 100 × ~400 B); \
         the agent writes one file and commits at once; ratios pair run i of ralph with run i of the \
         shell loop; wall times include ralph's startup and final cleanup; temp dirs in {}",
        mem.display()
    ));
    fig
}

// ---------------------------------------------------------------------------
// Sealed attempts: what bubblewrap costs (issue 22)

/// A 30-story run with an instant agent at `-j 4`, inside bubblewrap and
/// not, the two runs of each pair back to back so both see the same load;
/// and bwrap's own start cost, as the time to start `true` inside the
/// sandbox less the time to start it bare.
fn fig_sandbox(bin: &Path, quick: bool) -> Figure {
    const N: usize = 30;
    let runs = if quick { 1 } else { 3 };
    let mut fig = Figure::new(
        "sandbox",
        "Sealed attempts: a sandboxed run against an unsandboxed one",
    );
    let works = Command::new("bwrap")
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
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        fig.notes
            .push("bubblewrap is missing or broken here: nothing measured".into());
        return fig;
    }
    let backlog = Backlog {
        sections: vec![batch("1", stories(1, N, |_| "small"))],
    };
    let mem = memory_tmp();
    let new = |mode: &'static str| {
        Project::new_in(&mem, &backlog, "finish\n", move |root: &Path| {
            ten_thousand_files(root);
            write(
                root,
                ".ralph/config.json",
                &format!(
                    "{{ \"loop\": {{ \"max_retries\": 1 }}, \"sandbox\": {{ \"mode\": \"{mode}\" }} }}\n"
                ),
            );
        })
    };
    let (mut sealed, mut open) = (Vec::new(), Vec::new());
    for r in 0..runs {
        // Alternate which goes first, so a drift in load favours neither.
        let order: [&'static str; 2] = if r % 2 == 0 {
            ["bwrap", "off"]
        } else {
            ["off", "bwrap"]
        };
        for mode in order {
            let p = new(mode);
            let t = p
                .run_ok(bin, &["run", "--parallel", "-j", "4"])
                .as_secs_f64();
            assert_eq!(p.merges_on_main(), N);
            if mode == "bwrap" {
                assert!(
                    p.log().contains("agent start"),
                    "the sandboxed run ran its agents"
                );
                sealed.push(t);
            } else {
                open.push(t);
            }
        }
        eprintln!(
            "  sandbox run {}/{runs}: bwrap {:.2} s, off {:.2} s",
            r + 1,
            sealed[r],
            open[r]
        );
    }
    let ratio: Vec<f64> = sealed.iter().zip(&open).map(|(a, b)| a / b).collect();
    fig.rows.push(
        Row::new("sandboxed ÷ unsandboxed wall time, -j 4", "×", ratio).target(Cmp::Le, 1.10),
    );
    fig.rows.push(Row::new(
        "sandboxed, per story",
        "ms",
        sealed.iter().map(|x| x / N as f64 * 1e3).collect(),
    ));
    fig.rows.push(Row::new(
        "unsandboxed, per story",
        "ms",
        open.iter().map(|x| x / N as f64 * 1e3).collect(),
    ));

    // bwrap's start cost, with a mount list the size of an attempt's.
    let starts = if quick { 20 } else { 100 };
    let time = |c: &mut dyn FnMut() -> Command| {
        (0..starts)
            .map(|_| {
                let t = Instant::now();
                let ok = c().status().is_ok_and(|s| s.success());
                assert!(ok, "a trial start failed");
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect::<Vec<f64>>()
    };
    let bare = time(&mut || Command::new("/usr/bin/true"));
    let boxed = time(&mut || {
        let mut c = Command::new("bwrap");
        c.args(["--unshare-all", "--share-net", "--die-with-parent"]);
        for d in ["/usr", "/etc", "/opt"] {
            if Path::new(d).exists() {
                c.args(["--ro-bind", d, d]);
            }
        }
        for d in ["/bin", "/sbin", "/lib", "/lib64"] {
            match fs::read_link(d) {
                Ok(t) => c.arg("--symlink").arg(t).arg(d),
                Err(_) if Path::new(d).exists() => c.args(["--ro-bind", d, d]),
                Err(_) => &mut c,
            };
        }
        c.args(["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]);
        c.args([
            "--tmpfs", "/root", "--bind", "/tmp", "/tmp/w", "--chdir", "/tmp/w",
        ]);
        c.args(["--", "/usr/bin/true"]);
        c
    });
    let extra: Vec<f64> = {
        let b = median(&bare);
        boxed.iter().map(|x| x - b).collect()
    };
    fig.rows
        .push(Row::new("bwrap start, over a bare start", "ms", extra));
    fig.rows.push(Row::new("bare start of `true`", "ms", bare));
    fig.notes.push(format!(
        "{N} independent stories in one batch, repo of 10,000 files, the agent commits one file at \
         once; ratios pair run i of each mode, which alternate in order; {starts} starts of `true` \
         each way; temp dirs in {}",
        mem.display()
    ));
    fig
}

// ---------------------------------------------------------------------------
// Figure 5: dispatch latency

fn fig_latency(bin: &Path, quick: bool) -> Figure {
    let runs = if quick { 1 } else { 5 };
    let mut fig = Figure::new(
        "latency",
        "Dispatch latency: last dependency landed -> agent start",
    );
    // A 20-story chain by depends_on, 3 stories fanning out of it, and 2 long
    // independent stories: at most 4 run at once, so a slot is always free
    // and the figure is ralph's latency, not a wait for a slot.
    let mut chain = stories(5, 20, |_| "small");
    for k in 2..=20 {
        chain[k - 1].deps.push(format!("5.{}", k - 1));
    }
    let mut fan = stories(6, 3, |_| "small");
    for (s, d) in fan.iter_mut().zip(["5.5", "5.10", "5.15"]) {
        s.deps.push(d.into());
    }
    let long = stories(7, 2, |_| "large");
    let mut all = chain;
    all.extend(fan);
    all.extend(long);
    let backlog = Backlog {
        sections: vec![batch("1", all)],
    };
    let durations: Vec<(String, f64)> = backlog
        .stories()
        .map(|s| {
            let d = match s.id.as_str() {
                "7.1" => 4.0,
                "7.2" => 6.0,
                _ => 0.25,
            };
            (s.id.clone(), d)
        })
        .collect();
    let agent = sleeping_agent(&durations);
    let deps: Vec<(String, Vec<String>)> = backlog
        .stories()
        .filter(|s| !s.deps.is_empty())
        .map(|s| (s.id.clone(), s.deps.clone()))
        .collect();
    let mut lat = Vec::new();
    let mut run_medians = Vec::new();
    for r in 0..runs {
        let p = Project::new(&backlog, &agent, |_| {});
        p.run_ok(bin, &["run", "--parallel", "-j", "4"]);
        let log = p.log();
        let (landed, started) = log_events(&log);
        let mut this = Vec::new();
        for (y, ds) in &deps {
            let last = ds.iter().filter_map(|d| landed.get(d)).max();
            if let (Some(&l), Some(&s)) = (last, started.get(y)) {
                this.push((s - l) as f64);
            }
        }
        assert_eq!(
            this.len(),
            deps.len(),
            "every dependent story started after its dependency"
        );
        eprintln!(
            "  latency run {}/{runs}: median {:.0} ms, max {:.0} ms",
            r + 1,
            median(&this),
            max(&this)
        );
        run_medians.push(median(&this));
        lat.extend(this);
    }
    fig.rows.push(
        Row::new(
            "landed X -> agent start Y (all dependents, pooled)",
            "ms",
            lat,
        )
        .target(Cmp::Lt, 50.0),
    );
    fig.rows
        .push(Row::new("median of each run", "ms", run_medians));
    fig.notes.push(format!(
        "25 stories in one batch, -j 4: a 20-story depends_on chain (0.25 s each), 3 stories \
         depending on chain stories 5, 10 and 15, 2 independent stories of 4 s and 6 s; {} \
         dependents per run; times from ralph.log (ms resolution)",
        deps.len()
    ));
    fig
}

// ---------------------------------------------------------------------------
// Figure 6: conflicts, fixed up or redone

/// Ten pairs of stories, each pair appending to a file of its own; the
/// second of a pair takes longer, so at `-j 4` it finishes after its
/// partner landed and conflicts. Scripted answers: a fresh run sleeps its
/// story's time and appends its line; a run that finds a merge in progress
/// (`MERGE_HEAD`: a fix-up) resolves it by keeping both lines and commits.
/// Tokens are a model of what a real agent reads: the prompt (bytes ÷ 4)
/// plus 20,000 of code for a fresh run and 4,000 for a fix-up, 2,000 or
/// 500 out; a resumed fix-up also reads its earlier conversation (22,000)
/// from the cache.
const CONFLICT_AGENT: &str = r#"
n="${id#*.}"
f="shared-$(( (n + 1) / 2 )).txt"
if git rev-parse -q --verify MERGE_HEAD >/dev/null; then
  sleep 0.3
  { git show HEAD:"$f"; git show MERGE_HEAD:"$f"; } | awk '!seen[$0]++' > "$f.resolved"
  mv "$f.resolved" "$f"
  git add "$f" && git commit -q --no-edit
  input=$(( ${#prompt} / 4 + 4000 )); output=500; cache=0
  case " $* " in *" --resume "*) cache=22000 ;; esac
else
  # The edit is announced first (Claude Code's tool call), as a real agent's is.
  printf '{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Edit","input":{"file_path":"%s/%s"}}]}}\n' "$PWD" "$f"
  if [ $(( n % 2 )) = 1 ]; then sleep 1.0; else sleep 1.6; fi
  printf 'line from %s\n' "$id" >> "$f"
  git add "$f" && git commit -q -m "feat(story-$id): shared change"
  input=$(( ${#prompt} / 4 + 20000 )); output=2000; cache=0
fi
say "done"
printf '{"type":"result","subtype":"success","is_error":false,"result":"done <ralph>DONE %s</ralph>","num_turns":4,"total_cost_usd":0.01,"usage":{"input_tokens":%d,"output_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":%d}}\n' "$id" "$input" "$output" "$cache"
"#;

/// What one run of the conflicts figure gave.
struct ConflictRun {
    wall: f64,
    runs: f64,
    full_runs: f64,
    conflicts: f64,
    conflict_tokens: f64,
    resumed: f64,
}

/// How the conflicts figure's specs say which file a story changes.
#[derive(Clone, Copy, PartialEq)]
enum Declare {
    /// Ralph v2's "Files to Create/Modify" section.
    Section,
    /// Named in the story's prose only, as most hand-written specs do.
    Prose,
}

fn conflict_run(bin: &Path, backlog: &Backlog, declare: Declare, predict: bool) -> ConflictRun {
    conflict_run_with(bin, backlog, declare, predict, None, CONFLICT_AGENT)
}

/// `conflict_run`, with `parallel.conflicts` set when `conflicts` is given.
fn conflict_run_with(
    bin: &Path,
    backlog: &Backlog,
    declare: Declare,
    predict: bool,
    conflicts: Option<&str>,
    agent: &str,
) -> ConflictRun {
    let n = backlog.stories().count();
    let p = Project::new(backlog, agent, |root| {
        let mode = conflicts.map_or(String::new(), |c| format!(", \"conflicts\": \"{c}\""));
        write(
            root,
            ".ralph/config.json",
            &format!(
                "{{ \"loop\": {{ \"max_retries\": 3 }}, \"parallel\": {{ \"predict_files\": {predict}{mode} }} }}\n"
            ),
        );
        for k in 1..=n.div_ceil(2) {
            write(root, &format!("shared-{k}.txt"), "");
        }
        for (i, st) in backlog.stories().enumerate() {
            let (rel, text) = Backlog::spec(st);
            let file = format!("shared-{}.txt", i / 2 + 1);
            let says = match declare {
                Declare::Section => format!(
                    "\n## Files to Create/Modify\n\n- `{file}` — append this story's line\n"
                ),
                Declare::Prose => {
                    format!(
                        "\nAppend this story's line to `{file}`; see `README.md` for the style.\n"
                    )
                }
            };
            write(root, &rel, &(text + &says));
        }
    });
    let wall = p
        .run_ok(bin, &["run", "--parallel", "-j", "4"])
        .as_secs_f64();
    assert_eq!(p.merges_on_main(), n, "every story landed");
    let state: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(p.root.join(".ralph/state.json")).unwrap())
            .expect("state.json parses");
    let (mut runs, mut full, mut conflicts, mut tokens) = (0.0, 0.0, 0.0, 0.0);
    let mut resumed = 0.0;
    for rec in state["stories"].as_object().expect("stories").values() {
        conflicts += rec["conflicts"].as_f64().unwrap_or(0.0);
        for h in rec["history"].as_array().into_iter().flatten() {
            runs += 1.0;
            // Before fix-ups there was no kind: every run was a full one.
            if h["kind"].as_str() != Some("fixup") {
                full += 1.0;
            }
            if h["resumed"].as_bool() == Some(true) {
                resumed += 1.0;
            }
            // Every run after a story's first is spent on its conflict.
            if h["number"].as_u64() != Some(1) {
                let u = &h["usage"];
                tokens += [
                    "input_tokens",
                    "output_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                ]
                .iter()
                .map(|k| u[*k].as_f64().unwrap_or(0.0))
                .sum::<f64>();
            }
        }
    }
    ConflictRun {
        wall,
        runs: runs / n as f64,
        full_runs: full / n as f64,
        conflicts,
        conflict_tokens: tokens,
        resumed,
    }
}

fn fig_conflicts(bin: &Path, quick: bool) -> Figure {
    let runs = if quick { 1 } else { 5 };
    let mut fig = Figure::new(
        "conflicts",
        "Conflicts at -j 4: agent runs, tokens and makespan, fix-ups against redos",
    );
    let backlog = Backlog {
        sections: vec![batch("1", stories(1, 20, |_| "medium"))],
    };
    let baseline = std::env::var_os("RALPH_BENCH_BASELINE").map(PathBuf::from);
    let mut variants = vec![
        ("after", bin.to_path_buf(), Declare::Section, true),
        (
            "undeclared, predicted",
            bin.to_path_buf(),
            Declare::Prose,
            true,
        ),
        (
            "undeclared, prediction off",
            bin.to_path_buf(),
            Declare::Prose,
            false,
        ),
    ];
    if let Some(b) = &baseline {
        variants.insert(0, ("before", b.clone(), Declare::Section, true));
    }
    for (name, b, declare, predict) in &variants {
        let mut all = Vec::new();
        for r in 0..runs {
            let c = conflict_run(b, &backlog, *declare, *predict);
            eprintln!(
                "  conflicts {name} run {}/{runs}: {:.2} s, {:.2} runs/story, {} conflicts, {:.0} tokens on conflicts",
                r + 1,
                c.wall,
                c.runs,
                c.conflicts,
                c.conflict_tokens
            );
            all.push(c);
        }
        let col = |f: fn(&ConflictRun) -> f64| all.iter().map(f).collect::<Vec<_>>();
        let runs_row = Row::new(
            &format!("{name}: agent runs per landed story"),
            "×",
            col(|c| c.runs),
        );
        fig.rows.push(match *name {
            "after" => runs_row.target(Cmp::Le, 1.15),
            // Issue 25: paths named in prose and the files agents edit.
            "undeclared, predicted" => runs_row.target(Cmp::Le, 1.25),
            _ => runs_row,
        });
        type Of = fn(&ConflictRun) -> f64;
        let plain: [(&str, &str, Of); 5] = [
            (
                "full-prompt runs (first tries and redos) per landed story",
                "×",
                |c| c.full_runs,
            ),
            ("merge conflicts", "", |c| c.conflicts),
            ("fix-ups that resumed the agent's session", "", |c| {
                c.resumed
            }),
            (
                "tokens spent on conflicts (runs after a story's first)",
                "",
                |c| c.conflict_tokens,
            ),
            ("makespan", "s", |c| c.wall),
        ];
        for (what, unit, f) in plain {
            fig.rows
                .push(Row::new(&format!("{name}: {what}"), unit, col(f)));
        }
    }
    fig.notes.push(format!(
        "20 stories in one batch, `-j 4`, ten pairs each appending a line to a file of their own \
         (`shared-<k>.txt`); a fresh run sleeps 1.0 s (first of a pair) or 1.6 s (second) and \
         commits; a fix-up (merge in progress) sleeps 0.3 s, keeps both lines and commits; tokens \
         are the agent's scripted usage (see `CONFLICT_AGENT`); \"after\" declares each story's \
         file in a Files to Create/Modify section, \"undeclared\" names it in the spec's prose \
         only (with README.md, which every spec names), and the agent announces its edit as a \
         Claude Code `Edit` tool call; \"prediction off\" is `parallel.predict_files: false`; {}",
        match &baseline {
            Some(b) => format!("before = {}", b.display()),
            None => "set RALPH_BENCH_BASELINE to an older ralph for the before rows".into(),
        }
    ));
    fig
}

/// The makespan of a conflict-free 40-story DAG (the makespan figure's DAG
/// A generator) whose specs name paths in prose that pairs of stories share
/// without touching them (a notes file "for context"): what the wider
/// prediction costs where it predicts wrongly, on against off.
fn fig_predict_makespan(bin: &Path, quick: bool) -> Figure {
    const JOBS: usize = 4;
    let mut fig = Figure::new(
        "predict-makespan",
        "Makespan of a conflict-free 40-story DAG at -j 4, file prediction on and off",
    );
    let backlog = makespan_backlog(1);
    let d: Vec<f64> = backlog.stories().map(|s| units(s.est)).collect();
    let p = plan(&backlog, d, JOBS);
    // Scale so the lower bound is ~20 s.
    let unit = p.unit_for(20.0);
    let all: Vec<Story> = backlog.stories().cloned().collect();
    let durations = p.durations(&all, unit);
    let agent = sleeping_agent(&durations);
    let runs = if quick { 1 } else { 3 };
    let mut walls: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    // Interleaved, so load on the shared machine falls on both alike.
    for r in 0..runs {
        for (k, predict) in [true, false].into_iter().enumerate() {
            let proj = Project::new(&backlog, &agent, |root| {
                write(
                    root,
                    ".ralph/config.json",
                    &format!(
                        "{{ \"loop\": {{ \"max_retries\": 1 }}, \"parallel\": {{ \"predict_files\": {predict} }} }}\n"
                    ),
                );
                for (i, st) in all.iter().enumerate() {
                    let (rel, text) = Backlog::spec(st);
                    let prose = format!(
                        "\nThe change goes in `bench-out/{}.txt`; read `docs/notes-{}.md` and \
                         `README.md` for context.\n",
                        st.id,
                        i / 2
                    );
                    write(root, &rel, &(text + &prose));
                }
            });
            let wall = proj
                .run_ok(bin, &["run", "--parallel", "-j", "4"])
                .as_secs_f64();
            assert_eq!(proj.merges_on_main(), all.len(), "every story landed");
            eprintln!(
                "  predict-makespan {} run {}/{runs}: {wall:.2} s (lower bound {:.2} s)",
                if predict { "on" } else { "off" },
                r + 1,
                p.lb * unit
            );
            walls[k].push(wall);
        }
    }
    let on = median(&walls[0]);
    let off = median(&walls[1]);
    fig.rows
        .push(Row::new("prediction on: makespan", "s", walls[0].clone()));
    fig.rows
        .push(Row::new("prediction off: makespan", "s", walls[1].clone()));
    let ratios: Vec<f64> = walls[0].iter().zip(&walls[1]).map(|(a, b)| a / b).collect();
    fig.rows
        .push(Row::new("on ÷ off (run by run)", "×", ratios).target(Cmp::Le, 1.05));
    fig.notes.push(format!(
        "DAG A of the makespan figure's generator (seed 1, 40 stories, lower bound {:.1} s); \
         every spec names its own output file, `README.md` (named by all: ignored as telling \
         nothing) and a notes file it shares with one other story but neither touches, so the \
         prediction keeps 20 pairs apart for nothing; medians {on:.2} s on, {off:.2} s off; \
         target: no worse than off (within 5 %, the noise of one run)",
        p.lb * unit
    ));
    fig
}

/// The forecast figure's agent: sleeps its story's time, commits, and
/// reports its story's cost in Claude Code's `result` (`total_cost_usd`).
fn costed_agent(stories: &[(String, f64, f64)]) -> String {
    let mut s = String::from("case \"$id\" in\n");
    for (id, secs, cost) in stories {
        let _ = writeln!(s, "  \"{id}\") secs={secs:.3}; cost={cost:.4} ;;");
    }
    s += r#"esac
sleep "$secs"
mkdir -p bench-out
printf '%s\n' "$id" > "bench-out/$id.txt"
git add "bench-out/$id.txt" && git commit -q -m "feat(story-$id): bench change"
say "implemented $id"
printf '{"type":"result","subtype":"success","is_error":false,"result":"done <ralph>DONE %s</ralph>","num_turns":3,"total_cost_usd":%s,"usage":{"input_tokens":1000,"output_tokens":100,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}\n' "$id" "$cost"
"#;
    s
}

/// `cost $1.23` and `wall time 42 s` of `run -d`'s forecast line.
fn forecast_figures(out: &str) -> Option<(f64, f64)> {
    let line = out.lines().find(|l| l.contains("Forecast for"))?;
    let cost: f64 = line
        .split("cost $")
        .nth(1)?
        .split([' ', ','])
        .next()?
        .parse()
        .ok()?;
    let wall = line.split("wall time ").nth(1)?;
    let mut words = wall.split(' ');
    let n: f64 = words.next()?.parse().ok()?;
    let secs = match words.next()? {
        w if w.starts_with("min") => n * 60.0,
        w if w.starts_with('h') => n * 3600.0,
        _ => n,
    };
    Some((cost, secs))
}

/// Forecast error of `ralph run -d` after one earlier run of the same
/// backlog: a 20-story DAG run once in one project; its run records are
/// copied into a fresh project with the same backlog, whose `run -d -j 4`
/// forecast is compared with what its own run then costs and takes.
fn fig_forecast(bin: &Path, quick: bool) -> Figure {
    let mut fig = Figure::new(
        "forecast",
        "Forecast error of `ralph run -d -j 4` after one earlier run of the same backlog",
    );
    let runs = if quick { 1 } else { 3 };
    // Small, medium and large stories: longer specs, longer and dearer
    // attempts.
    let mut backlog = makespan_backlog(3);
    backlog.sections.truncate(3);
    backlog.sections[2].stories.truncate(4);
    assert_eq!(backlog.stories().count(), 20);
    let specs: Vec<(String, f64, f64)> = backlog
        .stories()
        .map(|s| {
            let (secs, cost) = match s.est {
                "small" => (0.8, 0.04),
                "large" => (3.0, 0.30),
                _ => (1.5, 0.12),
            };
            (s.id.clone(), secs, cost)
        })
        .collect();
    let pad = |est: &str| match est {
        "small" => 0,
        "large" => 6000,
        _ => 1500,
    };
    let agent = costed_agent(&specs);
    let setup = |root: &Path| {
        for st in backlog.stories() {
            let (rel, text) = Backlog::spec(st);
            let more = "Details of the change, step by step. ".repeat(pad(st.est) / 37);
            write(root, &rel, &format!("{text}\n## Details\n\n{more}\n"));
        }
    };
    let (mut cost_err, mut wall_err) = (Vec::new(), Vec::new());
    for r in 0..runs {
        let first = Project::new(&backlog, &agent, setup);
        first.run_ok(bin, &["run", "--parallel", "-j", "4"]);
        let second = Project::new(&backlog, &agent, setup);
        let runs_dir = second.root.join(".ralph/runs");
        fs::create_dir_all(&runs_dir).expect("mkdir runs");
        for e in fs::read_dir(first.root.join(".ralph/runs"))
            .expect("runs")
            .flatten()
        {
            fs::copy(e.path(), runs_dir.join(e.file_name())).expect("copy run records");
        }
        let out = second
            .ralph(bin, &["run", "-d", "--parallel", "-j", "4"])
            .stdout(Stdio::piped())
            .output()
            .expect("ralph run -d");
        let text = String::from_utf8_lossy(&out.stdout);
        let (cost, secs) = forecast_figures(&text)
            .unwrap_or_else(|| panic!("no forecast in `run -d`'s output:\n{text}"));
        let wall = second
            .run_ok(bin, &["run", "--parallel", "-j", "4"])
            .as_secs_f64();
        let state: serde_json::Value = serde_json::from_str(
            &fs::read_to_string(second.root.join(".ralph/state.json")).expect("state"),
        )
        .expect("state.json parses");
        let spent: f64 = state["stories"]
            .as_object()
            .expect("stories")
            .values()
            .flat_map(|s| s["history"].as_array().cloned().unwrap_or_default())
            .map(|h| h["cost_usd"].as_f64().unwrap_or(0.0))
            .sum();
        eprintln!(
            "  forecast run {}/{runs}: forecast ${cost:.2} {secs:.0} s, actual ${spent:.2} {wall:.1} s",
            r + 1
        );
        cost_err.push((cost / spent - 1.0) * 100.0);
        wall_err.push((secs / wall - 1.0) * 100.0);
    }
    let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
    fig.rows.push(Row::new(
        "cost: forecast ÷ actual − 1",
        "%",
        cost_err.clone(),
    ));
    fig.rows
        .push(Row::new("cost: |error|", "%", abs(&cost_err)).target(Cmp::Le, 25.0));
    fig.rows.push(Row::new(
        "wall time: forecast ÷ actual − 1",
        "%",
        wall_err.clone(),
    ));
    fig.rows
        .push(Row::new("wall time: |error|", "%", abs(&wall_err)).target(Cmp::Le, 25.0));
    fig.notes.push(
        "20 stories (the makespan generator's seed 3, three sections, random depends_on), `-j 4`; \
         small / medium / large stories sleep 0.8 / 1.5 / 3.0 s, cost $0.04 / $0.12 / $0.30 \
         (Claude Code's `total_cost_usd`) and have specs padded by 0 / 1.5 / 6 KB; the first \
         project's run records are copied into a fresh project with the same backlog, whose \
         `run -d` forecast (the expected figure, not the range) is compared with its own run: \
         cost from state.json, wall time as measured around `ralph run`"
            .into(),
    );
    fig
}

// ---------------------------------------------------------------------------
// Figure 7: `ralph report` on 2,000 stories

/// A state.json and one run's records (`.ralph/runs/`) for `backlog`, as
/// a 12-hour run with 8 slots would leave them: 70% landed (a fifth after
/// a retry, one in twenty after a conflict), 3% failed, a usage-limit
/// pause. Returns the number of attempts recorded.
fn report_history(root: &Path, backlog: &Backlog) -> usize {
    let mut rng = Rng(0x5eed_2000);
    let t0 = 1_795_348_281.0f64;
    let slots = 8usize;
    let mut free = vec![t0 + 1.0; slots];
    let mut recs = String::new();
    let mut state = String::from("{\"format_version\":2,\"completed_stories\":[");
    let mut stories_json = String::new();
    let mut completed = Vec::new();
    let mut attempts = 0;
    let _ = writeln!(
        recs,
        "{{\"t\":{t0},\"ev\":\"run_start\",\"run\":\"20261122-115121\",\"version\":\"0.1.0\",\
         \"args\":[\"run\",\"-j\",\"8\"],\"jobs\":{slots},\"agent\":\"claude\",\"target\":\"main\",\
         \"commit\":null,\"selected\":2000,\"stories\":2000,\"pid\":1}}"
    );
    for (i, st) in backlog.stories().enumerate() {
        let roll = rng.below(100);
        let (tries, landed, failed) = match roll {
            0..=2 => (2, false, true),
            3..=16 => (2, true, false),
            17..=69 => (1, true, false),
            _ => (0, false, false),
        };
        let mut hist = Vec::new();
        let mut cost = 0.0;
        let mut toks = 0u64;
        let mut secs_total = 0.0;
        for n in 1..=tries {
            let slot = (0..slots)
                .min_by(|&a, &b| free[a].total_cmp(&free[b]))
                .unwrap();
            let start = free[slot];
            let secs = 120.0 + rng.below(900) as f64;
            let end = start + secs;
            free[slot] = end + 2.0;
            let ok = n == tries && landed;
            let verdict = if ok { "done" } else { "fail" };
            let c = 0.05 + rng.below(40) as f64 / 100.0;
            let tk = 20_000 + rng.below(200_000) as u64;
            cost += c;
            toks += tk;
            secs_total += secs;
            attempts += 1;
            let kind = if n == 1 { "first" } else { "retry" };
            let _ = writeln!(
                recs,
                "{{\"t\":{start:.3},\"ev\":\"attempt_start\",\"story\":\"{id}\",\"attempt\":{n},\
                 \"slot\":{slot},\"agent\":\"claude\",\"kind\":\"{kind}\",\"est\":\"{est}\"}}\n\
                 {{\"t\":{end:.3},\"ev\":\"attempt_end\",\"story\":\"{id}\",\"attempt\":{n},\
                 \"slot\":{slot},\"agent\":\"claude\",\"kind\":\"{kind}\",\"verdict\":\"{verdict}\",\
                 {reason}\"tokens\":{tk},\"usage\":{{\"input_tokens\":{tk},\"output_tokens\":0,\
                 \"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0}},\
                 \"cost_usd\":{c:.4},\"secs\":{secs:.1}}}",
                id = st.id,
                est = st.est,
                reason = if ok {
                    String::new()
                } else {
                    "\"reason\":\"tests are red: 3 failed, 120 passed\",".to_string()
                },
            );
            hist.push(format!(
                "{{\"number\":{n},\"outcome\":\"{verdict}\",\"duration_secs\":{secs:.1},\
                 \"usage\":{{\"input_tokens\":{tk},\"output_tokens\":0,\
                 \"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0}},\
                 \"cost_usd\":{c:.4},\"agent\":\"claude\"}}"
            ));
            if ok {
                let commit = format!("{:040x}", i as u128 * 0x9e37_79b9_7f4a_7c15);
                if i % 20 == 7 {
                    let _ = writeln!(
                        recs,
                        "{{\"t\":{:.3},\"ev\":\"conflict\",\"story\":\"{}\",\"attempt\":{n},\
                         \"paths\":[\"src/lib.rs\"],\"secs\":4.0}}",
                        end + 1.0,
                        st.id
                    );
                }
                let _ = writeln!(
                    recs,
                    "{{\"t\":{:.3},\"ev\":\"land_start\",\"story\":\"{id}\",\"attempt\":{n}}}\n\
                     {{\"t\":{:.3},\"ev\":\"landed\",\"story\":\"{id}\",\"attempt\":{n},\
                     \"commit\":\"{commit}\",\"secs\":20.0}}",
                    end + 1.0,
                    end + 21.0,
                    id = st.id
                );
                completed.push(format!("\"{}\"", st.id));
                let _ = write!(
                    stories_json,
                    "{}\"{}\":{{\"status\":\"done\",\"attempts\":{},\"attempts_started\":{n},\
                     \"landed_commit\":\"{commit}\",\"usage\":{{\"input_tokens\":{toks},\
                     \"output_tokens\":0,\"cache_creation_input_tokens\":0,\
                     \"cache_read_input_tokens\":0}},\"cost_usd\":{cost:.4},\
                     \"duration_secs\":{secs_total:.1},\"history\":[{}]}}",
                    if stories_json.is_empty() { "" } else { "," },
                    st.id,
                    n - 1,
                    hist.join(",")
                );
            }
        }
        if failed {
            let _ = writeln!(
                recs,
                "{{\"t\":{:.3},\"ev\":\"failed_for_good\",\"story\":\"{}\",\
                 \"reason\":\"tests are red\"}}",
                free.iter().copied().fold(t0, f64::max),
                st.id
            );
            let _ = write!(
                stories_json,
                "{}\"{}\":{{\"status\":\"failed\",\"attempts\":2,\"attempts_started\":2,\
                 \"last_error\":\"tests are red: 3 failed, 120 passed\",\"usage\":{{\
                 \"input_tokens\":{toks},\"output_tokens\":0,\"cache_creation_input_tokens\":0,\
                 \"cache_read_input_tokens\":0}},\"cost_usd\":{cost:.4},\
                 \"duration_secs\":{secs_total:.1},\"history\":[{}]}}",
                if stories_json.is_empty() { "" } else { "," },
                st.id,
                hist.join(",")
            );
        }
    }
    let end = free.iter().copied().fold(t0, f64::max) + 30.0;
    let _ = writeln!(
        recs,
        "{{\"t\":{:.3},\"ev\":\"pause\",\"why\":\"usage_limit\",\"agent\":\"claude\"}}\n\
         {{\"t\":{:.3},\"ev\":\"resume\",\"why\":\"usage_limit\",\"agent\":\"claude\"}}\n\
         {{\"t\":{end:.3},\"ev\":\"run_end\",\"done\":{},\"total\":2000,\"failed\":[],\
         \"blocked\":[],\"pending\":0,\"exit_code\":1,\"elapsed_secs\":{:.0},\"tokens\":0,\
         \"cost_usd\":0}}",
        t0 + 3600.0,
        t0 + 5400.0,
        completed.len(),
        end - t0
    );
    let _ = writeln!(
        state,
        "{}],\"stories\":{{{stories_json}}}}}",
        completed.join(",")
    );
    write(root, ".ralph/state.json", &state);
    write(root, ".ralph/runs/20261122-115121.jsonl", &recs);
    attempts
}

fn fig_report(bin: &Path, quick: bool) -> Figure {
    let runs = if quick { 3 } else { 15 };
    let mut fig = Figure::new("report", "`ralph report` on a 2,000-story backlog");
    let backlog = validate_backlog();
    let p = Project::new(&backlog, "finish\n", |_| {});
    let attempts = report_history(&p.root, &backlog);
    let out = p.tmp.path().join("report.html");
    let out_s = out.to_str().expect("a UTF-8 temp path").to_string();
    p.run_ok(bin, &["report", "--out", &out_s]);
    let mut t = Vec::new();
    for _ in 0..runs {
        t.push(p.run_ok(bin, &["report", "--out", &out_s]).as_secs_f64());
    }
    let size = fs::metadata(&out).expect("the report").len() as f64 / 1e6;
    if let Ok(keep) = std::env::var("RALPH_BENCH_REPORT") {
        let _ = fs::copy(&out, keep);
    }
    fig.rows
        .push(Row::new("`ralph report` wall time", "s", t).target(Cmp::Lt, 2.0));
    fig.rows
        .push(Row::new("report size", "MB", vec![size]).target(Cmp::Lt, 5.0));
    fig.notes.push(format!(
        "the 2,000-story backlog of the `validate` figure (10 batch sections, depends_on \
         edges), a state.json with every story's record and one run's records of {attempts} \
         attempts over 8 slots (generated, not run); wall time includes loading the project, \
         the state and the records, the DAG layout and writing the file; warm page cache; \
         RALPH_BENCH_REPORT=FILE keeps a copy of the page"
    ));
    fig
}

/// API calls of one read of a 500-issue GitHub backlog (issue 27), against
/// the tests' scripted REST API on 127.0.0.1: cold (no snapshot), then
/// with nothing changed (ETags), then after one issue was edited.
fn fig_tracker_poll(bin: &Path, quick: bool) -> Figure {
    use github_api::{issue, Api, Server};
    let mut fig = Figure::new(
        "tracker-poll",
        "API calls per read of a 500-issue GitHub backlog",
    );
    let p = Project::new(&one_story(), "finish\n", |_| {});
    let mut issues = std::collections::BTreeMap::new();
    for n in 1..=500u64 {
        let mut i = issue(n, &format!("Issue {n}."), &["ralph"]);
        // One in five is blocked by the issue before it.
        if n % 5 == 0 {
            i.blocked_by = vec![n - 1];
        }
        issues.insert(n, i);
    }
    let server = Server::start(
        Api {
            issues,
            token: "bench-token".into(),
            ..Api::default()
        },
        p.tmp.path().join("switches"),
    );
    write(
        &p.root,
        ".ralph/config.json",
        &format!(
            r#"{{ "backlog": {{ "source": "github", "github": {{ "repo": "o/r", "api_url": "{}" }} }} }}"#,
            server.url
        ),
    );
    let calls = |args: &[&str]| {
        let before = server.log().len();
        let status = p
            .ralph(bin, args)
            .env("GITHUB_TOKEN", "bench-token")
            .stdout(Stdio::null())
            .status()
            .expect("ralph starts");
        p.check(status, args);
        (server.log().len() - before) as f64
    };
    let cold = calls(&["validate"]);
    let runs = if quick { 2 } else { 5 };
    let warm: Vec<f64> = (0..runs).map(|_| calls(&["validate"])).collect();
    server
        .api
        .lock()
        .unwrap()
        .issues
        .get_mut(&250)
        .unwrap()
        .version += 1;
    let edited = calls(&["validate"]);
    fig.rows
        .push(Row::new("calls, first read (no snapshot)", "", vec![cold]));
    fig.rows
        .push(Row::new("calls per poll, nothing changed", "", warm).target(Cmp::Lt, 10.0));
    fig.rows.push(Row::new(
        "calls per poll, one issue edited",
        "",
        vec![edited],
    ));
    fig.notes.push(
        "500 issues with the label (5 pages of 100), one in five blocked by another; \
         a read is `ralph validate` (the same read a run's poll makes); nothing changed: \
         one conditional request per page, each a 304; an edited issue: its page again \
         (200) plus its dependency list"
            .to_string(),
    );
    fig
}

// ---------------------------------------------------------------------------
// Figure 9: the live web view's cost (issue 24)

/// The web view's URL, once the run printed it on stderr (`None` if it
/// ended first).
fn served_url(p: &Project, child: &mut std::process::Child) -> Option<String> {
    loop {
        let err = fs::read_to_string(p.tmp.path().join("stderr")).unwrap_or_default();
        if let Some(u) = err.lines().find_map(|l| l.strip_prefix("web view: ")) {
            return Some(u.trim().to_string());
        }
        if child.try_wait().expect("wait").is_some() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A client of `/api/events` on its own thread: every `activity` event's
/// text with the moment it arrived (Unix seconds). Ends with the stream.
fn sse_reader(url: &str) -> std::thread::JoinHandle<Vec<(String, f64)>> {
    use std::io::{BufRead, Write as _};
    let host = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .expect("a host")
        .to_string();
    // Every request needs the token (issue 31), the URL carries it.
    let token = url.split("token=").nth(1).unwrap_or("").to_string();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let Ok(mut s) = std::net::TcpStream::connect(&host) else {
            return seen;
        };
        let _ = write!(
            s,
            "GET /api/events HTTP/1.1\r\nHost: {host}\r\nX-Ralph-Token: {token}\r\n\r\n"
        );
        let mut r = std::io::BufReader::new(s);
        let mut event = String::new();
        let mut line = String::new();
        while r.read_line(&mut line).unwrap_or(0) > 0 {
            let at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .as_secs_f64();
            let l = line.trim_end();
            if let Some(e) = l.strip_prefix("event: ") {
                event = e.to_string();
            } else if let Some(d) = l.strip_prefix("data: ") {
                if event == "activity" {
                    let v: serde_json::Value = serde_json::from_str(d).unwrap_or_default();
                    seen.push((v["text"].as_str().unwrap_or("").to_string(), at));
                }
            }
            line.clear();
        }
        seen
    })
}

/// Headless Chromium already running (as a user's browser is when they
/// open the page), with its DevTools port; `None` without one on PATH.
fn start_browser(profile: &Path) -> Option<(std::process::Child, u16)> {
    let mut child = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|b| {
            Command::new(b)
                .args([
                    "--headless",
                    "--disable-gpu",
                    "--no-sandbox",
                    "--no-first-run",
                    "--remote-debugging-port=0",
                ])
                .arg(format!("--user-data-dir={}", profile.display()))
                .arg("about:blank")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .ok()
        })?;
    // Chromium names the port it chose in this file once it listens.
    let file = profile.join("DevToolsActivePort");
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        if let Some(port) = fs::read_to_string(&file)
            .ok()
            .and_then(|t| t.lines().next().and_then(|l| l.trim().parse().ok()))
        {
            return Some((child, port));
        }
        if child.try_wait().ok().flatten().is_some() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    None
}

/// One request to the browser's DevTools HTTP endpoint; its body (read
/// by its length: the endpoint keeps the connection open).
fn devtools(port: u16, method: &str, path: &str) -> Option<String> {
    use std::io::{BufRead as _, Read as _, Write as _};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"
    )
    .ok()?;
    let mut r = std::io::BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let ok = line.starts_with("HTTP/1.1 200");
    let mut len = 0usize;
    loop {
        line.clear();
        r.read_line(&mut line).ok()?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).ok()?;
    ok.then(|| String::from_utf8_lossy(&body).into_owned())
}

/// One run with `--serve`, the page opened (in a new tab of a browser
/// started before the clock) as soon as the run prints its URL, and an
/// event-stream client; (wall time, activity events seen, whether a
/// browser showed the page).
fn run_watched(p: &Project, bin: &Path, args: &[&str]) -> (f64, Vec<(String, f64)>, bool) {
    let profile = p.tmp.path().join("chromium");
    // RALPH_BENCH_NO_BROWSER=1: the event-stream client alone (a browser on
    // the same small machine competes with ralph for its CPUs).
    let mut browser = if std::env::var_os("RALPH_BENCH_NO_BROWSER").is_some() {
        None
    } else {
        start_browser(&profile)
    };
    let t = Instant::now();
    let mut child = p.ralph(bin, args).spawn().expect("ralph starts");
    let url = served_url(p, &mut child).expect("the run prints its URL");
    let reader = sse_reader(&url);
    if let Some((_, port)) = &browser {
        assert!(
            devtools(*port, "PUT", &format!("/json/new?{url}")).is_some(),
            "the browser opens the page"
        );
    }
    let status = child.wait().expect("wait");
    let wall = t.elapsed().as_secs_f64();
    p.check(status, args);
    let mut shown = false;
    if let Some((b, port)) = browser.as_mut() {
        // The page's title says it got the run's snapshot.
        shown =
            devtools(*port, "GET", "/json/list").is_some_and(|l| l.contains("ralph \u{b7} proj"));
        let _ = b.kill();
        let _ = b.wait();
        assert!(shown, "the browser's tab showed the run's page");
    }
    (wall, reader.join().unwrap_or_default(), shown)
}

fn fig_serve(bin: &Path, quick: bool) -> Figure {
    const JOBS: usize = 4;
    let mut fig = Figure::new("serve", "The live web view: makespan, RSS, event delay");
    // (a) Makespan of figure 3's DAG A, scaled to a ~15 s lower bound,
    // watched and not, in pairs whose order alternates.
    let (seed, backlog, p) = (0u64..)
        .map(|seed| {
            let b = makespan_backlog(seed);
            let d: Vec<f64> = b.stories().map(|s| units(s.est)).collect();
            let p = plan(&b, d, JOBS);
            (seed, b, p)
        })
        .find(|(_, b, p)| {
            p.dag_sim <= 1.02 * p.lb && b.stories().map(|s| s.deps.len()).sum::<usize>() >= 8
        })
        .expect("some seed works");
    let unit = p.unit_for(15.0);
    let all: Vec<Story> = backlog.stories().cloned().collect();
    let durations = p.durations(&all, unit);
    let agent = sleeping_agent(&durations);
    let pairs = if quick { 1 } else { 4 };
    let (mut plain, mut watched, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut browser = false;
    for k in 0..pairs {
        let mut pair = [0.0f64; 2];
        for &w in if k % 2 == 0 {
            &[false, true]
        } else {
            &[true, false]
        } {
            let proj = Project::new(&backlog, &agent, |_| {});
            let wall = if w {
                let (wall, _, b) =
                    run_watched(&proj, bin, &["run", "--parallel", "-j", "4", "--serve"]);
                browser |= b;
                wall
            } else {
                proj.run_ok(bin, &["run", "--parallel", "-j", "4"])
                    .as_secs_f64()
            };
            assert_eq!(proj.merges_on_main(), all.len(), "every story landed");
            eprintln!(
                "  serve pair {}/{pairs}: {} {wall:.2} s",
                k + 1,
                if w { "watched" } else { "plain" }
            );
            pair[usize::from(w)] = wall;
        }
        plain.push(pair[0]);
        watched.push(pair[1]);
        ratios.push(pair[1] / pair[0]);
    }
    fig.rows.push(Row::new("makespan, no web view", "s", plain));
    fig.rows.push(Row::new(
        "makespan, page open + event-stream client",
        "s",
        watched,
    ));
    fig.rows
        .push(Row::new("watched ÷ plain, per pair", "×", ratios).target(Cmp::Le, 1.02));

    // (b) RSS with a 1,000-story backlog, watched, 40 attempts.
    let big = {
        let mut sections = Vec::new();
        for b in 0..10 {
            sections.push(Section {
                label: Some((b + 1).to_string()),
                comment: None,
                stories: stories(b + 1, 100, |_| "small"),
            });
        }
        Backlog { sections }
    };
    let mut rss = Vec::new();
    for _ in 0..if quick { 1 } else { 3 } {
        let proj = Project::new(&big, "finish\n", |_| {});
        let args = ["run", "--parallel", "-j", "4", "-n", "40", "--serve"];
        let t = Instant::now();
        let mut child = proj.ralph(bin, &args).spawn().expect("ralph starts");
        let url = served_url(&proj, &mut child).expect("the run prints its URL");
        let reader = sse_reader(&url);
        let (status, hwm_kb) = wait_polling_hwm(&mut child);
        // -n 40 ends the run with stories left: exit 1 is its answer.
        assert!(
            status.code() == Some(0) || status.code() == Some(1),
            "{}",
            proj.output_tail()
        );
        let _ = reader.join();
        eprintln!(
            "  serve rss: {:.1} MB in {:.1} s",
            hwm_kb as f64 / 1024.0,
            t.elapsed().as_secs_f64()
        );
        rss.push(hwm_kb as f64 * 1024.0 / 1e6);
    }
    fig.rows.push(
        Row::new("ralph peak RSS (VmHWM), 1,000 stories, watched", "MB", rss).target(Cmp::Lt, 64.0),
    );

    // (c) From an agent's line to the event-stream client.
    let one = one_story();
    let marks = if quick { 10 } else { 40 };
    let agent = format!(
        "for i in $(seq 1 {marks}); do say \"mark $(date +%s.%N)\"; sleep 0.25; done\nfinish\n"
    );
    let proj = Project::new(&one, &agent, |_| {});
    let (_, seen, _) = run_watched(&proj, bin, &["run", "--serve"]);
    let delays: Vec<f64> = seen
        .iter()
        .filter_map(|(text, at)| {
            let t: f64 = text.split("mark ").nth(1)?.trim().parse().ok()?;
            Some((at - t) * 1000.0)
        })
        .collect();
    assert!(
        delays.len() >= marks * 8 / 10,
        "the client saw {} of {marks} lines",
        delays.len()
    );
    fig.rows
        .push(Row::new("agent line → event-stream client", "ms", delays));
    fig.notes.push(format!(
        "makespan: figure 3's DAG A (seed {seed}), 40 stories, the agent sleeping 1/2/4 units of {unit:.2} s, \
         `ralph run --parallel -j 4` with and without `--serve`; watched = {} and a client reading \
         /api/events, all on this machine; pairs alternate which goes first",
        if browser { "headless Chromium (started before the clock, as a user's browser runs already) with the page opened in a new tab once the run printed its URL" } else { "(no browser: RALPH_BENCH_NO_BROWSER, or no Chromium on PATH)" }
    ));
    fig.notes.push(
        "RSS: 1,000 stories in 10 batch sections, `-j 4 -n 40 --serve` (40 attempts: the hub, snapshot and \
         graph hold all 1,000 stories from the start), a client on /api/events; VmHWM polled every 5 ms"
            .into(),
    );
    fig.notes.push(format!(
        "delay: one agent printing {marks} stream-json text lines `mark <date +%s.%N>` 250 ms apart (the \
         run passes on at most one activity line per 200 ms and attempt); the client's clock at the \
         `data:` line minus the time in the line (the agent's `date` process included)"
    ));
    fig
}

// ---------------------------------------------------------------------------
// Figure: the escalation ladder against always the large model (issue 25)

/// Stories the small model fails (the medium one lands them) and those only
/// the large one lands.
const LADDER_HARD: &str = "1.3|1.6|1.9|1.12|1.15|1.18";
const LADDER_HARDEST: &str = "1.10|1.20";

/// The fake agent of the ladder figure: it charges per model, as Claude
/// Code reports cost (`total_cost_usd` of its `result`, list prices of a
/// run of the same tokens: haiku $0.02, sonnet $0.06, opus $0.10), and a
/// model below the story's difficulty answers FAIL.
fn ladder_agent() -> String {
    format!(
        r#"
M=""; prev=""
for a in "$@"; do [ "$prev" = "--model" ] && M="$a"; prev="$a"; done
case "$M" in haiku) cost=0.02; rank=1 ;; sonnet) cost=0.06; rank=2 ;; *) cost=0.10; rank=3 ;; esac
need=1
case "$id" in {LADDER_HARD}) need=2 ;; {LADDER_HARDEST}) need=3 ;; esac
answer() {{
  printf '{{"type":"result","subtype":"success","is_error":false,"result":"%s","num_turns":4,"total_cost_usd":%s,"usage":{{"input_tokens":2000,"output_tokens":400,"cache_creation_input_tokens":0,"cache_read_input_tokens":8000}}}}\n' "$1" "$cost"
}}
if [ "$rank" -lt "$need" ]; then answer "too hard <ralph>FAIL $id: too hard for $M</ralph>"; exit 0; fi
mkdir -p bench-out
printf '%s\n' "$id" > "bench-out/$id.txt"
git add "bench-out/$id.txt" && git commit -q -m "feat(story-$id): bench change"
answer "done <ralph>DONE $id</ralph>"
"#
    )
}

/// Spend per landed story of one run of the 20-story backlog with `agent`
/// (the config's `agent` section), from ralph's own state.
fn ladder_run(bin: &Path, agent: &str) -> (f64, usize) {
    let backlog = Backlog {
        sections: vec![batch("1", stories(1, 20, |_| "medium"))],
    };
    let config = format!(
        "{{ \"loop\": {{ \"max_retries\": 3 }}, \"agent\": {agent},\n  \
         \"parallel\": {{ \"stagger_seconds\": 0, \"agent_memory_mb\": 0 }},\n  \
         \"decomposition\": {{ \"enabled\": false }}, \"sandbox\": {{ \"mode\": \"off\" }} }}\n"
    );
    let p = Project::new(&backlog, &ladder_agent(), |root| {
        write(root, ".ralph/config.json", &config)
    });
    p.run_ok(bin, &["run", "-j", "4"]);
    let state: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(p.root.join(".ralph/state.json")).expect("state"))
            .expect("state parses");
    let spent: f64 = state["stories"]
        .as_object()
        .map(|o| o.values().filter_map(|s| s["cost_usd"].as_f64()).sum())
        .unwrap_or(0.0);
    let landed = p.merges_on_main();
    (spent / landed.max(1) as f64, landed)
}

fn fig_ladder(bin: &Path, quick: bool) -> Figure {
    let runs = if quick { 1 } else { 3 };
    let mut fig = Figure::new(
        "ladder",
        "Spend per landed story: the escalation ladder against always the large model",
    );
    let (mut ladder, mut large, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let (l, n) = ladder_run(bin, r#"{ "escalation": ["haiku", "sonnet", "opus"] }"#);
        let (g, m) = ladder_run(bin, r#"{ "model": "opus" }"#);
        assert_eq!((n, m), (20, 20), "every story lands either way");
        ladder.push(l);
        large.push(g);
        ratio.push(l / g);
    }
    fig.rows.push(Row::new(
        "spend per landed story, ladder haiku → sonnet → opus",
        "$",
        ladder,
    ));
    fig.rows
        .push(Row::new("spend per landed story, always opus", "$", large));
    fig.rows
        .push(Row::new("ladder ÷ always the large model", "×", ratio).target(Cmp::Le, 0.70));
    fig.notes.push(format!(
        "20 stories in one batch, `-j 4`, `loop.max_retries` 3; the fake agent charges per \
         attempt by the model ralph passed it (`--model`), reported as Claude Code's \
         `total_cost_usd`: haiku $0.02, sonnet $0.06, opus $0.10 (list prices of the same \
         tokens); haiku fails {} (6 stories), sonnet also fails {} (2). Spend is ralph's own \
         record (state.json), every attempt included",
        LADDER_HARD.replace('|', ", "),
        LADDER_HARDEST.replace('|', ", ")
    ));
    fig
}

// ---------------------------------------------------------------------------
// Figure: the trust gates (issue 26)

/// Each story's own test file: two tests, two assertions.
fn gate_tests(id: &str) -> String {
    let k = id.replace('.', "_");
    format!(
        "def test_a_{k}():\n    assert 1 + 1 == 2\n\n\ndef test_b_{k}():\n    assert 2 + 2 == 4\n"
    )
}

const GATE_CONFIG: &str = r#"{ "loop": { "max_retries": 1 },
  "validation": { "commands": [ { "name": "tests", "cmd": "true", "required": true } ] } }
"#;

/// Seconds of every `gate_checked` record of the project's runs.
fn gate_secs(root: &Path) -> Vec<f64> {
    let mut out = Vec::new();
    for e in fs::read_dir(root.join(".ralph/runs"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for line in fs::read_to_string(e.path()).unwrap_or_default().lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if v["ev"] == "gate_checked" {
                out.extend(v["secs"].as_f64());
            }
        }
    }
    out
}

/// A project of `stories` in one section under the gates' config, each
/// story with its own test file, run by `agent`; and the stories' IDs.
fn gate_project(stories: Vec<Story>, agent: &str) -> (Project, Vec<String>) {
    let backlog = Backlog {
        sections: vec![Section {
            label: None,
            comment: None,
            stories,
        }],
    };
    let ids: Vec<String> = backlog.stories().map(|s| s.id.clone()).collect();
    let p = Project::new(&backlog, agent, |root| {
        write(root, ".ralph/config.json", GATE_CONFIG);
        for id in &ids {
            write(
                root,
                &format!("tests/test_{}.py", id.replace('.', "_")),
                &gate_tests(id),
            );
        }
    });
    (p, ids)
}

fn fig_gates(bin: &Path, quick: bool) -> Figure {
    let mut fig = Figure::new(
        "gates",
        "Trust gates: the integrity gate's time per landing, and a cheating backlog",
    );
    // 1. Overhead: 30 honest stories, each adding a test to its own file.
    let n = if quick { 10 } else { 30 };
    let honest = r#"f="tests/test_${id//./_}.py"
printf '\n\ndef test_more_%s():\n    assert 3 + 3 == 6\n' "${id//./_}" >> "$f"
git add "$f"
finish
"#;
    let (p, _) = gate_project(stories(1, n, |_| "small"), honest);
    p.run_ok(bin, &["run"]);
    let ms: Vec<f64> = gate_secs(&p.root).iter().map(|s| s * 1e3).collect();
    assert_eq!(p.merges_on_main(), n, "every honest story lands");
    fig.rows.push(
        Row::new("integrity gate per landing (30-story run)", "ms", ms).target(Cmp::Lt, 50.0),
    );

    // 2. A scripted cheating backlog: odd stories cheat on their first try
    // (five kinds in turn) and restore when sent back; even ones are honest,
    // every fourth moving a test into a new file.
    let agent = r#"n="${RALPH_ATTEMPT:-1}"
k="${id#*.}"
u="${id//./_}"
f="tests/test_$u.py"
if [ $((k % 2)) = 1 ]; then
  if [ "$n" = 1 ]; then
    case $(( (k / 2) % 5 )) in
      0) git rm -q "$f" ;;
      1) sed -i "s/^def test_b_/@pytest.mark.skip\ndef test_b_/" "$f"; git add "$f" ;;
      2) sed -i '/assert/d' "$f"; git add "$f" ;;
      3) sed -i 's/"cmd": "true"/"cmd": "exit 0"/' .ralph/config.json; git add .ralph/config.json ;;
      4) git mv "$f" "notes_$u.txt" ;;
    esac
  else
    git rm -q --ignore-unmatch "notes_$u.txt"
    git checkout main -- tests .ralph/config.json
  fi
elif [ $((k % 4)) = 0 ]; then
  printf 'def test_a_%s():\n    assert 1 + 1 == 2\n' "$u" > "$f"
  printf 'def test_b_%s():\n    assert 2 + 2 == 4\n' "$u" > "tests/test_moved_$u.py"
  git add "$f" "tests/test_moved_$u.py"
else
  printf '\n\ndef test_more_%s():\n    assert 3 + 3 == 6\n' "$u" >> "$f"
  git add "$f"
fi
finish
"#;
    let (p, ids) = gate_project(stories(2, 20, |_| "small"), agent);
    p.run_ok(bin, &["run"]);
    let state: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(p.root.join(".ralph/state.json")).unwrap())
            .expect("state.json");
    let (mut cheats_landed, mut honest_held, mut cheats_sent_back) = (0, 0, 0);
    for id in &ids {
        let k: usize = id.rsplit('.').next().unwrap().parse().unwrap();
        let rec = &state["stories"][id.as_str()];
        let kinds: Vec<&str> = rec["history"]
            .as_array()
            .map(|h| h.iter().filter_map(|a| a["kind"].as_str()).collect())
            .unwrap_or_default();
        let done = rec["status"] == "done";
        if k % 2 == 1 {
            if done && kinds == ["first"] {
                cheats_landed += 1;
            }
            if kinds.contains(&"fixup") {
                cheats_sent_back += 1;
            }
        } else if !(done && kinds == ["first"]) {
            honest_held += 1;
        }
    }
    fig.rows.push(
        Row::new(
            "cheats landed unattended (of 10)",
            "",
            vec![cheats_landed as f64],
        )
        .target(Cmp::Le, 0.0),
    );
    fig.rows.push(
        Row::new("honest stories held (of 10)", "", vec![honest_held as f64]).target(Cmp::Le, 0.0),
    );
    fig.notes.push(format!(
        "integrity gate: the `gate_checked` run records (`secs`) of a {n}-story run, one job, \
         each story adding a test to its own Python test file (the gate reads the story's diff \
         against its merge base and checks it against the pattern table); {} landings",
        n
    ));
    fig.notes.push(format!(
        "cheating backlog: 20 stories, the odd ones cheat on their first attempt (a deleted \
         test file, an added `@pytest.mark.skip`, deleted assertions, the validation command \
         edited, a test file renamed away; two of each) and restore the checks in the fix-up \
         they are sent back to; the even ones are honest, 5 of them moving a test into a new \
         file. {cheats_sent_back} of 10 cheats were sent back; {} stories landed in all",
        p.merges_on_main()
    ));
    fig
}

// ---------------------------------------------------------------------------
// Figure: a landing's cost over a long run (issue 34 item 6)

/// `n` independent stories in one batch, an agent that commits at once,
/// `-j 4`, no validation: the run is the merge queue and ralph's own
/// overhead. The landings' times in ralph.log give the cost per story in
/// the first and the last quarter of the run: a landing whose work grows
/// with the stories landed before it shows as growth.
fn fig_landing(bin: &Path, quick: bool) -> Figure {
    let (n, runs) = if quick { (300, 1) } else { (1000, 3) };
    let mut fig = Figure::new(
        "landing",
        "A long run: 1,000 stories, instant agent, -j 4, no validation",
    );
    let backlog = Backlog {
        sections: vec![batch("1", stories(1, n, |_| "small"))],
    };
    let (mut walls, mut growth, mut first, mut last, mut loads) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 0..runs {
        let p = Project::new(&backlog, "finish", |_| {});
        loads.push(loadavg());
        let wall = p
            .run_ok(bin, &["run", "--parallel", "-j", "4"])
            .as_secs_f64();
        assert_eq!(p.merges_on_main(), n, "every story landed");
        let (landed, _) = log_events(&p.log());
        let mut times: Vec<i64> = landed.values().copied().collect();
        times.sort_unstable();
        let q = n / 4;
        // Seconds per story over a quarter's landings.
        let per = |a: usize, b: usize| (times[b] - times[a]) as f64 / 1000.0 / (b - a) as f64;
        let (f, l) = (per(0, q), per(n - 1 - q, n - 1));
        eprintln!(
            "  landing run {}/{runs}: {n} stories in {wall:.1} s; {:.1} ms a story in the first \
             quarter, {:.1} ms in the last (growth {:.2}×; load {})",
            r + 1,
            f * 1000.0,
            l * 1000.0,
            l / f,
            loads.last().map_or("?", String::as_str),
        );
        walls.push(wall);
        growth.push(l / f);
        first.push(f * 1000.0);
        last.push(l * 1000.0);
    }
    let wall_row = Row::new(&format!("wall time, {n} stories"), "s", walls);
    fig.rows.push(if n == 1000 {
        wall_row.target(Cmp::Le, 90.0)
    } else {
        wall_row
    });
    fig.rows.push(
        Row::new("per-story time, last quarter ÷ first quarter", "×", growth).target(Cmp::Le, 1.1),
    );
    fig.rows.push(Row::new(
        "per story, first quarter of landings",
        "ms",
        first,
    ));
    fig.rows
        .push(Row::new("per story, last quarter of landings", "ms", last));
    fig.notes.push(format!(
        "{n} independent stories in one batch, `ralph run --parallel -j 4`, the agent commits \
         one file and says DONE at once, no validation configured; per-story times from the \
         `landed story` lines of ralph.log (the quarter's span ÷ its landings); load average \
         (1 min) before each run: {}",
        loads.join(", ")
    ));
    fig
}

// ---------------------------------------------------------------------------
// Figure: declared conflicts stay apart (issue 34 item 8)

/// 12 stories in pairs, each pair appending to one file of its own (the
/// conflicts figure's agent), `-j 4`: agent runs per landed story with
/// `parallel.conflicts: wait` (the default) against `risk`, for files
/// declared under "Files to Create/Modify" and for files named only in the
/// spec's prose (where `wait` does not apply: the same either way).
fn fig_conflicts_declared(bin: &Path, quick: bool) -> Figure {
    let runs = if quick { 2 } else { 5 };
    let mut fig = Figure::new(
        "conflicts-declared",
        "Declared conflicts at -j 4, 12 stories in pairs: parallel.conflicts wait against risk",
    );
    let backlog = Backlog {
        sections: vec![batch("1", stories(1, 12, |_| "medium"))],
    };
    let variants = [
        ("declared, wait", Declare::Section, "wait"),
        ("declared, risk", Declare::Section, "risk"),
        ("prose only, wait", Declare::Prose, "wait"),
        ("prose only, risk", Declare::Prose, "risk"),
    ];
    // Both stories of a pair take the same time: a pair's second is ready
    // while its partner still lands, the moment a start beside it conflicts.
    let agent = CONFLICT_AGENT.replace("sleep 1.6", "sleep 1.0");
    let mut all: Vec<Vec<ConflictRun>> = variants.iter().map(|_| Vec::new()).collect();
    let mut loads = Vec::new();
    // Interleaved, so the shared machine's load falls on every variant alike.
    for r in 0..runs {
        loads.push(loadavg());
        for (k, (name, declare, mode)) in variants.iter().enumerate() {
            let c = conflict_run_with(bin, &backlog, *declare, true, Some(mode), &agent);
            eprintln!(
                "  conflicts-declared {name} run {}/{runs}: {:.2} s, {:.2} runs/story, {} conflicts",
                r + 1,
                c.wall,
                c.runs,
                c.conflicts
            );
            all[k].push(c);
        }
    }
    for ((name, _, _), runs) in variants.iter().zip(&all) {
        let col = |f: fn(&ConflictRun) -> f64| runs.iter().map(f).collect::<Vec<_>>();
        let row = Row::new(
            &format!("{name}: agent runs per landed story"),
            "×",
            col(|c| c.runs),
        );
        fig.rows.push(if *name == "declared, wait" {
            row.target(Cmp::Le, 1.10)
        } else {
            row
        });
        fig.rows.push(Row::new(
            &format!("{name}: merge conflicts"),
            "",
            col(|c| c.conflicts),
        ));
        fig.rows
            .push(Row::new(&format!("{name}: makespan"), "s", col(|c| c.wall)));
    }
    fig.notes.push(format!(
        "12 stories in one batch, `-j 4`, six pairs each appending a line to a file of their own \
         (the conflicts figure's agent, both of a pair 1.0 s a fresh run, 0.3 s a fix-up); \
         \"declared\" names the file under Files to Create/Modify, \"prose only\" in the text; \
         `parallel.conflicts` as named; variants interleaved; load average (1 min) before each \
         round: {}",
        loads.join(", ")
    ));
    fig
}
