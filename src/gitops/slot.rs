//! A slot's git files as data (issue 31): a sealed agent writes its
//! worktree, its admin dir (`.git/worktrees/<slot>/`) and its stand-ins,
//! and ralph reads them afterwards outside the sandbox, with every secret.
//! So nothing read there is followed as a link, opened when it is a FIFO,
//! device or socket, or read past a size limit; and the files that say
//! where things are — the worktree's `.git`, the admin dir's `gitdir` and
//! `commondir` — are bound read-only in the sandbox, checked afterwards
//! and put back when they say anything else, before libgit2 reads them.
//! A slot is opened through its admin dir (never through the worktree's
//! `.git` file), and only once those files check out; git config the agent
//! could have written there (`config.worktree`) is removed, so identity
//! and signing come from the user's own config alone.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::*;

/// A ref, HEAD or where-file: a few bytes in any real repository.
pub(crate) const SMALL: u64 = 64 * 1024;

/// Any file in an admin dir (the index is the big one: it grows with the
/// repository, never to this): past it, libgit2 would read it into memory.
const ADMIN_FILE_MAX: u64 = 1 << 30;

/// Why a file was not read.
#[derive(Debug)]
pub(crate) enum NotData {
    Missing,
    /// What it is instead of a regular file.
    Special(&'static str),
    TooBig(u64),
    Io(std::io::Error),
}

impl std::fmt::Display for NotData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotData::Missing => f.write_str("missing"),
            NotData::Special(what) => write!(f, "not a regular file ({what})"),
            NotData::TooBig(n) => write!(f, "larger than {n} bytes"),
            NotData::Io(e) => write!(f, "unreadable ({e})"),
        }
    }
}

fn kind_of(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_symlink() {
        "a symlink"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else if t.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// The bytes of the regular file at `path`, at most `limit` of them. A
/// link is not followed and a FIFO not waited on: the file is opened with
/// `O_NOFOLLOW | O_NONBLOCK` and checked again once open.
pub(crate) fn read_data(path: &Path, limit: u64) -> std::result::Result<Vec<u8>, NotData> {
    use std::os::unix::fs::OpenOptionsExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(NotData::Missing),
        Err(e) => return Err(NotData::Io(e)),
    };
    if !meta.file_type().is_file() {
        return Err(NotData::Special(kind_of(meta.file_type())));
    }
    if meta.len() > limit {
        return Err(NotData::TooBig(limit));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(NotData::Io)?;
    let meta = file.metadata().map_err(NotData::Io)?;
    if !meta.file_type().is_file() {
        return Err(NotData::Special(kind_of(meta.file_type())));
    }
    let mut buf = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut buf)
        .map_err(NotData::Io)?;
    if buf.len() as u64 > limit {
        return Err(NotData::TooBig(limit));
    }
    Ok(buf)
}

/// `read_data` as text, `None` for anything else.
pub(crate) fn read_text(path: &Path) -> Option<String> {
    String::from_utf8(read_data(path, SMALL).ok()?).ok()
}

/// Everything under `dir` that is neither a regular file nor a directory
/// (links included: none is followed), or a file past `ADMIN_FILE_MAX`,
/// depth-first, at most `depth` deep.
fn specials(dir: &Path, depth: usize, out: &mut Vec<(PathBuf, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            if depth > 0 {
                specials(&e.path(), depth - 1, out);
            }
        } else if !t.is_file() {
            out.push((e.path(), format!("not a regular file ({})", kind_of(t))));
        } else if e.metadata().is_ok_and(|m| m.len() > ADMIN_FILE_MAX) {
            out.push((e.path(), "larger than 1 GiB".to_string()));
        }
    }
}

/// Git config files that have no business in an admin dir ralph made:
/// `config.worktree` is read by git (and libgit2) as the worktree's own
/// config when `extensions.worktreeConfig` is on.
const FOREIGN_CONFIG: [&str; 2] = ["config.worktree", "config"];

/// The where-files of a slot: (file, what it must say, does it say so).
type WhereFile = (PathBuf, String, Box<dyn Fn(&str) -> bool>);

impl Git {
    fn where_files(&self, admin: &Path, work: &Path) -> Vec<WhereFile> {
        let gitfile = work.join(".git");
        let (a, g, c) = (admin.to_path_buf(), gitfile.clone(), self.git_dir.clone());
        let (a2, a3) = (a.clone(), a.clone());
        let w = work.to_path_buf();
        // Relative paths (`worktree.useRelativePaths`) are relative to the
        // file's own directory, as git reads them.
        vec![
            (
                admin.join("gitdir"),
                format!("{}\n", gitfile.display()),
                Box::new(move |t: &str| {
                    let p = Path::new(t.trim_end_matches(['\n', '\r']));
                    !t.trim().is_empty() && same_path(&a3.join(p), &g)
                }),
            ),
            (
                admin.join("commondir"),
                "../..\n".to_string(),
                Box::new(move |t: &str| {
                    let p = Path::new(t.trim_end_matches(['\n', '\r']));
                    !t.trim().is_empty() && same_path(&a.join(p), &c)
                }),
            ),
            (
                gitfile,
                format!("gitdir: {}\n", admin.display()),
                Box::new(move |t: &str| {
                    t.strip_prefix("gitdir:").is_some_and(|d| {
                        let d = Path::new(d.trim());
                        !d.as_os_str().is_empty() && same_path(&w.join(d), &a2)
                    })
                }),
            ),
        ]
    }

    /// What is wrong with slot `name`'s git files (worktree at `work`):
    /// a where-file that says anything else than ralph wrote, anything in
    /// the admin dir that is not a regular file or directory, git config
    /// there. With `repair`, each is put right (removed, or written back)
    /// as it is found; the lines say what was found and done.
    pub(crate) fn slot_files(&self, name: &str, work: &Path, repair: bool) -> Result<Vec<String>> {
        let admin = self.admin_dir(name)?;
        let mut found = Vec::new();
        match std::fs::symlink_metadata(&admin) {
            Ok(m) if m.is_dir() => {}
            Ok(m) => {
                found.push(format!(
                    "{}: not a directory ({})",
                    admin.display(),
                    kind_of(m.file_type())
                ));
                if repair {
                    remove_path(&admin)?;
                }
                return Ok(found);
            }
            Err(_) => return Ok(found),
        }
        let done = if repair { "removed" } else { "left" };
        let mut odd = Vec::new();
        specials(&admin, 8, &mut odd);
        for (path, what) in odd {
            found.push(format!("{}: {what}; {done}", path.display()));
            if repair {
                remove_path(&path)?;
            }
        }
        for f in FOREIGN_CONFIG {
            let p = admin.join(f);
            if std::fs::symlink_metadata(&p).is_ok() {
                found.push(format!(
                    "{}: git config in a slot's admin dir; {done}",
                    p.display()
                ));
                if repair {
                    remove_path(&p)?;
                }
            }
        }
        let work_there = std::fs::symlink_metadata(work).is_ok_and(|m| m.is_dir());
        for (path, want, ok) in self.where_files(&admin, work) {
            if !work_there && path.starts_with(work) {
                continue;
            }
            let says = read_data(&path, SMALL);
            let fine = match &says {
                Ok(b) => std::str::from_utf8(b).is_ok_and(&ok),
                Err(_) => false,
            };
            if fine {
                continue;
            }
            let what = match says {
                Ok(_) => "says where else git should look".to_string(),
                Err(e) => e.to_string(),
            };
            let done = if repair { "written back" } else { "left" };
            found.push(format!("{}: {what}; {done}", path.display()));
            if repair {
                remove_path(&path)?;
                std::fs::write(&path, want)?;
            }
        }
        Ok(found)
    }

    /// Opens the linked worktree at `path` as ralph made it: through its
    /// admin dir (`<git dir>/worktrees/<name of path>`), never through the
    /// `.git` file in it, once its where-files say what ralph wrote and its
    /// admin dir holds nothing but regular files and no config (`slot_files`
    /// puts them right first: an agent running without bubblewrap could
    /// change them too, and its work must still be kept). Only for a slot
    /// nothing runs in. The main checkout opens as the repository itself.
    pub(super) fn open_slot(&self, path: &Path) -> Result<git2::Repository> {
        if same_path(path, &self.workdir) {
            return self.repo();
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| GitError::Other(format!("{}: not a worktree", path.display())))?;
        let admin = self.admin_dir(name)?;
        self.slot_files(name, path, true)?;
        let wrong = self.slot_files(name, path, false)?;
        if !wrong.is_empty() {
            return Err(GitError::Other(format!(
                "{}: ralph does not open this worktree: {}",
                path.display(),
                wrong.join("; ")
            )));
        }
        let repo = git2::Repository::open_ext(
            &admin,
            git2::RepositoryOpenFlags::NO_SEARCH,
            std::iter::empty::<&std::ffi::OsStr>(),
        )
        .map_err(|e| open_error(path, e))?;
        let at_home = repo.is_worktree()
            && same_path(repo.commondir(), &self.git_dir)
            && repo.workdir().is_some_and(|w| same_path(w, path));
        if !at_home {
            return Err(GitError::Other(format!(
                "{}: is not the worktree administered by {}",
                path.display(),
                admin.display()
            )));
        }
        Ok(repo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gitops::tests::git;

    fn slot() -> (tempfile::TempDir, Git, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        git(tmp.path(), &["init", "-q", "-b", "main"]);
        git(tmp.path(), &["commit", "-q", "--allow-empty", "-m", "init"]);
        let g = Git::open(tmp.path()).unwrap();
        let tip = g.branch_tip("main").unwrap().unwrap();
        g.ensure_branch("ralph/story-1", &tip).unwrap();
        let wt = g.workdir.join(".ralph/worktrees/slot-0");
        g.prepare_worktree("slot-0", &wt, "ralph/story-1", &tip)
            .unwrap();
        (tmp, g, wt)
    }

    #[test]
    fn fifos_links_and_oversized_files_are_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("ref"), "abc\n").unwrap();
        assert_eq!(read_data(&d.join("ref"), SMALL).unwrap(), b"abc\n");
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            read_data(&fifo, SMALL),
            Err(NotData::Special("a FIFO"))
        ));
        std::os::unix::fs::symlink(&fifo, d.join("link")).unwrap();
        assert!(matches!(
            read_data(&d.join("link"), SMALL),
            Err(NotData::Special("a symlink"))
        ));
        std::os::unix::fs::symlink("ref", d.join("link2")).unwrap();
        assert!(read_data(&d.join("link2"), SMALL).is_err());
        std::fs::write(d.join("big"), vec![b'x'; 100]).unwrap();
        assert!(matches!(
            read_data(&d.join("big"), 10),
            Err(NotData::TooBig(10))
        ));
        assert!(matches!(
            read_data(&d.join("none"), 10),
            Err(NotData::Missing)
        ));
    }

    #[test]
    fn a_slot_as_ralph_made_it_opens_through_its_admin_dir() {
        let (_t, g, wt) = slot();
        assert_eq!(
            g.slot_files("slot-0", &wt, false).unwrap(),
            Vec::<String>::new()
        );
        let repo = g.open_slot(&wt).unwrap();
        assert!(same_path(repo.workdir().unwrap(), &wt));
        assert!(same_path(repo.path(), &g.git_dir.join("worktrees/slot-0")));
    }

    #[test]
    fn a_worktree_config_naming_another_worktree_or_signer_is_not_read() {
        let (tmp, g, wt) = slot();
        git(&g.workdir, &["config", "core.repositoryformatversion", "1"]);
        git(&g.workdir, &["config", "extensions.worktreeConfig", "true"]);
        let host = tmp.path().join("host");
        std::fs::create_dir_all(&host).unwrap();
        let admin = g.git_dir.join("worktrees/slot-0");
        std::fs::write(
            admin.join("config.worktree"),
            format!(
                "[core]\n\tworktree = {}\n[commit]\n\tgpgsign = true\n[gpg]\n\tprogram = /bin/false\n",
                host.display()
            ),
        )
        .unwrap();
        // libgit2 itself would take its signing program.
        let raw = git2::Repository::open_ext(
            &admin,
            git2::RepositoryOpenFlags::NO_SEARCH,
            std::iter::empty::<&std::ffi::OsStr>(),
        )
        .unwrap();
        assert!(crate::gitops::sign::signing(&raw).unwrap().is_some());
        let repo = g.open_slot(&wt).unwrap();
        assert!(same_path(repo.workdir().unwrap(), &wt));
        assert!(crate::gitops::sign::signing(&repo).unwrap().is_none());
        assert!(!admin.join("config.worktree").exists());
    }

    #[test]
    fn where_files_the_agent_rewrote_are_refused_then_written_back() {
        let (tmp, g, wt) = slot();
        let admin = g.git_dir.join("worktrees/slot-0");
        let host = tmp.path().join("host");
        std::fs::create_dir_all(&host).unwrap();
        std::fs::write(admin.join("gitdir"), format!("{}/.git\n", host.display())).unwrap();
        std::fs::write(admin.join("commondir"), format!("{}\n", host.display())).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", host.display())).unwrap();
        std::fs::write(
            admin.join("config.worktree"),
            "[commit]\n\tgpgsign = true\n",
        )
        .unwrap();
        std::os::unix::fs::symlink("/dev/zero", admin.join("ORIG_HEAD")).unwrap();
        let found = g.slot_files("slot-0", &wt, true).unwrap();
        assert_eq!(found.len(), 5, "{found:?}");
        assert!(!admin.join("config.worktree").exists());
        assert!(std::fs::symlink_metadata(admin.join("ORIG_HEAD")).is_err());
        assert_eq!(
            g.slot_files("slot-0", &wt, false).unwrap(),
            Vec::<String>::new()
        );
        let repo = g.open_slot(&wt).unwrap();
        assert!(same_path(repo.workdir().unwrap(), &wt));
        // And git itself agrees.
        assert_eq!(
            git(&wt, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
            "ralph/story-1"
        );
    }
}
