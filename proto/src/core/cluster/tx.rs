//! Lock transactions in a cluster (docs/cluster.md "Transactions"): the
//! owner of a namespace runs them against its table, one variable at a
//! time in flight (here); the home applies what its clients' transactions
//! did and answers them (`txhome.rs`; the parts are [`crate::cluster::tx`]).
//!
//! ```text
//! home H                    owner O                         followers
//!  TRANSACTION ───────────▶ queued by namespace; run when none of its
//!                           variables is busy (in flight, or inherited
//!                           from a home not counted yet)
//!                           new holdings ── ADDTICKET, ACTIVATELOCK ─▶ vote
//!                           ◀──────────────────────── LOCKACTIVATED
//!  ◀──────────── TXDONE     every new holding has its majority
//!  apply, answer the client
//!  TXACK ok ──────────────▶ the variables are free again; deleted
//!                           holdings dropped ─── DROPTICKET ──▶
//! ```

use std::collections::VecDeque;
use std::time::Duration;

use super::To;
use crate::cluster::Id;
use crate::cluster::config::Plant;
use crate::cluster::home::RESEND;
use crate::cluster::ltable::{LeaderState, LeaderTicket};
use crate::cluster::msg::{BadField, PeerMsg, TicketAt, TxDone, TxReq};
use crate::cluster::tx::{InFlight, MAX_QUEUED, Ns, Queued};
use crate::core::Core;
use crate::local::tx::run::{Seen, run};
use crate::local::tx::stmt::parse_statement;
use crate::local::tx::{Transaction, TxError, TxRefusal, is_valid_namespace_char};
use crate::time::Now;
use crate::vocab::{Kind, Mode, ObjectName, split_var_object, var_object};

/// A `TXFAILED`'s statement, error and description, as the client gets them.
pub(super) fn refusal(failed: u64, error: &str, description: String) -> TxRefusal {
    let error = match error {
        "failed" => TxError::Failed,
        "overflow" => TxError::Overflow,
        "invalid" => TxError::Invalid,
        _ => TxError::Unavailable,
    };
    TxRefusal::new(usize::try_from(failed).unwrap_or(0), error, description)
}

pub(super) fn var_kind(dup: bool) -> Kind {
    Kind {
        mode: if dup { Mode::Shared } else { Mode::Exclusive },
        limit: None,
        policy: crate::vocab::Policy::Hard,
    }
}

/// The objects of the variables `statements` name (canonical text).
fn named_objects(ns: &[u8], tx: &Transaction) -> Vec<ObjectName> {
    let mut out: Vec<ObjectName> = tx
        .statements
        .iter()
        .map(|st| ObjectName::from(var_object(ns, st.op.var().as_bytes())))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Reads a peer's transaction back; `Err`: why it is invalid.
fn read_tx(req: &TxReq) -> Result<Transaction, TxRefusal> {
    let mut statements = Vec::with_capacity(req.statements.len());
    for (i, text) in req.statements.iter().enumerate() {
        let st = parse_statement(text)
            .map_err(|e| TxRefusal::new(i + 1, e.error, format!("s{}: {}", i + 1, e.reason)))?;
        statements.push(st);
    }
    Ok(Transaction {
        namespace: req.namespace.clone(),
        statements,
        pid: None,
        tag: None,
        duration: Duration::from_micros(req.duration_us),
    })
}

// The owner's side.
impl Core {
    /// `TRANSACTION` from `home`, to this agent as the namespace's owner.
    pub(super) fn owner_tx(&mut self, now: Now, home: &Id, req: TxReq) -> Result<(), BadField> {
        let ns = &req.namespace;
        if ns.is_empty() || ns.len() > 128 || !ns.iter().all(|&b| is_valid_namespace_char(b)) {
            return Err(BadField("namespace"));
        }
        if self.owner_of_bytes(&var_object(ns, b"")).as_ref() != Some(&self.cluster.me) {
            return Err(BadField("namespace (not owned here)"));
        }
        self.cluster
            .peers
            .heard
            .entry(home.clone())
            .or_insert(now.mono);
        let l = self.cluster.leader.table.as_mut().expect("ready leader");
        if let Some(f) = l.tx.inflight.get(&(home.clone(), req.req)) {
            // Asked again: its answer may have been lost with a link.
            if f.done.is_some() {
                let done = self.tx_done_msg(home, req.req);
                self.send(To::Agent(home), done);
            }
            return Ok(());
        }
        if l.tx.knows(home, req.req) {
            return Ok(());
        }
        if l.tx.queued >= MAX_QUEUED {
            let why = format!("the owner has {MAX_QUEUED} transactions waiting");
            self.tx_refuse(home, &req, TxRefusal::new(0, TxError::Overflow, why));
            return Ok(());
        }
        let ns = l.tx.enqueue(
            Queued {
                home: home.clone(),
                req,
            },
            false,
        );
        self.tx_run(now, &ns);
        Ok(())
    }

    fn tx_refuse(&mut self, home: &Id, req: &TxReq, why: TxRefusal) {
        let failed = PeerMsg::TxFailed {
            epoch: self.cluster.epoch.number,
            namespace: req.namespace.clone(),
            req: req.req,
            failed: why.statement as u64,
            error: why.error.as_str(),
            description: why.description,
        };
        self.send(To::Agent(home), failed);
    }

    /// Runs the transactions waiting on namespace `ns`, in order, while the
    /// first one's variables are free.
    pub(super) fn tx_run(&mut self, now: Now, ns: &Ns) {
        loop {
            let acting = self.cluster.acting(now.mono);
            let Some(l) = self.cluster.leader.table.as_mut().filter(|l| l.ready) else {
                return;
            };
            let Some(q) = l.tx.queues.get(ns).and_then(VecDeque::front) else {
                l.tx.queues.remove(ns);
                return;
            };
            let delayed = l.delay_until.is_some_and(|d| now.mono < d);
            let tx = match read_tx(&q.req) {
                Ok(tx) => tx,
                Err(why) => {
                    let q = self.tx_pop(ns).expect("first");
                    self.tx_refuse(&q.home, &q.req, why);
                    continue;
                }
            };
            // Nothing is decided during a lock-delay or while this owner
            // does not act (its table may be behind), and no transaction
            // sees a variable that another one in flight changes, or that
            // a home not counted yet may hold or may have let go.
            let blocked = !acting
                || delayed
                || named_objects(ns, &tx).iter().any(|o| {
                    l.tx.busy.contains_key(o)
                        || l.objects.get(o).is_some_and(|obj| {
                            obj.tickets.iter().any(|t| {
                                matches!(t.state, LeaderState::Inherited { .. })
                                    && !l.reporters.contains(&t.home)
                            })
                        })
                });
            if blocked {
                l.tx.retry.insert(ns.clone());
                return;
            }
            let q = self.tx_pop(ns).expect("first");
            self.tx_eval(now, q, &tx);
        }
    }

    fn tx_pop(&mut self, ns: &Ns) -> Option<Queued> {
        self.cluster.leader.table.as_mut()?.tx.dequeue(ns)
    }

    /// Runs one transaction against the table: refused, or in flight
    /// (its new holdings asked for their votes).
    fn tx_eval(&mut self, now: Now, q: Queued, tx: &Transaction) {
        let home = q.home.clone();
        let key: String = q.req.key.clone();
        let key: &str = &key;
        let ns: Vec<u8> = q.req.namespace.clone();
        let ns = &ns[..];
        let max_tickets = self.config.max_tickets;
        let l = self.cluster.leader.table.as_ref().expect("ready leader");
        let holders = |var: &[u8]| {
            let o = l.objects.get(&ObjectName::from(var_object(ns, var)));
            o.into_iter()
                .flat_map(|o| o.tickets.iter())
                .filter(|t| t.blocks())
        };
        let seen = |var: &crate::local::tx::Var| {
            let mut s = Seen::default();
            for t in holders(var.as_bytes()) {
                let dup = t.kind.mode != Mode::Exclusive;
                if t.home == home && *t.key == *key {
                    s.mine = Some(dup);
                } else {
                    s.others += 1;
                    s.other_alone |= !dup;
                }
            }
            s
        };
        let room = q.req.room;
        let tickets = l.tickets;
        let overflow = |delta: isize| {
            let more = u64::try_from(delta + 1).unwrap_or(0);
            if more > room {
                Some("this connection would hold more than its maximum of variables".to_owned())
            } else if tickets.saturating_add_signed(delta) >= max_tickets {
                Some(format!(
                    "the leaders hold their maximum of {max_tickets} tickets"
                ))
            } else {
                None
            }
        };
        let skip_votes = self.cluster.cfg.plant == Plant::TxSkipVote;
        let (results, touched, failed) = match run(tx, seen, overflow) {
            Ok((results, touched)) => (results, touched, None),
            // An assert found false read the table as a read does: it is
            // answered only once the epoch's leaders agree that this owner
            // still decides (an owner cut off in an older epoch answers no
            // failure from a table a newer epoch changed since; seed 13781).
            Err(why) if why.error == TxError::Failed && !skip_votes => {
                (Vec::new(), Default::default(), Some(why))
            }
            Err(why) => return self.tx_refuse(&home, &q.req, why),
        };
        let fence = self.next_tx_fence();
        let first = self.first_followers(&home);
        let me_bit = self.my_index().map_or(0, |i| 1u8 << i);
        let l = self.cluster.leader.table.as_mut().expect("ready leader");
        let mut f = InFlight {
            queued: q,
            fence,
            results,
            sets: Vec::new(),
            renews: Vec::new(),
            deletes: Vec::new(),
            done: None,
            fence_votes: me_bit,
            fence_asked: now.mono,
            failed,
        };
        let mut next_req = f.queued.req.req;
        for (var, t) in touched {
            if !t.set && t.before.is_some() == t.now.is_some() {
                continue; // only looked at
            }
            let object = ObjectName::from(var_object(ns, var.as_bytes()));
            let name: ObjectName = l
                .objects
                .get_key_value(&object)
                .map_or_else(|| object.clone(), |(k, _)| k.clone());
            let old = l.objects.get(&object).and_then(|o| {
                o.tickets
                    .iter()
                    .find(|x| x.blocks() && x.home == home && *x.key == *key)
                    .map(|x| x.req)
            });
            if let (Some(old), Some(now_dup)) = (old, t.now) {
                if t.before == Some(now_dup) {
                    f.renews.push(old);
                    continue;
                }
            }
            if let Some(old) = old {
                f.deletes.push((name.clone(), old));
            }
            if let Some(dup) = t.now {
                next_req += 1;
                f.sets.push((name, next_req, dup));
            }
        }
        let key: Box<str> = f.queued.req.key.as_str().into();
        let mut numbers = Vec::with_capacity(f.sets.len());
        for (name, req, dup) in &f.sets {
            let number = l
                .objects
                .get(name)
                .and_then(|o| o.tickets.iter().map(|t| t.number).max())
                .map_or(1, |n| n + 1);
            numbers.push(number);
            l.insert(
                name,
                LeaderTicket {
                    home: home.clone(),
                    req: *req,
                    key: key.clone(),
                    number,
                    kind: var_kind(*dup),
                    state: LeaderState::Waiting,
                    has_ticket: first,
                    try_once: false,
                    since: None,
                },
            );
        }
        let tx_key = (home.clone(), f.queued.req.req);
        for o in f.objects() {
            l.tx.busy.insert(o.clone(), tx_key.clone());
        }
        let sets = f.sets.clone();
        l.tx.inflight.insert(tx_key.clone(), f);
        let epoch = self.cluster.epoch.number;
        for ((name, req, dup), number) in sets.iter().zip(numbers) {
            let at = TicketAt {
                epoch,
                object: name.clone(),
                home: home.clone(),
                req: *req,
            };
            let add = PeerMsg::AddTicket {
                at,
                key: key.to_string(),
                number,
                kind: var_kind(*dup),
                fence: None,
            };
            self.send(To::Leaders(first), add);
        }
        if sets.is_empty() && !skip_votes {
            // No holding to vote for: the leaders agree to its fence alone,
            // so that no owner of this epoch that stopped acting answers
            // it, and the next epoch's fences start above it.
            self.ask_fence(&tx_key, first);
        }
        let mut at_once = Vec::new();
        for (name, req, _) in &sets {
            let l = self.cluster.leader.table.as_mut().expect("ready leader");
            let pos = (l.objects.get(name))
                .and_then(|o| o.find(&home, *req))
                .expect("just inserted");
            if skip_votes {
                let t = &mut l.objects.get_mut(name).expect("exists").tickets[pos];
                t.state = LeaderState::Held { fence };
                continue;
            }
            let (k, all) = self.ask_votes(now, name, pos, fence);
            if all {
                at_once.push(k);
            }
        }
        for (name, req, _) in &sets {
            if at_once.iter().any(|k| k.1 == *req) {
                self.widen(name, &home, *req, false);
            }
            self.try_grant(now, name, &home, *req);
        }
        self.tx_try_done(&tx_key);
    }

    /// The fence of a transaction: above every fence this agent drew, saw
    /// or installed as the epoch's base.
    fn next_tx_fence(&mut self) -> u64 {
        let l = self.cluster.leader.table.as_ref().expect("ready leader");
        let fence = l.base.max(self.cluster.records.fence_floor + 1);
        self.raise_floor(fence);
        fence
    }

    fn tx_done_msg(&self, home: &Id, req: u64) -> PeerMsg {
        let l = self.cluster.leader.table.as_ref().expect("leader");
        let f = &l.tx.inflight[&(home.clone(), req)];
        let sets = f
            .sets
            .iter()
            .map(|(name, r, dup)| {
                let var = split_var_object(name).map_or(&[][..], |(_, v)| v);
                (*r, *dup, var.to_vec())
            })
            .collect();
        PeerMsg::TxDone(TxDone {
            epoch: self.cluster.epoch.number,
            namespace: f.queued.req.namespace.clone(),
            req,
            fence: f.fence,
            results: f.results.clone(),
            sets,
            renews: f.renews.clone(),
            deletes: f.deletes.iter().map(|d| d.1).collect(),
        })
    }

    /// `TXDONE` once every new holding of the transaction has its majority.
    fn tx_try_done(&mut self, key: &(Id, u64)) {
        let majority = self.cluster.leader_majority();
        let plant = self.cluster.cfg.plant;
        let Some(l) = self.cluster.leader.table.as_mut() else {
            return;
        };
        let Some(f) = l.tx.inflight.get(key) else {
            return;
        };
        if f.done.is_some() {
            return;
        }
        let voted = f.sets.iter().all(|(name, req, _)| {
            l.objects.get(name).is_some_and(|o| {
                o.find(&key.0, *req)
                    .is_some_and(|p| matches!(o.tickets[p].state, LeaderState::Held { .. }))
            })
        });
        let agreed = !f.sets.is_empty()
            || f.fence_votes.count_ones() as usize >= majority
            || plant == Plant::TxSkipVote;
        if !voted || !agreed {
            return;
        }
        if f.failed.is_some() {
            // Nothing to apply or acknowledge: it changes no variable.
            let f = l.tx.inflight.remove(key).expect("in flight");
            let why = f.failed.expect("failed");
            return self.tx_refuse(&key.0, &f.queued.req, why);
        }
        l.tx.inflight.get_mut(key).expect("in flight").done = Some(self.last_now);
        let done = self.tx_done_msg(&key.0, key.1);
        self.send(To::Agent(&key.0), done);
    }

    /// Asks leaders `to` to agree to the fence of in-flight transaction
    /// `key`, which has no new holding.
    fn ask_fence(&mut self, key: &(Id, u64), to: u8) {
        let epoch = self.cluster.epoch.number;
        let Some(f) = (self.cluster.leader.table.as_mut()).and_then(|l| l.tx.inflight.get_mut(key))
        else {
            return;
        };
        f.fence_asked = self.last_now;
        let ask = PeerMsg::TxFence {
            epoch,
            namespace: f.queued.req.namespace.clone(),
            req: key.1,
            home: key.0.to_string(),
            fence: f.fence,
        };
        self.send(To::Leaders(to), ask);
    }

    /// `TXFENCE`: the owner of the namespace asks this follower to agree
    /// to a transaction's fence. It does while it acts in the epoch and no
    /// lock-delay runs, as it votes for a grant, and keeps the fence as
    /// one it saw (its record, its report's floor).
    pub(super) fn follower_tx_fence(
        &mut self,
        now: Now,
        from: &Id,
        namespace: Vec<u8>,
        req: u64,
        home: String,
        fence: u64,
    ) -> Result<(), BadField> {
        if self.owner_of_bytes(&var_object(&namespace, b"")).as_ref() != Some(from) {
            return Err(BadField("namespace (sender is not its owner)"));
        }
        let acting = self.cluster.acting(now.mono);
        let delayed = (self.cluster.leader.table.as_ref())
            .is_some_and(|l| l.delay_until.is_some_and(|d| now.mono < d));
        let ok = acting && !delayed;
        if ok {
            self.raise_floor(fence);
        }
        let answer = PeerMsg::TxFenced {
            epoch: self.cluster.epoch.number,
            namespace,
            req,
            home,
            fence,
            ok,
        };
        self.send(To::Agent(from), answer);
        Ok(())
    }

    /// `TXFENCED`: a follower's answer about a transaction's fence.
    pub(super) fn owner_tx_fenced(
        &mut self,
        from: &Id,
        home: &str,
        req: u64,
        fence: u64,
        ok: bool,
    ) {
        let Some(i) = self.cluster.epoch.leaders.iter().position(|l| l == from) else {
            return;
        };
        let Some(l) = self.cluster.leader.table.as_mut() else {
            return;
        };
        let Some((key, f)) =
            l.tx.inflight
                .iter_mut()
                .find(|(k, _)| k.1 == req && *k.0 == *home)
        else {
            return;
        };
        if ok && f.fence == fence {
            f.fence_votes |= 1 << i;
        }
        let key = key.clone();
        self.tx_try_done(&key);
    }

    /// A new holding `req` of `home` has its majority.
    pub(super) fn tx_set_voted(&mut self, _now: Now, home: &Id, req: u64) {
        let Some(l) = self.cluster.leader.table.as_ref() else {
            return;
        };
        if let Some(key) = l.tx.of_set(home, req) {
            self.tx_try_done(&key);
        }
    }

    /// Followers refused a new holding (their votes stand for a holding
    /// this owner no longer knows, and is dropping): nothing was shown
    /// yet, so the transaction goes back to the head of its queue and runs
    /// again.
    pub(super) fn tx_set_refused(&mut self, home: &Id, req: u64) {
        let Some(l) = self.cluster.leader.table.as_ref() else {
            return;
        };
        let Some(key) = l.tx.of_set(home, req) else {
            return;
        };
        if let Some(q) = self.tx_abort(&key) {
            let l = self.cluster.leader.table.as_mut().expect("leader");
            let ns = l.tx.enqueue(q, true);
            l.tx.retry.insert(ns);
        }
    }

    /// Takes back an in-flight transaction: its new holdings dropped, its
    /// variables free. Returns it.
    fn tx_abort(&mut self, key: &(Id, u64)) -> Option<Queued> {
        let epoch = self.cluster.epoch.number;
        let l = self.cluster.leader.table.as_mut()?;
        let f = l.tx.inflight.remove(key)?;
        for o in f.objects() {
            l.tx.busy.remove(o);
        }
        let mut drops = Vec::new();
        for (name, req, _) in &f.sets {
            if let Some(t) = l.remove(name, &key.0, *req) {
                let at = TicketAt {
                    epoch,
                    object: name.clone(),
                    home: key.0.clone(),
                    req: *req,
                };
                drops.push((t.has_ticket, at));
            }
        }
        for (to, at) in drops {
            self.send(To::Leaders(to), PeerMsg::DropTicket(at));
        }
        Some(f.queued)
    }

    /// `TXACK` from `home`: it applied transaction `req` (`ok`), or gave
    /// it up.
    pub(super) fn owner_tx_ack(&mut self, now: Now, home: &Id, req: u64, ok: bool) {
        let key = (home.clone(), req);
        let Some(l) = self.cluster.leader.table.as_mut() else {
            return;
        };
        let Some(ns) =
            l.tx.inflight
                .get(&key)
                .map(|f| Ns::from(&f.queued.req.namespace[..]))
        else {
            // Not run yet: given up before it ran.
            if !ok && l.tx.knows(home, req) {
                l.tx.unqueue(|t| !(t.home == *home && t.req.req == req));
            }
            return;
        };
        if !ok {
            self.tx_abort(&key);
            return self.tx_run(now, &ns);
        }
        let f = l.tx.inflight.remove(&key).expect("in flight");
        for o in f.objects() {
            l.tx.busy.remove(o);
        }
        for (name, old) in &f.deletes {
            self.owner_release(now, name, home, *old);
        }
        self.tx_run(now, &ns);
    }

    /// `home` went silent: its transactions, waiting or in flight, go
    /// with its tickets.
    pub(super) fn tx_forget_home(&mut self, now: Now, home: &Id) {
        let Some(l) = self.cluster.leader.table.as_mut() else {
            return;
        };
        let mut touched = l.tx.unqueue(|t| t.home != *home);
        let keys: Vec<(Id, u64)> =
            l.tx.inflight
                .range((home.clone(), 0)..=(home.clone(), u64::MAX))
                .map(|(k, _)| k.clone())
                .collect();
        for key in keys {
            if let Some(q) = self.tx_abort(&key) {
                touched.push(q.req.namespace.as_slice().into());
            }
        }
        for ns in touched {
            self.tx_run(now, &ns);
        }
    }

    /// Every tick: the namespaces whose first transaction waited for
    /// something time may change.
    pub(super) fn tx_tick(&mut self, now: Now) {
        let Some(l) = self.cluster.leader.table.as_mut().filter(|l| l.ready) else {
            return;
        };
        let retry = std::mem::take(&mut l.tx.retry);
        // An answer not acknowledged within a RESEND is said again: the
        // home's TXACK (or the TXDONE) may have been lost with a link.
        let again: Vec<(Id, u64)> =
            l.tx.inflight
                .iter_mut()
                .filter(|(_, f)| f.done.is_some_and(|t| t + RESEND <= now.mono))
                .map(|(k, f)| {
                    f.done = Some(now.mono);
                    k.clone()
                })
                .collect();
        for (home, req) in again {
            let done = self.tx_done_msg(&home, req);
            self.send(To::Agent(&home), done);
        }
        // A fence not agreed by a majority a ping_interval after it was
        // asked: every other leader is asked (again).
        let all_others = self.all_leaders() & !self.my_index().map_or(0, |i| 1u8 << i);
        let interval = self.cluster.cfg.ping_interval;
        let l = self.cluster.leader.table.as_ref().expect("leader");
        let majority = self.cluster.leader_majority();
        let short: Vec<(Id, u64)> =
            l.tx.inflight
                .iter()
                .filter(|(_, f)| f.done.is_none() && f.sets.is_empty())
                .filter(|(_, f)| (f.fence_votes.count_ones() as usize) < majority)
                .filter(|(_, f)| f.fence_asked + interval <= now.mono)
                .map(|(k, _)| k.clone())
                .collect();
        for key in short {
            self.ask_fence(&key, all_others);
        }
        for ns in retry {
            self.tx_run(now, &ns);
        }
    }

    /// Whether holding `req` of `home` on `object` is a new holding of a
    /// transaction in flight: only the transaction ends it.
    pub(super) fn tx_holds(&self, home: &Id, req: u64) -> bool {
        self.cluster
            .leader
            .table
            .as_ref()
            .is_some_and(|l| l.tx.of_set(home, req).is_some())
    }
}
