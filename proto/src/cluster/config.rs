//! The cluster part of the core's configuration.

use std::net::SocketAddr;
use std::time::Duration;

/// How this computer takes part in a cluster (snaplock.conf(5), docs/cluster.md).
///
/// With no `listen` address, or with `members` naming this computer alone,
/// the core is a one-computer cluster: its own and only leader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// This computer's TCP address for peers (`listen=`).
    pub listen: Option<SocketAddr>,
    /// Every computer of the cluster by its `listen` address (`neighbors=`);
    /// this computer's own address may be listed or not.
    pub neighbors: Vec<SocketAddr>,
    /// 1 (most wanted) ..= 15 (least); `None` is `off`: never a leader.
    pub candidate_priority: Option<u8>,
    /// Seeds the core's random numbers (the random part of its id).
    pub seed: u64,
    /// The agent's process id, for its id (`PP|RANDOM|ADDRESS|PID|NAME`).
    pub pid: u32,
    /// Largest clock *rate* error assumed between any two computers, in
    /// parts per million (10,000 = 1 %).
    pub drift_ppm: u32,
    /// How often every link is pinged.
    pub ping_interval: Duration,
    /// A peer silent this long is taken for dead and its link closed; a
    /// leader that has not heard a quorum within it stops acting.
    pub peer_timeout: Duration,
    /// An agent that cannot reach a majority of acting leaders for this
    /// long revokes its clients' locks (`UNLOCKED error=lost`).
    pub grace: Duration,
    /// What this agent kept on disk when it last ran (the shell reads it;
    /// zero: nothing kept). It never draws or adopts below it.
    pub persisted: super::persist::Persisted,
    /// How many tickets one step of this agent's report walks: a report of
    /// a million locks is written a step per loop iteration, with the
    /// pings and the replies of the others in between, not in one call
    /// of a second (docs/cluster.md "Handover"). Not a setting of the
    /// configuration file; the simulator makes it small.
    #[doc(hidden)]
    pub report_step: usize,
    /// How long after one step of a report the next one comes: none for
    /// an agent (the next pass of its loop); the simulator gives the walk
    /// time, so that what happens meanwhile falls between its steps.
    #[doc(hidden)]
    pub report_step_pause: Duration,
    /// A deliberate bug, for tests that prove the simulator catches it.
    #[doc(hidden)]
    pub plant: Plant,
}

/// Deliberate bugs the simulator's tests plant to prove its checks work.
/// Never set outside those tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Plant {
    /// No bug.
    #[default]
    None,
    /// The owner grants on the first answer, even a refusal (B17-like).
    SkipSameMajority,
    /// A new epoch without a majority's state skips the lock-delay.
    SkipLockDelay,
    /// The owner draws the previous fence again.
    ReuseFence,
    /// A follower votes whatever it already voted for.
    DoubleVote,
    /// A carried lock follows its new owner only if that owner answered
    /// within a window of the old owner's last answer (the rule before
    /// the evidence of members that left): a silent owner's locks are
    /// revoked (R1).
    CarryByAnswer,
    /// A counted late report leaves the inherited tickets its home no
    /// longer has: their names stay taken by nobody (L5).
    KeepOrphans,
    /// A restarted agent starts without its record (epoch, fence).
    IgnorePersisted,
    /// A carried lock follows its new owner at once when that owner is
    /// the lock's first old owner, whatever owned it in the epochs it was
    /// carried through since (the rule before `CarriedLock::via`): the
    /// owner of such an epoch may still act there without the lock (S1).
    FollowSameOwner,
    /// A counted request's limit is read one too high: it is granted while
    /// as many holders as its limit hold the object.
    CountedOneOver,
    /// A home applies only the first half of a transaction's new holdings
    /// (rounded up), and answers it committed.
    TxHalfApply,
    /// The owner of a namespace answers a transaction without the votes
    /// of a majority for its new holdings.
    TxSkipVote,
    /// The owner keeps a variable whose home released it (its connection
    /// closed, its time ran out): the name stays taken by nobody (L5).
    TxKeepClosed,
}

/// [`ClusterConfig::report_step`]'s default: some 10 ms of a report's
/// walk on a slow machine (half a microsecond a ticket).
pub const REPORT_STEP: usize = 16_384;

impl Default for ClusterConfig {
    fn default() -> ClusterConfig {
        ClusterConfig {
            listen: None,
            neighbors: Vec::new(),
            candidate_priority: Some(14),
            seed: 0,
            pid: 0,
            drift_ppm: 10_000,
            ping_interval: Duration::from_millis(250),
            peer_timeout: Duration::from_secs(2),
            grace: Duration::from_secs(5),
            persisted: super::persist::Persisted::default(),
            report_step: REPORT_STEP,
            report_step_pause: Duration::ZERO,
            plant: Plant::None,
        }
    }
}

impl ClusterConfig {
    /// The cluster's computers, this one included, in address order,
    /// without duplicates.
    pub fn members(&self) -> Vec<SocketAddr> {
        let mut all: Vec<SocketAddr> = self.neighbors.clone();
        all.extend(self.listen);
        all.sort_by_key(|a| addr_key(*a));
        all.dedup();
        all
    }

    /// Whether more than one computer takes part.
    pub fn is_multi(&self) -> bool {
        self.listen.is_some() && self.members().len() > 1
    }

    /// Checks every value; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(p) = self.candidate_priority {
            if !(1..=15).contains(&p) {
                return Err(format!("candidate_priority {p}: must be 1..15 or off"));
            }
        }
        if self.drift_ppm >= 100_000 {
            return Err("clock_drift must be under 10%".to_owned());
        }
        if let Some(listen) = self.listen {
            if listen.ip().is_unspecified() || listen.port() == 0 {
                // Peers name each other by this address (B20: every agent
                // on 0.0.0.0 would be the same computer to the others).
                return Err(format!(
                    "listen {listen}: must be the address and port the other computers reach this one at"
                ));
            }
        }
        if self.listen.is_none() && self.neighbors.len() > 1 {
            return Err(
                "neighbors names other computers but there is no listen address".to_owned(),
            );
        }
        if self.ping_interval.is_zero() || self.ping_interval * 2 > self.peer_timeout {
            return Err("peer timeout must be at least two ping intervals".to_owned());
        }
        if self.grace < self.peer_timeout {
            return Err("grace must be at least the peer timeout".to_owned());
        }
        Ok(())
    }

    /// `d` stretched by the drift bound both ways: a span measured as `d`
    /// on a clock running slow by ρ can last `d (1+ρ)/(1-ρ)` on another
    /// running fast by ρ. Rounded up.
    pub fn stretch(&self, d: Duration) -> Duration {
        let rho = u128::from(self.drift_ppm);
        let million = 1_000_000u128;
        let micros = d.as_micros() * (million + rho);
        let micros = micros.div_ceil(million - rho);
        Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
    }

    /// The least that a span measured as `d` on one clock lasts on another
    /// (`d (1-ρ)/(1+ρ)`, rounded down): the converse of [`Self::stretch`].
    pub fn shrink(&self, d: Duration) -> Duration {
        let rho = u128::from(self.drift_ppm);
        let million = 1_000_000u128;
        let micros = d.as_micros() * (million - rho) / (million + rho);
        Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
    }

    /// The lock-delay: how long after a new epoch starts without the state
    /// of a majority of the previous leaders every agent that did not
    /// report has certainly revoked its clients' locks (see snaplock(7)).
    pub fn lock_delay(&self) -> Duration {
        let leaders_stop = self.stretch(self.peer_timeout);
        let agents_revoke = self.stretch(self.grace);
        self.stretch(leaders_stop + agents_revoke) + self.ping_interval
    }
}

/// Addresses compared as numbers (IP octets, then port), never as text
/// (the original compared strings: "10.0.0.10" < "10.0.0.2", B20).
pub fn addr_key(a: SocketAddr) -> (u8, [u8; 16], u16) {
    match a {
        SocketAddr::V4(v4) => (4, v4.ip().to_ipv6_mapped().octets(), v4.port()),
        SocketAddr::V6(v6) => (6, v6.ip().octets(), v6.port()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_order_as_numbers_not_as_text() {
        let a: SocketAddr = "10.0.0.2:4040".parse().unwrap();
        let b: SocketAddr = "10.0.0.10:4040".parse().unwrap();
        assert!(addr_key(a) < addr_key(b), "B20: 10.0.0.2 < 10.0.0.10");
        let p: SocketAddr = "10.0.0.2:900".parse().unwrap();
        assert!(addr_key(p) < addr_key(a));
    }

    #[test]
    fn an_unspecified_listen_address_is_refused() {
        let cfg = ClusterConfig {
            listen: Some("0.0.0.0:4040".parse().unwrap()),
            ..ClusterConfig::default()
        };
        let err = cfg.validate().unwrap_err();
        assert!(err.contains("listen 0.0.0.0:4040"), "{err}");
    }

    #[test]
    fn stretch_and_lock_delay_follow_the_drift_bound() {
        let cfg = ClusterConfig::default();
        // (1.01 / 0.99) * 1 s, rounded up to the microsecond.
        assert_eq!(
            cfg.stretch(Duration::from_secs(1)),
            Duration::from_micros(1_020_203)
        );
        let exact = ClusterConfig {
            drift_ppm: 0,
            ..ClusterConfig::default()
        };
        assert_eq!(exact.lock_delay(), Duration::from_millis(2000 + 5000 + 250));
        assert!(cfg.lock_delay() > exact.lock_delay());
    }
}
