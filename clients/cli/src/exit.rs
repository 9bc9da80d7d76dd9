//! Exit statuses: `sysexits.h` for errors, the conflict code of `-E`, and the
//! command's own status passed through, as flock(1) does. The table is in
//! the help text and in `snaplock-cli(1)`; users' scripts depend on it.

use snaplock_client::Error;
use std::io;

use crate::spawn::Ended;

/// Success.
pub const OK: u8 = 0;
/// `status`: the agent is not ready. (`lock` conflicts use the `-E` code.)
pub const NOT_READY: u8 = 1;
/// EX_USAGE: the command line is wrong.
pub const USAGE: u8 = 64;
/// EX_UNAVAILABLE: no agent to talk to, or it cannot grant locks.
pub const UNAVAILABLE: u8 = 69;
/// EX_SOFTWARE: the agent refused the request as wrong, or said something
/// unexpected.
pub const SOFTWARE: u8 = 70;
/// EX_TEMPFAIL: the lock was lost while the command ran; it was stopped.
pub const LOST: u8 = 75;
/// The command exists but cannot be executed (as in sh).
pub const CANNOT_EXECUTE: u8 = 126;
/// The command was not found (as in sh).
pub const NOT_FOUND: u8 = 127;

/// Whether a failed `LOCK` is a conflict or a timeout: the `-E` case,
/// which flock(1) keeps silent.
pub fn is_conflict(e: &Error) -> bool {
    e.is_refused("busy") || e.is_refused("timedout")
}

/// The status for a request that failed; `conflict` is the `-E` code.
pub fn of_error(e: &Error, conflict: u8) -> u8 {
    match e {
        _ if is_conflict(e) => conflict,
        // The agent does not meet the request's trust contract: it cannot
        // serve this request now, as when it has no quorum.
        Error::Refused { error, .. } if error == "unavailable" || error == "untrusted" => {
            UNAVAILABLE
        }
        Error::Refused { .. } => SOFTWARE,
        // The agent stopped or could not answer: there is no service.
        Error::Io(_) | Error::Timeout | Error::Closed | Error::Lost { .. } => UNAVAILABLE,
        Error::Protocol(_) => SOFTWARE,
    }
}

/// The status that reports the command's own: its exit code, or 128 + the
/// signal that killed it, as shells do.
pub fn of_status(ended: Ended) -> u8 {
    match ended {
        Ended::Code(code) => (code & 0xff) as u8,
        Ended::Signal(sig) => (128 + (sig & 0x7f)) as u8,
    }
}

/// The status when the command could not be started.
pub fn of_spawn_error(e: &io::Error) -> u8 {
    match e.kind() {
        io::ErrorKind::NotFound => NOT_FOUND,
        _ => CANNOT_EXECUTE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(word: &str) -> Error {
        Error::Refused {
            error: word.to_owned(),
            description: String::new(),
        }
    }

    #[test]
    fn conflicts_and_timeouts_take_the_chosen_code() {
        assert_eq!(of_error(&refused("busy"), 1), 1);
        assert_eq!(of_error(&refused("timedout"), 42), 42);
    }

    #[test]
    fn an_agent_that_cannot_serve_is_unavailable() {
        assert_eq!(of_error(&refused("unavailable"), 1), UNAVAILABLE);
        assert_eq!(of_error(&refused("untrusted"), 1), UNAVAILABLE);
        assert_eq!(of_error(&Error::Timeout, 1), UNAVAILABLE);
        assert_eq!(of_error(&Error::Closed, 1), UNAVAILABLE);
        let io = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(of_error(&Error::Io(io), 1), UNAVAILABLE);
        let lost = Error::Lost {
            error: "lost".into(),
        };
        assert_eq!(of_error(&lost, 1), UNAVAILABLE);
    }

    #[test]
    fn wrong_requests_and_replies_are_software_errors() {
        for word in [
            "invalid",
            "overflow",
            "denied",
            "duplicate",
            "something-new",
        ] {
            assert_eq!(of_error(&refused(word), 1), SOFTWARE, "{word}");
        }
        assert_eq!(of_error(&Error::Protocol("x".into()), 1), SOFTWARE);
    }

    #[test]
    fn the_commands_status_passes_through() {
        assert_eq!(of_status(Ended::Code(0)), 0);
        assert_eq!(of_status(Ended::Code(3)), 3);
        assert_eq!(of_status(Ended::Code(255)), 255);
        assert_eq!(of_status(Ended::Signal(15)), 143);
        assert_eq!(of_status(Ended::Signal(9)), 137);
    }

    #[test]
    fn a_command_that_cannot_start_gets_the_shells_codes() {
        assert_eq!(
            of_spawn_error(&io::Error::from(io::ErrorKind::NotFound)),
            NOT_FOUND
        );
        assert_eq!(
            of_spawn_error(&io::Error::from(io::ErrorKind::PermissionDenied)),
            CANNOT_EXECUTE
        );
    }
}
