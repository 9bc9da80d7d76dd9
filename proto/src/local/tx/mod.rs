//! Lock transactions (Sky OS): atomic operations on named variables in
//! namespaces (snaplock(7), TRANSACTIONS).
//!
//! - [`stmt`]: one statement's grammar, read from its bytes;
//! - [`decode`]: a `TRANSACTION` message, read into a [`Transaction`];
//! - [`space`]: the namespaces, their variables and sessions, and how one
//!   transaction is applied to them, all or nothing.
//!
//! Everything here is pure: time comes in as a value, and every size is
//! bounded ([`Limits`], [`MAX_STATEMENTS`], [`MAX_VAR`], [`MAX_NAMESPACE`]).

pub mod decode;
pub mod run;
pub mod space;
pub mod stmt;

use std::fmt;
use std::time::Duration;

pub use decode::decode_transaction;
pub use space::{Committed, SessionId, Space};
pub use stmt::{Op, Statement, Var};

/// Most statements in one transaction (`s1` to `s32`).
pub const MAX_STATEMENTS: usize = 32;
/// Longest variable name, in bytes once its `%XX` escapes are decoded
/// (the `/` between the table and its keys count).
pub const MAX_VAR: usize = 1024;
/// Longest namespace name, in bytes.
pub const MAX_NAMESPACE: usize = 128;
/// Default time a variable lives after the transaction that last set it.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(60);

/// Bounds on what the transactions of all clients may hold at once; a
/// transaction that would pass one fails with `error=overflow`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most variables one connection holds, all its sessions (`pid`s) and
    /// namespaces together: a connection cannot take the agent's whole
    /// `total` by using many pids.
    pub per_client: usize,
    /// Most variables held in all (a variable held by two sessions counts
    /// twice).
    pub total: usize,
    /// Most namespaces that hold variables.
    pub namespaces: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            per_client: 10_000,
            total: 1_000_000,
            namespaces: 10_000,
        }
    }
}

/// Whether `name` may name a namespace: 1 to [`MAX_NAMESPACE`] bytes of
/// letters, digits, `_`, `-`, `.` and `:` (checked for length first).
pub fn is_valid_namespace_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':')
}

/// One decoded `TRANSACTION`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transaction {
    /// The namespace.
    pub namespace: Vec<u8>,
    /// `s1`, `s2`, ... in order.
    pub statements: Vec<Statement>,
    /// `pid=`: with the connection, the session.
    pub pid: Option<u64>,
    /// `tag=`, echoed.
    pub tag: Option<i64>,
    /// How long the variables it sets live.
    pub duration: Duration,
}

/// The `error=` of a `TRANSACTIONFAILED`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxError {
    /// An `assert` was false.
    Failed,
    /// The request is malformed.
    Invalid,
    /// A bound would be passed.
    Overflow,
    /// The agent cannot decide transactions now.
    Unavailable,
    /// The agent does not meet the request's reliability contract
    /// (`min_uptime`, `min_trust`).
    Untrusted,
    /// The agent's access rules (`acl_file`) do not grant this connection
    /// the namespace.
    Denied,
}

impl TxError {
    /// The word on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            TxError::Failed => "failed",
            TxError::Invalid => "invalid",
            TxError::Overflow => "overflow",
            TxError::Unavailable => "unavailable",
            TxError::Untrusted => "untrusted",
            TxError::Denied => "denied",
        }
    }
}

/// Why a transaction did not commit: `failed=N;error=E;description=TEXT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxRefusal {
    /// The statement (1 for `s1`), or 0 when it is about no statement.
    pub statement: usize,
    /// The error.
    pub error: TxError,
    /// For the human reading the reply.
    pub description: String,
}

impl TxRefusal {
    pub(crate) fn new(statement: usize, error: TxError, description: impl Into<String>) -> Self {
        TxRefusal {
            statement,
            error,
            description: description.into(),
        }
    }
}

impl fmt::Display for TxRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "failed={} error={}: {}",
            self.statement,
            self.error.as_str(),
            self.description
        )
    }
}
