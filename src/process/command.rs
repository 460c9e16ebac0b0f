//! An attempt's command, before it is spawned: sealed or not (the program
//! found on ralph's side, run through bubblewrap), its environment and
//! token, a process group of its own, and the cgroups and limits the
//! child takes between fork and exec. `supervise` spawns and watches it.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use tokio::process::Command;

use super::{AttemptSpec, TOKEN_VAR};

/// The command `spec` asks for, sealed when it has a seal (the program
/// found on ralph's side, run through bubblewrap), with its environment,
/// the attempt's token and a process group of its own.
pub(super) fn command_for(spec: &AttemptSpec) -> io::Result<Command> {
    let mut cmd = match spec.seal.as_ref().and_then(|s| s.bwrap.as_ref()) {
        Some((bwrap, prefix)) => {
            // Found here, on ralph's side: a missing agent stays "not
            // found" instead of becoming bwrap's exit 1.
            // `spec.env` is laid over the seal's: it wins.
            let path = spec
                .env
                .iter()
                .chain(spec.seal.iter().flat_map(|s| s.env.iter()))
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            let program =
                crate::sandbox::which(&spec.program, &path, &spec.cwd).ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("{} not found on PATH", spec.program),
                    )
                })?;
            let mut c = Command::new(bwrap);
            c.args(prefix).arg(program).args(&spec.args);
            c
        }
        None => {
            let mut c = Command::new(&spec.program);
            c.args(&spec.args);
            c
        }
    };
    cmd.current_dir(&spec.cwd);
    if let Some(seal) = &spec.seal {
        cmd.env_clear();
        cmd.envs(seal.env.iter().map(|(k, v)| (k, v)));
    }
    for key in &spec.env_remove {
        cmd.env_remove(key);
    }
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    cmd.env(TOKEN_VAR, &spec.token);
    cmd.process_group(0);
    Ok(cmd)
}

/// Between fork and exec, the child joins the cgroups whose `procs` files
/// are `join` and takes `rlimits`; `join` stays open until the spawn.
pub(super) fn join_at_exec(
    cmd: &mut Command,
    join: &[File],
    rlimits: Vec<(libc::__rlimit_resource_t, libc::rlim_t)>,
) {
    let fds: Vec<i32> = join.iter().map(|f| f.as_raw_fd()).collect();
    if !fds.is_empty() || !rlimits.is_empty() {
        // SAFETY: between fork and exec only write(2) and setrlimit(2) run,
        // both async-signal-safe (the vectors were made before the fork);
        // the files outlive spawn(). "0" means "this process". A failed
        // write leaves the child outside, and the token still works.
        unsafe {
            cmd.pre_exec(move || {
                for &fd in &fds {
                    libc::write(fd, b"0".as_ptr().cast(), 1);
                }
                for &(resource, value) in &rlimits {
                    let lim = libc::rlimit {
                        rlim_cur: value,
                        rlim_max: value,
                    };
                    libc::setrlimit(resource, &lim);
                }
                Ok(())
            });
        }
    }
}
