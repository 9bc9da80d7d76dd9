//! The home's own vote ends with its release (docs/cluster.md "Granting",
//! the home's own vote): the owner sends it no `DROPTICKET`, so nothing
//! but the home itself may end it, and nothing may bring it back.

use std::time::Duration;

use super::{Net, lock_and_unlock, three_ready_and_a_name_node0_owns};

/// Three leaders and a name node 0 owns. Each test pauses node 2 once
/// node 1, the home, has released: a grant then needs node 1's vote,
/// which a vote it kept for the released request would refuse.
fn three_leaders(seed: u64) -> (Net, String) {
    let (mut net, name) = three_ready_and_a_name_node0_owns(seed);
    assert_eq!(net.leader_nodes(0).len(), 3);
    (net, name)
}

#[test]
fn a_home_votes_again_on_a_name_it_released_without_a_dropticket() {
    let (mut net, name) = three_leaders(21);
    let c = net.open(1);
    lock_and_unlock(&mut net, c, &name, 1);
    net.run_for(Duration::from_millis(20));
    assert_eq!(net.count(1, "DROPTICKET"), 0, "no DROPTICKET to the home");
    // With the third leader silent, the next grant needs the home's vote:
    // a vote it kept for the released request would refuse it.
    net.pause(2, true);
    lock_and_unlock(&mut net, c, &name, 2);
    let d = net.open(1);
    lock_and_unlock(&mut net, d, &name, 3);
}

#[test]
fn a_question_on_a_released_request_leaves_no_vote_behind() {
    let (mut net, name) = three_leaders(22);
    let c = net.open(1);
    lock_and_unlock(&mut net, c, &name, 1);
    net.run_for(Duration::from_millis(20));
    // The owner's ticket with its vote, as it was sent for the grant:
    // here it comes again after the release (a question sent again, or
    // sent before the owner had the UNLOCK).
    let asked = net
        .last
        .get(&(1, "ADDTICKET".to_owned()))
        .expect("the home was asked")
        .clone();
    assert!(asked.get("fence").is_some(), "{asked}");
    let line = snaplock_proto::wire::encode_to_vec(&asked);
    net.inject(1, 0, std::str::from_utf8(&line[..line.len() - 1]).unwrap());
    net.run_for(Duration::from_millis(20));
    net.pause(2, true);
    // Kept, that replica would stand behind no request and refuse every
    // other one on the name, with no DROPTICKET to come.
    let d = net.open(1);
    lock_and_unlock(&mut net, d, &name, 2);
}
