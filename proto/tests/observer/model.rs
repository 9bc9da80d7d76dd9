//! The random driver and the observer's model of what it has been told.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use snaplock_proto::wire::Message;
use snaplock_proto::{Config, Core, Now, Output, Time, UnixTime};

mod driver;

/// Wall-clock date of time zero.
pub const EPOCH_SECS: u64 = 1_700_000_000;
const OBJECTS: [&str; 3] = ["a", "b;c", "d\\"];
const PIDS: [u32; 4] = [4000, 4001, 4002, 4003];
const MAX_OPEN: usize = 6;
const MAX_PER_OBJECT: usize = 6;
/// Most wake-ups one time step may take.
const MAX_WAKEUPS: usize = 10_000;
const TRACE: usize = 40;

type Micros = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Pending,
    Held { fence: u64, until: Micros },
    Expired { fence: u64, release: Micros },
    Done,
}

/// One LOCK the observer sent and what it has learnt of it since.
#[derive(Debug)]
struct Req {
    client: u64,
    owner_open: bool,
    uid: u32,
    object: usize,
    key: String,
    /// Shared or counted.
    shared: bool,
    /// Counted: its limit binds only its own grant.
    counted: bool,
    limit: Option<u32>,
    quiet: Option<Micros>,
    detach: bool,
    try_once: bool,
    sent: Micros,
    deadline: Micros,
    duration: Micros,
    grace: Micros,
    state: State,
}

/// What the observer expects an UNLOCK or EXTEND to find.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    Req(i64),
    Nothing,
    Denied,
    Ambiguous,
}

/// What the observer expects back for a request with a negative tag.
#[derive(Debug)]
enum Expect {
    Unlock(Found),
    Extend(Found, Micros),
}

/// One line of the trace printed when a check fails.
enum Event {
    Sent(u64, Message),
    Got(Output),
    Note(String),
}

#[derive(Debug)]
struct Client {
    pid: u32,
    uid: u32,
}

/// How often each outcome was seen: a run that never reaches one proves
/// nothing about it.
pub type Stats = BTreeMap<String, u64>;

pub struct Driver {
    pub stats: Stats,
    rng: StdRng,
    core: Core,
    now: Micros,
    /// A late shell: it sometimes lets time pass without running the
    /// timers, then reads an input before running them.
    late: bool,
    /// Timers may be due that have not run.
    overdue: bool,
    clients: BTreeMap<u64, Client>,
    next_client: u64,
    /// Requests not finished yet, by tag (positive: LOCK).
    reqs: BTreeMap<i64, Req>,
    /// Requests finished: any later word about them is a second outcome.
    done: BTreeSet<i64>,
    next_tag: i64,
    expects: BTreeMap<i64, Expect>,
    /// A LOCK that must be refused at once, and why.
    refusal: Option<(i64, &'static str)>,
    last_fence: [u64; OBJECTS.len()],
    last_shared_grant: [Option<Micros>; OBJECTS.len()],
    /// Keep the last events: set when a failing seed is replayed.
    tracing: bool,
    trace: VecDeque<(Micros, Event)>,
}

fn now_of(t: Micros) -> Now {
    Now {
        mono: Time::from_micros(t),
        wall: UnixTime(EPOCH_SECS * 1_000_000 + t),
    }
}

fn wall(t: Micros) -> String {
    UnixTime(EPOCH_SECS * 1_000_000 + t).to_wire()
}

fn secs(us: Micros) -> String {
    UnixTime(us).to_wire()
}

fn parse_wall(v: Option<&str>) -> Result<Micros, String> {
    let v = v.ok_or("no timeout_date")?;
    let w = UnixTime::from_wire(v.as_bytes()).ok_or_else(|| format!("bad date {v}"))?;
    w.0.checked_sub(EPOCH_SECS * 1_000_000)
        .ok_or_else(|| format!("date {v} before start"))
}

impl Driver {
    pub fn new(seed: u64, tracing: bool) -> Driver {
        let config = Config {
            server_name: "node1".to_owned(),
            max_tickets_per_object: MAX_PER_OBJECT,
            ..Config::default()
        };
        Driver {
            stats: Stats::new(),
            rng: StdRng::seed_from_u64(seed),
            core: Core::new(config, now_of(0)),
            now: 0,
            late: seed % 4 == 3,
            overdue: false,
            clients: BTreeMap::new(),
            next_client: 1,
            reqs: BTreeMap::new(),
            done: BTreeSet::new(),
            next_tag: 1,
            expects: BTreeMap::new(),
            refusal: None,
            last_fence: [0; OBJECTS.len()],
            last_shared_grant: [None; OBJECTS.len()],
            tracing,
            trace: VecDeque::new(),
        }
    }

    pub fn now(&self) -> Duration {
        Duration::from_micros(self.now)
    }

    /// The last events, formatted only when a check failed.
    pub fn trace(&self) -> String {
        let mut text = String::new();
        for (t, event) in &self.trace {
            let line = match event {
                Event::Sent(client, msg) => format!("{client}> {msg}"),
                Event::Got(Output::Reply { client, reply }) => {
                    format!("{}< {}", client.0, reply.clone().into_message())
                }
                Event::Got(Output::Close { client }) => format!("close {}", client.0),
                Event::Got(other) => format!("{other:?}"),
                Event::Note(what) => what.to_string(),
            };
            text.push_str(&format!("  t={} {}\n", secs(*t), line.trim_end()));
        }
        text
    }

    fn note(&mut self, event: Event) {
        if !self.tracing {
            return;
        }
        if self.trace.len() == TRACE {
            self.trace.pop_front();
        }
        self.trace.push_back((self.now, event));
    }

    // ---- the model ----

    /// Whether `r` holds its object, as far as the replies and the timers
    /// run so far tell.
    fn holds(r: &Req) -> bool {
        matches!(r.state, State::Held { .. } | State::Expired { .. })
    }

    fn live(r: &Req) -> bool {
        r.state == State::Pending || Self::holds(r)
    }

    /// What the timers run at `t` did without a word: graces that ended,
    /// and the leases of detached locks whose connection is gone (their
    /// grace is counted from when the timer ran, as for everyone).
    fn settle(&mut self, t: Micros) {
        for r in self.reqs.values_mut() {
            match r.state {
                State::Held { fence, until } if !r.owner_open && until <= t => {
                    r.state = if r.grace == 0 {
                        State::Done
                    } else {
                        State::Expired {
                            fence,
                            release: t + r.grace,
                        }
                    };
                }
                State::Expired { release, .. } if release <= t => r.state = State::Done,
                _ => {}
            }
        }
    }

    fn key_of(&self, client: u64, pid: Option<u32>) -> String {
        match pid {
            Some(p) => format!("node1/{p}"),
            None => format!("node1/{}.{client}", self.clients[&client].pid),
        }
    }

    /// With pid, the request of that key; without, the
    /// sender's own request on the object (refused as ambiguous when the
    /// sender has none but a detached one of its uid is there). Another
    /// connection may only touch a detached request of the same uid.
    fn resolve(&self, sender: u64, object: usize, pid: Option<u32>) -> Found {
        let on_object = || {
            self.reqs
                .iter()
                .filter(move |(_, r)| r.object == object && Self::live(r))
        };
        match pid {
            Some(p) => {
                let key = format!("node1/{p}");
                let Some((&tag, r)) = on_object().find(|(_, r)| r.key == key) else {
                    return Found::Nothing;
                };
                let own = r.owner_open && r.client == sender;
                if own || (r.detach && r.uid == self.clients[&sender].uid) {
                    Found::Req(tag)
                } else {
                    Found::Denied
                }
            }
            None => {
                let own: Vec<i64> = on_object()
                    .filter(|(_, r)| r.owner_open && r.client == sender)
                    .map(|(&tag, _)| tag)
                    .collect();
                let uid = self.clients[&sender].uid;
                match own[..] {
                    // A detached request is named by its pid, never guessed.
                    [] if on_object().any(|(_, r)| r.detach && r.uid == uid) => Found::Ambiguous,
                    [] => Found::Nothing,
                    [tag] => Found::Req(tag),
                    _ => Found::Ambiguous,
                }
            }
        }
    }

    // ---- checking what came back ----

    /// Drains the outputs of one event and checks them as one instant.
    fn observe(&mut self, timers_ran: bool) -> Result<(), String> {
        let t = self.now;
        if timers_ran {
            self.settle(t);
        }
        let mut batch = Vec::new();
        while let Some(out) = self.core.poll_output() {
            if self.tracing {
                self.note(Event::Got(out.clone()));
            }
            batch.push(out);
        }
        // Ends first, then grants: the outputs of one event happen at once,
        // and the core may tell the next holder before the last one.
        let mut later = Vec::new();
        for out in batch {
            if matches!(out, Output::Persist(_)) {
                continue; // the shell's disk
            }
            let Output::Reply { client, reply } = out else {
                return Err("Output::Close outside a shutdown".into());
            };
            let msg = reply.into_message();
            if !self.clients.contains_key(&client.0) {
                return Err(format!("reply to closed client {}: {msg}", client.0));
            }
            if msg.command == "TICKETLIST" || msg.command == "STATUS" {
                continue;
            }
            let kind = format!("{} {}", msg.command, msg.get_str("error").unwrap_or(""));
            *self.stats.entry(kind.trim_end().to_owned()).or_default() += 1;
            let tag: i64 = msg
                .get_str("tag")
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("no tag in {msg}"))?;
            match (msg.command.as_str(), tag > 0) {
                ("LOCKFAILED", true) => self.lock_failed(client.0, tag, &msg)?,
                ("UNLOCKED", false) | ("LOCKFAILED", false) => self.answered(tag, &msg)?,
                ("UNLOCKED", true) if msg.get_str("error") == Some("timedout") => {
                    later.push((client.0, tag, msg))
                }
                ("LOCKED", _) => later.push((client.0, tag, msg)),
                _ => return Err(format!("unexpected {msg}")),
            }
        }
        for (client, tag, msg) in later {
            if msg.command == "UNLOCKED" {
                self.timed_out(client, tag, &msg)?;
            } else if tag > 0 {
                self.granted(client, tag, &msg)?;
            } else {
                self.answered(tag, &msg)?;
            }
        }
        if let Some(tag) = self.expects.keys().next() {
            return Err(format!("no answer to the request tagged {tag}"));
        }
        self.prune();
        if self.overdue {
            Ok(())
        } else {
            self.check_progress()
        }
    }

    /// The request of `tag`, still unfinished.
    fn req(&mut self, tag: i64, msg: &Message) -> Result<&mut Req, String> {
        if self.done.contains(&tag) {
            return Err(format!(
                "second outcome for tag {tag}: {msg} after it finished"
            ));
        }
        self.reqs
            .get_mut(&tag)
            .ok_or_else(|| format!("{msg}: unknown tag {tag}"))
    }

    /// Moves finished requests out of the working set.
    fn prune(&mut self) {
        let done = &mut self.done;
        self.reqs
            .retain(|&tag, r| r.state != State::Done || !done.insert(tag));
    }

    fn lock_failed(&mut self, client: u64, tag: i64, msg: &Message) -> Result<(), String> {
        let t = self.now;
        let (refusal, late) = (self.refusal, self.late);
        let r = self.req(tag, msg)?;
        if r.client != client {
            return Err(format!("{msg} went to client {client}, not {}", r.client));
        }
        if r.state != State::Pending {
            return Err(format!(
                "second outcome for tag {tag}: {msg} after {:?}",
                r.state
            ));
        }
        if let Some((refused, why)) = refusal {
            if refused == tag {
                if msg.get_str("error") != Some(why) {
                    return Err(format!("{msg}: expected error={why}"));
                }
                r.state = State::Done;
                self.refusal = None;
                return Ok(());
            }
        }
        match msg.get_str("error") {
            Some("timedout") if t < r.deadline => {
                return Err(format!("{msg} before the deadline {}", wall(r.deadline)));
            }
            Some("timedout") if t > r.deadline && !late => {
                return Err(format!("{msg} late: the deadline was {}", wall(r.deadline)));
            }
            Some("timedout") => {}
            Some("busy") if r.try_once && r.sent == t => {}
            Some(e) => return Err(format!("{msg}: {e} for a waiting request")),
            None => return Err(format!("{msg} without error")),
        }
        let waited = msg.get_str("error") == Some("timedout");
        r.state = State::Done;
        if waited {
            *self
                .stats
                .entry("waited then timed out".to_owned())
                .or_default() += 1;
        }
        Ok(())
    }

    fn granted(&mut self, client: u64, tag: i64, msg: &Message) -> Result<(), String> {
        let t = self.now;
        self.req(tag, msg)?;
        let r = &self.reqs[&tag];
        if r.client != client || r.state != State::Pending {
            return Err(format!(
                "{msg} for a request in state {:?} of client {}",
                r.state, r.client
            ));
        }
        if t >= r.deadline {
            return Err(format!(
                "{msg} at or after the deadline {}",
                wall(r.deadline)
            ));
        }
        if msg.get_str("key") != Some(r.key.as_str()) {
            return Err(format!("{msg}: key should be {}", r.key));
        }
        if parse_wall(msg.get_str("timeout_date"))? != t + r.duration {
            return Err(format!(
                "{msg}: the lease should end at {}",
                wall(t + r.duration)
            ));
        }
        let holders: Vec<&Req> = self
            .reqs
            .values()
            .filter(|h| h.object == r.object && Self::holds(h))
            .collect();
        if !r.shared && !holders.is_empty() {
            return Err(format!(
                "exclusive {msg} while {} others hold it: {holders:?}",
                holders.len()
            ));
        }
        if holders.iter().any(|h| !h.shared) {
            return Err(format!(
                "shared {msg} while an exclusive lock is held: {holders:?}"
            ));
        }
        // Its own limit and every shared holder's: a counted holder's
        // limit bound only its own grant.
        let room = holders
            .iter()
            .filter(|h| !h.counted)
            .chain([&r])
            .filter_map(|h| h.limit)
            .min()
            .unwrap_or(u32::MAX);
        if holders.len() + 1 > room as usize {
            return Err(format!(
                "{msg} makes {} holders, over a limit of {room}",
                holders.len() + 1
            ));
        }
        let together = if holders.len() + 1 == room as usize {
            "shared up to a limit"
        } else {
            "shared with others"
        };
        if !holders.is_empty() {
            *self.stats.entry(together.to_owned()).or_default() += 1;
        }
        let fence: u64 = msg
            .get_str("fence")
            .and_then(|f| f.parse().ok())
            .ok_or("no fence")?;
        let object = r.object;
        if fence <= self.last_fence[object] {
            return Err(format!(
                "{msg}: fence not above {}",
                self.last_fence[object]
            ));
        }
        self.last_fence[object] = fence;
        if r.shared {
            self.last_shared_grant[object] = Some(t);
        }
        let r = self.reqs.get_mut(&tag).expect("checked");
        r.state = State::Held {
            fence,
            until: t + r.duration,
        };
        Ok(())
    }

    fn timed_out(&mut self, client: u64, tag: i64, msg: &Message) -> Result<(), String> {
        let t = self.now;
        let late = self.late;
        let r = self.req(tag, msg)?;
        match r.state {
            State::Held { fence, until }
                if (until == t || late && until < t) && r.client == client && r.owner_open =>
            {
                r.state = if r.grace == 0 {
                    State::Done
                } else {
                    State::Expired {
                        fence,
                        release: t + r.grace,
                    }
                };
                Ok(())
            }
            s => Err(format!(
                "UNLOCKED error=timedout at {} for tag {tag} in state {s:?}",
                wall(t)
            )),
        }
    }

    /// The reply to an UNLOCK or EXTEND must be the predicted one.
    fn answered(&mut self, tag: i64, msg: &Message) -> Result<(), String> {
        let t = self.now;
        let expect = self
            .expects
            .remove(&tag)
            .ok_or_else(|| format!("{msg}: no request with tag {tag}"))?;
        let error = msg.get_str("error");
        match (expect, msg.command.as_str(), error) {
            (Expect::Unlock(Found::Req(target)), "UNLOCKED", None) => {
                self.req(target, msg)?.state = State::Done;
            }
            (Expect::Unlock(Found::Nothing), "UNLOCKED", None)
            | (
                Expect::Unlock(Found::Denied) | Expect::Extend(Found::Denied, _),
                "LOCKFAILED",
                Some("denied"),
            )
            | (
                Expect::Unlock(Found::Ambiguous)
                | Expect::Extend(Found::Ambiguous | Found::Nothing, _),
                "LOCKFAILED",
                Some("invalid"),
            ) => {}
            (Expect::Extend(Found::Req(target), d), command, error) => {
                let r = self.req(target, msg)?;
                match (r.state, command, error) {
                    // A lease that ended is not extended, even before a
                    // late shell told its holder so.
                    (State::Held { until, .. }, "LOCKFAILED", Some("timedout")) if until <= t => {}
                    (State::Held { fence, until }, "LOCKED", None) if until > t => {
                        let same = msg.get_str("fence").and_then(|f| f.parse().ok()) == Some(fence);
                        if !same || parse_wall(msg.get_str("timeout_date"))? != t + d {
                            return Err(format!(
                                "{msg}: EXTEND should keep fence {fence} and end at {}",
                                wall(t + d)
                            ));
                        }
                        r.state = State::Held {
                            fence,
                            until: t + d,
                        };
                        *self.stats.entry("extended".to_owned()).or_default() += 1;
                    }
                    (State::Expired { .. }, "LOCKFAILED", Some("timedout")) => {}
                    (State::Pending, "LOCKFAILED", Some("invalid")) => {}
                    (s, _, _) => return Err(format!("{msg}: EXTEND of a request in state {s:?}")),
                }
            }
            (expect, _, _) => return Err(format!("{msg}: expected the answer to {expect:?}")),
        }
        Ok(())
    }

    /// Liveness: nobody waits past a deadline or holds past a lease without
    /// being told, and an object nobody holds has no waiter that could go.
    fn check_progress(&self) -> Result<(), String> {
        let t = self.now;
        for (tag, r) in &self.reqs {
            match r.state {
                State::Pending if r.deadline <= t => {
                    return Err(format!(
                        "tag {tag} still waits after its deadline {}",
                        wall(r.deadline)
                    ));
                }
                State::Held { until, .. } if r.owner_open && until <= t => {
                    return Err(format!(
                        "tag {tag} was not told its lease ended at {}",
                        wall(until)
                    ));
                }
                _ => {}
            }
        }
        for (object, name) in OBJECTS.iter().enumerate() {
            if self
                .reqs
                .values()
                .any(|r| r.object == object && Self::holds(r))
            {
                continue;
            }
            let head = self
                .reqs
                .iter()
                .find(|(_, r)| r.object == object && r.state == State::Pending);
            if let Some((tag, r)) = head {
                let quiet_over = match (r.quiet, self.last_shared_grant[object]) {
                    (Some(q), Some(g)) => g + q <= t,
                    _ => true,
                };
                if quiet_over {
                    return Err(format!("{name} is free but tag {tag} still waits"));
                }
            }
        }
        Ok(())
    }
}
