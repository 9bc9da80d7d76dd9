//! The model's handover (docs/cluster.md "Handover: starting an epoch"):
//! what a member reports, how the collector builds the epoch's state, and
//! how the leaders install it. The rest of the steps are in steps.rs.

use crate::state::{
    C, Collect, Delay, FENCE_SPAN, HomeReq, Id, K, Msg, N, Plant, Q, Report, Req, State, Table,
    Ticket, Workload,
};
use crate::steps::{Cluster, bit};

impl Cluster {
    /// The member's report: its frozen table, its clients' requests, the
    /// largest fence it saw.
    pub(crate) fn report_of(&self, s: &State, slot: u8) -> Report {
        let m = &s.members[usize::from(slot)];
        Report {
            from: m.id,
            table: m.frozen.clone(),
            home: std::array::from_fn(|k| {
                let k = k as u8;
                if !self.slots_at(slot).any(|j| j == k) {
                    return None;
                }
                let c = self.config.ticket_session(k);
                match s.clients[usize::from(c)] {
                    Req::Held { fence } => Some(HomeReq::Held(fence)),
                    // A transaction not applied holds nothing yet.
                    Req::Waiting if self.config.workload == Workload::Locks => {
                        Some(HomeReq::Waiting)
                    }
                    _ => None,
                }
            }),
            max_fence: m.max_fence,
        }
    }

    /// Whether the member's report would change its epoch's collector:
    /// the collector is in that epoch, has not built, has no report from
    /// it, and none is on its way.
    pub(crate) fn report_missing(&self, s: &State, slot: u8) -> bool {
        let m = &s.members[usize::from(slot)];
        if !m.alive || m.epoch == 0 {
            return false;
        }
        let collector = s.leaders(m.epoch)[0];
        let cm = &s.members[usize::from(collector.slot)];
        let waits = s.is_current(collector)
            && cm.epoch == m.epoch
            && cm
                .collect
                .as_ref()
                .is_some_and(|c| !c.built && c.reports.iter().all(|r| r.from != m.id));
        let on_its_way = s.links[usize::from(slot)][usize::from(collector.slot)]
            .iter()
            .any(|msg| matches!(msg, Msg::Report { e, report } if *e == m.epoch && report.from == m.id));
        waits && !on_its_way
    }

    /// Whether the last epoch the scope allows can no longer get a
    /// majority of its leaders ready: too many of them crashed, or lost
    /// the state its collector sent (or the collector crashed before it
    /// sent it). The design then elects again (docs/cluster.md: a leader
    /// that never acted for its epoch, the conductor not in contact), an
    /// epoch the scope does not have: the progress check does not judge
    /// such a state, as it does not judge one at the fence bound.
    pub(crate) fn needs_epoch_beyond_scope(&self, s: &State) -> bool {
        if s.epochs.len() < usize::from(self.config.max_epoch) {
            return false;
        }
        let e = self.config.max_epoch;
        let collector = s.leaders(e)[0];
        let cm = &s.members[usize::from(collector.slot)];
        let built = cm.epoch == e && cm.collect.as_ref().is_some_and(|c| c.built);
        let may_act = |l: Id| {
            let m = &s.members[usize::from(l.slot)];
            if !s.is_current(l) {
                return false; // a restarted agent never acts on lost memory
            }
            if m.epoch == e && m.ready {
                return true;
            }
            if !s.is_current(collector) {
                return false; // nobody builds the state, or sends it again
            }
            !built
                || s.links[usize::from(collector.slot)][usize::from(l.slot)]
                    .iter()
                    .any(|msg| matches!(msg, Msg::Tickets { e: te, .. } if *te == e))
        };
        s.leaders(e).iter().filter(|l| may_act(**l)).count() < Q
    }

    pub(crate) fn adopt(&self, s: &mut State, slot: u8, e: u8) {
        let collector = s.leaders(e)[0];
        let owner = s.owner(&self.config, e);
        let was_ready_leader = {
            let m = &s.members[usize::from(slot)];
            m.ready && s.leaders(m.epoch).contains(&m.id)
        };
        let m = &mut s.members[usize::from(slot)];
        if was_ready_leader {
            m.frozen = Some((m.epoch, m.table.clone()));
        }
        m.epoch = e;
        m.ready = false;
        m.table = Table::empty(0);
        m.pending_lock = 0;
        m.pending_unlock = 0;
        m.tx_queue.clear();
        m.in_flight = None;
        m.reported.clear();
        m.collect = (collector == m.id).then(|| Collect {
            reports: Vec::new(),
            built: false,
        });
        // A transaction whose answer did not come before the epoch
        // changed is given up: the answer of an older epoch is ignored.
        for c in self.clients_at(slot).collect::<Vec<_>>() {
            if self.config.workload == Workload::Tx && s.clients[usize::from(c)] == Req::Waiting {
                s.clients[usize::from(c)] = Req::Failed;
            }
        }
        let report = self.report_of(s, slot);
        s.send(
            slot,
            collector.slot,
            Msg::Report {
                e,
                report: Box::new(report),
            },
        );
        for c in self.clients_at(slot) {
            if s.clients[usize::from(c)] == Req::Waiting {
                s.send(slot, owner.slot, Msg::Lock { e, c });
            }
        }
    }

    pub(crate) fn collect(&self, s: &mut State, slot: u8, e: u8, report: Report) {
        let m = &mut s.members[usize::from(slot)];
        let Some(col) = m.collect.as_mut().filter(|c| m.epoch == e && !c.built) else {
            return;
        };
        if col.reports.iter().all(|r| r.from != report.from) {
            col.reports.push(report);
        }
        if col.reports.len() >= Q {
            col.built = true;
            let reports = col.reports.clone();
            self.build(s, slot, e, &reports);
        }
    }

    pub(crate) fn build(&self, s: &mut State, slot: u8, e: u8, reports: &[Report]) {
        let e_max = reports
            .iter()
            .filter_map(|r| r.table.as_ref().map(|t| t.0))
            .max();
        let complete = reports.len() == N
            || e_max.is_some_and(|em| {
                let ls = s.leaders(em);
                let from_leaders = reports.iter().filter(|r| ls.contains(&r.from)).count();
                let ready_one = reports
                    .iter()
                    .any(|r| ls.contains(&r.from) && r.table.as_ref().is_some_and(|t| t.0 == em));
                from_leaders > N / 2 && ready_one
            });
        let mut held: [Option<u8>; K] = [None; K];
        let mut max_fence = 0;
        for r in reports {
            max_fence = max_fence.max(r.max_fence);
            for (c, slot) in held.iter_mut().enumerate() {
                let from_table = r.table.as_ref().and_then(|t| t.1.tickets[c].held_fence());
                let from_home = match r.home[c] {
                    Some(HomeReq::Held(f)) => Some(f),
                    _ => None,
                };
                for f in from_table.into_iter().chain(from_home) {
                    *slot = Some(slot.map_or(f, |h| h.max(f)));
                    max_fence = max_fence.max(f);
                }
            }
        }
        // The home is the authority on its own clients.
        for k in self.config.slots() {
            let home = Id {
                slot: self.home_of(self.config.ticket_session(k)),
                incarnation: 0,
            };
            if reports
                .iter()
                .any(|r| r.from == home && r.home[usize::from(k)].is_none())
            {
                held[usize::from(k)] = None;
            }
        }
        let base = (e * FENCE_SPAN).max(max_fence + 1);
        let delay = !complete && self.config.plant != Plant::SkipLockDelay;
        let mut reported: Vec<Id> = reports.iter().map(|r| r.from).collect();
        reported.sort();
        s.delays[usize::from(e) - 1] = if delay {
            Delay::Running { seen: 0 }
        } else {
            Delay::Over
        };
        for l in s.leaders(e).to_vec() {
            if l.slot != slot {
                let msg = Msg::Tickets {
                    e,
                    held,
                    base,
                    delay,
                    reported: reported.clone(),
                };
                s.send(slot, l.slot, msg);
            }
        }
        self.install(s, slot, held, base, reported);
    }

    pub(crate) fn install(
        &self,
        s: &mut State,
        slot: u8,
        held: [Option<u8>; K],
        base: u8,
        reported: Vec<Id>,
    ) {
        let m = &mut s.members[usize::from(slot)];
        m.ready = true;
        m.table = Table::empty(base);
        for (c, f) in held.iter().enumerate() {
            if let Some(fence) = *f {
                m.table.tickets[c] = Ticket::Held { fence };
                m.table.queue.push(c as u8);
                m.max_fence = m.max_fence.max(fence);
            }
        }
        m.reported = reported;
        // A home that is not the owner keeps no ticket of a request it
        // released since it reported: it dropped its vote as it released,
        // and the owner sends it no `Drop` for its `Unlock`.
        if self.config.workload == Workload::Locks && !self.is_owner(s, slot) {
            for c in self.clients_at(slot).collect::<Vec<_>>() {
                if !matches!(s.clients[usize::from(c)], Req::Waiting | Req::Held { .. }) {
                    let t = &mut s.members[usize::from(slot)].table;
                    t.tickets[usize::from(c)] = Ticket::None;
                    t.queue.retain(|&q| q != c);
                }
            }
        }
        let m = &mut s.members[usize::from(slot)];
        let (locks, unlocks) = (m.pending_lock, m.pending_unlock);
        m.pending_lock = 0;
        m.pending_unlock = 0;
        if self.is_owner(s, slot) {
            for c in 0..C as u8 {
                if locks & bit(c) != 0 {
                    self.owner_lock(s, slot, c);
                }
            }
            for c in 0..C as u8 {
                if unlocks & bit(c) != 0 {
                    self.owner_unlock(s, slot, c, true);
                }
            }
            self.try_ask(s, slot);
            self.tx_run(s, slot);
        }
    }
}
