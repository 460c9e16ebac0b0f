//! Command-line parsing and the thin handlers of each command. Handlers turn
//! arguments into library calls and results into output and exit codes.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::display::err;
use crate::error::{RalphError, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_OK};
use crate::project::{self, Project};
use crate::report::{self, GraphNode};
use crate::report_html;
use crate::run::{self, RunOptions};
use crate::schedule::{Node, Scheduler};
use crate::state::State;
use crate::stats;
use crate::store::{self, RunLock};
use crate::ui::{self, ColorChoice};

mod help;

/// The exit codes of every command (SPEC 2), shown by `--help`.
const EXIT_CODES_HELP: &str = "\
Exit codes:
  0    every selected story is done (or nothing to do, or a dry run)
  1    stories failed or are blocked: a person is needed
  2    bad usage, config or backlog: nothing was changed
  3    another `ralph run` holds this project's lock
  4    ralph itself failed (state not writable, a git error, a bug): nothing is lost
  130  interrupted; `ralph run` resumes";

/// How `ralph run` chooses what starts next, shown by `ralph run --help`.
/// `run --help`'s end: examples, environment and exit codes, then the
/// scheduling policy.
fn run_after_long_help() -> String {
    format!(
        "{}\n\n{SCHEDULING_HELP}",
        help::RUN_AFTER_LONG_HELP.trim_end()
    )
}

const SCHEDULING_HELP: &str = "\
Scheduling:
  Sequential (no --parallel, or -j 1): stories.txt order, one at a time.
  Parallel: a story is ready once its dependencies landed; ready stories start
  by longest remaining chain, then frontmatter `priority` (critical > high >
  medium > low; prd.json: lower number first), then file order. One predicted
  to touch a file that running or landing work touches (spec \"Files to
  Create/Modify\", prd.json `files`, earlier conflicts, running worktrees)
  waits while other ready work can use the slot. Retries run one at a time
  (parallel.retry_concurrency). An agent starts only if the free memory holds
  parallel.agent_memory_mb more (2048; 0 = off); at least one always runs.
  The display and `ralph status --json` (jobs) say when fewer than -j run.";

#[derive(Debug, Parser)]
#[command(
    name = "ralph",
    version = help::VERSION.as_str(),
    about = "Runs an AI coding agent over a backlog of stories, in parallel worktrees, landing only verified merges",
    long_about = help::LONG_ABOUT,
    after_help = help::AFTER_HELP,
    after_long_help = help::AFTER_LONG_HELP.as_str()
)]
pub(crate) struct Cli {
    /// Run as if started in DIR, like `git -C`
    ///
    /// The project is the nearest directory at or above it holding .ralph/ or
    /// prd.json (never above the top of its git work tree); `init` makes one
    /// in DIR.
    #[arg(short = 'C', long = "dir", global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// When to colour the output
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "WHEN",
        default_value_t = ColorChoice::Auto
    )]
    color: ColorChoice,
    /// Print only errors and the final summary
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the backlog until every story is done
    #[command(long_about = help::RUN_LONG_ABOUT, after_long_help = run_after_long_help())]
    Run(RunArgs),
    /// Progress, running, failed, blocked, cost
    Status {
        /// Machine-readable output
        #[arg(long)]
        json: bool,
    },
    /// Check the backlog and config; print every problem; change nothing
    Validate,
    /// The story DAG with each story's status
    Graph {
        /// Output form: text (one line per story, what it waits for), dot
        /// (Graphviz) or mermaid
        #[arg(long, value_enum, default_value = "text")]
        format: GraphFormat,
    },
    /// One line per story
    Stories,
    /// Forget one story's attempts, or (with confirmation) all state
    Reset {
        /// The story whose attempts and status to forget; without it, all
        /// state (after a confirmation)
        id: Option<String>,
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
    },
    /// Scaffold .ralph/ in a repository
    Init,
    /// Validated stories waiting for review (`landing.mode: review`), with
    /// their diffstat
    Review,
    /// Land reviewed stories through the merge queue (validated again on the
    /// current tip); all of them without IDs
    Land {
        /// The stories to land
        ids: Vec<String>,
    },
    /// Send a story in review back for another attempt, with a note for it
    Reject {
        /// The story
        id: String,
        /// What the next attempt is told
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
    },
    /// The learnings agents recorded, each with the file it is in
    Learnings,
    /// Split one story into sub-stories now (one agent run), landing them
    /// in its place; `decomposition.*` in the config
    Decompose {
        /// The story to split
        id: String,
    },
    /// ralph's version (as --version; Ralph v2 had this command)
    Version,
    /// Per run and lifetime: stories landed, agent runs by kind, tokens, cost, time
    Stats {
        /// Machine-readable output
        #[arg(long)]
        json: bool,
        /// This run (an ID of .ralph/runs/) instead of the latest
        #[arg(long, value_name = "ID", conflicts_with = "all")]
        run: Option<String>,
        /// Every recorded run
        #[arg(long)]
        all: bool,
    },
    /// A self-contained HTML report: timeline, story graph, per-story table
    Report {
        /// This run (an ID of .ralph/runs/) instead of the latest
        #[arg(long, value_name = "ID")]
        run: Option<String>,
        /// Where to write it (default: .ralph/report.html)
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// An attempt's log as readable text
    #[command(after_long_help = help::LOG_AFTER_LONG_HELP)]
    Log {
        /// The story
        id: String,
        /// Which attempt (default: the latest)
        #[arg(short, long, value_name = "N")]
        attempt: Option<u32>,
        /// Print the file as it is
        #[arg(long)]
        raw: bool,
    },
    /// The prompt template agents get
    Template {
        #[command(subcommand)]
        what: TemplateCommand,
    },
    /// Every config key with its type, default and meaning, or the JSON Schema
    Config {
        #[command(subcommand)]
        what: ConfigCommand,
    },
    /// A shell completion script, on stdout
    #[command(after_long_help = "\
Examples:
  ralph completions bash > ~/.local/share/bash-completion/completions/ralph
  ralph completions zsh > ~/.zfunc/_ralph      # with fpath+=~/.zfunc in .zshrc
  ralph completions fish > ~/.config/fish/completions/ralph.fish")]
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// The man page (roff), on stdout
    #[command(after_long_help = "Example:\n  ralph man | man -l -")]
    Man,
    /// Internal: one attempt of a cluster job (`executor.kind: ray`)
    #[command(hide = true)]
    Worker {
        #[command(subcommand)]
        what: WorkerCommand,
    },
}

#[derive(Debug, Subcommand)]
enum WorkerCommand {
    /// Runs the attempt SPEC describes; its last stdout line is the report
    Attempt {
        /// The coordinator's spec (hex JSON)
        spec: String,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Every key of .ralph/config.json, in Markdown (as docs/config.md)
    Keys,
    /// The JSON Schema of .ralph/config.json (as docs/config.schema.json), for
    /// editors: `ralph config schema > .ralph/config.schema.json`, then
    /// "$schema": "config.schema.json" in the config
    Schema,
}

#[derive(Debug, Subcommand)]
enum TemplateCommand {
    /// Print the template in use: .ralph/templates/implement.md when the
    /// project has one, else the built-in one
    Show {
        /// The built-in template even when the project overrides it
        #[arg(long)]
        builtin: bool,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum GraphFormat {
    Dot,
    Mermaid,
    Text,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Run ready stories concurrently [default: parallel.enabled, false]
    #[arg(long)]
    parallel: bool,
    /// Most stories running at once [default: parallel.max_concurrent, else 4]
    #[arg(short = 'j', long = "jobs", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    jobs: Option<u64>,
    /// Most agent attempts this run, 0 = no limit [default: loop.max_iterations, 0]
    #[arg(short = 'n', long = "iterations", value_name = "N")]
    iterations: Option<u64>,
    /// Run only this story
    #[arg(short = 's', long = "story", value_name = "ID")]
    story: Option<String>,
    /// Start the sequential order at this story
    #[arg(short = 'r', long = "resume", value_name = "ID")]
    resume: Option<String>,
    /// Wall-clock limit of one agent attempt, in seconds [default: loop.timeout_seconds, 1800]
    #[arg(short = 't', long = "timeout", value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    timeout: Option<u64>,
    /// Print the plan and each prompt's head; change nothing
    #[arg(short = 'd', long = "dry-run")]
    dry_run: bool,
    /// Stream agent text to the terminal
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Technical log path [default: ralph.log]
    #[arg(short = 'l', long = "log", value_name = "FILE")]
    log: Option<PathBuf>,
    /// Agent CLI for stories whose spec names none: claude, codex, gemini, agy,
    /// opencode, cursor, amp, custom [default: agent.name, else claude]
    #[arg(long = "agent", value_name = "NAME")]
    agent: Option<String>,
    /// Most this run may spend, in USD: when spent, nothing new starts, running
    /// work finishes and lands, exit 1 [default: budget.max_cost_usd, none]
    #[arg(long = "max-cost", value_name = "USD")]
    max_cost: Option<f64>,
    /// Accepted for Ralph v2 scripts: ralph never waits on a prompt
    #[arg(long = "no-interactive")]
    no_interactive: bool,
    /// Plain lines instead of the live display (also without a terminal)
    #[arg(long = "no-dashboard")]
    no_dashboard: bool,
}

/// Entry point: returns the process exit code.
pub fn main() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Help and usage errors are printed while parsing, before the parsed
    // --color exists: read it from the arguments first.
    let color = color_arg(&args).unwrap_or_default();
    let clap_color = match color {
        ColorChoice::Auto => clap::ColorChoice::Auto,
        ColorChoice::Always => clap::ColorChoice::Always,
        ColorChoice::Never => clap::ColorChoice::Never,
    };
    let parsed = Cli::command()
        .color(clap_color)
        .try_get_matches_from(&args)
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                EXIT_BAD_INPUT
            } else {
                EXIT_OK
            };
        }
    };
    ui::init(ui::Ui {
        color: cli.color,
        quiet: cli.quiet,
    });
    // These print what ralph is, not what a project holds.
    let projectless = matches!(
        cli.command,
        Command::Version
            | Command::Completions { .. }
            | Command::Man
            | Command::Config { .. }
            | Command::Template { .. }
            | Command::Worker { .. }
    );
    let root = match project_root(cli.dir.as_deref(), matches!(cli.command, Command::Init)) {
        Ok(r) => r,
        Err(_) if projectless => PathBuf::from("."),
        Err(e) => return report_error(&e),
    };
    match dispatch(cli.command, &root) {
        Ok(code) => code,
        Err(e) => report_error(&e),
    }
}

/// Like git, commands work from anywhere inside the project (`-C DIR` as
/// if started there); `init` makes one where it is asked to, never inside
/// another.
fn project_root(dir: Option<&Path>, init: bool) -> anyhow::Result<PathBuf> {
    let start = match dir {
        None => std::env::current_dir()?,
        Some(d) => d.canonicalize().map_err(|e| {
            RalphError::usage(format!("-C {}: {e}", d.display()))
                .with_hint("give -C a directory that exists")
        })?,
    };
    let start = start.canonicalize().unwrap_or(start);
    match (project::find_root(&start), init) {
        (Ok(root), false) => Ok(root),
        (Err(_), true) => Ok(start),
        (Ok(root), true) => {
            let marker = project::project_marker(&root).unwrap_or_else(|| root.join(".ralph"));
            Err(RalphError::usage(format!(
                "{} is already a ralph project ({}); `init` makes nothing inside one",
                root.display(),
                marker.display()
            ))
            .with_hint(
                "ralph commands work from anywhere inside it; to start a separate project, run \
                 `ralph init` outside it",
            )
            .into())
        }
        (Err(top), false) => Err(RalphError::usage(format!(
            "no ralph project here: no .ralph/ or prd.json in {} or above it{}",
            start.display(),
            if top == start {
                String::new()
            } else {
                format!(" up to {}", top.display())
            }
        ))
        .with_hint(
            "run `ralph init` where the project should live (the top of the repository, \
             usually), or point at one with -C DIR",
        )
        .into()),
    }
}
/// The value of `--color` among `args`, if given and valid (clap reports
/// an invalid one).
fn color_arg(args: &[std::ffi::OsString]) -> Option<ColorChoice> {
    let mut it = args.iter().skip(1).map(|a| a.to_string_lossy());
    let mut found = None;
    while let Some(a) = it.next() {
        let value = match a.as_ref() {
            "--" => break,
            "--color" => it.next().map(|v| v.into_owned()),
            other => other.strip_prefix("--color=").map(str::to_string),
        };
        if let Some(v) = value {
            found = ColorChoice::from_str(&v, true).ok().or(found);
        }
    }
    found
}

/// Prints `e` (with its hint on a line of its own) and returns its exit code.
fn report_error(e: &anyhow::Error) -> i32 {
    let on = ui::stderr_colors();
    let Some(r) = e.downcast_ref::<RalphError>() else {
        // Not the user's input: ralph itself (or its environment) failed.
        err(&ui::paint_tag(&format!("error: {e:#}"), on));
        err(&ui::paint_tag(
            "hint: nothing is lost; fix the cause and run the command again",
            on,
        ));
        return EXIT_INTERNAL;
    };
    match r {
        RalphError::BadInput(problems) => {
            for p in problems {
                err(&ui::paint_tag(&format!("error: {p}"), on));
            }
            err(&format!(
                "{} problem{} found; nothing was changed",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            ));
        }
        other => err(&ui::paint_tag(&format!("error: {other}"), on)),
    }
    if let Some(h) = r.hint() {
        err(&ui::paint_tag(&format!("hint: {h}"), on));
    }
    r.exit_code()
}

fn dispatch(cmd: Command, root: &Path) -> anyhow::Result<i32> {
    let runs_agents =
        matches!(&cmd, Command::Run(a) if !a.dry_run) || matches!(&cmd, Command::Decompose { .. });
    if !runs_agents {
        // `ralph graph | head` and `ralph run -d | head` end quietly like
        // any filter. Not a real run: it writes to agents' stdin and must
        // see EPIPE there, and a landing must never die with a reader
        // (`display::out`/`err` drop its own write errors instead).
        // SAFETY: restoring a default signal disposition.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cmd {
        Command::Run(a) => cmd_run(a, root),
        Command::Status { json } => cmd_status(root, json),
        Command::Validate => cmd_validate(root),
        Command::Graph { format } => cmd_graph(root, format),
        Command::Stories => cmd_stories(root),
        Command::Reset { id, yes } => cmd_reset(root, id, yes),
        Command::Init => cmd_init(root),
        Command::Review => cmd_review(root),
        Command::Land { ids } => cmd_land(root, ids),
        Command::Reject { id, note } => cmd_reject(root, &id, note.as_deref()),
        Command::Learnings => cmd_learnings(root),
        Command::Decompose { id } => {
            let opts = RunOptions {
                decompose: Some(id),
                ..RunOptions::default()
            };
            crate::process::become_subreaper();
            run::run(root, opts)
        }
        Command::Worker {
            what: WorkerCommand::Attempt { spec },
        } => {
            crate::process::become_subreaper();
            crate::exec::worker::attempt(&spec)
        }
        Command::Version => {
            println!("ralph {}", help::VERSION.as_str());
            Ok(EXIT_OK)
        }
        Command::Log { id, attempt, raw } => crate::logview::cmd_log(root, &id, attempt, raw),
        Command::Template {
            what: TemplateCommand::Show { builtin },
        } => cmd_template_show(root, builtin),
        Command::Config { what } => {
            print!(
                "{}",
                match what {
                    ConfigCommand::Keys => crate::docs::config_markdown(),
                    ConfigCommand::Schema => crate::docs::config_schema(),
                }
            );
            Ok(EXIT_OK)
        }
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "ralph", &mut std::io::stdout());
            Ok(EXIT_OK)
        }
        Command::Man => {
            clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?;
            Ok(EXIT_OK)
        }
        Command::Stats { json, run, all } => cmd_stats(root, json, run, all),
        Command::Report { run, out } => cmd_report(root, run, out),
    }
}

fn cmd_stats(root: &Path, json: bool, run: Option<String>, all: bool) -> anyhow::Result<i32> {
    let runs = crate::runlog::read_all(root);
    let which = match (run, all) {
        (Some(id), _) if !runs.iter().any(|r| r.id == id) => {
            return Err(RalphError::usage(format!("no run {id} in .ralph/runs/"))
                .with_hint("`ralph stats --all` lists the recorded runs")
                .into())
        }
        (Some(id), _) => stats::Which::Run(id),
        (None, true) => stats::Which::All,
        (None, false) => stats::Which::Latest,
    };
    let s = stats::stats(&runs, &which);
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else if runs.is_empty() {
        println!("No runs recorded yet: `ralph run` records each run in .ralph/runs/.");
    } else {
        let offset = crate::timefmt::local_offset_secs(crate::timefmt::now_secs());
        print!("{}", stats::render(&s, offset));
    }
    Ok(EXIT_OK)
}

fn cmd_report(root: &Path, run: Option<String>, out: Option<PathBuf>) -> anyhow::Result<i32> {
    let out = out.unwrap_or_else(|| report_html::default_path(root));
    let bytes = report_html::write(root, run.as_deref(), &out)?;
    println!("report: {} ({} KB)", out.display(), bytes.div_ceil(1024));
    Ok(EXIT_OK)
}

fn cmd_run(a: RunArgs, root: &Path) -> anyhow::Result<i32> {
    // Ralph v2 needed --no-interactive to skip a menu; ralph never prompts.
    let _ = a.no_interactive;
    let opts = RunOptions {
        parallel: a.parallel,
        jobs: a.jobs.map(|j| j as usize),
        iterations: a.iterations,
        story: a.story,
        resume: a.resume,
        timeout: a.timeout,
        dry_run: a.dry_run,
        verbose: a.verbose,
        log: a.log,
        agent: a.agent,
        max_cost: a.max_cost,
        no_dashboard: a.no_dashboard,
        decompose: None,
        land: false,
    };
    crate::process::become_subreaper();
    run::run(root, opts)
}

fn load(root: &Path) -> anyhow::Result<(Project, State)> {
    let project = project::load(root).map_err(RalphError::BadInput)?;
    let state = store::load_state(root).map_err(|p| RalphError::BadInput(vec![p]))?;
    Ok((project, state))
}

/// Each story's scheduling status, as a run would see it now.
fn node_states(project: &Project, state: &State) -> Scheduler {
    let nodes = project
        .backlog
        .stories
        .iter()
        .map(|s| run::story_node(state, s))
        .collect();
    Scheduler::new(&project.dag, nodes, None)
}

fn cmd_learnings(root: &Path) -> anyhow::Result<i32> {
    let all = crate::learnings::load_by_file(root);
    if all.is_empty() {
        println!("no learnings yet (agents record them with <ralph>LEARN: ...</ralph>)");
    }
    let mut out = std::io::stdout().lock();
    for (file, line) in all {
        if writeln!(out, "{}: {}", file.display(), crate::learnings::body(&line)).is_err() {
            break;
        }
    }
    Ok(EXIT_OK)
}

fn cmd_stories(root: &Path) -> anyhow::Result<i32> {
    let (project, state) = load(root)?;
    let sched = node_states(&project, &state);
    let on = ui::stdout_colors();
    let mut out = std::io::stdout().lock();
    for (i, s) in project.backlog.stories.iter().enumerate() {
        let line = format!("[{}] {} | {}", report::label(sched.nodes[i]), s.id, s.title);
        writeln!(out, "{}", ui::paint_tag(&line, on))?;
    }
    Ok(EXIT_OK)
}

fn cmd_status(root: &Path, json: bool) -> anyhow::Result<i32> {
    let (project, mut state) = load(root)?;
    if let Some(checked) = merged_prs(root, &project, &state)? {
        state = checked;
    }
    let sched = node_states(&project, &state);
    let live = RunLock::is_held(root);
    let ids = |n: Node| -> Vec<String> {
        project
            .backlog
            .stories
            .iter()
            .enumerate()
            .filter(|(i, _)| sched.nodes[*i] == n)
            .map(|(_, s)| s.id.clone())
            .collect()
    };
    let (usage, cost) = state.total_usage();
    let total = project.backlog.stories.len();
    let done = ids(Node::Done);
    let mut running = ids(Node::Running);
    running.extend(ids(Node::Landing));
    if !live {
        // Without a live run these are leftovers of a crash; the next run resumes them.
        running.clear();
    }
    let failed = ids(Node::Failed);
    let blocked = ids(Node::Blocked);
    let next = sched.next().map(|i| project.backlog.stories[i].id.clone());
    let now = crate::timefmt::now_secs();
    let paused: Vec<(String, i64)> = state
        .paused_until
        .iter()
        .filter(|(_, t)| **t > now)
        .map(|(a, t)| (a.clone(), *t))
        .collect();
    if json {
        warn_if_empty(&project);
        // The latest run's figures: what the per-run budget is about.
        let latest = crate::runlog::list_runs(root)
            .last()
            .and_then(|id| crate::runlog::read_run(root, id));
        let latest_stats = latest.as_ref().map(stats::run_stats);
        let budget_stop = latest.as_ref().is_some_and(|r| {
            r.records.iter().any(|x| {
                matches!(
                    x.ev,
                    crate::runlog::Ev::Pause {
                        why: crate::runlog::PauseWhy::Budget,
                        ..
                    }
                )
            })
        });
        let spent_run = latest_stats.as_ref().map(|s| s.figures.cost_usd);
        let v = serde_json::json!({
            "total": total,
            "done": done,
            "running": running,
            "failed": failed,
            "blocked": blocked,
            "next": next,
            "run_in_progress": live,
            "usage": usage,
            "cost_usd": cost,
            "agent_runs": report::waste_json(&state.waste()),
            "paused_until": paused
                .iter()
                .map(|(a, t)| (a.clone(), serde_json::Value::from(crate::timefmt::iso(*t))))
                .collect::<serde_json::Map<_, _>>(),
            "budget": {
                "max_cost_usd_total": project.config.budget_total_usd,
                "max_cost_usd_per_run": project.config.budget_run_usd,
                "spent_usd_total": cost,
                "spent_usd_latest_run": spent_run,
                "exhausted": budget_stop
                    || project.config.budget_total_usd.is_some_and(|m| cost >= m),
            },
            // The run in progress: `now` of `asked` jobs, and why fewer.
            "jobs": state.jobs.as_ref().filter(|_| live),
            "paused": !paused.is_empty() || (live && budget_stop),
            "latest_run": latest_stats.as_ref().map(|s| serde_json::json!({
                "id": s.id,
                "started": s.started.map(|t| crate::timefmt::iso(t as i64)),
                "in_progress": live && s.killed,
                "exit_code": s.exit_code,
                "landed": s.figures.landed,
                "attempts": s.figures.attempts,
                "tokens": s.figures.tokens,
                "cost_usd": s.figures.cost_usd,
            })),
            "stories": report_html::story_rows(&project, &state, None),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(EXIT_OK);
    }
    println!(
        "Progress: {} / {} stories ({} remaining)",
        done.len(),
        total,
        total - done.len()
    );
    println!("Run in progress: {}", if live { "yes" } else { "no" });
    if let Some(j) = state.jobs.as_ref().filter(|j| live && j.now < j.asked) {
        println!("{}", report::render_jobs(j));
    }
    if !running.is_empty() {
        println!("Running: {}", running.join(", "));
    }
    for id in &failed {
        let r = state.record(id).cloned().unwrap_or_default();
        println!(
            "Failed: {id} after {} attempts: {}",
            r.attempts,
            r.last_error.unwrap_or_default()
        );
    }
    if !blocked.is_empty() {
        println!("Blocked: {}", blocked.join(", "));
    }
    println!(
        "Tokens: {} in, {} out, {} cache write, {} cache read · Cost: ${:.2}",
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_creation_input_tokens,
        usage.cache_read_input_tokens,
        cost
    );
    if let Some(line) = report::render_waste(&state.waste()) {
        println!("{line}");
    }
    for (agent, until) in &paused {
        println!(
            "Paused: the {agent} agent's usage limit resets in {} (at {})",
            crate::timefmt::human_duration((until - now) as f64),
            crate::timefmt::iso(*until)
        );
    }
    if let Some(max) = project.config.budget_total_usd {
        println!("Budget: ${cost:.2} of ${max:.2} spent (budget.max_cost_usd_total)");
    }
    match next {
        Some(n) => println!("Next: Story {n}"),
        None if total == 0 => {}
        None if done.len() == total => println!("[OK] All stories complete!"),
        None => {}
    }
    warn_if_empty(&project);
    Ok(EXIT_OK)
}

/// `landing.mode: pr` with stories in a pull request: the ones merged on
/// the remote are done now, as the next run would find them. Only when no
/// run holds the lock (a run checks them itself): then the state as it is
/// after the check, else `None`.
fn merged_prs(root: &Path, project: &Project, state: &State) -> anyhow::Result<Option<State>> {
    let Some(remote) = &project.config.pr_remote else {
        return Ok(None);
    };
    let in_pr = |s: &State| {
        project
            .backlog
            .stories
            .iter()
            .any(|st| s.status(&st.id) == crate::state::Status::InPr)
    };
    // Without one the lock is not taken: a run starting meanwhile would
    // find it held.
    if !in_pr(state) {
        return Ok(None);
    }
    let Ok(_lock) = RunLock::acquire(root) else {
        return Ok(None);
    };
    // Read again under the lock: a run may have ended since.
    let mut state = store::load_state(root).map_err(|p| RalphError::BadInput(vec![p]))?;
    let git = crate::gitops::Git::open(root).map_err(|e| RalphError::usage(e.to_string()))?;
    let target = run::target_branch(project, &git)?;
    let log = store::TechLog::new(Some(root.join("ralph.log")));
    run::prs_merged(project, &git, &target, remote, &mut state, &log)?;
    store::save_state(root, &state)?;
    Ok(Some(state))
}

fn cmd_validate(root: &Path) -> anyhow::Result<i32> {
    let project = project::load(root).map_err(RalphError::BadInput)?;
    let on = ui::stderr_colors();
    for w in project.config.warning_lines() {
        if !ui::get().quiet {
            eprintln!("{}", ui::paint_tag(&w, on));
        }
    }
    if let Some(note) = crate::agent::claude_flags_note(&project.config) {
        if !ui::get().quiet {
            eprintln!("{note}");
        }
    }
    // Every agent CLI the backlog would run must be installed (here, or
    // on the cluster's nodes, which must answer).
    let executor_lines = crate::exec::validate(&project)?;
    let edges = project.dag.graph.edge_count();
    println!(
        "ok: {} stories, {} dependency edges, no problems",
        project.backlog.stories.len(),
        edges
    );
    for l in executor_lines {
        println!("{l}");
    }
    warn_if_empty(&project);
    Ok(EXIT_OK)
}

/// An empty backlog is not an error outside `run` (it refuses it), but it
/// is never "all complete" either: say so on stderr.
fn warn_if_empty(project: &Project) {
    if let Some((what, hint)) = project.backlog.emptiness() {
        err(&format!("warning: {what}"));
        err(&format!("hint: {hint}"));
    }
}

fn cmd_graph(root: &Path, format: GraphFormat) -> anyhow::Result<i32> {
    let (project, state) = load(root)?;
    let sched = node_states(&project, &state);
    let nodes: Vec<GraphNode> = project
        .backlog
        .stories
        .iter()
        .enumerate()
        .map(|(i, s)| GraphNode {
            id: &s.id,
            title: &s.title,
            node: sched.nodes[i],
        })
        .collect();
    let edges: Vec<(usize, usize)> = project
        .dag
        .graph
        .raw_edges()
        .iter()
        .map(|e| (e.source().index(), e.target().index()))
        .collect();
    let format = match format {
        GraphFormat::Dot => report::GraphStyle::Dot,
        GraphFormat::Mermaid => report::GraphStyle::Mermaid,
        GraphFormat::Text => report::GraphStyle::Text,
    };
    let text = report::render_graph(&nodes, &edges, &project.dag.topo_order(), format);
    if format == report::GraphStyle::Text && ui::stdout_colors() {
        for line in text.lines() {
            println!("{}", ui::paint_tag(line, true));
        }
    } else {
        print!("{text}");
    }
    Ok(EXIT_OK)
}

fn cmd_review(root: &Path) -> anyhow::Result<i32> {
    let (project, state) = load(root)?;
    let git = crate::gitops::Git::open(root).map_err(|e| RalphError::usage(e.to_string()))?;
    let target = run::target_branch(&project, &git)?;
    let validated = project.config.validation.iter().any(|v| v.required);
    let mut out = std::io::stdout().lock();
    let mut n = 0;
    for s in &project.backlog.stories {
        if state.status(&s.id) == crate::state::Status::InPr {
            let url = state
                .record(&s.id)
                .and_then(|r| r.pr_url.clone())
                .unwrap_or_default();
            n += 1;
            if writeln!(
                out,
                "{} {} · pull request {url} (done once merged)",
                s.id, s.title
            )
            .is_err()
            {
                return Ok(EXIT_OK);
            }
            continue;
        }
        if state.status(&s.id) != crate::state::Status::Review {
            continue;
        }
        n += 1;
        let branch = project::story_branch(&s.id);
        let stat = match git.diffstat(&branch, &target) {
            Ok(Some((f, a, d))) => format!("{f} files, +{a} -{d}"),
            _ => "its branch is gone".to_string(),
        };
        let check = if validated {
            "passed validation on the merged tree"
        } else {
            "no required validation configured"
        };
        if writeln!(out, "{} {} · {branch} · {stat} · {check}", s.id, s.title).is_err() {
            return Ok(EXIT_OK);
        }
    }
    if n == 0 {
        let _ = writeln!(out, "nothing waits for review");
    } else {
        let _ = writeln!(
            out,
            "`git diff {target}...ralph/story-<id>` shows one; `ralph land [ID...]` lands, \
             `ralph reject ID --note TEXT` sends back"
        );
    }
    Ok(EXIT_OK)
}

/// The stories in review among `ids` (all of them when empty); an ID not in
/// review is an error naming it.
fn in_review(state: &State, project: &Project, ids: &[String]) -> anyhow::Result<Vec<String>> {
    let waiting: Vec<String> = project
        .backlog
        .stories
        .iter()
        .filter(|s| state.status(&s.id) == crate::state::Status::Review)
        .map(|s| s.id.clone())
        .collect();
    if ids.is_empty() {
        return Ok(waiting);
    }
    for id in ids {
        if !waiting.contains(id) {
            return Err(
                RalphError::usage(format!("story {id} is not waiting for review"))
                    .with_hint("`ralph review` lists the stories that are")
                    .into(),
            );
        }
    }
    Ok(ids.to_vec())
}

fn cmd_land(root: &Path, ids: Vec<String>) -> anyhow::Result<i32> {
    {
        let _lock = run::take_run_lock(root, "before approving stories")?;
        let (project, mut state) = load(root)?;
        let chosen = in_review(&state, &project, &ids)?;
        if chosen.is_empty() {
            println!("nothing waits for review");
            return Ok(EXIT_OK);
        }
        for id in &chosen {
            state.approve(id);
        }
        store::save_state(root, &state)?;
    }
    // A run that starts no agent: reconcile sends the approved stories to
    // the merge queue, which validates each again on the current tip.
    let opts = RunOptions {
        land: true,
        ..RunOptions::default()
    };
    crate::process::become_subreaper();
    run::run(root, opts)
}

fn cmd_reject(root: &Path, id: &str, note: Option<&str>) -> anyhow::Result<i32> {
    let _lock = run::take_run_lock(root, "before sending a story back")?;
    let (project, mut state) = load(root)?;
    in_review(&state, &project, &[id.to_string()])?;
    state.reject(id, note.unwrap_or("no reason given"));
    store::save_state(root, &state)?;
    println!(
        "Story {id} goes back to the queue; its next attempt is told the note and its work \
         stays on {} until then.",
        project::story_branch(id)
    );
    Ok(EXIT_OK)
}

fn cmd_reset(root: &Path, id: Option<String>, yes: bool) -> anyhow::Result<i32> {
    let _lock = run::take_run_lock(root, "before resetting state")?;
    let mut state = store::load_state(root).map_err(|p| RalphError::BadInput(vec![p]))?;
    match id {
        Some(id) => {
            if !state.stories.contains_key(&id) && !state.completed_stories.contains(&id) {
                return Err(RalphError::usage(format!("story {id} has no recorded state")).into());
            }
            state.reset_story(&id);
            store::save_state(root, &state)?;
            println!(
                "Story {id}: attempts and status forgotten; it runs again on the next `ralph run`."
            );
        }
        None => {
            if !yes {
                if !std::io::stdin().is_terminal() {
                    return Err(RalphError::usage("resetting all state needs confirmation")
                        .with_hint("run `ralph reset --yes`")
                        .into());
                }
                eprint!("Forget every story's status and attempts? [y/N] ");
                let mut answer = String::new();
                std::io::stdin().lock().read_line(&mut answer)?;
                if !answer.trim().eq_ignore_ascii_case("y") {
                    println!("Nothing changed.");
                    return Ok(EXIT_OK);
                }
            }
            store::save_state(root, &State::default())?;
            println!("State reset.");
        }
    }
    Ok(EXIT_OK)
}

const INIT_CONFIG: &str = r#"{
  "specs": { "pattern": "specs/epic-{{epic}}/story-{{id}}-*.md" },
  "loop": { "timeout_seconds": 1800, "max_retries": 3 },
  "validation": { "commands": [] },
  "parallel": { "enabled": false, "max_concurrent": 4 }
}
"#;

const INIT_STORIES: &str = "\
# Story queue: one `ID | Title` per line, in the order you want them.
# `# [batch:N]` starts a section whose stories wait for every earlier section.
# Specs live in specs/epic-<N>/story-<ID>-<slug>.md (see .ralph/config.json).
";

fn cmd_init(root: &Path) -> anyhow::Result<i32> {
    let ralph = root.join(".ralph");
    std::fs::create_dir_all(&ralph)?;
    let mut made = Vec::new();
    for (path, content) in [
        (ralph.join("config.json"), INIT_CONFIG),
        (ralph.join("stories.txt"), INIT_STORIES),
    ] {
        if !path.exists() {
            std::fs::write(&path, content)?;
            made.push(
                path.strip_prefix(root)
                    .unwrap_or(&path)
                    .display()
                    .to_string(),
            );
        }
    }
    std::fs::create_dir_all(root.join("specs"))?;
    let gi = root.join(".gitignore");
    let existing = std::fs::read_to_string(&gi).unwrap_or_default();
    let missing: Vec<&str> = project::RUNTIME_PATTERNS
        .iter()
        .copied()
        .filter(|p| !existing.lines().any(|l| l.trim() == *p))
        .collect();
    if !missing.is_empty() {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&gi)?;
        if !existing.is_empty() && !existing.ends_with('\n') {
            writeln!(f)?;
        }
        writeln!(f, "# ralph runtime files")?;
        for p in missing {
            writeln!(f, "{p}")?;
        }
        made.push(".gitignore (runtime paths)".into());
    }
    println!("Created: {}", made.join(", "));
    println!(
        "Next: add stories to .ralph/stories.txt and specs under specs/, commit, then `ralph run`."
    );
    Ok(EXIT_OK)
}

fn cmd_template_show(root: &Path, builtin: bool) -> anyhow::Result<i32> {
    let custom = root.join(crate::prompt::TEMPLATE_OVERRIDE);
    let text = match std::fs::read_to_string(&custom) {
        Ok(t) if !builtin => {
            if !ui::get().quiet {
                eprintln!(
                    "({} overrides the built-in template; `ralph template show --builtin` prints that one)",
                    crate::prompt::TEMPLATE_OVERRIDE
                );
            }
            t
        }
        _ => crate::prompt::BUILTIN_TEMPLATE.to_string(),
    };
    print!("{text}");
    Ok(EXIT_OK)
}
