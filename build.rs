//! Puts the commit and its date into `ralph --version`, so a bug report
//! names the exact build. Outside a git checkout (a crate tarball, a
//! vendored copy) the version is the package version alone.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // A new commit moves HEAD or the branch it points at: rebuild then, and
    // only then (watching the whole .git would rebuild on every `git status`).
    // `--git-path` resolves linked worktrees (HEAD is theirs, branches
    // are the common directory's).
    let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watch.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for name in watch {
        // A missing path would make cargo run this script on every build.
        if let Some(path) =
            git(&["rev-parse", "--git-path", &name]).filter(|p| std::path::Path::new(p).exists())
        {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let commit = git(&["rev-parse", "--short=10", "HEAD"]).unwrap_or_default();
    let date = git(&["log", "-1", "--format=%cs", "HEAD"]).unwrap_or_default();
    println!("cargo:rustc-env=RALPH_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=RALPH_GIT_DATE={date}");
}
