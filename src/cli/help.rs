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
    "`ralph <command> --help` for defaults and examples; `ralph --help` for exit codes.";

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
}
