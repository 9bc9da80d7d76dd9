//! `local`: the floor of one agent on one computer. One process serves
//! clients on a Unix socket and answers at once: `LOCK` with `LOCKED`
//! (a fence from one counter), `UNLOCK` with `UNLOCKED`. It keeps only
//! what mutual exclusion itself forces, which name is held and who waits
//! for it in arrival order, so that one name shared by many clients is
//! still served one holder at a time; nothing else: no tickets, no leases,
//! no timers, no deadlines, no credentials, no checks of the request, no
//! metrics. Lines are read and replies written as the agent does: every
//! readable socket read into one buffer and copied to its connection's,
//! until a short read (no read only to hear EAGAIN), every buffer written
//! once at the end of an iteration. Any correct agent does all of
//! this and more, so no agent on this computer can beat it.

use std::collections::{HashMap, VecDeque};
use std::io::ErrorKind;
use std::time::Duration;

use mio::net::{UnixListener, UnixStream};
use mio::{Events, Interest, Poll, Token};

use super::{Conn, MAX_LINE, lines, param};

const CLIENTS: Token = Token(0);

/// Who holds a name and who waits for it: client and the request's tag.
struct Name {
    holder: usize,
    waiting: VecDeque<(usize, Vec<u8>)>,
}

/// `LOCKED` to `client`, with the next fence; false when it is gone.
fn locked(
    clients: &mut HashMap<usize, Conn<UnixStream>>,
    dirty: &mut Vec<usize>,
    fence: &mut u64,
    client: usize,
    object: &[u8],
    tag: &[u8],
) -> bool {
    let Some(conn) = clients.get_mut(&client) else {
        return false;
    };
    *fence += 1;
    reply(conn, dirty, client, b"LOCKED", Some(*fence), object, tag);
    true
}

/// Queues `<command> [fence=<fence>;]object_name=<object>;tag=<tag>` for
/// `client`, whose connection is `conn`, and marks it to be written.
fn reply(
    conn: &mut Conn<UnixStream>,
    dirty: &mut Vec<usize>,
    client: usize,
    command: &[u8],
    fence: Option<u64>,
    object: &[u8],
    tag: &[u8],
) {
    let out = &mut conn.out;
    out.extend_from_slice(command);
    if let Some(fence) = fence {
        out.extend_from_slice(b" fence=");
        out.extend_from_slice(fence.to_string().as_bytes());
        out.push(b';');
    } else {
        out.push(b' ');
    }
    out.extend_from_slice(b"object_name=");
    out.extend_from_slice(object);
    out.extend_from_slice(b";tag=");
    out.extend_from_slice(tag);
    out.push(b'\n');
    if !conn.dirty {
        conn.dirty = true;
        dirty.push(client);
    }
}

/// Passes `object` to its next waiter still connected, or frees it.
fn pass_on(
    names: &mut HashMap<Vec<u8>, Name>,
    clients: &mut HashMap<usize, Conn<UnixStream>>,
    dirty: &mut Vec<usize>,
    fence: &mut u64,
    object: &[u8],
) {
    let Some(n) = names.get_mut(object) else {
        return;
    };
    while let Some((c, tag)) = n.waiting.pop_front() {
        if locked(clients, dirty, fence, c, object, &tag) {
            n.holder = c;
            return;
        }
    }
    names.remove(object);
}

pub fn run(socket: &str) {
    let _ = std::fs::remove_file(socket);
    let mut poll = Poll::new().expect("poll");
    let mut listener = UnixListener::bind(socket).expect("bind socket");
    poll.registry()
        .register(&mut listener, CLIENTS, Interest::READABLE)
        .unwrap();

    let mut clients: HashMap<usize, Conn<UnixStream>> = HashMap::new();
    let mut names: HashMap<Vec<u8>, Name> = HashMap::new();
    let (mut next_client, mut fence) = (1usize, 0u64);
    let mut dirty: Vec<usize> = Vec::new();
    let mut events = Events::with_capacity(1024);
    let mut inb: Vec<u8> = Vec::new();
    let mut read_buf = vec![0u8; 16384];

    loop {
        // a socket that took only part of its buffer is written again at once
        match poll.poll(&mut events, (!dirty.is_empty()).then_some(Duration::ZERO)) {
            Ok(()) => {}
            // a signal (a profiler's, say) is not a reason to stop
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => panic!("poll: {e}"),
        }
        for ev in events.iter() {
            let c = match ev.token() {
                CLIENTS => {
                    while let Ok((mut s, _)) = listener.accept() {
                        poll.registry()
                            .register(&mut s, Token(next_client), Interest::READABLE)
                            .unwrap();
                        clients.insert(next_client, Conn::new(s));
                        next_client += 1;
                    }
                    continue;
                }
                Token(c) => c,
            };
            let Some(conn) = clients.get_mut(&c) else {
                continue;
            };
            let open = conn.fill_from(&mut read_buf) && conn.inb.len() <= MAX_LINE * 64;
            std::mem::swap(&mut inb, &mut conn.inb);
            lines(&mut inb, |l| {
                let object = param(l, b"object_name").unwrap_or_default();
                let tag = param(l, b"tag").unwrap_or_default();
                if l.starts_with(b"LOCK ") {
                    match names.get_mut(object) {
                        Some(n) => n.waiting.push_back((c, tag.to_vec())),
                        None => {
                            locked(&mut clients, &mut dirty, &mut fence, c, object, tag);
                            let waiting = VecDeque::new();
                            names.insert(object.to_vec(), Name { holder: c, waiting });
                        }
                    }
                } else if l.starts_with(b"UNLOCK ") {
                    if names.get(object).is_some_and(|n| n.holder == c) {
                        pass_on(&mut names, &mut clients, &mut dirty, &mut fence, object);
                    }
                    let conn = clients.get_mut(&c).expect("the connection being read");
                    reply(conn, &mut dirty, c, b"UNLOCKED", None, object, tag);
                }
            });
            // what is left is the start of a line: back to its connection
            let conn = clients.get_mut(&c).expect("the connection being read");
            std::mem::swap(&mut inb, &mut conn.inb);
            if !open {
                // a client that goes lets go of what it held or waited for
                let mut gone = clients.remove(&c).unwrap();
                let _ = poll.registry().deregister(&mut gone.s);
                let held: Vec<Vec<u8>> = names
                    .iter_mut()
                    .filter_map(|(k, n)| {
                        n.waiting.retain(|w| w.0 != c);
                        (n.holder == c).then(|| k.clone())
                    })
                    .collect();
                for object in held {
                    pass_on(&mut names, &mut clients, &mut dirty, &mut fence, &object);
                }
            }
        }
        // one write per socket with something to say, as the agent does
        dirty.retain(|c| clients.get_mut(c).is_some_and(|c| c.flush() && c.dirty));
    }
}
