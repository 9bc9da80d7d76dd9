//! The lock table: every object's tickets in bakery order, and their timers.
//!
//! A ticket's life (one object):
//!
//! ```text
//!             grant (who_may_hold)              lease ends
//!  Waiting ─────────────────────────▶ Held ─────────────────▶ Expired
//!     │ deadline / cancel / close       │ UNLOCK / close         │ UNLOCK / close /
//!     ▼                                 ▼                        ▼ unlock_duration ends
//!  (removed: LOCKFAILED             (removed: UNLOCKED        (removed)
//!   or UNLOCKED)                     if asked)
//! ```
//!
//! An `Expired` ticket has been told `UNLOCKED error=timedout` but still
//! holds the object for its `unlock_duration` (snaplock(7), LEASES), so the next
//! holder never starts while the previous one may still be working.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::ticket::{View, who_may_hold};
use crate::time::Time;
use crate::vocab::{ClientId, Kind, Mode, ObjectName, TicketId};

/// Where a ticket is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Queued; fails with `timedout` at `deadline`.
    Waiting {
        /// Obtention deadline.
        deadline: Time,
    },
    /// Granted; the lease ends at `lease_end`.
    Held {
        /// The fencing token of this grant.
        fence: u64,
        /// End of the lease.
        lease_end: Time,
    },
    /// The lease ended and the holder was told; still held until `release_at`.
    Expired {
        /// The fencing token of this grant.
        fence: u64,
        /// When the object is taken back.
        release_at: Time,
    },
}

impl State {
    /// When this ticket's timer fires.
    pub fn deadline(&self) -> Time {
        match *self {
            State::Waiting { deadline } => deadline,
            State::Held { lease_end, .. } => lease_end,
            State::Expired { release_at, .. } => release_at,
        }
    }

    /// Whether the ticket holds its object.
    pub fn is_held(&self) -> bool {
        !matches!(self, State::Waiting { .. })
    }
}

/// One request for an object.
#[derive(Debug, Clone)]
pub struct Ticket {
    /// Unique in this core.
    pub id: TicketId,
    /// Bakery number: later requests get larger numbers.
    pub number: u64,
    /// `<server_name>/<pid>`: who asked (shared with the connection's
    /// other tickets).
    pub key: std::sync::Arc<str>,
    /// The connection that asked; `None` once a detached holder's
    /// connection has closed.
    pub owner: Option<ClientId>,
    /// The asking connection's uid, when known.
    pub uid: Option<u32>,
    /// Echoed in every reply about this request.
    pub tag: Option<i64>,
    /// Mode, limit, policy.
    pub kind: Kind,
    /// Lease length once granted.
    pub duration: Duration,
    /// Held this much longer once the lease ends, unless UNLOCK.
    pub unlock_duration: Duration,
    /// Survives its connection.
    pub detach: bool,
    /// `owner=cgroup`: the cgroup that owns it (survives its connection
    /// once held, until that cgroup has no process left).
    pub unit: Option<u64>,
    /// `try=true`: never waits.
    pub try_once: bool,
    /// Where it is in its life.
    pub state: State,
    /// When it was asked for; once held, when it was granted (for the
    /// wait and hold times of `METRICS`, and `LISTTICKETS`'s `held since`).
    pub since: Time,
}

impl Ticket {
    /// Whether it stays held after its connection closes (`detach=true`,
    /// or `owner=cgroup`), and may then be released by the same user
    /// naming its pid.
    pub fn outlives_connection(&self) -> bool {
        self.detach || self.unit.is_some()
    }
}

/// All tickets of one object.
#[derive(Debug, Default)]
pub struct Object {
    /// In bakery order: `(number, key)` ascending.
    pub tickets: Vec<Ticket>,
    /// When a shared or counted ticket was last granted (for `policy=timed`).
    pub last_shared_grant: Option<Time>,
}

impl Object {
    /// The position of ticket `id`.
    pub fn position(&self, id: TicketId) -> Option<usize> {
        self.tickets.iter().position(|t| t.id == id)
    }

    /// The next bakery number: one more than the largest.
    pub fn next_number(&self) -> u64 {
        self.tickets.last().map_or(1, |t| t.number + 1)
    }
}

/// What a timer is for. Ticket timers carry the deadline they were armed
/// for in the set's key, so a timer whose ticket moved on does nothing.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// The ticket's [`State::deadline`] was this time when armed.
    Ticket(TicketId, ObjectName),
    /// Run [`who_may_hold`] again for this object (timed policy).
    Recheck(ObjectName),
}

/// Objects and timers.
#[derive(Debug, Default)]
pub struct Table {
    /// Every object with at least one ticket, by name.
    pub objects: BTreeMap<ObjectName, Object>,
    timers: BTreeSet<(Time, Timer)>,
    tickets: usize,
}

impl Table {
    /// Number of tickets in the table.
    pub fn ticket_count(&self) -> usize {
        self.tickets
    }

    /// The table's own copy of `name` if it is in the table (a reference
    /// shared with its timers), else `name` itself.
    pub fn intern(&self, name: &ObjectName) -> ObjectName {
        self.objects
            .get_key_value(name)
            .map_or_else(|| name.clone(), |(k, _)| k.clone())
    }

    /// Inserts `ticket` in bakery order and arms its timer.
    pub fn insert(&mut self, name: &ObjectName, ticket: Ticket) {
        self.arm(
            ticket.state.deadline(),
            Timer::Ticket(ticket.id, name.clone()),
        );
        let object = self.objects.entry(name.clone()).or_default();
        if object.tickets.capacity() == 0 {
            // Most objects only ever have one ticket: without this, the
            // first push reserves room for four (a million held locks would
            // spend some 500 MB on empty slots).
            object.tickets.reserve_exact(1);
        }
        let at = object
            .tickets
            .partition_point(|t| (t.number, &t.key) < (ticket.number, &ticket.key));
        object.tickets.insert(at, ticket);
        self.tickets += 1;
    }

    /// Removes a ticket; drops the object when it was the last one.
    pub fn remove(&mut self, name: &ObjectName, id: TicketId) -> Option<Ticket> {
        // One search: the entry, which drops an object left without tickets.
        let Entry::Occupied(mut entry) = self.objects.entry(name.clone()) else {
            return None;
        };
        let pos = entry.get().position(id)?;
        let ticket = entry.get_mut().tickets.remove(pos);
        if entry.get().tickets.is_empty() {
            entry.remove();
        }
        self.disarm(ticket.state.deadline(), &Timer::Ticket(id, name.clone()));
        self.tickets -= 1;
        Some(ticket)
    }

    /// Sets when ticket `id` of `name` started its present state.
    pub fn set_since(&mut self, name: &ObjectName, id: TicketId, since: Time) {
        let object = self.objects.get_mut(name);
        if let Some(t) = object.and_then(|o| o.tickets.iter_mut().find(|t| t.id == id)) {
            t.since = since;
        }
    }

    /// Moves a ticket to a new state, re-arming its timer.
    pub fn set_state(&mut self, name: &ObjectName, id: TicketId, state: State) {
        let Some(object) = self.objects.get_mut(name) else {
            return;
        };
        let Some(pos) = object.position(id) else {
            return;
        };
        let old = std::mem::replace(&mut object.tickets[pos].state, state);
        if old.deadline() != state.deadline() {
            let timer = Timer::Ticket(id, name.clone());
            self.disarm(old.deadline(), &timer);
            self.arm(state.deadline(), timer);
        }
    }

    /// The tickets of `name` that may be granted now, given
    /// [`who_may_hold`]; arms a recheck timer when time alone may change it.
    pub fn grantable(&mut self, name: &ObjectName, now: Time) -> Vec<TicketId> {
        let Some(object) = self.objects.get(name) else {
            return Vec::new();
        };
        let views: Vec<View> = object
            .tickets
            .iter()
            .map(|t| View {
                kind: t.kind,
                held: t.state.is_held(),
            })
            .collect();
        let decision = who_may_hold(&views, object.last_shared_grant, now);
        // A waiter whose deadline has passed is never granted, even when a
        // late shell has not run its timer yet: that timer fails it with
        // `timedout`. Leaving a ticket out of a decision grants fewer holders
        // than `who_may_hold` allowed, which keeps its invariant.
        let ids = decision
            .grant
            .iter()
            .map(|&i| &object.tickets[i])
            .filter(|t| t.state.deadline() > now)
            .map(|t| t.id)
            .collect();
        if let Some(at) = decision.recheck_at {
            self.arm(at, Timer::Recheck(name.clone()));
        }
        ids
    }

    /// Records that a shared or counted ticket of `name` was granted at `now`.
    pub fn note_shared_grant(&mut self, name: &ObjectName, now: Time) {
        if let Some(object) = self.objects.get_mut(name) {
            object.last_shared_grant = Some(now);
        }
    }

    /// INVARIANT (S1): an object has at most one exclusive holder and then no
    /// other holder; its shared and counted holders never exceed any shared
    /// holder's own limit, and some order of them gives each one at most
    /// as many holders as its own limit (the order of their grants: each
    /// saw room in its own view, and holders only left since), so never
    /// more than the largest limit among them.
    pub fn holders_are_compatible(&self, name: &ObjectName) -> bool {
        let Some(object) = self.objects.get(name) else {
            return true;
        };
        let held = object.tickets.iter().filter(|t| t.state.is_held());
        let (mut exclusive, mut room) = (0usize, usize::MAX);
        let mut limits = Vec::new();
        for t in held {
            let limit = t.kind.limit.map_or(usize::MAX, |l| l as usize);
            match t.kind.mode {
                Mode::Exclusive => exclusive += 1,
                Mode::Shared => {
                    room = room.min(limit);
                    limits.push(limit);
                }
                Mode::Counted => limits.push(limit),
            }
        }
        limits.sort_unstable();
        let ordered = (1..).zip(&limits).all(|(i, l)| i <= *l);
        (exclusive == 0 && limits.len() <= room && ordered) || (exclusive == 1 && limits.is_empty())
    }

    /// The earliest armed timer.
    pub fn next_timer(&self) -> Option<Time> {
        self.timers.first().map(|(t, _)| *t)
    }

    /// Takes the earliest timer due at `now` or before.
    pub fn pop_due(&mut self, now: Time) -> Option<(Time, Timer)> {
        if self.timers.first()?.0 <= now {
            self.timers.pop_first()
        } else {
            None
        }
    }

    fn arm(&mut self, at: Time, timer: Timer) {
        self.timers.insert((at, timer));
    }

    fn disarm(&mut self, at: Time, timer: &Timer) {
        self.timers.remove(&(at, timer.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Policy;

    fn with_holders(kinds: &[(Mode, Option<u32>)]) -> (Table, ObjectName) {
        let mut table = Table::default();
        let name = table.intern(&ObjectName::from(&b"o"[..]));
        for (i, &(mode, limit)) in kinds.iter().enumerate() {
            let ticket = Ticket {
                id: TicketId(i as u64),
                number: i as u64 + 1,
                key: format!("k/{i}").into(),
                owner: None,
                uid: None,
                tag: None,
                kind: Kind {
                    mode,
                    limit,
                    policy: Policy::Hard,
                },
                duration: Duration::from_secs(60),
                unlock_duration: Duration::ZERO,
                detach: false,
                unit: None,
                try_once: false,
                state: State::Held {
                    fence: i as u64 + 1,
                    lease_end: Time::from_micros(60_000_000),
                },
                since: Time::ZERO,
            };
            table.insert(&name, ticket);
        }
        (table, name)
    }

    fn compatible(kinds: &[(Mode, Option<u32>)]) -> bool {
        let (table, name) = with_holders(kinds);
        table.holders_are_compatible(&name)
    }

    #[test]
    fn counted_holders_are_compatible_when_some_order_fits_each_own_limit() {
        use Mode::{Counted, Exclusive, Shared};
        let c = |l| (Counted, Some(l));
        assert!(compatible(&[c(3), c(3), c(3), c(6)]), "canal's four");
        assert!(!compatible(&[c(3), c(3), c(3), c(3)]), "four at 3");
        assert!(!compatible(&[c(3), c(3), c(3), c(6), c(3)]), "a 4th at 3");
        assert!(compatible(&[c(1), (Shared, None)]), "a shared one after");
        assert!(!compatible(&[(Shared, Some(2)), c(9), c(9)]), "shared 2");
        assert!(!compatible(&[c(9), (Exclusive, None)]), "exclusive");
        assert!(compatible(&[(Exclusive, None)]));
    }
}
