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
//!
//! On a terminal where `snaplock-cli` is in the foreground, the guard makes
//! the command's group the foreground group, so that the command can read
//! the terminal and gets ^C and ^Z, and gives the terminal back when the
//! group has ended. When ^Z (or a read from the background) stops the
//! command, the guard gives the terminal back and stops `snaplock-cli`'s
//! group too, so that the shell sees the job stopped. On `fg` or `bg`,
//! `snaplock-cli` decides whether the command may go on (it still holds
//! the lock, long enough) and says so on the control pipe; only then does
//! the guard continue the command, with the terminal again on `fg`.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::stat::Mode;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork, getpgrp, pipe2, tcgetpgrp, tcsetpgrp};

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
    /// Kept open for as long as `snaplock-cli` runs; a byte on it lets a
    /// stopped command go on.
    control: OwnedFd,
}

impl Guarded {
    /// Sends `sig` to every process of the command's group.
    pub fn signal_group(&self, sig: Signal) {
        // The group exists until its last process is reaped, and the guard
        // reaps the leader only after the group is empty: the id is ours.
        let _ = kill(Pid::from_raw(-self.group.as_raw()), sig);
    }

    /// Lets the command go on after a job-control stop (`fg`, `bg`): the
    /// guard continues it.
    pub fn permit_resume(&self) {
        let _ = nix::unistd::write(&self.control, b"c");
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
                control: control_write,
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
    let mut tty = Terminal::open();
    if tty.hand_to(command_pid) {
        // It may have read the terminal before it was its own, and been
        // stopped for it (SIGTTIN). SIGCONT clears the stop at once, so
        // no stale stop is seen below.
        let _ = kill(group, Signal::SIGCONT);
    }
    let mut ended: Option<Ended> = None;
    let mut cli_gone = false;
    loop {
        let reaped = reap_all(command_pid);
        if let Some(Reaped::Stopped) = reaped {
            // ^Z, or a read from the background: the whole job stops, as
            // the shell knows it (snaplock-cli's group, this guard with it),
            // and the shell gets the terminal back.
            if tty.take_back() {
                let _ = kill(Pid::from_raw(0), Signal::SIGTSTP);
            }
        }
        if let Some(Reaped::Ended(e)) = reaped {
            ended = Some(e);
        }
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
        let readable = fds[1].revents().is_some_and(|r| !r.is_empty());
        let mut byte = [0u8; 16];
        let hung_up = readable && !matches!(nix::unistd::read(&control, &mut byte), Ok(n) if n > 0);
        if readable && !hung_up && !cli_gone {
            // snaplock-cli lets the command go on after a stop.
            tty.hand_to(command_pid);
            let _ = kill(group, Signal::SIGCONT);
        }
        if hung_up || cli_gone {
            // End of file: snaplock-cli is gone, and with it the renewals.
            // Nothing of the command may run on; kill it again until none
            // is left.
            if !cli_gone {
                eprintln!(
                    "snaplock-cli: error: snaplock-cli ended before the command; killing the command"
                );
            }
            cli_gone = true;
            let _ = kill(group, Signal::SIGKILL);
        }
    }
    tty.take_back();
    match ended {
        Some(Ended::Code(code)) => write_report(&mut report, b'C', code),
        Some(Ended::Signal(sig)) => write_report(&mut report, b'S', sig),
        None => {}
    }
    std::process::exit(0)
}

/// What became of the command, among the children reaped.
enum Reaped {
    Ended(Ended),
    Stopped,
}

/// Reaps every child that ended; returns how `command` ended, or that it
/// was stopped, if it was among them.
fn reap_all(command: Pid) -> Option<Reaped> {
    let mut news = None;
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::WUNTRACED)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == command => {
                news = Some(Reaped::Ended(Ended::Code(code)));
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == command => {
                news = Some(Reaped::Ended(Ended::Signal(sig as i32)));
            }
            Ok(WaitStatus::Stopped(pid, _)) if pid == command => {
                news = news.or(Some(Reaped::Stopped));
            }
            Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => return news,
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return news,
        }
    }
}

/// The controlling terminal, when snaplock-cli's group was its foreground
/// group at the start.
struct Terminal {
    fd: Option<OwnedFd>,
    /// The command's group has the terminal.
    handed: bool,
}

impl Terminal {
    fn open() -> Terminal {
        let fd = nix::fcntl::open(
            "/dev/tty",
            OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()
        .filter(|fd| tcgetpgrp(fd) == Ok(getpgrp()));
        if fd.is_some() {
            // Taking the terminal back from the background would stop the
            // guard with SIGTTOU.
            let mut ttou = SigSet::empty();
            ttou.add(Signal::SIGTTOU);
            let _ = ttou.thread_block();
        }
        Terminal { fd, handed: false }
    }

    /// Gives the terminal to the command's group, if this group has it;
    /// whether it did.
    fn hand_to(&mut self, command: Pid) -> bool {
        if let Some(fd) = &self.fd {
            if tcgetpgrp(fd) == Ok(getpgrp()) && tcsetpgrp(fd, command).is_ok() {
                self.handed = true;
                return true;
            }
        }
        false
    }

    /// Takes the terminal back for snaplock-cli's group, if it was handed
    /// over; whether it was.
    fn take_back(&mut self) -> bool {
        let was = std::mem::take(&mut self.handed);
        if let (true, Some(fd)) = (was, &self.fd) {
            let _ = tcsetpgrp(fd, getpgrp());
        }
        was
    }
}

/// Whether no process of the group is left. Its zombies are the guard's
/// children (reaped just before) or those of a live member.
fn group_is_empty(group: Pid) -> bool {
    kill(group, None) == Err(Errno::ESRCH)
}
