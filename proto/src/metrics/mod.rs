//! What the agent counts for Prometheus, and the text exposition format
//! (version 0.0.4) it is read in.
//!
//! The core feeds `Metrics` at each event (a grant and how long it was
//! waited for, a release and how long it was held, a refusal, a revocation,
//! a transaction's outcome, a handover) with the time it was given; it
//! renders the whole exposition itself (`core/metrics.rs`), so the
//! `METRICS` command and the agent's HTTP endpoint say the same. Every
//! label set is bounded: refusal and transaction outcomes are fixed lists,
//! peers are the configured members, and names are the
//! [`MetricsConfig::top_names`] busiest (a bounded count, `top.rs`) and the
//! configured [`MetricsConfig::prefixes`].

mod text;
mod top;

use std::time::Duration;

use crate::vocab::ObjectName;
use crate::wire::Message;

pub use text::Exposition;

/// Most busiest names reported.
pub const MAX_TOP_NAMES: usize = 100;
/// Most configured prefixes.
pub const MAX_PREFIXES: usize = 64;
/// Longest configured prefix, in bytes.
pub const MAX_PREFIX_LEN: usize = 256;
/// How many names are counted for each one reported: the margin that
/// makes the space-saving count find the busiest names.
const COUNTED_PER_REPORTED: usize = 4;

/// What the per-name figures cover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricsConfig {
    /// Report the grants of this many busiest names (0: none).
    pub top_names: usize,
    /// Report grants, holders and waiters of the names under each prefix.
    pub prefixes: Vec<Vec<u8>>,
}

impl Default for MetricsConfig {
    fn default() -> MetricsConfig {
        MetricsConfig {
            top_names: 20,
            prefixes: Vec::new(),
        }
    }
}

impl MetricsConfig {
    /// Checks the bounds; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        if self.top_names > MAX_TOP_NAMES {
            return Err(format!(
                "metrics_top_names={} is above {MAX_TOP_NAMES}",
                self.top_names
            ));
        }
        if self.prefixes.len() > MAX_PREFIXES {
            return Err(format!(
                "metrics_prefixes has {} prefixes, more than {MAX_PREFIXES}",
                self.prefixes.len()
            ));
        }
        if let Some(p) = (self.prefixes.iter()).find(|p| p.is_empty() || p.len() > MAX_PREFIX_LEN) {
            return Err(format!(
                "metrics_prefixes: a prefix must be 1 to {MAX_PREFIX_LEN} bytes ({} given)",
                p.len()
            ));
        }
        Ok(())
    }
}

/// The outcomes a `LOCKFAILED` may carry (snaplock(7)); any other word is
/// counted as `other`. `lost`: an `owner=cgroup` request whose cgroup
/// emptied before the grant.
pub const REFUSALS: &[&str] = &[
    "busy",
    "denied",
    "duplicate",
    "invalid",
    "lost",
    "overflow",
    "timedout",
    "unavailable",
    "untrusted",
    "other",
];

/// The outcomes of a `TRANSACTION`: `ok`, or the `error=` of its
/// `TRANSACTIONFAILED`; any other word is counted as `other`.
pub const TX_RESULTS: &[&str] = &[
    "ok",
    "denied",
    "failed",
    "invalid",
    "overflow",
    "unavailable",
    "untrusted",
    "other",
];

/// Upper bounds of the buckets of `snaplock_lock_wait_seconds`.
pub const WAIT_BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0];
/// Upper bounds of the buckets of `snaplock_lock_hold_seconds`.
pub const HOLD_BUCKETS: &[f64] = &[0.01, 0.1, 1.0, 10.0, 60.0, 300.0, 3600.0, 86400.0];
/// Upper bounds of the buckets of `snaplock_handover_seconds`.
pub const HANDOVER_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0];

/// A histogram with fixed buckets, counted in microseconds so that the
/// same events always give the same text.
#[derive(Clone, Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Events at most each bound (not cumulative); the last is `+Inf`.
    counts: Vec<u64>,
    sum_us: u64,
}

impl Histogram {
    /// No events yet.
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum_us: 0,
        }
    }

    /// One event that took `d`.
    pub fn observe(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let secs = us as f64 / 1e6;
        let i = (self.bounds.iter())
            .position(|b| secs <= *b)
            .unwrap_or(self.bounds.len());
        self.counts[i] += 1;
        self.sum_us = self.sum_us.saturating_add(us);
    }

    /// The events so far.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// The counters and histograms the core keeps as events happen; the
/// gauges are read from its state when rendered.
#[derive(Debug)]
pub(crate) struct Metrics {
    pub top_names: usize,
    pub prefixes: Vec<Vec<u8>>,
    pub revocations: u64,
    /// By [`REFUSALS`].
    pub refusals: Vec<u64>,
    /// By [`TX_RESULTS`].
    pub transactions: Vec<u64>,
    /// Grants under each of `prefixes`, in their order.
    pub prefix_grants: Vec<u64>,
    /// Locks of this agent's clients held, and requests waiting, now
    /// (transactions' variables are not locks): kept as tickets come,
    /// are granted and go, so that a scrape never walks a table of a
    /// million locks.
    pub held: usize,
    pub waiting: usize,
    /// The same under each of `prefixes`, in their order.
    pub prefix_held: Vec<usize>,
    pub prefix_waiting: Vec<usize>,
    pub busiest: top::TopNames,
    pub wait: Histogram,
    pub hold: Histogram,
    pub handover: Histogram,
}

impl Metrics {
    pub fn new(config: &MetricsConfig) -> Metrics {
        Metrics {
            top_names: config.top_names,
            prefixes: config.prefixes.clone(),
            revocations: 0,
            refusals: vec![0; REFUSALS.len()],
            transactions: vec![0; TX_RESULTS.len()],
            prefix_grants: vec![0; config.prefixes.len()],
            held: 0,
            waiting: 0,
            prefix_held: vec![0; config.prefixes.len()],
            prefix_waiting: vec![0; config.prefixes.len()],
            busiest: top::TopNames::new(config.top_names * COUNTED_PER_REPORTED),
            wait: Histogram::new(WAIT_BUCKETS),
            hold: Histogram::new(HOLD_BUCKETS),
            handover: Histogram::new(HANDOVER_BUCKETS),
        }
    }

    /// A request for a lock on `name` is queued in this agent's table.
    pub fn queued(&mut self, name: &[u8]) {
        self.waiting += 1;
        for (i, p) in self.prefixes.iter().enumerate() {
            if name.starts_with(p) {
                self.prefix_waiting[i] += 1;
            }
        }
    }

    /// A lock on `name` was granted to a client after it waited `waited`.
    pub fn granted(&mut self, name: &ObjectName, waited: Duration) {
        self.wait.observe(waited);
        self.busiest.note(name);
        self.waiting = self.waiting.saturating_sub(1);
        self.held += 1;
        for (i, p) in self.prefixes.iter().enumerate() {
            if name.starts_with(p) {
                self.prefix_grants[i] += 1;
                self.prefix_waiting[i] = self.prefix_waiting[i].saturating_sub(1);
                self.prefix_held[i] += 1;
            }
        }
    }

    /// A lock ticket on `name` left this agent's table: a lock released
    /// (or taken back) after it was held `held`, or a request that never
    /// was granted (`held` is `None`).
    pub fn left(&mut self, name: &[u8], held: Option<Duration>) {
        let count = match held {
            Some(d) => {
                self.hold.observe(d);
                &mut self.held
            }
            None => &mut self.waiting,
        };
        *count = count.saturating_sub(1);
        let counts = match held {
            Some(_) => &mut self.prefix_held,
            None => &mut self.prefix_waiting,
        };
        for (p, n) in self.prefixes.iter().zip(counts) {
            if name.starts_with(p) {
                *n = n.saturating_sub(1);
            }
        }
    }

    /// A reply to a client: refusals and the outcomes of transactions are
    /// counted from what the client is told, wherever in the core it was
    /// decided. Revocations are counted where they are made
    /// (`Core::tell_lost`): the holder of a detached lock may not be
    /// there to be told, and a lock whose cgroup emptied is told `lost`
    /// but was not taken back.
    pub fn replied(&mut self, msg: &Message) {
        let error = || msg.get("error").unwrap_or_default();
        match msg.command.as_str() {
            "LOCKFAILED" => self.refusals[index_of(REFUSALS, error())] += 1,
            "TRANSACTIONOK" => self.transactions[0] += 1,
            "TRANSACTIONFAILED" => self.transactions[index_of(TX_RESULTS, error())] += 1,
            _ => {}
        }
    }
}

/// The index of `word` in `list`, else of its last entry (`other`).
fn index_of(list: &[&str], word: &[u8]) -> usize {
    (list.iter())
        .position(|w| w.as_bytes() == word)
        .unwrap_or(list.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_on_a_bound_falls_in_that_bucket() {
        let mut h = Histogram::new(&[0.1, 1.0]);
        h.observe(Duration::from_millis(100));
        h.observe(Duration::from_millis(101));
        h.observe(Duration::from_secs(5));
        assert_eq!(h.counts, [1, 1, 1]);
        assert_eq!(h.count(), 3);
        assert_eq!(h.sum_us, 5_201_000);
    }

    #[test]
    fn replies_are_counted_by_outcome_and_unknown_words_as_other() {
        let mut m = Metrics::new(&MetricsConfig::default());
        m.replied(&Message::new("LOCKFAILED").with("error", "busy"));
        m.replied(&Message::new("LOCKFAILED").with("error", "made-up"));
        m.replied(&Message::new("UNLOCKED").with("error", "timedout"));
        m.replied(&Message::new("TRANSACTIONOK"));
        m.replied(&Message::new("TRANSACTIONFAILED").with("error", "failed"));
        assert_eq!(m.refusals[index_of(REFUSALS, b"busy")], 1);
        assert_eq!(m.refusals[REFUSALS.len() - 1], 1);
        assert_eq!(m.revocations, 0, "counted where they are made");
        assert_eq!(m.transactions[0], 1);
        assert_eq!(m.transactions[index_of(TX_RESULTS, b"failed")], 1);
    }

    #[test]
    fn a_request_its_cgroup_ended_is_counted_as_lost_not_other() {
        let mut m = Metrics::new(&MetricsConfig::default());
        m.replied(&Message::new("LOCKFAILED").with("error", "lost"));
        assert_eq!(m.refusals[index_of(REFUSALS, b"lost")], 1);
        assert_eq!(m.refusals[REFUSALS.len() - 1], 0, "not other");
    }

    #[test]
    fn a_transaction_the_access_rules_refuse_is_counted_as_denied_not_other() {
        let mut m = Metrics::new(&MetricsConfig::default());
        m.replied(&Message::new("TRANSACTIONFAILED").with("error", "denied"));
        assert_eq!(m.transactions[index_of(TX_RESULTS, b"denied")], 1);
        assert_eq!(m.transactions[TX_RESULTS.len() - 1], 0, "not other");
    }

    #[test]
    fn grants_are_counted_under_every_prefix_they_start_with() {
        let config = MetricsConfig {
            top_names: 2,
            prefixes: vec![b"a/".to_vec(), b"a/b".to_vec(), b"z".to_vec()],
        };
        let mut m = Metrics::new(&config);
        m.granted(&ObjectName::from(&b"a/b/c"[..]), Duration::ZERO);
        m.granted(&ObjectName::from(&b"a/x"[..]), Duration::ZERO);
        assert_eq!(m.prefix_grants, [2, 1, 0]);
    }

    #[test]
    fn the_bounds_of_the_configuration_are_checked() {
        let mut c = MetricsConfig::default();
        assert!(c.validate().is_ok());
        c.top_names = MAX_TOP_NAMES + 1;
        assert!(c.validate().unwrap_err().contains("metrics_top_names"));
        c.top_names = 1;
        c.prefixes = vec![Vec::new()];
        assert!(c.validate().unwrap_err().contains("metrics_prefixes"));
    }
}
