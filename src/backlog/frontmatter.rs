//! A spec's YAML frontmatter: finding it, parsing it, and reading the
//! fields ralph needs even where the YAML is sloppy. Pure.

use super::*;

/// Line-level view of a frontmatter block.
pub(super) struct FrontmatterSpan {
    /// Byte range of the YAML between the fences.
    pub(super) yaml: std::ops::Range<usize>,
    /// Byte offset of the start of the closing fence line.
    pub(super) close: usize,
}

pub(super) enum FrontmatterFind {
    None,
    Found(FrontmatterSpan),
    Unterminated,
}

pub(super) fn is_fence(line: &str) -> bool {
    line.trim_end() == "---"
}

pub(super) fn find_frontmatter(text: &str) -> FrontmatterFind {
    let mut lines = text.split_inclusive('\n');
    let Some(first) = lines.next() else {
        return FrontmatterFind::None;
    };
    if !is_fence(first) {
        return FrontmatterFind::None;
    }
    let mut pos = first.len();
    for line in lines {
        if is_fence(line) {
            return FrontmatterFind::Found(FrontmatterSpan {
                yaml: first.len()..pos,
                close: pos,
            });
        }
        pos += line.len();
    }
    FrontmatterFind::Unterminated
}

/// A spec's frontmatter and the text after it, as specs are read here (a
/// byte-order mark before the fence belongs to neither): the YAML between
/// the fences and what follows the closing one. `None` without a closed
/// frontmatter.
pub(crate) fn split_frontmatter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    match find_frontmatter(text) {
        FrontmatterFind::Found(span) => {
            let fence = text[span.close..]
                .split_inclusive('\n')
                .next()
                .unwrap_or("");
            Some((&text[span.yaml], &text[span.close + fence.len()..]))
        }
        FrontmatterFind::None | FrontmatterFind::Unterminated => None,
    }
}

/// True when `line` of a frontmatter sets the top-level `key`.
pub(crate) fn sets_key(line: &str, key: &str) -> bool {
    top_level_value(line, key).is_some()
}

/// The 1-based line of a spec's `text` that sets `depends_on` in its
/// frontmatter: where a problem with a story's dependencies (unknown, a
/// cycle) is fixed (issue 32: `validate` named the file alone).
pub(crate) fn depends_on_line(text: &str) -> Option<usize> {
    let (yaml, _) = split_frontmatter(text)?;
    // The frontmatter starts after the opening fence, on line 2.
    yaml.lines()
        .position(|l| sets_key(l, "depends_on"))
        .map(|i| i + 2)
}

/// Parses optional YAML frontmatter at the top of a spec.
pub(crate) fn parse_frontmatter(text: &str, file: &Path) -> Result<Frontmatter, Problem> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let span = match find_frontmatter(text) {
        FrontmatterFind::None => return Ok(Frontmatter::default()),
        FrontmatterFind::Unterminated => {
            return Err(Problem::new(
                file,
                Some(1),
                "the frontmatter opened by '---' on line 1 is never closed; add a '---' line after its last field",
            ))
        }
        FrontmatterFind::Found(span) => span,
    };
    let yaml = &text[span.yaml.clone()];
    // Line 1 is the opening fence, so YAML line n is file line n + 1.
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(yaml).map_err(|e| {
        let line = e.location().map(|l| l.line() + 1);
        Problem::new(
            file,
            line,
            format!(
                "invalid YAML in the frontmatter: {}; fix it or remove the frontmatter",
                shift_yaml_lines(&e.to_string())
            ),
        )
    })?;
    let map = match value {
        serde_yaml_ng::Value::Null => return Ok(Frontmatter::default()),
        serde_yaml_ng::Value::Mapping(m) => m,
        _ => {
            return Err(Problem::new(
                file,
                Some(2),
                "the frontmatter must be YAML `key: value` lines",
            ))
        }
    };
    let field = |key: &str| map.get(key).and_then(|v| scalar_text(v, yaml, key));
    let mut fm = Frontmatter {
        id: field("id"),
        title: field("title"),
        status: field("status"),
        estimation: field("estimation"),
        depends_on: Vec::new(),
        agent: field("agent"),
        allow_empty_done: false,
        allow_test_changes: false,
        priority: field("priority"),
        model: field("model").filter(|m| !m.trim().is_empty()),
        effort: field("effort"),
        best_of: field("best_of"),
    };
    for key in ["allow_empty_done", "allow_test_changes"] {
        let flag = match map.get(key) {
            None | Some(serde_yaml_ng::Value::Null) => false,
            Some(serde_yaml_ng::Value::Bool(b)) => *b,
            Some(serde_yaml_ng::Value::String(s)) if s.trim() == "true" || s.trim() == "false" => {
                s.trim() == "true"
            }
            Some(other) => {
                return Err(Problem::new(
                    file,
                    key_line(yaml, key).map(|l| l + 2),
                    format!("{key} must be true or false, got {}", yaml_inline(other)),
                ))
            }
        };
        if key == "allow_empty_done" {
            fm.allow_empty_done = flag;
        } else {
            fm.allow_test_changes = flag;
        }
    }

    // +2: the index is 0-based and the opening fence is file line 1.
    let key_line = key_line(yaml, "depends_on").map(|l| l + 2);
    let mut bad = Vec::new();
    match map.get("depends_on") {
        None | Some(serde_yaml_ng::Value::Null) => {}
        Some(serde_yaml_ng::Value::Sequence(items)) => {
            let tokens = depends_on_tokens(yaml);
            for (i, item) in items.iter().enumerate() {
                let literal = tokens
                    .as_ref()
                    .filter(|t| t.len() == items.len())
                    .map(|t| t[i].as_str());
                match entry_id(item, literal) {
                    Some(id) if !id.is_empty() => fm.depends_on.push(id),
                    Some(_) => {}
                    None => bad.push(format!(
                        "depends_on entry {} is not a story ID; write IDs such as [1.2, \"US-001\"]",
                        yaml_inline(item)
                    )),
                }
            }
        }
        Some(serde_yaml_ng::Value::String(s)) => {
            fm.depends_on.extend(
                s.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            );
        }
        Some(serde_yaml_ng::Value::Number(_)) => {
            if let Some(id) = raw_scalar(yaml, "depends_on") {
                fm.depends_on.push(id);
            }
        }
        Some(other) => bad.push(format!(
            "depends_on must be a list of story IDs such as [1.2, 1.3], got {}",
            yaml_inline(other)
        )),
    }
    for id in &fm.depends_on {
        if let Err(reason) = check_id(id) {
            bad.push(format!(
                "depends_on entry {id:?} is not a valid story ID: it {reason}"
            ));
        }
    }
    if !bad.is_empty() {
        return Err(Problem::new(file, key_line, bad.join("; ")));
    }
    Ok(fm)
}

/// serde_yaml_ng counts lines from the start of the YAML, one line after the
/// opening fence; users read file lines.
pub(super) fn shift_yaml_lines(msg: &str) -> String {
    let re = regex::Regex::new(r"line (\d+)").expect("constant regex");
    re.replace_all(msg, |c: &regex::Captures<'_>| {
        let n: usize = c[1].parse().unwrap_or(0);
        format!("line {}", n + 1)
    })
    .into_owned()
}

pub(super) fn yaml_inline(v: &serde_yaml_ng::Value) -> String {
    serde_yaml_ng::to_string(v)
        .map(|s| s.trim().replace('\n', " "))
        .unwrap_or_default()
}

/// A depends_on entry as an ID string. YAML reads `1.10` as the float 1.1, so
/// numbers take their literal source text when it is available.
pub(super) fn entry_id(item: &serde_yaml_ng::Value, literal: Option<&str>) -> Option<String> {
    match item {
        serde_yaml_ng::Value::String(s) => Some(s.trim().to_string()),
        serde_yaml_ng::Value::Number(n) => Some(match literal {
            Some(lit) if lit.parse::<f64>().ok() == n.as_f64() => lit.to_string(),
            _ => n.to_string(),
        }),
        _ => None,
    }
}

/// A scalar field as text, with numbers taken from the source (`id: 1.10`).
pub(super) fn scalar_text(v: &serde_yaml_ng::Value, yaml: &str, key: &str) -> Option<String> {
    match v {
        serde_yaml_ng::Value::String(s) => Some(s.clone()),
        serde_yaml_ng::Value::Number(n) => Some(
            raw_scalar(yaml, key)
                .filter(|lit| lit.parse::<f64>().ok() == n.as_f64())
                .unwrap_or_else(|| n.to_string()),
        ),
        serde_yaml_ng::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// 0-based line of a top-level `key:` in the YAML.
pub(super) fn key_line(yaml: &str, key: &str) -> Option<usize> {
    yaml.lines().position(|l| top_level_value(l, key).is_some())
}

/// The text after `key:` when `line` is that top-level key.
pub(super) fn top_level_value<'l>(line: &'l str, key: &str) -> Option<&'l str> {
    line.strip_prefix(key)?
        .trim_start_matches([' ', '\t'])
        .strip_prefix(':')
}

pub(super) fn strip_comment(s: &str) -> &str {
    // A YAML comment starts with '#' at the start or after whitespace.
    let bytes = s.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'#' && (i == 0 || bytes[i - 1].is_ascii_whitespace()) {
            return &s[..i];
        }
    }
    s
}

/// The literal text of a single-line scalar `key: value`.
pub(super) fn raw_scalar(yaml: &str, key: &str) -> Option<String> {
    let value = yaml.lines().find_map(|l| top_level_value(l, key))?;
    let value = unquote(strip_comment(value).trim());
    Some(value.to_string())
}

/// The literal tokens of `depends_on`, inline (`[1.2, 1.10]`) or as a block
/// list, in order. `None` when the layout is something this simple scan does
/// not understand (the caller then falls back to the parsed numbers).
pub(super) fn depends_on_tokens(yaml: &str) -> Option<Vec<String>> {
    let mut lines = yaml
        .lines()
        .skip_while(|l| top_level_value(l, "depends_on").is_none());
    let first = top_level_value(lines.next()?, "depends_on")?;
    let mut raw = strip_comment(first).to_string();
    for line in lines {
        let t = line.trim_start();
        // The value continues on indented lines and block-list items; the next
        // top-level key ends it.
        if !(line.starts_with([' ', '\t'])
            || t.starts_with('-')
            || t.is_empty()
            || t.starts_with('#'))
        {
            break;
        }
        raw.push('\n');
        raw.push_str(strip_comment(line));
    }
    let mut tokens = Vec::new();
    for piece in raw.split(['[', ']', ',', '\n']) {
        let piece = piece.trim();
        let piece = piece.strip_prefix('-').map_or(piece, |p| {
            // "- 1.2" is a list item; "-1" alone would be a (bad) ID, keep it.
            if p.starts_with([' ', '\t']) || p.is_empty() {
                p.trim()
            } else {
                piece
            }
        });
        if !piece.is_empty() {
            tokens.push(unquote(piece).to_string());
        }
    }
    Some(tokens)
}

#[cfg(test)]
mod depends_line_tests {
    use super::*;

    #[test]
    fn the_depends_on_line_is_found_in_the_frontmatter() {
        assert_eq!(
            depends_on_line("---\nid: 1.1\ndepends_on: [1.2]\n---\ndepends_on: body\n"),
            Some(3)
        );
        assert_eq!(depends_on_line("---\nid: 1.1\n---\n"), None);
        assert_eq!(depends_on_line("no frontmatter\n"), None);
    }
}
