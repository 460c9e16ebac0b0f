//! How output looks: colour (`--color`, `NO_COLOR`, `CLICOLOR_FORCE`,
//! `TERM=dumb`), quiet (`-q`), the terminal's width, and fitting text to a
//! width in display columns. `cli::main` sets the choices once; `display`
//! and the command handlers read them. The text functions are pure.

use std::io::IsTerminal;
use std::sync::OnceLock;

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum ColorChoice {
    /// Colour on a terminal, unless NO_COLOR is set or TERM is dumb
    #[default]
    Auto,
    /// Colour even when piped
    Always,
    /// No colour
    Never,
}

/// The global output choices of this invocation.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ui {
    pub(crate) color: ColorChoice,
    /// `-q`: only errors and the final summary.
    pub(crate) quiet: bool,
}

static UI: OnceLock<Ui> = OnceLock::new();

/// Records the choices; the first call wins (tests never call it).
pub(crate) fn init(ui: Ui) {
    let _ = UI.set(ui);
}

pub(crate) fn get() -> Ui {
    UI.get().copied().unwrap_or_default()
}

/// The environment variables that bear on colour, as read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ColorEnv {
    /// `NO_COLOR` set and not empty (no-color.org).
    pub(crate) no_color: bool,
    /// `CLICOLOR_FORCE` set and not `0`.
    pub(crate) force: bool,
    /// `TERM=dumb`: a terminal that understands no escape sequences.
    pub(crate) dumb: bool,
}

impl ColorEnv {
    pub(crate) fn read() -> ColorEnv {
        let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
        ColorEnv {
            no_color: set("NO_COLOR"),
            force: set("CLICOLOR_FORCE") && std::env::var_os("CLICOLOR_FORCE").unwrap() != "0",
            dumb: term_is_dumb(),
        }
    }
}

pub(crate) fn term_is_dumb() -> bool {
    std::env::var_os("TERM").is_some_and(|t| t == "dumb")
}

/// Whether to colour a stream: an explicit `--color` wins; otherwise a
/// terminal (or `CLICOLOR_FORCE`) gets colour unless `NO_COLOR` or a dumb
/// terminal says no.
pub(crate) fn colors_for(choice: ColorChoice, is_tty: bool, env: ColorEnv) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => !env.no_color && !env.dumb && (is_tty || env.force),
    }
}

pub(crate) fn stderr_colors() -> bool {
    colors_for(
        get().color,
        std::io::stderr().is_terminal(),
        ColorEnv::read(),
    )
}

pub(crate) fn stdout_colors() -> bool {
    colors_for(
        get().color,
        std::io::stdout().is_terminal(),
        ColorEnv::read(),
    )
}

/// What a piece of text means, hence its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tone {
    /// Landed, complete.
    Good,
    /// Failed, an error.
    Bad,
    /// Waiting, conflicting, stopped: attention but not failure.
    Warn,
    /// Working (running, landing).
    Busy,
    /// Secondary information.
    Dim,
    Bold,
}

/// `text` wrapped in the SGR codes of `tone` when `on`.
pub(crate) fn paint(text: &str, tone: Tone, on: bool) -> String {
    if !on || text.is_empty() {
        return text.to_string();
    }
    let code = match tone {
        Tone::Good => "32",
        Tone::Bad => "31;1",
        Tone::Warn => "33",
        Tone::Busy => "36",
        Tone::Dim => "2",
        Tone::Bold => "1",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// The tone of a line by its leading status tag (`[done]`, `[fail]`,
/// `graph`'s `[failed]`...)
/// or prefix (`error:`, `warning:`, `hint:`), and how long that tag is.
/// Colour is decoration only: nothing is decided on it.
pub(crate) fn tag_tone(line: &str) -> Option<(usize, Tone)> {
    const TAGS: &[(&str, Tone)] = &[
        ("[done]", Tone::Good),
        ("[OK]", Tone::Good),
        ("ALL STORIES COMPLETE", Tone::Good),
        ("[fail]", Tone::Bad),
        ("[failed]", Tone::Bad),
        ("[FAIL]", Tone::Bad),
        ("error:", Tone::Bad),
        ("[conf]", Tone::Warn),
        ("[wait]", Tone::Warn),
        ("[stop]", Tone::Warn),
        ("[steer]", Tone::Warn),
        ("[blkd]", Tone::Warn),
        ("[blocked]", Tone::Warn),
        ("[revw]", Tone::Warn),
        ("[review]", Tone::Warn),
        ("[pr  ]", Tone::Warn),
        ("[split]", Tone::Warn),
        ("warning:", Tone::Warn),
        ("[run ]", Tone::Busy),
        ("[land]", Tone::Busy),
        ("[race]", Tone::Busy),
        ("[running]", Tone::Busy),
        ("[landing]", Tone::Busy),
        ("hint:", Tone::Dim),
    ];
    TAGS.iter()
        .find(|(t, _)| line.starts_with(t))
        .map(|(t, tone)| (t.len(), *tone))
}

/// `line` with its leading tag coloured (the rest as it is).
pub(crate) fn paint_tag(line: &str, on: bool) -> String {
    match tag_tone(line) {
        Some((n, tone)) if on => format!("{}{}", paint(&line[..n], tone, true), &line[n..]),
        _ => line.to_string(),
    }
}

/// Columns of stderr's terminal, when it is one and says.
pub(crate) fn stderr_width() -> Option<usize> {
    terminal_width(libc::STDERR_FILENO)
}

/// Rows of the terminal `fd` is, when it is one and says.
pub(crate) fn terminal_height(fd: libc::c_int) -> Option<usize> {
    // SAFETY: TIOCGWINSZ only writes a `winsize` into the struct we own.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_row > 0).then_some(ws.ws_row as usize)
}

/// Columns of the terminal `fd` is, when it is one and says (else
/// `COLUMNS`).
pub(crate) fn terminal_width(fd: libc::c_int) -> Option<usize> {
    // SAFETY: TIOCGWINSZ only writes a `winsize` into the struct we own.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_col > 0 {
        return Some(ws.ws_col as usize);
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse().ok())
        .filter(|&c: &usize| c > 0)
}

/// Display columns of `s` (wide characters count two; no escapes expected).
pub(crate) fn width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// `s` cut to at most `max` columns, an ellipsis marking the cut.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if width(s) <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > max - 1 {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// `s` cut or padded with spaces to exactly `cols` columns.
pub(crate) fn fit(s: &str, cols: usize) -> String {
    let mut out = truncate(s, cols);
    let w = width(&out);
    out.extend(std::iter::repeat_n(' ', cols.saturating_sub(w)));
    out
}

/// `s` word-wrapped to `max` columns; continuation lines start with
/// `indent` spaces. A word longer than a line is broken; runs of spaces
/// become one.
pub(crate) fn wrap(s: &str, max: usize, indent: usize) -> Vec<String> {
    let max = max.max(indent + 8);
    if width(s) <= max {
        return vec![s.to_string()];
    }
    let pad = " ".repeat(indent);
    let mut lines = Vec::new();
    let mut cur = String::new();
    let mut cur_w = 0;
    // Nothing but the indent on the current line yet.
    let mut fresh = true;
    for word in s.split_whitespace() {
        if !fresh && cur_w + 1 + width(word) > max {
            lines.push(std::mem::replace(&mut cur, pad.clone()));
            cur_w = indent;
            fresh = true;
        }
        if !fresh {
            cur.push(' ');
            cur_w += 1;
        }
        for c in word.chars() {
            let w = c.width().unwrap_or(0);
            if cur_w + w > max {
                lines.push(std::mem::replace(&mut cur, pad.clone()));
                cur_w = indent;
            }
            cur.push(c);
            cur_w += w;
        }
        fresh = false;
    }
    if !fresh {
        lines.push(cur);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn color_follows_the_conventions() {
        let plain = ColorEnv::default();
        let no_color = ColorEnv {
            no_color: true,
            ..plain
        };
        let dumb = ColorEnv {
            dumb: true,
            ..plain
        };
        let force = ColorEnv {
            force: true,
            ..plain
        };
        use ColorChoice::*;
        assert!(colors_for(Auto, true, plain));
        assert!(!colors_for(Auto, false, plain));
        assert!(!colors_for(Auto, true, no_color));
        assert!(!colors_for(Auto, true, dumb));
        assert!(colors_for(Auto, false, force));
        assert!(!colors_for(
            Auto,
            false,
            ColorEnv {
                no_color: true,
                ..force
            }
        ));
        assert!(colors_for(Always, false, no_color));
        assert!(!colors_for(Never, true, plain));
    }

    #[test]
    fn tags_are_painted_and_only_them() {
        assert_eq!(
            paint_tag("[fail] 1.1 attempt 1/3: x", true),
            "\x1b[31;1m[fail]\x1b[0m 1.1 attempt 1/3: x"
        );
        assert_eq!(paint_tag("[done] 1.1", false), "[done] 1.1");
        assert_eq!(paint_tag("ralph: 3 stories", true), "ralph: 3 stories");
    }

    #[test]
    fn fitting_counts_columns_not_bytes() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
        assert_eq!(width(&truncate("日本語のテキスト", 7)), 7);
        assert_eq!(truncate("日本語のテキスト", 7), "日本語…");
        assert_eq!(fit("ab", 4), "ab  ");
        assert_eq!(fit("日本語", 5), "日本…");
    }

    #[test]
    fn wrapping_keeps_every_line_within_the_width() {
        let s = "[fail] 2.3 attempt 1/3: Exit code 1: tests failed (log: .ralph/logs/2.3/attempt-1.log); its commits are kept at refs/ralph/attempts/2.3/1";
        let lines = wrap(s, 40, 7);
        assert!(lines.iter().all(|l| width(l) <= 40), "{lines:#?}");
        assert!(
            lines[1..].iter().all(|l| l.starts_with("       ")),
            "{lines:#?}"
        );
        let words: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
        assert_eq!(words.join(" "), s);
        let long = "x".repeat(100);
        assert!(wrap(&long, 30, 2).iter().all(|l| width(l) <= 30));
        assert_eq!(wrap("short", 30, 2), vec!["short"]);
    }
}
