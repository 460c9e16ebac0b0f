//! The backlog: `.ralph/stories.txt` (or `prd.json`), spec files, frontmatter and
//! story IDs (SPEC 3.2–3.6).
//!
//! Parsing functions are pure (`parse_*` take text); `load` is the one place that
//! reads the files, and it collects *every* problem instead of stopping at the first.

use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::error::Problem;

/// Where the stories came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `.ralph/stories.txt`.
    StoriesTxt,
    /// `prd.json`; `branch` is its `branchName` when present.
    Prd { branch: Option<String> },
}

/// A section of `stories.txt`: the unbatched head, or one `# [batch:N]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// `None` for the unbatched head; otherwise the label text (`"1"`, `"31.5"`).
    pub label: Option<String>,
    /// True for the unbatched head and for a section labelled exactly `0`:
    /// its stories form a chain in file order (SPEC 3.5).
    pub chain: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Story {
    pub id: String,
    pub title: String,
    /// 1-based line in stories.txt (0 for prd.json stories).
    pub line: usize,
    /// Index into `Backlog::sections` (always 0 for prd.json).
    pub section: usize,
    /// Spec path relative to the project root (`None` for prd.json stories).
    pub spec_path: Option<PathBuf>,
    /// IDs from frontmatter `depends_on` (or prd.json `dependsOn`), normalised to strings.
    pub depends_on: Vec<String>,
    /// Frontmatter `estimation` (small / medium / large), if any.
    pub estimation: Option<String>,
    /// prd.json only: `passes: true`.
    pub prd_passes: bool,
    /// prd.json only: the markdown rendered from description and acceptance criteria.
    pub prd_spec: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Backlog {
    pub source: Source,
    /// Active stories in file order (prd.json: by priority, then file order).
    pub stories: Vec<Story>,
    pub sections: Vec<Section>,
    /// IDs of `x `-skipped lines (a `depends_on` naming one is satisfied, not unknown).
    pub skipped: Vec<String>,
}

impl Backlog {
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.stories.iter().position(|s| s.id == id)
    }
}

/// One story line of stories.txt before spec lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    pub id: String,
    pub title: String,
    pub line: usize,
    pub section: usize,
}

/// The parsed queue file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    pub entries: Vec<QueueEntry>,
    pub sections: Vec<Section>,
    pub skipped: Vec<String>,
}

/// Frontmatter fields ralph uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frontmatter {
    pub id: Option<String>,
    pub title: Option<String>,
    pub status: Option<String>,
    pub estimation: Option<String>,
    pub depends_on: Vec<String>,
}

/// Checks a story ID against SPEC 3.4; `Err` carries the reason.
pub fn check_id(id: &str) -> Result<(), String> {
    let _ = id;
    todo!()
}

/// Parses stories.txt text (SPEC 3.2). Problems name `file` and the line.
pub fn parse_queue(text: &str, file: &Path) -> Result<Queue, Vec<Problem>> {
    let _ = (text, file);
    todo!()
}

/// Parses optional YAML frontmatter at the top of a spec.
pub fn parse_frontmatter(text: &str, file: &Path) -> Result<Frontmatter, Problem> {
    let _ = (text, file);
    todo!()
}

/// Returns `text` with the frontmatter field `field` set to `done` (added to the
/// frontmatter when missing; a spec without frontmatter gets one). Only the
/// frontmatter is touched, never the body.
pub fn set_status_done(text: &str, field: &str) -> String {
    let _ = (text, field);
    todo!()
}

/// Resolves `specs.pattern` for `id` to a glob relative to the root.
pub fn spec_glob(pattern: &str, id: &str) -> String {
    let _ = (pattern, id);
    todo!()
}

/// Loads the whole backlog of the project at `root`, reporting every problem.
pub fn load(root: &Path, config: &Config) -> Result<Backlog, Vec<Problem>> {
    let _ = (root, config);
    todo!()
}

/// The text that goes into the prompt as `{{SPEC_CONTENT}}`.
pub fn spec_text(root: &Path, story: &Story) -> std::io::Result<String> {
    match (&story.spec_path, &story.prd_spec) {
        (Some(p), _) => std::fs::read_to_string(root.join(p)),
        (None, Some(s)) => Ok(s.clone()),
        (None, None) => Ok(String::new()),
    }
}
