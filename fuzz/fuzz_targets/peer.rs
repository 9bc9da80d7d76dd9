//! A cluster member's core fed by two fuzzed peers: messages of every kind
//! the peers may send, with fields picked from small pools (so that epochs,
//! ids, objects and requests meet) or raw lines, links going up and down,
//! client requests and time. Never a panic (the core's own
//! `debug_assert!`s included), output only to open clients and up links.

#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use snaplock_proto::wire::{Message, encode_to_vec};
use snaplock_proto::{
    ClientId, ClusterConfig, Config, Core, Credentials, Input, Now, Output, PeerId, Time,
    UnixTime,
};

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn pick<T: Clone>(&mut self, from: &[T]) -> Option<T> {
        Some(from[usize::from(self.byte()?) % from.len()].clone())
    }

    fn take(&mut self, n: usize) -> &[u8] {
        let (head, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        head
    }
}

fn now_of(us: u64) -> Now {
    Now {
        mono: Time::from_micros(us),
        wall: UnixTime(1_700_000_000_000_000 + us),
    }
}

const OBJECTS: [&str; 3] = ["a", "b;c", "\"d\\"];
const COMMANDS: [&str; 17] = [
    "LOCKSTARTED", "LOCKLEADERS", "LOCKPING", "LOCKPONG", "LOCKTICKETS", "LOCK", "UNLOCK",
    "LOCKED", "LOCKFAILED", "ADDTICKET", "ACTIVATELOCK", "LOCKACTIVATED", "DROPTICKET",
    "LOCKWAITING", "BOGUS", "LOCKLIST", "LOCKLISTED",
];
const PARTS: [&str; 8] = [
    "begin", "leader", "home", "end", "state-begin", "state", "reporter", "state-end",
];

/// `tickets=` of `LOCKTICKETS` batches: one record, two, an own home's
/// (empty home), cut short; of `LOCKLISTED`: a holder and a waiter, a
/// waiter with a fence.
const TICKETS: [&str; 6] = [
    "1048576 1 x 0 h 0 1 1:a0:7:node2/7",
    "2097152 2 s 3 t 5000 - 3:b;c37:05|0000000000|127.0.0.1:4002|10|node27:node2/71048576 3 x 0 s 0 0 1:a0:7:node2/8",
    "3145728 4 x 0 h 0 - 4:\"d\\37:06|0000000007|127.0.0.1:4003|11|node37:node3/1",
    "5 x 0 h",
    "1 0 1048576 1700000000000000 x 1:a5:node27:node2/72 1 0 0 s 3:b;c5:node37:node3/1",
    "2 1 5 0 c 1:a5:node27:node2/7",
];

/// Ids of the two fuzzed peers (their names and addresses match the links).
fn peer_id(n: usize) -> String {
    format!("{:02}|{:010}|127.0.0.1:{}|{}|node{}", 5 + n, 7 * n, 4002 + n, 10 + n, 2 + n)
}

fn message(b: &mut Bytes<'_>, ids: &[String], epochs: &[u64]) -> Option<Message> {
    let command = b.pick(&COMMANDS)?;
    let mut m = Message::new(command);
    let flags = b.byte()?;
    m.set_u64("epoch", b.pick(epochs)?);
    if flags & 1 != 0 {
        m.set("object_name", b.pick(&OBJECTS)?);
    }
    if flags & 2 != 0 {
        m.set("home", b.pick(ids)?);
    }
    if flags & 4 != 0 {
        m.set_u64("req", u64::from(b.byte()? % 8));
    }
    if flags & 8 != 0 {
        m.set_u64("fence", u64::from(b.byte()?) << 20);
    }
    if flags & 16 != 0 {
        for i in 0..usize::from(b.byte()? % 4) {
            m.set(&format!("leader{i}"), b.pick(ids)?);
        }
    }
    if flags & 32 != 0 {
        m.set("part", b.pick(&PARTS)?);
        m.set_u64("count", u64::from(b.byte()? % 6));
        m.set_u64("prev_epoch", b.pick(epochs)?);
        m.set_u64("ready_epoch", b.pick(epochs)?);
        m.set_u64("floor", u64::from(b.byte()?));
        m.set_u64("base", u64::from(b.byte()?) << 20);
        m.set_u64("delay", u64::from(b.byte()?) * 10_000);
        m.set("id", b.pick(ids)?);
        m.set("held", b.pick(&["true", "false"])?);
        m.set_u64("n", u64::from(b.byte()? % 3));
        m.set("tickets", b.pick(&TICKETS)?);
    }
    if flags & 64 != 0 {
        m.set("key", "node2/7");
        m.set_u64("number", u64::from(b.byte()?));
        m.set("ok", b.pick(&["true", "false", "x"])?);
        m.set("mode", b.pick(&["exclusive", "shared", "counted", "?"])?);
        m.set_u64("serial", u64::from(b.byte()?));
        m.set("active", b.pick(&["0", "1"])?);
        m.set("position", b.pick(&["1", "2", "0", "-1", "18446744073709551616"])?);
        m.set("progress", b.pick(&["true", "false", "x"])?);
        m.set("ready", b.pick(&["0", "1"])?);
        m.set("more", b.pick(&["0", "1"])?);
    }
    if flags & 128 != 0 {
        m.set("lockid", b.pick(ids)?);
        m.set("server_name", b.pick(&["node2", "node3"])?);
        m.set_u64("starttime", 1);
    }
    Some(m)
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let addrs = ["127.0.0.1:4001", "127.0.0.1:4002", "127.0.0.1:4003"];
    let config = Config {
        server_name: "node1".into(),
        max_tickets_per_object: 5,
        max_tickets: 64,
        cluster: ClusterConfig {
            listen: Some(addrs[0].parse().unwrap()),
            neighbors: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            seed: 1,
            pid: 9,
            ..ClusterConfig::default()
        },
        ..Config::default()
    };
    let mut now = 1_000_000u64;
    let mut core = Core::new(config, now_of(now));
    let mut ids = vec![peer_id(0), peer_id(1)];
    let epochs = [0u64, 1, 2, 1_700_000_000_000, 1_700_000_000_001];
    let mut up: BTreeSet<u64> = BTreeSet::new();
    let mut open: BTreeSet<u64> = BTreeSet::new();
    let mut next_peer = 1u64;
    let mut links = [None::<u64>, None];
    for _ in 0..400 {
        let Some(op) = b.byte() else { break };
        let n = usize::from(op >> 7);
        let input = match op % 8 {
            0 => {
                if let Some(p) = links[n].take() {
                    up.remove(&p);
                    Input::PeerDown { peer: PeerId(p) }
                } else {
                    let p = next_peer;
                    next_peer += 1;
                    links[n] = Some(p);
                    up.insert(p);
                    Input::PeerUp {
                        peer: PeerId(p),
                        name: format!("node{}", 2 + n),
                        addr: addrs[1 + n].parse().unwrap(),
                    }
                }
            }
            1..=4 => {
                let Some(p) = links[n] else { continue };
                // Raw bytes as the agent's framer cuts them (up to a `\n`;
                // the core reads or refuses them), or a line encoded from a
                // generated message.
                let line = if op & 64 != 0 {
                    let len = usize::from(b.byte().unwrap_or(0));
                    let raw = b.take(len);
                    raw[..raw.iter().position(|&c| c == b'\n').unwrap_or(raw.len())].to_vec()
                } else {
                    let Some(m) = message(&mut b, &ids, &epochs) else { break };
                    let mut line = encode_to_vec(&m);
                    line.pop();
                    line
                };
                Input::PeerLine { peer: PeerId(p), line }
            }
            5 => {
                let client = ClientId(u64::from(op >> 5) % 3);
                if open.insert(client.0) {
                    Input::ClientOpened { client, cred: Credentials::default() }
                } else {
                    let object = b.pick(&OBJECTS).unwrap_or("a");
                    let command = b
                        .pick(&["LOCK", "UNLOCK", "EXTEND", "ALIVE", "INFO", "LOCKSTATUS", "LISTTICKETS"])
                        .unwrap_or("LOCK");
                    let progress = b.pick(&["true", "false"]).unwrap_or("true");
                    let msg = Message::new(command)
                        .with("object_name", object)
                        .with("duration", "2")
                        .with("progress", progress);
                    Input::ClientMessage { client, msg }
                }
            }
            6 => {
                let client = ClientId(u64::from(op >> 5) % 3);
                if !open.remove(&client.0) {
                    continue;
                }
                Input::ClientClosed { client }
            }
            _ => {
                now += u64::from(b.byte().unwrap_or(0)) * 20_000;
                core.handle_timeout(now_of(now));
                drain(&mut core, &open, &up, &mut ids);
                continue;
            }
        };
        let _ = core.handle_input(now_of(now), input);
        drain(&mut core, &open, &up, &mut ids);
    }
});

/// Output only to open clients and up links; learns this core's own id
/// from its LOCKSTARTED so that later messages can name it.
fn drain(core: &mut Core, open: &BTreeSet<u64>, up: &BTreeSet<u64>, ids: &mut Vec<String>) {
    while let Some(out) = core.poll_output() {
        match &out {
            Output::Reply { client, .. } | Output::Close { client } => {
                assert!(open.contains(&client.0), "output to closed {client}: {out:?}");
            }
            Output::PeerSend { peer, line } => {
                assert!(up.contains(&peer.0), "sent on a link that is down: {out:?}");
                let msg = snaplock_proto::wire::parse_line(line).expect("a line that parses");
                if msg.command == "LOCKSTARTED" && ids.len() < 3 {
                    if let Some(id) = msg.get_str("lockid") {
                        ids.push(id.to_owned());
                    }
                }
            }
            Output::PeerClose { peer } => {
                assert!(up.contains(&peer.0), "closing a link that is down: {out:?}");
            }
            Output::Persist(_) => {}
            Output::WatchUnit { .. } | Output::UnwatchUnit { .. } => {
                panic!("a client without a cgroup owns a lock by unit: {out:?}")
            }
        }
    }
}
