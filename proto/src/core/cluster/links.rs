//! Links as the core runs them: up, down, pings and pongs, dispatch of
//! peer messages by role, and the one send path ([`To`]).

use crate::cluster::links::{Link, MAX_PINGS, wall_ahead};
use crate::cluster::msg::{BadField, Known, PeerMsg, Pong, Role};
use crate::cluster::{Contact, Id};
use crate::core::{Core, InputError, Output};
use crate::time::{Now, Time};
use crate::vocab::{NameCache, ObjectName, PeerId};
use crate::wire::{self, Fields};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

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
                closing,
                ..Link::new(name, addr, now.mono)
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
        self.cluster.peers.rtt.remove(&peer);
        self.maybe_elect(now);
        Ok(())
    }

    /// A line of link `peer`: a plain line of a common command is read
    /// in place ([`wire::scan`]), any other parsed first.
    pub(crate) fn peer_line(
        &mut self,
        now: Now,
        peer: PeerId,
        line: &[u8],
    ) -> Result<(), InputError> {
        if let Some(mut scanned) = wire::scan(line).filter(|s| PeerMsg::is_common(s.command())) {
            return self.peer_message(now, peer, &mut scanned, |m, known| {
                PeerMsg::read_known(m, known)
            });
        }
        match wire::parse(line) {
            Ok(mut msg) => self.peer_message(now, peer, &mut msg, |m, _| PeerMsg::parse(m)),
            Err(e) => {
                if !self.cluster.peers.links.contains_key(&peer) {
                    return Err(InputError::UnknownPeer(peer));
                }
                let shown = String::from_utf8_lossy(&line[..line.len().min(80)]);
                self.close_link(peer, &format!("sent an unparsable line ({e}): {shown:?}"));
                Ok(())
            }
        }
    }

    /// A message of link `peer`, read by `read`.
    fn peer_message<F: Fields>(
        &mut self,
        now: Now,
        peer: PeerId,
        msg: &mut F,
        read: impl FnOnce(&mut F, &mut KnownHere<'_>) -> Result<Option<PeerMsg>, BadField>,
    ) -> Result<(), InputError> {
        let Some(link) = self.cluster.peers.links.get(&peer) else {
            return Err(InputError::UnknownPeer(peer));
        };
        if link.closing {
            return Ok(());
        }
        let from = link.id.clone();
        let addr = link.addr;
        let noted = link.noted == Some(now.mono);
        if self.refuse_far(now, peer, msg) {
            return Ok(());
        }
        // Noted once per time: what is noted is that time, and nothing
        // forgets an agent with a link (`Peers::forget_old`).
        if !noted {
            if let Some(id) = &from {
                match self.cluster.peers.heard.get_mut(id) {
                    Some(heard) => *heard = now.mono,
                    None => {
                        self.cluster.peers.heard.insert(id.clone(), now.mono);
                    }
                }
            }
            self.cluster.peers.heard_at.insert(addr, now.mono);
            if let Some(link) = self.cluster.peers.links.get_mut(&peer) {
                link.noted = Some(now.mono);
            }
        }
        // Any epoch a peer names, current or not, bounds the next one from
        // below (a conductor must draw past every epoch fences came from).
        if let Some(epoch) = msg.get("epoch").and_then(crate::vocab::parse_u64) {
            self.cluster.epoch.note_seen(epoch);
            // Every `epoch=` a peer sends is the one it is in: one later
            // than the locks were carried from says it left that epoch.
            self.cluster.home.carried.left(addr, epoch, now.mono);
        }
        let mut known = KnownHere {
            heard: &self.cluster.peers.heard,
            names: &mut self.names,
        };
        let result = match read(msg, &mut known) {
            Ok(Some(m)) => self.dispatch(now, peer, from, m),
            Ok(None) => {
                log::debug!("unknown peer command {} ignored", msg.command());
                Ok(())
            }
            Err(bad) => Err(bad),
        };
        if let Err(BadField(what)) = result {
            let name = self.cluster.peers.name_of(peer);
            log::warn!(
                "{} from {name} dropped: bad or missing {what}",
                msg.command()
            );
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
            Role::View => {
                self.on_view_message(now, from, m);
                Ok(())
            }
        }
    }

    /// Sends `msg` where `to` says; an `ADDTICKET` held back goes first, or
    /// with `msg` when that is the vote on its ticket.
    pub(crate) fn send(&mut self, to: To<'_>, msg: PeerMsg) {
        if let Some((mask, add)) = self.held_add.take() {
            match (&to, msg) {
                (To::Leaders(ask), PeerMsg::ActivateLock { at, fence }) if matches!(&add, PeerMsg::AddTicket { at: a, .. } if *a == at) =>
                {
                    return self.send_add_and_ask(mask, add, *ask, at, fence);
                }
                (_, msg) => {
                    self.send_now(To::Leaders(mask), add);
                    return self.send_now(to, msg);
                }
            }
        }
        self.send_now(to, msg);
    }

    /// Holds an owner's `ADDTICKET` to the leaders of `mask` until the next
    /// peer message this agent sends ([`send`](Self::send)): when that is
    /// the `ACTIVATELOCK` of the same ticket, a leader that said `add_vote=1`
    /// gets both as one line. A follower handles that line as the two
    /// messages one after the other, which is how the link would have
    /// brought them: nothing is sent between them, and a link that breaks
    /// loses both or neither (where the two lines could lose the second
    /// alone). So the grant's argument is unchanged.
    pub(crate) fn hold_add(&mut self, mask: u8, add: PeerMsg) {
        self.flush_add();
        debug_assert!(matches!(add, PeerMsg::AddTicket { fence: None, .. }));
        self.held_add = Some((mask, add));
    }

    /// Sends the `ADDTICKET` held back, if any.
    pub(crate) fn flush_add(&mut self) {
        if let Some((mask, add)) = self.held_add.take() {
            self.send_now(To::Leaders(mask), add);
        }
    }

    /// The ticket `add` to the leaders of `add_mask`, and the vote on it
    /// with `fence` to those of `ask_mask`: one line to each leader in both
    /// that takes it (`add_vote`), else each on its own, the ticket first.
    fn send_add_and_ask(
        &mut self,
        add_mask: u8,
        add: PeerMsg,
        ask_mask: u8,
        at: crate::cluster::msg::TicketAt,
        fence: u64,
    ) {
        let c = &self.cluster;
        // This agent's own bit, if set, names no link (`send_now` skips
        // it): left out, no copy of the ticket is made for nobody.
        let mine = (c.epoch.leaders.iter())
            .position(|l| *l == c.me)
            .map_or(0, |i| 1u8 << i);
        let (add_mask, ask_mask) = (add_mask & !mine, ask_mask & !mine);
        let both = (c.epoch.leaders.iter().enumerate())
            .filter(|(i, _)| add_mask & ask_mask & (1 << i) != 0)
            .filter(|(_, l)| {
                (c.peers.link_of(l))
                    .is_some_and(|p| c.peers.links.get(&p).is_some_and(|k| k.add_vote))
            })
            .fold(0u8, |m, (i, _)| m | 1 << i);
        if add_mask & !both != 0 {
            self.send_now(To::Leaders(add_mask & !both), add.clone());
        }
        if both != 0 {
            let mut merged = add;
            if let PeerMsg::AddTicket { fence: f, .. } = &mut merged {
                *f = Some(fence);
            }
            self.send_now(To::Leaders(both), merged);
        }
        if ask_mask & !both != 0 {
            self.send_now(
                To::Leaders(ask_mask & !both),
                PeerMsg::ActivateLock { at, fence },
            );
        }
    }

    /// Sends `msg` where `to` says, now.
    fn send_now(&mut self, to: To<'_>, msg: PeerMsg) {
        match to {
            To::Link(peer) => {
                let line = msg.into_line_in(self.spare_lines.pop().unwrap_or_default());
                self.out.push_back(Output::PeerSend { peer, line });
            }
            To::Agent(id) if *id == *self.cluster.me => self.cluster.local.push_back(msg),
            To::Agent(id) => match self.cluster.peers.link_of(id) {
                Some(peer) => self.send_now(To::Link(peer), msg),
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
                let mut peers = (c.epoch.leaders.iter().enumerate())
                    .filter(|(i, l)| mask & (1 << i) != 0 && **l != c.me)
                    .filter_map(|(_, l)| c.peers.link_of(l));
                let Some(mut last) = peers.next() else { return };
                let line = msg.into_line_in(self.spare_lines.pop().unwrap_or_default());
                // Each peer but the last gets a copy; the last, the line.
                for peer in peers {
                    self.out.push_back(Output::PeerSend {
                        peer: last,
                        line: line.clone(),
                    });
                    last = peer;
                }
                self.out.push_back(Output::PeerSend { peer: last, line });
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
        let active = asker.as_ref().is_some_and(|a| self.answers_active(a));
        let pong = self.pong(now, serial, active);
        if let Some(link) = self.cluster.peers.links.get_mut(&peer) {
            link.reanswer = (!active && asker.is_some()).then_some(serial);
            self.cluster.peers.reanswer_due |= link.reanswer.is_some();
        }
        self.send(To::Link(peer), PeerMsg::Pong(pong));
    }

    /// The answer to ping `serial`, as this agent is at `now`.
    fn pong(&self, now: Now, serial: u64, active: bool) -> Pong {
        // What is left of this leader's lock-delay: the homes that are
        // not leaders learn from it that nothing can be granted yet.
        let delay_until = self
            .cluster
            .leader
            .table
            .as_ref()
            .and_then(|l| l.delay_until);
        let delay_us = delay_until.map_or(0, |d| d.saturating_since(now.mono).as_micros() as u64);
        Pong {
            serial,
            epoch: self.cluster.epoch.number,
            view: self.cluster.epoch.view,
            wall_ms: Some(now.wall.0 / 1000),
            active,
            links: Some(
                (self.cluster.peers).links_mask(now.mono - self.cluster.cfg.peer_timeout / 2),
            ),
            delay_us,
        }
    }

    /// After each input: once this agent acts for a member whose latest
    /// ping it answered as not acting, it answers that ping again, as
    /// acting. Its word is what it would have said had the ping arrived
    /// now (a ping may always arrive late): it heard the member no earlier
    /// than the ping was sent, and will not drop the member's locks before
    /// `release_delay` after it last heard it. Without it, a home learns
    /// that a new owner acts only at its next ping, and a new owner cut off
    /// in between leaves the home's locks on the old owner's older word.
    pub(crate) fn reanswer_pings(&mut self, now: Now) {
        // Checked after every input: nothing is walked until this agent
        // acts (`answers_active` asks that first; an agent that leads
        // nothing stops at its missing table).
        if !self.cluster.peers.reanswer_due || !self.cluster.acting(self.last_now) {
            return;
        }
        let due: Vec<(PeerId, u64, Id)> = (self.cluster.peers.links.iter())
            .filter_map(|(peer, l)| Some((*peer, l.reanswer?, l.id.clone()?)))
            .collect();
        let mut left = false;
        for (peer, serial, asker) in due {
            if !self.answers_active(&asker) {
                left = true;
                continue;
            }
            let pong = self.pong(now, serial, true);
            if let Some(link) = self.cluster.peers.links.get_mut(&peer) {
                link.reanswer = None;
            }
            self.send(To::Link(peer), PeerMsg::Pong(pong));
        }
        self.cluster.peers.reanswer_due = left;
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
        // were lost with nothing, drop them. The latest answered one may
        // be answered again, as acting (`reanswer_pings`).
        let sent = if let Some(i) = link.pings.iter().position(|(s, _)| *s == serial) {
            let (_, sent) = link.pings.drain(..=i).next_back().expect("found");
            link.answered = Some((serial, sent));
            (self.cluster.peers).note_rtt(peer, now.mono.saturating_since(sent));
            sent
        } else {
            match link.answered {
                Some((s, sent)) if s == serial && active => sent,
                _ => return,
            }
        };
        let addr = self.cluster.peers.links[&peer].addr;
        if epoch < self.cluster.epoch.number {
            self.cluster.home.carried.answered_before(addr, epoch, sent);
        }
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
            self.cluster.home.carried.quorum_acts(now.mono);
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
                self.close_link(peer, &format!("silent for {timeout:?}"));
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

    /// Closes link `peer` (once), with a warning that says `why`.
    fn close_link(&mut self, peer: PeerId, why: &str) {
        let Some(link) = self.cluster.peers.links.get_mut(&peer) else {
            return;
        };
        if !link.closing {
            log::warn!("{} ({}) {why}: closing its link", link.name, link.addr);
            link.closing = true;
            self.out.push_back(Output::PeerClose { peer });
        }
    }

    /// Forgets what was heard of ids silent for long (agents restarted
    /// since, with a new id): bounded by the members' restarts otherwise.
    pub(crate) fn forget_old_ids(&mut self, now: Now) {
        let c = &mut self.cluster;
        let keep = c.cfg.stretch(c.cfg.grace) * 4 + c.cfg.peer_timeout;
        let table = c.leader.table.as_ref();
        let held = |id: &Id| table.is_some_and(|l| l.has_home(id));
        c.peers.forget_old(now.mono - keep, &c.epoch.leaders, held);
    }

    /// The pong's `active` flag for `asker`: acting, and `asker`'s report
    /// is part of this epoch's state (a home whose held locks the epoch
    /// does not know must not be kept in contact: it has to revoke).
    fn answers_active(&self, asker: &Id) -> bool {
        let Some(l) = self.cluster.leader.table.as_ref() else {
            return false;
        };
        l.ready && l.reporters.contains(asker) && self.cluster.acting(self.last_now)
    }
}

#[cfg(test)]
mod tests;

/// What a peer message read here shares: the ids of the agents heard
/// from, and the names read lately ([`NameCache`]).
pub(crate) struct KnownHere<'a> {
    heard: &'a BTreeMap<Id, Time>,
    names: &'a mut NameCache,
}

impl Known for KnownHere<'_> {
    fn id(&mut self, text: &str) -> Id {
        (self.heard.get_key_value(text)).map_or_else(|| Id::from(text), |(id, _)| id.clone())
    }

    fn name(&mut self, bytes: &[u8]) -> ObjectName {
        self.names.name(bytes)
    }
}
