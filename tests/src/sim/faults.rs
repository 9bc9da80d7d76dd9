//! Faults and phases: while faults run, a Poisson-like stream of them, each
//! drawn from the run's own mix; then a quiet window in which every fault
//! heals (cuts close, paused computers resume, crashed ones restart) and the
//! liveness probes run.

use std::collections::BTreeMap;

use super::probes::ProbeStep;
use super::world::{Ev, World};
use super::{MS, SEC};

/// Whether faults run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Faults are injected.
    Chaos,
    /// Everything healed; liveness is checked.
    Quiet,
}

/// A fault that has not ended yet.
#[derive(Debug)]
enum Active {
    /// Directions (from, to) stalled.
    Cut(Vec<(usize, usize)>),
    Pause(usize),
    Crash(Vec<usize>),
}

/// The faults under way.
#[derive(Debug)]
pub struct FaultState {
    /// Chaos or quiet.
    pub phase: Phase,
    next_id: u64,
    active: BTreeMap<u64, Active>,
    /// Quiet windows started so far.
    pub window: u32,
}

impl Default for FaultState {
    fn default() -> FaultState {
        FaultState {
            phase: Phase::Chaos,
            next_id: 1,
            active: BTreeMap::new(),
            window: 0,
        }
    }
}

impl World {
    pub(super) fn start_phases(&mut self) {
        self.faults.phase = Phase::Quiet;
        self.phase(Phase::Chaos);
    }

    /// How long after a quiet window starts the cluster must be settled:
    /// links redialled, an election, a lock-delay, leaders forgetting the
    /// agents that died.
    pub(super) fn stabilisation(&self) -> u64 {
        if self.nodes.len() == 1 {
            2 * SEC
        } else {
            25 * SEC
        }
    }

    pub(super) fn phase(&mut self, phase: Phase) {
        if self.faults.phase == phase {
            return;
        }
        self.faults.phase = phase;
        match phase {
            Phase::Chaos => {
                self.log(|| "faults start".to_owned());
                let (lo, hi) = self.knobs.chaos_len;
                let mut len = self.fault_rng.between(lo, hi);
                let end = self.opts.duration;
                let quiet = self.knobs.quiet_len;
                if self.now + len + quiet > end {
                    len = end.saturating_sub(self.now + quiet);
                }
                let first = self.next_fault_gap();
                self.at(self.now + first, Ev::Fault);
                self.at(self.now + len, Ev::Phase(Phase::Quiet));
            }
            Phase::Quiet => {
                self.log(|| "faults stop: everything heals".to_owned());
                let ids: Vec<u64> = self.faults.active.keys().copied().collect();
                for id in ids {
                    self.fault_end(id);
                }
                for l in 0..self.net.links.len() {
                    let at = self.now + self.fault_rng.between(MS, 100 * MS);
                    self.schedule_redial(l, at);
                }
                self.faults.window += 1;
                let window = self.faults.window;
                let start = self.now + self.stabilisation();
                let end = self.now + self.knobs.quiet_len;
                if end <= self.opts.duration && start < end {
                    self.at(start, Ev::Probe(ProbeStep::Start { window }));
                    self.at(end - SEC, Ev::Probe(ProbeStep::Close { window }));
                }
                if end < self.opts.duration {
                    self.at(end, Ev::Phase(Phase::Chaos));
                }
            }
        }
    }

    fn next_fault_gap(&mut self) -> u64 {
        let mean = self.knobs.fault_gap;
        self.fault_rng.between(mean / 10, 2 * mean)
    }

    fn new_fault(&mut self, active: Active, lasts: u64) {
        let id = self.faults.next_id;
        self.faults.next_id += 1;
        self.faults.active.insert(id, active);
        self.at(self.now + lasts, Ev::FaultEnd(id));
        self.stats.faults += 1;
    }

    /// Injects the next fault and schedules the one after.
    pub(super) fn fault(&mut self) {
        if self.faults.phase != Phase::Chaos {
            return;
        }
        let gap = self.next_fault_gap();
        self.at(self.now + gap, Ev::Fault);
        let n = self.nodes.len();
        if let Some(v) = self.opts.victim.filter(|&v| v < n && n >= 3) {
            self.victim_fault(v);
            return;
        }
        let mut weights = self.knobs.fault_weights;
        if n == 1 {
            weights[0] = 0;
            weights[1] = 0;
            weights[2] = 0;
        }
        if weights.iter().all(|&w| w == 0) {
            return;
        }
        match self.fault_rng.weighted(&weights) {
            0 => self.fault_break(),
            1 => self.fault_partition(),
            2 => self.fault_one_way(),
            3 => self.fault_crash(),
            _ => self.fault_pause(),
        }
    }

    /// A fault of computer `v` alone (R1 runs): a pause (often past the
    /// grace), a crash, a cut of all its links (both ways, or one), or a
    /// broken link of its. Another fault of it waits for this one to end.
    fn victim_fault(&mut self, v: usize) {
        if !self.faults.active.is_empty() {
            return;
        }
        let n = self.nodes.len();
        match self.fault_rng.below(6) {
            0 | 1 => {
                if !self.running(v) {
                    return;
                }
                let lasts = if self.fault_rng.chance(500_000) {
                    self.fault_rng.between(5 * SEC, 20 * SEC)
                } else {
                    self.fault_rng.between(100 * MS, 5 * SEC)
                };
                self.log(|| format!("fault: n{v} pauses for {}", super::checker::secs(lasts)));
                self.pause(v);
                self.new_fault(Active::Pause(v), lasts);
            }
            2 => {
                if self.nodes[v].core.is_none() {
                    return;
                }
                self.crash(v);
                let lasts = self.fault_rng.between(100 * MS, 30 * SEC);
                self.new_fault(Active::Crash(vec![v]), lasts);
            }
            3 | 4 => {
                let cuts: Vec<(usize, usize)> = match self.fault_rng.below(3) {
                    0 => (0..n)
                        .filter(|&o| o != v)
                        .flat_map(|o| [(v, o), (o, v)])
                        .collect(),
                    1 => (0..n).filter(|&o| o != v).map(|o| (v, o)).collect(),
                    _ => (0..n).filter(|&o| o != v).map(|o| (o, v)).collect(),
                };
                let lasts = self.fault_rng.between(500 * MS, 30 * SEC);
                self.log(|| {
                    format!(
                        "fault: n{v} cut off {cuts:?} for {}",
                        super::checker::secs(lasts)
                    )
                });
                self.apply_cuts(cuts, lasts);
            }
            _ => {
                let mine: Vec<usize> = (0..n)
                    .filter(|&o| o != v)
                    .map(|o| self.net.link_of(v, o))
                    .filter(|&l| self.net.links[l].generation().is_some())
                    .collect();
                if mine.is_empty() {
                    return;
                }
                let l = *self.fault_rng.pick(&mine);
                self.log(|| format!("fault: link {l} of n{v} breaks"));
                self.stats.faults += 1;
                self.break_link(l);
            }
        }
    }

    /// A TCP connection dies (loss, reset): the link breaks and redials.
    fn fault_break(&mut self) {
        let up: Vec<usize> = (0..self.net.links.len())
            .filter(|&l| self.net.links[l].generation().is_some())
            .collect();
        if up.is_empty() {
            return;
        }
        let l = *self.fault_rng.pick(&up);
        self.log(|| format!("fault: link {l} breaks"));
        self.stats.faults += 1;
        self.break_link(l);
    }

    /// Splits the computers in two sides (an isolated one, random halves,
    /// or two sides joined by a bridge that sees both).
    fn fault_partition(&mut self) {
        let n = self.nodes.len();
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.fault_rng.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        let bridge = n >= 3 && self.fault_rng.chance(250_000);
        let (bridge_node, rest) = if bridge {
            (Some(order[0]), &order[1..])
        } else {
            (None, &order[..])
        };
        let side_a = self.fault_rng.between(1, rest.len() as u64 - 1) as usize;
        let (a, b) = rest.split_at(side_a);
        let mut cuts = Vec::new();
        for &x in a {
            for &y in b {
                cuts.push((x, y));
                cuts.push((y, x));
            }
        }
        let lasts = self.fault_rng.between(500 * MS, 40 * SEC);
        self.log(|| {
            format!(
                "fault: partition {a:?} | {b:?}{} for {}",
                bridge_node.map_or(String::new(), |x| format!(" bridged by n{x}")),
                super::checker::secs(lasts)
            )
        });
        self.apply_cuts(cuts, lasts);
    }

    /// One direction only: from one computer to another, from one to all,
    /// or from all to one.
    fn fault_one_way(&mut self) {
        let n = self.nodes.len();
        let x = self.fault_rng.below(n as u64) as usize;
        let mut y = self.fault_rng.below(n as u64 - 1) as usize;
        if y >= x {
            y += 1;
        }
        let cuts: Vec<(usize, usize)> = match self.fault_rng.below(3) {
            0 => vec![(x, y)],
            1 => (0..n).filter(|&o| o != x).map(|o| (x, o)).collect(),
            _ => (0..n).filter(|&o| o != x).map(|o| (o, x)).collect(),
        };
        let lasts = self.fault_rng.between(500 * MS, 30 * SEC);
        self.log(|| {
            format!(
                "fault: one-way cut {cuts:?} for {}",
                super::checker::secs(lasts)
            )
        });
        self.apply_cuts(cuts, lasts);
    }

    fn apply_cuts(&mut self, cuts: Vec<(usize, usize)>, lasts: u64) {
        for &(from, to) in &cuts {
            self.net.set_cut(from, to, true);
        }
        self.update_usable();
        self.new_fault(Active::Cut(cuts), lasts);
    }

    /// One computer crashes, or several at once (two of three leaders, all
    /// of them); each restarts later with its memory lost, from its disk.
    fn fault_crash(&mut self) {
        let alive: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].core.is_some())
            .collect();
        if alive.is_empty() {
            return;
        }
        let count = match self.fault_rng.below(10) {
            0..=6 => 1,
            7 | 8 => 2.min(alive.len()),
            _ => alive.len(),
        };
        let mut victims = alive;
        while victims.len() > count {
            let k = self.fault_rng.below(victims.len() as u64) as usize;
            victims.remove(k);
        }
        for &v in &victims {
            self.crash(v);
        }
        let lasts = self.fault_rng.between(100 * MS, 40 * SEC);
        self.new_fault(Active::Crash(victims), lasts);
    }

    /// A computer stops (SIGSTOP) for a while: sometimes shortly, sometimes
    /// longer than the grace.
    fn fault_pause(&mut self) {
        let running: Vec<usize> = (0..self.nodes.len()).filter(|&i| self.running(i)).collect();
        if running.is_empty() {
            return;
        }
        let i = *self.fault_rng.pick(&running);
        let lasts = if self.fault_rng.chance(300_000) {
            self.fault_rng.between(5 * SEC, 20 * SEC)
        } else {
            self.fault_rng.between(100 * MS, 5 * SEC)
        };
        self.pause(i);
        self.new_fault(Active::Pause(i), lasts);
    }

    /// A fault ends (or is ended by a quiet window).
    pub(super) fn fault_end(&mut self, id: u64) {
        let Some(active) = self.faults.active.remove(&id) else {
            return;
        };
        match active {
            Active::Cut(cuts) => {
                for (from, to) in cuts {
                    self.net.set_cut(from, to, false);
                }
                self.log(|| format!("fault {id} heals"));
                self.update_usable();
                self.pump_all();
            }
            Active::Pause(i) => self.resume(i),
            Active::Crash(victims) => {
                for v in victims {
                    self.restart(v);
                }
            }
        }
    }
}
