//! Lock transactions on three real agents: the medical example across
//! agents, mutual exclusion by a variable under contention, and a
//! committed variable that outlives the SIGKILL of its namespace's owner.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use snaplock_proto::wire::Message;

use super::common::{Client, now};
use super::harness::Cluster;

fn tx(client: &mut Client, ns: &str, statements: &[&str]) -> Message {
    let mut line = format!("TRANSACTION namespace={ns}");
    for (i, s) in statements.iter().enumerate() {
        line.push_str(&format!(";s{}={s}", i + 1));
    }
    client.request(&line)
}

/// `fence=` of a `TRANSACTIONOK`.
fn fence(m: &Message) -> u64 {
    assert_eq!(m.command, "TRANSACTIONOK", "{m}");
    m.get_str("fence").unwrap().parse().unwrap()
}

fn ok(m: &Message, results: &str) {
    assert_eq!(m.command, "TRANSACTIONOK", "{m}");
    assert_eq!(m.get_str("results"), Some(results), "{m}");
}

fn failed_at(m: &Message, statement: &str) {
    assert_eq!(m.command, "TRANSACTIONFAILED", "{m}");
    assert_eq!(m.get_str("error"), Some("failed"), "{m}");
    assert_eq!(m.get_str("failed"), Some(statement), "{m}");
}

/// The node that owns namespace `ns` (the leader its FNV-1a hash picks).
fn owner_of(c: &Cluster, ns: &str) -> usize {
    let info = c.info(0);
    let leaders: Vec<String> = info
        .get_str("leaders")
        .unwrap()
        .split(',')
        .map(str::to_owned)
        .collect();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in ns.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let id = &leaders[(h % leaders.len() as u64) as usize];
    let name = id.rsplit('|').next().unwrap();
    name.trim_start_matches("node").parse().unwrap()
}

#[test]
fn the_medical_example_across_three_real_agents() {
    let c = Cluster::start("txmed", 3);
    let entry = [
        "assert not exists Month-End/CGROVE-35",
        "assert not exists MDS-Review/CGROVE-35/R-45899",
        "assert set MDS-Entry/CGROVE-35/R-45899 dup",
    ];
    let review = [
        "assert not exists Month-End/CGROVE-35",
        "assert not exists MDS-Entry/CGROVE-35/R-45899",
        "assert set MDS-Review/CGROVE-35/R-45899",
    ];
    let mut nurse = Client::connect(&c.socket(0));
    let mut nurse2 = Client::connect(&c.socket(1));
    let mut reviewer = Client::connect(&c.socket(2));
    let a = tx(&mut nurse, "Clinical", &entry);
    ok(&a, "1,1,1");
    let b = tx(&mut nurse2, "Clinical", &entry);
    ok(&b, "1,1,1");
    assert!(fence(&b) > fence(&a), "{b} after {a}");
    failed_at(&tx(&mut reviewer, "Clinical", &review), "2");
    ok(
        &tx(
            &mut nurse,
            "Clinical",
            &["anyway delete MDS-Entry/CGROVE-35/R-45899"],
        ),
        "1",
    );
    // One entry is still open (the other nurse's).
    failed_at(&tx(&mut reviewer, "Clinical", &review), "2");
    // The second nurse's session ends with its connection.
    drop(nurse2);
    let t0 = now();
    let got = loop {
        let m = tx(&mut reviewer, "Clinical", &review);
        if m.command == "TRANSACTIONOK" || t0.elapsed() > Duration::from_secs(5) {
            break m;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    ok(&got, "1,1,1");
    failed_at(&tx(&mut nurse, "Clinical", &entry), "2");
}

#[test]
fn a_variable_excludes_sessions_of_three_real_agents() {
    let c = Cluster::start("txmutex", 3);
    let holds: Arc<Mutex<Vec<(Duration, Duration, u64)>>> = Arc::default();
    let t0 = now();
    let threads: Vec<_> = (0..3)
        .map(|i| {
            let socket = c.socket(i);
            let holds = holds.clone();
            std::thread::spawn(move || {
                let mut client = Client::connect(&socket);
                let mut got = 0;
                let mut tries = 0;
                while got < 8 {
                    tries += 1;
                    assert!(tries < 5000, "no turn for node{i} in 5000 tries");
                    let m = tx(&mut client, "mutex", &["assert set the/one"]);
                    if m.command != "TRANSACTIONOK" {
                        assert_eq!(m.get_str("error"), Some("failed"), "{m}");
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    }
                    let start = t0.elapsed();
                    std::thread::sleep(Duration::from_millis(10));
                    let end = t0.elapsed();
                    holds.lock().unwrap().push((start, end, fence(&m)));
                    ok(&tx(&mut client, "mutex", &["assert delete the/one"]), "1");
                    got += 1;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread");
    }
    let mut holds = holds.lock().unwrap().clone();
    assert_eq!(holds.len(), 24);
    super::assert_one_at_a_time(&mut holds);
}

#[test]
fn a_committed_variable_outlives_the_sigkill_of_its_namespaces_owner() {
    let mut c = Cluster::start("txkill", 3);
    let owner = owner_of(&c, "ledger");
    let home = (owner + 1) % 3;
    let other = (owner + 2) % 3;
    let mut holder = Client::connect(&c.socket(home));
    let m = tx(
        &mut holder,
        "ledger",
        &["assert set entry/1", "assert set entry/2 dup"],
    );
    ok(&m, "1,1");
    let before = fence(&m);
    c.signal(owner, Signal::SIGKILL);
    c.wait_exit(owner);
    let mut reader = Client::connect(&c.socket(other));
    let t0 = now();
    let seen = loop {
        reader.send(
            "TRANSACTION namespace=ledger;s1=exists entry/1;s2=set entry/1;s3=set entry/2 dup",
        );
        // Sent to the killed owner, it is given up when the epoch
        // changes, or after 4 s without an answer.
        let m = reader.recv_within(Duration::from_secs(15));
        if m.command == "TRANSACTIONOK" {
            break m;
        }
        assert_eq!(m.get_str("error"), Some("unavailable"), "{m}");
        assert!(t0.elapsed() < Duration::from_secs(40), "no answer but {m}");
        std::thread::sleep(Duration::from_millis(200));
    };
    ok(&seen, "1,0,1");
    assert!(
        fence(&seen) > before,
        "{seen}: fences grow across the failover"
    );
    // The holder still holds entry/1 alone.
    ok(
        &tx(&mut holder, "ledger", &["delete entry/1", "exists entry/2"]),
        "1,1",
    );
}
