//! The transaction steps of the cluster model (docs/cluster.md
//! "Transactions"), with the workload `Workload::Tx`: session 0 on member
//! `homes[0]` runs `assert set X; assert set Y`, session 1 on `homes[1]`
//! runs `set X; exists Y`, in one namespace whose owner is the lock
//! model's owner.
//!
//! Holdings are tickets of the leaders' tables (ticket slots: 0 = session
//! 0 on X, 1 = session 0 on Y, 2 = session 1 on X), voted for, reported,
//! handed over, revoked and dropped exactly as the lock model's tickets.
//! What is new is who decides: the owner runs a transaction against the
//! holdings its table has, asks for the votes of its new holdings, sends
//! `TXDONE` once each has a majority, and keeps the variables busy until
//! `TXACK`; the home applies `TXDONE` (the commit point) while in contact
//! and in the epoch it was sent in, and gives a transaction up when the
//! epoch changes or when `TX_WAIT` passes (any moment while it waits).
//!
//! Abstracted: a home gives up on an epoch change without telling the new
//! owner (`TXACK ok=false` of the old epoch would be ignored there; the new
//! epoch's state has only what the home reported, and `Have` drops the
//! rest); no session releases or renews what it set, and none runs a
//! second transaction; the owner keeps no record of a read-only or failed
//! transaction (a re-sent one runs again, as a new one would).
//!
//! Kept as the code does it, because the model showed it matters: a home
//! revokes a session's holdings at home only (the owner drops them all in
//! one step, on the home's next `Have`), the owner drops a silent home's
//! holdings together, and it runs queued transactions at its tick
//! (`Action::TxRun`), never between two tickets of one message. With one
//! `UNLOCK` per variable and a run right after each, session 1 saw X gone
//! and Y still held after session 0's home revoked.

use stateright::{Model, Property};

use crate::state::{Delay, InFlight, Msg, N, Plant, Req, State, Ticket};
use crate::steps::{Cluster, bit, ones};

/// The safety properties of the transaction workload, in the order of
/// [`crate::TX_SAFETY`].
pub fn properties() -> Vec<Property<Cluster>> {
    vec![
        // Session 1 sees X held by session 0 exactly when `set X` is
        // false, and Y held by it exactly when `exists Y` is true.
        Property::always("tx atomicity", |_, s: &State| {
            s.t2_results
                .is_none_or(|[set_x, exists_y]| set_x != exists_y)
        }),
        // S1 for variables: both sessions hold X at their homes.
        Property::always("tx durability", |_, s: &State| {
            !s.clients.iter().all(|r| matches!(r, Req::Held { .. }))
        }),
        Property::always("tx no dirty read", |_, s: &State| {
            let saw = s
                .t2_results
                .is_some_and(|[set_x, exists_y]| !set_x || exists_y);
            !(saw && !s.t1_applied && s.clients[0].is_final())
        }),
        Property::always("S6 majority of one epoch", |_, s: &State| !s.s6_broken),
        Property::always("no deadlock", |m: &Cluster, s: &State| {
            let mut acts = Vec::new();
            m.actions(s, &mut acts);
            m.finished(s) || acts.iter().any(|a| !a.is_fault())
        }),
        Property::sometimes("session 0's transaction is applied", |_, s: &State| {
            s.t1_applied
        }),
        Property::sometimes("session 1 sees X and Y set", |_, s: &State| {
            s.t2_results == Some([false, true])
        }),
        Property::sometimes("session 1 sets X", |_, s: &State| {
            s.t2_results == Some([true, false])
        }),
        Property::sometimes("an epoch starts after a crash", |_, s: &State| {
            s.epochs.len() > 1
        }),
    ]
}

/// Session 0 sets X and Y; session 1 sets X and reads Y.
const T1: u8 = 0;
const T2: u8 = 1;
const X0: u8 = 0;
const Y0: u8 = 1;
const X1: u8 = 2;

impl Cluster {
    /// TRANSACTION at the owner: queued (also while not ready), or, for
    /// one in flight whose `TXDONE` went and found no home waiting in
    /// contact, answered again.
    pub(crate) fn owner_tx(&self, s: &mut State, slot: u8, c: u8) {
        let e = s.members[usize::from(slot)].epoch;
        let m = &mut s.members[usize::from(slot)];
        if let Some(f) = m.in_flight.as_ref().filter(|f| f.s == c) {
            if f.done {
                let msg = Msg::TxDone {
                    e,
                    s: c,
                    fence: f.fence,
                    results: f.results,
                };
                s.send(slot, self.home_of(c), msg);
            }
            return;
        }
        if !m.tx_queue.contains(&c) {
            m.tx_queue.push(c);
        }
        self.tx_run(s, slot);
    }

    /// Whether the owner's first queued transaction must wait: the owner
    /// is not ready or does not act, a lock-delay runs, a variable it
    /// names is busy (both transactions name X and Y, and each in flight
    /// changes X), or has a ticket inherited from a home not counted yet.
    pub(crate) fn tx_blocked(&self, s: &State, slot: u8) -> bool {
        let m = &s.members[usize::from(slot)];
        if !m.ready || !s.acting(slot) {
            return true;
        }
        if matches!(s.delays[usize::from(m.epoch) - 1], Delay::Running { .. }) {
            return true;
        }
        let busy = m
            .in_flight
            .as_ref()
            .is_some_and(|f| !(f.done && self.config.plant == Plant::TxFreeAtDone));
        let uncounted = self.config.slots().any(|k| {
            let home = crate::state::Id {
                slot: self.home_of(self.config.ticket_session(k)),
                incarnation: 0,
            };
            matches!(m.table.tickets[usize::from(k)], Ticket::Held { .. })
                && !m.reported.contains(&home)
        });
        busy || (uncounted && self.config.plant != Plant::TxIgnoreUncounted)
    }

    /// Whether `tx_run` would run a transaction now (`Action::TxRun`: the
    /// owner's retry once what blocked it changed).
    pub(crate) fn tx_runnable(&self, s: &State, slot: u8) -> bool {
        self.is_owner(s, slot)
            && !s.members[usize::from(slot)].tx_queue.is_empty()
            && !self.tx_blocked(s, slot)
    }

    /// Runs the queued transactions, in order, while none is blocked.
    pub(crate) fn tx_run(&self, s: &mut State, slot: u8) {
        while self.tx_runnable(s, slot) {
            let e = s.members[usize::from(slot)].epoch;
            let c = s.members[usize::from(slot)].tx_queue.remove(0);
            let tickets = s.members[usize::from(slot)].table.tickets;
            let holds = |k: u8| matches!(tickets[usize::from(k)], Ticket::Held { .. });
            let (results, sets) = if c == T1 {
                if holds(X1) {
                    // `assert set X` is false: nothing changes.
                    s.send(slot, self.home_of(c), Msg::TxFailed { e, s: c });
                    continue;
                }
                let sets = [X0, Y0]
                    .into_iter()
                    .filter(|&k| !holds(k))
                    .fold(0, |a, k| a | bit(k));
                ([true, true], sets)
            } else {
                let set_x = !holds(X0);
                let exists_y = holds(Y0);
                let sets = if set_x && !holds(X1) { bit(X1) } else { 0 };
                ([set_x, exists_y], sets)
            };
            let m = &mut s.members[usize::from(slot)];
            let t = &mut m.table;
            let fence = (t.last_fence + 1).max(t.base);
            t.last_fence = fence;
            m.max_fence = m.max_fence.max(fence);
            if sets == 0 {
                let msg = Msg::TxDone {
                    e,
                    s: c,
                    fence,
                    results,
                };
                s.send(slot, self.home_of(c), msg);
                continue;
            }
            for k in self.config.slots().filter(|&k| sets & bit(k) != 0) {
                m.table.tickets[usize::from(k)] = Ticket::Asking {
                    fence,
                    voters: bit(slot),
                    clean: bit(slot),
                };
            }
            m.in_flight = Some(InFlight {
                s: c,
                fence,
                results,
                sets,
                done: false,
            });
            for f in self.followers(s, slot) {
                for k in self.config.slots().filter(|&k| sets & bit(k) != 0) {
                    s.send(slot, f, Msg::AddTicket { e, c: k });
                    s.send(slot, f, Msg::Activate { e, c: k, fence });
                }
            }
        }
    }

    /// LOCKACTIVATED for a new holding (of the fence it is asked with).
    pub(crate) fn tx_activated(
        &self,
        s: &mut State,
        slot: u8,
        k: u8,
        ok: bool,
        clean_vote: bool,
        from: crate::state::Id,
    ) {
        let t = &mut s.members[usize::from(slot)].table;
        let Ticket::Asking {
            fence,
            voters,
            clean,
        } = t.tickets[usize::from(k)]
        else {
            return;
        };
        if ok {
            let clean = if clean_vote {
                clean | bit(from.slot)
            } else {
                clean
            };
            t.tickets[usize::from(k)] = Ticket::Asking {
                fence,
                voters: voters | bit(from.slot),
                clean,
            };
            self.tx_try_done(s, slot);
        } else {
            // Nothing was shown yet: back to the head of the queue, to
            // run again with a new fence.
            let Some(f) = self.tx_abort(s, slot) else {
                return;
            };
            s.members[usize::from(slot)].tx_queue.insert(0, f.s);
            self.tx_run(s, slot);
        }
    }

    /// Whether `TXDONE` may go: every new holding has a majority of votes
    /// (the planted bug: the first one), the owner acts, no lock-delay.
    pub(crate) fn tx_may_finish(&self, s: &State, slot: u8) -> bool {
        let m = &s.members[usize::from(slot)];
        let Some(f) = m.in_flight.as_ref().filter(|f| !f.done) else {
            return false;
        };
        let voted = |k: u8| {
            matches!(m.table.tickets[usize::from(k)],
                Ticket::Asking { voters, .. } if ones(voters) > N / 2)
        };
        let mut sets = self.config.slots().filter(|&k| f.sets & bit(k) != 0);
        let enough = if self.config.plant == Plant::TxDoneFirstMajority {
            sets.any(voted)
        } else {
            sets.all(voted)
        };
        let delayed = matches!(s.delays[usize::from(m.epoch) - 1], Delay::Running { .. });
        enough && s.acting(slot) && !delayed
    }

    pub(crate) fn tx_try_done(&self, s: &mut State, slot: u8) {
        if !self.tx_may_finish(s, slot) {
            return;
        }
        let e = s.members[usize::from(slot)].epoch;
        let m = &mut s.members[usize::from(slot)];
        let f = m.in_flight.as_mut().expect("in flight");
        f.done = true;
        let f = f.clone();
        for k in self.config.slots().filter(|&k| f.sets & bit(k) != 0) {
            // S6: every new holding the answer shows is backed by a
            // majority of clean votes of this epoch.
            if let Ticket::Asking { clean, .. } = m.table.tickets[usize::from(k)] {
                if ones(clean) <= N / 2 {
                    s.s6_broken = true;
                }
            }
            if self.config.plant == Plant::TxFreeAtDone {
                m.table.tickets[usize::from(k)] = Ticket::Held { fence: f.fence };
            }
        }
        let msg = Msg::TxDone {
            e,
            s: f.s,
            fence: f.fence,
            results: f.results,
        };
        s.send(slot, self.home_of(f.s), msg);
    }

    /// Takes back the transaction in flight: its new holdings dropped
    /// (DROPTICKET), its variables free.
    pub(crate) fn tx_abort(&self, s: &mut State, slot: u8) -> Option<InFlight> {
        let e = s.members[usize::from(slot)].epoch;
        let m = &mut s.members[usize::from(slot)];
        let f = m.in_flight.take()?;
        for k in self.config.slots().filter(|&k| f.sets & bit(k) != 0) {
            m.table.tickets[usize::from(k)] = Ticket::None;
        }
        for to in self.followers(s, slot) {
            for k in self.config.slots().filter(|&k| f.sets & bit(k) != 0) {
                s.send(slot, to, Msg::Drop { e, c: k });
            }
        }
        Some(f)
    }

    /// TXACK: applied (the new holdings are held, the variables free), or
    /// given up (undone).
    pub(crate) fn owner_tx_ack(&self, s: &mut State, slot: u8, c: u8, ok: bool) {
        let m = &mut s.members[usize::from(slot)];
        match m.in_flight.clone() {
            Some(f) if f.s == c && ok => {
                for k in self.config.slots().filter(|&k| f.sets & bit(k) != 0) {
                    m.table.tickets[usize::from(k)] = Ticket::Held { fence: f.fence };
                }
                m.in_flight = None;
            }
            Some(f) if f.s == c => {
                self.tx_abort(s, slot);
            }
            _ if !ok => m.tx_queue.retain(|&q| q != c),
            _ => {}
        }
        self.tx_run(s, slot);
    }

    /// The owner no longer hears from the session's (crashed) home: its
    /// transaction, queued or in flight, goes with its tickets.
    pub(crate) fn tx_forget(&self, s: &mut State, slot: u8, c: u8) {
        let m = &mut s.members[usize::from(slot)];
        m.tx_queue.retain(|&q| q != c);
        if m.in_flight.as_ref().is_some_and(|f| f.s == c) {
            self.tx_abort(s, slot);
        }
        self.tx_run(s, slot);
    }

    /// TXDONE at the home: applied and answered while the session waits
    /// and the home is in contact (else left for the owner's next
    /// answer); a second copy of one applied is acknowledged, one given
    /// up is refused.
    pub(crate) fn home_tx_done(
        &self,
        s: &mut State,
        slot: u8,
        e: u8,
        c: u8,
        fence: u8,
        results: [bool; 2],
    ) {
        if self.home_of(c) != slot || s.members[usize::from(slot)].id.incarnation != 0 {
            return;
        }
        let owner = s.owner(&self.config, e).slot;
        let apply = match s.clients[usize::from(c)] {
            Req::Waiting => true,
            // The planted bug: the answer of an older epoch is applied
            // after the home gave the transaction up.
            Req::Failed => {
                self.config.plant == Plant::TxApplyOldEpoch
                    && e < s.members[usize::from(slot)].epoch
            }
            Req::Dead => return,
            _ => false,
        };
        if !apply {
            let ok = matches!(s.clients[usize::from(c)], Req::Held { .. } | Req::Done);
            return s.send(slot, owner, Msg::TxAck { e, s: c, ok });
        }
        if !s.in_contact(&self.config, slot) {
            return;
        }
        let holds = c == T1 || results[0];
        s.clients[usize::from(c)] = if holds {
            Req::Held { fence }
        } else {
            Req::Done
        };
        if c == T1 {
            s.t1_applied = true;
        } else if c == T2 {
            s.t2_results = Some(results);
        }
        let m = &mut s.members[usize::from(slot)];
        m.max_fence = m.max_fence.max(fence);
        s.send(slot, owner, Msg::TxAck { e, s: c, ok: true });
    }

    /// Whether the session's waiting transaction has no copy, no answer
    /// and no trace at the owner but an answer that found the home out of
    /// contact: only then does the home's re-send timer matter.
    pub(crate) fn tx_lost(&self, s: &State, c: u8, e: u8, owner: u8) -> bool {
        let h = self.home_of(c);
        let om = &s.members[usize::from(owner)];
        let in_flight = s.in_flight(h, owner, &Msg::Tx { e, s: c })
            || s.links[usize::from(owner)][usize::from(h)].iter().any(|m| {
                matches!(m, Msg::TxDone { e: de, s: dc, .. } | Msg::TxFailed { e: de, s: dc }
                    if *de == e && *dc == c)
            });
        let working = om.epoch == e
            && (om.tx_queue.contains(&c)
                || om.in_flight.as_ref().is_some_and(|f| f.s == c && !f.done));
        !in_flight && !working
    }
}
