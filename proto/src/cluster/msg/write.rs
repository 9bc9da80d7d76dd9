//! Writing a peer message: the messages of every grant and of the links'
//! liveness straight into a line ([`Line`]), the others through a
//! [`Message`]; [`PeerMsg::put`] says the parameters once for both.

use super::tickets::put_part;
use super::tx::{put_numbers, put_tx_head};
use super::{LEADER_KEYS, MAX_LEADERS, PeerMsg, TicketAt, view};
use crate::cluster::Id;
use crate::vocab::{Kind, Policy};
use crate::wire::{Line, Message, Params, encode_to_vec};

impl PeerMsg {
    /// The message as it goes on the wire, `\n` included.
    #[cfg(test)]
    pub fn into_line(self) -> Vec<u8> {
        self.into_line_in(Vec::new())
    }

    /// The message as it goes on the wire, `\n` included. The messages of
    /// every grant and of the links' liveness are written straight from
    /// their fields, in `buf` (emptied first, its room kept); the others
    /// through a [`Message`], in a buffer of their own.
    pub fn into_line_in(self, buf: Vec<u8>) -> Vec<u8> {
        {
            let mut line = Line::new(self.command());
            if self.put(&mut line) {
                return line.finish_in(buf);
            }
        }
        encode_to_vec(&self.encode())
    }

    /// The message as a [`Message`]: the same parameters as
    /// [`into_line_in`](Self::into_line_in) writes.
    pub fn encode(self) -> Message {
        let mut m = Message::new(self.command());
        if self.put(&mut m) {
            return m;
        }
        match self {
            PeerMsg::Started(s) => {
                m.set("lockid", &*s.id);
                m.set_owned("server_name", s.server_name.into_bytes());
                m.set_u64("starttime", s.start_us);
                if let Some(w) = s.wall_ms {
                    m.set_u64("wall", w);
                }
                if let Some(e) = s.max_epoch {
                    m.set_u64("max_epoch", e);
                }
                m.set_u64("epoch", s.epoch);
                put_ids(&mut m, LEADER_KEYS, &s.leaders);
                if s.add_vote {
                    m.set("add_vote", "1");
                }
                if s.home_grant {
                    m.set("home_grant", "1");
                }
                if s.home_drop {
                    m.set("home_drop", "1");
                }
            }
            PeerMsg::Leaders { epoch, leaders } => {
                m.set_u64("epoch", epoch);
                put_ids(&mut m, LEADER_KEYS, &leaders);
            }
            PeerMsg::Tickets { epoch, part } => {
                m.set("part", part.name());
                m.set_u64("epoch", epoch);
                put_part(&mut m, part);
            }
            PeerMsg::Tx(t) => {
                put_tx_head(&mut m, t.epoch, t.namespace, t.req);
                m.set_owned("key", t.key.into_bytes());
                for (i, st) in t.statements.into_iter().enumerate() {
                    m.set_owned(&format!("s{}", i + 1), st);
                }
                m.set_u64("duration", t.duration_us);
                m.set_u64("room", t.room);
            }
            PeerMsg::TxDone(d) => {
                put_tx_head(&mut m, d.epoch, d.namespace, d.req);
                m.set_u64("fence", d.fence);
                let bits: Vec<u8> = d
                    .results
                    .iter()
                    .map(|&r| if r { b'1' } else { b'0' })
                    .collect();
                m.set_owned("results", bits);
                for (i, (req, dup, var)) in d.sets.into_iter().enumerate() {
                    let mut v = format!("{req} {} ", u8::from(dup)).into_bytes();
                    v.extend_from_slice(&var);
                    m.set_owned(&format!("set{}", i + 1), v);
                }
                put_numbers(&mut m, "renews", &d.renews);
                put_numbers(&mut m, "deletes", &d.deletes);
            }
            PeerMsg::TxFailed {
                epoch,
                namespace,
                req,
                failed,
                error,
                description,
            } => {
                put_tx_head(&mut m, epoch, namespace, req);
                m.set_u64("failed", failed);
                m.set("error", error);
                m.set_owned("description", description.into_bytes());
            }
            PeerMsg::TxAck {
                epoch,
                namespace,
                req,
                ok,
            } => {
                put_tx_head(&mut m, epoch, namespace, req);
                m.set("ok", if ok { "true" } else { "false" });
            }
            PeerMsg::TxFence {
                epoch,
                namespace,
                req,
                home,
                fence,
            } => {
                put_tx_head(&mut m, epoch, namespace, req);
                m.set_owned("home", home.into_bytes());
                m.set_u64("fence", fence);
            }
            PeerMsg::TxFenced {
                epoch,
                namespace,
                req,
                home,
                fence,
                ok,
            } => {
                put_tx_head(&mut m, epoch, namespace, req);
                m.set_owned("home", home.into_bytes());
                m.set_u64("fence", fence);
                m.set("ok", if ok { "true" } else { "false" });
            }
            PeerMsg::List(r) => view::put_req(&mut m, r),
            PeerMsg::Listed(l) => view::put_listed(&mut m, l),
            // Written by `put`.
            PeerMsg::Ping { .. }
            | PeerMsg::Pong(_)
            | PeerMsg::Lock(_)
            | PeerMsg::Unlock { .. }
            | PeerMsg::AddTicket { .. }
            | PeerMsg::ActivateLock { .. }
            | PeerMsg::Locked { .. }
            | PeerMsg::LockActivated { .. }
            | PeerMsg::DropTicket(_)
            | PeerMsg::HasTicket(_)
            | PeerMsg::Waiting { .. }
            | PeerMsg::LockFailed { .. } => {}
        }
        m
    }

    /// Writes the parameters of the messages of every grant and of the
    /// links' liveness; false for the others (written into a [`Message`]
    /// by [`encode`](Self::encode)).
    fn put<'a>(&'a self, p: &mut impl Params<'a>) -> bool {
        match self {
            PeerMsg::Ping { serial } => p.num("serial", *serial),
            PeerMsg::Pong(pong) => {
                p.num("serial", pong.serial);
                p.num("epoch", pong.epoch);
                p.num("view", pong.view);
                if let Some(w) = pong.wall_ms {
                    p.num("wall", w);
                }
                p.text("active", if pong.active { b"1" } else { b"0" });
                if let Some(links) = pong.links {
                    p.num("links", links);
                }
                if pong.delay_us > 0 {
                    p.num("delay", pong.delay_us);
                }
            }
            // Each in the order of its names, as the line is written: the
            // line's sort then finds nothing to move.
            PeerMsg::Lock(l) => {
                p.num("epoch", l.epoch);
                p.text("key", l.key.as_bytes());
                put_kind(p, &l.kind);
                p.text("object_name", &l.object);
                if l.progress {
                    p.text("progress", b"true");
                }
                p.num("req", l.req);
                if l.try_once {
                    p.text("try", b"true");
                }
            }
            PeerMsg::Unlock { epoch, object, req } => {
                p.num("epoch", *epoch);
                p.text("object_name", object);
                p.num("req", *req);
            }
            PeerMsg::AddTicket {
                at,
                key,
                number,
                kind,
                fence,
            } => {
                p.num("epoch", at.epoch);
                if let Some(f) = fence {
                    p.num("fence", *f);
                }
                p.text("home", at.home.as_bytes());
                p.text("key", key.as_bytes());
                put_kind(p, kind);
                p.num("number", *number);
                p.text("object_name", &at.object);
                p.num("req", at.req);
            }
            PeerMsg::ActivateLock { at, fence } | PeerMsg::Locked { at, fence } => {
                p.num("epoch", at.epoch);
                p.num("fence", *fence);
                put_ticket_rest(p, at);
            }
            PeerMsg::LockActivated {
                at,
                fence,
                ok,
                other,
            } => {
                p.num("epoch", at.epoch);
                p.num("fence", *fence);
                p.text("home", at.home.as_bytes());
                p.text("object_name", &at.object);
                p.text("ok", if *ok { b"true" } else { b"false" });
                if let Some((home, req)) = other {
                    p.text("other_home", home.as_bytes());
                    p.num("other_req", *req);
                }
                p.num("req", at.req);
            }
            PeerMsg::DropTicket(at) | PeerMsg::HasTicket(at) => {
                p.num("epoch", at.epoch);
                put_ticket_rest(p, at);
            }
            PeerMsg::Waiting { at, position } => {
                p.num("epoch", at.epoch);
                p.text("home", at.home.as_bytes());
                p.text("object_name", &at.object);
                p.num("position", *position);
                p.num("req", at.req);
            }
            PeerMsg::LockFailed {
                at,
                error,
                description,
            } => {
                p.text("description", description.as_bytes());
                p.num("epoch", at.epoch);
                p.text("error", error.as_bytes());
                put_ticket_rest(p, at);
            }
            _ => return false,
        }
        true
    }
}

/// A ticket's `home`, `object_name` and `req`: the last of its names.
fn put_ticket_rest<'a>(p: &mut impl Params<'a>, at: &'a TicketAt) {
    p.text("home", at.home.as_bytes());
    p.text("object_name", &at.object);
    p.num("req", at.req);
}

pub(super) fn put_ids(m: &mut Message, keys: [&'static str; MAX_LEADERS], ids: &[Id]) {
    for (key, id) in keys.iter().zip(ids) {
        m.set(key, &**id);
    }
}

/// Writes a ticket's kind.
pub(crate) fn put_kind<'a>(p: &mut impl Params<'a>, kind: &Kind) {
    if let Some(limit) = kind.limit {
        p.num("limit", u64::from(limit));
    }
    p.text("mode", kind.mode.as_str().as_bytes());
    match kind.policy {
        Policy::Hard => {}
        Policy::Soft => p.text("policy", b"soft"),
        Policy::Timed { quiet } => {
            p.text("policy", b"timed");
            p.num(
                "quiet",
                u64::try_from(quiet.as_micros()).unwrap_or(u64::MAX),
            );
        }
    }
}
