//! The terminal during a run: one plain line per event without a terminal
//! (or with `CI` set, `TERM=dumb`, `--no-dashboard`), a live indicatif
//! display with one. Every row of the live display fits the terminal's
//! width (`report::RowLayout`); event lines above it are wrapped to it.
//! The words come from `report`; colour and width from `ui`.
//!
//! A closed pipe never stops a run: `ralph run` keeps SIGPIPE ignored (it
//! writes prompts into agents' stdin, and a dead agent must be an EPIPE on
//! that write, not ralph's death mid-landing), so everything it prints goes
//! through `out` and `err`, which drop write errors instead of panicking as
//! `println!` does. Read-only commands die of SIGPIPE like any filter
//! (`cli::dispatch`). A reader that stops without closing (a stalled
//! terminal, a pager at a full screen) never stops a run either: its
//! output is queued and, past a bound, dropped (`sink`).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::report::{
    self, render_activity, render_candidate, render_candidate_prefix, render_landing_phase,
    render_race, render_running, render_story_prefix, render_totals_fit, Message, RowLayout,
    Totals,
};
use crate::state::CandidateRow;
use crate::ui::{self, Tone};

pub(crate) mod sink;
pub(crate) use sink::{drain, queue_from_now};

/// Where a story's row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// An agent works on it.
    Running,
    /// Its attempt ended; the next totals say whether it lands.
    Ended,
    /// In the merge queue: `Some(n)` with n stories ahead, `None` landing now.
    Landing(Option<usize>),
}

struct Row {
    bar: ProgressBar,
    title: String,
    /// The model the attempt runs on, when ralph chose one (issue 25).
    model: Option<String>,
    activity: String,
    /// The cluster node its attempt runs on, once known.
    node: Option<String>,
    phase: Phase,
    /// A racing story's candidates, each on a row of its own under it
    /// (best of N, issue 36).
    cands: Vec<CandLine>,
}

impl Row {
    fn new(bar: ProgressBar, title: &str, model: Option<&str>, phase: Phase) -> Row {
        Row {
            bar,
            title: title.to_string(),
            model: model.map(str::to_string),
            activity: String::new(),
            node: None,
            phase,
            cands: Vec::new(),
        }
    }

    /// Some candidate of its race still runs or waits to: the story is
    /// not through with its attempt, whatever its landing did.
    fn racing(&self) -> bool {
        self.cands
            .iter()
            .any(|c| matches!(c.row.state.as_str(), "running" | "waiting"))
    }

    /// Its bars gone from the display, its candidates' first.
    fn clear(self, multi: &MultiProgress) {
        for c in self.cands {
            c.bar.finish_and_clear();
            multi.remove(&c.bar);
        }
        self.bar.finish_and_clear();
        multi.remove(&self.bar);
    }
}

/// A racing candidate's row: who it is and where (`CandidateRow`, its
/// node as soon as `placed` says it), its latest activity.
struct CandLine {
    bar: ProgressBar,
    row: CandidateRow,
    activity: String,
}

/// `text` on stdout, as is; a closed or failing stdout is ignored. During
/// a run it is queued (`sink`): a reader that stops never stops the run.
pub(crate) fn out(text: &str) {
    if sink::queued() {
        sink::stdout().text(text.as_bytes());
        return;
    }
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes());
    let _ = o.flush();
}

/// `text` and a newline on stderr; a closed or failing stderr is ignored.
pub(crate) fn err(text: &str) {
    if sink::queued() {
        sink::stderr().text(format!("{text}\n").as_bytes());
        return;
    }
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

struct Live {
    multi: MultiProgress,
    /// Restores the terminal's `^C` echo when the display ends.
    _echo: EchoCtlOff,
    /// Made with the first totals, so no empty frame is ever drawn.
    overall: Option<ProgressBar>,
    /// Stories landed of the run's total, elapsed, ETA (under the totals).
    progress: Option<ProgressBar>,
    /// When the display began, and (done, total) then and now.
    started: std::time::Instant,
    done_at_start: Option<usize>,
    counts: (usize, usize),
    rows: BTreeMap<String, Row>,
    cols: usize,
    layout: RowLayout,
}

pub(crate) struct Reporter {
    live: Option<Live>,
    verbose: bool,
    quiet: bool,
    color: bool,
}

/// Columns assumed when the terminal does not say.
const DEFAULT_COLS: usize = 80;

impl Reporter {
    /// `live: false` (`--no-dashboard`) gives plain lines on a terminal too.
    pub(crate) fn new(verbose: bool, live: bool) -> Reporter {
        let ui = ui::get();
        let tty = live
            && !ui.quiet
            && std::io::stderr().is_terminal()
            && std::env::var_os("CI").is_none()
            && !ui::term_is_dumb();
        let live = tty.then(|| {
            let target = if sink::queued() {
                ProgressDrawTarget::term_like_with_hz(Box::<sink::QueuedTerm>::default(), 4)
            } else {
                ProgressDrawTarget::stderr_with_hz(4)
            };
            let cols = ui::stderr_width().unwrap_or(DEFAULT_COLS);
            Live::new(target, EchoCtlOff::new(), cols)
        });
        Reporter {
            live,
            verbose,
            quiet: ui.quiet,
            color: ui::stderr_colors(),
        }
    }

    /// A line about one of the run's events.
    pub(crate) fn say(&self, m: &Message) {
        // Quiet keeps errors only (the summary goes to stdout regardless).
        if self.quiet && !matches!(m, Message::SaveFailed { .. }) {
            return;
        }
        self.line(&report::render(m));
    }

    /// A plain event line (printed above the live display when there is
    /// one, wrapped to its width).
    pub(crate) fn line(&self, text: &str) {
        match &self.live {
            Some(l) => {
                // Continuation lines start under the text after the tag.
                let indent = if ui::tag_tone(text).is_some() { 7 } else { 2 };
                let max = l.cols.saturating_sub(report::RIGHT_MARGIN);
                let lines: Vec<String> = text
                    .lines()
                    .flat_map(|line| ui::wrap(line, max, indent))
                    .collect();
                l.multi.suspend(|| {
                    for (i, line) in lines.iter().enumerate() {
                        let shown = if i == 0 {
                            ui::paint_tag(line, self.color)
                        } else {
                            line.clone()
                        };
                        err(&shown);
                    }
                });
            }
            None => {
                err(&ui::paint_tag(text, self.color));
            }
        }
    }

    pub(crate) fn totals(&mut self, t: &Totals) {
        let color = self.color;
        let Some(l) = &mut self.live else {
            return;
        };
        l.refit_with("", "");
        // The merge queue: rows stay visible while their work lands.
        let mut queue: Vec<(&(String, String), Phase)> = Vec::new();
        for now in &t.landing_now {
            queue.push((now, Phase::Landing(None)));
        }
        for (i, q) in t.land_queue.iter().enumerate() {
            queue.push((q, Phase::Landing(Some(i))));
        }
        for ((id, title), phase) in queue {
            if !l.rows.contains_key(id) {
                let bar = l.add_bar(id, title);
                l.rows.insert(id.clone(), Row::new(bar, title, None, phase));
            }
            if let Some(row) = l.rows.get_mut(id) {
                row.phase = phase;
            }
        }
        let in_queue = |id: &str| {
            t.landing_now.iter().any(|(i, _)| i == id) || t.land_queue.iter().any(|(i, _)| i == id)
        };
        // A race whose candidate's landing failed runs on.
        for (id, r) in l.rows.iter_mut() {
            if r.racing() && !in_queue(id) {
                r.phase = Phase::Running;
            }
        }
        let gone: Vec<String> = l
            .rows
            .iter()
            .filter(|(id, r)| match r.phase {
                Phase::Running => false,
                Phase::Ended | Phase::Landing(_) => !in_queue(id),
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            if let Some(row) = l.rows.remove(&id) {
                row.clear(&l.multi);
            }
        }
        for row in l.rows.values() {
            row.bar.set_message(l.row_message(row, color));
        }
        l.counts = (t.done, t.total);
        let before = *l.done_at_start.get_or_insert(t.done);
        match &l.progress {
            Some(bar) => {
                bar.set_length(t.total as u64);
                bar.set_position(t.done as u64);
            }
            None => {
                let bar = l.multi.insert(0, ProgressBar::new(t.total as u64));
                bar.set_style(
                    ProgressStyle::with_template("  {bar:24} {msg}")
                        .expect("static template")
                        .progress_chars("█▌ "),
                );
                bar.set_position(t.done as u64);
                l.progress = Some(bar);
            }
        }
        l.refresh_progress(before);
        let totals = render_totals_fit(t, l.cols.saturating_sub(report::RIGHT_MARGIN + 10));
        match &l.overall {
            Some(bar) => bar.set_message(totals),
            None => {
                // Inserted above any rows made before it.
                let bar = l.multi.insert(0, ProgressBar::new_spinner());
                bar.set_style(
                    ProgressStyle::with_template("{spinner} {msg} · {elapsed}")
                        .expect("static template"),
                );
                bar.set_message(totals);
                bar.enable_steady_tick(Duration::from_millis(250));
                l.overall = Some(bar);
            }
        }
    }

    pub(crate) fn story_started(&mut self, id: &str, title: &str, model: Option<&str>) {
        if let Some(l) = &mut self.live {
            if let Some(old) = l.rows.remove(id) {
                old.clear(&l.multi);
            }
            let bar = l.add_bar(id, title);
            let row = Row::new(bar, title, model, Phase::Running);
            row.bar
                .set_message(ui::truncate(&running_text(&row), l.layout.activity));
            l.rows.insert(id.to_string(), row);
        }
    }

    /// What a running story's agent (or racing `candidate`'s) does now.
    pub(crate) fn activity(&mut self, id: &str, candidate: Option<u32>, text: &str) {
        if self.quiet {
            return;
        }
        if self.verbose {
            let shown = crate::paths::relative_to_worktree(text);
            self.line(&format!("  [{}] {shown}", who_says(id, candidate)));
        }
        let color = self.color;
        if let Some(l) = &mut self.live {
            if let Some(before) = l.done_at_start {
                l.refresh_progress(before);
            }
            if let Some(k) = candidate {
                l.update_candidate(id, k, color, |c| c.activity = render_activity(text));
            } else if let Some(row) = l.rows.get_mut(id) {
                row.activity = render_activity(text);
                let msg = l.row_message(&l.rows[id], color);
                l.rows[id].bar.set_message(msg);
            }
        }
    }

    /// Where a running story's attempt (or racing `candidate`) runs (a
    /// cluster node).
    pub(crate) fn placed(&mut self, id: &str, candidate: Option<u32>, node: &str) {
        if self.quiet {
            return;
        }
        if self.verbose {
            self.line(&format!("  [{}] on node {node}", who_says(id, candidate)));
        }
        let color = self.color;
        if let Some(l) = &mut self.live {
            if let Some(k) = candidate {
                l.update_candidate(id, k, color, |c| c.row.node = Some(node.to_string()));
            } else if let Some(row) = l.rows.get_mut(id) {
                row.node = Some(node.to_string());
                let msg = l.row_message(&l.rows[id], color);
                l.rows[id].bar.set_message(msg);
            }
        }
    }

    /// A racing story's candidates as they are now (best of N, issue 36):
    /// a row each under the story's, kept in step; none once the race is
    /// over, when only a winner's row stays, saying so, until the story's
    /// own goes (it landed, or its landing failed). Plain output has a
    /// line per candidate's start and end instead (`Message`).
    pub(crate) fn candidates(&mut self, id: &str, rows: &[CandidateRow]) {
        let color = self.color;
        if let Some(l) = &mut self.live {
            l.set_candidates(id, rows, color);
        }
    }

    pub(crate) fn story_finished(&mut self, id: &str) {
        if let Some(l) = &mut self.live {
            if let Some(row) = l.rows.get_mut(id) {
                // Kept until the totals that follow say whether it lands.
                row.phase = Phase::Ended;
            }
        }
    }

    pub(crate) fn finish(&mut self) {
        if let Some(l) = self.live.take() {
            for row in l.rows.into_values() {
                for c in row.cands {
                    c.bar.finish_and_clear();
                }
                row.bar.finish_and_clear();
            }
            if let Some(o) = l.overall {
                o.finish_and_clear();
            }
            if let Some(p) = l.progress {
                p.finish_and_clear();
            }
            let _ = l.multi.clear();
        }
    }
}

impl Live {
    fn new(target: ProgressDrawTarget, echo: EchoCtlOff, cols: usize) -> Live {
        Live {
            multi: MultiProgress::with_draw_target(target),
            _echo: echo,
            overall: None,
            progress: None,
            started: std::time::Instant::now(),
            done_at_start: None,
            counts: (0, 0),
            rows: BTreeMap::new(),
            cols,
            layout: RowLayout::new(cols, 0, 0),
        }
    }

    /// The progress line's words, fitted to what the bar leaves of a row.
    fn refresh_progress(&self, done_at_start: usize) {
        if let Some(bar) = &self.progress {
            let (done, total) = self.counts;
            let secs = self.started.elapsed().as_secs_f64();
            let line = report::render_progress(done_at_start, done, total, secs);
            let room = self.cols.saturating_sub(report::RIGHT_MARGIN + 2 + 24 + 1);
            bar.set_message(ui::truncate(&line, room));
        }
    }

    fn add_bar(&mut self, id: &str, title: &str) -> ProgressBar {
        let bar = row_bar(self.multi.add(ProgressBar::new_spinner()));
        self.refit_with(id, title);
        bar.set_prefix(render_story_prefix(id, title, self.layout));
        bar
    }

    /// Story `id`'s candidate rows made to match `rows` (`Reporter::candidates`).
    fn set_candidates(&mut self, id: &str, rows: &[CandidateRow], color: bool) {
        let Some(row) = self.rows.get_mut(id) else {
            return;
        };
        if rows.is_empty() {
            let (won, gone): (Vec<CandLine>, Vec<CandLine>) =
                row.cands.drain(..).partition(|c| c.row.state == "won");
            for c in gone {
                c.bar.finish_and_clear();
                self.multi.remove(&c.bar);
            }
            row.cands = won;
        }
        for r in rows {
            match row.cands.iter_mut().find(|c| c.row.k == r.k) {
                Some(c) => {
                    // Its time is its run's, not its wait's.
                    if c.row.state == "waiting" && r.state == "running" {
                        c.bar.reset_elapsed();
                    }
                    let node = c.row.node.take();
                    c.row = r.clone();
                    // `placed` may have said it before the state did.
                    c.row.node = c.row.node.take().or(node);
                }
                None => {
                    let under = row.cands.last().map_or(&row.bar, |c| &c.bar);
                    let bar = row_bar(self.multi.insert_after(under, ProgressBar::new_spinner()));
                    row.cands.push(CandLine {
                        bar,
                        row: r.clone(),
                        activity: String::new(),
                    });
                }
            }
        }
        let (id2, title) = (id.to_string(), row.title.clone());
        self.refit_with(&id2, &title);
        self.redraw_story(id, color);
    }

    /// Racing candidate `k` of story `id` changed by `change`, redrawn.
    fn update_candidate(
        &mut self,
        id: &str,
        k: u32,
        color: bool,
        change: impl FnOnce(&mut CandLine),
    ) {
        let Some(c) = self
            .rows
            .get_mut(id)
            .and_then(|r| r.cands.iter_mut().find(|c| c.row.k == k))
        else {
            return;
        };
        change(c);
        self.redraw_story(id, color);
    }

    /// Story `id`'s row and its candidates' rows drawn again.
    fn redraw_story(&self, id: &str, color: bool) {
        let Some(row) = self.rows.get(id) else {
            return;
        };
        row.bar.set_message(self.row_message(row, color));
        for c in &row.cands {
            c.bar
                .set_prefix(render_candidate_prefix(c.row.k, &c.row.who(), self.layout));
            c.bar
                .set_message(candidate_message(c, self.layout.activity, color));
        }
    }

    /// A new ID or title may need more room, a resized terminal less:
    /// every row is laid out again when the layout changes.
    fn refit_with(&mut self, id: &str, title: &str) {
        let cols = ui::stderr_width().unwrap_or(self.cols);
        let longest_id = self
            .rows
            .keys()
            .map(|k| ui::width(k))
            .chain([ui::width(id)])
            .max()
            .unwrap_or(0);
        let longest_title = self
            .rows
            .values()
            .flat_map(|r| {
                let whos = r.cands.iter().map(|c| ui::width(&c.row.who()));
                whos.chain([ui::width(&r.title)])
            })
            .chain([ui::width(title)])
            .max()
            .unwrap_or(0);
        let layout = RowLayout::new(cols, longest_id, longest_title);
        if layout != self.layout || cols != self.cols {
            self.cols = cols;
            self.layout = layout;
            for (rid, row) in &self.rows {
                row.bar
                    .set_prefix(render_story_prefix(rid, &row.title, layout));
                for c in &row.cands {
                    c.bar
                        .set_prefix(render_candidate_prefix(c.row.k, &c.row.who(), layout));
                }
            }
        }
    }

    /// The text after a row's elapsed time, fitted to the layout.
    fn row_message(&self, row: &Row, color: bool) -> String {
        let max = self.layout.activity;
        match row.phase {
            Phase::Running | Phase::Ended => ui::truncate(&running_text(row), max),
            Phase::Landing(pos) => {
                let text = ui::truncate(&render_landing_phase(pos), max);
                ui::paint(&text, Tone::Busy, color)
            }
        }
    }
}

/// A running row's text after its elapsed time: the model ralph chose for
/// the attempt (issue 25: which rung of the ladder runs it), the cluster
/// node it runs on once known (issue 23), then the agent's latest activity.
/// A racing story's says how many of its candidates are where; each of
/// those has its own row.
fn running_text(row: &Row) -> String {
    if !row.cands.is_empty() {
        let states: Vec<&str> = row.cands.iter().map(|c| c.row.state.as_str()).collect();
        return row_text(row.model.as_deref(), None, &render_race(&states));
    }
    row_text(row.model.as_deref(), row.node.as_deref(), &row.activity)
}

/// A story row's bar (`{prefix} {elapsed}  {msg}`), ticking.
fn row_bar(bar: ProgressBar) -> ProgressBar {
    bar.set_style(
        ProgressStyle::with_template("{prefix} {elapsed:>5}  {msg}").expect("static template"),
    );
    bar.enable_steady_tick(Duration::from_secs(1));
    bar
}

/// A candidate row's text after its elapsed time, fitted to `max` and
/// coloured by where it is.
fn candidate_message(c: &CandLine, max: usize, color: bool) -> String {
    let text = render_candidate(&c.row.state, c.row.node.as_deref(), &c.activity);
    let text = ui::truncate(&text, max);
    match candidate_tone(&c.row.state) {
        Some(tone) => ui::paint(&text, tone, color),
        None => text,
    }
}

fn candidate_tone(state: &str) -> Option<Tone> {
    match state {
        "won" | "passed" => Some(Tone::Good),
        "failed" => Some(Tone::Bad),
        "stopped" | "waiting" => Some(Tone::Dim),
        "validating" | "done" => Some(Tone::Busy),
        _ => None,
    }
}

/// Who a `-v` activity line is of: the story, or its racing candidate.
fn who_says(id: &str, candidate: Option<u32>) -> String {
    match candidate {
        Some(k) => format!("{id} c{k}"),
        None => id.to_string(),
    }
}

fn row_text(model: Option<&str>, node: Option<&str>, activity: &str) -> String {
    let rest = render_running(node, activity);
    match (model, node) {
        (Some(m), Some(_)) => format!("{m} {rest}"),
        (Some(m), None) => format!("{m} · {rest}"),
        (None, _) => rest,
    }
}

/// `text` (whole lines) for stdout: on a terminal wrapped to its width
/// and its tags coloured as `--color` says; piped, as it is.
pub(crate) fn for_stdout(text: &str) -> String {
    let color = ui::stdout_colors();
    let cols = std::io::stdout()
        .is_terminal()
        .then(|| ui::terminal_width(libc::STDOUT_FILENO))
        .flatten();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let lines = match cols {
            Some(c) => ui::wrap(line, c.saturating_sub(1), 2),
            None => vec![line.to_string()],
        };
        for (i, l) in lines.iter().enumerate() {
            if i == 0 {
                out.push_str(&ui::paint_tag(l, color));
            } else {
                out.push_str(l);
            }
            out.push('\n');
        }
    }
    out
}

/// The terminal echoes Ctrl-C as `^C` where the cursor is: after the last
/// row of the display, which indicatif pads to the full width, so the echo
/// wraps onto a new line, the display loses count of its lines and leaves
/// a frozen copy of itself above the stop message. While the display is
/// drawn the terminal's ECHOCTL is off (Ctrl-C then echoes nothing); it is
/// turned back on when the display ends, however the run ends short of
/// SIGKILL.
struct EchoCtlOff {
    turned_off: bool,
}

impl EchoCtlOff {
    fn new() -> EchoCtlOff {
        let fd = libc::STDERR_FILENO;
        // SAFETY: plain termios calls on our own stderr with a struct we own.
        let turned_off = unsafe {
            // A background job changing the terminal would be stopped (SIGTTOU).
            if libc::tcgetpgrp(fd) != libc::getpgrp() {
                return EchoCtlOff { turned_off: false };
            }
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &mut t) != 0 || t.c_lflag & libc::ECHOCTL == 0 {
                return EchoCtlOff { turned_off: false };
            }
            t.c_lflag &= !libc::ECHOCTL;
            libc::tcsetattr(fd, libc::TCSANOW, &t) == 0
        };
        EchoCtlOff { turned_off }
    }
}

impl Drop for EchoCtlOff {
    fn drop(&mut self) {
        if !self.turned_off {
            return;
        }
        let fd = libc::STDERR_FILENO;
        // SAFETY: as in `new`; only the one flag ralph cleared is set again.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &mut t) == 0 {
                t.c_lflag |= libc::ECHOCTL;
                libc::tcsetattr(fd, libc::TCSANOW, &t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reporter whose live display draws nowhere: its rows as data.
    fn hidden() -> Reporter {
        Reporter {
            live: Some(Live::new(
                ProgressDrawTarget::hidden(),
                EchoCtlOff { turned_off: false },
                80,
            )),
            verbose: false,
            quiet: false,
            color: false,
        }
    }

    fn cand(k: u32, model: &str, state: &str) -> CandidateRow {
        CandidateRow {
            k,
            agent: "claude".into(),
            model: Some(model.into()),
            state: state.into(),
            node: None,
        }
    }

    /// Each candidate row's prefix and text, under story `id`'s own text.
    fn shown(r: &Reporter, id: &str) -> (String, Vec<(String, String)>) {
        let row = &r.live.as_ref().unwrap().rows[id];
        let cands = row
            .cands
            .iter()
            .map(|c| (c.bar.prefix().trim().to_string(), c.bar.message()))
            .collect();
        (row.bar.message(), cands)
    }

    /// Story 1.1 racing with candidates `rows`.
    fn racing(rows: &[CandidateRow]) -> Reporter {
        let mut r = hidden();
        r.story_started("1.1", "Hard", Some("best of 2"));
        r.candidates("1.1", rows);
        r
    }

    #[test]
    fn a_racing_story_has_a_row_per_candidate_until_its_race_ends() {
        let mut r = racing(&[cand(1, "slow", "running"), cand(2, "fast", "waiting")]);
        r.activity("1.1", Some(1), "Bash: cat src/a.rs");
        r.placed("1.1", Some(2), "w2/0");
        let (story, cands) = shown(&r, "1.1");
        assert_eq!(story, "best of 2 · 1 running, 1 waiting");
        assert_eq!(
            cands,
            [
                (
                    "└1 claude:slow".into(),
                    "running · Bash: cat src/a.rs".into()
                ),
                ("└2 claude:fast".into(), "waiting for a slot".into()),
            ]
        );
        r.candidates(
            "1.1",
            &[cand(1, "slow", "running"), cand(2, "fast", "running")],
        );
        r.activity("1.1", Some(2), "Edit src/b.rs");
        assert_eq!(shown(&r, "1.1").1[1].1, "running on w2/0 · Edit src/b.rs");
        // The race is decided, then over: the winner's row stays, saying
        // so, until the story's own goes.
        r.candidates("1.1", &[cand(1, "slow", "stopped"), cand(2, "fast", "won")]);
        assert_eq!(shown(&r, "1.1").0, "best of 2 · 1 won, 1 stopped");
        r.candidates("1.1", &[]);
        assert_eq!(
            shown(&r, "1.1").1,
            [("└2 claude:fast".to_string(), "won".to_string())]
        );
        r.story_finished("1.1");
        r.totals(&Totals::default());
        assert!(r.live.as_ref().unwrap().rows.is_empty());
    }

    #[test]
    fn a_race_whose_landing_failed_keeps_its_row_while_candidates_run() {
        let mut r = racing(&[cand(1, "a", "validating"), cand(2, "b", "running")]);
        let queued = Totals {
            landing_now: vec![("1.1".into(), "Hard".into())],
            ..Totals::default()
        };
        r.totals(&queued);
        // Its candidate's landing failed; the other runs on.
        r.candidates("1.1", &[cand(1, "a", "failed"), cand(2, "b", "running")]);
        r.totals(&Totals::default());
        let (story, cands) = shown(&r, "1.1");
        assert_eq!(story, "best of 2 · 1 running, 1 failed");
        assert_eq!(cands.len(), 2);
        // A new race of the story starts with rows of its own.
        r.story_started("1.1", "Hard", Some("best of 2"));
        assert!(shown(&r, "1.1").1.is_empty());
    }

    #[test]
    fn a_candidates_activity_line_names_it() {
        assert_eq!(who_says("1.1", Some(2)), "1.1 c2");
        assert_eq!(who_says("1.1", None), "1.1");
        assert_eq!(candidate_tone("won"), Some(Tone::Good));
        assert_eq!(candidate_tone("failed"), Some(Tone::Bad));
        assert_eq!(candidate_tone("running"), None);
    }

    #[test]
    fn a_running_row_names_the_model_before_the_activity() {
        assert_eq!(row_text(Some("haiku"), None, ""), "haiku · starting");
        assert_eq!(
            row_text(Some("opus"), None, "cat src/a.rs"),
            "opus · cat src/a.rs"
        );
        assert_eq!(row_text(None, None, ""), "starting");
        assert_eq!(row_text(None, None, "cat src/a.rs"), "cat src/a.rs");
        assert_eq!(
            row_text(Some("haiku"), Some("w2/0"), "cat src/a.rs"),
            "haiku on w2/0 · cat src/a.rs"
        );
        assert_eq!(row_text(None, Some("w2/0"), ""), "on w2/0");
    }
}
