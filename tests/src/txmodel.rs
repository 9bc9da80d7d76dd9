//! A sequential reference model of lock transactions (snaplock(7),
//! TRANSACTIONS), written from the manual page and nothing else: a map
//! from (namespace, variable) to its holders, and a transaction that runs
//! on a copy of the whole map, kept only when it commits. It is slow on
//! purpose: it shares no code and no idea of the agent's overlay, so the
//! two agree only when the agent does what the page says.

use std::collections::BTreeMap;

/// A session: a connection and the pid of its transactions.
pub type Session = (u64, Option<u64>);

/// What a statement does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `exists V`.
    Exists(String),
    /// `set V [dup]`.
    Set(String, bool),
    /// `delete V`.
    Delete(String),
}

/// One statement, as the generator built it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stmt {
    /// `anyway `.
    pub anyway: bool,
    /// `assert `.
    pub assert: bool,
    /// How many `not `.
    pub nots: usize,
    /// The operation; its variable in canonical form.
    pub op: Op,
}

impl Stmt {
    /// The statement as a client writes it, its variable written `var`.
    pub fn text(&self, var: &str) -> String {
        let mut text = String::new();
        if self.anyway {
            text.push_str("anyway ");
        }
        if self.assert {
            text.push_str("assert ");
        }
        text.push_str(&"not ".repeat(self.nots));
        match &self.op {
            Op::Exists(_) => text.push_str(&format!("exists {var}")),
            Op::Set(_, dup) => {
                text.push_str(&format!("set {var}{}", if *dup { " dup" } else { "" }))
            }
            Op::Delete(_) => text.push_str(&format!("delete {var}")),
        }
        text
    }

    /// Its variable.
    pub fn var(&self) -> &str {
        match &self.op {
            Op::Exists(v) | Op::Set(v, _) | Op::Delete(v) => v,
        }
    }
}

/// What the model says a transaction answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `TRANSACTIONOK` with these values (the fence is the next one).
    Ok(Vec<bool>),
    /// `TRANSACTIONFAILED failed=N;error=E`.
    Failed(usize, &'static str),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Holder {
    session: Session,
    dup: bool,
    /// Microseconds.
    expires: u64,
}

/// The bounds, as in snaplock(7).
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Variables per session.
    pub per_client: usize,
    /// Variables in all.
    pub total: usize,
    /// Namespaces holding variables.
    pub namespaces: usize,
}

/// Every namespace of one agent.
#[derive(Clone, Debug)]
pub struct Model {
    bounds: Bounds,
    vars: BTreeMap<(String, String), Vec<Holder>>,
}

impl Model {
    /// An empty model.
    pub fn new(bounds: Bounds) -> Model {
        Model {
            bounds,
            vars: BTreeMap::new(),
        }
    }

    /// Variables whose time ran out by `now` (µs) are gone.
    pub fn expire(&mut self, now: u64) {
        for hs in self.vars.values_mut() {
            hs.retain(|h| h.expires > now);
        }
        self.vars.retain(|_, hs| !hs.is_empty());
    }

    /// The earliest expiry, in microseconds.
    pub fn next_expiry(&self) -> Option<u64> {
        self.vars.values().flatten().map(|h| h.expires).min()
    }

    /// A connection is gone.
    pub fn close(&mut self, client: u64) {
        for hs in self.vars.values_mut() {
            hs.retain(|h| h.session.0 != client);
        }
        self.vars.retain(|_, hs| !hs.is_empty());
    }

    fn count(&self) -> usize {
        self.vars.values().flatten().count()
    }

    fn count_client(&self, client: u64) -> usize {
        self.vars
            .values()
            .flatten()
            .filter(|h| h.session.0 == client)
            .count()
    }

    fn namespaces(&self) -> usize {
        let mut names: Vec<&String> = self.vars.keys().map(|(ns, _)| ns).collect();
        names.dedup();
        names.len()
    }

    /// Runs one transaction at `now` (µs) for `session`; its variables live
    /// `duration` µs.
    pub fn run(
        &mut self,
        now: u64,
        session: Session,
        ns: &str,
        stmts: &[Stmt],
        duration: u64,
    ) -> Outcome {
        self.expire(now);
        let mut work = self.clone();
        let mut values = Vec::new();
        for (i, st) in stmts.iter().enumerate() {
            let n = i + 1;
            let result = match &st.op {
                Op::Exists(v) => work.vars.contains_key(&(ns.to_owned(), v.clone())),
                Op::Delete(v) => {
                    let key = (ns.to_owned(), v.clone());
                    let hs = work.vars.entry(key.clone()).or_default();
                    let before = hs.len();
                    hs.retain(|h| h.session != session);
                    let deleted = hs.len() < before;
                    if hs.is_empty() {
                        work.vars.remove(&key);
                    }
                    deleted
                }
                Op::Set(v, dup) => {
                    let key = (ns.to_owned(), v.clone());
                    let holders = work.vars.get(&key).cloned().unwrap_or_default();
                    let others: Vec<&Holder> =
                        holders.iter().filter(|h| h.session != session).collect();
                    let mine = holders.iter().any(|h| h.session == session);
                    if mine {
                        let shared = !others.is_empty();
                        for h in work.vars.get_mut(&key).expect("held") {
                            if h.session == session {
                                h.expires = now + duration;
                                if !shared {
                                    h.dup = *dup;
                                }
                            }
                        }
                        true
                    } else if others.is_empty() || (*dup && others.iter().all(|h| h.dup)) {
                        let b = work.bounds;
                        let new_ns = !work.vars.keys().any(|(s, _)| s == ns);
                        if work.count_client(session.0) >= b.per_client
                            || work.count() >= b.total
                            || (new_ns && work.namespaces() >= b.namespaces)
                        {
                            return Outcome::Failed(n, "overflow");
                        }
                        work.vars.entry(key).or_default().push(Holder {
                            session,
                            dup: *dup,
                            expires: now + duration,
                        });
                        true
                    } else {
                        false
                    }
                }
            };
            let value = result ^ (st.nots % 2 == 1);
            values.push(value);
            if !value && st.assert && !st.anyway {
                return Outcome::Failed(n, "failed");
            }
        }
        *self = work;
        Outcome::Ok(values)
    }
}
