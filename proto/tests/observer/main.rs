//! Seeded random histories against the core, checked by an observer that
//! sees only what a client sees: the requests sent and the replies.
//!
//! After every step the observer checks:
//! - exclusion: an exclusive holder never overlaps another holder of the
//!   object; shared and counted holders never exceed any shared holder's
//!   own limit, nor a counted request's own limit at its grant;
//! - fences strictly increase per object in grant order; EXTEND keeps it;
//! - every request has at most one outcome (LOCKED or LOCKFAILED), and
//!   `UNLOCKED error=timedout` comes only to a holder, at its lease end;
//! - no LOCKED after the request's deadline; every waiting request is
//!   answered by its deadline (the driver wakes the core at every
//!   `poll_timeout`), and an object nobody holds does not keep a waiter;
//! - refusals (duplicate, overflow, busy, denied, invalid) and the
//!   answers to UNLOCK and EXTEND are the ones snaplock(7) gives.
//!
//! `PROP_SEED=<n>` replays one seed; `PROP_SEEDS` and `PROP_STEPS` change
//! the default 200 seeds of 2000 steps.

mod model;

use std::time::{Duration, Instant};

use model::Driver;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v:?}: a number"))
    })
}

fn run_seed(seed: u64, steps: usize) -> model::Stats {
    let mut driver = Driver::new(seed, false);
    let failure = (0..steps)
        .find_map(|step| driver.step().err().map(|why| (Some(step), why)))
        .or_else(|| driver.finish().err().map(|why| (None, why)));
    let Some((failed_at, why)) = failure else {
        return driver.stats;
    };
    // Runs are deterministic: replay the seed keeping the last events.
    let mut replay = Driver::new(seed, true);
    for _ in 0..failed_at.map_or(steps, |s| s + 1) {
        if replay.step().is_err() {
            break;
        }
    }
    if failed_at.is_none() {
        let _ = replay.finish();
    }
    let at = failed_at.map_or("at shutdown".to_owned(), |s| format!("step {s}"));
    // Messages print with their line end.
    let why = why.replace('\n', "");
    panic!(
        "seed {seed}, {at}, t={:?}: {why}\nlast events:\n{}replay: PROP_SEED={seed} cargo test -p snaplock-proto --test observer",
        replay.now(),
        replay.trace()
    );
}

/// The test's own run-time budget; the core never sees this clock.
#[allow(clippy::disallowed_methods)]
fn start_clock() -> Instant {
    Instant::now()
}

#[test]
fn random_histories_keep_exclusion_fences_deadlines_and_single_outcomes() {
    let steps = env_u64("PROP_STEPS").map_or(2_000, |s| s as usize);
    if let Some(seed) = env_u64("PROP_SEED") {
        eprintln!("seed {seed}: {:?}", run_seed(seed, steps));
        return;
    }
    let seeds = env_u64("PROP_SEEDS").unwrap_or(200);
    // Bounded in time as well as in count: a slow machine runs fewer seeds.
    let budget = Duration::from_secs(60);
    let started = start_clock();
    let mut ran = 0;
    let mut seen = model::Stats::new();
    for seed in 0..seeds {
        for (kind, n) in run_seed(seed, steps) {
            *seen.entry(kind).or_default() += n;
        }
        ran += 1;
        if started.elapsed() > budget {
            break;
        }
    }
    assert!(
        ran >= seeds.min(20),
        "only {ran} seeds ran within {budget:?}"
    );
    eprintln!("{ran} seeds of {steps} steps: {seen:?}");
    if ran >= 50 {
        // Every outcome the checks are about happened, many times over.
        for kind in [
            "LOCKED",
            "LOCKFAILED timedout",
            "waited then timed out",
            "LOCKFAILED busy",
            "LOCKFAILED duplicate",
            "LOCKFAILED overflow",
            "LOCKFAILED invalid",
            "LOCKFAILED denied",
            "UNLOCKED",
            "UNLOCKED timedout",
            "extended",
            "shared with others",
            "shared up to a limit",
        ] {
            let n = seen.get(kind).copied().unwrap_or(0);
            assert!(n >= 10, "only {n} times {kind:?} in {ran} seeds: {seen:?}");
        }
    }
}
