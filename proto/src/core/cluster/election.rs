//! Elections and epochs as the core runs them: ticks, conducting, adopting
//! a newer epoch (the part itself is [`crate::cluster::election::Epoch`]).

use super::To;
use crate::cluster::Id;
use crate::cluster::election::{Conduct, Wait};
use crate::cluster::ids;
use crate::cluster::msg::{BadField, PeerMsg, Started};
use crate::core::Core;
use crate::time::Now;
use crate::vocab::PeerId;

impl Core {
    /// `LOCKSTARTED`: who this agent is, and the epoch it is in.
    pub(crate) fn lock_started(&self, now: Now) -> PeerMsg {
        let c = &self.cluster;
        PeerMsg::Started(Started {
            id: c.me.clone(),
            server_name: c.name.clone(),
            start_us: c.start_wall_us,
            wall_ms: Some(now.wall.0 / 1000),
            // The largest epoch it heard of, adopted or not: a conductor
            // that restarted learns how far epochs (and so fences) went.
            max_epoch: Some(c.epoch.max_seen.max(c.epoch.number)),
            epoch: c.epoch.number,
            leaders: c.epoch.leaders.clone(),
            add_vote: true,
            home_grant: true,
            home_drop: true,
        })
    }

    /// `LOCKLEADERS`: the current epoch and its leaders.
    fn leaders_news(&self) -> PeerMsg {
        PeerMsg::Leaders {
            epoch: self.cluster.epoch.number,
            leaders: self.cluster.epoch.leaders.clone(),
        }
    }

    pub(crate) fn on_started(
        &mut self,
        now: Now,
        peer: PeerId,
        s: Started,
    ) -> Result<(), BadField> {
        let parsed = ids::parse_id(&s.id).ok_or(BadField("lockid"))?;
        let link = self.cluster.peers.links.get(&peer).expect("link is up");
        if parsed.name != link.name || parsed.addr != Some(link.addr) {
            return Err(BadField(
                "lockid (not the name and address of the handshake)",
            ));
        }
        let id: Id = s.id;
        log::info!("{} is {id}", link.name);
        let link = self.cluster.peers.links.get_mut(&peer).expect("up");
        link.id = Some(id.clone());
        link.ahead = crate::cluster::links::wall_ahead(now, s.wall_ms);
        link.since = now.mono;
        link.add_vote = s.add_vote;
        link.home_grant = s.home_grant;
        link.home_drop = s.home_drop;
        let addr = link.addr;
        self.cluster.peers.last_link_up = Some(now.mono);
        self.cluster.peers.lost.remove(&addr);
        if self.cluster.epoch.leaders.contains(&id) {
            self.cluster.epoch.linked_leaders.insert(id.clone());
        }
        self.cluster.peers.heard.insert(id.clone(), now.mono);
        let (epoch, leaders) = (s.epoch, s.leaders);
        if epoch == self.cluster.epoch.number {
            self.resend_grants(now, &id);
        }
        // After our LOCKSTARTED on this link: it adopts our epoch first.
        self.send_unsent(&id);
        self.send_pending_state(&id);
        if let Some(max) = s.max_epoch {
            self.cluster.epoch.note_seen(max);
        }
        self.cluster.epoch.note_seen(epoch);
        let min_epoch = self.cluster.records.min_epoch;
        if self.cluster.epoch.may_adopt(epoch, min_epoch) && !leaders.is_empty() {
            self.adopt(now, epoch, leaders);
            // To the other side this link came up in this epoch: a release
            // it sent here on the link that broke is lost, and as an owner
            // this agent asks about that home's tickets once its table is
            // ready (else a ticket of the state whose home released it
            // blocked its name for good: ordinary seed 1653).
            self.resend_grants(now, &id);
        } else if epoch < self.cluster.epoch.number {
            let news = self.leaders_news();
            self.send(To::Link(peer), news);
        }
        self.maybe_elect(now);
        Ok(())
    }

    pub(crate) fn on_leaders(&mut self, now: Now, epoch: u64, leaders: Vec<Id>) {
        if (self.cluster.epoch).may_adopt(epoch, self.cluster.records.min_epoch) {
            self.adopt(now, epoch, leaders);
        }
    }

    /// Conducts an election when this agent is the conductor and the
    /// current leaders are not all connected to it (or their epoch never
    /// became ready): [`Cluster::weigh_election`] decides.
    ///
    /// [`Cluster::weigh_election`]: crate::cluster::Cluster::weigh_election
    pub(crate) fn maybe_elect(&mut self, now: Now) {
        if !self.authority.is_cluster() || self.stopping {
            return;
        }
        match self.cluster.weigh_election(now) {
            Conduct::Elect {
                epoch,
                leaders,
                why,
            } => {
                log::info!(
                    "conducting the election of epoch {epoch} ({why}): leaders {}",
                    leaders.iter().map(|l| &**l).collect::<Vec<_>>().join(", ")
                );
                self.cluster.epoch.last_election = Some(now.mono);
                self.adopt(now, epoch, leaders);
            }
            Conduct::Wait(Wait::NoCandidate) => {
                log::error!(
                    "no candidate to lead: every connected agent has candidate_priority=off"
                );
            }
            Conduct::Wait(_) => {}
        }
    }

    /// Moves to a newer epoch: stop acting for the old one, report to the
    /// new collector, pass the news on, re-send waiting requests.
    pub(crate) fn adopt(&mut self, now: Now, epoch: u64, leaders: Vec<Id>) {
        debug_assert!(epoch > self.cluster.epoch.number);
        log::info!(
            "epoch {epoch}: leaders {}",
            leaders
                .iter()
                .map(|l| crate::cluster::Cluster::name_of(l))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let prev_epoch = self.cluster.epoch.number;
        self.carry_over(now);
        let prev_leaders = std::mem::take(&mut self.cluster.epoch.leaders);
        if let Some(l) = self.cluster.leader.table.take() {
            if l.ready {
                self.cluster.leader.last_table = Some((prev_epoch, l));
            }
        }
        let c = &mut self.cluster;
        c.epoch.prev_number = prev_epoch;
        c.epoch.prev_leaders = prev_leaders;
        c.epoch.number = epoch;
        c.epoch.max_seen = c.epoch.max_seen.max(epoch);
        c.epoch.view = crate::cluster::view_of(&leaders);
        c.epoch.leaders = leaders;
        c.epoch.since = now.mono;
        // Linked now, or lost within the time the rule of lost links gives
        // a redial (which then decides): a leader whose link went down just
        // before this move, as when it crashed, is not one this agent never
        // reached in the epoch.
        let recent = now.mono - c.cfg.ping_interval * 4;
        let lost_lately = |id: &Id| {
            ids::parse_id(id)
                .and_then(|p| p.addr)
                .and_then(|a| c.peers.lost.get(&a))
                .is_some_and(|t| *t >= recent)
        };
        c.epoch.linked_leaders = (c.peers.links.values())
            .filter(|l| !l.closing)
            .filter_map(|l| l.id.clone())
            .filter(|id| c.epoch.leaders.contains(id))
            .chain(c.epoch.leaders.iter().filter(|l| lost_lately(l)).cloned())
            .collect();
        c.home.lapsed_owners = 0;
        c.handover.collect = None;
        c.handover.own_report = None; // its lines are of the old epoch: ignored
        c.handover.own_state = None;
        c.handover.own_state_held = None;
        c.handover.state_pending = None;
        c.handover.late_pending.clear();
        c.home.unsent.clear();
        c.leader.early.clear();
        c.leader.ask_when_ready.clear();
        c.handover.report_sent = None;
        if c.is_leader() {
            c.leader.table = Some(crate::cluster::ltable::LeaderTable::new());
        }
        if c.epoch.leaders[0] == c.me {
            c.handover.collect = Some(crate::cluster::handover::Collect::new(now.mono));
        }
        // On disk before this agent answers anybody in the new epoch.
        self.persist();
        let news = self.leaders_news();
        let peers: Vec<PeerId> = self
            .cluster
            .peers
            .links
            .iter()
            .filter(|(_, l)| !l.closing && l.id.is_some())
            .map(|(p, _)| *p)
            .collect();
        for peer in peers {
            self.send(To::Link(peer), news.clone());
        }
        self.send_report(now);
        self.resubmit_all(now);
    }
}
