//! Starting an epoch (docs/cluster.md "Handover"): every agent reports to
//! the new epoch's collector; the collector builds the state the new
//! leaders start from, with a lock-delay when it cannot be complete.
//!
//! This file holds the part and its own logic; what the core does with it
//! on each message and tick is in `core/cluster/handover.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::Id;
use super::batch::ReportedTicket;
use super::msg::PeerMsg;
use crate::time::Time;

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

/// A report's tickets: its last leader table's, and its own clients' requests
/// (held or waiting).
pub(crate) type OwnTickets = (Vec<ReportedTicket>, Vec<(ReportedTicket, bool)>);

/// What the handover of the current epoch has of this agent: as the
/// collector, the reports and the state it built; as a reporter, when it
/// reported.
#[derive(Debug, Default)]
pub(crate) struct Handover {
    /// Set while this agent is the collector of the current epoch.
    pub collect: Option<Collect>,
    /// The epoch this agent's report was accepted for... or sent for.
    pub report_sent: Option<(u64, Time)>,
    /// The collector's own report: its tickets wait here (by serial) for
    /// the `end` line it sends itself, instead of being written out and
    /// read back (a million held locks are seconds of that).
    pub own_report: Option<(u64, OwnTickets)>,
    /// The collector's own copy of the state it built, and when: installed
    /// at the first call of a later time, once the copies for the other
    /// leaders went out (the shell writes between two calls of different
    /// times).
    pub own_state: Option<(Time, StateIn)>,
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
        }
    }
}

/// The collector's work for its epoch.
#[derive(Debug)]
pub(crate) struct Collect {
    pub started: Time,
    pub partial: BTreeMap<Id, Report>,
    pub reports: BTreeMap<Id, Report>,
    pub done: bool,
}

impl Collect {
    pub fn new(now: Time) -> Collect {
        Collect {
            started: now,
            partial: BTreeMap::new(),
            reports: BTreeMap::new(),
            done: false,
        }
    }
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
}
