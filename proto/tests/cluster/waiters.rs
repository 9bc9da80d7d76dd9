//! Many waiters on one name, on several agents: each is a request of its
//! own at the owner, and they are served in the order they came, across
//! agents. Coalescing an agent's local waiters into one request at the
//! owner would save that agent's `LOCK`/`LOCKED` pair per waiter, but a
//! waiter of another agent that came between two of them would then be
//! served after both (docs/cluster.md, "Waiters are not coalesced").

use super::three_ready_and_a_name_node0_owns;
use std::time::Duration;

/// The peer messages of one grant and release, as the owner and its
/// homes exchange them.
pub(super) const GRANT_MESSAGES: [&str; 7] = [
    "LOCK",
    "ADDTICKET",
    "ACTIVATELOCK",
    "LOCKACTIVATED",
    "LOCKED",
    "UNLOCK",
    "DROPTICKET",
];

pub(super) fn counts(net: &super::Net) -> Vec<usize> {
    GRANT_MESSAGES
        .iter()
        .map(|m| (0..3).map(|i| net.count(i, m)).sum())
        .collect()
}

#[test]
fn waiters_of_two_agents_on_one_name_are_served_in_the_order_they_came() {
    let (mut net, name) = three_ready_and_a_name_node0_owns(31);
    let holder = net.open(0);
    net.send(
        holder,
        &format!("LOCK object_name={name};duration=60;tag=0"),
    );
    let got = net
        .wait_reply(holder, Duration::from_secs(1))
        .expect("granted");
    assert_eq!(got.command, "LOCKED", "{got}");
    let before = counts(&net);
    let owner_heard_lock = net.count(0, "LOCK");
    // Twelve waiters, alternately on agents 1 and 2, each queued before
    // the next is sent.
    let waiters = 12;
    let mut clients = Vec::new();
    for k in 0..waiters {
        let c = net.open(1 + k % 2);
        let line = format!("LOCK object_name={name};duration=60;timeout=1800000500;tag={k}");
        net.send(c, &line);
        net.run_for(Duration::from_millis(50));
        clients.push(c);
    }
    net.send(holder, &format!("UNLOCK object_name={name};tag=99"));
    let mut fences = Vec::new();
    for (k, c) in clients.iter().enumerate() {
        let got = (net.wait_reply(*c, Duration::from_secs(2)))
            .unwrap_or_else(|| panic!("waiter {k} was not next"));
        assert_eq!(got.command, "LOCKED", "waiter {k}: {got}");
        fences.push(got.get_str("fence").unwrap().parse::<u64>().unwrap());
        net.send(*c, &format!("UNLOCK object_name={name};tag={k}"));
        let got = net
            .wait_reply(*c, Duration::from_secs(1))
            .expect("unlocked");
        assert_eq!(got.command, "UNLOCKED", "waiter {k}: {got}");
    }
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
    net.run_for(Duration::from_millis(100));
    // Not coalesced: the owner got one LOCK per waiter.
    assert_eq!(net.count(0, "LOCK") - owner_heard_lock, waiters);
    let after = counts(&net);
    let per_grant: Vec<String> = (GRANT_MESSAGES.iter().zip(before.iter().zip(&after)))
        .map(|(m, (b, a))| format!("{m} {:.2}", (a - b) as f64 / waiters as f64))
        .collect();
    println!("peer messages per grant, one name, 12 waiters on 2 agents: {per_grant:?}");
    let total: usize = after.iter().sum::<usize>() - before.iter().sum::<usize>();
    // Each grant: LOCK, ADDTICKET, ACTIVATELOCK, LOCKACTIVATED, LOCKED,
    // UNLOCK, DROPTICKET, plus the holder's release.
    assert!(
        total <= 7 * waiters + 7,
        "{total} messages for {waiters} grants"
    );
}
