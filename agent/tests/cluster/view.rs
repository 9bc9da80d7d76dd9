//! `LISTTICKETS` and `snaplock-cli who` across three real agents: the
//! requests of every agent on a name, in queue order, from a third agent;
//! the local view; a SIGSTOPped leader named missing within the bound.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::common::{Client, deadline_in, now};
use crate::harness::Cluster;

/// The agent (`node<i>`) that owns `name` in the epoch `info` reports,
/// by the rule of docs/cluster.md (`leaders[fnv1a64(name) % len]`).
fn owner(info: &snaplock_proto::wire::Message, name: &str) -> usize {
    let leaders: Vec<&str> = info.get_str("leaders").unwrap().split(',').collect();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let leader = leaders[(h % leaders.len() as u64) as usize];
    let node = leader.rsplit('|').next().unwrap();
    node.strip_prefix("node").unwrap().parse().unwrap()
}

#[test]
fn a_third_agent_lists_the_holder_then_the_waiters_of_two_other_agents_in_order() {
    let c = Cluster::start("view3", 3);
    c.wait_converged(3, Duration::from_secs(30));
    let mut holder = Client::connect(&c.socket(0));
    let held = holder.request("LOCK object_name=backup;duration=60;pid=4242");
    assert_eq!(held.command, "LOCKED", "{held}");
    let wait = deadline_in(60.0);
    let mut reader = Client::connect(&c.socket(1));
    reader.send(&format!(
        "LOCK object_name=backup;mode=shared;pid=977;timeout={wait}"
    ));
    std::thread::sleep(Duration::from_millis(200));
    let mut writer = Client::connect(&c.socket(0));
    writer.send(&format!("LOCK object_name=backup;pid=4250;timeout={wait}"));
    std::thread::sleep(Duration::from_millis(200));

    let mut asker = Client::connect(&c.socket(2));
    let got = asker.request("LISTTICKETS");
    assert_eq!(got.command, "TICKETLIST", "{got}");
    assert_eq!(got.get("missing"), None, "{got}");
    let list = got.get_str("list").unwrap();
    eprintln!("LISTTICKETS from node2:\n{list}");
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 3, "{list}");
    let fence = held.get_str("fence").unwrap();
    assert!(
        lines[0].contains("object name: \"backup\"  key: node0/4242  mode: exclusive  held since "),
        "{list}"
    );
    assert!(
        lines[0].ends_with(&format!("fence: {fence}  agent: node0  position: 0")),
        "{list}"
    );
    assert!(
        lines[1].ends_with("key: node1/977  mode: shared  waiting  agent: node1  position: 1"),
        "{list}"
    );
    assert!(
        lines[2].ends_with("key: node0/4250  mode: exclusive  waiting  agent: node0  position: 2"),
        "{list}"
    );

    // scope=local: the agent's own clients only, in the original's lines.
    let here = asker.request("LISTTICKETS scope=local");
    assert_eq!(here.get_str("list"), Some(""), "{here}");
    let mut local = Client::connect(&c.socket(0));
    let mine = local.request("LISTTICKETS scope=local");
    let mine = mine.get_str("list").unwrap();
    let mine: Vec<&str> = mine.lines().collect();
    assert_eq!(mine.len(), 2, "{mine:?}");
    assert!(mine[0].starts_with(
        "ticket id: 1  object name: \"backup\"  key: node0/4242  mode: exclusive  timeout "
    ));
    assert!(
        mine[1].contains("key: node0/4250  mode: exclusive  obtention "),
        "{mine:?}"
    );
    assert!(!mine.iter().any(|l| l.contains("agent: ")), "{mine:?}");

    let out = c.cli(2, &["who", "backup"]);
    eprintln!("snaplock-cli who backup (node2):\n{out}");
    let out: Vec<&str> = out.lines().collect();
    assert_eq!(out.len(), 4, "{out:?}");
    assert_eq!(out[0], "name: backup");
    assert!(
        out[1].starts_with("holder: node0  key: node0/4242  mode: exclusive  since: "),
        "{out:?}"
    );
    assert!(out[1].ends_with(&format!("  fence: {fence}")), "{out:?}");
    assert_eq!(out[2], "waiting 1: node1  key: node1/977  mode: shared");
    assert_eq!(out[3], "waiting 2: node0  key: node0/4250  mode: exclusive");
    assert_eq!(c.cli_status(2, &["who", "backup"]).0, Some(0));
    assert_eq!(
        c.cli(1, &["who", "nobody-holds-this"]),
        "name: nobody-holds-this\nholder: none\nqueue: empty\n"
    );
    // The list of the CLI is the cluster-wide one too.
    assert_eq!(c.cli(1, &["list"]).lines().count(), 3);
}

#[test]
fn with_a_leader_stopped_the_list_answers_within_the_bound_and_names_it() {
    let c = Cluster::start("viewstop", 3);
    c.wait_converged(3, Duration::from_secs(30));
    let info = c.info(0);
    // One lock on a name of each owner, held from node0.
    let mut holder = Client::connect(&c.socket(0));
    let mut of_node1 = String::new();
    for owner_node in 0..3 {
        let name = (0..1000)
            .map(|k| format!("v{k}"))
            .find(|n| owner(&info, n) == owner_node)
            .unwrap();
        let got = holder.request(&format!(
            "LOCK object_name={name};duration=60;pid={}",
            owner_node + 1
        ));
        assert_eq!(got.command, "LOCKED", "{got}");
        if owner_node == 1 {
            of_node1 = name;
        }
    }
    c.signal(1, Signal::SIGSTOP);
    let mut asker = Client::connect(&c.socket(2));
    let start = now();
    asker.send("LISTTICKETS");
    // peer_timeout (2 s by default) is the bound.
    let got = asker.recv_within(Duration::from_secs(5));
    let took = start.elapsed();
    eprintln!("LISTTICKETS from node2 with node1 stopped, after {took:?}:\n{got}");
    assert!(took < Duration::from_secs(3), "answered after {took:?}");
    assert_eq!(got.command, "TICKETLIST", "{got}");
    assert_eq!(got.get_str("missing"), Some("node1"), "{got}");
    let list = got.get_str("list").unwrap();
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(!list.contains(&format!("\"{of_node1}\"")), "{list}");

    let start = now();
    let (code, err) = c.cli_status(2, &["who", &of_node1]);
    assert!(start.elapsed() < Duration::from_secs(4));
    assert_eq!(code, Some(69), "{err}");
    // node1, or, once the others gave it up, the new owner that is still
    // taking over.
    assert!(err.contains("could not answer"), "{err}");
    c.signal(1, Signal::SIGCONT);
}
