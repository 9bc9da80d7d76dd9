//! Waiting progress, the owner's side (docs/cluster.md "Waiting
//! progress"): the owner alone knows an object's whole queue, so it tells
//! the home of each waiting ticket that asked (`LOCK …;progress=true`) its
//! place in line with `LOCKWAITING`, whenever that place changes.
//!
//! Bound: the positions are told once per input at most, for the objects
//! whose queue changed in it, to the tickets whose place changed, and
//! only to tickets that asked: a grant at the head of a queue of 10,000
//! waiters of which none asked costs no message; of which all asked, one
//! message to each (each moved up one), not one per change of the input.

use super::To;
use crate::cluster::Id;
use crate::cluster::ltable::LeaderState;
use crate::cluster::msg::{PeerMsg, TicketAt};
use crate::core::Core;
use crate::vocab::ObjectName;

impl Core {
    /// A `LOCK` that asked for progress, new or sent again: its home is
    /// told its place at the end of this input, unless it was told that
    /// place already.
    pub(super) fn owner_watch(&mut self, name: &ObjectName, home: &Id, req: u64) {
        let Some(l) = self.cluster.leader.table.as_mut() else {
            return;
        };
        let watch = l.progress.entry(name.clone()).or_default();
        watch.entry((home.clone(), req)).or_insert(0);
        l.progress_dirty.insert(name.clone());
    }

    /// The queue of `name` may have changed: its watchers' places are
    /// looked at again at the end of this input.
    pub(super) fn owner_queue_changed(&mut self, name: &ObjectName) {
        if let Some(l) = self.cluster.leader.table.as_mut() {
            if l.progress.contains_key(name) {
                l.progress_dirty.insert(name.clone());
            }
        }
    }

    /// The link to `home` came back: what it was told may have been lost
    /// with the link, so its watchers are told their places again.
    pub(super) fn owner_progress_again(&mut self, home: &Id) {
        let Some(l) = self.cluster.leader.table.as_mut() else {
            return;
        };
        if l.progress.is_empty() {
            return;
        }
        // The watched tickets are the waiting ones that asked: walked, not
        // the home's tickets (held ones too, a million maybe).
        for (name, watched) in &mut l.progress {
            let mut again = false;
            for (_, told) in watched.range_mut((home.clone(), 0)..=(home.clone(), u64::MAX)) {
                *told = 0;
                again = true;
            }
            if again {
                l.progress_dirty.insert(name.clone());
            }
        }
    }

    /// After each input: one `LOCKWAITING` to the home of each watched
    /// waiting ticket whose place changed (1 + the waiting tickets ahead
    /// of it; held, inherited and activating ones are not in line).
    pub(crate) fn owner_progress_flush(&mut self) {
        let epoch = self.cluster.epoch.number;
        let Some(l) = self.cluster.leader.table.as_mut() else {
            return;
        };
        if l.progress_dirty.is_empty() {
            return;
        }
        let mut tell = Vec::new();
        for name in std::mem::take(&mut l.progress_dirty) {
            let (Some(o), Some(watch)) = (l.objects.get(&name), l.progress.get_mut(&name)) else {
                continue;
            };
            let mut position = 0u64;
            for t in &o.tickets {
                if t.state != LeaderState::Waiting {
                    continue;
                }
                position += 1;
                let Some(told) = watch.get_mut(&(t.home.clone(), t.req)) else {
                    continue;
                };
                if *told != position {
                    *told = position;
                    let at = TicketAt {
                        epoch,
                        object: name.clone(),
                        home: t.home.clone(),
                        req: t.req,
                    };
                    tell.push((t.home.clone(), at, position));
                }
            }
        }
        for (home, at, position) in tell {
            self.send(To::Agent(&home), PeerMsg::Waiting { at, position });
        }
    }
}
