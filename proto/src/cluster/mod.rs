//! The cluster: membership, liveness, elections, epochs, the lock protocol
//! between leaders, and the handover from one epoch to the next.
//!
//! The design and the argument for its safety are in `docs/cluster.md`.
//! The shell owns the links (dialing, handshake, framing); this module sees
//! a link once it is up and speaks the lock protocol over it.

mod batch;
pub mod config;
mod election;
mod follower;
mod handover;
mod home;
pub(crate) mod ids;
mod late;
mod leader;
mod links;
mod ltable;
mod merge;
pub(crate) mod msg;
pub mod persist;
mod status;
mod votes;
mod vouch;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use batch::{TicketRecord, ticket_records};
pub use config::{ClusterConfig, Plant};
pub use persist::Persisted;

use crate::time::{Now, Time};
use crate::vocab::{ObjectName, PeerId, TicketId};
use handover::Collect;
use links::Link;
use ltable::Leading;

/// An agent's id, `PP|RANDOM|ADDRESS|PID|NAME`.
pub(crate) type Id = Arc<str>;

/// The latest ping a peer answered.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Contact {
    /// When the answered ping was sent (local monotonic time).
    pub sent: Time,
    /// The epoch the peer answered in.
    pub epoch: u64,
    /// Send time of the latest ping it answered as an acting leader of
    /// that epoch.
    pub active_sent: Option<Time>,
    /// The digest of the leaders it has for that epoch.
    pub view: u64,
    /// When the lock-delay it announced with its latest answer ends
    /// (`delay=` in `LOCKPONG`, counted from when the answer arrived).
    pub delay_until: Option<Time>,
}

impl Contact {
    /// Whether it answered in epoch `epoch` with the same leaders: a
    /// restarted conductor, having forgotten, may name an epoch number
    /// again with other leaders, and the two must never be mixed up.
    pub fn in_view(&self, epoch: u64, view: u64) -> bool {
        self.epoch == epoch && self.view == view
    }
}

/// The digest of a leader list (`view=` in `LOCKPONG`).
pub(crate) fn view_of(leaders: &[Id]) -> u64 {
    let mut all = Vec::new();
    for l in leaders {
        all.extend_from_slice(l.as_bytes());
        all.push(b'\n');
    }
    ids::fnv1a64(&all)
}

/// A waiting request of this agent's clients, as sent to its owner.
#[derive(Clone, Debug)]
pub(crate) struct Submitted {
    pub object: ObjectName,
    pub epoch: u64,
    pub at: Time,
    /// `try=true`: failed as soon as nothing can grant it.
    pub try_once: bool,
}

/// The cluster part of a core.
#[derive(Debug)]
pub(crate) struct Cluster {
    pub cfg: ClusterConfig,
    pub me: Id,
    pub name: String,
    pub addr: Option<SocketAddr>,
    pub members: Vec<SocketAddr>,
    pub quorum: usize,
    pub start_wall_us: u64,
    /// When this agent started (local monotonic time): how long it has
    /// had its memory.
    pub born: Time,
    pub links: BTreeMap<PeerId, Link>,
    /// Current epoch and its leaders (ids, in order).
    /// Digest of `leaders` ([`view_of`]).
    pub view: u64,
    pub epoch: u64,
    pub leaders: Vec<Id>,
    pub epoch_since: Time,
    /// Largest epoch seen anywhere (to draw a larger one).
    pub max_epoch_seen: u64,
    pub heard: BTreeMap<Id, Time>,
    pub contact: BTreeMap<Id, Contact>,
    /// Set while this agent is a leader of the current epoch.
    pub leading: Option<Leading>,
    /// The last table this agent had as a ready leader, kept for reports.
    pub frozen: Option<(u64, Leading)>,
    /// Set while this agent is the collector of the current epoch.
    pub collect: Option<Collect>,
    /// The epoch this agent's report was accepted for... or sent for.
    pub report_sent: Option<(u64, Time)>,
    /// The collector's own report: its tickets wait here (by serial) for
    /// the `end` line it sends itself, instead of being written out and
    /// read back (a million held locks are seconds of that).
    pub own_report: Option<(u64, handover::OwnTickets)>,
    /// The collector's own copy of the state it built, and when: installed
    /// at the first call of a later time, once the copies for the other
    /// leaders went out (the shell writes between two calls of different
    /// times).
    pub own_state: Option<(Time, handover::StateIn)>,
    pub own_serial: u64,
    /// How much longer than `peer_timeout` to wait before reporting again:
    /// a report of a million locks costs every agent on its way seconds,
    /// and reports must not follow each other faster than they are read.
    pub report_pause: Duration,
    pub submitted: BTreeMap<TicketId, Submitted>,
    /// Home: when contact with a majority of acting leaders last held,
    /// carried across epoch changes.
    pub last_ok: Option<Time>,
    /// Home: whether it was found in contact since the last tick's check
    /// (for the revocation's edge).
    pub was_in_contact: bool,
    /// Home: bit i = leader i stopped vouching for the locks it owns.
    pub lapsed_owners: u8,
    /// Home: the locks held when this agent moved to this epoch, with what
    /// their former owner vouched for and who it was (`vouch.rs`).
    pub carried: vouch::Carried,
    /// Largest fence this agent knows of.
    pub fence_floor: u64,
    /// What is on disk, or asked to be written ([`persist`]).
    pub persisted: Persisted,
    /// The epoch this agent had adopted when it last stopped (from its
    /// record): it never adopts a smaller one (docs/cluster.md, S2).
    pub min_epoch: u64,
    pub far_warnings: persist::FarWarnings,
    pub next_tick: Time,
    pub ping_serial: u64,
    pub last_election: Option<Time>,
    /// When this agent last found it had not run for more than a
    /// `ping_interval` (paused, or busy): it does not conduct for a
    /// `peer_timeout` after, as its links may be coming back.
    pub woke: Option<Time>,
    /// The current leaders this agent had a link to since it moved to the
    /// current epoch: one of them not connected now is gone; another one
    /// counts as gone only a `peer_timeout` after the move (its link may
    /// not be up yet, e.g. after this agent was paused).
    pub linked_leaders: std::collections::BTreeSet<Id>,
    /// Members whose link went down, and when: one may be back in a moment
    /// (a broken connection redials at once), so no election is held for it
    /// until another member confirms it lost it too, or for
    /// `4 × ping_interval` (docs/cluster.md, "Elections").
    pub lost: BTreeMap<SocketAddr, Time>,
    /// What each peer last said of its own links (`links=` of `LOCKPONG`:
    /// bit i = a link up to member i), and when it arrived.
    pub peer_links: BTreeMap<SocketAddr, (u64, Time)>,
    /// Collector: the state of this epoch as sent, and the leaders that
    /// have not answered as acting in it yet: each gets it again when its
    /// link comes up (it had no link, or lost part of the state).
    pub state_pending: Option<(u64, Vec<Id>, Vec<msg::PeerMsg>)>,
    /// Home: releases (`UNLOCK`) for owners of this epoch whose link was
    /// down, sent when it comes up.
    pub unsent: Vec<(Id, msg::PeerMsg)>,
    /// When a link of this agent last came up (its peer's `LOCKSTARTED`).
    pub last_link_up: Option<Time>,
    /// When this agent last logged what the first election waits for.
    pub waiting_logged: Option<Time>,
    /// Messages of the current epoch that arrived before this leader was
    /// ready, replayed when it is.
    pub early: Vec<(Id, msg::PeerMsg)>,
    /// Messages from this agent to itself (its home part to its leader
    /// part and back), delivered after the current input.
    pub local: std::collections::VecDeque<msg::PeerMsg>,
    /// The epoch before the current one and its leaders, for the report.
    pub prev_epoch: u64,
    pub prev_leaders: Vec<Id>,
}

impl Cluster {
    pub fn new(cfg: &ClusterConfig, name: &str, now: Now) -> Cluster {
        let members = cfg.members();
        let n = members.len().max(1);
        let mut rng = ids::SplitMix64::new(cfg.seed);
        let kept = if cfg.plant == Plant::IgnorePersisted {
            Persisted::default()
        } else {
            cfg.persisted
        };
        let me: Id = ids::make_id(
            cfg.candidate_priority,
            rng.next_u32(),
            cfg.listen,
            cfg.pid,
            name,
        )
        .into();
        Cluster {
            cfg: cfg.clone(),
            me,
            name: name.to_owned(),
            addr: cfg.listen,
            members,
            quorum: n / 2 + 1,
            start_wall_us: now.wall.0,
            born: now.mono,
            links: BTreeMap::new(),
            epoch: 0,
            view: 0,
            leaders: Vec::new(),
            epoch_since: now.mono,
            max_epoch_seen: kept.epoch,
            heard: BTreeMap::new(),
            contact: BTreeMap::new(),
            leading: None,
            frozen: None,
            collect: None,
            report_sent: None,
            own_report: None,
            own_state: None,
            own_serial: 0,
            report_pause: Duration::ZERO,
            submitted: BTreeMap::new(),
            last_ok: None,
            was_in_contact: false,
            lapsed_owners: 0,
            carried: vouch::Carried::default(),
            fence_floor: kept.fence,
            persisted: cfg.persisted,
            min_epoch: kept.epoch,
            far_warnings: persist::FarWarnings::default(),
            next_tick: now.mono,
            ping_serial: 0,
            last_election: None,
            woke: None,
            linked_leaders: std::collections::BTreeSet::new(),
            lost: BTreeMap::new(),
            peer_links: BTreeMap::new(),
            last_link_up: None,
            state_pending: None,
            unsent: Vec::new(),
            waiting_logged: None,
            early: Vec::new(),
            local: std::collections::VecDeque::new(),
            prev_epoch: 0,
            prev_leaders: Vec::new(),
        }
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
    /// `4 × ping_interval` did not pass.
    pub fn presumed_up(&self, addr: SocketAddr, now: Time) -> bool {
        let Some(lost) = self.lost.get(&addr) else {
            return false;
        };
        if now >= *lost + self.cfg.ping_interval * 4 {
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

    /// The leaders needed for a majority of this epoch's leaders.
    pub fn leader_majority(&self) -> usize {
        self.leaders.len() / 2 + 1
    }

    pub fn is_leader(&self) -> bool {
        self.leaders.contains(&self.me)
    }

    /// The index of the leader that owns `object` in the current epoch.
    pub fn owner_index(&self, object: &[u8]) -> Option<usize> {
        if self.leaders.is_empty() {
            return None;
        }
        Some((ids::fnv1a64(object) % self.leaders.len() as u64) as usize)
    }

    /// The up link to the agent with id `id`.
    pub fn link_of(&self, id: &str) -> Option<PeerId> {
        self.links
            .iter()
            .find(|(_, l)| l.id.as_deref() == Some(id))
            .map(|(p, _)| *p)
    }

    /// The server name in an id.
    pub fn name_of(id: &str) -> &str {
        id.rsplit('|').next().unwrap_or(id)
    }
}
