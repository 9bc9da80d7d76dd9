//! Peer links: the TCP links between the agents of a cluster.
//!
//! The shell's half of the cluster: a listener on `listen=`, a dialer that
//! keeps trying every other member with exponential backoff, the handshake
//! of [`handshake`] (version, cluster name, membership, unique server names,
//! the shared secret), framing, and bounded buffers. The core sees a link
//! only once its handshake is done (`Input::PeerUp`), then every line of it
//! (`Input::PeerLine`, read by the core) and its end (`Input::PeerDown`);
//! heartbeats, membership and the lock protocol are the core's.
//!
//! One link per pair of members. Both dial each other (a member that can
//! only be reached one way still links up), so both may dial at once: the
//! link dialed by the member with the smaller `listen` address, compared as
//! numbers, is kept, and the other is closed before it is up. Each side
//! decides alone and both decide the same. An agent dials a member only
//! while it has no link with it, so a second authenticated link from a
//! member means the member gave the old one up (it restarted, or that link
//! died without this side noticing yet): the new one replaces it.
//!
//! Misbehaving peers cost only their own link: an unparsable (the core
//! says so once the link is up) or oversized line, a failed proof, a
//! handshake not done in time, or more unsent bytes than [`max_unsent`]
//! allows closes that link.

mod admit;
pub mod handshake;
mod link;

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::ops::Range;
use std::time::Duration;

use log::Level;
use mio::event::Event;
use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use snaplock_proto::wire::{self, Frame};
use snaplock_proto::{Input, Now, PeerId, Time};
use socket2::{Domain, Protocol, SockRef, Socket, TcpKeepalive, Type};

use crate::AgentError;
use crate::config::AgentConfig;
use crate::logging::RateLimit;
use crate::members::check_members;
use crate::outbuf::{FlushOutcome, ReadOutcome};
use crate::secret::Secret;
use handshake::Local;
use link::{Link, State};

/// The peer listener's token.
pub(crate) const LISTENER: Token = Token(3);
/// Link tokens: this plus the link's number, never reused; far above the
/// client tokens, which count up from 16.
const FIRST_TOKEN: usize = 1 << 40;

/// Longest peer line, in bytes; longer closes the link.
pub const MAX_LINE: usize = 1 << 20;
/// Unsent bytes a link may have at least; beyond [`max_unsent`], the peer
/// is not reading and the link is closed.
pub const MAX_UNSENT: usize = 64 << 20;
/// Bytes a handover may need per ticket on one link: a report names each
/// held ticket twice (in its leader table and as its home's), on lines of
/// a few hundred bytes.
pub const UNSENT_PER_TICKET: usize = 1024;

/// Unsent bytes a link may have: a handover sends every held ticket to
/// the new epoch's collector and on to the other leaders in one go, so the
/// bound grows with `max_tickets`; a peer that reads nothing still loses
/// its link once that much waits for it.
pub fn max_unsent(max_tickets: usize) -> usize {
    MAX_UNSENT.max(max_tickets.saturating_mul(UNSENT_PER_TICKET))
}
/// How long a link may take from its first byte (or its dialing) to up.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a refused link may take to read its `REFUSE`.
const REFUSE_LINGER: Duration = Duration::from_secs(1);
/// The first wait before dialing a member again; it doubles per failure.
pub const BACKOFF_MIN: Duration = Duration::from_millis(50);
/// The longest wait before dialing a member again.
pub const BACKOFF_MAX: Duration = Duration::from_secs(2);
/// Accepted connections still in their handshake at once; more are closed
/// at once, so a flood of connections costs a bounded amount.
const MAX_HANDSHAKES: usize = 64;
const READ_BUF: usize = 64 << 10;

/// Room kept for the lines waiting for the core once they are read: more
/// is given back after a burst.
const LINES_KEPT: usize = 4 * READ_BUF;

/// What the core is told, in the order it happened.
pub(crate) enum Pending {
    /// An input as it is.
    Input(Input),
    /// A line on an up link ([`Input::PeerLine`]), its bytes at `at` in
    /// the lines read ([`Peers::line`]).
    Line {
        /// The link.
        peer: PeerId,
        /// Where its bytes are.
        at: Range<usize>,
    },
}

/// Queues a line read on the up link `peer`, its bytes after the others'.
fn push_line(inputs: &mut VecDeque<Pending>, lines: &mut Vec<u8>, peer: PeerId, line: &[u8]) {
    if inputs.is_empty() {
        // Every line before was handed to the core: their room is free,
        // and a burst (an epoch's state) does not keep its room for good.
        lines.clear();
        if lines.capacity() > LINES_KEPT {
            lines.shrink_to(LINES_KEPT);
        }
    }
    let start = lines.len();
    lines.extend_from_slice(line);
    inputs.push_back(Pending::Line {
        peer,
        at: start..lines.len(),
    });
}
const READ_BUDGET: usize = 16;
const ACCEPT_BUDGET: usize = 64;
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Whether `token` is a link's.
pub(crate) fn owns(token: Token) -> bool {
    token.0 >= FIRST_TOKEN
}

fn token(id: u64) -> Token {
    Token(FIRST_TOKEN + id as usize)
}

/// `N` bytes from the kernel's random source: the seeds of the core and of
/// the challenges, which an attacker must not be able to guess.
pub(crate) fn urandom<const N: usize>() -> io::Result<[u8; N]> {
    use std::io::Read;
    let mut bytes = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// Another member, by its `listen` address, and when to dial it.
struct Member {
    addr: SocketAddr,
    next_dial: Time,
    backoff: Duration,
    /// Its being unreachable was logged since the last link with it.
    unreachable_logged: bool,
}

/// Every peer link, the listener and the dialer.
pub(crate) struct Peers {
    /// `None`: no `listen=`, no cluster links at all.
    local: Option<Local>,
    secret: Secret,
    listener: Option<TcpListener>,
    members: Vec<Member>,
    links: BTreeMap<u64, Link>,
    next_id: u64,
    rng: StdRng,
    inputs: VecDeque<Pending>,
    /// The bytes of the lines in `inputs`, back to back: a line read costs
    /// no allocation of its own.
    lines: Vec<u8>,
    dirty: Vec<u64>,
    read_again: Vec<u64>,
    /// The up links whose socket did not take all their lines, after
    /// the latest flush (told to the core).
    backlog: Vec<PeerId>,
    accept_at: Option<Time>,
    stopping: bool,
    read_buf: Box<[u8]>,
    /// [`max_unsent`] of the configuration.
    max_unsent: usize,
    /// Lines about connections nobody vouched for ([`Peers::log_stranger`]).
    stranger_log: RateLimit,
    accept_errors: RateLimit,
}

/// Lines about unauthenticated connections logged per 10 s at most.
const STRANGER_LINES: u32 = 5;

impl Peers {
    /// Reads the secret, listens on `listen=` and plans to dial every other
    /// member at once. `seed` seeds the challenges and the dial jitter.
    pub(crate) fn new(
        cfg: &AgentConfig,
        registry: &Registry,
        seed: [u8; 32],
        now: Now,
    ) -> Result<Peers, AgentError> {
        let mut peers = Peers {
            local: None,
            secret: Secret::default(),
            listener: None,
            members: Vec::new(),
            links: BTreeMap::new(),
            next_id: 1,
            rng: StdRng::from_seed(seed),
            inputs: VecDeque::new(),
            lines: Vec::new(),
            dirty: Vec::new(),
            read_again: Vec::new(),
            backlog: Vec::new(),
            accept_at: None,
            stopping: false,
            read_buf: vec![0; READ_BUF].into_boxed_slice(),
            max_unsent: max_unsent(cfg.core.max_tickets),
            stranger_log: RateLimit::with_burst(STRANGER_LINES),
            accept_errors: RateLimit::new(),
        };
        let cluster = &cfg.core.cluster;
        let Some(listen) = cluster.listen else {
            check_members(None, &cluster.neighbors, true).map_err(AgentError::Config)?;
            return Ok(peers);
        };
        let others: Vec<SocketAddr> = cluster
            .members()
            .into_iter()
            .filter(|a| *a != listen)
            .collect();
        check_members(Some(listen), &others, cfg.secret_file.is_some())
            .map_err(AgentError::Config)?;
        if let Some(path) = &cfg.secret_file {
            let (secret, warning) = Secret::load(path).map_err(AgentError::Config)?;
            if let Some(w) = warning {
                log::warn!("{w}");
            }
            peers.secret = secret;
        } else if !others.is_empty() {
            log::warn!(
                "no secret_file: the cluster is unauthenticated, and only agents on loopback addresses may link up"
            );
        }
        let mut listener = bind(listen).map_err(|source| AgentError::Io {
            context: format!("cannot listen for peers on {listen}"),
            source,
        })?;
        registry
            .register(&mut listener, LISTENER, Interest::READABLE)
            .map_err(|source| AgentError::Io {
                context: "cannot watch the peer listener".into(),
                source,
            })?;
        peers.listener = Some(listener);
        peers.members = others
            .iter()
            .map(|&addr| Member {
                addr,
                next_dial: now.mono,
                backoff: BACKOFF_MIN,
                unreachable_logged: false,
            })
            .collect();
        log::info!(
            "cluster {:?}: listening for peers on {listen}; {} other member(s){}{}",
            cfg.cluster_name,
            others.len(),
            if others.is_empty() { "" } else { ": " },
            others
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        peers.local = Some(Local {
            cluster: cfg.cluster_name.clone(),
            name: cfg.core.server_name.clone(),
            listen,
        });
        Ok(peers)
    }

    /// What the core is to be told next, in the order things happened.
    pub(crate) fn next_input(&mut self) -> Option<Pending> {
        self.inputs.pop_front()
    }

    /// The bytes of a [`Pending::Line`] (valid until the next line is read).
    pub(crate) fn line(&self, at: &Range<usize>) -> &[u8] {
        &self.lines[at.clone()]
    }

    /// Queues an input for the core.
    fn push_input(&mut self, input: Input) {
        self.inputs.push_back(Pending::Input(input));
    }

    /// Whether links have lines that were not written yet this iteration.
    pub(crate) fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// The up links with lines their socket did not take yet.
    pub(crate) fn backlog(&mut self) -> &[PeerId] {
        self.backlog.clear();
        for (id, l) in &self.links {
            if l.state == State::Up && l.pending() > 0 {
                self.backlog.push(PeerId(*id));
            }
        }
        &self.backlog
    }

    /// Whether reads were left for the next iteration (poll without sleeping).
    pub(crate) fn busy(&self) -> bool {
        !self.read_again.is_empty()
    }

    /// The earliest dial, handshake deadline or accept retry.
    pub(crate) fn next_deadline(&self) -> Option<Time> {
        let links = self.links.values().filter_map(|l| l.deadline);
        let dials = self
            .members
            .iter()
            .filter(|m| !self.stopping && !self.has_link(m.addr))
            .map(|m| m.next_dial);
        links.chain(dials).chain(self.accept_at).min()
    }

    /// No more accepting or dialing; the links stay for the last lines.
    pub(crate) fn stop(&mut self, registry: &Registry) {
        self.stopping = true;
        if let Some(mut listener) = self.listener.take() {
            let _ = registry.deregister(&mut listener);
        }
    }

    fn has_link(&self, member: SocketAddr) -> bool {
        self.links
            .values()
            .any(|l| l.member == Some(member) && l.state != State::Refusing)
    }

    fn mark_dirty(dirty: &mut Vec<u64>, id: u64, link: &mut Link) {
        if !link.dirty {
            link.dirty = true;
            dirty.push(id);
        }
    }

    fn new_challenge(&mut self) -> String {
        let mut random = [0u8; handshake::CHALLENGE_LEN];
        self.rng.fill_bytes(&mut random);
        handshake::challenge(random)
    }

    /// Logs a line about a connection that nobody vouched for (accepted,
    /// its handshake not done): whoever reaches the port can cause these
    /// by the thousand, so only [`STRANGER_LINES`] per 10 s go out at
    /// `level`, the next one counting those left out, and the rest at debug.
    fn log_stranger(&mut self, now: Time, level: Level, line: &str) {
        if level >= Level::Debug {
            return log::log!(level, "{line}");
        }
        match self.stranger_log.allow(now) {
            Some(0) => log::log!(level, "{line}"),
            Some(n) => log::log!(
                level,
                "{line} ({n} more lines about unauthenticated peer connections not logged)"
            ),
            None => log::debug!("{line}"),
        }
    }

    /// Closes a link, logging why; an up link is reported down.
    fn drop_link(&mut self, registry: &Registry, now: Now, id: u64, level: Level, why: &str) {
        let Some(mut link) = self.links.remove(&id) else {
            return;
        };
        let line = format!("peer {}: {why}", link.describe());
        if !link.outbound && link.state != State::Up {
            self.log_stranger(now.mono, level, &line);
        } else {
            log::log!(level, "{line}");
        }
        let _ = registry.deregister(&mut link.stream);
        let was_up = link.state == State::Up;
        if was_up {
            self.push_input(Input::PeerDown { peer: PeerId(id) });
        }
        // Only links this agent dialed, or that were up, set the redial:
        // anybody may connect and claim to be a member.
        if let Some(member) = link.member.filter(|_| was_up || link.outbound) {
            self.schedule_dial(member, now.mono, was_up);
        }
    }

    fn schedule_dial(&mut self, addr: SocketAddr, now: Time, was_up: bool) {
        if self.stopping || self.has_link(addr) {
            return;
        }
        let Some(m) = self.members.iter_mut().find(|m| m.addr == addr) else {
            return;
        };
        if was_up {
            m.backoff = BACKOFF_MIN;
        }
        // Jitter: two agents that lost each other at once do not redial in
        // lock step forever.
        let half = m.backoff / 2;
        let jitter = self.rng.random_range(0..=half.as_micros() as u64);
        m.next_dial = now + half + Duration::from_micros(jitter);
        m.backoff = (m.backoff * 2).min(BACKOFF_MAX);
    }

    fn unreachable(&mut self, addr: SocketAddr, e: &io::Error) {
        if let Some(m) = self.members.iter_mut().find(|m| m.addr == addr) {
            if m.unreachable_logged {
                log::debug!("member {addr}: cannot connect: {e}");
            } else {
                m.unreachable_logged = true;
                log::info!("member {addr}: cannot connect: {e}; retrying with backoff");
            }
        }
    }

    /// Dials the members that are due; closes the links whose handshake
    /// (or refusal) took too long; retries accepting after a pause.
    pub(crate) fn handle_timeout(&mut self, registry: &Registry, now: Now) {
        if self.accept_at.is_some_and(|t| t <= now.mono) {
            self.accept_at = None;
            self.accept(registry, now);
        }
        let expired: Vec<u64> = self
            .links
            .iter()
            .filter(|(_, l)| l.deadline.is_some_and(|d| d <= now.mono))
            .map(|(&id, _)| id)
            .collect();
        for id in expired {
            match self.links[&id].state {
                State::Refusing => self.drop_link(registry, now, id, Level::Debug, "refused"),
                State::Connecting => {
                    let addr = self.links[&id].remote;
                    let e = io::Error::new(io::ErrorKind::TimedOut, "connection timed out");
                    self.unreachable(addr, &e);
                    self.drop_link(registry, now, id, Level::Debug, "connection timed out");
                }
                _ => self.drop_link(
                    registry,
                    now,
                    id,
                    Level::Warn,
                    "handshake not finished within 5 s; closing",
                ),
            }
        }
        if self.stopping || self.listener.is_none() {
            return;
        }
        for i in 0..self.members.len() {
            let addr = self.members[i].addr;
            if self.members[i].next_dial <= now.mono && !self.has_link(addr) {
                self.dial(registry, now, addr);
            }
        }
    }

    fn dial(&mut self, registry: &Registry, now: Now, addr: SocketAddr) {
        let mut stream = match TcpStream::connect(addr) {
            Ok(s) => s,
            Err(e) => {
                self.unreachable(addr, &e);
                self.schedule_dial(addr, now.mono, false);
                return;
            }
        };
        tune(&stream);
        let id = self.next_id;
        self.next_id += 1;
        if let Err(e) = registry.register(
            &mut stream,
            token(id),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            log::warn!("member {addr}: cannot watch the connection: {e}");
            self.schedule_dial(addr, now.mono, false);
            return;
        }
        let mut link = Link::new(stream, State::Connecting, addr, MAX_LINE);
        link.member = Some(addr);
        link.deadline = Some(now.mono + HANDSHAKE_TIMEOUT);
        link.challenge = self.new_challenge();
        log::debug!("member {addr}: dialing (link {id})");
        self.links.insert(id, link);
    }

    /// Accepts what the listener has (a bounded number per call).
    pub(crate) fn accept(&mut self, registry: &Registry, now: Now) {
        for _ in 0..ACCEPT_BUDGET {
            let accepted = match &self.listener {
                Some(l) => l.accept(),
                None => return,
            };
            match accepted {
                Ok((stream, remote)) => self.open_inbound(registry, now, stream, remote),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) => {
                    // Out of file descriptors, say: the connection stays
                    // queued and no new edge may come, so retry on a timer.
                    if let Some(skipped) = self.accept_errors.allow(now.mono) {
                        log::warn!(
                            "cannot accept a peer connection: {e}; retrying in {} ms ({skipped} more such errors not logged)",
                            ACCEPT_PAUSE.as_millis()
                        );
                    }
                    self.accept_at = Some(now.mono + ACCEPT_PAUSE);
                    return;
                }
            }
        }
        self.accept_at = Some(now.mono);
    }

    fn open_inbound(
        &mut self,
        registry: &Registry,
        now: Now,
        stream: TcpStream,
        remote: SocketAddr,
    ) {
        let handshaking = self
            .links
            .values()
            .filter(|l| !l.outbound && l.state != State::Up)
            .count();
        if handshaking >= MAX_HANDSHAKES {
            let line = format!(
                "peer connection from {remote} closed: {MAX_HANDSHAKES} others are in their handshake"
            );
            return self.log_stranger(now.mono, Level::Warn, &line);
        }
        let mut stream = stream;
        tune(&stream);
        let id = self.next_id;
        self.next_id += 1;
        if let Err(e) = registry.register(&mut stream, token(id), Interest::READABLE) {
            let line = format!("cannot watch the peer connection from {remote}: {e}");
            return self.log_stranger(now.mono, Level::Warn, &line);
        }
        let mut link = Link::new(stream, State::AwaitConnect, remote, MAX_LINE);
        link.deadline = Some(now.mono + HANDSHAKE_TIMEOUT);
        link.challenge = self.new_challenge();
        log::debug!("peer connection from {remote} (link {id})");
        self.links.insert(id, link);
    }

    /// A readiness event on a link.
    pub(crate) fn event(&mut self, registry: &Registry, now: Now, token: Token, ev: &Event) {
        let id = (token.0 - FIRST_TOKEN) as u64;
        let Some(link) = self.links.get(&id) else {
            return;
        };
        if link.state == State::Connecting {
            match link.connected() {
                Ok(false) => return,
                Ok(true) => self.on_connected(id),
                Err(e) => {
                    let addr = link.remote;
                    self.unreachable(addr, &e);
                    self.drop_link(registry, now, id, Level::Debug, "cannot connect");
                    return;
                }
            }
        }
        let gone = ev.is_error() || ev.is_write_closed();
        if ev.is_read_closed() || gone {
            if let Some(link) = self.links.get_mut(&id) {
                link.eof_pending = true;
            }
        }
        if ev.is_readable() || ev.is_read_closed() || gone {
            self.read_link(registry, now, id, gone);
        }
        let Some(link) = self.links.get_mut(&id) else {
            return;
        };
        if gone {
            self.drop_link(registry, now, id, Level::Info, "connection lost");
        } else if ev.is_writable() && link.pending() > 0 {
            Self::mark_dirty(&mut self.dirty, id, link);
        }
    }

    fn on_connected(&mut self, id: u64) {
        let (Some(local), Some(link)) = (&self.local, self.links.get_mut(&id)) else {
            return;
        };
        log::debug!("peer {}: connected, sending CONNECT", link.describe());
        link.state = State::AwaitAccept;
        link.queue(&handshake::connect(local, &link.challenge));
        Self::mark_dirty(&mut self.dirty, id, link);
    }

    /// Reads links whose read budget ran out in the previous iteration.
    pub(crate) fn resume(&mut self, registry: &Registry, now: Now) {
        for id in std::mem::take(&mut self.read_again) {
            if let Some(link) = self.links.get_mut(&id) {
                link.read_again = false;
                self.read_link(registry, now, id, false);
            }
        }
    }

    fn read_link(&mut self, registry: &Registry, now: Now, id: u64, unbounded: bool) {
        for reads in 0.. {
            let Some(link) = self.links.get_mut(&id) else {
                return;
            };
            if reads == READ_BUDGET && !unbounded {
                if !link.read_again {
                    link.read_again = true;
                    self.read_again.push(id);
                }
                return;
            }
            match link.read(&mut self.read_buf) {
                // A refused peer's bytes are read only to see its EOF.
                ReadOutcome::Data(_) if link.state == State::Refusing => {}
                ReadOutcome::Data(n) => {
                    link.framer
                        .buffer_mut()
                        .extend_from_slice(&self.read_buf[..n]);
                    // A short read emptied the socket, and bytes arriving
                    // later raise a new edge: skip the read that would only
                    // say EAGAIN (unless an EOF is known to be there).
                    let emptied = n < self.read_buf.len() && !link.eof_pending;
                    self.process_lines(registry, now, id);
                    if emptied {
                        return;
                    }
                }
                ReadOutcome::WouldBlock => return,
                ReadOutcome::Eof => {
                    let level = match link.state {
                        State::Refusing => Level::Debug,
                        _ => Level::Info,
                    };
                    self.drop_link(registry, now, id, level, "closed by the other side");
                    return;
                }
                ReadOutcome::Failed => {
                    self.drop_link(registry, now, id, Level::Info, "connection failed");
                    return;
                }
            }
        }
    }

    fn process_lines(&mut self, registry: &Registry, now: Now, id: u64) {
        loop {
            let Some(link) = self.links.get_mut(&id) else {
                return;
            };
            if link.state == State::Refusing {
                return;
            }
            let parsed = match link.framer.next_line() {
                None => return,
                Some(Frame::Line([])) => continue,
                // On a link that is up, every line is the core's, but the
                // other side's taking back its acceptance.
                Some(Frame::Line(line)) if link.state == State::Up && !is_refuse(line) => {
                    let (inputs, lines) = (&mut self.inputs, &mut self.lines);
                    push_line(inputs, lines, PeerId(id), line);
                    continue;
                }
                Some(Frame::Line(line)) => wire::parse(line).map_err(|e| {
                    let shown = String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned();
                    format!("unparsable line ({e}): {shown:?}; closing the link")
                }),
                Some(Frame::TooLong { .. }) => Err(format!(
                    "line longer than {MAX_LINE} bytes; closing the link"
                )),
            };
            match parsed {
                Ok(msg) => self.on_message(registry, now, id, msg),
                Err(why) => {
                    self.drop_link(registry, now, id, Level::Warn, &why);
                    return;
                }
            }
        }
    }

    /// The core's `PeerSend`: queued on an up link, dropped otherwise.
    pub(crate) fn send(&mut self, registry: &Registry, now: Now, peer: PeerId, line: &[u8]) {
        let Some(link) = self.links.get_mut(&peer.0) else {
            return;
        };
        if link.state != State::Up {
            return;
        }
        link.queue_line(line);
        let max = self.max_unsent;
        if link.pending() > max && (link.flush() == FlushOutcome::Failed || link.pending() > max) {
            let why = format!(
                "more than {max} bytes unsent: the other agent does not read; closing the link"
            );
            return self.drop_link(registry, now, peer.0, Level::Warn, &why);
        }
        Self::mark_dirty(&mut self.dirty, peer.0, link);
    }

    /// The core's `PeerClose`: closed now, reported down.
    pub(crate) fn close(&mut self, registry: &Registry, now: Now, peer: PeerId) {
        self.drop_link(
            registry,
            now,
            peer.0,
            Level::Info,
            "closed by the cluster protocol (silent or misbehaving peer)",
        );
    }

    /// Writes every link with new lines; finishes refusals.
    pub(crate) fn flush(&mut self, registry: &Registry, now: Now) {
        let mut dirty = std::mem::take(&mut self.dirty);
        for &id in &dirty {
            let Some(link) = self.links.get_mut(&id) else {
                continue;
            };
            link.dirty = false;
            match link.flush() {
                FlushOutcome::Failed => {
                    self.drop_link(registry, now, id, Level::Info, "connection failed");
                    continue;
                }
                // Shut down the writing side and read until the peer's EOF:
                // closing with its bytes unread would reset the connection
                // and could destroy the REFUSE before it is read.
                FlushOutcome::Empty if link.state == State::Refusing => {
                    let _ = link.stream.shutdown(Shutdown::Write);
                }
                FlushOutcome::Empty | FlushOutcome::Pending => {}
            }
            if let Err(e) = link.update_interest(registry, token(id)) {
                let why = format!("cannot watch the connection: {e}");
                self.drop_link(registry, now, id, Level::Warn, &why);
            }
        }
        // Its room kept for the next iteration's, unless links were marked
        // meanwhile.
        if self.dirty.is_empty() {
            dirty.clear();
            self.dirty = dirty;
        }
    }
}

fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // A restarted agent binds again at once, its old links in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(128)?;
    socket.set_nonblocking(true)?;
    Ok(TcpListener::from_std(socket.into()))
}

/// No Nagle delay (heartbeats are small lines that must leave at once);
/// TCP keepalive as a backstop for a peer that vanished without a word
/// while the link is quiet.
fn tune(stream: &TcpStream) {
    let socket = SockRef::from(stream);
    if let Err(e) = socket.set_tcp_nodelay(true) {
        log::debug!("cannot set TCP_NODELAY on a peer link: {e}");
    }
    let keepalive = TcpKeepalive::new()
        .with_time(Duration::from_secs(10))
        .with_interval(Duration::from_secs(2));
    if let Err(e) = socket.set_tcp_keepalive(&keepalive) {
        log::debug!("cannot set TCP keepalive on a peer link: {e}");
    }
}

/// Whether `line`'s command is `REFUSE`, whatever its prefixes: the first
/// word ends with it, or a `<server:service ` prefix comes first. Asked of
/// every line of a link that is up, so the full check only for those.
fn is_refuse(line: &[u8]) -> bool {
    let word = &line[..line.iter().position(|&b| b == b' ').unwrap_or(line.len())];
    (word.ends_with(b"REFUSE") || line.first() == Some(&b'<'))
        && wire::command_of(line) == Some("REFUSE")
}

#[cfg(test)]
mod tests;
