//! The world: the event queue, the computers and their shells, the links,
//! and what every part that acts on them shares (the checker, the trace,
//! the counts). It knows nothing of those parts: faults, the workload and
//! the probes are given the world to act on, and the run (`run.rs`) hands
//! them the events they scheduled.
//!
//! Every event is `(true time, sequence number, what)`; the sequence number
//! makes the order of events of one instant the order they were scheduled.
//! Deliveries to clients and from clients to their agent go through the
//! queue too (at the same instant), so no handler ever calls back into a
//! core that is in the middle of something.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use snaplock_proto::cluster::Persisted;
use snaplock_proto::wire::{self, Message};
use snaplock_proto::{ClientId, ClusterConfig, Core, Input, Output};

use super::checker::{Checker, secs};
use super::clock::Clock;
use super::events::{Ev, Phase};
use super::net::{LinkState, Net};
use super::rng::Rng;
use super::trace::Trace;
use super::wire::Wire;
use super::{Knobs, MS, Options, Report, SEC, Stats};

/// Most events one run may process: a core that asks to be woken again and
/// again at the same instant must not hang the test.
const MAX_EVENTS: u64 = 200_000_000;
/// The simulated agents' `report_step`, and the time between two steps:
/// a report of 40 tickets takes 10 ms, in which the world goes on.
const SIM_REPORT_STEP: usize = 4;
const SIM_REPORT_STEP_PAUSE: std::time::Duration = std::time::Duration::from_millis(1);

/// A queue entry; the event itself waits in the world's slab, so the heap
/// moves small entries only.
struct Scheduled {
    at: u64,
    seq: u64,
    slot: usize,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Reversed: the heap pops the earliest.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// One computer: its clock, and its agent when it runs.
pub(super) struct Node {
    pub name: String,
    pub addr: SocketAddr,
    pub clock: Clock,
    pub core: Option<Core>,
    /// Bumped at every crash: inputs for an older incarnation are lost.
    pub incarnation: u64,
    pub paused: bool,
    /// Inputs that reached a paused agent, in order.
    pub pending: VecDeque<Input>,
    /// The earliest `Wake` scheduled for it.
    pub wake_at: Option<u64>,
    pub wakes_here: (u64, u32),
    /// When it last started running (start, restart or resume).
    pub running_since: u64,
    /// Its disk: the record its agent asked to keep (`Output::Persist`),
    /// kept across crashes and handed to the next agent.
    pub disk: Persisted,
}

/// The agent's side of a client connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CoreSide {
    Open,
    /// Closed by either side; the core has not been told yet.
    Closing,
    /// The core was told (or died).
    Closed,
}

/// Who a connection belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Who {
    Worker(usize),
    /// A transaction client (`Options::transactions`).
    TxClient(usize),
    Probe,
}

/// A client connection to one incarnation of one agent.
#[derive(Clone, Copy, Debug)]
pub(super) struct Conn {
    pub node: usize,
    pub incarnation: u64,
    pub who: Who,
    /// The client still reads from it.
    pub client_open: bool,
    pub core: CoreSide,
}

pub(super) struct World {
    pub opts: Options,
    pub knobs: Knobs,
    /// Independent streams, all from the seed (the faults own theirs): a
    /// change in what cores do shifts the network's and the workload's
    /// draws, never the faults'.
    pub rng: Rng,
    pub net_rng: Rng,
    pub core_rng: Rng,
    pub now: u64,
    queue: BinaryHeap<Scheduled>,
    slab: Vec<Option<Ev>>,
    free: Vec<usize>,
    seq: u64,
    pub nodes: Vec<Node>,
    pub net: Net,
    pub cluster: ClusterConfig,
    pub conns: BTreeMap<ClientId, Conn>,
    next_conn: u64,
    pub checker: Checker,
    pub trace: Trace,
    pub wire: Wire,
    /// Whether faults run: quiet windows have shorter message delays and
    /// redial backoffs.
    pub phase: Phase,
    pub stats: Stats,
    pub next_req: u64,
    pub stopped: bool,
    /// When each computer was paused, and which: the transaction checker
    /// lets the variables of its connections vanish from then on.
    pub pauses: Vec<(u64, usize)>,
}

/// The `listen` address of computer `i`.
fn addr_of(i: usize) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(
        Ipv4Addr::LOCALHOST,
        4000 + u16::try_from(i).expect("few nodes"),
    ))
}

impl World {
    /// The world of a run: its computers started, their links about to be
    /// dialled. Also returns the faults' own stream, forked from the seed's
    /// after the clocks' draws.
    pub fn new(opts: &Options) -> (World, Rng) {
        let mut rng = Rng::new(opts.seed);
        let mut knobs = Knobs::draw(&mut rng, opts.nodes);
        if opts.victim.is_some() {
            // R1's network: one-way delays of at most R1_DELAY (with the
            // 500 ms some runs draw, a ping's round trip alone is half the
            // peer timeout, and the failover outlasts its budget).
            knobs.delay.1 = knobs.delay.1.min(super::R1_DELAY);
            knobs.delay.0 = knobs.delay.0.min(knobs.delay.1);
        }
        let cluster = ClusterConfig {
            plant: opts.plant,
            // Reports of a few tickets a step: every report of more is
            // written over several calls, as a large one is by an agent.
            report_step: SIM_REPORT_STEP,
            report_step_pause: SIM_REPORT_STEP_PAUSE,
            ..ClusterConfig::default()
        };
        let rho = i64::from(cluster.drift_ppm);
        let mut nodes = Vec::new();
        for i in 0..knobs.nodes {
            let drift_ppm = if knobs.drift {
                rng.between(0, 2 * rho as u64) as i64 - rho
            } else {
                0
            };
            nodes.push(Node {
                name: format!("n{i}"),
                addr: addr_of(i),
                clock: Clock {
                    drift_ppm,
                    mono_origin: rng.between(SEC, 100_000 * SEC),
                    wall_offset: if knobs.ntp {
                        1_700_000_000 * SEC + rng.between(0, 100 * MS)
                    } else {
                        1_700_000_000 * SEC + rng.between(0, 10_000 * SEC)
                    },
                    ntp: knobs.ntp,
                },
                core: None,
                incarnation: 0,
                paused: false,
                pending: VecDeque::new(),
                wake_at: None,
                wakes_here: (0, 0),
                running_since: 0,
                disk: Persisted::default(),
            });
        }
        let n = knobs.nodes;
        let fault_rng = rng.fork();
        let net_rng = rng.fork();
        let core_rng = rng.fork();
        let mut world = World {
            opts: opts.clone(),
            rng,
            net_rng,
            core_rng,
            now: 0,
            queue: BinaryHeap::new(),
            slab: Vec::new(),
            free: Vec::new(),
            seq: 0,
            nodes,
            net: Net::new(n),
            cluster,
            conns: BTreeMap::new(),
            next_conn: 1,
            checker: Checker::new(),
            trace: Trace::new(opts.verbose, opts.keep_lines),
            wire: Wire::new(n),
            phase: Phase::Chaos,
            stats: Stats::default(),
            next_req: 1,
            stopped: false,
            pauses: Vec::new(),
            knobs,
        };
        world.checker.liveness = opts.liveness;
        for i in 0..n {
            world.start_core(i);
        }
        for l in 0..world.net.links.len() {
            let at = world.net_rng.between(0, 100 * MS);
            world.schedule_redial(l, at);
        }
        (world, fault_rng)
    }

    pub fn at(&mut self, at: u64, ev: Ev) {
        debug_assert!(at >= self.now, "scheduling in the past");
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slab[slot] = Some(ev);
                slot
            }
            None => {
                self.slab.push(Some(ev));
                self.slab.len() - 1
            }
        };
        self.queue.push(Scheduled {
            at: at.max(self.now),
            seq: self.seq,
            slot,
        });
    }

    pub fn log(&mut self, f: impl FnOnce() -> String) {
        if self.trace.logging() {
            let line = format!("{:>14} {}", secs(self.now), f());
            self.trace.line(line);
        }
    }

    /// The next event, the clock moved to its instant; `None` when the
    /// queue is empty or the run took too many events.
    pub fn next_event(&mut self) -> Option<Ev> {
        let s = self.queue.pop()?;
        self.now = s.at;
        self.stats.events += 1;
        if self.stats.events > MAX_EVENTS {
            self.checker
                .report(self.now, "harness", "too many events".to_owned());
            return None;
        }
        self.trace.num(s.at);
        let ev = self.slab[s.slot].take().expect("a queued event");
        self.free.push(s.slot);
        Some(ev)
    }

    /// Whether the run is over: it ended, or broke a property and stops at
    /// the first.
    pub fn done(&self) -> bool {
        self.stopped || (self.opts.stop_at_first && !self.checker.violations().is_empty())
    }

    pub fn report(&self) -> Report {
        Report {
            seed: self.opts.seed,
            knobs: self.knobs.clone(),
            trace_hash: self.trace.hash(),
            violations: self.checker.violations().to_vec(),
            stats: self.stats.clone(),
            tail: self.trace.tail(),
            end: self.now,
        }
    }

    /// Whether computer `i` runs: started and not paused.
    pub fn running(&self, i: usize) -> bool {
        self.nodes[i].core.is_some() && !self.nodes[i].paused
    }

    pub fn running_flags(&self) -> Vec<bool> {
        (0..self.nodes.len()).map(|i| self.running(i)).collect()
    }

    pub fn update_usable(&mut self) {
        let running = self.running_flags();
        self.net.update_usable(self.now, &running);
    }

    /// Gives an input to computer `i`'s agent now, or keeps it for when it
    /// resumes.
    pub fn feed(&mut self, i: usize, input: Input) {
        let node = &mut self.nodes[i];
        if node.core.is_none() {
            return;
        }
        if node.paused {
            node.pending.push_back(input);
            return;
        }
        self.feed_now(i, input);
        self.drain(i);
        self.reschedule(i);
    }

    /// Hands `input` to the running core `i`, without draining.
    pub fn feed_now(&mut self, i: usize, input: Input) {
        if let Input::ClientClosed { client } = input {
            if let Some(c) = self.conns.get_mut(&client) {
                c.core = CoreSide::Closed;
            }
        }
        if let Input::ClientMessage { client, .. } = &input {
            if self
                .conns
                .get(client)
                .is_some_and(|c| c.core == CoreSide::Closed)
            {
                return; // written after the socket closed: never read
            }
        }
        self.trace_input(i, &input);
        if let Input::PeerLine { line, .. } = &input {
            if let Ok(msg) = wire::parse(line) {
                self.wire.processed(i, &msg);
            }
        }
        super::corelog::at(i, self.now);
        let now = self.nodes[i].clock.now(self.now);
        let core = self.nodes[i].core.as_mut().expect("running");
        if let Err(e) = core.handle_input(now, input) {
            let what = format!("n{i} refused an input: {e}");
            self.checker.report(self.now, "harness", what);
        }
    }

    fn trace_input(&mut self, i: usize, input: &Input) {
        self.trace.num(i as u64);
        match input {
            Input::ClientOpened { client, .. } => {
                self.trace.bytes(b"open");
                self.trace.num(client.0);
            }
            Input::ClientMessage { client, msg } => {
                self.trace.num(client.0);
                self.trace.message(msg);
                self.log(|| format!("n{i} <- c{} {}", client.0, show(msg)));
            }
            Input::ClientMalformed { client, .. } => self.trace.num(client.0),
            Input::ClientClosed { client } => {
                self.trace.bytes(b"closed");
                self.trace.num(client.0);
                self.log(|| format!("n{i} <- c{} closed", client.0));
            }
            Input::PeerUp { peer, name, .. } => {
                self.trace.bytes(b"up");
                self.trace.num(peer.0);
                self.log(|| format!("n{i} link {} up to {name}", peer.0));
            }
            Input::PeerLine { peer, line } => {
                self.trace.num(peer.0);
                let msg = wire::parse(line).unwrap_or_default();
                let msg = &msg;
                self.trace.message(msg);
                self.stats.peer_messages += 1;
                self.log(|| format!("n{i} <- p{} {}", peer.0, show(msg)));
            }
            Input::PeerDown { peer } => {
                self.trace.bytes(b"down");
                self.trace.num(peer.0);
                self.log(|| format!("n{i} link {} down", peer.0));
            }
            Input::UnitEmpty { unit } => {
                unreachable!("n{i}: the simulator watches no cgroup, yet unit {unit} emptied")
            }
        }
    }

    /// Carries out everything core `i` asked for.
    pub fn drain(&mut self, i: usize) {
        while let Some(out) = self.nodes[i].core.as_mut().and_then(Core::poll_output) {
            self.output(i, out);
        }
    }

    fn output(&mut self, i: usize, out: Output) {
        self.trace.num(i as u64 + 1_000);
        match out {
            Output::Reply { client, reply } => {
                let msg = reply.into_message();
                self.trace.num(client.0);
                self.trace.message(&msg);
                self.log(|| format!("n{i} -> c{} {}", client.0, show(&msg)));
                let incarnation = self.nodes[i].incarnation;
                match self.conns.get(&client).copied() {
                    Some(c) if c.node == i && c.incarnation == incarnation => match c.core {
                        CoreSide::Closed => self.checker.report(
                            self.now,
                            "S4",
                            format!("n{i} replied on c{} after it closed: {msg}", client.0),
                        ),
                        _ if c.client_open => {
                            self.at(self.now, Ev::ClientRecv { conn: client, msg });
                        }
                        _ => {}
                    },
                    _ => self.checker.report(
                        self.now,
                        "S7",
                        format!(
                            "n{i} replied on c{}, a connection this agent never had: {msg}",
                            client.0
                        ),
                    ),
                }
            }
            Output::Close { client } => {
                self.trace.bytes(b"close");
                self.trace.num(client.0);
                self.log(|| format!("n{i} closes c{}", client.0));
                self.close_conn(client);
            }
            Output::PeerSend { peer, line } => {
                let msg = match wire::parse_line(&line) {
                    Ok(msg) => msg,
                    Err(e) => {
                        let what = format!("n{i} sent a line that does not parse ({e}): {line:?}");
                        self.checker.report(self.now, "harness", what);
                        return;
                    }
                };
                // Given back, as the agent does: the cores write their next
                // lines in used buffers.
                if let Some(core) = self.nodes[i].core.as_mut() {
                    core.recycle_line(line);
                }
                self.trace.num(peer.0);
                self.trace.message(&msg);
                if let Err(what) = self.wire.sent(i, &msg) {
                    self.checker.report(self.now, "S6", what);
                }
                let Some((l, end)) = self.net.peer(peer) else {
                    return; // the link is gone: the write fails
                };
                let LinkState::Up { generation, .. } = self.net.links[l].state else {
                    return;
                };
                let (lo, hi) = self.delay_range();
                let delay = self.net_rng.between(lo, hi);
                let ready = self.net.send(l, end, msg, self.now, delay);
                self.at(
                    ready,
                    Ev::Pump {
                        link: l,
                        generation,
                        dir: end,
                    },
                );
            }
            Output::Persist(record) => {
                // Written at once and durably: what the agent says after
                // asking for it comes after it is on disk.
                self.log(|| format!("n{i} keeps {record}"));
                self.nodes[i].disk = record;
            }
            Output::WatchUnit { .. } | Output::UnwatchUnit { .. } => {
                unreachable!("n{i}: a client without a cgroup owns a lock by unit: {out:?}")
            }
            Output::PeerClose { peer } => {
                self.trace.bytes(b"peerclose");
                self.trace.num(peer.0);
                if let Some((l, _)) = self.net.peer(peer) {
                    self.log(|| format!("n{i} closes link {}", peer.0));
                    self.break_link(l);
                }
            }
        }
    }

    /// Closes a connection from the agent's side (asked by the core, or
    /// the agent died): the client sees it drop after what was sent before.
    fn close_conn(&mut self, conn: ClientId) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.core != CoreSide::Open {
            return;
        }
        c.core = CoreSide::Closing;
        let (node, incarnation) = (c.node, c.incarnation);
        if c.client_open {
            self.at(self.now, Ev::ConnDropped(conn));
        }
        self.at(
            self.now,
            Ev::Input {
                node,
                incarnation,
                input: Input::ClientClosed { client: conn },
            },
        );
    }

    /// Opens a client connection to computer `i` (queued if it is paused).
    pub fn open_conn(&mut self, i: usize, who: Who, uid: u32) -> Option<ClientId> {
        self.nodes[i].core.as_ref()?;
        let conn = ClientId(self.next_conn);
        self.next_conn += 1;
        let incarnation = self.nodes[i].incarnation;
        self.conns.insert(
            conn,
            Conn {
                node: i,
                incarnation,
                who,
                client_open: true,
                core: CoreSide::Open,
            },
        );
        let cred = snaplock_proto::Credentials {
            pid: Some(10_000 + uid),
            uid: Some(uid),
            gid: Some(uid),
            // Simulated clients are in no cgroup: `owner=cgroup` is
            // refused (`error=invalid`), so the core never asks to watch one.
            cgroup: None,
        };
        self.at(
            self.now,
            Ev::Input {
                node: i,
                incarnation,
                input: Input::ClientOpened { client: conn, cred },
            },
        );
        Some(conn)
    }

    /// A client sends `msg` on `conn`.
    pub fn send(&mut self, conn: ClientId, msg: Message) {
        let Some(c) = self.conns.get(&conn).copied() else {
            return;
        };
        if !c.client_open || c.core == CoreSide::Closed {
            return;
        }
        self.at(
            self.now,
            Ev::Input {
                node: c.node,
                incarnation: c.incarnation,
                input: Input::ClientMessage { client: conn, msg },
            },
        );
    }

    /// A client closes `conn`.
    pub fn client_close(&mut self, conn: ClientId) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.client_open = false;
        if c.core == CoreSide::Open {
            c.core = CoreSide::Closing;
            let (node, incarnation) = (c.node, c.incarnation);
            self.at(
                self.now,
                Ev::Input {
                    node,
                    incarnation,
                    input: Input::ClientClosed { client: conn },
                },
            );
        }
    }

    /// Who reads a reply on `conn` now, if anyone does.
    pub fn reader(&self, conn: ClientId) -> Option<Conn> {
        self.conns.get(&conn).copied().filter(|c| c.client_open)
    }

    /// The client of `conn` sees it drop; returns whom to tell.
    pub fn conn_dropped(&mut self, conn: ClientId) -> Option<Who> {
        let c = self.conns.get_mut(&conn)?;
        if !c.client_open {
            return None;
        }
        c.client_open = false;
        let who = c.who;
        self.log(|| format!("c{} sees its connection drop", conn.0));
        Some(who)
    }
}

/// A message as one log line.
pub fn show(msg: &Message) -> String {
    format!("{msg}").trim_end().to_owned()
}
