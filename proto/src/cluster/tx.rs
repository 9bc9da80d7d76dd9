//! Lock transactions in a cluster (docs/cluster.md "Transactions"): what
//! the owner of a namespace keeps of the transactions it runs, and what a
//! home keeps of its clients' transactions. The handlers are in
//! `core/cluster/tx.rs`.
//!
//! A variable held by a session is a ticket like a lock's, on the object
//! [`crate::vocab::var_object`] names, held by the session's key: the
//! leaders vote for it, the home keeps it in its table with the session's
//! connection, reports it and revokes it, and a handover carries it, all as
//! for a lock. What is new is only who decides: the owner runs a
//! transaction's statements against its table, all at once.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::Id;
use super::msg::TxReq;
use crate::time::Time;
use crate::vocab::{ClientId, ObjectName};

/// A namespace's name.
pub(crate) type Ns = Arc<[u8]>;

/// Most transactions waiting at one owner, all namespaces together; one
/// more is refused with `error=overflow`.
pub(crate) const MAX_QUEUED: usize = 65_536;

/// How long a home waits for the answer to a transaction before it gives
/// it up (`error=unavailable`, nothing changed).
pub(crate) const TX_WAIT: Duration = Duration::from_secs(4);

/// Most transactions of one connection waiting at its home behind the one
/// it sent; one more is refused with `error=overflow`.
pub(crate) const MAX_PER_CLIENT: usize = 64;

/// A transaction waiting for its turn at the owner.
#[derive(Clone, Debug)]
pub(crate) struct Queued {
    pub home: Id,
    pub req: TxReq,
}

/// A transaction the owner ran, until its home applied it (`TXACK`) or
/// gave it up: the variables it changes are busy meanwhile, and no other
/// transaction sees them (docs/cluster.md "Transactions").
#[derive(Clone, Debug)]
pub(crate) struct InFlight {
    pub queued: Queued,
    pub fence: u64,
    pub results: Vec<bool>,
    /// New holdings (object, request, dup): voted for before `TXDONE`.
    pub sets: Vec<(ObjectName, u64, bool)>,
    /// Holdings renewed (their home keeps the time): requests.
    pub renews: Vec<u64>,
    /// Holdings ended: (object, request), dropped once the home applied.
    pub deletes: Vec<(ObjectName, u64)>,
    /// When `TXDONE` last went to the home (every set had its majority):
    /// said again every [`super::home::RESEND`] until the home answers (its
    /// `TXACK` may be lost with a link).
    pub done: Option<Time>,
    /// Without new holdings: the leaders that agreed to its fence (bit i =
    /// leader i, the owner's own included), and when they were last asked.
    pub fence_votes: u8,
    pub fence_asked: Time,
    /// An assert found false: answered `TXFAILED` (instead of `TXDONE`)
    /// once a majority agreed to its fence, as a read is, and forgotten
    /// then (its home acknowledges no failure).
    pub failed: Option<crate::local::tx::TxRefusal>,
}

impl InFlight {
    /// Every object whose holders it changes.
    pub fn objects(&self) -> impl Iterator<Item = &ObjectName> {
        self.sets
            .iter()
            .map(|s| &s.0)
            .chain(self.deletes.iter().map(|d| &d.0))
    }
}

/// The owner's part of the transactions of one epoch (in its table).
#[derive(Debug, Default)]
pub(crate) struct TxOwner {
    /// Transactions not run yet, in order of arrival, by namespace.
    pub queues: BTreeMap<Ns, VecDeque<Queued>>,
    /// Transactions in all `queues`.
    pub queued: usize,
    /// The (home, request) of each transaction in `queues`.
    pub queued_keys: BTreeSet<(Id, u64)>,
    /// Transactions run and not yet applied, by (home, request).
    pub inflight: BTreeMap<(Id, u64), InFlight>,
    /// The objects an in-flight transaction changes, and which.
    pub busy: BTreeMap<ObjectName, (Id, u64)>,
    /// Namespaces whose first transaction waits for something a tick may
    /// change (the lock-delay, acting, a home not counted yet).
    pub retry: BTreeSet<Ns>,
}

impl TxOwner {
    /// The in-flight transaction that made holding `req` of `home`.
    pub fn of_set(&self, home: &Id, req: u64) -> Option<(Id, u64)> {
        let lo = req.saturating_sub(super::msg::MAX_TX_ITEMS as u64);
        self.inflight
            .range((home.clone(), lo)..=(home.clone(), req))
            .find(|(_, f)| f.sets.iter().any(|s| s.1 == req))
            .map(|(k, _)| k.clone())
    }

    /// Whether `req` of `home` is waiting or in flight here.
    pub fn knows(&self, home: &Id, req: u64) -> bool {
        let key = (home.clone(), req);
        self.inflight.contains_key(&key) || self.queued_keys.contains(&key)
    }

    /// Puts `q` in its namespace's queue, at its end or (`first`) its head.
    pub fn enqueue(&mut self, q: Queued, first: bool) -> Ns {
        let ns: Ns = q.req.namespace.as_slice().into();
        self.queued += 1;
        self.queued_keys.insert((q.home.clone(), q.req.req));
        let queue = self.queues.entry(ns.clone()).or_default();
        if first {
            queue.push_front(q);
        } else {
            queue.push_back(q);
        }
        ns
    }

    /// Takes the first transaction of namespace `ns`'s queue.
    pub fn dequeue(&mut self, ns: &[u8]) -> Option<Queued> {
        let queue = self.queues.get_mut(ns)?;
        let q = queue.pop_front()?;
        if queue.is_empty() {
            self.queues.remove(ns);
        }
        self.queued -= 1;
        self.queued_keys.remove(&(q.home.clone(), q.req.req));
        Some(q)
    }

    /// Takes out the waiting transactions `keep` refuses; returns their
    /// namespaces.
    pub fn unqueue(&mut self, mut keep: impl FnMut(&Queued) -> bool) -> Vec<Ns> {
        let mut touched = Vec::new();
        for (ns, q) in self.queues.iter_mut() {
            let before = q.len();
            q.retain(|t| {
                let k = keep(t);
                if !k {
                    self.queued_keys.remove(&(t.home.clone(), t.req.req));
                }
                k
            });
            if q.len() != before {
                self.queued -= before - q.len();
                touched.push(ns.clone());
            }
        }
        self.queues.retain(|_, q| !q.is_empty());
        touched
    }

    /// The homes with a transaction here, waiting or in flight.
    pub fn homes(&self) -> BTreeSet<Id> {
        let queued = self.queued_keys.iter().map(|k| k.0.clone());
        queued
            .chain(self.inflight.keys().map(|k| k.0.clone()))
            .collect()
    }
}

/// A transaction of one of this agent's clients.
#[derive(Clone, Debug)]
pub(crate) struct HomeTx {
    pub client: ClientId,
    pub namespace: Vec<u8>,
    pub tag: Option<i64>,
    /// The statements, in their canonical text.
    pub statements: Vec<Vec<u8>>,
    pub duration: Duration,
    /// The session's key.
    pub key: String,
    /// When it came.
    pub at: Time,
    /// The epoch it was sent in, and when last.
    pub sent: Option<(u64, Time)>,
}

/// The home's part: its clients' transactions.
#[derive(Debug, Default)]
pub(crate) struct HomeTxs {
    /// Sent to the owner, or waiting for leaders, by request. Changed only
    /// through [`HomeTxs::start`] and [`HomeTxs::end`], which keep
    /// `by_client` in step.
    pub inflight: BTreeMap<u64, HomeTx>,
    /// The request in flight of each connection that has one.
    by_client: BTreeMap<ClientId, u64>,
    /// Behind them, by connection (one in flight per connection).
    pub waiting: BTreeMap<ClientId, VecDeque<HomeTx>>,
}

impl HomeTxs {
    /// The request of `client`'s transaction in flight (a lookup, not a
    /// walk: it runs for every transaction submitted and every close).
    pub fn of_client(&self, client: ClientId) -> Option<u64> {
        self.by_client.get(&client).copied()
    }

    /// Transaction `req` of `h.client` is in flight.
    pub fn start(&mut self, req: u64, h: HomeTx) {
        self.by_client.insert(h.client, req);
        self.inflight.insert(req, h);
    }

    /// Transaction `req` is no longer in flight.
    pub fn end(&mut self, req: u64) -> Option<HomeTx> {
        let h = self.inflight.remove(&req)?;
        if self.by_client.get(&h.client) == Some(&req) {
            self.by_client.remove(&h.client);
        }
        Some(h)
    }
}
