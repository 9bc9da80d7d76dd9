//! The handover as the core runs it: reports, collecting, the state sent
//! and installed (the part is [`crate::cluster::handover::Handover`]).

use super::To;
use crate::cluster::batch::{
    BATCH_TICKETS, Batch, BatchOf, ReportedRef, ReportedTicket, read_batch,
};
use crate::cluster::config::Plant;
use crate::cluster::handover::{
    REPORT_PAUSE_PER_LINE, Report, ReportWalk, StateIn, own_state_hold, state_delay,
};
use crate::cluster::merge::{Held, merge_held, take_held};
use crate::cluster::msg::{BadField, Part, PeerMsg, ReportBegin};
use crate::cluster::{Cluster, Id};
use crate::core::Core;
use crate::local::table::State;
use crate::time::Now;
use crate::vocab::{ObjectName, TicketId};
use std::ops::Bound;
use std::time::Duration;

impl Core {
    /// Starts this agent's report to the current epoch's collector: its
    /// first line and first step now, the rest a step per call
    /// ([`continue_report`](Self::continue_report)).
    pub(crate) fn send_report(&mut self, now: Now) {
        self.cluster.handover.report_walk = None;
        let c = &self.cluster;
        if c.epoch.number == 0 || c.epoch.leaders.is_empty() {
            return;
        }
        let collector = c.epoch.leaders[0].clone();
        let own = collector == c.me;
        let link = c.peers.link_of(&collector);
        if !own && link.is_none() {
            return; // sent when the link is up
        }
        let epoch = c.epoch.number;
        let mut begin = ReportBegin {
            prev_epoch: c.epoch.prev_number,
            prev_leaders: c.epoch.prev_leaders.clone(),
            ready_epoch: c.leader.last_table.as_ref().map_or(0, |(e, _)| *e),
            floor: c.records.fence_floor,
            up_us: u64::try_from(now.mono.saturating_since(c.born).as_micros()).unwrap_or(u64::MAX),
            ..ReportBegin::default()
        };
        // A lock-delay still running carries over: the homes it waits for
        // are no better known to the new epoch.
        let delay_left = c
            .leader
            .last_table
            .as_ref()
            .and_then(|(_, t)| t.delay_until)
            .map_or(Duration::ZERO, |d| d.saturating_since(now.mono));
        begin.delay_left_us = u64::try_from(delay_left.as_micros()).unwrap_or(u64::MAX);
        // The collector's own tickets stay here: room for all at once, not
        // a million moved at each doubling.
        let tickets = if own {
            let table = c.leader.last_table.as_ref().map_or(0, |(_, t)| t.tickets);
            (
                Vec::with_capacity(table),
                Vec::with_capacity(self.table.ticket_count()),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        let h = &mut self.cluster.handover;
        if own {
            h.own_serial += 1;
            begin.own = Some(h.own_serial);
        }
        // Not sent until the last step: the tick must not start it over.
        h.report_sent = None;
        h.report_walk = Some(ReportWalk {
            epoch,
            collector: collector.clone(),
            link: if own { None } else { link },
            own: begin.own,
            in_leader: true,
            after: None,
            batch: Batch::new(BatchOf::Leader, epoch),
            lines: 1,
            tickets,
            next: now.mono,
        });
        let begin = PeerMsg::Tickets {
            epoch,
            part: Part::ReportBegin(begin),
        };
        self.send(To::Agent(&collector), begin);
        self.continue_report(now);
    }

    /// One step of the report being written: at most `report_step`
    /// tickets (and every ticket of the last object it takes), then its
    /// last line when the walk is done. A report whose epoch passed, or
    /// whose link to the collector is gone, is dropped: the tick starts
    /// another when there is a link.
    ///
    /// Walked in steps, the tables may change in between, and the report
    /// is still one the state may count (docs/cluster.md "Handover"): the
    /// leader table is frozen; the home part loses a request only when its
    /// client let it go (released, closed, revoked) and gains only waiting
    /// ones, or ones granted in this epoch (then from a state that did
    /// not wait for this report); and a leader-table ticket left out
    /// because the home part would report it held, and then let go before
    /// the home part got to it, is one the merge drops anyway (the home is
    /// the authority on its clients).
    pub(crate) fn continue_report(&mut self, now: Now) {
        let Some(mut w) = self.cluster.handover.report_walk.take() else {
            return;
        };
        let c = &self.cluster;
        if w.epoch != c.epoch.number
            || (w.link.is_some() && c.peers.link_of(&w.collector) != w.link)
        {
            return;
        }
        if now.mono < w.next {
            self.cluster.handover.report_walk = Some(w);
            return;
        }
        let mut budget = c.cfg.report_step.max(1);
        let mut lines = Vec::new();
        if w.in_leader && self.report_leader_step(&mut w, &mut budget, &mut lines) {
            lines.extend(w.batch.take());
            w.batch = Batch::new(BatchOf::Home, w.epoch);
            w.in_leader = false;
            w.after = None;
        }
        let done = !w.in_leader && self.report_home_step(&mut w, &mut budget, &mut lines);
        if done {
            lines.extend(w.batch.take());
        }
        w.lines += lines.len() as u64;
        let collector = w.collector.clone();
        if done {
            // About as many lines as on the wire, for the pause before
            // another report.
            let mut count = w.lines + 1;
            if let Some(serial) = w.own {
                let (leader, home) = &w.tickets;
                count += (leader.len().div_ceil(BATCH_TICKETS) + home.len().div_ceil(BATCH_TICKETS))
                    as u64;
                self.cluster.handover.own_report = Some((serial, std::mem::take(&mut w.tickets)));
            }
            lines.push(PeerMsg::Tickets {
                epoch: w.epoch,
                part: Part::ReportEnd { count: w.lines + 1 },
            });
            let h = &mut self.cluster.handover;
            h.report_sent = Some((w.epoch, now.mono));
            h.report_pause = REPORT_PAUSE_PER_LINE * u32::try_from(count).unwrap_or(u32::MAX);
        } else {
            w.next = now.mono + self.cluster.cfg.report_step_pause;
            self.cluster.handover.report_walk = Some(w);
        }
        for m in lines {
            self.send(To::Agent(&collector), m);
        }
    }

    /// A step of a report's leader part: this agent's frozen table of the
    /// epoch it was last ready in, if any. True when the part is done.
    fn report_leader_step(
        &self,
        w: &mut ReportWalk,
        budget: &mut usize,
        lines: &mut Vec<PeerMsg>,
    ) -> bool {
        let c = &self.cluster;
        let Some((_, table)) = &c.leader.last_table else {
            return true;
        };
        let from = w.after.as_ref().map_or(Bound::Unbounded, Bound::Excluded);
        // Both maps are in key order: walked together, not searched a
        // million times.
        let mut homes = self
            .table
            .objects
            .range((from, Bound::Unbounded))
            .peekable();
        let mut last = None;
        let mut done = true;
        for (name, o) in table.objects.range((from, Bound::Unbounded)) {
            if *budget == 0 {
                done = false;
                break;
            }
            *budget = budget.saturating_sub(o.tickets.len().max(1));
            last = Some(name);
            while homes.next_if(|(n, _)| *n < name).is_some() {}
            let mine = homes.next_if(|(n, _)| *n == name).map(|(_, m)| m);
            for t in &o.tickets {
                let Some(fence) = t.fence() else {
                    continue;
                };
                // A lock of this agent's own client that its home part
                // reports held with the same fence: the state would be the
                // same without the copy, and an agent that is home and
                // leader of a million locks would otherwise report each
                // twice.
                let held_here = mine.is_some_and(|m| {
                    t.home == c.me
                        && m.position(TicketId(t.req)).is_some_and(|i| {
                            matches!(m.tickets[i].state,
                                State::Held { fence: f, .. } | State::Expired { fence: f, .. }
                                if f == fence)
                        })
                });
                if held_here {
                    continue;
                }
                if w.own.is_some() {
                    w.tickets.0.push(ReportedTicket {
                        object: name.clone(),
                        home: t.home.clone(),
                        req: t.req,
                        key: t.key.clone(),
                        fence,
                        kind: t.kind,
                    });
                } else {
                    let r = ReportedRef {
                        object: name,
                        home: &t.home,
                        req: t.req,
                        key: &t.key,
                        fence,
                        kind: t.kind,
                    };
                    lines.extend(w.batch.push_ref(r, None));
                }
            }
        }
        if let Some(name) = last {
            w.after = Some(name.clone());
        }
        done
    }

    /// A step of a report's home part: its own clients' requests, held
    /// (with their fences) or waiting. True when the part is done.
    fn report_home_step(
        &self,
        w: &mut ReportWalk,
        budget: &mut usize,
        lines: &mut Vec<PeerMsg>,
    ) -> bool {
        // On the wire an empty home stands for the sender.
        let me = if w.own.is_some() {
            self.cluster.me.clone()
        } else {
            Id::from("")
        };
        let from = w.after.as_ref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut last = None;
        let mut done = true;
        for (name, o) in self.table.objects.range((from, Bound::Unbounded)) {
            if *budget == 0 {
                done = false;
                break;
            }
            *budget = budget.saturating_sub(o.tickets.len().max(1));
            last = Some(name);
            for t in &o.tickets {
                let (fence, held) = match t.state {
                    State::Waiting { .. } => (0, false),
                    State::Held { fence, .. } | State::Expired { fence, .. } => (fence, true),
                };
                if w.own.is_some() {
                    let r = ReportedTicket {
                        object: name.clone(),
                        home: me.clone(),
                        req: t.id.0,
                        key: (*t.key).into(),
                        fence,
                        kind: t.kind,
                    };
                    w.tickets.1.push((r, held));
                } else {
                    let r = ReportedRef {
                        object: name,
                        home: &me,
                        req: t.id.0,
                        key: &t.key,
                        fence,
                        kind: t.kind,
                    };
                    lines.extend(w.batch.push_ref(r, Some(held)));
                }
            }
        }
        if let Some(name) = last {
            w.after = Some(name.clone());
        }
        done
    }

    /// `LOCKTICKETS`: a report (to the collector) or a state (from it).
    pub(crate) fn on_tickets(
        &mut self,
        now: Now,
        from: &Id,
        epoch: u64,
        part: Part,
    ) -> Result<(), BadField> {
        if epoch != self.cluster.epoch.number {
            return Ok(());
        }
        if part.is_report() {
            self.on_report_part(now, from, part)
        } else {
            self.on_state_part(now, from, part)
        }
    }

    fn on_report_part(&mut self, now: Now, from: &Id, part: Part) -> Result<(), BadField> {
        let max_tickets = self.config.max_tickets as u64 * 2;
        let max_lines = max_tickets + 16;
        let Some(collect) = self.cluster.handover.collect.as_mut() else {
            return Ok(()); // not the collector
        };
        if let Part::ReportBegin(b) = part {
            let r = Report {
                prev_epoch: b.prev_epoch,
                prev_leaders: b.prev_leaders,
                ready_epoch: b.ready_epoch,
                floor: b.floor,
                delay_left: b.delay_left_us,
                up: b.up_us,
                own: b.own,
                lines: 1,
                ..Report::default()
            };
            collect.partial.insert(from.clone(), r);
            return Ok(());
        }
        let Some(r) = collect.partial.get_mut(from) else {
            return Err(BadField("part (no begin)"));
        };
        r.lines += 1;
        if r.lines > max_lines {
            collect.partial.remove(from);
            return Err(BadField("part (too many)"));
        }
        match part {
            Part::Report { as_leader, tickets } => {
                let tickets = read_batch(&tickets, Some(from))?;
                crate::cluster::persist::check_fences(now, tickets.iter().map(|(t, _)| &t.fence))?;
                if (r.leader.len() + r.home.len() + tickets.len()) as u64 > max_tickets {
                    collect.partial.remove(from);
                    return Err(BadField("part (too many tickets)"));
                }
                for (t, held) in tickets {
                    if as_leader {
                        r.leader.push(t);
                    } else {
                        r.home.push((t, held == Some(true)));
                    }
                }
            }
            Part::ReportEnd { count } => {
                let mut r = collect.partial.remove(from).expect("present");
                if count != r.lines {
                    return Err(BadField("count"));
                }
                if *from == self.cluster.me {
                    // Its own report: the tickets did not go through the
                    // wire. One that is not the latest is not counted (it
                    // is sent again).
                    match self.cluster.handover.own_report.take() {
                        Some((serial, (leader, home))) if r.own == Some(serial) => {
                            r.leader = leader;
                            r.home = home;
                        }
                        other => {
                            self.cluster.handover.own_report = other;
                            return Ok(());
                        }
                    }
                }
                if collect.done {
                    self.late_report(from, &r);
                } else {
                    collect.reports.insert(from.clone(), r);
                    self.check_collect(now);
                }
            }
            _ => {} // not a report's
        }
        Ok(())
    }

    /// Builds the epoch's state once a quorum reported and it is complete,
    /// or after `peer_timeout` with the lock-delay.
    pub(crate) fn check_collect(&mut self, now: Now) {
        let c = &mut self.cluster;
        let Some(collect) = c.handover.collect.as_mut() else {
            return;
        };
        // Its own report first. Written in steps, it may still be on its
        // way when every linked member's is in; a state built without it
        // knows nothing of the locks of this agent's clients that only its
        // own table and a crashed leader's held, and this healthy agent
        // had to revoke them (one-computer seed 40420). It is on its way
        // for a few steps only: nothing but an epoch change stops it.
        let epoch = c.epoch.number;
        if (c.handover.report_walk.as_ref()).is_some_and(|w| w.own.is_some() && w.epoch == epoch) {
            return;
        }
        let Some(verdict) =
            collect.weigh(now.mono, &c.peers, c.cfg.lock_delay(), c.cfg.peer_timeout)
        else {
            return;
        };
        let collect = self.cluster.handover.collect.as_mut().expect("collecting");
        collect.done = true;
        let reports = std::mem::take(&mut collect.reports);
        let (held, mut floor) = merge_held(&reports);
        for h in &held {
            floor = floor.max(h.fence);
        }
        let epoch = self.cluster.epoch.number;
        let base = crate::cluster::persist::fence_base(epoch).max(floor + 1);
        let delay = if self.cluster.cfg.plant == Plant::SkipLockDelay {
            Duration::ZERO
        } else {
            state_delay(&reports, verdict, self.cluster.cfg.lock_delay())
        };
        log::info!(
            "epoch {epoch}: state from {} reports, {} held locks, {}",
            reports.len(),
            held.len(),
            if delay.is_zero() {
                "complete".to_owned()
            } else {
                format!("incomplete: lock-delay {delay:?}")
            }
        );
        let mut msgs = Vec::with_capacity(held.len().div_ceil(BATCH_TICKETS) + reports.len() + 2);
        msgs.push(PeerMsg::Tickets {
            epoch,
            part: Part::StateBegin { base, delay },
        });
        let mut batch = Batch::new(BatchOf::State, epoch);
        for &Held { t, fence, .. } in &held {
            if fence == t.fence {
                msgs.extend(batch.push(t, None));
            } else {
                let t = ReportedTicket { fence, ..t.clone() };
                msgs.extend(batch.push(&t, None));
            }
        }
        msgs.extend(batch.take());
        for id in reports.keys() {
            msgs.push(PeerMsg::Tickets {
                epoch,
                part: Part::Reporter { id: id.clone() },
            });
        }
        let count = msgs.len() as u64 + 1;
        msgs.push(PeerMsg::Tickets {
            epoch,
            part: Part::StateEnd { count },
        });
        // Its own copy does not go through the wire: the tickets as they
        // are, installed once the others' copies went out.
        let me = self.cluster.me.clone();
        if self.cluster.epoch.leaders.contains(&me) {
            let places: Vec<_> = held.iter().map(|h| (h.place, h.fence)).collect();
            drop(held);
            let reporters = reports.keys().cloned().collect();
            let state = StateIn {
                base,
                delay,
                tickets: take_held(reports, &places),
                reporters,
            };
            self.cluster.handover.own_state = Some((now.mono, state));
            self.cluster.handover.own_state_held = None;
        }
        let others: Vec<Id> = (self.cluster.epoch.leaders.iter())
            .filter(|l| **l != me)
            .cloned()
            .collect();
        // A leader whose link is down now would never get the state, and
        // never act: the state waits for its link to come back up. One
        // whose link breaks while the state is on its way gets a part of
        // it only: until a leader answers as acting in this epoch, the
        // state is sent again whenever its link comes back.
        let unlinked: Vec<&Id> = (others.iter())
            .filter(|l| self.cluster.peers.link_of(l).is_none())
            .collect();
        if !unlinked.is_empty() {
            log::info!(
                "epoch {epoch}: the state waits for the links to {}",
                (unlinked.iter().map(|l| Cluster::name_of(l)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let linked: Vec<Id> = (others.iter())
            .filter(|l| self.cluster.peers.link_of(l).is_some())
            .cloned()
            .collect();
        if others.is_empty() {
            return;
        }
        for l in &linked {
            for m in &msgs {
                self.send(To::Agent(l), m.clone());
            }
        }
        self.cluster.handover.state_pending = Some((epoch, others, msgs));
        self.cluster.handover.late_pending.clear();
    }

    /// A link to `id` came up: if it is a leader of this epoch that has not
    /// answered as acting yet, it gets the state (again: a state cut short
    /// by a broken link is started over, and an installed one is ignored).
    pub(crate) fn send_pending_state(&mut self, id: &Id) {
        let epoch = self.cluster.epoch.number;
        let Some((e, waiting, msgs)) = self.cluster.handover.state_pending.as_ref() else {
            return;
        };
        if *e != epoch {
            self.cluster.handover.state_pending = None;
            self.cluster.handover.late_pending.clear();
            return;
        }
        if !waiting.contains(id) {
            return;
        }
        let mut msgs = msgs.clone();
        for lines in self.cluster.handover.late_pending.values() {
            msgs.extend(lines.iter().cloned());
        }
        for m in msgs {
            self.send(To::Agent(id), m);
        }
    }

    fn on_state_part(&mut self, now: Now, from: &Id, part: Part) -> Result<(), BadField> {
        if self.cluster.epoch.leaders.first() != Some(from) {
            return Err(BadField("part (not from the collector)"));
        }
        if matches!(
            part,
            Part::LateBegin { .. } | Part::Late(_) | Part::LateEnd { .. }
        ) {
            return self.on_late_part(now, part);
        }
        let Some(l) = self.cluster.leader.table.as_mut() else {
            return Ok(());
        };
        if l.ready {
            return Ok(());
        }
        if let Part::StateBegin { base, delay } = part {
            l.state_in = Some(StateIn {
                base,
                delay,
                ..Default::default()
            });
            l.state_lines = 1;
            return Ok(());
        }
        let Some(s) = l.state_in.as_mut() else {
            return Err(BadField("part (no state-begin)"));
        };
        l.state_lines += 1;
        match part {
            Part::State(tickets) => {
                let tickets = read_batch(&tickets, None)?;
                crate::cluster::persist::check_fences(now, tickets.iter().map(|(t, _)| &t.fence))?;
                if s.tickets.len() + tickets.len() > self.config.max_tickets * 2 {
                    l.state_in = None;
                    return Err(BadField("part (too many tickets)"));
                }
                s.tickets.extend(tickets.into_iter().map(|(t, _)| t));
            }
            Part::Reporter { id } => {
                s.reporters.insert(id);
            }
            Part::StateEnd { count } => {
                if count != l.state_lines {
                    l.state_in = None;
                    return Err(BadField("count"));
                }
                let s = l.state_in.take().expect("present");
                self.install(now, s);
            }
            _ => return Err(BadField("part")),
        }
        Ok(())
    }

    /// The collector installs its own copy of the state, at a time later
    /// than it built it, once the shell wrote the other leaders' copies or
    /// they waited for [`own_state_hold`].
    pub(crate) fn install_own_state(&mut self, now: Now) {
        let hold = own_state_hold(&self.cluster.cfg);
        let backlogged = self.cluster.state_backlogged();
        let h = &mut self.cluster.handover;
        if h.own_state.as_ref().is_none_or(|(at, _)| now.mono <= *at) {
            return;
        }
        if backlogged && now.mono < *h.own_state_held.get_or_insert(now.mono) + hold {
            return;
        }
        h.own_state_held = None;
        let (_, s) = self.cluster.handover.own_state.take().expect("present");
        let Some(l) = self.cluster.leader.table.as_mut() else {
            return;
        };
        if !l.ready {
            l.state_in = None;
            self.install(now, s);
        }
    }

    /// After the state is installed: the tickets of this agent's own
    /// requests on objects another leader owns that it released since it
    /// reported them. It dropped its vote on each as it released it, and
    /// their owner, told by its `UNLOCK`, sends it no `DROPTICKET`
    /// (`home_drop`): kept, a vote nobody ends would refuse every other
    /// request on the name until the epoch ends.
    fn drop_released_own(&mut self) {
        let me = self.cluster.me.clone();
        let Some(l) = self.cluster.leader.table.as_ref() else {
            return;
        };
        let gone: Vec<(ObjectName, u64)> = (l.of_home_after(&me, None))
            .filter(|(req, name)| {
                crate::vocab::split_var_object(name).is_none()
                    && self.owner_of(name).as_ref() != Some(&me)
                    && !self.has_request(name, *req)
            })
            .map(|(req, name)| (name.clone(), req))
            .collect();
        let l = self.cluster.leader.table.as_mut().expect("leader");
        for (name, req) in gone {
            l.remove(&name, &me, req);
        }
    }

    /// Starts acting as a leader of the epoch from its state.
    fn install(&mut self, now: Now, s: StateIn) {
        let leaders = self.cluster.epoch.leaders.len();
        let me = self.cluster.me.clone();
        let l = self.cluster.leader.table.as_mut().expect("leader");
        let base = s.base;
        let homes = l.install(s, leaders, &me, now.mono);
        self.drop_released_own();
        let took = now.mono.saturating_since(self.cluster.epoch.since);
        self.metrics.handover.observe(took);
        for home in homes {
            let at = self
                .cluster
                .peers
                .heard
                .get(&home)
                .map_or(now.mono, |h| (*h).max(now.mono));
            self.cluster.peers.heard.insert(home, at);
        }
        let l = self.cluster.leader.table.as_mut().expect("leader");
        log::info!(
            "epoch {}: leading with {} held locks",
            self.cluster.epoch.number,
            l.tickets
        );
        let late = std::mem::take(&mut l.late_early);
        for (home, tickets) in late {
            self.weigh_late(now, &home, tickets);
        }
        self.raise_floor(base.saturating_sub(1));
        let early = std::mem::take(&mut self.cluster.leader.early);
        for (from, m) in early {
            let cmd = m.command();
            if let Err(BadField(what)) = self.on_lock_message(now, &from, m) {
                log::warn!("{cmd} dropped: bad or missing {what}");
            }
        }
        // A home whose link came up in this epoch before this state
        // arrived was asked nothing about its tickets then (a table not
        // ready says nothing): ask now, or a ticket the home gave up
        // meanwhile (it revoked, its client left) would block its name for
        // as long as the home is heard (L5, seed 10546).
        let ask = std::mem::take(&mut self.cluster.leader.ask_when_ready);
        for home in ask {
            if self.cluster.peers.link_of(&home).is_some() {
                self.resend_grants(now, &home);
            }
        }
    }
}
