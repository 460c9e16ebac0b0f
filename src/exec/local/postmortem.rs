//! The executor's side of the timeout postmortem (`crate::postmortem`
//! holds its prompt): run inside the attempt it explains, with that
//! attempt's command line, sandbox and control.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::agent::parser::OutputParser;
use crate::agent::{self, Verdict};
use crate::backlog::{self, Story};
use crate::process::{self, AttemptSpec, Control};
use crate::project;
use crate::prompt;

use crate::executor::{blocking, template, AttemptEnv, AttemptReport};

/// After a timeout: a short run reads the spec's head and the end of what
/// the stopped attempt printed and says why; its `LEARN` tags join the
/// attempt's learnings (stored like any), its usage the attempt's.
pub(super) async fn postmortem(
    ctx: &Arc<AttemptEnv>,
    story: &Story,
    n: u32,
    mut spec: AttemptSpec,
    // The attempt's backend, and the model the postmortem runs on.
    (backend, postmortem_model): (agent::Backend, Option<&str>),
    control: &watch::Receiver<Control>,
    report: &mut AttemptReport,
) {
    let id = &story.id;
    let attempt_model = report.model.clone();
    let attempt_model = attempt_model.as_deref();
    let max_chars = ctx.config.postmortem.max_chars;
    // A char is at most 4 bytes: the end read holds the last `max_chars`.
    let partial = crate::store::read_log_end(&spec.log_path, 0, 4 * max_chars as u64 + 4)
        .map(|(text, _)| text)
        .unwrap_or_default();
    let partial = crate::postmortem::tail_chars(&partial, max_chars);
    let spec_text = backlog::spec_text(&ctx.root, story).unwrap_or_default();
    let template = template(
        &ctx.root,
        crate::paths::POSTMORTEM_TEMPLATE,
        crate::postmortem::TEMPLATE,
    );
    let mut v = prompt::Vars::default();
    v.set("STORY_ID", id.as_str());
    v.set("TITLE", story.title.as_str());
    v.set(
        "SPEC_CONTENT",
        crate::postmortem::head_bytes(&spec_text, crate::postmortem::SPEC_HEAD_BYTES),
    );
    v.set("PARTIAL_OUTPUT", partial);
    v.set(
        "TIMEOUT",
        crate::timefmt::human_duration(spec.timeout.as_secs_f64()),
    );
    spec.stdin = prompt::render(&template, &v).into_bytes();
    spec.log_path = crate::paths::postmortem_log(&ctx.root, id, n);
    // Never longer than the attempt it explains: `-t 3` must not let a
    // hung postmortem hold the slot for `postmortem.window_seconds`.
    spec.timeout = Duration::from_secs(ctx.config.postmortem.window_secs).min(spec.timeout);
    // Its args are the attempt's: a resumed session would only repeat it.
    if spec.args.first().is_some_and(|a| a == "--resume") {
        spec.args.drain(..2);
    }
    // On the ladder's top rung (issue 25): it reads a whole failed attempt.
    let model = postmortem_model.or(attempt_model);
    if let Some(m) = postmortem_model {
        if let Some(args) = crate::agent::with_model(backend, &spec.args, m) {
            spec.args = args;
        }
    }
    // Its sandbox needs the branch's stand-in again (collected after the
    // attempt), and gives it back after.
    let slot = spec
        .cwd
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if spec.seal.as_ref().is_some_and(|s| s.bwrap.is_some()) {
        let (program, wt, branch, slot2) = (
            spec.program.clone(),
            spec.cwd.clone(),
            project::story_branch(id),
            slot.clone(),
        );
        let again = blocking(ctx, move |c| {
            c.seal
                .for_agent(&c.git, backend, &program, &slot2, &wt, &branch)
        })
        .await
        .and_then(|r| r);
        match again {
            Ok(seal) => spec.seal = seal,
            Err(e) => {
                ctx.log.line(&format!(
                    "postmortem of story {id} attempt {n} skipped: cannot seal it: {e}"
                ));
                return;
            }
        }
    }
    let mut parser = OutputParser::for_backend(backend);
    ctx.log
        .line(&format!("postmortem of story {id} attempt {n}"));
    let ran = process::run_attempt(
        spec,
        |l| {
            parser.feed_line(l);
            false
        },
        control.clone(),
    )
    .await;
    let _ = blocking(ctx, move |c| c.git.sandbox_refs_collect(&slot)).await;
    let summary = parser.finish();
    report.usage += summary.usage;
    match crate::pricing::attempt_cost(
        &ctx.config.pricing,
        summary.cost_usd,
        model,
        &summary.usage,
        backend != crate::agent::Backend::Custom,
    ) {
        Some(c) => report.cost_usd += c,
        None => report.cost_unknown = true,
    }
    let lessons = summary.signals.learnings;
    ctx.log.line(&format!(
        "postmortem of story {id} attempt {n}: {} ({} lesson(s))",
        match ran {
            Ok(e) if e.stopped.is_some() => "stopped".to_string(),
            Ok(e) => format!("exit {:?}", e.code),
            Err(e) => format!("could not start: {e}"),
        },
        lessons.len()
    ));
    // The retry is told directly (learnings are chosen by relevance to
    // the spec, which a lesson about the run itself may not share).
    if let Verdict::Failed { reason, .. } = &mut report.verdict {
        for l in &lessons {
            reason.push_str(&format!("\nTimeout postmortem: {l}"));
        }
    }
    report.learnings.extend(lessons);
}
