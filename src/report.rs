//! What the user sees during a run. Rendering of each event is a pure
//! function; `Reporter` decides where it goes: one plain line per event
//! without a terminal (or with `CI` set), a live indicatif display with one.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::signals::Usage;
use crate::timefmt::human_duration;

/// Totals shown on the overall line.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    pub done: usize,
    pub total: usize,
    pub running: usize,
    pub failed: usize,
    pub blocked: usize,
    pub usage: Usage,
    pub cost_usd: f64,
}

pub fn tokens(u: &Usage) -> u64 {
    u.input_tokens + u.output_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
}

fn short_count(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 1_000 {
        format!("{:.1}k", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

/// `3/8 done · 2 running · 1 failed · 0 blocked · 4m10s · 12.3k tokens · $0.42`
pub fn render_totals(t: &Totals, elapsed: Duration) -> String {
    format!(
        "{}/{} done · {} running · {} failed · {} blocked · {} · {} tokens · ${:.2}",
        t.done,
        t.total,
        t.running,
        t.failed,
        t.blocked,
        human_duration(elapsed.as_secs_f64()),
        short_count(tokens(&t.usage)),
        t.cost_usd
    )
}

/// One line per running story: `1.2  Seed data  1m02s  Bash: npm test`.
pub fn render_story_line(id: &str, title: &str, elapsed: Duration, activity: &str) -> String {
    let title: String = title.chars().take(40).collect();
    let activity: String = activity.chars().take(70).collect();
    format!(
        "{id:<8} {title:<40} {:>6}  {activity}",
        human_duration(elapsed.as_secs_f64())
    )
}

struct Live {
    multi: MultiProgress,
    overall: ProgressBar,
    stories: BTreeMap<String, (ProgressBar, String, Instant)>,
}

pub struct Reporter {
    live: Option<Live>,
    started: Instant,
    verbose: bool,
}

impl Reporter {
    pub fn new(verbose: bool) -> Reporter {
        let tty = std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
        let live = tty.then(|| {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(4));
            let overall = multi.add(ProgressBar::new_spinner());
            overall.set_style(
                ProgressStyle::with_template("{spinner} {msg}").expect("static template"),
            );
            overall.enable_steady_tick(Duration::from_millis(250));
            Live {
                multi,
                overall,
                stories: BTreeMap::new(),
            }
        });
        Reporter {
            live,
            started: Instant::now(),
            verbose,
        }
    }

    /// A plain event line (printed above the live display when there is one).
    pub fn line(&self, text: &str) {
        match &self.live {
            Some(l) => l.multi.suspend(|| eprintln!("{text}")),
            None => {
                let mut e = std::io::stderr().lock();
                let _ = writeln!(e, "{text}");
            }
        }
    }

    pub fn totals(&self, t: &Totals) {
        if let Some(l) = &self.live {
            l.overall
                .set_message(render_totals(t, self.started.elapsed()));
        }
    }

    pub fn story_started(&mut self, id: &str, title: &str) {
        if let Some(l) = &mut self.live {
            let bar = l.multi.add(ProgressBar::new_spinner());
            bar.set_style(ProgressStyle::with_template("  {msg}").expect("static template"));
            bar.set_message(render_story_line(id, title, Duration::ZERO, "starting"));
            l.stories
                .insert(id.to_string(), (bar, title.to_string(), Instant::now()));
        }
    }

    pub fn activity(&mut self, id: &str, text: &str) {
        if self.verbose && self.live.is_none() {
            self.line(&format!("  [{id}] {text}"));
        }
        if let Some(l) = &mut self.live {
            if self.verbose {
                l.multi.suspend(|| eprintln!("  [{id}] {text}"));
            }
            if let Some((bar, title, start)) = l.stories.get(id) {
                bar.set_message(render_story_line(id, title, start.elapsed(), text));
            }
        }
    }

    pub fn story_finished(&mut self, id: &str) {
        if let Some(l) = &mut self.live {
            if let Some((bar, _, _)) = l.stories.remove(id) {
                bar.finish_and_clear();
                l.multi.remove(&bar);
            }
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    pub fn finish(&mut self) {
        if let Some(l) = self.live.take() {
            for (_, (bar, _, _)) in l.stories {
                bar.finish_and_clear();
            }
            l.overall.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_line() {
        let t = Totals {
            done: 3,
            total: 8,
            running: 2,
            failed: 1,
            blocked: 0,
            usage: Usage {
                input_tokens: 12_000,
                output_tokens: 300,
                ..Usage::default()
            },
            cost_usd: 0.421,
        };
        assert_eq!(
            render_totals(&t, Duration::from_secs(250)),
            "3/8 done · 2 running · 1 failed · 0 blocked · 4m10s · 12.3k tokens · $0.42"
        );
    }
}
