//! The home's side of a lease in a cluster (docs/cluster.md, "Links and
//! liveness"): until when the owner of each object vouches for this
//! agent's locks on it, and the revocation of those it stopped vouching
//! for, also across epoch changes.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::Id;
use crate::core::Core;
use crate::local::replies;
use crate::time::{Now, Time};
use crate::vocab::{ObjectName, TicketId};

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
    /// The epoch the locks were carried from.
    pub from_epoch: u64,
    /// Members known to have left that epoch, with when this agent learnt
    /// it (itself: when it moved; another: when a message of a later epoch
    /// from it arrived). Epochs only grow: a member that left never
    /// answers in that epoch again.
    left: Vec<(SocketAddr, Time)>,
    /// The old owners (by address) for which enough members were known to
    /// have left when the entries were last walked.
    settled_for: Vec<SocketAddr>,
}

impl Carried {
    fn new(locks: BTreeMap<ObjectName, (Time, Option<Id>)>) -> Carried {
        let earliest = locks.values().map(|(at, _)| *at).min();
        Carried {
            locks,
            earliest,
            ..Carried::default()
        }
    }

    /// Whether some entry may have lapsed by `now`.
    fn may_have_lapsed(&self, now: Time, grace: std::time::Duration) -> bool {
        self.earliest.is_some_and(|e| now >= e + grace)
    }

    /// `member` was found in an epoch later than the one the locks were
    /// carried from, at `now`.
    pub(crate) fn left(&mut self, member: SocketAddr, epoch: u64, now: Time) {
        if epoch > self.from_epoch
            && !self.locks.is_empty()
            && !self.left.iter().any(|(a, _)| *a == member)
        {
            self.left.push((member, now));
        }
    }

    /// The time by which `old` had left the epoch itself, or so many other
    /// members had (`members - quorum + 1` of them) that `old` could no
    /// longer gather a quorum's answers in it: it stops acting there at
    /// most `stretch(peer_timeout)` later (docs/cluster.md, "Links and
    /// liveness").
    /// Whichever came first counts: a lock whose old owner was known to be
    /// cut off from its quorum does not wait for that owner's own move.
    fn quorum_left_by(&self, old: SocketAddr, members: usize, quorum: usize) -> Option<Time> {
        let itself = (self.left.iter()).find(|(a, _)| *a == old).map(|(_, t)| *t);
        let need = (members + 1).checked_sub(quorum).map(|n| n.max(1));
        let mut times: Vec<Time> = (self.left.iter())
            .filter(|(a, _)| *a != old)
            .map(|(_, t)| *t)
            .collect();
        times.sort_unstable();
        let others = need.and_then(|n| times.get(n - 1).copied());
        match (itself, others) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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
        c.peers
            .contact
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
    /// (for `stretch(peer_timeout)` after so many members moved on that it
    /// cannot gather a quorum there) and drop this agent's tickets there
    /// once it has not heard it for `release_delay`. A lock still carried
    /// from an earlier epoch keeps its earlier owner and time: that owner
    /// is the one that may still act.
    pub(crate) fn carry_over(&mut self, now: Now) {
        // In key order, so the map is built in one pass.
        let mut carried = Vec::new();
        let before = std::mem::take(&mut self.cluster.carried.locks);
        for (name, o) in &self.table.objects {
            if !o.tickets.iter().any(|t| t.state.is_held()) {
                continue;
            }
            if let Some(entry) = before.get(name) {
                let at = self.cluster.last_ok.map_or(entry.0, |m| m.min(entry.0));
                carried.push((name.clone(), (at, entry.1.clone())));
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
        let mut carried = Carried::new(carried.into_iter().collect());
        carried.from_epoch = self.cluster.epoch;
        if let Some(me) = self.cluster.addr {
            carried.left(me, u64::MAX, now.mono);
        }
        self.cluster.carried = carried;
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
    /// answered in this one) or when the old owner was this agent (its
    /// leader part never drops its own home's tickets); else only once so
    /// many members are known to have left the old epoch that its old
    /// owner stopped acting there before it could drop the lock
    /// (`settle_window`); otherwise the lock ends with what the old owner
    /// vouched for.
    fn settle_carried(&mut self, now: Now) {
        let window = self.settle_window();
        let plant = self.cluster.cfg.plant;
        // Until a new owner answers, or enough members are known to have
        // left, nothing can settle; and only once for each: a million
        // locks carried over are not walked every tick for nothing.
        let answers: Vec<Option<Time>> = (self.cluster.leaders.iter())
            .map(|l| self.answered_by(l, now.mono))
            .collect();
        let fresh = (answers.iter().enumerate().take(8))
            .filter(|(_, a)| a.is_some())
            .fold(0u8, |m, (i, _)| m | 1 << i)
            & !self.cluster.carried.weighed;
        if self.cluster.carried.locks.is_empty() {
            return;
        }
        let c = &self.cluster;
        let (members, quorum) = (c.peers.members.len(), c.peers.quorum);
        let mut olds: Vec<SocketAddr> = Vec::new();
        for (_, old) in c.carried.locks.values() {
            let addr = old
                .as_deref()
                .and_then(super::ids::parse_id)
                .and_then(|p| p.addr);
            if let Some(a) = addr {
                if !olds.contains(&a) {
                    olds.push(a);
                }
            }
            if olds.len() >= 3 {
                break; // at most the leaders of one epoch (in practice)
            }
        }
        let newly_left = olds.iter().any(|a| {
            !c.carried.settled_for.contains(a)
                && c.carried.quorum_left_by(*a, members, quorum).is_some()
        });
        if fresh == 0 && !newly_left {
            return;
        }
        self.cluster.carried.weighed |= fresh;
        let mut left_by: Vec<(SocketAddr, Option<Time>)> = Vec::with_capacity(olds.len());
        for a in olds {
            let c = &mut self.cluster.carried;
            let by = c.quorum_left_by(a, members, quorum);
            if by.is_some() && !c.settled_for.contains(&a) {
                c.settled_for.push(a);
            }
            left_by.push((a, by));
        }
        let mut carried = std::mem::take(&mut self.cluster.carried);
        carried.locks.retain(|name, (at, old_owner)| {
            let held = self.holds(name);
            let Some(i) = self.cluster.owner_index(name).filter(|_| held) else {
                return false;
            };
            if answers[i].is_none() {
                return true;
            }
            let owner = &self.cluster.leaders[i];
            // The same owner in both epochs, or this agent itself: its
            // leader part never drops its own home's tickets
            // (`leader_tick`), so the old owner takes nothing back.
            if old_owner.as_ref() == Some(owner) || old_owner.as_ref() == Some(&self.cluster.me) {
                return false;
            }
            let old_addr = (old_owner.as_deref())
                .and_then(super::ids::parse_id)
                .and_then(|p| p.addr);
            let mut by = (left_by.iter())
                .find(|(a, _)| Some(*a) == old_addr)
                .and_then(|(_, by)| *by);
            if plant == super::Plant::CarryByAnswer {
                by = answers[i];
            }
            // Kept (to end with the old owner's vouch) unless the old owner
            // stopped acting before it could drop the lock.
            by.is_none_or(|t| t > *at + window)
        });
        self.cluster.carried = carried;
    }

    /// How long after the old owner last vouched for a carried lock enough
    /// members must be known to have left its epoch for the lock to follow
    /// its new owner. The old owner drops the lock no earlier than
    /// `release_delay` after it last heard this agent, which is after the
    /// ping it answered was sent: by this agent's clock at least `grace +
    /// ping_interval (1-ρ)/(1+ρ)` after the vouch. It acts at most
    /// `stretch(peer_timeout)` after the members left.
    pub(crate) fn settle_window(&self) -> std::time::Duration {
        let cfg = &self.cluster.cfg;
        let rho = u128::from(cfg.drift_ppm);
        let million = 1_000_000u128;
        let shrunk = cfg.ping_interval.as_micros() * (million - rho) / (million + rho);
        let shrunk = std::time::Duration::from_micros(u64::try_from(shrunk).unwrap_or(0));
        (cfg.grace + shrunk).saturating_sub(cfg.stretch(cfg.peer_timeout))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> Time {
        Time::from_micros(s * 1_000_000)
    }

    #[test]
    fn the_old_owner_is_cut_off_when_the_others_left_even_if_it_moved_later() {
        let (a, b, old): (SocketAddr, SocketAddr, SocketAddr) = (
            "127.0.0.1:4001".parse().unwrap(),
            "127.0.0.1:4002".parse().unwrap(),
            "127.0.0.1:4000".parse().unwrap(),
        );
        let mut c = Carried::new([(ObjectName::from(&b"n"[..]), (at(1), None))].into());
        c.from_epoch = 5;
        c.left(a, 6, at(10));
        assert_eq!(c.quorum_left_by(old, 3, 2), None, "one of two others");
        c.left(b, 6, at(11));
        assert_eq!(c.quorum_left_by(old, 3, 2), Some(at(11)));
        // The old owner's own move, later, does not undo what was known.
        c.left(old, 6, at(15));
        assert_eq!(c.quorum_left_by(old, 3, 2), Some(at(11)));
        // Nor does an earlier move of its own count for less.
        let mut d = Carried::new([(ObjectName::from(&b"n"[..]), (at(1), None))].into());
        d.from_epoch = 5;
        d.left(old, 6, at(4));
        d.left(a, 6, at(10));
        d.left(b, 6, at(11));
        assert_eq!(d.quorum_left_by(old, 3, 2), Some(at(4)));
        // An epoch not later than the carried one says nothing.
        d.left("127.0.0.1:4003".parse().unwrap(), 5, at(2));
        assert_eq!(d.left.len(), 3);
    }
}
