//! Lock transactions (`snaplock(7)`, TRANSACTIONS): statements on named
//! variables of a namespace, all or nothing, held by the connection.

use std::ffi::{CStr, c_char};

use snaplock_client::tag_of;
use snaplock_client::wire::Message;

use crate::conn::snaplock_conn;
use crate::result::snaplock_result;

/// Most statements in one transaction (`s1` to `s32`), and the size of
/// `snaplock_tx_result.results`.
pub const SNAPLOCK_TX_STATEMENTS_MAX: usize = 32;

/// The parameters of a transaction beyond its statements. Every field's
/// zero leaves the agent's default: a zeroed struct (`= {0}`) or NULL asks
/// nothing.
///
/// Thread safety: plain data, copied by `snaplock_transaction`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct snaplock_tx_options {
    /// How long the variables the transaction sets live after it, in
    /// milliseconds, 1000 to 7 days (`duration=`); 0: the agent's default
    /// (60 s). A later transaction that sets them again renews them.
    pub duration_ms: u64,
    /// The session's pid (`pid=`): with the connection, the session the
    /// variables belong to; 0: none.
    pub pid: u64,
    /// The agent must have run for at least this many milliseconds
    /// (`min_uptime=`), or the transaction fails with
    /// `SNAPLOCK_RESULT_UNTRUSTED`; 0: no minimum.
    pub min_uptime_ms: u64,
    /// The agent's trust must be at least this many millionths
    /// (`min_trust=`; 1000000 is a trust of 1), or the transaction fails
    /// with `SNAPLOCK_RESULT_UNTRUSTED`; 0: no minimum.
    pub min_trust_ppm: u32,
}

/// What the agent answered to a transaction: its commit, or the statement
/// and the reason it failed.
///
/// Thread safety: plain data.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct snaplock_tx_result {
    /// `SNAPLOCK_RESULT_OK` when it committed, else why it failed: the
    /// result `snaplock_transaction` returned.
    pub error: snaplock_result,
    /// The commit's fence: greater than that of every earlier commit on
    /// this agent. 0 when it failed.
    pub fence: u64,
    /// How many values `results` holds: the number of statements when it
    /// committed, 0 when it failed.
    pub count: usize,
    /// The value of each statement, `results[0]` for the first: whether
    /// it was true. The rest of the array is false.
    pub results: [bool; SNAPLOCK_TX_STATEMENTS_MAX],
    /// When it failed: the statement at fault, 1 for the first (the
    /// `assert` that was false, for `SNAPLOCK_RESULT_TX_FAILED`), or 0
    /// when the fault is in no statement. 0 when it committed.
    pub failed: u32,
}

impl snaplock_tx_result {
    const EMPTY: snaplock_tx_result = snaplock_tx_result {
        error: snaplock_result::Ok,
        fence: 0,
        count: 0,
        results: [false; SNAPLOCK_TX_STATEMENTS_MAX],
        failed: 0,
    };
}

/// `n / scale` as the protocol writes a decimal: `1500 / 1000` is `1.5`.
fn decimal(n: u64, scale: u64, digits: usize) -> String {
    let (whole, frac) = (n / scale, n % scale);
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:0digits$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

/// The `TRANSACTION` message, tagged `tag`.
fn message(ns: &[u8], statements: &[&[u8]], opts: &snaplock_tx_options, tag: i64) -> Message {
    let mut msg = Message::new("TRANSACTION").with("namespace", ns);
    for (i, s) in statements.iter().enumerate() {
        msg.set(&format!("s{}", i + 1), *s);
    }
    if opts.duration_ms > 0 {
        msg.set("duration", decimal(opts.duration_ms, 1000, 3));
    }
    if opts.pid > 0 {
        msg.set_u64("pid", opts.pid);
    }
    if opts.min_uptime_ms > 0 {
        msg.set("min_uptime", decimal(opts.min_uptime_ms, 1000, 3));
    }
    if opts.min_trust_ppm > 0 {
        msg.set(
            "min_trust",
            decimal(u64::from(opts.min_trust_ppm), 1_000_000, 6),
        );
    }
    msg.set("tag", tag.to_string());
    msg
}

/// The result for `TRANSACTIONFAILED error=word`.
fn of_error_word(word: &str) -> snaplock_result {
    match word {
        "failed" => snaplock_result::TxFailed,
        "invalid" => snaplock_result::InvalidParameter,
        "overflow" => snaplock_result::Overflow,
        "unavailable" => snaplock_result::Unavailable,
        "untrusted" => snaplock_result::Untrusted,
        "denied" => snaplock_result::Denied,
        _ => snaplock_result::Refused,
    }
}

/// Reads the reply to a transaction of `count` statements: the outcome to
/// write, or why the reply cannot be one (and its text, for the last
/// error).
fn outcome(reply: &Message, count: usize) -> Result<(snaplock_tx_result, String), String> {
    let line = || {
        let text = reply.to_string();
        let text = text.trim_end();
        text.chars().take(300).collect::<String>()
    };
    match reply.command.as_str() {
        "TRANSACTIONOK" => {
            let fence = reply
                .get_str("fence")
                .and_then(|f| f.parse::<u64>().ok())
                .ok_or_else(|| format!("TRANSACTIONOK without a valid fence: {}", line()))?;
            let mut out = snaplock_tx_result {
                fence,
                count,
                ..snaplock_tx_result::EMPTY
            };
            let values = reply.get_str("results").unwrap_or("");
            let mut n = 0;
            for value in values.split(',') {
                let slot = out.results.get_mut(n).filter(|_| n < count);
                match (value, slot) {
                    ("1", Some(slot)) => *slot = true,
                    ("0", Some(_)) => {}
                    _ => return Err(format!("results that do not fit the request: {}", line())),
                }
                n += 1;
            }
            if n != count {
                return Err(format!("results that do not fit the request: {}", line()));
            }
            Ok((out, String::new()))
        }
        "TRANSACTIONFAILED" => {
            let error = of_error_word(reply.get_str("error").unwrap_or(""));
            let failed = reply
                .get_str("failed")
                .and_then(|n| n.parse::<u32>().ok())
                .unwrap_or(0);
            let why = String::from_utf8_lossy(reply.get("description").unwrap_or_default());
            let word = reply.get_str("error").unwrap_or("unknown");
            let text = format!("transaction refused ({word}): {why}");
            let out = snaplock_tx_result {
                error,
                failed,
                ..snaplock_tx_result::EMPTY
            };
            Ok((out, text))
        }
        _ => Err(format!("unexpected reply: {}", line())),
    }
}

/// Runs one lock transaction on the namespace `ns`: the `count`
/// statements of `statements` are `s1`, `s2`, ... in order (1 to
/// `SNAPLOCK_TX_STATEMENTS_MAX`), each a NUL-terminated string such as
/// `"assert not exists Month-End/CGROVE-35"` (`snaplock(7)`,
/// TRANSACTIONS). `opts` NULL means a zeroed `snaplock_tx_options`.
///
/// The variables it sets belong to this connection (and `opts->pid`):
/// they vanish when it is freed, when deleted, or `duration_ms` after the
/// transaction that last set them. Should the agent drop them before
/// (`revoked`), `snaplock_next_event` gives a `SNAPLOCK_EVENT_KIND_REVOKED`
/// event.
///
/// On `SNAPLOCK_RESULT_OK` it committed: `*result_out` holds the fence and
/// each statement's value. When the agent refused it, nothing changed,
/// and `*result_out` says which statement failed (`failed`) and why
/// (`error`, the result returned): `SNAPLOCK_RESULT_TX_FAILED` (an
/// `assert` was false), `SNAPLOCK_RESULT_INVALID_PARAMETER` (a statement
/// or parameter the agent cannot read; the last error names the column),
/// `SNAPLOCK_RESULT_OVERFLOW`, `SNAPLOCK_RESULT_UNAVAILABLE` (the agent
/// is stopping, or, in a cluster, the transaction could not be decided;
/// it may be sent again), `SNAPLOCK_RESULT_UNTRUSTED`,
/// `SNAPLOCK_RESULT_REFUSED`. Unlike any other call's output,
/// `*result_out` is written on these refusals too. Every other result
/// leaves it untouched: `SNAPLOCK_RESULT_NULL_PARAMETER`, and
/// `SNAPLOCK_RESULT_INVALID_PARAMETER` for an empty namespace or
/// statement, no statement or more than `SNAPLOCK_TX_STATEMENTS_MAX`
/// (refused before anything is sent); `SNAPLOCK_RESULT_NO_REPLY`,
/// `SNAPLOCK_RESULT_CLOSED`, `SNAPLOCK_RESULT_IO`,
/// `SNAPLOCK_RESULT_PROTOCOL`.
///
/// # Safety
///
/// `conn` is NULL or a live connection; `ns` NULL or a NUL-terminated
/// string; `statements` NULL or readable for `count` pointers, each NULL
/// or a NUL-terminated string; `opts` NULL or readable; `result_out` NULL
/// or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn snaplock_transaction(
    conn: *mut snaplock_conn,
    ns: *const c_char,
    statements: *const *const c_char,
    count: usize,
    opts: *const snaplock_tx_options,
    result_out: *mut snaplock_tx_result,
) -> snaplock_result {
    ffi_boundary! {
        // SAFETY: NULL or a live connection, used by this thread only.
        let Some(conn) = (unsafe { conn.as_mut() }) else {
            return snaplock_result::NullParameter;
        };
        if ns.is_null() {
            return conn.null("ns");
        }
        if result_out.is_null() {
            return conn.null("result_out");
        }
        if count > 0 && statements.is_null() {
            return conn.null("statements");
        }
        // SAFETY: not NULL, so a NUL-terminated string (the caller's promise).
        let ns = unsafe { CStr::from_ptr(ns) }.to_bytes();
        if ns.is_empty() {
            return conn.fail_with(snaplock_result::InvalidParameter, "the namespace is empty");
        }
        if count == 0 {
            return conn.fail_with(
                snaplock_result::InvalidParameter,
                "a transaction needs at least one statement",
            );
        }
        if count > SNAPLOCK_TX_STATEMENTS_MAX {
            return conn.fail_with(
                snaplock_result::InvalidParameter,
                format!(
                    "a transaction has at most {SNAPLOCK_TX_STATEMENTS_MAX} statements, not {count}"
                ),
            );
        }
        let mut texts: Vec<&[u8]> = Vec::with_capacity(count);
        for i in 0..count {
            // SAFETY: `statements` is readable for `count` pointers (the
            // caller's promise) and `i < count`.
            let s = unsafe { statements.add(i).read() };
            if s.is_null() {
                return conn.null(&format!("statements[{i}]"));
            }
            // SAFETY: not NULL, so a NUL-terminated string (the caller's promise).
            let text = unsafe { CStr::from_ptr(s) }.to_bytes();
            if text.is_empty() {
                return conn.fail_with(
                    snaplock_result::InvalidParameter,
                    format!("statements[{i}] is empty"),
                );
            }
            texts.push(text);
        }
        // SAFETY: NULL or a readable options struct (the caller's promise);
        // it is copied at once.
        let opts = unsafe { opts.as_ref() }.copied().unwrap_or_default();
        let tag = conn.client.new_tag();
        let timeout = conn.client.reply_timeout();
        let reply = match conn
            .client
            .request(&message(ns, &texts, &opts, tag), timeout)
        {
            Ok(reply) => reply,
            Err(e) => return conn.fail(e),
        };
        if tag_of(&reply) != Some(tag) {
            // An untagged INVALID or UNKNOWN: an agent that does not know
            // transactions, or a line it could not read.
            let text = reply.to_string();
            return conn.fail_with(
                snaplock_result::Protocol,
                format!("unexpected reply: {}", text.trim_end()),
            );
        }
        match outcome(&reply, count) {
            Ok((out, why)) => {
                // SAFETY: not NULL and writable (the caller's promise).
                unsafe { result_out.write(out) };
                if out.error == snaplock_result::Ok {
                    snaplock_result::Ok
                } else {
                    conn.fail_with(out.error, why)
                }
            }
            Err(why) => conn.fail_with(snaplock_result::Protocol, why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use snaplock_client::wire::{encode_to_vec, parse};

    #[test]
    fn decimals_are_written_as_the_protocol_reads_them() {
        assert_eq!(decimal(2000, 1000, 3), "2");
        assert_eq!(decimal(1500, 1000, 3), "1.5");
        assert_eq!(decimal(1, 1000, 3), "0.001");
        assert_eq!(decimal(950_000, 1_000_000, 6), "0.95");
        assert_eq!(decimal(1_000_000, 1_000_000, 6), "1");
    }

    #[test]
    fn the_message_has_every_statement_in_order_and_only_the_options_given() {
        let stmts: [&[u8]; 2] = [b"assert not exists A;B", b"set C dup"];
        let msg = message(b"Clinical", &stmts, &snaplock_tx_options::default(), 4);
        assert_eq!(
            encode_to_vec(&msg),
            b"TRANSACTION namespace=Clinical;s1=\"assert not exists A;B\";s2=set C dup;tag=4\n"
        );
        let opts = snaplock_tx_options {
            duration_ms: 2500,
            pid: 9,
            min_uptime_ms: 3000,
            min_trust_ppm: 500_000,
        };
        let msg = message(b"n", &stmts[1..], &opts, 5);
        assert_eq!(
            encode_to_vec(&msg),
            b"TRANSACTION duration=2.5;min_trust=0.5;min_uptime=3;namespace=n;pid=9;\
              s1=set C dup;tag=5\n"
        );
    }

    #[test]
    fn a_commit_gives_its_fence_and_values() {
        let reply = parse(b"TRANSACTIONOK fence=12;namespace=n;results=1,0,1;tag=3").unwrap();
        let (out, _) = outcome(&reply, 3).expect("fits");
        assert_eq!(
            (out.error, out.fence, out.count),
            (snaplock_result::Ok, 12, 3)
        );
        assert_eq!(&out.results[..4], &[true, false, true, false]);
        assert_eq!(out.failed, 0);
    }

    #[test]
    fn results_that_do_not_fit_or_a_missing_fence_are_protocol_errors() {
        for line in [
            &b"TRANSACTIONOK fence=12;namespace=n;results=1,0;tag=3"[..],
            b"TRANSACTIONOK fence=12;namespace=n;results=1,0,1,1;tag=3",
            b"TRANSACTIONOK fence=12;namespace=n;results=1,2,1;tag=3",
            b"TRANSACTIONOK namespace=n;results=1,0,1;tag=3",
            b"LOCKED fence=1;tag=3",
        ] {
            assert!(outcome(&parse(line).unwrap(), 3).is_err(), "{line:?}");
        }
        let all: Vec<&str> = vec!["1"; 33];
        let line = format!("TRANSACTIONOK fence=1;results={};tag=3", all.join(","));
        assert!(outcome(&parse(line.as_bytes()).unwrap(), 32).is_err());
    }

    #[test]
    fn a_failure_gives_the_statement_and_its_result_code() {
        for (word, want) in [
            ("failed", snaplock_result::TxFailed),
            ("invalid", snaplock_result::InvalidParameter),
            ("overflow", snaplock_result::Overflow),
            ("unavailable", snaplock_result::Unavailable),
            ("untrusted", snaplock_result::Untrusted),
            ("denied", snaplock_result::Denied),
            ("something-new", snaplock_result::Refused),
        ] {
            let line = format!(
                "TRANSACTIONFAILED description=s2 is false;error={word};failed=2;namespace=n;tag=3"
            );
            let (out, why) = outcome(&parse(line.as_bytes()).unwrap(), 3).expect("read");
            assert_eq!(
                (out.error, out.failed, out.fence, out.count),
                (want, 2, 0, 0)
            );
            assert!(why.contains(word) && why.contains("s2 is false"), "{why}");
        }
    }
}
