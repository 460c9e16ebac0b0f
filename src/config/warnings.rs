//! Keys of the config file ralph does not act on: unknown ones (with the
//! nearest known key as a suggestion) and Ralph v2 features ralph does not
//! have. Warnings, never errors: SPEC 3.1 keeps unknown keys.

use std::path::Path;

use serde_json::Value;

use super::reader::line_of_key;
use super::{keys, Config, CONFIG_FILE};

/// A key of the config file ralph does not act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyWarning {
    /// The dotted path, e.g. `paralell.enabled`.
    pub(crate) key: String,
    /// Its line in the file, when it can be found.
    pub(crate) line: Option<usize>,
    pub(crate) kind: KeyWarningKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyWarningKind {
    /// Not a key of ralph or Ralph v2; the nearest known key, if one is close.
    Unknown { did_you_mean: Option<String> },
    /// A Ralph v2 key for a feature ralph does not have.
    RalphV2 { why: &'static str },
}

impl KeyWarning {
    /// One line for the terminal, naming the file and line.
    pub(crate) fn render(&self, file: &str) -> String {
        let at = match self.line {
            Some(l) => format!("{file}:{l}"),
            None => file.to_string(),
        };
        match &self.kind {
            KeyWarningKind::Unknown {
                did_you_mean: Some(k),
            } => format!(
                "warning: {at}: unknown key \"{}\" is ignored; did you mean \"{k}\"?",
                self.key
            ),
            KeyWarningKind::Unknown { did_you_mean: None } => {
                format!("warning: {at}: unknown key \"{}\" is ignored", self.key)
            }
            KeyWarningKind::RalphV2 { why } => format!(
                "warning: {at}: Ralph v2 key \"{}\" is ignored: {why}",
                self.key
            ),
        }
    }
}

impl Config {
    /// The warnings about keys ralph ignores, one line each.
    pub(crate) fn warning_lines(&self) -> Vec<String> {
        self.key_warnings
            .iter()
            .map(|w| w.render(CONFIG_FILE))
            .chain(super::gates::same_reviewer_warning(
                &self.gates,
                &self.agent,
            ))
            .collect()
    }
}

/// Ralph v2 keys that ralph accepts without a word: Ralph v2 itself never
/// read them, so ignoring them changes nothing.
pub(crate) const RALPH_V2_INERT: &[&str] = &[
    "version",
    "project.name",
    "specs.id_format",
    "commit.auto_commit",
    "parallel.strategy",
    "post_run.max_pipeline_iterations",
];

/// Ralph v2 features ralph does not have, by key prefix, and what to know.
pub(crate) const RALPH_V2_IGNORED: &[(&str, &str)] = &[
    (
        "testing_phase",
        "ralph has no separate test-review pass; put the checks in validation.commands",
    ),
    (
        "caffeine",
        "ralph does not keep a Mac awake; run it under `caffeinate -dims ralph run`",
    ),
    ("mcp", "MCP flags are not added; put them in claude.flags"),
    (
        "post_run",
        "ralph has no post-run chain (E2E, discovery, pipeline)",
    ),
    ("hitl", "ralph has no HITL review page"),
    (
        "parallel.merge_review_timeout",
        "ralph has no conflict-review agent",
    ),
];

/// The keys of `raw` that are not `known` (ralph's), in file order where
/// known. Arrays and scalars are leaves; an object is known when ralph
/// reads it whole or any key under it is known.
pub(super) fn key_warnings(
    raw: &Value,
    known: &std::collections::BTreeSet<String>,
    text: Option<&str>,
) -> Vec<KeyWarning> {
    fn walk(v: &Value, path: &str, leaves: &mut Vec<String>) {
        match v.as_object() {
            Some(obj) if !obj.is_empty() => {
                for (k, child) in obj {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(child, &p, leaves);
                }
            }
            _ if !path.is_empty() => leaves.push(path.to_string()),
            _ => {}
        }
    }
    let under = |key: &str, prefix: &str| {
        key == prefix || key.strip_prefix(prefix).is_some_and(|r| r.starts_with('.'))
    };
    let mut leaves = Vec::new();
    walk(raw, "", &mut leaves);
    let mut out: Vec<KeyWarning> = Vec::new();
    for key in leaves {
        if known.iter().any(|r| under(&key, r)) || RALPH_V2_INERT.iter().any(|k| under(&key, k)) {
            continue;
        }
        let kind = match RALPH_V2_IGNORED.iter().find(|(p, _)| under(&key, p)) {
            Some((prefix, why)) => {
                // One warning per ignored feature, not per sub-key.
                if out.iter().any(|w| under(&w.key, prefix)) {
                    continue;
                }
                KeyWarningKind::RalphV2 { why }
            }
            None => KeyWarningKind::Unknown {
                did_you_mean: nearest_key(&key, known),
            },
        };
        let key = match kind {
            KeyWarningKind::RalphV2 { .. } => RALPH_V2_IGNORED
                .iter()
                .find(|(p, _)| under(&key, p))
                .map_or(key.clone(), |(p, _)| p.to_string()),
            _ => key,
        };
        let line = text.and_then(|t| line_of_key(t, &key));
        out.push(KeyWarning { key, line, kind });
    }
    out.sort_by_key(|w| w.line.unwrap_or(usize::MAX));
    out
}

/// The unknown-key warnings of the config file alone, one line each: for
/// `validate` when the config (or the backlog) has errors, so the warnings
/// come with them instead of after they are fixed. Empty when the file is
/// missing or not a JSON object (that is an error of its own).
pub(crate) fn key_warning_lines(root: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(root.join(CONFIG_FILE)) else {
        return Vec::new();
    };
    let body = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let Ok(user @ Value::Object(_)) = serde_json::from_str::<Value>(body) else {
        return Vec::new();
    };
    let known = keys::KEYS.iter().map(|k| k.key.to_string()).collect();
    key_warnings(&user, &known, Some(&text))
        .iter()
        .map(|w| w.render(CONFIG_FILE))
        .collect()
}

/// The known key a misspelled one most likely meant: compared segment by
/// segment, so `paralell.enabled` finds `parallel.enabled`. A key of one
/// segment (`"paralell": true`) is compared with the sections, so it finds
/// `parallel`: every known key stands for its sections too.
pub(super) fn nearest_key(key: &str, known: &std::collections::BTreeSet<String>) -> Option<String> {
    let sections = known.iter().flat_map(|k| {
        k.match_indices('.')
            .map(|(i, _)| k[..i].to_string())
            .collect::<Vec<_>>()
    });
    let candidates: std::collections::BTreeSet<String> =
        known.iter().cloned().chain(sections).collect();
    candidates
        .iter()
        .filter(|k| k.split('.').count() == key.split('.').count())
        .map(|k| {
            let d: usize = k
                .split('.')
                .zip(key.split('.'))
                .map(|(a, b)| edit_distance(a, b))
                .sum();
            (d, k)
        })
        .filter(|(d, k)| *d > 0 && *d <= 2.max(k.len() / 5))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.clone())
}

/// Levenshtein distance over chars.
pub(super) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}
