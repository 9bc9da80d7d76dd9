//! The replies of snaplock(7), REQUESTS, built in one place.

use crate::time::UnixTime;
use crate::wire::Message;

use crate::vocab::Refusal;

/// Longest excerpt of a bad line quoted back in `INVALID message=`.
pub const MAX_ECHO: usize = 256;

fn about(command: &str, object: &[u8], tag: Option<i64>) -> Message {
    let mut msg = Message::new(command).with("object_name", object);
    if let Some(tag) = tag {
        msg.set_i64("tag", tag);
    }
    msg
}

/// `LOCKED object_name=O;key=K;timeout_date=T;fence=F[;tag=G]`.
pub fn locked(
    object: &[u8],
    key: &str,
    timeout_date: UnixTime,
    fence: u64,
    tag: Option<i64>,
) -> Message {
    let mut msg = about("LOCKED", object, tag);
    msg.set("key", key);
    msg.set_owned("timeout_date", timeout_date.to_wire().into_bytes());
    msg.set_u64("fence", fence);
    msg
}

/// `LOCKFAILED object_name=O;error=E;description=...[;key=K][;tag=G]`.
pub fn lock_failed(object: &[u8], key: Option<&str>, tag: Option<i64>, why: &Refusal) -> Message {
    let mut msg = about("LOCKFAILED", object, tag);
    msg.set("error", why.error);
    msg.set("description", &why.description);
    if let Some(key) = key {
        msg.set("key", key);
    }
    msg
}

/// `UNLOCKED object_name=O[;error=E][;tag=G]`.
pub fn unlocked(object: &[u8], tag: Option<i64>, error: Option<&str>) -> Message {
    let mut msg = about("UNLOCKED", object, tag);
    if let Some(error) = error {
        msg.set("error", error);
    }
    msg
}

/// `INVALID [command=C;]message=<the line, cut>;reason=R`.
pub fn invalid(command: Option<&str>, line: &[u8], reason: &str) -> Message {
    let mut msg = Message::new("INVALID");
    if let Some(command) = command {
        msg.set("command", command);
    }
    msg.set("message", &line[..line.len().min(MAX_ECHO)]);
    msg.set("reason", reason);
    msg
}

/// `TRANSACTIONOK namespace=NS;fence=F;results=1,0,...[;tag=G]`.
pub fn transaction_ok(namespace: &[u8], fence: u64, results: &[bool], tag: Option<i64>) -> Message {
    let mut msg = Message::new("TRANSACTIONOK").with("namespace", namespace);
    msg.set_u64("fence", fence);
    let results: Vec<&str> = results.iter().map(|&r| if r { "1" } else { "0" }).collect();
    msg.set("results", results.join(","));
    if let Some(tag) = tag {
        msg.set_i64("tag", tag);
    }
    msg
}

/// `TRANSACTIONFAILED namespace=NS;failed=N;error=E;description=TEXT[;tag=G]`.
pub fn transaction_failed(
    namespace: &[u8],
    tag: Option<i64>,
    why: &crate::local::tx::TxRefusal,
) -> Message {
    let mut msg = Message::new("TRANSACTIONFAILED").with("namespace", namespace);
    msg.set_u64("failed", why.statement as u64);
    msg.set("error", why.error.as_str());
    msg.set("description", &why.description);
    if let Some(tag) = tag {
        msg.set_i64("tag", tag);
    }
    msg
}
