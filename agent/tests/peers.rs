//! Peer links between agents: the handshake, refusals, one link per pair,
//! redialing. Real agents on loopback addresses (in-process, or `snaplockd`
//! processes where their logs are read), and raw TCP "peers" that speak the
//! handshake themselves, right or wrong.

mod common;

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

#[test]
fn two_agents_with_a_shared_secret_link_up_and_grant_locks() {
    let dir = TempDir::new("pair");
    let secret = write_secret(&dir);
    let members = loopback_addrs(2);
    let a = snaplock_agent::spawn(agent_config(
        &dir,
        "alpha",
        members[0],
        &members,
        Some(&secret),
    ))
    .unwrap();
    let b = snaplock_agent::spawn(agent_config(
        &dir,
        "beta",
        members[1],
        &members,
        Some(&secret),
    ))
    .unwrap();
    wait_ready(a.socket(), 2);
    wait_ready(b.socket(), 2);
    assert_eq!(info(a.socket()).get_str("cluster_size"), Some("2"));
    assert_serves_locks(a.socket(), "pair_a");
    assert_serves_locks(b.socket(), "pair_b");
    a.stop().unwrap();
    b.stop().unwrap();
}

#[test]
fn only_a_dialer_that_proves_the_secret_links_up() {
    let trio = Trio::start("secret");
    let (socket, addr) = trio.alpha();
    let mut raw = Raw::connect(addr);
    let accept = raw.connect_as("snaplock", "xray", trio.x, CH);
    assert_eq!(accept.command, "ACCEPT", "{accept}");
    assert_eq!(accept.get_str("name"), Some("alpha"));
    assert_eq!(accept.get_str("listen"), Some(addr.to_string().as_str()));
    // The acceptor proves it knows the secret, as the handshake documents.
    assert_eq!(
        accept.get_str("proof"),
        Some(hmac_hex(SECRET, &format!("accept\n{CH}\nalpha\nxray")).as_str())
    );
    let their = accept.get_str("challenge").unwrap().to_owned();
    assert_eq!(their.len(), 32);
    let wrong = hmac_hex("not the secret", &format!("connect\n{their}\nxray\nalpha"));
    raw.send(&format!("PROOF proof={wrong}"));
    let refuse = raw.message();
    assert_eq!(refuse.command, "REFUSE", "{refuse}");
    assert!(
        refuse
            .get_str("reason")
            .unwrap()
            .contains("authentication failed"),
        "{refuse}"
    );
    assert_eq!(raw.expect_closed(), Vec::<String>::new());

    let mut raw = Raw::connect(addr);
    let accept = raw.connect_as("snaplock", "xray", trio.x, CH);
    assert_eq!(accept.command, "ACCEPT", "{accept}");
    let their = accept.get_str("challenge").unwrap().to_owned();
    let proof = hmac_hex(SECRET, &format!("connect\n{their}\nxray\nalpha"));
    raw.send(&format!("PROOF proof={proof}"));
    // The core was told the link is up: it introduces itself.
    let started = raw.message();
    assert_eq!(started.command, "LOCKSTARTED", "{started}");
    drop(raw);
    assert_serves_locks(socket, "after_secrets");
    wait_ready(socket, 3);
}

#[test]
fn connects_of_another_cluster_version_member_or_taken_name_are_refused() {
    let trio = Trio::start("refusals");
    let (socket, addr) = trio.alpha();
    let stranger = loopback_addrs(1)[0];
    // A connection that says nothing is closed after the handshake timeout.
    let quiet_since = now();
    let mut quiet = Raw::connect(addr);
    for (line, wanted) in [
        (
            format!(
                "CONNECT challenge={CH};cluster=other;listen={};name=xray;version=1",
                trio.x
            ),
            "cluster \"other\" is not this agent's cluster",
        ),
        (
            format!(
                "CONNECT challenge={CH};cluster=snaplock;listen={};name=xray;version=2",
                trio.x
            ),
            "version \"2\" is not supported",
        ),
        (
            format!(
                "CONNECT challenge={CH};cluster=snaplock;listen={stranger};name=xray;version=1"
            ),
            "is not a member of this cluster",
        ),
        (
            format!(
                "CONNECT challenge={CH};cluster=snaplock;listen={};name=beta;version=1",
                trio.x
            ),
            "server name beta is already connected",
        ),
        (
            format!(
                "CONNECT challenge={CH};cluster=snaplock;listen={};name=alpha;version=1",
                trio.x
            ),
            "server name alpha is this agent's own",
        ),
        (
            format!(
                "CONNECT challenge=12;cluster=snaplock;listen={};name=xray;version=1",
                trio.x
            ),
            "challenge must be 32 hexadecimal digits",
        ),
        (
            "LOCK object_name=x".to_owned(),
            "expected CONNECT, got LOCK",
        ),
        ("CONNECT".to_owned(), "CONNECT without version"),
    ] {
        let mut raw = Raw::connect(addr);
        raw.send(&line);
        let refuse = raw.message();
        assert_eq!(refuse.command, "REFUSE", "{line}: {refuse}");
        let reason = refuse.get_str("reason").unwrap();
        assert!(reason.contains(wanted), "{line}: {reason}");
        assert_eq!(raw.expect_closed(), Vec::<String>::new(), "{line}");
    }
    assert_eq!(quiet.expect_closed(), Vec::<String>::new());
    let waited = quiet_since.elapsed();
    assert!(
        waited >= Duration::from_millis(4500) && waited < Duration::from_secs(8),
        "the silent connection was closed after {waited:?}"
    );
    assert_serves_locks(socket, "after_refusals");
    wait_ready(socket, 3);
}

#[test]
fn garbage_or_an_overlong_line_closes_only_that_link() {
    let trio = Trio::start("garbage");
    let (socket, addr) = trio.alpha();
    // Before the handshake.
    let mut raw = Raw::connect(addr);
    raw.send_bytes(b"\x00\x01 not a line of the grammar\n");
    assert_eq!(raw.expect_closed(), Vec::<String>::new());
    let mut raw = Raw::connect(addr);
    raw.send_bytes(&vec![b'A'; (1 << 20) + 64]);
    assert_eq!(raw.expect_closed(), Vec::<String>::new());
    // After it: the PROOF and the garbage arrive together.
    for garbage in [
        b"lower case is no command\n".to_vec(),
        [
            b"LOCKPING serial=".as_slice(),
            &vec![b'9'; (1 << 20) + 64],
            b"\n",
        ]
        .concat(),
    ] {
        let mut raw = Raw::connect(addr);
        let accept = raw.connect_as("snaplock", "xray", trio.x, CH);
        let their = accept.get_str("challenge").unwrap().to_owned();
        let proof = hmac_hex(SECRET, &format!("connect\n{their}\nxray\nalpha"));
        raw.send_bytes(&[format!("PROOF proof={proof}\n").as_bytes(), &garbage].concat());
        let lines = raw.expect_closed();
        assert!(
            lines.iter().all(|l| l.starts_with("LOCK")),
            "only the core's own lines before the close: {lines:?}"
        );
    }
    assert_serves_locks(socket, "after_garbage");
    wait_ready(socket, 3);
}

/// How many agents `INFO` says are connected.
fn connected(socket: &Path) -> String {
    info(socket).get_str("connected").unwrap_or("?").to_owned()
}

#[test]
fn a_member_that_says_a_last_line_and_closes_is_let_go_at_once() {
    // The last bytes and the close arrive together: the agent reads the
    // bytes, and must not stop there (the socket looks empty after a short
    // read, but the close was reported with the bytes and is not reported
    // again).
    let trio = Trio::start("lastline");
    let (socket, addr) = trio.alpha();
    for round in 0..20 {
        // The previous round's xray may still be closing: its name is
        // taken until then (REFUSE), so try again, bounded.
        let start = now();
        let (mut raw, accept) = loop {
            let mut raw = Raw::connect(addr);
            let accept = raw.connect_as("snaplock", "xray", trio.x, CH);
            if accept.get_str("challenge").is_some() {
                break (raw, accept);
            }
            assert!(start.elapsed() < WAIT, "round {round}: {accept}");
            std::thread::sleep(Duration::from_millis(20));
        };
        let their = accept.get_str("challenge").unwrap().to_owned();
        let proof = hmac_hex(SECRET, &format!("connect\n{their}\nxray\nalpha"));
        raw.send(&format!("PROOF proof={proof}"));
        expect_core_hello(&mut raw);
        raw.send(&format!(
            "LOCKSTARTED lockid=99|{:010}|{}|1|xray;server_name=xray;starttime=1;wall=1;epoch=0",
            round, trio.x
        ));
        let start = now();
        while connected(socket) != "4" {
            assert!(start.elapsed() < WAIT, "round {round}: xray never counted");
            std::thread::sleep(Duration::from_millis(5));
        }
        // Empty lines (skipped, never answered) for several reads, the last
        // one short, then the close.
        raw.send_bytes(&vec![b'\n'; 300_000]);
        raw.stream.shutdown(std::net::Shutdown::Write).unwrap();
        // Well within the 2 s a silent link is given (peer_timeout).
        let start = now();
        while connected(socket) != "3" {
            assert!(
                start.elapsed() < Duration::from_millis(1000),
                "round {round}: the closed link is still counted"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    assert_serves_locks(socket, "after_last_lines");
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

#[test]
fn when_both_dial_at_once_the_link_dialed_by_the_smaller_address_is_kept() {
    for agent_smaller in [true, false] {
        let duo = Duo::start("both", agent_smaller);
        let (mut dialed, connect) = duo.next_dial();
        // The fake member dials the agent too, while the agent's own dial
        // waits for its ACCEPT.
        let mut dialing = Raw::connect(duo.a);
        let answer = dialing.connect_as("snaplock", "papa", duo.p, CH);
        if agent_smaller {
            assert_eq!(answer.command, "REFUSE", "{answer}");
            assert!(
                answer
                    .get_str("reason")
                    .unwrap()
                    .starts_with("duplicate link"),
                "{answer}"
            );
            dialing.expect_closed();
            duo.accept_dial(&mut dialed, &connect);
            expect_core_hello(&mut dialed);
        } else {
            assert_eq!(answer.command, "ACCEPT", "{answer}");
            assert_eq!(
                dialed.expect_closed(),
                Vec::<String>::new(),
                "the agent drops its own dial"
            );
            let their = answer.get_str("challenge").unwrap();
            let proof = hmac_hex("", &format!("connect\n{their}\npapa\nalpha"));
            dialing.send(&format!("PROOF proof={proof}"));
            expect_core_hello(&mut dialing);
        }
        duo.agent.stop().unwrap();
    }
}

#[test]
fn a_dialed_member_with_a_wrong_proof_is_dropped_without_a_proof() {
    let duo = Duo::start("wrongaccept", true);
    let (mut raw, _) = duo.next_dial();
    let forged = hmac_hex("guess", &format!("accept\n{CH}\npapa\nalpha"));
    raw.send(&format!(
        "ACCEPT challenge={CH};listen={};name=papa;proof={forged}",
        duo.p
    ));
    assert_eq!(raw.expect_closed(), Vec::<String>::new());
    // It dials again (and is still willing to link up).
    let (mut raw, connect) = duo.next_dial();
    duo.accept_dial(&mut raw, &connect);
    expect_core_hello(&mut raw);
}

#[test]
fn a_member_that_vanishes_is_redialed_at_once_then_with_growing_backoff() {
    let duo = Duo::start("redial", true);
    let (mut raw, connect) = duo.next_dial();
    duo.accept_dial(&mut raw, &connect);
    expect_core_hello(&mut raw);
    let vanished = now();
    drop(raw);
    let (_, _) = duo.next_dial();
    let first = vanished.elapsed();
    assert!(
        first < Duration::from_millis(500),
        "a link that was up is redialed at once, not after {first:?}"
    );
    // Every later attempt fails at once (accepted, then closed unanswered).
    let mut times = vec![now()];
    for _ in 0..6 {
        let (stream, _) = duo.listener.accept().unwrap();
        times.push(now());
        drop(stream);
    }
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps[0] < Duration::from_millis(400), "{gaps:?}");
    assert!(
        gaps[4] > Duration::from_millis(300) && gaps[4] > gaps[0] * 2,
        "backoff grows: {gaps:?}"
    );
    assert!(
        gaps.iter().all(|g| *g < Duration::from_millis(2600)),
        "backoff stops at 2 s: {gaps:?}"
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

#[test]
fn two_agents_started_together_keep_exactly_one_link() {
    let dir = TempDir::new("together");
    let members = loopback_addrs(2);
    let list = format!("{},{}", members[0], members[1]);
    let start = |name: &str, listen: SocketAddr| {
        let socket = dir.path().join(format!("{name}.sock"));
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
            &list,
            "--log-level",
            "debug",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        (Logged::start(&args), socket)
    };
    let (a, a_socket) = start("alpha", members[0]);
    let (b, b_socket) = start("beta", members[1]);
    let begin = now();
    while !(a_socket.exists() && b_socket.exists()) {
        assert!(begin.elapsed() < WAIT, "the agents did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    wait_ready(&a_socket, 2);
    wait_ready(&b_socket, 2);
    // Long enough for a second link, or a flapping one, to show.
    std::thread::sleep(Duration::from_millis(1500));
    wait_ready(&a_socket, 2);
    for (name, node) in [("alpha", &a), ("beta", &b)] {
        let log = node.log();
        assert_eq!(log.matches("): link up (").count(), 1, "{name}:\n{log}");
        assert!(!log.contains("is down"), "{name}:\n{log}");
        assert!(
            log.contains("the cluster is unauthenticated"),
            "{name} warns it has no secret:\n{log}"
        );
    }
}

#[test]
fn a_flood_of_half_open_garbage_and_refused_connections_leaves_the_log_small() {
    let dir = TempDir::new("flood");
    let members = loopback_addrs(2);
    let socket = dir.path().join("alpha.sock");
    let args: Vec<String> = [
        "--socket",
        socket.to_str().unwrap(),
        "--state-dir",
        dir.path().to_str().unwrap(),
        "-n",
        "alpha",
        "--listen",
        &members[0].to_string(),
        "--neighbors",
        &format!("{},{}", members[0], members[1]),
        "--log-level",
        "info",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let agent = Logged::start(&args);
    let begin = now();
    while !socket.exists() || TcpStream::connect(members[0]).is_err() {
        assert!(begin.elapsed() < WAIT, "the agent did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    let before = agent.log().lines().count();
    // Half-open connections that fill the handshake slots and wait out
    // their timeout, lines of garbage, handshakes of another cluster, and
    // connections closed at once: each used to log a line.
    let mut half_open = Vec::new();
    let flood_start = now();
    let mut made = 0;
    while made < 1500 && flood_start.elapsed() < Duration::from_secs(3) {
        made += 1;
        // Bounded: a full accept queue makes a connect wait for retries.
        let Ok(stream) = TcpStream::connect_timeout(&members[0], Duration::from_millis(500)) else {
            continue;
        };
        // Closed with a reset: the flood leaves no TIME_WAIT behind.
        socket2::SockRef::from(&stream)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        let mut raw = Raw::from(stream);
        match made % 4 {
            0 if half_open.len() < 100 => half_open.push(raw),
            1 => raw.send_bytes(b"\x00\x01 garbage\n"),
            2 => raw.send(&format!(
                "CONNECT challenge={CH};cluster=other;listen={};name=xray;version=1",
                members[1]
            )),
            _ => {}
        }
    }
    // The half-open ones time out after 5 s.
    while flood_start.elapsed() < Duration::from_millis(5800) {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(half_open);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        info(&socket).command,
        "STATUS",
        "the agent serves its clients"
    );
    let log = agent.log();
    let flood_lines = log.lines().count() - before;
    eprintln!(
        "{made} connections in {:?}: {flood_lines} log lines, {} bytes in all",
        flood_start.elapsed(),
        log.len()
    );
    assert!(
        log.contains("peer connection from") || log.contains("refused"),
        "the flood was seen:\n{log}"
    );
    assert!(
        flood_lines <= 12,
        "{flood_lines} lines for {made} connections; the first ones:\n{}",
        log.lines().take(40).collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn a_connection_on_127_0_0_1_with_the_agents_port_does_not_keep_it_from_listening() {
    // The race the tests' addresses avoid: between finding a port free and
    // the agent's bind, a connection of the machine may be given that port
    // as its ephemeral one, on 127.0.0.1. On an address of its own, the
    // agent binds all the same.
    let dir = TempDir::new("squat");
    let members = loopback_addrs(2);
    let port = members[0].port();
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let squatter =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let taken: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // Bound as the kernel binds a connection's ephemeral port (another
    // socket of the machine may hold it already: that is the race too).
    let _connection = squatter.bind(&taken.into()).ok().map(|()| {
        squatter
            .connect(&server.local_addr().unwrap().into())
            .unwrap();
        squatter
    });
    let agent = snaplock_agent::spawn(agent_config(&dir, "alpha", members[0], &members, None))
        .expect("the agent listens on its own address");
    assert_eq!(info(agent.socket()).command, "STATUS");
    agent.stop().unwrap();
}
