//! The local side: what one agent knows of its own clients' requests.
//!
//! - [`acl`]: who may lock which names (`acl_file`), as data, and the
//!   decision;
//! - [`request`]: a client's request, decoded and checked;
//! - [`table`]: the lock table, every object's tickets in bakery order,
//!   and their timers;
//! - [`ticket`]: the one rule that decides who may hold an object;
//! - `replies`: the replies to clients, built in one place;
//! - [`tx`]: lock transactions (Sky OS): namespaces of variables held by
//!   sessions, changed all or nothing.
//! - [`trust`]: the agent's uptime and call-rate trust, and the contract
//!   a request asks of them (`min_uptime`, `min_trust`).
//!
//! Nothing here knows of other agents: alone, the core decides with these;
//! in a cluster, the leaders' tables (`cluster/`) decide, and the home
//! keeps its clients' tickets here.

pub mod acl;
pub(crate) mod replies;
pub mod request;
pub mod table;
pub mod ticket;
pub mod trust;
pub mod tx;
