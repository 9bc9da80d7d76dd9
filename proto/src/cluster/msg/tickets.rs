//! The lines of `LOCKTICKETS`: a report to the collector, the state it
//! sends the leaders, and late reports it passes on. Each line is one
//! [`Part`]; tickets travel in batches of the codec of `batch.rs`.

use std::time::Duration;

use super::write::put_ids;
use super::{BadField, Id, PREV_KEYS, id_text, num, opt_u64};
use crate::wire::Message;

/// The first line of a report (`part=begin`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ReportBegin {
    pub prev_epoch: u64,
    pub prev_leaders: Vec<Id>,
    /// The last epoch the sender was a ready leader of (0: none).
    pub ready_epoch: u64,
    /// The largest fence it knows of.
    pub floor: u64,
    /// What was left of its lock-delay, µs.
    pub delay_left_us: u64,
    /// How long it has been up, µs.
    pub up_us: u64,
    /// The serial of the collector's own report.
    pub own: Option<u64>,
}

/// A line of tickets: `n` of them, in the batch codec (`batch.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tickets {
    pub n: u64,
    pub records: Vec<u8>,
}

/// The parts of `LOCKTICKETS`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// A report to the collector: its first line.
    ReportBegin(ReportBegin),
    /// The tickets the sender has as a leader (`leader`) or as a home
    /// (`home`).
    Report { as_leader: bool, tickets: Tickets },
    /// The last line of a report, with the count of its lines.
    ReportEnd { count: u64 },
    /// The state, from the collector: its fence base and lock-delay.
    StateBegin { base: u64, delay: Duration },
    /// Tickets of the state.
    State(Tickets),
    /// An agent whose report the state counts.
    Reporter { id: Id },
    /// The last line of the state.
    StateEnd { count: u64 },
    /// A late report passed on by the collector: whose.
    LateBegin { id: Id },
    /// Its tickets.
    Late(Tickets),
    /// Its last line.
    LateEnd { id: Id, count: u64 },
}

impl Part {
    pub(super) fn name(&self) -> &'static str {
        match self {
            Part::ReportBegin(_) => "begin",
            Part::Report {
                as_leader: true, ..
            } => "leader",
            Part::Report {
                as_leader: false, ..
            } => "home",
            Part::ReportEnd { .. } => "end",
            Part::StateBegin { .. } => "state-begin",
            Part::State(_) => "state",
            Part::Reporter { .. } => "reporter",
            Part::StateEnd { .. } => "state-end",
            Part::LateBegin { .. } => "late-begin",
            Part::Late(_) => "late",
            Part::LateEnd { .. } => "late-end",
        }
    }

    /// Whether it belongs to a report to the collector (else to what the
    /// collector sends).
    pub fn is_report(&self) -> bool {
        matches!(
            self,
            Part::ReportBegin(_) | Part::Report { .. } | Part::ReportEnd { .. }
        )
    }
}

/// The leaders of the previous epoch a report names (`prev0`…), as sent.
fn prev_leaders(m: &mut Message) -> Result<Vec<Id>, BadField> {
    let mut out = Vec::new();
    for key in PREV_KEYS {
        if m.get(key).is_some() {
            out.push(id_text(m, key)?);
        }
    }
    Ok(out)
}

fn tickets(m: &mut Message) -> Result<Tickets, BadField> {
    Ok(Tickets {
        n: num(m, "n")?,
        records: m.remove("tickets").ok_or(BadField("tickets"))?,
    })
}

pub(super) fn part(m: &mut Message) -> Result<Part, BadField> {
    let name = m.remove("part").ok_or(BadField("part"))?;
    Ok(match &name[..] {
        b"begin" => Part::ReportBegin(ReportBegin {
            prev_epoch: num(m, "prev_epoch")?,
            prev_leaders: prev_leaders(m)?,
            ready_epoch: num(m, "ready_epoch")?,
            floor: num(m, "floor")?,
            delay_left_us: opt_u64(m, "delay_left")?.unwrap_or(0),
            up_us: opt_u64(m, "up")?.unwrap_or(0),
            own: opt_u64(m, "own")?,
        }),
        b"leader" | b"home" => Part::Report {
            as_leader: name == b"leader",
            tickets: tickets(m)?,
        },
        b"end" => Part::ReportEnd {
            count: num(m, "count")?,
        },
        b"state-begin" => Part::StateBegin {
            base: num(m, "base")?,
            delay: Duration::from_micros(num(m, "delay")?),
        },
        b"state" => Part::State(tickets(m)?),
        b"reporter" => Part::Reporter {
            id: id_text(m, "id")?,
        },
        b"state-end" => Part::StateEnd {
            count: num(m, "count")?,
        },
        b"late-begin" => Part::LateBegin {
            id: id_text(m, "id")?,
        },
        b"late" => Part::Late(tickets(m)?),
        b"late-end" => Part::LateEnd {
            id: id_text(m, "id")?,
            count: num(m, "count")?,
        },
        _ => return Err(BadField("part")),
    })
}

pub(super) fn put_part(m: &mut Message, part: Part) {
    match part {
        Part::ReportBegin(b) => {
            m.set_u64("prev_epoch", b.prev_epoch);
            put_ids(m, PREV_KEYS, &b.prev_leaders);
            m.set_u64("ready_epoch", b.ready_epoch);
            m.set_u64("floor", b.floor);
            m.set_u64("up", b.up_us);
            if b.delay_left_us > 0 {
                m.set_u64("delay_left", b.delay_left_us);
            }
            if let Some(own) = b.own {
                m.set_u64("own", own);
            }
        }
        Part::Report { tickets, .. } | Part::State(tickets) | Part::Late(tickets) => {
            m.set_u64("n", tickets.n);
            m.set_owned("tickets", tickets.records);
        }
        Part::ReportEnd { count } | Part::StateEnd { count } => m.set_u64("count", count),
        Part::StateBegin { base, delay } => {
            m.set_u64("base", base);
            m.set_u64(
                "delay",
                u64::try_from(delay.as_micros()).unwrap_or(u64::MAX),
            );
        }
        Part::Reporter { id } | Part::LateBegin { id } => m.set("id", &*id),
        Part::LateEnd { id, count } => {
            m.set("id", &*id);
            m.set_u64("count", count);
        }
    }
}
