//! What a bubblewrap sandbox shows an attempt, as a list of mounts, and
//! bwrap's command line built from that list. Pure.
//!
//! The layout (docs/security.md explains it to users):
//!
//! - a fresh root: only the system directories (read-only), `/dev`,
//!   `/proc` and a private `/tmp`; the main checkout, other worktrees and
//!   the rest of the machine are simply not there;
//! - `$HOME` an empty tmpfs, then the agent CLI's own state bound
//!   read-write over it (logins keep working) and git's user config
//!   read-only (commits need an identity);
//! - the directories of the agent's executable and of `PATH` read-only, so
//!   `~/.local/bin/claude` or an npm-global install runs;
//! - the repository's `.git` read-only, then read-write over it only what
//!   the attempt's own commits write: a private object directory bound
//!   over `objects/` (the repository's objects are seen read-only through
//!   git's alternates, at a second, read-only bind: an agent can delete
//!   only its own objects), its worktree's admin dir `worktrees/<slot>/`
//!   (HEAD, index, its reflog), and a private stand-in for the story
//!   branch's ref directory. The files that tell git where things are —
//!   the admin dir's `gitdir` and `commondir`, the worktree's `.git` — are
//!   bound read-only over themselves: ralph reads that slot afterwards,
//!   outside the sandbox (`gitops::slot`). A commit takes a lock *beside*
//!   the ref it moves (`refs/heads/ralph/story-1.1.lock`) and appends to its
//!   reflog (`logs/refs/heads/ralph/...`), so binding the ref file alone
//!   cannot work, and the real `refs/heads/ralph/` holds every story's
//!   branch: instead a per-slot directory holding only this story's ref
//!   (and one for its reflog) is bound over `refs/heads/ralph/` (and
//!   `logs/refs/heads/ralph/`); after the attempt ralph moves the real
//!   branch to what the agent committed (`gitops::sandbox`). The target
//!   branch, other branches, `config`, `hooks/`, `packed-refs` and
//!   `refs/ralph/` stay read-only;
//! - the worktree read-write, and the working directory.
//!
//! Mounts are laid shallowest first, so a deeper one is seen through a
//! shallower one (a worktree inside the repository, a state directory
//! inside the empty `$HOME`).

use std::path::{Component, Path, PathBuf};

/// The system, read-only.
pub(crate) const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];

/// One system directory as found: its link target if it is a symlink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SystemDir {
    pub(crate) path: PathBuf,
    pub(crate) link: Option<PathBuf>,
}

/// Everything the plan is made from, read off the machine by the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) system: Vec<SystemDir>,
    /// Files outside the system directories that it needs (read-only).
    pub(crate) system_extras: Vec<PathBuf>,
    pub(crate) home: PathBuf,
    /// The agent CLI's own state under `home` that exists (read-write).
    pub(crate) state: Vec<PathBuf>,
    /// git's user configuration that exists (read-only).
    pub(crate) home_ro: Vec<PathBuf>,
    /// Where programs live: the agent executable's tree and `PATH`'s
    /// directories (read-only; those that would uncover what must stay
    /// hidden are left out).
    pub(crate) tools: Vec<PathBuf>,
    pub(crate) allow_read: Vec<PathBuf>,
    pub(crate) allow_write: Vec<PathBuf>,
    /// The main checkout (never shown).
    pub(crate) project: PathBuf,
    /// The repository's git directory (read-only).
    pub(crate) git_dir: PathBuf,
    /// Inside it, what the attempt writes (read-write).
    pub(crate) git_rw: Vec<PathBuf>,
    /// Private directories bound over real ones: (source, destination).
    pub(crate) overlays: Vec<(PathBuf, PathBuf)>,
    /// Real directories shown read-only elsewhere: (source, destination).
    pub(crate) ro_overlays: Vec<(PathBuf, PathBuf)>,
    /// Files inside read-write mounts kept read-only (the where-files).
    pub(crate) git_ro: Vec<PathBuf>,
    /// The attempt's worktree (read-write, the working directory).
    pub(crate) work: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mount {
    Ro(PathBuf),
    Rw(PathBuf),
    /// Optional (the user's extra paths, the CLI's state, tool
    /// directories): skipped by bwrap when gone by the time it starts.
    RoTry(PathBuf),
    RwTry(PathBuf),
    /// `src` seen at `dst`, read-write.
    RwAt {
        src: PathBuf,
        dst: PathBuf,
    },
    /// `src` seen at `dst`, read-only.
    RoAt {
        src: PathBuf,
        dst: PathBuf,
    },
    Symlink {
        target: PathBuf,
        at: PathBuf,
    },
    Tmpfs(PathBuf),
    Dev(PathBuf),
    Proc(PathBuf),
}

impl Mount {
    fn dst(&self) -> &Path {
        match self {
            Mount::Ro(p)
            | Mount::Rw(p)
            | Mount::RoTry(p)
            | Mount::RwTry(p)
            | Mount::Tmpfs(p)
            | Mount::Dev(p)
            | Mount::Proc(p) => p,
            Mount::RwAt { dst, .. } | Mount::RoAt { dst, .. } => dst,
            Mount::Symlink { at, .. } => at,
        }
    }
}

fn depth(p: &Path) -> usize {
    p.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
}

/// `a` is `b` or one of its ancestors.
fn covers(a: &Path, b: &Path) -> bool {
    b.starts_with(a)
}

/// A tool directory shown read-only unless it would uncover the main
/// checkout, `$HOME` or the repository (an ancestor of theirs, or a
/// directory inside the checkout), is already shown (the system, the
/// worktree), or is not an absolute path.
fn tool_allowed(dir: &Path, l: &Layout) -> bool {
    if !dir.is_absolute() || depth(dir) == 0 {
        return false;
    }
    let hidden = [&l.home, &l.project, &l.git_dir, &l.work];
    if hidden.iter().any(|h| covers(dir, h)) {
        return false;
    }
    if covers(&l.project, dir) || covers(&l.git_dir, dir) {
        return false;
    }
    !SYSTEM_DIRS.iter().any(|s| dir.starts_with(s))
}

/// The mounts, shallowest first; for one destination the last wish wins
/// (an `allow_write` over a read-only tool directory, say).
pub(crate) fn plan(l: &Layout) -> Vec<Mount> {
    let mut m = Vec::new();
    for d in &l.system {
        match &d.link {
            Some(target) => m.push(Mount::Symlink {
                target: target.clone(),
                at: d.path.clone(),
            }),
            None => m.push(Mount::Ro(d.path.clone())),
        }
    }
    m.extend(l.system_extras.iter().cloned().map(Mount::RoTry));
    m.push(Mount::Dev("/dev".into()));
    m.push(Mount::Proc("/proc".into()));
    m.push(Mount::Tmpfs("/tmp".into()));
    if depth(&l.home) > 0 && !SYSTEM_DIRS.iter().any(|s| l.home.starts_with(s)) {
        m.push(Mount::Tmpfs(l.home.clone()));
    }
    m.extend(l.home_ro.iter().cloned().map(Mount::RoTry));
    m.extend(l.state.iter().cloned().map(Mount::RwTry));
    m.extend(
        l.tools
            .iter()
            .filter(|t| tool_allowed(t, l))
            .cloned()
            .map(Mount::RoTry),
    );
    m.extend(l.allow_read.iter().cloned().map(Mount::RoTry));
    m.extend(l.allow_write.iter().cloned().map(Mount::RwTry));
    m.push(Mount::Ro(l.git_dir.clone()));
    m.extend(l.git_rw.iter().cloned().map(Mount::Rw));
    m.extend(l.overlays.iter().map(|(src, dst)| Mount::RwAt {
        src: src.clone(),
        dst: dst.clone(),
    }));
    m.extend(l.ro_overlays.iter().map(|(src, dst)| Mount::RoAt {
        src: src.clone(),
        dst: dst.clone(),
    }));
    m.push(Mount::Rw(l.work.clone()));
    m.extend(l.git_ro.iter().cloned().map(Mount::Ro));

    // Last wish per destination, then shallowest first (stable).
    let mut kept: Vec<Mount> = Vec::new();
    for mount in m.into_iter().rev() {
        if !kept.iter().any(|k| k.dst() == mount.dst()) {
            kept.push(mount);
        }
    }
    kept.reverse();
    kept.sort_by_key(|k| depth(k.dst()));
    kept
}

/// bwrap's arguments up to and including `--`: every namespace unshared
/// but the network when `network`, the mounts, the working directory.
/// The child dies with ralph.
pub(crate) fn bwrap_args(plan: &[Mount], network: bool, chdir: &Path) -> Vec<String> {
    let s = |p: &Path| p.display().to_string();
    let mut a: Vec<String> = vec!["--unshare-all".into()];
    if network {
        a.push("--share-net".into());
    }
    a.push("--die-with-parent".into());
    for m in plan {
        match m {
            Mount::Ro(p) => a.extend(["--ro-bind".into(), s(p), s(p)]),
            Mount::Rw(p) => a.extend(["--bind".into(), s(p), s(p)]),
            Mount::RoTry(p) => a.extend(["--ro-bind-try".into(), s(p), s(p)]),
            Mount::RwTry(p) => a.extend(["--bind-try".into(), s(p), s(p)]),
            Mount::RwAt { src, dst } => a.extend(["--bind".into(), s(src), s(dst)]),
            Mount::RoAt { src, dst } => a.extend(["--ro-bind".into(), s(src), s(dst)]),
            Mount::Symlink { target, at } => a.extend(["--symlink".into(), s(target), s(at)]),
            Mount::Tmpfs(p) => a.extend(["--tmpfs".into(), s(p)]),
            Mount::Dev(p) => a.extend(["--dev".into(), s(p)]),
            Mount::Proc(p) => a.extend(["--proc".into(), s(p)]),
        }
    }
    a.extend(["--chdir".into(), s(chdir), "--".into()]);
    a
}

/// The directories an agent executable needs: the one it was `found` in
/// (`~/.local/bin`) and, where it `real`ly lives, its package: the
/// directory above the outermost `node_modules` for an npm install (the
/// CLI's JavaScript and its native helper packages are siblings there),
/// else the real file's directory.
pub(crate) fn exe_tree(found: &Path, real: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(d) = found.parent() {
        out.push(d.to_path_buf());
    }
    let package = real
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last()
        .and_then(Path::parent)
        .or_else(|| real.parent());
    if let Some(p) = package {
        if !out.iter().any(|o| o == p) {
            out.push(p.to_path_buf());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn layout() -> Layout {
        Layout {
            system: vec![
                SystemDir {
                    path: p("/usr"),
                    link: None,
                },
                SystemDir {
                    path: p("/bin"),
                    link: Some(p("usr/bin")),
                },
                SystemDir {
                    path: p("/etc"),
                    link: None,
                },
            ],
            system_extras: vec![p("/run/systemd/resolve/stub-resolv.conf")],
            home: p("/home/u"),
            state: vec![p("/home/u/.claude"), p("/home/u/.claude.json")],
            home_ro: vec![p("/home/u/.gitconfig")],
            tools: vec![
                p("/home/u/.local/bin"),
                p("/usr/local/bin"),
                p("/home/u"),
                p("/home"),
                p("/home/u/proj/node_modules/.bin"),
                p("/home/u/proj/.ralph/worktrees/slot-0/bin"),
                p("bin"),
                p("/"),
                p("/opt/node/lib"),
                p("/srv/tools/bin"),
            ],
            allow_read: vec![p("/srv/data")],
            allow_write: vec![p("/srv/tools/bin")],
            project: p("/home/u/proj"),
            git_dir: p("/home/u/proj/.git"),
            git_rw: vec![p("/home/u/proj/.git/worktrees/slot-0")],
            overlays: vec![
                (
                    p("/home/u/proj/.git/ralph-sandbox/slot-0/objects"),
                    p("/home/u/proj/.git/objects"),
                ),
                (
                    p("/home/u/proj/.git/ralph-sandbox/slot-0/refs"),
                    p("/home/u/proj/.git/refs/heads/ralph"),
                ),
            ],
            ro_overlays: vec![(
                p("/home/u/proj/.git/objects"),
                p("/home/u/proj/.git/ralph-sandbox/slot-0/base-objects"),
            )],
            git_ro: vec![
                p("/home/u/proj/.git/worktrees/slot-0/gitdir"),
                p("/home/u/proj/.git/worktrees/slot-0/commondir"),
                p("/home/u/proj/.ralph/worktrees/slot-0/.git"),
            ],
            work: p("/home/u/proj/.ralph/worktrees/slot-0"),
        }
    }

    #[test]
    fn the_plan_shows_only_what_the_attempt_needs() {
        let plan = plan(&layout());
        let want = vec![
            Mount::Ro(p("/usr")),
            Mount::Symlink {
                target: p("usr/bin"),
                at: p("/bin"),
            },
            Mount::Ro(p("/etc")),
            Mount::Dev(p("/dev")),
            Mount::Proc(p("/proc")),
            Mount::Tmpfs(p("/tmp")),
            Mount::Tmpfs(p("/home/u")),
            Mount::RoTry(p("/srv/data")),
            Mount::RoTry(p("/home/u/.gitconfig")),
            Mount::RwTry(p("/home/u/.claude")),
            Mount::RwTry(p("/home/u/.claude.json")),
            Mount::RwTry(p("/srv/tools/bin")),
            Mount::RoTry(p("/run/systemd/resolve/stub-resolv.conf")),
            Mount::RoTry(p("/home/u/.local/bin")),
            Mount::Ro(p("/home/u/proj/.git")),
            Mount::RwAt {
                src: p("/home/u/proj/.git/ralph-sandbox/slot-0/objects"),
                dst: p("/home/u/proj/.git/objects"),
            },
            Mount::Rw(p("/home/u/proj/.git/worktrees/slot-0")),
            Mount::Rw(p("/home/u/proj/.ralph/worktrees/slot-0")),
            Mount::RwAt {
                src: p("/home/u/proj/.git/ralph-sandbox/slot-0/refs"),
                dst: p("/home/u/proj/.git/refs/heads/ralph"),
            },
            Mount::RoAt {
                src: p("/home/u/proj/.git/objects"),
                dst: p("/home/u/proj/.git/ralph-sandbox/slot-0/base-objects"),
            },
            Mount::Ro(p("/home/u/proj/.git/worktrees/slot-0/gitdir")),
            Mount::Ro(p("/home/u/proj/.git/worktrees/slot-0/commondir")),
            Mount::Ro(p("/home/u/proj/.ralph/worktrees/slot-0/.git")),
        ];
        assert_eq!(plan, want);
    }

    #[test]
    fn tools_never_uncover_home_the_checkout_or_the_repository() {
        let l = layout();
        let shown: Vec<PathBuf> = plan(&l)
            .iter()
            .filter_map(|m| match m {
                Mount::Ro(p) | Mount::RoTry(p) => Some(p.clone()),
                _ => None,
            })
            .collect();
        for hidden in [
            "/home/u",
            "/home",
            "/",
            "bin",
            "/home/u/proj/node_modules/.bin",
        ] {
            assert!(!shown.contains(&p(hidden)), "{hidden} shown");
        }
        assert!(!shown.contains(&p("/home/u/proj")));
    }

    #[test]
    fn deeper_mounts_come_after_the_ones_they_sit_in() {
        let plan = plan(&layout());
        for (i, a) in plan.iter().enumerate() {
            for b in &plan[i + 1..] {
                assert!(
                    !(b.dst().starts_with(a.dst()) && depth(a.dst()) > depth(b.dst())),
                    "{b:?} after {a:?}"
                );
            }
            for b in &plan[..i] {
                assert!(
                    !(b.dst() != a.dst() && b.dst().starts_with(a.dst())),
                    "{b:?} laid before its parent {a:?}"
                );
            }
        }
    }

    #[test]
    fn home_inside_the_system_is_not_emptied() {
        let mut l = layout();
        l.home = p("/usr/home");
        assert!(!plan(&l).contains(&Mount::Tmpfs(p("/usr/home"))));
        l.home = p("/");
        assert!(!plan(&l).contains(&Mount::Tmpfs(p("/"))));
    }

    #[test]
    fn bwrap_command_line() {
        let plan = vec![
            Mount::Ro(p("/usr")),
            Mount::Symlink {
                target: p("usr/bin"),
                at: p("/bin"),
            },
            Mount::Tmpfs(p("/tmp")),
            Mount::Dev(p("/dev")),
            Mount::Proc(p("/proc")),
            Mount::Rw(p("/w")),
            Mount::RwAt {
                src: p("/a"),
                dst: p("/b"),
            },
            Mount::RoAt {
                src: p("/c"),
                dst: p("/d"),
            },
        ];
        assert_eq!(
            bwrap_args(&plan, true, Path::new("/w")).join(" "),
            "--unshare-all --share-net --die-with-parent --ro-bind /usr /usr --symlink usr/bin \
             /bin --tmpfs /tmp --dev /dev --proc /proc --bind /w /w --bind /a /b --ro-bind /c /d --chdir /w --"
        );
        assert!(!bwrap_args(&plan, false, Path::new("/w")).contains(&"--share-net".to_string()));
        let optional = [Mount::RoTry(p("/x")), Mount::RwTry(p("/y"))];
        assert_eq!(
            bwrap_args(&optional, true, Path::new("/w")).join(" "),
            "--unshare-all --share-net --die-with-parent --ro-bind-try /x /x --bind-try /y /y \
             --chdir /w --"
        );
    }

    #[test]
    fn executable_trees() {
        assert_eq!(
            exe_tree(
                Path::new("/home/u/.local/bin/claude"),
                Path::new("/home/u/.local/share/claude/versions/2.1.197")
            ),
            [
                p("/home/u/.local/bin"),
                p("/home/u/.local/share/claude/versions")
            ]
        );
        assert_eq!(
            exe_tree(
                Path::new("/usr/local/bin/codex"),
                Path::new("/usr/local/lib/node_modules/@openai/codex/bin/codex.js")
            ),
            [p("/usr/local/bin"), p("/usr/local/lib")]
        );
        assert_eq!(
            exe_tree(
                Path::new("/t/bin/claude"),
                Path::new("/t/clis/claude/node_modules/@a/c/node_modules/x/claude.exe")
            ),
            [p("/t/bin"), p("/t/clis/claude")]
        );
        assert_eq!(
            exe_tree(Path::new("/t/bin/a"), Path::new("/t/bin/a")),
            [p("/t/bin")]
        );
    }
}
