//! Run records: `.ralph/runs/<run-id>.jsonl`, one JSON line per event of a
//! run (start, attempts, landings, conflicts, pauses, the end), written as
//! the events happen so a killed run keeps what it had.
//!
//! Owns the record types, the writer (one `write(2)` per line on an
//! append-only file, the directory kept under `runs.max_mb` by deleting the
//! oldest runs), the reader (tolerant: a torn or unknown line is skipped)
//! and the recovery of a killed run's file. Deciding nothing about a run:
//! the transition decides and emits them (`Action::Record`, built by
//! `run/record.rs`).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::agent::event::Usage;
use crate::state::{AttemptKind, Outcome};

use crate::paths::runs_dir;

/// One line of a run's file: when, and what.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Record {
    /// Unix time in seconds, to the millisecond.
    pub(crate) t: f64,
    #[serde(flatten)]
    pub(crate) ev: Ev,
}

/// Why new work waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PauseWhy {
    /// An agent's usage limit (until its reset).
    UsageLimit,
    /// A transient fault outside the story (backoff).
    Fault,
    /// The budget is spent: nothing new starts this run.
    Budget,
}

impl PauseWhy {
    pub(crate) fn name(self) -> &'static str {
        match self {
            PauseWhy::UsageLimit => "usage_limit",
            PauseWhy::Fault => "fault",
            PauseWhy::Budget => "budget",
        }
    }
}

/// The events of a run. Fields are added with `#[serde(default)]`; an
/// event this ralph does not know (a newer one wrote it) reads as `Unknown`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub(crate) enum Ev {
    RunStart {
        run: String,
        version: String,
        /// The command line after `ralph`.
        args: Vec<String>,
        jobs: usize,
        agent: String,
        target: String,
        /// The target's tip when the run started.
        commit: Option<String>,
        /// Stories the run selected (`-s`/`-r` narrow it), and the backlog's.
        selected: usize,
        stories: usize,
        pid: u32,
        /// The killed run whose file this run closed, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resumes: Option<String>,
    },
    AttemptStart {
        story: String,
        attempt: u32,
        slot: usize,
        agent: String,
        kind: AttemptKind,
        /// The model it runs on, when ralph chose one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The story's `estimation` at the time.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        est: Option<String>,
    },
    /// A racing candidate of an attempt started (best of N, issue 36).
    CandidateStart {
        story: String,
        attempt: u32,
        candidate: u32,
        slot: usize,
        agent: String,
        model: Option<String>,
    },
    /// A racing candidate's end: its outcome (`CandState::word`), its
    /// spend (its CLI's, else unknown: never a made-up $0) and whether its
    /// work landed.
    CandidateEnd {
        story: String,
        attempt: u32,
        candidate: u32,
        agent: String,
        model: Option<String>,
        outcome: String,
        winner: bool,
        cost_usd: f64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cost_unknown: bool,
    },
    /// A racing candidate's state changed between its start and its end
    /// (`CandState::word`: `done`, `validating`, `passed`, `stopped`
    /// while its report is not in yet), for the web view.
    CandidateState {
        story: String,
        attempt: u32,
        candidate: u32,
        state: String,
    },
    /// Where a racing candidate runs, once the coordinator knows (a
    /// cluster node and worker slot, as `attempt_placed` says an
    /// attempt's); local candidates have none.
    CandidatePlaced {
        story: String,
        attempt: u32,
        candidate: u32,
        node: String,
    },
    /// `attempts.pick: judge` chose the candidate whose work lands, and
    /// why (`by`: `ranking`).
    CandidatePick {
        story: String,
        attempt: u32,
        candidate: u32,
        by: String,
        reason: String,
    },
    /// A race was lost (issue 36): the candidate whose work came closest
    /// (`Race::closest`), kept at `work`, which the next race's candidate 1
    /// fixes up, and why it was that one.
    CandidateClosest {
        story: String,
        attempt: u32,
        candidate: u32,
        work: String,
        reason: String,
    },
    /// Where a running attempt runs, once the coordinator knows (a
    /// cluster node and worker slot); local attempts have none.
    AttemptPlaced {
        story: String,
        attempt: u32,
        node: String,
    },
    AttemptEnd {
        story: String,
        attempt: u32,
        slot: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        kind: AttemptKind,
        verdict: Outcome,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        tokens: u64,
        #[serde(default)]
        usage: Usage,
        cost_usd: f64,
        /// No cost reported and no price known: `cost_usd` is a floor.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cost_unknown: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        secs: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        saved_ref: Option<String>,
        /// The cluster node (and worker slot) it ran on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
    },
    /// Finished work enters the merge queue's hands.
    LandStart {
        story: String,
        attempt: u32,
    },
    /// The merge queue began validating a candidate: the tree of the merge
    /// (what the target may move to), the stories it holds (a chain's
    /// merge holds those before it too) and the worktree it runs in.
    ValidateStart {
        tree: String,
        stories: Vec<String>,
        slot: String,
        /// Where it runs: `coordinator`; absent when handed to the
        /// executor (`validation.where: executor`), whose node the end says.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
    },
    /// A candidate's validation ended: `passed`, `failed`, `stopped` (the
    /// run stopped it) or `thrown` (behind a failure in a chain: its merge
    /// held the failing story, so its run was of no use).
    ValidateEnd {
        tree: String,
        stories: Vec<String>,
        verdict: String,
        secs: f64,
        /// Where it ran: `coordinator`, or the executor's `<node>/<slot>`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
    },
    /// The required validation commands ran on the merged tree.
    Validated {
        story: String,
        attempt: u32,
        secs: f64,
        ok: bool,
    },
    /// The landing ran the gates (issue 26): how long they took and what
    /// they found, findings or not.
    GateChecked {
        story: String,
        attempt: u32,
        secs: f64,
        findings: usize,
    },
    /// The review gate's reviewer answered (issue 26).
    Review {
        story: String,
        attempt: u32,
        /// approve, changes or no_answer.
        verdict: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        text: String,
        #[serde(default)]
        cost_usd: f64,
    },
    /// The trust gates' findings on a landing and what followed (issue 26).
    Gate {
        story: String,
        attempt: u32,
        /// fixup, review or warned.
        decision: String,
        findings: Vec<crate::gates::Finding>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    Landed {
        story: String,
        attempt: u32,
        commit: String,
        /// Merge, validation and the ref move.
        secs: f64,
    },
    Conflict {
        story: String,
        attempt: u32,
        paths: Vec<String>,
        secs: f64,
    },
    /// A landing that neither landed nor conflicted.
    LandEnd {
        story: String,
        attempt: u32,
        /// `validation_failed`, `checkout_blocked`, `busy`, `raced`,
        /// `interrupted` or `error`.
        result: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        secs: f64,
    },
    /// A landed story's path that a later commit on the target (not a
    /// story's merge) set back to its content from before the story: the
    /// story's work there is undone.
    Reverted {
        story: String,
        path: String,
        commit: String,
        subject: String,
    },
    /// No more tries without a person.
    FailedForGood {
        story: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The circuit breaker stopped the run: one cause over several stories.
    Breaker {
        reason: String,
    },
    Pause {
        why: PauseWhy,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        /// Unix time the pause ends, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<i64>,
    },
    Resume {
        why: PauseWhy,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
    },
    Signal {
        signal: String,
    },
    /// A person steered the run (`ralph pause`, `ralph hold ID`, ...):
    /// the command, its story, and what changed, in words.
    Steer {
        cmd: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        story: Option<String>,
        message: String,
    },
    RunEnd {
        done: usize,
        total: usize,
        failed: Vec<String>,
        blocked: Vec<String>,
        pending: usize,
        exit_code: i32,
        elapsed_secs: f64,
        tokens: u64,
        cost_usd: f64,
    },
    /// Appended by the next run to the file of a run that was killed (no
    /// `run_end`): the file ends here, and `next_run` picked up its work.
    Recovered {
        next_run: String,
    },
    /// The directory reached `runs.max_mb` with no older run left to
    /// delete: this run's later events are not recorded.
    Truncated {
        limit_bytes: u64,
    },
    #[serde(other)]
    Unknown,
}

impl Ev {
    /// True for the events that close a run's file.
    pub(crate) fn ends_run(&self) -> bool {
        matches!(self, Ev::RunEnd { .. } | Ev::Recovered { .. })
    }
}

/// Parses one line; `None` for a torn, foreign or empty line.
pub(crate) fn parse_line(line: &str) -> Option<Record> {
    let v: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
    let t = v.get("t")?.as_f64()?;
    let ev: Ev = serde_json::from_value(v).ok()?;
    Some(Record { t, ev })
}

/// The serialised line of `rec`, newline included.
pub(crate) fn line_of(rec: &Record) -> String {
    let mut s = serde_json::to_string(rec).expect("records serialise");
    s.push('\n');
    s
}

/// One run's records, as read back.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RunData {
    pub(crate) id: String,
    pub(crate) records: Vec<Record>,
    /// Lines that did not parse (a torn last line of a killed run).
    pub(crate) skipped: usize,
}

/// Reads the records in `text` (one run's file).
pub(crate) fn parse_run(id: &str, text: &str) -> RunData {
    let mut out = RunData {
        id: id.to_string(),
        ..RunData::default()
    };
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match parse_line(line) {
            Some(r) => out.records.push(r),
            None => out.skipped += 1,
        }
    }
    out
}

/// The run IDs on disk, oldest first (IDs sort by start time).
pub(crate) fn list_runs(root: &Path) -> Vec<String> {
    let mut ids: Vec<String> = fs::read_dir(runs_dir(root))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(".jsonl").map(str::to_string)
                })
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    ids.sort_by(|a, b| id_key(a).cmp(&id_key(b)));
    ids
}

pub(crate) fn run_path(root: &Path, id: &str) -> PathBuf {
    crate::paths::run_records(root, id)
}

/// Reads one run's records (`None` when there is no such run).
pub(crate) fn read_run(root: &Path, id: &str) -> Option<RunData> {
    let text = fs::read_to_string(run_path(root, id)).ok()?;
    Some(parse_run(id, &text))
}

/// Reads every run on disk, oldest first.
pub(crate) fn read_all(root: &Path) -> Vec<RunData> {
    list_runs(root)
        .iter()
        .filter_map(|id| read_run(root, id))
        .collect()
}

/// `20261122-115121` for a run started at `unix`, unique among `taken`
/// (`-2`, `-3`, ... when runs start within one second).
pub(crate) fn new_run_id(unix: i64, taken: &[String]) -> String {
    let base = crate::timefmt::file_stamp(unix);
    // After every run of that second, even one since deleted by rotation
    // that a later one outlived: IDs must keep sorting by start time.
    let last = taken
        .iter()
        .filter_map(|t| match id_key(t) {
            (b, n) if b == base => Some(n),
            _ => None,
        })
        .max();
    match last {
        None => base,
        Some(n) => format!("{base}-{}", n + 1),
    }
}

/// The order of run IDs: by start second, then by the `-N` of runs that
/// started within the same second (`X`, `X-2`, ..., `X-10`).
pub(crate) fn id_key(id: &str) -> (&str, u32) {
    match id.rsplit_once('-') {
        Some((base, n)) if base.len() == 15 && n.bytes().all(|b| b.is_ascii_digit()) => {
            (base, n.parse().unwrap_or(u32::MAX))
        }
        _ => (id, 1),
    }
}

pub(crate) fn now_unix_f64() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| (d.as_millis() as f64) / 1000.0)
        .unwrap_or(0.0)
}

/// The writer of one run's file. Shared by the dispatcher and the landing
/// task (validation time); every line is one `write(2)` on an `O_APPEND`
/// file, so a kill leaves whole lines (at worst one torn last line, which
/// readers skip and the next run terminates).
pub(crate) struct RunLog {
    pub(crate) id: String,
    pub(crate) path: PathBuf,
    /// The run that was killed and whose file this one closed.
    pub(crate) resumes: Option<String>,
    dir: PathBuf,
    inner: Mutex<Writer>,
    /// See every record as it is written, whoever writes it (the live web
    /// view, webhooks): the merge queue's own records reached only the file
    /// before.
    observers: std::sync::RwLock<Vec<Observer>>,
}

type Observer = Box<dyn Fn(&Record) + Send + Sync>;

impl std::fmt::Debug for RunLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLog")
            .field("id", &self.id)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Writer {
    file: Option<File>,
    /// Bytes in the runs directory, as far as this writer knows.
    dir_bytes: u64,
    limit: u64,
    truncated: bool,
}

impl RunLog {
    /// Starts the file of a new run: closes the file of a run that was
    /// killed (appending `recovered`), makes room under `limit` bytes by
    /// deleting the oldest runs, and creates this run's file.
    pub(crate) fn create(root: &Path, unix_now: i64, limit: u64) -> io::Result<RunLog> {
        let dir = runs_dir(root);
        {
            // Records hold what agents printed: the user's eyes only.
            use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)?;
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))?;
        }
        let taken = list_runs(root);
        let id = new_run_id(unix_now, &taken);
        let mut resumes = None;
        if let Some(last) = taken.last() {
            if close_killed_run(&run_path(root, last), &id)? {
                resumes = Some(last.clone());
            }
        }
        let path = run_path(root, &id);
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&path)?
        };
        let mut w = Writer {
            file: Some(file),
            dir_bytes: dir_size(&dir),
            limit,
            truncated: false,
        };
        w.make_room(&dir, &path, 0);
        Ok(RunLog {
            id,
            path,
            resumes,
            dir,
            inner: Mutex::new(w),
            observers: std::sync::RwLock::new(Vec::new()),
        })
    }

    /// `see` is shown every record from now on.
    pub(crate) fn observe(&self, see: impl Fn(&Record) + Send + Sync + 'static) {
        self.observers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(see));
    }

    /// Appends `ev`, stamped now.
    pub(crate) fn write(&self, ev: Ev) -> io::Result<()> {
        self.write_at(now_unix_f64(), ev)
    }

    pub(crate) fn write_at(&self, t: f64, ev: Ev) -> io::Result<()> {
        let rec = Record { t, ev };
        for see in self
            .observers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            see(&rec);
        }
        let line = line_of(&rec);
        let mut w = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if w.truncated {
            return Ok(());
        }
        let len = line.len() as u64;
        if !w.make_room(&self.dir, &self.path, len) {
            // Even alone this run's file is past the limit: say so once
            // and record nothing more.
            let limit = w.limit;
            w.truncated = true;
            let note = line_of(&Record {
                t,
                ev: Ev::Truncated { limit_bytes: limit },
            });
            return w.append(note.as_bytes());
        }
        w.append(line.as_bytes())
    }

    /// Forces the file to disk (at the end of a run).
    pub(crate) fn sync(&self) {
        let w = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = &w.file {
            let _ = f.sync_data();
        }
    }
}

impl Writer {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let Some(f) = self.file.as_mut() else {
            return Ok(());
        };
        f.write_all(bytes)?;
        self.dir_bytes += bytes.len() as u64;
        Ok(())
    }

    /// Deletes the oldest other runs until `extra` more bytes fit under the
    /// limit; false when they cannot.
    fn make_room(&mut self, dir: &Path, own: &Path, extra: u64) -> bool {
        if self.dir_bytes + extra <= self.limit {
            return true;
        }
        // The size on disk may have moved (a report written, say).
        self.dir_bytes = dir_size(dir);
        let mut files: Vec<PathBuf> = fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.as_path() != own && p.is_file())
                    .collect()
            })
            .unwrap_or_default();
        // Oldest first: by run ID (`X-2.jsonl` sorts before `X.jsonl` as
        // a file name).
        files.sort_by(|a, b| {
            let stem = |p: &Path| p.file_stem().map(|s| s.to_string_lossy().into_owned());
            let (a, b) = (stem(a).unwrap_or_default(), stem(b).unwrap_or_default());
            id_key(&a).cmp(&id_key(&b))
        });
        for f in files {
            if self.dir_bytes + extra <= self.limit {
                break;
            }
            let size = fs::metadata(&f).map(|m| m.len()).unwrap_or(0);
            if fs::remove_file(&f).is_ok() {
                self.dir_bytes = self.dir_bytes.saturating_sub(size);
            }
        }
        self.dir_bytes + extra <= self.limit
    }
}

fn dir_size(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// When the file at `path` does not end with a record that closes a run
/// (its run was killed), ends a torn last line and appends `recovered`;
/// true when it did.
fn close_killed_run(path: &Path, next_run: &str) -> io::Result<bool> {
    let mut f = match OpenOptions::new().read(true).append(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    // The last line is in the tail; reading the whole file is not needed.
    let from = len.saturating_sub(64 * 1024);
    f.seek(SeekFrom::Start(from))?;
    let mut tail = String::new();
    Read::by_ref(&mut f)
        .take(64 * 1024)
        .read_to_string(&mut tail)
        .ok();
    let torn = !tail.is_empty() && !tail.ends_with('\n');
    let closed = tail
        .lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .find_map(parse_line)
        .is_some_and(|r| r.ev.ends_run());
    if closed && !torn {
        return Ok(false);
    }
    let mut out = String::new();
    if torn {
        out.push('\n');
    }
    if !closed || torn {
        out.push_str(&line_of(&Record {
            t: now_unix_f64(),
            ev: Ev::Recovered {
                next_run: next_run.to_string(),
            },
        }));
    }
    f.write_all(out.as_bytes())?;
    f.sync_data()?;
    Ok(!closed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(run: &str) -> Ev {
        Ev::RunStart {
            run: run.into(),
            version: "0".into(),
            args: vec!["run".into()],
            jobs: 1,
            agent: "claude".into(),
            target: "main".into(),
            commit: None,
            selected: 1,
            stories: 1,
            pid: 1,
            resumes: None,
        }
    }

    #[test]
    fn run_ids_sort_by_time_and_never_collide() {
        let t = 1_795_348_281; // 2026-11-22T11:51:21Z
        assert_eq!(new_run_id(t, &[]), "20261122-115121");
        let taken = vec!["20261122-115121".to_string()];
        assert_eq!(new_run_id(t, &taken), "20261122-115121-2");
        // After the latest of that second, even when earlier ones are gone.
        let later = vec!["20261122-115121-9".to_string()];
        assert_eq!(new_run_id(t, &later), "20261122-115121-10");
        let mut ids = vec![
            new_run_id(t + 1, &[]),
            "20261122-115121-10".to_string(),
            "20261122-115121-2".to_string(),
            "20261122-115121".to_string(),
        ];
        ids.sort_by(|a, b| id_key(a).cmp(&id_key(b)));
        assert_eq!(
            ids,
            [
                "20261122-115121",
                "20261122-115121-2",
                "20261122-115121-10",
                "20261122-115122"
            ]
        );
    }

    #[test]
    fn lines_round_trip_and_unknown_or_torn_lines_are_tolerated() {
        let rec = Record {
            t: 12.5,
            ev: Ev::AttemptStart {
                story: "1.1".into(),
                attempt: 2,
                slot: 0,
                agent: "claude".into(),
                kind: AttemptKind::Redo,
                model: Some("haiku".into()),
                est: Some("small".into()),
            },
        };
        let line = line_of(&rec);
        assert!(line.contains(r#""ev":"attempt_start""#), "{line}");
        assert!(line.contains(r#""kind":"redo""#), "{line}");
        assert_eq!(parse_line(&line), Some(rec.clone()));
        let text = format!(
            "{line}{{\"t\":13,\"ev\":\"from_the_future\",\"x\":1}}\n{}",
            &line[..20]
        );
        let run = parse_run("r", &text);
        assert_eq!(run.records.len(), 2);
        assert_eq!(run.records[1].ev, Ev::Unknown);
        assert_eq!(run.skipped, 1);
    }

    #[test]
    fn a_killed_runs_file_is_closed_by_the_next_run() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let a = RunLog::create(root, 100, 1 << 20).unwrap();
        a.write(start(&a.id)).unwrap();
        // Killed mid-line: a torn last line.
        fs::OpenOptions::new()
            .append(true)
            .open(&a.path)
            .unwrap()
            .write_all(b"{\"t\":1,\"ev\":\"attem")
            .unwrap();
        let b = RunLog::create(root, 200, 1 << 20).unwrap();
        assert_eq!(b.resumes.as_ref(), Some(&a.id));
        let first = read_run(root, &a.id).unwrap();
        assert_eq!(first.skipped, 1);
        assert_eq!(
            first.records.last().unwrap().ev,
            Ev::Recovered {
                next_run: b.id.clone()
            }
        );
        // A run that ended properly is left alone.
        b.write(Ev::RunEnd {
            done: 0,
            total: 0,
            failed: vec![],
            blocked: vec![],
            pending: 0,
            exit_code: 0,
            elapsed_secs: 0.0,
            tokens: 0,
            cost_usd: 0.0,
        })
        .unwrap();
        let before = fs::read_to_string(&b.path).unwrap();
        let c = RunLog::create(root, 300, 1 << 20).unwrap();
        assert_eq!(c.resumes, None);
        assert_eq!(fs::read_to_string(&b.path).unwrap(), before);
        assert_eq!(list_runs(root).len(), 3);
    }

    #[test]
    fn the_directory_stays_under_its_limit_oldest_runs_first() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let line_len = line_of(&Record {
            t: now_unix_f64(),
            ev: start("20000101-000000"),
        })
        .len() as u64;
        let limit = line_len * 5;
        let mut ids = Vec::new();
        // All in one second: `X`, `X-2`, ... (whose file names sort the
        // other way round).
        for _ in 0..4 {
            let log = RunLog::create(root, 1000, limit).unwrap();
            log.write(start(&log.id)).unwrap();
            log.write(start(&log.id)).unwrap();
            ids.push(log.id.clone());
        }
        let left = list_runs(root);
        assert!(left.len() < 4, "{left:?}");
        assert_eq!(left[..], ids[4 - left.len()..], "the newest runs are kept");
        assert!(dir_size(&runs_dir(root)) <= limit + line_len);
        // One run alone past the limit stops recording, and says so once.
        let log = RunLog::create(root, 2000, limit).unwrap();
        for _ in 0..10 {
            log.write(start(&log.id)).unwrap();
        }
        let run = read_run(root, &log.id).unwrap();
        assert!(matches!(
            run.records.last().unwrap().ev,
            Ev::Truncated { .. }
        ));
        assert_eq!(
            run.records
                .iter()
                .filter(|r| matches!(r.ev, Ev::Truncated { .. }))
                .count(),
            1
        );
    }
}
