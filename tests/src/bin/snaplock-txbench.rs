//! `snaplock-txbench`: committed lock transactions per second against a
//! running agent, beside lock+unlock from the same driver, and the agent's
//! memory per live transaction variable.
//!
//! ```text
//! snaplock-txbench --socket PATH[,PATH...] rate --clients N [--secs S] [--shared]
//! snaplock-txbench --socket PATH memory [--vars N]
//! ```
//!
//! With several sockets (the agents of a cluster), client `c` connects to
//! the `c % n`-th.
//!
//! `rate`: N threads, one connection each, closed loop (each sends one
//! request and blocks reading its reply before the next), for S seconds
//! (default 5) of transactions, then S seconds of lock+unlock. A
//! transaction has 3 statements and commits: `assert not exists
//! Month-End/F`, `set Entry/F/<client> dup`, `exists Entry/F/<client>`; on
//! one namespace per client, or on one shared namespace (`--shared`). A
//! lock+unlock is `LOCK` of a name of the client's own, then `UNLOCK`: two
//! round trips. Prints one JSON line per measure.
//!
//! `memory`: one connection sets N variables (default and most 10000: a
//! connection's bound, all its sessions together) in transactions of 32
//! `set`s, 5000 per pid, and reads the agent's `VmRSS` (the pid
//! `SO_PEERCRED` names) before and after.

#![allow(clippy::disallowed_methods, reason = "a load tool: it times itself")]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use snaplock_tests::line_conn::LineConn;
use snaplock_tests::procfs::rss_kib;

/// Runs `op` in a closed loop on `clients` connections for `secs`;
/// returns the operations done and the seconds taken.
fn closed_loop(
    sockets: &[PathBuf],
    clients: usize,
    secs: f64,
    op: fn(&mut LineConn, usize, u64, bool) -> Result<(), String>,
    shared: bool,
) -> Result<(u64, f64), String> {
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let socket = sockets[c % sockets.len()].clone();
            std::thread::spawn(move || -> Result<u64, String> {
                let mut conn = LineConn::open(&socket)?;
                let mut done = 0u64;
                while Instant::now() < end {
                    op(&mut conn, c, done, shared)?;
                    done += 1;
                }
                Ok(done)
            })
        })
        .collect();
    let mut total = 0;
    for h in handles {
        total += h.join().map_err(|_| "a client panicked".to_owned())??;
    }
    Ok((total, start.elapsed().as_secs_f64()))
}

fn transaction(conn: &mut LineConn, c: usize, _k: u64, shared: bool) -> Result<(), String> {
    let ns = if shared {
        "shared".to_owned()
    } else {
        format!("ns{c}")
    };
    let line = format!(
        "TRANSACTION namespace={ns};s1=assert not exists Month-End/F;\
         s2=set Entry/F/{c} dup;s3=exists Entry/F/{c}\n"
    );
    match conn.ask(&line)? {
        "TRANSACTIONOK" => Ok(()),
        _ => Err(format!("not committed: {}", conn.line.trim_end())),
    }
}

fn lock_unlock(conn: &mut LineConn, c: usize, _k: u64, _shared: bool) -> Result<(), String> {
    let lock = format!("LOCK object_name=bench-{c}\n");
    if conn.ask(&lock)? != "LOCKED" {
        return Err(format!("not granted: {}", conn.line.trim_end()));
    }
    let unlock = format!("UNLOCK object_name=bench-{c}\n");
    if conn.ask(&unlock)? != "UNLOCKED" {
        return Err(format!("not released: {}", conn.line.trim_end()));
    }
    Ok(())
}

fn rate(sockets: &[PathBuf], clients: usize, secs: f64, shared: bool) -> Result<(), String> {
    let (txs, t) = closed_loop(sockets, clients, secs, transaction, shared)?;
    let agents = sockets.len();
    println!(
        "{{\"measure\":\"transaction\",\"statements\":3,\"agents\":{agents},\"clients\":{clients},\"namespaces\":\"{}\",\"committed\":{txs},\"secs\":{t:.2},\"per_s\":{:.0}}}",
        if shared { "shared" } else { "one per client" },
        txs as f64 / t
    );
    let (pairs, t) = closed_loop(sockets, clients, secs, lock_unlock, false)?;
    println!(
        "{{\"measure\":\"lock+unlock\",\"agents\":{agents},\"clients\":{clients},\"pairs\":{pairs},\"secs\":{t:.2},\"per_s\":{:.0}}}",
        pairs as f64 / t
    );
    Ok(())
}

fn memory(socket: &Path, vars: usize) -> Result<(), String> {
    let mut conn = LineConn::open(socket)?;
    let pid = getsockopt(&conn.w, PeerCredentials)
        .map_err(|e| format!("SO_PEERCRED: {e}"))?
        .pid();
    let before = rss_kib(pid)?;
    let start = Instant::now();
    let mut set = 0;
    while set < vars {
        let n = (vars - set).min(32);
        let mut line = format!(
            "TRANSACTION namespace=mem;duration=3600;pid={}",
            set / 5000 + 1
        );
        for i in 0..n {
            line.push_str(&format!(";s{}=set Table/key-{:08}", i + 1, set + i));
        }
        line.push('\n');
        if conn.ask(&line)? != "TRANSACTIONOK" {
            return Err(format!("not committed: {}", conn.line.trim_end()));
        }
        set += n;
    }
    let took = start.elapsed().as_secs_f64();
    let after = rss_kib(pid)?;
    println!(
        "{{\"measure\":\"memory\",\"variables\":{set},\"rss_before_kib\":{before},\"rss_after_kib\":{after},\"bytes_per_variable\":{:.0},\"sets_per_s\":{:.0}}}",
        (after.saturating_sub(before)) as f64 * 1024.0 / set as f64,
        set as f64 / took
    );
    Ok(())
}

fn run() -> Result<(), String> {
    let mut sockets: Vec<PathBuf> = Vec::new();
    let (mut clients, mut secs, mut shared, mut vars) = (1usize, 5.0f64, false, 10_000usize);
    let mut command = String::new();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--socket" => sockets = value()?.split(',').map(PathBuf::from).collect(),
            "--clients" => clients = value()?.parse().map_err(|e| format!("--clients: {e}"))?,
            "--secs" => secs = value()?.parse().map_err(|e| format!("--secs: {e}"))?,
            "--vars" => vars = value()?.parse().map_err(|e| format!("--vars: {e}"))?,
            "--shared" => shared = true,
            "rate" | "memory" => command = a,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if sockets.is_empty() {
        return Err("--socket is required".into());
    }
    match command.as_str() {
        "rate" if clients > 0 => rate(&sockets, clients, secs, shared),
        "memory" => memory(&sockets[0], vars),
        _ => Err("usage: snaplock-txbench --socket PATH rate --clients N [--secs S] [--shared] | memory [--vars N]".into()),
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("snaplock-txbench: error: {e}");
        std::process::exit(1);
    }
}
