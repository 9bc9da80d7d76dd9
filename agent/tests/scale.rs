//! Many clients at once: a thousand contending for one name, and ten
//! thousand connections held open.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream as StdStream;
use std::time::Duration;

use mio::net::UnixStream;
use mio::{Events, Interest, Poll, Token};
use snaplock_proto::wire::{Message, parse};

use common::{
    Client, Daemon, TempDir, WAIT, assert_reply, deadline_in, ensure_fd_limit, now, param, start,
};

/// A client of the contention test: a non-blocking socket and its unread bytes.
struct Peer {
    stream: UnixStream,
    buf: Vec<u8>,
}

impl Peer {
    fn send(&mut self, line: &str) {
        // Small lines to an agent that reads continuously: the socket
        // buffer has room, so a non-blocking write completes.
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        self.stream.write_all(&bytes).expect("request written");
    }

    /// Reads what is there and returns the complete replies.
    fn replies(&mut self) -> Vec<Message> {
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("the agent closed a client"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("read: {e}"),
            }
        }
        let mut out = Vec::new();
        while let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=i).collect();
            out.push(parse(&line[..line.len() - 1]).expect("well-formed reply"));
        }
        out
    }
}

#[test]
fn a_thousand_clients_lock_distinct_names_then_contend_for_one_with_increasing_fences() {
    const N: usize = 1000;
    ensure_fd_limit(2 * N as u64 + 100);
    let (_dir, agent) = start("thousand", |_| {});
    let mut poll = Poll::new().unwrap();
    let mut peers: Vec<Peer> = (0..N)
        .map(|i| {
            let std = StdStream::connect(agent.socket()).unwrap();
            std.set_nonblocking(true).unwrap();
            let mut stream = UnixStream::from_std(std);
            poll.registry()
                .register(&mut stream, Token(i), Interest::READABLE)
                .unwrap();
            Peer {
                stream,
                buf: Vec::new(),
            }
        })
        .collect();
    let mut events = Events::with_capacity(1024);
    let t0 = now();
    let mut pump = |peers: &mut Vec<Peer>,
                    on_reply: &mut dyn FnMut(usize, Message, &mut Vec<Peer>)| {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the contention test took too long"
        );
        poll.poll(&mut events, Some(Duration::from_millis(100)))
            .unwrap();
        for ev in events.iter() {
            let i = ev.token().0;
            for m in peers[i].replies() {
                on_reply(i, m, peers);
            }
        }
    };

    for (i, p) in peers.iter_mut().enumerate() {
        p.send(&format!("LOCK object_name=distinct_{i};pid={}", i + 1));
    }
    let mut distinct = 0;
    while distinct < N {
        pump(&mut peers, &mut |i, m, _| {
            assert_reply(&m, "LOCKED", &[("object_name", &format!("distinct_{i}"))]);
            distinct += 1;
        });
    }

    let deadline = deadline_in(60.0);
    for (i, p) in peers.iter_mut().enumerate() {
        p.send(&format!(
            "LOCK object_name=common;pid={};timeout={deadline}",
            i + 1
        ));
    }
    let mut fences: Vec<u64> = Vec::with_capacity(N);
    let mut granted = vec![false; N];
    let mut unlocked = 0;
    while unlocked < N {
        pump(&mut peers, &mut |i, m, peers| match m.command.as_str() {
            "LOCKED" => {
                assert_eq!(param(&m, "object_name"), "common", "{m}");
                assert!(!granted[i], "client {i} granted twice");
                granted[i] = true;
                fences.push(param(&m, "fence").parse().unwrap());
                peers[i].send(&format!("UNLOCK object_name=common;pid={}", i + 1));
            }
            "UNLOCKED" => unlocked += 1,
            _ => panic!("unexpected reply to client {i}: {m}"),
        });
    }
    assert!(granted.iter().all(|&g| g));
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences strictly increase in grant order"
    );
    drop(peers);
    let mut c = Client::connect(agent.socket());
    let start = now();
    loop {
        let m = c.request("INFO");
        if param(&m, "clients") == "1" {
            assert_reply(&m, "STATUS", &[("tickets", "0")]);
            break;
        }
        assert!(
            start.elapsed() < WAIT,
            "the closed clients were not all released: {m}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ten_thousand_connections_are_accepted_and_served() {
    const N: usize = 10_000;
    // The agent runs as its own process so the two ends of the connections
    // are counted against two processes' limits.
    ensure_fd_limit(N as u64 + 100);
    let dir = TempDir::new("tenk");
    let daemon = Daemon::start(&dir.socket(), &[], &[]);
    let t0 = now();
    let conns: Vec<StdStream> = (0..N)
        .map(|i| {
            StdStream::connect(dir.socket())
                .unwrap_or_else(|e| panic!("connection {i} of {N} refused: {e}"))
        })
        .collect();
    let connect_time = t0.elapsed();
    let mut last = Client::connect(&dir.socket());
    let start = now();
    loop {
        let m = last.request("INFO");
        if param(&m, "clients") == (N + 1).to_string() {
            break;
        }
        assert!(
            start.elapsed() < WAIT,
            "not every connection was accepted: {m}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for i in [0, N / 2, N - 1] {
        let mut s = &conns[i];
        s.set_read_timeout(Some(WAIT)).unwrap();
        s.write_all(b"LOCKSTATUS\n").unwrap();
        let mut reply = [0u8; 10];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"LOCKREADY\n");
    }
    eprintln!("{N} connections opened in {connect_time:?}");
    drop(conns);
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    let (code, stderr) = daemon.wait();
    assert_eq!(code, Some(0), "{stderr}");
}
