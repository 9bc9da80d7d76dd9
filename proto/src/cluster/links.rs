//! Links, pings, and the two kinds of evidence of liveness (docs/cluster.md
//! "Links and liveness"): when a peer was last *heard*, and the send time of
//! the latest ping it *answered*.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use super::{Contact, Id, PeerId};
use crate::core::{Core, InputError, Output};
use crate::time::{Now, Time};
use crate::wire::Message;

/// Pings awaiting an answer on one link, at most.
const MAX_PINGS: usize = 64;

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
        if self.cluster.links.contains_key(&peer) {
            return Err(InputError::PeerAlreadyUp(peer));
        }
        let c = &self.cluster;
        let why = if !c.multi {
            Some("this agent is not in a cluster")
        } else if !c.members.contains(&addr) || Some(addr) == c.addr {
            Some("its address is not another member's")
        } else if name == c.name || c.links.values().any(|l| l.name == name && !l.closing) {
            Some("its name is taken")
        } else {
            None
        };
        let closing = why.is_some();
        if let Some(why) = why {
            log::warn!("link {peer} from {name} ({addr}) closed: {why}");
            self.out.push_back(Output::PeerClose { peer });
        }
        self.cluster.links.insert(
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
            self.send(peer, started);
        }
        Ok(())
    }

    pub(crate) fn peer_down(&mut self, now: Now, peer: PeerId) -> Result<(), InputError> {
        let Some(link) = self.cluster.links.remove(&peer) else {
            return Err(InputError::UnknownPeer(peer));
        };
        log::info!("link to {} ({}) is down", link.name, link.addr);
        if link.id.is_some() && !link.closing {
            self.cluster.lost.insert(link.addr, now.mono);
        }
        // What it said of its links was said over this link.
        self.cluster.peer_links.remove(&link.addr);
        self.maybe_elect(now);
        Ok(())
    }

    pub(crate) fn peer_message(
        &mut self,
        now: Now,
        peer: PeerId,
        msg: Message,
    ) -> Result<(), InputError> {
        let Some(link) = self.cluster.links.get(&peer) else {
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
            self.cluster.heard.insert(id.clone(), now.mono);
        }
        // Any epoch a peer names, current or not, bounds the next one from
        // below (a conductor must draw past every epoch fences came from).
        if let Some(epoch) = msg.get_str("epoch").and_then(|v| v.parse().ok()) {
            self.note_epoch_seen(now, epoch);
            // Every `epoch=` a peer sends is the one it is in: one later
            // than the locks were carried from says it left that epoch.
            self.cluster.carried.left(addr, epoch, now.mono);
        }
        let result = match (msg.command.as_str(), from) {
            ("LOCKSTARTED", _) => self.on_started(now, peer, &msg),
            ("LOCKPING", _) => {
                self.on_ping(now, peer, &msg);
                Ok(())
            }
            (_, None) => Err(super::wire::Bad("LOCKSTARTED first")),
            ("LOCKPONG", Some(from)) => self.on_pong(now, peer, &from, &msg),
            ("LOCKLEADERS", Some(_)) => self.on_leaders(now, &msg),
            ("LOCKTICKETS", Some(from)) => self.on_tickets(now, &from, &msg),
            (cmd, Some(from)) => self.on_lock_message(now, &from, cmd, &msg),
        };
        if let Err(super::wire::Bad(what)) = result {
            let name = self
                .cluster
                .links
                .get(&peer)
                .map_or("?", |l| l.name.as_str());
            log::warn!("{} from {name} dropped: bad or missing {what}", msg.command);
        }
        Ok(())
    }

    pub(crate) fn send(&mut self, peer: PeerId, msg: Message) {
        self.out.push_back(Output::PeerSend { peer, msg });
    }

    /// Sends to the agent with id `id`, if a link to it is up.
    pub(crate) fn send_to(&mut self, id: &str, msg: Message) -> bool {
        match self.cluster.link_of(id) {
            Some(peer) => {
                self.send(peer, msg);
                true
            }
            None => false,
        }
    }

    fn on_ping(&mut self, now: Now, peer: PeerId, msg: &Message) {
        let Some(serial) = msg.get("serial") else {
            return;
        };
        let asker = self.cluster.links.get(&peer).and_then(|l| l.id.clone());
        let active = asker.is_some_and(|a| self.answers_active(&a));
        let mut pong = Message::new("LOCKPONG").with("serial", serial);
        pong.set_u64("epoch", self.cluster.epoch);
        pong.set_u64("view", self.cluster.view);
        pong.set_u64("wall", now.wall.0 / 1000);
        pong.set("active", if active { "1" } else { "0" });
        pong.set_u64("links", self.cluster.links_mask());
        // What is left of this leader's lock-delay: the homes that are
        // not leaders learn from it that nothing can be granted yet.
        let delay_until = self.cluster.leading.as_ref().and_then(|l| l.delay_until);
        if let Some(left) = delay_until.map(|d| d.saturating_since(now.mono)) {
            if !left.is_zero() {
                pong.set_u64("delay", left.as_micros() as u64);
            }
        }
        self.send(peer, pong);
    }

    fn on_pong(
        &mut self,
        now: Now,
        peer: PeerId,
        from: &Id,
        msg: &Message,
    ) -> Result<(), super::wire::Bad> {
        let serial = super::wire::u64_of(msg, "serial")?;
        let epoch = super::wire::u64_of(msg, "epoch")?;
        let active = msg.get("active") == Some(b"1");
        let view = msg
            .get_str("view")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        // How far its wall clock is ahead of ours (ms; the answer's delay
        // makes it look a little behind).
        let link = self.cluster.links.get_mut(&peer).expect("link is up");
        link.ahead = wall_ahead(now, msg);
        if let Some(mask) = msg.get_str("links").and_then(|v| v.parse::<u64>().ok()) {
            let addr = link.addr;
            // This pong may confirm a member gone whose link is presumed to
            // be redialling; or, when its sender is no longer linked to a
            // member (it lost or closed that link), it may end this agent's
            // wait for a lower member that conducts. Elect now, not at the
            // next tick: a member back by then (a pause that ends, a
            // restart) is counted again while its locks' grace runs.
            let c = &self.cluster;
            let waiting = c.lost.keys().any(|a| c.presumed_up(*a, now.mono));
            let unlinked = c.peer_links.get(&addr).is_some_and(|(m, _)| *m & !mask != 0);
            self.cluster.peer_links.insert(addr, (mask, now.mono));
            if waiting || unlinked {
                self.maybe_elect(now);
            }
        }
        let link = self.cluster.links.get_mut(&peer).expect("link is up");
        // Pings are answered in order (FIFO link): older unanswered ones
        // were lost with nothing, drop them.
        let mut sent = None;
        while let Some((s, at)) = link.pings.pop_front() {
            if s == serial {
                sent = Some(at);
                break;
            }
        }
        let Some(sent) = sent else { return Ok(()) };
        let c = self.cluster.contact.entry(from.clone()).or_insert(Contact {
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
        let acting_here = active && c.in_view(self.cluster.epoch, self.cluster.view);
        // Counted from its arrival: never shorter than what is left.
        c.delay_until = msg
            .get_str("delay")
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|d| *d > 0)
            .map(|d| now.mono + Duration::from_micros(d));
        self.note_epoch_seen(now, epoch);
        if acting_here {
            self.state_received(from);
        }
        Ok(())
    }

    /// Every `ping_interval`: ping every link, close silent ones, unless
    /// this agent itself was `stalled` since the last round: then every
    /// link gets this round to be heard (its messages wait to be read).
    pub(crate) fn ping_all(&mut self, now: Now, stalled: bool) {
        let timeout = self.cluster.cfg.peer_timeout;
        let peers: Vec<PeerId> = self.cluster.links.keys().copied().collect();
        for peer in peers {
            let link = self.cluster.links.get_mut(&peer).expect("listed");
            if link.closing {
                continue;
            }
            let heard = link
                .id
                .as_ref()
                .and_then(|id| self.cluster.heard.get(id).copied());
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
            self.cluster.ping_serial += 1;
            let serial = self.cluster.ping_serial;
            if link.pings.len() >= MAX_PINGS {
                link.pings.pop_front();
            }
            link.pings.push_back((serial, now.mono));
            let mut ping = Message::new("LOCKPING");
            ping.set_u64("serial", serial);
            self.send(peer, ping);
        }
    }

    /// Forgets what was heard of ids silent for long (agents restarted
    /// since, with a new id): bounded by the members' restarts otherwise.
    pub(crate) fn forget_old_ids(&mut self, now: Now) {
        let c = &mut self.cluster;
        let keep = c.cfg.stretch(c.cfg.grace) * 4 + c.cfg.peer_timeout;
        let cutoff = now.mono - keep;
        let in_use: std::collections::BTreeSet<Id> = c
            .links
            .values()
            .filter_map(|l| l.id.clone())
            .chain(c.leaders.iter().cloned())
            .collect();
        let held = |id: &Id| {
            c.leading
                .as_ref()
                .is_some_and(|l| l.by_home.contains_key(id))
        };
        c.heard
            .retain(|id, t| *t >= cutoff || in_use.contains(id) || held(id));
        c.contact
            .retain(|id, k| k.sent >= cutoff || in_use.contains(id));
    }

    /// Whether this agent is an acting leader: ready in its epoch and
    /// answered in it by a quorum (itself included) within `peer_timeout`.
    pub(crate) fn acting(&self, now: Time) -> bool {
        let c = &self.cluster;
        if !c.leading.as_ref().is_some_and(|l| l.ready) {
            return false;
        }
        let since = now - c.cfg.peer_timeout;
        let answered = c
            .contact
            .values()
            .filter(|k| k.in_view(c.epoch, c.view) && k.sent >= since)
            .count();
        answered + 1 >= c.quorum
    }

    /// The pong's `active` flag for `asker`: acting, and `asker`'s report
    /// is part of this epoch's state (a home whose held locks the epoch
    /// does not know must not be kept in contact: it has to revoke).
    fn answers_active(&self, asker: &Id) -> bool {
        let Some(l) = self.cluster.leading.as_ref() else {
            return false;
        };
        l.ready && l.reporters.contains(asker) && self.acting(self.last_now)
    }

    /// Whether `leader` answered a ping in this view within `peer_timeout`
    /// but none as acting for `window`: it lost part of the handover (its
    /// state, or the news that this agent's report counts).
    pub(crate) fn answers_without_acting(&self, leader: &Id, now: Time, window: Duration) -> bool {
        let c = &self.cluster;
        c.contact.get(leader).is_some_and(|k| {
            k.in_view(c.epoch, c.view)
                && k.sent + c.cfg.peer_timeout >= now
                && k.active_sent.is_none_or(|a| a + window <= now)
        })
    }

    /// Home: the latest time at which a majority of this epoch's leaders
    /// were acting and answering this agent.
    pub(crate) fn contact_time(&self, now: Time) -> Option<Time> {
        let c = &self.cluster;
        let mut times: Vec<Time> = Vec::with_capacity(c.leaders.len());
        for leader in &c.leaders {
            if *leader == c.me {
                let counted = c
                    .leading
                    .as_ref()
                    .is_some_and(|l| l.ready && l.reporters.contains(&c.me));
                if counted && self.acting(now) {
                    times.push(now);
                }
            } else if let Some(k) = c.contact.get(leader) {
                if k.in_view(c.epoch, c.view) {
                    if let Some(a) = k.active_sent {
                        times.push(a);
                    }
                }
            }
        }
        let k = c.leader_majority();
        if c.leaders.is_empty() || times.len() < k {
            return None;
        }
        times.sort_unstable_by(|a, b| b.cmp(a));
        Some(times[k - 1])
    }
}

/// How far the sender's wall clock (`wall=`, ms) is ahead of ours; never
/// more than [`MAX_EPOCH_AHEAD`](super::persist::MAX_EPOCH_AHEAD) (a
/// message saying more is refused before it gets here).
pub(crate) fn wall_ahead(now: Now, msg: &Message) -> u64 {
    msg.get_str("wall")
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0, |w| {
            w.min(super::persist::epoch_limit(now))
                .saturating_sub(now.wall.0 / 1000)
        })
}
