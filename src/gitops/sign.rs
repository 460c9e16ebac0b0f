//! Commits signed as git signs them when `commit.gpgsign` is on: the
//! repository's `gpg.format` (openpgp, x509, ssh), `user.signingkey` and
//! signing program (`gpg.program`, `gpg.x509.program`, `gpg.ssh.program`),
//! with the arguments git gives that program, so that `git verify-commit`
//! and `git log --show-signature` accept what ralph writes. The program
//! runs through `process` (the only module that starts processes).
//!
//! A signature that cannot be made is `GitError::Sign`: the user's signing
//! setup, never the story, is at fault.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{GitError, Result};

/// How long a signing program may take: long enough for a hardware key,
/// short enough that a passphrase prompt no one answers does not hold the
/// merge queue forever.
const SIGN_TIMEOUT: Duration = Duration::from_secs(120);

/// The payload the start-of-run check signs.
const PROBE: &[u8] = b"ralph: can this repository's commits be signed?\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    OpenPgp,
    X509,
    Ssh,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::OpenPgp => "openpgp",
            Format::X509 => "x509",
            Format::Ssh => "ssh",
        }
    }

    /// The config key of this format's program, as git reads it.
    fn program_key(self) -> &'static str {
        match self {
            Format::OpenPgp => "gpg.program",
            Format::X509 => "gpg.x509.program",
            Format::Ssh => "gpg.ssh.program",
        }
    }
}

/// How this repository's commits are signed (`commit.gpgsign` is on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Signing {
    pub(crate) format: Format,
    pub(crate) program: String,
    /// `user.signingkey`; for openpgp and x509 without one, the committer
    /// (`Name <email>`), as git does.
    pub(crate) key: Option<String>,
}

/// A signature that could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SignError {
    /// What went wrong, with the program's own words.
    pub(crate) message: String,
}

impl SignError {
    /// What to do about it: the config keys involved.
    pub(crate) fn hint() -> &'static str {
        "commit.gpgsign is on, so ralph signs its commits as git does; fix the signing setup \
         (user.signingkey, gpg.format, gpg.program / gpg.ssh.program / gpg.x509.program; \
         `git commit --allow-empty -S -m test` shows the same error), or turn commit.gpgsign off \
         for this repository"
    }
}

impl std::fmt::Display for SignError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The signing setup of `repo`, `None` when `commit.gpgsign` is off. A
/// value git would refuse (an unknown `gpg.format`) is an error.
pub(crate) fn signing(repo: &git2::Repository) -> Result<Option<Signing>> {
    let cfg = repo.config()?.snapshot()?;
    if !cfg.get_bool("commit.gpgsign").unwrap_or(false) {
        return Ok(None);
    }
    let get = |key: &str| cfg.get_string(key).ok().filter(|v| !v.trim().is_empty());
    let format = match get("gpg.format").as_deref() {
        None | Some("openpgp") => Format::OpenPgp,
        Some("x509") => Format::X509,
        Some("ssh") => Format::Ssh,
        Some(other) => {
            return Err(GitError::Sign(SignError {
                message: format!(
                    "gpg.format is \"{other}\", which git does not know (openpgp, x509 or ssh)"
                ),
            }))
        }
    };
    let program = match format {
        Format::OpenPgp => get("gpg.openpgp.program").or_else(|| get("gpg.program")),
        other => get(other.program_key()),
    }
    .map(|p| expand_home(&p))
    .unwrap_or_else(|| {
        match format {
            Format::OpenPgp => "gpg",
            Format::X509 => "gpgsm",
            Format::Ssh => "ssh-keygen",
        }
        .to_string()
    });
    Ok(Some(Signing {
        format,
        program,
        key: get("user.signingkey"),
    }))
}

/// Signs `payload` (a commit object without its signature) as git would;
/// `committer` is the default openpgp/x509 key.
pub(crate) fn sign(
    signing: &Signing,
    payload: &[u8],
    committer: &str,
) -> std::result::Result<String, SignError> {
    let fail = |why: String| SignError {
        message: format!(
            "signing with {} (gpg.format {}) failed: {why}",
            signing.program,
            signing.format.name()
        ),
    };
    match signing.format {
        Format::OpenPgp | Format::X509 => {
            let key = signing.key.clone().unwrap_or_else(|| committer.to_string());
            let args = ["--status-fd=2".to_string(), "-bsau".into(), key];
            let ran = crate::process::run_captured(&signing.program, &args, payload, SIGN_TIMEOUT)
                .map_err(|e| fail(format!("cannot run it: {e}")))?;
            // git trusts the status line, not the exit code alone.
            let created = ran
                .stderr
                .lines()
                .any(|l| l.starts_with("[GNUPG:] SIG_CREATED "));
            if ran.timed_out {
                return Err(fail(timed_out()));
            }
            if !ran.success() || !created {
                return Err(fail(program_said(&ran.stderr)));
            }
            let sig = String::from_utf8_lossy(&ran.stdout).replace("\r\n", "\n");
            Ok(sig)
        }
        Format::Ssh => sign_ssh(signing, payload).map_err(fail),
    }
}

/// `ssh-keygen -Y sign -n git -f <key> [-U] <file>`: the key is a file, or
/// a literal public key (`key::…` or `ssh-…`) whose private half is in the
/// ssh-agent; the signature is written next to the payload's file.
fn sign_ssh(signing: &Signing, payload: &[u8]) -> std::result::Result<String, String> {
    let Some(key) = &signing.key else {
        return Err("user.signingkey must name the ssh key to sign with".into());
    };
    let literal = key
        .strip_prefix("key::")
        .or_else(|| key.starts_with("ssh-").then_some(key.as_str()));
    let mut temps = Temps(Vec::new());
    let key_file = match literal {
        Some(public) => temps.write(public.as_bytes())?,
        None => PathBuf::from(expand_home(key)),
    };
    let buffer = temps.write(payload)?;
    let sig_file = PathBuf::from(format!("{}.sig", buffer.display()));
    temps.0.push(sig_file.clone());
    let mut args = vec![
        "-Y".to_string(),
        "sign".into(),
        "-n".into(),
        "git".into(),
        "-f".into(),
        key_file.display().to_string(),
    ];
    if literal.is_some() {
        args.push("-U".into());
    }
    args.push(buffer.display().to_string());
    let ran = crate::process::run_captured(&signing.program, &args, b"", SIGN_TIMEOUT)
        .map_err(|e| format!("cannot run it: {e}"))?;
    if ran.timed_out {
        return Err(timed_out());
    }
    if !ran.success() {
        return Err(program_said(&ran.stderr));
    }
    let sig = std::fs::read_to_string(&sig_file)
        .map_err(|e| format!("it wrote no signature ({}: {e})", sig_file.display()))?;
    Ok(sig.replace("\r\n", "\n"))
}

fn timed_out() -> String {
    format!(
        "it did not finish in {}s (waiting for a passphrase? unlock the key in its agent first)",
        SIGN_TIMEOUT.as_secs()
    )
}

fn program_said(stderr: &str) -> String {
    let text: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("[GNUPG:]"))
        .collect();
    if text.is_empty() {
        "it gave no reason".to_string()
    } else {
        let all = text.join("; ");
        all.chars().take(400).collect()
    }
}

/// `~/` at the start means the home directory, as in git's path values.
fn expand_home(path: &str) -> String {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest).display().to_string(),
        _ => path.to_string(),
    }
}

/// Temporary files of one signing, removed when it ends.
struct Temps(Vec<PathBuf>);

impl Temps {
    fn write(&mut self, data: &[u8]) -> std::result::Result<PathBuf, String> {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            ".ralph-signing-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let written = options
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, data));
        if let Err(e) = written {
            return Err(format!(
                "cannot write the temporary file {}: {e}",
                path.display()
            ));
        }
        self.0.push(path.clone());
        Ok(path)
    }
}

impl Drop for Temps {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Writes a commit as `repo.commit(update_ref, …)` would, signed when the
/// repository signs its commits. `update_ref` ("HEAD" or a full ref name)
/// moves only from the first parent, as git2 checks too.
pub(super) fn commit(
    repo: &git2::Repository,
    update_ref: Option<&str>,
    sig: &git2::Signature<'_>,
    message: &str,
    tree: &git2::Tree<'_>,
    parents: &[&git2::Commit<'_>],
) -> Result<git2::Oid> {
    commit_as(repo, repo, update_ref, sig, message, tree, parents)
}

/// `commit` in `repo` (a slot), signed as `settings` (the main repository)
/// says: no signing program named by a slot's own config ever runs.
pub(super) fn commit_as(
    repo: &git2::Repository,
    settings: &git2::Repository,
    update_ref: Option<&str>,
    sig: &git2::Signature<'_>,
    message: &str,
    tree: &git2::Tree<'_>,
    parents: &[&git2::Commit<'_>],
) -> Result<git2::Oid> {
    let Some(signing) = signing(settings)? else {
        return Ok(repo.commit(update_ref, sig, sig, message, tree, parents)?);
    };
    let buffer = repo.commit_create_buffer(sig, sig, message, tree, parents)?;
    let committer = format!(
        "{} <{}>",
        sig.name().unwrap_or_default(),
        sig.email().unwrap_or_default()
    );
    let signature = sign(&signing, &buffer, &committer).map_err(GitError::Sign)?;
    let content = std::str::from_utf8(&buffer)
        .map_err(|_| GitError::Other("the commit message is not UTF-8".into()))?;
    let oid = repo.commit_signed(content, &signature, Some("gpgsig"))?;
    if let Some(name) = update_ref {
        let name = if name == "HEAD" {
            match repo.find_reference("HEAD")?.symbolic_target()? {
                Some(t) => t.to_string(),
                None => "HEAD".to_string(),
            }
        } else {
            name.to_string()
        };
        let subject = message.lines().next().unwrap_or("");
        let log = format!("commit: {subject}");
        match parents.first() {
            Some(p) => repo.reference_matching(&name, oid, true, p.id(), &log)?,
            None => repo.reference(&name, oid, false, &log)?,
        };
    }
    Ok(oid)
}

/// Signs a small payload once, so that a setup that cannot sign is found
/// before any agent runs (an agent's own `git commit` would fail on it).
pub(crate) fn check(repo: &git2::Repository) -> Result<Option<Signing>> {
    let Some(signing) = signing(repo)? else {
        return Ok(None);
    };
    let sig = super::signature(repo)?;
    let committer = format!(
        "{} <{}>",
        sig.name().unwrap_or_default(),
        sig.email().unwrap_or_default()
    );
    sign(&signing, PROBE, &committer).map_err(GitError::Sign)?;
    Ok(Some(signing))
}

#[cfg(test)]
mod tests {
    use super::super::tests::git;
    use super::super::{Git, MergeOutcome};
    use super::*;
    use std::path::Path;

    /// A repository with a story branch one commit ahead of `main`.
    fn repo() -> (tempfile::TempDir, Git) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("repo");
        std::fs::create_dir_all(&dir).unwrap();
        git(&dir, &["init", "-q", "-b", "main"]);
        git(&dir, &["config", "user.name", "Test"]);
        git(&dir, &["config", "user.email", "test@example.com"]);
        // Whatever the user's global config says: these tests choose.
        git(&dir, &["config", "commit.gpgsign", "false"]);
        std::fs::write(dir.join("a.txt"), "a\n").unwrap();
        git(&dir, &["add", "-A"]);
        git(&dir, &["commit", "-q", "-m", "init"]);
        git(&dir, &["switch", "-q", "-c", "ralph/1.1"]);
        std::fs::write(dir.join("b.txt"), "b\n").unwrap();
        git(&dir, &["add", "-A"]);
        git(&dir, &["commit", "-q", "-m", "story"]);
        git(&dir, &["switch", "-q", "main"]);
        let g = Git::open(&dir).unwrap();
        (tmp, g)
    }

    /// ssh signing with a throwaway key; verification through an allowed
    /// signers file, as a user of ssh signing sets it up.
    fn sign_with_ssh(tmp: &Path, dir: &Path) -> PathBuf {
        let key = tmp.join("signing_key");
        let made = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "test", "-f"])
            .arg(&key)
            .output()
            .unwrap();
        assert!(made.status.success(), "{made:?}");
        let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
        let allowed = tmp.join("allowed_signers");
        std::fs::write(&allowed, format!("test@example.com {public}")).unwrap();
        git(dir, &["config", "commit.gpgsign", "true"]);
        git(dir, &["config", "gpg.format", "ssh"]);
        git(
            dir,
            &["config", "user.signingkey", &key.display().to_string()],
        );
        git(
            dir,
            &[
                "config",
                "gpg.ssh.allowedSignersFile",
                &allowed.display().to_string(),
            ],
        );
        key
    }

    fn merge(g: &Git) -> Result<MergeOutcome> {
        g.merge_story("main", "ralph/1.1", "merge: story 1.1", &[], &|_, _| None)
    }

    #[test]
    fn a_merge_is_signed_with_the_repositorys_ssh_key_and_git_verifies_it() {
        let (tmp, g) = repo();
        let dir = g.workdir.clone();
        sign_with_ssh(tmp.path(), &dir);
        assert!(g.check_signing().unwrap());
        let Ok(MergeOutcome::Merged { commit, .. }) = merge(&g) else {
            panic!("no merge")
        };
        git(&dir, &["verify-commit", &commit]);
        let shown = git(&dir, &["log", "-1", "--show-signature", &commit]);
        assert!(
            shown.contains("Good \"git\" signature for test@example.com"),
            "{shown}"
        );
        // Only the signature was added: two parents, ralph's message.
        let parents = git(&dir, &["rev-list", "--parents", "-n1", &commit]);
        assert_eq!(parents.split_whitespace().count(), 3);
        assert_eq!(
            git(&dir, &["log", "-1", "--format=%s", &commit]).trim(),
            "merge: story 1.1"
        );
    }

    #[test]
    fn a_literal_public_key_signs_through_the_ssh_agent_flag() {
        // `key::` / `ssh-…` values name the public half; ssh-keygen is told
        // -U and must find the private key in an agent. Without an agent it
        // fails: what matters here is that the failure is a `Sign` error
        // naming the program's words, not a git error.
        let (tmp, g) = repo();
        let dir = g.workdir.clone();
        let key = sign_with_ssh(tmp.path(), &dir);
        let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
        git(&dir, &["config", "user.signingkey", public.trim()]);
        let signing = signing(&git2::Repository::open(&dir).unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(signing.format, Format::Ssh);
        assert_eq!(signing.program, "ssh-keygen");
        if std::env::var_os("SSH_AUTH_SOCK").is_none() {
            let e = sign(&signing, b"x", "T <t@x>").unwrap_err();
            assert!(e.message.contains("ssh-keygen"), "{e}");
        }
    }

    #[test]
    fn a_key_that_does_not_exist_is_a_signing_error_and_nothing_is_written() {
        let (tmp, g) = repo();
        let dir = g.workdir.clone();
        sign_with_ssh(tmp.path(), &dir);
        let missing = tmp.path().join("no-such-key");
        git(
            &dir,
            &["config", "user.signingkey", &missing.display().to_string()],
        );
        let objects = git(&dir, &["count-objects"]);
        for result in [merge(&g).map(|_| ()), g.check_signing().map(|_| ())] {
            match result {
                Err(GitError::Sign(e)) => {
                    assert!(e.message.contains("ssh-keygen"), "{e}");
                    assert!(e.message.contains("no-such-key"), "{e}");
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(git(&dir, &["count-objects"]), objects, "no commit written");
        assert!(SignError::hint().contains("user.signingkey"));
    }

    #[test]
    fn unsigned_repositories_and_unknown_formats() {
        let (_tmp, g) = repo();
        let dir = g.workdir.clone();
        assert!(!g.check_signing().unwrap());
        let Ok(MergeOutcome::Merged { commit, .. }) = merge(&g) else {
            panic!("no merge")
        };
        let raw = git(&dir, &["cat-file", "commit", &commit]);
        assert!(!raw.contains("gpgsig"), "{raw}");
        git(&dir, &["config", "commit.gpgsign", "true"]);
        git(&dir, &["config", "gpg.format", "pgp"]);
        assert!(matches!(g.check_signing(), Err(GitError::Sign(_))));
    }

    /// openpgp, when this machine's gpg can make a key without a prompt: a
    /// throwaway keyring in the test's directory, reached through
    /// `gpg.program` (a wrapper naming that home), as a user would point
    /// git at another gpg.
    #[test]
    fn a_merge_is_signed_with_gpg_when_gpg_is_here() {
        let Ok(found) = std::process::Command::new("gpg").arg("--version").output() else {
            crate::testenv::skip("no gpg");
            return;
        };
        assert!(found.status.success());
        let (tmp, g) = repo();
        let dir = g.workdir.clone();
        let home = tmp.path().join("gnupg");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let made = std::process::Command::new("gpg")
            .arg("--homedir")
            .arg(&home)
            .args([
                "--batch",
                "--passphrase",
                "",
                "--quick-gen-key",
                "Test <test@example.com>",
                "ed25519",
                "sign",
                "never",
            ])
            .output()
            .unwrap();
        if !made.status.success() {
            crate::testenv::skip(&format!(
                "gpg cannot make a key here: {}",
                String::from_utf8_lossy(&made.stderr)
            ));
            return;
        }
        let wrapper = tmp.path().join("gpg-here");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nexec gpg --homedir '{}' \"$@\"\n",
                home.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(
            &wrapper,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        git(&dir, &["config", "commit.gpgsign", "true"]);
        git(
            &dir,
            &["config", "gpg.program", &wrapper.display().to_string()],
        );
        // No user.signingkey: git signs as the committer, and so does ralph.
        let merged = merge(&g);
        let _ = std::process::Command::new("gpgconf")
            .arg("--homedir")
            .arg(&home)
            .args(["--kill", "gpg-agent"])
            .output();
        let Ok(MergeOutcome::Merged { commit, .. }) = merged else {
            panic!("{merged:?}")
        };
        git(&dir, &["verify-commit", &commit]);
        let shown = git(&dir, &["log", "-1", "--show-signature", &commit]);
        assert!(
            shown.contains("Good signature from \"Test <test@example.com>\""),
            "{shown}"
        );
    }
}
