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
//!   or restarted) when the probes start is gone when they end, some 20 s
//!   later.
//!
//! Probe grants go through the checker like any other.

use std::collections::BTreeMap;

use snaplock_proto::wire::Message;
use snaplock_proto::{ClientId, UnixTime};

use super::SEC;
use super::checker::{LockSent, Locked, Mode, ReqId};
use super::world::{Ev, Who, World};

/// How long a probe may wait for what liveness promises.
pub const BOUND: u64 = 3 * SEC;

/// The steps of one window's probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeStep {
    /// Connect to every agent and ask `INFO`.
    Start { window: u32 },
    /// Compare the answers; lock a fresh name everywhere.
    Info { window: u32 },
    /// Every fresh name granted? Start the handover.
    Fresh { window: u32 },
    /// The first holder of the handover name holds; the second asks.
    Second { window: u32 },
    /// The first releases.
    Release { window: u32 },
    /// The second must hold now.
    Handover { window: u32 },
    /// Close the probes' connections.
    Close { window: u32 },
}

#[derive(Debug)]
struct ProbeLock {
    node: usize,
    object: String,
    req: ReqId,
    granted: Option<u64>,
}

/// The probes of the current window.
#[derive(Debug, Default)]
pub struct Probes {
    window: u32,
    conns: BTreeMap<usize, ClientId>,
    status: BTreeMap<usize, Message>,
    locks: BTreeMap<i64, ProbeLock>,
    next_tag: i64,
    handover: Option<(i64, i64)>,
    released_at: u64,
    /// L5: the tickets held by nobody when the probes started.
    orphans: std::collections::BTreeSet<(Vec<u8>, String, u64)>,
}

impl World {
    pub(super) fn probe(&mut self, step: ProbeStep) {
        match step {
            ProbeStep::Start { window } => {
                self.probes = Probes {
                    window,
                    next_tag: 1,
                    ..Probes::default()
                };
                self.stats.quiet_windows += 1;
                if self.opts.l5 {
                    self.probes.orphans = self.orphans();
                }
                for i in 0..self.nodes.len() {
                    if let Some(conn) = self.open_conn(i, Who::Probe, 99) {
                        self.probes.conns.insert(i, conn);
                        self.send(conn, Message::new("INFO"));
                    }
                }
                self.at(self.now + SEC, Ev::Probe(ProbeStep::Info { window }));
            }
            _ if self.probes.window != step_window(step) => {}
            ProbeStep::Info { window } => {
                self.check_agreement();
                for i in 0..self.nodes.len() {
                    let object = format!("probe-{window}-n{i}");
                    self.probe_lock(i, &object);
                }
                self.at(self.now + BOUND, Ev::Probe(ProbeStep::Fresh { window }));
            }
            ProbeStep::Fresh { window } => {
                self.check_granted("L2", "a name nobody uses");
                let tags: Vec<i64> = self.probes.locks.keys().copied().collect();
                for tag in tags {
                    self.probe_unlock(tag);
                }
                let n = self.nodes.len() as u64;
                let first = self.rng.below(n) as usize;
                let object = format!("handover-{window}");
                let tag = self.probe_lock(first, &object);
                self.probes.handover = Some((tag, 0));
                self.at(self.now + BOUND, Ev::Probe(ProbeStep::Second { window }));
            }
            ProbeStep::Second { window } => {
                self.check_granted("L2", "the handover's first request");
                let n = self.nodes.len() as u64;
                let Some((first, _)) = self.probes.handover else {
                    return;
                };
                let first_node = self.probes.locks[&first].node;
                let mut second = self.rng.below(n) as usize;
                if n > 1 && second == first_node {
                    second = (second + 1) % n as usize;
                }
                let object = format!("handover-{window}");
                let tag = self.probe_lock(second, &object);
                self.probes.handover = Some((first, tag));
                self.at(self.now + SEC, Ev::Probe(ProbeStep::Release { window }));
            }
            ProbeStep::Release { window } => {
                let Some((first, _)) = self.probes.handover else {
                    return;
                };
                self.probe_unlock(first);
                self.probes.released_at = self.now;
                self.at(self.now + BOUND, Ev::Probe(ProbeStep::Handover { window }));
            }
            ProbeStep::Handover { .. } => {
                let Some((first, second)) = self.probes.handover else {
                    return;
                };
                let (node, granted) = {
                    let p = &self.probes.locks[&second];
                    (p.node, p.granted)
                };
                let released = self.probes.released_at;
                let first_held = self.probes.locks[&first].granted.is_some();
                if first_held && granted.is_none_or(|g| g > released + BOUND) {
                    let what = format!(
                        "the handover to n{node} did not happen within {} of the UNLOCK",
                        super::checker::secs(BOUND)
                    );
                    self.checker.report(self.now, "L3", what);
                }
                self.probe_unlock(second);
            }
            ProbeStep::Close { .. } => {
                let before = std::mem::take(&mut self.probes.orphans);
                let still: Vec<_> = self.orphans().intersection(&before).cloned().collect();
                if let Some((object, home, req)) = still.first() {
                    let what = format!(
                        "{} stays taken by nobody: request {req} of {home} blocks it on its owner, its home has no such request ({} such tickets)",
                        String::from_utf8_lossy(object),
                        still.len()
                    );
                    self.checker.report(self.now, "L5", what);
                }
                let conns: Vec<ClientId> = self.probes.conns.values().copied().collect();
                for conn in conns {
                    self.probe_release_all(conn);
                    self.client_close(conn);
                }
                self.probes.conns.clear();
            }
        }
    }

    /// The tickets that block their object on its owner while their home
    /// has no such request (L5).
    fn orphans(&self) -> std::collections::BTreeSet<(Vec<u8>, String, u64)> {
        let mut homes: BTreeMap<String, std::collections::BTreeSet<(Vec<u8>, u64)>> =
            BTreeMap::new();
        for node in &self.nodes {
            if let Some(core) = node.core.as_ref() {
                let (id, requests) = core.debug_requests();
                homes.insert(id, requests.into_iter().collect());
            }
        }
        let mut orphans = std::collections::BTreeSet::new();
        for node in &self.nodes {
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

    /// L4: every agent ready, all with the same epoch and leaders.
    fn check_agreement(&mut self) {
        let n = self.nodes.len();
        let mut views = Vec::new();
        for i in 0..n {
            match self.probes.status.get(&i) {
                None => {
                    let what = format!("n{i} did not answer INFO within a second");
                    self.checker.report(self.now, "L4", what);
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
            self.checker.report(self.now, "L4", what);
        }
    }

    fn check_granted(&mut self, rule: &'static str, what: &str) {
        let late: Vec<String> = self
            .probes
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
            self.checker.report(self.now, rule, text);
        }
    }

    fn probe_lock(&mut self, node: usize, object: &str) -> i64 {
        let tag = self.probes.next_tag;
        self.probes.next_tag += 1;
        let req = ReqId(self.next_req);
        self.next_req += 1;
        let wall = self.nodes[node].clock.wall_at(self.now);
        let deadline_wall = wall + 20 * SEC;
        self.checker.lock_sent(
            req,
            LockSent {
                object: object.as_bytes().to_vec(),
                node,
                mode: Mode::Exclusive,
                sent_at: self.now,
                deadline: self.nodes[node].clock.true_at_date(self.now, deadline_wall),
                deadline_slack_ppm: self.deadline_slack_ppm(),
            },
        );
        self.probes.locks.insert(
            tag,
            ProbeLock {
                node,
                object: object.to_owned(),
                req,
                granted: None,
            },
        );
        if let Some(&conn) = self.probes.conns.get(&node) {
            let msg = Message::new("LOCK")
                .with("object_name", object)
                .with("timeout", UnixTime(deadline_wall).to_wire())
                .with("duration", "60")
                .with("unlock_duration", "0")
                .with("pid", (900_000 + tag).to_string())
                .with("tag", tag.to_string());
            self.send(conn, msg);
        }
        tag
    }

    fn probe_unlock(&mut self, tag: i64) {
        let Some(p) = self.probes.locks.get(&tag) else {
            return;
        };
        let (node, req) = (p.node, p.req);
        let msg = Message::new("UNLOCK")
            .with("object_name", p.object.as_str())
            .with("pid", (900_000 + tag).to_string())
            .with("tag", (-tag).to_string());
        self.checker.release(self.now, req);
        if let Some(&conn) = self.probes.conns.get(&node) {
            self.send(conn, msg);
        }
    }

    fn probe_release_all(&mut self, conn: ClientId) {
        for p in self.probes.locks.values() {
            if self.probes.conns.get(&p.node) == Some(&conn) {
                self.checker.release(self.now, p.req);
            }
        }
    }

    pub(super) fn probe_recv(&mut self, node: usize, conn: ClientId, msg: Message) {
        if self.probes.conns.get(&node) != Some(&conn) {
            return;
        }
        match msg.command.as_str() {
            "STATUS" => {
                self.probes.status.insert(node, msg);
            }
            "LOCKED" | "LOCKFAILED" => {
                let Some(tag) = msg.get_str("tag").and_then(|t| t.parse::<i64>().ok()) else {
                    return;
                };
                let Some(p) = self.probes.locks.get(&tag) else {
                    return;
                };
                let req = p.req;
                if msg.command == "LOCKFAILED" {
                    let error = msg.get_str("error").unwrap_or("?").to_owned();
                    self.checker.failed(self.now, req, &error);
                    return;
                }
                let fence = msg.get_str("fence").and_then(|f| f.parse().ok());
                let date = msg.get("timeout_date").and_then(UnixTime::from_wire);
                let (Some(fence), Some(date)) = (fence, date) else {
                    return;
                };
                self.check_quorum_side(node, "a probe's LOCKED");
                let object = self.probes.locks[&tag].object.clone();
                self.check_backed(object.as_bytes(), fence);
                let (lease_end, protect_end) = self.lease_times(node, date.0, 0);
                let locked = Locked {
                    fence,
                    lease_end,
                    protect_end,
                    // Probes run with every agent up: they do not ping.
                    vouched_until: u64::MAX,
                };
                self.stats.grants += 1;
                self.checker.locked(self.now, req, locked);
                if let Some(p) = self.probes.locks.get_mut(&tag) {
                    p.granted = Some(self.now);
                }
            }
            _ => {}
        }
    }

    pub(super) fn probe_dropped(&mut self, conn: ClientId) {
        self.probe_release_all(conn);
        self.probes.conns.retain(|_, c| *c != conn);
    }
}

fn step_window(step: ProbeStep) -> u32 {
    match step {
        ProbeStep::Start { window }
        | ProbeStep::Info { window }
        | ProbeStep::Fresh { window }
        | ProbeStep::Second { window }
        | ProbeStep::Release { window }
        | ProbeStep::Handover { window }
        | ProbeStep::Close { window } => window,
    }
}
