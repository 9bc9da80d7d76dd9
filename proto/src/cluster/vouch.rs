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
        if let Some((at, _)) = c.carried.get(object) {
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
        let mut carried = BTreeMap::new();
        for name in self.table.objects.keys() {
            if !self.holds(name) {
                continue;
            }
            let Some(at) = self.object_vouched_from(name) else {
                continue; // nothing vouched: revoked on the next tick
            };
            let owner = self
                .cluster
                .owner_index(name)
                .map(|i| self.cluster.leaders[i].clone());
            carried.insert(name.clone(), (at, owner));
        }
        self.cluster.carried = carried;
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
        // Until a new owner answers, nothing can settle: a million locks
        // carried over are not walked every tick for nothing.
        let answers: Vec<Option<Time>> = (self.cluster.leaders.iter())
            .map(|l| self.answered_by(l, now.mono))
            .collect();
        if self.cluster.carried.is_empty() || answers.iter().all(Option::is_none) {
            return;
        }
        let names: Vec<ObjectName> = self.cluster.carried.keys().cloned().collect();
        for name in names {
            let held = self.holds(&name);
            let Some(i) = self.cluster.owner_index(&name).filter(|_| held) else {
                self.cluster.carried.remove(&name);
                continue;
            };
            let owner = &self.cluster.leaders[i];
            let (at, old_owner) = &self.cluster.carried[&name];
            if let Some(a) = answers[i] {
                if old_owner.as_ref() == Some(owner) || a <= *at + window {
                    self.cluster.carried.remove(&name);
                }
            }
        }
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
        let carried_out = self
            .cluster
            .carried
            .iter()
            .any(|(_, (at, _))| now.mono >= *at + grace);
        if newly == 0 && !carried_out {
            return;
        }
        let c = &self.cluster;
        let held: Vec<(ObjectName, TicketId)> = self
            .table
            .objects
            .iter()
            .filter(|(n, _)| match c.carried.get(&***n) {
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
            self.cluster.carried.remove(&name);
            if let Some(t) = self.take_ticket(&name, id) {
                if let Some(owner) = t.owner {
                    self.reply(owner, replies::unlocked(&name, t.tag, Some("lost")));
                }
            }
        }
    }
}
