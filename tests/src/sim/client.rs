//! Workload clients: each lives on one computer, talks to that computer's
//! agent, locks a few hot names and keeps the lease contract.
//!
//! ```text
//! Disconnected ──connect──▶ Idle ──LOCK──▶ Waiting ──LOCKED──▶ Attached
//!      ▲                     ▲  ▲            │  │                 │
//!      └──── drop/abandon ───┘  └─LOCKFAILED─┘  └─UNLOCK─▶ Cancelling
//! ```
//!
//! A client **holds** from `LOCKED` until it sends `UNLOCK`, receives
//! `UNLOCKED`, reaches its lease end (`timeout_date`, on its computer's
//! clock, which it shares), loses its connection, or outlives what its
//! agent vouched for: in a cluster it sends `ALIVE` at once and then about
//! every second, and may go on until each answer's `valid_for` after it
//! asked (docs/cluster.md, the holder's side). It stays **attached** after
//! its lease ends, as long as the agent may still count the lock as held
//! (the unlock_duration), pinging and sometimes sending a late `UNLOCK`, as
//! a well-behaved program does.

use std::collections::BTreeMap;

use snaplock_proto::time::duration_to_wire;
use snaplock_proto::wire::Message;
use snaplock_proto::{ClientId, UnixTime};

use super::checker::{LockSent, Locked, Mode, ReqId};
use super::events::Ev;
use super::rng::Rng;
use super::world::{Who, World};
use super::{MS, SEC};

/// A request must end this long after its deadline at the latest (L1).
pub const L1_BOUND: u64 = SEC;

/// What a tag of this client's requests was used for.
#[derive(Clone, Copy, Debug)]
enum Tag {
    Lock(ReqId),
    Unlock(ReqId),
    Extend(ReqId),
    /// An `UNLOCK` naming another client's lock (S5).
    Rogue(ReqId),
}

/// What the client does when its hold time is up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Act {
    Unlock,
    /// Closes the connection while holding.
    Abandon,
    /// Lets the lease run out.
    Ignore,
}

#[derive(Clone, Copy, Debug)]
struct Plan {
    act_at: u64,
    act: Act,
    extend_at: Option<u64>,
    late_unlock_at: Option<u64>,
}

#[derive(Clone, Copy, Debug)]
enum State {
    Disconnected,
    Idle,
    Waiting {
        req: ReqId,
        object: usize,
        unlock: u64,
        deadline: u64,
        cancel_at: Option<u64>,
        drop_at: Option<u64>,
    },
    Cancelling {
        req: ReqId,
        object: usize,
        since: u64,
        deadline: u64,
    },
    Attached {
        req: ReqId,
        object: usize,
        unlock: u64,
        plan: Plan,
        next_ping: u64,
        protect_end: u64,
    },
}

/// One workload client.
#[derive(Debug)]
struct Worker {
    pub node: usize,
    pub pid: u64,
    pub uid: u32,
    pub conn: Option<ClientId>,
    pub state: State,
    generation: u64,
    next_tag: i64,
    tags: BTreeMap<i64, Tag>,
    rng: Rng,
}

fn object_name(object: usize) -> String {
    format!("hot{object}")
}

fn parse_u64(msg: &Message, name: &str) -> Option<u64> {
    msg.get_str(name)?.parse().ok()
}

/// The fence and lease date of a `LOCKED`; a reply without them is
/// reported.
fn fence_and_date(world: &mut World, msg: &Message) -> Option<(u64, u64)> {
    let fence = parse_u64(msg, "fence");
    let date = msg.get("timeout_date").and_then(UnixTime::from_wire);
    match (fence, date) {
        (Some(f), Some(d)) => Some((f, d.0)),
        _ => {
            let what = format!("LOCKED without a readable fence or timeout_date: {msg}");
            world.checker.report(world.now, "reply", what);
            None
        }
    }
}

/// The workload clients of a run.
#[derive(Debug)]
pub(super) struct Workload {
    workers: Vec<Worker>,
    /// The `try=true` requests not answered yet, and when they were sent.
    tries: BTreeMap<ReqId, u64>,
}

impl Workload {
    /// The clients of every computer of `world`, each about to connect.
    pub fn new(world: &mut World) -> Workload {
        let mut workload = Workload {
            workers: Vec::new(),
            tries: BTreeMap::new(),
        };
        for node in 0..world.nodes.len() {
            for _ in 0..world.knobs.workers_per_node {
                let w = workload.workers.len();
                workload.workers.push(Worker {
                    node,
                    pid: 100 + w as u64,
                    uid: 1000 + w as u32,
                    conn: None,
                    state: State::Disconnected,
                    generation: 0,
                    next_tag: 1,
                    tags: BTreeMap::new(),
                    rng: world.rng.fork(),
                });
                let at = workload.workers[w].rng.between(0, SEC);
                workload.arm(world, w, at);
            }
        }
        workload
    }

    /// Sets worker `w`'s one timer (an earlier one no longer counts).
    fn arm(&mut self, world: &mut World, w: usize, at: u64) {
        let worker = &mut self.workers[w];
        worker.generation += 1;
        let generation = worker.generation;
        world.at(
            at.max(world.now),
            Ev::Worker {
                worker: w,
                generation,
            },
        );
    }

    fn think(&mut self, world: &mut World, w: usize) {
        let at = world.now + self.workers[w].rng.between(0, 3 * SEC);
        self.arm(world, w, at);
    }

    fn new_tag(&mut self, w: usize, tag: Tag) -> i64 {
        let worker = &mut self.workers[w];
        let t = worker.next_tag;
        worker.next_tag += 1;
        worker.tags.insert(t, tag);
        t
    }

    fn worker_send(&self, world: &mut World, w: usize, msg: Message) {
        if let Some(conn) = self.workers[w].conn {
            world.send(conn, msg);
        }
    }

    pub fn timer(&mut self, world: &mut World, w: usize, generation: u64) {
        if self.workers[w].generation != generation {
            return;
        }
        match self.workers[w].state {
            State::Disconnected => {
                let (node, uid) = (self.workers[w].node, self.workers[w].uid);
                match world.open_conn(node, Who::Worker(w), uid) {
                    Some(conn) => {
                        self.workers[w].conn = Some(conn);
                        self.workers[w].state = State::Idle;
                        self.think(world, w);
                    }
                    None => self.arm(world, w, world.now + SEC),
                }
            }
            State::Idle => {
                if self.workers[w].rng.chance(40_000) && self.rogue_unlock(world, w) {
                    self.think(world, w);
                } else {
                    self.send_lock(world, w);
                }
            }
            State::Waiting {
                req,
                deadline,
                cancel_at,
                drop_at,
                ..
            } => {
                if cancel_at.is_some_and(|c| c <= world.now) {
                    world.log(|| format!("w{w} cancels {req}"));
                    let object = match self.workers[w].state {
                        State::Waiting { object, .. } => object,
                        _ => unreachable!(),
                    };
                    self.send_unlock(world, w, req, object);
                    self.workers[w].state = State::Cancelling {
                        req,
                        object,
                        since: world.now,
                        deadline,
                    };
                } else if drop_at.is_some_and(|d| d <= world.now) {
                    world.log(|| format!("w{w} disconnects while waiting"));
                    self.disconnect(world, w);
                }
            }
            State::Cancelling { .. } => {}
            State::Attached { .. } => self.attached_timer(world, w),
        }
    }

    /// Sends a LOCK with random parameters.
    fn send_lock(&mut self, world: &mut World, w: usize) {
        let node = self.workers[w].node;
        let object = self.workers[w].rng.below(world.knobs.objects as u64) as usize;
        let clock = world.nodes[node].clock;
        let wall_now = clock.wall_at(world.now);
        let wait = if self.workers[w].rng.chance(20_000) {
            0
        } else {
            self.workers[w].rng.between(100 * MS, 12 * SEC)
        };
        let deadline_wall = wall_now + wait;
        let deadline = clock.true_at_date(world.now, deadline_wall);
        let duration = self.workers[w].rng.between(1_000, 30_000) * MS;
        let unlock = if self.workers[w].rng.chance(300_000) {
            0
        } else {
            self.workers[w].rng.between(0, 10_000) * MS
        };
        let req = ReqId(world.next_req);
        world.next_req += 1;
        let tag = self.new_tag(w, Tag::Lock(req));
        let mut msg = Message::new("LOCK")
            .with("object_name", object_name(object))
            .with("timeout", UnixTime(deadline_wall).to_wire())
            .with(
                "duration",
                duration_to_wire(std::time::Duration::from_micros(duration)),
            )
            .with(
                "unlock_duration",
                duration_to_wire(std::time::Duration::from_micros(unlock)),
            )
            .with("pid", self.workers[w].pid.to_string())
            .with("tag", tag.to_string());
        let mode = if self.workers[w].rng.chance(250_000) {
            msg.set("mode", "shared");
            let limit = world
                .rng
                .chance(500_000)
                .then(|| self.workers[w].rng.between(1, 3) as u32);
            if let Some(l) = limit {
                msg.set_u64("limit", u64::from(l));
            }
            Mode::Shared { limit }
        } else if world.opts.counted && self.workers[w].rng.chance(200_000) {
            // Views of 1 to 4 slots on one object: holders made with a
            // small view meet requests made with a larger one and back.
            let limit = self.workers[w].rng.between(1, 4) as u32;
            msg.set("mode", "counted");
            msg.set_u64("limit", u64::from(limit));
            Mode::Counted { limit }
        } else {
            match self.workers[w].rng.below(20) {
                0 | 1 => msg.set("policy", "soft"),
                2 => {
                    msg.set("policy", "timed");
                    let quiet = self.workers[w].rng.between(0, 3_000) * MS;
                    msg.set(
                        "quiet",
                        duration_to_wire(std::time::Duration::from_micros(quiet)),
                    );
                }
                _ => {}
            }
            Mode::Exclusive
        };
        if self.workers[w].rng.chance(50_000) {
            msg.set("try", "true");
            self.tries.insert(req, world.now);
            world.stats.tries.sent += 1;
        }
        world.checker.lock_sent(
            req,
            LockSent {
                object: object_name(object).into_bytes(),
                node,
                mode,
                sent_at: world.now,
                deadline,
                deadline_slack_ppm: world.deadline_slack_ppm(),
            },
        );
        world.stats.locks += 1;
        let cancel_at = world
            .rng
            .chance(50_000)
            .then(|| world.now + self.workers[w].rng.between(0, wait));
        let drop_at = world
            .rng
            .chance(30_000)
            .then(|| world.now + self.workers[w].rng.between(0, wait));
        self.workers[w].state = State::Waiting {
            req,
            object,
            unlock,
            deadline,
            cancel_at,
            drop_at,
        };
        if let Some(at) = [cancel_at, drop_at].into_iter().flatten().min() {
            self.arm(world, w, at);
        }
        world.at(
            deadline + L1_BOUND,
            Ev::Deadline {
                worker: w,
                req: req.0,
            },
        );
        self.worker_send(world, w, msg);
    }

    fn send_unlock(&mut self, world: &mut World, w: usize, req: ReqId, object: usize) {
        let tag = self.new_tag(w, Tag::Unlock(req));
        let msg = Message::new("UNLOCK")
            .with("object_name", object_name(object))
            .with("pid", self.workers[w].pid.to_string())
            .with("tag", tag.to_string());
        self.worker_send(world, w, msg);
    }

    /// Names the lock of another client of the same agent in an UNLOCK: the
    /// agent must refuse it (S5). False when there is nobody to try it on.
    fn rogue_unlock(&mut self, world: &mut World, w: usize) -> bool {
        let node = self.workers[w].node;
        let victims: Vec<(ReqId, usize, u64)> = self
            .workers
            .iter()
            .enumerate()
            .filter(|(v, x)| *v != w && x.node == node)
            .filter_map(|(_, x)| match x.state {
                State::Attached { req, object, .. } if world.checker.holding(req, world.now) => {
                    Some((req, object, x.pid))
                }
                _ => None,
            })
            .collect();
        if victims.is_empty() {
            return false;
        }
        let (victim, object, pid) = *self.workers[w].rng.pick(&victims);
        world.log(|| format!("w{w} tries to unlock {victim} of pid {pid}"));
        let tag = self.new_tag(w, Tag::Rogue(victim));
        let msg = Message::new("UNLOCK")
            .with("object_name", object_name(object))
            .with("pid", pid.to_string())
            .with("tag", tag.to_string());
        self.worker_send(world, w, msg);
        true
    }

    fn disconnect(&mut self, world: &mut World, w: usize) {
        if let Some(conn) = self.workers[w].conn.take() {
            world.client_close(conn);
        }
        self.workers[w].state = State::Disconnected;
        let at = world.now + self.workers[w].rng.between(100 * MS, 3 * SEC);
        self.arm(world, w, at);
    }

    fn attached_timer(&mut self, world: &mut World, w: usize) {
        let State::Attached {
            req,
            object,
            unlock,
            mut plan,
            mut next_ping,
            protect_end,
        } = self.workers[w].state
        else {
            return;
        };
        let now = world.now;
        if !world.checker.attached(req, now) {
            // Released, lapsed for want of answers, or past the lease and
            // its unlock_duration: the client moves on.
            if self.workers[w].rng.chance(200_000) {
                self.disconnect(world, w);
            } else {
                self.workers[w].state = State::Idle;
                self.think(world, w);
            }
            return;
        }
        if next_ping <= now {
            self.worker_send(
                world,
                w,
                Message::new("ALIVE").with("serial", now.to_string()),
            );
            next_ping = now + SEC;
        }
        if plan.extend_at.is_some_and(|e| e <= now) {
            plan.extend_at = None;
            if world.checker.holding(req, now) {
                let tag = self.new_tag(w, Tag::Extend(req));
                let duration = self.workers[w].rng.between(1_000, 30_000) * MS;
                let msg = Message::new("EXTEND")
                    .with("object_name", object_name(object))
                    .with(
                        "duration",
                        duration_to_wire(std::time::Duration::from_micros(duration)),
                    )
                    .with("pid", self.workers[w].pid.to_string())
                    .with("tag", tag.to_string());
                self.worker_send(world, w, msg);
            }
        }
        let unlock_now = plan.late_unlock_at.is_some_and(|u| u <= now)
            || (plan.act == Act::Unlock && plan.act_at <= now);
        if unlock_now {
            world.log(|| format!("w{w} unlocks {req}"));
            world.checker.release(now, req);
            self.send_unlock(world, w, req, object);
            self.workers[w].state = State::Idle;
            self.think(world, w);
            return;
        }
        if plan.act == Act::Abandon && plan.act_at <= now {
            world.log(|| format!("w{w} abandons {req}"));
            world.checker.release(now, req);
            self.disconnect(world, w);
            return;
        }
        self.workers[w].state = State::Attached {
            req,
            object,
            unlock,
            plan,
            next_ping,
            protect_end,
        };
        let mut next = next_ping.min(protect_end);
        for t in [plan.extend_at, plan.late_unlock_at].into_iter().flatten() {
            next = next.min(t);
        }
        if plan.act != Act::Ignore {
            next = next.min(plan.act_at);
        }
        self.arm(world, w, next.max(now));
    }

    pub fn recv(&mut self, world: &mut World, w: usize, conn: ClientId, msg: Message) {
        if self.workers[w].conn != Some(conn) {
            return;
        }
        let node = self.workers[w].node;
        let tag = msg
            .get_str("tag")
            .and_then(|t| t.parse::<i64>().ok())
            .and_then(|t| self.workers[w].tags.get(&t).copied());
        let error = msg.get_str("error").map(str::to_owned);
        match (msg.command.as_str(), tag) {
            ("LOCKED", Some(Tag::Lock(req))) => {
                if self.tries.remove(&req).is_some() {
                    world.stats.tries.granted += 1;
                }
                self.worker_locked(world, w, req, &msg)
            }
            ("LOCKED", Some(Tag::Extend(req))) => {
                let Some((fence, date)) = fence_and_date(world, &msg) else {
                    return;
                };
                world.check_quorum_side(node, "an EXTEND's LOCKED");
                if let State::Attached { req: r, unlock, .. } = self.workers[w].state {
                    if r == req {
                        let (lease_end, protect) = world.lease_times(node, date, unlock);
                        if world.checker.holding(req, world.now) {
                            if let State::Attached { protect_end, .. } = &mut self.workers[w].state
                            {
                                *protect_end = protect;
                            }
                        }
                        world
                            .checker
                            .extended(world.now, req, fence, lease_end, protect);
                    }
                }
            }
            ("LOCKFAILED", Some(Tag::Lock(req))) => {
                if let Some(sent) = self.tries.remove(&req) {
                    let late = msg
                        .get_str("description")
                        .is_some_and(|d| d.starts_with("not obtained before the timeout"));
                    let t = &mut world.stats.tries;
                    match late {
                        true if world.now - sent >= SEC => t.late_after_a_second += 1,
                        true => t.at_deadline += 1,
                        false => t.refused += 1,
                    }
                }
                world
                    .checker
                    .failed(world.now, req, error.as_deref().unwrap_or("?"));
                match self.workers[w].state {
                    State::Waiting { req: r, .. } | State::Cancelling { req: r, .. }
                        if r == req =>
                    {
                        self.workers[w].state = State::Idle;
                        self.think(world, w);
                    }
                    _ => {}
                }
            }
            ("LOCKFAILED", Some(Tag::Extend(_) | Tag::Rogue(_))) => {}
            ("UNLOCKED", Some(Tag::Lock(req))) => match error.as_deref() {
                Some("timedout") => {
                    world.checker.stop(world.now, req);
                    // A client that let its lease run out sometimes says
                    // UNLOCK within the unlock_duration, as a polite one does.
                    let worker = &mut self.workers[w];
                    if let State::Attached {
                        req: r,
                        unlock,
                        ref mut plan,
                        ..
                    } = worker.state
                    {
                        if r == req && plan.act == Act::Ignore && plan.late_unlock_at.is_none() {
                            if worker.rng.chance(500_000) {
                                plan.late_unlock_at =
                                    Some(world.now + worker.rng.between(0, unlock));
                            }
                            let at = plan.late_unlock_at.unwrap_or(world.now);
                            self.arm(world, w, at);
                        }
                    }
                }
                _ => {
                    // `lost`, or anything else: the lock is gone. (R1:
                    // a healthy agent takes back no lock within its lease.)
                    world.log(|| format!("w{w}: {req} taken back"));
                    let node = self.workers[w].node;
                    let within = world.checker.within_lease(req, world.now);
                    if within && world.opts.victim.is_some_and(|v| v != node) {
                        let what = format!(
                            "n{node} took {req} back from w{w} (UNLOCKED {}) while faults struck only n{}",
                            error.as_deref().unwrap_or("without an error"),
                            world.opts.victim.unwrap_or(0)
                        );
                        world.checker.report(world.now, "R1", what);
                    }
                    world.checker.release(world.now, req);
                    if matches!(self.workers[w].state, State::Attached { req: r, .. } if r == req) {
                        self.workers[w].state = State::Idle;
                        self.think(world, w);
                    }
                }
            },
            ("UNLOCKED", Some(Tag::Unlock(req))) => {
                if matches!(self.workers[w].state, State::Cancelling { req: r, .. } if r == req) {
                    world.checker.cancel_acked(req);
                    self.workers[w].state = State::Idle;
                    self.think(world, w);
                }
            }
            ("UNLOCKED", Some(Tag::Rogue(victim))) => {
                if error.is_none() && world.checker.holding(victim, world.now) {
                    let what = format!(
                        "n{node} answered UNLOCKED to w{w}'s UNLOCK of {victim}, held by another client"
                    );
                    world.checker.report(world.now, "S5", what);
                }
            }
            ("ABSOLUTELY", None) => self.worker_vouched(world, w, &msg),
            ("LOCKFAILED", Some(Tag::Unlock(_))) => {}
            _ => {
                let what = format!("n{node} sent w{w} an unexpected {msg}");
                world.checker.report(world.now, "reply", what);
            }
        }
    }

    /// In a cluster, `ALIVE` is answered with `valid_for`: the holder may
    /// go on until the `ALIVE` was sent plus that long, unless it hears
    /// something newer (docs/cluster.md, the holder's side).
    fn worker_vouched(&mut self, world: &mut World, w: usize, msg: &Message) {
        let State::Attached { req, .. } = self.workers[w].state else {
            return;
        };
        let (Some(sent), Some(valid)) = (
            parse_u64(msg, "serial"),
            msg.get("valid_for")
                .and_then(|v| snaplock_proto::time::parse_duration(v, 86_400)),
        ) else {
            return;
        };
        let clock = world.nodes[self.workers[w].node].clock;
        let valid = u64::try_from(valid.as_micros()).expect("a day at most");
        let until = clock.true_at_mono(clock.mono_at(sent) + valid);
        world.checker.vouched(world.now, req, until);
        if let State::Attached { next_ping, .. } = &mut self.workers[w].state {
            let soon = sent + (valid / 5).max(100 * MS);
            if soon < *next_ping {
                *next_ping = soon.max(world.now);
                let at = *next_ping;
                self.arm(world, w, at);
            }
        }
    }

    fn worker_locked(&mut self, world: &mut World, w: usize, req: ReqId, msg: &Message) {
        let node = self.workers[w].node;
        let Some((fence, date)) = fence_and_date(world, msg) else {
            return;
        };
        world.stats.grants += 1;
        world.check_quorum_side(node, "a LOCKED");
        let object = match self.workers[w].state {
            State::Waiting { object, .. }
            | State::Cancelling { object, .. }
            | State::Attached { object, .. } => Some(object),
            _ => None,
        };
        if let Some(object) = object {
            world.check_backed(object_name(object).as_bytes(), fence);
        }
        let unlock = match self.workers[w].state {
            State::Waiting { unlock, .. } => unlock,
            _ => 0,
        };
        let (lease_end, protect_end) = world.lease_times(node, date, unlock);
        let locked = Locked {
            fence,
            lease_end,
            protect_end,
            // One agent alone vouches for its locks as long as it lives; in
            // a cluster the holder asks at once (ALIVE) how long it may.
            vouched_until: if world.nodes.len() == 1 {
                u64::MAX
            } else {
                world.now + 1
            },
        };
        world.checker.locked(world.now, req, locked);
        match self.workers[w].state {
            State::Waiting {
                req: r,
                object,
                unlock,
                ..
            } if r == req => {
                let lease = lease_end.saturating_sub(world.now);
                let hold = self.workers[w].rng.between(0, lease + lease / 3);
                let act = match self.workers[w].rng.below(100) {
                    0..=74 => Act::Unlock,
                    75..=81 => Act::Abandon,
                    _ => Act::Ignore,
                };
                let extend_at = world
                    .rng
                    .chance(100_000)
                    .then(|| world.now + self.workers[w].rng.between(0, hold));
                self.workers[w].state = State::Attached {
                    req,
                    object,
                    unlock,
                    plan: Plan {
                        act_at: world.now + hold,
                        act,
                        extend_at,
                        late_unlock_at: None,
                    },
                    next_ping: world.now,
                    protect_end,
                };
                self.arm(world, w, world.now);
            }
            // Granted after this client cancelled: it never held it.
            State::Cancelling { req: r, since, .. } if r == req => {
                world.checker.release(since, req);
            }
            _ => world.checker.release(world.now, req),
        }
    }

    pub fn dropped(&mut self, world: &mut World, w: usize, conn: ClientId) {
        if self.workers[w].conn != Some(conn) {
            return;
        }
        if let State::Attached { req, .. } = self.workers[w].state {
            world.checker.release(world.now, req);
        }
        self.workers[w].conn = None;
        self.workers[w].state = State::Disconnected;
        let at = world.now + self.workers[w].rng.between(100 * MS, 3 * SEC);
        self.arm(world, w, at);
    }

    /// L1: a request still waiting `L1_BOUND` after its deadline, on an
    /// agent that has been running since the deadline, never ended.
    pub fn deadline_check(&mut self, world: &mut World, w: usize, req: u64) {
        let req = ReqId(req);
        let deadline = match self.workers[w].state {
            State::Waiting {
                req: r, deadline, ..
            }
            | State::Cancelling {
                req: r, deadline, ..
            } if r == req => deadline,
            _ => return,
        };
        if !world.checker.pending(req) {
            return;
        }
        let node = self.workers[w].node;
        let since = world.nodes[node].running_since;
        let due = deadline.max(since) + L1_BOUND;
        if world.running(node) && world.now >= due {
            let what = format!(
                "{req} of w{w} on n{node} still waits {} after its deadline",
                super::checker::secs(world.now - deadline)
            );
            world.checker.report(world.now, "L1", what);
        } else {
            let at = if world.running(node) {
                due
            } else {
                world.now + SEC
            };
            world.at(
                at,
                Ev::Deadline {
                    worker: w,
                    req: req.0,
                },
            );
        }
    }
}
