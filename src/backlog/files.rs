//! What a story says about itself that only scheduling uses: the files it
//! will touch (Ralph v2's "Files to Create/Modify" section) and its
//! priority. Pure; read leniently, because Ralph v2 itself never read them
//! (only its staging instructions and `hitl` did), so a sloppy section must
//! not stop a backlog that ran before.

use std::collections::HashSet;

/// A story's rank among ready stories of equal critical path: lower starts
/// first.
pub(crate) type Rank = u32;

/// The rank of a story whose spec gives no priority (`medium`).
pub(crate) const DEFAULT_RANK: Rank = 2;

/// Frontmatter `priority` (Ralph v2 writes critical, high, medium or low;
/// P0–P3 are read the same way). Anything else ranks as medium.
pub(crate) fn priority_rank(priority: Option<&str>) -> Rank {
    match priority.map(|p| p.trim().to_ascii_lowercase()).as_deref() {
        Some("critical" | "p0") => 0,
        Some("high" | "p1") => 1,
        Some("low" | "p3") => 3,
        _ => DEFAULT_RANK,
    }
}

/// The paths listed under a spec's "Files to Create/Modify" heading (any
/// level from 2 to 6, any case, trailing text allowed, "Files to Modify"
/// too): the first backtick span of each line until the next heading, or
/// the first word of a list item that looks like a path. Repository paths
/// as written, without a leading `./`; a directory keeps its trailing `/`.
pub(crate) fn spec_files(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut in_section = false;
    for t in unfenced_lines(text) {
        if let Some(heading) = heading_text(t) {
            in_section = is_files_heading(heading);
            continue;
        }
        if in_section {
            push_new(&mut out, path_on_line(t).and_then(clean_path));
        }
    }
    out
}

/// The trimmed lines of a spec outside its code fences (``` or ~~~), fence
/// lines left out: a path in an example block is no path the story names.
fn unfenced_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    text.lines().map(str::trim).filter(move |t| {
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// Adds `p` to `out` unless it is already there (first mention keeps its place).
fn push_new(out: &mut Vec<String>, p: Option<String>) {
    if let Some(p) = p {
        if !out.contains(&p) {
            out.push(p);
        }
    }
}

/// The text of a markdown heading (`#` to `######`), if `line` is one.
fn heading_text(line: &str) -> Option<&str> {
    let hashes = line.len() - line.trim_start_matches('#').len();
    if hashes == 0 || hashes > 6 {
        return None;
    }
    let rest = &line[hashes..];
    (rest.is_empty() || rest.starts_with([' ', '\t'])).then(|| rest.trim())
}

fn is_files_heading(heading: &str) -> bool {
    let h = heading.to_ascii_lowercase();
    h.starts_with("files to ") || h == "files" || h.starts_with("files changed")
}

/// Every path a spec names anywhere in its text (issue 25): each backtick
/// span that looks like a repository path, and each bare word with a `/`
/// whose last part has an extension (`src/lib.rs`), outside code fences, in
/// order of first mention. Wider than `spec_files`, so it also catches a
/// file a story only mentions in prose ("append to `shared.txt`"); for
/// scheduling only, where a wrong guess merely reorders ready stories.
pub(crate) fn named_paths(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |p: Option<String>| push_new(&mut out, p);
    for t in unfenced_lines(text) {
        // Odd pieces of a split on '`' are the spans; even ones are prose.
        for (k, piece) in t.split('`').enumerate() {
            if k % 2 == 1 {
                push(clean_path(piece).filter(|p| looks_like_path(p)));
            } else {
                for word in piece.split_whitespace() {
                    let word = word.trim_matches(|c: char| {
                        matches!(
                            c,
                            ',' | ';' | ':' | '(' | ')' | '"' | '\'' | '!' | '?' | '*'
                        )
                    });
                    let word = word.strip_suffix('.').unwrap_or(word);
                    if word.contains('/') && has_extension(word) {
                        push(clean_path(word).filter(|p| looks_like_path(p)));
                    }
                }
            }
        }
    }
    out
}

/// Each story's named paths (`named_paths`) without those so many stories
/// name that they tell nothing about conflicts: a path more than a quarter
/// of the backlog (and more than three stories) names is a reference every
/// story reads (`README.md`, the conventions file), not a file each edits,
/// and keeping all of them apart would serialise the run.
pub(crate) fn telling(named: &[Vec<String>]) -> Vec<Vec<String>> {
    let mut count: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for paths in named {
        for p in paths {
            *count.entry(p.as_str()).or_default() += 1;
        }
    }
    let most = (named.len() / 4).max(3);
    named
        .iter()
        .map(|paths| {
            paths
                .iter()
                .filter(|p| count[p.as_str()] <= most)
                .cloned()
                .collect()
        })
        .collect()
}

/// A path, not code or a command: no characters a path seldom has, and
/// either a directory separator or a file extension.
fn looks_like_path(p: &str) -> bool {
    const NOT_IN_PATHS: &[char] = &[
        '(', ')', '=', '<', '>', '{', '}', '[', ']', '$', '*', '?', '"', '\'', ',', ';', '|', '&',
        '\\', '@', ':',
    ];
    !p.contains(NOT_IN_PATHS)
        && !p.starts_with('-')
        && !p.starts_with("..")
        && p.chars().any(|c| c.is_ascii_alphabetic())
        && (p.contains('/') || has_extension(p))
}

/// The last part is `stem.ext`: a non-empty stem and a short alphanumeric
/// extension with a letter (`x.rs`, `Makefile.am`; not `1.2`, `e.g.`).
fn has_extension(p: &str) -> bool {
    let last = p.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    match last.rsplit_once('.') {
        Some((stem, ext)) => {
            !stem.is_empty()
                && (1..=8).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
        }
        None => false,
    }
}

/// The first backtick span, else the first word of a list item.
fn path_on_line(line: &str) -> Option<&str> {
    if let Some(start) = line.find('`') {
        let rest = &line[start + 1..];
        return rest.find('`').map(|end| &rest[..end]);
    }
    let item = line
        .strip_prefix(['-', '*', '+'])
        .or_else(|| {
            let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            (digits > 0)
                .then(|| line[digits..].strip_prefix(['.', ')']))
                .flatten()
        })?
        .trim_start();
    let word = item.split_whitespace().next()?;
    let word = word.trim_end_matches([':', ',', ';']);
    // A bare word must look like a path, not like prose ("None", "TBD").
    (word.contains('/') || word.contains('.')).then_some(word)
}

/// `p` as a repository path (no `./` or leading `/`); `None` for what is
/// not one (empty, spaces, a URL).
pub(crate) fn clean_path(p: &str) -> Option<String> {
    let p = p.trim();
    if p.is_empty() || p.contains(char::is_whitespace) || p.contains("://") {
        return None;
    }
    let p = p.trim_start_matches("./").trim_start_matches('/');
    (!p.is_empty() && p != "." && p != "/").then(|| p.to_string())
}

/// True when the two path lists name a common file: the same path, or a
/// directory (`data/`) and a path inside it. Linear in both lengths: a
/// running story's worktree may list many paths.
pub(crate) fn overlap(a: &[String], b: &[String]) -> bool {
    !a.is_empty() && !b.is_empty() && (covers(a, b) || covers(b, a))
}

/// A path of `a` is in `b`, or lies inside one of `b`'s directories.
fn covers(a: &[String], b: &[String]) -> bool {
    let exact: HashSet<&str> = b.iter().map(|p| p.trim_end_matches('/')).collect();
    let dirs: HashSet<&str> = b
        .iter()
        .filter(|p| p.ends_with('/'))
        .map(|p| p.trim_end_matches('/'))
        .collect();
    a.iter().any(|x| {
        let x = x.trim_end_matches('/');
        exact.contains(x)
            || (!dirs.is_empty() && x.match_indices('/').any(|(i, _)| dirs.contains(&x[..i])))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ralph_v2_files_section_is_read() {
        let spec = "---\nid: 1.1\npriority: high\n---\n\n# Story 1.1\n\n## Technical Context\n\
                    Uses `src/other.rs` as an example.\n\n\
                    ## Files to Create/Modify\n\
                    - `src/init-store.sh` — Store initialization script (create)\n\
                    - `./src/lib.sh` — Shared library functions (modify)\n\
                    - `data/` — Data directory (create)\n\
                    - `src/lib.sh` — listed twice\n\n\
                    ## Test Definition\nFile: `tests/test-x.sh`\n";
        assert_eq!(
            spec_files(spec),
            ["src/init-store.sh", "src/lib.sh", "data/"]
        );
    }

    #[test]
    fn headings_lists_and_fences() {
        let spec = "### files to modify (all of them)\n\
                    1. bin/calc: the entry point\n\
                    * Makefile\n\
                    + docs/guide.md, the guide\n\
                    - None yet\n\
                    ```\n## Not a heading\n- `x/in-fence.rs`\n```\n\
                    Plain prose with `README.md` in it.\n\
                    #### Next\n- `after/heading.rs`\n\
                    ## Files\n- `/abs/path.rs`\n- `https://example.com/x`\n- `two words`\n";
        assert_eq!(
            spec_files(spec),
            ["bin/calc", "docs/guide.md", "README.md", "abs/path.rs"]
        );
        assert!(spec_files("# Story\n\nNo section here.\n").is_empty());
        assert!(spec_files("#Files to Create\n- `x.rs`\n").is_empty());
    }

    #[test]
    fn priorities_rank_critical_first() {
        let ranks: Vec<Rank> = ["critical", "High", " medium ", "low", "P1", "urgent"]
            .iter()
            .map(|p| priority_rank(Some(p)))
            .collect();
        assert_eq!(ranks, [0, 1, 2, 3, 1, DEFAULT_RANK]);
        assert_eq!(priority_rank(None), DEFAULT_RANK);
    }

    #[test]
    fn overlap_is_a_shared_file_or_a_directory_holding_one() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(overlap(&v(&["a.rs", "FEATURES.md"]), &v(&["FEATURES.md"])));
        assert!(overlap(&v(&["data/"]), &v(&["data/x.json"])));
        assert!(overlap(&v(&["data/x.json"]), &v(&["data/"])));
        assert!(overlap(&v(&["data/"]), &v(&["data"])));
        assert!(!overlap(&v(&["data/"]), &v(&["database.rs"])));
        assert!(overlap(&v(&["a.rs", "src/"]), &v(&["src/deep/er/x.rs"])));
        assert!(!overlap(&v(&["data"]), &v(&["data/x.json"])));
        assert!(!overlap(&v(&["src/a.rs"]), &v(&["src/b.rs"])));
        assert!(!overlap(&v(&[]), &v(&["src/b.rs"])));
    }

    #[test]
    fn paths_named_anywhere_in_a_spec_are_read() {
        let spec = "---\nid: 1.1\n---\n\n# Story 1.1\n\n\
                    Append a line to `shared-3.txt`, then see src/lib/util.rs for how.\n\
                    Run `cargo test` and `make -j4`; the `data/` directory holds `./cfg.json`.\n\
                    Versions `1.2` and words like e.g. and/or, `foo()`, `a = b`, `--flag`, \
                    `https://x.org/a.md` are not paths. Done.\n\
                    ```\n`in/fence.rs`\n```\n\
                    ## Files to Create/Modify\n- `shared-3.txt`\n- docs/guide.md, the guide\n";
        assert_eq!(
            named_paths(spec),
            [
                "shared-3.txt",
                "src/lib/util.rs",
                "data/",
                "cfg.json",
                "docs/guide.md"
            ]
        );
        assert!(named_paths("# Story\n\nNo paths at all, just words.\n").is_empty());
    }

    #[test]
    fn a_path_most_stories_name_tells_nothing() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        // Twenty stories name README.md; pairs name a file of their own.
        let named: Vec<Vec<String>> = (0..20)
            .map(|k| v(&["README.md", &format!("shared-{}.txt", k / 2)]))
            .collect();
        let kept = telling(&named);
        assert_eq!(kept[0], v(&["shared-0.txt"]));
        assert_eq!(kept[19], v(&["shared-9.txt"]));
        // In a small backlog, three stories naming one file still count.
        let small = vec![v(&["a.rs"]), v(&["a.rs"]), v(&["a.rs"]), v(&["b.rs"])];
        assert_eq!(telling(&small), small);
        let four = vec![v(&["a.rs"]); 4];
        assert!(telling(&four).iter().all(Vec::is_empty));
    }
}
