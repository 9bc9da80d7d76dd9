//! The guard: a process between `snaplock-cli` and the command, so that the
//! command never runs without the lock, even when `snaplock-cli` is killed.
//!
//! ```text
//!   snaplock-cli ──fork──▶ guard (holds a copy of the agent connection;
//!        │                   subreaper: orphans of the command come to it)
//!        │                     └─posix_spawn─▶ command, leader of its own
//!        │                                     process group, and its children
//!        │ signals the group: forwarded SIGINT/TERM/HUP, SIGTERM/SIGKILL when
//!        │ the lock is lost
//!        └── control pipe ──▶ guard: end of file = snaplock-cli is gone
//! ```
//!
//! The guard reports on the report pipe the command's pid (or why it could
//! not start), then, once no process of the group is left, how the command
//! itself ended; then it exits. If `snaplock-cli` goes away first (SIGKILL,
//! a crash), the control pipe reads end of file: the guard kills the whole
//! group with SIGKILL and waits until none of it is left before it exits.
//! Only then is its copy of the agent connection closed, and the agent
//! releases the lock. So a process of the command never runs while another
//! holder may.
//!
//! The guard is in `snaplock-cli`'s process group, not in the command's:
//! signals meant for the command's group do not reach it.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork, pipe2};

use crate::spawn::{self, Ended};

/// How often the guard looks at the group when no child of its own ended:
/// a process of the group whose parent is outside it ends without telling
/// the guard.
const RECHECK: Duration = Duration::from_millis(100);

/// The command, started under its guard.
pub struct Guarded {
    /// The guard: the child `snaplock-cli` reaps.
    pub guard: Pid,
    /// The command's process group (its pid).
    pub group: Pid,
    /// Where the guard reports how the command ended.
    report: std::fs::File,
    /// Kept open for as long as `snaplock-cli` runs.
    _control: OwnedFd,
}

impl Guarded {
    /// Sends `sig` to every process of the command's group.
    pub fn signal_group(&self, sig: Signal) {
        // The group exists until its last process is reaped, and the guard
        // reaps the leader only after the group is empty: the id is ours.
        let _ = kill(Pid::from_raw(-self.group.as_raw()), sig);
    }

    /// Whether no process of the command's group is left.
    pub fn group_is_empty(&self) -> bool {
        group_is_empty(Pid::from_raw(-self.group.as_raw()))
    }

    /// After the guard died: kills the command's group and waits, at most
    /// `bound`, until none of it is left, reaping the orphans that come to
    /// this process (a subreaper once the guard is gone, see [`start`]).
    /// Whether the group is gone.
    pub fn kill_group_and_wait(&self, bound: Duration) -> bool {
        let start = snaplock_client::clock::monotonic();
        loop {
            self.signal_group(Signal::SIGKILL);
            let _ = reap_all(Pid::from_raw(0));
            if self.group_is_empty() {
                return true;
            }
            if snaplock_client::clock::monotonic().saturating_duration_since(start) > bound {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// After the guard exited with status 0: how the command ended.
    pub fn ended(&mut self) -> Option<Ended> {
        match read_report(&mut self.report) {
            Some((b'C', code)) => Some(Ended::Code(code)),
            Some((b'S', sig)) => Some(Ended::Signal(sig)),
            _ => None,
        }
    }
}

/// Forks the guard, which starts `command`; returns once the command was
/// started (or could not be). The caller blocks SIGCHLD beforehand: the
/// guard inherits the mask and reads SIGCHLD from a signalfd.
#[allow(unsafe_code)] // fork(2): the guard must be a copy of this process
pub fn start(command: &[OsString], vars: &[(&str, &[u8])]) -> Result<Guarded, Errno> {
    // Should the guard die first, the command's orphans come here, to be
    // reaped while the group is killed.
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let (control_read, control_write) = pipe2(OFlag::O_CLOEXEC)?;
    let (report_read, report_write) = pipe2(OFlag::O_CLOEXEC)?;
    // SAFETY: snaplock-cli has one thread, so the child may run any code;
    // it never returns from `run_guard`.
    match unsafe { fork() }? {
        ForkResult::Child => {
            drop(control_write);
            drop(report_read);
            run_guard(command, vars, control_read, report_write)
        }
        ForkResult::Parent { child } => {
            drop(control_read);
            drop(report_write);
            let mut report = std::fs::File::from(report_read);
            let group = match read_report(&mut report) {
                Some((b'P', pid)) => Pid::from_raw(pid),
                Some((b'F', errno)) => {
                    reap_quietly(child);
                    return Err(Errno::from_raw(errno));
                }
                _ => {
                    reap_quietly(child);
                    return Err(Errno::EIO);
                }
            };
            Ok(Guarded {
                guard: child,
                group,
                report,
                _control: control_write,
            })
        }
    }
}

fn reap_quietly(pid: Pid) {
    while let Err(Errno::EINTR) = waitpid(pid, None) {}
}

/// One report: a kind byte and a number.
fn write_report(out: &mut std::fs::File, kind: u8, n: i32) {
    let mut msg = [0u8; 5];
    msg[0] = kind;
    msg[1..].copy_from_slice(&n.to_le_bytes());
    // Five bytes are written at once into a pipe (PIPE_BUF is larger).
    let _ = out.write_all(&msg);
}

fn read_report(input: &mut std::fs::File) -> Option<(u8, i32)> {
    let mut msg = [0u8; 5];
    input.read_exact(&mut msg).ok()?;
    Some((msg[0], i32::from_le_bytes([msg[1], msg[2], msg[3], msg[4]])))
}

/// The guard's whole life; exits the process.
fn run_guard(command: &[OsString], vars: &[(&str, &[u8])], control: OwnedFd, report: OwnedFd) -> ! {
    let mut report = std::fs::File::from(report);
    // Its own name, so that `pkill snaplock-cli` or `killall -9
    // snaplock-cli` does not kill the guard with snaplock-cli, which would
    // leave the command running without the lock.
    let _ = nix::sys::prctl::set_name(c"snaplock-guard");
    // Orphans of the command are reparented to the guard, which reaps
    // them, so that a finished group leaves no zombie that looks alive.
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let mut chld = SigSet::empty();
    chld.add(Signal::SIGCHLD);
    let Ok(signals) = SignalFd::with_flags(&chld, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
    else {
        write_report(&mut report, b'F', Errno::EIO as i32);
        std::process::exit(1);
    };
    let command_pid = match spawn::spawn(command, vars) {
        Ok(pid) => pid,
        Err(e) => {
            write_report(&mut report, b'F', e as i32);
            std::process::exit(1);
        }
    };
    write_report(&mut report, b'P', command_pid.as_raw());
    let group = Pid::from_raw(-command_pid.as_raw());
    let mut ended: Option<Ended> = None;
    let mut cli_gone = false;
    loop {
        ended = ended.or(reap_all(command_pid));
        if ended.is_some() && group_is_empty(group) {
            break;
        }
        // While the command itself runs, its end comes as SIGCHLD; after,
        // the rest of its group is checked now and then as well.
        let timeout = if cli_gone || ended.is_some() {
            PollTimeout::try_from(RECHECK.as_millis() as i32).unwrap_or(PollTimeout::MAX)
        } else {
            PollTimeout::NONE
        };
        let mut fds = [
            PollFd::new(signals.as_fd(), PollFlags::POLLIN),
            PollFd::new(control.as_fd(), PollFlags::POLLIN),
        ];
        let _ = poll(&mut fds, timeout);
        while let Ok(Some(_)) = signals.read_signal() {}
        let hung_up = fds[1].revents().is_some_and(|r| !r.is_empty());
        if hung_up || cli_gone {
            // snaplock-cli never writes on the control pipe: readable means
            // it is gone, and with it the renewals. Nothing of the command
            // may run on; kill it again until none is left.
            if !cli_gone {
                eprintln!(
                    "snaplock-cli: error: snaplock-cli ended before the command; killing the command"
                );
            }
            cli_gone = true;
            let _ = kill(group, Signal::SIGKILL);
        }
    }
    match ended {
        Some(Ended::Code(code)) => write_report(&mut report, b'C', code),
        Some(Ended::Signal(sig)) => write_report(&mut report, b'S', sig),
        None => {}
    }
    std::process::exit(0)
}

/// Reaps every child that ended; returns how `command` ended if it was
/// among them.
fn reap_all(command: Pid) -> Option<Ended> {
    let mut ended = None;
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == command => {
                ended = Some(Ended::Code(code));
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == command => {
                ended = Some(Ended::Signal(sig as i32));
            }
            Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => return ended,
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return ended,
        }
    }
}

/// Whether no process of the group is left. Its zombies are the guard's
/// children (reaped just before) or those of a live member.
fn group_is_empty(group: Pid) -> bool {
    kill(group, None) == Err(Errno::ESRCH)
}
