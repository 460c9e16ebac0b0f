//! Trust gates before landing (issue 26), as pure functions over a plain
//! diff: what a story's work did to the tests and to the commands that
//! check it (`test_integrity`), and whether a conflict fix-up kept what the
//! target gained meanwhile (`lost_lines`). The findings are data; the
//! transition (`run/transition/gates.rs`) decides what follows, and
//! `gitops` reads the diff.

mod patterns;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub(crate) use patterns::{Patterns, UserPatterns};

/// One file the diff touches. Added: no old side; deleted: no new side;
/// renamed: both paths, different. A text is `None` on a missing side and
/// for a file too large or not UTF-8 (nothing is read into it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FileChange {
    pub(crate) old_path: Option<String>,
    pub(crate) new_path: Option<String>,
    pub(crate) old_text: Option<String>,
    pub(crate) new_text: Option<String>,
}

/// What a story's commits changed against their base, file by file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Diff {
    pub(crate) files: Vec<FileChange>,
}

/// What a gate found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FindingKind {
    /// A test file deleted, or renamed to a path that is no test file.
    TestFileDeleted,
    /// A test function gone, and no test of that name added anywhere.
    TestRemoved,
    /// A skip or ignore marker added.
    SkipAdded,
    /// Fewer assertion lines in the test files than before.
    AssertionsLost,
    /// The validation commands' own configuration changed.
    ValidationConfigChanged,
    /// Lines the target gained since the story began are gone from the
    /// merged tree (a conflict resolved by taking one side).
    OtherSideLost,
    /// A gate could not read the work (git failed): nothing was checked,
    /// so a person looks (issue 33: this passed silently before).
    GateError,
}

impl FindingKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            FindingKind::TestFileDeleted => "test_file_deleted",
            FindingKind::TestRemoved => "test_removed",
            FindingKind::SkipAdded => "skip_added",
            FindingKind::AssertionsLost => "assertions_lost",
            FindingKind::ValidationConfigChanged => "validation_config_changed",
            FindingKind::OtherSideLost => "other_side_lost",
            FindingKind::GateError => "gate_error",
        }
    }

    /// The findings a `TESTS_CHANGED` tag or `allow_test_changes` answers
    /// (the rest, lost lines, a `DROPS` tag).
    pub(crate) fn is_test_change(self) -> bool {
        !matches!(self, FindingKind::OtherSideLost | FindingKind::GateError)
    }
}

/// One finding: its kind, where, and what changed, in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Finding {
    pub(crate) kind: FindingKind,
    pub(crate) file: String,
    /// 1-based, in the side that has the thing (the old side for what was
    /// removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u32>,
    pub(crate) what: String,
}

impl Finding {
    /// `file:line: what (kind)`, one line.
    pub(crate) fn line_text(&self) -> String {
        let at = match self.line {
            Some(l) => format!("{}:{l}", self.file),
            None => self.file.clone(),
        };
        format!("{at}: {} [{}]", self.what, self.kind.name())
    }
}

/// Findings of the test-integrity gate over a story's diff against its
/// base. A test moved to another file (removed here, added there under the
/// same name) is no finding; nor are assertions moved with it.
pub(crate) fn test_integrity(diff: &Diff, p: &Patterns) -> Vec<Finding> {
    let mut out = Vec::new();
    for f in &diff.files {
        if let Some(old) = &f.old_path {
            let gone = match &f.new_path {
                None => Some("test file deleted".to_string()),
                Some(new) if new != old && p.is_test_file(old) && !p.is_test_file(new) => {
                    Some(format!("test file renamed to {new}, which is no test file"))
                }
                _ => None,
            };
            if let (Some(what), true) = (gone, p.is_test_file(old)) {
                out.push(Finding {
                    kind: FindingKind::TestFileDeleted,
                    file: old.clone(),
                    line: None,
                    what,
                });
            }
        }
    }
    out.extend(removed_tests(diff, p));
    out.extend(added_skips(diff, p));
    out.extend(lost_assertions(diff, p));
    out.extend(validation_changes(diff, p));
    out
}

/// Tests by name on each side of the whole diff: a name that leaves one
/// file and arrives in another was moved, not removed.
fn removed_tests(diff: &Diff, p: &Patterns) -> Vec<Finding> {
    let mut added: BTreeMap<String, usize> = BTreeMap::new();
    for f in &diff.files {
        if let (Some(path), Some(text)) = (&f.new_path, &f.new_text) {
            for (name, _) in p.test_names(path, text) {
                *added.entry(name).or_default() += 1;
            }
        }
    }
    let mut out = Vec::new();
    for f in &diff.files {
        let (Some(path), Some(text)) = (&f.old_path, &f.old_text) else {
            continue;
        };
        for (name, line) in p.test_names(path, text) {
            match added.get_mut(&name) {
                Some(n) if *n > 0 => *n -= 1,
                _ => out.push(Finding {
                    kind: FindingKind::TestRemoved,
                    file: path.clone(),
                    line: Some(line),
                    what: format!("test `{name}` removed"),
                }),
            }
        }
    }
    out
}

/// Skip markers on the new side that the old side did not have (counted
/// per trimmed line, so a moved skip is no new one).
fn added_skips(diff: &Diff, p: &Patterns) -> Vec<Finding> {
    let mut out = Vec::new();
    for f in &diff.files {
        let (Some(path), Some(new)) = (&f.new_path, &f.new_text) else {
            continue;
        };
        let mut before: BTreeMap<&str, usize> = BTreeMap::new();
        if let (Some(old_path), Some(old)) = (&f.old_path, &f.old_text) {
            for (_, l) in p.skip_lines(old_path, old) {
                *before.entry(l).or_default() += 1;
            }
        }
        for (n, l) in p.skip_lines(path, new) {
            match before.get_mut(l) {
                Some(c) if *c > 0 => *c -= 1,
                _ => out.push(Finding {
                    kind: FindingKind::SkipAdded,
                    file: path.clone(),
                    line: Some(n),
                    what: format!("skip marker added: `{}`", clip(l)),
                }),
            }
        }
    }
    out
}

/// A net loss of assertion lines over the test files of the diff: each
/// file that lost some is named when the total went down.
fn lost_assertions(diff: &Diff, p: &Patterns) -> Vec<Finding> {
    let mut total: i64 = 0;
    let mut losers = Vec::new();
    for f in &diff.files {
        let old = match (&f.old_path, &f.old_text) {
            (Some(path), Some(t)) if p.holds_tests(path, t) => p.assertion_lines(path, t),
            _ => Vec::new(),
        };
        let new = match (&f.new_path, &f.new_text) {
            (Some(path), Some(t)) if p.holds_tests(path, t) => p.assertion_lines(path, t),
            _ => Vec::new(),
        };
        total += new.len() as i64 - old.len() as i64;
        if new.len() < old.len() {
            // The first assertion line the new side no longer has.
            let mut left: BTreeMap<&str, usize> = BTreeMap::new();
            for (_, l) in &new {
                *left.entry(l).or_default() += 1;
            }
            let first = old.iter().find_map(|(n, l)| match left.get_mut(l) {
                Some(c) if *c > 0 => {
                    *c -= 1;
                    None
                }
                _ => Some(*n),
            });
            let file = f.old_path.clone().unwrap_or_default();
            losers.push((file, first, old.len(), new.len()));
        }
    }
    if total >= 0 {
        return Vec::new();
    }
    losers
        .into_iter()
        .map(|(file, line, old, new)| Finding {
            kind: FindingKind::AssertionsLost,
            file,
            line,
            what: format!(
                "assertion lines {old} → {new} (the test files lost {} in all)",
                -total
            ),
        })
        .collect()
}

fn validation_changes(diff: &Diff, p: &Patterns) -> Vec<Finding> {
    let mut out = Vec::new();
    for f in &diff.files {
        for path in [&f.old_path, &f.new_path].into_iter().flatten() {
            if let Some(what) = p.validation_change(path, f) {
                out.push(Finding {
                    kind: FindingKind::ValidationConfigChanged,
                    file: path.clone(),
                    line: None,
                    what,
                });
                break;
            }
        }
    }
    out
}

/// The other side of a conflict fix-up: `other` is what the target gained
/// since the story's base; `merged` the merged tree's text of those files
/// (`None`: gone from it). Lines the target added that the merged tree no
/// longer has (as many times) are lost. Blank lines and lone brackets are
/// not counted: they carry no change of their own.
pub(crate) fn lost_lines(other: &Diff, merged: &BTreeMap<String, Option<String>>) -> Vec<Finding> {
    let mut out = Vec::new();
    for f in &other.files {
        let (Some(path), Some(new)) = (&f.new_path, &f.new_text) else {
            continue;
        };
        let mut before: BTreeMap<&str, usize> = BTreeMap::new();
        for l in f.old_text.as_deref().unwrap_or("").lines() {
            *before.entry(l.trim()).or_default() += 1;
        }
        let merged_text = merged.get(path).cloned().flatten();
        let mut kept: BTreeMap<&str, usize> = BTreeMap::new();
        for l in merged_text.as_deref().unwrap_or("").lines() {
            *kept.entry(l.trim()).or_default() += 1;
        }
        let mut lost = Vec::new();
        for (i, l) in new.lines().enumerate() {
            let t = l.trim();
            if t.len() < 3 {
                continue;
            }
            if let Some(c) = before.get_mut(t).filter(|c| **c > 0) {
                // Not added by the target: the old side had it.
                *c -= 1;
                continue;
            }
            match kept.get_mut(t) {
                Some(c) if *c > 0 => *c -= 1,
                _ => lost.push((i as u32 + 1, t)),
            }
        }
        if let Some((first, _)) = lost.first() {
            let shown: Vec<String> = lost
                .iter()
                .take(5)
                .map(|(n, l)| format!("{n}: `{}`", clip(l)))
                .collect();
            let more = if lost.len() > 5 {
                format!(" and {} more", lost.len() - 5)
            } else {
                String::new()
            };
            let what = if merged_text.is_none() {
                format!(
                    "the file the target gained changes in is gone ({})",
                    shown.join("; ")
                )
            } else {
                format!(
                    "{} line(s) the target gained are gone from the merged tree: {}{more}",
                    lost.len(),
                    shown.join("; ")
                )
            };
            out.push(Finding {
                kind: FindingKind::OtherSideLost,
                file: path.clone(),
                line: Some(*first),
                what,
            });
        }
    }
    out
}

/// A line shown in a finding: one line, not a page.
fn clip(l: &str) -> String {
    let t = l.trim();
    if t.chars().count() <= 100 {
        return t.to_string();
    }
    let cut: String = t.chars().take(100).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests;
