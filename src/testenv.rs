//! What every test shares about its surroundings: the project's own
//! fixtures (`tests/fixtures/`, recorded or written by the project, so a
//! plain clone has them) and the list of skipped tests. A test that cannot
//! run here (no bubblewrap, no Chromium, no npm) calls `skip`: the reason
//! goes to stderr, which cargo hides for a passing test, and to the file
//! `RALPH_TEST_SKIPS` names, which `.ci/run` prints at its end. The unit
//! tests use it as `crate::testenv`, the integration tests by `#[path]`.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};

/// `CI=true`, as CI services set it.
pub(crate) fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// `tests/fixtures/<rel>` of this checkout.
pub(crate) fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// The text of `tests/fixtures/<rel>`.
pub(crate) fn fixture_text(rel: &str) -> String {
    let path = fixture(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Notes that the running test is skipped because of `why`.
pub(crate) fn skip(why: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    eprintln!("skipped: {test}: {why}");
    if let Some(file) = std::env::var_os("RALPH_TEST_SKIPS") {
        record(Path::new(&file), &line(&test, why));
    }
}

fn line(test: &str, why: &str) -> String {
    // One line per skip, whatever the reason's text holds.
    format!(
        "{test}: {}\n",
        why.split_whitespace().collect::<Vec<_>>().join(" ")
    )
}

fn record(file: &Path, line: &str) {
    // One append of one short line: tests in parallel threads and
    // processes do not interleave within it.
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .and_then(|mut f| f.write_all(line.as_bytes()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixtures_are_in_the_checkout() {
        assert!(fixture("agents/claude").is_dir());
        assert!(fixture("ralph-v2/parallel/.ralph/stories.txt").is_file());
    }

    #[test]
    fn a_skip_is_one_line_in_the_list() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("skips.txt");
        record(&file, &line("a::b", "no gpg\nhere"));
        record(&file, &line("c", "no  chromium"));
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "a::b: no gpg here\nc: no chromium\n"
        );
    }
}
