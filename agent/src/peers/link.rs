//! One TCP link to another agent: its socket, its framer, its unsent
//! lines, and where it is in the handshake.
//!
//! ```text
//!  dialed:   Connecting ──connected, CONNECT sent──▶ AwaitAccept ──ACCEPT ok, PROOF sent──▶ Up
//!  accepted: AwaitConnect ──CONNECT ok, ACCEPT sent──▶ AwaitProof ──PROOF ok──▶ Up
//!  any state but Up ──REFUSE sent──▶ Refusing (flush, then closed)
//!  any state: garbage, timeout, EOF, error ──▶ closed (PeerDown only if it was Up)
//! ```

use std::io;
use std::net::SocketAddr;

use mio::net::TcpStream;
use mio::{Registry, Token};
use snaplock_proto::Time;
use snaplock_proto::wire::{LineFramer, Message};

use crate::outbuf::{FlushOutcome, OutBuf, ReadOutcome, WriteInterest, Writes, read_once};

/// A line buffer this large is given back to the allocator once written.
const KEEP_CAPACITY: usize = 1 << 20;

/// Where a link is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Dialed: the TCP connection is being set up.
    Connecting,
    /// Dialed: `CONNECT` sent, waiting for `ACCEPT` or `REFUSE`.
    AwaitAccept,
    /// Accepted: waiting for `CONNECT`.
    AwaitConnect,
    /// Accepted: `ACCEPT` sent, waiting for `PROOF`; the dialer's
    /// challenge is not needed any more, its name is in `Link::name`.
    AwaitProof,
    /// Handshake done; the core knows it.
    Up,
    /// `REFUSE` sent: nothing more is read; closed once written.
    Refusing,
}

/// A link to another agent.
#[derive(Debug)]
pub struct Link {
    /// The socket.
    pub stream: TcpStream,
    /// Where it is in the handshake.
    pub state: State,
    /// This agent dialed it.
    pub outbound: bool,
    /// The other end's TCP address, for the logs.
    pub remote: SocketAddr,
    /// The member at the other end (its `listen` address): known from the
    /// start when dialed, from `CONNECT` when accepted.
    pub member: Option<SocketAddr>,
    /// The other agent's `server_name`, once it said it.
    pub name: Option<String>,
    /// The challenge this agent drew for this link.
    pub challenge: String,
    /// When the handshake (or the refusal) must be over.
    pub deadline: Option<Time>,
    /// Cuts what was read into lines.
    pub framer: LineFramer,
    /// In the list of links to flush.
    pub dirty: bool,
    /// In the list of links to read again (read budget ran out).
    pub read_again: bool,
    /// An event said the other side closed: read on until the EOF itself,
    /// since that edge is not raised again.
    pub eof_pending: bool,
    out: OutBuf,
    writable: WriteInterest,
}

impl Link {
    /// A link over `stream`, registered by the caller (for `WRITABLE` too
    /// when it is still connecting).
    pub fn new(stream: TcpStream, state: State, remote: SocketAddr, max_line: usize) -> Link {
        Link {
            stream,
            outbound: state == State::Connecting,
            writable: WriteInterest(state == State::Connecting),
            state,
            remote,
            member: None,
            name: None,
            challenge: String::new(),
            deadline: None,
            framer: LineFramer::new(max_line),
            dirty: false,
            read_again: false,
            eof_pending: false,
            out: OutBuf::new(KEEP_CAPACITY),
        }
    }

    /// The link's description for the logs: name, member, TCP address.
    pub fn describe(&self) -> String {
        let who = match (&self.name, self.member) {
            (Some(n), Some(m)) => format!("{n} at {m}"),
            (None, Some(m)) => m.to_string(),
            (Some(n), None) => n.clone(),
            (None, None) => "unidentified".to_owned(),
        };
        let dir = if self.outbound { "to" } else { "from" };
        format!("{who} (connection {dir} {})", self.remote)
    }

    /// Unsent bytes.
    pub fn pending(&self) -> usize {
        self.out.pending()
    }

    /// Appends a line.
    pub fn queue(&mut self, msg: &Message) {
        self.out.queue(msg);
    }

    /// Queues a line already encoded (`\n` included).
    pub fn queue_line(&mut self, line: &[u8]) {
        self.out.queue_bytes(line);
    }

    /// Writes until everything is out or the socket is full.
    pub fn flush(&mut self) -> FlushOutcome {
        self.out.flush(&mut self.stream, Writes::UntilFull)
    }

    /// One `read` (retried only on `EINTR`).
    pub fn read(&mut self, buf: &mut [u8]) -> ReadOutcome {
        read_once(&mut self.stream, buf)
    }

    /// Whether a dialed connection is established: `Ok(false)` while it
    /// is still in progress, the error when it failed.
    pub fn connected(&self) -> io::Result<bool> {
        if let Some(e) = self.stream.take_error()? {
            return Err(e);
        }
        match self.stream.peer_addr() {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `WRITABLE` interest only while connecting or while lines wait.
    pub fn update_interest(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        let want = self.state == State::Connecting || self.pending() > 0;
        self.writable
            .update(registry, &mut self.stream, token, want)
    }
}
