//! One client connection: its socket, its line framer, its unsent replies,
//! and where it is in its life.
//!
//! ```text
//!            EOF read (peer did shutdown(SHUT_WR))
//!   Open ───────────────────────────────▶ ReadClosed   (replies still delivered)
//!    │  core says Close                       │
//!    ▼                                        │ HUP / error / EPIPE
//!  Closing (no more reading; flush, close)    ▼
//!    │  flushed, or linger ends             Gone (closed at the end of the iteration)
//!    ▼
//!  Gone
//! ```
//!
//! Across these, an open connection is *paused* while its unsent replies
//! are backed up (the client does not read them as fast as it asks): its
//! requests are not read until they are written, so a client that writes
//! faster than it reads is slowed down by its own socket, not closed.
//!
//! Replies are appended as the core emits them and written once per loop
//! iteration, so a burst of replies costs one `write`.

use std::io;

use mio::{Registry, Token};
use snaplock_proto::Time;
use snaplock_proto::wire::{LineFramer, Message};

use crate::communicator::Session;
pub use crate::outbuf::{FlushOutcome, ReadOutcome};
use crate::outbuf::{OutBuf, WriteInterest, Writes, read_once};
use crate::stream::Stream;

/// A reply buffer this large is given back to the allocator once written,
/// so one big `TICKETLIST` does not pin its memory for the connection's life.
const KEEP_CAPACITY: usize = 64 << 10;

/// A client connection.
#[derive(Debug)]
pub struct Conn {
    /// The socket.
    pub stream: Stream,
    /// The snapcommunicator session a `communicator_listen` connection
    /// speaks: its lines are translated at this edge, in and out.
    pub session: Option<Box<Session>>,
    /// Cuts what was read into lines.
    pub framer: LineFramer,
    out: OutBuf,
    /// The peer sent EOF: no more requests, but replies still go out.
    pub read_closed: bool,
    /// The core asked to close: read nothing more, flush, then close.
    pub closing: bool,
    /// Close at the end of this iteration without writing anything more.
    pub gone: bool,
    /// In the loop's list of connections to flush.
    pub dirty: bool,
    /// In the loop's queue of connections to serve.
    pub queued: bool,
    /// The socket may hold bytes not read yet: set by a readable event,
    /// cleared when a read finds it empty.
    pub readable: bool,
    /// Since when its replies are backed up: nothing more is read from it
    /// until they are written.
    pub paused_since: Option<Time>,
    /// The peer vanished (HUP): what it sent is still served, its replies
    /// are dropped, and it is closed once its socket is read out.
    pub peer_gone: bool,
    /// Its bytes counted in the loop's total of client buffers.
    pub held: usize,
    /// Closing, with a deadline for its last replies set.
    pub lingering: bool,
    /// The peer shut its side down (or vanished): read until EOF.
    pub eof_pending: bool,
    /// The directory of the peer's cgroup, when the core knows it
    /// (`Credentials::cgroup`): what is watched if it owns a lock.
    pub cgroup_dir: Option<std::path::PathBuf>,
    writable: WriteInterest,
}

impl Conn {
    /// A new connection, registered for `READABLE` by the caller.
    pub fn new(stream: impl Into<Stream>, max_line: usize) -> Conn {
        Conn {
            stream: stream.into(),
            session: None,
            framer: LineFramer::new(max_line),
            out: OutBuf::new(KEEP_CAPACITY),
            read_closed: false,
            closing: false,
            gone: false,
            dirty: false,
            queued: false,
            readable: false,
            paused_since: None,
            peer_gone: false,
            held: 0,
            lingering: false,
            eof_pending: false,
            cgroup_dir: None,
            writable: WriteInterest(false),
        }
    }

    /// Unsent reply bytes.
    pub fn pending(&self) -> usize {
        self.out.pending()
    }

    /// Bytes this connection holds: unsent replies and requests read but
    /// not yet served.
    pub fn buffered(&self) -> usize {
        self.pending() + self.framer.pending()
    }

    /// Appends a reply.
    pub fn queue(&mut self, msg: &Message) {
        self.out.queue(msg);
    }

    /// Appends whole lines, encoded already.
    pub fn queue_bytes(&mut self, bytes: &[u8]) {
        self.out.queue_bytes(bytes);
    }

    /// One `write` of what is queued (retried only on `EINTR`): a short
    /// write means the socket buffer is full, and `WRITABLE` will say when
    /// it has room.
    pub fn flush(&mut self) -> FlushOutcome {
        self.out.flush(&mut self.stream, Writes::One)
    }

    /// Gives back a read buffer that a burst made large, once it is
    /// (nearly) empty: ten thousand idle clients must not each keep one.
    pub fn release_idle_memory(&mut self) {
        let buf = self.framer.buffer_mut();
        if buf.capacity() > KEEP_CAPACITY && buf.len() < KEEP_CAPACITY / 4 {
            buf.shrink_to(buf.len().max(1024));
        }
    }

    /// Drops what is queued: the connection is being closed abruptly.
    pub fn discard_output(&mut self) {
        self.out.discard();
    }

    /// One `read` into `buf` (retried only on `EINTR`).
    pub fn read(&mut self, buf: &mut [u8]) -> ReadOutcome {
        read_once(&mut self.stream, buf)
    }

    /// Registers `WRITABLE` interest only while replies are waiting.
    pub fn update_interest(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        let want = self.pending() > 0;
        self.writable
            .update(registry, &mut self.stream, token, want)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use mio::net::UnixStream;

    use super::*;

    #[test]
    fn queued_replies_go_out_in_one_write_and_the_buffer_is_reused() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut conn = Conn::new(a, 1024);
        conn.queue(&Message::new("LOCKREADY"));
        conn.queue(&Message::new("NOLOCK"));
        assert_eq!(conn.pending(), "LOCKREADY\nNOLOCK\n".len());
        assert_eq!(conn.flush(), FlushOutcome::Empty);
        assert_eq!(conn.pending(), 0);
        let mut got = [0u8; 64];
        let n = (&b).read(&mut got).unwrap();
        assert_eq!(&got[..n], b"LOCKREADY\nNOLOCK\n");
    }

    #[test]
    fn a_full_socket_leaves_the_rest_pending_and_a_closed_peer_fails() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut conn = Conn::new(a, 1024);
        let big = Message::new("TICKETLIST").with("list", vec![b'x'; 1 << 20]);
        conn.queue(&big);
        assert_eq!(conn.flush(), FlushOutcome::Pending);
        assert!(conn.pending() > 0 && conn.pending() < (1 << 20));
        drop(b);
        assert_eq!(conn.flush(), FlushOutcome::Failed);
    }

    #[test]
    fn buffered_counts_unsent_replies_and_requests_not_served() {
        let (a, _b) = UnixStream::pair().unwrap();
        let mut conn = Conn::new(a, 1024);
        conn.framer.buffer_mut().extend_from_slice(b"INFO\nINF");
        conn.queue(&Message::new("NOLOCK"));
        assert_eq!(conn.buffered(), "INFO\nINF".len() + "NOLOCK\n".len());
        assert!(conn.framer.next_line().is_some());
        assert_eq!(conn.flush(), FlushOutcome::Empty);
        assert_eq!(conn.buffered(), "INF".len());
    }

    #[test]
    fn reads_tell_data_eof_and_would_block_apart() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut conn = Conn::new(a, 1024);
        let mut buf = [0u8; 16];
        assert_eq!(conn.read(&mut buf), ReadOutcome::WouldBlock);
        (&b).write_all(b"HELP\n").unwrap();
        assert_eq!(conn.read(&mut buf), ReadOutcome::Data(5));
        b.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(conn.read(&mut buf), ReadOutcome::Eof);
    }
}
