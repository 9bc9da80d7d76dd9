//! What a client is told without asking again: the place in line of a
//! waiting `LOCK …;progress=true` (`LOCKWAITING`), and the readiness of
//! the agent, pushed to the connections that sent `LOCKSTATUS` (`NOLOCK`,
//! `LOCKREADY`, as the original snaplock broadcast them). snaplock(7)
//! says what the client sees; docs/cluster.md "Waiting progress" how a
//! home learns the place its owner gives a request.
//!
//! Cost: both are looked at once at the end of each input and timeout
//! ([`Core::after_input`]). With nobody watching, that is two emptiness
//! checks. With watchers, readiness is [`Core::not_ready`]: a look at the
//! epoch's leaders (at most three), no allocation; the places are
//! computed only for the objects whose queue (or owner's word) changed,
//! in one walk of each such object's tickets, and a client is told only
//! when its place or reason changed (the reasons' changes with time alone
//! are looked for at each cluster tick, and at the end of a lock-delay,
//! which [`Core::poll_timeout`] asks to be woken for).

use std::collections::{BTreeMap, BTreeSet};

use super::Core;
use super::cluster::NotReady;
use crate::cluster::Id;
use crate::cluster::msg::{BadField, TicketAt};
use crate::time::{Now, Time};
use crate::vocab::{ClientId, ObjectName, TicketId};
use crate::wire::Message;

/// A waiting ticket that asked for progress.
#[derive(Debug)]
struct Watch {
    object: ObjectName,
    /// Its place as its owner leader last said, and in which epoch.
    owner_said: Option<(u64, u64)>,
    /// What its client was last told: the place and the reason.
    told: Option<(u64, Option<&'static str>)>,
}

/// The watched tickets and the `LOCKSTATUS` connections.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    tickets: BTreeMap<TicketId, Watch>,
    /// The objects of watched tickets, with how many.
    objects: BTreeMap<ObjectName, usize>,
    /// Objects whose watched tickets' places may have changed.
    dirty: BTreeSet<ObjectName>,
    /// The reason nothing could be granted, at the last look.
    reason: Option<&'static str>,
    /// Connections that sent `LOCKSTATUS`, with the readiness they were
    /// last told.
    watchers: BTreeMap<ClientId, bool>,
    /// The readiness at the last look.
    ready: bool,
}

impl Core {
    /// Ticket `id` on `name`, just queued, asked for progress.
    pub(super) fn progress_watch(&mut self, name: &ObjectName, id: TicketId) {
        let p = &mut self.progress;
        let watch = Watch {
            object: name.clone(),
            owner_said: None,
            told: None,
        };
        if p.tickets.insert(id, watch).is_none() {
            *p.objects.entry(name.clone()).or_default() += 1;
        }
        p.dirty.insert(name.clone());
    }

    /// Whether ticket `id` asked for progress (the owner is asked to tell).
    pub(crate) fn progress_asked(&self, id: TicketId) -> bool {
        self.progress.tickets.contains_key(&id)
    }

    /// Ticket `id` of `name` left the line (granted, failed, cancelled):
    /// no more `LOCKWAITING` about it; the others of `name` may move up.
    pub(crate) fn progress_left(&mut self, name: &ObjectName, id: TicketId) {
        let p = &mut self.progress;
        if p.objects.is_empty() {
            return;
        }
        if p.tickets.remove(&id).is_some() {
            if let Some(n) = p.objects.get_mut(name) {
                *n -= 1;
                if *n == 0 {
                    p.objects.remove(name);
                }
            }
        }
        if p.objects.contains_key(name) {
            p.dirty.insert(name.clone());
        }
    }

    /// `client` sent `LOCKSTATUS` and was answered `ready`: it is told
    /// every change from now on, until it closes.
    pub(super) fn status_watch(&mut self, client: ClientId, ready: bool) {
        if self.progress.watchers.is_empty() {
            self.progress.ready = ready;
        }
        self.progress.watchers.insert(client, ready);
    }

    /// `client` closed.
    pub(super) fn status_unwatch(&mut self, client: ClientId) {
        self.progress.watchers.remove(&client);
    }

    /// Every cluster tick: reasons that change with time alone (an owner
    /// that stopped acting) are looked for.
    pub(crate) fn progress_tick(&mut self) {
        let p = &mut self.progress;
        if !p.objects.is_empty() {
            p.dirty.extend(p.objects.keys().cloned());
        }
    }

    /// When a client watching must be told that the lock-delay ended.
    pub(super) fn progress_deadline(&self) -> Option<Time> {
        let p = &self.progress;
        if p.watchers.is_empty() && p.tickets.is_empty() {
            return None;
        }
        let left = self.lock_delay_left();
        (!left.is_zero()).then(|| self.last_now + left)
    }

    /// `LOCKWAITING` from `from`, the owner of the object of this agent's
    /// request `at`: its place in the owner's queue.
    pub(crate) fn home_waiting(
        &mut self,
        from: &Id,
        at: TicketAt,
        position: u64,
    ) -> Result<(), BadField> {
        if *at.home != *self.cluster.me {
            return Err(BadField("home"));
        }
        if self
            .cluster
            .owner_index_of(&at.object)
            .map(|i| &self.cluster.epoch.leaders[i])
            != Some(from)
        {
            return Ok(()); // not (or no longer) its owner
        }
        let epoch = self.cluster.epoch.number;
        let p = &mut self.progress;
        if let Some(w) = p.tickets.get_mut(&TicketId(at.req)) {
            if *w.object == *at.object {
                w.owner_said = Some((epoch, position));
                p.dirty.insert(w.object.clone());
            }
        }
        Ok(())
    }

    /// After each input and timeout: pushes the readiness and the places
    /// that changed.
    pub(super) fn after_input(&mut self, now: Now) {
        if self.authority.is_cluster() {
            self.owner_progress_flush();
        }
        let p = &self.progress;
        if p.watchers.is_empty() && p.tickets.is_empty() {
            return;
        }
        let why = self.not_ready(None);
        let reason = why.map(|w| w.reason());
        if reason != self.progress.reason {
            self.progress.reason = reason;
            self.progress_tick();
        }
        self.push_readiness(why.is_none());
        self.tell_places(now);
    }

    /// `NOLOCK` or `LOCKREADY` to each `LOCKSTATUS` connection that was
    /// last told otherwise.
    pub(super) fn push_readiness(&mut self, ready: bool) {
        if ready == self.progress.ready {
            return;
        }
        self.progress.ready = ready;
        let status = if ready { "LOCKREADY" } else { "NOLOCK" };
        let mut told = Vec::new();
        for (client, last) in &mut self.progress.watchers {
            if *last != ready {
                *last = ready;
                told.push(*client);
            }
        }
        for client in told {
            self.reply(client, Message::new(status));
        }
    }

    /// `LOCKWAITING` to each watched ticket of the changed objects whose
    /// place or reason changed. Alone, the place is the local table's; in
    /// a cluster, the owner's (until the owner said, and while nothing
    /// can be granted anyway, the last one told, else the local table's,
    /// which counts this agent's requests only).
    fn tell_places(&mut self, now: Now) {
        if self.progress.dirty.is_empty() {
            return;
        }
        let epoch = self.cluster.epoch.number;
        let cluster = self.authority.is_cluster();
        let mut tell = Vec::new();
        for name in std::mem::take(&mut self.progress.dirty) {
            let Some(o) = self.table.objects.get(&name) else {
                continue;
            };
            let why = if cluster {
                self.not_ready(Some(&name))
            } else {
                None
            };
            let reason = why.map(|w| w.reason());
            let mut local = 0u64;
            for t in &o.tickets {
                if t.state.is_held() {
                    continue;
                }
                local += 1;
                let Some(w) = self.progress.tickets.get_mut(&t.id) else {
                    continue;
                };
                let owner = w.owner_said.filter(|(e, _)| *e == epoch).map(|(_, p)| p);
                let position = match (cluster, owner) {
                    (false, _) => local,
                    (true, Some(p)) => p,
                    (true, None) if why.is_some() => w.told.map_or(local, |(p, _)| p),
                    (true, None) => continue, // its owner says soon
                };
                if w.told == Some((position, reason)) {
                    continue;
                }
                w.told = Some((position, reason));
                let Some(client) = t.owner else { continue };
                let mut msg = Message::new("LOCKWAITING");
                msg.set("object_name", &name[..]);
                msg.set_u64("position", position);
                if let Some(r) = reason {
                    msg.set("reason", r);
                }
                if let Some(NotReady::LockDelay(until)) = why {
                    msg.set("until", now.wall_of(until).to_wire());
                }
                if let Some(tag) = t.tag {
                    msg.set_i64("tag", tag);
                }
                tell.push((client, msg));
            }
        }
        for (client, msg) in tell {
            self.reply(client, msg);
        }
    }
}
