//! The agent's one clock: the only place that reads the time.
//!
//! The core never reads a clock (it is sans-IO); the event loop reads this one
//! once per iteration and hands the same [`Now`] to every call of that
//! iteration, so all the decisions of one wake-up agree on what time it is.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use snaplock_proto::{Now, Time, UnixTime};

/// Monotonic time counted from the agent's start, plus the wall clock.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// A clock whose monotonic origin is now.
    #[allow(clippy::disallowed_methods)] // the agent's single clock: every other reader gets `Now` from here
    pub fn start() -> Clock {
        Clock {
            start: Instant::now(),
        }
    }

    /// The time on both clocks.
    #[allow(clippy::disallowed_methods)] // the agent's single clock: every other reader gets `Now` from here
    pub fn now(&self) -> Now {
        let mono = Instant::now().saturating_duration_since(self.start);
        // A wall clock set before 1970 is not a date the protocol can carry:
        // read it as the epoch rather than fail.
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Now {
            mono: Time::from_micros(saturating_micros(mono.as_micros())),
            wall: UnixTime(saturating_micros(wall.as_micros())),
        }
    }
}

fn saturating_micros(us: u128) -> u64 {
    u64::try_from(us).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_time_starts_near_zero_and_never_goes_back() {
        let clock = Clock::start();
        let a = clock.now();
        let b = clock.now();
        assert!(
            a.mono.as_micros() < 1_000_000,
            "origin is the clock's start: {a:?}"
        );
        assert!(b.mono >= a.mono);
        assert!(
            b.wall.0 > 1_600_000_000_000_000,
            "wall clock is a Unix date in µs: {b:?}"
        );
    }
}
