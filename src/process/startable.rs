//! Whether an agent's command can start where its attempts will run
//! (issue 32): checked once per command before a run's first attempt, and
//! by `ralph validate`, so an agent that cannot start is a usage error
//! instead of failed attempts charged to a story.
//!
//! Why a shell script and not the agent itself: nothing portable starts a
//! program without running it (a `--version` flag is each CLI's own, and a
//! custom agent given the empty prompt would do real work). What makes an
//! `execve` fail is few and checkable from inside the same seal: the file
//! is not there or not visible (the sandbox's mounts), it is a directory,
//! it lacks its execute bit, or its `#!` line names an interpreter that is
//! not there (a hidden `$HOME/.pyenv/...`, CRLF line endings, `env` given
//! a program that is not on the agent's `PATH`). `/bin/sh` checks these as
//! the kernel and `env` would, in the environment and mounts the attempt
//! gets, and prints one `ralph-probe:` line.

use std::path::Path;
use std::process::{Command, Stdio};

use super::{children, Seal};

/// The probe. `$1` is the program as the attempt's `execvp` gets it.
const SCRIPT: &str = r#"set -f
say() { printf 'ralph-probe: %s\n' "$*"; exit 0; }
# look NAME: NAME along $PATH as execvp finds it (an empty entry is the cwd).
look() {
    case $1 in */*) [ -f "$1" ] && [ -x "$1" ] && found=$1 && return 0; return 1 ;; esac
    found=
    old=$IFS; IFS=:
    for d in ${PATH:-}; do
        [ -n "$d" ] || d=.
        if [ -f "$d/$1" ] && [ -x "$d/$1" ]; then found=$d/$1; break; fi
    done
    IFS=$old
    [ -n "$found" ]
}
p=$1
case $p in
    */*) ;;
    *) look "$p" || say not-found; p=$found ;;
esac
[ -e "$p" ] || say not-found
[ -d "$p" ] && say directory
[ -x "$p" ] || say not-executable
[ -r "$p" ] || say ok
line=$(head -c 512 -- "$p" 2>/dev/null | head -n 1)
case $line in
    '#!'*) ;;
    *) say ok ;;
esac
set -- ${line#??}
[ $# -gt 0 ] || say no-interpreter
i=$1
{ [ -f "$i" ] && [ -x "$i" ]; } || say "bad-interpreter $i"
case ${i##*/} in
    env)
        shift
        case ${1:-} in
            -S*) a=${1#-S}; shift; [ -n "$a" ] && set -- "$a" "$@" ;;
            -*) say ok ;;
            # Linux hands env the rest of the line as one argument.
            *) set -- "$*" ;;
        esac
        [ $# -gt 0 ] || say ok
        look "$1" || say "env-program $1"
        ;;
esac
say ok
"#;

/// Why a command cannot start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CannotStart {
    NotFound,
    Directory,
    NotExecutable,
    /// `#!` with nothing after it.
    NoInterpreter,
    /// The `#!` line's interpreter is not there (or not executable).
    BadInterpreter(String),
    /// `#!/usr/bin/env NAME` and NAME is not on the `PATH` it gets.
    EnvProgram(String),
    /// The probe itself did not run (the sandbox could not start): its
    /// error output.
    Probe(String),
}

/// Starts the probe for `program` in `cwd`, sealed as `seal` says (`None`:
/// ralph's own environment). Blocking, and short: it starts no agent.
pub(crate) fn can_start(program: &str, cwd: &Path, seal: Option<&Seal>) -> Result<(), CannotStart> {
    let sh = ["/bin/sh", "-c", SCRIPT, "ralph-probe", program];
    let mut cmd = match seal.and_then(|s| s.bwrap.as_ref()) {
        Some((bwrap, args)) => {
            let mut c = Command::new(bwrap);
            c.args(args).args(sh);
            c
        }
        None => {
            let mut c = Command::new(sh[0]);
            c.args(&sh[1..]).current_dir(cwd);
            c
        }
    };
    if let Some(s) = seal {
        cmd.env_clear().envs(s.env.iter().map(|(k, v)| (k, v)));
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Registered while spawning, so the orphan reaper never takes its status.
    let child = {
        let mut registry = children();
        let child = cmd
            .spawn()
            .map_err(|e| CannotStart::Probe(format!("cannot start /bin/sh: {e}")))?;
        registry.insert(child.id() as i32);
        child
    };
    let pid = child.id() as i32;
    let out = child.wait_with_output();
    children().remove(&pid);
    let out = out.map_err(|e| CannotStart::Probe(e.to_string()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Split on '\n' alone: `lines` would drop the '\r' of a CRLF `#!` line.
    match stdout
        .split('\n')
        .find_map(|l| l.strip_prefix("ralph-probe: "))
    {
        Some(answer) => read_answer(answer),
        None => {
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            Err(CannotStart::Probe(if err.is_empty() {
                format!("the probe exited {:?} without an answer", out.status.code())
            } else {
                err
            }))
        }
    }
}

fn read_answer(answer: &str) -> Result<(), CannotStart> {
    let (word, rest) = answer.split_once(' ').unwrap_or((answer, ""));
    Err(match word {
        "ok" => return Ok(()),
        "not-found" => CannotStart::NotFound,
        "directory" => CannotStart::Directory,
        "not-executable" => CannotStart::NotExecutable,
        "no-interpreter" => CannotStart::NoInterpreter,
        "bad-interpreter" => CannotStart::BadInterpreter(rest.to_string()),
        "env-program" => CannotStart::EnvProgram(rest.to_string()),
        other => CannotStart::Probe(format!("unexpected answer {other:?}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, text: &str, mode: u32) -> String {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p.display().to_string()
    }

    /// Each way `execve` refuses, as the probe tells it (unsealed: the
    /// script is the same inside bubblewrap, where only the mounts differ).
    #[test]
    fn each_way_a_command_cannot_start() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let seal = Seal {
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            bwrap: None,
            limits: crate::sandbox::Limits::default(),
        };
        let probe = |p: &str| can_start(p, dir, Some(&seal));
        let ok = script(dir, "ok", "#!/bin/sh\necho hi\n", 0o755);
        assert_eq!(probe(&ok), Ok(()));
        let env_ok = script(dir, "env-ok", "#!/usr/bin/env sh\necho hi\n", 0o755);
        assert_eq!(probe(&env_ok), Ok(()));
        let env_s = script(dir, "env-s", "#!/usr/bin/env -S sh -e\necho hi\n", 0o755);
        assert_eq!(probe(&env_s), Ok(()));
        assert_eq!(probe("sh"), Ok(()), "a name found on PATH");
        assert_eq!(probe("no-such-agent-xyz"), Err(CannotStart::NotFound));
        assert_eq!(
            probe(&dir.join("gone").display().to_string()),
            Err(CannotStart::NotFound)
        );
        assert_eq!(
            probe(&dir.display().to_string()),
            Err(CannotStart::Directory)
        );
        let plain = script(dir, "plain", "#!/bin/sh\n", 0o644);
        assert_eq!(probe(&plain), Err(CannotStart::NotExecutable));
        let bad = script(dir, "bad", "#!/no/such/python3\n", 0o755);
        assert_eq!(
            probe(&bad),
            Err(CannotStart::BadInterpreter("/no/such/python3".into()))
        );
        let crlf = script(dir, "crlf", "#!/bin/sh\r\necho hi\r\n", 0o755);
        assert_eq!(
            probe(&crlf),
            Err(CannotStart::BadInterpreter("/bin/sh\r".into()))
        );
        let env_bad = script(dir, "env-bad", "#!/usr/bin/env nopython-xyz\n", 0o755);
        assert_eq!(
            probe(&env_bad),
            Err(CannotStart::EnvProgram("nopython-xyz".into()))
        );
        // Linux gives env "sh -e" as one name, which is not on PATH.
        let env_two = script(dir, "env-two", "#!/usr/bin/env sh -e\n", 0o755);
        assert_eq!(
            probe(&env_two),
            Err(CannotStart::EnvProgram("sh -e".into()))
        );
        let empty = script(dir, "empty", "#!\n", 0o755);
        assert_eq!(probe(&empty), Err(CannotStart::NoInterpreter));
        let elf = "/bin/sh";
        assert_eq!(probe(elf), Ok(()), "a binary has no #! line to check");
    }
}
