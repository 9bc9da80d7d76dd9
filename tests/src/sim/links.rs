//! The shells' side of the links: dialing (when both computers run and
//! both ways are open), breaking (everything in flight is lost, both ends
//! are told), delivering what each direction has ready, and delivering
//! again, after a reconnect, what the previous connection carried last.

use snaplock_proto::{Input, wire};

use super::events::{Ev, Phase};
use super::net::LinkState;
use super::world::World;
use super::{MS, SEC};

/// How long the agent's shell waits for a dialled peer's handshake
/// (`agent/src/peers`: "handshake not finished within 5 s").
const HANDSHAKE_WAIT: u64 = 5 * SEC;

impl World {
    /// The range of one-way message delays now.
    pub(super) fn delay_range(&self) -> (u64, u64) {
        let (lo, hi) = self.knobs.delay;
        if self.phase == Phase::Quiet {
            (lo, hi.min(50 * MS))
        } else {
            (lo, hi)
        }
    }

    pub(super) fn schedule_redial(&mut self, l: usize, at: u64) {
        if !self.net.links[l].redial_scheduled {
            self.net.links[l].redial_scheduled = true;
            self.at(at, Ev::Redial(l));
        }
    }

    pub(super) fn redial_backoff(&mut self) -> u64 {
        if self.phase == Phase::Quiet {
            self.net_rng.between(10 * MS, 300 * MS)
        } else {
            self.net_rng.between(50 * MS, 2 * SEC)
        }
    }

    /// Connects link `l` when both computers run and both ways are open;
    /// else tries again later.
    pub(super) fn redial(&mut self, l: usize) {
        self.net.links[l].redial_scheduled = false;
        if self.net.links[l].state != LinkState::Down {
            return;
        }
        let [a, b] = self.net.links[l].ends;
        let alive = self.nodes[a].core.is_some() && self.nodes[b].core.is_some();
        let one_paused = self.nodes[a].paused != self.nodes[b].paused;
        if alive && one_paused && self.net.open_both_ways(a, b) {
            // The paused computer's kernel accepts the connection; the
            // handshake completes when it resumes (`resume`).
            self.net.links[l].dial_waiting = Some(self.now);
            return;
        }
        if !(self.running(a) && self.running(b) && self.net.open_both_ways(a, b)) {
            if alive {
                let at = self.now + self.redial_backoff();
                self.schedule_redial(l, at);
            }
            return;
        }
        let ids = self.net.connect(l);
        let generation = self.net.links[l].generation().expect("up");
        for (end, node) in [a, b].into_iter().enumerate() {
            let other = [a, b][1 - end];
            let input = Input::PeerUp {
                peer: ids[end],
                name: self.nodes[other].name.clone(),
                addr: self.nodes[other].addr,
            };
            let incarnation = self.nodes[node].incarnation;
            self.at(
                self.now,
                Ev::Input {
                    node,
                    incarnation,
                    input,
                },
            );
        }
        if self.net_rng.chance(self.knobs.replay_per_million) {
            self.replay_after_reconnect(l, generation);
        }
        self.update_usable();
    }

    /// Delivers again, first on the new connection, what the previous one
    /// carried last, as a retransmitting sender would.
    pub(super) fn replay_after_reconnect(&mut self, l: usize, generation: u64) {
        for dir in 0..2 {
            let sender = self.net.links[l].ends[dir];
            let (incarnation, msgs) = std::mem::take(&mut self.net.links[l].replay[dir]);
            if incarnation != self.nodes[sender].incarnation || msgs.is_empty() {
                continue;
            }
            let keep = self.net_rng.between(1, msgs.len() as u64) as usize;
            self.log(|| format!("link {l}: {keep} message(s) from n{sender} delivered again"));
            let skip = msgs.len() - keep;
            for msg in msgs.into_iter().skip(skip) {
                let delay = self.net_rng.between(0, MS);
                let ready = self.net.send(l, dir, msg, self.now, delay);
                self.at(
                    ready,
                    Ev::Pump {
                        link: l,
                        generation,
                        dir,
                    },
                );
            }
        }
    }

    /// Breaks link `l`: in-flight messages are lost and both ends are told.
    pub(super) fn break_link(&mut self, l: usize) {
        let [a, b] = self.net.links[l].ends;
        let incarnations = [self.nodes[a].incarnation, self.nodes[b].incarnation];
        let Some(ids) = self.net.disconnect(l, incarnations) else {
            return;
        };
        for (end, node) in [a, b].into_iter().enumerate() {
            let incarnation = self.nodes[node].incarnation;
            self.at(
                self.now,
                Ev::Input {
                    node,
                    incarnation,
                    input: Input::PeerDown { peer: ids[end] },
                },
            );
        }
        // As the shell does: a link that was up is dialled again after half
        // its smallest backoff plus jitter (25 to 50 ms); a dial that fails
        // backs off from there (`redial`).
        let at = self.now + self.net_rng.between(25 * MS, 50 * MS);
        self.schedule_redial(l, at);
        self.update_usable();
    }

    /// Delivers what is ready in one direction of a link.
    pub(super) fn pump(&mut self, l: usize, generation: u64, dir: usize) {
        loop {
            let LinkState::Up {
                generation: current,
                ids,
            } = self.net.links[l].state
            else {
                return;
            };
            if current != generation {
                return;
            }
            let Some(msg) = self.net.take_ready(l, dir, self.now) else {
                return;
            };
            let to_end = 1 - dir;
            let to = self.net.links[l].ends[to_end];
            let from = self.net.links[l].ends[dir];
            // Its sender's socket took what followed: its shell says so.
            let tickets = msg.command == "LOCKTICKETS";
            if let Err(what) = self.wire.received(to, from, &msg) {
                self.checker.report(self.now, "S6", what);
            }
            // The agent hands the core the line as it came.
            let mut line = wire::encode_to_vec(&msg);
            line.pop();
            let input = Input::PeerLine {
                peer: ids[to_end],
                line,
            };
            self.feed(to, input);
            if tickets {
                self.reschedule(from);
            }
        }
    }

    /// After a cut heals: lets every stalled direction flow.
    pub(super) fn pump_all(&mut self) {
        for l in 0..self.net.links.len() {
            if let Some(generation) = self.net.links[l].generation() {
                for dir in 0..2 {
                    if self.net.has_queued(l, dir) {
                        self.at(
                            self.now,
                            Ev::Pump {
                                link: l,
                                generation,
                                dir,
                            },
                        );
                    }
                }
            }
        }
    }

    pub(super) fn redial_links_of(&mut self, i: usize) {
        for other in 0..self.nodes.len() {
            if other != i {
                let l = self.net.link_of(i, other);
                // A link still up has nothing to dial: when it breaks (the
                // other side closes it, having not heard this computer),
                // its own redial follows in 25-50 ms. One scheduled here,
                // with a backoff of up to 2 s, held that one back.
                if self.net.links[l].generation().is_some() {
                    continue;
                }
                // A dial that reached it while it was paused completes now,
                // if the dialler still waits for its handshake (the shell
                // gives up after `HANDSHAKE_WAIT`).
                let waiting = self.net.links[l].dial_waiting.take();
                let at = match waiting {
                    Some(t) if self.now <= t + HANDSHAKE_WAIT => {
                        self.now + self.net_rng.between(0, MS)
                    }
                    _ => self.now + self.redial_backoff(),
                };
                self.schedule_redial(l, at);
            }
        }
    }
}
