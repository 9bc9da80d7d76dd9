//! The messages agents send each other, typed: one [`PeerMsg::parse`] and
//! one writer, [`PeerMsg::into_line_in`] (`write.rs`), so handlers get fields,
//! not parameters.
//!
//! A peer message that lacks a field or carries a bad one is dropped with a
//! log line ([`BadField`] names the field): a peer is another snaplockd, so this
//! is a bug or an attack, and neither may take the agent down. Numbers are
//! plain decimal ([`parse_u64`]); a bad value of an optional parameter
//! drops the message too. Parameters unknown to a command are ignored, so
//! a later version may add new ones (not change the form of old ones).
//!
//! | command | role | what it says |
//! |---|---|---|
//! | `LOCKSTARTED` | links | who the sender is, its epoch and leaders |
//! | `LOCKPING`, `LOCKPONG` | links | liveness, and whether it acts as a leader |
//! | `LOCKLEADERS` | election | a new epoch and its leaders |
//! | `LOCKTICKETS` | handover | reports, the state, late reports ([`Part`]) |
//! | `LOCK`, `UNLOCK` | home → owner | a request of a client, its release |
//! | `ADDTICKET`, `ACTIVATELOCK`, `DROPTICKET` | owner → followers | the replica, the vote asked |
//! | `LOCKACTIVATED` | follower → owner | the vote |
//! | `LOCKED`, `LOCKFAILED`, `HASTICKET` | owner → home | the grant, the refusal, the check |
//! | `LOCKWAITING` | owner → home | a waiting request's place in the owner's queue (`progress`) |
//! | `TRANSACTION`, `TXACK` | home → owner | a client's transaction; applied, or given up |
//! | `TXDONE`, `TXFAILED` | owner → home | the transaction ran, or did not |
//! | `TXFENCE`, `TXFENCED` | owner ↔ followers | a transaction without new holdings, agreed |
//! | `LOCKLIST`, `LOCKLISTED` | any agent ↔ owners | the queues of the objects it owns ([`view`]) |

use std::time::Duration;

mod tickets;
mod tx;
pub(crate) mod view;
mod write;

use tickets::part;
pub(crate) use tickets::{Part, ReportBegin, Tickets};
pub(crate) use tx::{MAX_TX_ITEMS, TxDone, TxReq};
use tx::{bits, numbers, statements, tx_sets};
pub(crate) use view::{ListEntry, ListReq, Listed};

use super::Id;
use super::ids;
use crate::vocab::{Kind, Mode, ObjectName, Policy, parse_u64};
use crate::wire::{Fields, Message};

/// A required field was missing or bad: its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadField(pub &'static str);

/// The most leaders an epoch has (`leader0` … `leader2`).
pub(crate) const MAX_LEADERS: usize = 3;
const LEADER_KEYS: [&str; MAX_LEADERS] = ["leader0", "leader1", "leader2"];
const PREV_KEYS: [&str; MAX_LEADERS] = ["prev0", "prev1", "prev2"];

/// Which part of the agent a message is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The link itself: who is at the other end, and liveness.
    Link,
    /// A new epoch.
    Election,
    /// Reports, the state, late reports.
    Handover,
    /// The leaders' tables: the owner and its followers.
    Leader,
    /// The agent a request came from.
    Home,
    /// A client's `LISTTICKETS`: the owners' queues, asked and answered.
    View,
}

/// A ticket of the leaders' tables: the request `req` of agent `home` on
/// `object`, in `epoch`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TicketAt {
    pub epoch: u64,
    /// Shared with the tables (a refcount per message built, not a copy).
    pub object: ObjectName,
    pub home: Id,
    pub req: u64,
}

/// `LOCKSTARTED`: the first line on a link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Started {
    /// The sender's id ([`ids::make_id`]).
    pub id: Id,
    pub server_name: String,
    /// When it started, µs since the epoch of its wall clock.
    pub start_us: u64,
    /// Its wall clock, ms.
    pub wall_ms: Option<u64>,
    /// The largest epoch it heard of, adopted or not.
    pub max_epoch: Option<u64>,
    pub epoch: u64,
    pub leaders: Vec<Id>,
    /// It takes an `ADDTICKET` that carries a `fence` as that ticket's
    /// `ADDTICKET` and then its `ACTIVATELOCK` (`add_vote=1`).
    pub add_vote: bool,
    /// As the home of a request, it delivers the grant on its own yes
    /// vote when that vote makes the majority (`home_grant=1`).
    pub home_grant: bool,
    /// As the home of a request, it drops its own vote on it when it
    /// releases it, so its owner sends it no `DROPTICKET` (`home_drop=1`).
    pub home_drop: bool,
}

/// `LOCKPONG`: the answer to a ping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pong {
    pub serial: u64,
    pub epoch: u64,
    /// The digest of its leaders of that epoch (0: none said).
    pub view: u64,
    pub wall_ms: Option<u64>,
    /// It answers as an acting leader of `epoch`.
    pub active: bool,
    /// Bit i: it has a link up to member i.
    pub links: Option<u64>,
    /// What is left of its lock-delay, µs (0: none).
    pub delay_us: u64,
}

/// `LOCK` from a home to the owner of the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Lock {
    pub epoch: u64,
    /// Shared with the tables, as [`TicketAt`]'s.
    pub object: ObjectName,
    pub req: u64,
    pub key: String,
    pub kind: Kind,
    /// `try=true`: refused at once when it cannot be granted now.
    pub try_once: bool,
    /// `progress=true`: the owner tells the home the request's place in
    /// its queue (`LOCKWAITING`) whenever it changes.
    pub progress: bool,
}

/// A message between agents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PeerMsg {
    Started(Started),
    Ping {
        serial: u64,
    },
    Pong(Pong),
    Leaders {
        epoch: u64,
        leaders: Vec<Id>,
    },
    Tickets {
        epoch: u64,
        part: Part,
    },
    Lock(Lock),
    /// The home released or cancelled its request.
    Unlock {
        epoch: u64,
        object: ObjectName,
        req: u64,
    },
    /// The owner's new ticket, for its followers' replicas; with a
    /// `fence`, also the `ACTIVATELOCK` that follows it (sent so only to
    /// an agent whose `LOCKSTARTED` said `add_vote=1`).
    AddTicket {
        at: TicketAt,
        key: String,
        number: u64,
        kind: Kind,
        fence: Option<u64>,
    },
    /// The owner asks for a vote on the grant with `fence`.
    ActivateLock {
        at: TicketAt,
        fence: u64,
    },
    /// A follower's vote; `other` names the ticket it voted for that
    /// stands in the way of this one.
    LockActivated {
        at: TicketAt,
        fence: u64,
        ok: bool,
        other: Option<(String, u64)>,
    },
    /// The owner drops a ticket from its followers' replicas.
    DropTicket(TicketAt),
    /// The grant, to the home.
    Locked {
        at: TicketAt,
        fence: u64,
    },
    /// The refusal, to the home: `error` is one of the protocol's.
    LockFailed {
        at: TicketAt,
        error: &'static str,
        description: String,
    },
    /// The owner asks whether the home still has this request.
    HasTicket(TicketAt),
    /// The owner tells the home where its waiting request is in line:
    /// 1 + the waiting tickets ahead of it (at least 1).
    Waiting {
        at: TicketAt,
        position: u64,
    },
    Tx(TxReq),
    TxDone(TxDone),
    /// The transaction did not run: `failed` is its statement (0: none).
    TxFailed {
        epoch: u64,
        namespace: Vec<u8>,
        req: u64,
        failed: u64,
        error: &'static str,
        description: String,
    },
    /// The owner asks a follower to agree to the fence of transaction
    /// `req` of `home`, which has no new holding to vote for.
    TxFence {
        epoch: u64,
        namespace: Vec<u8>,
        req: u64,
        home: String,
        fence: u64,
    },
    /// The follower's answer: `ok` when it acts in the epoch.
    TxFenced {
        epoch: u64,
        namespace: Vec<u8>,
        req: u64,
        home: String,
        fence: u64,
        ok: bool,
    },
    /// The home applied the transaction (`ok`), or gave it up.
    TxAck {
        epoch: u64,
        namespace: Vec<u8>,
        req: u64,
        ok: bool,
    },
    /// Which tickets the receiver owns, for a `LISTTICKETS`.
    List(ListReq),
    /// The answer to it.
    Listed(Listed),
}

impl PeerMsg {
    /// Which part of the agent handles it.
    pub fn role(&self) -> Role {
        match self {
            PeerMsg::Started(_) | PeerMsg::Ping { .. } | PeerMsg::Pong(_) => Role::Link,
            PeerMsg::Leaders { .. } => Role::Election,
            PeerMsg::Tickets { .. } => Role::Handover,
            PeerMsg::Lock(_)
            | PeerMsg::Unlock { .. }
            | PeerMsg::AddTicket { .. }
            | PeerMsg::ActivateLock { .. }
            | PeerMsg::LockActivated { .. }
            | PeerMsg::DropTicket(_)
            | PeerMsg::Tx(_)
            | PeerMsg::TxFence { .. }
            | PeerMsg::TxFenced { .. }
            | PeerMsg::TxAck { .. } => Role::Leader,
            PeerMsg::Locked { .. }
            | PeerMsg::LockFailed { .. }
            | PeerMsg::HasTicket(_)
            | PeerMsg::Waiting { .. }
            | PeerMsg::TxDone(_)
            | PeerMsg::TxFailed { .. } => Role::Home,
            PeerMsg::List(_) | PeerMsg::Listed(_) => Role::View,
        }
    }

    /// The epoch it is about, when it names one.
    pub fn epoch(&self) -> Option<u64> {
        match self {
            PeerMsg::Started(s) => Some(s.epoch),
            PeerMsg::Ping { .. } => None,
            PeerMsg::Pong(p) => Some(p.epoch),
            PeerMsg::Leaders { epoch, .. }
            | PeerMsg::Tickets { epoch, .. }
            | PeerMsg::Unlock { epoch, .. }
            | PeerMsg::TxFailed { epoch, .. }
            | PeerMsg::TxFence { epoch, .. }
            | PeerMsg::TxFenced { epoch, .. }
            | PeerMsg::TxAck { epoch, .. } => Some(*epoch),
            PeerMsg::Lock(l) => Some(l.epoch),
            PeerMsg::Tx(t) => Some(t.epoch),
            PeerMsg::TxDone(d) => Some(d.epoch),
            PeerMsg::List(r) => Some(r.epoch),
            PeerMsg::Listed(l) => Some(l.epoch),
            PeerMsg::AddTicket { at, .. }
            | PeerMsg::ActivateLock { at, .. }
            | PeerMsg::LockActivated { at, .. }
            | PeerMsg::DropTicket(at)
            | PeerMsg::Locked { at, .. }
            | PeerMsg::LockFailed { at, .. }
            | PeerMsg::Waiting { at, .. }
            | PeerMsg::HasTicket(at) => Some(at.epoch),
        }
    }

    /// The command it is sent as.
    pub fn command(&self) -> &'static str {
        match self {
            PeerMsg::Started(_) => "LOCKSTARTED",
            PeerMsg::Ping { .. } => "LOCKPING",
            PeerMsg::Pong(_) => "LOCKPONG",
            PeerMsg::Leaders { .. } => "LOCKLEADERS",
            PeerMsg::Tickets { .. } => "LOCKTICKETS",
            PeerMsg::Lock(_) => "LOCK",
            PeerMsg::Unlock { .. } => "UNLOCK",
            PeerMsg::AddTicket { .. } => "ADDTICKET",
            PeerMsg::ActivateLock { .. } => "ACTIVATELOCK",
            PeerMsg::LockActivated { .. } => "LOCKACTIVATED",
            PeerMsg::DropTicket(_) => "DROPTICKET",
            PeerMsg::Locked { .. } => "LOCKED",
            PeerMsg::LockFailed { .. } => "LOCKFAILED",
            PeerMsg::HasTicket(_) => "HASTICKET",
            PeerMsg::Waiting { .. } => "LOCKWAITING",
            PeerMsg::Tx(_) => "TRANSACTION",
            PeerMsg::TxDone(_) => "TXDONE",
            PeerMsg::TxFailed { .. } => "TXFAILED",
            PeerMsg::TxAck { .. } => "TXACK",
            PeerMsg::TxFence { .. } => "TXFENCE",
            PeerMsg::TxFenced { .. } => "TXFENCED",
            PeerMsg::List(_) => "LOCKLIST",
            PeerMsg::Listed(_) => "LOCKLISTED",
        }
    }

    /// Reads a message, taking its values out of `m`; `Ok(None)` for a
    /// command this version does not know (ignored, for a later version's
    /// sake).
    pub fn parse(m: &mut Message) -> Result<Option<PeerMsg>, BadField> {
        if let Some(msg) = Self::read_common(m)? {
            return Ok(Some(msg));
        }
        let msg = match m.command.as_str() {
            "LOCKSTARTED" => PeerMsg::Started(Started {
                id: id(m, "lockid")?,
                server_name: m.get_str("server_name").unwrap_or_default().to_owned(),
                start_us: opt_u64(m, "starttime")?.unwrap_or(0),
                wall_ms: opt_u64(m, "wall")?,
                max_epoch: opt_u64(m, "max_epoch")?,
                epoch: num(m, "epoch")?,
                leaders: leaders(m)?,
                add_vote: m.get("add_vote") == Some(b"1"),
                home_grant: m.get("home_grant") == Some(b"1"),
                home_drop: m.get("home_drop") == Some(b"1"),
            }),
            "LOCKLEADERS" => {
                let leaders = leaders(m)?;
                if leaders.is_empty() {
                    return Err(BadField("leader0"));
                }
                PeerMsg::Leaders {
                    epoch: num(m, "epoch")?,
                    leaders,
                }
            }
            "LOCKTICKETS" => PeerMsg::Tickets {
                epoch: num(m, "epoch")?,
                part: part(m)?,
            },
            "TRANSACTION" => PeerMsg::Tx(TxReq {
                epoch: num(m, "epoch")?,
                namespace: m.remove("namespace").ok_or(BadField("namespace"))?,
                req: num(m, "req")?,
                key: text(m, "key")?,
                statements: statements(m)?,
                duration_us: num(m, "duration")?,
                room: num(m, "room")?,
            }),
            "TXDONE" => PeerMsg::TxDone(TxDone {
                epoch: num(m, "epoch")?,
                namespace: m.remove("namespace").ok_or(BadField("namespace"))?,
                req: num(m, "req")?,
                fence: num(m, "fence")?,
                results: bits(m, "results")?,
                sets: tx_sets(m)?,
                renews: numbers(m, "renews")?,
                deletes: numbers(m, "deletes")?,
            }),
            "TXFAILED" => PeerMsg::TxFailed {
                epoch: num(m, "epoch")?,
                namespace: m.remove("namespace").ok_or(BadField("namespace"))?,
                req: num(m, "req")?,
                failed: num(m, "failed")?,
                error: match m.get("error") {
                    Some(b"failed") => "failed",
                    Some(b"overflow") => "overflow",
                    Some(b"invalid") => "invalid",
                    _ => "unavailable",
                },
                description: m
                    .get_str("description")
                    .unwrap_or("refused by the leaders")
                    .to_owned(),
            },
            "TXFENCE" => PeerMsg::TxFence {
                epoch: num(m, "epoch")?,
                namespace: m.remove("namespace").ok_or(BadField("namespace"))?,
                req: num(m, "req")?,
                home: text(m, "home")?,
                fence: num(m, "fence")?,
            },
            "TXFENCED" => PeerMsg::TxFenced {
                epoch: num(m, "epoch")?,
                namespace: m.remove("namespace").ok_or(BadField("namespace"))?,
                req: num(m, "req")?,
                home: text(m, "home")?,
                fence: num(m, "fence")?,
                ok: m.get("ok") == Some(b"true"),
            },
            "TXACK" => PeerMsg::TxAck {
                epoch: num(m, "epoch")?,
                namespace: m.remove("namespace").ok_or(BadField("namespace"))?,
                req: num(m, "req")?,
                ok: m.get("ok") == Some(b"true"),
            },
            "LOCKLIST" => PeerMsg::List(view::parse_req(m)?),
            "LOCKLISTED" => PeerMsg::Listed(view::parse_listed(m)?),
            _ => return Ok(None),
        };
        Ok(Some(msg))
    }
    /// The commands [`read_common`](Self::read_common) reads: those of a
    /// grant and of liveness, nearly every message agents exchange.
    pub fn is_common(command: &str) -> bool {
        matches!(
            command,
            "LOCKPING"
                | "LOCKPONG"
                | "LOCK"
                | "UNLOCK"
                | "ADDTICKET"
                | "ACTIVATELOCK"
                | "LOCKACTIVATED"
                | "DROPTICKET"
                | "LOCKED"
                | "LOCKFAILED"
                | "HASTICKET"
                | "LOCKWAITING"
        )
    }

    /// Reads a message of a [common](Self::is_common) command from a
    /// [`Message`] or a [scanned](crate::wire::scan) line; `Ok(None)` for
    /// any other command. Every id and name is a copy of its own.
    pub fn read_common<F: Fields>(m: &mut F) -> Result<Option<PeerMsg>, BadField> {
        Self::read_known(m, &mut Fresh)
    }

    /// [`read_common`](Self::read_common), the ids and names it reads
    /// shared with those `known` has.
    pub fn read_known<F: Fields, K: Known>(
        m: &mut F,
        known: &mut K,
    ) -> Result<Option<PeerMsg>, BadField> {
        let msg = match m.command() {
            "LOCKPING" => PeerMsg::Ping {
                serial: num(m, "serial")?,
            },
            "LOCKPONG" => PeerMsg::Pong(Pong {
                serial: num(m, "serial")?,
                epoch: num(m, "epoch")?,
                view: opt_u64(m, "view")?.unwrap_or(0),
                wall_ms: opt_u64(m, "wall")?,
                active: m.get("active") == Some(b"1"),
                links: opt_u64(m, "links")?,
                delay_us: opt_u64(m, "delay")?.unwrap_or(0),
            }),
            "LOCK" => PeerMsg::Lock(Lock {
                epoch: num(m, "epoch")?,
                object: object(m, known)?,
                req: num(m, "req")?,
                key: text(m, "key")?,
                kind: kind_of(m)?,
                try_once: m.get("try") == Some(b"true"),
                progress: match m.get("progress") {
                    None => false,
                    Some(b"true") => true,
                    Some(_) => return Err(BadField("progress")),
                },
            }),
            "UNLOCK" => PeerMsg::Unlock {
                epoch: num(m, "epoch")?,
                object: object(m, known)?,
                req: num(m, "req")?,
            },
            "ADDTICKET" => PeerMsg::AddTicket {
                at: ticket_at(m, known)?,
                key: text(m, "key")?,
                number: num(m, "number")?,
                kind: kind_of(m)?,
                fence: opt_u64(m, "fence")?,
            },
            "ACTIVATELOCK" => PeerMsg::ActivateLock {
                at: ticket_at(m, known)?,
                fence: num(m, "fence")?,
            },
            "LOCKACTIVATED" => {
                let other = match (m.get("other_home"), m.get("other_req")) {
                    (Some(_), Some(r)) => {
                        let r = parse_u64(r).ok_or(BadField("other_req"))?;
                        Some((text(m, "other_home")?, r))
                    }
                    _ => None,
                };
                PeerMsg::LockActivated {
                    at: ticket_at(m, known)?,
                    fence: num(m, "fence")?,
                    ok: m.get("ok") == Some(b"true"),
                    other,
                }
            }
            "DROPTICKET" => PeerMsg::DropTicket(ticket_at(m, known)?),
            "LOCKED" => PeerMsg::Locked {
                at: ticket_at(m, known)?,
                fence: num(m, "fence")?,
            },
            "LOCKFAILED" => PeerMsg::LockFailed {
                at: ticket_at(m, known)?,
                error: match m.get("error") {
                    Some(b"busy") => "busy",
                    Some(b"overflow") => "overflow",
                    Some(b"invalid") => "invalid",
                    Some(b"duplicate") => "duplicate",
                    _ => "unavailable",
                },
                description: m
                    .get_str("description")
                    .unwrap_or("refused by the leaders")
                    .to_owned(),
            },
            "HASTICKET" => PeerMsg::HasTicket(ticket_at(m, known)?),
            "LOCKWAITING" => PeerMsg::Waiting {
                at: ticket_at(m, known)?,
                position: Some(num(m, "position")?)
                    .filter(|p| *p > 0)
                    .ok_or(BadField("position"))?,
            },
            _ => return Ok(None),
        };
        Ok(Some(msg))
    }
}

#[inline(always)]
fn num(m: &(impl Fields + ?Sized), name: &'static str) -> Result<u64, BadField> {
    m.get(name).and_then(parse_u64).ok_or(BadField(name))
}

#[inline(always)]
fn opt_u64(m: &(impl Fields + ?Sized), name: &'static str) -> Result<Option<u64>, BadField> {
    m.get(name)
        .map(|v| parse_u64(v).ok_or(BadField(name)))
        .transpose()
}

#[inline(always)]
fn text(m: &mut (impl Fields + ?Sized), name: &'static str) -> Result<String, BadField> {
    m.take(name)
        .and_then(|v| String::from_utf8(v).ok())
        .ok_or(BadField(name))
}

/// Any text, as an id (the home of a ticket, as the owner named it).
fn id_text(m: &mut Message, name: &'static str) -> Result<Id, BadField> {
    text(m, name).map(Id::from)
}

/// An agent's id, checked.
fn id(m: &mut Message, name: &'static str) -> Result<Id, BadField> {
    let id = text(m, name)?;
    ids::parse_id(&id).ok_or(BadField(name))?;
    Ok(Id::from(id))
}

#[inline(always)]
fn object(m: &(impl Fields + ?Sized), known: &mut impl Known) -> Result<ObjectName, BadField> {
    m.get("object_name")
        .map(|n| known.name(n))
        .ok_or(BadField("object_name"))
}

#[inline(always)]
fn ticket_at(m: &(impl Fields + ?Sized), known: &mut impl Known) -> Result<TicketAt, BadField> {
    Ok(TicketAt {
        epoch: num(m, "epoch")?,
        object: object(m, known)?,
        home: known.id(m.get_str("home").ok_or(BadField("home"))?),
        req: num(m, "req")?,
    })
}

/// Where reading a message finds the agents' ids and the object names
/// already known here: one it names is shared (an `Arc` cloned) instead
/// of copied.
pub trait Known {
    /// The id `text`.
    fn id(&mut self, text: &str) -> Id;
    /// The object name `bytes`.
    fn name(&mut self, bytes: &[u8]) -> ObjectName;
}

/// Nothing known: every id and name read is a copy of its own.
pub struct Fresh;

impl Known for Fresh {
    fn id(&mut self, text: &str) -> Id {
        Id::from(text)
    }

    fn name(&mut self, bytes: &[u8]) -> ObjectName {
        ObjectName::from(bytes)
    }
}

/// The leaders an epoch names (`leader0`…), their ids checked.
fn leaders(m: &mut Message) -> Result<Vec<Id>, BadField> {
    let mut out = Vec::new();
    for key in LEADER_KEYS {
        if m.get(key).is_some() {
            out.push(id(m, key).map_err(|_| BadField("leader"))?);
        }
    }
    Ok(out)
}

/// Reads what [`put_kind`](write::put_kind) wrote.
pub(crate) fn kind_of(msg: &(impl Fields + ?Sized)) -> Result<Kind, BadField> {
    let mode = match msg.get("mode") {
        Some(b"shared") => Mode::Shared,
        Some(b"counted") => Mode::Counted,
        Some(b"exclusive") | None => Mode::Exclusive,
        Some(_) => return Err(BadField("mode")),
    };
    let limit = match msg.get("limit") {
        None => None,
        Some(v) => Some(
            parse_u64(v)
                .and_then(|l| u32::try_from(l).ok())
                .filter(|l| *l > 0)
                .ok_or(BadField("limit"))?,
        ),
    };
    if mode == Mode::Counted && limit.is_none() {
        return Err(BadField("limit"));
    }
    let policy = match msg.get("policy") {
        None | Some(b"hard") => Policy::Hard,
        Some(b"soft") => Policy::Soft,
        Some(b"timed") => Policy::Timed {
            quiet: Duration::from_micros(num(msg, "quiet")?),
        },
        Some(_) => return Err(BadField("policy")),
    };
    Ok(Kind {
        mode,
        limit,
        policy,
    })
}

#[cfg(test)]
mod tests;
