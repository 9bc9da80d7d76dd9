//! The history checker: every client-visible event of a run, in true time,
//! checked online against the safety properties of docs/cluster.md (S1–S5; the
//! world adds what needs the network's state: S7, S8 and liveness).
//!
//! A grant's **held interval** runs from the delivery of its `LOCKED` to the
//! client's stop, which is the earliest of: the `UNLOCK` it sends, an
//! `UNLOCKED` it receives, its lease end (`timeout_date` on its computer's
//! clock), its connection dropping, and the end of what its agent vouched
//! for (in a cluster the client asks with `ALIVE`; the answer's
//! `valid_for`, counted from when it asked, is how long it may go on
//! without hearing more: docs/cluster.md, the holder's side). Every input
//! is already in true time: the world converts computer clocks before
//! calling in.
//!
//! Time-driven stops are settled lazily, from the times each grant carries,
//! whenever an object is looked at: the verdict cannot depend on the order
//! in which events of one instant are processed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One LOCK request of the run, numbered by the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReqId(pub u64);

impl fmt::Display for ReqId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// What a request asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `mode=exclusive`.
    Exclusive,
    /// `mode=shared`, with its own `limit`.
    Shared {
        /// Most holders this request accepts, itself included.
        limit: Option<u32>,
    },
    /// `mode=counted`, with its own `limit`.
    Counted {
        /// Most holders, itself included, when it is granted.
        limit: u32,
    },
}

impl Mode {
    fn conflicts(self, other: Mode) -> bool {
        self == Mode::Exclusive || other == Mode::Exclusive
    }
}

/// A broken property.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// True time, µs.
    pub at: u64,
    /// `S1`..`S8`, `L1`..`L5`, `R1`, `T1`..`T5` (transactions, see
    /// [`super::txcheck`]), `reply`, `panic` or `harness`.
    pub rule: &'static str,
    /// The records involved.
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}: {}", self.rule, secs(self.at), self.what)
    }
}

/// µs as seconds with six decimals, for reports.
pub fn secs(us: u64) -> String {
    if us == u64::MAX {
        return "never".to_owned();
    }
    format!("{}.{:06}s", us / 1_000_000, us % 1_000_000)
}

/// What the world knows about a request when it is sent.
#[derive(Clone, Debug)]
pub struct LockSent {
    /// The object.
    pub object: Vec<u8>,
    /// The computer of the client.
    pub node: usize,
    /// Mode and limit.
    pub mode: Mode,
    /// When it was sent.
    pub sent_at: u64,
    /// When its `timeout=` comes, as its client saw the date when sending.
    pub deadline: u64,
    /// How far (parts per million of the time since it was sent) the
    /// agent's own reading of the date may differ: zero when the wall
    /// clock runs with the monotonic one, twice the drift bound when it
    /// is disciplined apart from it.
    pub deadline_slack_ppm: u64,
}

/// A `LOCKED` delivered to a client, its times converted to true time.
#[derive(Clone, Copy, Debug)]
pub struct Locked {
    /// `fence=`.
    pub fence: u64,
    /// When `timeout_date` comes on the client's computer.
    pub lease_end: u64,
    /// When `timeout_date + unlock_duration` comes there.
    pub protect_end: u64,
    /// Until when the agent vouches for the lock (`u64::MAX` for one agent
    /// alone, which vouches for as long as it lives).
    pub vouched_until: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Pending,
    Locked,
    Failed,
}

#[derive(Debug)]
struct Request {
    sent: LockSent,
    outcome: Outcome,
    cancel_acked: bool,
}

#[derive(Clone, Debug)]
struct Grant {
    object: Vec<u8>,
    node: usize,
    mode: Mode,
    fence: u64,
    delivered: u64,
    lease_end: u64,
    protect_end: u64,
    vouched_until: u64,
    stopped: Option<u64>,
    released: Option<u64>,
    ended_counted: bool,
}

impl Grant {
    /// When the held interval ends (or will, if nothing else happens).
    fn end(&self) -> u64 {
        self.stopped
            .unwrap_or(u64::MAX)
            .min(self.lease_end)
            .min(self.vouched_until)
    }

    fn holding(&self, t: u64) -> bool {
        t < self.end()
    }

    /// From when the service may give the object to someone else although
    /// the lease and its unlock_duration have not run out: the holder let
    /// go, or its agent no longer vouched for it (it was revoked, or cannot
    /// have kept it).
    fn released_at(&self) -> u64 {
        self.released.unwrap_or(u64::MAX).min(self.vouched_until)
    }

    fn describe(&self, id: ReqId) -> String {
        let mode = match self.mode {
            Mode::Exclusive => "exclusive".to_owned(),
            Mode::Shared { limit: None } => "shared".to_owned(),
            Mode::Shared { limit: Some(l) } => format!("shared limit {l}"),
            Mode::Counted { limit } => format!("counted limit {limit}"),
        };
        format!(
            "{id} on node {} ({mode}, fence {}) held from {} to {} (lease end {}, protected to {}, released {})",
            self.node,
            self.fence,
            secs(self.delivered),
            secs(self.end()),
            secs(self.lease_end),
            secs(self.protect_end),
            secs(self.released_at()),
        )
    }
}

#[derive(Debug, Default)]
struct Object {
    /// Grants still held or still protected by their lease (S3).
    active: Vec<ReqId>,
    fences: BTreeSet<u64>,
    max_ended_any: Option<u64>,
    max_ended_exclusive: Option<u64>,
    grants: u64,
}

/// The online checker of one run.
#[derive(Debug)]
pub struct Checker {
    requests: BTreeMap<ReqId, Request>,
    grants: BTreeMap<ReqId, Grant>,
    objects: BTreeMap<Vec<u8>, Object>,
    violations: Vec<Violation>,
    /// Grants checked, for the run's statistics.
    pub grant_count: u64,
    /// Whether liveness (`L…`) violations count; runs that plant a safety
    /// bug leave them out.
    pub liveness: bool,
}

impl Default for Checker {
    fn default() -> Checker {
        Checker::new()
    }
}

impl Checker {
    /// An empty history.
    pub fn new() -> Checker {
        Checker {
            requests: BTreeMap::new(),
            grants: BTreeMap::new(),
            objects: BTreeMap::new(),
            violations: Vec::new(),
            grant_count: 0,
            liveness: true,
        }
    }

    /// Every violation so far, in the order found.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Records a violation found elsewhere (network state, liveness).
    pub fn report(&mut self, at: u64, rule: &'static str, what: String) {
        if rule.starts_with('L') && !self.liveness {
            return;
        }
        self.violations.push(Violation { at, rule, what });
    }

    /// A client sent `LOCK`.
    pub fn lock_sent(&mut self, req: ReqId, sent: LockSent) {
        self.requests.insert(
            req,
            Request {
                sent,
                outcome: Outcome::Pending,
                cancel_acked: false,
            },
        );
    }

    /// Whether the request has had neither `LOCKED` nor `LOCKFAILED`.
    pub fn pending(&self, req: ReqId) -> bool {
        self.requests
            .get(&req)
            .is_some_and(|r| r.outcome == Outcome::Pending)
    }

    /// Whether the grant of `req` is held at `t` (false when never granted).
    pub fn holding(&self, req: ReqId, t: u64) -> bool {
        self.grants.get(&req).is_some_and(|g| g.holding(t))
    }

    /// Whether the grant of `req` is within its lease at `t`: not stopped
    /// (released, timed out) and its lease not over, vouched for or not.
    pub fn within_lease(&self, req: ReqId, t: u64) -> bool {
        self.grants
            .get(&req)
            .is_some_and(|g| g.stopped.is_none_or(|s| s > t) && t < g.lease_end)
    }

    /// Whether the service may still count the grant of `req` as held at `t`:
    /// not released and its lease plus unlock_duration not over.
    pub fn attached(&self, req: ReqId, t: u64) -> bool {
        self.grants
            .get(&req)
            .is_some_and(|g| t < g.released_at() && t < g.protect_end)
    }

    /// The fence of the grant of `req`.
    pub fn fence(&self, req: ReqId) -> Option<u64> {
        self.grants.get(&req).map(|g| g.fence)
    }

    /// A `LOCKFAILED` answered `req`.
    pub fn failed(&mut self, t: u64, req: ReqId, error: &str) {
        let Some(r) = self.requests.get_mut(&req) else {
            return self.report(t, "S4", format!("LOCKFAILED for {req}, never asked"));
        };
        if r.outcome != Outcome::Pending {
            let was = r.outcome;
            self.report(
                t,
                "S4",
                format!("LOCKFAILED error={error} for {req} after its outcome {was:?}"),
            );
            return;
        }
        r.outcome = Outcome::Failed;
    }

    /// The agent confirmed a cancelling `UNLOCK` of a request that waited:
    /// nothing may be granted for it any more.
    pub fn cancel_acked(&mut self, req: ReqId) {
        if let Some(r) = self.requests.get_mut(&req) {
            if r.outcome == Outcome::Pending {
                r.cancel_acked = true;
            }
        }
    }

    /// A `LOCKED` answered `req` at true time `t`.
    pub fn locked(&mut self, t: u64, req: ReqId, l: Locked) {
        let Some(r) = self.requests.get_mut(&req) else {
            return self.report(t, "S4", format!("LOCKED for {req}, never asked"));
        };
        let mut late = Vec::new();
        if r.outcome != Outcome::Pending {
            late.push(format!("after its outcome {:?}", r.outcome));
        }
        if r.cancel_acked {
            late.push("after its cancellation was confirmed".to_owned());
        }
        let slack = u128::from(t.saturating_sub(r.sent.sent_at))
            * u128::from(r.sent.deadline_slack_ppm)
            / 1_000_000;
        if u128::from(t) > u128::from(r.sent.deadline) + slack {
            late.push(format!(
                "{} µs after its deadline on its computer's clock",
                t - r.sent.deadline
            ));
        }
        if l.lease_end <= t {
            late.push("with its lease already over".to_owned());
        }
        let again = r.outcome == Outcome::Locked;
        r.outcome = Outcome::Locked;
        let (object, node, mode) = (r.sent.object.clone(), r.sent.node, r.sent.mode);
        if !late.is_empty() {
            let text = format!("LOCKED for {req} (fence {}) {}", l.fence, late.join(", "));
            self.report(t, "S4", text);
        }
        if again {
            return;
        }
        let grant = Grant {
            object: object.clone(),
            node,
            mode,
            fence: l.fence,
            delivered: t,
            lease_end: l.lease_end,
            protect_end: l.protect_end,
            vouched_until: l.vouched_until,
            stopped: None,
            released: None,
            ended_counted: false,
        };
        self.grant_count += 1;
        self.settle(&object, t);
        self.check_grant(t, req, &grant);
        let obj = self.objects.entry(object).or_default();
        obj.fences.insert(grant.fence);
        obj.active.push(req);
        obj.grants += 1;
        self.grants.insert(req, grant);
    }

    /// S1, S2 and S3 for a new grant, against the object's active grants.
    fn check_grant(&mut self, t: u64, req: ReqId, g: &Grant) {
        let Some(obj) = self.objects.get(&g.object) else {
            return;
        };
        let mut found = Vec::new();
        let held: Vec<(ReqId, &Grant)> = obj
            .active
            .iter()
            .map(|id| (*id, &self.grants[id]))
            .filter(|(_, other)| other.holding(t))
            .collect();
        for (id, other) in &held {
            if g.mode.conflicts(other.mode) {
                found.push((
                    "S1",
                    format!(
                        "{} granted while {} holds",
                        g.describe(req),
                        other.describe(*id)
                    ),
                ));
            }
        }
        if g.mode != Mode::Exclusive {
            // Shared and counted holders all count; every shared holder's
            // limit binds while it holds.
            let sharing: Vec<(ReqId, &Grant)> = held
                .iter()
                .copied()
                .chain(std::iter::once((req, g)))
                .filter(|(_, x)| x.mode != Mode::Exclusive)
                .collect();
            let count = sharing.len() as u64;
            for (id, x) in &sharing {
                if let Mode::Shared { limit: Some(limit) } = x.mode {
                    if count > u64::from(limit) {
                        found.push((
                            "S1",
                            format!(
                                "{count} shared or counted holders, beyond the limit of {}",
                                x.describe(*id)
                            ),
                        ));
                    }
                }
            }
            // A counted holder's limit bound its own grant only, at a count
            // the service decided in an order clients need not see (two
            // grants decided together are delivered in any order). Some
            // order of the holders must give each one at most as many
            // holders as its own limit, itself included: the i-th smallest
            // limit is at least i. (The largest is then at least the count.)
            let mut limits: Vec<u64> = sharing
                .iter()
                .filter_map(|(_, x)| match x.mode {
                    Mode::Counted { limit } => Some(u64::from(limit)),
                    Mode::Shared { limit } => Some(limit.map_or(u64::MAX, u64::from)),
                    Mode::Exclusive => None,
                })
                .collect();
            limits.sort_unstable();
            if let Some((place, limit)) = (1u64..).zip(&limits).find(|(i, l)| **l < *i) {
                found.push((
                    "S1",
                    format!(
                        "{count} shared or counted holders: {place} of them with limits of \
                         at most {limit}, so one was granted beyond its own limit ({} now)",
                        g.describe(req)
                    ),
                ));
            }
        }
        if obj.fences.contains(&g.fence) {
            found.push((
                "S2",
                format!("{} reuses a fence of the object", g.describe(req)),
            ));
        }
        let floor = match g.mode {
            Mode::Exclusive => obj.max_ended_any,
            Mode::Shared { .. } | Mode::Counted { .. } => obj.max_ended_exclusive,
        };
        if let Some(floor) = floor {
            if g.fence <= floor {
                found.push((
                    "S2",
                    format!(
                        "{} has a fence not above {floor}, of a grant that ended before",
                        g.describe(req)
                    ),
                ));
            }
        }
        for id in &obj.active {
            let other = &self.grants[id];
            if other.holding(t) || !g.mode.conflicts(other.mode) {
                continue;
            }
            if t < other.protect_end && t < other.released_at() {
                found.push((
                    "S3",
                    format!(
                        "{} granted before the lease and unlock_duration of {} ran out",
                        g.describe(req),
                        other.describe(*id)
                    ),
                ));
            }
        }
        for (rule, what) in found {
            self.report(t, rule, what);
        }
    }

    /// Folds in the stops that time alone brought by `t`, and forgets grants
    /// that can no longer matter.
    fn settle(&mut self, object: &[u8], t: u64) {
        let Some(obj) = self.objects.get_mut(object) else {
            return;
        };
        let grants = &mut self.grants;
        obj.active.retain(|id| {
            let g = grants.get_mut(id).expect("active grant exists");
            if g.end() <= t && !g.ended_counted {
                g.ended_counted = true;
                obj.max_ended_any = obj.max_ended_any.max(Some(g.fence));
                if g.mode == Mode::Exclusive {
                    obj.max_ended_exclusive = obj.max_ended_exclusive.max(Some(g.fence));
                }
            }
            !(g.end() <= t && (g.released_at() <= t || g.protect_end <= t))
        });
    }

    /// The client of `req` stopped holding at `t` (it sent or received
    /// something that ends the lock, or its lease ran out).
    pub fn stop(&mut self, t: u64, req: ReqId) {
        if let Some(g) = self.grants.get_mut(&req) {
            if g.stopped.is_none() {
                g.stopped = Some(t);
            }
        }
    }

    /// The holder let go at `t` (`UNLOCK` sent, connection dropped) or was
    /// revoked (`UNLOCKED error=lost`): the service may pass the object on.
    pub fn release(&mut self, t: u64, req: ReqId) {
        self.stop(t, req);
        if let Some(g) = self.grants.get_mut(&req) {
            if g.released.is_none() {
                g.released = Some(t);
            }
        }
    }

    /// At `t` the agent vouched for the grant of `req` until `until`, unless
    /// what it vouched for before had already run out (a client that
    /// stopped does not take the lock back). The latest of its promises
    /// counts: each was true when made.
    pub fn vouched(&mut self, t: u64, req: ReqId, until: u64) {
        if let Some(g) = self.grants.get_mut(&req) {
            if t < g.vouched_until {
                g.vouched_until = g.vouched_until.max(until);
            }
        }
    }

    /// A `LOCKED` answered an `EXTEND` of the grant of `req`.
    pub fn extended(&mut self, t: u64, req: ReqId, fence: u64, lease_end: u64, protect_end: u64) {
        let Some(g) = self.grants.get_mut(&req) else {
            return self.report(
                t,
                "S4",
                format!("EXTEND of {req} answered LOCKED, never granted"),
            );
        };
        if fence != g.fence {
            let text = format!(
                "EXTEND of {req} answered fence {fence}, granted with {}",
                g.fence
            );
            return self.report(t, "S2", text);
        }
        if g.holding(t) {
            g.lease_end = lease_end;
            g.protect_end = protect_end;
        }
    }

    /// Number of grants per object, for the run's statistics.
    pub fn objects_granted(&self) -> usize {
        self.objects.values().filter(|o| o.grants > 0).count()
    }
}
