//! The Model Context Protocol as ralph speaks it (issue 37): JSON-RPC 2.0,
//! one message a line, `initialize`, `ping`, `tools/list` and `tools/call`.
//! Each tool is one `ralph` command line; running it is the caller's
//! (`mcp::serve`), so this file decides everything from plain data.

use serde_json::{json, Map, Value};

/// The revisions reached through `initialize` that this server speaks; a
/// client asking for another gets the newest.
const VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// What a `ralph` command did, as the tool's result shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CliOutcome {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// What an argument of a tool is.
#[derive(Clone, Copy)]
enum Arg {
    /// A story ID (required).
    Id,
    /// Free text (required).
    Text,
    /// A whole number ≥ 1 (required).
    Count,
    /// A whole number ≥ 1 (optional).
    MaybeCount,
    /// One of the graph's formats (optional).
    Format,
    /// A flag (optional).
    Flag,
}

/// The tools: name, what it does, its arguments. The descriptions say
/// which need a running `ralph run` (they go through its control socket,
/// exactly as the CLI's commands do).
/// A tool: its name, what it does, its arguments.
type ToolSpec = (&'static str, &'static str, &'static [(&'static str, Arg)]);

const TOOLS: &[ToolSpec] = &[
    ("status", "Progress, running, failed, blocked stories, tokens and cost (`ralph status`). `json: true` for the machine-readable form.", &[("json", Arg::Flag)]),
    ("stories", "One line per story with its status (`ralph stories`).", &[]),
    ("graph", "The story DAG: what each story waits for (`ralph graph`); format text (default), dot or mermaid.", &[("format", Arg::Format)]),
    ("log", "An attempt's log as readable text (`ralph log ID`): the latest attempt unless `attempt` is given; `tail` keeps the last N lines.", &[("id", Arg::Id), ("attempt", Arg::MaybeCount), ("tail", Arg::MaybeCount)]),
    ("validate", "Check the backlog and config and list every problem; changes nothing (`ralph validate`).", &[]),
    ("pause", "Needs a running `ralph run`: no new attempt starts; running ones finish and land (`ralph pause`).", &[]),
    ("resume", "Needs a running `ralph run`: new attempts start again, undoing pause and drain (`ralph resume`).", &[]),
    ("drain", "Needs a running `ralph run`: start nothing new, end once nothing runs or lands (`ralph drain`).", &[]),
    ("stop", "Needs a running `ralph run`: stop the story's attempt (no retry charged) and hold it (`ralph stop ID`).", &[("id", Arg::Id)]),
    ("hold", "Keep a story, and what depends on it, from starting; with or without a run (`ralph hold ID`).", &[("id", Arg::Id)]),
    ("release", "Let a held story start again; with or without a run (`ralph release ID`).", &[("id", Arg::Id)]),
    ("note", "A note the story's next attempt or fix-up gets in its prompt; with or without a run (`ralph note ID TEXT`).", &[("id", Arg::Id), ("text", Arg::Text)]),
    ("jobs", "Needs a running `ralph run`: at most N agents at once from now on; lowering stops none (`ralph jobs N`).", &[("n", Arg::Count)]),
];

fn schema(args: &[(&str, Arg)]) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for (name, arg) in args {
        let (p, needed) = match arg {
            Arg::Id => (
                json!({"type": "string", "description": "the story's ID, e.g. 2.3 or ENG-12"}),
                true,
            ),
            Arg::Text => (
                json!({"type": "string", "description": "what the story's next attempt should know"}),
                true,
            ),
            Arg::Count => (json!({"type": "integer", "minimum": 1}), true),
            Arg::MaybeCount => (json!({"type": "integer", "minimum": 1}), false),
            Arg::Format => (
                json!({"type": "string", "enum": ["text", "dot", "mermaid"]}),
                false,
            ),
            Arg::Flag => (json!({"type": "boolean"}), false),
        };
        props.insert((*name).to_string(), p);
        if needed {
            required.push(json!(name));
        }
    }
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

/// `tools/list`'s answer.
pub(crate) fn tools() -> Value {
    let list: Vec<Value> = TOOLS
        .iter()
        .map(|(name, about, args)| json!({"name": name, "description": about, "inputSchema": schema(args)}))
        .collect();
    json!({ "tools": list })
}

/// A call's arguments turned into `ralph`'s command line (`--` before a
/// story ID, so an ID never reads as a flag), and the `tail` to keep.
fn command_line(
    name: &str,
    args: &Map<String, Value>,
) -> Result<(Vec<String>, Option<usize>), String> {
    let Some((_, _, spec)) = TOOLS.iter().find(|(n, _, _)| *n == name) else {
        return Err(format!("no tool named {name:?}: `tools/list` names them"));
    };
    if let Some(extra) = args.keys().find(|k| !spec.iter().any(|(n, _)| n == k)) {
        return Err(format!("tool {name} takes no argument {extra:?}"));
    }
    let text = |key: &str| match args.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
        None => Ok(None),
        _ => Err(format!("tool {name}: `{key}` must be a non-empty string")),
    };
    let count = |key: &str| match args.get(key) {
        Some(v) => match v.as_u64().filter(|n| *n >= 1) {
            Some(n) => Ok(Some(n)),
            None => Err(format!(
                "tool {name}: `{key}` must be a whole number of at least 1"
            )),
        },
        None => Ok(None),
    };
    let needed =
        |key: &str, v: Option<String>| v.ok_or_else(|| format!("tool {name} needs `{key}`"));
    let mut line = vec![name.to_string()];
    let mut tail = None;
    match name {
        "status" => match args.get("json") {
            Some(Value::Bool(true)) => line.push("--json".into()),
            Some(Value::Bool(false)) | None => {}
            _ => return Err(format!("tool {name}: `json` must be true or false")),
        },
        "graph" => {
            if let Some(f) = text("format")? {
                if !["text", "dot", "mermaid"].contains(&f.as_str()) {
                    return Err(format!(
                        "tool graph: format is text, dot or mermaid, not {f:?}"
                    ));
                }
                line.extend(["--format".into(), f]);
            }
        }
        "log" => {
            if let Some(n) = count("attempt")? {
                line.extend(["--attempt".into(), n.to_string()]);
            }
            tail = count("tail")?.map(|n| n as usize);
            line.extend(["--".into(), needed("id", text("id")?)?]);
        }
        "stop" | "hold" | "release" => line.extend(["--".into(), needed("id", text("id")?)?]),
        "note" => {
            let id = needed("id", text("id")?)?;
            let note = needed("text", text("text")?)?;
            line.extend(["--".into(), id, note]);
        }
        "jobs" => {
            let n = count("n")?.ok_or_else(|| format!("tool {name} needs `n`"))?;
            line.push(n.to_string());
        }
        _ => {}
    }
    Ok((line, tail))
}

/// The last `n` lines of `text`.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A tool's result: what the command printed (its errors and hints word for
/// word), an error when it exited non-zero.
fn result(out: CliOutcome, tail: Option<usize>) -> Value {
    let stdout = match tail {
        Some(n) => last_lines(&out.stdout, n),
        None => out.stdout.trim_end().to_string(),
    };
    let text = [stdout.as_str(), out.stderr.trim_end()]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    json!({"content": [{"type": "text", "text": text}], "isError": out.code != 0})
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// One incoming line; the reply to write, if any (notifications get none).
/// `cli` runs `ralph` with the given arguments.
pub(crate) fn handle(line: &str, cli: &mut dyn FnMut(&[String]) -> CliOutcome) -> Option<Value> {
    let Ok(msg) = serde_json::from_str::<Value>(line) else {
        return Some(error(Value::Null, -32700, "not JSON"));
    };
    let method = msg.get("method").and_then(Value::as_str);
    let id = msg.get("id").cloned();
    let (Some(method), Some(id)) = (method, id) else {
        // A notification (`notifications/initialized`, a cancel) or a
        // response to nothing we asked: nothing to answer.
        return None;
    };
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let answer = match method {
        "initialize" => {
            let asked = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            let version = if VERSIONS.contains(&asked) {
                asked
            } else {
                VERSIONS[VERSIONS.len() - 1]
            };
            json!({
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "ralph", "version": env!("CARGO_PKG_VERSION")},
                "instructions": "ralph runs coding agents over this project's backlog. Read with status, stories, graph, log and validate; steer a running `ralph run` with pause, resume, drain, stop, hold, release, note and jobs."
            })
        }
        "ping" => json!({}),
        "tools/list" => tools(),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let args = match params.get("arguments") {
                Some(Value::Object(m)) => m.clone(),
                None | Some(Value::Null) => Map::new(),
                Some(_) => return Some(error(id, -32602, "`arguments` must be an object")),
            };
            match command_line(name, &args) {
                Ok((line, tail)) => result(cli(&line), tail),
                Err(why) => return Some(error(id, -32602, &why)),
            }
        }
        other => return Some(error(id, -32601, &format!("no method {other:?}"))),
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": answer}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(line: Value, out: CliOutcome) -> (Option<Value>, Vec<Vec<String>>) {
        let mut seen = Vec::new();
        let reply = handle(&line.to_string(), &mut |args| {
            seen.push(args.to_vec());
            out.clone()
        });
        (reply, seen)
    }

    fn ok(stdout: &str) -> CliOutcome {
        CliOutcome {
            code: 0,
            stdout: stdout.into(),
            stderr: String::new(),
        }
    }

    fn tool(name: &str, args: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": args}})
    }

    #[test]
    fn initialize_keeps_a_known_revision_and_offers_the_newest_otherwise() {
        let init = |v: &str| {
            call(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": v}}), ok("")).0.unwrap()
        };
        assert_eq!(
            init("2025-06-18")["result"]["protocolVersion"],
            "2025-06-18"
        );
        assert_eq!(
            init("2099-01-01")["result"]["protocolVersion"],
            "2025-11-25"
        );
        assert_eq!(
            init("2025-06-18")["result"]["capabilities"]["tools"]["listChanged"],
            false
        );
    }

    #[test]
    fn notifications_get_no_answer_and_unknown_methods_an_error() {
        let (r, seen) = call(
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            ok(""),
        );
        assert!(r.is_none() && seen.is_empty());
        let (r, _) = call(
            json!({"jsonrpc": "2.0", "id": "a", "method": "resources/list"}),
            ok(""),
        );
        assert_eq!(r.unwrap()["error"]["code"], -32601);
        assert_eq!(
            handle("{oops", &mut |_| ok("")).unwrap()["error"]["code"],
            -32700
        );
    }

    #[test]
    fn thirteen_tools_each_with_an_object_schema() {
        let list = tools();
        let names: Vec<&str> = list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "status", "stories", "graph", "log", "validate", "pause", "resume", "drain",
                "stop", "hold", "release", "note", "jobs"
            ]
        );
        for t in list["tools"].as_array().unwrap() {
            assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        }
        assert_eq!(
            list["tools"][11]["inputSchema"]["required"],
            json!(["id", "text"])
        );
    }

    #[test]
    fn calls_become_the_clis_command_lines_with_ids_after_a_double_dash() {
        let line = |name: &str, args: Value| call(tool(name, args), ok("")).1.remove(0);
        assert_eq!(line("status", json!({})), ["status"]);
        assert_eq!(line("status", json!({"json": true})), ["status", "--json"]);
        assert_eq!(
            line("graph", json!({"format": "dot"})),
            ["graph", "--format", "dot"]
        );
        assert_eq!(
            line("log", json!({"id": "2.3", "attempt": 2})),
            ["log", "--attempt", "2", "--", "2.3"]
        );
        assert_eq!(
            line("hold", json!({"id": "--help"})),
            ["hold", "--", "--help"]
        );
        assert_eq!(
            line("note", json!({"id": "ENG-12", "text": "use v2"})),
            ["note", "--", "ENG-12", "use v2"]
        );
        assert_eq!(line("jobs", json!({"n": 3})), ["jobs", "3"]);
    }

    #[test]
    fn bad_arguments_are_invalid_params_and_run_nothing() {
        for (name, args) in [
            ("jobs", json!({"n": 0})),
            ("jobs", json!({})),
            ("note", json!({"id": "1.1"})),
            ("hold", json!({"id": ""})),
            ("graph", json!({"format": "png"})),
            ("status", json!({"verbose": true})),
            ("nosuch", json!({})),
        ] {
            let (r, seen) = call(tool(name, args.clone()), ok(""));
            assert_eq!(r.unwrap()["error"]["code"], -32602, "{name} {args}");
            assert!(seen.is_empty());
        }
    }

    #[test]
    fn a_failing_command_is_an_error_result_with_its_words_and_hint() {
        let out = CliOutcome {
            code: 2,
            stdout: String::new(),
            stderr: "error: no run is going on here\nhint: start one with `ralph run`\n".into(),
        };
        let r = call(tool("pause", json!({})), out).0.unwrap();
        assert_eq!(r["result"]["isError"], true);
        assert_eq!(
            r["result"]["content"][0]["text"],
            "error: no run is going on here\nhint: start one with `ralph run`"
        );
        assert_eq!(r["id"], 7);
    }

    #[test]
    fn tail_keeps_the_last_lines_of_a_log() {
        let r = call(
            tool("log", json!({"id": "1.1", "tail": 2})),
            ok("a\nb\nc\n"),
        )
        .0
        .unwrap();
        assert_eq!(r["result"]["content"][0]["text"], "b\nc");
        assert_eq!(r["result"]["isError"], false);
    }
}
