//! The collector's merge of the reports into a new epoch's state
//! (docs/cluster.md "Handover"): which tickets the state holds, with which
//! fences, in which order.

use std::collections::BTreeMap;
use std::collections::hash_map::Entry;
use std::hash::BuildHasherDefault;

use super::Id;
use super::batch::ReportedTicket;
use super::handover::Report;
use super::ids::FixedMap;

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
/// homes numbered once, no copy of a ticket until the state is written,
/// and one sort at the end.
pub(crate) fn merge_held(reports: &BTreeMap<Id, Report>) -> (Vec<(&ReportedTicket, u64)>, u64) {
    /// One key of the state: whether something holds it yet (a home's
    /// waiting request does not, a table's ticket for it does), and the
    /// largest fence of those that hold it.
    struct Slot<'a> {
        t: &'a ReportedTicket,
        fence: u64,
        held: bool,
    }
    let mut homes = Homes::new(reports);
    let size: usize = reports
        .values()
        .map(|r| r.home.len() + r.leader.len())
        .sum();
    let mut index: FixedMap<(&[u8], u32, u64), usize> =
        FixedMap::with_capacity_and_hasher(size.min(1 << 24), BuildHasherDefault::default());
    let mut slots: Vec<Slot<'_>> = Vec::new();
    let mut floor = 0;
    for r in reports.values() {
        floor = floor.max(r.floor);
        for (t, h) in &r.home {
            let key = (&t.object[..], homes.number(&t.home).0, t.req);
            let fence = if *h { t.fence } else { 0 };
            match index.entry(key) {
                Entry::Occupied(e) => {
                    let s = &mut slots[*e.get()];
                    s.held |= *h;
                    s.fence = s.fence.max(fence);
                }
                Entry::Vacant(e) => {
                    e.insert(slots.len());
                    slots.push(Slot { t, fence, held: *h });
                }
            }
        }
    }
    let latest_ready = (reports.values().map(|r| r.ready_epoch).max()).unwrap_or(0);
    for r in (reports.values()).filter(|r| r.ready_epoch == latest_ready) {
        for t in &r.leader {
            let (home, reported) = homes.number(&t.home);
            match index.entry((&t.object[..], home, t.req)) {
                Entry::Occupied(e) => {
                    let s = &mut slots[*e.get()];
                    s.held = true;
                    s.fence = s.fence.max(t.fence);
                }
                Entry::Vacant(_) if reported => {} // its home let it go
                Entry::Vacant(e) => {
                    e.insert(slots.len());
                    slots.push(Slot {
                        t,
                        fence: t.fence,
                        held: true,
                    });
                }
            }
        }
    }
    drop(index);
    let mut held: Vec<(&ReportedTicket, u64)> = slots
        .into_iter()
        .filter(|s| s.held)
        .map(|s| (s.t, s.fence))
        .collect();
    held.sort_unstable_by(|(a, _), (b, _)| {
        (&a.object, &*a.home, a.req).cmp(&(&b.object, &*b.home, b.req))
    });
    (held, floor)
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

    /// What the state holds: (object, home, req, fence), sorted by the
    /// names' bytes; the state itself comes in the tables' order.
    fn merged(reports: &BTreeMap<Id, Report>) -> Vec<(String, String, u64, u64)> {
        let (held, _) = merge_held(reports);
        let key = |t: &ReportedTicket| (t.object.clone(), t.home.clone(), t.req);
        assert!(
            held.windows(2).all(|w| key(w[0].0) < key(w[1].0)),
            "in the tables' order, each key once"
        );
        let mut out: Vec<_> = held
            .iter()
            .map(|(t, f)| {
                let o = String::from_utf8(t.object.to_vec()).unwrap();
                (o, t.home.to_string(), t.req, *f)
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
