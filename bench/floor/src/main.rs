//! The floor of what a grant costs on one machine: processes that speak
//! just enough of the client protocol for lockgen, and nothing else.
//!
//!     snaplock-floor direct|owner|home INDEX SOCKET PORT0,PORT1,PORT2
//!     snaplock-floor local SOCKET
//!
//! `local` is one process, the floor of one agent (see `local.rs`). The
//! other two modes are three processes, the floor of a grant agreed by a
//! majority of three leaders.
//!
//! Process INDEX serves clients on SOCKET. No ticket table, no timers, no
//! epochs, no checks: what it measures is what processes, sockets and
//! wakeups alone cost. Lines are read and replies written as the agent
//! does: every readable socket drained, every buffer written once at the
//! end of an iteration.
//!
//! - `direct`: every process owns every name its clients ask for (the
//!   best case of any design: no client ever reaches another agent than
//!   its name's owner). For a `LOCK` it sends one line to a follower (the
//!   next process) and answers `LOCKED` when the vote comes back: the
//!   fewest messages any grant agreed by a majority of three can take.
//!   `UNLOCK` is answered at once and the release sent to the follower,
//!   which does not answer. No implementation of the protocol can beat it.
//! - `owner`: the messages of snaplock's grant (docs/cluster.md
//!   "Granting") and nothing else. A name's owner is one of the three by a
//!   hash; a home that is not the owner sends it the request, the owner
//!   asks the home for its vote, and tells it the grant; the release goes
//!   to the owner, which tells its follower to drop the vote.
//! - `home`: `owner`, but a home that is asked for its vote (the owner's
//!   follower) holds a majority with it and answers `LOCKED` itself; the
//!   owner sends no grant. The home drops its own vote at the release, and
//!   the owner, told of the release, sends no drop: four messages where
//!   `owner` takes six, for a home that is not its name's owner.

// A bench tool outside the agent: it reads the clock itself (a bounded
// wait for its links).
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Events, Interest, Poll, Token};

mod local;
mod strict;

const CLIENTS: Token = Token(0);
const PEERS: Token = Token(1);
const OUT: Token = Token(2);
const FIRST_IN: usize = 16;
const FIRST_CLIENT: usize = 1 << 20;
const MAX_LINE: usize = 4096;

struct Conn<S> {
    s: S,
    inb: Vec<u8>,
    out: Vec<u8>,
    dirty: bool,
}

impl<S: Read + Write> Conn<S> {
    fn new(s: S) -> Self {
        Conn {
            s,
            inb: Vec::with_capacity(4096),
            out: Vec::with_capacity(4096),
            dirty: false,
        }
    }
    /// Reads what there is; false when the other side closed or failed.
    fn fill(&mut self) -> bool {
        let mut buf = [0u8; 16384];
        loop {
            match self.s.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => self.inb.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }
    /// Reads as the agent does: into one buffer shared by all, stopping
    /// at a short read, which emptied the socket (readiness is
    /// edge-triggered: bytes that come later raise a new event), so no
    /// read is made only to hear EAGAIN. False as for `fill`.
    fn fill_from(&mut self, buf: &mut [u8]) -> bool {
        loop {
            match self.s.read(buf) {
                Ok(0) => return false,
                Ok(n) => {
                    self.inb.extend_from_slice(&buf[..n]);
                    if n < buf.len() {
                        return true;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }
    fn flush(&mut self) -> bool {
        let mut off = 0;
        while off < self.out.len() {
            match self.s.write(&self.out[off..]) {
                Ok(n) => off += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        self.out.drain(..off);
        self.dirty = !self.out.is_empty();
        true
    }
}

/// The value of `name=` in a `;`-separated parameter list.
fn param<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let sp = line.iter().position(|&b| b == b' ')?;
    line[sp + 1..].split(|&b| b == b';').find_map(|kv| {
        let eq = kv.iter().position(|&b| b == b'=')?;
        (&kv[..eq] == name).then(|| &kv[eq + 1..])
    })
}

fn lines(buf: &mut Vec<u8>, mut each: impl FnMut(&[u8])) {
    let mut start = 0;
    while let Some(nl) = buf[start..].iter().position(|&b| b == b'\n') {
        let line = &buf[start..start + nl];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        each(line);
        start += nl + 1;
    }
    buf.drain(..start);
}

/// The owner of a name: one of `n` by FNV-1a.
fn owner_of(name: &[u8], n: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    (h % n as u64) as usize
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "local" {
        return local::run(&args[2]);
    }
    if args.len() != 5 || !matches!(args[1].as_str(), "direct" | "owner" | "home" | "strict") {
        eprintln!("usage: snaplock-floor direct|owner|home|strict INDEX SOCKET PORT0,PORT1,PORT2");
        eprintln!("       snaplock-floor local SOCKET");
        std::process::exit(2);
    }
    let by_owner = args[1] != "direct";
    let home_votes = args[1] == "home";
    let me: usize = args[2].parse().expect("INDEX");
    let ports: Vec<u16> = args[4]
        .split(',')
        .map(|p| p.parse().expect("PORT"))
        .collect();
    let n = ports.len();
    let addr = |i: usize| SocketAddr::from(([127, 0, 0, 1], ports[i]));
    let _ = std::fs::remove_file(&args[3]);

    let mut poll = Poll::new().expect("poll");
    let mut clients_l = UnixListener::bind(&args[3]).expect("bind socket");
    let mut peers_l = TcpListener::bind(addr(me)).expect("bind port");
    poll.registry()
        .register(&mut clients_l, CLIENTS, Interest::READABLE)
        .unwrap();
    poll.registry()
        .register(&mut peers_l, PEERS, Interest::READABLE)
        .unwrap();

    // A link to every other process for what this one sends (answers come
    // on the other's link): dialled until it answers (bounded).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut links: Vec<Option<Conn<TcpStream>>> = Vec::new();
    for j in 0..n {
        if j == me {
            links.push(None);
            continue;
        }
        let s = loop {
            match std::net::TcpStream::connect(addr(j)) {
                Ok(s) => break s,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => panic!("link to {j}: {e}"),
            }
        };
        s.set_nodelay(true).unwrap();
        s.set_nonblocking(true).unwrap();
        let mut c = Conn::new(TcpStream::from_std(s));
        poll.registry()
            .register(&mut c.s, Token(OUT.0 + 1 + j), Interest::READABLE)
            .unwrap();
        links.push(Some(c));
    }
    let follower = (me + 1) % n;
    let mut strict = (args[1] == "strict").then(|| strict::Strict::new(me));
    // `strict` reads as the agent does (`Conn::fill_from`): no read only
    // to hear EAGAIN.
    let mut rbuf = vec![0u8; 65536];

    let mut inbound: HashMap<usize, Conn<TcpStream>> = HashMap::new();
    let mut clients: HashMap<usize, Conn<UnixStream>> = HashMap::new();
    // request number -> (client, object, tag, owner): this home's requests
    let mut reqs: HashMap<u64, (usize, Vec<u8>, Vec<u8>, usize)> = HashMap::new();
    let (mut next_in, mut next_client, mut next_req, mut fence) =
        (FIRST_IN, FIRST_CLIENT, 1u64, 0u64);
    let mut dirty_clients: Vec<usize> = Vec::new();
    let mut events = Events::with_capacity(1024);
    let mut inb: Vec<u8> = Vec::new();

    // Appends `X HOME REQ OWNER` to the link to `to`, and in `strict`
    // ` NAME FENCE EPOCH` (the name's digest; one epoch).
    fn say(
        links: &mut [Option<Conn<TcpStream>>],
        to: usize,
        x: u8,
        (home, req, owner): (usize, u64, usize),
        strict: Option<(u64, u64)>,
    ) {
        let c = links[to].as_mut().expect("a link to another process");
        c.out.push(x);
        match strict {
            None => c
                .out
                .extend_from_slice(format!(" {home} {req} {owner}\n").as_bytes()),
            Some((name, fence)) => c
                .out
                .extend_from_slice(format!(" {home} {req} {owner} {name} {fence} 1\n").as_bytes()),
        }
    }

    loop {
        // a socket that took only part of its buffer is written again at once
        let again = links.iter().flatten().any(|c| c.dirty) || !dirty_clients.is_empty();
        poll.poll(&mut events, again.then_some(Duration::ZERO))
            .expect("poll");
        if let Some(st) = strict.as_mut() {
            st.tick();
        }
        for ev in events.iter() {
            match ev.token() {
                CLIENTS => {
                    while let Ok((mut s, _)) = clients_l.accept() {
                        poll.registry()
                            .register(&mut s, Token(next_client), Interest::READABLE)
                            .unwrap();
                        clients.insert(next_client, Conn::new(s));
                        next_client += 1;
                    }
                }
                PEERS => {
                    while let Ok((mut s, _)) = peers_l.accept() {
                        s.set_nodelay(true).unwrap();
                        poll.registry()
                            .register(&mut s, Token(next_in), Interest::READABLE)
                            .unwrap();
                        inbound.insert(next_in, Conn::new(s));
                        next_in += 1;
                    }
                }
                Token(t) if t < FIRST_IN => {
                    assert!(links[t - OUT.0 - 1].as_mut().unwrap().fill(), "link closed");
                }
                Token(t) if t < FIRST_CLIENT => {
                    // another process's messages
                    let Some(conn) = inbound.get_mut(&t) else {
                        continue;
                    };
                    let open = if strict.is_some() {
                        conn.fill_from(&mut rbuf)
                    } else {
                        conn.fill()
                    };
                    std::mem::swap(&mut inb, &mut conn.inb);
                    if !open {
                        let mut c = inbound.remove(&t).unwrap();
                        let _ = poll.registry().deregister(&mut c.s);
                    }
                    lines(&mut inb, |l| {
                        let f: Vec<&str> = std::str::from_utf8(l).unwrap().split(' ').collect();
                        let (x, home, req, owner): (&str, usize, u64, usize) = (
                            f[0],
                            f[1].parse().unwrap(),
                            f[2].parse().unwrap(),
                            f[3].parse().unwrap(),
                        );
                        let m = (home, req, owner);
                        // `strict`: the name's digest and the fence, and the epoch
                        // each message is checked against.
                        let st = strict.as_mut().map(|st| {
                            let (name, fence): (u64, u64) =
                                (f[4].parse().unwrap(), f[5].parse().unwrap());
                            assert_eq!(f[6].parse::<u64>().unwrap(), 1, "another epoch");
                            (st, name, fence)
                        });
                        let mut grant = |req: u64, st: Option<&mut strict::Strict>, f: u64| {
                            let Some((c, object, tag, _)) = reqs.get(&req) else {
                                return;
                            };
                            if let Some(conn) = clients.get_mut(c) {
                                fence += 1;
                                let out = &mut conn.out;
                                out.extend_from_slice(b"LOCKED fence=");
                                let until = match st {
                                    None => {
                                        out.extend_from_slice(fence.to_string().as_bytes());
                                        out.push(b';');
                                        None
                                    }
                                    Some(st) => {
                                        out.extend_from_slice(f.to_string().as_bytes());
                                        out.push(b';');
                                        st.granted(req, out)
                                    }
                                };
                                out.extend_from_slice(b"object_name=");
                                out.extend_from_slice(object);
                                out.extend_from_slice(b";tag=");
                                out.extend_from_slice(tag);
                                if let Some(t) = until {
                                    out.extend_from_slice(
                                        format!(";timeout_date={t:.3}").as_bytes(),
                                    );
                                }
                                out.push(b'\n');
                                if !conn.dirty {
                                    conn.dirty = true;
                                    dirty_clients.push(*c);
                                }
                            }
                        };
                        match (x, st) {
                            // owner: a home's request; it asks the home's vote
                            ("L", None) => say(&mut links, home, b'A', m, None),
                            ("L", Some((st, name, _))) => {
                                if let Some(f) = st.order(name, home, req) {
                                    say(&mut links, home, b'A', m, Some((name, f)))
                                }
                            }
                            // the home, asked for its vote, holds a majority
                            ("A", None) if home_votes && home == me => {
                                grant(req, None, 0);
                                say(&mut links, owner, b'V', m, None)
                            }
                            // follower (the home, or the owner's next): its vote
                            ("A", None) => say(&mut links, owner, b'V', m, None),
                            ("A", Some((st, name, f))) => {
                                // (a guard cannot borrow `st` mutably)
                                if st.vote(name, home, req, f) {
                                    say(&mut links, owner, b'V', m, Some((name, f)))
                                }
                            }
                            // owner: the majority is there
                            ("V", st) if home == me => match st {
                                None => grant(req, None, 0),
                                Some((st, _, f)) => grant(req, Some(st), f),
                            },
                            ("V", None) if home_votes => {}
                            ("V", st) => {
                                let nf = st.map(|(_, name, f)| (name, f));
                                say(&mut links, home, b'G', m, nf)
                            }
                            // home: granted
                            ("G", None) => grant(req, None, 0),
                            ("G", Some((st, _, f))) => grant(req, Some(st), f),
                            // owner: released; the follower (the home) drops its vote
                            ("U", None) if home_votes => {}
                            ("U", None) => say(&mut links, home, b'D', m, None),
                            ("U", Some((st, name, f))) => {
                                st.unorder(name, home, req);
                                say(&mut links, home, b'D', m, Some((name, f)))
                            }
                            // follower: the vote dropped
                            ("D", Some((st, name, _))) => st.unvote(name, home, req),
                            _ => {}
                        }
                    });
                    if open {
                        std::mem::swap(&mut inb, &mut inbound.get_mut(&t).unwrap().inb);
                    }
                    inb.clear();
                }
                Token(c) => {
                    let Some(conn) = clients.get_mut(&c) else {
                        continue;
                    };
                    let filled = if strict.is_some() {
                        conn.fill_from(&mut rbuf)
                    } else {
                        conn.fill()
                    };
                    let open = filled && conn.inb.len() <= MAX_LINE * 64;
                    let (inb, out) = (&mut conn.inb, &mut conn.out);
                    lines(inb, |l| {
                        if let Some(st) = strict.as_mut() {
                            let lock = l.starts_with(b"LOCK ");
                            if !lock && !l.starts_with(b"UNLOCK ") {
                                return;
                            }
                            let params = &l[l.iter().position(|&b| b == b' ').unwrap() + 1..];
                            let Some(r) = strict::read(params, st.wall, lock) else {
                                return;
                            };
                            let name = strict::digest(r.object);
                            let owner = (name % n as u64) as usize;
                            if lock {
                                let req = next_req;
                                next_req += 1;
                                if !st.submit(&r, req) {
                                    return;
                                }
                                let m = (me, req, owner);
                                if owner == me {
                                    if let Some(f) = st.order(name, me, req) {
                                        say(&mut links, follower, b'A', m, Some((name, f)));
                                    }
                                } else {
                                    say(&mut links, owner, b'L', m, Some((name, 0)));
                                }
                                reqs.insert(req, (c, r.object.to_vec(), r.tag.to_vec(), owner));
                                return;
                            }
                            if let Some(req) = st.release(r.object, r.pid) {
                                reqs.remove(&req);
                                let m = (me, req, owner);
                                if owner == me {
                                    st.unorder(name, me, req);
                                    say(&mut links, follower, b'D', m, Some((name, 0)));
                                } else {
                                    say(&mut links, owner, b'U', m, Some((name, 0)));
                                }
                            }
                            out.extend_from_slice(b"UNLOCKED object_name=");
                            out.extend_from_slice(r.object);
                            out.extend_from_slice(b";tag=");
                            out.extend_from_slice(r.tag);
                            out.push(b'\n');
                            return;
                        }
                        let object = param(l, b"object_name").unwrap_or_default().to_vec();
                        let tag = param(l, b"tag").unwrap_or_default().to_vec();
                        let owner = if by_owner { owner_of(&object, n) } else { me };
                        if l.starts_with(b"LOCK ") {
                            let req = next_req;
                            next_req += 1;
                            let m = (me, req, owner);
                            if owner == me {
                                say(&mut links, follower, b'A', m, None);
                            } else {
                                say(&mut links, owner, b'L', m, None);
                            }
                            reqs.insert(req, (c, object, tag, owner));
                        } else if l.starts_with(b"UNLOCK ") {
                            let req = reqs
                                .iter()
                                .find(|(_, v)| v.0 == c && v.1 == object)
                                .map(|(r, _)| *r);
                            if let Some(req) = req {
                                reqs.remove(&req);
                                let m = (me, req, owner);
                                if owner == me {
                                    say(&mut links, follower, b'D', m, None);
                                } else {
                                    say(&mut links, owner, b'U', m, None);
                                }
                            }
                            out.extend_from_slice(b"UNLOCKED object_name=");
                            out.extend_from_slice(&object);
                            out.extend_from_slice(b";tag=");
                            out.extend_from_slice(&tag);
                            out.push(b'\n');
                        }
                    });
                    if !out.is_empty() && !conn.dirty {
                        conn.dirty = true;
                        dirty_clients.push(c);
                    }
                    if !open {
                        let mut c2 = clients.remove(&c).unwrap();
                        let _ = poll.registry().deregister(&mut c2.s);
                    }
                }
            }
        }
        // one write per socket with something to say, as the agent does
        for c in links.iter_mut().flatten() {
            if !c.out.is_empty() {
                assert!(c.flush(), "link failed");
            }
        }
        dirty_clients.retain(|c| clients.get_mut(c).is_some_and(|c| c.flush() && c.dirty));
    }
}
