//! Requests as messages, and replies as typed results (snaplock(7)).

use std::time::Duration;

use snaplock_proto::UnixTime;
use snaplock_proto::local::trust::fraction_to_wire;
use snaplock_proto::time::duration_to_wire;
use snaplock_proto::wire::Message;

use crate::Error;

pub use snaplock_proto::vocab::{Mode, Policy};

/// The parameters of a `LOCK`; `None` leaves the agent's default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockOptions {
    /// How long to wait for the lock (sent as the absolute `timeout=` date,
    /// computed from the wall clock); the agent's default is 5 s.
    pub wait: Option<Duration>,
    /// The lease once granted (`duration=`); the agent's default is 60 s.
    pub duration: Option<Duration>,
    /// How long the lock stays held after the lease ends without `UNLOCK`
    /// (`unlock_duration=`); the agent's default is 60 s.
    pub unlock_duration: Option<Duration>,
    /// Exclusive, shared or counted.
    pub mode: Mode,
    /// For a shared lock: at most this many holders, this request included.
    /// For a counted lock (required): granted while fewer than this many
    /// hold the object.
    pub limit: Option<u32>,
    /// For an exclusive lock: the write policy.
    pub policy: Option<Policy>,
    /// Never wait: `Refused { error: "busy" }` when taken (`try=true`).
    pub try_once: bool,
    /// The lock outlives this connection (`detach=true`); it then ends by
    /// `UNLOCK` with the same `pid`, or at expiry.
    pub detach: bool,
    /// The lock is owned by this process's cgroup (`owner=cgroup`): once
    /// held, it outlives this connection until the cgroup (a systemd unit
    /// or scope) has no process left, or its lease ends. Refused
    /// (`error=invalid`) where the agent cannot see cgroup v2 and with
    /// [`detach`](Self::detach).
    pub owner_cgroup: bool,
    /// The requester's id; the lock's key is `<server_name>/<pid>`.
    pub pid: Option<u64>,
    /// The agent tells the request's place in line while it waits
    /// (`progress=true`, `LOCKWAITING`); see [`crate::Client::lock_with_progress`].
    pub progress: bool,
    /// The agent must have run at least this long (`min_uptime=`), or the
    /// request is `Refused { error: "untrusted" }`.
    pub min_uptime: Option<Duration>,
    /// The agent's trust must be at least this many millionths
    /// (`min_trust=`; 1_000_000 is 1), or the request is
    /// `Refused { error: "untrusted" }`.
    pub min_trust: Option<u32>,
}

/// Waited for a `LOCK` reply when [`LockOptions::wait`] is not given: the
/// agent's default obtention wait.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(5);

impl LockOptions {
    /// The `LOCK` message for `object`, tagged `tag`; `now` is the wall
    /// clock, for the absolute `timeout=` date.
    pub fn to_message(&self, object: &[u8], tag: i64, now: UnixTime) -> Message {
        let mut msg = Message::new("LOCK").with("object_name", object);
        msg.set("tag", tag.to_string());
        if let Some(wait) = self.wait {
            msg.set("timeout", now.plus(wait).to_wire());
        }
        if let Some(d) = self.duration {
            msg.set("duration", duration_to_wire(d));
        }
        if let Some(d) = self.unlock_duration {
            msg.set("unlock_duration", duration_to_wire(d));
        }
        if self.mode != Mode::Exclusive {
            msg.set("mode", self.mode.as_str());
        }
        if let Some(limit) = self.limit {
            msg.set_u64("limit", u64::from(limit));
        }
        match self.policy {
            None => {}
            Some(Policy::Hard) => msg.set("policy", "hard"),
            Some(Policy::Soft) => msg.set("policy", "soft"),
            Some(Policy::Timed { quiet }) => {
                msg.set("policy", "timed");
                msg.set("quiet", duration_to_wire(quiet));
            }
        }
        if self.try_once {
            msg.set("try", "true");
        }
        if self.detach {
            msg.set("detach", "true");
        }
        if self.progress {
            msg.set("progress", "true");
        }
        if self.owner_cgroup {
            msg.set("owner", "cgroup");
        }
        if let Some(pid) = self.pid {
            msg.set_u64("pid", pid);
        }
        if let Some(d) = self.min_uptime {
            msg.set("min_uptime", duration_to_wire(d));
        }
        if let Some(t) = self.min_trust {
            msg.set("min_trust", fraction_to_wire(t));
        }
        msg
    }
}

/// `EXTEND object_name=O;duration=D;tag=G[;pid=P]`.
pub fn extend_message(object: &[u8], duration: Duration, tag: i64, pid: Option<u64>) -> Message {
    let mut msg = Message::new("EXTEND").with("object_name", object);
    msg.set("duration", duration_to_wire(duration));
    msg.set("tag", tag.to_string());
    if let Some(pid) = pid {
        msg.set_u64("pid", pid);
    }
    msg
}

/// `UNLOCK object_name=O;tag=G[;pid=P]`.
pub fn unlock_message(object: &[u8], tag: i64, pid: Option<u64>) -> Message {
    let mut msg = Message::new("UNLOCK").with("object_name", object);
    msg.set("tag", tag.to_string());
    if let Some(pid) = pid {
        msg.set_u64("pid", pid);
    }
    msg
}

/// A waiting request's place in line: what `LOCKWAITING` says
/// (snaplock(7)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// The object, as the agent echoed it.
    pub object: Vec<u8>,
    /// 1: next in line.
    pub position: u64,
    /// Why nothing can be granted now (`lock-delay`, `no-quorum`, ...);
    /// none while it waits for the holders and the requests ahead.
    pub reason: Option<String>,
    /// With `reason=lock-delay`: when the lock-delay ends.
    pub until: Option<UnixTime>,
}

impl Waiting {
    /// Reads a `LOCKWAITING`; a missing or malformed parameter is
    /// [`Error::Protocol`].
    pub fn from_message(msg: &Message) -> Result<Waiting, Error> {
        let bad =
            |what: &str| Error::Protocol(format!("LOCKWAITING without a valid {what}: {msg}"));
        if msg.command != "LOCKWAITING" {
            return Err(unexpected(msg));
        }
        let object = msg
            .get("object_name")
            .ok_or_else(|| bad("object_name"))?
            .to_vec();
        let position = msg
            .get_str("position")
            .and_then(|p| p.parse::<u64>().ok())
            .filter(|p| *p > 0)
            .ok_or_else(|| bad("position"))?;
        let until = match msg.get("until") {
            None => None,
            Some(v) => Some(UnixTime::from_wire(v).ok_or_else(|| bad("until"))?),
        };
        Ok(Waiting {
            object,
            position,
            reason: msg.get_str("reason").map(str::to_owned),
            until,
        })
    }
}

/// A granted lock: what `LOCKED` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The object, as the agent echoed it.
    pub object: Vec<u8>,
    /// The ticket key, `<server_name>/<pid>`.
    pub key: String,
    /// The fencing token: strictly increases for every grant of the object.
    pub fence: u64,
    /// When the lease ends (the agent sends `UNLOCKED error=timedout` then).
    pub timeout_date: UnixTime,
    /// The tag of the request this answers (`LOCK` or `EXTEND`). Later
    /// `UNLOCKED error=...` notices carry the tag of the `LOCK`.
    pub tag: Option<i64>,
}

impl Grant {
    /// Reads the reply to a `LOCK` or `EXTEND`: `LOCKED` is a grant,
    /// `LOCKFAILED` is [`Error::Refused`], `UNLOCKED error=E` is
    /// [`Error::Lost`], anything else (or a `LOCKED` with a missing or
    /// malformed parameter) is [`Error::Protocol`].
    pub fn from_reply(msg: &Message) -> Result<Grant, Error> {
        match msg.command.as_str() {
            "LOCKED" => {
                let bad =
                    |what: &str| Error::Protocol(format!("LOCKED without a valid {what}: {msg}"));
                let object = msg
                    .get("object_name")
                    .ok_or_else(|| bad("object_name"))?
                    .to_vec();
                let key = msg.get_str("key").ok_or_else(|| bad("key"))?.to_owned();
                let fence = msg
                    .get_str("fence")
                    .and_then(|f| f.parse::<u64>().ok())
                    .ok_or_else(|| bad("fence"))?;
                let timeout_date = msg
                    .get("timeout_date")
                    .and_then(UnixTime::from_wire)
                    .ok_or_else(|| bad("timeout_date"))?;
                Ok(Grant {
                    object,
                    key,
                    fence,
                    timeout_date,
                    tag: tag_of(msg),
                })
            }
            "LOCKFAILED" => Err(refusal(msg)),
            "UNLOCKED" => match msg.get_str("error") {
                Some(error) => Err(Error::Lost {
                    error: error.to_owned(),
                }),
                None => Err(Error::Protocol(format!("the request was cancelled: {msg}"))),
            },
            _ => Err(unexpected(msg)),
        }
    }
}

/// The `tag=` of a message, when it has a valid one.
pub fn tag_of(msg: &Message) -> Option<i64> {
    msg.get_str("tag").and_then(|t| t.parse().ok())
}

/// `LOCKFAILED` as [`Error::Refused`].
pub(crate) fn refusal(msg: &Message) -> Error {
    Error::Refused {
        error: msg.get_str("error").unwrap_or("unknown").to_owned(),
        description: String::from_utf8_lossy(msg.get("description").unwrap_or_default())
            .into_owned(),
    }
}

/// A reply of a kind the request does not have.
pub(crate) fn unexpected(msg: &Message) -> Error {
    let mut line = msg.to_string();
    if line.ends_with('\n') {
        line.pop();
    }
    if line.len() > 300 {
        let mut cut = 300;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push_str("...");
    }
    Error::Protocol(format!("unexpected reply: {line}"))
}
