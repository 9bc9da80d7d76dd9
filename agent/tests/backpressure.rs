//! Clients that ask faster than they read, with the real `snaplockd`: they
//! are slowed down, never allowed to stall the agent or fill its memory,
//! and a client that reads its replies gets every one of them
//! (snaplock.conf(5): max_pending_output, max_pending_total).

mod common;

use std::io::{ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use common::{Client, Daemon, TempDir, WAIT, assert_reply, now, param};

/// Resident memory of `pid`, in KiB.
fn rss_kib(pid: nix::unistd::Pid) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

fn config(dir: &TempDir, text: &str) -> String {
    let path = dir.path().join("snaplock.conf");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Connections that write `INFO` as fast as the agent takes it and never
/// read; returns how many of them the agent closed.
fn flood(hostile: &mut Vec<UnixStream>, chunk: &[u8]) -> usize {
    let mut closed = 0;
    hostile.retain_mut(|s| match s.write(chunk) {
        Ok(_) => true,
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => true,
        Err(_) => {
            closed += 1;
            false
        }
    });
    closed
}

fn hostile_connections(daemon: &Daemon, n: usize) -> Vec<UnixStream> {
    (0..n)
        .map(|_| {
            let s = UnixStream::connect(&daemon.socket).unwrap();
            s.set_nonblocking(true).unwrap();
            s
        })
        .collect()
}

#[test]
fn clients_that_write_and_never_read_neither_stall_the_agent_nor_fill_its_memory() {
    // At the default limits. Before backpressure, 200 such clients took
    // the agent to some 700 MB and held an ALIVE for seconds.
    const HOSTILE: usize = 200;
    common::ensure_fd_limit(HOSTILE as u64 + 64);
    let dir = TempDir::new("bp-hostile");
    let daemon = Daemon::start(&dir.socket(), &["--log-level", "error"], &[]);
    let mut good = Client::connect(&daemon.socket);
    assert_reply(
        &good.request("LOCK object_name=held;duration=600;tag=1"),
        "LOCKED",
        &[],
    );
    let mut hostile = hostile_connections(&daemon, HOSTILE);
    let chunk = b"INFO\n".repeat(13_000);
    let t0 = now();
    let (mut slowest, mut alive, mut peak) = (Duration::ZERO, 0, 0);
    let mut serial = 0;
    while t0.elapsed() < Duration::from_secs(4) {
        flood(&mut hostile, &chunk);
        serial += 1;
        let sent = now();
        let m = good.request(&format!("ALIVE serial={serial}"));
        assert_reply(&m, "ABSOLUTELY", &[("serial", &serial.to_string())]);
        slowest = slowest.max(sent.elapsed());
        alive += 1;
        peak = peak.max(rss_kib(daemon.pid()));
    }
    // Backpressure, not disconnection: every writer is still connected,
    // its socket full because the agent stopped reading it.
    assert_eq!(
        hostile.len(),
        HOSTILE,
        "the agent closed non-reading clients"
    );
    let status = good.request("INFO");
    assert_eq!(param(&status, "clients"), (HOSTILE + 1).to_string());
    assert_reply(&good.request("LOCKSTATUS"), "LOCKREADY", &[]);
    // Bounded memory: each paused client holds some 80 KiB at most.
    assert!(
        peak < 150 << 10,
        "the agent's resident memory reached {} MiB",
        peak >> 10
    );
    // Structural, with room for a loaded machine: the good client was
    // answered all along, within a second each time.
    assert!(alive >= 20, "only {alive} ALIVE answered in 4 s");
    assert!(
        slowest < Duration::from_secs(1),
        "an ALIVE took {slowest:?}"
    );
    eprintln!(
        "{HOSTILE} hostile clients: {alive} ALIVE, slowest {slowest:?}, peak RSS {} MiB",
        peak >> 10
    );
    drop(hostile);
    // Their locks are not at stake, the good client's lock is still held.
    let m = good.request("UNLOCK object_name=held;tag=2");
    assert_reply(&m, "UNLOCKED", &[]);
}

#[test]
fn past_max_pending_total_the_client_paused_longest_is_closed_and_its_locks_released() {
    const HOSTILE: usize = 64;
    common::ensure_fd_limit(HOSTILE as u64 + 64);
    let dir = TempDir::new("bp-total");
    let conf = config(
        &dir,
        "max_pending_output=262144\nmax_pending_total=1048576\n",
    );
    let daemon = Daemon::start(&dir.socket(), &["-c", &conf, "--log-level", "error"], &[]);
    let mut good = Client::connect(&daemon.socket);
    // The first hostile client holds a lock: it goes with the client.
    let mut first = Client::connect(&daemon.socket);
    assert_reply(
        &first.request("LOCK object_name=taken;duration=600;tag=1"),
        "LOCKED",
        &[],
    );
    first.stream.set_nonblocking(true).unwrap();
    let mut hostile = vec![first.stream.try_clone().unwrap()];
    let chunk = b"INFO\n".repeat(13_000);
    // It is paused before the others start.
    for _ in 0..15 {
        assert_eq!(flood(&mut hostile, &chunk), 0);
        std::thread::sleep(Duration::from_millis(20));
    }
    let t0 = now();
    hostile.extend(hostile_connections(&daemon, HOSTILE - 1));
    let mut closed = 0;
    while t0.elapsed() < WAIT && closed < HOSTILE / 2 {
        closed += flood(&mut hostile, &chunk);
        assert_reply(&good.request("LOCKSTATUS"), "LOCKREADY", &[]);
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        closed >= HOSTILE / 2,
        "{closed} of {HOSTILE} non-reading clients closed in {WAIT:?}"
    );
    // About 80 KiB each, 1 MiB in all: most of them are gone, the first
    // paused first, and its lock with it.
    let m = good.request(&format!(
        "LOCK object_name=taken;duration=10;timeout={};tag=2",
        common::deadline_in(5.0)
    ));
    assert_reply(&m, "LOCKED", &[("object_name", "taken")]);
    assert!(rss_kib(daemon.pid()) < 100 << 10);
}

#[test]
fn a_client_that_writes_faster_than_it_reads_gets_every_reply_in_order() {
    const N: usize = 100_000;
    let dir = TempDir::new("bp-pipeline");
    let daemon = Daemon::start(&dir.socket(), &["--log-level", "error"], &[]);
    let mut c = Client::connect(&daemon.socket);
    let mut writer = c.stream.try_clone().unwrap();
    writer
        .set_write_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let sender = std::thread::spawn(move || {
        let mut all = Vec::new();
        for i in 0..N {
            all.extend_from_slice(format!("ALIVE serial={i}\n").as_bytes());
        }
        writer.write_all(&all).unwrap();
    });
    let t0 = now();
    for i in 0..N {
        // Slower than the agent answers: about 100,000 replies per second
        // at most, and far more requests than max_pending_output holds.
        if i % 500 == 499 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let m = c.recv();
        assert_eq!(m.command, "ABSOLUTELY", "reply {i}: {m}");
        assert_eq!(
            m.get_str("serial"),
            Some(i.to_string().as_str()),
            "reply {i} out of order"
        );
        assert!(t0.elapsed() < Duration::from_secs(120), "too slow at {i}");
    }
    sender.join().unwrap();
}

#[test]
fn replies_larger_than_max_pending_output_never_close_a_client_that_reads() {
    let dir = TempDir::new("bp-bigreply");
    let conf = config(
        &dir,
        "max_pending_output=65536\nmax_line_length=32768\nmax_tickets_per_object=10\n",
    );
    let daemon = Daemon::start(&dir.socket(), &["-c", &conf, "--log-level", "error"], &[]);
    let mut c = Client::connect(&daemon.socket);
    // 2,000 held locks with long names: a list of some 500 KB.
    let name = "n".repeat(100);
    for batch in 0..20 {
        let mut lines = String::new();
        for i in 0..100 {
            lines.push_str(&format!(
                "LOCK object_name={name}{batch}_{i};duration=600;tag={i}\n"
            ));
        }
        c.stream.write_all(lines.as_bytes()).unwrap();
        for _ in 0..100 {
            assert_eq!(c.recv().command, "LOCKED");
        }
    }
    let list = c.request("LISTTICKETS");
    assert_eq!(list.command, "TICKETLIST");
    let text = param(&list, "list");
    assert!(
        text.len() <= 65536 / 4 + 512,
        "a TICKETLIST of {} bytes",
        text.len()
    );
    let last = text.lines().last().unwrap();
    let more: usize = last
        .strip_prefix("... and ")
        .and_then(|r| r.strip_suffix(" more tickets"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the list ends with {last:?}"));
    let shown = text
        .lines()
        .filter(|l| l.starts_with("ticket id: "))
        .count();
    assert_eq!(shown + more, 2000, "{shown} shown and {more} more");
    // Pipelined ALIVEs each echoing 30 KB: 300 KB of replies, ten times
    // max_pending_output, to a client that reads them.
    let serial = "s".repeat(30_000);
    let many = format!("ALIVE serial={serial}\n").repeat(10);
    c.stream.write_all(many.as_bytes()).unwrap();
    for _ in 0..10 {
        let m = c.recv();
        assert_reply(&m, "ABSOLUTELY", &[("serial", &serial)]);
    }
    // Still connected, its locks still held.
    let status = c.request("INFO");
    assert_reply(&status, "STATUS", &[("tickets", "2000")]);
}

#[test]
fn limits_that_cannot_hold_one_reply_are_refused_at_start() {
    let dir = TempDir::new("bp-limits");
    let conf = config(&dir, "max_pending_output=65536\n");
    let out = common::snaplockd()
        .args(["--check-config", "-c", &conf, "-n", "test_agent"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("max_pending_output=65536 is less than twice max_line_length=65536"),
        "{stderr}"
    );
}
