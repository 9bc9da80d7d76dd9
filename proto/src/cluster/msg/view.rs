//! `LOCKLIST` / `LOCKLISTED`: an agent asks the owner leaders for the
//! queues of the objects they own, for a client's `LISTTICKETS`
//! (snaplock(7) "Listing tickets").
//!
//! An answer is one line, bounded twice: at most [`LIST_ENTRIES`] tickets
//! and about [`LIST_BYTES`] bytes of records; what does not fit is only
//! said to exist (`more=true`), so a table of a million locks costs its
//! owner one bounded scan and one bounded line.
//!
//! `tickets=` holds the records back to back, each
//! `NUMBER POSITION FENCE SINCE MODE LEN:OBJECT LEN:AGENT LEN:KEY`:
//! `POSITION` is 0 for a holder, 1 for the first waiter, ...; `FENCE` the
//! holder's fence (0: a waiter); `SINCE` when it was granted, Unix µs
//! (0: unknown, as for a lock inherited from an earlier epoch); `MODE` is
//! `x`, `s` or `c`; `AGENT` is the server name of the ticket's home.

use super::{BadField, num, opt_u64};
use crate::vocab::{Mode, parse_u64};
use crate::wire::{Message, put_u64};

/// Most tickets in one `LOCKLISTED`.
pub(crate) const LIST_ENTRIES: usize = 1000;
/// Most bytes of records in one `LOCKLISTED` (then one more record may
/// go over): far under the peer line limit even escaped.
pub(crate) const LIST_BYTES: usize = 128 << 10;

/// A `LOCKLIST`: the queues of the objects the receiver owns in `epoch`,
/// or of `object` alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ListReq {
    pub epoch: u64,
    pub serial: u64,
    pub object: Option<Vec<u8>>,
}

/// One ticket of a queue, as its owner sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ListEntry {
    pub object: Vec<u8>,
    /// The bakery number.
    pub number: u64,
    /// 0: a holder; then 1, 2, ... for the waiters in queue order.
    pub position: u64,
    /// The holder's fence; 0 for a waiter.
    pub fence: u64,
    /// When it was granted, Unix µs; 0: unknown.
    pub since_us: u64,
    pub mode: Mode,
    /// The server name of the agent the request came from.
    pub agent: String,
    pub key: String,
}

/// A `LOCKLISTED`: the answer to [`ListReq`] `serial`. `ready` is false
/// when the sender is not a ready leader of `epoch` (it listed nothing);
/// `more`: it owns tickets it did not list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Listed {
    pub epoch: u64,
    pub serial: u64,
    pub ready: bool,
    pub more: bool,
    pub entries: Vec<ListEntry>,
}

impl ListEntry {
    /// Appends its record (see the module's doc).
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        for n in [self.number, self.position, self.fence, self.since_us] {
            put_u64(out, n);
            out.push(b' ');
        }
        out.extend_from_slice(match self.mode {
            Mode::Exclusive => b"x ",
            Mode::Shared => b"s ",
            Mode::Counted => b"c ",
        });
        for field in [&self.object, self.agent.as_bytes(), self.key.as_bytes()] {
            put_u64(out, field.len() as u64);
            out.push(b':');
            out.extend_from_slice(field);
        }
    }
}

/// Reads `tickets=`: every record whole, at most [`LIST_ENTRIES`].
fn entries(m: &Message) -> Result<Vec<ListEntry>, BadField> {
    const BAD: BadField = BadField("tickets");
    let mut rest = m.get("tickets").unwrap_or_default();
    let mut out = Vec::new();
    while !rest.is_empty() {
        if out.len() >= LIST_ENTRIES {
            return Err(BAD);
        }
        let mut n = [0u64; 4];
        for v in &mut n {
            let sp = rest.iter().position(|&b| b == b' ').ok_or(BAD)?;
            *v = parse_u64(&rest[..sp]).ok_or(BAD)?;
            rest = &rest[sp + 1..];
        }
        let mode = match rest {
            [b'x', b' ', ..] => Mode::Exclusive,
            [b's', b' ', ..] => Mode::Shared,
            [b'c', b' ', ..] => Mode::Counted,
            _ => return Err(BAD),
        };
        rest = &rest[2..];
        let mut fields: [&[u8]; 3] = [&[]; 3];
        for f in &mut fields {
            let colon = rest.iter().position(|&b| b == b':').ok_or(BAD)?;
            let len = parse_u64(&rest[..colon])
                .and_then(|l| usize::try_from(l).ok())
                .ok_or(BAD)?;
            rest = &rest[colon + 1..];
            if rest.len() < len {
                return Err(BAD);
            }
            *f = &rest[..len];
            rest = &rest[len..];
        }
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| BAD);
        let [object, agent, key] = fields;
        let [number, position, fence, since_us] = n;
        if (position == 0) != (fence != 0) {
            return Err(BAD); // a holder has a fence, a waiter none
        }
        out.push(ListEntry {
            object: object.to_vec(),
            number,
            position,
            fence,
            since_us,
            mode,
            agent: text(agent)?,
            key: text(key)?,
        });
    }
    Ok(out)
}

pub(super) fn parse_req(m: &mut Message) -> Result<ListReq, BadField> {
    Ok(ListReq {
        epoch: num(m, "epoch")?,
        serial: num(m, "serial")?,
        object: m.remove("object_name"),
    })
}

pub(super) fn parse_listed(m: &mut Message) -> Result<Listed, BadField> {
    Ok(Listed {
        epoch: num(m, "epoch")?,
        serial: num(m, "serial")?,
        ready: opt_u64(m, "ready")?.unwrap_or(0) == 1,
        more: opt_u64(m, "more")?.unwrap_or(0) == 1,
        entries: entries(m)?,
    })
}

pub(super) fn put_req(m: &mut Message, r: ListReq) {
    m.set_u64("epoch", r.epoch);
    m.set_u64("serial", r.serial);
    if let Some(o) = r.object {
        m.set_owned("object_name", o);
    }
}

pub(super) fn put_listed(m: &mut Message, l: Listed) {
    m.set_u64("epoch", l.epoch);
    m.set_u64("serial", l.serial);
    m.set_u64("ready", u64::from(l.ready));
    if l.more {
        m.set_u64("more", 1);
    }
    if !l.entries.is_empty() {
        let mut out = Vec::new();
        for e in &l.entries {
            e.encode(&mut out);
        }
        m.set_owned("tickets", out);
    }
}
