//! The connection handle: connecting, freeing, the descriptor for event
//! loops, readiness, and the text of the last failure.

use std::ffi::{CStr, OsStr, c_char, c_int};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use nix::errno::Errno;
use snaplock_client::{Client, Error, clock, default_socket_path};

use crate::result::snaplock_result;

/// One connection to the agent (opaque).
///
/// Thread safety: one thread at a time. A connection may be handed to
/// another thread between calls, but two calls on the same connection
/// must never overlap; use one connection per thread instead (they are
/// cheap, and independent: each has its own locks).
///
/// Closing it (`snaplock_conn_free`) releases every lock it holds, except
/// those taken with `detach`.
pub struct snaplock_conn {
    pub(crate) client: Client,
    /// What the last failed call on this connection said, for
    /// `snaplock_conn_last_error`.
    last_error: String,
}

impl snaplock_conn {
    /// Records why a call failed and gives its result. An I/O failure also
    /// sets `errno`, the way a C caller looks for the system's reason.
    pub(crate) fn fail(&mut self, e: Error) -> snaplock_result {
        if let Error::Io(io) = &e {
            if let Some(n) = io.raw_os_error() {
                Errno::set_raw(n);
            }
        }
        self.last_error = e.to_string();
        snaplock_result::of_error(&e)
    }

    /// Records a failure found by the library itself.
    pub(crate) fn fail_with(
        &mut self,
        result: snaplock_result,
        why: impl Into<String>,
    ) -> snaplock_result {
        self.last_error = why.into();
        result
    }

    /// A required pointer parameter, named `what`, is NULL.
    pub(crate) fn null(&mut self, what: &str) -> snaplock_result {
        self.fail_with(
            snaplock_result::NullParameter,
            format!("{what} must not be NULL"),
        )
    }
}

/// Copies `text` into `buf` as `snprintf` does: at most `len - 1` bytes and
/// a terminating NUL when `len > 0`; nothing when `buf` is NULL. Returns
/// `text`'s full length, so a caller sees truncation as `ret >= len`.
///
/// # Safety
///
/// `buf` is NULL or writable for `len` bytes.
pub(crate) unsafe fn copy_out(text: &[u8], buf: *mut c_char, len: usize) -> usize {
    if !buf.is_null() && len > 0 {
        let n = text.len().min(len - 1);
        // SAFETY: `buf` is writable for `len` bytes (the caller's promise)
        // and `n + 1 <= len`; `text` is a separate Rust allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            buf.add(n).write(0);
        }
    }
    text.len()
}

/// Connects to the agent.
///
/// `socket_path` is the socket's path, or NULL for the default rule that
/// the agent and `snaplock-cli` use: `$SNAPLOCK_SOCKET`; else
/// `/run/snaplock/snaplock.sock` when `/run/snaplock` exists; else
/// `$XDG_RUNTIME_DIR/snaplock.sock`; else `/tmp/snaplock-<uid>/snaplock.sock`.
///
/// On success `*conn_out` is a new connection, to be freed with
/// `snaplock_conn_free`. Results: `SNAPLOCK_RESULT_NULL_PARAMETER`
/// (`conn_out` is NULL), `SNAPLOCK_RESULT_INVALID_PARAMETER` (an empty
/// path), `SNAPLOCK_RESULT_IO` (no agent there, permission denied...; `errno`
/// says which).
///
/// # Safety
///
/// `socket_path` is NULL or a NUL-terminated string; `conn_out` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn snaplock_connect(
    socket_path: *const c_char,
    conn_out: *mut *mut snaplock_conn,
) -> snaplock_result {
    ffi_boundary! {
        if conn_out.is_null() {
            return snaplock_result::NullParameter;
        }
        let explicit = if socket_path.is_null() {
            None
        } else {
            // SAFETY: not NULL, so a NUL-terminated string (the caller's promise).
            let bytes = unsafe { CStr::from_ptr(socket_path) }.to_bytes();
            if bytes.is_empty() {
                return snaplock_result::InvalidParameter;
            }
            Some(Path::new(OsStr::from_bytes(bytes)))
        };
        let path = default_socket_path(explicit);
        match Client::connect(&path) {
            Ok(client) => {
                let conn = Box::new(snaplock_conn {
                    client,
                    last_error: String::new(),
                });
                // SAFETY: `conn_out` is not NULL and writable (the caller's promise).
                unsafe { conn_out.write(Box::into_raw(conn)) };
                snaplock_result::Ok
            }
            Err(e) => {
                if let Error::Io(io) = &e {
                    if let Some(n) = io.raw_os_error() {
                        Errno::set_raw(n);
                    }
                }
                snaplock_result::of_error(&e)
            }
        }
    }
}

/// Closes the connection and frees it. The agent then releases every lock
/// the connection holds (except detached ones) and cancels its waiting
/// requests. NULL is allowed and does nothing. Free a connection once only.
///
/// # Safety
///
/// `conn` is NULL or a connection from `snaplock_connect` not freed yet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn snaplock_conn_free(conn: *mut snaplock_conn) {
    ffi_boundary! {
        if !conn.is_null() {
            // SAFETY: `conn` came from Box::into_raw in snaplock_connect and
            // is freed once (the caller's promise).
            drop(unsafe { Box::from_raw(conn) });
        }
    }
}

/// The connection's socket descriptor, for `poll(2)`, `epoll(7)` or an
/// event library: wait for it to be readable, then call
/// `snaplock_next_event` until `SNAPLOCK_RESULT_NO_EVENT`. -1 when `conn`
/// is NULL.
///
/// The descriptor stays owned by the connection: do not read from it,
/// write to it or close it.
///
/// # Safety
///
/// `conn` is NULL or a live connection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn snaplock_fd(conn: *const snaplock_conn) -> c_int {
    ffi_boundary! {
        // SAFETY: NULL or a live connection (the caller's promise).
        match unsafe { conn.as_ref() } {
            Some(conn) => conn.client.as_raw_fd(),
            None => -1,
        }
    }
}

/// Asks the agent whether it can grant locks now (`LOCKSTATUS`): on success
/// `*ready_out` is true (`LOCKREADY`) or false (`NOLOCK`).
///
/// # Safety
///
/// `conn` is NULL or a live connection; `ready_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn snaplock_status(
    conn: *mut snaplock_conn,
    ready_out: *mut bool,
) -> snaplock_result {
    ffi_boundary! {
        // SAFETY: NULL or a live connection, used by this thread only (the
        // caller's promise).
        let Some(conn) = (unsafe { conn.as_mut() }) else {
            return snaplock_result::NullParameter;
        };
        if ready_out.is_null() {
            return conn.null("ready_out");
        }
        match conn.client.status() {
            Ok(ready) => {
                // SAFETY: not NULL and writable (the caller's promise).
                unsafe { ready_out.write(ready) };
                snaplock_result::Ok
            }
            Err(e) => conn.fail(e),
        }
    }
}

/// How long from now the agent vouches for this connection's locks: the
/// holder's side of the lease. Sends `ALIVE` and waits for its answer.
///
/// In a cluster, on success `*valid_for_us_out` is the number of
/// microseconds, counted from the start of this call, for which the agent
/// still vouches for the locks. A holder that hears nothing newer must
/// stop acting on its locks by then, even while their leases run: its
/// agent may have lost contact with the rest of the cluster, which may
/// grant the lock to somebody else after that. Call it again well before
/// that (every fifth of the time, as `snaplock-cli` does); a time that no
/// longer moves on means the agent is out of contact. From an agent that
/// runs alone, `*valid_for_us_out` is -1: the lease is then the only limit.
///
/// Results: those of any request (`SNAPLOCK_RESULT_NO_REPLY`,
/// `SNAPLOCK_RESULT_CLOSED`, `SNAPLOCK_RESULT_IO`,
/// `SNAPLOCK_RESULT_PROTOCOL`), `SNAPLOCK_RESULT_NULL_PARAMETER`.
///
/// # Safety
///
/// `conn` is NULL or a live connection; `valid_for_us_out` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn snaplock_vouched_for(
    conn: *mut snaplock_conn,
    valid_for_us_out: *mut i64,
) -> snaplock_result {
    ffi_boundary! {
        // SAFETY: NULL or a live connection, used by this thread only (the
        // caller's promise).
        let Some(conn) = (unsafe { conn.as_mut() }) else {
            return snaplock_result::NullParameter;
        };
        if valid_for_us_out.is_null() {
            return conn.null("valid_for_us_out");
        }
        let start = clock::monotonic();
        match conn.client.vouched_for() {
            Ok(until) => {
                let micros = until.map_or(-1, |t| {
                    i64::try_from(t.saturating_duration_since(start).as_micros())
                        .unwrap_or(i64::MAX)
                });
                // SAFETY: not NULL and writable (the caller's promise).
                unsafe { valid_for_us_out.write(micros) };
                snaplock_result::Ok
            }
            Err(e) => conn.fail(e),
        }
    }
}

/// Sets how long a request waits for the agent's reply before failing
/// with `SNAPLOCK_RESULT_NO_REPLY` (default 5000 ms); a lock request waits
/// this much longer than its own `wait_ms`. 0 is
/// `SNAPLOCK_RESULT_INVALID_PARAMETER`.
///
/// # Safety
///
/// `conn` is NULL or a live connection.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn snaplock_set_reply_timeout(
    conn: *mut snaplock_conn,
    timeout_ms: u32,
) -> snaplock_result {
    ffi_boundary! {
        // SAFETY: NULL or a live connection, used by this thread only.
        let Some(conn) = (unsafe { conn.as_mut() }) else {
            return snaplock_result::NullParameter;
        };
        if timeout_ms == 0 {
            return conn.fail_with(
                snaplock_result::InvalidParameter,
                "the reply timeout must be at least 1 ms",
            );
        }
        conn.client
            .set_reply_timeout(Duration::from_millis(u64::from(timeout_ms)));
        snaplock_result::Ok
    }
}

/// Writes a description of the last call on `conn` that failed (any result
/// but `SNAPLOCK_RESULT_OK` and `SNAPLOCK_RESULT_NO_EVENT`) into `buf`,
/// with `snprintf(3)` semantics: at most `len - 1` bytes and a NUL, nothing
/// when `buf` is NULL or `len` is 0. Returns the description's full length
/// (0 when nothing failed yet, or `conn` is NULL): the text was cut when
/// the result is `len` or more.
///
/// # Safety
///
/// `conn` is NULL or a live connection; `buf` is NULL or writable for `len`
/// bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn snaplock_conn_last_error(
    conn: *const snaplock_conn,
    buf: *mut c_char,
    len: usize,
) -> usize {
    ffi_boundary! {
        // SAFETY: NULL or a live connection (the caller's promise).
        let text = match unsafe { conn.as_ref() } {
            Some(conn) => conn.last_error.as_bytes(),
            None => b"",
        };
        // SAFETY: `buf` is NULL or writable for `len` bytes (the caller's promise).
        unsafe { copy_out(text, buf, len) }
    }
}

/// Writes the socket path `snaplock_connect(NULL, ...)` would use into
/// `buf`, with `snprintf(3)` semantics (see `snaplock_conn_last_error`).
/// Returns the path's full length.
///
/// # Safety
///
/// `buf` is NULL or writable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn snaplock_default_socket_path(buf: *mut c_char, len: usize) -> usize {
    ffi_boundary! {
        let path = default_socket_path(None);
        // SAFETY: `buf` is NULL or writable for `len` bytes (the caller's promise).
        unsafe { copy_out(path.as_os_str().as_bytes(), buf, len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_out_cuts_like_snprintf_and_reports_the_full_length() {
        let mut buf = [b'x' as c_char; 8];
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { copy_out(b"0123456789", buf.as_mut_ptr(), buf.len()) };
        assert_eq!(n, 10);
        // SAFETY: copy_out wrote a NUL within the buffer.
        let got = unsafe { CStr::from_ptr(buf.as_ptr()) };
        assert_eq!(got, c"0123456");
        // SAFETY: NULL is allowed, and a zero length writes nothing.
        assert_eq!(unsafe { copy_out(b"abc", std::ptr::null_mut(), 5) }, 3);
        // SAFETY: as above.
        assert_eq!(unsafe { copy_out(b"abc", buf.as_mut_ptr(), 0) }, 3);
        assert_eq!(buf[0], b'0' as c_char, "len 0 writes nothing");
        // SAFETY: as above.
        assert_eq!(unsafe { copy_out(b"", buf.as_mut_ptr(), 1) }, 0);
        assert_eq!(buf[0], 0);
    }
}
