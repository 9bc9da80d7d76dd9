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
    /// Its clients' transactions.
    pub txs: super::tx::HomeTxs,
}

/// A waiting request of this agent's clients, as sent to its owner.
impl Home {
    /// Notes `contact`, the latest time a majority of this epoch's acting
    /// leaders answered (none: no majority), and says whether this agent is
    /// in contact at `now`: such a time within `grace`. The time never
    /// goes back, and every time it is found in contact counts for the
    /// revocation's edge ([`Home::contact_lost`]): a grant delivered on
    /// contact found between two ticks is revoked when contact is lost,
    /// even if no tick saw the contact.
    pub fn note_contact(&mut self, contact: Option<Time>, now: Time, grace: Duration) -> bool {
        if let Some(t) = contact {
            self.last_ok = Some(self.last_ok.map_or(t, |o| o.max(t)));
        }
        let in_contact = self.last_ok.is_some_and(|t| now < t + grace);
        if in_contact {
            self.was_in_contact = true;
        }
        in_contact
    }

    /// The tick's check: whether contact was lost since it was last found
    /// (every lock of this agent's clients is then revoked, once).
    pub fn contact_lost(&mut self, in_contact: bool) -> bool {
        let lost = self.was_in_contact && !in_contact;
        self.was_in_contact = in_contact;
        lost
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Submitted {
    pub object: ObjectName,
    pub epoch: u64,
    pub at: Time,
    /// `try=true`: failed as soon as nothing can grant it.
    pub try_once: bool,
    /// The largest fence this agent, a follower of the request's owner,
    /// refused to vote for (0: none). It refuses it again if asked again:
    /// its own yes vote delivers the grant, so it never says yes to what
    /// it said no to (docs/cluster.md "Granting", the home's own vote).
    pub refused: u64,
}

/// A waiting request is sent again this often (its answer may be lost
/// with a link).
pub(crate) const RESEND: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    fn s(ms: u64) -> Time {
        Time::from_micros(ms * 1000)
    }

    #[test]
    fn contact_lasts_a_grace_after_a_majority_last_answered() {
        let grace = Duration::from_secs(5);
        let mut h = Home::default();
        assert!(!h.note_contact(None, s(1000), grace), "never answered");
        assert!(h.note_contact(Some(s(2000)), s(2100), grace));
        // An older majority time (a new epoch's first answers) does not
        // move it back; no majority now leaves the last one standing.
        assert!(h.note_contact(Some(s(1500)), s(6900), grace));
        assert_eq!(h.last_ok, Some(s(2000)));
        assert!(h.note_contact(None, s(6999), grace));
        assert!(!h.note_contact(None, s(7000), grace), "grace is over");
    }

    #[test]
    fn losing_contact_revokes_once_even_when_only_seen_between_ticks() {
        let grace = Duration::from_secs(5);
        let mut h = Home::default();
        assert!(
            !h.contact_lost(false),
            "never in contact: nothing to revoke"
        );
        // Found in contact by a grant between two ticks, not by a tick.
        assert!(h.note_contact(Some(s(1000)), s(1000), grace));
        let at_tick = h.note_contact(None, s(6000), grace);
        assert!(!at_tick);
        assert!(h.contact_lost(at_tick), "the edge");
        assert!(!h.contact_lost(false), "only once");
        assert!(h.note_contact(Some(s(7000)), s(7000), grace));
        assert!(!h.contact_lost(true));
    }
}
