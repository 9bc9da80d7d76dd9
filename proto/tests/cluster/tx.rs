//! Lock transactions on three cores (docs/cluster.md "Transactions"): the
//! owner of a namespace decides, sessions on every agent see one order,
//! and a committed variable outlives its owner leader.

use std::time::Duration;

use super::net::Net;
use snaplock_proto::wire::Message;

const SEC: Duration = Duration::from_secs(1);

fn ready(seed: u64) -> Net {
    let mut net = Net::new(3, seed);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    assert!(net.all_ready(), "three ready agents");
    net
}

/// Sends a transaction of `statements` on `ns` and waits for its answer.
fn tx(net: &mut Net, c: u64, ns: &str, statements: &[&str]) -> Message {
    let mut line = format!("TRANSACTION namespace={ns};tag=7");
    for (i, s) in statements.iter().enumerate() {
        line.push_str(&format!(";s{}={s}", i + 1));
    }
    net.send(c, &line);
    net.wait_reply(c, 3 * SEC).expect("an answer")
}

fn fence(m: &Message) -> u64 {
    m.get_str("fence").expect("fence").parse().unwrap()
}

fn is_ok(m: &Message, results: &str) {
    assert_eq!(m.command, "TRANSACTIONOK", "{m}");
    assert_eq!(m.get_str("results"), Some(results), "{m}");
    assert_eq!(m.get_str("tag"), Some("7"), "{m}");
}

fn is_failed(m: &Message, failed: &str, error: &str) {
    assert_eq!(m.command, "TRANSACTIONFAILED", "{m}");
    assert_eq!(m.get_str("failed"), Some(failed), "{m}");
    assert_eq!(m.get_str("error"), Some(error), "{m}");
}

const ENTRY: [&str; 3] = [
    "assert not exists Month-End/CGROVE-35",
    "assert not exists MDS-Review/CGROVE-35/R-45899",
    "assert set MDS-Entry/CGROVE-35/R-45899 dup",
];
const REVIEW: [&str; 3] = [
    "assert not exists Month-End/CGROVE-35",
    "assert not exists MDS-Entry/CGROVE-35/R-45899",
    "assert set MDS-Review/CGROVE-35/R-45899",
];

#[test]
fn the_medical_example_across_three_agents() {
    let mut net = ready(41);
    let nurse = net.open(0);
    let nurse2 = net.open(1);
    let reviewer = net.open(2);
    let a = tx(&mut net, nurse, "Clinical", &ENTRY);
    is_ok(&a, "1,1,1");
    // Two entries at once: `dup` on both sides.
    let b = tx(&mut net, nurse2, "Clinical", &ENTRY);
    is_ok(&b, "1,1,1");
    assert!(fence(&b) > fence(&a), "{b} after {a}");
    // No review while an entry is open, on any agent.
    let r = tx(&mut net, reviewer, "Clinical", &REVIEW);
    is_failed(&r, "2", "failed");
    for c in [nurse, nurse2] {
        let done = tx(
            &mut net,
            c,
            "Clinical",
            &["anyway delete MDS-Entry/CGROVE-35/R-45899"],
        );
        is_ok(&done, "1");
    }
    let r = tx(&mut net, reviewer, "Clinical", &REVIEW);
    is_ok(&r, "1,1,1");
    // Now no entry.
    let e = tx(&mut net, nurse, "Clinical", &ENTRY);
    is_failed(&e, "2", "failed");
}

#[test]
fn one_session_of_many_agents_gets_an_exclusive_variable() {
    let mut net = ready(42);
    let clients: Vec<u64> = (0..6).map(|i| net.open(i % 3)).collect();
    for &c in &clients {
        net.send(
            c,
            "TRANSACTION namespace=jobs;s1=assert set run/nightly;tag=1",
        );
    }
    let mut winners = Vec::new();
    for &c in &clients {
        let m = net.wait_reply(c, 3 * SEC).expect("answered");
        match m.command.as_str() {
            "TRANSACTIONOK" => winners.push(c),
            _ => is_failed(&m, "1", "failed"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one holder");
    // The holder's connection closes: its variable goes, another gets it.
    net.close(winners[0]);
    net.run_for(SEC);
    let other = clients.iter().copied().find(|c| *c != winners[0]).unwrap();
    let m = tx(&mut net, other, "jobs", &["assert set run/nightly"]);
    is_ok(&m, "1");
    // And the others see it held.
    let third = clients
        .iter()
        .copied()
        .find(|c| *c != winners[0] && *c != other)
        .unwrap();
    let m = tx(
        &mut net,
        third,
        "jobs",
        &["exists run/nightly", "set run/nightly"],
    );
    is_ok(&m, "1,0");
}

#[test]
fn a_committed_set_survives_the_crash_of_the_namespaces_owner() {
    let mut net = ready(43);
    let owner = net.owner_of(0, "ledger");
    let home = (owner + 1) % 3;
    let other = (owner + 2) % 3;
    let c = net.open(home);
    let m = tx(
        &mut net,
        c,
        "ledger",
        &["assert set entry/1", "assert set entry/2 dup"],
    );
    is_ok(&m, "1,1");
    let before = fence(&m);
    net.crash(owner);
    // A new epoch without the owner; its state carries the variables.
    let d = net.open(other);
    let mut seen = None;
    for _ in 0..40 {
        net.run_for(SEC / 2);
        net.send(d, "TRANSACTION namespace=ledger;s1=exists entry/1;s2=set entry/1;s3=set entry/2 dup;tag=7");
        // Sent to the crashed owner, it is given up when the epoch changes,
        // or after 4 s without an answer.
        let m = net.wait_reply(d, 12 * SEC).expect("an answer");
        if m.command == "TRANSACTIONOK" {
            seen = Some(m);
            break;
        }
        is_failed(&m, "0", "unavailable");
    }
    let m = seen.expect("transactions again within 20 s of the crash");
    is_ok(&m, "1,0,1");
    assert!(fence(&m) > before, "{m}: fences grow across the failover");
    // The first session still holds entry/1 alone: its delete is true.
    let m = tx(&mut net, c, "ledger", &["delete entry/1", "exists entry/2"]);
    is_ok(&m, "1,1");
}

#[test]
fn a_failed_transaction_leaves_no_trace_anywhere() {
    let mut net = ready(44);
    let a = net.open(0);
    let b = net.open(1);
    let m = tx(&mut net, a, "ns", &["set x", "set y", "assert exists z"]);
    is_failed(&m, "3", "failed");
    let m = tx(
        &mut net,
        b,
        "ns",
        &["exists x", "exists y", "set x", "set y"],
    );
    is_ok(&m, "0,0,1,1");
    // Renewing and changing `dup`: a's `set x dup` is refused (b alone),
    // b's own change to dup lets a share.
    let m = tx(&mut net, a, "ns", &["set x dup"]);
    is_ok(&m, "0");
    let m = tx(&mut net, b, "ns", &["set x dup"]);
    is_ok(&m, "1");
    let m = tx(&mut net, a, "ns", &["set x dup", "exists x"]);
    is_ok(&m, "1,1");
    let m = tx(&mut net, b, "ns", &["set x"]);
    is_ok(&m, "1");
    let m = tx(&mut net, b, "ns", &["delete x", "exists x", "delete x"]);
    is_ok(&m, "1,1,0");
}

#[test]
fn bad_transaction_messages_from_a_peer_change_nothing() {
    let mut net = ready(45);
    let owner = net.owner_of(0, "ns");
    let peer = (owner + 1) % 3;
    let epoch = net.info(0).get_str("epoch").unwrap().to_owned();
    let c = net.open(peer);
    let m = tx(&mut net, c, "ns", &["set held"]);
    is_ok(&m, "1");
    for line in [
        // A namespace no client may name, a statement that does not parse,
        // 33 statements, an answer for no request, holdings out of range.
        format!("TRANSACTION epoch={epoch};namespace=a b;req=1;key=1/0;s1=set x;duration=1;room=9"),
        format!("TRANSACTION epoch={epoch};namespace=ns;req=1;key=1/0;s1=set;duration=1;room=9"),
        format!(
            "TRANSACTION epoch={epoch};namespace=ns;req=1;key=1/0;duration=1;room=99;{}",
            (1..=33)
                .map(|i| format!("s{i}=set v{i}"))
                .collect::<Vec<_>>()
                .join(";")
        ),
        format!("TXDONE epoch={epoch};namespace=ns;req=77;fence=1;results=1;set1=1 0 held"),
        format!("TXACK epoch={epoch};namespace=ns;req=5;ok=true"),
    ] {
        net.inject(owner, peer, &line);
        net.inject(peer, owner, &line);
    }
    net.run_for(SEC);
    // The variable is still held, by the same session only.
    let d = net.open(owner);
    let m = tx(&mut net, d, "ns", &["exists held", "set held", "set x"]);
    is_ok(&m, "1,0,1");
    let m = tx(&mut net, c, "ns", &["delete held"]);
    is_ok(&m, "1");
}

fn answer(net: &mut Net, c: u64, line: &str, limit: Duration) -> Message {
    net.send(c, line);
    net.wait_reply(c, limit).expect("an answer")
}

#[test]
fn a_lost_acknowledgement_keeps_no_variable_busy() {
    let mut net = ready(50);
    let owner = net.owner_of(0, "ns");
    let home = (owner + 1) % 3;
    let c = net.open(home);
    net.lose(home, "TXACK", 1);
    let m = tx(&mut net, c, "ns", &["set x"]);
    is_ok(&m, "1");
    // The owner says its answer again a second later; the home, which
    // applied it, acknowledges it then.
    net.run_for(2 * SEC);
    let d = net.open((owner + 2) % 3);
    let m = answer(
        &mut net,
        d,
        "TRANSACTION namespace=ns;s1=exists x;tag=7",
        SEC,
    );
    is_ok(&m, "1");
    let m = answer(
        &mut net,
        c,
        "TRANSACTION namespace=ns;s1=delete x;tag=7",
        SEC,
    );
    is_ok(&m, "1");
    let m = answer(&mut net, d, "TRANSACTION namespace=ns;s1=set x;tag=7", SEC);
    is_ok(&m, "1");
    // A lost acknowledgement of a give-up: the holder's connection closes
    // while a transaction waits behind x; x is free afterwards.
    net.lose(home, "TXACK", 2);
    net.send(c, "TRANSACTION namespace=ns;s1=set x;s2=set y;tag=7");
    net.run_for(SEC / 10);
    net.close(c);
    net.close(d);
    net.run_for(3 * SEC);
    let e = net.open(home);
    let m = answer(
        &mut net,
        e,
        "TRANSACTION namespace=ns;s1=exists x;s2=exists y;tag=7",
        5 * SEC,
    );
    is_ok(&m, "0,0");
}

#[test]
fn a_renewal_applied_after_the_variable_ended_is_given_up() {
    let mut net = ready(51);
    let owner = net.owner_of(0, "ns");
    let home = (owner + 1) % 3;
    let c = net.open(home);
    let m = answer(
        &mut net,
        c,
        "TRANSACTION namespace=ns;s1=set x;duration=2;tag=7",
        3 * SEC,
    );
    is_ok(&m, "1");
    net.run_for(SEC + SEC / 2);
    // The owner's answer of the renewal is lost; said again a second
    // later, it comes after the variable's 2 s ran out at its home.
    net.lose(owner, "TXDONE", 1);
    let m = answer(
        &mut net,
        c,
        "TRANSACTION namespace=ns;s1=set x;duration=30;tag=7",
        5 * SEC,
    );
    is_failed(&m, "0", "unavailable");
    let d = net.open((owner + 2) % 3);
    let m = answer(
        &mut net,
        d,
        "TRANSACTION namespace=ns;s1=set x;tag=7",
        5 * SEC,
    );
    is_ok(&m, "1");
    // The first session holds nothing.
    let m = answer(
        &mut net,
        c,
        "TRANSACTION namespace=ns;s1=delete x;s2=set x;tag=7",
        5 * SEC,
    );
    is_ok(&m, "0,0");
}
