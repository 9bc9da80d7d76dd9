//! Locking, extending and unlocking a name.

use std::ffi::{CStr, c_char};
use std::time::Duration;

use snaplock_client::{Grant, LockOptions, Mode, Policy};

use crate::conn::snaplock_conn;
use crate::result::snaplock_result;

/// The write policy of an exclusive lock request
/// (`snaplock_lock_options.policy`; see `snaplock(7)`, LOCK KINDS).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum snaplock_policy {
    /// The agent's default, `hard`.
    Default = 0,
    /// Keeps its place in the queue and blocks later shared requests.
    Hard = 1,
    /// Later shared requests may pass it; granted once no shared lock is
    /// held.
    Soft = 2,
    /// Soft, and also waits until no shared lock was granted for
    /// `quiet_ms`.
    Timed = 3,
}

/// The parameters of a lock request. Start from
/// `snaplock_lock_options_default()` and change what you need: a zeroed
/// struct asks for a deadline of now and a lease of 0, which the agent
/// refuses.
///
/// Thread safety: plain data, copied by `snaplock_lock`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct snaplock_lock_options {
    /// How long to wait for the lock, in milliseconds; negative: the
    /// agent's default (5 s). 0 is a deadline of now: use `try_once` to
    /// never wait.
    pub wait_ms: i64,
    /// The lease once granted, in milliseconds, 1000 to 7 days; negative:
    /// the agent's default (60 s).
    pub duration_ms: i64,
    /// How long the lock stays held after its lease ends without an unlock
    /// (the holder's time to stop), in milliseconds, 0 to 7 days; negative:
    /// the agent's default (60 s). 0 frees the name when the lease ends.
    pub unlock_duration_ms: i64,
    /// A shared (read-only) lock instead of an exclusive one.
    pub shared: bool,
    /// For a shared lock: at most this many holders, this request
    /// included (a counting semaphore); 0: no limit. For a counted lock
    /// (`snaplock_lock_extra.counted`): its limit, 1 to 1000000.
    pub limit: u32,
    /// For an exclusive lock: one of `snaplock_policy`.
    pub policy: u32,
    /// For `SNAPLOCK_POLICY_TIMED`: the quiet time, in milliseconds (0 or
    /// more).
    pub quiet_ms: i64,
    /// Never wait: fail with `SNAPLOCK_RESULT_BUSY` when the lock cannot be
    /// granted at once.
    pub try_once: bool,
    /// The lock outlives the connection; it then ends with an unlock from
    /// a connection of the same user giving the same `pid`, or at expiry.
    pub detach: bool,
    /// The requester's id (the lock's key is `<server_name>/<pid>`); 0: one
    /// unique to the connection. Give one with `detach`.
    pub pid: u64,
}

impl snaplock_lock_options {
    pub(crate) const DEFAULT: snaplock_lock_options = snaplock_lock_options {
        wait_ms: -1,
        duration_ms: -1,
        unlock_duration_ms: -1,
        shared: false,
        limit: 0,
        policy: snaplock_policy::Default as u32,
        quiet_ms: -1,
        try_once: false,
        detach: false,
        pid: 0,
    };

    /// The client's options, or why these cannot be sent.
    fn to_client(self) -> Result<LockOptions, String> {
        let ms = |v: i64| u64::try_from(v).ok().map(Duration::from_millis);
        let policy = match self.policy {
            0 => None,
            1 => Some(Policy::Hard),
            2 => Some(Policy::Soft),
            3 => Some(Policy::Timed {
                quiet: ms(self.quiet_ms)
                    .ok_or("SNAPLOCK_POLICY_TIMED needs a quiet_ms of 0 or more")?,
            }),
            other => return Err(format!("unknown policy {other}")),
        };
        Ok(LockOptions {
            wait: ms(self.wait_ms),
            duration: ms(self.duration_ms),
            unlock_duration: ms(self.unlock_duration_ms),
            mode: if self.shared {
                Mode::Shared
            } else {
                Mode::Exclusive
            },
            limit: (self.limit > 0).then_some(self.limit),
            policy,
            try_once: self.try_once,
            detach: self.detach,
            owner_cgroup: false,
            pid: (self.pid > 0).then_some(self.pid),
            // Never asked: no LOCKWAITING comes, and one would be kept
            // as an event, never taken for the answer.
            progress: false,
            // The contract and the counted mode are in
            // `snaplock_lock_extra`: growing this struct would change the ABI.
            min_uptime: None,
            min_trust: None,
        })
    }
}

/// What `snaplock_lock_ex` asks beyond `snaplock_lock_options`, which
/// cannot grow without breaking programs built against an older header.
/// Every field's zero asks nothing: a zeroed struct (`= {0}`) or NULL makes
/// `snaplock_lock_ex` send what `snaplock_lock` sends.
///
/// Thread safety: plain data, copied by `snaplock_lock_ex`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct snaplock_lock_extra {
    /// A counted lock (`mode=counted`, canal's elastic count) instead of an
    /// exclusive or shared one: granted while fewer than its own
    /// `snaplock_lock_options.limit` (1 to 1000000, required) holders hold
    /// the object. Not with `shared`; the policy does not apply.
    pub counted: bool,
    /// The agent must have run for at least this many milliseconds
    /// (`min_uptime=`), or the request fails at once with
    /// `SNAPLOCK_RESULT_UNTRUSTED`; 0: no minimum.
    pub min_uptime_ms: u64,
    /// The agent's trust must be at least this many millionths
    /// (`min_trust=`; 1000000 is a trust of 1), or the request fails at
    /// once with `SNAPLOCK_RESULT_UNTRUSTED`; 0: no minimum.
    pub min_trust_ppm: u32,
}

impl snaplock_lock_extra {
    /// Adds these to the client's options, or says why they cannot be sent.
    fn apply(self, opts: &mut LockOptions) -> Result<(), String> {
        if self.counted {
            if opts.mode == Mode::Shared {
                return Err("a lock cannot be both shared and counted".to_owned());
            }
            opts.mode = Mode::Counted;
        }
        opts.min_uptime =
            (self.min_uptime_ms > 0).then(|| Duration::from_millis(self.min_uptime_ms));
        opts.min_trust = (self.min_trust_ppm > 0).then_some(self.min_trust_ppm);
        Ok(())
    }
}

/// The options `snaplock_lock` uses when given NULL: every duration the
/// agent's default (`-1`), exclusive, default policy, waiting, attached, no
/// pid.
#[unsafe(no_mangle)]
pub extern "C" fn snaplock_lock_options_default() -> snaplock_lock_options {
    ffi_boundary! {
        snaplock_lock_options::DEFAULT
    }
}

/// A granted lock.
///
/// Thread safety: plain data.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct snaplock_grant {
    /// The fencing token: strictly greater for every grant of the same
    /// name. Pass it to the resource the lock protects, which rejects
    /// writes carrying a smaller one.
    pub fence: u64,
    /// When the lease ends, in microseconds since the Unix epoch (wall
    /// clock; divide by 1000000 for a `time_t`). The agent then sends an
    /// expiry event (`snaplock_next_event`).
    pub timeout_date_us: i64,
}

impl snaplock_grant {
    fn of(grant: &Grant) -> snaplock_grant {
        snaplock_grant {
            fence: grant.fence,
            // The client reads dates up to the year 5138: far below i64::MAX µs.
            timeout_date_us: i64::try_from(grant.timeout_date.0).unwrap_or(i64::MAX),
        }
    }
}

/// The bytes of a non-empty C string argument, or the failure to return.
///
/// # Safety
///
/// `object` is NULL or a NUL-terminated string that outlives `'a`.
unsafe fn object_arg<'a>(
    conn: &mut snaplock_conn,
    object: *const c_char,
) -> Result<&'a [u8], snaplock_result> {
    if object.is_null() {
        return Err(conn.null("object"));
    }
    // SAFETY: not NULL, so a NUL-terminated string (the caller's promise).
    let bytes = unsafe { CStr::from_ptr(object) }.to_bytes();
    if bytes.is_empty() {
        return Err(conn.fail_with(
            snaplock_result::InvalidParameter,
            "the object name is empty",
        ));
    }
    Ok(bytes)
}

/// Asks for a lock on the name `object` and waits for the outcome: at most
/// `opts->wait_ms` plus the reply timeout. `opts` NULL means
/// `snaplock_lock_options_default()`. On success `*grant_out` holds the
/// fence and the end of the lease.
///
/// Results: `SNAPLOCK_RESULT_TIMEOUT` (not granted before the deadline),
/// `SNAPLOCK_RESULT_BUSY` (`try_once`), `SNAPLOCK_RESULT_DUPLICATE`,
/// `SNAPLOCK_RESULT_INVALID_PARAMETER`, `SNAPLOCK_RESULT_OVERFLOW`,
/// `SNAPLOCK_RESULT_UNAVAILABLE`, `SNAPLOCK_RESULT_NO_REPLY` (the request
/// is cancelled), `SNAPLOCK_RESULT_CLOSED`, `SNAPLOCK_RESULT_IO`, ...
///
/// # Safety
///
/// `conn` is NULL or a live connection; `object` NULL or a NUL-terminated
/// string; `opts` NULL or readable; `grant_out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn snaplock_lock(
    conn: *mut snaplock_conn,
    object: *const c_char,
    opts: *const snaplock_lock_options,
    grant_out: *mut snaplock_grant,
) -> snaplock_result {
    ffi_boundary! {
        // SAFETY: the caller's promises, passed on; no extra.
        unsafe { lock(conn, object, opts, std::ptr::null(), grant_out) }
    }
}

/// `snaplock_lock` with what `snaplock_lock_options` has no room for: a
/// counted lock, and the reliability contract (`min_uptime`,
/// `min_trust`). `extra` NULL, or zeroed, asks nothing more: the call is
/// then `snaplock_lock`.
///
/// Results: those of `snaplock_lock`, and `SNAPLOCK_RESULT_UNTRUSTED` (the
/// agent does not meet the contract; nothing was queued).
/// `SNAPLOCK_RESULT_INVALID_PARAMETER` also for a lock both shared and
/// counted, and from the agent for a counted lock without a limit of 1 to
/// 1000000 or with a policy other than hard, or a contract out of range.
///
/// # Safety
///
/// As `snaplock_lock`; `extra` NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn snaplock_lock_ex(
    conn: *mut snaplock_conn,
    object: *const c_char,
    opts: *const snaplock_lock_options,
    extra: *const snaplock_lock_extra,
    grant_out: *mut snaplock_grant,
) -> snaplock_result {
    ffi_boundary! {
        // SAFETY: the caller's promises, passed on.
        unsafe { lock(conn, object, opts, extra, grant_out) }
    }
}

/// The body of `snaplock_lock` and `snaplock_lock_ex`.
///
/// # Safety
///
/// As `snaplock_lock_ex`.
unsafe fn lock(
    conn: *mut snaplock_conn,
    object: *const c_char,
    opts: *const snaplock_lock_options,
    extra: *const snaplock_lock_extra,
    grant_out: *mut snaplock_grant,
) -> snaplock_result {
    // SAFETY: NULL or a live connection, used by this thread only.
    let Some(conn) = (unsafe { conn.as_mut() }) else {
        return snaplock_result::NullParameter;
    };
    // SAFETY: NULL or a NUL-terminated string (the caller's promise).
    let object = match unsafe { object_arg(conn, object) } {
        Ok(object) => object,
        Err(result) => return result,
    };
    if grant_out.is_null() {
        return conn.null("grant_out");
    }
    // SAFETY: NULL or a readable options struct (the caller's promise);
    // it is copied at once.
    let opts = unsafe { opts.as_ref() }
        .copied()
        .unwrap_or(snaplock_lock_options::DEFAULT);
    // SAFETY: as for `opts`.
    let extra = unsafe { extra.as_ref() }.copied().unwrap_or_default();
    let opts = match opts
        .to_client()
        .and_then(|mut client| extra.apply(&mut client).map(|()| client))
    {
        Ok(opts) => opts,
        Err(why) => return conn.fail_with(snaplock_result::InvalidParameter, why),
    };
    match conn.client.lock(object, &opts) {
        Ok(grant) => {
            // SAFETY: not NULL and writable (the caller's promise).
            unsafe { grant_out.write(snaplock_grant::of(&grant)) };
            snaplock_result::Ok
        }
        Err(e) => conn.fail(e),
    }
}

/// Renews the lease of a lock this connection holds: it now ends
/// `duration_ms` milliseconds from now (1000 to 7 days). The fence is
/// unchanged; `*grant_out` holds it and the new end of the lease.
///
/// Results: `SNAPLOCK_RESULT_TIMEOUT` (the lease had already ended: the
/// lock is as good as lost), `SNAPLOCK_RESULT_INVALID_PARAMETER` (not held
/// by this connection, or a bad duration), `SNAPLOCK_RESULT_LOST`, ...
///
/// # Safety
///
/// `conn` is NULL or a live connection; `object` NULL or a NUL-terminated
/// string; `grant_out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn snaplock_extend(
    conn: *mut snaplock_conn,
    object: *const c_char,
    duration_ms: u64,
    grant_out: *mut snaplock_grant,
) -> snaplock_result {
    ffi_boundary! {
        // SAFETY: NULL or a live connection, used by this thread only.
        let Some(conn) = (unsafe { conn.as_mut() }) else {
            return snaplock_result::NullParameter;
        };
        // SAFETY: NULL or a NUL-terminated string (the caller's promise).
        let object = match unsafe { object_arg(conn, object) } {
            Ok(object) => object,
            Err(result) => return result,
        };
        if grant_out.is_null() {
            return conn.null("grant_out");
        }
        match conn.client.extend(object, Duration::from_millis(duration_ms)) {
            Ok(grant) => {
                // SAFETY: not NULL and writable (the caller's promise).
                unsafe { grant_out.write(snaplock_grant::of(&grant)) };
                snaplock_result::Ok
            }
            Err(e) => conn.fail(e),
        }
    }
}

/// Releases the lock this connection holds on `object`, or cancels its
/// waiting request. Releasing what is not held succeeds. A lock taken with
/// a `pid` is released under that `pid`.
///
/// Results: `SNAPLOCK_RESULT_DENIED` (the lock is another connection's),
/// `SNAPLOCK_RESULT_INVALID_PARAMETER`, `SNAPLOCK_RESULT_CLOSED`, ...
///
/// # Safety
///
/// `conn` is NULL or a live connection; `object` NULL or a NUL-terminated
/// string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn snaplock_unlock(
    conn: *mut snaplock_conn,
    object: *const c_char,
) -> snaplock_result {
    ffi_boundary! {
        // SAFETY: NULL or a live connection, used by this thread only.
        let Some(conn) = (unsafe { conn.as_mut() }) else {
            return snaplock_result::NullParameter;
        };
        // SAFETY: NULL or a NUL-terminated string (the caller's promise).
        let object = match unsafe { object_arg(conn, object) } {
            Ok(object) => object,
            Err(result) => return result,
        };
        match conn.client.unlock(object) {
            Ok(()) => snaplock_result::Ok,
            Err(e) => conn.fail(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_options_leave_every_choice_to_the_agent() {
        let opts = snaplock_lock_options_default().to_client().expect("valid");
        assert_eq!(opts, LockOptions::default());
    }

    #[test]
    fn options_map_field_by_field() {
        let opts = snaplock_lock_options {
            wait_ms: 0,
            duration_ms: 1500,
            unlock_duration_ms: 0,
            shared: true,
            limit: 3,
            policy: snaplock_policy::Timed as u32,
            quiet_ms: 250,
            try_once: true,
            detach: true,
            pid: 42,
        };
        let got = opts.to_client().expect("valid");
        assert_eq!(got.wait, Some(Duration::ZERO));
        assert_eq!(got.duration, Some(Duration::from_millis(1500)));
        assert_eq!(got.unlock_duration, Some(Duration::ZERO));
        assert_eq!(got.mode, Mode::Shared);
        assert_eq!(got.limit, Some(3));
        assert_eq!(
            got.policy,
            Some(Policy::Timed {
                quiet: Duration::from_millis(250)
            })
        );
        assert!(got.try_once && got.detach);
        assert_eq!(got.pid, Some(42));
    }

    /// The client's options for `opts` and `extra`, as `snaplock_lock_ex`
    /// builds them.
    fn with_extra(
        opts: snaplock_lock_options,
        extra: snaplock_lock_extra,
    ) -> Result<LockOptions, String> {
        let mut client = opts.to_client()?;
        extra.apply(&mut client)?;
        Ok(client)
    }

    #[test]
    fn a_zeroed_extra_asks_nothing_more() {
        let zeroed = snaplock_lock_extra {
            counted: false,
            min_uptime_ms: 0,
            min_trust_ppm: 0,
        };
        assert_eq!(zeroed, snaplock_lock_extra::default());
        let got = with_extra(snaplock_lock_options::DEFAULT, zeroed).expect("valid");
        assert_eq!(got, LockOptions::default());
    }

    #[test]
    fn extra_maps_to_a_counted_mode_and_the_contract() {
        let opts = snaplock_lock_options {
            limit: 4,
            ..snaplock_lock_options::DEFAULT
        };
        let extra = snaplock_lock_extra {
            counted: true,
            min_uptime_ms: 1500,
            min_trust_ppm: 900_000,
        };
        let got = with_extra(opts, extra).expect("valid");
        assert_eq!(got.mode, Mode::Counted);
        assert_eq!(got.limit, Some(4));
        assert_eq!(got.min_uptime, Some(Duration::from_millis(1500)));
        assert_eq!(got.min_trust, Some(900_000));
        assert_eq!(got.policy, None);
    }

    #[test]
    fn a_lock_both_shared_and_counted_is_refused_before_sending() {
        let opts = snaplock_lock_options {
            shared: true,
            limit: 2,
            ..snaplock_lock_options::DEFAULT
        };
        let extra = snaplock_lock_extra {
            counted: true,
            ..snaplock_lock_extra::default()
        };
        let why = with_extra(opts, extra).expect_err("refused");
        assert!(why.contains("shared and counted"), "{why}");
    }

    #[test]
    fn an_unknown_policy_or_a_timed_one_without_quiet_is_refused() {
        let mut opts = snaplock_lock_options::DEFAULT;
        opts.policy = 4;
        assert!(opts.to_client().is_err());
        opts.policy = snaplock_policy::Timed as u32;
        assert!(opts.to_client().is_err());
        opts.quiet_ms = 0;
        assert!(opts.to_client().is_ok());
    }
}
