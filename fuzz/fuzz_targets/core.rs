//! Any sequence of shell events into the `Core`: never a panic (the core's
//! own `debug_assert!`s check that holders stay compatible), replies only
//! to open connections, at most one outcome per LOCK, timers that go away.

#![no_main]

use std::collections::{BTreeMap, BTreeSet};

use libfuzzer_sys::fuzz_target;
use snaplock_proto::wire::{Message, parse};
use snaplock_proto::{
    ClientId, Config, Core, Credentials, Input, Malformed, Now, Output, Time, UnixTime,
};

const OBJECTS: [&[u8]; 3] = [b"a", b"b;c", b"\"d\\"];

/// Reads the fuzzer's bytes as a sequence of small choices.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> Option<T> {
        Some(from[usize::from(self.byte()?) % from.len()])
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

fn wall(us: u64) -> String {
    UnixTime(1_700_000_000_000_000 + us).to_wire()
}

/// A LOCK, UNLOCK or EXTEND made of the fuzzer's choices.
fn request(b: &mut Bytes<'_>, now: u64, tag: u64) -> Option<Message> {
    let command = b.pick(&["LOCK", "LOCK", "LOCK", "UNLOCK", "EXTEND"])?;
    let mut msg = Message::new(command).with("object_name", b.pick(&OBJECTS)?);
    msg.set_u64("tag", tag);
    let flags = b.byte()?;
    if flags & 1 != 0 {
        msg.set_u64("pid", u64::from(b.byte()? % 4) + 1);
    }
    if flags & 2 != 0 {
        msg.set("mode", b.pick(&["shared", "counted"])?);
        if flags & 4 != 0 {
            msg.set_u64("limit", u64::from(b.byte()? % 4));
        }
    } else if flags & 4 != 0 {
        msg.set("policy", b.pick(&["soft", "timed", "hard", "bogus"])?);
        if flags & 8 != 0 {
            msg.set("quiet", format!("{}", b.byte()? % 4));
        }
    }
    if flags & 16 != 0 {
        msg.set("try", "true");
    }
    if flags & 32 != 0 {
        msg.set("detach", "true");
    }
    if flags & 128 != 0 {
        msg.set("owner", "cgroup");
    }
    if flags & 64 != 0 {
        let ahead = u64::from(b.byte()?) * 50_000;
        msg.set("timeout", wall((now + ahead).saturating_sub(1_000_000)));
    }
    msg.set("duration", format!("{}", b.byte()? % 5));
    msg.set("unlock_duration", format!("{}", b.byte()? % 3));
    Some(msg)
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let config = Config {
        server_name: "node1".into(),
        max_clients: 4,
        max_tickets_per_object: 5,
        ..Config::default()
    };
    let mut now = 0u64;
    let mut core = Core::new(config, now_of(now));
    let mut open = BTreeSet::new();
    let mut outcomes: BTreeMap<u64, &'static str> = BTreeMap::new();
    let mut tag = 0u64;
    let mut stopped = false;
    for _ in 0..512 {
        let Some(op) = b.byte() else { break };
        let client = ClientId(u64::from(op >> 4) % 6);
        let input = match op % 8 {
            0 => Input::ClientOpened {
                client,
                cred: Credentials {
                    pid: Some(7),
                    uid: Some(u32::from(op) % 2),
                    gid: None,
                    // Some clients in one of two cgroups, for `owner=cgroup`.
                    cgroup: [None, Some(1), Some(2)][usize::from(op >> 4) % 3],
                },
            },
            // The shell reports one of the two cgroups empty, watched or not.
            1 if op & 0x80 != 0 => Input::UnitEmpty {
                unit: 1 + u64::from(op >> 4 & 1),
            },
            1 => Input::ClientClosed { client },
            2..=4 => {
                tag += 1;
                let Some(msg) = request(&mut b, now, tag) else {
                    break;
                };
                Input::ClientMessage { client, msg }
            }
            5 => {
                let n = usize::from(b.byte().unwrap_or(0));
                let line = b.take(n).to_vec();
                match parse(&line) {
                    Ok(mut msg) => {
                        // Tags are the target's to count outcomes by.
                        msg.remove("tag");
                        Input::ClientMessage { client, msg }
                    }
                    Err(e) => Input::ClientMalformed {
                        client,
                        line,
                        error: Malformed::Parse(e),
                    },
                }
            }
            6 => {
                // Time passes; the shell wakes at every timer on the way,
                // or, half the time, only once at the end (a late shell).
                let step = u64::from(b.byte().unwrap_or(0)) * 37_000;
                let until = now + step;
                let mut wakeups = 0;
                while let Some(at) = core
                    .poll_timeout()
                    .filter(|at| at.as_micros() <= until && op & 16 == 0)
                {
                    now = now.max(at.as_micros());
                    core.handle_timeout(now_of(now));
                    wakeups += 1;
                    assert!(wakeups < 10_000, "a timer that does not go away");
                    drain(&mut core, &open, &mut outcomes);
                }
                now = until;
                core.handle_timeout(now_of(now));
                drain(&mut core, &open, &mut outcomes);
                continue;
            }
            _ if op == 0xff && !stopped => {
                stopped = true;
                core.shutdown(now_of(now));
                drain(&mut core, &open, &mut outcomes);
                continue;
            }
            _ => Input::ClientMalformed {
                client,
                line: vec![b'x'; 300],
                error: Malformed::TooLong,
            },
        };
        let result = core.handle_input(now_of(now), input.clone());
        match (&input, &result) {
            (Input::ClientOpened { client, .. }, Ok(())) => assert!(open.insert(client.0)),
            (Input::ClientClosed { client }, Ok(())) => assert!(open.remove(&client.0)),
            (Input::ClientOpened { client, .. }, Err(_)) => assert!(open.contains(&client.0)),
            (_, Err(_)) => {}
            (
                Input::ClientMessage { client, .. } | Input::ClientMalformed { client, .. },
                Ok(()),
            ) => {
                assert!(open.contains(&client.0))
            }
            // This target drives one computer: no peer inputs.
            (Input::PeerUp { .. } | Input::PeerLine { .. } | Input::PeerDown { .. }, _) => {}
            (Input::UnitEmpty { .. }, Ok(())) => {}
        }
        drain(&mut core, &open, &mut outcomes);
        core.handle_timeout(now_of(now));
        drain(&mut core, &open, &mut outcomes);
    }
});

/// Replies go to open connections only; every request (each has its own
/// tag) is granted or refused at most once.
fn drain(core: &mut Core, open: &BTreeSet<u64>, outcomes: &mut BTreeMap<u64, &'static str>) {
    while let Some(out) = core.poll_output() {
        if matches!(
            out,
            Output::Persist(_) | Output::WatchUnit { .. } | Output::UnwatchUnit { .. }
        ) {
            continue;
        }
        let (Output::Reply { client, .. } | Output::Close { client }) = &out else {
            panic!("one computer spoke to a peer: {out:?}");
        };
        assert!(
            open.contains(&client.0),
            "output to closed {client}: {out:?}"
        );
        let Output::Reply { reply, .. } = out else {
            continue;
        };
        let msg = reply.into_message();
        let Some(tag) = msg.get_str("tag").and_then(|t| t.parse().ok()) else {
            continue;
        };
        let outcome = match (msg.command.as_str(), msg.get_str("error")) {
            ("LOCKED", _) => "LOCKED",
            ("LOCKFAILED", _) => "LOCKFAILED",
            _ => continue,
        };
        if let Some(first) = outcomes.insert(tag, outcome) {
            panic!("tag {tag}: {outcome} after {first}");
        }
    }
}
