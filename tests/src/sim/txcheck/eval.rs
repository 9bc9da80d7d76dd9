//! Replaying one transaction at one point of a namespace's serial order
//! (`super`): the holdings of its variables, present for sure, maybe, or
//! wildly, and the answers each statement may have had.

use std::collections::BTreeMap;

use super::{Placed, Point, TxSent, show_stmt};
use crate::txmodel::{Op, Session, Stmt};

/// A holder's `dup`, as far as it is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dup {
    No,
    Yes,
    Either,
}

impl Dup {
    fn of(dup: bool) -> Dup {
        if dup { Dup::Yes } else { Dup::No }
    }

    fn join(self, other: Dup) -> Dup {
        if self == other { self } else { Dup::Either }
    }
}

/// One session's holding of a variable.
#[derive(Clone, Debug)]
struct Holding {
    session: Session,
    dup: Dup,
    /// When the transaction that last set it was sent.
    since: u64,
    /// Set by a transaction that was never answered: anything goes.
    wild: bool,
    /// Seen present in the transaction being replayed.
    seen: bool,
}

/// The holdings of one namespace, variable by variable (canonical names).
#[derive(Clone, Debug, Default)]
pub(super) struct Space {
    vars: BTreeMap<String, Vec<Holding>>,
}

impl Space {
    /// A transaction never answered may have set its variables here.
    pub(super) fn wildly_set(&mut self, tx: &TxSent) {
        for st in &tx.stmts {
            let Op::Set(var, _) = &st.op else {
                continue;
            };
            let hs = self.vars.entry(var.clone()).or_default();
            hs.retain(|h| h.session != tx.session);
            hs.push(Holding {
                session: tx.session,
                dup: Dup::Either,
                since: tx.sent_at,
                wild: true,
                seen: false,
            });
        }
    }

    pub(super) fn end_transaction(&mut self) {
        for h in self.vars.values_mut().flatten() {
            h.seen = false;
        }
        self.vars.retain(|_, hs| !hs.is_empty());
    }
}

/// One transaction replayed at one point of the serial order.
pub(super) struct Eval<'s, 'd> {
    pub(super) space: &'s mut Space,
    pub(super) dooms: &'d BTreeMap<u64, Vec<Placed>>,
    pub(super) point: Point,
}

/// Whether a holding is there for sure, or maybe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Presence {
    Sure,
    /// May be gone; settles when an answer says.
    Maybe,
    /// Anything goes, nothing settles it.
    Wild,
}

impl Eval<'_, '_> {
    fn presence(&self, h: &Holding) -> Presence {
        if h.wild {
            return Presence::Wild;
        }
        let doomed = self
            .dooms
            .get(&h.session.0)
            .is_some_and(|ds| ds.iter().any(|d| d.point <= self.point && d.at >= h.since));
        if doomed && !h.seen {
            Presence::Maybe
        } else {
            Presence::Sure
        }
    }

    /// Runs `stmts` for `session`; `observed[k]` is the value statement
    /// `k` must have (after its `not`s), `None` when unknown. Settles
    /// maybe-present holdings as the values say; `Err` when no choice of
    /// them gives the values.
    pub(super) fn run(
        &mut self,
        session: Session,
        since: u64,
        stmts: &[Stmt],
        observed: &[Option<bool>],
    ) -> Result<(), String> {
        for (k, (st, obs)) in stmts.iter().zip(observed).enumerate() {
            let base = obs.map(|v| v ^ (st.nots % 2 == 1));
            let r = match &st.op {
                Op::Exists(var) => self.exists(var, base),
                Op::Delete(var) => self.delete(session, var, base),
                Op::Set(var, dup) => self.set(session, since, var, *dup, base),
            };
            let verb = match st.op {
                Op::Exists(_) => "exists",
                Op::Delete(_) => "delete",
                Op::Set(..) => "set",
            };
            r.map_err(|why| format!("s{} ({}): its {verb} {why}", k + 1, show_stmt(st)))?;
        }
        Ok(())
    }

    fn holdings(&self, var: &str) -> Vec<(usize, Presence)> {
        self.space.vars.get(var).map_or_else(Vec::new, |hs| {
            hs.iter()
                .enumerate()
                .map(|(i, h)| (i, self.presence(h)))
                .collect()
        })
    }

    fn holders(&mut self, var: &str) -> &mut Vec<Holding> {
        self.space.vars.entry(var.to_owned()).or_default()
    }

    /// Removes the maybe-present holdings `idx` of `var`, seen absent.
    fn gone(&mut self, var: &str, idx: &[usize]) {
        let hs = self.holders(var);
        let mut i = 0;
        hs.retain(|_| {
            i += 1;
            !idx.contains(&(i - 1))
        });
    }

    fn exists(&mut self, var: &str, base: Option<bool>) -> Result<(), String> {
        let hs = self.holdings(var);
        let sure = hs.iter().any(|(_, p)| *p == Presence::Sure);
        match base {
            None => Ok(()),
            Some(true) if hs.is_empty() => Err("was true, but no session can hold it".to_owned()),
            Some(true) => {
                if let [(i, Presence::Maybe)] = hs[..] {
                    self.holders(var)[i].seen = true;
                }
                Ok(())
            }
            Some(false) if sure => Err("was false, but a session holds it for sure".to_owned()),
            Some(false) => {
                let maybe: Vec<usize> = hs
                    .iter()
                    .filter(|(_, p)| *p == Presence::Maybe)
                    .map(|(i, _)| *i)
                    .collect();
                self.gone(var, &maybe);
                Ok(())
            }
        }
    }

    fn delete(&mut self, session: Session, var: &str, base: Option<bool>) -> Result<(), String> {
        let hs = self.holdings(var);
        let mine = self.mine(var, session, &hs);
        match (base, mine) {
            (Some(true), None) => return Err("was true, but the session held nothing".to_owned()),
            (Some(false), Some((_, Presence::Sure))) => {
                return Err("was false, but the session held it for sure".to_owned());
            }
            _ => {}
        }
        // A wild holding stays wild: the transaction that set it may take
        // effect after this one.
        if let Some((i, Presence::Sure | Presence::Maybe)) = mine {
            self.gone(var, &[i]);
        }
        Ok(())
    }

    fn mine(
        &self,
        var: &str,
        session: Session,
        hs: &[(usize, Presence)],
    ) -> Option<(usize, Presence)> {
        let vars = self.space.vars.get(var)?;
        hs.iter()
            .copied()
            .find(|(i, _)| vars[*i].session == session)
    }

    fn set(
        &mut self,
        session: Session,
        since: u64,
        var: &str,
        dup: bool,
        base: Option<bool>,
    ) -> Result<(), String> {
        let hs = self.holdings(var);
        let mine = self.mine(var, session, &hs);
        let vars = self.space.vars.get(var);
        let others: Vec<(usize, Presence, Dup)> = hs
            .iter()
            .filter(|(i, _)| Some(*i) != mine.map(|m| m.0))
            .map(|&(i, p)| (i, p, vars.expect("held")[i].dup))
            .collect();
        // Another holder blocks the set when it is there and either side
        // asked without dup.
        let surely_blocks = |d: Dup| !dup || d == Dup::No;
        let may_block = |d: Dup| !dup || d != Dup::Yes;
        let surely_blocked = others
            .iter()
            .any(|&(_, p, d)| p == Presence::Sure && surely_blocks(d));
        let blockers: Vec<(usize, Presence, Dup)> = others
            .iter()
            .copied()
            .filter(|&(_, _, d)| may_block(d))
            .collect();
        let mine_sure = mine.is_some_and(|(_, p)| p == Presence::Sure);
        let can_be_true = mine.is_some() || !surely_blocked;
        let can_be_false = !mine_sure && !blockers.is_empty();
        match base {
            None if can_be_true && can_be_false => {
                // Only ever replayed for a failure: its scratch space
                // takes "maybe set".
                let old = mine.map(|(i, _)| vars.expect("held")[i].dup);
                self.hold(
                    session,
                    since,
                    var,
                    old.map_or(Dup::Either, |o| o.join(Dup::of(dup))),
                    true,
                );
                Ok(())
            }
            None => self.set(session, since, var, dup, Some(can_be_true)),
            Some(true) if !can_be_true => Err(
                "was true, but another session holds it for sure, and one side asked without dup"
                    .to_owned(),
            ),
            Some(false) if !can_be_false => Err(if mine_sure {
                "was false, but the session held it already".to_owned()
            } else {
                "was false, but no session that could block it may hold it".to_owned()
            }),
            Some(false) => {
                if let Some((i, Presence::Maybe)) = mine {
                    self.gone(var, &[i]);
                    return self.set(session, since, var, dup, Some(false));
                }
                if let [(i, p, d)] = blockers[..] {
                    let h = &mut self.holders(var)[i];
                    if p == Presence::Maybe {
                        h.seen = true;
                    }
                    if p != Presence::Wild && dup && d == Dup::Either {
                        h.dup = Dup::No;
                    }
                }
                Ok(())
            }
            Some(true) => {
                let old = mine.map(|(i, p)| (vars.expect("held")[i].dup, p));
                if mine.is_none() {
                    // A new holding: no other may be there unless both
                    // sides asked with dup.
                    let mut absent = Vec::new();
                    for &(i, p, d) in &others {
                        if p == Presence::Maybe && surely_blocks(d) {
                            absent.push(i);
                        } else if p == Presence::Sure && d == Dup::Either && dup {
                            self.holders(var)[i].dup = Dup::Yes;
                        }
                    }
                    self.gone(var, &absent);
                }
                let left = self.holdings(var);
                let others_left = left.len() - usize::from(mine.is_some());
                let shared_for_sure = left.iter().any(|&(i, p)| {
                    p == Presence::Sure && self.space.vars[var][i].session != session
                });
                let renewed = |old: Dup| {
                    if others_left == 0 {
                        Dup::of(dup)
                    } else if shared_for_sure {
                        old
                    } else {
                        old.join(Dup::of(dup))
                    }
                };
                let new = match old {
                    None => Dup::of(dup),
                    Some((o, Presence::Sure)) => renewed(o),
                    Some((o, _)) => renewed(o).join(Dup::of(dup)),
                };
                self.hold(session, since, var, new, false);
                Ok(())
            }
        }
    }

    /// `session` holds `var` now (for sure, or wildly; a wild holding
    /// stays wild).
    fn hold(&mut self, session: Session, since: u64, var: &str, dup: Dup, wild: bool) {
        let hs = self.holders(var);
        let wild = wild || hs.iter().any(|h| h.session == session && h.wild);
        let dup = if wild { Dup::Either } else { dup };
        hs.retain(|h| h.session != session);
        hs.push(Holding {
            session,
            dup,
            since,
            wild,
            seen: true,
        });
    }
}
