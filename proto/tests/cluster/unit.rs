//! A lock owned by a cgroup (`owner=cgroup`) in a cluster: its home keeps
//! it after its connection closes, exactly as a detached lock, until its
//! shell reports the cgroup empty.

use super::three_ready_and_a_name_node0_owns;
use std::time::Duration;

#[test]
fn the_home_keeps_a_lock_its_cgroup_owns_after_the_connection_and_releases_it_when_the_cgroup_empties()
 {
    let (mut net, name) = three_ready_and_a_name_node0_owns(41);
    // Its home is not the owner: the release must travel.
    let holder = net.open_in_cgroup(1, 9);
    net.send(
        holder,
        &format!("LOCK object_name={name};pid=5;owner=cgroup;tag=1"),
    );
    let got = net
        .wait_reply(holder, Duration::from_secs(1))
        .expect("granted");
    assert_eq!(got.command, "LOCKED", "{got}");
    assert!(net.watched.contains(&(1, 9)), "{:?}", net.watched);
    net.close(holder);
    net.run_for(Duration::from_secs(3));
    assert!(net.watched.contains(&(1, 9)), "still watched");
    let other = net.open(2);
    net.send(other, &format!("LOCK object_name={name};try=true;tag=2"));
    let got = net
        .wait_reply(other, Duration::from_secs(1))
        .expect("answered");
    assert_eq!(
        (got.command.as_str(), got.get_str("error")),
        ("LOCKFAILED", Some("busy")),
        "held by its cgroup after its connection closed: {got}"
    );
    net.send(
        other,
        &format!("LOCK object_name={name};timeout=1800000100;tag=3"),
    );
    net.run_for(Duration::from_millis(500));
    net.unit_empty(1, 9);
    assert!(net.watched.is_empty(), "{:?}", net.watched);
    let got = net
        .wait_reply(other, Duration::from_secs(1))
        .expect("granted");
    assert_eq!(
        got.command, "LOCKED",
        "the waiter on another agent is next: {got}"
    );
}

#[test]
fn a_late_report_of_an_empty_cgroup_changes_nothing_in_the_cluster() {
    let (mut net, name) = three_ready_and_a_name_node0_owns(42);
    let holder = net.open_in_cgroup(1, 9);
    net.send(
        holder,
        &format!("LOCK object_name={name};owner=cgroup;tag=1"),
    );
    let got = net
        .wait_reply(holder, Duration::from_secs(1))
        .expect("granted");
    assert_eq!(got.command, "LOCKED", "{got}");
    net.send(holder, &format!("UNLOCK object_name={name};tag=2"));
    let got = net
        .wait_reply(holder, Duration::from_secs(1))
        .expect("answered");
    assert_eq!(got.command, "UNLOCKED", "{got}");
    assert!(net.watched.is_empty(), "unwatched with its last lock");
    net.unit_empty(1, 9);
    let again = net.open_in_cgroup(1, 9);
    net.send(
        again,
        &format!("LOCK object_name={name};owner=cgroup;tag=3"),
    );
    let got = net
        .wait_reply(again, Duration::from_secs(1))
        .expect("granted");
    assert_eq!(got.command, "LOCKED", "{got}");
}
