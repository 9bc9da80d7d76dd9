//! The unit tests of the link protocol as the core runs it (`super`):
//! pings answered again once this agent acts, and their answers taken.

use std::collections::VecDeque;
use std::net::SocketAddr;

use crate::cluster::Id;
use crate::cluster::links::Link;
use crate::cluster::msg::{Pong, TicketAt};
use crate::time::Time;

use super::*;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn id(port: u16, name: &str) -> Id {
    crate::cluster::ids::make_id(None, 1, Some(addr(port)), 1, name).into()
}

fn now(ms: u64) -> Now {
    Now {
        mono: Time::from_micros(ms * 1000),
        wall: crate::time::UnixTime(1_700_000_000_000_000 + ms * 1000),
    }
}

/// Agent n2 of three, in epoch 10 led by n0 and n2 (its table not ready
/// yet), with a link (peer 1) up to n0.
fn agent() -> (Core, Id) {
    use crate::core::Config;
    let mut config = Config::default();
    config.cluster.listen = Some(addr(4002));
    config.cluster.neighbors = vec![addr(4000), addr(4001)];
    let mut core = Core::new(config, now(1));
    let n0 = id(4000, "n0");
    let c = &mut core.cluster;
    c.epoch.number = 10;
    c.epoch.leaders = vec![n0.clone(), c.me.clone()];
    c.epoch.view = crate::cluster::view_of(&c.epoch.leaders);
    c.leader.table = Some(crate::cluster::ltable::LeaderTable::new());
    c.peers.links.insert(
        PeerId(1),
        Link {
            id: Some(n0.clone()),
            ..Link::new("n0".to_owned(), addr(4000), Time::ZERO)
        },
    );
    (core, n0)
}

/// The answers sent on link 1 since the last call: (serial, active).
fn pongs(core: &mut Core) -> Vec<(u64, bool)> {
    let mut said = Vec::new();
    while let Some(out) = core.poll_output() {
        if let Output::PeerSend { peer, line } = out {
            let msg = wire::parse_line(&line).expect("a line");
            if peer == PeerId(1) && msg.command == "LOCKPONG" {
                let serial = msg.get("serial").and_then(crate::vocab::parse_u64).unwrap();
                said.push((serial, msg.get("active") == Some(b"1")));
            }
        }
    }
    said
}

/// Makes n2 an acting leader of epoch 10 at `t`, its table counting
/// n0's report (`reporter`) or not.
fn acting(core: &mut Core, n0: &Id, t: Now, reporter: bool) {
    let mut table = crate::cluster::ltable::LeaderTable::new();
    table.ready = true;
    if reporter {
        table.reporters.insert(n0.clone());
    }
    let c = &mut core.cluster;
    c.leader.table = Some(table);
    let view = c.epoch.view;
    c.peers.contact.insert(
        n0.clone(),
        Contact {
            sent: t.mono,
            epoch: 10,
            active_sent: None,
            view,
            delay_until: None,
        },
    );
    core.last_now = t.mono;
}

#[test]
fn a_ping_answered_as_not_acting_is_answered_again_once_this_agent_acts() {
    let (mut core, n0) = agent();
    core.on_ping(now(100), PeerId(1), 5);
    assert_eq!(pongs(&mut core), vec![(5, false)], "not a ready leader yet");
    core.reanswer_pings(now(110));
    assert_eq!(pongs(&mut core), vec![], "still not acting: nothing more");
    acting(&mut core, &n0, now(120), false);
    core.reanswer_pings(now(120));
    assert_eq!(
        pongs(&mut core),
        vec![],
        "acting, but n0's report is not in its state: it must not be kept"
    );
    acting(&mut core, &n0, now(130), true);
    core.reanswer_pings(now(130));
    assert_eq!(
        pongs(&mut core),
        vec![(5, true)],
        "the same ping, as acting"
    );
    core.reanswer_pings(now(140));
    assert_eq!(pongs(&mut core), vec![], "once");
    assert!(!core.cluster.peers.reanswer_due);
}

#[test]
fn a_ping_answered_as_acting_or_followed_by_another_is_not_answered_again() {
    let (mut core, n0) = agent();
    acting(&mut core, &n0, now(100), true);
    core.on_ping(now(100), PeerId(1), 5);
    assert_eq!(pongs(&mut core), vec![(5, true)]);
    core.reanswer_pings(now(110));
    assert_eq!(pongs(&mut core), vec![], "answered as acting already");

    let (mut core, n0) = agent();
    core.on_ping(now(100), PeerId(1), 5);
    core.on_ping(now(200), PeerId(1), 6);
    assert_eq!(pongs(&mut core), vec![(5, false), (6, false)]);
    acting(&mut core, &n0, now(300), true);
    core.reanswer_pings(now(300));
    assert_eq!(pongs(&mut core), vec![(6, true)], "the latest ping alone");
}

fn pong(core: &Core, serial: u64, active: bool) -> Pong {
    Pong {
        serial,
        epoch: 10,
        view: core.cluster.epoch.view,
        wall_ms: None,
        active,
        links: None,
        delay_us: 0,
    }
}

#[test]
fn an_answer_given_again_as_acting_counts_from_its_pings_send_time() {
    let (mut core, n0) = agent();
    let (t5, t6) = (now(100).mono, now(350).mono);
    core.cluster.peers.links.get_mut(&PeerId(1)).unwrap().pings =
        VecDeque::from([(5, t5), (6, t6)]);
    let p = pong(&core, 5, false);
    core.on_pong(now(110), PeerId(1), &n0, &p);
    let contact = |core: &Core| {
        let k = &core.cluster.peers.contact[&n0];
        (k.sent, k.active_sent)
    };
    assert_eq!(contact(&core), (t5, None));
    // Answered again, as acting, after ping 6 was sent.
    let p = pong(&core, 5, true);
    core.on_pong(now(400), PeerId(1), &n0, &p);
    assert_eq!(
        contact(&core),
        (t5, Some(t5)),
        "as acting from ping 5's send time"
    );
    let link = &core.cluster.peers.links[&PeerId(1)];
    assert_eq!(link.pings, VecDeque::from([(6, t6)]), "ping 6 still waits");
    // An answer to no ping this agent knows, or a second one as not
    // acting, says nothing and leaves the waiting pings alone.
    for p in [pong(&core, 9, true), pong(&core, 5, false)] {
        core.on_pong(now(410), PeerId(1), &n0, &p);
    }
    let link = &core.cluster.peers.links[&PeerId(1)];
    assert_eq!(link.pings, VecDeque::from([(6, t6)]));
    assert_eq!(contact(&core), (t5, Some(t5)));
    let p = pong(&core, 6, true);
    core.on_pong(now(420), PeerId(1), &n0, &p);
    assert_eq!(contact(&core), (t6, Some(t6)));
    assert!(core.cluster.peers.links[&PeerId(1)].pings.is_empty());
}

/// The lines sent on link 1 since the last call: command and `fence`.
fn sent(core: &mut Core) -> Vec<(String, Option<u64>)> {
    let mut said = Vec::new();
    while let Some(out) = core.poll_output() {
        if let Output::PeerSend { peer, line } = out {
            let msg = wire::parse_line(&line).expect("a line");
            if peer == PeerId(1) {
                let fence = msg.get("fence").and_then(crate::vocab::parse_u64);
                said.push((msg.command.to_string(), fence));
            }
        }
    }
    said
}

fn ticket(req: u64) -> (TicketAt, PeerMsg) {
    let at = TicketAt {
        epoch: 10,
        object: b"x"[..].into(),
        home: "h".into(),
        req,
    };
    let add = PeerMsg::AddTicket {
        at: at.clone(),
        key: "h/1".to_owned(),
        number: 1,
        kind: crate::vocab::Kind::EXCLUSIVE,
        fence: None,
    };
    (at, add)
}

#[test]
fn a_new_ticket_and_its_vote_go_as_one_line_only_to_a_leader_that_takes_it() {
    let (mut core, _) = agent();
    let own = |s: &str, f: Option<u64>| (s.to_owned(), f);
    // n0 did not say add_vote=1: the ticket, then the question.
    let (at, add) = ticket(1);
    core.hold_add(1, add);
    assert!(sent(&mut core).is_empty(), "held");
    core.send(To::Leaders(1), PeerMsg::ActivateLock { at, fence: 7 });
    assert_eq!(
        sent(&mut core),
        vec![own("ADDTICKET", None), own("ACTIVATELOCK", Some(7))]
    );
    // It did: one line.
    core.cluster
        .peers
        .links
        .get_mut(&PeerId(1))
        .unwrap()
        .add_vote = true;
    let (at, add) = ticket(2);
    core.hold_add(1, add);
    core.send(To::Leaders(1), PeerMsg::ActivateLock { at, fence: 8 });
    assert_eq!(sent(&mut core), vec![own("ADDTICKET", Some(8))]);
    // Any other message first sends the ticket held, alone, before it:
    // another ticket's question, a ping, or the end of the owner's turn.
    let (_, add) = ticket(3);
    let (other, _) = ticket(4);
    core.hold_add(1, add);
    core.send(
        To::Leaders(1),
        PeerMsg::ActivateLock {
            at: other,
            fence: 9,
        },
    );
    assert_eq!(
        sent(&mut core),
        vec![own("ADDTICKET", None), own("ACTIVATELOCK", Some(9))]
    );
    let (_, add) = ticket(5);
    core.hold_add(1, add);
    core.send(To::Link(PeerId(1)), PeerMsg::Ping { serial: 1 });
    assert_eq!(
        sent(&mut core),
        vec![own("ADDTICKET", None), own("LOCKPING", None)]
    );
    let (_, add) = ticket(6);
    core.hold_add(1, add);
    core.flush_add();
    assert_eq!(sent(&mut core), vec![own("ADDTICKET", None)]);
}
