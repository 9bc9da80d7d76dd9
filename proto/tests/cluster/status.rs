//! What an agent says of itself while nothing can be granted: `busy` only
//! for a holder, `unavailable` with the reason otherwise, answered at once
//! to `try=true`; `INFO ready`, `lock_delay`, `waiting_for` and
//! `LOCKSTATUS` tell the truth.

use std::time::Duration;

use crate::net::Net;

/// At once: well under a ping interval (250 ms) on this network.
const AT_ONCE: Duration = Duration::from_millis(20);

fn lock_delay(net: &mut Net, i: usize) -> f64 {
    let info = net.info(i);
    info.get_str("lock_delay")
        .unwrap_or_else(|| panic!("no lock_delay in {info}"))
        .parse()
        .unwrap()
}

fn lockstatus(net: &mut Net, i: usize) -> String {
    let c = net.open(i);
    net.send(c, "LOCKSTATUS");
    let got = net.wait_reply(c, AT_ONCE).expect("answered");
    net.close(c);
    got.command.to_string()
}

/// Six agents, two of the three leaders crashed, until the survivors'
/// new leaders run their lock-delay (four survive: one does not lead). Returns the net, a surviving
/// leader and a surviving agent that is not a leader.
fn five_in_a_lock_delay(seed: u64) -> (Net, usize, usize) {
    let mut net = Net::new(6, seed);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let leaders = net.leader_nodes(0);
    let victims = [leaders[0], leaders[1]];
    for v in victims {
        net.crash(v);
    }
    let survivors: Vec<usize> = (0..6).filter(|i| !victims.contains(i)).collect();
    // A new epoch on every survivor at once (the crashed links close at
    // once here); its state is installed some 2 s later (the collector
    // waits `peer_timeout` for reports that do not come), and then the
    // lock-delay of some 7.5 s runs.
    let before = net.info(survivors[0]).get_str("epoch").unwrap().to_owned();
    net.run_until(Duration::from_secs(10), |n| {
        survivors
            .iter()
            .all(|&i| n.info(i).get_str("epoch") != Some(before.as_str()))
    });
    net.run_for(Duration::from_secs(3));
    let new_leaders = net.leader_nodes(survivors[0]);
    let leader = *survivors
        .iter()
        .find(|i| new_leaders.contains(i))
        .expect("a surviving leader");
    let home = *survivors
        .iter()
        .find(|i| !new_leaders.contains(i))
        .expect("a surviving agent that does not lead");
    (net, leader, home)
}

#[test]
fn during_the_lock_delay_a_try_on_a_fresh_name_is_unavailable_at_once_not_busy() {
    let (mut net, leader, home) = five_in_a_lock_delay(21);
    for (k, i) in [leader, home].into_iter().enumerate() {
        let c = net.open(i);
        for n in 0..6 {
            net.send(c, &format!("LOCK object_name=never-held-{k}-{n};try=true"));
            let got = net.wait_reply(c, AT_ONCE).expect("answered at once");
            assert_eq!(got.command, "LOCKFAILED", "{got}");
            assert_eq!(got.get_str("error"), Some("unavailable"), "{got}");
            let why = got.get_str("description").unwrap();
            assert!(why.starts_with("lock-delay: "), "{got}");
        }
    }
}

#[test]
fn during_a_handover_a_try_is_unavailable_at_once_and_info_not_ready() {
    let mut net = Net::new(6, 28);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let leaders = net.leader_nodes(0);
    net.crash(leaders[0]);
    net.crash(leaders[1]);
    let home = (0..6).find(|i| !leaders.contains(i)).unwrap();
    let before = net.info(home).get_str("epoch").unwrap().to_owned();
    net.run_until(Duration::from_secs(3), |n| {
        n.info(home).get_str("epoch") != Some(before.as_str())
    });
    net.run_for(Duration::from_millis(500));
    // The new leaders wait for reports, or for the lock-delay of a state
    // that misses two of the three old leaders: nothing can be granted yet.
    let info = net.info(home);
    assert_eq!(info.get_str("ready"), Some("false"), "{info}");
    assert_eq!(lockstatus(&mut net, home), "NOLOCK");
    let c = net.open(home);
    net.send(c, "LOCK object_name=handover;try=true");
    let got = net.wait_reply(c, AT_ONCE).expect("answered at once");
    assert_eq!(got.get_str("error"), Some("unavailable"), "{got}");
    let why = got.get_str("description").unwrap();
    // The state may be installed already (every linked member reported at
    // once): then its lock-delay is why.
    assert!(
        why.starts_with("the leaders are changing: ") || why.starts_with("lock-delay: "),
        "{got}"
    );
}

#[test]
fn during_the_lock_delay_info_and_lockstatus_say_not_ready_and_how_long() {
    let (mut net, leader, home) = five_in_a_lock_delay(22);
    for i in [leader, home] {
        let info = net.info(i);
        assert_eq!(info.get_str("ready"), Some("false"), "node{i}: {info}");
        let left = lock_delay(&mut net, i);
        assert!(left > 1.0 && left < 8.0, "node{i}: {info}");
        assert_eq!(lockstatus(&mut net, i), "NOLOCK", "node{i}");
    }
    // Once it ends, both agree the name is free, and it is granted.
    net.run_until(Duration::from_secs(9), |n| {
        [leader, home]
            .iter()
            .all(|&i| n.info(i).get_str("ready") == Some("true"))
    });
    for i in [leader, home] {
        assert_eq!(lock_delay(&mut net, i), 0.0);
        assert_eq!(lockstatus(&mut net, i), "LOCKREADY");
        let c = net.open(i);
        net.send(c, &format!("LOCK object_name=after-{i};try=true"));
        let got = net.wait_reply(c, Duration::from_secs(1)).expect("answered");
        assert_eq!(got.command, "LOCKED", "{got}");
    }
}

#[test]
fn a_waiting_request_that_times_out_in_the_lock_delay_says_unavailable_and_why() {
    let (mut net, _, home) = five_in_a_lock_delay(23);
    let c = net.open(home);
    // A deadline one second ahead.
    let deadline = net.wall_secs() + 1.0;
    net.send(c, &format!("LOCK object_name=fresh;timeout={deadline:.3}"));
    let got = net
        .wait_reply(c, Duration::from_millis(1300))
        .expect("failed at its deadline");
    assert_eq!(got.get_str("error"), Some("unavailable"), "{got}");
    assert!(
        got.get_str("description").unwrap().contains("lock-delay: "),
        "{got}"
    );
}

#[test]
fn busy_still_means_a_holder_after_the_lock_delay() {
    let (mut net, leader, home) = five_in_a_lock_delay(24);
    net.run_until(Duration::from_secs(9), |n| {
        n.info(home).get_str("ready") == Some("true")
    });
    let a = net.open(leader);
    net.send(a, "LOCK object_name=taken");
    assert_eq!(
        net.wait_reply(a, Duration::from_secs(1)).unwrap().command,
        "LOCKED"
    );
    let b = net.open(home);
    net.send(b, "LOCK object_name=taken;try=true");
    let got = net.wait_reply(b, Duration::from_secs(1)).expect("answered");
    assert_eq!(got.get_str("error"), Some("busy"), "{got}");
}

#[test]
fn without_a_quorum_a_try_is_answered_unavailable_at_once() {
    let mut net = Net::new(5, 25);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    for i in 2..5 {
        net.crash(i);
    }
    // Three of five gone: once their silence is noticed, nothing can be
    // granted, and the two left say so at once.
    net.run_until(Duration::from_secs(8), |n| {
        n.info(0).get_str("ready") == Some("false") && n.info(1).get_str("ready") == Some("false")
    });
    // An owner acts for a `peer_timeout` after a quorum last answered it
    // (S8): until then a try on one of its names still goes to it.
    net.run_for(Duration::from_millis(2250));
    for i in 0..2 {
        assert_eq!(lockstatus(&mut net, i), "NOLOCK");
        let c = net.open(i);
        net.send(c, "LOCK object_name=q;try=true");
        let got = net.wait_reply(c, AT_ONCE).expect("answered at once");
        assert_eq!(got.get_str("error"), Some("unavailable"), "{got}");
        let why = got.get_str("description").unwrap();
        assert!(
            why.starts_with("no quorum: ") || why.starts_with("the leaders are changing: "),
            "{got}"
        );
    }
}

#[test]
fn a_fresh_cluster_of_three_with_two_up_says_whom_it_waits_for() {
    let mut net = Net::new(3, 26);
    net.crash(2);
    net.run_for(Duration::from_secs(3));
    for i in 0..2 {
        let info = net.info(i);
        assert_eq!(info.get_str("leaders"), Some(""), "{info}");
        assert_eq!(info.get_str("ready"), Some("false"), "{info}");
        assert_eq!(
            info.get_str("waiting_for"),
            Some("127.0.0.1:4002"),
            "{info}"
        );
        let c = net.open(i);
        net.send(c, "LOCK object_name=w;try=true");
        let got = net.wait_reply(c, AT_ONCE).expect("answered at once");
        assert_eq!(got.get_str("error"), Some("unavailable"), "{got}");
        let why = got.get_str("description").unwrap();
        assert!(
            why.starts_with("no leaders yet: the first election of a cluster of 3 needs every member connected; waiting for 127.0.0.1:4002"),
            "{got}"
        );
    }
    // The third comes: leaders are elected, and nothing is awaited.
    net.restart(2);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    assert_eq!(net.info(0).get_str("waiting_for"), None);
    // Past the first election, one agent that comes back alone waits for
    // a quorum, not for everybody, and says so.
    net.crash(1);
    net.crash(2);
    net.crash(0);
    net.restart(0);
    net.run_for(Duration::from_secs(3));
    let c = net.open(0);
    net.send(c, "LOCK object_name=w;try=true");
    let got = net.wait_reply(c, AT_ONCE).expect("answered at once");
    let why = got.get_str("description").unwrap();
    assert!(
        why.starts_with("no leaders yet: an election needs 2 members connected; waiting for one of 127.0.0.1:4001"),
        "{got}"
    );
}

#[test]
fn fences_strictly_grow_per_object_over_many_grants_on_several_names() {
    // What snaplock(7) promises in a cluster: per object. The names are
    // owned by different leaders, which draw their fences apart: a fence
    // may repeat on another name (and so is not larger than every fence
    // of every other name).
    let mut net = Net::new(3, 27);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let names: Vec<String> = (0..3).map(|owner| net.name_owned_by("f", owner)).collect();
    let clients: Vec<u64> = (0..3).map(|i| net.open(i)).collect();
    let mut last: Vec<u64> = vec![0; names.len()];
    for round in 0..40 {
        if round == 20 {
            // Across a failover too (node 2 back later as a follower).
            let before = net.info(0).get_str("epoch").unwrap().to_owned();
            net.crash(2);
            net.run_until(Duration::from_secs(20), |n| {
                n.info(0).get_str("epoch") != Some(before.as_str())
                    && n.info(0).get_str("ready") == Some("true")
                    && n.info(1).get_str("ready") == Some("true")
            });
        }
        for (k, name) in names.iter().enumerate() {
            let c = clients[(round + k) % 2];
            net.send(c, &format!("LOCK object_name={name};tag={round}"));
            let got = net
                .wait_reply(c, Duration::from_secs(2))
                .unwrap_or_else(|| panic!("{name} granted in round {round}"));
            assert_eq!(got.command, "LOCKED", "{got}");
            let fence: u64 = got.get_str("fence").unwrap().parse().unwrap();
            assert!(fence > last[k], "{name}: {fence} after {}", last[k]);
            last[k] = fence;
            net.send(c, &format!("UNLOCK object_name={name};tag={round}"));
            assert_eq!(
                net.wait_reply(c, Duration::from_secs(1)).unwrap().command,
                "UNLOCKED"
            );
        }
    }
}

#[test]
fn a_try_on_a_name_whose_owner_is_not_linked_is_answered_unavailable_at_once() {
    // The owner's link is down (here: it crashed); for a `peer_timeout`
    // it still counts as acting, but a request to it could not even be
    // sent: a try request is refused at once, not when its deadline or
    // that `peer_timeout` passes.
    let mut net = Net::new(3, 28);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let name = net.name_owned_by("gone-", 2);
    net.crash(2);
    for i in 0..2 {
        let c = net.open(i);
        net.send(c, &format!("LOCK object_name={name};try=true"));
        let got = net.wait_reply(c, AT_ONCE).expect("answered at once");
        assert_eq!(got.get_str("error"), Some("unavailable"), "{got}");
        let why = got.get_str("description").unwrap();
        assert!(why.starts_with("no link to node2, the owner"), "{got}");
    }
    // A name of a leader still linked is granted as ever.
    let name = net.name_owned_by("here-", 1);
    let c = net.open(0);
    net.send(c, &format!("LOCK object_name={name};try=true"));
    let got = net.wait_reply(c, AT_ONCE).expect("answered at once");
    assert_eq!(got.command, "LOCKED", "{got}");
}

#[test]
fn a_try_waiting_for_an_owner_whose_link_goes_down_fails_at_the_next_tick() {
    // The request reached its owner's link, but the owner is paused; then
    // the link goes down. The owner still counts as acting for a
    // `peer_timeout`, but no answer can come on that link: the home's
    // next tick (every `ping_interval`, 250 ms) fails the request.
    let mut net = Net::new(3, 29);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let name = net.name_owned_by("stuck-", 2);
    net.pause(2, true);
    let c = net.open(0);
    net.send(c, &format!("LOCK object_name={name};try=true"));
    assert!(
        net.wait_reply(c, Duration::from_millis(50)).is_none(),
        "sent to its owner, which does not run"
    );
    net.cut(0, 2);
    let got = net
        .wait_reply(c, Duration::from_millis(300))
        .expect("failed at the next tick");
    assert_eq!(got.get_str("error"), Some("unavailable"), "{got}");
    let why = got.get_str("description").unwrap();
    assert!(why.starts_with("no link to node2, the owner"), "{got}");
}
