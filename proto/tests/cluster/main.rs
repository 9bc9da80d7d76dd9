//! A few cores on a perfect network: elections, grants across agents,
//! handoff, and failover. The deterministic simulator (tests/ crate) does
//! the faults; these are the plain cases, quick to read when one breaks.

mod home_drop;
mod net;
mod progress;
mod regain;
mod status;
mod tx;
mod unit;
mod view;
mod waiters;

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
fn a_grant_involves_only_the_followers_a_majority_needs() {
    let mut net = Net::new(3, 11);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let c = net.open(0);
    let before: usize = (0..3).map(|i| net.count(i, "ADDTICKET")).sum();
    let locks = 30;
    for k in 0..locks {
        lock_and_unlock(&mut net, c, &format!("n{k}"), k);
    }
    net.run_for(Duration::from_millis(100));
    let adds: usize = (0..3).map(|i| net.count(i, "ADDTICKET")).sum::<usize>() - before;
    let drops: usize = (0..3).map(|i| net.count(i, "DROPTICKET")).sum();
    // One follower of two per grant: one ADDTICKET each (asking both
    // followers sent two). The home, a leader, is the follower asked
    // when another leader owns the name, and drops its own vote as it
    // releases: a DROPTICKET only for the names the home owns.
    let own = (0..locks)
        .filter(|k| net.owner_of(0, &format!("n{k}")) == 0)
        .count();
    assert!(
        0 < own && own < locks,
        "{own} of {locks} names owned by the home"
    );
    assert_eq!(adds, locks, "ADDTICKETs for {locks} grants");
    assert_eq!(
        drops, own,
        "DROPTICKETs for {own} releases of the home's own names"
    );
}

/// Three ready cores, and a name whose owner is node 0.
/// Client `c` locks `name` and unlocks it, each answered within a second.
pub(crate) fn lock_and_unlock(net: &mut Net, c: u64, name: &str, tag: usize) {
    net.send(c, &format!("LOCK object_name={name};duration=30;tag={tag}"));
    let got = net.wait_reply(c, Duration::from_secs(1)).expect("granted");
    assert_eq!(got.command, "LOCKED", "{got}");
    net.send(c, &format!("UNLOCK object_name={name};tag={tag}"));
    let got = net.wait_reply(c, Duration::from_secs(1)).expect("unlocked");
    assert_eq!(got.command, "UNLOCKED", "{got}");
}

pub(crate) fn three_ready_and_a_name_node0_owns(seed: u64) -> (Net, String) {
    let mut net = Net::new(3, seed);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let name = net.name_owned_by("n", 0);
    (net, name)
}

/// A home that is a leader, asked by the owner for its vote on its own
/// request, holds the majority with it (the owner's and its own): it
/// delivers the grant at once, and the owner sends no `LOCKED`; it drops
/// that vote as it releases, and the owner sends no `DROPTICKET`. A grant
/// of a name whose owner is another leader takes four peer messages
/// (docs/cluster.md "Granting", the home's own vote).
#[test]
fn a_home_that_leads_grants_on_its_own_vote() {
    let (mut net, name) = three_ready_and_a_name_node0_owns(14);
    assert_eq!(net.leader_nodes(0).len(), 3);
    let home = 1; // a leader, not the owner
    let before = waiters::counts(&net);
    let c = net.open(home);
    for k in 0..5 {
        lock_and_unlock(&mut net, c, &name, k);
        net.run_for(Duration::from_millis(20));
    }
    let after = waiters::counts(&net);
    let per: Vec<usize> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    // Each grant: LOCK, the ticket with its vote (one line, counted as
    // the ADDTICKET and the ACTIVATELOCK it carries), LOCKACTIVATED,
    // UNLOCK; no LOCKED, no DROPTICKET.
    assert_eq!(per, [5, 5, 5, 5, 0, 5, 0], "{:?}", waiters::GRANT_MESSAGES);
}

#[test]
fn a_follower_that_does_not_answer_is_passed_over_within_a_ping_interval() {
    // A name that node 0 owns: its first follower is the next leader.
    let (mut net, name) = three_ready_and_a_name_node0_owns(12);
    let order = net.leader_nodes(0);
    let at = order.iter().position(|&x| x == 0).unwrap();
    let first = order[(at + 1) % order.len()];
    let other = order[(at + 2) % order.len()];
    net.pause(first, true);
    let c = net.open(0);
    net.send(c, &format!("LOCK object_name={name};duration=30;tag=1"));
    // ping_interval is 250 ms: the other follower is asked within two.
    let got = net
        .wait_reply(c, Duration::from_millis(600))
        .expect("granted while the first follower is paused");
    assert_eq!(got.command, "LOCKED", "{got}");
    assert_eq!(net.count(other, "ACTIVATELOCK"), 1);
    net.pause(first, false);
    net.send(c, &format!("UNLOCK object_name={name};tag=2"));
    assert_eq!(
        net.wait_reply(c, Duration::from_secs(1)).unwrap().command,
        "UNLOCKED"
    );
}

#[test]
fn a_question_that_got_lost_is_asked_again() {
    let (mut net, name) = three_ready_and_a_name_node0_owns(13);
    let epoch = net.info(0).get_str("epoch").unwrap().to_owned();
    // The owner's question to its first follower, and then the one to the
    // other, are lost (a link that broke and came back at once): only
    // asking again those that did not answer grants.
    net.lose(0, "ACTIVATELOCK", 2);
    let c = net.open(0);
    net.send(c, &format!("LOCK object_name={name};duration=30;tag=1"));
    let got = net
        .wait_reply(c, Duration::from_millis(1500))
        .expect("granted once asked again");
    assert_eq!(got.command, "LOCKED", "{got}");
    assert_eq!(net.info(0).get_str("epoch"), Some(epoch.as_str()));
    assert!(net.count(1, "ACTIVATELOCK") + net.count(2, "ACTIVATELOCK") >= 1);
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
fn a_close_that_releases_hundreds_of_locks_its_agent_owns_frees_them_all() {
    // The closing client's agent owns every name: its 300 UNLOCKs go to
    // itself in one input, more than it handles in one call (the rest in
    // the calls after, without waiting for other input).
    let mut net = Net::new(3, 12);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let names: Vec<String> = (0..2000)
        .map(|k| format!("own-{k}"))
        .filter(|name| net.owner_of(0, name) == 0)
        .take(300)
        .collect();
    assert_eq!(names.len(), 300);
    let a = net.open(0);
    for (k, name) in names.iter().enumerate() {
        net.send(a, &format!("LOCK object_name={name};duration=600;tag={k}"));
        let got = net.wait_reply(a, Duration::from_secs(1)).expect("granted");
        assert_eq!(got.command, "LOCKED", "{got}");
    }
    let b = net.open(1);
    for (k, name) in names.iter().enumerate() {
        net.send(
            b,
            &format!("LOCK object_name={name};duration=60;timeout=1800000500;tag={k}"),
        );
    }
    assert!(net.wait_reply(b, Duration::from_millis(300)).is_none());
    net.close(a);
    let mut granted = std::collections::BTreeSet::new();
    for _ in 0..names.len() {
        let got = net.wait_reply(b, Duration::from_secs(1)).expect("moved on");
        assert_eq!(got.command, "LOCKED", "{got}");
        granted.insert(got.get_str("object_name").unwrap().to_owned());
    }
    assert_eq!(granted.len(), names.len());
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

/// The reply to one `LOCK` line sent by client `c`: `LOCKED` or the
/// `error=` of `LOCKFAILED`.
fn lock_outcome(net: &mut Net, c: u64, line: &str) -> String {
    net.send(c, line);
    let got = net.wait_reply(c, Duration::from_secs(2)).expect("answered");
    match got.command.as_str() {
        "LOCKED" => "LOCKED".to_owned(),
        _ => got.get_str("error").unwrap_or("?").to_owned(),
    }
}

#[test]
fn counted_locks_follow_each_requests_own_view_across_agents_and_a_failover() {
    let mut net = Net::new(3, 21);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    // Clients on nodes 0 and 1; node 2, a leader, fails later.
    let c: Vec<u64> = (0..8).map(|i| net.open(i % 2)).collect();
    let at = |limit: u32| format!("LOCK object_name=db;mode=counted;limit={limit};try=true");
    // canal's sequence: three at 3, full at 3, a fourth at 6, full at 3.
    for &client in &c[..3] {
        assert_eq!(lock_outcome(&mut net, client, &at(3)), "LOCKED");
    }
    assert_eq!(lock_outcome(&mut net, c[4], &at(3)), "busy");
    assert_eq!(lock_outcome(&mut net, c[3], &at(6)), "LOCKED");
    assert_eq!(lock_outcome(&mut net, c[4], &at(3)), "busy");
    // The four holders cross a failover, their kind with them: still full
    // at 3, and at 6 there is room for two more, not three.
    net.crash(2);
    net.run_until(Duration::from_secs(20), |n| {
        n.info(0)
            .get_str("leaders")
            .is_some_and(|l| l.split(',').count() == 2)
            && n.info(0).get_str("ready") == Some("true")
    });
    // Past any lock-delay.
    net.run_for(Duration::from_secs(10));
    assert_eq!(lock_outcome(&mut net, c[4], &at(3)), "busy");
    assert_eq!(lock_outcome(&mut net, c[4], &at(6)), "LOCKED");
    assert_eq!(lock_outcome(&mut net, c[5], &at(6)), "LOCKED");
    assert_eq!(lock_outcome(&mut net, c[6], &at(6)), "busy");
    // A shared holder's limit binds counted requests: after two leave, a
    // shared request at 5 joins the four left, and then a counted one at
    // 9 finds no room.
    for &client in &c[4..6] {
        net.send(client, "UNLOCK object_name=db");
        assert!(net.wait_reply(client, Duration::from_secs(2)).is_some());
    }
    // The owner hears of the releases after the holders' agents answered.
    net.run_for(Duration::from_millis(500));
    let shared = "LOCK object_name=db;mode=shared;limit=5;try=true";
    assert_eq!(lock_outcome(&mut net, c[6], shared), "LOCKED");
    assert_eq!(lock_outcome(&mut net, c[7], &at(9)), "busy");
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
    let got = net.wait_reply(b, Duration::from_secs(15));
    let ga = net.wait_reply(a, Duration::from_millis(1));
    assert!(got.is_none(), "{got:?} {ga:?}");
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

#[test]
fn an_agent_cut_off_from_the_leaders_revokes_its_holders_and_the_lock_moves_on() {
    let mut net = Net::new(5, 6);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let leaders = net.info(0).get_str("leaders").unwrap().to_owned();
    let home = (0..5)
        .find(|i| !leaders.contains(&format!("node{i}")))
        .expect("a non-leader");
    let other = (0..5).find(|i| *i != home).unwrap();
    let a = net.open(home);
    net.send(a, "LOCK object_name=r;duration=600");
    let held = net.wait_reply(a, Duration::from_secs(1)).unwrap();
    assert_eq!(held.command, "LOCKED");
    net.send(a, "ALIVE serial=1");
    let alive = net.wait_reply(a, Duration::from_secs(1)).unwrap();
    let vouched: f64 = alive.get_str("valid_for").unwrap().parse().unwrap();
    assert!(vouched > 4.0 && vouched <= 5.0, "{alive}");
    let b = net.open(other);
    net.send(b, "LOCK object_name=r;duration=60;timeout=1800000500");
    for j in 0..5 {
        if j != home {
            net.cut(home, j);
        }
    }
    // The holder hears it lost the lock, within the grace (5 s)...
    let lost = net.wait_reply(a, Duration::from_secs(6)).expect("revoked");
    assert_eq!(lost.command, "UNLOCKED", "{lost}");
    assert_eq!(lost.get_str("error"), Some("lost"));
    // ...and only after that may another agent's client get the object.
    let got = net
        .wait_reply(b, Duration::from_secs(10))
        .expect("moved on");
    assert_eq!(got.command, "LOCKED", "{got}");
    // Healed, the cut-off agent serves its clients again.
    for j in 0..5 {
        if j != home {
            net.join(home, j);
        }
    }
    net.run_until(Duration::from_secs(10), |n| n.all_ready());
    net.send(a, "LOCK object_name=r2");
    let again = net
        .wait_reply(a, Duration::from_secs(2))
        .expect("served again");
    assert_eq!(again.command, "LOCKED", "{again}");
}

#[test]
fn losing_two_of_three_leaders_of_five_waits_the_lock_delay_before_any_grant() {
    let mut net = Net::new(5, 7);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let leaders = net.info(0).get_str("leaders").unwrap().to_owned();
    let victims: Vec<usize> = (0..5)
        .filter(|i| leaders.contains(&format!("node{i}")))
        .take(2)
        .collect();
    let survivor = (0..5).find(|i| !victims.contains(i)).unwrap();
    let c = net.open(survivor);
    for v in &victims {
        net.crash(*v);
    }
    net.send(c, "LOCK object_name=fresh;timeout=1800000500");
    // Nobody can know what the two lost leaders granted last: nothing is
    // granted before the lock-delay (about 7.5 s with the defaults), which
    // starts when the new epoch's state is built, after the crash.
    let early = net.wait_reply(c, Duration::from_millis(7500));
    assert!(early.is_none(), "{early:?} at {}", net.wall_secs());
    let got = net
        .wait_reply(c, Duration::from_secs(10))
        .expect("granted after the delay");
    assert_eq!(got.command, "LOCKED", "{got}");
}

/// A client of node `i` that takes `held-0` .. `held-{n-1}` for ten
/// minutes, and the fences it got.
fn hold_many(net: &mut Net, i: usize, n: usize) -> (u64, Vec<u64>) {
    let a = net.open(i);
    for k in 0..n {
        net.send(
            a,
            &format!("LOCK object_name=held-{k};duration=600;tag={k}"),
        );
    }
    let mut fences = Vec::new();
    for _ in 0..n {
        let got = net.wait_reply(a, Duration::from_secs(5)).expect("granted");
        assert_eq!(got.command, "LOCKED", "{got}");
        fences.push(got.get_str("fence").unwrap().parse::<u64>().unwrap());
    }
    (a, fences)
}

#[test]
fn thousands_of_held_locks_cross_a_failover_in_batches_and_stay_held() {
    // More tickets than one LOCKTICKETS line carries: the reports and the
    // state of the new epoch go in several batches.
    const N: usize = 3000;
    let mut net = Net::new(3, 6);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let (a, fences) = hold_many(&mut net, 0, N);
    let epoch =
        |net: &mut Net, i| -> u64 { net.info(i).get_str("epoch").unwrap().parse().unwrap() };
    let before = epoch(&mut net, 0);
    // Agents up for less than the lock-delay do not vouch for the state
    // (docs/cluster.md): wait that long, so the handover is complete.
    net.run_for(Duration::from_secs(8));
    net.crash(2);
    net.run_until(Duration::from_secs(20), |n| {
        epoch(n, 1) > before && n.info(1).get_str("ready") == Some("true")
    });
    // The holder lost nothing, and every name is still taken for the
    // clients of another agent.
    let b = net.open(1);
    for k in (0..N).step_by(97) {
        net.send(b, &format!("LOCK object_name=held-{k};try=true;tag={k}"));
        let got = net.wait_reply(b, Duration::from_secs(5)).expect("answered");
        assert_eq!(got.get_str("error"), Some("busy"), "held-{k}: {got}");
    }
    assert!(
        net.wait_reply(a, Duration::from_secs(1)).is_none(),
        "nothing revoked"
    );
    // The new epoch grants, with fences above those of the old one.
    net.send(b, "LOCK object_name=fresh;tag=1");
    let got = net.wait_reply(b, Duration::from_secs(5)).expect("granted");
    assert_eq!(got.command, "LOCKED", "{got}");
    let fence: u64 = got.get_str("fence").unwrap().parse().unwrap();
    assert!(fence > *fences.iter().max().unwrap());
}

#[test]
fn a_report_written_in_steps_keeps_what_is_held_and_not_what_is_let_go_meanwhile() {
    // Reports of 50 tickets a call: the home's report of 3000 held locks
    // (its leader table's part, then its own) takes more than a hundred
    // calls, and its client lets a tenth of them go in between.
    const N: usize = 3000;
    let mut net = Net::with_report_step(3, 6, 50);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let (a, fences) = hold_many(&mut net, 0, N);
    let before = epoch_of(&mut net, 0);
    net.run_for(Duration::from_secs(8));
    net.crash(2);
    net.run_until(Duration::from_secs(20), |n| epoch_of(n, 0) > before);
    assert!(epoch_of(&mut net, 0) > before, "node0 moved");
    net.run_for(Duration::from_millis(20));
    assert!(net.has_work_now(0), "the report is written in steps");
    for k in (0..N).step_by(10) {
        net.send(a, &format!("UNLOCK object_name=held-{k};tag={k}"));
    }
    for _ in (0..N).step_by(10) {
        let got = net
            .wait_reply(a, Duration::from_secs(20))
            .expect("answered");
        assert_eq!(got.command, "UNLOCKED", "{got}");
        assert_eq!(got.get_str("error"), None, "{got}");
    }
    net.run_until(Duration::from_secs(20), |n| {
        n.info(1).get_str("ready") == Some("true")
    });
    net.run_for(Duration::from_secs(1));
    // What was let go is free at once; the rest is still held.
    let b = net.open(1);
    for k in (0..N).step_by(5) {
        net.send(b, &format!("LOCK object_name=held-{k};try=true;tag={k}"));
        let got = net.wait_reply(b, Duration::from_secs(5)).expect("answered");
        if k % 10 == 0 {
            assert_eq!(got.command, "LOCKED", "held-{k}: {got}");
        } else {
            assert_eq!(got.get_str("error"), Some("busy"), "held-{k}: {got}");
        }
    }
    assert!(
        net.wait_reply(a, Duration::from_secs(1)).is_none(),
        "nothing revoked"
    );
    let fence = fence_of_a_grant(&mut net, 1, "fresh");
    assert!(fence > *fences.iter().max().unwrap());
}

/// Takes `object` on node `i` (waiting up to a minute), releases it, and
/// returns its fence.
fn fence_of_a_grant(net: &mut Net, i: usize, object: &str) -> u64 {
    let c = net.open(i);
    let deadline = net.wall_ms(i) / 1000 + 60;
    net.send(
        c,
        &format!("LOCK object_name={object};duration=30;timeout={deadline}"),
    );
    let got = net
        .wait_reply(c, Duration::from_secs(60))
        .expect("answered");
    assert_eq!(got.command, "LOCKED", "{got}");
    net.send(c, &format!("UNLOCK object_name={object}"));
    let done = net.wait_reply(c, Duration::from_secs(2)).expect("unlocked");
    assert_eq!(done.command, "UNLOCKED", "{done}");
    net.close(c);
    got.get_str("fence").unwrap().parse().unwrap()
}

fn epoch_of(net: &mut Net, i: usize) -> u64 {
    net.info(i).get_str("epoch").unwrap().parse().unwrap()
}

#[test]
fn a_forged_epoch_at_the_end_of_u64_is_refused_and_fences_stay_sane() {
    let mut net = Net::new(3, 21);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let before = fence_of_a_grant(&mut net, 0, "f");
    let epoch = epoch_of(&mut net, 0);
    let leaders = net.info(0).get_str("leaders").unwrap().to_owned();
    let leader0 = leaders.split(',').next().unwrap().to_owned();
    let max = u64::MAX;
    for to in 0..3 {
        let from = (to + 1) % 3;
        net.inject(
            to,
            from,
            &format!("LOCKLEADERS epoch={max};leader0={leader0}"),
        );
        net.inject(
            to,
            from,
            &format!("LOCKPONG active=0;epoch={max};serial=1;view=0;wall={max}"),
        );
        net.inject(
            to,
            from,
            &format!("LOCKLEADERS epoch={};leader0={leader0}", max >> 20),
        );
    }
    net.run_for(Duration::from_secs(3));
    for i in 0..3 {
        assert_eq!(
            epoch_of(&mut net, i),
            epoch,
            "node{i} adopted a forged epoch"
        );
    }
    let after = fence_of_a_grant(&mut net, 1, "f");
    assert!(after > before, "{after} > {before}");
    let sane = (net.wall_ms(0) + 1000) << 20;
    assert!(after < sane, "fence {after} is ahead of the clock");
    // Nothing of the forged epoch was kept for the next election either.
    net.crash(2);
    net.run_until(Duration::from_secs(20), |n| {
        n.all_ready() && epoch_of(n, 0) > epoch
    });
    let next = epoch_of(&mut net, 0);
    assert!(
        next < net.wall_ms(0) + 1000,
        "epoch {next} is ahead of the clock"
    );
    let last = fence_of_a_grant(&mut net, 0, "f");
    assert!(
        last > after && last < (net.wall_ms(0) + 1000) << 20,
        "{last}"
    );
}

#[test]
fn a_conductor_six_days_ahead_is_still_followed() {
    let six_days = 6 * 86_400_000;
    let mut net = Net::with_skew(3, 23, vec![six_days, 0, 0]);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let epoch = epoch_of(&mut net, 2);
    assert!(epoch >= net.wall_ms(0) - 1000, "node0 conducted: {epoch}");
    let fence = fence_of_a_grant(&mut net, 2, "s");
    assert!(fence >= epoch << 20);
}

/// Every agent crashes; the computers' clocks are set back an hour; the
/// agents restart from their records.
fn fences_across_a_restart_with_clocks_set_back(net: &mut Net) -> (u64, u64) {
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let first = fence_of_a_grant(net, 0, "r");
    for i in 0..3 {
        net.crash(i);
    }
    for i in 0..3 {
        net.skew_ms[i] = -3_600_000;
    }
    for i in 0..3 {
        net.restart(i);
    }
    net.run_until(Duration::from_secs(30), |n| n.all_ready());
    (first, fence_of_a_grant(net, 1, "r"))
}

#[test]
fn fences_keep_growing_when_every_agent_restarts_with_its_clock_set_back() {
    let mut net = Net::new(3, 22);
    let (first, second) = fences_across_a_restart_with_clocks_set_back(&mut net);
    assert!(second > first, "{second} > {first}");
    // Those that drew, voted for or were told of it keep a reservation
    // above it: every node is at least one of them for some grant.
    let kept = net.disks.iter().map(|d| d.fence).max().unwrap();
    assert!(kept >= second, "{kept} >= {second}");
}

#[test]
fn without_its_record_a_restarted_cluster_draws_fences_that_go_back() {
    // What the record prevents (the test above fails the same way when the
    // record is ignored).
    let mut net = Net::new(3, 22);
    net.plant = snaplock_proto::cluster::Plant::IgnorePersisted;
    let (first, second) = fences_across_a_restart_with_clocks_set_back(&mut net);
    assert!(second < first, "{second} < {first}");
}

#[test]
fn an_agent_whose_record_names_a_later_epoch_takes_no_earlier_one() {
    // A member that is no leader had adopted an epoch the others never
    // heard of (it was cut off with another conductor), then restarted: it
    // must not answer in the cluster's smaller epoch, whose fences may be
    // below the ones it saw; the conductor elects past it instead (without
    // the rule it would join the old epoch, which would go on).
    let mut net = Net::new(5, 24);
    net.run_until(Duration::from_secs(10), |n| n.all_ready());
    let epoch = epoch_of(&mut net, 0);
    let leaders = net.leader_nodes(0);
    let j = (0..5).find(|i| !leaders.contains(i)).unwrap();
    net.crash(j);
    let later = epoch + 600_000;
    net.disks[j].epoch = later;
    net.disks[j].fence = later << 20;
    net.restart(j);
    net.run_until(Duration::from_secs(20), |n| {
        n.all_ready() && epoch_of(n, 0) != epoch
    });
    let now = epoch_of(&mut net, 0);
    assert!(now > later, "{now} > {later}");
    assert_eq!(epoch_of(&mut net, j), now);
    let fence = fence_of_a_grant(&mut net, j, "later");
    assert!(fence > later << 20);
}

#[test]
fn a_connection_holds_variables_and_locks_and_no_lock_names_a_variable() {
    let mut net = Net::new(3, 5);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    let c = net.open(1);
    net.send(c, "TRANSACTION namespace=n;s1=set A;s2=exists A;tag=9");
    let got = net
        .wait_reply(c, Duration::from_secs(1))
        .expect("an answer");
    assert_eq!(got.command, "TRANSACTIONOK", "{got}");
    assert_eq!(got.get_str("results"), Some("1,1"), "{got}");
    net.send(c, "LOCK object_name=x;duration=30");
    let got = net.wait_reply(c, Duration::from_secs(1)).expect("granted");
    assert_eq!(got.command, "LOCKED", "{got}");
    // The tables keep variable A of n as object NUL n NUL A: a lock can
    // never name it.
    net.send(c, "LOCK object_name=\u{0}n\u{0}A;duration=30;tag=2");
    let got = net.wait_reply(c, Duration::from_secs(1)).expect("refused");
    assert_eq!(got.command, "LOCKFAILED", "{got}");
    assert_eq!(got.get_str("error"), Some("invalid"), "{got}");
    // INFO counts it as a variable, not as a lock.
    let info = net.info(1);
    assert_eq!(info.get_str("variables"), Some("1"), "{info}");
    assert_eq!(info.get_str("tickets"), Some("1"), "{info}");
    assert_eq!(info.get_str("objects"), Some("1"), "{info}");
    // Nor does the ticket list show variables.
    net.send(c, "LISTTICKETS");
    let got = net.wait_reply(c, Duration::from_secs(1)).expect("list");
    let list = String::from_utf8_lossy(got.get("list").unwrap_or_default()).into_owned();
    assert!(list.contains("\"x\""), "{list}");
    assert_eq!(list.lines().count(), 1, "{list}");
}

/// The node that collects the first epoch's state on `seed`, found by
/// running the seed once.
fn first_collector(seed: u64) -> usize {
    let mut net = Net::new(3, seed);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    net.leader_nodes(0)[0]
}

/// Three nodes on `seed` whose first collector's sockets fill up with the
/// state it sends the other leaders: run until it sent it.
fn state_stuck(seed: u64) -> (Net, usize) {
    let collector = first_collector(seed);
    let mut net = Net::new(3, seed);
    net.backlog[collector] = true;
    net.run_until(Duration::from_secs(5), |n| n.sockets_full(collector));
    assert_eq!(net.leader_nodes(collector)[0], collector);
    (net, collector)
}

#[test]
fn a_collector_installs_its_own_state_after_the_others_got_theirs() {
    // Its copy waits while theirs is not written, half a peer_timeout
    // (1 s) at most: they read theirs while it installs its own.
    let (mut net, collector) = state_stuck(31);
    net.run_for(Duration::from_millis(900));
    for i in 0..3 {
        assert_eq!(net.installs(i), 0, "node{i} installed");
    }
    net.run_until(Duration::from_millis(200), |n| n.installs(collector) == 1);
    net.backlog[collector] = false;
    net.run_until(Duration::from_secs(2), |n| n.all_ready());
    assert!((0..3).all(|i| net.installs(i) == 1));
}

#[test]
fn a_collector_installs_its_own_state_as_soon_as_the_others_are_written() {
    let (mut net, collector) = state_stuck(32);
    net.run_for(Duration::from_millis(100));
    assert_eq!(
        net.installs(collector),
        0,
        "installed before it was written"
    );
    net.backlog[collector] = false;
    net.step();
    assert_eq!(net.installs(collector), 1, "not installed once written");
    net.run_until(Duration::from_secs(2), |n| n.all_ready());
    assert!((0..3).all(|i| net.installs(i) == 1));
}
