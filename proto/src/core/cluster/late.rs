//! Reports that come after an epoch's state was built (docs/cluster.md
//! "Handover"): the collector passes them on to every leader, and each
//! counts its agent only if its own table knows the locks the report holds
//! on the objects it owns; counting it, the owner drops what the state
//! inherited for that agent and it no longer has.

use super::To;
use crate::cluster::batch::{Batch, BatchOf, ReportedTicket, read_batch};
use crate::cluster::config::Plant;
use crate::cluster::handover::Report;
use crate::cluster::ltable::LeaderState;
use crate::cluster::msg::{BadField, Part, PeerMsg};
use crate::cluster::{Cluster, Id};
use crate::core::Core;
use crate::time::Now;
use crate::vocab::ObjectName;
use std::collections::BTreeSet;

impl Core {
    /// A report after the state was built: passed on to every leader, each
    /// of which counts it only if it knows every lock the report holds on
    /// the objects it owns ([`Core::weigh_late`]): a home that holds what
    /// the epoch does not know must first revoke, but one whose locks all
    /// came into the state through the leaders' tables (it was only slow to
    /// report, e.g. its link to the collector came up late) keeps them.
    pub(super) fn late_report(&mut self, from: &Id, r: &Report) {
        let epoch = self.cluster.epoch.number;
        let mut lines = Vec::new();
        lines.push(PeerMsg::Tickets {
            epoch,
            part: Part::LateBegin { id: from.clone() },
        });
        let mut batch = Batch::new(BatchOf::Late, epoch);
        for (t, held) in &r.home {
            let t = ReportedTicket {
                home: from.clone(),
                ..t.clone()
            };
            lines.extend(batch.push(&t, Some(*held)));
        }
        lines.extend(batch.take());
        let count = lines.len() as u64 + 1;
        lines.push(PeerMsg::Tickets {
            epoch,
            part: Part::LateEnd {
                id: from.clone(),
                count,
            },
        });
        let leaders = self.cluster.epoch.leaders.clone();
        for l in leaders {
            for m in &lines {
                self.send(To::Agent(&l), m.clone());
            }
        }
        // A leader still waiting for the state gets the report with it
        // (one-computer seed 1845: the owner's link to the collector came
        // up after the report was passed on, and the home it never
        // counted revoked its lock).
        let h = &mut self.cluster.handover;
        if h.state_pending
            .as_ref()
            .is_some_and(|(e, _, _)| *e == epoch)
        {
            h.late_pending.insert(from.clone(), lines);
        }
    }

    /// A leader weighs a late report: it counts its agent (answers its
    /// pings as acting) only if its table has every lock the report holds
    /// on the objects this leader owns, with the same fence; then, as the
    /// owner, it drops the tickets the state inherited for that agent that
    /// the report no longer has (the home is the authority on its clients:
    /// nobody else would ever end them).
    pub(crate) fn weigh_late(&mut self, now: Now, home: &Id, tickets: Vec<(ReportedTicket, bool)>) {
        let me = self.cluster.me.clone();
        let Some(l) = self.cluster.leader.table.as_ref() else {
            return;
        };
        if !l.ready {
            let l = self.cluster.leader.table.as_mut().expect("leader");
            if l.late_early.len() < 64 {
                l.late_early.push((home.clone(), tickets));
            }
            return;
        }
        if l.reporters.contains(home) {
            return;
        }
        let mut missing = 0usize;
        for (t, held) in &tickets {
            if !*held || self.owner_of(&t.object).as_ref() != Some(&me) {
                continue;
            }
            let known = l
                .objects
                .get(&t.object)
                .and_then(|o| o.find(home, t.req).map(|p| o.tickets[p].state))
                .is_some_and(|s| {
                    matches!(s, LeaderState::Held { fence } | LeaderState::Inherited { fence } if fence == t.fence)
                })
                || (l.released).contains(&(home.clone(), t.object.clone(), t.req, t.fence));
            if !known {
                missing += 1;
            }
        }
        if missing > 0 {
            log::info!(
                "late report of {} holds {missing} locks this epoch does not know: not counted until it revokes them",
                Cluster::name_of(home)
            );
            return;
        }
        let has: BTreeSet<(&ObjectName, u64)> =
            tickets.iter().map(|(t, _)| (&t.object, t.req)).collect();
        let orphans: Vec<(ObjectName, u64)> = l
            .of_home_by_name(home)
            .into_iter()
            .filter(|(name, req)| !has.contains(&(*name, *req)))
            .filter(|(name, _)| self.owner_of(name).as_ref() == Some(&me))
            .filter(|(name, req)| {
                l.objects.get(*name).is_some_and(|o| {
                    o.find(home, *req).is_some_and(|p| {
                        matches!(o.tickets[p].state, LeaderState::Inherited { .. })
                    })
                })
            })
            .map(|(name, req)| (name.clone(), req))
            .collect();
        drop(has);
        let orphans = if self.cluster.cfg.plant == Plant::KeepOrphans {
            Vec::new()
        } else {
            orphans
        };
        let l = self.cluster.leader.table.as_mut().expect("leader");
        l.reporters.insert(home.clone());
        log::info!(
            "late report of {} counted{}",
            Cluster::name_of(home),
            if orphans.is_empty() {
                String::new()
            } else {
                format!(
                    ": {} inherited tickets it no longer has are dropped",
                    orphans.len()
                )
            }
        );
        for (name, req) in orphans {
            self.owner_release(now, &name, home, req);
        }
    }

    /// Owner: `home`, whose report is not counted yet, releases its held
    /// lock `req` on `object`. Its late report, taken before, may still
    /// list it: the lock was known to the epoch, and the home no longer
    /// holds it, so it does not stand in the way of counting the report
    /// (one-computer seed 4357: a client closed between the report and its
    /// weighing, and its agent, never counted, revoked every lock).
    pub(crate) fn note_released(&mut self, home: &Id, object: &ObjectName, req: u64) {
        let Some(l) = self.cluster.leader.table.as_mut() else {
            return;
        };
        if l.reporters.contains(home) || l.released.len() >= crate::cluster::ltable::RELEASED_KEPT {
            return;
        }
        let Some((name, o)) = l.objects.get_key_value(object) else {
            return;
        };
        let fence = o.find(home, req).and_then(|p| match o.tickets[p].state {
            LeaderState::Held { fence } | LeaderState::Inherited { fence } => Some(fence),
            _ => None,
        });
        if let Some(fence) = fence {
            let name = name.clone();
            l.released.insert((home.clone(), name, req, fence));
        }
    }

    /// A late report passed on by the collector (`part=late-begin`, its
    /// tickets, `part=late-end`).
    pub(super) fn on_late_part(&mut self, now: Now, part: Part) -> Result<(), BadField> {
        let max_tickets = self.config.max_tickets as u64;
        let max_lines = 2 + max_tickets;
        let Some(l) = self.cluster.leader.table.as_mut() else {
            return Ok(());
        };
        match part {
            Part::LateBegin { id } => {
                l.late_in = Some((id, Vec::new(), 1));
            }
            Part::Late(batch) => {
                let Some((home, tickets, lines)) = l.late_in.as_mut() else {
                    return Err(BadField("part (no late-begin)"));
                };
                *lines += 1;
                let batch = read_batch(&batch, Some(&*home))?;
                if (tickets.len() + batch.len()) as u64 > max_tickets || *lines > max_lines {
                    l.late_in = None;
                    return Err(BadField("part (too many tickets)"));
                }
                tickets.extend(batch.into_iter().map(|(t, held)| (t, held == Some(true))));
            }
            Part::LateEnd { id, count } => {
                let Some((home, tickets, lines)) = l.late_in.take() else {
                    return Err(BadField("part (no late-begin)"));
                };
                if count != lines + 1 || id != home {
                    return Err(BadField("count"));
                }
                self.weigh_late(now, &home, tickets);
            }
            _ => return Err(BadField("part")),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
