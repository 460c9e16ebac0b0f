//! Checks of the crate's shape, read from its own sources: which module
//! imports which (no import cycle but the known ones, listed below to be
//! taken apart), and where `.ralph/` paths are spelled (in `paths.rs`
//! only). Production code only: comments, string contents and
//! `#[cfg(test)]` items are left out before anything is looked at.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Import cycles between folders (top-level modules, `run/` and `exec/`
/// each as a whole) that exist today, each as the folders it ties
/// together: the lead empties this list as they are taken apart (issues
/// 21, 33). A cycle not listed here, or a listed one that grew, fails
/// `no_import_cycle_between_folders_but_the_known_ones`; one that shrank
/// or went away fails it too, so the list is tightened the day it can be.
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
        let Lexed {
            code,
            strings,
            test_mods,
            ..
        } = lex(&text);
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

/// What `lex` makes of a file.
struct Lexed {
    /// The text with comments and string/char contents blanked, then
    /// `#[cfg(test)]` items blanked (newlines kept).
    code: String,
    /// The string literals outside test items: (line, contents).
    strings: Vec<(usize, String)>,
    /// The names (or `#[path]`s) of `#[cfg(test)] mod x;` files.
    test_mods: Vec<String>,
    /// Each `#[cfg(test)]` item: its byte span, attribute to end.
    tests: Vec<(usize, usize)>,
}

/// `text` with comments blanked and string and char literal contents
/// blanked, then `#[cfg(test)]` items blanked; the string literals outside
/// those items; the names (or `#[path]`s) of `#[cfg(test)] mod x;` files.
fn lex(text: &str) -> Lexed {
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
    Lexed {
        code,
        strings,
        test_mods,
        tests: cut,
    }
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

/// The module a file is: `run/transition/landing.rs` is
/// `run::transition::landing`, `run/mod.rs` is `run`; `lib.rs` and
/// `main.rs` are the crate (`""`).
fn file_module(rel: &str) -> String {
    let p = rel.trim_end_matches(".rs");
    let p = p.strip_suffix("/mod").unwrap_or(p);
    if p == "lib" || p == "main" {
        return String::new();
    }
    p.replace('/', "::")
}

/// The folder (top-level module) a module is in: `run::land` is `run`.
fn folder_of(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
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

/// Which file imports which: each path a file names (`crate::a::b::X`,
/// `super::X`, `self::x::Y`, or a child module's `x::Y`) goes to the
/// deepest file module it is in (`crate::run::land::go` is `run::land`;
/// a path into an inline `mod` or to an item is its file's).
fn file_graph(sources: &[Source]) -> Graph {
    let modules: BTreeSet<String> = sources.iter().map(|s| file_module(&s.rel)).collect();
    let resolve = |segs: &[String]| -> Option<String> {
        (1..=segs.len())
            .rev()
            .map(|n| segs[..n].join("::"))
            .find(|m| modules.contains(m))
    };
    let mut g = Graph::new();
    for s in sources {
        let me = file_module(&s.rel);
        if me.is_empty() {
            continue;
        }
        let mine: Vec<String> = me.split("::").map(str::to_string).collect();
        let children: BTreeSet<&str> = modules
            .iter()
            .filter_map(|m| m.strip_prefix(&format!("{me}::")))
            .filter(|rest| !rest.contains("::"))
            .collect();
        let edges = g.entry(me.clone()).or_default();
        let b = s.code.as_bytes();
        let line = |off: usize| s.code[..off].matches('\n').count() + 1;
        let mut add = |to: Option<String>, off: usize| {
            if let Some(to) = to.filter(|t| *t != me && !t.is_empty()) {
                edges
                    .entry(to)
                    .or_insert_with(|| format!("src/{}:{}", s.rel, line(off)));
            }
        };
        // (what to look for, the module the path after it starts from,
        // whether the match is the path's first segment).
        let parent = mine[..mine.len() - 1].to_vec();
        let mut starts: Vec<(String, Vec<String>, bool)> = vec![
            ("crate::".into(), Vec::new(), false),
            ("super::".into(), parent, false),
            ("self::".into(), mine.clone(), false),
        ];
        starts.extend(
            children
                .iter()
                .map(|c| (format!("{c}::"), mine.clone(), true)),
        );
        for (kw, base, named) in &starts {
            let mut from = 0;
            while let Some(n) = s.code[from..].find(kw.as_str()) {
                let at = from + n;
                from = at + kw.len();
                if at > 0 && (is_ident(b[at - 1]) || b[at - 1] == b':') {
                    continue;
                }
                for p in paths_at(&s.code, if *named { at } else { from }) {
                    let mut full = base.clone();
                    let mut rest = p.as_slice();
                    while let Some(("super", tail)) =
                        rest.split_first().map(|(h, t)| (h.as_str(), t))
                    {
                        full.pop();
                        rest = tail;
                    }
                    full.extend(rest.iter().cloned());
                    add(resolve(&full), at);
                }
            }
        }
    }
    g
}

/// The file graph folded into folders (top-level modules, `run` and
/// `exec` each as a whole), each import with the first place it is made.
fn folder_graph(files: &Graph) -> Graph {
    let mut g = Graph::new();
    for (a, edges) in files {
        let fa = folder_of(a).to_string();
        let out = g.entry(fa.clone()).or_default();
        for (b, at) in edges {
            let fb = folder_of(b);
            if fb != fa {
                out.entry(fb.to_string()).or_insert_with(|| at.clone());
            }
        }
    }
    g
}

fn import_graph(sources: &[Source]) -> Graph {
    folder_graph(&file_graph(sources))
}

/// True when `a` is `b`'s parent, grandparent, ...: `a`'s `mod` holds `b`.
fn holds(a: &str, b: &str) -> bool {
    b.strip_prefix(a).is_some_and(|r| r.starts_with("::"))
}

/// The file graph less each module's imports of the modules it holds
/// (`mod x; pub use x::Y;`, a `mod.rs` calling its children): a child
/// may import its parent (`super::`) and the parent the child, and that
/// pair alone is no circle; any other way back is.
fn file_graph_without_parents_into_children(files: &Graph) -> Graph {
    files
        .iter()
        .map(|(a, edges)| {
            let kept = edges
                .iter()
                .filter(|(b, _)| !holds(a, b))
                .map(|(b, at)| (b.clone(), at.clone()))
                .collect();
            (a.clone(), kept)
        })
        .collect()
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
fn no_import_cycle_between_folders_but_the_known_ones() {
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
            "an import cycle between folders not in KNOWN_CYCLES (or a known one \
             changed: shrunk ones are tightened there, new ones are taken apart):\n{}\
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

/// Between files the only way back is a parent's to its child (`mod x;`
/// and the child's `super::`): any other circle, inside a folder or
/// across folders, is a shared thing to move down into a file of its own.
#[test]
fn no_import_circle_between_files_but_parent_and_child() {
    let files = file_graph(&sources());
    // Circles across folders are the folder test's (`KNOWN_CYCLES`): each
    // folder's files are looked at with their imports of each other only,
    // so a circle inside one is found even where others tie it to a
    // known cycle across folders.
    let g: Graph = file_graph_without_parents_into_children(&files)
        .into_iter()
        .map(|(a, edges)| {
            let inside = edges
                .into_iter()
                .filter(|(b, _)| folder_of(b) == folder_of(&a))
                .collect();
            (a, inside)
        })
        .collect();
    let found = cycles(&g);
    let all: String = found.iter().map(|c| describe(&g, c)).collect();
    assert!(
        found.is_empty(),
        "import circles between files (a parent importing its child is left \
         out; move what both sides need down into a file of its own):\n{all}"
    );
}

#[test]
fn the_report_and_the_run_import_each_other_no_more() {
    let g = import_graph(&sources());
    for c in cycles(&g) {
        let report = c.iter().any(|m| m == "report_html");
        let run = c.iter().any(|m| m == "run");
        assert!(!(report && run), "{}", describe(&g, &c));
    }
    let report_imports: Vec<&String> = g["report_html"].keys().collect();
    assert!(
        !report_imports.iter().any(|m| *m == "run"),
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
    let forbidden = |m: &str| ["config", "state", "project", "backlog", "run"].contains(&m);
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

/// The graph reader on a made-up crate: groups, `super`, `self`, a
/// parent's own children, and nothing from comments, strings or test code.
#[test]
fn the_import_graph_reader_sees_what_the_compiler_sees() {
    let src = |rel: &str, text: &str| {
        let Lexed { code, strings, .. } = lex(text);
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
        src("b.rs", ""),
        src("c/mod.rs", "use self::d::Y;\n"),
        src("c/d.rs", "use super::super::b::Z;\n"),
        src("h.rs", ""),
        src(
            "run/mod.rs",
            "mod land;\nuse model::M;\nfn g() { super::h::x(); land::go('\\''); }\n",
        ),
        src("run/model.rs", ""),
        src("run/land.rs", "use super::{dispatcher::E, Opts};\n"),
        src("run/dispatcher.rs", "use super::{land::go, model};\n"),
    ];
    let files_g = file_graph(&files);
    let edges = |g: &Graph, m: &str| g[m].keys().cloned().collect::<Vec<_>>();
    assert_eq!(edges(&files_g, "a"), ["b", "c", "run::land"]);
    assert_eq!(edges(&files_g, "c"), ["c::d"]);
    assert_eq!(edges(&files_g, "c::d"), ["b"]);
    assert_eq!(edges(&files_g, "run"), ["h", "run::land", "run::model"]);
    assert_eq!(edges(&files_g, "run::land"), ["run", "run::dispatcher"]);
    assert_eq!(
        edges(&files_g, "run::dispatcher"),
        ["run::land", "run::model"]
    );
    // run ↔ run::land is a parent and its child; land ↔ dispatcher
    // is a circle.
    let without = file_graph_without_parents_into_children(&files_g);
    assert_eq!(cycles(&without), [["run::dispatcher", "run::land"]]);
    assert_eq!(
        edges(&import_graph(&files), "a"),
        ["b", "c", "run"],
        "folders"
    );
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

/// The most lines a source file may have outside its tests (issue 21):
/// past this a file holds more than one concern and is split by concern.
const MAX_LINES_OUTSIDE_TESTS: usize = 900;

/// Files over `MAX_LINES_OUTSIDE_TESTS` while another branch splits them,
/// TEMPORARY: the lead removes each entry when that split is merged. One
/// that is back under the limit fails the test too, so the list cannot
/// outlive its reason.
const TEMPORARILY_OVER_THE_LINE_LIMIT: &[&str] = &[];

/// Where each line of `text` starts, for turning offsets into lines.
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// The line (from 1) of byte `off`.
fn line_at(starts: &[usize], off: usize) -> usize {
    starts.partition_point(|&s| s <= off)
}

/// Lines outside every `#[cfg(test)]` item, wherever the items are (a
/// one-line test helper at the top leaves the rest counted): a line
/// counts when it has anything outside them, or is blank outside them.
fn lines_outside_tests(text: &str) -> usize {
    let tests = lex(text).tests;
    let inside = |o: usize| tests.iter().any(|&(s, e)| (s..e).contains(&o));
    let mut n = 0;
    let mut off = 0;
    for l in text.split_inclusive('\n') {
        let outside = if l.trim().is_empty() {
            !inside(off + l.len() - 1)
        } else {
            l.char_indices()
                .any(|(i, c)| !c.is_whitespace() && !inside(off + i))
        };
        n += usize::from(outside);
        off += l.len();
    }
    n
}

#[test]
fn lines_outside_tests_skips_every_test_item_and_only_those() {
    assert_eq!(lines_outside_tests("a\nb\n#[cfg(test)]\nmod tests {}\n"), 2);
    assert_eq!(
        lines_outside_tests("a\n    #[cfg(test)]\n    fn t() {}\n"),
        1
    );
    // A test helper first, then the file goes on: the rest counts.
    assert_eq!(
        lines_outside_tests(
            "a\n#[cfg(test)]\nfn h() {}\nb\n\nc\n#[cfg(test)]\nmod tests {\n\n    // x\n    fn t() {}\n}\nd\n"
        ),
        5
    );
    // `#[cfg(test)]` in a comment or a string is no test item.
    assert_eq!(
        lines_outside_tests("// #[cfg(test)]\nconst S: &str = \"#[cfg(test)]\";\nfn f() {}\n"),
        3
    );
    assert_eq!(lines_outside_tests("a\nb\nc\n"), 3);
    assert_eq!(lines_outside_tests(""), 0);
}

#[test]
fn no_source_file_is_over_the_line_limit_outside_its_tests() {
    let mut over = Vec::new();
    let sources = sources();
    // Listed but gone (split into a folder, renamed) counts as under.
    let mut listed_but_under: Vec<String> = TEMPORARILY_OVER_THE_LINE_LIMIT
        .iter()
        .filter(|f| !sources.iter().any(|s| s.rel == **f))
        .map(|f| f.to_string())
        .collect();
    // `sources()` leaves out files that are wholly tests (brought in by a
    // `#[cfg(test)] mod x;`), such as run/transition/tests/.
    for s in sources {
        let text = std::fs::read_to_string(src_dir().join(&s.rel)).unwrap();
        let n = lines_outside_tests(&text);
        let listed = TEMPORARILY_OVER_THE_LINE_LIMIT.contains(&s.rel.as_str());
        if n > MAX_LINES_OUTSIDE_TESTS && !listed {
            over.push(format!("{} ({n} lines)", s.rel));
        }
        if n <= MAX_LINES_OUTSIDE_TESTS && listed {
            listed_but_under.push(s.rel.clone());
        }
    }
    assert!(
        over.is_empty(),
        "over {MAX_LINES_OUTSIDE_TESTS} lines outside their tests: {over:?}; split each by concern"
    );
    assert!(
        listed_but_under.is_empty(),
        "back under {MAX_LINES_OUTSIDE_TESTS} lines: {listed_but_under:?}; remove them from \
         TEMPORARILY_OVER_THE_LINE_LIMIT"
    );
}

/// The most lines a function outside tests may have, from the line of
/// its `fn` to its closing brace (issue 33): past this it does more than
/// one thing, and is split into one function per thing (an arm, a phase).
const MAX_FUNCTION_LINES: usize = 150;

/// Functions over `MAX_FUNCTION_LINES` today, each as (file, name, its
/// lines): the lead empties this list as they are split. One that grew
/// past its listed length, or one not listed, fails
/// `no_function_is_over_the_line_limit`; one that is gone or back under
/// the limit fails it too, so the list is tightened the day it can be.
const LONG_FUNCTIONS: &[(&str, &str, usize)] = &[];

/// Each function with a body in `code` (comments, strings and tests
/// already blanked): (name, line of its `fn`, lines to its closing brace).
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let b = code.as_bytes();
    let starts = line_starts(code);
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(n) = code[from..].find("fn") {
        let at = from + n;
        from = at + 2;
        if (at > 0 && is_ident(b[at - 1])) || !b.get(at + 2).is_some_and(u8::is_ascii_whitespace) {
            continue; // `Fn`, `fn(u8)`, `after_fn`
        }
        let mut j = at + 2;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        let name_start = j;
        while j < b.len() && is_ident(b[j]) {
            j += 1;
        }
        if name_start == j {
            continue;
        }
        let name = code[name_start..j].to_string();
        // The body's `{`, unless a `;` ends the signature (a trait's).
        let mut depth = 0i32;
        let mut open = None;
        while j < b.len() {
            match b[j] {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => {
                    open = Some(j);
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        let Some(open) = open else {
            continue;
        };
        let mut depth = 0i32;
        let mut close = open;
        for (k, &c) in b.iter().enumerate().skip(open) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = k;
                        break;
                    }
                }
                _ => {}
            }
        }
        let first = line_at(&starts, at);
        out.push((name, first, line_at(&starts, close) - first + 1));
    }
    out
}

#[test]
fn functions_are_measured_from_fn_to_closing_brace() {
    let code = "trait T {\n    fn sig(&self);\n}\npub(crate) fn a<F: Fn(u8) -> u8>(\n    f: F,\n) -> u8\nwhere\n    F: Copy,\n{\n    let g = |x: fn(u8)| { x };\n    f(1)\n}\nimpl X {\n    fn b(&self) -> [u8; 2] { [0; 2] }\n}\n";
    assert_eq!(
        functions(code),
        [("a".to_string(), 4, 9), ("b".to_string(), 14, 1)]
    );
}

#[test]
fn no_function_is_over_the_line_limit() {
    let mut long = Vec::new();
    for s in sources() {
        for (name, line, n) in functions(&s.code) {
            if n > MAX_FUNCTION_LINES {
                long.push((s.rel.clone(), name, line, n));
            }
        }
    }
    let mut unlisted = Vec::new();
    for (rel, name, line, n) in &long {
        let listed = LONG_FUNCTIONS
            .iter()
            .any(|(f, m, max)| f == rel && m == name && n <= max);
        if !listed {
            unlisted.push(format!("(\"{rel}\", \"{name}\", {n}), // src/{rel}:{line}"));
        }
    }
    let gone: Vec<String> = LONG_FUNCTIONS
        .iter()
        .filter(|(f, m, _)| !long.iter().any(|(rel, name, ..)| rel == f && name == m))
        .map(|(f, m, n)| format!("(\"{f}\", \"{m}\", {n})"))
        .collect();
    assert!(
        unlisted.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines, or longer than LONG_FUNCTIONS lists \
         (split each into one function per thing it does):\n{}",
        unlisted.join("\n")
    );
    assert!(
        gone.is_empty(),
        "split below {MAX_FUNCTION_LINES} lines or gone: remove from LONG_FUNCTIONS:\n{}",
        gone.join("\n")
    );
}
