//! `LISTTICKETS` in a cluster: the owners' queues gathered from any
//! agent, the answer bounded in time when a leader is silent, and in size
//! for a big table.

use std::time::Duration;

use super::net::Net;

/// Three ready cores.
fn ready(seed: u64) -> Net {
    let mut net = Net::new(3, seed);
    net.run_until(Duration::from_secs(5), |n| n.all_ready());
    net
}

fn list(net: &mut Net, node: usize, line: &str) -> snaplock_proto::wire::Message {
    let c = net.open(node);
    net.send(c, line);
    let got = net
        .wait_reply(c, Duration::from_secs(5))
        .expect("a list, within the bound");
    assert_eq!(got.command, "TICKETLIST", "{got}");
    got
}

/// The owner of `name` among `leaders` (server names in epoch order), by
/// the rule of docs/cluster.md.
fn owner(leaders: &[usize], name: &str) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    leaders[(h % leaders.len() as u64) as usize]
}

#[test]
fn a_list_from_a_third_agent_shows_the_holder_then_the_waiters_of_other_agents_in_order() {
    let mut net = ready(41);
    let a = net.open(0);
    net.send(a, "LOCK object_name=x;duration=60;pid=10;tag=1");
    assert_eq!(
        net.wait_reply(a, Duration::from_secs(1)).unwrap().command,
        "LOCKED"
    );
    let b = net.open(1);
    net.send(
        b,
        "LOCK object_name=x;mode=shared;timeout=1800000500;pid=20;tag=2",
    );
    net.run_for(Duration::from_millis(50));
    let c = net.open(0);
    net.send(c, "LOCK object_name=x;timeout=1800000500;pid=30;tag=3");
    net.run_for(Duration::from_millis(50));

    let got = list(&mut net, 2, "LISTTICKETS");
    assert_eq!(got.get("missing"), None, "{got}");
    let text = got.get_str("list").unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].contains("key: node0/10  mode: exclusive  held since "),
        "{text}"
    );
    assert!(lines[0].ends_with("agent: node0  position: 0"), "{text}");
    assert!(
        lines[1].contains("key: node1/20  mode: shared  waiting  agent: node1  position: 1"),
        "{text}"
    );
    assert!(
        lines[2].contains("key: node0/30  mode: exclusive  waiting  agent: node0  position: 2"),
        "{text}"
    );

    // The agent's own table, in the original's lines: nothing here.
    assert_eq!(
        list(&mut net, 2, "LISTTICKETS scope=local").get_str("list"),
        Some("")
    );
    let local = list(&mut net, 1, "LISTTICKETS scope=local");
    let local = local.get_str("list").unwrap();
    assert_eq!(local.lines().count(), 1, "{local}");
    assert!(local.starts_with("ticket id: "), "{local}");
    assert!(
        local.contains("object name: \"x\"  key: node1/20  mode: shared  obtention "),
        "{local}"
    );
}

#[test]
fn a_list_of_one_name_asks_its_owner_alone() {
    let mut net = ready(42);
    let leaders = net.leader_nodes(0);
    // A name that node 2 does not own, asked from node 2.
    let name = (0..100)
        .map(|k| format!("n{k}"))
        .find(|n| owner(&leaders, n) != 2)
        .unwrap();
    let a = net.open(0);
    net.send(a, &format!("LOCK object_name={name};pid=7;tag=1"));
    assert_eq!(
        net.wait_reply(a, Duration::from_secs(1)).unwrap().command,
        "LOCKED"
    );
    net.send(a, "LOCK object_name=other;pid=7;tag=2");
    assert_eq!(
        net.wait_reply(a, Duration::from_secs(1)).unwrap().command,
        "LOCKED"
    );
    let before: usize = (0..3).map(|i| net.count(i, "LOCKLIST")).sum();
    let got = list(&mut net, 2, &format!("LISTTICKETS object_name={name}"));
    let after: usize = (0..3).map(|i| net.count(i, "LOCKLIST")).sum();
    assert_eq!(after - before, 1, "one question, to the owner");
    let text = got.get_str("list").unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains(&format!("object name: \"{name}\"  key: node0/7")),
        "{text}"
    );
    // A name nobody asked for lists nothing.
    assert_eq!(
        list(&mut net, 2, "LISTTICKETS object_name=free").get_str("list"),
        Some("")
    );
}

#[test]
fn a_silent_leader_is_named_missing_and_the_list_comes_within_the_peer_timeout() {
    let mut net = ready(43);
    let leaders = net.leader_nodes(0);
    let a = net.open(0);
    // One lock on a name of each owner.
    for (i, owner_node) in (0..3).enumerate() {
        let name = (0..100)
            .map(|k| format!("n{k}"))
            .find(|n| owner(&leaders, n) == owner_node)
            .unwrap();
        net.send(a, &format!("LOCK object_name={name};pid={};tag={i}", i + 1));
        let got = net.wait_reply(a, Duration::from_secs(1)).unwrap();
        assert_eq!(got.command, "LOCKED", "{got}");
    }
    net.pause(1, true);
    let c = net.open(2);
    net.send(c, "LISTTICKETS");
    // Not before the deadline (node 1 may yet answer), and not long after.
    assert!(net.wait_reply(c, Duration::from_millis(1900)).is_none());
    let got = net
        .wait_reply(c, Duration::from_millis(200))
        .expect("answered at peer_timeout");
    assert_eq!(got.get_str("missing"), Some("node1"), "{got}");
    let text = got.get_str("list").unwrap();
    assert_eq!(
        text.lines().count(),
        2,
        "the two owners that answered: {text}"
    );
    assert!(!text.contains("agent: node1"), "{text}");
    net.pause(1, false);
    net.run_for(Duration::from_millis(100));
    // Its late answer is for a list already answered: nothing more.
    assert!(net.wait_reply(c, Duration::from_millis(100)).is_none());
}

#[test]
fn an_owner_lists_at_most_a_thousand_tickets_and_says_there_are_more() {
    let mut net = ready(44);
    let leaders = net.leader_nodes(0);
    let names: Vec<String> = (0..100_000)
        .map(|k| format!("big{k}"))
        .filter(|n| owner(&leaders, n) == 0)
        .take(1001)
        .collect();
    let a = net.open(1);
    for (k, name) in names.iter().enumerate() {
        net.send(a, &format!("LOCK object_name={name};pid=5;tag={k}"));
    }
    let mut granted = 0;
    while let Some(m) = net.wait_reply(a, Duration::from_secs(2)) {
        assert_eq!(m.command, "LOCKED", "{m}");
        granted += 1;
        if granted == names.len() {
            break;
        }
    }
    assert_eq!(granted, names.len());
    let got = list(&mut net, 2, "LISTTICKETS");
    let text = got.get_str("list").unwrap();
    assert_eq!(text.lines().count(), 1001, "1000 tickets and the marker");
    assert!(text.ends_with("... and more tickets (an owner lists at most 1000 in one answer)\n"));
}

#[test]
fn a_bad_scope_or_name_is_refused_in_the_answer() {
    let mut net = ready(45);
    let got = list(&mut net, 0, "LISTTICKETS scope=everywhere");
    assert_eq!(got.get_str("error"), Some("invalid"), "{got}");
    let got = list(&mut net, 0, "LISTTICKETS object_name=");
    assert_eq!(got.get_str("error"), Some("invalid"), "{got}");
}
