//! The state of the cluster model: three members (each a leader candidate
//! and a home), two clients, one object name (or, with transactions, two
//! sessions and two variables: model/tx.rs), per-link FIFO queues.
//!
//! Time is not a number here. Every timer of docs/cluster.md becomes a step
//! that may happen at any moment its precondition holds (a re-sent request,
//! a re-asked vote, a revocation, the end of the lock-delay), and the timing
//! facts the design relies on become guards of those steps:
//!
//! - a leader is *acting* while it is ready and a quorum of live members is
//!   in its epoch (the `peer_timeout` window is collapsed to zero: with three
//!   members and one crash, a majority of an old epoch's leaders can never
//!   still be acting once a quorum moved on, so the window changes nothing);
//! - a home may revoke only while it is *not in contact* (fewer than a
//!   majority of its epoch's leaders acting);
//! - the lock-delay may end only when every live home that has not been in
//!   contact at any moment since the delay started has revoked: such a home
//!   has been out of contact for the whole delay, longer than `grace`.
//!   A home that was in contact at some point may or may not have revoked,
//!   both are explored.

use std::fmt;

/// Members of the cluster; also the number of leaders of a full epoch.
pub const N: usize = 3;
/// Quorum of members.
pub const Q: usize = N / 2 + 1;
/// Clients; client `c` lives on member `Config::homes[c]`.
pub const C: usize = 2;
/// Ticket slots of a leader's table. With locks, slot `c` is client `c`'s
/// ticket on the one object (the third slot stays empty); with the
/// transaction workload, a slot is one session's holding of one variable
/// ([`Config::ticket_session`], [`Config::ticket_object`]).
pub const K: usize = 3;
/// Fences of epoch `e` start at `e * FENCE_SPAN` (`epoch << 20` in the real
/// thing, scaled down).
pub const FENCE_SPAN: u8 = 16;

/// The protocol without or with the change the model found necessary. The
/// code follows its first half (`active=1` only to an agent whose report
/// is in the epoch's state); for the second it relies on the handover
/// keeping a reporting home's tickets only when the home still has them,
/// and on a home answering `UNLOCK` to any grant it no longer wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Design {
    /// Without it: any acting leader of the new epoch counts for a home's
    /// contact (the first version of docs/cluster.md).
    AsWritten,
    /// A leader of a new epoch counts for a home's contact only when the
    /// home's report is in the state it installed (`LOCKTICKETS` names the
    /// homes it was built from), and a home re-sends its set of requests
    /// to the owner, which drops that home's tickets the set does not name.
    ReportedContact,
}

/// What the clients do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Two clients each take and release the one object once.
    Locks,
    /// Two sessions of one namespace, one transaction each (docs/cluster.md
    /// "Transactions"): session 0 runs `assert set X; assert set Y`,
    /// session 1 runs `set X; exists Y`. Sessions never release what they
    /// set (a release only makes a later `set X` legal); a holding ends
    /// with a revocation or its home's crash.
    Tx,
}

/// Deliberate bugs; each must produce a counterexample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plant {
    None,
    /// The owner grants on its own vote alone.
    OneVote,
    /// A follower votes for a ticket while it holds a vote for another.
    DoubleVote,
    /// The collector never applies the lock-delay.
    SkipLockDelay,
    /// A transaction runs even when a variable it names has a ticket
    /// inherited from a home the owner does not count yet.
    TxIgnoreUncounted,
    /// A home applies a `TXDONE` of an epoch older than its own (after it
    /// gave the transaction up and reported).
    TxApplyOldEpoch,
    /// The owner frees the variables, and takes the new holdings as held,
    /// when it sends `TXDONE` instead of when `TXACK ok` comes.
    TxFreeAtDone,
    /// The owner sends `TXDONE` once the first new holding has its
    /// majority.
    TxDoneFirstMajority,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub design: Design,
    pub workload: Workload,
    pub plant: Plant,
    /// `fnv1a64(name) % len(leaders)`: which leader owns the object.
    pub owner_index: u8,
    /// The member each client is connected to.
    pub homes: [u8; C],
    /// Link breaks (every message in flight both ways lost) allowed.
    pub max_breaks: u8,
    /// Crashes (memory lost; the member may restart with a new id).
    pub max_crashes: u8,
    /// The members that may crash (slot bitmask).
    pub crashable: u8,
    /// Largest epoch; epoch 1 is the starting one.
    pub max_epoch: u8,
    /// Fences an owner may draw in one epoch before the search stops there.
    pub fence_room: u8,
}

impl Config {
    /// The smallest scope of the issue: 3 leaders, 2 clients, 1 name, one
    /// crash, `breaks` link breaks, one election after the crash.
    pub fn small(design: Design, breaks: u8) -> Config {
        Config {
            design,
            workload: Workload::Locks,
            plant: Plant::None,
            owner_index: 0,
            homes: [1, 2],
            max_breaks: breaks,
            max_crashes: 1,
            crashable: 0b111,
            max_epoch: 2,
            fence_room: 4,
        }
    }

    /// The session (client) a ticket slot belongs to.
    pub fn ticket_session(&self, k: u8) -> u8 {
        match self.workload {
            Workload::Locks => k,
            Workload::Tx => [0, 0, 1][usize::from(k)],
        }
    }

    /// The object of a ticket slot: with transactions 0 is X and 1 is Y.
    pub fn ticket_object(&self, k: u8) -> u8 {
        match self.workload {
            Workload::Locks => 0,
            Workload::Tx => [0, 1, 0][usize::from(k)],
        }
    }

    /// The ticket slots in use.
    pub fn slots(&self) -> std::ops::Range<u8> {
        match self.workload {
            Workload::Locks => 0..C as u8,
            Workload::Tx => 0..K as u8,
        }
    }

    /// Two holdings that may not be voted for together: one object, two
    /// sessions (every holding here is exclusive: no `dup`).
    pub fn conflict(&self, k: u8, j: u8) -> bool {
        k != j
            && self.ticket_object(k) == self.ticket_object(j)
            && self.ticket_session(k) != self.ticket_session(j)
    }
}

/// An agent's identity: its address slot and which start of the process.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id {
    pub slot: u8,
    pub incarnation: u8,
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "m{}", self.slot)?;
        for _ in 0..self.incarnation {
            f.write_str("'")?;
        }
        Ok(())
    }
}

/// One client's ticket in one leader's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ticket {
    None,
    /// Follower: it has the owner's ADDTICKET.
    Replica,
    /// Owner: queued.
    Waiting,
    /// Owner: ACTIVATELOCK sent for `fence`; `voters` and `clean` are slot
    /// bitmasks (the owner included); `clean` counts only votes cast while
    /// the voter held no other vote (ghost, for S6).
    Asking {
        fence: u8,
        voters: u8,
        clean: u8,
    },
    /// Follower: voted for `fence`.
    Voted {
        fence: u8,
    },
    /// Granted (owner), or held since the epoch's state was installed.
    Held {
        fence: u8,
    },
}

impl Ticket {
    /// The fence this table holds the ticket with (granted or voted for),
    /// as a report names it.
    pub fn held_fence(self) -> Option<u8> {
        match self {
            Ticket::Asking { fence, .. } | Ticket::Voted { fence } | Ticket::Held { fence } => {
                Some(fence)
            }
            _ => None,
        }
    }

    /// A vote that conflicts with a vote for another client.
    pub fn is_vote(self) -> bool {
        matches!(self, Ticket::Voted { .. } | Ticket::Held { .. })
    }
}

/// A leader's table for the one object.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Table {
    pub tickets: [Ticket; K],
    /// Owner: arrival order of the tickets it holds (who_may_hold: first).
    pub queue: Vec<u8>,
    pub last_fence: u8,
    pub base: u8,
}

impl Table {
    pub fn empty(base: u8) -> Table {
        Table {
            tickets: [Ticket::None; K],
            queue: Vec::new(),
            last_fence: 0,
            base,
        }
    }
}

/// What a client's request is at its home (the client's view is the same:
/// it holds exactly while this is `Held`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Req {
    Idle,
    Waiting,
    Held {
        fence: u8,
    },
    /// Released by the client (UNLOCK).
    Done,
    /// LOCKFAILED unavailable from a revocation.
    Failed,
    /// UNLOCKED error=lost from a revocation.
    Lost,
    /// Its home crashed.
    Dead,
}

impl Req {
    pub fn is_final(self) -> bool {
        matches!(self, Req::Done | Req::Failed | Req::Lost | Req::Dead)
    }
}

/// A home's part of a report: held with its fence, or waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HomeReq {
    Held(u8),
    Waiting,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Report {
    pub from: Id,
    /// The frozen table of the last epoch it was a ready leader in.
    pub table: Option<(u8, Table)>,
    /// Per ticket slot.
    pub home: [Option<HomeReq>; K],
    pub max_fence: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Msg {
    /// LOCKLEADERS, or the epoch of a LOCKSTARTED.
    Leaders {
        e: u8,
    },
    Report {
        e: u8,
        report: Box<Report>,
    },
    /// LOCKTICKETS: held tickets with their fences, the fence base, whether
    /// a lock-delay runs, and (ReportedContact) the reporting agents.
    Tickets {
        e: u8,
        held: [Option<u8>; K],
        base: u8,
        delay: bool,
        reported: Vec<Id>,
    },
    Lock {
        e: u8,
        c: u8,
    },
    Locked {
        e: u8,
        c: u8,
        fence: u8,
    },
    Unlock {
        e: u8,
        c: u8,
    },
    /// ReportedContact: the home's clients that wait or hold.
    Have {
        e: u8,
        home: u8,
        set: u8,
    },
    AddTicket {
        e: u8,
        c: u8,
    },
    Activate {
        e: u8,
        c: u8,
        fence: u8,
    },
    Activated {
        e: u8,
        c: u8,
        fence: u8,
        ok: bool,
        clean: bool,
        from: Id,
    },
    Drop {
        e: u8,
        c: u8,
    },
    /// TRANSACTION of session `s`.
    Tx {
        e: u8,
        s: u8,
    },
    /// TXDONE with the results (the value of each statement).
    TxDone {
        e: u8,
        s: u8,
        fence: u8,
        results: [bool; 2],
    },
    /// TXFAILED: an `assert` was false, nothing changed.
    TxFailed {
        e: u8,
        s: u8,
    },
    TxAck {
        e: u8,
        s: u8,
        ok: bool,
    },
}

impl Msg {
    pub fn epoch(&self) -> u8 {
        match self {
            Msg::Leaders { e }
            | Msg::Report { e, .. }
            | Msg::Tickets { e, .. }
            | Msg::Lock { e, .. }
            | Msg::Locked { e, .. }
            | Msg::Unlock { e, .. }
            | Msg::Have { e, .. }
            | Msg::AddTicket { e, .. }
            | Msg::Activate { e, .. }
            | Msg::Activated { e, .. }
            | Msg::Drop { e, .. }
            | Msg::Tx { e, .. }
            | Msg::TxDone { e, .. }
            | Msg::TxFailed { e, .. }
            | Msg::TxAck { e, .. } => *e,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Collect {
    pub reports: Vec<Report>,
    pub built: bool,
}

/// The owner's transaction in flight: run, its new holdings (ticket slot
/// mask) asked for their votes, its variables busy until `TXACK`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InFlight {
    pub s: u8,
    pub fence: u8,
    pub results: [bool; 2],
    pub sets: u8,
    /// `TXDONE` sent.
    pub done: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Member {
    pub id: Id,
    pub alive: bool,
    /// 0: none known yet.
    pub epoch: u8,
    /// Installed its epoch's state (only leaders become ready).
    pub ready: bool,
    pub table: Table,
    pub frozen: Option<(u8, Table)>,
    pub collect: Option<Collect>,
    /// Owner, not ready yet: requests that queue until it is (bitmasks).
    pub pending_lock: u8,
    pub pending_unlock: u8,
    /// Owner: the sessions whose transactions queue, in arrival order.
    pub tx_queue: Vec<u8>,
    pub in_flight: Option<InFlight>,
    /// The agents whose reports the installed state was built from.
    pub reported: Vec<Id>,
    pub max_fence: u8,
}

impl Member {
    pub(crate) fn start(id: Id) -> Member {
        Member {
            id,
            alive: true,
            epoch: 0,
            ready: false,
            table: Table::empty(0),
            frozen: None,
            collect: None,
            pending_lock: 0,
            pending_unlock: 0,
            tx_queue: Vec::new(),
            in_flight: None,
            reported: Vec::new(),
            max_fence: 0,
        }
    }
}

/// The ghost of a lock-delay: which homes were in contact at some moment
/// since it started (slot bitmask).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Delay {
    None,
    Running { seen: u8 },
    Over,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub members: [Member; N],
    pub clients: [Req; C],
    /// `links[a][b]`: messages sent by a to b, oldest first.
    pub links: [[Vec<Msg>; N]; N],
    /// Leaders of epoch e at index e - 1, leader0 (the collector) first.
    pub epochs: Vec<[Id; N]>,
    /// Lock-delay of epoch e at index e - 1.
    pub delays: Vec<Delay>,
    pub breaks_left: u8,
    pub crashes_left: u8,
    /// Ghosts for the properties.
    pub last_delivered_fence: u8,
    pub s2_broken: bool,
    pub s6_broken: bool,
    /// Session 0's transaction was applied by its home.
    pub t1_applied: bool,
    /// The results session 1's home applied (`set X`, `exists Y`).
    pub t2_results: Option<[bool; 2]>,
}

impl State {
    pub fn initial(config: &Config) -> State {
        let ids: [Id; N] = std::array::from_fn(|s| Id {
            slot: s as u8,
            incarnation: 0,
        });
        let mut members = ids.map(Member::start);
        for m in &mut members {
            m.epoch = 1;
            m.ready = true;
            m.table = Table::empty(FENCE_SPAN);
            m.reported = ids.to_vec();
        }
        State {
            members,
            clients: [Req::Idle; C],
            links: Default::default(),
            epochs: vec![ids],
            delays: vec![Delay::None],
            breaks_left: config.max_breaks,
            crashes_left: config.max_crashes,
            last_delivered_fence: 0,
            s2_broken: false,
            s6_broken: false,
            t1_applied: false,
            t2_results: None,
        }
    }

    pub fn leaders(&self, e: u8) -> &[Id; N] {
        &self.epochs[usize::from(e) - 1]
    }

    pub fn owner(&self, config: &Config, e: u8) -> Id {
        self.leaders(e)[usize::from(config.owner_index)]
    }

    pub fn is_current(&self, id: Id) -> bool {
        let m = &self.members[usize::from(id.slot)];
        m.alive && m.id == id
    }

    /// Live members in epoch e (the agents that answer pings in e).
    pub fn in_epoch(&self, e: u8) -> usize {
        self.members
            .iter()
            .filter(|m| m.alive && m.epoch == e)
            .count()
    }

    /// S8: ready, in its epoch, and a quorum answers in that epoch.
    pub fn acting(&self, slot: u8) -> bool {
        let m = &self.members[usize::from(slot)];
        m.alive
            && m.ready
            && m.epoch > 0
            && self.leaders(m.epoch).contains(&m.id)
            && self.in_epoch(m.epoch) >= Q
    }

    /// Whether a home is in contact: a majority of its epoch's leaders are
    /// acting (and, ReportedContact, built their state from its report).
    pub fn in_contact(&self, config: &Config, home: u8) -> bool {
        let h = &self.members[usize::from(home)];
        if !h.alive || h.epoch == 0 {
            return false;
        }
        let answering = self
            .leaders(h.epoch)
            .iter()
            .filter(|l| {
                self.is_current(**l)
                    && self.members[usize::from(l.slot)].epoch == h.epoch
                    && self.acting(l.slot)
                    && (config.design == Design::AsWritten
                        || self.members[usize::from(l.slot)].reported.contains(&h.id))
            })
            .count();
        answering > N / 2
    }

    pub fn send(&mut self, from: u8, to: u8, msg: Msg) {
        if self.members[usize::from(to)].alive {
            self.links[usize::from(from)][usize::from(to)].push(msg);
        }
    }

    pub fn in_flight(&self, from: u8, to: u8, msg: &Msg) -> bool {
        self.links[usize::from(from)][usize::from(to)].contains(msg)
    }

    /// S1: at most one client holds.
    pub fn holders(&self) -> usize {
        self.clients
            .iter()
            .filter(|r| matches!(r, Req::Held { .. }))
            .count()
    }

    /// Every client finished, whatever the outcome.
    pub fn all_final(&self) -> bool {
        self.clients.iter().all(|r| r.is_final())
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for m in &self.members {
            write!(f, "  {:?}", m.id)?;
            if !m.alive {
                writeln!(f, " down")?;
                continue;
            }
            write!(f, " e{}{}", m.epoch, if m.ready { " ready" } else { "" })?;
            write!(f, " {:?}", m.table.tickets)?;
            if !m.tx_queue.is_empty() {
                write!(f, " tx queue {:?}", m.tx_queue)?;
            }
            if let Some(t) = &m.in_flight {
                write!(f, " {t:?}")?;
            }
            if let Some(c) = &m.collect {
                write!(
                    f,
                    " collecting({} reports{})",
                    c.reports.len(),
                    if c.built { ", built" } else { "" }
                )?;
            }
            writeln!(f)?;
        }
        writeln!(
            f,
            "  clients {:?} epochs {:?} delays {:?}",
            self.clients, self.epochs, self.delays
        )?;
        if self.t1_applied || self.t2_results.is_some() {
            writeln!(
                f,
                "  session 0 applied: {}, session 1 applied results {:?}",
                self.t1_applied, self.t2_results
            )?;
        }
        for (a, row) in self.links.iter().enumerate() {
            for (b, q) in row.iter().enumerate() {
                if !q.is_empty() {
                    writeln!(f, "  m{a}->m{b}: {q:?}")?;
                }
            }
        }
        Ok(())
    }
}
