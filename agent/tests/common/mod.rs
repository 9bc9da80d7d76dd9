//! Helpers shared by the agent's integration tests: temporary directories,
//! an in-process agent, a line client with bounded waits, the `snaplockd`
//! binary as a child process.

#![allow(dead_code)] // each test binary uses its own subset

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use snaplock_agent::{Agent, AgentConfig};
use snaplock_proto::wire::{Message, parse};

/// How long any single wait in these tests may take before it fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// The tests' clock: they measure real delays of a real agent.
#[allow(clippy::disallowed_methods)]
pub fn now() -> Instant {
    Instant::now()
}

/// The wall clock, in Unix seconds, for `timeout=` dates.
#[allow(clippy::disallowed_methods)]
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// `timeout=` this many seconds from now.
pub fn deadline_in(secs: f64) -> String {
    format!("{:.3}", unix_now() + secs)
}

/// A directory removed (with what is in it) when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        // Short: Unix socket paths are limited to 107 bytes.
        let path = std::env::temp_dir().join(format!("sla-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn socket(&self) -> PathBuf {
        self.0.join("s.sock")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `n` addresses for agents to listen on, in increasing order: ports the
/// kernel found free on a loopback address of their own.
///
/// A port found free and released is the agent's only if no other socket
/// binds it first. On 127.0.0.1, any connection of the machine may be
/// given it as its ephemeral port, and under load one was. So each call
/// takes another address of 127.0.0.0/8, made of this process's id and a
/// counter (never 127.0.0.1, whose address connections to the others
/// come from): only a socket bound to that very address, or to all of
/// them, could take the port, and test binaries running at once differ
/// by their process ids.
pub fn loopback_addrs(n: usize) -> Vec<SocketAddr> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let count = NEXT.fetch_add(1, Ordering::SeqCst);
    let pid = std::process::id();
    let ip = Ipv4Addr::new(127, (pid >> 8) as u8, pid as u8, 2 + (count % 250) as u8);
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind((ip, 0)).expect("a free port on a loopback address"))
        .collect();
    let mut addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
    addrs.sort();
    addrs
}

/// An in-process agent on a fresh socket; `tune` adjusts its configuration.
pub fn start(tag: &str, tune: impl FnOnce(&mut AgentConfig)) -> (TempDir, Agent) {
    let dir = TempDir::new(tag);
    let mut cfg = AgentConfig::new(dir.socket());
    tune(&mut cfg);
    let agent = snaplock_agent::spawn(cfg).expect("the agent starts");
    (dir, agent)
}

/// A client speaking lines, every read bounded by a timeout.
pub struct Client {
    pub stream: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Client {
    pub fn connect(path: &Path) -> Client {
        let stream =
            UnixStream::connect(path).unwrap_or_else(|e| panic!("connect {}: {e}", path.display()));
        Client::from_stream(stream)
    }

    /// A client on a connected stream.
    pub fn from_stream(stream: UnixStream) -> Client {
        stream.set_read_timeout(Some(WAIT)).unwrap();
        stream.set_write_timeout(Some(WAIT)).unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        Client { stream, reader }
    }

    pub fn send(&mut self, line: &str) {
        self.stream.write_all(line.as_bytes()).unwrap();
        self.stream.write_all(b"\n").unwrap();
    }

    /// The next line as text, `None` at EOF; panics when nothing comes
    /// within `wait`.
    pub fn line_within(&mut self, wait: Duration) -> Option<String> {
        self.raw_line_within(wait)
            .map(|l| String::from_utf8_lossy(&l).into_owned())
    }

    /// The next line's bytes (replies echo what clients sent, bytes and all).
    pub fn raw_line_within(&mut self, wait: Duration) -> Option<Vec<u8>> {
        self.reader.get_ref().set_read_timeout(Some(wait)).unwrap();
        let mut line = Vec::new();
        match self.reader.read_until(b'\n', &mut line) {
            Ok(0) => None,
            Ok(_) if line.last() == Some(&b'\n') => {
                line.pop();
                Some(line)
            }
            Ok(_) => panic!(
                "the connection ended inside a line: {:?}",
                String::from_utf8_lossy(&line)
            ),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => None,
            Err(e) => panic!("no reply within {wait:?}: {e}"),
        }
    }

    /// The next reply, parsed; panics at EOF or after [`WAIT`].
    pub fn recv(&mut self) -> Message {
        self.recv_within(WAIT)
    }

    pub fn recv_within(&mut self, wait: Duration) -> Message {
        let line = self.raw_line_within(wait).expect("a reply, not EOF");
        parse(&line).unwrap_or_else(|e| {
            panic!("unparsable reply {:?}: {e}", String::from_utf8_lossy(&line))
        })
    }

    /// Sends one request and returns the one reply.
    pub fn request(&mut self, line: &str) -> Message {
        self.send(line);
        self.recv()
    }

    /// Asserts nothing arrives (no reply, no EOF) for `d`.
    pub fn assert_silent_for(&mut self, d: Duration) {
        self.reader.get_ref().set_read_timeout(Some(d)).unwrap();
        let mut line = Vec::new();
        match self.reader.read_until(b'\n', &mut line) {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Ok(0) => panic!("the connection was closed"),
            other => panic!("expected silence, got {other:?}: {line:?}"),
        }
    }

    /// Asserts the agent closes the connection within [`WAIT`] (lines before
    /// the close are returned).
    pub fn expect_eof(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        let start = now();
        while let Some(line) = self.line_within(WAIT) {
            lines.push(line);
            assert!(start.elapsed() < WAIT, "still open after {WAIT:?}");
        }
        lines
    }
}

/// A parameter as text; panics when absent.
pub fn param<'m>(msg: &'m Message, name: &str) -> &'m str {
    msg.get_str(name)
        .unwrap_or_else(|| panic!("no {name} in {msg}"))
}

/// Asserts the command and that every `name=value` pair is there.
pub fn assert_reply(msg: &Message, command: &str, params: &[(&str, &str)]) {
    assert_eq!(msg.command, command, "{msg}");
    for (name, value) in params {
        assert_eq!(msg.get_str(name), Some(*value), "{name} in {msg}");
    }
}

/// `fence=` of a LOCKED.
pub fn fence(msg: &Message) -> u64 {
    assert_eq!(msg.command, "LOCKED", "{msg}");
    param(msg, "fence").parse().unwrap()
}

/// The `snaplockd` binary as a child, killed and reaped when dropped.
pub struct Daemon {
    pub child: Option<Child>,
    pub socket: PathBuf,
}

impl Daemon {
    /// Starts `snaplockd --socket <socket> <args>` with `RUST_LOG` unset and
    /// waits until the socket answers.
    pub fn start(socket: &Path, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let mut cmd = snaplockd();
        cmd.arg("--socket").arg(socket).args(args);
        if !args.contains(&"-n") {
            // A server name of its own: the host's name may not make a valid one.
            cmd.args(["-n", "test_agent"]);
        }
        // Its record beside its socket, in the test's own directory: agents
        // of one name sharing a record refuse to start (and would race).
        if let Some(dir) = socket.parent() {
            cmd.env("XDG_STATE_HOME", dir.join("state"));
        }
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("snaplockd starts");
        let daemon = Daemon {
            child: Some(child),
            socket: socket.to_owned(),
        };
        let start = now();
        while UnixStream::connect(socket).is_err() {
            assert!(
                start.elapsed() < WAIT,
                "snaplockd did not listen on {} in time",
                socket.display()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        daemon
    }

    pub fn pid(&self) -> nix::unistd::Pid {
        nix::unistd::Pid::from_raw(self.child.as_ref().unwrap().id() as i32)
    }

    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(self.pid(), sig).unwrap();
    }

    /// Waits (bounded) for the exit; returns the status code and stderr.
    pub fn wait(mut self) -> (Option<i32>, String) {
        let child = self.child.take().unwrap();
        wait_bounded(child)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The binary under test, with a clean environment for its socket rule.
pub fn snaplockd() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_snaplockd"));
    cmd.env_remove("RUST_LOG")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("SNAPLOCK_SOCKET")
        .env_remove("STATE_DIRECTORY");
    // Records of epoch and fences out of the tester's home (each test that
    // runs a cluster gives its agents their own --state-dir).
    cmd.env(
        "XDG_STATE_HOME",
        std::env::temp_dir().join("snaplock-tests-state"),
    );
    cmd
}

/// Waits at most [`WAIT`] for `child` to exit (killing it after), and
/// returns its exit code and stderr.
pub fn wait_bounded(mut child: Child) -> (Option<i32>, String) {
    let start = now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > WAIT {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "snaplockd did not exit in time; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Raises this process's open-file soft limit to `need`, failing clearly
/// when the hard limit does not allow it.
pub fn ensure_fd_limit(need: u64) {
    let (soft, hard) = snaplock_agent::listen::raise_nofile_limit().expect("getrlimit/setrlimit");
    assert!(
        hard >= need,
        "this test needs {need} open files but the hard RLIMIT_NOFILE is {hard} (soft was {soft}); \
         raise it (ulimit -Hn) to run it"
    );
}

/// `snaplock-cli`, built for this run ([`workspace_binary`]).
pub fn cli_binary() -> PathBuf {
    static CLI: OnceLock<PathBuf> = OnceLock::new();
    CLI.get_or_init(|| workspace_binary("snaplock-cli", "snaplock-cli"))
        .clone()
}

/// The binary `bin` of the workspace's package `package`, built now (once
/// per caller: see [`cli_binary`]).
pub fn workspace_binary(package: &str, bin: &str) -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    workspace_binary::build(
        Path::new(env!("CARGO_BIN_EXE_snaplockd")),
        workspace,
        package,
        bin,
    )
}

#[path = "../../../tests/support/workspace_binary.rs"]
mod workspace_binary;
