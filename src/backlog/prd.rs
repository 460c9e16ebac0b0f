//! `prd.json` backlogs: user stories, their spec text, their lines. Pure.

use super::*;

pub(super) fn load_prd(text: &str) -> Result<Backlog, Vec<Problem>> {
    let file = Path::new(PRD_FILE);
    let doc = prd_doc(text, file)?;
    let (items, branch) = prd_items(&doc, file)?;
    let mut problems = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut stories: Vec<(f64, Story)> = Vec::new();
    // Stories ralph decomposed: replaced by their sub-stories.
    let mut skipped: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some((id, s, line)) = prd_id(text, file, i, item, &mut seen, &mut problems) else {
            continue;
        };
        let mut bad =
            |what: String| problems.push(Problem::new(file, line, format!("story {id}: {what}")));
        let f = prd_fields(s, &mut bad);
        let decomposed = s
            .get("decomposedInto")
            .and_then(|v| v.as_array())
            .is_some_and(|v| !v.is_empty());
        if decomposed {
            skipped.push(id);
            continue;
        }
        let (files, model_name, effort) = prd_hints(s, &mut bad);
        let best_of = prd_best_of(s, &mut bad);
        let title = if f.title.is_empty() {
            id.clone()
        } else {
            f.title
        };
        let prd_spec = render_prd_spec(&id, &title, &f.description, &f.criteria);
        stories.push((
            f.priority,
            Story {
                id,
                title,
                line: 0,
                section: 0,
                spec_path: None,
                depends_on: f.depends_on,
                estimation: None,
                agent: None,
                allow_empty_done: false,
                allow_test_changes: false,
                prd_passes: f.passes,
                model: super::ModelChoice {
                    model: model_name,
                    effort,
                    best_of,
                },
                prd_spec: Some(prd_spec.clone()),
                priority: files::DEFAULT_RANK,
                files,
                named: files::named_paths(&prd_spec),
                spec_bytes: prd_spec.len(),
            },
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    // sort_by is stable, so equal priorities keep file order.
    stories.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Equal priorities share a rank; lower numbers rank first.
    let mut rank = 0;
    for i in 0..stories.len() {
        if i > 0 && stories[i].0 != stories[i - 1].0 {
            rank += 1;
        }
        stories[i].1.priority = rank;
    }
    Ok(Backlog {
        source: Source::Prd { branch },
        stories: stories.into_iter().map(|(_, s)| s).collect(),
        sections: vec![Section {
            label: None,
            chain: false,
        }],
        skipped,
    })
}

/// prd.json read as JSON (a byte-order mark let be), or the syntax error
/// where it is.
fn prd_doc(text: &str, file: &Path) -> Result<serde_json::Value, Vec<Problem>> {
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_json::from_str(body).map_err(|e| {
        let msg = e.to_string();
        let msg = msg
            .rfind(" at line ")
            .map_or(msg.as_str(), |i| &msg[..i])
            .to_string();
        vec![Problem::new(
            file,
            Some(e.line()).filter(|&l| l > 0),
            format!("invalid JSON ({msg}); fix the syntax"),
        )]
    })
}

/// The document's `userStories` and `branchName`.
fn prd_items<'a>(
    doc: &'a serde_json::Value,
    file: &Path,
) -> Result<(&'a Vec<serde_json::Value>, Option<String>), Vec<Problem>> {
    let Some(obj) = doc.as_object() else {
        return Err(vec![Problem::new(
            file,
            Some(1),
            "prd.json must be a JSON object with a \"userStories\" array",
        )]);
    };
    let Some(items) = obj.get("userStories").and_then(|v| v.as_array()) else {
        return Err(vec![Problem::new(
            file,
            None,
            "prd.json has no \"userStories\" array; add one (each story needs at least an \"id\" and a \"title\")",
        )]);
    };
    let branch = obj
        .get("branchName")
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .filter(|s| !s.is_empty());
    Ok((items, branch))
}

/// Entry `i`'s ID, its object and its line, when it has a valid ID not
/// seen before (else the problem is pushed).
fn prd_id<'a>(
    text: &str,
    file: &Path,
    i: usize,
    item: &'a serde_json::Value,
    seen: &mut HashMap<String, usize>,
    problems: &mut Vec<Problem>,
) -> Option<(
    String,
    &'a serde_json::Map<String, serde_json::Value>,
    Option<usize>,
)> {
    let at = format!("userStories[{i}]");
    let Some(s) = item.as_object() else {
        problems.push(Problem::new(
            file,
            None,
            format!("{at} must be an object with \"id\" and \"title\""),
        ));
        return None;
    };
    let id = match s.get("id") {
        Some(serde_json::Value::String(id)) => id.trim().to_string(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        _ => {
            problems.push(Problem::new(
                file,
                None,
                format!("{at} has no \"id\"; give it a string ID such as \"US-001\""),
            ));
            return None;
        }
    };
    let line = prd_line(text, &id);
    if let Err(reason) = check_id(&id) {
        problems.push(Problem::new(
            file,
            line,
            format!("{at}: invalid story ID {id:?}: it {reason}"),
        ));
        return None;
    }
    if let Some(&first) = seen.get(&id) {
        problems.push(Problem::new(
            file,
            line,
            format!(
                "story {id} appears twice in userStories (entries {first} and {i}); remove one"
            ),
        ));
        return None;
    }
    seen.insert(id.clone(), i);
    Some((id, s, line))
}

/// A story's fields read from its entry, each wrong one told to `bad`.
struct PrdFields {
    title: String,
    description: String,
    criteria: Vec<String>,
    priority: f64,
    passes: bool,
    depends_on: Vec<String>,
}

fn prd_fields(
    s: &serde_json::Map<String, serde_json::Value>,
    bad: &mut dyn FnMut(String),
) -> PrdFields {
    let title = match s.get("title") {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(t)) => t.trim().to_string(),
        Some(other) => {
            bad(format!("\"title\" must be a string, got {other}"));
            String::new()
        }
    };
    let description = match s.get("description") {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(d)) => d.clone(),
        Some(other) => {
            bad(format!("\"description\" must be a string, got {other}"));
            String::new()
        }
    };
    let criteria: Vec<String> = match s.get("acceptanceCriteria") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::String(c)) => vec![c.clone()],
        Some(serde_json::Value::Array(list)) => {
            match list
                .iter()
                .map(|c| c.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
            {
                Some(v) => v,
                None => {
                    bad("\"acceptanceCriteria\" must be an array of strings".to_string());
                    Vec::new()
                }
            }
        }
        Some(other) => {
            bad(format!(
                "\"acceptanceCriteria\" must be an array of strings, got {other}"
            ));
            Vec::new()
        }
    };
    // Stories without a priority run after every prioritised one.
    let priority = match s.get("priority") {
        None | Some(serde_json::Value::Null) => f64::INFINITY,
        Some(serde_json::Value::Number(n)) => n.as_f64().unwrap_or(f64::INFINITY),
        Some(serde_json::Value::String(p)) if p.trim().parse::<f64>().is_ok() => {
            p.trim().parse::<f64>().unwrap_or(f64::INFINITY)
        }
        Some(other) => {
            bad(format!(
                "\"priority\" must be a number (lower runs first), got {other}"
            ));
            f64::INFINITY
        }
    };
    let passes = match s.get("passes") {
        None | Some(serde_json::Value::Null) => false,
        Some(serde_json::Value::Bool(b)) => *b,
        Some(serde_json::Value::String(p)) if p == "true" || p == "false" => p == "true",
        Some(other) => {
            bad(format!("\"passes\" must be true or false, got {other}"));
            false
        }
    };
    let mut depends_on = Vec::new();
    match s.get("dependsOn") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Array(list)) => {
            for dep in list {
                let dep_id = match dep {
                    serde_json::Value::String(d) => d.trim().to_string(),
                    serde_json::Value::Number(n) => n.to_string(),
                    other => {
                        bad(format!(
                            "\"dependsOn\" entries must be story IDs, got {other}"
                        ));
                        continue;
                    }
                };
                match check_id(&dep_id) {
                    Ok(()) => depends_on.push(dep_id),
                    Err(reason) => bad(format!(
                        "dependsOn entry {dep_id:?} is not a valid story ID: it {reason}"
                    )),
                }
            }
        }
        Some(other) => bad(format!(
            "\"dependsOn\" must be an array of story IDs, got {other}"
        )),
    }
    PrdFields {
        title,
        description,
        criteria,
        priority,
        passes,
        depends_on,
    }
}

/// The entry's `bestOf` (`best_of` in a spec's frontmatter): a whole
/// number of at least 1.
fn prd_best_of(
    s: &serde_json::Map<String, serde_json::Value>,
    bad: &mut dyn FnMut(String),
) -> Option<u32> {
    let v = s.get("bestOf").filter(|v| !v.is_null())?;
    let n = v.as_u64().filter(|&n| (1..=u32::MAX as u64).contains(&n));
    if n.is_none() {
        bad(format!(
            "\"bestOf\" must be a whole number of at least 1, got {v}"
        ));
    }
    n.map(|n| n as u32)
}

/// What the entry says beyond its text: the files it expects to touch
/// (for conflict-aware dispatch), its model and effort.
fn prd_hints(
    s: &serde_json::Map<String, serde_json::Value>,
    bad: &mut dyn FnMut(String),
) -> (Vec<String>, Option<String>, Option<super::Effort>) {
    let files: Vec<String> = match s.get("files") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::Array(list)) => {
            match list
                .iter()
                .map(|f| f.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
            {
                Some(v) => v.iter().filter_map(|f| files::clean_path(f)).collect(),
                None => {
                    bad("\"files\" must be an array of paths".to_string());
                    Vec::new()
                }
            }
        }
        Some(other) => {
            bad(format!("\"files\" must be an array of paths, got {other}"));
            Vec::new()
        }
    };
    let text_field = |key: &str| match s.get(key) {
        Some(serde_json::Value::String(v)) if !v.trim().is_empty() => {
            Ok(Some(v.trim().to_string()))
        }
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(other) => Err(format!("\"{key}\" must be a string, got {other}")),
    };
    let model_name = text_field("model").unwrap_or_else(|e| {
        bad(e);
        None
    });
    let effort = match text_field("effort") {
        Ok(Some(e)) => super::Effort::parse(&e).or_else(|| {
            bad(format!("\"effort\" must be low, medium or high, got {e:?}"));
            None
        }),
        Ok(None) => None,
        Err(e) => {
            bad(e);
            None
        }
    };
    (files, model_name, effort)
}

/// Best-effort line of a story in prd.json: the first line naming `"id"` and the ID.
pub(super) fn prd_line(text: &str, id: &str) -> Option<usize> {
    let quoted = format!("\"{id}\"");
    text.lines()
        .position(|l| l.contains("\"id\"") && (l.contains(&quoted) || l.contains(id)))
        .map(|i| i + 1)
}

pub(super) fn render_prd_spec(
    id: &str,
    title: &str,
    description: &str,
    criteria: &[String],
) -> String {
    let mut out = format!("# Story {id}: {title}\n");
    if !description.trim().is_empty() {
        out.push_str("\n## Description\n\n");
        out.push_str(description.trim());
        out.push('\n');
    }
    if !criteria.is_empty() {
        out.push_str("\n## Acceptance Criteria\n\n");
        for c in criteria {
            out.push_str("- ");
            out.push_str(c.trim());
            out.push('\n');
        }
    }
    out
}
