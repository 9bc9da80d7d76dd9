//! The snapcommunicator compatibility session: what the original snaplock's
//! clients (`snap::snap_lock`, `snaplock --list`) say to the local
//! snapcommunicator, translated to and from the requests of snaplock(7).
//!
//! A connection to `communicator_listen` is an ordinary client connection
//! of the core; only its lines are translated, here, at the edge. So its
//! locks are the same locks as the Unix socket's, with the same fences,
//! the same cluster and the same release when the connection closes.
//!
//! ```text
//!               REGISTER service=S;version=1 / HELP, READY
//!   Connected ───────────────────────────────────────────▶ Registered(S)
//!      │ anything else: INVALID                              │ snaplock/LOCK, UNLOCK, LISTTICKETS, ALIVE...
//!      │                                                     │   to the core; its replies come back as
//!      │                                                     │   <SERVER:snaplock SERVER:S/REPLY ...
//!      │                                                     │ UNREGISTER, STOP, QUITTING
//!      ▼                                                     ▼
//!   (closed by the client)                                 Ended: replies flushed, connection closed
//! ```
//!
//! What the original did and this keeps (snaplock reference §2, §5.1, §10):
//! `HELP` then `READY` after `REGISTER`; the client's `COMMANDS`, `UNKNOWN`,
//! `ABSOLUTELY`, `LOG` and `READY` are taken without an answer; replies are
//! stamped `<SERVER:snaplock ` and addressed to `SERVER:S/`; `LOCK` needs
//! `pid` and `duration`; `timeout` is an absolute date in Unix seconds
//! (default now + 5 s), and a past one fails with `error=timedout` before
//! anything else is checked; `duration` under 3 s or `unlock_duration`
//! under 60 s fail with `error=invalid`; a lock lasts at least 60 s and at
//! most 7 days (the original's clamp), and without `unlock_duration` its
//! grace equals its duration; dates in replies are integer seconds.
//!
//! What it does not keep: a client cannot stop the agent (`STOP` and
//! `QUITTING` end that client's session only); nothing is relayed to other
//! services or computers (a clear `INVALID` says so); closing the
//! connection releases its locks, where the original kept them until
//! they expired.

use snaplock_proto::UnixTime;
use snaplock_proto::vocab::{parse_i64, parse_u64};
use snaplock_proto::wire::{Message, encode_to_vec, is_valid_name};

/// The service the original daemon registered as: the one clients address.
pub const SERVICE: &str = "snaplock";
/// snapcommunicator's own service name.
const COMMUNICATOR: &str = "snapcommunicator";
/// The protocol version `REGISTER` must carry (snap_communicator::VERSION).
pub const VERSION: &str = "1";
/// The shortest `duration` the original accepted (SNAP_LOCK_MINIMUM_TIMEOUT).
pub const MIN_DURATION: i64 = 3;
/// The shortest lock and unlock grace the original gave
/// (SNAP_UNLOCK_MINIMUM_TIMEOUT): shorter durations are raised to it.
pub const MIN_UNLOCK_DURATION: i64 = 60;
/// The longest lock and grace (SNAP_MAXIMUM_TIMEOUT, 7 days).
pub const MAX_DURATION: i64 = 7 * 86_400;
/// Bytes of a refused message echoed back in `INVALID message=`.
const ECHO: usize = 256;

/// What to do with one line the client sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Hand this request to the core; its replies go through
    /// [`Session::outbound`].
    Core(Message),
    /// Send these lines back as they are; the core sees nothing.
    Answer(Vec<Message>),
    /// Nothing to do (the original took these without an answer).
    Ignore,
    /// The client leaves: flush what it is owed, then close.
    End,
}

/// One connection's side of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    server_name: String,
    /// The service the client registered as, once it did.
    service: Option<String>,
}

impl Session {
    /// A session on the agent named `server_name`, not registered yet.
    pub fn new(server_name: &str) -> Session {
        Session {
            server_name: server_name.to_owned(),
            service: None,
        }
    }

    /// The service the client registered as.
    pub fn service(&self) -> Option<&str> {
        self.service.as_deref()
    }

    /// What to do with a message the client sent; `now` is the wall clock,
    /// for the original's first check of a `LOCK` (a past `timeout`).
    pub fn inbound(&mut self, mut msg: Message, now: UnixTime) -> Step {
        // snapcommunicator stamps every message of a registered client
        // with its own idea of the sender: what the client wrote is dropped.
        msg.sent_from_server.clear();
        msg.sent_from_service.clear();
        match msg.command.as_str() {
            // Taken without an answer, as the original did: the client's
            // command list, its answers to what it did not understand or
            // to an ALIVE, and what only snapcommunicator sends.
            "COMMANDS" | "UNKNOWN" | "ABSOLUTELY" | "LOG" | "READY" => return Step::Ignore,
            // A client never stops the agent: it leaves.
            "UNREGISTER" | "STOP" | "QUITTING" => return Step::End,
            "REGISTER" => return self.register(&msg),
            _ => {}
        }
        let Some(service) = self.service.clone() else {
            return self.invalid(
                &msg,
                "register first: REGISTER service=NAME;version=1 (snapcommunicator session)",
            );
        };
        if !msg.server.is_empty() && msg.server != "." && msg.server != self.server_name {
            let why = format!(
                "this agent is {}: nothing is relayed to {}",
                self.server_name, msg.server
            );
            return self.invalid(&msg, &why);
        }
        match msg.service.as_str() {
            "" | SERVICE => {}
            COMMUNICATOR => {
                // snapcommunicator's own commands, which this agent does
                // not have: its answer to an unknown one.
                let reply = Message::new("UNKNOWN").with("command", &msg.command);
                return Step::Answer(vec![self.communicator_says(reply, &service)]);
            }
            other => {
                let why = format!(
                    "only the {SERVICE} service is served here: nothing is relayed to {other}"
                );
                return self.invalid(&msg, &why);
            }
        }
        msg.server.clear();
        msg.service.clear();
        match msg.command.as_str() {
            "LOCK" => self.lock(msg, now),
            "UNLOCK" => {
                strip_internal(&mut msg);
                Step::Core(msg)
            }
            _ => Step::Core(msg),
        }
    }

    /// A reply of the core, as the original daemon's reply reached its
    /// client through snapcommunicator: `<SERVER:snaplock SERVER:S/REPLY`,
    /// dates in integer seconds.
    pub fn outbound(&self, msg: &Message) -> Message {
        let mut out = msg.clone();
        for name in ["timeout_date", "reply_timestamp", "until"] {
            if let Some(secs) = out
                .get(name)
                .and_then(UnixTime::from_wire)
                .map(|t| t.0 / 1_000_000)
            {
                out.set_u64(name, secs);
            }
        }
        if let Some(service) = &self.service {
            out.sent_from_server.clone_from(&self.server_name);
            out.sent_from_service = SERVICE.to_owned();
            out.server.clone_from(&self.server_name);
            out.service.clone_from(service);
        }
        out
    }

    /// What snapcommunicator sends a registered client when it stops.
    pub fn stop_message(&self) -> Option<Message> {
        self.service.as_ref().map(|_| Message::new("STOP"))
    }

    fn register(&mut self, msg: &Message) -> Step {
        if let Some(service) = &self.service {
            let why = format!("already registered as {service}");
            return self.invalid(msg, &why);
        }
        let service = msg.get("service").unwrap_or_default();
        if !is_valid_name(service) {
            return self.invalid(
                msg,
                "service must be 1 to 64 ASCII letters, digits or '_', not starting with a digit",
            );
        }
        if msg.get("version") != Some(VERSION.as_bytes()) {
            return self.invalid(msg, "version must be 1");
        }
        self.service = Some(String::from_utf8_lossy(service).into_owned());
        // As snapcommunicator answers: its HELP first, then READY.
        Step::Answer(vec![Message::new("HELP"), Message::new("READY")])
    }

    /// The original's checks of a LOCK, in its order, and its meaning of
    /// `duration` and `unlock_duration` written as the core reads them.
    fn lock(&self, mut msg: Message, now: UnixTime) -> Step {
        strip_internal(&mut msg);
        // Locks of this session end with its connection, as its client
        // expects: there is no uid to guard a detached one with.
        msg.remove("detach");
        let pid = match msg.get("pid").and_then(parse_u64) {
            Some(p) if (1..=i64::MAX as u64).contains(&p) => p,
            _ => return self.refuse(&msg, None, "pid is required and must be a positive integer"),
        };
        let key = format!("{}/{pid}", self.server_name);
        if let Some(deadline) = msg.get("timeout").and_then(UnixTime::from_wire) {
            if deadline <= now {
                return self.refuse_with(
                    &msg,
                    Some(&key),
                    "timedout",
                    "the timeout is already past",
                );
            }
        }
        let duration = match msg.get("duration").and_then(parse_i64) {
            Some(d) if d >= MIN_DURATION => d.clamp(MIN_UNLOCK_DURATION, MAX_DURATION),
            Some(_) => {
                return self.refuse(&msg, Some(&key), "duration must be at least 3 seconds");
            }
            None => {
                return self.refuse(
                    &msg,
                    Some(&key),
                    "duration is required and must be an integer number of seconds",
                );
            }
        };
        let unlock_duration = match msg.get("unlock_duration") {
            None => duration,
            Some(v) => match parse_i64(v) {
                Some(u) if u >= MIN_UNLOCK_DURATION => u.min(MAX_DURATION),
                _ => {
                    return self.refuse(
                        &msg,
                        Some(&key),
                        "unlock_duration must be an integer of at least 60 seconds",
                    );
                }
            },
        };
        // Both are clamped to [60, 604800]: positive.
        msg.set_u64("duration", duration.unsigned_abs());
        msg.set_u64("unlock_duration", unlock_duration.unsigned_abs());
        Step::Core(msg)
    }

    fn refuse(&self, msg: &Message, key: Option<&str>, why: &str) -> Step {
        self.refuse_with(msg, key, "invalid", why)
    }

    /// `LOCKFAILED` as the core words it, addressed like its replies.
    fn refuse_with(&self, msg: &Message, key: Option<&str>, error: &str, why: &str) -> Step {
        let mut reply = Message::new("LOCKFAILED")
            .with("object_name", msg.get("object_name").unwrap_or_default())
            .with("error", error)
            .with("description", why);
        if let Some(key) = key {
            reply.set("key", key);
        }
        if let Some(tag) = msg.get("tag") {
            reply.set("tag", tag);
        }
        Step::Answer(vec![self.outbound(&reply)])
    }

    /// `INVALID`, as snaplock(7) words it, about a message this session
    /// refuses.
    fn invalid(&self, msg: &Message, why: &str) -> Step {
        let line = encode_to_vec(msg);
        let line = line.strip_suffix(b"\n").unwrap_or(&line);
        let reply = Message::new("INVALID")
            .with("command", &msg.command)
            .with("message", &line[..line.len().min(ECHO)])
            .with("reason", why);
        let reply = match &self.service {
            Some(service) => self.communicator_says(reply, service),
            None => reply,
        };
        Step::Answer(vec![reply])
    }

    /// A message of snapcommunicator itself to the client: no sender, the
    /// client's address.
    fn communicator_says(&self, mut msg: Message, service: &str) -> Message {
        msg.server.clone_from(&self.server_name);
        msg.service = service.to_owned();
        msg
    }
}

/// The parameters only snaplock daemons sent each other: a client's
/// would make the request about somebody else.
fn strip_internal(msg: &mut Message) {
    for name in [
        "serial",
        "lock_proxy_server_name",
        "lock_proxy_service_name",
    ] {
        msg.remove(name);
    }
}

#[cfg(test)]
mod tests;
