//! Events: what the agent says about a lock without being asked, read
//! without blocking so that an event loop learns of them.
//!
//! The connection reads whole chunks from its socket, so a call such as
//! `snaplock_lock` may bring in an event along with its reply and keep it;
//! the socket is then not readable although an event is waiting. Hence the
//! rule the header states: call `snaplock_next_event` until
//! `SNAPLOCK_RESULT_NO_EVENT` whenever the descriptor is readable *and*
//! after any other call on the connection.

use std::ffi::c_char;
use std::time::Duration;

use snaplock_client::tag_of;
use snaplock_client::wire::Message;

use crate::conn::snaplock_conn;
use crate::result::snaplock_result;

/// The longest object name the agent accepts, in bytes (see `snaplock(7)`).
pub const SNAPLOCK_OBJECT_NAME_MAX: usize = 4096;

/// The size of `snaplock_event.object_name`: the longest name and its NUL.
pub const SNAPLOCK_OBJECT_NAME_SIZE: usize = SNAPLOCK_OBJECT_NAME_MAX + 1;

/// What an event says.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum snaplock_event_kind {
    /// The lease of a held lock ended (`UNLOCKED error=timedout`). The lock
    /// stays held for its `unlock_duration_ms` so the holder can stop: stop,
    /// then unlock.
    Expired = 1,
    /// The agent can no longer guarantee a lock (`UNLOCKED error=lost`, or
    /// any other error word): stop relying on it at once.
    Lost = 2,
    /// Anything else: a late answer to a request that already failed with
    /// `SNAPLOCK_RESULT_NO_REPLY`, for instance. Nothing to do.
    Other = 3,
    /// The agent dropped the variables this connection's transactions set
    /// in a namespace (a `TRANSACTIONFAILED` nobody asked for, such as
    /// `revoked: ...` when it lost contact with its cluster's leaders):
    /// `object_name` holds the namespace. Stop relying on them at once.
    Revoked = 4,
}

/// One event, written by `snaplock_next_event`.
///
/// Thread safety: plain data. It is over 4 KiB: keep one per connection
/// rather than one per call on a small stack.
#[repr(C)]
pub struct snaplock_event {
    /// What happened.
    pub kind: snaplock_event_kind,
    /// The length of `object_name` in bytes, without its NUL (0 when the
    /// event names no object).
    pub object_name_len: usize,
    /// The name of the lock (for `SNAPLOCK_EVENT_KIND_REVOKED`, the
    /// namespace), NUL-terminated. A name can contain a NUL byte of its
    /// own: `object_name_len` is the truth.
    pub object_name: [c_char; SNAPLOCK_OBJECT_NAME_SIZE],
}

impl snaplock_event {
    /// The event a message from the agent is, or why it cannot be one.
    fn of(msg: &Message) -> Result<snaplock_event, String> {
        let kind = match (msg.command.as_str(), msg.get_str("error")) {
            ("UNLOCKED", Some("timedout")) => snaplock_event_kind::Expired,
            // An error word this library does not know still means the lock
            // ended: treating it as lost is the safe reading.
            ("UNLOCKED", Some(_)) => snaplock_event_kind::Lost,
            ("TRANSACTIONFAILED", _) if tag_of(msg).is_none() => snaplock_event_kind::Revoked,
            _ => snaplock_event_kind::Other,
        };
        let name = match kind {
            snaplock_event_kind::Revoked => msg.get("namespace"),
            _ => msg.get("object_name"),
        }
        .unwrap_or_default();
        if name.len() > SNAPLOCK_OBJECT_NAME_MAX {
            return Err(format!(
                "the agent sent a {} event about an object name of {} bytes, more than {}",
                msg.command,
                name.len(),
                SNAPLOCK_OBJECT_NAME_MAX
            ));
        }
        let mut event = snaplock_event {
            kind,
            object_name_len: name.len(),
            object_name: [0; SNAPLOCK_OBJECT_NAME_SIZE],
        };
        for (to, from) in event.object_name.iter_mut().zip(name) {
            *to = *from as c_char;
        }
        Ok(event)
    }
}

/// Takes the next event without blocking: one already received, else one
/// the socket has ready. `SNAPLOCK_RESULT_OK` with `*event_out` written,
/// or `SNAPLOCK_RESULT_NO_EVENT` when there is none now.
///
/// `SNAPLOCK_RESULT_CLOSED` means the agent closed the connection: every
/// lock of the connection is gone (the same as a lost event for each), and
/// every later call says so again; free the connection.
/// `SNAPLOCK_RESULT_PROTOCOL`: an unreadable line was skipped; call again.
///
/// # Safety
///
/// `conn` is NULL or a live connection; `event_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn snaplock_next_event(
    conn: *mut snaplock_conn,
    event_out: *mut snaplock_event,
) -> snaplock_result {
    ffi_boundary! {
        // SAFETY: NULL or a live connection, used by this thread only.
        let Some(conn) = (unsafe { conn.as_mut() }) else {
            return snaplock_result::NullParameter;
        };
        if event_out.is_null() {
            return conn.null("event_out");
        }
        // A zero timeout: whatever is buffered, then at most what one
        // non-waiting read of a readable socket brings.
        let msg = match conn.client.recv(Some(Duration::ZERO)) {
            Ok(Some(msg)) => msg,
            Ok(None) => return snaplock_result::NoEvent,
            Err(e) => return conn.fail(e),
        };
        match snaplock_event::of(&msg) {
            Ok(event) => {
                // SAFETY: not NULL and writable (the caller's promise); a
                // raw write, since C memory is no valid event until then.
                unsafe { event_out.write(event) };
                snaplock_result::Ok
            }
            Err(why) => conn.fail_with(snaplock_result::Protocol, why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event_of(line: &str) -> Result<snaplock_event, String> {
        snaplock_event::of(&snaplock_client::wire::parse(line.as_bytes()).expect("valid line"))
    }

    fn name_of(event: &snaplock_event) -> Vec<u8> {
        event.object_name[..event.object_name_len]
            .iter()
            .map(|c| *c as u8)
            .collect()
    }

    #[test]
    fn an_ended_lease_is_an_expiry_and_other_errors_are_losses() {
        let e = event_of("UNLOCKED error=timedout;object_name=\"a;b\";tag=3").expect("event");
        assert_eq!(e.kind, snaplock_event_kind::Expired);
        assert_eq!(name_of(&e), b"a;b");
        assert_eq!(e.object_name[3], 0, "NUL-terminated");
        let e = event_of("UNLOCKED error=lost;object_name=x").expect("event");
        assert_eq!(e.kind, snaplock_event_kind::Lost);
        let e = event_of("UNLOCKED error=revoked;object_name=x").expect("event");
        assert_eq!(e.kind, snaplock_event_kind::Lost);
    }

    #[test]
    fn an_untagged_transaction_failure_is_a_revocation_of_its_namespace() {
        let e = event_of(
            "TRANSACTIONFAILED description=\"revoked: no contact\";error=unavailable;\
             failed=0;namespace=Clinical",
        )
        .expect("event");
        assert_eq!(e.kind, snaplock_event_kind::Revoked);
        assert_eq!(name_of(&e), b"Clinical");
        // A late reply to a transaction is not one.
        let e = event_of("TRANSACTIONFAILED error=failed;failed=1;namespace=Clinical;tag=4")
            .expect("event");
        assert_eq!(e.kind, snaplock_event_kind::Other);
    }

    #[test]
    fn anything_else_is_another_event() {
        let e = event_of("UNLOCKED object_name=x;tag=9").expect("event");
        assert_eq!(e.kind, snaplock_event_kind::Other);
        let e = event_of("LOCKED fence=1;key=k;object_name=y;tag=2;timeout_date=5").expect("event");
        assert_eq!(
            (e.kind, name_of(&e)),
            (snaplock_event_kind::Other, b"y".to_vec())
        );
        let e = event_of("NOLOCK").expect("event");
        assert_eq!((e.kind, e.object_name_len), (snaplock_event_kind::Other, 0));
    }

    #[test]
    fn the_longest_name_fits_and_a_longer_one_is_a_protocol_error() {
        let longest = "n".repeat(SNAPLOCK_OBJECT_NAME_MAX);
        let e = event_of(&format!("UNLOCKED error=timedout;object_name={longest}")).expect("fits");
        assert_eq!(e.object_name_len, SNAPLOCK_OBJECT_NAME_MAX);
        assert_eq!(e.object_name[SNAPLOCK_OBJECT_NAME_MAX], 0);
        let longer = "n".repeat(SNAPLOCK_OBJECT_NAME_MAX + 1);
        assert!(event_of(&format!("UNLOCKED error=timedout;object_name={longer}")).is_err());
    }
}
