//! `snaplock-hold`: loads a running agent with many held locks and many idle
//! connections, and reports the agent's memory per held lock.
//!
//! ```text
//! snaplock-hold --socket PATH [--locks N] [--conns C] [--idle K] [--hold SECS]
//! ```
//!
//! It opens `C` connections and, pipelined over them, takes `N` exclusive
//! locks on distinct names (lease one hour), reads the agent's resident
//! memory (`VmRSS` of the pid that `SO_PEERCRED` reports for the socket)
//! before and after, prints one JSON line, then opens `K` idle connections
//! and keeps everything for `SECS` seconds (so another load generator can
//! measure throughput meanwhile) before closing it all, which releases
//! every lock.

#![allow(
    clippy::disallowed_methods,
    reason = "a load tool: it times itself and reads the wall clock"
)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use snaplock_tests::procfs::rss_kib;

struct Args {
    socket: PathBuf,
    locks: usize,
    conns: usize,
    idle: usize,
    hold: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        socket: PathBuf::new(),
        locks: 1_000_000,
        conns: 16,
        idle: 0,
        hold: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--socket" => args.socket = PathBuf::from(value()?),
            "--locks" => args.locks = value()?.parse().map_err(|e| format!("--locks: {e}"))?,
            "--conns" => args.conns = value()?.parse().map_err(|e| format!("--conns: {e}"))?,
            "--idle" => args.idle = value()?.parse().map_err(|e| format!("--idle: {e}"))?,
            "--hold" => args.hold = value()?.parse().map_err(|e| format!("--hold: {e}"))?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.socket.as_os_str().is_empty() || args.conns == 0 {
        return Err(
            "usage: snaplock-hold --socket PATH [--locks N] [--conns C] [--idle K] [--hold SECS]"
                .into(),
        );
    }
    Ok(args)
}

fn run(args: &Args) -> Result<(), String> {
    let connect =
        || UnixStream::connect(&args.socket).map_err(|e| format!("{}: {e}", args.socket.display()));
    let mut conns: Vec<UnixStream> = (0..args.conns)
        .map(|_| connect())
        .collect::<Result<_, _>>()?;
    let pid = getsockopt(&conns[0], PeerCredentials)
        .map_err(|e| format!("SO_PEERCRED: {e}"))?
        .pid();
    let before = rss_kib(pid)?;
    let start = Instant::now();
    let per_conn = args.locks.div_ceil(args.conns);
    let mut readers: Vec<BufReader<UnixStream>> = conns
        .iter()
        .map(|c| c.try_clone().map(BufReader::new))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut granted = 0usize;
    let mut failed = 0usize;
    // Pipelined in batches so neither side's buffers grow without bound.
    let batch = 256;
    let mut next = vec![0usize; args.conns];
    loop {
        let mut sent = vec![0usize; args.conns];
        for (c, conn) in conns.iter_mut().enumerate() {
            let mut out = Vec::with_capacity(batch * 64);
            while sent[c] < batch && next[c] < per_conn && c * per_conn + next[c] < args.locks {
                let i = c * per_conn + next[c];
                writeln!(
                    out,
                    "LOCK object_name=hold-{i:08};duration=3600;timeout={};pid={}",
                    far_future(),
                    i + 1
                )
                .map_err(|e| e.to_string())?;
                next[c] += 1;
                sent[c] += 1;
            }
            conn.write_all(&out).map_err(|e| format!("write: {e}"))?;
        }
        if sent.iter().all(|&s| s == 0) {
            break;
        }
        for (c, reader) in readers.iter_mut().enumerate() {
            for _ in 0..sent[c] {
                let mut line = String::new();
                if reader
                    .read_line(&mut line)
                    .map_err(|e| format!("read: {e}"))?
                    == 0
                {
                    return Err("the agent closed the connection".into());
                }
                if line.starts_with("LOCKED ") {
                    granted += 1;
                } else {
                    failed += 1;
                    if failed <= 3 {
                        eprintln!("snaplock-hold: {}", line.trim_end());
                    }
                }
            }
        }
    }
    let took = start.elapsed();
    let after = rss_kib(pid)?;
    let per_lock = if granted > 0 {
        (after.saturating_sub(before)) as f64 * 1024.0 / granted as f64
    } else {
        0.0
    };
    println!(
        "{{\"locks_held\":{granted},\"failed\":{failed},\"conns\":{},\"rss_before_kib\":{before},\"rss_after_kib\":{after},\"bytes_per_lock\":{per_lock:.0},\"lock_rate_per_s\":{:.0}}}",
        args.conns,
        granted as f64 / took.as_secs_f64()
    );
    let idle: Vec<UnixStream> = (0..args.idle)
        .map(|_| connect())
        .collect::<Result<_, _>>()?;
    if args.idle > 0 {
        eprintln!(
            "snaplock-hold: {} idle connections open; agent rss {} KiB",
            idle.len(),
            rss_kib(pid)?
        );
    }
    std::thread::sleep(Duration::from_secs(args.hold));
    drop(idle);
    Ok(())
}

fn far_future() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        + 600
}

fn main() {
    match parse_args().and_then(|a| run(&a)) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("snaplock-hold: error: {e}");
            std::process::exit(1);
        }
    }
}
