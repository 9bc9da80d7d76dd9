//! Vouching as the core runs it: until when each owner vouches for this
//! agent's locks, and revoking those it stopped vouching for.

use crate::cluster::vouch::{Carried, CarriedLock, Via};
use crate::core::Core;
use crate::time::{Now, Time};
use crate::vocab::{ObjectName, TicketId};
use std::net::SocketAddr;

impl Core {
    /// Whether a client of this agent holds `object`.
    fn holds(&self, object: &ObjectName) -> bool {
        self.table
            .objects
            .get(object)
            .is_some_and(|o| o.tickets.iter().any(|t| t.state.is_held()))
    }

    /// Until when this agent vouches for the locks on `objects` (for all of
    /// its locks when empty): `valid_for` in `ABSOLUTELY`.
    pub(crate) fn vouched_until<'a>(
        &self,
        objects: impl Iterator<Item = &'a ObjectName>,
    ) -> Option<Time> {
        let grace = self.cluster.cfg.grace;
        let mut until = self.cluster.home.last_ok? + grace;
        for name in objects {
            if self.holds(name) {
                until = until.min(self.cluster.object_vouched_from(name, self.last_now)? + grace);
            }
        }
        Some(until)
    }

    /// On moving to a new epoch: each held lock keeps what its owner in the
    /// old epoch vouched for. That owner may still act in the old epoch
    /// (for `stretch(peer_timeout)` after so many members moved on that it
    /// cannot gather a quorum there) and drop this agent's tickets there
    /// once it has not heard it for `release_delay`. A lock still carried
    /// from an earlier epoch keeps its earlier owner and time (the vouch it
    /// ends with), and adds the owner of the epoch it leaves to `via`, with
    /// that owner's own last answer there, or the lock's `at` when it never
    /// answered: that owner may still act there too, and its table need
    /// not have had the lock. The first owner's own last answer is kept
    /// apart from the majority contact: the settle window counts from the
    /// former (`settle_carried`), while the lock ends `grace` after the
    /// earlier.
    pub(crate) fn carry_over(&mut self, now: Now) {
        // The answers that arrived since the last tick are weighed first:
        // a carried lock whose new owner answered in the epoch being left
        // follows it there, as it would have on a tick just before.
        self.settle_carried(now);
        // In key order, so the map is built in one pass.
        let mut carried = Vec::with_capacity(self.table.objects.len());
        let (members, quorum) = (self.cluster.peers.members.len(), self.cluster.peers.quorum);
        // The state of the epoch being left was built no earlier than this:
        // an owner there that never answered this agent counts from it, if
        // later than the lock's vouch.
        let built = self.cluster.home.carried.built_not_before(members, quorum);
        let before = std::mem::take(&mut self.cluster.home.carried.locks);
        // The leaders of the epoch being left, once for every lock.
        let leaders: std::sync::Arc<[crate::cluster::Id]> =
            self.cluster.epoch.leaders.clone().into();
        for (name, o) in &self.table.objects {
            if !o.tickets.iter().any(|t| t.state.is_held()) {
                continue;
            }
            if let Some(entry) = before.get(name) {
                let at = self
                    .cluster
                    .home
                    .last_ok
                    .map_or(entry.at, |m| m.min(entry.at));
                let mut via = entry.via.clone();
                let left_owner = (self.cluster.owner_index_of(name))
                    .map(|i| self.cluster.epoch.leaders[i].clone())
                    .filter(|o| entry.owner.as_ref() != Some(o))
                    .filter(|o| !via.iter().any(|v| v.owner == *o));
                if let Some(owner) = left_owner {
                    let from = self.via_start(&owner, at, built, now);
                    let leaders = leaders.clone();
                    via.push(Via {
                        owner,
                        from,
                        leaders,
                    });
                }
                carried.push((
                    name.clone(),
                    CarriedLock {
                        at,
                        via,
                        ..entry.clone()
                    },
                ));
                continue;
            }
            let Some(at) = self.cluster.object_vouched_from(name, self.last_now) else {
                continue; // nothing vouched: revoked on the next tick
            };
            let owner = self
                .cluster
                .owner_index_of(name)
                .map(|i| self.cluster.epoch.leaders[i].clone());
            // The settle window counts from the owner's latest answer of
            // any kind: an owner that resumed from a pause answers the
            // pings that waited before it acts again, and was cut off
            // before the next one; what it vouched for was 1.8 s older
            // (one-computer seed 5256).
            let answered = (owner.as_ref())
                .filter(|o| **o != self.cluster.me)
                .and_then(|o| self.cluster.heard_back_by(o))
                .map_or(at, |a| a.max(at));
            carried.push((
                name.clone(),
                CarriedLock {
                    at,
                    answered,
                    owner,
                    via: Vec::new(),
                },
            ));
        }
        let mut carried = Carried::new(carried.into_iter().collect());
        let epoch = self.cluster.epoch.number;
        carried.from_epoch = epoch;
        if let Some(me) = self.cluster.addr {
            carried.left(me, u64::MAX, now.mono);
            carried.answered_before(me, epoch, now.mono);
        }
        // Every epoch a member answered in so far is older than the next.
        for (id, k) in &self.cluster.peers.contact {
            let addr = crate::cluster::ids::parse_id(id).and_then(|p| p.addr);
            if let Some(a) = addr.filter(|_| k.epoch <= epoch) {
                carried.answered_before(a, k.epoch, k.sent);
            }
        }
        self.cluster.home.carried = carried;
    }

    /// Where the time of `owner`, the owner of the epoch a held lock leaves
    /// (an owner in between, `via`), starts: it stopped acting there in
    /// time if it moved by this plus `own_move_window`, or the others left
    /// by this plus `settle_window` (docs/cluster.md, "Links and
    /// liveness").
    ///
    /// - An answer as acting, at b, means its state counted this agent's
    ///   report, so its table had the lock: it drops it no earlier than
    ///   `release_delay` after b. The start is b.
    /// - Otherwise its table may have had the lock (dropped `release_delay`
    ///   after the owner last heard this agent: after it installed the
    ///   state, built after `built`, and after it received any ping it
    ///   answered, acting or not, in this epoch, the latest sent at h), or
    ///   the state had a lock-delay instead, started no earlier than
    ///   `built` and than `at − stretch(peer_timeout)` (the first owner
    ///   acted at `at` or later, so a quorum was still in an older epoch
    ///   then), during which it grants nothing. The start is the later of
    ///   `at` and `built` (both cases allow it), moved up to h as far as
    ///   the lock-delay allows: the owner stops acting by the start plus
    ///   the windows, before either the drop or the lock-delay's end.
    fn via_start(
        &self,
        owner: &crate::cluster::Id,
        at: Time,
        built: Option<Time>,
        now: Now,
    ) -> Time {
        let later = |t: Time| built.map_or(t, |b| b.max(t));
        let base = later(at);
        if *owner == self.cluster.me {
            return base;
        }
        if let Some(b) = self.cluster.answered_by(owner, now.mono) {
            return later(b);
        }
        let Some(h) = self.cluster.heard_back_by(owner).filter(|h| *h > base) else {
            return base;
        };
        let cfg = &self.cluster.cfg;
        let delay_from = later(at - cfg.stretch(cfg.peer_timeout));
        let delay_ends = delay_from + cfg.shrink(cfg.lock_delay());
        let cap = delay_ends - self.own_move_window();
        base.max(h.min(cap))
    }

    /// `object` is granted again to a client of this agent: if it held
    /// nothing, what was carried for it is gone with what it held.
    pub(crate) fn regranted(&mut self, object: &ObjectName) {
        if !self.cluster.home.carried.locks.is_empty() && !self.holds(object) {
            self.cluster.home.carried.locks.remove(object);
        }
    }

    /// A carried lock follows its new owner once that owner answered: at
    /// once when it is the same agent as the old owner (it left the old
    /// epoch before it answered in this one); else only once so many
    /// members are known to have left the old epoch that its old owner
    /// stopped acting there before it could drop the lock
    /// (`settle_window`); otherwise the lock ends with what the old owner
    /// vouched for. A lock carried through more epochs (`via`) also waits
    /// until the owner of each epoch in between is the new owner, is
    /// known to have stopped acting there in time, or can no longer gather
    /// a majority of that epoch's leaders' votes in time (`via_stopped`).
    fn settle_carried(&mut self, now: Now) {
        let window = self.settle_window();
        let own_move = self.own_move_window();
        let plant = self.cluster.cfg.plant;
        // Until a new owner answers, or enough members are known to have
        // left, nothing can settle; and only once for each: a million
        // locks carried over are not walked every tick for nothing.
        let answers: Vec<Option<Time>> = (self.cluster.epoch.leaders.iter())
            .map(|l| self.cluster.answered_by(l, now.mono))
            .collect();
        let fresh = (answers.iter().enumerate().take(8))
            .filter(|(_, a)| a.is_some())
            .fold(0u8, |m, (i, _)| m | 1 << i)
            & !self.cluster.home.carried.weighed;
        if self.cluster.home.carried.locks.is_empty() {
            return;
        }
        if self.cluster.acting(now.mono) {
            self.cluster.home.carried.quorum_acts(now.mono);
        }
        let c = &self.cluster;
        let (members, quorum) = (c.peers.members.len(), c.peers.quorum);
        let mut olds: Vec<SocketAddr> = Vec::new();
        for l in c.home.carried.locks.values() {
            for o in l.owner.iter().chain(l.via.iter().map(|v| &v.owner)) {
                let addr = crate::cluster::ids::parse_id(o).and_then(|p| p.addr);
                if let Some(a) = addr {
                    if !olds.contains(&a) {
                        olds.push(a);
                    }
                }
            }
            if olds.len() >= members.max(3) {
                break; // every member (in practice: the leaders of an epoch or two)
            }
        }
        let newly_left = olds.iter().any(|a| {
            !c.home.carried.settled_for.contains(a)
                && c.home.carried.quorum_left_by(*a, members, quorum).is_some()
        });
        // A member newly known to have left may be a leader of an epoch in
        // between whose leaving takes that epoch's majority away.
        let newly_left = newly_left || c.home.carried.left.len() > c.home.carried.left_walked;
        if fresh == 0 && !newly_left {
            return;
        }
        self.cluster.home.carried.weighed |= fresh;
        self.cluster.home.carried.left_walked = self.cluster.home.carried.left.len();
        // Per old owner: the earlier of its own move and the others' (as
        // before), its own move, and the others'.
        type Evidence = (Option<Time>, Option<Time>, Option<Time>);
        let mut left_by: Vec<(SocketAddr, Evidence)> = Vec::with_capacity(olds.len());
        for a in olds {
            let c = &mut self.cluster.home.carried;
            let by = c.quorum_left_by(a, members, quorum);
            if by.is_some() && !c.settled_for.contains(&a) {
                c.settled_for.push(a);
            }
            let evidence = (by, c.moved_by(a), c.others_left_by(a, members, quorum));
            left_by.push((a, evidence));
        }
        let evidence_of = |old: &crate::cluster::Id| -> Evidence {
            let addr = crate::cluster::ids::parse_id(old).and_then(|p| p.addr);
            (left_by.iter())
                .find(|(a, _)| Some(*a) == addr)
                .map_or((None, None, None), |(_, e)| *e)
        };
        let mut carried = std::mem::take(&mut self.cluster.home.carried);
        let mut locks = std::mem::take(&mut carried.locks);
        locks.retain(|name, lock| {
            let Some(i) = self.cluster.owner_index_of(name) else {
                return false;
            };
            // Nothing settles before its new owner answers; a lock released
            // meanwhile goes then (or when its object is granted again,
            // `regranted`). Looking its object up first cost a million
            // searches at the first tick after a move, when no new owner
            // has answered yet and the report is still being written.
            if answers[i].is_none() {
                return true;
            }
            if !self.holds(name) {
                return false;
            }
            let owner = &self.cluster.epoch.leaders[i];
            let old_owner = &lock.owner;
            if plant == crate::cluster::Plant::FollowSameOwner && old_owner.as_ref() == Some(owner)
            {
                return false;
            }
            // Each owner of an epoch in between must have stopped acting
            // there before it could grant the lock or drop it, or so many
            // of that epoch's leaders must have left it by then that no
            // grant there can gather a majority of their votes (one-computer
            // seed 123).
            let via_stopped = lock.via.iter().all(|v| {
                let (_, moved, others) = evidence_of(&v.owner);
                v.owner == *owner
                    || moved.is_some_and(|t| t <= v.from + own_move)
                    || others.is_some_and(|t| t <= v.from + window)
                    || carried.no_majority_left_by(&v.leaders, v.from + own_move)
            });
            if !via_stopped {
                return true;
            }
            // The same owner in both epochs: it left the old epoch before
            // it answered in this one, so it takes nothing back there.
            // (Not merely because the old owner was this agent itself: its
            // old table need not have had the lock at all, after a state
            // with a lock-delay; following at once then let a lock outlive
            // a lock-delay that let it be granted again: S1, one-computer
            // seed 2232.)
            if old_owner.as_ref() == Some(owner) {
                return false;
            }
            if plant == crate::cluster::Plant::CarryByAnswer {
                return answers[i].is_none_or(|t| t > lock.answered + window);
            }
            // Kept (to end with the old owner's vouch) unless the old owner
            // stopped acting before it could drop the lock: the windows run
            // from its own last answer, not from the majority's. Its own
            // move ends its acting there at once; the others' leaving, at
            // most `stretch(peer_timeout)` later (as for an owner in
            // between, above: one-computer seed 1842, whose old owner, the
            // conductor, moved out itself 3.4 s after its last answer).
            let (by, moved, _) = old_owner.as_ref().map_or((None, None, None), evidence_of);
            let stopped = by.is_some_and(|t| t <= lock.answered + window)
                || moved.is_some_and(|t| t <= lock.answered + own_move);
            !stopped
        });
        carried.locks = locks;
        self.cluster.home.carried = carried;
    }

    /// How long after the old owner's own last answer to this agent (the
    /// send time of the ping) enough members must be known to have left its
    /// epoch for a carried lock to follow its new owner. The old owner
    /// drops the lock no earlier than `release_delay` after it last heard
    /// this agent, which is after that ping was sent: by this agent's clock
    /// at least `grace + ping_interval (1-ρ)/(1+ρ)` after it. It acts at
    /// most `stretch(peer_timeout)` after the members left.
    pub(crate) fn settle_window(&self) -> std::time::Duration {
        let cfg = &self.cluster.cfg;
        (self.own_move_window()).saturating_sub(cfg.stretch(cfg.peer_timeout))
    }

    /// How long after an owner's own last answer to this agent it may be
    /// known to have moved to a later epoch itself for a carried lock to
    /// follow past it: `grace + ping_interval (1-ρ)/(1+ρ)`, by this agent's
    /// clock the least time before it could drop the lock. It stopped
    /// acting in its epoch when it adopted a later one, before this agent
    /// heard of it, so no `stretch(peer_timeout)` is taken off. (Used for
    /// the owners of the epochs a lock was carried through, `via`; the
    /// first old owner keeps the one rule of `settle_window`.)
    pub(crate) fn own_move_window(&self) -> std::time::Duration {
        let cfg = &self.cluster.cfg;
        cfg.grace + cfg.shrink(cfg.ping_interval)
    }

    /// Takes back the held locks whose owner stopped vouching for them
    /// (for the owners of this epoch, on the edge: later grants from it are
    /// not delivered until it does again).
    pub(crate) fn revoke_where_owner_lapsed(&mut self, now: Now) {
        self.settle_carried(now);
        let grace = self.cluster.cfg.grace;
        let mut lapsed = 0u8;
        for (i, l) in self.cluster.epoch.leaders.iter().enumerate().take(8) {
            let answered = self.cluster.answered_by(l, now.mono);
            if *l != self.cluster.me && answered.is_none_or(|t| now.mono >= t + grace) {
                lapsed |= 1 << i;
            }
        }
        let newly = lapsed & !self.cluster.home.lapsed_owners;
        self.cluster.home.lapsed_owners = lapsed;
        let carried_out = self.cluster.home.carried.may_have_lapsed(now.mono, grace);
        if newly == 0 && !carried_out {
            return;
        }
        let c = &self.cluster;
        let held: Vec<(ObjectName, TicketId)> = self
            .table
            .objects
            .iter()
            .filter(|(n, _)| match c.home.carried.locks.get(*n) {
                Some(l) => now.mono >= l.at + grace,
                None => c
                    .owner_index_of(n)
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
        let mut told = std::collections::BTreeSet::new();
        for (name, id) in held {
            self.cluster.home.carried.locks.remove(&name);
            if let Some(t) = self.take_ticket(&name, id) {
                self.tell_lost(&name, &t, "their owner leader stopped answering", &mut told);
            }
        }
        if carried_out {
            // What lapsed is revoked: what is left lapses later.
            let c = &mut self.cluster.home.carried;
            c.locks.retain(|_, l| now.mono < l.at + grace);
            c.earliest = c.locks.values().map(|l| l.at).min();
        }
    }
}

#[cfg(test)]
mod tests;
