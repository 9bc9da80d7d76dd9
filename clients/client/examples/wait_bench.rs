//! How a client's wait for replies performs: lock+unlock pairs against an
//! agent, from N connections (one thread each, one request in flight).
//!
//! ```text
//! cargo run --release -p snaplock-client --example wait_bench -- SOCKET CLIENTS SECS BUSY_POLL_US
//! ```
//!
//! Prints the pairs per second and the median and 99th percentile of one
//! request's round trip.

use std::path::PathBuf;
use std::thread;
use std::time::Duration;

use snaplock_client::{Client, LockOptions, clock};

/// At most this many round trips are kept per client for the percentiles.
const MAX_SAMPLES: usize = 1 << 21;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [socket, clients, secs, spin] = args.as_slice() else {
        eprintln!("usage: wait_bench SOCKET CLIENTS SECS BUSY_POLL_US");
        std::process::exit(64);
    };
    let socket = PathBuf::from(socket);
    let clients: usize = clients.parse().expect("CLIENTS");
    let secs: f64 = secs.parse().expect("SECS");
    let spin = Duration::from_micros(spin.parse().expect("BUSY_POLL_US"));
    let run_for = Duration::from_secs_f64(secs);
    let start = clock::monotonic() + Duration::from_millis(200);
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let socket = socket.clone();
            thread::spawn(move || {
                let mut c = Client::connect(&socket).expect("connect");
                c.set_busy_poll(spin);
                let name = format!("bench/{i}");
                let opts = LockOptions::default();
                let mut samples = Vec::new();
                let mut pairs = 0u64;
                while clock::monotonic() < start {
                    thread::sleep(Duration::from_millis(1));
                }
                let end = start + run_for;
                while clock::monotonic() < end {
                    let t0 = clock::monotonic();
                    c.lock(&name, &opts).expect("lock");
                    let t1 = clock::monotonic();
                    c.unlock(&name).expect("unlock");
                    let t2 = clock::monotonic();
                    pairs += 1;
                    if samples.len() < MAX_SAMPLES {
                        samples.push((t1 - t0).as_micros() as u32);
                        samples.push((t2 - t1).as_micros() as u32);
                    }
                }
                (pairs, samples)
            })
        })
        .collect();
    let mut pairs = 0;
    let mut all = Vec::new();
    for t in threads {
        let (p, s) = t.join().expect("a client thread");
        pairs += p;
        all.extend(s);
    }
    all.sort_unstable();
    let pct = |q: f64| {
        all.get(((all.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0)
    };
    println!(
        "clients={clients} busy_poll_us={} secs={secs}: {:.0} lock+unlock/s, request p50 {} us, p99 {} us",
        spin.as_micros(),
        pairs as f64 / secs,
        pct(0.5),
        pct(0.99)
    );
}
