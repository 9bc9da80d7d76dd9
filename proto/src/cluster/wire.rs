//! Reading and writing the fields of peer messages.
//!
//! A peer message that lacks a field or carries a bad one is dropped with a
//! log line: a peer is another snaplockd, so this is a bug or an attack, and
//! neither may take the agent down (B11).

use std::time::Duration;

use crate::vocab::parse_u64;
use crate::vocab::{Kind, Mode, Policy};
use crate::wire::Message;

/// A required field was missing or bad.
#[derive(Debug)]
pub struct Bad(pub &'static str);

pub fn u64_of(msg: &Message, name: &'static str) -> Result<u64, Bad> {
    msg.get(name).and_then(parse_u64).ok_or(Bad(name))
}

pub fn str_of<'m>(msg: &'m Message, name: &'static str) -> Result<&'m str, Bad> {
    msg.get(name)
        .and_then(|v| std::str::from_utf8(v).ok())
        .ok_or(Bad(name))
}

pub fn bytes_of<'m>(msg: &'m Message, name: &'static str) -> Result<&'m [u8], Bad> {
    msg.get(name).ok_or(Bad(name))
}

pub fn bool_of(msg: &Message, name: &'static str) -> bool {
    msg.get(name) == Some(b"true")
}

/// Writes a ticket's kind.
pub fn put_kind(msg: &mut Message, kind: &Kind) {
    match kind.mode {
        Mode::Exclusive => msg.set("mode", "exclusive"),
        Mode::Shared => msg.set("mode", "shared"),
    }
    if let Some(limit) = kind.limit {
        msg.set_u64("limit", u64::from(limit));
    }
    match kind.policy {
        Policy::Hard => {}
        Policy::Soft => msg.set("policy", "soft"),
        Policy::Timed { quiet } => {
            msg.set("policy", "timed");
            msg.set_u64(
                "quiet",
                u64::try_from(quiet.as_micros()).unwrap_or(u64::MAX),
            );
        }
    }
}

/// Reads what [`put_kind`] wrote.
pub fn kind_of(msg: &Message) -> Result<Kind, Bad> {
    let mode = match msg.get("mode") {
        Some(b"shared") => Mode::Shared,
        Some(b"exclusive") | None => Mode::Exclusive,
        Some(_) => return Err(Bad("mode")),
    };
    let limit = match msg.get("limit") {
        None => None,
        Some(v) => Some(
            parse_u64(v)
                .and_then(|l| u32::try_from(l).ok())
                .filter(|l| *l > 0)
                .ok_or(Bad("limit"))?,
        ),
    };
    let policy = match msg.get("policy") {
        None | Some(b"hard") => Policy::Hard,
        Some(b"soft") => Policy::Soft,
        Some(b"timed") => Policy::Timed {
            quiet: Duration::from_micros(u64_of(msg, "quiet")?),
        },
        Some(_) => return Err(Bad("policy")),
    };
    Ok(Kind {
        mode,
        limit,
        policy,
    })
}
