//! A leader's table of one epoch (docs/cluster.md "Granting"): the
//! tickets the owner of an object sequences and its followers vote for,
//! with what the epoch's housekeeping needs (retries, questions still
//! open, tickets by home).

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::Id;
use super::msg::PeerMsg;
use super::votes::Ballot;
use crate::time::Time;
use crate::vocab::{Kind, Mode, ObjectName};

/// Where a ticket is, on a leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeaderState {
    Waiting,
    /// Owner: votes asked for this grant; bit i = leader i. `asked`: the
    /// leaders asked so far (the owner included): first only as many
    /// followers as a majority needs, all of them once one of those
    /// refuses or has not answered for a `ping_interval`.
    Activating {
        fence: u64,
        ballot: Ballot,
    },
    /// Owner: granted. Follower: voted for.
    Held {
        fence: u64,
    },
    /// From the previous epoch's state: its home may hold it, so it blocks
    /// like a held ticket, but this epoch never granted it. Should its home
    /// ask for it again (it waits after all), it waits here too.
    Inherited {
        fence: u64,
    },
}

#[derive(Clone, Debug)]
pub(crate) struct LeaderTicket {
    pub home: Id,
    pub req: u64,
    pub key: Box<str>,
    pub number: u64,
    pub kind: Kind,
    pub state: LeaderState,
    /// Owner: the leaders that have this ticket from it (its ADDTICKET, or
    /// the epoch's state); bit i = leader i. Its DROPTICKET goes to them.
    pub has_ticket: u8,
    /// Owner: a `try=true` request. Judged again after each refused vote:
    /// refused `unavailable` while the owner does not act and no home
    /// that may deliver on its own vote still has its answer out, rather
    /// than left to wait for a retry its client does not want.
    pub try_once: bool,
    /// Owner: when this epoch granted it, µs of [`Time`] (`LISTTICKETS`
    /// says since when a lock is held; 8 bytes, not 16, on every ticket
    /// of a million); `None` while waiting, and for an inherited lock,
    /// whose grant an earlier epoch made.
    pub since: Option<std::num::NonZeroU64>,
}

impl LeaderTicket {
    /// A follower's vote for it stands (or it came with the epoch's state).
    pub(crate) fn blocks(&self) -> bool {
        matches!(
            self.state,
            LeaderState::Held { .. } | LeaderState::Inherited { .. }
        )
    }

    pub fn fence(&self) -> Option<u64> {
        match self.state {
            LeaderState::Waiting => None,
            LeaderState::Activating { fence, .. }
            | LeaderState::Held { fence }
            | LeaderState::Inherited { fence } => Some(fence),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct LeaderObject {
    pub tickets: Vec<LeaderTicket>,
    pub last_shared_grant: Option<Time>,
    pub last_fence: u64,
}

impl LeaderObject {
    /// Whether a follower may vote for ticket `pos` next to the ones it voted
    /// for already: never two conflicting grants of one object at once
    /// (the rule of [`crate::local::ticket::who_may_hold`], without order).
    ///
    /// `same_session`: tickets of the same home and key do not count (a
    /// transaction that changes a session's holding of a variable with or
    /// without `dup` votes the new one while the old one is dropped).
    pub(crate) fn may_also_hold(&self, pos: usize, same_session: bool) -> bool {
        let t = &self.tickets[pos];
        // Walked again for each question, not collected: most objects
        // have a ticket or two.
        let held = || {
            self.tickets
                .iter()
                .enumerate()
                .filter(|(i, x)| *i != pos && x.blocks())
                .filter(|(_, x)| !(same_session && x.home == t.home && x.key == t.key))
                .map(|(_, x)| x)
        };
        if held().next().is_none() {
            return true;
        }
        if t.kind.mode == Mode::Exclusive || held().any(|x| x.kind.mode == Mode::Exclusive) {
            return false;
        }
        // Its own limit and every shared holder's; a counted holder's
        // limit bound only its own grant (who_may_hold).
        let limit = held()
            .filter(|x| x.kind.mode == Mode::Shared)
            .chain(std::iter::once(t))
            .filter_map(|x| x.kind.limit)
            .min()
            .map_or(u64::MAX, u64::from);
        (held().count() as u64) < limit
    }

    pub(crate) fn find(&self, home: &str, req: u64) -> Option<usize> {
        self.tickets
            .iter()
            .position(|t| t.req == req && *t.home == *home)
    }
}

/// A late report's tickets, each with whether its home holds it.
pub(crate) type LateTickets = Vec<(super::batch::ReportedTicket, bool)>;

/// This agent as a leader of the current epoch.
#[derive(Debug, Default)]
pub(crate) struct LeaderRole {
    /// Its table, while it is a leader of the current epoch.
    pub table: Option<LeaderTable>,
    /// The last table it had as a ready leader, and its epoch: kept for
    /// the report to the next collector.
    pub last_table: Option<(u64, LeaderTable)>,
    /// Messages of the current epoch that arrived before this leader was
    /// ready, replayed when it is.
    pub early: Vec<(Id, PeerMsg)>,
    /// Homes whose link came up in the current epoch before this leader
    /// was ready: they were asked nothing about their tickets then, and
    /// are once it is.
    pub ask_when_ready: BTreeSet<Id>,
    /// Owner: the homes whose link came (back) up and whose tickets are
    /// being said again, a step at a time (`Core::continue_resend`).
    pub resend: BTreeMap<Id, ResendWalk>,
}

/// Where an owner is in saying a home's tickets again after its link came
/// (back) up: a home may have a million, and a link that comes up must
/// not cost its owner a second in one call.
#[derive(Debug, Clone)]
pub(crate) struct ResendWalk {
    /// The epoch of the table walked: another epoch ends the walk.
    pub epoch: u64,
    /// The link it is said on: when that link is gone, so is what was
    /// said on it, and the next link's coming up starts again.
    pub link: crate::vocab::PeerId,
    /// The last ticket said (by request, then name), none at the start.
    pub after: Option<(u64, ObjectName)>,
    /// When the next step may come.
    pub next: Time,
}

/// Most releases [`LeaderTable::released`] keeps.
pub(crate) const RELEASED_KEPT: usize = 4096;

/// A leader's part of one epoch.
#[derive(Debug)]
pub(crate) struct LeaderTable {
    /// Installed the epoch's state: may vote and grant.
    pub ready: bool,
    pub objects: BTreeMap<ObjectName, LeaderObject>,
    pub tickets: usize,
    /// Fences of this epoch are at least this.
    pub base: u64,
    /// No grant before this (the lock-delay).
    pub delay_until: Option<Time>,
    /// Agents whose report is part of this epoch's state.
    pub reporters: BTreeSet<Id>,
    /// Objects to look at again on the next tick.
    pub retry: BTreeSet<ObjectName>,
    /// Grants asked for, with when to ask the others, or again those that
    /// did not answer, if the majority is not there by then (in that
    /// order).
    pub asking: VecDeque<(Time, ObjectName, Id, u64)>,
    /// Tickets by home, to drop a silent home's tickets: by request
    /// first, a number, so that a grant's insertion and removal compare
    /// numbers, not names (requests are unique per home but for a
    /// transaction's holdings, which the name then tells apart).
    by_home: BTreeMap<Id, BTreeSet<(u64, ObjectName)>>,
    /// The state being received from the collector, and its line count.
    pub state_in: Option<super::handover::StateIn>,
    pub state_lines: u64,
    /// Whether this agent's own report is part of the state it installed
    /// (not only counted later, by news that another leader may miss).
    pub self_in_state: bool,
    /// A late report the collector is passing on: its agent, its tickets
    /// (held or waiting) and the lines so far.
    pub late_in: Option<(Id, LateTickets, u64)>,
    /// Late reports passed on before this leader installed the state
    /// (the collector's own copy waits for a later call): weighed then.
    pub late_early: Vec<(Id, LateTickets)>,
    /// Owner: the held locks that homes not counted yet released (their
    /// own `UNLOCK`), with their fences: a late report taken before the
    /// release still lists them, and the epoch knew them (at most
    /// [`RELEASED_KEPT`]; past it a late report may wait for the next).
    pub released: BTreeSet<(Id, ObjectName, u64, u64)>,
    /// As the owner of namespaces: their transactions.
    pub tx: super::tx::TxOwner,
    /// Owner: the waiting tickets that asked for progress, by object, with
    /// the position their home was last told (0: not yet). Kept beside the
    /// objects, not in them: most objects never have one.
    pub progress: BTreeMap<ObjectName, BTreeMap<(Id, u64), u64>>,
    /// Owner: objects with such tickets whose queue changed since the
    /// positions were last told.
    pub progress_dirty: BTreeSet<ObjectName>,
}

impl LeaderTable {
    pub fn new() -> LeaderTable {
        LeaderTable {
            ready: false,
            objects: BTreeMap::new(),
            tickets: 0,
            base: 0,
            delay_until: None,
            reporters: BTreeSet::new(),
            retry: BTreeSet::new(),
            asking: VecDeque::new(),
            by_home: BTreeMap::new(),
            state_in: None,
            state_lines: 0,
            self_in_state: false,
            late_in: None,
            late_early: Vec::new(),
            released: BTreeSet::new(),
            tx: super::tx::TxOwner::default(),
            progress: BTreeMap::new(),
            progress_dirty: BTreeSet::new(),
        }
    }

    /// Takes the epoch's state `s` (docs/cluster.md "Handover") and is
    /// ready: every ticket held as inherited, known to all `leaders`, and
    /// numbered in fence order (ties in the state's order); no grant
    /// before the state's lock-delay ends, counted from `now`. Returns the
    /// homes of the tickets.
    pub fn install(
        &mut self,
        s: super::handover::StateIn,
        leaders: usize,
        me: &Id,
        now: Time,
    ) -> BTreeSet<Id> {
        // Every leader installs this state: each has every ticket.
        let all = (1u8 << leaders) - 1;
        let tickets = s.tickets;
        // Numbered in fence order (ties in the state's order), inserted in
        // the state's order (by object: the tables fill in order, which a
        // million tickets in fence order would not).
        // Sorted with the fences beside their places, read in one pass:
        // sorting places by a look at each ticket read a million tickets
        // in no order.
        let mut by_fence: Vec<(u64, usize)> = (tickets.iter().enumerate())
            .map(|(i, t)| (t.fence, i))
            .collect();
        by_fence.sort_unstable();
        let mut number = vec![0u64; tickets.len()];
        for (rank, &(_, i)) in by_fence.iter().enumerate() {
            number[i] = rank as u64 + 1;
        }
        drop(by_fence);
        let mut homes: BTreeSet<Id> = BTreeSet::new();
        let mut rows = Vec::with_capacity(tickets.len());
        let mut last_home: Option<Id> = None;
        for (t, number) in tickets.into_iter().zip(number) {
            // Most tickets have the home of the one before.
            if last_home.as_ref() != Some(&t.home) {
                if !homes.contains(&t.home) {
                    homes.insert(t.home.clone());
                }
                last_home = Some(t.home.clone());
            }
            rows.push((
                t.object,
                LeaderTicket {
                    home: t.home,
                    req: t.req,
                    key: t.key,
                    number,
                    kind: t.kind,
                    state: LeaderState::Inherited { fence: t.fence },
                    has_ticket: all,
                    try_once: false,
                    since: None,
                },
            ));
        }
        self.insert_all(rows);
        self.base = s.base;
        self.delay_until = (!s.delay.is_zero()).then(|| now + s.delay);
        self.self_in_state = s.reporters.contains(me);
        self.reporters = s.reporters;
        self.ready = true;
        homes
    }

    /// The tickets of `home` here, as (name, request), by request.
    fn of_home(&self, home: &Id) -> impl Iterator<Item = (&ObjectName, u64)> {
        (self.by_home.get(home).into_iter().flatten()).map(|(req, name)| (name, *req))
    }

    /// The tickets of `home` here after `after`, by request then name (the
    /// order in which they are kept, not sorted again).
    pub fn of_home_after<'a>(
        &'a self,
        home: &Id,
        after: Option<&(u64, ObjectName)>,
    ) -> impl Iterator<Item = (u64, &'a ObjectName)> + 'a {
        use std::ops::Bound;
        let from = after.map_or(Bound::Unbounded, |a| Bound::Excluded(a.clone()));
        (self.by_home.get(home).into_iter())
            .flat_map(move |set| set.range((from.clone(), Bound::Unbounded)))
            .map(|(req, name)| (*req, name))
    }

    /// The tickets of `home` here, by name and request: the order in which
    /// what is done to each goes out.
    pub fn of_home_by_name(&self, home: &Id) -> Vec<(&ObjectName, u64)> {
        let mut tickets: Vec<_> = self.of_home(home).collect();
        tickets.sort_unstable();
        tickets
    }

    /// The homes with tickets here.
    pub fn homes(&self) -> impl Iterator<Item = &Id> {
        self.by_home.keys()
    }

    /// Whether `home` has tickets here.
    pub fn has_home(&self, home: &Id) -> bool {
        self.by_home.contains_key(home)
    }

    pub fn insert(&mut self, name: &ObjectName, t: LeaderTicket) {
        self.by_home
            .entry(t.home.clone())
            .or_default()
            .insert((t.req, name.clone()));
        let o = self.objects.entry(name.clone()).or_default();
        if o.tickets.capacity() == 0 {
            // Most objects have one ticket: the first push would reserve
            // room for four (some 240 bytes of empty slots per held lock
            // on every leader).
            o.tickets.reserve_exact(1);
        }
        if let Some(f) = t.fence() {
            o.last_fence = o.last_fence.max(f);
        }
        let at = o
            .tickets
            .partition_point(|x| (x.number, &*x.key) < (t.number, &*t.key));
        o.tickets.insert(at, t);
        self.tickets += 1;
    }

    /// Inserts many tickets, as [`LeaderTable::insert`] does one by one; into
    /// an empty table (an epoch's state: a million held locks) by building
    /// each map in one pass, not by a million searches of growing maps.
    pub fn insert_all(&mut self, tickets: Vec<(ObjectName, LeaderTicket)>) {
        if !self.objects.is_empty() || !self.by_home.is_empty() {
            for (name, t) in tickets {
                self.insert(&name, t);
            }
            return;
        }
        let mut homes: Vec<(Id, Vec<(u64, ObjectName)>)> = Vec::new();
        let mut objects: Vec<(ObjectName, LeaderObject)> = Vec::new();
        let mut in_order = true;
        for (name, t) in tickets {
            let h = match homes.iter().position(|(h, _)| *h == t.home) {
                Some(h) => h,
                None => {
                    homes.push((t.home.clone(), Vec::new()));
                    homes.len() - 1
                }
            };
            homes[h].1.push((t.req, name.clone()));
            self.tickets += 1;
            match objects.last_mut() {
                Some((n, o)) if *n == name => o.tickets.push(t),
                last => {
                    in_order &= last.is_none_or(|(n, _)| *n < name);
                    let mut o = LeaderObject::default();
                    o.tickets.reserve_exact(1);
                    o.tickets.push(t);
                    objects.push((name, o));
                }
            }
        }
        if !in_order {
            // Stable: one object's tickets keep their order.
            objects.sort_by(|a, b| a.0.cmp(&b.0));
            let mut merged: Vec<(ObjectName, LeaderObject)> = Vec::with_capacity(objects.len());
            for (name, o) in objects {
                match merged.last_mut() {
                    Some((n, m)) if *n == name => m.tickets.extend(o.tickets),
                    _ => merged.push((name, o)),
                }
            }
            objects = merged;
        }
        for (_, o) in &mut objects {
            if o.tickets.len() > 1 {
                o.tickets
                    .sort_by(|a, b| (a.number, &*a.key).cmp(&(b.number, &*b.key)));
            }
            o.last_fence = o
                .tickets
                .iter()
                .filter_map(LeaderTicket::fence)
                .max()
                .unwrap_or(0);
        }
        self.objects = objects.into_iter().collect();
        self.by_home = homes
            .into_iter()
            .map(|(h, set)| (h, set.into_iter().collect()))
            .collect();
    }

    /// Ticket `req` of `home` on object `name`.
    pub(crate) fn ticket_mut(
        &mut self,
        name: &ObjectName,
        home: &str,
        req: u64,
    ) -> Option<&mut LeaderTicket> {
        let o = self.objects.get_mut(name)?;
        let pos = o.find(home, req)?;
        Some(&mut o.tickets[pos])
    }

    /// Ticket `req` of `home` on `name` is no longer told its position.
    pub fn forget_progress(&mut self, name: &ObjectName, home: &Id, req: u64) {
        if let Some(p) = self.progress.get_mut(name) {
            p.remove(&(home.clone(), req));
            if p.is_empty() {
                self.progress.remove(name);
            }
        }
    }

    pub fn remove(&mut self, name: &ObjectName, home: &str, req: u64) -> Option<LeaderTicket> {
        // One search: the entry gives the table's own name (a refcount,
        // not a copy) for `by_home`'s key, and drops an emptied object.
        let Entry::Occupied(mut entry) = self.objects.entry(name.clone()) else {
            return None;
        };
        let pos = entry.get().find(home, req)?;
        let t = entry.get_mut().tickets.remove(pos);
        self.tickets -= 1;
        if let Some(set) = self.by_home.get_mut(&t.home) {
            set.remove(&(req, entry.key().clone()));
            if set.is_empty() {
                self.by_home.remove(&t.home);
            }
        }
        let o = entry.get();
        if o.tickets.is_empty() && o.last_shared_grant.is_none() {
            entry.remove();
        }
        if !self.progress.is_empty() {
            self.forget_progress(name, &t.home, req);
        }
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Mode, Policy};

    fn ticket(home: &str, req: u64, number: u64) -> LeaderTicket {
        LeaderTicket {
            home: home.into(),
            req,
            key: format!("{home}/{req}").into(),
            number,
            kind: Kind {
                mode: Mode::Exclusive,
                limit: None,
                policy: Policy::Hard,
            },
            state: LeaderState::Held { fence: number },
            has_ticket: 0,
            try_once: false,
            since: None,
        }
    }

    /// A table built at once is the table built ticket by ticket, in any
    /// order of objects, with several tickets per object and several homes.
    #[test]
    fn inserting_all_at_once_builds_the_same_table() {
        let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for sorted in [true, false] {
            let mut tickets = Vec::new();
            for number in 1..=3000u64 {
                let object = next() % 1000;
                let home = ["h1", "h2", "h3"][(next() % 3) as usize];
                let name = ObjectName::from(format!("object-{object:04}").as_bytes());
                let mut t = ticket(home, number * 7 % 3001, number);
                if number % 5 == 0 {
                    t.state = LeaderState::Waiting;
                }
                tickets.push((name, t));
            }
            if sorted {
                tickets.sort_by(|a, b| a.0.cmp(&b.0));
            }
            let mut one = LeaderTable::new();
            for (name, t) in tickets.clone() {
                one.insert(&name, t);
            }
            let mut all = LeaderTable::new();
            all.insert_all(tickets);
            assert_eq!(all.tickets, one.tickets);
            assert_eq!(format!("{:?}", all.objects), format!("{:?}", one.objects));
            assert_eq!(format!("{:?}", all.by_home), format!("{:?}", one.by_home));
            for o in all.objects.values().filter(|o| o.tickets.len() == 1) {
                assert_eq!(o.tickets.capacity(), 1);
            }
        }
    }

    #[test]
    fn a_one_ticket_object_keeps_room_for_one() {
        let mut l = LeaderTable::new();
        let name = ObjectName::from(&b"one"[..]);
        l.insert(&name, ticket("h", 1, 1));
        assert_eq!(l.objects[&name].tickets.capacity(), 1);
        l.insert(&name, ticket("h", 2, 2));
        l.insert(&name, ticket("h", 3, 3));
        let o = &l.objects[&name];
        assert_eq!(
            o.tickets.iter().map(|t| t.req).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(l.remove(&name, "h", 2).map(|t| t.req), Some(2));
        assert_eq!(l.tickets, 2);
        assert_eq!(l.of_home(&Id::from("h")).count(), 2);
    }

    /// A follower votes for no grant that conflicts with one it voted for:
    /// exclusive beside anything, or shared past the smallest limit.
    #[test]
    fn a_follower_votes_for_no_conflicting_grant() {
        let shared = |req, limit| {
            let mut t = ticket("h", req, req);
            t.kind.mode = Mode::Shared;
            t.kind.limit = limit;
            t.state = LeaderState::Waiting;
            t
        };
        let held = |mut t: LeaderTicket| {
            t.state = LeaderState::Held { fence: t.number };
            t
        };
        let object = |tickets| LeaderObject {
            tickets,
            last_shared_grant: None,
            last_fence: 0,
        };
        let mut waiting = ticket("h", 2, 2);
        waiting.state = LeaderState::Waiting;
        assert!(
            object(vec![waiting.clone()]).may_also_hold(0, false),
            "alone"
        );
        assert!(
            !object(vec![ticket("h", 1, 1), waiting.clone()]).may_also_hold(1, false),
            "exclusive beside a holder"
        );
        assert!(
            !object(vec![held(shared(1, None)), waiting]).may_also_hold(1, false),
            "exclusive beside a shared holder"
        );
        let two = vec![
            held(shared(1, Some(3))),
            held(shared(2, None)),
            shared(3, None),
        ];
        assert!(
            object(two.clone()).may_also_hold(2, false),
            "third of limit 3"
        );
        let mut four = two;
        four.insert(2, held(shared(4, None)));
        assert!(
            !object(four.clone()).may_also_hold(3, false),
            "fourth of limit 3"
        );
        // A holder the state inherited blocks like one it voted for.
        four[2].state = LeaderState::Inherited { fence: 9 };
        assert!(
            !object(four).may_also_hold(3, false),
            "an inherited holder counts"
        );
        // The smallest limit of all, the asker's included, decides.
        let small = vec![held(shared(1, None)), shared(2, Some(1))];
        assert!(!object(small).may_also_hold(1, false), "its own limit of 1");
        // Counted: its own view and every shared holder's limit; not the
        // limit of a counted holder.
        let counted = |req, limit| {
            let mut t = shared(req, Some(limit));
            t.kind.mode = Mode::Counted;
            t
        };
        let three = vec![
            held(counted(1, 3)),
            held(counted(2, 3)),
            held(counted(3, 3)),
        ];
        let mut t = three.clone();
        t.push(counted(4, 3));
        assert!(!object(t).may_also_hold(3, false), "a fourth at limit 3");
        let mut t = three.clone();
        t.push(counted(4, 6));
        assert!(object(t).may_also_hold(3, false), "a fourth at limit 6");
        let mut t = three.clone();
        t.push(shared(4, Some(4)));
        assert!(
            object(t).may_also_hold(3, false),
            "a shared fourth at limit 4"
        );
        let mut t = three;
        t[0] = held(shared(1, Some(3)));
        t.push(counted(4, 6));
        assert!(
            !object(t).may_also_hold(3, false),
            "beyond a shared holder's 3"
        );
        let t = vec![held(counted(1, 6)), ticket("h", 2, 2)];
        let mut t = t;
        t[1].state = LeaderState::Waiting;
        assert!(
            !object(t).may_also_hold(1, false),
            "exclusive beside counted"
        );
    }

    #[test]
    fn an_installed_state_numbers_its_tickets_in_fence_order_and_waits_its_lock_delay() {
        use super::super::batch::ReportedTicket;
        use super::super::handover::StateIn;
        let t = |object: &str, home: &str, fence| ReportedTicket {
            object: ObjectName::from(object.as_bytes()),
            home: home.into(),
            req: fence,
            key: format!("{home}/{fence}").into(),
            fence,
            kind: Kind::EXCLUSIVE,
        };
        let s = StateIn {
            base: 1000,
            delay: std::time::Duration::from_secs(3),
            tickets: vec![t("b", "h2", 30), t("a", "h1", 10), t("c", "h1", 20)],
            reporters: ["h1".into(), "me".into()].into_iter().collect(),
        };
        let now = Time::from_micros(5_000_000);
        let mut l = LeaderTable::new();
        let homes = l.install(s, 3, &Id::from("me"), now);
        assert!(l.ready && l.self_in_state);
        assert_eq!(l.base, 1000);
        assert_eq!(l.delay_until, Some(Time::from_micros(8_000_000)));
        assert_eq!(homes.iter().map(|h| &**h).collect::<Vec<_>>(), ["h1", "h2"]);
        let of = |name: &str| &l.objects[&ObjectName::from(name)].tickets[0];
        assert_eq!((of("a").number, of("c").number, of("b").number), (1, 2, 3));
        assert_eq!(of("b").state, LeaderState::Inherited { fence: 30 });
        assert_eq!(of("b").has_ticket, 0b111, "every leader has every ticket");
        // No lock-delay: grants at once; not a reporter: not in the state.
        let s = StateIn {
            base: 1,
            ..StateIn::default()
        };
        let mut l = LeaderTable::new();
        l.install(s, 2, &Id::from("me"), now);
        assert_eq!(l.delay_until, None);
        assert!(!l.self_in_state);
    }
}
