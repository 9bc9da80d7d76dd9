//! Client requests, decoded and checked from a [`Message`](crate::wire::Message)
//! or a line read in place ([`Fields`]) (snaplock(7),
//! REQUESTS).
//!
//! Decoding never fails silently: every bad parameter gives a
//! [`Refusal`] that names it, which the core sends back as
//! `LOCKFAILED error=invalid;description=...`.

use std::time::Duration;

use crate::time::{Now, UnixTime, parse_duration};
use crate::vocab::{Kind, Mode, NameCache, ObjectName, Policy, Refusal, parse_i64, parse_u64};
use crate::wire::Fields;

pub use crate::vocab::MAX_OBJECT_NAME;
/// Longest lease (`duration`), unlock grace and quiet period: 7 days.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 86_400);
/// Shortest lease (`duration`).
pub const MIN_DURATION: Duration = Duration::from_secs(1);
/// Latest obtention deadline accepted, from now: 7 days.
pub const MAX_WAIT: Duration = MAX_DURATION;
/// Largest `limit` of a shared or counted request.
pub const MAX_LIMIT: u32 = 1_000_000;

/// What every request about an object carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The object, exactly as sent.
    pub object: ObjectName,
    /// `pid=`, when given.
    pub pid: Option<u64>,
    /// `tag=`, echoed in the replies.
    pub tag: Option<i64>,
}

/// A decoded `LOCK`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockRequest {
    /// Object, pid and tag.
    pub target: Target,
    /// Absolute obtention deadline, as a wall-clock date.
    pub deadline: UnixTime,
    /// Lease once granted.
    pub duration: Duration,
    /// How much longer it stays held after the lease ends without UNLOCK.
    pub unlock_duration: Duration,
    /// Mode, limit and policy.
    pub kind: Kind,
    /// `try=true`: never wait.
    pub try_once: bool,
    /// `detach=true`: survives the connection.
    pub detach: bool,
    /// `progress=true`: told `LOCKWAITING` while it waits.
    pub progress: bool,
    /// `owner=cgroup`: kept until the client's cgroup has no process left.
    pub owner_unit: bool,
}

/// Reads the parts every object request has. On failure, returns the
/// refusal together with whatever of the target could be read, so the reply
/// still carries `object_name` and `tag`.
pub fn decode_target(
    msg: &impl Fields,
    names: &mut NameCache,
) -> Result<Target, (Refusal, Target)> {
    let mut target = Target {
        object: names.name(msg.get("object_name").unwrap_or_default()),
        pid: None,
        tag: None,
    };
    if let Some(tag) = msg.get("tag") {
        match parse_i64(tag) {
            Some(t) => target.tag = Some(t),
            None => return Err((Refusal::invalid("tag must be an integer"), target)),
        }
    }
    if target.object.is_empty() {
        return Err((
            Refusal::invalid("object_name is required and must not be empty"),
            target,
        ));
    }
    if target.object[0] == crate::vocab::VAR_OBJECT {
        return Err((
            Refusal::invalid("object_name must not start with a NUL byte"),
            target,
        ));
    }
    if target.object.len() > MAX_OBJECT_NAME {
        target.object = ObjectName::new(&target.object[..64]);
        return Err((
            Refusal::invalid(format!(
                "object_name is longer than {MAX_OBJECT_NAME} bytes"
            )),
            target,
        ));
    }
    if let Some(pid) = msg.get("pid") {
        match parse_u64(pid) {
            Some(p) if p >= 1 && p <= i64::MAX as u64 => target.pid = Some(p),
            _ => return Err((Refusal::invalid("pid must be a positive integer"), target)),
        }
    }
    Ok(target)
}

/// Decodes a `LOCK`; `defaults` gives the values of absent parameters.
pub fn decode_lock(
    msg: &impl Fields,
    now: Now,
    defaults: &Defaults,
    names: &mut NameCache,
) -> Result<LockRequest, (Refusal, Target)> {
    let target = decode_target(msg, names)?;
    let fail = |r: Refusal, t: &Target| Err((r, t.clone()));
    let deadline = match msg.get("timeout") {
        None => now.wall.plus(defaults.timeout),
        Some(v) => match UnixTime::from_wire(v) {
            Some(d) => d,
            None => {
                return fail(
                    Refusal::invalid("timeout must be a date in Unix seconds"),
                    &target,
                );
            }
        },
    };
    if deadline.micros_since(now.wall) > MAX_WAIT.as_micros() as i128 {
        return fail(
            Refusal::invalid("timeout is more than 7 days away"),
            &target,
        );
    }
    let duration = match duration_param(msg, "duration", defaults.duration) {
        Ok(d) if (MIN_DURATION..=MAX_DURATION).contains(&d) => d,
        Ok(_) | Err(()) => {
            return fail(
                Refusal::invalid("duration must be from 1 to 604800 seconds"),
                &target,
            );
        }
    };
    let unlock_duration = match duration_param(msg, "unlock_duration", defaults.unlock_duration) {
        Ok(d) if d <= MAX_DURATION => d,
        Ok(_) | Err(()) => {
            return fail(
                Refusal::invalid("unlock_duration must be from 0 to 604800 seconds"),
                &target,
            );
        }
    };
    let mode = match msg.get("mode") {
        None | Some(b"exclusive") => Mode::Exclusive,
        Some(b"shared") => Mode::Shared,
        Some(b"counted") => Mode::Counted,
        Some(_) => {
            return fail(
                Refusal::invalid("mode must be exclusive, shared or counted"),
                &target,
            );
        }
    };
    let limit = match msg.get("limit") {
        None => None,
        Some(v) => match parse_u64(v) {
            Some(n) if n >= 1 && n <= u64::from(MAX_LIMIT) => Some(n as u32),
            _ => return fail(Refusal::invalid("limit must be from 1 to 1000000"), &target),
        },
    };
    if limit.is_some() && mode == Mode::Exclusive {
        return fail(
            Refusal::invalid("limit applies to mode=shared or mode=counted only"),
            &target,
        );
    }
    if limit.is_none() && mode == Mode::Counted {
        return fail(Refusal::invalid("mode=counted needs limit"), &target);
    }
    let quiet = match duration_param(msg, "quiet", Duration::ZERO) {
        Ok(d) if d <= MAX_DURATION => d,
        Ok(_) | Err(()) => {
            return fail(
                Refusal::invalid("quiet must be from 0 to 604800 seconds"),
                &target,
            );
        }
    };
    let policy = match msg.get("policy") {
        None | Some(b"hard") => Policy::Hard,
        Some(b"soft") => Policy::Soft,
        Some(b"timed") => Policy::Timed { quiet },
        Some(_) => {
            return fail(
                Refusal::invalid("policy must be hard, soft or timed"),
                &target,
            );
        }
    };
    if msg.get("quiet").is_some() && !matches!(policy, Policy::Timed { .. }) {
        return fail(
            Refusal::invalid("quiet applies to policy=timed only"),
            &target,
        );
    }
    if policy != Policy::Hard && mode.is_shared() {
        return fail(
            Refusal::invalid("policy applies to mode=exclusive only"),
            &target,
        );
    }
    let try_once = match bool_param(msg, "try") {
        Ok(b) => b,
        Err(()) => return fail(Refusal::invalid("try must be true or false"), &target),
    };
    let detach = match bool_param(msg, "detach") {
        Ok(b) => b,
        Err(()) => return fail(Refusal::invalid("detach must be true or false"), &target),
    };
    let progress = match bool_param(msg, "progress") {
        Ok(b) => b,
        Err(()) => return fail(Refusal::invalid("progress must be true or false"), &target),
    };
    let owner_unit = match msg.get("owner") {
        None | Some(b"connection") => false,
        Some(b"cgroup") => true,
        Some(_) => {
            return fail(
                Refusal::invalid("owner must be connection or cgroup"),
                &target,
            );
        }
    };
    if owner_unit && detach {
        return fail(
            Refusal::invalid("owner=cgroup and detach=true exclude each other"),
            &target,
        );
    }
    Ok(LockRequest {
        target,
        deadline,
        duration,
        unlock_duration,
        kind: Kind {
            mode,
            limit,
            policy,
        },
        try_once,
        detach,
        progress,
        owner_unit,
    })
}

/// Decodes an `EXTEND`: the target and the new lease length.
pub fn decode_extend(
    msg: &impl Fields,
    names: &mut NameCache,
) -> Result<(Target, Duration), (Refusal, Target)> {
    let target = decode_target(msg, names)?;
    match msg
        .get("duration")
        .map(|v| parse_duration(v, MAX_DURATION.as_secs()))
    {
        Some(Some(d)) if (MIN_DURATION..=MAX_DURATION).contains(&d) => Ok((target, d)),
        None => Err((Refusal::invalid("EXTEND needs duration"), target)),
        Some(_) => Err((
            Refusal::invalid("duration must be from 1 to 604800 seconds"),
            target,
        )),
    }
}

/// Values of absent `LOCK` parameters (snaplock(7), LOCK).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Defaults {
    /// Obtention deadline from now: 5 s.
    pub timeout: Duration,
    /// Lease: 60 s.
    pub duration: Duration,
    /// Held this much after the lease ends unless UNLOCK: 60 s.
    pub unlock_duration: Duration,
}

impl Default for Defaults {
    fn default() -> Defaults {
        Defaults {
            timeout: Duration::from_secs(5),
            duration: Duration::from_secs(60),
            unlock_duration: Duration::from_secs(60),
        }
    }
}

fn duration_param(msg: &impl Fields, name: &str, default: Duration) -> Result<Duration, ()> {
    match msg.get(name) {
        None => Ok(default),
        // One more than the maximum still parses, so "too long" is told
        // apart from "not a number" by the range check of the caller.
        Some(v) => parse_duration(v, MAX_DURATION.as_secs() + 1).ok_or(()),
    }
}

fn bool_param(msg: &impl Fields, name: &str) -> Result<bool, ()> {
    match msg.get(name) {
        None | Some(b"false") => Ok(false),
        Some(b"true") => Ok(true),
        Some(_) => Err(()),
    }
}
