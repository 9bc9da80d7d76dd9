//! `LOCK …;progress=true` across agents: a waiter is told its place in
//! the owner's queue, whichever agent it is on, and why nothing can be
//! granted when nothing can; a `LOCKSTATUS` connection is told when the
//! agent's readiness changes.

use std::time::Duration;

use super::three_ready_and_a_name_node0_owns;
use crate::net::Net;
use snaplock_proto::wire::Message;

const AT_ONCE: Duration = Duration::from_millis(100);

fn position(m: &Message) -> u64 {
    assert_eq!(m.command, "LOCKWAITING", "{m}");
    m.get_str("position").unwrap().parse().unwrap()
}

#[test]
fn waiters_on_two_agents_are_told_their_places_in_the_owners_queue() {
    let (mut net, name) = three_ready_and_a_name_node0_owns(41);
    let holder = net.open(0);
    net.send(holder, &format!("LOCK object_name={name};tag=0"));
    let got = net.wait_reply(holder, AT_ONCE).expect("granted");
    assert_eq!(got.command, "LOCKED", "{got}");
    let wait = |tag: u32, progress: bool| {
        let p = if progress { ";progress=true" } else { "" };
        format!("LOCK object_name={name};timeout=1800000500;tag={tag}{p}")
    };
    let a = net.open(1);
    net.send(a, &wait(1, true));
    let got = net.wait_reply(a, AT_ONCE).expect("told");
    assert_eq!(position(&got), 1);
    assert_eq!(got.get_str("reason"), None, "{got}");
    let b = net.open(2);
    net.send(b, &wait(2, false));
    assert!(net.wait_reply(b, AT_ONCE).is_none(), "b did not ask");
    let c = net.open(2);
    net.send(c, &wait(3, true));
    let got = net.wait_reply(c, AT_ONCE).expect("told");
    assert_eq!((position(&got), got.get_str("tag")), (3, Some("3")));
    // a is not told again: its place did not change.
    assert!(net.wait_reply(a, AT_ONCE).is_none());
    let told = |net: &Net| net.count(1, "LOCKWAITING") + net.count(2, "LOCKWAITING");
    assert_eq!(told(&net), 2, "one peer message per place told");

    net.send(holder, &format!("UNLOCK object_name={name};tag=0"));
    let got = net.wait_reply(a, AT_ONCE).expect("granted");
    assert_eq!(got.command, "LOCKED", "{got}");
    assert_eq!(position(&net.wait_reply(c, AT_ONCE).expect("moved")), 2);
    net.send(a, &format!("UNLOCK object_name={name};tag=1"));
    net.run_for(AT_ONCE);
    assert_eq!(position(&net.wait_reply(c, AT_ONCE).expect("moved")), 1);
    // The requests sent again every second while they wait do not tell
    // the same place again.
    let before = told(&net);
    net.run_for(Duration::from_secs(3));
    assert_eq!(told(&net), before);
    assert!(net.wait_reply(c, AT_ONCE).is_none());
}

#[test]
fn a_waiter_on_the_owner_itself_is_told_its_place() {
    let (mut net, name) = three_ready_and_a_name_node0_owns(42);
    let holder = net.open(1);
    net.send(holder, &format!("LOCK object_name={name}"));
    assert_eq!(net.wait_reply(holder, AT_ONCE).unwrap().command, "LOCKED");
    let w = net.open(0);
    net.send(
        w,
        &format!("LOCK object_name={name};timeout=1800000500;progress=true"),
    );
    assert_eq!(position(&net.wait_reply(w, AT_ONCE).expect("told")), 1);
}

/// A link between a waiter's home and the owner goes down and comes back:
/// a place told while it was down was lost with it, so the owner tells
/// the places of that home's waiters again.
#[test]
fn a_waiter_is_told_its_place_again_when_its_homes_link_comes_back() {
    let (mut net, name) = three_ready_and_a_name_node0_owns(43);
    let holder = net.open(0);
    net.send(holder, &format!("LOCK object_name={name}"));
    assert_eq!(net.wait_reply(holder, AT_ONCE).unwrap().command, "LOCKED");
    let wait =
        |tag: u32| format!("LOCK object_name={name};timeout=1800000500;tag={tag};progress=true");
    let a = net.open(2);
    net.send(a, &wait(1));
    assert_eq!(position(&net.wait_reply(a, AT_ONCE).expect("told")), 1);
    let b = net.open(1);
    net.send(b, &wait(2));
    assert_eq!(position(&net.wait_reply(b, AT_ONCE).expect("told")), 2);

    // b's place changes while its home cannot hear it.
    net.cut(0, 1);
    net.close(a);
    net.run_for(AT_ONCE);
    assert!(net.wait_reply(b, AT_ONCE).is_none(), "lost with the link");
    net.join(0, 1);
    let got = net
        .wait_reply(b, Duration::from_secs(3))
        .expect("told again");
    assert_eq!((position(&got), got.get_str("tag")), (1, Some("2")));
    // Still the holder's; b is next.
    net.send(holder, &format!("UNLOCK object_name={name}"));
    assert_eq!(
        net.wait_reply(b, AT_ONCE).expect("granted").command,
        "LOCKED"
    );
}

#[test]
fn a_waiter_after_losing_two_leaders_is_told_the_lock_delay_and_its_end() {
    let mut net = Net::new(5, 7);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let leaders = net.leader_nodes(0);
    let victims = [leaders[0], leaders[1]];
    let survivor = (0..5).find(|i| !victims.contains(i)).unwrap();
    let c = net.open(survivor);
    for v in victims {
        net.crash(v);
    }
    net.send(c, "LOCK object_name=fresh;timeout=1800000500;progress=true");
    let mut seen = Vec::new();
    let granted = loop {
        let got = net
            .wait_reply(c, Duration::from_secs(20))
            .expect("told, then granted");
        if got.command != "LOCKWAITING" {
            break got;
        }
        seen.push(got);
    };
    assert_eq!(granted.command, "LOCKED", "{granted}");
    let delay = seen
        .iter()
        .find(|m| m.get_str("reason") == Some("lock-delay"))
        .unwrap_or_else(|| panic!("no lock-delay among {seen:?}"));
    let until: f64 = delay.get_str("until").unwrap().parse().unwrap();
    let granted_at: f64 = granted.get_str("timeout_date").unwrap().parse().unwrap();
    // Granted at the end of the delay it was told (the lease is 60 s).
    assert!(
        (granted_at - 60.0 - until).abs() < 1.0,
        "until {until}, granted {granted_at}"
    );
    println!("told while waiting: {seen:?}");
    // Told on changes only: a handful, not one per tick.
    assert!(seen.len() <= 5, "{seen:?}");
    assert!(seen.iter().all(|m| position(m) == 1), "{seen:?}");
}

#[test]
fn a_lockstatus_connection_is_told_nolock_then_lockready_as_quorum_goes_and_comes() {
    let mut net = Net::new(3, 43);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let c = net.open(0);
    net.send(c, "LOCKSTATUS");
    assert_eq!(net.wait_reply(c, AT_ONCE).unwrap().command, "LOCKREADY");
    net.crash(1);
    net.crash(2);
    let got = net.wait_reply(c, Duration::from_secs(5)).expect("told");
    assert_eq!(got.command, "NOLOCK");
    assert!(net.wait_reply(c, Duration::from_secs(2)).is_none(), "once");
    net.restart(1);
    net.restart(2);
    let got = net.wait_reply(c, Duration::from_secs(30)).expect("told");
    assert_eq!(got.command, "LOCKREADY");
    // A connection that never asked is told nothing.
    let quiet = net.open(0);
    net.crash(2);
    net.run_for(Duration::from_secs(5));
    assert!(net.wait_reply(quiet, AT_ONCE).is_none());
}
