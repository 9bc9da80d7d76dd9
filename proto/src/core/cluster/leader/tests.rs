//! The unit tests of the owner's side of a grant (`super`): what becomes
//! of a `try=true` request whose home delivers on its own vote.

use crate::cluster::Id;
use crate::cluster::links::Link;
use crate::cluster::ltable::{LeaderState, LeaderTable};
use crate::cluster::msg::Lock;
use crate::core::cluster::testing::{addr, agent_of_three, id, now};
use crate::time::Time;
use crate::vocab::{Kind, PeerId};

use super::*;

/// This agent `n0`, the first of three leaders (`n0`, `n1`, `n2`) of epoch
/// 10, ready, linked to both others; `n1` delivers a grant on its own yes
/// vote (`home_grant`). Nobody answered a ping yet, so it does not act.
/// Returns the core, `n1` and a name this agent owns.
fn owner() -> (Core, Id, ObjectName) {
    let mut core = agent_of_three();
    let (n1, n2) = (id(4001, "n1"), id(4002, "n2"));
    let c = &mut core.cluster;
    c.epoch.number = 10;
    c.epoch.leaders = vec![c.me.clone(), n1.clone(), n2.clone()];
    c.epoch.view = crate::cluster::view_of(&c.epoch.leaders);
    let mut table = LeaderTable::new();
    table.ready = true;
    c.leader.table = Some(table);
    for (peer, (id, name, port)) in [(&n1, "n1", 4001), (&n2, "n2", 4002)]
        .into_iter()
        .enumerate()
    {
        c.peers.links.insert(
            PeerId(peer as u64 + 1),
            Link {
                id: Some(id.clone()),
                home_grant: true,
                home_drop: true,
                ..Link::new(name.to_owned(), addr(port), Time::ZERO)
            },
        );
    }
    let name = (0u32..)
        .map(|i| ObjectName::from(format!("o{i}").as_bytes()))
        .find(|n| core.owner_of(n).as_ref() == Some(&core.cluster.me))
        .expect("a name this agent owns");
    assert!(!core.cluster.acting(now(2).mono));
    (core, n1, name)
}

/// The commands of the lines sent on link `peer`.
fn sent(core: &mut Core, peer: u64) -> Vec<String> {
    let mut said = Vec::new();
    while let Some(out) = core.poll_output() {
        if let crate::core::Output::PeerSend { peer: p, line } = out {
            if p == PeerId(peer) {
                said.push(
                    crate::wire::parse_line(&line)
                        .expect("a line")
                        .command
                        .to_string(),
                );
            }
        }
    }
    said
}

/// `n1`'s request 5 on `name`, `try=true`, and the fence its vote was asked
/// for (which the owner must not leave unless `n1` refuses it).
fn try_from_home(core: &mut Core, home: &Id, name: &ObjectName) -> u64 {
    let lock = Lock {
        epoch: 10,
        object: name.clone(),
        req: 5,
        key: "n1/5".to_owned(),
        kind: Kind::EXCLUSIVE,
        try_once: true,
        progress: false,
    };
    core.owner_lock(now(2), home, lock).expect("owned here");
    let said = sent(core, 1);
    assert!(!said.iter().any(|c| c == "LOCKFAILED"), "{said:?}");
    let l = core.cluster.leader.table.as_ref().unwrap();
    let o = &l.objects[name];
    match o.tickets[o.find(home, 5).expect("kept")].state {
        LeaderState::Activating { fence, ballot } => {
            assert_ne!(ballot.asked & 0b010, 0, "the home's vote asked");
            fence
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_try_request_the_home_refused_its_vote_is_refused_at_once_without_a_quorum() {
    let (mut core, home, name) = owner();
    let fence = try_from_home(&mut core, &home, &name);
    let at = core.ticket_at(&name, &home, 5);
    core.owner_voted(now(3), &home, at, fence, false, None);
    assert_eq!(sent(&mut core, 1), vec!["DROPTICKET", "LOCKFAILED"]);
    let l = core.cluster.leader.table.as_ref().unwrap();
    assert!(
        l.objects
            .get(&name)
            .is_none_or(|o| o.find(&home, 5).is_none()),
        "its ticket is dropped"
    );
}

/// Whether `home`'s request 5 on `name` still has its ticket here.
fn kept(core: &Core, home: &Id, name: &ObjectName) -> bool {
    let l = core.cluster.leader.table.as_ref().unwrap();
    l.objects
        .get(name)
        .is_some_and(|o| o.find(home, 5).is_some())
}

/// The home voted yes (so it holds the lock), or its answer is still out;
/// then `n2`, asked too, refuses, with the home's link up or down (the
/// answer lost with it): the owner, not acting, must keep the ticket.
fn n2_refuses_after_the_home(home_voted: bool, link_down: bool) -> bool {
    let (mut core, home, name) = owner();
    let n2 = core.cluster.epoch.leaders[2].clone();
    let fence = try_from_home(&mut core, &home, &name);
    assert!(core.widen(&name, &home, 5, false), "n2 asked");
    if home_voted {
        let at = core.ticket_at(&name, &home, 5);
        core.owner_voted(now(3), &home, at, fence, true, None);
    }
    if link_down {
        core.peer_down(now(3), PeerId(1)).unwrap();
    }
    let _ = sent(&mut core, 1);
    let at = core.ticket_at(&name, &home, 5);
    core.owner_voted(now(4), &n2, at, fence, false, None);
    let said = sent(&mut core, 2);
    assert!(!said.iter().any(|c| c == "DROPTICKET"), "{said:?}");
    kept(&core, &home, &name)
}

#[test]
fn a_try_request_the_home_voted_for_or_not_yet_is_kept_when_another_refuses() {
    for home_voted in [true, false] {
        for link_down in [false, true] {
            assert!(
                n2_refuses_after_the_home(home_voted, link_down),
                "home voted {home_voted}, its link down {link_down}"
            );
        }
    }
}

#[test]
fn a_try_request_refused_by_every_follower_of_an_acting_owner_waits_for_its_retry() {
    let (mut core, home, name) = owner();
    let n2 = core.cluster.epoch.leaders[2].clone();
    let c = &mut core.cluster;
    c.peers.contact.insert(
        home.clone(),
        crate::cluster::Contact {
            sent: now(2).mono,
            epoch: 10,
            active_sent: Some(now(2).mono),
            view: c.epoch.view,
            delay_until: None,
        },
    );
    assert!(core.cluster.acting(now(3).mono));
    let fence = try_from_home(&mut core, &home, &name);
    for from in [&home, &n2] {
        let at = core.ticket_at(&name, &home, 5);
        core.owner_voted(now(3), from, at, fence, false, None);
    }
    // Refusals with no holder here are stale votes, not a holder: no
    // `busy`, and the ticket waits for the retry of the next tick.
    let said = sent(&mut core, 1);
    assert!(!said.iter().any(|c| c == "LOCKFAILED"), "{said:?}");
    let l = core.cluster.leader.table.as_ref().unwrap();
    let o = &l.objects[&name];
    let t = &o.tickets[o.find(&home, 5).expect("kept")];
    assert!(matches!(t.state, LeaderState::Waiting), "{:?}", t.state);
    assert!(l.retry.contains(&name));
}
