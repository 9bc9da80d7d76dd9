//! The simulated network: one TCP link per pair of computers.
//!
//! A link is down or up. While up, each direction is a FIFO stream: a
//! message is ready after its own random delay but never before the one sent
//! ahead of it, so messages reorder across links, never within one
//! direction. A **cut** (a partition, or one half of a one-way partition)
//! stalls a direction as a real TCP stream stalls: nothing gets through, the
//! link stays up, and whatever is queued flows again, in order, if the cut
//! heals before the cores' heartbeats close the link. Breaking a link drops
//! everything in flight on it; the last few messages of each direction are
//! kept so that the next link between the same pair may deliver them again
//! (a retransmission after reconnect).

use std::collections::{BTreeMap, VecDeque};

use snaplock_proto::PeerId;
use snaplock_proto::wire::Message;

/// How many messages per direction a reconnect may deliver again.
pub const REPLAY_DEPTH: usize = 4;

/// One direction of a link: 0 is from the lower-numbered computer.
pub type Dir = usize;

/// The state of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// No connection; the shells dial again later.
    Down,
    /// Connected: each end knows the link by its own id.
    Up {
        /// Bumped on every connection, so stale deliveries are recognized.
        generation: u64,
        /// The id of the link at each end.
        ids: [PeerId; 2],
    },
}

/// A link between computers `ends[0] < ends[1]`.
#[derive(Debug)]
pub struct Link {
    /// The two computers.
    pub ends: [usize; 2],
    /// Down or up.
    pub state: LinkState,
    generation: u64,
    queues: [VecDeque<(u64, Message)>; 2],
    last_ready: [u64; 2],
    recent: [VecDeque<Message>; 2],
    /// What the last connection sent in each direction near its end, with
    /// the sender's incarnation: only a surviving process retransmits.
    pub replay: [(u64, Vec<Message>); 2],
    /// Whether a reconnection attempt is already scheduled.
    pub redial_scheduled: bool,
    /// When a dial reached a paused computer (the kernel accepted it, the
    /// handshake waits for the process): the link comes up when it
    /// resumes, unless the dialler's handshake deadline passed first.
    pub dial_waiting: Option<u64>,
    /// True time the link was last usable; `u64::MAX` while it is.
    pub usable_until: u64,
}

impl Link {
    /// The generation of the connection that is up.
    pub fn generation(&self) -> Option<u64> {
        match self.state {
            LinkState::Up { generation, .. } => Some(generation),
            LinkState::Down => None,
        }
    }

    /// The direction whose sender is `node`.
    pub fn dir_from(&self, node: usize) -> Dir {
        usize::from(self.ends[0] != node)
    }
}

/// Every link, the cuts between computers and the ids of live links.
#[derive(Debug)]
pub struct Net {
    n: usize,
    /// One per pair, in (a, b) order with a < b.
    pub links: Vec<Link>,
    /// `cuts[from * n + to]`: how many active faults stall from → to.
    cuts: Vec<u32>,
    peers: BTreeMap<PeerId, (usize, usize)>,
    next_peer: u64,
}

impl Net {
    /// `n` computers, every link down.
    pub fn new(n: usize) -> Net {
        let mut links = Vec::new();
        for a in 0..n {
            for b in a + 1..n {
                links.push(Link {
                    ends: [a, b],
                    state: LinkState::Down,
                    generation: 0,
                    queues: [VecDeque::new(), VecDeque::new()],
                    last_ready: [0, 0],
                    recent: [VecDeque::new(), VecDeque::new()],
                    replay: [(0, Vec::new()), (0, Vec::new())],
                    redial_scheduled: false,
                    dial_waiting: None,
                    usable_until: 0,
                });
            }
        }
        Net {
            n,
            links,
            cuts: vec![0; n * n],
            peers: BTreeMap::new(),
            next_peer: 1,
        }
    }

    /// The link between `a` and `b`.
    pub fn link_of(&self, a: usize, b: usize) -> usize {
        let (a, b) = (a.min(b), a.max(b));
        // Pairs are laid out row by row: row a holds b in a+1..n.
        a * self.n - a * (a + 1) / 2 + (b - a - 1)
    }

    /// Whether `from` → `to` is stalled.
    pub fn is_cut(&self, from: usize, to: usize) -> bool {
        self.cuts[from * self.n + to] > 0
    }

    /// Starts (`true`) or ends one fault stalling `from` → `to`.
    pub fn set_cut(&mut self, from: usize, to: usize, on: bool) {
        let c = &mut self.cuts[from * self.n + to];
        if on {
            *c += 1;
        } else {
            *c = c.checked_sub(1).expect("a cut ends that started");
        }
    }

    /// Removes every cut.
    pub fn heal_all(&mut self) {
        self.cuts.iter_mut().for_each(|c| *c = 0);
    }

    /// Whether both directions between `a` and `b` flow.
    pub fn open_both_ways(&self, a: usize, b: usize) -> bool {
        !self.is_cut(a, b) && !self.is_cut(b, a)
    }

    /// Brings link `l` up; returns the id each end will know it by.
    pub fn connect(&mut self, l: usize) -> [PeerId; 2] {
        let ids = [PeerId(self.next_peer), PeerId(self.next_peer + 1)];
        self.next_peer += 2;
        let link = &mut self.links[l];
        link.generation += 1;
        link.state = LinkState::Up {
            generation: link.generation,
            ids,
        };
        for (end, id) in ids.into_iter().enumerate() {
            self.peers.insert(id, (l, end));
        }
        ids
    }

    /// Which link and which end (0 or 1) a core's peer id names, if that
    /// link is still up.
    pub fn peer(&self, id: PeerId) -> Option<(usize, usize)> {
        self.peers.get(&id).copied()
    }

    /// Breaks link `l` if it is up: drops what is in flight and keeps the
    /// last messages of each direction, tagged with the incarnations of
    /// their senders, for a possible replay. Returns the ids the ends knew
    /// it by.
    pub fn disconnect(&mut self, l: usize, incarnations: [u64; 2]) -> Option<[PeerId; 2]> {
        let link = &mut self.links[l];
        let LinkState::Up { ids, .. } = link.state else {
            return None;
        };
        link.state = LinkState::Down;
        for (dir, incarnation) in incarnations.into_iter().enumerate() {
            link.queues[dir].clear();
            link.replay[dir] = (incarnation, link.recent[dir].drain(..).collect());
        }
        for id in ids {
            self.peers.remove(&id);
        }
        Some(ids)
    }

    /// Queues `msg` on link `l` in direction `dir`; returns when it is ready.
    pub fn send(&mut self, l: usize, dir: Dir, msg: Message, now: u64, delay: u64) -> u64 {
        let link = &mut self.links[l];
        let ready = (now + delay).max(link.last_ready[dir]);
        link.last_ready[dir] = ready;
        if link.recent[dir].len() == REPLAY_DEPTH {
            link.recent[dir].pop_front();
        }
        link.recent[dir].push_back(msg.clone());
        link.queues[dir].push_back((ready, msg));
        ready
    }

    /// Takes the next message of `l` in direction `dir` if it is ready at
    /// `now` and the direction is not cut.
    pub fn take_ready(&mut self, l: usize, dir: Dir, now: u64) -> Option<Message> {
        let [a, b] = self.links[l].ends;
        let (from, to) = if dir == 0 { (a, b) } else { (b, a) };
        if self.is_cut(from, to) {
            return None;
        }
        let q = &mut self.links[l].queues[dir];
        if q.front().is_some_and(|(ready, _)| *ready <= now) {
            q.pop_front().map(|(_, m)| m)
        } else {
            None
        }
    }

    /// Whether a direction has messages waiting.
    pub fn has_queued(&self, l: usize, dir: Dir) -> bool {
        !self.links[l].queues[dir].is_empty()
    }

    /// Whether a direction still carries a `LOCKTICKETS` line (a report or
    /// a state): such lines stand for the handover's bulk, which a real
    /// socket takes only as the other side reads it, so the sender's shell
    /// says its socket is full until they are delivered.
    pub fn carries_tickets(&self, l: usize, dir: Dir) -> bool {
        (self.links[l].queues[dir].iter()).any(|(_, m)| m.command == "LOCKTICKETS")
    }

    /// Marks which links are usable now (up, both ways open, both ends
    /// running), keeping when each was last usable.
    pub fn update_usable(&mut self, now: u64, running: &[bool]) {
        for l in 0..self.links.len() {
            let [a, b] = self.links[l].ends;
            let usable = self.links[l].state != LinkState::Down
                && self.open_both_ways(a, b)
                && running[a]
                && running[b];
            let link = &mut self.links[l];
            if usable {
                link.usable_until = u64::MAX;
            } else if link.usable_until == u64::MAX {
                link.usable_until = now;
            }
        }
    }

    /// How many computers `node` could exchange messages with at some time
    /// after `since`, itself included (a link never up counts as last
    /// usable at time zero).
    pub fn reachable_since(&self, node: usize, since: u64) -> usize {
        1 + (0..self.n)
            .filter(|&o| o != node)
            .filter(|&o| self.links[self.link_of(node, o)].usable_until > since)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_map_to_distinct_links() {
        let net = Net::new(5);
        let mut seen = std::collections::BTreeSet::new();
        for a in 0..5 {
            for b in 0..5 {
                if a != b {
                    let l = net.link_of(a, b);
                    assert_eq!(net.links[l].ends, [a.min(b), a.max(b)]);
                    seen.insert(l);
                }
            }
        }
        assert_eq!(seen.len(), 10);
    }

    #[test]
    fn reach_counts_links_usable_since_a_time() {
        let mut net = Net::new(3);
        let l01 = net.link_of(0, 1);
        net.connect(l01);
        net.update_usable(10, &[true, true, true]);
        assert_eq!(net.reachable_since(0, 0), 2);
        net.set_cut(1, 0, true);
        net.update_usable(20, &[true, true, true]);
        assert_eq!(net.reachable_since(0, 19), 2, "usable until 20");
        assert_eq!(net.reachable_since(0, 20), 1);
        net.set_cut(1, 0, false);
        net.update_usable(30, &[true, false, true]);
        assert_eq!(net.reachable_since(0, 20), 1, "its peer is paused");
    }

    #[test]
    fn a_direction_is_fifo_and_a_cut_stalls_it() {
        let mut net = Net::new(2);
        net.connect(0);
        let r1 = net.send(0, 0, Message::new("A"), 0, 500);
        let r2 = net.send(0, 0, Message::new("B"), 10, 100);
        assert_eq!((r1, r2), (500, 500));
        net.set_cut(0, 1, true);
        assert!(net.take_ready(0, 0, 600).is_none());
        net.set_cut(0, 1, false);
        assert_eq!(net.take_ready(0, 0, 600).unwrap().command, "A");
        assert_eq!(net.take_ready(0, 0, 600).unwrap().command, "B");
        assert!(net.take_ready(0, 0, 600).is_none());
    }
}
