//! The home side: this agent's own clients' requests, sent to the owner of
//! their object, and their answers relayed back; contact with the leaders,
//! and revocation when it is lost (docs/cluster.md).
//!
//! This file holds the part and its own logic; what the core does with it
//! on each message and tick is in `core/cluster/home.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Id;
use super::msg::PeerMsg;
use super::vouch::Carried;
use crate::time::Time;
use crate::vocab::{ObjectName, TicketId};

/// The home's part: this agent's own clients' requests as the cluster
/// sees them, and what keeps their locks (docs/cluster.md, "Availability").
#[derive(Debug, Default)]
pub(crate) struct Home {
    /// Waiting requests sent to their owners.
    pub submitted: BTreeMap<TicketId, Submitted>,
    /// When contact with a majority of acting leaders last held, carried
    /// across epoch changes.
    pub last_ok: Option<Time>,
    /// Whether it was found in contact since the last tick's check (for
    /// the revocation's edge).
    pub was_in_contact: bool,
    /// Bit i: leader i stopped vouching for the locks it owns.
    pub lapsed_owners: u8,
    /// The locks held when this agent moved to this epoch, with what their
    /// former owner vouched for and who it was (`vouch.rs`).
    pub carried: Carried,
    /// Releases (`UNLOCK`) for owners of this epoch whose link was down,
    /// sent when it comes up.
    pub unsent: Vec<(Id, PeerMsg)>,
}

/// A waiting request of this agent's clients, as sent to its owner.
#[derive(Clone, Debug)]
pub(crate) struct Submitted {
    pub object: ObjectName,
    pub epoch: u64,
    pub at: Time,
    /// `try=true`: failed as soon as nothing can grant it.
    pub try_once: bool,
}

/// A waiting request is sent again this often (its answer may be lost
/// with a link).
pub(crate) const RESEND: Duration = Duration::from_secs(1);
