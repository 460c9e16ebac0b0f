//! Checks of the crate's shape, read from its own sources: which module
//! imports which (no import cycle but the known ones, listed below to be
//! taken apart), and where `.ralph/` paths are spelled (in `paths.rs`
//! only). Production code only: comments, string contents and
//! `#[cfg(test)]` items are left out before anything is looked at.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Import cycles that exist today, each as the modules it ties together:
/// the lead empties this list as they are taken apart (issue 21). A cycle
/// not listed here, or a listed one that grew, fails
/// `no_import_cycle_but_the_known_ones`; one that shrank or went away
/// fails it too, so the list is tightened the day it can be.
const KNOWN_CYCLES: &[&[&str]] = &[];

/// A source file, read.
struct Source {
    /// Relative to `src/`, with `/` separators.
    rel: String,
    /// The text with comments and string/char contents blanked and
    /// `#[cfg(test)]` items removed (newlines kept, so offsets give lines).
    code: String,
    /// String literals outside test code: (line, contents as written).
    strings: Vec<(usize, String)>,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every production source file of the crate (files only a
/// `#[cfg(test)] mod x;` brings in are left out, and so is everything
/// under such a module's directory: its submodules are tests too).
fn sources() -> Vec<Source> {
    let mut files = Vec::new();
    walk(&src_dir(), &mut files);
    files.sort();
    let mut read = Vec::new();
    let mut test_only: BTreeSet<PathBuf> = BTreeSet::new();
    let mut test_dirs: Vec<PathBuf> = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let (code, strings, test_mods) = lex(&text);
        let dir = if f.ends_with("mod.rs") || f.ends_with("lib.rs") || f.ends_with("main.rs") {
            f.parent().unwrap().to_path_buf()
        } else {
            f.with_extension("")
        };
        for m in test_mods {
            test_only.insert(if m.ends_with(".rs") {
                f.parent().unwrap().join(&m)
            } else {
                dir.join(format!("{m}.rs"))
            });
            test_only.insert(dir.join(&m).join("mod.rs"));
            if !m.ends_with(".rs") {
                test_dirs.push(dir.join(&m));
            }
        }
        let rel = f
            .strip_prefix(src_dir())
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        read.push((f.clone(), Source { rel, code, strings }));
    }
    read.into_iter()
        .filter(|(f, _)| !test_only.contains(f) && !test_dirs.iter().any(|d| f.starts_with(d)))
        .map(|(_, s)| s)
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `text` with comments blanked and string and char literal contents
/// blanked, then `#[cfg(test)]` items blanked; the string literals outside
/// those items; the names (or `#[path]`s) of `#[cfg(test)] mod x;` files.
fn lex(text: &str) -> (String, Vec<(usize, String)>, Vec<String>) {
    let b = text.as_bytes();
    let mut code = b.to_vec();
    // (start offset, contents) of every string literal.
    let mut strings: Vec<(usize, String)> = Vec::new();
    let blank = |code: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut code[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let ident_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if b[i..].starts_with(b"//") {
            let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
            blank(&mut code, i, end);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut code, i, j);
            i = j;
        } else if !ident_before && (b[i] == b'r' || b[i..].starts_with(b"br")) && {
            let k = if b[i] == b'r' { i + 1 } else { i + 2 };
            let hashes = b[k..].iter().take_while(|&&c| c == b'#').count();
            b.get(k + hashes) == Some(&b'"')
        } {
            let k = if b[i] == b'r' { i + 1 } else { i + 2 };
            let hashes = b[k..].iter().take_while(|&&c| c == b'#').count();
            let open = k + hashes + 1;
            let close = format!("\"{}", "#".repeat(hashes));
            let end = text[open..].find(&close).map_or(b.len(), |n| open + n);
            strings.push((i, text[open..end].to_string()));
            blank(&mut code, open, end);
            i = (end + close.len()).min(b.len());
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let j = j.min(b.len());
            strings.push((i, text[i + 1..j].to_string()));
            blank(&mut code, i + 1, j);
            i = j + 1;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{..}'), else a lifetime.
            let end = if b.get(i + 1) == Some(&b'\\') {
                text.get(i + 3..)
                    .and_then(|t| t.find('\''))
                    .map(|n| i + 3 + n)
            } else {
                let c = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + c) == Some(&b'\'')).then_some(i + 1 + c)
            };
            match end {
                Some(e) => {
                    blank(&mut code, i + 1, e);
                    i = e + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    let mut code = String::from_utf8(code).expect("blanking keeps UTF-8 boundaries");
    // `#[cfg(test)]` items.
    let mut test_mods = Vec::new();
    let mut cut: Vec<(usize, usize)> = Vec::new();
    let mut from = 0;
    while let Some(n) = code[from..].find("#[cfg(test)]") {
        let start = from + n;
        let (end, module) = item_end(&code, text, start + "#[cfg(test)]".len());
        if let Some(m) = module {
            test_mods.push(m);
        }
        cut.push((start, end));
        from = end;
    }
    let mut bytes = code.into_bytes();
    for &(s, e) in &cut {
        blank(&mut bytes, s, e);
    }
    code = String::from_utf8(bytes).unwrap();
    let line_of = |off: usize| text[..off].matches('\n').count() + 1;
    let strings = strings
        .into_iter()
        .filter(|(off, _)| !cut.iter().any(|&(s, e)| (s..e).contains(off)))
        .map(|(off, s)| (line_of(off), s))
        .collect();
    (code, strings, test_mods)
}

/// Where the item starting at `i` (after its `#[cfg(test)]`) ends, and, for
/// `mod x;`, the file it brings in (`x`, or its `#[path]`).
fn item_end(code: &str, text: &str, i: usize) -> (usize, Option<String>) {
    let b = code.as_bytes();
    let mut path_attr = None;
    let mut j = i;
    // Further attributes.
    loop {
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        if !code[j..].starts_with("#[") {
            break;
        }
        let close = j + code[j..].find(']').unwrap_or(b.len() - j);
        let attr = &text[j..=close.min(b.len() - 1)];
        if let Some(p) = attr.strip_prefix("#[path = \"") {
            path_attr = Some(p.trim_end_matches("\"]").to_string());
        }
        j = close + 1;
    }
    let head_start = j;
    let mut depth = 0i32;
    while j < b.len() {
        match b[j] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' => depth -= 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    let mut k = j + 1;
                    while k < b.len() && b[k] == b' ' {
                        k += 1;
                    }
                    return (
                        if b.get(k) == Some(&b';') {
                            k + 1
                        } else {
                            j + 1
                        },
                        None,
                    );
                }
            }
            b';' if depth == 0 => {
                let head = code[head_start..j].split_whitespace().collect::<Vec<_>>();
                let module = match head.as_slice() {
                    [.., "mod", name] => Some(path_attr.unwrap_or_else(|| name.to_string())),
                    _ => None,
                };
                return (j + 1, module);
            }
            _ => {}
        }
        j += 1;
    }
    (b.len(), None)
}

/// The module a file belongs to, as the graph counts them: a top-level
/// module, or for `run/` each of its files (`run` is `run/mod.rs`).
fn module_of(rel: &str) -> Option<String> {
    let parts: Vec<&str> = rel.trim_end_matches(".rs").split('/').collect();
    match parts.as_slice() {
        ["lib"] | ["main"] => None,
        ["run", "mod"] => Some("run".into()),
        ["run", sub, ..] => Some(format!("run::{sub}")),
        [top, ..] => Some(top.to_string()),
        [] => None,
    }
}

fn run_submodules() -> BTreeSet<String> {
    std::fs::read_dir(src_dir().join("run"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            // A submodule is a file or, split up, a directory (`transition/`).
            if e.path().is_dir() {
                return Some(n);
            }
            n.strip_suffix(".rs")
                .filter(|s| *s != "mod")
                .map(str::to_string)
        })
        .collect()
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The paths named at `i` (just after `crate::` or `super::`): a single
/// path or a `{..}` group of them, each as its segments.
fn paths_at(code: &str, mut i: usize) -> Vec<Vec<String>> {
    let b = code.as_bytes();
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    if b.get(i) == Some(&b'{') {
        let mut out = Vec::new();
        let (mut depth, mut start) = (0, i + 1);
        for j in i..b.len() {
            match b[j] {
                b'{' => depth += 1,
                b'}' | b',' if depth == 1 => {
                    out.extend(paths_at(&code[..j], start));
                    start = j + 1;
                    if b[j] == b'}' {
                        break;
                    }
                }
                b'}' => depth -= 1,
                _ => {}
            }
        }
        return out;
    }
    let s = i;
    while i < b.len() && is_ident(b[i]) {
        i += 1;
    }
    if s == i {
        return Vec::new();
    }
    let head = code[s..i].to_string();
    let rest = code[i..].trim_start();
    if let Some(after) = rest.strip_prefix("::") {
        let at = code.len() - after.len();
        let tails = paths_at(code, at);
        if tails.is_empty() {
            return vec![vec![head]];
        }
        return tails
            .into_iter()
            .map(|mut t| {
                t.insert(0, head.clone());
                t
            })
            .collect();
    }
    if head == "self" {
        return vec![Vec::new()];
    }
    vec![vec![head]]
}

/// Module → the modules it imports, each with the first place it does.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

fn import_graph(sources: &[Source]) -> Graph {
    let subs = run_submodules();
    let target = |segs: &[String]| -> Option<String> {
        let top = segs.first()?;
        if top == "run" {
            return Some(match segs.get(1) {
                Some(s) if subs.contains(s) => format!("run::{s}"),
                _ => "run".into(),
            });
        }
        Some(top.clone())
    };
    let mut g = Graph::new();
    for s in sources {
        let Some(me) = module_of(&s.rel) else {
            continue;
        };
        let edges = g.entry(me.clone()).or_default();
        let b = s.code.as_bytes();
        let line = |off: usize| s.code[..off].matches('\n').count() + 1;
        let mut add = |to: Option<String>, off: usize| {
            if let Some(to) = to.filter(|t| *t != me) {
                edges
                    .entry(to)
                    .or_insert_with(|| format!("src/{}:{}", s.rel, line(off)));
            }
        };
        for (kw, rel_to_run) in [("crate::", false), ("super::", true)] {
            let mut from = 0;
            while let Some(n) = s.code[from..].find(kw) {
                let at = from + n;
                from = at + kw.len();
                if at > 0 && (is_ident(b[at - 1]) || b[at - 1] == b':') {
                    continue;
                }
                for p in paths_at(&s.code, from) {
                    let to = if !rel_to_run {
                        target(&p)
                    } else if me == "run" {
                        // `super` of run/mod.rs is the crate.
                        target(&p)
                    } else if s.rel.matches('/').count() > 1 && !s.rel.ends_with("/mod.rs") {
                        // `super` of run/<sub>/<file>.rs is run::<sub> itself.
                        None
                    } else if me.starts_with("run::") {
                        let mut q = vec!["run".to_string()];
                        q.extend(p);
                        target(&q)
                    } else {
                        None // inside one top-level module
                    };
                    add(to, at);
                }
            }
        }
        if me == "run" {
            // run/mod.rs names its children directly: `attempt::X`, `use model::Y`.
            for sub in &subs {
                let pat = format!("{sub}::");
                let mut from = 0;
                while let Some(n) = s.code[from..].find(&pat) {
                    let at = from + n;
                    from = at + pat.len();
                    if at == 0 || !(is_ident(b[at - 1]) || b[at - 1] == b':') {
                        add(Some(format!("run::{sub}")), at);
                    }
                }
            }
        }
    }
    g
}

/// The strongly connected components with more than one module (Tarjan).
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flat_map(|e| e.keys()) {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let l = t.low[v].min(t.low[w]);
                t.low.insert(v, l);
            } else if t.on.contains(w) {
                let l = t.low[v].min(t.index[w]);
                t.low.insert(v, l);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out.sort();
    t.out
}

/// A cycle's imports, one line each, with the place each is made.
fn describe(g: &Graph, comp: &[String]) -> String {
    let mut s = format!("  {}\n", comp.join(", "));
    for a in comp {
        for (b, at) in &g[a] {
            if comp.contains(b) {
                s.push_str(&format!("    {a} -> {b}  ({at})\n"));
            }
        }
    }
    s
}

/// The run is the coordinator, `exec/` the executors (issue 33): both
/// build on `executor/` (the trait, its request and report, the attempt's
/// environment), which imports neither; neither imports the other.
#[test]
fn the_run_and_the_executors_import_each_other_no_more() {
    let g = import_graph(&sources());
    let run = |m: &str| m == "run" || m.starts_with("run::");
    let bad: Vec<String> = g
        .iter()
        .flat_map(|(from, to)| to.iter().map(move |(t, at)| (from, t, at)))
        .filter(|(from, to, _)| {
            (run(from) && *to == "exec")
                || (*from == "exec" && run(to))
                || (*from == "executor" && (run(to) || *to == "exec"))
        })
        .map(|(from, to, at)| format!("{from} -> {to}  ({at})"))
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn no_import_cycle_but_the_known_ones() {
    let g = import_graph(&sources());
    let found = cycles(&g);
    let known: Vec<Vec<String>> = KNOWN_CYCLES
        .iter()
        .map(|c| c.iter().map(|m| m.to_string()).collect())
        .collect();
    let all: String = found.iter().map(|c| describe(&g, c)).collect();
    for c in &found {
        assert!(
            known.contains(c),
            "an import cycle not in KNOWN_CYCLES (or a known one changed: \
             shrunk ones are tightened there, new ones are taken apart):\n{}\
             every cycle found:\n{all}",
            describe(&g, c)
        );
    }
    for k in &known {
        assert!(
            found.contains(k),
            "KNOWN_CYCLES lists {k:?}, which is gone: remove it there\n\
             every cycle found:\n{all}"
        );
    }
}

#[test]
fn the_report_and_the_run_import_each_other_no_more() {
    let g = import_graph(&sources());
    for c in cycles(&g) {
        let report = c.iter().any(|m| m == "report_html");
        let run = c.iter().any(|m| m == "run" || m.starts_with("run::"));
        assert!(!(report && run), "{}", describe(&g, &c));
    }
    let report_imports: Vec<&String> = g["report_html"].keys().collect();
    assert!(
        !report_imports
            .iter()
            .any(|m| *m == "run" || m.starts_with("run::")),
        "{report_imports:?}"
    );
}

/// `agent/` is a leaf (architecture.md, change 1): it gets plain inputs
/// (`agent::Settings`, flags, paths) and its own outcome vocabulary, and
/// knows nothing of the configuration, the state, the project, the backlog
/// or the run.
#[test]
fn the_agent_imports_no_config_state_project_backlog_or_run() {
    let g = import_graph(&sources());
    let forbidden = |m: &str| {
        ["config", "state", "project", "backlog", "run"].contains(&m) || m.starts_with("run::")
    };
    let bad: Vec<String> = g["agent"]
        .iter()
        .filter(|(m, _)| forbidden(m))
        .map(|(m, at)| format!("agent -> {m}  ({at})"))
        .collect();
    assert!(
        bad.is_empty(),
        "agent/ must stay a leaf:\n{}",
        bad.join("\n")
    );
}

/// The graph reader on a made-up crate: groups, `super`, `run/mod.rs`'s
/// own children, and nothing from comments, strings or test code.
#[test]
fn the_import_graph_reader_sees_what_the_compiler_sees() {
    let src = |rel: &str, text: &str| {
        let (code, strings, _) = lex(text);
        Source {
            rel: rel.into(),
            code,
            strings,
        }
    };
    let files = [
        src(
            "a.rs",
            "use crate::{b::X, c};\n// crate::d::Y\nconst S: &str = \"crate::e\";\n\
             fn f() { crate::run::land::go(); let c = '\"'; }\n\
             #[cfg(test)]\nmod tests { use crate::f; }\n",
        ),
        src(
            "run/mod.rs",
            "mod land;\nuse model::M;\nfn g() { super::h::x(); land::go('\\''); }\n",
        ),
        src("run/land.rs", "use super::{dispatcher::E, Opts};\n"),
    ];
    let g = import_graph(&files);
    let edges = |m: &str| g[m].keys().cloned().collect::<Vec<_>>();
    assert_eq!(edges("a"), ["b", "c", "run::land"]);
    assert_eq!(edges("run"), ["h", "run::land", "run::model"]);
    assert_eq!(edges("run::land"), ["run", "run::dispatcher"]);
    assert_eq!(cycles(&g), [["run", "run::land"]]);
    // What `lex` leaves of strings: their contents, where they are.
    assert_eq!(files[0].strings, [(3, "crate::e".to_string())]);
}

/// Files the `.ralph/` scan leaves alone, each with its reason.
const PATH_SCAN_SKIPS: &[(&str, &str)] = &[("paths.rs", "the one place paths are spelled")];

/// Prose that names paths for people to read, as the page it generates
/// says them: each `.ralph/` path in it must be one `paths.rs` has (or a
/// file under one of its directories), so a moved path fails here.
const PATH_PROSE: &[(&str, &str)] = &[
    (
        "config/keys.rs",
        "the configuration reference (docs/config.md is generated from it)",
    ),
    (
        "cli/help.rs",
        "the long help texts (static, as clap wants them)",
    ),
    (
        "cli/args.rs",
        "clap's doc comments, which are the short help",
    ),
    ("cli/init.rs", "the scaffolded stories.txt's comment lines"),
];

/// The `.ralph/...` paths `text` names, each as written (up to a closing
/// backtick, a space or the end).
fn named_paths(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(n) = text[from..].find(".ralph/") {
        let start = from + n;
        // `main...ralph/story-1` is a git range naming a branch, not a path.
        if text[..start].ends_with("..") {
            from = start + 1;
            continue;
        }
        let end = text[start..]
            .find(|c: char| c == '`' || c.is_whitespace() || c == ')' || c == ',')
            .map_or(text.len(), |e| start + e);
        out.push(&text[start..end]);
        from = end;
    }
    out
}

/// True when `named` is a path of `paths.rs`'s table or under one of its
/// directories (`.ralph/` itself aside: every file it holds is named).
fn known_path(named: &str) -> bool {
    crate::paths::ALL.iter().any(|(_, p)| {
        named.trim_end_matches('/') == *p
            || (*p != crate::paths::DIR
                && named.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
    })
}

#[test]
fn paths_in_prose_are_checked_against_the_table() {
    let text = "output goes to `.ralph/logs/<id>/validation-<n>.log`, not .ralph/nope.json \
                nor (.ralph/logsx); `git diff main...ralph/story-1` names a branch";
    let named = named_paths(text);
    assert_eq!(
        named,
        [
            ".ralph/logs/<id>/validation-<n>.log",
            ".ralph/nope.json",
            ".ralph/logsx"
        ]
    );
    let known: Vec<bool> = named.iter().map(|n| known_path(n)).collect();
    assert_eq!(known, [true, false, false]);
}

/// `.ralph/` is spelled in `paths.rs` only: everything else joins or prints
/// its constants (messages too), so a path cannot change in one place and
/// not in another.
#[test]
fn ralph_paths_are_spelled_in_paths_rs_only() {
    let mut found = Vec::new();
    for s in sources() {
        if PATH_SCAN_SKIPS
            .iter()
            .any(|(p, _)| s.rel == *p || (p.ends_with('/') && s.rel.starts_with(p)))
        {
            continue;
        }
        let prose = PATH_PROSE.iter().any(|(p, _)| s.rel == *p);
        for (line, text) in &s.strings {
            if prose {
                for named in named_paths(text) {
                    if !known_path(named) {
                        found.push(format!(
                            "src/{}:{line}: {named:?} is no path paths.rs knows",
                            s.rel
                        ));
                    }
                }
                continue;
            }
            if !named_paths(text).is_empty() || text.trim_matches('/') == ".ralph" {
                found.push(format!("src/{}:{line}: {text:?}", s.rel));
            }
        }
    }
    assert!(
        found.is_empty(),
        "`.ralph/` paths spelled outside paths.rs (use its constants and functions):\n{}",
        found.join("\n")
    );
}

/// The most lines a source file may have before its tests (issue 21): past
/// this a file holds more than one concern and is split by concern.
const MAX_LINES_BEFORE_TESTS: usize = 900;

/// Files over `MAX_LINES_BEFORE_TESTS` while another branch splits them,
/// TEMPORARY: the lead removes each entry when that split is merged. One
/// that is back under the limit fails the test too, so the list cannot
/// outlive its reason.
const TEMPORARILY_OVER_THE_LINE_LIMIT: &[&str] = &[];

/// Lines before the first `#[cfg(test)]` (all of them when there is none).
fn lines_before_tests(text: &str) -> usize {
    text.lines()
        .position(|l| l.trim_start().starts_with("#[cfg(test)]"))
        .unwrap_or_else(|| text.lines().count())
}

#[test]
fn lines_before_tests_stops_at_the_first_test_item() {
    assert_eq!(lines_before_tests("a\nb\n#[cfg(test)]\nmod tests {}\n"), 2);
    assert_eq!(
        lines_before_tests("a\n    #[cfg(test)]\n    fn t() {}\n"),
        1
    );
    assert_eq!(lines_before_tests("a\nb\nc\n"), 3);
    assert_eq!(lines_before_tests(""), 0);
}

#[test]
fn no_source_file_is_over_the_line_limit_before_its_tests() {
    let mut over = Vec::new();
    let mut listed_but_under = Vec::new();
    // `sources()` leaves out files that are wholly tests (brought in by a
    // `#[cfg(test)] mod x;`), such as run/transition/tests/.
    for s in sources() {
        let text = std::fs::read_to_string(src_dir().join(&s.rel)).unwrap();
        let n = lines_before_tests(&text);
        let listed = TEMPORARILY_OVER_THE_LINE_LIMIT.contains(&s.rel.as_str());
        if n > MAX_LINES_BEFORE_TESTS && !listed {
            over.push(format!("{} ({n} lines)", s.rel));
        }
        if n <= MAX_LINES_BEFORE_TESTS && listed {
            listed_but_under.push(s.rel.clone());
        }
    }
    assert!(
        over.is_empty(),
        "over {MAX_LINES_BEFORE_TESTS} lines before their tests: {over:?}; split each by concern"
    );
    assert!(
        listed_but_under.is_empty(),
        "back under {MAX_LINES_BEFORE_TESTS} lines: {listed_but_under:?}; remove them from \
         TEMPORARILY_OVER_THE_LINE_LIMIT"
    );
}
