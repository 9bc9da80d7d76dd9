//! Locks owned by a unit (`LOCK …;owner=cgroup`): kept after their
//! connection closes, until the client's cgroup has no process left.
//!
//! The shell says which cgroup a connection's peer is in when it opens
//! (`Credentials::cgroup`, the cgroup directory's inode), watches a
//! cgroup while the core asks ([`Output::WatchUnit`] to
//! [`Output::UnwatchUnit`]), and says when one is empty
//! (`Input::UnitEmpty`). The core keeps which tickets each cgroup owns,
//! so an empty cgroup releases them without a walk of the table.
//!
//! Such a lock is a detached lock whose end is also tied to its cgroup:
//! its lease applies as to any lock, it is released by `UNLOCK` with its
//! key from a connection of the same uid once its own connection is gone,
//! and in a cluster the home's table keeps it as it keeps a detached one
//! (the leaders never know the difference).

use std::collections::{BTreeMap, BTreeSet};

use super::{Core, Output};
use crate::local::replies;
use crate::local::table::Ticket;
use crate::time::Now;
use crate::vocab::{ClientId, ObjectName, Refusal, TicketId};

/// Most cgroups watched at once. The shell spends one inotify watch per
/// cgroup, and those count against the kernel's per-user
/// `fs.inotify.max_user_watches` (8192 on many kernels), shared with every
/// other process of the agent's user: a quarter of it leaves them room,
/// and is still far more units than one computer runs lock-holding jobs in.
pub const MAX_UNITS: usize = 2048;

/// What a client is told when its cgroup's locks end.
const EMPTIED: &str =
    "the client's cgroup has no process left (or the agent cannot watch it: see its log)";

/// The tickets of each watched cgroup.
#[derive(Debug, Default)]
pub(crate) struct Units {
    by_unit: BTreeMap<u64, BTreeSet<(ObjectName, TicketId)>>,
}

impl Units {
    /// Whether one more ticket of `unit` would watch more cgroups than
    /// [`MAX_UNITS`].
    pub fn full_for(&self, unit: u64) -> bool {
        self.by_unit.len() >= MAX_UNITS && !self.by_unit.contains_key(&unit)
    }

    /// How many cgroups are watched.
    pub fn watched(&self) -> usize {
        self.by_unit.len()
    }
}

impl Core {
    /// Ticket `id` on `name`, asked by `client`, is owned by cgroup `unit`:
    /// watched from its first ticket on.
    pub(crate) fn unit_bound(
        &mut self,
        unit: u64,
        client: ClientId,
        name: &ObjectName,
        id: TicketId,
    ) {
        let set = self.units.by_unit.entry(unit).or_default();
        if set.is_empty() {
            self.out.push_back(Output::WatchUnit { unit, client });
        }
        set.insert((name.clone(), id));
        debug_assert!(
            self.units.watched() <= MAX_UNITS,
            "INVARIANT: watched cgroups are bounded"
        );
    }

    /// Ticket `t` on `name` is gone: its cgroup is watched no more once it
    /// owns nothing.
    pub(crate) fn unit_forget(&mut self, name: &ObjectName, t: &Ticket) {
        let Some(unit) = t.unit else {
            return;
        };
        if let Some(set) = self.units.by_unit.get_mut(&unit) {
            set.remove(&(name.clone(), t.id));
            if set.is_empty() {
                self.units.by_unit.remove(&unit);
                self.out.push_back(Output::UnwatchUnit { unit });
            }
        }
    }

    /// Cgroup `unit` has no process left: what it holds is released, what
    /// it waits for is cancelled (a connection still open, as one passed to
    /// a process of another cgroup, is told `UNLOCKED error=lost` or
    /// `LOCKFAILED error=lost`).
    pub(crate) fn unit_empty(&mut self, now: Now, unit: u64) {
        let Some(set) = self.units.by_unit.remove(&unit) else {
            return; // a late report: nothing of it is left
        };
        let mut touched = BTreeSet::new();
        for (name, id) in set {
            // Its set is gone already: taking the ticket asks no second
            // `UnwatchUnit`.
            let Some(t) = self.take_ticket(&name, id) else {
                continue;
            };
            if let Some(owner) = t.owner {
                let reply = if t.state.is_held() {
                    let mut m = replies::unlocked(&name, t.tag, Some("lost"));
                    m.set("description", EMPTIED);
                    m
                } else {
                    replies::lock_failed(&name, Some(&t.key), t.tag, &Refusal::new("lost", EMPTIED))
                };
                self.reply(owner, reply);
            }
            if t.state.is_held() {
                log::info!(
                    "lock \"{}\" of key {} released: its cgroup has no process left",
                    String::from_utf8_lossy(&name).escape_debug(),
                    t.key
                );
            }
            touched.insert(name);
        }
        self.out.push_back(Output::UnwatchUnit { unit });
        for name in touched {
            self.grant_what_may_be(now, &name);
        }
    }
}

#[cfg(test)]
mod tests;
