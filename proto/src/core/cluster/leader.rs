//! The leaders' side of a lock (docs/cluster.md "Granting"): the owner of
//! an object sequences its tickets and asks its followers for votes (the
//! followers' side is in `follower.rs`, the table both keep in
//! `ltable.rs`).

use super::To;
use crate::cluster::Id;
use crate::cluster::config::Plant;
use crate::cluster::ltable::{LeaderState, LeaderTicket};
use crate::cluster::msg::{BadField, Lock, PeerMsg, Role, TicketAt};
use crate::cluster::votes::{self, Ballot, Tally, Widen};
use crate::core::Core;
use crate::local::ticket::{View, who_may_hold_into};
use crate::time::Now;
use crate::vocab::ObjectName;
use std::collections::BTreeSet;
use std::collections::btree_map::Entry;

/// The buffers of an owner's decision ([`Core::evaluate`]), used again.
#[derive(Debug, Default)]
pub(crate) struct Decide {
    views: Vec<View>,
    grant: Vec<usize>,
    asked: Vec<(Id, u64)>,
}

impl Core {
    /// Ticket `(home, req)` of `object`, in this epoch.
    pub(super) fn ticket_at(&self, object: &ObjectName, home: &Id, req: u64) -> TicketAt {
        TicketAt {
            epoch: self.cluster.epoch.number,
            object: object.clone(),
            home: home.clone(),
            req,
        }
    }

    /// Every leader of the epoch, as a mask (bit i = leader i).
    pub(super) fn all_leaders(&self) -> u8 {
        (1u8 << self.cluster.epoch.leaders.len()) - 1
    }

    /// The followers a new ticket of `home` goes to
    /// ([`votes::first_followers`]).
    pub(super) fn first_followers(&self, home: &str) -> u8 {
        let c = &self.cluster;
        let Some(me) = self.my_index() else {
            return self.all_leaders();
        };
        let home = c.epoch.leaders.iter().position(|l| **l == *home);
        votes::first_followers(c.epoch.leaders.len(), me, home, |i| {
            c.peers.link_of(&c.epoch.leaders[i]).is_some()
        })
    }

    pub(super) fn my_index(&self) -> Option<usize> {
        let c = &self.cluster;
        c.epoch.leaders.iter().position(|l| *l == c.me)
    }

    /// The leader that owns `object` in this epoch (none before leaders
    /// are known).
    pub(super) fn owner_of(&self, object: &ObjectName) -> Option<Id> {
        let c = &self.cluster;
        c.owner_index_of(object).map(|i| c.epoch.leaders[i].clone())
    }

    /// [`Core::owner_of`] an object's bytes, its hash not known.
    pub(super) fn owner_of_bytes(&self, object: &[u8]) -> Option<Id> {
        let c = &self.cluster;
        c.owner_index(object).map(|i| c.epoch.leaders[i].clone())
    }

    /// The lock protocol's messages ([`Role::Leader`] and [`Role::Home`]);
    /// `from` sent it.
    pub(crate) fn on_lock_message(
        &mut self,
        now: Now,
        from: &Id,
        m: PeerMsg,
    ) -> Result<(), BadField> {
        if m.epoch() != Some(self.cluster.epoch.number) {
            return Ok(()); // another epoch's: its senders re-send in ours
        }
        if m.role() == Role::Leader {
            let Some(l) = self.cluster.leader.table.as_ref() else {
                return Ok(()); // not a leader of this epoch
            };
            if !l.ready {
                if let PeerMsg::Lock(lock) = &m {
                    if lock.try_once {
                        // A try never waits for the handover to end.
                        let why = format!(
                            "the leaders are changing: {} has not installed the state of epoch {} yet",
                            self.cluster.name, self.cluster.epoch.number
                        );
                        let at = self.ticket_at(&lock.object, from, lock.req);
                        self.owner_refuse(at, "unavailable", why);
                        return Ok(());
                    }
                }
                if self.cluster.leader.early.len() < self.config.max_tickets {
                    self.cluster.leader.early.push((from.clone(), m));
                }
                return Ok(());
            }
        }
        match m {
            PeerMsg::Lock(lock) => self.owner_lock(now, from, lock),
            PeerMsg::Unlock { object, req, .. } => {
                // A transaction's new holding ends with the transaction.
                let var = crate::vocab::split_var_object(&object).is_some();
                let keep = self.cluster.cfg.plant == Plant::TxKeepClosed && var;
                if !self.tx_holds(from, req) && !keep {
                    self.note_released(from, &object, req);
                    // The home's own vote on a lock went with its release
                    // (`drop_own_vote`); on a variable, it did not.
                    let dropped = (self.home_drops(from).filter(|_| !var)).map_or(0, |i| 1 << i);
                    self.release_ticket(now, &object, from, req, dropped);
                }
                Ok(())
            }
            PeerMsg::Tx(req) => self.owner_tx(now, from, req),
            PeerMsg::TxFence {
                namespace,
                req,
                home,
                fence,
                ..
            } => self.follower_tx_fence(now, from, namespace, req, home, fence),
            PeerMsg::TxFenced {
                req,
                home,
                fence,
                ok,
                ..
            } => {
                self.owner_tx_fenced(from, &home, req, fence, ok);
                Ok(())
            }
            PeerMsg::TxAck { req, ok, .. } => {
                self.owner_tx_ack(now, from, req, ok);
                Ok(())
            }
            PeerMsg::TxDone(done) => {
                self.home_tx_done(now, from, done);
                Ok(())
            }
            PeerMsg::TxFailed {
                namespace,
                req,
                failed,
                error,
                description,
                ..
            } => {
                let why = super::tx::refusal(failed, error, description);
                self.home_tx_failed(now, from, &namespace, req, why);
                Ok(())
            }
            PeerMsg::LockActivated {
                at,
                fence,
                ok,
                other,
            } => {
                self.owner_voted(now, from, at, fence, ok, other);
                Ok(())
            }
            PeerMsg::AddTicket {
                at,
                key,
                number,
                kind,
                fence: None,
            } => self.follower_add(now, from, at, key, number, kind),
            // The ticket, then the vote on it, as if they came one after
            // the other on the link (which is how the owner sends them).
            PeerMsg::AddTicket {
                at,
                key,
                number,
                kind,
                fence: Some(fence),
            } => {
                self.follower_add(now, from, at.clone(), key, number, kind)?;
                self.follower_activate(now, from, at, fence)
            }
            PeerMsg::ActivateLock { at, fence } => self.follower_activate(now, from, at, fence),
            PeerMsg::DropTicket(at) => {
                if self.owner_of(&at.object).as_deref() == Some(&**from) {
                    if let Some(l) = self.cluster.leader.table.as_mut() {
                        l.remove(&at.object, &at.home, at.req);
                    }
                }
                Ok(())
            }
            PeerMsg::Locked { at, fence } => self.home_answer(now, from, at, Ok(fence)),
            PeerMsg::LockFailed {
                at,
                error,
                description,
            } => self.home_answer(now, from, at, Err((error, description))),
            PeerMsg::HasTicket(at) => self.home_check(from, at),
            PeerMsg::Waiting { at, position } => self.home_waiting(from, at, position),
            PeerMsg::Started(_)
            | PeerMsg::Ping { .. }
            | PeerMsg::Pong(_)
            | PeerMsg::Leaders { .. }
            | PeerMsg::Tickets { .. }
            | PeerMsg::List(_)
            | PeerMsg::Listed(_) => Ok(()),
        }
    }

    fn owner_lock(&mut self, now: Now, home: &Id, lock: Lock) -> Result<(), BadField> {
        let Lock {
            object: sent,
            req,
            key,
            kind,
            try_once,
            progress,
            ..
        } = lock;
        let object = &sent;
        if self.owner_of(object).as_ref() != Some(&self.cluster.me) {
            return Err(BadField("object_name (not owned here)"));
        }
        let max_per_object = self.config.max_tickets_per_object;
        let max_tickets = self.config.max_tickets;
        let has_ticket = self.first_followers(home);
        let l = self.cluster.leader.table.as_mut().expect("ready leader");
        // One search for what the request needs to know of its object: the
        // table's own name, the ticket if this request is sent again, how
        // many tickets it has and its last bakery number.
        let (name, resent, count, last) = match l.objects.get_key_value(object) {
            Some((k, o)) => (
                k.clone(),
                o.find(home, req),
                o.tickets.len(),
                o.tickets.iter().map(|t| t.number).max(),
            ),
            None => (sent.clone(), None, 0, None),
        };
        if resent.is_some() && progress && !try_once {
            // Sent again (every second while it waits): its place is told
            // again only if it was never told (this owner is new).
            self.owner_watch(&name, home, req);
        }
        let l = self.cluster.leader.table.as_mut().expect("ready leader");
        if let Some(pos) = resent {
            // A request sent again (after an epoch change, or a lost
            // answer): answer again what is known.
            let o = l.objects.get_mut(object).expect("found above");
            match o.tickets[pos].state {
                LeaderState::Held { fence } => {
                    let at = self.ticket_at(&name, home, req);
                    self.send(To::Agent(home), PeerMsg::Locked { at, fence });
                }
                LeaderState::Inherited { .. } => {
                    // Its home still waits: no grant stands behind it,
                    // and one of this epoch's must (S6).
                    o.tickets[pos].state = LeaderState::Waiting;
                    o.tickets[pos].try_once = try_once;
                    self.evaluate(now, &name);
                    self.refuse_if_busy(now, &name, home, req, try_once, false);
                }
                LeaderState::Waiting | LeaderState::Activating { .. } => {}
            }
            return Ok(());
        }
        if count >= max_per_object {
            let why = format!("this object already has {count} requests");
            let at = self.ticket_at(&name, home, req);
            self.owner_refuse(at, "overflow", why);
            return Ok(());
        }
        if l.tickets >= max_tickets {
            let at = self.ticket_at(&name, home, req);
            self.owner_refuse(at, "overflow", "the leaders hold their maximum".to_owned());
            return Ok(());
        }
        let number = last.map_or(1, |n| n + 1);
        l.insert(
            &name,
            LeaderTicket {
                home: home.clone(),
                req,
                key: key.as_str().into(),
                number,
                kind,
                state: LeaderState::Waiting,
                has_ticket,
                try_once,
                since: None,
            },
        );
        self.cluster
            .peers
            .heard
            .entry(home.clone())
            .or_insert(now.mono);
        let at = self.ticket_at(&name, home, req);
        let add = PeerMsg::AddTicket {
            at,
            key,
            number,
            kind,
            fence: None,
        };
        // Held until the next message this agent sends: the vote on this
        // very ticket, when it can be granted at once, goes with it.
        self.hold_add(has_ticket, add);
        if progress && !try_once {
            self.owner_watch(&name, home, req);
        }
        self.evaluate(now, &name);
        self.flush_add();
        self.refuse_if_busy(now, &name, home, req, try_once, false);
        Ok(())
    }

    fn owner_refuse(&mut self, at: TicketAt, error: &'static str, description: String) {
        let home = at.home.clone();
        let failed = PeerMsg::LockFailed {
            at,
            error,
            description,
        };
        self.send(To::Agent(&home), failed);
    }

    /// The home released (or cancelled) ticket `req`.
    pub(crate) fn owner_release(&mut self, now: Now, object: &ObjectName, home: &Id, req: u64) {
        self.release_ticket(now, object, home, req, 0);
    }

    /// [`Core::owner_release`], the followers of `dropped` (a mask of
    /// leaders) left out of the `DROPTICKET`: a home that dropped its
    /// own vote as it released (`home_drop`).
    fn release_ticket(&mut self, now: Now, object: &ObjectName, home: &Id, req: u64, dropped: u8) {
        let Some(l) = self.cluster.leader.table.as_mut() else {
            return;
        };
        let Some(name) = l.objects.get_key_value(object).map(|(k, _)| k.clone()) else {
            return;
        };
        if let Some(t) = l.remove(&name, home, req) {
            if t.has_ticket & !dropped != 0 {
                let at = self.ticket_at(&name, home, req);
                self.send(
                    To::Leaders(t.has_ticket & !dropped),
                    PeerMsg::DropTicket(at),
                );
            }
            self.evaluate(now, &name);
        }
    }

    fn next_fence(&mut self, name: &ObjectName) -> u64 {
        let plant = self.cluster.cfg.plant;
        let l = self.cluster.leader.table.as_mut().expect("ready leader");
        let o = l.objects.get_mut(name).expect("object exists");
        let fence = if plant == Plant::ReuseFence && o.last_fence > 0 {
            o.last_fence
        } else {
            // Above every fence this agent issued or saw, not only this
            // object's: an object's record goes when its last ticket does.
            (o.last_fence + 1)
                .max(l.base)
                .max(self.cluster.records.fence_floor + 1)
        };
        o.last_fence = fence;
        self.raise_floor(fence);
        fence
    }

    /// Asks for the votes of whatever [`who_may_hold`](crate::local::ticket::who_may_hold) allows now.
    pub(crate) fn evaluate(&mut self, now: Now, name: &ObjectName) {
        if self.owner_of(name).as_ref() != Some(&self.cluster.me) {
            return;
        }
        if self.my_index().is_none() {
            return;
        }
        self.owner_queue_changed(name);
        let l = self.cluster.leader.table.as_mut().expect("leader");
        if l.delay_until.is_some_and(|d| now.mono < d) {
            l.retry.insert(name.clone());
            return;
        }
        let Some(o) = l.objects.get(name) else {
            return;
        };
        let Decide {
            mut views,
            mut grant,
            mut asked,
        } = std::mem::take(&mut self.decide);
        views.clear();
        views.extend(o.tickets.iter().map(|t| View {
            kind: t.kind,
            held: t.state != LeaderState::Waiting,
        }));
        grant.clear();
        let recheck_at = who_may_hold_into(&views, o.last_shared_grant, now.mono, &mut grant);
        if recheck_at.is_some() {
            l.retry.insert(name.clone());
        }
        asked.clear();
        let mut at_once = Vec::new();
        for &pos in &grant {
            let fence = self.next_fence(name);
            let (key, all_now) = self.ask_votes(now, name, pos, fence);
            if all_now {
                at_once.push(key.clone());
            }
            asked.push(key);
        }
        for (home, req) in at_once {
            self.widen(name, &home, req, false);
        }
        for (home, req) in asked.drain(..) {
            self.try_grant(now, name, &home, req);
        }
        // Kept for the next decision (one made meanwhile, by the calls
        // above, kept its own or none).
        self.decide = Decide {
            views,
            grant,
            asked,
        };
    }

    /// Marks ticket `pos` of `name` activating with `fence` and asks the
    /// first followers for their votes (the others a `ping_interval` later,
    /// if the majority is not there by then). Returns the ticket's (home,
    /// request), and whether all must be asked at once (no room to note
    /// when to ask the others).
    pub(super) fn ask_votes(
        &mut self,
        now: Now,
        name: &ObjectName,
        pos: usize,
        fence: u64,
    ) -> ((Id, u64), bool) {
        let me = self.my_index().unwrap_or(0);
        let epoch = self.cluster.epoch.number;
        let all = self.all_leaders();
        let widen_at = now.mono + self.cluster.cfg.ping_interval;
        let max_tickets = self.config.max_tickets;
        let l = self.cluster.leader.table.as_mut().expect("leader");
        let t = &mut l.objects.get_mut(name).expect("exists").tickets[pos];
        let to = t.has_ticket | 1 << me;
        t.state = LeaderState::Activating {
            fence,
            ballot: Ballot {
                votes: 1 << me,
                refused: 0,
                asked: to,
            },
        };
        let at = TicketAt {
            epoch,
            object: name.clone(),
            home: t.home.clone(),
            req: t.req,
        };
        let key = (t.home.clone(), t.req);
        let mut at_once = false;
        if l.asking.len() < max_tickets {
            l.asking
                .push_back((widen_at, name.clone(), key.0.clone(), key.1));
        } else if to != all {
            at_once = true;
        }
        self.send(To::Leaders(to), PeerMsg::ActivateLock { at, fence });
        (key, at_once)
    }

    /// A follower's vote on the grant of `at` with `fence`.
    fn owner_voted(
        &mut self,
        now: Now,
        from: &Id,
        at: TicketAt,
        fence: u64,
        ok: bool,
        other: Option<(String, u64)>,
    ) {
        let Some(i) = self.cluster.epoch.leaders.iter().position(|l| l == from) else {
            return;
        };
        let l = self.cluster.leader.table.as_mut().expect("ready leader");
        // One search: the entry gives the table's own name and the ticket.
        let Entry::Occupied(mut entry) = l.objects.entry(at.object.clone()) else {
            return;
        };
        let name = entry.key().clone();
        let o = entry.get_mut();
        let Some(pos) = o.find(&at.home, at.req) else {
            return;
        };
        let t = &mut o.tickets[pos];
        if let LeaderState::Activating {
            fence: f,
            ballot: Ballot { votes, refused, .. },
        } = &mut t.state
        {
            // Only answers about this very grant (its fence) count (S6).
            if *f == fence {
                if ok {
                    *votes |= 1 << i;
                } else {
                    *refused |= 1 << i;
                }
            }
        }
        let home: Id = t.home.clone();
        if let Some((oh, or)) = other {
            if o.find(&oh, or).is_none() {
                let drop = self.ticket_at(&name, &Id::from(oh), or);
                self.send(To::Agent(from), PeerMsg::DropTicket(drop));
            }
        }
        self.try_grant(now, &name, &home, at.req);
        if !ok {
            // A try request refused by a follower: refused now if that
            // settles it (see `refuse_if_busy`), not left to a retry.
            let try_once = (self.cluster.leader.table.as_ref())
                .and_then(|l| l.objects.get(&name))
                .and_then(|o| o.find(&home, at.req).map(|p| o.tickets[p].try_once));
            if try_once == Some(true) {
                self.refuse_if_busy(now, &name, &home, at.req, true, true);
            }
        }
    }

    /// Grants a ticket once a majority of leaders (the same for all of its
    /// steps: each vote acknowledges the ticket's ADDTICKET too) voted for
    /// it, while this leader is acting.
    pub(super) fn try_grant(&mut self, now: Now, name: &ObjectName, home: &Id, req: u64) {
        let majority = self.cluster.leader_majority() as u32;
        let all = self.cluster.epoch.leaders.len() as u32;
        let plant = self.cluster.cfg.plant;
        let acting = self.cluster.acting(now.mono);
        // The home's own yes vote makes the majority, and it says it then
        // delivers the grant itself (`home_grant`): no `LOCKED` to send.
        let home_grants = self.home_grants(home);
        let l = self.cluster.leader.table.as_mut().expect("leader");
        let Some(o) = l.objects.get_mut(name) else {
            return;
        };
        let Some(pos) = o.find(home, req) else { return };
        let t = &mut o.tickets[pos];
        let LeaderState::Activating { fence, ballot } = t.state else {
            return;
        };
        let plant = plant == Plant::SkipSameMajority;
        match ballot.tally(all, majority, acting, plant) {
            Tally::Grant => {
                t.state = LeaderState::Held { fence };
                t.since = std::num::NonZeroU64::new(now.mono.as_micros());
                if t.kind.mode.is_shared() {
                    o.last_shared_grant = Some(now.mono);
                }
                if crate::vocab::split_var_object(name).is_some() {
                    // A transaction's new holding: the transaction says
                    // when it is done.
                    self.tx_set_voted(now, home, req);
                    return;
                }
                if home_grants.is_some_and(|h| ballot.votes & 1 << h != 0) {
                    return;
                }
                let at = self.ticket_at(name, home, req);
                self.send(To::Agent(home), PeerMsg::Locked { at, fence });
            }
            // The followers asked first answered without making the
            // majority: ask the others now.
            Tally::AskOthers => {
                self.widen(name, home, req, false);
            }
            // Refused by enough followers: ask again later, with a new fence.
            Tally::Retry if crate::vocab::split_var_object(name).is_some() => {
                self.tx_set_refused(home, req);
            }
            Tally::Retry => {
                t.state = LeaderState::Waiting;
                l.retry.insert(name.clone());
            }
            Tally::NotActing => {
                l.retry.insert(name.clone());
            }
            Tally::Pending => {}
        }
    }

    /// Every tick: drop silent homes' tickets, retry what waited.
    pub(crate) fn leader_tick(&mut self, now: Now) {
        let release_delay =
            self.cluster.cfg.stretch(self.cluster.cfg.grace) + self.cluster.cfg.ping_interval;
        let me = self.cluster.me.clone();
        let Some(l) = self.cluster.leader.table.as_ref() else {
            return;
        };
        if !l.ready {
            return;
        }
        // Homes with tickets here, and homes with transactions here only
        // (a read-only one in flight holds no ticket).
        let homes: BTreeSet<Id> = l.homes().cloned().chain(l.tx.homes()).collect();
        let silent: Vec<Id> = homes
            .iter()
            .filter(|h| **h != me)
            .filter(|h| {
                self.cluster
                    .peers
                    .heard
                    .get(*h)
                    .is_none_or(|t| *t + release_delay <= now.mono)
            })
            .cloned()
            .collect();
        let mut touched: BTreeSet<ObjectName> = BTreeSet::new();
        for home in silent {
            // Only the owner drops, and tells its followers: a follower
            // that dropped a vote on its own could leave a grant out of
            // the next epoch's state while its owner still backs it.
            let owned: Vec<(ObjectName, u64)> = self
                .cluster
                .leader
                .table
                .as_ref()
                .into_iter()
                .flat_map(|l| l.of_home_by_name(&home))
                .filter(|(name, _)| self.owner_of(name).as_ref() == Some(&me))
                .map(|(name, req)| (name.clone(), req))
                .collect();
            if !owned.is_empty() {
                log::info!(
                    "{} silent for {release_delay:?}: its {} tickets are dropped",
                    crate::cluster::Cluster::name_of(&home),
                    owned.len()
                );
            }
            for (name, req) in owned {
                let l = self.cluster.leader.table.as_mut().expect("leader");
                if let Some(t) = l.remove(&name, &home, req) {
                    let at = self.ticket_at(&name, &home, req);
                    self.send(To::Leaders(t.has_ticket), PeerMsg::DropTicket(at));
                }
                touched.insert(name);
            }
            // Its transactions after its tickets: forgetting them runs the
            // transactions queued behind them, which must find the home's
            // holdings gone (a variable it deleted, waiting only for its
            // TXACK, would refuse a later `set` that the order of fences
            // says found it free: T2).
            self.tx_forget_home(now, &home);
        }
        let l = self.cluster.leader.table.as_mut().expect("leader");
        let mut late = Vec::new();
        while l.asking.front().is_some_and(|a| a.0 <= now.mono) {
            let (_, name, home, req) = l.asking.pop_front().expect("front");
            late.push((name, home, req));
        }
        let next = now.mono + self.cluster.cfg.ping_interval;
        let max_tickets = self.config.max_tickets;
        for (name, home, req) in late {
            if self.widen(&name, &home, req, true) {
                let l = self.cluster.leader.table.as_mut().expect("leader");
                if l.asking.len() < max_tickets {
                    l.asking.push_back((next, name, home, req));
                }
            }
        }
        let l = self.cluster.leader.table.as_mut().expect("leader");
        if l.delay_until.is_some_and(|d| now.mono >= d) {
            l.delay_until = None;
            touched.extend(l.objects.keys().cloned());
        }
        touched.extend(std::mem::take(&mut l.retry));
        for name in touched {
            self.retry_object(now, &name);
        }
        self.tx_tick(now);
    }

    /// Asks the followers not asked yet for their votes on the grant of
    /// ticket `(home, req)` that is still short of a majority, with the
    /// ticket itself (ADDTICKET) first where they do not have it; `again`:
    /// once all were asked, asks again those that did not answer (a link
    /// that broke and came back lost the question; a follower answers a
    /// question twice the same). Whether the grant is still short.
    pub(super) fn widen(&mut self, name: &ObjectName, home: &Id, req: u64, again: bool) -> bool {
        let epoch = self.cluster.epoch.number;
        let all = self.all_leaders();
        let majority = self.cluster.leader_majority() as u32;
        let me = self.my_index().map_or(0, |i| 1u8 << i);
        let Some(t) = self
            .cluster
            .leader
            .table
            .as_mut()
            .and_then(|l| l.ticket_mut(name, home, req))
        else {
            return false;
        };
        let LeaderState::Activating { fence, ballot } = &mut t.state else {
            return false;
        };
        let (rest, lacks_ticket) = match ballot.widen(t.has_ticket, all, me, majority, again) {
            Widen::Enough => return false,
            Widen::NobodyLeft => return true,
            Widen::Ask { rest, lacks_ticket } => (rest, lacks_ticket),
        };
        ballot.asked |= rest;
        t.has_ticket |= rest;
        let fence = *fence;
        let at = TicketAt {
            epoch,
            object: name.clone(),
            home: home.clone(),
            req,
        };
        let add = PeerMsg::AddTicket {
            at: at.clone(),
            key: str::to_owned(&t.key),
            number: t.number,
            kind: t.kind,
            fence: None,
        };
        self.hold_add(lacks_ticket, add);
        self.send(To::Leaders(rest), PeerMsg::ActivateLock { at, fence });
        true
    }

    fn retry_object(&mut self, now: Now, name: &ObjectName) {
        let pending: Vec<(Id, u64)> = self
            .cluster
            .leader
            .table
            .as_ref()
            .and_then(|l| l.objects.get(name))
            .map(|o| {
                o.tickets
                    .iter()
                    .filter(|t| matches!(t.state, LeaderState::Activating { .. }))
                    .map(|t| (t.home.clone(), t.req))
                    .collect()
            })
            .unwrap_or_default();
        for (home, req) in pending {
            self.try_grant(now, name, &home, req);
        }
        self.evaluate(now, name);
    }
}

mod home_vote;
#[cfg(test)]
mod tests;
