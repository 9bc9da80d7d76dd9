//! Links, pings, and the two kinds of evidence of liveness (docs/cluster.md
//! "Links and liveness"): when a peer was last *heard*, and the send time of
//! the latest ping it *answered*.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use super::msg::{BadField, PeerMsg, Pong, Role};
use super::{Contact, Id};
use crate::core::{Core, InputError, Output};
use crate::time::{Now, Time};
use crate::vocab::PeerId;
use crate::wire::Message;

/// Where a peer message goes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum To<'a> {
    /// Over this link.
    Link(PeerId),
    /// To the agent with this id: over its link, or to this agent's own
    /// other half (home and leader) after the current input. An `UNLOCK`
    /// whose link is down waits for the link ([`Core::send_unsent`]);
    /// anything else is dropped, since the protocol says again what
    /// matters once the link is back.
    Agent(&'a str),
    /// To the leaders of the mask (bit i = leader i) other than this one,
    /// over their links.
    Leaders(u8),
}

/// Pings awaiting an answer on one link, at most.
const MAX_PINGS: usize = 64;

/// The members, the links to them, and the evidence of their liveness:
/// when each agent was last *heard*, and the latest ping it *answered*
/// (docs/cluster.md, "Links and liveness").
#[derive(Debug)]
pub(crate) struct Peers {
    /// Every member's `listen` address, in order (this agent's included).
    pub members: Vec<SocketAddr>,
    /// A majority of the members.
    pub quorum: usize,
    /// The links that are up, by the shell's number.
    pub links: BTreeMap<PeerId, Link>,
    /// When each agent was last heard (any message).
    pub heard: BTreeMap<Id, Time>,
    /// The latest ping each agent answered.
    pub contact: BTreeMap<Id, Contact>,
    /// The serial of the latest ping.
    pub ping_serial: u64,
    /// Members whose link went down, and when: one may be back in a moment
    /// (a broken connection redials at once), so no election is held for it
    /// until another member confirms it lost it too, or for
    /// `4 × ping_interval` (docs/cluster.md, "Elections").
    pub lost: BTreeMap<SocketAddr, Time>,
    /// What each peer last said of its own links (`links=` of `LOCKPONG`:
    /// bit i = a link up to member i), and when it arrived.
    pub peer_links: BTreeMap<SocketAddr, (u64, Time)>,
    /// When a link of this agent last came up (its peer's `LOCKSTARTED`).
    pub last_link_up: Option<Time>,
}

impl Peers {
    /// No link yet to any of `members`.
    pub fn new(members: Vec<SocketAddr>) -> Peers {
        let n = members.len().max(1);
        Peers {
            members,
            quorum: n / 2 + 1,
            links: BTreeMap::new(),
            heard: BTreeMap::new(),
            contact: BTreeMap::new(),
            ping_serial: 0,
            lost: BTreeMap::new(),
            peer_links: BTreeMap::new(),
            last_link_up: None,
        }
    }

    /// Forgets what was heard of ids silent since before `cutoff` (agents
    /// restarted since, with a new id), but not of an id with a link, one
    /// of the `leaders`, or one whose tickets a leader table `holds`: the
    /// maps stay bounded by the members' restarts.
    pub fn forget_old(&mut self, cutoff: Time, leaders: &[Id], holds: impl Fn(&Id) -> bool) {
        let in_use: std::collections::BTreeSet<Id> = (self.links.values())
            .filter_map(|l| l.id.clone())
            .chain(leaders.iter().cloned())
            .collect();
        self.heard
            .retain(|id, t| *t >= cutoff || in_use.contains(id) || holds(id));
        self.contact
            .retain(|id, k| k.sent >= cutoff || in_use.contains(id));
    }

    /// The bit of member `addr` in a `links=` mask (0 for none).
    pub fn member_bit(&self, addr: SocketAddr) -> u64 {
        (self.members.iter().position(|m| *m == addr))
            .filter(|i| *i < 64)
            .map_or(0, |i| 1 << i)
    }

    /// Bit i set: a link up (not closing, its agent known) to member i.
    pub fn links_mask(&self) -> u64 {
        (self.links.values())
            .filter(|l| !l.closing && l.id.is_some())
            .fold(0, |mask, l| mask | self.member_bit(l.addr))
    }

    /// Whether the member at `addr`, whose link went down lately, may just
    /// be redialling: no other member said since that it lost it too, and
    /// `4 × ping_interval` did not pass (docs/cluster.md, "Elections").
    pub fn presumed_up(&self, addr: SocketAddr, now: Time, ping_interval: Duration) -> bool {
        let Some(lost) = self.lost.get(&addr) else {
            return false;
        };
        if now >= *lost + ping_interval * 4 {
            return false;
        }
        let Some(i) = self
            .members
            .iter()
            .position(|a| *a == addr)
            .filter(|i| *i < 64)
        else {
            return false;
        };
        let confirmed = (self.peer_links.iter())
            .any(|(other, (mask, at))| *other != addr && *at > *lost && mask & (1 << i) == 0);
        !confirmed
    }

    /// Members needed to hold an election: all of them up to three.
    pub fn election_quorum(&self) -> usize {
        let n = self.members.len();
        if n <= 3 { n } else { self.quorum }
    }

    /// The up link to the agent with id `id`.
    pub fn link_of(&self, id: &str) -> Option<PeerId> {
        self.links
            .iter()
            .find(|(_, l)| l.id.as_deref() == Some(id))
            .map(|(p, _)| *p)
    }
}

/// A link that is up.
#[derive(Debug)]
pub(crate) struct Link {
    pub name: String,
    pub addr: SocketAddr,
    /// From its `LOCKSTARTED`; nothing but `LOCKSTARTED` is taken before.
    pub id: Option<Id>,
    /// Unanswered pings: serial and send time.
    pub pings: VecDeque<(u64, Time)>,
    /// Asked to be closed: what it says is ignored.
    pub closing: bool,
    /// How far its wall clock was ahead of ours when it last said (`wall=`
    /// of `LOCKSTARTED` and `LOCKPONG`), ms; the message's delay makes it
    /// look a little behind.
    pub ahead: u64,
    /// When its `LOCKSTARTED` came (its agent became known).
    pub since: Time,
}

impl Core {
    pub(crate) fn peer_up(
        &mut self,
        now: Now,
        peer: PeerId,
        name: String,
        addr: SocketAddr,
    ) -> Result<(), InputError> {
        if self.cluster.peers.links.contains_key(&peer) {
            return Err(InputError::PeerAlreadyUp(peer));
        }
        let c = &self.cluster;
        let why = if !self.authority.is_cluster() {
            Some("this agent is not in a cluster")
        } else if !c.peers.members.contains(&addr) || Some(addr) == c.addr {
            Some("its address is not another member's")
        } else if name == c.name || c.peers.links.values().any(|l| l.name == name && !l.closing) {
            Some("its name is taken")
        } else {
            None
        };
        let closing = why.is_some();
        if let Some(why) = why {
            log::warn!("link {peer} from {name} ({addr}) closed: {why}");
            self.out.push_back(Output::PeerClose { peer });
        }
        self.cluster.peers.links.insert(
            peer,
            Link {
                name,
                addr,
                id: None,
                pings: VecDeque::new(),
                closing,
                ahead: 0,
                since: now.mono,
            },
        );
        if !closing {
            let started = self.lock_started(now);
            self.send(To::Link(peer), started);
        }
        Ok(())
    }

    pub(crate) fn peer_down(&mut self, now: Now, peer: PeerId) -> Result<(), InputError> {
        let Some(link) = self.cluster.peers.links.remove(&peer) else {
            return Err(InputError::UnknownPeer(peer));
        };
        log::info!("link to {} ({}) is down", link.name, link.addr);
        if link.id.is_some() && !link.closing {
            self.cluster.peers.lost.insert(link.addr, now.mono);
        }
        // What it said of its links was said over this link.
        self.cluster.peers.peer_links.remove(&link.addr);
        self.maybe_elect(now);
        Ok(())
    }

    pub(crate) fn peer_message(
        &mut self,
        now: Now,
        peer: PeerId,
        mut msg: Message,
    ) -> Result<(), InputError> {
        let Some(link) = self.cluster.peers.links.get(&peer) else {
            return Err(InputError::UnknownPeer(peer));
        };
        if link.closing {
            return Ok(());
        }
        let from = link.id.clone();
        let addr = link.addr;
        let name = link.name.clone();
        if self.refuse_far(now, &name, &msg) {
            return Ok(());
        }
        if let Some(id) = &from {
            self.cluster.peers.heard.insert(id.clone(), now.mono);
        }
        // Any epoch a peer names, current or not, bounds the next one from
        // below (a conductor must draw past every epoch fences came from).
        if let Some(epoch) = msg.get("epoch").and_then(crate::vocab::parse_u64) {
            self.cluster.epoch.note_seen(epoch);
            // Every `epoch=` a peer sends is the one it is in: one later
            // than the locks were carried from says it left that epoch.
            self.cluster.home.carried.left(addr, epoch, now.mono);
        }
        let result = match PeerMsg::parse(&mut msg) {
            Ok(Some(m)) => self.dispatch(now, peer, from, m),
            Ok(None) => {
                log::debug!("unknown peer command {} ignored", msg.command);
                Ok(())
            }
            Err(bad) => Err(bad),
        };
        if let Err(BadField(what)) = result {
            log::warn!("{} from {name} dropped: bad or missing {what}", msg.command);
        }
        Ok(())
    }

    /// Hands a message from link `peer` (agent `from`, once it said who
    /// it is) to the part it is for.
    fn dispatch(
        &mut self,
        now: Now,
        peer: PeerId,
        from: Option<Id>,
        m: PeerMsg,
    ) -> Result<(), BadField> {
        match (m, from) {
            (PeerMsg::Started(s), _) => self.on_started(now, peer, s),
            (PeerMsg::Ping { serial }, _) => {
                self.on_ping(now, peer, serial);
                Ok(())
            }
            (_, None) => Err(BadField("LOCKSTARTED first")),
            (PeerMsg::Pong(p), Some(from)) => {
                self.on_pong(now, peer, &from, &p);
                Ok(())
            }
            (m, Some(from)) => self.on_agent_message(now, &from, m),
        }
    }

    /// A message of agent `from` (another, or this one to itself) for the
    /// election, the handover, or the lock protocol.
    pub(crate) fn on_agent_message(
        &mut self,
        now: Now,
        from: &Id,
        m: PeerMsg,
    ) -> Result<(), BadField> {
        match m.role() {
            Role::Link => Ok(()),
            Role::Election => match m {
                PeerMsg::Leaders { epoch, leaders } => {
                    self.on_leaders(now, epoch, leaders);
                    Ok(())
                }
                _ => Ok(()),
            },
            Role::Handover => match m {
                PeerMsg::Tickets { epoch, part } => self.on_tickets(now, from, epoch, part),
                _ => Ok(()),
            },
            Role::Leader | Role::Home => self.on_lock_message(now, from, m),
        }
    }

    /// Sends `msg` where `to` says.
    pub(crate) fn send(&mut self, to: To<'_>, msg: PeerMsg) {
        match to {
            To::Link(peer) => self.out.push_back(Output::PeerSend {
                peer,
                msg: msg.encode(),
            }),
            To::Agent(id) if *id == *self.cluster.me => self.cluster.local.push_back(msg),
            To::Agent(id) => match self.cluster.peers.link_of(id) {
                Some(peer) => self.send(To::Link(peer), msg),
                // A release must reach its owner: it goes when the link is
                // up again (in this epoch; a new one's state follows the
                // home's report). Bounded like the tickets it releases.
                None if matches!(msg, PeerMsg::Unlock { .. })
                    && self.cluster.home.unsent.len() < self.config.max_tickets =>
                {
                    self.cluster.home.unsent.push((Id::from(id), msg));
                }
                None => {}
            },
            To::Leaders(mask) => {
                let c = &self.cluster;
                let mut peers: Vec<PeerId> = (c.epoch.leaders.iter().enumerate())
                    .filter(|(i, l)| mask & (1 << i) != 0 && **l != c.me)
                    .filter_map(|(_, l)| c.peers.link_of(l))
                    .collect();
                let Some(last) = peers.pop() else { return };
                let msg = msg.encode();
                for peer in peers {
                    self.out.push_back(Output::PeerSend {
                        peer,
                        msg: msg.clone(),
                    });
                }
                self.out.push_back(Output::PeerSend { peer: last, msg });
            }
        }
    }

    /// The link to `id` is up: the releases that waited for it go.
    pub(crate) fn send_unsent(&mut self, id: &Id) {
        if !self.cluster.home.unsent.iter().any(|(to, _)| to == id) {
            return;
        }
        let all = std::mem::take(&mut self.cluster.home.unsent);
        let (mine, rest): (Vec<_>, Vec<_>) = all.into_iter().partition(|(to, _)| to == id);
        self.cluster.home.unsent = rest;
        for (_, m) in mine {
            self.send(To::Agent(id), m);
        }
    }

    fn on_ping(&mut self, now: Now, peer: PeerId, serial: u64) {
        let asker = self
            .cluster
            .peers
            .links
            .get(&peer)
            .and_then(|l| l.id.clone());
        let active = asker.is_some_and(|a| self.answers_active(&a));
        // What is left of this leader's lock-delay: the homes that are
        // not leaders learn from it that nothing can be granted yet.
        let delay_until = self
            .cluster
            .leader
            .table
            .as_ref()
            .and_then(|l| l.delay_until);
        let delay_us = delay_until.map_or(0, |d| d.saturating_since(now.mono).as_micros() as u64);
        let pong = Pong {
            serial,
            epoch: self.cluster.epoch.number,
            view: self.cluster.epoch.view,
            wall_ms: Some(now.wall.0 / 1000),
            active,
            links: Some(self.cluster.peers.links_mask()),
            delay_us,
        };
        self.send(To::Link(peer), PeerMsg::Pong(pong));
    }

    fn on_pong(&mut self, now: Now, peer: PeerId, from: &Id, p: &Pong) {
        let (serial, epoch, active, view) = (p.serial, p.epoch, p.active, p.view);
        // How far its wall clock is ahead of ours (ms; the answer's delay
        // makes it look a little behind).
        let link = self.cluster.peers.links.get_mut(&peer).expect("link is up");
        link.ahead = wall_ahead(now, p.wall_ms);
        if let Some(mask) = p.links {
            let addr = link.addr;
            // This pong may confirm a member gone whose link is presumed to
            // be redialling; or, when its sender is no longer linked to a
            // member (it lost or closed that link), it may end this agent's
            // wait for a lower member that conducts. Elect now, not at the
            // next tick: a member back by then (a pause that ends, a
            // restart) is counted again while its locks' grace runs.
            let c = &self.cluster;
            let waiting = c
                .peers
                .lost
                .keys()
                .any(|a| c.peers.presumed_up(*a, now.mono, c.cfg.ping_interval));
            let unlinked = (c.peers.peer_links.get(&addr)).is_some_and(|(m, _)| *m & !mask != 0);
            self.cluster.peers.peer_links.insert(addr, (mask, now.mono));
            if waiting || unlinked {
                self.maybe_elect(now);
            }
        }
        let link = self.cluster.peers.links.get_mut(&peer).expect("link is up");
        // Pings are answered in order (FIFO link): older unanswered ones
        // were lost with nothing, drop them.
        let mut sent = None;
        while let Some((s, at)) = link.pings.pop_front() {
            if s == serial {
                sent = Some(at);
                break;
            }
        }
        let Some(sent) = sent else { return };
        let c = self
            .cluster
            .peers
            .contact
            .entry(from.clone())
            .or_insert(Contact {
                sent,
                epoch,
                active_sent: None,
                view,
                delay_until: None,
            });
        if !c.in_view(epoch, view) {
            c.active_sent = None;
        }
        c.sent = c.sent.max(sent);
        c.epoch = epoch;
        c.view = view;
        if active {
            c.active_sent = Some(c.active_sent.map_or(sent, |a| a.max(sent)));
        }
        let acting_here = active && c.in_view(self.cluster.epoch.number, self.cluster.epoch.view);
        // Counted from its arrival: never shorter than what is left.
        c.delay_until = (p.delay_us > 0).then(|| now.mono + Duration::from_micros(p.delay_us));
        self.cluster.epoch.note_seen(epoch);
        if acting_here {
            let epoch = self.cluster.epoch.number;
            self.cluster.handover.state_received(epoch, from);
        }
    }

    /// Every `ping_interval`: ping every link, close silent ones, unless
    /// this agent itself was `stalled` since the last round: then every
    /// link gets this round to be heard (its messages wait to be read).
    pub(crate) fn ping_all(&mut self, now: Now, stalled: bool) {
        let timeout = self.cluster.cfg.peer_timeout;
        let peers: Vec<PeerId> = self.cluster.peers.links.keys().copied().collect();
        for peer in peers {
            let link = self.cluster.peers.links.get_mut(&peer).expect("listed");
            if link.closing {
                continue;
            }
            let heard = link
                .id
                .as_ref()
                .and_then(|id| self.cluster.peers.heard.get(id).copied());
            let since = link.pings.front().map(|(_, at)| *at);
            let silent_since = match (heard, since) {
                (Some(h), Some(s)) => Some(h.max(s)),
                (None, s) => s,
                (h, None) => h,
            };
            if !stalled
                && link.pings.front().is_some()
                && silent_since.is_some_and(|s| s + timeout <= now.mono)
                && heard.is_none_or(|h| h + timeout <= now.mono)
            {
                log::warn!(
                    "{} ({}) silent for {timeout:?}: closing its link",
                    link.name,
                    link.addr
                );
                link.closing = true;
                self.out.push_back(Output::PeerClose { peer });
                continue;
            }
            self.cluster.peers.ping_serial += 1;
            let serial = self.cluster.peers.ping_serial;
            if link.pings.len() >= MAX_PINGS {
                link.pings.pop_front();
            }
            link.pings.push_back((serial, now.mono));
            self.send(To::Link(peer), PeerMsg::Ping { serial });
        }
    }

    /// Forgets what was heard of ids silent for long (agents restarted
    /// since, with a new id): bounded by the members' restarts otherwise.
    pub(crate) fn forget_old_ids(&mut self, now: Now) {
        let c = &mut self.cluster;
        let keep = c.cfg.stretch(c.cfg.grace) * 4 + c.cfg.peer_timeout;
        let table = c.leader.table.as_ref();
        let held = |id: &Id| table.is_some_and(|l| l.by_home.contains_key(id));
        c.peers.forget_old(now.mono - keep, &c.epoch.leaders, held);
    }

    /// Whether this agent is an acting leader: ready in its epoch and
    /// answered in it by a quorum (itself included) within `peer_timeout`.
    pub(crate) fn acting(&self, now: Time) -> bool {
        let c = &self.cluster;
        if !c.leader.table.as_ref().is_some_and(|l| l.ready) {
            return false;
        }
        let since = now - c.cfg.peer_timeout;
        let answered = c
            .peers
            .contact
            .values()
            .filter(|k| k.in_view(c.epoch.number, c.epoch.view) && k.sent >= since)
            .count();
        answered + 1 >= c.peers.quorum
    }

    /// The pong's `active` flag for `asker`: acting, and `asker`'s report
    /// is part of this epoch's state (a home whose held locks the epoch
    /// does not know must not be kept in contact: it has to revoke).
    fn answers_active(&self, asker: &Id) -> bool {
        let Some(l) = self.cluster.leader.table.as_ref() else {
            return false;
        };
        l.ready && l.reporters.contains(asker) && self.acting(self.last_now)
    }

    /// Whether `leader` answered a ping in this view within `peer_timeout`
    /// but none as acting for `window`: it lost part of the handover (its
    /// state, or the news that this agent's report counts).
    pub(crate) fn answers_without_acting(&self, leader: &Id, now: Time, window: Duration) -> bool {
        let c = &self.cluster;
        c.peers.contact.get(leader).is_some_and(|k| {
            k.in_view(c.epoch.number, c.epoch.view)
                && k.sent + c.cfg.peer_timeout >= now
                && k.active_sent.is_none_or(|a| a + window <= now)
        })
    }

    /// Home: the latest time at which a majority of this epoch's leaders
    /// were acting and answering this agent.
    pub(crate) fn contact_time(&self, now: Time) -> Option<Time> {
        let c = &self.cluster;
        let mut times: Vec<Time> = Vec::with_capacity(c.epoch.leaders.len());
        for leader in &c.epoch.leaders {
            if *leader == c.me {
                let counted = c
                    .leader
                    .table
                    .as_ref()
                    .is_some_and(|l| l.ready && l.reporters.contains(&c.me));
                if counted && self.acting(now) {
                    times.push(now);
                }
            } else if let Some(k) = c.peers.contact.get(leader) {
                if k.in_view(c.epoch.number, c.epoch.view) {
                    if let Some(a) = k.active_sent {
                        times.push(a);
                    }
                }
            }
        }
        let k = c.leader_majority();
        if c.epoch.leaders.is_empty() || times.len() < k {
            return None;
        }
        times.sort_unstable_by(|a, b| b.cmp(a));
        Some(times[k - 1])
    }
}

/// How far the sender's wall clock (`wall=`, ms) is ahead of ours; never
/// more than [`MAX_EPOCH_AHEAD`](super::persist::MAX_EPOCH_AHEAD) (a
/// message saying more is refused before it gets here).
pub(crate) fn wall_ahead(now: Now, wall_ms: Option<u64>) -> u64 {
    wall_ms.map_or(0, |w| {
        w.min(super::persist::epoch_limit(now))
            .saturating_sub(now.wall.0 / 1000)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(n: u16) -> Vec<SocketAddr> {
        (0..n)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], 4040 + i)))
            .collect()
    }

    fn link(addr: SocketAddr, id: Option<&str>, closing: bool) -> Link {
        Link {
            name: "x".to_owned(),
            addr,
            id: id.map(Id::from),
            pings: VecDeque::new(),
            closing,
            ahead: 0,
            since: Time::ZERO,
        }
    }

    #[test]
    fn the_links_mask_has_the_members_linked_and_known() {
        let m = addrs(4);
        let mut p = Peers::new(m.clone());
        assert_eq!(p.quorum, 3);
        assert_eq!(p.election_quorum(), 3);
        p.links.insert(PeerId(1), link(m[1], Some("b"), false));
        p.links.insert(PeerId(2), link(m[2], None, false)); // no LOCKSTARTED yet
        p.links.insert(PeerId(3), link(m[3], Some("d"), true)); // closing
        assert_eq!(p.links_mask(), 0b0010);
        assert_eq!(p.member_bit(m[3]), 0b1000);
        assert_eq!(p.member_bit(SocketAddr::from(([10, 0, 0, 1], 1))), 0);
        assert_eq!(p.link_of("b"), Some(PeerId(1)));
        assert_eq!(p.link_of("d"), Some(PeerId(3)));
        assert_eq!(p.link_of("c"), None);
    }

    #[test]
    fn a_small_cluster_elects_with_everybody_a_larger_one_with_a_majority() {
        assert_eq!(Peers::new(addrs(1)).election_quorum(), 1);
        assert_eq!(Peers::new(addrs(3)).election_quorum(), 3);
        assert_eq!(Peers::new(addrs(5)).election_quorum(), 3);
    }

    #[test]
    fn a_lost_member_is_presumed_redialling_until_another_confirms_or_time_passes() {
        let m = addrs(3);
        let ping = Duration::from_millis(500);
        let mut p = Peers::new(m.clone());
        let t0 = Time::ZERO + Duration::from_secs(10);
        assert!(!p.presumed_up(m[2], t0, ping), "never lost");
        p.lost.insert(m[2], t0);
        assert!(p.presumed_up(m[2], t0 + ping, ping));
        assert!(!p.presumed_up(m[2], t0 + ping * 4, ping), "4 pings passed");
        // Member 1 still says it has a link to member 2: no confirmation.
        p.peer_links.insert(m[1], (0b101, t0 + ping));
        assert!(p.presumed_up(m[2], t0 + ping * 2, ping));
        // What it said before the loss does not count.
        p.peer_links.insert(m[1], (0b001, t0 - ping));
        assert!(p.presumed_up(m[2], t0 + ping * 2, ping));
        // Said after the loss: member 1 lost it too.
        p.peer_links.insert(m[1], (0b001, t0 + ping));
        assert!(!p.presumed_up(m[2], t0 + ping * 2, ping));
    }

    #[test]
    fn old_ids_are_forgotten_unless_linked_leading_or_holding() {
        let m = addrs(3);
        let mut p = Peers::new(m.clone());
        let old = Time::ZERO + Duration::from_secs(1);
        let new = Time::ZERO + Duration::from_secs(100);
        for id in ["gone", "linked", "leader", "holder", "fresh"] {
            let t = if id == "fresh" { new } else { old };
            p.heard.insert(Id::from(id), t);
        }
        p.links.insert(PeerId(1), link(m[1], Some("linked"), false));
        let leaders = [Id::from("leader")];
        p.forget_old(Time::ZERO + Duration::from_secs(50), &leaders, |id| {
            &**id == "holder"
        });
        let kept: Vec<&str> = p.heard.keys().map(|k| &**k).collect();
        assert_eq!(kept, ["fresh", "holder", "leader", "linked"]);
    }
}
