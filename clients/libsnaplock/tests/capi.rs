//! The C functions called as C would call them, against a real agent
//! running in this process on a socket in a temporary directory.

#![allow(unsafe_code)] // calling the C ABI
#![warn(clippy::undocumented_unsafe_blocks)]

mod common;

use std::ffi::{CStr, CString, c_char};
use std::os::fd::BorrowedFd;
use std::ptr;
use std::time::Duration;

use common::{Conn, TestAgent, fake_agent};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use snaplock::*;
use snaplock_client::clock;

impl Conn {
    fn lock(
        &self,
        object: &CStr,
        opts: Option<&snaplock_lock_options>,
    ) -> Result<snaplock_grant, snaplock_result> {
        let mut grant = snaplock_grant {
            fence: 0,
            timeout_date_us: 0,
        };
        let opts = opts.map_or(ptr::null(), ptr::from_ref);
        // SAFETY: a live connection, a C string, NULL or valid options, a
        // writable grant.
        match unsafe { snaplock_lock(self.0, object.as_ptr(), opts, &mut grant) } {
            snaplock_result::Ok => Ok(grant),
            other => Err(other),
        }
    }

    fn lock_ex(
        &self,
        object: &CStr,
        opts: &snaplock_lock_options,
        extra: &snaplock_lock_extra,
    ) -> Result<snaplock_grant, snaplock_result> {
        let mut grant = SENTINEL;
        // SAFETY: a live connection, a C string, valid options and extra, a
        // writable grant.
        match unsafe { snaplock_lock_ex(self.0, object.as_ptr(), opts, extra, &mut grant) } {
            snaplock_result::Ok => Ok(grant),
            other => {
                assert_eq!(grant, SENTINEL, "the grant is written on success only");
                Err(other)
            }
        }
    }

    fn extend(&self, object: &CStr, ms: u64) -> Result<snaplock_grant, snaplock_result> {
        let mut grant = snaplock_grant {
            fence: 0,
            timeout_date_us: 0,
        };
        // SAFETY: a live connection, a C string, a writable grant.
        match unsafe { snaplock_extend(self.0, object.as_ptr(), ms, &mut grant) } {
            snaplock_result::Ok => Ok(grant),
            other => Err(other),
        }
    }

    fn unlock(&self, object: &CStr) -> snaplock_result {
        // SAFETY: a live connection and a C string.
        unsafe { snaplock_unlock(self.0, object.as_ptr()) }
    }

    fn next_event(&self, event: &mut snaplock_event) -> snaplock_result {
        // SAFETY: a live connection and a writable event.
        unsafe { snaplock_next_event(self.0, event) }
    }

    /// Waits up to `ms` for the descriptor to be readable.
    fn readable_within(&self, ms: u16) -> bool {
        // SAFETY: a live connection.
        let fd = unsafe { snaplock_fd(self.0) };
        assert!(fd >= 0);
        // SAFETY: the connection owns the descriptor and outlives this call.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        matches!(poll(&mut fds, PollTimeout::from(ms)), Ok(n) if n > 0)
    }

    /// Polls and drains for up to `secs`, until an event of `kind` comes.
    fn wait_for_event(&self, kind: snaplock_event_kind, secs: u64) -> Box<snaplock_event> {
        let mut event = empty_event();
        let start = clock::monotonic();
        while start.elapsed() < Duration::from_secs(secs) {
            loop {
                match self.next_event(&mut event) {
                    snaplock_result::Ok if event.kind == kind => return event,
                    snaplock_result::Ok => {}
                    snaplock_result::NoEvent => break,
                    other => panic!("next_event: {other:?}: {}", self.last_error()),
                }
            }
            self.readable_within(100);
        }
        panic!("no {kind:?} event within {secs} s");
    }
}

fn empty_event() -> Box<snaplock_event> {
    Box::new(snaplock_event {
        kind: snaplock_event_kind::Other,
        object_name_len: 7,
        object_name: [b'?' as c_char; SNAPLOCK_OBJECT_NAME_SIZE],
    })
}

fn name_of(event: &snaplock_event) -> Vec<u8> {
    event.object_name[..event.object_name_len]
        .iter()
        .map(|c| *c as u8)
        .collect()
}

fn short_lease() -> snaplock_lock_options {
    snaplock_lock_options {
        duration_ms: 1000,
        unlock_duration_ms: 0,
        ..snaplock_lock_options_default()
    }
}

const SENTINEL: snaplock_grant = snaplock_grant {
    fence: 0xdead,
    timeout_date_us: -7,
};

#[test]
fn null_parameters_give_null_parameter_and_change_nothing() {
    let agent = TestAgent::start();
    let conn = agent.connect();
    let mut grant = SENTINEL;
    let mut ready = true;
    let mut event = empty_event();
    let obj = c"null-test";
    // SAFETY: every pointer is NULL or valid; NULLs are what is tested.
    unsafe {
        assert_eq!(
            snaplock_connect(agent.socket.as_ptr(), ptr::null_mut()),
            snaplock_result::NullParameter
        );
        assert_eq!(
            snaplock_lock(ptr::null_mut(), obj.as_ptr(), ptr::null(), &mut grant),
            snaplock_result::NullParameter
        );
        assert_eq!(
            snaplock_lock(conn.0, ptr::null(), ptr::null(), &mut grant),
            snaplock_result::NullParameter
        );
        assert!(
            conn.last_error().contains("object"),
            "{}",
            conn.last_error()
        );
        assert_eq!(
            snaplock_lock(conn.0, obj.as_ptr(), ptr::null(), ptr::null_mut()),
            snaplock_result::NullParameter
        );
        assert_eq!(
            snaplock_lock_ex(
                ptr::null_mut(),
                obj.as_ptr(),
                ptr::null(),
                ptr::null(),
                &mut grant
            ),
            snaplock_result::NullParameter
        );
        assert_eq!(
            snaplock_lock_ex(
                conn.0,
                obj.as_ptr(),
                ptr::null(),
                ptr::null(),
                ptr::null_mut()
            ),
            snaplock_result::NullParameter
        );
        assert_eq!(
            snaplock_extend(conn.0, ptr::null(), 5000, &mut grant),
            snaplock_result::NullParameter
        );
        assert_eq!(
            snaplock_extend(conn.0, obj.as_ptr(), 5000, ptr::null_mut()),
            snaplock_result::NullParameter
        );
        assert_eq!(
            snaplock_unlock(ptr::null_mut(), obj.as_ptr()),
            snaplock_result::NullParameter
        );
        assert_eq!(
            snaplock_unlock(conn.0, ptr::null()),
            snaplock_result::NullParameter
        );
        assert_eq!(
            snaplock_status(ptr::null_mut(), &mut ready),
            snaplock_result::NullParameter
        );
        assert_eq!(
            snaplock_status(conn.0, ptr::null_mut()),
            snaplock_result::NullParameter
        );
        assert_eq!(
            snaplock_next_event(ptr::null_mut(), &mut *event),
            snaplock_result::NullParameter
        );
        assert_eq!(
            snaplock_next_event(conn.0, ptr::null_mut()),
            snaplock_result::NullParameter
        );
        assert_eq!(
            snaplock_set_reply_timeout(ptr::null_mut(), 10),
            snaplock_result::NullParameter
        );
        assert_eq!(snaplock_fd(ptr::null()), -1);
        assert_eq!(snaplock_conn_last_error(ptr::null(), ptr::null_mut(), 0), 0);
        snaplock_conn_free(ptr::null_mut());
    }
    assert_eq!(grant, SENTINEL);
    assert!(ready);
    assert_eq!(event.object_name_len, 7);
    // The NULL calls sent nothing: the name is still free.
    assert!(conn.lock(obj, None).is_ok());
}

#[test]
fn outputs_are_untouched_when_a_call_fails() {
    let agent = TestAgent::start();
    let holder = agent.connect();
    let other = agent.connect();
    let obj = c"untouched";
    holder.lock(obj, None).expect("granted");

    let mut grant = SENTINEL;
    let try_once = snaplock_lock_options {
        try_once: true,
        ..snaplock_lock_options_default()
    };
    // SAFETY: a live connection, a C string, valid options, a writable grant.
    let r = unsafe { snaplock_lock(other.0, obj.as_ptr(), &try_once, &mut grant) };
    assert_eq!(r, snaplock_result::Busy);
    assert_eq!(grant, SENTINEL);
    assert!(!other.last_error().is_empty());

    // A connection pointer is written only on success.
    let missing = CString::new(
        agent
            .dir
            .join("none.sock")
            .into_os_string()
            .into_encoded_bytes(),
    )
    .expect("no NUL");
    let mut out: *mut snaplock_conn = ptr::dangling_mut();
    Errno::clear();
    // SAFETY: a C string and a writable out pointer.
    let r = unsafe { snaplock_connect(missing.as_ptr(), &mut out) };
    assert_eq!(r, snaplock_result::Io);
    assert_eq!(Errno::last(), Errno::ENOENT);
    assert_eq!(out, ptr::dangling_mut());
    // SAFETY: as above; an empty path is refused before anything happens.
    let r = unsafe { snaplock_connect(c"".as_ptr(), &mut out) };
    assert_eq!(r, snaplock_result::InvalidParameter);
    assert_eq!(out, ptr::dangling_mut());
}

#[test]
fn an_agent_alone_vouches_without_limit_and_the_lease_is_the_bound() {
    let agent = TestAgent::start();
    let a = agent.connect();
    let _grant = a.lock(c"vouched", None).expect("granted");
    let mut valid_for = 12345;
    // SAFETY: a live connection and a writable output.
    let r = unsafe { snaplock_vouched_for(a.0, &mut valid_for) };
    assert_eq!(r, snaplock_result::Ok);
    assert_eq!(valid_for, -1, "no valid_for from an agent alone");
    // SAFETY: a live connection; NULL is refused before anything is sent.
    let r = unsafe { snaplock_vouched_for(a.0, ptr::null_mut()) };
    assert_eq!(r, snaplock_result::NullParameter);
    // SAFETY: NULL connection, writable output.
    let r = unsafe { snaplock_vouched_for(ptr::null_mut(), &mut valid_for) };
    assert_eq!(r, snaplock_result::NullParameter);
    assert_eq!(valid_for, -1, "untouched on failure");
}

#[test]
fn a_lock_is_granted_extended_and_unlocked_with_fences_that_grow() {
    let agent = TestAgent::start();
    let a = agent.connect();
    let b = agent.connect();
    let obj = c"https://example.com/user/42#edit;x=\"y\"";
    let before = clock::wall().0 as i64;
    let opts = snaplock_lock_options {
        duration_ms: 30_000,
        ..snaplock_lock_options_default()
    };
    let first = a.lock(obj, Some(&opts)).expect("granted");
    assert!(first.fence > 0);
    let lease = first.timeout_date_us - before;
    assert!(
        (29_000_000..35_000_000).contains(&lease),
        "lease {lease} µs"
    );

    let renewed = a.extend(obj, 120_000).expect("extended");
    assert_eq!(renewed.fence, first.fence, "an extension keeps the fence");
    assert!(renewed.timeout_date_us >= first.timeout_date_us + 80_000_000);

    assert_eq!(a.unlock(obj), snaplock_result::Ok);
    let second = b.lock(obj, None).expect("free again");
    assert!(second.fence > first.fence);
    assert_eq!(b.unlock(obj), snaplock_result::Ok);
    assert_eq!(
        b.unlock(obj),
        snaplock_result::Ok,
        "unlocking twice succeeds"
    );
}

#[test]
fn refusals_and_bad_parameters_have_their_own_results() {
    let agent = TestAgent::start();
    let a = agent.connect();
    let b = agent.connect();
    let obj = c"refusals";
    a.lock(obj, None).expect("granted");
    assert_eq!(a.lock(obj, None), Err(snaplock_result::Duplicate));

    let short_wait = snaplock_lock_options {
        wait_ms: 200,
        ..snaplock_lock_options_default()
    };
    let start = clock::monotonic();
    assert_eq!(
        b.lock(obj, Some(&short_wait)),
        Err(snaplock_result::Timeout)
    );
    assert!(start.elapsed() < Duration::from_secs(3));

    let too_short = snaplock_lock_options {
        duration_ms: 10,
        ..snaplock_lock_options_default()
    };
    assert_eq!(
        b.lock(c"other", Some(&too_short)),
        Err(snaplock_result::InvalidParameter)
    );
    let bad_policy = snaplock_lock_options {
        policy: 99,
        ..snaplock_lock_options_default()
    };
    assert_eq!(
        b.lock(c"other", Some(&bad_policy)),
        Err(snaplock_result::InvalidParameter)
    );
    assert!(b.last_error().contains("policy"), "{}", b.last_error());
    assert_eq!(b.lock(c"", None), Err(snaplock_result::InvalidParameter));
    assert_eq!(b.extend(obj, 5000), Err(snaplock_result::InvalidParameter));
    // SAFETY: a live connection.
    let r = unsafe { snaplock_set_reply_timeout(b.0, 0) };
    assert_eq!(r, snaplock_result::InvalidParameter);
}

#[test]
fn shared_locks_with_a_limit_count_their_holders() {
    let agent = TestAgent::start();
    let conns: Vec<Conn> = (0..3).map(|_| agent.connect()).collect();
    let opts = snaplock_lock_options {
        shared: true,
        limit: 2,
        try_once: true,
        ..snaplock_lock_options_default()
    };
    let obj = c"semaphore";
    assert!(conns[0].lock(obj, Some(&opts)).is_ok());
    assert!(conns[1].lock(obj, Some(&opts)).is_ok());
    assert_eq!(conns[2].lock(obj, Some(&opts)), Err(snaplock_result::Busy));
}

#[test]
fn next_event_reports_an_expiry_without_blocking() {
    let agent = TestAgent::start();
    let conn = agent.connect();
    let mut event = empty_event();
    let start = clock::monotonic();
    assert_eq!(conn.next_event(&mut event), snaplock_result::NoEvent);
    assert!(start.elapsed() < Duration::from_millis(100));
    assert_eq!(event.object_name_len, 7, "untouched without an event");

    let obj = c"expiring";
    conn.lock(obj, Some(&short_lease())).expect("granted");
    assert_eq!(conn.next_event(&mut event), snaplock_result::NoEvent);
    let event = conn.wait_for_event(snaplock_event_kind::Expired, 5);
    assert_eq!(name_of(&event), obj.to_bytes());
    assert_eq!(event.object_name[event.object_name_len], 0);
    assert!(start.elapsed() >= Duration::from_millis(900));
    let mut more = empty_event();
    assert_eq!(conn.next_event(&mut more), snaplock_result::NoEvent);
    // unlock_duration 0: the name is free at once.
    let other = agent.connect();
    let try_once = snaplock_lock_options {
        try_once: true,
        ..snaplock_lock_options_default()
    };
    assert!(other.lock(obj, Some(&try_once)).is_ok());
}

#[test]
fn an_event_another_call_already_read_is_delivered_though_the_socket_is_quiet() {
    let agent = TestAgent::start();
    let conn = agent.connect();
    let obj = c"read-early";
    conn.lock(obj, Some(&short_lease())).expect("granted");
    assert!(conn.readable_within(3000), "the expiry arrives");
    let mut ready = false;
    // SAFETY: a live connection and a writable bool.
    let r = unsafe { snaplock_status(conn.0, &mut ready) };
    assert_eq!(r, snaplock_result::Ok);
    assert!(ready);
    assert!(
        !conn.readable_within(0),
        "status read the event along with its reply"
    );
    let mut event = empty_event();
    assert_eq!(conn.next_event(&mut event), snaplock_result::Ok);
    assert_eq!(event.kind, snaplock_event_kind::Expired);
    assert_eq!(name_of(&event), obj.to_bytes());
}

#[test]
fn a_stopping_agent_gives_a_lost_event_then_closed() {
    let mut agent = TestAgent::start();
    let conn = agent.connect();
    let obj = c"will-be-lost";
    conn.lock(obj, None).expect("granted");
    agent.stop();
    let event = conn.wait_for_event(snaplock_event_kind::Lost, 5);
    assert_eq!(name_of(&event), obj.to_bytes());
    let mut event = empty_event();
    let mut closed = 0;
    for _ in 0..50 {
        match conn.next_event(&mut event) {
            snaplock_result::Closed => closed += 1,
            snaplock_result::NoEvent => {
                conn.readable_within(100);
            }
            other => panic!("after the lost event: {other:?}"),
        }
        if closed == 2 {
            break;
        }
    }
    assert_eq!(closed, 2, "closed, and closed again");
    assert!(
        conn.last_error().contains("closed"),
        "{}",
        conn.last_error()
    );
    assert_eq!(conn.unlock(obj), snaplock_result::Closed);
}

#[test]
fn last_error_has_snprintf_semantics() {
    let agent = TestAgent::start();
    let conn = agent.connect();
    // SAFETY: a live connection; a zero length writes nothing.
    let none = unsafe { snaplock_conn_last_error(conn.0, ptr::null_mut(), 0) };
    assert_eq!(none, 0, "nothing failed yet");
    assert_eq!(conn.lock(c"", None), Err(snaplock_result::InvalidParameter));
    let full = conn.last_error();
    assert!(full.len() > 8);
    let mut small = [b'x' as c_char; 6];
    // SAFETY: a live connection and a buffer of the given length.
    let n = unsafe { snaplock_conn_last_error(conn.0, small.as_mut_ptr(), small.len()) };
    assert_eq!(n, full.len());
    // SAFETY: NUL-terminated within the buffer.
    let cut = unsafe { CStr::from_ptr(small.as_ptr()) };
    assert_eq!(cut.to_bytes(), &full.as_bytes()[..5]);
}

#[test]
fn the_default_socket_path_is_the_clients() {
    let mut buf = [0 as c_char; 512];
    // SAFETY: a buffer of the given length.
    let n = unsafe { snaplock_default_socket_path(buf.as_mut_ptr(), buf.len()) };
    // SAFETY: NUL-terminated within the buffer.
    let got = unsafe { CStr::from_ptr(buf.as_ptr()) };
    let want = snaplock_client::default_socket_path(None);
    assert_eq!(n, want.as_os_str().len());
    assert_eq!(got.to_bytes(), want.as_os_str().as_encoded_bytes());
}

#[test]
fn counted_locks_count_their_holders_each_within_its_own_limit() {
    let agent = TestAgent::start();
    let conns: Vec<Conn> = (0..3).map(|_| agent.connect()).collect();
    let obj = c"counted";
    let counted = snaplock_lock_extra {
        counted: true,
        ..Default::default()
    };
    let limit = |limit| snaplock_lock_options {
        limit,
        try_once: true,
        ..snaplock_lock_options_default()
    };
    assert!(conns[0].lock_ex(obj, &limit(2), &counted).is_ok());
    assert!(conns[1].lock_ex(obj, &limit(2), &counted).is_ok());
    assert_eq!(
        conns[2].lock_ex(obj, &limit(2), &counted),
        Err(snaplock_result::Busy),
        "two holders: a limit of 2 is reached"
    );
    assert!(
        conns[2].lock_ex(obj, &limit(3), &counted).is_ok(),
        "a counted limit binds its own grant only"
    );
    // An exclusive request waits for every counted holder.
    let other = agent.connect();
    assert_eq!(other.lock(obj, Some(&limit(0))), Err(snaplock_result::Busy));
}

#[test]
fn a_counted_lock_without_a_limit_or_also_shared_is_an_invalid_parameter() {
    let agent = TestAgent::start();
    let conn = agent.connect();
    let counted = snaplock_lock_extra {
        counted: true,
        ..Default::default()
    };
    let no_limit = snaplock_lock_options_default();
    assert_eq!(
        conn.lock_ex(c"counted", &no_limit, &counted),
        Err(snaplock_result::InvalidParameter)
    );
    assert!(conn.last_error().contains("limit"), "{}", conn.last_error());
    let shared = snaplock_lock_options {
        shared: true,
        limit: 2,
        ..snaplock_lock_options_default()
    };
    assert_eq!(
        conn.lock_ex(c"counted", &shared, &counted),
        Err(snaplock_result::InvalidParameter)
    );
    assert!(
        conn.last_error().contains("shared and counted"),
        "{}",
        conn.last_error()
    );
}

#[test]
fn an_agent_that_has_not_run_long_enough_is_untrusted_and_queues_nothing() {
    let agent = TestAgent::start();
    let conn = agent.connect();
    let obj = c"contract";
    let an_hour = snaplock_lock_extra {
        min_uptime_ms: 3_600_000,
        ..Default::default()
    };
    let opts = snaplock_lock_options_default();
    assert_eq!(
        conn.lock_ex(obj, &opts, &an_hour),
        Err(snaplock_result::Untrusted)
    );
    assert!(
        conn.last_error().contains("min_uptime=3600"),
        "{}",
        conn.last_error()
    );
    // Nothing was queued: the same connection gets the lock at once, and a
    // zeroed extra (or NULL) asks nothing.
    let nothing = snaplock_lock_extra::default();
    assert!(conn.lock_ex(obj, &opts, &nothing).is_ok());
    let mut grant = SENTINEL;
    // SAFETY: a live connection, a C string, NULL options and extra, a
    // writable grant.
    let r = unsafe {
        snaplock_lock_ex(
            conn.0,
            c"other".as_ptr(),
            ptr::null(),
            ptr::null(),
            &mut grant,
        )
    };
    assert_eq!(r, snaplock_result::Ok);
    assert!(grant.fence > 0);
}

#[test]
fn lock_ex_sends_the_counted_mode_and_the_contract_and_maps_untrusted() {
    let dir = std::env::temp_dir().join(format!("libsnaplock-fake-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let path = dir.join("s.sock");
    let sent = fake_agent(&path, |_| {
        "LOCKFAILED description=this agent does not meet the contract;error=untrusted;\
         object_name=c;tag=1\n"
            .to_owned()
    });
    let socket = CString::new(path.into_os_string().into_encoded_bytes()).expect("no NUL");
    let mut raw = ptr::null_mut();
    // SAFETY: a NUL-terminated path and a writable out pointer.
    let r = unsafe { snaplock_connect(socket.as_ptr(), &mut raw) };
    assert_eq!(r, snaplock_result::Ok);
    let conn = Conn(raw);
    let opts = snaplock_lock_options {
        limit: 7,
        ..snaplock_lock_options_default()
    };
    let extra = snaplock_lock_extra {
        counted: true,
        min_uptime_ms: 2500,
        min_trust_ppm: 950_000,
    };
    assert_eq!(
        conn.lock_ex(c"c", &opts, &extra),
        Err(snaplock_result::Untrusted)
    );
    assert!(
        conn.last_error().contains("does not meet the contract"),
        "{}",
        conn.last_error()
    );
    let line = sent.join().expect("the fake agent ran");
    assert_eq!(
        line,
        "LOCK limit=7;min_trust=0.95;min_uptime=2.5;mode=counted;object_name=c;tag=1\n"
    );
    drop(conn);
    let _ = std::fs::remove_dir_all(&dir);
}
