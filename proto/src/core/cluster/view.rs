//! `LISTTICKETS` (snaplock(7) "Listing tickets"): the local view, and in a
//! cluster the owners' queues gathered with `LOCKLIST` (the part and its
//! bounds are in [`crate::cluster::view`]).

use super::To;
use crate::cluster::Id;
use crate::cluster::msg::{ListReq, Listed, PeerMsg};
use crate::cluster::view::{self, MAX_LISTS, Pending};
use crate::core::Core;
use crate::local::request::MAX_OBJECT_NAME;
use crate::time::Now;
use crate::vocab::{ClientId, ObjectName};
use crate::wire::Message;

/// A `TICKETLIST` that lists nothing and says why.
fn refused(error: &str, description: &str) -> Message {
    Message::new("TICKETLIST")
        .with("list", "")
        .with("error", error)
        .with("description", description)
}

impl Core {
    /// `LISTTICKETS [object_name=O][;scope=local|cluster]`.
    pub(crate) fn list_tickets(&mut self, now: Now, client: ClientId, msg: &Message) {
        let object = msg.get("object_name");
        if let Some(o) = object {
            if o.is_empty() || o.len() > MAX_OBJECT_NAME {
                let why = format!("object_name must be 1 to {MAX_OBJECT_NAME} bytes");
                return self.reply(client, refused("invalid", &why));
            }
        }
        let local = match msg.get("scope") {
            None | Some(b"cluster") => false,
            Some(b"local") => true,
            Some(_) => {
                return self.reply(client, refused("invalid", "scope is local or cluster"));
            }
        };
        if local || (!self.authority.is_cluster() && object.is_none()) {
            // The original's lines, from this agent's own table.
            let list = self.ticket_list(now, client, object);
            return self.reply(client, Message::new("TICKETLIST").with("list", list));
        }
        if !self.authority.is_cluster() {
            // Alone, this agent is the owner of every object.
            let entries = object
                .and_then(|o| self.table.objects.get_key_value(&ObjectName::new(o)))
                .map(|(n, o)| view::local_entries(n, o, &self.config.server_name, now))
                .unwrap_or_default();
            let list = view::list_text(entries, false, self.config.max_list_bytes, |n| {
                self.may_list(client, n)
            });
            return self.reply(client, Message::new("TICKETLIST").with("list", list));
        }
        let asked: Vec<Id> = match object {
            Some(o) => self.owner_of_bytes(o).into_iter().collect(),
            None => self.cluster.epoch.leaders.clone(),
        };
        if asked.is_empty() {
            let why = "no leaders are elected yet";
            return self.reply(client, refused("unavailable", why));
        }
        let views = &mut self.cluster.views;
        if views.pending.len() >= MAX_LISTS {
            let why = format!("{MAX_LISTS} lists are being gathered already; ask again");
            return self.reply(client, refused("overflow", &why));
        }
        let serial = views.next_serial;
        views.next_serial += 1;
        let c = &self.cluster;
        // A leader without a link cannot answer: it is missing at once,
        // and the client waits only for the others.
        let (waiting, missed): (Vec<Id>, Vec<Id>) = asked
            .into_iter()
            .partition(|l| *l == c.me || c.peers.link_of(l).is_some());
        let epoch = c.epoch.number;
        let pending = Pending {
            client,
            epoch,
            deadline: now.mono + c.cfg.peer_timeout,
            waiting: waiting.clone(),
            missed,
            entries: Vec::new(),
            more: false,
        };
        self.cluster.views.pending.insert(serial, pending);
        if waiting.is_empty() {
            return self.list_done(serial);
        }
        for leader in &waiting {
            let req = ListReq {
                epoch,
                serial,
                object: object.map(<[u8]>::to_vec),
            };
            self.send(To::Agent(leader), PeerMsg::List(req));
        }
    }

    /// `LOCKLIST` and `LOCKLISTED`.
    pub(crate) fn on_view_message(&mut self, now: Now, from: &Id, m: PeerMsg) {
        match m {
            PeerMsg::List(req) => {
                let epoch = self.cluster.epoch.number;
                let me = self.my_index();
                let ready = req.epoch == epoch
                    && me.is_some()
                    && (self.cluster.leader.table.as_ref()).is_some_and(|l| l.ready);
                let (entries, more) = match self.cluster.leader.table.as_ref() {
                    Some(l) if ready => {
                        let c = &self.cluster;
                        view::owner_list(l, now, req.object.as_deref(), |n| c.owner_index(n) == me)
                    }
                    _ => (Vec::new(), false),
                };
                let answer = Listed {
                    epoch: req.epoch,
                    serial: req.serial,
                    ready,
                    more,
                    entries,
                };
                self.send(To::Agent(from), PeerMsg::Listed(answer));
            }
            PeerMsg::Listed(l) => {
                let serial = l.serial;
                if self.cluster.views.answered(from, l) {
                    self.list_done(serial);
                }
            }
            _ => {}
        }
    }

    /// Answers the lists whose deadline came with what they have.
    pub(crate) fn view_tick(&mut self, now: Now) {
        for serial in self.cluster.views.due(now.mono) {
            self.list_done(serial);
        }
    }

    /// Answers list `serial`'s client: the owners' lines, and `missing=`
    /// the leaders that did not answer (silent, unreachable, or not ready
    /// leaders of the epoch).
    fn list_done(&mut self, serial: u64) {
        let Some(p) = self.cluster.views.pending.remove(&serial) else {
            return;
        };
        if !self.clients.contains_key(&p.client) {
            return; // it went away meanwhile
        }
        let list = view::list_text(p.entries, p.more, self.config.max_list_bytes, |n| {
            self.may_list(p.client, n)
        });
        let mut reply = Message::new("TICKETLIST").with("list", list);
        let missing: Vec<&str> = (p.waiting.iter().chain(&p.missed))
            .map(|l| crate::cluster::Cluster::name_of(l))
            .collect();
        if !missing.is_empty() {
            reply.set("missing", missing.join(","));
        }
        self.reply(p.client, reply);
    }
}
