//! A run: the world and the parts that act on it (faults, the workload,
//! the probes). It takes the events off the world's queue in order and
//! hands each to whom it concerns; a part is given the world to act on, and
//! the world never calls a part.

use snaplock_proto::ClientId;
use snaplock_proto::wire::Message;

use super::client::Workload;
use super::events::Ev;
use super::faults::Faults;
use super::probes::Probes;
use super::txclient::TxClients;
use super::world::{Who, World};
use super::{Options, Report};

pub(super) struct Run {
    world: World,
    faults: Faults,
    workload: Workload,
    /// Only in runs with `Options::transactions`.
    tx: Option<TxClients>,
    probes: Probes,
}

impl Run {
    pub fn new(opts: &Options) -> Run {
        let (mut world, fault_rng) = World::new(opts);
        let workload = Workload::new(&mut world);
        let faults = Faults::start(&mut world, fault_rng);
        let tx = world.opts.transactions.then(|| TxClients::new(&mut world));
        world.at(world.opts.duration, Ev::End);
        Run {
            world,
            faults,
            workload,
            tx,
            probes: Probes::default(),
        }
    }

    pub fn run(mut self) -> Report {
        while let Some(ev) = self.world.next_event() {
            self.handle(ev);
            if self.world.done() {
                break;
            }
        }
        if let Some(tx) = &mut self.tx {
            tx.finish(&mut self.world);
        }
        self.world.report()
    }

    fn handle(&mut self, ev: Ev) {
        let world = &mut self.world;
        match ev {
            Ev::Wake(i) => world.wake(i),
            Ev::Pump {
                link,
                generation,
                dir,
            } => world.pump(link, generation, dir),
            Ev::Redial(l) => world.redial(l),
            Ev::Input {
                node,
                incarnation,
                input,
            } => {
                if world.nodes[node].incarnation == incarnation {
                    world.feed(node, input);
                }
            }
            Ev::ClientRecv { conn, msg } => self.client_recv(conn, msg),
            Ev::ConnDropped(conn) => match world.conn_dropped(conn) {
                Some(Who::Worker(w)) => self.workload.dropped(world, w, conn),
                Some(Who::TxClient(c)) => {
                    if let Some(tx) = &mut self.tx {
                        tx.dropped(world, c, conn);
                    }
                }
                Some(Who::Probe) => self.probes.dropped(world, conn),
                None => {}
            },
            Ev::Worker { worker, generation } => self.workload.timer(world, worker, generation),
            Ev::TxClient { client, generation } => {
                if let Some(tx) = &mut self.tx {
                    tx.timer(world, client, generation);
                }
            }
            Ev::Fault => self.faults.fault(world),
            Ev::FaultEnd(id) => self.faults.end(world, id),
            Ev::Phase(p) => self.faults.phase(world, p),
            Ev::Probe(step) => self.probes.step(world, step),
            Ev::Deadline { worker, req } => self.workload.deadline_check(world, worker, req),
            Ev::End => world.stopped = true,
        }
    }

    fn client_recv(&mut self, conn: ClientId, msg: Message) {
        let Some(c) = self.world.reader(conn) else {
            return;
        };
        match c.who {
            Who::Worker(w) => self.workload.recv(&mut self.world, w, conn, msg),
            Who::TxClient(t) => {
                if let Some(tx) = &mut self.tx {
                    tx.recv(&mut self.world, t, conn, msg);
                }
            }
            Who::Probe => self.probes.recv(&mut self.world, c.node, conn, msg),
        }
    }
}
