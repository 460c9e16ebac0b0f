//! `ralph run`, and `ralph decompose` (a run of one agent that splits a story).

use std::path::Path;

use super::args::RunArgs;
use crate::run::{self, RunOptions};

pub(super) fn cmd_run(a: RunArgs, root: &Path) -> anyhow::Result<i32> {
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
        model: a.model,
        best_of: a.best_of,
        no_dashboard: a.no_dashboard,
        hup_stops: a.hup == super::args::HupArg::Stop,
        serve: a.serve,
        decompose: None,
        land: false,
        exit_on_review: a.exit_on_review,
        sandbox: a.sandbox.as_deref().and_then(crate::sandbox::Mode::parse),
    };
    crate::process::become_subreaper();
    run::run(root, opts, &crate::exec::ByConfig)
}

pub(super) fn cmd_decompose(id: String, root: &Path) -> anyhow::Result<i32> {
    let opts = RunOptions {
        decompose: Some(id),
        ..RunOptions::default()
    };
    crate::process::become_subreaper();
    run::run(root, opts, &crate::exec::ByConfig)
}
