//! Each simulated computer's clock: its own rate, its own origin, its own
//! idea of the date. True time (the simulator's, in microseconds) is never
//! shown to a core; it is what the checker measures with.

use snaplock_proto::{Now, Time, UnixTime};

/// A computer's clock: monotonic time runs at `1 + drift_ppm / 10⁶` of true
/// time from `mono_origin`. The wall clock either follows the monotonic
/// clock from an offset of the computer's own (clocks not synchronized at
/// all), or, disciplined by NTP, follows true time within a few
/// milliseconds whatever the monotonic clock's rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    /// Rate error in parts per million, signed.
    pub drift_ppm: i64,
    /// The monotonic reading at true time zero.
    pub mono_origin: u64,
    /// Wall minus monotonic (or, with `ntp`, wall minus true time), µs.
    pub wall_offset: u64,
    /// Whether the wall clock is disciplined to true time.
    pub ntp: bool,
}

const MILLION: i128 = 1_000_000;

impl Clock {
    /// The monotonic reading at true time `t`; never decreases as `t` grows
    /// (the rate stays positive for any drift under 100 %).
    pub fn mono_at(&self, t: u64) -> u64 {
        let t = i128::from(t);
        let skew = (t * i128::from(self.drift_ppm)).div_euclid(MILLION);
        u64::try_from(i128::from(self.mono_origin) + t + skew).expect("clock in range")
    }

    /// The wall-clock reading at true time `t`, in microseconds since 1970.
    pub fn wall_at(&self, t: u64) -> u64 {
        if self.ntp {
            t + self.wall_offset
        } else {
            self.mono_at(t) + self.wall_offset
        }
    }

    /// What a core on this computer is told at true time `t`.
    pub fn now(&self, t: u64) -> Now {
        Now {
            mono: Time::from_micros(self.mono_at(t)),
            wall: UnixTime(self.wall_at(t)),
        }
    }

    /// The first true time at which the monotonic clock reads `mono` or
    /// more (zero when it already did at true time zero).
    pub fn true_at_mono(&self, mono: u64) -> u64 {
        if mono <= self.mono_origin {
            return 0;
        }
        let rate = MILLION + i128::from(self.drift_ppm);
        let delta = i128::from(mono - self.mono_origin);
        let guess = (delta * MILLION + rate - 1) / rate;
        let mut t = u64::try_from(guess).unwrap_or(u64::MAX / 2);
        // Integer rounding of `mono_at` can put the answer a step off.
        while self.mono_at(t) < mono {
            t += 1;
        }
        while t > 0 && self.mono_at(t - 1) >= mono {
            t -= 1;
        }
        t
    }

    /// When the wall-clock `date` comes, as a program on this computer
    /// sees it at true time `seen`: it turns the date into its monotonic
    /// clock then (as the core does with `Now::mono_of`) and waits for that.
    pub fn true_at_date(&self, seen: u64, date: u64) -> u64 {
        let delta = i128::from(date) - i128::from(self.wall_at(seen));
        let mono = (i128::from(self.mono_at(seen)) + delta).max(0);
        self.true_at_mono(u64::try_from(mono).expect("clock in range"))
    }
}

#[cfg(test)]
mod tests {
    use super::Clock;

    #[test]
    fn a_fast_clock_gains_and_the_inverse_finds_the_first_instant() {
        for drift_ppm in [-99_999, -10_000, 0, 1, 10_000, 99_999] {
            let c = Clock {
                drift_ppm,
                mono_origin: 1_000,
                wall_offset: 1_700_000_000_000_000,
                ntp: false,
            };
            assert_eq!(c.mono_at(0), 1_000);
            let a = c.mono_at(1_000_000);
            assert_eq!(a, (1_000 + 1_000_000 + drift_ppm) as u64);
            for m in [1_000, 1_001, 5_555_555, 77_777_777_777] {
                let t = c.true_at_mono(m);
                assert!(c.mono_at(t) >= m);
                assert!(t == 0 || c.mono_at(t - 1) < m);
            }
            let w = c.wall_at(123_456);
            assert!(c.true_at_date(0, w) <= 123_456);
            let ntp = Clock { ntp: true, ..c };
            assert_eq!(ntp.wall_at(5), 1_700_000_000_000_005);
        }
    }
}
