//! Tickets on the wire in a handover: `LOCKTICKETS` lines that carry
//! many tickets each (docs/cluster.md "Handover"), so that a handover of a
//! million held locks is thousands of lines, not millions of messages.

use std::time::Duration;

use super::Id;
use super::msg::{BadField, Part, PeerMsg, Tickets};
use crate::vocab::{Kind, Mode, ObjectName, Policy, parse_u64};
use crate::wire::{Message, put_u64};

/// One held (or, from a home, waiting) ticket in a report or a state.
#[derive(Clone, Debug)]
pub(crate) struct ReportedTicket {
    pub object: ObjectName,
    pub home: Id,
    pub req: u64,
    pub key: Box<str>,
    pub fence: u64,
    pub kind: Kind,
}

/// Most tickets on one `LOCKTICKETS` line, and most bytes of their
/// records: a handover of a million locks is a few thousand lines, each
/// well under the peer line limit even escaped.
pub(crate) const BATCH_TICKETS: usize = 512;
const BATCH_BYTES: usize = 256 << 10;

/// A ticket's fields as its holder keeps them, to write its record without
/// a copy (a report of a million locks).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReportedRef<'a> {
    pub object: &'a [u8],
    pub home: &'a str,
    pub req: u64,
    pub key: &'a str,
    pub fence: u64,
    pub kind: Kind,
}

impl ReportedRef<'_> {
    /// Appends this ticket's record (see [`Batch`]).
    fn encode(&self, held: Option<bool>, out: &mut Vec<u8>) {
        let (mode, limit) = (
            match self.kind.mode {
                Mode::Exclusive => b'x',
                Mode::Shared => b's',
                Mode::Counted => b'c',
            },
            self.kind.limit.unwrap_or(0),
        );
        let (policy, quiet) = match self.kind.policy {
            Policy::Hard => (b'h', 0),
            Policy::Soft => (b's', 0),
            Policy::Timed { quiet } => (b't', u64::try_from(quiet.as_micros()).unwrap_or(u64::MAX)),
        };
        let held = match held {
            None => b'-',
            Some(true) => b'1',
            Some(false) => b'0',
        };
        put_u64(out, self.fence);
        out.push(b' ');
        put_u64(out, self.req);
        out.extend_from_slice(&[b' ', mode, b' ']);
        put_u64(out, u64::from(limit));
        out.extend_from_slice(&[b' ', policy, b' ']);
        put_u64(out, quiet);
        out.extend_from_slice(&[b' ', held, b' ']);
        for field in [self.object, self.home.as_bytes(), self.key.as_bytes()] {
            put_u64(out, field.len() as u64);
            out.push(b':');
            out.extend_from_slice(field);
        }
    }
}

impl ReportedTicket {
    fn as_ref(&self) -> ReportedRef<'_> {
        ReportedRef {
            object: &self.object,
            home: &self.home,
            req: self.req,
            key: &self.key,
            fence: self.fence,
            kind: self.kind,
        }
    }

    /// Reads one record from the front of `input`; `home` stands for an
    /// empty home (a home's own report). `last` is the home of the record
    /// before: most records of a batch share it, and then share its id.
    fn decode(
        input: &mut &[u8],
        home: Option<&Id>,
        last: &mut Option<Id>,
    ) -> Result<(ReportedTicket, Option<bool>), BadField> {
        fn word<'a>(input: &mut &'a [u8], end: u8) -> Result<&'a [u8], BadField> {
            let at = input
                .iter()
                .position(|&b| b == end)
                .ok_or(BadField("tickets"))?;
            let (w, rest) = input.split_at(at);
            *input = &rest[1..];
            Ok(w)
        }
        fn num(input: &mut &[u8], end: u8) -> Result<u64, BadField> {
            parse_u64(word(input, end)?).ok_or(BadField("tickets"))
        }
        fn bytes<'a>(input: &mut &'a [u8]) -> Result<&'a [u8], BadField> {
            let len = usize::try_from(num(input, b':')?).map_err(|_| BadField("tickets"))?;
            if len > input.len() {
                return Err(BadField("tickets"));
            }
            let (b, rest) = input.split_at(len);
            *input = rest;
            Ok(b)
        }
        fn text<'a>(input: &mut &'a [u8]) -> Result<&'a str, BadField> {
            std::str::from_utf8(bytes(input)?).map_err(|_| BadField("tickets"))
        }
        let fence = num(input, b' ')?;
        let req = num(input, b' ')?;
        let mode = match word(input, b' ')? {
            b"x" => Mode::Exclusive,
            b"s" => Mode::Shared,
            b"c" => Mode::Counted,
            _ => return Err(BadField("mode")),
        };
        let limit = match num(input, b' ')? {
            0 if mode == Mode::Counted => return Err(BadField("limit")),
            0 => None,
            l => Some(u32::try_from(l).map_err(|_| BadField("limit"))?),
        };
        let policy = word(input, b' ')?;
        let quiet = Duration::from_micros(num(input, b' ')?);
        let policy = match policy {
            b"h" => Policy::Hard,
            b"s" => Policy::Soft,
            b"t" => Policy::Timed { quiet },
            _ => return Err(BadField("policy")),
        };
        let held = match word(input, b' ')? {
            b"-" => None,
            b"1" => Some(true),
            b"0" => Some(false),
            _ => return Err(BadField("held")),
        };
        let object = bytes(input)?;
        if object.is_empty() {
            return Err(BadField("object_name"));
        }
        let object = ObjectName::from(object);
        let home = match (text(input)?, home) {
            ("", Some(h)) => h.clone(),
            ("", None) => return Err(BadField("home")),
            (h, _) => match last {
                Some(l) if **l == *h => l.clone(),
                _ => last.insert(Id::from(h)).clone(),
            },
        };
        let key = text(input)?.into();
        let kind = Kind {
            mode,
            limit,
            policy,
        };
        Ok((
            ReportedTicket {
                object,
                home,
                req,
                key,
                fence,
                kind,
            },
            held,
        ))
    }
}

/// Tickets on `LOCKTICKETS` lines: `part=P;epoch=E;n=K;tickets=R` where R
/// is K records, each `FENCE REQ MODE LIMIT POLICY QUIET HELD ` followed by
/// the object name, the home's id and the key, each as `LEN:BYTES`
/// (`MODE` `x` or `s`, `LIMIT` 0 for none, `POLICY` `h`, `s` or `t`,
/// `QUIET` µs, `HELD` `1`, `0` or `-`; an empty home is the sender).
#[derive(Debug)]
pub(crate) struct Batch {
    of: BatchOf,
    epoch: u64,
    records: Vec<u8>,
    count: usize,
}

/// Which part of `LOCKTICKETS` a batch is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BatchOf {
    /// A report's tickets of the sender as a leader.
    Leader,
    /// A report's tickets of the sender as a home.
    Home,
    /// The state's.
    State,
    /// A late report's, passed on.
    Late,
}

impl Batch {
    pub(crate) fn new(of: BatchOf, epoch: u64) -> Batch {
        Batch {
            of,
            epoch,
            records: Vec::new(),
            count: 0,
        }
    }

    /// Adds a ticket; returns a full line when one is ready.
    pub(crate) fn push(&mut self, t: &ReportedTicket, held: Option<bool>) -> Option<PeerMsg> {
        self.push_ref(t.as_ref(), held)
    }

    /// [`Batch::push`] from borrowed fields.
    pub(crate) fn push_ref(&mut self, t: ReportedRef<'_>, held: Option<bool>) -> Option<PeerMsg> {
        t.encode(held, &mut self.records);
        self.count += 1;
        if self.count >= BATCH_TICKETS || self.records.len() >= BATCH_BYTES {
            return self.take();
        }
        None
    }

    /// The line of what was added since the last one, if anything was.
    pub(crate) fn take(&mut self) -> Option<PeerMsg> {
        if self.count == 0 {
            return None;
        }
        let tickets = Tickets {
            n: self.count as u64,
            records: std::mem::take(&mut self.records),
        };
        self.count = 0;
        let part = match self.of {
            BatchOf::Leader => Part::Report {
                as_leader: true,
                tickets,
            },
            BatchOf::Home => Part::Report {
                as_leader: false,
                tickets,
            },
            BatchOf::State => Part::State(tickets),
            BatchOf::Late => Part::Late(tickets),
        };
        Some(PeerMsg::Tickets {
            epoch: self.epoch,
            part,
        })
    }
}

/// The tickets of a `LOCKTICKETS` line, each with what it says of being
/// held; `home` stands for an empty home.
pub(crate) fn read_batch(
    batch: &Tickets,
    home: Option<&Id>,
) -> Result<Vec<(ReportedTicket, Option<bool>)>, BadField> {
    let n = batch.n;
    let mut input = &batch.records[..];
    let mut out = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(BATCH_TICKETS));
    let mut last = None;
    while !input.is_empty() {
        if out.len() as u64 >= n {
            return Err(BadField("n"));
        }
        out.push(ReportedTicket::decode(&mut input, home, &mut last)?);
    }
    if out.len() as u64 != n {
        return Err(BadField("n"));
    }
    Ok(out)
}

/// One ticket of a `LOCKTICKETS` line as an observer outside the core
/// sees it (the simulator's wire checks).
#[derive(Clone, Debug)]
pub struct TicketRecord {
    /// The object's name.
    pub object: Vec<u8>,
    /// The id of the agent the request came from.
    pub home: String,
    /// The request's number on its home.
    pub req: u64,
    /// `<server_name>/<pid>`.
    pub key: String,
    /// The fence it was granted with (0: not granted).
    pub fence: u64,
    /// `mode=`.
    pub mode: Mode,
    /// `limit=`, if any.
    pub limit: Option<u32>,
}

/// The tickets a `LOCKTICKETS` line carries (none when it carries none or
/// cannot be read); an empty home is `sender`.
pub fn ticket_records(msg: &Message, sender: &str) -> Vec<TicketRecord> {
    let sender: Id = sender.into();
    let batch = match (msg.get("n").and_then(parse_u64), msg.get("tickets")) {
        (Some(n), Some(records)) => Tickets {
            n,
            records: records.to_vec(),
        },
        _ => return Vec::new(),
    };
    read_batch(&batch, Some(&sender))
        .unwrap_or_default()
        .into_iter()
        .map(|(t, _)| TicketRecord {
            object: t.object.to_vec(),
            home: t.home.to_string(),
            req: t.req,
            key: t.key.to_string(),
            fence: t.fence,
            mode: t.kind.mode,
            limit: t.kind.limit,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{encode_to_vec, parse};

    fn ticket(object: &[u8], home: &str, n: u64) -> ReportedTicket {
        ReportedTicket {
            object: ObjectName::from(object),
            home: Id::from(home),
            req: n,
            key: format!("node{n}/{}", n * 7).into(),
            fence: n << 20 | n,
            kind: match n % 4 {
                0 => Kind {
                    mode: Mode::Exclusive,
                    limit: None,
                    policy: Policy::Timed {
                        quiet: Duration::from_micros(1_500_000 + n),
                    },
                },
                1 => Kind {
                    mode: Mode::Shared,
                    limit: Some(u32::try_from(n).unwrap()),
                    policy: Policy::Hard,
                },
                2 => Kind {
                    mode: Mode::Counted,
                    limit: Some(u32::try_from(n).unwrap()),
                    policy: Policy::Hard,
                },
                _ => Kind {
                    mode: Mode::Exclusive,
                    limit: None,
                    policy: Policy::Soft,
                },
            },
        }
    }

    /// Lines as they cross a link: encoded, then parsed; the epoch and
    /// the tickets of each.
    fn through_the_wire(lines: Vec<PeerMsg>) -> Vec<(u64, Tickets)> {
        lines
            .iter()
            .map(|m| {
                let mut line = encode_to_vec(&m.clone().encode());
                assert_eq!(line.pop(), Some(b'\n'));
                assert!(line.len() < 1 << 20, "a line of {} bytes", line.len());
                let mut wire = parse(&line).expect("parses");
                match PeerMsg::parse(&mut wire).expect("reads") {
                    Some(PeerMsg::Tickets {
                        epoch,
                        part: Part::Report { tickets, .. } | Part::State(tickets),
                    }) => (epoch, tickets),
                    other => panic!("not a batch: {other:?}"),
                }
            })
            .collect()
    }

    fn tickets_of(m: PeerMsg) -> Tickets {
        match m {
            PeerMsg::Tickets {
                part: Part::State(t),
                ..
            } => t,
            other => panic!("not a state batch: {other:?}"),
        }
    }

    #[test]
    fn tickets_cross_the_wire_in_batches() {
        let odd: &[&[u8]] = &[
            b"https://example.com/a;b=\"c\"\\d",
            b"12:34 x s 0 h - 5:",
            b"\xff\x00\n\r;",
            &[b'x'; 4096],
        ];
        let mut all = Vec::new();
        for n in 0..2000u64 {
            let mut object = odd[n as usize % odd.len()].to_vec();
            object.extend_from_slice(n.to_string().as_bytes());
            let home = if n % 5 == 0 {
                ""
            } else {
                "14|1|127.0.0.1:4040|7|a"
            };
            let held = [None, Some(true), Some(false)][n as usize % 3];
            all.push((ticket(&object, home, n), held));
        }
        let mut batch = Batch::new(BatchOf::Home, 9);
        let mut lines = Vec::new();
        for (t, held) in &all {
            lines.extend(batch.push(t, *held));
        }
        lines.extend(batch.take());
        assert!(batch.take().is_none());
        assert!(lines.len() > 4, "{} lines for 2000 tickets", lines.len());
        let sender = Id::from("14|2|127.0.0.1:4041|8|b");
        let mut read = Vec::new();
        for (epoch, tickets) in through_the_wire(lines) {
            assert_eq!(epoch, 9);
            read.extend(read_batch(&tickets, Some(&sender)).expect("reads"));
        }
        assert_eq!(read.len(), all.len());
        for ((t, held), (r, rheld)) in all.iter().zip(&read) {
            assert_eq!(r.object, t.object);
            let home = if t.home.is_empty() { &sender } else { &t.home };
            assert_eq!(&r.home, home);
            assert_eq!((r.req, r.fence, &r.key), (t.req, t.fence, &t.key));
            assert_eq!((r.kind.mode, r.kind.limit), (t.kind.mode, t.kind.limit));
            assert_eq!(r.kind.policy, t.kind.policy);
            assert_eq!(rheld, held);
        }
    }

    #[test]
    fn a_bad_batch_is_refused_whole() {
        let t = ticket(b"name", "14|1|127.0.0.1:4040|7|a", 3);
        let mut batch = Batch::new(BatchOf::State, 1);
        assert!(batch.push(&t, None).is_none());
        let good = tickets_of(batch.take().expect("one line"));
        assert_eq!(read_batch(&good, None).expect("reads").len(), 1);
        let records = good.records.clone();
        let mut cases: Vec<Tickets> = Vec::new();
        // A count that does not match, records cut short, a length beyond
        // the end, an empty home where none stands for it, garbage.
        let mut m = good.clone();
        m.n = 2;
        cases.push(m);
        for cut in [1, 5, records.len() - 1] {
            let mut m = good.clone();
            m.records = records[..cut].to_vec();
            cases.push(m);
        }
        for bad in [
            "1 2 x 0 h 0 - 999:name0:5:a/b/c",
            "1 2 x 0 h 0 - 4:name0:5:a/b/c",
            "1 2 q 0 h 0 - 4:name1:h5:a/b/c",
            "1 2 x 99999999999 h 0 - 4:name1:h5:a/b/c",
            "1 2 c 0 h 0 - 4:name1:h5:a/b/c",
        ] {
            let mut m = good.clone();
            m.records = bad.as_bytes().to_vec();
            cases.push(m);
        }
        for (i, m) in cases.iter().enumerate() {
            assert!(read_batch(m, None).is_err(), "case {i} was read");
        }
        // The same record with a limit is read: only the limit was wrong.
        let mut m = good.clone();
        m.records = b"1 2 c 3 h 0 - 4:name1:h5:a/b/c".to_vec();
        m.n = 1;
        let read = read_batch(&m, None).expect("a counted record with a limit");
        assert_eq!(read[0].0.kind.mode, Mode::Counted);
    }
}
