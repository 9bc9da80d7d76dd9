//! Logging: `env_logger` to stderr (journald adds its own metadata).
//!
//! The logger lets every record through and [`log::set_max_level`] does the
//! filtering, so `SIGHUP` can raise or lower the level at run time. When
//! `RUST_LOG` is set it decides instead, as users of Rust programs expect.

use std::time::Duration;

use log::LevelFilter;
use snaplock_proto::Time;

/// Whether `RUST_LOG` is set (and so decides the log level).
pub fn rust_log_is_set() -> bool {
    std::env::var_os("RUST_LOG").is_some_and(|v| !v.is_empty())
}

/// Installs the logger at `level` (or `RUST_LOG`'s filters when set).
/// Call once, from `main`.
pub fn init(level: LevelFilter) {
    let mut builder = env_logger::Builder::new();
    builder.target(env_logger::Target::Stderr);
    // A failover's steps are milliseconds apart: seconds would hide them.
    builder.format_timestamp_millis();
    if rust_log_is_set() {
        builder.parse_default_env();
        builder.init();
    } else {
        builder.filter_level(LevelFilter::Trace);
        builder.init();
        log::set_max_level(level);
    }
}

/// Logs at most a few messages of a kind per interval, counting the others:
/// what a flood of connections or a failing system call can repeat must
/// not fill the log.
pub(crate) struct RateLimit {
    next: Time,
    burst: u32,
    left: u32,
    suppressed: u64,
}

impl RateLimit {
    const INTERVAL: Duration = Duration::from_secs(10);

    /// One message per interval.
    pub(crate) fn new() -> RateLimit {
        RateLimit::with_burst(1)
    }

    /// `burst` messages per interval.
    pub(crate) fn with_burst(burst: u32) -> RateLimit {
        RateLimit {
            next: Time::ZERO,
            burst,
            left: 0,
            suppressed: 0,
        }
    }

    /// `Some(number suppressed since the last one)` when a message may go out.
    pub(crate) fn allow(&mut self, now: Time) -> Option<u64> {
        if now >= self.next {
            self.next = now + Self::INTERVAL;
            self.left = self.burst;
        }
        if self.left > 0 {
            self.left -= 1;
            Some(std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_per_interval_goes_out_and_the_rest_is_counted() {
        let t0 = Time::ZERO + Duration::from_secs(100);
        let mut limit = RateLimit::with_burst(2);
        assert_eq!(limit.allow(t0), Some(0));
        assert_eq!(limit.allow(t0), Some(0));
        for _ in 0..5 {
            assert_eq!(limit.allow(t0 + Duration::from_secs(9)), None);
        }
        assert_eq!(limit.allow(t0 + Duration::from_secs(10)), Some(5));
        assert_eq!(limit.allow(t0 + Duration::from_secs(10)), Some(0));
        assert_eq!(limit.allow(t0 + Duration::from_secs(11)), None);
    }
}
