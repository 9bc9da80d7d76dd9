//! The unit tests of vouching as the core runs it (`super`): carried
//! locks, their settling and their revocation.

use std::net::SocketAddr;

use crate::cluster::Id;

use super::*;

fn at(s: u64) -> Time {
    Time::from_micros(s * 1_000_000)
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn id(port: u16, name: &str) -> Id {
    crate::cluster::ids::make_id(None, 1, Some(addr(port)), 1, name).into()
}

/// Puts `core` in `epoch` with `leaders`, `answering` among them having
/// answered as acting there at `answered` µs.
fn enter_epoch(core: &mut Core, epoch: u64, leaders: [&Id; 2], answering: &Id, answered: u64) {
    let c = &mut core.cluster;
    c.epoch.number = epoch;
    c.epoch.leaders = leaders.map(Id::clone).to_vec();
    c.epoch.view = crate::cluster::view_of(&c.epoch.leaders);
    c.peers.contact.insert(
        answering.clone(),
        crate::cluster::Contact {
            sent: Time::from_micros(answered),
            epoch,
            active_sent: Some(Time::from_micros(answered)),
            view: c.epoch.view,
            delay_until: None,
        },
    );
}

fn now(us: u64) -> Now {
    Now {
        mono: Time::from_micros(us),
        wall: crate::time::UnixTime(1_700_000_000_000_000 + us),
    }
}

/// `n2` (this agent), holding `name` through epoch 10 (leaders `n1`,
/// `n0`; `n1` owns it and last answered at 101 s, the majority contact
/// is still the previous epoch's 100 s) into epoch 11, where `n0` owns
/// it and answers at 104.5 s; `n1` is known to have left epoch 10 at
/// `n1_left`. The latest ping `n1` answered in epoch 10, as acting or
/// not, was sent at `n1_heard` (101 s: that answer).
fn carried_into_a_third_owner(n1_left: u64, n1_heard: u64) -> (Core, ObjectName) {
    use crate::core::Config;
    use crate::local::table::{State, Ticket};
    use crate::vocab::Kind;
    let mut config = Config::default();
    config.cluster.listen = Some(addr(4002));
    config.cluster.neighbors = vec![addr(4000), addr(4001)];
    let mut core = Core::new(config, now(1));
    let (n0, n1) = (id(4000, "n0"), id(4001, "n1"));
    let c = &mut core.cluster;
    // An object that the first of two leaders owns.
    let name: ObjectName = (0u32..)
        .map(|i| ObjectName::from(format!("o{i}").as_bytes()))
        .find(|n| crate::cluster::ids::fnv1a64(n) % 2 == 0)
        .unwrap();
    let contact = |epoch, view, answered: u64| crate::cluster::Contact {
        sent: Time::from_micros(answered),
        epoch,
        active_sent: Some(Time::from_micros(answered)),
        view,
        delay_until: None,
    };
    c.epoch.number = 10;
    c.epoch.leaders = vec![n1.clone(), n0.clone()];
    c.epoch.view = crate::cluster::view_of(&c.epoch.leaders);
    c.home.last_ok = Some(at(100));
    c.peers.contact.insert(
        n1.clone(),
        crate::cluster::Contact {
            sent: Time::from_micros(n1_heard),
            ..contact(10, c.epoch.view, 101_000_000)
        },
    );
    c.peers
        .contact
        .insert(n0.clone(), contact(10, c.epoch.view, 101_000_000));
    let ticket = Ticket {
        id: TicketId(7),
        number: 1,
        key: "n2/1".into(),
        owner: None,
        uid: None,
        tag: None,
        kind: Kind::EXCLUSIVE,
        duration: std::time::Duration::from_secs(600),
        unlock_duration: std::time::Duration::ZERO,
        detach: false,
        unit: None,
        try_once: false,
        state: State::Held {
            fence: 1,
            lease_end: at(700),
        },
        since: at(100),
    };
    core.table.insert(&name, ticket);
    core.carry_over(now(101_400_000));
    let kept = &core.cluster.home.carried.locks[&name];
    assert_eq!(kept.owner.as_ref(), Some(&n1));
    assert_eq!(
        (kept.at, kept.answered),
        (at(100), Time::from_micros(n1_heard))
    );
    // Epoch 11: the same two leaders the other way round.
    let c = &mut core.cluster;
    c.epoch.number = 11;
    c.epoch.leaders = vec![n0.clone(), n1.clone()];
    c.epoch.view = crate::cluster::view_of(&c.epoch.leaders);
    c.peers
        .contact
        .insert(n0.clone(), contact(11, c.epoch.view, 104_500_000));
    c.home
        .carried
        .left(addr(4001), 11, Time::from_micros(n1_left));
    (core, name)
}

/// The settle window of a lock carried with a stale majority contact
/// runs from its old owner's own last answer (seed 1860): its owner
/// can drop it only `release_delay` after it heard this agent last.
#[test]
fn the_settle_window_runs_from_the_old_owners_own_answer() {
    let window = Core::new(crate::core::Config::default(), now(1)).settle_window();
    assert!(
        window > std::time::Duration::from_millis(3100),
        "{window:?}"
    );
    // 101 s + the window is past 104.0 s: the old owner stopped acting
    // before it could drop the lock, which follows `n0` and outlives
    // `grace` after the majority contact of 100 s.
    let (mut core, name) = carried_into_a_third_owner(104_000_000, 101_000_000);
    core.revoke_where_owner_lapsed(now(104_600_000));
    assert!(!core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_100_000));
    assert!(
        core.holds(&name),
        "revoked although its old owner left in time"
    );
    // Its own move ends its acting at once, so the window for it is the
    // whole `grace + ping_interval (1-ρ)/(1+ρ)` (about 5.25 s), not the
    // settle window (one-computer seed 1842): known to have moved itself
    // at 106.2 s, the lock follows...
    let (mut core, name) = carried_into_a_third_owner(106_200_000, 101_000_000);
    core.revoke_where_owner_lapsed(now(104_600_000));
    assert!(!core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_100_000));
    assert!(
        core.holds(&name),
        "revoked although its old owner moved in time"
    );
    // ...known only at 106.3 s, it ends `grace` after the majority
    // contact of 100 s.
    let (mut core, name) = carried_into_a_third_owner(106_300_000, 101_000_000);
    core.revoke_where_owner_lapsed(now(104_600_000));
    assert!(core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(104_900_000));
    assert!(core.holds(&name));
    core.revoke_where_owner_lapsed(now(105_000_000));
    assert!(
        !core.holds(&name),
        "kept past what its old owner vouched for"
    );
}

/// An old owner that answered without acting after its last acting
/// answer (it resumed from a pause and answered the pings that waited,
/// then was cut off before the next: seed 5256) heard this agent then:
/// the settle window runs from that answer, while the lock still ends
/// `grace` after what it vouched for unless it follows its new owner.
#[test]
fn the_settle_window_runs_from_the_old_owners_latest_answer_acting_or_not() {
    // Known to have moved at 106.8 s: past 101 s + its window (about
    // 5.25 s), within 101.6 s + the window.
    let (mut core, name) = carried_into_a_third_owner(106_800_000, 101_600_000);
    core.revoke_where_owner_lapsed(now(104_600_000));
    assert!(!core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_100_000));
    assert!(
        core.holds(&name),
        "revoked although its old owner heard this agent late enough"
    );
    // Without that later answer, the same move is too late.
    let (mut core, name) = carried_into_a_third_owner(106_800_000, 101_000_000);
    core.revoke_where_owner_lapsed(now(104_600_000));
    assert!(core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_000_000));
    assert!(
        !core.holds(&name),
        "kept past what its old owner vouched for"
    );
}

/// `n2` (this agent) holds `name` through three epochs: 10 (leaders
/// `n1`, `n0`: `n1` owns it, last answered at 101 s, the majority
/// contact 100 s), 11 (`n0` alone, or `n0` and `n1` when `two`: `n0`
/// owns it and never answers this agent as acting, unless at
/// `n0_answered`, and `n1` is not known to have left 10, so the lock
/// stays carried with `n1`'s vouch) and 12 (`n1`, `n0` again: `n1` owns it once more), to which
/// it moves at 104.5 s; `n1` answers there at 104.6 s. `n0` is known
/// to have moved out of 11 itself at `n0_moved`, if at all; `n1`'s
/// first message of epoch 12 arrives at 104.6 s.
///
/// Members other than this agent known to be in epoch 10 or older
/// after this agent moved to 11 (the send times of the pings they
/// answered there) are `in_10`; nothing else is known of when 11's
/// state was built.
fn carried_through_another_owner_and_back(
    n0_answered: Option<u64>,
    n0_moved: Option<u64>,
    plant: crate::cluster::Plant,
) -> (Core, ObjectName) {
    carried_through_another_owner_and_back_after(n0_answered, n0_moved, plant, &[])
}

fn carried_through_another_owner_and_back_after(
    n0_answered: Option<u64>,
    n0_moved: Option<u64>,
    plant: crate::cluster::Plant,
    in_10: &[(u16, u64)],
) -> (Core, ObjectName) {
    let n0_answered = n0_answered.map(|t| (t, true));
    carried_through_another_owner_and_back_answered(n0_answered, n0_moved, plant, in_10, false)
}

/// As above, `n0`'s answer in 11 (send time, whether as acting) given.
fn carried_through_another_owner_and_back_answered(
    n0_answered: Option<(u64, bool)>,
    n0_moved: Option<u64>,
    plant: crate::cluster::Plant,
    in_10: &[(u16, u64)],
    two: bool,
) -> (Core, ObjectName) {
    let (mut core, name) = carried_into_a_third_owner(0, 101_000_000);
    core.cluster.cfg.plant = plant;
    let (n0, n1) = (id(4000, "n0"), id(4001, "n1"));
    let c = &mut core.cluster;
    if !two {
        // `n0` alone: the leaving of 11's other leaders says nothing.
        c.epoch.leaders = vec![n0.clone()];
        c.epoch.view = crate::cluster::view_of(&c.epoch.leaders);
        let view = c.epoch.view;
        c.peers.contact.get_mut(&n0).expect("set up").view = view;
    }
    // Epoch 11 as set up, but nobody known to have left epoch 10 and
    // no answer of `n0` in it (or an early one): nothing settles.
    c.home.carried.left.clear();
    c.home.carried.before.clear();
    for (port, t) in in_10 {
        (c.home.carried).answered_before(addr(*port), 10, Time::from_micros(*t));
    }
    match n0_answered {
        Some((t, acting)) => {
            let k = c.peers.contact.get_mut(&n0).expect("set up");
            k.sent = Time::from_micros(t);
            k.active_sent = acting.then_some(Time::from_micros(t));
        }
        None => {
            c.peers.contact.remove(&n0);
        }
    }
    core.revoke_where_owner_lapsed(now(104_400_000));
    assert!(core.cluster.home.carried.locks.contains_key(&name));
    core.carry_over(now(104_500_000));
    let kept = &core.cluster.home.carried.locks[&name];
    assert_eq!(kept.owner.as_ref(), Some(&n1), "the earliest owner is kept");
    assert_eq!((kept.at, kept.answered), (at(100), at(101)));
    // Two of the three members in 10 until some time: 11's state was
    // built after it.
    let mut times: Vec<u64> = in_10.iter().map(|(_, t)| *t).collect();
    times.sort_unstable();
    let built = times.iter().rev().nth(1).map(|t| Time::from_micros(*t));
    let later = |t: Time| built.map_or(t, |b| b.max(t));
    let from = match n0_answered {
        Some((t, true)) => later(Time::from_micros(t)),
        // Not as acting: from that answer, as far as a lock-delay of
        // 11 (from `at` − stretch(peer_timeout), or from when 11 was
        // built) keeps it from granting.
        Some((t, false)) => {
            let cfg = &core.cluster.cfg;
            let delay_ends =
                later(at(100) - cfg.stretch(cfg.peer_timeout)) + cfg.shrink(cfg.lock_delay());
            let cap = delay_ends - core.own_move_window();
            later(at(100)).max(Time::from_micros(t).min(cap))
        }
        None => later(at(100)),
    };
    let via: Vec<(Id, Time)> = kept.via.iter().map(|v| (v.owner.clone(), v.from)).collect();
    assert_eq!(via, [(n0.clone(), from)], "and the owner of 11");
    enter_epoch(&mut core, 12, [&n1, &n0], &n1, 104_600_000);
    let c = &mut core.cluster;
    c.home
        .carried
        .left(addr(4001), 12, Time::from_micros(104_600_000));
    if let Some(t) = n0_moved {
        c.home.carried.left(addr(4000), 12, Time::from_micros(t));
    }
    (core, name)
}

/// The owner of epoch 12 is the owner of epoch 10, but epoch 11, which
/// the lock was carried through, had another owner, `n0`, that never
/// answered this agent there: its table need not have had the lock (a
/// state with a lock-delay, from about 101 s − stretch(peer_timeout) +
/// `lock_delay` ≈ 106.5 s on), or dropped this agent's ticket
/// (`release_delay` after its state was built, no earlier than about
/// 100 s). It may act in 11 until stretch(peer_timeout) after the
/// quorum of 12 left 11, up to some 107 s. Unless `n0` is known to
/// have stopped acting in 11 by 100 s + `grace` + ping_interval·
/// (1−ρ)/(1+ρ), the lock must end with what `n1` vouched for in 10
/// (100 s + `grace`), not follow `n1` in 12 at once (S1).
#[test]
fn a_lock_carried_through_another_owner_and_back_does_not_follow_at_once() {
    use crate::cluster::Plant;
    let cfg = crate::core::Config::default().cluster;
    let earliest_grant = at(101) - cfg.stretch(cfg.peer_timeout) + cfg.lock_delay();
    assert!(earliest_grant > at(105) + std::time::Duration::from_millis(1000));
    // Nothing known of `n0` but what the others did: this agent (104.5
    // s) and `n1` (104.6 s) left 11, past 100 s + the settle window
    // (3.2 s): `n1`'s answer in 12 settles nothing, and the lock ends
    // 5 s after 100 s.
    let (mut core, name) = carried_through_another_owner_and_back(None, None, Plant::None);
    core.revoke_where_owner_lapsed(now(104_700_000));
    assert!(
        core.cluster.home.carried.locks.contains_key(&name),
        "followed the owner of 12 although the owner of 11 may still act there"
    );
    core.revoke_where_owner_lapsed(now(104_900_000));
    assert!(core.holds(&name));
    core.revoke_where_owner_lapsed(now(105_000_000));
    assert!(
        !core.holds(&name),
        "held past what the owner of 10 vouched for while the owner of 11 may grant it"
    );
    // The same-owner shortcut alone (the rule before `via`) follows at
    // once and keeps the lock: what the first case catches.
    let (mut core, name) =
        carried_through_another_owner_and_back(None, None, Plant::FollowSameOwner);
    core.revoke_where_owner_lapsed(now(104_700_000));
    assert!(!core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_100_000));
    assert!(core.holds(&name), "the planted shortcut is what is caught");
    // `n0` known to have moved out of 11 itself at 104.65 s, within
    // 100 s + `grace` + ping_interval·(1−ρ)/(1+ρ) (105.245 s): it
    // stopped acting there before it could grant or drop the lock,
    // which follows `n1` (R1).
    let (mut core, name) =
        carried_through_another_owner_and_back(None, Some(104_650_000), Plant::None);
    core.revoke_where_owner_lapsed(now(104_700_000));
    assert!(!core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_100_000));
    assert!(
        core.holds(&name),
        "revoked although the owner of 11 left it in time"
    );
    // `n0` answered as acting in 11 at 102 s, so its table had the
    // lock, which it drops no earlier than `release_delay` after that:
    // the others' leaving by 104.6 s is within 102 s + the settle
    // window, and the lock follows.
    let (mut core, name) =
        carried_through_another_owner_and_back(Some(102_000_000), None, Plant::None);
    core.revoke_where_owner_lapsed(now(104_700_000));
    assert!(!core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_100_000));
    assert!(core.holds(&name));
    // Its answer at 101.2 s: 104.6 s is past 101.2 s + 3.2 s, kept.
    let (mut core, name) =
        carried_through_another_owner_and_back(Some(101_200_000), None, Plant::None);
    core.revoke_where_owner_lapsed(now(104_700_000));
    assert!(core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_000_000));
    assert!(!core.holds(&name));
}

/// The owner of 11 never answered, but two of the three members are
/// known to have been in epoch 10 until 101.5 s (pings they answered
/// there): 11's state, reported by a quorum of two, was built after
/// that, and its owner drops nothing before `release_delay` after it.
/// The others' leaving of 11 by 104.6 s is within 101.5 s + the settle
/// window: the lock follows (R1; one-computer seeds 1269, 1926, 2040,
/// 2376 and 2958). Known only until 101.3 s, it is not.
#[test]
fn an_owner_in_between_that_never_answered_counts_from_when_its_state_was_built() {
    use crate::cluster::Plant;
    let in_10 = [(4001, 101_500_000), (4002, 101_500_000)];
    let (mut core, name) =
        carried_through_another_owner_and_back_after(None, None, Plant::None, &in_10);
    core.revoke_where_owner_lapsed(now(104_700_000));
    assert!(!core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_100_000));
    assert!(
        core.holds(&name),
        "revoked although 11 was built late enough"
    );
    // One member known in 10 that late is not enough: the other two of
    // a quorum may have reported to 11 long before.
    let in_10 = [(4001, 101_500_000), (4002, 100_000_000)];
    let (mut core, name) =
        carried_through_another_owner_and_back_after(None, None, Plant::None, &in_10);
    core.revoke_where_owner_lapsed(now(104_700_000));
    assert!(core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_000_000));
    assert!(!core.holds(&name), "kept on the word of one member");
    let in_10 = [(4001, 101_300_000), (4002, 101_300_000)];
    let (mut core, name) =
        carried_through_another_owner_and_back_after(None, None, Plant::None, &in_10);
    core.revoke_where_owner_lapsed(now(104_700_000));
    assert!(core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_000_000));
    assert!(!core.holds(&name));
}

/// A leader of the new epoch acting says a quorum of members left the
/// old one: its owner stops acting there `stretch(peer_timeout)` after
/// at most, as when `members - quorum + 1` others are each known to
/// have left.
#[test]
fn a_quorum_acting_in_the_new_epoch_settles_like_the_others_leaving() {
    // Nobody known to have left 10 one by one, and `n1`, the old
    // owner, answered at 101 s: a leader acting in 11 by 104.0 s
    // (within 101 s + the window) settles it.
    let (mut core, name) = carried_into_a_third_owner(0, 101_000_000);
    core.cluster.home.carried.left.clear();
    core.cluster
        .home
        .carried
        .quorum_acts(Time::from_micros(104_000_000));
    core.revoke_where_owner_lapsed(now(104_600_000));
    assert!(!core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_100_000));
    assert!(
        core.holds(&name),
        "revoked although a quorum acted in 11 in time"
    );
    // Only the first such answer counts; learnt at 104.3 s, too late.
    let (mut core, name) = carried_into_a_third_owner(0, 101_000_000);
    core.cluster.home.carried.left.clear();
    core.cluster
        .home
        .carried
        .quorum_acts(Time::from_micros(104_300_000));
    core.cluster
        .home
        .carried
        .quorum_acts(Time::from_micros(104_000_000));
    core.revoke_where_owner_lapsed(now(104_600_000));
    assert!(core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_000_000));
    assert!(!core.holds(&name));
}

/// The owner of 11 answered this agent there, but only as not acting:
/// its table may have had the lock (then it drops it no earlier than
/// `release_delay` after that answer), or 11's state had a lock-delay
/// instead. So the answer counts as far as the lock-delay reaches: with
/// 11 built after 101.3 s, its lock-delay ends after 108.6 s, and an
/// answer at 101.8 s lets the others' leaving by 104.6 s settle the
/// lock, which it did not from 101.3 s alone (R1; one-computer seeds
/// 1611 and 2274). With nothing known of when 11 was built, the
/// lock-delay may have started at 100 s − stretch(peer_timeout), and
/// ends after 105.3 s only: an answer at 102 s counts as 100.1 s, and
/// the lock ends with what `n1` vouched for.
#[test]
fn an_owner_in_between_that_answered_not_acting_counts_as_far_as_a_lock_delay_allows() {
    use crate::cluster::Plant;
    let in_10 = [(4001, 101_300_000), (4002, 101_300_000)];
    let (mut core, name) = carried_through_another_owner_and_back_answered(
        Some((101_800_000, false)),
        None,
        Plant::None,
        &in_10,
        false,
    );
    assert_eq!(
        core.cluster.home.carried.locks[&name].via[0].from,
        Time::from_micros(101_800_000)
    );
    core.revoke_where_owner_lapsed(now(104_700_000));
    assert!(!core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_100_000));
    assert!(
        core.holds(&name),
        "revoked although n0 answered late enough"
    );
    let (mut core, name) = carried_through_another_owner_and_back_answered(
        Some((102_000_000, false)),
        None,
        Plant::None,
        &[],
        false,
    );
    let from = core.cluster.home.carried.locks[&name].via[0].from;
    assert!(from > at(100) && from < Time::from_micros(100_200_000));
    core.revoke_where_owner_lapsed(now(104_700_000));
    assert!(core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_000_000));
    assert!(
        !core.holds(&name),
        "kept past the lock-delay's bound on an answer that was not acting"
    );
}
/// Epoch 11 led by `n0` and `n1`: `n0` never answered this agent there,
/// and nothing is known of when 11's state was built, so `n0` may drop
/// the lock there from 100 s + `grace` + ping_interval·(1−ρ)/(1+ρ)
/// (105.245 s) on, and may still act there. But a grant in 11 needs
/// the votes of both of its leaders, cast while each is in 11 and
/// after `n0` decided to grant, so after the drop; `n1` is known to
/// have left 11 at 104.6 s, before it: nothing in 11 can be granted
/// against the lock, which follows `n1` in 12 (R1, one-computer seed
/// 123). Known only at 105.3 s, it is not.
#[test]
fn an_owner_in_between_without_a_majority_of_its_epochs_leaders_cannot_take_the_lock() {
    use crate::cluster::Plant;
    let (mut core, name) =
        carried_through_another_owner_and_back_answered(None, None, Plant::None, &[], true);
    core.revoke_where_owner_lapsed(now(104_700_000));
    assert!(!core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_100_000));
    assert!(
        core.holds(&name),
        "revoked although the other leader of 11 had left it in time"
    );
    let (mut core, name) =
        carried_through_another_owner_and_back_answered(None, None, Plant::None, &[], true);
    // `n1` known in 12 only later (its answer there then too).
    let c = &mut core.cluster.home.carried;
    c.left.retain(|(a, _)| *a != addr(4001));
    c.left(addr(4001), 12, Time::from_micros(105_300_000));
    core.revoke_where_owner_lapsed(now(104_700_000));
    assert!(core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(105_000_000));
    assert!(
        !core.holds(&name),
        "followed although 11 could still gather both votes after the drop"
    );
}

/// `n2` (this agent) holds `name` carried from epoch 10 (owner `n1`,
/// its answer at 101 s) into 11, where `n1` owns it again and answers
/// as acting at 104 s; no tick runs before this agent moves on to 12
/// at 104.1 s (one-computer seed 21702: 33 ms between the answer and
/// the move). The lock followed `n1` in 11 at its answer (the same
/// owner), and is carried into 12 with that answer, not with the vouch
/// of 10. In 12 `n0` owns it and answers at 104.6 s; `n1` is known to
/// have moved out of 11 at `n1_moved`.
fn carried_through_the_same_owner_answering_just_before_the_move(
    n1_moved: u64,
) -> (Core, ObjectName) {
    let (mut core, name) = carried_into_a_third_owner(0, 101_000_000);
    let (n0, n1) = (id(4000, "n0"), id(4001, "n1"));
    enter_epoch(&mut core, 11, [&n1, &n0], &n1, 104_000_000);
    let c = &mut core.cluster;
    c.home.carried.left.clear();
    c.peers.contact.remove(&n0);
    // In contact with both leaders of 11 since 104 s.
    c.home.last_ok = Some(at(104));
    core.carry_over(now(104_100_000));
    let kept = &core.cluster.home.carried.locks[&name];
    assert_eq!(kept.owner.as_ref(), Some(&n1), "the owner of 11");
    assert_eq!(
        (kept.at, kept.answered),
        (at(104), at(104)),
        "its answer in 11"
    );
    assert!(kept.via.is_empty());
    enter_epoch(&mut core, 12, [&n0, &n1], &n0, 104_600_000);
    core.cluster
        .home
        .carried
        .left(addr(4001), 12, Time::from_micros(n1_moved));
    (core, name)
}

/// A carried lock whose owner answers as acting in the next epoch too
/// follows it there even when this agent moves on before its next tick:
/// the answers that arrived since the tick are weighed at the move. Its
/// old owner known to have moved out of 11 at 106.5 s (past 101 s +
/// about 5.25 s, within 104 s + 5.25 s), the lock follows `n0` in 12;
/// known only at 109.3 s, it ends `grace` after 104 s.
#[test]
fn a_lock_that_followed_the_same_owner_just_before_a_move_is_carried_with_its_answer() {
    let (mut core, name) =
        carried_through_the_same_owner_answering_just_before_the_move(106_500_000);
    core.revoke_where_owner_lapsed(now(106_600_000));
    assert!(!core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(109_100_000));
    assert!(
        core.holds(&name),
        "revoked although its owner in 11 vouched for it at 104 s"
    );
    let (mut core, name) =
        carried_through_the_same_owner_answering_just_before_the_move(109_300_000);
    core.revoke_where_owner_lapsed(now(106_600_000));
    assert!(core.cluster.home.carried.locks.contains_key(&name));
    core.revoke_where_owner_lapsed(now(108_900_000));
    assert!(core.holds(&name));
    core.revoke_where_owner_lapsed(now(109_000_000));
    assert!(
        !core.holds(&name),
        "kept past what its owner in 11 vouched for"
    );
}
