//! Starting an epoch (docs/cluster.md "Handover"): every agent reports to
//! the new epoch's collector; the collector builds the state the new
//! leaders start from, with a lock-delay when it cannot be complete.
//!
//! This file holds the part and its own logic; what the core does with it
//! on each message and tick is in `core/cluster/handover.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::batch::{Batch, ReportedTicket};
use super::links::Peers;
use super::msg::PeerMsg;
use super::{Cluster, Id};
use crate::time::Time;
use crate::vocab::{ObjectName, PeerId};

/// How much later a report is sent again, per line of it: about what
/// building, sending and reading a line costs, so that an agent with many
/// locks spends at most a fraction of its time reporting.
pub(crate) const REPORT_PAUSE_PER_LINE: Duration = Duration::from_micros(4);

/// What one agent reported.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub prev_epoch: u64,
    pub prev_leaders: Vec<Id>,
    pub ready_epoch: u64,
    pub floor: u64,
    /// What was left of its ready epoch's lock-delay, µs.
    pub delay_left: u64,
    /// How long the reporter had been running when it reported, µs (0
    /// when not given): a younger one may have forgotten an epoch.
    pub up: u64,
    /// The serial of the collector's own report (`own=`).
    pub own: Option<u64>,
    pub leader: Vec<ReportedTicket>,
    /// Its own clients' requests: held or waiting.
    pub home: Vec<(ReportedTicket, bool)>,
    pub lines: u64,
}

/// How long the collector's own copy of the state may wait for the other
/// leaders' copies to be written (`Handover::send_backlog`): half a
/// `peer_timeout`. Installing a million tickets takes the collector most
/// of a second, in which it writes nothing; its copy waiting while theirs
/// go out lets them read, parse and install at the same time. A leader
/// that does not read (paused) costs the collector this much at most.
pub(crate) fn own_state_hold(cfg: &super::config::ClusterConfig) -> Duration {
    cfg.peer_timeout / 2
}

/// A report's tickets: its last leader table's, and its own clients' requests
/// (held or waiting).
pub(crate) type OwnTickets = (Vec<ReportedTicket>, Vec<(ReportedTicket, bool)>);

/// A report being written, [`report_step`] tickets a step, one step per
/// call of the core (docs/cluster.md "Handover"): its leader part first,
/// then its home part, each walked in key order from the last object done.
///
/// [`report_step`]: super::config::ClusterConfig::report_step
#[derive(Debug)]
pub(crate) struct ReportWalk {
    /// The epoch it reports for.
    pub epoch: u64,
    pub collector: Id,
    /// The link its first line went on (`None`: the collector is this
    /// agent): once that link is gone, the report is started over.
    pub link: Option<PeerId>,
    /// The serial of the collector's own report.
    pub own: Option<u64>,
    /// Still walking the frozen leader table (then the home's).
    pub in_leader: bool,
    /// The last object walked in the current part.
    pub after: Option<ObjectName>,
    /// The current part's tickets not yet on a line.
    pub batch: Batch,
    /// Lines sent so far, the first included.
    pub lines: u64,
    /// The collector's own report's tickets.
    pub tickets: OwnTickets,
    /// When the next step is due.
    pub next: Time,
}

/// What the handover of the current epoch has of this agent: as the
/// collector, the reports and the state it built; as a reporter, when it
/// reported.
#[derive(Debug, Default)]
pub(crate) struct Handover {
    /// Set while this agent is the collector of the current epoch.
    pub collect: Option<Collect>,
    /// The epoch this agent's report was accepted for... or sent for.
    pub report_sent: Option<(u64, Time)>,
    /// The report being written, while it is.
    pub report_walk: Option<ReportWalk>,
    /// The collector's own report: its tickets wait here (by serial) for
    /// the `end` line it sends itself, instead of being written out and
    /// read back (a million held locks are seconds of that).
    pub own_report: Option<(u64, OwnTickets)>,
    /// The collector's own copy of the state it built, and when: installed
    /// at the first call of a later time, once the copies for the other
    /// leaders went out (the shell writes between two calls of different
    /// times).
    pub own_state: Option<(Time, StateIn)>,
    /// The links whose lines the shell has not all written yet (their
    /// socket is full): while one leads to a leader the state goes to, the
    /// collector's own copy waits, up to [`own_state_hold`], so that the
    /// other leaders read theirs while it installs, not after.
    pub send_backlog: Vec<PeerId>,
    /// When the collector's own copy was first found due but held back for
    /// the backlog: the hold counts from there, not from when the state
    /// was built (building a million tickets' state takes its call a
    /// second, all of it at the time the call began).
    pub own_state_held: Option<Time>,
    /// The serial of the collector's latest own report.
    pub own_serial: u64,
    /// How much longer than `peer_timeout` to wait before reporting again:
    /// a report of a million locks costs every agent on its way seconds,
    /// and reports must not follow each other faster than they are read.
    pub report_pause: Duration,
    /// Collector: the state of this epoch as sent, and the leaders that
    /// have not answered as acting in it yet: each gets it again when its
    /// link comes up (it had no link, or lost part of the state).
    pub state_pending: Option<(u64, Vec<Id>, Vec<PeerMsg>)>,
    /// Collector: the latest late report of each home passed on while
    /// some leader had not answered as acting: it follows the state to
    /// such a leader when its link comes up (a leader that had no link
    /// when a report was passed on would never count that home).
    pub late_pending: BTreeMap<Id, Vec<PeerMsg>>,
}

impl Handover {
    /// `id` answered as an acting leader of `epoch` (the current one): it
    /// has the state, which is kept no longer than every leader needs it.
    pub fn state_received(&mut self, epoch: u64, id: &Id) {
        let Some((e, waiting, _)) = self.state_pending.as_mut() else {
            return;
        };
        if *e == epoch {
            waiting.retain(|l| l != id);
        }
        if *e != epoch || waiting.is_empty() {
            self.state_pending = None;
            self.late_pending.clear();
        }
    }
}

/// The collector's work for its epoch.
#[derive(Debug)]
pub(crate) struct Collect {
    pub started: Time,
    /// When the reports first came from a quorum of members.
    pub quorum_at: Option<Time>,
    pub partial: BTreeMap<Id, Report>,
    pub reports: BTreeMap<Id, Report>,
    pub done: bool,
}

impl Collect {
    pub fn new(now: Time) -> Collect {
        Collect {
            started: now,
            quorum_at: None,
            partial: BTreeMap::new(),
            reports: BTreeMap::new(),
            done: false,
        }
    }
}

/// What a collector's reports come to once it may build the state
/// ([`Collect::weigh`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// The state holds every lock any earlier epoch may still hold: no
    /// lock-delay beyond what the last ready epoch had left.
    pub complete: bool,
    /// The latest epoch a reporter had moved to before this one.
    pub e_max: u64,
}

impl Collect {
    /// Whether the state may be built now from the reports, and whether it
    /// is complete (docs/cluster.md "Handover"): a quorum of members
    /// reported, and either every member did, or a majority of the
    /// previous epoch's leaders did, one of them ready in it, and a quorum
    /// of the reporters has run for a `lock_delay` (a younger one may have
    /// forgotten an epoch). An incomplete state waits `peer_timeout` for
    /// more reports, unless every member linked to the collector (`peers`)
    /// reported already and no other may still come (below). `None`: not
    /// yet, or built already.
    pub fn weigh(
        &mut self,
        now: Time,
        peers: &Peers,
        lock_delay: Duration,
        peer_timeout: Duration,
    ) -> Option<Verdict> {
        if self.done {
            return None;
        }
        let names: BTreeSet<&str> = (self.reports.keys())
            .map(|id| Cluster::name_of(id))
            .collect();
        if names.len() < peers.quorum {
            return None;
        }
        let quorum_at = *self.quorum_at.get_or_insert(now);
        let everyone = names.len() >= peers.members.len();
        let e_max = (self.reports.values())
            .map(|r| r.prev_epoch)
            .max()
            .unwrap_or(0);
        let majority_of_previous = e_max > 0 && {
            let prev: Vec<Id> = (self.reports.values())
                .find(|r| r.prev_epoch == e_max)
                .map(|r| r.prev_leaders.clone())
                .unwrap_or_default();
            let reported: Vec<&Report> = prev.iter().filter_map(|l| self.reports.get(l)).collect();
            !prev.is_empty()
                && reported.len() > prev.len() / 2
                && reported.iter().any(|r| r.ready_epoch == e_max)
        };
        // E_max stands for every epoch that may still have a lock held
        // only if a quorum of the reporters remembers: an epoch that
        // granted one had a quorum answering within the last lock-delay,
        // which shares an agent with any quorum of reporters; if that
        // agent restarted since, its report knows nothing of that epoch
        // (and nobody else may). Agents up for less than the lock-delay
        // do not count for this quorum.
        let young = u64::try_from(lock_delay.as_micros()).unwrap_or(u64::MAX);
        let remembering: BTreeSet<&str> = (self.reports.iter())
            .filter(|(_, r)| r.up >= young)
            .map(|(id, _)| Cluster::name_of(id))
            .collect();
        let majority_of_previous = majority_of_previous && remembering.len() >= peers.quorum;
        let complete = everyone || majority_of_previous;
        // Waiting for more reports helps only while some may still come:
        // once every member linked to the collector reported, the state is
        // built at once (a failover soon after the cluster started, whose
        // state cannot be complete, would otherwise spend a `peer_timeout`
        // of its holders' grace here).
        let linked_reported = (peers.links.values())
            .filter(|l| !l.closing && l.id.is_some())
            .all(|l| names.contains(l.name.as_str()));
        if !complete && !linked_reported && now < self.started + peer_timeout {
            return None;
        }
        // But while this agent's links are still coming up (one came up
        // less than a `peer_timeout` ago), a member that has not reported
        // and that a linked member is linked to is not gone: its link may
        // be next, and its report may make the state complete. A conductor
        // back from a cut, whose epoch the others adopt, built its state
        // from the first quorum of reports, without the previous leaders'
        // tables, and the healthy homes those tables vouched for had to
        // revoke (one-computer seed 4125). It waits for such a member a
        // `peer_timeout` at most after a quorum first reported. So it does
        // for a member linked to the collector itself, whether it said who
        // it is yet or not (its `LOCKSTARTED` on the way): a conductor back
        // from a cut built its state 13 ms after its link to a healthy
        // member came up, before the linked members' first pongs named any
        // link, so the state was incomplete, and the whole cluster waited
        // out a lock-delay that the member's report, 170 ms later, would
        // have spared (one-computer seed 1470). A link that came up and has
        // not said who is at its end makes the links still come up.
        let introducing = (peers.links.values())
            .any(|l| !l.closing && l.id.is_none() && now < l.since + peer_timeout);
        let settling = (peers.last_link_up).is_some_and(|t| now < t + peer_timeout);
        if !complete && (settling || introducing) && now < quorum_at + peer_timeout {
            let reported: BTreeSet<std::net::SocketAddr> = (self.reports.keys())
                .filter_map(|id| crate::cluster::ids::parse_id(id).and_then(|p| p.addr))
                .collect();
            let masks = (peers.links.values())
                .filter(|l| !l.closing && l.id.is_some())
                .filter_map(|l| peers.peer_links.get(&l.addr).map(|(m, _)| *m))
                .fold(0u64, |all, m| all | m);
            let linked_unreported =
                (peers.links.values()).any(|l| !l.closing && !names.contains(l.name.as_str()));
            let may_come = linked_unreported
                || (peers.members.iter())
                    .any(|a| !reported.contains(a) && masks & peers.member_bit(*a) != 0);
            if may_come {
                return None;
            }
        }
        Some(Verdict { complete, e_max })
    }
}

/// The lock-delay of a state built from `reports`: what the last ready
/// epoch had left of its own (at most `lock_delay`) when the state is
/// complete, the whole `lock_delay` when it is not.
pub(crate) fn state_delay(
    reports: &BTreeMap<Id, Report>,
    verdict: Verdict,
    lock_delay: Duration,
) -> Duration {
    if !verdict.complete {
        return lock_delay;
    }
    (reports.values())
        .filter(|r| r.ready_epoch == verdict.e_max)
        .map(|r| Duration::from_micros(r.delay_left))
        .max()
        .unwrap_or(Duration::ZERO)
        .min(lock_delay)
}

/// The state a leader is receiving from the collector.
#[derive(Debug, Default)]
pub(crate) struct StateIn {
    pub base: u64,
    pub delay: Duration,
    pub tickets: Vec<ReportedTicket>,
    pub reporters: BTreeSet<Id>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_is_kept_until_every_leader_acts_in_its_epoch() {
        let (a, b): (Id, Id) = ("a".into(), "b".into());
        let mut h = Handover {
            state_pending: Some((7, vec![a.clone(), b.clone()], Vec::new())),
            ..Handover::default()
        };
        h.state_received(7, &a);
        assert_eq!(
            h.state_pending.as_ref().map(|p| p.1.clone()),
            Some(vec![b.clone()])
        );
        h.state_received(7, &a);
        assert!(h.state_pending.is_some(), "the same leader twice");
        h.state_received(7, &b);
        assert!(h.state_pending.is_none(), "every leader has it");
        // A state of another epoch is dropped at the first answer.
        h.state_pending = Some((6, vec![a.clone()], Vec::new()));
        h.state_received(7, &b);
        assert!(h.state_pending.is_none());
    }

    /// Three members `n0`..`n2`; `n0` collects and is linked to those of
    /// `linked`.
    fn peers(linked: &[u16]) -> Peers {
        let addr = |i: u16| std::net::SocketAddr::from(([127, 0, 0, 1], 4000 + i));
        let mut p = Peers::new((0..3).map(addr).collect());
        for &i in linked {
            let link = super::super::links::Link {
                id: Some(reporter(i)),
                ..super::super::links::Link::new(format!("n{i}"), addr(i), Time::ZERO)
            };
            p.links.insert(PeerId(u64::from(i)), link);
        }
        p
    }

    fn reporter(i: u16) -> Id {
        format!("14|{i}|127.0.0.1:{}|1|n{i}", 4000 + i).into()
    }

    /// A report of an agent up for `up_s`, last in epoch 5 (led by `n0`,
    /// `n1`, `n2`), ready in `ready` with `delay_ms` of its lock-delay left.
    fn report(up_s: u64, ready: u64, delay_ms: u64) -> Report {
        Report {
            prev_epoch: 5,
            prev_leaders: (0..3).map(reporter).collect(),
            ready_epoch: ready,
            delay_left: delay_ms * 1000,
            up: up_s * 1_000_000,
            ..Report::default()
        }
    }

    fn s(secs: u64) -> Time {
        Time::ZERO + Duration::from_secs(secs)
    }

    const DELAY: Duration = Duration::from_secs(10);
    const TIMEOUT: Duration = Duration::from_secs(2);

    #[test]
    fn a_state_is_complete_with_everybody_or_a_remembering_majority_of_the_last_leaders() {
        let mut c = Collect::new(s(100));
        c.reports.insert(reporter(0), report(60, 5, 0));
        let all = peers(&[1, 2]);
        assert_eq!(c.weigh(s(100), &all, DELAY, TIMEOUT), None, "no quorum");
        // Two of the three previous leaders, one ready in epoch 5, both
        // up for longer than the lock-delay: complete.
        c.reports.insert(reporter(1), report(60, 4, 0));
        let complete = Some(Verdict {
            complete: true,
            e_max: 5,
        });
        assert_eq!(c.weigh(s(100), &all, DELAY, TIMEOUT), complete);
        // Neither ready in epoch 5: incomplete, so it waits for `n2`...
        c.reports.insert(reporter(0), report(60, 4, 0));
        assert_eq!(c.weigh(s(101), &all, DELAY, TIMEOUT), None);
        // ...a `peer_timeout`, or until every linked member reported.
        let incomplete = Some(Verdict {
            complete: false,
            e_max: 5,
        });
        assert_eq!(c.weigh(s(102), &all, DELAY, TIMEOUT), incomplete);
        assert_eq!(c.weigh(s(101), &peers(&[1]), DELAY, TIMEOUT), incomplete);
        // A reporter younger than the lock-delay may have forgotten an
        // epoch: it does not count among those that remember.
        c.reports.insert(reporter(0), report(60, 5, 0));
        c.reports.insert(reporter(1), report(9, 4, 0));
        assert_eq!(c.weigh(s(101), &all, DELAY, TIMEOUT), None);
        // Everybody reported: complete, young or not.
        c.reports.insert(reporter(2), report(1, 0, 0));
        assert_eq!(c.weigh(s(101), &all, DELAY, TIMEOUT), complete);
        c.done = true;
        assert_eq!(c.weigh(s(101), &all, DELAY, TIMEOUT), None, "built");
    }

    /// `n0` collects, its links to `n1` just up: `n1` reported an epoch
    /// of which `n2` was a leader too, and nobody ready in it did.
    fn settling(up_at: u64) -> (Collect, Peers) {
        let mut c = Collect::new(s(10));
        c.reports.insert(reporter(0), report(60, 4, 0));
        c.reports.insert(reporter(1), report(60, 4, 0));
        let mut p = peers(&[1]);
        p.last_link_up = Some(s(up_at));
        (c, p)
    }

    #[test]
    fn a_collector_whose_links_come_up_waits_for_a_member_reached_elsewhere() {
        let incomplete = Some(Verdict {
            complete: false,
            e_max: 5,
        });
        // Not linked to `n2`, and nothing says `n2` is up: built at once
        // (every linked member reported).
        let (mut c, p) = settling(100);
        assert_eq!(c.weigh(s(100), &p, DELAY, TIMEOUT), incomplete);
        // `n1` is linked to `n2`: its report may still come, for a
        // `peer_timeout` after the quorum first reported.
        let (mut c, mut p) = settling(100);
        p.peer_links.insert(p.members[1], (0b111, s(100)));
        assert_eq!(c.weigh(s(100), &p, DELAY, TIMEOUT), None);
        assert_eq!(c.weigh(s(101), &p, DELAY, TIMEOUT), None);
        assert_eq!(c.weigh(s(102), &p, DELAY, TIMEOUT), incomplete);
        // Links that came up a `peer_timeout` ago are settled.
        let (mut c, mut p) = settling(97);
        p.peer_links.insert(p.members[1], (0b111, s(100)));
        assert_eq!(c.weigh(s(100), &p, DELAY, TIMEOUT), incomplete);
        // `n2` is linked to the collector itself and has not reported: it
        // may report next (seed 1470), for a `peer_timeout` as well.
        let (mut c, mut p) = settling(100);
        let addr = p.members[2];
        let link = super::super::links::Link {
            id: Some(reporter(2)),
            ..super::super::links::Link::new("n2".to_owned(), addr, s(100))
        };
        p.links.insert(PeerId(2), link);
        assert_eq!(c.weigh(s(101), &p, DELAY, TIMEOUT), None);
        assert_eq!(c.weigh(s(102), &p, DELAY, TIMEOUT), incomplete);
        // The link alone, its agent not known yet, makes the collector's
        // links still come up.
        for up_at in [100, 90] {
            let (mut c, mut p) = settling(up_at);
            let addr = p.members[2];
            let link = super::super::links::Link::new("n2".to_owned(), addr, s(100));
            p.links.insert(PeerId(2), link);
            assert_eq!(c.weigh(s(100), &p, DELAY, TIMEOUT), None);
            assert_eq!(c.weigh(s(102), &p, DELAY, TIMEOUT), incomplete);
        }
        // A complete state never waits.
        let (mut c, mut p) = settling(100);
        p.peer_links.insert(p.members[1], (0b111, s(100)));
        c.reports.insert(reporter(1), report(60, 5, 5));
        let verdict = c.weigh(s(100), &p, DELAY, TIMEOUT);
        assert_eq!(verdict.map(|v| v.complete), Some(true));
    }

    #[test]
    fn a_complete_state_keeps_what_was_left_of_the_last_lock_delay() {
        let mut reports = BTreeMap::new();
        reports.insert(reporter(0), report(60, 5, 3000));
        reports.insert(reporter(1), report(60, 5, 1000));
        reports.insert(reporter(2), report(60, 4, 9000)); // an older epoch's
        let v = |complete| Verdict { complete, e_max: 5 };
        assert_eq!(
            state_delay(&reports, v(true), DELAY),
            Duration::from_secs(3)
        );
        assert_eq!(state_delay(&reports, v(false), DELAY), DELAY);
        reports.insert(reporter(0), report(60, 5, 60_000));
        assert_eq!(
            state_delay(&reports, v(true), DELAY),
            DELAY,
            "at most the lock-delay"
        );
    }
}
