//! The home's side of a lease in a cluster (docs/cluster.md, "Links and
//! liveness"): until when the owner of each object vouches for this
//! agent's locks on it, and the revocation of those it stopped vouching
//! for, also across epoch changes.
//!
//! This file holds the part and its own logic; what the core does with it
//! on each message and tick is in `core/cluster/vouch.rs`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use super::{Cluster, Id};
use crate::time::Time;
use crate::vocab::ObjectName;

/// What a lock held across an epoch change keeps of its former owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CarriedLock {
    /// What that owner vouched for: the send time of the latest ping it
    /// answered, or the majority contact, whichever was earlier. Unless the
    /// lock follows its new owner, it ends `grace` after this.
    pub at: Time,
    /// The send time of the latest ping that owner itself answered in
    /// that epoch, as an acting leader or not (`at` when it was this agent
    /// or there was none): the settle window is measured from it, as the
    /// owner drops the lock only `release_delay` after it heard this agent
    /// last, whatever the other leaders answered, and any answer says it
    /// heard this agent after the ping was sent.
    pub answered: Time,
    /// That owner.
    pub owner: Option<Id>,
    /// The owners of the epochs it was carried through since, when other
    /// than `owner` (empty unless it moved on again before it followed a
    /// new owner), each with the time its own check runs from: the send
    /// time of the latest ping it answered there as acting, or `at` when
    /// it never did. Each may still act in its epoch, where its table
    /// need not have had the lock (a state with a lock-delay, or one that
    /// dropped this agent's ticket), so the lock follows a new owner only
    /// once each of them is that owner or is known to have stopped acting
    /// in time (`Core::settle_carried`; docs/cluster.md, "Links and
    /// liveness").
    pub via: Vec<Via>,
}

/// An owner a carried lock passed through (`CarriedLock::via`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Via {
    /// The owner of that epoch.
    pub owner: Id,
    /// Where its check starts (`Core::via_start`).
    pub from: Time,
    /// That epoch's leaders (one list shared by every lock carried out of
    /// it): a grant there needs the votes of a majority of them, each cast
    /// while it was still in that epoch.
    pub leaders: Arc<[Id]>,
}

/// Home: the locks held when this agent moved to the current epoch, each
/// with what its former owner vouched for. An entry of an object that no
/// longer holds anything means nothing and is dropped on the next walk, or
/// when the object is granted again.
#[derive(Debug, Default)]
pub(crate) struct Carried {
    pub locks: BTreeMap<ObjectName, CarriedLock>,
    /// No entry's time is earlier: nothing carried lapses before it +
    /// `grace` (kept when entries go, so it may be earlier than all).
    pub(crate) earliest: Option<Time>,
    /// The leaders (bit i = leader i) whose answers were weighed against
    /// the entries already: only the first answer a leader gives after the
    /// move can settle one (a later answer is sent later), so a million
    /// carried locks are walked once per leader, not every tick.
    pub(crate) weighed: u8,
    /// The epoch the locks were carried from.
    pub from_epoch: u64,
    /// Members known to have left that epoch, with when this agent learnt
    /// it (itself: when it moved; another: when a message of a later epoch
    /// from it arrived). Epochs only grow: a member that left never
    /// answers in that epoch again.
    pub(crate) left: Vec<(SocketAddr, Time)>,
    /// How many entries of `left` the entries were last walked with.
    pub(crate) left_walked: usize,
    /// The old owners (by address) for which enough members were known to
    /// have left when the entries were last walked.
    pub(crate) settled_for: Vec<SocketAddr>,
    /// When this agent first learnt that a leader of the epoch it moved to
    /// acts (the arrival of its first `active=1` answer, or this agent's own
    /// acting): a leader acts only while a quorum of members answers it in
    /// its epoch, so by then a quorum had left every earlier epoch, and no
    /// owner there could gather a quorum's answers any more (it stops
    /// acting at most `stretch(peer_timeout)` later, like after
    /// [`Carried::others_left_by`]).
    pub(crate) quorum_moved: Option<Time>,
    /// Per member (this agent included), the latest time it was known to
    /// be in the epoch this agent left or an older one: the send time of
    /// the latest ping it answered in one (for this agent, when it moved).
    /// It reported to every later epoch only after that, so the state of
    /// the epoch moved to, and of any between, was built no earlier than
    /// [`Carried::built_not_before`].
    pub(crate) before: BTreeMap<SocketAddr, Time>,
}

impl Carried {
    pub(crate) fn new(locks: BTreeMap<ObjectName, CarriedLock>) -> Carried {
        let earliest = locks.values().map(|l| l.at).min();
        Carried {
            locks,
            earliest,
            ..Carried::default()
        }
    }

    /// Whether some entry may have lapsed by `now`.
    pub(crate) fn may_have_lapsed(&self, now: Time, grace: std::time::Duration) -> bool {
        self.earliest.is_some_and(|e| now >= e + grace)
    }

    /// `member` was found in an epoch later than the one the locks were
    /// carried from, at `now`.
    pub(crate) fn left(&mut self, member: SocketAddr, epoch: u64, now: Time) {
        if epoch > self.from_epoch
            && !self.locks.is_empty()
            && !self.left.iter().any(|(a, _)| *a == member)
        {
            self.left.push((member, now));
        }
    }

    /// The time by which `old` had left the epoch itself, or so many other
    /// members had (`members - quorum + 1` of them) that `old` could no
    /// longer gather a quorum's answers in it: it stops acting there at
    /// most `stretch(peer_timeout)` later (docs/cluster.md, "Links and
    /// liveness").
    /// Whichever came first counts: a lock whose old owner was known to be
    /// cut off from its quorum does not wait for that owner's own move.
    pub(crate) fn quorum_left_by(
        &self,
        old: SocketAddr,
        members: usize,
        quorum: usize,
    ) -> Option<Time> {
        match (
            self.moved_by(old),
            self.others_left_by(old, members, quorum),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// `member` answered a ping sent at `sent` in `epoch`. Only an epoch
    /// no later than the one this agent left (`from_epoch`) counts: an
    /// epoch between that one and the one it moved to, which this agent
    /// may never have adopted, may have been built before and started a
    /// lock-delay that the new epoch inherits, and every epoch after the
    /// one left got the member's report only after this answer. Epoch 0
    /// says nothing: an agent that restarted answers in it until it adopts
    /// an epoch, and may have reported to a later one before; an agent in
    /// any other epoch has never reported to a later one (it writes an
    /// epoch to disk before it reports to it, and never adopts below what
    /// it wrote).
    pub(crate) fn answered_before(&mut self, member: SocketAddr, epoch: u64, sent: Time) {
        if epoch == 0 || epoch > self.from_epoch {
            return;
        }
        let t = self.before.entry(member).or_insert(sent);
        *t = (*t).max(sent);
    }

    /// The earliest time the state of the epoch this agent moved to, or of
    /// any epoch between the one it left and that one, can have been built
    /// (by this agent's clock; `None`: unknown). A collector builds a
    /// state from the reports of `quorum` members, each sent after that
    /// member left the epoch this agent left. `members - quorum + 1`
    /// members known to be in that epoch or an older one at or after a
    /// time leave fewer than a quorum to report before it, so one of them
    /// is in every quorum of reporters: every such state was built after
    /// the latest time that `members - quorum + 1` members share. Leaders
    /// count every home in their state as heard when they install it, so
    /// none drops a lock in it `release_delay` after less than this; a
    /// lock-delay, started by the new epoch's state or by one between and
    /// inherited, grants nothing for even longer.
    pub(crate) fn built_not_before(&self, members: usize, quorum: usize) -> Option<Time> {
        let need = (members + 1).checked_sub(quorum)?.max(1);
        let mut times: Vec<Time> = self.before.values().copied().collect();
        times.sort_unstable_by(|a, b| b.cmp(a));
        times.get(need - 1).copied()
    }

    /// A leader of the epoch this agent moved to was found acting at `now`
    /// (only the first time counts: the earliest evidence).
    pub(crate) fn quorum_acts(&mut self, now: Time) {
        if self.quorum_moved.is_none() && !self.locks.is_empty() {
            self.quorum_moved = Some(now);
        }
    }

    /// Whether so many of `leaders`, the leaders of an epoch no later than
    /// the one the locks were carried from, were known by `by` to have
    /// left it (`len - majority + 1` of them) that the others can no
    /// longer make a majority of its votes: a grant there decided after
    /// `by` gathers none (a leader votes only while in its epoch, and only
    /// when the owner asks, after it decided).
    pub(crate) fn no_majority_left_by(&self, leaders: &[Id], by: Time) -> bool {
        let need = leaders.len() - leaders.len() / 2;
        let gone = (leaders.iter())
            .filter_map(|l| super::ids::parse_id(l).and_then(|p| p.addr))
            .filter(|a| self.moved_by(*a).is_some_and(|t| t <= by))
            .count();
        need > 0 && gone >= need
    }

    /// When `old` itself was known to have left the epoch: it stopped
    /// acting there when it adopted a later one, at or before then.
    pub(crate) fn moved_by(&self, old: SocketAddr) -> Option<Time> {
        (self.left.iter()).find(|(a, _)| *a == old).map(|(_, t)| *t)
    }

    /// When so many members other than `old` were known to have left the
    /// epoch (`members - quorum + 1`) that `old` could no longer gather a
    /// quorum's answers in it, or a quorum was known to act in a later one
    /// ([`Carried::quorum_moved`]), whichever came first.
    pub(crate) fn others_left_by(
        &self,
        old: SocketAddr,
        members: usize,
        quorum: usize,
    ) -> Option<Time> {
        let need = (members + 1).checked_sub(quorum).map(|n| n.max(1));
        let mut times: Vec<Time> = (self.left.iter())
            .filter(|(a, _)| *a != old)
            .map(|(_, t)| *t)
            .collect();
        times.sort_unstable();
        let others = need.and_then(|n| times.get(n - 1).copied());
        [others, self.quorum_moved].into_iter().flatten().min()
    }
}

impl Cluster {
    /// The send time of the latest ping `owner`, a leader of this view,
    /// answered in this view, as an acting leader or not: it heard this
    /// agent after that. (Only [`Cluster::answered_by`] vouches: an answer
    /// that is not acting does not say that the epoch knows this agent's
    /// locks.)
    pub(crate) fn heard_back_by(&self, owner: &Id) -> Option<Time> {
        self.peers
            .contact
            .get(owner)
            .filter(|k| k.in_view(self.epoch.number, self.epoch.view))
            .map(|k| k.sent)
    }

    /// The send time of the latest ping `owner`, a leader of this view,
    /// answered as an acting leader (for this agent itself: now, while it
    /// acts as a ready leader whose table counts its own report, as it
    /// would answer another agent `active=1`: a table that does not count
    /// it need not have its locks, and a lock carried in would follow an
    /// owner that grants its object again; S1, seed 7453).
    pub(crate) fn answered_by(&self, owner: &Id, now: Time) -> Option<Time> {
        let c = self;
        if *owner == c.me {
            let counted =
                (c.leader.table.as_ref()).is_some_and(|l| l.ready && l.reporters.contains(&c.me));
            return (counted && self.acting(now)).then_some(now);
        }
        c.peers
            .contact
            .get(owner)
            .filter(|k| k.in_view(c.epoch.number, c.epoch.view))
            .and_then(|k| k.active_sent)
    }

    /// The time from which this agent's locks on `object` are vouched for,
    /// never later than what a majority of the leaders vouches for
    /// (`last_ok`). An owner drops the tickets of a home it has not heard
    /// from for `release_delay`, so the home relies on them only `grace`
    /// after the owner last answered it: a majority answering is not enough
    /// when the owner is not in it. A lock this agent held when it moved to
    /// this epoch keeps what its former owner vouched for until the new
    /// owner answers soon enough (`Core::carry_over`).
    pub(crate) fn object_vouched_from(&self, object: &ObjectName, now: Time) -> Option<Time> {
        let c = self;
        let majority = c.home.last_ok?;
        if let Some(l) = c.home.carried.locks.get(object) {
            return Some(majority.min(l.at));
        }
        let Some(i) = c.owner_index_of(object) else {
            return Some(majority);
        };
        let owner = &c.epoch.leaders[i];
        if *owner == c.me {
            return Some(majority); // it never drops its own home's tickets
        }
        self.answered_by(owner, now)
            .map(|a| majority.min(self.heard_back_since_acting(owner).unwrap_or(a).max(a)))
    }

    /// The send time of the latest ping `owner` answered in this view,
    /// acting or not, once it answered one there as acting. Its table had
    /// this agent's locks since that answer (it answers `active=1` only to
    /// a home its state counts), and it can lose one in the same view only
    /// by this agent's release or by dropping it `release_delay` after it
    /// last heard this agent, after that ping was sent; it grants nothing
    /// while it does not act. What the other epochs may grant is bounded
    /// by the majority contact, as before. An owner that did not act for a
    /// moment (a pause ended just as the others noticed it) and was then
    /// cut off one way revoked a lock that a healthy majority kept: the
    /// next epoch's owner answered 0.05 s after its older vouch ran out
    /// (one-computer seed 4857).
    fn heard_back_since_acting(&self, owner: &Id) -> Option<Time> {
        let k = self.peers.contact.get(owner)?;
        let in_view = k.in_view(self.epoch.number, self.epoch.view);
        in_view.then_some(k.active_sent.map(|_| k.sent)).flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_moved_to_was_built_after_what_n_minus_q_plus_1_members_share() {
        let a = |p: u16| -> SocketAddr { format!("127.0.0.1:{p}").parse().unwrap() };
        let mut c = Carried {
            from_epoch: 7,
            ..Carried::default()
        };
        assert_eq!(c.built_not_before(3, 2), None);
        c.answered_before(a(1), 7, at(10));
        assert_eq!(c.built_not_before(3, 2), None, "one member is not two");
        c.answered_before(a(2), 7, at(12));
        assert_eq!(c.built_not_before(3, 2), Some(at(10)));
        // A later answer of the same member moves its time, and never back.
        c.answered_before(a(1), 7, at(11));
        c.answered_before(a(1), 7, at(9));
        assert_eq!(c.built_not_before(3, 2), Some(at(11)));
        // Five members, a quorum of three: the third latest.
        c.answered_before(a(3), 7, at(14));
        assert_eq!(c.built_not_before(5, 3), Some(at(11)));
        // An answer in epoch 0 (a restarted agent, which may have reported
        // to the new epoch before it restarted) counts for nothing.
        c.answered_before(a(4), 0, at(20));
        c.answered_before(a(5), 0, at(20));
        assert_eq!(c.built_not_before(5, 3), Some(at(11)));
        // Nor does an answer in an epoch after the one left (8): it may
        // be one between, built before, whose lock-delay the new epoch
        // inherits. An older one (6) counts.
        c.answered_before(a(4), 8, at(20));
        c.answered_before(a(5), 8, at(20));
        assert_eq!(c.built_not_before(5, 3), Some(at(11)));
        c.answered_before(a(4), 6, at(20));
        assert_eq!(c.built_not_before(5, 3), Some(at(12)));
    }

    fn at(s: u64) -> Time {
        Time::from_micros(s * 1_000_000)
    }

    #[test]
    fn the_old_owner_is_cut_off_when_the_others_left_even_if_it_moved_later() {
        let (a, b, old): (SocketAddr, SocketAddr, SocketAddr) = (
            "127.0.0.1:4001".parse().unwrap(),
            "127.0.0.1:4002".parse().unwrap(),
            "127.0.0.1:4000".parse().unwrap(),
        );
        let lock = CarriedLock {
            at: at(1),
            answered: at(1),
            owner: None,
            via: Vec::new(),
        };
        let mut c = Carried::new([(ObjectName::from(&b"n"[..]), lock.clone())].into());
        c.from_epoch = 5;
        c.left(a, 6, at(10));
        assert_eq!(c.quorum_left_by(old, 3, 2), None, "one of two others");
        c.left(b, 6, at(11));
        assert_eq!(c.quorum_left_by(old, 3, 2), Some(at(11)));
        assert_eq!(c.others_left_by(old, 3, 2), Some(at(11)));
        assert_eq!(c.moved_by(old), None, "the others' evidence only");
        // The old owner's own move, later, does not undo what was known.
        c.left(old, 6, at(15));
        assert_eq!(c.quorum_left_by(old, 3, 2), Some(at(11)));
        assert_eq!(c.moved_by(old), Some(at(15)), "but is told apart");
        // Nor does an earlier move of its own count for less.
        let mut d = Carried::new([(ObjectName::from(&b"n"[..]), lock)].into());
        d.from_epoch = 5;
        d.left(old, 6, at(4));
        d.left(a, 6, at(10));
        d.left(b, 6, at(11));
        assert_eq!(d.quorum_left_by(old, 3, 2), Some(at(4)));
        // An epoch not later than the carried one says nothing.
        d.left("127.0.0.1:4003".parse().unwrap(), 5, at(2));
        assert_eq!(d.left.len(), 3);
    }

    #[test]
    fn an_epoch_cannot_grant_once_a_majority_of_its_leaders_is_out_of_reach() {
        let a = |p: u16| -> SocketAddr { format!("127.0.0.1:{p}").parse().unwrap() };
        let id = |p: u16| -> Id {
            super::super::ids::make_id(None, 1, Some(a(p)), 1, &format!("n{p}")).into()
        };
        let lock = CarriedLock {
            at: at(1),
            answered: at(1),
            owner: None,
            via: Vec::new(),
        };
        let mut c = Carried::new([(ObjectName::from(&b"n"[..]), lock)].into());
        c.from_epoch = 5;
        let three = [id(1), id(2), id(3)];
        let two = [id(1), id(2)];
        c.left(a(1), 6, at(10));
        assert!(
            !c.no_majority_left_by(&three, at(20)),
            "two of three remain"
        );
        assert!(
            c.no_majority_left_by(&two, at(20)),
            "one of two is no majority"
        );
        assert!(!c.no_majority_left_by(&two, at(9)), "not left by then");
        c.left(a(3), 6, at(12));
        assert!(c.no_majority_left_by(&three, at(12)));
        assert!(!c.no_majority_left_by(&three, at(11)));
        // A member that is not a leader of the epoch counts for nothing.
        c.left(a(4), 6, at(5));
        assert!(!c.no_majority_left_by(&three, at(11)));
        assert!(!c.no_majority_left_by(&[], at(20)), "no leaders: unknown");
    }

    /// `n2` of three, in epoch 10 led by `n1` and `n0`, in contact with a
    /// majority until 100 s.
    fn home_of_epoch_ten() -> Cluster {
        let addr = |i: u16| SocketAddr::from(([127, 0, 0, 1], 4000 + i));
        let cfg = super::super::ClusterConfig {
            listen: Some(addr(2)),
            neighbors: (0..3).map(addr).collect(),
            ..super::super::ClusterConfig::default()
        };
        let now = crate::time::Now {
            mono: Time::ZERO,
            wall: crate::time::UnixTime(1_700_000_000_000_000),
        };
        let mut c = Cluster::new(&cfg, "n2", now);
        c.epoch.number = 10;
        c.epoch.leaders = vec![Id::from("n1"), Id::from("n0")];
        c.epoch.view = super::super::view_of(&c.epoch.leaders);
        c.home.last_ok = Some(at(100));
        c
    }

    /// A name the leader at `index` of two owns.
    fn owned_by(c: &Cluster, index: usize) -> ObjectName {
        (0u32..)
            .map(|i| ObjectName::from(format!("o{i}").as_bytes()))
            .find(|n| c.owner_index_of(n) == Some(index))
            .unwrap()
    }

    #[test]
    fn a_names_owner_from_its_kept_hash_is_the_owner_from_its_bytes() {
        let mut c = home_of_epoch_ten();
        for leaders in [2, 3, 1] {
            c.epoch.leaders = (0..leaders)
                .map(|i| Id::from(format!("n{i}").as_str()))
                .collect();
            for i in 0..2000u32 {
                let lock = format!("db/table/row{i}").into_bytes();
                let var = crate::vocab::var_object(format!("ns{}", i % 7).as_bytes(), &lock);
                for bytes in [lock, var] {
                    let name = ObjectName::from(&bytes[..]);
                    assert_eq!(c.owner_index_of(&name), c.owner_index(&bytes), "{bytes:?}");
                }
            }
        }
        c.epoch.leaders.clear();
        assert_eq!(c.owner_index_of(&ObjectName::from(&b"x"[..])), None);
    }

    fn answers(c: &mut Cluster, leader: &str, active: u64, view: u64) {
        let k = super::super::Contact {
            sent: at(active),
            epoch: c.epoch.number,
            active_sent: Some(at(active)),
            view,
            delay_until: None,
        };
        c.peers.contact.insert(Id::from(leader), k);
    }

    #[test]
    fn an_owner_that_acted_in_this_view_vouches_with_its_later_answers_too() {
        let mut c = home_of_epoch_ten();
        c.home.last_ok = Some(at(110));
        let view = c.epoch.view;
        let name = owned_by(&c, 0); // n1's
        let k = |sent: u64, active_sent: Option<u64>, view: u64| super::super::Contact {
            sent: at(sent),
            epoch: 10,
            active_sent: active_sent.map(at),
            view,
            delay_until: None,
        };
        // Answered as acting at 101 s, then as not acting at 104 s (its
        // quorum's answers had aged while it was paused).
        c.peers
            .contact
            .insert(Id::from("n1"), k(104, Some(101), view));
        assert_eq!(c.object_vouched_from(&name, at(105)), Some(at(104)));
        // Never as acting in this view: no vouch at all.
        c.peers.contact.insert(Id::from("n1"), k(104, None, view));
        assert_eq!(c.object_vouched_from(&name, at(105)), None);
        // Another view's answers are no answers.
        c.peers
            .contact
            .insert(Id::from("n1"), k(104, Some(101), view ^ 1));
        assert_eq!(c.object_vouched_from(&name, at(105)), None);
        // Never later than the majority contact.
        c.peers
            .contact
            .insert(Id::from("n1"), k(112, Some(101), view));
        assert_eq!(c.object_vouched_from(&name, at(113)), Some(at(110)));
    }

    #[test]
    fn a_lock_is_vouched_for_no_longer_than_its_owner_and_a_majority_answered() {
        let mut c = home_of_epoch_ten();
        let view = c.epoch.view;
        let name = owned_by(&c, 0); // n1's
        assert_eq!(
            c.object_vouched_from(&name, at(102)),
            None,
            "n1 never answered"
        );
        answers(&mut c, "n1", 101, view);
        assert_eq!(
            c.object_vouched_from(&name, at(102)),
            Some(at(100)),
            "the majority's"
        );
        answers(&mut c, "n1", 99, view);
        assert_eq!(
            c.object_vouched_from(&name, at(102)),
            Some(at(99)),
            "its owner's"
        );
        // An answer in another view (a reused epoch number) is no answer.
        answers(&mut c, "n1", 101, view ^ 1);
        assert_eq!(c.object_vouched_from(&name, at(102)), None);
        // A lock carried from the previous epoch keeps its time there.
        let lock = CarriedLock {
            at: at(97),
            answered: at(97),
            owner: None,
            via: Vec::new(),
        };
        c.home.carried = Carried::new([(name.clone(), lock)].into());
        assert_eq!(c.object_vouched_from(&name, at(102)), Some(at(97)));
        c.home.last_ok = None;
        assert_eq!(
            c.object_vouched_from(&name, at(102)),
            None,
            "no majority ever"
        );
    }

    #[test]
    fn a_leader_vouches_for_its_own_home_while_it_acts() {
        let mut c = home_of_epoch_ten();
        c.epoch.leaders = vec![Id::from("n1"), c.me.clone()];
        c.epoch.view = super::super::view_of(&c.epoch.leaders);
        let name = owned_by(&c, 1); // its own
        assert_eq!(c.object_vouched_from(&name, at(102)), Some(at(100)));
        let me = c.me.clone();
        assert_eq!(c.answered_by(&me, at(102)), None, "not a ready leader");
        let mut table = super::super::ltable::LeaderTable::new();
        table.ready = true;
        c.leader.table = Some(table);
        assert_eq!(
            c.answered_by(&me, at(102)),
            None,
            "ready, but no quorum answers"
        );
        let view = c.epoch.view;
        answers(&mut c, "n1", 101, view);
        // Acting, but its table does not count its own report (late, and
        // holding a lock on its own object the state does not have): it
        // vouches for nothing, as it answers another such home
        // `active=0` (S1, seed 7453).
        assert_eq!(
            c.answered_by(&me, at(102)),
            None,
            "acting, its own report not counted"
        );
        let l = c.leader.table.as_mut().unwrap();
        l.reporters.insert(me.clone());
        assert_eq!(c.answered_by(&me, at(102)), Some(at(102)), "acting: now");
    }
}
