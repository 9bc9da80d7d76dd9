//! The semantics of transactions, from `testdata/space.txt`.
//!
//! ```text
//! limits per_client=2 total=3 namespaces=1    a new, empty space
//! @T C[.P] [duration=D] NS: STMT | STMT ... => ok 1,0 | failed N | overflow N
//! @T close C => held=K                         the connection C is gone
//! @T expire => held=K                          expiry runs at T
//! @T holders NS VAR => C.P,C,...               who holds VAR (or "none")
//! ```
//!
//! Every `ok` must take the fence after the previous `ok`'s, and the
//! space's indexes are checked after every step.

use std::time::Duration;

use super::*;
use crate::local::tx::TxError;
use crate::local::tx::stmt::{parse_statement, parse_var};

fn session(s: &str) -> SessionId {
    let (c, p) = match s.split_once('.') {
        Some((c, p)) => (c, Some(p.parse().expect("a pid"))),
        None => (s, None),
    };
    SessionId {
        client: ClientId(c.parse().expect("a client")),
        pid: p,
    }
}

/// A transaction on namespace `n` of `statements`, its variables living
/// `secs` seconds.
fn tx_in_n<S: AsRef<str>>(statements: &[S], secs: u64) -> Transaction {
    Transaction {
        namespace: b"n".to_vec(),
        statements: statements
            .iter()
            .map(|s| parse_statement(s.as_ref().as_bytes()).unwrap())
            .collect(),
        pid: None,
        tag: None,
        duration: Duration::from_secs(secs),
    }
}

fn show(s: SessionId) -> String {
    match s.pid {
        Some(p) => format!("{}.{p}", s.client.0),
        None => s.client.0.to_string(),
    }
}

fn at(word: &str) -> Time {
    let secs: u64 = word
        .strip_prefix('@')
        .expect("@T")
        .parse()
        .expect("seconds");
    Time::from_micros(secs * 1_000_000)
}

#[test]
fn the_cases_of_testdata_hold() {
    let data = include_str!("../testdata/space.txt");
    let mut space = Space::new(Limits::default(), 100);
    let mut last_fence = 100;
    let mut steps = 0;
    for (n, line) in data.lines().enumerate() {
        let n = n + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix("limits ") {
            let mut limits = Limits::default();
            for kv in rest.split_whitespace() {
                let (k, v) = kv.split_once('=').expect("key=value");
                let v: usize = v.parse().expect("a number");
                match k {
                    "per_client" => limits.per_client = v,
                    "total" => limits.total = v,
                    "namespaces" => limits.namespaces = v,
                    _ => panic!("line {n}: unknown limit {k}"),
                }
            }
            space = Space::new(limits, 100);
            last_fence = 100;
            continue;
        }
        steps += 1;
        let (given, want) = line
            .split_once(" => ")
            .unwrap_or_else(|| panic!("line {n}: no =>"));
        let (time, rest) = given.split_once(' ').expect("@T then a step");
        let now = at(time);
        let got = if rest == "expire" {
            space.expire(now, usize::MAX);
            format!("held={}", space.held())
        } else if let Some(c) = rest.strip_prefix("close ") {
            space.close_client(ClientId(c.parse().expect("a client")));
            format!("held={}", space.held())
        } else if let Some(q) = rest.strip_prefix("holders ") {
            let (ns, var) = q.split_once(' ').expect("holders NS VAR");
            space.expire(now, usize::MAX);
            let var = parse_var(var.as_bytes()).expect("a variable");
            let hs: Vec<String> = space
                .holders(ns.as_bytes(), &var)
                .into_iter()
                .map(show)
                .collect();
            if hs.is_empty() {
                "none".to_owned()
            } else {
                hs.join(",")
            }
        } else {
            let (head, stmts) = rest.split_once(": ").expect("C NS: statements");
            let mut words = head.split_whitespace();
            let who = session(words.next().expect("a session"));
            let mut duration = Duration::from_secs(60);
            let mut ns = "";
            for w in words {
                match w.strip_prefix("duration=") {
                    Some(d) => duration = Duration::from_secs(d.parse().expect("seconds")),
                    None => ns = w,
                }
            }
            let statements = stmts
                .split(" | ")
                .map(|s| {
                    parse_statement(s.as_bytes()).unwrap_or_else(|e| panic!("line {n}: {e:?}"))
                })
                .collect();
            let tx = Transaction {
                namespace: ns.as_bytes().to_vec(),
                statements,
                pid: who.pid,
                tag: None,
                duration,
            };
            match space.apply(now, who, &tx) {
                Ok(c) => {
                    assert_eq!(
                        c.fence,
                        last_fence + 1,
                        "line {n}: fences grow by one per commit"
                    );
                    last_fence = c.fence;
                    let r: Vec<&str> = c
                        .results
                        .iter()
                        .map(|&b| if b { "1" } else { "0" })
                        .collect();
                    format!("ok {}", r.join(","))
                }
                Err(r) => format!("{} {}", r.error.as_str(), r.statement),
            }
        };
        space.check();
        assert_eq!(got, want, "line {n}: {line}");
    }
    assert!(steps >= 40, "only {steps} steps");
}

#[test]
fn a_failed_transaction_leaves_no_trace_and_takes_no_fence() {
    let mut space = Space::new(Limits::default(), 0);
    let me = session("1");
    let tx = |stmts: &[&str]| tx_in_n(stmts, 10);
    let t0 = Time::from_micros(0);
    assert_eq!(
        space.apply(t0, me, &tx(&["set A", "set B"])).unwrap().fence,
        1
    );
    let before = format!("{space:?}");
    let r = space
        .apply(
            t0,
            me,
            &tx(&["delete A", "set C", "set B dup", "assert exists Z"]),
        )
        .unwrap_err();
    assert_eq!((r.statement, r.error), (4, TxError::Failed));
    assert_eq!(format!("{space:?}"), before);
    assert_eq!(space.apply(t0, me, &tx(&["exists A"])).unwrap().fence, 2);
}

#[test]
fn the_next_deadline_is_the_earliest_expiry() {
    let mut space = Space::new(Limits::default(), 0);
    assert_eq!(space.next_deadline(), None);
    let tx = |d: u64, v: &str| tx_in_n(&[format!("set {v}")], d);
    space.apply(Time::ZERO, session("1"), &tx(30, "A")).unwrap();
    space.apply(Time::ZERO, session("2"), &tx(10, "B")).unwrap();
    assert_eq!(space.next_deadline(), Some(Time::from_micros(10_000_000)));
    assert_eq!(space.expire(Time::from_micros(10_000_000), usize::MAX), 1);
    assert_eq!(space.next_deadline(), Some(Time::from_micros(30_000_000)));
    // Renewing moves its expiry.
    space
        .apply(Time::from_micros(20_000_000), session("1"), &tx(30, "A"))
        .unwrap();
    assert_eq!(space.next_deadline(), Some(Time::from_micros(50_000_000)));
}

/// Expiry runs in batches, so that many variables due at once do not
/// hold the loop; a transaction never sees a holding that expired, even
/// one a batch has not reached yet.
#[test]
fn expiry_runs_in_batches_and_a_transaction_never_sees_an_expired_holding() {
    let mut space = Space::new(Limits::default(), 0);
    let tx = |stmts: &[String], d: u64| tx_in_n(stmts, d);
    // 4200 variables V… and then X, all due at 10 s; X comes last.
    let n = EXPIRE_BATCH + 104;
    for chunk in (0..n).collect::<Vec<_>>().chunks(30) {
        let sets: Vec<String> = chunk.iter().map(|i| format!("set V{i:05}")).collect();
        space
            .apply(Time::ZERO, session("1"), &tx(&sets, 10))
            .unwrap();
    }
    space
        .apply(Time::ZERO, session("1"), &tx(&["set X".into()], 10))
        .unwrap();
    assert_eq!(space.held(), n + 1);
    let due = Time::from_micros(10_000_000);
    assert_eq!(space.expire(due, 4), 4);
    assert_eq!(space.held(), n - 3);
    // The next transaction takes one more batch away, and X, due but not
    // reached by it, as it names X: another session sets it alone.
    let done = space.apply(
        due,
        session("2"),
        &tx(&["exists X".into(), "set X".into()], 60),
    );
    assert_eq!(done.unwrap().results, [false, true]);
    space.check();
    assert_eq!(space.next_deadline(), Some(due), "more are due");
    assert_eq!(space.expire(due, usize::MAX), n - 4 - EXPIRE_BATCH);
    space.check();
    assert_eq!(space.held(), 1);
    assert_eq!(space.next_deadline(), Some(Time::from_micros(70_000_000)));
}
