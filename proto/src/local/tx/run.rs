//! One transaction's statements run against what it sees of the variables
//! it names: pure, and the same whether one agent decides
//! ([`super::Space`]) or the owner leader of the namespace does, from its
//! table (`core/cluster/tx.rs`).

use std::collections::BTreeMap;

use super::stmt::{Op, Var};
use super::{Transaction, TxError, TxRefusal};

/// What a transaction sees of one variable before it runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// Other sessions that hold it.
    pub others: usize,
    /// One of them holds it without `dup`.
    pub other_alone: bool,
    /// This session's holding: `Some(dup)`.
    pub mine: Option<bool>,
}

/// What one transaction does to one variable it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Touch {
    /// This session's holding before the transaction: `Some(dup)`.
    pub before: Option<bool>,
    /// This session's holding after it: `Some(dup)`.
    pub now: Option<bool>,
    /// A `set` of this session renewed or took it.
    pub set: bool,
    others: usize,
    other_alone: bool,
}

impl Touch {
    /// The session's holding is new, gone, or held with another `dup`: the
    /// variable's holders change (a renewal alone changes only when it ends).
    pub fn changes_holders(&self) -> bool {
        self.before != self.now
    }
}

/// The values of a committed transaction's statements, and what it does to
/// each variable it names.
pub type Ran = (Vec<bool>, BTreeMap<Var, Touch>);

/// Runs `tx`'s statements in order, each seeing the effects of the earlier
/// ones. `seen` tells what the variable looked like before the transaction;
/// `overflow(delta)` says why one more holding, after `delta` holdings this
/// transaction already added (negative: removed), passes a bound, if it
/// does. Nothing is changed here: the caller applies the touches of a
/// transaction that ran (`Ok`), and nothing of one that did not.
pub fn run(
    tx: &Transaction,
    mut seen: impl FnMut(&Var) -> Seen,
    mut overflow: impl FnMut(isize) -> Option<String>,
) -> Result<Ran, TxRefusal> {
    let mut touched: BTreeMap<Var, Touch> = BTreeMap::new();
    let mut delta: isize = 0;
    let mut results = Vec::with_capacity(tx.statements.len());
    for (i, st) in tx.statements.iter().enumerate() {
        let n = i + 1;
        let var = st.op.var();
        let t = touched.entry(var.clone()).or_insert_with(|| {
            let s = seen(var);
            Touch {
                before: s.mine,
                now: s.mine,
                set: false,
                others: s.others,
                other_alone: s.other_alone,
            }
        });
        let result = match &st.op {
            Op::Exists(_) => t.others > 0 || t.now.is_some(),
            Op::Delete(_) => {
                let held = t.now.take().is_some();
                delta -= isize::from(held);
                held
            }
            Op::Set(_, dup) => {
                if let Some(mine) = t.now {
                    // Renewing: shared with others, it stays shared.
                    t.now = Some(if t.others > 0 { mine } else { *dup });
                    t.set = true;
                    true
                } else if t.others == 0 || (*dup && !t.other_alone) {
                    if let Some(why) = overflow(delta) {
                        return Err(TxRefusal::new(n, TxError::Overflow, format!("s{n}: {why}")));
                    }
                    t.now = Some(*dup);
                    t.set = true;
                    delta += 1;
                    true
                } else {
                    false
                }
            }
        };
        let value = st.value(result);
        results.push(value);
        if !value && st.fails_on_false() {
            return Err(TxRefusal::new(
                n,
                TxError::Failed,
                format!("s{n}: {st} is false"),
            ));
        }
    }
    Ok((results, touched))
}
