//! Faults and phases: while faults run, a Poisson-like stream of them, each
//! drawn from the run's own mix; then a quiet window in which every fault
//! heals (cuts close, paused computers resume, crashed ones restart) and the
//! liveness probes run.
//!
//! The phase itself is the world's (`World::phase`): the network's delays
//! depend on it.

use std::collections::BTreeMap;

use super::events::{Ev, Phase, ProbeStep};
use super::rng::Rng;
use super::world::World;
use super::{MS, SEC};

/// A fault that has not ended yet.
#[derive(Debug)]
enum Active {
    /// Directions (from, to) stalled.
    Cut(Vec<(usize, usize)>),
    Pause(usize),
    Crash(Vec<usize>),
}

/// The faults under way, and the stream they are drawn from.
#[derive(Debug)]
pub(super) struct Faults {
    /// The faults' own stream: what cores do never shifts it.
    rng: Rng,
    next_id: u64,
    active: BTreeMap<u64, Active>,
    /// Quiet windows started so far.
    window: u32,
}

impl Faults {
    /// Starts the first fault phase of `world`.
    pub fn start(world: &mut World, rng: Rng) -> Faults {
        let mut faults = Faults {
            rng,
            next_id: 1,
            active: BTreeMap::new(),
            window: 0,
        };
        // From quiet, so that `phase` starts the first chaos phase.
        world.phase = Phase::Quiet;
        faults.phase(world, Phase::Chaos);
        faults
    }

    /// How long after a quiet window starts the cluster must be settled:
    /// links redialled, an election, a lock-delay, leaders forgetting the
    /// agents that died.
    fn stabilisation(world: &World) -> u64 {
        if world.nodes.len() == 1 {
            2 * SEC
        } else {
            25 * SEC
        }
    }

    /// Faults start (the phase's length and its first fault drawn) or
    /// stop (every fault heals, the window's probes are scheduled).
    pub fn phase(&mut self, world: &mut World, phase: Phase) {
        if world.phase == phase {
            return;
        }
        world.phase = phase;
        match phase {
            Phase::Chaos => {
                world.log(|| "faults start".to_owned());
                let (lo, hi) = world.knobs.chaos_len;
                let mut len = self.rng.between(lo, hi);
                let end = world.opts.duration;
                let quiet = world.knobs.quiet_len;
                if world.now + len + quiet > end {
                    len = end.saturating_sub(world.now + quiet);
                }
                let first = self.next_fault_gap(world);
                world.at(world.now + first, Ev::Fault);
                world.at(world.now + len, Ev::Phase(Phase::Quiet));
            }
            Phase::Quiet => {
                world.log(|| "faults stop: everything heals".to_owned());
                let ids: Vec<u64> = self.active.keys().copied().collect();
                for id in ids {
                    self.end(world, id);
                }
                for l in 0..world.net.links.len() {
                    let at = world.now + self.rng.between(MS, 100 * MS);
                    world.schedule_redial(l, at);
                }
                self.window += 1;
                let window = self.window;
                let start = world.now + Self::stabilisation(world);
                let end = world.now + world.knobs.quiet_len;
                if end <= world.opts.duration && start < end {
                    world.at(start, Ev::Probe(ProbeStep::Start { window }));
                    world.at(end - SEC, Ev::Probe(ProbeStep::Close { window }));
                }
                if end < world.opts.duration {
                    world.at(end, Ev::Phase(Phase::Chaos));
                }
            }
        }
    }

    fn next_fault_gap(&mut self, world: &World) -> u64 {
        let mean = world.knobs.fault_gap;
        self.rng.between(mean / 10, 2 * mean)
    }

    fn new_fault(&mut self, world: &mut World, active: Active, lasts: u64) {
        let id = self.next_id;
        self.next_id += 1;
        self.active.insert(id, active);
        world.at(world.now + lasts, Ev::FaultEnd(id));
        world.stats.faults += 1;
    }

    /// Injects the next fault and schedules the one after.
    pub fn fault(&mut self, world: &mut World) {
        if world.phase != Phase::Chaos {
            return;
        }
        let gap = self.next_fault_gap(world);
        world.at(world.now + gap, Ev::Fault);
        let n = world.nodes.len();
        if let Some(v) = world.opts.victim.filter(|&v| v < n && n >= 3) {
            self.victim_fault(world, v);
            return;
        }
        let mut weights = world.knobs.fault_weights;
        if n == 1 {
            weights[0] = 0;
            weights[1] = 0;
            weights[2] = 0;
        }
        if weights.iter().all(|&w| w == 0) {
            return;
        }
        match self.rng.weighted(&weights) {
            0 => self.fault_break(world),
            1 => self.fault_partition(world),
            2 => self.fault_one_way(world),
            3 => self.fault_crash(world),
            _ => self.fault_pause(world),
        }
    }

    /// A fault of computer `v` alone (R1 runs): a pause (often past the
    /// grace), a crash, a cut of all its links (both ways, or one), or a
    /// broken link of its. Another fault of it waits for this one to end.
    fn victim_fault(&mut self, world: &mut World, v: usize) {
        if !self.active.is_empty() {
            return;
        }
        let n = world.nodes.len();
        match self.rng.below(6) {
            0 | 1 => {
                if !world.running(v) {
                    return;
                }
                let lasts = if self.rng.chance(500_000) {
                    self.rng.between(5 * SEC, 20 * SEC)
                } else {
                    self.rng.between(100 * MS, 5 * SEC)
                };
                world.log(|| format!("fault: n{v} pauses for {}", super::checker::secs(lasts)));
                world.pause(v);
                self.new_fault(world, Active::Pause(v), lasts);
            }
            2 => {
                if world.nodes[v].core.is_none() {
                    return;
                }
                world.crash(v);
                let lasts = self.rng.between(100 * MS, 30 * SEC);
                self.new_fault(world, Active::Crash(vec![v]), lasts);
            }
            3 | 4 => {
                let cuts: Vec<(usize, usize)> = match self.rng.below(3) {
                    0 => (0..n)
                        .filter(|&o| o != v)
                        .flat_map(|o| [(v, o), (o, v)])
                        .collect(),
                    1 => (0..n).filter(|&o| o != v).map(|o| (v, o)).collect(),
                    _ => (0..n).filter(|&o| o != v).map(|o| (o, v)).collect(),
                };
                let lasts = self.rng.between(500 * MS, 30 * SEC);
                world.log(|| {
                    format!(
                        "fault: n{v} cut off {cuts:?} for {}",
                        super::checker::secs(lasts)
                    )
                });
                self.apply_cuts(world, cuts, lasts);
            }
            _ => {
                let mine: Vec<usize> = (0..n)
                    .filter(|&o| o != v)
                    .map(|o| world.net.link_of(v, o))
                    .filter(|&l| world.net.links[l].generation().is_some())
                    .collect();
                if mine.is_empty() {
                    return;
                }
                let l = *self.rng.pick(&mine);
                world.log(|| format!("fault: link {l} of n{v} breaks"));
                world.stats.faults += 1;
                world.break_link(l);
            }
        }
    }

    /// A TCP connection dies (loss, reset): the link breaks and redials.
    fn fault_break(&mut self, world: &mut World) {
        let up: Vec<usize> = (0..world.net.links.len())
            .filter(|&l| world.net.links[l].generation().is_some())
            .collect();
        if up.is_empty() {
            return;
        }
        let l = *self.rng.pick(&up);
        world.log(|| format!("fault: link {l} breaks"));
        world.stats.faults += 1;
        world.break_link(l);
    }

    /// Splits the computers in two sides (an isolated one, random halves,
    /// or two sides joined by a bridge that sees both).
    fn fault_partition(&mut self, world: &mut World) {
        let n = world.nodes.len();
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.rng.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        let bridge = n >= 3 && self.rng.chance(250_000);
        let (bridge_node, rest) = if bridge {
            (Some(order[0]), &order[1..])
        } else {
            (None, &order[..])
        };
        let side_a = self.rng.between(1, rest.len() as u64 - 1) as usize;
        let (a, b) = rest.split_at(side_a);
        let mut cuts = Vec::new();
        for &x in a {
            for &y in b {
                cuts.push((x, y));
                cuts.push((y, x));
            }
        }
        let lasts = self.rng.between(500 * MS, 40 * SEC);
        world.log(|| {
            format!(
                "fault: partition {a:?} | {b:?}{} for {}",
                bridge_node.map_or(String::new(), |x| format!(" bridged by n{x}")),
                super::checker::secs(lasts)
            )
        });
        self.apply_cuts(world, cuts, lasts);
    }

    /// One direction only: from one computer to another, from one to all,
    /// or from all to one.
    fn fault_one_way(&mut self, world: &mut World) {
        let n = world.nodes.len();
        let x = self.rng.below(n as u64) as usize;
        let mut y = self.rng.below(n as u64 - 1) as usize;
        if y >= x {
            y += 1;
        }
        let cuts: Vec<(usize, usize)> = match self.rng.below(3) {
            0 => vec![(x, y)],
            1 => (0..n).filter(|&o| o != x).map(|o| (x, o)).collect(),
            _ => (0..n).filter(|&o| o != x).map(|o| (o, x)).collect(),
        };
        let lasts = self.rng.between(500 * MS, 30 * SEC);
        world.log(|| {
            format!(
                "fault: one-way cut {cuts:?} for {}",
                super::checker::secs(lasts)
            )
        });
        self.apply_cuts(world, cuts, lasts);
    }

    fn apply_cuts(&mut self, world: &mut World, cuts: Vec<(usize, usize)>, lasts: u64) {
        for &(from, to) in &cuts {
            world.net.set_cut(from, to, true);
        }
        world.update_usable();
        self.new_fault(world, Active::Cut(cuts), lasts);
    }

    /// One computer crashes, or several at once (two of three leaders, all
    /// of them); each restarts later with its memory lost, from its disk.
    fn fault_crash(&mut self, world: &mut World) {
        let alive: Vec<usize> = (0..world.nodes.len())
            .filter(|&i| world.nodes[i].core.is_some())
            .collect();
        if alive.is_empty() {
            return;
        }
        let count = match self.rng.below(10) {
            0..=6 => 1,
            7 | 8 => 2.min(alive.len()),
            _ => alive.len(),
        };
        let mut victims = alive;
        while victims.len() > count {
            let k = self.rng.below(victims.len() as u64) as usize;
            victims.remove(k);
        }
        for &v in &victims {
            world.crash(v);
        }
        let lasts = self.rng.between(100 * MS, 40 * SEC);
        self.new_fault(world, Active::Crash(victims), lasts);
    }

    /// A computer stops (SIGSTOP) for a while: sometimes shortly, sometimes
    /// longer than the grace.
    fn fault_pause(&mut self, world: &mut World) {
        let running: Vec<usize> = (0..world.nodes.len())
            .filter(|&i| world.running(i))
            .collect();
        if running.is_empty() {
            return;
        }
        let i = *self.rng.pick(&running);
        let lasts = if self.rng.chance(300_000) {
            self.rng.between(5 * SEC, 20 * SEC)
        } else {
            self.rng.between(100 * MS, 5 * SEC)
        };
        world.pause(i);
        self.new_fault(world, Active::Pause(i), lasts);
    }

    /// A fault ends (or is ended by a quiet window).
    pub fn end(&mut self, world: &mut World, id: u64) {
        let Some(active) = self.active.remove(&id) else {
            return;
        };
        match active {
            Active::Cut(cuts) => {
                for (from, to) in cuts {
                    world.net.set_cut(from, to, false);
                }
                world.log(|| format!("fault {id} heals"));
                world.update_usable();
                world.pump_all();
            }
            Active::Pause(i) => world.resume(i),
            Active::Crash(victims) => {
                for v in victims {
                    world.restart(v);
                }
            }
        }
    }
}
