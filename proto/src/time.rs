//! Time as values: the core never reads a clock.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// A point on the agent's monotonic clock, in microseconds from an
/// arbitrary origin (the agent's start, or zero in a simulation).
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(u64);

impl Time {
    /// The origin.
    pub const ZERO: Time = Time(0);
    /// Later than any time the core will see.
    pub const MAX: Time = Time(u64::MAX);

    /// `us` microseconds after the origin.
    pub const fn from_micros(us: u64) -> Time {
        Time(us)
    }

    /// Microseconds since the origin.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// `self - earlier`, or zero when `earlier` is later.
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        Time(
            self.0
                .saturating_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        )
    }
}

impl Sub<Duration> for Time {
    type Output = Time;
    fn sub(self, d: Duration) -> Time {
        Time(
            self.0
                .saturating_sub(u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        )
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}s", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

/// Wall-clock time: microseconds since the Unix epoch. Used only to read
/// and write the protocol's absolute times; every deadline the core keeps
/// is on the monotonic clock.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct UnixTime(pub u64);

/// The longest [`UnixTime::to_wire`]: twenty digits, a dot and six more.
pub const WIRE_LEN: usize = 28;

impl UnixTime {
    /// Formats as Unix seconds, with a decimal part only when there is one
    /// (`1700000005`, `1700000005.25`).
    pub fn to_wire(self) -> String {
        let mut buf = [0; WIRE_LEN];
        // Digits and a dot only.
        String::from_utf8_lossy(self.to_wire_in(&mut buf)).into_owned()
    }

    /// [`to_wire`](Self::to_wire), written in `buf`: what a `LOCKED` line
    /// carries, without a string of its own.
    pub fn to_wire_in(self, buf: &mut [u8; WIRE_LEN]) -> &[u8] {
        let secs = self.0 / 1_000_000;
        let mut frac = self.0 % 1_000_000;
        let mut digits = [0; 20];
        let whole = crate::wire::decimal_bytes(secs, &mut digits);
        let mut len = whole.len();
        buf[..len].copy_from_slice(whole);
        if frac != 0 {
            buf[len] = b'.';
            len += 1;
            let mut places = 6;
            while frac % 10 == 0 {
                frac /= 10;
                places -= 1;
            }
            let frac = crate::wire::decimal_bytes(frac, &mut digits);
            for _ in frac.len()..places {
                buf[len] = b'0';
                len += 1;
            }
            buf[len..len + frac.len()].copy_from_slice(frac);
            len += frac.len();
        }
        &buf[..len]
    }

    /// Reads Unix seconds, integer or decimal (at most 9 decimals; digits
    /// past the microsecond are dropped). `None` when malformed, negative,
    /// or later than year 5138.
    pub fn from_wire(s: &[u8]) -> Option<UnixTime> {
        parse_decimal_micros(s, 100_000_000_000).map(UnixTime)
    }

    /// `self + d`, saturating.
    pub fn plus(self, d: Duration) -> UnixTime {
        UnixTime(
            self.0
                .saturating_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        )
    }

    /// `self - earlier` as a signed number of microseconds.
    pub fn micros_since(self, earlier: UnixTime) -> i128 {
        i128::from(self.0) - i128::from(earlier.0)
    }

    /// `YYYY-MM-DD HH:MM:SS` in UTC, as snaplock's ticket list shows dates.
    pub fn to_utc_string(self) -> String {
        let secs = self.0 / 1_000_000;
        let days = secs / 86_400;
        let rem = secs % 86_400;
        let (y, m, d) = civil_from_days(days);
        format!(
            "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        )
    }
}

/// Reads a duration in seconds, integer or decimal, up to `max_secs`.
pub fn parse_duration(s: &[u8], max_secs: u64) -> Option<Duration> {
    parse_decimal_micros(s, max_secs).map(Duration::from_micros)
}

/// Formats a duration as seconds, integer or decimal.
pub fn duration_to_wire(d: Duration) -> String {
    UnixTime(u64::try_from(d.as_micros()).unwrap_or(u64::MAX)).to_wire()
}

/// `[0-9]+(\.[0-9]{1,9})?` with an integer part of at most `max_secs`, in
/// microseconds.
fn parse_decimal_micros(s: &[u8], max_secs: u64) -> Option<u64> {
    let (int, frac) = match s.iter().position(|&b| b == b'.') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    if int.is_empty() || int.len() > 12 || !int.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let secs = int.iter().fold(0u64, |a, &b| a * 10 + u64::from(b - b'0'));
    if secs > max_secs {
        return None;
    }
    let mut micros = 0u64;
    if let Some(frac) = frac {
        if frac.is_empty() || frac.len() > 9 || !frac.iter().all(u8::is_ascii_digit) {
            return None;
        }
        for i in 0..6 {
            micros = micros * 10 + frac.get(i).map_or(0, |&b| u64::from(b - b'0'));
        }
    }
    Some(secs * 1_000_000 + micros)
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// The time of one event, on both clocks: every `handle_*` call takes one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    /// Monotonic time: every deadline is kept on this clock.
    pub mono: Time,
    /// Wall-clock time: only to read and write the protocol's dates.
    pub wall: UnixTime,
}

impl Now {
    /// The monotonic time of the wall-clock date `date`, as seen now.
    pub fn mono_of(self, date: UnixTime) -> Time {
        let delta = date.micros_since(self.wall);
        if delta >= 0 {
            self.mono + Duration::from_micros(u64::try_from(delta).unwrap_or(u64::MAX))
        } else {
            self.mono - Duration::from_micros(u64::try_from(-delta).unwrap_or(u64::MAX))
        }
    }

    /// The wall-clock date of the monotonic time `t`, as seen now.
    pub fn wall_of(self, t: Time) -> UnixTime {
        if t >= self.mono {
            self.wall.plus(t.saturating_since(self.mono))
        } else {
            UnixTime(
                self.wall
                    .0
                    .saturating_sub(self.mono.as_micros() - t.as_micros()),
            )
        }
    }

    /// `d` later on both clocks.
    pub fn plus(self, d: Duration) -> Now {
        Now {
            mono: self.mono + d,
            wall: self.wall.plus(d),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_times_read_integers_and_decimals() {
        assert_eq!(
            UnixTime::from_wire(b"1700000005"),
            Some(UnixTime(1_700_000_005_000_000))
        );
        assert_eq!(
            UnixTime::from_wire(b"1700000005.25"),
            Some(UnixTime(1_700_000_005_250_000))
        );
        assert_eq!(
            UnixTime::from_wire(b"1.123456789"),
            Some(UnixTime(1_123_456))
        );
        for bad in [
            &b""[..],
            b".5",
            b"5.",
            b"-1",
            b"1e9",
            b" 1",
            b"1.1234567890",
            b"99999999999999",
        ] {
            assert_eq!(
                UnixTime::from_wire(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn wire_times_print_without_useless_decimals() {
        assert_eq!(UnixTime(1_700_000_005_000_000).to_wire(), "1700000005");
        assert_eq!(UnixTime(1_700_000_005_250_000).to_wire(), "1700000005.25");
        assert_eq!(UnixTime(1).to_wire(), "0.000001");
        for t in [
            0,
            10,
            999_999,
            1_000_001,
            1_700_000_005_000_100,
            1_700_000_005_120_000,
            u64::MAX,
        ] {
            let (secs, frac) = (t / 1_000_000, t % 1_000_000);
            let printed = format!("{secs}.{frac:06}");
            let printed = if frac == 0 {
                secs.to_string()
            } else {
                printed.trim_end_matches('0').to_owned()
            };
            assert_eq!(UnixTime(t).to_wire(), printed, "{t}");
        }
    }

    #[test]
    fn dates_print_in_utc() {
        assert_eq!(UnixTime(0).to_utc_string(), "1970-01-01 00:00:00");
        assert_eq!(
            UnixTime(1_700_000_000_000_000).to_utc_string(),
            "2023-11-14 22:13:20"
        );
        assert_eq!(
            UnixTime(951_782_400_000_000).to_utc_string(),
            "2000-02-29 00:00:00"
        );
    }

    #[test]
    fn wall_dates_map_to_monotonic_times_and_back() {
        let now = Now {
            mono: Time::from_micros(5_000_000),
            wall: UnixTime(1_000_000_000),
        };
        let later = now.mono_of(UnixTime(1_003_000_000));
        assert_eq!(later, Time::from_micros(8_000_000));
        assert_eq!(now.wall_of(later), UnixTime(1_003_000_000));
        assert_eq!(now.mono_of(UnixTime(990_000_000)), Time::from_micros(0));
    }
}
