//! The computers' lives: an agent starts with nothing, crashes with its
//! memory lost but its disk kept (its links break, its clients see their
//! connections drop), restarts as a new agent from its disk's record,
//! pauses (nothing reaches it, it does nothing) and resumes to work
//! through what reached it meanwhile; and its timers.

use std::net::SocketAddr;

use snaplock_proto::{ClientId, Config, Core, PeerId};

use super::events::Ev;
use super::net::LinkState;
use super::world::{CoreSide, World};

/// Most wake-ups of one core at one instant before that counts as a loop.
const MAX_WAKES_PER_INSTANT: u32 = 10_000;

impl World {
    /// A fresh core for computer `i` (start or restart: nothing remembered
    /// but its disk's record).
    pub(super) fn start_core(&mut self, i: usize) {
        let members: Vec<SocketAddr> = self.nodes.iter().map(|n| n.addr).collect();
        let mut cluster = self.cluster.clone();
        cluster.seed = self.core_rng.next_u64();
        cluster.pid = self.core_rng.between(2, 4_000_000) as u32;
        if members.len() > 1 {
            cluster.listen = Some(members[i]);
            cluster.neighbors = members;
            // Most computers are candidates; at most one is not, so every
            // epoch has two leaders or more.
            let off_allowed = i == 3 && self.core_rng.chance(200_000);
            cluster.candidate_priority = if off_allowed {
                None
            } else {
                Some(self.core_rng.between(1, 15) as u8)
            };
        }
        cluster.persisted = self.nodes[i].disk;
        let config = Config {
            server_name: self.nodes[i].name.clone(),
            cluster,
            ..Config::default()
        };
        if let Err(e) = config.validate() {
            panic!("simulated config of n{i} is invalid: {e}");
        }
        let now = self.nodes[i].clock.now(self.now);
        let node = &mut self.nodes[i];
        node.core = Some(Core::new(config, now));
        node.paused = false;
        node.pending.clear();
        node.running_since = self.now;
        node.wake_at = None;
        self.log(|| format!("n{i} starts"));
        self.reschedule(i);
        self.update_usable();
    }

    /// Arms the `Wake` of core `i` for its next timer, once its shell told
    /// it which of its links still hold handover lines.
    pub(super) fn reschedule(&mut self, i: usize) {
        if self.nodes[i].paused {
            return;
        }
        let backlog = self.backlog_of(i);
        let node = &mut self.nodes[i];
        if let Some(core) = node.core.as_mut() {
            core.set_peer_backlog(&backlog);
        }
        let Some(next) = node.core.as_ref().and_then(Core::poll_timeout) else {
            return;
        };
        let at = node.clock.true_at_mono(next.as_micros()).max(self.now);
        if node.wake_at.is_none_or(|w| at < w) {
            self.nodes[i].wake_at = Some(at);
            self.at(at, Ev::Wake(i));
        }
    }

    /// The up links on which computer `i` still has handover lines in
    /// flight (`Net::carries_tickets`), by the ids its core knows them by.
    fn backlog_of(&self, i: usize) -> Vec<PeerId> {
        (0..self.nodes.len())
            .filter(|&o| o != i)
            .map(|o| self.net.link_of(i, o))
            .filter_map(|l| {
                let LinkState::Up { ids, .. } = self.net.links[l].state else {
                    return None;
                };
                let dir = self.net.links[l].dir_from(i);
                self.net.carries_tickets(l, dir).then_some(ids[dir])
            })
            .collect()
    }

    pub(super) fn wake(&mut self, i: usize) {
        if self.nodes[i].wake_at != Some(self.now) {
            return;
        }
        self.nodes[i].wake_at = None;
        if !self.running(i) {
            return;
        }
        let node = &mut self.nodes[i];
        if node.wakes_here.0 == self.now {
            node.wakes_here.1 += 1;
            if node.wakes_here.1 > MAX_WAKES_PER_INSTANT {
                let what = format!("n{i} asks to be woken again and again at one instant");
                self.checker.report(self.now, "harness", what);
                self.stopped = true;
                return;
            }
        } else {
            node.wakes_here = (self.now, 1);
        }
        let now = self.nodes[i].clock.now(self.now);
        super::corelog::at(i, self.now);
        self.trace.num(i as u64 + 2_000);
        self.nodes[i]
            .core
            .as_mut()
            .expect("running")
            .handle_timeout(now);
        self.drain(i);
        self.reschedule(i);
    }

    /// Computer `i` crashes: its agent and everything it knew are gone.
    pub(super) fn crash(&mut self, i: usize) {
        if self.nodes[i].core.is_none() {
            return;
        }
        self.log(|| format!("n{i} crashes"));
        self.stats.crashes += 1;
        let node = &mut self.nodes[i];
        node.core = None;
        node.paused = false;
        node.pending.clear();
        node.wake_at = None;
        self.wire.forget(i);
        // The links break with the process that sent on them: what it sent
        // last is kept under its own incarnation, so that no reconnect
        // delivers it again as if its successor had sent it (a dead
        // process retransmits nothing).
        for other in 0..self.nodes.len() {
            if other != i {
                let l = self.net.link_of(i, other);
                self.break_link(l);
            }
        }
        self.nodes[i].incarnation += 1;
        let conns: Vec<ClientId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.node == i && c.core != CoreSide::Closed)
            .map(|(id, _)| *id)
            .collect();
        for conn in conns {
            let c = self.conns.get_mut(&conn).expect("listed");
            c.core = CoreSide::Closed;
            if c.client_open {
                self.at(self.now, Ev::ConnDropped(conn));
            }
        }
        self.update_usable();
    }

    /// Computer `i` restarts with a fresh agent.
    pub(super) fn restart(&mut self, i: usize) {
        if self.nodes[i].core.is_some() {
            return;
        }
        self.start_core(i);
        self.redial_links_of(i);
    }

    pub(super) fn pause(&mut self, i: usize) {
        if !self.running(i) {
            return;
        }
        self.log(|| format!("n{i} pauses"));
        self.nodes[i].paused = true;
        self.pauses.push((self.now, i));
        self.update_usable();
    }

    /// Computer `i` resumes and works through what reached it meanwhile.
    pub(super) fn resume(&mut self, i: usize) {
        if !self.nodes[i].paused || self.nodes[i].core.is_none() {
            return;
        }
        self.log(|| format!("n{i} resumes"));
        self.nodes[i].paused = false;
        self.nodes[i].running_since = self.now;
        self.nodes[i].wake_at = None;
        let pending = std::mem::take(&mut self.nodes[i].pending);
        let now = self.nodes[i].clock.now(self.now);
        for input in pending {
            // A shell may look at its timers before or after its sockets.
            if self.core_rng.chance(500_000) {
                super::corelog::at(i, self.now);
                self.trace.num(i as u64 + 2_000);
                self.nodes[i]
                    .core
                    .as_mut()
                    .expect("running")
                    .handle_timeout(now);
                self.drain(i);
            }
            self.feed_now(i, input);
            self.drain(i);
        }
        super::corelog::at(i, self.now);
        self.trace.num(i as u64 + 2_000);
        self.nodes[i]
            .core
            .as_mut()
            .expect("running")
            .handle_timeout(now);
        self.drain(i);
        self.reschedule(i);
        self.redial_links_of(i);
        self.update_usable();
    }
}
