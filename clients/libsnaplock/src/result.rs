//! The one result type of every fallible function, and how the client's
//! errors map onto it.

use std::ffi::{CStr, c_char};

use snaplock_client::Error;

/// What a call did. `SNAPLOCK_RESULT_OK` is 0; every other number is fixed
/// forever: new results get new numbers, retired ones stay reserved.
///
/// In C the type is `uint32_t`, so a value from a newer library is still a
/// valid value to pass to `snaplock_result_str`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum snaplock_result {
    /// The call succeeded; its outputs are written.
    Ok = 0,
    /// A pointer parameter that must not be NULL was NULL. Nothing happened.
    NullParameter = 1000,
    /// A parameter is out of range or malformed, or the agent refused the
    /// request's parameters (`error=invalid`, e.g. an EXTEND or UNLOCK of a
    /// lock this connection does not have). Nothing changed.
    InvalidParameter = 1001,
    /// A bug in the library: it panicked. Free the connection.
    Panic = 1002,
    /// A system call failed (connecting, reading, writing); `errno` and the
    /// connection's last error say which.
    Io = 1003,
    /// The lock was not granted before its deadline (`error=timedout`);
    /// for an EXTEND: the lease had already ended.
    Timeout = 1004,
    /// The lock is taken and the request said not to wait (`try_once`,
    /// `error=busy`).
    Busy = 1005,
    /// The lock is gone (`UNLOCKED error=lost` or `error=timedout` in reply
    /// to the request): whoever relied on it must stop.
    Lost = 1006,
    /// The service cannot grant locks now, or could not before the
    /// deadline: the agent is stopping, or the cluster has no leaders, no
    /// quorum, leaders changing or a lock-delay (`error=unavailable`).
    Unavailable = 1007,
    /// The agent sent something this library does not understand. The
    /// agent's state about the request is unknown.
    Protocol = 1008,
    /// The lock belongs to another connection, or the agent's access rules
    /// do not grant the name or namespace (`error=denied`).
    Denied = 1009,
    /// This connection (or this `pid`) already has a request on the object,
    /// waiting or held (`error=duplicate`).
    Duplicate = 1010,
    /// The agent has too many requests, on the object or in all
    /// (`error=overflow`).
    Overflow = 1011,
    /// The agent closed the connection: every lock of the connection is
    /// released. Free it and connect again.
    Closed = 1012,
    /// `snaplock_next_event`: nothing has arrived. Not an error.
    NoEvent = 1013,
    /// No reply came from the agent in time (see
    /// `snaplock_set_reply_timeout`). A LOCK is cancelled before this is
    /// returned.
    NoReply = 1014,
    /// The agent refused the request with an `error=` word this library
    /// does not know (a newer agent); the connection's last error has it.
    Refused = 1015,
    /// The agent does not meet the reliability contract the request stated
    /// (`snaplock_lock_extra.min_uptime_ms`, `min_trust_ppm`;
    /// `error=untrusted`): it has not run long enough, or its trust is too
    /// low. Nothing was queued; another agent, or the same one later, may
    /// meet it.
    Untrusted = 1016,
    /// `snaplock_transaction`: an `assert` of the transaction was false
    /// (`error=failed`); `snaplock_tx_result.failed` says which. Nothing
    /// changed.
    TxFailed = 1017,
}

impl snaplock_result {
    /// Every result, for tests and for [`snaplock_result::from_u32`].
    pub(crate) const ALL: [snaplock_result; 19] = [
        snaplock_result::Ok,
        snaplock_result::NullParameter,
        snaplock_result::InvalidParameter,
        snaplock_result::Panic,
        snaplock_result::Io,
        snaplock_result::Timeout,
        snaplock_result::Busy,
        snaplock_result::Lost,
        snaplock_result::Unavailable,
        snaplock_result::Protocol,
        snaplock_result::Denied,
        snaplock_result::Duplicate,
        snaplock_result::Overflow,
        snaplock_result::Closed,
        snaplock_result::NoEvent,
        snaplock_result::NoReply,
        snaplock_result::Refused,
        snaplock_result::Untrusted,
        snaplock_result::TxFailed,
    ];

    /// The result with this number, if there is one.
    pub(crate) fn from_u32(n: u32) -> Option<snaplock_result> {
        Self::ALL.into_iter().find(|r| *r as u32 == n)
    }

    /// The client's error as a result.
    pub(crate) fn of_error(e: &Error) -> snaplock_result {
        match e {
            Error::Io(_) => snaplock_result::Io,
            Error::Timeout => snaplock_result::NoReply,
            Error::Refused { error, .. } => match error.as_str() {
                "timedout" => snaplock_result::Timeout,
                "busy" => snaplock_result::Busy,
                "invalid" => snaplock_result::InvalidParameter,
                "duplicate" => snaplock_result::Duplicate,
                "overflow" => snaplock_result::Overflow,
                "unavailable" => snaplock_result::Unavailable,
                "denied" => snaplock_result::Denied,
                "untrusted" => snaplock_result::Untrusted,
                _ => snaplock_result::Refused,
            },
            Error::Lost { .. } => snaplock_result::Lost,
            Error::Protocol(_) => snaplock_result::Protocol,
            Error::Closed => snaplock_result::Closed,
        }
    }

    fn text(self) -> &'static CStr {
        match self {
            snaplock_result::Ok => c"success",
            snaplock_result::NullParameter => c"a required pointer parameter is NULL",
            snaplock_result::InvalidParameter => c"invalid parameter",
            snaplock_result::Panic => c"internal error (panic) in libsnaplock",
            snaplock_result::Io => c"input/output error talking to the agent",
            snaplock_result::Timeout => c"the lock was not granted before the deadline",
            snaplock_result::Busy => c"the lock is taken",
            snaplock_result::Lost => c"the lock is lost",
            snaplock_result::Unavailable => c"the lock service is unavailable",
            snaplock_result::Protocol => c"protocol error: unexpected message from the agent",
            snaplock_result::Denied => {
                c"the lock belongs to another connection, or the agent's access rules do not grant it"
            }
            snaplock_result::Duplicate => c"a request on this object is already waiting or held",
            snaplock_result::Overflow => c"the agent has too many requests",
            snaplock_result::Closed => c"the agent closed the connection",
            snaplock_result::NoEvent => c"no event",
            snaplock_result::NoReply => c"no reply from the agent in time",
            snaplock_result::Refused => c"the agent refused the request",
            snaplock_result::Untrusted => c"the agent does not meet the reliability contract",
            snaplock_result::TxFailed => c"an assert of the transaction was false",
        }
    }
}

/// A short English description of `result`: a static string, never NULL,
/// never to be freed. An unknown number gives `"unknown result"`.
///
/// The parameter is a `uint32_t`, not the enum, so that any number a C
/// program passes is a valid argument.
#[unsafe(no_mangle)]
pub extern "C" fn snaplock_result_str(result: u32) -> *const c_char {
    ffi_boundary! {
        match snaplock_result::from_u32(result) {
            Some(r) => r.text().as_ptr(),
            None => c"unknown result".as_ptr(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_numbers_are_the_published_ones() {
        let numbers: Vec<u32> = snaplock_result::ALL.iter().map(|r| *r as u32).collect();
        let mut expected = vec![0];
        expected.extend(1000..1018);
        assert_eq!(numbers, expected);
    }

    #[test]
    fn every_result_has_its_own_text_and_unknown_numbers_have_one_too() {
        let mut texts = std::collections::BTreeSet::new();
        for r in snaplock_result::ALL {
            // SAFETY: snaplock_result_str returns a static NUL-terminated string.
            let text = unsafe { CStr::from_ptr(snaplock_result_str(r as u32)) };
            assert!(!text.is_empty());
            assert!(texts.insert(text.to_owned()), "{r:?} repeats a text");
        }
        for n in [1, 999, 1018, u32::MAX] {
            assert_eq!(snaplock_result::from_u32(n), None);
            // SAFETY: as above.
            let text = unsafe { CStr::from_ptr(snaplock_result_str(n)) };
            assert_eq!(text, c"unknown result");
        }
    }

    #[test]
    fn every_refusal_word_of_the_protocol_has_its_result() {
        let refused = |word: &str| {
            snaplock_result::of_error(&Error::Refused {
                error: word.to_owned(),
                description: String::new(),
            })
        };
        assert_eq!(refused("timedout"), snaplock_result::Timeout);
        assert_eq!(refused("busy"), snaplock_result::Busy);
        assert_eq!(refused("invalid"), snaplock_result::InvalidParameter);
        assert_eq!(refused("duplicate"), snaplock_result::Duplicate);
        assert_eq!(refused("overflow"), snaplock_result::Overflow);
        assert_eq!(refused("unavailable"), snaplock_result::Unavailable);
        assert_eq!(refused("denied"), snaplock_result::Denied);
        assert_eq!(refused("untrusted"), snaplock_result::Untrusted);
        assert_eq!(refused("something-new"), snaplock_result::Refused);
        assert_eq!(
            snaplock_result::of_error(&Error::Timeout),
            snaplock_result::NoReply
        );
        assert_eq!(
            snaplock_result::of_error(&Error::Closed),
            snaplock_result::Closed
        );
    }
}
