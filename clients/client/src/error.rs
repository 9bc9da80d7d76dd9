//! What can go wrong talking to the agent, written for the caller who must
//! decide what to do next.

use std::fmt;
use std::io;

/// Why a request did not give the answer the caller wanted.
#[derive(Debug)]
pub enum Error {
    /// The socket failed: connecting, reading or writing. Whatever this
    /// connection held is released by the agent once the connection is gone.
    Io(io::Error),
    /// No reply arrived in time. The request may still be in progress at the
    /// agent; for a `LOCK`, the client has already sent an `UNLOCK` that
    /// cancels it (or releases it, had it just been granted).
    Timeout,
    /// The agent refused the request (`LOCKFAILED`): nothing was granted or
    /// changed. `error` is the protocol's word (`timedout`, `busy`,
    /// `invalid`, `duplicate`, `overflow`, `unavailable`, `denied`).
    Refused {
        /// The `error=` parameter.
        error: String,
        /// The `description=` parameter, for a human.
        description: String,
    },
    /// The lock is gone: the agent answered with `UNLOCKED error=E` (`lost`
    /// or `timedout`). Whoever relied on the lock must stop.
    Lost {
        /// The `error=` parameter.
        error: String,
    },
    /// The agent sent something this client does not understand: a line it
    /// cannot parse, a reply of the wrong kind, a missing or malformed
    /// parameter. The connection is still open, but the agent's state about
    /// the request is unknown.
    Protocol(String),
    /// The agent closed the connection (it stopped, or it dropped this
    /// client). Every lock of this connection is released.
    Closed,
}

impl Error {
    /// `Refused` with exactly this `error=` word.
    pub fn is_refused(&self, word: &str) -> bool {
        matches!(self, Error::Refused { error, .. } if error == word)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Timeout => f.write_str("no reply from the agent in time"),
            Error::Refused { error, description } if description.is_empty() => {
                write!(f, "refused ({error})")
            }
            Error::Refused { error, description } => write!(f, "refused ({error}): {description}"),
            Error::Lost { error } => write!(f, "the lock is lost ({error})"),
            Error::Protocol(why) => write!(f, "protocol error: {why}"),
            Error::Closed => f.write_str("the agent closed the connection"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            Error::Timeout
            | Error::Refused { .. }
            | Error::Lost { .. }
            | Error::Protocol(_)
            | Error::Closed => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        match e.kind() {
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => Error::Closed,
            _ => Error::Io(e),
        }
    }
}
