//! What an owner says again to a home whose link came (back) up
//! (docs/cluster.md, "Availability": lost messages).

use super::To;
use crate::cluster::Id;
use crate::cluster::ltable::{LeaderState, ResendWalk};
use crate::cluster::msg::{PeerMsg, TicketAt};
use crate::core::Core;
use crate::time::Now;

impl Core {
    /// A link to `home` came (back) up: what was said while it was down is
    /// lost, the home's `UNLOCK` of a request it gave up among it. The
    /// owner says each of its grants to that home again, and asks about
    /// its other tickets of that home (`HASTICKET`, inherited or waiting);
    /// the home gives back those it no longer has (`home_answer`,
    /// `home_check`), and keeps the others as they are. Else a ticket its
    /// home forgot would block its name for as long as the home is heard
    /// (L5).
    ///
    /// Said in steps of `report_step` tickets, one per pass of the loop
    /// ([`continue_resend`](Self::continue_resend)), the first one now: a
    /// home may hold a million locks. A ticket granted or released
    /// between two steps was told on this link as it happened; one that
    /// comes after the walk's place is said with the rest.
    pub(crate) fn resend_grants(&mut self, now: Now, home: &Id) {
        let epoch = self.cluster.epoch.number;
        let link = self.cluster.peers.link_of(home);
        let role = &mut self.cluster.leader;
        if !role.table.as_ref().is_some_and(|l| l.ready) {
            if role.table.is_some() {
                role.ask_when_ready.insert(home.clone());
            }
            return;
        }
        self.owner_progress_again(home);
        // Without a link nothing would be said: its coming up walks.
        let Some(link) = link else { return };
        // Said again from the start: what an earlier walk said may have
        // gone with the link that broke.
        self.cluster.leader.resend.insert(
            home.clone(),
            ResendWalk {
                epoch,
                link,
                after: None,
                next: now.mono,
            },
        );
        self.resend_step(now, home);
    }

    /// The next step of every walk that is due (and the end of those whose
    /// epoch or link is gone).
    pub(crate) fn continue_resend(&mut self, now: Now) {
        if self.cluster.leader.resend.is_empty() {
            return;
        }
        let due: Vec<Id> = (self.cluster.leader.resend.iter())
            .filter(|(_, w)| w.next <= now.mono)
            .map(|(h, _)| h.clone())
            .collect();
        for home in due {
            self.resend_step(now, &home);
        }
    }

    /// One step of the walk of `home`: at most `report_step` of its
    /// tickets here.
    fn resend_step(&mut self, now: Now, home: &Id) {
        let me = self.cluster.me.clone();
        let epoch = self.cluster.epoch.number;
        let link = self.cluster.peers.link_of(home);
        let Some(mut w) = self.cluster.leader.resend.remove(home) else {
            return;
        };
        let Some(l) = self.cluster.leader.table.as_ref().filter(|l| l.ready) else {
            return;
        };
        if w.epoch != epoch || link != Some(w.link) {
            return;
        }
        let budget = self.cluster.cfg.report_step.max(1);
        let mut again = Vec::new();
        let mut walked = 0;
        let mut last = None;
        for (req, name) in l.of_home_after(home, w.after.as_ref()) {
            if walked == budget {
                break;
            }
            walked += 1;
            last = Some((req, name.clone()));
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
        if walked == budget {
            w.after = last;
            w.next = now.mono + self.cluster.cfg.report_step_pause;
            self.cluster.leader.resend.insert(home.clone(), w);
        }
        for m in again {
            self.send(To::Agent(home), m);
        }
    }
}
