//! snaplock's sans-IO core: the wire grammar and the lock service itself.
//!
//! This crate owns no socket, reads no clock and draws no OS randomness
//! (a clippy `disallowed-methods` configuration enforces it): the agent
//! (`snaplockd`) and the deterministic simulator drive the same [`Core`].
//!
//! # The run loop
//!
//! ```text
//! loop {
//!     wait for I/O or until core.poll_timeout()
//!     now = Now { mono: <monotonic clock>, wall: <wall clock> }
//!     for each event: core.handle_input(now, Input::...)     // typed inputs
//!     core.handle_timeout(now)                                // idempotent
//!     while let Some(out) = core.poll_output() { ... }        // replies, closes
//! }
//! ```
//!
//! - Every `handle_*` call is one mutation and takes the current time;
//!   monotonic time must not go backwards.
//! - After every `handle_*` call, drain [`Core::poll_output`] until `None`,
//!   then sleep no later than [`Core::poll_timeout`].
//! - Deadlines are kept on the monotonic clock; the wall clock only
//!   translates the protocol's dates (`timeout=`, `timeout_date=`).
//!
//! The shell frames and parses lines with [`wire`] and hands over
//! [`wire::Message`]s; the core answers with messages for the shell to
//! encode. What the protocol means is in `snaplock(7)`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cluster;
pub mod core;
pub mod local;
pub mod metrics;
pub mod paths;
pub mod time;
pub mod vocab;
pub mod wire;

pub use crate::core::{
    ClusterConfig, Config, Core, Credentials, Input, InputError, Malformed, Output, Reply, Status,
};
pub use crate::time::{Now, Time, UnixTime};
pub use crate::vocab::{ClientId, PeerId};

/// The version of snaplock, as `INFO` and `--version` report it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
