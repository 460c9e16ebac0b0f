//! Learnings (SPEC 3.7): `- [Story X] text` lines in `.ralph/learnings/<topic>.md`.
//! Selection and categorisation are pure; `load`/`record` touch the files.

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

/// The bash tool's topics, first match wins.
const TOPICS: &[(&str, &str)] = &[
    (
        "testing",
        r"test|mock|assert|vitest|jest|playwright|expect|describe|it\(",
    ),
    (
        "framework",
        r"svelte|react|component|render|template|store|reactive|rune",
    ),
    (
        "data-model",
        r"sql|migration|schema|table|column|sqlite|database|query",
    ),
    (
        "tooling",
        r"build|compile|bundle|config|webpack|vite|tauri|cargo",
    ),
    (
        "patterns",
        r"pattern|convention|approach|architecture|design|refactor",
    ),
    (
        "gotchas",
        r"gotcha|pitfall|trap|caveat|careful|warning|workaround|bug",
    ),
];

static TOPIC_RES: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    TOPICS
        .iter()
        .map(|(topic, pat)| (*topic, Regex::new(pat).expect("static pattern")))
        .collect()
});

pub(crate) fn categorize(text: &str) -> &'static str {
    let lower = text.to_lowercase();
    TOPIC_RES
        .iter()
        .find(|(_, re)| re.is_match(&lower))
        .map_or("uncategorized", |(topic, _)| topic)
}

/// The learning's text without its `- [Story X] ` prefix, for dedup.
pub(crate) fn body(line: &str) -> &str {
    let l = line.trim().trim_start_matches("- ").trim_start();
    if l.starts_with('[') {
        if let Some(end) = l.find("] ") {
            return l[end + 2..].trim();
        }
    }
    l
}

/// Top `n` lines by how many of their words (4+ chars) appear in the spec;
/// ties keep file order; duplicates (same text) appear once.
pub(crate) fn select_relevant(lines: &[String], spec: &str, n: usize) -> Vec<String> {
    let spec_lc = spec.to_lowercase();
    let mut seen = HashSet::new();
    let mut scored: Vec<(usize, usize, &String)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !seen.insert(body(line).to_lowercase()) {
            continue;
        }
        let score = line
            .to_lowercase()
            .split_whitespace()
            .filter(|w| w.chars().count() >= 4 && spec_lc.contains(w))
            .count();
        if score > 0 {
            scored.push((score, i, line));
        }
    }
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored
        .into_iter()
        .take(n)
        .map(|(_, _, l)| l.clone())
        .collect()
}

/// Every `- ` line of `.ralph/learnings/*.md` (top level), files in name order.
pub(crate) fn load(root: &Path) -> Vec<String> {
    load_by_file(root).into_iter().map(|(_, l)| l).collect()
}

/// As `load`, each line with the file it came from (relative to `root`).
pub(crate) fn load_by_file(root: &Path) -> Vec<(std::path::PathBuf, String)> {
    let dir = crate::paths::learnings_dir(root);
    let Ok(rd) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        if let Ok(text) = fs::read_to_string(&f) {
            let rel = f.strip_prefix(root).unwrap_or(&f).to_path_buf();
            out.extend(
                text.lines()
                    .filter(|l| l.starts_with("- "))
                    .map(|l| (rel.clone(), l.to_string())),
            );
        }
    }
    out
}

/// Stores new learnings of `story`; returns the texts actually added (ones
/// already known are skipped).
pub(crate) fn record(root: &Path, story: &str, texts: &[String]) -> std::io::Result<Vec<String>> {
    let existing: HashSet<String> = load(root).iter().map(|l| body(l).to_lowercase()).collect();
    let dir = crate::paths::learnings_dir(root);
    let mut added = Vec::new();
    let mut seen = HashSet::new();
    for t in texts {
        let text = t.split_whitespace().collect::<Vec<_>>().join(" ");
        let key = text.to_lowercase();
        if text.is_empty() || existing.contains(&key) || !seen.insert(key) {
            continue;
        }
        fs::create_dir_all(&dir)?;
        let topic = categorize(&text);
        let path = dir.join(format!("{topic}.md"));
        let fresh = !path.exists();
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        if fresh {
            writeln!(f, "# Learnings: {topic}\n")?;
        }
        writeln!(f, "- [Story {story}] {text}")?;
        update_index(&dir, topic);
        added.push(text);
    }
    Ok(added)
}

fn update_index(dir: &Path, topic: &str) {
    let path = dir.join("_index.json");
    let mut map: serde_json::Map<String, serde_json::Value> = fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    if !map.contains_key(topic) {
        map.insert(
            topic.to_string(),
            serde_json::Value::String(format!("{topic}.md")),
        );
        if let Ok(s) = serde_json::to_string_pretty(&map) {
            let _ = crate::store::write_atomic(&path, s.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_follow_the_bash_order() {
        assert_eq!(categorize("vitest describe blocks"), "testing");
        assert_eq!(categorize("SQLite migration columns"), "data-model");
        assert_eq!(categorize("careful with the thing"), "gotchas");
        assert_eq!(categorize("nothing here"), "uncategorized");
    }

    #[test]
    fn selection_scores_overlap_and_dedups() {
        let lines = vec![
            "- [Story 1.1] sqlite schema needs types".to_string(),
            "- [Story 1.2] unrelated words only".to_string(),
            "- [Story 1.3] sqlite schema needs types".to_string(),
            "- [Story 1.4] schema first".to_string(),
        ];
        let got = select_relevant(&lines, "Create the SQLite schema with types", 5);
        assert_eq!(got, vec![lines[0].clone(), lines[3].clone()]);
        assert_eq!(select_relevant(&lines, "sqlite schema", 1).len(), 1);
    }

    #[test]
    fn record_writes_topic_files_without_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        let added = record(
            dir.path(),
            "1.1",
            &["use jest mocks".into(), "use  jest mocks".into()],
        )
        .unwrap();
        assert_eq!(added.len(), 1);
        let again = record(dir.path(), "1.2", &["Use jest mocks".into()]).unwrap();
        assert!(again.is_empty());
        let text = fs::read_to_string(dir.path().join(".ralph/learnings/testing.md")).unwrap();
        assert_eq!(
            text,
            "# Learnings: testing\n\n- [Story 1.1] use jest mocks\n"
        );
        assert!(
            fs::read_to_string(dir.path().join(".ralph/learnings/_index.json"))
                .unwrap()
                .contains("testing.md")
        );
    }
}
