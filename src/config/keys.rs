//! What each key of `.ralph/config.json` means: the one table that
//! docs/config.md and docs/config.schema.json are generated from
//! (`crate::docs`). Tests hold it to the reader in `config/`: every key
//! the reader asks for is here and nothing else, each kind's wrong value
//! is refused by the reader under that key, and every default comes from
//! `config::defaults()` unless that has none.

/// The shape of a key's value, as the reader accepts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A whole number at least `min` (a JSON number or a numeric string).
    Uint { min: u64 },
    /// `true`/`false` (or the strings "true"/"false").
    Bool,
    /// A string.
    Str,
    /// An array of strings.
    Strings,
    /// A non-negative amount in USD (a number or a numeric string).
    Amount,
    /// One agent backend's name.
    Agent,
    /// An array of agent backend names.
    Agents,
    /// `[{"name", "cmd", "required"}]`.
    ValidationCommands,
    /// `[{"url", "events", "format"}]`.
    Webhooks,
    /// `["haiku", {"agent": "codex", "model": "gpt-5"}]`: the escalation ladder.
    Ladder,
    /// `{"model": {"input": N, "output": N, ...}}`: prices per million tokens.
    Prices,
    /// An object whose values are strings.
    StringMap,
    /// Anything: ralph does not read the value.
    Any,
}

/// One key of the config file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyDoc {
    /// The dotted path.
    pub(crate) key: &'static str,
    pub(crate) kind: Kind,
    /// The default in words, for keys `config::defaults()` does not hold
    /// (their default is worked out where they are used).
    pub(crate) default: Option<&'static str>,
    /// What it does, one paragraph of Markdown.
    pub(crate) doc: &'static str,
}

const fn key(key: &'static str, kind: Kind, doc: &'static str) -> KeyDoc {
    KeyDoc {
        key,
        kind,
        default: None,
        doc,
    }
}

const fn key_or(key: &'static str, kind: Kind, default: &'static str, doc: &'static str) -> KeyDoc {
    KeyDoc {
        key,
        kind,
        default: Some(default),
        doc,
    }
}

/// Every key ralph reads, in the order the guide presents them.
pub(crate) const KEYS: &[KeyDoc] = &[
    key_or(
        "$schema",
        Kind::Any,
        "none",
        "The JSON Schema editors check this file against, e.g. a path to ralph's \
         `docs/config.schema.json`. ralph itself ignores it.",
    ),
    key(
        "specs.pattern",
        Kind::Str,
        "Glob that finds a story's spec. `{{epic}}` is the story ID up to its first `.`, \
         `{{id}}` the whole ID; the pattern must contain both.",
    ),
    key(
        "specs.frontmatter_status_field",
        Kind::Str,
        "The frontmatter field ralph sets to `done` in the spec when the story lands \
         (part of the `merge: story <id>` commit).",
    ),
    key(
        "loop.max_iterations",
        Kind::Uint { min: 0 },
        "Most agent attempts one `ralph run` starts; 0 means no limit. `-n` overrides it.",
    ),
    key(
        "loop.timeout_seconds",
        Kind::Uint { min: 1 },
        "Wall-clock limit of one agent attempt, in seconds; the agent is then stopped \
         (SIGTERM, `loop.grace_seconds`, SIGKILL) and the attempt fails as a timeout. \
         `-t` overrides it. Validation commands get the same limit.",
    ),
    key(
        "loop.max_retries",
        Kind::Uint { min: 1 },
        "Attempts per story before it fails for good and blocks its dependents. Usage \
         limits and faults outside the story (a broken worktree, a missing agent) do not count.",
    ),
    key(
        "loop.grace_seconds",
        Kind::Uint { min: 0 },
        "Seconds between SIGTERM and SIGKILL when an agent is stopped (timeout, Ctrl-C).",
    ),
    key(
        "loop.idle_timeout_seconds",
        Kind::Uint { min: 0 },
        "An attempt that prints nothing for this many seconds is stopped like a timeout; \
         0 turns the watchdog off.",
    ),
    key(
        "validation.commands",
        Kind::ValidationCommands,
        "Shell commands ralph runs on the merged tree before a story lands: \
         `[{\"name\": \"tests\", \"cmd\": \"npm test\", \"required\": true}]`. A required \
         command (the default) that fails refuses the landing and fails the attempt; its \
         output goes to `.ralph/logs/<id>/validation-<n>.log` and into the next prompt. \
         The prompt also lists them for the agent to run. `\"exclusive\": true` marks a \
         command that must never run twice at once on this machine (a fixed port, one \
         database): the merge queue's side-by-side validations take turns for it.",
    ),
    key(
        "validation.blocked_commands",
        Kind::Strings,
        "Commands the prompt tells the agent never to run (`{{BLOCKED_COMMANDS}}`), \
         e.g. `[\"git push\", \"npm publish\"]`. A request, not a sandbox.",
    ),
    key(
        "validation.where",
        Kind::Str,
        "Where the merge queue validates each candidate: `coordinator`, in a worktree of \
         the machine running `ralph run` (at most `landing.max_validations` at once), or \
         `executor`, as a job on the run's executor: with `executor.kind: ray` a Ray job \
         next to the attempts (the candidate's merge handed over through the relay, the \
         required commands sealed on the node as a local validation would be, `exclusive` \
         ones one at a time per node), so the cluster's room, not this machine's, bounds \
         how many run at once (`landing.max_validations`, when set, still caps them); the \
         coordinator still makes every merge and moves the target. With the local \
         executor, `executor` is the same as `coordinator`.",
    ),
    key(
        "claude.command",
        Kind::Str,
        "Claude Code's executable. A path with a `/` is relative to the project root; \
         a bare name is looked up on `PATH`.",
    ),
    key_or(
        "claude.flags",
        Kind::Strings,
        "`--print --dangerously-skip-permissions --output-format stream-json --verbose`",
        "Claude Code's arguments (they replace the default ones). ralph adds `--print` \
         and `--output-format stream-json --verbose` when they are missing, so the agent \
         runs headless and its tokens and cost are read.",
    ),
    key(
        "agent.name",
        Kind::Agent,
        "The agent CLI stories run with unless their spec's frontmatter names one \
         (`agent: codex`); `--agent` overrides it.",
    ),
    key_or(
        "agent.command",
        Kind::Str,
        "the backend's own (`claude`, `codex`, `cursor-agent`...)",
        "The executable of the `agent.name` backend.",
    ),
    key_or(
        "agent.flags",
        Kind::Strings,
        "the backend's own",
        "The arguments of the `agent.name` backend, replacing its defaults. The prompt \
         always goes to stdin.",
    ),
    key_or(
        "agent.fallback",
        Kind::Agents,
        "`[]`",
        "Backends that take new attempts, in order, while the ones before them wait for \
         a usage limit to reset; ralph goes back to the first when it resets.",
    ),
    key_or(
        "agent.model",
        Kind::Str,
        "the CLI's own",
        "The model attempts run on, given to each CLI in its own flag (`--model` for Claude \
         Code and Cursor, `-m` for Codex and Gemini CLI, `-m provider/model` for opencode); \
         a story's `model:` and `agent.escalation` choose per attempt, `ralph run --model` \
         overrides it for one run. Amp, Antigravity and a custom command have no model \
         flag: `validate` refuses it for them. See docs/cost.md.",
    ),
    key_or(
        "agent.escalation",
        Kind::Ladder,
        "`[]` (no ladder)",
        "The escalation ladder, cheapest first: `[\"haiku\", \"sonnet\", \"opus\"]`, or \
         `{\"agent\": \"codex\", \"model\": \"gpt-5\"}` entries to change backend too. \
         Attempt n of a story runs rung min(n-1, last); a story's `model:` or `effort: \
         low|medium|high` picks its first rung; fix-ups stay on the model whose work they \
         fix; decompositions and postmortems use the top rung; a usage limit does not move \
         a story up.",
    ),
    key(
        "limits.max_wait_hours",
        Kind::Uint { min: 0 },
        "A usage limit that resets later than this many hours from now is not waited \
         for: the run stops (exit 1) and says when to run again. A model API that keeps \
         failing (5xx, overloaded, unreachable) is waited on for at most this long from its \
         first failure in a row; then `agent.fallback` takes new attempts, or the run stops \
         (exit 1) naming the error. 0 waits for neither.",
    ),
    key_or(
        "budget.max_cost_usd",
        Kind::Amount,
        "no limit",
        "Most one run may spend, in USD (as the agents report cost). Once spent, nothing \
         new starts, running work finishes and lands, and the run ends with exit 1. \
         `--max-cost` overrides it.",
    ),
    key_or(
        "budget.max_cost_usd_total",
        Kind::Amount,
        "no limit",
        "As `budget.max_cost_usd`, for all runs of the project together (`state.json` \
         keeps the total).",
    ),
    key_or(
        "budget.max_cost_per_story_usd",
        Kind::Amount,
        "no limit",
        "Most one story may cost over all its attempts, fix-ups and splits, in USD. A story \
         past it after a failed attempt is not retried: it fails (or is decomposed) as \
         after its last retry.",
    ),
    key_or(
        "budget.max_tokens",
        Kind::Uint { min: 1 },
        "no limit",
        "Most tokens one run may use, for agents that report tokens but no cost.",
    ),
    key(
        "commit.format",
        Kind::Str,
        "The commit message the prompt asks for (`{{COMMIT_MESSAGE}}`); `{{id}}` and \
         `{{title}}` are the story's.",
    ),
    key(
        "commit.stage_paths",
        Kind::Strings,
        "Paths the prompt tells the agent to stage. Empty: the backticked paths under the \
         spec's \"Files to Create/Modify\" heading, else \"only the files this story touches\".",
    ),
    key(
        "learnings.enabled",
        Kind::Bool,
        "Whether learnings (`<ralph>LEARN: ...</ralph>`) are injected into later prompts \
         (`{{LEARNINGS}}`). They are recorded in `.ralph/learnings/` either way.",
    ),
    key(
        "learnings.max_inject_count",
        Kind::Uint { min: 0 },
        "Most learnings one prompt gets: those sharing the most words with the spec.",
    ),
    key(
        "parallel.enabled",
        Kind::Bool,
        "Run ready stories at once, up to `parallel.max_concurrent` (as `--parallel`).",
    ),
    key_or(
        "parallel.max_concurrent",
        Kind::Uint { min: 1 },
        "4",
        "Most stories running at once when parallel (as `-j`; `-j N` above 1 implies \
         `--parallel`).",
    ),
    key_or(
        "parallel.stagger_seconds",
        Kind::Uint { min: 0 },
        "0",
        "Least time between two agent starts, in seconds (spreads API load).",
    ),
    key(
        "hooks.pre_iteration",
        Kind::Str,
        "Shell command (`bash -c`, in the project root) run before each attempt, with \
         `RALPH_ITERATION`. Its failure is logged and ignored.",
    ),
    key(
        "hooks.pre_story",
        Kind::Str,
        "Run before each attempt's agent starts, in the project root, with `RALPH_STORY` \
         and `RALPH_SPEC`. Its failure is logged and ignored.",
    ),
    key(
        "hooks.post_story",
        Kind::Str,
        "Run after each attempt, once its outcome is known (finished work: after its \
         landing), with `RALPH_STORY` and `RALPH_RESULT` (done, fail, timeout, error, \
         no_signal). Its failure is logged and ignored.",
    ),
    key(
        "hooks.post_iteration",
        Kind::Str,
        "Run after `post_story`, with `RALPH_ITERATION`. Every attempt that ran \
         `pre_iteration` runs it, however the attempt ended (unless interrupted).",
    ),
    key(
        "hooks.pre_worktree",
        Kind::Str,
        "Run in the attempt's worktree before the agent starts (install dependencies, \
         copy `.env`), with `RALPH_STORY`, `RALPH_WORKTREE`, `RALPH_BRANCH` and \
         `RALPH_PROJECT_DIR`. Its failure fails the attempt.",
    ),
    key(
        "hooks.pre_worktree_timeout",
        Kind::Uint { min: 1 },
        "Seconds `hooks.pre_worktree` may take.",
    ),
    key(
        "hooks.on_complete",
        Kind::Str,
        "Run once when a run ends, with its figures in the environment (`RALPH_DONE`, \
         `RALPH_FAILED`, `RALPH_COST`, `RALPH_REPORT`, ...): a notification \
         (`curl` to ntfy or Slack). Its failure is logged and ignored.",
    ),
    key(
        "hooks.on_failure",
        Kind::Str,
        "Run when a story fails for good or the circuit breaker trips, with the figures \
         in the environment.",
    ),
    key(
        "hooks.on_pause",
        Kind::Str,
        "Run when new work pauses (a usage limit, a spent budget), with the figures in \
         the environment.",
    ),
    key(
        "loop.allow_empty_done",
        Kind::Bool,
        "A DONE that changed nothing lands (as the status edit alone) instead of failing \
         the attempt; a spec's frontmatter `allow_empty_done: true` allows it for one story.",
    ),
    key(
        "retry.resume_session",
        Kind::Bool,
        "A fix-up (conflict or failed validation handed back to the agent) continues the \
         agent's earlier session where its CLI can resume one (Claude Code, Codex).",
    ),
    key(
        "attempts.best_of",
        Kind::Uint { min: 1 },
        "How many candidates race for each attempt at a story (best of N): each its own \
         agent in its own worktree, counting against `-j`; the first whose work passes \
         validation and the gates lands, the others are stopped and their work kept under \
         `refs/ralph/candidates/<story>/<attempt>/<k>`. A story's `best_of:` and `ralph run \
         --best-of N` override it. 1 is one agent at a time. See docs/cost.md.",
    ),
    key_or(
        "attempts.candidates",
        Kind::Strings,
        "`[]` (the story's own agent and model)",
        "Who each racing candidate runs as: `\"agent\"` or `\"agent:model\"` entries, such \
         as `[\"claude:sonnet\", \"codex:gpt-5\", \"claude:opus\"]`; candidate k takes entry \
         (k-1) mod the list's length. Ignored when `best_of` is 1.",
    ),
    key(
        "attempts.pick",
        Kind::Str,
        "Which racing candidate lands: `first` (the first whose work passes validation and \
         the gates on the target's tip; the others are stopped) or `judge` (every candidate \
         finishes; among those whose work passes, the smallest diff, then the earliest \
         finish). See docs/cost.md.",
    ),
    key_or(
        "attempts.judge.agent",
        Kind::Agent,
        "none (the fixed ranking)",
        "Under `attempts.pick: judge`, the agent that picks among the passing candidates: \
         it runs sealed with `RALPH_JUDGE=1`, is shown each one's diff (cut short) and \
         validation, and answers `<ralph>PICK k</ralph>`; its cost is the story's. A failed \
         judge or no valid PICK falls back to the ranking.",
    ),
    key_or(
        "attempts.judge.model",
        Kind::Str,
        "the CLI's own",
        "The model the judge runs on, in its CLI's own flag.",
    ),
    key(
        "parallel.retry_concurrency",
        Kind::Uint { min: 1 },
        "Most retries (attempts after a failed attempt or a conflict, fix-ups included) \
         running at once; first attempts take the other slots.",
    ),
    key(
        "parallel.agent_memory_mb",
        Kind::Uint { min: 0 },
        "Memory one agent needs, in MB: an agent that would not fit in the memory \
         available (cgroup limit or `MemAvailable`) is not started, never fewer than one \
         running; 0 turns the check off.",
    ),
    key(
        "backlog.source",
        Kind::Str,
        "Where the stories are kept: `files` (`.ralph/stories.txt` and spec files, or \
         `prd.json`), `github` (the open issues of `backlog.github.repo` with \
         `backlog.github.label`), `linear` (the issues of team `backlog.linear.team` with \
         `backlog.linear.label`) or `jira` (the issues of project `backlog.jira.project` with \
         `backlog.jira.label`); see docs/backlog.md, Backlogs.",
    ),
    key_or(
        "backlog.github.repo",
        Kind::Str,
        "none (required with `backlog.source: github`)",
        "The repository whose issues are the backlog, as `owner/name` (with \
         `backlog.source: github`). The token comes from `GITHUB_TOKEN`, else `gh auth token`; \
         it is never written and never given to agents.",
    ),
    key(
        "backlog.github.label",
        Kind::Str,
        "The label that makes an issue a story.",
    ),
    key(
        "backlog.github.api_url",
        Kind::Str,
        "The REST API's root: GitHub's, or a GitHub Enterprise server's (`https://HOST/api/v3`).",
    ),
    key(
        "backlog.github.poll_seconds",
        Kind::Uint { min: 0 },
        "Least seconds between two reads of the tracker during a run: issues added or edited \
         meanwhile are picked up before the next story starts.",
    ),
    key_or(
        "backlog.linear.team",
        Kind::Str,
        "none (required with `backlog.source: linear`)",
        "The key of the Linear team whose issues are the backlog (`ENG`, as in ENG-12; with \
         `backlog.source: linear`). The API key comes from `LINEAR_API_KEY`; it is never \
         written and never given to agents or hooks.",
    ),
    key(
        "backlog.linear.label",
        Kind::Str,
        "The label (by name, within the team) that makes a Linear issue a story.",
    ),
    key(
        "backlog.linear.api_url",
        Kind::Str,
        "Linear's GraphQL endpoint.",
    ),
    key(
        "backlog.linear.poll_seconds",
        Kind::Uint { min: 0 },
        "Least seconds between two reads of Linear during a run: issues added or edited \
         meanwhile are picked up before the next story starts.",
    ),
    key_or(
        "backlog.jira.url",
        Kind::Str,
        "none (required with `backlog.source: jira`)",
        "The Jira site's root (`https://example.atlassian.net`), with `backlog.source: jira`. \
         Auth: `JIRA_EMAIL` and `JIRA_API_TOKEN` (basic; they win when `JIRA_TOKEN` is set \
         too) or `JIRA_TOKEN` alone (bearer); never written and never given to agents or hooks.",
    ),
    key_or(
        "backlog.jira.project",
        Kind::Str,
        "none (required with `backlog.source: jira`)",
        "The key of the Jira project whose issues are the backlog (`SHOP`, as in SHOP-7).",
    ),
    key(
        "backlog.jira.label",
        Kind::Str,
        "The label that makes a Jira issue a story.",
    ),
    key(
        "backlog.jira.jql",
        Kind::Str,
        "More JQL, ANDed to `project = KEY AND labels = \"LABEL\"` (empty: none).",
    ),
    key(
        "backlog.jira.done_transition",
        Kind::Str,
        "The name of the transition a landed story's issue takes (looked up by name, posted \
         by ID).",
    ),
    key(
        "backlog.jira.api_version",
        Kind::Uint { min: 2 },
        "The REST API's version: 3 (Jira Cloud: `/rest/api/3/search/jql`, comments in ADF) or 2 \
         (Jira Data Center, which serves no v3: `/rest/api/2/search`, plain-text comments).",
    ),
    key(
        "backlog.jira.poll_seconds",
        Kind::Uint { min: 0 },
        "Least seconds between two reads of Jira during a run: issues added or edited \
         meanwhile are picked up before the next story starts.",
    ),
    key(
        "parallel.predict_files",
        Kind::Bool,
        "Keep a story that is predicted to touch a file running work touches from starting \
         beside it while other work is ready (its spec's files section and every path its \
         text names, prd.json `files`, paths it conflicted on or touched in earlier attempts, \
         and the files running agents edit). Only reorders ready stories: a slot only such a \
         story could fill still gets it. `false` orders by critical path and priority alone.",
    ),
    key(
        "parallel.conflicts",
        Kind::Str,
        "`wait`: a story whose spec declares a file (its \"Files to Create/Modify\" section, \
         prd.json `files`) that running or landing work declares, touched or is editing does \
         not start beside it, even when its slot would stay idle: an idle slot costs nothing, \
         a conflict costs a fix-up (an agent run). `risk`: it starts there once nothing else \
         is ready. Files only predicted from a spec's prose, earlier attempts or edits never \
         idle a slot (`parallel.predict_files` reorders by them): prose names files a story \
         reads as often as ones it writes.",
    ),
    key(
        "decomposition.enabled",
        Kind::Bool,
        "A story that fails `loop.max_retries` times gets one run that splits it into \
         sub-stories (`<ralph>SUBSTORY_START</ralph>` blocks); they land in its place and \
         its dependents wait for all of them. `.ralph/templates/decompose.md` overrides the prompt.",
    ),
    key(
        "decomposition.max_depth",
        Kind::Uint { min: 0 },
        "How many times a line of stories may be split (a sub-story of a sub-story is depth 2).",
    ),
    key(
        "decomposition.timeout_seconds",
        Kind::Uint { min: 1 },
        "Wall-clock limit of a decomposition run, in seconds.",
    ),
    key(
        "postmortem.enabled",
        Kind::Bool,
        "After an attempt's timeout, a short run reads the spec's head and the end of \
         the attempt's output and says why, as `LEARN` tags: stored as learnings and told \
         to the retry. `.ralph/templates/timeout-postmortem.md` overrides the prompt.",
    ),
    key(
        "postmortem.window_seconds",
        Kind::Uint { min: 1 },
        "Wall-clock limit of the postmortem run, in seconds; never longer than the attempt's \
         own timeout (`-t`, `loop.timeout_seconds`).",
    ),
    key(
        "postmortem.max_output_chars",
        Kind::Uint { min: 1 },
        "How much of the end of the timed-out attempt's output the postmortem reads.",
    ),
    key(
        "runs.max_mb",
        Kind::Uint { min: 1 },
        "Most megabytes `.ralph/runs/` (the run records) may hold; the oldest runs' \
         records go first.",
    ),
    key_or(
        "serve.addr",
        Kind::Str,
        "none: a run serves its page only with `--serve`, on 127.0.0.1 with a free port",
        "Where `ralph run` serves its live web view (docs/steering.md), as `IP:PORT` (port 0: \
         a free one): set, every run serves it; it is also the address of `--serve` and \
         `ralph serve` given none. Every request, on any address, needs the token ralph prints \
         with the URL.",
    ),
    key(
        "sandbox.mode",
        Kind::Str,
        "How agents (and the validation commands that run their code) are sealed \
         (docs/security.md). `auto`: inside bubblewrap when `bwrap` is installed and works \
         (probed once per run), else with the environment allowlist and redaction alone and \
         one warning line; `bwrap`: refuse to run (exit 2) without a working bubblewrap; \
         `off`: no allowlist, no redaction, no confinement (ralph before 0.2).",
    ),
    key(
        "sandbox.env.pass",
        Kind::Strings,
        "More variables agents receive, by name or `PREFIX_*` glob, besides the base list \
         (`PATH`, `HOME`, `USER`, `LOGNAME`, `SHELL`, `LANG`, `LC_*`, `TERM`, `TZ`, `TMPDIR`, \
         `RALPH_*`) and their own CLI's variables.",
    ),
    key(
        "sandbox.env.set",
        Kind::StringMap,
        "Variables given to agents and validation commands with these values, \
         e.g. `{\"NODE_ENV\": \"test\"}`.",
    ),
    key(
        "sandbox.redact",
        Kind::Strings,
        "More variables (names or globs) whose values are replaced by `***` wherever ralph \
         writes or shows agent output; names with KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL or \
         AUTH are redacted anyway.",
    ),
    key(
        "sandbox.allow_read",
        Kind::Strings,
        "More paths (absolute or `~/...`) an agent sees read-only inside bubblewrap.",
    ),
    key(
        "sandbox.allow_write",
        Kind::Strings,
        "More paths (absolute or `~/...`) an agent sees read-write inside bubblewrap \
         (a cache such as `~/.cargo`, say).",
    ),
    key(
        "sandbox.limits.pids",
        Kind::Uint { min: 0 },
        "Processes (threads included) one agent attempt may have at once, all of them \
         together: a fork past it fails, and the attempt fails naming this key. Held by the \
         cgroup v2 `pids` controller, else cgroup v1's; without either by `RLIMIT_NPROC`, \
         which counts every process of the user and holds nothing for root \
         (docs/security.md). 0: no limit. Only sealed attempts (`sandbox.mode` not `off`).",
    ),
    key(
        "sandbox.limits.memory_mb",
        Kind::Uint { min: 0 },
        "Memory (MiB) one agent attempt may use, all its processes together: past it the \
         kernel kills one of them and the attempt fails naming this key. Held by the cgroup \
         v2 `memory` controller, else cgroup v1's; without either by `RLIMIT_DATA`, per \
         process. 0: no limit. Only sealed attempts (`sandbox.mode` not `off`).",
    ),
    key(
        "sandbox.network",
        Kind::Bool,
        "`false` cuts the network of validation commands inside bubblewrap; agents keep \
         theirs (they need their API).",
    ),
    key(
        "landing.mode",
        Kind::Str,
        "`merge` lands every story that passes validation on the target's tip; `review` \
         keeps it validated on `ralph/story-<id>` for a person (`ralph review`, `ralph land`, \
         `ralph reject`); its dependents wait. `pr` pushes the validated branch to \
         `landing.remote` and opens a pull request with `gh pr create` (`gh` must be on \
         PATH, checked at start); the story is done once its commits are on the remote's \
         target branch, which `ralph run` and `ralph status` check after a fetch.",
    ),
    key(
        "landing.speculate",
        Kind::Uint { min: 1 },
        "How many stories the merge queue merges on top of each other (the first on the \
         target's tip, each next one on the merge before it) and validates at once, each in \
         its own worktree; the target moves to the longest prefix that passed, with one \
         compare-and-swap. The depth halves after a failed validation and grows back by one \
         per landing. `1` validates one landing at a time. Chains are built in `merge` mode \
         without a reviewer gate; review and pr modes land one at a time (docs/merge-queue.md).",
    ),
    key(
        "landing.batch",
        Kind::Uint { min: 1 },
        "How many waiting stories the merge queue merges into one candidate (each story \
         still its own merge commit) and validates once, at the candidate's top; with \
         `landing.speculate` above 1, a chain of such candidates. When a candidate of \
         several stories fails, it is bisected: its halves are validated side by side on \
         the target's tip (when `landing.max_validations` leaves room) until the failing \
         story is alone; the others land without it. The target only moves to a \
         candidate's top, so every tip it moves to is a validated tree; the merges inside \
         a candidate are not validated one by one. `1` (the default): each story is a \
         candidate of its own (docs/merge-queue.md).",
    ),
    key(
        "landing.max_validations",
        Kind::Uint { min: 0 },
        "The most candidates the merge queue validates at once on this machine: a chain is \
         never deeper than this. `0` (the default) means one per CPU, and no more than the \
         memory available (cgroup limit or `MemAvailable`, read at each landing) holds at \
         `landing.validation_memory_mb` each, never fewer than one.",
    ),
    key(
        "landing.validation_memory_mb",
        Kind::Uint { min: 0 },
        "The memory one validation is taken to need, in megabytes, for the default of \
         `landing.max_validations` (as `parallel.agent_memory_mb` is for `-j`); `0` turns the \
         memory rule off.",
    ),
    key(
        "landing.remote",
        Kind::Str,
        "The remote `landing.mode: pr` pushes story branches to.",
    ),
    key(
        "parallel.auto_merge",
        Kind::Bool,
        "Ralph v2's switch: `false` means `landing.mode: review`.",
    ),
    key(
        "executor.kind",
        Kind::Str,
        "Where attempts run: `local` (slot worktrees of this checkout) or `ray` (each \
         attempt a job on a Ray cluster, its work carried by git through `executor.relay`; \
         see docs/cluster.md). Landing stays on this machine either way.",
    ),
    key(
        "executor.relay",
        Kind::Str,
        "The git remote work travels through with `executor.kind: ray`: ralph pushes each \
         attempt's base under `refs/ralph/<project>/`, workers fetch it and push their \
         result back. Every node must be able to fetch from and push to it; its URL must \
         carry no password.",
    ),
    key(
        "executor.ray.address",
        Kind::Str,
        "The Ray dashboard's HTTP address (its Jobs API), e.g. `http://127.0.0.1:8265`.",
    ),
    key(
        "executor.ray.token_env",
        Kind::Str,
        "The environment variable holding the cluster's auth token (`RAY_AUTH_MODE=token`), \
         sent as `Authorization: Bearer`. Only its name is configured; the token is never \
         written anywhere by ralph.",
    ),
    key(
        "executor.ray.ralph_path",
        Kind::Str,
        "ralph's path on the nodes, when it is installed there; empty: this very binary is \
         uploaded with each job (Ray's `runtime_env.working_dir`). Either way the worker \
         refuses to run for a coordinator of another version.",
    ),
    key_or(
        "executor.ray.resources",
        Kind::Any,
        "none",
        "Custom Ray resources each attempt's job asks for, e.g. `{\"ralph_slot\": 1}`: \
         start each node with `--resources='{\"ralph_slot\": 2}'` to run at most two \
         attempts there.",
    ),
    key_or(
        "pricing",
        Kind::Prices,
        "the built-in table (docs/cost.md)",
        "Prices of models in USD per million tokens, over ralph's table of known models: \
         `{\"my-model\": {\"input\": 3, \"output\": 15, \"cache_read\": 0.3, \
         \"cache_write\": 3.75}}` (the cache prices default to the input price). A name \
         also prices the models it begins. Tokens of a CLI that reports no cost are \
         priced so; a model with no price costs \"unknown\", never $0.",
    ),
    key(
        "gates.tests",
        Kind::Str,
        "The test-integrity gate (docs/gates.md): before a story lands, its diff is checked \
         for deleted or renamed-away test files, removed test functions, added skip markers, \
         fewer assertion lines and changes to the validation commands' own configuration. \
         `block` sends such work back as a fix-up naming each finding (to review instead \
         when the spec says `allow_test_changes: true` or the agent explains itself with \
         `<ralph>TESTS_CHANGED <id>: reason</ralph>`); `warn` lands it with the findings \
         recorded; `off` checks nothing.",
    ),
    key_or(
        "gates.tests_patterns.test_files",
        Kind::Strings,
        "none (the built-in table only)",
        "Regular expressions of paths that are test files, added to the built-in ones \
         (`tests/`, `test_*.py`, `*_test.go`, `*.test.ts`, ...).",
    ),
    key_or(
        "gates.tests_patterns.test_functions",
        Kind::Strings,
        "none (the built-in table only)",
        "Regular expressions of a test's line in a test file; the first group is its name \
         (a test that moved keeps its name).",
    ),
    key_or(
        "gates.tests_patterns.skips",
        Kind::Strings,
        "none (the built-in table only)",
        "Regular expressions of a skip marker's line in a test file.",
    ),
    key_or(
        "gates.tests_patterns.assertions",
        Kind::Strings,
        "none (the built-in table only)",
        "Regular expressions of an assertion's line in a test file.",
    ),
    key_or(
        "gates.tests_patterns.validation_files",
        Kind::Strings,
        "none (the built-in table only)",
        "Regular expressions of paths whose every change touches how the work is checked \
         (added to CI files and `pytest.ini`).",
    ),
    key_or(
        "gates.review.agent",
        Kind::Agent,
        "off",
        "The review gate (docs/gates.md): once a story's merged tree passed validation, \
         this agent CLI reads the spec, the diff against the target and the validation \
         output (in the validation worktree, sealed when agents are) and answers \
         `<ralph>APPROVE <id></ralph>` or `<ralph>CHANGES <id>: ...</ralph>`. CHANGES sends \
         the work back to its author's agent as a fix-up with the review; after \
         `gates.review.max_rounds` the story waits in review for a person. Its cost counts \
         to the story. `ralph validate` warns when it is the stories' own agent and model.",
    ),
    key_or(
        "gates.review.model",
        Kind::Str,
        "the CLI's own default",
        "`--model <model>` added to the reviewer's command line.",
    ),
    key(
        "gates.review.max_rounds",
        Kind::Uint { min: 1 },
        "Reviews a story gets: each CHANGES but the last sends it back to its agent as a \
         fix-up; when this many all asked for changes, it waits in review for a person.",
    ),
    key_or(
        "notify.webhooks",
        Kind::Webhooks,
        "none",
        "Webhooks the run posts to: `[{\"url\": \"https://hooks.slack.com/services/...\", \
         \"events\": [\"run_end\", \"story_failed\"], \"format\": \"slack\"}]`. `events` among \
         `run_end`, `story_landed`, `story_failed` (failed for good, not per attempt) and `paused` \
         (any pause: a person's, a usage limit, the budget), all four when left out; `format` \
         `slack` (a `text` field), `discord` (`content`) or `json` (the run record with `event`, \
         `run_id` — its records file's name — and `story` for a story's events; the default). \
         Posted off the run loop, each receiver on its own: a 2xx is success, anything else or no \
         answer within 5 s is retried after 1, 2 and 4 s; at the run's end the last posts get at \
         most 1.5 s, so a dead or silent receiver never holds up the run. Only a URL's scheme and \
         host are ever logged.",
    ),
];
