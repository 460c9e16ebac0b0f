//! Marking a story done in its source: the spec's `status: done` and
//! prd.json's `passes: true`. The landing commit carries these edits; a
//! file git does not track is edited on disk instead. `ralph reset ID`
//! undoes them (`reset_edit`) in a commit of its own.

use std::path::{Path, PathBuf};

use super::frontmatter::{find_frontmatter, raw_scalar, top_level_value, FrontmatterFind};

/// Returns `text` with the frontmatter field `field` set to `done` (added to the
/// frontmatter when missing; a spec without frontmatter gets one). Only the
/// frontmatter is touched, never the body.
pub(crate) fn set_status_done(text: &str, field: &str) -> String {
    set_status(text, field, "done")
}

/// Undoes `set_status_done` for `ralph reset ID`: `field: done` in the
/// frontmatter becomes `field: pending`; any other text is left as it is.
pub(crate) fn set_status_pending(text: &str, field: &str) -> String {
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    let done = match find_frontmatter(body) {
        FrontmatterFind::Found(span) => {
            raw_scalar(&body[span.yaml], field).is_some_and(|v| v == "done")
        }
        FrontmatterFind::None | FrontmatterFind::Unterminated => false,
    };
    if done {
        set_status(text, field, "pending")
    } else {
        text.to_string()
    }
}

fn set_status(text: &str, field: &str, value: &str) -> String {
    let (bom, body) = match text.strip_prefix('\u{feff}') {
        Some(rest) => ("\u{feff}", rest),
        None => ("", text),
    };
    let nl = if body.contains("\r\n") { "\r\n" } else { "\n" };
    let span = match find_frontmatter(body) {
        FrontmatterFind::Found(span) => span,
        FrontmatterFind::None | FrontmatterFind::Unterminated => {
            return format!("{bom}---{nl}{field}: {value}{nl}---{nl}{body}");
        }
    };
    let mut out = String::with_capacity(text.len() + field.len() + 8);
    out.push_str(bom);
    out.push_str(&body[..span.yaml.start]);
    let mut replaced = false;
    for line in body[span.yaml.clone()].split_inclusive('\n') {
        if top_level_value(line, field).is_some() {
            let ending = if line.ends_with("\r\n") {
                "\r\n"
            } else if line.ends_with('\n') {
                "\n"
            } else {
                ""
            };
            out.push_str(field);
            out.push_str(": ");
            out.push_str(value);
            out.push_str(ending);
            replaced = true;
        } else {
            out.push_str(line);
        }
    }
    if !replaced {
        out.push_str(field);
        out.push_str(": ");
        out.push_str(value);
        out.push_str(nl);
    }
    out.push_str(&body[span.close..]);
    out
}

/// Sets `passes: true` on story `id` of a prd.json text, changing nothing
/// else: the user's key order, indentation and spacing stay as they were.
/// `None` when the text is not a prd.json with that story.
pub(crate) fn set_prd_passes(text: &str, id: &str) -> Option<String> {
    set_prd_passes_to(text, id, true)
}

/// `set_prd_passes` to `passes` (false for `ralph reset ID`; a story
/// without the key does not pass already and is left as it is).
fn set_prd_passes_to(text: &str, id: &str, passes: bool) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let stories = v.get("userStories")?.as_array()?;
    let k = stories.iter().position(|s| match s.get("id") {
        Some(serde_json::Value::String(x)) => x == id,
        Some(other) => serde_json::from_str::<serde_json::Value>(id).ok().as_ref() == Some(other),
        None => false,
    })?;
    let passes_now = stories[k].get("passes");
    if passes_now == Some(&serde_json::Value::Bool(passes)) || (!passes && passes_now.is_none()) {
        return Some(text.to_string());
    }
    let word = if passes { "true" } else { "false" };
    let b = text.as_bytes();
    let top = json::members(b, json::skip_ws(b, 0))?;
    let (_, arr) = top
        .into_iter()
        .find(|(key, _)| json::key_is(b, key, "userStories"))?;
    let story = json::elements(b, arr.start)?.get(k)?.clone();
    let members = json::members(b, story.start)?;
    let mut out = String::with_capacity(text.len() + 24);
    if let Some((_, value)) = members
        .iter()
        .find(|(key, _)| json::key_is(b, key, "passes"))
    {
        out.push_str(&text[..value.start]);
        out.push_str(word);
        out.push_str(&text[value.end..]);
    } else if let Some((key, value)) = members.last() {
        // After the last member, indented like it.
        let line_start = text[..key.start].rfind('\n').map_or(0, |n| n + 1);
        let lead = &text[line_start..key.start];
        let sep = if lead.trim().is_empty() {
            format!(",\n{lead}")
        } else {
            ", ".to_string()
        };
        out.push_str(&text[..value.end]);
        out.push_str(&sep);
        out.push_str("\"passes\": ");
        out.push_str(word);
        out.push_str(&text[value.end..]);
    } else {
        let open = story.start + 1;
        out.push_str(&text[..open]);
        out.push_str("\"passes\": ");
        out.push_str(word);
        out.push_str(&text[open..]);
    }
    Some(out)
}

/// Byte spans of a JSON text already known to be valid: just enough to
/// edit one value in place.
mod json {
    use std::ops::Range;

    pub(super) fn skip_ws(b: &[u8], mut i: usize) -> usize {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    }

    /// The end (exclusive) of the value starting at `i`.
    fn value_end(b: &[u8], i: usize) -> Option<usize> {
        match *b.get(i)? {
            b'"' => {
                let mut j = i + 1;
                while j < b.len() {
                    match b[j] {
                        b'\\' => j += 2,
                        b'"' => return Some(j + 1),
                        _ => j += 1,
                    }
                }
                None
            }
            b'{' | b'[' => {
                let mut depth = 0usize;
                let mut j = i;
                while j < b.len() {
                    match b[j] {
                        b'"' => {
                            j = value_end(b, j)?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                return Some(j + 1);
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                None
            }
            _ => {
                let mut j = i;
                while j < b.len()
                    && !matches!(b[j], b',' | b'}' | b']')
                    && !b[j].is_ascii_whitespace()
                {
                    j += 1;
                }
                Some(j)
            }
        }
    }

    /// The (key, value) spans of the object starting at `i`.
    pub(super) fn members(b: &[u8], i: usize) -> Option<Vec<(Range<usize>, Range<usize>)>> {
        if *b.get(i)? != b'{' {
            return None;
        }
        let mut out = Vec::new();
        let mut j = skip_ws(b, i + 1);
        while *b.get(j)? != b'}' {
            let key = j..value_end(b, j)?;
            j = skip_ws(b, key.end);
            if *b.get(j)? != b':' {
                return None;
            }
            let start = skip_ws(b, j + 1);
            let value = start..value_end(b, start)?;
            out.push((key, value.clone()));
            j = skip_ws(b, value.end);
            if *b.get(j)? == b',' {
                j = skip_ws(b, j + 1);
            }
        }
        Some(out)
    }

    /// The element spans of the array starting at `i`.
    pub(super) fn elements(b: &[u8], i: usize) -> Option<Vec<Range<usize>>> {
        if *b.get(i)? != b'[' {
            return None;
        }
        let mut out = Vec::new();
        let mut j = skip_ws(b, i + 1);
        while *b.get(j)? != b']' {
            let value = j..value_end(b, j)?;
            out.push(value.clone());
            j = skip_ws(b, value.end);
            if *b.get(j)? == b',' {
                j = skip_ws(b, j + 1);
            }
        }
        Some(out)
    }

    /// True when the key span holds the string `name` (keys with escapes
    /// are compared decoded).
    pub(super) fn key_is(b: &[u8], key: &Range<usize>, name: &str) -> bool {
        serde_json::from_slice::<String>(&b[key.clone()]).is_ok_and(|k| k == name)
    }
}

/// The edit a landing commit carries for story `id`: given a
/// repository-relative path and its text at the target's tip, the new text
/// (`None` leaves the file alone).
pub(crate) fn landing_edit(
    spec_rel: Option<String>,
    prd_rel: Option<String>,
    field: String,
    id: String,
) -> impl Fn(&str, &str) -> Option<String> {
    status_edit(spec_rel, prd_rel, field, id, true)
}

/// `landing_edit` undone, for `ralph reset ID`: the spec's `status: done`
/// back to `pending`, prd.json's `passes` back to false.
pub(crate) fn reset_edit(
    spec_rel: Option<String>,
    prd_rel: Option<String>,
    field: String,
    id: String,
) -> impl Fn(&str, &str) -> Option<String> {
    status_edit(spec_rel, prd_rel, field, id, false)
}

/// The one routing of both edits: the spec's status, or prd.json's
/// `passes`, set to `done` or back; any other file left alone.
fn status_edit(
    spec_rel: Option<String>,
    prd_rel: Option<String>,
    field: String,
    id: String,
    done: bool,
) -> impl Fn(&str, &str) -> Option<String> {
    move |path: &str, old: &str| -> Option<String> {
        if Some(path) == spec_rel.as_deref() {
            Some(if done {
                set_status_done(old, &field)
            } else {
                set_status_pending(old, &field)
            })
        } else if Some(path) == prd_rel.as_deref() {
            set_prd_passes_to(old, &id, done)
        } else {
            None
        }
    }
}

/// After a landing: a spec (or prd.json) that git does not track was not
/// in the merge commit, so it is marked done where it lies, through `write`
/// (the caller's atomic write: `backlog/` parses and edits text, it does not
/// own how files are written).
pub(crate) fn finish_on_disk(
    spec: Option<PathBuf>,
    prd: Option<PathBuf>,
    field: &str,
    id: &str,
    write: impl Fn(&Path, &[u8]) -> std::io::Result<()>,
) {
    let rewrite = |path: &Path, edit: &dyn Fn(&str) -> Option<String>| {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Some(new) = edit(&text) {
                if new != text {
                    let _ = write(path, new.as_bytes());
                }
            }
        }
    };
    if let Some(p) = spec {
        rewrite(&p, &|t| Some(set_status_done(t, field)));
    }
    if let Some(p) = prd {
        rewrite(&p, &|t| set_prd_passes(t, id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_is_set_in_place_keeping_order_and_format() {
        let text = "{\n    \"project\": \"x\",\n    \"userStories\": [\n        {\n            \"id\": \"US-001\",\n            \"title\": \"A\",\n            \"passes\": false,\n            \"notes\": \"keep {braces} and \\\"quotes\\\"\"\n        },\n        { \"title\": \"B\", \"id\": 2 }\n    ],\n    \"branchName\": \"main\"\n}\n";
        let one = set_prd_passes(text, "US-001").unwrap();
        assert_eq!(one, text.replace("\"passes\": false", "\"passes\": true"));
        let two = set_prd_passes(&one, "2").unwrap();
        assert_eq!(
            two,
            one.replace("\"id\": 2 }", "\"id\": 2, \"passes\": true }")
        );
        let v: serde_json::Value = serde_json::from_str(&two).unwrap();
        assert_eq!(v["userStories"][1]["passes"], true);
        assert_eq!(set_prd_passes(&two, "2").unwrap(), two, "already done");
        assert_eq!(set_prd_passes(&two, "US-404"), None);
        let multi = "{\"userStories\": [\n  {\n    \"id\": \"a\"\n  }\n]}";
        assert_eq!(
            set_prd_passes(multi, "a").unwrap(),
            "{\"userStories\": [\n  {\n    \"id\": \"a\",\n    \"passes\": true\n  }\n]}"
        );
        assert_eq!(
            set_prd_passes("{\"userStories\": [{}, {\"id\": \"b\"}]}", "b").unwrap(),
            "{\"userStories\": [{}, {\"id\": \"b\", \"passes\": true}]}"
        );
    }

    /// `ralph reset ID` undoes exactly what a landing did, in place.
    #[test]
    fn reset_edit_undoes_the_landing_edit() {
        let spec = "---\nid: \"1.1\"\nstatus: pending\n---\nstatus: done in the body\n";
        let done = set_status_done(spec, "status");
        assert_eq!(set_status_pending(&done, "status"), spec);
        // Only a `done` goes back; other words and the body stay.
        let other = "---\nstatus: in-progress\n---\nx\n";
        assert_eq!(set_status_pending(other, "status"), other);
        assert_eq!(
            set_status_pending("no frontmatter\n", "status"),
            "no frontmatter\n"
        );
        let quoted = "\u{feff}---\r\nstate: \"done\"\r\n---\r\n";
        assert_eq!(
            set_status_pending(quoted, "state"),
            "\u{feff}---\r\nstate: pending\r\n---\r\n"
        );

        let prd = "{\"userStories\": [{\"id\": \"a\", \"passes\": false}, {\"id\": \"b\"}]}";
        let passed = set_prd_passes(prd, "a").unwrap();
        let edit = reset_edit(None, Some("prd.json".into()), "status".into(), "a".into());
        assert_eq!(edit("prd.json", &passed).unwrap(), prd);
        assert_eq!(
            set_prd_passes_to(prd, "b", false).unwrap(),
            prd,
            "absent is not passing"
        );
        assert_eq!(edit("other.json", &passed), None);
    }
}
