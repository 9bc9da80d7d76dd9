//! `strict`: `owner`, plus the work of a grant that `owner` leaves out
//! and that every correct agent does, each done the cheapest way known:
//!
//! - the whole `LOCK` line read and checked: `duration` (1 s .. 7 days),
//!   `timeout` (a deadline not yet past), `pid` and `tag` numbers, a
//!   non-empty `object_name`;
//! - the request's key `<server>/<pid>`, and a home table by name that
//!   refuses a second request with one key (`error=duplicate`) and finds
//!   the request an `UNLOCK` releases;
//! - the owner's record of each name it orders: the last fence (fences
//!   grow per name) and the grant it holds or asks votes for;
//! - the follower's vote per name, checked against the vote it already
//!   holds (a leader votes for one conflicting grant at a time), dropped
//!   at the release; peer messages carry what that needs: the name (as a
//!   64-bit digest, the least that tells names apart), the fence and the
//!   epoch;
//! - a timer for each request's deadline and each grant's lease: a wheel
//!   of millisecond slots, pushed to once each, cancelled lazily (an
//!   expired entry is looked up once);
//! - the protocol's whole `LOCKED`: `fence`, `key`, `object_name`, `tag`
//!   and `timeout_date`.
//!
//! It reads as the agent does (`Conn::fill_from`: no read only to hear
//! EAGAIN, which `owner` makes), and writes as `owner` does. No epochs
//! change, nothing fails over, nothing is written to disk, waiters are
//! never queued (the workloads it runs on have none), no error is
//! answered: a line that fails a check is dropped. A lease longer than
//! the wheel (65 s) would need a second level; the runs' are 30 s.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SLOTS: usize = 1 << 16; // 65.5 s of 1 ms slots: a lease of up to 60 s fits
const MAX_DURATION: f64 = 7.0 * 86_400.0;

/// The checked fields of a `LOCK` or `UNLOCK` line.
pub(crate) struct Request<'a> {
    pub object: &'a [u8],
    pub tag: &'a [u8],
    pub pid: u64,
    /// `LOCK`: the lease and the deadline, seconds from now.
    pub lease: f64,
    pub wait: f64,
}

/// Reads every parameter of a request line (after `COMMAND `). `None`
/// when one fails its check.
pub(crate) fn read(params: &[u8], now_wall: f64, lock: bool) -> Option<Request<'_>> {
    let mut r = Request {
        object: b"",
        tag: b"",
        pid: 0,
        lease: 60.0,
        wait: 5.0,
    };
    for kv in params.split(|&b| b == b';') {
        let eq = kv.iter().position(|&b| b == b'=')?;
        let (name, value) = (&kv[..eq], &kv[eq + 1..]);
        match name {
            b"object_name" => r.object = value,
            b"tag" => {
                std::str::from_utf8(value).ok()?.parse::<i64>().ok()?;
                r.tag = value;
            }
            b"pid" => r.pid = std::str::from_utf8(value).ok()?.parse().ok()?,
            b"duration" if lock => {
                r.lease = std::str::from_utf8(value).ok()?.parse().ok()?;
                if !(1.0..=MAX_DURATION).contains(&r.lease) {
                    return None;
                }
            }
            b"timeout" if lock => {
                let at: f64 = std::str::from_utf8(value).ok()?.parse().ok()?;
                r.wait = at - now_wall;
                if r.wait <= 0.0 {
                    return None;
                }
            }
            _ => {}
        }
    }
    (!r.object.is_empty() && r.object.len() <= 4096).then_some(r)
}

/// FNV-1a of a name: its digest on the wire, and its owner (`% n`).
pub(crate) fn digest(name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// What the owner knows of a name it orders.
#[derive(Default)]
struct Owned {
    last_fence: u64,
    /// (home, request) of the grant held or being voted on.
    grant: Option<(usize, u64)>,
}

pub(crate) struct Strict {
    key_prefix: Vec<u8>,
    /// Home: this process's requests by name, each (key, request).
    home: HashMap<Vec<u8>, Vec<(Vec<u8>, u64)>>,
    /// Home: the key and lease of each of its requests.
    reqs: HashMap<u64, (Vec<u8>, Duration)>,
    owned: HashMap<u64, Owned>,
    /// Follower: the vote per name digest: (home, request, fence).
    votes: HashMap<u64, (usize, u64, u64)>,
    wheel: Vec<Vec<u64>>,
    start: Instant,
    /// The next slot to expire.
    next_slot: u64,
    now: Instant,
    pub wall: f64,
    /// Deadlines and leases that ran out (an agent would answer them;
    /// the runs have none).
    expired: u64,
}

impl Strict {
    pub(crate) fn new(me: usize) -> Strict {
        let now = Instant::now();
        Strict {
            key_prefix: format!("f{me}/").into_bytes(),
            home: HashMap::new(),
            reqs: HashMap::new(),
            owned: HashMap::new(),
            votes: HashMap::new(),
            wheel: vec![Vec::new(); SLOTS],
            start: now,
            next_slot: 0,
            now,
            wall: 0.0,
            expired: 0,
        }
    }

    /// Reads the clocks, once an iteration, and expires the timers due:
    /// an entry whose request is gone (released, granted) is dropped.
    pub(crate) fn tick(&mut self) {
        self.now = Instant::now();
        self.wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let due = self.now.duration_since(self.start).as_millis() as u64;
        while self.next_slot <= due {
            let slot = &mut self.wheel[(self.next_slot as usize) % SLOTS];
            for req in slot.drain(..) {
                if self.reqs.contains_key(&req) {
                    self.expired += 1;
                }
            }
            self.next_slot += 1;
        }
    }

    fn arm(&mut self, after: Duration, req: u64) {
        let at = (self.now + after).duration_since(self.start).as_millis() as u64;
        self.wheel[(at.max(self.next_slot) as usize) % SLOTS].push(req);
    }

    /// Home, a `LOCK` checked: its key, refused when taken on the name;
    /// the deadline armed.
    pub(crate) fn submit(&mut self, r: &Request<'_>, req: u64) -> bool {
        let mut key = self.key_prefix.clone();
        key.extend_from_slice(r.pid.to_string().as_bytes());
        let on_name = self.home.entry(r.object.to_vec()).or_default();
        if on_name.iter().any(|(k, _)| *k == key) {
            return false;
        }
        on_name.push((key.clone(), req));
        self.reqs
            .insert(req, (key, Duration::from_secs_f64(r.lease)));
        self.arm(Duration::from_secs_f64(r.wait), req);
        true
    }

    /// Home, the request an `UNLOCK` of `object` by `pid` releases.
    pub(crate) fn release(&mut self, object: &[u8], pid: u64) -> Option<u64> {
        let mut key = self.key_prefix.clone();
        key.extend_from_slice(pid.to_string().as_bytes());
        let on_name = self.home.get_mut(object)?;
        let at = on_name.iter().position(|(k, _)| *k == key)?;
        let (_, req) = on_name.swap_remove(at);
        if on_name.is_empty() {
            self.home.remove(object);
        }
        self.reqs.remove(&req);
        Some(req)
    }

    /// Home, a grant: the lease armed, and what `LOCKED` says beyond the
    /// fence, name and tag: `key=K;` and `;timeout_date=T`.
    pub(crate) fn granted(&mut self, req: u64, out: &mut Vec<u8>) -> Option<f64> {
        let (key, lease) = self.reqs.get(&req).cloned()?;
        self.arm(lease, req);
        out.extend_from_slice(b"key=");
        out.extend_from_slice(&key);
        out.push(b';');
        Some(self.wall + lease.as_secs_f64())
    }

    /// Owner: a request for `name` from `home`; its fence, or `None` when
    /// the name is taken (no workload of it has one).
    pub(crate) fn order(&mut self, name: u64, home: usize, req: u64) -> Option<u64> {
        let o = self.owned.entry(name).or_default();
        if o.grant.is_some() {
            return None;
        }
        o.last_fence += 1;
        o.grant = Some((home, req));
        Some(o.last_fence)
    }

    /// Owner: the release of `req` on `name`.
    pub(crate) fn unorder(&mut self, name: u64, home: usize, req: u64) {
        if let Some(o) = self
            .owned
            .get_mut(&name)
            .filter(|o| o.grant == Some((home, req)))
        {
            o.grant = None;
        }
    }

    /// Follower: its vote for `req` of `home` on `name` at `fence`,
    /// unless it holds one for another grant of that name.
    pub(crate) fn vote(&mut self, name: u64, home: usize, req: u64, fence: u64) -> bool {
        match self.votes.get(&name) {
            Some(&(h, r, _)) if (h, r) != (home, req) => false,
            _ => {
                self.votes.insert(name, (home, req, fence));
                true
            }
        }
    }

    /// Follower: the vote for `req` of `home` on `name` dropped.
    pub(crate) fn unvote(&mut self, name: u64, home: usize, req: u64) {
        if self
            .votes
            .get(&name)
            .is_some_and(|&(h, r, _)| (h, r) == (home, req))
        {
            self.votes.remove(&name);
        }
    }
}
