//! The collector's merge of the reports into a new epoch's state
//! (docs/cluster.md "Handover"): which tickets the state holds, with which
//! fences, in which order.

use std::collections::BTreeMap;

use hashbrown::HashTable;

use super::Id;
use super::batch::ReportedTicket;
use super::handover::Report;

/// Every ticket held in the new epoch, once each with the largest fence
/// any report gives it, in key order (object, home, req: the tables'
/// order, so that installing them sorts nothing), and the largest
/// floor reported. From the tables of the leaders ready in the latest
/// epoch any reporter was ready in (older tables were superseded by that
/// epoch's state) and the homes' held requests; the home is the authority
/// on its own clients, so a table's ticket of a home that reported is kept
/// only if that home still has it (held or waiting).
///
/// That epoch is E_max (the latest any reporter comes from) when one of
/// E_max's leaders that was ready in it reported. When none did, E_max may
/// never have been ready anywhere, e.g. one elected by a conductor cut off
/// from the others: its state, if any, is not known, and the state is
/// incomplete (a lock-delay) unless every member reported (and every home
/// spoke for its own tickets). The latest tables known then still vouch for
/// the locks of homes that did not report yet; without them, a healthy
/// home's late report held what the epoch did not know, and the home had
/// to revoke (one-computer seed 1470). A ticket they hold that a later
/// epoch released blocks its object only until its home's report is
/// counted, or its home is silent for the release delay.
///
/// A million held locks come in two or three reports each: borrowed keys,
/// homes numbered once, an index of a word a ticket, no copy of a ticket
/// until the state is written, and one sort at the end.
pub(crate) fn merge_held(reports: &BTreeMap<Id, Report>) -> (Vec<Held<'_>>, u64) {
    /// One key of the state: its home's number, whether something holds
    /// it yet (a home's waiting request does not, a table's ticket for it
    /// does), and the largest fence of those that hold it.
    struct Slot<'a> {
        t: &'a ReportedTicket,
        place: Place,
        home: u32,
        fence: u64,
        held: bool,
    }
    /// The key (object, home, request) of a ticket, hashed from the hash
    /// its name keeps.
    fn key_hash(t: &ReportedTicket, home: u32) -> u64 {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let h = (t.object.hash64() ^ u64::from(home)).wrapping_mul(K);
        let h = (h ^ t.req).wrapping_mul(K);
        h ^ (h >> 29)
    }
    let mut homes = Homes::new(reports);
    let size: usize = reports
        .values()
        .map(|r| r.home.len() + r.leader.len())
        .sum();
    // The slots' places by key: a word a ticket, not a copy of its key (a
    // map of keys was some 150 MB for three million tickets, every page
    // of it new memory to the kernel).
    let mut index: HashTable<usize> = HashTable::with_capacity(size.min(1 << 24));
    let mut slots: Vec<Slot<'_>> = Vec::with_capacity(size.min(1 << 24));
    // The place of the slot of `t` (of home number `home`), if any.
    fn find(
        index: &HashTable<usize>,
        slots: &[Slot<'_>],
        t: &ReportedTicket,
        home: u32,
    ) -> Option<usize> {
        let same = |&i: &usize| {
            let s = &slots[i];
            s.home == home && s.t.req == t.req && s.t.object == t.object
        };
        index.find(key_hash(t, home), same).copied()
    }
    // `Ok` with the place of the slot of `t`, or `Err` with the place its
    // new slot must take next, the index having it already.
    fn slot(
        index: &mut HashTable<usize>,
        slots: &[Slot<'_>],
        t: &ReportedTicket,
        home: u32,
    ) -> Result<usize, usize> {
        if let Some(i) = find(index, slots, t, home) {
            return Ok(i);
        }
        let i = slots.len();
        index.insert_unique(key_hash(t, home), i, |&j| {
            key_hash(slots[j].t, slots[j].home)
        });
        Err(i)
    }
    let mut floor = 0;
    for (report, r) in reports.values().enumerate() {
        floor = floor.max(r.floor);
        for (at, (t, h)) in r.home.iter().enumerate() {
            let home = homes.number(&t.home).0;
            let fence = if *h { t.fence } else { 0 };
            match slot(&mut index, &slots, t, home) {
                Ok(i) => {
                    let s = &mut slots[i];
                    s.held |= *h;
                    s.fence = s.fence.max(fence);
                }
                Err(_) => slots.push(Slot {
                    t,
                    place: Place {
                        report,
                        home: true,
                        at,
                    },
                    home,
                    fence,
                    held: *h,
                }),
            }
        }
    }
    let latest_ready = (reports.values().map(|r| r.ready_epoch).max()).unwrap_or(0);
    let ready = (reports.values().enumerate()).filter(|(_, r)| r.ready_epoch == latest_ready);
    for (report, r) in ready {
        for (at, t) in r.leader.iter().enumerate() {
            let (home, reported) = homes.number(&t.home);
            if reported {
                // Its home let it go unless its report has it: no slot.
                if let Some(i) = find(&index, &slots, t, home) {
                    let s = &mut slots[i];
                    s.held = true;
                    s.fence = s.fence.max(t.fence);
                }
                continue;
            }
            match slot(&mut index, &slots, t, home) {
                Ok(i) => {
                    let s = &mut slots[i];
                    s.held = true;
                    s.fence = s.fence.max(t.fence);
                }
                Err(_) => slots.push(Slot {
                    t,
                    place: Place {
                        report,
                        home: false,
                        at,
                    },
                    home,
                    fence: t.fence,
                    held: true,
                }),
            }
        }
    }
    drop(index);
    let mut held: Vec<Held<'_>> = slots
        .into_iter()
        .filter(|s| s.held)
        .map(|s| Held {
            t: s.t,
            fence: s.fence,
            place: s.place,
        })
        .collect();
    held.sort_unstable_by(|a, b| {
        (&a.t.object, &*a.t.home, a.t.req).cmp(&(&b.t.object, &*b.t.home, b.t.req))
    });
    (held, floor)
}

/// A ticket of the new epoch's state: as a report gave it, its fence in
/// the state, and where the report has it.
pub(crate) struct Held<'a> {
    pub t: &'a ReportedTicket,
    pub fence: u64,
    pub place: Place,
}

/// Where a report has a ticket: the report (in the reports' order), its
/// home part or its leader part, the place there.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place {
    report: usize,
    home: bool,
    at: usize,
}

/// The state's tickets, in the order of `held` (their places and fences,
/// as [`merge_held`] gave them), taken out of the reports rather than
/// copied: a million names and keys are not copied again, and most of
/// what the reports hold is not left to free afterwards.
pub(crate) fn take_held(
    reports: BTreeMap<Id, Report>,
    held: &[(Place, u64)],
) -> Vec<ReportedTicket> {
    // Per report and part, each ticket's place in the state, plus one
    // (0: not in it).
    let mut to: Vec<[Vec<usize>; 2]> = (reports.values())
        .map(|r| [vec![0; r.leader.len()], vec![0; r.home.len()]])
        .collect();
    for (k, (p, _)) in held.iter().enumerate() {
        to[p.report][usize::from(p.home)][p.at] = k + 1;
    }
    let mut out: Vec<Option<ReportedTicket>> = Vec::with_capacity(held.len());
    out.resize_with(held.len(), || None);
    let mut put = |k: usize, t: ReportedTicket| {
        if let Some(k) = k.checked_sub(1) {
            out[k] = Some(ReportedTicket {
                fence: held[k].1,
                ..t
            });
        }
    };
    for ((_, r), to) in reports.into_iter().zip(&to) {
        for (t, k) in r.leader.into_iter().zip(&to[0]) {
            put(*k, t);
        }
        for ((t, _), k) in r.home.into_iter().zip(&to[1]) {
            put(*k, t);
        }
    }
    out.into_iter().flatten().collect()
}

/// The homes named in a handover's tickets, numbered: a ticket's key
/// hashes a number instead of a home's id, and the same `Arc` as the
/// ticket before is not looked up again.
struct Homes<'a> {
    known: BTreeMap<&'a str, (u32, bool)>,
    last: Option<(&'a Id, (u32, bool))>,
}

impl<'a> Homes<'a> {
    fn new(reports: &'a BTreeMap<Id, Report>) -> Homes<'a> {
        let known = (reports.keys().zip(0..))
            .map(|(id, n)| (&**id, (n, true)))
            .collect();
        Homes { known, last: None }
    }

    /// The home's number, and whether it reported.
    fn number(&mut self, home: &'a Id) -> (u32, bool) {
        if let Some((id, n)) = self.last {
            if std::sync::Arc::ptr_eq(id, home) {
                return n;
            }
        }
        let next = u32::try_from(self.known.len()).unwrap_or(u32::MAX);
        let n = *self.known.entry(&**home).or_insert((next, false));
        self.last = Some((home, n));
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Kind;

    fn t(object: &str, home: &Id, req: u64, fence: u64) -> ReportedTicket {
        ReportedTicket {
            object: object.as_bytes().into(),
            home: home.clone(),
            req,
            key: format!("k{req}").into(),
            fence,
            kind: Kind::EXCLUSIVE,
        }
    }

    fn copy(reports: &BTreeMap<Id, Report>) -> BTreeMap<Id, Report> {
        (reports.iter())
            .map(|(id, r)| {
                let r = Report {
                    prev_epoch: r.prev_epoch,
                    prev_leaders: r.prev_leaders.clone(),
                    ready_epoch: r.ready_epoch,
                    floor: r.floor,
                    delay_left: r.delay_left,
                    up: r.up,
                    own: r.own,
                    leader: r.leader.clone(),
                    home: r.home.clone(),
                    lines: r.lines,
                };
                (id.clone(), r)
            })
            .collect()
    }

    /// What the state holds: (object, home, req, fence), sorted by the
    /// names' bytes; the state itself comes in the tables' order.
    fn merged(reports: &BTreeMap<Id, Report>) -> Vec<(String, String, u64, u64)> {
        let (held, _) = merge_held(reports);
        let key = |t: &ReportedTicket| (t.object.clone(), t.home.clone(), t.req);
        assert!(
            held.windows(2).all(|w| key(w[0].t) < key(w[1].t)),
            "in the tables' order, each key once"
        );
        // Taken out of (a copy of) the reports, the same tickets in the
        // same order, with the state's fences.
        let places: Vec<_> = held.iter().map(|h| (h.place, h.fence)).collect();
        let taken = take_held(copy(reports), &places);
        let want: Vec<_> = (held.iter())
            .map(|h| (key(h.t), &h.t.key, h.fence))
            .collect();
        let got: Vec<_> = (taken.iter()).map(|t| (key(t), &t.key, t.fence)).collect();
        assert_eq!(got, want);
        let mut out: Vec<_> = held
            .iter()
            .map(|h| (h.t, h.fence))
            .map(|(t, f)| {
                let o = String::from_utf8(t.object.to_vec()).unwrap();
                (o, t.home.to_string(), t.req, f)
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn the_state_keeps_what_a_home_holds_or_waits_for_and_what_unreported_homes_held() {
        let (a, b, gone): (Id, Id, Id) = ("a".into(), "b".into(), "gone".into());
        let mut reports = BTreeMap::new();
        // Leader a (ready in epoch 7) is also a home: it holds x, waits
        // for y, and its table has x, y, the released z, and w of a home
        // that did not report.
        reports.insert(
            a.clone(),
            Report {
                ready_epoch: 7,
                floor: 40,
                leader: vec![
                    t("x", &a, 1, 10),
                    t("y", &a, 2, 20),
                    t("z", &a, 3, 30),
                    t("w", &gone, 9, 35),
                ],
                home: vec![(t("x", &a, 1, 10), true), (t("y", &a, 2, 0), false)],
                ..Report::default()
            },
        );
        // Leader b, ready in epoch 7 too, voted for y with a later fence
        // and for w; b's own client holds v; an older table is ignored.
        reports.insert(
            b.clone(),
            Report {
                ready_epoch: 7,
                floor: 50,
                leader: vec![t("y", &a, 2, 25), t("w", &gone, 9, 36)],
                home: vec![(t("v", &b, 4, 12), true), (t("u", &b, 5, 0), false)],
                ..Report::default()
            },
        );
        reports.insert(
            "c".into(),
            Report {
                ready_epoch: 6,
                leader: vec![t("old", &gone, 1, 5)],
                ..Report::default()
            },
        );
        let s = |o: &str, h: &str, r, f| (o.to_owned(), h.to_owned(), r, f);
        assert_eq!(
            merged(&reports),
            vec![
                s("v", "b", 4, 12),
                s("w", "gone", 9, 36),
                s("x", "a", 1, 10),
                s("y", "a", 2, 25),
            ]
        );
        assert_eq!(merge_held(&reports).1, 50);
    }

    /// One-computer seed 1470: the conductor, cut off, had moved to an
    /// epoch (9) nobody was ready in; the tables of the latest epoch a
    /// reporter was ready in (7) still vouch for the lock of a home that
    /// did not report yet, and the conductor's older table (6) does not.
    #[test]
    fn without_a_ready_leader_of_e_max_the_latest_ready_tables_count() {
        let (n0, n1, n2): (Id, Id, Id) = ("n0".into(), "n1".into(), "n2".into());
        let mut reports = BTreeMap::new();
        reports.insert(
            n0.clone(),
            Report {
                prev_epoch: 9,
                ready_epoch: 6,
                leader: vec![t("old", &n2, 1, 5)],
                ..Report::default()
            },
        );
        reports.insert(
            n1.clone(),
            Report {
                prev_epoch: 7,
                ready_epoch: 7,
                leader: vec![t("hot1", &n2, 106, 28)],
                home: vec![(t("hot0", &n1, 103, 29), true)],
                ..Report::default()
            },
        );
        let s = |o: &str, h: &str, r, f| (o.to_owned(), h.to_owned(), r, f);
        assert_eq!(
            merged(&reports),
            vec![s("hot0", "n1", 103, 29), s("hot1", "n2", 106, 28)]
        );
    }
}
