//! A few cores on a perfect network: elections, grants across agents,
//! handoff, and failover. The deterministic simulator (tests/ crate) does
//! the faults; these are the plain cases, quick to read when one breaks.

mod net;

use net::Net;
use std::time::Duration;

#[test]
fn three_agents_elect_three_leaders_and_agree_on_the_epoch() {
    let mut net = Net::new(3, 1);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let infos: Vec<_> = (0..3).map(|i| net.info(i)).collect();
    for info in &infos {
        assert_eq!(info.get_str("ready"), Some("true"), "{info}");
        assert_eq!(info.get_str("epoch"), infos[0].get_str("epoch"));
        assert_eq!(info.get_str("leaders"), infos[0].get_str("leaders"));
        assert_eq!(info.get_str("connected"), Some("3"));
    }
    let leaders = infos[0].get_str("leaders").unwrap();
    assert_eq!(leaders.split(',').count(), 3, "{leaders}");
}

#[test]
fn a_lock_taken_on_one_agent_makes_another_agents_client_wait_until_unlock() {
    let mut net = Net::new(3, 2);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let a = net.open(0);
    let b = net.open(2);
    net.send(a, "LOCK object_name=x;duration=30;tag=1");
    let got = net.wait_reply(a, Duration::from_secs(1)).expect("granted");
    assert_eq!(got.command, "LOCKED", "{got}");
    let fence_a: u64 = got.get_str("fence").unwrap().parse().unwrap();
    net.send(b, "LOCK object_name=x;duration=30;timeout=1800000500;tag=2");
    assert!(
        net.wait_reply(b, Duration::from_secs(2)).is_none(),
        "b must wait while a holds x"
    );
    net.send(a, "UNLOCK object_name=x;tag=3");
    let got = net.wait_reply(a, Duration::from_secs(1)).expect("unlocked");
    assert_eq!(got.command, "UNLOCKED");
    let got = net
        .wait_reply(b, Duration::from_secs(1))
        .expect("handed over");
    assert_eq!(got.command, "LOCKED", "{got}");
    let fence_b: u64 = got.get_str("fence").unwrap().parse().unwrap();
    assert!(fence_b > fence_a, "{fence_b} > {fence_a}");
}

#[test]
fn closing_the_holders_connection_passes_the_lock_to_a_client_of_another_agent() {
    let mut net = Net::new(3, 3);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let a = net.open(1);
    let b = net.open(0);
    net.send(a, "LOCK object_name=y;duration=30");
    assert_eq!(
        net.wait_reply(a, Duration::from_secs(1)).unwrap().command,
        "LOCKED"
    );
    net.send(b, "LOCK object_name=y;duration=30;timeout=1800000500");
    assert!(net.wait_reply(b, Duration::from_secs(1)).is_none());
    net.close(a);
    let got = net
        .wait_reply(b, Duration::from_secs(1))
        .expect("handed over");
    assert_eq!(got.command, "LOCKED", "{got}");
}

#[test]
fn try_and_busy_come_back_from_the_owner_leader() {
    let mut net = Net::new(3, 4);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let a = net.open(0);
    let b = net.open(1);
    net.send(a, "LOCK object_name=z");
    assert_eq!(
        net.wait_reply(a, Duration::from_secs(1)).unwrap().command,
        "LOCKED"
    );
    net.send(b, "LOCK object_name=z;try=true");
    let got = net.wait_reply(b, Duration::from_secs(1)).expect("answered");
    assert_eq!(got.get_str("error"), Some("busy"), "{got}");
}

#[test]
fn a_killed_leader_is_replaced_and_held_locks_stay_exclusive() {
    let mut net = Net::new(3, 5);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let a = net.open(0);
    let b = net.open(1);
    net.send(a, "LOCK object_name=k;duration=60");
    let first = net.wait_reply(a, Duration::from_secs(1)).unwrap();
    assert_eq!(first.command, "LOCKED");
    net.send(b, "LOCK object_name=k;duration=60;timeout=1800000500");
    let epoch =
        |net: &mut Net, i| -> u64 { net.info(i).get_str("epoch").unwrap().parse().unwrap() };
    let before = epoch(&mut net, 0);
    net.crash(2);
    // b must not get k while a holds it, through the failover.
    assert!(net.wait_reply(b, Duration::from_secs(15)).is_none());
    let during = epoch(&mut net, 0);
    assert!(
        during > before,
        "a new epoch without node2: {during} > {before}"
    );
    assert_eq!(net.info(1).get_str("ready"), Some("true"));
    net.restart(2);
    net.run_until(Duration::from_secs(15), |n| n.all_ready());
    assert!(net.wait_reply(b, Duration::from_secs(2)).is_none());
    net.send(a, "UNLOCK object_name=k");
    assert_eq!(
        net.wait_reply(a, Duration::from_secs(2)).unwrap().command,
        "UNLOCKED"
    );
    let got = net.wait_reply(b, Duration::from_secs(3)).expect("b gets k");
    assert_eq!(got.command, "LOCKED", "{got}");
    let f1: u64 = first.get_str("fence").unwrap().parse().unwrap();
    let f2: u64 = got.get_str("fence").unwrap().parse().unwrap();
    assert!(f2 > f1);
}
