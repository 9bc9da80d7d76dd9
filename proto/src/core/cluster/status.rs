//! What an agent says of itself (docs/cluster.md "What an agent tells its
//! clients"): whether a name can be granted now and, when not, why; the
//! lock-delay left; the members the first election waits for.
//!
//! `busy` means a holder exists. Everything that keeps *any* grant from
//! happening (no leaders, no contact, an owner that does not act, a
//! lock-delay) is `unavailable`, with its reason, and a `try=true`
//! request hears it at once instead of waiting for its deadline.

use std::net::SocketAddr;
use std::time::Duration;

use crate::cluster::{Cluster, Id};
use crate::core::Core;
use crate::local::replies;
use crate::time::{Now, Time};
use crate::vocab::Refusal;
use crate::vocab::{ObjectName, TicketId};

/// The agent logs what the first election waits for at most this often.
const WAITING_LOG_EVERY: Duration = Duration::from_secs(10);

/// The description of an `unavailable` during a lock-delay.
pub(super) fn lock_delay_reason(left: Duration) -> String {
    format!(
        "lock-delay: the new leaders wait {:.1} s more for locks the previous ones may still hold",
        left.as_secs_f64()
    )
}

/// Why nothing can be granted now (docs/cluster.md "What an agent tells
/// its clients"): [`NotReady::reason`] is the `reason` of `LOCKWAITING`
/// (snaplock(7)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NotReady {
    /// The agent is stopping.
    Stopping,
    /// No election has ended yet.
    NoLeaders,
    /// The new leaders wait until then for locks the previous ones may
    /// still hold.
    LockDelay(Time),
    /// No contact with a majority of acting leaders.
    NoQuorum,
    /// Leader `i` of the epoch (the owner, or any when no object is
    /// named) does not act: a handover runs, or it is gone.
    Changing(usize),
}

impl NotReady {
    /// Its word on the wire.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            NotReady::Stopping => "stopping",
            NotReady::NoLeaders => "no-leaders",
            NotReady::LockDelay(_) => "lock-delay",
            NotReady::NoQuorum => "no-quorum",
            NotReady::Changing(_) => "leaders-changing",
        }
    }
}

fn addrs(list: &[SocketAddr]) -> String {
    list.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

impl Core {
    /// Whether a majority of acting leaders answered within `grace`, as
    /// of the last call (the contact of docs/cluster.md, without noting
    /// it for the revocation's edge).
    pub(crate) fn in_contact_now(&self) -> bool {
        let now = self.last_now;
        let last = match (self.cluster.contact_time(now), self.cluster.home.last_ok) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        last.is_some_and(|t| now < t + self.cluster.cfg.grace)
    }

    /// Whether `leader`, a leader of this view, acts for this agent: it
    /// answered a ping as an acting leader within `peer_timeout` (this
    /// agent itself: it is a ready, acting leader).
    fn leader_acts(&self, leader: &Id, now: Time) -> bool {
        let c = &self.cluster;
        if *leader == c.me {
            return c.leader.table.as_ref().is_some_and(|l| l.ready) && self.cluster.acting(now);
        }
        c.peers
            .contact
            .get(leader)
            .filter(|k| k.in_view(c.epoch.number, c.epoch.view))
            .and_then(|k| k.active_sent)
            .is_some_and(|a| now < a + c.cfg.peer_timeout)
    }

    /// When the lock-delay that `leader` runs ends, as far as this agent
    /// knows: its own table's, or what the leader's latest pong said.
    fn delay_of(&self, leader: &Id) -> Option<Time> {
        let c = &self.cluster;
        if *leader == c.me {
            return c.leader.table.as_ref().and_then(|l| l.delay_until);
        }
        c.peers
            .contact
            .get(leader)
            .filter(|k| k.in_view(c.epoch.number, c.epoch.view))
            .and_then(|k| k.delay_until)
    }

    /// What is left of the lock-delay of this epoch's leaders (they all
    /// install the same state, lock-delay included); zero when none runs.
    pub(crate) fn lock_delay_left(&self) -> Duration {
        let now = self.last_now;
        self.cluster
            .epoch
            .leaders
            .iter()
            .filter_map(|l| self.delay_of(l))
            .max()
            .map_or(Duration::ZERO, |t| t.saturating_since(now))
    }

    /// Why nothing can be granted on `object` now (any fresh name when
    /// `None`), or `None` when it can. `LOCKSTATUS`, `INFO ready`, and the
    /// `unavailable` answers to `try=true` and at deadlines come from here.
    pub(crate) fn unavailable(&self, object: Option<&[u8]>) -> Option<String> {
        self.not_ready(object).map(|why| self.describe(&why))
    }

    /// Why a `try=true` request on `object` cannot be granted now: what
    /// [`unavailable`](Self::unavailable) says, or that this agent has no
    /// link to the object's owner. Such an owner still counts as acting
    /// for up to a `peer_timeout` after its last answer, but a request
    /// could not even be sent to it (it goes when the link is up again),
    /// and a try request does not wait for that.
    pub(crate) fn try_unavailable(&self, object: &[u8]) -> Option<String> {
        self.unavailable(Some(object)).or_else(|| {
            let c = &self.cluster;
            let owner = &c.epoch.leaders[c.owner_index(object)?];
            (*owner != c.me && c.peers.link_of(owner).is_none()).then(|| {
                format!(
                    "no link to {}, the owner of this object in epoch {}",
                    Cluster::name_of(owner),
                    c.epoch.number
                )
            })
        })
    }

    /// [`unavailable`](Self::unavailable) without its description: the
    /// readiness pushed to `LOCKSTATUS` connections and the `reason` of
    /// `LOCKWAITING` are checked after every input, so this allocates
    /// nothing and looks at the epoch's leaders (at most three) only.
    pub(crate) fn not_ready(&self, object: Option<&[u8]>) -> Option<NotReady> {
        if self.stopping {
            return Some(NotReady::Stopping);
        }
        let c = &self.cluster;
        if !self.authority.is_cluster() {
            return None;
        }
        let now = self.last_now;
        if c.epoch.leaders.is_empty() {
            return Some(NotReady::NoLeaders);
        }
        // First: nothing else can change before it ends.
        let left = self.lock_delay_left();
        if !left.is_zero() {
            return Some(NotReady::LockDelay(now + left));
        }
        if !self.in_contact_now() {
            return Some(NotReady::NoQuorum);
        }
        let changing = match object.and_then(|o| c.owner_index(o)) {
            Some(i) => (!self.leader_acts(&c.epoch.leaders[i], now)).then_some(i),
            None => {
                (0..c.epoch.leaders.len()).find(|&i| !self.leader_acts(&c.epoch.leaders[i], now))
            }
        };
        changing.map(NotReady::Changing)
    }

    /// The description of `why`, as the log and `unavailable` answers say it.
    fn describe(&self, why: &NotReady) -> String {
        let c = &self.cluster;
        match *why {
            NotReady::Stopping => "the agent is stopping".to_owned(),
            NotReady::NoLeaders => {
                let waiting = self.waiting_for();
                if waiting.is_empty() {
                    "no leaders yet: no election has ended".to_owned()
                } else {
                    format!("no leaders yet: {}", self.election_waits(&waiting))
                }
            }
            NotReady::LockDelay(until) => lock_delay_reason(until.saturating_since(self.last_now)),
            NotReady::NoQuorum => format!(
                "no quorum: {} of the {} leaders of epoch {} have not answered this agent as acting leaders for {:?}",
                c.leader_majority(),
                c.epoch.leaders.len(),
                c.epoch.number,
                c.cfg.grace
            ),
            NotReady::Changing(i) => format!(
                "the leaders are changing: {} has not answered as an acting leader of epoch {} for {:?}",
                Cluster::name_of(&c.epoch.leaders[i]),
                c.epoch.number,
                c.cfg.peer_timeout
            ),
        }
    }

    /// The members the first election waits for: with no leaders yet and
    /// fewer members connected than an election needs, those not
    /// connected. (The rule is `maybe_elect`'s: before any epoch was
    /// heard of, all members of a cluster of at most three, else a
    /// quorum.)
    pub(crate) fn waiting_for(&self) -> Vec<SocketAddr> {
        let c = &self.cluster;
        if !self.authority.is_cluster() || !c.epoch.leaders.is_empty() {
            return Vec::new();
        }
        let up: Vec<SocketAddr> = c
            .peers
            .links
            .values()
            .filter(|l| !l.closing && l.id.is_some())
            .map(|l| l.addr)
            .collect();
        let needed = if c.epoch.max_seen == 0 {
            c.peers.election_quorum()
        } else {
            c.peers.quorum
        };
        if up.len() + 1 >= needed {
            return Vec::new(); // enough: the conductor elects
        }
        c.peers
            .members
            .iter()
            .filter(|a| Some(**a) != c.addr && !up.contains(a))
            .copied()
            .collect()
    }

    /// Every tick: says in the log, at most every [`WAITING_LOG_EVERY`],
    /// what the first election waits for.
    pub(crate) fn log_waiting(&mut self, now: Now) {
        let waiting = self.waiting_for();
        if waiting.is_empty() {
            self.cluster.epoch.waiting_logged = None;
            return;
        }
        if self
            .cluster
            .epoch
            .waiting_logged
            .is_some_and(|t| now.mono < t + WAITING_LOG_EVERY)
        {
            return;
        }
        self.cluster.epoch.waiting_logged = Some(now.mono);
        log::warn!("no leaders: {}", self.election_waits(&waiting));
    }

    /// What an election waits for, `waiting` being the members not
    /// connected: the log line and the `unavailable` answers say the same.
    fn election_waits(&self, waiting: &[SocketAddr]) -> String {
        let c = &self.cluster;
        if c.epoch.max_seen == 0 && c.peers.members.len() <= 3 {
            format!(
                "the first election of a cluster of {} needs every member connected; waiting for {}",
                c.peers.members.len(),
                addrs(waiting)
            )
        } else {
            format!(
                "an election needs {} members connected; waiting for one of {}",
                c.peers.quorum,
                addrs(waiting)
            )
        }
    }

    /// Every tick: a `try=true` request still waiting for its owner's
    /// answer fails `unavailable` as soon as nothing can grant it (its
    /// owner stopped acting or its link is down, contact was lost, a
    /// lock-delay began).
    pub(crate) fn fail_stuck_tries(&mut self) {
        let tries: Vec<(TicketId, ObjectName)> = self
            .cluster
            .home
            .submitted
            .iter()
            .filter(|(_, s)| s.try_once)
            .map(|(id, s)| (*id, s.object.clone()))
            .collect();
        for (id, name) in tries {
            if let Some(why) = self.try_unavailable(&name) {
                self.fail_try(&name, id, why);
            }
        }
    }

    /// Fails waiting request `id` with `unavailable` (its owner is told).
    pub(crate) fn fail_try(&mut self, name: &ObjectName, id: TicketId, why: String) {
        let Some(t) = self.take_ticket(name, id) else {
            return;
        };
        if let Some(owner) = t.owner {
            let why = Refusal::new("unavailable", why);
            self.reply(owner, replies::lock_failed(name, Some(&t.key), t.tag, &why));
        }
    }
}
