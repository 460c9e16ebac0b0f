//! The command line: `main` parses (types in `args.rs`), finds the project
//! root, dispatches to one thin handler per command (a file each, or per
//! family), and turns an error into its exit code and `hint:` line.
//! Handlers turn arguments into library calls and results into output.

use std::path::{Path, PathBuf};

use clap::{CommandFactory, FromArgMatches, ValueEnum};

use crate::display::err;
use crate::error::{RalphError, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_OK};
use crate::project::{self, Project};
use crate::run;
use crate::state::State;
use crate::store;
use crate::ui::{self, ColorChoice};

mod args;
mod graph;
mod help;
mod info;
mod init;
mod plan;
mod records;
mod reset;
mod review;
mod run_cmd;
mod status;
mod steer;
mod validate;

use args::{Cli, Command, ConfigCommand, TemplateCommand, WorkerCommand};

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
    let parsed = help::command(Cli::command())
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
    let code = match dispatch(cli.command, &root) {
        Ok(code) => code,
        Err(e) => report_error(&e),
    };
    // A run's last lines wait in its output queue: written out unless the
    // reader has stopped for good, which must not keep the exit waiting.
    crate::display::drain(std::time::Duration::from_secs(2));
    code
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
            let marker =
                crate::paths::project_marker(&root).unwrap_or_else(|| root.join(crate::paths::DIR));
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
            "no ralph project here: no {}/ or {} in {} or above it{}",
            crate::paths::DIR,
            crate::paths::PRD,
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
    if runs_agents {
        crate::display::queue_from_now();
        crate::allocator::few_arenas();
    } else {
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
        Command::Run(a) => run_cmd::cmd_run(a, root),
        Command::Status { json, watch } => status::cmd_status(root, json, watch),
        Command::Validate { online } => validate::cmd_validate(root, online),
        Command::Graph { format } => graph::cmd_graph(root, format),
        Command::Stories => graph::cmd_stories(root),
        Command::Reset { id, yes } => reset::cmd_reset(root, id, yes),
        Command::Init => init::cmd_init(root),
        Command::Review => review::cmd_review(root),
        Command::Land { ids } => review::cmd_land(root, ids),
        Command::Reject { id, note } => review::cmd_reject(root, &id, note.as_deref()),
        Command::Pause => steer::cmd_steer(root, crate::steer::Command::Pause),
        Command::Resume => steer::cmd_steer(root, crate::steer::Command::Resume),
        Command::Drain => steer::cmd_steer(root, crate::steer::Command::Drain),
        Command::Stop { id } => steer::cmd_steer(root, crate::steer::Command::Stop { id }),
        Command::Hold { id } => steer::cmd_steer(root, crate::steer::Command::Hold { id }),
        Command::Release { id } => steer::cmd_steer(root, crate::steer::Command::Release { id }),
        Command::Note { id, text } => {
            steer::cmd_steer(root, crate::steer::Command::Note { id, text })
        }
        Command::Jobs { n } => {
            steer::cmd_steer(root, crate::steer::Command::Jobs { n: n as usize })
        }
        Command::Learnings => info::cmd_learnings(root),
        Command::Mcp => crate::mcp::serve(root),
        Command::Plan { file, yes, dry_run } => plan::cmd_plan(root, &file, yes, dry_run),
        Command::Decompose { id } => run_cmd::cmd_decompose(id, root),
        Command::Version => {
            println!("ralph {}", help::VERSION.as_str());
            Ok(EXIT_OK)
        }
        Command::Log {
            id,
            attempt,
            raw,
            follow,
        } => crate::logview::cmd_log(root, &id, attempt, raw, follow),
        Command::Template {
            what: TemplateCommand::Show { builtin },
        } => info::cmd_template_show(root, builtin),
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
            let mut cmd = help::command(Cli::command());
            clap_complete::generate(shell, &mut cmd, "ralph", &mut std::io::stdout());
            Ok(EXIT_OK)
        }
        Command::Man => {
            clap_mangen::Man::new(help::command(Cli::command())).render(&mut std::io::stdout())?;
            Ok(EXIT_OK)
        }
        Command::Worker {
            what: WorkerCommand::Attempt { spec },
        } => {
            crate::process::become_subreaper();
            crate::exec::worker::attempt(&spec)
        }
        Command::Worker {
            what: WorkerCommand::Validate { spec },
        } => {
            crate::process::become_subreaper();
            crate::exec::worker::validate(&spec)
        }
        Command::Stats { json, run, all } => records::cmd_stats(root, json, run, all),
        Command::Report { run, out } => records::cmd_report(root, run, out),
        Command::Serve { addr } => crate::serve::cmd_serve(root, addr.as_deref()),
    }
}

pub(super) fn load(root: &Path) -> anyhow::Result<(Project, State)> {
    let project = project::load(root).map_err(RalphError::BadInput)?;
    let state = store::load_state(root).map_err(|p| RalphError::BadInput(vec![p]))?;
    Ok((project, state))
}

/// What commands that change the state share (`land`, `reject`, `reset`):
/// the run lock (a run in progress owns the state: exit 3), the state read
/// under it, `change`, and the state saved when `change` altered it.
pub(super) fn with_locked_state<T>(
    root: &Path,
    doing: &str,
    change: impl FnOnce(&mut State) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let _lock = run::take_run_lock(root, doing)?;
    let state = store::load_state(root).map_err(|p| RalphError::BadInput(vec![p]))?;
    change_state(root, state, change)
}

/// `change` on `state`, read under the run lock the caller holds, and the
/// state saved when `change` altered it.
pub(super) fn change_state<T>(
    root: &Path,
    mut state: State,
    change: impl FnOnce(&mut State) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let before = state.clone();
    let out = change(&mut state)?;
    if state != before {
        store::save_state(root, &state)?;
    }
    Ok(out)
}

/// An empty backlog is not an error outside `run` (it refuses it), but it
/// is never "all complete" either: say so on stderr.
pub(super) fn warn_if_empty(project: &Project) {
    if let Some((what, hint)) = project.backlog.emptiness() {
        err(&format!("warning: {what}"));
        err(&format!("hint: {hint}"));
    }
}
