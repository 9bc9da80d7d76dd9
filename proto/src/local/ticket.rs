//! Tickets and the one rule that decides who may hold an object.
//!
//! Every request for an object is a ticket. Tickets of one object are kept
//! in bakery order (ticket number, then key). Whether a waiting ticket may be
//! granted now depends only on that ordered list, the tickets' kinds and the
//! time: [`who_may_hold`] is that function, pure, shared by the one-computer
//! table and (later) the leaders' agreement.

use crate::time::Time;
use crate::vocab::{Kind, Mode, Policy};

/// What [`who_may_hold`] needs to know of one ticket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    /// The request's kind.
    pub kind: Kind,
    /// Whether it holds the object now (granted and not yet released).
    pub held: bool,
}

/// The outcome of [`who_may_hold`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Positions (in bakery order) of waiting tickets to grant now.
    pub grant: Vec<usize>,
    /// When the answer may change with time alone (a timed-policy request
    /// waiting for its quiet period to end).
    pub recheck_at: Option<Time>,
}

/// Which waiting tickets may be granted now.
///
/// `tickets` is in bakery order; `last_shared_grant` is when a shared ticket
/// of this object was last granted. The rules (snaplock(7), LOCK KINDS):
///
/// - an exclusive ticket is granted when nothing is held and no exclusive
///   ticket ahead of it waits (exclusive tickets never pass each other);
/// - a shared ticket is granted when no exclusive ticket is held, every
///   ticket ahead of it is held or is a soft/timed exclusive it may pass,
///   and one more holder keeps every holder within its own limit;
/// - a soft or timed exclusive waits while any shared ticket is held; a
///   timed one also until `quiet` has passed since the last shared grant;
///   a hard one blocks every ticket behind it.
///
/// INVARIANT: granting what this returns never gives an object two
/// exclusive holders, an exclusive and a shared holder, or more shared
/// holders than any of them allows (checked by `debug_assert!` in the table
/// and by the tests below).
pub fn who_may_hold(tickets: &[View], last_shared_grant: Option<Time>, now: Time) -> Decision {
    let mut decision = Decision::default();
    let mut exclusive_held = false;
    let mut shared_held: u64 = 0;
    let mut shared_room = u64::MAX; // smallest limit among shared holders
    for t in tickets.iter().filter(|t| t.held) {
        match t.kind.mode {
            Mode::Exclusive => exclusive_held = true,
            Mode::Shared => {
                shared_held += 1;
                shared_room = shared_room.min(t.kind.limit_or_max());
            }
        }
    }
    // Set once a ticket ahead stays waiting and later tickets may not pass it.
    let mut blocked = false;
    // Set once an exclusive ticket ahead stays waiting: later exclusive
    // tickets never pass an earlier one.
    let mut exclusive_waiting = false;
    for (i, t) in tickets.iter().enumerate() {
        if t.held {
            continue;
        }
        if blocked {
            break;
        }
        match t.kind.mode {
            Mode::Exclusive => {
                let quiet_until = match t.kind.policy {
                    Policy::Timed { quiet } => last_shared_grant.map(|g| g + quiet),
                    _ => None,
                };
                let quiet_ok = quiet_until.is_none_or(|q| q <= now);
                if !exclusive_waiting && !exclusive_held && shared_held == 0 && quiet_ok {
                    decision.grant.push(i);
                    exclusive_held = true;
                    blocked = true;
                    continue;
                }
                if !exclusive_waiting && !exclusive_held && shared_held == 0 {
                    decision.recheck_at = quiet_until;
                }
                exclusive_waiting = true;
                if t.kind.policy == Policy::Hard {
                    blocked = true;
                }
            }
            Mode::Shared => {
                let room = shared_room.min(t.kind.limit_or_max());
                if !exclusive_held && shared_held < room {
                    decision.grant.push(i);
                    shared_held += 1;
                    shared_room = room;
                } else {
                    blocked = true;
                }
            }
        }
    }
    decision
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn excl(held: bool) -> View {
        View {
            kind: Kind::EXCLUSIVE,
            held,
        }
    }
    fn excl_policy(policy: Policy) -> View {
        View {
            kind: Kind {
                policy,
                ..Kind::EXCLUSIVE
            },
            held: false,
        }
    }
    fn shared(limit: Option<u32>, held: bool) -> View {
        View {
            kind: Kind {
                mode: Mode::Shared,
                limit,
                policy: Policy::Hard,
            },
            held,
        }
    }
    fn grants(tickets: &[View]) -> Vec<usize> {
        who_may_hold(tickets, None, Time::ZERO).grant
    }

    #[test]
    fn the_first_exclusive_ticket_is_granted_when_nothing_is_held() {
        assert_eq!(grants(&[excl(false), excl(false)]), vec![0]);
    }

    #[test]
    fn nothing_is_granted_while_an_exclusive_ticket_is_held() {
        assert_eq!(
            grants(&[excl(true), excl(false), shared(None, false)]),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn consecutive_shared_tickets_are_granted_together() {
        assert_eq!(
            grants(&[shared(None, false), shared(None, false), excl(false)]),
            vec![0, 1]
        );
    }

    #[test]
    fn a_hard_exclusive_ticket_keeps_later_shared_tickets_waiting() {
        assert_eq!(
            grants(&[shared(None, true), excl(false), shared(None, false)]),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn a_soft_exclusive_ticket_lets_later_shared_tickets_pass() {
        let t = [
            shared(None, true),
            excl_policy(Policy::Soft),
            shared(None, false),
        ];
        assert_eq!(grants(&t), vec![2]);
    }

    #[test]
    fn a_soft_exclusive_ticket_is_granted_once_no_shared_lock_is_held() {
        let t = [excl_policy(Policy::Soft), shared(None, false)];
        assert_eq!(grants(&t), vec![0]);
    }

    #[test]
    fn a_later_exclusive_ticket_never_passes_an_earlier_one() {
        let t = [
            shared(None, true),
            excl_policy(Policy::Soft),
            excl(false),
            shared(None, false),
        ];
        assert_eq!(grants(&t), Vec::<usize>::new());
    }

    #[test]
    fn a_counted_lock_grants_no_more_than_its_limit() {
        let t = [
            shared(Some(2), true),
            shared(Some(2), false),
            shared(Some(2), false),
        ];
        assert_eq!(grants(&t), vec![1]);
    }

    #[test]
    fn each_request_is_held_to_its_own_limit_and_to_every_holders() {
        // Holders made with capacity 6; a request made with capacity 3 waits
        // while 3 are held, and so does everything behind it.
        let t = [
            shared(Some(6), true),
            shared(Some(6), true),
            shared(Some(6), true),
            shared(Some(3), false),
            shared(Some(6), false),
        ];
        assert_eq!(grants(&t), Vec::<usize>::new());
        // A holder made with capacity 2 caps everybody while it holds.
        let t = [
            shared(Some(2), true),
            shared(Some(6), true),
            shared(Some(6), false),
        ];
        assert_eq!(grants(&t), Vec::<usize>::new());
        let t = [
            shared(Some(6), true),
            shared(Some(6), false),
            shared(Some(2), false),
        ];
        assert_eq!(grants(&t), vec![1]);
    }

    #[test]
    fn a_timed_exclusive_ticket_waits_for_the_quiet_period() {
        let quiet = Duration::from_secs(2);
        let t = [excl_policy(Policy::Timed { quiet })];
        let granted_at = Time::from_micros(10_000_000);
        let d = who_may_hold(&t, Some(granted_at), granted_at + Duration::from_secs(1));
        assert_eq!(d.grant, Vec::<usize>::new());
        assert_eq!(d.recheck_at, Some(granted_at + quiet));
        let d = who_may_hold(&t, Some(granted_at), granted_at + quiet);
        assert_eq!(d.grant, vec![0]);
    }

    /// Every combination of up to five tickets: the grants never break
    /// exclusion or any holder's limit.
    #[test]
    fn no_ordered_list_leads_to_a_conflicting_grant() {
        let choices = [
            excl(false),
            excl(true),
            excl_policy(Policy::Soft),
            shared(None, false),
            shared(None, true),
            shared(Some(1), false),
            shared(Some(2), false),
            shared(Some(2), true),
        ];
        let mut list = Vec::new();
        fn walk(list: &mut Vec<View>, choices: &[View], depth: usize) {
            check(list);
            if depth == 0 {
                return;
            }
            for c in choices {
                list.push(*c);
                walk(list, choices, depth - 1);
                list.pop();
            }
        }
        fn check(list: &[View]) {
            let held_before: Vec<View> = list.iter().copied().filter(|t| t.held).collect();
            let excl_before = held_before
                .iter()
                .filter(|t| t.kind.mode == Mode::Exclusive)
                .count();
            let shared_before = held_before.len() - excl_before;
            let before_ok = excl_before == 0 || (excl_before == 1 && shared_before == 0);
            let d = who_may_hold(list, None, Time::ZERO);
            let mut after = list.to_vec();
            for &i in &d.grant {
                assert!(!after[i].held, "{list:?}: granted a held ticket");
                after[i].held = true;
            }
            let holders: Vec<View> = after.iter().copied().filter(|t| t.held).collect();
            let n_excl = holders
                .iter()
                .filter(|t| t.kind.mode == Mode::Exclusive)
                .count();
            let n_shared = holders.len() - n_excl;
            if !before_ok
                || held_before
                    .iter()
                    .any(|t| t.kind.limit.is_some_and(|l| (l as usize) < shared_before))
            {
                // An impossible starting state: only require no new grant of
                // an exclusive ticket beside holders.
                return;
            }
            assert!(
                n_excl == 0 || (n_excl == 1 && n_shared == 0),
                "{list:?} -> {:?}",
                d.grant
            );
            for h in &holders {
                if let Some(l) = h.kind.limit {
                    if d.grant.is_empty() {
                        continue;
                    }
                    assert!(n_shared <= l as usize, "{list:?} -> {:?}", d.grant);
                }
            }
        }
        walk(&mut list, &choices, 5);
    }
}
