//! What can happen at an instant, and the timers' payloads of the parts
//! that act on the world (faults, probes, the workload). Below the world
//! and the parts alike: each of them schedules these, the run hands each
//! one to whom it concerns.

use snaplock_proto::wire::Message;
use snaplock_proto::{ClientId, Input};

/// Something that happens at an instant.
#[derive(Debug)]
pub(super) enum Ev {
    /// A core's timer may be due.
    Wake(usize),
    /// Messages of one direction of a link may be ready.
    Pump {
        link: usize,
        generation: u64,
        dir: usize,
    },
    /// Try to bring a link up.
    Redial(usize),
    /// An input reaches a core (from a client, or a link's end).
    Input {
        node: usize,
        incarnation: u64,
        input: Input,
    },
    /// A reply reaches a client.
    ClientRecv { conn: ClientId, msg: Message },
    /// A client sees its connection closed.
    ConnDropped(ClientId),
    /// A workload client's own timer.
    Worker { worker: usize, generation: u64 },
    /// A transaction client's own timer.
    TxClient { client: usize, generation: u64 },
    /// The next fault, while faults run.
    Fault,
    /// A fault's end: a cut heals, a computer resumes or restarts.
    FaultEnd(u64),
    /// Faults start or stop.
    Phase(Phase),
    /// A liveness probe's next step.
    Probe(ProbeStep),
    /// Whether a request ended by its deadline plus the L1 bound.
    Deadline { worker: usize, req: u64 },
    /// The end of the run.
    End,
}

/// Whether faults run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Faults are injected.
    Chaos,
    /// Everything healed; liveness is checked.
    Quiet,
}

/// The steps of one quiet window's probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeStep {
    /// Connect to every agent and ask `INFO`.
    Start { window: u32 },
    /// Compare the answers; lock a fresh name everywhere.
    Info { window: u32 },
    /// Every fresh name granted? Start the handover.
    Fresh { window: u32 },
    /// The first holder of the handover name holds; the second asks.
    Second { window: u32 },
    /// The first releases.
    Release { window: u32 },
    /// The second must hold now.
    Handover { window: u32 },
    /// Close the probes' connections.
    Close { window: u32 },
}

impl ProbeStep {
    /// The quiet window this step belongs to.
    pub fn window(self) -> u32 {
        match self {
            ProbeStep::Start { window }
            | ProbeStep::Info { window }
            | ProbeStep::Fresh { window }
            | ProbeStep::Second { window }
            | ProbeStep::Release { window }
            | ProbeStep::Handover { window }
            | ProbeStep::Close { window } => window,
        }
    }
}
