//! `snaplockd`, the snaplock agent: a single-threaded mio loop around the
//! sans-IO core of `snaplock_proto`.
//!
//! The agent owns the sockets, the signals, the configuration, the logs and
//! the service manager's notifications; every protocol answer comes from
//! [`snaplock_proto::Core`]. The binary is a thin `main` over [`cli`],
//! [`config`] and [`run`]; tests run the same loop in-process:
//!
//! ```no_run
//! use snaplock_agent::{AgentConfig, spawn};
//!
//! let agent = spawn(AgentConfig::new("/tmp/example/snaplock.sock")).expect("agent starts");
//! // ... connect to agent.socket() ...
//! agent.stop().expect("agent stops cleanly");
//! ```

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use mio::Waker;

pub mod cli;
pub mod clock;
pub mod communicator;
pub mod config;
pub mod conn;
mod event_loop;
pub mod files;
pub mod listen;
pub mod logging;
pub mod members;
pub mod metrics_http;
pub mod notify;
pub mod outbuf;
pub mod peers;
pub mod secret;
pub mod signals;
pub mod state;
pub mod stream;
pub mod units;

pub use config::{AgentConfig, ConfigError};

/// Why the agent could not start or had to stop.
#[derive(Debug)]
pub enum AgentError {
    /// The configuration or the command line is unusable (exit code 2).
    Config(String),
    /// Another agent answers on the socket (exit code 1).
    AlreadyRunning(PathBuf),
    /// A system call failed (exit code 1).
    Io {
        /// What the agent was doing.
        context: String,
        /// What the system said.
        source: io::Error,
    },
}

impl AgentError {
    /// The process exit code for this error: 2 for configuration and usage
    /// errors, 1 for the others.
    pub fn exit_code(&self) -> i32 {
        match self {
            AgentError::Config(_) => 2,
            AgentError::AlreadyRunning(_) | AgentError::Io { .. } => 1,
        }
    }
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentError::Config(msg) => f.write_str(msg),
            AgentError::AlreadyRunning(path) => {
                write!(
                    f,
                    "another agent is listening on {}; not starting a second one",
                    path.display()
                )
            }
            AgentError::Io { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for AgentError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AgentError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<ConfigError> for AgentError {
    fn from(e: ConfigError) -> AgentError {
        AgentError::Config(e.0)
    }
}

#[derive(Debug)]
enum Phase {
    Starting,
    Listening(PathBuf),
    Finished,
}

#[derive(Debug)]
struct Shared {
    stop: AtomicBool,
    waker: Mutex<Option<Arc<Waker>>>,
    phase: Mutex<Phase>,
    changed: Condvar,
}

/// Watches and stops a running agent from another thread.
#[derive(Debug, Clone)]
pub struct AgentHandle {
    shared: Arc<Shared>,
}

impl AgentHandle {
    fn new() -> AgentHandle {
        AgentHandle {
            shared: Arc::new(Shared {
                stop: AtomicBool::new(false),
                waker: Mutex::new(None),
                phase: Mutex::new(Phase::Starting),
                changed: Condvar::new(),
            }),
        }
    }

    /// Asks the agent to stop gracefully, as `SIGTERM` does. Returns at
    /// once; safe to call before the agent runs, or more than once.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(waker) = lock(&self.shared.waker).as_ref() {
            let _ = waker.wake();
        }
    }

    /// Waits until the agent listens, and returns its socket path; `None`
    /// when it ended before (see [`run`]'s result) or `timeout` passed.
    pub fn wait_listening(&self, timeout: Duration) -> Option<PathBuf> {
        let phase = lock(&self.shared.phase);
        let (phase, _) = self
            .shared
            .changed
            .wait_timeout_while(phase, timeout, |p| matches!(p, Phase::Starting))
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*phase {
            Phase::Listening(path) => Some(path.clone()),
            Phase::Starting | Phase::Finished => None,
        }
    }

    fn set_phase(&self, phase: Phase) {
        *lock(&self.shared.phase) = phase;
        self.shared.changed.notify_all();
    }

    pub(crate) fn set_listening(&self, path: PathBuf) {
        self.set_phase(Phase::Listening(path));
    }

    pub(crate) fn install_waker(&self, waker: Arc<Waker>) {
        *lock(&self.shared.waker) = Some(waker);
    }

    pub(crate) fn stop_requested(&self) -> bool {
        self.shared.stop.load(Ordering::SeqCst)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How [`run`] is driven from outside.
#[derive(Debug)]
pub struct Control {
    signals: bool,
    handle: AgentHandle,
}

impl Control {
    /// For the `snaplockd` process: `SIGTERM`/`SIGINT` stop it, `SIGHUP`
    /// reloads the log level and `acl_file`. Block the signals ([`signals::block`]) before
    /// any thread starts.
    pub fn process() -> Control {
        Control {
            signals: true,
            handle: AgentHandle::new(),
        }
    }

    /// For an agent inside another program (tests): no signal is touched;
    /// stop it through [`Control::handle`].
    pub fn in_process() -> Control {
        Control {
            signals: false,
            handle: AgentHandle::new(),
        }
    }

    /// The handle that watches and stops this agent.
    pub fn handle(&self) -> AgentHandle {
        self.handle.clone()
    }
}

/// Marks the agent finished however `run` ends, so waiters wake up.
struct FinishOnDrop(AgentHandle);

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        self.0.set_phase(Phase::Finished);
    }
}

/// Runs the agent until it is stopped (signal or [`AgentHandle::stop`]).
///
/// Creates the socket (removing a stale one), serves clients, and on stop
/// tells every holder `UNLOCKED error=lost` and every waiter
/// `LOCKFAILED error=unavailable`, delivers that for at most a second,
/// removes the socket and returns `Ok(())`.
pub fn run(config: AgentConfig, control: Control) -> Result<(), AgentError> {
    let _finish = FinishOnDrop(control.handle.clone());
    event_loop::EventLoop::new(config, &control)?.run()
}

/// An agent running on its own thread in this process.
#[derive(Debug)]
pub struct Agent {
    handle: AgentHandle,
    socket: PathBuf,
    thread: Option<JoinHandle<Result<(), AgentError>>>,
}

/// Starts an agent on a new thread and waits until it listens (10 s at
/// most). Signals are not touched.
pub fn spawn(config: AgentConfig) -> Result<Agent, AgentError> {
    let control = Control::in_process();
    let handle = control.handle();
    let thread = std::thread::Builder::new()
        .name("snaplockd".to_owned())
        .spawn(move || run(config, control))
        .map_err(|source| AgentError::Io {
            context: "cannot start the agent's thread".into(),
            source,
        })?;
    match handle.wait_listening(Duration::from_secs(10)) {
        Some(socket) => Ok(Agent {
            handle,
            socket,
            thread: Some(thread),
        }),
        None => {
            handle.stop();
            match thread.join() {
                Ok(Err(e)) => Err(e),
                Ok(Ok(())) => Err(AgentError::Config(
                    "the agent stopped before listening".into(),
                )),
                Err(_) => Err(panicked()),
            }
        }
    }
}

fn panicked() -> AgentError {
    AgentError::Io {
        context: "the agent's thread".into(),
        source: io::Error::other("panicked"),
    }
}

impl Agent {
    /// Where it listens.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// A handle to stop it from elsewhere.
    pub fn handle(&self) -> AgentHandle {
        self.handle.clone()
    }

    /// Stops it gracefully and waits for its thread.
    pub fn stop(mut self) -> Result<(), AgentError> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<(), AgentError> {
        self.handle.stop();
        match self.thread.take().map(JoinHandle::join) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(e),
            Some(Err(_)) => Err(panicked()),
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}
