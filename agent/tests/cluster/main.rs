//! Real `snaplockd` processes in a cluster on loopback, driven by real
//! clients: contention across agents, handoff, disconnect release, SIGKILL
//! and SIGSTOP of a leader, restart of a killed agent, 3 and 5 agents.
//!
//! Every wait is bounded; every process is stopped by pid when its test
//! ends (the `Cluster` guard), and its directory removed.

#[path = "../common/mod.rs"]
mod common;
mod harness;
mod metrics;
mod progress;
#[path = "../common/prometheus.rs"]
mod prometheus;
mod silence;
mod status;
mod transactions;
mod view;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Client, deadline_in, fence, now};
use harness::Cluster;
use nix::sys::signal::Signal;

#[test]
fn three_agents_elect_leaders_that_every_agent_and_the_cli_report() {
    let c = Cluster::start("info3", 3);
    let infos: Vec<_> = (0..3).map(|i| c.info(i)).collect();
    for info in &infos {
        assert_eq!(info.get_str("ready"), Some("true"), "{info}");
        assert_eq!(info.get_str("connected"), Some("3"), "{info}");
        assert_eq!(info.get_str("cluster_size"), Some("3"), "{info}");
        assert_eq!(info.get_str("quorum"), Some("2"), "{info}");
        assert_eq!(info.get_str("epoch"), infos[0].get_str("epoch"), "{info}");
        assert_eq!(
            info.get_str("leaders"),
            infos[0].get_str("leaders"),
            "{info}"
        );
    }
    let out = c.cli(0, &["info"]);
    assert!(out.contains("leaders") && out.contains("epoch"), "{out}");
    assert!(out.contains(infos[0].get_str("epoch").unwrap()), "{out}");
}

#[test]
fn clients_on_three_agents_never_hold_one_name_at_once_and_fences_grow() {
    let c = Cluster::start("contend", 3);
    let holds: Arc<Mutex<Vec<(Duration, Duration, u64)>>> = Arc::default();
    let t0 = now();
    let threads: Vec<_> = (0..3)
        .map(|i| {
            let socket = c.socket(i);
            let holds = holds.clone();
            std::thread::spawn(move || {
                let mut client = Client::connect(&socket);
                for n in 0..15 {
                    let line = format!(
                        "LOCK object_name=shared_name;duration=10;timeout={};tag={n}",
                        deadline_in(20.0)
                    );
                    client.send(&line);
                    let got = client.recv();
                    assert_eq!(got.command, "LOCKED", "{got}");
                    let start = t0.elapsed();
                    std::thread::sleep(Duration::from_millis(15));
                    let end = t0.elapsed();
                    holds.lock().unwrap().push((start, end, fence(&got)));
                    client.send(&format!("UNLOCK object_name=shared_name;tag={n}"));
                    assert_eq!(client.recv().command, "UNLOCKED");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread");
    }
    let mut holds = holds.lock().unwrap().clone();
    assert_eq!(holds.len(), 45);
    assert_one_at_a_time(&mut holds);
}

/// Holds (start, end, fence) never overlap, and their fences grow in the
/// order they started.
pub(crate) fn assert_one_at_a_time(holds: &mut [(Duration, Duration, u64)]) {
    holds.sort();
    for w in holds.windows(2) {
        assert!(
            w[0].1 <= w[1].0,
            "overlapping holds: {:?} and {:?}",
            w[0],
            w[1]
        );
        assert!(
            w[0].2 < w[1].2,
            "fences not increasing in grant order: {w:?}"
        );
    }
}

#[test]
fn a_lock_passes_to_another_agents_client_on_unlock_and_on_disconnect() {
    let c = Cluster::start("handoff", 3);
    let mut a = Client::connect(&c.socket(0));
    let mut b = Client::connect(&c.socket(1));
    let mut d = Client::connect(&c.socket(2));
    a.send("LOCK object_name=h;duration=30");
    let first = a.recv();
    assert_eq!(first.command, "LOCKED", "{first}");
    // b asks first, d once b's request is surely queued: bakery order.
    b.send(&format!(
        "LOCK object_name=h;duration=30;timeout={}",
        deadline_in(20.0)
    ));
    b.assert_silent_for(Duration::from_millis(500));
    d.send(&format!(
        "LOCK object_name=h;duration=30;timeout={}",
        deadline_in(20.0)
    ));
    d.assert_silent_for(Duration::from_millis(300));
    let start = now();
    a.send("UNLOCK object_name=h");
    assert_eq!(a.recv().command, "UNLOCKED");
    let second = b.recv();
    assert_eq!(second.command, "LOCKED", "{second}");
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "handoff took {:?}",
        start.elapsed()
    );
    assert!(fence(&second) > fence(&first));
    drop(b); // the holder's connection closes: its lock goes at once
    let third = d.recv();
    assert_eq!(third.command, "LOCKED", "{third}");
    assert!(fence(&third) > fence(&second));
}

#[test]
fn sigkill_of_a_leader_keeps_held_locks_exclusive_and_serves_waiters_after_re_election() {
    let mut c = Cluster::start("kill", 3);
    let before: u64 = c.info(0).get_str("epoch").unwrap().parse().unwrap();
    let mut holder = Client::connect(&c.socket(0));
    let mut waiter = Client::connect(&c.socket(1));
    holder.send("LOCK object_name=k;duration=60");
    let held = holder.recv();
    assert_eq!(held.command, "LOCKED", "{held}");
    waiter.send(&format!(
        "LOCK object_name=k;duration=60;timeout={}",
        deadline_in(40.0)
    ));
    c.signal(2, Signal::SIGKILL);
    c.wait_exit(2);
    // Through detection and re-election, the waiter must not get k.
    waiter.assert_silent_for(Duration::from_secs(8));
    let info = c.wait_ready(0, Duration::from_secs(20));
    let after: u64 = info.get_str("epoch").unwrap().parse().unwrap();
    assert!(after > before, "a new epoch: {after} > {before}");
    assert_eq!(info.get_str("connected"), Some("2"), "{info}");
    assert!(
        !info.get_str("leaders").unwrap().contains("node2"),
        "{info}"
    );
    holder.send("UNLOCK object_name=k");
    assert_eq!(holder.recv().command, "UNLOCKED");
    let got = waiter.recv();
    assert_eq!(got.command, "LOCKED", "{got}");
    assert!(fence(&got) > fence(&held));
    // The killed agent comes back and the cluster takes it in again.
    c.restart(2);
    // It comes back as a leader again: three leaders, one epoch everywhere.
    c.wait_converged(3, Duration::from_secs(30));
    let mut late = Client::connect(&c.socket(2));
    late.send(&format!("LOCK object_name=k;timeout={}", deadline_in(10.0)));
    late.assert_silent_for(Duration::from_secs(1));
    waiter.send("UNLOCK object_name=k");
    assert_eq!(waiter.recv().command, "UNLOCKED");
    assert_eq!(late.recv().command, "LOCKED");
}

#[test]
fn a_paused_leader_does_not_break_exclusion_and_the_cluster_recovers() {
    let c = Cluster::start("pause", 3);
    let mut holder = Client::connect(&c.socket(0));
    holder.send("LOCK object_name=p;duration=60");
    let held = holder.recv();
    assert_eq!(held.command, "LOCKED", "{held}");
    c.signal(2, Signal::SIGSTOP);
    let mut waiter = Client::connect(&c.socket(1));
    waiter.send(&format!("LOCK object_name=p;timeout={}", deadline_in(30.0)));
    waiter.assert_silent_for(Duration::from_secs(6));
    c.signal(2, Signal::SIGCONT);
    for i in 0..3 {
        c.wait_connected(i, 3, Duration::from_secs(20));
    }
    waiter.assert_silent_for(Duration::from_millis(500));
    holder.send("UNLOCK object_name=p");
    assert_eq!(holder.recv().command, "UNLOCKED");
    let got = waiter.recv();
    assert_eq!(got.command, "LOCKED", "{got}");
    assert!(fence(&got) > fence(&held));
}

#[test]
fn five_agents_survive_the_loss_of_two_leaders() {
    let mut c = Cluster::start("five", 5);
    let info = c.info(0);
    let leaders: Vec<String> = info
        .get_str("leaders")
        .unwrap()
        .split(',')
        .map(str::to_owned)
        .collect();
    assert_eq!(leaders.len(), 3, "{info}");
    // A holder on an agent that is not a leader, if there is one.
    let home = (0..5)
        .find(|i| !leaders.contains(&format!("node{i}")))
        .expect("two agents are not leaders");
    let mut holder = Client::connect(&c.socket(home));
    holder.send("LOCK object_name=f;duration=60");
    let held = holder.recv();
    assert_eq!(held.command, "LOCKED", "{held}");
    let victims: Vec<usize> = leaders[..2]
        .iter()
        .map(|n| n.trim_start_matches("node").parse().unwrap())
        .collect();
    for v in &victims {
        c.signal(*v, Signal::SIGKILL);
    }
    for v in &victims {
        c.wait_exit(*v);
    }
    let other = (0..5)
        .find(|i| *i != home && !victims.contains(i))
        .expect("a third survivor");
    let mut waiter = Client::connect(&c.socket(other));
    waiter.send(&format!("LOCK object_name=f;timeout={}", deadline_in(60.0)));
    // The majority of the old leaders is gone: the lock-delay runs, and
    // the held lock must stay exclusive through it.
    waiter.assert_silent_for(Duration::from_secs(15));
    holder.send("UNLOCK object_name=f");
    let got = holder.recv();
    assert_eq!(got.command, "UNLOCKED", "{got}");
    let got = waiter.recv_within(Duration::from_secs(30));
    assert_eq!(got.command, "LOCKED", "{got}");
    assert!(fence(&got) > fence(&held));
}

#[test]
fn thousands_of_held_locks_survive_the_sigkill_of_a_leader() {
    // Enough tickets that the handover goes in several LOCKTICKETS batches
    // over real links.
    const N: usize = 5000;
    let mut c = Cluster::start("many", 3);
    let up = now();
    let before: u64 = c.info(0).get_str("epoch").unwrap().parse().unwrap();
    let mut holder = Client::connect(&c.socket(0));
    let mut top = 0;
    for chunk in 0..N / 500 {
        for k in chunk * 500..(chunk + 1) * 500 {
            holder.send(&format!("LOCK object_name=many-{k};duration=600;tag={k}"));
        }
        for _ in 0..500 {
            let got = holder.recv();
            assert_eq!(got.command, "LOCKED", "{got}");
            top = top.max(fence(&got));
        }
    }
    // Agents up for less than the lock-delay (some 7.5 s) do not vouch
    // for the new epoch's state (docs/cluster.md): the handover is
    // complete, and the next grant immediate, once they have been up that
    // long.
    std::thread::sleep(Duration::from_secs(8).saturating_sub(up.elapsed()));
    c.signal(2, Signal::SIGKILL);
    c.wait_exit(2);
    let start = now();
    let info = loop {
        let info = c.wait_ready(1, Duration::from_secs(30));
        let epoch: u64 = info.get_str("epoch").unwrap().parse().unwrap();
        if epoch > before {
            break info;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no new epoch: {info}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        !info.get_str("leaders").unwrap().contains("node2"),
        "{info}"
    );
    // The holder was told of no loss, and every name is still taken.
    holder.assert_silent_for(Duration::from_secs(1));
    let mut other = Client::connect(&c.socket(1));
    for k in (0..N).step_by(250) {
        let got = other.request(&format!("LOCK object_name=many-{k};try=true"));
        assert_eq!(got.get_str("error"), Some("busy"), "many-{k}: {got}");
    }
    let got = other.request("LOCK object_name=after-the-failover");
    assert_eq!(got.command, "LOCKED", "{got}");
    assert!(fence(&got) > top, "{} > {top}", fence(&got));
}

#[test]
fn every_agent_keeps_a_record_and_a_cluster_killed_whole_starts_above_it() {
    let mut c = Cluster::start("record", 3);
    let mut client = Client::connect(&c.socket(1));
    let lock = format!(
        "LOCK object_name=rec;duration=10;timeout={}",
        deadline_in(20.0)
    );
    client.send(&lock);
    let first = fence(&client.recv());
    let epoch: u64 = c.info(0).get_str("epoch").unwrap().parse().unwrap();
    drop(client);
    let records: Vec<String> = (0..3)
        .map(|i| std::fs::read_to_string(c.dir.path().join(format!("node{i}.state"))).unwrap())
        .collect();
    for r in &records {
        assert!(r.starts_with("snaplock-state 1\n"), "{r}");
        assert!(r.contains(&format!("epoch={epoch}\n")), "{r}");
    }
    for i in 0..3 {
        c.signal(i, Signal::SIGKILL);
        c.wait_exit(i);
    }
    for i in 0..3 {
        c.restart(i);
    }
    for i in 0..3 {
        c.wait_ready(i, Duration::from_secs(30));
    }
    let mut client = Client::connect(&c.socket(2));
    client.send(&lock);
    let second = fence(&client.recv());
    assert!(second > first, "{second} > {first}");
    let logs = c.logs();
    assert!(logs.contains("starting above epoch"), "{logs}");
}
