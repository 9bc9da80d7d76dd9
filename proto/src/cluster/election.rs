//! Elections and epochs (docs/cluster.md, "Elections"): who conducts, who
//! leads, and adopting a newer epoch.
//!
//! This file holds the part and its own logic; what the core does with it
//! on each message and tick is in `core/cluster/election.rs`.

use std::collections::BTreeSet;

use super::Id;
use super::ids;
use crate::time::Time;

/// The current epoch, its leaders, and what the elections need to know.
#[derive(Debug)]
pub(crate) struct Epoch {
    /// The current epoch's number (0: none yet).
    pub number: u64,
    /// Its leaders' ids, in order (the first collects the handover).
    pub leaders: Vec<Id>,
    /// Digest of `leaders` ([`super::view_of`]).
    pub view: u64,
    /// When this agent moved to it.
    pub since: Time,
    /// The largest epoch seen anywhere (to draw a larger one).
    pub max_seen: u64,
    /// The epoch before the current one and its leaders, for the report.
    pub prev_number: u64,
    pub prev_leaders: Vec<Id>,
    /// When this agent last conducted an election.
    pub last_election: Option<Time>,
    /// When this agent last found it had not run for more than a
    /// `ping_interval` (paused, or busy): it does not conduct for a
    /// `peer_timeout` after, as its links may be coming back.
    pub woke: Option<Time>,
    /// The current leaders this agent had a link to since it moved to the
    /// current epoch: one of them not connected now is gone; another one
    /// counts as gone only a `peer_timeout` after the move (its link may
    /// not be up yet, e.g. after this agent was paused).
    pub linked_leaders: BTreeSet<Id>,
    /// When this agent last logged what the first election waits for.
    pub waiting_logged: Option<Time>,
}

impl Epoch {
    /// No epoch yet; `max_seen` from the record.
    pub fn new(now: Time, max_seen: u64) -> Epoch {
        Epoch {
            number: 0,
            leaders: Vec::new(),
            view: 0,
            since: now,
            max_seen,
            prev_number: 0,
            prev_leaders: Vec::new(),
            last_election: None,
            woke: None,
            linked_leaders: BTreeSet::new(),
            waiting_logged: None,
        }
    }

    /// Any epoch a peer names, current or not, bounds the next one from
    /// below: a conductor draws past every epoch fences came from.
    pub fn note_seen(&mut self, epoch: u64) {
        self.max_seen = self.max_seen.max(epoch);
    }

    /// Whether `epoch` may be adopted: newer than this one, and none older
    /// than `min_epoch`, the one this agent had adopted before it
    /// restarted (its record): an epoch drawn without knowing that one may
    /// start its fences below those it saw. The conductor elects past it
    /// (`maybe_elect`, `max_seen`).
    pub fn may_adopt(&self, epoch: u64, min_epoch: u64) -> bool {
        epoch > self.number && epoch >= min_epoch
    }
}

/// The leaders a conductor elects among the candidates `up` (itself and the
/// members it counts): at most three, the current leaders first, then by
/// priority and the random part of the id; a member with
/// `candidate_priority=off` never leads.
pub(crate) fn pick_leaders(up: impl Iterator<Item = Id>, current: &[Id]) -> Vec<Id> {
    let mut candidates: Vec<(String, Id)> = up
        .filter(|id| ids::parse_id(id).is_some_and(|p| p.priority != ids::OFF))
        .map(|id| (ids::candidate_key(&id, current.contains(&id)), id))
        .collect();
    candidates.sort();
    candidates.into_iter().take(3).map(|(_, id)| id).collect()
}

/// The epoch a conductor in position `slot` of `n` members draws: above
/// every epoch it knows of (`known`), at least its wall clock in ms (so
/// epochs, and the fences based on them, keep growing across a restart of
/// every member), and of its own residue modulo `n`: two conductors on both
/// sides of a broken link may elect in the same millisecond, and one
/// number must never name two leader sets.
pub(crate) fn draw_epoch(known: u64, wall_ms: u64, slot: u64, n: u64) -> u64 {
    let least = (known + 1).max(wall_ms);
    least + (slot + n - least % n) % n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(priority: u8, random: u32, name: &str) -> Id {
        ids::make_id(Some(priority), random, None, 1, name).into()
    }

    #[test]
    fn an_epoch_is_past_all_known_on_the_clock_and_in_its_own_residue() {
        for n in 1..=5u64 {
            for slot in 0..n {
                for (known, wall) in [(0, 0), (9, 3), (3, 1_000), (u64::MAX >> 21, 7)] {
                    let e = draw_epoch(known, wall, slot, n);
                    assert!(e > known && e >= wall, "{known} {wall}: {e}");
                    assert_eq!(e % n, slot, "n={n}");
                    assert!(e < (known + 1).max(wall) + n, "the least such epoch");
                }
            }
        }
        // Two conductors at the same instant draw different epochs.
        assert_ne!(draw_epoch(41, 100, 0, 3), draw_epoch(41, 100, 1, 3));
    }

    #[test]
    fn current_leaders_stay_then_priority_then_chance_and_off_never_leads() {
        let a = id(5, 9, "a");
        let b = id(1, 7, "b");
        let c = id(1, 3, "c");
        let d = id(10, 1, "d");
        let off: Id = ids::make_id(None, 0, None, 1, "off").into();
        let up = || [a.clone(), b.clone(), c.clone(), d.clone(), off.clone()].into_iter();
        // Nobody leads yet: by priority (smaller first), then the random
        // part.
        assert_eq!(
            pick_leaders(up(), &[]),
            vec![c.clone(), b.clone(), a.clone()]
        );
        // A current leader keeps its place ahead of better priorities.
        assert_eq!(
            pick_leaders(up(), std::slice::from_ref(&d)),
            vec![d.clone(), c.clone(), b.clone()]
        );
        assert!(pick_leaders([off.clone()].into_iter(), &[]).is_empty());
        assert_eq!(pick_leaders([off, a.clone()].into_iter(), &[]), vec![a]);
    }

    #[test]
    fn an_epoch_is_adopted_only_when_newer_and_not_below_the_record() {
        let mut e = Epoch::new(Time::ZERO, 5);
        e.number = 10;
        assert!(!e.may_adopt(10, 0), "not newer");
        assert!(e.may_adopt(11, 0));
        assert!(!e.may_adopt(11, 12), "below the epoch on record");
        assert!(e.may_adopt(12, 12));
        e.note_seen(3);
        assert_eq!(e.max_seen, 5, "only ever grows");
        e.note_seen(40);
        assert_eq!(e.max_seen, 40);
    }
}
