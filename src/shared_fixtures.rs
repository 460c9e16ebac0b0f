//! Test fixtures read from `../shared` (the project workspace, never copied
//! into this repository): the bash tool's projects, the real CLIs' recorded
//! output. Where one is missing, the test that needs it is skipped with a
//! word on stderr — except under `CI=true`, where it fails: a check that
//! silently checks nothing is a defect, as the real-CLI tests already hold.
//! The one helper for every such test: unit tests use `crate::shared_fixtures`,
//! the integration tests the same file (`#[path]` in `tests/it/main.rs`).

use std::path::{Path, PathBuf};

/// `CI=true`, as CI services set it.
pub(crate) fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// `../shared/<rel>` when it exists; else `None` after a note on stderr,
/// or a panic under `CI=true`.
pub(crate) fn shared(rel: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared")
        .join(rel);
    present(path, under_ci())
}

fn present(path: PathBuf, ci: bool) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    assert!(
        !ci,
        "{} is missing, and CI=true needs it: these tests read ../shared (the project workspace)",
        path.display()
    );
    eprintln!(
        "skipped: {} is missing (CI=true makes this a failure)",
        path.display()
    );
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_fixtures_skip_locally() {
        let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        assert_eq!(present(here.clone(), true), Some(here.clone()));
        assert_eq!(present(here.join("no-such-fixture"), false), None);
    }

    #[test]
    #[should_panic(expected = "CI=true needs it")]
    fn missing_fixtures_fail_under_ci() {
        present(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("no-such-fixture"),
            true,
        );
    }
}
