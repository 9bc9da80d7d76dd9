//! A real `snaplockd` on a socket in a temporary directory, and the real
//! `snaplock-cli` run against it with bounded waits.

#![allow(dead_code)] // each test file uses its own part of the harness

use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

pub const CLI: &str = env!("CARGO_BIN_EXE_snaplock-cli");

/// Now, for measuring how long the processes under test take.
#[allow(clippy::disallowed_methods)] // tests time the real processes they run
pub fn now() -> Instant {
    Instant::now()
}

/// A fresh directory under the system's temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(what: &str) -> TempDir {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("snaplock-cli-{what}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the temporary directory");
        TempDir(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `snaplockd`, built for this run ([`workspace_binary`]), or the one
/// `$SNAPLOCK_TEST_AGENT` names (an installed agent, for instance).
fn agent_binary() -> PathBuf {
    static AGENT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    AGENT
        .get_or_init(|| match std::env::var_os("SNAPLOCK_TEST_AGENT") {
            Some(bin) => PathBuf::from(bin),
            None => workspace_binary("snaplock-agent", "snaplockd"),
        })
        .clone()
}

/// The binary `bin` of the workspace's package `package`, built now, beside
/// `snaplock-cli`.
fn workspace_binary(package: &str, bin: &str) -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the workspace");
    workspace_binary::build(Path::new(CLI), workspace, package, bin)
}

#[path = "../../../../tests/support/workspace_binary.rs"]
mod workspace_binary;

/// A running agent; stopped (SIGTERM, then SIGKILL) and cleaned up on drop.
pub struct Agent {
    pub socket: PathBuf,
    child: Child,
    stopped: bool,
    pub dir: TempDir,
}

impl Agent {
    /// Starts `snaplockd --socket <tmp>/s.sock --log-level warn` and waits (at
    /// most 10 s) until its socket accepts connections.
    pub fn start() -> Agent {
        Agent::start_with(&[])
    }

    /// [`start`](Agent::start) with more arguments.
    pub fn start_with(extra: &[String]) -> Agent {
        let dir = TempDir::new("agent");
        let socket = dir.path("s.sock");
        let child = Command::new(agent_binary())
            .arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(dir.path(""))
            .args(["--log-level", "warn"])
            .args(extra)
            .stdin(Stdio::null())
            .spawn()
            .expect("start snaplockd");
        let mut agent = Agent {
            socket,
            child,
            stopped: false,
            dir,
        };
        let start = now();
        while UnixStream::connect(&agent.socket).is_err() {
            if let Ok(Some(status)) = agent.child.try_wait() {
                panic!("snaplockd exited at start: {status}");
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "snaplockd did not listen within 10 s"
            );
            thread::sleep(Duration::from_millis(20));
        }
        agent
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// Sends `sig` to the agent.
    pub fn signal(&self, sig: Signal) {
        kill(self.pid(), sig).expect("signal snaplockd");
    }

    /// SIGKILL, and reaps it.
    pub fn kill9(&mut self) {
        self.signal(Signal::SIGKILL);
        let _ = self.child.wait();
        self.stopped = true;
    }

    /// `snaplock-cli --socket <ours>`, ready for more arguments.
    pub fn cli(&self) -> Command {
        let mut cmd = Command::new(CLI);
        cmd.arg("--socket").arg(&self.socket);
        cmd.stdin(Stdio::null());
        cmd
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        // A stopped agent would keep the SIGTERM pending forever.
        let _ = kill(self.pid(), Signal::SIGCONT);
        let _ = kill(self.pid(), Signal::SIGTERM);
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = kill(self.pid(), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// What a finished run gave.
#[derive(Debug)]
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl Run {
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or(-1)
    }
}

/// A started process whose output is collected; killed if it outlives its
/// bound.
pub struct Running {
    child: Child,
    started: Instant,
    output: mpsc::Receiver<(String, String)>,
}

impl Running {
    pub fn spawn(mut cmd: Command) -> Running {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let started = now();
        let mut child = cmd.spawn().expect("start the process");
        let mut out = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let errs = thread::spawn(move || {
                let mut s = String::new();
                let _ = err.read_to_string(&mut s);
                s
            });
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            let _ = tx.send((s, errs.join().unwrap_or_default()));
        });
        Running {
            child,
            started,
            output: rx,
        }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// Waits at most `bound` for the exit; panics (after killing it) beyond.
    pub fn wait(mut self, bound: Duration) -> Run {
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            if self.started.elapsed() > bound {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the process ran longer than {bound:?}");
            }
            thread::sleep(Duration::from_millis(2));
        };
        let took = self.started.elapsed();
        // The pipes may stay open in a grandchild; do not wait for it forever.
        let (stdout, stderr) = self
            .output
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default();
        Run {
            status,
            stdout,
            stderr,
            took,
        }
    }
}

/// Runs `cmd` to the end, at most `bound`.
pub fn run(cmd: Command, bound: Duration) -> Run {
    Running::spawn(cmd).wait(bound)
}

/// Waits at most `bound` for `path` to exist.
pub fn wait_for_file(path: &Path, bound: Duration) {
    let start = now();
    while !path.exists() {
        assert!(
            start.elapsed() < bound,
            "{} did not appear within {bound:?}",
            path.display()
        );
        thread::sleep(Duration::from_millis(5));
    }
}

/// `sh -c SCRIPT` as the command of `lock`.
pub fn sh(script: &str) -> [&OsStr; 3] {
    [OsStr::new("sh"), OsStr::new("-c"), OsStr::new(script)]
}

/// The processes, zombies left out, whose environment holds
/// `SNAPLOCK_TEST_TREE=<token>`: a command run with that variable and all
/// it started, wherever they moved. Killed (SIGKILL, by pid) on drop, so a
/// failed test leaves none behind.
pub struct Tree {
    pub token: String,
}

impl Tree {
    pub fn new(what: &str) -> Tree {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        Tree {
            token: format!("{what}-{}-{n}", std::process::id()),
        }
    }

    /// Sets the variable on `cmd`.
    pub fn mark(&self, cmd: &mut Command) {
        cmd.env("SNAPLOCK_TEST_TREE", &self.token);
    }

    /// The live processes of the tree, with their command lines.
    pub fn live(&self) -> Vec<(i32, String)> {
        let want = format!("SNAPLOCK_TEST_TREE={}", self.token);
        let mut found = Vec::new();
        let Ok(entries) = fs::read_dir("/proc") else {
            return found;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            // A zombie's environment reads empty: it runs nothing.
            let Ok(env) = fs::read(entry.path().join("environ")) else {
                continue;
            };
            if env.split(|b| *b == 0).any(|v| v == want.as_bytes()) {
                let cmdline = fs::read(entry.path().join("cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                found.push((pid, cmdline));
            }
        }
        found
    }

    /// Waits at most `bound` until a live process's command line starts
    /// with `what`.
    pub fn wait_for(&self, what: &str, bound: Duration) {
        let start = now();
        while !self.live().iter().any(|(_, c)| c.starts_with(what)) {
            assert!(start.elapsed() < bound, "no {what:?} within {bound:?}");
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits at most `bound` until none of the tree is left; how long it
    /// took, or what is still there.
    pub fn wait_gone(&self, bound: Duration) -> Result<Duration, Vec<(i32, String)>> {
        let start = now();
        loop {
            let live = self.live();
            if live.is_empty() {
                return Ok(start.elapsed());
            }
            if start.elapsed() > bound {
                return Err(live);
            }
            thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        for (pid, _) in self.live() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}
