//! Marking a story done in its source: the spec's `status: done` and
//! prd.json's `passes: true`. The landing commit carries these edits; a
//! file git does not track is edited on disk instead.

use std::path::{Path, PathBuf};

use super::frontmatter::{find_frontmatter, top_level_value, FrontmatterFind};
use crate::store;

/// Returns `text` with the frontmatter field `field` set to `done` (added to the
/// frontmatter when missing; a spec without frontmatter gets one). Only the
/// frontmatter is touched, never the body.
pub(crate) fn set_status_done(text: &str, field: &str) -> String {
    let (bom, body) = match text.strip_prefix('\u{feff}') {
        Some(rest) => ("\u{feff}", rest),
        None => ("", text),
    };
    let nl = if body.contains("\r\n") { "\r\n" } else { "\n" };
    let span = match find_frontmatter(body) {
        FrontmatterFind::Found(span) => span,
        FrontmatterFind::None | FrontmatterFind::Unterminated => {
            return format!("{bom}---{nl}{field}: done{nl}---{nl}{body}");
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
            out.push_str(": done");
            out.push_str(ending);
            replaced = true;
        } else {
            out.push_str(line);
        }
    }
    if !replaced {
        out.push_str(field);
        out.push_str(": done");
        out.push_str(nl);
    }
    out.push_str(&body[span.close..]);
    out
}

/// Sets `passes: true` on story `id` of a prd.json text.
pub(crate) fn set_prd_passes(text: &str, id: &str) -> Option<String> {
    let mut v: serde_json::Value = serde_json::from_str(text).ok()?;
    let stories = v.get_mut("userStories")?.as_array_mut()?;
    for s in stories {
        let sid = match s.get("id") {
            Some(serde_json::Value::String(x)) => x.clone(),
            Some(other) => other.to_string(),
            None => continue,
        };
        if sid == id {
            s.as_object_mut()?
                .insert("passes".into(), serde_json::Value::Bool(true));
        }
    }
    let mut out = serde_json::to_string_pretty(&v).ok()?;
    out.push('\n');
    Some(out)
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
    move |path: &str, old: &str| -> Option<String> {
        if Some(path) == spec_rel.as_deref() {
            Some(set_status_done(old, &field))
        } else if Some(path) == prd_rel.as_deref() {
            set_prd_passes(old, &id)
        } else {
            None
        }
    }
}

/// After a landing: a spec (or prd.json) that git does not track was not
/// in the merge commit, so it is marked done where it lies.
pub(crate) fn finish_on_disk(
    _root: &Path,
    spec: Option<PathBuf>,
    prd: Option<PathBuf>,
    field: &str,
    id: &str,
) {
    let rewrite = |path: &Path, edit: &dyn Fn(&str) -> Option<String>| {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Some(new) = edit(&text) {
                if new != text {
                    let _ = store::write_atomic(path, new.as_bytes());
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
