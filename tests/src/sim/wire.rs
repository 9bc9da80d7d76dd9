//! S6 from the wire: every grant a client sees must be backed by the votes
//! of a majority of one epoch's leaders, for that grant's own fence.
//!
//! The simulator carries every message between agents, so it sees who
//! announced which leaders for which epoch (`LOCKLEADERS`, `LOCKSTARTED`), who each agent
//! is (`LOCKSTARTED`), every vote an owner received (`LOCKACTIVATED
//! ok=true`), the vote of a home asked for its own request when it is
//! cast (that vote delivers the grant at once), and every grant carried
//! into a new epoch's state
//! (`LOCKTICKETS part=state`, which the collector sends the other leaders:
//! a majority that installed it backs the grant as votes would). Agents are named by their ids, not by their
//! computers: a restarted agent has a new id, and votes or leadership of
//! its former self are never counted for it (S7). Messages this observer
//! cannot read are ignored: it checks the protocol of docs/cluster.md and
//! says nothing about messages it does not know.
//!
//! It also checks, as each yes vote is cast, that no leader stands behind
//! two conflicting grants of one object at once: a vote stands from when it
//! is cast until its agent acts on a `DROPTICKET` for it, votes in a later
//! epoch, or, as the home of a lock's request, sends its `UNLOCK`.

use std::collections::{BTreeMap, BTreeSet};

use snaplock_proto::cluster::{TicketRecord, ticket_records};
use snaplock_proto::vocab::Mode;
use snaplock_proto::wire::Message;

/// (epoch, agent id) pairs: who voted, or who installed a state, in which
/// epoch.
type Backers = BTreeSet<(u64, String)>;

/// (home, req) → epoch of the yes votes one leader has standing on one
/// object.
type Standing = BTreeMap<(String, u64), u64>;

/// What the wire showed so far.
#[derive(Debug, Default)]
pub struct Wire {
    /// The id of each computer's current agent, once it said it.
    ids: Vec<Option<String>>,
    /// Every leader list announced for an epoch (more than one means two
    /// conductors chose the same epoch).
    leaders: BTreeMap<u64, BTreeSet<Vec<String>>>,
    /// (owner id, object, fence) → (epoch, voter id) of every yes vote the
    /// owner received.
    votes: BTreeMap<(String, Vec<u8>, u64), Backers>,
    /// (object, fence) → (epoch, leader id) of every leader that installed a
    /// state holding that grant (the collector, and the leaders it sent it).
    states: BTreeMap<(Vec<u8>, u64), Backers>,
    /// (object, home, req) → (mode, limit) of every ticket a leader was
    /// told of (`ADDTICKET`).
    kinds: BTreeMap<(Vec<u8>, String, u64), (Mode, u64)>,
    /// The key (session) of each ticket of a transaction variable.
    keys: BTreeMap<(Vec<u8>, String, u64), String>,
    /// (voter id, object) → the tickets (home, req) it stands behind with a
    /// yes vote, and the epoch of that vote; a `DROPTICKET` it receives
    /// ends one, and a vote of a later epoch all older ones.
    standing: BTreeMap<(String, Vec<u8>), Standing>,
    /// (voter id, object, home, req, epoch) of the tickets each agent
    /// acted on a `DROPTICKET` of that epoch for and was not told of again
    /// in it since: a leader that is not ready yet queues messages and may
    /// cast a vote after the drop that follows it has reached it. Agents
    /// ignore messages of other epochs, so an `ADDTICKET` of an older
    /// epoch arriving late does not undo the drop.
    dropped: BTreeSet<(String, Vec<u8>, String, u64, u64)>,
    /// (agent id, epoch) → the leader-list digests it answered pings with.
    views: BTreeMap<(String, u64), BTreeSet<u64>>,
    /// (voter id, object, home, req, epoch) → the fence of the last yes
    /// vote it cast for that ticket in that epoch: the same vote said
    /// again while it stands is not judged again.
    fences: BTreeMap<(String, Vec<u8>, String, u64, u64), u64>,
    /// (asked agent id, object, fence) → the agents that asked it for its
    /// vote on that fence (`ACTIVATELOCK`, or `ADDTICKET` with `fence`).
    asked: BTreeMap<(String, Vec<u8>, u64), BTreeSet<String>>,
}

fn num(msg: &Message, name: &str) -> Option<u64> {
    msg.get_str(name)?.parse().ok()
}

impl Wire {
    /// An observer of `n` computers.
    pub fn new(n: usize) -> Wire {
        Wire {
            ids: vec![None; n],
            ..Wire::default()
        }
    }

    /// Computer `node`'s agent is gone (it crashed).
    pub fn forget(&mut self, node: usize) {
        self.ids[node] = None;
    }

    /// Computer `node` sent `msg` to a peer; `Err` when that breaks a rule.
    pub fn sent(&mut self, node: usize, msg: &Message) -> Result<(), String> {
        if msg.command == "LOCKPONG" {
            // An agent answers in one view per epoch number: never in two.
            if let (Some(epoch), Some(view), Some(id)) =
                (num(msg, "epoch"), num(msg, "view"), self.ids[node].clone())
            {
                let views = self.views.entry((id.clone(), epoch)).or_default();
                views.insert(view);
                if views.len() > 1 {
                    return Err(format!(
                        "{id} answered in epoch {epoch} with two leader lists: {:?}",
                        self.leaders_of(epoch)
                    ));
                }
            }
        }
        if msg.command == "LOCKACTIVATED" && msg.get("ok") == Some(b"true") {
            // Checked when cast: the owner may drop the ticket before the
            // vote reaches it.
            self.check_votes(node, msg)?;
            self.note_home_vote(node, msg);
        }
        if msg.command == "UNLOCK" {
            self.home_released(node, msg);
        }
        if msg.command == "LOCKSTARTED" {
            if let Some(id) = msg.get_str("lockid") {
                self.ids[node] = Some(id.to_owned());
            }
        }
        if msg.command == "LOCKTICKETS" {
            let sender = self.ids[node].clone().unwrap_or_default();
            self.note_state(node, msg, &ticket_records(msg, &sender));
        }
        Ok(())
    }

    /// A home released its request on a lock (its `UNLOCK`): its own vote
    /// on it ends there, as it drops it itself (`home_drop=1`; its owner
    /// sends it no `DROPTICKET`). A transaction's holdings end with the
    /// transaction, not here.
    fn home_released(&mut self, node: usize, msg: &Message) {
        let (Some(object), Some(req), Some(home)) = (
            msg.get("object_name"),
            num(msg, "req"),
            self.ids[node].clone(),
        ) else {
            return;
        };
        if snaplock_proto::vocab::split_var_object(object).is_some() {
            return;
        }
        if let Some(set) = self.standing.get_mut(&(home.clone(), object.to_vec())) {
            set.remove(&(home, req));
        }
    }

    /// A ticket of an epoch's state (`LOCKTICKETS part=state`) that
    /// computer `node` sent (as collector) or received (as leader).
    fn note_state(&mut self, node: usize, msg: &Message, tickets: &[TicketRecord]) {
        if msg.command != "LOCKTICKETS" || msg.get("part") != Some(b"state") {
            return;
        }
        let (Some(epoch), Some(id)) = (num(msg, "epoch"), self.ids[node].clone()) else {
            return;
        };
        for t in tickets {
            self.states
                .entry((t.object.clone(), t.fence))
                .or_default()
                .insert((epoch, id.clone()));
        }
    }

    /// Computer `node`'s agent acts on `msg` now (later than it arrived
    /// when the computer was paused).
    pub fn processed(&mut self, node: usize, msg: &Message) {
        let (Some(object), Some(home), Some(req), Some(voter), Some(epoch)) = (
            msg.get("object_name"),
            msg.get_str("home"),
            num(msg, "req"),
            self.ids[node].clone(),
            num(msg, "epoch"),
        ) else {
            return;
        };
        let key = (voter.clone(), object.to_vec(), home.to_owned(), req, epoch);
        match msg.command.as_str() {
            "DROPTICKET" => {
                if let Some(set) = self.standing.get_mut(&(voter, object.to_vec())) {
                    if set.get(&(home.to_owned(), req)) == Some(&epoch) {
                        set.remove(&(home.to_owned(), req));
                    }
                }
                self.dropped.insert(key);
            }
            "ADDTICKET" => {
                self.dropped.remove(&key);
            }
            _ => {}
        }
    }

    /// Computer `to` received `msg` from computer `from`. `Err` says what
    /// broke a rule: an epoch now has two different leader lists.
    pub fn received(&mut self, to: usize, from: usize, msg: &Message) -> Result<(), String> {
        if matches!(msg.command.as_str(), "ACTIVATELOCK" | "ADDTICKET") {
            // A question for this agent's vote on a fence.
            if let (Some(object), Some(fence), Some(asked), Some(owner)) = (
                msg.get("object_name"),
                num(msg, "fence"),
                self.ids[to].clone(),
                self.ids[from].clone(),
            ) {
                let key = (asked, object.to_vec(), fence);
                self.asked.entry(key).or_default().insert(owner);
            }
        }
        match msg.command.as_str() {
            // Every message that describes a ticket (it has its key).
            "ADDTICKET" if msg.get("key").is_some() => {
                if let (Some(object), Some(home), Some(req)) =
                    (msg.get("object_name"), msg.get_str("home"), num(msg, "req"))
                {
                    let mode = match msg.get("mode") {
                        Some(b"shared") => Mode::Shared,
                        Some(b"counted") => Mode::Counted,
                        _ => Mode::Exclusive,
                    };
                    let limit = num(msg, "limit").unwrap_or(u64::MAX);
                    self.kinds
                        .insert((object.to_vec(), home.to_owned(), req), (mode, limit));
                    if let Some(key) = msg.get_str("key") {
                        self.keys
                            .insert((object.to_vec(), home.to_owned(), req), key.to_owned());
                    }
                }
            }
            "LOCKTICKETS" => {
                let sender = self.ids[from].clone().unwrap_or_default();
                let tickets = ticket_records(msg, &sender);
                for t in &tickets {
                    let limit = t.limit.map_or(u64::MAX, u64::from);
                    self.kinds
                        .insert((t.object.clone(), t.home.clone(), t.req), (t.mode, limit));
                    self.keys
                        .insert((t.object.clone(), t.home.clone(), t.req), t.key.clone());
                }
                self.note_state(to, msg, &tickets);
            }
            "LOCKACTIVATED" if msg.get("ok") == Some(b"true") => self.note_vote(to, from, msg),
            "LOCKLEADERS" | "LOCKSTARTED" => {
                let Some(epoch) = num(msg, "epoch") else {
                    return Ok(());
                };
                let list: Vec<String> = ["leader0", "leader1", "leader2"]
                    .iter()
                    .filter_map(|k| msg.get_str(k).map(str::to_owned))
                    .collect();
                if !list.is_empty() {
                    // Two lists for one number: only a restarted conductor
                    // that forgot it can do that. Agents tell the two views
                    // apart (`LOCKPONG view=`, checked in `sent`), and every
                    // grant is judged against one list (`backed`).
                    self.leaders.entry(epoch).or_default().insert(list);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// An owner received a yes vote: remember who backs which fence.
    fn note_vote(&mut self, to: usize, from: usize, msg: &Message) {
        let (Some(epoch), Some(fence), Some(object)) =
            (num(msg, "epoch"), num(msg, "fence"), msg.get("object_name"))
        else {
            return;
        };
        let (Some(owner), Some(voter)) = (self.ids[to].clone(), self.ids[from].clone()) else {
            return;
        };
        self.votes
            .entry((owner, object.to_vec(), fence))
            .or_default()
            .insert((epoch, voter));
    }

    /// A home's yes vote on its own request, as it is cast: it counts for
    /// each agent that asked it for that fence, as if received (the home
    /// delivers the grant on it at once).
    fn note_home_vote(&mut self, node: usize, msg: &Message) {
        let (Some(epoch), Some(fence), Some(object), Some(home), Some(voter)) = (
            num(msg, "epoch"),
            num(msg, "fence"),
            msg.get("object_name"),
            msg.get_str("home"),
            self.ids[node].clone(),
        ) else {
            return;
        };
        if home != voter {
            return;
        }
        let key = (voter.clone(), object.to_vec(), fence);
        for owner in self.asked.get(&key).into_iter().flatten() {
            self.votes
                .entry((owner.clone(), object.to_vec(), fence))
                .or_default()
                .insert((epoch, voter.clone()));
        }
    }

    /// A leader never stands behind two conflicting grants of one object
    /// at once: its new yes vote must be compatible with every vote of the
    /// same epoch it has not been told to drop.
    fn check_votes(&mut self, voter: usize, msg: &Message) -> Result<(), String> {
        let (Some(epoch), Some(object), Some(home), Some(req), Some(id)) = (
            num(msg, "epoch"),
            msg.get("object_name"),
            msg.get_str("home"),
            num(msg, "req"),
            self.ids[voter].clone(),
        ) else {
            return Ok(());
        };
        let kind = |k: &(String, u64)| {
            self.kinds
                .get(&(object.to_vec(), k.0.clone(), k.1))
                .copied()
        };
        if self
            .dropped
            .contains(&(id.clone(), object.to_vec(), home.to_owned(), req, epoch))
        {
            return Ok(()); // cast late, dropped already
        }
        let fence = num(msg, "fence").unwrap_or(0);
        let cast = (id.clone(), object.to_vec(), home.to_owned(), req, epoch);
        let set = self
            .standing
            .entry((id.clone(), object.to_vec()))
            .or_default();
        set.retain(|_, e| *e >= epoch);
        let stands = set.get(&(home.to_owned(), req)) == Some(&epoch);
        if stands && self.fences.get(&cast) == Some(&fence) {
            return Ok(()); // the vote it cast, said again
        }
        self.fences.insert(cast, fence);
        set.insert((home.to_owned(), req), epoch);
        let mut votes: Vec<(String, u64)> = set.keys().cloned().collect();
        // The tickets of one session on a transaction variable never
        // count against each other (docs/cluster.md, "Transactions"): one
        // vote per session, the most exclusive.
        if object.first() == Some(&0) {
            let session = |v: &(String, u64)| {
                let key = self.keys.get(&(object.to_vec(), v.0.clone(), v.1));
                (
                    v.0.clone(),
                    key.cloned().unwrap_or_else(|| format!("?{}", v.1)),
                )
            };
            let mut seen = BTreeMap::new();
            for v in &votes {
                let exclusive = kind(v).is_some_and(|(m, _)| m == Mode::Exclusive);
                let e = seen.entry(session(v)).or_insert_with(|| v.clone());
                if exclusive {
                    *e = v.clone();
                }
            }
            votes = seen.into_values().collect();
        }
        if votes.len() < 2 {
            return Ok(());
        }
        // A ticket whose kind never crossed the wire is not judged.
        let Some(kinds) = votes.iter().map(kind).collect::<Option<Vec<(Mode, u64)>>>() else {
            return Ok(());
        };
        let exclusive = kinds.iter().any(|(m, _)| *m == Mode::Exclusive);
        // Every shared ticket's limit, and the limit of the one voted for
        // now when it is counted: a counted ticket's limit bound only the
        // vote for it (a later vote for it is judged again).
        let own = kind(&(home.to_owned(), req)).filter(|(m, _)| *m == Mode::Counted);
        let limit = kinds
            .iter()
            .filter(|(m, _)| *m == Mode::Shared)
            .chain(own.as_ref())
            .map(|(_, l)| *l)
            .min()
            .unwrap_or(u64::MAX);
        if exclusive || votes.len() as u64 > limit {
            return Err(format!(
                "{id} voted in epoch {epoch} for {votes:?} of {} at once, which conflict",
                String::from_utf8_lossy(object)
            ));
        }
        Ok(())
    }

    /// The leader lists announced for `epoch`.
    pub fn leaders_of(&self, epoch: u64) -> Vec<Vec<String>> {
        self.leaders
            .get(&epoch)
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether some owner that was a leader of some epoch had yes votes for
    /// `fence` on `object` from enough of that epoch's leaders, itself
    /// counted; `Err` says what it had.
    pub fn backed(&self, object: &[u8], fence: u64) -> Result<(), String> {
        let mut seen = Vec::new();
        for ((owner, o, f), votes) in &self.votes {
            if o != object || *f != fence {
                continue;
            }
            let epochs: BTreeSet<u64> = votes.iter().map(|(e, _)| *e).collect();
            for epoch in epochs {
                for list in self.leaders.get(&epoch).into_iter().flatten() {
                    if !list.contains(owner) {
                        continue;
                    }
                    let mut voters: BTreeSet<&String> = votes
                        .iter()
                        .filter(|(e, v)| *e == epoch && list.contains(v))
                        .map(|(_, v)| v)
                        .collect();
                    voters.insert(owner);
                    if voters.len() > list.len() / 2 {
                        return Ok(());
                    }
                    seen.push(format!(
                        "epoch {epoch}: {} of {} leaders",
                        voters.len(),
                        list.len()
                    ));
                }
            }
        }
        // A grant carried into an epoch's state (a ticket its owner had
        // already voted for when the epoch changed) is backed by the
        // leaders that installed that state.
        if let Some(holders) = self.states.get(&(object.to_vec(), fence)) {
            let epochs: BTreeSet<u64> = holders.iter().map(|(e, _)| *e).collect();
            for epoch in epochs {
                for list in self.leaders.get(&epoch).into_iter().flatten() {
                    let count = holders
                        .iter()
                        .filter(|(e, id)| *e == epoch && list.contains(id))
                        .count();
                    if count > list.len() / 2 {
                        return Ok(());
                    }
                }
            }
        }
        // An epoch with one leader grants on that leader's word alone; its
        // fences start at the epoch shifted by 20 bits (docs/cluster.md).
        let alone = self
            .leaders
            .get(&(fence >> 20))
            .is_some_and(|lists| lists.iter().any(|l| l.len() == 1));
        if alone {
            return Ok(());
        }
        if seen.is_empty() {
            Err("no yes vote for its fence reached a leader that owns it".to_owned())
        } else {
            Err(seen.join("; "))
        }
    }
}
