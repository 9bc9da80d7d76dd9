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
use crate::txmodel::{Session, Stmt};

mod eval;
use eval::{Eval, Space};

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
