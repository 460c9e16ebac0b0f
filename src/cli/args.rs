//! The command line's types (clap): what each command and flag is, with
//! its help text. Parsing only; `mod.rs` dispatches.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use super::help;
use crate::ui::ColorChoice;

#[derive(Debug, Parser)]
#[command(
    name = "ralph",
    version = help::VERSION.as_str(),
    about = "Runs an AI coding agent over a backlog of stories, in parallel worktrees, landing only verified merges",
    long_about = help::LONG_ABOUT,
    after_help = help::AFTER_HELP,
    after_long_help = help::AFTER_LONG_HELP.as_str()
)]
pub(super) struct Cli {
    /// Run as if started in DIR, like `git -C`
    ///
    /// The project is the nearest directory at or above it holding .ralph/ or
    /// prd.json (never above the top of its git work tree); `init` makes one
    /// in DIR.
    #[arg(short = 'C', long = "dir", global = true, value_name = "DIR")]
    pub(super) dir: Option<PathBuf>,
    /// When to colour the output
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "WHEN",
        default_value_t = ColorChoice::Auto
    )]
    pub(super) color: ColorChoice,
    /// Print only errors and the final summary
    #[arg(short, long, global = true)]
    pub(super) quiet: bool,
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Debug, Subcommand)]
pub(super) enum Command {
    /// Run the backlog until every story is done
    #[command(long_about = help::RUN_LONG_ABOUT, after_long_help = help::run_after_long_help())]
    Run(RunArgs),
    /// Progress, running, failed, blocked, cost
    Status {
        /// Machine-readable output
        #[arg(long)]
        json: bool,
        /// Draw it again every second, in place, until Ctrl-C
        #[arg(short, long, conflicts_with = "json")]
        watch: bool,
    },
    /// Check the backlog and config; print every problem; change nothing
    Validate {
        /// With an issue tracker backlog: read the tracker now (otherwise
        /// its last snapshot is checked, as every read but `run` does)
        #[arg(long)]
        online: bool,
    },
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
    /// Steer the running run: no new attempt starts; running ones finish and land
    Pause,
    /// Steer the running run: new attempts start again (undoes pause and drain)
    Resume,
    /// Steer the running run: start nothing new, end once nothing runs or lands
    Drain,
    /// Steer the running run: stop the story's attempt (no retry charged) and hold it
    Stop {
        /// The running story
        id: String,
    },
    /// Keep a story (and what depends on it) from starting; with or without a run
    Hold {
        /// The story
        id: String,
    },
    /// Let a held story start again; with or without a run
    Release {
        /// The story
        id: String,
    },
    /// A note the story's next attempt (or fix-up) gets in its prompt
    Note {
        /// The story
        id: String,
        /// What its next attempt should know
        text: String,
    },
    /// Steer the running run: at most N agents from now on (lowering stops none)
    Jobs {
        /// Most agents at once
        #[arg(value_parser = clap::value_parser!(u64).range(1..=256))]
        n: u64,
    },
    /// The learnings agents recorded, each with the file it is in
    Learnings,
    /// Serve this project to MCP clients (editors, assistants) on stdio
    Mcp,
    /// Split one story into sub-stories now (one agent run), landing them
    /// in its place; `decomposition.*` in the config
    Decompose {
        /// The story to split
        id: String,
    },
    /// Turn a PRD into a backlog with one agent run: specs with
    /// depends_on and stories.txt batches (or issues, with the GitHub
    /// source), shown as a DAG and a table before anything is written
    Plan {
        /// The PRD (Markdown)
        file: std::path::PathBuf,
        /// Write without asking
        #[arg(long)]
        yes: bool,
        /// Show the plan; write nothing
        #[arg(long)]
        dry_run: bool,
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
    /// The live web view of this project: its stories, runs and logs, and a
    /// run going on (docs/steering.md); until Ctrl-C
    Serve {
        /// Where to serve (IP:PORT) [default: serve.addr, else 127.0.0.1 and a free port]
        addr: Option<String>,
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
        /// Follow a running attempt's log as it grows, until the attempt ends
        #[arg(short, long)]
        follow: bool,
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
pub(super) enum WorkerCommand {
    /// Runs the attempt SPEC describes; its last stdout line is the report
    Attempt {
        /// The coordinator's spec (hex JSON)
        spec: String,
    },
    /// Validates the merge SPEC names; its last stdout line is the report
    Validate {
        /// The coordinator's spec (hex JSON)
        spec: String,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum ConfigCommand {
    /// Every key of .ralph/config.json, in Markdown (as docs/config.md)
    Keys,
    /// The JSON Schema of .ralph/config.json (as docs/config.schema.json), for
    /// editors: `ralph config schema > .ralph/config.schema.json`, then
    /// "$schema": "config.schema.json" in the config
    Schema,
}

#[derive(Debug, Subcommand)]
pub(super) enum TemplateCommand {
    /// Print the template in use: .ralph/templates/implement.md when the
    /// project has one, else the built-in one
    Show {
        /// The built-in template even when the project overrides it
        #[arg(long)]
        builtin: bool,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(super) enum GraphFormat {
    Dot,
    Mermaid,
    Text,
}

#[derive(Debug, clap::Args)]
pub(super) struct RunArgs {
    /// Run ready stories concurrently [default: parallel.enabled, false]
    #[arg(long)]
    pub(super) parallel: bool,
    /// Most stories running at once [default: parallel.max_concurrent, else 4]
    #[arg(short = 'j', long = "jobs", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    pub(super) jobs: Option<u64>,
    /// Most agent attempts this run, 0 = no limit [default: loop.max_iterations, 0]
    #[arg(short = 'n', long = "iterations", value_name = "N")]
    pub(super) iterations: Option<u64>,
    /// Run only this story
    #[arg(short = 's', long = "story", value_name = "ID")]
    pub(super) story: Option<String>,
    /// Start the sequential order at this story
    #[arg(short = 'r', long = "resume", value_name = "ID")]
    pub(super) resume: Option<String>,
    /// Wall-clock limit of one agent attempt, in seconds [default: loop.timeout_seconds, 1800]
    #[arg(short = 't', long = "timeout", value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) timeout: Option<u64>,
    /// Print the plan and each prompt's head; change nothing
    #[arg(short = 'd', long = "dry-run")]
    pub(super) dry_run: bool,
    /// Stream agent text to the terminal
    #[arg(short = 'v', long = "verbose")]
    pub(super) verbose: bool,
    /// Technical log path [default: ralph.log]
    #[arg(short = 'l', long = "log", value_name = "FILE")]
    pub(super) log: Option<PathBuf>,
    /// Agent CLI for stories whose spec names none: claude, codex, gemini, agy,
    /// opencode, cursor, amp, custom [default: agent.name, else claude]
    #[arg(long = "agent", value_name = "NAME")]
    pub(super) agent: Option<String>,
    /// Most this run may spend, in USD: when spent, nothing new starts, running
    /// work finishes and lands, exit 1 [default: budget.max_cost_usd, none]
    #[arg(long = "max-cost", value_name = "USD")]
    pub(super) max_cost: Option<f64>,
    /// Model every attempt of this run runs on, the escalation ladder off
    /// [default: a story's model:, agent.escalation, agent.model]
    #[arg(long = "model", value_name = "NAME")]
    pub(super) model: Option<String>,
    /// Candidates racing for each attempt, each its own agent in its own
    /// worktree; the first whose work passes lands, the others are stopped
    /// [default: a story's best_of:, attempts.best_of, 1]
    #[arg(long = "best-of", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) best_of: Option<u32>,
    /// Accepted for Ralph v2 scripts: ralph never waits on a prompt
    #[arg(long = "no-interactive")]
    pub(super) no_interactive: bool,
    /// Plain lines instead of the live display (also without a terminal)
    #[arg(long = "no-dashboard")]
    pub(super) no_dashboard: bool,
    /// What a hang-up (SIGHUP: the SSH link or terminal is gone) does:
    /// `continue` keeps the run going with its output in ralph.log
    /// only; `stop` stops it as Ctrl-C does
    #[arg(long = "hup", value_enum, default_value_t = HupArg::Continue)]
    pub(super) hup: HupArg,
    /// In landing.mode review, end the run (exit 1) once only reviews are
    /// left, instead of waiting for `ralph land` to approve them
    #[arg(long = "exit-on-review")]
    pub(super) exit_on_review: bool,
    /// Serve a live web view of the run at ADDR (IP:PORT) while it lasts;
    /// alone, serve.addr or 127.0.0.1 with a free port (docs/steering.md)
    #[arg(long = "serve", value_name = "ADDR", num_args = 0..=1)]
    pub(super) serve: Option<Option<String>>,
    /// Sandbox mode of this run only, over sandbox.mode (docs/security.md)
    /// [default: sandbox.mode, auto]
    #[arg(long = "sandbox", value_name = "MODE", value_parser = ["auto", "bwrap", "off"])]
    pub(super) sandbox: Option<String>,
}

/// `ralph run --hup`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum HupArg {
    Continue,
    Stop,
}
