//! Links, pings, and the two kinds of evidence of liveness (docs/cluster.md
//! "Links and liveness"): when a peer was last *heard*, and the send time of
//! the latest ping it *answered*.
//!
//! This file holds the part and its own logic; what the core does with it
//! on each message and tick is in `core/cluster/links.rs`.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use super::{Contact, Id};
use crate::time::{Now, Time};
use crate::vocab::PeerId;

/// Pings awaiting an answer on one link, at most.
pub(crate) const MAX_PINGS: usize = 64;

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
    /// The smoothed round trip of each link's pings (RFC 6298's SRTT).
    pub rtt: BTreeMap<PeerId, Duration>,
    /// When each member was last heard over a link, kept after it is
    /// down (for `INFO` and `METRICS`): one entry per member at most.
    pub heard_at: BTreeMap<SocketAddr, Time>,
    /// Some link's latest ping was answered as not acting (`Link::reanswer`).
    pub reanswer_due: bool,
}

/// The state of the link to a member, as `INFO` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkState {
    /// Up, its agent known.
    Up,
    /// Up, its `LOCKSTARTED` not arrived yet.
    Starting,
    /// No link.
    Down,
}

impl LinkState {
    /// The word of `INFO peers=`.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkState::Up => "up",
            LinkState::Starting => "starting",
            LinkState::Down => "down",
        }
    }
}

/// What this agent knows of one other member's link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PeerView<'a> {
    pub addr: SocketAddr,
    /// Its server name, while a link is up.
    pub name: Option<&'a str>,
    pub state: LinkState,
    pub heard: Option<Time>,
    pub rtt: Option<Duration>,
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
            rtt: BTreeMap::new(),
            heard_at: BTreeMap::new(),
            reanswer_due: false,
        }
    }

    /// A ping on link `peer` was answered after `sample`: the smoothed
    /// round trip moves an eighth of the way to it.
    pub fn note_rtt(&mut self, peer: PeerId, sample: Duration) {
        let srtt = match self.rtt.get(&peer) {
            Some(old) => (*old * 7 + sample) / 8,
            None => sample,
        };
        self.rtt.insert(peer, srtt);
    }

    /// Every other member's link, in the members' order (`me` is this
    /// agent's own `listen` address).
    pub fn views(&self, me: Option<SocketAddr>) -> Vec<PeerView<'_>> {
        let others = self.members.iter().filter(|a| Some(**a) != me);
        others
            .map(|&addr| {
                let link = (self.links.iter()).find(|(_, l)| l.addr == addr && !l.closing);
                let state = match link {
                    Some((_, l)) if l.id.is_some() => LinkState::Up,
                    Some(_) => LinkState::Starting,
                    None => LinkState::Down,
                };
                PeerView {
                    addr,
                    name: link.map(|(_, l)| l.name.as_str()),
                    state,
                    heard: self.heard_at.get(&addr).copied(),
                    rtt: link.and_then(|(p, _)| self.rtt.get(p).copied()),
                }
            })
            .collect()
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

    /// Bit i set: a link up (not closing, its agent known) to member i,
    /// that came up or was heard on since `lately`. A link that is up but
    /// silent is not said: the member at its end is not counted by a
    /// conductor here either, and a member that says it reaches a lower one
    /// holds back the next conductor (docs/cluster.md, "Elections").
    pub fn links_mask(&self, lately: Time) -> u64 {
        (self.links.values())
            .filter(|l| !l.closing && l.id.is_some())
            .filter(|l| {
                l.since >= lately || self.heard_at.get(&l.addr).is_some_and(|h| *h >= lately)
            })
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

    /// The name of the agent at the other end of link `peer`, for a log
    /// line (`?` when the link is gone).
    pub fn name_of(&self, peer: PeerId) -> &str {
        self.links.get(&peer).map_or("?", |l| l.name.as_str())
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
    /// The latest of this agent's pings it answered: serial and send
    /// time. An answer to it may come again, as acting (below).
    pub answered: Option<(u64, Time)>,
    /// The serial of its latest ping, when this agent answered it as not
    /// acting: once this agent acts, it answers that ping again.
    pub reanswer: Option<u64>,
    /// Its `LOCKSTARTED` said `add_vote=1`: a new ticket and the vote on
    /// it may go as one `ADDTICKET` with a `fence`.
    pub add_vote: bool,
    /// Its `LOCKSTARTED` said `home_grant=1`: as the home of a request, it
    /// delivers the grant on its own yes vote, so no `LOCKED` follows.
    pub home_grant: bool,
    /// Its `LOCKSTARTED` said `home_drop=1`: as the home of a request, it
    /// drops its own vote on it when it releases it, so no `DROPTICKET`
    /// follows its `UNLOCK`.
    pub home_drop: bool,
    /// When its last line was noted as heard (`heard`, `heard_at`): the
    /// lines of one read, handled at one time, are noted once.
    pub noted: Option<Time>,
}

impl Link {
    /// A link that came up at `since`, its agent not known yet (`id`
    /// comes with its `LOCKSTARTED`).
    pub fn new(name: String, addr: SocketAddr, since: Time) -> Link {
        Link {
            name,
            addr,
            id: None,
            pings: VecDeque::new(),
            closing: false,
            ahead: 0,
            since,
            answered: None,
            reanswer: None,
            add_vote: false,
            home_grant: false,
            home_drop: false,
            noted: None,
        }
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
            id: id.map(Id::from),
            closing,
            ..Link::new("x".to_owned(), addr, Time::ZERO)
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
        assert_eq!(p.links_mask(Time::ZERO), 0b0010);
        // Up since 0, heard last at 5 s: silent since is not said.
        p.heard_at.insert(m[1], Time::from_micros(5_000_000));
        assert_eq!(p.links_mask(Time::from_micros(5_000_000)), 0b0010);
        assert_eq!(p.links_mask(Time::from_micros(5_000_001)), 0);
        assert_eq!(p.member_bit(m[3]), 0b1000);
        assert_eq!(p.member_bit(SocketAddr::from(([10, 0, 0, 1], 1))), 0);
        assert_eq!(p.link_of("b"), Some(PeerId(1)));
        assert_eq!(p.link_of("d"), Some(PeerId(3)));
        assert_eq!(p.link_of("c"), None);
    }

    #[test]
    fn every_other_member_is_seen_with_its_link_state_and_a_smoothed_round_trip() {
        let m = addrs(4);
        let mut p = Peers::new(m.clone());
        p.links.insert(PeerId(1), link(m[1], Some("b"), false));
        p.links.insert(PeerId(2), link(m[2], None, false));
        p.note_rtt(PeerId(1), Duration::from_millis(8));
        p.note_rtt(PeerId(1), Duration::from_millis(16));
        let heard = Time::ZERO + Duration::from_secs(3);
        p.heard_at.insert(m[3], heard);
        let views = p.views(Some(m[0]));
        let states: Vec<_> = views.iter().map(|v| (v.addr, v.state)).collect();
        assert_eq!(
            states,
            [
                (m[1], LinkState::Up),
                (m[2], LinkState::Starting),
                (m[3], LinkState::Down)
            ]
        );
        assert_eq!(views[0].name, Some("x"));
        assert_eq!(views[0].rtt, Some(Duration::from_millis(9)));
        assert_eq!(views[1].rtt, None);
        assert_eq!((views[2].name, views[2].heard), (None, Some(heard)));
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
