//! The backlog: `.ralph/stories.txt` (or `prd.json`), spec files, frontmatter and
//! story IDs (SPEC 3.2–3.6).
//!
//! Parsing functions are pure (`parse_*` take text); `load` is the one place that
//! reads the files, and it collects *every* problem instead of stopping at the first.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::error::Problem;
use crate::paths;

pub(crate) mod files;
mod frontmatter;
pub(crate) mod github;
pub(crate) mod jira;
pub(crate) mod linear;
pub(crate) mod mark_done;
mod prd;
mod queue;
pub(crate) mod tracker;

pub(crate) use frontmatter::{depends_on_line, parse_frontmatter, sets_key, split_frontmatter};
use prd::*;
#[cfg(test)]
pub(crate) use queue::parse_queue;
pub(crate) use queue::parse_queue_lenient;
use queue::*;

/// Where the stories came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// `.ralph/stories.txt`.
    StoriesTxt,
    /// `prd.json`; `branch` is its `branchName` when present.
    Prd { branch: Option<String> },
    /// GitHub Issues of `repo` (`owner/name`), through `tracker`.
    GitHub { repo: String },
    /// Linear issues of team `team` (its key), through `tracker`.
    Linear { team: String },
    /// Jira issues of project `project` (its key), through `tracker`.
    Jira { project: String },
}

impl Source {
    /// Whether the stories are an issue tracker's (split, closed and
    /// planned there, not by ralph).
    pub(crate) fn is_tracker(&self) -> bool {
        matches!(
            self,
            Source::GitHub { .. } | Source::Linear { .. } | Source::Jira { .. }
        )
    }
}

/// A section of `stories.txt`: the unbatched head, or one `# [batch:N]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Section {
    /// `None` for the unbatched head; otherwise the label text (`"1"`, `"31.5"`).
    pub(crate) label: Option<String>,
    /// True for the unbatched head and for a section labelled exactly `0`:
    /// its stories form a chain in file order (SPEC 3.5).
    pub(crate) chain: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Story {
    pub(crate) id: String,
    pub(crate) title: String,
    /// 1-based line in stories.txt (0 for prd.json stories).
    pub(crate) line: usize,
    /// Index into `Backlog::sections` (always 0 for prd.json).
    pub(crate) section: usize,
    /// Spec path relative to the project root (`None` for prd.json stories).
    pub(crate) spec_path: Option<PathBuf>,
    /// IDs from frontmatter `depends_on` (or prd.json `dependsOn`), normalised to strings.
    pub(crate) depends_on: Vec<String>,
    /// Frontmatter `estimation` (small / medium / large), if any.
    pub(crate) estimation: Option<String>,
    /// Frontmatter `agent`: the backend this story runs with, if not the run's.
    pub(crate) agent: Option<crate::agent::Backend>,
    /// Frontmatter `allow_empty_done` (as `loop.allow_empty_done`, for one
    /// story): a DONE that changed nothing lands instead of failing.
    pub(crate) allow_empty_done: bool,
    /// Frontmatter `allow_test_changes`: the story may change its tests or
    /// their configuration; the test gate's findings send it to review
    /// instead of back to its agent.
    pub(crate) allow_test_changes: bool,
    /// prd.json only: `passes: true`.
    pub(crate) prd_passes: bool,
    /// prd.json only: the markdown rendered from description and acceptance criteria.
    pub(crate) prd_spec: Option<String>,
    /// Frontmatter `priority` (prd.json: its numeric `priority`) as a rank:
    /// lower starts first among ready stories of equal critical path.
    pub(crate) priority: files::Rank,
    /// Files the story says it will touch (its spec's "Files to
    /// Create/Modify", prd.json `files`), for conflict-aware dispatch.
    pub(crate) files: Vec<String>,
    /// Frontmatter (prd.json) `model:` and `effort:`: the model its first
    /// attempt runs on, or where it starts on `agent.escalation`.
    pub(crate) model: ModelChoice,
    /// Every path its spec names anywhere (`files::named_paths`): a wider,
    /// weaker prediction of what it touches, for dispatch only.
    pub(crate) named: Vec<String>,
    /// The size of its spec in bytes (prd.json: the rendered one), by
    /// which forecasts compare stories.
    pub(crate) spec_bytes: usize,
}

/// A story's own word on its model (issue 25).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ModelChoice {
    /// `model: NAME`.
    pub(crate) model: Option<String>,
    /// `effort: low|medium|high`.
    pub(crate) effort: Option<Effort>,
    /// `best_of: N` (issue 36): how many candidates race for each of its
    /// attempts, over `attempts.best_of`; `--best-of` wins over it.
    pub(crate) best_of: Option<u32>,
}

/// How hard a story says it is: the rung of the ladder it starts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effort {
    Low,
    Medium,
    High,
}

impl Effort {
    pub(crate) fn parse(s: &str) -> Option<Effort> {
        match s.trim().to_ascii_lowercase().as_str() {
            "low" => Some(Effort::Low),
            "medium" => Some(Effort::Medium),
            "high" => Some(Effort::High),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Backlog {
    pub(crate) source: Source,
    /// Active stories in file order (prd.json: by priority, then file order).
    pub(crate) stories: Vec<Story>,
    pub(crate) sections: Vec<Section>,
    /// IDs of `x `-skipped lines (a `depends_on` naming one is satisfied, not unknown).
    pub(crate) skipped: Vec<String>,
}

impl Story {
    /// A story that says nothing of itself but its ID and title: no spec, no
    /// dependencies, no frontmatter, medium priority. What a source that
    /// knows more builds on with `..Story::bare(id, title)`; the loaders of
    /// stories.txt, prd.json and the tracker spell every field instead, so a
    /// new one is decided for each source.
    pub(crate) fn bare(id: impl Into<String>, title: impl Into<String>) -> Story {
        Story {
            id: id.into(),
            title: title.into(),
            line: 0,
            section: 0,
            spec_path: None,
            depends_on: Vec::new(),
            estimation: None,
            agent: None,
            allow_empty_done: false,
            allow_test_changes: false,
            prd_passes: false,
            prd_spec: None,
            priority: files::DEFAULT_RANK,
            files: Vec::new(),
            model: ModelChoice::default(),
            named: Vec::new(),
            spec_bytes: 0,
        }
    }
}

#[cfg(test)]
impl Backlog {
    /// `stories` in one `[batch:1]` section: the backlog most tests need.
    pub(crate) fn one_batch(stories: Vec<Story>) -> Backlog {
        Backlog {
            source: Source::StoriesTxt,
            stories,
            sections: vec![Section {
                label: Some("1".into()),
                chain: false,
            }],
            skipped: vec![],
        }
    }
}

impl Backlog {
    pub(crate) fn index_of(&self, id: &str) -> Option<usize> {
        self.stories.iter().position(|s| s.id == id)
    }

    /// The file the stories come from, relative to the project root.
    pub(crate) fn source_file(&self) -> &'static str {
        match self.source {
            Source::StoriesTxt => QUEUE_FILE,
            Source::Prd { .. } => PRD_FILE,
            // No file: the config names the tracker (and is committed).
            Source::GitHub { .. } | Source::Linear { .. } | Source::Jira { .. } => paths::CONFIG,
        }
    }

    /// Every file of the project this backlog was read from, relative to
    /// the project root: the config, the queue or prd.json, the prompt
    /// template, each story's spec. Those that exist must be committed for
    /// agents' worktrees to hold the backlog they are given.
    pub(crate) fn files(&self, root: &Path) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = [paths::CONFIG, self.source_file(), paths::IMPLEMENT_TEMPLATE]
            .iter()
            .map(PathBuf::from)
            .filter(|p| root.join(p).is_file())
            .collect();
        out.extend(self.stories.iter().filter_map(|s| s.spec_path.clone()));
        out
    }

    /// When the backlog has no story: what is wrong, and what to do
    /// (`run` refuses it; `validate` and `status` warn).
    pub(crate) fn emptiness(&self) -> Option<(String, String)> {
        if !self.stories.is_empty() {
            return None;
        }
        let file = match &self.source {
            Source::GitHub { repo } => format!("GitHub {repo}"),
            Source::Linear { team } => format!("Linear team {team}"),
            Source::Jira { project } => format!("Jira project {project}"),
            _ => self.source_file().to_string(),
        };
        let skipped = match self.skipped.len() {
            0 => String::new(),
            n => format!(" ({n} skipped with `x `)"),
        };
        let hint = match self.source {
            Source::StoriesTxt => format!(
                "add `ID | Title` lines to {QUEUE_FILE}, a spec for each under specs/ \
                 (specs.pattern), commit them, then run again"
            ),
            Source::Prd { .. } => format!(
                "add stories to the userStories array of {PRD_FILE}, commit it, then run again"
            ),
            Source::GitHub { ref repo } => format!(
                "label issues of {repo} with backlog.github.label (or `ralph plan PRD.md`), then run again"
            ),
            Source::Linear { ref team } => format!(
                "label issues of Linear team {team} with backlog.linear.label, then run again"
            ),
            Source::Jira { ref project } => format!(
                "label issues of Jira project {project} with backlog.jira.label, then run again"
            ),
        };
        Some((
            format!("the backlog is empty: {file} lists no story to run{skipped}"),
            hint,
        ))
    }
}

/// One story line of stories.txt before spec lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueEntry {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) line: usize,
    pub(crate) section: usize,
}

/// The parsed queue file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Queue {
    pub(crate) entries: Vec<QueueEntry>,
    pub(crate) sections: Vec<Section>,
    pub(crate) skipped: Vec<String>,
}

/// Frontmatter fields ralph uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Frontmatter {
    pub(crate) id: Option<String>,
    pub(crate) title: Option<String>,
    pub(crate) status: Option<String>,
    pub(crate) estimation: Option<String>,
    pub(crate) depends_on: Vec<String>,
    /// The agent CLI this story runs with (`agent: codex`), if not the default.
    pub(crate) agent: Option<String>,
    /// `allow_empty_done: true`: a DONE that changed nothing may land.
    pub(crate) allow_empty_done: bool,
    /// `allow_test_changes: true`: the test gate holds it for review.
    pub(crate) allow_test_changes: bool,
    /// `priority` as written (critical, high, medium, low).
    pub(crate) priority: Option<String>,
    /// `model:` and `effort:` (checked when the story is built).
    pub(crate) model: Option<String>,
    pub(crate) effort: Option<String>,
    /// `best_of:` as written (checked when the story is built).
    pub(crate) best_of: Option<String>,
}

/// Checks a story ID against SPEC 3.4; `Err` carries the reason.
pub(crate) fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("is empty".to_string());
    }
    if id.len() > MAX_ID_LEN {
        return Err(format!(
            "is {} characters long; the limit is {MAX_ID_LEN}",
            id.len()
        ));
    }
    if id.contains("..") {
        return Err("must not contain '..'".to_string());
    }
    if id.starts_with('-') {
        return Err("must not start with '-'".to_string());
    }
    if id.starts_with('.') {
        return Err("must not start with '.'".to_string());
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "must not contain {c:?}; use only letters, digits, '.', '_' and '-'"
        ));
    }
    // The ID becomes part of a git branch name, and git refuses ref components
    // that end in '.' or '.lock'.
    if id.ends_with('.') {
        return Err("must not end with '.'".to_string());
    }
    if id.ends_with(".lock") {
        return Err("must not end with '.lock'".to_string());
    }
    Ok(())
}

const MAX_ID_LEN: usize = 64;
const QUEUE_FILE: &str = paths::QUEUE;
const PRD_FILE: &str = paths::PRD;

/// Resolves `specs.pattern` for `id` to a glob relative to the root.
pub(crate) fn spec_glob(pattern: &str, id: &str) -> String {
    let epic = id.split('.').next().unwrap_or(id);
    pattern.replace("{{epic}}", epic).replace("{{id}}", id)
}

/// Loads the whole backlog of the project at `root`, reporting every problem.
pub(crate) fn load(root: &Path, config: &Config) -> Result<Backlog, Vec<Problem>> {
    match load_partial(root, config) {
        (Some(b), problems) if problems.is_empty() => Ok(b),
        (_, problems) => Err(problems),
    }
}

/// `load` that keeps going: with the problems, the backlog as far as it
/// could be read, so `validate` can check its DAG too. A story whose spec
/// cannot be read stands there with no dependencies of its own (the stories
/// naming it still find it).
pub(crate) fn load_partial(root: &Path, config: &Config) -> (Option<Backlog>, Vec<Problem>) {
    let (backlog, mut problems) = load_any(root, config);
    if let Some(b) = &backlog {
        problems.extend(model_problems(b, config));
    }
    (backlog, problems)
}

/// A story's `model:` for a backend that has no choice of model (Amp,
/// Antigravity, a custom command): refused, naming the file and the key.
fn model_problems(backlog: &Backlog, config: &Config) -> Vec<Problem> {
    backlog
        .stories
        .iter()
        .filter_map(|s| {
            let model = s.model.model.as_ref()?;
            let backend = s.agent.unwrap_or(config.agent.name);
            if backend.model_flag().is_some() {
                return None;
            }
            let file = s
                .spec_path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| backlog.source_file().to_string());
            Some(Problem::new(
                &file,
                None,
                format!(
                    "story {}: model {model:?}, but the {} agent has no choice of model on its \
                     command line; remove `model:` or name another `agent:`",
                    s.id,
                    backend.name()
                ),
            ))
        })
        .collect()
}

fn load_any(root: &Path, config: &Config) -> (Option<Backlog>, Vec<Problem>) {
    if let Some(read) = tracker::snapshot(root, config) {
        return (read.backlog, read.problems);
    }
    let whole = |r: Result<Backlog, Vec<Problem>>| match r {
        Ok(b) => (Some(b), Vec::new()),
        Err(p) => (None, p),
    };
    let queue_path = root.join(QUEUE_FILE);
    let loaded = match std::fs::read_to_string(&queue_path) {
        Ok(text) => return load_queue(root, config, &text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match std::fs::read_to_string(root.join(PRD_FILE)) {
                Ok(text) => load_prd(&text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(vec![Problem::new(
                    QUEUE_FILE,
                    None,
                    format!("no backlog: create {QUEUE_FILE} (ralph init) or {PRD_FILE}"),
                )]),
                Err(e) => Err(vec![Problem::new(
                    PRD_FILE,
                    None,
                    format!("cannot read the file: {e}; check its permissions"),
                )]),
            }
        }
        Err(e) => Err(vec![Problem::new(
            QUEUE_FILE,
            None,
            format!("cannot read the file: {e}; check its permissions"),
        )]),
    };
    whole(loaded)
}

fn load_queue(root: &Path, config: &Config, text: &str) -> (Option<Backlog>, Vec<Problem>) {
    let file = Path::new(QUEUE_FILE);
    let (queue, mut problems) = parse_queue_lenient(text, file);
    let mut finder = SpecFinder::new(root);
    let mut stories = Vec::with_capacity(queue.entries.len());
    for entry in queue.entries {
        match story_of(root, config, &mut finder, &entry) {
            Ok(story) => stories.push(story),
            Err(p) => {
                problems.push(p);
                stories.push(stub(&entry));
            }
        }
    }
    let backlog = Backlog {
        source: Source::StoriesTxt,
        stories,
        sections: queue.sections,
        skipped: queue.skipped,
    };
    (Some(backlog), problems)
}

/// The story of one stories.txt line, read from its spec; the first problem
/// found with it, for which `load_queue` puts its stub in its place.
fn story_of(
    root: &Path,
    config: &Config,
    finder: &mut SpecFinder,
    entry: &QueueEntry,
) -> Result<Story, Problem> {
    let file = Path::new(QUEUE_FILE);
    let pattern = spec_glob(&config.specs.pattern, &entry.id);
    let matches = finder.find(&pattern);
    let spec = match matches.as_slice() {
        [one] => one.clone(),
        [] => {
            let mut p = Problem::new(
                file,
                Some(entry.line),
                format!(
                    "story {}: no spec file matches {pattern}; create the spec or fix specs.pattern in {}",
                    entry.id,
                    paths::CONFIG
                ),
            );
            // A consequence of the pattern: `project::load` drops these
            // when the pattern itself was the config's problem.
            p.key = Some("specs.pattern".to_string());
            return Err(p);
        }
        many => {
            let names: Vec<String> = many.iter().map(|p| p.display().to_string()).collect();
            return Err(Problem::new(
                file,
                Some(entry.line),
                format!(
                    "story {}: {} spec files match {pattern} ({}); keep exactly one",
                    entry.id,
                    many.len(),
                    names.join(", ")
                ),
            ));
        }
    };
    let (fm, files, named, spec_bytes) = match std::fs::read_to_string(root.join(&spec)) {
        Ok(spec_text) => match parse_frontmatter(&spec_text, &spec) {
            Ok(fm) => (
                fm,
                files::spec_files(&spec_text),
                files::named_paths(&spec_text),
                spec_text.len(),
            ),
            Err(p) => return Err(p),
        },
        Err(e) => {
            return Err(Problem::new(
                &spec,
                None,
                format!("cannot read the spec of story {}: {e}", entry.id),
            ));
        }
    };
    let agent = frontmatter_word(
        &spec,
        fm.agent.as_deref(),
        crate::agent::Backend::parse,
        |name| {
            format!(
                "story {}: unknown agent {name:?} in the frontmatter; one of: {}",
                entry.id,
                crate::agent::Backend::names()
            )
        },
    )?;
    let effort = frontmatter_word(&spec, fm.effort.as_deref(), Effort::parse, |word| {
        format!(
            "story {}: effort {word:?} in the frontmatter is not low, medium or high",
            entry.id
        )
    })?;
    let best_of = frontmatter_word(&spec, fm.best_of.as_deref(), parse_best_of, |word| {
        format!(
            "story {}: best_of {word:?} in the frontmatter is not a whole number of at least 1; \
             write best_of: 3, say, or remove it",
            entry.id
        )
    })?;
    let model = ModelChoice {
        model: fm.model.map(|m| m.trim().to_string()),
        effort,
        best_of,
    };
    let title = if !entry.title.is_empty() {
        entry.title.clone()
    } else if let Some(t) = fm.title.filter(|t| !t.trim().is_empty()) {
        t.trim().to_string()
    } else {
        title_from_filename(&spec, &entry.id)
    };
    Ok(Story {
        id: entry.id.clone(),
        title,
        line: entry.line,
        section: entry.section,
        spec_path: Some(spec),
        depends_on: fm.depends_on,
        estimation: fm.estimation,
        agent,
        allow_empty_done: fm.allow_empty_done,
        allow_test_changes: fm.allow_test_changes,
        prd_passes: false,
        model,
        prd_spec: None,
        priority: files::priority_rank(fm.priority.as_deref()),
        files,
        named,
        spec_bytes,
    })
}

/// A story's `best_of`: a whole number of at least 1.
pub(crate) fn parse_best_of(word: &str) -> Option<u32> {
    word.trim().parse().ok().filter(|&n| n >= 1)
}

/// A frontmatter word read with `parse`: none when the spec does not give
/// it, else its value, or the spec's problem in `refused`'s words.
fn frontmatter_word<T>(
    spec: &Path,
    word: Option<&str>,
    parse: impl Fn(&str) -> Option<T>,
    refused: impl FnOnce(&str) -> String,
) -> Result<Option<T>, Problem> {
    let Some(w) = word else { return Ok(None) };
    parse(w)
        .map(Some)
        .ok_or_else(|| Problem::new(spec, None, refused(w)))
}

/// A story whose spec could not be read, for `load_partial`: it stands in
/// the DAG without dependencies of its own.
fn stub(entry: &QueueEntry) -> Story {
    Story {
        line: entry.line,
        section: entry.section,
        ..Story::bare(entry.id.clone(), entry.title.clone())
    }
}

/// `story-10.2-average-per-month-column.md` → `Average Per Month Column`.
fn title_from_filename(spec: &Path, id: &str) -> String {
    let stem = spec
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let slug = match stem.find(id) {
        Some(i) => &stem[i + id.len()..],
        None => stem,
    };
    let words: Vec<String> = slug
        .split(['-', '_', ' '])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            match chars.next() {
                Some(c) => c.to_uppercase().chain(chars).collect(),
                None => String::new(),
            }
        })
        .collect();
    if words.is_empty() {
        format!("Story {id}")
    } else {
        words.join(" ")
    }
}

/// Finds spec files for resolved patterns. Globbing each story separately
/// would list the same epic directory once per story; instead each directory is
/// listed once and file names are matched in memory.
struct SpecFinder<'r> {
    root: &'r Path,
    /// Directory (relative) → its sorted file names.
    dirs: HashMap<String, Vec<String>>,
}

impl<'r> SpecFinder<'r> {
    fn new(root: &'r Path) -> Self {
        SpecFinder {
            root,
            dirs: HashMap::new(),
        }
    }

    /// Sorted matches, relative to the root.
    fn find(&mut self, pattern: &str) -> Vec<PathBuf> {
        let (dir, name) = match pattern.rfind('/') {
            Some(i) => (&pattern[..i], &pattern[i + 1..]),
            None => ("", pattern),
        };
        if has_glob_meta(dir) {
            return self.find_slow(pattern);
        }
        let Ok(name_pattern) = glob::Pattern::new(name) else {
            return Vec::new();
        };
        let root = self.root;
        let names = self
            .dirs
            .entry(dir.to_string())
            .or_insert_with(|| list_files(&root.join(dir)));
        // Names are sorted, so every candidate shares the literal prefix and
        // sits in one contiguous run.
        let prefix = &name[..name.find(['*', '?', '[']).unwrap_or(name.len())];
        let start = names.partition_point(|n| n.as_str() < prefix);
        names[start..]
            .iter()
            .take_while(|n| n.starts_with(prefix))
            .filter(|n| name_pattern.matches(n))
            .map(|n| {
                if dir.is_empty() {
                    PathBuf::from(n)
                } else {
                    Path::new(dir).join(n)
                }
            })
            .collect()
    }

    fn find_slow(&self, pattern: &str) -> Vec<PathBuf> {
        let full = self.root.join(pattern);
        let Some(full) = full.to_str() else {
            return Vec::new();
        };
        let Ok(paths) = glob::glob(full) else {
            return Vec::new();
        };
        let mut out: Vec<PathBuf> = paths
            .filter_map(Result::ok)
            .filter(|p| p.is_file())
            .map(|p| {
                p.strip_prefix(self.root)
                    .map(Path::to_path_buf)
                    .unwrap_or(p)
            })
            .collect();
        out.sort();
        out
    }
}

fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

fn list_files(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = rd
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// The text that goes into the prompt as `{{SPEC_CONTENT}}`.
pub(crate) fn spec_text(root: &Path, story: &Story) -> std::io::Result<String> {
    match (&story.spec_path, &story.prd_spec) {
        (Some(p), _) => std::fs::read_to_string(root.join(p)),
        (None, Some(s)) => Ok(s.clone()),
        (None, None) => Ok(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::mark_done::set_status_done;
    use super::*;

    fn q(text: &str) -> Queue {
        parse_queue(text, Path::new(QUEUE_FILE)).unwrap()
    }

    fn queue_problems(text: &str) -> Vec<String> {
        parse_queue(text, Path::new(QUEUE_FILE))
            .unwrap_err()
            .iter()
            .map(|p| p.to_string())
            .collect()
    }

    fn ids(queue: &Queue) -> Vec<&str> {
        queue.entries.iter().map(|e| e.id.as_str()).collect()
    }

    #[test]
    fn ids_are_checked() {
        for good in ["1.1", "3.1.2", "US-001", "a_b", "X", &"9".repeat(64)] {
            assert_eq!(check_id(good), Ok(()), "{good}");
        }
        let bad = [
            ("", "is empty"),
            ("--force", "must not start with '-'"),
            ("../x", "must not contain '..'"),
            ("1..2", "must not contain '..'"),
            (".hidden", "must not start with '.'"),
            ("a b", "must not contain ' '"),
            ("a/b", "must not contain '/'"),
            ("a\u{7}b", "must not contain '\\u{7}'"),
            ("1.", "must not end with '.'"),
            ("x.lock", "must not end with '.lock'"),
            ("é", "must not contain 'é'"),
        ];
        for (id, reason) in bad {
            let err = check_id(id).unwrap_err();
            assert!(err.starts_with(reason), "{id:?}: {err}");
        }
        let long = "1".repeat(65);
        assert_eq!(
            check_id(&long).unwrap_err(),
            "is 65 characters long; the limit is 64"
        );
    }

    #[test]
    fn queue_grammar() {
        let text = "# Title comment\n  # indented comment\n1.1 | First\n1.2|Second  \r\n\n   \n\t\nx 1.3 | Skipped\nx\t1.4\nx1.5 | Not skipped\n1.6\n\"1.7\" | Quoted\n";
        let queue = q(text);
        assert_eq!(ids(&queue), ["1.1", "1.2", "x1.5", "1.6", "1.7"]);
        assert_eq!(queue.skipped, ["1.3", "1.4"]);
        assert_eq!(queue.entries[1].title, "Second");
        assert_eq!(queue.entries[1].line, 4);
        assert_eq!(queue.entries[3].title, "");
        assert_eq!(
            queue.sections,
            [Section {
                label: None,
                chain: true
            }]
        );
        assert!(queue.entries.iter().all(|e| e.section == 0));
    }

    #[test]
    fn batch_sections() {
        let text = "1.1 | A\n# [batch:1]\n2.1 | B\n# Epic 3 comment keeps the batch\n3.1 | C\n#[batch:31.5] trailing text\n4.1 | D\n# [batch:0]\n5.1 | E\n# [batch:1]\n6.1 | F\n# [batch:2]\n";
        let queue = q(text);
        let labels: Vec<(Option<&str>, bool)> = queue
            .sections
            .iter()
            .map(|s| (s.label.as_deref(), s.chain))
            .collect();
        assert_eq!(
            labels,
            [
                (None, true),
                (Some("1"), false),
                (Some("31.5"), false),
                (Some("0"), true),
                (Some("1"), false),
                (Some("2"), false),
            ]
        );
        let sections: Vec<usize> = queue.entries.iter().map(|e| e.section).collect();
        assert_eq!(sections, [0, 1, 1, 2, 3, 4]);
    }

    #[test]
    fn a_queue_starting_with_a_batch_has_no_head_section() {
        let queue = q("# [batch:1]\n1.1 | A\n");
        assert_eq!(
            queue.sections,
            [Section {
                label: Some("1".into()),
                chain: false
            }]
        );
        assert_eq!(queue.entries[0].section, 0);
    }

    #[test]
    fn empty_queue_is_fine() {
        let queue = q("# nothing yet\n\n");
        assert!(queue.entries.is_empty());
    }

    #[test]
    fn queue_problems_name_lines() {
        let problems = queue_problems(
            "1.1 | A\n../x | Escape\n--force\na b | Spaced\n1.1 | Again\n# [batch:abc]\n# [batch 2]\n# [batch:1.]\n",
        );
        assert_eq!(
            problems,
            [
                ".ralph/stories.txt:2: invalid story ID \"../x\": it must not contain '..'; fix the ID on this line",
                ".ralph/stories.txt:3: invalid story ID \"--force\": it must not start with '-'; fix the ID on this line",
                ".ralph/stories.txt:4: invalid story ID \"a b\": it must not contain ' '; use only letters, digits, '.', '_' and '-'; fix the ID on this line",
                ".ralph/stories.txt:5: story 1.1 is listed twice (lines 1 and 5); remove one of them",
                ".ralph/stories.txt:6: malformed batch line \"# [batch:abc]\"; write `# [batch:N]` with N a number such as 1 or 31.5",
                ".ralph/stories.txt:7: malformed batch line \"# [batch 2]\"; write `# [batch:N]` with N a number such as 1 or 31.5",
                ".ralph/stories.txt:8: malformed batch line \"# [batch:1.]\"; write `# [batch:N]` with N a number such as 1 or 31.5",
            ]
        );
        let long = format!("{} | Long\n", "1".repeat(65));
        assert!(queue_problems(&long)[0].contains("65 characters long"));
    }

    fn fm(text: &str) -> Frontmatter {
        parse_frontmatter(text, Path::new("spec.md")).unwrap()
    }

    fn fm_err(text: &str) -> Problem {
        parse_frontmatter(text, Path::new("spec.md")).unwrap_err()
    }

    #[test]
    fn allow_empty_done_is_a_boolean_frontmatter_key() {
        assert!(!fm("---\nid: 1.1\n---\n").allow_empty_done);
        assert!(fm("---\nallow_empty_done: true\n---\n").allow_empty_done);
        assert!(fm("---\nallow_empty_done: \"true\"\n---\n").allow_empty_done);
        assert!(!fm("---\nallow_empty_done: false\n---\n").allow_empty_done);
        let p = fm_err("---\nid: 1.1\nallow_empty_done: maybe\n---\n");
        assert_eq!(p.line, Some(3));
        assert!(p
            .message
            .contains("allow_empty_done must be true or false, got maybe"));
    }

    #[test]
    fn frontmatter_forms() {
        assert_eq!(fm("# No frontmatter\nstatus: x\n"), Frontmatter::default());
        assert_eq!(fm("---\n---\nbody"), Frontmatter::default());
        let full = fm("---\nid: \"3.1\"\nepic: 3\ntitle: \"CLI\"\nstatus: pending\npriority: high\nestimation: medium\ndepends_on: [2.1, 2.2, 2.3]\n---\n# Body\n");
        assert_eq!(
            full,
            Frontmatter {
                id: Some("3.1".into()),
                title: Some("CLI".into()),
                status: Some("pending".into()),
                estimation: Some("medium".into()),
                depends_on: vec!["2.1".into(), "2.2".into(), "2.3".into()],
                agent: None,
                allow_empty_done: false,
                allow_test_changes: false,
                priority: Some("high".into()),
                model: None,
                effort: None,
                best_of: None,
            }
        );
        assert_eq!(
            fm("---\ndepends_on:\n  - 1.2\n  - \"US-001\"\n  - 1.10 # ten\n---\n").depends_on,
            ["1.2", "US-001", "1.10"]
        );
        assert_eq!(
            fm("---\ndepends_on:\n- 1.10\n- 2\nstatus: x\n---\n").depends_on,
            ["1.10", "2"]
        );
        assert_eq!(
            fm("---\ndepends_on: [1.10, '1.20', US-3, 7]\n---\n").depends_on,
            ["1.10", "1.20", "US-3", "7"]
        );
        assert_eq!(fm("---\ndepends_on: 1.10\n---\n").depends_on, ["1.10"]);
        assert_eq!(
            fm("---\ndepends_on: \"1.2, 1.3\"\n---\n").depends_on,
            ["1.2", "1.3"]
        );
        assert!(fm("---\ndepends_on:\n---\n").depends_on.is_empty());
        assert!(fm("---\ndepends_on: null\n---\n").depends_on.is_empty());
        assert!(fm("---\ndepends_on: []\n---\n").depends_on.is_empty());
        assert!(fm("---\nstatus: pending\n---\n").depends_on.is_empty());
        assert_eq!(fm("---\nid: 1.10\n---\n").id.as_deref(), Some("1.10"));
        assert_eq!(
            fm("---\r\nstatus: done\r\n---\r\nbody\r\n")
                .status
                .as_deref(),
            Some("done")
        );
        // The compat fixture's extra keys are ignored.
        assert_eq!(
            fm("---\nstatus: pending\ndepends_on: []\nvalidation_commands: [\"npm test\"]\n---\n")
                .status
                .as_deref(),
            Some("pending")
        );
    }

    #[test]
    fn frontmatter_problems() {
        let p = fm_err("---\nid: 1.1\ntitle: [unclosed\nstatus: x\n---\nbody\n");
        assert_eq!(p.file, Path::new("spec.md"));
        assert!(
            p.message.starts_with("invalid YAML in the frontmatter"),
            "{p}"
        );
        assert_eq!(p.line, Some(4), "{p}");
        assert!(p.message.contains("at line 4 column 7"), "{p}");
        let p = fm_err("---\nid: 1.1\nstatus: a: b\n---\n");
        assert_eq!(p.line, Some(3), "{p}");

        let p = fm_err("---\nid: 1.1\nstatus: pending\n# body without a fence\n");
        assert_eq!(p.line, Some(1));
        assert!(p.message.contains("never closed"), "{p}");

        let p = fm_err("---\nstatus: x\ndepends_on: [1.1, ../etc, {a: 1}]\n---\n");
        assert_eq!(p.line, Some(3));
        assert!(
            p.message.contains("\"../etc\" is not a valid story ID"),
            "{p}"
        );
        assert!(
            p.message
                .contains("depends_on entry a: 1 is not a story ID"),
            "{p}"
        );

        let p = fm_err("---\n- just\n- a list\n---\n");
        assert!(p.message.contains("key: value"), "{p}");
    }

    #[test]
    fn status_done_edits_only_the_frontmatter() {
        let text =
            "---\nid: \"1.1\"\nstatus: pending\ndepends_on: []\n---\n# Body\nstatus: pending\n";
        assert_eq!(
            set_status_done(text, "status"),
            "---\nid: \"1.1\"\nstatus: done\ndepends_on: []\n---\n# Body\nstatus: pending\n"
        );
        assert_eq!(
            set_status_done("---\nid: 1\n---\nstatus: x\n", "status"),
            "---\nid: 1\nstatus: done\n---\nstatus: x\n"
        );
        assert_eq!(
            set_status_done("# Title\n", "state"),
            "---\nstate: done\n---\n# Title\n"
        );
        assert_eq!(set_status_done("", "status"), "---\nstatus: done\n---\n");
        assert_eq!(
            set_status_done(
                "---\r\nstatus: pending\r\nid: 2\r\n---\r\nstatus: x\r\n",
                "status"
            ),
            "---\r\nstatus: done\r\nid: 2\r\n---\r\nstatus: x\r\n"
        );
        assert_eq!(
            set_status_done("---\r\nid: 2\r\n---\r\nbody\r\n", "status"),
            "---\r\nid: 2\r\nstatus: done\r\n---\r\nbody\r\n"
        );
        // "statuses:" is another key, and a nested "status:" is not top-level.
        assert_eq!(
            set_status_done("---\nstatuses: a\nmeta:\n  status: b\n---\n", "status"),
            "---\nstatuses: a\nmeta:\n  status: b\nstatus: done\n---\n"
        );
        let done = set_status_done("---\nstatus: pending\n---\n", "status");
        assert_eq!(fm(&done).status.as_deref(), Some("done"));
        assert_eq!(set_status_done(&done, "status"), done);
    }

    #[test]
    fn spec_glob_substitutes() {
        let pattern = "specs/epic-{{epic}}/story-{{id}}-*.md";
        assert_eq!(spec_glob(pattern, "3.1.2"), "specs/epic-3/story-3.1.2-*.md");
        assert_eq!(
            spec_glob(pattern, "US-001"),
            "specs/epic-US-001/story-US-001-*.md"
        );
    }

    #[test]
    fn titles_from_filenames() {
        let p = Path::new("specs/epic-10/story-10.2-average-per-month-column.md");
        assert_eq!(title_from_filename(p, "10.2"), "Average Per Month Column");
        assert_eq!(
            title_from_filename(Path::new("x/story-1.1.md"), "1.1"),
            "Story 1.1"
        );
    }

    fn config() -> Config {
        crate::config::from_value(crate::config::defaults(), Path::new(".ralph/config.json"))
            .unwrap()
    }

    fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    #[test]
    fn best_of_in_the_frontmatter_is_a_whole_number_of_at_least_one() {
        let dir = project(&[
            (".ralph/stories.txt", "1.1\n1.2\n"),
            ("specs/epic-1/story-1.1-a.md", "---\nbest_of: 3\n---\n"),
            ("specs/epic-1/story-1.2-b.md", "no frontmatter\n"),
        ]);
        let b = load(dir.path(), &config()).unwrap();
        let got: Vec<Option<u32>> = b.stories.iter().map(|s| s.model.best_of).collect();
        assert_eq!(got, [Some(3), None]);
        for bad in ["0", "two", "-1"] {
            let dir = project(&[
                (".ralph/stories.txt", "1.1\n"),
                (
                    "specs/epic-1/story-1.1-a.md",
                    &format!("---\nbest_of: {bad}\n---\n"),
                ),
            ]);
            let problems = load(dir.path(), &config()).unwrap_err();
            assert!(
                problems[0].to_string().contains("best_of"),
                "{bad}: {problems:?}"
            );
        }
    }

    #[test]
    fn load_stories_txt() {
        let dir = project(&[
            (
                ".ralph/stories.txt",
                "1.1 | From queue\n1.2\n1.10\nx 1.3 | skipped\n# [batch:1]\n2.1\n",
            ),
            ("specs/epic-1/story-1.1-a.md", "---\ntitle: ignored\n---\n"),
            ("specs/epic-1/story-1.2-second-thing.md", "no frontmatter\n"),
            (
                "specs/epic-1/story-1.10-tenth.md",
                "---\ntitle: \"Tenth story\"\ndepends_on: [1.1]\nestimation: large\n---\n",
            ),
            (
                "specs/epic-2/story-2.1-b.md",
                "---\nid: \"9.9\"\ndepends_on:\n  - 1.10\n  - 1.3\n---\n",
            ),
        ]);
        let b = load(dir.path(), &config()).unwrap();
        assert_eq!(b.source, Source::StoriesTxt);
        let got: Vec<(&str, &str, usize, &[String])> = b
            .stories
            .iter()
            .map(|s| {
                (
                    s.id.as_str(),
                    s.title.as_str(),
                    s.section,
                    s.depends_on.as_slice(),
                )
            })
            .collect();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            got,
            [
                ("1.1", "From queue", 0, &s(&[])[..]),
                ("1.2", "Second Thing", 0, &s(&[])[..]),
                ("1.10", "Tenth story", 0, &s(&["1.1"])[..]),
                ("2.1", "B", 1, &s(&["1.10", "1.3"])[..]),
            ]
        );
        assert_eq!(b.stories[2].estimation.as_deref(), Some("large"));
        assert_eq!(
            b.stories[2].spec_path.as_deref(),
            Some(Path::new("specs/epic-1/story-1.10-tenth.md"))
        );
        assert_eq!(b.skipped, ["1.3"]);
        assert_eq!(b.index_of("2.1"), Some(3));
    }

    #[test]
    fn load_collects_every_problem() {
        let dir = project(&[
            (
                ".ralph/stories.txt",
                "1.1 | A\n1.2 | B\n1.3 | C\nbad id | D\n1.4 | E\n",
            ),
            ("specs/epic-1/story-1.1-a.md", "---\nstatus: [\n---\n"),
            ("specs/epic-1/story-1.2-b.md", "b"),
            ("specs/epic-1/story-1.2-b-copy.md", "b"),
            ("specs/epic-1/story-1.4-e.md", "---\nstatus: pending\n"),
        ]);
        let problems: Vec<String> = load(dir.path(), &config())
            .unwrap_err()
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert!(problems[0].starts_with(".ralph/stories.txt:4: invalid story ID \"bad id\""));
        assert!(
            problems[1].starts_with("specs/epic-1/story-1.1-a.md:"),
            "{}",
            problems[1]
        );
        assert_eq!(
            problems[2],
            ".ralph/stories.txt:2: story 1.2: 2 spec files match specs/epic-1/story-1.2-*.md (specs/epic-1/story-1.2-b-copy.md, specs/epic-1/story-1.2-b.md); keep exactly one"
        );
        assert_eq!(
            problems[3],
            ".ralph/stories.txt:3: story 1.3: no spec file matches specs/epic-1/story-1.3-*.md; create the spec or fix specs.pattern in .ralph/config.json"
        );
        assert!(
            problems[4].starts_with("specs/epic-1/story-1.4-e.md:1: "),
            "{}",
            problems[4]
        );
    }

    #[test]
    fn load_with_a_globbed_directory_pattern() {
        let dir = project(&[
            (".ralph/stories.txt", "1.1\n"),
            ("docs/specs/epic-1/story-1.1-found-it.md", ""),
        ]);
        let mut c = config();
        c.specs.pattern = "*/specs/epic-{{epic}}/story-{{id}}-*.md".into();
        let b = load(dir.path(), &c).unwrap();
        assert_eq!(
            b.stories[0].spec_path.as_deref(),
            Some(Path::new("docs/specs/epic-1/story-1.1-found-it.md"))
        );
        assert_eq!(b.stories[0].title, "Found It");
    }

    #[test]
    fn load_without_a_backlog() {
        let dir = tempfile::tempdir().unwrap();
        let p = load(dir.path(), &config()).unwrap_err();
        assert_eq!(
            p[0].message,
            "no backlog: create .ralph/stories.txt (ralph init) or prd.json"
        );
    }

    #[test]
    fn load_prd_json() {
        let prd = r#"{
  "branchName": "ralph/feature",
  "userStories": [
    {"id": "US-002", "title": "Second", "priority": 2, "passes": false,
     "description": "Do the second thing.", "acceptanceCriteria": ["works", "tested"],
     "dependsOn": ["US-001"]},
    {"id": "US-001", "title": "First", "priority": 1, "passes": true,
     "acceptanceCriteria": "just one"},
    {"id": "US-003", "title": "Third", "priority": 2, "files": ["./src/a.rs", "docs/"]}
  ]
}"#;
        let dir = project(&[("prd.json", prd)]);
        let b = load(dir.path(), &config()).unwrap();
        assert_eq!(
            b.source,
            Source::Prd {
                branch: Some("ralph/feature".into())
            }
        );
        let order: Vec<&str> = b.stories.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(order, ["US-001", "US-002", "US-003"]);
        assert!(b.stories[0].prd_passes);
        assert_eq!(b.stories[1].depends_on, ["US-001"]);
        // Equal numeric priorities share a rank; lower numbers rank first.
        let ranks: Vec<u32> = b.stories.iter().map(|s| s.priority).collect();
        assert_eq!(ranks, [0, 1, 1]);
        assert_eq!(b.stories[2].files, ["src/a.rs", "docs/"]);
        assert!(b.stories[0].files.is_empty());
        assert_eq!(
            b.stories[1].prd_spec.as_deref(),
            Some("# Story US-002: Second\n\n## Description\n\nDo the second thing.\n\n## Acceptance Criteria\n\n- works\n- tested\n")
        );
        assert_eq!(
            b.sections,
            [Section {
                label: None,
                chain: false
            }]
        );
        assert!(b
            .stories
            .iter()
            .all(|s| s.section == 0 && s.spec_path.is_none()));
        assert_eq!(
            spec_text(dir.path(), &b.stories[0]).unwrap(),
            "# Story US-001: First\n\n## Acceptance Criteria\n\n- just one\n"
        );
    }

    #[test]
    fn prd_problems() {
        let prd = "{\"userStories\": [\n  {\"id\": \"a b\"},\n  {\"id\": \"X\", \"passes\": 3},\n  {\"id\": \"X\"},\n  {\"title\": \"no id\"},\n  {\"id\": \"Y\", \"files\": \"src\"}\n]}";
        let dir = project(&[("prd.json", prd)]);
        let problems: Vec<String> = load(dir.path(), &config())
            .unwrap_err()
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert!(problems[4].starts_with("prd.json:6: story Y: \"files\" must be an array of paths"));
        assert!(problems[0].starts_with("prd.json:2: userStories[0]: invalid story ID \"a b\""));
        assert!(problems[1].starts_with("prd.json:3: story X: \"passes\" must be true or false"));
        assert!(problems[2].contains("appears twice"));
        assert!(problems[3].contains("userStories[3] has no \"id\""));

        let dir = project(&[("prd.json", "{\n  \"userStories\": [,]\n}")]);
        let p = load(dir.path(), &config()).unwrap_err();
        assert_eq!(p[0].line, Some(2));
        let dir = project(&[("prd.json", "{}")]);
        assert!(load(dir.path(), &config()).unwrap_err()[0]
            .message
            .contains("userStories"));
    }

    /// Our own Ralph v2 projects and files (`tests/fixtures/ralph-v2/`).
    fn compat() -> PathBuf {
        crate::testenv::fixture("ralph-v2")
    }

    #[test]
    fn compat_sandboxes_load() {
        let base = compat();
        let expect = [
            ("batched", vec!["1.1", "1.2", "2.1", "2.2", "3.1"], 4),
            (
                "parallel",
                vec!["1.1", "1.2", "2.1", "2.2", "2.3", "3.1"],
                3,
            ),
            ("sequential", vec!["1.1", "1.2", "1.3"], 1),
        ];
        for (run, ids, sections) in expect {
            let root = base.join(run);
            let config = crate::config::load(&root).unwrap();
            let b = load(&root, &config).unwrap_or_else(|p| panic!("{run}: {p:#?}"));
            let got: Vec<&str> = b.stories.iter().map(|s| s.id.as_str()).collect();
            assert_eq!(got, ids, "{run}");
            // batched and parallel start with a comment, not a batch line,
            // so they have no head section; batched's first batch is "0".
            assert!(b.sections.len() <= sections, "{run}: {:?}", b.sections);
            assert!(b
                .stories
                .iter()
                .all(|s| s.spec_path.is_some() && !s.title.is_empty()));
        }
        let root = base.join("parallel");
        let b = load(&root, &crate::config::load(&root).unwrap()).unwrap();
        assert_eq!(b.stories[5].depends_on, ["2.1", "2.2", "2.3"]);
        assert_eq!(b.stories[0].title, "Create the recipe store");
        // Ralph v2's "Files to Create/Modify" and frontmatter priority.
        assert_eq!(
            b.stories[0].files,
            ["src/store.sh", "src/common.sh", "data/"]
        );
        let ranks: Vec<u32> = b.stories.iter().map(|s| s.priority).collect();
        assert_eq!(
            ranks,
            [1, 1, 1, 1, 2, 1],
            "high, high, high, high, medium, high"
        );
    }

    #[test]
    fn compat_fixtures_parse() {
        let fixtures = compat().join("files");
        let queue = parse_queue(
            &std::fs::read_to_string(fixtures.join("stories.txt")).unwrap(),
            Path::new(QUEUE_FILE),
        )
        .unwrap();
        assert_eq!(ids(&queue), ["1.1", "1.2", "2.1", "2.2", "3.1"]);
        assert_eq!(queue.skipped, ["1.3"]);
        let sections: Vec<usize> = queue.entries.iter().map(|e| e.section).collect();
        assert_eq!(sections, [0, 0, 1, 1, 1]);

        let mut specs = 0;
        for dir in ["specs", "pipeline/specs"] {
            for entry in glob::glob(fixtures.join(dir).join("*/*.md").to_str().unwrap()).unwrap() {
                let path = entry.unwrap();
                let text = std::fs::read_to_string(&path).unwrap();
                parse_frontmatter(&text, &path).unwrap_or_else(|p| panic!("{p}"));
                specs += 1;
            }
        }
        assert_eq!(specs, 14);
        let with_deps =
            std::fs::read_to_string(fixtures.join("specs/epic-2/story-2.3-with-depends.md"))
                .unwrap();
        assert_eq!(
            parse_frontmatter(&with_deps, Path::new("x"))
                .unwrap()
                .depends_on,
            ["2.1", "2.2"]
        );

        // The pipeline fixture is a whole project except that its config sits
        // next to the queue; lay it out as ralph expects, without copying specs.
        let pipeline = fixtures.join("pipeline");
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join(".ralph")).unwrap();
        std::fs::copy(
            pipeline.join("stories.txt"),
            root.path().join(".ralph/stories.txt"),
        )
        .unwrap();
        std::os::unix::fs::symlink(pipeline.join("specs"), root.path().join("specs")).unwrap();
        let text = std::fs::read_to_string(pipeline.join("config.json")).unwrap();
        let mut merged = crate::config::defaults();
        crate::config::deep_merge(&mut merged, serde_json::from_str(&text).unwrap());
        let config = crate::config::from_value(merged, Path::new("config.json")).unwrap();
        let b = load(root.path(), &config).unwrap();
        let got: Vec<&str> = b.stories.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            got,
            ["1.1", "1.2", "2.1", "2.2", "2.3", "3.1", "3.2", "4.1", "4.2"]
        );
        assert_eq!(b.skipped, ["1.3"]);
        let labels: Vec<Option<&str>> = b.sections.iter().map(|s| s.label.as_deref()).collect();
        assert_eq!(labels, [None, Some("1"), Some("0"), Some("2")]);
    }
}
