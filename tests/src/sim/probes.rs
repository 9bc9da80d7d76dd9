//! Liveness probes, run in every quiet window once the cluster had time to
//! settle (TigerBeetle's "liveness mode"):
//!
//! - L4: every agent answers `INFO` ready, with the same epoch and leaders;
//! - L2: a `LOCK` of a name nobody uses is granted on every agent within
//!   [`BOUND`];
//! - L3: a lock released by `UNLOCK` passes to the next waiter, on another
//!   agent, within [`BOUND`];
//! - L5: no name stays taken by nobody: a ticket that blocks its object on
//!   its owner while its home has no such request (the home released it,
//!   or restarted) at every step of the probes, from their start to their
//!   end some 20 s later, is reported. Looked at once at each end only, a
//!   transaction's holding is caught twice in passing: the owner has it a
//!   moment before its home is told of it, and a moment after the home is
//!   told it is deleted (the owner drops it at the home's `TXACK`).
//!
//! Probe grants go through the checker like any other.

use std::collections::BTreeMap;

use snaplock_proto::wire::Message;
use snaplock_proto::{ClientId, UnixTime};

use super::SEC;
use super::checker::{LockSent, Locked, Mode, ReqId};
use super::events::{Ev, ProbeStep};
use super::world::{Who, World};

/// How long a probe may wait for what liveness promises.
pub const BOUND: u64 = 3 * SEC;

#[derive(Debug)]
struct ProbeLock {
    node: usize,
    object: String,
    req: ReqId,
    granted: Option<u64>,
}

/// The probes of the current window.
#[derive(Debug, Default)]
pub(super) struct Probes {
    window: u32,
    conns: BTreeMap<usize, ClientId>,
    status: BTreeMap<usize, Message>,
    locks: BTreeMap<i64, ProbeLock>,
    next_tag: i64,
    handover: Option<(i64, i64)>,
    released_at: u64,
    /// L5: the tickets held by nobody when the probes started, and at
    /// every step since.
    orphans: std::collections::BTreeSet<(Vec<u8>, String, u64)>,
}

impl Probes {
    /// Takes the window's probes one step further.
    pub fn step(&mut self, world: &mut World, step: ProbeStep) {
        // L5: only what stays orphaned at every step of the window counts
        // (the last step, `Close`, looks once more and reports).
        let midway = !matches!(step, ProbeStep::Start { .. } | ProbeStep::Close { .. });
        if midway && self.window == step.window() && !self.orphans.is_empty() {
            let now = orphans(world);
            self.orphans.retain(|o| now.contains(o));
        }
        match step {
            ProbeStep::Start { window } => {
                *self = Probes {
                    window,
                    next_tag: 1,
                    ..Probes::default()
                };
                world.stats.quiet_windows += 1;
                if world.opts.l5 {
                    self.orphans = orphans(world);
                }
                for i in 0..world.nodes.len() {
                    if let Some(conn) = world.open_conn(i, Who::Probe, 99) {
                        self.conns.insert(i, conn);
                        world.send(conn, Message::new("INFO"));
                    }
                }
                world.at(world.now + SEC, Ev::Probe(ProbeStep::Info { window }));
            }
            _ if self.window != step.window() => {}
            ProbeStep::Info { window } => {
                self.check_agreement(world);
                for i in 0..world.nodes.len() {
                    let object = format!("probe-{window}-n{i}");
                    self.probe_lock(world, i, &object);
                }
                world.at(world.now + BOUND, Ev::Probe(ProbeStep::Fresh { window }));
            }
            ProbeStep::Fresh { window } => {
                self.check_granted(world, "L2", "a name nobody uses");
                let tags: Vec<i64> = self.locks.keys().copied().collect();
                for tag in tags {
                    self.probe_unlock(world, tag);
                }
                let n = world.nodes.len() as u64;
                let first = world.rng.below(n) as usize;
                let object = format!("handover-{window}");
                let tag = self.probe_lock(world, first, &object);
                self.handover = Some((tag, 0));
                world.at(world.now + BOUND, Ev::Probe(ProbeStep::Second { window }));
            }
            ProbeStep::Second { window } => {
                self.check_granted(world, "L2", "the handover's first request");
                let n = world.nodes.len() as u64;
                let Some((first, _)) = self.handover else {
                    return;
                };
                let first_node = self.locks[&first].node;
                let mut second = world.rng.below(n) as usize;
                if n > 1 && second == first_node {
                    second = (second + 1) % n as usize;
                }
                let object = format!("handover-{window}");
                let tag = self.probe_lock(world, second, &object);
                self.handover = Some((first, tag));
                world.at(world.now + SEC, Ev::Probe(ProbeStep::Release { window }));
            }
            ProbeStep::Release { window } => {
                let Some((first, _)) = self.handover else {
                    return;
                };
                self.probe_unlock(world, first);
                self.released_at = world.now;
                world.at(world.now + BOUND, Ev::Probe(ProbeStep::Handover { window }));
            }
            ProbeStep::Handover { .. } => {
                let Some((first, second)) = self.handover else {
                    return;
                };
                let (node, granted) = {
                    let p = &self.locks[&second];
                    (p.node, p.granted)
                };
                let released = self.released_at;
                let first_held = self.locks[&first].granted.is_some();
                if first_held && granted.is_none_or(|g| g > released + BOUND) {
                    let what = format!(
                        "the handover to n{node} did not happen within {} of the UNLOCK",
                        super::checker::secs(BOUND)
                    );
                    world.checker.report(world.now, "L3", what);
                }
                self.probe_unlock(world, second);
            }
            ProbeStep::Close { .. } => {
                let before = std::mem::take(&mut self.orphans);
                let still: Vec<_> = orphans(world).intersection(&before).cloned().collect();
                if let Some((object, home, req)) = still.first() {
                    let what = format!(
                        "{} stays taken by nobody: request {req} of {home} blocks it on its owner, its home has no such request ({} such tickets)",
                        String::from_utf8_lossy(object),
                        still.len()
                    );
                    world.checker.report(world.now, "L5", what);
                }
                let conns: Vec<ClientId> = self.conns.values().copied().collect();
                for conn in conns {
                    self.probe_release_all(world, conn);
                    world.client_close(conn);
                }
                self.conns.clear();
            }
        }
    }

    /// L4: every agent ready, all with the same epoch and leaders.
    fn check_agreement(&mut self, world: &mut World) {
        let n = world.nodes.len();
        let mut views = Vec::new();
        for i in 0..n {
            match self.status.get(&i) {
                None => {
                    let what = format!("n{i} did not answer INFO within a second");
                    world.checker.report(world.now, "L4", what);
                    return;
                }
                Some(m) => {
                    let view = (
                        m.get_str("ready").unwrap_or("?").to_owned(),
                        m.get_str("epoch").unwrap_or("?").to_owned(),
                        m.get_str("leaders").unwrap_or("?").to_owned(),
                    );
                    views.push((i, view));
                }
            }
        }
        let first = views[0].1.clone();
        if views.iter().any(|(_, v)| v.0 != "true" || *v != first) {
            let what = format!(
                "agents disagree or are not ready: {}",
                views
                    .iter()
                    .map(|(i, v)| format!("n{i} ready={} epoch={} leaders={}", v.0, v.1, v.2))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            world.checker.report(world.now, "L4", what);
        }
    }

    fn check_granted(&mut self, world: &mut World, rule: &'static str, what: &str) {
        let late: Vec<String> = self
            .locks
            .values()
            .filter(|p| p.granted.is_none())
            .map(|p| format!("{} on n{}", p.object, p.node))
            .collect();
        if !late.is_empty() {
            let text = format!(
                "{what} not granted within {}: {}",
                super::checker::secs(BOUND),
                late.join(", ")
            );
            world.checker.report(world.now, rule, text);
        }
    }

    fn probe_lock(&mut self, world: &mut World, node: usize, object: &str) -> i64 {
        let tag = self.next_tag;
        self.next_tag += 1;
        let req = ReqId(world.next_req);
        world.next_req += 1;
        let wall = world.nodes[node].clock.wall_at(world.now);
        let deadline_wall = wall + 20 * SEC;
        world.checker.lock_sent(
            req,
            LockSent {
                object: object.as_bytes().to_vec(),
                node,
                mode: Mode::Exclusive,
                sent_at: world.now,
                deadline: world.nodes[node]
                    .clock
                    .true_at_date(world.now, deadline_wall),
                deadline_slack_ppm: world.deadline_slack_ppm(),
            },
        );
        self.locks.insert(
            tag,
            ProbeLock {
                node,
                object: object.to_owned(),
                req,
                granted: None,
            },
        );
        if let Some(&conn) = self.conns.get(&node) {
            let msg = Message::new("LOCK")
                .with("object_name", object)
                .with("timeout", UnixTime(deadline_wall).to_wire())
                .with("duration", "60")
                .with("unlock_duration", "0")
                .with("pid", (900_000 + tag).to_string())
                .with("tag", tag.to_string());
            world.send(conn, msg);
        }
        tag
    }

    fn probe_unlock(&mut self, world: &mut World, tag: i64) {
        let Some(p) = self.locks.get(&tag) else {
            return;
        };
        let (node, req) = (p.node, p.req);
        let msg = Message::new("UNLOCK")
            .with("object_name", p.object.as_str())
            .with("pid", (900_000 + tag).to_string())
            .with("tag", (-tag).to_string());
        world.checker.release(world.now, req);
        if let Some(&conn) = self.conns.get(&node) {
            world.send(conn, msg);
        }
    }

    fn probe_release_all(&mut self, world: &mut World, conn: ClientId) {
        for p in self.locks.values() {
            if self.conns.get(&p.node) == Some(&conn) {
                world.checker.release(world.now, p.req);
            }
        }
    }

    pub fn recv(&mut self, world: &mut World, node: usize, conn: ClientId, msg: Message) {
        if self.conns.get(&node) != Some(&conn) {
            return;
        }
        match msg.command.as_str() {
            "STATUS" => {
                self.status.insert(node, msg);
            }
            "LOCKED" | "LOCKFAILED" => {
                let Some(tag) = msg.get_str("tag").and_then(|t| t.parse::<i64>().ok()) else {
                    return;
                };
                let Some(p) = self.locks.get(&tag) else {
                    return;
                };
                let req = p.req;
                if msg.command == "LOCKFAILED" {
                    let error = msg.get_str("error").unwrap_or("?").to_owned();
                    world.checker.failed(world.now, req, &error);
                    return;
                }
                let fence = msg.get_str("fence").and_then(|f| f.parse().ok());
                let date = msg.get("timeout_date").and_then(UnixTime::from_wire);
                let (Some(fence), Some(date)) = (fence, date) else {
                    return;
                };
                world.check_quorum_side(node, "a probe's LOCKED");
                let object = self.locks[&tag].object.clone();
                world.check_backed(object.as_bytes(), fence);
                let (lease_end, protect_end) = world.lease_times(node, date.0, 0);
                let locked = Locked {
                    fence,
                    lease_end,
                    protect_end,
                    // Probes run with every agent up: they do not ping.
                    vouched_until: u64::MAX,
                };
                world.stats.grants += 1;
                world.checker.locked(world.now, req, locked);
                if let Some(p) = self.locks.get_mut(&tag) {
                    p.granted = Some(world.now);
                }
            }
            _ => {}
        }
    }

    pub fn dropped(&mut self, world: &mut World, conn: ClientId) {
        self.probe_release_all(world, conn);
        self.conns.retain(|_, c| *c != conn);
    }
}

/// The tickets that block their object on its owner while their home
/// has no such request (L5).
fn orphans(world: &World) -> std::collections::BTreeSet<(Vec<u8>, String, u64)> {
    let mut homes: BTreeMap<String, std::collections::BTreeSet<(Vec<u8>, u64)>> = BTreeMap::new();
    for node in &world.nodes {
        if let Some(core) = node.core.as_ref() {
            let (id, requests) = core.debug_requests();
            homes.insert(id, requests.into_iter().collect());
        }
    }
    let mut orphans = std::collections::BTreeSet::new();
    for node in &world.nodes {
        let Some(core) = node.core.as_ref() else {
            continue;
        };
        for (object, home, req) in core.debug_owned_blocking() {
            let has = homes
                .get(&home)
                .is_some_and(|r| r.contains(&(object.clone(), req)));
            if !has {
                orphans.insert((object, home, req));
            }
        }
    }
    orphans
}
