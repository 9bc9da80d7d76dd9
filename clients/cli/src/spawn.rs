//! Starting and reaping the command of `lock`.
//!
//! `posix_spawnp` rather than `std::process::Command`: the supervisor
//! blocks SIGCHLD, SIGINT, SIGTERM and SIGHUP to read them from a signalfd,
//! and a child inherits its parent's signal mask. std does not reset it, so
//! the command would start deaf to the SIGTERM meant to stop it. Here the
//! mask is emptied and SIGPIPE (which the Rust runtime ignores) set back
//! to its default in the same call, before the command's first instruction.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use nix::errno::Errno;
use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawnp};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// How the command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this status.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

/// Starts `command` (looked up in `$PATH` when it has no `/`) with this
/// process's environment plus `vars`, and stdin, stdout and stderr shared,
/// as the leader of a new process group.
pub fn spawn(command: &[OsString], vars: &[(&str, &[u8])]) -> Result<Pid, Errno> {
    let args = command
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| Errno::EINVAL)?;
    let mut env = Vec::new();
    for (name, value) in std::env::vars_os() {
        if !vars
            .iter()
            .any(|(ours, _)| name.as_bytes() == ours.as_bytes())
        {
            env.push(entry(name.as_bytes(), value.as_bytes())?);
        }
    }
    for (name, value) in vars {
        env.push(entry(name.as_bytes(), value)?);
    }
    let mut attr = PosixSpawnAttr::init()?;
    attr.set_sigmask(&SigSet::empty())?;
    let mut defaults = SigSet::empty();
    defaults.add(Signal::SIGPIPE);
    attr.set_sigdefault(&defaults)?;
    // Its own process group, so that every process it starts can be
    // signalled at once, and none is missed when the lock is lost.
    attr.set_pgroup(Pid::from_raw(0))?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF
            | PosixSpawnFlags::POSIX_SPAWN_SETPGROUP,
    )?;
    let actions = PosixSpawnFileActions::init()?;
    let program = args.first().ok_or(Errno::EINVAL)?;
    posix_spawnp(program, &actions, &attr, &args, &env)
}

fn entry(name: &[u8], value: &[u8]) -> Result<CString, Errno> {
    let mut bytes = Vec::with_capacity(name.len() + 1 + value.len());
    bytes.extend_from_slice(name);
    bytes.push(b'=');
    bytes.extend_from_slice(value);
    CString::new(bytes).map_err(|_| Errno::EINVAL)
}

/// Reaps `pid` if it ended; `None` while it runs (or is only stopped).
pub fn try_reap(pid: Pid) -> Result<Option<Ended>, Errno> {
    loop {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => return Ok(Some(Ended::Code(code))),
            Ok(WaitStatus::Signaled(_, sig, _)) => return Ok(Some(Ended::Signal(sig as i32))),
            Ok(_) => return Ok(None),
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}

/// The name of the program, for messages.
pub fn program_name(command: &[OsString]) -> String {
    command
        .first()
        .map(|p| {
            OsString::from_vec(p.as_bytes().to_vec())
                .to_string_lossy()
                .into_owned()
        })
        .unwrap_or_default()
}
