//! `.ralph/stories.txt`: the queue's grammar (IDs, titles, `[batch:N]`
//! sections, skipped lines). Pure.

use super::*;

/// Parses stories.txt text (SPEC 3.2). Problems name `file` and the line.
#[cfg(test)]
pub(crate) fn parse_queue(text: &str, file: &Path) -> Result<Queue, Vec<Problem>> {
    let (queue, problems) = parse_queue_lenient(text, file);
    if problems.is_empty() {
        Ok(queue)
    } else {
        Err(problems)
    }
}

/// Parses the queue, keeping every well-formed entry alongside the problems so
/// `load` can go on to check the specs of the good ones.
pub(crate) fn parse_queue_lenient(text: &str, file: &Path) -> (Queue, Vec<Problem>) {
    let mut queue = Queue {
        entries: Vec::new(),
        sections: Vec::new(),
        skipped: Vec::new(),
    };
    let mut problems = Vec::new();
    let mut current: Option<usize> = None;
    let mut seen: HashMap<String, usize> = HashMap::new();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);

    for (i, raw) in text.split('\n').enumerate() {
        let line_no = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(comment) = trimmed.strip_prefix('#') {
            match batch_label(comment) {
                BatchLine::NotBatch => {}
                BatchLine::Label(label) => {
                    let chain = label == "0";
                    queue.sections.push(Section { label: Some(label.to_string()), chain });
                    current = Some(queue.sections.len() - 1);
                }
                BatchLine::Malformed => problems.push(Problem::new(
                    file,
                    Some(line_no),
                    format!(
                        "malformed batch line {trimmed:?}; write `# [batch:N]` with N a number such as 1 or 31.5"
                    ),
                )),
            }
            continue;
        }
        let start = line.trim_start();
        if let Some(rest) = start.strip_prefix('x') {
            if rest.starts_with(char::is_whitespace) {
                let id = unquote(rest.split('|').next().unwrap_or("").trim());
                if !id.is_empty() {
                    queue.skipped.push(id.to_string());
                }
                continue;
            }
        }
        let (id, title) = match trimmed.split_once('|') {
            Some((id, title)) => (id.trim(), title.trim()),
            None => (trimmed, ""),
        };
        let id = unquote(id);
        if let Err(reason) = check_id(id) {
            problems.push(Problem::new(
                file,
                Some(line_no),
                format!("invalid story ID {id:?}: it {reason}; fix the ID on this line"),
            ));
            continue;
        }
        if let Some(&first) = seen.get(id) {
            problems.push(Problem::new(
                file,
                Some(line_no),
                format!(
                    "story {id} is listed twice (lines {first} and {line_no}); remove one of them"
                ),
            ));
            continue;
        }
        seen.insert(id.to_string(), line_no);
        let section = *current.get_or_insert_with(|| {
            queue.sections.push(Section {
                label: None,
                chain: true,
            });
            queue.sections.len() - 1
        });
        queue.entries.push(QueueEntry {
            id: id.to_string(),
            title: title.to_string(),
            line: line_no,
            section,
        });
    }
    (queue, problems)
}

pub(super) enum BatchLine<'a> {
    NotBatch,
    Label(&'a str),
    Malformed,
}

/// Classifies the text after a comment's `#`. Anything that starts like a
/// batch annotation but does not parse is reported rather than silently
/// treated as a comment, since that would quietly drop the barrier.
pub(super) fn batch_label(comment: &str) -> BatchLine<'_> {
    let rest = comment.trim_start();
    let looks_like = rest
        .get(..6)
        .is_some_and(|p| p.eq_ignore_ascii_case("[batch"));
    if !looks_like {
        return BatchLine::NotBatch;
    }
    let Some(inner) = rest.strip_prefix("[batch:") else {
        return BatchLine::Malformed;
    };
    let Some(end) = inner.find(']') else {
        return BatchLine::Malformed;
    };
    let label = &inner[..end];
    let valid = !label.is_empty()
        && label
            .split('.')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()));
    if valid {
        BatchLine::Label(label)
    } else {
        BatchLine::Malformed
    }
}

/// `xargs` in the bash tool stripped one level of quotes from IDs.
pub(super) fn unquote(s: &str) -> &str {
    for q in ['"', '\''] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            return &s[1..s.len() - 1];
        }
    }
    s
}
