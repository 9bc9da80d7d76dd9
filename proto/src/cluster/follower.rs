//! A follower's side of a lock (docs/cluster.md "Granting"): it keeps a
//! replica of the tickets its owner sends and votes for at most one
//! conflicting grant of an object at once.

use super::Id;
use super::config::Plant;
use super::ltable::{LObject, LState, LTicket, ticket_msg};
use super::wire::{Bad, bytes_of, kind_of, str_of, u64_of};
use crate::core::Core;
use crate::time::Now;
use crate::vocab::Mode;
use crate::vocab::ObjectName;
use crate::wire::Message;

impl Core {
    pub(super) fn follower_add(&mut self, now: Now, from: &Id, msg: &Message) -> Result<(), Bad> {
        let object = bytes_of(msg, "object_name")?;
        if self.owner_of(object).as_deref() != Some(&**from) {
            return Err(Bad("object_name (sender is not its owner)"));
        }
        let home = str_of(msg, "home")?;
        // The home's id once per agent, not once per ticket.
        let home: Id = self
            .cluster
            .heard
            .get_key_value(home)
            .map_or_else(|| home.into(), |(k, _)| k.clone());
        let req = u64_of(msg, "req")?;
        let t = LTicket {
            key: str_of(msg, "key")?.into(),
            number: u64_of(msg, "number")?,
            kind: kind_of(msg)?,
            state: LState::Waiting,
            home: home.clone(),
            req,
            told: 0,
        };
        self.cluster.heard.entry(home.clone()).or_insert(now.mono);
        let l = self.cluster.leading.as_mut().expect("ready leader");
        if l.objects
            .get(object)
            .is_some_and(|o| o.find(&home, req).is_some())
        {
            return Ok(());
        }
        let name = l
            .objects
            .get_key_value(object)
            .map_or_else(|| ObjectName::from(object), |(k, _)| k.clone());
        l.insert(&name, t);
        Ok(())
    }

    pub(super) fn follower_activate(
        &mut self,
        now: Now,
        from: &Id,
        msg: &Message,
    ) -> Result<(), Bad> {
        let object = bytes_of(msg, "object_name")?;
        let home = str_of(msg, "home")?;
        let req = u64_of(msg, "req")?;
        let fence = u64_of(msg, "fence")?;
        if self.owner_of(object).as_deref() != Some(&**from) {
            return Err(Bad("object_name (sender is not its owner)"));
        }
        let acting = self.acting(now.mono);
        let plant = self.cluster.cfg.plant;
        let l = self.cluster.leading.as_mut().expect("ready leader");
        let delayed = l.delay_until.is_some_and(|d| now.mono < d);
        let mut ok = false;
        let mut other = None;
        if let Some(o) = l.objects.get_mut(object) {
            if let Some(pos) = o.find(home, req) {
                let compatible = plant == Plant::DoubleVote || may_also_hold(o, pos);
                if acting && !delayed && compatible {
                    o.tickets[pos].state = LState::Held { fence };
                    o.last_fence = o.last_fence.max(fence);
                    ok = true;
                } else if !compatible {
                    other = o
                        .tickets
                        .iter()
                        .find(|t| t.req != req && t.blocks())
                        .map(|t| (t.home.clone(), t.req));
                }
            }
        }
        self.raise_floor(fence);
        let mut m = ticket_msg("LOCKACTIVATED", self.cluster.epoch, object, home, req);
        m.set_u64("fence", fence);
        m.set("ok", if ok { "true" } else { "false" });
        if let Some((h, r)) = other {
            // Which vote stands in the way (snaplock's other_key): the owner
            // drops it if it no longer knows that ticket.
            m.set("other_home", &*h);
            m.set_u64("other_req", r);
        }
        self.post(from, m);
        Ok(())
    }
}

/// Whether a follower may vote for ticket `pos` next to the ones it voted
/// for already: never two conflicting grants of one object at once.
fn may_also_hold(o: &LObject, pos: usize) -> bool {
    let t = &o.tickets[pos];
    let held: Vec<&LTicket> = o
        .tickets
        .iter()
        .enumerate()
        .filter(|(i, x)| *i != pos && x.blocks())
        .map(|(_, x)| x)
        .collect();
    if held.is_empty() {
        return true;
    }
    if t.kind.mode == Mode::Exclusive || held.iter().any(|x| x.kind.mode == Mode::Exclusive) {
        return false;
    }
    let limit = held
        .iter()
        .chain(std::iter::once(&t))
        .filter_map(|x| x.kind.limit)
        .min()
        .map_or(u64::MAX, u64::from);
    (held.len() as u64) < limit
}
