//! The trust contract of a request (`min_uptime`, `min_trust`), checked by
//! the agent the client talks to (snaplock(7), TRUST).

use super::Core;
use crate::local::trust::{self, Contract, fraction_to_wire, trust_to_wire};
use crate::time::{Now, duration_to_wire};
use crate::vocab::Refusal;
use crate::wire::Message;

impl Core {
    /// Counts `command` in the call rate when it is a call
    /// ([`trust::is_call`]).
    pub(super) fn note_call(&mut self, now: Now, command: &str) {
        if trust::is_call(command) {
            self.trust.note_call(now.mono);
        }
    }

    /// `Some(error=untrusted)`, with this agent's uptime and trust, when it
    /// does not meet `contract` at `now`.
    ///
    /// The agent that decides is the one the client talks to, and it
    /// decides before the request is queued, so a refused request leaves
    /// no trace in the table or in the cluster. That agent is the client's
    /// server in Sky's sense: the one it calls, and the one whose
    /// knowledge the client relies on: its contact with the leaders, its
    /// clients' locks and sessions, which a restart loses (its uptime says
    /// how long it has held them), and the calls of the processes of its
    /// computer, whose rate drops when they cannot reach it. Its uptime
    /// and call rate are known here without a message, as Sky's design
    /// wants. The owner leader of an object, or the age of the epoch, would
    /// need a value carried in the peer protocol and known only after a
    /// round trip, while the cluster's guarantees (snaplock(7), GUARANTEES)
    /// do not depend on this check: they hold whatever it says.
    pub(crate) fn contract_refusal(&self, now: Now, contract: &Contract) -> Option<Refusal> {
        let uptime = self.trust.uptime(now.mono);
        let trust = self.trust.trust(now.mono);
        if contract.is_met(uptime, trust) {
            return None;
        }
        Some(Refusal::new(
            "untrusted",
            format!(
                "this agent does not meet the contract: uptime {} s (min_uptime={}), trust {} (min_trust={})",
                uptime_to_wire(uptime),
                duration_to_wire(contract.min_uptime),
                trust_to_wire(trust),
                fraction_to_wire(contract.min_trust),
            ),
        ))
    }

    /// `INFO`'s `trust` and `uptime`.
    pub(super) fn trust_info(&self, now: Now, msg: &mut Message) {
        msg.set("trust", trust_to_wire(self.trust.trust(now.mono)));
        msg.set("uptime", uptime_to_wire(self.trust.uptime(now.mono)));
    }
}

/// Seconds with up to three decimals, rounded down.
fn uptime_to_wire(d: std::time::Duration) -> String {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    duration_to_wire(std::time::Duration::from_millis(ms))
}
