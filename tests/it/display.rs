//! The live display under a real pseudo-terminal 80 columns wide: no row
//! ever wraps, Ctrl-C (typed, so the terminal echoes it) leaves no frozen
//! frame, and TERM=dumb / NO_COLOR give plain output. The bytes ralph
//! writes are replayed on a small terminal model (cursor moves, line
//! clears, autowrap) to see the screen a person would see.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use unicode_width::UnicodeWidthChar;

use crate::harness::*;

const COLS: u16 = 80;
const ROWS: u16 = 60;

/// ralph running on the slave side of a pty; everything it writes (stdout
/// and stderr both) collects in `out`.
struct PtyRun {
    child: Child,
    master: std::fs::File,
    out: Arc<Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl PtyRun {
    fn start(cmd: Command) -> PtyRun {
        PtyRun::start_reading(cmd, true)
    }

    /// `read: false` leaves the terminal unread, as a stalled SSH link or a
    /// Ctrl-S does: once its buffer is full, every write to it waits.
    fn start_reading(mut cmd: Command, read: bool) -> PtyRun {
        let (mut master, mut slave) = (0, 0);
        let ws = libc::winsize {
            ws_row: ROWS,
            ws_col: COLS,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: openpty fills the two descriptors it returns.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &ws,
            )
        };
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        // The master stays in the test alone: a ralph (or its agents) that
        // inherited it would keep the terminal from ever hanging up.
        // SAFETY: setting a flag on a descriptor this function owns.
        unsafe {
            libc::fcntl(master, libc::F_SETFD, libc::FD_CLOEXEC);
        }
        // SAFETY: fresh descriptors owned from here on.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave.try_clone().unwrap()));
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                // A session of its own with the pty as controlling terminal:
                // a typed Ctrl-C reaches ralph as it would in a shell.
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("ralph starts");
        // The reader sees EOF (EIO) once no process holds the slave.
        drop(slave);
        let master = std::fs::File::from(master);
        let mut reading = master.try_clone().unwrap();
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = out.clone();
        let reader = std::thread::spawn(move || {
            if !read {
                return;
            }
            let mut buf = [0u8; 4096];
            while let Ok(n) = reading.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        PtyRun {
            child,
            master,
            out,
            reader: Some(reader),
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    fn wait_for(&self, what: &str) {
        wait_until(what, Duration::from_secs(120), || {
            self.text().contains(what)
        });
    }

    /// Types `bytes` on the terminal.
    fn type_keys(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).unwrap();
    }

    fn echoctl(&self) -> bool {
        // SAFETY: tcgetattr on the master reads the pty's settings.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        assert_eq!(
            unsafe { libc::tcgetattr(self.master.as_raw_fd(), &mut t) },
            0
        );
        t.c_lflag & libc::ECHOCTL != 0
    }

    /// Waits (bounded) for ralph to exit and the output to end.
    fn finish(&mut self) -> (i32, Vec<u8>) {
        let code = wait_for_exit(&mut self.child, "ralph to exit", Duration::from_secs(300))
            .code()
            .unwrap_or(-1);
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        (code, self.out.lock().unwrap().clone())
    }
}

/// What a VT100-like terminal `cols` wide shows after `bytes`: the lines
/// (trailing blanks trimmed) and how often a printed character wrapped
/// onto a new line.
struct Screen {
    lines: Vec<Vec<char>>,
    wraps: usize,
}

fn replay(bytes: &[u8], cols: usize) -> Screen {
    let text = String::from_utf8_lossy(bytes);
    let mut lines: Vec<Vec<char>> = vec![Vec::new()];
    let (mut r, mut c, mut pending) = (0usize, 0usize, false);
    let mut wraps = 0;
    let mut chars = text.chars().peekable();
    let ensure = |lines: &mut Vec<Vec<char>>, r: usize| {
        while lines.len() <= r {
            lines.push(Vec::new());
        }
    };
    while let Some(ch) = chars.next() {
        match ch {
            '\r' => {
                c = 0;
                pending = false;
            }
            '\n' => {
                r += 1;
                pending = false;
                ensure(&mut lines, r);
            }
            '\x08' => c = c.saturating_sub(1),
            '\x1b' => {
                if chars.peek() != Some(&'[') {
                    chars.next();
                    continue;
                }
                chars.next();
                let mut params = String::new();
                let mut fin = ' ';
                for p in chars.by_ref() {
                    if ('@'..='~').contains(&p) {
                        fin = p;
                        break;
                    }
                    params.push(p);
                }
                let n: usize = params.trim_start_matches('?').parse().unwrap_or(0);
                pending = false;
                match fin {
                    'A' => r = r.saturating_sub(n.max(1)),
                    'B' => {
                        r += n.max(1);
                        ensure(&mut lines, r);
                    }
                    'C' => c = (c + n.max(1)).min(cols - 1),
                    'D' => c = c.saturating_sub(n.max(1)),
                    'G' => c = n.max(1) - 1,
                    'K' => match n {
                        2 => lines[r].clear(),
                        1 => lines[r].iter_mut().take(c + 1).for_each(|x| *x = ' '),
                        _ => lines[r].truncate(c),
                    },
                    'J' if n == 0 => {
                        lines[r].truncate(c);
                        lines.truncate(r + 1);
                    }
                    _ => {}
                }
            }
            ch if ch.is_control() => {}
            ch => {
                let w = ch.width().unwrap_or(0);
                if pending || c + w > cols {
                    // A line padded with spaces up to the last column (how
                    // indicatif ends its rows) continues on the next line
                    // without any text of it wrapping; text that reaches
                    // the last column and goes on does wrap.
                    let padded = pending && lines[r].get(cols - 1) == Some(&' ');
                    if !padded {
                        wraps += 1;
                    }
                    r += 1;
                    c = 0;
                    pending = false;
                    ensure(&mut lines, r);
                }
                let line = &mut lines[r];
                while line.len() < c + w {
                    line.push(' ');
                }
                line[c] = ch;
                c += w;
                if c >= cols {
                    c = cols - 1;
                    pending = true;
                }
            }
        }
    }
    let lines = lines
        .into_iter()
        .map(|l| {
            let s: String = l.into_iter().collect();
            s.trim_end().chars().collect()
        })
        .collect();
    Screen { lines, wraps }
}

impl Screen {
    fn text(&self) -> String {
        self.lines
            .iter()
            .map(|l| l.iter().collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Every line of `bytes` with escape sequences removed, split at line
/// feeds and carriage returns (what `script`'s typescript would show).
fn stripped_lines(bytes: &[u8]) -> Vec<String> {
    let re = regex::Regex::new(r"\x1b\[[0-9;?]*[@-~]|\x1b\][^\x07]*\x07").unwrap();
    let text = String::from_utf8_lossy(bytes);
    re.replace_all(&text, "")
        .split(['\n', '\r'])
        .map(str::to_string)
        .collect()
}

/// Three stories with long titles run at once; each agent calls a tool
/// with a long absolute path inside its worktree, then waits for the
/// test to let it go (a file), so the display has rows to draw. Landing
/// waits for another file, so the merge queue's rows can be seen.
fn busy_project() -> Project {
    let long = "A story title far longer than any row of an eighty column terminal can hold";
    let p = Project::with_backlog(
        &format!("# [batch:1]\n1.1 | {long} one\n1.2 | {long} two\n1.3 | Ünïcödé 日本語のタイトル {long}\n"),
        r#"{"loop": {"max_retries": 1, "grace_seconds": 1}, "parallel": {"enabled": true, "max_concurrent": 3},
            "validation": {"commands": [{"name": "gate", "cmd": "while [ ! -e \"$SCRATCH/landed-ok\" ]; do sleep 0.05; done"}]}}"#,
    );
    p.commit_all("backlog");
    p.agent(
        r#"tool "cat $PWD/src/some/deeply/nested/directory/with/a/long/name/file-$ID.rs && echo a great deal of text, more than one row of the display can show"
touch "$SCRATCH/started-$ID"
while [ ! -e "$SCRATCH/go" ]; do sleep 0.05; done
commit_file "src/$ID.txt"
done_"#,
    );
    p
}

/// `ralph run` on a `busy_project` under the pseudo-terminal, once its
/// three agents have started.
fn busy_run(p: &Project) -> PtyRun {
    let run = PtyRun::start(live_command(p, &["run"]));
    for id in ["1.1", "1.2", "1.3"] {
        wait_until("the agents", Duration::from_secs(120), || {
            p.scratch.join(format!("started-{id}")).exists()
        });
    }
    run
}

fn live_command(p: &Project, args: &[&str]) -> Command {
    let mut c = p.command(args);
    c.env_remove("CI")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env("TERM", "xterm-256color");
    c
}

#[test]
fn the_live_display_fits_80_columns() {
    let p = busy_project();
    let mut run = busy_run(&p);
    // The tool call reached the rows, relative to the worktree.
    run.wait_for("cat src/some/");
    // The progress line (issue 24): landed of the total, elapsed, ETA.
    run.wait_for("0/3 landed · ");
    run.wait_for(" elapsed · ETA –");
    std::fs::write(p.scratch.join("go"), "").unwrap();
    // Finished work stays on the display while it lands.
    run.wait_for("landing: merging and validating");
    run.wait_for("waiting to land (next)");
    // The totals count it apart from the running stories.
    run.wait_for(" landing · ");
    std::fs::write(p.scratch.join("landed-ok"), "").unwrap();
    let (code, bytes) = run.finish();
    let screen = replay(&bytes, COLS as usize);
    assert_eq!(code, 0, "{}", screen.text());
    // Every row fits: no text reaches past the last column (rows padded to
    // it with spaces continue on the next line, as a terminal shows them).
    assert_eq!(screen.wraps, 0, "a row wrapped:\n{}", screen.text());
    // No empty first frame: the totals line is never drawn without totals.
    let empty = regex::Regex::new(r"^\S\s+· \d+s$").unwrap();
    assert!(
        !stripped_lines(&bytes)
            .iter()
            .any(|l| empty.is_match(l.trim_end())),
        "an empty frame was drawn"
    );
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        !text.contains(".ralph/worktrees/"),
        "absolute worktree paths shown"
    );
    assert!(
        text.contains("\x1b[32m[done]\x1b[0m"),
        "[done] is green on a terminal"
    );
    // The final screen: event lines and the summary, no display left over.
    let shown = screen.text();
    assert!(shown.contains("ALL STORIES COMPLETE"), "{shown}");
    assert!(
        !shown.contains(" running · "),
        "the display was not cleared:\n{shown}"
    );
    // In the order written: stdout's summary after stderr's event lines.
    let rows: Vec<&str> = shown.lines().collect();
    let last_done = rows.iter().rposition(|l| l.starts_with("[done]"));
    let summary = rows.iter().position(|l| l.starts_with("RUN SUMMARY"));
    assert!(last_done.is_some() && summary.is_some(), "{shown}");
    assert!(
        last_done < summary,
        "the summary overtook event lines:\n{shown}"
    );
    assert_eq!(p.completed(), vec!["1.1", "1.2", "1.3"]);
}

/// Each running attempt's row names the model ralph chose for it, before
/// the agent's latest activity (issue 25).
#[test]
fn a_running_row_names_its_attempts_model() {
    let p = Project::with_backlog(
        "1.1 | Parser\n",
        r#"{"loop": {"max_retries": 1, "grace_seconds": 1}, "agent": {"model": "haiku"}}"#,
    );
    p.commit_all("backlog");
    p.agent(
        r#"tool "cat src/parser.rs"
touch "$SCRATCH/started-$ID"
while [ ! -e "$SCRATCH/go" ]; do sleep 0.05; done
commit_file "src/$ID.txt"
done_"#,
    );
    let mut run = PtyRun::start(live_command(&p, &["run"]));
    wait_until("the agent", Duration::from_secs(120), || {
        p.scratch.join("started-1.1").exists()
    });
    run.wait_for("haiku · Bash: cat src/parser.rs");
    std::fs::write(p.scratch.join("go"), "").unwrap();
    let (code, bytes) = run.finish();
    let screen = replay(&bytes, COLS as usize);
    assert_eq!(code, 0, "{}", screen.text());
    assert_eq!(screen.wraps, 0, "a row wrapped:\n{}", screen.text());
}

#[test]
fn a_typed_ctrl_c_leaves_no_frozen_frame() {
    let p = busy_project();
    let mut run = busy_run(&p);
    run.wait_for("cat src/some/");
    assert!(
        !run.echoctl(),
        "the display turns the ^C echo off while it is drawn"
    );
    run.type_keys(b"\x03");
    run.wait_for("interrupt received");
    let code = {
        // The agents end at the stop; the release is for a slow one.
        std::fs::write(p.scratch.join("go"), "").unwrap();
        run.finish().0
    };
    assert_eq!(code, 130);
    let bytes = run.out.lock().unwrap().clone();
    let screen = replay(&bytes, COLS as usize);
    let shown = screen.text();
    assert!(shown.contains("interrupt received"), "{shown}");
    assert!(
        !shown.contains(" running · ") && !shown.contains("cat src/some"),
        "a frame of the display was left on the screen:\n{shown}"
    );
    assert_eq!(screen.wraps, 0, "{shown}");
    assert!(
        run.echoctl(),
        "the terminal's ^C echo is back after the run"
    );
}

#[test]
fn term_dumb_and_no_color_give_plain_output_on_a_terminal() {
    let p = busy_project();
    std::fs::write(p.scratch.join("go"), "").unwrap();
    std::fs::write(p.scratch.join("landed-ok"), "").unwrap();
    let mut dumb = live_command(&p, &["run", "-n", "1"]);
    dumb.env("TERM", "dumb");
    let mut run = PtyRun::start(dumb);
    let (code, bytes) = run.finish();
    let text = String::from_utf8_lossy(&bytes);
    assert_eq!(code, 0, "{text}");
    assert!(
        !text.contains('\x1b'),
        "TERM=dumb: no escape at all: {text:?}"
    );
    assert!(text.contains("[done] 1.1"), "{text}");

    let mut no_color = live_command(&p, &["run", "-n", "1"]);
    no_color.env("NO_COLOR", "1");
    let mut run = PtyRun::start(no_color);
    let (code, bytes) = run.finish();
    let text = String::from_utf8_lossy(&bytes);
    assert_eq!(code, 0, "{text}");
    // The live display may move the cursor, but nothing is coloured.
    let sgr = regex::Regex::new(r"\x1b\[[0-9;]*m").unwrap();
    assert!(!sgr.is_match(&text), "NO_COLOR: no colour: {text:?}");
    assert!(text.contains("[done] 1.2"), "{text}");

    let mut plain = live_command(&p, &["stories"]);
    plain.env("NO_COLOR", "1");
    let (_, bytes) = PtyRun::start(plain).finish();
    assert!(
        !bytes.contains(&0x1b),
        "{:?}",
        String::from_utf8_lossy(&bytes)
    );
    let (_, bytes) = PtyRun::start(live_command(&p, &["stories"])).finish();
    assert!(
        String::from_utf8_lossy(&bytes).contains("\x1b[32m[done]\x1b[0m"),
        "a terminal gets colour by default"
    );
}

/// Agents that each write about 1 MB of text (which `-v` shows line by
/// line), then wait for `$SCRATCH/go` when `gated`, then commit and finish.
fn chatty_project(stories: usize, gated: bool) -> Project {
    let queue: String = (1..=stories)
        .map(|i| format!("1.{i} | Story {i}\n"))
        .collect();
    let p = Project::with_backlog(
        &format!("# [batch:1]\n{queue}"),
        r#"{"loop": {"max_retries": 1, "grace_seconds": 1}, "parallel": {"enabled": true, "max_concurrent": 4}}"#,
    );
    p.commit_all("backlog");
    let gate = if gated {
        r#"while [ ! -e "$SCRATCH/go" ]; do sleep 0.05; done"#
    } else {
        ""
    };
    p.agent(&format!(
        r#"awk 'BEGIN {{ pad = sprintf("%200s", ""); for (i = 0; i < 5000; i++) printf "{{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"type\":\"text\",\"text\":\"line %d%s\"}}]}}}}\n", i, pad }}'
touch "$SCRATCH/started-$ID"
{gate}
commit_file "src/$ID.txt"
done_"#
    ));
    p
}

/// A pipe nobody reads (`ralph run -v | less` at a full screen): once its
/// buffer is full every write to it waits. The run's output is queued
/// and, past a bound, dropped, so the stories land all the same (before,
/// 0 of 12 landed: the dispatcher waited in its first write).
#[test]
fn a_pipe_nobody_reads_does_not_stop_the_run() {
    let p = chatty_project(12, false);
    let mut cmd = p.command(&["run", "--parallel", "-j", "4", "-v"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("ralph starts");
    // The pipes stay open and unread until ralph has exited.
    let (_out, _err) = (child.stdout.take(), child.stderr.take());
    let status = wait_for_exit(
        &mut child,
        "ralph to land everything",
        Duration::from_secs(300),
    );
    assert_eq!(status.code(), Some(0));
    assert_eq!(p.completed().len(), 12);
    for i in 1..=12 {
        assert_eq!(p.merges_of(&format!("1.{i}")), 1, "story 1.{i}");
    }
}

/// A terminal that is not read (Ctrl-S, a hung SSH link): SIGTERM still
/// stops the run, keeping the agents' work, and the next run finishes it.
/// Before, the dispatcher sat in the kernel's tty write and never saw the
/// signal.
#[test]
fn sigterm_ends_a_run_whose_terminal_is_not_read() {
    let p = chatty_project(4, true);
    let mut run = PtyRun::start_reading(
        live_command(&p, &["run", "--parallel", "-j", "4", "-v"]),
        false,
    );
    for i in 1..=4 {
        wait_until("the agents", Duration::from_secs(120), || {
            p.scratch.join(format!("started-1.{i}")).exists()
        });
    }
    // SAFETY: a signal to the child this test started.
    unsafe {
        libc::kill(run.child.id() as i32, libc::SIGTERM);
    }
    let status = wait_for_exit(&mut run.child, "ralph to stop", Duration::from_secs(60));
    assert_eq!(status.code(), Some(130));
    drop(run);
    std::fs::write(p.scratch.join("go"), "").unwrap();
    let again = p.ralph(&["run", "--parallel", "-j", "4"]);
    assert_eq!(again.code, 0, "{}", again.all());
    assert_eq!(p.completed().len(), 4);
}

/// The SSH link drops (the terminal hangs up, SIGHUP): the run goes on to
/// the end with its output to the log only. Before, a hang-up stopped it
/// like Ctrl-C. `--hup stop` keeps that for those who want it.
#[test]
fn a_hang_up_leaves_the_run_going() {
    let p = chatty_project(4, true);
    // Unread, so that no reader holds the master open: dropping it below
    // hangs the terminal up for real.
    let run = PtyRun::start_reading(live_command(&p, &["run", "--parallel", "-j", "4"]), false);
    for i in 1..=4 {
        wait_until("the agents", Duration::from_secs(120), || {
            p.scratch.join(format!("started-1.{i}")).exists()
        });
    }
    // Closing the terminal's master side hangs it up.
    let PtyRun {
        mut child, master, ..
    } = run;
    drop(master);
    wait_until("the hang-up noted", Duration::from_secs(60), || {
        std::fs::read_to_string(p.root.join("ralph.log")).is_ok_and(|l| l.contains("SIGHUP"))
    });
    std::fs::write(p.scratch.join("go"), "").unwrap();
    let status = wait_for_exit(&mut child, "ralph to finish", Duration::from_secs(300));
    assert_eq!(status.code(), Some(0));
    assert_eq!(p.completed().len(), 4);
}

/// Issue 35: a second Ctrl-C means "stop now" even while the terminal is
/// not read (its writes would stall) and the agents ignore SIGTERM: the
/// first Ctrl-C waits out their grace (600 s here), the second kills them
/// and ralph exits, well inside that grace.
#[test]
fn a_second_ctrl_c_on_a_terminal_that_is_not_read_ends_the_run_at_once() {
    let p = Project::with_backlog(
        "# [batch:1]\n1.1 | A\n1.2 | B\n",
        r#"{"loop": {"max_retries": 1, "grace_seconds": 600}, "parallel": {"enabled": true, "max_concurrent": 2}}"#,
    );
    p.commit_all("backlog");
    p.agent(
        r#"trap 'touch "$SCRATCH/got-term-$ID"' TERM
echo $$ >> "$SCRATCH/pids"
awk 'BEGIN { pad = sprintf("%200s", ""); for (i = 0; i < 5000; i++) printf "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"line %d%s\"}]}}\n", i, pad }'
touch "$SCRATCH/started-$ID"
while true; do sleep 0.05; done"#,
    );
    let mut run = PtyRun::start_reading(
        live_command(&p, &["run", "--parallel", "-j", "2", "-v"]),
        false,
    );
    for id in ["1.1", "1.2"] {
        wait_until("the agents", Duration::from_secs(120), || {
            p.scratch.join(format!("started-{id}")).exists()
        });
    }
    let pid = run.child.id() as i32;
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(pid, libc::SIGINT) };
    wait_until(
        "SIGTERM reaching the agents",
        Duration::from_secs(60),
        || p.scratch.join("got-term-1.1").exists() && p.scratch.join("got-term-1.2").exists(),
    );
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGINT) };
    // Far less than the 600 s grace: only the second Ctrl-C can end it.
    let status = wait_for_exit(&mut run.child, "ralph to exit", Duration::from_secs(60));
    assert_eq!(status.code(), Some(130));
    drop(run);
    for agent in pids_in(&p.scratch.join("pids")) {
        assert!(!alive(agent), "agent {agent} survived");
    }
}

/// Story 1.1 raced by two candidates: "slow" works until it is stopped,
/// "fast" finishes once `$SCRATCH/go` is there.
fn racing_project() -> Project {
    let p = Project::with_backlog(
        "1.1 | Hard\n",
        r#"{"loop": {"max_retries": 1, "grace_seconds": 1},
            "attempts": {"best_of": 2, "candidates": ["claude:slow", "claude:fast"]}}"#,
    );
    p.commit_all("backlog");
    p.agent(&format!(
        r#"{MODEL_AS_M}
tool "cat src/$M.rs"
case "$M" in
slow) commit_file "src/slow.txt"; while :; do sleep 0.05; done ;;
fast) while [ ! -e "$SCRATCH/go" ]; do sleep 0.05; done; commit_file "src/fast.txt"; done_ ;;
esac"#
    ));
    p
}

/// What a race says line by line, on a terminal or not.
const RACE_LINES: [&str; 4] = [
    "[race] 1.1 candidate 1 of 2 (claude:slow) started",
    "[race] 1.1 candidate 2 of 2 (claude:fast) started",
    "[race] 1.1 candidate 2 of 2 (claude:fast): won",
    "[race] 1.1 candidate 1 of 2 (claude:slow): stopped",
];

/// Best of N (issue 36): a racing story is one story with a row per
/// candidate under it (which it is, who it runs as, where it is, its
/// latest activity), gone with the race; event lines say each
/// candidate's start and end.
#[test]
fn a_racing_story_shows_a_row_per_candidate() {
    let p = racing_project();
    let mut run = PtyRun::start(live_command(&p, &["run", "-j", "2"]));
    run.wait_for("best of 2 · 2 running");
    run.wait_for("└1 claude:slow");
    run.wait_for("└2 claude:fast");
    run.wait_for("running · Bash: cat src/slow.rs");
    run.wait_for("running · Bash: cat src/fast.rs");
    std::fs::write(p.scratch.join("go"), "").unwrap();
    let (code, bytes) = run.finish();
    let screen = replay(&bytes, COLS as usize);
    let shown = screen.text();
    assert_eq!(code, 0, "{shown}");
    assert_eq!(screen.wraps, 0, "a row wrapped:\n{shown}");
    assert_eq!(p.completed(), ["1.1"]);
    for line in RACE_LINES {
        assert!(shown.contains(line), "{line}:\n{shown}");
    }
    assert!(!shown.contains('└'), "a candidate's row was left:\n{shown}");
}

/// Without a terminal a race is its lines: each candidate's start and end.
#[test]
fn plain_output_has_a_line_per_candidates_start_and_end() {
    let p = racing_project();
    std::fs::write(p.scratch.join("go"), "").unwrap();
    let r = p.ralph(&["run", "-j", "2"]);
    assert_eq!(r.code, 0, "{}", r.all());
    let lines: Vec<&str> = r.stderr.lines().collect();
    for line in RACE_LINES {
        assert_eq!(
            lines.iter().filter(|l| **l == line).count(),
            1,
            "{line}:\n{}",
            r.stderr
        );
    }
    assert!(!r.all().contains('└'), "{}", r.all());
}
