//! Peer links between agents: the handshake, refusals, one link per pair,
//! redialing. Real agents on loopback addresses (in-process, or `snaplockd`
//! processes where their logs are read), and raw TCP "peers" that speak the
//! handshake themselves, right or wrong.

#[path = "../common/mod.rs"]
mod common;
mod flood;
mod handshake;
mod links;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Client, TempDir, WAIT, deadline_in, loopback_addrs, now, snaplockd};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use snaplock_agent::{Agent, AgentConfig};
use snaplock_proto::wire::{Message, parse};

const SECRET: &str = "correct horse battery staple";

fn write_secret(dir: &TempDir) -> PathBuf {
    let path = dir.path().join("secret");
    std::fs::write(&path, format!("{SECRET}\n")).unwrap();
    path
}

fn agent_config(
    dir: &TempDir,
    name: &str,
    listen: SocketAddr,
    members: &[SocketAddr],
    secret: Option<&Path>,
) -> AgentConfig {
    let mut cfg = AgentConfig::new(dir.path().join(format!("{name}.sock")));
    cfg.core.server_name = name.to_owned();
    cfg.core.cluster.listen = Some(listen);
    cfg.core.cluster.neighbors = members.to_vec();
    cfg.secret_file = secret.map(Path::to_path_buf);
    cfg
}

fn hmac_hex(secret: &str, text: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(text.as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What `INFO` says, as a message.
fn info(socket: &Path) -> Message {
    Client::connect(socket).request("INFO")
}

/// Waits until the agent reports `connected` agents and is ready: a
/// fresh name can be granted, so also past the lock-delay of a first
/// epoch that not every member reported to (a cluster of four with three
/// up), some 7.5 s with the defaults.
fn wait_ready(socket: &Path, connected: u64) {
    const READY_WAIT: Duration = Duration::from_secs(30);
    let start = now();
    loop {
        let status = info(socket);
        if status.get_str("connected") == Some(&connected.to_string())
            && status.get_str("ready") == Some("true")
        {
            return;
        }
        assert!(
            start.elapsed() < READY_WAIT,
            "{}: not ready with {connected} connected in time: {status}",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Takes a lock and gives it back: the agent serves its clients. The wait
/// allows for a lock-delay: a cluster whose first epoch lacks a member's
/// report grants nothing for about 7.5 s with the default timings.
fn assert_serves_locks(socket: &Path, object: &str) {
    let mut client = Client::connect(socket);
    client.send(&format!(
        "LOCK object_name={object};pid={};duration=10;timeout={}",
        std::process::id(),
        deadline_in(20.0)
    ));
    let reply = client.recv_within(Duration::from_secs(25));
    assert_eq!(reply.command, "LOCKED", "{reply}");
    let reply = client.request(&format!(
        "UNLOCK object_name={object};pid={}",
        std::process::id()
    ));
    assert_eq!(reply.command, "UNLOCKED", "{reply}");
}

/// A raw TCP peer speaking lines, every read bounded.
struct Raw {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Raw {
    fn connect(addr: SocketAddr) -> Raw {
        Raw::from(TcpStream::connect(addr).unwrap())
    }

    fn from(stream: TcpStream) -> Raw {
        stream.set_write_timeout(Some(WAIT)).unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        Raw { stream, reader }
    }

    /// Sends bytes; the agent may already have closed (a reset is fine).
    fn send_bytes(&mut self, bytes: &[u8]) {
        match self.stream.write_all(bytes) {
            Ok(()) => {}
            Err(e) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) => {}
            Err(e) => panic!("write: {e}"),
        }
    }

    fn send(&mut self, line: &str) {
        self.send_bytes(format!("{line}\n").as_bytes());
    }

    /// The next line, `None` at EOF or reset; panics after `WAIT`.
    fn line(&mut self) -> Option<String> {
        self.reader.get_ref().set_read_timeout(Some(WAIT)).unwrap();
        let mut line = Vec::new();
        match self.reader.read_until(b'\n', &mut line) {
            Ok(0) => None,
            Ok(_) if line.last() == Some(&b'\n') => {
                line.pop();
                Some(String::from_utf8(line).unwrap())
            }
            Ok(_) => None,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => None,
            Err(e) => panic!("nothing from the agent within {WAIT:?}: {e}"),
        }
    }

    fn message(&mut self) -> Message {
        let line = self.line().expect("a line, not EOF");
        parse(line.as_bytes()).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }

    /// Asserts the agent closes the connection (lines before are returned).
    fn expect_closed(&mut self) -> Vec<String> {
        let start = now();
        let mut lines = Vec::new();
        while let Some(line) = self.line() {
            lines.push(line);
            assert!(start.elapsed() < WAIT, "still open: {lines:?}");
        }
        lines
    }

    /// Dialer's side up to the `ACCEPT`: sends `CONNECT`, returns the answer.
    fn connect_as(&mut self, cluster: &str, name: &str, listen: SocketAddr, ch: &str) -> Message {
        self.send(&format!(
            "CONNECT challenge={ch};cluster={cluster};listen={listen};name={name};version=1"
        ));
        self.message()
    }
}

const CH: &str = "0123456789abcdef0123456789abcdef";

/// Three agents that make a quorum of a four-member cluster whose fourth
/// member (`x`, the largest address) is a slot for raw peers: nobody
/// listens there, so the agents' dials to it fail, and a raw peer may claim
/// it. The three elect their leaders and serve locks without it.
struct Trio {
    agents: Vec<Agent>,
    addrs: Vec<SocketAddr>,
    x: SocketAddr,
    _dir: TempDir,
}

impl Trio {
    fn start(tag: &str) -> Trio {
        let dir = TempDir::new(tag);
        let secret = write_secret(&dir);
        let members = loopback_addrs(4);
        let names = ["alpha", "beta", "gamma"];
        let agents: Vec<Agent> = (0..3)
            .map(|i| {
                let cfg = agent_config(&dir, names[i], members[i], &members, Some(&secret));
                snaplock_agent::spawn(cfg).expect("the agent starts")
            })
            .collect();
        for agent in &agents {
            wait_ready(agent.socket(), 3);
        }
        Trio {
            agents,
            addrs: members[..3].to_vec(),
            x: members[3],
            _dir: dir,
        }
    }

    fn alpha(&self) -> (&Path, SocketAddr) {
        (self.agents[0].socket(), self.addrs[0])
    }
}

/// How many agents `INFO` says are connected.
fn connected(socket: &Path) -> String {
    info(socket).get_str("connected").unwrap_or("?").to_owned()
}

/// A fake member `p` with a listener, and one real agent of a cluster of
/// two with it (no secret: loopback only, proofs with the empty key).
struct Duo {
    agent: Agent,
    listener: TcpListener,
    a: SocketAddr,
    p: SocketAddr,
    _dir: TempDir,
}

impl Duo {
    /// `agent_smaller`: whether the agent's address is the smaller one.
    fn start(tag: &str, agent_smaller: bool) -> Duo {
        let dir = TempDir::new(tag);
        let members = loopback_addrs(2);
        let (a, p) = if agent_smaller {
            (members[0], members[1])
        } else {
            (members[1], members[0])
        };
        let listener = TcpListener::bind(p).unwrap();
        let agent = snaplock_agent::spawn(agent_config(&dir, "alpha", a, &members, None)).unwrap();
        Duo {
            agent,
            listener,
            a,
            p,
            _dir: dir,
        }
    }

    /// The agent's next dial, and its `CONNECT`.
    fn next_dial(&self) -> (Raw, Message) {
        let (stream, _) = self.listener.accept().unwrap();
        let mut raw = Raw::from(stream);
        let connect = raw.message();
        assert_eq!(connect.command, "CONNECT", "{connect}");
        assert_eq!(connect.get_str("listen"), Some(self.a.to_string().as_str()));
        assert_eq!(connect.get_str("cluster"), Some("snaplock"));
        assert_eq!(connect.get_str("version"), Some("1"));
        (raw, connect)
    }

    /// Answers a dial as the acceptor `papa`; returns the agent's PROOF.
    fn accept_dial(&self, raw: &mut Raw, connect: &Message) -> Message {
        let ch = connect.get_str("challenge").unwrap();
        let proof = hmac_hex("", &format!("accept\n{ch}\npapa\nalpha"));
        raw.send(&format!(
            "ACCEPT challenge={CH};listen={};name=papa;proof={proof}",
            self.p
        ));
        let reply = raw.message();
        assert_eq!(reply.command, "PROOF", "{reply}");
        assert_eq!(
            reply.get_str("proof"),
            Some(hmac_hex("", &format!("connect\n{CH}\nalpha\npapa")).as_str())
        );
        reply
    }
}

fn expect_core_hello(raw: &mut Raw) {
    let hello = raw.message();
    assert_eq!(
        hello.command, "LOCKSTARTED",
        "the core knows the link: {hello}"
    );
}

/// `snaplockd` as a child whose standard error is collected as it comes.
struct Logged {
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Logged {
    fn start(args: &[String]) -> Logged {
        let mut child = snaplockd()
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("snaplockd starts");
        let mut stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Logged { child, log }
    }

    /// `snaplockd` as member `name` of `members`, listening on `listen`,
    /// its files in `dir`; with the path of its client socket.
    fn member(
        dir: &TempDir,
        name: &str,
        listen: SocketAddr,
        members: &[SocketAddr],
        level: &str,
    ) -> (Logged, PathBuf) {
        let socket = dir.path().join(format!("{name}.sock"));
        let neighbors: Vec<String> = members.iter().map(ToString::to_string).collect();
        let args: Vec<String> = [
            "--socket",
            socket.to_str().unwrap(),
            "--state-dir",
            dir.path().to_str().unwrap(),
            "-n",
            name,
            "--listen",
            &listen.to_string(),
            "--neighbors",
            &neighbors.join(","),
            "--log-level",
            level,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        (Logged::start(&args), socket)
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
