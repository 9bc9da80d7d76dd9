//! The client's clocks: timeouts on the monotonic clock, protocol dates on
//! the wall clock. The only functions of the client that read a clock.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use snaplock_proto::UnixTime;

/// Now, on the monotonic clock: every local timeout is measured on it.
#[allow(clippy::disallowed_methods)] // the client's single monotonic clock reading
pub fn monotonic() -> Instant {
    Instant::now()
}

/// Now, on the wall clock: only to write `timeout=` dates and read
/// `timeout_date=` ones, which the protocol gives as Unix seconds.
#[allow(clippy::disallowed_methods)] // the client's single wall clock reading
pub fn wall() -> UnixTime {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    UnixTime(u64::try_from(since.as_micros()).unwrap_or(u64::MAX))
}
