//! What an agent says of its peers: `INFO peers=`, `snaplock-cli info`
//! and the peers' series of `snaplock-cli metrics`, read by Prometheus's
//! parser, while the links are up and once one member is killed.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::harness::Cluster;
use crate::prometheus::{parse_exposition, value};

/// `peers=` as (address, name, state, heard, rtt), one per member.
fn peers(info: &snaplock_proto::wire::Message) -> Vec<Vec<String>> {
    let list = info.get_str("peers").unwrap_or_else(|| panic!("{info}"));
    list.split(',')
        .map(|p| p.split('/').map(str::to_owned).collect())
        .collect()
}

#[test]
fn three_agents_report_each_peer_linked_with_a_round_trip_and_a_killed_one_down() {
    let mut c = Cluster::start("peers3", 3);
    // A few ping rounds (250 ms) for round trips to be measured.
    let info = c.wait_for(0, Duration::from_secs(10), |m| {
        m.get_str("peers")
            .is_some_and(|p| p.split(',').all(|x| !x.ends_with("/-")))
    });
    let seen = peers(&info);
    assert_eq!(seen.len(), 2, "{info}");
    for (p, i) in seen.iter().zip(1..) {
        assert_eq!(p[0], c.addr(i).to_string(), "{info}");
        assert_eq!(p[1], format!("node{i}"), "{info}");
        assert_eq!(p[2], "up", "{info}");
        let heard: f64 = p[3].parse().unwrap();
        assert!(heard < 2.0, "heard {heard} s ago: {info}");
        let rtt: f64 = p[4].parse().unwrap();
        assert!(rtt > 0.0 && rtt < 1.0, "round trip {rtt} s: {info}");
    }
    let out = c.cli(0, &["info"]);
    let line = format!("peer {}: name node1, link up, heard ", c.addr(1));
    assert!(out.contains(&line), "{out}");
    let s = parse_exposition(&c.cli(0, &["metrics"]));
    let addrs: Vec<String> = (0..3).map(|i| c.addr(i).to_string()).collect();
    let peer = |i: usize| format!("{{\"peer\": \"{}\"}}", addrs[i]);
    assert_eq!(value(&s, "snaplock_peer_up", &peer(1)), 1.0);
    assert_eq!(value(&s, "snaplock_peer_up", &peer(2)), 1.0);
    assert!(value(&s, "snaplock_peer_rtt_seconds", &peer(1)) > 0.0);
    // Three agents: all three are leaders.
    assert_eq!(value(&s, "snaplock_is_leader", "{}"), 1.0);
    let epoch: f64 = info.get_str("epoch").unwrap().parse().unwrap();
    assert_eq!(value(&s, "snaplock_epoch", "{}"), epoch);

    c.signal(2, Signal::SIGKILL);
    c.wait_exit(2);
    let info = c.wait_for(0, Duration::from_secs(10), |m| {
        m.get_str("peers").is_some_and(|p| p.contains("/down/"))
    });
    let gone = &peers(&info)[1];
    let expected = [c.addr(2).to_string(), "-".to_owned(), "down".to_owned()];
    assert_eq!(gone[..3], expected, "{info}");
    assert_ne!(gone[3], "-", "still says when it was last heard: {info}");
    assert_eq!(gone[4], "-", "{info}");
    let s = parse_exposition(&c.cli(0, &["metrics"]));
    assert_eq!(value(&s, "snaplock_peer_up", &peer(2)), 0.0);
    assert_eq!(value(&s, "snaplock_peer_up", &peer(1)), 1.0);
}
