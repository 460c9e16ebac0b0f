//! The run's journal of what it tells an issue tracker (issue 35, finding
//! 8 of the soak): each status change is on disk,
//! `.ralph/tracker/journal.json`, before the tracker's thread is handed
//! it, and leaves the journal once that thread has it in the tracker's
//! own queue (`pending.json`). Handed over through a channel only, a
//! change the thread never took (stuck in a request that never came back
//! when the run ended, or ralph killed) was lost: its issue stayed open
//! with nothing queued. The next run hands on what the journal still
//! holds (`TrackerSync::new`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::backlog::tracker::Update;

/// One status change handed to the tracker's thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    /// The hand-over that carried it, numbered by this run.
    seq: u64,
    id: String,
    update: Update,
}

/// The journal as this run keeps it: what it handed over and the thread
/// has not yet said is queued.
pub(crate) struct Journal {
    path: PathBuf,
    entries: Vec<Entry>,
    seq: u64,
}

/// What the journal on disk holds, in the order it was told (none without
/// one). `Err` names the file: it could not be read.
pub(crate) fn read(root: &Path) -> Result<Vec<(String, Update)>, String> {
    let path = crate::paths::tracker_journal(root);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let entries: Vec<Entry> = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a journal: {e}", path.display()))?;
    Ok(entries.into_iter().map(|e| (e.id, e.update)).collect())
}

/// A status change in a line's words, for `ralph status`.
pub(crate) fn describe(id: &str, update: &Update) -> String {
    let what = match update {
        Update::Running => "running".to_string(),
        Update::Failed => "failed".to_string(),
        Update::Review => "review".to_string(),
        Update::Pending => "pending".to_string(),
        Update::Landed { target, .. } => format!("landed on {target}"),
    };
    format!("story {id}: {what}")
}

impl Journal {
    /// An empty journal for this run; the file is written at its first
    /// change (what an earlier run left stays until then).
    pub(crate) fn new(root: &Path) -> Journal {
        Journal {
            path: crate::paths::tracker_journal(root),
            entries: Vec::new(),
            seq: 0,
        }
    }

    /// Journals `updates` (on disk when this returns `Ok`); the number the
    /// thread answers with once they are queued.
    pub(crate) fn hand(&mut self, updates: &[(String, Update)]) -> (u64, Result<(), String>) {
        self.seq += 1;
        let seq = self.seq;
        self.entries
            .extend(updates.iter().map(|(id, update)| Entry {
                seq,
                id: id.clone(),
                update: update.clone(),
            }));
        (seq, self.save())
    }

    /// Hand-over `seq` is in the tracker's queue on disk (one that could
    /// not be queued stays: its answer never comes).
    pub(crate) fn queued(&mut self, seq: u64) -> Result<(), String> {
        let before = self.entries.len();
        self.entries.retain(|e| e.seq != seq);
        if self.entries.len() == before {
            return Ok(());
        }
        self.save()
    }

    /// Written whole (`store::write_atomic`: temp file, fsync, rename),
    /// or removed once nothing is left in it.
    pub(crate) fn save(&self) -> Result<(), String> {
        let written = if self.entries.is_empty() {
            match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            }
        } else {
            let text = serde_json::to_string_pretty(&self.entries).unwrap_or_default();
            crate::store::write_atomic(&self.path, text.as_bytes())
        };
        written.map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn landed(c: &str) -> Update {
        Update::Landed {
            commit: c.into(),
            target: "main".into(),
        }
    }

    #[test]
    fn a_change_stays_on_disk_until_the_thread_has_it_queued() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(read(root), Ok(Vec::new()), "no journal: nothing");
        let mut j = Journal::new(root);
        let (one, w) = j.hand(&[("1".into(), Update::Running)]);
        w.unwrap();
        let (two, w) = j.hand(&[("1".into(), landed("a")), ("2".into(), Update::Running)]);
        w.unwrap();
        assert_eq!(read(root).unwrap().len(), 3);
        j.queued(one).unwrap();
        assert_eq!(
            read(root).unwrap(),
            vec![("1".into(), landed("a")), ("2".into(), Update::Running)],
            "a killed run leaves what was handed over and never queued"
        );
        j.queued(two).unwrap();
        assert!(!crate::paths::tracker_journal(root).exists());
        // A run that hands nothing leaves an earlier run's journal alone.
        std::fs::create_dir_all(crate::paths::tracker_journal(root).parent().unwrap()).unwrap();
        std::fs::write(crate::paths::tracker_journal(root), "[]").unwrap();
        Journal::new(root).queued(1).unwrap();
        assert!(crate::paths::tracker_journal(root).exists());
        std::fs::write(crate::paths::tracker_journal(root), "{half").unwrap();
        assert!(read(root).unwrap_err().contains("journal.json"));
    }
}
