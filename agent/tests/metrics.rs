//! `metrics_listen` and `METRICS`: a real `snaplockd` scraped over HTTP by
//! a plain TCP client, its exposition read by Prometheus's own parser
//! (Python's `prometheus_client`), and the HTTP edge cases: other paths
//! and methods, malformed and oversized requests, silent clients, too
//! many connections.

mod common;
#[path = "common/prometheus.rs"]
mod prometheus;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use common::{Client, Daemon, TempDir, WAIT, assert_reply, cli_binary, loopback_addrs, now};
use prometheus::{kind, parse_exposition, value};

/// Sends `request` on a new connection and reads until the agent closes
/// it: the status line, the headers and the body.
fn http(addr: SocketAddr, request: &[u8]) -> (String, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(request).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("the answer, then EOF");
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head and a body");
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_owned(), headers.to_owned(), body.to_owned())
}

fn scrape(addr: SocketAddr) -> String {
    let (status, headers, body) = http(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("Content-Type: text/plain; version=0.0.4"),
        "{headers}"
    );
    assert!(
        headers.contains(&format!("Content-Length: {}", body.len())),
        "{headers}"
    );
    body
}

/// An agent with `--metrics-listen` on a free loopback port, and the
/// configuration file `conf`.
fn agent(tag: &str, conf: &str) -> (TempDir, Daemon, SocketAddr) {
    let dir = TempDir::new(tag);
    let addr = loopback_addrs(1)[0];
    let path = dir.path().join("snaplock.conf");
    std::fs::write(&path, conf).unwrap();
    let args = [
        "-c",
        path.to_str().unwrap(),
        "--metrics-listen",
        &addr.to_string(),
    ];
    let daemon = Daemon::start(&dir.socket(), &args, &[]);
    (dir, daemon, addr)
}

#[test]
fn a_scrape_is_read_by_prometheus_own_parser_and_counts_what_the_clients_saw() {
    let (dir, _daemon, addr) = agent("metrics-scrape", "metrics_prefixes=user/ shop/\n");
    let mut a = Client::connect(&dir.socket());
    let mut b = Client::connect(&dir.socket());
    // The name a"q\b<newline>c, escaped for the wire.
    let odd = r#"a\"q\\b\nc"#;
    let locked = a.request("LOCK object_name=user/1");
    assert_reply(&locked, "LOCKED", &[("object_name", "user/1")]);
    assert_reply(&a.request("UNLOCK object_name=user/1"), "UNLOCKED", &[]);
    let lock_odd = format!("LOCK object_name=\"{odd}\"");
    assert_reply(&a.request(&lock_odd), "LOCKED", &[]);
    let busy = b.request(&format!("{lock_odd};try=true"));
    assert_reply(&busy, "LOCKFAILED", &[("error", "busy")]);
    let invalid = b.request("LOCK object_name=x;duration=0");
    assert_reply(&invalid, "LOCKFAILED", &[("error", "invalid")]);
    b.send(&format!("{lock_odd};timeout={}", common::deadline_in(30.0)));
    // Answered after the LOCK before it was taken in: that one waits now.
    assert_reply(&b.request("LOCKSTATUS"), "LOCKREADY", &[]);

    let text = scrape(addr);
    let s = parse_exposition(&text);
    assert_eq!(kind(&s, "snaplock_grants"), "counter");
    assert_eq!(value(&s, "snaplock_grants_total", "{}"), 2.0);
    assert_eq!(kind(&s, "snaplock_lock_wait_seconds"), "histogram");
    assert_eq!(value(&s, "snaplock_lock_wait_seconds_count", "{}"), 2.0);
    let inf = r#"{"le": "+Inf"}"#;
    assert_eq!(value(&s, "snaplock_lock_wait_seconds_bucket", inf), 2.0);
    assert_eq!(kind(&s, "snaplock_lock_hold_seconds"), "histogram");
    assert_eq!(value(&s, "snaplock_lock_hold_seconds_count", "{}"), 1.0);
    assert_eq!(value(&s, "snaplock_held_locks", "{}"), 1.0);
    assert_eq!(value(&s, "snaplock_waiting_requests", "{}"), 1.0);
    let busy = r#"{"error": "busy"}"#;
    assert_eq!(value(&s, "snaplock_refusals_total", busy), 1.0);
    let invalid = r#"{"error": "invalid"}"#;
    assert_eq!(value(&s, "snaplock_refusals_total", invalid), 1.0);
    assert_eq!(value(&s, "snaplock_revocations_total", "{}"), 0.0);
    let ok = r#"{"result": "ok"}"#;
    assert_eq!(value(&s, "snaplock_transactions_total", ok), 0.0);
    assert_eq!(value(&s, "snaplock_is_leader", "{}"), 1.0);
    assert_eq!(value(&s, "snaplock_lock_delay_seconds", "{}"), 0.0);
    assert!(value(&s, "snaplock_epoch", "{}") > 1.0);
    assert!((0.0..=1.0).contains(&value(&s, "snaplock_trust", "{}")));
    assert_eq!(kind(&s, "snaplock_handover_seconds"), "histogram");
    // Alone, the peers' families have no samples.
    assert!(text.contains("# TYPE snaplock_peer_up gauge\n"), "{text}");
    assert!(!s.iter().any(|x| x[0].starts_with("snaplock_peer_")));
    // The name with a quote, a backslash and a newline came through.
    let odd_label = r#"{"object": "a\"q\\b\nc"}"#;
    assert_eq!(value(&s, "snaplock_object_grants_total", odd_label), 1.0);
    let user = r#"{"prefix": "user/"}"#;
    assert_eq!(value(&s, "snaplock_prefix_grants_total", user), 1.0);
    assert_eq!(value(&s, "snaplock_prefix_held_locks", user), 0.0);
    let shop = r#"{"prefix": "shop/"}"#;
    assert_eq!(value(&s, "snaplock_prefix_grants_total", shop), 0.0);

    // The client command gives the same families.
    let out = Command::new(cli_binary())
        .args(["--socket", dir.socket().to_str().unwrap(), "metrics"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let by_cli = parse_exposition(&String::from_utf8(out.stdout).unwrap());
    let families = |s: &[[String; 5]]| {
        let mut f: Vec<String> = s.iter().map(|x| x[0].clone()).collect();
        f.dedup();
        f
    };
    assert_eq!(families(&by_cli), families(&s));
    assert_eq!(value(&by_cli, "snaplock_grants_total", "{}"), 2.0);
}

#[test]
fn other_paths_methods_and_malformed_or_oversized_requests_get_their_http_error() {
    let (_dir, _daemon, addr) = agent("metrics-http", "");
    let (status, _, _) = http(addr, b"GET / HTTP/1.1\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, headers, _) = http(addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
    assert!(headers.contains("Allow: GET"), "{headers}");
    let (status, _, _) = http(addr, b"\x00\x01 what\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 400 Bad Request");
    let mut long = b"GET /metrics HTTP/1.1\r\nX-Long: ".to_vec();
    long.resize(16 << 10, b'a');
    let (status, _, _) = http(addr, &long);
    assert_eq!(status, "HTTP/1.1 431 Request Header Fields Too Large");
    // Still serving after all that.
    assert!(scrape(addr).contains("snaplock_grants_total 0"));
}

#[test]
fn a_silent_client_is_closed_and_connections_past_the_bound_at_once() {
    let (_dir, _daemon, addr) = agent("metrics-silent", "");
    let bound = snaplock_agent::metrics_http::MAX_CONNECTIONS;
    let start = now();
    let silent: Vec<TcpStream> = (0..bound)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    // Give the agent the time to accept them all before the next one.
    std::thread::sleep(Duration::from_millis(300));
    let mut extra = TcpStream::connect(addr).unwrap();
    extra.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = [0u8; 64];
    let n = match extra.read(&mut buf) {
        Ok(n) => n,
        Err(e) if e.kind() == ErrorKind::ConnectionReset => 0,
        Err(e) => panic!("the connection past the bound was not closed: {e}"),
    };
    assert_eq!(n, 0, "closed without an answer");
    assert!(
        start.elapsed() < snaplock_agent::metrics_http::READ_DEADLINE,
        "closed at once, not at the deadline"
    );
    for mut s in silent {
        s.set_read_timeout(Some(WAIT)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            other => panic!("a silent client was not closed: {other:?}"),
        }
    }
    let waited = start.elapsed();
    assert!(
        waited >= snaplock_agent::metrics_http::READ_DEADLINE,
        "closed after its deadline only ({waited:?})"
    );
    scrape(addr);
}
