//! What the shell and the core say to each other: the inputs it feeds,
//! the outputs it drains, and the calls it should not have made.

use std::fmt;
use std::net::SocketAddr;

use super::Credentials;
use crate::vocab::{ClientId, PeerId};
use crate::wire::{Message, ParseError};

/// A line from a client that is not a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// The grammar was broken.
    Parse(ParseError),
    /// Longer than the agent's `max_line_length`: the connection is closed.
    TooLong,
}

/// What the shell tells the core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A client connected.
    ClientOpened {
        /// Its number.
        client: ClientId,
        /// Who it is.
        cred: Credentials,
    },
    /// A client sent a message.
    ClientMessage {
        /// Who sent it.
        client: ClientId,
        /// What it sent.
        msg: Message,
    },
    /// A client sent a line that is not a message.
    ClientMalformed {
        /// Who sent it.
        client: ClientId,
        /// The first bytes of the line, for the reply.
        line: Vec<u8>,
        /// What is wrong with it.
        error: Malformed,
    },
    /// A client's connection is gone: its locks are released, its requests
    /// cancelled (detached locks stay).
    ClientClosed {
        /// Who is gone.
        client: ClientId,
    },
    /// A link to another computer passed its handshake (the shell checked
    /// version, cluster name, secret and that `name` is not connected yet).
    PeerUp {
        /// The link's number.
        peer: PeerId,
        /// The other computer's `server_name`.
        name: String,
        /// The other computer's `listen` address, as it announced it.
        addr: SocketAddr,
    },
    /// A line arrived on a link that is up (without its `\n`). One that
    /// does not parse closes the link ([`Output::PeerClose`]).
    PeerLine {
        /// The link.
        peer: PeerId,
        /// The line.
        line: Vec<u8>,
    },
    /// A link that was up is closed (by either side, or by the shell after
    /// [`Output::PeerClose`]).
    PeerDown {
        /// The link.
        peer: PeerId,
    },
    /// A cgroup watched since [`Output::WatchUnit`] has no process left,
    /// is gone, or cannot be watched: the locks it owns are released. A
    /// report about a cgroup no longer watched is ignored.
    UnitEmpty {
        /// The cgroup, as in [`Credentials::cgroup`].
        unit: u64,
    },
}

/// A reply to a client: a message, or the line of one written already
/// (the replies of every grant, `LOCKED` and `UNLOCKED`, go as lines
/// written straight from their fields, as `encode` would write the
/// message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// A message, for the shell to encode.
    Message(Message),
    /// A line, `\n` included, in a buffer the shell may give back
    /// ([`Core::recycle_line`](super::Core::recycle_line)).
    Line(Vec<u8>),
}

impl Reply {
    /// The reply as a message: a line is read back (the core wrote it, so
    /// it reads; a line that did not would be an `INVALID`).
    pub fn into_message(self) -> Message {
        match self {
            Reply::Message(m) => m,
            Reply::Line(line) => {
                let text = line.strip_suffix(b"\n").unwrap_or(&line);
                crate::wire::parse(text).unwrap_or_else(|_| Message::new("INVALID"))
            }
        }
    }

    /// The reply's command.
    pub fn command(&self) -> &str {
        match self {
            Reply::Message(m) => m.command.as_str(),
            Reply::Line(line) => {
                let end = (line.iter())
                    .position(|&b| b == b' ' || b == b'\n')
                    .unwrap_or(line.len());
                std::str::from_utf8(&line[..end]).unwrap_or("")
            }
        }
    }
}

/// What the core asks the shell to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Send `reply` to `client`.
    Reply {
        /// To whom.
        client: ClientId,
        /// What.
        reply: Reply,
    },
    /// Close `client` once the replies queued before this are written.
    /// The shell still reports [`Input::ClientClosed`] when it is closed.
    Close {
        /// Whom.
        client: ClientId,
    },
    /// Send `line` on link `peer` (dropped if the link is down by then).
    PeerSend {
        /// The link.
        peer: PeerId,
        /// The message, encoded: one line, `\n` included.
        line: Vec<u8>,
    },
    /// Close link `peer` (dead, or it broke the protocol); the shell dials
    /// again later as usual and reports [`Input::PeerDown`].
    PeerClose {
        /// The link.
        peer: PeerId,
    },
    /// Write this record durably (replacing the last one) before carrying
    /// out the outputs after it; hand it back through
    /// [`ClusterConfig::persisted`](crate::cluster::ClusterConfig::persisted) when the agent starts again. Asked at
    /// each epoch change and each time the fences pass the last record's
    /// reservation, not at each grant.
    Persist(crate::cluster::Persisted),
    /// Watch cgroup `unit` (its `cgroup.events`) and report
    /// [`Input::UnitEmpty`] once it has no process left, at once if it has
    /// none now, or if it cannot be watched (so that no lock is kept that
    /// nothing would end but its lease). Asked when a lock with
    /// `owner=cgroup` is first requested by one of its processes, on
    /// `client`, whose credentials named it: the shell finds the cgroup's
    /// directory from that connection. At most
    /// [`MAX_UNITS`](crate::core::unit::MAX_UNITS) are watched at once.
    WatchUnit {
        /// The cgroup, as in [`Credentials::cgroup`].
        unit: u64,
        /// The connection that asked, still open in the shell.
        client: ClientId,
    },
    /// Stop watching cgroup `unit`: it owns no lock any more.
    UnwatchUnit {
        /// The cgroup.
        unit: u64,
    },
}

/// A call the shell should not have made; the state is unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputError {
    /// The client is not open (never opened, or already closed).
    UnknownClient(ClientId),
    /// `ClientOpened` for a client that is already open.
    ClientAlreadyOpen(ClientId),
    /// Time went backwards.
    TimeWentBack,
    /// The link is not up (never up, or already down).
    UnknownPeer(PeerId),
    /// `PeerUp` for a link that is already up.
    PeerAlreadyUp(PeerId),
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::UnknownClient(c) => write!(f, "{c} is not open"),
            InputError::ClientAlreadyOpen(c) => write!(f, "{c} is already open"),
            InputError::TimeWentBack => f.write_str("monotonic time went backwards"),
            InputError::UnknownPeer(p) => write!(f, "{p} is not up"),
            InputError::PeerAlreadyUp(p) => write!(f, "{p} is already up"),
        }
    }
}

impl std::error::Error for InputError {}
