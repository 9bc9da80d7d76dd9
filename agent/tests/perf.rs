//! Latency and throughput of lock+unlock through a real socket: ignored by
//! default (timing depends on the machine); run with
//! `cargo test --release -p snaplock-agent --test perf -- --ignored --nocapture`.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{now, start};

/// One blocking client doing LOCK then UNLOCK on `name`.
struct Pair {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    lock: Vec<u8>,
    unlock: Vec<u8>,
    line: String,
}

impl Pair {
    fn new(path: &std::path::Path, name: &str, pid: usize) -> Pair {
        let stream = UnixStream::connect(path).unwrap();
        stream.set_read_timeout(Some(common::WAIT)).unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        Pair {
            stream,
            reader,
            lock: format!(
                "LOCK object_name={name};pid={pid};timeout={}\n",
                common::deadline_in(3600.0)
            )
            .into_bytes(),
            unlock: format!("UNLOCK object_name={name};pid={pid}\n").into_bytes(),
            line: String::new(),
        }
    }

    fn round(&mut self) {
        self.stream.write_all(&self.lock).unwrap();
        self.line.clear();
        self.reader.read_line(&mut self.line).unwrap();
        assert!(self.line.starts_with("LOCKED "), "{}", self.line);
        self.stream.write_all(&self.unlock).unwrap();
        self.line.clear();
        self.reader.read_line(&mut self.line).unwrap();
        assert!(self.line.starts_with("UNLOCKED "), "{}", self.line);
    }
}

#[test]
#[ignore = "a measurement, not a check; run it in release mode"]
fn lock_unlock_latency_of_one_client() {
    let (_dir, agent) = start("perf1", |_| {});
    let mut pair = Pair::new(agent.socket(), "latency", 1);
    for _ in 0..2_000 {
        pair.round();
    }
    let mut samples: Vec<Duration> = (0..20_000)
        .map(|_| {
            let t = now();
            pair.round();
            t.elapsed()
        })
        .collect();
    samples.sort();
    let pct = |p: usize| samples[samples.len() * p / 100];
    eprintln!(
        "lock+unlock, 1 client: p50 {:?}, p90 {:?}, p99 {:?}",
        pct(50),
        pct(90),
        pct(99)
    );
}

#[test]
#[ignore = "a measurement, not a check; run it in release mode"]
fn lock_unlock_throughput_of_many_clients() {
    for clients in [1, 16, 64] {
        for shared_name in [false, true] {
            let (_dir, agent) = start("perfn", |_| {});
            let stop = Arc::new(AtomicBool::new(false));
            let done = Arc::new(AtomicU64::new(0));
            let threads: Vec<_> = (0..clients)
                .map(|i| {
                    let name = if shared_name {
                        "shared".to_owned()
                    } else {
                        format!("name_{i}")
                    };
                    let mut pair = Pair::new(agent.socket(), &name, i + 1);
                    let (stop, done) = (Arc::clone(&stop), Arc::clone(&done));
                    std::thread::spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            pair.round();
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(300));
            let (t, before) = (now(), done.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_secs(2));
            let ops = done.load(Ordering::Relaxed) - before;
            let rate = ops as f64 / t.elapsed().as_secs_f64();
            stop.store(true, Ordering::Relaxed);
            for th in threads {
                th.join().unwrap();
            }
            let names = if shared_name {
                "one shared name"
            } else {
                "a name each"
            };
            eprintln!("{clients:>3} clients, {names:<15}: {rate:>9.0} lock+unlock/s");
        }
    }
}
