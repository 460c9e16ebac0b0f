//! Output that never blocks the run (issue 35). A terminal stopped with
//! Ctrl-S, an SSH link that hangs, a `less` at a full screen: each stops
//! reading, and a `write(2)` to it waits for as long as it is not read.
//! Written from the dispatcher's thread, that wait froze the merge queue,
//! the agents' result handling and the signal handling with it (four runs
//! were once found stuck for two hours in the kernel's tty write).
//!
//! So during a run every byte for stdout or stderr goes into a bounded
//! queue that a writer thread of its own empties. When the reader is slow
//! and the queue is full, a line is dropped rather than waited for, and
//! the first line written after the gap says how many were (`[… 1,204
//! lines not shown]`); the technical log and the attempt logs keep
//! everything. The live display's frames go through the same queue, whole
//! or not at all, so the screen is never left with half a frame.
//!
//! Other commands write straight through (`Mode::Direct`): a `ralph graph |
//! head` should wait for its reader like any filter.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How many bytes may wait for a slow reader before lines are dropped: a
/// few screens of a busy run, small next to what ralph's memory may hold.
const CAP: usize = 1 << 20;

/// What one queued item is.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    Bytes(Vec<u8>),
    /// Lines dropped here because the queue was full.
    Dropped(u64),
}

/// The queue's state, shared by the writers and the writer thread.
#[derive(Debug, Default)]
struct Queue {
    items: VecDeque<Item>,
    /// Bytes held in `items`.
    bytes: usize,
    /// The writer thread holds an item it has not finished writing.
    busy: bool,
    /// The last time the writer thread finished an item.
    progress: Option<Instant>,
    /// The stream failed (a closed pipe): whatever comes is discarded.
    broken: bool,
    /// Lines were dropped and the reader has not caught up since.
    dropping: bool,
    started: bool,
}

impl Queue {
    /// Queues `bytes` (holding `lines` lines) unless that would pass `cap`;
    /// `whole_or_nothing` items (display frames) are dropped without a
    /// count, since the next frame redraws what they showed.
    fn push(&mut self, bytes: Vec<u8>, lines: u64, cap: usize, whole_or_nothing: bool) -> bool {
        if self.broken {
            return false;
        }
        // Once lines were dropped, only half the room is offered until the
        // reader catches up, so a slow reader sees a few long gaps rather
        // than every other line.
        let room = if self.dropping { cap / 2 } else { cap };
        if self.bytes + bytes.len() > room {
            if !whole_or_nothing {
                self.dropping = true;
                match self.items.back_mut() {
                    Some(Item::Dropped(n)) => *n += lines.max(1),
                    _ => self.items.push_back(Item::Dropped(lines.max(1))),
                }
            }
            return false;
        }
        self.bytes += bytes.len();
        self.items.push_back(Item::Bytes(bytes));
        self.dropping = false;
        true
    }

    fn pop(&mut self) -> Option<Vec<u8>> {
        let item = self.items.pop_front()?;
        Some(match item {
            Item::Bytes(b) => {
                self.bytes -= b.len();
                b
            }
            Item::Dropped(n) => format!("[… {} not shown]\n", lines(n)).into_bytes(),
        })
    }

    fn idle(&self) -> bool {
        self.items.is_empty() && !self.busy
    }
}

/// "1 line", "1,204 lines".
fn lines(n: u64) -> String {
    let digits = n.to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{grouped} line{}", if n == 1 { "" } else { "s" })
}

/// One output stream (stdout or stderr) and its queue.
pub(crate) struct Sink {
    fd: libc::c_int,
    queue: Mutex<Queue>,
    /// The writer thread waits here for work.
    work: Condvar,
    /// `drain` waits here for the queue to empty.
    done: Condvar,
}

/// Whether `out`/`err` queue (a run) or write straight through.
static QUEUED: OnceLock<()> = OnceLock::new();

/// From now on this process's output goes through the queues (`ralph run`
/// and `decompose`, which run agents). Cannot be undone: the run is the
/// process's last work.
pub(crate) fn queue_from_now() {
    let _ = QUEUED.set(());
}

/// The terminal hung up (SIGHUP): nothing more is written to it, and
/// nothing waits for what was queued. The run's technical log and attempt
/// logs keep everything.
pub(crate) fn hang_up() {
    queue_from_now();
    for s in [stdout(), stderr()] {
        let mut q = s.lock();
        q.broken = true;
        q.items.clear();
        q.bytes = 0;
        s.done.notify_all();
    }
}

pub(crate) fn queued() -> bool {
    QUEUED.get().is_some()
}

/// stdout's queue. When stdout and stderr reach the same file (a terminal,
/// one pipe, `&> log`) they share stderr's queue and writer: two writers
/// would each keep their own order but not the order between them, and the
/// live display's last frame (stderr) clears the lines above the cursor, so
/// a summary (stdout) written before it was partly erased and the frame
/// left standing above it.
pub(crate) fn stdout() -> &'static Sink {
    static OWN: OnceLock<Sink> = OnceLock::new();
    static SHARED: OnceLock<bool> = OnceLock::new();
    if *SHARED.get_or_init(|| same_file(libc::STDOUT_FILENO, libc::STDERR_FILENO)) {
        return stderr();
    }
    OWN.get_or_init(|| Sink::new(libc::STDOUT_FILENO))
}

/// Whether two descriptors are open on the same file (device and inode);
/// false when either cannot be read.
fn same_file(a: libc::c_int, b: libc::c_int) -> bool {
    let stat = |fd| {
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: fstat fills the struct it is given, which is read only
        // when it says it did.
        (unsafe { libc::fstat(fd, st.as_mut_ptr()) } == 0)
            .then(|| unsafe { st.assume_init() })
            .map(|st| (st.st_dev, st.st_ino))
    };
    matches!((stat(a), stat(b)), (Some(x), Some(y)) if x == y)
}

pub(crate) fn stderr() -> &'static Sink {
    static S: OnceLock<Sink> = OnceLock::new();
    S.get_or_init(|| Sink::new(libc::STDERR_FILENO))
}

/// Waits until both queues are written out, or until neither writer has
/// finished anything for `stall` (a reader that stopped for good): the
/// process may then end without its last lines, never hang on them.
pub(crate) fn drain(stall: Duration) {
    if !queued() {
        return;
    }
    stderr().drain(stall);
    stdout().drain(stall);
}

impl Sink {
    fn new(fd: libc::c_int) -> Sink {
        Sink {
            fd,
            queue: Mutex::new(Queue::default()),
            work: Condvar::new(),
            done: Condvar::new(),
        }
    }

    /// Text (whole lines) to be written; dropped and counted when the
    /// reader is too far behind.
    pub(crate) fn text(&'static self, text: &[u8]) {
        let lines = text.iter().filter(|&&b| b == b'\n').count() as u64;
        self.push(text.to_vec(), lines, false);
    }

    /// A display frame: written whole, or dropped whole.
    pub(crate) fn frame(&'static self, frame: Vec<u8>) {
        self.push(frame, 0, true);
    }

    fn push(&'static self, bytes: Vec<u8>, lines: u64, whole: bool) {
        if bytes.is_empty() {
            return;
        }
        let mut q = self.lock();
        if !q.started {
            q.started = true;
            q.progress = Some(Instant::now());
            let spawned = std::thread::Builder::new()
                .name("ralph-output".into())
                .spawn(move || self.write_loop());
            if spawned.is_err() {
                // No thread to be had: the stream is written directly.
                q.started = false;
                drop(q);
                let _ = write_all(self.fd, &bytes);
                return;
            }
        }
        if q.push(bytes, lines, CAP, whole) {
            self.work.notify_one();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        // A writer that panicked left plain data behind: use it.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn write_loop(&self) {
        loop {
            let bytes = {
                let mut q = self.lock();
                loop {
                    if let Some(b) = q.pop() {
                        q.busy = true;
                        break b;
                    }
                    q = self.work.wait(q).unwrap_or_else(|p| p.into_inner());
                }
            };
            let ok = write_all(self.fd, &bytes).is_ok();
            let mut q = self.lock();
            q.busy = false;
            q.progress = Some(Instant::now());
            if !ok {
                q.broken = true;
                q.items.clear();
                q.bytes = 0;
            }
            self.done.notify_all();
        }
    }

    fn drain(&self, stall: Duration) {
        let mut q = self.lock();
        while !q.idle() {
            let since = q.progress.unwrap_or_else(Instant::now);
            let Some(left) = stall.checked_sub(since.elapsed()) else {
                return;
            };
            q = self
                .done
                .wait_timeout(q, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// `write(2)` until all of `bytes` is out; an error other than EINTR ends it.
fn write_all(fd: libc::c_int, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: writes from a live slice to a descriptor the process owns.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

/// The live display's terminal: indicatif draws a frame through these
/// calls and ends it with `flush`, which hands the frame to the stderr
/// queue whole. The escape sequences are the ones indicatif's own terminal
/// writes.
#[derive(Debug, Default)]
pub(crate) struct QueuedTerm {
    frame: Mutex<Vec<u8>>,
}

impl QueuedTerm {
    fn add(&self, bytes: &[u8]) {
        self.frame
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(bytes);
    }
}

impl indicatif::TermLike for QueuedTerm {
    fn width(&self) -> u16 {
        crate::ui::stderr_width()
            .and_then(|w| u16::try_from(w).ok())
            .unwrap_or(80)
    }

    fn height(&self) -> u16 {
        crate::ui::terminal_height(libc::STDERR_FILENO)
            .and_then(|h| u16::try_from(h).ok())
            .unwrap_or(24)
    }

    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            self.add(format!("\x1b[{n}A").as_bytes());
        }
        Ok(())
    }

    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            self.add(format!("\x1b[{n}B").as_bytes());
        }
        Ok(())
    }

    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            self.add(format!("\x1b[{n}C").as_bytes());
        }
        Ok(())
    }

    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            self.add(format!("\x1b[{n}D").as_bytes());
        }
        Ok(())
    }

    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.add(s.as_bytes());
        self.add(b"\n");
        Ok(())
    }

    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.add(s.as_bytes());
        Ok(())
    }

    fn clear_line(&self) -> std::io::Result<()> {
        self.add(b"\r\x1b[2K");
        Ok(())
    }

    fn flush(&self) -> std::io::Result<()> {
        let frame = std::mem::take(&mut *self.frame.lock().unwrap_or_else(|p| p.into_inner()));
        stderr().frame(frame);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(q: &mut Queue) -> String {
        let mut s = String::new();
        while let Some(b) = q.pop() {
            s.push_str(&String::from_utf8(b).unwrap());
        }
        s
    }

    #[test]
    fn a_full_queue_drops_lines_and_says_how_many_where_they_were() {
        let mut q = Queue::default();
        assert!(q.push(b"one\n".to_vec(), 1, 10, false));
        assert!(!q.push(b"two and more\n".to_vec(), 1, 10, false));
        assert!(!q.push(b"3\n4\n".to_vec(), 2, 10, false));
        assert_eq!(q.pop().unwrap(), b"one\n");
        // Room again: the gap is said before what follows it.
        assert!(q.push(b"five\n".to_vec(), 1, 10, false));
        assert_eq!(text(&mut q), "[… 3 lines not shown]\nfive\n");
        assert_eq!(q.bytes, 0);
    }

    #[test]
    fn a_frame_that_does_not_fit_is_dropped_whole_and_not_counted() {
        let mut q = Queue::default();
        assert!(q.push(b"12345678".to_vec(), 0, 10, true));
        assert!(!q.push(b"abc".to_vec(), 0, 10, true));
        assert_eq!(text(&mut q), "12345678");
    }

    #[test]
    fn a_broken_stream_takes_nothing_more() {
        let mut q = Queue {
            broken: true,
            ..Queue::default()
        };
        assert!(!q.push(b"x\n".to_vec(), 1, 10, false));
        assert!(q.items.is_empty());
    }

    #[test]
    fn descriptors_on_one_pipe_are_the_same_file_and_two_pipes_are_not() {
        let pipe = || {
            let mut fds = [0; 2];
            // SAFETY: pipe fills the two descriptors it is given.
            assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
            fds
        };
        let (one, two) = (pipe(), pipe());
        // SAFETY: dup of a descriptor this test owns.
        let copy = unsafe { libc::dup(one[1]) };
        assert!(same_file(one[1], copy));
        assert!(!same_file(one[1], two[1]));
        assert!(!same_file(one[1], -1));
        for fd in one.into_iter().chain(two).chain([copy]) {
            // SAFETY: closes descriptors this test opened.
            unsafe { libc::close(fd) };
        }
    }

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(lines(1), "1 line");
        assert_eq!(lines(1204), "1,204 lines");
        assert_eq!(lines(1_000_000), "1,000,000 lines");
    }
}
