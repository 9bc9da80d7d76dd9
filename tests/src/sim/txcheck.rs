//! The lock transactions' history checker (snaplock(7), TRANSACTIONS):
//! what the simulated clients sent and were answered, checked at the end
//! of a run for strict serializability, namespace by namespace.
//!
//! - **T1**, fences: the fences of one namespace's commits
//!   (`TRANSACTIONOK`) are unique. Fence order is the order the commits
//!   took effect in, and what follows replays them in it.
//! - **T5**, real time (strict serializability): a commit answered before
//!   another was sent has the smaller fence. The placing of closes,
//!   revocations, failures and lost transactions below leans on it.
//! - **T2**, results: the commits, replayed in fence order in a model of
//!   the namespace (the semantics of [`crate::txmodel`]), give exactly the
//!   `results` seen, and none committed with an asserted statement false.
//! - **T3**, failures: a `TRANSACTIONFAILED error=failed;failed=N` names a
//!   statement that can fail (`assert` without `anyway`), and the model
//!   answers it at some point it may have run at: after every commit
//!   answered before it was sent, before every commit sent after its
//!   reply came.
//! - **T4**, replies, checked online by the clients: every reply carries
//!   the tag of the one transaction in flight on its connection, with its
//!   namespace, readable fence and results, and an error of the manual's;
//!   an untagged `TRANSACTIONFAILED` is a revocation notice.
//!
//! `TRANSACTIONFAILED` with `unavailable`, `untrusted` or `overflow`
//! committed nothing and is not checked further.
//!
//! ## Sessions whose variables may vanish
//!
//! A session is (connection, pid); a connection belongs to one agent.
//! Its variables may vanish at any point after the connection **ended**
//! (closed by either side, or its agent crashed) and, in one namespace,
//! after its agent sent the connection a **revocation** notice (untagged
//! `TRANSACTIONFAILED namespace=NS;failed=0;error=unavailable;description=revoked: ...`).
//! Such an event at true time `t` can take effect only after every commit
//! answered before `t` (those are certainly before it); it concerns every
//! holding set by a transaction sent at `t` or before. From then on such a
//! holding is **maybe present**, and the simplest sound rule decides:
//!
//! - a statement's answer must be possible with some choice of the maybe
//!   present holdings present or not;
//! - when an answer leaves one choice only for a holding (exists false:
//!   none of that variable's holdings is there; a set that succeeded
//!   without `dup` by another session: none of the others is; a set that
//!   failed with one possible blocker: it is there...), the holding is
//!   settled: seen absent, it is gone for good (seen present later, that
//!   is T2); seen present, it stays so to the end of that transaction (it
//!   may vanish between two);
//! - answers that leave several choices (exists true with two maybe
//!   holders) settle nothing. This misses some violations, never reports
//!   a correct history.
//!
//! A transaction sent but never answered (its connection ended first, or
//! the run did) may have committed at any point after every commit
//! answered before it was sent: from there, what it sets is held by its
//! session **wildly** (any answer about it is accepted, nothing settles
//! it, and the session's own later statements leave it wild), and every
//! other holding of its connection in the namespace is maybe present.

use std::collections::{BTreeMap, BTreeSet};

use super::checker::{Violation, secs};
use crate::txmodel::{Op, Session, Stmt};

/// One transaction of the run, numbered by its client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TxId(pub u64);

/// What a client sent.
#[derive(Clone, Debug)]
pub struct TxSent {
    /// Connection and pid.
    pub session: Session,
    /// `namespace=`.
    pub namespace: String,
    /// The statements, their variables in canonical form.
    pub stmts: Vec<Stmt>,
    /// True time it was sent, µs.
    pub sent_at: u64,
}

#[derive(Clone, Debug)]
enum Answer {
    Committed {
        at: u64,
        fence: u64,
        results: Vec<bool>,
    },
    Failed {
        at: u64,
        statement: usize,
    },
    /// Nothing committed, nothing to check.
    Refused,
}

#[derive(Clone, Debug)]
struct Tx {
    sent: TxSent,
    answer: Option<Answer>,
}

/// A connection ended (`namespace: None`) or was told its variables of
/// one namespace were revoked.
#[derive(Clone, Debug)]
struct Doom {
    conn: u64,
    namespace: Option<String>,
    at: u64,
}

/// The transactions of one run, and what became of their sessions.
#[derive(Clone, Debug, Default)]
pub struct TxChecker {
    txs: BTreeMap<TxId, Tx>,
    dooms: Vec<Doom>,
}

impl TxChecker {
    /// An empty history.
    pub fn new() -> TxChecker {
        TxChecker::default()
    }

    /// A client sent a transaction.
    pub fn sent(&mut self, id: TxId, sent: TxSent) {
        self.txs.insert(id, Tx { sent, answer: None });
    }

    fn answer(&mut self, id: TxId, answer: Answer) {
        if let Some(tx) = self.txs.get_mut(&id) {
            tx.answer = Some(answer);
        }
    }

    /// `TRANSACTIONOK` reached the client at `at`.
    pub fn committed(&mut self, at: u64, id: TxId, fence: u64, results: Vec<bool>) {
        self.answer(id, Answer::Committed { at, fence, results });
    }

    /// `TRANSACTIONFAILED error=failed;failed=statement` reached the
    /// client at `at`.
    pub fn failed(&mut self, at: u64, id: TxId, statement: usize) {
        self.answer(id, Answer::Failed { at, statement });
    }

    /// A `TRANSACTIONFAILED` that committed nothing and says nothing of
    /// the namespace (`unavailable`, `untrusted`, `overflow`).
    pub fn refused(&mut self, id: TxId) {
        self.answer(id, Answer::Refused);
    }

    /// Connection `conn` ended at `at`: closed by either side, or its
    /// agent crashed.
    pub fn ended(&mut self, at: u64, conn: u64) {
        self.dooms.push(Doom {
            conn,
            namespace: None,
            at,
        });
    }

    /// The agent of `conn` told it at `at` that its variables of
    /// `namespace` were dropped.
    pub fn revoked(&mut self, at: u64, conn: u64, namespace: &str) {
        self.dooms.push(Doom {
            conn,
            namespace: Some(namespace.to_owned()),
            at,
        });
    }

    /// Transactions answered `TRANSACTIONOK`.
    pub fn commits(&self) -> u64 {
        self.txs
            .values()
            .filter(|t| matches!(t.answer, Some(Answer::Committed { .. })))
            .count() as u64
    }

    /// Checks T1–T3 and T5 over the whole history (see the module's comment).
    pub fn finish(&self) -> Vec<Violation> {
        let namespaces: BTreeSet<&str> = self
            .txs
            .values()
            .map(|t| t.sent.namespace.as_str())
            .collect();
        let mut found = Vec::new();
        for ns in namespaces {
            History::of(self, ns).check(&mut found);
        }
        found
    }
}

/// A commit of the namespace being checked.
struct Commit<'a> {
    id: TxId,
    tx: &'a TxSent,
    at: u64,
    fence: u64,
    results: &'a [bool],
}

/// A `TRANSACTIONFAILED error=failed` of the namespace being checked.
struct Failure<'a> {
    id: TxId,
    tx: &'a TxSent,
    at: u64,
    statement: usize,
}

/// The history of one namespace, its commits in fence order.
struct History<'a> {
    ns: &'a str,
    commits: Vec<Commit<'a>>,
    failures: Vec<Failure<'a>>,
    /// Sent, never answered.
    lost: Vec<(TxId, &'a TxSent)>,
    dooms: Vec<&'a Doom>,
    /// The earliest answer among commits `j..`: non-decreasing.
    suffix_min_answer: Vec<u64>,
    /// The latest sending among commits `..=j`: non-decreasing.
    prefix_max_sent: Vec<u64>,
}

/// A point in the namespace's serial order: after commit `idx - 1`,
/// before commit `idx`.
type Point = usize;

/// What may take a session's holdings away, placed in the serial order.
#[derive(Clone, Copy, Debug)]
struct Placed {
    /// The earliest point it may take effect at.
    point: Point,
    /// It concerns holdings set by transactions sent at this time or
    /// before.
    at: u64,
}

impl<'a> History<'a> {
    fn of(checker: &'a TxChecker, ns: &'a str) -> History<'a> {
        let mut commits = Vec::new();
        let mut failures = Vec::new();
        let mut lost = Vec::new();
        for (&id, t) in &checker.txs {
            if t.sent.namespace != ns {
                continue;
            }
            match &t.answer {
                Some(Answer::Committed { at, fence, results }) => commits.push(Commit {
                    id,
                    tx: &t.sent,
                    at: *at,
                    fence: *fence,
                    results,
                }),
                Some(Answer::Failed { at, statement }) => failures.push(Failure {
                    id,
                    tx: &t.sent,
                    at: *at,
                    statement: *statement,
                }),
                Some(Answer::Refused) => {}
                None => lost.push((id, &t.sent)),
            }
        }
        commits.sort_by_key(|c| (c.fence, c.at, c.id));
        let mut suffix_min_answer = vec![u64::MAX; commits.len()];
        let mut min = u64::MAX;
        for (j, c) in commits.iter().enumerate().rev() {
            min = min.min(c.at);
            suffix_min_answer[j] = min;
        }
        let mut max = 0;
        let prefix_max_sent = commits
            .iter()
            .map(|c| {
                max = max.max(c.tx.sent_at);
                max
            })
            .collect();
        let dooms = checker
            .dooms
            .iter()
            .filter(|d| d.namespace.as_deref().is_none_or(|n| n == ns))
            .collect();
        History {
            ns,
            commits,
            failures,
            lost,
            dooms,
            suffix_min_answer,
            prefix_max_sent,
        }
    }

    /// The first point after every commit answered before `t` (strictly:
    /// of one instant, the order is not known).
    fn after_answers_before(&self, t: u64) -> Point {
        self.suffix_min_answer.partition_point(|&m| m < t)
    }

    /// The last point before every commit sent after `t`.
    fn before_sent_after(&self, t: u64) -> Point {
        self.prefix_max_sent.partition_point(|&m| m <= t)
    }

    fn check(&self, found: &mut Vec<Violation>) {
        self.check_fences(found);
        self.replay(found);
    }

    /// T1 and T5.
    fn check_fences(&self, found: &mut Vec<Violation>) {
        let ns = self.ns;
        for pair in self.commits.windows(2) {
            if pair[0].fence == pair[1].fence {
                let what = format!(
                    "namespace {ns}: fence {} answered twice, to tx{} and tx{}",
                    pair[0].fence, pair[0].id.0, pair[1].id.0
                );
                found.push(Violation {
                    at: pair[1].at.max(pair[0].at),
                    rule: "T1",
                    what,
                });
            }
        }
        for (j, c) in self.commits.iter().enumerate() {
            let Some(&first_later) = self.suffix_min_answer.get(j + 1) else {
                continue;
            };
            if first_later < c.tx.sent_at {
                let other = self.commits[j + 1..]
                    .iter()
                    .find(|o| o.at == first_later)
                    .expect("the minimum is one of them");
                let what = format!(
                    "namespace {ns}: tx{} was answered fence {} at {}, before tx{} was sent at {}, which got the smaller fence {}",
                    other.id.0,
                    other.fence,
                    secs(other.at),
                    c.id.0,
                    secs(c.tx.sent_at),
                    c.fence
                );
                found.push(Violation {
                    at: c.at,
                    rule: "T5",
                    what,
                });
            }
        }
    }

    /// T2 and T3: the commits in fence order, each failure tried at every
    /// point it may have run at. Stops at the first T2 of the namespace
    /// (what follows it would only repeat it).
    fn replay(&self, found: &mut Vec<Violation>) {
        let ns = self.ns;
        let mut dooms: BTreeMap<u64, Vec<Placed>> = BTreeMap::new();
        for d in &self.dooms {
            dooms.entry(d.conn).or_default().push(Placed {
                point: self.after_answers_before(d.at),
                at: d.at,
            });
        }
        let mut wild: BTreeMap<Point, Vec<&TxSent>> = BTreeMap::new();
        for (_, tx) in &self.lost {
            let point = self.after_answers_before(tx.sent_at);
            wild.entry(point).or_default().push(tx);
            // It may take effect after any later transaction of its
            // connection, and delete what that one set.
            dooms.entry(tx.session.0).or_default().push(Placed {
                point,
                at: u64::MAX,
            });
        }
        let mut failures: Vec<(&Failure<'_>, Point, Point, bool)> = Vec::new();
        for f in &self.failures {
            match failable(f.tx, f.statement) {
                Ok(()) => {
                    let lo = self.after_answers_before(f.tx.sent_at);
                    let hi = self.before_sent_after(f.at);
                    // lo > hi: fences against real time, which T1 reports.
                    if lo <= hi {
                        failures.push((f, lo, hi, false));
                    }
                }
                Err(why) => found.push(Violation {
                    at: f.at,
                    rule: "T3",
                    what: format!("namespace {ns}: tx{} {}: {why}", f.id.0, show(f.tx)),
                }),
            }
        }
        let mut space = Space::default();
        let mut reached = self.commits.len();
        for point in 0..=self.commits.len() {
            for tx in wild.get(&point).into_iter().flatten() {
                space.wildly_set(tx);
            }
            for (f, lo, hi, ok) in &mut failures {
                if *ok || point < *lo || point > *hi {
                    continue;
                }
                let mut scratch = space.clone();
                let observed = failure_answers(&f.tx.stmts, f.statement);
                let mut eval = Eval {
                    space: &mut scratch,
                    dooms: &dooms,
                    point,
                };
                *ok = eval
                    .run(
                        f.tx.session,
                        f.tx.sent_at,
                        &f.tx.stmts[..f.statement],
                        &observed,
                    )
                    .is_ok();
            }
            let Some(c) = self.commits.get(point) else {
                break;
            };
            let mut eval = Eval {
                space: &mut space,
                dooms: &dooms,
                point,
            };
            if let Err(why) = check_results(c)
                .and_then(|observed| eval.run(c.tx.session, c.tx.sent_at, &c.tx.stmts, &observed))
            {
                let what = format!(
                    "namespace {ns}: tx{} {} answered fence {} results {}: {why}",
                    c.id.0,
                    show(c.tx),
                    c.fence,
                    show_results(c.results)
                );
                found.push(Violation {
                    at: c.at,
                    rule: "T2",
                    what,
                });
                reached = point;
                break;
            }
            space.end_transaction();
        }
        for (f, _, hi, ok) in failures {
            if !ok && hi <= reached {
                let what = format!(
                    "namespace {ns}: tx{} {} answered failed={} at {}, which no point between its sending at {} and its reply explains",
                    f.id.0,
                    show(f.tx),
                    f.statement,
                    secs(f.at),
                    secs(f.tx.sent_at)
                );
                found.push(Violation {
                    at: f.at,
                    rule: "T3",
                    what,
                });
            }
        }
    }
}

/// A commit's results, as the value each statement must have.
fn check_results(c: &Commit<'_>) -> Result<Vec<Option<bool>>, String> {
    if c.results.len() != c.tx.stmts.len() {
        return Err(format!(
            "{} results for {} statements",
            c.results.len(),
            c.tx.stmts.len()
        ));
    }
    for (k, (st, &v)) in c.tx.stmts.iter().zip(c.results).enumerate() {
        if !v && st.assert && !st.anyway {
            return Err(format!("committed with s{} asserted and false", k + 1));
        }
    }
    Ok(c.results.iter().map(|&v| Some(v)).collect())
}

/// Whether statement `n` (1-based) of `tx` can fail it.
fn failable(tx: &TxSent, n: usize) -> Result<(), String> {
    match n.checked_sub(1).and_then(|k| tx.stmts.get(k)) {
        None => Err(format!("failed={n} names no statement")),
        Some(st) if !st.assert || st.anyway => {
            Err(format!("failed={n} names a statement that cannot fail"))
        }
        Some(_) => Ok(()),
    }
}

/// What a failure at statement `n` says of the values: every earlier
/// statement that could fail was true, statement `n` was false.
fn failure_answers(stmts: &[Stmt], n: usize) -> Vec<Option<bool>> {
    stmts[..n]
        .iter()
        .enumerate()
        .map(|(k, st)| {
            if k + 1 == n {
                Some(false)
            } else {
                (st.assert && !st.anyway).then_some(true)
            }
        })
        .collect()
}

/// A holder's `dup`, as far as it is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dup {
    No,
    Yes,
    Either,
}

impl Dup {
    fn of(dup: bool) -> Dup {
        if dup { Dup::Yes } else { Dup::No }
    }

    fn join(self, other: Dup) -> Dup {
        if self == other { self } else { Dup::Either }
    }
}

/// One session's holding of a variable.
#[derive(Clone, Debug)]
struct Holding {
    session: Session,
    dup: Dup,
    /// When the transaction that last set it was sent.
    since: u64,
    /// Set by a transaction that was never answered: anything goes.
    wild: bool,
    /// Seen present in the transaction being replayed.
    seen: bool,
}

/// The holdings of one namespace, variable by variable (canonical names).
#[derive(Clone, Debug, Default)]
struct Space {
    vars: BTreeMap<String, Vec<Holding>>,
}

impl Space {
    /// A transaction never answered may have set its variables here.
    fn wildly_set(&mut self, tx: &TxSent) {
        for st in &tx.stmts {
            let Op::Set(var, _) = &st.op else {
                continue;
            };
            let hs = self.vars.entry(var.clone()).or_default();
            hs.retain(|h| h.session != tx.session);
            hs.push(Holding {
                session: tx.session,
                dup: Dup::Either,
                since: tx.sent_at,
                wild: true,
                seen: false,
            });
        }
    }

    fn end_transaction(&mut self) {
        for h in self.vars.values_mut().flatten() {
            h.seen = false;
        }
        self.vars.retain(|_, hs| !hs.is_empty());
    }
}

/// One transaction replayed at one point of the serial order.
struct Eval<'s, 'd> {
    space: &'s mut Space,
    dooms: &'d BTreeMap<u64, Vec<Placed>>,
    point: Point,
}

/// Whether a holding is there for sure, or maybe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Presence {
    Sure,
    /// May be gone; settles when an answer says.
    Maybe,
    /// Anything goes, nothing settles it.
    Wild,
}

impl Eval<'_, '_> {
    fn presence(&self, h: &Holding) -> Presence {
        if h.wild {
            return Presence::Wild;
        }
        let doomed = self
            .dooms
            .get(&h.session.0)
            .is_some_and(|ds| ds.iter().any(|d| d.point <= self.point && d.at >= h.since));
        if doomed && !h.seen {
            Presence::Maybe
        } else {
            Presence::Sure
        }
    }

    /// Runs `stmts` for `session`; `observed[k]` is the value statement
    /// `k` must have (after its `not`s), `None` when unknown. Settles
    /// maybe-present holdings as the values say; `Err` when no choice of
    /// them gives the values.
    fn run(
        &mut self,
        session: Session,
        since: u64,
        stmts: &[Stmt],
        observed: &[Option<bool>],
    ) -> Result<(), String> {
        for (k, (st, obs)) in stmts.iter().zip(observed).enumerate() {
            let base = obs.map(|v| v ^ (st.nots % 2 == 1));
            let r = match &st.op {
                Op::Exists(var) => self.exists(var, base),
                Op::Delete(var) => self.delete(session, var, base),
                Op::Set(var, dup) => self.set(session, since, var, *dup, base),
            };
            let verb = match st.op {
                Op::Exists(_) => "exists",
                Op::Delete(_) => "delete",
                Op::Set(..) => "set",
            };
            r.map_err(|why| format!("s{} ({}): its {verb} {why}", k + 1, show_stmt(st)))?;
        }
        Ok(())
    }

    fn holdings(&self, var: &str) -> Vec<(usize, Presence)> {
        self.space.vars.get(var).map_or_else(Vec::new, |hs| {
            hs.iter()
                .enumerate()
                .map(|(i, h)| (i, self.presence(h)))
                .collect()
        })
    }

    fn holders(&mut self, var: &str) -> &mut Vec<Holding> {
        self.space.vars.entry(var.to_owned()).or_default()
    }

    /// Removes the maybe-present holdings `idx` of `var`, seen absent.
    fn gone(&mut self, var: &str, idx: &[usize]) {
        let hs = self.holders(var);
        let mut i = 0;
        hs.retain(|_| {
            i += 1;
            !idx.contains(&(i - 1))
        });
    }

    fn exists(&mut self, var: &str, base: Option<bool>) -> Result<(), String> {
        let hs = self.holdings(var);
        let sure = hs.iter().any(|(_, p)| *p == Presence::Sure);
        match base {
            None => Ok(()),
            Some(true) if hs.is_empty() => Err("was true, but no session can hold it".to_owned()),
            Some(true) => {
                if let [(i, Presence::Maybe)] = hs[..] {
                    self.holders(var)[i].seen = true;
                }
                Ok(())
            }
            Some(false) if sure => Err("was false, but a session holds it for sure".to_owned()),
            Some(false) => {
                let maybe: Vec<usize> = hs
                    .iter()
                    .filter(|(_, p)| *p == Presence::Maybe)
                    .map(|(i, _)| *i)
                    .collect();
                self.gone(var, &maybe);
                Ok(())
            }
        }
    }

    fn delete(&mut self, session: Session, var: &str, base: Option<bool>) -> Result<(), String> {
        let hs = self.holdings(var);
        let mine = self.mine(var, session, &hs);
        match (base, mine) {
            (Some(true), None) => return Err("was true, but the session held nothing".to_owned()),
            (Some(false), Some((_, Presence::Sure))) => {
                return Err("was false, but the session held it for sure".to_owned());
            }
            _ => {}
        }
        // A wild holding stays wild: the transaction that set it may take
        // effect after this one.
        if let Some((i, Presence::Sure | Presence::Maybe)) = mine {
            self.gone(var, &[i]);
        }
        Ok(())
    }

    fn mine(
        &self,
        var: &str,
        session: Session,
        hs: &[(usize, Presence)],
    ) -> Option<(usize, Presence)> {
        let vars = self.space.vars.get(var)?;
        hs.iter()
            .copied()
            .find(|(i, _)| vars[*i].session == session)
    }

    fn set(
        &mut self,
        session: Session,
        since: u64,
        var: &str,
        dup: bool,
        base: Option<bool>,
    ) -> Result<(), String> {
        let hs = self.holdings(var);
        let mine = self.mine(var, session, &hs);
        let vars = self.space.vars.get(var);
        let others: Vec<(usize, Presence, Dup)> = hs
            .iter()
            .filter(|(i, _)| Some(*i) != mine.map(|m| m.0))
            .map(|&(i, p)| (i, p, vars.expect("held")[i].dup))
            .collect();
        // Another holder blocks the set when it is there and either side
        // asked without dup.
        let surely_blocks = |d: Dup| !dup || d == Dup::No;
        let may_block = |d: Dup| !dup || d != Dup::Yes;
        let surely_blocked = others
            .iter()
            .any(|&(_, p, d)| p == Presence::Sure && surely_blocks(d));
        let blockers: Vec<(usize, Presence, Dup)> = others
            .iter()
            .copied()
            .filter(|&(_, _, d)| may_block(d))
            .collect();
        let mine_sure = mine.is_some_and(|(_, p)| p == Presence::Sure);
        let can_be_true = mine.is_some() || !surely_blocked;
        let can_be_false = !mine_sure && !blockers.is_empty();
        match base {
            None if can_be_true && can_be_false => {
                // Only ever replayed for a failure: its scratch space
                // takes "maybe set".
                let old = mine.map(|(i, _)| vars.expect("held")[i].dup);
                self.hold(
                    session,
                    since,
                    var,
                    old.map_or(Dup::Either, |o| o.join(Dup::of(dup))),
                    true,
                );
                Ok(())
            }
            None => self.set(session, since, var, dup, Some(can_be_true)),
            Some(true) if !can_be_true => Err(
                "was true, but another session holds it for sure, and one side asked without dup"
                    .to_owned(),
            ),
            Some(false) if !can_be_false => Err(if mine_sure {
                "was false, but the session held it already".to_owned()
            } else {
                "was false, but no session that could block it may hold it".to_owned()
            }),
            Some(false) => {
                if let Some((i, Presence::Maybe)) = mine {
                    self.gone(var, &[i]);
                    return self.set(session, since, var, dup, Some(false));
                }
                if let [(i, p, d)] = blockers[..] {
                    let h = &mut self.holders(var)[i];
                    if p == Presence::Maybe {
                        h.seen = true;
                    }
                    if p != Presence::Wild && dup && d == Dup::Either {
                        h.dup = Dup::No;
                    }
                }
                Ok(())
            }
            Some(true) => {
                let old = mine.map(|(i, p)| (vars.expect("held")[i].dup, p));
                if mine.is_none() {
                    // A new holding: no other may be there unless both
                    // sides asked with dup.
                    let mut absent = Vec::new();
                    for &(i, p, d) in &others {
                        if p == Presence::Maybe && surely_blocks(d) {
                            absent.push(i);
                        } else if p == Presence::Sure && d == Dup::Either && dup {
                            self.holders(var)[i].dup = Dup::Yes;
                        }
                    }
                    self.gone(var, &absent);
                }
                let left = self.holdings(var);
                let others_left = left.len() - usize::from(mine.is_some());
                let shared_for_sure = left.iter().any(|&(i, p)| {
                    p == Presence::Sure && self.space.vars[var][i].session != session
                });
                let renewed = |old: Dup| {
                    if others_left == 0 {
                        Dup::of(dup)
                    } else if shared_for_sure {
                        old
                    } else {
                        old.join(Dup::of(dup))
                    }
                };
                let new = match old {
                    None => Dup::of(dup),
                    Some((o, Presence::Sure)) => renewed(o),
                    Some((o, _)) => renewed(o).join(Dup::of(dup)),
                };
                self.hold(session, since, var, new, false);
                Ok(())
            }
        }
    }

    /// `session` holds `var` now (for sure, or wildly; a wild holding
    /// stays wild).
    fn hold(&mut self, session: Session, since: u64, var: &str, dup: Dup, wild: bool) {
        let hs = self.holders(var);
        let wild = wild || hs.iter().any(|h| h.session == session && h.wild);
        let dup = if wild { Dup::Either } else { dup };
        hs.retain(|h| h.session != session);
        hs.push(Holding {
            session,
            dup,
            since,
            wild,
            seen: true,
        });
    }
}

fn show_stmt(st: &Stmt) -> String {
    st.text(st.var())
}

fn show(tx: &TxSent) -> String {
    let stmts: Vec<String> = tx.stmts.iter().map(show_stmt).collect();
    let pid = tx
        .session
        .1
        .map_or_else(String::new, |p| format!(" pid {p}"));
    format!(
        "of c{}{pid} sent at {} [{}]",
        tx.session.0,
        secs(tx.sent_at),
        stmts.join("; ")
    )
}

fn show_results(results: &[bool]) -> String {
    let r: Vec<&str> = results.iter().map(|&v| if v { "1" } else { "0" }).collect();
    r.join(",")
}
