//! The namespaces of one agent: variables, the sessions that hold them,
//! and how a transaction is applied, all or nothing.
//!
//! A variable is held by sessions; either by one session alone, or by any
//! number of sessions that all set it with `dup`:
//!
//! INVARIANT: a variable held by more than one session is held with `dup`
//! by every one of them (checked by `debug_assert!` on every commit).
//!
//! A transaction runs against an overlay of the variables it names (at most
//! [`super::MAX_STATEMENTS`]): nothing changes until its last statement
//! passed, so a failed `assert` or an overflow leaves no trace. Each commit
//! takes the next fence of one counter for the whole agent: the fences of
//! every namespace grow with each of its commits, and an empty namespace
//! can be forgotten without its fences going back.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::run::{Seen, Touch, run};
use super::stmt::Var;
use super::{Limits, Transaction, TxRefusal};
use crate::time::Time;
use crate::vocab::ClientId;

/// Who holds variables: a connection, and the `pid` it gave (as for `LOCK`
/// keys). Its variables vanish with the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionId {
    /// The connection.
    pub client: ClientId,
    /// `pid=` of its transactions, when given.
    pub pid: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Holding {
    session: SessionId,
    dup: bool,
    expires: Time,
}

type Ns = Arc<[u8]>;

/// Most variables one call of [`Space::expire`] removes, so that many set
/// in the same second do not hold the loop at once.
pub const EXPIRE_BATCH: usize = 4096;

/// A committed transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    /// Its fence: larger than every earlier commit's.
    pub fence: u64,
    /// One value per statement.
    pub results: Vec<bool>,
}

/// Every namespace of the agent.
#[derive(Debug)]
pub struct Space {
    limits: Limits,
    /// Each namespace's variables, each with its holders sorted by session.
    spaces: BTreeMap<Ns, BTreeMap<Var, Vec<Holding>>>,
    /// What each session holds.
    sessions: BTreeMap<SessionId, BTreeSet<(Ns, Var)>>,
    /// Holdings per connection, all its sessions together.
    per_client: BTreeMap<ClientId, usize>,
    /// When each holding ends.
    expiries: BTreeSet<(Time, Ns, Var, SessionId)>,
    /// Holdings in all.
    held: usize,
    last_fence: u64,
}

impl Space {
    /// An empty space whose first commit takes fence `fence_floor + 1`.
    pub fn new(limits: Limits, fence_floor: u64) -> Space {
        Space {
            limits,
            spaces: BTreeMap::new(),
            sessions: BTreeMap::new(),
            per_client: BTreeMap::new(),
            expiries: BTreeSet::new(),
            held: 0,
            last_fence: fence_floor,
        }
    }

    /// Variables held, counted once per holding session.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Namespaces holding variables.
    pub fn namespaces(&self) -> usize {
        self.spaces.len()
    }

    /// The sessions holding `var` in `namespace`.
    pub fn holders(&self, namespace: &[u8], var: &Var) -> Vec<SessionId> {
        self.spaces
            .get(namespace)
            .and_then(|vars| vars.get(var))
            .map(|hs| hs.iter().map(|h| h.session).collect())
            .unwrap_or_default()
    }

    /// When the next variable expires.
    pub fn next_deadline(&self) -> Option<Time> {
        self.expiries.first().map(|e| e.0)
    }

    /// Applies `tx` for `session` at `now`, all or nothing. The variables
    /// it names that expired by `now` are gone first (and at most
    /// [`EXPIRE_BATCH`] others).
    pub fn apply(
        &mut self,
        now: Time,
        session: SessionId,
        tx: &Transaction,
    ) -> Result<Committed, TxRefusal> {
        self.expire(now, EXPIRE_BATCH);
        self.expire_named(now, tx);
        let ns_key = tx.namespace.as_slice();
        let vars = self.spaces.get(ns_key);
        let had = self.per_client.get(&session.client).copied().unwrap_or(0);
        let seen = |var: &Var| {
            let holders = vars.and_then(|v| v.get(var)).map_or(&[][..], Vec::as_slice);
            let mine = holders.iter().find(|h| h.session == session).map(|h| h.dup);
            Seen {
                others: holders.len() - usize::from(mine.is_some()),
                other_alone: holders.iter().any(|h| h.session != session && !h.dup),
                mine,
            }
        };
        let (results, touched) = run(tx, seen, |delta| self.overflow(had, delta, vars.is_some()))?;
        self.commit(now, session, tx, touched);
        self.last_fence += 1;
        Ok(Committed {
            fence: self.last_fence,
            results,
        })
    }

    /// Why one more holding for a session whose connection holds `had +
    /// delta` would pass a bound.
    fn overflow(&self, had: usize, delta: isize, ns_exists: bool) -> Option<String> {
        let mine = had.saturating_add_signed(delta);
        if mine >= self.limits.per_client {
            return Some(format!(
                "this connection would hold more than {} variables",
                self.limits.per_client
            ));
        }
        if self.held.saturating_add_signed(delta) >= self.limits.total {
            return Some(format!(
                "the agent holds its maximum of {} variables",
                self.limits.total
            ));
        }
        if !ns_exists && self.spaces.len() >= self.limits.namespaces {
            return Some(format!(
                "the agent holds its maximum of {} namespaces",
                self.limits.namespaces
            ));
        }
        None
    }

    fn commit(
        &mut self,
        now: Time,
        session: SessionId,
        tx: &Transaction,
        touched: BTreeMap<Var, Touch>,
    ) {
        let ns: Ns = match self.spaces.get_key_value(tx.namespace.as_slice()) {
            Some((k, _)) => k.clone(),
            None => tx.namespace.as_slice().into(),
        };
        let expires = now + tx.duration;
        for (var, t) in touched {
            match (t.before, t.now) {
                (Some(_), None) => self.remove(&ns, &var, session),
                (before, Some(dup)) if t.set => {
                    if before.is_some() {
                        self.remove(&ns, &var, session);
                    }
                    self.insert(
                        &ns,
                        var,
                        Holding {
                            session,
                            dup,
                            expires,
                        },
                    );
                }
                _ => {}
            }
        }
    }

    fn insert(&mut self, ns: &Ns, var: Var, h: Holding) {
        let vars = self.spaces.entry(ns.clone()).or_default();
        let (var, holders) = match vars.get_key_value(&var) {
            Some((k, _)) => {
                let k = k.clone();
                let hs = vars.get_mut(&k).expect("present");
                (k, hs)
            }
            None => (var.clone(), vars.entry(var).or_default()),
        };
        let at = holders.partition_point(|x| x.session < h.session);
        holders.insert(at, h);
        debug_assert!(
            holders.len() < 2 || holders.iter().all(|x| x.dup),
            "a variable held by several sessions without dup"
        );
        self.expiries
            .insert((h.expires, ns.clone(), var.clone(), h.session));
        self.sessions
            .entry(h.session)
            .or_default()
            .insert((ns.clone(), var));
        *self.per_client.entry(h.session.client).or_default() += 1;
        self.held += 1;
    }

    fn remove(&mut self, ns: &Ns, var: &Var, session: SessionId) {
        let Some(vars) = self.spaces.get_mut(ns) else {
            return;
        };
        let Some(holders) = vars.get_mut(var) else {
            return;
        };
        let Some(at) = holders.iter().position(|h| h.session == session) else {
            return;
        };
        let h = holders.remove(at);
        if holders.is_empty() {
            vars.remove(var);
            if vars.is_empty() {
                self.spaces.remove(ns);
            }
        }
        self.expiries
            .remove(&(h.expires, ns.clone(), var.clone(), session));
        if let Some(set) = self.sessions.get_mut(&session) {
            set.remove(&(ns.clone(), var.clone()));
            if set.is_empty() {
                self.sessions.remove(&session);
            }
        }
        if let Some(n) = self.per_client.get_mut(&session.client) {
            *n -= 1;
            if *n == 0 {
                self.per_client.remove(&session.client);
            }
        }
        self.held -= 1;
    }

    /// The connection is gone: its sessions' variables vanish. Returns how
    /// many.
    pub fn close_client(&mut self, client: ClientId) -> usize {
        let first = SessionId { client, pid: None };
        let last = SessionId {
            client,
            pid: Some(u64::MAX),
        };
        let sessions: Vec<SessionId> = self.sessions.range(first..=last).map(|(s, _)| *s).collect();
        let mut gone = 0;
        for session in sessions {
            let held = self.sessions.get(&session).cloned().unwrap_or_default();
            for (ns, var) in held {
                self.remove(&ns, &var, session);
                gone += 1;
            }
        }
        gone
    }

    /// Removes the variables whose time ran out by `now`, at most `most` of
    /// them. Returns how many. What is left is still due: the next deadline
    /// is past, and the loop comes back at once, after its other work.
    pub fn expire(&mut self, now: Time, most: usize) -> usize {
        let mut gone = 0;
        while gone < most {
            let Some((at, ns, var, session)) = self.expiries.first().cloned() else {
                break;
            };
            if at > now {
                break;
            }
            self.remove(&ns, &var, session);
            gone += 1;
        }
        gone
    }

    /// Removes the expired holdings of the variables `tx` names, so that it
    /// never sees one, whatever waits in the batches of [`Space::expire`].
    fn expire_named(&mut self, now: Time, tx: &Transaction) {
        let Some((ns, vars)) = self.spaces.get_key_value(tx.namespace.as_slice()) else {
            return;
        };
        let ns = ns.clone();
        let mut due: Vec<(Var, SessionId)> = Vec::new();
        for st in &tx.statements {
            let var = st.op.var();
            if let Some(holders) = vars.get(var) {
                let expired = holders.iter().filter(|h| h.expires <= now);
                due.extend(expired.map(|h| (var.clone(), h.session)));
            }
        }
        for (var, session) in due {
            self.remove(&ns, &var, session);
        }
    }

    /// Checks the indexes against the namespaces (tests).
    #[cfg(test)]
    fn check(&self) {
        let mut count = 0;
        for (ns, vars) in &self.spaces {
            assert!(!vars.is_empty());
            for (var, hs) in vars {
                assert!(!hs.is_empty());
                assert!(hs.len() < 2 || hs.iter().all(|h| h.dup));
                for h in hs {
                    count += 1;
                    assert!(self.expiries.contains(&(
                        h.expires,
                        ns.clone(),
                        var.clone(),
                        h.session
                    )));
                    assert!(self.sessions[&h.session].contains(&(ns.clone(), var.clone())));
                }
            }
        }
        assert_eq!(count, self.held);
        assert_eq!(self.expiries.len(), self.held);
        assert_eq!(
            self.sessions.values().map(BTreeSet::len).sum::<usize>(),
            self.held
        );
        assert_eq!(self.per_client.values().sum::<usize>(), self.held);
    }
}

#[cfg(test)]
mod tests;
