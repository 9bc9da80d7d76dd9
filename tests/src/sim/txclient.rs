//! Transaction clients (runs with `Options::transactions`): each lives on
//! one computer, talks to that computer's agent and sends `TRANSACTION`s,
//! one at a time, on a few namespaces of a few variables each; it records
//! every one and its answer in the run's [`TxChecker`], and checks T4 (the
//! replies match what is in flight) as they come.
//!
//! ```text
//! Disconnected ──connect──▶ Idle ──TRANSACTION──▶ Waiting
//!      ▲                     │  ▲                   │  │
//!      ├────── close ────────┘  └───── answer ──────┘  │
//!      └────────────── close / give up / dropped ──────┘
//! ```
//!
//! They draw from a stream of their own, seeded apart from the world's:
//! runs without them draw exactly what they drew before they existed.

use snaplock_proto::ClientId;
use snaplock_proto::wire::Message;

use super::events::Ev;
use super::rng::Rng;
use super::txcheck::{TxChecker, TxId, TxSent};
use super::world::{Who, World};
use super::{MS, SEC};
use crate::txmodel::{Op, Stmt};

/// Mixed into the seed for the clients' own stream.
const STREAM: u64 = 0x7472_616e_7361_6374;

/// Namespace names to draw from.
const NAMESPACES: [&str; 3] = ["Clinical", "sky.os:jobs-2", "T_3"];

/// Variables to draw from, each with the ways it may be written (the
/// first is its canonical name in the history): keys, `%XX` escapes of
/// plain bytes, and an escaped `/` that keeps a key whole.
const VARIABLES: [&[&str]; 8] = [
    &["Month-End/CGROVE-35", "Month-End/CGROVE%2D35"],
    &["MDS-Entry/CGROVE-35/R-45899"],
    &[
        "MDS-Review/CGROVE-35/R-45899",
        "MDS-Review/CGROVE-35/R%2D45899",
    ],
    &["lock", "%6Cock"],
    &["dir/a%2Fb"],
    &["dir/a/b"],
    &["%25/x%20y"],
    &["Q"],
];

/// The longest a client waits for an answer before it closes.
const PATIENCE: u64 = 30 * SEC;

/// `duration=`: a week, so that nothing expires within a run.
const DURATION: &str = "604800";

/// One namespace and the variables (indices in [`VARIABLES`]) used in it.
#[derive(Debug)]
struct Space {
    name: &'static str,
    vars: Vec<usize>,
}

#[derive(Clone, Debug)]
enum State {
    Disconnected,
    Idle,
    Waiting {
        tag: u64,
        id: TxId,
        namespace: &'static str,
    },
}

#[derive(Debug)]
struct Client {
    node: usize,
    uid: u32,
    pids: [u64; 2],
    conn: Option<ClientId>,
    state: State,
    generation: u64,
    next_tag: u64,
    /// The first tag sent on the current connection.
    first_tag: u64,
    rng: Rng,
}

/// The transaction clients of a run, and the history they make.
#[derive(Debug)]
pub(super) struct TxClients {
    clients: Vec<Client>,
    spaces: Vec<Space>,
    next_tx: u64,
    /// Every connection opened, and its computer.
    conns: Vec<(u64, usize)>,
    /// Every transaction sent and what became of it.
    pub history: TxChecker,
}

impl TxClients {
    /// One to three clients on every computer, each about to connect.
    pub fn new(world: &mut World) -> TxClients {
        let mut rng = Rng::new(world.opts.seed ^ STREAM);
        let mut spaces = Vec::new();
        for &name in &NAMESPACES[..rng.between(2, 3) as usize] {
            let mut pool: Vec<usize> = (0..VARIABLES.len()).collect();
            let mut vars = Vec::new();
            for _ in 0..rng.between(3, 5) {
                vars.push(pool.remove(rng.below(pool.len() as u64) as usize));
            }
            spaces.push(Space { name, vars });
        }
        let mut txc = TxClients {
            clients: Vec::new(),
            spaces,
            next_tx: 1,
            conns: Vec::new(),
            history: TxChecker::new(),
        };
        for node in 0..world.nodes.len() {
            for _ in 0..rng.between(1, 3) {
                let c = txc.clients.len();
                let base = 7_000 + 10 * c as u64;
                txc.clients.push(Client {
                    node,
                    uid: 2_000 + c as u32,
                    pids: [base + 1, base + 2],
                    conn: None,
                    state: State::Disconnected,
                    generation: 0,
                    next_tag: 1,
                    first_tag: 1,
                    rng: rng.fork(),
                });
                let at = txc.clients[c].rng.between(0, SEC);
                txc.arm(world, c, at);
            }
        }
        txc
    }

    /// Sets client `c`'s one timer (an earlier one no longer counts).
    fn arm(&mut self, world: &mut World, c: usize, at: u64) {
        let client = &mut self.clients[c];
        client.generation += 1;
        let generation = client.generation;
        world.at(
            at.max(world.now),
            Ev::TxClient {
                client: c,
                generation,
            },
        );
    }

    fn think(&mut self, world: &mut World, c: usize) {
        let at = world.now + self.clients[c].rng.between(0, 2 * SEC);
        self.arm(world, c, at);
    }

    pub fn timer(&mut self, world: &mut World, c: usize, generation: u64) {
        if self.clients[c].generation != generation {
            return;
        }
        match self.clients[c].state {
            State::Disconnected => {
                let (node, uid) = (self.clients[c].node, self.clients[c].uid);
                match world.open_conn(node, Who::TxClient(c), uid) {
                    Some(conn) => {
                        self.conns.push((conn.0, node));
                        let client = &mut self.clients[c];
                        client.conn = Some(conn);
                        client.first_tag = client.next_tag;
                        client.state = State::Idle;
                        self.think(world, c);
                    }
                    None => self.arm(world, c, world.now + SEC),
                }
            }
            State::Idle => {
                if self.clients[c].rng.chance(60_000) {
                    world.log(|| format!("t{c} closes"));
                    self.close(world, c);
                } else {
                    self.send(world, c);
                }
            }
            // Given up on, or closed on purpose with it in flight.
            State::Waiting { tag, .. } => {
                world.log(|| format!("t{c} closes with tag {tag} in flight"));
                self.close(world, c);
            }
        }
    }

    /// One statement on a variable of `space`: its model and its text.
    fn statement(&mut self, c: usize, space: usize) -> (Stmt, String) {
        let rng = &mut self.clients[c].rng;
        let forms = VARIABLES[*rng.pick(&self.spaces[space].vars)];
        let (canonical, wire) = (forms[0].to_owned(), *rng.pick(forms));
        let op = match rng.below(4) {
            0 => Op::Exists(canonical),
            1 => Op::Set(canonical, false),
            2 => Op::Set(canonical, true),
            _ => Op::Delete(canonical),
        };
        let st = Stmt {
            anyway: rng.chance(150_000),
            assert: rng.chance(400_000),
            nots: *rng.pick(&[0, 0, 0, 0, 1, 1, 2]),
            op,
        };
        let text = st.text(wire);
        (st, text)
    }

    fn send(&mut self, world: &mut World, c: usize) {
        let Some(conn) = self.clients[c].conn else {
            return;
        };
        let space = self.clients[c].rng.below(self.spaces.len() as u64) as usize;
        let namespace = self.spaces[space].name;
        let count = self.clients[c].rng.between(1, 4) as usize;
        let (stmts, texts): (Vec<Stmt>, Vec<String>) =
            (0..count).map(|_| self.statement(c, space)).unzip();
        let client = &mut self.clients[c];
        let pid = match client.rng.below(4) {
            0 => Some(client.pids[0]),
            1 => Some(client.pids[1]),
            _ => None,
        };
        let tag = client.next_tag;
        client.next_tag += 1;
        let id = TxId(self.next_tx);
        self.next_tx += 1;
        let mut msg = Message::new("TRANSACTION").with("namespace", namespace);
        for (k, text) in texts.iter().enumerate() {
            msg.set(&format!("s{}", k + 1), text);
        }
        msg.set_u64("tag", tag);
        msg.set("duration", DURATION);
        if let Some(p) = pid {
            msg.set_u64("pid", p);
        }
        // Now and then a client closes with its transaction in flight.
        let drop_at = if client.rng.chance(50_000) {
            world.now + client.rng.between(0, 2_000 * MS)
        } else {
            world.now + PATIENCE
        };
        client.state = State::Waiting { tag, id, namespace };
        self.history.sent(
            id,
            TxSent {
                session: (conn.0, pid),
                namespace: namespace.to_owned(),
                stmts,
                sent_at: world.now,
            },
        );
        world.stats.transactions += 1;
        self.arm(world, c, drop_at);
        world.send(conn, msg);
    }

    fn close(&mut self, world: &mut World, c: usize) {
        if let Some(conn) = self.clients[c].conn.take() {
            world.client_close(conn);
            self.history.ended(world.now, conn.0);
        }
        self.clients[c].state = State::Disconnected;
        let at = world.now + self.clients[c].rng.between(100 * MS, 3 * SEC);
        self.arm(world, c, at);
    }

    /// Client `c` sees its connection drop (closed by its agent, or the
    /// agent died).
    pub fn dropped(&mut self, world: &mut World, c: usize, conn: ClientId) {
        if self.clients[c].conn != Some(conn) {
            return;
        }
        self.history.ended(world.now, conn.0);
        self.clients[c].conn = None;
        self.clients[c].state = State::Disconnected;
        let at = world.now + self.clients[c].rng.between(100 * MS, 3 * SEC);
        self.arm(world, c, at);
    }

    pub fn recv(&mut self, world: &mut World, c: usize, conn: ClientId, msg: Message) {
        if self.clients[c].conn != Some(conn) {
            return;
        }
        let node = self.clients[c].node;
        let tx_reply = matches!(msg.command.as_str(), "TRANSACTIONOK" | "TRANSACTIONFAILED");
        let tag = msg.get_str("tag").map(|t| t.parse::<u64>().ok());
        match (tx_reply, tag) {
            (true, None) if is_revocation(&msg) => {
                let ns = msg.get_str("namespace").unwrap_or_default().to_owned();
                world.log(|| format!("t{c}: c{} revoked in {ns}", conn.0));
                self.history.revoked(world.now, conn.0, &ns);
            }
            (true, Some(Some(t))) => self.answered(world, c, t, &msg),
            _ => {
                let what = format!("n{node} sent t{c} on c{} an unexpected {msg}", conn.0);
                world.checker.report(world.now, "T4", what);
            }
        }
    }

    /// A tagged answer to a `TRANSACTION`.
    fn answered(&mut self, world: &mut World, c: usize, tag: u64, msg: &Message) {
        let client = &self.clients[c];
        let node = client.node;
        let (id, namespace) = match client.state {
            State::Waiting {
                tag: t,
                id,
                namespace,
            } if t == tag => (id, namespace),
            _ => {
                let which = if (client.first_tag..client.next_tag).contains(&tag) {
                    "a second answer"
                } else {
                    "an answer to a tag it never sent on this connection"
                };
                let what = format!("n{node} sent t{c} {which}: {msg}");
                return world.checker.report(world.now, "T4", what);
            }
        };
        self.clients[c].state = State::Idle;
        self.think(world, c);
        if msg.get_str("namespace") != Some(namespace) {
            let what = format!(
                "n{node} answered t{c}'s tx{} in namespace {namespace} with {msg}",
                id.0
            );
            world.checker.report(world.now, "T4", what);
            return self.history.refused(id);
        }
        if msg.command == "TRANSACTIONOK" {
            let fence = msg.get_str("fence").and_then(|f| f.parse::<u64>().ok());
            let results: Option<Vec<bool>> = msg.get_str("results").and_then(|r| {
                r.split(',')
                    .map(|v| match v {
                        "1" => Some(true),
                        "0" => Some(false),
                        _ => None,
                    })
                    .collect()
            });
            let (Some(fence), Some(results)) = (fence, results) else {
                let what = format!(
                    "n{node} answered t{c}'s tx{} with an unreadable {msg}",
                    id.0
                );
                world.checker.report(world.now, "T4", what);
                // Committed, but what it did is unknown: as if never answered.
                return;
            };
            world.stats.tx_commits += 1;
            return self.history.committed(world.now, id, fence, results);
        }
        match msg.get_str("error") {
            Some("failed") => match msg.get_str("failed").and_then(|n| n.parse().ok()) {
                Some(n) => self.history.failed(world.now, id, n),
                None => {
                    let what = format!(
                        "n{node} answered t{c}'s tx{} with an unreadable {msg}",
                        id.0
                    );
                    world.checker.report(world.now, "T4", what);
                    self.history.refused(id);
                }
            },
            Some("unavailable" | "untrusted" | "overflow") => self.history.refused(id),
            _ => {
                // `invalid` too: every transaction sent is well formed.
                let what = format!("n{node} refused t{c}'s tx{}: {msg}", id.0);
                world.checker.report(world.now, "T4", what);
                self.history.refused(id);
            }
        }
    }

    /// Checks the whole history (T1–T3, T5) at the end of the run.
    ///
    /// A paused agent sends its connection the revocation notice only when
    /// it resumes, while the leaders may drop its variables `release_delay`
    /// after they last heard it: its clients, told by `ALIVE` how long it
    /// vouches for them (docs/cluster.md, "The holder's side"), stop
    /// relying on them before. So a pause counts as an end of every
    /// connection of that computer, for the holdings set before it.
    pub fn finish(&mut self, world: &mut World) {
        for &(at, node) in &world.pauses {
            for &(conn, _) in self.conns.iter().filter(|(_, n)| *n == node) {
                self.history.ended(at, conn);
            }
        }
        for v in self.history.finish() {
            world.checker.report(v.at, v.rule, v.what);
        }
    }
}

/// An agent's notice that a connection's variables of a namespace were
/// dropped: untagged, `failed=0`, `error=unavailable`, `revoked: ...`.
fn is_revocation(msg: &Message) -> bool {
    msg.command == "TRANSACTIONFAILED"
        && msg.get_str("failed") == Some("0")
        && msg.get_str("error") == Some("unavailable")
        && msg
            .get_str("description")
            .is_some_and(|d| d.starts_with("revoked"))
}
