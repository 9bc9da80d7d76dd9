//! `snaplock-load`: lock+unlock in a closed loop against running agents,
//! the requests written as the benchmark's clients write them. It is the
//! workload `packaging/pgo.sh` trains the optimizer with, and a quick
//! check of a build's throughput without the benchmark harness.
//!
//! ```text
//! snaplock-load --socket PATH[,PATH...] [--clients N] [--secs S] [--one-name] [--wait-ready S]
//! ```
//!
//! `N` threads (default 1, at most 1000), one connection each, client `c`
//! on the `c % n`-th socket, with a `pid` of its own. Each sends `LOCK`
//! (with `duration`, `timeout`, `pid` and `tag`, as lockgen's clients
//! write it), reads `LOCKED`, sends `UNLOCK`, reads `UNLOCKED`, for `S`
//! seconds (default 2). Names are the client's
//! own, or one for all with `--one-name` (each then waits its turn). With
//! `--wait-ready`, first asks every socket `LOCKSTATUS` until each answers
//! `LOCKREADY`, for at most that many seconds. Prints one JSON line; any
//! other answer is an error (exit status 1).

#![allow(
    clippy::disallowed_methods,
    reason = "a load tool: it times itself and reads the wall clock"
)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use snaplock_tests::line_conn::LineConn;

/// Asks `socket` `LOCKSTATUS` until it answers `LOCKREADY`, or `until`.
fn wait_ready(socket: &Path, until: Instant) -> Result<(), String> {
    loop {
        let answer =
            LineConn::open(socket).and_then(|mut c| c.ask("LOCKSTATUS\n").map(str::to_owned));
        match answer {
            Ok(a) if a == "LOCKREADY" => return Ok(()),
            Ok(_) | Err(_) if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(a) => return Err(format!("{}: still {a}", socket.display())),
            Err(e) => return Err(e),
        }
    }
}

/// One client's loop: lock+unlock pairs until `end`. Its `pid`, the
/// key's second half, is its own, as a process of its own would have it
/// (one key may ask for a name once at a time).
fn client(socket: &Path, name: &str, pid: u64, end: Instant) -> Result<u64, String> {
    let mut conn = LineConn::open(socket)?;
    let mut pairs = 0u64;
    while Instant::now() < end {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|e| format!("clock: {e}"))?;
        let timeout = wall.as_secs_f64() + 10.0;
        let lock = format!(
            "LOCK object_name={name};duration=30;timeout={timeout:.3};pid={pid};tag={pairs}\n"
        );
        if conn.ask(&lock)? != "LOCKED" {
            return Err(format!("not granted: {}", conn.line.trim_end()));
        }
        let unlock = format!("UNLOCK object_name={name};pid={pid};tag={pairs}\n");
        if conn.ask(&unlock)? != "UNLOCKED" {
            return Err(format!("not released: {}", conn.line.trim_end()));
        }
        pairs += 1;
    }
    Ok(pairs)
}

fn run(
    sockets: &[PathBuf],
    clients: usize,
    secs: f64,
    one_name: bool,
    ready: f64,
) -> Result<(), String> {
    let until = Instant::now() + Duration::from_secs_f64(ready);
    if ready > 0.0 {
        for s in sockets {
            wait_ready(s, until)?;
        }
    }
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let run = std::process::id();
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let socket = sockets[c % sockets.len()].clone();
            let name = if one_name {
                format!("load-{run}")
            } else {
                format!("load-{run}-{c}")
            };
            let pid = u64::from(run) * 1000 + c as u64 + 1;
            std::thread::spawn(move || client(&socket, &name, pid, end))
        })
        .collect();
    let mut pairs = 0;
    for h in handles {
        pairs += h.join().map_err(|_| "a client panicked".to_owned())??;
    }
    let t = start.elapsed().as_secs_f64();
    println!(
        "{{\"measure\":\"lock+unlock\",\"agents\":{},\"clients\":{clients},\"names\":\"{}\",\"pairs\":{pairs},\"secs\":{t:.2},\"per_s\":{:.0}}}",
        sockets.len(),
        if one_name { "one" } else { "one per client" },
        pairs as f64 / t
    );
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut sockets = Vec::new();
    let (mut clients, mut secs, mut one_name, mut ready) = (1usize, 2.0f64, false, 0.0f64);
    let mut it = args.iter();
    let mut bad = None;
    while let Some(a) = it.next() {
        let mut value = |what: &str| it.next().cloned().ok_or(format!("{what} needs a value"));
        let step = match a.as_str() {
            "--socket" => {
                value("--socket").map(|v| sockets = v.split(',').map(PathBuf::from).collect())
            }
            "--clients" => value("--clients").and_then(|v| {
                v.parse()
                    .map(|n| clients = n)
                    .map_err(|e| format!("--clients: {e}"))
            }),
            "--secs" => value("--secs").and_then(|v| {
                v.parse()
                    .map(|n| secs = n)
                    .map_err(|e| format!("--secs: {e}"))
            }),
            "--wait-ready" => value("--wait-ready").and_then(|v| {
                v.parse()
                    .map(|n| ready = n)
                    .map_err(|e| format!("--wait-ready: {e}"))
            }),
            "--one-name" => {
                one_name = true;
                Ok(())
            }
            other => Err(format!("unknown argument {other:?}")),
        };
        if let Err(e) = step {
            bad = Some(e);
            break;
        }
    }
    let result = match bad {
        Some(e) => Err(e),
        None if sockets.is_empty()
            || clients == 0
            || clients > 1000
            || !secs.is_finite()
            || secs <= 0.0 =>
        {
            Err(
            "usage: snaplock-load --socket PATH[,PATH...] [--clients N] [--secs S] [--one-name] [--wait-ready S]"
                .into(),
            )
        }
        None => run(&sockets, clients, secs, one_name, ready),
    };
    if let Err(e) = result {
        eprintln!("snaplock-load: {e}");
        std::process::exit(1);
    }
}
