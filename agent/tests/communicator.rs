//! The original snaplock's clients, unchanged: a real `snaplockd` with
//! `--communicator-listen`, and TCP clients playing the conversations a
//! `snap::snap_lock` client and `snaplock --list` had with snapcommunicator
//! (snaplock reference §2, §10, §13; the agent's server name is
//! `test_agent`).

mod common;

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use snaplock_proto::wire::{Message, parse};

use common::{
    Client, Daemon, TempDir, WAIT, assert_reply, deadline_in, loopback_addrs, now, param,
    snaplockd, unix_now,
};

/// A TCP client of the compatibility session, every read bounded.
struct Tcp {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Tcp {
    /// Connects, retrying while the agent starts.
    fn connect(addr: SocketAddr) -> Tcp {
        let start = now();
        let stream = loop {
            match TcpStream::connect(addr) {
                Ok(s) => break s,
                Err(e) => {
                    assert!(start.elapsed() < WAIT, "connect {addr}: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        };
        stream.set_read_timeout(Some(WAIT)).unwrap();
        stream.set_write_timeout(Some(WAIT)).unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        Tcp { stream, reader }
    }

    fn send(&mut self, line: &str) {
        self.stream.write_all(line.as_bytes()).unwrap();
        self.stream.write_all(b"\n").unwrap();
    }

    /// The next line, `None` at EOF.
    fn line(&mut self) -> Option<String> {
        let mut line = Vec::new();
        match self.reader.read_until(b'\n', &mut line) {
            Ok(0) => None,
            Ok(_) => {
                assert_eq!(line.pop(), Some(b'\n'), "a whole line");
                Some(String::from_utf8(line).unwrap())
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => None,
            Err(e) => panic!("no line within {WAIT:?}: {e}"),
        }
    }

    fn expect_line(&mut self) -> String {
        self.line().expect("a line, not EOF")
    }

    fn recv(&mut self) -> Message {
        let line = self.expect_line();
        parse(line.as_bytes()).unwrap_or_else(|e| panic!("unparsable {line:?}: {e}"))
    }

    /// `REGISTER`, then what a `snap_lock` client does: HELP is answered
    /// with its COMMANDS, and READY ends the registration.
    fn register(&mut self, service: &str) {
        self.send(&format!("REGISTER service={service};version=1"));
        assert_eq!(self.expect_line(), "HELP");
        self.send(
            "COMMANDS list=LOCKED,LOCKFAILED,UNLOCKED,HELP,ALIVE,LOG,QUITTING,READY,STOP,UNKNOWN",
        );
        assert_eq!(self.expect_line(), "READY");
    }

    /// Reads until EOF (bounded); returns the lines before it.
    fn expect_eof(&mut self) -> Vec<String> {
        let start = now();
        let mut lines = Vec::new();
        while let Some(line) = self.line() {
            lines.push(line);
            assert!(start.elapsed() < WAIT, "still open: {lines:?}");
        }
        lines
    }
}

/// An agent named `test_agent` with the session on a free port.
fn agent(tag: &str, extra: &[&str]) -> (TempDir, Daemon, SocketAddr) {
    let dir = TempDir::new(tag);
    let addr = loopback_addrs(1)[0];
    let addr_text = addr.to_string();
    let mut args = vec!["--communicator-listen", &addr_text];
    args.extend_from_slice(extra);
    let daemon = Daemon::start(&dir.socket(), &args, &[]);
    (dir, daemon, addr)
}

/// Asserts the reply comes from snaplock and is addressed to `service`.
fn addressed(msg: &Message, service: &str, command: &str) {
    assert_eq!(
        (
            msg.sent_from_server.as_str(),
            msg.sent_from_service.as_str(),
            msg.server.as_str(),
            msg.service.as_str(),
            msg.command.as_str()
        ),
        ("test_agent", "snaplock", "test_agent", service, command),
        "{msg}"
    );
}

fn whole_seconds(msg: &Message, name: &str) -> u64 {
    let v = param(msg, name);
    v.parse()
        .unwrap_or_else(|_| panic!("{name}={v} is not integer seconds in {msg}"))
}

#[test]
fn the_snap_lock_conversation_locks_and_unlocks_and_a_socket_client_sees_the_lock() {
    let (dir, _daemon, addr) = agent("conv", &[]);
    let mut lock = Tcp::connect(addr);
    lock.register("lock_4321_1");
    let asked = unix_now();
    lock.send(&format!(
        "snaplock/LOCK duration=10;object_name=test;pid=4321;timeout={}",
        asked as u64 + 5
    ));
    let locked = lock.recv();
    addressed(&locked, "lock_4321_1", "LOCKED");
    assert_reply(
        &locked,
        "LOCKED",
        &[("object_name", "test"), ("key", "test_agent/4321")],
    );
    // duration=10 lasts 60 s, as in the original.
    let until = whole_seconds(&locked, "timeout_date") as f64;
    assert!(
        (asked + 58.0..asked + 62.0).contains(&until),
        "timeout_date {until} for a LOCK at {asked}"
    );

    let mut local = Client::connect(&dir.socket());
    assert_reply(
        &local.request("LOCK object_name=test;try=true"),
        "LOCKFAILED",
        &[("error", "busy")],
    );

    lock.send("snaplock/UNLOCK object_name=test;pid=4321");
    let unlocked = lock.recv();
    addressed(&unlocked, "lock_4321_1", "UNLOCKED");
    assert_eq!(unlocked.get_str("object_name"), Some("test"));
    assert_eq!(unlocked.get("error"), None, "{unlocked}");
    assert_reply(
        &local.request("LOCK object_name=test;try=true"),
        "LOCKED",
        &[],
    );

    lock.send("snaplock/ALIVE serial=42;timestamp=1700000000");
    let alive = lock.recv();
    addressed(&alive, "lock_4321_1", "ABSOLUTELY");
    assert_reply(
        &alive,
        "ABSOLUTELY",
        &[("serial", "42"), ("timestamp", "1700000000")],
    );
    whole_seconds(&alive, "reply_timestamp");

    // `snaplock --list`: its own registration, both prefixes.
    let mut tool = Tcp::connect(addr);
    tool.register("snaplocktool");
    tool.send(
        "<test_agent:snaplocktool test_agent:snaplock/LISTTICKETS cache=no;transmission_report=failure",
    );
    let list = tool.recv();
    addressed(&list, "snaplocktool", "TICKETLIST");
    let text = param(&list, "list");
    assert!(
        text.starts_with("ticket id: ") && text.contains("object name: \"test\""),
        "{list}"
    );

    lock.send("UNREGISTER service=lock_4321_1");
    assert_eq!(lock.expect_eof(), Vec::<String>::new());
    tool.send("UNREGISTER service=snaplocktool");
    assert_eq!(tool.expect_eof(), Vec::<String>::new());
}

#[test]
fn a_lock_held_over_tcp_is_released_when_its_connection_closes() {
    let (dir, _daemon, addr) = agent("close", &[]);
    let mut lock = Tcp::connect(addr);
    lock.register("lock_77_1");
    lock.send("snaplock/LOCK duration=60;object_name=door;pid=77");
    addressed(&lock.recv(), "lock_77_1", "LOCKED");

    let mut local = Client::connect(&dir.socket());
    local.send(&format!(
        "LOCK object_name=door;timeout={}",
        deadline_in(8.0)
    ));
    local.assert_silent_for(Duration::from_millis(300));
    drop(lock);
    assert_reply(&local.recv(), "LOCKED", &[("object_name", "door")]);
}

#[test]
fn the_originals_lock_checks_answer_as_it_did() {
    let (_dir, _daemon, addr) = agent("checks", &[]);
    let mut c = Tcp::connect(addr);
    c.register("lock_4321_1");
    // §13.5: a past deadline.
    c.send("snaplock/LOCK duration=10;object_name=test;pid=4321;timeout=1000");
    let failed = c.recv();
    addressed(&failed, "lock_4321_1", "LOCKFAILED");
    assert_reply(
        &failed,
        "LOCKFAILED",
        &[
            ("error", "timedout"),
            ("key", "test_agent/4321"),
            ("object_name", "test"),
        ],
    );
    // §13.6: too short a duration or grace.
    for extra in ["duration=2", "duration=10;unlock_duration=59"] {
        c.send(&format!(
            "snaplock/LOCK {extra};object_name=test;pid=4321;timeout={}",
            unix_now() as u64 + 5
        ));
        assert_reply(
            &c.recv(),
            "LOCKFAILED",
            &[
                ("error", "invalid"),
                ("key", "test_agent/4321"),
                ("object_name", "test"),
            ],
        );
    }
    c.send("snaplock/LOCK duration=10;object_name=test;pid=4321;unlock_duration=60");
    assert_reply(&c.recv(), "LOCKED", &[("object_name", "test")]);
    // §13.7: the same server/pid from another service is a duplicate.
    let mut other = Tcp::connect(addr);
    other.register("other_svc");
    other.send("snaplock/LOCK duration=10;object_name=test;pid=4321");
    let dup = other.recv();
    addressed(&dup, "other_svc", "LOCKFAILED");
    assert_reply(
        &dup,
        "LOCKFAILED",
        &[("error", "duplicate"), ("key", "test_agent/4321")],
    );
}

#[test]
fn bad_input_gets_a_clear_answer_and_never_takes_the_agent_down() {
    let (dir, _daemon, addr) = agent("bad", &[]);
    let mut c = Tcp::connect(addr);
    c.send("snaplock/LOCK duration=10;object_name=x;pid=1");
    let early = c.recv();
    assert_eq!(early.command, "INVALID", "{early}");
    assert!(
        param(&early, "reason").contains("register first"),
        "{early}"
    );
    c.send("this is not a message");
    assert_eq!(c.recv().command, "INVALID");
    c.register("lock_1_1");
    c.send("snaplock/FOO");
    let unknown = c.recv();
    addressed(&unknown, "lock_1_1", "UNKNOWN");
    assert_reply(&unknown, "UNKNOWN", &[("command", "FOO")]);
    c.send("node9:snaplock/LOCK duration=10;object_name=x;pid=1");
    let elsewhere = c.recv();
    assert_eq!(elsewhere.command, "INVALID", "{elsewhere}");
    assert!(
        param(&elsewhere, "reason").contains("nothing is relayed to node9"),
        "{elsewhere}"
    );
    c.send("\u{1}\u{2}garbage;;;===");
    assert_eq!(c.recv().command, "INVALID");
    // Longer than max_line_length (64 KiB): INVALID, then closed.
    let long = format!("snaplock/LOCK object_name={}", "x".repeat(70_000));
    c.send(&long);
    let lines = c.expect_eof();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let too_long = parse(lines[0].as_bytes()).unwrap();
    addressed(&too_long, "lock_1_1", "INVALID");
    assert_eq!(too_long.get_str("reason"), Some("line too long"));

    // The agent still serves both kinds of client.
    let mut local = Client::connect(&dir.socket());
    assert_reply(&local.request("LOCKSTATUS"), "LOCKREADY", &[]);
    let mut again = Tcp::connect(addr);
    again.register("lock_2_1");
    again.send("snaplock/LOCKSTATUS");
    addressed(&again.recv(), "lock_2_1", "LOCKREADY");
}

#[test]
fn communicator_connections_count_against_max_clients() {
    let dir = TempDir::new("max");
    let conf = dir.path().join("snaplock.conf");
    let addr = loopback_addrs(1)[0];
    std::fs::write(
        &conf,
        format!("max_clients=2\ncommunicator_listen={addr}\n"),
    )
    .unwrap();
    let _daemon = Daemon::start(&dir.socket(), &["-c", conf.to_str().unwrap()], &[]);
    let mut a = Tcp::connect(addr);
    a.register("lock_1_1");
    let mut b = Tcp::connect(addr);
    b.register("lock_2_1");
    let mut c = Tcp::connect(addr);
    let lines = c.expect_eof();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("too many clients"), "{lines:?}");
    a.send("snaplock/LOCKSTATUS");
    addressed(&a.recv(), "lock_1_1", "LOCKREADY");
}

#[test]
fn a_stopping_agent_tells_its_communicator_clients_stop() {
    let (_dir, daemon, addr) = agent("stop", &[]);
    let mut c = Tcp::connect(addr);
    c.register("lock_5_1");
    c.send("snaplock/LOCK duration=60;object_name=held;pid=5");
    addressed(&c.recv(), "lock_5_1", "LOCKED");
    // A client's STOP ends its own session, never the agent.
    let mut quitter = Tcp::connect(addr);
    quitter.register("lock_6_1");
    quitter.send("STOP");
    assert_eq!(quitter.expect_eof(), Vec::<String>::new());
    c.send("snaplock/LOCKSTATUS");
    addressed(&c.recv(), "lock_5_1", "LOCKREADY");

    daemon.signal(Signal::SIGTERM);
    let lost = c.recv();
    addressed(&lost, "lock_5_1", "UNLOCKED");
    assert_reply(&lost, "UNLOCKED", &[("error", "lost")]);
    // It asked LOCKSTATUS: told NOLOCK as the original told it.
    assert_eq!(
        c.expect_eof(),
        ["<test_agent:snaplock test_agent:lock_5_1/NOLOCK", "STOP"]
    );
    let (code, stderr) = daemon.wait();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn check_config_rejects_a_bad_communicator_address_and_a_clash_with_listen() {
    for (args, expected) in [
        (
            vec!["--check-config", "--communicator-listen", "localhost"],
            "--communicator-listen: communicator_listen=\"localhost\": must be IP:PORT",
        ),
        (
            vec![
                "--check-config",
                "--listen",
                "127.0.0.1:4040",
                "--communicator-listen",
                "127.0.0.1:4040",
            ],
            "takes the port of listen=",
        ),
        (
            vec![
                "--check-config",
                "--listen",
                "127.0.0.1:4040",
                "--communicator-listen",
                "0.0.0.0:4040",
            ],
            "takes the port of listen=",
        ),
    ] {
        let out = snaplockd()
            .args(&args)
            .args(["-n", "test_agent"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let out = snaplockd()
        .args([
            "--check-config",
            "-n",
            "test_agent",
            "--communicator-listen",
            "127.0.0.1:4040",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn in_a_cluster_a_lock_taken_over_tcp_on_one_agent_is_held_on_the_others() {
    let dir = TempDir::new("cluster");
    let addrs = loopback_addrs(3);
    let neighbors: Vec<String> = addrs.iter().map(ToString::to_string).collect();
    let neighbors = neighbors.join(",");
    let comm = loopback_addrs(1)[0].to_string();
    let agents: Vec<Daemon> = (0..3)
        .map(|i| {
            let name = format!("node{i}");
            let listen = addrs[i].to_string();
            let mut args = vec![
                "-n",
                &name,
                "--listen",
                &listen,
                "--neighbors",
                &neighbors,
                "--state-dir",
                dir.path().to_str().unwrap(),
            ];
            if i == 0 {
                args.extend(["--communicator-listen", &comm]);
            }
            Daemon::start(&dir.path().join(format!("n{i}.sock")), &args, &[])
        })
        .collect();
    let start = now();
    for agent in &agents {
        loop {
            let mut c = Client::connect(&agent.socket);
            if c.request("INFO").get_str("ready") == Some("true") {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the cluster is not ready"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    let mut lock = Tcp::connect(comm.parse().unwrap());
    lock.register("lock_4321_1");
    lock.send("snaplock/LOCK duration=60;object_name=shared;pid=4321");
    let locked = lock.recv();
    assert_eq!(
        (
            locked.sent_from_server.as_str(),
            locked.server.as_str(),
            locked.service.as_str(),
            locked.command.as_str()
        ),
        ("node0", "node0", "lock_4321_1", "LOCKED"),
        "{locked}"
    );
    assert_eq!(locked.get_str("key"), Some("node0/4321"));

    let mut other = Client::connect(&agents[1].socket);
    assert_reply(
        &other.request("LOCK object_name=shared;try=true"),
        "LOCKFAILED",
        &[("error", "busy")],
    );
    other.send(&format!(
        "LOCK object_name=shared;timeout={}",
        deadline_in(15.0)
    ));
    other.assert_silent_for(Duration::from_millis(300));
    drop(lock);
    let granted = other.recv();
    assert_reply(&granted, "LOCKED", &[("object_name", "shared")]);
    assert!(
        common::fence(&granted) > param(&locked, "fence").parse::<u64>().unwrap(),
        "the next holder's fence is larger: {granted} after {locked}"
    );
}

#[test]
fn a_taken_communicator_port_stops_the_start_with_a_clear_error() {
    let dir = TempDir::new("taken");
    let taken = std::net::TcpListener::bind(loopback_addrs(1)[0]).unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = snaplockd()
        .arg("--socket")
        .arg(dir.socket())
        .args(["-n", "test_agent", "--communicator-listen", &addr])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on {addr} (communicator_listen)")),
        "{stderr}"
    );
    assert!(!dir.socket().exists(), "the client socket is removed");
}

#[test]
fn an_end_of_file_ends_the_session_once_its_last_requests_are_answered() {
    let (dir, _daemon, addr) = agent("eof", &[]);
    let mut c = Tcp::connect(addr);
    c.register("lock_9_1");
    c.send("snaplock/LOCK duration=60;object_name=brief;pid=9");
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    let lines = c.expect_eof();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("<test_agent:snaplock test_agent:lock_9_1/LOCKED "),
        "{lines:?}"
    );
    // The session ended, and its lock with it.
    let mut local = Client::connect(&dir.socket());
    assert_reply(
        &local.request("LOCK object_name=brief;try=true"),
        "LOCKED",
        &[],
    );
}

#[test]
fn acl_file_decides_for_the_sessions_by_its_communicator_rules() {
    let dir = TempDir::new("commacl");
    let acl = dir.path().join("acl");
    std::fs::write(&acl, "communicator: legacy/\nuser 0: *\n").unwrap();
    let conf = dir.path().join("snaplock.conf");
    std::fs::write(&conf, format!("acl_file={}\n", acl.display())).unwrap();
    let (_other, _daemon, addr) = agent("commacl2", &["-c", conf.to_str().unwrap()]);
    let mut lock = Tcp::connect(addr);
    lock.register("lock_4321_1");
    let timeout = unix_now() as u64 + 5;
    lock.send(&format!(
        "snaplock/LOCK duration=10;object_name=legacy/a;pid=4321;timeout={timeout}"
    ));
    let locked = lock.recv();
    addressed(&locked, "lock_4321_1", "LOCKED");
    lock.send(&format!(
        "snaplock/LOCK duration=10;object_name=modern/a;pid=4321;timeout={timeout}"
    ));
    let denied = lock.recv();
    addressed(&denied, "lock_4321_1", "LOCKFAILED");
    assert_reply(
        &denied,
        "LOCKFAILED",
        &[("object_name", "modern/a"), ("error", "denied")],
    );
    assert!(
        param(&denied, "description").contains("grants a communicator session"),
        "{denied}"
    );
}
