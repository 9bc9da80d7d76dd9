//! N cores on a lossless network with a fixed one-way delay.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use snaplock_proto::cluster::{Persisted, Plant};
use snaplock_proto::wire::{Message, encode_to_vec, parse, parse_line};
use snaplock_proto::{
    ClientId, ClusterConfig, Config, Core, Credentials, Input, Now, Output, PeerId, Time, UnixTime,
};

const STEP: Duration = Duration::from_millis(1);
const DELAY: Duration = Duration::from_micros(200);

pub struct Net {
    pub cores: Vec<Option<Core>>,
    addrs: Vec<SocketAddr>,
    seed: u64,
    t: Time,
    next_peer: u64,
    next_client: u64,
    /// (node, peer id) -> (other node, its peer id)
    links: BTreeMap<(usize, u64), (usize, u64)>,
    /// In flight: (arrival, to node, peer id at that node, message)
    flight: VecDeque<(Time, usize, u64, Message)>,
    clients: BTreeMap<u64, usize>,
    replies: BTreeMap<u64, VecDeque<Message>>,
    /// Peer messages delivered, by receiving node and command.
    pub delivered: BTreeMap<(usize, String), usize>,
    /// The last peer message of each command delivered, by receiving node.
    pub last: BTreeMap<(usize, String), Message>,
    /// Nodes that do not run (SIGSTOP): their messages wait, their links
    /// stay up.
    paused: Vec<bool>,
    held: VecDeque<(Time, usize, u64, Message)>,
    /// The next `count` messages of `command` that node `from` sends are
    /// lost (as with a link that broke and came back at once).
    lose: Vec<(usize, String, usize)>,
    /// Each node's disk: the last record its core asked to keep, handed to
    /// the core that restarts there.
    pub disks: Vec<Persisted>,
    /// How far each node's wall clock is from the others', ms.
    pub skew_ms: Vec<i64>,
    /// Nodes whose sockets fill up once they send a `LOCKTICKETS` line (a
    /// report or a state): from that line on, what they send waits, in
    /// order, until this is cleared, and their shell says so
    /// (`Core::set_peer_backlog`).
    pub backlog: Vec<bool>,
    /// Per node: its sockets are full now.
    full: Vec<bool>,
    /// What full sockets hold: (from, to node, peer id at that node, message).
    unsent: VecDeque<(usize, usize, u64, Message)>,
    /// A bug planted in the cores made from now on.
    pub plant: Plant,
    /// The `report_step` of the cores made from now on (default if unset).
    pub report_step: Option<usize>,
    /// The cgroups each node watches (`Output::WatchUnit`), as (node, unit).
    pub watched: BTreeSet<(usize, u64)>,
    /// The cgroup the clients opened next are in.
    cgroup: Option<u64>,
}

fn now_of(t: Time) -> Now {
    Now {
        mono: t,
        wall: UnixTime(1_800_000_000_000_000 + t.as_micros()),
    }
}

impl Net {
    pub fn new(n: usize, seed: u64) -> Net {
        Net::with_skew(n, seed, vec![0; n])
    }

    /// `n` nodes whose wall clocks are `skew_ms` apart from true time.
    pub fn with_skew(n: usize, seed: u64, skew_ms: Vec<i64>) -> Net {
        Net::build(n, seed, skew_ms, None)
    }

    /// `n` nodes whose reports walk `step` tickets a call.
    pub fn with_report_step(n: usize, seed: u64, step: usize) -> Net {
        Net::build(n, seed, vec![0; n], Some(step))
    }

    fn build(n: usize, seed: u64, skew_ms: Vec<i64>, report_step: Option<usize>) -> Net {
        let addrs: Vec<SocketAddr> = (0..n)
            .map(|i| format!("127.0.0.1:{}", 4000 + i).parse().unwrap())
            .collect();
        let mut net = Net {
            cores: Vec::new(),
            addrs,
            seed,
            t: Time::from_micros(1_000_000),
            next_peer: 1,
            next_client: 1,
            links: BTreeMap::new(),
            flight: VecDeque::new(),
            clients: BTreeMap::new(),
            replies: BTreeMap::new(),
            delivered: BTreeMap::new(),
            last: BTreeMap::new(),
            paused: vec![false; n],
            backlog: vec![false; n],
            full: vec![false; n],
            unsent: VecDeque::new(),
            held: VecDeque::new(),
            lose: Vec::new(),
            disks: vec![Persisted::default(); n],
            skew_ms,
            plant: Plant::None,
            report_step,
            watched: BTreeSet::new(),
            cgroup: None,
        };
        for i in 0..n {
            let core = net.make(i);
            net.cores.push(Some(core));
        }
        for i in 0..n {
            for j in i + 1..n {
                net.connect(i, j);
            }
        }
        net
    }

    fn make(&mut self, i: usize) -> Core {
        self.seed += 1000;
        let config = Config {
            server_name: format!("node{i}"),
            cluster: ClusterConfig {
                listen: Some(self.addrs[i]),
                neighbors: self.addrs.clone(),
                seed: self.seed + i as u64,
                pid: 100 + i as u32,
                persisted: self.disks[i],
                plant: self.plant,
                report_step: self
                    .report_step
                    .unwrap_or(ClusterConfig::default().report_step),
                ..ClusterConfig::default()
            },
            ..Config::default()
        };
        config.validate().unwrap();
        Core::new(config, self.now(i))
    }

    /// Whether node `i`'s core asks to be called again at once (it has
    /// work left: its report, or messages to itself).
    pub fn has_work_now(&self, i: usize) -> bool {
        (self.cores[i].as_ref())
            .and_then(Core::poll_timeout)
            .is_some_and(|at| at <= self.t)
    }

    /// Node `i`'s wall clock, in ms.
    pub fn wall_ms(&self, i: usize) -> u64 {
        self.now(i).wall.0 / 1000
    }

    /// Node `i`'s time: the common monotonic time, its own wall clock.
    fn now(&self, i: usize) -> Now {
        let now = now_of(self.t);
        let skew = self.skew_ms.get(i).copied().unwrap_or(0) * 1000;
        Now {
            mono: now.mono,
            wall: UnixTime(now.wall.0.saturating_add_signed(skew)),
        }
    }

    fn connect(&mut self, i: usize, j: usize) {
        let (pi, pj) = (self.next_peer, self.next_peer + 1);
        self.next_peer += 2;
        self.links.insert((i, pi), (j, pj));
        self.links.insert((j, pj), (i, pi));
        let now = now_of(self.t);
        let (ai, aj) = (self.addrs[i], self.addrs[j]);
        self.input(
            i,
            Input::PeerUp {
                peer: PeerId(pi),
                name: format!("node{j}"),
                addr: aj,
            },
            now,
        );
        self.input(
            j,
            Input::PeerUp {
                peer: PeerId(pj),
                name: format!("node{i}"),
                addr: ai,
            },
            now,
        );
    }

    fn input(&mut self, i: usize, input: Input, _now: Now) {
        let now = self.now(i);
        if let Some(core) = self.cores[i].as_mut() {
            core.handle_input(now, input).unwrap();
        }
        self.drain(i);
    }

    fn drain(&mut self, i: usize) {
        loop {
            let Some(core) = self.cores[i].as_mut() else {
                return;
            };
            let Some(out) = core.poll_output() else {
                return;
            };
            match out {
                Output::Reply { client, reply } => {
                    let msg = reply.into_message();
                    self.replies.entry(client.0).or_default().push_back(msg);
                }
                Output::Close { .. } => {}
                Output::PeerSend { peer, line } => {
                    let msg = parse_line(&line).expect("the core sends lines that parse");
                    // Given back, as the agent does: the next lines are
                    // written in used buffers.
                    core.recycle_line(line);
                    if let Some(rule) = self.lose.iter_mut().find(|(from, cmd, n)| {
                        *from == i && carries(&msg).contains(&&**cmd) && *n > 0
                    }) {
                        rule.2 -= 1;
                        continue;
                    }
                    if let Some(&(j, pj)) = self.links.get(&(i, peer.0)) {
                        self.full[i] |= self.backlog[i] && msg.command == "LOCKTICKETS";
                        if self.full[i] {
                            self.unsent.push_back((i, j, pj, msg));
                        } else {
                            self.flight.push_back((self.t + DELAY, j, pj, msg));
                        }
                    }
                }
                Output::PeerClose { peer } => self.break_link(i, peer.0),
                Output::Persist(record) => self.disks[i] = record,
                Output::WatchUnit { unit, .. } => {
                    assert!(self.watched.insert((i, unit)), "watched twice: {unit}");
                }
                Output::UnwatchUnit { unit } => {
                    self.watched.remove(&(i, unit));
                }
            }
        }
    }

    fn break_link(&mut self, i: usize, p: u64) {
        if let Some((j, pj)) = self.links.remove(&(i, p)) {
            self.links.remove(&(j, pj));
            self.flight
                .retain(|(_, to, tp, _)| !((*to == j && *tp == pj) || (*to == i && *tp == p)));
            let now = now_of(self.t);
            self.input(i, Input::PeerDown { peer: PeerId(p) }, now);
            self.input(j, Input::PeerDown { peer: PeerId(pj) }, now);
        }
    }

    pub fn step(&mut self) {
        self.t = self.t + STEP;
        let now = now_of(self.t);
        while self.flight.front().is_some_and(|(at, ..)| *at <= self.t) {
            let (at, to, p, msg) = self.flight.pop_front().unwrap();
            if self.paused[to] {
                self.held.push_back((at, to, p, msg));
                continue;
            }
            if self.links.contains_key(&(to, p)) {
                for command in carries(&msg) {
                    *self.delivered.entry((to, command.to_owned())).or_default() += 1;
                }
                self.last.insert((to, msg.command.to_string()), msg.clone());
                let mut line = encode_to_vec(&msg);
                line.pop();
                self.input(
                    to,
                    Input::PeerLine {
                        peer: PeerId(p),
                        line,
                    },
                    now,
                );
            }
        }
        for i in 0..self.cores.len() {
            if self.paused[i] {
                continue;
            }
            if self.full[i] && !self.backlog[i] {
                self.full[i] = false;
                let (mine, rest): (Vec<_>, Vec<_>) = self.unsent.drain(..).partition(|m| m.0 == i);
                self.unsent = rest.into();
                for (_, j, pj, msg) in mine {
                    if self.links.contains_key(&(j, pj)) {
                        self.flight.push_back((self.t + DELAY, j, pj, msg));
                    }
                }
            }
            let now = self.now(i);
            if let Some(core) = self.cores[i].as_mut() {
                // Every link: the state's among them.
                let peers: Vec<PeerId> = if self.full[i] {
                    (self.links.keys())
                        .filter(|(n, _)| *n == i)
                        .map(|(_, p)| PeerId(*p))
                        .collect()
                } else {
                    Vec::new()
                };
                core.set_peer_backlog(&peers);
                if core.poll_timeout().is_some_and(|at| at <= self.t) {
                    core.handle_timeout(now);
                }
            }
            self.drain(i);
        }
    }

    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Net) -> bool) {
        let end = self.t + limit;
        while self.t < end {
            if done(self) {
                return;
            }
            self.step();
        }
        panic!("not done within {limit:?}");
    }

    pub fn run_for(&mut self, d: Duration) {
        let end = self.t + d;
        while self.t < end {
            self.step();
        }
    }

    /// The wall clock now, Unix seconds.
    pub fn wall_secs(&self) -> f64 {
        now_of(self.t).wall.0 as f64 / 1e6
    }

    pub fn all_ready(&mut self) -> bool {
        (0..self.cores.len()).all(|i| self.cores[i].as_ref().is_none_or(|c| c.is_ready()))
    }

    pub fn open(&mut self, i: usize) -> u64 {
        let c = self.next_client;
        self.next_client += 1;
        self.clients.insert(c, i);
        let cred = Credentials {
            pid: Some(1000 + c as u32),
            uid: Some(0),
            gid: Some(0),
            cgroup: self.cgroup,
        };
        self.input(
            i,
            Input::ClientOpened {
                client: ClientId(c),
                cred,
            },
            now_of(self.t),
        );
        c
    }

    /// [`open`](Self::open), from a process in cgroup `unit`.
    pub fn open_in_cgroup(&mut self, i: usize, unit: u64) -> u64 {
        self.cgroup = Some(unit);
        let c = self.open(i);
        self.cgroup = None;
        c
    }

    /// Node `i`'s shell reports cgroup `unit` empty.
    pub fn unit_empty(&mut self, i: usize, unit: u64) {
        let now = now_of(self.t);
        self.input(i, Input::UnitEmpty { unit }, now);
    }

    pub fn send(&mut self, c: u64, line: &str) {
        let i = self.clients[&c];
        let msg = parse(line.as_bytes()).unwrap();
        self.input(
            i,
            Input::ClientMessage {
                client: ClientId(c),
                msg,
            },
            now_of(self.t),
        );
    }

    pub fn close(&mut self, c: u64) {
        let i = self.clients[&c];
        self.input(
            i,
            Input::ClientClosed {
                client: ClientId(c),
            },
            now_of(self.t),
        );
    }

    pub fn wait_reply(&mut self, c: u64, limit: Duration) -> Option<Message> {
        let end = self.t + limit;
        loop {
            if let Some(m) = self.replies.get_mut(&c).and_then(|q| q.pop_front()) {
                return Some(m);
            }
            if self.t >= end {
                return None;
            }
            self.step();
        }
    }

    pub fn info(&mut self, i: usize) -> Message {
        let c = self.open(i);
        self.send(c, "INFO");
        let m = self
            .replies
            .get_mut(&c)
            .and_then(|q| q.pop_front())
            .unwrap();
        self.close(c);
        m
    }

    pub fn crash(&mut self, i: usize) {
        let mine: Vec<u64> = self
            .links
            .keys()
            .filter(|(n, _)| *n == i)
            .map(|(_, p)| *p)
            .collect();
        for p in mine {
            self.break_link(i, p);
        }
        self.cores[i] = None;
    }

    /// Breaks the link between `i` and `j` (both see it go down).
    pub fn cut(&mut self, i: usize, j: usize) {
        let p = self
            .links
            .iter()
            .find(|((n, _), (m, _))| *n == i && *m == j)
            .map(|((_, p), _)| *p);
        if let Some(p) = p {
            self.break_link(i, p);
        }
    }

    /// Links `i` and `j` again.
    pub fn join(&mut self, i: usize, j: usize) {
        if self.cores[i].is_some() && self.cores[j].is_some() {
            self.connect(i, j);
        }
    }

    /// Node `i` stops running (or runs again): what is sent to it waits.
    pub fn pause(&mut self, i: usize, paused: bool) {
        self.paused[i] = paused;
        if !paused {
            let (mine, rest): (Vec<_>, Vec<_>) = self.held.drain(..).partition(|m| m.1 == i);
            self.held = rest.into();
            for m in mine.into_iter().rev() {
                self.flight.push_front(m);
            }
        }
    }

    /// The next `count` `command` messages node `from` sends are lost (a
    /// line that carries two messages is lost whole).
    pub fn lose(&mut self, from: usize, command: &str, count: usize) {
        self.lose.push((from, command.to_owned(), count));
    }

    /// How many `command` messages node `i` received from its peers.
    pub fn count(&self, i: usize, command: &str) -> usize {
        self.delivered
            .get(&(i, command.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// The node that owns `object` in node `i`'s epoch, by the rule of
    /// docs/cluster.md (`leaders[fnv1a64(name) % len]`; ids end in the
    /// server name).
    pub fn owner_of(&mut self, i: usize, object: &str) -> usize {
        let leaders = self.info(i).get_str("leaders").unwrap().to_owned();
        let leaders: Vec<&str> = leaders.split(',').collect();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in object.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let id = leaders[(h % leaders.len() as u64) as usize];
        let name = id.rsplit('|').next().unwrap();
        name.strip_prefix("node").unwrap().parse().unwrap()
    }

    /// The first of `prefix0`, `prefix1`, ... that node `owner` owns in
    /// node 0's epoch.
    pub fn name_owned_by(&mut self, prefix: &str, owner: usize) -> String {
        (0..1000)
            .map(|k| format!("{prefix}{k}"))
            .find(|n| self.owner_of(0, n) == owner)
            .unwrap_or_else(|| panic!("no {prefix}* name of node {owner}"))
    }

    /// Whether node `i`'s sockets are full (`backlog`).
    pub fn sockets_full(&self, i: usize) -> bool {
        self.full[i]
    }

    /// How many epochs' states node `i` installed as a leader (its
    /// `snaplock_handover_seconds` count).
    pub fn installs(&mut self, i: usize) -> u64 {
        let now = self.now(i);
        let text = self.cores[i].as_ref().expect("running").metrics_text(now);
        (text.lines())
            .find_map(|l| l.strip_prefix("snaplock_handover_seconds_count "))
            .map_or(0, |n| n.trim().parse().expect("a count"))
    }

    /// The leaders of node `i`'s epoch, as nodes, in order.
    pub fn leader_nodes(&mut self, i: usize) -> Vec<usize> {
        let leaders = self.info(i).get_str("leaders").unwrap().to_owned();
        leaders
            .split(',')
            .map(|id| {
                let name = id.rsplit('|').next().unwrap();
                name.strip_prefix("node").unwrap().parse().unwrap()
            })
            .collect()
    }

    /// Delivers `line` to node `to` as if node `from` had sent it on their
    /// link (a peer with the secret can send anything).
    pub fn inject(&mut self, to: usize, from: usize, line: &str) {
        let p = self
            .links
            .iter()
            .find(|((n, _), (m, _))| *n == to && *m == from)
            .map(|((_, p), _)| *p)
            .expect("linked");
        self.input(
            to,
            Input::PeerLine {
                peer: PeerId(p),
                line: line.as_bytes().to_vec(),
            },
            now_of(self.t),
        );
    }

    pub fn restart(&mut self, i: usize) {
        let core = self.make(i);
        self.cores[i] = Some(core);
        for j in 0..self.cores.len() {
            if j != i && self.cores[j].is_some() {
                self.connect(i, j);
            }
        }
    }
}

/// The messages a line carries: an `ADDTICKET` with a `fence` is also the
/// `ACTIVATELOCK` of its ticket.
fn carries(msg: &Message) -> Vec<&str> {
    if msg.command == "ADDTICKET" && msg.get("fence").is_some() {
        vec!["ADDTICKET", "ACTIVATELOCK"]
    } else {
        vec![msg.command.as_str()]
    }
}
