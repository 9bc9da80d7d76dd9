//! Vouching as the core runs it: until when each owner vouches for this
//! agent's locks, and revoking those it stopped vouching for.

use crate::cluster::vouch::{Carried, CarriedLock};
use crate::core::Core;
use crate::time::{Now, Time};
use crate::vocab::{ObjectName, TicketId};
use std::net::SocketAddr;

impl Core {
    /// Whether a client of this agent holds `object`.
    fn holds(&self, object: &[u8]) -> bool {
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
        // In key order, so the map is built in one pass.
        let mut carried = Vec::new();
        let (members, quorum) = (self.cluster.peers.members.len(), self.cluster.peers.quorum);
        // The state of the epoch being left was built no earlier than this:
        // an owner there that never answered this agent counts from it, if
        // later than the lock's vouch.
        let built = self.cluster.home.carried.built_not_before(members, quorum);
        let before = std::mem::take(&mut self.cluster.home.carried.locks);
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
                let left_owner = (self.cluster.owner_index(name))
                    .map(|i| self.cluster.epoch.leaders[i].clone())
                    .filter(|o| entry.owner.as_ref() != Some(o))
                    .filter(|o| !via.iter().any(|(v, _)| v == o));
                if let Some(o) = left_owner {
                    let from = self.via_start(&o, at, built, now);
                    via.push((o, from));
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
                .owner_index(name)
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
    pub(crate) fn regranted(&mut self, object: &[u8]) {
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
    /// until the owner of each epoch in between is the new owner or is
    /// known to have stopped acting there in time (`via_stopped`).
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
            for o in l.owner.iter().chain(l.via.iter().map(|(o, _)| o)) {
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
        if fresh == 0 && !newly_left {
            return;
        }
        self.cluster.home.carried.weighed |= fresh;
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
        carried.locks.retain(|name, lock| {
            let held = self.holds(name);
            let Some(i) = self.cluster.owner_index(name).filter(|_| held) else {
                return false;
            };
            if answers[i].is_none() {
                return true;
            }
            let owner = &self.cluster.epoch.leaders[i];
            let old_owner = &lock.owner;
            if plant == crate::cluster::Plant::FollowSameOwner && old_owner.as_ref() == Some(owner)
            {
                return false;
            }
            // Each owner of an epoch in between must have stopped acting
            // there before it could grant the lock or drop it.
            let via_stopped = lock.via.iter().all(|(o, from)| {
                let (_, moved, others) = evidence_of(o);
                o == owner
                    || moved.is_some_and(|t| t <= *from + own_move)
                    || others.is_some_and(|t| t <= *from + window)
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
            let mut by = old_owner.as_ref().and_then(|o| evidence_of(o).0);
            if plant == crate::cluster::Plant::CarryByAnswer {
                by = answers[i];
            }
            // Kept (to end with the old owner's vouch) unless the old owner
            // stopped acting before it could drop the lock: the window runs
            // from its own last answer, not from the majority's.
            by.is_none_or(|t| t > lock.answered + window)
        });
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
            .filter(|(n, _)| match c.home.carried.locks.get(&***n) {
                Some(l) => now.mono >= l.at + grace,
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
mod tests {
    use std::net::SocketAddr;

    use crate::cluster::Id;

    use super::*;

    fn at(s: u64) -> Time {
        Time::from_micros(s * 1_000_000)
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn id(port: u16, name: &str) -> Id {
        crate::cluster::ids::make_id(None, 1, Some(addr(port)), 1, name).into()
    }

    fn now(us: u64) -> Now {
        Now {
            mono: Time::from_micros(us),
            wall: crate::time::UnixTime(1_700_000_000_000_000 + us),
        }
    }

    /// `n2` (this agent), holding `name` through epoch 10 (leaders `n1`,
    /// `n0`; `n1` owns it and last answered at 101 s, the majority contact
    /// is still the previous epoch's 100 s) into epoch 11, where `n0` owns
    /// it and answers at 104.5 s; `n1` is known to have left epoch 10 at
    /// `n1_left`. The latest ping `n1` answered in epoch 10, as acting or
    /// not, was sent at `n1_heard` (101 s: that answer).
    fn carried_into_a_third_owner(n1_left: u64, n1_heard: u64) -> (Core, ObjectName) {
        use crate::core::Config;
        use crate::local::table::{State, Ticket};
        use crate::vocab::Kind;
        let mut config = Config::default();
        config.cluster.listen = Some(addr(4002));
        config.cluster.neighbors = vec![addr(4000), addr(4001)];
        let mut core = Core::new(config, now(1));
        let (n0, n1) = (id(4000, "n0"), id(4001, "n1"));
        let c = &mut core.cluster;
        // An object that the first of two leaders owns.
        let name: ObjectName = (0u32..)
            .map(|i| ObjectName::from(format!("o{i}").as_bytes()))
            .find(|n| crate::cluster::ids::fnv1a64(n) % 2 == 0)
            .unwrap();
        let contact = |epoch, view, answered: u64| crate::cluster::Contact {
            sent: Time::from_micros(answered),
            epoch,
            active_sent: Some(Time::from_micros(answered)),
            view,
            delay_until: None,
        };
        c.epoch.number = 10;
        c.epoch.leaders = vec![n1.clone(), n0.clone()];
        c.epoch.view = crate::cluster::view_of(&c.epoch.leaders);
        c.home.last_ok = Some(at(100));
        c.peers.contact.insert(
            n1.clone(),
            crate::cluster::Contact {
                sent: Time::from_micros(n1_heard),
                ..contact(10, c.epoch.view, 101_000_000)
            },
        );
        c.peers
            .contact
            .insert(n0.clone(), contact(10, c.epoch.view, 101_000_000));
        let ticket = Ticket {
            id: TicketId(7),
            number: 1,
            key: "n2/1".into(),
            owner: None,
            uid: None,
            tag: None,
            kind: Kind::EXCLUSIVE,
            duration: std::time::Duration::from_secs(600),
            unlock_duration: std::time::Duration::ZERO,
            detach: false,
            unit: None,
            try_once: false,
            granted: None,
            state: State::Held {
                fence: 1,
                lease_end: at(700),
            },
            since: at(100),
        };
        core.table.insert(&name, ticket);
        core.carry_over(now(101_400_000));
        let kept = &core.cluster.home.carried.locks[&name];
        assert_eq!(kept.owner.as_ref(), Some(&n1));
        assert_eq!(
            (kept.at, kept.answered),
            (at(100), Time::from_micros(n1_heard))
        );
        // Epoch 11: the same two leaders the other way round.
        let c = &mut core.cluster;
        c.epoch.number = 11;
        c.epoch.leaders = vec![n0.clone(), n1.clone()];
        c.epoch.view = crate::cluster::view_of(&c.epoch.leaders);
        c.peers
            .contact
            .insert(n0.clone(), contact(11, c.epoch.view, 104_500_000));
        c.home
            .carried
            .left(addr(4001), 11, Time::from_micros(n1_left));
        (core, name)
    }

    /// The settle window of a lock carried with a stale majority contact
    /// runs from its old owner's own last answer (seed 1860): its owner
    /// can drop it only `release_delay` after it heard this agent last.
    #[test]
    fn the_settle_window_runs_from_the_old_owners_own_answer() {
        let window = Core::new(crate::core::Config::default(), now(1)).settle_window();
        assert!(
            window > std::time::Duration::from_millis(3100),
            "{window:?}"
        );
        // 101 s + the window is past 104.0 s: the old owner stopped acting
        // before it could drop the lock, which follows `n0` and outlives
        // `grace` after the majority contact of 100 s.
        let (mut core, name) = carried_into_a_third_owner(104_000_000, 101_000_000);
        core.revoke_where_owner_lapsed(now(104_600_000));
        assert!(!core.cluster.home.carried.locks.contains_key(&name));
        core.revoke_where_owner_lapsed(now(105_100_000));
        assert!(
            core.holds(&name),
            "revoked although its old owner left in time"
        );
        // Known to have left only after that: it ends `grace` after the
        // earlier of the two times, 100 s.
        let (mut core, name) = carried_into_a_third_owner(104_300_000, 101_000_000);
        core.revoke_where_owner_lapsed(now(104_600_000));
        assert!(core.cluster.home.carried.locks.contains_key(&name));
        core.revoke_where_owner_lapsed(now(104_900_000));
        assert!(core.holds(&name));
        core.revoke_where_owner_lapsed(now(105_000_000));
        assert!(
            !core.holds(&name),
            "kept past what its old owner vouched for"
        );
    }

    /// An old owner that answered without acting after its last acting
    /// answer (it resumed from a pause and answered the pings that waited,
    /// then was cut off before the next: seed 5256) heard this agent then:
    /// the settle window runs from that answer, while the lock still ends
    /// `grace` after what it vouched for unless it follows its new owner.
    #[test]
    fn the_settle_window_runs_from_the_old_owners_latest_answer_acting_or_not() {
        // Known to have left at 104.5 s: past 101 s + the window (3.2 s),
        // within 101.6 s + the window.
        let (mut core, name) = carried_into_a_third_owner(104_500_000, 101_600_000);
        core.revoke_where_owner_lapsed(now(104_600_000));
        assert!(!core.cluster.home.carried.locks.contains_key(&name));
        core.revoke_where_owner_lapsed(now(105_100_000));
        assert!(
            core.holds(&name),
            "revoked although its old owner heard this agent late enough"
        );
        // Without that later answer, the same move is too late.
        let (mut core, name) = carried_into_a_third_owner(104_500_000, 101_000_000);
        core.revoke_where_owner_lapsed(now(104_600_000));
        assert!(core.cluster.home.carried.locks.contains_key(&name));
        core.revoke_where_owner_lapsed(now(105_000_000));
        assert!(
            !core.holds(&name),
            "kept past what its old owner vouched for"
        );
    }

    /// `n2` (this agent) holds `name` through three epochs: 10 (leaders
    /// `n1`, `n0`: `n1` owns it, last answered at 101 s, the majority
    /// contact 100 s), 11 (`n0`, `n1`: `n0` owns it and never answers
    /// this agent as acting, unless at `n0_answered`, and `n1` is not
    /// known to have left 10, so the lock stays carried with `n1`'s
    /// vouch) and 12 (`n1`, `n0` again: `n1` owns it once more), to which
    /// it moves at 104.5 s; `n1` answers there at 104.6 s. `n0` is known
    /// to have moved out of 11 itself at `n0_moved`, if at all; `n1`'s
    /// first message of epoch 12 arrives at 104.6 s.
    ///
    /// Members other than this agent known to be in epoch 10 or older
    /// after this agent moved to 11 (the send times of the pings they
    /// answered there) are `in_10`; nothing else is known of when 11's
    /// state was built.
    fn carried_through_another_owner_and_back(
        n0_answered: Option<u64>,
        n0_moved: Option<u64>,
        plant: crate::cluster::Plant,
    ) -> (Core, ObjectName) {
        carried_through_another_owner_and_back_after(n0_answered, n0_moved, plant, &[])
    }

    fn carried_through_another_owner_and_back_after(
        n0_answered: Option<u64>,
        n0_moved: Option<u64>,
        plant: crate::cluster::Plant,
        in_10: &[(u16, u64)],
    ) -> (Core, ObjectName) {
        let n0_answered = n0_answered.map(|t| (t, true));
        carried_through_another_owner_and_back_answered(n0_answered, n0_moved, plant, in_10)
    }

    /// As above, `n0`'s answer in 11 (send time, whether as acting) given.
    fn carried_through_another_owner_and_back_answered(
        n0_answered: Option<(u64, bool)>,
        n0_moved: Option<u64>,
        plant: crate::cluster::Plant,
        in_10: &[(u16, u64)],
    ) -> (Core, ObjectName) {
        let (mut core, name) = carried_into_a_third_owner(0, 101_000_000);
        core.cluster.cfg.plant = plant;
        let (n0, n1) = (id(4000, "n0"), id(4001, "n1"));
        let c = &mut core.cluster;
        // Epoch 11 as set up, but nobody known to have left epoch 10 and
        // no answer of `n0` in it (or an early one): nothing settles.
        c.home.carried.left.clear();
        c.home.carried.before.clear();
        for (port, t) in in_10 {
            (c.home.carried).answered_before(addr(*port), 10, Time::from_micros(*t));
        }
        match n0_answered {
            Some((t, acting)) => {
                let k = c.peers.contact.get_mut(&n0).expect("set up");
                k.sent = Time::from_micros(t);
                k.active_sent = acting.then_some(Time::from_micros(t));
            }
            None => {
                c.peers.contact.remove(&n0);
            }
        }
        core.revoke_where_owner_lapsed(now(104_400_000));
        assert!(core.cluster.home.carried.locks.contains_key(&name));
        core.carry_over(now(104_500_000));
        let kept = &core.cluster.home.carried.locks[&name];
        assert_eq!(kept.owner.as_ref(), Some(&n1), "the earliest owner is kept");
        assert_eq!((kept.at, kept.answered), (at(100), at(101)));
        // Two of the three members in 10 until some time: 11's state was
        // built after it.
        let mut times: Vec<u64> = in_10.iter().map(|(_, t)| *t).collect();
        times.sort_unstable();
        let built = times.iter().rev().nth(1).map(|t| Time::from_micros(*t));
        let later = |t: Time| built.map_or(t, |b| b.max(t));
        let from = match n0_answered {
            Some((t, true)) => later(Time::from_micros(t)),
            // Not as acting: from that answer, as far as a lock-delay of
            // 11 (from `at` − stretch(peer_timeout), or from when 11 was
            // built) keeps it from granting.
            Some((t, false)) => {
                let cfg = &core.cluster.cfg;
                let delay_ends =
                    later(at(100) - cfg.stretch(cfg.peer_timeout)) + cfg.shrink(cfg.lock_delay());
                let cap = delay_ends - core.own_move_window();
                later(at(100)).max(Time::from_micros(t).min(cap))
            }
            None => later(at(100)),
        };
        assert_eq!(kept.via, [(n0.clone(), from)], "and the owner of 11");
        let c = &mut core.cluster;
        c.epoch.number = 12;
        c.epoch.leaders = vec![n1.clone(), n0.clone()];
        c.epoch.view = crate::cluster::view_of(&c.epoch.leaders);
        c.peers.contact.insert(
            n1.clone(),
            crate::cluster::Contact {
                sent: Time::from_micros(104_600_000),
                epoch: 12,
                active_sent: Some(Time::from_micros(104_600_000)),
                view: c.epoch.view,
                delay_until: None,
            },
        );
        c.home
            .carried
            .left(addr(4001), 12, Time::from_micros(104_600_000));
        if let Some(t) = n0_moved {
            c.home.carried.left(addr(4000), 12, Time::from_micros(t));
        }
        (core, name)
    }

    /// The owner of epoch 12 is the owner of epoch 10, but epoch 11, which
    /// the lock was carried through, had another owner, `n0`, that never
    /// answered this agent there: its table need not have had the lock (a
    /// state with a lock-delay, from about 101 s − stretch(peer_timeout) +
    /// `lock_delay` ≈ 106.5 s on), or dropped this agent's ticket
    /// (`release_delay` after its state was built, no earlier than about
    /// 100 s). It may act in 11 until stretch(peer_timeout) after the
    /// quorum of 12 left 11, up to some 107 s. Unless `n0` is known to
    /// have stopped acting in 11 by 100 s + `grace` + ping_interval·
    /// (1−ρ)/(1+ρ), the lock must end with what `n1` vouched for in 10
    /// (100 s + `grace`), not follow `n1` in 12 at once (S1).
    #[test]
    fn a_lock_carried_through_another_owner_and_back_does_not_follow_at_once() {
        use crate::cluster::Plant;
        let cfg = crate::core::Config::default().cluster;
        let earliest_grant = at(101) - cfg.stretch(cfg.peer_timeout) + cfg.lock_delay();
        assert!(earliest_grant > at(105) + std::time::Duration::from_millis(1000));
        // Nothing known of `n0` but what the others did: this agent (104.5
        // s) and `n1` (104.6 s) left 11, past 100 s + the settle window
        // (3.2 s): `n1`'s answer in 12 settles nothing, and the lock ends
        // 5 s after 100 s.
        let (mut core, name) = carried_through_another_owner_and_back(None, None, Plant::None);
        core.revoke_where_owner_lapsed(now(104_700_000));
        assert!(
            core.cluster.home.carried.locks.contains_key(&name),
            "followed the owner of 12 although the owner of 11 may still act there"
        );
        core.revoke_where_owner_lapsed(now(104_900_000));
        assert!(core.holds(&name));
        core.revoke_where_owner_lapsed(now(105_000_000));
        assert!(
            !core.holds(&name),
            "held past what the owner of 10 vouched for while the owner of 11 may grant it"
        );
        // The same-owner shortcut alone (the rule before `via`) follows at
        // once and keeps the lock: what the first case catches.
        let (mut core, name) =
            carried_through_another_owner_and_back(None, None, Plant::FollowSameOwner);
        core.revoke_where_owner_lapsed(now(104_700_000));
        assert!(!core.cluster.home.carried.locks.contains_key(&name));
        core.revoke_where_owner_lapsed(now(105_100_000));
        assert!(core.holds(&name), "the planted shortcut is what is caught");
        // `n0` known to have moved out of 11 itself at 104.65 s, within
        // 100 s + `grace` + ping_interval·(1−ρ)/(1+ρ) (105.245 s): it
        // stopped acting there before it could grant or drop the lock,
        // which follows `n1` (R1).
        let (mut core, name) =
            carried_through_another_owner_and_back(None, Some(104_650_000), Plant::None);
        core.revoke_where_owner_lapsed(now(104_700_000));
        assert!(!core.cluster.home.carried.locks.contains_key(&name));
        core.revoke_where_owner_lapsed(now(105_100_000));
        assert!(
            core.holds(&name),
            "revoked although the owner of 11 left it in time"
        );
        // `n0` answered as acting in 11 at 102 s, so its table had the
        // lock, which it drops no earlier than `release_delay` after that:
        // the others' leaving by 104.6 s is within 102 s + the settle
        // window, and the lock follows.
        let (mut core, name) =
            carried_through_another_owner_and_back(Some(102_000_000), None, Plant::None);
        core.revoke_where_owner_lapsed(now(104_700_000));
        assert!(!core.cluster.home.carried.locks.contains_key(&name));
        core.revoke_where_owner_lapsed(now(105_100_000));
        assert!(core.holds(&name));
        // Its answer at 101.2 s: 104.6 s is past 101.2 s + 3.2 s, kept.
        let (mut core, name) =
            carried_through_another_owner_and_back(Some(101_200_000), None, Plant::None);
        core.revoke_where_owner_lapsed(now(104_700_000));
        assert!(core.cluster.home.carried.locks.contains_key(&name));
        core.revoke_where_owner_lapsed(now(105_000_000));
        assert!(!core.holds(&name));
    }

    /// The owner of 11 never answered, but two of the three members are
    /// known to have been in epoch 10 until 101.5 s (pings they answered
    /// there): 11's state, reported by a quorum of two, was built after
    /// that, and its owner drops nothing before `release_delay` after it.
    /// The others' leaving of 11 by 104.6 s is within 101.5 s + the settle
    /// window: the lock follows (R1; one-computer seeds 1269, 1926, 2040,
    /// 2376 and 2958). Known only until 101.3 s, it is not.
    #[test]
    fn an_owner_in_between_that_never_answered_counts_from_when_its_state_was_built() {
        use crate::cluster::Plant;
        let in_10 = [(4001, 101_500_000), (4002, 101_500_000)];
        let (mut core, name) =
            carried_through_another_owner_and_back_after(None, None, Plant::None, &in_10);
        core.revoke_where_owner_lapsed(now(104_700_000));
        assert!(!core.cluster.home.carried.locks.contains_key(&name));
        core.revoke_where_owner_lapsed(now(105_100_000));
        assert!(
            core.holds(&name),
            "revoked although 11 was built late enough"
        );
        // One member known in 10 that late is not enough: the other two of
        // a quorum may have reported to 11 long before.
        let in_10 = [(4001, 101_500_000), (4002, 100_000_000)];
        let (mut core, name) =
            carried_through_another_owner_and_back_after(None, None, Plant::None, &in_10);
        core.revoke_where_owner_lapsed(now(104_700_000));
        assert!(core.cluster.home.carried.locks.contains_key(&name));
        core.revoke_where_owner_lapsed(now(105_000_000));
        assert!(!core.holds(&name), "kept on the word of one member");
        let in_10 = [(4001, 101_300_000), (4002, 101_300_000)];
        let (mut core, name) =
            carried_through_another_owner_and_back_after(None, None, Plant::None, &in_10);
        core.revoke_where_owner_lapsed(now(104_700_000));
        assert!(core.cluster.home.carried.locks.contains_key(&name));
        core.revoke_where_owner_lapsed(now(105_000_000));
        assert!(!core.holds(&name));
    }

    /// A leader of the new epoch acting says a quorum of members left the
    /// old one: its owner stops acting there `stretch(peer_timeout)` after
    /// at most, as when `members - quorum + 1` others are each known to
    /// have left.
    #[test]
    fn a_quorum_acting_in_the_new_epoch_settles_like_the_others_leaving() {
        // Nobody known to have left 10 one by one, and `n1`, the old
        // owner, answered at 101 s: a leader acting in 11 by 104.0 s
        // (within 101 s + the window) settles it.
        let (mut core, name) = carried_into_a_third_owner(0, 101_000_000);
        core.cluster.home.carried.left.clear();
        core.cluster
            .home
            .carried
            .quorum_acts(Time::from_micros(104_000_000));
        core.revoke_where_owner_lapsed(now(104_600_000));
        assert!(!core.cluster.home.carried.locks.contains_key(&name));
        core.revoke_where_owner_lapsed(now(105_100_000));
        assert!(
            core.holds(&name),
            "revoked although a quorum acted in 11 in time"
        );
        // Only the first such answer counts; learnt at 104.3 s, too late.
        let (mut core, name) = carried_into_a_third_owner(0, 101_000_000);
        core.cluster.home.carried.left.clear();
        core.cluster
            .home
            .carried
            .quorum_acts(Time::from_micros(104_300_000));
        core.cluster
            .home
            .carried
            .quorum_acts(Time::from_micros(104_000_000));
        core.revoke_where_owner_lapsed(now(104_600_000));
        assert!(core.cluster.home.carried.locks.contains_key(&name));
        core.revoke_where_owner_lapsed(now(105_000_000));
        assert!(!core.holds(&name));
    }

    /// The owner of 11 answered this agent there, but only as not acting:
    /// its table may have had the lock (then it drops it no earlier than
    /// `release_delay` after that answer), or 11's state had a lock-delay
    /// instead. So the answer counts as far as the lock-delay reaches: with
    /// 11 built after 101.3 s, its lock-delay ends after 108.6 s, and an
    /// answer at 101.8 s lets the others' leaving by 104.6 s settle the
    /// lock, which it did not from 101.3 s alone (R1; one-computer seeds
    /// 1611 and 2274). With nothing known of when 11 was built, the
    /// lock-delay may have started at 100 s − stretch(peer_timeout), and
    /// ends after 105.3 s only: an answer at 102 s counts as 100.1 s, and
    /// the lock ends with what `n1` vouched for.
    #[test]
    fn an_owner_in_between_that_answered_not_acting_counts_as_far_as_a_lock_delay_allows() {
        use crate::cluster::Plant;
        let in_10 = [(4001, 101_300_000), (4002, 101_300_000)];
        let (mut core, name) = carried_through_another_owner_and_back_answered(
            Some((101_800_000, false)),
            None,
            Plant::None,
            &in_10,
        );
        assert_eq!(
            core.cluster.home.carried.locks[&name].via[0].1,
            Time::from_micros(101_800_000)
        );
        core.revoke_where_owner_lapsed(now(104_700_000));
        assert!(!core.cluster.home.carried.locks.contains_key(&name));
        core.revoke_where_owner_lapsed(now(105_100_000));
        assert!(
            core.holds(&name),
            "revoked although n0 answered late enough"
        );
        let (mut core, name) = carried_through_another_owner_and_back_answered(
            Some((102_000_000, false)),
            None,
            Plant::None,
            &[],
        );
        let from = core.cluster.home.carried.locks[&name].via[0].1;
        assert!(from > at(100) && from < Time::from_micros(100_200_000));
        core.revoke_where_owner_lapsed(now(104_700_000));
        assert!(core.cluster.home.carried.locks.contains_key(&name));
        core.revoke_where_owner_lapsed(now(105_000_000));
        assert!(
            !core.holds(&name),
            "kept past the lock-delay's bound on an answer that was not acting"
        );
    }
}
