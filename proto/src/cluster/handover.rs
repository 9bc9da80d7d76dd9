//! Starting an epoch (docs/cluster.md "Handover"): every agent reports to
//! the new epoch's collector; the collector builds the state the new
//! leaders start from, with a lock-delay when it cannot be complete.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::config::Plant;
use super::leader::{LState, LTicket};
use super::wire::{Bad, bytes_of, str_of, u64_of};
use super::{Cluster, Id};
use crate::core::Core;
use crate::core::request::parse_u64;
use crate::core::table::{ObjectName, State};
use crate::core::ticket::{Kind, Mode, Policy};
use crate::time::{Now, Time};
use crate::wire::Message;

/// How much later a report is sent again, per line of it: about what
/// building, sending and reading a line costs, so that an agent with many
/// locks spends at most a fraction of its time reporting.
const REPORT_PAUSE_PER_LINE: Duration = Duration::from_micros(4);

/// One held (or, from a home, waiting) ticket in a report or a state.
#[derive(Clone, Debug)]
pub(crate) struct RTicket {
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
const BATCH_TICKETS: usize = 512;
const BATCH_BYTES: usize = 256 << 10;

impl RTicket {
    /// Appends this ticket's record (see [`Batch`]).
    fn encode(&self, held: Option<bool>, out: &mut Vec<u8>) {
        use std::io::Write;
        let (mode, limit) = (
            match self.kind.mode {
                Mode::Exclusive => 'x',
                Mode::Shared => 's',
            },
            self.kind.limit.unwrap_or(0),
        );
        let (policy, quiet) = match self.kind.policy {
            Policy::Hard => ('h', 0),
            Policy::Soft => ('s', 0),
            Policy::Timed { quiet } => ('t', u64::try_from(quiet.as_micros()).unwrap_or(u64::MAX)),
        };
        let held = match held {
            None => '-',
            Some(true) => '1',
            Some(false) => '0',
        };
        let _ = write!(
            out,
            "{} {} {mode} {limit} {policy} {quiet} {held} {}:",
            self.fence,
            self.req,
            self.object.len()
        );
        out.extend_from_slice(&self.object);
        let _ = write!(out, "{}:", self.home.len());
        out.extend_from_slice(self.home.as_bytes());
        let _ = write!(out, "{}:", self.key.len());
        out.extend_from_slice(self.key.as_bytes());
    }

    /// Reads one record from the front of `input`; `home` stands for an
    /// empty home (a home's own report).
    fn decode(input: &mut &[u8], home: Option<&Id>) -> Result<(RTicket, Option<bool>), Bad> {
        fn word<'a>(input: &mut &'a [u8], end: u8) -> Result<&'a [u8], Bad> {
            let at = input.iter().position(|&b| b == end).ok_or(Bad("tickets"))?;
            let (w, rest) = input.split_at(at);
            *input = &rest[1..];
            Ok(w)
        }
        fn num(input: &mut &[u8], end: u8) -> Result<u64, Bad> {
            parse_u64(word(input, end)?).ok_or(Bad("tickets"))
        }
        fn bytes<'a>(input: &mut &'a [u8]) -> Result<&'a [u8], Bad> {
            let len = usize::try_from(num(input, b':')?).map_err(|_| Bad("tickets"))?;
            if len > input.len() {
                return Err(Bad("tickets"));
            }
            let (b, rest) = input.split_at(len);
            *input = rest;
            Ok(b)
        }
        fn text<'a>(input: &mut &'a [u8]) -> Result<&'a str, Bad> {
            std::str::from_utf8(bytes(input)?).map_err(|_| Bad("tickets"))
        }
        let fence = num(input, b' ')?;
        let req = num(input, b' ')?;
        let mode = match word(input, b' ')? {
            b"x" => Mode::Exclusive,
            b"s" => Mode::Shared,
            _ => return Err(Bad("mode")),
        };
        let limit = match num(input, b' ')? {
            0 => None,
            l => Some(u32::try_from(l).map_err(|_| Bad("limit"))?),
        };
        let policy = word(input, b' ')?;
        let quiet = Duration::from_micros(num(input, b' ')?);
        let policy = match policy {
            b"h" => Policy::Hard,
            b"s" => Policy::Soft,
            b"t" => Policy::Timed { quiet },
            _ => return Err(Bad("policy")),
        };
        let held = match word(input, b' ')? {
            b"-" => None,
            b"1" => Some(true),
            b"0" => Some(false),
            _ => return Err(Bad("held")),
        };
        let object = bytes(input)?;
        if object.is_empty() {
            return Err(Bad("object_name"));
        }
        let object = ObjectName::from(object);
        let home = match (text(input)?, home) {
            ("", Some(h)) => h.clone(),
            ("", None) => return Err(Bad("home")),
            (h, _) => Id::from(h),
        };
        let key = text(input)?.into();
        let kind = Kind {
            mode,
            limit,
            policy,
        };
        Ok((
            RTicket {
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
struct Batch {
    part: &'static str,
    epoch: u64,
    records: Vec<u8>,
    count: usize,
}

impl Batch {
    fn new(part: &'static str, epoch: u64) -> Batch {
        Batch {
            part,
            epoch,
            records: Vec::new(),
            count: 0,
        }
    }

    /// Adds a ticket; returns a full line when one is ready.
    fn push(&mut self, t: &RTicket, held: Option<bool>) -> Option<Message> {
        t.encode(held, &mut self.records);
        self.count += 1;
        if self.count >= BATCH_TICKETS || self.records.len() >= BATCH_BYTES {
            return self.take();
        }
        None
    }

    /// The line of what was added since the last one, if anything was.
    fn take(&mut self) -> Option<Message> {
        if self.count == 0 {
            return None;
        }
        let mut m = Message::new("LOCKTICKETS").with("part", self.part);
        m.set_u64("epoch", self.epoch);
        m.set_u64("n", self.count as u64);
        m.set("tickets", std::mem::take(&mut self.records));
        self.count = 0;
        Some(m)
    }
}

/// The tickets of a `LOCKTICKETS` line, each with what it says of being
/// held; `home` stands for an empty home.
pub(crate) fn read_batch(
    msg: &Message,
    home: Option<&Id>,
) -> Result<Vec<(RTicket, Option<bool>)>, Bad> {
    let n = u64_of(msg, "n")?;
    let mut input = bytes_of(msg, "tickets")?;
    let mut out = Vec::new();
    while !input.is_empty() {
        if out.len() as u64 >= n {
            return Err(Bad("n"));
        }
        out.push(RTicket::decode(&mut input, home)?);
    }
    if out.len() as u64 != n {
        return Err(Bad("n"));
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
    /// `mode=shared`.
    pub shared: bool,
    /// `limit=`, if any.
    pub limit: Option<u32>,
}

/// The tickets a `LOCKTICKETS` line carries (none when it carries none or
/// cannot be read); an empty home is `sender`.
pub fn ticket_records(msg: &Message, sender: &str) -> Vec<TicketRecord> {
    let sender: Id = sender.into();
    read_batch(msg, Some(&sender))
        .unwrap_or_default()
        .into_iter()
        .map(|(t, _)| TicketRecord {
            object: t.object.to_vec(),
            home: t.home.to_string(),
            req: t.req,
            key: t.key.to_string(),
            fence: t.fence,
            shared: t.kind.mode == Mode::Shared,
            limit: t.kind.limit,
        })
        .collect()
}

/// What one agent reported.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub prev_epoch: u64,
    pub prev_leaders: Vec<Id>,
    pub ready_epoch: u64,
    pub floor: u64,
    /// What was left of its ready epoch's lock-delay, µs.
    pub delay_left: u64,
    pub leader: Vec<RTicket>,
    /// Its own clients' requests: held or waiting.
    pub home: Vec<(RTicket, bool)>,
    pub lines: u64,
}

/// The collector's work for its epoch.
#[derive(Debug)]
pub(crate) struct Collect {
    pub started: Time,
    pub partial: BTreeMap<Id, Report>,
    pub reports: BTreeMap<Id, Report>,
    pub done: bool,
}

impl Collect {
    pub fn new(now: Time) -> Collect {
        Collect {
            started: now,
            partial: BTreeMap::new(),
            reports: BTreeMap::new(),
            done: false,
        }
    }
}

/// The state a leader is receiving from the collector.
#[derive(Debug, Default)]
pub(crate) struct StateIn {
    pub base: u64,
    pub delay: Duration,
    pub tickets: Vec<RTicket>,
    pub reporters: BTreeSet<Id>,
}

impl Core {
    /// Sends this agent's report to the current epoch's collector.
    pub(crate) fn send_report(&mut self, now: Now) {
        let c = &self.cluster;
        if c.epoch == 0 || c.leaders.is_empty() {
            return;
        }
        let collector = c.leaders[0].clone();
        if collector != c.me && c.link_of(&collector).is_none() {
            return; // sent when the link is up
        }
        let epoch = c.epoch;
        let mut lines = Vec::new();
        let mut begin = Message::new("LOCKTICKETS").with("part", "begin");
        begin.set_u64("epoch", epoch);
        begin.set_u64("prev_epoch", c.prev_epoch);
        for (i, l) in c.prev_leaders.iter().enumerate() {
            begin.set(&format!("prev{i}"), &**l);
        }
        begin.set_u64("ready_epoch", c.frozen.as_ref().map_or(0, |(e, _)| *e));
        begin.set_u64("floor", c.fence_floor);
        // A lock-delay still running carries over: the homes it waits for
        // are no better known to the new epoch.
        let delay_left = c
            .frozen
            .as_ref()
            .and_then(|(_, t)| t.delay_until)
            .map_or(Duration::ZERO, |d| d.saturating_since(now.mono));
        if !delay_left.is_zero() {
            begin.set_u64(
                "delay_left",
                u64::try_from(delay_left.as_micros()).unwrap_or(u64::MAX),
            );
        }
        lines.push(begin);
        if let Some((_, table)) = &c.frozen {
            let mut batch = Batch::new("leader", epoch);
            for (name, o) in &table.objects {
                for t in &o.tickets {
                    if let Some(fence) = t.fence() {
                        let r = RTicket {
                            object: name.clone(),
                            home: t.home.clone(),
                            req: t.req,
                            key: t.key.clone(),
                            fence,
                            kind: t.kind,
                        };
                        lines.extend(batch.push(&r, None));
                    }
                }
            }
            lines.extend(batch.take());
        }
        let mut batch = Batch::new("home", epoch);
        let no_home: Id = Id::from("");
        for (name, o) in &self.table.objects {
            for t in &o.tickets {
                let (fence, held) = match t.state {
                    State::Waiting { .. } => (0, false),
                    State::Held { fence, .. } | State::Expired { fence, .. } => (fence, true),
                };
                let r = RTicket {
                    object: name.clone(),
                    home: no_home.clone(),
                    req: t.id.0,
                    key: t.key.clone(),
                    fence,
                    kind: t.kind,
                };
                lines.extend(batch.push(&r, Some(held)));
            }
        }
        lines.extend(batch.take());
        let mut end = Message::new("LOCKTICKETS").with("part", "end");
        end.set_u64("epoch", epoch);
        end.set_u64("count", lines.len() as u64 + 1);
        lines.push(end);
        self.cluster.report_sent = Some((epoch, now.mono));
        self.cluster.report_pause =
            REPORT_PAUSE_PER_LINE * u32::try_from(lines.len()).unwrap_or(u32::MAX);
        for m in lines {
            self.post(&collector, m);
        }
    }

    /// `LOCKTICKETS`: a report (to the collector) or a state (from it).
    pub(crate) fn on_tickets(&mut self, now: Now, from: &Id, msg: &Message) -> Result<(), Bad> {
        if u64_of(msg, "epoch")? != self.cluster.epoch {
            return Ok(());
        }
        let part = str_of(msg, "part")?;
        match part {
            "begin" | "leader" | "home" | "end" => self.on_report_part(now, from, part, msg),
            _ => self.on_state_part(now, from, part, msg),
        }
    }

    fn on_report_part(
        &mut self,
        now: Now,
        from: &Id,
        part: &str,
        msg: &Message,
    ) -> Result<(), Bad> {
        let max_tickets = self.config.max_tickets as u64 * 2;
        let max_lines = max_tickets + 16;
        let Some(collect) = self.cluster.collect.as_mut() else {
            return Ok(()); // not the collector
        };
        if part == "begin" {
            let mut prev_leaders = Vec::new();
            for name in ["prev0", "prev1", "prev2"] {
                if let Some(v) = msg.get_str(name) {
                    prev_leaders.push(Id::from(v));
                }
            }
            let r = Report {
                prev_epoch: u64_of(msg, "prev_epoch")?,
                prev_leaders,
                ready_epoch: u64_of(msg, "ready_epoch")?,
                floor: u64_of(msg, "floor")?,
                delay_left: msg
                    .get_str("delay_left")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
                lines: 1,
                ..Report::default()
            };
            collect.partial.insert(from.clone(), r);
            return Ok(());
        }
        let Some(r) = collect.partial.get_mut(from) else {
            return Err(Bad("part (no begin)"));
        };
        r.lines += 1;
        if r.lines > max_lines {
            collect.partial.remove(from);
            return Err(Bad("part (too many)"));
        }
        match part {
            "leader" | "home" => {
                let tickets = read_batch(msg, Some(from))?;
                if (r.leader.len() + r.home.len() + tickets.len()) as u64 > max_tickets {
                    collect.partial.remove(from);
                    return Err(Bad("part (too many tickets)"));
                }
                for (t, held) in tickets {
                    if part == "leader" {
                        r.leader.push(t);
                    } else {
                        r.home.push((t, held == Some(true)));
                    }
                }
            }
            _ => {
                let r = collect.partial.remove(from).expect("present");
                if u64_of(msg, "count")? != r.lines {
                    return Err(Bad("count"));
                }
                if collect.done {
                    self.late_report(from, &r);
                } else {
                    collect.reports.insert(from.clone(), r);
                    self.check_collect(now);
                }
            }
        }
        Ok(())
    }

    /// A report after the state was built: counted only when it holds
    /// nothing, for a home that held what the epoch does not know must
    /// first revoke.
    fn late_report(&mut self, from: &Id, r: &Report) {
        // Counted already (a leader may have missed the news): its locks
        // were granted in this epoch, which knows them.
        let counted = self
            .cluster
            .leading
            .as_ref()
            .is_some_and(|l| l.reporters.contains(from));
        if !counted && r.home.iter().any(|(_, held)| *held) {
            log::info!(
                "late report of {} holds locks: not counted until it revokes them",
                Cluster::name_of(from)
            );
            return;
        }
        let mut m = Message::new("LOCKTICKETS").with("part", "reporter");
        m.set_u64("epoch", self.cluster.epoch);
        m.set("id", &**from);
        let leaders = self.cluster.leaders.clone();
        for l in leaders {
            self.post(&l, m.clone());
        }
    }

    /// Builds the epoch's state once a quorum reported and it is complete,
    /// or after `peer_timeout` with the lock-delay.
    pub(crate) fn check_collect(&mut self, now: Now) {
        let c = &self.cluster;
        let Some(collect) = c.collect.as_ref() else {
            return;
        };
        if collect.done {
            return;
        }
        let names: BTreeSet<&str> = collect
            .reports
            .keys()
            .map(|id| Cluster::name_of(id))
            .collect();
        if names.len() < c.quorum {
            return;
        }
        let everyone = names.len() >= c.members.len();
        let e_max = collect
            .reports
            .values()
            .map(|r| r.prev_epoch)
            .max()
            .unwrap_or(0);
        let majority_of_previous = e_max > 0 && {
            let prev: Vec<Id> = collect
                .reports
                .values()
                .find(|r| r.prev_epoch == e_max)
                .map(|r| r.prev_leaders.clone())
                .unwrap_or_default();
            let reported: Vec<&Report> =
                prev.iter().filter_map(|l| collect.reports.get(l)).collect();
            !prev.is_empty()
                && reported.len() > prev.len() / 2
                && reported.iter().any(|r| r.ready_epoch == e_max)
        };
        let complete = everyone || majority_of_previous;
        if !complete && now.mono < collect.started + c.cfg.peer_timeout {
            return;
        }
        let collect = self.cluster.collect.as_mut().expect("collecting");
        collect.done = true;
        let reports = std::mem::take(&mut collect.reports);
        let mut has: BTreeSet<(Id, u64)> = BTreeSet::new();
        for r in reports.values() {
            for (t, _) in &r.home {
                has.insert((t.home.clone(), t.req));
            }
        }
        let mut held: BTreeMap<(ObjectName, Id, u64), RTicket> = BTreeMap::new();
        let mut floor = 0;
        for r in reports.values() {
            floor = floor.max(r.floor);
            // Older tables were superseded by E_max's state (or, when that
            // is not known, by the lock-delay).
            let tables = if r.ready_epoch == e_max {
                &r.leader[..]
            } else {
                &[]
            };
            for t in tables {
                // The home is the authority on its own clients.
                if reports.contains_key(&t.home) && !has.contains(&(t.home.clone(), t.req)) {
                    continue;
                }
                let k = (t.object.clone(), t.home.clone(), t.req);
                let e = held.entry(k).or_insert_with(|| t.clone());
                e.fence = e.fence.max(t.fence);
            }
            for (t, is_held) in &r.home {
                if *is_held {
                    let k = (t.object.clone(), t.home.clone(), t.req);
                    let e = held.entry(k).or_insert_with(|| t.clone());
                    e.fence = e.fence.max(t.fence);
                }
            }
        }
        for t in held.values() {
            floor = floor.max(t.fence);
        }
        let epoch = self.cluster.epoch;
        let base = (epoch << 20).max(floor + 1);
        let carried = reports
            .values()
            .filter(|r| r.ready_epoch == e_max)
            .map(|r| Duration::from_micros(r.delay_left))
            .max()
            .unwrap_or(Duration::ZERO)
            .min(self.cluster.cfg.lock_delay());
        let delay = if self.cluster.cfg.plant == Plant::SkipLockDelay {
            Duration::ZERO
        } else if complete {
            carried
        } else {
            self.cluster.cfg.lock_delay()
        };
        log::info!(
            "epoch {epoch}: state from {} reports, {} held locks, {}",
            reports.len(),
            held.len(),
            if delay.is_zero() {
                "complete".to_owned()
            } else {
                format!("incomplete: lock-delay {delay:?}")
            }
        );
        let mut msgs = Vec::with_capacity(held.len() + reports.len() + 2);
        let mut begin = Message::new("LOCKTICKETS").with("part", "state-begin");
        begin.set_u64("epoch", epoch);
        begin.set_u64("base", base);
        begin.set_u64(
            "delay",
            u64::try_from(delay.as_micros()).unwrap_or(u64::MAX),
        );
        msgs.push(begin);
        let mut batch = Batch::new("state", epoch);
        for t in held.values() {
            msgs.extend(batch.push(t, None));
        }
        msgs.extend(batch.take());
        for id in reports.keys() {
            let mut m = Message::new("LOCKTICKETS").with("part", "reporter");
            m.set_u64("epoch", epoch);
            m.set("id", &**id);
            msgs.push(m);
        }
        let mut end = Message::new("LOCKTICKETS").with("part", "state-end");
        end.set_u64("epoch", epoch);
        end.set_u64("count", msgs.len() as u64 + 1);
        msgs.push(end);
        let leaders = self.cluster.leaders.clone();
        for l in &leaders {
            for m in &msgs {
                self.post(l, m.clone());
            }
        }
    }

    fn on_state_part(&mut self, now: Now, from: &Id, part: &str, msg: &Message) -> Result<(), Bad> {
        if self.cluster.leaders.first() != Some(from) {
            return Err(Bad("part (not from the collector)"));
        }
        let Some(l) = self.cluster.leading.as_mut() else {
            return Ok(());
        };
        if l.ready {
            if part == "reporter" {
                l.reporters.insert(str_of(msg, "id")?.into());
            }
            return Ok(());
        }
        match part {
            "state-begin" => {
                l.state_in = Some(StateIn {
                    base: u64_of(msg, "base")?,
                    delay: Duration::from_micros(u64_of(msg, "delay")?),
                    ..Default::default()
                });
                l.state_lines = 1;
            }
            "state" | "reporter" | "state-end" => {
                let Some(s) = l.state_in.as_mut() else {
                    return Err(Bad("part (no state-begin)"));
                };
                l.state_lines += 1;
                match part {
                    "state" => {
                        let tickets = read_batch(msg, None)?;
                        if s.tickets.len() + tickets.len() > self.config.max_tickets * 2 {
                            l.state_in = None;
                            return Err(Bad("part (too many tickets)"));
                        }
                        s.tickets.extend(tickets.into_iter().map(|(t, _)| t));
                    }
                    "reporter" => {
                        s.reporters.insert(str_of(msg, "id")?.into());
                    }
                    _ => {
                        if u64_of(msg, "count")? != l.state_lines {
                            l.state_in = None;
                            return Err(Bad("count"));
                        }
                        let s = l.state_in.take().expect("present");
                        self.install(now, s);
                    }
                }
            }
            _ => return Err(Bad("part")),
        }
        Ok(())
    }

    /// Starts acting as a leader of the epoch from its state.
    fn install(&mut self, now: Now, s: StateIn) {
        let l = self.cluster.leading.as_mut().expect("leader");
        let mut tickets = s.tickets;
        tickets.sort_by_key(|t| t.fence);
        for (i, t) in tickets.into_iter().enumerate() {
            self.cluster.heard.insert(
                t.home.clone(),
                self.cluster
                    .heard
                    .get(&t.home)
                    .map_or(now.mono, |h| (*h).max(now.mono)),
            );
            let name = t.object.clone();
            l.insert(
                &name,
                LTicket {
                    home: t.home,
                    req: t.req,
                    key: t.key,
                    number: i as u64 + 1,
                    kind: t.kind,
                    state: LState::Inherited { fence: t.fence },
                },
            );
        }
        l.base = s.base;
        l.delay_until = (!s.delay.is_zero()).then(|| now.mono + s.delay);
        l.reporters = s.reporters;
        l.ready = true;
        self.cluster.fence_floor = self.cluster.fence_floor.max(s.base.saturating_sub(1));
        log::info!(
            "epoch {}: leading with {} held locks",
            self.cluster.epoch,
            l.tickets
        );
        let early = std::mem::take(&mut self.cluster.early);
        for (from, msg) in early {
            let cmd = msg.command.clone();
            if let Err(Bad(what)) = self.on_lock_message(now, &from, &cmd, &msg) {
                log::warn!("{cmd} dropped: bad or missing {what}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{encode_to_vec, parse};

    fn ticket(object: &[u8], home: &str, n: u64) -> RTicket {
        RTicket {
            object: ObjectName::from(object),
            home: Id::from(home),
            req: n,
            key: format!("node{n}/{}", n * 7).into(),
            fence: n << 20 | n,
            kind: match n % 3 {
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
                _ => Kind {
                    mode: Mode::Exclusive,
                    limit: None,
                    policy: Policy::Soft,
                },
            },
        }
    }

    /// Lines as they cross a link: encoded, then parsed.
    fn through_the_wire(lines: Vec<Message>) -> Vec<Message> {
        lines
            .iter()
            .map(|m| {
                let mut line = encode_to_vec(m);
                assert_eq!(line.pop(), Some(b'\n'));
                assert!(line.len() < 1 << 20, "a line of {} bytes", line.len());
                parse(&line).expect("parses")
            })
            .collect()
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
        let mut batch = Batch::new("home", 9);
        let mut lines = Vec::new();
        for (t, held) in &all {
            lines.extend(batch.push(t, *held));
        }
        lines.extend(batch.take());
        assert!(batch.take().is_none());
        assert!(lines.len() > 4, "{} lines for 2000 tickets", lines.len());
        let sender = Id::from("14|2|127.0.0.1:4041|8|b");
        let mut read = Vec::new();
        for m in through_the_wire(lines) {
            assert_eq!(u64_of(&m, "epoch").unwrap(), 9);
            read.extend(read_batch(&m, Some(&sender)).expect("reads"));
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
        let mut batch = Batch::new("state", 1);
        assert!(batch.push(&t, None).is_none());
        let good = batch.take().expect("one line");
        assert_eq!(read_batch(&good, None).expect("reads").len(), 1);
        let records = good.get("tickets").unwrap().to_vec();
        let mut cases: Vec<Message> = Vec::new();
        // A count that does not match, records cut short, a length beyond
        // the end, an empty home where none stands for it, garbage.
        let mut m = good.clone();
        m.set_u64("n", 2);
        cases.push(m);
        for cut in [1, 5, records.len() - 1] {
            let mut m = good.clone();
            m.set("tickets", &records[..cut]);
            cases.push(m);
        }
        for bad in [
            "1 2 x 0 h 0 - 999:name0:5:a/b/c",
            "1 2 x 0 h 0 - 4:name0:5:a/b/c",
            "1 2 q 0 h 0 - 4:name1:h5:a/b/c",
            "1 2 x 99999999999 h 0 - 4:name1:h5:a/b/c",
        ] {
            let mut m = good.clone();
            m.set("tickets", bad);
            cases.push(m);
        }
        for (i, m) in cases.iter().enumerate() {
            assert!(read_batch(m, None).is_err(), "case {i} was read");
        }
    }
}
