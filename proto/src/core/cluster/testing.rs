//! What the unit tests of the cluster's core share: loopback addresses,
//! instants, and an agent of a cluster of three.

use std::net::SocketAddr;

use crate::cluster::Id;
use crate::core::Core;
use crate::time::{Now, Time, UnixTime};

/// `127.0.0.1:port`.
pub(super) fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// `ms` milliseconds after the start of the monotonic clock.
pub(super) fn now(ms: u64) -> Now {
    Now {
        mono: Time::from_micros(ms * 1000),
        wall: UnixTime(1_700_000_000_000_000 + ms * 1000),
    }
}

/// The id of the agent `name` at `127.0.0.1:port`.
pub(super) fn id(port: u16, name: &str) -> Id {
    crate::cluster::ids::make_id(None, 1, Some(addr(port)), 1, name).into()
}

/// This agent, at port 4000, of a cluster with members at 4001 and 4002.
pub(super) fn agent_of_three() -> Core {
    let mut config = crate::core::Config::default();
    config.cluster.listen = Some(addr(4000));
    config.cluster.neighbors = vec![addr(4001), addr(4002)];
    Core::new(config, now(1))
}
