//! `TRANSACTION` (snaplock(7), TRANSACTIONS): lock transactions of Sky OS,
//! decided by this agent's [`Space`](crate::local::tx::Space).
//!
//! A single agent decides them here, with its [`Space`]; in a cluster the
//! owner leader of the namespace does (`cluster/tx.rs`, docs/cluster.md
//! "Transactions").

use super::Core;
use crate::local::acl::Action;
use crate::local::replies;
use crate::local::trust::Contract;
use crate::local::tx::{SessionId, TxError, TxRefusal, decode_transaction};
use crate::time::Now;
use crate::vocab::ClientId;
use crate::wire::Message;

impl Core {
    pub(super) fn transaction(&mut self, now: Now, client: ClientId, msg: &Message) {
        let tx = match decode_transaction(msg) {
            Ok(tx) => tx,
            Err((why, echo)) => {
                let reply = replies::transaction_failed(&echo.namespace, echo.tag, &why);
                return self.reply(client, reply);
            }
        };
        let refuse = |why: TxRefusal| replies::transaction_failed(&tx.namespace, tx.tag, &why);
        if let Err(why) = self.acl_check(client, &tx.namespace, Action::Transaction) {
            return self.reply(client, refuse(TxRefusal::new(0, TxError::Denied, why)));
        }
        // The reliability contract (`min_uptime`, `min_trust`, answered
        // with `error=untrusted`) is checked here, and only here: after the
        // request is read, before anything is decided or changed.
        if let Some(why) = self.tx_contract(now, msg) {
            return self.reply(client, refuse(why));
        }
        if self.stopping {
            let why = TxRefusal::new(0, TxError::Unavailable, "the agent is stopping");
            return self.reply(client, refuse(why));
        }
        if self.authority.is_cluster() {
            // The owner leader of the namespace decides (docs/cluster.md
            // "Transactions"); the session is the connection and its pid.
            let key = format!("{}/{}", client.0, tx.pid.unwrap_or(0));
            return self.home_tx_submit(now, client, tx, key);
        }
        let session = SessionId {
            client,
            pid: tx.pid,
        };
        let reply = match self.space.apply(now.mono, session, &tx) {
            Ok(done) => replies::transaction_ok(&tx.namespace, done.fence, &done.results, tx.tag),
            Err(why) => refuse(why),
        };
        self.reply(client, reply);
    }

    /// Whether this agent meets the transaction's reliability contract,
    /// as for `LOCK` (`Core::contract_refusal`): `None` when it does.
    fn tx_contract(&self, now: Now, msg: &Message) -> Option<TxRefusal> {
        let contract = match Contract::decode(msg) {
            Ok(contract) => contract,
            Err(why) => return Some(TxRefusal::new(0, TxError::Invalid, why.description)),
        };
        let why = self.contract_refusal(now, &contract)?;
        Some(TxRefusal::new(0, TxError::Untrusted, why.description))
    }
}
