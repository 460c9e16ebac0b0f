//! `ralph run -d`: the plan, the checks a run would make first and each
//! prompt's head; nothing is changed.

use super::*;

/// `ralph run -d`: the plan and each prompt's head; nothing is changed.
pub(super) fn dry_run(
    project: &Project,
    opts: &RunOptions,
    seal: &crate::executor::RunSeal,
    backends: &[Backend],
) -> Result<i32> {
    let state = store::load_state(&project.root).map_err(|p| RalphError::BadInput(vec![p]))?;
    let b = &project.backlog;
    let first = opts
        .resume
        .as_ref()
        .and_then(|r| b.index_of(r))
        .unwrap_or(0);
    let only = opts.story.as_ref().and_then(|s| b.index_of(s));
    let asked: Vec<bool> = (0..b.stories.len())
        .map(|i| only.is_none_or(|o| o == i) && i >= first)
        .collect();
    // The run's selection: what was asked and what it waits for. Done is
    // what the run itself sees (`story_node`: prd.json's `passes: true`
    // too), not the state's record alone.
    let nodes: Vec<crate::schedule::StoryState> =
        b.stories.iter().map(|s| story_node(&state, s)).collect();
    let selection = crate::schedule::with_dependencies(&project.dag, &asked, &nodes);
    let order: Vec<usize> = project
        .dag
        .topo_order()
        .into_iter()
        .filter(|&i| selection.chosen[i])
        .collect();
    println!("[DRY RUN] sandbox: {}", seal.decision.why);
    for b in backends {
        if let Some(names) = seal.agent_env_names(*b) {
            println!(
                "[DRY RUN] the {} agent's environment (names only): {}",
                b.name(),
                names.join(" ")
            );
        }
    }
    println!(
        "[DRY RUN] plan ({}; nothing will be changed):",
        crate::report::counted(order.len(), "story", "stories")
    );
    let all_learnings = crate::learnings::load(&project.root);
    // Best of N (issue 36), on any executor.
    let c = &project.config;
    let best_of = |s: &crate::backlog::Story| {
        super::model::race::best_of(opts.best_of, s.model.best_of, c.attempts.best_of)
    };
    for i in order {
        let s = &b.stories[i];
        if nodes[i] == crate::schedule::StoryState::Done {
            println!("  [done] {} {}", s.id, s.title);
            continue;
        }
        let waits: Vec<&str> = project
            .dag
            .waits_for(i)
            .iter()
            .map(|&w| b.stories[w].id.as_str())
            .collect();
        let after = if waits.is_empty() {
            String::new()
        } else {
            format!("  (after {})", waits.join(", "))
        };
        let n = best_of(s);
        let race = if n > 1 {
            format!("  (best of {n})")
        } else {
            String::new()
        };
        println!("  [    ] {} {}{after}{race}", s.id, s.title);
        let text =
            crate::executor::build_prompt(&project.root, &project.config, s, &all_learnings, None)
                .unwrap_or_else(|e| format!("(cannot read the spec: {e})"));
        println!("  [DRY RUN] prompt head:");
        // The built-in template's story part: what every story shares
        // comes first (issue 25), the same for each and shown by
        // `ralph template show`.
        let head = match text.find(crate::prompt::STORY_PART) {
            Some(at) => &text[at..],
            None => &text[..],
        };
        for line in head.lines().take(12) {
            println!("    | {line}");
        }
    }
    // What the run will cost and take, from the project's own history:
    // advice only, so nothing here can fail the dry run.
    let to_run: Vec<bool> = (0..b.stories.len())
        .map(|i| selection.chosen[i] && nodes[i] != crate::schedule::StoryState::Done)
        .collect();
    let jobs = jobs_of(opts, &project.config);
    let history = crate::forecast::History::load(&project.root, &b.stories);
    let mut planned = crate::forecast::plan(&project.dag, &b.stories, &to_run);
    let running = (0..b.stories.len()).filter(|&i| to_run[i]);
    for (p, i) in planned.iter_mut().zip(running) {
        p.best_of = best_of(&b.stories[i]);
    }
    let agent = backends.first().map(|b| b.name());
    let forecast = crate::forecast::forecast(&history, &planned, jobs, agent);
    println!(
        "[DRY RUN] {}",
        crate::forecast::render(forecast.as_ref(), jobs)
    );
    let races = crate::forecast::races(&planned);
    if !races.is_empty() {
        println!(
            "[DRY RUN] {}: candidates race for each attempt (attempts.pick: {}); a race \
             costs up to N attempts, as the forecast counts it",
            crate::forecast::multiplier(&races),
            match c.attempts.pick {
                crate::config::Pick::First => "first",
                crate::config::Pick::Judge => "judge",
            }
        );
    }
    let required = c.validation.commands.iter().filter(|v| v.required).count();
    println!(
        "[DRY RUN] {}",
        transition::queue::describe(
            transition::queue::shape(c, super::queue::machine(c)),
            transition::queue::one_at_a_time(c),
            required
        )
    );
    println!("[DRY RUN] {}", transition::queue::where_line(c));
    Ok(EXIT_OK)
}
