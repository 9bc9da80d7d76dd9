//! Real agents tell a waiting `LOCK …;progress=true` its place in the
//! owner's queue, whichever agent it came through, and why nothing can
//! be granted when nothing can; a `LOCKSTATUS` connection is told when
//! readiness changes.

use std::time::Duration;

use nix::sys::signal::Signal;
use snaplock_proto::wire::Message;

use crate::common::{Client, deadline_in, now, unix_now};
use crate::harness::Cluster;

/// Well within reach on loopback, however loaded the computer.
const SOON: Duration = Duration::from_secs(5);

fn waiting_at(got: &Message, position: &str) {
    assert_eq!(got.command, "LOCKWAITING", "{got}");
    assert_eq!(got.get_str("position"), Some(position), "{got}");
}

#[test]
fn waiters_on_two_agents_are_told_their_places_in_the_owners_queue() {
    let c = Cluster::start("prog3", 3);
    c.wait_converged(3, Duration::from_secs(30));
    let mut holder = Client::connect(&c.socket(0));
    let got = holder.request("LOCK object_name=queue;tag=0");
    assert_eq!(got.command, "LOCKED", "{got}");
    let lock = |tag: u32| {
        format!(
            "LOCK object_name=queue;progress=true;tag={tag};timeout={}",
            deadline_in(60.0)
        )
    };
    let mut a = Client::connect(&c.socket(1));
    a.send(&lock(1));
    waiting_at(&a.recv_within(SOON), "1");
    let mut b = Client::connect(&c.socket(2));
    b.send(&lock(2));
    let got = b.recv_within(SOON);
    waiting_at(&got, "2");
    assert_eq!(got.get_str("reason"), None, "{got}");
    // Not told again while its place stays (its LOCK is sent to the
    // owner again every second).
    a.assert_silent_for(Duration::from_millis(2500));
    holder.request("UNLOCK object_name=queue;tag=0");
    let got = a.recv_within(SOON);
    assert_eq!(got.command, "LOCKED", "{got}");
    waiting_at(&b.recv_within(SOON), "1");
    a.request("UNLOCK object_name=queue;tag=1");
    let got = b.recv_within(SOON);
    assert_eq!(got.command, "LOCKED", "{got}");
}

#[test]
fn a_lockstatus_connection_is_told_nolock_then_lockready_as_quorum_goes_and_comes() {
    let mut c = Cluster::start("ready3", 3);
    c.wait_converged(3, Duration::from_secs(30));
    let mut watcher = Client::connect(&c.socket(0));
    assert_eq!(watcher.request("LOCKSTATUS").command, "LOCKREADY");
    let quiet = Client::connect(&c.socket(0));
    for i in [1, 2] {
        c.signal(i, Signal::SIGKILL);
    }
    for i in [1, 2] {
        c.wait_exit(i);
    }
    // Contact lapses after `grace` (5 s by default).
    let got = watcher.recv_within(Duration::from_secs(15));
    assert_eq!(got.command, "NOLOCK", "{got}");
    assert_eq!(c.info(0).get_str("ready"), Some("false"));
    for i in [1, 2] {
        c.restart(i);
    }
    // A new epoch, its handover and lock-delay: each change told once,
    // so the answers alternate, ending with LOCKREADY.
    let start = now();
    let mut last = got.command;
    while last != "LOCKREADY" {
        assert!(start.elapsed() < Duration::from_secs(60), "{}", c.logs());
        let got = watcher.recv_within(Duration::from_secs(60));
        assert_ne!(got.command, last, "told twice");
        assert!(
            matches!(got.command.as_str(), "NOLOCK" | "LOCKREADY"),
            "{got}"
        );
        last = got.command;
    }
    assert_eq!(c.info(0).get_str("ready"), Some("true"));
    drop(quiet);
}

#[test]
fn a_waiter_after_two_leaders_are_killed_is_told_the_lock_delay_and_when_it_ends() {
    let mut c = Cluster::start("progdelay", 5);
    let leaders: Vec<usize> = c
        .info(0)
        .get_str("leaders")
        .unwrap()
        .split(',')
        .map(|n| n.trim_start_matches("node").parse().unwrap())
        .collect();
    for v in &leaders[..2] {
        c.signal(*v, Signal::SIGKILL);
    }
    for v in &leaders[..2] {
        c.wait_exit(*v);
    }
    let s = (0..5).find(|i| !leaders[..2].contains(i)).unwrap();
    c.wait_for(s, Duration::from_secs(20), |m| {
        m.get_str("lock_delay")
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(|d| d > 2.0)
    });
    let mut client = Client::connect(&c.socket(s));
    client.send(&format!(
        "LOCK object_name=after-the-delay;progress=true;timeout={}",
        deadline_in(40.0)
    ));
    let got = client.recv_within(SOON);
    waiting_at(&got, "1");
    assert_eq!(got.get_str("reason"), Some("lock-delay"), "{got}");
    let until: f64 = got.get_str("until").unwrap().parse().unwrap();
    assert!(until > unix_now() && until < unix_now() + 15.0, "{got}");
    let mut told = vec![got];
    let granted = loop {
        let got = client.recv_within(Duration::from_secs(20));
        if got.command != "LOCKWAITING" {
            break got;
        }
        told.push(got);
    };
    assert_eq!(granted.command, "LOCKED", "{granted} after {told:?}");
    assert!(
        unix_now() >= until - 0.5,
        "granted before the end it was told: {until}"
    );
    assert!(told.len() <= 4, "told on changes only: {told:?}");
}
