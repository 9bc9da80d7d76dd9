//! The trust contract of Sky OS's lock server (snaplock(7), TRUST): how
//! long this agent has run, how much it can be trusted now, and what a
//! request asks of both (`min_uptime`, `min_trust`).
//!
//! Sky's definition: the call rate, smoothed by an exponential moving
//! average that ignores sub-second spikes and decays while idle, gives a
//! *norm*; trust is `min(1, current rate / norm)`. A rate that falls well
//! below what the agent is used to suggests that callers can no longer
//! reach it (a network fault), so what it knows may be stale.
//!
//! - **A call** is a request that a client sends to publish or change
//!   state: `LOCK`, `UNLOCK`, `EXTEND` (and `TRANSACTION`), see
//!   [`is_call`]. Queries (`INFO`, `LOCKSTATUS`, `LISTTICKETS`, `HELP`,
//!   `ALIVE`) are not calls: Sky's reasoning is about callers that
//!   publish their state, and a monitor that polls `INFO` to watch the
//!   trust must not raise it. Peer messages are not calls either: pings
//!   keep a fixed pace whether clients reach the agent or not.
//! - **The current rate** is the number of calls in the last whole second
//!   ([`BUCKET`]) of the agent's monotonic clock, counted from its start.
//! - **The norm** moves once per whole second towards a sample: the least
//!   number of calls among the last [`SPIKE_SECONDS`] whole seconds. A
//!   burst shorter than a second touches at most two consecutive seconds,
//!   so one of any three is untouched and the burst never reaches the
//!   norm. The norm rises towards a larger sample with the half-life
//!   [`RISE_HALF_LIFE`] (a new sustained rate becomes the norm within a
//!   few seconds) and falls towards a smaller one, idle included, with the
//!   half-life [`DECAY_HALF_LIFE`] (after a drop, the norm stays high
//!   for a while, so trust stays low for a while).
//! - **Trust** is `min(1, current rate / norm)`, and 1 while the norm is
//!   below [`NORM_FLOOR`]: an agent that is idle, or has just started,
//!   expects nothing and has seen no drop.
//!
//! Everything is computed from the monotonic time the core is given, so
//! the simulator and the transcripts replay it exactly.

use std::time::Duration;

use crate::time::{Time, parse_duration};
use crate::vocab::Refusal;
use crate::wire::Fields;

/// The length of one count of calls: the current rate is the calls of the
/// last whole one, and the norm moves once per one.
pub const BUCKET: Duration = Duration::from_secs(1);
/// The norm follows the least count of this many last whole seconds, so a
/// burst shorter than one second never moves it.
pub const SPIKE_SECONDS: usize = 3;
/// Half-life of the norm's rise towards a larger sample, in seconds.
pub const RISE_HALF_LIFE: f64 = 2.0;
/// Half-life of the norm's fall towards a smaller sample or towards zero
/// while idle, in seconds.
pub const DECAY_HALF_LIFE: f64 = 30.0;
/// Below this norm, in calls per second, the agent expects nothing: trust
/// is 1.
pub const NORM_FLOOR: f64 = 1.0;
/// Largest `min_uptime` accepted: ten years, in seconds.
pub const MAX_MIN_UPTIME: u64 = 315_360_000;
/// Trust is kept in millionths: 1 is this.
pub const ONE: u32 = 1_000_000;

/// Whether `command` is a call, which the rate counts (see the module
/// documentation).
pub fn is_call(command: &str) -> bool {
    matches!(command, "LOCK" | "UNLOCK" | "EXTEND" | "TRANSACTION")
}

/// The agent's start and its call-rate estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Trust {
    started: Time,
    /// Whole seconds from `started` to the start of the current second.
    second: u64,
    /// Calls in the current second so far.
    count: u64,
    /// Calls in each of the last whole seconds, the latest last.
    last: [u64; SPIKE_SECONDS],
    /// Calls per second the agent is used to.
    norm: f64,
}

impl Trust {
    /// An agent that starts at `now`: no calls, no norm.
    pub fn new(now: Time) -> Trust {
        Trust {
            started: now,
            second: 0,
            count: 0,
            last: [0; SPIKE_SECONDS],
            norm: 0.0,
        }
    }

    /// How long the agent has run at `now`.
    pub fn uptime(&self, now: Time) -> Duration {
        now.saturating_since(self.started)
    }

    /// Counts one call at `now`.
    pub fn note_call(&mut self, now: Time) {
        *self = self.at(now);
        self.count += 1;
    }

    /// Calls in the last whole second before `now`.
    pub fn rate(&self, now: Time) -> u64 {
        self.at(now).last[SPIKE_SECONDS - 1]
    }

    /// The norm at `now`, in calls per second.
    pub fn norm(&self, now: Time) -> f64 {
        self.at(now).norm
    }

    /// Trust at `now`, in millionths (0 to [`ONE`]), rounded down.
    pub fn trust(&self, now: Time) -> u32 {
        let s = self.at(now);
        if s.norm < NORM_FLOOR {
            return ONE;
        }
        let ratio = s.last[SPIKE_SECONDS - 1] as f64 / s.norm;
        if ratio >= 1.0 {
            ONE
        } else {
            (ratio * f64::from(ONE)) as u32
        }
    }

    /// The estimate carried forward to `now`: each whole second passed
    /// closes its count and moves the norm once.
    fn at(&self, now: Time) -> Trust {
        let mut s = *self;
        let target = self.uptime(now).as_secs();
        // After SPIKE_SECONDS + 1 closes every count is zero, and each
        // further second only decays the norm: that part in one step, so a
        // long idle time costs nothing.
        let mut steps = 0;
        while s.second < target && steps <= SPIKE_SECONDS {
            s.close_second();
            steps += 1;
        }
        if s.second < target {
            let idle = target - s.second;
            let idle = i32::try_from(idle).unwrap_or(i32::MAX);
            s.norm *= decay_per_second().powi(idle);
            s.second = target;
        }
        s
    }

    fn close_second(&mut self) {
        self.last.rotate_left(1);
        self.last[SPIKE_SECONDS - 1] = self.count;
        self.count = 0;
        self.second += 1;
        let sample = *self.last.iter().min().expect("SPIKE_SECONDS > 0") as f64;
        self.norm = if sample > self.norm {
            sample - (sample - self.norm) * rise_per_second()
        } else {
            sample + (self.norm - sample) * decay_per_second()
        };
    }
}

/// What is left of a distance to the sample after one second of rise.
fn rise_per_second() -> f64 {
    0.5f64.powf(1.0 / RISE_HALF_LIFE)
}

/// What is left of a distance to the sample after one second of fall.
fn decay_per_second() -> f64 {
    0.5f64.powf(1.0 / DECAY_HALF_LIFE)
}

/// Trust in millionths, as `INFO` and descriptions write it: three
/// decimals, rounded down, without trailing zeros (`1`, `0.87`, `0.042`).
pub fn trust_to_wire(trust: u32) -> String {
    let milli = trust.min(ONE) / 1000;
    let s = format!("{}.{:03}", milli / 1000, milli % 1000);
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Millionths as a number from 0 to 1, to the millionth, without trailing
/// zeros (`min_trust=0.5`).
pub fn fraction_to_wire(millionths: u32) -> String {
    let s = format!("{}.{:06}", millionths / ONE, millionths % ONE);
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Reads a number from 0 to 1 (at most 9 decimals, read to the
/// millionth) as millionths: `min_trust=`.
pub fn fraction_from_wire(v: &[u8]) -> Option<u32> {
    parse_duration(v, 1)
        .and_then(|d| u32::try_from(d.as_micros()).ok())
        .filter(|&t| t <= ONE)
}

/// What a request asks of the agent that decides it (`min_uptime`,
/// `min_trust`); zero asks nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Contract {
    /// `min_uptime=S`: the agent must have run at least this long.
    pub min_uptime: Duration,
    /// `min_trust=X`: the agent's trust must be at least this, in
    /// millionths.
    pub min_trust: u32,
}

impl Contract {
    /// Reads `min_uptime` (seconds, 0 to [`MAX_MIN_UPTIME`], integer or
    /// decimal) and `min_trust` (0 to 1, at most 9 decimals, read to the
    /// millionth) from a request.
    pub fn decode(msg: &impl Fields) -> Result<Contract, Refusal> {
        let mut contract = Contract::default();
        if let Some(v) = msg.get("min_uptime") {
            contract.min_uptime = parse_duration(v, MAX_MIN_UPTIME)
                .filter(|d| d.as_micros() <= u128::from(MAX_MIN_UPTIME) * 1_000_000)
                .ok_or_else(|| {
                    Refusal::invalid(format!(
                        "min_uptime must be from 0 to {MAX_MIN_UPTIME} seconds"
                    ))
                })?;
        }
        if let Some(v) = msg.get("min_trust") {
            contract.min_trust = fraction_from_wire(v)
                .ok_or_else(|| Refusal::invalid("min_trust must be a number from 0 to 1"))?;
        }
        Ok(contract)
    }

    /// Whether an agent of this uptime and trust meets it.
    pub fn is_met(&self, uptime: Duration, trust: u32) -> bool {
        uptime >= self.min_uptime && trust >= self.min_trust
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Message;

    fn at(secs: f64) -> Time {
        Time::from_micros((secs * 1e6).round() as u64)
    }

    /// Calls evenly spaced at `per_sec` a second from `from` (included) to
    /// `to` (excluded), in seconds of virtual time.
    fn calls(t: &mut Trust, from: f64, to: f64, per_sec: u32) {
        let n = ((to - from) * f64::from(per_sec)).round() as u64;
        for k in 0..n {
            t.note_call(at(from + k as f64 / f64::from(per_sec)));
        }
    }

    fn trust_f(t: &Trust, secs: f64) -> f64 {
        f64::from(t.trust(at(secs))) / f64::from(ONE)
    }

    #[test]
    fn a_fresh_agent_is_trusted_and_its_uptime_counts_from_its_start() {
        let t = Trust::new(at(100.0));
        assert_eq!(t.trust(at(100.0)), ONE);
        assert_eq!(t.trust(at(130.0)), ONE);
        assert_eq!(t.uptime(at(112.5)), Duration::from_millis(12_500));
        assert_eq!(t.uptime(at(50.0)), Duration::ZERO);
    }

    #[test]
    fn a_steady_load_becomes_the_norm_within_seconds_and_keeps_trust_at_one() {
        let mut t = Trust::new(at(0.0));
        calls(&mut t, 0.0, 2.0, 20);
        assert_eq!(t.trust(at(2.0)), ONE, "no norm yet");
        calls(&mut t, 2.0, 4.0, 20);
        // Three whole seconds before the first sample, then half the
        // distance every RISE_HALF_LIFE seconds.
        let early = t.norm(at(4.0));
        assert!(early > 5.0 && early < 12.0, "{early}");
        assert_eq!(t.trust(at(4.0)), ONE);
        calls(&mut t, 4.0, 20.0, 20);
        assert!(
            (t.norm(at(20.0)) - 20.0).abs() < 0.1,
            "{}",
            t.norm(at(20.0))
        );
        let mut from = 20.0;
        for s in [30.0, 60.0, 119.5] {
            calls(&mut t, from, s, 20);
            from = s;
            assert_eq!(t.trust(at(s)), ONE, "at {s} s");
            assert_eq!(t.rate(at(s)), 20);
        }
    }

    #[test]
    fn a_sudden_drop_of_the_rate_makes_trust_fall_then_recover_as_the_norm_decays() {
        let mut t = Trust::new(at(0.0));
        calls(&mut t, 0.0, 60.0, 20);
        // The second after the drop: 2 calls against a norm of 20.
        calls(&mut t, 60.0, 61.5, 2);
        let just_after = trust_f(&t, 61.5);
        assert!((0.09..=0.11).contains(&just_after), "{just_after}");
        // One decay half-life later the norm is half-way to 2: 2/11.
        calls(&mut t, 61.5, 90.5, 2);
        let later = trust_f(&t, 90.5);
        assert!((0.17..=0.20).contains(&later), "{later}");
        calls(&mut t, 90.5, 120.5, 2);
        let two_half_lives = trust_f(&t, 120.5);
        assert!(
            two_half_lives > later + 0.1,
            "{later} then {two_half_lives}"
        );
        calls(&mut t, 120.5, 300.5, 2);
        let much_later = trust_f(&t, 300.5);
        assert!((0.9..=1.0).contains(&much_later), "{much_later}");
    }

    #[test]
    fn while_idle_the_norm_decays_with_its_half_life_and_trust_returns_to_one() {
        let mut t = Trust::new(at(0.0));
        calls(&mut t, 0.0, 60.0, 20);
        let norm = t.norm(at(61.0));
        let half = t.norm(at(61.0 + DECAY_HALF_LIFE));
        assert!((half / norm - 0.5).abs() < 0.02, "{norm} then {half}");
        // Idle against a norm of 20: no trust at all...
        assert_eq!(t.trust(at(70.0)), 0);
        assert_eq!(t.trust(at(150.0)), 0);
        // ...until the norm fell below NORM_FLOOR: log2(20) half-lives.
        assert_eq!(t.trust(at(200.0)), ONE);
        assert!(t.norm(at(200.0)) < NORM_FLOOR);
    }

    #[test]
    fn a_burst_shorter_than_a_second_does_not_move_the_norm() {
        let mut quiet = Trust::new(at(0.0));
        calls(&mut quiet, 0.0, 60.0, 5);
        let mut burst = quiet;
        // 500 calls in 0.5 s, across the boundary of two seconds.
        calls(&mut burst, 59.75, 60.25, 1000);
        calls(&mut quiet, 60.0, 120.0, 5);
        calls(&mut burst, 60.25, 120.0, 5);
        for s in [60.5, 61.5, 62.5, 63.5, 70.0, 119.5] {
            let (q, b) = (quiet.norm(at(s)), burst.norm(at(s)));
            assert!(
                (q - b).abs() < 1e-9,
                "at {s} s: norm {q} without, {b} with the burst"
            );
        }
        // Calls at that pace over four whole seconds are a new rate, and move it.
        let mut long = quiet;
        calls(&mut long, 120.0, 124.0, 170);
        assert!(long.norm(at(124.5)) > quiet.norm(at(124.5)) + 40.0);
    }

    #[test]
    fn the_estimate_does_not_depend_on_when_it_is_looked_at() {
        let mut t = Trust::new(at(0.0));
        calls(&mut t, 0.0, 30.0, 7);
        let direct = t.at(at(5000.0));
        let stepped = t.at(at(31.0)).at(at(33.3)).at(at(400.0)).at(at(5000.0));
        assert_eq!(direct.second, stepped.second);
        assert_eq!(direct.last, stepped.last);
        assert!((direct.norm - stepped.norm).abs() <= direct.norm * 1e-9);
        let mut a = t;
        let mut b = t;
        a.note_call(at(40.0));
        b = b.at(at(35.0));
        b.note_call(at(40.0));
        assert_eq!(a.last, b.last);
        assert_eq!(a.count, b.count);
    }

    #[test]
    fn trust_is_written_with_three_decimals_rounded_down() {
        assert_eq!(trust_to_wire(ONE), "1");
        assert_eq!(trust_to_wire(0), "0");
        assert_eq!(trust_to_wire(870_000), "0.87");
        assert_eq!(trust_to_wire(42_999), "0.042");
        assert_eq!(trust_to_wire(999_999), "0.999");
        assert_eq!(fraction_to_wire(999_999), "0.999999");
        assert_eq!(fraction_to_wire(500_000), "0.5");
        assert_eq!(fraction_to_wire(ONE), "1");
        assert_eq!(fraction_to_wire(0), "0");
    }

    fn decode(params: &[(&str, &str)]) -> Result<Contract, Refusal> {
        let mut msg = Message::new("LOCK");
        for (k, v) in params {
            msg.set(k, *v);
        }
        Contract::decode(&msg)
    }

    #[test]
    fn a_contract_reads_seconds_and_a_fraction_and_refuses_anything_else() {
        assert_eq!(decode(&[]), Ok(Contract::default()));
        let c = decode(&[("min_uptime", "3600"), ("min_trust", "0.5")]).expect("valid");
        assert_eq!(c.min_uptime, Duration::from_secs(3600));
        assert_eq!(c.min_trust, 500_000);
        let c = decode(&[("min_uptime", "0.25"), ("min_trust", "1")]).expect("valid");
        assert_eq!(c.min_uptime, Duration::from_millis(250));
        assert_eq!(c.min_trust, ONE);
        assert_eq!(decode(&[("min_trust", "0")]).map(|c| c.min_trust), Ok(0));
        let max = MAX_MIN_UPTIME.to_string();
        assert!(decode(&[("min_uptime", &max)]).is_ok());
        for bad in ["-1", "x", "", "1e3", "315360000.5", "315360001", " 5"] {
            let e = decode(&[("min_uptime", bad)]).expect_err(bad);
            assert_eq!(e.error, "invalid");
            assert!(e.description.starts_with("min_uptime"), "{bad}: {e:?}");
        }
        for bad in ["-0.5", "1.5", "1.000001", "2", "x", "", ".5", "0,5"] {
            let e = decode(&[("min_trust", bad)]).expect_err(bad);
            assert_eq!(e.error, "invalid");
            assert!(e.description.starts_with("min_trust"), "{bad}: {e:?}");
        }
    }

    #[test]
    fn a_contract_is_met_by_as_much_uptime_and_trust_as_it_asks_or_more() {
        let c = Contract {
            min_uptime: Duration::from_secs(10),
            min_trust: 500_000,
        };
        assert!(c.is_met(Duration::from_secs(10), 500_000));
        assert!(c.is_met(Duration::from_secs(99), ONE));
        assert!(!c.is_met(Duration::from_millis(9_999), ONE));
        assert!(!c.is_met(Duration::from_secs(99), 499_999));
        assert!(Contract::default().is_met(Duration::ZERO, 0));
    }
}
