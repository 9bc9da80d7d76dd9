//! The cluster: peer links, membership, elections, epochs, the lock
//! protocol between leaders, and the handover between epochs.
//!
//! The design and the argument for its safety are in `docs/cluster.md`.

pub mod config;

use std::fmt;

pub use config::{ClusterConfig, Plant};

/// A link to another computer, numbered by the shell; never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeerId(pub u64);

impl fmt::Display for PeerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "peer {}", self.0)
    }
}
