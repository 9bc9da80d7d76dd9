//! Lock transactions in a cluster, the home's side (docs/cluster.md
//! "Transactions"): its clients' transactions sent to the owner of their
//! namespace, the answers applied to its table and relayed, given up when
//! they cannot be decided; and how a connection is told its variables
//! were revoked. The owner's side is in `tx.rs`.

use std::time::Duration;

use super::To;
use super::tx::var_kind;
use crate::cluster::Id;
use crate::cluster::config::Plant;
use crate::cluster::home::RESEND;
use crate::cluster::msg::{PeerMsg, TxDone, TxReq};
use crate::cluster::tx::{HomeTx, MAX_PER_CLIENT, TX_WAIT};
use crate::core::Core;
use crate::local::replies;
use crate::local::table::{State, Ticket};
use crate::local::tx::stmt::parse_var;
use crate::local::tx::{Transaction, TxError, TxRefusal};
use crate::time::Now;
use crate::vocab::{ClientId, ObjectName, TicketId, split_var_object, var_object};

impl Core {
    /// A client's transaction, in a cluster: sent to the owner of its
    /// namespace once the connection's earlier one is answered.
    pub(crate) fn home_tx_submit(
        &mut self,
        now: Now,
        client: ClientId,
        tx: Transaction,
        key: String,
    ) {
        let h = HomeTx {
            client,
            namespace: tx.namespace.clone(),
            tag: tx.tag,
            statements: tx
                .statements
                .iter()
                .map(|s| s.to_string().into_bytes())
                .collect(),
            duration: tx.duration,
            key,
            at: now.mono,
            sent: None,
        };
        let txs = &mut self.cluster.home.txs;
        if txs.of_client(client).is_some() {
            let waiting = txs.waiting.entry(client).or_default();
            if waiting.len() >= MAX_PER_CLIENT {
                let why = TxRefusal::new(
                    0,
                    TxError::Overflow,
                    format!("this connection has {MAX_PER_CLIENT} transactions waiting"),
                );
                return self.reply(
                    client,
                    replies::transaction_failed(&h.namespace, h.tag, &why),
                );
            }
            waiting.push_back(h);
            return;
        }
        self.home_tx_start(now, h);
    }

    fn home_tx_start(&mut self, now: Now, h: HomeTx) {
        let req = self.next_ticket;
        // The holdings it sets take the next numbers.
        self.next_ticket += 1 + crate::local::tx::MAX_STATEMENTS as u64;
        let h = HomeTx { at: now.mono, ..h };
        self.cluster.home.txs.start(req, h);
        self.home_tx_send(now, req);
    }

    /// Sends transaction `req` to the owner of its namespace, when there
    /// are leaders.
    fn home_tx_send(&mut self, now: Now, req: u64) {
        let epoch = self.cluster.epoch.number;
        let Some(h) = self.cluster.home.txs.inflight.get(&req) else {
            return;
        };
        let Some(i) = self.cluster.owner_index(&var_object(&h.namespace, b"")) else {
            return; // no leaders yet: sent once there are
        };
        let owner = self.cluster.epoch.leaders[i].clone();
        let held = self.vars_of(h.client);
        let room = (self.config.tx.per_client.saturating_sub(held)) as u64;
        let h = self
            .cluster
            .home
            .txs
            .inflight
            .get_mut(&req)
            .expect("in flight");
        h.sent = Some((epoch, now.mono));
        let msg = PeerMsg::Tx(TxReq {
            epoch,
            namespace: h.namespace.clone(),
            req,
            key: h.key.clone(),
            statements: h.statements.clone(),
            duration_us: u64::try_from(h.duration.as_micros()).unwrap_or(u64::MAX),
            room,
        });
        self.send(To::Agent(&owner), msg);
    }

    /// How many variables connection `client` holds.
    fn vars_of(&self, client: ClientId) -> usize {
        self.clients.get(&client).map_or(0, |c| {
            c.tickets
                .values()
                .filter(|n| split_var_object(n).is_some())
                .count()
        })
    }

    /// Transaction `req` is answered: the connection's next one goes.
    fn home_tx_next(&mut self, now: Now, client: ClientId) {
        let txs = &mut self.cluster.home.txs;
        let Some(q) = txs.waiting.get_mut(&client) else {
            return;
        };
        let next = q.pop_front();
        if q.is_empty() {
            txs.waiting.remove(&client);
        }
        if let Some(h) = next {
            self.home_tx_start(now, h);
        }
    }

    /// `TXDONE` from the owner: applied and answered, if this agent is in
    /// contact; else left for the owner's next answer.
    pub(super) fn home_tx_done(&mut self, now: Now, from: &Id, d: TxDone) {
        if !self.is_owner_of(from, &d.namespace) {
            return;
        }
        let Some(h) = self.cluster.home.txs.inflight.get(&d.req).cloned() else {
            // Answered already, or given up: the owner is told which, from
            // what this agent holds (the authority: whatever the owner does
            // with the answer then matches it): applied when it has every
            // holding the transaction set and none it deleted.
            let applied = d.sets.iter().all(|(r, _, _)| self.has_var(TicketId(*r)))
                && d.deletes.iter().all(|r| !self.has_var(TicketId(*r)));
            let ack = PeerMsg::TxAck {
                epoch: d.epoch,
                namespace: d.namespace,
                req: d.req,
                ok: applied,
            };
            return self.send(To::Agent(from), ack);
        };
        // What an owner may answer: holdings numbered after the request,
        // within its reserved numbers, each once, of valid variables.
        let top = d.req + crate::local::tx::MAX_STATEMENTS as u64;
        let mut reqs: Vec<u64> = d.sets.iter().map(|s| s.0).collect();
        reqs.sort_unstable();
        reqs.dedup();
        let valid = reqs.len() == d.sets.len()
            && d.sets.iter().all(|(r, _, var)| {
                (d.req + 1..=top).contains(r)
                    && parse_var(var).is_ok_and(|v| v.as_bytes() == &var[..])
            })
            && d.namespace == h.namespace
            && d.results.len() == h.statements.len();
        if !valid {
            log::error!(
                "TXDONE of request {} dropped: holdings out of its range or not variables (a bug)",
                d.req
            );
            return;
        }
        if !self.in_contact(now) {
            return;
        }
        // A holding it renews or deletes that ended meanwhile (its time ran
        // out, or it was revoked, and its owner was told): the
        // transaction ran on a state that is gone, and is given up.
        let gone = (d.renews.iter().chain(&d.deletes))
            .any(|r| self.var_of(h.client, TicketId(*r)).is_none());
        if gone {
            self.tx_withdraw(d.req);
            let why = TxRefusal::new(
                0,
                TxError::Unavailable,
                "a variable it renews or deletes ended while it was decided: nothing was changed",
            );
            self.reply(
                h.client,
                replies::transaction_failed(&h.namespace, h.tag, &why),
            );
            return self.home_tx_next(now, h.client);
        }
        self.cluster.home.txs.end(d.req);
        self.raise_floor(d.fence);
        let lease_end = now.mono + h.duration;
        for r in &d.deletes {
            self.forget_var(h.client, TicketId(*r));
        }
        for r in &d.renews {
            self.renew_var(h.client, TicketId(*r), lease_end);
        }
        let half = self.cluster.cfg.plant == Plant::TxHalfApply;
        let keep = if half {
            d.sets.len().div_ceil(2)
        } else {
            d.sets.len()
        };
        for (r, dup, var) in d.sets.iter().take(keep) {
            let name: ObjectName = var_object(&d.namespace, var).into();
            let name = self.table.intern(&name);
            let number = self.table.objects.get(&name).map_or(1, |o| o.next_number());
            let id = TicketId(*r);
            let ticket = Ticket {
                id,
                number,
                key: h.key.as_str().into(),
                owner: Some(h.client),
                uid: None,
                tag: None,
                kind: var_kind(*dup),
                duration: h.duration,
                unlock_duration: Duration::ZERO,
                detach: false,
                unit: None,
                try_once: false,
                state: State::Held {
                    fence: d.fence,
                    lease_end,
                },
                since: now.mono,
            };
            self.table.insert(&name, ticket);
            if let Some(c) = self.clients.get_mut(&h.client) {
                c.tickets.insert(id, name);
            }
        }
        let reply = replies::transaction_ok(&h.namespace, d.fence, &d.results, h.tag);
        self.reply(h.client, reply);
        let ack = PeerMsg::TxAck {
            epoch: d.epoch,
            namespace: d.namespace,
            req: d.req,
            ok: true,
        };
        self.send(To::Agent(from), ack);
        self.home_tx_next(now, h.client);
    }

    /// Whether `from` owns namespace `ns` in this epoch: only its answers
    /// count.
    fn is_owner_of(&self, from: &Id, ns: &[u8]) -> bool {
        let owner = self.cluster.owner_index(&var_object(ns, b""));
        owner.is_some_and(|i| self.cluster.epoch.leaders[i] == *from)
    }

    /// `TXFAILED` from the owner: the transaction did not run.
    pub(super) fn home_tx_failed(
        &mut self,
        now: Now,
        from: &Id,
        ns: &[u8],
        req: u64,
        why: TxRefusal,
    ) {
        if !self.is_owner_of(from, ns)
            || self
                .cluster
                .home
                .txs
                .inflight
                .get(&req)
                .is_none_or(|h| h.namespace != ns)
        {
            return;
        }
        let h = self.cluster.home.txs.end(req).expect("in flight");
        let reply = replies::transaction_failed(&h.namespace, h.tag, &why);
        self.reply(h.client, reply);
        self.home_tx_next(now, h.client);
    }

    /// Every tick: a transaction sent in an epoch that ended failed (the
    /// next epoch's state has none of it: its home never applied it); one
    /// not answered for a [`RESEND`] goes again; one not answered for
    /// [`TX_WAIT`] is given up. Each answered `unavailable` changed
    /// nothing.
    pub(super) fn home_tx_tick(&mut self, now: Now) {
        let epoch = self.cluster.epoch.number;
        let mut fail = Vec::new();
        let mut again = Vec::new();
        for (req, h) in &self.cluster.home.txs.inflight {
            match h.sent {
                Some((e, _)) if e != epoch => {
                    fail.push((*req, "the leaders changed before it was applied"))
                }
                _ if h.at + TX_WAIT <= now.mono => {
                    fail.push((*req, "no answer from the owner of its namespace in time"))
                }
                Some((_, at)) if at + RESEND > now.mono => {}
                _ => again.push(*req),
            }
        }
        for (req, why) in fail {
            let Some(h) = self.tx_withdraw(req) else {
                continue;
            };
            let why = TxRefusal::new(
                0,
                TxError::Unavailable,
                format!("{why}: nothing was changed"),
            );
            self.reply(
                h.client,
                replies::transaction_failed(&h.namespace, h.tag, &why),
            );
            self.home_tx_next(now, h.client);
        }
        for req in again {
            self.home_tx_send(now, req);
        }
    }

    /// Tells the owner this agent will not apply transaction `req`.
    fn tx_give_up(&mut self, epoch: u64, h: &HomeTx, req: u64) {
        let Some(i) = self.cluster.owner_index(&var_object(&h.namespace, b"")) else {
            return;
        };
        let owner = self.cluster.epoch.leaders[i].clone();
        let ack = PeerMsg::TxAck {
            epoch,
            namespace: h.namespace.clone(),
            req,
            ok: false,
        };
        self.send(To::Agent(&owner), ack);
    }

    /// The connection closed: its transactions are given up.
    pub(crate) fn home_tx_closed(&mut self, client: ClientId) {
        self.cluster.home.txs.waiting.remove(&client);
        if let Some(req) = self.cluster.home.txs.of_client(client) {
            self.tx_withdraw(req);
        }
    }

    /// Takes transaction `req` out of those in flight; its owner, when it
    /// was sent in this epoch, is told it will not be applied.
    fn tx_withdraw(&mut self, req: u64) -> Option<HomeTx> {
        let epoch = self.cluster.epoch.number;
        let h = self.cluster.home.txs.end(req)?;
        if h.sent.is_some_and(|s| s.0 == epoch) {
            self.tx_give_up(epoch, &h, req);
        }
        Some(h)
    }

    fn has_var(&self, id: TicketId) -> bool {
        self.clients.values().any(|c| {
            c.tickets
                .get(&id)
                .is_some_and(|n| split_var_object(n).is_some())
        })
    }

    /// Takes holding `id` of `client` out of the table without telling its
    /// owner (the owner drops it when this agent acknowledges).
    fn forget_var(&mut self, client: ClientId, id: TicketId) {
        if self.var_of(client, id).is_none() {
            return;
        }
        if let Some(name) = self
            .clients
            .get_mut(&client)
            .and_then(|c| c.tickets.remove(&id))
        {
            self.table.remove(&name, id);
        }
    }

    /// The object of `client`'s holding `id`, if it is a variable's.
    fn var_of(&self, client: ClientId, id: TicketId) -> Option<ObjectName> {
        let c = self.clients.get(&client)?;
        c.tickets
            .get(&id)
            .filter(|n| split_var_object(n).is_some())
            .cloned()
    }

    fn renew_var(&mut self, client: ClientId, id: TicketId, lease_end: crate::time::Time) {
        let Some(name) = self.var_of(client, id) else {
            return;
        };
        let fence = self.table.objects.get(&name).and_then(|o| {
            o.position(id).and_then(|p| match o.tickets[p].state {
                State::Held { fence, .. } => Some(fence),
                _ => None,
            })
        });
        if let Some(fence) = fence {
            self.table
                .set_state(&name, id, State::Held { fence, lease_end });
        }
    }
}

impl Core {
    /// Tells the holder of `t`, taken from it, that it is gone: `UNLOCKED
    /// error=lost` for a lock; for a transaction's variable, once per
    /// connection and namespace (`told`), an unsolicited
    /// `TRANSACTIONFAILED namespace=NS;failed=0;error=unavailable`
    /// without a tag (snaplock(7), TRANSACTIONS).
    pub(crate) fn tell_lost(
        &mut self,
        name: &ObjectName,
        t: &Ticket,
        why: &str,
        told: &mut std::collections::BTreeSet<(ClientId, Vec<u8>)>,
    ) {
        if split_var_object(name).is_none() {
            // Counted whether or not its holder is still connected to hear
            // it: a detached lock (or one its cgroup owns) is taken back
            // all the same.
            self.metrics.revocations += 1;
        }
        let Some(owner) = t.owner else { return };
        match split_var_object(name) {
            None => self.reply(owner, replies::unlocked(name, t.tag, Some("lost"))),
            Some((ns, _)) => {
                if told.insert((owner, ns.to_vec())) {
                    let why = TxRefusal::new(
                        0,
                        TxError::Unavailable,
                        format!(
                            "revoked: this connection's variables in this namespace are gone: {why}"
                        ),
                    );
                    // Not the outcome of a TRANSACTION (that one was
                    // counted when it ran): not counted by the metrics.
                    let reply =
                        crate::core::Reply::Message(replies::transaction_failed(ns, None, &why));
                    (self.out).push_back(crate::core::Output::Reply {
                        client: owner,
                        reply,
                    });
                }
            }
        }
    }
}
