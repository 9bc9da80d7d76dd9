//! The simulator's fingerprints of a fixed range of seeds, kept in
//! `traces.txt`. Every input a core is given and every output it gives is
//! folded into a run's hash, so a change that only reshapes the code keeps
//! every line of the file. A change meant to alter behaviour rewrites the
//! file in a commit of its own that says so:
//!
//! `SIM_BLESS=1 cargo test -p snaplock-tests --test traces`

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use snaplock_tests::sim::{self, Options, SEC};

/// Ordinary runs (every fault kind, 3 or 5 computers drawn from the seed).
const ORDINARY: std::ops::Range<u64> = 0..200;
/// Runs whose faults strike one computer only.
const ONE_COMPUTER: std::ops::Range<u64> = 0..90;
/// Simulated length of each run: past the first elections, several faults
/// and their healing.
const MINUTES: u64 = 10;

fn runs() -> Vec<(&'static str, Options)> {
    let mut runs = Vec::new();
    for seed in ORDINARY {
        let mut opts = Options::new(seed);
        opts.duration = MINUTES * 60 * SEC;
        opts.stop_at_first = false;
        runs.push(("ordinary", opts));
    }
    for seed in ONE_COMPUTER {
        let mut opts = Options::new(seed);
        opts.duration = MINUTES * 60 * SEC;
        opts.stop_at_first = false;
        opts.victim = Some((seed % 3) as usize);
        opts.nodes = Some(if (seed / 3) % 2 == 0 { 3 } else { 5 });
        runs.push(("one-computer", opts));
    }
    runs
}

/// One line per run: its kind, seed, trace hash and grants.
fn fingerprints() -> String {
    let runs = runs();
    let lines: Vec<Mutex<String>> = runs.iter().map(|_| Mutex::new(String::new())).collect();
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((kind, opts)) = runs.get(i) else {
                        break;
                    };
                    let report = sim::run(opts);
                    *lines[i].lock().expect("no panic holds it") = format!(
                        "{kind} {} {:016x} {}",
                        opts.seed, report.trace_hash, report.stats.grants
                    );
                }
            });
        }
    });
    let mut text = String::new();
    for line in lines {
        let line = line.into_inner().expect("no panic holds it");
        writeln!(text, "{line}").expect("a String takes it");
    }
    text
}

#[test]
fn reshaping_the_code_keeps_every_trace() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/traces.txt");
    let now = fingerprints();
    if std::env::var_os("SIM_BLESS").is_some() {
        std::fs::write(&path, &now).expect("traces.txt is writable");
        return;
    }
    let kept = std::fs::read_to_string(&path).expect("tests/traces.txt is in the repository");
    let changed: Vec<String> = kept
        .lines()
        .zip(now.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("  was {a}\n  now {b}"))
        .collect();
    assert_eq!(
        kept.lines().count(),
        now.lines().count(),
        "the range of runs changed: bless it in a commit of its own"
    );
    assert!(
        changed.is_empty(),
        "{} of {} runs behave differently (a behaviour change: bless it in a commit of its own that says so):\n{}",
        changed.len(),
        now.lines().count(),
        changed
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
