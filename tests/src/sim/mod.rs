//! The deterministic simulator of a snaplock cluster; the properties it
//! checks are argued in docs/cluster.md.
//!
//! N cores run in one thread on virtual time. The simulator plays every
//! shell and the network between them: TCP-like links with delay, breaks,
//! partitions (also one-way), retransmissions after reconnect; computers
//! crash and restart with their memory lost but their disk (the record of
//! `Output::Persist`) kept, pause, and run clocks at their own rates and,
//! in some runs, far apart. Workload clients lock a few hot names and obey the lease
//! contract; probes check liveness in quiet windows after every fault heals.
//! The [`checker`] sees every client-visible event and checks S1–S5 online;
//! the world adds S7, S8, L1–L5 and R1. In runs with
//! [`Options::transactions`], transaction clients send lock transactions
//! too, and [`txcheck`] checks their history (T1–T5) at the end.
//!
//! The files, from the bottom up: the leaves ([`checker`], [`clock`],
//! [`net`], [`rng`], [`trace`], [`txcheck`], [`wire`]); `events`, what can happen at
//! an instant; `world`, the event queue, the computers (`nodes`), the
//! links (`links`) and what the world checks itself (`checks`); the parts
//! that act on the world, each owning its state and given the world as an
//! argument: `faults`, `client` (the workload), `txclient` (the
//! transaction clients) and `probes`; and `run`,
//! which takes the events off the queue and hands each to whom it
//! concerns. The world calls no part, and no part calls another.
//!
//! Everything random comes from one [`rng::Rng`] seeded by the run's seed,
//! events are ordered by (time, sequence number), and collections iterate
//! in a fixed order: a seed replays the same run, which the trace hash
//! proves. Replay one seed verbosely with
//! `SIM_SEED=<n> cargo test -p snaplock-tests --test sim -- replay --nocapture`.

pub mod checker;
mod checks;
mod client;
pub mod clock;
pub mod corelog;
mod events;
mod faults;
mod links;
pub mod net;
mod nodes;
mod probes;
pub mod rng;
mod run;
pub mod trace;
pub mod txcheck;
mod txclient;
pub mod wire;
mod world;

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

pub use checker::{Checker, Violation};
use rng::Rng;
pub use snaplock_proto::cluster::Plant;

/// One µs, ms and s of simulated time.
pub const MS: u64 = 1_000;
/// One second of simulated time, in µs.
pub const SEC: u64 = 1_000_000;

/// The longest one-way message delay of the runs that check R1 (faults of
/// one computer only): the failover's timing budget (docs/cluster.md,
/// "Availability") assumes messages take well under a ping interval.
pub const R1_DELAY: u64 = 100 * MS;

/// What one run is asked to do.
#[derive(Clone, Debug)]
pub struct Options {
    /// Decides everything else.
    pub seed: u64,
    /// Simulated length of the run, µs.
    pub duration: u64,
    /// Number of computers; `None`: drawn from the seed.
    pub nodes: Option<usize>,
    /// A deliberate bug to plant in every core.
    pub plant: Plant,
    /// Print the log as the run goes.
    pub verbose: bool,
    /// Keep this many last log lines for the report.
    pub keep_lines: usize,
    /// Stop at the first violation.
    pub stop_at_first: bool,
    /// Check liveness (L1–L5) too, not only safety.
    pub liveness: bool,
    /// Faults strike this computer only (it pauses, crashes, is cut off,
    /// one way or both, its links break), a minority: every other agent
    /// keeps a majority of the leaders, and R1 is checked (no holder of a
    /// healthy agent loses its lock).
    pub victim: Option<usize>,
    /// Check L5 (no name taken by nobody) in the quiet windows.
    pub l5: bool,
    /// The workload draws counted requests (`mode=counted`) too. Off, it
    /// draws exactly what it drew before counted locks existed, so the
    /// seeds kept for what they once showed (the one-computer runs' lists
    /// in `tests/tests/sim/seeds.rs`) still show it.
    pub counted: bool,
    /// Transaction clients run beside the lock workload (dedicated ones,
    /// one to three a computer, on a stream of their own) and the history
    /// of their transactions is checked at the end (T1–T5, see
    /// [`txcheck`]). Off, nothing of them is drawn or scheduled.
    pub transactions: bool,
}

impl Options {
    /// A ten-minute run of `seed`, quiet, nothing planted.
    pub fn new(seed: u64) -> Options {
        Options {
            seed,
            duration: 600 * SEC,
            nodes: None,
            plant: Plant::None,
            verbose: false,
            keep_lines: 0,
            stop_at_first: true,
            liveness: true,
            victim: None,
            l5: true,
            counted: true,
            transactions: false,
        }
    }
}

/// The fault kinds a run may draw from.
pub const FAULT_KINDS: [&str; 5] = ["break", "partition", "one-way", "crash", "pause"];

/// The shape of one run, drawn from its seed ("swarm testing": each run
/// turns on its own mix of faults at its own rates).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// Computers.
    pub nodes: usize,
    /// Workload clients per computer.
    pub workers_per_node: usize,
    /// Hot object names.
    pub objects: usize,
    /// Smallest and largest one-way message delay while faults run, µs.
    pub delay: (u64, u64),
    /// Mean time between faults while they run, µs.
    pub fault_gap: u64,
    /// Relative weight of each of [`FAULT_KINDS`] (0: never).
    pub fault_weights: [u64; 5],
    /// Chance (per million) that a reconnect delivers again the last
    /// messages of the previous connection.
    pub replay_per_million: u64,
    /// Clock rates differ (within the configured drift) or not.
    pub drift: bool,
    /// Wall clocks are kept within 100 ms of true time (NTP), or each runs
    /// from an arbitrary offset with its computer's monotonic clock.
    pub ntp: bool,
    /// Shortest and longest fault phase, µs.
    pub chaos_len: (u64, u64),
    /// Length of a quiet window, µs.
    pub quiet_len: u64,
}

impl Knobs {
    /// The knobs of a run, from its own rng.
    pub fn draw(rng: &mut Rng, nodes: Option<usize>) -> Knobs {
        let nodes = nodes.unwrap_or_else(|| *rng.pick(&[1, 2, 3, 3, 3, 4, 5, 5]));
        let mut fault_weights = [0u64; 5];
        for w in &mut fault_weights {
            // Each kind is off in a quarter of the runs.
            *w = if rng.chance(250_000) {
                0
            } else {
                rng.between(1, 10)
            };
        }
        if fault_weights.iter().all(|&w| w == 0) {
            fault_weights[3] = 1;
        }
        let delay_max = *rng.pick(&[2 * MS, 20 * MS, 100 * MS, 500 * MS]);
        Knobs {
            nodes,
            workers_per_node: rng.between(2, 4) as usize,
            objects: rng.between(2, 4) as usize,
            delay: (rng.between(100, MS), delay_max),
            fault_gap: rng.between(2, 20) * SEC,
            fault_weights,
            replay_per_million: *rng.pick(&[0, 100_000, 500_000]),
            drift: rng.chance(800_000),
            ntp: rng.chance(500_000),
            chaos_len: (30 * SEC, 120 * SEC),
            quiet_len: 45 * SEC,
        }
    }
}

/// Counts of what a run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events processed.
    pub events: u64,
    /// LOCKs sent by workload clients.
    pub locks: u64,
    /// LOCKED delivered (workload and probes).
    pub grants: u64,
    /// Messages delivered between computers.
    pub peer_messages: u64,
    /// Faults injected.
    pub faults: u64,
    /// Crashes among them.
    pub crashes: u64,
    /// Quiet windows whose liveness probes ran.
    pub quiet_windows: u64,
    /// TRANSACTIONs sent by transaction clients.
    pub transactions: u64,
    /// TRANSACTIONOK they received.
    pub tx_commits: u64,
    /// `try=true` LOCKs sent by workload clients, and how they ended:
    /// granted, refused at once, or refused at their deadline (a try
    /// request is not meant to wait for it).
    pub tries: TryOutcomes,
}

/// How the `try=true` requests of a run ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TryOutcomes {
    /// Sent.
    pub sent: u64,
    /// `LOCKED`.
    pub granted: u64,
    /// `LOCKFAILED` before the deadline (`busy`, `unavailable`, ...).
    pub refused: u64,
    /// `LOCKFAILED` "not obtained before the timeout", less than a second
    /// after it was sent (a deadline drawn that close).
    pub at_deadline: u64,
    /// The same, a second or more after it was sent: a try request that
    /// waited.
    pub late_after_a_second: u64,
}

impl std::ops::AddAssign for TryOutcomes {
    fn add_assign(&mut self, o: TryOutcomes) {
        self.sent += o.sent;
        self.granted += o.granted;
        self.refused += o.refused;
        self.at_deadline += o.at_deadline;
        self.late_after_a_second += o.late_after_a_second;
    }
}

/// The result of one run.
#[derive(Clone, Debug)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// What the seed drew.
    pub knobs: Knobs,
    /// Fingerprint of every core input and output, in order.
    pub trace_hash: u64,
    /// Broken properties, in the order found.
    pub violations: Vec<Violation>,
    /// Counts.
    pub stats: Stats,
    /// The last log lines, when kept.
    pub tail: Vec<String>,
    /// Simulated time reached, µs.
    pub end: u64,
}

impl Report {
    /// Whether nothing was broken.
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {}: {} violation(s), trace hash {:016x}, reached {}",
            self.seed,
            self.violations.len(),
            self.trace_hash,
            checker::secs(self.end)
        )?;
        writeln!(f, "  knobs: {:?}", self.knobs)?;
        writeln!(f, "  stats: {:?}", self.stats)?;
        for v in self.violations.iter().take(10) {
            writeln!(f, "  {v}")?;
        }
        Ok(())
    }
}

/// The command that replays `seed` verbosely.
pub fn replay_command(seed: u64) -> String {
    format!("SIM_SEED={seed} cargo test -p snaplock-tests --test sim -- replay --nocapture")
}

/// Runs one seed. A panic (of the core or of the simulator) is reported as
/// a violation of its own, so a sweep names the seed that caused it.
pub fn run(opts: &Options) -> Report {
    match catch_unwind(AssertUnwindSafe(|| run::Run::new(opts).run())) {
        Ok(report) => report,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "unknown panic".to_owned());
            let mut rng = Rng::new(opts.seed);
            Report {
                seed: opts.seed,
                knobs: Knobs::draw(&mut rng, opts.nodes),
                trace_hash: 0,
                violations: vec![Violation {
                    at: 0,
                    rule: "panic",
                    what,
                }],
                stats: Stats::default(),
                tail: Vec::new(),
                end: 0,
            }
        }
    }
}

/// Runs `seed` and, when it fails, runs it again keeping the log's tail so
/// the report shows what led to the first violation.
pub fn run_explained(opts: &Options) -> Report {
    let report = run(opts);
    if report.ok() || opts.keep_lines > 0 || opts.verbose {
        return report;
    }
    let mut again = opts.clone();
    again.keep_lines = 60;
    run(&again)
}
