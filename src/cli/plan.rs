//! `ralph plan FILE.md` (issue 27): one run of the configured agent turns a
//! PRD into stories; the reply is checked (`crate::plan`, decomposition's
//! checks), shown as a DAG and a table, and written only with `--yes` or
//! after a confirmation on a terminal (`--dry-run`: shown only).

use std::collections::HashSet;
use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::agent::parser::OutputParser;
use crate::backlog::github::source::{GitHub, NewIssue};
use crate::backlog::jira::source::Jira;
use crate::backlog::linear::source::Linear;
use crate::config::BacklogSource;
use crate::dag::Dag;
use crate::decompose;
use crate::error::{RalphError, EXIT_OK, EXIT_STORIES_FAILED};
use crate::executor::RunSeal;
use crate::gitops::Git;
use crate::plan::{self, Planned};
use crate::process::{self, AttemptSpec};
use crate::report::{self, GraphNode};
use crate::schedule::StoryState;

pub(super) fn cmd_plan(root: &Path, file: &Path, yes: bool, dry_run: bool) -> anyhow::Result<i32> {
    let config = crate::config::load(root).map_err(RalphError::BadInput)?;
    let prd = std::fs::read_to_string(file).map_err(|e| {
        RalphError::usage(format!("cannot read {}: {e}", file.display()))
            .with_hint("name a Markdown file holding the product requirements")
    })?;
    // What is in the backlog now (a plan may depend on it); an empty or
    // missing backlog is what `plan` is for. A tracker is asked now: the
    // plan makes its issues there.
    let _ = crate::project::refresh_tracker(root);
    let (now, _) = crate::backlog::load_partial(root, &config);
    let known: HashSet<String> = now
        .iter()
        .flat_map(|b| b.stories.iter().map(|s| s.id.clone()))
        .collect();
    let existing: Vec<String> = now
        .iter()
        .flat_map(|b| b.stories.iter().map(|s| format!("- {}: {}", s.id, s.title)))
        .collect();
    let mut v = crate::prompt::Vars::default();
    v.set("PRD", prd.as_str());
    v.set("EXISTING", existing.join("\n"));
    let prompt = crate::prompt::render(plan::TEMPLATE, &v);
    let (text, bytes) = run_agent(root, &config, prompt)?;
    let refused = |why: String| -> anyhow::Result<i32> {
        eprintln!("error: the plan was refused, nothing was written: {why}");
        eprintln!("hint: run `ralph plan` again, or write the stories by hand (docs/backlog.md)");
        Ok(EXIT_STORIES_FAILED)
    };
    if let Err(why) = decompose::check_size(bytes) {
        return refused(why);
    }
    let planned = match plan::parse_plan(&text, &known) {
        Ok(p) => p,
        Err(why) => return refused(why),
    };
    let mut specs = Vec::new();
    if config.backlog == BacklogSource::Files {
        for p in &planned {
            let path = match plan::spec_path(&config.specs.pattern, p) {
                Ok(path) => path,
                Err(why) => return refused(why),
            };
            if root.join(&path).exists() {
                return refused(format!(
                    "story {}'s spec {} exists already",
                    p.story.id,
                    path.display()
                ));
            }
            specs.push(path);
        }
        if !root.join(crate::paths::QUEUE).exists() && root.join(crate::paths::PRD).exists() {
            return refused(format!(
                "this project's backlog is {}; `ralph plan` writes {} and spec files",
                crate::paths::PRD,
                crate::paths::QUEUE
            ));
        }
    }
    let backlog = plan::as_backlog(&planned, &known);
    let dag = match Dag::build(&backlog) {
        Ok(d) => d,
        Err(problems) => {
            let shown: Vec<String> = problems.iter().map(|p| p.message.clone()).collect();
            return refused(shown.join("; "));
        }
    };
    show(&backlog, &dag, &planned);
    if dry_run {
        println!("(--dry-run: nothing written)");
        return Ok(EXIT_OK);
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            println!("Nothing written: pass --yes to write this plan.");
            return Ok(EXIT_OK);
        }
        eprint!("Write these {} stories? [y/N] ", planned.len());
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !answer.trim().eq_ignore_ascii_case("y") {
            println!("Nothing written.");
            return Ok(EXIT_OK);
        }
    }
    let issues = || -> Vec<NewIssue> {
        planned
            .iter()
            .map(|p| NewIssue {
                id: p.story.id.clone(),
                title: p.story.title.clone(),
                body: crate::backlog::split_frontmatter(&p.story.text)
                    .map_or(p.story.text.as_str(), |(_, b)| b)
                    .to_string(),
                depends_on: p.story.depends_on.clone(),
                batch: p.batch.clone(),
            })
            .collect()
    };
    if let BacklogSource::Files = &config.backlog {
        write_files(root, &config, &planned, &specs)?;
        return Ok(EXIT_OK);
    }
    to_tracker(root, &config.backlog, &issues(), &known)?;
    // The snapshot every read goes by takes the new issues in.
    if let Ok(Some(why)) | Err(why) = crate::project::refresh_tracker(root).map_err(|p| {
        p.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    }) {
        eprintln!("warning: the tracker's snapshot is not updated yet: {why}; `ralph validate --online` reads it");
    }
    Ok(EXIT_OK)
}

/// Writes the plan's `issues` to the tracker `backlog` names, printing
/// what each story became.
fn to_tracker(
    root: &Path,
    backlog: &BacklogSource,
    issues: &[NewIssue],
    known: &HashSet<String>,
) -> Result<(), RalphError> {
    let hint = "the issues made before it stay; `ralph validate --online` reads them";
    match backlog {
        BacklogSource::Files => {}
        BacklogSource::GitHub(g) => {
            let mut tracker = GitHub::open(root, g.clone(), false);
            let made = tracker
                .create_issues(issues, known, &g.label)
                .map_err(|e| {
                    RalphError::usage(format!("creating the issues on GitHub {}: {e}", g.repo))
                        .with_hint(hint)
                })?;
            for (id, n) in made {
                println!("story {id} → issue #{n}");
            }
        }
        BacklogSource::Linear(l) => {
            let mut tracker = Linear::open(root, l.clone());
            let made = tracker.create_issues(issues, known).map_err(|e| {
                RalphError::usage(format!(
                    "creating the issues in Linear team {}: {e}",
                    l.team
                ))
                .with_hint(hint)
            })?;
            for (id, identifier) in made {
                println!("story {id} → issue {identifier}");
            }
        }
        BacklogSource::Jira(j) => {
            let mut tracker = Jira::open(root, j.clone());
            let made = tracker.create_issues(issues, known).map_err(|e| {
                RalphError::usage(format!(
                    "creating the issues in Jira project {}: {e}",
                    j.project
                ))
                .with_hint(hint)
            })?;
            for (id, key) in made {
                println!("story {id} → issue {key}");
            }
        }
    }
    Ok(())
}

fn show(backlog: &crate::backlog::Backlog, dag: &Dag, planned: &[Planned]) {
    let nodes: Vec<GraphNode> = backlog
        .stories
        .iter()
        .map(|s| GraphNode {
            id: &s.id,
            title: &s.title,
            node: StoryState::Pending,
            held: false,
        })
        .collect();
    let edges: Vec<(usize, usize)> = dag.edges();
    print!(
        "{}",
        report::render_graph(&nodes, &edges, &dag.topo_order(), report::GraphStyle::Text)
    );
    println!();
    print!("{}", plan::table(planned));
}

fn write_files(
    root: &Path,
    config: &crate::config::Config,
    planned: &[Planned],
    specs: &[PathBuf],
) -> anyhow::Result<()> {
    for (p, rel) in planned.iter().zip(specs) {
        let text = decompose::child_spec(&p.story, &[], &config.specs.status_field);
        let full = root.join(rel);
        if let Some(dir) = full.parent() {
            std::fs::create_dir_all(dir)?;
        }
        crate::store::write_atomic(&full, text.as_bytes())?;
        println!("wrote {}", rel.display());
    }
    let queue = root.join(crate::paths::QUEUE);
    let old = std::fs::read_to_string(&queue).unwrap_or_default();
    crate::store::write_atomic(&queue, plan::queue_text(&old, planned).as_bytes())?;
    println!(
        "wrote {} ({}); commit them, then `ralph run`",
        crate::paths::QUEUE,
        crate::report::counted(planned.len(), "story", "stories")
    );
    Ok(())
}

/// One run of the configured agent on `prompt`, in an empty directory of
/// its own (it is asked for text, not edits), found and sealed as a run's
/// agents are (`sandbox.mode`); its text and its length.
fn run_agent(
    root: &Path,
    config: &crate::config::Config,
    prompt: String,
) -> anyhow::Result<(String, usize)> {
    let backend = config.agent.name;
    let agents = crate::exec::agents::resolve(root, &config.agent, &[backend])?;
    let (program, args) = agents[&backend].clone();
    let (seal, _) = RunSeal::for_run(config, &agents)?;
    let git = Git::open(root).map_err(|e| RalphError::usage(e.to_string()))?;
    let stamp = crate::timefmt::now_secs();
    let cwd = std::env::temp_dir().join(format!("ralph-plan-{}-{stamp}", std::process::id()));
    std::fs::create_dir_all(&cwd)?;
    // Unsealed, a tracker's token is still no part of its output.
    let redact = if seal.decision.seal {
        seal.secrets.clone()
    } else {
        Arc::new(crate::redact::Secrets::new(
            crate::sandbox::tracker_secret_values(&std::env::vars().collect::<Vec<_>>()),
        ))
    };
    let spec = AttemptSpec {
        seal: seal.for_text_agent(&git, backend, &program, &cwd),
        program,
        args,
        cwd: cwd.clone(),
        env: Vec::new(),
        env_remove: crate::sandbox::agent_env_remove(backend.env_remove()),
        stdin: prompt.into_bytes(),
        log_path: crate::paths::plan_log(root, stamp),
        timeout: Duration::from_secs(config.decomposition.timeout_secs),
        idle: None,
        grace: Duration::from_secs(config.loop_.grace_secs),
        token: process::unique_token("ralph-plan-"),
        redact,
    };
    let mut parser = OutputParser::for_backend(backend).keeping_text(decompose::MAX_REPLY_BYTES);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (_tx, control) = tokio::sync::watch::channel(crate::control::Control::Run);
    let ran = rt.block_on(process::run_attempt(
        spec,
        |l| {
            parser.feed_line(l);
            false
        },
        control,
    ));
    rt.shutdown_timeout(Duration::from_secs(1));
    let _ = std::fs::remove_dir_all(&cwd);
    let exit = ran.map_err(|e| {
        RalphError::usage(format!("cannot run the {} agent: {e}", backend.name())).with_hint(
            format!(
                "check agent.command in {} and that the CLI is on PATH",
                crate::paths::CONFIG
            ),
        )
    })?;
    if exit.stopped.is_some() {
        return Err(RalphError::usage(format!(
            "the plan's agent run was stopped after decomposition.timeout_seconds ({} s)",
            config.decomposition.timeout_secs
        ))
        .with_hint("raise decomposition.timeout_seconds, or shorten the PRD")
        .into());
    }
    let summary = parser.finish();
    Ok((summary.text, summary.text_bytes))
}
