//! A follower's side of a lock (docs/cluster.md "Granting"): it keeps a
//! replica of the tickets its owner sends and votes for at most one
//! conflicting grant of an object at once.

use super::To;
use crate::cluster::Id;
use crate::cluster::config::Plant;
use crate::cluster::ltable::{LeaderState, LeaderTicket};
use crate::cluster::msg::{BadField, PeerMsg, TicketAt};
use crate::core::Core;
use crate::time::Now;
use crate::vocab::{Kind, TicketId};

impl Core {
    /// The owner's new ticket `at`, for this follower's replica.
    pub(super) fn follower_add(
        &mut self,
        now: Now,
        from: &Id,
        at: TicketAt,
        key: String,
        number: u64,
        kind: Kind,
    ) -> Result<(), BadField> {
        let TicketAt {
            object, home, req, ..
        } = at;
        if self.owner_of(&object).as_deref() != Some(&**from) {
            return Err(BadField("object_name (sender is not its owner)"));
        }
        if *home == *self.cluster.me
            && crate::vocab::split_var_object(&object).is_none()
            && !self.has_request(&object, req)
        {
            // Its own request, released before this came (a question sent
            // again, or sent before the owner had its `UNLOCK`): this
            // agent dropped its vote as it released, and keeps no replica
            // that no `DROPTICKET` would end.
            return Ok(());
        }
        // The home's id once per agent, not once per ticket.
        let home: Id = self
            .cluster
            .peers
            .heard
            .get_key_value(&*home)
            .map_or(home, |(k, _)| k.clone());
        let t = LeaderTicket {
            key: key.into(),
            number,
            kind,
            state: LeaderState::Waiting,
            home: home.clone(),
            req,
            has_ticket: 0,
            try_once: false,
            since: None,
        };
        self.cluster
            .peers
            .heard
            .entry(home.clone())
            .or_insert(now.mono);
        let l = self.cluster.leader.table.as_mut().expect("ready leader");
        let name = match l.objects.get_key_value(&object) {
            Some((k, o)) => match o.find(&home, req).map(|p| &o.tickets[p]) {
                // The same ticket sent again (a question lost with a link):
                // its vote stands.
                Some(x) if x.kind == t.kind && x.key == t.key => return Ok(()),
                // Another ticket under the same request: the owner dropped
                // the one this replica has (a transaction run again after
                // its home went silent numbers its holdings the same) and
                // its DROPTICKET, sent before this on the link, was lost
                // with a link. Its vote ends as that DROPTICKET would have
                // ended it: a vote is for the ticket the owner has.
                Some(_) => {
                    let k = k.clone();
                    l.remove(&k, &home, req);
                    k
                }
                None => k.clone(),
            },
            None => object,
        };
        l.insert(&name, t);
        Ok(())
    }

    /// The owner asks for this follower's vote on the grant of `at` with
    /// `fence`.
    ///
    /// When this agent is the request's home, its yes vote is the
    /// majority's last (the owner voted when it asked; three leaders at
    /// most): it delivers the grant at once, as if its owner's `LOCKED`
    /// had come (docs/cluster.md "Granting", the home's own vote). It then
    /// answers one question one way only: the vote it cast is said again,
    /// whatever it would answer now, and a fence it refused is refused
    /// again, so its owner never gives up a fence its home delivered.
    pub(super) fn follower_activate(
        &mut self,
        now: Now,
        from: &Id,
        at: TicketAt,
        fence: u64,
    ) -> Result<(), BadField> {
        let (object, home, req) = (&at.object, &*at.home, at.req);
        if self.owner_of(object).as_deref() != Some(&**from) {
            return Err(BadField("object_name (sender is not its owner)"));
        }
        let tx = crate::vocab::split_var_object(object).is_some();
        // This agent's own request, a lock (a transaction's holding is
        // answered by the transaction), with at most three leaders.
        let own =
            (*home == *self.cluster.me && !tx && self.cluster.leader_majority() <= 2).then(|| {
                self.cluster
                    .home
                    .submitted
                    .get(&TicketId(req))
                    .map(|s| s.refused)
            });
        let acting = self.cluster.acting(now.mono);
        let plant = self.cluster.cfg.plant;
        let l = self.cluster.leader.table.as_mut().expect("ready leader");
        let delayed = l.delay_until.is_some_and(|d| now.mono < d);
        let mut ok = false;
        let mut other = None;
        if let Some(o) = l.objects.get_mut(object) {
            if let Some(pos) = o.find(home, req) {
                let compatible = plant == Plant::DoubleVote || o.may_also_hold(pos, tx);
                let again = o.tickets[pos].state == LeaderState::Held { fence };
                if own.is_some() && again {
                    ok = true; // the vote it cast, said again
                } else if own.flatten().is_some_and(|refused| fence <= refused) {
                    // refused before: refused again
                } else if acting && !delayed && compatible {
                    o.tickets[pos].state = LeaderState::Held { fence };
                    o.last_fence = o.last_fence.max(fence);
                    ok = true;
                } else if !compatible {
                    other = o
                        .tickets
                        .iter()
                        .find(|t| t.req != req && t.blocks())
                        .map(|t| (t.home.to_string(), t.req));
                }
            }
        }
        if !ok {
            if let Some(s) = (own.is_some())
                .then(|| self.cluster.home.submitted.get_mut(&TicketId(req)))
                .flatten()
            {
                s.refused = s.refused.max(fence);
            }
        }
        self.raise_floor(fence);
        // `other`: which vote stands in the way; the owner drops it if it
        // no longer knows that ticket.
        let at = TicketAt {
            epoch: self.cluster.epoch.number,
            ..at
        };
        // The home's own yes vote delivers the grant: only for a request
        // it still has sent (`submitted`), which keeps what it refused.
        let deliver = (ok && own.flatten().is_some()).then(|| at.clone());
        let vote = PeerMsg::LockActivated {
            at,
            fence,
            ok,
            other,
        };
        self.send(To::Agent(from), vote);
        match deliver {
            Some(at) => self.home_answer(now, from, at, Ok(fence)),
            None => Ok(()),
        }
    }
}
