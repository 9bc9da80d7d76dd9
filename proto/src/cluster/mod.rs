//! The cluster: membership, liveness, elections, epochs, the lock protocol
//! between leaders, and the handover from one epoch to the next.
//!
//! The design and the argument for its safety are in `docs/cluster.md`.
//! The shell owns the links (dialing, handshake, framing); this module sees
//! a link once it is up and speaks the lock protocol over it.

pub(crate) mod batch;
pub mod config;
pub(crate) mod election;
pub(crate) mod handover;
pub(crate) mod home;
pub(crate) mod ids;
pub(crate) mod links;
pub(crate) mod ltable;
pub(crate) mod merge;
pub(crate) mod msg;
pub mod persist;
pub(crate) mod tx;
pub(crate) mod view;
pub(crate) mod votes;
pub(crate) mod vouch;

use std::net::SocketAddr;
use std::sync::Arc;

pub use batch::{TicketRecord, ticket_records};
pub use config::{ClusterConfig, Plant};
pub use persist::Persisted;

use crate::time::{Now, Time};
use crate::vocab::ObjectName;

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

/// The cluster part of a core: this agent's identity, and its parts, each
/// owning its own data (docs/architecture.md).
#[derive(Debug)]
pub(crate) struct Cluster {
    /// How this agent takes part in the cluster.
    pub cfg: ClusterConfig,
    /// This agent's id ([`ids::make_id`]), drawn at start.
    pub me: Id,
    /// Its `server_name`.
    pub name: String,
    /// Its `listen` address (none: not in a cluster).
    pub addr: Option<SocketAddr>,
    /// The members, their links and what they said of their liveness.
    pub peers: links::Peers,
    /// When it started, µs of its wall clock.
    pub start_wall_us: u64,
    /// When this agent started (local monotonic time): how long it has
    /// had its memory.
    pub born: Time,
    /// The current epoch, its leaders, and what elections need.
    pub epoch: election::Epoch,
    /// Reports, states and late reports of the current epoch.
    pub handover: handover::Handover,
    /// This agent's own clients' requests as the cluster sees them.
    pub home: home::Home,
    /// The epoch and fence on record, and the bounds on what peers claim.
    pub records: persist::Records,
    /// This agent as a leader: its table, the last one, early messages.
    pub leader: ltable::LeaderRole,
    /// When the cluster's housekeeping runs next (every `ping_interval`).
    pub next_tick: Time,
    /// Messages from this agent to itself (its home part to its leader
    /// part and back), delivered after the current input.
    pub local: std::collections::VecDeque<msg::PeerMsg>,
    /// The cluster-wide lists being gathered for clients.
    pub views: view::Views,
}

impl Cluster {
    pub fn new(cfg: &ClusterConfig, name: &str, now: Now) -> Cluster {
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
            peers: links::Peers::new(cfg.members()),
            start_wall_us: now.wall.0,
            born: now.mono,
            epoch: election::Epoch::new(now.mono, kept.epoch),
            handover: handover::Handover::default(),
            home: home::Home::default(),
            records: persist::Records {
                fence_floor: kept.fence,
                persisted: cfg.persisted,
                min_epoch: kept.epoch,
                far_warnings: persist::FarWarnings::default(),
            },
            leader: ltable::LeaderRole::default(),
            next_tick: now.mono,
            local: std::collections::VecDeque::new(),
            views: view::Views::default(),
        }
    }

    /// Whether this agent is an acting leader: ready in its epoch and
    /// answered in it by a quorum (itself included) within `peer_timeout`.
    pub(crate) fn acting(&self, now: Time) -> bool {
        if !self.leader.table.as_ref().is_some_and(|l| l.ready) {
            return false;
        }
        let since = now - self.cfg.peer_timeout;
        let answered = self
            .peers
            .contact
            .values()
            .filter(|k| k.in_view(self.epoch.number, self.epoch.view) && k.sent >= since)
            .count();
        answered + 1 >= self.peers.quorum
    }

    /// Whether `leader` answered a ping in this view within `peer_timeout`
    /// but none as acting for `window`: it lost part of the handover (its
    /// state, or the news that this agent's report counts).
    pub(crate) fn answers_without_acting(
        &self,
        leader: &Id,
        now: Time,
        window: std::time::Duration,
    ) -> bool {
        self.peers.contact.get(leader).is_some_and(|k| {
            k.in_view(self.epoch.number, self.epoch.view)
                && k.sent + self.cfg.peer_timeout >= now
                && k.active_sent.is_none_or(|a| a + window <= now)
        })
    }

    /// Home: the latest time at which a majority of this epoch's leaders
    /// were acting and answering this agent.
    pub(crate) fn contact_time(&self, now: Time) -> Option<Time> {
        // One per leader, at most MAX_LEADERS (elections choose three, and
        // LOCKLEADERS names no more): on the stack, not the heap.
        let mut times = [Time::default(); msg::MAX_LEADERS];
        let mut n = 0;
        for leader in self.epoch.leaders.iter().take(msg::MAX_LEADERS) {
            if *leader == self.me {
                let counted = self
                    .leader
                    .table
                    .as_ref()
                    .is_some_and(|l| l.ready && l.reporters.contains(&self.me));
                if counted && self.acting(now) {
                    times[n] = now;
                    n += 1;
                }
            } else if let Some(k) = self.peers.contact.get(leader) {
                if k.in_view(self.epoch.number, self.epoch.view) {
                    if let Some(a) = k.active_sent {
                        times[n] = a;
                        n += 1;
                    }
                }
            }
        }
        let k = self.leader_majority();
        if self.epoch.leaders.is_empty() || n < k {
            return None;
        }
        let times = &mut times[..n];
        times.sort_unstable_by(|a, b| b.cmp(a));
        Some(times[k - 1])
    }

    /// When the core must next run the cluster's housekeeping: its tick,
    /// or just after the time the collector's own copy of the state was
    /// built (installed at a later call), or, while the shell still writes
    /// the other leaders' copies, when that copy may wait no longer; and the
    /// next step of a report being written, or of an owner's saying a
    /// home's tickets again.
    pub fn next_deadline(&self) -> Time {
        let tick = (self.views.next_deadline()).map_or(self.next_tick, |d| d.min(self.next_tick));
        let tick = (self.handover.report_walk.as_ref()).map_or(tick, |w| w.next.min(tick));
        let tick =
            (self.leader.resend.values().map(|w| w.next).min()).map_or(tick, |n| n.min(tick));
        let held = (self.handover.own_state_held).filter(|_| self.state_backlogged());
        match (&self.handover.own_state, held) {
            (Some(_), Some(from)) => tick.min(from + handover::own_state_hold(&self.cfg)),
            (Some((at, _)), None) => tick.min(*at + std::time::Duration::from_micros(1)),
            (None, _) => tick,
        }
    }

    /// Whether the shell has yet to write part of the state this collector
    /// sent a leader of its epoch (`Handover::send_backlog`).
    pub(crate) fn state_backlogged(&self) -> bool {
        let h = &self.handover;
        !h.send_backlog.is_empty()
            && h.state_pending.as_ref().is_some_and(|(epoch, waiting, _)| {
                *epoch == self.epoch.number
                    && (waiting.iter())
                        .filter_map(|id| self.peers.link_of(id))
                        .any(|p| h.send_backlog.contains(&p))
            })
    }

    /// The leaders needed for a majority of this epoch's leaders.
    pub fn leader_majority(&self) -> usize {
        self.epoch.leaders.len() / 2 + 1
    }

    pub fn is_leader(&self) -> bool {
        self.epoch.leaders.contains(&self.me)
    }

    /// The index of the leader that owns `object` in the current epoch.
    /// Every variable of a namespace has the namespace's owner: the one
    /// leader that decides its transactions.
    pub fn owner_index(&self, object: &[u8]) -> Option<usize> {
        if self.epoch.leaders.is_empty() {
            return None;
        }
        let hashed = crate::vocab::split_var_object(object).map_or(object, |(ns, _)| ns);
        Some((ids::fnv1a64(hashed) % self.epoch.leaders.len() as u64) as usize)
    }

    /// [`Cluster::owner_index`] of a name whose hash is known (a
    /// variable's object, whose hash is kept as 0, is hashed here).
    pub fn owner_index_of(&self, name: &ObjectName) -> Option<usize> {
        if name.hash64() == 0 {
            return self.owner_index(name);
        }
        let n = self.epoch.leaders.len() as u64;
        (n > 0).then(|| (name.hash64() % n) as usize)
    }

    /// The server name in an id.
    pub fn name_of(id: &str) -> &str {
        id.rsplit('|').next().unwrap_or(id)
    }
}
