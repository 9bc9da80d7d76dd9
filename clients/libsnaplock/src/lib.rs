//! `libsnaplock`: the C ABI of the snaplock client, for daemons written in
//! C or in any language that can call C.
//!
//! The functions wrap [`snaplock_client::Client`]; the header
//! `include/snaplock.h` is generated from this crate by cbindgen and
//! committed, and `man/libsnaplock.3` documents every function.
//!
//! # Conventions
//!
//! - Every fallible function returns a [`snaplock_result`]; its numbers are
//!   fixed forever, and a retired number is never reused.
//! - Outputs (`*_out` parameters) are written only when the function returns
//!   [`snaplock_result::Ok`]; on any other result they are left untouched.
//!   The one exception is [`snaplock_transaction`], whose result also says
//!   which statement failed when the agent refused the transaction.
//! - Every pointer is checked against NULL before anything else happens:
//!   a NULL that is not documented as allowed gives
//!   [`snaplock_result::NullParameter`].
//! - No panic crosses the boundary: every body runs inside a
//!   `catch_unwind` macro, which turns a panic into
//!   [`snaplock_result::Panic`] (or a harmless value where a function
//!   returns no result). A connection that saw a panic may be in any
//!   state: free it.
//! - A `const` first argument means the call does not change the
//!   connection.
//! - The caller owns the [`snaplock_conn`] that [`snaplock_connect`] gives
//!   and frees it exactly once with [`snaplock_conn_free`].
//!
//! # Thread safety
//!
//! A [`snaplock_conn`] is used by one thread at a time (it may move between
//! threads); separate connections are independent. The functions that take
//! no connection ([`snaplock_version`], [`snaplock_result_str`],
//! [`snaplock_lock_options_default`], [`snaplock_default_socket_path`]) may
//! be called from any thread at any time.

#![allow(unsafe_code)] // the C ABI: raw pointers from C, exported symbols
#![warn(clippy::undocumented_unsafe_blocks, missing_docs)]
#![allow(non_camel_case_types)] // C type names: snaplock_conn, snaplock_result

#[macro_use]
mod panic;
mod conn;
mod event;
mod lock;
mod result;
mod tx;

pub use crate::conn::{
    snaplock_conn, snaplock_conn_free, snaplock_conn_last_error, snaplock_connect,
    snaplock_default_socket_path, snaplock_fd, snaplock_set_reply_timeout, snaplock_status,
    snaplock_vouched_for,
};
pub use crate::event::{
    SNAPLOCK_OBJECT_NAME_MAX, SNAPLOCK_OBJECT_NAME_SIZE, snaplock_event, snaplock_event_kind,
    snaplock_next_event,
};
pub use crate::lock::{
    snaplock_extend, snaplock_grant, snaplock_lock, snaplock_lock_ex, snaplock_lock_extra,
    snaplock_lock_options, snaplock_lock_options_default, snaplock_policy, snaplock_unlock,
};
pub use crate::result::{snaplock_result, snaplock_result_str};
pub use crate::tx::{
    SNAPLOCK_TX_STATEMENTS_MAX, snaplock_transaction, snaplock_tx_options, snaplock_tx_result,
};

use std::ffi::c_char;

/// The major version of this library (`snaplock_version` gives the whole).
pub const SNAPLOCK_VERSION_MAJOR: u32 = 0;
/// The minor version of this library.
pub const SNAPLOCK_VERSION_MINOR: u32 = 1;
/// The patch version of this library.
pub const SNAPLOCK_VERSION_PATCH: u32 = 0;

/// The version of this library, such as `"0.1.0"`: a static string, never
/// NULL, never to be freed.
#[unsafe(no_mangle)]
pub extern "C" fn snaplock_version() -> *const c_char {
    ffi_boundary! {
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use super::*;

    #[test]
    fn the_version_macros_and_string_are_the_packages_version() {
        // SAFETY: snaplock_version returns a static NUL-terminated string.
        let version = unsafe { CStr::from_ptr(snaplock_version()) };
        assert_eq!(version.to_str(), Ok(env!("CARGO_PKG_VERSION")));
        let numbers =
            format!("{SNAPLOCK_VERSION_MAJOR}.{SNAPLOCK_VERSION_MINOR}.{SNAPLOCK_VERSION_PATCH}");
        assert_eq!(
            numbers,
            env!("CARGO_PKG_VERSION"),
            "update the SNAPLOCK_VERSION_* constants (and regenerate snaplock.h)"
        );
    }
}
