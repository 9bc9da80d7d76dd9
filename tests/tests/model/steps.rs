//! The steps of the cluster model: what each agent does on each message and
//! timer of docs/cluster.md, and the faults.
//!
//! The network is one FIFO queue per ordered pair of members (a TCP link;
//! a member's messages to itself use its own queue, which never breaks).
//! A link *break* loses every message in flight both ways: TCP delivers a
//! prefix of what was sent on a connection, and what is sent after the
//! break goes on a new connection, so loss is always "everything in flight
//! on that link at one moment", never a hole in the middle of a queue.
//! Links to and from a crashed member may break at no cost. Messages are
//! reordered freely across links. Every message carries its epoch and is
//! ignored by an agent in another epoch, as the design says.

use crate::state::{
    C, Config, Delay, Id, Member, Msg, N, Plant, Req, State, Table, Ticket, Workload,
};

pub use crate::actions::Action;

pub struct Cluster {
    pub config: Config,
}

pub fn bit(i: u8) -> u8 {
    1 << i
}

pub fn ones(mask: u8) -> usize {
    mask.count_ones() as usize
}

impl Cluster {
    pub fn new(config: Config) -> Cluster {
        Cluster { config }
    }

    pub(crate) fn home_of(&self, c: u8) -> u8 {
        self.config.homes[usize::from(c)]
    }

    pub(crate) fn clients_at(&self, home: u8) -> impl Iterator<Item = u8> + '_ {
        (0..C as u8).filter(move |&c| self.home_of(c) == home)
    }

    /// The owner of the member's epoch, when it has one.
    pub(crate) fn owner_slot(&self, s: &State, slot: u8) -> Option<u8> {
        let e = s.members[usize::from(slot)].epoch;
        (e > 0).then(|| s.owner(&self.config, e).slot)
    }

    pub(crate) fn is_owner(&self, s: &State, slot: u8) -> bool {
        let m = &s.members[usize::from(slot)];
        m.alive && m.epoch > 0 && s.owner(&self.config, m.epoch) == m.id
    }

    pub(crate) fn followers(&self, s: &State, slot: u8) -> Vec<u8> {
        let e = s.members[usize::from(slot)].epoch;
        s.leaders(e)
            .iter()
            .map(|l| l.slot)
            .filter(|&l| l != slot)
            .collect()
    }

    pub(crate) fn asking(t: &Table) -> Option<(u8, u8, u8, u8)> {
        (0..C as u8).find_map(|c| match t.tickets[usize::from(c)] {
            Ticket::Asking {
                fence,
                voters,
                clean,
            } => Some((c, fence, voters, clean)),
            _ => None,
        })
    }

    pub(crate) fn conductor(s: &State) -> Option<u8> {
        let k = s.members.iter().position(|m| m.alive)? as u8;
        // With n <= 3 the conductor needs every member connected.
        if s.members.iter().any(|m| !m.alive) {
            return None;
        }
        let m = &s.members[usize::from(k)];
        let needs = m.epoch == 0
            || s.leaders(m.epoch).iter().any(|l| {
                let leader = &s.members[usize::from(l.slot)];
                !(s.is_current(*l) && leader.epoch == m.epoch && leader.ready)
            });
        needs.then_some(k)
    }

    /// The ticket slots of the sessions (clients) at `home`.
    pub(crate) fn slots_at(&self, home: u8) -> impl Iterator<Item = u8> + '_ {
        self.config
            .slots()
            .filter(move |&k| self.home_of(self.config.ticket_session(k)) == home)
    }

    /// The tickets the home has (its clients' waiting and held requests;
    /// a session's holdings, and those its transaction in flight sets).
    pub(crate) fn have_set(&self, s: &State, home: u8) -> u8 {
        self.slots_at(home)
            .filter(|&k| {
                let c = self.config.ticket_session(k);
                matches!(s.clients[usize::from(c)], Req::Waiting | Req::Held { .. })
            })
            .fold(0, |acc, k| acc | bit(k))
    }

    /// Whether the home's request has no copy, no answer and no trace at
    /// the owner any more: only then does its re-send timer matter. The
    /// owner answers re-sent requests idempotently, so a copy sent while
    /// another is still on its way changes nothing but the interleavings.
    pub(crate) fn lock_lost(&self, s: &State, c: u8, e: u8, owner: u8) -> bool {
        let h = self.home_of(c);
        let om = &s.members[usize::from(owner)];
        let in_flight = s.in_flight(h, owner, &Msg::Lock { e, c })
            || s.links[usize::from(owner)][usize::from(h)]
                .iter()
                .any(|m| matches!(m, Msg::Locked { e: le, c: lc, .. } if *le == e && *lc == c));
        let queued = om.epoch == e
            && (om.pending_lock & bit(c) != 0
                || matches!(
                    om.table.tickets[usize::from(c)],
                    Ticket::Waiting | Ticket::Asking { .. }
                ));
        !in_flight && !queued
    }

    // ---- owner -------------------------------------------------------

    pub(crate) fn owner_lock(&self, s: &mut State, slot: u8, c: u8) {
        let e = s.members[usize::from(slot)].epoch;
        match s.members[usize::from(slot)].table.tickets[usize::from(c)] {
            Ticket::None => {
                let t = &mut s.members[usize::from(slot)].table;
                t.tickets[usize::from(c)] = Ticket::Waiting;
                t.queue.push(c);
                for f in self.followers(s, slot) {
                    s.send(slot, f, Msg::AddTicket { e, c });
                }
                self.try_ask(s, slot);
            }
            // Re-sent requests are answered idempotently.
            Ticket::Held { fence } => s.send(slot, self.home_of(c), Msg::Locked { e, c, fence }),
            _ => {}
        }
    }

    /// The owner drops the ticket and sends `Drop` to its followers; not
    /// to the home when `by_home` (its `Unlock`, the home a follower): the
    /// home dropped its own vote as it released ([`Cluster::home_unlock`]).
    pub(crate) fn owner_unlock(&self, s: &mut State, slot: u8, c: u8, by_home: bool) {
        let e = s.members[usize::from(slot)].epoch;
        let t = &mut s.members[usize::from(slot)].table;
        if t.tickets[usize::from(c)] == Ticket::None {
            return;
        }
        t.tickets[usize::from(c)] = Ticket::None;
        t.queue.retain(|&q| q != c);
        let dropped = by_home.then(|| self.home_of(c));
        for f in self.followers(s, slot) {
            if Some(f) != dropped {
                s.send(slot, f, Msg::Drop { e, c });
            }
        }
        // A queued transaction runs at the owner's next tick
        // (`Action::TxRun`), not in the middle of a message.
        self.try_ask(s, slot);
    }

    /// who_may_hold: the first ticket, once nothing is granted or asked.
    pub(crate) fn try_ask(&self, s: &mut State, slot: u8) {
        let m = &mut s.members[usize::from(slot)];
        if !m.ready || self.config.workload != Workload::Locks {
            return;
        }
        let t = &mut m.table;
        if t.tickets
            .iter()
            .any(|k| matches!(k, Ticket::Asking { .. } | Ticket::Held { .. }))
        {
            return;
        }
        let Some(&c) = t.queue.first() else { return };
        let fence = (t.last_fence + 1).max(t.base);
        t.last_fence = fence;
        t.tickets[usize::from(c)] = Ticket::Asking {
            fence,
            voters: bit(slot),
            clean: bit(slot),
        };
        m.max_fence = m.max_fence.max(fence);
        let e = m.epoch;
        for f in self.followers(s, slot) {
            s.send(slot, f, Msg::Activate { e, c, fence });
        }
    }

    pub(crate) fn activated(&self, s: &mut State, slot: u8, msg: (u8, u8, bool, bool, Id)) {
        let (c, fence, ok, clean_vote, from) = msg;
        let e = s.members[usize::from(slot)].epoch;
        if !s.leaders(e).contains(&from) {
            return;
        }
        let t = &mut s.members[usize::from(slot)].table;
        let Ticket::Asking {
            fence: f,
            voters,
            clean,
        } = t.tickets[usize::from(c)]
        else {
            return;
        };
        if f != fence {
            return;
        }
        if self.config.workload == Workload::Tx {
            return self.tx_activated(s, slot, c, ok, clean_vote, from);
        }
        if ok {
            let clean = if clean_vote {
                clean | bit(from.slot)
            } else {
                clean
            };
            t.tickets[usize::from(c)] = Ticket::Asking {
                fence,
                voters: voters | bit(from.slot),
                clean,
            };
            if self.may_grant(s, slot) {
                self.grant(s, slot);
            }
        } else {
            // A refused vote is asked again with a new fence; the ticket
            // goes again first, as the refusal may come from a follower
            // whose ADDTICKET was lost in a link break. (The home refuses
            // a request it released, its `Unlock` on its way or lost: the
            // other follower's vote, or the home's `Have`, ends it.)
            t.tickets[usize::from(c)] = Ticket::Waiting;
            for f in self.followers(s, slot) {
                s.send(slot, f, Msg::AddTicket { e, c });
            }
            self.try_ask(s, slot);
        }
    }

    pub(crate) fn grant(&self, s: &mut State, slot: u8) {
        let e = s.members[usize::from(slot)].epoch;
        let Some((c, fence, voters, clean)) = Self::asking(&s.members[usize::from(slot)].table)
        else {
            return;
        };
        s.members[usize::from(slot)].table.tickets[usize::from(c)] = Ticket::Held { fence };
        if ones(clean) <= N / 2 {
            s.s6_broken = true;
        }
        // The home's own yes vote delivered it there (`activate`).
        let home = self.home_of(c);
        if home == slot || voters & bit(home) == 0 {
            s.send(slot, home, Msg::Locked { e, c, fence });
        }
    }

    /// The owner grants as soon as it may; `Action::Grant` covers the
    /// moments it may again after it could not (not acting, lock-delay).
    pub(crate) fn may_grant(&self, s: &State, slot: u8) -> bool {
        let m = &s.members[usize::from(slot)];
        let Some((_, _, voters, _)) = Self::asking(&m.table) else {
            return false;
        };
        let delayed = matches!(s.delays[usize::from(m.epoch) - 1], Delay::Running { .. });
        ones(voters) >= self.grant_threshold() && s.acting(slot) && !delayed
    }

    pub(crate) fn grant_threshold(&self) -> usize {
        if self.config.plant == Plant::OneVote {
            1
        } else {
            N / 2 + 1
        }
    }

    // ---- follower ----------------------------------------------------

    pub(crate) fn activate(&self, s: &mut State, slot: u8, e: u8, c: u8, fence: u8) {
        if !s.acting(slot) {
            return;
        }
        // A follower votes for nothing while its epoch's lock-delay runs
        // (it refuses, and the owner asks again once the delay is over:
        // here, the question goes unanswered and `ReAsk` brings it again).
        if matches!(s.delays[usize::from(e) - 1], Delay::Running { .. }) {
            return;
        }
        let owner = s.owner(&self.config, e).slot;
        let m = &mut s.members[usize::from(slot)];
        let mine = m.table.tickets[usize::from(c)];
        let has = matches!(
            mine,
            Ticket::Replica | Ticket::Voted { .. } | Ticket::Held { .. }
        );
        let other = self
            .config
            .slots()
            .any(|j| self.config.conflict(c, j) && m.table.tickets[usize::from(j)].is_vote());
        let clean = has && !other;
        let ok = has && (!other || self.config.plant == Plant::DoubleVote);
        if ok && !matches!(mine, Ticket::Held { .. }) {
            m.table.tickets[usize::from(c)] = Ticket::Voted { fence };
            m.max_fence = m.max_fence.max(fence);
        }
        let from = m.id;
        s.send(
            slot,
            owner,
            Msg::Activated {
                e,
                c,
                fence,
                ok,
                clean,
                from,
            },
        );
        // The home's yes vote is the majority's last (the owner's and its
        // own): it delivers the grant at once, as its LOCKED would
        // (docs/cluster.md "Granting", the home's own vote). A clean vote
        // and the owner's are a majority of three: S6 holds as for the
        // owner's grant.
        if ok && self.config.workload == Workload::Locks && self.home_of(c) == slot {
            if !clean {
                s.s6_broken = true;
            }
            self.locked(s, slot, c, fence);
        }
    }

    // ---- home --------------------------------------------------------

    pub(crate) fn locked(&self, s: &mut State, slot: u8, c: u8, fence: u8) {
        if self.home_of(c) != slot || s.members[usize::from(slot)].id.incarnation != 0 {
            return;
        }
        match s.clients[usize::from(c)] {
            Req::Held { .. } | Req::Dead => {}
            Req::Waiting if s.in_contact(&self.config, slot) => {
                s.clients[usize::from(c)] = Req::Held { fence };
                if fence <= s.last_delivered_fence {
                    s.s2_broken = true;
                }
                s.last_delivered_fence = s.last_delivered_fence.max(fence);
                let m = &mut s.members[usize::from(slot)];
                m.max_fence = m.max_fence.max(fence);
            }
            // Not for us any more (or not deliverable now): give it back.
            _ => self.home_unlock(s, slot, c),
        }
    }

    /// The home sends `Unlock` for its client's request `c` (released,
    /// revoked or given back). A home that is not the owner drops its own
    /// vote (or replica) in the same step: the owner sends it no `Drop`
    /// for its own `Unlock`. Nobody votes for another holder meanwhile, as
    /// the owner still counts the ticket until the `Unlock` reaches it.
    pub(crate) fn home_unlock(&self, s: &mut State, home: u8, c: u8) {
        let e = s.members[usize::from(home)].epoch;
        let owner = s.owner(&self.config, e).slot;
        if owner != home {
            s.members[usize::from(home)].table.tickets[usize::from(c)] = Ticket::None;
        }
        s.send(home, owner, Msg::Unlock { e, c });
    }

    pub(crate) fn deliver(&self, s: &mut State, from: u8, to: u8) {
        let msg = s.links[usize::from(from)][usize::from(to)].remove(0);
        let me = &s.members[usize::from(to)];
        let (epoch, ready, my_id) = (me.epoch, me.ready, me.id);
        match msg {
            Msg::Leaders { e } if e > epoch => {
                self.adopt(s, to, e);
            }
            Msg::Report { e, report } => self.collect(s, to, e, *report),
            Msg::Tickets {
                e,
                held,
                base,
                reported,
                ..
            } if e == epoch && !ready && s.leaders(e).contains(&my_id) => {
                self.install(s, to, held, base, reported);
            }
            Msg::Lock { e, c } if e == epoch && self.is_owner(s, to) => {
                if ready {
                    self.owner_lock(s, to, c);
                } else {
                    s.members[usize::from(to)].pending_lock |= bit(c);
                }
            }
            Msg::Unlock { e, c } if e == epoch && self.is_owner(s, to) => {
                if ready {
                    self.owner_unlock(s, to, c, true);
                } else {
                    s.members[usize::from(to)].pending_unlock |= bit(c);
                }
            }
            Msg::Have { e, home, set } if e == epoch && ready && self.is_owner(s, to) => {
                for k in self.slots_at(home).collect::<Vec<_>>() {
                    if set & bit(k) == 0 {
                        self.owner_unlock(s, to, k, false);
                    }
                }
            }
            Msg::Tx { e, s: c } if e == epoch && self.is_owner(s, to) => self.owner_tx(s, to, c),
            Msg::TxDone {
                e,
                s: c,
                fence,
                results,
            } if e == epoch || (e < epoch && self.config.plant == Plant::TxApplyOldEpoch) => {
                self.home_tx_done(s, to, e, c, fence, results)
            }
            Msg::TxFailed { e, s: c }
                if e == epoch
                    && self.home_of(c) == to
                    && s.clients[usize::from(c)] == Req::Waiting =>
            {
                s.clients[usize::from(c)] = Req::Failed;
            }
            Msg::TxAck { e, s: c, ok } if e == epoch && self.is_owner(s, to) => {
                self.owner_tx_ack(s, to, c, ok)
            }
            Msg::Locked { e, c, fence } if e == epoch => self.locked(s, to, c, fence),
            Msg::AddTicket { e, c } if e == epoch && ready => {
                // A home takes back no ticket of a request it no longer
                // has (a question sent again after its release): it
                // dropped its vote as it released, and no `Drop` would
                // end the replica. `Activate` then finds none and refuses.
                let gone = self.config.workload == Workload::Locks
                    && self.home_of(c) == to
                    && !matches!(s.clients[usize::from(c)], Req::Waiting | Req::Held { .. });
                let t = &mut s.members[usize::from(to)].table.tickets[usize::from(c)];
                if *t == Ticket::None && !gone {
                    *t = Ticket::Replica;
                }
            }
            Msg::Activate { e, c, fence } if e == epoch && ready => {
                self.activate(s, to, e, c, fence)
            }
            Msg::Activated {
                e,
                c,
                fence,
                ok,
                clean,
                from,
            } if e == epoch && ready && self.is_owner(s, to) => {
                self.activated(s, to, (c, fence, ok, clean, from))
            }
            Msg::Drop { e, c } if e == epoch && ready => {
                s.members[usize::from(to)].table.tickets[usize::from(c)] = Ticket::None;
            }
            // Another epoch's message, or not for this role: ignored.
            _ => {}
        }
    }

    // ---- faults and elections ----------------------------------------

    pub(crate) fn crash(&self, s: &mut State, x: u8) {
        s.crashes_left -= 1;
        let id = s.members[usize::from(x)].id;
        s.members[usize::from(x)] = Member::stopped(id);
        for c in self.clients_at(x).collect::<Vec<_>>() {
            if !s.clients[usize::from(c)].is_final() {
                s.clients[usize::from(c)] = Req::Dead;
            }
        }
        for a in 0..N {
            s.links[a][usize::from(x)].clear();
        }
        s.links[usize::from(x)][usize::from(x)].clear();
    }

    pub(crate) fn conduct(&self, s: &mut State, k: u8, first: u8) {
        let e = s.epochs.len() as u8 + 1;
        let mine = s.members[usize::from(k)].epoch;
        let mut order: Vec<Id> = Vec::new();
        if mine == 0 {
            order.push(s.members[usize::from(first)].id);
        } else {
            // Current leaders sort first (their priority counts as 00).
            order.extend(s.leaders(mine).iter().filter(|l| s.is_current(**l)));
        }
        for m in &s.members {
            if m.alive && !order.contains(&m.id) {
                order.push(m.id);
            }
        }
        let leaders: [Id; N] = order
            .try_into()
            .expect("every member is alive when conducting");
        s.epochs.push(leaders);
        s.delays.push(Delay::None);
        for p in 0..N as u8 {
            if p != k {
                s.send(k, p, Msg::Leaders { e });
            }
        }
        self.adopt(s, k, e);
    }

    /// After every step: update the lock-delay ghosts, and forget what can
    /// no longer matter, so that states equal in every future are one state:
    /// messages of an epoch older than their receiver's (ignored on arrival
    /// whatever happens first), a collector's reports once it built, and
    /// what only a report would carry once no report is left to send.
    pub(crate) fn settle(&self, s: &mut State) {
        for (a, row) in s.links.iter_mut().enumerate() {
            for (b, queue) in row.iter_mut().enumerate() {
                let now = s.members[b].epoch;
                if a != b {
                    let old_done_counts = self.config.plant == Plant::TxApplyOldEpoch;
                    queue.retain(|m| match m {
                        Msg::Leaders { e } => *e > now,
                        Msg::TxDone { .. } if old_done_counts => true,
                        other => other.epoch() >= now,
                    });
                }
            }
        }
        let last = s.epochs.len() == usize::from(self.config.max_epoch);
        for m in &mut s.members {
            if let Some(col) = m.collect.as_mut().filter(|c| c.built) {
                col.reports.clear();
            }
            if last && m.epoch == self.config.max_epoch {
                m.frozen = None;
                m.max_fence = 0;
            }
        }
        self.update_ghosts(s);
    }

    pub(crate) fn update_ghosts(&self, s: &mut State) {
        let contact: u8 = (0..N as u8)
            .filter(|&h| s.in_contact(&self.config, h))
            .fold(0, |acc, h| acc | bit(h));
        for d in &mut s.delays {
            if let Delay::Running { seen } = d {
                *seen |= contact;
            }
        }
    }

    /// Every client finished, or (transactions) holds what it set: a
    /// session keeps its variables.
    pub(crate) fn finished(&self, s: &State) -> bool {
        match self.config.workload {
            Workload::Locks => s.all_final(),
            Workload::Tx => s
                .clients
                .iter()
                .all(|r| r.is_final() || matches!(r, Req::Held { .. })),
        }
    }

    pub(crate) fn delay_may_end(&self, s: &State, seen: u8) -> bool {
        (0..C as u8).all(|c| {
            let h = self.home_of(c);
            !matches!(s.clients[usize::from(c)], Req::Held { .. }) || seen & bit(h) != 0
        })
    }
}

impl Member {
    pub(crate) fn stopped(id: Id) -> Member {
        Member {
            alive: false,
            ..Member::start(id)
        }
    }
}
