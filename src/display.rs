//! The terminal during a run: one plain line per event without a terminal
//! (or with `CI` set), a live indicatif display with one. The words come
//! from `report`.
//!
//! A closed pipe never stops a run: `ralph run` keeps SIGPIPE ignored (it
//! writes prompts into agents' stdin, and a dead agent must be an EPIPE on
//! that write, not ralph's death mid-landing), so everything it prints goes
//! through `out` and `err`, which drop write errors instead of panicking as
//! `println!` does. Read-only commands die of SIGPIPE like any filter
//! (`cli::dispatch`).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::report::{render_activity, render_story_prefix, render_totals, Totals};

/// `text` on stdout, as is; a closed or failing stdout is ignored.
pub(crate) fn out(text: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes());
    let _ = o.flush();
}

/// `text` and a newline on stderr; a closed or failing stderr is ignored.
pub(crate) fn err(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

struct Live {
    multi: MultiProgress,
    overall: ProgressBar,
    stories: BTreeMap<String, ProgressBar>,
}

pub(crate) struct Reporter {
    live: Option<Live>,
    verbose: bool,
}

impl Reporter {
    /// `live: false` (`--no-dashboard`) gives plain lines on a terminal too.
    pub(crate) fn new(verbose: bool, live: bool) -> Reporter {
        let tty = live && std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
        let live = tty.then(|| {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(4));
            let overall = multi.add(ProgressBar::new_spinner());
            overall.set_style(
                ProgressStyle::with_template("{spinner} {msg} · {elapsed}")
                    .expect("static template"),
            );
            overall.enable_steady_tick(Duration::from_millis(250));
            Live {
                multi,
                overall,
                stories: BTreeMap::new(),
            }
        });
        Reporter { live, verbose }
    }

    /// A plain event line (printed above the live display when there is one).
    pub(crate) fn line(&self, text: &str) {
        match &self.live {
            Some(l) => l.multi.suspend(|| err(text)),
            None => err(text),
        }
    }

    pub(crate) fn totals(&self, t: &Totals) {
        if let Some(l) = &self.live {
            l.overall.set_message(render_totals(t, None));
        }
    }

    pub(crate) fn story_started(&mut self, id: &str, title: &str) {
        if let Some(l) = &mut self.live {
            let bar = l.multi.add(ProgressBar::new_spinner());
            bar.set_style(
                ProgressStyle::with_template("  {prefix} {elapsed:>5}  {msg}")
                    .expect("static template"),
            );
            bar.set_prefix(render_story_prefix(id, title));
            bar.set_message("starting");
            bar.enable_steady_tick(Duration::from_secs(1));
            l.stories.insert(id.to_string(), bar);
        }
    }

    pub(crate) fn activity(&mut self, id: &str, text: &str) {
        if self.verbose && self.live.is_none() {
            self.line(&format!("  [{id}] {text}"));
        }
        if let Some(l) = &mut self.live {
            if self.verbose {
                l.multi.suspend(|| err(&format!("  [{id}] {text}")));
            }
            if let Some(bar) = l.stories.get(id) {
                bar.set_message(render_activity(text));
            }
        }
    }

    pub(crate) fn story_finished(&mut self, id: &str) {
        if let Some(l) = &mut self.live {
            if let Some(bar) = l.stories.remove(id) {
                bar.finish_and_clear();
                l.multi.remove(&bar);
            }
        }
    }

    pub(crate) fn finish(&mut self) {
        if let Some(l) = self.live.take() {
            for bar in l.stories.into_values() {
                bar.finish_and_clear();
            }
            l.overall.finish_and_clear();
        }
    }
}
