//! The unit tests of late reports as a leader weighs them (`super`).

use crate::cluster::Id;
use crate::cluster::batch::ReportedTicket;
use crate::cluster::ltable::{LeaderState, LeaderTable, LeaderTicket};
use crate::core::cluster::testing::{addr, agent_of_three, id, now};
use crate::time::Time;
use crate::vocab::{Kind, ObjectName};

use super::*;

/// This agent, the only leader of epoch 10 (so the owner of every
/// object), ready, with `home`'s lock 3 on `o` (fence 7) inherited from
/// the state, and `home`'s report not counted yet.
fn owner() -> (Core, Id, ObjectName) {
    let mut core = agent_of_three();
    let home = id(4001, "n1");
    let name = ObjectName::from(&b"o"[..]);
    let c = &mut core.cluster;
    c.epoch.number = 10;
    c.epoch.leaders = vec![c.me.clone()];
    c.epoch.view = crate::cluster::view_of(&c.epoch.leaders);
    let mut table = LeaderTable::new();
    table.ready = true;
    table.insert(
        &name,
        LeaderTicket {
            home: home.clone(),
            req: 3,
            key: "n1/3".into(),
            number: 1,
            kind: Kind::EXCLUSIVE,
            state: LeaderState::Inherited { fence: 7 },
            has_ticket: 0,
            try_once: false,
            since: None,
        },
    );
    c.leader.table = Some(table);
    (core, home, name)
}

fn held(home: &Id, name: &ObjectName, req: u64, fence: u64) -> (ReportedTicket, bool) {
    let t = ReportedTicket {
        object: name.clone(),
        home: home.clone(),
        req,
        key: "n1/3".into(),
        fence,
        kind: Kind::EXCLUSIVE,
    };
    (t, true)
}

fn counted(core: &Core, home: &Id) -> bool {
    core.cluster
        .leader
        .table
        .as_ref()
        .unwrap()
        .reporters
        .contains(home)
}

#[test]
fn a_late_report_of_a_lock_its_home_released_since_is_counted() {
    let (mut core, home, name) = owner();
    let unlock = PeerMsg::Unlock {
        epoch: 10,
        object: name.clone(),
        req: 3,
    };
    core.on_agent_message(now(100), &home, unlock).unwrap();
    let table = core.cluster.leader.table.as_ref().unwrap();
    assert!(
        table
            .objects
            .get(&name)
            .is_none_or(|o| o.find(&home, 3).is_none())
    );
    core.weigh_late(now(110), &home, vec![held(&home, &name, 3, 7)]);
    assert!(counted(&core, &home), "the epoch knew the lock it released");
}

#[test]
fn a_late_report_of_a_lock_the_epoch_does_not_know_is_not_counted() {
    // Dropped by the owner, not released by its home: the home may still
    // hold it.
    let (mut core, home, name) = owner();
    core.owner_release(now(100), &name, &home, 3);
    core.weigh_late(now(110), &home, vec![held(&home, &name, 3, 7)]);
    assert!(!counted(&core, &home));
    // Released, but with another fence than the one the epoch knew.
    let (mut core, home, name) = owner();
    core.note_released(&home, &name, 3);
    core.owner_release(now(100), &name, &home, 3);
    core.weigh_late(now(110), &home, vec![held(&home, &name, 3, 8)]);
    assert!(!counted(&core, &home));
    // Known as it is: counted.
    let (mut core, home, name) = owner();
    core.weigh_late(now(110), &home, vec![held(&home, &name, 3, 7)]);
    assert!(counted(&core, &home));
}

/// The commands of the lines sent on link 1, with their `part=`.
fn sent_parts(core: &mut Core) -> Vec<String> {
    let mut said = Vec::new();
    while let Some(out) = core.poll_output() {
        if let crate::core::Output::PeerSend { peer, line } = out {
            if peer == crate::vocab::PeerId(1) {
                let msg = crate::wire::parse_line(&line).expect("a line");
                let part = msg
                    .get("part")
                    .map(|p| String::from_utf8_lossy(p).into_owned());
                said.push(format!("{} {}", msg.command, part.unwrap_or_default()));
            }
        }
    }
    said
}

#[test]
fn a_late_report_passed_on_while_a_leader_waits_for_the_state_follows_the_state() {
    // This agent collects epoch 10, led by it and `n2`; `n2` has no link
    // and has not acted: the state waits for it.
    let (mut core, home, name) = owner();
    let n2: Id = crate::cluster::ids::make_id(None, 1, Some(addr(4002)), 1, "n2").into();
    let c = &mut core.cluster;
    c.epoch.leaders = vec![c.me.clone(), n2.clone()];
    let state = vec![PeerMsg::Tickets {
        epoch: 10,
        part: Part::StateBegin {
            base: 1,
            delay: std::time::Duration::ZERO,
        },
    }];
    c.handover.state_pending = Some((10, vec![n2.clone()], state));
    let report = Report {
        home: vec![held(&home, &name, 3, 7)],
        ..Default::default()
    };
    core.late_report(&home, &report);
    core.late_report(&home, &report);
    assert_eq!(
        core.cluster.handover.late_pending.len(),
        1,
        "the latest per home"
    );
    // `n2`'s link comes up: the state, then the report.
    core.cluster.peers.links.insert(
        crate::vocab::PeerId(1),
        crate::cluster::links::Link {
            id: Some(n2.clone()),
            ..crate::cluster::links::Link::new("n2".to_owned(), addr(4002), Time::ZERO)
        },
    );
    core.send_pending_state(&n2);
    let parts = sent_parts(&mut core);
    assert_eq!(
        parts,
        vec![
            "LOCKTICKETS state-begin",
            "LOCKTICKETS late-begin",
            "LOCKTICKETS late",
            "LOCKTICKETS late-end"
        ],
    );
    // Once every leader acts, neither is kept.
    core.cluster.handover.state_received(10, &n2);
    assert!(core.cluster.handover.state_pending.is_none());
    assert!(core.cluster.handover.late_pending.is_empty());
}
