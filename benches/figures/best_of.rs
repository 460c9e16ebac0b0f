//! Figure: best of N against the escalation ladder (issue 36). A backlog
//! where each story is done by one model only, raced by three candidates at
//! once or climbed rung by rung.

use super::*;

/// The three models, in the ladder's order, and what one attempt on each
/// costs (Claude Code's `total_cost_usd`, list prices of the same tokens).
const MODELS: [(&str, f64); 3] = [("haiku", 0.02), ("sonnet", 0.06), ("opus", 0.10)];
const STORIES: usize = 6;
/// How long every attempt takes, whatever its model.
const AGENT_SECS: f64 = 1.5;

/// The model story `1.k` needs: they take turns, so the ladder lands a
/// third of the stories at each rung.
fn needed(k: usize) -> &'static str {
    MODELS[(k - 1) % MODELS.len()].0
}

/// The fake agent: every run appends a line to `$HOME/runs` (the run's
/// temp dir, outside the repository), works `AGENT_SECS`, and with the
/// story's model commits and says DONE; with another it says FAIL.
fn agent() -> String {
    let mut need = String::from("case \"$id\" in\n");
    for k in 1..=STORIES {
        let _ = writeln!(need, "  1.{k}) need={} ;;", needed(k));
    }
    need += "esac\n";
    let mut cost = String::from("case \"$M\" in\n");
    for (m, c) in MODELS {
        let _ = writeln!(cost, "  {m}) cost={c} ;;");
    }
    cost += "  *) cost=0.10 ;;\nesac\n";
    format!(
        r#"
M=""; prev=""
for a in "$@"; do [ "$prev" = "--model" ] && M="$a"; prev="$a"; done
echo "$id $M ${{RALPH_CANDIDATE:-0}}" >> "$HOME/runs"
{need}{cost}
sleep {AGENT_SECS}
answer() {{
  printf '{{"type":"result","subtype":"success","is_error":false,"result":"%s","num_turns":4,"total_cost_usd":%s,"usage":{{"input_tokens":2000,"output_tokens":400,"cache_creation_input_tokens":0,"cache_read_input_tokens":8000}}}}\n' "$1" "$cost"
}}
if [ "$M" != "$need" ]; then answer "stuck <ralph>FAIL $id: $M cannot do story $id</ralph>"; exit 0; fi
mkdir -p bench-out
printf '%s\n' "$id" > "bench-out/$id.txt"
git add "bench-out/$id.txt" && git commit -q -m "feat(story-$id): bench change"
answer "done <ralph>DONE $id</ralph>"
"#
    )
}

/// One run's figures.
struct Run {
    makespan: f64,
    runs_per_story: f64,
    spend_per_story: f64,
}

/// One run of the backlog, `-j 18`, with `settings` (the config's
/// `agent`/`attempts` keys) over the common ones, and at most `retries`
/// retries at once (`parallel.retry_concurrency`).
fn run(bin: &Path, settings: &str, retries: usize) -> Run {
    let backlog = Backlog {
        sections: vec![batch("1", stories(1, STORIES, |_| "medium"))],
    };
    let config = format!(
        "{{ \"loop\": {{ \"max_retries\": 3 }}, {settings},\n  \
         \"parallel\": {{ \"stagger_seconds\": 0, \"agent_memory_mb\": 0, \
         \"retry_concurrency\": {retries} }},\n  \
         \"decomposition\": {{ \"enabled\": false }}, \"sandbox\": {{ \"mode\": \"off\" }} }}\n"
    );
    let p = Project::new(&backlog, &agent(), |root| {
        write(root, ".ralph/config.json", &config)
    });
    let wall = p.run_ok(bin, &["run", "-j", "18"]);
    let state: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(p.root.join(".ralph/state.json")).expect("state"))
            .expect("state parses");
    let spent: f64 = state["stories"]
        .as_object()
        .map(|o| o.values().filter_map(|s| s["cost_usd"].as_f64()).sum())
        .unwrap_or(0.0);
    let runs = fs::read_to_string(p.tmp.path().join("runs"))
        .unwrap_or_default()
        .lines()
        .count();
    let landed = p.merges_on_main();
    assert_eq!(landed, STORIES, "every story lands\n{}", p.output_tail());
    Run {
        makespan: wall.as_secs_f64(),
        runs_per_story: runs as f64 / landed as f64,
        spend_per_story: spent / landed as f64,
    }
}

pub(super) fn fig_best_of(bin: &Path, quick: bool) -> Figure {
    let pairs = if quick { 1 } else { 3 };
    let mut fig = Figure::new(
        "best-of",
        "Best of 3 against the escalation ladder over the same three models",
    );
    let models: Vec<&str> = MODELS.iter().map(|(m, _)| *m).collect();
    let race = format!(
        "\"attempts\": {{ \"best_of\": 3, \"candidates\": [{}] }}",
        models
            .iter()
            .map(|m| format!("\"claude:{m}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let ladder = format!(
        "\"agent\": {{ \"escalation\": [{}] }}",
        models
            .iter()
            .map(|m| format!("\"{m}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // The ladder as it runs by default, retries one at a time, and with
    // as many at once as there are stories: only each story's own rungs
    // one after another, the comparison the issue asks for.
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..pairs {
        // Alternated, each first every third round, so a drift in the
        // machine's load falls on all.
        for k in 0..3 {
            match (i + k) % 3 {
                0 => a.push(run(bin, &race, STORIES)),
                1 => b.push(run(bin, &ladder, STORIES)),
                _ => c.push(run(bin, &ladder, 1)),
            }
        }
    }
    let col = |v: &[Run], f: fn(&Run) -> f64| v.iter().map(f).collect::<Vec<f64>>();
    let ratio = |l: &[Run]| -> Vec<f64> {
        a.iter()
            .zip(l)
            .map(|(r, l)| r.makespan / l.makespan)
            .collect()
    };
    fig.rows.push(Row::new(
        "makespan, best of 3",
        "s",
        col(&a, |r| r.makespan),
    ));
    fig.rows.push(Row::new(
        "makespan, ladder haiku → sonnet → opus, retries at once",
        "s",
        col(&b, |r| r.makespan),
    ));
    fig.rows
        .push(Row::new("best of 3 ÷ ladder, makespan", "×", ratio(&b)).target(Cmp::Le, 0.6));
    fig.rows.push(Row::new(
        "makespan, ladder, retries one at a time (the default)",
        "s",
        col(&c, |r| r.makespan),
    ));
    fig.rows.push(Row::new(
        "best of 3 ÷ that ladder, makespan",
        "×",
        ratio(&c),
    ));
    for (what, v) in [("best of 3", &a), ("ladder", &b)] {
        fig.rows.push(Row::new(
            &format!("agent runs per landed story, {what}"),
            "per landing",
            col(v, |r| r.runs_per_story),
        ));
        fig.rows.push(Row::new(
            &format!("spend per landed story, {what}"),
            "$",
            col(v, |r| r.spend_per_story),
        ));
    }
    fig.notes.push(format!(
        "{STORIES} stories in one batch, `-j 18` (a slot for every candidate), \
         `loop.max_retries` 3; each story is done only by one model (they take turns: \
         haiku, sonnet, opus), every attempt takes {AGENT_SECS} s and another model's says \
         FAIL naming the story (the same words for every story would trip the circuit \
         breaker). Best of 3: `attempts.candidates` claude:haiku, claude:sonnet, \
         claude:opus, `pick: first`. Ladder: `agent.escalation` haiku → sonnet → opus, \
         `parallel.retry_concurrency` {STORIES} (and 1, the default). Runs alternated \
         ({pairs} rounds); agent runs counted by the fake agent, spend is ralph's own \
         record (state.json: haiku $0.02, sonnet $0.06, opus $0.10 an attempt; a \
         candidate stopped before its CLI reported a cost adds nothing there)"
    ));
    fig
}
