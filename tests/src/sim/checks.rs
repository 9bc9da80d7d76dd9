//! What the world checks itself, because it needs the clocks or the
//! network (the checker sees only true times): lease and deadline
//! conversions, S6 from the wire, S8 from the links.

use super::SEC;
use super::checker::secs;
use super::world::World;

impl World {
    /// The lease times of a `LOCKED` received now on computer `i`, in true
    /// time: when `timeout_date` comes there, and when `timeout_date +
    /// unlock` does.
    pub(super) fn lease_times(&self, i: usize, timeout_date: u64, unlock: u64) -> (u64, u64) {
        let clock = &self.nodes[i].clock;
        (
            clock.true_at_date(self.now, timeout_date),
            clock.true_at_date(self.now, timeout_date.saturating_add(unlock)),
        )
    }

    /// S6, from what the wire carried: the grant of `fence` on `object`
    /// delivered now must have had the votes of a majority of one epoch's
    /// leaders.
    pub(super) fn check_backed(&mut self, object: &[u8], fence: u64) {
        if self.nodes.len() < 2 {
            return;
        }
        if let Err(why) = self.wire.backed(object, fence) {
            let what = format!(
                "a grant of {} with fence {fence} was delivered without a majority of one epoch's leaders: {why}",
                String::from_utf8_lossy(object)
            );
            self.checker.report(self.now, "S6", what);
        }
    }

    /// How far an agent's reading of a client's date may differ from the
    /// client's, per million of the time in between (see [`LockSent`]).
    ///
    /// [`LockSent`]: super::checker::LockSent
    pub(super) fn deadline_slack_ppm(&self) -> u64 {
        if self.knobs.ntp {
            2 * u64::from(self.cluster.drift_ppm)
        } else {
            0
        }
    }

    /// S8: a `LOCKED` from computer `i` now must come from a side that could
    /// exchange messages with enough others recently: itself plus a majority
    /// of up to three leaders (never more than a quorum of members) within
    /// the time an agent keeps granting after losing contact.
    pub(super) fn check_quorum_side(&mut self, i: usize, what: &str) {
        let n = self.nodes.len();
        if n < 2 {
            return;
        }
        let quorum = n / 2 + 1;
        let leaders = n.min(3);
        let needed = quorum.min(1 + leaders / 2);
        let window = self.s8_window();
        let since = self.now.saturating_sub(window);
        let reach = self.net.reachable_since(i, since);
        if reach < needed {
            let text = format!(
                "n{i} delivered {what} after reaching only {reach} computer(s) (itself included) for {}; {needed} needed",
                secs(window)
            );
            self.checker.report(self.now, "S8", text);
        }
    }

    /// How long a cut-off agent may keep delivering grants: its grace plus
    /// a peer timeout, both measured on a clock that may run slow, plus two
    /// of the longest message delays.
    pub(super) fn s8_window(&self) -> u64 {
        let c = &self.cluster;
        let span = c.stretch(c.grace + c.peer_timeout);
        u64::try_from(span.as_micros()).expect("small") + 2 * self.knobs.delay.1 + SEC
    }
}
