//! The home's own vote as the owner weighs it (docs/cluster.md, "The
//! home's own vote"): which home delivers a grant on its own yes vote,
//! and when a try request whose vote such a home was asked for may be
//! refused.

use crate::cluster::Id;
use crate::cluster::ltable::LeaderState;
use crate::core::Core;
use crate::core::cluster::status::lock_delay_reason;
use crate::time::Now;
use crate::vocab::ObjectName;

impl Core {
    /// A try request that could not be granted at once is refused: `busy`
    /// when a ticket ahead holds (or is being granted, or may hold from
    /// the previous epoch), `unavailable` when nothing can be granted
    /// now (the lock-delay runs, or this owner does not act).
    ///
    /// A ticket whose vote was asked of a home that may deliver the grant
    /// on its own yes vote ([`Core::home_may_grant`]: whatever its link
    /// says now, for the link may have gone down since, the answer with
    /// it) is not refused: that home may hold it already, and
    /// its owner leaves such a fence only by granting it or on the home's
    /// own refusal (docs/cluster.md, "The home's own vote"). Its answer
    /// decides: a yes vote delivered the grant; after a refusal the
    /// ticket is judged as any other (called again from `owner_voted`),
    /// so a try request is not left waiting for a retry.
    ///
    /// `voted`: called on a refused vote. A ticket waiting then waits for
    /// a retry, not behind a holder: refused only while this owner does
    /// not act (`unavailable`), never as `busy`.
    pub(super) fn refuse_if_busy(
        &mut self,
        now: Now,
        object: &ObjectName,
        home: &Id,
        req: u64,
        try_once: bool,
        voted: bool,
    ) {
        if !try_once {
            return;
        }
        let acting = self.cluster.acting(now.mono);
        let home_may_grant = self.home_may_grant(home);
        let l = self.cluster.leader.table.as_mut().expect("ready leader");
        let state = l
            .objects
            .get(object)
            .and_then(|o| o.find(home, req).map(|p| o.tickets[p].state));
        let delay = l
            .delay_until
            .map_or(std::time::Duration::ZERO, |d| d.saturating_since(now.mono));
        let no_quorum = || {
            format!(
                "no quorum: the owner {} is not answered by a quorum",
                self.cluster.name
            )
        };
        let refusal = match state {
            Some(LeaderState::Waiting) if !delay.is_zero() => {
                Some(("unavailable", lock_delay_reason(delay)))
            }
            Some(LeaderState::Waiting) if voted && !acting => Some(("unavailable", no_quorum())),
            Some(LeaderState::Waiting) if voted => None,
            Some(LeaderState::Waiting) => Some(("busy", "the object is locked".to_owned())),
            Some(LeaderState::Activating { ballot, .. })
                if home_may_grant.is_some_and(|h| {
                    ballot.asked & 1 << h != 0 && ballot.refused & 1 << h == 0
                }) =>
            {
                None
            }
            Some(LeaderState::Activating { .. }) if !acting => Some(("unavailable", no_quorum())),
            _ => None,
        };
        if let Some((error, why)) = refusal {
            self.owner_release(now, object, home, req);
            let at = self.ticket_at(object, home, req);
            self.owner_refuse(at, error, why);
        }
    }

    /// The index among the leaders of `home`, when it delivers a grant on
    /// its own yes vote: [`Core::home_may_grant`], and its `LOCKSTARTED`
    /// said `home_grant=1`.
    pub(super) fn home_grants(&self, home: &Id) -> Option<usize> {
        let c = &self.cluster;
        self.home_may_grant(home).filter(|_| {
            let link = c.peers.link_of(home).and_then(|p| c.peers.links.get(&p));
            link.is_some_and(|k| k.home_grant)
        })
    }

    /// The index among the leaders of `home`, another leader whose
    /// `LOCKSTARTED` said `home_drop=1`: it dropped its own vote on a
    /// request when it released it, so its `UNLOCK` needs no `DROPTICKET`
    /// back (docs/cluster.md "Granting", the home's own vote).
    pub(super) fn home_drops(&self, home: &Id) -> Option<usize> {
        let c = &self.cluster;
        if **home == *c.me {
            return None;
        }
        let link = c.peers.link_of(home).and_then(|p| c.peers.links.get(&p));
        link.filter(|k| k.home_drop)?;
        c.epoch.leaders.iter().position(|l| l == home)
    }

    /// The index among the leaders of `home`, when it may deliver a grant
    /// on its own yes vote: another leader, whose vote is the majority's
    /// last (at most three leaders). Whether it does is its link's to say
    /// ([`Core::home_grants`]); an owner deciding whether it may leave a
    /// fence it asked that home for asks only this, which a link that
    /// went down (taking the answer with it) or came up again does not
    /// change.
    pub(super) fn home_may_grant(&self, home: &Id) -> Option<usize> {
        let c = &self.cluster;
        (**home != *c.me && c.leader_majority() <= 2)
            .then(|| c.epoch.leaders.iter().position(|l| l == home))
            .flatten()
    }
}
