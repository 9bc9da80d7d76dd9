//! The transitions of the cluster model for stateright: which steps are
//! enabled in a state, what each does, the properties and the boundary.
//!
//! Timers (re-sent requests, re-asked votes, LOCKSTARTED after a reconnect)
//! fire only when what they re-send has no copy, no answer and no effect
//! left: the receivers answer re-sent messages idempotently, so a copy sent
//! while another is on its way would only multiply interleavings.

use stateright::{Model, Property};

use crate::state::{C, Delay, Design, Id, Member, Msg, N, Req, State, Ticket, Workload};
use crate::steps::{Cluster, bit};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The oldest message on the link `from -> to` arrives.
    Deliver {
        from: u8,
        to: u8,
    },
    /// Fault: the link between `a` and `b` breaks.
    Break {
        a: u8,
        b: u8,
    },
    /// Fault: the member crashes and loses its memory.
    Crash(u8),
    /// The crashed member starts again with a new id.
    Restart(u8),
    /// The conductor starts a new epoch; `first` is leader0 when the
    /// conductor knows no leaders (its ids are random then).
    Conduct {
        first: u8,
    },
    /// LOCKSTARTED on a (re)connected link, or LOCKLEADERS passed on.
    Announce {
        from: u8,
        to: u8,
    },
    ClientLock(u8),
    ClientUnlock(u8),
    /// The home's every-second re-send of a waiting request.
    ResendLock(u8),
    /// ReportedContact: the home tells the owner which requests it has.
    SendHave(u8),
    /// The agent's report again: it is not in contact, `peer_timeout`
    /// after it reported (lost with a link, or it reached the collector
    /// before the collector adopted the epoch).
    Report(u8),
    /// The owner asks a follower again for the vote it has no answer to.
    ReAsk {
        owner: u8,
        to: u8,
        k: u8,
    },
    /// The owner has a majority of votes and grants.
    Grant(u8),
    /// The home has been out of contact for `grace`.
    Revoke(u8),
    /// The leader has not heard from the ticket's (crashed) home for
    /// `release_delay`.
    SilentDrop {
        leader: u8,
        c: u8,
    },
    /// The lock-delay of the epoch ends.
    DelayOver(u8),
    /// The session sends its transaction.
    ClientTx(u8),
    /// The home's every-second re-send of a transaction in flight.
    ResendTx(u8),
    /// `TX_WAIT` passed without an answer: the home gives up.
    GiveUpTx(u8),
    /// The owner runs its queued transactions once nothing blocks them.
    TxRun(u8),
    /// The owner sends `TXDONE` once it may (acting again, lock-delay
    /// over).
    TxDone(u8),
}

impl Action {
    pub fn is_fault(&self) -> bool {
        matches!(self, Action::Break { .. } | Action::Crash(_))
    }
}

impl Model for Cluster {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State::initial(&self.config)]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        let cfg = &self.config;
        for a in 0..N as u8 {
            for b in 0..N as u8 {
                if a != b && !s.links[usize::from(a)][usize::from(b)].is_empty() {
                    out.push(Action::Deliver { from: a, to: b });
                }
            }
        }
        for a in 0..N as u8 {
            for b in a + 1..N as u8 {
                let busy = !s.links[usize::from(a)][usize::from(b)].is_empty()
                    || !s.links[usize::from(b)][usize::from(a)].is_empty();
                let dead = !s.members[usize::from(a)].alive || !s.members[usize::from(b)].alive;
                if busy && (s.breaks_left > 0 || dead) {
                    out.push(Action::Break { a, b });
                }
            }
        }
        for x in 0..N as u8 {
            let m = &s.members[usize::from(x)];
            if m.alive && s.crashes_left > 0 && cfg.crashable & bit(x) != 0 {
                out.push(Action::Crash(x));
            }
            if !m.alive {
                out.push(Action::Restart(x));
            }
        }
        if let Some(k) = Self::conductor(s).filter(|_| s.epochs.len() < usize::from(cfg.max_epoch))
        {
            if s.members[usize::from(k)].epoch == 0 {
                for first in 0..N as u8 {
                    out.push(Action::Conduct { first });
                }
            } else {
                out.push(Action::Conduct { first: k });
            }
        }
        for from in 0..N as u8 {
            for to in 0..N as u8 {
                let (a, b) = (&s.members[usize::from(from)], &s.members[usize::from(to)]);
                if from != to && a.alive && b.alive && a.epoch > b.epoch {
                    let msg = Msg::Leaders { e: a.epoch };
                    if !s.in_flight(from, to, &msg) {
                        out.push(Action::Announce { from, to });
                    }
                }
            }
        }
        for c in 0..C as u8 {
            let h = self.home_of(c);
            let home = &s.members[usize::from(h)];
            if !home.alive || home.epoch == 0 {
                continue;
            }
            let owner = s.owner(cfg, home.epoch);
            if cfg.workload == Workload::Tx {
                match s.clients[usize::from(c)] {
                    Req::Idle => out.push(Action::ClientTx(c)),
                    Req::Waiting => {
                        out.push(Action::GiveUpTx(c));
                        if s.is_current(owner) && self.tx_lost(s, c, home.epoch, owner.slot) {
                            out.push(Action::ResendTx(c));
                        }
                    }
                    _ => {}
                }
                continue;
            }
            match s.clients[usize::from(c)] {
                Req::Idle => out.push(Action::ClientLock(c)),
                Req::Held { .. } => out.push(Action::ClientUnlock(c)),
                Req::Waiting
                    if s.is_current(owner) && self.lock_lost(s, c, home.epoch, owner.slot) =>
                {
                    out.push(Action::ResendLock(c));
                }
                _ => {}
            }
        }
        for h in 0..N as u8 {
            let home = &s.members[usize::from(h)];
            if !home.alive {
                continue;
            }
            // A transaction waiting is not revoked: it is given up.
            let active = self.clients_at(h).any(|c| match s.clients[usize::from(c)] {
                Req::Held { .. } => true,
                Req::Waiting => cfg.workload == Workload::Locks,
                _ => false,
            });
            if active && !s.in_contact(cfg, h) {
                out.push(Action::Revoke(h));
            }
            if !s.in_contact(cfg, h) && self.report_missing(s, h) {
                out.push(Action::Report(h));
            }
            if cfg.design == Design::ReportedContact && home.epoch > 0 {
                // Sent only when it would change the owner's table: a set
                // that changes nothing is a no-op wherever it lands, as
                // later changes follow it on the same FIFO link.
                let owner = s.owner(cfg, home.epoch);
                let om = &s.members[usize::from(owner.slot)];
                let set = self.have_set(s, h);
                let msg = Msg::Have {
                    e: home.epoch,
                    home: h,
                    set,
                };
                let stale = self
                    .slots_at(h)
                    .any(|k| set & bit(k) == 0 && om.table.tickets[usize::from(k)] != Ticket::None);
                if s.is_current(owner)
                    && om.epoch == home.epoch
                    && om.ready
                    && stale
                    && !s.in_flight(h, owner.slot, &msg)
                {
                    out.push(Action::SendHave(h));
                }
            }
        }
        for o in 0..N as u8 {
            if !self.is_owner(s, o) || !s.members[usize::from(o)].ready {
                continue;
            }
            let m = &s.members[usize::from(o)];
            if self.tx_runnable(s, o) {
                out.push(Action::TxRun(o));
            }
            if self.tx_may_finish(s, o) {
                out.push(Action::TxDone(o));
            }
            for (c, fence, voters) in
                cfg.slots()
                    .filter_map(|k| match m.table.tickets[usize::from(k)] {
                        Ticket::Asking { fence, voters, .. } => Some((k, fence, voters)),
                        _ => None,
                    })
            {
                for to in self.followers(s, o) {
                    let msg = Msg::Activate {
                        e: m.epoch,
                        c,
                        fence,
                    };
                    let answered = s.links[usize::from(to)][usize::from(o)].iter().any(|a| {
                        matches!(a, Msg::Activated { e, c: ac, fence: af, .. }
                            if *e == m.epoch && *ac == c && *af == fence)
                    });
                    if voters & bit(to) == 0
                        && s.members[usize::from(to)].alive
                        && !s.in_flight(o, to, &msg)
                        && !answered
                    {
                        out.push(Action::ReAsk { owner: o, to, k: c });
                    }
                }
            }
            if cfg.workload == Workload::Locks && self.may_grant(s, o) {
                out.push(Action::Grant(o));
            }
        }
        for l in 0..N as u8 {
            let m = &s.members[usize::from(l)];
            for k in cfg.slots() {
                if m.alive
                    && m.ready
                    && s.clients[usize::from(cfg.ticket_session(k))] == Req::Dead
                    && m.table.tickets[usize::from(k)] != Ticket::None
                {
                    out.push(Action::SilentDrop { leader: l, c: k });
                }
            }
        }
        for (i, d) in s.delays.iter().enumerate() {
            if let Delay::Running { seen } = *d {
                if self.delay_may_end(s, seen) {
                    out.push(Action::DelayOver(i as u8 + 1));
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Deliver { from, to } => self.deliver(&mut s, from, to),
            Action::Break { a, b } => {
                if s.members[usize::from(a)].alive && s.members[usize::from(b)].alive {
                    s.breaks_left -= 1;
                }
                s.links[usize::from(a)][usize::from(b)].clear();
                s.links[usize::from(b)][usize::from(a)].clear();
            }
            Action::Crash(x) => self.crash(&mut s, x),
            Action::Restart(x) => {
                let old = s.members[usize::from(x)].id;
                let id = Id {
                    slot: x,
                    incarnation: old.incarnation + 1,
                };
                s.members[usize::from(x)] = Member {
                    alive: true,
                    ..Member::stopped(id)
                };
            }
            Action::Conduct { first } => {
                let k = Self::conductor(&s)?;
                self.conduct(&mut s, k, first);
            }
            Action::Announce { from, to } => {
                let e = s.members[usize::from(from)].epoch;
                s.send(from, to, Msg::Leaders { e });
            }
            Action::ClientLock(c) | Action::ResendLock(c) => {
                let h = self.home_of(c);
                let e = s.members[usize::from(h)].epoch;
                s.clients[usize::from(c)] = Req::Waiting;
                let owner = s.owner(&self.config, e).slot;
                s.send(h, owner, Msg::Lock { e, c });
            }
            Action::ClientUnlock(c) => {
                let h = self.home_of(c);
                s.clients[usize::from(c)] = Req::Done;
                self.owner_slot(&s, h)?;
                self.home_unlock(&mut s, h, c);
            }
            Action::Report(x) => {
                let e = s.members[usize::from(x)].epoch;
                let collector = s.leaders(e)[0].slot;
                let report = Box::new(self.report_of(&s, x));
                s.send(x, collector, Msg::Report { e, report });
            }
            Action::SendHave(h) => {
                let e = s.members[usize::from(h)].epoch;
                let set = self.have_set(&s, h);
                let owner = s.owner(&self.config, e).slot;
                s.send(h, owner, Msg::Have { e, home: h, set });
            }
            Action::ReAsk { owner, to, k } => {
                let m = &s.members[usize::from(owner)];
                let e = m.epoch;
                let Ticket::Asking { fence, .. } = m.table.tickets[usize::from(k)] else {
                    return None;
                };
                s.send(owner, to, Msg::AddTicket { e, c: k });
                s.send(owner, to, Msg::Activate { e, c: k, fence });
            }
            Action::Grant(o) => self.grant(&mut s, o),
            Action::Revoke(h) => {
                for c in self.clients_at(h).collect::<Vec<_>>() {
                    let next = match s.clients[usize::from(c)] {
                        Req::Held { .. } => Req::Lost,
                        Req::Waiting if self.config.workload == Workload::Locks => Req::Failed,
                        _ => continue,
                    };
                    s.clients[usize::from(c)] = next;
                    // A session's holdings are revoked at its home alone,
                    // all at once; the owner drops them on the home's
                    // next set of tickets (`Have`), in one step, not one
                    // variable at a time.
                    if self.config.workload == Workload::Locks {
                        self.home_unlock(&mut s, h, c);
                    }
                }
            }
            Action::SilentDrop { leader, c } => {
                let t = &mut s.members[usize::from(leader)].table;
                t.tickets[usize::from(c)] = Ticket::None;
                t.queue.retain(|&q| q != c);
                // The silent home's tickets go together.
                let session = self.config.ticket_session(c);
                for k in self.config.slots() {
                    if self.config.ticket_session(k) == session {
                        t.tickets[usize::from(k)] = Ticket::None;
                    }
                }
                if self.is_owner(&s, leader) {
                    self.try_ask(&mut s, leader);
                    if self.config.workload == Workload::Tx {
                        self.tx_forget(&mut s, leader, self.config.ticket_session(c));
                    }
                }
            }
            Action::DelayOver(e) => s.delays[usize::from(e) - 1] = Delay::Over,
            Action::ClientTx(c) | Action::ResendTx(c) => {
                let h = self.home_of(c);
                let e = s.members[usize::from(h)].epoch;
                s.clients[usize::from(c)] = Req::Waiting;
                let owner = s.owner(&self.config, e).slot;
                s.send(h, owner, Msg::Tx { e, s: c });
            }
            Action::GiveUpTx(c) => {
                let h = self.home_of(c);
                let e = s.members[usize::from(h)].epoch;
                s.clients[usize::from(c)] = Req::Failed;
                let owner = s.owner(&self.config, e).slot;
                s.send(h, owner, Msg::TxAck { e, s: c, ok: false });
            }
            Action::TxRun(o) => self.tx_run(&mut s, o),
            Action::TxDone(o) => self.tx_try_done(&mut s, o),
        }
        // An agent's messages to itself are calls, not network traffic.
        while let Some(x) =
            (0..N as u8).find(|&x| !s.links[usize::from(x)][usize::from(x)].is_empty())
        {
            self.deliver(&mut s, x, x);
        }
        self.settle(&mut s);
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        if self.config.workload == Workload::Tx {
            return crate::tx::properties();
        }
        vec![
            Property::always("S1 mutual exclusion", |_, s: &State| s.holders() <= 1),
            Property::always("S2 fences increase", |_, s: &State| !s.s2_broken),
            Property::always("S6 majority of one epoch", |_, s: &State| !s.s6_broken),
            Property::always("no deadlock", |m: &Cluster, s: &State| {
                let mut acts = Vec::new();
                m.actions(s, &mut acts);
                m.finished(s) || acts.iter().any(|a| !a.is_fault())
            }),
            Property::sometimes("a lock is delivered", |_, s: &State| {
                s.last_delivered_fence > 0
            }),
            Property::sometimes("both clients are served", |_, s: &State| {
                s.clients.iter().all(|r| *r == Req::Done)
            }),
            Property::sometimes("an epoch starts after a crash", |_, s: &State| {
                s.epochs.len() > 1
            }),
        ]
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.members.iter().all(|m| {
            m.table.last_fence == 0 || m.table.last_fence < m.table.base + self.config.fence_room
        })
    }
}
