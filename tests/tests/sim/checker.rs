//! The checker of the simulator (`snaplock_tests::sim::checker`), fed
//! hand-made histories: each property it checks reports what breaks it
//! and stays quiet on what does not.

use snaplock_proto::wire::Message;
use snaplock_tests::sim::checker::{Checker, LockSent, Locked, Mode, ReqId};
use snaplock_tests::sim::wire::Wire;

const OBJ: &[u8] = b"obj";

fn sent(c: &mut Checker, req: u64, mode: Mode, deadline: u64) {
    c.lock_sent(
        ReqId(req),
        LockSent {
            object: OBJ.to_vec(),
            node: 0,
            mode,
            sent_at: 0,
            deadline,
            deadline_slack_ppm: 0,
        },
    );
}

/// A grant at `t` with a lease to `lease_end`, held unlock_duration
/// `protect` more, on a clock equal to true time.
fn locked(c: &mut Checker, t: u64, req: u64, fence: u64, lease_end: u64, protect: u64) {
    c.locked(
        t,
        ReqId(req),
        Locked {
            fence,
            lease_end,
            protect_end: lease_end + protect,
            vouched_until: u64::MAX,
        },
    );
}

fn rules(c: &Checker) -> Vec<&'static str> {
    c.violations().iter().map(|v| v.rule).collect()
}

#[test]
fn two_exclusive_grants_that_overlap_are_reported() {
    let mut c = Checker::new();
    sent(&mut c, 1, Mode::Exclusive, 100);
    sent(&mut c, 2, Mode::Exclusive, 100);
    locked(&mut c, 10, 1, 5, 50, 0);
    locked(&mut c, 20, 2, 6, 60, 0);
    assert_eq!(rules(&c), ["S1"]);
}

#[test]
fn a_grant_after_an_unlock_is_clean() {
    let mut c = Checker::new();
    sent(&mut c, 1, Mode::Exclusive, 100);
    sent(&mut c, 2, Mode::Exclusive, 100);
    locked(&mut c, 10, 1, 5, 50, 30);
    c.release(20, ReqId(1));
    locked(&mut c, 20, 2, 6, 60, 0);
    assert!(c.violations().is_empty(), "{:?}", c.violations());
}

#[test]
fn shared_grants_share_only_within_every_holders_limit() {
    let mut c = Checker::new();
    for req in 1..=4 {
        sent(&mut c, req, Mode::Shared { limit: None }, 100);
    }
    sent(&mut c, 5, Mode::Shared { limit: Some(2) }, 100);
    locked(&mut c, 10, 1, 1, 50, 0);
    locked(&mut c, 11, 2, 2, 50, 0);
    assert!(c.violations().is_empty());
    locked(&mut c, 12, 5, 3, 50, 0);
    assert_eq!(rules(&c), ["S1"], "three holders, one accepts two");
}

#[test]
fn counted_grants_are_held_to_their_own_limit_and_every_shared_one() {
    let mut c = Checker::new();
    for req in 1..=3 {
        sent(&mut c, req, Mode::Counted { limit: 3 }, 100);
    }
    sent(&mut c, 4, Mode::Counted { limit: 6 }, 100);
    sent(&mut c, 5, Mode::Counted { limit: 3 }, 100);
    for req in 1..=4 {
        locked(&mut c, 10 + req, req, req, 50, 0);
    }
    assert!(c.violations().is_empty(), "4 holders, the 4th made with 6");
    locked(&mut c, 20, 5, 5, 50, 0);
    assert_eq!(rules(&c), ["S1"], "5 holders, the 5th made with 3");
    let mut c = Checker::new();
    sent(&mut c, 1, Mode::Shared { limit: Some(2) }, 100);
    sent(&mut c, 2, Mode::Counted { limit: 9 }, 100);
    sent(&mut c, 3, Mode::Counted { limit: 9 }, 100);
    sent(&mut c, 4, Mode::Exclusive, 100);
    locked(&mut c, 10, 1, 1, 50, 0);
    locked(&mut c, 11, 2, 2, 50, 0);
    assert!(c.violations().is_empty());
    locked(&mut c, 12, 3, 3, 50, 0);
    assert_eq!(rules(&c), ["S1"], "3 holders beside a shared limit of 2");
    locked(&mut c, 13, 4, 4, 50, 0);
    assert_eq!(
        rules(&c),
        ["S1", "S1", "S1", "S1"],
        "exclusive beside three"
    );
}

#[test]
fn a_reused_or_smaller_fence_is_reported() {
    let mut c = Checker::new();
    for req in 1..=3 {
        sent(&mut c, req, Mode::Exclusive, 1_000);
    }
    locked(&mut c, 10, 1, 7, 50, 0);
    c.release(20, ReqId(1));
    locked(&mut c, 30, 2, 7, 80, 0);
    assert_eq!(rules(&c), ["S2", "S2"], "reused, and not above the ended 7");
    c.release(90, ReqId(2));
    locked(&mut c, 100, 3, 8, 200, 0);
    assert_eq!(c.violations().len(), 2, "8 follows 7");
}

#[test]
fn a_grant_within_a_lease_plus_unlock_duration_is_reported_unless_released() {
    let mut c = Checker::new();
    for req in 1..=3 {
        sent(&mut c, req, Mode::Exclusive, 1_000);
    }
    // Held to 50, still the holder's until 80.
    locked(&mut c, 10, 1, 1, 50, 30);
    locked(&mut c, 60, 2, 2, 100, 0);
    assert_eq!(rules(&c), ["S3"]);
    // After an UNLOCK, at once.
    c.release(120, ReqId(2));
    locked(&mut c, 120, 3, 3, 200, 50);
    assert_eq!(rules(&c), ["S3"]);
}

#[test]
fn a_holder_its_agent_no_longer_vouches_for_protects_no_lease() {
    let mut c = Checker::new();
    sent(&mut c, 1, Mode::Exclusive, 1_000);
    sent(&mut c, 2, Mode::Exclusive, 1_000);
    c.locked(
        10,
        ReqId(1),
        Locked {
            fence: 1,
            lease_end: 500,
            protect_end: 600,
            vouched_until: 40,
        },
    );
    c.vouched(30, ReqId(1), 70);
    assert!(c.holding(ReqId(1), 69));
    assert!(!c.holding(ReqId(1), 70));
    c.vouched(75, ReqId(1), 200);
    assert!(
        !c.holding(ReqId(1), 76),
        "a lapsed promise does not come back"
    );
    locked(&mut c, 80, 2, 2, 300, 0);
    assert!(c.violations().is_empty(), "{:?}", c.violations());
}

#[test]
fn late_and_second_outcomes_are_reported() {
    let mut c = Checker::new();
    sent(&mut c, 1, Mode::Exclusive, 100);
    sent(&mut c, 2, Mode::Exclusive, 100);
    sent(&mut c, 3, Mode::Exclusive, 1_000);
    locked(&mut c, 101, 1, 1, 200, 0);
    assert_eq!(rules(&c), ["S4"], "after the deadline");
    c.release(105, ReqId(1));
    c.failed(90, ReqId(2), "timedout");
    locked(&mut c, 111, 2, 2, 300, 0);
    assert_eq!(rules(&c), ["S4", "S4"], "after LOCKFAILED");
    c.release(115, ReqId(2));
    c.cancel_acked(ReqId(3));
    locked(&mut c, 120, 3, 3, 300, 0);
    assert_eq!(
        rules(&c),
        ["S4", "S4", "S4"],
        "after the cancellation was confirmed"
    );
}

#[test]
fn a_grant_is_backed_only_by_a_majority_of_one_epochs_leaders() {
    let mut w = Wire::new(3);
    for (node, id) in ["a", "b", "c"].iter().enumerate() {
        w.sent(node, &Message::new("LOCKSTARTED").with("lockid", id))
            .expect("no vote");
    }
    let leaders = Message::new("LOCKLEADERS")
        .with("epoch", "7")
        .with("leader0", "a")
        .with("leader1", "b")
        .with("leader2", "c");
    assert_eq!(w.received(1, 0, &leaders), Ok(()));
    let vote = |fence: &str, ok: &str| {
        Message::new("LOCKACTIVATED")
            .with("epoch", "7")
            .with("fence", fence)
            .with("object_name", "x")
            .with("ok", ok)
    };
    assert!(w.backed(b"x", 5).is_err(), "nobody voted");
    w.received(0, 2, &vote("5", "false")).expect("a vote");
    assert!(w.backed(b"x", 5).is_err(), "a refusal is no vote");
    w.received(0, 2, &vote("6", "true")).expect("a vote");
    assert!(w.backed(b"x", 5).is_err(), "a vote for another fence");
    w.received(0, 2, &vote("5", "true")).expect("a vote");
    assert_eq!(w.backed(b"x", 5), Ok(()), "owner a and voter c of a, b, c");
    assert!(w.backed(b"y", 5).is_err(), "another object");
    let other = Message::new("LOCKLEADERS")
        .with("epoch", "7")
        .with("leader0", "b")
        .with("leader1", "c");
    w.received(2, 1, &other)
        .expect("a restarted conductor may name an epoch again");
    let pong = |view: &str| {
        Message::new("LOCKPONG")
            .with("serial", "1")
            .with("epoch", "7")
            .with("view", view)
            .with("active", "1")
    };
    w.sent(1, &pong("11")).expect("one view");
    w.sent(1, &pong("11")).expect("the same view again");
    let err = w.sent(1, &pong("12")).expect_err("two views in one epoch");
    assert!(err.contains("epoch 7"), "{err}");
}

#[test]
fn a_leader_voting_for_two_conflicting_grants_is_reported() {
    let mut w = Wire::new(3);
    for (node, id) in ["a", "b", "c"].iter().enumerate() {
        w.sent(node, &Message::new("LOCKSTARTED").with("lockid", *id))
            .expect("no vote");
    }
    let add = |req: &str, mode: &str| {
        Message::new("ADDTICKET")
            .with("epoch", "7")
            .with("object_name", "x")
            .with("home", "h")
            .with("req", req)
            .with("key", "h/1")
            .with("mode", mode)
            .with("limit", "2")
    };
    let vote = |req: &str, epoch: &str| {
        Message::new("LOCKACTIVATED")
            .with("epoch", epoch)
            .with("fence", req)
            .with("object_name", "x")
            .with("home", "h")
            .with("req", req)
            .with("ok", "true")
    };
    let drop = |req: &str| {
        Message::new("DROPTICKET")
            .with("epoch", "7")
            .with("object_name", "x")
            .with("home", "h")
            .with("req", req)
    };
    for (req, mode) in [("1", "exclusive"), ("2", "exclusive"), ("3", "shared")] {
        w.received(1, 0, &add(req, mode)).expect("no vote yet");
    }
    // Votes are checked as b casts them, drops as b acts on them.
    w.sent(1, &vote("1", "7")).expect("first vote");
    w.sent(1, &vote("1", "7")).expect("the same vote again");
    w.processed(1, &drop("1"));
    w.sent(1, &vote("2", "7")).expect("after the drop");
    w.sent(1, &vote("3", "8")).expect("a later epoch");
    let err = w.sent(1, &vote("2", "8")).expect_err("2 and 3 at once");
    assert!(err.contains("conflict"), "{err}");
}
