//! The transactions' history checker (`snaplock_tests::sim::txcheck`)
//! against hand-made histories: correct ones pass, a half-applied
//! transaction, a duplicate fence, fences against real time, a vanished
//! variable seen again and wrong results or failures are caught; and
//! random histories made by the reference model, serial or concurrent,
//! with closes, revocations and lost answers, pass, and mostly fail once
//! one answer in them is changed.

use snaplock_tests::sim::rng::Rng;
use snaplock_tests::sim::txcheck::{TxChecker, TxId, TxSent};
use snaplock_tests::txmodel::{Bounds, Model, Op, Outcome, Session, Stmt};

const NS: &str = "ns";

/// One statement from its text, e.g. `anyway assert not set A dup`.
fn stmt(text: &str) -> Stmt {
    let mut words: Vec<&str> = text.split(' ').collect();
    let mut take = |w: &str| {
        let found = words.first() == Some(&w);
        if found {
            words.remove(0);
        }
        found
    };
    let anyway = take("anyway");
    let assert = take("assert");
    let mut nots = 0;
    while take("not") {
        nots += 1;
    }
    let op = match words[..] {
        ["exists", v] => Op::Exists(v.to_owned()),
        ["set", v] => Op::Set(v.to_owned(), false),
        ["set", v, "dup"] => Op::Set(v.to_owned(), true),
        ["delete", v] => Op::Delete(v.to_owned()),
        _ => panic!("not a statement: {text}"),
    };
    Stmt {
        anyway,
        assert,
        nots,
        op,
    }
}

/// A history being written: times in µs, sessions as (connection, pid).
#[derive(Default)]
struct History {
    checker: TxChecker,
    next: u64,
}

impl History {
    fn send(&mut self, sent_at: u64, session: Session, stmts: &str) -> TxId {
        self.next += 1;
        let id = TxId(self.next);
        let stmts = stmts.split(';').map(str::trim).map(stmt).collect();
        self.checker.sent(
            id,
            TxSent {
                session,
                namespace: NS.to_owned(),
                stmts,
                sent_at,
            },
        );
        id
    }

    /// A transaction sent at `sent` and answered at `at` with
    /// `TRANSACTIONOK fence=...;results=...`.
    fn ok(
        &mut self,
        (sent, at): (u64, u64),
        session: Session,
        stmts: &str,
        fence: u64,
        results: &str,
    ) {
        let id = self.send(sent, session, stmts);
        let results = results.split(',').map(|r| r == "1").collect();
        self.checker.committed(at, id, fence, results);
    }

    /// ... answered `TRANSACTIONFAILED error=failed;failed=n`.
    fn failed(&mut self, (sent, at): (u64, u64), session: Session, stmts: &str, n: usize) {
        let id = self.send(sent, session, stmts);
        self.checker.failed(at, id, n);
    }

    fn rules(&self) -> Vec<&'static str> {
        self.checker.finish().iter().map(|v| v.rule).collect()
    }

    fn clean(&self) {
        let found = self.checker.finish();
        assert!(found.is_empty(), "{found:#?}");
    }
}

const S: Session = (1, None);
const T: Session = (2, None);
const U: Session = (3, Some(7));

#[test]
fn a_serial_history_passes() {
    let mut h = History::default();
    h.ok((0, 1), S, "assert set A; set B dup", 10, "1,1");
    h.ok(
        (2, 3),
        T,
        "exists A; set B dup; set A; not set A dup",
        11,
        "1,1,0,1",
    );
    h.ok((4, 5), T, "delete B; delete B; exists B", 12, "1,0,1");
    h.failed((6, 7), U, "exists A; assert not exists B", 2);
    h.ok(
        (8, 9),
        S,
        "anyway assert delete A; anyway assert delete A",
        13,
        "1,0",
    );
    h.ok((10, 11), U, "set A; not exists A", 14, "1,0");
    h.clean();
}

#[test]
fn a_half_applied_transaction_is_caught() {
    let mut h = History::default();
    h.ok((0, 1), S, "set A; set B", 10, "1,1");
    h.ok((2, 3), T, "exists A; exists B", 11, "1,0");
    assert_eq!(h.rules(), ["T2"]);
}

#[test]
fn a_fence_answered_twice_is_caught() {
    let mut h = History::default();
    h.ok((0, 1), S, "exists A", 10, "0");
    h.ok((2, 3), T, "exists A", 10, "0");
    assert!(h.rules().contains(&"T1"), "{:?}", h.rules());
}

#[test]
fn fences_against_real_time_are_caught() {
    let mut h = History::default();
    h.ok((0, 1), S, "exists A", 11, "0");
    h.ok((2, 3), T, "exists A", 10, "0");
    assert_eq!(h.rules(), ["T5"]);
    // Concurrent, either order is fine.
    let mut h = History::default();
    h.ok((0, 3), S, "exists A", 11, "0");
    h.ok((2, 4), T, "exists A", 10, "0");
    h.clean();
}

#[test]
fn wrong_results_are_caught() {
    let cases = [
        ("set A", "1"),
        ("exists A", "0"),
        ("not exists A", "1"),
        ("set A dup", "1"),
        ("delete A", "1"),
    ];
    for (stmts, results) in cases {
        let mut h = History::default();
        h.ok((0, 1), S, "set A", 10, "1");
        h.ok((2, 3), T, stmts, 11, results);
        assert_eq!(h.rules(), ["T2"], "{stmts} answered {results}");
    }
    let mut h = History::default();
    h.ok((0, 1), S, "assert exists A", 10, "0");
    assert_eq!(h.rules(), ["T2"], "committed although an assert was false");
    let mut h = History::default();
    h.ok((0, 1), S, "exists A; exists B", 10, "0");
    assert_eq!(h.rules(), ["T2"], "one result for two statements");
}

#[test]
fn a_closed_sessions_variable_may_vanish_but_never_comes_back() {
    let mut h = History::default();
    h.ok((0, 1), S, "set A", 10, "1");
    h.checker.ended(5, S.0);
    h.ok((6, 7), T, "exists A", 11, "1");
    h.ok((8, 9), T, "exists A", 12, "0");
    h.ok((10, 11), U, "not exists A", 13, "0");
    assert_eq!(h.rules(), ["T2"], "seen present after it was seen gone");
    // Without the close, it cannot vanish.
    let mut h = History::default();
    h.ok((0, 1), S, "set A", 10, "1");
    h.ok((8, 9), T, "exists A", 12, "0");
    assert_eq!(h.rules(), ["T2"]);
    // Closed after a commit answered later: it was there for that one.
    let mut h = History::default();
    h.ok((0, 1), S, "set A", 10, "1");
    h.ok((2, 5), T, "exists A", 11, "1");
    h.checker.ended(3, S.0);
    h.ok((6, 7), T, "exists A", 12, "1");
    h.clean();
    let mut h = History::default();
    h.ok((0, 1), S, "set A", 10, "1");
    h.ok((2, 3), T, "exists A", 11, "0");
    h.checker.ended(4, S.0);
    assert_eq!(
        h.rules(),
        ["T2"],
        "the close came after that commit's answer"
    );
}

#[test]
fn a_set_by_another_session_settles_a_maybe_present_variable() {
    let mut h = History::default();
    h.ok((0, 1), S, "set A", 10, "1");
    h.checker.ended(2, S.0);
    h.ok((3, 4), T, "set A", 11, "1");
    h.ok((5, 6), U, "set A", 12, "0");
    h.ok((7, 8), T, "delete A; exists A", 13, "1,0");
    h.clean();
    // One transaction cannot see it both present and absent.
    let mut h = History::default();
    h.ok((0, 1), S, "set A", 10, "1");
    h.checker.ended(2, S.0);
    h.ok((3, 4), T, "exists A; set A", 11, "1,1");
    assert_eq!(h.rules(), ["T2"]);
    // Two maybe holders: "exists" true settles neither.
    let mut h = History::default();
    h.ok((0, 1), S, "set A dup", 10, "1");
    h.ok((0, 1), U, "set A dup", 11, "1");
    h.checker.ended(2, S.0);
    h.checker.ended(2, U.0);
    h.ok((3, 4), T, "exists A", 12, "1");
    h.ok((5, 6), T, "exists A", 13, "0");
    h.ok((7, 8), T, "set A", 14, "1");
    h.clean();
}

#[test]
fn a_revocation_lets_a_namespaces_variables_vanish() {
    let mut h = History::default();
    h.ok((0, 1), S, "set A", 10, "1");
    h.checker.revoked(2, S.0, NS);
    h.ok((3, 4), T, "set A", 11, "1");
    h.ok((5, 6), S, "delete A", 12, "0");
    h.ok((7, 8), S, "set B", 13, "1");
    h.ok((9, 10), T, "set B", 14, "0");
    h.clean();
    // In another namespace, it does not.
    let mut h = History::default();
    h.ok((0, 1), S, "set A", 10, "1");
    h.checker.revoked(2, S.0, "other");
    h.ok((3, 4), T, "set A", 11, "1");
    assert_eq!(h.rules(), ["T2"]);
}

#[test]
fn a_transaction_never_answered_may_have_set_its_variables_at_any_time() {
    let mut h = History::default();
    h.send(0, S, "set A; delete B");
    h.checker.ended(1, S.0);
    h.ok((2, 3), T, "exists A", 10, "0");
    h.ok((4, 5), T, "exists A", 11, "1");
    h.ok((6, 7), U, "set A", 12, "0");
    h.clean();
    // ... but not before it was sent.
    let mut h = History::default();
    h.ok((0, 1), T, "exists A", 10, "1");
    h.send(2, S, "set A");
    assert_eq!(h.rules(), ["T2"]);
}

#[test]
fn a_failure_must_be_explained_by_some_point_it_may_have_run_at() {
    let mut h = History::default();
    h.ok((0, 1), S, "set A", 10, "1");
    h.failed((2, 3), T, "assert not exists A", 1);
    h.failed((2, 3), T, "exists B; assert set A", 2);
    h.clean();
    let mut h = History::default();
    h.failed((2, 3), T, "assert exists A; assert not exists A", 2);
    assert_eq!(h.rules(), ["T3"], "fails at the wrong statement");
    let mut h = History::default();
    h.failed((2, 3), T, "exists A; assert not exists A", 1);
    assert_eq!(h.rules(), ["T3"], "failed names a statement without assert");
    let mut h = History::default();
    h.failed((2, 3), T, "anyway assert exists A", 1);
    h.failed((2, 3), T, "assert exists A", 2);
    assert_eq!(h.rules(), ["T3", "T3"]);
    // Concurrent with the commit that set A: true before it, false after.
    let mut h = History::default();
    h.ok((0, 4), S, "set A", 10, "1");
    h.failed((1, 3), T, "assert exists A", 1);
    h.failed((2, 5), U, "assert not exists A", 1);
    h.ok((6, 7), T, "delete A; exists A", 11, "0,1");
    h.clean();
    // After it, only true.
    let mut h = History::default();
    h.ok((0, 1), S, "set A", 10, "1");
    h.failed((2, 3), T, "assert exists A", 1);
    assert_eq!(h.rules(), ["T3"]);
}

/// Serial random histories: the reference model's answers pass (closes
/// included, in half of them: the model drops the variables at once,
/// which is one of the orders the checker allows); in the others, where
/// nothing may vanish, one answer changed is caught.
#[test]
fn serial_histories_of_the_reference_model_pass_and_a_changed_answer_is_caught() {
    let bounds = Bounds {
        per_client: 10_000,
        total: 1_000_000,
        namespaces: 10_000,
    };
    let vars = ["A", "B", "C/k"];
    let mut changed_caught = 0;
    for seed in 0..300 {
        let mut rng = Rng::new(seed);
        let mut model = Model::new(bounds);
        let mut h = History::default();
        let mut answers = Vec::new();
        let mut conns = [1u64, 2, 3];
        let closes = seed % 2 == 0;
        for step in 0..40u64 {
            let t = 10 * step;
            let c = rng.below(3) as usize;
            if closes && rng.chance(100_000) {
                model.close(conns[c]);
                h.checker.ended(t, conns[c]);
                conns[c] += 10;
                continue;
            }
            let session = (conns[c], [None, Some(5)][rng.below(2) as usize]);
            let stmts: Vec<String> = (0..rng.between(1, 4))
                .map(|_| {
                    let v = vars[rng.below(3) as usize];
                    let mut s = String::new();
                    if rng.chance(150_000) {
                        s.push_str("anyway ");
                    }
                    if rng.chance(400_000) {
                        s.push_str("assert ");
                    }
                    s.push_str(&"not ".repeat(*rng.pick(&[0, 0, 1, 2])));
                    s.push_str(match rng.below(4) {
                        0 => "exists ",
                        1 => "set ",
                        2 => "delete ",
                        _ => "set ",
                    });
                    s.push_str(v);
                    if s.contains("set ") && rng.chance(500_000) {
                        s.push_str(" dup");
                    }
                    s
                })
                .collect();
            let text = stmts.join(";");
            let parsed: Vec<Stmt> = stmts.iter().map(|s| stmt(s)).collect();
            let outcome = model.run(t, session, NS, &parsed, 1_000_000_000);
            answers.push((t, session, text, outcome));
        }
        let mut fence = 100;
        // Which answer to change, and how, for the second pass.
        let change = rng.below(answers.len() as u64) as usize;
        for pass in 0..2 {
            let mut h2 = History {
                checker: h.checker.clone(),
                next: 0,
            };
            let mut altered = false;
            for (k, (t, session, text, outcome)) in answers.iter().enumerate() {
                let when = (*t + 1, *t + 2);
                match outcome {
                    Outcome::Ok(values) => {
                        fence += 1;
                        let mut values = values.clone();
                        if pass == 1 && k == change {
                            values[0] = !values[0];
                            altered = true;
                        }
                        let r: Vec<&str> =
                            values.iter().map(|&v| if v { "1" } else { "0" }).collect();
                        h2.ok(when, *session, text, fence, &r.join(","));
                    }
                    Outcome::Failed(n, _) => {
                        let mut n = *n;
                        if pass == 1 && k == change {
                            // Another statement that could fail, if any.
                            let stmts: Vec<Stmt> = text.split(';').map(stmt).collect();
                            if let Some(m) = (1..=stmts.len())
                                .find(|&m| m != n && stmts[m - 1].assert && !stmts[m - 1].anyway)
                            {
                                n = m;
                                altered = true;
                            }
                        }
                        h2.failed(when, *session, text, n);
                    }
                }
            }
            let found = h2.checker.finish();
            if pass == 0 {
                assert!(found.is_empty(), "seed {seed}: {found:#?}");
            } else if altered && !closes {
                assert!(
                    !found.is_empty(),
                    "seed {seed}: answer {change} changed, not caught"
                );
                changed_caught += 1;
            }
        }
    }
    assert!(
        changed_caught > 100,
        "only {changed_caught} changed histories"
    );
}

/// A random statement on one of `vars`, as text.
fn random_statement(rng: &mut Rng, vars: &[&str]) -> String {
    let mut s = String::new();
    if rng.chance(150_000) {
        s.push_str("anyway ");
    }
    if rng.chance(400_000) {
        s.push_str("assert ");
    }
    s.push_str(&"not ".repeat(*rng.pick(&[0, 0, 1, 2])));
    let v = *rng.pick(vars);
    match rng.below(4) {
        0 => s.push_str(&format!("exists {v}")),
        1 => s.push_str(&format!("set {v}")),
        2 => s.push_str(&format!("set {v} dup")),
        _ => s.push_str(&format!("delete {v}")),
    }
    s
}

/// Concurrent random histories that are correct by construction: the
/// reference model runs the transactions one after another, each at an
/// instant between its sending and its answer (which overlap their
/// neighbours'); a closed connection's variables vanish a few
/// transactions after the close, and answers due after it are lost; a
/// revoked connection sends nothing until its variables vanish, a few
/// transactions after the notice. The checker must accept them all; with
/// one value changed, it must catch most (what vanished may explain some).
/// A connection may have several transactions in flight here, which the
/// simulator's clients never do.
#[test]
fn concurrent_histories_of_the_reference_model_pass() {
    let bounds = Bounds {
        per_client: 10_000,
        total: 1_000_000,
        namespaces: 10_000,
    };
    let vars = ["A", "B", "C/k"];
    let (mut commits, mut lost, mut vanished) = (0, 0, 0);
    let (mut tried, mut caught) = (0, 0);
    for seed in 0..2_000 {
        let mut rng = Rng::new(seed);
        let mut model = Model::new(bounds);
        let mut h = History::default();
        let vars = &vars[..rng.between(1, 3) as usize];
        let spread = *rng.pick(&[50, 250, 600]);
        // Per slot: its connection, and whether it waits for a vanishing.
        let mut slots = [(1u64, false), (2, false), (3, false)];
        let mut next_conn = 4;
        let mut vanish: Vec<(u64, u64)> = Vec::new();
        // (id, connection, answered at, outcome, fence)
        let mut answers: Vec<(TxId, u64, u64, Outcome, u64)> = Vec::new();
        for step in 0..60u64 {
            let tau = 1_000 + 100 * step;
            vanish.retain(|&(at_step, conn)| {
                if at_step != step {
                    return true;
                }
                model.close(conn);
                vanished += 1;
                for slot in &mut slots {
                    if slot.0 == conn {
                        slot.1 = false;
                    }
                }
                false
            });
            let s = rng.below(3) as usize;
            let (conn, frozen) = slots[s];
            if frozen {
                continue;
            }
            match rng.below(100) {
                0..=7 => {
                    h.checker.ended(tau, conn);
                    answers.retain(|a| {
                        let keep = a.1 != conn || a.2 < tau;
                        lost += usize::from(!keep);
                        keep
                    });
                    vanish.push((step + rng.between(1, 4), conn));
                    slots[s] = (next_conn, false);
                    next_conn += 1;
                }
                8..=12 => {
                    h.checker.revoked(tau, conn, NS);
                    vanish.push((step + rng.between(1, 4), conn));
                    slots[s].1 = true;
                }
                _ => {
                    let session = (conn, [None, Some(9)][rng.below(2) as usize]);
                    let texts: Vec<String> = (0..rng.between(1, 4))
                        .map(|_| random_statement(&mut rng, vars))
                        .collect();
                    let stmts: Vec<Stmt> = texts.iter().map(|t| stmt(t)).collect();
                    let sent = tau - rng.below(spread);
                    let answered = tau + rng.below(spread);
                    let id = h.send(sent, session, &texts.join(";"));
                    let outcome = model.run(tau, session, NS, &stmts, 1_000_000_000);
                    answers.push((id, conn, answered, outcome, 100 + step));
                }
            }
        }
        // Then once more with one commit's first value changed.
        let ok = answers
            .iter()
            .filter(|a| matches!(a.3, Outcome::Ok(_)))
            .count();
        let change = rng.below(ok.max(1) as u64) as usize;
        let mut changed = h.checker.clone();
        let mut k = 0;
        for (id, _, at, outcome, fence) in answers {
            match outcome {
                Outcome::Ok(mut values) => {
                    commits += 1;
                    h.checker.committed(at, id, fence, values.clone());
                    if k == change {
                        values[0] = !values[0];
                    }
                    k += 1;
                    changed.committed(at, id, fence, values);
                }
                Outcome::Failed(n, "failed") => {
                    h.checker.failed(at, id, n);
                    changed.failed(at, id, n);
                }
                Outcome::Failed(..) => {
                    h.checker.refused(id);
                    changed.refused(id);
                }
            }
        }
        let found = h.checker.finish();
        assert!(found.is_empty(), "seed {seed}: {found:#?}");
        if ok > 0 {
            tried += 1;
            caught += usize::from(!changed.finish().is_empty());
        }
    }
    println!(
        "{commits} commits, {lost} answers lost, {vanished} connections' variables vanished; \
         one value changed: caught in {caught} of {tried}"
    );
    assert!(commits > 10_000 && lost > 100 && vanished > 1_000);
    assert!(
        caught * 10 > tried * 8,
        "a changed value caught in {caught} of {tried}"
    );
}
