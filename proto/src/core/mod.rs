//! The core: the whole client protocol as a state machine.
//!
//! One computer is its own and only leader here: every request is decided
//! by the local [`Table`]. The core owns no socket and reads no clock; see
//! the crate documentation for the run loop that drives it.

mod client;
mod cluster;
mod metrics;
mod progress;
mod shell;
mod trust;
mod tx;
pub mod unit;

use std::collections::{BTreeMap, VecDeque};

pub use crate::local::request::Defaults;
pub use shell::{Input, InputError, Malformed, Output, Reply};

pub use crate::cluster::ClusterConfig;
use crate::local::replies;
use crate::local::table::{self, State, Table, Timer};
use crate::time::{Now, Time};
use crate::vocab::{ClientId, PeerId};
use crate::wire::Message;

/// Most messages to itself an agent handles in one call (`drain_local`).
const LOCAL_BUDGET: usize = 64;

/// Who is at the other end of a client connection (`SO_PEERCRED`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The peer's process id.
    pub pid: Option<u32>,
    /// The peer's user id.
    pub uid: Option<u32>,
    /// The peer's group id.
    pub gid: Option<u32>,
    /// The peer's cgroup (v2), as the inode number of its directory; `None`
    /// where cgroup v2 is not available or the peer is in the root cgroup,
    /// which never empties. Locks taken with `owner=cgroup` are kept until
    /// it has no process left ([`Input::UnitEmpty`]).
    pub cgroup: Option<u64>,
}

/// The core's configuration: plain data, checked by [`Config::validate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// This computer's name: the first half of every ticket key.
    pub server_name: String,
    /// Most client connections at once; one more is told why and closed.
    pub max_clients: usize,
    /// Most tickets (held or waiting) per object; more: `error=overflow`.
    pub max_tickets_per_object: usize,
    /// Most tickets in all; more: `error=overflow`.
    pub max_tickets: usize,
    /// Values of absent `LOCK` parameters.
    pub defaults: Defaults,
    /// Largest `TICKETLIST` reply, in bytes of text; the rest is summarized.
    pub max_list_bytes: usize,
    /// The cluster this computer belongs to (none: a one-computer cluster).
    pub cluster: ClusterConfig,
    /// Bounds on the variables of lock transactions.
    pub tx: crate::local::tx::Limits,
    /// Who may lock which names (`acl_file`); `None` allows everything.
    /// Replaced at run time by [`Core::set_acl`].
    pub acl: Option<crate::local::acl::Acl>,
    /// What the per-name figures of `METRICS` cover.
    pub metrics: crate::metrics::MetricsConfig,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            server_name: "localhost".to_owned(),
            max_clients: 16_384,
            max_tickets_per_object: 1_000,
            max_tickets: 2_000_000,
            defaults: Defaults::default(),
            max_list_bytes: 1 << 20,
            cluster: ClusterConfig::default(),
            tx: crate::local::tx::Limits::default(),
            acl: None,
            metrics: crate::metrics::MetricsConfig::default(),
        }
    }
}

impl Config {
    /// Checks every value; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        let name = self.server_name.as_bytes();
        if !crate::wire::is_valid_name(name) {
            return Err(format!(
                "server_name {:?}: must be letters, digits or '_', not starting with a digit, at most 64",
                self.server_name
            ));
        }
        if self.max_clients == 0 {
            return Err("max_clients must be at least 1".to_owned());
        }
        if self.max_tickets_per_object == 0 {
            return Err("max_tickets_per_object must be at least 1".to_owned());
        }
        if self.max_tickets == 0 {
            return Err("max_tickets must be at least 1".to_owned());
        }
        let tx = &self.tx;
        if tx.per_client == 0 || tx.total == 0 || tx.namespaces == 0 {
            return Err("the bounds of transactions must be at least 1".to_owned());
        }
        self.metrics.validate()?;
        self.cluster.validate()
    }
}

/// Counters, for `INFO` and the agent's logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Open client connections.
    pub clients: usize,
    /// Objects with at least one ticket.
    pub objects: usize,
    /// Tickets, held or waiting.
    pub tickets: usize,
    /// Grants since start.
    pub grants: u64,
}

/// Who decides the requests of this agent's clients.
#[derive(Debug)]
pub(crate) enum Authority {
    /// One computer alone: its own table decides, with fences above its
    /// own epoch's base.
    Solo {
        /// Wall ms at start, never below the epoch of its record.
        epoch: u64,
        /// The last fence it granted with.
        last_fence: u64,
    },
    /// A member of a cluster: the leader that owns an object decides.
    Cluster,
}

impl Authority {
    /// Whether the leaders of a cluster decide.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Authority::Cluster)
    }
}

/// How many buffers of written peer lines a core keeps for reuse
/// ([`Core::recycle_line`]).
pub const SPARE_LINES: usize = 64;

/// The largest buffer of a peer line kept for reuse: the lines of a grant
/// are a few hundred bytes; a larger one (a state's) is let go.
pub const SPARE_LINE_BYTES: usize = 1024;

/// The sans-IO lock service of one computer.
#[derive(Debug)]
pub struct Core {
    pub(crate) config: Config,
    pub(crate) table: Table,
    clients: BTreeMap<ClientId, client::Client>,
    pub(crate) out: VecDeque<Output>,
    pub(crate) last_now: Time,
    next_ticket: u64,
    pub(crate) authority: Authority,
    grants: u64,
    pub(crate) stopping: bool,
    pub(crate) cluster: crate::cluster::Cluster,
    /// An owner's `ADDTICKET` not sent yet, to the leaders of the mask: it
    /// goes out before the next peer message, or with it when that is the
    /// vote on the same ticket (`Core::hold_add`).
    pub(crate) held_add: Option<(u8, crate::cluster::msg::PeerMsg)>,
    /// The namespaces of lock transactions.
    pub(crate) space: crate::local::tx::Space,
    /// The agent's start and call rate, for the trust contract.
    pub(crate) trust: crate::local::trust::Trust,
    /// Counters and histograms for `METRICS`.
    pub(crate) metrics: crate::metrics::Metrics,
    /// Waiting places and readiness told without asking again.
    progress: progress::Progress,
    /// The locks owned by cgroups (`owner=cgroup`).
    pub(crate) units: unit::Units,
    /// The object names read lately: client requests and peer messages
    /// share them.
    pub(crate) names: crate::vocab::NameCache,
    /// Buffers of peer lines the shell gave back ([`Core::recycle_line`]),
    /// for the next lines written.
    pub(crate) spare_lines: Vec<Vec<u8>>,
    /// Buffers an owner's decision uses again (`evaluate`): no allocation
    /// per grant.
    pub(crate) decide: cluster::Decide,
}

impl Core {
    /// A core with nothing held. `config` must have passed
    /// [`Config::validate`].
    pub fn new(config: Config, now: Now) -> Core {
        let cluster = crate::cluster::Cluster::new(&config.cluster, &config.server_name, now);
        // Alone, the fences start above the record's too: a clock set back
        // across a restart must not make them go back.
        let authority = if config.cluster.is_multi() {
            Authority::Cluster
        } else {
            Authority::Solo {
                epoch: (now.wall.0 / 1000).max(cluster.records.min_epoch).max(1),
                last_fence: cluster.records.fence_floor,
            }
        };
        // Alone, commits take fences above the epoch's base, as grants do,
        // so they keep growing across restarts given a sane clock.
        let tx_floor = match authority {
            Authority::Solo { epoch, .. } => crate::cluster::persist::fence_base(epoch),
            Authority::Cluster => 0,
        };
        let space = crate::local::tx::Space::new(config.tx, tx_floor);
        let metrics = crate::metrics::Metrics::new(&config.metrics);
        let mut core = Core {
            config,
            table: Table::default(),
            clients: BTreeMap::new(),
            out: VecDeque::new(),
            last_now: now.mono,
            next_ticket: 1,
            authority,
            grants: 0,
            stopping: false,
            cluster,
            held_add: None,
            space,
            trust: crate::local::trust::Trust::new(now.mono),
            metrics,
            progress: progress::Progress::default(),
            units: unit::Units::default(),
            names: crate::vocab::NameCache::default(),
            spare_lines: Vec::new(),
            decide: Default::default(),
        };
        if !core.authority.is_cluster() {
            core.persist();
        }
        core
    }

    /// The epoch on record: the cluster's, or this computer's alone.
    pub(crate) fn epoch_to_keep(&self) -> u64 {
        match self.authority {
            Authority::Solo { epoch, .. } => epoch,
            Authority::Cluster => self.cluster.epoch.number,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Replaces the access rules (`acl_file` read again on `SIGHUP`).
    /// They decide the requests that come after; what is held or waiting
    /// stays as it is.
    pub fn set_acl(&mut self, acl: Option<crate::local::acl::Acl>) {
        self.config.acl = acl;
    }

    /// The links on which lines handed out in [`Output::PeerSend`] still
    /// wait to be written (their socket is full), told by the shell after
    /// each flush. A collector installs its own copy of an epoch's state
    /// only once the copies for the other leaders are written, or half a
    /// `peer_timeout` after it first could, so that they read and install
    /// theirs while it installs its own; otherwise a million tickets left
    /// in its buffers wait the second it spends installing. Nothing else
    /// depends on it, and a shell that never tells it changes nothing but
    /// that timing.
    pub fn set_peer_backlog(&mut self, peers: &[PeerId]) {
        let backlog = &mut self.cluster.handover.send_backlog;
        backlog.clear();
        backlog.extend_from_slice(peers);
    }

    /// Feeds one input. Drain [`poll_output`](Self::poll_output) afterwards.
    pub fn handle_input(&mut self, now: Now, input: Input) -> Result<(), InputError> {
        self.advance(now)?;
        let handled = match input {
            Input::ClientOpened { client, cred } => self.client_opened(now, client, cred),
            Input::ClientMessage { client, msg } => self.client_message(now, client, msg),
            Input::ClientMalformed {
                client,
                line,
                error,
            } => self.client_malformed(client, &line, &error),
            Input::ClientClosed { client } => self.client_closed(now, client),
            Input::PeerUp { peer, name, addr } => self.peer_up(now, peer, name, addr),
            Input::PeerLine { peer, line } => self.peer_line(now, peer, &line),
            Input::PeerDown { peer } => self.peer_down(now, peer),
            Input::UnitEmpty { unit } => {
                self.unit_empty(now, unit);
                Ok(())
            }
        };
        self.after_handled(now, handled)
    }

    /// [`Input::ClientMessage`] from a line, borrowed: read in place when
    /// it is a plain `LOCK` or `UNLOCK`, else parsed (a line that does not
    /// parse is [`Input::ClientMalformed`]). Not for a client of a
    /// snapcommunicator session: the shell translates what it says and
    /// hands it as an input.
    pub fn handle_client_line(
        &mut self,
        now: Now,
        client: ClientId,
        line: &[u8],
    ) -> Result<(), InputError> {
        self.advance(now)?;
        let handled = self.client_line(now, client, line);
        self.after_handled(now, handled)
    }

    /// [`Input::PeerLine`] with the line borrowed: a shell that keeps the
    /// lines it read in a buffer of its own feeds them without a copy each.
    pub fn handle_peer_line(
        &mut self,
        now: Now,
        peer: PeerId,
        line: &[u8],
    ) -> Result<(), InputError> {
        self.advance(now)?;
        let handled = self.peer_line(now, peer, line);
        self.after_handled(now, handled)
    }

    /// What follows every input the core took.
    fn after_handled(
        &mut self,
        now: Now,
        handled: Result<(), InputError>,
    ) -> Result<(), InputError> {
        handled?;
        if self.authority.is_cluster() {
            // Before its own messages are read: the owner's word to its
            // own clients arrives in this call.
            self.owner_progress_flush();
        }
        self.drain_local(now);
        if self.authority.is_cluster() {
            self.reanswer_pings(now);
        }
        self.after_input(now);
        Ok(())
    }

    /// Fires every timer due at `now`. Idempotent: calling it early or twice
    /// does nothing more.
    pub fn handle_timeout(&mut self, now: Now) {
        if self.advance(now).is_err() {
            return;
        }
        while let Some((at, timer)) = self.table.pop_due(now.mono) {
            match timer {
                Timer::Recheck(name) => self.grant_what_may_be(now, &name),
                Timer::Ticket(id, name) => self.ticket_timer(now, &name, id, at),
            }
        }
        self.space
            .expire(now.mono, crate::local::tx::space::EXPIRE_BATCH);
        self.install_own_state(now);
        self.view_tick(now);
        self.cluster_tick(now);
        self.continue_report(now);
        self.continue_resend(now);
        if self.authority.is_cluster() {
            self.owner_progress_flush();
        }
        self.drain_local(now);
        if self.authority.is_cluster() {
            self.reanswer_pings(now);
        }
        self.after_input(now);
    }

    /// Stops serving: every holder is told `UNLOCKED error=lost`, every
    /// waiting request fails with `error=unavailable`, and every client is
    /// closed. Later LOCKs fail with `unavailable`.
    pub fn shutdown(&mut self, now: Now) {
        if self.advance(now).is_err() {
            return;
        }
        self.stopping = true;
        let mut told = std::collections::BTreeSet::new();
        let names: Vec<_> = self.table.objects.keys().cloned().collect();
        for name in names {
            let ids: Vec<_> = self.table.objects[&name]
                .tickets
                .iter()
                .map(|t| t.id)
                .collect();
            for id in ids {
                if let Some(t) = self.take_ticket(&name, id) {
                    if t.state.is_held() {
                        self.tell_lost(&name, &t, "the agent is stopping", &mut told);
                        continue;
                    }
                    let reply = {
                        replies::lock_failed(
                            &name,
                            Some(&t.key),
                            t.tag,
                            &crate::vocab::Refusal::new("unavailable", "the agent is stopping"),
                        )
                    };
                    if let Some(owner) = t.owner {
                        self.reply(owner, reply);
                    }
                }
            }
        }
        // The original's NOLOCK before the end, to those that asked,
        // after the holders heard that their locks are lost.
        self.push_readiness(false);
        let clients: Vec<_> = self.clients.keys().copied().collect();
        for client in clients {
            self.out.push_back(Output::Close { client });
        }
    }

    /// The next thing for the shell to do.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// Gives back the buffer of an [`Output::PeerSend`]'s line, written
    /// out: the next peer lines are written in it instead of in new ones.
    /// At most [`SPARE_LINES`] are kept, none larger than
    /// [`SPARE_LINE_BYTES`].
    pub fn recycle_line(&mut self, line: Vec<u8>) {
        if self.spare_lines.len() < SPARE_LINES && line.capacity() <= SPARE_LINE_BYTES {
            self.spare_lines.push(line);
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) must next be called:
    /// the earliest of the parts' deadlines (the lock table's timers, the
    /// expiry of transactions' variables, the cluster's tick and its
    /// pending own state).
    pub fn poll_timeout(&self) -> Option<Time> {
        if !self.cluster.local.is_empty() {
            return Some(self.last_now); // more of what it sent itself
        }
        let table = match (self.table.next_timer(), self.space.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let table = match (table, self.progress_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if !self.authority.is_cluster() || self.stopping {
            return table;
        }
        let cluster = self.cluster.next_deadline();
        Some(table.map_or(cluster, |t| t.min(cluster)))
    }

    /// Counters.
    pub fn status(&self) -> Status {
        Status {
            clients: self.clients.len(),
            objects: self.table.objects.len(),
            tickets: self.table.ticket_count(),
            grants: self.grants,
        }
    }

    /// Whether a fresh name can be granted now (`LOCKSTATUS`, `INFO
    /// ready`): not while stopping, nor in a cluster without leaders,
    /// without contact with a majority of acting leaders, while a leader
    /// does not act, or during a lock-delay (docs/cluster.md).
    pub fn is_ready(&self) -> bool {
        self.unavailable(None).is_none()
    }

    fn advance(&mut self, now: Now) -> Result<(), InputError> {
        if now.mono < self.last_now {
            return Err(InputError::TimeWentBack);
        }
        self.last_now = now.mono;
        let c = &mut self.cluster;
        if self.authority.is_cluster()
            && now.mono.saturating_since(c.next_tick) > c.cfg.ping_interval
        {
            // It did not run for a while (paused, or busy): what it knows
            // of its links is stale until they had time to come back.
            c.epoch.woke = Some(now.mono);
        }
        Ok(())
    }

    pub(crate) fn reply(&mut self, client: ClientId, msg: Message) {
        self.metrics.replied(&msg);
        let reply = Reply::Message(msg);
        self.out.push_back(Output::Reply { client, reply });
    }

    /// A reply written already ([`Reply::Line`]): one no metric counts
    /// (a grant, a release without error).
    pub(crate) fn reply_line(&mut self, client: ClientId, line: Vec<u8>) {
        let reply = Reply::Line(line);
        self.out.push_back(Output::Reply { client, reply });
    }

    /// Grants, in bakery order, whatever [`crate::local::ticket::who_may_hold`] allows now.
    fn grant_what_may_be(&mut self, now: Now, name: &crate::vocab::ObjectName) {
        if self.stopping || self.authority.is_cluster() {
            return; // in a cluster, the object's owner leader decides
        }
        for id in self.table.grantable(name, now.mono) {
            let Authority::Solo { epoch, last_fence } = &mut self.authority else {
                return;
            };
            // Fences grow with the epoch (wall ms at start) so they keep
            // growing across restarts given a sane clock (docs/cluster.md).
            *last_fence = (*last_fence + 1).max(crate::cluster::persist::fence_base(*epoch));
            let fence = *last_fence;
            self.raise_floor(fence);
            let object = &self.table.objects[name];
            let t = object.tickets[object.position(id).expect("granted ticket exists")].clone();
            self.deliver_grant(now, name, id, fence, &t);
        }
        debug_assert!(
            self.table.holders_are_compatible(name),
            "S1 broken on {name:?}"
        );
    }

    /// Marks waiting ticket `t` held with `fence` and tells its client.
    pub(crate) fn deliver_grant(
        &mut self,
        now: Now,
        name: &crate::vocab::ObjectName,
        id: crate::vocab::TicketId,
        fence: u64,
        t: &table::Ticket,
    ) {
        let lease_end = now.mono + t.duration;
        self.progress_left(name, id);
        self.table
            .set_state(name, id, State::Held { fence, lease_end });
        self.metrics
            .granted(name, now.mono.saturating_since(t.since));
        self.table.set_since(name, id, now.mono);
        if t.kind.mode.is_shared() {
            self.table.note_shared_grant(name, now.mono);
        }
        self.grants += 1;
        if let Some(owner) = t.owner {
            let buf = self.spare_lines.pop().unwrap_or_default();
            let until = now.wall_of(lease_end);
            let line = replies::locked_line(buf, name, &t.key, until, fence, t.tag);
            self.reply_line(owner, line);
        }
    }

    /// Removes a ticket from the table and its client's index; in a
    /// cluster, its owner leader is told.
    pub(crate) fn take_ticket(
        &mut self,
        name: &crate::vocab::ObjectName,
        id: crate::vocab::TicketId,
    ) -> Option<table::Ticket> {
        let t = self.table.remove(name, id)?;
        if crate::vocab::split_var_object(name).is_none() {
            let held = (t.state.is_held()).then(|| self.last_now.saturating_since(t.since));
            self.metrics.left(name, held);
        }
        self.forget_ticket(&t);
        self.progress_left(name, id);
        self.unit_forget(name, &t);
        if self.authority.is_cluster() {
            self.home_released(name, &t);
        }
        Some(t)
    }

    /// Every `ping_interval` in a cluster: liveness, contact, elections,
    /// the leaders' housekeeping.
    fn cluster_tick(&mut self, now: Now) {
        if !self.authority.is_cluster() || self.stopping || now.mono < self.cluster.next_tick {
            return;
        }
        // A tick more than an interval late means this agent did not run
        // (paused, or busy with a large handover): what its peers sent
        // meanwhile waits unread, so their silence proves nothing yet.
        let stalled =
            now.mono.saturating_since(self.cluster.next_tick) > self.cluster.cfg.ping_interval;
        self.cluster.next_tick = now.mono + self.cluster.cfg.ping_interval;
        self.forget_old_ids(now);
        self.ping_all(now, stalled);
        self.home_tick(now);
        self.progress_tick();
        self.log_waiting(now);
        self.leader_tick(now);
        self.check_collect(now);
        let h = &self.cluster.handover;
        if h.report_sent.is_none() && h.report_walk.is_none() {
            self.send_report(now);
        }
        self.maybe_elect(now);
    }

    /// Delivers what this agent sent itself (home part to leader part), at
    /// most [`LOCAL_BUDGET`] messages a call, as a link to itself would: a
    /// burst (a client's close that releases thousands of locks this agent
    /// owns, the requests sent again after an epoch change) must not keep
    /// it from reading and answering its peers (the rest waits for the next
    /// call, which [`poll_timeout`](Self::poll_timeout) asks for at once).
    fn drain_local(&mut self, now: Now) {
        let me = self.cluster.me.clone();
        for _ in 0..LOCAL_BUDGET {
            let Some(msg) = self.cluster.local.pop_front() else {
                break;
            };
            let cmd = msg.command();
            if let Err(crate::cluster::msg::BadField(what)) = self.on_agent_message(now, &me, msg) {
                log::error!("{cmd} to self dropped: bad or missing {what} (a bug)");
            }
        }
    }

    /// A ticket's deadline came: fail it, expire it, or take it back.
    fn ticket_timer(
        &mut self,
        now: Now,
        name: &crate::vocab::ObjectName,
        id: crate::vocab::TicketId,
        at: Time,
    ) {
        let Some(object) = self.table.objects.get(name) else {
            return;
        };
        let Some(pos) = object.position(id) else {
            return;
        };
        let t = &object.tickets[pos];
        if t.state.deadline() != at {
            return; // re-armed since: stale
        }
        match t.state {
            State::Waiting { .. } => {
                let t = self.take_ticket(name, id).expect("ticket exists");
                if let Some(owner) = t.owner {
                    // In a cluster: "unavailable", with why, when nothing
                    // could grant it (no contact with the leaders, its
                    // owner not acting, a lock-delay); "timedout" is
                    // for a request that waited behind a holder.
                    let refusal = if let Some(why) = self.unavailable(Some(name)) {
                        crate::vocab::Refusal::new(
                            "unavailable",
                            format!("not obtained before the timeout: {why}"),
                        )
                    } else {
                        crate::vocab::Refusal::new("timedout", "not obtained before the timeout")
                    };
                    self.reply(
                        owner,
                        replies::lock_failed(name, Some(&t.key), t.tag, &refusal),
                    );
                }
                // A waiting ticket that leaves may unblock shared ones behind it.
                self.grant_what_may_be(now, name);
            }
            State::Held { .. } if crate::vocab::split_var_object(name).is_some() => {
                // A transaction's variable: its time ran out, and it is gone.
                self.take_ticket(name, id).expect("ticket exists");
            }
            State::Held { fence, .. } => {
                let (owner, tag, grace) = (t.owner, t.tag, t.unlock_duration);
                if let Some(owner) = owner {
                    self.reply(owner, replies::unlocked(name, tag, Some("timedout")));
                }
                // The lock stays held `unlock_duration` after
                // the holder is told, so it has that long to acknowledge.
                if grace.is_zero() {
                    self.take_ticket(name, id).expect("ticket exists");
                    self.grant_what_may_be(now, name);
                } else {
                    let release_at = now.mono + grace;
                    self.table
                        .set_state(name, id, State::Expired { fence, release_at });
                }
            }
            State::Expired { .. } => {
                self.take_ticket(name, id).expect("ticket exists");
                self.grant_what_may_be(now, name);
            }
        }
    }
}
