//! `Reader`: typed values out of the merged JSON, each problem reported
//! against the file and (when it can be found) the key's line.

use std::path::Path;

use serde_json::Value;

use crate::error::Problem;

/// Collects problems while reading typed values out of the merged JSON.
pub(super) struct Reader<'a> {
    pub(super) raw: &'a Value,
    pub(super) defaults: Value,
    pub(super) file: &'a Path,
    pub(super) text: Option<&'a str>,
    pub(super) problems: Vec<Problem>,
    /// Every dotted path asked for: a test holds `keys::KEYS`, which the
    /// unknown-key check accepts, to exactly these.
    pub(super) read: std::cell::RefCell<std::collections::BTreeSet<String>>,
}

impl<'a> Reader<'a> {
    /// The value at a dotted path. JSON null falls back to the default, as
    /// the bash tool's `config_get` did, so `"timeout_seconds": null` is harmless.
    pub(super) fn get(&self, path: &str) -> Option<&Value> {
        self.read.borrow_mut().insert(path.to_string());
        match lookup(self.raw, path) {
            Some(Value::Null) | None => lookup(&self.defaults, path),
            Some(v) => Some(v),
        }
    }

    pub(super) fn problem(&mut self, path: &str, message: String) {
        let line = self.text.and_then(|t| line_of_key(t, path));
        let mut p = Problem::new(self.file, line, message);
        p.key = Some(path.to_string());
        self.problems.push(p);
    }

    /// An optional non-negative amount (dollars), as a number or numeric string.
    pub(super) fn amount(&mut self, path: &str) -> Option<f64> {
        let v = self.get(path)?;
        let parsed = match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse::<f64>().ok(),
            _ => None,
        };
        match parsed {
            Some(x) if x.is_finite() && x >= 0.0 => Some(x),
            _ => {
                let shown = v.to_string();
                self.problem(
                    path,
                    format!("{path} must be an amount in USD such as 5.00, got {shown}"),
                );
                None
            }
        }
    }

    /// A non-negative integer, written as a JSON number or a numeric string.
    pub(super) fn uint(&mut self, path: &str, min: u64, what: &str) -> u64 {
        let fallback = lookup(&self.defaults, path)
            .and_then(Value::as_u64)
            .unwrap_or(min);
        let Some(v) = self.get(path) else {
            return fallback;
        };
        let parsed = match v {
            Value::Number(n) => n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                    .map(|f| f as u64)
            }),
            Value::String(s) if s.trim().is_empty() => Some(fallback),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        };
        match parsed {
            Some(n) if n >= min => n,
            _ => {
                let shown = v.to_string();
                self.problem(path, format!("{path} must be {what}, got {shown}"));
                fallback
            }
        }
    }

    /// `true`/`false`, or the strings `"true"`/`"false"` the bash tool compared.
    pub(super) fn boolean(&mut self, path: &str) -> bool {
        let fallback = lookup(&self.defaults, path)
            .and_then(Value::as_bool)
            .unwrap_or(false);
        match self.get(path) {
            None => fallback,
            Some(v) => match parse_bool(v) {
                Some(b) => b,
                None => {
                    let shown = v.to_string();
                    self.problem(path, format!("{path} must be true or false, got {shown}"));
                    fallback
                }
            },
        }
    }

    /// A string; an empty string means the default (as in the bash tool).
    pub(super) fn string(&mut self, path: &str, allow_empty: bool) -> String {
        let fallback = lookup(&self.defaults, path)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match self.get(path) {
            None => fallback,
            Some(Value::String(s)) if s.is_empty() && !allow_empty => fallback,
            Some(Value::String(s)) => s.clone(),
            Some(v) => {
                let shown = v.to_string();
                self.problem(path, format!("{path} must be a string, got {shown}"));
                fallback
            }
        }
    }

    /// An array of strings, or `None` when absent or null.
    pub(super) fn strings(&mut self, path: &str) -> Option<Vec<String>> {
        let v = self.get(path)?;
        let list = v.as_array().and_then(|items| {
            items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
        });
        if list.is_none() {
            let shown = v.to_string();
            self.problem(
                path,
                format!("{path} must be an array of strings such as [\"a\", \"b\"], got {shown}"),
            );
        }
        list
    }

    /// An object of string values (`sandbox.env.set`), in file order.
    pub(super) fn string_map(&mut self, path: &str) -> Vec<(String, String)> {
        let Some(v) = self.get(path) else {
            return Vec::new();
        };
        let map = v.as_object().and_then(|o| {
            o.iter()
                .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect::<Option<Vec<_>>>()
        });
        if map.is_none() {
            let shown = v.to_string();
            self.problem(
                path,
                format!(
                    "{path} must be an object of strings such as {{\"NAME\": \"value\"}}, got {shown}"
                ),
            );
        }
        map.unwrap_or_default()
    }
}

pub(super) fn parse_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

pub(super) fn lookup<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.')
        .try_fold(v, |cur, key| cur.as_object()?.get(key))
}

/// Best-effort line of a dotted key in the user's text: each segment is looked
/// up after the previous one, so `loop.timeout_seconds` does not land on
/// `testing_phase.timeout_seconds`.
pub(super) fn line_of_key(text: &str, path: &str) -> Option<usize> {
    let mut pos = 0;
    for seg in path.split('.') {
        let seg = seg.split('[').next().unwrap_or(seg);
        let needle = format!("\"{seg}\"");
        pos += text.get(pos..)?.find(&needle)?;
    }
    Some(text[..pos].matches('\n').count() + 1)
}
