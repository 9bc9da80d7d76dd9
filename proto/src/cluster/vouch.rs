//! The home's side of a lease in a cluster (docs/cluster.md, "Links and
//! liveness"): until when the owner of each object vouches for this
//! agent's locks on it, and the revocation of those it stopped vouching
//! for, also across epoch changes.

use std::collections::BTreeMap;

use super::Id;
use crate::core::Core;
use crate::core::replies;
use crate::core::table::{ObjectName, TicketId};
use crate::time::{Now, Time};

/// Home: the locks held when this agent moved to the current epoch, each
/// with what its former owner vouched for (the send time of the latest
/// ping it answered, or the majority's, whichever is earlier) and who that
/// was. An entry of an object that no longer holds anything means nothing
/// and is dropped on the next walk, or when the object is granted again.
#[derive(Debug, Default)]
pub(crate) struct Carried {
    pub locks: BTreeMap<ObjectName, (Time, Option<Id>)>,
    /// No entry's time is earlier: nothing carried lapses before it +
    /// `grace` (kept when entries go, so it may be earlier than all).
    earliest: Option<Time>,
    /// The leaders (bit i = leader i) whose answers were weighed against
    /// the entries already: only the first answer a leader gives after the
    /// move can settle one (a later answer is sent later), so a million
    /// carried locks are walked once per leader, not every tick.
    weighed: u8,
}

impl Carried {
    fn new(locks: BTreeMap<ObjectName, (Time, Option<Id>)>) -> Carried {
        let earliest = locks.values().map(|(at, _)| *at).min();
        Carried {
            locks,
            earliest,
            weighed: 0,
        }
    }

    /// Whether some entry may have lapsed by `now`.
    fn may_have_lapsed(&self, now: Time, grace: std::time::Duration) -> bool {
        self.earliest.is_some_and(|e| now >= e + grace)
    }
}

impl Core {
    /// Whether a client of this agent holds `object`.
    fn holds(&self, object: &[u8]) -> bool {
        self.table
            .objects
            .get(object)
            .is_some_and(|o| o.tickets.iter().any(|t| t.state.is_held()))
    }

    /// The send time of the latest ping `owner`, a leader of this view,
    /// answered as an acting leader (for this agent itself: now, while it
    /// acts as a ready leader).
    fn answered_by(&self, owner: &Id, now: Time) -> Option<Time> {
        let c = &self.cluster;
        if *owner == c.me {
            let ready = c.leading.as_ref().is_some_and(|l| l.ready);
            return (ready && self.acting(now)).then_some(now);
        }
        c.contact
            .get(owner)
            .filter(|k| k.in_view(c.epoch, c.view))
            .and_then(|k| k.active_sent)
    }

    /// The time from which this agent's locks on `object` are vouched for,
    /// never later than what a majority of the leaders vouches for
    /// (`last_ok`). An owner drops the tickets of a home it has not heard
    /// from for `release_delay`, so the home relies on them only `grace`
    /// after the owner last answered it: a majority answering is not enough
    /// when the owner is not in it. A lock this agent held when it moved to
    /// this epoch keeps what its former owner vouched for until the new
    /// owner answers soon enough ([`Core::carry_over`]).
    pub(crate) fn object_vouched_from(&self, object: &[u8]) -> Option<Time> {
        let c = &self.cluster;
        let majority = c.last_ok?;
        if let Some((at, _)) = c.carried.locks.get(object) {
            return Some(majority.min(*at));
        }
        let Some(i) = c.owner_index(object) else {
            return Some(majority);
        };
        let owner = &c.leaders[i];
        if *owner == c.me {
            return Some(majority); // it never drops its own home's tickets
        }
        self.answered_by(owner, self.last_now)
            .map(|a| majority.min(a))
    }

    /// Until when this agent vouches for the locks on `objects` (for all of
    /// its locks when empty): `valid_for` in `ABSOLUTELY`.
    pub(crate) fn vouched_until<'a>(
        &self,
        objects: impl Iterator<Item = &'a ObjectName>,
    ) -> Option<Time> {
        let grace = self.cluster.cfg.grace;
        let mut until = self.cluster.last_ok? + grace;
        for name in objects {
            if self.holds(name) {
                until = until.min(self.object_vouched_from(name)? + grace);
            }
        }
        Some(until)
    }

    /// On moving to a new epoch: each held lock keeps what its owner in the
    /// old epoch vouched for. That owner may still act in the old epoch
    /// (for `stretch(peer_timeout)` after a quorum moved on) and drop this
    /// agent's tickets there once it has not heard it for `release_delay`.
    pub(crate) fn carry_over(&mut self) {
        // In key order, so the map is built in one pass.
        let mut carried = Vec::new();
        for (name, o) in &self.table.objects {
            if !o.tickets.iter().any(|t| t.state.is_held()) {
                continue;
            }
            let Some(at) = self.object_vouched_from(name) else {
                continue; // nothing vouched: revoked on the next tick
            };
            let owner = self
                .cluster
                .owner_index(name)
                .map(|i| self.cluster.leaders[i].clone());
            carried.push((name.clone(), (at, owner)));
        }
        self.cluster.carried = Carried::new(carried.into_iter().collect());
    }

    /// `object` is granted again to a client of this agent: if it held
    /// nothing, what was carried for it is gone with what it held.
    pub(crate) fn regranted(&mut self, object: &[u8]) {
        if !self.cluster.carried.locks.is_empty() && !self.holds(object) {
            self.cluster.carried.locks.remove(object);
        }
    }

    /// A carried lock follows its new owner once that owner answered: at
    /// once when it is the same agent (it left the old epoch before it
    /// answered in this one), else only when it answered before the old
    /// owner could have dropped the lock while still acting in the old
    /// epoch; otherwise the lock ends with what the old owner vouched for.
    fn settle_carried(&mut self, now: Now) {
        let cfg = &self.cluster.cfg;
        let window = (cfg.stretch(cfg.grace) + cfg.ping_interval)
            .saturating_sub(cfg.stretch(cfg.stretch(cfg.peer_timeout)));
        // Until a new owner answers, nothing can settle; and only its
        // first answer can: a million locks carried over are not walked
        // every tick for nothing.
        let answers: Vec<Option<Time>> = (self.cluster.leaders.iter())
            .map(|l| self.answered_by(l, now.mono))
            .collect();
        let fresh = (answers.iter().enumerate().take(8))
            .filter(|(_, a)| a.is_some())
            .fold(0u8, |m, (i, _)| m | 1 << i)
            & !self.cluster.carried.weighed;
        if self.cluster.carried.locks.is_empty() || fresh == 0 {
            return;
        }
        self.cluster.carried.weighed |= fresh;
        let mut locks = std::mem::take(&mut self.cluster.carried.locks);
        locks.retain(|name, (at, old_owner)| {
            let held = self.holds(name);
            let Some(i) = self.cluster.owner_index(name).filter(|_| held) else {
                return false;
            };
            let owner = &self.cluster.leaders[i];
            match answers[i] {
                Some(a) if i < 8 && fresh & (1 << i) != 0 => {
                    old_owner.as_ref() != Some(owner) && a > *at + window
                }
                _ => true,
            }
        });
        self.cluster.carried.locks = locks;
    }

    /// Takes back the held locks whose owner stopped vouching for them
    /// (for the owners of this epoch, on the edge: later grants from it are
    /// not delivered until it does again).
    pub(crate) fn revoke_where_owner_lapsed(&mut self, now: Now) {
        self.settle_carried(now);
        let grace = self.cluster.cfg.grace;
        let mut lapsed = 0u8;
        for (i, l) in self.cluster.leaders.iter().enumerate().take(8) {
            let answered = self.answered_by(l, now.mono);
            if *l != self.cluster.me && answered.is_none_or(|t| now.mono >= t + grace) {
                lapsed |= 1 << i;
            }
        }
        let newly = lapsed & !self.cluster.lapsed_owners;
        self.cluster.lapsed_owners = lapsed;
        let carried_out = self.cluster.carried.may_have_lapsed(now.mono, grace);
        if newly == 0 && !carried_out {
            return;
        }
        let c = &self.cluster;
        let held: Vec<(ObjectName, TicketId)> = self
            .table
            .objects
            .iter()
            .filter(|(n, _)| match c.carried.locks.get(&***n) {
                Some((at, _)) => now.mono >= *at + grace,
                None => c
                    .owner_index(n)
                    .is_some_and(|i| i < 8 && newly & (1 << i) != 0),
            })
            .flat_map(|(n, o)| {
                o.tickets
                    .iter()
                    .filter(|t| t.state.is_held())
                    .map(move |t| (n.clone(), t.id))
            })
            .collect();
        if !held.is_empty() {
            log::warn!(
                "no answer from the owner of {} held locks for {grace:?}: revoking them",
                held.len()
            );
        }
        for (name, id) in held {
            self.cluster.carried.locks.remove(&name);
            if let Some(t) = self.take_ticket(&name, id) {
                if let Some(owner) = t.owner {
                    self.reply(owner, replies::unlocked(&name, t.tag, Some("lost")));
                }
            }
        }
        if carried_out {
            // What lapsed is revoked: what is left lapses later.
            let c = &mut self.cluster.carried;
            c.locks.retain(|_, (at, _)| now.mono < *at + grace);
            c.earliest = c.locks.values().map(|(at, _)| *at).min();
        }
    }
}
