//! What an owner says again to a home whose link came (back) up
//! (docs/cluster.md, "Availability": lost messages).

use super::To;
use crate::cluster::Id;
use crate::cluster::ltable::LeaderState;
use crate::cluster::msg::{PeerMsg, TicketAt};
use crate::core::Core;

impl Core {
    /// A link to `home` came (back) up: what was said while it was down is
    /// lost, the home's `UNLOCK` of a request it gave up among it. The
    /// owner says each of its grants to that home again, and asks about
    /// its other tickets of that home (`HASTICKET`, inherited or waiting);
    /// the home gives back those it no longer has (`home_answer`,
    /// `home_check`), and keeps the others as they are. Else a ticket its
    /// home forgot would block its name for as long as the home is heard
    /// (L5).
    pub(crate) fn resend_grants(&mut self, home: &Id) {
        let me = self.cluster.me.clone();
        let epoch = self.cluster.epoch.number;
        let Some(l) = self.cluster.leader.table.as_ref().filter(|l| l.ready) else {
            if self.cluster.leader.table.is_some() {
                self.cluster.leader.ask_when_ready.insert(home.clone());
            }
            return;
        };
        let mut again = Vec::new();
        for (name, req) in l.of_home_by_name(home) {
            if self.owner_of(name).as_ref() != Some(&me) {
                continue;
            }
            let state =
                (l.objects.get(name)).and_then(|o| o.find(home, req).map(|p| o.tickets[p].state));
            let at = || TicketAt {
                epoch,
                object: name.clone(),
                home: home.clone(),
                req,
            };
            match state {
                // A transaction's new holding: the transaction's answer
                // says it again (its home asks again until answered).
                Some(LeaderState::Held { .. }) if l.tx.of_set(home, req).is_some() => {}
                Some(LeaderState::Held { fence }) => {
                    again.push(PeerMsg::Locked { at: at(), fence })
                }
                Some(_) => again.push(PeerMsg::HasTicket(at())),
                None => {}
            }
        }
        for m in again {
            self.send(To::Agent(home), m);
        }
        self.owner_progress_again(home);
    }
}
