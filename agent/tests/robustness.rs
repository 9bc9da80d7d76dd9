//! Nothing a client sends may crash or stall the agent:
//! malformed lines, oversized lines, binary garbage, clients that never
//! read, too many clients.

mod common;

use std::io::{ErrorKind, Write};
use std::net::Shutdown;
use std::time::Duration;

use common::{Client, WAIT, assert_reply, now, param, start};

#[test]
fn malformed_lines_get_invalid_and_the_connection_stays_open() {
    let (_dir, agent) = start("malformed", |_| {});
    let mut c = Client::connect(agent.socket());
    for (line, command) in [
        ("lock object_name=x", None),
        ("LOCK object_name=\"unterminated", Some("LOCK")),
        ("LOCK =x", Some("LOCK")),
        ("LOCK 9x=1", Some("LOCK")),
        ("LOCK a=\"x\"b", Some("LOCK")),
        ("<nocolon LOCK", Some("LOCK")),
        ("   ", None),
        ("LOCK;", None),
    ] {
        let m = c.request(line);
        assert_eq!(m.command, "INVALID", "{line:?}: {m}");
        assert_eq!(m.get_str("command"), command, "{line:?}: {m}");
        assert!(!param(&m, "reason").is_empty());
    }
    assert_reply(&c.request("LOCKSTATUS"), "LOCKREADY", &[]);
}

#[test]
fn crlf_lines_and_empty_lines_are_accepted() {
    let (_dir, agent) = start("crlf", |_| {});
    let mut c = Client::connect(agent.socket());
    c.stream
        .write_all(b"\n\r\n\nLOCKSTATUS\r\nLOCK object_name=crlf\r\n")
        .unwrap();
    assert_reply(&c.recv(), "LOCKREADY", &[]);
    assert_reply(&c.recv(), "LOCKED", &[("object_name", "crlf")]);
    c.assert_silent_for(Duration::from_millis(100));
}

#[test]
fn a_last_line_without_newline_is_answered_at_eof() {
    let (_dir, agent) = start("nonl", |_| {});
    let mut c = Client::connect(agent.socket());
    c.stream.write_all(b"LOCKSTATUS").unwrap();
    c.assert_silent_for(Duration::from_millis(100));
    c.stream.shutdown(Shutdown::Write).unwrap();
    assert_reply(&c.recv(), "LOCKREADY", &[]);
}

#[test]
fn a_megabyte_line_without_newline_gets_invalid_and_is_closed_while_others_are_served() {
    let (_dir, agent) = start("huge", |_| {});
    let mut other = Client::connect(agent.socket());
    assert_reply(&other.request("LOCK object_name=kept"), "LOCKED", &[]);
    let mut big = Client::connect(agent.socket());
    let mut writer = big.stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let mut chunk = b"LOCK object_name=".to_vec();
        chunk.resize(1 << 20, b'a');
        // The agent may close before it has read everything: a write error
        // is expected then, not a failure.
        writer.write_all(&chunk).err().map(|e| e.kind())
    });
    let lines = big.expect_eof();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let m = snaplock_proto::wire::parse(lines[0].as_bytes()).unwrap();
    assert_reply(
        &m,
        "INVALID",
        &[("command", "LOCK"), ("reason", "line too long")],
    );
    let write_error = sender.join().unwrap();
    assert!(
        matches!(
            write_error,
            None | Some(ErrorKind::BrokenPipe | ErrorKind::ConnectionReset)
        ),
        "{write_error:?}"
    );
    assert_reply(
        &other.request("INFO"),
        "STATUS",
        &[("clients", "1"), ("tickets", "1")],
    );
}

#[test]
fn a_line_at_the_limit_is_served_and_one_byte_more_is_not() {
    let (_dir, agent) = start("limit", |cfg| cfg.max_line_length = 256);
    let mut c = Client::connect(agent.socket());
    let prefix = "LOCK object_name=";
    let fits = format!("{prefix}{}", "x".repeat(256 - prefix.len()));
    assert_reply(&c.request(&fits), "LOCKED", &[]);
    let too_long = format!("{prefix}{}", "y".repeat(257 - prefix.len()));
    c.send(&too_long);
    let lines = c.expect_eof();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("INVALID "), "{lines:?}");
}

/// A seeded xorshift: the garbage is the same on every run.
fn garbage(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

#[test]
fn binary_garbage_never_crashes_or_stalls_the_agent() {
    let (_dir, agent) = start("garbage", |_| {});
    let mut witness = Client::connect(agent.socket());
    for seed in 1..=20u64 {
        let mut c = Client::connect(agent.socket());
        let mut bytes = garbage(seed, 200_000);
        let one_long_line = seed % 2 == 0;
        if one_long_line {
            // No newline at all: one line far over max_line_length.
            bytes
                .iter_mut()
                .filter(|b| **b == b'\n')
                .for_each(|b| *b = b'x');
        }
        bytes.extend_from_slice(format!("\nALIVE serial={seed}\n").as_bytes());
        let mut writer = c.stream.try_clone().unwrap();
        // The agent closes the connection with the long line, maybe before
        // reading all of it: a failed write is expected then.
        let sender = std::thread::spawn(move || writer.write_all(&bytes).is_ok());
        let mut answered = false;
        while let Some(line) = c.raw_line_within(WAIT) {
            let m =
                snaplock_proto::wire::parse(&line).expect("every reply is a well-formed message");
            if m.command == "ABSOLUTELY" {
                assert_eq!(m.get_str("serial"), Some(seed.to_string().as_str()));
                answered = true;
                break;
            }
            assert!(
                ["INVALID", "UNKNOWN", "LOCKFAILED", "LOCKED", "UNLOCKED"]
                    .contains(&m.command.as_str()),
                "{m}"
            );
        }
        assert_eq!(
            answered, !one_long_line,
            "seed {seed}: served after garbage, closed after a too long line"
        );
        let _ = sender.join();
        assert_reply(&witness.request("LOCKSTATUS"), "LOCKREADY", &[]);
    }
}

#[test]
fn a_client_that_never_reads_is_slowed_down_and_the_others_are_served() {
    let (_dir, agent) = start("noread", |_| {});
    let mut witness = Client::connect(agent.socket());
    let hog = Client::connect(agent.socket());
    let mut writer = hog.stream.try_clone().unwrap();
    writer.set_nonblocking(true).unwrap();
    // ~200 bytes of reply per 5-byte request: its replies soon back up, the
    // agent stops reading it, and its own socket fills.
    let batch = b"INFO\n".repeat(1000);
    let t0 = now();
    let mut blocked_since = None;
    loop {
        assert!(
            t0.elapsed() < WAIT,
            "the agent kept reading a client that never reads"
        );
        match writer.write(&batch) {
            Ok(_) => blocked_since = None,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let since = *blocked_since.get_or_insert_with(now);
                if since.elapsed() > Duration::from_millis(300) {
                    break;
                }
            }
            Err(e) => panic!("the agent closed the client: {e}"),
        }
        assert_reply(&witness.request("LOCKSTATUS"), "LOCKREADY", &[]);
    }
    let status = witness.request("INFO");
    assert_reply(&status, "STATUS", &[("clients", "2")]);
    drop(writer);
    drop(hog);
}

#[test]
fn clients_beyond_max_clients_get_invalid_and_are_closed() {
    let (_dir, agent) = start("maxclients", |cfg| cfg.core.max_clients = 2);
    let mut a = Client::connect(agent.socket());
    let mut b = Client::connect(agent.socket());
    assert_reply(&a.request("LOCKSTATUS"), "LOCKREADY", &[]);
    assert_reply(&b.request("LOCKSTATUS"), "LOCKREADY", &[]);
    let mut c = Client::connect(agent.socket());
    let lines = c.expect_eof();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("INVALID ") && lines[0].contains("too many clients"),
        "{lines:?}"
    );
    assert_reply(&a.request("INFO"), "STATUS", &[("clients", "2")]);
    drop(b);
    std::thread::sleep(Duration::from_millis(100));
    let mut d = Client::connect(agent.socket());
    assert_reply(&d.request("LOCKSTATUS"), "LOCKREADY", &[]);
}

#[test]
fn object_names_with_every_escape_are_echoed_exactly() {
    let (_dir, agent) = start("escape", |_| {});
    let mut c = Client::connect(agent.socket());
    let name = "https://example.com/a;b=\"c\"\\d e";
    let mut msg = snaplock_proto::wire::Message::new("LOCK").with("object_name", name);
    msg.set("tag", "5");
    let line = snaplock_proto::wire::encode_to_vec(&msg);
    c.stream.write_all(&line).unwrap();
    let m = c.recv();
    assert_reply(&m, "LOCKED", &[("object_name", name), ("tag", "5")]);
}

#[test]
fn sixty_thousand_pipelined_requests_are_all_answered_in_order() {
    const N: usize = 60_000;
    let (_dir, agent) = start("pipeline", |cfg| cfg.max_pending_output = 64 << 20);
    let mut c = Client::connect(agent.socket());
    let mut writer = c.stream.try_clone().unwrap();
    // Over a megabyte of requests: more than one iteration's read budget.
    let sender = std::thread::spawn(move || {
        let mut all = Vec::new();
        for i in 0..N {
            all.extend_from_slice(format!("ALIVE serial={i}\n").as_bytes());
        }
        assert!(all.len() > 1 << 20);
        writer.write_all(&all).unwrap();
    });
    for i in 0..N {
        let m = c.recv();
        assert_eq!(m.command, "ABSOLUTELY", "{m}");
        assert_eq!(
            m.get_str("serial"),
            Some(i.to_string().as_str()),
            "reply {i} out of order"
        );
    }
    sender.join().unwrap();
}
