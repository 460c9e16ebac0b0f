//! The longer texts of `ralph --help`: version, examples, environment.
//! `-h` stays one screen; `--help` adds these (clap's long help).

use std::sync::LazyLock;

/// `ralph 0.1.0 (1a2b3c4d5e 2026-11-23)`: the commit and its date come
/// from `build.rs`; outside a git checkout only the package version.
pub(super) static VERSION: LazyLock<String> = LazyLock::new(|| {
    version_string(
        env!("CARGO_PKG_VERSION"),
        env!("RALPH_GIT_COMMIT"),
        env!("RALPH_GIT_DATE"),
    )
});

fn version_string(version: &str, commit: &str, date: &str) -> String {
    match (commit, date) {
        ("", _) => version.to_string(),
        (c, "") => format!("{version} ({c})"),
        (c, d) => format!("{version} ({c} {d})"),
    }
}

pub(super) const LONG_ABOUT: &str = "\
Runs an AI coding agent over a backlog of stories, in parallel worktrees, landing only verified merges.

ralph reads .ralph/config.json, .ralph/stories.txt and specs/ (or prd.json), \
starts one agent process per story attempt in its own git worktree, and lands \
finished work on the target branch through a merge queue that validates the \
merged tree first. A story is done only once its merge is on the branch; after \
a crash or Ctrl-C, `ralph run` carries on.

Commands work from any directory inside the project (or -C DIR). The user \
guide is docs/README.md in ralph's repository; `ralph man` prints this help as \
a man page.";

pub(super) const AFTER_HELP: &str =
    "`ralph <command> --help` for defaults, examples and exit codes.";

pub(super) static AFTER_LONG_HELP: LazyLock<String> = LazyLock::new(|| {
    format!(
        "\
Examples:
  ralph init                      scaffold .ralph/ in the current repository
  ralph validate                  every problem in config, queue and specs
  ralph run -d                    the plan and each prompt's head; changes nothing
  ralph run --parallel -j 4       run the backlog, four stories at a time
  ralph status                    progress, failures, tokens and cost
  ralph log 2.3                   the last attempt at story 2.3 as text

Environment:
  NO_COLOR         no colour (as --color never)
  CLICOLOR_FORCE   colour even when piped
  TERM=dumb        no colour and no live display
  CI               plain lines instead of the live display

{}",
        EXIT_CODES_HELP
    )
});

pub(super) const RUN_LONG_ABOUT: &str = "\
Run the backlog until every story is done.

Stories run in stories.txt order (one job), or every ready story at once up to \
-j (with --parallel). Each attempt gets a fresh worktree under \
.ralph/worktrees/ and the agent's prompt on stdin; finished work lands through \
the merge queue. A failed attempt is retried up to loop.max_retries times. \
Ctrl-C stops the agents (again: kills them); the next `ralph run` resumes.";

pub(super) const RUN_AFTER_LONG_HELP: &str = "\
Examples:
  ralph run                       one story at a time, in queue order
  ralph run --parallel -j 4       up to four stories at once
  ralph run -s 2.3                only story 2.3 (retrying it as usual)
  ralph run -n 5 -t 900           at most 5 attempts, 15 minutes each
  ralph run --agent codex         stories whose spec names no agent use Codex
  ralph run -d                    the plan and each prompt's head; changes nothing

Defaults come from .ralph/config.json (see docs/config.md); a flag wins over it.";

pub(super) const LOG_AFTER_LONG_HELP: &str = "\
The log is .ralph/logs/<ID>/attempt-<N>.log, the agent's raw output; it is \
decoded with the backend the attempt ran (recorded in .ralph/state.json). \
Tool calls are one line each, the agent's text is shown as written, and the \
result (tokens, cost, the <ralph> tags) comes last.

Examples:
  ralph log 2.3                   the latest attempt at story 2.3
  ralph log 2.3 --attempt 1       the first attempt
  ralph log 2.3 --raw             the file as it is (stream-json)
  ralph log -f 2.3                follow the running attempt until it ends";

/// The exit codes of every command (SPEC 2), shown by `--help`.
pub(super) const EXIT_CODES_HELP: &str = "\
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
pub(super) fn run_after_long_help() -> String {
    format!("{}\n\n{SCHEDULING_HELP}", RUN_AFTER_LONG_HELP.trim_end())
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

const READ_CODES: &str = "\
Exit codes:
  0    done
  2    bad usage, config or backlog (each problem with its file and line)
  4    ralph itself failed: nothing is lost";

const STEER_CODES: &str = "\
Exit codes:
  0    the run took it (what changed is printed)
  2    no run is going on here, or the run refused it (the reason is printed)
  4    ralph itself failed: nothing is lost";

const STORY_CODES: &str = "\
Exit codes:
  0    done (through the running run, or in the state when none runs)
  2    no such story, or it cannot be changed so (the reason is printed)
  4    ralph itself failed: nothing is lost";

const ONLY_OK: &str = "\
Exit codes:
  0    printed";

/// Each subcommand's examples and exit codes, for `--help` (issue 32: the
/// docs promise both for every command). `None` for the examples: the
/// command's own `after_long_help` has them.
const PER_COMMAND: &[(&str, Option<&str>, &str)] = &[
    ("run", None, EXIT_CODES_HELP),
    (
        "status",
        Some("ralph status                    progress, failures, tokens and cost\n  ralph status -w                 drawn again every second until Ctrl-C\n  ralph status --json | jq .jobs  for scripts"),
        READ_CODES,
    ),
    (
        "validate",
        Some("ralph validate                  every problem in config, queue and specs\n  ralph -C ~/code/app validate    another project"),
        "Exit codes:\n  0    no problem\n  2    problems (every one, with its file and line), or an agent command that\n       cannot start where its attempts would run\n  4    ralph itself failed: nothing is lost",
    ),
    (
        "graph",
        Some("ralph graph                     one line per story: what it waits for\n  ralph graph --format dot | dot -Tsvg > dag.svg\n  ralph graph --format mermaid    for a Markdown page"),
        READ_CODES,
    ),
    (
        "stories",
        Some("ralph stories                   [done] [running] [failed] [blocked] [pending] ... per story\n  ralph stories | grep failed"),
        READ_CODES,
    ),
    (
        "reset",
        Some("ralph reset 2.3                 story 2.3 runs again, its attempts counted from 1\n  ralph reset --yes               forget all state (the kept work stays)"),
        "Exit codes:\n  0    reset (or nothing changed at the prompt)\n  2    no such story, no confirmation without a terminal, your edit in the way, or\n       ID with a state file that cannot be read (`--yes` sets it aside)\n  3    a run holds this project's lock\n  4    ralph itself failed: nothing is lost",
    ),
    (
        "init",
        Some("ralph init                      scaffold .ralph/ in this repository\n  ralph -C ~/code/app init        in another one"),
        "Exit codes:\n  0    made (what was already there is kept)\n  2    inside a ralph project already, or outside a git repository\n  4    ralph itself failed: nothing is lost",
    ),
    (
        "review",
        Some("ralph review                    the stories waiting, with their diffstat"),
        READ_CODES,
    ),
    (
        "land",
        Some("ralph land                      land every reviewed story\n  ralph land 2.3 3.1              these two"),
        EXIT_CODES_HELP,
    ),
    (
        "reject",
        Some("ralph reject 2.3 --note \"keep the old --verbose flag\""),
        STORY_CODES,
    ),
    ("pause", Some("ralph pause                     then `ralph resume`"), STEER_CODES),
    ("resume", Some("ralph resume"), STEER_CODES),
    ("drain", Some("ralph drain                     let running work land, then end"), STEER_CODES),
    ("stop", Some("ralph stop 2.3                  then `ralph release 2.3` to let it run"), STEER_CODES),
    ("hold", Some("ralph hold 2.3                  2.3 and what waits for it do not start"), STORY_CODES),
    ("release", Some("ralph release 2.3"), STORY_CODES),
    (
        "note",
        Some("ralph note 2.3 \"the API is v2 now; see docs/api.md\""),
        STORY_CODES,
    ),
    ("jobs", Some("ralph jobs 2                    at most two agents from now on"), STEER_CODES),
    ("learnings", Some("ralph learnings"), READ_CODES),
    (
        "mcp",
        Some("claude mcp add ralph -- ralph -C ~/code/app mcp   Claude Code's tools for this project\n  ralph mcp                        serves until its stdin closes"),
        "Exit codes:\n  0    the client closed stdin\n  2    not in a ralph project\n  4    ralph itself failed: nothing is lost",
    ),
    ("decompose", Some("ralph decompose 2.3             split story 2.3 now"), EXIT_CODES_HELP),
    (
        "plan",
        Some("ralph plan docs/prd.md --dry-run   the plan, nothing written\n  ralph plan docs/prd.md             asks before writing"),
        "Exit codes:\n  0    written, shown (--dry-run) or not confirmed\n  1    the agent's plan was refused (the reason is printed); nothing written\n  2    bad usage or config\n  4    ralph itself failed: nothing is lost",
    ),
    ("version", Some("ralph version"), ONLY_OK),
    (
        "stats",
        Some("ralph stats                     the latest run and the lifetime figures\n  ralph stats --all               every recorded run\n  ralph stats --json"),
        READ_CODES,
    ),
    (
        "report",
        Some("ralph report                    writes .ralph/report.html (the latest run)\n  ralph report --out /tmp/run.html  elsewhere"),
        READ_CODES,
    ),
    (
        "serve",
        Some("ralph serve                     127.0.0.1 and a free port (or serve.addr)\n  ralph serve 127.0.0.1:8080"),
        "Exit codes:\n  0    stopped with Ctrl-C\n  2    bad address or config\n  4    ralph itself failed: nothing is lost",
    ),
    ("log", None, READ_CODES),
    (
        "template",
        Some("ralph template show\n  ralph template show --builtin > .ralph/templates/implement.md"),
        READ_CODES,
    ),
    (
        "config",
        Some("ralph config keys\n  ralph config schema > config.schema.json   for editors"),
        ONLY_OK,
    ),
    ("completions", None, ONLY_OK),
    ("man", None, ONLY_OK),
];

/// The CLI with every subcommand's long help ending in its examples and
/// exit codes.
pub(super) fn command(cmd: clap::Command) -> clap::Command {
    PER_COMMAND
        .iter()
        .fold(cmd, |cmd, (name, examples, codes)| {
            cmd.mut_subcommand(*name, |sub| {
                let text = match examples {
                    Some(e) => {
                        let word = if e.contains('\n') {
                            "Examples"
                        } else {
                            "Example"
                        };
                        format!("{word}:\n  {e}\n\n{codes}")
                    }
                    None => {
                        let own = sub
                            .get_after_long_help()
                            .map(|h| h.to_string())
                            .unwrap_or_default();
                        format!("{}\n\n{codes}", own.trim_end())
                    }
                };
                sub.after_long_help(text)
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_names_the_commit_when_there_is_one() {
        assert_eq!(version_string("0.1.0", "", ""), "0.1.0");
        assert_eq!(version_string("0.1.0", "abc", ""), "0.1.0 (abc)");
        assert_eq!(
            version_string("0.1.0", "abc", "2026-11-23"),
            "0.1.0 (abc 2026-11-23)"
        );
    }

    /// Every command's `--help` has examples and exit codes, as docs/README.md
    /// says (issue 32: 26 of 30 had no example, none its exit codes).
    #[test]
    fn every_command_has_examples_and_exit_codes() {
        use clap::CommandFactory;
        let mut cmd = command(super::super::args::Cli::command());
        for sub in cmd.get_subcommands_mut() {
            if sub.is_hide_set() {
                continue;
            }
            let name = sub.get_name().to_string();
            let help = sub.render_long_help().to_string();
            assert!(help.contains("Example"), "{name}: {help}");
            assert!(help.contains("Exit codes:\n  0"), "{name}: {help}");
        }
        let names: Vec<&str> = PER_COMMAND.iter().map(|(n, _, _)| *n).collect();
        for sub in cmd.get_subcommands() {
            assert!(
                sub.is_hide_set() || names.contains(&sub.get_name()),
                "{} has no examples",
                sub.get_name()
            );
        }
    }
}
