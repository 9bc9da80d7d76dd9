//! Serving client connections within bounds.
//!
//! A readable event only queues its connection; [`EventLoop::serve_clients`]
//! then serves the queue in turns, each turn a few reads and lines of one
//! connection, until the queue is empty or the iteration's budget is spent.
//! A connection with work left goes to the back of the queue; one that was
//! idle is served first, for a short turn. So however many clients write,
//! one iteration does a bounded amount of their work, the peer links and
//! timers get their turn after it, and a client that sends a request now
//! and then waits only for the short turns of those that woke before it.
//!
//! Three bounds on what clients make the agent hold:
//!
//! - a connection whose unsent replies reach [`PAUSE_AT`] after a write is
//!   *paused*: it is not read until they are written (backpressure);
//! - one whose unsent replies exceed `max_pending_output` anyway (replies
//!   it did not ask for, such as grants) is closed;
//! - when all clients together hold more than `max_pending_total` (unsent
//!   replies plus requests read but not served), the connection paused the
//!   longest is closed, until they hold less.
//!
//! Closing a connection releases its locks, as for any client that goes.
//!
//! Readiness is edge-triggered: a connection left with bytes in its socket
//! (its turn or the budget ran out, or it was paused) gets no new event for
//! them, so it stays queued, or is queued again when its replies drain.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;

use mio::event::Event;
use mio::{Interest, Token};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use snaplock_proto::wire::{self, Frame, Message};
use snaplock_proto::{ClientId, Credentials, Input, Malformed, Now, Reply};

use super::{ACCEPT_BUDGET, ACCEPT_PAUSE, CLOSE_LINGER, ECHO, EventLoop};
use crate::communicator::{Session, Step};
use crate::conn::{Conn, FlushOutcome, ReadOutcome};
use crate::stream::Stream;

/// Unsent reply bytes at which a connection stops being read until they
/// are written: a client that asks faster than it reads is slowed down.
pub(crate) const PAUSE_AT: usize = 16 << 10;
/// Lines served per iteration, all clients together: some 5 ms of work.
const LINES_PER_ITERATION: usize = 1024;
/// Bytes read per iteration, all clients together (counted as the room
/// offered to each read: what is read is copied into its connection's
/// buffer).
const READ_BYTES_PER_ITERATION: usize = 4 << 20;
/// Lines served in one connection's turn.
const LINES_PER_TURN: usize = 32;
/// Lines served in the first turn of a connection that was idle, and the
/// most it reads then: enough for a request or a few, and cheap even when
/// a thousand connections wake at once.
const LINES_FIRST_TURN: usize = 4;
const READ_FIRST_TURN: usize = 4 << 10;
/// Reads in one connection's turn.
const READS_PER_TURN: usize = 16;

/// What is left of this iteration's work for clients.
pub(super) struct Budget {
    lines: usize,
    bytes: usize,
}

impl Budget {
    pub(super) fn new() -> Budget {
        Budget {
            lines: LINES_PER_ITERATION,
            bytes: READ_BYTES_PER_ITERATION,
        }
    }

    fn spent(&self) -> bool {
        self.lines == 0 || self.bytes < READ_FIRST_TURN
    }
}

/// How a connection's turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Its turn or the budget ran out with work left: queue it again.
    More,
    /// Nothing to do until an event (or, paused, until its replies drain).
    Idle,
    /// It is gone, closing, or read to its end.
    Done,
}

/// Connections waiting to be served, in order; a connection is in at most
/// one of the loop's two queues (`fresh`, then `ready`), at most once.
pub(super) type Ready = VecDeque<u64>;

impl EventLoop {
    /// Accepts on the client socket, then on `communicator_listen`, a
    /// budget each.
    pub(super) fn accept(&mut self, now: Now) {
        'listeners: for tcp in [false, true] {
            if self.stop_deadline.is_some() || self.accept_paused_until.is_some() {
                return;
            }
            for _ in 0..ACCEPT_BUDGET {
                let accepted = if tcp {
                    let Some(listener) = &self.comm_listener else {
                        continue 'listeners;
                    };
                    listener
                        .accept()
                        .map(|(s, from)| (Stream::from(s), Some(from)))
                } else {
                    let Some(listener) = &self.listener else {
                        continue 'listeners;
                    };
                    listener.accept().map(|(s, _)| (Stream::from(s), None))
                };
                if !self.accepted(now, accepted) {
                    continue 'listeners;
                }
            }
            self.accept_again = true;
        }
    }

    /// Opens what `accept` gave; false when the listener has no more for
    /// now (or accepting pauses).
    fn accepted(&mut self, now: Now, accepted: io::Result<(Stream, Option<SocketAddr>)>) -> bool {
        match accepted {
            Ok((stream, from)) => self.open(now, stream, from),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
            Err(e) => {
                // Out of file descriptors (EMFILE, ENFILE) or memory: the
                // pending connection stays queued, so retrying at once
                // would spin. Pause, and log rarely.
                if let Some(skipped) = self.accept_errors.allow(now.mono) {
                    log::warn!(
                        "cannot accept a client ({e}); pausing accepts for {} ms ({skipped} more such errors not logged)",
                        ACCEPT_PAUSE.as_millis()
                    );
                }
                self.accept_paused_until = Some(now.mono + ACCEPT_PAUSE);
                return false;
            }
        }
        true
    }

    /// A new connection: of the client socket, or (`from` set) of a
    /// snapcommunicator session, which has no peer credentials.
    fn open(&mut self, now: Now, stream: Stream, from: Option<SocketAddr>) {
        let id = self.next_id;
        self.next_id += 1;
        let mut cgroup = None;
        let cred = match &stream {
            Stream::Unix(s) => match getsockopt(s, PeerCredentials) {
                Ok(c) => {
                    let pid = u32::try_from(c.pid()).ok();
                    // Read now, while the client most likely still runs;
                    // one that is gone has no cgroup to own a lock.
                    cgroup = pid.zip(self.units.as_ref()).and_then(|(p, u)| u.of_pid(p));
                    Credentials {
                        pid,
                        uid: Some(c.uid()),
                        gid: Some(c.gid()),
                        cgroup: cgroup.as_ref().map(|g| g.inode),
                    }
                }
                Err(e) => {
                    log::debug!("client {id}: no peer credentials: {e}");
                    Credentials::default()
                }
            },
            Stream::Tcp(s) => {
                // One short line per reply: send each at once.
                if let Err(e) = s.set_nodelay(true) {
                    log::debug!("client {id}: cannot set TCP_NODELAY: {e}");
                }
                Credentials::default()
            }
        };
        let mut conn = Conn::new(stream, self.max_line);
        conn.cgroup_dir = cgroup.map(|g| g.dir);
        if let Some(from) = from {
            log::debug!("client {id}: snapcommunicator session from {from}");
            conn.session = Some(Box::new(Session::new(&self.server_name)));
        }
        if let Err(e) =
            self.poll
                .registry()
                .register(&mut conn.stream, Token(id as usize), Interest::READABLE)
        {
            log::warn!("cannot watch a new client: {e}");
            return;
        }
        log::debug!("client {id} connected: {cred:?}");
        self.conns.insert(id, conn);
        self.feed(
            now,
            Input::ClientOpened {
                client: ClientId(id),
                cred,
            },
        );
    }

    /// Notes what the event says and queues the connection; nothing is
    /// read here.
    pub(super) fn conn_event(&mut self, id: u64, ev: &Event) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        if conn.gone {
            return;
        }
        // HUP or an error: the peer is gone in both directions. EOF alone
        // (shutdown(SHUT_WR), `socat` after its input ends) is not: the peer
        // may still be waiting for a LOCKED.
        let peer_gone = ev.is_write_closed() || ev.is_error();
        if ev.is_read_closed() || peer_gone {
            conn.eof_pending = true;
        }
        if peer_gone && !conn.peer_gone {
            // What it sent still counts (a `detach=true` LOCK followed by
            // a close, for one); what it would be answered cannot arrive.
            conn.peer_gone = true;
            conn.discard_output();
            if let Some(at) = conn.paused_since.take() {
                self.paused.remove(&(at, id));
            }
            Self::account(&mut self.held, conn);
        }
        if ev.is_readable() || ev.is_read_closed() || peer_gone {
            conn.readable = true;
            // A connection that had nothing to do goes first, for a short
            // turn: a client that sends a request now and then is answered
            // at once, however many others keep the queue full.
            if !conn.queued {
                conn.queued = true;
                self.fresh.push_back(id);
            }
        }
        if ev.is_writable() && !conn.dirty && conn.pending() > 0 {
            conn.dirty = true;
            self.dirty.push(id);
        }
    }

    fn enqueue(ready: &mut Ready, id: u64, conn: &mut Conn) {
        if !conn.queued {
            conn.queued = true;
            ready.push_back(id);
        }
    }

    /// Keeps `held` equal to the sum of the connections' buffered bytes.
    pub(super) fn account(held: &mut usize, conn: &mut Conn) {
        let now = conn.buffered();
        *held = *held - conn.held + now;
        conn.held = now;
    }

    /// Serves queued connections, a turn each, until the queue is empty or
    /// the budget is spent; the rest waits for the next iteration.
    pub(super) fn serve_clients(&mut self, now: Now, budget: &mut Budget) {
        while !budget.spent() {
            let (id, turn) = match self.fresh.pop_front() {
                Some(id) => (id, (LINES_FIRST_TURN, READ_FIRST_TURN)),
                None => match self.ready.pop_front() {
                    Some(id) => (id, (LINES_PER_TURN, self.read_buf.len())),
                    None => return,
                },
            };
            let Some(conn) = self.conns.get_mut(&id) else {
                continue;
            };
            conn.queued = false;
            let turn = self.serve(now, id, turn, budget);
            let Some(conn) = self.conns.get_mut(&id) else {
                continue;
            };
            Self::account(&mut self.held, conn);
            match turn {
                // Behind the others: every queued connection gets a turn
                // before this one gets another.
                Turn::More => Self::enqueue(&mut self.ready, id, conn),
                Turn::Idle | Turn::Done if conn.peer_gone => {
                    Self::mark_gone(&mut self.to_close, id, conn)
                }
                // A TCP peer that closes is seen as an EOF only; to
                // snapcommunicator that ended the session, as it does here
                // once what was sent is served.
                Turn::Done if conn.read_closed && conn.session.is_some() => {
                    self.close_after_flush(id)
                }
                Turn::Idle | Turn::Done => {}
            }
        }
    }

    /// One turn: serves the lines already read, then reads more, within
    /// the turn's and the iteration's bounds.
    fn serve(&mut self, now: Now, id: u64, turn: (usize, usize), budget: &mut Budget) -> Turn {
        let (mut lines, read_size) = turn;
        let mut reads = READS_PER_TURN;
        loop {
            match self.serve_lines(now, id, &mut lines, budget) {
                Turn::Idle => {}
                other => return other,
            }
            let Some(conn) = self.conns.get_mut(&id) else {
                return Turn::Done;
            };
            if conn.paused_since.is_some() {
                return Turn::Idle;
            }
            if conn.read_closed {
                return Turn::Done;
            }
            if !conn.readable {
                conn.release_idle_memory();
                return Turn::Idle;
            }
            let room = read_size.min(budget.bytes);
            if reads == 0 || room < READ_FIRST_TURN {
                return Turn::More;
            }
            reads -= 1;
            budget.bytes -= room;
            match conn.read(&mut self.read_buf[..room]) {
                ReadOutcome::Data(n) => {
                    conn.framer
                        .buffer_mut()
                        .extend_from_slice(&self.read_buf[..n]);
                    // A short read emptied the socket, and bytes arriving
                    // later raise a new edge: skip the read that would only
                    // say EAGAIN. Not when an EOF is known to be there,
                    // since that edge was already reported.
                    if n < room && !conn.eof_pending {
                        conn.readable = false;
                    }
                }
                ReadOutcome::WouldBlock => conn.readable = false,
                ReadOutcome::Eof => {
                    conn.read_closed = true;
                    conn.readable = false;
                    // A last line without its `\n` is still a request.
                    if conn.framer.has_partial_line() {
                        conn.framer.buffer_mut().push(b'\n');
                    }
                }
                ReadOutcome::Failed => {
                    Self::mark_gone(&mut self.to_close, id, conn);
                    return Turn::Done;
                }
            }
        }
    }

    /// Hands the complete lines read so far to the core, until none is
    /// left (`Idle`), the connection is paused (`Idle`) or closes (`Done`),
    /// or a bound is reached (`More`).
    fn serve_lines(&mut self, now: Now, id: u64, lines: &mut usize, budget: &mut Budget) -> Turn {
        let client = ClientId(id);
        loop {
            let Some(conn) = self.conns.get_mut(&id) else {
                return Turn::Done;
            };
            if conn.closing || conn.gone {
                return Turn::Done;
            }
            if conn.paused_since.is_some() {
                return Turn::Idle;
            }
            if conn.pending() >= PAUSE_AT {
                // Write now rather than at the end of the iteration: a
                // client that reads keeps being served at its pace.
                match conn.flush() {
                    FlushOutcome::Failed => {
                        Self::mark_gone(&mut self.to_close, id, conn);
                        return Turn::Done;
                    }
                    FlushOutcome::Empty => {}
                    FlushOutcome::Pending => {
                        conn.paused_since = Some(now.mono);
                        self.paused.insert((now.mono, id));
                        return Turn::Idle;
                    }
                }
            }
            if *lines == 0 || budget.lines == 0 {
                return Turn::More;
            }
            let input = match conn.framer.next_line() {
                None => return Turn::Idle,
                Some(Frame::Line([])) => continue,
                // Without a session, the core reads the line in place.
                Some(Frame::Line(line)) if conn.session.is_none() => {
                    if let Err(e) = self.core.handle_client_line(now, client, line) {
                        log::error!("the core refused a client's line (a bug in snaplockd): {e}");
                        debug_assert!(false, "the core refused a client's line: {e}");
                    }
                    *lines -= 1;
                    budget.lines -= 1;
                    self.drain(now);
                    continue;
                }
                Some(Frame::Line(line)) => match wire::parse(line) {
                    Ok(msg) => match conn.session.as_mut() {
                        None => Input::ClientMessage { client, msg },
                        Some(session) => match session.inbound(msg, now.wall) {
                            Step::Core(msg) => Input::ClientMessage { client, msg },
                            step => {
                                *lines -= 1;
                                budget.lines -= 1;
                                if self.session_step(id, step) {
                                    continue;
                                }
                                return Turn::Done;
                            }
                        },
                    },
                    Err(e) => Input::ClientMalformed {
                        client,
                        line: line[..line.len().min(ECHO)].to_vec(),
                        error: Malformed::Parse(e),
                    },
                },
                Some(Frame::TooLong { prefix }) => Input::ClientMalformed {
                    client,
                    line: prefix.to_vec(),
                    error: Malformed::TooLong,
                },
            };
            *lines -= 1;
            budget.lines -= 1;
            self.feed(now, input);
        }
    }

    /// Does what a snapcommunicator session answers itself; false when
    /// the session ended.
    fn session_step(&mut self, id: u64, step: Step) -> bool {
        match step {
            Step::Answer(replies) => {
                for reply in &replies {
                    self.queue_message(id, reply, false);
                }
            }
            Step::End => {
                self.close_after_flush(id);
                return false;
            }
            Step::Ignore => {}
            Step::Core(msg) => {
                debug_assert!(false, "a request for the core is fed to it: {msg}");
            }
        }
        true
    }

    /// Appends a reply of the core to its connection's buffer.
    pub(super) fn queue_reply(&mut self, id: u64, msg: &Message) {
        self.queue_message(id, msg, true);
    }

    /// A reply of the core written already ([`Reply::Line`]): appended as
    /// it is, or read back and translated for a snapcommunicator session.
    pub(super) fn queue_reply_line(&mut self, id: u64, line: &[u8]) {
        if self.conns.get(&id).is_some_and(|c| c.session.is_some()) {
            let msg = Reply::Line(line.to_vec()).into_message();
            return self.queue_message(id, &msg, true);
        }
        self.queue_with(id, |conn| conn.queue_bytes(line));
    }

    /// Reads nothing more from a connection, and closes it once its
    /// replies are written.
    pub(super) fn close_after_flush(&mut self, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        conn.closing = true;
        if !conn.dirty {
            conn.dirty = true;
            self.dirty.push(id);
        }
    }

    /// Appends a line to a connection's buffer; a reply of the core
    /// (`of_core`) is first translated for a snapcommunicator session.
    fn queue_message(&mut self, id: u64, msg: &Message, of_core: bool) {
        self.queue_with(id, |conn| {
            let translated = match &conn.session {
                Some(session) if of_core => Some(session.outbound(msg)),
                _ => None,
            };
            conn.queue(translated.as_ref().unwrap_or(msg));
        });
    }

    /// Appends with `queue` to a connection's buffer, unless it is gone;
    /// it is written at the end of the iteration, or closed when too much
    /// is left unread.
    fn queue_with(&mut self, id: u64, queue: impl FnOnce(&mut Conn)) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        if conn.gone || conn.peer_gone {
            return;
        }
        queue(conn);
        if !conn.dirty {
            conn.dirty = true;
            self.dirty.push(id);
        }
        if conn.pending() > self.max_pending
            && (conn.flush() == FlushOutcome::Failed || conn.pending() > self.max_pending)
        {
            // A paused connection is read no more, so only replies it did
            // not ask for (grants, lost locks) can bring it here: close it
            // rather than buffer without bound.
            log::debug!(
                "client {id}: {} reply bytes unread, closing it",
                conn.pending()
            );
            conn.discard_output();
            Self::mark_gone(&mut self.to_close, id, conn);
        }
        Self::account(&mut self.held, conn);
    }

    pub(super) fn mark_gone(to_close: &mut Vec<u64>, id: u64, conn: &mut Conn) {
        if !conn.gone {
            conn.gone = true;
            to_close.push(id);
        }
    }

    /// Closes the connections paused the longest while all clients
    /// together hold more than `max_pending_total`.
    fn enforce_total(&mut self, now: Now) {
        let mut excess = self.held.saturating_sub(self.max_total);
        while excess > 0 {
            let Some((since, id)) = self.paused.pop_first() else {
                return;
            };
            let Some(conn) = self.conns.get_mut(&id) else {
                continue;
            };
            conn.paused_since = None;
            if let Some(quiet) = self.total_drops.allow(now.mono) {
                log::warn!(
                    "client {id}: its replies unread for {} ms while clients hold {} bytes \
                     (max_pending_total={}); closing it, which releases its locks \
                     ({quiet} more such closes not logged)",
                    now.mono.saturating_since(since).as_millis(),
                    self.held,
                    self.max_total
                );
            }
            // Freed when it is closed, at the end of this iteration.
            excess = excess.saturating_sub(conn.buffered());
            Self::mark_gone(&mut self.to_close, id, conn);
        }
    }

    pub(super) fn flush_and_close_clients(&mut self, now: Now) {
        self.enforce_total(now);
        while !self.dirty.is_empty() || !self.to_close.is_empty() {
            std::mem::swap(&mut self.dirty, &mut self.flushing);
            for i in 0..self.flushing.len() {
                let id = self.flushing[i];
                let Some(conn) = self.conns.get_mut(&id) else {
                    continue;
                };
                conn.dirty = false;
                if conn.gone {
                    continue;
                }
                let outcome = conn.flush();
                Self::account(&mut self.held, conn);
                match outcome {
                    FlushOutcome::Failed => Self::mark_gone(&mut self.to_close, id, conn),
                    FlushOutcome::Empty if conn.closing => {
                        Self::mark_gone(&mut self.to_close, id, conn)
                    }
                    outcome => {
                        if outcome == FlushOutcome::Empty {
                            if let Some(at) = conn.paused_since.take() {
                                // Its replies are read: serve what it sent
                                // meanwhile, which raises no new event.
                                self.paused.remove(&(at, id));
                                Self::enqueue(&mut self.ready, id, conn);
                            }
                        }
                        if outcome == FlushOutcome::Pending && conn.closing && !conn.lingering {
                            conn.lingering = true;
                            self.lingering.insert((now.mono + CLOSE_LINGER, id));
                        }
                        if let Err(e) =
                            conn.update_interest(self.poll.registry(), Token(id as usize))
                        {
                            log::debug!("client {id}: cannot update its interest: {e}");
                            Self::mark_gone(&mut self.to_close, id, conn);
                        }
                    }
                }
            }
            self.flushing.clear();
            let closing = std::mem::take(&mut self.to_close);
            for id in closing {
                self.close(now, id);
            }
        }
        #[cfg(debug_assertions)]
        if self.conns.len() <= 4096 {
            debug_assert_eq!(
                self.held,
                self.conns.values().map(Conn::buffered).sum::<usize>(),
                "INVARIANT: held is the sum of the clients' buffers"
            );
        }
    }

    fn close(&mut self, now: Now, id: u64) {
        let Some(mut conn) = self.conns.remove(&id) else {
            return;
        };
        self.held -= conn.held;
        if let Some(at) = conn.paused_since {
            self.paused.remove(&(at, id));
        }
        let _ = self.poll.registry().deregister(&mut conn.stream);
        log::debug!("client {id} closed");
        drop(conn);
        self.feed(
            now,
            Input::ClientClosed {
                client: ClientId(id),
            },
        );
    }
}
