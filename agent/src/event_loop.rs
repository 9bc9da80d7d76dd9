//! The single-threaded mio loop around the core.
//!
//! One iteration:
//!
//! ```text
//! poll (until the earliest of: core timer, accept pause, linger, stop deadline, dial, handshake deadline)
//! now = clock.now()                                  -- one `now` for the whole iteration
//! for each event: accept / read signals / queue the client / peer links -> core.handle_input -> drain
//! serve queued clients, in turns, within the iteration's budget; resume accepting
//! dial peers that are due, end handshakes that took too long -> drain
//! core.handle_timeout(now) -> drain
//! flush every link, then every connection, with new lines (one write each), close the finished ones
//! ```
//!
//! Peer links ([`crate::peers`]) live in the same loop: their inputs reach
//! the core through the same `drain`, in the order they happened.
//!
//! `drain` appends each reply to its connection's buffer; nothing is written
//! until the end of the iteration, so replies produced by one wake-up leave
//! in one `write` per client. The shell decides nothing about locks: every
//! answer comes out of the core.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::sync::Arc;
use std::time::Duration;

use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token, Waker};
use snaplock_proto::cluster::Persisted;
use snaplock_proto::{Core, Input, Now, Output, Reply, Time};

use crate::clock::Clock;
use crate::config::{AgentConfig, LogSource};
use crate::conn::Conn;
use crate::listen::{self, SocketFile};
use crate::logging::RateLimit;
use crate::metrics_http::{self, MetricsServer};
use crate::notify::Notifier;
use crate::peers::{self, Peers, Pending};
use crate::signals::{self, Signals};
use crate::state::{self, StateFile};
use crate::units::{self, Units};
use crate::{AgentError, AgentHandle, Control};

mod clients;

use clients::Budget;

const LISTENER: Token = Token(0);
const SIGNALS: Token = Token(1);
const WAKER: Token = Token(2);
/// `communicator_listen`'s listener (3 is the peers' listener).
const COMMUNICATOR: Token = Token(6);
/// Client tokens start here and are never reused, so a late event for a
/// closed connection cannot reach a new one.
const FIRST_CLIENT: u64 = 16;

const READ_BUF: usize = 64 << 10;
/// Accepts per iteration: a burst of connections waits in the backlog
/// rather than delay the others' replies, the peer links and the timers.
const ACCEPT_BUDGET: usize = 256;
/// How long accepting pauses when the process is out of file descriptors.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// How long a stopping agent tries to deliver its last replies.
const STOP_FLUSH: Duration = Duration::from_secs(1);
/// How long a connection the core closed may take to read its last replies.
const CLOSE_LINGER: Duration = Duration::from_secs(5);
/// Longest sleep: a bound, not a timer; waking changes nothing.
const MAX_SLEEP: Duration = Duration::from_secs(3600);
/// Bytes of a bad line handed to the core for its `INVALID` reply.
const ECHO: usize = 256;

/// Client ids are sequential, so a multiplicative hash spreads them well
/// at a fraction of SipHash's cost on the per-message lookup.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type ConnMap = HashMap<u64, Conn, BuildHasherDefault<IdHasher>>;

/// The agent's state between two iterations.
pub(crate) struct EventLoop {
    poll: Poll,
    clock: Clock,
    core: Core,
    listener: Option<UnixListener>,
    /// `communicator_listen`, when set ([`crate::communicator`]).
    comm_listener: Option<TcpListener>,
    /// `metrics_listen`, when set ([`crate::metrics_http`]).
    metrics: Option<MetricsServer>,
    /// This agent's server name, which communicator sessions address by.
    server_name: String,
    socket_file: SocketFile,
    signals: Option<Signals>,
    notifier: Option<Notifier>,
    handle: AgentHandle,
    _waker: Arc<Waker>,
    log_source: LogSource,
    /// `acl_file`, read again on `SIGHUP`.
    acl_file: Option<std::path::PathBuf>,
    conns: ConnMap,
    next_id: u64,
    /// Connections with replies to write at the end of the iteration.
    dirty: Vec<u64>,
    /// The previous `dirty`, kept for its capacity.
    flushing: Vec<u64>,
    /// Connections to close at the end of the iteration.
    to_close: Vec<u64>,
    /// Connections to serve that were idle, served first ([`clients`]).
    fresh: clients::Ready,
    /// Connections to serve, in turn.
    ready: clients::Ready,
    /// Paused connections, by when they were paused.
    paused: BTreeSet<(Time, u64)>,
    /// Bytes all clients hold: unsent replies and requests not served yet.
    held: usize,
    /// `max_pending_total`.
    max_total: usize,
    total_drops: RateLimit,
    accept_again: bool,
    accept_paused_until: Option<Time>,
    accept_errors: RateLimit,
    /// Connections being closed that still have replies to deliver.
    lingering: BTreeSet<(Time, u64)>,
    read_buf: Box<[u8]>,
    max_line: usize,
    max_pending: usize,
    stop_deadline: Option<Time>,
    /// `busy_poll`, and when the loop last had an event.
    busy_poll: Duration,
    last_busy: Option<Time>,
    peers: Peers,
    /// The record of epoch and fences, when kept ([`crate::state`]).
    state: Option<StateFile>,
    persist_errors: RateLimit,
    /// Clients' cgroups and their watches, where cgroup v2 is available
    /// ([`crate::units`]).
    units: Option<Units>,
    /// Cgroups found empty, to tell the core.
    empty_units: Vec<u64>,
}

impl EventLoop {
    /// Sets everything up: signals first, then the socket, then the core.
    pub(crate) fn new(cfg: AgentConfig, control: &Control) -> Result<EventLoop, AgentError> {
        let signals = if control.signals {
            Some(Signals::new().map_err(|source| AgentError::Io {
                context: "cannot set up signals".into(),
                source,
            })?)
        } else {
            None
        };
        let mut cfg = cfg;
        let seed = peers::urandom::<40>().map_err(|source| AgentError::Io {
            context: "cannot read /dev/urandom".into(),
            source,
        })?;
        let (core_seed, peer_seed) = seed.split_at(8);
        if cfg.core.cluster.seed == 0 {
            cfg.core.cluster.seed = u64::from_le_bytes(core_seed.try_into().expect("8 bytes"));
        }
        if cfg.core.cluster.pid == 0 {
            cfg.core.cluster.pid = std::process::id();
        }
        cfg.core.validate().map_err(AgentError::Config)?;
        cfg.check_buffer_limits().map_err(AgentError::Config)?;
        cfg.core.max_list_bytes = cfg.max_list_bytes();
        match listen::raise_nofile_limit() {
            Ok((soft, hard)) if soft < hard => {
                log::info!("open file limit raised from {soft} to {hard}")
            }
            Ok((_, hard)) => log::info!("open file limit: {hard}"),
            Err(e) => log::warn!("cannot raise the open file limit: {e}"),
        }
        let io_err = |context: &str| {
            let context = context.to_owned();
            move |source| AgentError::Io { context, source }
        };
        let poll = Poll::new().map_err(io_err("cannot create the event loop"))?;
        let (mut listener, socket_file) = listen::bind(&cfg)?;
        let registry = poll.registry();
        registry
            .register(&mut listener, LISTENER, Interest::READABLE)
            .map_err(io_err("cannot watch the socket"))?;
        let mut signals = signals;
        if let Some(s) = signals.as_mut() {
            registry
                .register(s, SIGNALS, Interest::READABLE)
                .map_err(io_err("cannot watch signals"))?;
        }
        let comm_listener = match cfg.communicator_listen {
            None => None,
            Some(addr) => {
                let mut l = TcpListener::bind(addr).map_err(io_err(&format!(
                    "cannot listen on {addr} (communicator_listen)"
                )))?;
                registry
                    .register(&mut l, COMMUNICATOR, Interest::READABLE)
                    .map_err(io_err("cannot watch communicator_listen"))?;
                log::info!("serving the snapcommunicator session on {addr}");
                Some(l)
            }
        };
        let metrics = match cfg.metrics_listen {
            None => None,
            Some(addr) => {
                let server = MetricsServer::bind(registry, addr)
                    .map_err(io_err(&format!("cannot listen on {addr} (metrics_listen)")))?;
                log::info!("serving GET /metrics on {addr}");
                Some(server)
            }
        };
        let waker =
            Arc::new(Waker::new(registry, WAKER).map_err(io_err("cannot create the stop handle"))?);
        control.handle.install_waker(Arc::clone(&waker));
        let notifier = cfg
            .notify_socket
            .as_deref()
            .and_then(|name| match Notifier::new(name) {
                Ok(n) => Some(n),
                Err(e) => {
                    log::warn!("NOTIFY_SOCKET={name:?} is unusable: {e}");
                    None
                }
            });
        let (state, record) = state::open(&cfg.state_dir, &cfg.core.server_name)?;
        cfg.core.cluster.persisted = record;
        let clock = Clock::start();
        let peers = Peers::new(
            &cfg,
            poll.registry(),
            peer_seed.try_into().expect("32 bytes"),
            clock.now(),
        )?;
        log::info!(
            "snaplockd {} serving as {:?} on {} ({})",
            snaplock_proto::VERSION,
            cfg.core.server_name,
            socket_file.path().display(),
            match cfg.core.cluster.members().len() {
                0 | 1 => "single-computer cluster".to_owned(),
                n => format!("cluster of {n}"),
            }
        );
        if let (Some(path), Some(acl)) = (&cfg.acl_file, &cfg.core.acl) {
            log::info!(
                "access rules: {} rules from the acl_file {}",
                acl.rules.len(),
                path.display()
            );
        }
        let server_name = cfg.core.server_name.clone();
        let units = Units::new(poll.registry());
        Ok(EventLoop {
            poll,
            core: Core::new(cfg.core, clock.now()),
            clock,
            listener: Some(listener),
            comm_listener,
            metrics,
            server_name,
            socket_file,
            signals,
            notifier,
            handle: control.handle.clone(),
            _waker: waker,
            log_source: cfg.log_source,
            acl_file: cfg.acl_file,
            conns: ConnMap::default(),
            next_id: FIRST_CLIENT,
            dirty: Vec::new(),
            flushing: Vec::new(),
            to_close: Vec::new(),
            fresh: clients::Ready::new(),
            ready: clients::Ready::new(),
            paused: BTreeSet::new(),
            held: 0,
            max_total: cfg.max_pending_total,
            total_drops: RateLimit::new(),
            accept_again: false,
            accept_paused_until: None,
            accept_errors: RateLimit::new(),
            state,
            persist_errors: RateLimit::new(),
            lingering: BTreeSet::new(),
            read_buf: vec![0; READ_BUF].into_boxed_slice(),
            max_line: cfg.max_line_length,
            max_pending: cfg.max_pending_output,
            stop_deadline: None,
            busy_poll: cfg.busy_poll,
            last_busy: None,
            peers,
            units,
            empty_units: Vec::new(),
        })
    }

    /// Serves until stopped.
    pub(crate) fn run(mut self) -> Result<(), AgentError> {
        self.handle
            .set_listening(self.socket_file.path().to_owned());
        if let Some(n) = &self.notifier {
            n.notify("READY=1");
        }
        // A stop asked for before the waker existed woke nobody.
        if self.handle.stop_requested() {
            self.begin_stop(self.clock.now(), "stop requested");
        }
        let mut events = Events::with_capacity(1024);
        let result = loop {
            let before = self.clock.now();
            if let Some(deadline) = self.stop_deadline {
                if self.conns.is_empty() || before.mono >= deadline {
                    break Ok(());
                }
            }
            let timeout = self.timeout(before);
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                break Err(AgentError::Io {
                    context: "the event loop failed".into(),
                    source: e,
                });
            }
            let now = self.clock.now();
            if !events.is_empty() {
                self.last_busy = Some(now.mono);
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER | COMMUNICATOR => self.accept(now),
                    SIGNALS => self.read_signals(now),
                    WAKER => {}
                    units::TOKEN => self.read_units(now),
                    peers::LISTENER => self.peers.accept(self.poll.registry(), now),
                    metrics_http::LISTENER => {
                        if let Some(m) = self.metrics.as_mut() {
                            m.accept(self.poll.registry(), now);
                        }
                    }
                    token if metrics_http::owns(token) => {
                        let core = &self.core;
                        if let Some(m) = self.metrics.as_mut() {
                            m.event(self.poll.registry(), now, token, || core.metrics_text(now));
                        }
                    }
                    token if peers::owns(token) => {
                        self.peers.event(self.poll.registry(), now, token, ev)
                    }
                    Token(id) => self.conn_event(id as u64, ev),
                }
            }
            if self.stop_deadline.is_none() && self.handle.stop_requested() {
                self.begin_stop(now, "stop requested");
            }
            if self.units.as_ref().is_some_and(|u| u.more) {
                self.read_units(now);
            }
            self.resume(now);
            self.peers.handle_timeout(self.poll.registry(), now);
            if let Some(m) = self.metrics.as_mut() {
                if m.accept_again() {
                    m.accept(self.poll.registry(), now);
                }
                m.handle_timeout(self.poll.registry(), now);
            }
            self.drain(now);
            self.core.handle_timeout(now);
            self.drain(now);
            self.flush_and_close(now);
        };
        if !self.conns.is_empty() {
            log::info!(
                "closing {} connections that did not read their last replies",
                self.conns.len()
            );
        }
        self.socket_file.remove();
        result
    }

    /// How long `poll` may sleep: until the earliest deadline, rounded up
    /// to the millisecond so a timer is never polled for just before it is due.
    fn timeout(&self, now: Now) -> Option<Duration> {
        if !self.ready.is_empty()
            || !self.fresh.is_empty()
            || self.accept_again
            || self.peers.busy()
            || self
                .metrics
                .as_ref()
                .is_some_and(MetricsServer::accept_again)
            || self.units.as_ref().is_some_and(|u| u.more)
        {
            return Some(Duration::ZERO);
        }
        // `busy_poll`: right after serving, poll without sleeping for a
        // while, so a client's next request is read without a wake-up.
        if self
            .last_busy
            .is_some_and(|busy| now.mono < busy + self.busy_poll)
        {
            return Some(Duration::ZERO);
        }
        let shell = [
            self.accept_paused_until,
            self.lingering.first().map(|&(t, _)| t),
            self.stop_deadline,
        ];
        let next = shell
            .into_iter()
            .flatten()
            .chain(self.core.poll_timeout())
            .chain(self.peers.next_deadline())
            .chain(self.metrics.as_ref().and_then(MetricsServer::next_deadline))
            .min()?;
        let us = next.saturating_since(now.mono).as_micros();
        Some(
            Duration::from_millis(u64::try_from(us.div_ceil(1000)).unwrap_or(u64::MAX))
                .min(MAX_SLEEP),
        )
    }

    fn feed(&mut self, now: Now, input: Input) {
        if let Err(e) = self.core.handle_input(now, input) {
            log::error!("the core refused an input (a bug in snaplockd): {e}");
            debug_assert!(false, "the core refused an input: {e}");
        }
        self.drain(now);
    }

    /// Routes the core's outputs to the connections' and links' buffers,
    /// and hands the core what the links reported meanwhile (a link the
    /// core closed is reported down), until neither has more.
    fn drain(&mut self, now: Now) {
        loop {
            self.route_outputs(now);
            if let Some(unit) = self.empty_units.pop() {
                if let Err(e) = self.core.handle_input(now, Input::UnitEmpty { unit }) {
                    log::error!("the core refused a cgroup's end (a bug in snaplockd): {e}");
                    debug_assert!(false, "the core refused a cgroup's end: {e}");
                }
                continue;
            }
            let handled = match self.peers.next_input() {
                None => return,
                Some(Pending::Input(input)) => self.core.handle_input(now, input),
                Some(Pending::Line { peer, at }) => {
                    (self.core).handle_peer_line(now, peer, self.peers.line(&at))
                }
            };
            if let Err(e) = handled {
                log::error!("the core refused a peer input (a bug in snaplockd): {e}");
                debug_assert!(false, "the core refused a peer input: {e}");
            }
        }
    }

    fn route_outputs(&mut self, now: Now) {
        while let Some(out) = self.core.poll_output() {
            match out {
                Output::Reply { client, reply } => match reply {
                    Reply::Message(msg) => self.queue_reply(client.0, &msg),
                    Reply::Line(line) => {
                        self.queue_reply_line(client.0, &line);
                        self.core.recycle_line(line);
                    }
                },
                Output::Close { client } => self.close_after_flush(client.0),
                Output::PeerSend { peer, line } => {
                    self.peers.send(self.poll.registry(), now, peer, &line);
                    self.core.recycle_line(line);
                }
                Output::PeerClose { peer } => self.peers.close(self.poll.registry(), now, peer),
                Output::Persist(record) => self.persist(now, &record),
                Output::WatchUnit { unit, client } => self.watch_unit(now, unit, client.0),
                Output::UnwatchUnit { unit } => {
                    if let Some(units) = self.units.as_mut() {
                        units.unwatch(unit);
                    }
                }
            }
        }
    }

    /// Watches `unit` as the core asks, by the directory `client` was in;
    /// one that is empty already, or cannot be watched, is reported empty.
    fn watch_unit(&mut self, now: Now, unit: u64, client: u64) {
        let dir = self
            .conns
            .get(&client)
            .and_then(|c| c.cgroup_dir.as_deref());
        let empty = match self.units.as_mut() {
            Some(units) => units.watch(now.mono, unit, dir),
            None => true, // cannot be: no cgroup is known without them
        };
        if empty {
            self.empty_units.push(unit);
        }
    }

    /// What inotify says about the watched cgroups.
    fn read_units(&mut self, now: Now) {
        if let Some(units) = self.units.as_mut() {
            let empty = units.read(now.mono);
            self.empty_units.extend(empty);
            self.drain(now);
        }
    }

    /// Writes the record before anything queued after it leaves (replies
    /// and peer lines are written at the end of the iteration).
    fn persist(&mut self, now: Now, record: &Persisted) {
        let Some(file) = &self.state else { return };
        if let Err(e) = file.save(record) {
            if let Some(quiet) = self.persist_errors.allow(now.mono) {
                log::error!(
                    "cannot keep {record} in {}: {e}; after a restart this agent's fences \
                     rest on the wall clocks ({quiet} more failures since the last report)",
                    file.path().display()
                );
            }
        }
    }

    fn read_signals(&mut self, now: Now) {
        loop {
            let Some(signals) = self.signals.as_mut() else {
                return;
            };
            match signals.next_request() {
                Ok(Some(signals::Request::Stop(sig))) => self.begin_stop(now, sig.as_str()),
                Ok(Some(signals::Request::Reload)) => {
                    self.reload_log_level();
                    self.reload_acl();
                }
                Ok(None) => return,
                Err(e) => {
                    log::error!("cannot read signals: {e}");
                    return;
                }
            }
        }
    }

    fn reload_log_level(&self) {
        match self.log_source.reload() {
            Ok(Some(level)) => {
                // Set first: a raised level then shows its own announcement.
                log::set_max_level(level);
                log::info!("SIGHUP: log level {level}");
            }
            Ok(None) => log::info!("SIGHUP: RUST_LOG is set and decides the log level"),
            Err(e) => log::warn!("SIGHUP: {e}; log level unchanged"),
        }
    }

    /// Reads `acl_file` again. A file that cannot be used leaves the rules
    /// in force as they were: a typo must not open or close the service.
    /// Names are resolved here, in the loop, as at start (bounded by the
    /// file's limits).
    fn reload_acl(&mut self) {
        let Some(path) = &self.acl_file else { return };
        match crate::config::acl::load(path, &crate::config::acl::System) {
            Ok(acl) => {
                log::info!(
                    "SIGHUP: {} rules from the acl_file {}",
                    acl.rules.len(),
                    path.display()
                );
                self.core.set_acl(Some(acl));
            }
            Err(e) => log::error!("SIGHUP: {e}; the previous access rules stay"),
        }
    }

    /// Graceful stop: no new clients; holders are told their locks are
    /// lost and waiters that they failed; replies get `STOP_FLUSH` to leave.
    fn begin_stop(&mut self, now: Now, why: &str) {
        if self.stop_deadline.is_some() {
            return;
        }
        log::info!("stopping ({why})");
        if let Some(n) = &self.notifier {
            n.notify("STOPPING=1");
        }
        if let Some(mut listener) = self.listener.take() {
            let _ = self.poll.registry().deregister(&mut listener);
        }
        if let Some(mut listener) = self.comm_listener.take() {
            let _ = self.poll.registry().deregister(&mut listener);
        }
        if let Some(metrics) = self.metrics.take() {
            metrics.stop(self.poll.registry());
        }
        self.socket_file.remove();
        self.peers.stop(self.poll.registry());
        self.core.shutdown(now);
        self.drain(now);
        for (&id, conn) in &mut self.conns {
            // As snapcommunicator told its services when it stopped.
            if let Some(stop) = conn.session.as_ref().and_then(|s| s.stop_message()) {
                if !conn.gone && !conn.peer_gone {
                    conn.queue(&stop);
                    Self::account(&mut self.held, conn);
                }
            }
            conn.closing = true;
            if !conn.dirty {
                conn.dirty = true;
                self.dirty.push(id);
            }
        }
        self.stop_deadline = Some(now.mono + STOP_FLUSH);
    }

    /// Work for clients within this iteration's budget (what readable
    /// events queued and what earlier iterations left), then accepts after
    /// a pause or past the budget, and lingering closes.
    fn resume(&mut self, now: Now) {
        self.serve_clients(now, &mut Budget::new());
        self.peers.resume(self.poll.registry(), now);
        if self.accept_paused_until.is_some_and(|t| now.mono >= t) {
            self.accept_paused_until = None;
            self.accept_again = true;
        }
        if std::mem::take(&mut self.accept_again) {
            self.accept(now);
        }
        while let Some(&(at, id)) = self.lingering.first() {
            if at > now.mono {
                break;
            }
            self.lingering.pop_first();
            if let Some(conn) = self.conns.get_mut(&id) {
                log::debug!("client {id}: did not read its last replies in time");
                Self::mark_gone(&mut self.to_close, id, conn);
            }
        }
    }

    /// Writes every link and connection with new lines (one write each) and
    /// closes the connections that are finished; closing one may release
    /// locks and so produce lines for others, hence the loop. Links first:
    /// a reply wakes its client, which may take this CPU before the agent
    /// writes on, and a peer's line waiting behind it delays a grant.
    fn flush_and_close(&mut self, now: Now) {
        loop {
            // Links that fail while writing are reported down, which may
            // give the core more to say.
            self.peers.flush(self.poll.registry(), now);
            self.flush_and_close_clients(now);
            self.drain(now);
            if self.dirty.is_empty() && self.to_close.is_empty() && !self.peers.has_dirty() {
                // What a full socket left for later: the collector's own
                // copy of a state waits while the others' is written.
                self.core.set_peer_backlog(self.peers.backlog());
                return;
            }
        }
    }
}
