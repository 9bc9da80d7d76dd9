//! Client requests: what each command of snaplock(7) does to the table.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::{Core, Credentials, InputError, Malformed};
use crate::local::replies;
use crate::local::request::{self, Target};
use crate::local::table::{State, Ticket};
use crate::time::Now;
use crate::vocab::ClientId;
use crate::vocab::Refusal;
use crate::vocab::{ObjectName, TicketId};
use crate::wire::{Fields, Message, command_of};

/// The commands a client may send, for `HELP`.
pub const COMMANDS: &str =
    "ALIVE,EXTEND,HELP,INFO,LISTTICKETS,LOCK,LOCKSTATUS,METRICS,TRANSACTION,UNLOCK";

/// One open connection.
#[derive(Debug)]
pub(crate) struct Client {
    cred: Credentials,
    /// Every ticket this connection owns, with its object.
    pub(crate) tickets: BTreeMap<TicketId, ObjectName>,
    /// The key of its last request and the `pid` it came from: a
    /// connection mostly speaks for one process.
    last_key: Option<(Option<u64>, std::sync::Arc<str>)>,
}

impl Core {
    pub(super) fn client_opened(
        &mut self,
        _now: Now,
        client: ClientId,
        cred: Credentials,
    ) -> Result<(), InputError> {
        if self.clients.contains_key(&client) {
            return Err(InputError::ClientAlreadyOpen(client));
        }
        self.clients.insert(
            client,
            Client {
                cred,
                tickets: BTreeMap::new(),
                last_key: None,
            },
        );
        if self.clients.len() > self.config.max_clients {
            let why = format!("too many clients (max_clients={})", self.config.max_clients);
            self.reply(client, replies::invalid(None, b"", &why));
            self.out.push_back(super::Output::Close { client });
        }
        Ok(())
    }

    pub(super) fn client_malformed(
        &mut self,
        client: ClientId,
        line: &[u8],
        error: &Malformed,
    ) -> Result<(), InputError> {
        if !self.clients.contains_key(&client) {
            return Err(InputError::UnknownClient(client));
        }
        match error {
            Malformed::Parse(e) => {
                let reply = replies::invalid(command_of(line), line, &e.to_string());
                self.reply(client, reply);
            }
            Malformed::TooLong => {
                let reply = replies::invalid(command_of(line), line, "line too long");
                self.reply(client, reply);
                self.out.push_back(super::Output::Close { client });
            }
        }
        Ok(())
    }

    pub(super) fn client_closed(&mut self, now: Now, client: ClientId) -> Result<(), InputError> {
        let Some(state) = self.clients.remove(&client) else {
            return Err(InputError::UnknownClient(client));
        };
        self.status_unwatch(client);
        // Its sessions' variables vanish with it.
        self.space.close_client(client);
        if self.authority.is_cluster() {
            self.home_tx_closed(client);
        }
        let mut touched = BTreeSet::new();
        for (id, name) in state.tickets {
            let Some(object) = self.table.objects.get_mut(&name) else {
                continue;
            };
            let Some(pos) = object.position(id) else {
                continue;
            };
            let t = &mut object.tickets[pos];
            if t.outlives_connection() && t.state.is_held() {
                // A detached lock (or one its cgroup owns) outlives its
                // connection; it ends by UNLOCK with its key, at expiry
                // (or when its cgroup empties).
                t.owner = None;
                continue;
            }
            self.take_ticket(&name, id);
            touched.insert(name);
        }
        for name in touched {
            self.grant_what_may_be(now, &name);
        }
        Ok(())
    }

    /// A client's line, read in place when it is a plain `LOCK` or
    /// `UNLOCK` (the requests of every grant), else parsed; a line that
    /// does not parse is answered `INVALID`, as [`Input::ClientMalformed`](super::Input::ClientMalformed).
    pub(super) fn client_line(
        &mut self,
        now: Now,
        client: ClientId,
        line: &[u8],
    ) -> Result<(), InputError> {
        if let Some(scanned) = crate::wire::scan(line) {
            let lock = match scanned.command() {
                "LOCK" => true,
                "UNLOCK" => false,
                _ => return self.client_parsed(now, client, line),
            };
            if !self.clients.contains_key(&client) {
                return Err(InputError::UnknownClient(client));
            }
            self.note_call(now, scanned.command());
            if lock {
                self.lock(now, client, &scanned);
            } else {
                self.unlock(now, client, &scanned);
            }
            return Ok(());
        }
        self.client_parsed(now, client, line)
    }

    fn client_parsed(&mut self, now: Now, client: ClientId, line: &[u8]) -> Result<(), InputError> {
        match crate::wire::parse(line) {
            Ok(msg) => self.client_message(now, client, msg),
            Err(e) => {
                let echo = &line[..line.len().min(replies::MAX_ECHO)];
                self.client_malformed(client, echo, &Malformed::Parse(e))
            }
        }
    }

    pub(super) fn client_message(
        &mut self,
        now: Now,
        client: ClientId,
        msg: Message,
    ) -> Result<(), InputError> {
        if !self.clients.contains_key(&client) {
            return Err(InputError::UnknownClient(client));
        }
        self.note_call(now, &msg.command);
        match msg.command.as_str() {
            "LOCK" => self.lock(now, client, &msg),
            "UNLOCK" => self.unlock(now, client, &msg),
            "EXTEND" => self.extend(now, client, &msg),
            "TRANSACTION" => self.transaction(now, client, &msg),
            "LOCKSTATUS" => {
                let ready = self.is_ready();
                let status = if ready { "LOCKREADY" } else { "NOLOCK" };
                self.reply(client, Message::new(status));
                self.status_watch(client, ready);
            }
            "LISTTICKETS" => self.list_tickets(now, client, &msg),
            "INFO" => {
                let info = self.info(now);
                self.reply(client, info);
            }
            "HELP" => self.reply(client, Message::new("COMMANDS").with("list", COMMANDS)),
            "METRICS" => {
                let text = self.metrics_text(now);
                self.reply(client, Message::new("METRICSTEXT").with("text", text));
            }
            "ALIVE" => {
                let mut reply = Message::new("ABSOLUTELY");
                for name in ["serial", "timestamp"] {
                    if let Some(v) = msg.get(name) {
                        reply.set(name, v);
                    }
                }
                reply.set("reply_timestamp", now.wall.to_wire());
                if self.authority.is_cluster() {
                    // How long this agent's locks are guaranteed from now:
                    // a holder that hears nothing newer must stop by then
                    // (docs/cluster.md: the holder's side of the lease).
                    let objects: Vec<ObjectName> = self
                        .clients
                        .get(&client)
                        .map(|c| c.tickets.values().cloned().collect())
                        .unwrap_or_default();
                    let left = self
                        .vouched_until(objects.iter())
                        .map_or(std::time::Duration::ZERO, |t| t.saturating_since(now.mono));
                    reply.set("valid_for", crate::time::duration_to_wire(left));
                }
                self.reply(client, reply);
            }
            other => {
                let reply = Message::new("UNKNOWN").with("command", other);
                self.reply(client, reply);
            }
        }
        Ok(())
    }

    /// `<server_name>/<pid>`; without `pid`, a key of this connection alone
    /// (the peer's pid joined with the connection number), so threads of one
    /// process on separate connections never collide. Made once for the
    /// connection's last `pid`, and shared by the tickets that name it.
    fn key_of(&mut self, client: ClientId, pid: Option<u64>) -> std::sync::Arc<str> {
        let last = self.clients.get(&client).and_then(|c| c.last_key.as_ref());
        if let Some((_, key)) = last.filter(|(p, _)| *p == pid) {
            return key.clone();
        }
        let key: std::sync::Arc<str> = match pid {
            Some(pid) => {
                let server = &self.config.server_name;
                let mut key = String::with_capacity(server.len() + 21);
                key.push_str(server);
                key.push('/');
                key.push_str(crate::wire::decimal(pid, &mut [0; 20]));
                key.into()
            }
            None => {
                let peer = self
                    .clients
                    .get(&client)
                    .and_then(|c| c.cred.pid)
                    .unwrap_or(0);
                format!("{}/{peer}.{}", self.config.server_name, client.0).into()
            }
        };
        if let Some(c) = self.clients.get_mut(&client) {
            c.last_key = Some((pid, key.clone()));
        }
        key
    }

    fn refuse(&mut self, client: ClientId, target: &Target, key: Option<&str>, why: &Refusal) {
        let reply = replies::lock_failed(&target.object, key, target.tag, why);
        self.reply(client, reply);
    }

    fn lock(&mut self, now: Now, client: ClientId, msg: &impl Fields) {
        let mut req = match request::decode_lock(msg, now, &self.config.defaults, &mut self.names) {
            Ok(req) => req,
            Err((why, target)) => return self.refuse(client, &target, None, &why),
        };
        let contract = match crate::local::trust::Contract::decode(msg) {
            Ok(c) => c,
            Err(why) => return self.refuse(client, &req.target, None, &why),
        };
        if self.cluster.cfg.plant == crate::cluster::Plant::CountedOneOver
            && req.kind.mode == crate::vocab::Mode::Counted
        {
            req.kind.limit = req.kind.limit.map(|l| l + 1);
        }
        let key = self.key_of(client, req.target.pid);
        let action = crate::local::acl::Action::Lock(req.kind.mode);
        if let Err(why) = self.acl_check(client, &req.target.object, action) {
            let why = Refusal::new("denied", why);
            return self.refuse(client, &req.target, Some(&key), &why);
        }
        let deadline = now.mono_of(req.deadline);
        if deadline <= now.mono {
            let why = Refusal::new("timedout", "the timeout is already past");
            return self.refuse(client, &req.target, Some(&key), &why);
        }
        if self.stopping {
            let why = Refusal::new("unavailable", "the agent is stopping");
            return self.refuse(client, &req.target, Some(&key), &why);
        }
        if let Some(why) = self.contract_refusal(now, &contract) {
            return self.refuse(client, &req.target, Some(&key), &why);
        }
        let name = self.table.intern(&req.target.object);
        let existing = self.table.objects.get(&name);
        if existing.is_some_and(|o| o.tickets.iter().any(|t| *t.key == *key)) {
            let why = Refusal::new("duplicate", "this key already has a request on this object");
            return self.refuse(client, &req.target, Some(&key), &why);
        }
        let queued = existing.map_or(0, |o| o.tickets.len());
        if queued >= self.config.max_tickets_per_object {
            let why = Refusal::new(
                "overflow",
                format!("this object already has {queued} requests (max_tickets_per_object)"),
            );
            return self.refuse(client, &req.target, Some(&key), &why);
        }
        if self.table.ticket_count() >= self.config.max_tickets {
            let why = Refusal::new("overflow", "the agent holds its maximum number of tickets");
            return self.refuse(client, &req.target, Some(&key), &why);
        }
        let unit = if req.owner_unit {
            let Some(unit) = self.clients[&client].cred.cgroup else {
                let why = Refusal::invalid(
                    "owner=cgroup needs cgroup v2 and a client in a cgroup other than the root \
                     (a systemd unit or scope), known when it connected",
                );
                return self.refuse(client, &req.target, Some(&key), &why);
            };
            if self.units.full_for(unit) {
                let why = Refusal::new(
                    "overflow",
                    format!(
                        "the agent already watches {} cgroups",
                        super::unit::MAX_UNITS
                    ),
                );
                return self.refuse(client, &req.target, Some(&key), &why);
            }
            Some(unit)
        } else {
            None
        };
        if req.try_once && self.authority.is_cluster() {
            // Never waits: when nothing could grant it now (no leaders or
            // no contact, its owner not acting or not linked, a
            // lock-delay), it says so at once; `busy` only ever means a
            // holder.
            if let Some(why) = self.try_unavailable(&name) {
                let why = Refusal::new("unavailable", why);
                return self.refuse(client, &req.target, Some(&key), &why);
            }
        }
        let id = TicketId(self.next_ticket);
        self.next_ticket += 1;
        let ticket = Ticket {
            id,
            number: existing.map_or(1, |o| o.next_number()),
            key: key.clone(),
            owner: Some(client),
            uid: self.clients[&client].cred.uid,
            tag: req.target.tag,
            kind: req.kind,
            duration: req.duration,
            unlock_duration: req.unlock_duration,
            detach: req.detach,
            unit,
            try_once: req.try_once,
            state: State::Waiting { deadline },
            since: now.mono,
        };
        self.table.insert(&name, ticket);
        self.metrics.queued(&name);
        self.clients
            .get_mut(&client)
            .expect("open")
            .tickets
            .insert(id, name.clone());
        if req.progress && !req.try_once {
            self.progress_watch(&name, id);
        }
        if let Some(unit) = unit {
            self.unit_bound(unit, client, &name, id);
        }
        if self.authority.is_cluster() {
            // The owner leader decides, `busy` included.
            self.home_submit(now, &name, id);
            return;
        }
        self.grant_what_may_be(now, &name);
        if req.try_once {
            let object = &self.table.objects[&name];
            let waiting = object
                .position(id)
                .is_some_and(|p| !object.tickets[p].state.is_held());
            if waiting {
                self.drop_ticket(&name, id);
                let why = Refusal::new("busy", "the object is locked");
                self.refuse(client, &req.target, Some(&key), &why);
            }
        }
    }

    /// Finds the ticket an UNLOCK or EXTEND is about. With `pid`, the ticket
    /// of that key; without, this connection's one ticket on the object.
    fn find_own(
        &self,
        client: ClientId,
        target: &Target,
    ) -> Result<Option<(ObjectName, TicketId)>, Refusal> {
        let Some((name, object)) = self.table.objects.get_key_value(&target.object) else {
            return Ok(None);
        };
        let ticket = match target.pid {
            Some(pid) => {
                // `key_of(client, Some(pid))`, compared without building it
                let mut buf = [0; 20];
                let digits = crate::wire::decimal(pid, &mut buf);
                let is_key = |k: &str| {
                    k.strip_prefix(self.config.server_name.as_str())
                        .and_then(|k| k.strip_prefix('/'))
                        == Some(digits)
                };
                object.tickets.iter().find(|t| is_key(&t.key))
            }
            None => {
                let mut own = object.tickets.iter().filter(|t| t.owner == Some(client));
                let first = own.next();
                let uid = self.clients.get(&client).and_then(|c| c.cred.uid);
                if first.is_none()
                    && object
                        .tickets
                        .iter()
                        .any(|t| t.outlives_connection() && t.uid == uid)
                {
                    // Answering "UNLOCKED" here would let a script believe
                    // it released a detached lock that it did not name.
                    return Err(Refusal::new(
                        "invalid",
                        "a detached lock is named by the pid it was taken with: give pid",
                    ));
                }
                if own.next().is_some() {
                    return Err(Refusal::new(
                        "invalid",
                        "several requests of this connection on this object: give pid",
                    ));
                }
                first
            }
        };
        let Some(t) = ticket else { return Ok(None) };
        // S5: only the holder's connection, or, for a detached lock, a
        // connection of the same uid with the same key.
        let same_uid = t.uid == self.clients.get(&client).and_then(|c| c.cred.uid);
        if t.owner != Some(client) && !(t.outlives_connection() && same_uid) {
            return Err(Refusal::new(
                "denied",
                "this lock belongs to another connection",
            ));
        }
        Ok(Some((name.clone(), t.id)))
    }

    fn unlock(&mut self, now: Now, client: ClientId, msg: &impl Fields) {
        let target = match request::decode_target(msg, &mut self.names) {
            Ok(t) => t,
            Err((why, target)) => return self.refuse(client, &target, None, &why),
        };
        match self.find_own(client, &target) {
            Err(why) => self.refuse(client, &target, None, &why),
            Ok(found) => {
                if let Some((name, id)) = found {
                    self.drop_ticket(&name, id);
                    // The next waiter is served at once, not at a later tick.
                    self.grant_what_may_be(now, &name);
                }
                // Releasing what one does not hold is done already.
                let buf = self.spare_lines.pop().unwrap_or_default();
                let line = replies::unlocked_line(buf, &target.object, target.tag);
                self.reply_line(client, line);
            }
        }
    }

    fn extend(&mut self, now: Now, client: ClientId, msg: &Message) {
        let (target, duration) = match request::decode_extend(msg, &mut self.names) {
            Ok(v) => v,
            Err((why, target)) => return self.refuse(client, &target, None, &why),
        };
        let (name, id) = match self.find_own(client, &target) {
            Err(why) => return self.refuse(client, &target, None, &why),
            Ok(None) => {
                let why = Refusal::new("invalid", "no lock of this key on this object");
                return self.refuse(client, &target, None, &why);
            }
            Ok(Some(found)) => found,
        };
        let object = &self.table.objects[&name];
        let t = &object.tickets[object.position(id).expect("found")];
        let key = t.key.clone();
        if self.authority.is_cluster() && t.state.is_held() && !self.in_contact_now() {
            // Out of contact with the leaders: this agent is about to
            // revoke, so it promises nothing longer.
            let why = Refusal::new("unavailable", "no contact with a majority of leaders");
            return self.refuse(client, &target, Some(&key), &why);
        }
        match t.state {
            // A late shell may not have run the lease's timer yet: the lease
            // ended all the same, and that timer will say so.
            State::Held { lease_end, .. } if lease_end <= now.mono => {
                let why = Refusal::new("timedout", "the lease already ended");
                self.refuse(client, &target, Some(&key), &why);
            }
            State::Held { fence, .. } => {
                let lease_end = now.mono + duration;
                self.table
                    .set_state(&name, id, State::Held { fence, lease_end });
                let reply = replies::locked(
                    &target.object,
                    &key,
                    now.wall_of(lease_end),
                    fence,
                    target.tag,
                );
                self.reply(client, reply);
            }
            State::Expired { .. } => {
                let why = Refusal::new("timedout", "the lease already ended");
                self.refuse(client, &target, Some(&key), &why);
            }
            State::Waiting { .. } => {
                let why = Refusal::new("invalid", "the lock is not granted yet");
                self.refuse(client, &target, Some(&key), &why);
            }
        }
    }

    /// Who the connection is, for the access rules.
    fn acl_peer(&self, client: ClientId) -> crate::local::acl::Peer {
        let cred = self.clients.get(&client).map(|c| c.cred);
        crate::local::acl::Peer {
            ids: cred.and_then(|c| Some((c.uid?, c.gid?))),
        }
    }

    /// Whether the access rules let `client` do `action` on `name` (an
    /// object name, or a transaction's namespace); the refusal's
    /// description when not. Without rules, everything is allowed.
    pub(super) fn acl_check(
        &self,
        client: ClientId,
        name: &[u8],
        action: crate::local::acl::Action,
    ) -> Result<(), String> {
        match &self.config.acl {
            None => Ok(()),
            Some(acl) => acl.check(self.acl_peer(client), name, action),
        }
    }

    /// Whether `LISTTICKETS` shows `client` the tickets of `name`.
    /// The one place a listing (local or cluster-wide) is filtered per name.
    pub(crate) fn may_list(&self, client: ClientId, name: &[u8]) -> bool {
        self.config
            .acl
            .as_ref()
            .is_none_or(|acl| acl.may_lock(self.acl_peer(client), name))
    }

    /// Removes a ticket from the table and from its owner's index.
    fn drop_ticket(&mut self, name: &ObjectName, id: TicketId) {
        self.take_ticket(name, id);
    }

    /// Removes a removed ticket from its owner's index.
    pub(super) fn forget_ticket(&mut self, t: &Ticket) {
        if let Some(owner) = t.owner {
            if let Some(c) = self.clients.get_mut(&owner) {
                c.tickets.remove(&t.id);
            }
        }
    }

    /// One line per ticket of this agent's table (or of object `only`),
    /// snaplock's format plus the mode and fence. It looks at most at
    /// [`SCAN_OBJECTS`](crate::cluster::view::SCAN_OBJECTS) objects, as an
    /// owner does: the names the access rules hide from `client` cost a
    /// look each, and a table holds up to `max_tickets` of them.
    pub(super) fn ticket_list(&self, now: Now, client: ClientId, only: Option<&[u8]>) -> String {
        let mut list = String::new();
        let (objects, mut left): (Box<dyn Iterator<Item = _>>, _) = match only {
            Some(o) => {
                let one = self.table.objects.get_key_value(&ObjectName::new(o));
                (
                    Box::new(one.into_iter()),
                    one.map_or(0, |(_, o)| o.tickets.len()),
                )
            }
            None => (
                Box::new(self.table.objects.iter()),
                self.table.ticket_count(),
            ),
        };
        // The table keeps names in the order of their hashes; the lines go
        // in the order of the names' bytes.
        let scan = crate::cluster::view::SCAN_OBJECTS;
        let mut objects: Vec<_> = objects.take(scan + 1).collect();
        let cut = objects.len() > scan;
        objects.truncate(scan);
        objects.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (name, object) in objects {
            if crate::vocab::split_var_object(name).is_some() || !self.may_list(client, name) {
                // A transaction's variable is not a lock; a name the client
                // may not lock is not shown to it.
                left -= object.tickets.len();
                continue;
            }
            for t in &object.tickets {
                if list.len() >= self.config.max_list_bytes {
                    let _ = writeln!(list, "... and {left} more tickets");
                    return list;
                }
                left -= 1;
                let mode = t.kind.mode.as_str();
                let when = match t.state {
                    State::Waiting { deadline } => {
                        format!("obtention {}", now.wall_of(deadline).to_utc_string())
                    }
                    State::Held { fence, lease_end } => {
                        format!(
                            "timeout {}  fence: {fence}",
                            now.wall_of(lease_end).to_utc_string()
                        )
                    }
                    State::Expired { fence, release_at } => {
                        format!(
                            "released {}  fence: {fence}",
                            now.wall_of(release_at).to_utc_string()
                        )
                    }
                };
                let owner = if t.unit.is_some() {
                    "  owner: cgroup"
                } else {
                    ""
                };
                let _ = writeln!(
                    list,
                    "ticket id: {}  object name: \"{}\"  key: {}  mode: {mode}  {when}{owner}",
                    t.number,
                    String::from_utf8_lossy(name).escape_debug(),
                    t.key,
                );
            }
        }
        if cut {
            let _ = writeln!(list, "... and {left} more tickets");
        }
        list
    }

    fn info(&self, now: Now) -> Message {
        let s = self.status();
        let name = &self.config.server_name;
        let c = &self.cluster;
        let (leaders, connected, size, quorum, epoch) = if self.authority.is_cluster() {
            let leaders: Vec<&str> = c
                .epoch
                .leaders
                .iter()
                .map(|l| crate::cluster::Cluster::name_of(l))
                .collect();
            let connected = c.peers.links.values().filter(|l| l.id.is_some()).count() + 1;
            (
                leaders.join(","),
                connected,
                c.peers.members.len(),
                c.peers.quorum,
                c.epoch.number,
            )
        } else {
            (name.clone(), 1, 1, 1, self.epoch_to_keep())
        };
        let mut msg = Message::new("STATUS")
            .with("server_name", name)
            .with("version", crate::VERSION)
            .with("ready", if self.is_ready() { "true" } else { "false" })
            .with("leaders", leaders);
        // What is left of the lock-delay, in seconds (ms precision):
        // 0 when none runs.
        let delay = self.lock_delay_left().as_millis();
        msg.set(
            "lock_delay",
            crate::time::duration_to_wire(std::time::Duration::from_millis(delay as u64)),
        );
        let waiting = self.waiting_for();
        if !waiting.is_empty() {
            let list: Vec<String> = waiting.iter().map(ToString::to_string).collect();
            msg.set("waiting_for", list.join(","));
        }
        self.trust_info(now, &mut msg);
        if self.authority.is_cluster() {
            msg.set("peers", self.peers_info(now));
        }
        // In a cluster, this agent's sessions' variables are tickets of its
        // table, on objects that start with NUL (first in the table's
        // order, see `ObjectName`): they are counted as variables, not as
        // locks.
        let (var_objects, var_tickets) = self
            .table
            .objects
            .iter()
            .take_while(|(n, _)| n.first() == Some(&crate::vocab::VAR_OBJECT))
            .fold((0, 0), |(o, t), (_, obj)| (o + 1, t + obj.tickets.len()));
        for (k, v) in [
            ("connected", connected as u64),
            ("cluster_size", size as u64),
            ("quorum", quorum as u64),
            ("epoch", epoch),
            ("clients", s.clients as u64),
            ("objects", (s.objects - var_objects) as u64),
            ("tickets", (s.tickets - var_tickets) as u64),
            ("grants", s.grants),
            ("variables", (self.space.held() + var_tickets) as u64),
        ] {
            msg.set_u64(k, v);
        }
        msg
    }
}
