//! The home's handlers: this agent's clients' requests sent to their
//! owners, the answers relayed back (the part is [`crate::cluster::home::Home`]).

use super::To;
use crate::cluster::Id;
use crate::cluster::home::{RESEND, Submitted};
use crate::cluster::msg::{BadField, Lock, PeerMsg, TicketAt};
use crate::core::Core;
use crate::local::replies;
use crate::local::table::{State, Ticket};
use crate::time::Now;
use crate::vocab::{ObjectName, Refusal, TicketId};

impl Core {
    /// Sends a waiting request of a client to its object's owner.
    pub(crate) fn home_submit(&mut self, now: Now, name: &ObjectName, id: TicketId) {
        let epoch = self.cluster.epoch.number;
        let try_once = self
            .table
            .objects
            .get(name)
            .is_some_and(|o| o.position(id).is_some_and(|p| o.tickets[p].try_once));
        // A request sent again keeps the fences it was refused.
        let refused = self
            .cluster
            .home
            .submitted
            .get(&id)
            .map_or(0, |s| s.refused);
        self.cluster.home.submitted.insert(
            id,
            Submitted {
                object: name.clone(),
                epoch,
                at: now.mono,
                try_once,
                refused,
            },
        );
        let Some(i) = self.cluster.owner_index_of(name) else {
            return; // no leaders yet: sent once there are
        };
        let owner = self.cluster.epoch.leaders[i].clone();
        let Some(o) = self.table.objects.get(name) else {
            return;
        };
        let Some(pos) = o.position(id) else { return };
        let t = &o.tickets[pos];
        let lock = Lock {
            epoch,
            object: name.clone(),
            req: id.0,
            key: str::to_owned(&t.key),
            kind: t.kind,
            try_once: t.try_once,
            progress: self.progress_asked(id),
        };
        self.send(To::Agent(&owner), PeerMsg::Lock(lock));
    }

    /// After an epoch change, and every [`RESEND`]: every waiting request
    /// goes (again) to its owner, which answers idempotently.
    pub(crate) fn resubmit_all(&mut self, now: Now) {
        let epoch = self.cluster.epoch.number;
        let due: Vec<(TicketId, ObjectName)> = self
            .cluster
            .home
            .submitted
            .iter()
            .filter(|(_, s)| s.epoch != epoch || s.at + RESEND <= now.mono)
            .map(|(id, s)| (*id, s.object.clone()))
            .collect();
        for (id, name) in due {
            self.home_submit(now, &name, id);
        }
    }

    /// A ticket left this agent's table: its owner is told.
    pub(crate) fn home_released(&mut self, name: &ObjectName, t: &Ticket) {
        self.cluster.home.submitted.remove(&t.id);
        let Some(i) = self.cluster.owner_index_of(name) else {
            return;
        };
        self.drop_own_vote(name, t.id.0);
        let owner = self.cluster.epoch.leaders[i].clone();
        let unlock = PeerMsg::Unlock {
            epoch: self.cluster.epoch.number,
            object: name.clone(),
            req: t.id.0,
        };
        self.send(To::Agent(&owner), unlock);
    }

    /// Whether a majority of acting leaders answered within `grace`.
    ///
    /// Every time it is found in contact counts for the revocation's edge
    /// (`home_tick`): a grant delivered on contact found between two ticks
    /// is revoked when contact is lost, even if no tick saw the contact.
    pub(crate) fn in_contact(&mut self, now: Now) -> bool {
        let contact = self.cluster.contact_time(now.mono);
        let grace = self.cluster.cfg.grace;
        self.cluster.home.note_contact(contact, now.mono, grace)
    }

    /// `LOCKED` (the fence) or `LOCKFAILED` (the error and why) from an
    /// owner about request `at`.
    pub(crate) fn home_answer(
        &mut self,
        now: Now,
        from: &Id,
        at: TicketAt,
        answer: Result<u64, (&'static str, String)>,
    ) -> Result<(), BadField> {
        let (object, req) = (&at.object, at.req);
        if *at.home != *self.cluster.me {
            return Err(BadField("home"));
        }
        let id = TicketId(req);
        let found = self
            .table
            .objects
            .get_key_value(object)
            .and_then(|(n, o)| o.position(id).map(|p| (n.clone(), o.tickets[p].clone())));
        let fence = match answer {
            Ok(fence) => fence,
            Err((error, description)) => {
                self.home_refused(found, error, description);
                return Ok(());
            }
        };
        let deliver = match &found {
            Some((_, t)) => match t.state {
                State::Waiting { deadline } => deadline > now.mono,
                State::Held { fence: f, .. } | State::Expired { fence: f, .. } => {
                    if f == fence {
                        return Ok(()); // said again: already delivered
                    }
                    false
                }
            },
            None => false,
        };
        if !deliver {
            // Not wanted any more (cancelled, timed out, or revoked): give
            // it back.
            self.give_back(from, at.object.clone(), req);
            return Ok(());
        }
        let grace = self.cluster.cfg.grace;
        self.regranted(object);
        if !self.in_contact(now)
            || self
                .cluster
                .object_vouched_from(object, self.last_now)
                .is_none_or(|t| now.mono >= t + grace)
        {
            if let Some((name, t)) = found.filter(|(_, t)| t.try_once) {
                // It must not wait: given back to the owner, and failed.
                let why = self.unavailable(Some(object)).unwrap_or_else(|| {
                    format!("no quorum: the owner of this object has not answered this agent as acting for {grace:?}")
                });
                self.fail_try(&name, t.id, why);
            }
            return Ok(()); // said again on the next re-send, if in contact then
        }
        let (name, t) = found.expect("deliverable");
        self.cluster.home.submitted.remove(&id);
        self.raise_floor(fence);
        self.deliver_grant(now, &name, id, fence, &t);
        Ok(())
    }

    /// `HASTICKET` from an owner whose link to this agent came back: a
    /// request this agent no longer has is given back (its `UNLOCK` may
    /// have been lost with the link).
    pub(crate) fn home_check(&mut self, from: &Id, at: TicketAt) -> Result<(), BadField> {
        if *at.home != *self.cluster.me {
            return Err(BadField("home"));
        }
        if !self.has_request(&at.object, at.req) {
            self.give_back(from, at.object, at.req);
        }
        Ok(())
    }

    /// Whether this agent's request `req` on `object` is still in its
    /// table (waiting, held or expired), not released.
    pub(crate) fn has_request(&self, object: &ObjectName, req: u64) -> bool {
        (self.table.objects.get(object)).is_some_and(|o| o.position(TicketId(req)).is_some())
    }

    /// This agent, as a follower of the owner of `object`, drops its vote
    /// on its own request `req` there, which it releases (its `UNLOCK`
    /// follows): the owner sends no `DROPTICKET` to a home that says
    /// `home_drop=1` (docs/cluster.md "Granting", the home's own vote).
    /// Its client's hold ended with the release, and the owner, which
    /// still counts the ticket until the `UNLOCK` reaches it, asks nobody
    /// to vote for another holder before. A transaction's holdings end
    /// with the transaction, and an owner's own ticket with its release.
    fn drop_own_vote(&mut self, object: &ObjectName, req: u64) {
        if crate::vocab::split_var_object(object).is_some()
            || self
                .cluster
                .owner_index_of(object)
                .and_then(|i| self.cluster.epoch.leaders.get(i))
                == Some(&self.cluster.me)
        {
            return;
        }
        let me = self.cluster.me.clone();
        if let Some(l) = self.cluster.leader.table.as_mut() {
            l.remove(object, &me, req);
        }
    }

    /// Gives request `req` on `object` back to its owner `to`: this agent
    /// no longer wants it.
    fn give_back(&mut self, to: &Id, object: ObjectName, req: u64) {
        self.drop_own_vote(&object, req);
        let unlock = PeerMsg::Unlock {
            epoch: self.cluster.epoch.number,
            object,
            req,
        };
        self.send(To::Agent(to), unlock);
    }

    /// A refusal of the owner for a request of this agent: failed, if it
    /// still waits.
    fn home_refused(
        &mut self,
        found: Option<(ObjectName, Ticket)>,
        error: &'static str,
        description: String,
    ) {
        let Some((name, t)) = found else { return };
        if matches!(t.state, State::Waiting { .. }) {
            self.take_ticket(&name, t.id);
            if let Some(owner) = t.owner {
                let why = Refusal::new(error, description);
                let reply = replies::lock_failed(&name, Some(&t.key), t.tag, &why);
                self.reply(owner, reply);
            }
        }
    }

    /// Whether a leader of this epoch answers this agent's pings but has not
    /// answered them as acting for `peer_timeout`: its state does not
    /// count this agent's report. This agent, leading, is such a leader
    /// when its own table does not count it: its late report held a lock
    /// the epoch did not know, revoked since (ordinary seed 3056: else
    /// the tickets the state inherited for this agent, which it no longer
    /// has, block their names on it for good).
    fn a_leader_does_not_count_me(&self, now: Now) -> bool {
        let c = &self.cluster;
        let timeout = c.cfg.peer_timeout;
        let not_by_me =
            (c.leader.table.as_ref()).is_some_and(|l| l.ready && !l.reporters.contains(&c.me));
        not_by_me
            || c.epoch
                .leaders
                .iter()
                .filter(|l| **l != c.me)
                .any(|l| self.cluster.answers_without_acting(l, now.mono, timeout))
    }

    /// Every tick: revoke when contact is lost (the edge), re-send what
    /// waits, report again when the report is not counted.
    pub(crate) fn home_tick(&mut self, now: Now) {
        let in_contact = self.in_contact(now);
        if self.cluster.home.contact_lost(in_contact) {
            log::warn!(
                "no answer from a majority of acting leaders for {:?}: revoking every lock of this agent's clients",
                self.cluster.cfg.grace
            );
            self.revoke_all(now);
            // Reported again, holding nothing: a report being written
            // starts over.
            self.cluster.handover.report_sent = None;
            self.cluster.handover.report_walk = None;
        }
        if in_contact {
            self.revoke_where_owner_lapsed(now);
        }
        if let Some((epoch, at)) = self.cluster.handover.report_sent {
            // Not counted (lost with a link, or late while holding locks,
            // revoked since), or a leader missed the news: report again.
            // Not when this agent leads from a state that counts it: every
            // leader installs that same state (a leader that lost it never
            // acts, and the epoch is replaced; news of a late report, which
            // a leader may miss, does not count here); nor while it collects, its
            // own report in hand. A report of a million locks costs its
            // agent a second, which it needs just then to build, install,
            // or answer the pings that bring it back in contact.
            let timeout = self.cluster.cfg.peer_timeout + self.cluster.handover.report_pause;
            let c = &self.cluster;
            let counted = c
                .leader
                .table
                .as_ref()
                .is_some_and(|l| l.ready && l.self_in_state)
                || c.handover.own_state.is_some()
                || c.handover.collect.as_ref().is_some_and(|k| !k.done);
            if epoch == self.cluster.epoch.number
                && now.mono >= at + timeout
                && !counted
                && (!in_contact || self.a_leader_does_not_count_me(now))
            {
                self.send_report(now);
            }
        }
        self.fail_stuck_tries();
        self.resubmit_all(now);
        self.home_tx_tick(now);
    }

    /// `UNLOCKED error=lost` to every holder, `LOCKFAILED
    /// error=unavailable` to every waiting request.
    fn revoke_all(&mut self, _now: Now) {
        let all: Vec<(ObjectName, TicketId)> = self
            .table
            .objects
            .iter()
            .flat_map(|(n, o)| o.tickets.iter().map(move |t| (n.clone(), t.id)))
            .collect();
        let mut told = std::collections::BTreeSet::new();
        for (name, id) in all {
            let Some(t) = self.take_ticket(&name, id) else {
                continue;
            };
            if t.state.is_held() {
                self.tell_lost(
                    &name,
                    &t,
                    "no contact with a majority of leaders",
                    &mut told,
                );
                continue;
            }
            let Some(owner) = t.owner else { continue };
            let why = Refusal::new("unavailable", "no contact with a majority of leaders");
            self.reply(
                owner,
                replies::lock_failed(&name, Some(&t.key), t.tag, &why),
            );
        }
    }
}
