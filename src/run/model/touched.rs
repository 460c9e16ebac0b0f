//! What each story is predicted to touch (`Model::files`), for dispatch
//! to keep clashing stories apart: its spec's files and named paths, what
//! it conflicted on and touched before (kept in the state across runs),
//! and what its agent edits now.

use super::Model;
use crate::schedule::StoryState;

/// The most paths `state.touched_paths` keeps for one story.
const MAX_TOUCHED_KEPT: usize = 64;

impl Model {
    /// Recomputes what story `idx` is predicted to touch: what its spec
    /// declares and names, what it conflicted on and touched before, what
    /// its worktree changed so far (nothing with `predict_files` off).
    pub(crate) fn refresh_files(&mut self, idx: usize) {
        if !self.policy.predict_files {
            self.files[idx].clear();
            return;
        }
        let mut seen = std::collections::HashSet::new();
        let id = &self.stories[idx].id;
        let files = self.stories[idx]
            .files
            .iter()
            .chain(&self.stories[idx].named)
            .chain(self.state.conflict_paths.get(id).into_iter().flatten())
            .chain(self.state.touched_paths.get(id).into_iter().flatten())
            .chain(self.touched.get(&idx).into_iter().flatten())
            .filter(|p| seen.insert(p.as_str()))
            .cloned()
            .collect();
        self.files[idx] = files;
    }

    /// Remembers (in the state, so across attempts and runs) that story
    /// `idx` touched `paths`; at most `MAX_TOUCHED_KEPT` paths, the first
    /// ones, so a generator's thousand files cannot swell `state.json`.
    fn remember_touched(&mut self, idx: usize, paths: &[String]) {
        let known = self
            .state
            .touched_paths
            .entry(self.stories[idx].id.clone())
            .or_default();
        for p in paths {
            if known.len() >= MAX_TOUCHED_KEPT {
                break;
            }
            if !known.contains(p) {
                known.push(p.clone());
            }
        }
    }

    /// The agent of running story `idx` is editing `path` (from its tool
    /// calls, before any of it is on disk or committed).
    pub(crate) fn editing(&mut self, idx: usize, path: String) {
        if self.sched.nodes[idx] != StoryState::Running || !self.policy.predict_files {
            return;
        }
        let paths = self.touched.entry(idx).or_default();
        if paths.contains(&path) {
            return;
        }
        paths.push(path.clone());
        self.remember_touched(idx, &[path]);
        self.refresh_files(idx);
    }

    /// Story `idx`'s landing conflicted on `paths`: remembered (in the
    /// state, so across runs) for dispatch.
    pub(crate) fn remember_conflict(&mut self, idx: usize, paths: &[String]) {
        let known = self
            .state
            .conflict_paths
            .entry(self.stories[idx].id.clone())
            .or_default();
        for p in paths {
            if !known.contains(p) {
                known.push(p.clone());
            }
        }
        self.refresh_files(idx);
    }

    /// What the worktree of running story `idx` changed so far.
    pub(crate) fn set_touched(&mut self, idx: usize, paths: Vec<String>) {
        if self.sched.nodes[idx] == StoryState::Running {
            self.remember_touched(idx, &paths);
            // What the agent said it edits stays, even before it is on disk.
            let edited: Vec<String> = self.touched.remove(&idx).unwrap_or_default();
            let mut all = paths;
            for p in edited {
                if !all.contains(&p) {
                    all.push(p);
                }
            }
            self.touched.insert(idx, all);
            self.refresh_files(idx);
        }
    }

    /// True when what running stories touched could change the next
    /// choice: something runs, more stories are ready than the slots free
    /// once the event freed one (else every ready story starts whatever
    /// clashes: a prediction never idles a slot), and a ready story has
    /// predicted files to compare (with none, nothing can clash). The
    /// reading is git work on every running worktree before the event:
    /// skipped when it cannot matter.
    pub(crate) fn wants_touched(&self) -> bool {
        let running = self.slots.iter().filter(|s| s.is_some()).count();
        let ready = self.sched.ready();
        let free_after = self.policy.jobs.saturating_sub(running) + 1;
        running > 0 && ready.len() > free_after && ready.iter().any(|&i| !self.files[i].is_empty())
    }
}
