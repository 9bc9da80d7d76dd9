//! `snaplock_transaction` called as C would call it, against a real agent
//! running in this process: the medical example of snaplock(7)
//! (TRANSACTIONS, Example), failed asserts, and what is refused before
//! anything is sent; and, from a scripted agent, a revocation notice.

#![allow(unsafe_code)] // calling the C ABI
#![warn(clippy::undocumented_unsafe_blocks)]

mod common;

use std::ffi::{CStr, CString, c_char};
use std::ptr;

use common::{Conn, TestAgent, fake_agent};
use snaplock::*;

const SENTINEL: snaplock_tx_result = snaplock_tx_result {
    error: snaplock_result::Panic,
    fence: 0xdead,
    count: 99,
    results: [true; SNAPLOCK_TX_STATEMENTS_MAX],
    failed: 77,
};

const ENTRY: [&CStr; 3] = [
    c"assert not exists Month-End/CGROVE-35",
    c"assert not exists MDS-Review/CGROVE-35/R-45899",
    c"assert set MDS-Entry/CGROVE-35/R-45899 dup",
];

const REVIEW: [&CStr; 3] = [
    c"assert not exists Month-End/CGROVE-35",
    c"assert not exists MDS-Entry/CGROVE-35/R-45899",
    c"assert set MDS-Review/CGROVE-35/R-45899",
];

impl Conn {
    /// The call's result and what it wrote.
    fn tx_with(
        &self,
        ns: &CStr,
        statements: &[&CStr],
        opts: Option<&snaplock_tx_options>,
    ) -> (snaplock_result, snaplock_tx_result) {
        let ptrs: Vec<*const c_char> = statements.iter().map(|s| s.as_ptr()).collect();
        let mut out = SENTINEL;
        let opts = opts.map_or(ptr::null(), ptr::from_ref);
        // SAFETY: a live connection, C strings, `ptrs.len()` readable
        // pointers, NULL or valid options, a writable result.
        let r = unsafe {
            snaplock_transaction(
                self.0,
                ns.as_ptr(),
                ptrs.as_ptr(),
                ptrs.len(),
                opts,
                &mut out,
            )
        };
        (r, out)
    }

    fn tx(&self, statements: &[&CStr]) -> (snaplock_result, snaplock_tx_result) {
        self.tx_with(c"Clinical", statements, None)
    }
}

fn values(out: &snaplock_tx_result) -> &[bool] {
    &out.results[..out.count]
}

#[test]
fn entries_run_together_and_a_review_fails_at_statement_2_until_they_end() {
    let agent = TestAgent::start();
    let (first, second, reviewer) = (agent.connect(), agent.connect(), agent.connect());

    let (r, one) = first.tx(&ENTRY);
    assert_eq!(r, snaplock_result::Ok, "{}", first.last_error());
    assert_eq!((one.error, one.failed), (snaplock_result::Ok, 0));
    assert_eq!(values(&one), [true, true, true]);
    assert!(one.fence > 0);
    assert!(!one.results[3], "the rest of the array is false");

    let (r, two) = second.tx(&ENTRY);
    assert_eq!(r, snaplock_result::Ok, "entries share the variable (dup)");
    assert!(two.fence > one.fence, "fences grow with each commit");

    let (r, review) = reviewer.tx(&REVIEW);
    assert_eq!(r, snaplock_result::TxFailed);
    assert_eq!(review.error, snaplock_result::TxFailed);
    assert_eq!(review.failed, 2, "somebody is entering");
    assert_eq!((review.fence, review.count), (0, 0));
    assert!(
        reviewer.last_error().contains("failed"),
        "{}",
        reviewer.last_error()
    );

    // The entries end with their connections; the review then commits,
    // and an entry now fails at statement 2 in its turn.
    drop(first);
    drop(second);
    let mut committed = None;
    for _ in 0..100 {
        let (r, out) = reviewer.tx(&REVIEW);
        if r == snaplock_result::Ok {
            committed = Some(out);
            break;
        }
        assert_eq!((r, out.failed), (snaplock_result::TxFailed, 2));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let review = committed.expect("the review commits once the entries are gone");
    assert_eq!(values(&review), [true, true, true]);
    assert!(review.fence > two.fence);
    let late = agent.connect();
    let (r, entry) = late.tx(&ENTRY);
    assert_eq!((r, entry.failed), (snaplock_result::TxFailed, 2));

    // `anyway` never fails; the values still say what was there.
    let (r, out) = reviewer.tx(&[
        c"anyway delete MDS-Review/CGROVE-35/R-45899",
        c"anyway delete MDS-Review/CGROVE-35/R-45899",
        c"exists MDS-Review/CGROVE-35/R-45899",
    ]);
    assert_eq!(r, snaplock_result::Ok);
    assert_eq!(values(&out), [true, false, false]);
}

#[test]
fn the_options_reach_the_agent() {
    let agent = TestAgent::start();
    let conn = agent.connect();
    let an_hour = snaplock_tx_options {
        min_uptime_ms: 3_600_000,
        ..Default::default()
    };
    let (r, out) = conn.tx_with(c"n", &[c"set A"], Some(&an_hour));
    assert_eq!(r, snaplock_result::Untrusted);
    assert_eq!((out.error, out.failed), (snaplock_result::Untrusted, 0));
    let too_short = snaplock_tx_options {
        duration_ms: 10,
        ..Default::default()
    };
    let (r, out) = conn.tx_with(c"n", &[c"set A"], Some(&too_short));
    assert_eq!((r, out.error), (snaplock_result::InvalidParameter, r));
    assert!(
        conn.last_error().contains("duration"),
        "{}",
        conn.last_error()
    );

    // A pid makes another session of the same connection: it does not
    // hold what the first one set.
    let (r, _) = conn.tx_with(c"n", &[c"set A"], None);
    assert_eq!(r, snaplock_result::Ok);
    let other_pid = snaplock_tx_options {
        pid: 42,
        duration_ms: 5000,
        ..Default::default()
    };
    let (r, out) = conn.tx_with(c"n", &[c"exists A", c"set A"], Some(&other_pid));
    assert_eq!(r, snaplock_result::Ok);
    assert_eq!(values(&out), [true, false]);
}

#[test]
fn what_the_agent_cannot_read_is_an_invalid_parameter_at_its_statement() {
    let agent = TestAgent::start();
    let conn = agent.connect();
    let (r, out) = conn.tx(&[c"exists A", c"frob B"]);
    assert_eq!(r, snaplock_result::InvalidParameter);
    assert_eq!((out.error, out.failed), (r, 2));
    assert!(
        conn.last_error().contains("column"),
        "{}",
        conn.last_error()
    );
    let (r, out) = conn.tx_with(c"bad/namespace", &[c"exists A"], None);
    assert_eq!((r, out.error), (snaplock_result::InvalidParameter, r));
}

#[test]
fn bad_arguments_are_refused_before_sending_and_leave_the_result_untouched() {
    let agent = TestAgent::start();
    let conn = agent.connect();
    let stmt = [c"set Kept".as_ptr()];
    let mut out = SENTINEL;
    // SAFETY: every pointer is NULL or valid; NULLs are what is tested.
    unsafe {
        let r = snaplock_transaction(
            ptr::null_mut(),
            c"n".as_ptr(),
            stmt.as_ptr(),
            1,
            ptr::null(),
            &mut out,
        );
        assert_eq!(r, snaplock_result::NullParameter);
        for (ns, stmts, what) in [
            (ptr::null(), stmt.as_ptr(), "ns"),
            (c"n".as_ptr(), ptr::null(), "statements"),
        ] {
            let r = snaplock_transaction(conn.0, ns, stmts, 1, ptr::null(), &mut out);
            assert_eq!(r, snaplock_result::NullParameter);
            assert!(conn.last_error().contains(what), "{}", conn.last_error());
        }
        let r = snaplock_transaction(
            conn.0,
            c"n".as_ptr(),
            stmt.as_ptr(),
            1,
            ptr::null(),
            ptr::null_mut(),
        );
        assert_eq!(r, snaplock_result::NullParameter);
        assert!(conn.last_error().contains("result_out"));
        let with_null = [c"set A".as_ptr(), ptr::null()];
        let r = snaplock_transaction(
            conn.0,
            c"n".as_ptr(),
            with_null.as_ptr(),
            2,
            ptr::null(),
            &mut out,
        );
        assert_eq!(r, snaplock_result::NullParameter);
        assert!(conn.last_error().contains("statements[1]"));
    }
    let too_many: Vec<CString> = (0..=SNAPLOCK_TX_STATEMENTS_MAX)
        .map(|i| CString::new(format!("set V/{i}")).expect("no NUL"))
        .collect();
    let too_many: Vec<&CStr> = too_many.iter().map(CString::as_c_str).collect();
    for (ns, stmts, needle) in [
        (c"", &[c"set A"][..], "namespace is empty"),
        (c"n", &[], "at least one statement"),
        (c"n", &[c"set A", c""], "statements[1] is empty"),
        (c"n", &too_many, "at most 32 statements, not 33"),
    ] {
        let (r, got) = conn.tx_with(ns, stmts, None);
        assert_eq!(r, snaplock_result::InvalidParameter, "{needle}");
        assert!(conn.last_error().contains(needle), "{}", conn.last_error());
        assert_eq!(got, SENTINEL, "{needle}: untouched");
    }
    assert_eq!(out, SENTINEL);
    // Nothing was sent: no session holds Kept, and 32 statements pass.
    let (r, got) = conn.tx(&too_many[..SNAPLOCK_TX_STATEMENTS_MAX]);
    assert_eq!(r, snaplock_result::Ok, "{}", conn.last_error());
    assert_eq!(got.count, SNAPLOCK_TX_STATEMENTS_MAX);
    assert!(values(&got).iter().all(|v| *v));
    let (r, got) = conn.tx_with(c"n", &[c"exists Kept"], None);
    assert_eq!(r, snaplock_result::Ok);
    assert_eq!(values(&got), [false]);
}

#[test]
fn a_revocation_notice_is_a_revoked_event_naming_the_namespace() {
    let dir = std::env::temp_dir().join(format!("libsnaplock-fake-tx-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let path = dir.join("s.sock");
    let sent = fake_agent(&path, |_| {
        "TRANSACTIONOK fence=5;namespace=Clinical;results=1;tag=1\n\
         TRANSACTIONFAILED description=\"revoked: no contact with the leaders\";\
         error=unavailable;failed=0;namespace=Clinical\n"
            .to_owned()
    });
    let socket = CString::new(path.into_os_string().into_encoded_bytes()).expect("no NUL");
    let mut raw = ptr::null_mut();
    // SAFETY: a NUL-terminated path and a writable out pointer.
    let r = unsafe { snaplock_connect(socket.as_ptr(), &mut raw) };
    assert_eq!(r, snaplock_result::Ok);
    let conn = Conn(raw);
    let (r, out) = conn.tx(&[c"set A dup"]);
    assert_eq!(r, snaplock_result::Ok, "{}", conn.last_error());
    assert_eq!((out.fence, values(&out)), (5, &[true][..]));
    assert_eq!(
        sent.join().expect("the fake agent ran"),
        "TRANSACTION namespace=Clinical;s1=set A dup;tag=1\n"
    );
    let mut event = Box::new(snaplock_event {
        kind: snaplock_event_kind::Other,
        object_name_len: 7,
        object_name: [b'?' as c_char; SNAPLOCK_OBJECT_NAME_SIZE],
    });
    let mut got = None;
    for _ in 0..200 {
        // SAFETY: a live connection and a writable event.
        match unsafe { snaplock_next_event(conn.0, &mut *event) } {
            snaplock_result::Ok => {
                got = Some(event.kind);
                break;
            }
            snaplock_result::NoEvent => std::thread::sleep(std::time::Duration::from_millis(10)),
            other => panic!("next_event: {other:?}: {}", conn.last_error()),
        }
    }
    assert_eq!(got, Some(snaplock_event_kind::Revoked));
    let name: Vec<u8> = event.object_name[..event.object_name_len]
        .iter()
        .map(|c| *c as u8)
        .collect();
    assert_eq!(name, b"Clinical");
    drop(conn);
    let _ = std::fs::remove_dir_all(&dir);
}
