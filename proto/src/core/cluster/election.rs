//! Elections and epochs as the core runs them: ticks, conducting, adopting
//! a newer epoch (the part itself is [`crate::cluster::election::Epoch`]).

use super::To;
use crate::cluster::Id;
use crate::cluster::config::addr_key;
use crate::cluster::election::{draw_epoch, pick_leaders};
use crate::cluster::ids;
use crate::cluster::msg::{BadField, PeerMsg, Started};
use crate::core::Core;
use crate::time::Now;
use crate::vocab::PeerId;
use std::time::Duration;

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
        let addr = link.addr;
        self.cluster.peers.last_link_up = Some(now.mono);
        self.cluster.peers.lost.remove(&addr);
        if self.cluster.epoch.leaders.contains(&id) {
            self.cluster.epoch.linked_leaders.insert(id.clone());
        }
        self.cluster.peers.heard.insert(id.clone(), now.mono);
        let (epoch, leaders) = (s.epoch, s.leaders);
        if epoch == self.cluster.epoch.number {
            self.resend_grants(&id);
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
    /// became ready).
    pub(crate) fn maybe_elect(&mut self, now: Now) {
        let c = &self.cluster;
        if !self.authority.is_cluster() || self.stopping {
            return;
        }
        let Some(my_addr) = c.addr else { return };
        // Only members that answered a ping lately, or whose link just came
        // up (no ping answered yet), count as connected: an agent cut off
        // one way must not elect leaders over links that merely are not
        // closed yet (it hears nothing, or is not heard and its LOCKLEADERS
        // would reach the others once the cut heals).
        let lately = now.mono - c.cfg.peer_timeout / 2;
        let known: Vec<(&crate::cluster::links::Link, &Id)> = c
            .peers
            .links
            .values()
            .filter(|l| !l.closing)
            .filter_map(|l| l.id.as_ref().map(|id| (l, id)))
            .filter(|(l, id)| {
                l.since >= lately || c.peers.contact.get(*id).is_some_and(|k| k.sent >= lately)
            })
            .collect();
        // The first election needs everybody in a small cluster; later ones
        // a quorum, so a 3-computer cluster that loses one goes on with the
        // two others.
        let needed = if c.epoch.max_seen == 0 {
            c.peers.election_quorum()
        } else {
            c.peers.quorum
        };
        if known.len() + 1 < needed {
            return;
        }
        // Addresses compared as numbers (never as text), and ties (same
        // address) broken by id.
        let mine = (addr_key(my_addr), &c.me);
        if known.iter().any(|(l, id)| (addr_key(l.addr), *id) < mine) {
            return;
        }
        // The conductor is the lowest member the connected ones reach, not
        // only this agent: one that comes back from a cut, linked to a
        // single other member so far, must not elect while that member is
        // linked to a lower one (which conducts). So every member counted
        // must first have said, over its current link, which members it is
        // linked to (`links=` of its pongs: a ping interval after the link
        // comes up).
        if c.epoch.leaders.iter().any(|l| *l != c.me) || c.epoch.max_seen > 0 {
            if known
                .iter()
                .any(|(l, _)| !c.peers.peer_links.contains_key(&l.addr))
            {
                return;
            }
            let lower = |i: usize| {
                c.peers
                    .members
                    .get(i)
                    .is_some_and(|a| *a != my_addr && addr_key(*a) < addr_key(my_addr))
            };
            // A lower member that enough of them reach to conduct (itself
            // and q − 1 others); one reached by fewer cannot, and waiting
            // for it would elect nobody.
            let masks: Vec<u64> = (known.iter())
                .filter_map(|(l, _)| c.peers.peer_links.get(&l.addr).map(|(m, _)| *m))
                .collect();
            let reached_lower = (0..c.peers.members.len().min(64)).any(|i| {
                lower(i)
                    && masks.iter().filter(|m| *m & (1 << i) != 0).count() + 1 >= c.peers.quorum
            });
            if reached_lower {
                return;
            }
            // A leader this agent is not linked to, but others are, is
            // not gone: while this agent's links are coming up (one came up
            // less than a `peer_timeout` ago), its link to that leader may
            // be next.
            let settling =
                (c.peers.last_link_up).is_some_and(|t| now.mono < t + c.cfg.peer_timeout);
            let bit = |a| c.peers.member_bit(a);
            let reached_elsewhere = c.epoch.leaders.iter().any(|l| {
                let addr = ids::parse_id(l).and_then(|p| p.addr);
                *l != c.me
                    && !known.iter().any(|(_, k)| *k == l)
                    && addr.is_some_and(|a| masks.iter().any(|m| m & bit(a) != 0))
            });
            if settling && reached_elsewhere {
                return;
            }
        }
        let connected = |id: &Id| *id == c.me || known.iter().any(|(_, k)| *k == id);
        // A leader this agent has not been linked to in this epoch yet may
        // just not have redialled (this agent was paused, or adopted the
        // epoch from another): electing without it would make it revoke
        // what its clients hold for nothing. Wait a `peer_timeout` for it;
        // one whose link went down is gone at once.
        let timeout = c.cfg.peer_timeout;
        let woke = c.epoch.woke.is_some_and(|w| now.mono < w + timeout);
        let unlinked = c.epoch.leaders.iter().any(|l| {
            !connected(l)
                && !c.epoch.linked_leaders.contains(l)
                && now.mono < c.epoch.since + timeout
        });
        // A member whose link just went down may be redialling (a broken
        // connection, not a dead agent): wait until another member says it
        // lost it too, or `4 × ping_interval`. A crashed agent's links all
        // go at once, so its death is confirmed by the next pong.
        let redialling =
            (c.peers.lost.keys()).any(|a| c.peers.presumed_up(*a, now.mono, c.cfg.ping_interval));
        if woke || unlinked || redialling {
            return;
        }
        // A member that is not a leader yet becomes one only once it says
        // (`links=` of its pongs) it is linked to every member this agent
        // is: a member that restarted, or was cut off, may not have its
        // link to the collector up yet, and a leader that cannot hear the
        // collector never becomes ready, which costs the locks its
        // objects carry. It is added once its links are up.
        let bit = |a| c.peers.member_bit(a);
        let seasoned = |l: &crate::cluster::links::Link, id: &Id| {
            c.epoch.leaders.is_empty()
                || c.epoch.leaders.contains(id)
                || c.peers.peer_links.get(&l.addr).is_some_and(|(mask, _)| {
                    (known.iter())
                        .filter(|(k, _)| k.addr != l.addr)
                        .all(|(k, _)| mask & bit(k.addr) != 0)
                })
        };
        let candidates_up = known
            .iter()
            .filter(|(l, id)| seasoned(l, id))
            .map(|(_, id)| *id)
            .chain(std::iter::once(&c.me))
            .filter(|id| ids::parse_id(id).is_some_and(|p| p.priority != ids::OFF))
            .count();
        // Too few leaders (after a loss) while more candidates are up: grow.
        let leaders_ok = !c.epoch.leaders.is_empty()
            && c.epoch.leaders.iter().all(connected)
            && c.epoch.leaders.len() >= candidates_up.min(3);
        let settle = c.cfg.peer_timeout * 3;
        let settled = now.mono >= c.epoch.since + settle;
        // A leader that answers pings in this epoch but has not acted for
        // it for long lost part of the handover (its state, or our report
        // in it): its objects would wait forever. A new epoch hands over
        // again.
        let lagging = c
            .epoch
            .leaders
            .iter()
            .filter(|l| **l != c.me)
            .any(|l| self.answers_without_acting(l, now.mono, settle));
        // Somebody answers in this epoch with other leaders (a restarted
        // conductor reused its number): a new epoch, larger than both,
        // ends the confusion at once.
        let conflict = c.peers.contact.values().any(|k| {
            k.epoch == c.epoch.number
                && k.view != c.epoch.view
                && k.sent + c.cfg.peer_timeout >= now.mono
        });
        // So is this very agent, a leader that never became ready.
        let not_ready = c.leader.table.as_ref().is_some_and(|l| !l.ready);
        // Somebody connected had adopted a later epoch before it restarted
        // and takes no earlier one: elect past it.
        let behind = c.epoch.max_seen > c.epoch.number;
        let stuck = leaders_ok
            && (conflict
                || settled
                    && (self.contact_time(now.mono).is_none() || lagging || not_ready || behind));
        if leaders_ok && !stuck {
            return;
        }
        let pause: Duration = c.cfg.ping_interval * 2;
        if c.epoch.last_election.is_some_and(|t| now.mono < t + pause) {
            return;
        }
        let up = (known.iter())
            .filter(|(l, id)| seasoned(l, id))
            .map(|(_, id)| (*id).clone())
            .chain(std::iter::once(c.me.clone()));
        let leaders = pick_leaders(up, &c.epoch.leaders);
        if leaders.is_empty() {
            log::error!("no candidate to lead: every connected agent has candidate_priority=off");
            return;
        }
        // The latest wall clock among the connected: when every agent that
        // knew the last fences is gone, the epoch (and so the fence base)
        // still follows the clock that drew the latest epochs, if it runs.
        let ahead = known.iter().map(|(l, _)| l.ahead).max().unwrap_or(0);
        let wall_ms = now.wall.0 / 1000 + ahead;
        let n = c.peers.members.len().max(1) as u64;
        let slot = c
            .peers
            .members
            .iter()
            .position(|a| *a == my_addr)
            .unwrap_or(0) as u64;
        let epoch = draw_epoch(c.epoch.number.max(c.epoch.max_seen), wall_ms, slot, n);
        log::info!(
            "conducting the election of epoch {epoch}: leaders {}",
            leaders.iter().map(|l| &**l).collect::<Vec<_>>().join(", ")
        );
        self.cluster.epoch.last_election = Some(now.mono);
        self.adopt(now, epoch, leaders);
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
        c.epoch.linked_leaders = (c.peers.links.values())
            .filter(|l| !l.closing)
            .filter_map(|l| l.id.clone())
            .filter(|id| c.epoch.leaders.contains(id))
            .collect();
        c.home.lapsed_owners = 0;
        c.handover.collect = None;
        c.handover.own_report = None; // its lines are of the old epoch: ignored
        c.handover.own_state = None;
        c.handover.state_pending = None;
        c.home.unsent.clear();
        c.leader.early.clear();
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
