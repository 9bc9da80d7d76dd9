//! A small blocking client for the snaplock agent (`snaplockd`).
//!
//! One [`Client`] is one connection to the agent's Unix socket. Requests go
//! out as protocol lines (`snaplock(7)`); every request about a
//! lock carries a fresh `tag` from a per-connection counter, and the reply
//! is the message that echoes it. Whatever arrives while a reply is awaited
//! and is not that reply (typically `UNLOCKED error=timedout` about another
//! lock of this connection) is kept in order as an *event*, for
//! [`Client::next_event`] or [`Client::recv`].
//!
//! ```no_run
//! use std::time::Duration;
//! use snaplock_client::{Client, LockOptions, default_socket_path};
//!
//! let mut client = Client::connect(&default_socket_path(None))?;
//! let opts = LockOptions { wait: Some(Duration::from_secs(2)), ..LockOptions::default() };
//! let grant = client.lock(b"https://example.com/user/42", &opts)?;
//! println!("fence {}", grant.fence);
//! client.unlock(b"https://example.com/user/42")?;
//! # Ok::<(), snaplock_client::Error>(())
//! ```
//!
//! Closing the connection (dropping the client) releases every lock it
//! holds, except those taken with [`LockOptions::detach`].
//!
//! A caller that runs its own event loop polls [`AsFd::as_fd`] for
//! readability, but must first drain what is already buffered
//! ([`Client::has_buffered`]): a read may have brought several lines.

#![warn(missing_docs)]

pub mod clock;
mod error;
mod request;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::MsgFlags;
use snaplock_proto::paths::{RUN_DIR, SOCKET_ENV, SocketSources, resolve_socket};
use snaplock_proto::time::parse_duration;
use snaplock_proto::wire::{Frame, LineFramer, Message, encode_to_vec, parse};

pub use crate::error::Error;
pub use crate::request::{
    DEFAULT_WAIT, Grant, LockOptions, Mode, Policy, Waiting, extend_message, tag_of, unlock_message,
};
pub use snaplock_proto::UnixTime;
pub use snaplock_proto::wire;

/// Longest line accepted from the agent: a `TICKETLIST` of a busy agent is
/// one line, so this is far above the agent's own 64 KiB request limit.
pub const MAX_REPLY_LINE: usize = 16 << 20;

/// How long a request waits for its reply unless told otherwise
/// ([`Client::set_reply_timeout`]); a `LOCK` waits this much longer than
/// its own wait.
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(5);

const READ_CHUNK: usize = 64 << 10;

/// Default of [`Client::set_busy_poll`].
pub const DEFAULT_BUSY_POLL: Duration = Duration::ZERO;

/// The agent's socket path by the rule of snaplock(7), TRANSPORT: `explicit`; else
/// `$SNAPLOCK_SOCKET`; else `/run/snaplock/snaplock.sock` when that directory
/// exists; else `$XDG_RUNTIME_DIR/snaplock.sock`; else
/// `/tmp/snaplock-<uid>/snaplock.sock`.
pub fn default_socket_path(explicit: Option<&Path>) -> PathBuf {
    let env = |name: &str| std::env::var_os(name).map(PathBuf::from);
    resolve_socket(&SocketSources {
        explicit: explicit.map(Path::to_path_buf),
        env_socket: env(SOCKET_ENV),
        run_dir_exists: Path::new(RUN_DIR).is_dir(),
        xdg_runtime_dir: env("XDG_RUNTIME_DIR"),
        uid: nix::unistd::getuid().as_raw(),
    })
}

/// The longest `valid_for` read: far beyond any lease (7 days).
const VALID_FOR_MAX_SECS: u64 = 604_800;

/// A line from the agent, read but not yet handed out.
enum Incoming {
    Message(Message),
    /// A line that does not parse, or is too long: why, for [`Error::Protocol`].
    Malformed(String),
}

/// One connection to the agent. Blocking; not shared between threads.
pub struct Client {
    stream: UnixStream,
    framer: LineFramer,
    /// Parsed lines not yet looked at, in arrival order.
    inbox: VecDeque<Incoming>,
    /// Messages set aside while a reply to something else was awaited.
    /// They precede everything in `inbox`.
    events: VecDeque<Message>,
    /// The agent closed its end; `inbox` may still hold its last lines.
    closed: bool,
    next_tag: i64,
    /// The request waiting for its answer is `LOCKSTATUS`: only then is
    /// a `NOLOCK` or `LOCKREADY` an answer (the agent also sends them
    /// unasked, to a connection that asked once, when readiness changes).
    asked_status: bool,
    reply_timeout: Duration,
    /// How long to try non-blocking reads before sleeping in poll.
    busy_poll: Duration,
    /// The `pid` each held lock was requested with, so EXTEND and UNLOCK
    /// name the same ticket key.
    pids: BTreeMap<Vec<u8>, u64>,
}

impl Client {
    /// Connects to the agent's socket at `path`.
    pub fn connect(path: &Path) -> Result<Client, Error> {
        UnixStream::connect(path)
            .map(Client::from_stream)
            .map_err(Error::Io)
    }

    /// A client over an already connected stream.
    pub fn from_stream(stream: UnixStream) -> Client {
        Client {
            stream,
            framer: LineFramer::new(MAX_REPLY_LINE),
            inbox: VecDeque::new(),
            events: VecDeque::new(),
            closed: false,
            next_tag: 1,
            asked_status: false,
            reply_timeout: DEFAULT_REPLY_TIMEOUT,
            busy_poll: DEFAULT_BUSY_POLL,
            pids: BTreeMap::new(),
        }
    }

    /// How long [`request`](Self::request)-based helpers wait for a reply.
    pub fn set_reply_timeout(&mut self, timeout: Duration) {
        self.reply_timeout = timeout;
    }

    /// See [`set_reply_timeout`](Self::set_reply_timeout).
    pub fn reply_timeout(&self) -> Duration {
        self.reply_timeout
    }

    /// How long a wait for a reply first tries non-blocking reads, spinning
    /// on the CPU, before it sleeps in `poll(2)` (default
    /// [`DEFAULT_BUSY_POLL`]).
    pub fn set_busy_poll(&mut self, spin: Duration) {
        self.busy_poll = spin;
    }

    /// A tag not used before on this connection.
    pub fn new_tag(&mut self) -> i64 {
        let tag = self.next_tag;
        self.next_tag += 1;
        tag
    }

    /// Sends one message.
    pub fn send(&mut self, msg: &Message) -> Result<(), Error> {
        self.write_all(&encode_to_vec(msg))
    }

    /// Sends one raw line, as typed (a `\n` is appended). The line must not
    /// contain a newline.
    pub fn send_line(&mut self, line: &[u8]) -> Result<(), Error> {
        if line.contains(&b'\n') {
            let e = io::Error::new(
                io::ErrorKind::InvalidInput,
                "a line cannot contain a newline",
            );
            return Err(Error::Io(e));
        }
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line);
        bytes.push(b'\n');
        self.write_all(&bytes)
    }

    fn write_all(&mut self, mut bytes: &[u8]) -> Result<(), Error> {
        // MSG_NOSIGNAL: a closed agent is an error to report, not a SIGPIPE
        // that kills a caller that did not ignore it.
        while !bytes.is_empty() {
            match nix::sys::socket::send(self.stream.as_raw_fd(), bytes, MsgFlags::MSG_NOSIGNAL) {
                Ok(n) => bytes = &bytes[n..],
                Err(Errno::EINTR) => {}
                Err(e) => return Err(Error::from(io::Error::from(e))),
            }
        }
        Ok(())
    }

    /// The next message: an event set aside earlier, a buffered line, or one
    /// read from the socket within `timeout` (`None`: wait as long as it
    /// takes). `Ok(None)` when nothing arrived in time.
    pub fn recv(&mut self, timeout: Option<Duration>) -> Result<Option<Message>, Error> {
        if let Some(msg) = self.events.pop_front() {
            return Ok(Some(msg));
        }
        let deadline = timeout.map(|t| clock::monotonic() + t);
        loop {
            match self.inbox.pop_front() {
                Some(Incoming::Message(msg)) => return Ok(Some(msg)),
                Some(Incoming::Malformed(why)) => return Err(Error::Protocol(why)),
                None => {}
            }
            if self.closed {
                return Err(Error::Closed);
            }
            if !self.fill(deadline)? {
                return Ok(None);
            }
        }
    }

    /// The next message already received, without reading the socket:
    /// events set aside while awaiting replies first, then buffered lines.
    pub fn next_event(&mut self) -> Option<Message> {
        if let Some(msg) = self.events.pop_front() {
            return Some(msg);
        }
        while let Some(incoming) = self.inbox.pop_front() {
            if let Incoming::Message(msg) = incoming {
                return Some(msg);
            }
        }
        None
    }

    /// Waits up to `timeout` for the next message that is not a reply being
    /// awaited: the same as [`recv`](Self::recv), named for event loops.
    pub fn poll_event(&mut self, timeout: Option<Duration>) -> Result<Option<Message>, Error> {
        self.recv(timeout)
    }

    /// Whether messages are buffered: polling the socket would not show
    /// them, so call [`recv`](Self::recv) or [`next_event`](Self::next_event)
    /// first.
    pub fn has_buffered(&self) -> bool {
        !self.events.is_empty() || !self.inbox.is_empty()
    }

    /// Sends `msg` and returns its reply: the first message that carries
    /// `msg`'s `tag`, or, for an untagged `msg`, the first untagged message
    /// that is not about a lock. An untagged `INVALID` or `UNKNOWN` is a
    /// reply to anything. Other messages are kept as events.
    pub fn request(&mut self, msg: &Message, timeout: Duration) -> Result<Message, Error> {
        self.send(msg)?;
        self.asked_status = msg.command == "LOCKSTATUS";
        let reply = self.await_reply(tag_of(msg), timeout);
        self.asked_status = false;
        reply
    }

    fn await_reply(&mut self, tag: Option<i64>, timeout: Duration) -> Result<Message, Error> {
        self.await_reply_or_progress(tag, timeout, None)
    }

    /// As [`await_reply`](Self::await_reply); a `LOCKWAITING` about the
    /// request goes to `on_wait` when given (else it is kept as an event).
    fn await_reply_or_progress(
        &mut self,
        tag: Option<i64>,
        timeout: Duration,
        mut on_wait: Option<&mut dyn FnMut(&Waiting)>,
    ) -> Result<Message, Error> {
        let deadline = clock::monotonic() + timeout;
        loop {
            while let Some(incoming) = self.inbox.pop_front() {
                match incoming {
                    Incoming::Malformed(why) => return Err(Error::Protocol(why)),
                    Incoming::Message(msg) if is_reply(&msg, tag, self.asked_status) => {
                        return Ok(msg);
                    }
                    Incoming::Message(msg)
                        if msg.command == "LOCKWAITING"
                            && tag.is_some()
                            && tag_of(&msg) == tag
                            && on_wait.is_some() =>
                    {
                        // A malformed one is only progress lost: the
                        // request still waits for its answer.
                        if let (Ok(waiting), Some(f)) =
                            (Waiting::from_message(&msg), on_wait.as_mut())
                        {
                            f(&waiting);
                        }
                    }
                    Incoming::Message(msg) => self.events.push_back(msg),
                }
            }
            if self.closed {
                return Err(Error::Closed);
            }
            if !self.fill(Some(deadline))? {
                return Err(Error::Timeout);
            }
        }
    }

    /// Requests a lock on `object` and waits for the outcome: at most the
    /// lock's wait plus the reply timeout. On [`Error::Timeout`] the request
    /// is cancelled with `UNLOCK` before returning.
    pub fn lock(&mut self, object: impl AsRef<[u8]>, opts: &LockOptions) -> Result<Grant, Error> {
        self.lock_inner(object.as_ref(), opts, None)
    }

    /// As [`lock`](Self::lock), with `progress=true`: while the request
    /// waits, `on_wait` is called with each `LOCKWAITING` about it (when it
    /// starts waiting, and whenever its place or the reason changes).
    pub fn lock_with_progress(
        &mut self,
        object: impl AsRef<[u8]>,
        opts: &LockOptions,
        on_wait: &mut dyn FnMut(&Waiting),
    ) -> Result<Grant, Error> {
        let opts = LockOptions {
            progress: true,
            ..opts.clone()
        };
        self.lock_inner(object.as_ref(), &opts, Some(on_wait))
    }

    fn lock_inner(
        &mut self,
        object: &[u8],
        opts: &LockOptions,
        on_wait: Option<&mut dyn FnMut(&Waiting)>,
    ) -> Result<Grant, Error> {
        let tag = self.new_tag();
        self.send(&opts.to_message(object, tag, clock::wall()))?;
        let wait = opts.wait.unwrap_or(DEFAULT_WAIT) + self.reply_timeout;
        let reply = match self.await_reply_or_progress(Some(tag), wait, on_wait) {
            Ok(reply) => reply,
            Err(Error::Timeout) => {
                // A grant could still come; the UNLOCK makes sure it does
                // not leave a lock nobody knows it holds.
                let cancel_tag = self.new_tag();
                let _ = self.send(&unlock_message(object, cancel_tag, opts.pid));
                return Err(Error::Timeout);
            }
            Err(e) => return Err(e),
        };
        let grant = Grant::from_reply(&reply)?;
        if grant.object != object {
            return Err(request::unexpected(&reply));
        }
        if let Some(pid) = opts.pid {
            self.pids.insert(object.to_vec(), pid);
        }
        Ok(grant)
    }

    /// Renews the lease of a held lock: it now ends `duration` from now.
    /// The fence is unchanged.
    pub fn extend(&mut self, object: impl AsRef<[u8]>, duration: Duration) -> Result<Grant, Error> {
        let object = object.as_ref();
        let tag = self.new_tag();
        let pid = self.pids.get(object).copied();
        let reply = self.request(
            &extend_message(object, duration, tag, pid),
            self.reply_timeout,
        )?;
        Grant::from_reply(&reply)
    }

    /// Releases a held lock, or cancels a pending request. Releasing what is
    /// not held succeeds.
    pub fn unlock(&mut self, object: impl AsRef<[u8]>) -> Result<(), Error> {
        let object = object.as_ref();
        let pid = self.pids.get(object).copied();
        self.unlock_pid(object, pid)
    }

    /// [`unlock`](Self::unlock) of the ticket of `pid`: how another
    /// connection of the same user ends a detached lock.
    pub fn unlock_pid(&mut self, object: impl AsRef<[u8]>, pid: Option<u64>) -> Result<(), Error> {
        let object = object.as_ref();
        let tag = self.new_tag();
        let reply = self.request(&unlock_message(object, tag, pid), self.reply_timeout)?;
        match reply.command.as_str() {
            "UNLOCKED" if reply.get("error").is_none() => {
                self.pids.remove(object);
                Ok(())
            }
            "LOCKFAILED" => Err(request::refusal(&reply)),
            _ => Err(request::unexpected(&reply)),
        }
    }

    /// Whether the agent can grant locks now (`LOCKSTATUS`).
    pub fn status(&mut self) -> Result<bool, Error> {
        // What the agent said unasked before is older than the answer:
        // what has arrived is read (a few reads at most, without waiting)
        // and dropped.
        for _ in 0..4 {
            if self.closed || !self.fill(Some(clock::monotonic()))? {
                break;
            }
        }
        let pushed = |m: &Message| matches!(m.command.as_str(), "NOLOCK" | "LOCKREADY");
        self.events.retain(|m| !pushed(m));
        self.inbox
            .retain(|i| !matches!(i, Incoming::Message(m) if pushed(m)));
        let reply = self.request(&Message::new("LOCKSTATUS"), self.reply_timeout)?;
        match reply.command.as_str() {
            "LOCKREADY" => Ok(true),
            "NOLOCK" => Ok(false),
            _ => Err(request::unexpected(&reply)),
        }
    }

    /// Until when the agent vouches for this connection's locks: the
    /// holder's side of the lease (`docs/cluster.md`). Sends `ALIVE` and
    /// waits for its `ABSOLUTELY`.
    ///
    /// In a cluster the answer carries `valid_for`, and this returns
    /// `Some(deadline)`: the time the `ALIVE` was sent plus `valid_for`.
    /// A holder that hears nothing newer must have stopped acting on its
    /// locks by then, even while its lease runs: the agent may have lost
    /// contact with the cluster, which may give the lock to somebody else
    /// after that. Ask again well before it (`snaplock-cli` asks every
    /// fifth of `valid_for`); a deadline that stops moving on means the
    /// agent is out of contact. `None` from an agent that runs alone:
    /// then the lease is the only limit.
    pub fn vouched_for(&mut self) -> Result<Option<Instant>, Error> {
        let serial = self.new_tag();
        let sent = clock::monotonic();
        let ping = Message::new("ALIVE").with("serial", serial.to_string());
        self.send(&ping)?;
        let deadline = sent + self.reply_timeout;
        let want = serial.to_string();
        loop {
            while let Some(incoming) = self.inbox.pop_front() {
                match incoming {
                    Incoming::Malformed(why) => return Err(Error::Protocol(why)),
                    Incoming::Message(msg)
                        if msg.command == "ABSOLUTELY"
                            && msg.get_str("serial") == Some(want.as_str()) =>
                    {
                        return match msg.get("valid_for") {
                            None => Ok(None),
                            Some(v) => parse_duration(v, VALID_FOR_MAX_SECS)
                                .map(|d| Some(sent + d))
                                .ok_or_else(|| request::unexpected(&msg)),
                        };
                    }
                    Incoming::Message(msg) => self.events.push_back(msg),
                }
            }
            if self.closed {
                return Err(Error::Closed);
            }
            if !self.fill(Some(deadline))? {
                return Err(Error::Timeout);
            }
        }
    }

    /// The agent's `STATUS` message (`INFO`): server name, version,
    /// readiness, leaders, counts.
    pub fn info(&mut self) -> Result<Message, Error> {
        let reply = self.request(&Message::new("INFO"), self.reply_timeout)?;
        match reply.command.as_str() {
            "STATUS" => Ok(reply),
            _ => Err(request::unexpected(&reply)),
        }
    }

    /// The agent's metrics (`METRICS`), in the Prometheus text format.
    pub fn metrics(&mut self) -> Result<String, Error> {
        let reply = self.request(&Message::new("METRICS"), self.reply_timeout)?;
        match (reply.command.as_str(), reply.get("text")) {
            ("METRICSTEXT", Some(text)) => Ok(String::from_utf8_lossy(text).into_owned()),
            _ => Err(request::unexpected(&reply)),
        }
    }

    /// The agent's ticket list (`LISTTICKETS`): one line per ticket.
    pub fn list(&mut self) -> Result<String, Error> {
        let reply = self.request(&Message::new("LISTTICKETS"), self.reply_timeout)?;
        match (reply.command.as_str(), reply.get("list")) {
            ("TICKETLIST", Some(list)) => Ok(String::from_utf8_lossy(list).into_owned()),
            _ => Err(request::unexpected(&reply)),
        }
    }

    /// Waits until the socket is readable or `deadline` passes, then reads
    /// once and frames what came. `Ok(false)`: the deadline passed first.
    ///
    /// The wait is in poll(POLLIN), never blocked in read: each time the
    /// agent reads a request, the kernel wakes a reader blocked on the
    /// socket (to tell it there is room to write), for nothing, and that
    /// costs the agent's loop a quarter of its time. A poll for POLLIN only
    /// is not woken by it.
    fn fill(&mut self, deadline: Option<Instant>) -> Result<bool, Error> {
        if let Some(n) = self.read_spinning(deadline)? {
            self.framed(n);
            return Ok(true);
        }
        loop {
            let timeout = match deadline {
                None => PollTimeout::NONE,
                Some(d) => poll_timeout(d.saturating_duration_since(clock::monotonic())),
            };
            let mut fds = [PollFd::new(self.stream.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, timeout) {
                Ok(0) if timeout == PollTimeout::ZERO => return Ok(false),
                // Millisecond rounding may wake us a little early; look again.
                Ok(0) => {}
                Ok(_) => break,
                Err(Errno::EINTR) => {}
                Err(e) => return Err(Error::Io(e.into())),
            }
        }
        let buf = self.framer.buffer_mut();
        let old = buf.len();
        buf.resize(old + READ_CHUNK, 0);
        let read = loop {
            match self.stream.read(&mut buf[old..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => break other,
            }
        };
        let n = match read {
            Ok(n) => n,
            Err(e) => {
                buf.truncate(old);
                return Err(Error::from(e));
            }
        };
        buf.truncate(old + n);
        self.framed(n);
        Ok(true)
    }

    /// Tries non-blocking reads for [`set_busy_poll`](Self::set_busy_poll)
    /// (bounded by `deadline`); `Some(n)` once a read got `n` bytes (0: the
    /// agent closed), appended to the framer's buffer.
    fn read_spinning(&mut self, deadline: Option<Instant>) -> Result<Option<usize>, Error> {
        if self.busy_poll.is_zero() {
            return Ok(None);
        }
        let mut until = clock::monotonic() + self.busy_poll;
        if let Some(d) = deadline {
            until = until.min(d);
        }
        let fd = self.stream.as_raw_fd();
        let buf = self.framer.buffer_mut();
        let old = buf.len();
        buf.resize(old + READ_CHUNK, 0);
        let got = loop {
            match nix::sys::socket::recv(fd, &mut buf[old..], MsgFlags::MSG_DONTWAIT) {
                Ok(n) => break Ok(Some(n)),
                Err(Errno::EAGAIN | Errno::EINTR) => {}
                Err(e) => break Err(Error::from(io::Error::from(e))),
            }
            if clock::monotonic() >= until {
                break Ok(None);
            }
            std::hint::spin_loop();
        };
        buf.truncate(old + got.as_ref().ok().copied().flatten().unwrap_or(0));
        got
    }

    /// Frames what the last read of `n` bytes brought.
    fn framed(&mut self, n: usize) {
        if n == 0 {
            self.closed = true;
        }
        while let Some(frame) = self.framer.next_line() {
            let incoming = match frame {
                Frame::Line(line) => match parse(line) {
                    Ok(msg) => Incoming::Message(msg),
                    Err(e) => Incoming::Malformed(format!(
                        "unreadable line from the agent ({e}): {}",
                        String::from_utf8_lossy(&line[..line.len().min(200)])
                    )),
                },
                Frame::TooLong { .. } => Incoming::Malformed(format!(
                    "a line from the agent is longer than {MAX_REPLY_LINE} bytes"
                )),
            };
            self.inbox.push_back(incoming);
        }
    }
}

/// Whether `msg` answers the request tagged `tag` (see [`Client::request`]).
fn is_reply(msg: &Message, tag: Option<i64>, asked_status: bool) -> bool {
    if msg.command == "LOCKWAITING" {
        // Progress about a request, never its answer.
        return false;
    }
    if matches!(msg.command.as_str(), "NOLOCK" | "LOCKREADY") && !asked_status {
        // Readiness told unasked (the connection asked once before).
        return false;
    }
    let about_a_lock = matches!(msg.command.as_str(), "LOCKED" | "LOCKFAILED" | "UNLOCKED");
    match (tag_of(msg), tag) {
        (Some(got), Some(want)) => got == want,
        (Some(_), None) => false,
        (None, _) if matches!(msg.command.as_str(), "INVALID" | "UNKNOWN") => true,
        (None, Some(_)) => false,
        (None, None) => !about_a_lock,
    }
}

/// `d` in whole milliseconds, rounded up so a poll never wakes before it.
fn poll_timeout(d: Duration) -> PollTimeout {
    let ms = d.as_micros().div_ceil(1000);
    PollTimeout::try_from(ms.min(i32::MAX as u128)).unwrap_or(PollTimeout::MAX)
}

impl AsFd for Client {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }
}

impl AsRawFd for Client {
    fn as_raw_fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }
}
