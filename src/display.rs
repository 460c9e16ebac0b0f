//! The terminal during a run: one plain line per event without a terminal
//! (or with `CI` set), a live indicatif display with one. The words come
//! from `report`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::report::{render_activity, render_story_prefix, render_totals, Totals};

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
            Some(l) => l.multi.suspend(|| eprintln!("{text}")),
            None => {
                let mut e = std::io::stderr().lock();
                let _ = writeln!(e, "{text}");
            }
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
                l.multi.suspend(|| eprintln!("  [{id}] {text}"));
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
