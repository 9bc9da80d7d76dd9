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
/// `tickets` is in bakery order; `last_shared_grant` is when a shared or
/// counted ticket of this object was last granted. The rules (snaplock(7),
/// LOCK KINDS), where *holders* counts every shared and counted holder:
///
/// - an exclusive ticket is granted when nothing is held and no exclusive
///   ticket ahead of it waits (exclusive tickets never pass each other);
/// - a shared ticket is granted when no exclusive ticket is held, every
///   ticket ahead of it is held, is a soft/timed exclusive it may pass or
///   is a counted ticket, and holders + 1 is within its own limit and
///   every shared holder's;
/// - a counted ticket is granted under the same conditions: holders + 1
///   within its own limit (its own view) and every shared holder's. Its
///   limit binds only this grant: later requests are not held to it, and
///   a counted ticket that waits keeps no place (canal has no queue), so
///   it never blocks the tickets behind it;
/// - a soft or timed exclusive waits while any shared or counted ticket is
///   held; a timed one also until `quiet` has passed since the last shared
///   or counted grant; a hard one blocks every ticket behind it.
///
/// INVARIANT: granting what this returns never gives an object two
/// exclusive holders or an exclusive holder beside another; never more
/// holders than any shared holder's limit; and never more holders than the
/// limit of the ticket just granted (so, at any time, never more holders
/// than the largest limit among them: the latest granted saw room in its
/// own view, and holders only left since). Checked by `debug_assert!` in
/// the table and by the tests below.
pub fn who_may_hold(tickets: &[View], last_shared_grant: Option<Time>, now: Time) -> Decision {
    let mut decision = Decision::default();
    decision.recheck_at = who_may_hold_into(tickets, last_shared_grant, now, &mut decision.grant);
    decision
}

/// [`who_may_hold`], the positions to grant appended to `grant` (a buffer
/// used again: the owner of an object decides at each change of its
/// queue); returns the decision's `recheck_at`.
pub fn who_may_hold_into(
    tickets: &[View],
    last_shared_grant: Option<Time>,
    now: Time,
    grant: &mut Vec<usize>,
) -> Option<Time> {
    let mut recheck_at = None;
    let mut exclusive_held = false;
    // Shared and counted holders.
    let mut holders: u64 = 0;
    // The smallest limit among shared holders: their promise. A counted
    // holder's limit is not one.
    let mut shared_room = u64::MAX;
    for t in tickets.iter().filter(|t| t.held) {
        match t.kind.mode {
            Mode::Exclusive => exclusive_held = true,
            Mode::Shared => {
                holders += 1;
                shared_room = shared_room.min(t.kind.limit_or_max());
            }
            Mode::Counted => holders += 1,
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
                if !exclusive_waiting && !exclusive_held && holders == 0 && quiet_ok {
                    grant.push(i);
                    exclusive_held = true;
                    blocked = true;
                    continue;
                }
                if !exclusive_waiting && !exclusive_held && holders == 0 {
                    recheck_at = quiet_until;
                }
                exclusive_waiting = true;
                if t.kind.policy == Policy::Hard {
                    blocked = true;
                }
            }
            Mode::Shared => {
                let room = shared_room.min(t.kind.limit_or_max());
                if !exclusive_held && holders < room {
                    grant.push(i);
                    holders += 1;
                    shared_room = room;
                } else {
                    blocked = true;
                }
            }
            Mode::Counted => {
                let room = shared_room.min(t.kind.limit_or_max());
                if !exclusive_held && holders < room {
                    grant.push(i);
                    holders += 1;
                }
            }
        }
    }
    recheck_at
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

    fn counted(limit: u32, held: bool) -> View {
        View {
            kind: Kind {
                mode: Mode::Counted,
                limit: Some(limit),
                policy: Policy::Hard,
            },
            held,
        }
    }

    /// canal's resize: three holders made with capacity 3; a request made
    /// with capacity 6 sees room, one made with 3 does not.
    #[test]
    fn a_counted_ticket_is_granted_by_its_own_view() {
        let three = [counted(3, true), counted(3, true), counted(3, true)];
        let mut t = three.to_vec();
        t.push(counted(3, false));
        assert_eq!(grants(&t), Vec::<usize>::new(), "full at 3");
        t.push(counted(6, false));
        assert_eq!(grants(&t), vec![4], "room at 6, past the one full at 3");
        let mut t = three.to_vec();
        t.extend([counted(6, false), counted(6, false), counted(6, false)]);
        t.extend([counted(6, false), counted(3, false)]);
        assert_eq!(grants(&t), vec![3, 4, 5], "up to 6 holders, no more");
    }

    #[test]
    fn a_counted_holders_limit_binds_no_later_request() {
        let t = [counted(1, true), counted(2, false), shared(Some(3), false)];
        assert_eq!(grants(&t), vec![1, 2]);
        let t = [counted(1, true), shared(None, false), excl(false)];
        assert_eq!(grants(&t), vec![1]);
    }

    #[test]
    fn a_shared_holders_limit_binds_counted_requests_and_counted_holders_count() {
        let t = [shared(Some(2), true), counted(5, true), counted(5, false)];
        assert_eq!(grants(&t), Vec::<usize>::new(), "the shared holder's 2");
        let t = [counted(5, true), counted(5, true), shared(Some(2), false)];
        assert_eq!(grants(&t), Vec::<usize>::new(), "2 counted holders count");
        let t = [
            counted(5, true),
            shared(Some(3), false),
            counted(5, false),
            counted(5, false),
        ];
        assert_eq!(grants(&t), vec![1, 2], "3 holders fill the shared one's 3");
    }

    #[test]
    fn a_waiting_counted_ticket_keeps_no_place() {
        let t = [
            counted(1, true),
            counted(1, false),
            counted(2, false),
            shared(Some(3), false),
        ];
        assert_eq!(grants(&t), vec![2, 3]);
        // A waiting shared ticket keeps its place, counted ones included.
        let t = [
            shared(Some(1), true),
            shared(Some(2), false),
            counted(9, false),
        ];
        assert_eq!(grants(&t), Vec::<usize>::new());
    }

    #[test]
    fn counted_tickets_and_exclusive_ones_exclude_each_other() {
        assert_eq!(
            grants(&[excl(true), counted(5, false)]),
            Vec::<usize>::new()
        );
        assert_eq!(
            grants(&[counted(5, true), excl(false)]),
            Vec::<usize>::new()
        );
        assert_eq!(grants(&[counted(5, false), excl(false)]), vec![0]);
        // A hard exclusive waiting keeps counted tickets behind it waiting,
        // a soft one lets them pass.
        let t = [counted(5, true), excl(false), counted(5, false)];
        assert_eq!(grants(&t), Vec::<usize>::new());
        let t = [
            counted(5, true),
            excl_policy(Policy::Soft),
            counted(5, false),
        ];
        assert_eq!(grants(&t), vec![2]);
    }

    #[test]
    fn a_timed_exclusive_ticket_waits_while_a_counted_ticket_is_held() {
        let quiet = Duration::from_secs(2);
        let granted_at = Time::from_micros(10_000_000);
        let t = [counted(3, true), excl_policy(Policy::Timed { quiet })];
        let d = who_may_hold(&t, Some(granted_at), granted_at + quiet);
        assert_eq!(d.grant, Vec::<usize>::new());
        let t = [counted(3, true), excl_policy(Policy::Soft)];
        assert_eq!(grants(&t), Vec::<usize>::new());
    }

    /// Every combination of up to five tickets: the grants never break
    /// exclusion, any shared holder's limit, or the limit of a counted
    /// ticket at its grant.
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
            counted(1, false),
            counted(2, false),
            counted(3, false),
            counted(2, true),
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
        fn shared_limits(v: &[View]) -> usize {
            v.iter()
                .filter(|t| t.held && t.kind.mode == Mode::Shared)
                .filter_map(|t| t.kind.limit)
                .map(|l| l as usize)
                .min()
                .unwrap_or(usize::MAX)
        }
        fn check(list: &[View]) {
            let held_before = list.iter().filter(|t| t.held).count();
            let excl_before = list
                .iter()
                .filter(|t| t.held && t.kind.mode == Mode::Exclusive)
                .count();
            let before_ok = (excl_before == 0 && held_before <= shared_limits(list))
                || (excl_before == 1 && held_before == 1);
            let d = who_may_hold(list, None, Time::ZERO);
            let mut after = list.to_vec();
            for (k, &i) in d.grant.iter().enumerate() {
                assert!(!after[i].held, "{list:?}: granted a held ticket");
                after[i].held = true;
                // Each grant, in order, within its own limit.
                let count = held_before + k + 1;
                if before_ok && after[i].kind.mode == Mode::Counted {
                    let l = after[i].kind.limit.expect("counted has a limit") as usize;
                    assert!(count <= l, "{list:?} -> {:?}", d.grant);
                }
            }
            if !before_ok {
                // An impossible starting state.
                return;
            }
            let holders = after.iter().filter(|t| t.held).count();
            let n_excl = after
                .iter()
                .filter(|t| t.held && t.kind.mode == Mode::Exclusive)
                .count();
            assert!(
                n_excl == 0 || (n_excl == 1 && holders == 1),
                "{list:?} -> {:?}",
                d.grant
            );
            assert!(
                n_excl == 1 || holders <= shared_limits(&after),
                "{list:?} -> {:?}",
                d.grant
            );
        }
        walk(&mut list, &choices, 5);
    }
}
