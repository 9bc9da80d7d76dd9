//! Signals as an event source: a non-blocking `signalfd` in the mio loop.
//!
//! The handled signals are blocked first, before any thread exists, so they
//! are never delivered asynchronously: they wait in the `signalfd` until the
//! loop reads them, between two iterations, with no handler running in the
//! middle of the agent's work. `SIGPIPE` is in the set too, so a write to a
//! vanished client returns `EPIPE` instead of killing the agent.

use std::io;
use std::os::fd::AsRawFd;

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token, event};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

/// What a signal asks of the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// `SIGTERM`, `SIGINT`: stop gracefully.
    Stop(Signal),
    /// `SIGHUP`: re-read the log level and `acl_file`.
    Reload,
}

fn handled() -> SigSet {
    let mut set = SigSet::empty();
    for sig in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGPIPE,
    ] {
        set.add(sig);
    }
    set
}

/// Blocks the handled signals in the calling thread; threads created
/// afterwards inherit the mask. Call it first thing in `main`.
pub fn block() -> io::Result<()> {
    handled().thread_block().map_err(io::Error::from)
}

/// The `signalfd` of the handled signals.
#[derive(Debug)]
pub struct Signals {
    fd: SignalFd,
}

impl Signals {
    /// Blocks the handled signals (again: harmless) and opens the `signalfd`.
    pub fn new() -> io::Result<Signals> {
        block()?;
        let fd = SignalFd::with_flags(&handled(), SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
        Ok(Signals { fd })
    }

    /// The next pending request, or `None` when none is left. `SIGPIPE` is
    /// consumed and ignored.
    pub fn next_request(&mut self) -> io::Result<Option<Request>> {
        loop {
            let info = match self.fd.read_signal() {
                Ok(Some(info)) => info,
                Ok(None) => return Ok(None),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
            match i32::try_from(info.ssi_signo)
                .ok()
                .and_then(|n| Signal::try_from(n).ok())
            {
                Some(sig @ (Signal::SIGTERM | Signal::SIGINT)) => {
                    return Ok(Some(Request::Stop(sig)));
                }
                Some(Signal::SIGHUP) => return Ok(Some(Request::Reload)),
                _ => continue,
            }
        }
    }
}

impl event::Source for Signals {
    fn register(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        SourceFd(&self.fd.as_raw_fd()).register(registry, token, interests)
    }

    fn reregister(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        SourceFd(&self.fd.as_raw_fd()).reregister(registry, token, interests)
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        SourceFd(&self.fd.as_raw_fd()).deregister(registry)
    }
}
